//! The chat-history pipeline (prompt-stacks spec §4 "Chat-history pipeline", steps 1–7).
//!
//! The pipeline borrows the host's messages: a message is copied only when a step changes it
//! (removing thinking or tool-call parts), and messages that are filtered or trimmed away are never
//! copied. Unchanged messages compare equal to the host's.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};

use super::adapter::rewrite::field;
use super::slots::{flag, include};
use crate::diag::Diagnostic;
use crate::js::{is_positive_integer, is_string_array, js_string};
use crate::json::utf16_len;
use crate::message::preview_text;

/// The message's `role` when it is a string, or `""`.
fn role(message: &Value) -> &str {
    field(message, "role").and_then(Value::as_str).unwrap_or("")
}

fn content_parts(message: &Value) -> Option<&Vec<Value>> {
    field(message, "content").and_then(Value::as_array)
}

/// Runs the pipeline for one `chat-history` item. Diagnostics carry `item_id`.
pub(crate) fn pipeline<'h>(
    host: &'h [Value],
    options: Option<&Map<String, Value>>,
    item_id: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Cow<'h, Value>> {
    let info = |message: String| Diagnostic::info(message).with_item(item_id);
    let mut messages: Vec<Entry<'h>> = host
        .iter()
        .map(|message| Entry {
            message: Cow::Borrowed(message),
            pending: Pending::default(),
        })
        .collect();
    let mut repair = false;

    // 1. The last user message, even a blank one.
    if !include(options, "includeLastUserMessage") {
        if let Some(index) = messages.iter().rposition(|e| role(&e.message) == "user") {
            messages.remove(index);
        }
    }

    // 2. Summaries.
    if !include(options, "includeSummaries") {
        let before = messages.len();
        messages.retain(|e| !matches!(role(&e.message), "branchSummary" | "compactionSummary"));
        let removed = before - messages.len();
        if removed > 0 {
            diagnostics.push(info(format!(
                "Filtered {removed} chat-history message(s) by summary."
            )));
        }
    }

    // 3. Roles: a non-empty array of strings filters, and always asks for the repair (even when
    // it removed nothing, the history may hold dangling calls or results).
    if let Some(roles) = options
        .and_then(|o| o.get("roles"))
        .filter(|r| is_string_array(r))
        .and_then(Value::as_array)
    {
        if !roles.is_empty() {
            let before = messages.len();
            messages.retain(|e| {
                let role = message_role(&e.message);
                roles.iter().any(|r| r.as_str() == Some(role.as_ref()))
            });
            let removed = before - messages.len();
            if removed > 0 {
                diagnostics.push(info(format!(
                    "Filtered {removed} chat-history message(s) by role."
                )));
            }
            repair = true;
        }
    }

    // 4. Tool mode. Steps 4 and 5 only decide which parts go (and drop the messages left
    // empty); the stripped copies are made after the count trim, for the messages it keeps.
    let tool_mode = options.and_then(|o| o.get("toolMode"));
    let drop_tools = matches!(tool_mode, Some(Value::String(m)) if m == "drop");
    match tool_mode {
        None => {}
        Some(Value::String(m)) if m == "keep" || m == "drop" => {}
        Some(other) => diagnostics.push(
            Diagnostic::warning(format!(
                "Unsupported chat-history toolMode: {}.",
                js_string(other)
            ))
            .with_item(item_id),
        ),
    }
    if drop_tools {
        let before = messages.len();
        messages.retain(|e| role(&e.message) != "toolResult");
        let results = before - messages.len();
        let stripped = plan_strip(&mut messages, Pending::CALLS);
        if stripped.parts > 0 || results > 0 {
            diagnostics.push(info(format!(
                "Dropped tool history from chat-history: removed {} tool call(s), dropped {results} tool result message(s){}",
                stripped.parts,
                empty_suffix(stripped.dropped)
            )));
        }
    }

    // 5. Assistant thinking.
    if flag(options, "stripAssistantThinking") {
        let stripped = plan_strip(&mut messages, Pending::THINKING);
        if stripped.parts > 0 {
            let suffix = if stripped.dropped > 0 {
                format!(
                    " and dropped {} empty assistant message(s).",
                    stripped.dropped
                )
            } else {
                ".".to_string()
            };
            diagnostics.push(info(format!(
                "Stripped {} assistant thinking block(s) from {} chat-history message(s){suffix}",
                stripped.parts, stripped.touched
            )));
        }
    }

    // 6. Trimming.
    if let Some(max) = positive(options, "maxMessages") {
        if messages.len() > max {
            let before = messages.len();
            messages.drain(..before - max);
            diagnostics.push(info(format!(
                "Trimmed chat history from {before} to {max} message(s) by maxMessages."
            )));
            repair = true;
        }
    }
    let mut messages: Vec<Cow<'h, Value>> =
        messages.into_iter().map(Entry::into_stripped).collect();
    if let Some(max) = positive(options, "maxChars") {
        let before = messages.len();
        let mut keep = 0usize;
        let mut total = 0usize;
        for message in messages.iter().rev() {
            let chars = utf16_len(&preview_text(message));
            if keep > 0 && total + chars > max {
                break;
            }
            total += chars;
            keep += 1;
        }
        if keep < before {
            messages.drain(..before - keep);
            diagnostics.push(info(format!(
                "Trimmed chat history from {before} to {keep} message(s) by maxChars."
            )));
            repair = true;
        }
    }

    // 7. Tool-pair repair.
    if repair && !drop_tools {
        messages = repair_tool_pairs(messages, item_id, diagnostics);
    }
    messages
}

