//! `/api/agent/settings`: the delegation settings files (`subagents.json`, §D8) read and written
//! with revisions like every other file, and each profile's effective settings.
//!
//! The files are the ones `agent::SubagentsFiles` reads for delegation: the project's
//! `.pi/forge/subagents.json` (trusted projects only) and `<global>/subagents.json`, addressed
//! here as the store's `FileRef`s in `Dir::Root`. The workspace snapshot does not hold them, so
//! they are read through the store on every request; `GET /api/agent/profiles` reads them from
//! disk too, so a save counts at once.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, put};
use axum::Router;
use forge_core::api::{AgentSettings, DelegationProfile, SubagentsFileView, SubagentsFileViews};
use forge_core::canonical::revision;
use forge_core::delegation::config::{
    effective_entry_scope, find_profile_key, parse_subagents_value, profile_settings,
    SettingsLayers, SubagentsConfig, MAX_SUBAGENTS_BYTES,
};
use forge_core::diag::Diagnostic;
use forge_core::id::Scope;
use forge_core::json;
use forge_core::workspace::service::ServiceError;
use forge_core::workspace::{Dir, FileRef, FsStore, Store, StoreError, WorkspaceSnapshot};
use serde_json::{Map, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{bare_revision, base_revision, etag, typed_response, JsonBody};
use super::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/agent/settings", get(read))
        .route("/api/agent/settings/{scope}", put(save))
}

fn subagents_file(scope: Scope) -> FileRef {
    FileRef::new(scope, Dir::Root, "subagents.json").expect("subagents.json is a plain name")
}

/// One file as read now: its view, the raw value and the parsed settings (`None` when absent).
struct FileState {
    view: SubagentsFileView,
    parsed: Option<SubagentsConfig>,
}

fn read_file(store: &FsStore, scope: Scope, trusted: bool) -> FileState {
    let file = subagents_file(scope);
    let mut view = SubagentsFileView {
        scope,
        path: store.display_path(&file),
        exists: false,
        revision: None,
        source_revision: None,
        settings: Value::Object(Map::new()),
        diagnostics: Vec::new(),
    };
    // An untrusted project's files are not read at all.
    if scope == Scope::Project && !trusted {
        return FileState { view, parsed: None };
    }
    let bytes = match store.read(&file, MAX_SUBAGENTS_BYTES) {
        Ok(bytes) => bytes,
        Err(StoreError::Missing(_)) => return FileState { view, parsed: None },
        Err(e) => {
            view.exists = true;
            view.diagnostics.push(Diagnostic::warning(format!(
                "{e}; delegation reads it, but the editor cannot change it."
            )));
            return FileState { view, parsed: None };
        }
    };
    let rev = revision(&bytes);
    view.exists = true;
    view.source_revision = Some(bare_revision(&rev).to_string());
    view.revision = Some(rev);
    match json::parse_bytes(&bytes) {
        Ok(value) => {
            let parsed = parse_subagents_value(&value, scope, "subagents.json");
            view.diagnostics = parsed.diagnostics;
            view.settings = value;
            FileState {
                view,
                parsed: Some(parsed.config),
            }
        }
        Err(e) => {
            // `null`, not `{}`: an editor must not mistake it for an empty file and replace it.
            view.settings = Value::Null;
            view.diagnostics.push(Diagnostic::warning(format!(
                "Failed to parse subagents.json: {e}; delegation uses defaults."
            )));
            FileState {
                view,
                parsed: Some(SubagentsConfig::default()),
            }
        }
    }
}

/// The settings answer: both files and every loaded profile's effective settings.
fn settings(store: &FsStore, snapshot: &WorkspaceSnapshot, trusted: bool) -> AgentSettings {
    let project = read_file(store, Scope::Project, trusted);
    let global = read_file(store, Scope::Global, trusted);
    let layers = SettingsLayers {
        global: global.parsed.iter().collect(),
        project: project.parsed.iter().collect(),
    };
    let profiles = snapshot
        .profiles
        .iter()
        .map(|entry| {
            let key = &entry.key;
            let effective = profile_settings(&layers, trusted, key, None);
            let entry_scope = effective_entry_scope(
                project.parsed.as_ref(),
                global.parsed.as_ref(),
                trusted,
                key,
            );
            let (file, parsed) = match entry_scope {
                Scope::Project => (&project.view, project.parsed.as_ref()),
                Scope::Global => (&global.view, global.parsed.as_ref()),
            };
            let entry_timeout_ms = parsed.and_then(|c| {
                c.profiles
                    .iter()
                    .find(|(k, _)| k == key)
                    .and_then(|(_, p)| p.timeout_ms)
            });
            DelegationProfile {
                profile_id: match key.scope {
                    Scope::Project => key.id.clone(),
                    Scope::Global => key.to_string(),
                },
                selector: key.to_string(),
                enabled: effective.enabled,
                timeout_ms: effective.timeout_ms,
                entry_timeout_ms,
                backend: effective.backend,
                unattended: effective.unattended,
                entry_scope,
                entry_key: find_profile_key(&file.settings, key),
            }
        })
        .collect();
    AgentSettings {
        ok: true,
        trusted,
        files: SubagentsFileViews {
            project: project.view,
            global: global.view,
        },
        profiles,
    }
}

