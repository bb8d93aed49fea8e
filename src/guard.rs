//! The guard every call passes after its arguments are converted and before its handler runs
//! (design section 10): rules on tool names, and optionally on the tool's path argument, decide
//! allow, deny or confirm; the first rule that matches decides, else the default. A confirmation
//! shows the tool's preview to whoever can answer, and without anyone to answer, confirm means deny.
//! Each judgement is a [`Decision`], recorded in the call record. The workspace boundary itself is
//! enforced below the guard, in [`crate::Workspace`], for every path.
//!
//! A path rule covers a path when its glob matches the path or a folder above it (a rule for a
//! folder covers what is in it), and a glob for a folder's contents (`secrets/**`) covers the folder
//! itself too. Tools that show many paths from one call (`fs-list`, `index-grep` and the Scheme
//! procedures that read through them) leave out what the rules [`Hidden`] would not let a call of
//! that tool reach, and do not go into a folder they hide.

use std::sync::Arc;

use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, Result};
use crate::param::ParamType;
use crate::registry::Primitive;
use crate::value;

pub use crate::guard_rules::{Action, Hidden, HiddenFrom, Rule};

/// Which rule made a decision: its 1-based position, its globs and where it was written.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RuleRef {
    /// 1-based position among the guard's rules.
    pub index: usize,
    /// The rule's tool glob.
    pub tool: String,
    /// The rule's path glob, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Where the rule was written (`toolhost.toml:12`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// What the guard decided for one call, as the call record keeps it. `rule` is absent when the
/// default action decided.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum Decision {
    /// The call may run.
    Allow {
        /// The rule that allowed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<RuleRef>,
    },
    /// The call is refused; `reason` is what the model is told.
    Deny {
        /// The rule that denied it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<RuleRef>,
        /// Why, in the rule's words.
        reason: String,
    },
    /// A person was asked (or nobody could be): `answer` is theirs, `by` says who gave it
    /// (`terminal`, `--yes`, an embedder's name for its confirmer, or `nobody`).
    Confirm {
        /// The rule that asked for confirmation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<RuleRef>,
        /// Yes or no.
        answer: bool,
        /// Who answered.
        by: String,
    },
}

impl Decision {
    /// Whether the call may run.
    pub fn allows(&self) -> bool {
        matches!(self, Decision::Allow { .. } | Decision::Confirm { answer: true, .. })
    }

    /// `Ok` when the call may run, else the `denied` error the model is given.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Denied`], saying why in words the model can act on.
    pub fn verdict(&self, tool: &str) -> Result<()> {
        let message = match self {
            Decision::Allow { .. } | Decision::Confirm { answer: true, .. } => return Ok(()),
            Decision::Deny { reason, .. } => format!("{tool}: denied: {reason}"),
            Decision::Confirm { by, .. } if by == NOBODY => format!(
                "{tool}: denied: this call needs a person's confirmation and there is no one to ask \
                 (no terminal); do something else, or ask the user to allow it"
            ),
            Decision::Confirm { .. } => format!("{tool}: denied: the person declined this call"),
        };
        Err(Error::denied(message).with_tool(tool))
    }
}

/// Who answers when nobody can: the `by` of a confirmation that was denied for want of a person.
pub const NOBODY: &str = "nobody";

/// The default reason of a denial when its rule gives none.
const DEFAULT_DENY_REASON: &str = "calls to this tool are not allowed here";

/// What a confirmer is asked.
#[derive(Debug, Clone, Copy)]
pub struct ConfirmRequest<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// What the call will do: a diff, a command line, the arguments.
    pub preview: &'a str,
    /// The reason the rule gives, when it gives one.
    pub reason: Option<&'a str>,
}

/// A confirmer's answer: yes or no, and who gave it (recorded in the call record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether the call may run.
    pub yes: bool,
    /// Who answered: `terminal`, `--yes`, or a name of the embedder's choosing.
    pub by: String,
}

