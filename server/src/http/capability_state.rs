//! Capabilities in the live Pi session: the browser's session routes (spec B10
//! `/api/capability-state…`) and the host routes the bridge calls for `/capability`, the
//! `forge_capability` tool, request-time delivery and the delivery anchor.
//!
//! Every rule is forge-core's (`capability::{ops, view, agent, delivery}`); this module gathers
//! the inputs from the live host and the workspace under the hub's lock, and commits plans in
//! the B8 order: the tools entry and the events go to Pi as session entries in one command
//! (Pi appends them in order), then Pi applies the effective tools. Mutations are serialized by
//! one async lock, so two writers never interleave; the host's mirror of the branch changes only
//! after Pi confirmed the command.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{CapabilityChoices, CapabilityStateAnswer};
use forge_core::capability::agent::{decode_tool_call, run_tool_call, AgentReply};
use forge_core::capability::delivery::{self, EVENT_ENTRY_TYPE};
use forge_core::capability::events::{reduce, CapabilityState};
use forge_core::capability::ops::{
    self, check_sync_trust, control_patch, delivery_status, sync_patches, sync_tools, ActivePreset,
    Caller, OpError, Outcome, Plan, Session, Stamp, ToolsEntry, DELIVERY_ENTRY_TYPE,
    TOOLS_ENTRY_TYPE,
};
use forge_core::capability::tools::{blocks_tool, tool_delta};
use forge_core::capability::view::{
    self, available_choices, build_view, decode_enable_request, decode_state_mutation,
    CapabilityStateView, ChoiceError, MutationError, TextPresentation, ToolChange, ViewInput,
};
use forge_core::capability::ToolPatch;
use forge_core::id::ResourceKey;
use forge_core::json;
use forge_core::stack::PromptStack;
use forge_core::workspace::WorkspaceSnapshot;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::command_ok;
use super::error::{ApiError, ApiResult};
use super::extract::parse;
use super::extract::{ok_json, ok_typed, HostBody, JsonBody};
use super::{AppState, ServerState};
use crate::live::{self, stack_entry, HostView};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/capability-state", get(get_state).post(post_mutation))
        .route("/api/capability-state/available", get(get_available))
        .route("/api/capability-state/enable", post(post_enable))
        .route("/api/host/{id}/capability", post(host_command))
        .route("/api/host/{id}/capability-tool", post(host_tool))
        .route("/api/host/{id}/system-context", post(host_system_context))
        .route("/api/host/{id}/settled", post(host_settled))
}

// ---------------------------------------------------------------------------------------------
// Inputs: everything the operations and the view read, taken under the hub's lock

/// The live session's capability inputs, owned (taken under the hub's lock).
pub struct Inputs {
    host_id: String,
    lifecycle: u64,
    session_id: String,
    leaf_id: Option<String>,
    trusted: bool,
    events: Vec<Value>,
    state: Result<CapabilityState, String>,
    preset: Option<ActivePreset>,
    preset_stack: Option<(ResourceKey, PromptStack)>,
    preset_problem: Option<String>,
    registered: Vec<String>,
    current: Vec<String>,
    tools_entry: ToolsEntry,
    model: Option<(String, String)>,
    presentation: TextPresentation,
    anchor: Option<ops::DeliveryAnchor>,
    prepared_through: Option<String>,
    last_tool_change: Option<ToolChange>,
}

/// The Preset as the operations see it; bindings that do not resolve leave it without bindings
/// (its tool policy still applies) and say why.
fn resolve_preset(
    snapshot: &WorkspaceSnapshot,
    entry: &forge_core::workspace::StackEntry,
) -> (ActivePreset, Option<String>) {
    match ActivePreset::resolve(snapshot, entry) {
        Ok(p) => (p, None),
        Err(e) => (
            ActivePreset {
                key: entry.key.clone(),
                policy: entry.parsed.stack.tools.clone(),
                bindings: Vec::new(),
            },
            Some(
                OpError::Bindings {
                    preset: entry.key.to_string(),
                    error: e,
                }
                .to_string(),
            ),
        ),
    }
}

/// How capability text reaches this session's model: native system sections when Pi says the
/// model accepts system messages mid-conversation, else a user-role notice.
fn presentation(facts: &live::PiFacts) -> TextPresentation {
    if facts.model.as_ref().is_some_and(|m| m.mid_convo_system) {
        TextPresentation::Native
    } else {
        TextPresentation::User
    }
}

