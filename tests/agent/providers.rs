//! `toolhost agent` against each API it speaks, on a real HTTP server on 127.0.0.1 playing the
//! model: Anthropic's Messages and OpenAI's Responses besides chat completions, whole and streamed
//! (tool calls split across many deltas, a stream cut short), retries on 429 and 529, usage in the
//! log and on standard error, provider presets and the API key's scope, and llama-server's
//! `/props` check. Every request body is checked against the provider's schema.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::model_server::{
    assert_conforms, assert_conforms_anthropic, assert_conforms_responses, Events, ModelServer, Received, Reply,
    Scripted,
};
use common::*;
use serde_json::{json, Value};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `toolhost agent ARGS` in `dir` with `home`, `env` set and the preset keys of the real
/// environment removed, no input.
fn agent(home: &Home, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut full = vec!["agent"];
    full.extend_from_slice(args);
    let mut command = home.command(dir, &full);
    for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"] {
        command.env_remove(key);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.stdin(std::process::Stdio::null()).output().expect("toolhost runs")
}

/// A workspace with a file to read.
fn files() -> tempfile::TempDir {
    workspace(&[("a.txt", "alpha\n")])
}

/// The model reads a.txt and a file that is not there in one reply, then answers.
fn two_calls_then_answer() -> [Reply; 2] {
    [
        Reply::calls(&[
            ("call_A", "fs-read", r#"{"path":"a.txt"}"#),
            ("call_B", "fs-read", r#"{"path":"missing.txt"}"#),
        ])
        .with_text("Reading both.")
        .usage(1200, 40, 0),
        Reply::text("a.txt says alpha.").usage(1300, 12, 1024),
    ]
}

fn reply_lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "reply")
        .collect()
}

// ---- Anthropic Messages ----

#[test]
fn an_anthropic_session_sends_results_in_one_user_message_with_errors_marked() {
    let (dir, home) = (files(), Home::new());
    let [first, second] = two_calls_then_answer();
    let server = ModelServer::start(vec![first.anthropic(), second.anthropic()]);
    let out = agent(
        &home,
        dir.path(),
        &[
            "--api",
            "anthropic",
            "--base-url",
            &server.base_url(),
            "--model",
            "claude-test",
            "--api-key-env",
            "MY_KEY",
            "--no-stream",
            "Read a.txt.",
        ],
        &[("MY_KEY", "sk-ant-test")],
    );
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "a.txt says alpha.\n".to_string()), "{}", stderr(&out));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/v1/messages"));
        assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.header("authorization"), None);
        assert_conforms_anthropic(&request.json());
    }
    let body = requests[1].json();
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.last().unwrap()["cache_control"], json!({"type": "ephemeral"}), "the catalogue is cached");
    assert!(tools[..tools.len() - 1].iter().all(|t| t.get("cache_control").is_none()));
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "call_A", "name": "fs-read", "input": {"path": "a.txt"}})
    );
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!((messages[2]["role"].as_str(), results.len()), (Some("user"), 2));
    assert_eq!((results[0]["tool_use_id"].as_str(), results[0].get("is_error")), (Some("call_A"), None));
    assert!(results[0]["content"].as_str().unwrap().contains("alpha"));
    assert_eq!((results[1]["tool_use_id"].as_str(), results[1]["is_error"].as_bool()), (Some("call_B"), Some(true)));
    assert!(
        results[1]["content"].as_str().unwrap().starts_with("error (tool_failed): fs-read: no such file"),
        "{}",
        results[1]
    );
}

#[test]
fn pformat_works_over_the_anthropic_api() {
    let (dir, home) = (files(), Home::new());
    let server = ModelServer::start(vec![
        Reply::text("<tool_call>fs-read[0|a.txt]</tool_call>").anthropic(),
        Reply::text("It says alpha.").anthropic(),
    ]);
    let out = agent(
        &home,
        dir.path(),
        &[
            "--api",
            "anthropic",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--dialect",
            "pformat",
            "--no-stream",
            "Read a.txt.",
        ],
        &[],
    );
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "It says alpha.\n".to_string()), "{}", stderr(&out));
    let body = server.requests()[1].json();
    assert_conforms_anthropic(&body);
    assert!(body.get("tools").is_none(), "P-format sends no tools");
    assert!(body["system"][0]["text"].as_str().unwrap().contains("fs-read"), "the catalogue is in the system prompt");
    let last = &body["messages"][2];
    assert_eq!(last["role"], "user");
    assert!(last["content"].as_str().unwrap().contains("<tool_result call=\"1\" tool=\"fs-read\">"), "{last}");
}

