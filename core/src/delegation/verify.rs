//! The check of every provider request a delegated child is about to send, against the approved
//! plan, **before** it is sent.
//!
//! The child bridge hands each outgoing provider payload (Pi's `before_provider_request`) to the
//! host, and the request leaves only on an `ok` answer; on a mismatch the host kills the child's
//! process group first and records the run as `payload_mismatch`. The comparison lives here; the
//! bridge only forwards.
//!
//! The one wire format checked is OpenAI Chat Completions (Pi's `openai-completions` API, what the
//! OpenAI-compatible providers use); any other payload shape is a mismatch (fail closed). The rule,
//! for each request of the run:
//!
//! - **Keys.** The payload is an object with only the keys Pi 1.6 writes for such a request:
//!   `model`, `messages`, `stream`, `stream_options`, `store`, `max_tokens`,
//!   `max_completion_tokens`, `tools`, `reasoning_effort`, `prompt_cache_key`,
//!   `prompt_cache_retention`. Any other key (a sampling field such as `temperature`, `top_p`,
//!   `tool_choice`, …) is a mismatch: the plan sets none.
//! - **Model.** `model` is the plan's model id; `stream` is `true`; `stream_options` is absent or
//!   `{"include_usage": true}`; `store` is absent or `false`; `reasoning_effort` is absent when the
//!   plan's thinking level is `off`, else a thinking level not above the plan's.
//! - **Tools.** Exactly the approved tool names, each declared once as
//!   `{type: "function", function: {name, description, parameters, strict?}}` and nothing more
//!   (no tools at all when none were approved). Their descriptions and schemas are Pi's own; every
//!   key of the request except `messages` is pinned by the run's first request and must stay
//!   byte-for-byte the same in every later one (a tool or a sampling field cannot change in the
//!   middle of a run).
//! - **The approved prefix.** The messages start with exactly the approved system prompt
//!   (`{role: "system" | "developer", content}`), then each approved message exactly as Pi 1.6
//!   encodes it (every part and every key: a user message with two text parts is two parts, never
//!   their joined text; a part of any other kind, an image for instance, has no approved encoding
//!   and is a mismatch).
//! - **Nothing appended but the child's own turns.** The first request has exactly the approved
//!   prefix. A later request repeats the previous request's messages exactly and appends only
//!   what the child produced in this run: an assistant turn (its text and calls of approved tools)
//!   followed by the tool results answering those calls (`{role: "tool", content, tool_call_id}`,
//!   and Pi's `Attached image(s) from tool result:` user message when a result carried images).
//!   No user or system message can be added.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::context::portable_messages;
use super::plan::SealedPlan;

/// Why a request was refused: the first difference found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PayloadMismatch(pub String);

fn mismatch<T>(message: impl Into<String>) -> Result<T, PayloadMismatch> {
    Err(PayloadMismatch(message.into()))
}

/// The keys Pi 1.6 writes in an `openai-completions` request.
pub const ALLOWED_KEYS: [&str; 11] = [
    "model",
    "messages",
    "stream",
    "stream_options",
    "store",
    "max_tokens",
    "max_completion_tokens",
    "tools",
    "reasoning_effort",
    "prompt_cache_key",
    "prompt_cache_retention",
];

/// Thinking levels, lowest first.
const LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// What a person approved, as the checks need it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovedRequest {
    pub model_id: String,
    pub thinking_level: String,
    pub system_prompt: String,
    /// The approved messages as the child receives them (`{role, content}`).
    pub messages: Vec<Value>,
    pub tools: Vec<String>,
}

impl ApprovedRequest {
    pub fn from_plan(plan: &SealedPlan) -> ApprovedRequest {
        ApprovedRequest {
            model_id: plan.model.id.clone(),
            thinking_level: plan.thinking_level.clone(),
            system_prompt: plan.system_prompt.clone(),
            messages: portable_messages(&plan.messages),
            tools: plan.effective_tool_names.clone(),
        }
    }
}

/// Checks the requests of one run in order (it remembers the first request's pinned keys and
/// the previous request's messages).
#[derive(Clone, Debug)]
pub struct RequestVerifier {
    approved: ApprovedRequest,
    prefix: Result<Vec<Value>, PayloadMismatch>,
    pinned: Option<Map<String, Value>>,
    previous: Vec<Value>,
    requests: u64,
}