/// Reads the inputs from the host and the workspace.
pub fn inputs(h: &HostView<'_>, snapshot: &WorkspaceSnapshot, server_trusted: bool) -> Inputs {
    let caps = h.caps();
    let mut preset = None;
    let mut preset_stack = None;
    let mut preset_problem = None;
    if let Some(entry) = h.active_stack().and_then(|k| stack_entry(snapshot, k)) {
        preset_stack = Some((entry.key.clone(), entry.parsed.stack.clone()));
        let (resolved, problem) = resolve_preset(snapshot, entry);
        preset = Some(resolved);
        preset_problem = problem;
    }
    let facts = h.facts();
    Inputs {
        host_id: h.host_id().to_string(),
        lifecycle: h.lifecycle(),
        session_id: h.session_id().to_string(),
        leaf_id: h.leaf_id().map(str::to_string),
        trusted: server_trusted && h.trusted(),
        state: reduce(&caps.record.events).map_err(|e| OpError::Log(e).to_string()),
        events: caps.record.events.clone(),
        preset,
        preset_stack,
        preset_problem,
        registered: h.registered_tools(),
        current: facts.active_tools.clone(),
        tools_entry: h.tools_entry(),
        model: facts
            .model
            .as_ref()
            .map(|m| (m.provider.clone(), m.id.clone())),
        presentation: presentation(facts),
        anchor: caps.record.anchor.clone(),
        prepared_through: caps.prepared_through.clone(),
        last_tool_change: caps.last_tool_change.clone(),
    }
}

impl Inputs {
    pub fn session(&self) -> Session<'_> {
        Session {
            events: &self.events,
            trusted: self.trusted,
            restoring: false,
            preset: self.preset.as_ref(),
            registered: &self.registered,
            current_tools: &self.current,
            tools_entry: Some(&self.tools_entry),
        }
    }

    fn state_or_empty(&self) -> CapabilityState {
        self.state.clone().unwrap_or_default()
    }

    /// The patches in force: active capabilities, then the control tool's offer.
    fn patches(&self) -> Vec<ToolPatch> {
        let state = self.state_or_empty();
        let control = control_patch(self.preset.as_ref());
        sync_patches(&state, control.as_ref())
            .into_iter()
            .cloned()
            .collect()
    }

    /// The B9 sync of the current state.
    fn sync(&self) -> ops::ToolSync {
        let patches = self.patches();
        let refs: Vec<&ToolPatch> = patches.iter().collect();
        sync_tools(
            self.preset.as_ref().and_then(|p| p.policy.as_ref()),
            &self.registered,
            &self.current,
            Some(&self.tools_entry),
            &refs,
        )
    }

    /// Registered tools the guard blocks, each with the reason the model is told.
    fn blocked_tools(&self) -> Map<String, Value> {
        let state = self.state_or_empty();
        let patches = ops::active_patches(&state);
        let preset = self.preset.as_ref();
        let policy = preset.and_then(|p| p.policy.as_ref());
        let mut out = Map::new();
        for tool in &self.registered {
            let reason = if blocks_tool(tool, policy, &[]) {
                let preset = preset.map_or(String::new(), |p| p.key.to_string());
                format!("pi-forge: the active Preset {preset} does not allow the tool {tool}.")
            } else if blocks_tool(tool, None, &patches) {
                format!("pi-forge: an active capability removes the tool {tool}.")
            } else {
                continue;
            };
            out.insert(tool.clone(), Value::String(reason));
        }
        out
    }

    /// Whether the extension must ask for a projection before each request.
    fn has_text(&self) -> bool {
        self.state
            .as_ref()
            .is_ok_and(|s| s.active.iter().any(|a| !a.snapshot.content.is_empty()))
    }

    /// Whether capabilities are in force at all (events, patches or the control tool's offer).
    fn in_force(&self) -> bool {
        !self.events.is_empty() || control_patch(self.preset.as_ref()).is_some()
    }

    /// What the extension mirrors: `{capabilities, blockedTools}`, plus `tools` when a sync
    /// would change Pi's active tools.
    pub fn mirror(&self, with_tools: bool) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert("capabilities".into(), Value::Bool(self.has_text()));
        out.insert("blockedTools".into(), Value::Object(self.blocked_tools()));
        if with_tools && self.in_force() {
            let sync = self.sync();
            if sync.effective != self.current {
                out.insert("tools".into(), json!(sync.effective));
            }
        }
        out
    }

    pub fn view(&self) -> CapabilityStateView {
        let state = self.state_or_empty();
        let sync = self.sync();
        let prepared =
            self.prepared_through.is_some() && self.prepared_through == state.last_event_id;
        let input = ViewInput {
            instance_id: &self.host_id,
            lifecycle_revision: self.lifecycle,
            session_id: &self.session_id,
            leaf_id: self.leaf_id.as_deref(),
            state: &state,
            effective_tools: &sync.effective,
            trusted: self.trusted,
            restoring: false,
            model: self.model.as_ref().map(|(p, i)| (p.as_str(), i.as_str())),
            delivery: delivery_status(&state, self.anchor.as_ref(), prepared),
            text_presentation: self.presentation,
            preset: self.preset_stack.as_ref().map(|(k, s)| (k, s)),
            baseline: Some(&sync.baseline),
        };
        let mut view = build_view(&input);
        view.last_tool_change = self.last_tool_change.clone();
        view.problem = match &self.state {
            Err(e) => Some(e.clone()),
            Ok(state) => check_sync_trust(self.trusted, state)
                .err()
                .map(|e| e.to_string())
                .or_else(|| self.preset_problem.clone()),
        };
        view
    }
}

