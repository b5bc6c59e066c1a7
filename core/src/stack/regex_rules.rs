//! Validation of a stack's `regex` config. Rules are validated but never normalized: the config
//! object passes through the codec unchanged and the compiler skips invalid rules at run time.
//!
//! Patterns are compiled with `regress`, an ECMAScript regex engine, under the rule's `i m s u`
//! flags (`g` only changes how the compiler iterates, so it is not passed on). A compile failure is
//! reported in V8's shape, `Invalid regular expression: /<pattern>/<flags>: <reason>`; the reason
//! text is regress's, which may be worded differently from V8's.
//!
//! `regex.schemaVersion` warns only when the key is present and not `1` (the original's behaviour,
//! despite the message's "Missing").

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::js::{
    contains_match_placeholder, is_non_negative_integer, is_number, is_positive_integer,
    is_string_array, js_trim, non_negative_integer,
};

/// Flags a rule may use.
pub const REGEX_FLAGS: &str = "gimsu";

/// Validates the `regex` value of a normalized stack (an object, or nothing).
pub(crate) fn validate_regex_config(config: &Map<String, Value>, out: &mut Vec<Diagnostic>) {
    if let Some(version) = config.get("schemaVersion") {
        if !is_number(version, 1.0) {
            out.push(Diagnostic::warning(
                "Missing or unsupported regex.schemaVersion; assuming 1.",
            ));
        }
    }
    let Some(rules) = config.get("rules") else {
        return;
    };
    let Some(rules) = rules.as_array() else {
        out.push(Diagnostic::error(
            "regex.rules must be an array when provided.",
        ));
        return;
    };
    let mut seen: Vec<String> = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        validate_rule(rule, index, &mut seen, out);
    }
}

/// `Regex rule <id>`, or `regex rule <n>` when the id is blank.
fn rule_label(id: &str, index: usize) -> String {
    if id.is_empty() {
        format!("regex rule {}", index + 1)
    } else {
        format!("Regex rule {id}")
    }
}

/// Collects one rule's diagnostics, prefixing each message with the rule's label.
struct RuleSink<'a> {
    label: String,
    out: &'a mut Vec<Diagnostic>,
}

impl RuleSink<'_> {
    fn error(&mut self, tail: &str) {
        self.out
            .push(Diagnostic::error(format!("{} {tail}", self.label)));
    }
    fn warning(&mut self, tail: &str) {
        self.out
            .push(Diagnostic::warning(format!("{} {tail}", self.label)));
    }
}

