//! What `toolhost stats` shows: the [`Report`] made from the counts, as JSON (`--format json`, a
//! stable shape, documented in [`crate::stats`]) or as text tables. It owns the shape and the
//! rendering; the counting is [`super::tally`]'s.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value};

use super::line::Skip;
use super::shell_reads::{FileTool, PATTERNS};
use super::tally::{Counts, Distribution, Names, Tally};
use crate::error::Reason;
use crate::tidy::RepairKind;

/// The report's shape version, `version` in the JSON.
pub const REPORT_VERSION: u32 = 1;

/// The report, as `--format json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// What was read.
    pub inputs: Inputs,
    /// Sessions.
    pub sessions: Sessions,
    /// Calls by tool.
    pub calls: Calls,
    /// Calls refused for the shape of their arguments.
    pub refused: Refused,
    /// Tidy repairs by kind.
    pub tidy: Tidy,
    /// The guard's denials and confirmations.
    pub guard: GuardCounts,
    /// Shell commands that read what file tools serve.
    pub shell_reads: ShellReads,
    /// Code-mode programs.
    pub code_mode: CodeMode,
}

/// What was read.
#[derive(Debug, Clone, Serialize)]
pub struct Inputs {
    /// Logs read.
    pub logs: u64,
    /// Lines read (blank ones left out).
    pub lines: u64,
    /// Lines skipped: `total`, then one count per reason.
    pub skipped: Map<String, Value>,
    /// Inputs that could not be read.
    pub unreadable: Vec<Unreadable>,
    /// Sessions by log format version.
    pub log_versions: Map<String, Value>,
}

/// An input that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    /// The path.
    pub path: String,
    /// Why.
    pub error: String,
}

/// A median and a maximum.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MedianMax {
    /// The median (the lower of the two middle values).
    pub median: u64,
    /// The largest.
    pub max: u64,
}

impl From<&Distribution> for MedianMax {
    fn from(d: &Distribution) -> Self {
        MedianMax { median: d.quantile(0.5), max: d.max() }
    }
}

/// Sessions.
#[derive(Debug, Clone, Serialize)]
pub struct Sessions {
    /// How many.
    pub count: u64,
    /// Turns (requests) per session.
    pub turns: MedianMax,
    /// Calls per session.
    pub calls: MedianMax,
    /// How they ended: `answered`, `max_turns`, `interrupted`, `error`, `unfinished`.
    pub ended: Map<String, Value>,
    /// The sessions that ended in an error, by its kind.
    pub errors: Map<String, Value>,
    /// Token usage, over the sessions whose logs have it.
    pub tokens: TokenCounts,
}

/// Token usage.
#[derive(Debug, Clone, Serialize)]
pub struct TokenCounts {
    /// Sessions with usage.
    pub sessions: u64,
    /// Replies with usage.
    pub turns: u64,
    /// Input tokens, cached ones included.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from a cache.
    pub cached: u64,
    /// Input tokens per session.
    pub input_per_session: MedianMax,
    /// Output tokens per session.
    pub output_per_session: MedianMax,
}

/// Calls.
#[derive(Debug, Clone, Serialize)]
pub struct Calls {
    /// How many.
    pub total: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Per tool, the most called first.
    pub tools: Vec<ToolRow>,
}

/// One tool's calls.
#[derive(Debug, Clone, Serialize)]
pub struct ToolRow {
    /// The tool's name as the calls gave it.
    pub tool: String,
    /// How many.
    pub calls: u64,
    /// Errors: `total`, then by kind, the most frequent first.
    pub errors: Map<String, Value>,
    /// Time taken, in milliseconds.
    pub time_ms: Times,
}

/// A median and a 95th percentile, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Times {
    /// The median.
    pub median: f64,
    /// The 95th percentile.
    pub p95: f64,
}