/// The inputs of the live session, or 503.
fn live_inputs(state: &ServerState) -> ApiResult<Inputs> {
    let snapshot = state.ws.snapshot();
    let trusted = state.ws.trusted();
    Ok(state.live.read_live(|h| inputs(h, &snapshot, trusted))?)
}

/// The capability view of the live session, `None` without one (the `capability-state` event).
pub fn current_view(state: &ServerState) -> Option<CapabilityStateView> {
    live_inputs(state).ok().map(|i| i.view())
}

// ---------------------------------------------------------------------------------------------
// Committing a plan

fn now_ms() -> f64 {
    chrono::Utc::now().timestamp_millis() as f64
}

/// Runs `op` over fresh inputs and commits its plan; returns the plan and the inputs it ran on.
/// `op` may refuse before anything is sent (its error is returned as is).
pub async fn run_and_commit<E>(
    state: &ServerState,
    op: impl FnOnce(&Inputs, &mut Stamp) -> Result<Plan, E>,
) -> ApiResult<Result<Plan, E>> {
    let _serial = state.capability_lock.lock().await;
    let inputs = live_inputs(state)?;
    let planned = {
        let mut ids = live::new_uuid;
        let mut stamp = Stamp {
            created_at: now_ms(),
            next_id: &mut ids,
        };
        op(&inputs, &mut stamp)
    };
    let plan = match planned {
        Ok(plan) => plan,
        Err(e) => return Ok(Err(e)),
    };
    commit(state, &inputs, &plan).await?;
    Ok(Ok(plan))
}

impl Inputs {
    /// The inputs as they will be once `plan` is committed (for the extension's mirror).
    fn after(&self, plan: &Plan, preset: Option<ActivePreset>) -> Inputs {
        let mut events = self.events.clone();
        events.extend(plan.events.iter().cloned());
        Inputs {
            host_id: self.host_id.clone(),
            lifecycle: self.lifecycle,
            session_id: self.session_id.clone(),
            leaf_id: self.leaf_id.clone(),
            trusted: self.trusted,
            events,
            state: Ok(plan.state.clone()),
            preset,
            preset_stack: None,
            preset_problem: None,
            registered: self.registered.clone(),
            current: plan.effective_tools.clone(),
            tools_entry: plan
                .tools_entry
                .clone()
                .unwrap_or_else(|| self.tools_entry.clone()),
            model: self.model.clone(),
            presentation: self.presentation,
            anchor: self.anchor.clone(),
            prepared_through: self.prepared_through.clone(),
            last_tool_change: None,
        }
    }
}

/// Sends the plan's entries and tools to Pi, then updates the host's mirror of the branch.
async fn commit(state: &ServerState, inputs: &Inputs, plan: &Plan) -> ApiResult<()> {
    let entries = plan_entries(plan);
    let tools_change = plan.effective_tools != inputs.current;
    if entries.is_empty() && !tools_change {
        return Ok(());
    }
    let mut body = inputs.after(plan, inputs.preset.clone()).mirror(false);
    body.insert("entries".into(), Value::Array(entries));
    body.insert("tools".into(), json!(plan.effective_tools));
    let result = state.live.command("capabilities", body).await?;
    command_ok(&result)?;
    record_plan(state, inputs, plan);
    Ok(())
}

