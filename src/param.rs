//! The parameter model every tool shares: parameter types, parameters, and a tool's [`Signature`]
//! (ordered parameters, optional variadic tail, how skipped optionals arrive), with the rules
//! `register` enforces and the renderings used in error messages. It knows nothing of values or
//! engines.

use crate::error::{Error, ErrorKind, Result};

/// The type of a parameter, as declared by a tool and shown to models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// A string.
    String,
    /// A whole number (JSON `5.0` is accepted as 5; `5.5` is a wrong type).
    Integer,
    /// Any number, integer or float.
    Number,
    /// `true`/`false`, `#t`/`#f`.
    Boolean,
    /// A JSON array, a Scheme list.
    List,
    /// A JSON object, a Scheme hash map with string keys.
    Object,
    /// Anything, converted by its natural mapping.
    Any,
}

impl ParamType {
    /// Every type, in the order the design lists them.
    pub const ALL: [ParamType; 7] = [
        ParamType::String,
        ParamType::Integer,
        ParamType::Number,
        ParamType::Boolean,
        ParamType::List,
        ParamType::Object,
        ParamType::Any,
    ];

    /// The type's name as written in `register-tool` parameter lists.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::List => "list",
            ParamType::Object => "object",
            ParamType::Any => "any",
        }
    }

    /// The type with this name, if there is one.
    ///
    /// ```
    /// use toolhost::ParamType;
    /// assert_eq!(ParamType::from_name("integer"), Some(ParamType::Integer));
    /// assert_eq!(ParamType::from_name("int"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ParamType> {
        ParamType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The JSON Schema `type` of the parameter; `None` for `any`, which admits every value.
    pub fn json_schema_type(self) -> Option<&'static str> {
        match self {
            ParamType::String => Some("string"),
            ParamType::Integer => Some("integer"),
            ParamType::Number => Some("number"),
            ParamType::Boolean => Some("boolean"),
            ParamType::List => Some("array"),
            ParamType::Object => Some("object"),
            ParamType::Any => None,
        }
    }

    /// "a string", "an integer", ...: the noun phrase used in wrong-type messages.
    pub fn article_name(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Integer => "an integer",
            ParamType::Number => "a number",
            ParamType::Boolean => "a boolean",
            ParamType::List => "a list",
            ParamType::Object => "an object",
            ParamType::Any => "any value",
        }
    }
}

/// One parameter of a tool.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Param {
    /// The name models send it under (`replace-all`, `timeout-s`).
    pub name: String,
    /// Its type.
    pub ty: ParamType,
    /// What it means; for an optional parameter, also what the tool does when it is left out.
    pub description: String,
    /// Whether a call may leave it out.
    pub optional: bool,
}

impl Param {
    /// A required parameter.
    pub fn required(name: impl Into<String>, ty: ParamType, description: impl Into<String>) -> Self {
        Param { name: name.into(), ty, description: description.into(), optional: false }
    }

    /// An optional parameter.
    pub fn optional(name: impl Into<String>, ty: ParamType, description: impl Into<String>) -> Self {
        Param { name: name.into(), ty, description: description.into(), optional: true }
    }
}

/// How a skipped optional parameter (one left out before a later one that is given) reaches the
/// handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Skipped {
    /// As its type's empty value (`""`, `0`, `#f`, `'()`, an empty hash map, void for `any`): the
    /// handler treats the empty value as "not given". Host primitives work this way.
    #[default]
    TypedEmpty,
    /// As void, so `#f`, `0` and `""` reach the handler exactly as given. MCP tools work this way.
    Void,
}

/// The calling convention of a tool: its name, ordered parameters (required ones first), an
/// optional variadic tail, and how skipped optionals arrive.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Signature {
    /// The tool's name.
    pub name: String,
    /// Declared parameters, in order.
    pub params: Vec<Param>,
    /// A variadic last parameter taking any number of further arguments of its type.
    pub rest: Option<Param>,
    /// How skipped optional parameters arrive.
    pub skipped: Skipped,
}

/// The longest tool name a provider takes once mapped (see [`provider_name`]).
pub const MAX_PROVIDER_NAME_LEN: usize = 64;

