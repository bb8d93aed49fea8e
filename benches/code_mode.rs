//! Code mode against one JSON call per round trip (issue 20, design section 20): a small suite of
//! multi-step tasks on a real tree, each done twice by a scripted model, once with the JSON tools
//! (one `Host::call_json` per round trip) and once with the `scheme` program tool. For each way it
//! counts the round trips and the bytes of tool output that reach the model (`model_text()`), and
//! the bytes the model writes (arguments, programs); both ways must reach the same answer, or the
//! bench exits non-zero. Targets: the suite's tool output at most 0.2x, and the code-mode
//! catalogue at most 0.35x the JSON schemas of the same tools (OpenAI, Anthropic and MCP shapes).
//! Tokens are estimated as bytes / 4 (no tokenizer is a dependency).
//!
//! The tree is a copy of this checkout's `src/` and `tests/` in a temporary folder, a fresh one for
//! each way of each task (the rename edits it), so the figures are fixed for a given checkout. The
//! scripted models decide each call from what the previous ones returned, as a model would: they
//! parse the tools' text (the JSON way) or write a program that does the same steps (the code
//! way). Both use the search, read, list and edit tools only, not `shell-exec`: a shell one-liner
//! (`grep -c ... | sort`) would do some of these tasks in one call either way. The tasks: the five
//! files with the most lines matching a pattern and their counts; the length of every function a
//! grep finds (to its closing brace); a rename across files, then a check that nothing mentions
//! the old name (the bench also checks each renamed tree against the original); the test count per
//! test file.
//!
//! Run with `cargo bench --bench code_mode`. The figures are byte counts and round trips, not
//! times, so a debug build gives the same ones: `cargo bench --profile dev --bench code_mode`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toolhost::code_mode::{self, ToolsAs, PROGRAM_TOOL};
use toolhost::schema::{self, Format};
use toolhost::{Host, HostBuilder};

/// Task 1: the pattern whose matching lines are counted per file.
const COUNTED: &str = r"unwrap\(";
/// How many files the ranking keeps.
const TOP: usize = 5;
/// Task 2: the function definitions whose lengths are measured, and where.
const FN_PATTERN: &str = r"^\s*(pub(\([a-z]+\))? )?fn ";
const FN_GLOB: &str = "src/host/*.rs";
/// Task 3: the identifier renamed across files, and its new name (which must not contain it).
const OLD_NAME: &str = "PROGRAM_TOOL";
const NEW_NAME: &str = "CODE_TOOL";
/// Task 4: a test function's attribute, counted per file below the folder.
const TEST_ATTR: &str = r"#\[test\]";
const TEST_FOLDER: &str = "tests/";

/// Targets of issue 20.
const OUTPUT_TARGET: f64 = 0.2;
const CATALOGUE_TARGET: f64 = 0.35;

// ---------------------------------------------------------------------------------------------
// The tree and the model's side of the conversation.

/// A fresh copy of the checkout's `src/` and `tests/` (without installed packages or hidden
/// entries).
fn copy_tree() -> tempfile::TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a temporary folder");
    for top in ["src", "tests"] {
        copy_folder(&source.join(top), &dir.path().join(top));
    }
    dir
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder in the copy");
    let mut entries: Vec<_> = std::fs::read_dir(from).expect("a folder of the checkout").flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        if name_text.starts_with('.') || name_text == "node_modules" {
            continue;
        }
        let kind = entry.file_type().expect("an entry's type");
        if kind.is_dir() {
            copy_folder(&entry.path(), &to.join(&name));
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name)).expect("a file copied");
        }
    }
}

