//! Runtime operations on a live session's capabilities (spec B8), as pure functions.
//!
//! Every operation reads a [`Session`] (the branch's capability events, trust, the active Preset
//! with its resolved bindings, the registered and active tools, the stored tool baseline) and
//! returns either an [`OpError`] or a [`Plan`]: exactly what the host persists, in order —
//!
//! 1. [`Plan::tools_entry`], when `Some`: a `pi-forge-capability-tools` entry (the durable tool
//!    baseline, written before the event);
//! 2. [`Plan::events`]: the `pi-forge-capability-event` entries to append, in order;
//! 3. then the host applies [`Plan::effective_tools`] (and, when idle, writes delivery anchors).
//!
//! A plan is only produced when the B8 commit checks pass: the prospective event list
//! (current + new) reduces ([`reduce`]), and, for activations, every active tool patch passes
//! [`patch_problems`] under the active Preset. Nothing here touches the session: ids and the
//! timestamp come in through a [`Stamp`], and a failed operation leaves no trace.
//!
//! Decisions where the spec is silent:
//! - A deactivation or reset is never refused for tool-patch problems: it only takes patches away,
//!   and it is the recovery path. Activations and Preset switches validate.
//! - The tools entry written with a plan holds `lastApplied` = the plan's effective tools (what
//!   the host applies next). It is written only when a selection policy (an effective allow/deny,
//!   or `tools.initial`) or a patch is in force and the entry differs from the stored one; with
//!   neither, the reconciled baseline is restored and nothing is written ("forget").
//! - An activation takes two ids from the stamp: the event id first, then the activation id.
//! - No-ops (already selected, nothing matched for the user, nothing to reset, an idempotent
//!   re-enable) persist nothing: `tools_entry` is `None` and `events` is empty.
//! - A new event id already used on the branch is refused ([`OpError::EventIdReused`]) even
//!   where the reducer would skip an identical repeat: a plan's events always take effect.
//! - Every mutation, the user's recovery included, fails closed while the runtime restores
//!   ([`Session::restoring`]); only activations and agent calls need trust (the web's own
//!   trust rule is in [`super::view`]). A Preset switch needs no trust: it only ends bindings.
//! - The user's `disable` takes a selector (CLI); the web's [`disable_activation`] takes an exact
//!   activation id and reports an unknown one as an error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::events::{reduce, Actor, CapabilityEvent, CapabilityState, EventOp, ReduceError};
use super::snapshot::{BindingSource, CapabilitySnapshot, SnapshotSource};
use super::tools::{blocks_tool, effective_tools, patch_problems, reconcile_baseline};
use super::{effective_from_parsed, parse_bindings, Capability, ToolPatch};
use crate::diag::Diagnostic;
use crate::id::{parse_selector, ResourceKey};
use crate::stack::Policy;
use crate::workspace::{StackEntry, WorkspaceSnapshot};

/// Session entry type of the durable tool baseline.
pub const TOOLS_ENTRY_TYPE: &str = "pi-forge-capability-tools";
/// Session entry type of the delivery anchor (cursor only, never a dialogue message).
pub const DELIVERY_ENTRY_TYPE: &str = "pi-forge-capability-delivery";
/// The agent's control tool.
pub const CONTROL_TOOL: &str = "forge_capability";

/// `pi-forge-capability-tools` data: the tools active before pi-forge filtered them (reconciled
/// with outside changes) and the set pi-forge applied last.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsEntry {
    pub baseline: Vec<String>,
    pub last_applied: Vec<String>,
}

impl ToolsEntry {
    /// `{baseline, lastApplied}`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Decodes the entry's data (exact keys, arrays of strings).
    pub fn from_value(value: &Value) -> Result<ToolsEntry, String> {
        ToolsEntry::deserialize(value).map_err(|e| format!("Invalid {TOOLS_ENTRY_TYPE} entry: {e}"))
    }
}

/// `pi-forge-capability-delivery` data: `{schemaVersion: 1, throughEventId}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeliveryAnchor {
    pub schema_version: u8,
    pub through_event_id: String,
}