#[test]
fn overloaded_and_rate_limited_anthropic_requests_are_retried_after_retry_after() {
    let (dir, home) = (files(), Home::new());
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let limited = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let server = ModelServer::start(vec![
        Scripted::raw(529, overloaded).header("retry-after", "0"),
        Scripted::raw(429, limited).header("retry-after", "0"),
        Reply::text("done").anthropic(),
    ]);
    let out = agent(
        &home,
        dir.path(),
        &["--api", "anthropic", "--base-url", &server.base_url(), "--model", "m", "--no-stream", "Go."],
        &[],
    );
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "done\n".to_string()), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn an_overloaded_error_event_before_any_text_is_retried_and_one_after_text_is_not() {
    let (dir, home) = (files(), Home::new());
    let overloaded = (
        Some("error"),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(),
    );
    let text = Reply::text("Partial answer").anthropic_events();
    let mut after_text = text[..5].to_vec();
    after_text.push(overloaded.clone());
    let server = ModelServer::start(vec![
        Scripted::events(&[text[0].clone(), overloaded]),
        Scripted::events(&Reply::text("done").anthropic_events()),
        Scripted::events(&after_text),
    ]);
    let args = ["--api", "anthropic", "--base-url", &server.base_url(), "--model", "m", "Go."].map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = agent(&home, dir.path(), &args, &[]);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "done\n".to_string()), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 2, "the overloaded stream was sent again");
    let out = agent(&home, dir.path(), &args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("overloaded_error"), "{}", stderr(&out));
    assert_eq!(server.requests().len(), 3, "text had been shown: not sent again");
}

#[test]
fn an_answer_cut_at_max_tokens_is_reported_and_its_cut_call_not_run() {
    let (dir, home) = (files(), Home::new());
    let cut = Reply::calls(&[("call_A", "fs-write", r#"{"path":"b.txt","content":"x"}"#)])
        .with_text("The answer is")
        .stop("max_tokens");
    let server = ModelServer::start(vec![cut.anthropic()]);
    let out = agent(
        &home,
        dir.path(),
        &["--api", "anthropic", "--base-url", &server.base_url(), "--model", "m", "--no-stream", "Go."],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "The answer is\n");
    assert!(stderr(&out).contains("the answer was cut"), "{}", stderr(&out));
    assert!(!dir.path().join("b.txt").exists(), "the call cut at the limit did not run");
}

// ---- OpenAI Responses ----

#[test]
fn a_responses_session_answers_each_function_call_by_its_call_id() {
    let (dir, home) = (files(), Home::new());
    let [first, second] = two_calls_then_answer();
    let server = ModelServer::start(vec![first.responses(), second.responses()]);
    let out = agent(
        &home,
        dir.path(),
        &[
            "--api",
            "responses",
            "--base-url",
            &server.base_url(),
            "--model",
            "gpt-test",
            "--strict",
            "--no-stream",
            "Read a.txt.",
        ],
        &[],
    );
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "a.txt says alpha.\n".to_string()), "{}", stderr(&out));
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));
    for request in &requests {
        assert_conforms_responses(&request.json());
    }
    let body = requests[1].json();
    assert_eq!(body["store"], false);
    assert!(body["instructions"].as_str().unwrap().contains("agent"));
    let tools = body["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["strict"] == true), "--strict sends strict tools: {tools:?}");
    let input = body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap_or("message")).collect();
    assert_eq!(
        kinds,
        ["message", "message", "function_call", "function_call", "function_call_output", "function_call_output"]
    );
    assert_eq!(input[4]["call_id"], "call_A");
    assert!(input[5]["output"].as_str().unwrap().starts_with("error (tool_failed): fs-read: no such file"));
}

