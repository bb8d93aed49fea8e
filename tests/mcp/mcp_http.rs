//! `toolhost mcp --http` on 127.0.0.1: the official SDK's client over `StreamableHTTPClientTransport`
//! (tests/fixtures/mcp/http-check.mjs), several sessions on one host, and raw HTTP requests for
//! what a browser or a hostile client would send: a foreign Origin, a missing or wrong token,
//! malformed messages and bad arguments.

use std::io::{BufRead, Read, Write};

use serde_json::{json, Value};

use crate::common::{cpu_ticks, peers, workspace, Home};

/// A Scheme tool with state of its own: each call counts one more, so two sessions that see one
/// count share one host.
const COUNTER_TOOL: &str = r#"(define count 0)
(define-tool (bump)
  "Count one more and return the count."
  (set! count (+ count 1))
  count)
"#;

/// `toolhost GLOBAL mcp --http 127.0.0.1:0 MCP_ARGS`, running, with its URL.
struct HttpServer {
    child: std::process::Child,
    url: String,
    port: u16,
}

impl HttpServer {
    fn start(home: &Home, dir: &std::path::Path, global: &[&str], mcp: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut args: Vec<&str> = global.to_vec();
        args.extend(["mcp", "--http", "127.0.0.1:0"]);
        args.extend(mcp);
        let mut command = home.command(dir, &args);
        command.envs(env.iter().copied());
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("toolhost starts");
        let (found, url) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        // Reads the URL from standard error, then drains it so the server never blocks on it.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if let Some(at) = line.find("streamable HTTP at ") {
                    if let Some(found) = found.take() {
                        let _ = found.send(line[at + "streamable HTTP at ".len()..].trim().to_string());
                    }
                }
            }
        });
        let url = url.recv_timeout(std::time::Duration::from_secs(60)).expect("toolhost prints the URL it serves");
        let port = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").parse().expect("a port");
        HttpServer { child, url, port }
    }

    fn post(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        post(self.port, headers, body)
    }

    /// A raw session: initialize (with `headers`) and notifications/initialized; its id.
    fn session(&self, headers: &[(&str, &str)]) -> String {
        let init = self.post(headers, &initialize(1));
        assert_eq!(init.status, 200, "{init:?}");
        let id = init.header("mcp-session-id").expect("a session id").to_string();
        let mut with_session = headers.to_vec();
        with_session.push(("Mcp-Session-Id", &id));
        let initialized = self.post(&with_session, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(initialized.status, 202, "{initialized:?}");
        id
    }

    /// Runs the SDK's clients through `steps` (see http-check.mjs), with `token` if given.
    fn sdk(&self, steps: &Value, token: Option<&str>) -> Value {
        let script = peers::ensure().join("http-check.mjs");
        let mut command = std::process::Command::new("node");
        command.arg(script).arg(&self.url).arg(steps.to_string()).args(token);
        peers::client_report(&mut command)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw `POST /mcp` to the server on `port` with `headers` and `body`; the status, the headers
/// (names in lower case) and the body (the data lines, for an event stream).
fn post(port: u16, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, \
         text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        port,
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("the server answers and closes");
    let answer = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP response");
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let messages = if head.to_ascii_lowercase().contains("text/event-stream") {
        body.lines().filter_map(|l| l.strip_prefix("data: ")).filter_map(|d| serde_json::from_str(d).ok()).collect()
    } else {
        serde_json::from_str(body).into_iter().collect()
    };
    Reply { status, headers, messages }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    messages: Vec<Value>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The one JSON-RPC message answering the request.
    fn message(&self) -> &Value {
        self.messages.iter().find(|m| m.get("result").is_some() || m.get("error").is_some()).unwrap_or_else(|| {
            panic!("no JSON-RPC answer: {self:?}");
        })
    }
}

fn initialize(id: u32) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

/// The text of a call's result and whether it is an error.
fn text_of(result: &Value) -> (String, bool) {
    assert!(result.get("thrown").is_none(), "the call was a protocol error, not a tool result: {result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("text content: {result}"));
    (text.to_string(), result["isError"] == true)
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

fn counter_workspace() -> (tempfile::TempDir, Home, String) {
    let dir = workspace(&[("tools/counter.scm", COUNTER_TOOL)]);
    let tools = dir.path().join("tools").display().to_string();
    (dir, Home::new(), tools)
}

#[test]
fn over_http_the_sdk_client_lists_and_calls_tools_and_two_sessions_share_one_warm_host() {
    let (dir, home, tools) = counter_workspace();
    let server = HttpServer::start(&home, dir.path(), &["--tools", &tools], &[], &[]);
    // Over the SDK's own 4 MiB default body limit: the tools' limits are the ones that hold.
    const BIG: usize = 20 << 20;
    let report = server.sdk(
        &json!([
            {"client": 0, "list": true},
            {"client": 0, "call": "bump"},
            {"client": 1, "call": "bump"},
            {"client": 0, "call": "bump"},
            {"client": 0, "call": "fs-write", "arguments": {"path": "shared.txt", "content": "from the first"}},
            {"client": 1, "call": "fs-read", "arguments": {"path": "shared.txt"}},
            {"client": 1, "call": "fs-write", "arguments": {"path": "big.txt"}, "fill": {"content": BIG}},
            {"client": 0, "call": "fs-read", "arguments": {"path": "a.txt", "count": 1}},
        ]),
        None,
    );
    assert_eq!(report["errors"], json!([]), "{report}");
    let steps = report["steps"].as_array().unwrap();
    let names: Vec<&str> = steps[0].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for tool in ["bump", "fs-read", "fs-write", "shell-exec", "index-grep"] {
        assert!(names.contains(&tool), "{tool} is listed: {names:?}");
    }
    // One count across both sessions: one interpreter serves them.
    let counts: Vec<String> = steps[1..4].iter().map(|s| text_of(s).0).collect();
    assert_eq!(counts, ["1", "2", "3"]);
    let sessions = report["sessions"].as_array().unwrap();
    assert!(sessions[0].is_string() && sessions[0] != sessions[1], "two sessions: {sessions:?}");
    assert!(!text_of(&steps[4]).1);
    assert_eq!(text_of(&steps[5]), ("1\tfrom the first\n".to_string(), false));
    let (text, is_error) = text_of(&steps[6]);
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::metadata(dir.path().join("big.txt")).unwrap().len(), BIG as u64);
    assert!(text_of(&steps[7]).0.starts_with("1\tline 1\n"), "{}", steps[7]);
    // And one worker process serves them (the tools run isolated, as over standard input).
    assert_eq!(children_of(server.child.id()).len(), 1, "one worker for every session");
}

#[test]
fn over_http_malformed_messages_get_json_rpc_errors_and_bad_arguments_are_error_results() {
    let (dir, home, tools) = counter_workspace();
    let server = HttpServer::start(&home, dir.path(), &["--tools", &tools], &[], &[]);
    let parse = server.post(&[], r#"{"jsonrpc": "2.0", "id": 1, "method": "ping""#);
    assert_eq!((parse.status, &parse.message()["error"]["code"]), (400, &json!(-32700)), "{parse:?}");
    let batch = server.post(&[], r#"[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]"#);
    assert_eq!((batch.status, &batch.message()["error"]["code"]), (400, &json!(-32600)), "{batch:?}");
    let empty = server.post(&[], "");
    assert_eq!(empty.status, 400, "{empty:?}");

    let session = server.session(&[]);
    let headers = [("Mcp-Session-Id", session.as_str())];
    let bad_params =
        server.post(&headers, r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "fs-read"}"#);
    assert_eq!(bad_params.message()["id"], 3, "{bad_params:?}");
    assert_eq!(bad_params.message()["error"]["code"], -32602, "{bad_params:?}");

    let call = |id: u32, arguments: &str| {
        let body = format!(
            r#"{{"jsonrpc": "2.0", "id": {id}, "method": "tools/call", "params": {{"name": "fs-write", "arguments": {arguments}}}}}"#
        );
        let reply = server.post(&headers, &body);
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.message()["id"], id, "{reply:?}");
        text_of(&reply.message()["result"])
    };
    let (text, is_error) = call(4, r#""one.txt""#);
    assert!(is_error && text.contains("bad_arguments") && text.contains("object"), "{text}");
    let (text, is_error) = call(5, r#"{"path": "one.txt", "content": "x", "path": "two.txt"}"#);
    assert!(is_error && text.contains("bad_arguments") && text.contains("\"path\""), "{text}");
    let deep = format!(r#"{{"path": "one.txt", "content": {}{}}}"#, "[".repeat(200), "]".repeat(200));
    let (text, is_error) = call(6, &deep);
    assert!(is_error && text.contains("bad_arguments") && text.contains("recursion limit"), "{text}");
    assert!(!dir.path().join("one.txt").exists() && !dir.path().join("two.txt").exists());
    let (text, is_error) = call(7, r#"{"path": "one.txt", "content": "fine"}"#);
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::read_to_string(dir.path().join("one.txt")).unwrap(), "fine");
}

#[test]
fn over_http_a_foreign_origin_is_refused_and_the_servers_own_or_an_allowed_one_passes() {
    let (dir, home, tools) = counter_workspace();
    let allowed = "http://localhost:6274";
    let server = HttpServer::start(&home, dir.path(), &["--tools", &tools], &["--http-allow-origin", allowed], &[]);
    let own = format!("http://127.0.0.1:{}", server.port);
    for foreign in ["http://evil.example", "http://127.0.0.1:1", "https://localhost:6274", "null"] {
        let refused = server.post(&[("Origin", foreign)], &initialize(1));
        assert_eq!(refused.status, 403, "{foreign}: {refused:?}");
        assert!(refused.header("mcp-session-id").is_none());
        assert!(refused.message()["error"]["message"].as_str().unwrap().contains("Origin"), "{refused:?}");
    }
    for origin in [own.as_str(), allowed] {
        let passed = server.post(&[("Origin", origin)], &initialize(1));
        assert_eq!(passed.status, 200, "{origin}: {passed:?}");
        assert_eq!(passed.message()["result"]["protocolVersion"], "2025-11-25");
    }
}

#[test]
fn over_http_with_a_token_set_a_missing_or_wrong_one_is_401_and_the_right_one_works() {
    let (dir, home, tools) = counter_workspace();
    let token = "correct horse battery staple";
    let server = HttpServer::start(
        &home,
        dir.path(),
        &["--tools", &tools],
        &["--http-token-env", "TOOLHOST_TEST_MCP_BEARER"],
        &[("TOOLHOST_TEST_MCP_BEARER", token)],
    );
    let missing = server.post(&[], &initialize(1));
    assert_eq!(missing.status, 401, "{missing:?}");
    assert!(missing.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")), "{missing:?}");
    let wrong = server.post(&[("Authorization", "Bearer correct horse battery")], &initialize(1));
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(wrong.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")), "{wrong:?}");
    // The Origin is checked first: a foreign page is refused as such, token or not.
    let bearer = format!("Bearer {token}");
    let foreign = server.post(&[("Origin", "http://evil.example"), ("Authorization", &bearer)], &initialize(1));
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let right = server.post(&[("Authorization", &bearer)], &initialize(1));
    assert_eq!(right.status, 200, "{right:?}");

    let report = server.sdk(
        &json!([{"call": "bump"}, {"list": true},
            {"call": "shell-exec", "arguments": {"cmd": "echo \"token: ${TOOLHOST_TEST_MCP_BEARER:-not inherited}\""}}]),
        Some(token),
    );
    assert_eq!(report["errors"], json!([]), "{report}");
    assert_eq!(text_of(&report["steps"][0]), ("1".to_string(), false));
    assert!(report["steps"][1].as_array().unwrap().contains(&json!("bump")));
    // The variable left toolhost's environment: the tools' commands never see the token.
    let (text, is_error) = text_of(&report["steps"][2]);
    assert!(!is_error && text.contains("token: not inherited"), "{text}");
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused_before_anything_starts() {
    let dir = workspace(&[]);
    let home = Home::new();
    let out = home.run(dir.path(), &["mcp", "--http", "0.0.0.0:0"], None);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to serve MCP on 0.0.0.0:0, which is not a loopback address"), "{stderr}");
    assert!(stderr.contains("--http-token-env"), "{stderr}");
    // A token variable that is not set is refused too, rather than serving without one.
    let out = home.run(dir.path(), &["mcp", "--http", "127.0.0.1:0", "--http-token-env", "TOOLHOST_TEST_UNSET"], None);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("TOOLHOST_TEST_UNSET is not set"), "{out:?}");
}

#[test]
fn over_http_every_session_is_told_when_a_tool_file_changes() {
    let (dir, home, tools) = counter_workspace();
    let server = HttpServer::start(&home, dir.path(), &["--tools", &tools], &[], &[]);
    // Each client connects on its first step; the second one writes the file once both listen.
    let steps = json!([
        {"client": 0, "list": true},
        {"client": 1, "list": true},
        {"client": 1, "call": "fs-write", "arguments": {"path": "tools/later.scm",
            "content": "(define-tool (later) \"Added later.\" \"late\")"}},
        {"client": 0, "changed": true},
        {"client": 1, "changed": true},
        {"client": 0, "call": "later"},
    ]);
    let report = server.sdk(&steps, None);
    let steps = report["steps"].as_array().unwrap();
    assert_eq!((&steps[3], &steps[4]), (&json!(true), &json!(true)), "both sessions told: {report}");
    assert_eq!(text_of(&steps[5]), ("late".to_string(), false));
}

/// A Scheme tool that runs until it is interrupted.
const SPIN_TOOL: &str = r#"(define-tool (spin)
  "Loop until stopped."
  (let loop ((n 0)) (loop (+ n 1))))
"#;

#[test]
fn over_http_a_cancelled_call_stops_and_another_sessions_call_runs_after_it() {
    let dir = workspace(&[("tools/spin.scm", SPIN_TOOL)]);
    let home = Home::new();
    // No time limit ends the loop in time: only the cancellation can.
    std::fs::write(dir.path().join("slow.toml"), "[limits]\nscheme_call_s = 600\n").unwrap();
    let tools = dir.path().join("tools").display().to_string();
    let server = HttpServer::start(&home, dir.path(), &["--config", "slow.toml", "--tools", &tools], &[], &[]);
    let (first, second) = (server.session(&[]), server.session(&[]));
    let worker = children_of(server.child.id())[0];
    let before = cpu_ticks(worker);
    // The spinning call's stream stays open without a reply; its thread ends with the server.
    let (port, session) = (server.port, first.clone());
    std::thread::spawn(move || {
        let spin =
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "spin", "arguments": {}}}"#;
        post(port, &[("Mcp-Session-Id", &session)], spin)
    });
    crate::common::eventually("the loop to run in the worker", || cpu_ticks(worker) > before + 20);
    let cancel =
        r#"{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "test"}}"#;
    assert_eq!(server.post(&[("Mcp-Session-Id", &first)], cancel).status, 202);
    // Calls take turns at the one host: had the loop not stopped, this one would wait forever.
    let write = r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fs-write", "arguments": {"path": "after.txt", "content": "ran"}}}"#;
    let reply = server.post(&[("Mcp-Session-Id", &second)], write);
    assert!(!text_of(&reply.message()["result"]).1, "{reply:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("after.txt")).unwrap(), "ran");
}
