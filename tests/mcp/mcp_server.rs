//! `toolhost mcp` against the official SDK's client (`Client` + `StdioClientTransport`, in
//! tests/fixtures/mcp/client-check.mjs): the tools it lists, calls through the host's call path,
//! errors as `isError` results, confirmations without a person, and a standard output that carries
//! nothing but the protocol.

use crate::common;

use serde_json::{json, Value};

use common::{cpu_ticks, peers, workspace, Home};

/// A Scheme tool that prints to standard output before it answers.
const NOISY_TOOL: &str = r#"(define-tool (noisy (word string "A word to shout"))
  "Print a line to standard output, then return the word with an exclamation mark."
  (displayln "noise from a script")
  (string-append word "!"))
"#;

struct Session {
    tools: Vec<Value>,
    results: Vec<Value>,
    errors: Vec<Value>,
    stderr: String,
}

impl Session {
    fn tool(&self, name: &str) -> &Value {
        self.tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} is listed"))
    }
}

/// Runs the SDK client against `toolhost ARGS mcp` in `dir`, making `calls`.
fn session(home: &Home, dir: &std::path::Path, args: &[&str], calls: &Value) -> Session {
    let script = peers::ensure().join("client-check.mjs");
    let mut command = std::process::Command::new("node");
    command.arg(script).arg(env!("CARGO_BIN_EXE_toolhost")).arg(calls.to_string()).args(args).current_dir(dir);
    home.environment(&mut command);
    let report = peers::client_report(&mut command);
    let list = |key: &str| report[key].as_array().cloned().unwrap_or_default();
    Session {
        tools: list("tools"),
        results: list("results"),
        errors: list("errors"),
        stderr: report["stderr"].as_str().unwrap_or_default().to_string(),
    }
}

