//! `/api/config`: the project's `.pi/forge/config.json` (editor port and locale; unknown keys are
//! kept), read and written with revisions like every resource.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use forge_core::canonical::revision;
use forge_core::config::MAX_CONFIG_BYTES;
use forge_core::id::{ResourceKey, Scope};
use forge_core::json;
use forge_core::workspace::service::{ServiceError, Written};
use forge_core::workspace::{Dir, FileRef, Store, StoreError, WorkspaceSnapshot};
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{
    bare_revision, base_revision, etag, json_response, resource_object, JsonBody,
};
use super::write::{mutate, Outcome};
use super::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/config", get(read).put(save))
}

fn config_file() -> FileRef {
    FileRef::new(Scope::Project, Dir::Root, "config.json").expect("config.json is a plain name")
}

fn view(state: &AppState, snapshot: &WorkspaceSnapshot) -> (Value, Option<String>) {
    let path = state.ws.store.display_path(&config_file());
    match &snapshot.config {
        Some(entry) => {
            let parsed = &entry.parsed.config;
            (
                json!({
                    "selector": "project:config",
                    "scope": "project",
                    "path": entry.path,
                    "exists": true,
                    "trusted": snapshot.trusted,
                    "revision": entry.revision,
                    "sourceRevision": bare_revision(&entry.revision),
                    "diagnostics": entry.diagnostics,
                    "config": parsed.raw.clone().unwrap_or_else(|| Value::Object(Map::new())),
                    "webEditor": {
                        "port": parsed.web_editor_port,
                        "locale": parsed.locale.map(|l| l.as_str()),
                    },
                }),
                Some(entry.revision.clone()),
            )
        }
        None => (
            json!({
                "selector": "project:config",
                "scope": "project",
                "path": path,
                "exists": false,
                "trusted": snapshot.trusted,
                "revision": Value::Null,
                "sourceRevision": Value::Null,
                "diagnostics": [],
                "config": {},
                "webEditor": { "port": Value::Null, "locale": Value::Null },
            }),
            None,
        ),
    }
}

fn respond(status: StatusCode, view: (Value, Option<String>)) -> Response {
    let mut response = json_response(status, &view.0);
    if let Some(value) = view.1.as_deref().and_then(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// `GET /api/config` → `{config, exists, revision, diagnostics, webEditor, path, …}`.
async fn read(State(state): State<AppState>) -> Response {
    let snapshot = state.ws.snapshot();
    respond(StatusCode::OK, view(&state, &snapshot))
}

fn store_error(store: &dyn Store, file: &FileRef, error: StoreError) -> ServiceError {
    match error {
        StoreError::Conflict { current, .. } => match store.read(file, MAX_CONFIG_BYTES) {
            Ok(bytes) => ServiceError::Stale {
                current_revision: revision(&bytes),
                current: json::parse_bytes(&bytes).ok(),
            },
            Err(_) => ServiceError::Stale {
                current_revision: current,
                current: None,
            },
        },
        StoreError::Exists(_) => ServiceError::Stale {
            current_revision: store
                .read(file, MAX_CONFIG_BYTES)
                .map(|b| revision(&b))
                .unwrap_or_default(),
            current: None,
        },
        StoreError::InvalidPath(_) => ServiceError::InvalidPath(error.to_string()),
        other => ServiceError::Io(other.to_string()),
    }
}

/// `PUT /api/config` `{config, sourceRevision?}` (or `If-Match`). Creating the file needs no
/// revision; replacing it does. Problems in the values are warnings (the editor falls back to
/// defaults), so they never block a save.
async fn save(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let body = body.object()?;
    if !state.ws.trusted() {
        return Err(ApiError::untrusted("save the editor config"));
    }
    let expected = base_revision(&headers, &body)?;
    let value = resource_object(&body, "config")?;
    let bytes = json::to_pretty(&value).into_bytes();
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ApiError::bad_request(format!(
            "config.json is too large: {} bytes (the limit is {MAX_CONFIG_BYTES} bytes).",
            bytes.len()
        )));
    }
    let (_, snapshot) = mutate(&state, move |store, snapshot| {
        let file = config_file();
        let new_revision = match (&snapshot.config, expected) {
            (None, None) => store.create(&file, &bytes),
            (_, Some(expected)) => store.update(&file, &expected, &bytes),
            (Some(_), None) => return Err(ServiceError::MissingRevision),
        }
        .map_err(|e| store_error(store, &file, e))?;
        Ok(Outcome::from(Written {
            key: ResourceKey::new(Scope::Project, "config"),
            path: store.display_path(&file),
            file,
            revision: new_revision,
        }))
    })
    .await?;
    let (mut view, revision) = view(&state, &snapshot);
    if let Value::Object(map) = &mut view {
        map.insert("ok".into(), Value::Bool(true));
    }
    Ok(respond(StatusCode::OK, (view, revision)))
}
