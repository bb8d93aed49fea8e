//! Parallel calls (issue 21, item 9): the read-only calls of one reply run side by side on the
//! host's lanes, their results go back in the calls' order, and calls that write or may ask run
//! one at a time, in order. Concurrency is shown without timing: two read-only tools each wait for
//! the other's mark (a bounded poll), so both can meet only if they ran at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolhost::agent::{Message, ModelReply, ModelRequest, Session, ToolCall};
use toolhost::guard::{always_yes, Action, Guard, Rule};
use toolhost::{HostBuilder, HostHandle, Tool, ToolCtx};

/// Leaves the mark `mine`, then waits up to `wait_ms` for the mark `theirs`: `met` and what
/// `log.txt` held, or `alone` when the other never came.
fn meet(ctx: &ToolCtx, mine: String, theirs: String, wait_ms: i64) -> String {
    let root = ctx.workspace.root();
    let _ = std::fs::write(root.join(&mine), "here");
    let deadline = Instant::now() + Duration::from_millis(wait_ms.max(0) as u64);
    while !root.join(&theirs).exists() {
        if Instant::now() > deadline {
            return "alone".into();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    format!("met after {:?}", std::fs::read_to_string(root.join("log.txt")).unwrap_or_default())
}

/// Appends `text` to log.txt and returns what it holds: a call that writes.
fn append(ctx: &ToolCtx, text: String) -> String {
    let path = ctx.workspace.root().join("log.txt");
    let mut now = std::fs::read_to_string(&path).unwrap_or_default();
    now.push_str(&text);
    let _ = std::fs::write(&path, &now);
    now
}

fn builder(root: &Path, guard: Option<Guard>) -> HostBuilder {
    let meet = Tool::new("meet", "Meet another call.")
        .param("mine", "My mark")
        .param("theirs", "Their mark")
        .param("wait_ms", "How long to wait")
        .read_only()
        .build(meet)
        .unwrap();
    let append = Tool::new("log-append", "Append to log.txt.").param("text", "Text").build(append).unwrap();
    let mut builder = HostBuilder::new(root).shipped_tools(false).project_tools(false).tool(meet).tool(append);
    if let Some(guard) = guard {
        builder = builder.guard(guard).confirmer(always_yes("test"));
    }
    builder
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

/// Runs one session whose model makes, in one reply: append x, two meets, append y; returns the
/// results by call id, in the order they went back.
fn session(
    root: PathBuf,
    wait_ms: u64,
    guard: impl Fn() -> Option<Guard> + Send + Sync + 'static,
) -> Vec<(String, String)> {
    let lane_root = root.clone();
    let lanes_guard = std::sync::Arc::new(guard);
    let first_guard = lanes_guard.clone();
    let handle = HostHandle::spawn(builder(&root, first_guard()))
        .unwrap()
        .with_lanes(4, move || HostHandle::spawn(builder(&lane_root, lanes_guard())));
    let meet_a = format!(r#"{{"mine":"a","theirs":"b","wait_ms":{wait_ms}}}"#);
    let meet_b = format!(r#"{{"mine":"b","theirs":"a","wait_ms":{wait_ms}}}"#);
    let calls = vec![
        call("w1", "log-append", r#"{"text":"x"}"#),
        call("m1", "meet", &meet_a),
        call("m2", "meet", &meet_b),
        call("w2", "log-append", r#"{"text":"y"}"#),
    ];
    let mut model = move |request: &ModelRequest<'_>| -> toolhost::Result<ModelReply> {
        Ok(match request.messages.last() {
            Some(Message::Tool { .. }) => ModelReply::text("done"),
            _ => ModelReply::calls(calls.clone()),
        })
    };
    let outcome = Session::new(handle, &mut model).run("Meet.").unwrap();
    outcome
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn read_only_calls_of_one_reply_run_at_once_between_the_writes_around_them() {
    let dir = tempfile::tempdir().unwrap();
    // Generous: the poll ends as soon as the other mark is there; a sequential run waits it out.
    let results = session(dir.path().to_path_buf(), 30_000, || None);
    let expected = [("w1", "x"), ("m1", "met after \"x\""), ("m2", "met after \"x\""), ("w2", "xy")];
    let expected: Vec<(String, String)> = expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(results, expected, "both meets ran together, after the first write and before the second");
}

#[test]
fn a_read_only_call_that_may_ask_runs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let guard = || Some(Guard::default().rule(Rule::new("meet", Action::Confirm).unwrap()));
    let results = session(dir.path().to_path_buf(), 300, guard);
    assert_eq!(results[1], ("m1".to_string(), "alone".to_string()), "{results:?}");
    assert_eq!(results[3], ("w2".to_string(), "xy".to_string()), "{results:?}");
}
