//! Tidying what a model sent before anything else sees it (design section 4): arguments wrapped in
//! a JSON string, list/object values sent as JSON text, numbers and booleans sent as strings. Each
//! change leaves a note for people and a [`Repair`] of a stable [`RepairKind`] for programs (the call
//! record keeps both; `toolhost stats` counts the kinds). Anything that is not exactly such JSON is
//! left for conversion to refuse. Also the strict-provider null drop (section 6), which runs before
//! tidying and leaves a repair but no note.

use serde_json::{Map, Value};

use crate::param::{ParamType, Signature};

/// What kind of change tidying (or the strict null drop) made to a call's arguments. The
/// snake_case names are stable: call records in session logs carry them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RepairKind {
    /// The whole arguments value was a JSON string holding an object, and was read as the object.
    ArgumentsJsonString,
    /// A `list` or `object` parameter was given a JSON string holding a list or an object.
    JsonTextParameter,
    /// An `integer` or `number` parameter was given a string that is exactly a JSON number.
    NumericString,
    /// A `boolean` parameter was given `"true"` or `"false"`.
    BooleanString,
    /// A strict-mode provider's model sent null for a parameter, and the null was dropped.
    StrictNullDropped,
}

impl RepairKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [RepairKind; 5] = [
        RepairKind::ArgumentsJsonString,
        RepairKind::JsonTextParameter,
        RepairKind::NumericString,
        RepairKind::BooleanString,
        RepairKind::StrictNullDropped,
    ];

    /// The stable name, as call records write it.
    ///
    /// ```
    /// assert_eq!(toolhost::tidy::RepairKind::NumericString.as_str(), "numeric_string");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            RepairKind::ArgumentsJsonString => "arguments_json_string",
            RepairKind::JsonTextParameter => "json_text_parameter",
            RepairKind::NumericString => "numeric_string",
            RepairKind::BooleanString => "boolean_string",
            RepairKind::StrictNullDropped => "strict_null_dropped",
        }
    }
}

/// One change made to a call's arguments: its kind, and the parameter it concerned (none when the
/// whole arguments value was unwrapped).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Repair {
    /// What was changed.
    pub kind: RepairKind,
    /// The parameter whose value was changed or dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
}

impl Repair {
    fn new(kind: RepairKind, parameter: Option<&str>) -> Self {
        Repair { kind, parameter: parameter.map(str::to_string) }
    }
}

/// What [`tidy`] changed: one repair and one note for each change, in the same order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Each change as data.
    pub repairs: Vec<Repair>,
    /// Each change in words, for a person (`toolhost call` prints them).
    pub notes: Vec<String>,
}

impl Changes {
    /// Whether nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.repairs.is_empty()
    }

    fn push(&mut self, kind: RepairKind, parameter: Option<&str>, note: String) {
        self.repairs.push(Repair::new(kind, parameter));
        self.notes.push(note);
    }
}

/// Drops top-level null arguments, as a strict provider's model sends them for optional parameters
/// it means to leave out, and returns a [`RepairKind::StrictNullDropped`] repair for each. Nested
/// nulls are data and stay.
pub fn drop_top_level_nulls(arguments: &mut Value) -> Vec<Repair> {
    let mut dropped = Vec::new();
    if let Value::Object(map) = arguments {
        map.retain(|name, v| {
            if v.is_null() {
                dropped.push(Repair::new(RepairKind::StrictNullDropped, Some(name)));
            }
            !v.is_null()
        });
    }
    dropped
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

/// Tidies `arguments` for the tool with `signature`, returning a repair and a note for each change.
///
/// ```
/// use serde_json::json;
/// use toolhost::tidy::{tidy, RepairKind};
/// use toolhost::{Param, ParamType, Signature};
/// let sig = Signature::new("fs-read", vec![
///     Param::required("path", ParamType::String, ""),
///     Param::optional("count", ParamType::Integer, ""),
/// ]);
/// let mut args = json!("{\"path\":\"a.txt\",\"count\":\"2\"}");
/// let changes = tidy(&sig, &mut args);
/// assert_eq!(args, json!({"path": "a.txt", "count": 2}));
/// assert_eq!(changes.notes.len(), 2);
/// let kinds: Vec<RepairKind> = changes.repairs.iter().map(|r| r.kind).collect();
/// assert_eq!(kinds, [RepairKind::ArgumentsJsonString, RepairKind::NumericString]);
/// assert_eq!(changes.repairs[1].parameter.as_deref(), Some("count"));
/// ```
pub fn tidy(signature: &Signature, arguments: &mut Value) -> Changes {
    let tool = &signature.name;
    let mut changes = Changes::default();
    if let Value::String(text) = arguments {
        if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
            *arguments = Value::Object(object);
            changes.push(
                RepairKind::ArgumentsJsonString,
                None,
                format!("{tool}: the arguments were a JSON string holding an object; read as that object"),
            );
        }
    }
    let Value::Object(map) = arguments else { return changes };
    tidy_object(signature, map, &mut changes);
    changes
}

fn is_whole(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn tidy_object(signature: &Signature, map: &mut Map<String, Value>, changes: &mut Changes) {
    let tool = &signature.name;
    let params = signature.params.iter().map(|p| (p, p.ty)).chain(signature.rest.iter().map(|p| (p, ParamType::List)));
    for (param, ty) in params {
        let Some(Value::String(text)) = map.get(&param.name) else { continue };
        let replacement = match ty {
            ParamType::List | ParamType::Object => match serde_json::from_str::<Value>(text) {
                Ok(v @ Value::Array(_)) if ty == ParamType::List => {
                    Some((v, RepairKind::JsonTextParameter, "a JSON string holding a list"))
                }
                Ok(v @ Value::Object(_)) if ty == ParamType::Object => {
                    Some((v, RepairKind::JsonTextParameter, "a JSON string holding an object"))
                }
                _ => None,
            },
            ParamType::Integer | ParamType::Number => {
                let exact = !text.is_empty() && text.trim() == text;
                match serde_json::from_str::<Value>(text) {
                    // An integer parameter takes only whole numbers: "2.5" stays a string and is
                    // refused as it came, rather than noted as read and then refused.
                    Ok(Value::Number(n)) if exact && (ty == ParamType::Number || is_whole(&n)) => {
                        Some((Value::Number(n), RepairKind::NumericString, "a number written as a string"))
                    }
                    _ => None,
                }
            }
            ParamType::Boolean => match text.as_str() {
                "true" => Some((Value::Bool(true), RepairKind::BooleanString, "a boolean written as a string")),
                "false" => Some((Value::Bool(false), RepairKind::BooleanString, "a boolean written as a string")),
                _ => None,
            },
            ParamType::String | ParamType::Any => None,
        };
        if let Some((value, kind, what)) = replacement {
            let note = format!(
                "{tool}: argument \"{}\" was {what}; read as {}",
                param.name,
                crate::value::describe_json(&value)
            );
            changes.push(kind, Some(&param.name), note);
            map.insert(param.name.clone(), value);
        }
    }
}