async fn current(state: &AppState) -> ApiResult<AgentSettings> {
    let store = std::sync::Arc::clone(&state.ws.store);
    let snapshot = state.ws.snapshot();
    let trusted = state.ws.trusted();
    Ok(tokio::task::spawn_blocking(move || settings(&store, &snapshot, trusted)).await?)
}

/// `GET /api/agent/settings` → `{ok, trusted, files: {project, global}, profiles}`.
async fn read(State(state): State<AppState>) -> ApiResult<Response> {
    Ok(typed_response(StatusCode::OK, &current(&state).await?))
}

fn store_error(store: &dyn Store, file: &FileRef, error: StoreError) -> ServiceError {
    let current = |fallback: String| match store.read(file, MAX_SUBAGENTS_BYTES) {
        Ok(bytes) => ServiceError::Stale {
            current_revision: revision(&bytes),
            current: json::parse_bytes(&bytes).ok(),
        },
        Err(_) => ServiceError::Stale {
            current_revision: fallback,
            current: None,
        },
    };
    match error {
        StoreError::Conflict { current: rev, .. } => current(rev),
        // Created meanwhile by someone else: stale like any other change on disk.
        StoreError::Exists(_) => current(String::new()),
        // Deleted since it was read: the change was based on a file that is gone.
        StoreError::Missing(_) => ServiceError::Stale {
            current_revision: String::new(),
            current: None,
        },
        StoreError::InvalidPath(_) => ServiceError::InvalidPath(error.to_string()),
        StoreError::ReadOnly(_) => ServiceError::ReadOnly(error.to_string()),
        StoreError::TooLarge { path, limit } => ServiceError::Unreadable {
            path,
            reason: format!("it is larger than {limit} bytes"),
        },
        other => ServiceError::Io(other.to_string()),
    }
}

/// `PUT /api/agent/settings/:scope` (`project` | `global`) `{settings, sourceRevision?}` (or
/// `If-Match`): writes the whole file. Creating it needs no revision; replacing it does (428
/// without one, 409 `stale_revision` with the current revision when it changed). The project's
/// file needs a trusted project (403). Problems in the values are warnings, returned in the
/// file's `diagnostics`; they never block the save.
async fn save(
    State(state): State<AppState>,
    Path(scope): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let scope = Scope::parse(&scope).ok_or_else(|| {
        ApiError::not_found(format!(
            "Unknown settings scope {scope:?}: use project or global."
        ))
    })?;
    let body = body.object()?;
    if scope == Scope::Project && !state.ws.trusted() {
        return Err(ApiError::untrusted("save the project's subagents.json"));
    }
    let expected = base_revision(&headers, &body)?;
    let value = match body.get("settings") {
        Some(value @ Value::Object(_)) => value.clone(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "settings must be a JSON object, not {}.",
                json::type_name(other)
            ))
            .with_field("settings"))
        }
        None => {
            return Err(
                ApiError::bad_request("Request body must contain a settings object.")
                    .with_field("settings"),
            )
        }
    };
    let bytes = json::to_pretty(&value).into_bytes();
    if bytes.len() as u64 > MAX_SUBAGENTS_BYTES {
        return Err(ApiError::bad_request(format!(
            "subagents.json is too large: {} bytes (the limit is {MAX_SUBAGENTS_BYTES} bytes).",
            bytes.len()
        ))
        .with_field("settings"));
    }
    let guard = state.ws.lock().await;
    let store = std::sync::Arc::clone(&state.ws.store);
    let new_revision = tokio::task::spawn_blocking(move || {
        let file = subagents_file(scope);
        let exists = match store.read(&file, MAX_SUBAGENTS_BYTES) {
            Ok(_) => true,
            Err(StoreError::Missing(_)) => false,
            // Present but unreadable (too large, a directory, …): only a revision replaces it.
            Err(_) => true,
        };
        match (exists, expected) {
            (false, None) => store.create(&file, &bytes),
            (_, Some(expected)) => store.update(&file, &expected, &bytes),
            (true, None) => return Err(ServiceError::MissingRevision),
        }
        .map_err(|e| store_error(&*store, &file, e))
    })
    .await??;
    drop(guard);
    let answer = current(&state).await?;
    let mut response = typed_response(StatusCode::OK, &answer);
    if let Some(value) = etag(&new_revision) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}
