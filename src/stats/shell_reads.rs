//! Which `shell-exec` commands read or search files that a file tool would have served: the
//! patterns, as data in [`PATTERNS`], and matching them against the simple commands of a command
//! line ([`super::shell`]). Reads through the shell escape the file tools' guard rules and the
//! structure of their results; counting them shows what the file tools still lack.
//!
//! A pattern matches a simple command by its name, its options and its operands, read the way the
//! command's own option parser reads them (options that take a value consume it; short options
//! may be bundled, `-rn`). A command that only filters its standard input (`... | grep x`,
//! `... | wc -l`) reads no file and does not match. A command line counts at most once per
//! pattern, however often the pattern occurs in it.

use super::shell::{command_name, simple_commands, SimpleCommand, Unsplittable};

/// The file tool a read would have been served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileTool {
    /// Reading a file's lines.
    FsRead,
    /// Searching files.
    IndexGrep,
    /// Listing folders.
    FsList,
}

impl FileTool {
    /// Every file tool, in the order reports list them.
    pub const ALL: [FileTool; 3] = [FileTool::FsRead, FileTool::IndexGrep, FileTool::FsList];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            FileTool::FsRead => "fs-read",
            FileTool::IndexGrep => "index-grep",
            FileTool::FsList => "fs-list",
        }
    }
}

/// When a command reads files although no file operand is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithoutFiles {
    /// It reads standard input instead: a filter, no file read.
    ReadsStdin,
    /// It always reads the file system (`ls`, `find`, a `python -c` program).
    Reads,
    /// With one of these options it reads the current folder (`grep -r`).
    ReadsWith(&'static [&'static str]),
    /// It searches the current folder unless its standard input is a pipe (`rg`).
    ReadsUnlessPiped,
}

/// One way of reading files through the shell.
#[derive(Debug, Clone, Copy)]
pub struct ReadPattern {
    /// The name reports give it (`sed -n`).
    pub name: &'static str,
    /// The file tool that would have served it.
    pub serves: FileTool,
    /// The command names it covers (`python` also covers `python3` and `python3.11`).
    pub commands: &'static [&'static str],
    /// Options that take a value (`-n 20`, `-n20`, `--lines=20`, `--lines 20`).
    pub value_options: &'static [&'static str],
    /// Short options may be bundled (`-rn`); `find`'s may not (`-name`).
    pub bundled: bool,
    /// One of these options must be given (sed reads only with `-n`); empty: none needed.
    pub needs: &'static [&'static str],
    /// Any of these makes the command something else (`sed -i` edits).
    pub refused_by: &'static [&'static str],
    /// Operands before the files (sed's script, grep's pattern)...
    pub leading_operands: usize,
    /// ...unless one of these options gave them instead (`-e`, `-f`).
    pub leading_given_by: &'static [&'static str],
    /// Whether it reads without file operands.
    pub without_files: WithoutFiles,
    /// For a program given by the option in `needs` (`python -c CODE`): the code must contain one
    /// of these...
    pub code_contains: &'static [&'static str],
    /// ...and none of these (a program that writes files).
    pub code_refused_by: &'static [&'static str],
}

