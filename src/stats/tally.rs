//! The counts `toolhost stats` keeps while it reads, and folding each line into them. It owns
//! what counts as what (see the module docs of [`crate::stats`]); reading files is
//! [`super::input`]'s and showing the counts [`super::report`]'s.
//!
//! Memory does not grow with the number of logs: distributions are histograms of bounded size,
//! names are counted once each, and a few examples are kept per shell-read pattern.

use std::collections::BTreeMap;

use serde_json::Value;

use super::line::{Line, Record, Skip, Usage};
use super::shell_reads::{self, FileTool, PATTERNS};
use crate::tidy::RepairKind;

/// How many example command lines a shell-read pattern keeps.
pub const EXAMPLES: usize = 3;

/// The longest example kept, in characters.
const EXAMPLE_CHARS: usize = 120;

/// Values whose quantiles and maximum are reported: an HDR histogram, exact to three significant
/// digits (a quantile is the lowest value of its bucket), whose size does not grow with the number
/// of values; the maximum is kept exactly.
#[derive(Debug, Clone)]
pub struct Distribution {
    histogram: hdrhistogram::Histogram<u64>,
    max: u64,
}

impl Default for Distribution {
    fn default() -> Self {
        // Three significant digits; the histogram grows to fit the largest value seen.
        let histogram = hdrhistogram::Histogram::new(3).unwrap_or_else(|_| unreachable!("3 digits is in range"));
        Distribution { histogram, max: 0 }
    }
}

impl Distribution {
    /// Adds a value.
    pub fn record(&mut self, value: u64) {
        // An auto-resizing histogram takes any u64.
        let _ = self.histogram.record(value);
        self.max = self.max.max(value);
    }

    /// How many values were added.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The value at quantile `q` (0.5: the median, the lower of two middle values), 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.histogram.is_empty() {
            return 0;
        }
        self.histogram.lowest_equivalent(self.histogram.value_at_quantile(q))
    }

    /// The largest value, 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Distribution) {
        // Both histograms have the same precision and grow to fit: adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
        self.max = self.max.max(other.max);
    }
}

/// Names (argument names, tools) counted, each with the tools it came with.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// How many in all.
    pub count: u64,
    /// Per name: how many, and per tool.
    pub names: BTreeMap<String, (u64, BTreeMap<String, u64>)>,
}

impl Names {
    fn merge(&mut self, other: Names) {
        self.count += other.count;
        for (name, (count, tools)) in other.names {
            let (mine, my_tools) = self.names.entry(name).or_default();
            *mine += count;
            merge_counts(my_tools, tools);
        }
    }

    fn add(&mut self, name: &str, tool: &str) {
        self.count += 1;
        let (count, tools) = self.names.entry(name.to_string()).or_default();
        *count += 1;
        *tools.entry(tool.to_string()).or_default() += 1;
    }
}

/// Counts by a name.
pub type Counts = BTreeMap<String, u64>;

fn merge_counts(counts: &mut Counts, other: Counts) {
    for (name, count) in other {
        *counts.entry(name).or_default() += count;
    }
}

fn bump(counts: &mut Counts, name: &str) {
    match counts.get_mut(name) {
        Some(count) => *count += 1,
        None => {
            counts.insert(name.to_string(), 1);
        }
    }
}

/// One tool's calls.
#[derive(Debug, Clone, Default)]
pub struct ToolCalls {
    /// How many.
    pub calls: u64,
    /// Errors by kind.
    pub errors: Counts,
    /// Time taken, in microseconds.
    pub time_us: Distribution,
}

/// One shell-read pattern's count and first examples.
#[derive(Debug, Clone, Default)]
pub struct PatternCount {
    /// Command lines that read this way.
    pub count: u64,
    /// The first few of them, each once.
    pub examples: Vec<String>,
}

/// Token usage, over the sessions whose log has it.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// Sessions with usage on at least one reply.
    pub sessions: u64,
    /// Replies with usage.
    pub turns: u64,
    /// Input tokens, cached ones included.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from a cache, where the API said.
    pub cached: u64,
    /// Per session: input tokens.
    pub per_session_input: Distribution,
    /// Per session: output tokens.
    pub per_session_output: Distribution,
}

