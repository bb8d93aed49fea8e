//! The typed way to register a Rust tool: a plain Rust function whose trailing `Option<T>`
//! parameters are the optional ones, plus a [`Tool`] builder carrying the name, description and
//! parameter docs. Types and optionality come from the function's own signature, so docs and code
//! cannot disagree on them. (The untyped path for run-time signatures is [`crate::Primitive::new`].)

use std::sync::Arc;

use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::param::{Param, ParamType, Signature, Skipped};
use crate::registry::{Handler, Preview, Primitive};
use crate::spec::{Annotations, ToolSpec};
use crate::value;

/// A Rust type a tool parameter can be declared as. `Option<T>` makes the parameter optional.
pub trait FromArg: Sized {
    /// The parameter type models are shown.
    const TYPE: ParamType;
    /// Whether a call may leave the parameter out.
    const OPTIONAL: bool;
    /// Reads the argument; `None` when the call did not pass it.
    fn from_arg(arg: Option<&SteelVal>) -> std::result::Result<Self, String>;
}

/// A Rust type a tool can return.
pub trait IntoToolResult {
    /// Converts the result to the Scheme value callers see.
    fn into_tool_result(self) -> Result<SteelVal>;
}

macro_rules! from_arg {
    ($ty:ty, $param:expr, $($pat:pat => $out:expr),+) => {
        impl FromArg for $ty {
            const TYPE: ParamType = $param;
            const OPTIONAL: bool = false;
            fn from_arg(arg: Option<&SteelVal>) -> std::result::Result<Self, String> {
                match arg {
                    $(
                    #[allow(unreachable_patterns)]
                    Some($pat) => Ok($out),
                    )+
                    #[allow(unreachable_patterns)]
                    Some(other) => {
                        Err(format!("expected {}, got {}", $param.article_name(), value::describe_scheme(other)))
                    }
                    None => Err("a required argument was not passed".into()),
                }
            }
        }
        impl FromArg for Option<$ty> {
            const TYPE: ParamType = $param;
            const OPTIONAL: bool = true;
            fn from_arg(arg: Option<&SteelVal>) -> std::result::Result<Self, String> {
                arg.map(|a| <$ty as FromArg>::from_arg(Some(a))).transpose()
            }
        }
    };
}

from_arg!(String, ParamType::String, SteelVal::StringV(s) => s.as_str().to_string());
from_arg!(i64, ParamType::Integer, SteelVal::IntV(i) => *i as i64);
from_arg!(bool, ParamType::Boolean, SteelVal::BoolV(b) => *b);
from_arg!(f64, ParamType::Number, SteelVal::IntV(i) => *i as f64, SteelVal::NumV(f) => *f);
from_arg!(serde_json::Value, ParamType::Any, v => value::scheme_to_json(v).map_err(|e| e.0)?);

impl IntoToolResult for SteelVal {
    fn into_tool_result(self) -> Result<SteelVal> {
        Ok(self)
    }
}
impl IntoToolResult for String {
    fn into_tool_result(self) -> Result<SteelVal> {
        Ok(SteelVal::StringV(self.into()))
    }
}
impl IntoToolResult for i64 {
    fn into_tool_result(self) -> Result<SteelVal> {
        isize::try_from(self)
            .map(SteelVal::IntV)
            .map_err(|_| Error::tool_failed(format!("the result {self} does not fit an integer")))
    }
}
/// A number result; NaN and the infinities are an error, since no JSON number can carry them.
impl IntoToolResult for f64 {
    fn into_tool_result(self) -> Result<SteelVal> {
        if self.is_finite() {
            Ok(SteelVal::NumV(self))
        } else {
            let what = if self.is_nan() { "not a number (NaN)" } else { "infinite" };
            Err(Error::tool_failed(format!("the result is {what}, which no JSON number can carry")))
        }
    }
}
impl IntoToolResult for bool {
    fn into_tool_result(self) -> Result<SteelVal> {
        Ok(SteelVal::BoolV(self))
    }
}
impl IntoToolResult for () {
    fn into_tool_result(self) -> Result<SteelVal> {
        Ok(SteelVal::Void)
    }
}
impl IntoToolResult for serde_json::Value {
    fn into_tool_result(self) -> Result<SteelVal> {
        value::json_to_scheme(&self, ParamType::Any)
            .map_err(|_| Error::tool_failed(format!("the result nests deeper than {} levels", value::MAX_DEPTH)))
    }
}
impl<T: IntoToolResult> IntoToolResult for Result<T> {
    fn into_tool_result(self) -> Result<SteelVal> {
        self.and_then(T::into_tool_result)
    }
}

