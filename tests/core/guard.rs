//! Guard rules on a real host: by tool, by path, the first match deciding, reasons reaching the
//! model, and the decision kept in the call record.

use crate::common;

use std::sync::{Arc, Mutex};

use common::*;
use serde_json::json;
use toolhost::guard::{Action, Answer, ConfirmRequest, Guard, Rule};
use toolhost::{Decision, HostBuilder};

fn guarded(dir: &tempfile::TempDir, guard: Guard) -> toolhost::Host {
    let host = HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    host
}

#[test]
fn a_path_rule_denies_only_the_paths_it_matches_with_its_reason() {
    let dir = workspace(&[("secrets/key.pem", "KEY\n"), ("src/main.rs", "fn main() {}\n")]);
    let rule = Rule::new("fs-*", Action::Deny).unwrap().path("secrets/**").unwrap().reason("secrets stay private");
    let mut host = guarded(&dir, Guard::default().rule(rule));
    let (kind, message) = err_of(&host.call("fs-read", json!({"path": "secrets/key.pem"})));
    assert_eq!(kind, "denied");
    assert!(message.contains("secrets stay private"), "{message}");
    // Written another way, the path resolves to the same file and the rule still matches.
    let absolute = dir.path().join("secrets/./key.pem").display().to_string();
    assert_eq!(err_of(&host.call("fs-read", json!({"path": absolute}))).0, "denied");
    assert_eq!(err_of(&host.call("fs-write", json!({"path": "secrets/new", "content": "x"}))).0, "denied");
    assert!(!dir.path().join("secrets/new").exists());
    assert!(ok_text(&host.call("fs-read", json!({"path": "src/main.rs"}))).contains("fn main"));
    // A Scheme tool that reads through fs-read is judged on each nested call too.
    let (kind, _) = err_of(&host.call("read-around", json!({"path": "secrets/key.pem", "line": 1})));
    assert_eq!(kind, "denied");
    assert!(host.eval(r#"(file-lines "secrets/key.pem")"#).is_err());
    assert_eq!(host.eval_to_string(r#"(car (file-lines "src/main.rs"))"#).unwrap(), "fn main() {}");
}

#[test]
fn the_first_matching_rule_decides_and_the_record_names_it() {
    let dir = workspace(&[("docs/a.md", "a\n")]);
    let guard = Guard::default()
        .default_action(Action::Deny)
        .rule(Rule::new("fs-read", Action::Allow).unwrap().path("docs/**").unwrap().origin("test:1"))
        .rule(Rule::new("fs-*", Action::Deny).unwrap().reason("only docs may be read"))
        .rule(Rule::new("fs-read", Action::Allow).unwrap());
    let mut host = guarded(&dir, guard);
    let allowed = host.call("fs-read", json!({"path": "docs/a.md"}));
    ok_text(&allowed);
    let Some(Decision::Allow { rule: Some(rule) }) = &allowed.decision else { panic!("{:?}", allowed.decision) };
    assert_eq!((rule.index, rule.tool.as_str(), rule.path.as_deref()), (1, "fs-read", Some("docs/**")));
    assert_eq!(rule.origin.as_deref(), Some("test:1"));
    let denied = host.call("fs-read", json!({"path": "a.txt"}));
    assert!(err_of(&denied).1.contains("only docs may be read"));
    assert!(matches!(&denied.decision, Some(Decision::Deny { rule: Some(r), .. }) if r.index == 2));
    // No rule matches shell-exec: the default denies it.
    let by_default = host.call("shell-exec", json!({"cmd": "true"}));
    assert_eq!(err_of(&by_default).0, "denied");
    assert!(matches!(&by_default.decision, Some(Decision::Deny { rule: None, .. })));
}

#[test]
fn confirm_asks_with_the_preview_and_records_the_answer_and_who_gave_it() {
    let dir = workspace(&[]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let confirmer = Arc::new(move |request: &ConfirmRequest<'_>| {
        seen.lock().unwrap().push(request.preview.to_string());
        Answer { yes: request.preview.contains("echo yes"), by: "test-person".into() }
    });
    let guard = Guard::default().rule(Rule::new("shell-exec", Action::Confirm).unwrap()).confirmer(confirmer);
    let mut host = guarded(&dir, guard);
    let yes = host.call("shell-exec", json!({"cmd": "echo yes"}));
    assert!(ok_text(&yes).contains("yes"));
    assert!(matches!(&yes.decision, Some(Decision::Confirm { answer: true, by, .. }) if by == "test-person"));
    let no = host.call("shell-exec", json!({"cmd": "touch made"}));
    assert!(err_of(&no).1.contains("declined"));
    assert!(!dir.path().join("made").exists());
    assert_eq!(*asked.lock().unwrap(), ["$ echo yes", "$ touch made"]);
}

#[test]
fn confirm_without_anyone_to_ask_denies_and_says_a_confirmation_was_needed() {
    let dir = workspace(&[]);
    let mut host = guarded(&dir, Guard::default().rule(Rule::new("fs-write", Action::Confirm).unwrap()));
    let record = host.call("fs-write", json!({"path": "x.txt", "content": "x"}));
    let (kind, message) = err_of(&record);
    assert_eq!(kind, "denied");
    assert!(message.contains("needs a person's confirmation"), "{message}");
    assert!(matches!(&record.decision, Some(Decision::Confirm { answer: false, by, .. }) if by == "nobody"));
    assert!(!dir.path().join("x.txt").exists());
}

#[test]
fn a_bad_glob_is_refused_when_the_rule_is_made() {
    let err = Rule::new("fs-[", Action::Deny).unwrap_err();
    assert_eq!(err.kind().as_str(), "config_error");
    assert!(Rule::new("fs-*", Action::Deny).unwrap().path("a/{b").is_err());
}
