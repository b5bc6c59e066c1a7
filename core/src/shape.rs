//! Shape-pass helpers shared by the profile and capability codecs (and the capability bindings
//! and snapshots): checks over a raw JSON object that report field errors worded
//! `<What> <key> …`, where `<What>` is the resource noun (`Profile`, `Capability`).

use serde_json::{Map, Value};

use crate::diag::{field_error, Diagnostic};
use crate::json::type_name;

/// Reports keys of `map` outside `allowed` as `Unsupported <what> field: <prefix><key>`.
pub(crate) fn unsupported_keys(
    map: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
    prefix: &str,
    d: &mut Vec<Diagnostic>,
) {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let field = format!("{prefix}{key}");
            d.push(field_error(
                &field,
                format!("Unsupported {what} field: {field}"),
            ));
        }
    }
}

/// The fixed header of a definition file: `schemaVersion` must equal `version` (any JSON number
/// of that value) and `type` must be `type_tag`.
pub(crate) fn check_header(
    map: &Map<String, Value>,
    what: &str,
    version: u64,
    type_tag: &str,
    d: &mut Vec<Diagnostic>,
) {
    if map.get("schemaVersion").and_then(Value::as_f64) != Some(version as f64) {
        d.push(field_error(
            "schemaVersion",
            format!("{what} schemaVersion must be {version}."),
        ));
    }
    if map.get("type").and_then(Value::as_str) != Some(type_tag) {
        d.push(field_error(
            "type",
            format!("{what} type must be \"{type_tag}\"."),
        ));
    }
}

/// The `id` string as written; `None`, with an error, when it is missing or not a string (the
/// caller then falls back to the file's id).
pub(crate) fn required_id<'a>(
    map: &'a Map<String, Value>,
    what: &str,
    d: &mut Vec<Diagnostic>,
) -> Option<&'a str> {
    match map.get("id") {
        Some(Value::String(s)) => Some(s),
        other => {
            let message = match other {
                None => format!("{what} id is required."),
                Some(v) => format!("{what} id must be a string, got {}.", type_name(v)),
            };
            d.push(field_error("id", message));
            None
        }
    }
}

/// An optional string member: `None` when absent, and `None` with an error when it is not a
/// string.
pub(crate) fn optional_string(
    map: &Map<String, Value>,
    what: &str,
    key: &str,
    d: &mut Vec<Diagnostic>,
) -> Option<String> {
    match map.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            d.push(field_error(
                key,
                format!("{what} {key} must be a string, got {}.", type_name(v)),
            ));
            None
        }
    }
}
