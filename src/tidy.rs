//! Tidying what a model sent before anything else sees it (design section 4): arguments wrapped in
//! a JSON string, list/object values sent as JSON text, numbers and booleans sent as strings. Each
//! change leaves a note. Anything that is not exactly such JSON is left for conversion to refuse.
//! Also the strict-provider null drop (section 6), which runs before tidying.

use serde_json::{Map, Value};

use crate::param::{ParamType, Signature};

/// Drops top-level null arguments, as a strict provider's model sends them for optional parameters
/// it means to leave out. Nested nulls are data and stay.
pub fn drop_top_level_nulls(arguments: &mut Value) {
    if let Value::Object(map) = arguments {
        map.retain(|_, v| !v.is_null());
    }
}

/// Whether a top-level argument is null (what [`drop_top_level_nulls`] drops).
pub fn has_top_level_nulls(arguments: &Value) -> bool {
    matches!(arguments, Value::Object(map) if map.values().any(Value::is_null))
}

/// Whether [`tidy`] could change `arguments`: they are a JSON string, or a parameter that is not
/// a string is given one. The call path copies the arguments only then.
pub fn needs_tidy(signature: &Signature, arguments: &Value) -> bool {
    // Tidying reads a string given to a list, object, number or boolean parameter, or to the
    // variadic one; strings under other keys stay as they are.
    let reads_strings = |name: &str| match signature.params.iter().find(|p| p.name == name) {
        Some(param) => !matches!(param.ty, ParamType::String | ParamType::Any),
        None => signature.rest.as_ref().is_some_and(|rest| rest.name == name),
    };
    match arguments {
        Value::String(_) => true,
        Value::Object(map) => map.iter().any(|(name, value)| value.is_string() && reads_strings(name)),
        _ => false,
    }
}

/// Tidies `arguments` for the tool with `signature`, returning a note for each change.
///
/// ```
/// use serde_json::json;
/// use toolhost::{tidy::tidy, Param, ParamType, Signature};
/// let sig = Signature::new("fs-read", vec![
///     Param::required("path", ParamType::String, ""),
///     Param::optional("count", ParamType::Integer, ""),
/// ]);
/// let mut args = json!("{\"path\":\"a.txt\",\"count\":\"2\"}");
/// let notes = tidy(&sig, &mut args);
/// assert_eq!(args, json!({"path": "a.txt", "count": 2}));
/// assert_eq!(notes.len(), 2);
/// ```
pub fn tidy(signature: &Signature, arguments: &mut Value) -> Vec<String> {
    let tool = &signature.name;
    let mut notes = Vec::new();
    if let Value::String(text) = arguments {
        if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
            *arguments = Value::Object(object);
            notes.push(format!("{tool}: the arguments were a JSON string holding an object; read as that object"));
        }
    }
    let Value::Object(map) = arguments else { return notes };
    tidy_object(signature, map, &mut notes);
    notes
}

fn is_whole(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn tidy_object(signature: &Signature, map: &mut Map<String, Value>, notes: &mut Vec<String>) {
    let tool = &signature.name;
    let params = signature.params.iter().map(|p| (p, p.ty)).chain(signature.rest.iter().map(|p| (p, ParamType::List)));
    for (param, ty) in params {
        let Some(Value::String(text)) = map.get(&param.name) else { continue };
        let replacement = match ty {
            ParamType::List | ParamType::Object => match serde_json::from_str::<Value>(text) {
                Ok(v @ Value::Array(_)) if ty == ParamType::List => Some((v, "a JSON string holding a list")),
                Ok(v @ Value::Object(_)) if ty == ParamType::Object => Some((v, "a JSON string holding an object")),
                _ => None,
            },
            ParamType::Integer | ParamType::Number => {
                let exact = !text.is_empty() && text.trim() == text;
                match serde_json::from_str::<Value>(text) {
                    // An integer parameter takes only whole numbers: "2.5" stays a string and is
                    // refused as it came, rather than noted as read and then refused.
                    Ok(Value::Number(n)) if exact && (ty == ParamType::Number || is_whole(&n)) => {
                        Some((Value::Number(n), "a number written as a string"))
                    }
                    _ => None,
                }
            }
            ParamType::Boolean => match text.as_str() {
                "true" => Some((Value::Bool(true), "a boolean written as a string")),
                "false" => Some((Value::Bool(false), "a boolean written as a string")),
                _ => None,
            },
            ParamType::String | ParamType::Any => None,
        };
        if let Some((value, what)) = replacement {
            notes.push(format!(
                "{tool}: argument \"{}\" was {what}; read as {}",
                param.name,
                crate::value::describe_json(&value)
            ));
            map.insert(param.name.clone(), value);
        }
    }
}
