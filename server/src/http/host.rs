//! The live Pi session over HTTP: the host protocol the bridge extension speaks
//! (`/api/host/...`), and the browser's view of it (`GET /api/live`, `GET /api/runtime`).
//!
//! Host routes use the same token, Host and Origin rules as every other route and take bodies up
//! to [`super::extract::HOST_BODY_LIMIT`] bytes (a turn carries the conversation). Every host call after `hello`
//! names the host id in the path and the Pi session id in the body; a mismatch changes nothing
//! (404 `unknown_host`, 409 `stale_session`). `docs/api.md` documents the wire.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use forge_core::capability::ToolPatch;
use forge_core::compile::{self, CompileInput, MacroRegistry};
use forge_core::diag::{Diagnostic, Level};
use forge_core::json;
use forge_core::rewrite;
use forge_core::runtime::{Clock, RuntimeSnapshot};
use forge_core::session::{self};
use futures_util::stream::{self, StreamExt as _};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::error::{ApiError, ApiResult};
use super::extract::{ok_json, parse, require_object, HostBody};
use super::{capability_state, AppState, ServerState};
use crate::clock::local_clock;
use crate::live::{self, stack_entry, Hello, LiveError, PiFacts};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/live", get(live_view))
        .route("/api/runtime", get(runtime))
        .route("/api/host/hello", post(hello))
        .route("/api/host/{id}/commands", get(commands))
        .route("/api/host/{id}/commands/{cid}/result", post(command_result))
        .route("/api/host/{id}/facts", post(facts))
        .route("/api/host/{id}/turn", post(turn))
        .route("/api/host/{id}/context", post(context))
        .route("/api/host/{id}/finalize", post(finalize))
        .route("/api/host/{id}/bye", post(bye))
}

impl From<LiveError> for ApiError {
    fn from(e: LiveError) -> ApiError {
        let (status, code) = match &e {
            LiveError::NoLiveSession | LiveError::Disconnected => {
                (StatusCode::SERVICE_UNAVAILABLE, "no_live_session")
            }
            LiveError::UnknownHost(_) => (StatusCode::NOT_FOUND, "unknown_host"),
            LiveError::StaleSession { .. } => (StatusCode::CONFLICT, "stale_session"),
            LiveError::HostBusy(_) => (StatusCode::CONFLICT, "host_busy"),
            LiveError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "host_timeout"),
            LiveError::UnknownCommand(_) => (StatusCode::NOT_FOUND, "unknown_command"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// Browser view

/// `GET /api/live` → `{connected:false}` or the live session (Pi version, session, model,
/// thinking level, active Preset, provenance).
async fn live_view(State(state): State<AppState>) -> Response {
    super::extract::ok_typed(&state.live.view())
}

/// `GET /api/runtime` → the runtime snapshot previews compile against, exactly as
/// `pi-forge preview --runtime FILE` reads it; `live` says whether it came from Pi.
async fn runtime(State(state): State<AppState>) -> ApiResult<Response> {
    let runtime = state.runtime();
    Ok(ok_json(&serde_json::to_value(&runtime).map_err(|e| {
        ApiError::internal(format!("Could not serialize the runtime: {e}"))
    })?))
}

/// `POST /api/host/hello` → `{hostId, protocol, serverVersion, activeStackId, entries,
/// versionMismatch}`.
async fn hello(State(state): State<AppState>, HostBody(body): HostBody) -> ApiResult<Response> {
    require_object(&body, "hello")?;
    let protocol = body.get("protocol").and_then(Value::as_u64);
    if protocol != Some(live::PROTOCOL) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "protocol_mismatch",
            format!(
                "This pi-forge server speaks host protocol {}, the extension sent {}. Update both from one place: `pi update npm:pi-forge` for the npm package, `pi-forge pi install` for a binary built from source.",
                live::PROTOCOL,
                protocol.map_or("none".to_string(), |p| p.to_string())
            ),
        ));
    }
    let hello: Hello = parse(body, "hello")?;
    let extension_version = hello.extension_version.clone();
    let session_id = hello.session_id.clone();
    let snapshot = state.ws.snapshot();
    let trusted = state.ws.trusted();
    let fresh = session::branch_state(&hello.entries).is_fresh();
    let welcome = state.live.hello(hello, |entries| {
        session::restore(&snapshot, trusted, entries)
    })?;
    // Profile auto-activation runs first in a fresh session of a trusted project; the default
    // Preset chosen above is the fallback when no profile auto-activates.
    if fresh && trusted {
        super::profiles::auto_apply(std::sync::Arc::clone(&state));
    }
    let server_version = crate::VERSION;
    let mut answer = capability_state::host_mirror(&state, &welcome.host_id, &session_id)?;
    answer.extend(
        json!({
            "hostId": welcome.host_id,
            "protocol": live::PROTOCOL,
            "serverVersion": server_version,
            "versionMismatch": extension_version != server_version,
            "activeStackId": welcome.active_stack,
            "entries": welcome.entries,
            "url": format!("http://127.0.0.1:{}/", state.port),
        })
        .as_object()
        .cloned()
        .unwrap_or_default(),
    );
    Ok(ok_json(&Value::Object(answer)))
}

