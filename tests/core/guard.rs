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

fn secrets_workspace() -> tempfile::TempDir {
    let dir = workspace(&[
        ("secrets/key.pem", "KEY-MATERIAL\n"),
        ("secrets/deep/other.txt", "KEY-MATERIAL deeper\n"),
        ("src/main.rs", "fn main() {} // KEY-MATERIAL is not here\n"),
        ("notes/private.txt", "KEY-MATERIAL in a note\n"),
    ]);
    std::os::unix::fs::symlink(dir.path().join("secrets"), dir.path().join("link")).unwrap();
    dir
}

#[test]
fn a_rule_for_a_folder_s_contents_covers_the_folder_itself_however_it_is_named() {
    let dir = secrets_workspace();
    let rule = Rule::new("fs-*", Action::Deny).unwrap().path("secrets/**").unwrap().reason("secrets stay private");
    let mut host = guarded(&dir, Guard::default().rule(rule));
    let absolute = dir.path().join("secrets").display().to_string();
    for path in ["secrets", "secrets/", "./secrets", "link", "link/", "secrets/deep", absolute.as_str()] {
        let record = host.call("fs-list", json!({"path": path}));
        let (kind, message) = err_of(&record);
        assert_eq!(kind, "denied", "fs-list {path}");
        assert!(message.contains("secrets stay private"), "fs-list {path}: {message}");
    }
    assert!(host.eval(r#"(fs-list "link")"#).is_err());
    // A rule on a folder covers what is in it.
    let folder = Rule::new("fs-read", Action::Deny).unwrap().path("notes").unwrap();
    let mut host = guarded(&dir, Guard::default().rule(folder));
    assert_eq!(err_of(&host.call("fs-read", json!({"path": "notes/private.txt"}))).0, "denied");
    assert!(ok_text(&host.call("fs-read", json!({"path": "src/main.rs"}))).contains("fn main"));
}

#[test]
fn listings_and_searches_leave_out_what_path_rules_hide_warm_or_cold() {
    let dir = secrets_workspace();
    let guard = Guard::default()
        .rule(Rule::new("*", Action::Deny).unwrap().path("secrets/**").unwrap())
        // Nobody can be asked about each entry of a listing: a confirm rule hides too.
        .rule(Rule::new("*", Action::Confirm).unwrap().path("notes/private.txt").unwrap());
    let mut host = guarded(&dir, guard);
    let listing = ok_text(&host.call("fs-list", json!({"path": ".", "depth": 5})));
    assert!(listing.contains("src/") && listing.contains("main.rs") && listing.contains("notes/"), "{listing}");
    for hidden in ["secrets", "key.pem", "deep", "other.txt", "private.txt"] {
        assert!(!listing.contains(hidden), "fs-list shows {hidden}:\n{listing}");
    }
    // The symlink is listed as what it is (a link, not followed), never as the folder's contents.
    assert!(listing.contains("link\n"), "{listing}");
    let expected = "src/main.rs:1:fn main() {} // KEY-MATERIAL is not here\n";
    let searches = |host: &mut toolhost::Host| {
        for glob in [None, Some("secrets/**"), Some("secrets/"), Some("*.pem"), Some("link/**"), Some("*.txt")] {
            let arguments = match glob {
                Some(glob) => json!({"pattern": "KEY-MATERIAL", "glob": glob}),
                None => json!({"pattern": "KEY-MATERIAL"}),
            };
            let found = ok_text(&host.call("index-grep", arguments));
            let wanted = if glob.is_none() { expected } else { "no matches\n" };
            assert_eq!(found, wanted, "index-grep with glob {glob:?}");
        }
        let total = host.eval_to_string(r#"(hash-ref (grep-matches "KEY-MATERIAL") "total")"#).unwrap();
        assert_eq!(total, "1");
    };
    searches(&mut host);
    assert!(host.search_index().wait_ready(std::time::Duration::from_secs(60)), "{:?}", host.search_index().stats());
    searches(&mut host);
    assert_eq!(host.search_index().stats().state, "ready");
}

#[test]
fn a_confirmed_listing_shows_what_its_own_rule_covers_and_hides_the_rest() {
    let dir = secrets_workspace();
    let guard = Guard::default()
        .rule(Rule::new("fs-list", Action::Confirm).unwrap().path("secrets/**").unwrap())
        .rule(Rule::new("fs-list", Action::Deny).unwrap().path("secrets/deep/**").unwrap())
        .confirmer(toolhost::guard::always_yes("test-person"));
    let mut host = guarded(&dir, guard);
    let inside = ok_text(&host.call("fs-list", json!({"path": "secrets"})));
    assert!(inside.contains("key.pem"), "{inside}");
    assert!(!inside.contains("deep") && !inside.contains("other.txt"), "{inside}");
    let above = ok_text(&host.call("fs-list", json!({"path": "."})));
    assert!(!above.contains("secrets") && !above.contains("key.pem"), "{above}");
}
