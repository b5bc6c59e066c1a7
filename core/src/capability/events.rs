//! Capability events and the reducer (spec B7): what a Pi session branch says is active.
//!
//! Events are stored as Pi session entries (`pi-forge-capability-event`) with exact key sets:
//!
//! - `{schemaVersion: 1, eventId, op: "activate", actor: "user"|"agent", createdAt, snapshot}`
//! - `{schemaVersion: 1, eventId, op: "deactivate", actor: "user"|"agent"|"lifecycle", createdAt,
//!   activationId}`
//! - `{schemaVersion: 1, eventId, op: "reset", actor: "user", createdAt}`
//!
//! [`reduce`] folds a branch's events in branch order (timestamps play no part) into the active
//! list, or stops at the first bad event with its index: never a partial state. It does not check
//! authorization, registration or the Preset's policy; those are runtime checks.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::snapshot::CapabilitySnapshot;
use super::MAX_OPAQUE_ID_LENGTH;
use crate::id::is_valid_id;
use crate::json::{object, to_canonical, type_name, utf16_len};

/// The Pi session entry type of capability events.
pub const EVENT_TYPE: &str = "pi-forge-capability-event";

/// Who caused an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Actor {
    User,
    Agent,
    /// pi-forge itself, e.g. a Preset switch ending the previous Preset's bound activations.
    Lifecycle,
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::User => "user",
            Actor::Agent => "agent",
            Actor::Lifecycle => "lifecycle",
        }
    }
}

/// What an event does.
#[derive(Clone, Debug, PartialEq)]
pub enum EventOp {
    Activate(CapabilitySnapshot),
    Deactivate { activation_id: String },
    Reset,
}

/// One decoded event.
#[derive(Clone, Debug, PartialEq)]
pub struct CapabilityEvent {
    pub event_id: String,
    pub actor: Actor,
    /// Milliseconds since the epoch (finite, ≥ 0).
    pub created_at: f64,
    pub op: EventOp,
}

impl CapabilityEvent {
    /// The stored form (the inverse of [`decode_event`]): `{schemaVersion, eventId, op, actor,
    /// createdAt, snapshot | activationId}`. A whole-number `createdAt` is written as an integer.
    pub fn to_value(&self) -> Value {
        let created_at = if self.created_at.fract() == 0.0
            && self.created_at >= 0.0
            && self.created_at <= 9_007_199_254_740_991.0
        {
            Value::from(self.created_at as u64)
        } else {
            Value::from(self.created_at)
        };
        let (op, snapshot, activation_id) = match &self.op {
            EventOp::Activate(snapshot) => ("activate", Some(snapshot.to_value()), None),
            EventOp::Deactivate { activation_id } => (
                "deactivate",
                None,
                Some(Value::String(activation_id.clone())),
            ),
            EventOp::Reset => ("reset", None, None),
        };
        object([
            ("schemaVersion", Some(Value::from(1u64))),
            ("eventId", Some(Value::String(self.event_id.clone()))),
            ("op", Some(Value::String(op.to_string()))),
            (
                "actor",
                Some(Value::String(self.actor.as_str().to_string())),
            ),
            ("createdAt", Some(created_at)),
            ("snapshot", snapshot),
            ("activationId", activation_id),
        ])
    }
}

/// One active capability.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveCapability {
    pub snapshot: CapabilitySnapshot,
    pub actor: Actor,
    pub event_id: String,
    pub created_at: f64,
}

/// The state a branch's events produce.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapabilityState {
    /// In activation order.
    pub active: Vec<ActiveCapability>,
    pub last_event_id: Option<String>,
}

/// The first event the reducer could not accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Capability event {index}: {error}")]
pub struct ReduceError {
    pub index: usize,
    pub error: String,
}

fn expect_keys(map: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(format!("Unsupported key {extra} in a capability event.")),
        None => Ok(()),
    }
}

fn string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("{key} must be a string, got {}.", type_name(other))),
        None => Err(format!("{key} is required.")),
    }
}

fn opaque_id(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    let id = string(map, key)?;
    if !is_valid_id(id) || utf16_len(id) > MAX_OPAQUE_ID_LENGTH {
        return Err(format!(
            "{key} must be a resource id of at most {MAX_OPAQUE_ID_LENGTH} characters."
        ));
    }
    Ok(id.to_string())
}

