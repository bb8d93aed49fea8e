//! toolhost's one mapping between JSON and Scheme values (design section 2): JSON arguments to
//! Scheme values by parameter type, Scheme results back to JSON, the typed empty values, short
//! renderings of values for error messages, and Scheme notation for values as the REPL and `eval`
//! print them ([`write_scheme`]). steel's own JSON conversion is not used: it turns every
//! number into a float, object keys into symbols, and panics on NaN.
//!
//! Both directions are bounded by [`MAX_DEPTH`], so deep nesting is an error, never a stack overflow.

use serde_json::{Map, Number, Value};
use steel::gc::Gc;
use steel::rvals::SteelVal;
use steel::HashMap;

use crate::param::ParamType;

/// How deeply lists and objects may nest in either direction. serde_json's parser stops at 128 too.
pub const MAX_DEPTH: usize = 128;

/// Why a value could not be converted. The caller adds the tool and parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Mismatch {
    /// The value is not of the expected type; the string describes what came.
    WrongType(String),
    /// The value nests deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// The value a skipped optional parameter of type `ty` takes under typed-empty skipping:
/// `""`, `0`, `0`, `#f`, `'()`, an empty hash map, and void for `any`.
pub fn empty_value(ty: ParamType) -> SteelVal {
    match ty {
        ParamType::String => SteelVal::StringV("".into()),
        ParamType::Integer | ParamType::Number => SteelVal::IntV(0),
        ParamType::Boolean => SteelVal::BoolV(false),
        ParamType::List => SteelVal::ListV(std::iter::empty::<SteelVal>().collect()),
        ParamType::Object => SteelVal::HashMapV(Gc::new(HashMap::new()).into()),
        ParamType::Any => SteelVal::Void,
    }
}

/// Converts a JSON argument for a parameter of type `ty` (design section 2's table).
///
/// ```
/// use serde_json::json;
/// use toolhost::{value::json_to_scheme, ParamType};
/// use steel::rvals::SteelVal;
/// assert!(matches!(json_to_scheme(&json!(5.0), ParamType::Integer), Ok(SteelVal::IntV(5))));
/// assert!(json_to_scheme(&json!(5.5), ParamType::Integer).is_err());
/// assert!(json_to_scheme(&json!("5"), ParamType::Integer).is_err());
/// ```
pub fn json_to_scheme(value: &Value, ty: ParamType) -> Result<SteelVal, Mismatch> {
    let wrong = || Mismatch::WrongType(describe_json(value));
    match (ty, value) {
        (ParamType::String, Value::String(s)) => Ok(SteelVal::StringV(s.as_str().into())),
        (ParamType::Integer, Value::Number(n)) => integer_from_json(n).ok_or_else(wrong),
        (ParamType::Number, Value::Number(n)) => Ok(number_from_json(n)),
        (ParamType::Boolean, Value::Bool(b)) => Ok(SteelVal::BoolV(*b)),
        (ParamType::List, Value::Array(_)) | (ParamType::Object, Value::Object(_)) => any_from_json(value, 0),
        (ParamType::Any, _) => any_from_json(value, 0),
        _ => Err(wrong()),
    }
}

fn integer_from_json(n: &Number) -> Option<SteelVal> {
    if let Some(i) = n.as_i64() {
        return isize::try_from(i).ok().map(SteelVal::IntV);
    }
    let f = n.as_f64()?;
    // 5.0 is 5; 5.5, and floats beyond the integer range, are not integers.
    let in_range = f.is_finite() && f.fract() == 0.0 && f >= isize::MIN as f64 && f < isize::MAX as f64;
    in_range.then(|| SteelVal::IntV(f as isize))
}

fn number_from_json(n: &Number) -> SteelVal {
    match n.as_i64().and_then(|i| isize::try_from(i).ok()) {
        Some(i) => SteelVal::IntV(i),
        // u64 beyond i64, or a float: serde_json numbers are always finite.
        None => SteelVal::NumV(n.as_f64().unwrap_or(f64::NAN)),
    }
}

