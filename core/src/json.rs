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
    /// serde_json's message, and where it stopped (1-based line and column).
    #[error("{message}")]
    Syntax {
        message: String,
        line: usize,
        column: usize,
    },
}

impl ParseError {
    fn syntax(error: &serde_json::Error) -> ParseError {
        ParseError::Syntax {
            message: error.to_string(),
            line: error.line(),
            column: error.column(),
        }
    }

    /// Where the text stopped parsing, when it has a place: `(line, column)`, both 1-based.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            ParseError::Syntax { line, column, .. } if *line > 0 => Some((*line, *column)),
            _ => None,
        }
    }
}

/// Why a value cannot be written as JSON text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error("Cannot canonicalize a non-finite number ({0}).")]
    NonFinite(String),
}

/// Decodes UTF-8 (a leading byte-order mark is ignored) and parses JSON.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value, ParseError> {
    parse_str(decode(bytes)?)
}

/// Parses JSON text (a leading byte-order mark is ignored).
pub fn parse_str(text: &str) -> Result<Value, ParseError> {
    serde_json::from_str(without_bom(text)).map_err(|e| ParseError::syntax(&e))
}

fn decode(bytes: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(bytes).map_err(|e| ParseError::NotUtf8 {
        offset: e.valid_up_to(),
    })
}

fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// A number in the text that a double cannot hold (`1e400`): `JSON.parse` reads it as
/// `±Infinity`, serde_json refuses the whole document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonFinite {
    /// Where it is, as a JSON pointer (`/parameters/limit`, `/items/0/id`).
    pub pointer: String,
    /// The number as written.
    pub text: String,
}

/// A document read by [`parse_bytes_lenient`]: the value, with `null` wherever the text has a
/// number out of the double range (what `JSON.stringify` writes for `Infinity`), and the list of
/// those places, so a validator can report them field by field.
#[derive(Debug, Clone, PartialEq)]
pub struct Lenient {
    pub value: Value,
    pub non_finite: Vec<NonFinite>,
}

