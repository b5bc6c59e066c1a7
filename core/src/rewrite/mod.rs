//! Regex rules at run time: selection, JavaScript replacement semantics, message eligibility and
//! finalize (spec §4 "Regex execution").
//!
//! The stack codec validates `regex.rules` but never normalizes them; this module reads the raw
//! config again at run time.
//!
//! **Which rules run.** [`rules_from_config`] keeps a rule when it is an object, not
//! `enabled:false`, has a string id that is not blank, a `stage` of `history`/`compiled`, an
//! `effect` of `outgoing` (also when absent or null) or `finalize`, a non-empty string `pattern`,
//! and `flags` made of distinct `gimsu` letters (non-string flags count as none). Any other rule
//! is skipped silently. Ill-typed optional fields fall back to their defaults, as in the original:
//! a non-string `replace` is `""`, a `roles`/`trimStrings` that is not an array of strings is
//! absent, a `maxMessages`/`maxChars` that is not a positive integer (or a depth that is not a
//! non-negative integer) is absent, and `targets` filters only when it is an array (its non-target
//! members never match). Duplicate ids and `maxDepth < minDepth` are not rejected (the latter just
//! makes no message eligible). A pattern the engine rejects yields E
//! `Regex rule <id> failed to compile: Invalid regular expression: /<pattern>/<flags>: <reason>`
//! (the raw id, as the original prints it) and the rule is dropped.
//!
//! **Engine.** Patterns run on `regress` (ECMAScript syntax and semantics: lookbehind,
//! backreferences, named groups, flags `i m s u`; `g` is handled here). Matching works on code
//! points over UTF-8, so astral characters behave as under the `u` flag even when it is absent:
//! `.` consumes a whole astral character and an empty match advances by one code point. JavaScript
//! without `u` would split surrogate pairs, which a Rust string cannot hold. (With `u`, the
//! original's match counter loops forever on an empty match before an astral character; here it
//! counts the matches the replacement visits.)
//!
//! **Diagnostics.** One I per rule and call when the rule matched at least once:
//! `Regex rule <id> matched <m> time(s) and changed <s> text segment(s) in <stage>/<target>.`
//! A text segment is one string content or one `text` part.

mod text;

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::js::{
    is_non_negative_integer, is_positive_integer, is_string_array, js_string, js_trim,
};
use crate::stack::{compile_pattern, engine_pattern, REGEX_FLAGS};

pub use text::{apply_to_text, TextEdit};

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
    native_template: String,
    /// A literal every match must contain, and where a match can start at the earliest (see
    /// [`text::prefilter`]): a text without the literal cannot match, so the regex engine is not
    /// run on it, and the engine skips the part before that start.
    prefilter: Option<text::Prefilter>,
    /// The `i` flag: the required literal is then looked for ignoring ASCII case.
    ignore_case: bool,
}