/// Answers a confirmation.
pub type Confirmer = Arc<dyn Fn(&ConfirmRequest<'_>) -> Answer + Send + Sync>;

/// A confirmer that says yes to everything, as `--yes` does.
pub fn always_yes(by: &str) -> Confirmer {
    let by = by.to_string();
    Arc::new(move |_| Answer { yes: true, by: by.clone() })
}

/// The rules, the default action, and who answers confirmations.
///
/// ```
/// use toolhost::guard::{Action, Guard, Rule};
/// let guard = Guard::default()
///     .rule(Rule::new("fs-*", Action::Deny).unwrap().path("secrets/**").unwrap().reason("secrets stay private"))
///     .rule(Rule::new("shell-*", Action::Deny).unwrap());
/// assert_eq!(guard.action_for("shell-exec", None), Action::Deny);
/// assert_eq!(guard.action_for("fs-read", Some("secrets/key.pem")), Action::Deny);
/// assert_eq!(guard.action_for("fs-read", Some("src/main.rs")), Action::Allow);
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
    /// Adds a rule after the existing ones; the first rule that matches a call decides.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Sets the action for calls no rule matches.
    pub fn default_action(mut self, action: Action) -> Self {
        self.default = action;
        self
    }

    /// Sets who answers confirmations (the command line asks the person at the terminal).
    pub fn confirmer(mut self, confirmer: Confirmer) -> Self {
        self.confirmer = Some(confirmer);
        self
    }

    /// Whether a call of `tool` could need a confirmation: the default is confirm, or a confirm
    /// rule's tool glob matches it (whatever its path argument).
    pub fn may_ask(&self, tool: &str) -> bool {
        self.default == Action::Confirm
            || self.rules.iter().any(|r| r.action == Action::Confirm && r.matches_tool(tool))
    }

    /// Whether someone answers confirmations.
    pub fn has_confirmer(&self) -> bool {
        self.confirmer.is_some()
    }

    /// What listings and searches leave out under these rules.
    pub fn hidden(&self) -> Hidden {
        Hidden { rules: self.rules.iter().cloned().collect() }
    }

    /// The action for a call of `tool` whose path argument (relative to the root) is `path`.
    pub fn action_for(&self, tool: &str, path: Option<&str>) -> Action {
        self.rules.iter().find(|r| r.matches(tool, path)).map_or(self.default, |r| r.action)
    }

    /// Judges a call whose arguments are already converted.
    ///
    /// # Errors
    /// When a confirmation is needed and the tool's preview fails (the call would fail the same
    /// way, so the preview's error is the call's).
    pub fn judge(&self, ctx: &ToolCtx, tool: &Primitive, args: &[SteelVal]) -> Result<Decision> {
        let name = tool.name();
        let path = path_argument(ctx, tool, args);
        let found = self.rules.iter().enumerate().find(|(_, r)| r.matches(name, path.as_deref()));
        let (action, rule) = match found {
            Some((i, r)) => (r.action, Some((r, reference(r, i)))),
            None => (self.default, None),
        };
        let reason = rule.as_ref().and_then(|(r, _)| r.reason.clone());
        let rule = rule.map(|(_, reference)| reference);
        Ok(match action {
            Action::Allow => Decision::Allow { rule },
            Action::Deny => Decision::Deny { rule, reason: reason.unwrap_or_else(|| DEFAULT_DENY_REASON.into()) },
            Action::Confirm => match &self.confirmer {
                None => Decision::Confirm { rule, answer: false, by: NOBODY.into() },
                Some(confirmer) => {
                    let preview = preview(ctx, tool, args)?;
                    let answer =
                        confirmer(&ConfirmRequest { tool: name, preview: &preview, reason: reason.as_deref() });
                    Decision::Confirm { rule, answer: answer.yes, by: answer.by }
                }
            },
        })
    }

    /// Judges a call and turns a refusal into the `denied` error the model is given.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Denied`] when the call may not run; a preview's error (see
    /// [`Guard::judge`]).
    pub fn check(&self, ctx: &ToolCtx, tool: &Primitive, args: &[SteelVal]) -> Result<()> {
        self.judge(ctx, tool, args)?.verdict(tool.name())
    }
}

/// How a decision names the rule at `index` (0-based) that made it.
fn reference(rule: &Rule, index: usize) -> RuleRef {
    RuleRef {
        index: index + 1,
        tool: rule.tool.clone(),
        path: rule.path.as_ref().map(|(glob, _)| glob.clone()),
        origin: rule.origin.clone(),
    }
}

/// The call's path argument as path rules see it: the value of the tool's string parameter named
/// `path`, resolved inside the workspace and shown relative to the root (`src/main.rs`). `None`
/// when the tool has no such parameter, the call left it out, or it does not resolve (the tool
/// itself then refuses the path).
fn path_argument(ctx: &ToolCtx, tool: &Primitive, args: &[SteelVal]) -> Option<String> {
    let sig = tool.signature();
    let index = sig.params.iter().position(|p| p.name == "path" && p.ty == ParamType::String)?;
    let SteelVal::StringV(given) = args.get(index)? else { return None };
    if given.is_empty() {
        return None;
    }
    let real = ctx.workspace.resolve(given.as_str()).ok()?;
    Some(ctx.workspace.display(&real))
}

/// What a person is shown for a call: the tool's own preview (a diff, a command), or else the
/// arguments given, leaving out void ones (parameters a skips-as-void tool did not receive).
///
/// # Errors
/// The tool's preview failed (it shows the error the call would give).
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
        let name = tool.signature().param_at(i).map_or("?", |p| p.name.as_str());
        let shown = value::scheme_to_json(arg).map(|v| v.to_string()).unwrap_or_else(|_| value::describe_scheme(arg));
        out.push_str(&format!("{}{name}: {shown}", if first { "" } else { ", " }));
        first = false;
    }
    out.push(')');
    Ok(out)
}
