//! Turning a call's arguments into the positional Scheme values a handler sees: from a JSON object
//! sent by a model (design section 3), and from a Scheme call (arity and types, section 1). Both
//! produce the same values for the same call, and their errors name the tool, the parameter and
//! what was given. It also reads JSON argument text noting a key given twice, which a plain parse
//! would hide by keeping the last value.

use serde_json::{Map, Value};
use steel::rvals::SteelVal;

use crate::error::{Error, ErrorKind, Result};
use crate::param::{Param, Signature, Skipped};
use crate::value::{self, Mismatch};

/// Converts JSON arguments (already tidied) to positional values, following section 3:
/// unknown names are refused, required arguments must be present and not null, trailing
/// missing or null optionals are left off, and an optional skipped before a later given one is
/// filled with its type's empty value (or void, for a tool that takes skipped parameters as void).
///
/// ```
/// use serde_json::json;
/// use toolhost::{args::args_from_json, Param, ParamType, Signature};
/// let sig = Signature::new("fs-read", vec![
///     Param::required("path", ParamType::String, "File"),
///     Param::optional("start", ParamType::Integer, "First line"),
///     Param::optional("count", ParamType::Integer, "Lines"),
/// ]);
/// let args = json!({"path": "a.txt", "count": 5});
/// let values = args_from_json(&sig, args.as_object().unwrap()).unwrap();
/// assert_eq!(values.len(), 3); // start was filled with 0
/// let err = args_from_json(&sig, json!({"path": "a", "limit": 5}).as_object().unwrap()).unwrap_err();
/// assert_eq!(err.kind().as_str(), "unknown_argument");
/// ```
pub fn args_from_json(sig: &Signature, args: &Map<String, Value>) -> Result<Vec<SteelVal>> {
    for name in args.keys() {
        let known = sig.position(name).is_some() || sig.rest.as_ref().is_some_and(|r| &r.name == name);
        if !known {
            let listing = if sig.params.is_empty() && sig.rest.is_none() {
                "it takes no parameters".to_string()
            } else {
                format!("its parameters are {}", sig.param_names())
            };
            return Err(Error::new(
                ErrorKind::UnknownArgument,
                format!("{} has no parameter \"{name}\"; {listing}", sig.name),
            )
            .with_tool(&sig.name)
            .with_parameter(name.as_str()));
        }
    }
    let given = |p: &Param| lookup(args, &p.name).filter(|v| !v.is_null());
    let rest_values = match &sig.rest {
        Some(rest) => given(rest).map(|v| rest_from_json(sig, rest, v)).transpose()?,
        None => None,
    };
    // Everything up to the last given parameter is passed; everything after it is left off.
    let passed = match rest_values {
        Some(_) => sig.params.len(),
        None => sig.params.iter().rposition(|p| given(p).is_some()).map_or(0, |i| i + 1),
    };
    let mut out = Vec::with_capacity(passed + rest_values.as_ref().map_or(0, Vec::len));
    for (index, param) in sig.params.iter().enumerate() {
        match given(param) {
            Some(v) => out.push(json_arg(sig, param, v)?),
            None if !param.optional => {
                let how = if lookup(args, &param.name).is_some() { "is null" } else { "is missing" };
                return Err(Error::new(
                    ErrorKind::MissingArgument,
                    format!("{}: required argument \"{}\" {how}; call it as {}", sig.name, param.name, sig.render()),
                )
                .with_tool(&sig.name)
                .with_parameter(&param.name));
            }
            None if index < passed => out.push(skipped_value(sig, param)),
            None => {}
        }
    }
    out.extend(rest_values.into_iter().flatten());
    Ok(out)
}

/// `args[name]`. A model sends a handful of arguments: comparing their names beats hashing one.
fn lookup<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if args.len() <= 8 {
        args.iter().find_map(|(key, value)| (key == name).then_some(value))
    } else {
        args.get(name)
    }
}

