//! `/api/profiles`: agent profiles — collection, read, create, save, delete, fork, validate,
//! preview, status and apply.
//!
//! Previews describe what a profile would set (model, thinking level, stack, the tools that stack
//! leaves active). With a live Pi session they use its facts and `current` is the session's model,
//! thinking level and Preset; without one they use Pi's built-in tools and `current` is empty.
//! `apply` sends the whole change to the live session in one command.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{
    Applied, AppliedChoice, CurrentChoice, LastApplied, Model, ProfileCollection, ProfilePreview,
    ProfileStatus, ProfileValidation, ProfileView, Saved, StackChoice, TargetChoice,
};
use forge_core::compile::{self, CompileInput, MacroRegistry};
use forge_core::diag::{counts, Diagnostic, Level};
use forge_core::id::Scope;
use forge_core::profile;
use forge_core::runtime::RuntimeSnapshot;
use forge_core::session::{self, LiveChoice, STACK_STATE_TYPE};
use forge_core::stack::PromptStack;
use forge_core::workspace::service::{self, Kind};
use forge_core::workspace::{Dir, FileRef, Loaded, ProfileEntry, Resolved, WorkspaceSnapshot};
use serde_json::{json, Map, Value};

use super::error::command_ok;
use super::error::{ApiError, ApiResult};
use super::extract::{ok_typed, resource_object, JsonBody};
use super::live_commands::command_switching_stack;
use super::stacks::selector;
use super::views::{profile_view, with_etag};
use super::write::{
    deleted_response, fork_resource, mutate, ok_view_response, save_resource, written_entry,
    Outcome,
};
use super::{AppState, ServerState};
use crate::live::stack_entry;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/profiles", get(collection).post(create))
        .route("/api/profiles/validate", post(validate))
        .route("/api/profiles/status", get(status))
        .route("/api/profiles/{sel}", get(read).put(save).delete(remove))
        .route("/api/profiles/{sel}/fork", post(fork))
        .route("/api/profiles/{sel}/preview", post(preview))
        .route("/api/profiles/{sel}/apply", post(apply))
}

/// The tools active after `stack`'s policy on pi-forge's stand-in runtime.
fn effective_tools(runtime: &RuntimeSnapshot, stack: Option<&PromptStack>) -> Vec<String> {
    let macros = MacroRegistry::new();
    let input = CompileInput::new(stack, runtime, &macros);
    compile::compile(&input).selected_tools
}

/// `current`: the live session's model, thinking level and Preset (all null without one).
fn current(
    state: &ServerState,
    snapshot: &WorkspaceSnapshot,
    runtime: &RuntimeSnapshot,
) -> CurrentChoice {
    let active = state.active_id();
    let stack = active
        .as_deref()
        .and_then(|a| stack_entry(snapshot, a))
        .map(|e| &e.parsed.stack);
    let choice = state.live.with_live(|h| h.choice()).unwrap_or_default();
    CurrentChoice {
        model: choice.model.as_ref().map(Model::from),
        thinking_level: choice.thinking_level,
        prompt_stack: active,
        effective_tools: effective_tools(runtime, stack),
    }
}

/// `lastApplied` of the live session: the provenance with source state and drift, or null.
fn last_applied(state: &ServerState, snapshot: &WorkspaceSnapshot) -> Option<LastApplied> {
    let Ok((Some(provenance), choice)) = state
        .live
        .with_live(|h| (h.provenance().cloned(), h.choice()))
    else {
        return None;
    };
    let source_path = provenance.get("sourcePath").and_then(Value::as_str);
    let source = snapshot
        .profiles
        .iter()
        .find(|e| Some(e.path.as_str()) == source_path)
        .map(|e| &e.parsed.profile);
    Some(session::last_applied(&provenance, source, &choice))
}