/// Everything counted so far.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Logs read (files, and standard input).
    pub logs: u64,
    /// Lines read, blank ones left out.
    pub lines: u64,
    /// Lines skipped, by why.
    pub skipped: BTreeMap<Skip, u64>,
    /// Inputs that could not be read, with why.
    pub unreadable: Vec<(String, String)>,
    /// Sessions by their log format version (`unknown` without a session line).
    pub versions: Counts,
    /// Sessions.
    pub sessions: u64,
    /// Turns per session.
    pub turns: Distribution,
    /// Calls per session.
    pub session_calls: Distribution,
    /// Sessions by how they ended (`unfinished`: the log has no end line).
    pub ended: Counts,
    /// Sessions that ended in an error, by its kind.
    pub end_errors: Counts,
    /// Token usage.
    pub tokens: Tokens,
    /// Calls by tool.
    pub tools: BTreeMap<String, ToolCalls>,
    /// Calls refused for an argument name the tool does not have.
    pub unknown_argument: Names,
    /// Calls refused for a missing argument.
    pub missing_argument: Names,
    /// Calls refused for a value of the wrong type.
    pub wrong_type: Names,
    /// Calls of tools that do not exist.
    pub unknown_tool: Names,
    /// `bad_arguments` refusals by reason (`unclassified` for logs without reasons).
    pub bad_arguments: Counts,
    /// P-format tags refused before the host, by reason.
    pub pformat: Counts,
    /// Tidy repairs by kind (`unclassified` for notes whose change cannot be told).
    pub repairs: Counts,
    /// Denials by the rule that denied (or `workspace boundary`).
    pub denials: Counts,
    /// Confirmations by who answered: (yes, no).
    pub confirmations: BTreeMap<String, (u64, u64)>,
    /// `shell-exec` calls.
    pub shell_exec: u64,
    /// ...of which had a command to read.
    pub shell_commands: u64,
    /// ...of which could not be split (a quote left open).
    pub unsplittable: u64,
    /// ...of which read files through the shell.
    pub reading: u64,
    /// Per pattern of [`PATTERNS`].
    pub patterns: Vec<PatternCount>,
    /// Per file tool: shell commands that read what it serves, and its own calls.
    pub file_tools: BTreeMap<FileTool, (u64, u64)>,
    /// Code-mode programs run.
    pub programs: u64,
    /// Programs that failed, by error kind.
    pub program_errors: Counts,
    /// Calls per program.
    pub nested_calls: Distribution,
    /// Nested calls by tool.
    pub nested_tools: Counts,
    /// Nested calls that failed, by error kind.
    pub nested_errors: Counts,
    current: Option<Session>,
}

/// The session being read.
#[derive(Debug, Clone, Default)]
struct Session {
    version: Option<u64>,
    pformat: bool,
    max_turn: u64,
    calls: u64,
    end: Option<(String, Option<u64>, Option<String>)>,
    usage: Option<Usage>,
}

impl Tally {
    /// Nothing counted yet.
    pub fn new() -> Self {
        Tally { patterns: vec![PatternCount::default(); PATTERNS.len()], ..Tally::default() }
    }

