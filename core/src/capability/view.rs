//! The session capability view (spec B10 `CapabilityStateView`), its guard `revision`, the
//! request bodies of the guarded session endpoints, and the activation picker
//! ([`available_choices`], [`enable_choice`]). Checking the guard against the live session (and
//! reading it again after the last resource read) stays with the host.
//!
//! `revision = fp({domain: "forge-capability-view-v1", instanceId, lifecycleRevision, sessionId,
//! leafId, lastEventId, active, effectiveTools, trusted, restoring, model, delivery,
//! preset: {key, tools, capabilities} | null, baseline})` with forge-core's canonical
//! fingerprint. Our choices where the spec names a field but not its form: `leafId`,
//! `lastEventId`, `model`, `preset`, `baseline` and the preset's `tools`/`capabilities` are JSON
//! `null` when absent; `active` is `[{actor, snapshot}]` with each snapshot in its stored form
//! (fingerprint included); `model` is `{provider, id}`; the preset `key` is `scope:id`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::events::CapabilityState;
pub use super::ops::Delivery;
use super::ops::{self, validate_patches, ActivePreset, Caller, OpError, Plan, Session, Stamp};
use super::snapshot::{CapabilitySnapshot, SnapshotSource};
use super::{Capability, MAX_OPAQUE_ID_LENGTH};
use crate::canonical::fingerprint;
use crate::id::{parse_selector, ResourceKey, Selector};
use crate::json::{object, type_name, utf16_len};
use crate::stack::PromptStack;
use crate::workspace::WorkspaceSnapshot;

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

/// How capability text is presented to the model: native system sections or a user notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextPresentation {
    Native,
    User,
}

/// `{sessionId, leafId | null, revision}`: what a mutation must echo.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewGuard {
    pub session_id: String,
    pub leaf_id: Option<String>,
    pub revision: String,
}

/// A tool patch in the view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewTools {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// One active capability in the view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveView {
    pub activation_id: String,
    /// `manual` or `scope:id`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `user` or `agent`.
    pub actor: String,
    pub content: String,
    pub tools: ViewTools,
}

/// `GET /api/capability-state` → `state`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// What the last tool sync changed in the effective tools (the host fills it in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_tool_change: Option<ToolChange>,
}