/// Calls refused for their arguments' shape, by cause: each refused call once.
#[derive(Debug, Clone, Serialize)]
pub struct Refused {
    /// All causes.
    pub total: u64,
    /// Names the tool does not have.
    pub unknown_argument: NameCounts,
    /// Required arguments left out.
    pub missing_argument: NameCounts,
    /// Values of the wrong type.
    pub wrong_type: NameCounts,
    /// Arguments that are not an object of names: by reason.
    pub bad_arguments: ReasonCounts,
    /// Tools that do not exist (P-format tags naming one included).
    pub unknown_tool: NameCounts,
    /// P-format tags that could not be read: by reason.
    pub pformat: ReasonCounts,
}

/// A count, and the names behind it.
#[derive(Debug, Clone, Serialize)]
pub struct NameCounts {
    /// How many.
    pub count: u64,
    /// By name, the most frequent first.
    pub names: Vec<NameRow>,
}

/// One name.
#[derive(Debug, Clone, Serialize)]
pub struct NameRow {
    /// The name (an argument's, or a tool's).
    pub name: String,
    /// How often.
    pub count: u64,
    /// By the tool the call named.
    pub tools: Map<String, Value>,
}

/// A count by reason.
#[derive(Debug, Clone, Serialize)]
pub struct ReasonCounts {
    /// How many.
    pub count: u64,
    /// By reason: every known one (0 when none), then `unclassified` (logs that record none).
    pub reasons: Map<String, Value>,
}

/// Tidy repairs.
#[derive(Debug, Clone, Serialize)]
pub struct Tidy {
    /// How many.
    pub total: u64,
    /// By kind: every kind (0 when none), then `unclassified`.
    pub kinds: Map<String, Value>,
}

/// The guard.
#[derive(Debug, Clone, Serialize)]
pub struct GuardCounts {
    /// Calls denied, by the rule that denied them (`the default action`, `workspace boundary`).
    pub denied: Denied,
    /// Confirmations asked.
    pub confirmations: Confirmations,
}

/// Denials.
#[derive(Debug, Clone, Serialize)]
pub struct Denied {
    /// How many.
    pub total: u64,
    /// By rule, the most frequent first.
    pub rules: Vec<RuleRow>,
}

/// One rule's denials.
#[derive(Debug, Clone, Serialize)]
pub struct RuleRow {
    /// The rule: `rule N (TOOL, path PATH) at FILE:LINE`, `the default action` or `workspace boundary`.
    pub rule: String,
    /// How many.
    pub count: u64,
}

/// Confirmations.
#[derive(Debug, Clone, Serialize)]
pub struct Confirmations {
    /// How many were asked.
    pub asked: u64,
    /// Answered yes.
    pub yes: u64,
    /// Answered no (`nobody` answers no).
    pub no: u64,
    /// By who answered.
    pub by: Vec<AnswererRow>,
}

/// One answerer's confirmations.
#[derive(Debug, Clone, Serialize)]
pub struct AnswererRow {
    /// `terminal`, `--yes`, `nobody`, or an embedder's name.
    pub by: String,
    /// Yes.
    pub yes: u64,
    /// No.
    pub no: u64,
}

/// Shell reads.
#[derive(Debug, Clone, Serialize)]
pub struct ShellReads {
    /// `shell-exec` calls.
    pub shell_exec_calls: u64,
    /// ...with a command to read.
    pub commands: u64,
    /// ...that could not be split (a quote left open).
    pub unsplittable: u64,
    /// ...that read files a file tool serves.
    pub reading: u64,
    /// Per file tool.
    pub tools: Vec<FileToolRow>,
}

/// Shell reads beside one file tool's calls.
#[derive(Debug, Clone, Serialize)]
pub struct FileToolRow {
    /// `fs-read`, `index-grep` or `fs-list`.
    pub tool: String,
    /// Its own calls in the same sessions.
    pub calls: u64,
    /// Shell commands that read what it serves.
    pub shell_reads: u64,
    /// By pattern, in table order.
    pub patterns: Vec<PatternRow>,
}

/// One pattern.
#[derive(Debug, Clone, Serialize)]
pub struct PatternRow {
    /// Its name (`sed -n`).
    pub pattern: String,
    /// Command lines that read this way.
    pub count: u64,
    /// The first few.
    pub examples: Vec<String>,
}

