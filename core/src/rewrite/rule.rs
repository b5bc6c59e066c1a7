//! A regex rule as a Preset's `regex` config declares it: stage, target, effect, pattern and
//! replacement, read and validated (`rules_from_config`), with what the prefilter proved about
//! where a match can start.

use serde_json::{Map, Value};

use super::prefilter::{find_literal, lead_start, prefilter, Prefilter};
use crate::diag::Diagnostic;
use crate::js::{is_non_negative_integer, is_positive_integer, is_string_array, js_trim};
use crate::stack::{compile_pattern, engine_pattern, REGEX_FLAGS};

/// When a rule runs: on each chat-history slot's messages, or on the compiled request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    History,
    Compiled,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::History => "history",
            Stage::Compiled => "compiled",
        }
    }
}

/// `outgoing` rewrites what is sent to the provider; `finalize` rewrites the stored assistant
/// message at `message_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    Outgoing,
    Finalize,
}

/// What a compiled-stage rule edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    System,
    Messages,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::System => "system",
            Target::Messages => "messages",
        }
    }
}

/// One runnable regex rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The trimmed id.
    pub id: String,
    pub stage: Stage,
    pub effect: Effect,
    /// The source pattern and flags (including `g`).
    pub pattern: String,
    pub flags: String,
    /// The compiled pattern (flags `i m s u`).
    pub regex: regress::Regex,
    /// The `g` flag.
    pub global: bool,
    pub replace: String,
    /// `Some` only for an array of strings. An empty list selects the native path.
    pub trim_strings: Option<Vec<String>>,
    /// `Some` only for an array of strings; compared with `String(message.role)`.
    pub roles: Option<Vec<String>>,
    /// `Some` whenever `targets` is an array: its `system`/`messages` members.
    pub targets: Option<Vec<Target>>,
    pub max_messages: Option<usize>,
    /// In UTF-16 code units.
    pub max_chars: Option<usize>,
    pub min_depth: Option<usize>,
    pub max_depth: Option<usize>,
    /// `replace` with `$0` read as `$&`, for the native path.
    pub(super) native_template: String,
    /// A literal every match must contain, and where a match can start at the earliest (see
    /// [`text::prefilter`]): a text without the literal cannot match, so the regex engine is not
    /// run on it, and the engine skips the part before that start.
    pub(super) prefilter: Option<Prefilter>,
    /// The `i` flag: the required literal is then looked for ignoring ASCII case.
    pub(super) ignore_case: bool,
}

impl Rule {
    /// Whether the rule runs for `stage`/`effect`, and (compiled stage only) `target`.
    pub(super) fn selected(&self, stage: Stage, effect: Effect, target: Target) -> bool {
        self.stage == stage
            && self.effect == effect
            && (stage == Stage::History
                || self.targets.as_ref().is_none_or(|t| t.contains(&target)))
    }
}

/// Reads the runnable rules of a stack's `regex` object (see the module docs for what is kept).
pub fn rules_from_config(regex: Option<&Map<String, Value>>) -> (Vec<Rule>, Vec<Diagnostic>) {
    let mut rules = Vec::new();
    let mut diagnostics = Vec::new();
    let raw_rules = regex.and_then(|r| r.get("rules")).and_then(Value::as_array);
    for raw in raw_rules.into_iter().flatten() {
        let Some(raw) = raw.as_object() else {
            continue;
        };
        match read_rule(raw) {
            Ok(Some(rule)) => rules.push(rule),
            Ok(None) => {}
            Err(diagnostic) => diagnostics.push(diagnostic),
        }
    }
    (rules, diagnostics)
}