/// Tool names a sync added to and removed from the effective tools.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolChange {
    pub added: Vec<String>,
    pub removed: Vec<String>,
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
        last_tool_change: None,
        active: input
            .state
            .active
            .iter()
            .map(|a| ActiveView {
                activation_id: a.snapshot.activation_id.clone(),
                source: a.snapshot.source.label(),
                name: a.snapshot.name.clone(),
                actor: a.actor.as_str().to_string(),
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

/// The 409 message of a guard that no longer matches the live session.
pub const GUARD_CHANGED_MESSAGE: &str =
    "Session, branch or capability state changed; reload the capability state and try again.";

/// One entry of `GET /api/capability-state/available`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    pub kind: ChoiceKind,
    /// `scope:id` for a library capability, the binding id for a binding.
    pub id: String,
    /// `name ?? id`.
    pub label: String,
    pub content: String,
    pub tools: ViewTools,
    /// The snapshot fingerprint the activation would get (activation id excluded).
    pub fingerprint: String,
    /// Why the tool patch would be refused now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The content fingerprint an activation of `capability` from `source` would carry.
pub fn choice_fingerprint(source: SnapshotSource, capability: &Capability) -> String {
    CapabilitySnapshot::from_capability(String::new(), source, capability).fingerprint()
}

fn choice(
    kind: ChoiceKind,
    id: String,
    source: SnapshotSource,
    capability: &Capability,
    preset: Option<&ActivePreset>,
    registered: &[String],
) -> Choice {
    let problems = validate_patches(&[&capability.tools], preset, registered);
    Choice {
        kind,
        label: capability.name.clone().unwrap_or_else(|| id.clone()),
        id,
        content: capability.content.clone(),
        tools: ViewTools {
            add: capability.tools.add.clone(),
            remove: capability.tools.remove.clone(),
        },
        fingerprint: choice_fingerprint(source, capability),
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

/// The picker: every usable library capability (`kind: capability`, source `{kind, key}`), then
/// every binding of the active Preset, human-only ones included (`kind: binding`, source with
/// `binding`). A pure read.
pub fn available_choices(
    library: &WorkspaceSnapshot,
    preset: Option<&ActivePreset>,
    registered: &[String],
) -> Vec<Choice> {
    let mut out = Vec::new();
    for entry in library.capabilities.iter().filter(|e| e.usable()) {
        let source = SnapshotSource::Capability {
            key: entry.key.clone(),
            binding: None,
        };
        let capability = &entry.parsed.capability;
        out.push(choice(
            ChoiceKind::Capability,
            entry.key.to_string(),
            source,
            capability,
            preset,
            registered,
        ));
    }
    if let Some(preset) = preset {
        for binding in &preset.bindings {
            out.push(choice(
                ChoiceKind::Binding,
                binding.id.clone(),
                preset.source_of(binding),
                &binding.capability,
                Some(preset),
                registered,
            ));
        }
    }
    out
}

/// Why a picker activation was refused (the guard itself is the host's check).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// 409.
    #[error("A capability choice needs a qualified id (project:<id> or global:<id>), got {0}.")]
    NotQualified(String),
    /// 409: the resource changed since the picker computed the fingerprint.
    #[error("Capability source changed since it was shown; review it again before enabling.")]
    SourceChanged,
    /// `Restoring` → 503, `Untrusted` → 403, anything else → 409.
    #[error(transparent)]
    Op(#[from] OpError),
}

/// `POST /api/capability-state/enable` after the guard check: resolves the choice again,
/// recomputes its fingerprint, and commits as the user (never retries, never infers).
pub fn enable_choice(
    session: &Session,
    library: &WorkspaceSnapshot,
    request: &EnableRequest,
    stamp: &mut Stamp,
) -> Result<Plan, ChoiceError> {
    if session.restoring {
        return Err(OpError::Restoring.into());
    }
    if !session.trusted {
        return Err(OpError::Untrusted.into());
    }
    match request.kind {
        ChoiceKind::Capability => {
            let selector =
                parse_selector(&request.id).map_err(|e| OpError::Resolve(e.to_string()))?;
            let Selector::Scoped(key) = selector else {
                return Err(ChoiceError::NotQualified(request.id.clone()));
            };
            let entry = library
                .resolve_capability(&Selector::Scoped(key.clone()))
                .map_err(|e| OpError::Resolve(e.to_string()))?;
            let source = SnapshotSource::Capability { key, binding: None };
            if choice_fingerprint(source, &entry.parsed.capability) != request.fingerprint {
                return Err(ChoiceError::SourceChanged);
            }
            Ok(ops::enable(session, library, &request.id, stamp)?)
        }
        ChoiceKind::Binding => {
            let preset = session.preset.ok_or(OpError::NoActivePreset)?;
            let binding = preset
                .binding(&request.id)
                .ok_or_else(|| OpError::UnknownBinding {
                    preset: preset.key.to_string(),
                    id: request.id.clone(),
                })?;
            if choice_fingerprint(preset.source_of(binding), &binding.capability)
                != request.fingerprint
            {
                return Err(ChoiceError::SourceChanged);
            }
            Ok(ops::enable_bound(
                session,
                Caller::User,
                &request.id,
                stamp,
            )?)
        }
    }
}

/// Why a `POST /api/capability-state` mutation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MutationError {
    /// 409.
    #[error("{GUARD_CHANGED_MESSAGE}")]
    GuardChanged,
    /// `Restoring` → 409, `UnknownActivation` → 404, anything else → 409.
    #[error(transparent)]
    Op(#[from] OpError),
}

/// Applies a decoded `POST /api/capability-state` body as the user: the guard against the live
/// view's (`current`, 409), then the operation. The host re-reads the guard before persisting the
/// plan.
///
/// Unlike B10's 403, an untrusted project may deactivate and reset from the web too: both only
/// take capabilities away, and they are the recovery path the human CLI keeps there (the issue's
/// acceptance asks for exactly that). Activation stays refused ([`enable_choice`]).
pub fn apply_state_mutation(
    session: &Session,
    current: &ViewGuard,
    mutation: &StateMutation,
    stamp: &mut Stamp,
) -> Result<Plan, MutationError> {
    let guard = match mutation {
        StateMutation::Disable { guard, .. } | StateMutation::Reset { guard } => guard,
    };
    if guard != current {
        return Err(MutationError::GuardChanged);
    }
    Ok(match mutation {
        StateMutation::Disable { activation_id, .. } => {
            ops::disable_activation(session, activation_id, stamp)?
        }
        StateMutation::Reset { .. } => ops::reset(session, stamp)?,
    })
}
