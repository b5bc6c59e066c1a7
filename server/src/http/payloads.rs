//! Payload inspection over HTTP: the bridge forwards each provider request and its usage
//! (`/api/host/:id/payload`, `/api/host/:id/usage`); the browser and `pi-forge payload` list,
//! read, compare, arm, save and clear the captures (`/api/payloads…`). `docs/api.md` documents
//! the wire.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{ArmRequest, CaptureList, SavedCapture};
use forge_core::diff::{CaptureInfo, TurnSummary, UsageReport};
use forge_core::id::Scope;
use forge_core::json;
use forge_core::payload::{Armed, PayloadError};
use forge_core::workspace::{Dir, FileRef, Store as _, StoreError};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::extract::parse;
use super::extract::{ok_json, ok_typed, typed_response, HostBody, JsonBody};
use super::{AppState, ServerState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/payloads", get(list).delete(clear))
        .route("/api/payloads/arm", post(arm))
        .route("/api/payloads/diff", get(diff))
        .route("/api/payloads/{turn}", get(show))
        .route("/api/payloads/{turn}/save", post(save))
        .route("/api/host/{id}/payload", post(host_payload))
        .route("/api/host/{id}/usage", post(host_usage))
}

impl From<PayloadError> for ApiError {
    fn from(e: PayloadError) -> ApiError {
        let code = match e {
            PayloadError::UnknownTurn(_) => "unknown_turn",
            PayloadError::Empty => "no_captures",
        };
        ApiError::new(StatusCode::NOT_FOUND, code, e.to_string())
    }
}

fn list_value(state: &ServerState) -> CaptureList {
    CaptureList {
        list: state.payloads.view(),
        connected: state.live.connected(),
        trusted: state.ws.trusted(),
    }
}

/// `GET /api/payloads` → `{sessionId, armed, latest, dropped, limit, turns, connected,
/// trusted}`; turns oldest first.
async fn list(State(state): State<AppState>) -> Response {
    ok_typed(&list_value(&state))
}

/// `DELETE /api/payloads` → the (empty) list: forgets every capture, the arm state, the pinned
/// capture and pending usage.
async fn clear(State(state): State<AppState>) -> Response {
    state.payloads.clear();
    ok_typed(&list_value(&state))
}

/// `POST /api/payloads/arm` `{save?, by?}` → the list: the next request becomes the pinned
/// capture (and is saved with `save`, trusted projects only: 403 otherwise).
async fn arm(State(state): State<AppState>, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let request: ArmRequest = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(format!("Malformed arm request: {e}.")).with_field("save")
    })?;
    if request.save && !state.ws.trusted() {
        return Err(ApiError::untrusted("save captured payloads"));
    }
    let by = match request.by.as_deref() {
        None | Some("web") => "web",
        Some("pi") => "pi",
        Some("cli") => "cli",
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "by must be \"web\", \"pi\" or \"cli\", not \"{other}\"."
            ))
            .with_field("by"))
        }
    };
    state.payloads.arm(Armed {
        armed_at: crate::live::now_iso(),
        save: request.save,
        by: by.to_string(),
    });
    Ok(ok_typed(&list_value(&state)))
}

#[derive(Deserialize)]
struct DiffQuery {
    from: Option<String>,
    to: Option<String>,
}

/// `GET /api/payloads/diff?from=&to=` → the run diff; without `to` the newest capture, without
/// `from` the capture before `to`.
async fn diff(State(state): State<AppState>, Query(q): Query<DiffQuery>) -> ApiResult<Response> {
    let diff = state.payloads.diff(q.from.as_deref(), q.to.as_deref())?;
    Ok(ok_typed(&diff))
}

#[derive(Deserialize)]
struct ShowQuery {
    download: Option<String>,
}

/// `GET /api/payloads/:turn[?download=1]` → the stored (redacted) request body, exactly as
/// kept; `x-pi-forge-turn` names the capture. With `download`, as an attachment.
async fn show(
    State(state): State<AppState>,
    Path(turn): Path<String>,
    Query(q): Query<ShowQuery>,
) -> ApiResult<Response> {
    let capture = state.payloads.get(&turn)?;
    let Some(payload) = capture.payload else {
        return Err(PayloadError::UnknownTurn(turn).into());
    };
    let body = tokio::task::spawn_blocking(move || json::to_compact(&payload))
        .await
        .map_err(|e| ApiError::internal(format!("Could not serialize the payload: {e}")))?;
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&capture.summary.turn_id) {
        headers.insert("x-pi-forge-turn", v);
    }
    if q.download.is_some() {
        let name = format!("attachment; filename=\"{}\"", file_name(&capture.summary));
        if let Ok(v) = HeaderValue::from_str(&name) {
            headers.insert(header::CONTENT_DISPOSITION, v);
        }
    }
    Ok(response)
}

/// `pi-forge-turn-3-20261201T183000Z.json` (the capture time without separators).
fn file_name(summary: &TurnSummary) -> String {
    let stamp: String = summary
        .captured_at
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(16)
        .collect();
    format!("pi-forge-{}-{stamp}.json", summary.turn_id)
}

