//! How active capability text reaches the model (B8: "prompt text applies at the next model
//! request"), and what a branch's pi-forge entries say about capabilities.
//!
//! Our delivery design, request-only and stateless: every provider request of a session with
//! active capabilities carries one projected message holding the text of every active
//! capability, in activation order, inserted just before the newest user message (at the end
//! when there is none). Nothing is written to the transcript, so a deactivation needs no "stop"
//! notice (the text is simply absent from the next request), compaction cannot lose or duplicate
//! it, and the prefix before the newest user message stays byte-identical across turns (the
//! provider's prompt cache keeps working).
//!
//! - [`TextPresentation::Native`] (models that accept system messages mid-conversation, Pi's
//!   `compat.supportsMidConvoSystemMessages`): a `role: "system"` message; Pi sends it in place.
//! - [`TextPresentation::User`] (every other model): a `role: "user"` message whose first line
//!   says it comes from pi-forge, not from the user.
//!
//! The delivery anchor (`pi-forge-capability-delivery`) is a cursor only: the host writes one
//! when the session is idle after a request carried the newest event.

use serde_json::{json, Value};

use super::events::CapabilityState;
use super::ops::{DeliveryAnchor, ToolsEntry, DELIVERY_ENTRY_TYPE, TOOLS_ENTRY_TYPE};
use super::view::TextPresentation;
use crate::session::SessionEntry;

/// Session entry type of a capability event.
pub const EVENT_ENTRY_TYPE: &str = "pi-forge-capability-event";

/// The tag that wraps the projected text.
pub const TAG: &str = "pi-forge-capabilities";

/// The first line of a user-role projection.
pub const USER_ATTRIBUTION: &str =
    "[pi-forge: capabilities active in this session. This note comes from the pi-forge extension, not from the user.]";

/// What a branch's entries say about capabilities.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BranchRecord {
    /// `pi-forge-capability-event` data, oldest first.
    pub events: Vec<Value>,
    /// The newest readable `pi-forge-capability-tools` data.
    pub tools: Option<ToolsEntry>,
    /// The newest readable `pi-forge-capability-delivery` data.
    pub anchor: Option<DeliveryAnchor>,
}

impl BranchRecord {
    /// Reads the branch's custom entries (oldest first). Unreadable tools or delivery entries
    /// are skipped (an older readable one stays in force); events are kept as they are, so the
    /// reducer reports a broken one.
    pub fn from_entries(entries: &[SessionEntry]) -> BranchRecord {
        let mut record = BranchRecord::default();
        for entry in entries {
            match entry.custom_type.as_str() {
                EVENT_ENTRY_TYPE => record.events.push(entry.data.clone()),
                TOOLS_ENTRY_TYPE => {
                    if let Ok(tools) = ToolsEntry::from_value(&entry.data) {
                        record.tools = Some(tools);
                    }
                }
                DELIVERY_ENTRY_TYPE => {
                    if let Ok(anchor) = DeliveryAnchor::from_value(&entry.data) {
                        record.anchor = Some(anchor);
                    }
                }
                _ => {}
            }
        }
        record
    }
}

/// The projected text of every active capability with content, or `None` when none has any.
pub fn projection_text(state: &CapabilityState, presentation: TextPresentation) -> Option<String> {
    let blocks: Vec<String> = state
        .active
        .iter()
        .filter(|a| !a.snapshot.content.is_empty())
        .map(|a| {
            let snapshot = &a.snapshot;
            let name = snapshot
                .name
                .as_deref()
                .map(|n| format!(" name=\"{}\"", attribute(n)))
                .unwrap_or_default();
            format!(
                "<capability source=\"{}\"{name} activation=\"{}\">\n{}\n</capability>",
                attribute(&snapshot.source.label()),
                attribute(&snapshot.activation_id),
                snapshot.content
            )
        })
        .collect();
    if blocks.is_empty() {
        return None;
    }
    let mut text = String::new();
    if presentation == TextPresentation::User {
        text.push_str(USER_ATTRIBUTION);
        text.push('\n');
    }
    text.push_str(&format!("<{TAG}>\n{}\n</{TAG}>", blocks.join("\n\n")));
    Some(text)
}

fn attribute(value: &str) -> String {
    crate::template::escape_xml(value)
}

/// Where the projection goes in a request of messages with these roles: before the newest
/// `user` message that is not the leading message, else at the end (never before index 1, so
/// the leading system message stays first).
pub fn insertion_index(roles: &[&str]) -> usize {
    roles
        .iter()
        .enumerate()
        .skip(1)
        .rev()
        .find(|(_, role)| **role == "user")
        .map_or(roles.len(), |(i, _)| i)
}

/// The message to insert and where, for a request whose messages have `roles`; `None` when no
/// active capability has text. `timestamp` is Pi's message timestamp (milliseconds).
pub fn project(
    state: &CapabilityState,
    presentation: TextPresentation,
    roles: &[&str],
    timestamp: f64,
) -> Option<(usize, Value)> {
    let text = projection_text(state, presentation)?;
    let message = match presentation {
        TextPresentation::Native => json!({
            "role": "system",
            "content": text,
            "timestamp": timestamp,
        }),
        TextPresentation::User => json!({
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": timestamp,
        }),
    };
    Some((insertion_index(roles), message))
}
