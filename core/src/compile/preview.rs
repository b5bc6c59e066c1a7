//! Previews (prompt-stacks spec §6 "Preview"): the compiled prompt as titled sections with diff
//! keys, and as markdown text.
//!
//! Decisions where the spec is silent:
//! - message sections are `message-<i>` with `i` counted from 0; the occurrence suffix of a diff
//!   key counts repeats of the same key from 1 (`stack-item:intro:1`, `…:2`);
//! - the hash in history keys is [`hash_role_text`] of the role and the section content (the
//!   message's preview text); the system section has role `system`;
//! - `totalChars` sums the UTF-16 lengths of all section contents (the system section's
//!   `(empty)` included) and `approxTokens` is `ceil(totalChars / 4)`;
//! - the text cuts the whole message layout (blocks joined by blank lines) after 8000 UTF-16 code
//!   units, on a character boundary, then adds a `[preview truncated]` line; no messages reads
//!   `(no messages)`; diagnostics read `ERROR|WARNING|INFO[ [itemId]]: message`; the text ends
//!   with a newline.

use std::collections::HashMap;

use super::adapter::diff::{hash_text, Section};
use super::{Compiled, MessageSource, IMPLICIT_HISTORY_NAME};
use crate::diag::Diagnostic;
use crate::message::{preview_text as message_text, role};
use crate::runtime::Clock;

/// The message part of [`preview_text`] is cut after this many UTF-16 code units.
pub const PREVIEW_MESSAGE_LIMIT: usize = 8000;

/// Info added once per enabled finalize rule.
pub const FINALIZE_NOTE: &str = "finalize regex rules are not represented in preview.";

/// A compiled prompt laid out for display and draft diffs (a contract type: the browser reads
/// it from `POST /api/stacks/:sel/preview` without the compiler).
pub use crate::api::Preview;

fn section(id: &str, diff_key: &str, title: &str, role: &str, content: &str) -> Section {
    Section::new(id, Some(diff_key), title, Some(role), content)
}

/// Lays out `compiled` as sections.
///
/// - the system section: id and diff key `system`, title `System prompt`, content `(empty)` when
///   the prompt is empty;
/// - one `message-<i>` section per message (`i` from 0), titled with the item name (else id), with
///   `<name or "Chat history"> #<historyIndex>` for chat history, or `Conversation history #<n>`;
/// - diff keys `stack-item:<itemId>`, `chat-history:<itemId>:<hash>` or `implicit-history:<hash>`
///   (`hash` = [`hash_text`] of `role\0content`), each followed by `:<occurrence>`, counting
///   repeats of the same key from 1.
pub fn preview(
    compiled: &Compiled,
    stack_id: &str,
    load_diagnostics: &[Diagnostic],
    clock: &Clock,
) -> Preview {
    let system_content = if compiled.system_prompt.is_empty() {
        "(empty)".to_string()
    } else {
        compiled.system_prompt.clone()
    };
    let system = section(
        "system",
        "system",
        "System prompt",
        "system",
        &system_content,
    );
    let mut occurrences: HashMap<String, usize> = HashMap::new();
    let mut implicit_index = 0usize;
    let mut messages = Vec::with_capacity(compiled.messages.len());
    for (index, compiled_message) in compiled.messages.iter().enumerate() {
        let message = &compiled_message.message;
        let role = role(message);
        let content = message_text(message);
        let hash = || hash_role_text(role, &content);
        let (title, key) = match &compiled_message.source {
            MessageSource::StackItem {
                item_id, item_name, ..
            } => (
                item_name.clone().unwrap_or_else(|| item_id.clone()),
                format!("stack-item:{item_id}"),
            ),
            MessageSource::ChatHistory {
                item_id,
                item_name,
                history_index,
                ..
            } => (
                format!(
                    "{} #{history_index}",
                    item_name.as_deref().unwrap_or("Chat history")
                ),
                format!("chat-history:{item_id}:{}", hash()),
            ),
            MessageSource::ImplicitHistory => {
                implicit_index += 1;
                (
                    format!("{IMPLICIT_HISTORY_NAME} #{implicit_index}"),
                    format!("implicit-history:{}", hash()),
                )
            }
        };
        let occurrence = occurrences.entry(key.clone()).or_insert(0);
        *occurrence += 1;
        let diff_key = format!("{key}:{occurrence}");
        messages.push(section(
            &format!("message-{index}"),
            &diff_key,
            &title,
            role,
            &content,
        ));
    }
    let total_chars = system.chars + messages.iter().map(|s| s.chars).sum::<usize>();
    let mut diagnostics = load_diagnostics.to_vec();
    diagnostics.extend(compiled.diagnostics.iter().cloned());
    // One note however many finalize rules there are (the original repeated it per rule, §8.17).
    if compiled.finalize_rules > 0 {
        diagnostics.push(Diagnostic::info(FINALIZE_NOTE));
    }
    Preview {
        stack_id: stack_id.to_string(),
        generated_at: clock.iso_utc(),
        system,
        messages,
        total_chars,
        approx_tokens: total_chars.div_ceil(4),
        diagnostics,
    }
}

/// The hash in chat-history and implicit-history diff keys: [`hash_text`] of `role\0text`.
pub fn hash_role_text(role: &str, text: &str) -> String {
    hash_text(&format!("{role}\0{text}"))
}

/// Cuts `text` to at most `limit` UTF-16 code units, on a character boundary.
fn cut_utf16(text: &str, limit: usize) -> Option<&str> {
    let mut units = 0usize;
    for (index, c) in text.char_indices() {
        units += c.len_utf16();
        if units > limit {
            return Some(&text[..index]);
        }
    }
    None
}

/// The preview as markdown:
///
/// ```text
/// # Prompt stack preview: <id>
///
/// ## System prompt
///
/// <system>
///
/// ## Message layout
///
/// --- <title> (<role>) ---
/// <content>
///
/// ## Diagnostics
///
/// ERROR [item]: message
/// ```
///
/// The message layout is cut after [`PREVIEW_MESSAGE_LIMIT`] UTF-16 code units with a
/// `[preview truncated]` line; an empty list reads `(no messages)`. Without diagnostics the last
/// section reads `No diagnostics.`.
pub fn preview_text(preview: &Preview) -> String {
    let mut out = format!(
        "# Prompt stack preview: {}\n\n## System prompt\n\n{}\n\n## Message layout\n\n",
        preview.stack_id, preview.system.content
    );
    let layout = if preview.messages.is_empty() {
        "(no messages)".to_string()
    } else {
        preview
            .messages
            .iter()
            .map(|s| {
                format!(
                    "--- {} ({}) ---\n{}",
                    s.title,
                    s.role.as_deref().unwrap_or(""),
                    s.content
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    match cut_utf16(&layout, PREVIEW_MESSAGE_LIMIT) {
        Some(cut) => {
            out.push_str(cut);
            out.push_str("\n[preview truncated]");
        }
        None => out.push_str(&layout),
    }
    out.push_str("\n\n## Diagnostics\n\n");
    if preview.diagnostics.is_empty() {
        out.push_str("No diagnostics.");
    } else {
        let lines: Vec<String> = preview
            .diagnostics
            .iter()
            .map(|d| {
                let item = d
                    .item_id
                    .as_ref()
                    .map(|i| format!(" [{i}]"))
                    .unwrap_or_default();
                format!("{}{item}: {}", d.level.as_str().to_uppercase(), d.message)
            })
            .collect();
        out.push_str(&lines.join("\n"));
    }
    out.push('\n');
    out
}