/// A Rust function usable as a tool: `Fn(&ToolCtx, A1, A2, ...) -> R` for up to six parameters,
/// each `A` a [`FromArg`] type and `R` an [`IntoToolResult`]. Implemented by a macro for every
/// arity; you never implement it yourself. A tool's confirmation preview is such a function too,
/// with the tool's own parameter types and a `String` (or `Result<String>`) result.
pub trait ToolFn<Args>: Send + Sync + 'static {
    /// What the function returns.
    type Output;
    /// `(type, optional)` of each parameter, in order.
    fn param_types() -> Vec<(ParamType, bool)>;
    /// Converts the given arguments (fewer than the parameters when optional ones were left off)
    /// and calls the function.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when an argument does not convert to its parameter's type.
    fn invoke(&self, ctx: &ToolCtx, args: &[SteelVal]) -> Result<Self::Output>;
    /// [`ToolFn::invoke`], with the result converted to the Scheme value callers see.
    fn call(&self, ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal>;
}

macro_rules! tool_fn {
    ($($arg:ident $idx:tt),*) => {
        impl<Func, Ret, $($arg),*> ToolFn<($($arg,)*)> for Func
        where
            Func: Fn(&ToolCtx $(, $arg)*) -> Ret + Send + Sync + 'static,
            Ret: IntoToolResult,
            $($arg: FromArg,)*
        {
            type Output = Ret;
            fn param_types() -> Vec<(ParamType, bool)> {
                vec![$(($arg::TYPE, $arg::OPTIONAL)),*]
            }
            #[allow(unused_variables)]
            fn invoke(&self, ctx: &ToolCtx, args: &[SteelVal]) -> Result<Ret> {
                Ok((self)(ctx $(, $arg::from_arg(args.get($idx)).map_err(|e| {
                    Error::new(ErrorKind::WrongType, format!("argument {}: {e}", $idx + 1))
                })?)*))
            }
            fn call(&self, ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal> {
                self.invoke(ctx, args)?.into_tool_result()
            }
        }
    };
}

tool_fn!();
tool_fn!(A 0);
tool_fn!(A 0, B 1);
tool_fn!(A 0, B 1, C 2);
tool_fn!(A 0, B 1, C 2, D 3);
tool_fn!(A 0, B 1, C 2, D 3, E 4);
tool_fn!(A 0, B 1, C 2, D 3, E 4, F 5);

/// What a confirmation preview may return: the text a person is shown, or an error saying why
/// there is none (the call is then refused rather than confirmed blind).
pub trait IntoPreview {
    /// The preview text.
    fn into_preview(self) -> Result<String>;
}
impl IntoPreview for String {
    fn into_preview(self) -> Result<String> {
        Ok(self)
    }
}
impl IntoPreview for Result<String> {
    fn into_preview(self) -> Result<String> {
        self
    }
}

/// Describes a Rust tool: name, description and one `param` line per function parameter.
///
/// ```
/// use toolhost::{Registry, Tool, ToolCtx};
///
/// fn greet(_ctx: &ToolCtx, name: String, times: Option<i64>) -> String {
///     // 0 is what a skipped `times` arrives as: treat it as "not given".
///     let times = times.filter(|t| *t > 0).unwrap_or(1);
///     vec![format!("hello {name}"); times as usize].join("\n")
/// }
///
/// let mut registry = Registry::new();
/// let tool = Tool::new("greet", "Greet someone.")
///     .param("name", "Who to greet")
///     .param("times", "How often; once when left out")
///     .build(greet)
///     .unwrap();
/// assert_eq!(tool.signature().render(), "(greet name [times])");
/// registry.register(tool).unwrap();
/// ```
pub struct Tool {
    name: String,
    description: String,
    docs: Vec<(String, String)>,
    annotations: Annotations,
    preview: Option<TypedPreview>,
    /// The declared output shape, checked by [`Tool::build`].
    output: Option<serde_json::Value>,
}

/// A preview function and the parameter types it was written for.
struct TypedPreview {
    types: Vec<(ParamType, bool)>,
    run: Preview,
}

/// `(string, integer?)`: parameter types as the definition errors show them.
fn render_types(types: &[(ParamType, bool)]) -> String {
    let names: Vec<String> =
        types.iter().map(|(ty, optional)| format!("{}{}", ty.name(), if *optional { "?" } else { "" })).collect();
    format!("({})", names.join(", "))
}

impl Tool {
    /// Starts a tool description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            description: description.into(),
            docs: Vec::new(),
            annotations: Annotations::default(),
            preview: None,
            output: None,
        }
    }

    /// Declares the shape of the tool's result (see [`crate::spec::output_schema`]): a root type
    /// (`"integer"`, `"number"`, `"boolean"`, `"list"`, `"object"`) or a JSON Schema with one. MCP
    /// clients are shown it as `outputSchema`; a result of another root type fails the call.
    ///
    /// ```
    /// use toolhost::{Tool, ToolCtx};
    /// let count = Tool::new("count", "Count to three.").output(serde_json::json!("list"));
    /// let tool = count.build(|_: &ToolCtx| serde_json::json!([1, 2, 3])).unwrap();
    /// assert_eq!(tool.spec.output_schema, Some(serde_json::json!({"type": "array"})));
    /// ```
    pub fn output(mut self, shape: serde_json::Value) -> Self {
        self.output = Some(shape);
        self
    }

    /// Names and describes the next parameter of the function.
    pub fn param(mut self, name: impl Into<String>, description: impl Into<String>) -> Self {
        self.docs.push((name.into(), description.into()));
        self
    }

    /// Marks the tool as changing nothing.
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = true;
        self
    }

    /// Marks the tool as one that may destroy or overwrite data.
    pub fn destructive(mut self) -> Self {
        self.annotations.destructive = true;
        self
    }

    /// Sets the confirmation preview (design section 10): what a person sees before the call runs.
    /// The preview is a function like the tool's own, with the same parameter types (checked by
    /// [`Tool::build`]), returning the text: it receives the same arguments the handler would.
    ///
    /// ```
    /// use toolhost::{Tool, ToolCtx};
    ///
    /// fn rm(_ctx: &ToolCtx, path: String, force: Option<bool>) -> String {
    ///     format!("removed {path}{}", if force == Some(true) { " (forced)" } else { "" })
    /// }
    /// fn rm_preview(_ctx: &ToolCtx, path: String, force: Option<bool>) -> String {
    ///     format!("rm {}{path}", if force == Some(true) { "-f " } else { "" })
    /// }
    /// fn wrong_preview(_ctx: &ToolCtx, path: String) -> String {
    ///     path
    /// }
    ///
    /// let tool = || Tool::new("rm", "Remove a file.").param("path", "File").param("force", "Even if read-only");
    /// assert!(tool().preview(rm_preview).build(rm).is_ok());
    /// let err = tool().preview(wrong_preview).build(rm).unwrap_err();
    /// assert_eq!(err.kind(), toolhost::ErrorKind::InvalidDefinition);
    /// ```
    pub fn preview<Args, P>(mut self, preview: P) -> Self
    where
        P: ToolFn<Args>,
        P::Output: IntoPreview,
    {
        self.preview = Some(TypedPreview {
            types: P::param_types(),
            run: Arc::new(move |ctx, args| preview.invoke(ctx, args)?.into_preview()),
        });
        self
    }

    /// Binds the function, deriving each parameter's type and optionality from its Rust type.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidDefinition`] when the number of `param` lines differs from the function's
    /// parameters, the preview's parameter types differ from the function's, or the signature
    /// breaks a registry rule (see [`Signature::validate`]), or the declared output shape is not one.
    pub fn build<Args, F: ToolFn<Args>>(self, function: F) -> Result<Primitive> {
        let types = F::param_types();
        let output_schema =
            self.output.as_ref().map(|shape| crate::spec::output_schema(&self.name, shape)).transpose()?;
        if let Some(preview) = self.preview.as_ref().filter(|p| p.types != types) {
            return Err(Error::new(
                ErrorKind::InvalidDefinition,
                format!(
                    "tool \"{}\": the preview takes {} but the tool takes {}; a preview has the tool's own \
                     parameter types",
                    self.name,
                    render_types(&preview.types),
                    render_types(&types)
                ),
            )
            .with_tool(&self.name));
        }
        if types.len() != self.docs.len() {
            return Err(Error::new(
                ErrorKind::InvalidDefinition,
                format!(
                    "tool \"{}\": the function takes {} parameters but {} were described",
                    self.name,
                    types.len(),
                    self.docs.len()
                ),
            )
            .with_tool(&self.name));
        }
        let params = self
            .docs
            .into_iter()
            .zip(types)
            .map(|((name, description), (ty, optional))| Param { name, ty, description, optional })
            .collect();
        let signature = Signature { name: self.name, params, rest: None, skipped: Skipped::TypedEmpty };
        signature.validate()?;
        let function = Arc::new(function);
        Ok(Primitive {
            spec: Arc::new(ToolSpec {
                signature,
                description: self.description,
                annotations: self.annotations,
                input_schema: None,
                output_schema,
            }),
            handler: Handler::Rust(Arc::new(move |ctx, args| function.call(ctx, args))),
            preview: self.preview.map(|p| p.run),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Limits;
    use crate::workspace::Workspace;

    fn echo(_ctx: &ToolCtx, text: String, times: Option<i64>) -> String {
        text.repeat(times.unwrap_or(1).max(1) as usize)
    }

    fn ctx(dir: &tempfile::TempDir) -> ToolCtx {
        ToolCtx::new(Workspace::new(dir.path()).unwrap(), Limits::default())
    }

    #[test]
    fn a_preview_with_other_parameter_types_is_refused_at_build() {
        fn short(_ctx: &ToolCtx, text: String) -> String {
            text
        }
        fn retyped(_ctx: &ToolCtx, text: String, times: Option<bool>) -> String {
            format!("{text}{times:?}")
        }
        for result in [
            Tool::new("echo", "Echo.").param("text", "t").param("times", "n").preview(short).build(echo),
            Tool::new("echo", "Echo.").param("text", "t").param("times", "n").preview(retyped).build(echo),
        ] {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidDefinition);
            assert!(err.message().contains("the tool takes (string, integer?)"), "{err}");
        }
    }

    #[test]
    fn a_preview_that_cannot_convert_its_arguments_is_an_error_not_an_empty_preview() {
        fn preview(_ctx: &ToolCtx, text: String, times: Option<i64>) -> Result<String> {
            Ok(format!("echo {text} x{}", times.unwrap_or(1)))
        }
        let dir = tempfile::tempdir().unwrap();
        let tool = Tool::new("echo", "Echo.").param("text", "t").param("times", "n").preview(preview).build(echo);
        let preview = tool.unwrap().preview.unwrap();
        assert_eq!(preview(&ctx(&dir), &[SteelVal::StringV("hi".into())]).unwrap(), "echo hi x1");
        let err = preview(&ctx(&dir), &[SteelVal::IntV(3)]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType);
        assert!(err.message().contains("argument 1"), "{err}");
    }

    #[test]
    fn number_parameters_take_integers_and_floats_and_non_finite_results_are_errors() {
        fn half(_ctx: &ToolCtx, x: f64) -> f64 {
            x / 2.0
        }
        fn ratio(_ctx: &ToolCtx, a: f64, b: f64) -> f64 {
            a / b
        }
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(&dir);
        assert!(matches!(ToolFn::call(&half, &ctx, &[SteelVal::IntV(3)]), Ok(SteelVal::NumV(x)) if x == 1.5));
        assert!(matches!(ToolFn::call(&half, &ctx, &[SteelVal::NumV(1.0)]), Ok(SteelVal::NumV(x)) if x == 0.5));
        assert_eq!(ToolFn::call(&half, &ctx, &[SteelVal::BoolV(true)]).unwrap_err().kind(), ErrorKind::WrongType);
        let nan = ToolFn::call(&ratio, &ctx, &[SteelVal::NumV(0.0), SteelVal::NumV(0.0)]).unwrap_err();
        assert!(nan.message().contains("NaN"), "{nan}");
        let inf = ToolFn::call(&ratio, &ctx, &[SteelVal::NumV(1.0), SteelVal::NumV(0.0)]).unwrap_err();
        assert!(inf.message().contains("infinite"), "{inf}");
    }
}
