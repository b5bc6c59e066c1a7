//! Subagent delegation through the editor: the model's `forge_subagent` call (a host route the
//! bridge calls) prepares and seals a plan, a person approves or rejects it here
//! (`/api/agent/plans…`), and only then the child Pi runs (the same engine as
//! `pi-forge agent run`, `crate::agent`). Approval carries the execution fingerprint the person
//! saw; the plan is prepared again from disk before running, so a profile, stack or settings
//! change since sealing answers 409 `stale_approval`.
//!
//! `AgentHub` is the one owner of pending plans and of the runs in progress. At most
//! `maxConcurrentRuns` children (subagents.json, default 4) run at once, later ones wait for a
//! slot (`queued`); a running or queued run can be cancelled (`POST /api/agent/runs/:run/cancel`
//! kills the child's process group). A plan nobody decides on within [`APPROVAL_WAIT`] is
//! cancelled.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{
    ActiveRun, AgentProfileList, AgentProfileRow, ApproveRequest, Kept, ModelRef, PlanDecided,
    PlanDetail, PlanList, PlanSummary, PrepareRequest, PreparedPlan, RunApproval, RunCancelled,
    RunDetail, RunList,
};
use forge_core::delegation::approval::{
    approval_full_view, approval_summary, check_approval, payload_bytes, system_prompt_chars,
    REJECTED_REASON,
};
use forge_core::delegation::config::DEFAULT_BACKEND;
use forge_core::delegation::host::{project_answer, HostPlan};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch, Notify};

use super::agent_hub::{AgentHub, Decision, Pending, APPROVAL_WAIT};
use super::error::{ApiError, ApiResult};
use super::extract::parse;
use super::extract::{ok_json, ok_typed, typed_response, HostBody, JsonBody};
use super::{AppState, ServerState};
use crate::agent::{self, PlanRequest};
use crate::clock::local_clock;
use crate::paths::WorkspacePaths;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/agent/profiles", get(profiles))
        .route("/api/agent/plans", get(plans))
        .route("/api/agent/prepare", post(prepare))
        .route("/api/agent/plans/{run}", get(plan))
        .route("/api/agent/plans/{run}/approve", post(approve))
        .route("/api/agent/plans/{run}/reject", post(reject))
        .route("/api/agent/runs", get(runs))
        .route("/api/agent/runs/{run}", get(run_detail))
        .route("/api/agent/runs/{run}/cancel", post(cancel_run))
        .route("/api/host/{id}/subagent", post(host_subagent))
        .route("/api/host/{id}/subagent-result", post(host_subagent_result))
}

fn paths(state: &ServerState) -> WorkspacePaths {
    WorkspacePaths {
        project: state.project.clone(),
        global: state.global.clone(),
        trusted: state.ws.trusted(),
    }
}

fn summary(run_id: &str, p: &Pending) -> PlanSummary {
    let plan = &p.plan.plan;
    PlanSummary {
        run_id: run_id.to_string(),
        profile_id: plan.profile.profile_id.to_string(),
        prompt_stack_id: plan
            .profile
            .prompt_stack_id
            .as_ref()
            .map(ToString::to_string),
        task: p.task.clone(),
        backend_id: DEFAULT_BACKEND.to_string(),
        model: ModelRef {
            provider: plan.model.provider.clone(),
            id: plan.model.id.clone(),
        },
        thinking_level: plan.thinking_level.clone(),
        tools: plan.effective_tool_names.clone(),
        working_directory: ".".into(),
        boundary: "shared user, not an OS sandbox".into(),
        system_prompt_chars: system_prompt_chars(plan),
        messages: plan.messages.len() as u64,
        payload_bytes: payload_bytes(plan),
        timeout_ms: p.plan.timeout_ms,
        execution_fingerprint: plan.execution_fingerprint.clone(),
        conversation_fingerprint: plan.conversation_fingerprint.clone(),
        parent_session_id: p.parent_session.clone(),
        created_at: p.created_at.clone(),
    }
}

fn unknown_plan(run: &str) -> ApiError {
    ApiError::not_found(format!(
        "No plan {run} is waiting for approval (it was decided, cancelled or never existed)."
    ))
}

/// `GET /api/agent/plans` → `{ok, plans: [summary]}`, oldest first.
async fn plans(State(state): State<AppState>) -> Response {
    let pending = state.agents.lock();
    let mut plans: Vec<PlanSummary> = pending.iter().map(|(id, p)| summary(id, p)).collect();
    plans.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    ok_typed(&PlanList { ok: true, plans })
}

