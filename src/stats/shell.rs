//! A `shell-exec` command line as the simple commands it runs: split at the shell's control
//! operators (`;`, `&&`, `||`, `|`, `&`, newlines, subshell and command-substitution brackets),
//! here-document bodies left out, each command's words unquoted by `shlex`, its redirections,
//! variable assignments and reserved words taken off, and the commands that run another command
//! (`sudo`, `env`, `timeout`, `xargs`, `find -exec`, ...) seen through. It owns reading command
//! lines; which commands read files is [`super::shell_reads`]'s.
//!
//! This is a reader for counting, not a shell: it expands nothing (`$x` stays `$x`), and a line it
//! cannot split (a quote left open) is reported as such rather than guessed at.

/// One simple command: its words, the command's name first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The words, unquoted, redirections and leading assignments left out.
    pub words: Vec<String>,
    /// Its standard input is a pipe from the command before it (`... | grep x`).
    pub piped: bool,
    /// It was started by `xargs` or `find -exec`, which give it file names as operands.
    pub given_files: bool,
}

/// A command line that cannot be split: a quote left open (often a command cut short).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsplittable;

/// A command that runs the command after its own options and operands.
struct Wrapper {
    name: &'static str,
    /// Its options that take a value (`-u USER`).
    value_options: &'static [&'static str],
    /// Operands of its own before the command (`timeout 10 cmd`).
    operands: usize,
    /// The command it runs gets file names from it (`xargs grep x`).
    gives_files: bool,
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "sudo",
        value_options: &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
        operands: 0,
        gives_files: false,
    },
    Wrapper {
        name: "env",
        value_options: &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
        operands: 0,
        gives_files: false,
    },
    Wrapper { name: "command", value_options: &[], operands: 0, gives_files: false },
    Wrapper { name: "exec", value_options: &["-a"], operands: 0, gives_files: false },
    Wrapper { name: "nohup", value_options: &[], operands: 0, gives_files: false },
    Wrapper { name: "nice", value_options: &["-n", "--adjustment"], operands: 0, gives_files: false },
    Wrapper { name: "time", value_options: &["-f", "-o", "--format", "--output"], operands: 0, gives_files: false },
    Wrapper {
        name: "stdbuf",
        value_options: &["-i", "-o", "-e", "--input", "--output", "--error"],
        operands: 0,
        gives_files: false,
    },
    Wrapper {
        name: "timeout",
        value_options: &["-s", "-k", "--signal", "--kill-after"],
        operands: 1,
        gives_files: false,
    },
    Wrapper {
        name: "xargs",
        value_options: &[
            "-a",
            "-d",
            "-E",
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
            "--replace",
        ],
        operands: 0,
        gives_files: true,
    },
];

/// Words that start or end a compound command; the simple command is what follows them.
const RESERVED: &[&str] = &["!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "esac"];

/// Words that start a construct whose first words are not a command (`for x in a b`).
const NOT_A_COMMAND: &[&str] = &["for", "case", "select", "function", "in"];

/// Shells whose `-c` string is a command line of its own.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash"];

/// `find`'s options that run a command, up to a `;` or `+` word.
const FIND_EXEC: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];

/// The simple commands of `line`, in order, with the commands that `find -exec` runs after the
/// `find` that runs them.
///
/// ```
/// use toolhost::stats::shell::simple_commands;
/// let commands = simple_commands("cd src && grep -n 'fn main' *.rs | head -3").unwrap();
/// let words: Vec<&Vec<String>> = commands.iter().map(|c| &c.words).collect();
/// assert_eq!(words, [&vec!["cd", "src"], &vec!["grep", "-n", "fn main", "*.rs"], &vec!["head", "-3"]]);
/// assert!(commands[2].piped && !commands[1].piped);
/// ```
///
/// # Errors
/// [`Unsplittable`] when a quote is left open.
pub fn simple_commands(line: &str) -> Result<Vec<SimpleCommand>, Unsplittable> {
    simple_commands_within(line, 0)
}

/// How deep wrappers, `find -exec` and `sh -c` strings are followed: a command line a model wrote
/// may nest them without end, and each level is a frame of a reader thread's stack.
const MAX_NESTING: usize = 16;

fn simple_commands_within(line: &str, depth: usize) -> Result<Vec<SimpleCommand>, Unsplittable> {
    let mut commands = Vec::new();
    for segment in segments(line)? {
        let words = shlex::split(&segment.text).ok_or(Unsplittable)?;
        command_from_words(words, segment.piped, false, depth, &mut commands);
    }
    Ok(commands)
}

/// A stretch of the line between two control operators.
struct Segment {
    text: String,
    piped: bool,
}