/// Decodes one event with its exact key set and every B6/B7 check.
pub fn decode_event(value: &Value) -> Result<CapabilityEvent, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "A capability event must be an object, got {}.",
            type_name(value)
        ));
    };
    if map.get("schemaVersion").and_then(Value::as_u64) != Some(1) {
        return Err("schemaVersion must be 1.".to_string());
    }
    let event_id = opaque_id(map, "eventId")?;
    let created_at = match map.get("createdAt").and_then(Value::as_f64) {
        Some(n) if n.is_finite() && n >= 0.0 => n,
        _ => return Err("createdAt must be a finite number of milliseconds ≥ 0.".to_string()),
    };
    let actor = match string(map, "actor")? {
        "user" => Actor::User,
        "agent" => Actor::Agent,
        "lifecycle" => Actor::Lifecycle,
        other => return Err(format!("Unknown actor {other}.")),
    };
    const COMMON: [&str; 4] = ["schemaVersion", "eventId", "op", "actor"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        COMMON
            .iter()
            .chain(["createdAt"].iter())
            .chain(extra.iter())
            .copied()
            .collect()
    };
    let op = match string(map, "op")? {
        "activate" => {
            expect_keys(map, &with(&["snapshot"]))?;
            if actor == Actor::Lifecycle {
                return Err("An activation comes from the user or the agent.".to_string());
            }
            let snapshot =
                CapabilitySnapshot::from_value(map.get("snapshot").unwrap_or(&Value::Null))
                    .map_err(|d| {
                        d.first()
                            .map_or_else(|| "Invalid snapshot.".to_string(), |d| d.message.clone())
                    })?;
            match (&snapshot.source, actor) {
                (super::snapshot::SnapshotSource::Manual, Actor::Agent) => {
                    return Err("Only the user can add manual capability text.".to_string())
                }
                (
                    super::snapshot::SnapshotSource::Capability { binding: None, .. },
                    Actor::Agent,
                ) => {
                    return Err(
                        "The agent can only activate capabilities bound to the active Preset."
                            .to_string(),
                    )
                }
                _ => {}
            }
            EventOp::Activate(snapshot)
        }
        "deactivate" => {
            expect_keys(map, &with(&["activationId"]))?;
            EventOp::Deactivate {
                activation_id: opaque_id(map, "activationId")?,
            }
        }
        "reset" => {
            expect_keys(map, &with(&[]))?;
            if actor != Actor::User {
                return Err("Only the user can reset capabilities.".to_string());
            }
            EventOp::Reset
        }
        other => return Err(format!("Unknown capability event op {other}.")),
    };
    Ok(CapabilityEvent {
        event_id,
        actor,
        created_at,
        op,
    })
}

/// Folds a branch's events (oldest first) into the active state (B7).
pub fn reduce(events: &[Value]) -> Result<CapabilityState, ReduceError> {
    let mut state = CapabilityState::default();
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut used_activations: HashSet<String> = HashSet::new();
    for (index, value) in events.iter().enumerate() {
        let fail = |error: String| ReduceError { index, error };
        let event = decode_event(value).map_err(fail)?;
        let canonical = to_canonical(value);
        if let Some(previous) = seen.get(&event.event_id) {
            if *previous == canonical {
                continue;
            }
            return Err(fail(
                "Duplicate eventId with conflicting payload".to_string(),
            ));
        }
        seen.insert(event.event_id.clone(), canonical);
        state.last_event_id = Some(event.event_id.clone());
        match event.op {
            EventOp::Activate(snapshot) => {
                if !used_activations.insert(snapshot.activation_id.clone()) {
                    return Err(fail(format!(
                        "Activation id {} was already used in this branch",
                        snapshot.activation_id
                    )));
                }
                if let Some(binding) = snapshot.source.binding() {
                    let clash = state.active.iter().any(|a| {
                        a.snapshot
                            .source
                            .binding()
                            .is_some_and(|b| b.preset == binding.preset && b.id == binding.id)
                    });
                    if clash {
                        return Err(fail("Duplicate preset binding id".to_string()));
                    }
                }
                state.active.push(ActiveCapability {
                    snapshot,
                    actor: event.actor,
                    event_id: event.event_id,
                    created_at: event.created_at,
                });
            }
            EventOp::Deactivate { activation_id } => {
                let Some(position) = state
                    .active
                    .iter()
                    .position(|a| a.snapshot.activation_id == activation_id)
                else {
                    continue;
                };
                let item = &state.active[position];
                if event.actor == Actor::Agent && item.actor == Actor::User {
                    return Err(fail(format!(
                        "The agent cannot deactivate {activation_id}: the user activated it"
                    )));
                }
                if event.actor == Actor::Lifecycle && item.snapshot.source.binding().is_none() {
                    return Err(fail(format!(
                        "A Preset switch cannot deactivate {activation_id}: it is not bound to a Preset"
                    )));
                }
                state.active.remove(position);
            }
            EventOp::Reset => state.active.clear(),
        }
    }
    Ok(state)
}
