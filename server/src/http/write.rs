//! The write path shared by every mutation: take the workspace lock, run the forge-core write
//! service on the blocking pool against the current snapshot, then reload while still holding
//! the lock. So a `GET` right after the response sees the new revision, and the change is
//! published once, with origin `self`; the watcher's later reload finds nothing new.

use std::collections::HashSet;
use std::sync::Arc;

use forge_core::id::{ResourceKey, Selector};
use forge_core::workspace::service::{self, Kind, ServiceError, Written};
use forge_core::workspace::{FileRef, FsStore, WorkspaceSnapshot};

use axum::http::HeaderMap;

use super::error::{ApiError, ApiResult};
use super::extract::{base_revision, resource_object, JsonBody};
use super::ServerState;

/// What a mutation wrote.
pub struct Outcome {
    /// The files the service changed (created, replaced or deleted).
    pub files: HashSet<FileRef>,
    pub written: Option<Written>,
    /// The resource a delete removed.
    pub deleted: Option<ResourceKey>,
}

impl From<Written> for Outcome {
    fn from(written: Written) -> Outcome {
        Outcome {
            files: [written.file.clone()].into_iter().collect(),
            written: Some(written),
            deleted: None,
        }
    }
}

impl Outcome {
    /// Resolves `selector` for writing, then deletes it at `expected`.
    pub fn delete(
        store: &FsStore,
        snapshot: &WorkspaceSnapshot,
        kind: Kind,
        selector: &Selector,
        expected: Option<&str>,
    ) -> Result<Outcome, ServiceError> {
        let target = service::resolve_for_write(snapshot, kind, selector)?;
        let (file, key) = (target.file.clone(), target.key.clone());
        service::delete(store, snapshot, kind, selector, expected)?;
        Ok(Outcome {
            files: [file].into_iter().collect(),
            written: None,
            deleted: Some(key),
        })
    }
}

/// Runs `op` under the workspace lock and reloads after it succeeded. Returns what it wrote and
/// the snapshot that includes it.
pub async fn mutate<F>(state: &ServerState, op: F) -> ApiResult<(Outcome, Arc<WorkspaceSnapshot>)>
where
    F: FnOnce(&FsStore, &WorkspaceSnapshot) -> Result<Outcome, ServiceError> + Send + 'static,
{
    let guard = state.ws.lock().await;
    let snapshot = state.ws.snapshot();
    let store = Arc::clone(&state.ws.store);
    let outcome = tokio::task::spawn_blocking(move || op(&store, &snapshot)).await??;
    state.ws.reload_locked(&guard, &outcome.files).await;
    Ok((outcome, state.ws.snapshot()))
}

/// The save every resource shares: `PUT /api/<kind>/:sel` with `{<field>: …}` (or the bare
/// resource) and its base revision from `If-Match` or the body.
pub async fn save_resource(
    state: &ServerState,
    kind: Kind,
    field: &str,
    selector: Selector,
    headers: &HeaderMap,
    body: JsonBody,
) -> ApiResult<(Outcome, Arc<WorkspaceSnapshot>)> {
    let body = body.object()?;
    let expected = base_revision(headers, &body)?;
    let value = resource_object(&body, field)?;
    mutate(state, move |store, snapshot| {
        service::update(
            store,
            snapshot,
            kind,
            &selector,
            expected.as_deref(),
            &value,
        )
        .map(Outcome::from)
    })
    .await
}

/// The delete every resource shares: `DELETE /api/<kind>/:sel` with its base revision from
/// `If-Match` or the body.
pub async fn delete_resource(
    state: &ServerState,
    kind: Kind,
    selector: Selector,
    headers: &HeaderMap,
    body: JsonBody,
) -> ApiResult<Outcome> {
    let body = body.object()?;
    let expected = base_revision(headers, &body)?;
    let (outcome, _) = mutate(state, move |store, snapshot| {
        Outcome::delete(store, snapshot, kind, &selector, expected.as_deref())
    })
    .await?;
    Ok(outcome)
}