impl RequestVerifier {
    pub fn new(approved: ApprovedRequest) -> RequestVerifier {
        let prefix = expected_prefix(&approved);
        RequestVerifier {
            approved,
            prefix,
            pinned: None,
            previous: Vec::new(),
            requests: 0,
        }
    }

    /// How many requests passed.
    pub fn passed(&self) -> u64 {
        self.requests
    }

    /// Checks the next request of the run; `Ok` means it may be sent.
    pub fn check(&mut self, payload: &Value) -> Result<(), PayloadMismatch> {
        let n = self.requests + 1;
        self.check_inner(payload)
            .map_err(|e| PayloadMismatch(format!("request {n}: {}", e.0)))?;
        self.requests = n;
        Ok(())
    }

    fn check_inner(&mut self, payload: &Value) -> Result<(), PayloadMismatch> {
        let Some(map) = payload.as_object() else {
            return mismatch("the payload is not a JSON object");
        };
        for key in map.keys() {
            if !ALLOWED_KEYS.contains(&key.as_str()) {
                return mismatch(format!(
                    "the payload has the key {key:?}, which the approved plan does not set"
                ));
            }
        }
        let Some(messages) = map.get("messages").and_then(Value::as_array) else {
            return mismatch("the payload has no messages array (unsupported provider API)");
        };
        let rest: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| k.as_str() != "messages")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match &self.pinned {
            Some(pinned) => {
                if pinned != &rest {
                    let changed = ALLOWED_KEYS
                        .iter()
                        .find(|k| pinned.get(**k) != rest.get(**k))
                        .unwrap_or(&"?");
                    return mismatch(format!("{changed:?} differs from the run's first request"));
                }
            }
            None => {
                self.check_fields(&rest)?;
            }
        }
        let prefix = self.prefix.clone()?;
        if messages.len() < prefix.len() {
            return mismatch(format!(
                "the payload has {} messages, fewer than the {} approved",
                messages.len(),
                prefix.len()
            ));
        }
        for (i, (sent, want)) in messages.iter().zip(&prefix).enumerate() {
            // Pi writes the system prompt as a `developer` message for reasoning models of
            // providers that support the role; the text is the same.
            let developer = i == 0
                && !self.approved.system_prompt.is_empty()
                && sent == &json!({"role": "developer", "content": self.approved.system_prompt});
            if sent != want && !developer {
                return mismatch(format!(
                    "message {i} differs from the approved one: sent {}, approved {}",
                    crate::json::to_compact(sent),
                    crate::json::to_compact(want)
                ));
            }
        }
        if self.pinned.is_none() {
            if messages.len() != prefix.len() {
                return mismatch(format!(
                    "the first request has {} messages after the approved {}",
                    messages.len() - prefix.len(),
                    prefix.len()
                ));
            }
        } else {
            if messages.len() <= self.previous.len() {
                return mismatch("a later request appends nothing to the previous one");
            }
            if messages[..self.previous.len()] != self.previous[..] {
                return mismatch("a later request changes the messages of the previous one");
            }
            self.check_appended(&messages[self.previous.len()..])?;
        }
        if self.pinned.is_none() {
            self.pinned = Some(rest);
        }
        self.previous = messages.clone();
        Ok(())
    }

    /// The first request's non-message keys against the plan.
    fn check_fields(&self, rest: &Map<String, Value>) -> Result<(), PayloadMismatch> {
        let approved = &self.approved;
        if rest.get("model").and_then(Value::as_str) != Some(approved.model_id.as_str()) {
            return mismatch(format!(
                "the model is {}, the plan approved {:?}",
                rest.get("model")
                    .map(crate::json::to_compact)
                    .unwrap_or_else(|| "missing".into()),
                approved.model_id
            ));
        }
        if rest.get("stream") != Some(&Value::Bool(true)) {
            return mismatch("the request is not streamed (stream is not true)");
        }
        if let Some(options) = rest.get("stream_options") {
            if options != &json!({"include_usage": true}) {
                return mismatch(format!(
                    "stream_options is {}, not {{\"include_usage\":true}}",
                    crate::json::to_compact(options)
                ));
            }
        }
        if let Some(store) = rest.get("store") {
            if store != &Value::Bool(false) {
                return mismatch("store is not false");
            }
        }
        for key in ["max_tokens", "max_completion_tokens"] {
            if let Some(v) = rest.get(key) {
                if v.as_u64().filter(|n| *n > 0).is_none() {
                    return mismatch(format!("{key} is not a positive integer"));
                }
            }
        }
        for key in ["prompt_cache_key", "prompt_cache_retention"] {
            if let Some(v) = rest.get(key) {
                if !v.is_string() {
                    return mismatch(format!("{key} is not a string"));
                }
            }
        }
        let rank = |level: &str| LEVELS.iter().position(|l| *l == level);
        match rest.get("reasoning_effort") {
            None => {}
            Some(effort) => {
                let planned = rank(&approved.thinking_level).unwrap_or(0);
                match effort.as_str().and_then(rank) {
                    Some(sent) if planned > 0 && sent > 0 && sent <= planned => {}
                    _ => {
                        return mismatch(format!(
                            "reasoning_effort is {}, the plan approved thinking {}",
                            crate::json::to_compact(effort),
                            approved.thinking_level
                        ))
                    }
                }
            }
        }
        check_tools(rest.get("tools"), &approved.tools)
    }

    /// Messages a later request appends: the child's assistant turn, then the tool results
    /// answering its calls.
    fn check_appended(&self, appended: &[Value]) -> Result<(), PayloadMismatch> {
        let base = self.previous.len();
        let mut calls: BTreeSet<String> = BTreeSet::new();
        let mut seen_assistant = false;
        let mut seen_tool = false;
        for (offset, message) in appended.iter().enumerate() {
            let i = base + offset;
            let role = message.get("role").and_then(Value::as_str).unwrap_or("");
            match role {
                "assistant" if !seen_tool => {
                    seen_assistant = true;
                    check_assistant(i, message, &self.approved.tools, &mut calls)?;
                }
                "tool" if seen_assistant => {
                    seen_tool = true;
                    check_tool_result(i, message, &calls)?;
                }
                "user" if seen_tool && is_tool_images(message) => {}
                _ => {
                    return mismatch(format!(
                        "message {i} ({role:?}) was appended after the approved messages; only the child's own assistant turn and its tool results may follow"
                    ))
                }
            }
        }
        if !seen_tool {
            return mismatch(
                "a later request appends no tool result; the child only continues after tool calls",
            );
        }
        Ok(())
    }
}

