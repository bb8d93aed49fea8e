//! `HostHandle`: the host on its own thread, reached from many threads at once.

use crate::common;

use std::thread;

use common::*;
use serde_json::{json, Value};
use toolhost::handle::{Reply, Request};
use toolhost::schema::Format;
use toolhost::{CallRecord, HostBuilder, HostHandle};

#[test]
fn calls_from_several_threads_at_once_are_all_answered_correctly() {
    let dir = workspace(&[(
        ".toolhost/tools/add.scm",
        "(define-tool (add (a integer \"A\") (b integer \"B\")) \"Add.\" (+ a b))\n",
    )]);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    assert!(handle.load_errors().unwrap().is_empty());
    let workers: Vec<_> = (0..8)
        .map(|worker| {
            let handle = handle.clone();
            thread::spawn(move || {
                (0..25)
                    .map(|i| {
                        let n = worker * 100 + i;
                        let line = n % 300 + 1;
                        let read =
                            handle.call("fs-read", &json!({"path": "a.txt", "start": line, "count": 1}).to_string());
                        let add = handle.call("add", &json!({"a": n, "b": 1}).to_string());
                        let bad = handle.call("fs-read", r#"{"path": "a.txt", "limit": 1}"#);
                        (line, read, n, add, bad)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut answered = 0;
    for worker in workers {
        for (line, read, n, add, bad) in worker.join().unwrap() {
            assert!(ok_text(&read).starts_with(&format!("{line}\tline {line}\n")), "{}", ok_text(&read));
            assert_eq!(add.result.unwrap(), json!(n + 1));
            assert_eq!(err_of(&bad).0, "unknown_argument");
            answered += 3;
        }
    }
    assert_eq!(answered, 8 * 25 * 3);
}

#[test]
fn catalogues_specs_and_eval_come_back_over_the_handle() {
    let dir = workspace(&[]);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let openai = handle.catalogue(Format::OpenAi).unwrap();
    assert!(openai.as_array().unwrap().iter().any(|t| t["function"]["name"] == "fs-read"));
    let specs = handle.specs().unwrap();
    assert_eq!(specs.get("fs-read").unwrap().signature.render(), "(fs-read path [start] [count])");
    assert!(handle.pformat_catalogue().unwrap().contains("fs-read[0|<path>|1|<start>|2|<count>]"));
    assert_eq!(handle.eval("(+ 1 2)", None).unwrap(), "3");
    assert_eq!(handle.eval("(car '())", None).unwrap_err().kind().as_str(), "script_error");
}

#[test]
fn an_interrupt_stops_a_runaway_evaluation_and_the_host_goes_on() {
    let dir = workspace(&[]);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let stopper = handle.clone();
    let runaway = thread::spawn(move || stopper.eval("(define (spin n) (spin (+ n 1))) (spin 0)", None));
    // The interrupt is repeated until the evaluation has started and been stopped, so the test does
    // not depend on timing.
    while !runaway.is_finished() {
        handle.interrupt();
        thread::yield_now();
    }
    assert!(runaway.join().unwrap().is_err());
    assert_eq!(handle.eval("(+ 40 2)", None).unwrap(), "42");
}

#[test]
fn a_host_that_cannot_be_built_is_an_error_from_spawn() {
    let err = HostHandle::spawn(HostBuilder::new("/no/such/folder/anywhere")).err().unwrap();
    assert!(err.message().contains("/no/such/folder/anywhere"), "{err}");
}

#[test]
fn the_messages_are_data_that_cross_as_json() {
    let dir = workspace(&[]);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let request: Request = serde_json::from_value(
        json!({"request": "call", "tool": "fs-read", "arguments": "{\"path\": \"a.txt\", \"count\": 1}"}),
    )
    .unwrap();
    let Reply::Call(record) = handle.request(request).unwrap() else { panic!("a call's reply") };
    let wire = serde_json::to_value(&*record).unwrap();
    assert_eq!(wire["ok"], true);
    assert_eq!(wire["decision"], json!({"action": "allow"}));
    let back: CallRecord = serde_json::from_value(wire).unwrap();
    assert_eq!(back.result, record.result);
    let _: Value = back.to_record_json();
}

/// Calls handed to the host's thread without waiting run in the order handed over; one cancelled
/// by its number stops if it runs, is answered without running if it has not begun, and a
/// cancellation of a call already answered stops nothing later.
#[test]
fn calls_handed_over_are_cancelled_by_number_and_no_other() {
    let dir = workspace(&[(
        ".toolhost/tools/t.scm",
        "(define-tool (spin) \"Loops.\" (let loop () (loop)))\n(define-tool (echo (x string \"X\")) \"X.\" x)\n",
    )]);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    assert!(handle.load_errors().unwrap().is_empty());
    let (sender, records) = std::sync::mpsc::channel();
    let hand_over = |tool: &str, arguments: &str| {
        let sender = sender.clone();
        let call = toolhost::CallRequest::new(tool, arguments);
        handle.send_call_then(call, move |record| sender.send(record).unwrap()).expect("a host on a thread")
    };
    let spin = hand_over("spin", "{}");
    let skipped = hand_over("echo", r#"{"x": "skipped"}"#);
    let kept = hand_over("echo", r#"{"x": "kept"}"#);
    assert!(spin < skipped && skipped < kept, "numbered in the order handed over");
    handle.cancel_handed_over(skipped);
    let started = std::time::Instant::now();
    let stopped = loop {
        handle.cancel_handed_over(spin);
        if let Ok(record) = records.recv_timeout(std::time::Duration::from_millis(100)) {
            break record;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "the spinning call was not stopped");
    };
    assert!(stopped.result.is_err(), "the spinning call was stopped: {}", stopped.model_text());
    let not_run = records.recv().unwrap();
    assert!(not_run.model_text().contains("cancelled before it began"), "{}", not_run.model_text());
    assert_eq!(records.recv().unwrap().model_text(), "kept");
    let later = hand_over("echo", r#"{"x": "later"}"#);
    handle.cancel_handed_over(kept);
    assert!(later > kept);
    assert_eq!(records.recv().unwrap().model_text(), "later");
}
