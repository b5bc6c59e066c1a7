//! `/api/capabilities` (capabilities spec B10): the capability library and the effective view
//! of a Preset's bindings.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{
    BindingRef, BindingSource, CapabilityList, EffectiveBinding, EffectiveBindings, Key, Validation,
};
use forge_core::capability;
use std::collections::BTreeMap;

use forge_core::id::{ResourceKey, Selector};
use forge_core::workspace::service::{self, Kind};
use forge_core::workspace::{CapabilityEntry, Resolved, WorkspaceSnapshot};
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{ok_typed, resource_object, JsonBody};
use super::stacks::selector;
use super::views::{capability_view, with_etag};
use super::write::{
    deleted_response, export_file, fork_resource, mutate, ok_view_response, save_resource,
    written_entry, Outcome,
};
use super::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/capabilities", get(list).post(create))
        .route("/api/capabilities/effective", post(effective))
        .route("/api/capabilities/validate", post(validate))
        .route(
            "/api/capabilities/{sel}",
            get(read).put(save).delete(remove),
        )
        .route("/api/capabilities/{sel}/fork", post(fork))
        .route("/api/capabilities/{sel}/export", get(export))
}

/// B10: reads need a qualified selector (`project:<id>` or `global:<id>`).
fn qualified(sel: &str) -> ApiResult<Selector> {
    match selector(sel)? {
        scoped @ Selector::Scoped(_) => Ok(scoped),
        Selector::Bare(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_selector",
            format!("Capability selector must be qualified: project:{sel} or global:{sel}."),
        )),
    }
}