/// `GET /api/agent/plans/:run` → `{ok, summary, review, fullPrompt, plan}`: everything a person
/// approves, the full system prompt and every provider-bound message in order.
async fn plan(State(state): State<AppState>, Path(run): Path<String>) -> ApiResult<Response> {
    let pending = state.agents.lock();
    let p = pending.get(&run).ok_or_else(|| unknown_plan(&run))?;
    Ok(ok_typed(&PlanDetail {
        ok: true,
        summary: summary(&run, p),
        review: approval_summary(&p.plan.plan, &p.task, DEFAULT_BACKEND),
        full_prompt: approval_full_view(&p.plan.plan, &p.task, DEFAULT_BACKEND),
        plan: p.plan.plan.view(),
    }))
}

/// `POST /api/agent/plans/:run/approve` `{executionFingerprint, viewedFullPrompt}` → `{ok}`; 409
/// `stale_approval` when the fingerprint is not the plan's, or the plan prepared again from disk
/// now differs (prepare it again); 404 for an unknown plan.
async fn approve(
    State(state): State<AppState>,
    Path(run): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let body: ApproveRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(format!("Malformed approval: {e}.")))?;
    let (profile, task, ids, clock, parent, sealed) = {
        let pending = state.agents.lock();
        let p = pending
            .get(&run)
            .ok_or_else(|| missing_plan(&state.agents, &run))?;
        (
            p.profile.clone(),
            p.task.clone(),
            p.ids.clone(),
            p.clock,
            p.parent_session.clone(),
            p.plan.plan.execution_fingerprint.clone(),
        )
    };
    let stale = |message: String| ApiError::new(StatusCode::CONFLICT, "stale_approval", message);
    if let Err(e) = check_approval(&body.execution_fingerprint, &sealed) {
        return Err(stale(e.message));
    }
    let snapshot = state.ws.snapshot();
    let request = PlanRequest {
        profile: &profile,
        task: &task,
        timeout_ms: None,
        parent_session: parent.as_deref(),
    };
    let current = agent::prepare_plan(&snapshot, &paths(&state), &request, &ids, clock)
        .map(|p| p.plan.execution_fingerprint)
        .unwrap_or_default();
    if let Err(e) = check_approval(&sealed, &current) {
        return Err(stale(e.message));
    }
    let sender = state
        .agents
        .lock()
        .get_mut(&run)
        .and_then(|p| p.decide.take())
        .ok_or_else(|| missing_plan(&state.agents, &run))?;
    let sent = sender.send(Decision::Approve {
        viewed: body.viewed_full_prompt,
        from: if body.from.as_deref() == Some("pi") {
            "pi"
        } else {
            "web"
        },
    });
    if sent.is_err() {
        // The request waiting for the decision is gone: nothing will run.
        state.agents.withdraw(&run);
        return Err(withdrawn_plan(&run));
    }
    Ok(ok_typed(&PlanDecided {
        ok: true,
        run_id: run,
    }))
}

/// `POST /api/agent/plans/:run/reject` → `{ok}`: the plan is discarded, nothing is sent.
async fn reject(State(state): State<AppState>, Path(run): Path<String>) -> ApiResult<Response> {
    let sender = state
        .agents
        .lock()
        .get_mut(&run)
        .and_then(|p| p.decide.take())
        .ok_or_else(|| missing_plan(&state.agents, &run))?;
    if sender.send(Decision::Reject).is_err() {
        state.agents.withdraw(&run);
        return Err(withdrawn_plan(&run));
    }
    Ok(ok_typed(&PlanDecided {
        ok: true,
        run_id: run,
    }))
}

/// `POST /api/agent/prepare` `{profile, task}` → `{ok, review, plan}` (`/forge agent plan`): the
/// plan prepared and sealed, then discarded; nothing is sent and nothing waits. A plan that cannot
/// be prepared is 400 `plan_failed` with every error diagnostic.
async fn prepare(State(state): State<AppState>, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let body: PrepareRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(format!("Malformed plan request: {e}.")))?;
    let snapshot = state.ws.snapshot();
    let request = PlanRequest {
        profile: &body.profile,
        task: &body.task,
        timeout_ms: None,
        parent_session: None,
    };
    match agent::prepare_plan(
        &snapshot,
        &paths(&state),
        &request,
        &agent::new_ids(),
        local_clock(),
    ) {
        Ok(plan) => Ok(ok_typed(&PreparedPlan {
            ok: true,
            review: approval_summary(&plan.plan, &body.task, DEFAULT_BACKEND),
            plan: plan.plan.view(),
        })),
        Err(diags) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "plan_failed",
            diags
                .iter()
                .filter(|d| d.level == forge_core::diag::Level::Error)
                .map(|d| format!("{}: {}", d.code, d.message))
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}