/// What applying `entry` would set, and whether it could be applied.
fn preview_of(
    state: &ServerState,
    snapshot: &WorkspaceSnapshot,
    entry: &ProfileEntry,
) -> ProfilePreview {
    let runtime = state.tool_runtime();
    let profile = &entry.parsed.profile;
    let mut diagnostics = entry.diagnostics.clone();
    let (stack_key, stack, resolves) = match snapshot.profile_stack(entry) {
        Ok(Some(stack)) => {
            // Say why a Preset with errors cannot be applied (a broken template, say), naming
            // the item, so the preflight failure is not a mystery.
            if let Some(first) = stack.diagnostics.iter().find(|d| d.is_error()) {
                let d = Diagnostic::error(format!(
                    "Preset {} has errors: {}",
                    stack.key, first.message
                ))
                .with_field("promptStack");
                if !diagnostics.contains(&d) {
                    diagnostics.push(d);
                }
            }
            // Its warnings about what it sends (an item's) are shown too (A3 step 5), as
            // warnings: they never fail a preflight. File-level notes stay on the Preset.
            let item_warnings = stack
                .diagnostics
                .iter()
                .filter(|d| d.level == Level::Warning && d.item_id.is_some());
            for w in item_warnings {
                let mut d = Diagnostic::warning(format!("Preset {}: {}", stack.key, w.message))
                    .with_field("promptStack");
                d.item_id = w.item_id.clone();
                if !diagnostics.contains(&d) {
                    diagnostics.push(d);
                }
            }
            (Some(stack.key.to_string()), Some(stack), stack.usable())
        }
        Ok(None) => (None, None, true),
        Err(e) => {
            let d = Diagnostic::error(e.to_string()).with_field("promptStack");
            if !diagnostics.contains(&d) {
                diagnostics.push(d);
            }
            (None, None, false)
        }
    };
    let policy = stack.and_then(|s| s.parsed.stack.tools.as_ref().map(|p| p.to_value()));
    ProfilePreview {
        profile_id: profile.id.clone(),
        name: profile.name.clone(),
        description: profile.description.clone(),
        source_path: entry.path.clone(),
        auto_activate: profile.auto_activate == Some(true),
        current: current(state, snapshot, &runtime),
        target: TargetChoice {
            model: Model::from(&profile.model),
            thinking_level: profile.thinking_level.as_str().to_string(),
            prompt_stack: stack_key,
            effective_tools: effective_tools(&runtime, stack.map(|s| &s.parsed.stack)),
            tool_policy: policy,
        },
        applicable: entry.usable() && resolves,
        live_host: state.live.connected(),
        diagnostics,
    }
}

fn entry_view(
    state: &ServerState,
    snapshot: &WorkspaceSnapshot,
    entry: &ProfileEntry,
) -> ProfileView {
    let (common, shadowed, profile) = profile_view(entry, snapshot);
    ProfileView {
        common,
        shadowed,
        profile,
        preview: preview_of(state, snapshot, entry),
        last_applied: last_applied(state, snapshot),
    }
}

fn status_view(state: &ServerState, snapshot: &WorkspaceSnapshot) -> ProfileStatus {
    let runtime = state.tool_runtime();
    ProfileStatus {
        live_host: state.live.connected(),
        current: current(state, snapshot, &runtime),
        last_applied: last_applied(state, snapshot),
    }
}