    /// Adds the counts of `later`, whose logs come after this one's (its examples are kept only
    /// where this one has room for more). Both must be between sessions ([`Tally::finish`]).
    pub fn merge(&mut self, later: Tally) {
        self.logs += later.logs;
        self.lines += later.lines;
        for (why, count) in later.skipped {
            *self.skipped.entry(why).or_default() += count;
        }
        self.unreadable.extend(later.unreadable);
        merge_counts(&mut self.versions, later.versions);
        self.sessions += later.sessions;
        self.turns.merge(&later.turns);
        self.session_calls.merge(&later.session_calls);
        merge_counts(&mut self.ended, later.ended);
        merge_counts(&mut self.end_errors, later.end_errors);
        let (tokens, more) = (&mut self.tokens, later.tokens);
        tokens.sessions += more.sessions;
        tokens.turns += more.turns;
        tokens.input = tokens.input.saturating_add(more.input);
        tokens.output = tokens.output.saturating_add(more.output);
        tokens.cached = tokens.cached.saturating_add(more.cached);
        tokens.per_session_input.merge(&more.per_session_input);
        tokens.per_session_output.merge(&more.per_session_output);
        for (tool, calls) in later.tools {
            let mine = self.tools.entry(tool).or_default();
            mine.calls += calls.calls;
            merge_counts(&mut mine.errors, calls.errors);
            mine.time_us.merge(&calls.time_us);
        }
        self.unknown_argument.merge(later.unknown_argument);
        self.missing_argument.merge(later.missing_argument);
        self.wrong_type.merge(later.wrong_type);
        self.unknown_tool.merge(later.unknown_tool);
        merge_counts(&mut self.bad_arguments, later.bad_arguments);
        merge_counts(&mut self.pformat, later.pformat);
        merge_counts(&mut self.repairs, later.repairs);
        merge_counts(&mut self.denials, later.denials);
        for (by, (yes, no)) in later.confirmations {
            let mine = self.confirmations.entry(by).or_default();
            mine.0 += yes;
            mine.1 += no;
        }
        self.shell_exec += later.shell_exec;
        self.shell_commands += later.shell_commands;
        self.unsplittable += later.unsplittable;
        self.reading += later.reading;
        for (mine, more) in self.patterns.iter_mut().zip(later.patterns) {
            mine.count += more.count;
            for example in more.examples {
                if mine.examples.len() < EXAMPLES && !mine.examples.contains(&example) {
                    mine.examples.push(example);
                }
            }
        }
        for (tool, (reads, calls)) in later.file_tools {
            let mine = self.file_tools.entry(tool).or_default();
            mine.0 += reads;
            mine.1 += calls;
        }
        self.programs += later.programs;
        merge_counts(&mut self.program_errors, later.program_errors);
        self.nested_calls.merge(&later.nested_calls);
        merge_counts(&mut self.nested_tools, later.nested_tools);
        merge_counts(&mut self.nested_errors, later.nested_errors);
    }

    /// Counts a line that did not read.
    pub fn skip(&mut self, why: Skip) {
        self.lines += 1;
        *self.skipped.entry(why).or_default() += 1;
    }

    /// Counts a line that read.
    pub fn add(&mut self, line: Line<'_>) {
        self.lines += 1;
        match line {
            Line::Session { version, pformat } => {
                self.finish();
                self.current = Some(Session { version, pformat, ..Session::default() });
            }
            Line::Request { turn } => {
                let session = self.session();
                session.max_turn = session.max_turn.max(turn);
            }
            Line::Reply { turn, usage } => {
                let session = self.session();
                session.max_turn = session.max_turn.max(turn);
                if let Some(usage) = usage {
                    let total = session.usage.get_or_insert_with(Usage::default);
                    total.input_tokens = total.input_tokens.saturating_add(usage.input_tokens);
                    total.output_tokens = total.output_tokens.saturating_add(usage.output_tokens);
                    if let Some(cached) = usage.cached_tokens {
                        let sum = total.cached_tokens.get_or_insert(0);
                        *sum = sum.saturating_add(cached);
                    }
                    self.tokens.turns += 1;
                }
            }
            Line::Call { turn, before_host, record } => {
                let session = self.session();
                session.max_turn = session.max_turn.max(turn);
                session.calls += 1;
                let (version, pformat) = (session.version, session.pformat);
                self.call(&record, before_host && pformat, version);
            }
            Line::End { reason, turns, error_kind } => {
                self.session().end = Some((reason.into_owned(), turns, error_kind.map(|k| k.into_owned())));
            }
        }
    }

