//! The session capability view (spec B10 `CapabilityStateView`), its guard `revision`, and the
//! request bodies of the guarded session endpoints.
//!
//! `revision = fp({domain: "forge-capability-view-v1", instanceId, lifecycleRevision, sessionId,
//! leafId, lastEventId, active, effectiveTools, trusted, restoring, model, delivery,
//! preset: {key, tools, capabilities} | null, baseline})` with forge-core's canonical
//! fingerprint. Our choices where the spec names a field but not its form: `leafId`,
//! `lastEventId`, `model`, `preset`, `baseline` and the preset's `tools`/`capabilities` are JSON
//! `null` when absent; `active` is `[{actor, snapshot}]` with each snapshot in its stored form
//! (fingerprint included); `model` is `{provider, id}`; the preset `key` is `scope:id`.

use serde::Serialize;
use serde_json::{Map, Value};

use super::events::{Actor, CapabilityState};
use super::MAX_OPAQUE_ID_LENGTH;
use crate::canonical::fingerprint;
use crate::id::ResourceKey;
use crate::json::{object, type_name, utf16_len};
use crate::stack::PromptStack;

/// The `domain` tag of the view revision.
pub const VIEW_DOMAIN: &str = "forge-capability-view-v1";
/// The `domain` tag of the Preset inspection revision.
pub const PRESET_DOMAIN: &str = "forge-inspection-preset-v1";
/// Longest guard `sessionId` / `leafId`.
pub const MAX_GUARD_ID_LENGTH: usize = 1024;
/// Longest guard `revision`.
pub const MAX_GUARD_REVISION_LENGTH: usize = 256;
/// Longest choice fingerprint in an enable request.
pub const MAX_FINGERPRINT_LENGTH: usize = 256;

/// Whether capability text still has to reach the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    None,
    Pending,
    Prepared,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::None => "none",
            Delivery::Pending => "pending",
            Delivery::Prepared => "prepared",
        }
    }
}

/// How capability text is presented to the model: native system sections or a user notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TextPresentation {
    Native,
    User,
}

/// `{sessionId, leafId | null, revision}`: what a mutation must echo.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewGuard {
    pub session_id: String,
    pub leaf_id: Option<String>,
    pub revision: String,
}

/// A tool patch in the view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ViewTools {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// One active capability in the view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveView {
    pub activation_id: String,
    /// `manual` or `scope:id`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `user` or `agent`.
    pub actor: &'static str,
    pub content: String,
    pub tools: ViewTools,
}

/// `GET /api/capability-state` → `state`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityStateView {
    pub guard: ViewGuard,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset_revision: Option<String>,
    pub trusted: bool,
    pub restoring: bool,
    pub delivery: Delivery,
    pub text_presentation: TextPresentation,
    pub effective_tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_usage: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub active: Vec<ActiveView>,
}

/// Everything the view and its revision are made of.
#[derive(Clone, Copy, Debug)]
pub struct ViewInput<'a> {
    /// The extension instance (a reload makes a new one).
    pub instance_id: &'a str,
    /// Bumped on every lifecycle change of the runtime (session start/switch, dispose).
    pub lifecycle_revision: u64,
    pub session_id: &'a str,
    pub leaf_id: Option<&'a str>,
    pub state: &'a CapabilityState,
    pub effective_tools: &'a [String],
    pub trusted: bool,
    pub restoring: bool,
    /// `(provider, id)` of the session's model.
    pub model: Option<(&'a str, &'a str)>,
    pub delivery: Delivery,
    pub text_presentation: TextPresentation,
    /// The active Preset.
    pub preset: Option<(&'a ResourceKey, &'a PromptStack)>,
    /// The stored tool baseline.
    pub baseline: Option<&'a [String]>,
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::String).collect())
}

fn nullable(value: Option<Value>) -> Value {
    value.unwrap_or(Value::Null)
}