impl DeliveryAnchor {
    pub fn new(through_event_id: impl Into<String>) -> Self {
        DeliveryAnchor {
            schema_version: 1,
            through_event_id: through_event_id.into(),
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Decodes the entry's data; `schemaVersion` must be 1.
    pub fn from_value(value: &Value) -> Result<DeliveryAnchor, String> {
        let anchor = DeliveryAnchor::deserialize(value)
            .map_err(|e| format!("Invalid {DELIVERY_ENTRY_TYPE} entry: {e}"))?;
        if anchor.schema_version != 1 {
            return Err(format!(
                "Invalid {DELIVERY_ENTRY_TYPE} entry: schemaVersion must be 1."
            ));
        }
        Ok(anchor)
    }
}

/// One binding of the active Preset, resolved (B4 result).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedBinding {
    /// The effective binding id (`id ?? ref.id`).
    pub id: String,
    /// The capability the ref resolved to (`scope:id`).
    pub reference: ResourceKey,
    pub model_callable: bool,
    /// The effective capability (overrides applied).
    pub capability: Capability,
}

/// The first binding of a Preset that does not resolve (B4: the first failure aborts).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Capability binding at index {index}: {error}")]
pub struct BindingError {
    pub index: usize,
    pub error: String,
}

/// The active Preset as the operations need it: its key, tool policy and resolved bindings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivePreset {
    pub key: ResourceKey,
    pub policy: Option<Policy>,
    pub bindings: Vec<ResolvedBinding>,
}

impl ActivePreset {
    /// Resolves a loaded Preset's bindings against the workspace (B4): structural problems, a
    /// target that does not resolve, or overrides that do not apply abort with the index.
    pub fn resolve(
        workspace: &WorkspaceSnapshot,
        stack: &StackEntry,
    ) -> Result<ActivePreset, BindingError> {
        let owner = stack.key.scope;
        let mut bindings = Vec::new();
        if let Some(items) = &stack.parsed.stack.capabilities {
            let (parsed, diagnostics) = parse_bindings(&Value::Array(items.clone()), owner);
            if let Some(first) = diagnostics.iter().find(|d| d.is_error()) {
                return Err(BindingError {
                    index: field_index(first),
                    error: first.message.clone(),
                });
            }
            for (index, binding) in parsed.iter().enumerate() {
                let fail = |error: String| BindingError { index, error };
                let target = workspace
                    .binding_target(owner, &binding.reference)
                    .map_err(|e| fail(e.to_string()))?;
                let capability = effective_from_parsed(&target.parsed, binding.overrides.as_ref())
                    .map_err(|d| {
                        fail(
                            d.first().map_or_else(
                                || "invalid overrides".to_string(),
                                |d| d.message.clone(),
                            ),
                        )
                    })?;
                bindings.push(ResolvedBinding {
                    id: binding.effective_id().to_string(),
                    reference: target.key.clone(),
                    model_callable: binding.model_callable,
                    capability,
                });
            }
        }
        Ok(ActivePreset {
            key: stack.key.clone(),
            policy: stack.parsed.stack.tools.clone(),
            bindings,
        })
    }

    /// The binding with this effective id.
    pub fn binding(&self, id: &str) -> Option<&ResolvedBinding> {
        self.bindings.iter().find(|b| b.id == id)
    }

    /// The binding's snapshot source: `{kind: capability, key: ref, binding: {preset, id}}`.
    pub fn source_of(&self, binding: &ResolvedBinding) -> SnapshotSource {
        SnapshotSource::Capability {
            key: binding.reference.clone(),
            binding: Some(BindingSource {
                preset: self.key.clone(),
                id: binding.id.clone(),
            }),
        }
    }
}