/// The session entries of a plan, in commit order: the tools entry, then the events.
pub fn plan_entries(plan: &Plan) -> Vec<Value> {
    let mut entries = Vec::new();
    if let Some(tools) = &plan.tools_entry {
        entries.push(json!({"customType": TOOLS_ENTRY_TYPE, "data": tools.to_value()}));
    }
    for event in &plan.events {
        entries.push(json!({"customType": EVENT_ENTRY_TYPE, "data": event}));
    }
    entries
}

/// After Pi confirmed a plan's entries: the host's record and tools follow (same host only).
pub fn record_plan(state: &ServerState, inputs: &Inputs, plan: &Plan) {
    let _ = state.live.with_live(|h| {
        if h.host_id() != inputs.host_id {
            return;
        }
        let baseline = plan.tools_entry.as_ref().map_or_else(
            || inputs.tools_entry.baseline.clone(),
            |t| t.baseline.clone(),
        );
        let caps = h.caps_mut();
        caps.record.events.extend(plan.events.iter().cloned());
        if let Some(tools) = &plan.tools_entry {
            caps.record.tools = Some(tools.clone());
        }
        let before: Vec<&str> = inputs.current.iter().map(String::as_str).collect();
        let after: Vec<&str> = plan.effective_tools.iter().map(String::as_str).collect();
        let (added, removed) = tool_delta(&before, &after);
        caps.last_tool_change = Some(ToolChange {
            added: added.into_iter().map(str::to_string).collect(),
            removed: removed.into_iter().map(str::to_string).collect(),
        });
        h.tools_applied(baseline, plan.effective_tools.clone());
    });
}

/// A Preset switch (`key`, `None` = Presets off) as the capability lifecycle sees it: the plan
/// whose entries go with the switch command (lifecycle deactivations of the old Preset's bound
/// activations), or 409 when a surviving patch conflicts with the target's tool policy.
pub fn switch_plan(
    state: &ServerState,
    key: Option<&str>,
) -> ApiResult<(Inputs, Plan, Map<String, Value>)> {
    let inputs = live_inputs(state)?;
    let snapshot = state.ws.snapshot();
    let target = key
        .and_then(|k| stack_entry(&snapshot, k))
        .map(|entry| resolve_preset(&snapshot, entry).0);
    let mut ids = live::new_uuid;
    let mut stamp = Stamp {
        created_at: now_ms(),
        next_id: &mut ids,
    };
    let plan = ops::switch_preset(&inputs.session(), target.as_ref(), &mut stamp)
        .map_err(|e| ApiError::new(StatusCode::CONFLICT, "capability_conflict", e.to_string()))?;
    let mirror = inputs.after(&plan, target).mirror(false);
    Ok((inputs, plan, mirror))
}

/// What the extension mirrors for host `id` now (hello); with `with_tools`, the tools a sync
/// applies are included and recorded as applied.
pub fn host_mirror(
    state: &ServerState,
    id: &str,
    session_id: &str,
) -> ApiResult<Map<String, Value>> {
    let snapshot = state.ws.snapshot();
    let trusted = state.ws.trusted();
    Ok(state.live.with_host(id, session_id, |h| {
        let inputs = inputs(h, &snapshot, trusted);
        let mirror = inputs.mirror(true);
        if let Some(tools) = mirror.get("tools").and_then(Value::as_array) {
            let tools: Vec<String> = tools
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect();
            h.tools_applied(inputs.sync().baseline, tools);
        }
        mirror
    })?)
}

/// The turn's view of capabilities: the patches the compiler applies and the mirror fields.
pub fn turn_inputs(
    h: &HostView<'_>,
    snapshot: &WorkspaceSnapshot,
    trusted: bool,
) -> (Vec<ToolPatch>, Map<String, Value>) {
    let inputs = inputs(h, snapshot, trusted);
    (inputs.patches(), inputs.mirror(true))
}

