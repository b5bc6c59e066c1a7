//! `/api/stacks`: prompt stacks ("Presets") — list, read, create, save, delete, fork, export,
//! validate, draft preview, activate; plus `/api/disable`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{Activated, StackDeleted, StackPreview, StackView, TemplateEnv, Validation};
use forge_core::compile::{self, CompileInput, MacroRegistry};
use forge_core::id::{parse_selector, Selector};
use forge_core::json;
use forge_core::runtime::RuntimeSnapshot;
use forge_core::stack::{self, ParseOptions};
use forge_core::workspace::service::{self, Kind};
use forge_core::workspace::{Resolved, StackEntry, WorkspaceSnapshot, MAX_STACK_BYTES};
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{ok_typed, resource_object, JsonBody};
use super::live_commands;
use super::views::{stack_detail, with_etag};
use super::write::{
    delete_resource, export_file, fork_resource, mutate, ok_view_response, save_resource,
    written_entry, Outcome,
};
use super::{AppState, ServerState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/stacks", get(list).post(create))
        .route("/api/stacks/validate", post(validate_new))
        .route("/api/stacks/{sel}", get(read).put(save).delete(remove))
        .route("/api/stacks/{sel}/fork", post(fork))
        .route("/api/stacks/{sel}/export", get(export))
        .route("/api/stacks/{sel}/validate", post(validate_existing))
        .route("/api/stacks/{sel}/preview", post(preview))
        .route("/api/stacks/{sel}/template-env", post(template_env))
        .route("/api/stacks/{sel}/activate", post(activate))
        .route("/api/search", get(search))
        .route("/api/regex/try", post(try_regex))
        .route("/api/disable", post(disable))
}

/// A selector from the path, or 400 `invalid_selector` with the grammar's message.
pub fn selector(text: &str) -> ApiResult<Selector> {
    parse_selector(text)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_selector", e.to_string()))
}

fn resolve<'a>(snapshot: &'a WorkspaceSnapshot, sel: &str) -> ApiResult<&'a StackEntry> {
    match snapshot.resolve_stack(&selector(sel)?) {
        Resolved::Found(entry) => Ok(entry),
        Resolved::NotFound => Err(ApiError::not_found(format!("Unknown prompt stack: {sel}"))),
        Resolved::Ambiguous(entries) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "ambiguous",
            format!(
                "Prompt stack {sel} is ambiguous: several files define it ({}).",
                entries
                    .iter()
                    .map(|e| e.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `GET /api/stacks` → `{stacks, activeId, trusted, cwd, problems}`, serialized once per snapshot and
/// active Preset ([`super::viewcache`]), with an `ETag` and brotli or gzip when accepted.
async fn list(State(state): State<AppState>, request: HeaderMap) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    state.current_views().list.respond(&request, headers)
}

/// Longest search query (characters).
const MAX_QUERY_CHARS: usize = 200;

#[derive(serde::Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
}

/// `GET /api/search?q=` → `{ok, query, results: [{selector, matches: [{place, excerpt}], more}]}`:
/// the Presets whose name, description, items (id, name, text, slot), regex rules (id, pattern,
/// replacement) or parameter names contain `q` (case-insensitive), in list order. 400 for a
/// query longer than 200 characters.
async fn search(
    State(state): State<AppState>,
    axum::extract::Query(query): axum::extract::Query<SearchQuery>,
) -> ApiResult<Response> {
    let q = query.q.trim().to_string();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::bad_request(format!(
            "The search text is too long: {} characters (at most {MAX_QUERY_CHARS}).",
            q.chars().count()
        )));
    }
    let snapshot = state.ws.snapshot();
    let results = snapshot
        .stacks
        .iter()
        .filter_map(|entry| {
            let raw = entry.parsed.raw.as_ref()?;
            forge_core::stack::search::search_hit(&entry.key.to_string(), raw, &q)
        })
        .collect();
    let answer = forge_core::api::StackSearch {
        ok: true,
        query: q,
        results,
    };
    Ok(super::extract::typed_response(StatusCode::OK, &answer))
}

/// Longest sample "Try it" runs a rule on (bytes).
const MAX_SAMPLE_BYTES: usize = 64 * 1024;