/// `capabilities[3].ref` → 3 (0 when the field names no index).
fn field_index(d: &Diagnostic) -> usize {
    d.field
        .as_deref()
        .and_then(|f| f.strip_prefix("capabilities["))
        .and_then(|rest| rest.split(']').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// What the operations read from the live session.
#[derive(Clone, Copy, Debug)]
pub struct Session<'a> {
    /// The branch's `pi-forge-capability-event` data, oldest first.
    pub events: &'a [Value],
    pub trusted: bool,
    /// The runtime is restoring the session (or disposed): every mutation fails closed.
    pub restoring: bool,
    pub preset: Option<&'a ActivePreset>,
    /// Registered tool names, in registry order.
    pub registered: &'a [String],
    /// The tools active right now.
    pub current_tools: &'a [String],
    /// The branch's newest `pi-forge-capability-tools` data. When the branch has none but the
    /// host remembers the tools from before pi-forge filtered them, pass those as `baseline`
    /// (and what it applied last as `lastApplied`); with `None` the current tools are the
    /// baseline.
    pub tools_entry: Option<&'a ToolsEntry>,
}

/// The ids and timestamp an operation may use; the caller owns the randomness and the clock.
pub struct Stamp<'a> {
    /// Milliseconds since the epoch for every event of the operation.
    pub created_at: f64,
    /// A fresh opaque id per call (UUIDv4 in practice).
    pub next_id: &'a mut dyn FnMut() -> String,
}

/// Who asks (lifecycle deactivations come from [`switch_preset`] only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Caller {
    User,
    Agent,
}

impl Caller {
    pub fn actor(self) -> Actor {
        match self {
            Caller::User => Actor::User,
            Caller::Agent => Actor::Agent,
        }
    }
}

/// Why an operation was refused. Nothing was persisted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("Capabilities are being restored; try again when the session is ready.")]
    Restoring,
    #[error("Active capabilities require a trusted project; trust it, or remove them with /capability disable or /capability reset.")]
    UntrustedActive,
    #[error("The capability history of this branch is invalid: {0}")]
    Log(ReduceError),
    #[error("Capabilities require a trusted project; /capability disable and /capability reset stay available.")]
    Untrusted,
    #[error("No Preset is active.")]
    NoActivePreset,
    #[error("The capability bindings of Preset {preset} do not resolve: {error}")]
    Bindings { preset: String, error: BindingError },
    #[error("{0}")]
    Resolve(String),
    #[error("Preset {preset} has no capability binding {id}.")]
    UnknownBinding { preset: String, id: String },
    #[error("Capability binding {0} is not authorized for agent use.")]
    NotAuthorized(String),
    #[error("Capability binding {0} removes forge_capability; the agent cannot enable it.")]
    RemovesControl(String),
    #[error("forge_capability is unavailable: it is {0}.")]
    ControlUnavailable(&'static str),
    #[error("Capability binding {0}: stale binding identity; disable the old activation")]
    StaleBinding(String),
    #[error("{}", .0.join("; "))]
    ToolPatch(Vec<String>),
    #[error("Invalid capability: {0}")]
    Invalid(String),
    #[error("No matching active capability: {0}")]
    NoMatch(String),
    #[error("No active capability has the activation id {0}.")]
    UnknownActivation(String),
    #[error("{selector} matches {} active capabilities ({}); use an activation id.", .ids.len(), .ids.join(", "))]
    Ambiguous { selector: String, ids: Vec<String> },
    #[error("The agent cannot disable {0}: it did not enable it through a Preset binding.")]
    NotAgentOwned(String),
    #[error("The agent cannot disable {activation_id}: binding {binding} is no longer model-callable in the active Preset.")]
    NoLongerCallable {
        activation_id: String,
        binding: String,
    },
    #[error("Preset switch rejected: {}", .0.join("; "))]
    SwitchConflict(Vec<String>),
    #[error("Saving the active Preset would break active capabilities: {}", .0.join("; "))]
    PresetSaveConflict(Vec<String>),
    #[error("The change would break the capability history: {0}")]
    Reduce(ReduceError),
    #[error("Event id {0} is already used in this branch.")]
    EventIdReused(String),
}

/// What an operation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new activation, or (`idempotent`) the binding's existing one.
    Activated {
        activation_id: String,
        idempotent: bool,
    },
    Deactivated {
        activation_id: String,
    },
    /// Reset: the activations it ended.
    Reset {
        cleared: Vec<String>,
    },
    /// Preset switch: the bound activations the lifecycle ended.
    Switched {
        deactivated: Vec<String>,
    },
    /// Nothing to do; the message tells the user why.
    Unchanged {
        message: String,
    },
}

