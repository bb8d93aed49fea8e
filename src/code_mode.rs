//! Code mode (design section 20): the program tool, `scheme`, whose one argument is a Scheme
//! program the host runs over its tools; the catalogue that shows a model those tools as Scheme
//! procedures, generated from the same specs as the JSON schemas; and which tools a model is
//! offered ([`ToolsAs`]): the tools themselves, the program tool alone, or both.
//!
//! A program runs in the host's sandboxed engine, where every tool is a procedure that passes the
//! guard as a model's call would; each call it makes is kept in the program's call record
//! ([`crate::CallRecord::nested`]). Its top-level definitions are the program's own: they do not
//! outlast it, so two programs (or two MCP clients) never see each other's state, and a worker
//! restart loses nothing a model was told it has.

use std::str::FromStr;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, ErrorKind};
use crate::param::{Param, ParamType, Signature};
use crate::registry::{Handler, Primitive};
use crate::spec::{SpecSet, ToolSpec};

/// The program tool's name.
pub const PROGRAM_TOOL: &str = "scheme";

/// Its one parameter.
pub const PROGRAM_PARAM: &str = "code";

/// The description a host registers the tool with; models offered it are given the whole
/// catalogue instead ([`offered`]).
const SHORT_DESCRIPTION: &str = "Run a Scheme program in which every tool is a procedure; the result is what it \
     displayed, then the value of its last expression.";

/// The program tool as a host registers it.
pub fn program_tool() -> Primitive {
    let code = Param {
        name: PROGRAM_PARAM.to_string(),
        ty: ParamType::String,
        description: "The program: Scheme expressions, run in order".to_string(),
        optional: false,
    };
    let mut tool = Primitive::new(Signature::new(PROGRAM_TOOL, vec![code]), SHORT_DESCRIPTION, Handler::Program);
    // A program may call any tool, those that write and run commands included.
    let mut spec = ToolSpec::clone(&tool.spec);
    spec.annotations.destructive = true;
    tool.spec = Arc::new(spec);
    tool
}

/// The error for a program tool reached from Scheme code, which cannot start a second program
/// inside the one that runs.
pub(crate) fn not_from_scheme() -> Error {
    Error::new(
        ErrorKind::ToolFailed,
        format!("{PROGRAM_TOOL}: Scheme code cannot call the program tool (one program runs at a time); write the code in place"),
    )
    .with_tool(PROGRAM_TOOL)
}

/// Which tools a model is offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolsAs {
    /// Each tool as a JSON tool of its own (the program tool left out).
    #[default]
    Json,
    /// The program tool alone, its description the catalogue of every tool as a procedure.
    Code,
    /// The tools and, beside them, the program tool with the catalogue.
    Both,
}

impl ToolsAs {
    /// The setting's names, as the config and the command line take them.
    pub const NAMES: [&'static str; 3] = ["json", "code", "both"];

    /// The setting's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolsAs::Json => "json",
            ToolsAs::Code => "code",
            ToolsAs::Both => "both",
        }
    }
}

impl FromStr for ToolsAs {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "json" => Ok(ToolsAs::Json),
            "code" => Ok(ToolsAs::Code),
            "both" => Ok(ToolsAs::Both),
            other => Err(format!("\"{other}\" is not a way to offer tools; use json, code or both")),
        }
    }
}

/// The tools a model is offered under `tools_as`, from a host's specs: with the program tool, its
/// description is the catalogue of the others. A host without the program tool offers its tools
/// whatever the setting.
pub fn offered(specs: &SpecSet, tools_as: ToolsAs) -> SpecSet {
    let Some(program) = specs.get(PROGRAM_TOOL) else { return specs.clone() };
    let with_catalogue = || {
        let mut spec = ToolSpec::clone(program);
        spec.description = catalogue(specs);
        Arc::new(spec)
    };
    let mut out = SpecSet::new();
    for spec in specs.iter() {
        let keep = match (tools_as, spec.name() == PROGRAM_TOOL) {
            (ToolsAs::Json, program) => (!program).then(|| Arc::clone(spec)),
            (ToolsAs::Code, false) => None,
            (ToolsAs::Code | ToolsAs::Both, true) => Some(with_catalogue()),
            (ToolsAs::Both, false) => Some(Arc::clone(spec)),
        };
        // The specs came from a set that took each of them already.
        if let Some(spec) = keep {
            let _ = out.insert(spec);
        }
    }
    out
}

/// How a program is run and what it gets back: the head of the catalogue.
const GUIDE: &str = "\
Runs `code`, Scheme (steel) in which each procedure below makes a checked tool call. You get what \
it displayed, then its last value. A failed call raises an error; (with-handler (lambda (e) \
(error-object-message e)) expr) catches it. Paths are workspace-relative; [args] are optional; \
definitions end with the program. Also: map filter foldl take ends-with? split-many string-join \
hash hash-ref hash-try-get hash-insert hash->list (sort list less?).
(file-lines path [start] [count]) -> list of lines
(dir-entries [path] [depth]) -> list of paths
(grep-matches pattern [glob]) -> hash \"matches\" (hashes \"path\" \"line\" \"text\"), \"total\"
(shell-run cmd [timeout-s]) -> hash \"exit-code\" \"stdout\" \"stderr\"
Tools (text unless ->):
";