/// `POST /api/regex/try` `{rule, sample}` → `{ok, matches, text, changed, outOfBudget}`: one regex
/// rule (a raw rule object as in the Preset) applied to the sample exactly as the compiler
/// applies it to one text (forge-core `rewrite::try_rule`). 400 `invalid_rule` with the
/// compiler's message for a rule that does not compile; 400 for a sample over 64 KiB.
async fn try_regex(State(_state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let Some(Value::Object(rule)) = body.get("rule") else {
        return Err(
            ApiError::bad_request("rule must be a JSON object (one regex rule).")
                .with_field("rule"),
        );
    };
    let Some(sample) = body.get("sample").and_then(Value::as_str) else {
        return Err(ApiError::bad_request("sample must be a string."));
    };
    if sample.len() > MAX_SAMPLE_BYTES {
        return Err(ApiError::bad_request(format!(
            "The sample is too large: {} bytes (at most {MAX_SAMPLE_BYTES}).",
            sample.len()
        )));
    }
    match forge_core::rewrite::try_rule(rule, sample) {
        Ok(trial) => {
            let mut answer = serde_json::to_value(&trial).unwrap_or_default();
            answer["ok"] = Value::Bool(true);
            Ok(super::extract::ok_json(&answer))
        }
        Err(message) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_rule",
            message,
        )),
    }
}

/// `GET /api/stacks/:sel` → the stack as on disk with revision, diagnostics, scope and path.
async fn read(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let entry = resolve(&snapshot, &sel)?;
    Ok(with_etag(
        &stack_detail(entry, state.active_id().as_deref()),
        &entry.revision,
    ))
}

/// The saved stack's view (`ok` added by [`ok_view_response`]) and its new revision.
pub(super) fn written_view(
    state: &AppState,
    outcome: &Outcome,
    snapshot: &WorkspaceSnapshot,
) -> ApiResult<(StackView, String)> {
    let (entry, revision) = written_entry(outcome, &snapshot.stacks, "stack")?;
    Ok((stack_detail(entry, state.active_id().as_deref()), revision))
}

/// The answer to a successful write: `{ok: true, ...the stack's view}` with its `ETag`.
fn written_response(
    state: &AppState,
    status: StatusCode,
    outcome: &Outcome,
    snapshot: &WorkspaceSnapshot,
) -> ApiResult<Response> {
    let (view, revision) = written_view(state, outcome, snapshot)?;
    Ok(ok_view_response(status, view, &revision))
}

pub(super) fn flag(body: &Map<String, Value>, key: &str) -> ApiResult<bool> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request(format!("{key} must be a boolean.")).with_field(key)),
    }
}

/// `POST /api/stacks` `{stack, scope?, activate?, overwrite?}` → 201 with the new stack.
async fn create(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let stack = resource_object(&body, "stack")?;
    let scope = service::parse_scope(body.get("scope"))?;
    let activate = flag(&body, "activate")?;
    let overwrite = flag(&body, "overwrite")?;
    let (outcome, snapshot) = mutate(&state, move |store, snapshot| {
        service::create(store, snapshot, Kind::Stack, scope, &stack, overwrite).map(Outcome::from)
    })
    .await?;
    if activate {
        if let Some(written) = &outcome.written {
            activate_after_write(&state, written.key.to_string()).await;
        }
    }
    written_response(&state, StatusCode::CREATED, &outcome, &snapshot)
}

/// `PUT /api/stacks/:sel` `{stack, sourceRevision?}` (or a bare stack) with `If-Match` or a body
/// revision → the saved stack.
async fn save(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let selector = selector(&sel)?;
    super::capability_state::check_active_save(&state, &selector, &body.0)?;
    let (outcome, snapshot) =
        save_resource(&state, Kind::Stack, "stack", selector, &headers, body).await?;
    written_response(&state, StatusCode::OK, &outcome, &snapshot)
}

/// `DELETE /api/stacks/:sel` with `If-Match` or `{sourceRevision}` → `{ok, selector, activeId}`.
async fn remove(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let selector = selector(&sel)?;
    let outcome = delete_resource(&state, Kind::Stack, selector, &headers, body).await?;
    let key = outcome.deleted.as_ref().map(ToString::to_string);
    if key.is_some() && state.active_id() == key {
        // The live session must not keep compiling a Preset that is gone.
        if let Err(e) = live_commands::set_live_stack(&state, None).await {
            eprintln!(
                "pi-forge: could not turn off the deleted Preset in Pi: {}",
                e.message
            );
        }
    }
    Ok(ok_typed(&StackDeleted {
        ok: true,
        deleted: key,
        active_id: state.active_id(),
    }))
}

/// `POST /api/stacks/:sel/fork` `{id, scope?}` → 201 with the copy.
async fn fork(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let (outcome, snapshot, body) =
        fork_resource(&state, Kind::Stack, selector(&sel)?, body).await?;
    if flag(&body, "activate")? {
        if let Some(written) = &outcome.written {
            activate_after_write(&state, written.key.to_string()).await;
        }
    }
    written_response(&state, StatusCode::CREATED, &outcome, &snapshot)
}

