//! The guard's rules as data: which tool names and path arguments a rule covers, and what the
//! path rules hide from listings and searches. Below the guard and the tool context, which both
//! hold them, so that neither imports the other for them.

use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher};

use crate::error::{Error, Result};

/// What a rule decides for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Run it.
    Allow,
    /// Refuse it; the model is told so, with the rule's reason.
    Deny,
    /// Ask a person first, showing the preview.
    Confirm,
}

/// A rule: calls of tools whose name matches a glob (`fs-*`, `github.*`), and, when the rule has
/// one, whose path argument matches a second glob (`secrets/**`, relative to the workspace root),
/// get the rule's action.
#[derive(Debug, Clone)]
pub struct Rule {
    pub(crate) tool: String,
    tool_matcher: GlobMatcher,
    pub(crate) path: Option<(String, GlobMatcher)>,
    pub(crate) action: Action,
    pub(crate) reason: Option<String>,
    pub(crate) origin: Option<String>,
}

fn compile(what: &str, glob: &str) -> Result<GlobMatcher> {
    // `*` stays within one path component, as in .gitignore; `**` crosses folders.
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::config(format!("guard rule {what} glob {glob:?}: {e}")))
}

impl Rule {
    /// A rule for tool names matching the glob `tool`.
    ///
    /// # Errors
    /// When the glob does not parse.
    pub fn new(tool: &str, action: Action) -> Result<Self> {
        Ok(Rule {
            tool: tool.to_string(),
            tool_matcher: compile("tool", tool)?,
            path: None,
            action,
            reason: None,
            origin: None,
        })
    }

    /// Narrows the rule to calls whose path argument, resolved inside the workspace and taken
    /// relative to its root, matches the glob `path`. A call without a path argument (a tool that
    /// has no `path` parameter, or left it out) does not match such a rule.
    ///
    /// # Errors
    /// When the glob does not parse.
    pub fn path(mut self, path: &str) -> Result<Self> {
        self.path = Some((path.to_string(), compile("path", path)?));
        Ok(self)
    }

    /// What the model is told when the rule denies a call.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Where the rule was written (`toolhost.toml:12`), for call records and messages.
    pub fn origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// The glob the rule matches tool names with.
    pub fn tool_pattern(&self) -> &str {
        &self.tool
    }

    /// What the rule decides.
    pub fn action(&self) -> Action {
        self.action
    }

    /// Whether the rule's tool glob matches `tool`.
    pub(crate) fn matches_tool(&self, tool: &str) -> bool {
        self.tool_matcher.is_match(tool)
    }

    pub(crate) fn matches(&self, tool: &str, path: Option<&str>) -> bool {
        if !self.tool_matcher.is_match(tool) {
            return false;
        }
        match (&self.path, path) {
            (None, _) => true,
            (Some((glob, matcher)), Some(path)) => covers(glob, matcher, path),
            (Some(_), None) => false,
        }
    }
}

/// Whether a path rule's glob covers `path` (relative to the root, `/`-separated): it matches the
/// path or a folder above it, or it is a folder's contents (`dir/**`) and the path is that folder.
fn covers(glob: &str, matcher: &GlobMatcher, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    if matcher.is_match(path) {
        return true;
    }
    // `dir/**` matches what is below `dir`: `dir/x` stands for any of it.
    if glob.ends_with("/**") && matcher.is_match(format!("{path}/x")) {
        return true;
    }
    let mut above = path;
    while let Some(cut) = above.rfind('/') {
        above = &above[..cut];
        if matcher.is_match(above) {
            return true;
        }
    }
    false
}

/// What the guard's path rules hide from tools that show many paths from one call (`fs-list`,
/// `index-grep`): a path is hidden when the first rule that would decide a call of the tool on it
/// is a path rule that does not allow it (deny, or confirm: nobody can be asked about each entry
/// of a listing), or when a folder above it is hidden. The rules that cover the path the call
/// itself named were judged for the call (it runs, so they allowed it or a person said yes) and
/// hide nothing below it. [`Hidden::default`] hides nothing.
///
/// ```
/// use toolhost::guard::{Action, Guard, Rule};
/// let guard = Guard::default().rule(Rule::new("*", Action::Deny).unwrap().path("secrets/**").unwrap());
/// let hidden = guard.hidden();
/// let grep = hidden.for_tool("index-grep", None).unwrap();
/// assert!(grep.hides("secrets") && grep.hides("secrets/key.pem") && grep.hides("secrets/deep/er"));
/// assert!(!grep.hides("src/secrets.rs") && !grep.hides("secretsfile"));
/// assert!(Guard::default().hidden().for_tool("index-grep", None).is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Hidden {
    pub(crate) rules: Arc<[Rule]>,
}

impl Hidden {
    /// What is hidden from a call of `tool` whose own path argument was `judged` (relative to the
    /// root; `None` for a tool without one); `None` when nothing can be (no path rule that does not
    /// allow applies), so a walk need not check each path.
    pub fn for_tool(&self, tool: &str, judged: Option<&str>) -> Option<HiddenFrom> {
        let judged_by = |r: &Rule| match (&r.path, judged) {
            (Some((glob, matcher)), Some(path)) => covers(glob, matcher, path),
            _ => false,
        };
        let rules: Vec<Rule> =
            self.rules.iter().filter(|r| r.tool_matcher.is_match(tool) && !judged_by(r)).cloned().collect();
        let first_path_rule = rules.iter().position(|r| r.path.is_some())?;
        // A rule without a path before every path rule decides every path: nothing is hidden.
        if rules[..first_path_rule].iter().any(|r| r.path.is_none()) {
            return None;
        }
        rules.iter().any(|r| r.path.is_some() && r.action != Action::Allow).then(|| HiddenFrom { rules })
    }
}

/// What is hidden from one tool (see [`Hidden`]).
#[derive(Debug, Clone)]
pub struct HiddenFrom {
    /// The rules for the tool's name, in order.
    rules: Vec<Rule>,
}

impl HiddenFrom {
    /// Whether the rules hide the entry at `path` itself (relative to the root, `/`-separated),
    /// whatever they say of the folders above it: what a walk that has not gone into a hidden
    /// folder asks of each entry it meets.
    pub fn hides_entry(&self, path: &str) -> bool {
        let rule = self.rules.iter().find(|r| match &r.path {
            None => true,
            Some((glob, matcher)) => covers(glob, matcher, path),
        });
        rule.is_some_and(|r| r.path.is_some() && r.action != Action::Allow)
    }

    /// Whether `path` is hidden: it, or a folder above it, is.
    pub fn hides(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        let mut end = 0;
        while let Some(next) = path[end..].find('/').map(|i| end + i) {
            if self.hides_entry(&path[..next]) {
                return true;
            }
            end = next + 1;
        }
        self.hides_entry(path)
    }
}