/// Code mode.
#[derive(Debug, Clone, Serialize)]
pub struct CodeMode {
    /// Programs run.
    pub programs: u64,
    /// Programs that failed: `total`, then by kind.
    pub failed: Map<String, Value>,
    /// Calls the programs made.
    pub nested_calls: NestedCalls,
    /// Nested calls that failed: `total`, then by kind.
    pub nested_errors: Map<String, Value>,
}

/// Calls programs made.
#[derive(Debug, Clone, Serialize)]
pub struct NestedCalls {
    /// How many.
    pub total: u64,
    /// Per program.
    pub per_program: MedianMax,
    /// By tool, the most called first.
    pub tools: Map<String, Value>,
}

/// Counts, the most frequent first (then by name), as a JSON object.
fn by_count(counts: &Counts) -> Map<String, Value> {
    let mut rows: Vec<(&String, &u64)> = counts.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    rows.into_iter().map(|(k, v)| (k.clone(), Value::from(*v))).collect()
}

/// `total`, then the counts, the most frequent first.
fn with_total(counts: &Counts) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("total".into(), Value::from(counts.values().sum::<u64>()));
    map.extend(by_count(counts));
    map
}

/// Every known name in order (0 when not seen), then the others seen, by count.
fn known_then_others(known: &[&str], counts: &Counts) -> Map<String, Value> {
    let mut map: Map<String, Value> =
        known.iter().map(|k| (k.to_string(), Value::from(counts.get(*k).copied().unwrap_or(0)))).collect();
    let others: Counts =
        counts.iter().filter(|(k, _)| !known.contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect();
    map.extend(by_count(&others));
    map
}

fn names(names: &Names) -> NameCounts {
    let mut rows: Vec<NameRow> = names
        .names
        .iter()
        .map(|(name, (count, tools))| NameRow { name: name.clone(), count: *count, tools: by_count(tools) })
        .collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    NameCounts { count: names.count, names: rows }
}

fn reasons(known: &[&str], counts: &Counts) -> ReasonCounts {
    ReasonCounts { count: counts.values().sum(), reasons: known_then_others(known, counts) }
}

fn millis(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

impl Report {
    /// The report of what `tally` counted.
    pub fn new(tally: &Tally) -> Report {
        let skip_names: Vec<&str> = Skip::ALL.iter().map(|s| s.as_str()).collect();
        let skipped_counts: Counts = tally.skipped.iter().map(|(k, v)| (k.as_str().to_string(), *v)).collect();
        let mut skipped = Map::new();
        skipped.insert("total".into(), Value::from(skipped_counts.values().sum::<u64>()));
        skipped.extend(known_then_others(&skip_names, &skipped_counts));

        let mut tools: Vec<ToolRow> = tally
            .tools
            .iter()
            .map(|(tool, calls)| ToolRow {
                tool: tool.clone(),
                calls: calls.calls,
                errors: with_total(&calls.errors),
                time_ms: Times {
                    median: millis(calls.time_us.quantile(0.5)),
                    p95: millis(calls.time_us.quantile(0.95)),
                },
            })
            .collect();
        tools.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));

        let refused = Refused {
            total: tally.unknown_argument.count
                + tally.missing_argument.count
                + tally.wrong_type.count
                + tally.unknown_tool.count
                + tally.bad_arguments.values().sum::<u64>()
                + tally.pformat.values().sum::<u64>(),
            unknown_argument: names(&tally.unknown_argument),
            missing_argument: names(&tally.missing_argument),
            wrong_type: names(&tally.wrong_type),
            bad_arguments: reasons(&Reason::CALL_PATH.map(Reason::as_str), &tally.bad_arguments),
            unknown_tool: names(&tally.unknown_tool),
            pformat: reasons(&Reason::PFORMAT.map(Reason::as_str), &tally.pformat),
        };

        let kinds: Vec<&str> = RepairKind::ALL.iter().map(|k| k.as_str()).collect();
        let tidy = Tidy { total: tally.repairs.values().sum(), kinds: known_then_others(&kinds, &tally.repairs) };

        let mut rules: Vec<RuleRow> =
            tally.denials.iter().map(|(rule, count)| RuleRow { rule: rule.clone(), count: *count }).collect();
        rules.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.rule.cmp(&b.rule)));
        let by: Vec<AnswererRow> = tally
            .confirmations
            .iter()
            .map(|(by, (yes, no))| AnswererRow { by: by.clone(), yes: *yes, no: *no })
            .collect();
        let (yes, no) = by.iter().fold((0, 0), |(y, n), row| (y + row.yes, n + row.no));
        let guard = GuardCounts {
            denied: Denied { total: rules.iter().map(|r| r.count).sum(), rules },
            confirmations: Confirmations { asked: yes + no, yes, no, by },
        };

        let file_tools = FileTool::ALL
            .into_iter()
            .map(|tool| {
                let (shell_reads, calls) = tally.file_tools.get(&tool).copied().unwrap_or((0, 0));
                let patterns = PATTERNS
                    .iter()
                    .zip(&tally.patterns)
                    .filter(|(pattern, _)| pattern.serves == tool)
                    .map(|(pattern, count)| PatternRow {
                        pattern: pattern.name.to_string(),
                        count: count.count,
                        examples: count.examples.clone(),
                    })
                    .collect();
                FileToolRow { tool: tool.name().to_string(), calls, shell_reads, patterns }
            })
            .collect();

        Report {
            version: REPORT_VERSION,
            inputs: Inputs {
                logs: tally.logs,
                lines: tally.lines,
                skipped,
                unreadable: tally
                    .unreadable
                    .iter()
                    .map(|(path, error)| Unreadable { path: path.clone(), error: error.clone() })
                    .collect(),
                log_versions: tally.versions.iter().map(|(k, v)| (k.clone(), Value::from(*v))).collect(),
            },
            sessions: Sessions {
                count: tally.sessions,
                turns: (&tally.turns).into(),
                calls: (&tally.session_calls).into(),
                ended: known_then_others(
                    &["answered", "max_turns", "interrupted", "error", "unfinished"],
                    &tally.ended,
                ),
                errors: by_count(&tally.end_errors),
                tokens: TokenCounts {
                    sessions: tally.tokens.sessions,
                    turns: tally.tokens.turns,
                    input: tally.tokens.input,
                    output: tally.tokens.output,
                    cached: tally.tokens.cached,
                    input_per_session: (&tally.tokens.per_session_input).into(),
                    output_per_session: (&tally.tokens.per_session_output).into(),
                },
            },
            calls: Calls {
                total: tools.iter().map(|t| t.calls).sum(),
                errors: tally.tools.values().map(|t| t.errors.values().sum::<u64>()).sum(),
                tools,
            },
            refused,
            tidy,
            guard,
            shell_reads: ShellReads {
                shell_exec_calls: tally.shell_exec,
                commands: tally.shell_commands,
                unsplittable: tally.unsplittable,
                reading: tally.reading,
                tools: file_tools,
            },
            code_mode: CodeMode {
                programs: tally.programs,
                failed: with_total(&tally.program_errors),
                nested_calls: NestedCalls {
                    total: tally.nested_tools.values().sum(),
                    per_program: (&tally.nested_calls).into(),
                    tools: by_count(&tally.nested_tools),
                },
                nested_errors: with_total(&tally.nested_errors),
            },
        }
    }

    /// The report as `--format json` prints it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The report as text tables, as `toolhost stats` prints it.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.inputs_text(&mut out);
        self.sessions_text(&mut out);
        self.calls_text(&mut out);
        self.refused_text(&mut out);
        self.tidy_text(&mut out);
        self.guard_text(&mut out);
        self.shell_text(&mut out);
        self.code_text(&mut out);
        out
    }

    fn inputs_text(&self, out: &mut String) {
        let inputs = &self.inputs;
        let skipped = count_in(&inputs.skipped, "total");
        let _ = write!(
            out,
            "Read {} {}, {} {}",
            inputs.logs,
            plural(inputs.logs, "log", "logs"),
            inputs.lines,
            plural(inputs.lines, "line", "lines")
        );
        if skipped > 0 {
            let _ = write!(out, "; {skipped} skipped ({})", listing(&inputs.skipped, &["total"]));
        }
        out.push('\n');
        let old: u64 =
            inputs.log_versions.iter().filter(|(v, _)| v.as_str() == "1").map(|(_, n)| n.as_u64().unwrap_or(0)).sum();
        if old > 0 {
            let _ = writeln!(
                out,
                "{old} {} from log format 1 (before repairs and refusal reasons were recorded): their repairs are read \
                 from the arguments, their bad_arguments and P-format reasons are unclassified",
                plural(old, "session is", "sessions are")
            );
        }
        let current = super::NEWEST_LOG_FORMAT;
        for (version, count) in &inputs.log_versions {
            let count = count.as_u64().unwrap_or(0);
            if version.parse::<u32>().is_ok_and(|v| v > current) {
                let _ = writeln!(
                    out,
                    "{count} {} from log format {version}, newer than this toolhost's ({current}): what it knows is counted",
                    plural(count, "session is", "sessions are")
                );
            }
        }
        for unreadable in &inputs.unreadable {
            let _ = writeln!(out, "could not read {}: {}", unreadable.path, unreadable.error);
        }
    }

    fn sessions_text(&self, out: &mut String) {
        let s = &self.sessions;
        let _ = writeln!(out, "\nSessions: {}", s.count);
        if s.count == 0 {
            return;
        }
        table(
            out,
            &["", "median", "max"],
            &[
                vec!["turns".into(), s.turns.median.to_string(), s.turns.max.to_string()],
                vec!["calls".into(), s.calls.median.to_string(), s.calls.max.to_string()],
            ],
        );
        let _ = writeln!(out, "  ended: {}", listing(&s.ended, &[]));
        if !s.errors.is_empty() {
            let _ = writeln!(out, "  errors: {}", listing(&s.errors, &[]));
        }
        let t = &s.tokens;
        if t.sessions == 0 {
            let _ = writeln!(out, "  tokens: no usage in these logs");
        } else {
            let _ = writeln!(
                out,
                "  tokens ({} {} with usage, {} turns): input {} (cached {}), output {}; per session input median {} max {}, output median {} max {}",
                t.sessions,
                plural(t.sessions, "session", "sessions"),
                t.turns,
                t.input,
                t.cached,
                t.output,
                t.input_per_session.median,
                t.input_per_session.max,
                t.output_per_session.median,
                t.output_per_session.max
            );
        }
    }

    fn calls_text(&self, out: &mut String) {
        let c = &self.calls;
        let _ = writeln!(out, "\nCalls by tool: {} calls, {} errors", c.total, c.errors);
        if c.tools.is_empty() {
            return;
        }
        let rows: Vec<Vec<String>> = c
            .tools
            .iter()
            .map(|t| {
                vec![
                    t.tool.clone(),
                    t.calls.to_string(),
                    count_in(&t.errors, "total").to_string(),
                    format!("{:.1}", t.time_ms.median),
                    format!("{:.1}", t.time_ms.p95),
                    listing(&t.errors, &["total"]),
                ]
            })
            .collect();
        table(out, &["tool", "calls", "errors", "median ms", "p95 ms", "errors by kind"], &rows);
    }

    fn refused_text(&self, out: &mut String) {
        let r = &self.refused;
        let _ = writeln!(out, "\nRefused shapes: {} of {} calls", r.total, self.calls.total);
        if r.total == 0 {
            return;
        }
        let named = |n: &NameCounts| {
            n.names.iter().map(|row| format!("{} {}", row.name, row.count)).collect::<Vec<_>>().join(", ")
        };
        let rows = vec![
            vec!["unknown argument names".into(), r.unknown_argument.count.to_string(), named(&r.unknown_argument)],
            vec!["missing arguments".into(), r.missing_argument.count.to_string(), named(&r.missing_argument)],
            vec!["wrong types".into(), r.wrong_type.count.to_string(), named(&r.wrong_type)],
            vec!["bad arguments".into(), r.bad_arguments.count.to_string(), listing(&r.bad_arguments.reasons, &[])],
            vec!["unknown tools".into(), r.unknown_tool.count.to_string(), named(&r.unknown_tool)],
            vec!["P-format refusals".into(), r.pformat.count.to_string(), listing(&r.pformat.reasons, &[])],
        ];
        table(out, &["cause", "calls", "what"], &rows);
    }

    fn tidy_text(&self, out: &mut String) {
        let _ = writeln!(out, "\nTidy repairs: {}", self.tidy.total);
        if self.tidy.total > 0 {
            let _ = writeln!(out, "  {}", listing(&self.tidy.kinds, &[]));
        }
    }

    fn guard_text(&self, out: &mut String) {
        let g = &self.guard;
        let _ = writeln!(
            out,
            "\nGuard: {} denied, {} confirmations asked ({} yes, {} no)",
            g.denied.total, g.confirmations.asked, g.confirmations.yes, g.confirmations.no
        );
        if !g.denied.rules.is_empty() {
            let rows: Vec<Vec<String>> =
                g.denied.rules.iter().map(|r| vec![r.rule.clone(), r.count.to_string()]).collect();
            table(out, &["denied by", "calls"], &rows);
        }
        if !g.confirmations.by.is_empty() {
            let rows: Vec<Vec<String>> =
                g.confirmations.by.iter().map(|r| vec![r.by.clone(), r.yes.to_string(), r.no.to_string()]).collect();
            table(out, &["answered by", "yes", "no"], &rows);
        }
    }

    fn shell_text(&self, out: &mut String) {
        let s = &self.shell_reads;
        let _ = writeln!(
            out,
            "\nShell reads the file tools would have served: {} of {} shell-exec calls",
            s.reading, s.shell_exec_calls
        );
        if s.unsplittable > 0 {
            let _ = writeln!(out, "  ({} commands could not be split: a quote left open)", s.unsplittable);
        }
        let mut rows = Vec::new();
        for tool in &s.tools {
            rows.push(vec![tool.tool.clone(), tool.calls.to_string(), tool.shell_reads.to_string(), String::new()]);
            for pattern in tool.patterns.iter().filter(|p| p.count > 0) {
                let example = pattern.examples.first().cloned().unwrap_or_default();
                rows.push(vec![format!("  {}", pattern.pattern), String::new(), pattern.count.to_string(), example]);
                for more in pattern.examples.iter().skip(1) {
                    rows.push(vec![String::new(), String::new(), String::new(), more.clone()]);
                }
            }
        }
        table(out, &["file tool / shell pattern", "tool calls", "shell reads", "examples"], &rows);
    }

    fn code_text(&self, out: &mut String) {
        let c = &self.code_mode;
        if c.programs == 0 {
            let _ = writeln!(out, "\nCode mode: no programs in these logs");
            return;
        }
        let _ = writeln!(
            out,
            "\nCode mode: {} programs, {} failed{}; {} nested calls (per program median {}, max {}), {} failed{}",
            c.programs,
            count_in(&c.failed, "total"),
            bracketed(&listing(&c.failed, &["total"])),
            c.nested_calls.total,
            c.nested_calls.per_program.median,
            c.nested_calls.per_program.max,
            count_in(&c.nested_errors, "total"),
            bracketed(&listing(&c.nested_errors, &["total"])),
        );
        if !c.nested_calls.tools.is_empty() {
            let _ = writeln!(out, "  nested calls by tool: {}", listing(&c.nested_calls.tools, &[]));
        }
    }
}

fn bracketed(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(" ({text})")
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn count_in(map: &Map<String, Value>, key: &str) -> u64 {
    map.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `name count, ...` of a count map's non-zero entries, `leave_out` left out.
fn listing(map: &Map<String, Value>, leave_out: &[&str]) -> String {
    map.iter()
        .filter(|(k, v)| !leave_out.contains(&k.as_str()) && v.as_u64().unwrap_or(0) > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes rows under a header, columns padded to their widest cell, numbers right-aligned.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let numeric =
        |i: usize| rows.iter().all(|row| row.get(i).is_some_and(|c| c.is_empty() || c.parse::<f64>().is_ok()));
    let mut line = |cells: Vec<&str>| {
        let mut text = String::from(" ");
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            text.push(' ');
            if numeric(i) && i > 0 {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                if i + 1 < cells.len() {
                    text.push_str(&" ".repeat(pad));
                }
            }
            text.push(' ');
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
