//! Tool and skill policies (`tools` / `skills` on a stack): shape, normalization, matching.
//!
//! A policy is `{allow?, deny?, initial?}`:
//! - `allow`/`deny` hold trimmed, non-empty patterns; a list that ends up empty is absent. When both
//!   are non-empty the stack gets an error and only `allow` is kept.
//! - `*` alone matches every name, a pattern without `*` matches exactly, any other pattern is an
//!   anchored glob where `*` stands for any run of characters (except line terminators, as the
//!   original's `.*` did) and everything else is literal.
//! - `initial` (0.5.5) is the default active set: concrete names, no wildcards. It is not a ceiling;
//!   names that the `allow`/`deny` ceiling excludes are validation errors.
//!
//! Decisions where the spec is silent (documented here so the compiler agrees):
//! - `initial` is accepted on both `tools` and `skills` and validated the same way; only `tools`
//!   gives it a runtime meaning today.
//! - `initial` entries are not trimmed: an entry must already be a valid name (1–128 UTF-16 units,
//!   no white space, no control characters, no `*` or `?`). Invalid entries are dropped from the
//!   normalized list, each with an error. A repeated entry is dropped with a warning.
//! - An `initial` that is not an array is dropped with an error; `[]` is kept (zero tools).

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::id::{is_valid_tool_name, MAX_TOOL_NAME_LENGTH};
use crate::js::js_trim;

/// A normalized `tools` or `skills` policy.
///
/// An empty `allow` or `deny` list means the key is absent; `initial: None` means the key is absent
/// and `Some(vec![])` means "start with nothing".
///
/// `initial` rules (0.5.5, capabilities spec B9; the wording is ours):
/// - not an array → error `<l>.initial must be an array of strings when provided.`, key dropped;
/// - entries are not trimmed; a non-string or empty entry, a wildcard (`*`, `?`) or an invalid name
///   (over 128 UTF-16 units, white space, control characters) is dropped with an error;
/// - a repeated entry is dropped with the warning `Duplicate <l>.initial entry: <n>.`;
/// - a name the `allow`/`deny` ceiling excludes stays in the list but is an error:
///   `<l>.initial entry <n> is excluded by the <l> policy.`
/// - the same rules apply to `skills.initial`, which has no runtime effect yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub initial: Option<Vec<String>>,
}

impl Policy {
    /// `allow` holds a pattern other than `*`.
    pub fn has_effective_allow(&self) -> bool {
        self.allow.iter().any(|p| p != "*")
    }

    /// The policy changes anything: an effective `allow`, or a non-empty `deny`.
    pub fn is_effective(&self) -> bool {
        self.has_effective_allow() || !self.deny.is_empty()
    }

    /// A non-empty `allow` without the `*` pattern: the host picks from the whole registered
    /// catalog instead of the active baseline.
    pub fn is_selective_allow(&self) -> bool {
        !self.allow.is_empty() && !self.allow.iter().any(|p| p == "*")
    }

    /// Whether the ceiling lets `name` through (always true for an ineffective policy).
    pub fn permits(&self, name: &str) -> bool {
        if !self.is_effective() {
            true
        } else if self.has_effective_allow() {
            matches_any(&self.allow, name)
        } else {
            !matches_any(&self.deny, name)
        }
    }

    /// Filters `names` in order: unchanged when ineffective; with an effective `allow` keep the
    /// names that match; otherwise drop the names `deny` matches.
    pub fn apply<'a>(&self, names: &[&'a str]) -> Vec<&'a str> {
        names
            .iter()
            .copied()
            .filter(|name| self.permits(name))
            .collect()
    }

    /// The normalized object: `allow`, `deny`, `initial` in that order, absent lists omitted.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        if !self.allow.is_empty() {
            map.insert("allow".into(), strings(&self.allow));
        }
        if !self.deny.is_empty() {
            map.insert("deny".into(), strings(&self.deny));
        }
        if let Some(initial) = &self.initial {
            map.insert("initial".into(), strings(initial));
        }
        Value::Object(map)
    }
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::String).collect())
}

/// True when any of `patterns` matches `name`.
pub fn matches_any(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| pattern_matches(p, name))
}

/// Policy pattern matching: `*` alone matches everything, a pattern without `*` must be equal, any
/// other pattern is an anchored glob (`*` = any run of characters other than line terminators).
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if !pattern.contains('*') {
        return pattern == name;
    }
    glob_matches(pattern, name)
}

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Dynamic programming over (pattern position, text position); patterns and names are short.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // row[j]: pattern prefix p[..i] matches text prefix t[..j].
    let mut row = vec![false; t.len() + 1];
    row[0] = true;
    for &pc in &p {
        let mut next = vec![false; t.len() + 1];
        if pc == '*' {
            for j in 0..=t.len() {
                next[j] = row[j] || (j > 0 && next[j - 1] && !is_line_terminator(t[j - 1]));
            }
        } else {
            for j in 1..=t.len() {
                next[j] = row[j - 1] && t[j - 1] == pc;
            }
        }
        row = next;
    }
    row[t.len()]
}