impl Lenient {
    /// True when a non-finite number sits at `pointer` or below it.
    pub fn non_finite_under(&self, pointer: &str) -> bool {
        self.non_finite.iter().any(|n| {
            n.pointer
                .strip_prefix(pointer)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// [`parse_bytes`], except that numbers too large for a double do not fail the document (see
/// [`Lenient`]). Every other error is the one [`parse_bytes`] reports.
pub fn parse_bytes_lenient(bytes: &[u8]) -> Result<Lenient, ParseError> {
    parse_str_lenient(decode(bytes)?)
}

/// [`parse_str`] with the leniency of [`parse_bytes_lenient`].
pub fn parse_str_lenient(text: &str) -> Result<Lenient, ParseError> {
    let text = without_bom(text);
    match serde_json::from_str(text) {
        Ok(value) => Ok(Lenient {
            value,
            non_finite: Vec::new(),
        }),
        Err(error) => {
            let strict = ParseError::syntax(&error);
            if !error.to_string().starts_with("number out of range") {
                return Err(strict);
            }
            lenient::read(text).ok_or(strict)
        }
    }
}

/// A small JSON reader used only when serde_json refused a number: strings and in-range numbers
/// are still decoded by serde_json, so both readers agree on everything else.
mod lenient {
    use super::{Lenient, NonFinite};
    use serde_json::{Map, Value};

    /// serde_json's default nesting limit.
    const MAX_DEPTH: usize = 128;

    struct Reader<'a> {
        text: &'a str,
        at: usize,
        path: Vec<String>,
        non_finite: Vec<NonFinite>,
    }

    pub(super) fn read(text: &str) -> Option<Lenient> {
        let mut reader = Reader {
            text,
            at: 0,
            path: Vec::new(),
            non_finite: Vec::new(),
        };
        let value = reader.value(0)?;
        reader.skip_space();
        (reader.at == text.len()).then_some(Lenient {
            value,
            non_finite: reader.non_finite,
        })
    }

    impl Reader<'_> {
        fn peek(&self) -> Option<u8> {
            self.text.as_bytes().get(self.at).copied()
        }

        fn skip_space(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.at += 1;
            }
        }

        fn eat(&mut self, byte: u8) -> bool {
            self.skip_space();
            let found = self.peek() == Some(byte);
            if found {
                self.at += 1;
            }
            found
        }

        fn value(&mut self, depth: usize) -> Option<Value> {
            if depth > MAX_DEPTH {
                return None;
            }
            self.skip_space();
            match self.peek()? {
                b'{' => self.object(depth),
                b'[' => self.array(depth),
                b'"' => self.string().map(Value::String),
                b'-' | b'0'..=b'9' => self.number(),
                _ => self.literal(),
            }
        }

        fn object(&mut self, depth: usize) -> Option<Value> {
            self.at += 1;
            let mut map = Map::new();
            if self.eat(b'}') {
                return Some(Value::Object(map));
            }
            loop {
                self.skip_space();
                let key = self.string()?;
                if !self.eat(b':') {
                    return None;
                }
                self.path.push(key.replace('~', "~0").replace('/', "~1"));
                let value = self.value(depth + 1)?;
                self.path.pop();
                // As serde_json with `preserve_order`: a repeated key keeps its first position.
                map.insert(key, value);
                if self.eat(b'}') {
                    return Some(Value::Object(map));
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }

        fn array(&mut self, depth: usize) -> Option<Value> {
            self.at += 1;
            let mut items = Vec::new();
            if self.eat(b']') {
                return Some(Value::Array(items));
            }
            loop {
                self.path.push(items.len().to_string());
                let value = self.value(depth + 1)?;
                self.path.pop();
                items.push(value);
                if self.eat(b']') {
                    return Some(Value::Array(items));
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }

        /// A string token, decoded by serde_json.
        fn string(&mut self) -> Option<String> {
            let bytes = self.text.as_bytes();
            if bytes.get(self.at) != Some(&b'"') {
                return None;
            }
            let start = self.at;
            let mut i = start + 1;
            loop {
                match bytes.get(i)? {
                    b'\\' => i += 2,
                    b'"' => break,
                    _ => i += 1,
                }
            }
            self.at = i + 1;
            serde_json::from_str(self.text.get(start..=i)?).ok()
        }

        /// A number token (JSON grammar), decoded by serde_json; one out of the double range
        /// becomes `null` and is recorded.
        fn number(&mut self) -> Option<Value> {
            let bytes = self.text.as_bytes();
            let start = self.at;
            let mut i = start;
            let digits = |i: &mut usize| {
                let from = *i;
                while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                    *i += 1;
                }
                *i > from
            };
            if bytes.get(i) == Some(&b'-') {
                i += 1;
            }
            if !digits(&mut i) {
                return None;
            }
            if bytes.get(i) == Some(&b'.') {
                i += 1;
                if !digits(&mut i) {
                    return None;
                }
            }
            if matches!(bytes.get(i), Some(b'e' | b'E')) {
                i += 1;
                if matches!(bytes.get(i), Some(b'+' | b'-')) {
                    i += 1;
                }
                if !digits(&mut i) {
                    return None;
                }
            }
            self.at = i;
            let token = self.text.get(start..i)?;
            if let Ok(value) = serde_json::from_str::<Value>(token) {
                return Some(value);
            }
            let parsed: f64 = token.parse().ok()?;
            if parsed.is_finite() {
                return None;
            }
            self.non_finite.push(NonFinite {
                pointer: self.path.iter().map(|s| format!("/{s}")).collect(),
                text: token.to_string(),
            });
            Some(Value::Null)
        }

        fn literal(&mut self) -> Option<Value> {
            for (word, value) in [
                ("true", Value::Bool(true)),
                ("false", Value::Bool(false)),
                ("null", Value::Null),
            ] {
                if self
                    .text
                    .get(self.at..)
                    .is_some_and(|rest| rest.starts_with(word))
                {
                    self.at += word.len();
                    return Some(value);
                }
            }
            None
        }
    }
}

/// Length in UTF-16 code units, the unit JavaScript's `String.length` counts.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// The byte offset of the first character boundary at or after `units` UTF-16 code units
/// (`text.len()` past the end).
pub fn utf16_to_byte(text: &str, units: usize) -> usize {
    let mut count = 0;
    for (index, c) in text.char_indices() {
        if count >= units {
            return index;
        }
        count += c.len_utf16();
    }
    text.len()
}

/// ECMAScript `Number.prototype.toString` for a finite number (`-0` → `0`).
pub fn format_number(n: f64) -> Result<String, EmitError> {
    if !n.is_finite() {
        return Err(EmitError::NonFinite(format!("{n}")));
    }
    Ok(number_text(n, &mut ryu_js::Buffer::new()).to_string())
}

/// A number as `JSON.stringify` writes it: every JSON number is an IEEE double in JavaScript
/// (`-0` → `0`, a non-finite one → `null`; serde_json only produces finite ones).
fn number_text(n: f64, buffer: &mut ryu_js::Buffer) -> &str {
    if !n.is_finite() {
        "null"
    } else if n == 0.0 {
        "0"
    } else {
        buffer.format_finite(n)
    }
}

/// Appends `text` as a JSON string literal with `JSON.stringify` escaping. Runs of characters
/// that need no escape are copied whole (a response is mostly such text).
pub fn write_string(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (at, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so `start..at` lies on character boundaries.
        out.push_str(&text[start..at]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = at + 1;
    }
    out.push_str(&text[start..]);
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
        Value::Number(n) => out.push_str(number_text(
            n.as_f64().unwrap_or(0.0),
            &mut ryu_js::Buffer::new(),
        )),
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

/// `JSON.stringify` of a serializable value, written as it is serialized (no [`Value`] tree in
/// between): the same text as [`to_compact`] of its `serde_json::to_value`.
pub fn to_compact_typed<T: serde::Serialize + ?Sized>(
    value: &T,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out, JsNumbers,
    ))?;
    // serde_json writes UTF-8 only.
    String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// serde_json's compact writer with JavaScript's number text ([`number_text`]). Its string
/// escaping is already `JSON.stringify`'s: the short escapes, `\u00xx` (lowercase) for the other
/// control characters, nothing else.
struct JsNumbers;

impl JsNumbers {
    fn number<W: ?Sized + std::io::Write>(w: &mut W, n: f64) -> std::io::Result<()> {
        w.write_all(number_text(n, &mut ryu_js::Buffer::new()).as_bytes())
    }
}

/// The formatter's methods for `$t`, each writing the number as a double.
macro_rules! js_number_methods {
    ($($method:ident: $t:ty),* $(,)?) => {$(
        fn $method<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: $t) -> std::io::Result<()> {
            // Every JSON number is a double in JavaScript (so a large integer rounds, as there).
            Self::number(w, v as f64)
        }
    )*};
}

impl serde_json::ser::Formatter for JsNumbers {
    js_number_methods!(
        write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64, write_i128: i128,
        write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64, write_u128: u128,
        write_f32: f32, write_f64: f64,
    );
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

    /// The typed writer and the `Value` writer give the same text, for every kind of number
    /// and string JavaScript writes differently from Rust's defaults.
    #[test]
    fn typed_compact_text_is_the_value_writers() {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Answer {
            ok: bool,
            whole: f64,
            negative_zero: f64,
            tiny: f64,
            huge: f64,
            sum: f64,
            big_unsigned: u64,
            small_signed: i32,
            nan: f64,
            nothing: Option<String>,
            text: String,
            nested: Value,
        }
        let text: String = (0u8..0x80)
            .map(char::from)
            .chain("é€😀\u{2028}".chars())
            .collect();
        let answer = Answer {
            ok: true,
            whole: 1.0,
            negative_zero: -0.0,
            tiny: 1e-7,
            huge: 1e21,
            sum: 0.1 + 0.2,
            big_unsigned: u64::MAX,
            small_signed: -42,
            nan: f64::NAN,
            nothing: None,
            text: text.clone(),
            nested: json!({"z": [1.5, -3, {"\n": "a\"b"}], "a": {}, "e": []}),
        };
        let typed = to_compact_typed(&answer).unwrap();
        let value = serde_json::to_value(&answer).unwrap();
        assert_eq!(typed, to_compact(&value));
        assert!(typed.starts_with(
            r#"{"ok":true,"whole":1,"negativeZero":0,"tiny":1e-7,"huge":1e+21,"sum":0.30000000000000004,"bigUnsigned":18446744073709552000,"smallSigned":-42,"nan":null,"nothing":null,"text":"\u0000\u0001"#
        ), "{typed}");
        // The escapes JSON.stringify uses (and serde_json, for strings, too).
        let mut written = String::new();
        write_string(&mut written, &text);
        assert_eq!(written, serde_json::to_string(&text).unwrap());
        assert!(written.contains(r#"\b\t\n\u000b\f\r\u000e"#), "{written}");
        assert!(written.ends_with("~\u{7f}é€😀\u{2028}\""), "{written}");
    }

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
        assert!(matches!(
            parse_str("{not json"),
            Err(ParseError::Syntax { .. })
        ));
    }

    #[test]
    fn lenient_reader_keeps_out_of_range_numbers_as_null_with_their_place() {
        let text =
            r#"{"a": [1, 1e400, {"b~/c": -2E+999}], "n": 18446744073709551616, "x": 0.5, "a": 7}"#;
        assert!(parse_str(text).is_err());
        let read = parse_str_lenient(text).unwrap();
        // A repeated key keeps its first position and the last value, as with serde_json.
        assert_eq!(
            to_compact(&read.value),
            r#"{"a":7,"n":18446744073709552000,"x":0.5}"#
        );
        assert_eq!(
            read.non_finite,
            vec![
                NonFinite {
                    pointer: "/a/1".into(),
                    text: "1e400".into()
                },
                NonFinite {
                    pointer: "/a/2/b~0~1c".into(),
                    text: "-2E+999".into()
                },
            ]
        );
        assert!(read.non_finite_under("/a"));
        assert!(read.non_finite_under("/a/2"));
        assert!(!read.non_finite_under("/a/0"));
        assert!(!read.non_finite_under("/n"));

        let nested =
            parse_str_lenient(r#"[{"k": "\u00e9\"", "v": [true, false, null, 1e999]}]"#).unwrap();
        assert_eq!(
            nested.value,
            json!([{"k": "é\"", "v": [true, false, null, null]}])
        );
        assert_eq!(nested.non_finite[0].pointer, "/0/v/3");
    }

    proptest::proptest! {
        /// Any text: the lenient reader never panics, agrees with the strict one whenever that
        /// one succeeds, and fails whenever it fails for another reason than a number's range.
        #[test]
        fn lenient_reader_agrees_with_serde_json(text in "[\\[\\]{}:,\" a-z0-9.eE+\\-\\\\]{0,40}") {
            let strict = parse_str(&text);
            let lenient = parse_str_lenient(&text);
            match strict {
                Ok(value) => proptest::prop_assert_eq!(lenient.map(|l| l.value), Ok(value)),
                Err(ParseError::Syntax { message: m, .. }) if !m.starts_with("number out of range") => {
                    proptest::prop_assert!(lenient.is_err())
                }
                Err(_) => {}
            }
        }
    }

    #[test]
    fn lenient_reader_reports_other_errors_like_the_strict_one() {
        let strict = parse_str("[1e400, tru]").unwrap_err();
        assert_eq!(parse_str_lenient("[1e400, tru]").unwrap_err(), strict);
        assert_eq!(
            parse_str_lenient("[1e400] x").unwrap_err(),
            parse_str("[1e400] x").unwrap_err()
        );
        assert!(matches!(
            parse_str_lenient("{not json"),
            Err(ParseError::Syntax { .. })
        ));
        let deep = format!("{}1e400{}", "[".repeat(200), "]".repeat(200));
        assert!(parse_str_lenient(&deep).is_err());
        assert_eq!(
            parse_bytes_lenient(b"\xef\xbb\xbf{\"a\":1}").unwrap().value,
            json!({"a": 1})
        );
    }

    #[test]
    fn utf16_lengths() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("😀"), 2);
    }
}