// ---- streaming, all three ----

/// The same two replies served whole and streamed: the streamed session shows its text on the
/// terminal as it arrives, and both logs hold the same replies.
fn streamed_and_whole_log_the_same(
    api: &str,
    whole: fn(&Reply) -> Scripted,
    events: fn(&Reply) -> Events,
) -> Vec<Received> {
    let (home, logs) = (Home::new(), tempfile::tempdir().unwrap());
    let replies = two_calls_then_answer();
    let mut runs = Vec::new();
    let mut requests = Vec::new();
    for streamed in [false, true] {
        let dir = files();
        let script = replies.iter().map(|r| if streamed { Scripted::events(&events(r)) } else { whole(r) }).collect();
        let server = ModelServer::start(script);
        let log = logs.path().join(format!("{api}-{streamed}.jsonl"));
        let log_arg = log.to_string_lossy().into_owned();
        let mut args = vec!["--api", api, "--model", "m", "--log", &log_arg];
        let url = server.base_url();
        args.extend(["--base-url", url.as_str()]);
        if !streamed {
            args.push("--no-stream");
        }
        args.push("Read a.txt.");
        let out = agent(&home, dir.path(), &args, &[]);
        assert_eq!(
            (out.status.code(), stdout(&out)),
            (Some(0), "a.txt says alpha.\n".to_string()),
            "{api} streamed={streamed}: {}",
            stderr(&out)
        );
        // Standard output is no terminal here: streamed text goes to standard error, as it comes.
        assert_eq!(stderr(&out).contains("Reading both."), streamed, "{}", stderr(&out));
        let sent = server.requests();
        assert_eq!(sent[0].json().get("stream").is_some(), streamed);
        runs.push(reply_lines(&log));
        requests.extend(sent);
    }
    assert_eq!(runs[0], runs[1], "{api}: the log does not depend on streaming");
    assert_eq!(
        runs[1][0]["tool_calls"][1]["function"]["arguments"], r#"{"path":"missing.txt"}"#,
        "assembled from 3-character deltas"
    );
    requests
}

#[test]
fn streamed_chat_completions_log_what_whole_ones_do() {
    for request in streamed_and_whole_log_the_same("chat", Reply::chat, Reply::chat_events) {
        assert_conforms(&request.json());
    }
}

#[test]
fn streamed_anthropic_messages_log_what_whole_ones_do() {
    for request in streamed_and_whole_log_the_same("anthropic", Reply::anthropic, Reply::anthropic_events) {
        assert_conforms_anthropic(&request.json());
    }
}

#[test]
fn streamed_responses_log_what_whole_ones_do() {
    for request in streamed_and_whole_log_the_same("responses", Reply::responses, Reply::responses_events) {
        assert_conforms_responses(&request.json());
    }
}

