//! The README's worked example of a tool file, run as the README says it runs.

use crate::common;

use common::*;
use serde_json::json;

/// The first ```scheme block of the README: the word-count tool file.
fn readme_tool_file() -> String {
    let readme = include_str!("../../README.md");
    let start = readme.find("```scheme\n").expect("a scheme block") + "```scheme\n".len();
    let len = readme[start..].find("```").expect("the block ends");
    readme[start..start + len].to_string()
}

#[test]
fn the_readme_word_count_tool_works_from_scheme_and_json() {
    let text = "one two three\nfour fivefive sixsixsix\n";
    let dir = workspace(&[("words.txt", text), (".toolhost/tools/word-count.scm", &readme_tool_file())]);
    let mut host = host(&dir);
    assert_eq!(host.eval_to_string(r#"(word-count "words.txt")"#).unwrap(), "6");
    assert_eq!(host.eval_to_string(r#"(word-count "words.txt" 8)"#).unwrap(), "2");
    assert_eq!(host.call("word-count", json!({"path": "words.txt", "min-length": 8})).result.unwrap(), json!(2));
    let (kind, message) = err_of(&host.call("word-count", json!({"path": "words.txt", "limit": 8})));
    assert_eq!(kind, "unknown_argument");
    assert_eq!(message, "word-count has no parameter \"limit\"; its parameters are path, min-length");
    assert!(toolhost::repl::tool_help(&host, "word-count").starts_with("(word-count path [min-length])"));
}