/// What to persist, in order, and the resulting state.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Write first (`pi-forge-capability-tools`), when `Some`.
    pub tools_entry: Option<ToolsEntry>,
    /// Then append these `pi-forge-capability-event` data values, in order.
    pub events: Vec<Value>,
    /// The state after the events.
    pub state: CapabilityState,
    /// The tools to apply after the events.
    pub effective_tools: Vec<String>,
    pub outcome: Outcome,
}

/// The result of a tool sync (B9 "Sync").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSync {
    /// The reconciled baseline.
    pub baseline: Vec<String>,
    /// The tools to apply.
    pub effective: Vec<String>,
    /// The entry to persist, when it differs from the stored one.
    pub entry: Option<ToolsEntry>,
}

/// B9 sync: reconcile the stored baseline with the current tools (or take the current tools as
/// the baseline when nothing is stored), compute the effective tools, and say which entry to
/// persist. With no selection policy (no effective allow/deny, no `initial`) and no patches the
/// reconciled baseline is restored and nothing is persisted.
pub fn sync_tools(
    policy: Option<&Policy>,
    registered: &[String],
    current: &[String],
    stored: Option<&ToolsEntry>,
    patches: &[&ToolPatch],
) -> ToolSync {
    let baseline = match stored {
        Some(entry) => reconcile_baseline(&entry.baseline, &entry.last_applied, current),
        None => current.to_vec(),
    };
    let selection = policy.is_some_and(|p| p.is_effective() || p.initial.is_some());
    if !selection && patches.is_empty() {
        return ToolSync {
            effective: baseline.clone(),
            baseline,
            entry: None,
        };
    }
    let registered_refs: Vec<&str> = registered.iter().map(String::as_str).collect();
    let baseline_refs: Vec<&str> = baseline.iter().map(String::as_str).collect();
    let effective: Vec<String> = effective_tools(policy, &registered_refs, &baseline_refs, patches)
        .into_iter()
        .map(str::to_string)
        .collect();
    let entry = ToolsEntry {
        baseline: baseline.clone(),
        last_applied: effective.clone(),
    };
    let entry = (Some(&entry) != stored).then_some(entry);
    ToolSync {
        baseline,
        effective,
        entry,
    }
}

/// The active tool patches, in activation order.
pub fn active_patches(state: &CapabilityState) -> Vec<&ToolPatch> {
    state.active.iter().map(|a| &a.snapshot.tools).collect()
}

/// The patch that offers `forge_capability` to the model: present while the active Preset has a
/// model-callable binding (our rule for "registered only while such a Preset is active": the
/// bridge registers the tool inactive, and this patch activates it). The Preset's ceiling and
/// every capability removal still win over it, like over any capability `add`.
pub fn control_patch(preset: Option<&ActivePreset>) -> Option<ToolPatch> {
    preset
        .is_some_and(|p| p.bindings.iter().any(|b| b.model_callable))
        .then(|| ToolPatch {
            add: vec![CONTROL_TOOL.to_string()],
            remove: Vec::new(),
        })
}

/// The patches a tool sync applies: the active capabilities' (activation order), then the
/// control tool's offer ([`control_patch`]).
pub fn sync_patches<'a>(
    state: &'a CapabilityState,
    control: Option<&'a ToolPatch>,
) -> Vec<&'a ToolPatch> {
    let mut patches = active_patches(state);
    patches.extend(control);
    patches
}

/// The branch's current state; an unreadable history fails closed.
pub fn current_state(session: &Session) -> Result<CapabilityState, OpError> {
    reduce(session.events).map_err(OpError::Log)
}

/// Every mutation needs a runtime that is not restoring.
fn ready(session: &Session) -> Result<(), OpError> {
    if session.restoring {
        Err(OpError::Restoring)
    } else {
        Ok(())
    }
}

/// Tool sync in an untrusted project refuses while capabilities are active (B8); `disable` and
/// `reset` stay usable as the way out.
pub fn check_sync_trust(trusted: bool, state: &CapabilityState) -> Result<(), OpError> {
    if !trusted && !state.active.is_empty() {
        Err(OpError::UntrustedActive)
    } else {
        Ok(())
    }
}