/// Splits `line` at control operators outside quotes, leaving out comments and here-document
/// bodies. Quotes are only tracked here, to know where operators are; the words are unquoted by
/// `shlex`.
fn segments(line: &str) -> Result<Vec<Segment>, Unsplittable> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    let mut piped = false;
    // Here-documents whose bodies start after the next newline: (delimiter, tabs stripped).
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    let push = |out: &mut Vec<Segment>, current: &mut String, piped: bool| {
        if !current.trim().is_empty() {
            out.push(Segment { text: std::mem::take(current), piped });
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\'' => {
                let end = chars[i + 1..].iter().position(|&c| c == '\'').ok_or(Unsplittable)?;
                current.extend(&chars[i..=i + 1 + end]);
                i += end + 2;
                continue;
            }
            '"' => {
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(Unsplittable),
                        Some('\\') => j += 2,
                        Some('"') => break,
                        Some(_) => j += 1,
                    }
                }
                current.extend(&chars[i..=j.min(chars.len() - 1)]);
                i = j + 1;
                continue;
            }
            '\\' => {
                current.push(c);
                if let Some(n) = next {
                    current.push(n);
                }
                i += 2;
                continue;
            }
            '#' if current.chars().last().is_none_or(char::is_whitespace) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '<' if next == Some('<') && chars.get(i + 2) == Some(&'<') => {
                // A here-string: its word is an operand of the redirection, on this line.
                current.push_str("<<<");
                i += 3;
                continue;
            }
            '<' if next == Some('<') => {
                let (delimiter, strip, end) = here_document(&chars, i + 2);
                current.extend(&chars[i..end]);
                if !delimiter.is_empty() {
                    pending.push((delimiter, strip));
                }
                i = end;
                continue;
            }
            '\n' => {
                push(&mut out, &mut current, piped);
                piped = false;
                i += 1;
                for (delimiter, strip) in pending.drain(..) {
                    i = skip_body(&chars, i, &delimiter, strip);
                }
                continue;
            }
            '|' => {
                push(&mut out, &mut current, piped);
                // `||` runs the next command on failure; `|` and `|&` pipe into it.
                piped = next != Some('|');
                i += if matches!(next, Some('|' | '&')) { 2 } else { 1 };
                continue;
            }
            '&' if next == Some('&') => {
                push(&mut out, &mut current, piped);
                piped = false;
                i += 2;
                continue;
            }
            // `2>&1`, `&>file` and `>&2` are redirections, not the background operator.
            '&' if next != Some('>') && !matches!(current.chars().last(), Some('>' | '<')) => {
                push(&mut out, &mut current, piped);
                piped = false;
                i += 1;
                continue;
            }
            ';' | '(' | ')' | '`' => {
                push(&mut out, &mut current, piped);
                piped = false;
                i += if c == ';' && next == Some(';') { 2 } else { 1 };
                continue;
            }
            '$' if next == Some('(') => {
                push(&mut out, &mut current, piped);
                piped = false;
                i += 2;
                continue;
            }
            _ => current.push(c),
        }
        i += 1;
    }
    push(&mut out, &mut current, piped);
    Ok(out)
}

/// Reads a here-document's delimiter after `<<` at `from`: the delimiter unquoted, whether tabs
/// are stripped (`<<-`), and where the operator and its word end.
fn here_document(chars: &[char], from: usize) -> (String, bool, usize) {
    let mut i = from;
    let strip = chars.get(i) == Some(&'-');
    if strip {
        i += 1;
    }
    while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
        i += 1;
    }
    let mut delimiter = String::new();
    while let Some(&c) = chars.get(i) {
        match c {
            '\'' | '"' => {
                let close = chars[i + 1..].iter().position(|&d| d == c).map_or(chars.len(), |p| i + 1 + p);
                delimiter.extend(&chars[i + 1..close.min(chars.len())]);
                i = close + 1;
            }
            '\\' => {
                if let Some(&n) = chars.get(i + 1) {
                    delimiter.push(n);
                }
                i += 2;
            }
            c if c.is_whitespace() || matches!(c, ';' | '|' | '&' | '<' | '>' | '(' | ')') => break,
            c => {
                delimiter.push(c);
                i += 1;
            }
        }
    }
    (delimiter, strip, i.min(chars.len()))
}

/// Skips a here-document's body from `from` (the start of its first line) through the line that
/// is its delimiter; returns where the next line starts.
fn skip_body(chars: &[char], from: usize, delimiter: &str, strip: bool) -> usize {
    let mut i = from;
    while i < chars.len() {
        let end = chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |p| i + p);
        let line: String = chars[i..end].iter().collect();
        let line = if strip { line.trim_start_matches('\t') } else { line.as_str() };
        i = end + 1;
        if line == delimiter {
            break;
        }
    }
    i.min(chars.len())
}