/// The text of a result, and whether it is an error.
fn text_of(result: &Value) -> (String, bool) {
    assert!(result.get("thrown").is_none(), "the call was a protocol error, not a tool result: {result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("text content: {result}"));
    (text.to_string(), result["isError"] == true)
}

fn setup() -> (tempfile::TempDir, Home, String, String) {
    let dir = workspace(&[("tools/noisy.scm", NOISY_TOOL)]);
    let home = Home::new();
    let config = format!(
        "[[guard.rule]]\ntool = \"fs-write\"\naction = \"confirm\"\n\n{}",
        peers::stdio_entry("fixture", &peers::fixture_server(), &[], None)
    );
    std::fs::write(dir.path().join("server.toml"), config).unwrap();
    let tools = dir.path().join("tools").display().to_string();
    (dir, home, "server.toml".to_string(), tools)
}

#[test]
fn the_sdk_client_lists_every_tool_and_calls_them_through_the_call_path() {
    let (dir, home, config, tools) = setup();
    let calls = json!([
        {"name": "fs-read", "arguments": {"path": "a.txt", "count": 2}},
        {"name": "fs-read", "arguments": {"path": "a.txt", "start": "5", "count": "1"}},
        {"name": "fs-read", "arguments": {"path": "a.txt", "limit": 5}},
        {"name": "noisy", "arguments": {"word": "hi"}},
        {"name": "fs-write", "arguments": {"path": "b.txt", "content": "x"}},
        {"name": "fixture__args", "arguments": {"text": "via toolhost", "flag": false}},
        {"name": "no-such-tool", "arguments": {}},
    ]);
    let args = ["--config", &config, "--tools", &tools];
    let session = session(&home, dir.path(), &args, &calls);
    // Every message parsed, though a script printed to standard output.
    assert!(session.errors.is_empty(), "the client reported errors: {:?}", session.errors);
    assert!(session.stderr.contains("noise from a script"), "{}", session.stderr);

    // The listing is the one projection point's MCP shape, tool for tool.
    let mut command = home.command(dir.path(), &["--config", &config, "--tools", &tools, "tools", "--format", "mcp"]);
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let catalogue: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(session.tools.len(), catalogue.len());
    for expected in &catalogue {
        let listed = session.tool(expected["name"].as_str().unwrap());
        for key in ["description", "inputSchema", "annotations"] {
            assert_eq!(listed[key], expected[key], "{key} of {}", expected["name"]);
        }
    }
    // Built-in, shipped Scheme, --tools Scheme, and the MCP tools it is a client of.
    let fs_read = session.tool("fs-read");
    assert_eq!(fs_read["inputSchema"]["required"], json!(["path"]));
    assert_eq!(fs_read["inputSchema"]["properties"]["start"]["type"], "integer");
    assert_eq!(fs_read["annotations"], json!({"readOnlyHint": true, "destructiveHint": false}));
    assert_eq!(session.tool("fs-write")["annotations"]["destructiveHint"], true);
    session.tool("read-around");
    let noisy = session.tool("noisy");
    assert_eq!(noisy["inputSchema"]["properties"]["word"], json!({"type": "string", "description": "A word to shout"}));
    assert_eq!(noisy["inputSchema"]["required"], json!(["word"]));
    // Names every provider takes (no dots: Anthropic's and OpenAI's rule), mapped back on calls.
    for tool in &session.tools {
        let name = tool["name"].as_str().unwrap();
        let sendable =
            (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        assert!(sendable, "{name} is not a name every client takes");
    }
    let fixture = session.tool("fixture__args");
    assert_eq!(
        fixture["inputSchema"]["properties"]["either"]["anyOf"],
        json!([{"type": "string"}, {"type": "integer"}])
    );

    let results: Vec<(String, bool)> = session.results.iter().map(text_of).collect();
    // fs-read with `start` left out.
    assert_eq!(results[0], ("1\tline 1\n2\tline 2\n... 298 more lines; next start 3\n".to_string(), false));
    // Numbers sent as strings are tidied.
    assert_eq!(results[1], ("5\tline 5\n... 295 more lines; next start 6\n".to_string(), false));
    // Errors are results the model can read, with their kind.
    assert!(results[2].1, "{:?}", results[2]);
    assert!(
        results[2].0.starts_with("error (unknown_argument): fs-read has no parameter \"limit\""),
        "{}",
        results[2].0
    );
    assert_eq!(results[3], ("hi!".to_string(), false));
    // A confirm rule denies: there is no one to ask.
    assert!(results[4].1 && results[4].0.starts_with("error (denied): fs-write: denied:"), "{:?}", results[4]);
    assert!(!dir.path().join("b.txt").exists());
    assert_eq!(results[5], (r#"{"text":"via toolhost","flag":false}"#.to_string(), false));
    assert!(results[6].1 && results[6].0.starts_with("error (unknown_tool):"), "{:?}", results[6]);
}

#[test]
fn with_yes_a_confirm_rule_allows_the_call() {
    let (dir, home, config, tools) = setup();
    let calls = json!([{"name": "fs-write", "arguments": {"path": "b.txt", "content": "written"}}]);
    let session = session(&home, dir.path(), &["--config", &config, "--tools", &tools, "--yes"], &calls);
    assert!(session.errors.is_empty(), "{:?}", session.errors);
    let (text, is_error) = text_of(&session.results[0]);
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "written");
}

/// `toolhost mcp` driven with raw JSON-RPC lines, for what the SDK client never sends: malformed
/// messages, oversized lines, duplicate ids, pipelining, cancellations, a client that stops reading.
struct Raw {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    messages: std::sync::mpsc::Receiver<Value>,
    /// While set, nothing reads the server's output (a client that stopped reading).
    paused: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Messages read while waiting for another.
    seen: Vec<Value>,
    /// The pipes between this client and the server, as /proc names them (`pipe:[N]`).
    pipes: Vec<String>,
}

impl Raw {
    /// Starts `toolhost ARGS mcp` in `dir` and completes the handshake.
    fn start(home: &Home, dir: &std::path::Path, args: &[&str]) -> Raw {
        let mut all: Vec<&str> = args.to_vec();
        all.push("mcp");
        let mut child = home
            .command(dir, &all)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("toolhost starts");
        let output = child.stdout.take().unwrap();
        let pipe_name = |fd: std::os::fd::BorrowedFd<'_>| format!("pipe:[{}]", rustix::fs::fstat(fd).unwrap().st_ino);
        let pipes = vec![
            pipe_name(std::os::fd::AsFd::as_fd(child.stdin.as_ref().unwrap())),
            pipe_name(std::os::fd::AsFd::as_fd(&output)),
        ];
        let (sent, messages) = std::sync::mpsc::channel();
        let paused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pause = std::sync::Arc::clone(&paused);
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut output = std::io::BufReader::with_capacity(512, output);
            loop {
                while pause.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                let mut line = String::new();
                match output.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let message = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if sent.send(message).is_err() {
                    return;
                }
            }
        });
        let mut raw = Raw { input: child.stdin.take(), child, messages, paused, seen: Vec::new(), pipes };
        raw.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
        let init = raw.reply("init");
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send_line(&mut self, line: &[u8]) {
        use std::io::Write;
        let input = self.input.as_mut().expect("input open");
        input.write_all(line).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_line(message.to_string().as_bytes());
    }

    fn call(&mut self, id: impl Into<Value>, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id.into(), "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    fn cancel(&mut self, id: impl Into<Value>) {
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id.into(), "reason": "test"}}));
    }

    /// The next message the server writes.
    fn next(&mut self) -> Value {
        self.messages.recv_timeout(std::time::Duration::from_secs(60)).expect("the server answers within 60 s")
    }

    /// The reply (result or error) to request `id`; what came before it is kept in `seen`.
    fn reply(&mut self, id: impl Into<Value>) -> Value {
        let id = id.into();
        if let Some(at) = self.seen.iter().position(|m| m["id"] == id && m.get("method").is_none()) {
            return self.seen.remove(at);
        }
        loop {
            let message = self.next();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
            self.seen.push(message);
        }
    }

    /// The text and `isError` of the tool result answering `id`.
    fn result_text(&mut self, id: impl Into<Value>) -> (String, bool) {
        let reply = self.reply(id);
        assert!(reply.get("error").is_none(), "a protocol error, not a tool result: {reply}");
        text_of(&reply["result"])
    }

    /// The ids of the next `count` messages, each a successful result.
    fn next_result_ids(&mut self, count: usize) -> Vec<i64> {
        (0..count)
            .map(|_| {
                let message = self.next();
                assert!(message["result"]["isError"] != true, "{message}");
                message["id"].as_i64().unwrap()
            })
            .collect()
    }

    fn close_input(&mut self) {
        self.input = None;
    }

    /// Closes the input and waits for the server to exit, failing if it still runs after `limit`.
    fn close_input_and_wait(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let closed = std::time::Instant::now();
        self.close_input();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(closed.elapsed() < limit, "toolhost still runs {limit:?} after its input closed");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Scheme tool that runs until it is interrupted.
const SPIN_TOOL: &str = r#"(define-tool (spin)
  "Loop until stopped."
  (let loop ((n 0)) (loop (+ n 1))))