fn policy_of(preset: Option<&ActivePreset>) -> Option<&Policy> {
    preset.and_then(|p| p.policy.as_ref())
}

fn label_of(preset: Option<&ActivePreset>) -> String {
    preset.map_or_else(|| "none".to_string(), |p| p.key.to_string())
}

/// The tool-patch problems of `patches` under `preset` (B9 `validateCapabilities`).
pub fn validate_patches(
    patches: &[&ToolPatch],
    preset: Option<&ActivePreset>,
    registered: &[String],
) -> Vec<String> {
    let registered: Vec<&str> = registered.iter().map(String::as_str).collect();
    patch_problems(patches, policy_of(preset), &registered, &label_of(preset))
}

/// Commit checks and the plan: reduce the prospective events, validate (activations), sync.
fn finish(
    session: &Session,
    preset: Option<&ActivePreset>,
    events: Vec<CapabilityEvent>,
    validate: bool,
    outcome: Outcome,
) -> Result<Plan, OpError> {
    // A repeated event id would be skipped (or refused) by the reducer: never let a plan claim
    // an effect its events do not have.
    for (i, event) in events.iter().enumerate() {
        let id = event.event_id.as_str();
        let earlier = events[..i].iter().any(|e| e.event_id == id)
            || session
                .events
                .iter()
                .any(|e| e.get("eventId").and_then(Value::as_str) == Some(id));
        if earlier {
            return Err(OpError::EventIdReused(id.to_string()));
        }
    }
    let events: Vec<Value> = events.iter().map(CapabilityEvent::to_value).collect();
    let mut prospective = session.events.to_vec();
    prospective.extend(events.iter().cloned());
    let state = reduce(&prospective).map_err(OpError::Reduce)?;
    let patches = active_patches(&state);
    if validate {
        let problems = validate_patches(&patches, preset, session.registered);
        if !problems.is_empty() {
            return Err(OpError::ToolPatch(problems));
        }
    }
    let control = control_patch(preset);
    let sync = sync_tools(
        policy_of(preset),
        session.registered,
        session.current_tools,
        session.tools_entry,
        &sync_patches(&state, control.as_ref()),
    );
    Ok(Plan {
        tools_entry: sync.entry,
        events,
        effective_tools: sync.effective,
        state,
        outcome,
    })
}

/// A plan that persists nothing.
fn unchanged(session: &Session, state: CapabilityState, outcome: Outcome) -> Plan {
    let control = control_patch(session.preset);
    let sync = sync_tools(
        policy_of(session.preset),
        session.registered,
        session.current_tools,
        session.tools_entry,
        &sync_patches(&state, control.as_ref()),
    );
    Plan {
        tools_entry: None,
        events: Vec::new(),
        effective_tools: sync.effective,
        state,
        outcome,
    }
}

fn activation(
    stamp: &mut Stamp,
    actor: Actor,
    source: SnapshotSource,
    capability: &Capability,
) -> (CapabilityEvent, String) {
    let event_id = (stamp.next_id)();
    let activation_id = (stamp.next_id)();
    let snapshot = CapabilitySnapshot::from_capability(activation_id.clone(), source, capability);
    (
        CapabilityEvent {
            event_id,
            actor,
            created_at: stamp.created_at,
            op: EventOp::Activate(snapshot),
        },
        activation_id,
    )
}

fn deactivation(stamp: &mut Stamp, actor: Actor, activation_id: &str) -> CapabilityEvent {
    CapabilityEvent {
        event_id: (stamp.next_id)(),
        actor,
        created_at: stamp.created_at,
        op: EventOp::Deactivate {
            activation_id: activation_id.to_string(),
        },
    }
}