fn resolve<'a>(snapshot: &'a WorkspaceSnapshot, sel: &str) -> ApiResult<&'a ProfileEntry> {
    match snapshot.resolve_profile(&selector(sel)?) {
        Resolved::Found(entry) => Ok(entry),
        Resolved::NotFound => Err(ApiError::not_found(format!("Unknown agent profile: {sel}"))),
        Resolved::Ambiguous(entries) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "ambiguous",
            format!(
                "Agent profile {sel} is ambiguous: several files define it ({}).",
                entries
                    .iter()
                    .map(|e| e.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `GET /api/profiles` → the collection.
async fn collection(State(state): State<AppState>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let view = tokio::task::spawn_blocking(move || {
        let dir = |scope| {
            state
                .ws
                .store
                .dir_path(scope, Dir::Profiles)
                .map(|p| p.display().to_string())
                .ok()
        };
        ProfileCollection {
            trusted: snapshot.trusted,
            live_host: false,
            profile_directory: dir(Scope::Project),
            global_profile_directory: dir(Scope::Global),
            profiles: snapshot
                .profiles
                .iter()
                .map(|e| entry_view(&state, &snapshot, e))
                .collect(),
            status: status_view(&state, &snapshot),
            models: state.live.with_live(|h| h.models()).unwrap_or_default(),
            auto_applies: snapshot.auto_profile().chosen.map(|e| e.key.to_string()),
            auto_claimants: snapshot
                .profiles
                .iter()
                .filter(|e| e.parsed.profile.auto_activate == Some(true))
                .map(|e| e.key.to_string())
                .collect(),
            prompt_stacks: snapshot
                .stacks
                .iter()
                .map(|e| StackChoice {
                    id: e.key.id.clone(),
                    name: e.parsed.stack.name().map(str::to_string),
                    selector: e.key.to_string(),
                    scope: e.key.scope.as_str().to_string(),
                })
                .collect(),
        }
    })
    .await?;
    Ok(ok_typed(&view))
}

/// `GET /api/profiles/status` → `{liveHost, current, lastApplied}`.
async fn status(State(state): State<AppState>) -> Response {
    let snapshot = state.ws.snapshot();
    ok_typed(&status_view(&state, &snapshot))
}

/// `GET /api/profiles/:sel` (a bare id prefers the project) → the profile with its preview.
async fn read(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let entry = resolve(&snapshot, &sel)?;
    Ok(with_etag(
        &entry_view(&state, &snapshot, entry),
        &entry.revision,
    ))
}

fn written_response(
    state: &ServerState,
    status: StatusCode,
    outcome: &Outcome,
    snapshot: &WorkspaceSnapshot,
) -> ApiResult<Response> {
    let (entry, revision) = written_entry(outcome, &snapshot.profiles, "profile")?;
    Ok(ok_view_response(
        status,
        entry_view(state, snapshot, entry),
        &revision,
    ))
}

/// `POST /api/profiles` `{profile, scope?, overwrite?}` → 201.
async fn create(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let value = resource_object(&body, "profile")?;
    let scope = service::parse_scope(body.get("scope"))?;
    let overwrite = matches!(body.get("overwrite"), Some(Value::Bool(true)));
    let (outcome, snapshot) = mutate(&state, move |store, snapshot| {
        service::create(store, snapshot, Kind::Profile, scope, &value, overwrite).map(Outcome::from)
    })
    .await?;
    written_response(&state, StatusCode::CREATED, &outcome, &snapshot)
}

/// `PUT /api/profiles/:sel` `{profile, sourceRevision?}` with `If-Match` or a body revision. A
/// bare id means the project's profile; a global one needs `global:<id>`.
async fn save(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let selector = selector(&sel)?;
    let (outcome, snapshot) =
        save_resource(&state, Kind::Profile, "profile", selector, &headers, body).await?;
    written_response(&state, StatusCode::OK, &outcome, &snapshot)
}

/// `DELETE /api/profiles/:sel` with `If-Match` or `{sourceRevision}` → `{ok, deleted}`.
async fn remove(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    deleted_response(&state, Kind::Profile, selector(&sel)?, &headers, body).await
}

/// `POST /api/profiles/:sel/fork` `{id, scope?}` → 201.
async fn fork(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let (outcome, snapshot, _) =
        fork_resource(&state, Kind::Profile, selector(&sel)?, body).await?;
    written_response(&state, StatusCode::CREATED, &outcome, &snapshot)
}

/// A draft profile as if it were loaded from `file` in `scope`, with `diagnostics`.
fn draft_entry(
    value: &Value,
    scope: Scope,
    file_name: &str,
    diagnostics: Vec<Diagnostic>,
) -> ApiResult<ProfileEntry> {
    let parsed = profile::parse_profile_value(value.clone(), file_name, scope);
    let file = FileRef::new(scope, Dir::Profiles, file_name)
        .or_else(|_| FileRef::new(scope, Dir::Profiles, "draft.json"))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Loaded {
        key: parsed.profile.key(scope),
        file,
        path: String::new(),
        revision: String::new(),
        parsed,
        diagnostics,
    })
}

fn validation_view(
    state: &ServerState,
    snapshot: &WorkspaceSnapshot,
    entry: &ProfileEntry,
) -> ProfileValidation {
    let (errors, warnings, _) = counts(&entry.diagnostics);
    ProfileValidation {
        preview: preview_of(state, snapshot, entry),
        diagnostics: entry.diagnostics.clone(),
        errors,
        warnings,
        valid: errors == 0,
    }
}

/// `POST /api/profiles/validate` `{profile, existingId?, scope?}` → `{preview, diagnostics,
/// errors, warnings, valid}`. With `existingId` the draft is checked as a save of that profile.
async fn validate(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let value = resource_object(&body, "profile")?;
    let snapshot = state.ws.snapshot();
    let entry = match body.get("existingId") {
        None | Some(Value::Null) => {
            let scope = service::parse_scope(body.get("scope"))?;
            let diagnostics = service::validate(Kind::Profile, scope, &value, &snapshot);
            let id = value.get("id").and_then(Value::as_str).unwrap_or("draft");
            draft_entry(&value, scope, &format!("{id}.json"), diagnostics)?
        }
        Some(Value::String(existing)) => {
            let selector = selector(existing)?;
            let target = service::resolve_for_write(&snapshot, Kind::Profile, &selector)?;
            let (scope, name) = (target.key.scope, target.file.name().to_string());
            let diagnostics =
                service::validate_update(Kind::Profile, &selector, &value, &snapshot)?;
            draft_entry(&value, scope, &name, diagnostics)?
        }
        Some(_) => {
            return Err(
                ApiError::bad_request("existingId must be a string.").with_field("existingId")
            )
        }
    };
    let view =
        tokio::task::spawn_blocking(move || validation_view(&state, &snapshot, &entry)).await?;
    Ok(ok_typed(&view))
}

/// `POST /api/profiles/:sel/preview` `{profile?}` → the preview of the saved profile, or of the
/// draft as a save over it.
async fn preview(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let body: Map<String, Value> = body.object()?;
    let snapshot = state.ws.snapshot();
    let entry = match body.get("profile") {
        None | Some(Value::Null) => resolve(&snapshot, &sel)?.clone(),
        Some(draft @ Value::Object(_)) => {
            let selector = selector(&sel)?;
            let target = service::resolve_for_write(&snapshot, Kind::Profile, &selector)?;
            let (scope, name) = (target.key.scope, target.file.name().to_string());
            let diagnostics = service::validate_update(Kind::Profile, &selector, draft, &snapshot)?;
            draft_entry(draft, scope, &name, diagnostics)?
        }
        Some(_) => {
            return Err(
                ApiError::bad_request("profile must be a JSON object.").with_field("profile")
            )
        }
    };
    let view = tokio::task::spawn_blocking(move || Saved {
        view: preview_of(&state, &snapshot, &entry),
        ok: true,
    })
    .await?;
    Ok(ok_typed(&view))
}

/// `POST /api/profiles/:sel/apply` → the live Pi session switches model, thinking level, Preset
/// and tools in one command and records the provenance. `{ok, profileId, applied, notes}`;
/// 400 `not_applicable` when preflight fails (nothing changes), 503 `no_live_session`, 502
/// `host_refused` when Pi refuses (e.g. no credentials for the model; nothing changes then).
async fn apply(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let entry = resolve(&snapshot, &sel)?.clone();
    Ok(ok_typed(&apply_profile(&state, &snapshot, &entry).await?))
}

/// A fresh Pi session in a trusted project applies the one usable auto-activating profile, once
/// its command stream is open (A8). Called after `hello`; a failure is reported on stderr only.
pub fn auto_apply(state: AppState) {
    let snapshot = state.ws.snapshot();
    let Some(entry) = snapshot.auto_profile().chosen.cloned() else {
        return;
    };
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + crate::live::ATTACH_GRACE;
        while !state.live.connected() {
            if tokio::time::Instant::now() > deadline {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if let Err(e) = apply_profile(&state, &snapshot, &entry).await {
            eprintln!(
                "pi-forge: could not auto-apply profile {}: {}",
                entry.key, e.message
            );
        }
    });
}

/// Applies `entry` to the live session (see [`apply`]) and returns the answer's body.
async fn apply_profile(
    state: &ServerState,
    snapshot: &WorkspaceSnapshot,
    entry: &ProfileEntry,
) -> ApiResult<Applied> {
    let profile = entry.parsed.profile.clone();
    let preview = preview_of(state, snapshot, entry);
    if !preview.applicable {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "not_applicable",
            format!(
                "Profile {} failed preflight; runtime state was not changed.",
                entry.key
            ),
        )
        .with_details(json!({ "diagnostics": preview.diagnostics })));
    }
    if !state.live.connected() {
        return Err(crate::live::LiveError::NoLiveSession.into());
    }
    let stack_key = preview.target.prompt_stack.clone();
    let tools = json!(preview.target.effective_tools);
    let mut body = Map::new();
    body.insert("model".into(), profile.model.to_value());
    body.insert(
        "thinkingLevel".into(),
        Value::from(profile.thinking_level.as_str()),
    );
    body.insert("tools".into(), tools.clone());
    body.insert("activeStackId".into(), json!(stack_key));
    body.insert(
        "entries".into(),
        json!([{
            "customType": STACK_STATE_TYPE,
            "data": session::stack_state_data(stack_key.as_deref()),
        }]),
    );
    let before = state.live.with_live(|h| h.choice())?;
    let result = command_switching_stack(state, "applyProfile", body, stack_key.clone()).await?;
    let used_thinking = result
        .get("thinkingLevel")
        .and_then(Value::as_str)
        .map(str::to_string);
    let applied_model = result
        .get("model")
        .cloned()
        .unwrap_or_else(|| profile.model.to_value());
    let active_tools = result.get("activeTools").cloned().unwrap_or(Value::Null);
    let mut notes = Vec::new();
    if used_thinking.as_deref() != Some(profile.thinking_level.as_str()) {
        notes.push(format!(
            "Thinking level {} is not available for {}/{}; Pi uses {}.",
            profile.thinking_level,
            profile.model.provider,
            profile.model.id,
            used_thinking.as_deref().unwrap_or("none")
        ));
    }
    if let (Some(wanted), Some(got)) = (tools.as_array(), active_tools.as_array()) {
        for tool in wanted.iter().filter(|t| !got.contains(t)) {
            notes.push(format!(
                "Tool {} is not registered in Pi and was not activated.",
                tool.as_str().unwrap_or_default()
            ));
        }
    }
    let applied = LiveChoice {
        model: Some(profile.model.clone()),
        thinking_level: used_thinking.clone(),
        prompt_stack: stack_key.clone(),
    };
    let provenance = session::provenance(
        &profile,
        entry.key.scope,
        &entry.path,
        &chrono::Utc::now()
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string(),
        &applied,
    );
    let mut record = Map::new();
    record.insert(
        "entries".into(),
        json!([{ "customType": session::PROFILE_STATE_TYPE, "data": { "provenance": provenance } }]),
    );
    command_ok(&state.live.command("appendEntries", record).await?)?;
    state.live.with_live(|h| {
        h.set_active_stack(stack_key.clone());
        h.set_provenance(Some(provenance.clone()));
    })?;
    Ok(Applied {
        ok: true,
        profile_id: entry.key.to_string(),
        applied: AppliedChoice {
            model: applied_model,
            thinking_level: used_thinking,
            prompt_stack: stack_key,
            active_tools,
        },
        changed: session::changes(&before, &applied),
        notes,
    })
}