fn any_from_json(value: &Value, depth: usize) -> Result<SteelVal, Mismatch> {
    if depth > MAX_DEPTH {
        return Err(Mismatch::TooDeep);
    }
    Ok(match value {
        Value::Null => SteelVal::Void,
        Value::Bool(b) => SteelVal::BoolV(*b),
        Value::Number(n) => number_from_json(n),
        Value::String(s) => SteelVal::StringV(s.as_str().into()),
        Value::Array(items) => SteelVal::ListV(
            items.iter().map(|v| any_from_json(v, depth + 1)).collect::<Result<Vec<_>, _>>()?.into_iter().collect(),
        ),
        Value::Object(map) => {
            let mut hm = HashMap::new();
            for (k, v) in map {
                hm.insert(SteelVal::StringV(k.as_str().into()), any_from_json(v, depth + 1)?);
            }
            SteelVal::HashMapV(Gc::new(hm).into())
        }
    })
}

/// Checks a Scheme argument against a parameter type, returning the value the handler sees:
/// integral floats become integers for `integer`, vectors become lists for `list`, symbol keys
/// become string keys for `object`.
pub fn check_scheme(value: &SteelVal, ty: ParamType) -> Result<SteelVal, Mismatch> {
    let wrong = || Mismatch::WrongType(describe_scheme(value));
    match (ty, value) {
        (ParamType::Any, v) => Ok(v.clone()),
        (ParamType::String, SteelVal::StringV(_)) => Ok(value.clone()),
        (ParamType::Integer | ParamType::Number, SteelVal::IntV(_)) => Ok(value.clone()),
        (ParamType::Integer, SteelVal::NumV(f)) => {
            let integral = f.is_finite() && f.fract() == 0.0 && *f >= isize::MIN as f64 && *f < isize::MAX as f64;
            if integral {
                Ok(SteelVal::IntV(*f as isize))
            } else {
                Err(wrong())
            }
        }
        (ParamType::Number, SteelVal::NumV(_)) => Ok(value.clone()),
        (ParamType::Number, SteelVal::Rational(r)) => Ok(SteelVal::NumV(*r.numer() as f64 / *r.denom() as f64)),
        (ParamType::Boolean, SteelVal::BoolV(_)) => Ok(value.clone()),
        (ParamType::List, SteelVal::ListV(_)) => Ok(value.clone()),
        (ParamType::List, SteelVal::VectorV(v)) => Ok(SteelVal::ListV(v.iter().cloned().collect())),
        (ParamType::List, SteelVal::MutableVector(v)) => Ok(SteelVal::ListV(v.get().into_iter().collect())),
        (ParamType::Object, SteelVal::HashMapV(map)) => {
            if map.keys().all(|k| matches!(k, SteelVal::StringV(_))) {
                return Ok(value.clone());
            }
            let mut out = HashMap::new();
            for (k, v) in map.iter() {
                let key = match k {
                    SteelVal::StringV(s) | SteelVal::SymbolV(s) => SteelVal::StringV(s.clone()),
                    other => {
                        return Err(Mismatch::WrongType(format!(
                            "a hash map with the key {} (object keys must be strings or symbols)",
                            describe_scheme(other)
                        )))
                    }
                };
                out.insert(key, v.clone());
            }
            Ok(SteelVal::HashMapV(Gc::new(out).into()))
        }
        _ => Err(wrong()),
    }
}

/// Why a Scheme result could not become JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct NotJson(pub String);

/// Converts a tool's Scheme result to JSON (design section 2): strings, integers, finite floats,
/// booleans, lists and vectors, hash maps with string or symbol keys (emitted with sorted keys, so
/// results are deterministic), void to null, symbols and chars to strings.
///
/// # Errors
/// NaN and infinities, procedures and other opaque values, hash maps with other keys, improper
/// lists, and nesting deeper than [`MAX_DEPTH`].
pub fn scheme_to_json(value: &SteelVal) -> Result<Value, NotJson> {
    scheme_to_json_at(value, 0)
}