/// The arguments as a `define-tool` body binds them: every absent trailing optional parameter
/// given its type's empty value, and a rest parameter's arguments gathered into one list.
pub(crate) fn fill_for_body(sig: &Signature, mut given: Vec<SteelVal>) -> Vec<SteelVal> {
    if sig.rest.is_some() {
        let rest = given.split_off(sig.params.len().min(given.len()));
        given.push(SteelVal::ListV(rest.into_iter().collect()));
        return given;
    }
    for param in sig.params.iter().skip(given.len()) {
        given.push(skipped_value(sig, param));
    }
    given
}

/// The value a skipped optional parameter arrives as: its type's empty value, or void for a tool
/// that takes skipped parameters as void.
pub(crate) fn skipped_value(sig: &Signature, param: &Param) -> SteelVal {
    match sig.skipped {
        Skipped::TypedEmpty => value::empty_value(param.ty),
        Skipped::Void => SteelVal::Void,
    }
}

fn rest_from_json(sig: &Signature, rest: &Param, value: &Value) -> Result<Vec<SteelVal>> {
    let Value::Array(items) = value else {
        return Err(wrong_type_json(sig, rest, &format!("a list of {}", rest.ty.name()), value));
    };
    items
        .iter()
        .map(|item| {
            value::json_to_scheme(item, rest.ty).map_err(|m| mismatch_error(sig, rest, None, m, rest.ty.article_name()))
        })
        .collect()
}

fn json_arg(sig: &Signature, param: &Param, value: &Value) -> Result<SteelVal> {
    value::json_to_scheme(value, param.ty).map_err(|m| mismatch_error(sig, param, None, m, param.ty.article_name()))
}

fn wrong_type_json(sig: &Signature, param: &Param, expected: &str, value: &Value) -> Error {
    mismatch_error(sig, param, None, Mismatch::WrongType(value::describe_json(value)), expected)
}

/// The one wording of a wrong-type error: by name from JSON, by position and name from Scheme.
fn mismatch_error(sig: &Signature, param: &Param, position: Option<usize>, m: Mismatch, expected: &str) -> Error {
    let which = match position {
        Some(pos) => format!("argument {pos} ({})", param.name),
        None => format!("argument \"{}\"", param.name),
    };
    let message = match m {
        Mismatch::WrongType(got) => format!("{}: {which} must be {expected}, got {got}", sig.name),
        Mismatch::TooDeep => {
            format!("{}: {which} nests deeper than {} levels", sig.name, value::MAX_DEPTH)
        }
    };
    Error::new(ErrorKind::WrongType, message).with_tool(&sig.name).with_parameter(&param.name)
}

/// Checks a Scheme call's arguments against the signature: the count first, then each value's
/// type. Returns the values the handler sees (see [`value::check_scheme`]).
///
/// # Errors
/// `fs-read: expected 1 to 3 arguments (fs-read path [start] [count]), got 4` (bad_arguments) and
/// `fs-read: argument 2 (start) must be an integer, got "abc"` (wrong_type).
pub fn args_from_scheme(sig: &Signature, args: &[SteelVal]) -> Result<Vec<SteelVal>> {
    if !sig.accepts_count(args.len()) {
        return Err(Error::new(
            ErrorKind::BadArguments,
            format!("{}: expected {} {}, got {}", sig.name, sig.arity_text(), sig.render(), args.len()),
        )
        .with_tool(&sig.name));
    }
    args.iter()
        .enumerate()
        .map(|(i, arg)| {
            // accepts_count guarantees a parameter for every position.
            let Some(param) = sig.param_at(i) else {
                return Err(Error::new(ErrorKind::BadArguments, format!("{}: too many arguments", sig.name)));
            };
            if sig.skipped == Skipped::Void && matches!(arg, SteelVal::Void) && param.optional {
                return Ok(SteelVal::Void);
            }
            value::check_scheme(arg, param.ty)
                .map_err(|m| mismatch_error(sig, param, Some(i + 1), m, param.ty.article_name()))
        })
        .collect()
}

/// The refusal of arguments that give `key` twice, in the words every caller uses (the call path,
/// and the agent loop's readers of what a model sent).
pub fn repeated_key_message(key: &str) -> String {
    format!("the key {key:?} is given more than once in the arguments; send each parameter once")
}