/// Every file of a tree with its bytes, by path from the root.
fn tree_contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("a folder of the copy").flatten() {
            let path = entry.path();
            if entry.file_type().expect("an entry's type").is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("below the root").to_path_buf();
                out.insert(relative, std::fs::read(&path).expect("a file of the copy"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// What one way of one task cost.
#[derive(Default, Clone, Copy)]
struct Cost {
    trips: usize,
    /// Bytes of tool output the model read.
    read: usize,
    /// Bytes of arguments (or programs) the model wrote.
    written: usize,
    /// Tool calls made inside programs (each guarded and recorded, but no round trip).
    nested: usize,
}

/// The scripted model's connection to a host: every call is one round trip.
struct Model {
    host: Host,
    cost: Cost,
}

impl Model {
    fn on(tree: &Path) -> Model {
        let host = HostBuilder::new(tree).project_tools(false).build().expect("a host on the copied tree");
        Model { host, cost: Cost::default() }
    }

    /// One tool call as a model makes it: JSON arguments in, the text it is shown out.
    fn call(&mut self, tool: &str, arguments: Value) -> String {
        let arguments = arguments.to_string();
        let record = self.host.call_json(tool, &arguments);
        let text = record.model_text();
        self.cost.trips += 1;
        self.cost.read += text.len();
        self.cost.written += arguments.len();
        self.cost.nested += record.nested.as_ref().map_or(0, Vec::len);
        text
    }

    /// One program; a failed program is a bug of the bench (or of code mode), shown whole.
    fn program(&mut self, code: &str) -> String {
        let text = self.call(PROGRAM_TOOL, json!({ "code": code }));
        if text.starts_with("error (") {
            fail(&format!("a program failed:\n{code}\n---\n{text}"));
        }
        text
    }
}

fn fail(message: &str) -> ! {
    eprintln!("code_mode bench: {message}");
    std::process::exit(1);
}

// ---------------------------------------------------------------------------------------------
// Reading the JSON tools' text, as the model does.

/// One `path:line:text` line of index-grep.
struct GrepLine {
    path: String,
    line: u64,
}

/// What an index-grep result says: the lines it shows, and the total when it shows only some.
struct Grep {
    lines: Vec<GrepLine>,
    capped_total: Option<u64>,
}

fn read_grep(text: &str) -> Grep {
    let mut grep = Grep { lines: Vec::new(), capped_total: None };
    for row in text.lines() {
        if let Some(note) = row.strip_prefix("... ") {
            // "... 919 matching lines in 75 files, first 200 shown; narrow the pattern or the glob"
            let total = note.split(' ').next().unwrap_or("").replace(',', "");
            grep.capped_total = Some(total.parse().unwrap_or_else(|_| fail(&format!("an odd grep note: {row}"))));
            continue;
        }
        let mut parts = row.splitn(3, ':');
        let (Some(path), Some(line), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if let Ok(line) = line.parse() {
            grep.lines.push(GrepLine { path: path.to_string(), line });
        }
    }
    grep
}

/// A whole file through fs-read, page after page as its notes say.
fn read_whole_file(model: &mut Model, path: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut start = 1u64;
    loop {
        let text = model.call("fs-read", json!({ "path": path, "start": start }));
        let mut next = None;
        for row in text.lines() {
            if let Some(note) = row.strip_prefix("... ") {
                next = note.rsplit("next start ").next().and_then(|n| n.trim().parse().ok());
            } else if let Some((number, line)) = row.split_once('\t') {
                if number.trim().parse::<u64>().is_ok() {
                    lines.push(line.to_string());
                }
            }
        }
        match next {
            Some(n) => start = n,
            None => return lines,
        }
    }
}

/// The entries directly below a folder through fs-list (depth 1: one name a line), by path from
/// the root; folders end in '/'.
fn list_folder(model: &mut Model, folder: &str) -> Vec<String> {
    let text = model.call("fs-list", json!({ "path": folder, "depth": 1 }));
    text.lines()
        .map(str::trim)
        .filter(|name| !name.is_empty() && !name.starts_with("...") && !name.starts_with('('))
        .map(|name| format!("{folder}{name}"))
        .collect()
}

/// The glob that selects exactly one listed entry: everything below a folder, or one file.
fn glob_of(entry: &str) -> String {
    if entry.contains('/') {
        entry.to_string()
    } else {
        // A root file: without a '/', the glob would match the name at any depth.
        format!("/{entry}")
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a program's result: Scheme notation, as the model reads it.

#[derive(Debug, Clone, PartialEq)]
enum Datum {
    Text(String),
    Number(i64),
    Word(String),
    List(Vec<Datum>),
}

impl Datum {
    fn list(&self) -> &[Datum] {
        match self {
            Datum::List(items) => items,
            other => fail(&format!("expected a list in the program's result, got {other:?}")),
        }
    }
    fn text(&self) -> &str {
        match self {
            Datum::Text(text) => text,
            other => fail(&format!("expected a string in the program's result, got {other:?}")),
        }
    }
    fn number(&self) -> i64 {
        match self {
            Datum::Number(n) => *n,
            other => fail(&format!("expected a number in the program's result, got {other:?}")),
        }
    }
}

/// The value at the end of a program's result (after what it displayed): its last line.
fn read_value(result: &str) -> Datum {
    let last = result.trim_end().lines().last().unwrap_or("");
    let mut chars = last.chars().peekable();
    let datum = read_datum(&mut chars);
    datum.unwrap_or_else(|| fail(&format!("cannot read the program's value: {last}")))
}

fn read_datum(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<Datum> {
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    match *chars.peek()? {
        '\'' => {
            chars.next();
            read_datum(chars)
        }
        '(' => {
            chars.next();
            let mut items = Vec::new();
            loop {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                match chars.peek()? {
                    ')' => {
                        chars.next();
                        return Some(Datum::List(items));
                    }
                    _ => match read_datum(chars)? {
                        // A pair's dot: `(a . b)` is read as the list `(a b)`.
                        Datum::Word(w) if w == "." => {}
                        item => items.push(item),
                    },
                }
            }
        }
        '"' => {
            chars.next();
            let mut text = String::new();
            loop {
                match chars.next()? {
                    '"' => return Some(Datum::Text(text)),
                    '\\' => match chars.next()? {
                        'n' => text.push('\n'),
                        't' => text.push('\t'),
                        other => text.push(other),
                    },
                    c => text.push(c),
                }
            }
        }
        _ => {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '(' || c == ')' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            Some(word.parse().map(Datum::Number).unwrap_or(Datum::Word(word)))
        }
    }
}

/// A Rust string as a Scheme string literal.
fn scheme_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

// ---------------------------------------------------------------------------------------------
// Task 1 (and 4): files ranked by matching lines.

/// Matching lines per file for `pattern` below `glob`, the JSON way: search; where the result is
/// capped, list the folder and search each entry apart (a capped single file counts its total).
fn json_counts(model: &mut Model, pattern: &str, glob: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let mut globs = vec![glob.to_string()];
    while let Some(glob) = globs.pop() {
        let grep = read_grep(&model.call("index-grep", json!({ "pattern": pattern, "glob": glob })));
        match grep.capped_total {
            None => {
                for line in grep.lines {
                    *counts.entry(line.path).or_insert(0) += 1;
                }
            }
            Some(total) if !glob.is_empty() && !glob.ends_with('/') => {
                counts.insert(glob.trim_start_matches('/').to_string(), total);
            }
            Some(_) => globs.extend(list_folder(model, &glob).iter().map(|entry| glob_of(entry))),
        }
    }
    counts
}

/// The same steps as a program: a procedure the program defines, used by tasks 1 and 4.
const COUNTS_PROCEDURE: &str = r#"
(define (bump h k n) (hash-insert h k (+ n (or (hash-try-get h k) 0))))
(define (glob-of entry) (if (string-contains? entry "/") entry (string-append "/" entry)))
(define (counts pattern glob h)
  (let* ([found (grep-matches pattern glob)]
         [matches (hash-ref found "matches")])
    (cond [(= (length matches) (hash-ref found "total"))
           (foldl (lambda (m h) (bump h (hash-ref m "path") 1)) h matches)]
          [(and (not (equal? glob "")) (not (ends-with? glob "/")))
           (bump h (if (starts-with? glob "/") (substring glob 1 (string-length glob)) glob) (hash-ref found "total"))]
          [else (foldl (lambda (entry h) (counts pattern (glob-of entry) h)) h (dir-entries glob 1))])))
(define (ranked h)
  (sort (hash->list h)
        (lambda (a b) (or (> (cdr a) (cdr b)) (and (= (cdr a) (cdr b)) (string<? (car a) (car b)))))))
"#;

/// Ranks counts, most first, then by path.
fn ranked(counts: BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut ranked: Vec<_> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked
}

fn render_ranking(ranking: &[(String, u64)]) -> String {
    ranking.iter().map(|(path, n)| format!("{path} {n}\n")).collect()
}

fn read_ranking(value: &Datum) -> Vec<(String, u64)> {
    value.list().iter().map(|pair| (pair.list()[0].text().to_string(), pair.list()[1].number() as u64)).collect()
}

fn top_files_json(model: &mut Model) -> String {
    let mut ranking = ranked(json_counts(model, COUNTED, ""));
    ranking.truncate(TOP);
    render_ranking(&ranking)
}

fn top_files_code(model: &mut Model) -> String {
    let program = format!("{COUNTS_PROCEDURE}(take (ranked (counts {} \"\" (hash))) {TOP})", scheme_string(COUNTED));
    render_ranking(&read_ranking(&read_value(&model.program(&program))))
}

fn tests_per_file_json(model: &mut Model) -> String {
    render_ranking(&ranked(json_counts(model, TEST_ATTR, TEST_FOLDER)))
}

fn tests_per_file_code(model: &mut Model) -> String {
    let program = format!(
        "{COUNTS_PROCEDURE}(ranked (counts {} {} (hash)))",
        scheme_string(TEST_ATTR),
        scheme_string(TEST_FOLDER)
    );
    render_ranking(&read_ranking(&read_value(&model.program(&program))))
}

/// Task 1's answer as the bench itself finds it, reading the copied files: lines holding the
/// literal text the pattern matches.
fn top_files_truth(tree: &Path) -> String {
    let literal = COUNTED.replace('\\', "");
    let mut counts = BTreeMap::new();
    for (path, bytes) in tree_contents(tree) {
        let Ok(text) = String::from_utf8(bytes) else { continue };
        let n = text.lines().filter(|l| l.contains(&literal)).count() as u64;
        if n > 0 {
            counts.insert(path.to_string_lossy().into_owned(), n);
        }
    }
    let mut ranking = ranked(counts);
    ranking.truncate(TOP);
    render_ranking(&ranking)
}

// ---------------------------------------------------------------------------------------------
// Task 2: the length of every function a grep finds.

/// Lines from a function's first line to the line that closes its body (a body-less declaration
/// ending in ';' is one line): braces counted, as a model reading the file would.
fn function_length(lines: &[String], start: usize) -> u64 {
    let mut depth = 0i64;
    let mut opened = false;
    for (n, line) in lines.iter().enumerate().skip(start - 1) {
        let opens = line.matches('{').count() as i64;
        let closes = line.matches('}').count() as i64;
        depth += opens - closes;
        opened |= opens > 0;
        if (!opened && line.contains(';')) || (opened && depth <= 0) {
            return (n + 2 - start) as u64;
        }
    }
    (lines.len() + 1 - start) as u64
}

fn render_lengths(lengths: &[(String, u64, u64)]) -> String {
    lengths.iter().map(|(path, line, n)| format!("{path}:{line} {n}\n")).collect()
}

fn function_lengths_json(model: &mut Model) -> String {
    let grep = read_grep(&model.call("index-grep", json!({ "pattern": FN_PATTERN, "glob": FN_GLOB })));
    if grep.capped_total.is_some() {
        fail("the function search is capped: narrow FN_GLOB");
    }
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut lengths = Vec::new();
    for found in grep.lines {
        if !files.contains_key(&found.path) {
            let lines = read_whole_file(model, &found.path);
            files.insert(found.path.clone(), lines);
        }
        let n = function_length(&files[&found.path], found.line as usize);
        lengths.push((found.path, found.line, n));
    }
    render_lengths(&lengths)
}

fn function_lengths_code(model: &mut Model) -> String {
    let program = format!(
        r#"(define (count-char c line) (length (filter (lambda (x) (char=? x c)) (string->list line))))
(define (fn-length rest depth opened n)
  (if (null? rest) n
      (let* ([line (car rest)]
             [opens (count-char #\{{ line)]
             [d (+ depth (- opens (count-char #\}} line)))]
             [opened (or opened (> opens 0))])
        (if (or (and (not opened) (string-contains? line ";")) (and opened (<= d 0)))
            (+ n 1)
            (fn-length (cdr rest) d opened (+ n 1))))))
(define files (hash))
(define (lines-of path)
  (or (hash-try-get files path)
      (let ([lines (file-lines path)]) (set! files (hash-insert files path lines)) lines)))
(map (lambda (m)
       (let ([path (hash-ref m "path")] [line (hash-ref m "line")])
         (list path line (fn-length (list-tail (lines-of path) (- line 1)) 0 #f 0))))
     (hash-ref (grep-matches {} {}) "matches"))"#,
        scheme_string(FN_PATTERN),
        scheme_string(FN_GLOB)
    );
    let value = read_value(&model.program(&program));
    let lengths: Vec<_> = value
        .list()
        .iter()
        .map(|row| (row.list()[0].text().to_string(), row.list()[1].number() as u64, row.list()[2].number() as u64))
        .collect();
    render_lengths(&lengths)
}

// ---------------------------------------------------------------------------------------------
// Task 3: a rename across files, then a check that nothing mentions the old name.

fn rename_json(model: &mut Model) -> String {
    let grep = read_grep(&model.call("index-grep", json!({ "pattern": OLD_NAME })));
    if grep.capped_total.is_some() {
        fail("the old name's search is capped: pick a rarer name");
    }
    let mut paths: Vec<String> = grep.lines.into_iter().map(|l| l.path).collect();
    paths.dedup();
    let mut edited = Vec::new();
    for path in &paths {
        let text =
            model.call("fs-edit", json!({ "path": path, "old": OLD_NAME, "new": NEW_NAME, "replace-all": true }));
        if text.starts_with("replaced") {
            edited.push(path.clone());
        }
    }
    let left = read_grep(&model.call("index-grep", json!({ "pattern": OLD_NAME })));
    let left = left.capped_total.unwrap_or(left.lines.len() as u64);
    format!("edited {}\nleft {left}\n", edited.join(" "))
}

fn rename_code(model: &mut Model) -> String {
    let program = format!(
        r#"(define old {old})
(define paths (foldl (lambda (m ps) (if (member (hash-ref m "path") ps) ps (append ps (list (hash-ref m "path")))))
                     '() (hash-ref (grep-matches old) "matches")))
(define edited (filter (lambda (p) (starts-with? (fs-edit p old {new} #t) "replaced")) paths))
(list edited (hash-ref (grep-matches old) "total"))"#,
        old = scheme_string(OLD_NAME),
        new = scheme_string(NEW_NAME)
    );
    let value = read_value(&model.program(&program));
    let edited: Vec<&str> = value.list()[0].list().iter().map(Datum::text).collect();
    format!("edited {}\nleft {}\n", edited.join(" "), value.list()[1].number())
}

/// What must hold of a renamed tree, read by the bench itself: no file mentions the old name, and
/// the new name stands where the old one stood (the tree equals the original with the rename done).
fn check_rename(original: &Path, renamed: &Path) -> Result<(), String> {
    let before = tree_contents(original);
    let after = tree_contents(renamed);
    if before.keys().ne(after.keys()) {
        return Err("the rename added or removed files".into());
    }
    let mut changed = 0;
    for (path, bytes) in &before {
        let expected = String::from_utf8_lossy(bytes).replace(OLD_NAME, NEW_NAME);
        let got = String::from_utf8_lossy(&after[path]);
        if got.contains(OLD_NAME) {
            return Err(format!("{} still mentions {OLD_NAME}", path.display()));
        }
        if got != expected {
            return Err(format!("{} is not the original with the rename done", path.display()));
        }
        changed += usize::from(got != String::from_utf8_lossy(bytes));
    }
    if changed < 2 {
        return Err(format!("{OLD_NAME} was in {changed} files of the tree; the task needs a name used in several"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The suite.

struct Task {
    name: &'static str,
    json: fn(&mut Model) -> String,
    code: fn(&mut Model) -> String,
    /// The answer as the bench finds it without a model, where that is cheap.
    truth: Option<fn(&Path) -> String>,
    /// Whether the task edits the tree (then both trees are checked, and compared).
    edits: bool,
}

const TASKS: &[Task] = &[
    Task {
        name: "top 5 files by `unwrap\\(`",
        json: top_files_json,
        code: top_files_code,
        truth: Some(top_files_truth),
        edits: false,
    },
    Task {
        name: "length of each fn in src/host",
        json: function_lengths_json,
        code: function_lengths_code,
        truth: None,
        edits: false,
    },
    Task { name: "rename PROGRAM_TOOL, check", json: rename_json, code: rename_code, truth: None, edits: true },
    Task {
        name: "#[test] count per tests/ file",
        json: tests_per_file_json,
        code: tests_per_file_code,
        truth: None,
        edits: false,
    },
];

struct Measured {
    name: &'static str,
    json: Cost,
    code: Cost,
}

fn run_task(task: &Task) -> Result<Measured, String> {
    let original = copy_tree();
    let json_tree = copy_tree();
    let code_tree = copy_tree();
    let mut json_model = Model::on(json_tree.path());
    let json_answer = (task.json)(&mut json_model);
    let mut code_model = Model::on(code_tree.path());
    let code_answer = (task.code)(&mut code_model);
    if json_answer != code_answer {
        return Err(format!("the two ways disagree.\nJSON calls:\n{json_answer}\nprogram:\n{code_answer}"));
    }
    if json_answer.trim().is_empty() {
        return Err("both ways found nothing: the task has nothing to do on this tree".into());
    }
    if let Some(truth) = task.truth {
        let truth = truth(original.path());
        if json_answer != truth {
            return Err(format!("both ways answered\n{json_answer}but the files say\n{truth}"));
        }
    }
    if task.edits {
        check_rename(original.path(), json_tree.path()).map_err(|e| format!("JSON calls: {e}"))?;
        check_rename(original.path(), code_tree.path()).map_err(|e| format!("program: {e}"))?;
    }
    Ok(Measured { name: task.name, json: json_model.cost, code: code_model.cost })
}

fn ratio(part: usize, whole: usize) -> f64 {
    part as f64 / whole.max(1) as f64
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One row of the task table.
fn task_row(name: &str, json: Cost, code: Cost) {
    println!(
        "| {:<31} | {:>5} | {:>9} | {:>5} | {:>5} | {:>7} | {:>7.3}x | {:>7} | {:>7} |",
        name,
        json.trips,
        thousands(json.read),
        code.trips,
        code.nested,
        thousands(code.read),
        ratio(code.read, json.read),
        thousands(json.written),
        thousands(code.written)
    );
}

fn suite() -> Result<bool, String> {
    println!("Each task by one JSON call per round trip, and by one program (bytes of tool output read by the model,");
    println!("bytes of arguments or program written by it; calls: the tool calls inside the program):\n");
    println!(
        "| {:<31} | {:>5} | {:>9} | {:>5} | {:>5} | {:>7} | {:>8} | {:>7} | {:>7} |",
        "Task", "JSON", "", "code", "", "", "", "JSON", "code"
    );
    println!(
        "| {:<31} | {:>5} | {:>9} | {:>5} | {:>5} | {:>7} | {:>8} | {:>7} | {:>7} |",
        "", "trips", "read", "trips", "calls", "read", "ratio", "written", "written"
    );
    println!("|{:-<33}|{:->7}|{:->11}|{:->7}|{:->7}|{:->9}|{:->10}|{:->9}|{:->9}|", "", "", "", "", "", "", "", "", "");
    let mut total_json = Cost::default();
    let mut total_code = Cost::default();
    for task in TASKS {
        let m = run_task(task).map_err(|e| format!("{}: {e}", task.name))?;
        task_row(m.name, m.json, m.code);
        for (total, cost) in [(&mut total_json, m.json), (&mut total_code, m.code)] {
            total.trips += cost.trips;
            total.read += cost.read;
            total.written += cost.written;
            total.nested += cost.nested;
        }
    }
    task_row("suite", total_json, total_code);
    let suite_ratio = ratio(total_code.read, total_json.read);
    let met = suite_ratio <= OUTPUT_TARGET;
    println!(
        "\nEvery answer agreed. Tool output reaching the model: {suite_ratio:.3}x (target at most {OUTPUT_TARGET}x){}; \
         about {} tokens against {} (bytes / 4); round trips {} against {}.",
        if met { "" } else { ": MISSED" },
        thousands(total_code.read / 4),
        thousands(total_json.read / 4),
        total_code.trips,
        total_json.trips
    );
    Ok(met)
}

fn catalogue() -> bool {
    let tree = tempfile::tempdir().expect("a temporary folder");
    let host = HostBuilder::new(tree.path()).project_tools(false).build().expect("a host");
    let specs = host.specs();
    let json_tools = code_mode::offered(&specs, ToolsAs::Json);
    let code_tools = code_mode::offered(&specs, ToolsAs::Code);
    let text = code_mode::catalogue(&specs);
    println!(
        "\nThe catalogue of the default tools ({} tools, the program tool left out): code_mode::catalogue is {} \
         bytes, about {} tokens (bytes / 4).",
        json_tools.len(),
        thousands(text.len()),
        thousands(text.len() / 4)
    );
    println!("JSON as sent (compact) and as `toolhost tools --format F` prints it (pretty); the program tool's own");
    println!("schema carries the catalogue as its description:\n");
    println!(
        "| {:<9} | {:>13} | {:>7} | {:>12} | {:>7} | {:>17} | {:>7} |",
        "Format", "JSON, compact", "ratio", "JSON, pretty", "ratio", "program tool JSON", "ratio"
    );
    println!("|{:-<11}|{:->15}|{:->9}|{:->14}|{:->9}|{:->19}|{:->9}|", "", "", "", "", "", "", "");
    let mut met = true;
    for (name, format) in [("OpenAI", Format::OpenAi), ("Anthropic", Format::Anthropic), ("MCP", Format::Mcp)] {
        let schemas = schema::catalogue(json_tools.iter().map(|s| s.as_ref()), format);
        let compact = schemas.to_string().len();
        let pretty = serde_json::to_string_pretty(&schemas).map_or(0, |t| t.len());
        let offered = schema::catalogue(code_tools.iter().map(|s| s.as_ref()), format).to_string().len();
        met &= ratio(text.len(), compact) <= CATALOGUE_TARGET;
        println!(
            "| {:<9} | {:>13} | {:>6.3}x | {:>12} | {:>6.3}x | {:>17} | {:>6.3}x |",
            name,
            thousands(compact),
            ratio(text.len(), compact),
            thousands(pretty),
            ratio(text.len(), pretty),
            thousands(offered),
            ratio(offered, compact)
        );
    }
    println!(
        "\nThe catalogue against the compact JSON schemas: target at most {CATALOGUE_TARGET}x{}.",
        if met { "" } else { ": MISSED" }
    );
    met
}

fn main() {
    // `cargo bench` passes `--bench`; this bench takes no options. A missed target is a figure to
    // report, not a failure; two ways that disagree are.
    let output_met = suite().unwrap_or_else(|e| fail(&e));
    let catalogue_met = catalogue();
    if !(output_met && catalogue_met) {
        println!("\nA target was missed (the answers agreed; the figures are above).");
    }
}