/// `GET /api/agent/runs` → `{ok, runs}`: the kept run records and the approved runs still in
/// progress (`status` `queued` or `running`, no record yet), oldest first.
async fn runs(State(state): State<AppState>) -> Response {
    let active: Vec<Value> = state
        .agents
        .active()
        .values()
        .filter_map(|a| serde_json::to_value(&a.summary).ok())
        .collect();
    // A record that does not read as one (not an object, a member of the wrong type) is left
    // out: the Runs view could not show it.
    let runs = agent::list_runs_with(&state.project, active)
        .into_iter()
        .filter_map(|run| Kept::read(run).ok())
        .collect();
    ok_typed(&RunList { ok: true, runs })
}

/// `GET /api/agent/runs/:run` → `{ok, record, answer, prompt, transcript}`: `answer` is the
/// verified answer of a completed run (`null` for one that did not complete), `prompt` the
/// approved system prompt and messages, `transcript` the child's answers, tool calls and tool
/// results; a run in progress answers with its summary as the record. 409
/// `answer_hash_mismatch` when `answer.txt` is not what the record hashed; 404 for an unknown
/// run.
async fn run_detail(State(state): State<AppState>, Path(run): Path<String>) -> ApiResult<Response> {
    let active = state
        .agents
        .active()
        .get(&run)
        .and_then(|a| serde_json::to_value(&a.summary).ok());
    let record = agent::read_run(&state.project, &run)
        .or(active)
        .ok_or_else(|| ApiError::not_found(format!("No run {run} is kept in .pi/forge/runs.")))?;
    let record: Kept<forge_core::api::RunRecord> = Kept::read(record).map_err(|e| {
        ApiError::internal(format!(
            "The record of run {run} in .pi/forge/runs is not a run record: {e}."
        ))
    })?;
    let answer = if record.view.status == "completed" {
        match agent::verified_answer(&state.project, &run) {
            Ok(answer) => Some(answer),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "answer_hash_mismatch",
                    format!("{e:#}"),
                ))
            }
        }
    } else {
        None
    };
    let kept = agent::RunFiles::read(&state.project, &run);
    let detail = RunDetail {
        ok: true,
        record,
        answer,
        prompt: kept.prompt,
        transcript: kept.transcript,
    };
    Ok(typed_response(StatusCode::OK, &detail))
}