"#;

fn raw_workspace() -> (tempfile::TempDir, Home) {
    (workspace(&[("tools/spin.scm", SPIN_TOOL)]), Home::new())
}

#[test]
fn every_malformed_message_gets_an_answer_and_the_connection_goes_on() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    raw.send_line(br#"{"jsonrpc": "2.0", "id": 1, "method": "ping""#);
    let parse = raw.next();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    raw.send_line(br#"[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]"#);
    let batch = raw.next();
    assert_eq!(batch["error"]["code"], -32600, "{batch}");
    raw.send_line(br#"{"jsonrpc": "2.0", "id": null, "method": "ping"}"#);
    let null_id = raw.next();
    assert_eq!(null_id["error"]["code"], -32600, "{null_id}");
    raw.send_line(br#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "fs-read"}"#);
    let bad_params = raw.reply(3);
    assert_eq!(bad_params["error"]["code"], -32602, "{bad_params}");

    // Bad arguments are tool results naming the problem, so a model can correct the call.
    raw.call(4, "fs-read", json!("a.txt"));
    let (text, is_error) = raw.result_text(4);
    assert!(is_error && text.contains("bad_arguments") && text.contains("object"), "{text}");
    let mut deep =
        String::from(r#"{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {"path": "#);
    deep.push_str(&"[".repeat(200));
    deep.push_str(&"]".repeat(200));
    deep.push_str(r#"}, "name": "fs-read"}}"#);
    raw.send_line(deep.as_bytes());
    let (text, is_error) = raw.result_text(5);
    assert!(is_error && text.contains("bad_arguments") && text.contains("recursion limit"), "{text}");
    raw.send_line(
        br#"{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "fs-write", "arguments": {"path": "one.txt", "content": "x", "path": "two.txt"}}}"#,
    );
    let (text, is_error) = raw.result_text(6);
    assert!(is_error && text.contains("bad_arguments") && text.contains("\"path\""), "{text}");
    assert!(!dir.path().join("one.txt").exists() && !dir.path().join("two.txt").exists());

    raw.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    assert!(raw.reply(7)["result"].is_object());
}

#[test]
fn a_duplicate_id_in_flight_is_refused_and_the_first_request_still_answered() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    raw.call(7, "shell-exec", json!({"cmd": "sleep 0.5; echo first"}));
    raw.call(7, "fs-write", json!({"path": "second.txt", "content": "second"}));
    let refused = raw.reply(7);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("in flight"), "{refused}");
    let (text, is_error) = raw.result_text(7);
    assert!(!is_error && text.contains("first"), "{text}");
    assert!(!dir.path().join("second.txt").exists());
}

/// A client that gives a new call the id of one it has just cancelled (which MCP forbids) is told
/// the id is still in flight while the cancelled call stops, and never gets the cancelled call's end
/// as the new one's answer.
#[test]
fn the_id_of_a_call_still_stopping_is_refused_for_a_new_call() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &["--tools", "tools"]);
    raw.call(5, "spin", json!({}));
    raw.cancel(5);
    raw.call(5, "fs-write", json!({"path": "new.txt", "content": "new"}));
    let reply = raw.reply(5);
    match reply.get("error") {
        Some(error) => assert_eq!(error["code"], -32600, "{reply}"),
        None => {
            assert!(!text_of(&reply["result"]).1, "{reply}");
            assert!(dir.path().join("new.txt").exists());
        }
    }
    raw.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}));
    assert!(raw.reply(6)["result"].is_object());
}

#[test]
fn a_line_over_the_limit_is_refused_by_id_while_a_64_mib_write_goes_through() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    let content = "x".repeat(64 << 20);
    raw.call(1, "fs-write", json!({"path": "big.txt", "content": content}));
    let (text, is_error) = raw.result_text(1);
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::metadata(dir.path().join("big.txt")).unwrap().len(), 64 << 20);
    // The id comes last, as the TypeScript SDK writes it, after 130 MiB of arguments.
    let huge = "y".repeat(130 << 20);
    let line = format!(
        r#"{{"method": "tools/call", "params": {{"name": "fs-write", "arguments": {{"path": "huge.txt", "content": "{huge}"}}}}, "jsonrpc": "2.0", "id": 2}}"#
    );
    drop(huge);
    raw.send_line(line.as_bytes());
    drop(line);
    let refused = raw.reply(2);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("limit"), "{refused}");
    assert!(!dir.path().join("huge.txt").exists());
    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert!(raw.reply(3)["result"].is_object());
}

#[test]
fn pipelined_calls_run_in_arrival_order() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    for n in 1..=200 {
        raw.call(n, "fs-write", json!({"path": "v.txt", "content": format!("v{n}")}));
    }
    assert_eq!(raw.next_result_ids(200), (1..=200).collect::<Vec<_>>());
    assert_eq!(std::fs::read_to_string(dir.path().join("v.txt")).unwrap(), "v200");
}