const fn reads_files(name: &'static str, serves: FileTool, commands: &'static [&'static str]) -> ReadPattern {
    ReadPattern {
        name,
        serves,
        commands,
        value_options: &[],
        bundled: true,
        needs: &[],
        refused_by: &[],
        leading_operands: 0,
        leading_given_by: &[],
        without_files: WithoutFiles::ReadsStdin,
        code_contains: &[],
        code_refused_by: &[],
    }
}

const GREP_VALUES: &[&str] = &[
    "-e",
    "-f",
    "-m",
    "-A",
    "-B",
    "-C",
    "-d",
    "-D",
    "--regexp",
    "--file",
    "--max-count",
    "--after-context",
    "--before-context",
    "--context",
    "--include",
    "--exclude",
    "--exclude-dir",
    "--exclude-from",
    "--label",
    "--devices",
    "--directories",
    "--binary-files",
];

const RG_VALUES: &[&str] = &[
    "-e",
    "-f",
    "-g",
    "-t",
    "-T",
    "-m",
    "-A",
    "-B",
    "-C",
    "-j",
    "-M",
    "-E",
    "-r",
    "-d",
    "--regexp",
    "--file",
    "--glob",
    "--iglob",
    "--type",
    "--type-not",
    "--type-add",
    "--max-count",
    "--max-depth",
    "--maxdepth",
    "--replace",
    "--threads",
    "--encoding",
    "--max-columns",
    "--context",
    "--after-context",
    "--before-context",
    "--sort",
    "--sortr",
    "--color",
    "--colors",
    "--path-separator",
    "--max-filesize",
    "--pre",
    "--pre-glob",
    "--engine",
    "--context-separator",
    "--field-match-separator",
    "--field-context-separator",
];

/// Every pattern, in the order a command is tried against them (the first that matches counts).
pub const PATTERNS: &[ReadPattern] = &[
    reads_files("cat", FileTool::FsRead, &["cat"]),
    ReadPattern {
        value_options: &["-n", "-c", "--lines", "--bytes"],
        ..reads_files("head", FileTool::FsRead, &["head"])
    },
    ReadPattern {
        value_options: &["-n", "-c", "-s", "--lines", "--bytes", "--pid", "--sleep-interval", "--max-unchanged-stats"],
        ..reads_files("tail", FileTool::FsRead, &["tail"])
    },
    ReadPattern {
        value_options: &["-e", "-f", "-l", "--expression", "--file", "--line-length"],
        needs: &["-n", "--quiet", "--silent"],
        refused_by: &["-i", "--in-place"],
        leading_operands: 1,
        leading_given_by: &["-e", "-f", "--expression", "--file"],
        ..reads_files("sed -n", FileTool::FsRead, &["sed"])
    },
    ReadPattern {
        value_options: &["-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"],
        ..reads_files("nl", FileTool::FsRead, &["nl"])
    },
    ReadPattern {
        value_options: &["-F", "-v", "-f"],
        leading_operands: 1,
        leading_given_by: &["-f"],
        ..reads_files("awk", FileTool::FsRead, &["awk", "gawk", "mawk"])
    },
    ReadPattern {
        value_options: &["-c", "-m", "-W", "-X", "-Q"],
        needs: &["-c"],
        without_files: WithoutFiles::Reads,
        code_contains: &["open(", ".read_text(", ".read_bytes(", ".readlines("],
        code_refused_by: &[".write(", ".writelines(", ".write_text(", ".write_bytes("],
        ..reads_files("python -c with open", FileTool::FsRead, &["python"])
    },
    ReadPattern { value_options: &["--files0-from"], ..reads_files("wc", FileTool::FsRead, &["wc"]) },
    ReadPattern {
        value_options: GREP_VALUES,
        leading_operands: 1,
        leading_given_by: &["-e", "-f", "--regexp", "--file"],
        without_files: WithoutFiles::ReadsWith(&["-r", "-R", "--recursive", "--dereference-recursive"]),
        ..reads_files("grep", FileTool::IndexGrep, &["grep", "egrep", "fgrep"])
    },
    ReadPattern {
        value_options: RG_VALUES,
        refused_by: &["--files"],
        leading_operands: 1,
        leading_given_by: &["-e", "-f", "--regexp", "--file"],
        without_files: WithoutFiles::ReadsUnlessPiped,
        ..reads_files("rg", FileTool::IndexGrep, &["rg"])
    },
    ReadPattern {
        value_options: RG_VALUES,
        needs: &["--files"],
        without_files: WithoutFiles::Reads,
        ..reads_files("rg --files", FileTool::FsList, &["rg"])
    },
    ReadPattern {
        bundled: false,
        refused_by: &["-delete"],
        without_files: WithoutFiles::Reads,
        ..reads_files("find", FileTool::FsList, &["find"])
    },
    ReadPattern {
        value_options: &[
            "-I",
            "-w",
            "-T",
            "--ignore",
            "--hide",
            "--width",
            "--tabsize",
            "--format",
            "--sort",
            "--time",
        ],
        without_files: WithoutFiles::Reads,
        ..reads_files("ls", FileTool::FsList, &["ls"])
    },
    ReadPattern { without_files: WithoutFiles::Reads, ..reads_files("tree", FileTool::FsList, &["tree"]) },
];

/// A simple command's options (each with its value, when it takes one) and operands.
struct Parsed<'w> {
    options: Vec<(String, Option<&'w str>)>,
    operands: Vec<&'w str>,
}

impl Parsed<'_> {
    fn has(&self, any_of: &[&str]) -> bool {
        self.options.iter().any(|(name, _)| any_of.contains(&name.as_str()))
    }

    fn value_of(&self, any_of: &[&str]) -> Option<&str> {
        self.options.iter().find(|(name, _)| any_of.contains(&name.as_str())).and_then(|(_, value)| *value)
    }
}