/// `POST /api/payloads/:turn/save` → 201 `{name, path}`: writes the capture to
/// `.pi/forge/payloads/` (trusted projects only; never overwrites: a second save of the same
/// turn gets a `-2` suffix).
async fn save(State(state): State<AppState>, Path(turn): Path<String>) -> ApiResult<Response> {
    if !state.ws.trusted() {
        return Err(ApiError::untrusted("save captured payloads"));
    }
    let capture = state.payloads.get(&turn)?;
    let Some(payload) = capture.payload else {
        return Err(PayloadError::UnknownTurn(turn).into());
    };
    let (name, path) = save_capture(&state, &capture.summary, &payload).await?;
    Ok(typed_response(
        StatusCode::CREATED,
        &SavedCapture {
            turn_id: capture.summary.turn_id,
            name,
            path,
        },
    ))
}

/// Writes one capture as pretty JSON with the store's exclusive create (temp file, then link:
/// complete content or nothing, never over an existing file).
async fn save_capture(
    state: &ServerState,
    summary: &TurnSummary,
    payload: &Value,
) -> ApiResult<(String, String)> {
    let store = std::sync::Arc::clone(&state.ws.store);
    let base = file_name(summary);
    let bytes = json::to_pretty(payload).into_bytes();
    tokio::task::spawn_blocking(move || {
        let stem = base.trim_end_matches(".json").to_string();
        for n in 1..=100 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{stem}-{n}.json")
            };
            let file = FileRef::new(Scope::Project, Dir::Payloads, &name)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            match store.create(&file, &bytes) {
                Ok(_) => return Ok((name, store.display_path(&file))),
                Err(StoreError::Exists(_)) => continue,
                Err(e) => {
                    return Err(ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "io",
                        format!("Could not save the payload: {e}"),
                    ))
                }
            }
        }
        Err(ApiError::new(
            StatusCode::CONFLICT,
            "exists",
            format!("{stem}.json and 99 numbered copies already exist."),
        ))
    })
    .await
    .map_err(|e| ApiError::internal(format!("Saving the payload failed: {e}")))?
}

// ---------------------------------------------------------------------------------------------
// From the bridge

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PayloadMessage {
    session_id: String,
    seq: u64,
    #[serde(default)]
    pi_turn: Option<u64>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    api: Option<String>,
    #[serde(default)]
    captured_at: Option<String>,
    #[serde(default)]
    dropped: u64,
    payload: Value,
}

/// `POST /api/host/:id/payload` `{sessionId, seq, piTurn?, provider?, model?, api?,
/// capturedAt?, dropped, payload}` → `{turnId, bytes, approxTokens, armed, saved, saveError}`.
/// The payload is redacted before anything keeps it.
async fn host_payload(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: PayloadMessage = parse(body, "payload")?;
    let stack = state.live.with_host(&id, &message.session_id, |h| {
        h.active_stack().map(str::to_string)
    })?;
    let captured_at = message
        .captured_at
        .filter(|t| !t.is_empty() && t.len() <= 40)
        .unwrap_or_else(crate::live::now_iso);
    let info = CaptureInfo {
        request_seq: Some(message.seq),
        pi_turn: message.pi_turn,
        provider: message.provider,
        model: message.model,
        api: message.api,
    };
    let payloads = std::sync::Arc::clone(&state.payloads);
    let session_id = message.session_id;
    let dropped = message.dropped;
    let raw = message.payload;
    // Redaction and block extraction walk the whole request: off the async workers.
    let captured = tokio::task::spawn_blocking(move || {
        payloads.capture(
            &session_id,
            &captured_at,
            stack.as_deref(),
            info,
            raw,
            dropped,
        )
    })
    .await
    .map_err(|e| ApiError::internal(format!("Capturing the payload failed: {e}")))?;
    let mut saved = Value::Null;
    let mut save_error = Value::Null;
    if captured.armed.as_ref().is_some_and(|a| a.save) {
        let capture = state.payloads.get(&captured.summary.turn_id)?;
        if let Some(payload) = capture.payload {
            match save_capture(&state, &captured.summary, &payload).await {
                Ok((_, path)) => saved = json!(path),
                Err(e) => save_error = json!(e.message),
            }
        }
    }
    Ok(ok_json(&json!({
        "turnId": captured.summary.turn_id,
        "bytes": captured.summary.bytes,
        "approxTokens": captured.summary.approx_tokens,
        "armed": captured.armed.map(|a| a.by),
        "saved": saved,
        "saveError": save_error,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMessage {
    session_id: String,
    seq: u64,
    #[serde(flatten)]
    report: UsageReport,
}

/// `POST /api/host/:id/usage` `{sessionId, seq, provider?, model?, input, output, cacheRead,
/// cacheWrite, cost?, stopReason?}` → 204: the usage of the answer to request `seq`.
async fn host_usage(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: UsageMessage = parse(body, "usage")?;
    state.live.with_host(&id, &message.session_id, |_| ())?;
    state
        .payloads
        .record_usage(&message.session_id, message.seq, &message.report);
    Ok(StatusCode::NO_CONTENT.into_response())
}
