//! Provider payload → blocks.

use super::{block, hash_text, Block};
use crate::js::js_trim;
use crate::json::{parse_str, to_compact, to_pretty};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// Splits a provider request payload into blocks.
///
/// - An object with a non-null `serializedPayload` is read through that value instead (a string
///   there is parsed as JSON when it can be, and otherwise kept as text).
/// - Object keys are walked in order:
///   - `system` → one block keyed and roled `system` ([`payload_content_text`]);
///   - `messages` (an array) → one block per message, keyed
///     `message-<role slug>-<hashText(role + "\0" + text)>`, with `-2`, `-3`, … on repeated keys,
///     hashed together with `{section: "messages", value: message}`;
///   - any other key → `request-<key>`, role `request`, text `JSON.stringify({key: value}, null, 2)`.
/// - Anything else → a single `payload-text` block (role `payload`): a string as is, other values
///   as pretty JSON.
pub fn extract_blocks(payload: &Value) -> Vec<Block> {
    match preferred_payload(payload).as_ref() {
        Value::Object(map) => object_blocks(map),
        other => vec![payload_text_block(other)],
    }
}

fn preferred_payload(payload: &Value) -> Cow<'_, Value> {
    match payload.get("serializedPayload") {
        None | Some(Value::Null) => Cow::Borrowed(payload),
        Some(Value::String(text)) => match parse_str(text) {
            Ok(parsed) => Cow::Owned(parsed),
            Err(_) => Cow::Owned(Value::String(text.clone())),
        },
        Some(value) => Cow::Borrowed(value),
    }
}

fn object_blocks(map: &Map<String, Value>) -> Vec<Block> {
    let mut blocks = Vec::new();
    for (key, value) in map {
        match (key.as_str(), value) {
            ("system", _) => blocks.push(block(
                "system",
                "system",
                &payload_content_text(value),
                None,
            )),
            ("messages", Value::Array(messages)) => message_blocks(&mut blocks, messages),
            _ => blocks.push(request_block(key, value)),
        }
    }
    blocks
}

fn message_blocks(blocks: &mut Vec<Block>, messages: &[Value]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for message in messages {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let text = match message {
            Value::Object(fields) => fields
                .get("content")
                .map(payload_content_text)
                .unwrap_or_default(),
            other => payload_content_text(other),
        };
        let base = format!(
            "message-{}-{}",
            role_slug(role),
            hash_text(&format!("{role}\0{text}"))
        );
        let count = seen.entry(base.clone()).or_insert(0);
        *count += 1;
        let key = if *count == 1 {
            base
        } else {
            format!("{base}-{count}")
        };
        let serialized = json!({"section": "messages", "value": message});
        blocks.push(block(&key, role, &text, Some(&serialized)));
    }
}

/// `JSON.stringify({[key]: value}, null, 2)` under key `request-<key>`.
fn request_block(key: &str, value: &Value) -> Block {
    let mut wrapper = Map::new();
    wrapper.insert(key.to_string(), value.clone());
    let text = pretty(&Value::Object(wrapper));
    block(&format!("request-{key}"), "request", &text, None)
}

fn payload_text_block(value: &Value) -> Block {
    let text = match value {
        Value::String(text) => text.clone(),
        other => pretty(other),
    };
    block("payload-text", "payload", &text, None)
}

/// `JSON.stringify(value, null, 2)` (no trailing newline).
fn pretty(value: &Value) -> String {
    let mut text = to_pretty(value);
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

/// Lowercase ASCII letters and digits; every other run becomes one `-`; `unknown` when empty.
fn role_slug(role: &str) -> String {
    let mut slug = String::with_capacity(role.len());
    for c in role.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    while slug.ends_with('-') {
        slug.pop();
    }
    if slug.is_empty() {
        slug.push_str("unknown");
    }
    slug
}

/// The display text of a payload `system` value or message `content`:
/// - a string is itself; `null` is empty;
/// - an array of parts is joined with `\n` and trimmed (JavaScript `trim`), each part being:
///   a string as is, an image part (`type` containing `image`) as `[image content]`, a part with
///   a string `text` as that text, anything else as compact JSON;
/// - any other value is compact JSON.
pub fn payload_content_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        Value::Array(parts) => {
            let pieces: Vec<String> = parts.iter().map(part_text).collect();
            js_trim(&pieces.join("\n")).to_string()
        }
        other => to_compact(other),
    }
}

fn part_text(part: &Value) -> String {
    match part {
        Value::String(text) => text.clone(),
        Value::Object(fields) => {
            let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
            if kind.contains("image") {
                "[image content]".to_string()
            } else if let Some(text) = fields.get("text").and_then(Value::as_str) {
                text.to_string()
            } else {
                to_compact(part)
            }
        }
        Value::Null => String::new(),
        other => to_compact(other),
    }
}