/// Normalizes `tools`/`skills` (`label`), pushing shape errors.
pub(crate) fn normalize_policy(
    value: Option<&Value>,
    label: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Policy> {
    let value = value?;
    let Some(obj) = value.as_object() else {
        diagnostics.push(Diagnostic::error(format!(
            "{label} policy must be an object when provided."
        )));
        return None;
    };
    let allow = normalize_patterns(obj.get("allow"), &format!("{label}.allow"), diagnostics);
    let deny = normalize_patterns(obj.get("deny"), &format!("{label}.deny"), diagnostics);
    let initial = normalize_initial(obj.get("initial"), label, diagnostics);
    let deny = if !allow.is_empty() && !deny.is_empty() {
        diagnostics.push(both_lists_error(label));
        Vec::new()
    } else {
        deny
    };
    Some(Policy {
        allow,
        deny,
        initial,
    })
}

fn both_lists_error(label: &str) -> Diagnostic {
    Diagnostic::error(format!(
        "{label} policy must use either allow or deny, not both."
    ))
}

fn normalize_patterns(
    value: Option<&Value>,
    label: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let Some(value) = value else {
        return Vec::new();
    };
    let Some(items) = value.as_array() else {
        diagnostics.push(Diagnostic::error(format!(
            "{label} must be an array of strings when provided."
        )));
        return Vec::new();
    };
    let mut patterns = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match item.as_str().map(js_trim) {
            Some(pattern) if !pattern.is_empty() => patterns.push(pattern.to_string()),
            _ => diagnostics.push(Diagnostic::error(format!(
                "{label}[{index}] must be a non-empty string."
            ))),
        }
    }
    patterns
}

fn normalize_initial(
    value: Option<&Value>,
    label: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let value = value?;
    let Some(items) = value.as_array() else {
        diagnostics.push(Diagnostic::error(format!(
            "{label}.initial must be an array of strings when provided."
        )));
        return None;
    };
    let mut names: Vec<String> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let name = match item.as_str() {
            Some(name) if !name.is_empty() => name,
            _ => {
                diagnostics.push(Diagnostic::error(format!(
                    "{label}.initial[{index}] must be a non-empty string."
                )));
                continue;
            }
        };
        if name.contains(['*', '?']) {
            diagnostics.push(Diagnostic::error(format!(
                "{label}.initial[{index}] must be a concrete name without wildcards: {name}."
            )));
        } else if !is_valid_tool_name(name) {
            diagnostics.push(Diagnostic::error(format!(
                "{label}.initial[{index}] is not a valid name (1-{MAX_TOOL_NAME_LENGTH} characters, no white space or control characters): {name}."
            )));
        } else if names.iter().any(|n| n == name) {
            diagnostics.push(Diagnostic::warning(format!(
                "Duplicate {label}.initial entry: {name}."
            )));
        } else {
            names.push(name.to_string());
        }
    }
    Some(names)
}

/// Semantic checks of a normalized policy: both lists, repeated patterns, `initial` entries the
/// ceiling excludes.
pub(crate) fn validate_policy(
    policy: Option<&Policy>,
    label: &str,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(policy) = policy else {
        return;
    };
    if !policy.allow.is_empty() && !policy.deny.is_empty() {
        diagnostics.push(both_lists_error(label));
    }
    for (key, list) in [("allow", &policy.allow), ("deny", &policy.deny)] {
        let mut seen: Vec<&str> = Vec::new();
        for pattern in list {
            if seen.contains(&pattern.as_str()) {
                diagnostics.push(Diagnostic::warning(format!(
                    "Duplicate {label}.{key} pattern: {pattern}."
                )));
            }
            seen.push(pattern);
        }
    }
    if let Some(initial) = &policy.initial {
        for name in initial {
            if !policy.permits(name) {
                diagnostics.push(Diagnostic::error(format!(
                    "{label}.initial entry {name} is excluded by the {label} policy."
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_edge_cases() {
        assert!(pattern_matches("a*b", "ab"));
        assert!(pattern_matches("a*b", "axxb"));
        assert!(!pattern_matches("a*b", "a\nb"));
        assert!(pattern_matches("*", "a\nb"));
        assert!(pattern_matches("**", "anything"));
        assert!(pattern_matches("a.*", "a.b"));
        assert!(!pattern_matches("a.*", "ab"));
        assert!(pattern_matches("*-x-*", "a-x-b"));
        assert!(!pattern_matches("b*", "ab"));
        assert!(pattern_matches("é*😀", "é..😀"));
    }
}