fn parse<'w>(pattern: &ReadPattern, args: &'w [String]) -> Parsed<'w> {
    let mut parsed = Parsed { options: Vec::new(), operands: Vec::new() };
    let takes_value = |name: &str| pattern.value_options.contains(&name);
    let mut i = 0;
    let mut options_ended = false;
    while let Some(word) = args.get(i) {
        i += 1;
        if options_ended || word == "-" || !word.starts_with('-') {
            parsed.operands.push(word);
            continue;
        }
        if word == "--" {
            options_ended = true;
            continue;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (format!("--{name}"), Some(value)),
                None if takes_value(word) => (word.clone(), args.get(i).map(|v| v.as_str())),
                None => (word.clone(), None),
            };
            if value.is_some() && !word.contains('=') {
                i += 1;
            }
            parsed.options.push((name, value));
            continue;
        }
        if !pattern.bundled {
            let value = if takes_value(word) { args.get(i).map(String::as_str) } else { None };
            i += usize::from(value.is_some());
            parsed.options.push((word.clone(), value));
            continue;
        }
        for (at, letter) in word.char_indices().skip(1) {
            let name = format!("-{letter}");
            if takes_value(&name) {
                let rest = &word[at + letter.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).map(String::as_str)
                } else {
                    Some(rest)
                };
                parsed.options.push((name, value));
                break;
            }
            parsed.options.push((name, None));
        }
    }
    parsed
}

impl ReadPattern {
    /// Whether `command` reads files this way.
    ///
    /// ```
    /// use toolhost::stats::shell::simple_commands;
    /// use toolhost::stats::shell_reads::PATTERNS;
    /// let sed = PATTERNS.iter().find(|p| p.name == "sed -n").unwrap();
    /// let read = |line: &str| sed.matches(&simple_commands(line).unwrap()[0]);
    /// assert!(read("sed -n '120,180p' src/query.py"));
    /// assert!(!read("sed -i 's/a/b/' src/query.py"));
    /// ```
    pub fn matches(&self, command: &SimpleCommand) -> bool {
        let Some((name, args)) = command.words.split_first() else { return false };
        if !self.commands.contains(&command_name(name)) {
            return false;
        }
        let parsed = parse(self, args);
        if (!self.needs.is_empty() && !parsed.has(self.needs)) || parsed.has(self.refused_by) {
            return false;
        }
        if !self.code_contains.is_empty() {
            let Some(code) = parsed.value_of(self.needs) else { return false };
            if !self.code_contains.iter().any(|c| code.contains(c))
                || self.code_refused_by.iter().any(|c| code.contains(c))
            {
                return false;
            }
        }
        let leading = if parsed.has(self.leading_given_by) { 0 } else { self.leading_operands };
        let files = parsed.operands.iter().skip(leading).filter(|o| **o != "-").count();
        files > 0
            || command.given_files
            || match self.without_files {
                WithoutFiles::ReadsStdin => false,
                WithoutFiles::Reads => true,
                WithoutFiles::ReadsWith(options) => parsed.has(options),
                WithoutFiles::ReadsUnlessPiped => !command.piped,
            }
    }
}

