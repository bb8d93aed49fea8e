//! Isolation (design section 18): a tool that overflows the stack, allocates without bound, loops
//! or runs a long builtin ends its call with `crashed` or `timeout` within the deadline plus the
//! grace, and the next call works on a fresh worker. And a load test: 10,000 calls through one
//! handle, every result right, the worker's memory flat.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use toolhost::worker::{WorkerHandle, WorkerSpec};

const TOOLS: &str = r#"
(define-tool (deep) "Hashes a value nested a million deep (the hash recurses: stack overflow)."
  (let loop ((i 0) (v '()))
    (if (= i 1000000) (begin (hash-insert (hash) v 1) "hashed") (loop (+ i 1) (list v)))))
(define-tool (huge) "Asks for a vector of a hundred billion slots."
  (vector-length (make-vector 100000000000 0)))
(define-tool (spin) "Loops forever." (let loop () (loop)))
(define-tool (echo (x string "X")) "Gives x back." x)
(define-tool (nest (n integer "Depth")) "A list nested n deep."
  (let loop ((i 0) (v 1)) (if (= i n) v (loop (+ i 1) (list v)))))
(define-tool (nap) "Runs a long command from Scheme." (shell-exec "sleep 41.25"))
"#;

/// A worker on a workspace of `dir`, loading the test tools from `tools`, with a 2 s deadline and
/// a home of its own (the real user's config is never read).
fn worker(dir: &Path, tools: &Path, home: &Path) -> WorkerHandle {
    worker_within(dir, tools, home, Duration::from_secs(2))
}

/// The spec of a worker on a workspace of `dir`, loading the test tools from `tools`, with 2 GiB of
/// address space, a 1 s grace and a home of its own.
fn spec(dir: &Path, tools: &Path, home: &Path) -> WorkerSpec {
    let args = ["--root", &dir.display().to_string(), "--tools", &tools.display().to_string(), "worker"];
    let mut spec = WorkerSpec::new(env!("CARGO_BIN_EXE_toolhost"), args.iter().map(|s| s.to_string()).collect());
    spec.grace = Duration::from_secs(1);
    spec.memory_bytes = 2 << 30;
    spec.env = vec![
        ("HOME".into(), home.display().to_string()),
        ("XDG_CONFIG_HOME".into(), home.join("xdg-config").display().to_string()),
    ];
    spec
}

/// [`worker`] with a deadline of `deadline` per call.
fn worker_within(dir: &Path, tools: &Path, home: &Path, deadline: Duration) -> WorkerHandle {
    let mut spec = spec(dir, tools, home);
    spec.call_deadline = deadline;
    let handle = WorkerHandle::spawn(spec).expect("worker starts");
    assert!(handle.load_errors().is_empty(), "{:?}", handle.load_errors());
    handle
}

fn kind(record: &toolhost::CallRecord) -> String {
    match &record.result {
        Ok(v) => format!("ok: {v}"),
        Err(e) => e.kind().as_str().to_string(),
    }
}

/// Resident memory of process `pid` in KiB, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn crashes_and_hangs_end_the_call_and_the_next_call_works() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    let mut worker = worker(dir.path(), tools.path(), home.path());
    for (tool, expected) in [("deep", "crashed"), ("huge", "crashed"), ("spin", "timeout"), ("nap", "timeout")] {
        let first = worker.worker_pid();
        let started = Instant::now();
        let record = worker.call(tool, "{}");
        let took = started.elapsed();
        assert_eq!(kind(&record), expected, "{tool}: {:?}", record.result);
        // Deadline 2 s + grace 1 s, and generous room for a loaded machine.
        assert!(took < Duration::from_secs(20), "{tool} took {took:?}");
        let next = worker.call("echo", r#"{"x":"alive"}"#);
        assert_eq!(next.result.as_ref().ok(), Some(&Value::String("alive".into())), "after {tool}");
        assert_ne!(worker.worker_pid(), first, "{tool}: a fresh worker took over");
    }
    // The nested shell-exec's command did not outlive its call.
    eventually("the nested command to be gone", || processes_with_arg("41.25").is_empty());
}

#[test]
fn a_program_that_allocates_without_bound_or_runs_away_ends_and_the_next_program_works() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    let mut spec = spec(dir.path(), tools.path(), home.path());
    spec.program_deadline = Duration::from_secs(2);
    let mut worker = WorkerHandle::spawn(spec).expect("worker starts");
    let program = |code: &str| serde_json::json!({ "code": code }).to_string();
    for (code, expected) in [
        // A hundred billion slots: 1.6 TB asked of a 2 GiB address space.
        ("(vector-length (make-vector 100000000000 0))", "crashed"),
        // Doubling a list without end: memory runs out, or the deadline passes first.
        ("(let grow ([l (list 1)]) (grow (append l l)))", "crashed|timeout"),
        ("(let loop () (loop))", "timeout"),
        // The deadline (2 s here) is the program's own, not the 30 s of one Scheme tool call.
        ("(spin)", "timeout"),
    ] {
        let started = Instant::now();
        let record = worker.call("scheme", &program(code));
        let took = started.elapsed();
        assert!(expected.split('|').any(|e| e == kind(&record)), "{code}: {:?}", record.result);
        assert!(took < Duration::from_secs(20), "{code} took {took:?}");
        let next = worker.call("scheme", &program("(+ 1 2)"));
        assert_eq!(next.result.as_ref().ok(), Some(&Value::String("3".into())), "after {code}");
    }
}

#[test]
fn ten_thousand_calls_through_one_handle_are_all_right_and_memory_stays_flat() {
    let dir = workspace(&[("sub/b.txt", "b\n")]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    let mut worker = worker(dir.path(), tools.path(), home.path());
    let mut rss = Vec::new();
    for i in 0..10_000u32 {
        let (tool, args, expected): (&str, String, &str) = match i % 10 {
            _ if i == 1_000 => ("deep", "{}".into(), "crashed"),
            _ if i == 2_000 => ("spin", "{}".into(), "timeout"),
            0 => (
                "fs-read",
                r#"{"path":"a.txt","start":5,"count":1}"#.into(),
                "ok: \"5\\tline 5\\n... 295 more lines; next start 6\\n\"",
            ),
            1 => ("fs-read", r#"{"path":"../etc/passwd"}"#.into(), "denied"),
            2 => ("fs-read", r#"{"path":"a.txt","limit":2}"#.into(), "unknown_argument"),
            3 => ("echo", format!(r#"{{"x":"n{i}"}}"#), ""),
            4 => ("nope", "{}".into(), "unknown_tool"),
            5 => ("fs-read", "{not json".into(), "bad_arguments"),
            6 => ("fs-list", r#"{"path":"sub"}"#.into(), "ok: \"b.txt\\n\""),
            7 => ("echo", r#"{"x":1,"x":2}"#.into(), "bad_arguments"),
            8 => ("index-grep", r#"{"pattern":"^b$"}"#.into(), "ok: \"sub/b.txt:1:b\\n\""),
            _ => ("echo", "{}".into(), "missing_argument"),
        };
        let record = worker.call(tool, &args);
        let got = kind(&record);
        if expected.is_empty() {
            assert_eq!(got, format!("ok: \"n{i}\""), "call {i}");
        } else {
            assert_eq!(got, expected, "call {i}: {tool} {args}: {:?}", record.result);
        }
        if i >= 2_500 && i % 2_500 == 0 || i == 9_999 {
            rss.push((i, rss_kib(worker.worker_pid().unwrap())));
        }
    }
    eprintln!("worker RSS (call, KiB): {rss:?}; workers started: {}", worker.workers_started());
    assert_eq!(worker.workers_started(), 3, "one start, one after the crash, one after the timeout");
    let (first, last) = (rss[0].1, rss[rss.len() - 1].1);
    assert!(last <= first + first / 4 + 8 * 1024, "the worker's memory grew from {first} KiB to {last} KiB");
}

#[test]
fn toolhost_call_answers_crashed_when_the_tool_kills_its_worker() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = Home::new();
    let tools_arg = tools.path().display().to_string();
    let out = home.run(dir.path(), &["--tools", &tools_arg, "call", "deep", "{}"], None);
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    assert_eq!(answer["error"]["kind"], "crashed", "{answer}");
    assert_eq!(out.status.code(), Some(1));
    // The person who ran it sees why the worker died.
    let printed = String::from_utf8_lossy(&out.stderr);
    assert!(printed.contains("has overflowed its stack"), "{printed}");
    let out = home.run(dir.path(), &["--tools", &tools_arg, "--no-isolate", "call", "echo", r#"{"x":"in"}"#], None);
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    assert_eq!(answer["result"], "in", "{answer}");
}

/// A worker on `dir` that runs `shell-exec` and the test tools, with `deadline` per call.
fn worker_with(
    dir: &Path,
    tools: &Path,
    home: &Path,
    program: &str,
    prefix: &[&str],
    deadline: Duration,
) -> WorkerHandle {
    let mut args: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    for arg in ["--root", &dir.display().to_string(), "--tools", &tools.display().to_string(), "worker"] {
        args.push(arg.to_string());
    }
    let mut spec = WorkerSpec::new(program, args);
    spec.call_deadline = deadline;
    spec.shell_deadline = deadline;
    spec.grace = Duration::from_secs(1);
    spec.env = vec![
        ("HOME".into(), home.display().to_string()),
        ("XDG_CONFIG_HOME".into(), home.join("xdg-config").display().to_string()),
    ];
    WorkerHandle::spawn(spec).expect("worker starts")
}

/// Regression (issue 17, hole 5): the worker's socket was inherited by every command, so a command
/// that wrote a reply to descriptor 3 made its own call return the forgery, and every later reply
/// answered the call before it.
#[test]
fn a_command_cannot_forge_its_calls_result_through_the_workers_socket() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_toolhost");
    let mut worker = worker_with(dir.path(), tools.path(), home.path(), bin, &[], Duration::from_secs(30));
    // A well-formed reply, as the worker would write it, claiming the call said "forged".
    let forged = worker.call("echo", r#"{"x":"forged"}"#);
    let line = serde_json::to_string(&toolhost::handle::Reply::Call(Box::new(forged))).unwrap();
    write(dir.path(), "forged.json", &format!("{line}\n"));

    let record = worker.call("shell-exec", r#"{"cmd": "cat forged.json >&3 2>/dev/null; echo real"}"#);
    let text = record.result.as_ref().ok().and_then(Value::as_str).unwrap_or_default().to_string();
    assert!(text.contains("--- stdout ---\nreal\n"), "the call's own result: {:?}", record.result);
    // And the replies stay in step.
    let next = worker.call("echo", r#"{"x":"next"}"#);
    assert_eq!(next.result.as_ref().ok(), Some(&Value::String("next".into())));
}

/// Regression (issue 17, hole 5): a command sees its standard streams and nothing else of
/// toolhost's, in a worker and in process.
#[test]
fn commands_inherit_no_descriptor_but_their_standard_streams() {
    let dir = workspace(&[]);
    let home = Home::new();
    for flags in [&[][..], &["--no-isolate"][..]] {
        let mut args = flags.to_vec();
        args.extend(["call", "shell-exec", r#"{"cmd": "ls /proc/$$/fd"}"#]);
        let out = home.run(dir.path(), &args, None);
        let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
        assert_eq!(answer["result"], "exit code: 0\n--- stdout ---\n0\n1\n2\n--- stderr ---\n", "{flags:?}");
    }
}

/// Regression (issue 17, hole 5): a process that kept the worker's end of the socket open hid the
/// worker's death, so the call waited for its deadline and reported `timeout`. The worker is
/// watched itself: its death ends the call with `crashed` at once.
#[test]
fn a_workers_death_is_seen_at_once_even_if_another_process_holds_its_socket() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_toolhost");
    // The worker starts through sh, which leaves a process holding descriptor 3 behind.
    let prefix = ["-c", "sleep 300.5 & exec \"$0\" \"$@\"", bin];
    let deadline = Duration::from_secs(30);
    let mut worker = worker_with(dir.path(), tools.path(), home.path(), "sh", &prefix, deadline);
    let started = Instant::now();
    let record = worker.call("deep", "{}");
    let took = started.elapsed();
    for pid in processes_with_arg("300.5") {
        // SAFETY: a signal to the sleep this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    assert_eq!(kind(&record), "crashed", "{:?}", record.result);
    assert!(took < deadline / 2, "the crash was seen only after {took:?}");
}

/// The crashing half of [`crashing_workers_print_nothing_past_the_test_harness`], which runs it
/// in a test process of its own to see what reaches that process's standard error: a crashed call
/// quotes what the worker printed as it died, and that is all it does with it.
#[test]
#[ignore = "run by crashing_workers_print_nothing_past_the_test_harness"]
fn crashed_calls_quote_what_the_worker_printed_as_it_died() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    // A deadline no loaded machine reaches: these calls must crash, not time out.
    let mut worker = worker_within(dir.path(), tools.path(), home.path(), Duration::from_secs(60));
    for (tool, reason) in [("deep", "has overflowed its stack"), ("huge", "memory allocation of")] {
        let record = worker.call(tool, "{}");
        assert_eq!(kind(&record), "crashed", "{tool}");
        let message = record.result.as_ref().map_err(|e| e.message().to_string()).unwrap_err();
        assert!(message.contains(reason), "{tool}: {message}");
        assert!(!message.contains("stack backtrace"), "{tool}: {message}");
    }
}

#[test]
fn crashing_workers_print_nothing_past_the_test_harness() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "isolation::crashed_calls_quote_what_the_worker_printed_as_it_died", "--ignored"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{printed}");
    assert!(printed.contains("1 passed"), "the crashing test ran: {printed}");
    for reason in ["overflowed its stack", "memory allocation of"] {
        assert!(!printed.contains(reason), "a worker's crash got past the harness's capture: {printed}");
    }
}

/// Waits until one of `fds` is readable, at most `limit`; true when one is.
fn readable(fds: &[std::os::fd::BorrowedFd<'_>], limit: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut polled: Vec<PollFd<'_>> = fds.iter().map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::IN)).collect();
    let timeout = Timespec::try_from(limit).unwrap();
    poll(&mut polled, Some(&timeout)).unwrap() > 0
}

/// The calls that never began of those behind one a worker did not answer; panics on one that began.
fn unrun_calls(behind: Vec<toolhost::handle::Behind>) -> Vec<toolhost::CallRequest> {
    use toolhost::handle::Behind;
    behind
        .into_iter()
        .map(|became| match became {
            Behind::Unrun(call) => call,
            Behind::Ran(record) => panic!("a call behind began: {}", record.model_text()),
        })
        .collect()
}

/// A handle over a worker of the test tools, with the folders it uses (kept while it runs).
fn handle_over_worker() -> ([tempfile::TempDir; 3], toolhost::HostHandle) {
    handle_over_worker_within(Duration::from_secs(30))
}

/// [`handle_over_worker`] with a deadline of `deadline` per call.
fn handle_over_worker_within(deadline: Duration) -> ([tempfile::TempDir; 3], toolhost::HostHandle) {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "t.scm", TOOLS);
    let home = tempfile::tempdir().unwrap();
    let mut spec = spec(dir.path(), tools.path(), home.path());
    spec.call_deadline = deadline;
    let handle = toolhost::HostHandle::spawn_worker(spec).expect("worker starts");
    ([dir, tools, home], handle)
}

#[test]
fn calls_sent_without_waiting_hold_the_worker_until_their_replies_are_read_in_order_and_ones_given_up_end_it() {
    use toolhost::CallRequest;
    let (_dirs, handle) = handle_over_worker();

    let mut calls = handle.try_lend_worker().expect("an idle worker is lent at once");
    for x in ["first", "second"] {
        calls.send(CallRequest::new("echo", format!(r#"{{"x": "{x}"}}"#))).expect("sent");
    }
    // A call sent as one of a tight loop's is answered the same (the worker then looks for the next
    // a moment before it sleeps).
    calls.send_expecting_more(CallRequest::new("echo", r#"{"x": "third"}"#)).expect("sent");
    assert_eq!(calls.len(), 3);
    // While it is lent, the worker takes nothing else: it is not lent twice, and another thread's
    // request waits for it to be given back.
    assert!(handle.try_lend_worker().is_none());
    let other = handle.clone();
    let waiting = std::thread::spawn(move || other.call("echo", r#"{"x": "fourth"}"#));
    assert!(readable(&calls.wake_fds(), Duration::from_secs(20)), "a reply wakes a wait on the worker");
    assert!(calls.reply_ready());
    let texts: Vec<String> = (0..3).map(|_| calls.finish_next().expect("a call is out").model_text()).collect();
    assert_eq!(texts, ["first", "second", "third"], "the replies come in the order the calls were sent");
    assert!(calls.finish_next().is_none());
    common::eventually("the other thread's request to wait for the worker", || calls.others_waiting());
    drop(calls);
    assert_eq!(waiting.join().unwrap().model_text(), "fourth");

    // Calls given up unfinished end their worker; the next call runs in a fresh one.
    let before = handle.worker_pid();
    let mut calls = handle.try_lend_worker().expect("lent");
    calls.send(CallRequest::new("spin", "{}")).expect("sent");
    drop(calls);
    let record = handle.call("echo", r#"{"x": "after"}"#);
    assert_eq!(record.model_text(), "after");
    assert_ne!(handle.worker_pid(), before, "a fresh worker took the next call");
    assert!(before.is_some_and(common::is_gone), "the worker of the call given up was ended");
}

#[test]
fn a_cancellation_stops_the_call_it_names_and_no_other() {
    use toolhost::CallRequest;
    let (_dirs, handle) = handle_over_worker();
    let worker = handle.worker_pid();

    let mut calls = handle.try_lend_worker().expect("lent");
    let spin = calls.send(CallRequest::new("spin", "{}")).expect("sent");
    let skipped = calls.send(CallRequest::new("echo", r#"{"x": "skipped"}"#)).expect("sent");
    let kept = calls.send(CallRequest::new("echo", r#"{"x": "kept"}"#)).expect("sent");
    assert!(spin < skipped && skipped < kept, "calls are numbered in the order sent");
    let canceller = calls.canceller().expect("a worker runs");
    // The call behind the spinning one is cancelled before it begins; the spinning one is stopped
    // (asked again until it has, as a stop that comes before its code began is forgotten).
    canceller.cancel(skipped);
    let started = std::time::Instant::now();
    while !readable(&calls.wake_fds(), Duration::from_millis(100)) {
        canceller.cancel(spin);
        assert!(started.elapsed() < Duration::from_secs(20), "the spinning call was not stopped");
    }
    let stopped = calls.finish_next().expect("out");
    assert!(stopped.result.is_err(), "the spinning call was stopped: {}", stopped.model_text());
    assert!(started.elapsed() < Duration::from_secs(10), "stopped long before its 30 s deadline");
    let not_run = calls.finish_next().expect("out");
    assert!(not_run.model_text().contains("cancelled before it began"), "{}", not_run.model_text());
    assert_eq!(calls.finish_next().expect("out").model_text(), "kept", "the call after them ran as sent");
    // A cancellation of a call already answered stops nothing later.
    calls.send(CallRequest::new("echo", r#"{"x": "later"}"#)).expect("sent");
    canceller.cancel(kept);
    assert_eq!(calls.finish_next().expect("out").model_text(), "later");
    drop(calls);
    assert_eq!(handle.worker_pid(), worker, "the same worker ran them all");
}

#[test]
fn calls_sent_behind_one_that_crashes_its_worker_never_began_and_are_given_back_to_send_again() {
    use toolhost::{CallRequest, ErrorKind};
    let (_dirs, handle) = handle_over_worker();

    let mut calls = handle.try_lend_worker().expect("lent");
    calls.send(CallRequest::new("deep", "{}")).expect("sent");
    calls.send(CallRequest::new("echo", r#"{"x": "behind"}"#)).expect("sent");
    let crashed = calls.finish_next().expect("out");
    assert_eq!(crashed.result.as_ref().err().map(|e| e.kind()), Some(ErrorKind::Crashed), "{}", crashed.model_text());
    assert!(!calls.worker_runs());
    let unrun = unrun_calls(calls.take_behind());
    assert_eq!(unrun.len(), 1, "the call behind it never began");
    assert_eq!(unrun[0].arguments, r#"{"x": "behind"}"#);
    // Sent again, the call runs in a fresh worker.
    calls.start_worker().expect("a fresh worker starts");
    calls.send(unrun.into_iter().next().unwrap()).expect("sent");
    assert_eq!(calls.finish_next().expect("out").model_text(), "behind");
}

#[test]
fn calls_sent_behind_one_that_overruns_never_begin_and_run_once_in_a_fresh_worker() {
    use toolhost::{CallRequest, ErrorKind};
    let (dirs, handle) = handle_over_worker_within(Duration::from_secs(1));
    let (written, ran) = (dirs[0].path().join("written.txt"), dirs[0].path().join("ran.txt"));
    let mut calls = handle.try_lend_worker().expect("lent");
    calls.send(CallRequest::new("spin", "{}")).expect("sent");
    // A call that would be done within microseconds of beginning, then one that appends.
    calls.send(CallRequest::new("fs-write", r#"{"path": "written.txt", "content": "x"}"#)).expect("sent");
    calls.send(CallRequest::new("shell-exec", r#"{"cmd": "echo ran >> ran.txt"}"#)).expect("sent");
    let overran = calls.finish_next().expect("out");
    assert_eq!(overran.result.as_ref().err().map(|e| e.kind()), Some(ErrorKind::Timeout), "{}", overran.model_text());
    let unrun = unrun_calls(calls.take_behind());
    assert_eq!(unrun.len(), 2, "the calls behind it are given back, never begun");
    assert!(
        !written.exists() && !ran.exists(),
        "a call behind the one that overran began before its worker was killed"
    );
    calls.start_worker().expect("a fresh worker starts");
    for call in unrun {
        calls.send(call).expect("sent");
    }
    for _ in 0..2 {
        let record = calls.finish_next().expect("out");
        assert!(record.result.is_ok(), "{}", record.model_text());
    }
    assert!(written.exists());
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "it ran once");
}

#[test]
fn a_call_the_dead_worker_cannot_take_comes_back_and_the_replies_it_gave_before_dying_are_kept() {
    use toolhost::{CallRequest, ErrorKind};
    let (_dirs, handle) = handle_over_worker();
    let worker = handle.worker_pid().expect("a worker runs");
    let mut calls = handle.try_lend_worker().expect("lent");
    calls.send(CallRequest::new("echo", r#"{"x": "answered"}"#)).expect("sent");
    calls.send(CallRequest::new("deep", "{}")).expect("sent");
    // Its pidfd (the second descriptor to wait on) is readable once all of it has exited: its
    // socket is closed by then (its first thread may show as a zombie before).
    assert!(calls.wake_fds().len() == 2, "the kernel has pidfds");
    assert!(readable(&calls.wake_fds()[1..], Duration::from_secs(20)), "the worker died");
    assert!(common::is_gone(worker));
    // The worker is gone before its death was read: a call sent now comes back unsent.
    let back = calls.send(CallRequest::new("echo", r#"{"x": "later"}"#)).expect_err("a dead worker takes nothing");
    assert_eq!(calls.finish_next().expect("out").model_text(), "answered", "the reply it gave is kept");
    let crashed = calls.finish_next().expect("out");
    assert_eq!(crashed.result.as_ref().err().map(|e| e.kind()), Some(ErrorKind::Crashed), "{}", crashed.model_text());
    assert!(calls.take_behind().is_empty());
    calls.start_worker().expect("a fresh worker starts");
    calls.send(back).expect("sent");
    assert_eq!(calls.finish_next().expect("out").model_text(), "later");
}

#[test]
fn a_result_nested_as_deeply_as_values_may_comes_back_from_the_worker() {
    use toolhost::ErrorKind;
    let (_dirs, handle) = handle_over_worker();
    let worker = handle.worker_pid();
    let deepest = handle.call("nest", r#"{"n": 128}"#);
    let value = deepest.result.as_ref().expect("a result 128 levels deep comes back");
    let levels = std::iter::successors(Some(value), |v| v.as_array().and_then(|items| items.first())).count();
    assert_eq!(levels, 129, "128 lists around the number");
    let deeper = handle.call("nest", r#"{"n": 129}"#);
    assert_eq!(deeper.result.as_ref().err().map(|e| e.kind()), Some(ErrorKind::ToolFailed), "{}", deeper.model_text());
    assert_eq!(handle.worker_pid(), worker, "neither ended the worker");
}