/// Worked examples, at the end of the catalogue. Each runs as written (a test runs them).
pub const EXAMPLES: &str = "\
Examples:
; TODO lines per file
(define (bump h k) (hash-insert h k (+ 1 (or (hash-try-get h k) 0))))
(define n (foldl (lambda (m h) (bump h (hash-ref m \"path\"))) (hash) (hash-ref (grep-matches \"TODO\") \"matches\")))
(sort (hash->list n) (lambda (a b) (> (cdr a) (cdr b))))
; lines per .md file
(map (lambda (p) (list p (length (file-lines p)))) (filter (lambda (p) (ends-with? p \".md\")) (dir-entries)))
";

/// The catalogue a model offered the program tool reads: how programs run, the data procedures,
/// each tool's signature with the gist of its description and of its optional parameters' short
/// docs (their first clause: the rest tells how a tool's text reads or what it does when a
/// parameter is left out, which the signature and the value a program gets say), and worked
/// examples. MCP tools are included like any other.
pub fn catalogue(specs: &SpecSet) -> String {
    let mut out = String::from(GUIDE);
    for spec in specs.iter().filter(|s| s.name() != PROGRAM_TOOL) {
        out.push_str(&spec.signature.render());
        if let Some(shape) = spec.output_schema.as_ref().and_then(shape_name) {
            out.push_str(" -> ");
            out.push_str(&shape);
        }
        let description = gist(&spec.description);
        if !description.is_empty() {
            out.push_str(" ; ");
            out.push_str(description);
        }
        let optional = spec.signature.params.iter().filter(|p| p.optional).chain(&spec.signature.rest);
        let docs: Vec<String> = optional
            .filter_map(|p| {
                let doc = first_clause(&p.description);
                (!doc.is_empty() && doc.len() <= SHORT_DOC).then(|| format!("{}: {doc}", p.name))
            })
            .collect();
        if !docs.is_empty() {
            out.push_str(&format!(" ({})", docs.join("; ")));
        }
        out.push('\n');
    }
    out.push_str(EXAMPLES);
    out
}

/// A declared output shape in a word or two: `object`, `list`, `object {count, path}`.
fn shape_name(schema: &Value) -> Option<String> {
    let kind = schema.get("type")?.as_str()?;
    let kind = if kind == "array" { "list" } else { kind };
    let keys: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    Some(if keys.is_empty() { kind.to_string() } else { format!("{kind} {{{}}}", keys.join(", ")) })
}

/// A description's gist: its first sentence, up to the first clause break (`; `, ` (`, `: `, `, `
/// or ` as `) past its first few words.
fn gist(text: &str) -> &str {
    let text = text.trim();
    let sentence = text.match_indices(". ").map(|(i, _)| i).next().unwrap_or(text.len());
    let sentence = text[..sentence].trim_end_matches('.');
    let cut = ["; ", " (", ": ", ", ", " as "]
        .iter()
        .filter_map(|mark| sentence.match_indices(mark).map(|(i, _)| i).find(|&i| i >= GIST_WORDS))
        .min()
        .unwrap_or(sentence.len());
    &sentence[..cut]
}

/// The longest parameter doc the catalogue shows: a longer one mostly says how the tool's text
/// reads or restates the name, and the catalogue's size is what code mode saves a model.
const SHORT_DOC: usize = 24;

/// How far into a description a clause break may end its gist.
const GIST_WORDS: usize = 24;

/// A parameter doc's first clause: up to its first `;` or `,`, without the workspace-root reminder
/// the guide gives once.
fn first_clause(text: &str) -> &str {
    let clause = text.split(';').next().unwrap_or("").trim();
    let clause = clause.strip_suffix(", relative to the workspace root").unwrap_or(clause);
    let clause = clause.split(", ").next().unwrap_or(clause);
    clause.split(" (").next().unwrap_or(clause)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_s_gist_is_its_first_clause_past_a_few_words() {
        assert_eq!(gist("Read a file. Then more."), "Read a file");
        assert_eq!(gist("Uses v1.2 of it"), "Uses v1.2 of it");
        assert_eq!(
            gist("Find TODO, FIXME, XXX and HACK comments in the workspace, as path:line:text lines."),
            "Find TODO, FIXME, XXX and HACK comments in the workspace"
        );
        assert_eq!(
            gist("Search the files for a regular expression (Rust regex syntax), leaving out"),
            "Search the files for a regular expression"
        );
        assert_eq!(first_clause("File to read, relative to the workspace root"), "File to read");
        assert_eq!(first_clause("First line; 1 when left out"), "First line");
    }

    #[test]
    fn tools_as_reads_its_three_names_and_refuses_others() {
        for name in ToolsAs::NAMES {
            assert_eq!(name.parse::<ToolsAs>().map(ToolsAs::as_str), Ok(name));
        }
        assert!("yaml".parse::<ToolsAs>().unwrap_err().contains("json, code or both"));
    }
}
