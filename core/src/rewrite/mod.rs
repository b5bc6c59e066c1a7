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

mod prefilter;
mod rule;
mod text;

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::js::js_string;

use rule::read_rule;
pub use rule::{rules_from_config, Effect, Rule, Stage, Target};
pub use text::{apply_to_text, TextEdit};

/// Running totals of one rule over one call.
#[derive(Default)]
struct Stats {
    matches: usize,
    changed_segments: usize,
    /// The rule ran out of its step budget ([`RULE_STEP_BUDGET`]).
    spent: bool,
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

pub use crate::stack::RuleTrial;

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