fn scheme_to_json_at(value: &SteelVal, depth: usize) -> Result<Value, NotJson> {
    if depth > MAX_DEPTH {
        return Err(NotJson(format!("the value nests deeper than {MAX_DEPTH} levels")));
    }
    let seq = |items: &mut dyn Iterator<Item = SteelVal>| -> Result<Value, NotJson> {
        items.map(|v| scheme_to_json_at(&v, depth + 1)).collect::<Result<Vec<_>, _>>().map(Value::Array)
    };
    Ok(match value {
        SteelVal::Void => Value::Null,
        SteelVal::BoolV(b) => Value::Bool(*b),
        SteelVal::IntV(i) => Value::Number((*i as i64).into()),
        SteelVal::NumV(f) => float_json(*f)?,
        SteelVal::Rational(r) => float_json(*r.numer() as f64 / *r.denom() as f64)?,
        SteelVal::BigNum(b) => {
            let text = b.to_string();
            if let Ok(i) = text.parse::<i64>() {
                Value::Number(i.into())
            } else if let Ok(u) = text.parse::<u64>() {
                Value::Number(u.into())
            } else {
                return Err(NotJson(format!("the integer {text} does not fit in 64 bits")));
            }
        }
        SteelVal::StringV(s) | SteelVal::SymbolV(s) => Value::String(s.as_str().to_string()),
        SteelVal::CharV(c) => Value::String(c.to_string()),
        SteelVal::ListV(l) => seq(&mut l.iter().cloned())?,
        SteelVal::VectorV(v) => seq(&mut v.iter().cloned())?,
        SteelVal::MutableVector(v) => seq(&mut v.get().into_iter())?,
        SteelVal::HashSetV(set) => {
            let mut items = set.iter().map(|v| scheme_to_json_at(v, depth + 1)).collect::<Result<Vec<_>, _>>()?;
            items.sort_by_key(|v| v.to_string());
            Value::Array(items)
        }
        SteelVal::HashMapV(map) => {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map.iter() {
                let key = match k {
                    SteelVal::StringV(s) | SteelVal::SymbolV(s) => s.as_str().to_string(),
                    other => {
                        return Err(NotJson(format!(
                            "hash map keys must be strings or symbols to become JSON, got {}",
                            describe_scheme(other)
                        )))
                    }
                };
                entries.push((key, scheme_to_json_at(v, depth + 1)?));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect::<Map<_, _>>())
        }
        other => return Err(NotJson(format!("{} cannot be converted to JSON", describe_scheme(other)))),
    })
}

fn float_json(f: f64) -> Result<Value, NotJson> {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| NotJson(format!("the number {f} (NaN or infinite) cannot be converted to JSON")))
}

const DESCRIBE_LIMIT: usize = 80;

