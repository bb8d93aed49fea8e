//! The guard every call passes after its arguments are converted and before its handler runs
//! (design section 10): rules on tool names decide allow, deny or confirm; a confirmation shows the
//! tool's preview to whoever can answer, and without anyone to answer, confirm means deny. The
//! workspace boundary itself is enforced below the guard, in [`crate::Workspace`], for every path.

use std::sync::Arc;

use globset::{Glob, GlobMatcher};
use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::Primitive;
use crate::value;

/// What a rule decides for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Run it.
    Allow,
    /// Refuse it; the model is told so.
    Deny,
    /// Ask a person first, showing the preview.
    Confirm,
}

/// A rule: tools whose name matches `pattern` (a glob: `fs-*`, `github.*`) get `action`.
#[derive(Debug, Clone)]
pub struct Rule {
    pattern: String,
    matcher: GlobMatcher,
    action: Action,
}

impl Rule {
    /// A rule for tool names matching the glob `pattern`.
    ///
    /// # Errors
    /// When the glob does not parse.
    pub fn new(pattern: &str, action: Action) -> Result<Self> {
        let glob = Glob::new(pattern)
            .map_err(|e| Error::new(ErrorKind::InvalidDefinition, format!("guard rule {pattern:?}: {e}")))?;
        Ok(Rule { pattern: pattern.to_string(), matcher: glob.compile_matcher(), action })
    }

    /// The glob the rule matches tool names with.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// What the rule decides.
    pub fn action(&self) -> Action {
        self.action
    }
}

/// Answers a confirmation: the tool and its preview in, yes or no out.
pub type Confirmer = Arc<dyn Fn(&Primitive, &str) -> bool + Send + Sync>;

/// The rules, the default action, and who answers confirmations.
///
/// ```
/// use toolhost::guard::{Action, Guard, Rule};
/// let guard = Guard::default().rule(Rule::new("shell-*", Action::Deny).unwrap());
/// assert_eq!(guard.action_for("shell-exec"), Action::Deny);
/// assert_eq!(guard.action_for("fs-read"), Action::Allow);
/// ```
#[derive(Clone)]
pub struct Guard {
    rules: Vec<Rule>,
    default: Action,
    confirmer: Option<Confirmer>,
}

impl Default for Guard {
    /// Allows every call (the workspace boundary still applies).
    fn default() -> Self {
        Guard { rules: Vec::new(), default: Action::Allow, confirmer: None }
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("rules", &self.rules)
            .field("default", &self.default)
            .field("confirmer", &self.confirmer.is_some())
            .finish()
    }
}

impl Guard {
    /// Adds a rule; the first rule that matches a tool decides.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Sets the action for tools no rule matches.
    pub fn default_action(mut self, action: Action) -> Self {
        self.default = action;
        self
    }

    /// Sets who answers confirmations (the REPL asks the person at the terminal).
    pub fn confirmer(mut self, confirmer: Confirmer) -> Self {
        self.confirmer = Some(confirmer);
        self
    }

    /// The action for a tool name.
    pub fn action_for(&self, tool: &str) -> Action {
        self.rules.iter().find(|r| r.matcher.is_match(tool)).map_or(self.default, |r| r.action)
    }

    /// Judges a call whose arguments are already converted.
    ///
    /// # Errors
    /// [`ErrorKind::Denied`] when a rule denies the call, or it needs confirmation and nobody can
    /// give it, or the person says no.
    pub fn check(&self, ctx: &ToolCtx, tool: &Primitive, args: &[SteelVal]) -> Result<()> {
        let name = tool.name();
        match self.action_for(name) {
            Action::Allow => Ok(()),
            Action::Deny => {
                Err(Error::denied(format!("{name}: calls to this tool are not allowed here")).with_tool(name))
            }
            Action::Confirm => {
                let Some(confirmer) = &self.confirmer else {
                    return Err(Error::denied(format!(
                        "{name}: this call needs a person's confirmation and there is no one to ask"
                    ))
                    .with_tool(name));
                };
                let preview = preview(ctx, tool, args)?;
                if confirmer(tool, &preview) {
                    Ok(())
                } else {
                    Err(Error::denied(format!("{name}: the person declined this call")).with_tool(name))
                }
            }
        }
    }
}

/// What a person is shown for a call: the tool's own preview (a diff, a command), or else the
/// arguments given, leaving out void ones (parameters a skips-as-void tool did not receive).
pub fn preview(ctx: &ToolCtx, tool: &Primitive, args: &[SteelVal]) -> Result<String> {
    if let Some(preview) = &tool.preview {
        return preview(ctx, args).map_err(|e| e.in_tool(tool.name()));
    }
    let mut out = format!("{}(", tool.name());
    let mut first = true;
    for (i, arg) in args.iter().enumerate() {
        if matches!(arg, SteelVal::Void) {
            continue;
        }
        let name = tool.signature.param_at(i).map_or("?", |p| p.name.as_str());
        let shown = value::scheme_to_json(arg).map(|v| v.to_string()).unwrap_or_else(|_| value::describe_scheme(arg));
        out.push_str(&format!("{}{name}: {shown}", if first { "" } else { ", " }));
        first = false;
    }
    out.push(')');
    Ok(out)
}
