//! The typed way to register a Rust tool: a plain Rust function whose trailing `Option<T>`
//! parameters are the optional ones, plus a [`Tool`] builder carrying the name, description and
//! parameter docs. Types and optionality come from the function's own signature, so docs and code
//! cannot disagree on them. (The untyped path for run-time signatures is [`crate::Primitive::new`].)

use std::sync::Arc;

use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::param::{Param, ParamType, Signature, Skipped};
use crate::registry::{Annotations, Handler, Preview, Primitive};
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
    ($ty:ty, $param:expr, $pat:pat => $out:expr) => {
        impl FromArg for $ty {
            const TYPE: ParamType = $param;
            const OPTIONAL: bool = false;
            fn from_arg(arg: Option<&SteelVal>) -> std::result::Result<Self, String> {
                match arg {
                    #[allow(unreachable_patterns)]
                    Some($pat) => Ok($out),
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
from_arg!(f64, ParamType::Number, v @ (SteelVal::IntV(_) | SteelVal::NumV(_)) => match v {
    SteelVal::IntV(i) => *i as f64,
    SteelVal::NumV(f) => *f,
    _ => f64::NAN,
});
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
/// arity; you never implement it yourself.
pub trait ToolFn<Args>: Send + Sync + 'static {
    /// `(type, optional)` of each parameter, in order.
    fn param_types() -> Vec<(ParamType, bool)>;
    /// Calls the function with the given arguments (fewer than the parameters when optional ones
    /// were left off).
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
            fn param_types() -> Vec<(ParamType, bool)> {
                vec![$(($arg::TYPE, $arg::OPTIONAL)),*]
            }
            #[allow(unused_variables)]
            fn call(&self, ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal> {
                (self)(ctx $(, $arg::from_arg(args.get($idx)).map_err(|e| {
                    Error::new(ErrorKind::WrongType, format!("argument {}: {e}", $idx + 1))
                })?)*)
                .into_tool_result()
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
/// assert_eq!(tool.signature.render(), "(greet name [times])");
/// registry.register(tool).unwrap();
/// ```
pub struct Tool {
    name: String,
    description: String,
    docs: Vec<(String, String)>,
    annotations: Annotations,
    preview: Option<Preview>,
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
        }
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
    pub fn preview(
        mut self,
        preview: impl Fn(&ToolCtx, &[SteelVal]) -> Result<String> + Send + Sync + 'static,
    ) -> Self {
        self.preview = Some(Arc::new(preview));
        self
    }

    /// Binds the function, deriving each parameter's type and optionality from its Rust type.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidDefinition`] when the number of `param` lines differs from the function's
    /// parameters, or the signature breaks a registry rule (see [`Signature::validate`]).
    pub fn build<Args, F: ToolFn<Args>>(self, function: F) -> Result<Primitive> {
        let types = F::param_types();
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
            signature,
            description: self.description,
            annotations: self.annotations,
            handler: Handler::Rust(Arc::new(move |ctx, args| function.call(ctx, args))),
            preview: self.preview,
        })
    }
}