/// With the host in the server's own process (`--no-isolate`, whose calls go to the host's thread
/// and come back to the event loop): calls still run in arrival order, a cancelled running call
/// stops and is not answered, and the server goes on answering while it runs.
#[test]
fn in_process_calls_keep_their_order_and_a_cancelled_one_stops() {
    let (dir, home) = raw_workspace();
    std::fs::write(dir.path().join("slow.toml"), "[limits]\nscheme_call_s = 600\n").unwrap();
    let mut raw = Raw::start(&home, dir.path(), &["--no-isolate", "--config", "slow.toml", "--tools", "tools"]);
    raw.call(1, "spin", json!({}));
    let server = raw.child.id();
    let before = cpu_ticks(server);
    common::eventually("the loop to run in the server", || cpu_ticks(server) > before + 20);
    // The event loop is free while the host's thread spins.
    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert!(raw.reply(2)["result"].is_object());
    raw.cancel(1);
    for n in 3..=52 {
        raw.call(n, "fs-write", json!({"path": "v.txt", "content": format!("v{n}")}));
    }
    let order = raw.next_result_ids(50);
    assert_eq!(order, (3..=52).collect::<Vec<_>>(), "the cancelled call was not answered, the rest in order");
    assert_eq!(std::fs::read_to_string(dir.path().join("v.txt")).unwrap(), "v52");
}

#[test]
fn a_client_that_stops_reading_makes_the_server_stop_reading() {
    let (dir, home) = raw_workspace();
    std::fs::write(dir.path().join("4k.txt"), "z".repeat(4000)).unwrap();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    // From here on nothing reads the server's output until the writes below stall.
    raw.paused.store(true, std::sync::atomic::Ordering::SeqCst);
    const SENT: usize = 3_000;
    let mut input = raw.input.take().unwrap();
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&written);
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for n in 1..=SENT {
            let line = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "fs-read", "arguments": {"path": "4k.txt"}}});
            writeln!(input, "{line}").unwrap();
            count.store(n, std::sync::atomic::Ordering::SeqCst);
        }
        input
    });
    // Wait until the writes stall (the server stopped reading) or all of them went through.
    let (mut last, mut still) = (0, 0);
    while last < SENT && still < 15 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = written.load(std::sync::atomic::Ordering::SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    assert!(last < SENT / 2, "the server read {last} of {SENT} requests while nothing read its replies");
    // Reading again, every request is answered.
    raw.paused.store(false, std::sync::atomic::Ordering::SeqCst);
    raw.input = Some(writer.join().unwrap());
    for n in 1..=SENT {
        let reply = raw.next();
        assert_eq!(reply["id"], n, "{reply}");
    }
}

/// The child processes of `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| text.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

#[test]
fn a_cancelled_call_stops_at_once_and_a_queued_one_never_runs_and_neither_is_answered() {
    let (dir, home) = raw_workspace();
    // No time limit ends the loop in time: only the cancellation can.
    std::fs::write(dir.path().join("slow.toml"), "[limits]\nscheme_call_s = 600\n").unwrap();
    let mut raw = Raw::start(&home, dir.path(), &["--config", "slow.toml", "--tools", "tools"]);
    raw.call(1, "spin", json!({}));
    // The loop runs before anything else is sent: call 2 can only wait in the queue behind it.
    let worker = *children_of(raw.child.id()).first().expect("toolhost mcp runs its tools in a worker");
    let before = cpu_ticks(worker);
    common::eventually("the loop to run in the worker", || cpu_ticks(worker) > before + 20);
    raw.call(2, "fs-write", json!({"path": "queued.txt", "content": "ran"}));
    raw.cancel(2);
    raw.cancel(1);
    // Had the loop not stopped, this call would wait behind it forever.
    raw.call(3, "fs-write", json!({"path": "after.txt", "content": "ran"}));
    let (text, is_error) = raw.result_text(3);
    assert!(!is_error, "{text}");
    assert!(!dir.path().join("queued.txt").exists());
    // A command and every process it started stop too.
    raw.call(4, "shell-exec", json!({"cmd": "sleep 30 & echo $! > child.pid; echo $$ > shell.pid; wait"}));
    let (shell_pid, child_pid) = (dir.path().join("shell.pid"), dir.path().join("child.pid"));
    common::eventually("the command to start", || {
        std::fs::read_to_string(&shell_pid).is_ok_and(|t| t.ends_with('\n'))
            && std::fs::read_to_string(&child_pid).is_ok_and(|t| t.ends_with('\n'))
    });
    raw.cancel(4);
    let (shell, child) = (common::pid_in(&shell_pid), common::pid_in(&child_pid));
    common::eventually("the cancelled command's processes to end", || common::is_gone(shell) && common::is_gone(child));
    raw.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    raw.reply(5);
    assert!(
        raw.seen.iter().all(|m| ![1, 2, 4].contains(&m["id"].as_i64().unwrap_or(0))),
        "a cancelled request was answered: {:?}",
        raw.seen
    );
}

