//! The REPL: Scheme input read until its parentheses balance, tool-name completion, history, and
//! commands (`:tools`, `:help NAME`, `:call NAME JSON`, `:reload`, `:load FILE`). `respond` holds everything it does with a
//! complete input, so scripts and tests drive it without a terminal.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Context, Editor, Helper};

use crate::host::{Host, Interrupter};

const HELP: &str = "\
Type Scheme to evaluate it; tools are procedures: (fs-read \"src/main.rs\" 120 50)
Input continues on the next line until its parentheses balance.
  :tools             list the tools
  :help NAME         a tool's signature, description and parameters
  :call NAME JSON    call a tool with JSON arguments, exactly as a model's call runs
  :reload            load the tool files again; says which tools were added, changed, removed
                     (the workspace's own load only while trusted, as at start-up)
  :load FILE         load one more tool file (and again on each :reload)
  :quit              leave (also Ctrl-D)";

/// Whether `input` is a complete Scheme input: every `(`/`[` closed, outside strings, character
/// literals and comments. Extra closers count as complete, so steel reports them.
///
/// ```
/// use toolhost::repl::is_complete;
/// assert!(is_complete("(fs-read \"a)\" 1)"));
/// assert!(!is_complete("(fs-read \"a.txt\"\n  120"));
/// assert!(is_complete("; (\n(+ 1 #\\()"));
/// ```
pub fn is_complete(input: &str) -> bool {
    let mut depth: i64 = 0;
    let mut chars = input.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            ';' => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            '#' if chars.peek() == Some(&'\\') => {
                chars.next();
                chars.next();
            }
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
    }
    !in_string && depth <= 0
}

/// What the REPL prints for one complete input; `None` to quit.
pub fn respond(host: &mut Host, input: &str) -> Option<String> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Some(String::new());
    }
    if let Some(command) = trimmed.strip_prefix(':') {
        let (word, rest) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
        let rest = rest.trim();
        return match word {
            "q" | "quit" | "exit" => None,
            "tools" => Some(tools_listing(host)),
            "help" if rest.is_empty() => Some(HELP.to_string()),
            "help" => Some(tool_help(host, rest)),
            "call" => {
                let (name, json) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                if name.is_empty() {
                    return Some(
                        "usage: :call NAME JSON, e.g. :call fs-read {\"path\": \"README.md\", \"count\": 5}".into(),
                    );
                }
                let outcome = host.call_json(name, json.trim());
                let mut out = outcome.notes.iter().map(|n| format!("note: {n}\n")).collect::<String>();
                out.push_str(&outcome.model_text());
                Some(out)
            }
            "reload" | "r" => Some(host.reload().to_string()),
            "load" if rest.is_empty() => Some("usage: :load FILE, e.g. :load tools/word-count.scm".to_string()),
            "load" => Some(load_command(host, rest)),
            _ => Some(format!("unknown command :{word}\n{HELP}")),
        };
    }
    let answer = match host.eval_printed(input) {
        Ok(text) => text,
        Err(e) => match (e.file(), e.line()) {
            // An error inside a tool file: where, and the line itself.
            (Some(file), Some(line)) if file != "<eval>" => {
                let shown = host.source_line(file, line).map(|text| format!("\n  {line} | {}", text.trim_end()));
                format!("error: {file}:{line}: {}{}", e.message(), shown.unwrap_or_default())
            }
            // Where, when the input had more than one line to be wrong in.
            (_, Some(line)) if input.trim_end().contains('\n') => format!("error (line {line}): {}", e.message()),
            _ => format!("error: {}", e.message()),
        },
    };
    // Output a script displayed without a newline stays on its own line.
    crate::engine::end_display_line();
    Some(answer)
}

/// `:load FILE`: a path relative to the current folder, or else to the workspace.
fn load_command(host: &mut Host, file: &str) -> String {
    let given = PathBuf::from(file);
    let path = if given.exists() { given } else { host.workspace().root().join(file) };
    if !path.is_file() {
        return format!("error: there is no file {file}");
    }
    host.load_tool_file(&path).to_string()
}

fn tools_listing(host: &Host) -> String {
    let specs = host.specs();
    let mut out = String::new();
    for tool in specs.iter() {
        let summary = tool.description.split(". ").next().unwrap_or("").trim_end_matches('.');
        out.push_str(&format!("{}\n    {summary}\n", tool.signature.render()));
    }
    out.trim_end().to_string()
}