/// `GET /api/agent/profiles` → `{ok, profiles: [{profileId, model, thinkingLevel, promptStack,
/// ready, approval, problem?}]}`: the profiles delegation may use (enabled in subagents.json);
/// `approval` is `required`, or `none (trusted project setting)` in unattended mode.
async fn profiles(State(state): State<AppState>) -> Response {
    let snapshot = state.ws.snapshot();
    let paths = paths(&state);
    // One read of the settings for every profile's readiness check.
    let files = agent::SubagentsFiles::read(&paths);
    let mut out = Vec::new();
    for entry in &snapshot.profiles {
        let key = entry.key.to_string();
        let request = PlanRequest {
            profile: &key,
            task: "readiness check",
            timeout_ms: None,
            parent_session: None,
        };
        let check = agent::prepare_plan_with(
            &snapshot,
            &paths,
            &files,
            &request,
            &agent::new_ids(),
            local_clock(),
        );
        let problem = match &check {
            Ok(_) => None,
            Err(d) if d.iter().any(|d| d.code == "host.profile-disabled") => continue,
            Err(d) => d.first().map(|d| d.message.clone()),
        };
        let profile = &entry.parsed.profile;
        // Unattended mode (a trusted project's allowAgentInvocationWithoutApproval) runs
        // without a review; everything else needs a person's approval.
        let unattended = check.as_ref().is_ok_and(|p| p.settings.unattended);
        out.push(AgentProfileRow {
            profile_id: key,
            model: format!("{}/{}", profile.model.provider, profile.model.id),
            thinking_level: profile.thinking_level.as_str().to_string(),
            prompt_stack: profile.prompt_stack.clone(),
            ready: problem.is_none(),
            approval: if unattended {
                "none (trusted project setting)"
            } else {
                "required"
            }
            .to_string(),
            problem,
        });
    }
    ok_typed(&AgentProfileList {
        ok: true,
        profiles: out,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubagentMessage {
    session_id: String,
    profile: String,
    task: String,
    /// Answer at once and deliver the result as a message when the run ends.
    #[serde(default)]
    background: bool,
}

/// `POST /api/host/:id/subagent` `{sessionId, profile, task}` (the `forge_subagent` tool) →
/// `{ok, text, runId?, record?}` once the plan was decided and, if approved, run. `ok: false`
/// (the tool result is an error) when it could not be prepared, was rejected or cancelled, or
/// the run did not complete.
async fn host_subagent(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: SubagentMessage = parse(body, "subagent")?;
    state.live.with_host(&id, &message.session_id, |_| ())?;
    let ids = agent::new_ids();
    let clock = local_clock();
    let snapshot = state.ws.snapshot();
    let request = PlanRequest {
        profile: &message.profile,
        task: &message.task,
        timeout_ms: None,
        parent_session: Some(&message.session_id),
    };
    let prepared = match agent::prepare_plan(&snapshot, &paths(&state), &request, &ids, clock) {
        Ok(plan) => plan,
        Err(diags) => {
            let text = diags
                .iter()
                .filter(|d| d.level == forge_core::diag::Level::Error)
                .map(|d| format!("{}: {}", d.code, d.message))
                .collect::<Vec<_>>()
                .join("\n");
            return Ok(ok_json(
                &json!({"ok": false, "text": format!("Subagent not prepared: {text}")}),
            ));
        }
    };
    let run_id = prepared.plan.run_id.clone();
    let plan_run_id = run_id.clone();
    let (tx, rx) = oneshot::channel();
    state.agents.insert(
        run_id.clone(),
        Pending {
            profile: message.profile.clone(),
            task: message.task.clone(),
            plan: prepared,
            ids,
            clock,
            parent_session: Some(message.session_id.clone()),
            created_at: crate::live::now_iso(),
            decide: Some(tx),
        },
    );
    if message.background {
        // Answer the tool at once; the result reaches the parent as a message when done.
        let state = Arc::clone(&state);
        let task = message.task.clone();
        tokio::spawn(async move {
            let outcome = match decide_and_run(&state, &run_id, rx).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    json!({"ok": false, "runId": run_id, "text": format!("Subagent failed: {}", e.message)})
                }
            };
            let mut body = serde_json::Map::new();
            body.insert("runId".into(), json!(run_id));
            body.insert("task".into(), json!(task));
            let ok = outcome["ok"] == true;
            body.insert("ok".into(), json!(ok));
            body.insert(
                "message".into(),
                json!(format!(
                    "Background subagent {run_id} ({task}) {}:\n\n{}",
                    if ok { "finished" } else { "did not finish" },
                    outcome["text"].as_str().unwrap_or_default()
                )),
            );
            let _ = state.live.command("subagentDone", body).await;
        });
        return Ok(ok_json(&json!({
            "ok": true,
            "runId": plan_run_id,
            "text": format!("Subagent {plan_run_id} runs in the background once a person approves it; its result arrives as a message when it finishes."),
        })));
    }
    Ok(ok_json(&decide_and_run(&state, &run_id, rx).await?))
}

/// Asks Pi to show the review, waits for a person's decision, runs an approved plan and says
/// what the parent model receives: `{ok, runId, text, record?}`.
async fn decide_and_run(
    state: &AppState,
    run_id: &str,
    rx: oneshot::Receiver<Decision>,
) -> ApiResult<Value> {
    // If this future is dropped while the plan waits (the caller went away), the plan is
    // withdrawn: approving it later answers 410 `plan_withdrawn`, never `ok` with nothing run.
    let mut guard = Withdraw {
        state,
        run_id,
        armed: true,
    };
    // Unattended mode (`allowAgentInvocationWithoutApproval` in a trusted project's
    // subagents.json, §D8): no review, recorded as such in the receipt.
    let unattended = state
        .agents
        .lock()
        .get(run_id)
        .is_some_and(|p| p.plan.settings.unattended);
    if unattended {
        guard.armed = false;
        let Some(pending) = state.agents.remove(run_id) else {
            return Err(unknown_plan(run_id));
        };
        let approval = agent::unattended_approval(&pending.plan);
        return run_approved(state, run_id, pending, approval).await;
    }
    // Pi shows the review too (its dialogs one at a time); whichever side decides first wins,
    // and the other one's dialog is dismissed.
    let ask = state.agents.lock().get(run_id).map(|p| {
        let mut body = serde_json::Map::new();
        body.insert("runId".into(), json!(run_id));
        body.insert(
            "review".into(),
            json!(approval_summary(&p.plan.plan, &p.task, DEFAULT_BACKEND)),
        );
        body.insert(
            "fullPrompt".into(),
            json!(approval_full_view(&p.plan.plan, &p.task, DEFAULT_BACKEND)),
        );
        body.insert(
            "executionFingerprint".into(),
            json!(p.plan.plan.execution_fingerprint),
        );
        body.insert(
            "url".into(),
            json!(format!("http://127.0.0.1:{}/", state.port)),
        );
        body
    });
    if let Some(body) = ask {
        let live = Arc::clone(&state.live);
        tokio::spawn(async move {
            let _ = live.command("approvePlan", body).await;
        });
    }
    let decision = tokio::time::timeout(APPROVAL_WAIT, rx).await;
    guard.armed = false;
    let mut dismiss = serde_json::Map::new();
    dismiss.insert("runId".into(), json!(run_id));
    let live = Arc::clone(&state.live);
    tokio::spawn(async move {
        let _ = live.command("dismissPlan", dismiss).await;
    });
    let Some(pending) = state.agents.remove(run_id) else {
        return Err(unknown_plan(run_id));
    };
    let (viewed, from) = match decision {
        Ok(Ok(Decision::Approve { viewed, from })) => (viewed, from),
        Ok(Ok(Decision::Reject)) => {
            return Ok(json!({"ok": false, "runId": run_id, "text": REJECTED_REASON}))
        }
        _ => {
            return Ok(json!({"ok": false, "runId": run_id,
                "text": "Subagent run cancelled: nobody approved the plan in time."}))
        }
    };
    let approval = agent::human_approval(&pending.plan, viewed, from);
    run_approved(state, run_id, pending, approval).await
}

/// Withdraws the plan of a `decide_and_run` future dropped before a decision.
struct Withdraw<'a> {
    state: &'a AppState,
    run_id: &'a str,
    armed: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.state.agents.withdraw(self.run_id);
        let mut dismiss = serde_json::Map::new();
        dismiss.insert("runId".into(), json!(self.run_id));
        let live = Arc::clone(&self.state.live);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = live.command("dismissPlan", dismiss).await;
            });
        }
    }
}