/// `Ok(None)` for a rule that is skipped silently, `Err` for a compile failure.
pub(super) fn read_rule(raw: &Map<String, Value>) -> Result<Option<Rule>, Diagnostic> {
    if raw.get("enabled") == Some(&Value::Bool(false)) {
        return Ok(None);
    }
    let Some(raw_id) = raw.get("id").and_then(Value::as_str) else {
        return Ok(None);
    };
    let id = js_trim(raw_id);
    if id.is_empty() {
        return Ok(None);
    }
    let stage = match raw.get("stage").and_then(Value::as_str) {
        Some("history") => Stage::History,
        Some("compiled") => Stage::Compiled,
        _ => return Ok(None),
    };
    let effect = match raw.get("effect") {
        None | Some(Value::Null) => Effect::Outgoing,
        Some(Value::String(s)) if s == "outgoing" => Effect::Outgoing,
        Some(Value::String(s)) if s == "finalize" => Effect::Finalize,
        Some(_) => return Ok(None),
    };
    let pattern = match raw.get("pattern").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => p,
        _ => return Ok(None),
    };
    let flags = raw.get("flags").and_then(Value::as_str).unwrap_or("");
    if !flags_are_valid(flags) {
        return Ok(None);
    }
    let regex = compile_pattern(pattern, flags).map_err(|reason| {
        Diagnostic::error(format!(
            "Regex rule {raw_id} failed to compile: Invalid regular expression: /{pattern}/{flags}: {reason}"
        ))
    })?;
    let replace = raw
        .get("replace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(Some(Rule {
        id: id.to_string(),
        stage,
        effect,
        pattern: pattern.to_string(),
        flags: flags.to_string(),
        regex,
        global: flags.contains('g'),
        native_template: rewrite_dollar_zero(&replace),
        prefilter: prefilter(&engine_pattern(pattern, flags), flags),
        ignore_case: flags.contains('i'),
        replace,
        trim_strings: string_list(raw.get("trimStrings")),
        roles: string_list(raw.get("roles")),
        targets: raw.get("targets").and_then(Value::as_array).map(|items| {
            items
                .iter()
                .filter_map(|t| match t.as_str() {
                    Some("system") => Some(Target::System),
                    Some("messages") => Some(Target::Messages),
                    _ => None,
                })
                .collect()
        }),
        max_messages: count(raw.get("maxMessages"), is_positive_integer),
        max_chars: count(raw.get("maxChars"), is_positive_integer),
        min_depth: count(raw.get("minDepth"), is_non_negative_integer),
        max_depth: count(raw.get("maxDepth"), is_non_negative_integer),
    }))
}

/// Distinct letters from `gimsu`.
fn flags_are_valid(flags: &str) -> bool {
    let mut seen = String::new();
    for flag in flags.chars() {
        if !REGEX_FLAGS.contains(flag) || seen.contains(flag) {
            return false;
        }
        seen.push(flag);
    }
    true
}

fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    let value = value.filter(|v| is_string_array(v))?;
    let items = value.as_array()?;
    Some(
        items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// The number when `valid` accepts it (saturating at `usize::MAX`).
fn count(value: Option<&Value>, valid: fn(&Value) -> bool) -> Option<usize> {
    let value = value.filter(|v| valid(v))?;
    // An integer-valued, non-negative f64; `as` saturates.
    value.as_f64().map(|f| f as usize)
}

impl Rule {
    /// A literal every match contains, if one was derived from the pattern (with the `i` flag it
    /// is compared ignoring ASCII case). Texts without it skip the regex engine.
    pub fn required_literal(&self) -> Option<&str> {
        self.prefilter.as_ref().map(|p| p.literal.as_str())
    }

    /// Where the engine starts searching `text` (ignoring `maxChars`): `None` when the prefilter
    /// skips the text, else the byte offset of the earliest possible match start it proved
    /// (0 without a prefilter). For the differential test's statistics.
    #[doc(hidden)]
    pub fn prefilter_start(&self, text: &str) -> Option<usize> {
        search_start(self, text)
    }

    pub(crate) fn prefilter(&self) -> Option<&Prefilter> {
        self.prefilter.as_ref()
    }

    /// The same rule without the prefilter: every text goes through the regex engine, from its
    /// start. For the
    /// differential test that proves the prefilter changes nothing.
    #[doc(hidden)]
    pub fn without_prefilter(mut self) -> Rule {
        self.prefilter = None;
        self
    }
}

/// Where the engine starts searching `body`: `None` when the prefilter proves there is no match,
/// else the earliest byte offset a match can start at (0 unless a lead is known).
pub(crate) fn search_start(rule: &Rule, body: &str) -> Option<usize> {
    let Some(prefilter) = rule.prefilter() else {
        return Some(0);
    };
    let at = find_literal(body, &prefilter.literal, rule.ignore_case)?;
    Some(match &prefilter.lead {
        Some(lead) => lead_start(body, at, lead),
        None => 0,
    })
}

/// Rewrites `$0` (not followed by a digit) to `$&`, leaving `$$` pairs alone so that `$$0` stays
/// a literal `$0`. This is the template the native path substitutes.
pub(crate) fn rewrite_dollar_zero(replace: &str) -> String {
    let bytes = replace.as_bytes();
    let mut out = String::with_capacity(replace.len() + 2);
    let mut i = 0;
    while let Some(offset) = replace[i..].find('$') {
        let at = i + offset;
        out.push_str(&replace[i..at]);
        match bytes.get(at + 1) {
            Some(b'$') => {
                out.push_str("$$");
                i = at + 2;
            }
            Some(b'0') if !bytes.get(at + 2).is_some_and(u8::is_ascii_digit) => {
                out.push_str("$&");
                i = at + 2;
            }
            _ => {
                out.push('$');
                i = at + 1;
            }
        }
    }
    out.push_str(&replace[i..]);
    out
}
