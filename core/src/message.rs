//! Helpers over Pi's message objects, which stay `serde_json::Value`s so that fields pi-forge
//! does not know survive every transformation.
//!
//! Roles seen in Pi conversations: `user`, `assistant`, `toolResult`, `custom`, `bashExecution`,
//! `branchSummary`, `compactionSummary`. Content is a string or an array of parts
//! (`text`, `thinking`, `toolCall`, `image`).

use serde_json::Value;

/// The message's `role`, or `""`.
pub fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

/// What the parts of a content array other than text become in [`content_text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherParts {
    /// The original's `contentToText`: `thinking` wrapped in `<thinking>` lines, `toolCall` as
    /// `[toolCall: name]`, `image` as `[image]`, any other part nothing. The preview, the
    /// `maxChars` budget and `runtime.lastUserMessage` read messages so.
    Labels,
    /// Compact JSON, so nothing is hidden: the Delegation approval view shows exactly the
    /// messages the approval binds.
    Json,
    /// Nothing: only what was said. A child run's answer and its transcript read so.
    Dropped,
}

/// The one reading of a message's `content` as text. A string is itself. In an array, a text
/// part is its text and any other part reads as `other` says; the non-empty pieces are joined
/// with one newline, as Pi's print mode writes a message's text parts. `null` is empty; any
/// other value is empty, or compact JSON with [`OtherParts::Json`].
pub fn content_text(content: &Value, other: OtherParts) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let pieces: Vec<String> = parts
                .iter()
                .filter_map(|part| part_text(part, other))
                .filter(|p| !p.is_empty())
                .collect();
            pieces.join("\n")
        }
        Value::Null => String::new(),
        value => match other {
            OtherParts::Json => crate::json::to_compact(value),
            OtherParts::Labels | OtherParts::Dropped => String::new(),
        },
    }
}

fn part_text(part: &Value, other: OtherParts) -> Option<String> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    if kind == "text" {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            return Some(text.to_string());
        }
    }
    match other {
        OtherParts::Dropped => None,
        OtherParts::Json => Some(crate::json::to_compact(part)),
        OtherParts::Labels => match kind {
            "thinking" => part
                .get("thinking")
                .and_then(Value::as_str)
                .map(|t| format!("<thinking>\n{t}\n</thinking>")),
            "toolCall" => Some(format!(
                "[toolCall: {}]",
                part.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
            )),
            "image" => Some("[image]".to_string()),
            _ => None,
        },
    }
}

/// The text the preview and the `maxChars` budget count: the content's text, plus
/// `Ran <command>\n<output>` for a `bashExecution`, and the summary of summary messages.
pub fn preview_text(message: &Value) -> String {
    match role(message) {
        "bashExecution" => {
            let command = message.get("command").and_then(Value::as_str).unwrap_or("");
            let output = message.get("output").and_then(Value::as_str).unwrap_or("");
            format!("Ran {command}\n{output}")
        }
        "branchSummary" | "compactionSummary" => message
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => message
            .get("content")
            .map(|c| content_text(c, OtherParts::Labels))
            .unwrap_or_default(),
    }
}

/// The last user message whose text is not blank.
pub fn latest_user_message(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| role(m) == "user")
        .map(|m| {
            m.get("content")
                .map(|c| content_text(c, OtherParts::Labels))
                .unwrap_or_default()
        })
        .find(|text| !crate::json_trim_is_empty(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_text_reads_parts_one_way_with_three_choices_for_the_rest() {
        let content = json!([
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "answer"},
            {"type": "text", "text": ""},
            {"type": "toolCall", "id": "c1", "name": "read"},
            {"type": "toolCall", "id": "c2"},
            {"type": "image", "data": "…"},
            {"type": "other"},
            {"type": "text", "text": "more"}
        ]);
        assert_eq!(
            content_text(&content, OtherParts::Labels),
            "<thinking>\nhmm\n</thinking>\nanswer\n[toolCall: read]\n[toolCall: unknown]\n[image]\nmore"
        );
        assert_eq!(
            content_text(&content, OtherParts::Json),
            concat!(
                r#"{"type":"thinking","thinking":"hmm"}"#,
                "\nanswer\n",
                r#"{"type":"toolCall","id":"c1","name":"read"}"#,
                "\n",
                r#"{"type":"toolCall","id":"c2"}"#,
                "\n",
                r#"{"type":"image","data":"…"}"#,
                "\n",
                r#"{"type":"other"}"#,
                "\nmore"
            )
        );
        assert_eq!(content_text(&content, OtherParts::Dropped), "answer\nmore");
        for other in [OtherParts::Labels, OtherParts::Json, OtherParts::Dropped] {
            assert_eq!(content_text(&json!("plain"), other), "plain");
            assert_eq!(content_text(&Value::Null, other), "");
        }
        assert_eq!(content_text(&json!(5), OtherParts::Labels), "");
        assert_eq!(content_text(&json!(5), OtherParts::Dropped), "");
        assert_eq!(
            content_text(&json!({"a": 1}), OtherParts::Json),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn preview_text_and_latest_user_message() {
        assert_eq!(
            preview_text(&json!({"role": "bashExecution", "command": "ls", "output": "a\nb"})),
            "Ran ls\na\nb"
        );
        assert_eq!(
            preview_text(&json!({"role": "compactionSummary", "summary": "earlier work"})),
            "earlier work"
        );
        let messages = vec![
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "reply"}]}),
            json!({"role": "user", "content": [{"type": "text", "text": "  "}]}),
        ];
        assert_eq!(latest_user_message(&messages).as_deref(), Some("first"));
        assert_eq!(latest_user_message(&[]), None);
    }
}