fn resolve<'a>(snapshot: &'a WorkspaceSnapshot, sel: &str) -> ApiResult<&'a CapabilityEntry> {
    let Selector::Scoped(key) = qualified(sel)? else {
        unreachable!("qualified() returns scoped selectors only")
    };
    let found: Vec<&CapabilityEntry> = snapshot
        .capabilities
        .iter()
        .filter(|e| e.key == key)
        .collect();
    match found.as_slice() {
        [] => Err(ApiError::not_found(format!("Unknown capability: {key}"))),
        [one] => Ok(one),
        many => Err(ApiError::new(
            StatusCode::CONFLICT,
            "ambiguous",
            format!(
                "Capability {key} is ambiguous: several files define it ({}).",
                many.iter()
                    .map(|e| e.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

fn users_of<'a>(
    users: &'a BTreeMap<ResourceKey, Vec<ResourceKey>>,
    entry: &CapabilityEntry,
) -> &'a [ResourceKey] {
    users.get(&entry.key).map_or(&[], Vec::as_slice)
}

/// `GET /api/capabilities` → `{ok, trusted, capabilities}`.
async fn list(State(state): State<AppState>) -> Response {
    let snapshot = state.ws.snapshot();
    let users = snapshot.capability_users();
    ok_typed(&CapabilityList {
        ok: true,
        trusted: snapshot.trusted,
        capabilities: snapshot
            .capabilities
            .iter()
            .map(|e| capability_view(e, &snapshot, users_of(&users, e)))
            .collect(),
    })
}

/// `GET /api/capabilities/:scope:id`.
async fn read(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let entry = resolve(&snapshot, &sel)?;
    let users = snapshot.capability_users();
    Ok(with_etag(
        &capability_view(entry, &snapshot, users_of(&users, entry)),
        &entry.revision,
    ))
}

fn written_response(
    status: StatusCode,
    outcome: &Outcome,
    snapshot: &WorkspaceSnapshot,
) -> ApiResult<Response> {
    let (entry, revision) = written_entry(outcome, &snapshot.capabilities, "capability")?;
    let users = snapshot.capability_users();
    Ok(ok_view_response(
        status,
        capability_view(entry, snapshot, users_of(&users, entry)),
        &revision,
    ))
}

/// `POST /api/capabilities` `{scope?, capability}` → 201.
async fn create(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let value = resource_object(&body, "capability")?;
    let scope = service::parse_scope(body.get("scope"))?;
    let (outcome, snapshot) = mutate(&state, move |store, snapshot| {
        service::create(store, snapshot, Kind::Capability, scope, &value, false).map(Outcome::from)
    })
    .await?;
    written_response(StatusCode::CREATED, &outcome, &snapshot)
}

/// `PUT /api/capabilities/:sel` `{capability, expectedSourceRevision}` (or `If-Match`).
async fn save(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let selector = selector(&sel)?;
    let (outcome, snapshot) = save_resource(
        &state,
        Kind::Capability,
        "capability",
        selector,
        &headers,
        body,
    )
    .await?;
    written_response(StatusCode::OK, &outcome, &snapshot)
}

/// `DELETE /api/capabilities/:sel` `{expectedSourceRevision}` (or `If-Match`) → `{ok, deleted}`.
async fn remove(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    deleted_response(&state, Kind::Capability, selector(&sel)?, &headers, body).await
}

/// `POST /api/capabilities/:sel/fork` `{id, scope?}` → 201: a copy under a new id, usually in
/// the other scope.
async fn fork(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let (outcome, snapshot, _) =
        fork_resource(&state, Kind::Capability, qualified(&sel)?, body).await?;
    written_response(StatusCode::CREATED, &outcome, &snapshot)
}

/// `GET /api/capabilities/:sel/export` → the file's bytes, exactly as on disk, as a download.
async fn export(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let entry = resolve(&snapshot, &sel)?;
    let missing = format!("Unknown capability: {sel}");
    let limit = capability::MAX_CAPABILITY_SOURCE_SIZE as u64;
    export_file(&state, entry.file.clone(), &entry.key.id, limit, missing).await
}

/// `POST /api/capabilities/validate` `{capability, scope?}` → `{diagnostics, errors, warnings,
/// valid}` for a new capability.
async fn validate(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let value = resource_object(&body, "capability")?;
    let scope = service::parse_scope(body.get("scope"))?;
    let snapshot = state.ws.snapshot();
    let diagnostics = service::validate(Kind::Capability, scope, &value, &snapshot);
    Ok(ok_typed(&Validation::of(diagnostics)))
}

/// `POST /api/capabilities/effective` `{presetSelector, bindings}` → `{ok, bindings:[{id, ref,
/// modelCallable, source, effective}]}`: each binding resolved relative to the Preset's scope and
/// its overrides applied. 404 for an unknown Preset; 400 when a binding does not resolve or apply.
async fn effective(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let Some(preset) = body.get("presetSelector").and_then(Value::as_str) else {
        return Err(ApiError::bad_request(
            "presetSelector must be a string: <scope>:<id> of the Preset.",
        )
        .with_field("presetSelector"));
    };
    let snapshot = state.ws.snapshot();
    let owner = match snapshot.resolve_stack(&selector(preset)?) {
        Resolved::Found(entry) => entry.key.clone(),
        Resolved::NotFound => {
            return Err(ApiError::not_found(format!(
                "Unknown prompt stack: {preset}"
            )))
        }
        Resolved::Ambiguous(_) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "ambiguous",
                format!("Prompt stack {preset} is ambiguous: several files define it."),
            ))
        }
    };
    let bindings_value = body
        .get("bindings")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let (bindings, diagnostics) = capability::parse_bindings(&bindings_value, owner.scope);
    if let Some(first) = diagnostics.iter().find(|d| d.is_error()) {
        let mut error = ApiError::bad_request(first.message.clone())
            .with_details(json!({ "diagnostics": diagnostics }));
        if let Some(field) = &first.field {
            error = error.with_field(format!(
                "bindings{}",
                field.trim_start_matches("capabilities")
            ));
        }
        return Err(error);
    }
    let mut out = Vec::with_capacity(bindings.len());
    for (index, binding) in bindings.iter().enumerate() {
        let target = snapshot
            .binding_target(owner.scope, &binding.reference)
            .map_err(|e| {
                ApiError::new(StatusCode::BAD_REQUEST, "binding_unresolved", e.to_string())
                    .with_field(format!("bindings[{index}].ref"))
            })?;
        let effective =
            capability::effective_from_parsed(&target.parsed, binding.overrides.as_ref()).map_err(
                |errors| {
                    let message = errors
                        .first()
                        .map(|d| d.message.clone())
                        .unwrap_or_else(|| "The binding's overrides do not apply.".to_string());
                    ApiError::new(StatusCode::BAD_REQUEST, "binding_invalid", message)
                        .with_field(format!("bindings[{index}].overrides"))
                        .with_details(json!({ "diagnostics": errors }))
                },
            )?;
        out.push(EffectiveBinding {
            id: binding.effective_id().to_string(),
            reference: target.key.to_string(),
            model_callable: binding.model_callable,
            source: BindingSource {
                kind: "capability".to_string(),
                key: Key {
                    scope: target.key.scope.as_str().to_string(),
                    id: target.key.id.clone(),
                },
                binding: BindingRef {
                    preset: Key {
                        scope: owner.scope.as_str().to_string(),
                        id: owner.id.clone(),
                    },
                    id: binding.effective_id().to_string(),
                },
                revision: target.revision.clone(),
            },
            effective: effective.to_value(),
        });
    }
    Ok(ok_typed(&EffectiveBindings {
        ok: true,
        bindings: out,
    }))
}
