//! Small JavaScript semantics the codecs have to reproduce: `String.prototype.trim`,
//! `String(value)` coercion, truthiness and the integer predicates used by the validators.
//!
//! One definition for the whole crate: the stack, profile and capability codecs all trim and test
//! white space the way the original (JavaScript) tool does.

use serde_json::Value;

use crate::json::format_number;

/// True for the characters ECMAScript's `\s` and `String.prototype.trim` treat as white space
/// (WhiteSpace plus LineTerminator). Unlike Rust's `char::is_whitespace` this includes U+FEFF and
/// excludes U+0085.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_whitespace)
}

/// `String(value)` for a JSON value: arrays join their elements with `,` (null becomes empty),
/// objects become `[object Object]`, numbers use ECMAScript formatting.
pub(crate) fn js_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_string(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_string(),
    }
}

/// ECMAScript `String(n)` for a JSON number (serde_json numbers are always finite).
pub(crate) fn number_string(n: &serde_json::Number) -> String {
    format_number(n.as_f64().unwrap_or(0.0)).unwrap_or_else(|_| "0".to_string())
}

/// `typeof v === "number" && Number.isInteger(v)`, returning the number.
fn integer(value: &Value) -> Option<f64> {
    let f = value.as_f64()?;
    (f.is_finite() && f.fract() == 0.0).then_some(f)
}

/// `Number.isInteger(v) && v > 0`.
pub(crate) fn is_positive_integer(value: &Value) -> bool {
    integer(value).is_some_and(|f| f > 0.0)
}

/// `Number.isInteger(v) && v >= 0`.
pub(crate) fn is_non_negative_integer(value: &Value) -> bool {
    integer(value).is_some_and(|f| f >= 0.0)
}

/// The integer value when [`is_non_negative_integer`] holds.
pub(crate) fn non_negative_integer(value: &Value) -> Option<f64> {
    integer(value).filter(|f| *f >= 0.0)
}

/// `Array.isArray(v) && v.every(x => typeof x === "string")`.
pub(crate) fn is_string_array(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(Value::is_string))
}

/// Strict equality of a JSON value with a number (`v === n`); `2.0` equals `2`.
pub(crate) fn is_number(value: &Value, n: f64) -> bool {
    value.as_f64().is_some_and(|f| f == n)
}

/// `/\{\{\s*match\s*\}\}/i.test(text)`.
pub(crate) fn contains_match_placeholder(text: &str) -> bool {
    let mut rest = text;
    while let Some(pos) = rest.find("{{") {
        let after = &rest[pos + 2..];
        let body = after.trim_start_matches(is_js_whitespace);
        if body.len() >= 5 && body.is_char_boundary(5) && body[..5].eq_ignore_ascii_case("match") {
            let tail = body[5..].trim_start_matches(is_js_whitespace);
            if tail.starts_with("}}") {
                return true;
            }
        }
        rest = &rest[pos + 1..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn js_whitespace_set() {
        assert!(is_js_whitespace('\u{feff}'));
        assert!(is_js_whitespace('\u{a0}'));
        assert!(is_js_whitespace('\u{2028}'));
        assert!(!is_js_whitespace('\u{85}'));
        assert_eq!(js_trim("\u{feff} a \u{85}"), "a \u{85}");
        // The same set as Unicode White_Space without U+0085, plus U+FEFF.
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let expected = c == '\u{feff}' || (c != '\u{85}' && c.is_whitespace());
            assert_eq!(is_js_whitespace(c), expected, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn trim_follows_ecmascript() {
        assert_eq!(js_trim("\u{feff} a \u{3000}"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
        assert_eq!(js_trim("  "), "");
    }

    #[test]
    fn string_coercion() {
        assert_eq!(js_string(&json!(null)), "null");
        assert_eq!(js_string(&json!(5.0)), "5");
        assert_eq!(js_string(&json!(1e21)), "1e+21");
        assert_eq!(
            js_string(&json!([1, [2, null], {}])),
            "1,2,,[object Object]"
        );
        assert_eq!(js_string(&json!({"a": 1})), "[object Object]");
        assert_eq!(js_string(&json!(true)), "true");
    }

    #[test]
    fn integers() {
        assert!(is_positive_integer(&json!(2.0)));
        assert!(!is_positive_integer(&json!(0)));
        assert!(!is_positive_integer(&json!(1.5)));
        assert!(!is_positive_integer(&json!("1")));
        assert!(is_non_negative_integer(&json!(0)));
        assert!(!is_non_negative_integer(&json!(-1)));
    }

    #[test]
    fn match_placeholder() {
        assert!(contains_match_placeholder("{{match}} $0"));
        assert!(contains_match_placeholder("x {{ MATCH\t}}"));
        assert!(contains_match_placeholder("{{{match}}"));
        assert!(!contains_match_placeholder("{{ matches }}"));
        assert!(!contains_match_placeholder("{ {match}}"));
        assert!(!contains_match_placeholder("{{ é }}"));
    }
}