fn validate_rule(rule: &Value, index: usize, seen: &mut Vec<String>, out: &mut Vec<Diagnostic>) {
    let n = index + 1;
    let Some(rule) = rule.as_object() else {
        out.push(Diagnostic::error(format!(
            "regex rule {n} must be an object."
        )));
        return;
    };
    let id = rule
        .get("id")
        .and_then(Value::as_str)
        .map(js_trim)
        .unwrap_or("");
    if id.is_empty() {
        out.push(Diagnostic::error(format!(
            "regex rule {n} must have a non-empty id."
        )));
    } else if seen.iter().any(|s| s == id) {
        out.push(Diagnostic::error(format!("Duplicate regex rule id: {id}.")));
    } else {
        seen.push(id.to_string());
    }
    let mut sink = RuleSink {
        label: rule_label(id, index),
        out,
    };

    if rule.get("enabled").is_some_and(|v| !v.is_boolean()) {
        sink.warning("enabled must be a boolean when provided.");
    }

    let stage = rule.get("stage").and_then(Value::as_str);
    if !matches!(stage, Some("history" | "compiled")) {
        sink.error("stage must be \"history\" or \"compiled\".");
    }
    let effect = rule.get("effect").and_then(Value::as_str);
    let finalize = effect == Some("finalize");
    if rule.contains_key("effect") {
        if !matches!(effect, Some("outgoing" | "finalize")) {
            sink.error("effect must be \"outgoing\" or \"finalize\".");
        } else if finalize {
            sink.warning("effect \"finalize\" rewrites finalized assistant messages and replaces the original model output in the stored transcript.");
        }
    }
    if finalize && stage != Some("compiled") {
        sink.error("effect \"finalize\" requires stage \"compiled\".");
    }

    match rule.get("pattern").and_then(Value::as_str) {
        Some(pattern) if !pattern.is_empty() => match check_flags(rule.get("flags")) {
            Err(tail) => sink.error(&tail),
            Ok(flags) => {
                if let Err(reason) = check_pattern(pattern, &flags) {
                    sink.error(&format!(
                        "pattern failed to compile: Invalid regular expression: /{pattern}/{flags}: {reason}"
                    ));
                }
            }
        },
        _ => sink.error("pattern must be a non-empty string."),
    }

    match rule.get("replace") {
        Some(Value::String(replace)) if contains_match_placeholder(replace) => sink
            .warning("replacement contains {{match}}; use JavaScript $& or $0 for the full match."),
        Some(Value::String(_)) | None => {}
        Some(_) => sink.error("replace must be a string when provided."),
    }
    for key in ["trimStrings", "roles"] {
        if rule.get(key).is_some_and(|v| !is_string_array(v)) {
            sink.error(&format!("{key} must be an array of strings when provided."));
        }
    }
    if let Some(targets) = rule.get("targets") {
        if !is_string_array(targets) {
            sink.error("targets must be an array of strings when provided.");
        } else {
            let names = targets.as_array().into_iter().flatten();
            for target in names.filter_map(Value::as_str) {
                if !matches!(target, "system" | "messages") {
                    sink.error(&format!(
                        "target must be \"system\" or \"messages\": {target}."
                    ));
                } else if finalize && target != "messages" {
                    sink.error(&format!(
                        "effect \"finalize\" only supports target \"messages\": {target}."
                    ));
                }
            }
        }
    }
    if finalize {
        if let Some(roles) = rule.get("roles").filter(|v| is_string_array(v)) {
            let mut names = roles.as_array().into_iter().flatten();
            if !names.any(|r| r.as_str() == Some("assistant")) {
                sink.warning("effect \"finalize\" only runs for finalized assistant messages, but roles does not include \"assistant\".");
            }
        }
    }
    for key in ["maxMessages", "maxChars"] {
        if rule.get(key).is_some_and(|v| !is_positive_integer(v)) {
            sink.error(&format!("{key} must be a positive integer when provided."));
        }
    }
    for key in ["minDepth", "maxDepth"] {
        if rule.get(key).is_some_and(|v| !is_non_negative_integer(v)) {
            sink.error(&format!(
                "{key} must be a non-negative integer when provided."
            ));
        }
    }
    let min = rule.get("minDepth").and_then(non_negative_integer);
    let max = rule.get("maxDepth").and_then(non_negative_integer);
    if let (Some(min), Some(max)) = (min, max) {
        if max < min {
            sink.error("maxDepth must be greater than or equal to minDepth.");
        }
    }
}

/// Checks `flags` (absent → `""`); returns the flags text or the message tail after the label.
fn check_flags(value: Option<&Value>) -> Result<String, String> {
    let Some(value) = value else {
        return Ok(String::new());
    };
    let Some(flags) = value.as_str() else {
        return Err("flags must be a string when provided.".into());
    };
    let mut seen: Vec<char> = Vec::new();
    for flag in flags.chars() {
        if !REGEX_FLAGS.contains(flag) {
            return Err(format!("has unsupported regex flag: {flag}."));
        }
        if seen.contains(&flag) {
            return Err(format!("has duplicate regex flag: {flag}."));
        }
        seen.push(flag);
    }
    Ok(flags.to_string())
}

/// Compiles `pattern` with ECMAScript semantics under `flags` (a valid subset of `gimsu`).
///
/// The engine sees [`engine_pattern`]: the pattern with annex B's reading of `\u{` applied.
#[cfg(feature = "regex")]
pub fn compile_pattern(pattern: &str, flags: &str) -> Result<regress::Regex, String> {
    let engine_flags: String = flags.chars().filter(|c| *c != 'g').collect();
    regress::Regex::with_flags(&engine_pattern(pattern, flags), engine_flags.as_str())
        .map_err(|e| e.to_string())
}