impl Rule {
    /// Whether the rule runs for `stage`/`effect`, and (compiled stage only) `target`.
    fn selected(&self, stage: Stage, effect: Effect, target: Target) -> bool {
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
fn read_rule(raw: &Map<String, Value>) -> Result<Option<Rule>, Diagnostic> {
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
        native_template: text::rewrite_dollar_zero(&replace),
        prefilter: text::prefilter(&engine_pattern(pattern, flags), flags),
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

/// Running totals of one rule over one call.
#[derive(Default)]
struct Stats {
    matches: usize,
    changed_segments: usize,
    /// The rule ran out of its step budget ([`RULE_STEP_BUDGET`]).
    spent: bool,
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
        text::search_start(self, text)
    }

    pub(crate) fn prefilter(&self) -> Option<&text::Prefilter> {
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

impl Stats {
    fn add(&mut self, edit: &TextEdit) {
        self.matches += edit.matches;
        if edit.changed {
            self.changed_segments += 1;
        }
    }

    /// The E for a rule that ran out of steps, then the I for a rule that matched, or nothing.
    fn report(&self, rule: &Rule, stage: &str, target: Target, out: &mut Vec<Diagnostic>) {
        if self.spent {
            out.push(Diagnostic::error(format!(
                "Regex rule {} exceeded its time budget ({RULE_STEP_BUDGET} steps of the regex engine) in {}/{}: the pattern backtracks catastrophically on this text. Simplify it (no nested quantifiers such as (a+)+).",
                rule.id,
                stage,
                target.as_str()
            )));
        }
        if self.matches > 0 {
            out.push(Diagnostic::info(format!(
                "Regex rule {} matched {} time(s) and changed {} text segment(s) in {}/{}.",
                rule.id,
                self.matches,
                self.changed_segments,
                stage,
                target.as_str()
            )));
        }
    }
}

/// Steps of the regex engine one rule may take in one stage, over all the texts it runs on
/// (about a tenth of a second of matching). A rule that needs more is stopped: its remaining
/// matches fail, and an error diagnostic names it (`Regex rule <id> exceeded its time budget …`).
pub const RULE_STEP_BUDGET: u64 = 20_000_000;

/// Backtrack states one match attempt of a rule may hold at once, part of the same budget: an
/// attempt that reaches it spends the rule's steps and gets the same diagnostic. It bounds the
/// engine's memory before the step limit: at most this many states plus three, of
/// [`regress::budget::STACK_ENTRY_BYTES`] (40) bytes each, in a vector of at most 2^21 states
/// (84 MB), where the step budget alone let a failing `(?:a|b)*c` on a long text reach 9 million
/// states. `(.|\n)*` holds five states per character, so it still matches 400,000 characters.
pub const RULE_STACK_LIMIT: usize = 2_000_000;

/// Runs `run` with a fresh [`RULE_STEP_BUDGET`] and [`RULE_STACK_LIMIT`] for the regex engine on
/// this thread; true when the budget ran out. The engine is unlimited again afterwards.
fn within_budget<R>(run: impl FnOnce() -> R) -> (R, bool) {
    regress::budget::set(RULE_STEP_BUDGET);
    regress::budget::set_stack_limit(RULE_STACK_LIMIT);
    let result = run();
    let spent = regress::budget::exhausted();
    regress::budget::set(u64::MAX);
    regress::budget::set_stack_limit(usize::MAX);
    (result, spent)
}

pub use crate::api::RuleTrial;

/// Runs one raw rule object on `sample` exactly as the compiler applies it to one text
/// (`maxChars`, `trimStrings`, `$0`, the regex engine and its step budget); `enabled`, `stage`,
/// `roles`, `targets` and depths decide *where* a rule runs, not what it does to a text, so they
/// are not needed here. `Err` is the compile error the compiler reports for the rule.
pub fn try_rule(raw: &Map<String, Value>, sample: &str) -> Result<RuleTrial, String> {
    let mut raw = raw.clone();
    raw.insert("enabled".into(), Value::Bool(true));
    raw.entry("id").or_insert_with(|| Value::from("try"));
    if !matches!(
        raw.get("stage").and_then(Value::as_str),
        Some("history" | "compiled")
    ) {
        raw.insert("stage".into(), Value::from("history"));
    }
    if raw.get("effect").is_some_and(|e| !e.is_string()) {
        raw.remove("effect");
    }
    match read_rule(&raw) {
        Ok(Some(rule)) => {
            let (edit, spent) = within_budget(|| apply_to_text(&rule, sample));
            Ok(RuleTrial {
                matches: edit.matches,
                text: edit.text,
                changed: edit.changed,
                out_of_budget: spent,
            })
        }
        Ok(None) => Err("Enter a pattern first.".to_string()),
        // The compile error without the rule's name (the card shows the rule).
        Err(diagnostic) => Err(diagnostic
            .message
            .split_once(" failed to compile: ")
            .map_or(diagnostic.message.clone(), |(_, reason)| reason.to_string())),
    }
}

/// Runs the history-stage outgoing rules over one chat-history slot's messages. `targets` is
/// ignored at this stage.
pub fn apply_history(rules: &[Rule], mut messages: Vec<Value>) -> (Vec<Value>, Vec<Diagnostic>) {
    let diagnostics = apply_messages(rules, &mut messages, Stage::History);
    (messages, diagnostics)
}

/// [`apply_history`] over borrowed messages: a message is copied only when a rule changes it.
pub fn apply_history_shared(rules: &[Rule], messages: &mut [Cow<'_, Value>]) -> Vec<Diagnostic> {
    apply_messages(rules, messages, Stage::History)
}

/// Runs the compiled-stage outgoing rules that target `system` over the whole system prompt
/// (the base prompt included). Roles, depth and `maxMessages` do not apply.
pub fn apply_compiled_system(rules: &[Rule], text: String) -> (String, Vec<Diagnostic>) {
    let mut text = text;
    let mut diagnostics = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| r.selected(Stage::Compiled, Effect::Outgoing, Target::System))
    {
        let (edit, spent) = within_budget(|| apply_to_text(rule, &text));
        let mut stats = Stats {
            spent,
            ..Stats::default()
        };
        stats.add(&edit);
        stats.report(
            rule,
            Stage::Compiled.as_str(),
            Target::System,
            &mut diagnostics,
        );
        if edit.changed {
            text = edit.text;
        }
    }
    (text, diagnostics)
}

/// Runs the compiled-stage outgoing rules that target `messages` over the full compiled list.
pub fn apply_compiled_messages(
    rules: &[Rule],
    mut messages: Vec<Value>,
) -> (Vec<Value>, Vec<Diagnostic>) {
    let diagnostics = apply_messages(rules, &mut messages, Stage::Compiled);
    (messages, diagnostics)
}

/// [`apply_compiled_messages`] on a list in place.
pub fn apply_compiled_messages_in_place<M: MessageSlot>(
    rules: &[Rule],
    messages: &mut [M],
) -> Vec<Diagnostic> {
    apply_messages(rules, messages, Stage::Compiled)
}

/// A message the rules can read, and write when they change it: an owned [`Value`], or a
/// [`Cow`] that is copied on the first write.
pub trait MessageSlot {
    fn message(&self) -> &Value;
    fn message_mut(&mut self) -> &mut Value;
}

impl MessageSlot for Value {
    fn message(&self) -> &Value {
        self
    }
    fn message_mut(&mut self) -> &mut Value {
        self
    }
}

impl MessageSlot for Cow<'_, Value> {
    fn message(&self) -> &Value {
        self
    }
    fn message_mut(&mut self) -> &mut Value {
        self.to_mut()
    }
}

fn apply_messages<M: MessageSlot>(
    rules: &[Rule],
    messages: &mut [M],
    stage: Stage,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| r.selected(stage, Effect::Outgoing, Target::Messages))
    {
        let mut stats = Stats::default();
        let ((), spent) = within_budget(|| {
            transform_messages(messages, rule, &mut stats);
        });
        stats.spent = spent;
        stats.report(rule, stage.as_str(), Target::Messages, &mut diagnostics);
    }
    diagnostics
}

/// Runs the finalize rules on a finalized message. Only an assistant message (`String(role)` is
/// `assistant`) is considered; the result is `Some` only when a rule changed it, with the rules'
/// I diagnostics (labelled `finalize/messages`) followed by the finalize W. Eligibility applies as
/// for a one-message list (depth 0).
pub fn finalize(rules: &[Rule], message: &Value) -> Option<(Value, Vec<Diagnostic>)> {
    if role_string(message) != "assistant" {
        return None;
    }
    let mut list = [Cow::Borrowed(message)];
    let mut diagnostics = Vec::new();
    let mut changed = false;
    for rule in rules
        .iter()
        .filter(|r| r.selected(Stage::Compiled, Effect::Finalize, Target::Messages))
    {
        let mut stats = Stats::default();
        let (rule_changed, spent) =
            within_budget(|| transform_messages(&mut list, rule, &mut stats));
        changed |= rule_changed;
        stats.spent = spent;
        stats.report(rule, "finalize", Target::Messages, &mut diagnostics);
    }
    if !changed {
        return None;
    }
    diagnostics.push(Diagnostic::warning(
        "Finalize regex replaced finalized assistant message content; original model output is not preserved in the stored transcript.",
    ));
    let [message] = list;
    Some((message.into_owned(), diagnostics))
}

/// The number of finalize rules among `rules` (all of which are enabled and runnable).
pub fn finalize_rule_count(rules: &[Rule]) -> usize {
    rules
        .iter()
        .filter(|r| r.effect == Effect::Finalize)
        .count()
}

/// The number of preview notes the original emits: raw rules that are objects with
/// `effect:"finalize"` and not `enabled:false`, valid or not.
pub fn finalize_rule_count_in_config(regex: Option<&Map<String, Value>>) -> usize {
    regex
        .and_then(|r| r.get("rules"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter(|r| {
            r.get("effect").and_then(Value::as_str) == Some("finalize")
                && r.get("enabled") != Some(&Value::Bool(false))
        })
        .count()
}

/// `value[key]` for an object. Message objects have a handful of keys, so comparing them in order
/// beats hashing the key (serde_json's map hashes with SipHash); larger objects use the index.
#[inline]
pub(crate) fn field<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    let map = value.as_object()?;
    if map.len() <= 12 {
        map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        map.get(key)
    }
}

/// `String(message.role)`.
fn role_string(message: &Value) -> Cow<'_, str> {
    match field(message, "role") {
        Some(Value::String(role)) => Cow::Borrowed(role),
        Some(role) => Cow::Owned(js_string(role)),
        None => Cow::Borrowed("undefined"),
    }
}

/// Indexes the rule may edit: role in `roles`, depth (`len − 1 − index`) within
/// `minDepth..=maxDepth`, then the last `maxMessages` of those.
fn eligible_indexes<M: MessageSlot>(messages: &[M], rule: &Rule) -> Vec<usize> {
    let len = messages.len();
    let mut indexes: Vec<usize> = (0..len)
        .filter(|&index| {
            let depth = len - 1 - index;
            rule.min_depth.is_none_or(|min| depth >= min)
                && rule.max_depth.is_none_or(|max| depth <= max)
                && rule.roles.as_ref().is_none_or(|roles| {
                    let role = role_string(messages[index].message());
                    roles.iter().any(|r| *r == role)
                })
        })
        .collect();
    if let Some(max) = rule.max_messages {
        if indexes.len() > max {
            indexes.drain(..indexes.len() - max);
        }
    }
    indexes
}

/// Applies one rule to the eligible messages; true when any message changed. A message is
/// copied (if it was borrowed) only when the rule changes it.
fn transform_messages<M: MessageSlot>(messages: &mut [M], rule: &Rule, stats: &mut Stats) -> bool {
    let mut changed = false;
    for index in eligible_indexes(messages, rule) {
        changed |= transform_message(&mut messages[index], rule, stats);
    }
    changed
}

/// Edits a string `content`, or each `type:"text"` part with a string `text`; every other part
/// and field is left as it is. True when something changed.
fn transform_message<M: MessageSlot>(message: &mut M, rule: &Rule, stats: &mut Stats) -> bool {
    match field(message.message(), "content") {
        Some(Value::String(text)) => {
            let Some(edit) = text::apply_if_matched(rule, text) else {
                return false;
            };
            stats.add(&edit);
            if !edit.changed {
                return false;
            }
            if let Some(content) = message.message_mut().get_mut("content") {
                *content = Value::String(edit.text);
            }
            true
        }
        Some(Value::Array(parts)) => {
            let mut edits: Vec<(usize, String)> = Vec::new();
            for (index, part) in parts.iter().enumerate() {
                if field(part, "type").and_then(Value::as_str) != Some("text") {
                    continue;
                }
                let Some(Value::String(text)) = field(part, "text") else {
                    continue;
                };
                if let Some(edit) = text::apply_if_matched(rule, text) {
                    stats.add(&edit);
                    if edit.changed {
                        edits.push((index, edit.text));
                    }
                }
            }
            if edits.is_empty() {
                return false;
            }
            if let Some(Value::Array(parts)) = message.message_mut().get_mut("content") {
                for (index, text) in edits {
                    if let Some(slot) = parts.get_mut(index).and_then(|p| p.get_mut("text")) {
                        *slot = Value::String(text);
                    }
                }
            }
            true
        }
        _ => false,
    }
}