/// `GET /api/stacks/:sel/export` → the file's bytes, exactly as on disk, as a download.
async fn export(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let snapshot = state.ws.snapshot();
    let entry = resolve(&snapshot, &sel)?;
    let missing = format!("Unknown prompt stack: {sel}");
    export_file(
        &state,
        entry.file.clone(),
        &entry.key.id,
        MAX_STACK_BYTES,
        missing,
    )
    .await
}

fn diagnostics_response(diagnostics: Vec<forge_core::diag::Diagnostic>) -> Response {
    ok_typed(&Validation::of(diagnostics))
}

/// `POST /api/stacks/validate` `{stack, scope?}` → `{diagnostics, errors, warnings, valid}` for a
/// new stack in `scope`.
async fn validate_new(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let stack = resource_object(&body, "stack")?;
    let scope = service::parse_scope(body.get("scope"))?;
    let snapshot = state.ws.snapshot();
    Ok(diagnostics_response(service::validate(
        Kind::Stack,
        scope,
        &stack,
        &snapshot,
    )))
}

/// `POST /api/stacks/:sel/validate` `{stack}` → the diagnostics a save of `stack` over `:sel`
/// would face (a changed id included).
async fn validate_existing(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let body = body.object()?;
    let stack = resource_object(&body, "stack")?;
    let selector = selector(&sel)?;
    let snapshot = state.ws.snapshot();
    let diagnostics = service::validate_update(Kind::Stack, &selector, &stack, &snapshot)?;
    Ok(diagnostics_response(diagnostics))
}

/// The stack a preview compiles: the draft in `body.stack` (taken out of the body), or the saved
/// stack; its key (or the new draft's id) and its load diagnostics.
fn previewed_stack(
    state: &AppState,
    sel: &str,
    body: &mut serde_json::Map<String, Value>,
) -> ApiResult<(
    stack::PromptStack,
    String,
    Vec<forge_core::diag::Diagnostic>,
)> {
    let snapshot = state.ws.snapshot();
    let saved = match resolve(&snapshot, sel) {
        Ok(entry) => Some(entry),
        Err(e) if e.code == "not_found" && body.get("stack").is_some() => None,
        Err(e) => return Err(e),
    };
    match body.remove("stack") {
        None | Some(Value::Null) => {
            let entry =
                saved.ok_or_else(|| ApiError::not_found(format!("Unknown prompt stack: {sel}")))?;
            Ok((
                entry.parsed.stack.clone(),
                entry.key.to_string(),
                entry.diagnostics.clone(),
            ))
        }
        Some(draft @ Value::Object(_)) => {
            let file_name = saved
                .map(|e| e.file.name().to_string())
                .unwrap_or_else(|| "draft.json".to_string());
            let parsed = stack::parse_stack_value(draft, &ParseOptions::new(&file_name));
            let label = match saved {
                Some(entry) => entry.key.to_string(),
                None => parsed.stack.id().to_string(),
            };
            Ok((parsed.stack, label, parsed.diagnostics))
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "stack must be a JSON object, not {}.",
            json::type_name(&other)
        ))
        .with_field("stack")),
    }
}

/// `POST /api/stacks/:sel/preview` `{stack?, messages?}` → `{ok, stackId, liveHost, text, preview,
/// compiled, diagnostics}`. Compiles the draft (or the saved stack) against pi-forge's stand-in
/// runtime; `messages` replaces its (empty) conversation. Each regex rule runs within a step
/// budget (an error names a rule that exceeds it); a draft answered while a newer draft of the
/// same stack waits is 409 `superseded`.
async fn preview(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let mut body = body.object()?;
    // Drafts change with every keystroke: one compile per stack at a time, the newest wins.
    let is_draft = matches!(body.get("stack"), Some(Value::Object(_)));
    let (stack, label, load_diagnostics) = previewed_stack(&state, &sel, &mut body)?;
    let mut runtime = state.runtime();
    match body.remove("messages") {
        None | Some(Value::Null) => {}
        Some(Value::Array(messages)) => runtime.messages = messages,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "messages must be an array of Pi messages, not {}.",
                json::type_name(&other)
            ))
            .with_field("messages"))
        }
    }
    let _turn = if is_draft {
        Some(state.previews.enter(&sel).await?)
    } else {
        None
    };
    // A small draft compiles in well under the cost of handing it to the blocking pool and
    // back (two thread wake-ups); anything larger goes there, off the async workers.
    let small = stack.items.len() <= INLINE_PREVIEW_ITEMS
        && runtime.messages.len() <= INLINE_PREVIEW_MESSAGES;
    let result = if small {
        compile_preview(&stack, &runtime, label, &load_diagnostics)
    } else {
        tokio::task::spawn_blocking(move || {
            compile_preview(&stack, &runtime, label, &load_diagnostics)
        })
        .await?
    }
    .map_err(|e| ApiError::internal(format!("Could not serialize the compiled prompt: {e}")))?;
    Ok(ok_typed(&result))
}