fn check_assistant(
    i: usize,
    message: &Value,
    tools: &[String],
    calls: &mut BTreeSet<String>,
) -> Result<(), PayloadMismatch> {
    let Some(map) = message.as_object() else {
        return mismatch(format!("message {i} is not an object"));
    };
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "role" | "content" | "tool_calls" | "reasoning_content" | "reasoning_details"
        ) {
            return mismatch(format!(
                "appended assistant message {i} has the key {key:?}"
            ));
        }
    }
    match map.get("content") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(_) => {
            return mismatch(format!(
                "appended assistant message {i} has non-text content"
            ))
        }
    }
    if let Some(list) = map.get("tool_calls") {
        let Some(list) = list.as_array() else {
            return mismatch(format!("tool_calls of message {i} is not an array"));
        };
        for call in list {
            let name = call.pointer("/function/name").and_then(Value::as_str);
            let id = call.get("id").and_then(Value::as_str);
            match (name, id) {
                (Some(name), Some(id)) if tools.iter().any(|t| t == name) => {
                    calls.insert(id.to_string());
                }
                (Some(name), _) if !tools.iter().any(|t| t == name) => {
                    return mismatch(format!(
                        "message {i} calls the tool {name:?}, which the plan did not approve"
                    ))
                }
                _ => return mismatch(format!("a tool call of message {i} has no name or id")),
            }
        }
    }
    Ok(())
}