/// The 404 of an unknown plan, or 410 `plan_withdrawn` for one whose request ended first.
fn missing_plan(hub: &AgentHub, run: &str) -> ApiError {
    if hub.was_withdrawn(run) {
        withdrawn_plan(run)
    } else {
        unknown_plan(run)
    }
}

fn withdrawn_plan(run: &str) -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "plan_withdrawn",
        format!(
            "Plan {run} was withdrawn: the request that asked for it ended before anyone decided (its caller went away), so nothing will run. Ask for the subagent again."
        ),
    )
}

/// Runs an approved plan and says what the parent receives. The run lives in its own task: it
/// waits for one of the `maxConcurrentRuns` slots (`queued`, at most the run's own timeout, then
/// it ends as `failed` with `queue_timeout`), holds the slot until its child's process group is
/// gone, and writes its record, also when the request that started it was dropped meanwhile.
/// When the server stops, a queued run never starts and a running child is killed at once.
async fn run_approved(
    state: &AppState,
    run_id: &str,
    pending: Pending,
    approval: RunApproval,
) -> ApiResult<Value> {
    let (tx, rx) = oneshot::channel();
    let task_state = Arc::clone(state);
    let task_run = run_id.to_string();
    tokio::spawn(async move {
        let record = run_task(&task_state, &task_run, pending.plan, approval).await;
        task_state.agents.clear_active(&task_run);
        task_state.agents.finished();
        let _ = tx.send(record);
    });
    let record = rx
        .await
        .map_err(|_| ApiError::internal("the run's task ended without a record"))??;
    let (completed, text) = parent_text(&state.project, run_id, &record);
    Ok(json!({"ok": completed, "runId": run_id, "text": text, "record": record}))
}

