//! `toolhost check [DIR|FILE...]`: loads tool files in a fresh host and tells their author, before
//! a model does, what is wrong with them: per tool its signature and where it is defined; errors
//! (a file that fails to load, with file:line; a name providers cannot take or that collides
//! once mapped, which registration refuses, so it is a load error too); warnings (an empty tool
//! or parameter description, a tool strict mode would send as `strict:false`, with the reason).
//! With no paths in an untrusted workspace, the workspace's own folders are not loaded: the report
//! names them as not checked and the exit code is 2, so a CI job cannot pass having checked nothing.
//! It reads specs and load errors only; building the host is the command line's.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::error::Error;
use crate::host::Host;
use crate::schema::arguments_schema;
use crate::spec::ToolSpec;
use crate::strict::strict_schema;

/// `toolhost check` itself: its arguments and what it prints.
#[cfg(feature = "cli")]
mod command;
#[cfg(feature = "cli")]
pub(crate) use command::{command, CheckArgs};

/// One checked tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCheck {
    /// The tool's name.
    pub name: String,
    /// Its call form, `(word-count path [min-length])`.
    pub signature: String,
    /// The file that defines it.
    pub file: String,
    /// The line of the form that defines it, when it can be told.
    pub line: Option<usize>,
    /// What a model would be short of, or what strict mode refuses.
    pub warnings: Vec<String>,
}

/// What `check` found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckReport {
    /// The tools the checked files define, by file and line.
    pub tools: Vec<ToolCheck>,
    /// Files that failed to load, each naming its file and line.
    pub errors: Vec<Error>,
    /// Tool folders it would have checked but did not: the workspace's own, when it is not trusted.
    pub skipped: Vec<PathBuf>,
    /// Why they were skipped, in a few words.
    pub skipped_because: Option<String>,
}

impl CheckReport {
    /// The report on the tools files loaded into `host` (not its Rust tools nor shipped ones) and
    /// on the files that failed.
    pub fn of(host: &Host) -> CheckReport {
        let mut tools: Vec<ToolCheck> = host
            .specs()
            .iter()
            .filter_map(|spec| {
                let origin = host.origin(spec.name()).filter(|o| !o.is_ours())?;
                Some(ToolCheck {
                    name: spec.name().to_string(),
                    signature: spec.signature.render(),
                    file: origin.file.clone(),
                    line: origin.line,
                    warnings: warnings(spec),
                })
            })
            .collect();
        tools.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        CheckReport { tools, errors: host.load_errors().to_vec(), skipped: Vec::new(), skipped_because: None }
    }

    /// Whether nothing is wrong: no errors, and nothing it should have checked was skipped.
    pub fn ok(&self) -> bool {
        self.errors.is_empty() && self.skipped.is_empty()
    }

    /// How many warnings there are in all.
    pub fn warning_count(&self) -> usize {
        self.tools.iter().map(|t| t.warnings.len()).sum()
    }

    /// The report for people: one line per tool (`file:line: signature`), its warnings beneath,
    /// one line per error, and a count.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for tool in &self.tools {
            let place = match tool.line {
                Some(line) => format!("{}:{line}", tool.file),
                None => tool.file.clone(),
            };
            out.push_str(&format!("{place}: {}\n", tool.signature));
            for warning in &tool.warnings {
                out.push_str(&format!("  warning: {warning}\n"));
            }
        }
        for error in &self.errors {
            out.push_str(&format!("error: {error}\n"));
        }
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        out.push_str(&format!(
            "{}, {}, {}\n",
            plural(self.tools.len(), "tool"),
            plural(self.errors.len(), "error"),
            plural(self.warning_count(), "warning")
        ));
        if !self.skipped.is_empty() {
            let folders: Vec<String> = self.skipped.iter().map(|f| f.display().to_string()).collect();
            out.push_str(&format!(
                "not checked: {} ({}; trust the workspace, or name the folder to check it as it is)\n",
                folders.join(", "),
                self.skipped_because.as_deref().unwrap_or("the workspace is not trusted")
            ));
        }
        out
    }

    /// The report as one JSON object: `{"ok", "tools": [{"name", "signature", "file", "line",
    /// "warnings"}], "errors": [{"file", "line", "message"}], "skipped": [folder, ...]}`.
    pub fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "signature": t.signature, "file": t.file, "line": t.line, "warnings": t.warnings})
            })
            .collect();
        let errors: Vec<Value> =
            self.errors.iter().map(|e| json!({"file": e.file(), "line": e.line(), "message": e.message()})).collect();
        let skipped: Vec<String> = self.skipped.iter().map(|f| f.display().to_string()).collect();
        json!({"ok": self.ok(), "tools": tools, "errors": errors, "skipped": skipped})
    }
}

/// What a tool's spec is short of: descriptions a model needs, and a schema strict mode takes.
pub fn warnings(spec: &ToolSpec) -> Vec<String> {
    let mut out = Vec::new();
    if spec.description.trim().is_empty() {
        out.push("the tool has no description: a model sees only its name".to_string());
    }
    let sig = &spec.signature;
    for param in sig.params.iter().chain(sig.rest.as_ref()) {
        if param.description.trim().is_empty() {
            out.push(format!("parameter {} has no description", param.name));
        }
    }
    if let Err(refusal) = strict_schema(&arguments_schema(spec)) {
        out.push(format!("strict mode sends it as strict:false: {refusal}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::{Param, ParamType, Signature};

    #[test]
    fn empty_descriptions_and_strict_refusals_are_warned_about() {
        let sig = Signature::new(
            "t",
            vec![Param::required("path", ParamType::String, ""), Param::optional("opts", ParamType::Object, "Options")],
        );
        let found = warnings(&ToolSpec::new(sig, " "));
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("no description"));
        assert!(found[1].contains("parameter path"));
        assert!(found[2].contains("strict:false") && found[2].contains("/properties/opts"), "{found:?}");
        let sig = Signature::new("t", vec![Param::required("path", ParamType::String, "File")]);
        assert!(warnings(&ToolSpec::new(sig, "Reads.")).is_empty());
    }
}