fn check_tool_result(
    i: usize,
    message: &Value,
    calls: &BTreeSet<String>,
) -> Result<(), PayloadMismatch> {
    let Some(map) = message.as_object() else {
        return mismatch(format!("message {i} is not an object"));
    };
    for key in map.keys() {
        if !matches!(key.as_str(), "role" | "content" | "tool_call_id" | "name") {
            return mismatch(format!("appended tool result {i} has the key {key:?}"));
        }
    }
    if !map.get("content").is_some_and(Value::is_string) {
        return mismatch(format!("tool result {i} has no text content"));
    }
    match map.get("tool_call_id").and_then(Value::as_str) {
        Some(id) if calls.contains(id) => Ok(()),
        _ => mismatch(format!(
            "tool result {i} answers no tool call of the child's appended turn"
        )),
    }
}

/// Pi's user message that carries a tool result's images.
fn is_tool_images(message: &Value) -> bool {
    let Some(parts) = message.get("content").and_then(Value::as_array) else {
        return false;
    };
    message.as_object().is_some_and(|m| m.len() == 2)
        && parts.first()
            == Some(&json!({"type": "text", "text": "Attached image(s) from tool result:"}))
        && parts.len() > 1
        && parts[1..].iter().all(|p| {
            p.get("type").and_then(Value::as_str) == Some("image_url")
                && p.as_object().is_some_and(|m| m.len() == 2)
        })
}