/// `GET /api/host/:id/commands` → SSE: `ready`, then one `command` event per command, and a
/// comment ping every second. The stream's end is the host's end.
async fn commands(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let attached = state.live.attach(&id)?;
    let guard = attached.guard;
    let ready = Event::default().event("ready").data("{}");
    let commands = UnboundedReceiverStream::new(attached.commands).map(move |command| {
        let _alive = &guard;
        Event::default()
            .event("command")
            .data(json::to_compact(&command))
    });
    let mut shutdown = state.shutdown.clone();
    let stopped = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let stream = stream::once(async { ready })
        .chain(commands)
        .take_until(Box::pin(stopped))
        .map(Ok::<_, Infallible>);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(live::PING).text("ping"))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CommandResult {
    session_id: String,
    result: Value,
}

/// `POST /api/host/:id/commands/:cid/result` `{sessionId, result}` → 204.
async fn command_result(
    State(state): State<AppState>,
    Path((id, cid)): Path<(String, String)>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: CommandResult = parse(body, "command result")?;
    state
        .live
        .complete(&id, &message.session_id, &cid, message.result)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FactsMessage {
    session_id: String,
    facts: PiFacts,
}

/// `POST /api/host/:id/facts` `{sessionId, facts}` → 204: model, thinking level, tools, leaf.
async fn facts(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: FactsMessage = parse(body, "facts")?;
    state
        .live
        .with_host(&id, &message.session_id, |h| h.update_facts(message.facts))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Bye {
    session_id: String,
}

/// `POST /api/host/:id/bye` `{sessionId}` → 204: the session ended.
async fn bye(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: Bye = parse(body, "bye")?;
    state.live.bye(&id, &message.session_id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---------------------------------------------------------------------------------------------
// The per-turn prompt path

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TurnMessage {
    session_id: String,
    #[serde(default)]
    prompt: String,
    clock: Clock,
    facts: PiFacts,
}

fn errors_of(diagnostics: &[Diagnostic]) -> Vec<&Diagnostic> {
    diagnostics
        .iter()
        .filter(|d| d.level == Level::Error)
        .collect()
}

/// The one-line reason a turn was stopped.
fn abort_message(key: &str, errors: &[&Diagnostic]) -> String {
    let first = errors.first().map_or(String::new(), |d| {
        let mut text = d.message.clone();
        if let Some(item) = &d.item_id {
            text = format!("item {item}: {text}");
        }
        text
    });
    let more = match errors.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    format!(
        "pi-forge: Preset {key} did not compile, so nothing was sent to the model: {first}{more}"
    )
}

/// What a turn or context call compiles against.
struct LiveInput {
    key: Option<String>,
    runtime: RuntimeSnapshot,
    /// Capability tool patches in force (and the control tool's offer).
    patches: Vec<ToolPatch>,
    /// What the extension mirrors about capabilities (`capabilities`, `blockedTools`, `tools`).
    mirror: Map<String, Value>,
}

/// The active Preset of host `id` and its facts with `messages` as the conversation.
fn live_stack(
    state: &ServerState,
    id: &str,
    session_id: &str,
    messages: Vec<Value>,
    update: impl FnOnce(&mut live::HostView<'_>),
) -> ApiResult<LiveInput> {
    let clock = local_clock();
    let snapshot = state.ws.snapshot();
    let trusted = state.ws.trusted();
    Ok(state.live.with_host(id, session_id, |h| {
        update(h);
        let (patches, mirror) = capability_state::turn_inputs(h, &snapshot, trusted);
        LiveInput {
            key: h.active_stack().map(str::to_string),
            runtime: h.runtime_with(clock, messages),
            patches,
            mirror,
        }
    })?)
}

/// The active Preset compiled against the live facts, or why it could not be.
enum LiveCompile {
    /// No Preset is active: the turn is Pi's own.
    Inactive,
    /// The Preset does not compile (or no longer exists): the turn must be aborted.
    Abort {
        key: String,
        message: String,
        diagnostics: Vec<Diagnostic>,
    },
    Compiled {
        key: String,
        compiled: compile::Compiled,
        /// Load diagnostics of the file, then the compiler's.
        diagnostics: Vec<Diagnostic>,
    },
}

/// Compiles the active Preset `key` (if any) against `runtime` on a blocking thread, with the
/// same `compile()` as `pi-forge preview`; hands the runtime back, so the caller can keep its
/// conversation without copying it.
async fn compile_live(
    state: &ServerState,
    key: Option<String>,
    runtime: RuntimeSnapshot,
    patches: Vec<ToolPatch>,
    latest_user_message: Option<String>,
) -> ApiResult<(LiveCompile, RuntimeSnapshot)> {
    let Some(key) = key else {
        return Ok((LiveCompile::Inactive, runtime));
    };
    // The snapshot is shared (an `Arc`): the Preset is read in place, never copied.
    let snapshot = state.ws.snapshot();
    Ok(tokio::task::spawn_blocking(move || {
        let Some(entry) = stack_entry(&snapshot, &key) else {
            let gone = LiveCompile::Abort {
                message: format!("pi-forge: the active Preset {key} no longer exists, so nothing was sent to the model. Choose another Preset or run `/forge preset off`."),
                key,
                diagnostics: Vec::new(),
            };
            return (gone, runtime);
        };
        let macros = MacroRegistry::new();
        let patch_refs: Vec<&ToolPatch> = patches.iter().collect();
        let mut input = CompileInput::new(Some(&entry.parsed.stack), &runtime, &macros);
        input.stack_key = Some(key.clone());
        input.tool_patches = &patch_refs;
        input.latest_user_message = latest_user_message;
        let compiled = compile::compile(&input);
        drop(input);
        let mut diagnostics = entry.diagnostics.clone();
        diagnostics.extend(compiled.diagnostics.iter().cloned());
        let errors = errors_of(&diagnostics);
        let outcome = if errors.is_empty() {
            LiveCompile::Compiled {
                key,
                compiled,
                diagnostics,
            }
        } else {
            LiveCompile::Abort {
                message: abort_message(&key, &errors),
                key,
                diagnostics,
            }
        };
        (outcome, runtime)
    })
    .await?)
}

/// `POST /api/host/:id/turn` `{sessionId, prompt, clock, facts}` (from `before_agent_start`) →
/// `{active:false}` without a Preset; else `{active:true, stackId, systemPrompt, activeTools,
/// finalizeRules, diagnostics}`, or `{active:true, stackId, abort, diagnostics}` when the Preset
/// does not compile (the extension then aborts the turn: nothing is sent).
async fn turn(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: TurnMessage = parse(body, "turn")?;
    let clock = message.clock;
    // The system prompt reads the conversation only through the latest user message, which is
    // the prompt itself: no conversation is copied or run through the history pipeline here
    // (`context` compiles the messages once, with the ones Pi sends).
    let live = live_stack(&state, &id, &message.session_id, Vec::new(), |h| {
        h.update_facts(message.facts);
        h.set_clock(clock);
    })?;
    let mut mirror = live.mirror;
    let (outcome, _) = compile_live(
        &state,
        live.key,
        live.runtime,
        live.patches,
        Some(message.prompt),
    )
    .await?;
    // Without a Preset, tools a capability sync changes are applied here (and recorded).
    let sync_tools = mirror.remove("tools");
    let answer = match outcome {
        LiveCompile::Inactive => {
            if let Some(tools) = sync_tools {
                let applied: Vec<String> =
                    serde_json::from_value(tools.clone()).unwrap_or_default();
                let _ = state
                    .live
                    .with_host(&id, &message.session_id, |h| h.set_applied_tools(applied));
                mirror.insert("activeTools".into(), tools);
            }
            json!({ "active": false })
        }
        LiveCompile::Abort {
            key,
            message,
            diagnostics,
        } => json!({
            "active": true,
            "stackId": key,
            "abort": message,
            "diagnostics": diagnostics,
        }),
        LiveCompile::Compiled {
            key,
            compiled,
            diagnostics,
        } => {
            let tools = compiled.selected_tools.clone();
            // Only for the same host and session; a vanished host makes this a no-op.
            let _ = state
                .live
                .with_host(&id, &message.session_id, |h| h.set_applied_tools(tools));
            json!({
                "active": true,
                "stackId": key,
                "systemPrompt": compiled.system_prompt,
                "activeTools": compiled.selected_tools,
                "finalizeRules": compiled.finalize_rules,
                "diagnostics": diagnostics,
            })
        }
    };
    let mut answer = match answer {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for (k, v) in mirror {
        answer.entry(k).or_insert(v);
    }
    Ok(ok_json(&Value::Object(answer)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContextMessage {
    session_id: String,
    /// Which provider request of the prompt this is (1 = the first; the rest follow tool
    /// results). Informational: every request is compiled the same way.
    #[serde(default)]
    #[allow(dead_code)]
    request: Option<u32>,
    messages: Vec<Value>,
}

/// `POST /api/host/:id/context` `{sessionId, request, messages}` (every provider request of a
/// user prompt, the follow-ups after tool results included) → `{}` without a Preset, else
/// `{stackId, messages}` compiled by the active Preset from Pi's messages, or `{abort}`.
async fn context(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: ContextMessage = parse(body, "context")?;
    let live = live_stack(&state, &id, &message.session_id, message.messages, |_| {})?;
    let (outcome, runtime) =
        compile_live(&state, live.key, live.runtime, live.patches, None).await?;
    // Kept for previews (`GET /api/runtime`): moved, not copied. A host that left meanwhile
    // keeps nothing.
    let _ = state.live.with_host(&id, &message.session_id, |h| {
        h.set_messages(runtime.messages)
    });
    Ok(ok_json(&match outcome {
        LiveCompile::Inactive => json!({}),
        LiveCompile::Abort { message, .. } => json!({ "abort": message }),
        LiveCompile::Compiled { key, compiled, .. } => {
            json!({ "stackId": key, "messages": compiled.message_values() })
        }
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FinalizeMessage {
    session_id: String,
    message: Value,
}

/// `POST /api/host/:id/finalize` `{sessionId, message}` (from `message_end`) → `{message}` when
/// the active Preset's finalize rules changed it, else `{}`.
async fn finalize(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: FinalizeMessage = parse(body, "finalize")?;
    let key = state.live.with_host(&id, &message.session_id, |h| {
        h.active_stack().map(str::to_string)
    })?;
    let snapshot = state.ws.snapshot();
    let Some(entry) = key.as_deref().and_then(|k| stack_entry(&snapshot, k)) else {
        return Ok(ok_json(&json!({})));
    };
    let (rules, _) = rewrite::rules_from_config(entry.parsed.stack.regex.as_ref());
    Ok(ok_json(
        &match rewrite::finalize(&rules, &message.message) {
            Some((message, diagnostics)) => {
                json!({ "message": message, "diagnostics": diagnostics })
            }
            None => json!({}),
        },
    ))
}