/// B10: saving the live session's **active** Preset must keep every active capability's tool
/// patch valid under the saved version's policy; checked before anything is written (409).
/// Snapshots are never replaced; the next turn re-syncs tools under the new policy. Without a
/// live session, or for another Preset, there is nothing to check.
pub fn check_active_save(
    state: &ServerState,
    selector: &forge_core::id::Selector,
    draft: &Value,
) -> ApiResult<()> {
    let snapshot = state.ws.snapshot();
    let Some(entry) = snapshot.resolve_stack(selector).found() else {
        return Ok(());
    };
    let Ok(inputs) = live_inputs(state) else {
        return Ok(());
    };
    if inputs.preset.as_ref().map(|p| &p.key) != Some(&entry.key) {
        return Ok(());
    }
    let stack = draft.get("stack").unwrap_or(draft).clone();
    let parsed = forge_core::stack::parse_stack_value(
        stack,
        &forge_core::stack::ParseOptions::new(&format!("{}.json", entry.key.id)),
    );
    let saved = ActivePreset {
        key: entry.key.clone(),
        policy: parsed.stack.tools,
        bindings: Vec::new(),
    };
    ops::check_active_preset_save(&inputs.session(), &saved)
        .map_err(|e| ApiError::new(StatusCode::CONFLICT, "capability_conflict", e.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Browser routes

fn op_status(e: &OpError) -> (StatusCode, &'static str) {
    match e {
        OpError::Untrusted => (StatusCode::FORBIDDEN, "untrusted"),
        OpError::UnknownActivation(_) => (StatusCode::NOT_FOUND, "unknown_activation"),
        _ => (StatusCode::CONFLICT, "capability_refused"),
    }
}

fn op_error(e: &OpError) -> ApiError {
    let (status, code) = op_status(e);
    ApiError::new(status, code, e.to_string())
}

fn untrusted_read() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "untrusted",
        "Capability activation needs a trusted project; Deactivate and Reset all stay available.",
    )
}

fn answer(view: CapabilityStateView) -> Response {
    ok_typed(&CapabilityStateAnswer {
        ok: true,
        state: view,
    })
}

/// `GET /api/capability-state` → `{ok, state}`; 503 without a live session.
async fn get_state(State(state): State<AppState>) -> ApiResult<Response> {
    Ok(answer(live_inputs(&state)?.view()))
}

/// `GET /api/capability-state/available` → `{ok, state, choices}`: a pure read. 403 untrusted;
/// 409 when the session changed during discovery.
async fn get_available(State(state): State<AppState>) -> ApiResult<Response> {
    let before = live_inputs(&state)?;
    if !before.trusted {
        return Err(untrusted_read());
    }
    let snapshot = state.ws.snapshot();
    let choices = available_choices(&snapshot, before.preset.as_ref(), &before.registered);
    let view = before.view();
    let after = live_inputs(&state)?.view();
    if after.guard != view.guard {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "guard_changed",
            view::GUARD_CHANGED_MESSAGE,
        ));
    }
    Ok(ok_typed(&CapabilityChoices {
        ok: true,
        state: view,
        choices,
    }))
}

/// `POST /api/capability-state/enable` `{guard, kind, id, fingerprint}` → `{ok, state}`.
async fn post_enable(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let request = decode_enable_request(&body).map_err(ApiError::bad_request)?;
    let snapshot = state.ws.snapshot();
    let outcome = run_and_commit(&state, |inputs, stamp| {
        if !inputs.trusted {
            return Err(ChoiceError::Op(OpError::Untrusted));
        }
        if inputs.view().guard != request.guard {
            return Err(ChoiceError::Op(OpError::Resolve(
                view::GUARD_CHANGED_MESSAGE.to_string(),
            )));
        }
        view::enable_choice(&inputs.session(), &snapshot, &request, stamp)
    })
    .await?;
    if let Err(e) = outcome {
        return Err(match &e {
            ChoiceError::Op(OpError::Untrusted) => untrusted_read(),
            ChoiceError::Op(OpError::Restoring) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "restoring", e.to_string())
            }
            _ => ApiError::new(StatusCode::CONFLICT, "capability_refused", e.to_string()),
        });
    }
    Ok(answer(live_inputs(&state)?.view()))
}

/// `POST /api/capability-state` `{action: "disable", activationId, guard}` |
/// `{action: "reset", guard}` → `{ok, state}`.
async fn post_mutation(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let mutation = decode_state_mutation(&body).map_err(ApiError::bad_request)?;
    let outcome = run_and_commit(&state, |inputs, stamp| {
        let guard = inputs.view().guard;
        view::apply_state_mutation(&inputs.session(), &guard, &mutation, stamp)
    })
    .await?;
    if let Err(e) = outcome {
        return Err(match &e {
            MutationError::GuardChanged => {
                ApiError::new(StatusCode::CONFLICT, "guard_changed", e.to_string())
            }
            MutationError::Op(op) => op_error(op),
        });
    }
    Ok(answer(live_inputs(&state)?.view()))
}