/// Parses JSON text as [`Value`] does, and notes the first key given twice in an object at one of
/// the `watched` places (JSON pointers: `""` is the top level, `"/arguments"` the object under the
/// top-level key `arguments`). The value kept is the last, as [`Value`] keeps it.
///
/// ```
/// use toolhost::args::parse_noting_repeats;
/// let (value, repeated) = parse_noting_repeats(r#"{"path": "a", "path": "b"}"#, &[""]).unwrap();
/// assert_eq!((value["path"].as_str(), repeated.as_deref()), (Some("b"), Some("path")));
/// let nested = r#"{"name": "t", "arguments": {"n": 1, "n": 2}}"#;
/// assert_eq!(parse_noting_repeats(nested, &[""]).unwrap().1, None);
/// assert_eq!(parse_noting_repeats(nested, &["", "/arguments"]).unwrap().1.as_deref(), Some("n"));
/// ```
///
/// # Errors
/// When the text is not one JSON value.
pub fn parse_noting_repeats(text: &str, watched: &[&str]) -> serde_json::Result<(Value, Option<String>)> {
    use serde::de::DeserializeSeed as _;
    let mut de = serde_json::Deserializer::from_str(text);
    let mut repeated = None;
    let value = Noting { at: String::new(), watched, repeated: &mut repeated }.deserialize(&mut de)?;
    de.end()?;
    Ok((value, repeated))
}

/// Reads one JSON value at the pointer `at`, noting repeated keys of the watched objects; what no
/// watched place lies in is read by [`Value`]'s own code.
struct Noting<'w, 'r> {
    at: String,
    watched: &'w [&'w str],
    repeated: &'r mut Option<String>,
}

impl Noting<'_, '_> {
    /// Whether a watched place is `at` or lies below it.
    fn leads_somewhere(&self) -> bool {
        self.watched
            .iter()
            .any(|w| w.strip_prefix(self.at.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Noting<'_, '_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        if self.leads_somewhere() {
            d.deserialize_any(self)
        } else {
            serde::Deserialize::deserialize(d)
        }
    }
}

impl<'de> serde::de::Visitor<'de> for Noting<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> std::result::Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let Noting { at, watched, repeated } = self;
        let watching = watched.contains(&at.as_str());
        // Whether a watched place lies below this object: only then are its values read here.
        let deeper =
            watched.iter().any(|w| w.len() > at.len() && w.starts_with(at.as_str()) && w[at.len()..].starts_with('/'));
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if deeper {
                let child = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                map.next_value_seed(Noting { at: child, watched, repeated: &mut *repeated })?
            } else {
                map.next_value::<Value>()?
            };
            match object.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                serde_json::map::Entry::Occupied(mut slot) => {
                    if watching && repeated.is_none() {
                        *repeated = Some(slot.key().clone());
                    }
                    slot.insert(value);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::ParamType;
    use serde_json::json;

    fn fs_read() -> Signature {
        Signature::new(
            "fs-read",
            vec![
                Param::required("path", ParamType::String, ""),
                Param::optional("start", ParamType::Integer, ""),
                Param::optional("count", ParamType::Integer, ""),
            ],
        )
    }

    fn call(sig: &Signature, args: Value) -> Result<Vec<Value>> {
        let values = args_from_json(sig, args.as_object().unwrap())?;
        Ok(values.iter().map(|v| value::scheme_to_json(v).unwrap()).collect())
    }

    #[test]
    fn skipped_optional_is_filled_with_its_empty_value() {
        assert_eq!(call(&fs_read(), json!({"path": "a", "count": 5})).unwrap(), vec![json!("a"), json!(0), json!(5)]);
    }

    #[test]
    fn trailing_missing_and_null_optionals_are_left_off() {
        let plain = call(&fs_read(), json!({"path": "a"})).unwrap();
        assert_eq!(plain, vec![json!("a")]);
        assert_eq!(call(&fs_read(), json!({"path": "a", "start": null, "count": null})).unwrap(), plain);
    }

    #[test]
    fn unknown_argument_lists_the_parameters() {
        let err = call(&fs_read(), json!({"path": "a", "limit": 5})).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownArgument);
        assert_eq!(err.message(), "fs-read has no parameter \"limit\"; its parameters are path, start, count");
    }

    #[test]
    fn missing_or_null_required_argument_is_named() {
        for args in [json!({"count": 2}), json!({"path": null})] {
            let err = call(&fs_read(), args).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::MissingArgument);
            assert_eq!(err.parameter(), Some("path"));
        }
    }