fn positive(options: Option<&Map<String, Value>>, key: &str) -> Option<usize> {
    let value = options?.get(key)?;
    if !is_positive_integer(value) {
        return None;
    }
    let n = value.as_f64()?;
    Some(if n >= usize::MAX as f64 {
        usize::MAX
    } else {
        n as usize
    })
}

fn part_type(part: &Value) -> &str {
    field(part, "type").and_then(Value::as_str).unwrap_or("")
}

fn empty_suffix(empty: usize) -> String {
    if empty > 0 {
        format!(", and dropped {empty} empty message(s).")
    } else {
        ".".to_string()
    }
}

/// A message of the pipeline and the parts steps 4 and 5 decided to remove from it.
struct Entry<'h> {
    message: Cow<'h, Value>,
    pending: Pending,
}

impl<'h> Entry<'h> {
    /// The message without its pending parts (copied only when some are pending).
    fn into_stripped(self) -> Cow<'h, Value> {
        if self.pending == Pending::default() {
            return self.message;
        }
        let pending = self.pending;
        match self.message {
            Cow::Borrowed(message) => {
                let message_role = role(message);
                Cow::Owned(clone_keeping_parts(message, |p| {
                    !pending.removes(message_role, p)
                }))
            }
            Cow::Owned(mut message) => {
                let message_role = role(&message).to_string();
                if let Some(Value::Array(parts)) = message.get_mut("content") {
                    parts.retain(|p| !pending.removes(&message_role, p));
                }
                Cow::Owned(message)
            }
        }
    }
}

/// Parts to remove: tool calls (step 4, `toolMode: drop`), assistant thinking (step 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pending {
    calls: bool,
    thinking: bool,
}

impl Pending {
    const CALLS: Pending = Pending {
        calls: true,
        thinking: false,
    };
    const THINKING: Pending = Pending {
        calls: false,
        thinking: true,
    };

    fn removes(self, role: &str, part: &Value) -> bool {
        (self.calls && part_type(part) == "toolCall")
            || (self.thinking && role == "assistant" && part_type(part) == "thinking")
    }

    fn with(self, other: Pending) -> Pending {
        Pending {
            calls: self.calls || other.calls,
            thinking: self.thinking || other.thinking,
        }
    }
}

/// Step 4 or 5 without copying: counts the parts `step` removes from each message (among those
/// no earlier step removed), drops the messages left empty and records the removal as pending.
fn plan_strip(messages: &mut Vec<Entry<'_>>, step: Pending) -> Stripped {
    let mut out = Stripped {
        parts: 0,
        touched: 0,
        dropped: 0,
    };
    messages.retain_mut(|entry| {
        let Some(parts) = content_parts(&entry.message) else {
            return true;
        };
        let message_role = role(&entry.message);
        let (mut removed, mut left) = (0, 0);
        for part in parts
            .iter()
            .filter(|p| !entry.pending.removes(message_role, p))
        {
            left += 1;
            if step.removes(message_role, part) {
                removed += 1;
            }
        }
        if removed == 0 {
            return true;
        }
        out.parts += removed;
        out.touched += 1;
        if removed == left {
            out.dropped += 1;
            return false;
        }
        entry.pending = entry.pending.with(step);
        true
    });
    out
}

/// What [`strip_parts`] did.
struct Stripped {
    /// Parts removed.
    parts: usize,
    /// Messages that lost at least one part (dropped ones included).
    touched: usize,
    /// Messages dropped because their content became empty.
    dropped: usize,
}