// ---------------------------------------------------------------------------------------------
// Host routes (the bridge extension)

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CommandMessage {
    session_id: String,
    command: String,
    #[serde(default)]
    arg: String,
}

/// Checks that host `id` is the live one with `session_id`.
fn check_host(state: &ServerState, id: &str, session_id: &str) -> ApiResult<()> {
    Ok(state.live.with_host(id, session_id, |_| ())?)
}

/// The one-line answer of a committed or refused operation.
fn outcome_line(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Activated {
            activation_id,
            idempotent: false,
        } => format!("capability activated ({activation_id}); its text reaches the model with the next request"),
        Outcome::Activated {
            activation_id,
            idempotent: true,
        } => format!("already active ({activation_id})"),
        Outcome::Deactivated { activation_id } => format!("capability {activation_id} deactivated"),
        Outcome::Reset { cleared } => format!("{} capabilities deactivated", cleared.len()),
        Outcome::Switched { deactivated } => {
            format!("{} bound capabilities ended", deactivated.len())
        }
        Outcome::Unchanged { message } => message.clone(),
    }
}

fn status_lines(inputs: &Inputs) -> String {
    let view = inputs.view();
    let mut lines = vec![format!(
        "{} active · delivery {} · tools: {}",
        view.active.len(),
        view.delivery.as_str(),
        if view.effective_tools.is_empty() {
            "none".to_string()
        } else {
            view.effective_tools.join(", ")
        }
    )];
    for a in &view.active {
        let name = a
            .name
            .as_deref()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default();
        lines.push(format!(
            "{} {}{name} by {}{}{}",
            a.activation_id,
            a.source,
            a.actor,
            if a.tools.add.is_empty() {
                String::new()
            } else {
                format!(" +{}", a.tools.add.join(" +"))
            },
            if a.tools.remove.is_empty() {
                String::new()
            } else {
                format!(" -{}", a.tools.remove.join(" -"))
            },
        ));
    }
    if let Some(problem) = view.problem {
        lines.push(problem);
    }
    lines.join("\n")
}

fn bindings_lines(inputs: &Inputs) -> String {
    let Some(preset) = &inputs.preset else {
        return OpError::NoActivePreset.to_string();
    };
    if let Some(problem) = &inputs.preset_problem {
        return problem.clone();
    }
    if preset.bindings.is_empty() {
        return format!("Preset {} has no capability bindings.", preset.key);
    }
    let mut lines = vec![format!("Bindings of Preset {}:", preset.key)];
    for b in &preset.bindings {
        lines.push(format!(
            "{} → {}{}",
            b.id,
            b.reference,
            if b.model_callable {
                " (model-callable)"
            } else {
                ""
            }
        ));
    }
    lines.join("\n")
}