/// The name a tool is sent to providers under: `.` (which providers refuse) becomes `__`; every
/// other character must already be one of `[a-zA-Z0-9_-]`. `None` when the name cannot be sent.
///
/// ```
/// use toolhost::param::provider_name;
/// assert_eq!(provider_name("files.read_file").as_deref(), Some("files__read_file"));
/// assert_eq!(provider_name("fs-read").as_deref(), Some("fs-read"));
/// assert_eq!(provider_name("no spaces"), None);
/// ```
pub fn provider_name(name: &str) -> Option<String> {
    let mapped = name.replace('.', "__");
    let sendable = !mapped.is_empty()
        && mapped.len() <= MAX_PROVIDER_NAME_LEN
        && mapped.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    sendable.then_some(mapped)
}

impl Signature {
    /// A signature with typed-empty skipping and no variadic tail.
    pub fn new(name: impl Into<String>, params: Vec<Param>) -> Self {
        Signature { name: name.into(), params, rest: None, skipped: Skipped::TypedEmpty }
    }

    /// How many arguments every call must pass.
    pub fn required_count(&self) -> usize {
        self.params.iter().take_while(|p| !p.optional).count()
    }

    /// The most arguments a call may pass; `None` for a variadic tool.
    pub fn max_count(&self) -> Option<usize> {
        match self.rest {
            Some(_) => None,
            None => Some(self.params.len()),
        }
    }

    /// Whether a call with `count` arguments has an acceptable arity.
    pub fn accepts_count(&self, count: usize) -> bool {
        count >= self.required_count() && self.max_count().is_none_or(|max| count <= max)
    }

    /// The parameter at argument position `index` (0-based), the variadic one past the end.
    pub fn param_at(&self, index: usize) -> Option<&Param> {
        self.params.get(index).or(self.rest.as_ref())
    }

    /// The index of the declared parameter called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Every parameter name, the variadic one last: `path, start, count`.
    pub fn param_names(&self) -> String {
        let names: Vec<&str> = self.params.iter().chain(self.rest.as_ref()).map(|p| p.name.as_str()).collect();
        names.join(", ")
    }

    /// The call form: `(fs-read path [start] [count])`, `(concat first rest ...)`.
    ///
    /// ```
    /// use toolhost::{Param, ParamType, Signature};
    /// let sig = Signature::new("fs-read", vec![
    ///     Param::required("path", ParamType::String, "File"),
    ///     Param::optional("start", ParamType::Integer, "First line"),
    /// ]);
    /// assert_eq!(sig.render(), "(fs-read path [start])");
    /// ```
    pub fn render(&self) -> String {
        let mut out = format!("({}", self.name);
        for p in &self.params {
            if p.optional {
                out.push_str(&format!(" [{}]", p.name));
            } else {
                out.push_str(&format!(" {}", p.name));
            }
        }
        if let Some(rest) = &self.rest {
            out.push_str(&format!(" {} ...", rest.name));
        }
        out.push(')');
        out
    }

    /// "1 to 3 arguments", "exactly 2 arguments", "at least 1 argument".
    pub fn arity_text(&self) -> String {
        let min = self.required_count();
        let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
        match self.max_count() {
            None => format!("at least {min} {}", plural(min)),
            Some(max) if max == min => format!("exactly {min} {}", plural(min)),
            Some(max) => format!("{min} to {max} {}", plural(max)),
        }
    }