/// Whether `word` is a redirection, and whether its target is the next word (`>` alone) rather
/// than part of it (`>out.txt`, `2>&1`).
fn redirection(word: &str) -> Option<bool> {
    let rest = word.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix('&').filter(|r| r.starts_with('>')).unwrap_or(rest);
    const OPERATORS: &[&str] = &["<<<", "<<-", "<<", ">>", ">|", ">&", "<&", "<>", ">", "<"];
    let operator = OPERATORS.iter().find(|op| rest.starts_with(**op))?;
    Some(rest.len() == operator.len())
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Builds the command (and the ones it runs) from a segment's words.
fn command_from_words(words: Vec<String>, piped: bool, given_files: bool, depth: usize, out: &mut Vec<SimpleCommand>) {
    let mut kept = Vec::with_capacity(words.len());
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        match redirection(&word) {
            Some(true) => {
                words.next();
            }
            Some(false) => {}
            None => kept.push(word),
        }
    }
    let mut start = 0;
    while let Some(word) = kept.get(start) {
        if RESERVED.contains(&word.as_str()) || is_assignment(word) {
            start += 1;
        } else {
            break;
        }
    }
    let words = kept.split_off(start);
    let Some(name) = words.first() else { return };
    if NOT_A_COMMAND.contains(&name.as_str()) {
        return;
    }
    let name = command_name(name);
    if let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == name) {
        if depth >= MAX_NESTING {
            return;
        }
        let inner = after_wrapper(wrapper, &words[1..]);
        // The wrapper itself (`xargs` alone echoes) is not a read of its own.
        command_from_words(inner.to_vec(), piped, given_files || wrapper.gives_files, depth + 1, out);
        return;
    }
    if SHELLS.contains(&name) {
        // `bash -lc "cat a"` runs the commands of its string: the first word after its options.
        let mut options = words[1..].iter().take_while(|w| w.starts_with('-'));
        let runs_string = options.any(|w| !w.starts_with("--") && w.contains('c'));
        if let (true, Some(code)) = (runs_string, words[1..].iter().find(|w| !w.starts_with('-'))) {
            if depth >= MAX_NESTING {
                return;
            }
            if let Ok(commands) = simple_commands_within(code, depth + 1) {
                out.extend(commands);
            }
            return;
        }
    }
    let mut inner = Vec::new();
    if name == "find" {
        let mut rest = words.iter().skip(1);
        while let Some(word) = rest.next() {
            if FIND_EXEC.contains(&word.as_str()) {
                let run: Vec<String> = rest.by_ref().take_while(|w| *w != ";" && *w != "+").cloned().collect();
                inner.push(run);
            }
        }
    }
    out.push(SimpleCommand { words, piped, given_files });
    if depth >= MAX_NESTING {
        return;
    }
    for run in inner {
        command_from_words(run, false, true, depth + 1, out);
    }
}

/// The words after a wrapper's own options and operands: the command it runs.
fn after_wrapper<'w>(wrapper: &Wrapper, words: &'w [String]) -> &'w [String] {
    let mut i = 0;
    let mut operands = wrapper.operands;
    while let Some(word) = words.get(i) {
        if word == "--" {
            i += 1;
            break;
        }
        if word.starts_with('-') && word.len() > 1 {
            let takes_value = wrapper.value_options.iter().any(|o| o == word);
            i += if takes_value { 2 } else { 1 };
        } else if wrapper.name == "env" && is_assignment(word) {
            i += 1;
        } else if operands > 0 {
            operands -= 1;
            i += 1;
        } else {
            break;
        }
    }
    words.get(i..).unwrap_or_default()
}