    #[test]
    fn skips_as_void_passes_false_zero_and_empty_as_given() {
        let mut sig = Signature::new(
            "srv.t",
            vec![
                Param::optional("flag", ParamType::Boolean, ""),
                Param::optional("n", ParamType::Integer, ""),
                Param::optional("s", ParamType::String, ""),
                Param::optional("last", ParamType::String, ""),
            ],
        );
        sig.skipped = Skipped::Void;
        assert_eq!(
            call(&sig, json!({"flag": false, "n": 0, "s": ""})).unwrap(),
            vec![json!(false), json!(0), json!("")]
        );
        assert_eq!(call(&sig, json!({"last": "x"})).unwrap(), vec![json!(null), json!(null), json!(null), json!("x")]);
    }

    #[test]
    fn scheme_errors_show_signature_and_position() {
        let sig = fs_read();
        let err = args_from_scheme(&sig, &[]).unwrap_err();
        assert_eq!(err.message(), "fs-read: expected 1 to 3 arguments (fs-read path [start] [count]), got 0");
        let err =
            args_from_scheme(&sig, &[SteelVal::StringV("a".into()), SteelVal::StringV("abc".into())]).unwrap_err();
        assert_eq!(err.message(), "fs-read: argument 2 (start) must be an integer, got \"abc\"");
    }

    #[test]
    fn variadic_rest_arrives_spread() {
        let mut sig = Signature::new("cat", vec![Param::required("first", ParamType::String, "")]);
        sig.rest = Some(Param::required("more", ParamType::String, ""));
        assert_eq!(
            call(&sig, json!({"first": "a", "more": ["b", "c"]})).unwrap(),
            vec![json!("a"), json!("b"), json!("c")]
        );
        assert_eq!(call(&sig, json!({"first": "a", "more": "b"})).unwrap_err().kind(), ErrorKind::WrongType);
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{0,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever a model sends, conversion answers with values or an error of a call kind, and
        /// the values always fit the signature.
        #[test]
        fn any_json_arguments_convert_or_fail_cleanly(
            names in proptest::collection::vec(proptest::sample::select(vec!["path", "start", "count", "limit"]), 0..4),
            values in proptest::collection::vec(json_value(), 0..4),
        ) {
            let sig = fs_read();
            let args: Map<String, Value> = names.into_iter().map(String::from).zip(values).collect();
            match args_from_json(&sig, &args) {
                Ok(values) => {
                    proptest::prop_assert!(sig.accepts_count(values.len()));
                    proptest::prop_assert!(args_from_scheme(&sig, &values).is_ok());
                }
                Err(e) => proptest::prop_assert!(matches!(
                    e.kind(),
                    ErrorKind::UnknownArgument | ErrorKind::MissingArgument | ErrorKind::WrongType
                )),
            }
        }

        /// The call path skips tidying (and copying the arguments) when `needs_tidy` says so:
        /// tidying must then change nothing.
        #[test]
        fn arguments_that_need_no_tidying_come_out_of_tidying_unchanged(
            names in proptest::collection::vec(proptest::sample::select(vec!["path", "start", "count", "limit"]), 0..4),
            values in proptest::collection::vec(json_value(), 0..4),
            wrapped in proptest::bool::ANY,
        ) {
            let sig = fs_read();
            let object = Value::Object(names.into_iter().map(String::from).zip(values).collect());
            let arguments = if wrapped { Value::String(object.to_string()) } else { object };
            if !crate::tidy::needs_tidy(&sig, &arguments) {
                let mut tidied = arguments.clone();
                proptest::prop_assert!(crate::tidy::tidy(&sig, &mut tidied).is_empty());
                proptest::prop_assert_eq!(tidied, arguments);
            }
        }
    }
}