    /// Ends the session being read (at the end of a log, or when the next one starts).
    pub fn finish(&mut self) {
        let Some(session) = self.current.take() else { return };
        self.sessions += 1;
        bump(&mut self.versions, &session.version.map_or_else(|| "unknown".to_string(), |v| v.to_string()));
        let (reason, turns, error) = session.end.unwrap_or_else(|| ("unfinished".into(), None, None));
        self.turns.record(turns.unwrap_or(session.max_turn));
        self.session_calls.record(session.calls);
        bump(&mut self.ended, &reason);
        if let Some(kind) = error {
            bump(&mut self.end_errors, &kind);
        }
        if let Some(usage) = session.usage {
            self.tokens.sessions += 1;
            self.tokens.input = self.tokens.input.saturating_add(usage.input_tokens);
            self.tokens.output = self.tokens.output.saturating_add(usage.output_tokens);
            self.tokens.cached = self.tokens.cached.saturating_add(usage.cached_tokens.unwrap_or(0));
            self.tokens.per_session_input.record(usage.input_tokens);
            self.tokens.per_session_output.record(usage.output_tokens);
        }
    }

    /// The session being read; lines before any session line start one.
    fn session(&mut self) -> &mut Session {
        self.current.get_or_insert_with(Session::default)
    }

    /// Counts one call the model made.
    fn call(&mut self, record: &Record<'_>, pformat_tag: bool, version: Option<u64>) {
        let tool = record.tool.as_ref();
        let calls = self.tools.entry(tool.to_string()).or_default();
        calls.calls += 1;
        calls.time_us.record((record.elapsed_ms.max(0.0) * 1000.0).round() as u64);
        if !record.ok {
            bump(&mut calls.errors, record.error.as_ref().map_or("unknown", |e| e.kind.as_ref()));
        }
        if let (false, Some(error)) = (record.ok, &record.error) {
            let parameter = error.parameter.as_deref().unwrap_or("(none)");
            match error.kind.as_ref() {
                "unknown_argument" => self.unknown_argument.add(parameter, tool),
                "missing_argument" => self.missing_argument.add(parameter, tool),
                "wrong_type" => self.wrong_type.add(parameter, tool),
                "unknown_tool" => self.unknown_tool.add(error.tool.as_deref().unwrap_or(tool), tool),
                "bad_arguments" => {
                    let reason = error.reason.as_deref().unwrap_or("unclassified");
                    bump(if pformat_tag { &mut self.pformat } else { &mut self.bad_arguments }, reason);
                }
                _ => {}
            }
        }
        self.repairs(record, version);
        self.effects(record);
    }

    /// Counts a record's tidy repairs: as it lists them, or, in a log from before they were
    /// listed, as its arguments and tidied arguments show them.
    fn repairs(&mut self, record: &Record<'_>, version: Option<u64>) {
        if !record.repairs.is_empty() {
            for repair in &record.repairs {
                bump(&mut self.repairs, &repair.kind);
            }
            return;
        }
        if version.is_some_and(|v| v >= 2) || (record.notes.is_empty() && record.tidied.is_none()) {
            return;
        }
        let kinds = derived_repairs(record);
        let noted = kinds.iter().filter(|k| **k != RepairKind::StrictNullDropped).count();
        for kind in kinds {
            bump(&mut self.repairs, kind.as_str());
        }
        for _ in noted..record.notes.len() {
            bump(&mut self.repairs, "unclassified");
        }
    }

    /// What a record says of the guard, the shell and code mode; nested calls of a program too.
    fn effects(&mut self, record: &Record<'_>) {
        self.guard(record);
        self.shell(record);
        if let Some(nested) = &record.nested {
            self.programs += 1;
            self.nested_calls.record(nested.len() as u64);
            if !record.ok {
                bump(&mut self.program_errors, record.error.as_ref().map_or("unknown", |e| e.kind.as_ref()));
            }
            for call in nested {
                bump(&mut self.nested_tools, &call.tool);
                if !call.ok {
                    bump(&mut self.nested_errors, call.error.as_ref().map_or("unknown", |e| e.kind.as_ref()));
                }
                self.effects(call);
            }
        }
    }