/// Drafts at most this large compile on the async worker that received them (see [`preview`]).
const INLINE_PREVIEW_ITEMS: usize = 100;
const INLINE_PREVIEW_MESSAGES: usize = 100;

/// The preview answer: the draft compiled against `runtime`, its report and its text.
fn compile_preview(
    stack: &stack::PromptStack,
    runtime: &RuntimeSnapshot,
    label: String,
    load_diagnostics: &[forge_core::diag::Diagnostic],
) -> Result<StackPreview, serde_json::Error> {
    let macros = MacroRegistry::new();
    let mut input = CompileInput::new(Some(stack), runtime, &macros);
    input.stack_key = Some(label.clone());
    let compiled = compile::compile(&input);
    let preview = compile::preview(&compiled, &label, load_diagnostics, &runtime.clock);
    let text = compile::preview_text(&preview);
    serde_json::to_value(&compiled).map(|compiled| StackPreview {
        ok: true,
        stack_id: label,
        live_host: runtime.live,
        text,
        diagnostics: preview.diagnostics.clone(),
        preview,
        compiled,
    })
}

/// `POST /api/stacks/:sel/template-env` `{stack?}` → `{ok, runtime, parameters}`: what the
/// draft's (or the saved stack's) system-prompt templates see when it compiles against the
/// runtime the preview uses. The template editor completes `runtime.*` and shows a path's value
/// from it.
async fn template_env(
    State(state): State<AppState>,
    Path(sel): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let mut body = body.object()?;
    let (stack, label, _) = previewed_stack(&state, &sel, &mut body)?;
    let runtime = state.runtime();
    // The compiler's frozen scope (tool and skill policy, slots, parameters); nothing is rendered.
    let env = tokio::task::spawn_blocking(move || {
        let macros = MacroRegistry::new();
        let mut input = CompileInput::new(Some(&stack), &runtime, &macros);
        input.stack_key = Some(label);
        compile::Compiler::new(&input).template_env()
    })
    .await?;
    let field = |name: &str| env.get(name).cloned().unwrap_or_else(|| json!({}));
    Ok(ok_typed(&TemplateEnv {
        ok: true,
        runtime: field("runtime"),
        parameters: field("parameters"),
    }))
}

/// `POST /api/stacks/:sel/activate` → `{ok, activeId}`: the live Pi session makes the stack its
/// active Preset (recorded in the session). 503 `no_live_session` without one; a stack with
/// errors is refused (409 `not_usable`).
async fn activate(State(state): State<AppState>, Path(sel): Path<String>) -> ApiResult<Response> {
    let key = {
        let snapshot = state.ws.snapshot();
        let entry = resolve(&snapshot, &sel)?;
        if !entry.usable() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "not_usable",
                format!(
                    "Prompt stack {} has errors and cannot be activated until they are fixed.",
                    entry.key
                ),
            )
            .with_details(json!({ "diagnostics": entry.diagnostics })));
        }
        entry.key.to_string()
    };
    live_commands::set_live_stack(&state, Some(key)).await?;
    Ok(ok_typed(&Activated {
        ok: true,
        active_id: state.active_id(),
    }))
}

/// `POST /api/disable` → `{ok, activeId: null}`: the live Pi session runs without a Preset
/// (503 `no_live_session` without one).
async fn disable(State(state): State<AppState>) -> ApiResult<Response> {
    live_commands::set_live_stack(&state, None).await?;
    Ok(ok_typed(&Activated {
        ok: true,
        active_id: None,
    }))
}

/// After a create or fork that asked to activate: activate in the live session when there is
/// one (the file is written either way; the answer's `activeId` says what happened).
async fn activate_after_write(state: &ServerState, key: String) {
    if state.live.connected() {
        if let Err(e) = live_commands::set_live_stack(state, Some(key)).await {
            eprintln!(
                "pi-forge: could not activate the new Preset in Pi: {}",
                e.message
            );
        }
    }
}