/// The patterns a command line matches (indices into [`PATTERNS`], each once, in table order).
///
/// ```
/// use toolhost::stats::shell_reads::{reads, PATTERNS};
/// let found = reads("cd src && grep -rn TODO . | grep -v test | head -5").unwrap();
/// let names: Vec<&str> = found.iter().map(|&i| PATTERNS[i].name).collect();
/// assert_eq!(names, ["grep"]);
/// ```
///
/// # Errors
/// [`Unsplittable`] when the command line has a quote left open.
pub fn reads(line: &str) -> Result<Vec<usize>, Unsplittable> {
    let mut found = Vec::new();
    for command in simple_commands(line)? {
        if let Some(index) = PATTERNS.iter().position(|p| p.matches(&command)) {
            if !found.contains(&index) {
                found.push(index);
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(line: &str) -> Vec<&'static str> {
        reads(line).unwrap().into_iter().map(|i| PATTERNS[i].name).collect()
    }

    /// Command lines as models write them, with what each reads through the shell.
    const CASES: &[(&str, &[&str])] = &[
        ("cat src/main.rs", &["cat"]),
        ("cat -n src/lib.rs | head -50", &["cat"]),
        ("cat a.txt b.txt && cat c.txt", &["cat"]),
        ("cat > new.py", &[]),
        ("cat - < input.txt", &[]),
        ("head -n 40 README.md", &["head"]),
        ("head -20 setup.py", &["head"]),
        ("head --lines=5 a.txt", &["head"]),
        ("git log --oneline | head -n 5", &[]),
        ("tail -n +120 src/app.py | head -40", &["tail"]),
        ("tail -f server.log", &["tail"]),
        ("sed -n '120,180p' django/db/models/query.py", &["sed -n"]),
        ("sed -n -e '1,5p' -e 10p a.txt", &["sed -n"]),
        ("sed -ne '/fn main/,/^}/p' src/main.rs", &["sed -n"]),
        ("sed --quiet 5p a.txt", &["sed -n"]),
        ("sed -i 's/foo/bar/' a.py", &[]),
        ("sed -n -i '1d' a.py", &[]),
        ("sed 's/a/b/' a.txt", &[]),
        ("git diff | sed -n 1,40p", &[]),
        ("nl -ba src/x.py | sed -n '10,20p'", &["nl"]),
        ("awk 'NR>=10 && NR<=20' src/x.py", &["awk"]),
        ("ps aux | awk '{print $2}'", &[]),
        ("grep -rn \"def get_queryset\" --include=\"*.py\" .", &["grep"]),
        ("grep -rn TODO", &["grep"]),
        ("grep -n foo a.txt b.txt", &["grep"]),
        ("grep -e foo -e bar src/a.c", &["grep"]),
        ("grep --include '*.py' -l import -r .", &["grep"]),
        ("ps aux | grep python", &[]),
        ("git log --oneline | grep fix | head", &[]),
        ("grep -r TODO src | grep -v test | grep -c FIXME", &["grep"]),
        ("cat a.txt | grep x | grep -v y", &["cat"]),
        ("rg -n 'fn main'", &["rg"]),
        ("rg -g '*.rs' -t rust unsafe src", &["rg"]),
        ("echo hello | rg hell", &[]),
        ("cargo test 2>&1 | rg FAILED", &[]),
        ("rg --files | rg test", &["rg --files"]),
        ("find . -name \"*.py\" -path \"*tests*\"", &["find"]),
        ("find . -name '*.pyc' -delete", &[]),
        ("find . -type f -name '*.py' | xargs grep -l 'import numpy'", &["grep", "find"]),
        ("find src -name '*.rs' -exec wc -l {} +", &["wc", "find"]),
        ("ls", &["ls"]),
        ("ls -la src/ && ls tests", &["ls"]),
        ("ls | wc -l", &["ls"]),
        ("tree -L 2", &["tree"]),
        ("python -c \"print(open('setup.py').read()[:500])\"", &["python -c with open"]),
        (
            "python3 -c 'import json; d=json.load(open(\"package.json\")); print(d[\"version\"])'",
            &["python -c with open"],
        ),
        ("python3 -c \"import pathlib; print(pathlib.Path('a.txt').read_text())\"", &["python -c with open"]),
        ("python3 -c \"open('out.txt','w').write('x')\"", &[]),
        ("python3 -c \"print(1+1)\"", &[]),
        ("python3 script.py data.txt", &[]),
        ("python - <<'EOF'\nprint(open('a').read())\nEOF", &[]),
        ("wc -l src/*.rs", &["wc"]),
        ("cargo build 2>&1 | wc -l", &[]),
        ("cd /repo && cat setup.cfg", &["cat"]),
        ("cd repo; git status && sed -n 1,20p x.py", &["sed -n"]),
        ("cat > new.py << 'EOF'\nimport os\nprint(open('x').read())\ncat foo\nEOF\npython new.py", &[]),
        ("echo \"cat file.txt\" && echo 'head -5 a'", &[]),
        ("bash -lc 'cd src && head -n 30 main.rs'", &["head"]),
        ("sudo -u app tail -n 100 /var/log/app.log", &["tail"]),
        ("timeout 5 cat /proc/cpuinfo", &["cat"]),
        ("for f in src/*.rs; do head -3 \"$f\"; done", &["head"]),
        ("if grep -q needle hay.txt; then echo found; fi", &["grep"]),
        ("LC_ALL=C grep -c x big.log", &["grep"]),
        ("cat a.txt 2>/dev/null || echo missing", &["cat"]),
        ("pytest -x tests/ 2>&1 | tail -30", &[]),
        ("mkdir -p out && cp a b && touch c", &[]),
    ];

    #[test]
    fn each_command_line_reads_what_its_commands_read() {
        for (line, expected) in CASES {
            let mut expected: Vec<&str> = expected.to_vec();
            let order = |name: &&str| PATTERNS.iter().position(|p| p.name == *name);
            expected.sort_by_key(order);
            assert_eq!(names(line), expected, "{line}");
        }
    }

    #[test]
    fn every_pattern_is_met_by_some_case_and_names_are_unique() {
        for pattern in PATTERNS {
            assert!(CASES.iter().any(|(_, found)| found.contains(&pattern.name)), "no case for {}", pattern.name);
            assert_eq!(PATTERNS.iter().filter(|p| p.name == pattern.name).count(), 1, "{}", pattern.name);
        }
    }

    #[test]
    fn a_line_with_an_open_quote_is_not_guessed_at() {
        assert_eq!(reads("cat 'a.txt"), Err(Unsplittable));
    }
}