/// Resolves when the server shuts down (never, if nothing can stop it).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Why a queued run did not get a slot.
enum Unstarted {
    Waited,
    Cancelled(u8),
}

/// The run itself, in its own task (see [`run_approved`]).
async fn run_task(
    state: &AppState,
    run_id: &str,
    plan: HostPlan,
    approval: RunApproval,
) -> ApiResult<Value> {
    let cancel = Arc::new(AtomicU8::new(agent::NOT_CANCELLED));
    let wake = Arc::new(Notify::new());
    state.agents.set_active(
        run_id,
        ActiveRun {
            run_id: run_id.to_string(),
            profile_id: plan.plan.profile.profile_id.to_string(),
            status: "queued".into(),
            model: format!("{}/{}", plan.plan.model.provider, plan.plan.model.id),
            thinking_level: plan.plan.thinking_level.clone(),
            started_at: crate::live::now_iso(),
            approval: approval.clone(),
        },
        Arc::clone(&cancel),
        Arc::clone(&wake),
    );
    let limit = agent::SubagentsFiles::read(&paths(state)).max_concurrent_runs(state.ws.trusted());
    let semaphore = state.agents.semaphore(limit);
    let wait = Duration::from_millis(plan.timeout_ms);
    let mut shutdown = state.shutdown.clone();
    let acquired = tokio::select! {
        permit = tokio::time::timeout(wait, semaphore.acquire_owned()) => match permit {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(Unstarted::Waited),
        },
        () = wake.notified() => Err(Unstarted::Cancelled(cancel.load(Ordering::SeqCst))),
        () = stopped(&mut shutdown) => Err(Unstarted::Cancelled(agent::CANCELLED_BY_SHUTDOWN)),
    };
    let project = state.project.clone();
    let permit = match acquired {
        Ok(permit) => permit,
        Err(why) => {
            let (status, error) = match why {
                Unstarted::Waited => (
                    "failed",
                    format!(
                        "queue_timeout: no run slot freed within {} s (maxConcurrentRuns is {limit}, and that many runs were still running); the child never started.",
                        plan.timeout_ms / 1_000
                    ),
                ),
                Unstarted::Cancelled(agent::CANCELLED_BY_SHUTDOWN) => {
                    ("cancelled", agent::SERVER_STOPPED_ERROR.to_string())
                }
                Unstarted::Cancelled(_) => ("cancelled", agent::CANCELLED_ERROR.to_string()),
            };
            return tokio::task::spawn_blocking(move || {
                agent::record_unstarted(&project, &plan, approval, status, error)
            })
            .await
            .map_err(|e| ApiError::internal(format!("the run record panicked: {e}")))?
            .map_err(|e| {
                ApiError::internal(format!("the run record could not be written: {e:#}"))
            });
        }
    };
    state.agents.set_status(run_id, "running");
    let flag = Arc::clone(&cancel);
    // The permit moves into the blocking closure: the slot is given back only when `execute`
    // returned, that is when the child's process group was killed.
    let mut blocking = tokio::task::spawn_blocking(move || {
        let _slot = permit;
        agent::execute(&project, &plan, approval, &flag)
    });
    let joined = tokio::select! {
        joined = &mut blocking => joined,
        () = stopped(&mut shutdown) => {
            cancel.store(agent::CANCELLED_BY_SHUTDOWN, Ordering::SeqCst);
            blocking.await
        }
    };
    joined
        .map_err(|e| ApiError::internal(format!("the child run panicked: {e}")))?
        .map_err(|e| ApiError::internal(format!("the child run could not start: {e:#}")))
}