#[test]
fn a_stream_cut_short_is_an_error_naming_what_arrived() {
    let reply = Reply::calls(&[("call_A", "fs-read", r#"{"path":"a.txt"}"#)]).with_text("Reading.");
    let cases: [(&str, Events, &str); 3] = [
        ("chat", reply.chat_events(), "[DONE]"),
        ("anthropic", reply.anthropic_events(), "message_stop"),
        ("responses", reply.responses_events(), "response.completed"),
    ];
    for (api, events, marker) in cases {
        let (dir, home) = (files(), Home::new());
        // Cut in the middle of the call's arguments.
        let at = events.iter().position(|(_, data)| data.contains("\"ath\"")).expect("an arguments delta") + 1;
        let server = ModelServer::start(vec![Scripted::events(&events[..at])]);
        let out =
            agent(&home, dir.path(), &["--api", api, "--base-url", &server.base_url(), "--model", "m", "Go."], &[]);
        assert_eq!(out.status.code(), Some(1), "{api}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("stopped after 8 characters of text and 1 tool call (1 with arguments cut short)"),
            "{api}: {err}"
        );
        assert!(err.contains(marker), "{api}: {err}");
    }
}

// ---- usage ----

#[test]
fn usage_goes_to_the_log_as_stats_reads_it_and_a_summary_to_stderr() {
    let (dir, home, logs) = (files(), Home::new(), tempfile::tempdir().unwrap());
    let [first, second] = two_calls_then_answer();
    let server = ModelServer::start(vec![
        Scripted::events(&first.anthropic_events()),
        Scripted::events(&second.anthropic_events()),
    ]);
    let log = logs.path().join("s.jsonl");
    let out = agent(
        &home,
        dir.path(),
        &[
            "--api",
            "anthropic",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--log",
            log.to_str().unwrap(),
            "Read a.txt.",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let replies = reply_lines(&log);
    assert_eq!(replies[0]["usage"], json!({"input_tokens": 1200, "output_tokens": 40, "cached_tokens": 0}));
    assert_eq!(replies[1]["usage"], json!({"input_tokens": 1300, "output_tokens": 12, "cached_tokens": 1024}));
    assert!(stderr(&out).contains("tokens: input 2500 (cached 1024), output 52 in 2 turns"), "{}", stderr(&out));
    let stats = home.run(dir.path(), &["stats", log.to_str().unwrap()], None);
    assert!(stdout(&stats).contains("input 2500 (cached 1024), output 52"), "{}", stdout(&stats));
}

// ---- presets and the key's scope ----

#[test]
fn a_presets_key_goes_only_to_its_own_host() {
    let (dir, home) = (files(), Home::new());
    let server = ModelServer::start(vec![Reply::text("one").responses(), Reply::text("two").responses()]);
    let url = server.base_url();
    let key = [("OPENAI_API_KEY", "sk-openai-secret")];
    // The openai preset's API, but another host: the preset's key stays home.
    let out = agent(
        &home,
        dir.path(),
        &["--provider", "openai", "--base-url", &url, "--model", "m", "--no-stream", "Hi."],
        &key,
    );
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "one\n".to_string()), "{}", stderr(&out));
    let first = &server.requests()[0];
    assert_eq!(first.path, "/v1/responses", "the openai preset speaks the Responses API");
    assert_eq!(first.header("authorization"), None);
    // Named by the user on the command line: sent.
    let out = agent(
        &home,
        dir.path(),
        &[
            "--provider",
            "openai",
            "--base-url",
            &url,
            "--model",
            "m",
            "--api-key-env",
            "OPENAI_API_KEY",
            "--no-stream",
            "Hi.",
        ],
        &key,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.requests()[1].header("authorization"), Some("Bearer sk-openai-secret"));
}

#[test]
fn a_missing_preset_key_names_its_variable() {
    let (dir, home) = (files(), Home::new());
    // Fails before any request: the key is read first.
    let out = agent(
        &home,
        dir.path(),
        &["--provider", "anthropic", "--model", "m", "Hi."],
        &[("HTTPS_PROXY", "http://127.0.0.1:9")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("ANTHROPIC_API_KEY"), "{}", stderr(&out));
}

#[test]
fn a_projects_config_cannot_send_the_users_key_to_its_base_url() {
    let (home, server) = (Home::new(), ModelServer::start(vec![Reply::text("one").chat(), Reply::text("two").chat()]));
    let dir = files();
    write(
        dir.path(),
        "toolhost.toml",
        &format!("[provider]\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"USER_SECRET\"\n", server.base_url()),
    );
    assert_eq!(home.run(dir.path(), &["trust"], None).status.code(), Some(0));
    let secret = [("USER_SECRET", "very-secret")];
    let out = agent(&home, dir.path(), &["--no-stream", "Hi."], &secret);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "one\n".to_string()), "{}", stderr(&out));
    assert_eq!(server.requests()[0].header("authorization"), None, "the project named the variable");
    assert!(stderr(&out).contains("cannot choose"), "{}", stderr(&out));
    // The user's own config names the variable; the project's base URL still gets no key.
    write(&home.toolhost_config_dir(), "config.toml", "[provider]\napi_key_env = \"USER_SECRET\"\n");
    write(dir.path(), "toolhost.toml", &format!("[provider]\nbase_url = \"{}\"\nmodel = \"m\"\n", server.base_url()));
    assert_eq!(home.run(dir.path(), &["trust"], None).status.code(), Some(0));
    let out = agent(&home, dir.path(), &["--no-stream", "Hi."], &secret);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.requests()[1].header("authorization"), None);
    assert!(stderr(&out).contains("pass --base-url"), "{}", stderr(&out));
}

// ---- llama-server ----

#[test]
fn llama_server_whose_template_drops_tools_gets_pformat_and_says_so() {
    let (dir, home) = (files(), Home::new());
    let no_tools = json!({"chat_template_caps": {"supports_tools": false, "supports_tool_calls": false}, "model_path": "small.gguf"});
    let tools = json!({"chat_template_caps": {"supports_tools": true, "supports_tool_calls": true}});
    let server = ModelServer::start(vec![
        Scripted::raw(200, &no_tools.to_string()),
        Reply::text("hi").chat(),
        Scripted::raw(200, &tools.to_string()),
        Reply::text("hi").chat(),
        Scripted::raw(404, "not found"),
        Reply::text("hi").chat(),
    ]);
    let url = server.base_url();
    let args = ["--provider", "llama-server", "--base-url", url.as_str(), "--model", "m", "--no-stream", "Hi."];
    for _ in 0..3 {
        let out = agent(&home, dir.path(), &args, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        if server.requests().len() == 2 {
            assert!(
                stderr(&out).contains("cannot take tools (llama-server /props: supports_tools=false"),
                "{}",
                stderr(&out)
            );
        } else {
            assert!(!stderr(&out).contains("cannot take tools"), "{}", stderr(&out));
        }
    }
    let requests = server.requests();
    assert_eq!(
        requests.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect::<Vec<_>>()[..2],
        [("GET", "/props"), ("POST", "/v1/chat/completions")]
    );
    assert!(requests[1].json().get("tools").is_none(), "P-format: no tools");
    assert!(
        requests[1].json()["messages"][0]["content"].as_str().unwrap().contains("<tool_call"),
        "the P-format prompt"
    );
    assert!(requests[3].json()["tools"].is_array(), "the template takes tools: native");
    assert!(requests[5].json()["tools"].is_array(), "no /props: native");
}

#[test]
fn on_a_terminal_a_streamed_answer_is_shown_once() {
    let (dir, home) = (files(), Home::new());
    let server =
        ModelServer::start(vec![Scripted::events(&Reply::text("The answer, streamed.").usage(10, 5, 0).chat_events())]);
    let url = server.base_url();
    let screen = on_terminal(&home, dir.path(), &["agent", "--base-url", &url, "--model", "m", "Answer."], "");
    assert_eq!(screen.matches("The answer, streamed.").count(), 1, "{screen}");
    assert!(screen.contains("tokens: input 10 (cached 0), output 5 in 1 turn"), "{screen}");
}

#[test]
fn the_gemini_preset_sends_gemini_s_schema_dialect_and_maps_its_parameter_names_back() {
    let (dir, home) = (files(), Home::new());
    let server = ModelServer::start(vec![
        Reply::calls(&[("call_1", "fs-edit", r#"{"path":"a.txt","old":"alpha","new":"beta","replace_all":true}"#)])
            .chat(),
        Reply::text("Edited.").chat(),
    ]);
    let url = server.base_url();
    let out = agent(
        &home,
        dir.path(),
        &["--provider", "gemini", "--base-url", &url, "--model", "m", "--no-stream", "--yes", "Edit a.txt."],
        &[("GEMINI_API_KEY", "gemini-secret")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The call Gemini made with `replace_all` reached fs-edit as `replace-all`.
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "beta\n");
    let first = server.requests()[0].json();
    let tools = first["tools"].as_array().expect("tools sent");
    let edit = tools.iter().find(|t| t["function"]["name"] == "fs-edit").expect("fs-edit offered");
    let properties = &edit["function"]["parameters"]["properties"];
    assert!(properties.get("replace_all").is_some() && properties.get("replace-all").is_none(), "{properties}");
    // None of the keywords Gemini's function declarations refuse.
    let text = first["tools"].to_string();
    for refused in ["additionalProperties", "$schema", "$ref"] {
        assert!(!text.contains(refused), "{refused} sent to Gemini: {text}");
    }
}