    /// Checks the rules every registered tool obeys (design section 1). The error names the tool
    /// and the offending parameter.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidDefinition`] for an empty or unsendable tool name, an empty, blank or
    /// duplicate parameter name, a required parameter after an optional one, or an optional
    /// parameter on a variadic tool.
    pub fn validate(&self) -> Result<()> {
        let invalid = |message: String| Err(Error::new(ErrorKind::InvalidDefinition, message));
        if self.name.is_empty() {
            return invalid("a tool name must not be empty".into());
        }
        if provider_name(&self.name).is_none() {
            let message = format!(
                "tool \"{}\": the name cannot be sent to model providers; use letters, digits, \
                 '_', '-' and '.', at most {MAX_PROVIDER_NAME_LEN} characters once '.' is written '__'",
                self.name
            );
            return Err(Error::new(ErrorKind::InvalidDefinition, message).with_tool(&self.name));
        }
        if let Some(rest) = &self.rest {
            if let Some(opt) = self.params.iter().find(|p| p.optional) {
                return Err(Error::new(
                    ErrorKind::InvalidDefinition,
                    format!(
                        "tool \"{}\": optional parameter \"{}\" on a variadic tool (its rest \
                         parameter is \"{}\"); a variadic tool takes no optional parameters",
                        self.name, opt.name, rest.name
                    ),
                )
                .with_tool(&self.name)
                .with_parameter(&opt.name));
            }
        }
        let mut seen_optional: Option<&str> = None;
        let all = self.params.iter().chain(self.rest.as_ref());
        for (i, p) in all.enumerate() {
            let param_error = |what: String| {
                Err(Error::new(ErrorKind::InvalidDefinition, format!("tool \"{}\": {what}", self.name))
                    .with_tool(&self.name)
                    .with_parameter(&p.name))
            };
            if p.name.trim().is_empty() || p.name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return param_error(format!("parameter {} has an empty or blank name \"{}\"", i + 1, p.name));
            }
            let earlier = self.params.iter().chain(self.rest.as_ref()).take(i);
            if earlier.clone().any(|q| q.name == p.name) {
                return param_error(format!("parameter \"{}\" is declared twice", p.name));
            }
            if p.optional {
                seen_optional = Some(&p.name);
            } else if let Some(opt) = seen_optional {
                return param_error(format!(
                    "required parameter \"{}\" comes after optional parameter \"{opt}\"; optional \
                     parameters must come last",
                    p.name
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, optional: bool) -> Param {
        Param { name: name.into(), ty: ParamType::String, description: String::new(), optional }
    }

    #[test]
    fn arity_text_covers_ranges_exact_and_variadic() {
        let sig = Signature::new("t", vec![p("a", false), p("b", true), p("c", true)]);
        assert_eq!(sig.arity_text(), "1 to 3 arguments");
        assert!(sig.accepts_count(1) && sig.accepts_count(3));
        assert!(!sig.accepts_count(0) && !sig.accepts_count(4));
        let exact = Signature::new("t", vec![p("a", false)]);
        assert_eq!(exact.arity_text(), "exactly 1 argument");
        let mut var = Signature::new("t", vec![p("a", false)]);
        var.rest = Some(p("more", false));
        assert_eq!(var.arity_text(), "at least 1 argument");
        assert!(var.accepts_count(9));
        assert_eq!(var.render(), "(t a more ...)");
    }

    #[test]
    fn validate_refuses_required_after_optional_naming_both() {
        let sig = Signature::new("t", vec![p("a", true), p("b", false)]);
        let err = sig.validate().unwrap_err();
        assert_eq!(err.parameter(), Some("b"));
        assert!(err.message().contains("\"b\" comes after optional parameter \"a\""), "{err}");
    }

    #[test]
    fn validate_refuses_optional_on_variadic() {
        let mut sig = Signature::new("t", vec![p("a", false), p("b", true)]);
        sig.rest = Some(p("more", false));
        let err = sig.validate().unwrap_err();
        assert_eq!(err.parameter(), Some("b"));
        assert!(err.message().contains("variadic"), "{err}");
    }

    #[test]
    fn validate_refuses_duplicates_empty_and_unsendable_names() {
        let dup = Signature::new("t", vec![p("a", false), p("a", true)]);
        assert!(dup.validate().unwrap_err().message().contains("declared twice"));
        let blank = Signature::new("t", vec![p(" ", false)]);
        assert!(blank.validate().is_err());
        assert!(Signature::new("", vec![]).validate().is_err());
        assert!(Signature::new("has space", vec![]).validate().is_err());
        assert!(Signature::new("x".repeat(65), vec![]).validate().is_err());
        assert!(Signature::new("server.tool", vec![]).validate().is_ok());
    }
}