/// Calls that come while another runs are sent to the worker behind it; cancelling the running
/// call stops it and no other (a cancellation names its call), and the ones behind it run in order,
/// in the same worker.
#[test]
fn a_cancelled_call_stops_alone_and_the_calls_sent_behind_it_run_in_order() {
    let (dir, home) = raw_workspace();
    std::fs::write(dir.path().join("slow.toml"), "[limits]\nscheme_call_s = 600\n").unwrap();
    let mut raw = Raw::start(&home, dir.path(), &["--config", "slow.toml", "--tools", "tools"]);
    raw.call(1, "spin", json!({}));
    let server = raw.child.id();
    let worker = *children_of(server).first().expect("toolhost mcp runs its tools in a worker");
    let before = cpu_ticks(worker);
    common::eventually("the loop to run in the worker", || cpu_ticks(worker) > before + 20);
    for n in 2..=7 {
        raw.call(n, "fs-write", json!({"path": "order.txt", "content": format!("v{n}")}));
    }
    raw.cancel(1);
    assert_eq!(raw.next_result_ids(6), (2..=7).collect::<Vec<_>>(), "every call behind it ran, in order");
    assert_eq!(std::fs::read_to_string(dir.path().join("order.txt")).unwrap(), "v7");
    assert_eq!(children_of(server), [worker], "the cancellation stopped the call, not its worker");
    assert!(raw.seen.iter().all(|m| m["id"] != 1), "the cancelled call was answered: {:?}", raw.seen);
}

/// A Scheme tool that crashes its worker: hashing a value nested a million deep overflows the stack.
const DEEP_TOOL: &str = r#"(define-tool (deep) "Hashes a deeply nested value."
  (let loop ((i 0) (v '()))
    (if (= i 1000000) (begin (hash-insert (hash) v 1) "hashed") (loop (+ i 1) (list v)))))
"#;

/// Calls sent to the worker behind one that crashes it never began there: they run in a fresh
/// worker, in order, and the crash is that one call's error.
#[test]
fn calls_sent_behind_one_that_crashes_the_worker_run_in_a_fresh_one_in_order() {
    let dir = workspace(&[("tools/spin.scm", SPIN_TOOL), ("tools/deep.scm", DEEP_TOOL)]);
    let home = Home::new();
    let mut raw = Raw::start(&home, dir.path(), &["--tools", "tools"]);
    raw.call(1, "deep", json!({}));
    for n in 2..=6 {
        raw.call(n, "fs-write", json!({"path": "order.txt", "content": format!("v{n}")}));
    }
    let crashed = raw.next();
    assert_eq!(crashed["id"], 1, "{crashed}");
    let (text, is_error) = text_of(&crashed["result"]);
    assert!(is_error && text.contains("crashed"), "{text}");
    assert_eq!(raw.next_result_ids(5), (2..=6).collect::<Vec<_>>(), "every call behind it ran, in order");
    assert_eq!(std::fs::read_to_string(dir.path().join("order.txt")).unwrap(), "v6");
}

/// A reply from the worker longer than the server's glance at it (16 KiB) is read off the event
/// loop and arrives whole, calls before and after it answered as usual.
#[test]
fn a_long_reply_from_the_worker_arrives_whole() {
    let (dir, home) = raw_workspace();
    let lines: String = (1..=3000).map(|n| format!("line {n:05} of a file long enough to read in parts\n")).collect();
    std::fs::write(dir.path().join("long.txt"), &lines).unwrap();
    std::fs::write(dir.path().join("wide.toml"), "[limits]\nread_lines = 3000\noutput_chars = 1000000\n").unwrap();
    let mut raw = Raw::start(&home, dir.path(), &["--config", "wide.toml"]);
    raw.call(1, "fs-write", json!({"path": "a.txt", "content": "short"}));
    raw.call(2, "fs-read", json!({"path": "long.txt", "start": 1, "count": 3000}));
    raw.call(3, "fs-read", json!({"path": "a.txt"}));
    assert!(!raw.result_text(1).1);
    let (text, is_error) = raw.result_text(2);
    assert!(!is_error && text.len() > 100 * 1024, "{} bytes: {}", text.len(), &text[..text.len().min(300)]);
    assert!(text.contains("1\tline 00001 of") && text.contains("3000\tline 03000 of"), "the whole file");
    assert_eq!(raw.result_text(3), ("1\tshort\n".to_string(), false));
}

/// What each of `pid`'s descriptors is (`pipe:[N]`, `socket:[N]`, a path), from /proc.
fn descriptors_of(pid: u32) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok()).map(|target| target.display().to_string()).collect()
}

/// A worker started while the server serves holds none of the client's pipes: the server's copies
/// of them (and of the last worker's socket) were once inherited by it, and from it by the
/// `[[mcp]]` servers it starts, so a process left running kept the client's output open.
#[test]
fn a_worker_started_while_serving_holds_none_of_the_clients_pipes() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    raw.call(1, "fs-read", json!({"path": "tools/spin.scm"}));
    assert!(!raw.result_text(1).1);
    let server = raw.child.id();
    let clients_pipes = raw.pipes.clone();
    assert!(clients_pipes.iter().all(|pipe| descriptors_of(server).contains(pipe)), "{clients_pipes:?}");
    let first = *children_of(server).first().expect("toolhost mcp runs its tools in a worker");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(first).unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    common::eventually("the worker to be gone", || common::is_gone(first));
    // The next calls start a fresh worker.
    raw.call(2, "fs-read", json!({"path": "tools/spin.scm"}));
    raw.result_text(2);
    raw.call(3, "fs-read", json!({"path": "tools/spin.scm"}));
    assert!(!raw.result_text(3).1);
    let fresh = *children_of(server).iter().find(|&&pid| pid != first).expect("a fresh worker");
    let held = descriptors_of(fresh);
    assert!(!held.is_empty(), "the worker's descriptors are readable");
    let leaked: Vec<&String> = held.iter().filter(|d| clients_pipes.contains(d)).collect();
    assert!(leaked.is_empty(), "the worker holds the client's pipes {leaked:?} (server's pipes: {clients_pipes:?})");
    // Its own sockets are the ones on descriptors 3 (requests and replies) and 4 (cancellations).
    let own: std::collections::BTreeSet<String> = [3, 4]
        .iter()
        .filter_map(|fd| std::fs::read_link(format!("/proc/{fresh}/fd/{fd}")).ok())
        .map(|target| target.display().to_string())
        .collect();
    assert_eq!(own.len(), 2, "{held:?}");
    let sockets: std::collections::BTreeSet<String> = held.into_iter().filter(|d| d.starts_with("socket:")).collect();
    assert_eq!(sockets, own, "the worker holds its own sockets and no other");
}

