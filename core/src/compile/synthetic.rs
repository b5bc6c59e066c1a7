//! Synthetic messages: what enabled `user`, `assistant` and `custom` items become.

use serde_json::{json, Value};

use crate::runtime::RuntimeSnapshot;
use crate::stack::Role;

/// `customType` of the custom messages pi-forge emits.
pub const CUSTOM_TYPE: &str = "pi-forge";

/// Builds the message for a non-system item. `visible` is the `display` flag of custom messages;
/// `stack_id` goes into their `details`.
pub(crate) fn synthetic_message(
    role: Role,
    text: String,
    runtime: &RuntimeSnapshot,
    visible: bool,
    stack_id: &str,
) -> Value {
    let timestamp = runtime.clock.epoch_ms;
    match role {
        Role::Assistant => {
            let model = runtime.model.as_ref();
            let api = model
                .and_then(|m| m.api.clone())
                .unwrap_or_else(|| "unknown".to_string());
            let provider = model
                .map(|m| m.provider.clone())
                .unwrap_or_else(|| "unknown".to_string());
            let model_id = model
                .map(|m| m.id.clone())
                .unwrap_or_else(|| "unknown".to_string());
            json!({
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "api": api,
                "provider": provider,
                "model": model_id,
                "usage": {
                    "input": 0,
                    "output": 0,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 0,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
                },
                "stopReason": "stop",
                "timestamp": timestamp
            })
        }
        // The original writes the text as one text part, like user and assistant messages.
        Role::Custom => json!({
            "role": "custom",
            "customType": CUSTOM_TYPE,
            "content": [{"type": "text", "text": text}],
            "display": visible,
            "details": {"stackId": stack_id},
            "timestamp": timestamp
        }),
        // `system` items never become messages; treat a stray one like a user message.
        Role::User | Role::System => json!({
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": timestamp
        }),
    }
}