/// What the parent model reads about an ended run: the verified answer (a reference with its
/// beginning when it is too long) and the run line, or why there is none.
fn parent_text(project: &std::path::Path, run_id: &str, record: &Value) -> (bool, String) {
    if record["status"] != "completed" {
        return (
            false,
            format!(
                "Subagent failed: {}",
                forge_core::json::to_compact(&json!({
                    "status": record["status"],
                    "error": record["error"],
                    "runId": run_id,
                }))
            ),
        );
    }
    match agent::verified_answer(project, run_id) {
        Ok(answer) => {
            let max = record["resultMaxChars"].as_u64().unwrap_or(12_000) as usize;
            let path = format!(".pi/forge/runs/{}/answer.txt", run_id.replace(':', "-"));
            let sha = record["answerSha256"].as_str().unwrap_or_default();
            (
                true,
                format!(
                    "{}\n\n{}",
                    project_answer(&answer, max, &path, sha),
                    run_line(record)
                ),
            )
        }
        Err(e) => (false, format!("Subagent failed: {e:#}")),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResultMessage {
    session_id: String,
    run_id: String,
}

/// `POST /api/host/:id/subagent-result` `{sessionId, runId}` (the `forge_subagent_result` tool)
/// → `{ok, text}`: an ended run's verified answer as `forge_subagent` gives it; a run in
/// progress says so (`ok: true`); an unknown run, a failed one or an altered answer is
/// `ok: false`.
async fn host_subagent_result(
    State(state): State<AppState>,
    Path(id): Path<String>,
    HostBody(body): HostBody,
) -> ApiResult<Response> {
    let message: ResultMessage = parse(body, "subagent-result")?;
    state.live.with_host(&id, &message.session_id, |_| ())?;
    let run = message.run_id;
    let status = state
        .agents
        .active()
        .get(&run)
        .map(|a| a.summary.status.clone());
    let pending = state.agents.lock().contains_key(&run);
    let (ok, text) = if let Some(status) = status {
        (
            true,
            format!(
                "Subagent {run} is {status}; its result arrives as a message when it finishes."
            ),
        )
    } else if pending {
        (
            true,
            format!("Subagent {run} waits for a person's approval; nothing has run yet."),
        )
    } else if let Some(record) = agent::read_run(&state.project, &run) {
        parent_text(&state.project, &run, &record)
    } else {
        (
            false,
            format!("No subagent run {run} is known here (run ids look like run:<uuid>)."),
        )
    };
    Ok(ok_json(&json!({"ok": ok, "runId": run, "text": text})))
}

/// `POST /api/agent/runs/:run/cancel` → `{ok, runId, status}` (the status it had: `queued` or
/// `running`): the child's process group is killed and the run is recorded as `cancelled`; the
/// parent's tool result says so. 409 `run_ended` for a run that already has its record, 404 for
/// an unknown run.
async fn cancel_run(State(state): State<AppState>, Path(run): Path<String>) -> ApiResult<Response> {
    let status = state.agents.active().get(&run).map(|a| {
        a.cancel.store(agent::CANCELLED_BY_PERSON, Ordering::SeqCst);
        // A queued run wakes up to record its cancellation.
        a.wake.notify_one();
        a.summary.status.clone()
    });
    match status {
        Some(status) => Ok(ok_typed(&RunCancelled {
            ok: true,
            run_id: run,
            status,
        })),
        None => match agent::read_run(&state.project, &run) {
            Some(record) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "run_ended",
                format!(
                    "Run {run} already ended ({}); there is nothing to cancel.",
                    record["status"].as_str().unwrap_or("?")
                ),
            )),
            None => Err(ApiError::not_found(format!(
                "No run {run} is in progress or kept in .pi/forge/runs."
            ))),
        },
    }
}

/// The run facts the parent model sees after the answer (the cost only when Pi priced it).
fn run_line(record: &Value) -> String {
    let usage = &record["usage"];
    let cost = usage["cost"]["total"]
        .as_f64()
        .filter(|c| *c > 0.0)
        .map(|c| format!(" · ${c:.4}"))
        .unwrap_or_default();
    format!(
        "[pi-forge subagent {} · {} · thinking {} · {} ms · {} input / {} output tokens{cost}]",
        record["runId"].as_str().unwrap_or("?"),
        record["model"].as_str().unwrap_or("?"),
        record["usedThinkingLevel"]
            .as_str()
            .or(record["thinkingLevel"].as_str())
            .unwrap_or("?"),
        record["durationMs"],
        usage["input"].as_u64().unwrap_or(0),
        usage["output"].as_u64().unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_line_names_the_cost_only_when_pi_priced_the_run() {
        let mut record = json!({"runId": "run:1", "model": "p/m", "thinkingLevel": "high",
            "usedThinkingLevel": "low", "durationMs": 812,
            "usage": {"input": 230, "output": 16, "cost": {"total": 0.0038}}});
        assert_eq!(
            run_line(&record),
            "[pi-forge subagent run:1 · p/m · thinking low · 812 ms · 230 input / 16 output tokens · $0.0038]"
        );
        record["usage"]["cost"]["total"] = json!(0);
        assert_eq!(
            run_line(&record),
            "[pi-forge subagent run:1 · p/m · thinking low · 812 ms · 230 input / 16 output tokens]"
        );
    }
}