/// `POST /api/host/:id/capability` `{sessionId, command, arg}` (the `/capability` command, as
/// the user) → `{ok, message}`; a refusal is `{ok:false, message}` (one line).
async fn host_command(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: CommandMessage = parse(body, "capability command")?;
    check_host(&state, &id, &message.session_id)?;
    let arg = message.arg.trim().to_string();
    let snapshot = state.ws.snapshot();
    let usage = "usage: /capability add <text> | enable <capability> | enable-bound <binding> | disable <id> | reset | bindings | status";
    let needs_arg = matches!(
        message.command.as_str(),
        "add" | "enable" | "enable-bound" | "disable"
    );
    if needs_arg && arg.is_empty() {
        return Ok(ok_json(&json!({"ok": false, "message": usage})));
    }
    let result = match message.command.as_str() {
        "status" => {
            return Ok(ok_json(
                &json!({"ok": true, "message": status_lines(&live_inputs(&state)?)}),
            ))
        }
        "bindings" => {
            return Ok(ok_json(
                &json!({"ok": true, "message": bindings_lines(&live_inputs(&state)?)}),
            ))
        }
        "add" => run_and_commit(&state, |i, st| ops::add(&i.session(), &arg, st)).await?,
        "enable" => {
            run_and_commit(&state, |i, st| {
                ops::enable(&i.session(), &snapshot, &arg, st)
            })
            .await?
        }
        "enable-bound" => {
            run_and_commit(&state, |i, st| {
                ops::enable_bound(&i.session(), Caller::User, &arg, st)
            })
            .await?
        }
        "disable" => {
            run_and_commit(&state, |i, st| {
                ops::disable(&i.session(), Caller::User, &arg, st)
            })
            .await?
        }
        "reset" => run_and_commit(&state, |i, st| ops::reset(&i.session(), st)).await?,
        _ => return Ok(ok_json(&json!({"ok": false, "message": usage}))),
    };
    Ok(ok_json(&match result {
        Ok(plan) => json!({"ok": true, "message": outcome_line(&plan.outcome)}),
        Err(e) => json!({"ok": false, "message": e.to_string()}),
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolMessage {
    session_id: String,
    args: Value,
}

/// `POST /api/host/:id/capability-tool` `{sessionId, args}` (a `forge_capability` call) →
/// `{ok, text}`; a refusal is `{ok:false, text}` (the tool result is then an error).
async fn host_tool(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: ToolMessage = parse(body, "capability tool")?;
    check_host(&state, &id, &message.session_id)?;
    let call = match decode_tool_call(&message.args) {
        Ok(call) => call,
        Err(e) => return Ok(ok_json(&json!({"ok": false, "text": e}))),
    };
    let result = run_and_commit(&state, |inputs, stamp| {
        match run_tool_call(&inputs.session(), &call, stamp) {
            Ok(AgentReply::Changed(plan)) => Ok(plan),
            Ok(read) => Err(NoCommit::Read(Box::new(read))),
            Err(e) => Err(NoCommit::Refused(e)),
        }
    })
    .await?;
    let text = match result {
        Ok(plan) => outcome_line(&plan.outcome),
        Err(NoCommit::Refused(e)) => {
            return Ok(ok_json(&json!({"ok": false, "text": e.to_string()})))
        }
        Err(NoCommit::Read(read)) => match *read {
            AgentReply::List(choices) => json::to_compact(&json!(choices)),
            AgentReply::Status(items) => json::to_compact(&json!(items)),
            AgentReply::Changed(_) => String::new(),
        },
    };
    Ok(ok_json(&json!({"ok": true, "text": text})))
}

/// A `forge_capability` call that commits nothing: a refusal, or a read (`list`, `status`).
enum NoCommit {
    Refused(OpError),
    Read(Box<AgentReply>),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SystemContextMessage {
    session_id: String,
    roles: Vec<String>,
}

/// `POST /api/host/:id/system-context` `{sessionId, roles}` (from `context_with_system`, the
/// roles of the request's messages in order) → `{index, message}` to insert, or `{}`.
async fn host_system_context(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: SystemContextMessage = parse(body, "system context")?;
    // Once per provider request: only the branch's events and the model's presentation are
    // read (no Preset resolution, no copies of the record).
    let projection = state.live.with_host(&id, &message.session_id, |h| {
        let state = reduce(&h.caps().record.events).ok()?;
        let roles: Vec<&str> = message.roles.iter().map(String::as_str).collect();
        let projected = delivery::project(&state, presentation(h.facts()), &roles, now_ms());
        // The request carries every event so far, with or without text.
        h.caps_mut().prepared_through = state.last_event_id.clone();
        projected
    })?;
    Ok(ok_json(&match projection {
        Some((index, message)) => json!({"index": index, "message": message}),
        None => json!({}),
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SettledMessage {
    session_id: String,
}

/// `POST /api/host/:id/settled` `{sessionId}` (the agent settled: the session is idle) →
/// `{entries}`: a delivery anchor when a request carried events the newest anchor does not
/// cover (appended by the extension; a cursor, never a dialogue message).
async fn host_settled(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: SettledMessage = parse(body, "settled")?;
    let entries = state.live.with_host(&id, &message.session_id, |h| {
        let caps = h.caps_mut();
        let through = caps.prepared_through.clone()?;
        if caps
            .record
            .anchor
            .as_ref()
            .is_some_and(|a| a.through_event_id == through)
        {
            return None;
        }
        let anchor = ops::DeliveryAnchor::new(through);
        caps.record.anchor = Some(anchor.clone());
        Some(json!([{"customType": DELIVERY_ENTRY_TYPE, "data": anchor.to_value()}]))
    })?;
    Ok(ok_json(
        &json!({"entries": entries.unwrap_or_else(|| json!([]))}),
    ))
}