    fn guard(&mut self, record: &Record<'_>) {
        let mut decided_no = false;
        if let Some(decision) = &record.decision {
            match decision.action.as_ref() {
                "deny" => {
                    decided_no = true;
                    let label = match &decision.rule {
                        Some(rule) => {
                            let path = rule.path.as_ref().map(|p| format!(", path {p}")).unwrap_or_default();
                            let origin = rule.origin.as_ref().map(|o| format!(" at {o}")).unwrap_or_default();
                            format!("rule {} ({}{path}){origin}", rule.index, rule.tool)
                        }
                        None => "the default action".to_string(),
                    };
                    bump(&mut self.denials, &label);
                }
                "confirm" => {
                    let yes = decision.answer == Some(true);
                    decided_no = !yes;
                    let by = decision.by.as_deref().unwrap_or("(unknown)").to_string();
                    let answers = self.confirmations.entry(by).or_default();
                    if yes {
                        answers.0 += 1;
                    } else {
                        answers.1 += 1;
                    }
                }
                _ => {}
            }
        }
        let denied = record.error.as_ref().is_some_and(|e| e.kind == "denied");
        if denied && !decided_no {
            bump(&mut self.denials, "workspace boundary");
        }
    }

    fn shell(&mut self, record: &Record<'_>) {
        if let Some(tool) = FileTool::ALL.into_iter().find(|t| t.name() == record.tool) {
            self.file_tools.entry(tool).or_default().1 += 1;
            return;
        }
        if record.tool != "shell-exec" {
            return;
        }
        self.shell_exec += 1;
        let Some(command) = command_of(record) else { return };
        self.shell_commands += 1;
        let Ok(found) = shell_reads::reads(&command) else {
            self.unsplittable += 1;
            return;
        };
        if found.is_empty() {
            return;
        }
        self.reading += 1;
        let mut served = Vec::new();
        for index in found {
            // A `Tally::default()` has no pattern counts yet: made when first needed.
            if self.patterns.len() < PATTERNS.len() {
                self.patterns.resize(PATTERNS.len(), PatternCount::default());
            }
            let Some(count) = self.patterns.get_mut(index) else { continue };
            count.count += 1;
            let example = example(&command);
            if count.examples.len() < EXAMPLES && !count.examples.contains(&example) {
                count.examples.push(example);
            }
            if !served.contains(&PATTERNS[index].serves) {
                served.push(PATTERNS[index].serves);
            }
        }
        for tool in served {
            self.file_tools.entry(tool).or_default().0 += 1;
        }
    }
}

/// A `shell-exec` call's command: its tidied arguments' `cmd`, else its arguments' (an object, or a
/// string holding one).
fn command_of(record: &Record<'_>) -> Option<String> {
    let raw = record.tidied.or(record.arguments)?;
    let arguments = match serde_json::from_str::<Value>(raw.get()).ok()? {
        Value::String(text) => serde_json::from_str::<Value>(&text).ok()?,
        other => other,
    };
    match arguments.get("cmd")? {
        Value::String(cmd) => Some(cmd.clone()),
        _ => None,
    }
}

/// A command line as an example: on one line, cut short.
fn example(command: &str) -> String {
    let one_line = command.trim().replace('\n', " \u{23ce} ");
    if one_line.chars().count() <= EXAMPLE_CHARS {
        return one_line;
    }
    let kept: String = one_line.chars().take(EXAMPLE_CHARS).collect();
    format!("{kept}...")
}