/// Removes the content parts `remove` selects from every message with array content, in place; a
/// message whose content becomes empty is dropped. Untouched messages stay as they are; a borrowed
/// message is copied (without the removed parts) only when it keeps some parts and loses others.
fn strip_parts(
    messages: &mut Vec<Cow<'_, Value>>,
    remove: impl Fn(&str, &Value) -> bool,
) -> Stripped {
    let mut out = Stripped {
        parts: 0,
        touched: 0,
        dropped: 0,
    };
    messages.retain_mut(|message| {
        let (removed, total) = match content_parts(message) {
            Some(parts) => {
                let message_role = role(message);
                (
                    parts.iter().filter(|p| remove(message_role, p)).count(),
                    parts.len(),
                )
            }
            None => (0, 0),
        };
        if removed == 0 {
            return true;
        }
        out.parts += removed;
        out.touched += 1;
        if removed == total {
            out.dropped += 1;
            return false;
        }
        match message {
            Cow::Borrowed(borrowed) => {
                let borrowed: &Value = borrowed;
                let message_role = role(borrowed);
                *message = Cow::Owned(clone_keeping_parts(borrowed, |p| !remove(message_role, p)));
            }
            Cow::Owned(owned) => {
                let message_role = role(owned).to_string();
                if let Some(Value::Array(parts)) = owned.get_mut("content") {
                    parts.retain(|p| !remove(&message_role, p));
                }
            }
        }
        true
    });
    out
}

/// A copy of `message` whose content array keeps only the parts `keep` accepts.
fn clone_keeping_parts(message: &Value, keep: impl Fn(&Value) -> bool) -> Value {
    let mut out = message.clone();
    if let Some(Value::Array(parts)) = out.get_mut("content") {
        parts.retain(|p| keep(p));
    }
    out
}

/// `String(message.role ?? "")`.
fn message_role(message: &Value) -> std::borrow::Cow<'_, str> {
    match field(message, "role") {
        None | Some(Value::Null) => "".into(),
        Some(Value::String(s)) => s.as_str().into(),
        Some(other) => js_string(other).into(),
    }
}

/// The first of `keys` whose value is a non-empty string (other values are skipped).
fn first_id<'v>(value: &'v Value, keys: [&str; 3]) -> Option<&'v str> {
    keys.iter()
        .filter_map(|k| field(value, k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
}

/// A part's call id (any object part may carry one).
fn call_id(part: &Value) -> Option<&str> {
    if !part.is_object() {
        return None;
    }
    first_id(part, ["id", "toolCallId", "callId"])
}

fn result_id(message: &Value) -> Option<&str> {
    first_id(message, ["toolCallId", "id", "callId"])
}

fn is_tool_result(message: &Value) -> bool {
    message_role(message) == "toolResult"
}

/// Drops tool results without a matching call, strips calls without a matching result, and drops
/// messages left empty.
fn repair_tool_pairs<'h>(
    messages: Vec<Cow<'h, Value>>,
    item_id: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Cow<'h, Value>> {
    // As the original: call ids come from every object part of every message with array
    // content; result ids from the tool results.
    let (keep, dangling_calls) = {
        let mut call_ids: HashSet<&str> = HashSet::new();
        let mut result_ids: HashSet<&str> = HashSet::new();
        for message in &messages {
            if let Some(parts) = content_parts(message) {
                call_ids.extend(parts.iter().filter_map(call_id));
            }
            if is_tool_result(message) {
                if let Some(id) = result_id(message) {
                    result_ids.insert(id);
                }
            }
        }
        let keep: Vec<bool> = messages
            .iter()
            .map(|m| !is_tool_result(m) || result_id(m).is_some_and(|id| call_ids.contains(id)))
            .collect();
        let dangling = messages.iter().any(|m| {
            role(m) != "toolResult"
                && content_parts(m).is_some_and(|parts| {
                    parts.iter().any(|p| {
                        part_type(p) == "toolCall"
                            && !call_id(p).is_some_and(|id| result_ids.contains(id))
                    })
                })
        });
        // The result ids outlive the borrow only when some call must be stripped.
        let owned = dangling.then(|| {
            result_ids
                .iter()
                .map(|id| id.to_string())
                .collect::<HashSet<String>>()
        });
        (keep, owned)
    };
    let before = messages.len();
    let mut keep = keep.into_iter();
    let mut messages = messages;
    messages.retain(|_| keep.next().unwrap_or(true));
    let results = before - messages.len();
    let (calls, empty) = match dangling_calls {
        Some(result_ids) => {
            let stripped = strip_parts(&mut messages, |role, part| {
                role != "toolResult"
                    && part_type(part) == "toolCall"
                    && !call_id(part).is_some_and(|id| result_ids.contains(id))
            });
            (stripped.parts, stripped.dropped)
        }
        None => (0, 0),
    };
    if calls > 0 || results > 0 {
        diagnostics.push(
            Diagnostic::info(format!(
                "Repaired tool history after chat-history filtering: removed {calls} dangling tool call(s), dropped {results} dangling tool result message(s){}",
                empty_suffix(empty)
            ))
            .with_item(item_id),
        );
    }
    messages
}