/// A command word as the table names it: its file name without the folder, and without a version
/// (`/usr/bin/python3.11` is `python`).
pub fn command_name(word: &str) -> &str {
    let base = word.rsplit('/').next().unwrap_or(word);
    let unversioned = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if unversioned.is_empty() {
        base
    } else {
        unversioned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        simple_commands(line).unwrap().into_iter().map(|c| c.words).collect()
    }

    fn first_words(line: &str) -> Vec<String> {
        words(line).into_iter().map(|w| w.first().cloned().unwrap_or_default()).collect()
    }

    #[test]
    fn operators_split_commands_outside_quotes_only() {
        assert_eq!(first_words("cd x && cat y; ls -la || echo no & wait"), ["cd", "cat", "ls", "echo", "wait"]);
        assert_eq!(words("echo 'a && b; c | d' \"e || f\""), [vec!["echo", "a && b; c | d", "e || f"]]);
        assert_eq!(words(r"echo a\;b \| c"), [vec!["echo", "a;b", "|", "c"]]);
        assert_eq!(first_words("(cd src; cat main.rs)"), ["cd", "cat"]);
        assert_eq!(first_words("echo $(cat VERSION) `wc -l < a`"), ["echo", "cat", "wc"]);
        assert_eq!(first_words("ls\ncat a.txt\n\n"), ["ls", "cat"]);
    }

    #[test]
    fn pipes_are_told_from_or() {
        let commands = simple_commands("cat a | grep x |& tee log || true").unwrap();
        let piped: Vec<bool> = commands.iter().map(|c| c.piped).collect();
        assert_eq!(piped, [false, true, true, false]);
    }

    #[test]
    fn redirections_are_not_operands_and_their_ampersands_are_not_operators() {
        assert_eq!(words("grep -rn x src 2>&1 > out.txt"), [vec!["grep", "-rn", "x", "src"]]);
        assert_eq!(words("cat a.txt &>/dev/null 2> err <in"), [vec!["cat", "a.txt"]]);
        assert_eq!(words("wc -l >> counts < list"), [vec!["wc", "-l"]]);
        assert_eq!(words("cat > notes.md"), [vec!["cat"]]);
    }

    #[test]
    fn here_document_bodies_are_not_commands() {
        let line = "cat > run.sh <<'EOF'\nhead -n 5 data.csv\nsed -n 1p x\nEOF\npython3 run.sh && ls";
        assert_eq!(words(line), [vec!["cat"], vec!["python3", "run.sh"], vec!["ls"]]);
        let tabs = "cat <<-END | wc -l\n\tcat secret\n\tEND\ntail -2 log";
        assert_eq!(first_words(tabs), ["cat", "wc", "tail"]);
        assert_eq!(first_words("grep x <<< \"$text\""), ["grep"]);
    }

    #[test]
    fn comments_are_left_out_but_a_hash_inside_a_word_is_not_a_comment() {
        assert_eq!(words("ls # then cat a; rm b\ncat c"), [vec!["ls"], vec!["cat", "c"]]);
        assert_eq!(words("echo a#b '#c'"), [vec!["echo", "a#b", "#c"]]);
    }

    #[test]
    fn assignments_reserved_words_and_wrappers_are_seen_through() {
        assert_eq!(words("LC_ALL=C sort a"), [vec!["sort", "a"]]);
        assert_eq!(first_words("if grep -q x f; then cat y; fi"), ["grep", "cat"]);
        assert_eq!(first_words("for f in *.rs; do head -1 $f; done"), ["head"]);
        assert_eq!(words("sudo -u root timeout -s KILL 10 env A=1 tail -n 3 log"), [vec!["tail", "-n", "3", "log"]]);
        let commands = simple_commands("find . -name '*.rs' | xargs -n 1 grep -l unsafe").unwrap();
        assert_eq!(commands[1].words, ["grep", "-l", "unsafe"]);
        assert!(commands[1].piped && commands[1].given_files);
    }

    #[test]
    fn find_exec_runs_its_command_with_file_names() {
        let commands = simple_commands("find src -type f -exec grep -n TODO {} \\; -print").unwrap();
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].words[0], "find");
        assert_eq!(commands[1].words, ["grep", "-n", "TODO", "{}"]);
        assert!(commands[1].given_files);
    }

    #[test]
    fn a_shell_given_a_string_runs_its_commands() {
        assert_eq!(words("bash -lc 'cd src && cat main.rs'"), [vec!["cd", "src"], vec!["cat", "main.rs"]]);
        assert_eq!(words("sh run.sh"), [vec!["sh", "run.sh"]]);
    }

    #[test]
    fn nesting_without_end_is_followed_only_so_deep() {
        let deep = format!("{}cat secret", "nohup ".repeat(100_000));
        assert!(simple_commands(&deep).is_ok_and(|c| c.is_empty()));
        let shells = format!("{}cat secret{}", "sh -c '".repeat(20), "'".repeat(20));
        assert!(simple_commands(&shells).is_ok());
        assert_eq!(words("nohup nice cat a"), [vec!["cat", "a"]]);
    }

    #[test]
    fn an_open_quote_is_unsplittable() {
        assert_eq!(simple_commands("cat 'a.txt"), Err(Unsplittable));
        assert_eq!(simple_commands("echo \"unterminated"), Err(Unsplittable));
    }

    #[test]
    fn command_names_lose_their_folder_and_version() {
        assert_eq!(command_name("/usr/bin/python3.11"), "python");
        assert_eq!(command_name("python3"), "python");
        assert_eq!(command_name("./run"), "run");
        assert_eq!(command_name("7z"), "7z");
    }
}