/// The object the view revision hashes.
pub fn revision_value(input: &ViewInput) -> Value {
    let active = input
        .state
        .active
        .iter()
        .map(|a| {
            object([
                ("actor", Some(Value::String(a.actor.as_str().to_string()))),
                ("snapshot", Some(a.snapshot.to_value())),
            ])
        })
        .collect();
    let model = input.model.map(|(provider, id)| {
        object([
            ("provider", Some(Value::String(provider.to_string()))),
            ("id", Some(Value::String(id.to_string()))),
        ])
    });
    let preset = input.preset.map(|(key, stack)| {
        object([
            ("key", Some(Value::String(key.to_string()))),
            (
                "tools",
                Some(nullable(stack.tools.as_ref().map(|p| p.to_value()))),
            ),
            (
                "capabilities",
                Some(nullable(stack.capabilities.clone().map(Value::Array))),
            ),
        ])
    });
    object([
        ("domain", Some(Value::String(VIEW_DOMAIN.to_string()))),
        (
            "instanceId",
            Some(Value::String(input.instance_id.to_string())),
        ),
        (
            "lifecycleRevision",
            Some(Value::from(input.lifecycle_revision)),
        ),
        (
            "sessionId",
            Some(Value::String(input.session_id.to_string())),
        ),
        (
            "leafId",
            Some(nullable(
                input.leaf_id.map(|l| Value::String(l.to_string())),
            )),
        ),
        (
            "lastEventId",
            Some(nullable(
                input.state.last_event_id.clone().map(Value::String),
            )),
        ),
        ("active", Some(Value::Array(active))),
        ("effectiveTools", Some(strings(input.effective_tools))),
        ("trusted", Some(Value::Bool(input.trusted))),
        ("restoring", Some(Value::Bool(input.restoring))),
        ("model", Some(nullable(model))),
        (
            "delivery",
            Some(Value::String(input.delivery.as_str().to_string())),
        ),
        ("preset", Some(nullable(preset))),
        ("baseline", Some(nullable(input.baseline.map(strings)))),
    ])
}

/// The guard `revision` (`sha256:v1:…`).
pub fn view_revision(input: &ViewInput) -> String {
    fingerprint(&revision_value(input))
}

/// `presetRevision = fp({domain: "forge-inspection-preset-v1", key, stack})`, `key` = `scope:id`,
/// `stack` = the normalized stack object.
pub fn preset_revision(key: &ResourceKey, stack: &PromptStack) -> String {
    fingerprint(&object([
        ("domain", Some(Value::String(PRESET_DOMAIN.to_string()))),
        ("key", Some(Value::String(key.to_string()))),
        ("stack", Some(stack.to_value())),
    ]))
}

/// Builds the view; `cacheUsage` and `problem` are left for the host to fill in.
pub fn build_view(input: &ViewInput) -> CapabilityStateView {
    CapabilityStateView {
        guard: ViewGuard {
            session_id: input.session_id.to_string(),
            leaf_id: input.leaf_id.map(str::to_string),
            revision: view_revision(input),
        },
        preset_revision: input.preset.map(|(key, stack)| preset_revision(key, stack)),
        trusted: input.trusted,
        restoring: input.restoring,
        delivery: input.delivery,
        text_presentation: input.text_presentation,
        effective_tools: input.effective_tools.to_vec(),
        cache_usage: None,
        problem: None,
        active: input
            .state
            .active
            .iter()
            .map(|a| ActiveView {
                activation_id: a.snapshot.activation_id.clone(),
                source: a.snapshot.source.label(),
                name: a.snapshot.name.clone(),
                actor: match a.actor {
                    Actor::User => "user",
                    Actor::Agent => "agent",
                    Actor::Lifecycle => "lifecycle",
                },
                content: a.snapshot.content.clone(),
                tools: ViewTools {
                    add: a.snapshot.tools.add.clone(),
                    remove: a.snapshot.tools.remove.clone(),
                },
            })
            .collect(),
    }
}

/// `POST /api/capability-state` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateMutation {
    Disable {
        activation_id: String,
        guard: ViewGuard,
    },
    Reset {
        guard: ViewGuard,
    },
}

/// Which picker entry `POST /api/capability-state/enable` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChoiceKind {
    Capability,
    Binding,
}

/// `POST /api/capability-state/enable` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnableRequest {
    pub guard: ViewGuard,
    pub kind: ChoiceKind,
    pub id: String,
    pub fingerprint: String,
}