/// The pattern as the engine must read it. Without the `u` (or `v`) flag JavaScript has no
/// code-point escape: `\u{1F600}` is the identity escape `u` followed by `{1F600}` (annex B; here
/// literal text, while `\u{3}` repeats the `u` three times). regress reads `\u{…}` as a code
/// point in every mode, so `\u{` becomes `u{` here. Group names (`(?<…>`, `\k<…>`) keep their
/// escapes, which JavaScript reads in unicode mode everywhere. With `u` or `v` the pattern is
/// returned unchanged.
pub fn engine_pattern<'p>(pattern: &'p str, flags: &str) -> std::borrow::Cow<'p, str> {
    use std::borrow::Cow;
    if flags.contains('u') || flags.contains('v') || !pattern.contains("\\u{") {
        return Cow::Borrowed(pattern);
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('u') if chars.peek() == Some(&'{') => out.push('u'),
                Some('k') if chars.peek() == Some(&'<') && !in_class => {
                    out.push_str("\\k");
                    copy_name(&mut chars, &mut out);
                }
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '(' if !in_class => {
                out.push('(');
                if chars.peek() == Some(&'?') {
                    out.push('?');
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        let mut ahead = chars.clone();
                        ahead.next();
                        if !matches!(ahead.peek(), Some('=') | Some('!')) {
                            copy_name(&mut chars, &mut out);
                        }
                    }
                }
            }
            other => out.push(other),
        }
    }
    Cow::Owned(out)
}

/// Copies `<name>` (up to and including the first `>`, or to the end) unchanged.
fn copy_name(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) {
    for c in chars.by_ref() {
        out.push(c);
        if c == '>' {
            break;
        }
    }
}

/// Checks that `pattern` compiles under `flags`; the error is the engine's reason.
///
/// With the `regex` feature (the default) this is `compile_pattern`. Without it (the
/// browser build, which leaves regress and its Unicode tables out) it asks the checker
/// installed with `set_pattern_checker` — the browser installs its own JavaScript engine's
/// — and accepts every pattern when none is installed.
pub fn check_pattern(pattern: &str, flags: &str) -> Result<(), String> {
    #[cfg(feature = "regex")]
    {
        compile_pattern(pattern, flags).map(|_| ())
    }
    #[cfg(not(feature = "regex"))]
    {
        match PATTERN_CHECKER.get() {
            Some(check) => check(pattern, flags),
            None => Ok(()),
        }
    }
}

/// A pattern checker: `Err(reason)` when `pattern` does not compile under `flags`.
pub type PatternChecker = fn(&str, &str) -> Result<(), String>;

#[cfg(not(feature = "regex"))]
static PATTERN_CHECKER: std::sync::OnceLock<PatternChecker> = std::sync::OnceLock::new();

/// Installs the pattern checker of a build without the `regex` feature (first call wins).
#[cfg(not(feature = "regex"))]
pub fn set_pattern_checker(check: PatternChecker) {
    let _ = PATTERN_CHECKER.set(check);
}

/// `POST /api/regex/try` (without `ok`): what "Try it" shows for one rule on one sample text.
/// (Here, not in `rewrite`, because the browser build has no regex engine but reads it.)
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleTrial {
    pub matches: usize,
    pub text: String,
    pub changed: bool,
    /// The rule ran out of its step budget on the sample (its remaining matches failed).
    pub out_of_budget: bool,
}

#[cfg(test)]
mod check_pattern_tests {
    use super::*;

    #[cfg(feature = "regex")]
    #[test]
    fn regress_checks_patterns() {
        assert_eq!(check_pattern("a+b", "gi"), Ok(()));
        let reason = check_pattern("(", "").expect_err("an open group does not compile");
        assert!(!reason.is_empty());
    }

    /// The browser build: without a checker every pattern passes; with one, its reason ends up
    /// in the stack diagnostic exactly as regress's would.
    #[cfg(not(feature = "regex"))]
    #[test]
    fn without_regress_the_installed_checker_decides() {
        use crate::stack::{parse_stack_value, ParseOptions};
        let stack = serde_json::json!({
            "schemaVersion": 2, "id": "s", "items": [],
            "regex": { "rules": [{ "id": "r", "stage": "history", "pattern": "(" }] }
        });
        set_pattern_checker(|pattern, _flags| {
            if pattern == "(" {
                Err("Unterminated group".to_string())
            } else {
                Ok(())
            }
        });
        assert_eq!(check_pattern("a+", "g"), Ok(()));
        let parsed = parse_stack_value(stack, &ParseOptions::new("s.json"));
        let messages: Vec<&str> = parsed
            .diagnostics
            .iter()
            .map(|d| d.message.as_str())
            .collect();
        assert!(
            messages.contains(
                &"Regex rule r pattern failed to compile: Invalid regular expression: /(/: Unterminated group"
            ),
            "{messages:?}"
        );
    }
}