fn check_tools(tools: Option<&Value>, approved: &[String]) -> Result<(), PayloadMismatch> {
    let declared = match tools {
        None => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(other) => {
            return mismatch(format!(
                "tools is {}, not an array",
                crate::json::to_compact(other)
            ))
        }
    };
    let mut names = Vec::new();
    for tool in &declared {
        let Some(map) = tool.as_object() else {
            return mismatch("a declared tool is not an object");
        };
        let function = map.get("function").and_then(Value::as_object);
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        if map.len() != 2 || map.get("type") != Some(&json!("function")) {
            return mismatch(format!(
                "the tool {name:?} is not declared as {{type: \"function\", function}}"
            ));
        }
        let Some(function) = function else {
            return mismatch("a declared tool has no function");
        };
        for key in function.keys() {
            if !matches!(
                key.as_str(),
                "name" | "description" | "parameters" | "strict"
            ) {
                return mismatch(format!("the tool {name:?} has the key {key:?}"));
            }
        }
        if !function.get("description").is_some_and(Value::is_string)
            || !function.get("parameters").is_some_and(Value::is_object)
            || function.get("strict").is_some_and(|s| !s.is_boolean())
        {
            return mismatch(format!(
                "the tool {name:?} has no description and parameters schema"
            ));
        }
        names.push(name.to_string());
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    let mut want = approved.to_vec();
    want.sort();
    if sorted.len() != names.len() || sorted != want {
        return mismatch(format!(
            "the request declared the tools [{}], the plan approved [{}]",
            names.join(", "),
            want.join(", ")
        ));
    }
    Ok(())
}

/// The approved system prompt and messages as Pi 1.6 encodes them for Chat Completions. A message
/// part without an approved encoding makes every request a mismatch.
fn expected_prefix(approved: &ApprovedRequest) -> Result<Vec<Value>, PayloadMismatch> {
    let mut out = Vec::new();
    if !approved.system_prompt.is_empty() {
        out.push(json!({"role": "system", "content": approved.system_prompt}));
    }
    for (i, message) in approved.messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "user" | "custom" => {
                let parts = match content {
                    Value::String(text) if role == "user" => {
                        out.push(json!({"role": "user", "content": text}));
                        continue;
                    }
                    Value::String(text) => vec![json!({"type": "text", "text": text})],
                    Value::Array(parts) => parts.clone(),
                    _ => return mismatch(format!("approved message {i} has no content")),
                };
                let mut encoded = Vec::new();
                for part in &parts {
                    match (
                        part.get("type").and_then(Value::as_str),
                        part.get("text").and_then(Value::as_str),
                    ) {
                        (Some("text"), Some("")) => {}
                        (Some("text"), Some(text)) => {
                            encoded.push(json!({"type": "text", "text": text}))
                        }
                        (kind, _) => {
                            return mismatch(format!(
                            "approved message {i} has a {} part, which has no approved encoding",
                            kind.unwrap_or("untyped")
                        ))
                        }
                    }
                }
                if !encoded.is_empty() {
                    out.push(json!({"role": "user", "content": encoded}));
                }
            }
            "assistant" => {
                let text: String = match content {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => {
                        let mut text = String::new();
                        for part in parts {
                            match (
                                part.get("type").and_then(Value::as_str),
                                part.get("text").and_then(Value::as_str),
                            ) {
                                (Some("text"), Some(t)) if t.trim().is_empty() => {}
                                (Some("text"), Some(t)) => text.push_str(t),
                                (kind, _) => {
                                    return mismatch(format!(
                                        "approved message {i} has a {} part, which has no approved encoding",
                                        kind.unwrap_or("untyped")
                                    ))
                                }
                            }
                        }
                        text
                    }
                    _ => return mismatch(format!("approved message {i} has no content")),
                };
                if !text.is_empty() {
                    out.push(json!({"role": "assistant", "content": text}));
                }
            }
            other => {
                return mismatch(format!(
                    "approved message {i} has the role {other:?}, which has no approved encoding"
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approved() -> ApprovedRequest {
        ApprovedRequest {
            model_id: "fake-1".into(),
            thinking_level: "off".into(),
            system_prompt: "You are CHILD.".into(),
            messages: vec![
                json!({"role": "user", "content": [{"type": "text", "text": "Be brief."}]}),
                json!({"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}),
            ],
            tools: vec!["read".into(), "grep".into()],
        }
    }

    fn tool(name: &str) -> Value {
        json!({"type": "function", "function": {"name": name, "description": format!("{name} files"),
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}})
    }

    /// The request Pi 1.6 sends for `approved()` (as measured with a fake model).
    fn request() -> Value {
        json!({
            "model": "fake-1",
            "messages": [
                {"role": "system", "content": "You are CHILD."},
                {"role": "user", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "store": false,
            "max_completion_tokens": 1000,
            "tools": [tool("read"), tool("grep")],
        })
    }

    fn check(payload: &Value) -> Result<(), PayloadMismatch> {
        RequestVerifier::new(approved()).check(payload)
    }

    fn follow_up(first: &Value) -> Value {
        let mut next = first.clone();
        let messages = next["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]}));
        messages.push(json!({"role": "tool", "content": "file a", "tool_call_id": "call_1"}));
        next
    }

    #[test]
    fn the_request_pi_sends_for_the_plan_passes_and_so_does_its_tool_loop_follow_up() {
        let mut v = RequestVerifier::new(approved());
        let first = request();
        assert_eq!(v.check(&first), Ok(()));
        let second = follow_up(&first);
        assert_eq!(v.check(&second), Ok(()));
        assert_eq!(v.passed(), 2);
    }

    #[test]
    fn an_extra_message_is_a_mismatch() {
        let mut p = request();
        p["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "user", "content": [{"type": "text", "text": "more"}]}));
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: the first request has 1 messages after the approved 3".into()
            ))
        );
    }

    #[test]
    fn a_changed_model_is_a_mismatch() {
        let mut p = request();
        p["model"] = json!("fake-2");
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: the model is \"fake-2\", the plan approved \"fake-1\"".into()
            ))
        );
    }

    #[test]
    fn an_extra_tool_is_a_mismatch() {
        let mut p = request();
        p["tools"].as_array_mut().unwrap().push(tool("bash"));
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: the request declared the tools [read, grep, bash], the plan approved [grep, read]".into()
            ))
        );
    }

    #[test]
    fn a_tool_declared_twice_or_with_an_extra_key_is_a_mismatch() {
        let mut p = request();
        p["tools"].as_array_mut().unwrap().push(tool("read"));
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: the request declared the tools [read, grep, read], the plan approved [grep, read]".into()
            ))
        );
        let mut p = request();
        p["tools"][0]["function"]["examples"] = json!([]);
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: the tool \"read\" has the key \"examples\"".into()
            ))
        );
    }

    #[test]
    fn two_text_parts_are_not_their_joined_text() {
        let mut p = request();
        p["messages"][2]["content"] = json!([{"type": "text", "text": "AB"}]);
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: message 2 differs from the approved one: sent {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"AB\"}]}, approved {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},{\"type\":\"text\",\"text\":\"B\"}]}".into()
            ))
        );
        let mut p = request();
        p["messages"][2]["content"] = json!("AB");
        assert!(check(&p)
            .unwrap_err()
            .0
            .starts_with("request 1: message 2 differs from the approved one"));
    }

    #[test]
    fn an_image_part_added_or_changed_is_a_mismatch() {
        let mut p = request();
        p["messages"][1]["content"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}));
        assert!(check(&p)
            .unwrap_err()
            .0
            .starts_with("request 1: message 1 differs from the approved one"));
        // A plan with an image part has no approved encoding: nothing is sent.
        let mut a = approved();
        a.messages[1]["content"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}));
        assert_eq!(
            RequestVerifier::new(a).check(&request()),
            Err(PayloadMismatch(
                "request 1: approved message 1 has a image part, which has no approved encoding"
                    .into()
            ))
        );
    }

    #[test]
    fn an_extra_key_anywhere_is_a_mismatch() {
        let mut p = request();
        p["temperature"] = json!(0.2);
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: the payload has the key \"temperature\", which the approved plan does not set".into()
            ))
        );
        let mut p = request();
        p["messages"][1]["name"] = json!("someone");
        assert!(check(&p)
            .unwrap_err()
            .0
            .starts_with("request 1: message 1 differs from the approved one"));
    }

    #[test]
    fn a_changed_system_prompt_or_reasoning_effort_is_a_mismatch() {
        let mut p = request();
        p["messages"][0]["content"] = json!("You are SOMEONE ELSE.");
        assert!(check(&p)
            .unwrap_err()
            .0
            .starts_with("request 1: message 0 differs from the approved one"));
        let mut p = request();
        p["reasoning_effort"] = json!("high");
        assert_eq!(
            check(&p),
            Err(PayloadMismatch(
                "request 1: reasoning_effort is \"high\", the plan approved thinking off".into()
            ))
        );
    }

    #[test]
    fn a_follow_up_may_append_only_the_childs_own_turn() {
        let first = request();
        // A user message appended after the tool result.
        let mut v = RequestVerifier::new(approved());
        v.check(&first).unwrap();
        let mut next = follow_up(&first);
        next["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "user", "content": "now do something else"}));
        assert_eq!(
            v.check(&next),
            Err(PayloadMismatch("request 2: message 5 (\"user\") was appended after the approved messages; only the child's own assistant turn and its tool results may follow".into()))
        );
        // A call of a tool the plan did not approve.
        let mut v = RequestVerifier::new(approved());
        v.check(&first).unwrap();
        let mut next = follow_up(&first);
        next["messages"][3]["tool_calls"][0]["function"]["name"] = json!("bash");
        assert_eq!(
            v.check(&next),
            Err(PayloadMismatch(
                "request 2: message 3 calls the tool \"bash\", which the plan did not approve"
                    .into()
            ))
        );
        // A tool added in the middle of the run.
        let mut v = RequestVerifier::new(approved());
        v.check(&first).unwrap();
        let mut next = follow_up(&first);
        next["tools"].as_array_mut().unwrap().push(tool("find"));
        assert_eq!(
            v.check(&next),
            Err(PayloadMismatch(
                "request 2: \"tools\" differs from the run's first request".into()
            ))
        );
        // The approved prefix changed in a later request.
        let mut v = RequestVerifier::new(approved());
        v.check(&first).unwrap();
        let mut next = follow_up(&first);
        next["messages"][1]["content"][0]["text"] = json!("Be long.");
        assert!(v
            .check(&next)
            .unwrap_err()
            .0
            .starts_with("request 2: message 1 differs from the approved one"));
    }

    #[test]
    fn a_payload_of_another_api_fails_closed() {
        assert_eq!(
            check(&json!({"model": "fake-1", "input": []})),
            Err(PayloadMismatch(
                "request 1: the payload has the key \"input\", which the approved plan does not set"
                    .into()
            ))
        );
        assert_eq!(
            check(&json!("text")),
            Err(PayloadMismatch(
                "request 1: the payload is not a JSON object".into()
            ))
        );
    }
}