#[test]
fn closed_input_ends_the_running_call_its_worker_and_the_server_within_2_s() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    raw.call(1, "shell-exec", json!({"cmd": "echo $$ > shell.pid; sleep 5; echo late > late.txt"}));
    let shell_pid = dir.path().join("shell.pid");
    common::eventually("the command to start", || std::fs::read_to_string(&shell_pid).is_ok_and(|t| t.ends_with('\n')));
    let shell = common::pid_in(&shell_pid);
    let workers = children_of(raw.child.id());
    assert!(!workers.is_empty(), "toolhost mcp runs its tools in a worker");
    let status = raw.close_input_and_wait(std::time::Duration::from_secs(2));
    assert!(status.success(), "{status:?}");
    for pid in workers.iter().chain([&shell]) {
        assert!(common::is_gone(*pid), "process {pid} outlived toolhost");
    }
    assert!(!dir.path().join("late.txt").exists());
}

/// A Scheme tool stuck in one builtin (a huge power of 7, seconds of work): no interrupt reaches
/// it until the builtin returns.
const CRUNCH_TOOL: &str = r#"(define-tool (crunch (n integer "The power."))
  "Compute 7 to the power n, and say how many digits it has."
  (number->string (string-length (number->string (expt 7 n)))))
"#;

#[test]
fn closed_input_ends_a_worker_that_no_interrupt_stops_and_the_server_within_2_s() {
    let dir = workspace(&[("tools/crunch.scm", CRUNCH_TOOL)]);
    let home = Home::new();
    let tools = dir.path().join("tools").display().to_string();
    let mut raw = Raw::start(&home, dir.path(), &["--tools", &tools]);
    let workers = children_of(raw.child.id());
    assert_eq!(workers.len(), 1, "toolhost mcp runs its tools in a worker");
    raw.call(1, "crunch", json!({"n": 30_000_000}));
    // The worker is busy in the builtin once its CPU time moves.
    let before = cpu_ticks(workers[0]);
    common::eventually("the worker to be computing", || cpu_ticks(workers[0]) > before + 20);
    let status = raw.close_input_and_wait(std::time::Duration::from_secs(2));
    assert!(status.success(), "{status:?}");
    assert!(common::is_gone(workers[0]), "the worker outlived toolhost, still computing");
}

#[test]
fn a_long_call_with_a_progress_token_reports_progress_until_its_result() {
    let (dir, home) = raw_workspace();
    let mut raw = Raw::start(&home, dir.path(), &[]);
    raw.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "shell-exec", "arguments": {"cmd": "sleep 2.5; echo done"}, "_meta": {"progressToken": "p1"}}}));
    let (text, is_error) = raw.result_text(1);
    assert!(!is_error && text.contains("done"), "{text}");
    let progress: Vec<&Value> = raw.seen.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "no progress before the result: {:?}", raw.seen);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p1"), "{progress:?}");
    let values: Vec<f64> = progress.iter().map(|p| p["params"]["progress"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "progress must increase: {values:?}");
    // None after the result: the next reply is the ping's own.
    raw.seen.clear();
    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    raw.reply(2);
    assert!(raw.seen.is_empty(), "{:?}", raw.seen);
}

/// Scheme tools whose results are values rather than text, some declaring their shape.
const VALUE_TOOLS: &str = r#"(define-tool (pair) "Two words, as a list." (list "a" "b"))
(define-tool (point)
  "A point."
  (returns (hash "type" "object" "properties" (hash "x" (hash "type" "number")) "required" (list "x")))
  (hash "x" 1.5 "y" 2))