fn exact_keys(map: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    if let Some(extra) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("Unsupported key {extra}."));
    }
    if let Some(missing) = allowed.iter().find(|k| !map.contains_key(**k)) {
        return Err(format!("{missing} is required."));
    }
    Ok(())
}

fn guard_string(value: &Value, field: &str, max: usize) -> Result<String, String> {
    match value {
        Value::String(s)
            if utf16_len(s) <= max && !s.chars().any(|c| (c as u32) < 0x20 || c == '\u{7f}') =>
        {
            Ok(s.clone())
        }
        Value::String(_) => Err(format!(
            "{field} must be at most {max} characters without control characters."
        )),
        other => Err(format!(
            "{field} must be a string, got {}.",
            type_name(other)
        )),
    }
}

/// Decodes a guard `{sessionId, leafId, revision}` (exact keys; `leafId` may be `null`).
pub fn decode_guard(value: &Value) -> Result<ViewGuard, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "guard must be an object, got {}.",
            type_name(value)
        ));
    };
    exact_keys(map, &["sessionId", "leafId", "revision"])?;
    let session_id = guard_string(&map["sessionId"], "guard.sessionId", MAX_GUARD_ID_LENGTH)?;
    let leaf_id = match &map["leafId"] {
        Value::Null => None,
        other => Some(guard_string(other, "guard.leafId", MAX_GUARD_ID_LENGTH)?),
    };
    let revision = guard_string(
        &map["revision"],
        "guard.revision",
        MAX_GUARD_REVISION_LENGTH,
    )?;
    Ok(ViewGuard {
        session_id,
        leaf_id,
        revision,
    })
}

fn bounded_id(value: &Value, field: &str) -> Result<String, String> {
    match value {
        Value::String(s) if !s.is_empty() && utf16_len(s) <= MAX_OPAQUE_ID_LENGTH => Ok(s.clone()),
        _ => Err(format!(
            "{field} must be a non-empty string of at most {MAX_OPAQUE_ID_LENGTH} characters."
        )),
    }
}

/// Decodes `{action: "disable", activationId, guard}` | `{action: "reset", guard}` (exact keys).
/// An error is a 400.
pub fn decode_state_mutation(body: &Value) -> Result<StateMutation, String> {
    let Value::Object(map) = body else {
        return Err(format!(
            "The body must be an object, got {}.",
            type_name(body)
        ));
    };
    match map.get("action").and_then(Value::as_str) {
        Some("disable") => {
            exact_keys(map, &["action", "activationId", "guard"])?;
            Ok(StateMutation::Disable {
                activation_id: bounded_id(&map["activationId"], "activationId")?,
                guard: decode_guard(&map["guard"])?,
            })
        }
        Some("reset") => {
            exact_keys(map, &["action", "guard"])?;
            Ok(StateMutation::Reset {
                guard: decode_guard(&map["guard"])?,
            })
        }
        _ => Err("action must be \"disable\" or \"reset\".".to_string()),
    }
}

/// Decodes `{guard, kind, id, fingerprint}` (exactly these keys). An error is a 400; whether a
/// `capability` id is qualified is checked later (409).
pub fn decode_enable_request(body: &Value) -> Result<EnableRequest, String> {
    let Value::Object(map) = body else {
        return Err(format!(
            "The body must be an object, got {}.",
            type_name(body)
        ));
    };
    exact_keys(map, &["guard", "kind", "id", "fingerprint"])?;
    let kind = match map["kind"].as_str() {
        Some("capability") => ChoiceKind::Capability,
        Some("binding") => ChoiceKind::Binding,
        _ => return Err("kind must be \"capability\" or \"binding\".".to_string()),
    };
    let fingerprint = match &map["fingerprint"] {
        Value::String(s) if !s.is_empty() && utf16_len(s) <= MAX_FINGERPRINT_LENGTH => s.clone(),
        _ => {
            return Err(format!(
                "fingerprint must be a non-empty string of at most {MAX_FINGERPRINT_LENGTH} characters."
            ))
        }
    };
    Ok(EnableRequest {
        guard: decode_guard(&map["guard"])?,
        kind,
        id: bounded_id(&map["id"], "id")?,
        fingerprint,
    })
}