/// add (manual, user): `text` becomes a snapshot `{source: manual, content: text, tools: {[], []}}`.
pub fn add(session: &Session, text: &str, stamp: &mut Stamp) -> Result<Plan, OpError> {
    ready(session)?;
    if !session.trusted {
        return Err(OpError::Untrusted);
    }
    current_state(session)?;
    let capability = Capability {
        content: text.to_string(),
        ..Capability::default()
    };
    let (event, activation_id) =
        activation(stamp, Actor::User, SnapshotSource::Manual, &capability);
    if let EventOp::Activate(snapshot) = &event.op {
        if let Some(first) = snapshot.validate().into_iter().find(Diagnostic::is_error) {
            return Err(OpError::Invalid(first.message));
        }
    }
    finish(
        session,
        session.preset,
        vec![event],
        true,
        Outcome::Activated {
            activation_id,
            idempotent: false,
        },
    )
}

/// The "already selected" message of a direct enable.
pub fn already_selected_message(key: &ResourceKey) -> String {
    format!("Capability {key} is already selected; disable/enable to reapply.")
}

/// enable (direct, user only): resolves `selector` in the library (B3, bare ids allowed). An
/// unbound active item with the same key makes it a no-op.
pub fn enable(
    session: &Session,
    library: &WorkspaceSnapshot,
    selector: &str,
    stamp: &mut Stamp,
) -> Result<Plan, OpError> {
    ready(session)?;
    if !session.trusted {
        return Err(OpError::Untrusted);
    }
    let state = current_state(session)?;
    let selector = parse_selector(selector).map_err(|e| OpError::Resolve(e.to_string()))?;
    let entry = library
        .resolve_capability(&selector)
        .map_err(|e| OpError::Resolve(e.to_string()))?;
    let key = entry.key.clone();
    let selected = state.active.iter().any(|a| {
        matches!(&a.snapshot.source, SnapshotSource::Capability { key: k, binding: None } if *k == key)
    });
    if selected {
        let message = already_selected_message(&key);
        return Ok(unchanged(session, state, Outcome::Unchanged { message }));
    }
    let capability = entry.parsed.capability.clone();
    let source = SnapshotSource::Capability { key, binding: None };
    let (event, activation_id) = activation(stamp, Actor::User, source, &capability);
    finish(
        session,
        session.preset,
        vec![event],
        true,
        Outcome::Activated {
            activation_id,
            idempotent: false,
        },
    )
}

/// Why `forge_capability` cannot be used right now (registered, active, not blocked).
fn control_problem(session: &Session, state: &CapabilityState) -> Option<&'static str> {
    if !session.registered.iter().any(|t| t == CONTROL_TOOL) {
        Some("not registered")
    } else if !session.current_tools.iter().any(|t| t == CONTROL_TOOL) {
        Some("not active")
    } else if blocks_tool(
        CONTROL_TOOL,
        policy_of(session.preset),
        &active_patches(state),
    ) {
        Some("blocked")
    } else {
        None
    }
}

/// The checks of every agent call: trust, an active Preset, and a usable control tool. Returns
/// the current state and the Preset.
pub fn agent_preconditions<'a>(
    session: &Session<'a>,
) -> Result<(CapabilityState, &'a ActivePreset), OpError> {
    ready(session)?;
    if !session.trusted {
        return Err(OpError::Untrusted);
    }
    let preset = session.preset.ok_or(OpError::NoActivePreset)?;
    let state = current_state(session)?;
    if let Some(problem) = control_problem(session, &state) {
        return Err(OpError::ControlUnavailable(problem));
    }
    Ok((state, preset))
}