(define-tool (answer) "The answer." (returns "integer") 42)
(define-tool (yes) "Yes." #t)
(define-tool (liar) "Promises a number, gives text." (returns "number") "not a number")
(register-tool "counted" "Counts, by register-tool." '() (lambda () (list 1 2 3)) "list")
"#;

#[test]
fn values_are_served_as_structured_content_beside_the_text_and_declared_shapes_as_output_schemas() {
    let dir = workspace(&[("tools/values.scm", VALUE_TOOLS)]);
    let home = Home::new();
    std::fs::write(dir.path().join("server.toml"), peers::stdio_entry("fixture", &peers::fixture_server(), &[], None))
        .unwrap();
    let tools = dir.path().join("tools").display().to_string();
    let names = ["pair", "point", "answer", "yes", "liar", "counted", "fixture__structured", "fs-read"];
    let mut calls: Vec<Value> = names.iter().map(|name| json!({"name": name, "arguments": {}})).collect();
    calls[7] = json!({"name": "fs-read", "arguments": {"path": "a.txt", "count": 1}});
    // The SDK client checks every structured result against the tool's outputSchema and throws
    // (a "thrown" result here) when it does not conform or is missing.
    let session = session(&home, dir.path(), &["--config", "server.toml", "--tools", &tools], &Value::Array(calls));
    assert!(session.errors.is_empty(), "{:?}", session.errors);
    let result = |name: &str| &session.results[names.iter().position(|n| *n == name).unwrap()];
    let structured = |name: &str| {
        let (text, is_error) = text_of(result(name));
        assert!(!is_error, "{name}: {text}");
        (text, result(name).get("structuredContent").cloned())
    };
    assert_eq!(structured("pair"), (r#"["a","b"]"#.to_string(), Some(json!({"result": ["a", "b"]}))));
    assert_eq!(structured("point").1, Some(json!({"x": 1.5, "y": 2})));
    assert_eq!(structured("answer"), ("42".to_string(), Some(json!({"result": 42}))));
    assert_eq!(structured("yes").1, Some(json!({"result": true})));
    assert_eq!(structured("counted").1, Some(json!({"result": [1, 2, 3]})));
    // An MCP tool toolhost is a client of: its server's text and structured content, passed on.
    assert_eq!(
        structured("fixture__structured"),
        ("2 items, total 3.5".to_string(), Some(json!({"total": 3.5, "items": ["a", "b"]})))
    );
    // Text stays text.
    assert_eq!(structured("fs-read"), ("1\tline 1\n... 299 more lines; next start 2\n".to_string(), None));
    // A result that breaks its declared shape is an error result, never nonconforming content.
    let (text, is_error) = text_of(result("liar"));
    assert!(is_error, "{text}");
    assert!(text.contains("liar: its result is a string, not the number its declared output shape promises"), "{text}");

    // The shapes as outputSchema: objects as declared, anything else as an object holding "result".
    assert_eq!(
        session.tool("point")["outputSchema"],
        json!({"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]})
    );
    let wrapped = |inner: Value| json!({"type": "object", "properties": {"result": inner}, "required": ["result"]});
    assert_eq!(session.tool("answer")["outputSchema"], wrapped(json!({"type": "integer"})));
    assert_eq!(session.tool("counted")["outputSchema"], wrapped(json!({"type": "array"})));
    assert_eq!(session.tool("fixture__structured")["outputSchema"]["properties"]["total"], json!({"type": "number"}));
    assert!(session.tool("pair").get("outputSchema").is_none(), "{}", session.tool("pair"));
    assert!(session.tool("fs-read").get("outputSchema").is_none());
}

/// Runs the SDK client's `steps` (see live-check.mjs) against `toolhost ARGS mcp` in `dir`.
fn live_session(home: &Home, dir: &std::path::Path, args: &[&str], steps: &Value) -> Value {
    let script = peers::ensure().join("live-check.mjs");
    let mut command = std::process::Command::new("node");
    command.arg(script).arg(env!("CARGO_BIN_EXE_toolhost")).arg(steps.to_string()).args(args).current_dir(dir);
    home.environment(&mut command);
    peers::client_report(&mut command)
}

#[test]
fn a_tool_file_added_changed_or_removed_reloads_the_tools_and_tells_the_client() {
    let dir = workspace(&[("tools/alpha.scm", r#"(define-tool (alpha) "The alpha tool." "one")"#)]);
    let home = Home::new();
    let tools = dir.path().join("tools");
    let file = |name: &str| tools.join(name).display().to_string();
    let steps = json!([
        {"write": file("beta.scm"), "text": "(define-tool (beta) \"The beta tool.\" \"two\")"},
        {"changed": true},
        {"list": true},
        {"call": "beta"},
        {"write": file("beta.scm"), "text": "(define-tool (beta) \"The beta tool, changed.\" \"2\")"},
        {"changed": true},
        {"call": "beta"},
        // A file that fails: reported with its file and line; the other tools stay.
        {"write": file("broken.scm"), "text": "(define-tool (gamma) \"Third.\" \"3\")\n(+ 1 (car '()))\n"},
        {"changed": true},
        {"list": true},
        {"call": "alpha"},
        {"remove": file("beta.scm")},
        {"changed": true},
        {"list": true},
    ]);
    let tools_arg = tools.display().to_string();
    let report = live_session(&home, dir.path(), &["--tools", &tools_arg], &steps);
    let steps = report["steps"].as_array().unwrap();
    let names = |at: usize| -> Vec<String> {
        steps[at].as_array().unwrap().iter().filter_map(|n| n.as_str().map(String::from)).collect()
    };
    let text = |at: usize| steps[at]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let stderr = report["stderr"].as_str().unwrap_or_default();
    assert_eq!(steps[1], true, "no list_changed after a file was added: {report}");
    assert!(names(2).contains(&"beta".to_string()) && names(2).contains(&"alpha".to_string()), "{:?}", names(2));
    assert_eq!(text(3), "two");
    assert_eq!(steps[5], true, "no list_changed after a file changed: {stderr}");
    assert_eq!(text(6), "2");
    assert_eq!(steps[8], true, "no list_changed after a file failed: {stderr}");
    assert!(stderr.contains(&format!("{}:2", file("broken.scm"))), "the failure names its file and line: {stderr}");
    assert!(names(9).contains(&"alpha".to_string()) && names(9).contains(&"beta".to_string()), "{:?}", names(9));
    assert_eq!(text(10), "one");
    assert_eq!(steps[12], true, "no list_changed after a file was removed: {stderr}");
    assert!(!names(13).contains(&"beta".to_string()) && names(13).contains(&"alpha".to_string()), "{:?}", names(13));
}

#[test]
fn a_tool_file_written_while_the_tools_load_is_loaded_too() {
    // Loading writer.scm writes late.scm into the watched folder, as an editor saving a file while
    // the tools load again would: the write lands after the folder was read for that reload.
    let dir = workspace(&[]);
    let home = Home::new();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let writer = r#"(define-tool (writer) "Writes late.scm when it loads." "w")
(with-handler (lambda (e) (fs-write "tools/late.scm" "(define-tool (late) \"Came late.\" \"late\")"))
  (file-lines "tools/late.scm"))
"#;
    let steps = json!([
        {"write": tools.join("writer.scm").display().to_string(), "text": writer},
        {"changed": true},
        {"changed": true},
        {"list": true},
    ]);
    let tools_arg = tools.display().to_string();
    let report = live_session(&home, dir.path(), &["--tools", &tools_arg], &steps);
    let steps = report["steps"].as_array().unwrap();
    assert!(dir.path().join("tools/late.scm").exists(), "{report}");
    assert_eq!(steps[2], true, "no list_changed for the file written during the reload: {report}");
    let names: Vec<&str> = steps[3].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(names.contains(&"late") && names.contains(&"writer"), "{names:?}");
}

#[test]
fn with_code_the_server_offers_one_program_tool_over_every_tool_its_own_mcp_servers_included() {
    let (dir, home, config, tools) = setup();
    let program =
        "(define word (noisy \"hey\"))\n(list word (fixture.args \"via a program\") (length (file-lines \"a.txt\")))";
    let calls = json!([
        {"name": "scheme", "arguments": {"code": program}},
        {"name": "scheme", "arguments": {"code": "(fs-write \"b.txt\" \"x\")"}},
        {"name": "fs-read", "arguments": {"path": "a.txt"}},
        {"name": "scheme", "arguments": {"code": "(car"}},
    ]);
    let args = ["--config", &config, "--tools", &tools, "mcp", "--code"];
    let session = session(&home, dir.path(), &args, &calls);
    assert!(session.errors.is_empty(), "the client reported errors: {:?}", session.errors);
    assert_eq!(session.tools.len(), 1, "{:?}", session.tools);
    // A program may call any tool, those that write included.
    assert_eq!(session.tool("scheme")["annotations"]["destructiveHint"], true);
    let description = session.tool("scheme")["description"].as_str().unwrap();
    for procedure in
        ["(fs-read path [start] [count])", "(noisy word)", "(fixture.args text", "(read-around path line [context])"]
    {
        assert!(description.contains(procedure), "{procedure} in {description}");
    }
    let results: Vec<(String, bool)> = session.results.iter().map(text_of).collect();
    assert!(!results[0].1, "{:?}", results[0]);
    // What the Scheme tool displayed is part of what the program displayed, then its value.
    assert!(results[0].0.starts_with("noise from a script\n(\"hey!\" "), "{}", results[0].0);
    assert!(results[0].0.contains("via a program"), "{}", results[0].0);
    assert!(results[0].0.ends_with(" 300)"), "{}", results[0].0);
    // The nested write meets the confirm rule, with no one to ask.
    assert!(results[1].1 && results[1].0.starts_with("error (denied): line 1: fs-write: denied:"), "{:?}", results[1]);
    assert!(!dir.path().join("b.txt").exists());
    assert!(results[2].1 && results[2].0.starts_with("error (unknown_tool)"), "{:?}", results[2]);
    assert!(results[3].1 && results[3].0.contains("line 1, column 1: `(` is never closed"), "{:?}", results[3]);
}

#[test]
fn an_upstream_servers_list_changed_reaches_toolhost_mcps_client_and_a_new_listing_shows_it() {
    let dir = workspace(&[]);
    let home = Home::new();
    std::fs::write(dir.path().join("server.toml"), peers::stdio_entry("fixture", &peers::fixture_server(), &[], None))
        .unwrap();
    // The fixture server adds a tool when asked and sends notifications/tools/list_changed to
    // toolhost, which lists again; toolhost's own client must hear of it as well.
    let steps = json!([
        {"call": "fixture__grow", "arguments": {"name": "extra"}},
        {"changed": true},
        {"list": true},
        {"call": "fixture__extra"},
        {"call": "fixture__shrink", "arguments": {"name": "extra"}},
        {"changed": true},
        {"list": true},
    ]);
    let report = live_session(&home, dir.path(), &["--config", "server.toml"], &steps);
    let steps = report["steps"].as_array().unwrap();
    let names = |at: usize| -> Vec<String> {
        steps[at].as_array().unwrap().iter().filter_map(|n| n.as_str().map(String::from)).collect()
    };
    assert_eq!(text_of(&steps[0]), ("grew extra".to_string(), false));
    assert_eq!(steps[1], true, "no list_changed after the upstream server added a tool: {report}");
    assert!(names(2).contains(&"fixture__extra".to_string()), "{:?}", names(2));
    assert_eq!(text_of(&steps[3]), ("I am extra".to_string(), false));
    assert_eq!(steps[5], true, "no list_changed after the upstream server removed a tool: {report}");
    assert!(!names(6).contains(&"fixture__extra".to_string()) && names(6).contains(&"fixture__grow".to_string()));
}
