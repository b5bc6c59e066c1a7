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

/// `contentToText`: a string is itself; parts map to their text (`thinking` wrapped in
/// `<thinking>` lines, `toolCall` as `[toolCall: name]`, `image` as `[image]`), and non-empty
/// pieces are joined with newlines.
pub fn content_to_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let pieces: Vec<String> = parts
                .iter()
                .filter_map(|part| {
                    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                    match kind {
                        "text" => part.get("text").and_then(Value::as_str).map(str::to_string),
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
                    }
                })
                .filter(|p| !p.is_empty())
                .collect();
            pieces.join("\n")
        }
        _ => String::new(),
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
            .map(content_to_text)
            .unwrap_or_default(),
    }
}

/// The last user message whose text is not blank.
pub fn latest_user_message(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| role(m) == "user")
        .map(|m| m.get("content").map(content_to_text).unwrap_or_default())
        .find(|text| !crate::json_trim_is_empty(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_to_text_maps_parts() {
        let content = json!([
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "answer"},
            {"type": "text", "text": ""},
            {"type": "toolCall", "id": "c1", "name": "read"},
            {"type": "toolCall", "id": "c2"},
            {"type": "image", "data": "…"},
            {"type": "other"}
        ]);
        assert_eq!(
            content_to_text(&content),
            "<thinking>\nhmm\n</thinking>\nanswer\n[toolCall: read]\n[toolCall: unknown]\n[image]"
        );
        assert_eq!(content_to_text(&json!("plain")), "plain");
        assert_eq!(content_to_text(&json!(5)), "");
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