/// enable-bound (user or agent): activates a binding of the active Preset.
pub fn enable_bound(
    session: &Session,
    caller: Caller,
    binding_id: &str,
    stamp: &mut Stamp,
) -> Result<Plan, OpError> {
    ready(session)?;
    let (state, preset) = match caller {
        Caller::Agent => agent_preconditions(session)?,
        Caller::User => {
            if !session.trusted {
                return Err(OpError::Untrusted);
            }
            let preset = session.preset.ok_or(OpError::NoActivePreset)?;
            (current_state(session)?, preset)
        }
    };
    let binding = preset
        .binding(binding_id)
        .ok_or_else(|| OpError::UnknownBinding {
            preset: preset.key.to_string(),
            id: binding_id.to_string(),
        })?;
    if caller == Caller::Agent {
        if !binding.model_callable {
            return Err(OpError::NotAuthorized(binding.id.clone()));
        }
        if binding
            .capability
            .tools
            .remove
            .iter()
            .any(|t| t == CONTROL_TOOL)
        {
            return Err(OpError::RemovesControl(binding.id.clone()));
        }
    }
    let existing = state.active.iter().find_map(|a| match &a.snapshot.source {
        SnapshotSource::Capability {
            key,
            binding: Some(b),
        } if b.preset == preset.key && b.id == binding.id => {
            Some((key, a.snapshot.activation_id.clone()))
        }
        _ => None,
    });
    if let Some((key, activation_id)) = existing {
        if *key != binding.reference {
            return Err(OpError::StaleBinding(binding.id.clone()));
        }
        return Ok(unchanged(
            session,
            state,
            Outcome::Activated {
                activation_id,
                idempotent: true,
            },
        ));
    }
    let source = preset.source_of(binding);
    let (event, activation_id) = activation(stamp, caller.actor(), source, &binding.capability);
    finish(
        session,
        Some(preset),
        vec![event],
        true,
        Outcome::Activated {
            activation_id,
            idempotent: false,
        },
    )
}

/// Whether an active snapshot answers to `selector`: its activation id, its source label
/// (`manual` or `scope:id`), its key id, or its binding id.
pub fn matches_selector(snapshot: &CapabilitySnapshot, selector: &str) -> bool {
    snapshot.activation_id == selector
        || snapshot.source.label() == selector
        || match &snapshot.source {
            SnapshotSource::Manual => false,
            SnapshotSource::Capability { key, binding } => {
                key.id == selector || binding.as_ref().is_some_and(|b| b.id == selector)
            }
        }
}

/// The user's "nothing matched" message.
pub fn no_match_message(selector: &str) -> String {
    format!("No matching active capability: {selector}")
}

/// disable (user or agent). The user may stop anything (also in an untrusted project); the agent
/// only its own bound activations whose binding the active Preset still offers to it unchanged.
pub fn disable(
    session: &Session,
    caller: Caller,
    selector: &str,
    stamp: &mut Stamp,
) -> Result<Plan, OpError> {
    ready(session)?;
    let (state, preset) = match caller {
        Caller::Agent => {
            let (state, preset) = agent_preconditions(session)?;
            (state, Some(preset))
        }
        Caller::User => (current_state(session)?, session.preset),
    };
    let found: Vec<&CapabilitySnapshot> = state
        .active
        .iter()
        .map(|a| &a.snapshot)
        .filter(|s| matches_selector(s, selector))
        .collect();
    let item = match found.as_slice() {
        [] => {
            return match caller {
                Caller::User => {
                    let message = no_match_message(selector);
                    Ok(unchanged(session, state, Outcome::Unchanged { message }))
                }
                Caller::Agent => Err(OpError::NoMatch(selector.to_string())),
            }
        }
        [one] => *one,
        many => {
            return Err(OpError::Ambiguous {
                selector: selector.to_string(),
                ids: many.iter().map(|s| s.activation_id.clone()).collect(),
            })
        }
    };
    let activation_id = item.activation_id.clone();
    if caller == Caller::Agent {
        let owner = state
            .active
            .iter()
            .find(|a| a.snapshot.activation_id == activation_id)
            .map(|a| a.actor);
        let (
            SnapshotSource::Capability {
                key,
                binding: Some(bound),
            },
            Some(Actor::Agent),
        ) = (&item.source, owner)
        else {
            return Err(OpError::NotAgentOwned(activation_id));
        };
        let preset = preset.ok_or(OpError::NoActivePreset)?;
        let still_offered = preset.key == bound.preset
            && preset
                .binding(&bound.id)
                .is_some_and(|b| b.model_callable && b.reference == *key);
        if !still_offered {
            return Err(OpError::NoLongerCallable {
                activation_id,
                binding: bound.id.clone(),
            });
        }
    }
    let event = deactivation(stamp, caller.actor(), &activation_id);
    finish(
        session,
        session.preset,
        vec![event],
        false,
        Outcome::Deactivated { activation_id },
    )
}

