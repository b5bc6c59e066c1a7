//! JSON text exactly as JavaScript writes it.
//!
//! pi-forge files are written by `JSON.stringify(value, null, 2) + "\n"` in the original tool, and
//! fingerprints hash a canonical form whose numbers and escapes follow ECMAScript. serde_json's
//! writer differs in number formatting (`1.0` vs `1`, `1e21` vs `1e+21`), so this module has its own
//! small emitter with three layouts: compact in insertion order (`JSON.stringify(v)`), pretty
//! (`JSON.stringify(v, null, 2)` plus a newline) and canonical (compact, keys in UTF-16 order).
//!
//! Parsing goes through serde_json with `preserve_order`, so key order survives and duplicate keys
//! resolve last-wins at the first key's position, as `JSON.parse` does.

use serde_json::{Map, Value};
use std::fmt::Write as _;

/// Why bytes could not be turned into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("file is not valid UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("{0}")]
    Syntax(String),
}

/// Why a value cannot be written as JSON text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error("Cannot canonicalize a non-finite number ({0}).")]
    NonFinite(String),
}

/// Decodes UTF-8 (a leading byte-order mark is ignored) and parses JSON.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    parse_str(text)
}

/// Parses JSON text (a leading byte-order mark is ignored).
pub fn parse_str(text: &str) -> Result<Value, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|e| ParseError::Syntax(e.to_string()))
}

/// Length in UTF-16 code units, the unit JavaScript's `String.length` counts.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// ECMAScript `Number.prototype.toString` for a finite number (`-0` → `0`).
pub fn format_number(n: f64) -> Result<String, EmitError> {
    if !n.is_finite() {
        return Err(EmitError::NonFinite(format!("{n}")));
    }
    if n == 0.0 {
        return Ok("0".to_string());
    }
    let mut buffer = ryu_js::Buffer::new();
    Ok(buffer.format_finite(n).to_string())
}

fn number_text(n: &serde_json::Number) -> String {
    // Every JSON number is an IEEE double in JavaScript; serde_json only produces finite ones.
    let f = n.as_f64().unwrap_or(0.0);
    format_number(f).unwrap_or_else(|_| "null".to_string())
}

/// Appends `text` as a JSON string literal with `JSON.stringify` escaping.
pub fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Compares two strings by UTF-16 code units (JavaScript's default sort order).
pub fn cmp_utf16(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[derive(Clone, Copy)]
enum Layout {
    Compact,
    Pretty,
    Canonical,
}

fn emit(out: &mut String, value: &Value, layout: Layout, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, layout, depth + 1);
                emit(out, item, layout, depth + 1);
            }
            newline(out, layout, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if matches!(layout, Layout::Canonical) {
                entries.sort_by(|a, b| cmp_utf16(a.0, b.0));
            }
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, layout, depth + 1);
                write_string(out, key);
                out.push(':');
                if matches!(layout, Layout::Pretty) {
                    out.push(' ');
                }
                emit(out, item, layout, depth + 1);
            }
            newline(out, layout, depth);
            out.push('}');
        }
    }
}

fn newline(out: &mut String, layout: Layout, depth: usize) {
    if matches!(layout, Layout::Pretty) {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }
}

/// `JSON.stringify(value)`: compact, keys in insertion order.
pub fn to_compact(value: &Value) -> String {
    let mut out = String::new();
    emit(&mut out, value, Layout::Compact, 0);
    out
}

/// `JSON.stringify(value, null, 2) + "\n"`: the on-disk format of every pi-forge resource.
pub fn to_pretty(value: &Value) -> String {
    let mut out = String::new();
    emit(&mut out, value, Layout::Pretty, 0);
    out.push('\n');
    out
}

/// Compact JSON with object keys sorted by UTF-16 code units at every level.
pub fn to_canonical(value: &Value) -> String {
    let mut out = String::new();
    emit(&mut out, value, Layout::Canonical, 0);
    out
}

/// A JSON type name as JavaScript users would say it, for error messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Builds an object from `(key, value)` pairs, skipping `None` values (JS `undefined`).
pub fn object<I, K>(entries: I) -> Value
where
    I: IntoIterator<Item = (K, Option<Value>)>,
    K: Into<String>,
{
    let mut map = Map::new();
    for (key, value) in entries {
        if let Some(value) = value {
            map.insert(key.into(), value);
        }
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_follow_ecmascript() {
        let cases = [
            (1e21, "1e+21"),
            (0.1, "0.1"),
            (-0.0, "0"),
            (1.5e-7, "1.5e-7"),
            (100.0, "100"),
            (9007199254740992.0, "9007199254740992"),
            (1.0, "1"),
            (123456789012345680000.0, "123456789012345680000"),
            (0.000001, "0.000001"),
            (-2.5, "-2.5"),
        ];
        for (n, text) in cases {
            assert_eq!(format_number(n).unwrap(), text, "{n}");
        }
        assert_eq!(
            format_number(f64::NAN).unwrap_err().to_string(),
            "Cannot canonicalize a non-finite number (NaN)."
        );
        assert!(format_number(f64::INFINITY).is_err());
    }

    #[test]
    fn pretty_matches_json_stringify_with_two_spaces() {
        let v = json!({"b": [1, 2.0, {}], "a": {"x": []}, "s": "q\"\u{1}\u{7f}"});
        assert_eq!(
            to_pretty(&v),
            "{\n  \"b\": [\n    1,\n    2,\n    {}\n  ],\n  \"a\": {\n    \"x\": []\n  },\n  \"s\": \"q\\\"\\u0001\u{7f}\"\n}\n"
        );
        assert_eq!(
            to_compact(&v),
            "{\"b\":[1,2,{}],\"a\":{\"x\":[]},\"s\":\"q\\\"\\u0001\u{7f}\"}"
        );
    }

    #[test]
    fn parse_reports_utf8_offset_and_keeps_last_duplicate() {
        assert_eq!(
            parse_bytes(b"{\"a\":\"\xff\"}").unwrap_err(),
            ParseError::NotUtf8 { offset: 6 }
        );
        let v = parse_str("{\"a\":1,\"b\":2,\"a\":3}").unwrap();
        assert_eq!(to_compact(&v), "{\"a\":3,\"b\":2}");
        assert_eq!(parse_str("\u{feff}{}").unwrap(), json!({}));
        assert!(matches!(parse_str("{not json"), Err(ParseError::Syntax(_))));
    }

    #[test]
    fn utf16_lengths() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("😀"), 2);
    }
}