/// Cuts `text` to about 80 bytes (at a character boundary) with `...`, for quoting in messages.
pub(crate) fn clip(mut text: String) -> String {
    if text.len() > DESCRIBE_LIMIT {
        let mut cut = DESCRIBE_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// A short rendering of a JSON value for error messages: `"abc"`, `12.5`, `[1,2]`, clipped.
pub fn describe_json(value: &Value) -> String {
    clip(value.to_string())
}

/// A short rendering of a Scheme value for error messages: `"abc"`, `12`, `#f`, `(1 2)`, `void`,
/// `a procedure`, clipped.
pub fn describe_scheme(value: &SteelVal) -> String {
    let mut out = String::new();
    render_scheme(value, &mut out, 0);
    clip(out)
}

fn render_scheme(value: &SteelVal, out: &mut String, depth: usize) {
    if out.len() > DESCRIBE_LIMIT || depth > 8 {
        out.push_str("...");
        return;
    }
    match value {
        SteelVal::StringV(s) => out.push_str(&Value::String(s.as_str().to_string()).to_string()),
        SteelVal::SymbolV(s) => {
            out.push('\'');
            out.push_str(s.as_str());
        }
        SteelVal::IntV(i) => out.push_str(&i.to_string()),
        SteelVal::NumV(f) => out.push_str(&format!("{f:?}")),
        SteelVal::BoolV(true) => out.push_str("#t"),
        SteelVal::BoolV(false) => out.push_str("#f"),
        SteelVal::CharV(c) => out.push_str(&format!("#\\{c}")),
        SteelVal::Void => out.push_str("void"),
        SteelVal::ListV(l) => {
            out.push('(');
            for (i, v) in l.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                render_scheme(v, out, depth + 1);
                if out.len() > DESCRIBE_LIMIT {
                    break;
                }
            }
            out.push(')');
        }
        SteelVal::VectorV(_) | SteelVal::MutableVector(_) => out.push_str("a vector"),
        SteelVal::HashMapV(_) => out.push_str("a hash map"),
        SteelVal::HashSetV(_) => out.push_str("a hash set"),
        v if is_procedure(v) => out.push_str("a procedure"),
        other => out.push_str(&format!("a {}", type_name(other))),
    }
}

/// How deeply [`write_scheme`] prints nested values before writing `...`: deeper structures would
/// risk the stack, and no person reads them.
const WRITE_DEPTH: usize = 256;

/// A value in Scheme notation, as the REPL and `toolhost eval` print it (`write`, readable back):
/// strings and symbols look different (`"sym"` vs `sym`), `#t`/`#f`, `#\a`, `'()`,
/// lists as `(1 "two" three)`, vectors as `#(1 2)`, hash maps as `#hash(("a" . 1))` with their keys
/// sorted. Strings are written as string literals whose newlines and tabs are left as they are, so a
/// tool's text result (`fs-read`, `shell-exec`) reads as text between its quotes, and still reads
/// back as the same string. Void is written as nothing.
///
/// ```
/// use steel::rvals::SteelVal;
/// use toolhost::value::write_scheme;
/// let list = SteelVal::ListV(vec![SteelVal::IntV(1), SteelVal::StringV("two".into()), SteelVal::SymbolV("three".into())].into());
/// assert_eq!(write_scheme(&list), r#"(1 "two" three)"#);
/// assert_eq!(write_scheme(&SteelVal::StringV("a\tb\n\"q\"".into())), "\"a\tb\n\\\"q\\\"\"");
/// assert_eq!(write_scheme(&SteelVal::ListV(vec![].into())), "'()");
/// ```
pub fn write_scheme(value: &SteelVal) -> String {
    let mut out = String::new();
    match value {
        SteelVal::Void => {}
        SteelVal::ListV(l) if l.is_empty() => out.push_str("'()"),
        other => write_value(other, &mut out, 0),
    }
    out
}

fn write_value(value: &SteelVal, out: &mut String, depth: usize) {
    if depth > WRITE_DEPTH {
        out.push_str("...");
        return;
    }
    let items = |out: &mut String, values: &mut dyn Iterator<Item = &SteelVal>| {
        for (i, v) in values.enumerate() {
            if i > 0 {
                out.push(' ');
            }
            write_value(v, out, depth + 1);
        }
    };
    match value {
        SteelVal::StringV(s) => write_string(s.as_str(), out),
        SteelVal::SymbolV(s) => out.push_str(s.as_str()),
        SteelVal::IntV(i) => out.push_str(&i.to_string()),
        SteelVal::NumV(f) if f.is_nan() => out.push_str("+nan.0"),
        SteelVal::NumV(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "+inf.0" } else { "-inf.0" }),
        SteelVal::NumV(f) => out.push_str(&format!("{f:?}")),
        SteelVal::BoolV(true) => out.push_str("#t"),
        SteelVal::BoolV(false) => out.push_str("#f"),
        SteelVal::CharV(c) => write_char(*c, out),
        SteelVal::Void => out.push_str("#<void>"),
        SteelVal::ListV(l) => {
            out.push('(');
            items(out, &mut l.iter());
            out.push(')');
        }
        SteelVal::Pair(p) => {
            out.push('(');
            write_value(p.car_ref(), out, depth + 1);
            out.push_str(" . ");
            write_value(p.cdr_ref(), out, depth + 1);
            out.push(')');
        }
        SteelVal::VectorV(v) => {
            out.push_str("#(");
            items(out, &mut v.iter());
            out.push(')');
        }
        SteelVal::HashMapV(map) => {
            let mut entries: Vec<(String, String)> = map
                .iter()
                .map(|(k, v)| {
                    let (mut key, mut value) = (String::new(), String::new());
                    write_value(k, &mut key, depth + 1);
                    write_value(v, &mut value, depth + 1);
                    (key, value)
                })
                .collect();
            entries.sort();
            out.push_str("#hash(");
            for (i, (k, v)) in entries.iter().enumerate() {
                out.push_str(&format!("{}({k} . {v})", if i > 0 { " " } else { "" }));
            }
            out.push(')');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A string literal: `"` and `\` escaped, newlines and tabs kept as they are, other control
/// characters escaped.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' | '\t' => out.push(c),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:x};", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_char(c: char, out: &mut String) {
    match c {
        ' ' => out.push_str("#\\space"),
        '\n' => out.push_str("#\\newline"),
        '\t' => out.push_str("#\\tab"),
        '\r' => out.push_str("#\\return"),
        '\0' => out.push_str("#\\null"),
        c if c.is_control() => out.push_str(&format!("#\\x{:x}", c as u32)),
        c => {
            out.push_str("#\\");
            out.push(c);
        }
    }
}

/// Whether a value can be called.
pub(crate) fn is_procedure(value: &SteelVal) -> bool {
    matches!(
        value,
        SteelVal::Closure(_)
            | SteelVal::FuncV(_)
            | SteelVal::BoxedFunction(_)
            | SteelVal::MutFunc(_)
            | SteelVal::BuiltIn(_)
            | SteelVal::ContinuationFunction(_)
    )
}

fn type_name(value: &SteelVal) -> &'static str {
    match value {
        SteelVal::Rational(_) | SteelVal::BigRational(_) => "rational number",
        SteelVal::BigNum(_) => "big integer",
        SteelVal::Complex(_) => "complex number",
        SteelVal::Pair(_) => "pair",
        SteelVal::CustomStruct(_) => "struct",
        SteelVal::PortV(_) => "port",
        SteelVal::ByteVector(_) => "bytevector",
        SteelVal::SyntaxObject(_) => "syntax object",
        SteelVal::Boxed(_) | SteelVal::HeapAllocated(_) => "box",
        _ => "opaque value",
    }
}

/// A result longer than `cap` characters as a model would read it, cut to fit with a note saying
/// so. (Tools that can stop at a whole line do so themselves and say how to go on; this is the
/// last resort for the rest, Scheme tools' results among them.)
pub(crate) fn cap_result(result: serde_json::Value, cap: usize) -> serde_json::Value {
    let text = match &result {
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => return result,
        serde_json::Value::String(s) if s.len() <= cap => return result,
        serde_json::Value::String(s) => s.clone(),
        other => {
            let text = other.to_string();
            if text.len() <= cap {
                return result;
            }
            text
        }
    };
    let total = text.chars().count();
    if total <= cap {
        return result;
    }
    let note = |cut: usize| format!("\n[... {cut} more characters cut: a tool result shows at most {cap} characters]");
    // The note's own length depends on the count it gives; a generous guess keeps the total in cap.
    let keep = cap.saturating_sub(note(total).chars().count());
    let kept: String = text.chars().take(keep).collect();
    serde_json::Value::String(format!("{kept}{}", note(total - keep)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Any JSON value a model could send: integers in range, finite floats, strings with any
    /// characters, and nesting deeper than the conversion allows.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e12f64..1e12f64).prop_map(|f| json!(f)),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(160, 400, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((".{0,8}", inner), 0..4)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    fn depth(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Whatever JSON comes, conversion never panics: it gives a value, or an error for nesting
        /// past the limit; and what converts comes back as the same JSON (null inside a list or an
        /// object is void and comes back as null).
        #[test]
        fn any_json_converts_back_to_itself_or_is_refused_for_depth(value in any_json()) {
            for ty in ParamType::ALL {
                let _ = json_to_scheme(&value, ty);
            }
            match json_to_scheme(&value, ParamType::Any) {
                Ok(scheme) => {
                    let back = scheme_to_json(&scheme).unwrap();
                    let same = back == value
                        || (back.as_f64().is_some() && back.as_f64() == value.as_f64());
                    prop_assert!(same, "{value} came back as {back}");
                    prop_assert!(check_scheme(&scheme, ParamType::Any).is_ok());
                }
                Err(Mismatch::TooDeep) => prop_assert!(depth(&value) > MAX_DEPTH, "{value}"),
                Err(other) => prop_assert!(false, "{value}: {other:?}"),
            }
        }
    }

    #[test]
    fn integers_stay_integers_both_ways() {
        let v = json_to_scheme(&json!(2480), ParamType::Any).unwrap();
        assert!(matches!(v, SteelVal::IntV(2480)));
        assert_eq!(scheme_to_json(&v).unwrap(), json!(2480));
        let f = json_to_scheme(&json!(2.5), ParamType::Number).unwrap();
        assert_eq!(scheme_to_json(&f).unwrap(), json!(2.5));
    }

    #[test]
    fn nan_and_infinity_are_errors_not_panics() {
        assert!(scheme_to_json(&SteelVal::NumV(f64::NAN)).is_err());
        assert!(scheme_to_json(&SteelVal::NumV(f64::INFINITY)).is_err());
    }

    #[test]
    fn object_keys_are_strings_and_results_are_sorted() {
        let v = json_to_scheme(&json!({"b": 1, "a": [true, null]}), ParamType::Object).unwrap();
        let SteelVal::HashMapV(map) = &v else { panic!("not a map") };
        assert!(map.keys().all(|k| matches!(k, SteelVal::StringV(_))));
        assert_eq!(scheme_to_json(&v).unwrap().to_string(), r#"{"a":[true,null],"b":1}"#);
    }

    #[test]
    fn typed_empty_values_match_the_design_table() {
        assert_eq!(scheme_to_json(&empty_value(ParamType::String)).unwrap(), json!(""));
        assert_eq!(scheme_to_json(&empty_value(ParamType::Integer)).unwrap(), json!(0));
        assert_eq!(scheme_to_json(&empty_value(ParamType::Boolean)).unwrap(), json!(false));
        assert_eq!(scheme_to_json(&empty_value(ParamType::List)).unwrap(), json!([]));
        assert_eq!(scheme_to_json(&empty_value(ParamType::Object)).unwrap(), json!({}));
        assert_eq!(scheme_to_json(&empty_value(ParamType::Any)).unwrap(), json!(null));
    }

    #[test]
    fn wrong_types_describe_what_came() {
        assert_eq!(json_to_scheme(&json!("abc"), ParamType::Integer), Err(Mismatch::WrongType("\"abc\"".into())));
        assert!(json_to_scheme(&json!(u64::MAX), ParamType::Integer).is_err());
        assert!(check_scheme(&SteelVal::NumV(1.5), ParamType::Integer).is_err());
        assert!(matches!(check_scheme(&SteelVal::NumV(3.0), ParamType::Integer), Ok(SteelVal::IntV(3))));
    }

    #[test]
    fn deep_nesting_is_an_error_both_ways() {
        let mut deep = SteelVal::ListV(std::iter::empty::<SteelVal>().collect());
        for _ in 0..(MAX_DEPTH + 5) {
            deep = SteelVal::ListV(vec![deep].into_iter().collect());
        }
        assert!(scheme_to_json(&deep).is_err());
        let mut json = json!([]);
        for _ in 0..(MAX_DEPTH + 5) {
            json = json!([json]);
        }
        assert_eq!(json_to_scheme(&json, ParamType::List), Err(Mismatch::TooDeep));
    }
}