/// disable by exact activation id, as the user (the web Session panel): an id that is not active
/// is an error (404 there), never a guess by label.
pub fn disable_activation(
    session: &Session,
    activation_id: &str,
    stamp: &mut Stamp,
) -> Result<Plan, OpError> {
    ready(session)?;
    let state = current_state(session)?;
    if !state
        .active
        .iter()
        .any(|a| a.snapshot.activation_id == activation_id)
    {
        return Err(OpError::UnknownActivation(activation_id.to_string()));
    }
    let event = deactivation(stamp, Actor::User, activation_id);
    finish(
        session,
        session.preset,
        vec![event],
        false,
        Outcome::Deactivated {
            activation_id: activation_id.to_string(),
        },
    )
}

/// The "nothing to reset" message.
pub const NOTHING_ACTIVE_MESSAGE: &str = "No capabilities are active.";

/// reset (user only; also in an untrusted project).
pub fn reset(session: &Session, stamp: &mut Stamp) -> Result<Plan, OpError> {
    ready(session)?;
    let state = current_state(session)?;
    if state.active.is_empty() {
        let message = NOTHING_ACTIVE_MESSAGE.to_string();
        return Ok(unchanged(session, state, Outcome::Unchanged { message }));
    }
    let cleared = state
        .active
        .iter()
        .map(|a| a.snapshot.activation_id.clone())
        .collect();
    let event = CapabilityEvent {
        event_id: (stamp.next_id)(),
        actor: Actor::User,
        created_at: stamp.created_at,
        op: EventOp::Reset,
    };
    finish(
        session,
        session.preset,
        vec![event],
        false,
        Outcome::Reset { cleared },
    )
}

/// Preset switch (`target` = the Preset becoming active, `None` = Presets turned off): every
/// active bound item of another Preset gets a lifecycle deactivation; manual and unbound items
/// survive and their patches must pass the target's tool policy, else the switch is rejected
/// with no changes. Re-selecting the same Preset keeps every snapshot.
pub fn switch_preset(
    session: &Session,
    target: Option<&ActivePreset>,
    stamp: &mut Stamp,
) -> Result<Plan, OpError> {
    ready(session)?;
    let state = current_state(session)?;
    let (ending, surviving): (Vec<_>, Vec<_>) = state.active.iter().partition(|a| {
        a.snapshot
            .source
            .binding()
            .is_some_and(|b| target.is_none_or(|t| t.key != b.preset))
    });
    let patches: Vec<&ToolPatch> = surviving.iter().map(|a| &a.snapshot.tools).collect();
    let problems = validate_patches(&patches, target, session.registered);
    if !problems.is_empty() {
        return Err(OpError::SwitchConflict(problems));
    }
    let deactivated: Vec<String> = ending
        .iter()
        .map(|a| a.snapshot.activation_id.clone())
        .collect();
    let events = deactivated
        .iter()
        .map(|id| deactivation(stamp, Actor::Lifecycle, id))
        .collect();
    finish(
        session,
        target,
        events,
        false,
        Outcome::Switched { deactivated },
    )
}

/// Saving the **active** Preset (B10): every active snapshot's patch must pass the new version's
/// tool policy before anything is written. Snapshots are never replaced; afterwards the host
/// re-syncs tools with the new policy ([`sync_tools`]).
pub fn check_active_preset_save(session: &Session, saved: &ActivePreset) -> Result<(), OpError> {
    let state = current_state(session)?;
    let problems = validate_patches(&active_patches(&state), Some(saved), session.registered);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(OpError::PresetSaveConflict(problems))
    }
}

/// Whether capability text still has to reach the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// Whether capability changes still have to reach the model: `none` when the branch's last
/// event is covered by the newest delivery anchor (or there are no events), else `prepared`
/// when the host has built a request carrying them and `pending` when it has not. (Inferred
/// from B7/B10: the anchor is a cursor over the event history.)
pub fn delivery_status(
    state: &CapabilityState,
    anchor: Option<&DeliveryAnchor>,
    prepared: bool,
) -> Delivery {
    match &state.last_event_id {
        None => Delivery::None,
        Some(last) if anchor.is_some_and(|a| a.through_event_id == *last) => Delivery::None,
        Some(_) if prepared => Delivery::Prepared,
        Some(_) => Delivery::Pending,
    }
}
