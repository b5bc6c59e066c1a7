//! The agent's control tool `forge_capability` (spec B8): argument decoding, the `list` and
//! `status` answers, and dispatch to the runtime operations ([`super::ops`]).
//!
//! Arguments have the fixed schema `{action: "list"|"status"|"enable"|"disable", id?: string}`:
//! only these two keys; `id` is forbidden for `list`/`status` and required (1–128 UTF-16 units)
//! for `enable`/`disable`. Every call re-checks trust, an active Preset and that the control tool
//! itself is registered, active and not blocked ([`agent_preconditions`]). `list` shows only the
//! bindings the agent could enable: `modelCallable`, not removing `forge_capability`, and passing
//! tool validation. `list` and `status` never include rule bodies.

use serde::Serialize;
use serde_json::{json, Value};

use super::events::CapabilityState;
use super::ops::{
    agent_preconditions, disable, enable_bound, validate_patches, ActivePreset, Caller, OpError,
    Plan, Session, Stamp, CONTROL_TOOL,
};
use super::snapshot::SnapshotSource;
use super::MAX_OPAQUE_ID_LENGTH;
use crate::json::{type_name, utf16_len};

/// One decoded `forge_capability` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolCall {
    List,
    Status,
    /// A binding id of the active Preset.
    Enable(String),
    /// An activation id, source label, key id or binding id.
    Disable(String),
}

/// The tool's JSON parameter schema, as registered with Pi.
pub fn parameters_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "status", "enable", "disable"]},
            "id": {"type": "string", "minLength": 1, "maxLength": MAX_OPAQUE_ID_LENGTH}
        },
        "required": ["action"],
        "additionalProperties": false
    })
}

/// Decodes the tool's arguments with the exact schema and messages.
pub fn decode_tool_call(args: &Value) -> Result<ToolCall, String> {
    let Value::Object(map) = args else {
        return Err(format!(
            "{CONTROL_TOOL} arguments must be an object, got {}.",
            type_name(args)
        ));
    };
    if let Some(extra) = map.keys().find(|k| *k != "action" && *k != "id") {
        return Err(format!(
            "Unknown argument {extra}: {CONTROL_TOOL} takes only action and id."
        ));
    }
    let action = match map.get("action") {
        Some(Value::String(a)) if ["list", "status", "enable", "disable"].contains(&a.as_str()) => {
            a.as_str()
        }
        _ => return Err("action must be one of list, status, enable, disable.".to_string()),
    };
    let id = map.get("id");
    match action {
        "list" | "status" => match id {
            None => Ok(if action == "list" {
                ToolCall::List
            } else {
                ToolCall::Status
            }),
            Some(_) => Err(format!("id is not allowed for action {action}.")),
        },
        _ => {
            let id = match id {
                None => return Err(format!("id is required for action {action}.")),
                Some(Value::String(id))
                    if !id.is_empty() && utf16_len(id) <= MAX_OPAQUE_ID_LENGTH =>
                {
                    id.clone()
                }
                Some(_) => {
                    return Err(format!(
                    "id must be a non-empty string of at most {MAX_OPAQUE_ID_LENGTH} characters."
                ))
                }
            };
            Ok(if action == "enable" {
                ToolCall::Enable(id)
            } else {
                ToolCall::Disable(id)
            })
        }
    }
}

/// Tool names of a patch, without the rule text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolNames {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// One binding the agent may enable (`list`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentChoice {
    /// The binding id (what `enable` takes).
    pub id: String,
    /// The capability, `scope:id`.
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub tools: ToolNames,
    /// The activation id when this binding is active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation_id: Option<String>,
}

/// One active capability (`status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatusItem {
    pub activation_id: String,
    /// `manual` or `scope:id`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `user` or `agent`.
    pub actor: &'static str,
    pub tools: ToolNames,
}

/// The `list` filter: bindings that are `modelCallable`, do not remove `forge_capability`, and
/// whose tool patch passes validation under the Preset.
pub fn agent_choices(
    preset: &ActivePreset,
    state: &CapabilityState,
    registered: &[String],
) -> Vec<AgentChoice> {
    preset
        .bindings
        .iter()
        .filter(|b| b.model_callable)
        .filter(|b| !b.capability.tools.remove.iter().any(|t| t == CONTROL_TOOL))
        .filter(|b| validate_patches(&[&b.capability.tools], Some(preset), registered).is_empty())
        .map(|b| AgentChoice {
            id: b.id.clone(),
            reference: b.reference.to_string(),
            name: b.capability.name.clone(),
            tools: ToolNames {
                add: b.capability.tools.add.clone(),
                remove: b.capability.tools.remove.clone(),
            },
            activation_id: state.active.iter().find_map(|a| {
                a.snapshot
                    .source
                    .binding()
                    .filter(|s| s.preset == preset.key && s.id == b.id)
                    .map(|_| a.snapshot.activation_id.clone())
            }),
        })
        .collect()
}

/// The `status` answer: every active capability, without its text.
pub fn agent_status(state: &CapabilityState) -> Vec<AgentStatusItem> {
    state
        .active
        .iter()
        .map(|a| AgentStatusItem {
            activation_id: a.snapshot.activation_id.clone(),
            source: a.snapshot.source.label(),
            binding: match &a.snapshot.source {
                SnapshotSource::Capability {
                    binding: Some(b), ..
                } => Some(b.id.clone()),
                _ => None,
            },
            name: a.snapshot.name.clone(),
            actor: a.actor.as_str(),
            tools: ToolNames {
                add: a.snapshot.tools.add.clone(),
                remove: a.snapshot.tools.remove.clone(),
            },
        })
        .collect()
}

/// What a `forge_capability` call produced.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentReply {
    List(Vec<AgentChoice>),
    Status(Vec<AgentStatusItem>),
    /// `enable`/`disable`: persist the plan as for any operation.
    Changed(Plan),
}

/// Runs one decoded call as the agent.
pub fn run_tool_call(
    session: &Session,
    call: &ToolCall,
    stamp: &mut Stamp,
) -> Result<AgentReply, OpError> {
    match call {
        ToolCall::List => {
            let (state, preset) = agent_preconditions(session)?;
            Ok(AgentReply::List(agent_choices(
                preset,
                &state,
                session.registered,
            )))
        }
        ToolCall::Status => {
            let (state, _) = agent_preconditions(session)?;
            Ok(AgentReply::Status(agent_status(&state)))
        }
        ToolCall::Enable(id) => {
            enable_bound(session, Caller::Agent, id, stamp).map(AgentReply::Changed)
        }
        ToolCall::Disable(id) => {
            disable(session, Caller::Agent, id, stamp).map(AgentReply::Changed)
        }
    }
}