/// The fork every resource shares: `POST /api/<kind>/:sel/fork` with `{id, scope?, name?}`
/// (`name`: the copy's display name; the source's when absent). Returns the
/// body too, for flags a kind reads beside the copy (a stack's `activate`).
pub async fn fork_resource(
    state: &ServerState,
    kind: Kind,
    selector: Selector,
    body: JsonBody,
) -> ApiResult<(
    Outcome,
    Arc<WorkspaceSnapshot>,
    serde_json::Map<String, serde_json::Value>,
)> {
    let body = body.object()?;
    let Some(new_id) = body
        .get("id")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
    else {
        return Err(
            ApiError::bad_request("id must be a string: the id of the copy.").with_field("id"),
        );
    };
    let scope = service::parse_scope(body.get("scope"))?;
    let name = match body.get("name") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(name)) => Some(name.clone()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "name must be a string: the display name of the copy.",
            )
            .with_field("name"))
        }
    };
    let (outcome, snapshot) = mutate(state, move |store, snapshot| {
        let name = name.as_deref();
        service::fork_named(store, snapshot, kind, &selector, &new_id, scope, name)
            .map(Outcome::from)
    })
    .await?;
    Ok((outcome, snapshot, body))
}

/// `GET /api/<kind>/:sel/export`: the file's bytes exactly as on disk, as a `<id>.json`
/// download with the revision as `ETag`. `missing` is the 404 message.
pub async fn export_file(
    state: &ServerState,
    file: FileRef,
    id: &str,
    limit: u64,
    missing: String,
) -> ApiResult<axum::response::Response> {
    use axum::http::{header, HeaderValue, StatusCode};
    use axum::response::IntoResponse;
    use forge_core::workspace::{Store as _, StoreError};
    let store = Arc::clone(&state.ws.store);
    let bytes = tokio::task::spawn_blocking(move || store.read(&file, limit))
        .await?
        .map_err(|e| match e {
            StoreError::Missing(_) => ApiError::not_found(missing),
            other => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "io", other.to_string()),
        })?;
    let tag = super::extract::etag(&forge_core::canonical::revision(&bytes));
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{id}.json\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Some(value) = tag {
        headers.insert(header::ETAG, value);
    }
    Ok(response)
}

/// `DELETE /api/<kind>/:sel` for profiles and capabilities: `{ok: true, deleted: "<scope:id>"}`.
pub async fn deleted_response(
    state: &ServerState,
    kind: Kind,
    selector: Selector,
    headers: &HeaderMap,
    body: JsonBody,
) -> ApiResult<axum::response::Response> {
    let outcome = delete_resource(state, kind, selector, headers, body).await?;
    Ok(super::extract::ok_typed(&forge_core::api::Deleted {
        ok: true,
        deleted: outcome.deleted.map(|k| k.to_string()),
    }))
}

/// The entry a successful write produced in the reloaded snapshot, with the written revision.
pub fn written_entry<'a, T>(
    outcome: &Outcome,
    entries: &'a [forge_core::workspace::Loaded<T>],
    noun: &str,
) -> ApiResult<(&'a forge_core::workspace::Loaded<T>, String)> {
    let written = outcome
        .written
        .as_ref()
        .ok_or_else(|| super::error::ApiError::internal("The write reported no file."))?;
    let entry = entries
        .iter()
        .find(|e| e.file == written.file)
        .ok_or_else(|| {
            super::error::ApiError::internal(format!("The written {noun} did not load."))
        })?;
    Ok((entry, written.revision.clone()))
}

/// The answer to a successful write: `{...view, ok: true}` with the new revision as `ETag`.
pub fn ok_view_response<T: serde::Serialize>(
    status: axum::http::StatusCode,
    view: T,
    revision: &str,
) -> axum::response::Response {
    let saved = forge_core::api::Saved { view, ok: true };
    let mut response = super::extract::typed_response(status, &saved);
    if let Some(value) = super::extract::etag(revision) {
        response
            .headers_mut()
            .insert(axum::http::header::ETAG, value);
    }
    response
}