/// The repairs a record from before repairs were listed shows by its arguments and tidied
/// arguments: what a string became.
fn derived_repairs(record: &Record<'_>) -> Vec<RepairKind> {
    let parse =
        |raw: Option<&serde_json::value::RawValue>| raw.and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
    let (Some(received), Some(Value::Object(tidied))) = (parse(record.arguments), parse(record.tidied)) else {
        return Vec::new();
    };
    let mut kinds = Vec::new();
    let received = match received {
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(object)) => {
                kinds.push(RepairKind::ArgumentsJsonString);
                object
            }
            _ => return kinds,
        },
        Value::Object(object) => object,
        _ => return kinds,
    };
    for (name, value) in &received {
        match (value, tidied.get(name)) {
            (Value::Null, None) => kinds.push(RepairKind::StrictNullDropped),
            (Value::String(_), Some(Value::Number(_))) => kinds.push(RepairKind::NumericString),
            (Value::String(_), Some(Value::Bool(_))) => kinds.push(RepairKind::BooleanString),
            (Value::String(_), Some(Value::Array(_) | Value::Object(_))) => kinds.push(RepairKind::JsonTextParameter),
            _ => {}
        }
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::line::read;

    fn tally(lines: &[&str]) -> Tally {
        let mut tally = Tally::new();
        for line in lines {
            match read(line.as_bytes(), false) {
                Ok(line) => tally.add(line),
                Err(why) => tally.skip(why),
            }
        }
        tally.finish();
        tally
    }

    #[test]
    fn an_old_record_without_repairs_shows_them_by_what_its_strings_became() {
        let call = r#"{"type":"call","turn":1,"request":{},"record":{"tool":"t","arguments":"{\"n\":\"2\",\"b\":\"true\",\"l\":\"[1]\",\"z\":null,\"s\":\"x\"}",
            "tidied":{"n":2,"b":true,"l":[1],"s":"x"},"notes":["1","2","3","4"],"ok":true,"elapsed_ms":1}}"#;
        let tally = tally(&[r#"{"type":"session","version":1}"#, call]);
        let kinds: Vec<(&str, u64)> = tally.repairs.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            kinds,
            [
                ("arguments_json_string", 1),
                ("boolean_string", 1),
                ("json_text_parameter", 1),
                ("numeric_string", 1),
                ("strict_null_dropped", 1)
            ]
        );
        // A note whose change cannot be seen is counted, unclassified.
        let odd = r#"{"type":"call","turn":1,"request":{},"record":{"tool":"t","arguments":{},"notes":["?"],"ok":true,"elapsed_ms":1}}"#;
        assert_eq!(tally_of_one(odd).repairs.get("unclassified"), Some(&1));
    }

    fn tally_of_one(call: &str) -> Tally {
        tally(&[r#"{"type":"session","version":1}"#, call])
    }

    #[test]
    fn a_version_2_record_is_taken_at_its_word() {
        let call = r#"{"type":"call","turn":1,"request":{},"record":{"tool":"t","arguments":{"n":"x"},"tidied":{"n":"x"},"ok":false,
            "error":{"kind":"wrong_type","parameter":"n"},"elapsed_ms":1}}"#;
        let tally = tally(&[r#"{"type":"session","version":2}"#, call]);
        assert!(tally.repairs.is_empty());
        assert_eq!(tally.wrong_type.names["n"].0, 1);
    }

    #[test]
    fn lines_before_a_session_line_and_a_log_without_an_end_still_make_a_session() {
        let tally = tally(&[r#"{"type":"request","turn":1,"messages":[]}"#, r#"{"type":"reply","turn":1}"#]);
        assert_eq!(
            (tally.sessions, tally.ended.get("unfinished"), tally.versions.get("unknown")),
            (1, Some(&1), Some(&1))
        );
        assert_eq!(tally.turns.max(), 1);
    }

    #[test]
    fn a_reason_from_a_newer_log_is_counted_by_its_name_after_the_known_ones() {
        let refused = |reason: &str| {
            format!(
                r#"{{"type":"call","turn":1,"request":{{}},"record":{{"tool":"fs-read","arguments":"[]","ok":false,
                "error":{{"kind":"bad_arguments","message":"m","reason":"{reason}"}},"elapsed_ms":1}}}}"#
            )
        };
        let (known, newer) = (refused("not_json"), refused("from_a_later_version"));
        let tally = tally(&[r#"{"type":"session","version":3}"#, &known, &newer, &newer]);
        let report = crate::stats::Report::new(&tally).to_json();
        assert_eq!(
            report["refused"]["bad_arguments"],
            serde_json::json!({"count": 3, "reasons": {"duplicate_key": 0, "not_json": 1, "not_an_object": 0,
                "from_a_later_version": 2}})
        );
        let names: Vec<&String> = report["refused"]["bad_arguments"]["reasons"].as_object().unwrap().keys().collect();
        assert_eq!(names.last().map(|n| n.as_str()), Some("from_a_later_version"), "after the known ones");
    }

    #[test]
    fn examples_are_one_line_and_short() {
        assert_eq!(example("cat <<EOF\nx\nEOF"), "cat <<EOF \u{23ce} x \u{23ce} EOF");
        assert!(example(&"cat a ".repeat(100)).ends_with("..."));
    }
}