/// `:help NAME`: the signature, the description and each parameter.
pub fn tool_help(host: &Host, name: &str) -> String {
    let Some(tool) = host.tool(name) else {
        return format!("there is no tool called \"{name}\"; :tools lists them");
    };
    let sig = tool.signature();
    let mut out = format!("{}\n\n{}\n", sig.render(), tool.spec.description);
    if !sig.params.is_empty() || sig.rest.is_some() {
        out.push('\n');
    }
    for param in sig.params.iter().chain(sig.rest.as_ref()) {
        let how = if sig.rest.as_ref() == Some(param) {
            "any number"
        } else if param.optional {
            "optional"
        } else {
            "required"
        };
        out.push_str(&format!("  {} ({}, {how}): {}\n", param.name, param.ty.name(), param.description));
    }
    out.trim_end().to_string()
}

/// Completes the word before `pos` in `line` from `words` (tool names and REPL commands): the
/// position the completion replaces from, and the candidates.
///
/// ```
/// let words = vec!["fs-read".to_string(), "fs-write".to_string(), "index-grep".to_string()];
/// assert_eq!(toolhost::repl::complete(&words, "(fs-r", 5), (1, vec!["fs-read".to_string()]));
/// assert_eq!(toolhost::repl::complete(&words, "(fs-", 4).1.len(), 2);
/// ```
pub fn complete(words: &[String], line: &str, pos: usize) -> (usize, Vec<String>) {
    let Some(head) = line.get(..pos) else { return (pos, Vec::new()) };
    let start = head.rfind(|c: char| c.is_whitespace() || c == '(' || c == '[' || c == '\'').map_or(0, |i| i + 1);
    let prefix = &head[start..];
    if prefix.is_empty() {
        return (pos, Vec::new());
    }
    (start, words.iter().filter(|w| w.starts_with(prefix)).cloned().collect())
}

struct ReplHelper {
    words: Vec<String>,
}

impl Completer for ReplHelper {
    type Candidate = String;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(complete(&self.words, line, pos))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, _default: bool) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for ReplHelper {}

impl Helper for ReplHelper {}

fn completion_words(host: &Host) -> Vec<String> {
    let mut words: Vec<String> = host.specs().iter().map(|t| t.name().to_string()).collect();
    words.extend(host.scheme_names().into_iter().filter(|n| !n.starts_with('%') && !n.starts_with('#')));
    words.extend([":tools", ":help", ":call", ":reload", ":load", ":quit"].map(String::from));
    words.sort();
    words.dedup();
    words
}

/// Makes Ctrl-C (SIGINT) stop whatever the host runs: a Scheme loop at its next instruction, a
/// `shell-exec` command with its whole process group at once. A second Ctrl-C during the same run
/// (a tool that cannot be stopped) ends the process. Returns the count of presses, which the
/// caller sets to 0 as each run begins.
pub(crate) fn on_interrupt(interrupter: Interrupter) -> Arc<AtomicUsize> {
    let presses = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&presses);
    let handler = move || {
        if seen.fetch_add(1, Ordering::SeqCst) >= 1 {
            eprintln!("\ntoolhost: interrupted twice; quitting");
            std::process::exit(130);
        }
        interrupter.interrupt();
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        eprintln!("toolhost: Ctrl-C will not interrupt evaluations: {e}");
    }
    presses
}

fn history_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOOLHOST_HISTORY") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".toolhost_history"))
}

/// Runs the REPL on the terminal until `:quit` or end of input. Returns the exit code.
pub fn run(mut host: Host) -> i32 {
    let config = rustyline::Config::builder().completion_type(CompletionType::List).build();
    let mut editor: Editor<ReplHelper, DefaultHistory> = match Editor::with_config(config) {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("toolhost: cannot start the line editor: {e}");
            return 1;
        }
    };
    editor.set_helper(Some(ReplHelper { words: completion_words(&host) }));
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    // Ctrl-C while an evaluation runs stops it (at the prompt, the line editor handles it).
    let interrupts = on_interrupt(host.interrupter());
    println!("toolhost REPL: {} tools. :help for help, :quit to leave.", host.registry().len());
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() { "toolhost> " } else { "     ...> " };
        host.clear_interrupt();
        match editor.readline(prompt) {
            Ok(line) => {
                if !pending.is_empty() {
                    pending.push('\n');
                }
                pending.push_str(&line);
                if !pending.trim_start().starts_with(':') && !is_complete(&pending) {
                    continue;
                }
                let input = std::mem::take(&mut pending);
                if !input.trim().is_empty() {
                    let _ = editor.add_history_entry(input.as_str());
                }
                interrupts.store(0, Ordering::SeqCst);
                let answer = respond(&mut host, &input);
                // The input may have registered tools: complete their names too.
                if let Some(helper) = editor.helper_mut() {
                    helper.words = completion_words(&host);
                }
                match answer {
                    None => break,
                    Some(out) if out.is_empty() => {}
                    Some(out) => println!("{out}"),
                }
            }
            Err(ReadlineError::Interrupted) => {
                pending.clear();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("toolhost: {e}");
                break;
            }
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    0
}
