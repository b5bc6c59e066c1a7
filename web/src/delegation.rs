//! The Delegation surface: subagent plans waiting for a person, and the runs that followed.
//!
//! - **Plans**: each pending plan as a card with everything the approval binds (task, profile,
//!   Preset, model, thinking level, tools, working directory, boundary, payload size, both
//!   fingerprints). "View full prompt" shows the exact system prompt and every provider-bound
//!   message in order, read-only, searchable (text only). Approve sends the execution fingerprint
//!   the card shows and whether the full prompt was opened; a stale plan (409) keeps its card
//!   with the server's message. The safe choice (Reject) takes the focus.
//! - **Runs**: the kept run records and the approved runs in progress (status, profile, model,
//!   duration, usage and cost, approval receipt). A queued or running run can be cancelled. A
//!   run expands to its answer (verified by the server before it is sent), its transcript
//!   (answers, tool calls and tool results) and "View approved prompt" (the same read-only,
//!   searchable view as a plan's full prompt).
//!
//! No polling: the lists refetch on entry, on Refresh and on every `agent-plans` server event
//! (a plan added or decided, a run queued, started or ended). Types are forge-core's ([`PlanList`], [`RunList`]).

use std::collections::{HashMap, HashSet};

use forge_core::api::{
    ApproveRequest, PlanDecided, PlanDetail, PlanList, PlanPrompt, PlanSummary, RunCancelled,
    RunDetail, RunList, RunRecord,
};
use leptos::ev;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use crate::api;
use crate::dom::focus_later;
use crate::state::{self, App, Surface, Tone};
use crate::task::spawn_while;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    Plans,
    Runs,
}

/// A prompt on screen: a plan's full prompt or a run's approved prompt.
#[derive(Clone, Debug, PartialEq)]
struct PromptShown {
    title: String,
    prompt: PlanPrompt,
}

/// The prompt view: the run id, what it shows (or why it could not be read) and where the focus
/// goes back when it closes.
#[derive(Clone, Debug, PartialEq)]
struct FullPrompt {
    run: String,
    shown: Result<PromptShown, String>,
    back: String,
}
/// A list's last answer, or why it could not be read (`None`: not loaded yet).
type Loaded<T> = Option<Result<T, String>>;
/// An expanded run's detail: `None` while it is read and verified.
type DetailSlot = Option<Result<RunDetail, String>>;

#[derive(Clone, Copy)]
struct Delegation {
    view: RwSignal<View>,
    plans: RwSignal<Loaded<Vec<PlanSummary>>>,
    runs: RwSignal<Loaded<RunList>>,
    /// Plans whose full prompt was opened (the approval says so).
    viewed: RwSignal<HashSet<String>>,
    /// Why a card's last decision failed, by run id.
    card_errors: RwSignal<HashMap<String, String>>,
    busy: RwSignal<Option<String>>,
    full: RwSignal<Option<FullPrompt>>,
    query: RwSignal<String>,
    /// Expanded runs and their details.
    details: RwSignal<HashMap<String, DetailSlot>>,
    plans_seq: StoredValue<u64>,
    runs_seq: StoredValue<u64>,
}

impl Delegation {
    /// Whether the surface is still mounted (its signals are disposed when the user leaves it).
    fn alive(self) -> bool {
        !self.plans.is_disposed()
    }
}

/// `sha256:v1:0123456789abcdef…` → `sha256:v1:0123456789ab…` (the full value goes in a title).
pub fn short_fingerprint(fp: &str) -> String {
    let (prefix, hex) = fp.rsplit_once(':').unwrap_or(("", fp));
    if hex.chars().count() <= 12 {
        return fp.to_string();
    }
    let head: String = hex.chars().take(12).collect();
    if prefix.is_empty() {
        format!("{head}…")
    } else {
        format!("{prefix}:{head}…")
    }
}

/// A byte count for people (`812 B`, `3.4 KiB`, `1.2 MiB`).
fn size_text(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

fn plural(n: u64, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// A message's content as text, with nothing hidden: forge-core's one reading of content, with
/// every part that is not text as compact JSON.
fn message_text(content: &Value) -> String {
    forge_core::message::content_text(content, forge_core::message::OtherParts::Json)
}

fn fetch_plans(d: Delegation) {
    let my = d.plans_seq.get_value() + 1;
    d.plans_seq.set_value(my);
    spawn_while(d.plans, async move {
        let answer = api::get_as::<PlanList>("/api/agent/plans").await;
        if d.plans_seq.get_value() != my {
            return;
        }
        let had_none = d
            .plans
            .with_untracked(|p| !matches!(p, Some(Ok(list)) if !list.is_empty()));
        match answer {
            Ok(list) => {
                let ids: HashSet<String> = list.plans.iter().map(|p| p.run_id.clone()).collect();
                d.card_errors.update(|e| e.retain(|k, _| ids.contains(k)));
                let first = list.plans.first().map(|p| p.run_id.clone());
                d.plans.set(Some(Ok(list.plans)));
                // The safe choice takes the focus when plans appear, unless the person is in
                // the middle of something else on this surface.
                if let (true, Some(run)) = (had_none, first) {
                    if d.full.with_untracked(Option::is_none) && !focus_in_surface() {
                        focus_later(format!(
                            ".plan-card[data-run=\"{}\"] .plan-reject",
                            css_escape(&run)
                        ));
                    }
                }
            }
            Err(e) => d.plans.set(Some(Err(e.message))),
        }
    });
}

fn fetch_runs(d: Delegation) {
    let my = d.runs_seq.get_value() + 1;
    d.runs_seq.set_value(my);
    spawn_while(d.runs, async move {
        let answer = api::get_as::<RunList>("/api/agent/runs").await;
        if d.runs_seq.get_value() != my {
            return;
        }
        d.runs.set(Some(answer.map_err(|e| e.message)));
    });
}

/// Whether the focus is inside the Delegation surface (then a refresh does not move it).
fn focus_in_surface() -> bool {
    web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.active_element())
        .and_then(|e| e.closest(".delegation").ok().flatten())
        .is_some()
}

/// Run ids are opaque ids (letters, digits, `.`, `_`, `:`, `-`); `:` needs escaping in a
/// quoted attribute selector only for `"` and `\`, which they never hold.
fn css_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Reads an expanded run's detail (a run that is still expanded when it arrives).
fn fetch_detail(d: Delegation, run: String) {
    d.details.update(|a| {
        a.entry(run.clone()).or_insert(None);
    });
    spawn_while(d.details, async move {
        let detail = api::get_as::<RunDetail>(&format!("/api/agent/runs/{}", api::seg(&run)))
            .await
            .map_err(|e| e.message);
        d.details.update(|a| {
            if let Some(slot) = a.get_mut(&run) {
                *slot = Some(detail);
            }
        });
    });
}

fn cancel_run(app: App, d: Delegation, run: String) {
    spawn_local(async move {
        match api::post_as::<RunCancelled>(
            &format!("/api/agent/runs/{}/cancel", api::seg(&run)),
            &json!({}),
        )
        .await
        {
            Ok(_) => app.say(
                format!("Cancelling {run}: its child Pi is stopped."),
                Tone::Ok,
            ),
            Err(e) => app.fail(&e),
        }
        // The user may have left the surface meanwhile.
        if d.alive() {
            fetch_runs(d);
        }
    });
}

fn decide(app: App, d: Delegation, plan: PlanSummary, approve: bool) {
    if d.busy.with_untracked(Option::is_some) {
        return;
    }
    let run = plan.run_id.clone();
    d.busy.set(Some(run.clone()));
    let viewed = d.viewed.with_untracked(|v| v.contains(&run));
    spawn_local(async move {
        let seg = api::seg(&run);
        let answer = if approve {
            let body = serde_json::to_value(ApproveRequest {
                execution_fingerprint: plan.execution_fingerprint.clone(),
                viewed_full_prompt: viewed,
                from: None,
            })
            .unwrap_or_default();
            api::post_as::<PlanDecided>(&format!("/api/agent/plans/{seg}/approve"), &body).await
        } else {
            api::post_as::<PlanDecided>(&format!("/api/agent/plans/{seg}/reject"), &json!({})).await
        };
        // Decided (or not) whether or not the surface is still open: the status line says so
        // either way; the surface's own state only while it is mounted.
        let alive = d.alive();
        if alive {
            d.busy.set(None);
        }
        match answer {
            Ok(_) => {
                let task = &plan.task;
                app.say(
                    if approve {
                        format!("Approved \"{task}\": the subagent runs now.")
                    } else {
                        format!("Rejected \"{task}\": nothing was sent.")
                    },
                    Tone::Ok,
                );
                if !alive {
                    return;
                }
                d.card_errors.update(|e| {
                    e.remove(&run);
                });
                d.plans.update(|p| {
                    if let Some(Ok(list)) = p {
                        list.retain(|p| p.run_id != run);
                    }
                });
                // The next card's safe choice, or the surface's Refresh.
                let next = d.plans.with_untracked(|p| match p {
                    Some(Ok(list)) => list.first().map(|p| p.run_id.clone()),
                    _ => None,
                });
                focus_later(match next {
                    Some(next) => format!(
                        ".plan-card[data-run=\"{}\"] .plan-reject",
                        css_escape(&next)
                    ),
                    None => ".delegation-refresh".into(),
                });
                fetch_plans(d);
                fetch_runs(d);
            }
            Err(e) => {
                app.fail(&e);
                if alive {
                    d.card_errors.update(|errors| {
                        errors.insert(run.clone(), e.message.clone());
                    });
                }
            }
        }
    });
}

fn open_full(d: Delegation, run: String) {
    d.viewed.update(|v| {
        v.insert(run.clone());
    });
    d.query.set(String::new());
    let back = format!(
        ".plan-card[data-run=\"{}\"] .plan-view-full",
        css_escape(&run)
    );
    d.full.set(Some(FullPrompt {
        run: run.clone(),
        shown: Err("Loading…".into()),
        back: back.clone(),
    }));
    spawn_while(d.full, async move {
        let shown = api::get_as::<PlanDetail>(&format!("/api/agent/plans/{}", api::seg(&run)))
            .await
            .map(|detail| PromptShown {
                title: format!("Full prompt: {}", detail.summary.task),
                prompt: detail.plan.prompt(),
            })
            .map_err(|e| e.message);
        if d.full
            .with_untracked(|f| f.as_ref().is_some_and(|f| f.run == run))
        {
            d.full.set(Some(FullPrompt { run, shown, back }));
            focus_later(".full-prompt-search".into());
        }
    });
}

/// Shows a run's approved prompt (already read with its detail).
fn open_approved(d: Delegation, run: String, prompt: PlanPrompt) {
    d.query.set(String::new());
    let back = format!(
        ".run-row[data-run=\"{}\"] .run-view-prompt",
        css_escape(&run)
    );
    d.full.set(Some(FullPrompt {
        shown: Ok(PromptShown {
            title: format!("Approved prompt: {run}"),
            prompt,
        }),
        run,
        back,
    }));
    focus_later(".full-prompt-search".into());
}

fn close_full(d: Delegation) {
    let back = d
        .full
        .with_untracked(|f| f.as_ref().map(|f| f.back.clone()));
    d.full.set(None);
    if let Some(back) = back {
        focus_later(back);
    }
}

#[component]
pub fn DelegationSurface() -> impl IntoView {
    let app = state::app();
    let d = Delegation {
        view: RwSignal::new(View::Plans),
        plans: RwSignal::new(None),
        runs: RwSignal::new(None),
        viewed: RwSignal::new(HashSet::new()),
        card_errors: RwSignal::new(HashMap::new()),
        busy: RwSignal::new(None),
        full: RwSignal::new(None),
        query: RwSignal::new(String::new()),
        details: RwSignal::new(HashMap::new()),
        plans_seq: StoredValue::new(0),
        runs_seq: StoredValue::new(0),
    };
    // On entry and on every `agent-plans` event (a plan added or decided, a run queued,
    // started or ended); expanded runs read their detail again.
    Effect::new(move |_| {
        app.agent_events.track();
        if app.surface.get_untracked() == Surface::Delegation {
            fetch_plans(d);
            fetch_runs(d);
            let open: Vec<String> = d.details.with_untracked(|a| a.keys().cloned().collect());
            for run in open {
                fetch_detail(d, run);
            }
        }
    });
    // Escape closes the full prompt.
    let keys = window_event_listener(ev::keydown, move |e| {
        if e.key() == "Escape" && d.full.with_untracked(Option::is_some) {
            e.prevent_default();
            close_full(d);
        }
    });
    on_cleanup(move || keys.remove());
    let refresh = move |_| {
        fetch_plans(d);
        fetch_runs(d);
    };
    let tab = move |view: View, label: &'static str| {
        view! {
            <button class="seg-button delegation-tab" class:current=move || d.view.get() == view
                aria-pressed=move || (d.view.get() == view).to_string()
                on:click=move |_| d.view.set(view)>
                {label}
                {move || (view == View::Plans && app.plans_pending.get() > 0)
                    .then(|| view! { <span class="count">{app.plans_pending.get()}</span> })}
            </button>
        }
    };
    view! {
        <main class="delegation" aria-label="Delegation">
            <div class="delegation-head">
                <div class="seg" role="group" aria-label="Delegation view">
                    {tab(View::Plans, "Plans")}
                    {tab(View::Runs, "Runs")}
                </div>
                <button class="delegation-refresh" on:click=refresh>"Refresh"</button>
            </div>
            {move || match d.view.get() {
                View::Plans => view! { <PlansView d=d/> }.into_any(),
                View::Runs => view! { <RunsView d=d/> }.into_any(),
            }}
            {move || d.full.with(Option::is_some).then(|| view! { <FullPromptView d=d/> })}
        </main>
    }
}

#[component]
fn PlansView(d: Delegation) -> impl IntoView {
    let app = state::app();
    view! {
        <section class="plans" aria-label="Plans waiting for approval">
            <p class="hint">"A subagent plan waits here until you approve or reject it. Nothing reaches a model before you approve."</p>
            {move || match d.plans.get() {
                None => view! { <p class="empty">"Loading plans…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="banner error">{e}</p> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! {
                    <p class="empty plans-empty">"No plan is waiting for approval."</p>
                    <p class="muted plans-how">"A plan is made when the model calls forge_subagent (a Preset must allow that tool), with /forge agent plan|run <profile> <task> in Pi, or with pi-forge agent plan|run in a terminal. Which profiles may be delegated to is set in .pi/forge/subagents.json."</p>
                }.into_any(),
                Some(Ok(list)) => list.into_iter().map(|p| plan_card(app, d, p)).collect_view().into_any(),
            }}
        </section>
    }
}

fn fact(label: &'static str, value: String) -> impl IntoView {
    view! {
        <dt>{label}</dt>
        <dd>{value}</dd>
    }
}

fn fingerprint_fact(label: &'static str, class: &'static str, fp: String) -> impl IntoView {
    view! {
        <dt>{label}</dt>
        <dd><code class=class title=fp.clone() aria-label=format!("{label}: {fp}")>{short_fingerprint(&fp)}</code></dd>
    }
}

fn plan_card(app: App, d: Delegation, p: PlanSummary) -> impl IntoView {
    let run = p.run_id.clone();
    let run_err = run.clone();
    let run_busy = run.clone();
    let run_full = run.clone();
    let busy = move || d.busy.with(|b| b.as_deref() == Some(run_busy.as_str()));
    let busy2 = busy.clone();
    let error = move || d.card_errors.with(|e| e.get(&run_err).cloned());
    let model = format!("{}/{}", p.model.provider, p.model.id);
    let tools = if p.tools.is_empty() {
        "none".to_string()
    } else {
        p.tools.join(", ")
    };
    let payload = format!(
        "{} · {} · system prompt {}",
        size_text(p.payload_bytes),
        plural(p.messages, "message"),
        plural(p.system_prompt_chars, "character"),
    );
    let approve_plan = p.clone();
    let reject_plan = p.clone();
    let heading = format!("plan-task-{}", p.run_id.replace([':', '.'], "-"));
    let labelled_by = heading.clone();
    view! {
        <article class="plan-card" data-run=p.run_id.clone() aria-labelledby=labelled_by>
            <h3 class="plan-task" id=heading>{p.task.clone()}</h3>
            <dl class="plan-facts">
                {fact("Profile", p.profile_id.clone())}
                {fact("Preset", p.prompt_stack_id.clone().unwrap_or_else(|| "none".into()))}
                {fact("Model", model)}
                {fact("Thinking", p.thinking_level.clone())}
                {fact("Tools", tools)}
                {fact("Working directory", p.working_directory.clone())}
                {fact("Boundary", p.boundary.clone())}
                {fact("Payload", payload)}
                {fingerprint_fact("Execution fingerprint", "plan-execution-fp", p.execution_fingerprint.clone())}
                {fingerprint_fact("Conversation fingerprint", "plan-conversation-fp", p.conversation_fingerprint.clone())}
                {fact("Run", p.run_id.clone())}
            </dl>
            {move || error().map(|e| view! { <p class="banner error plan-error" role="alert">{e}</p> })}
            <div class="plan-actions">
                <button class="plan-view-full" on:click=move |_| open_full(d, run_full.clone())>"View full prompt"</button>
                <span class="spacer"></span>
                <button class="plan-reject" disabled=busy
                    on:click=move |_| decide(app, d, reject_plan.clone(), false)>"Reject"</button>
                <button class="plan-approve primary" disabled=busy2
                    on:click=move |_| decide(app, d, approve_plan.clone(), true)>"Approve"</button>
            </div>
        </article>
    }
}

#[component]
fn FullPromptView(d: Delegation) -> impl IntoView {
    let title = move || {
        d.full.with(|f| match f {
            Some(FullPrompt {
                shown: Ok(shown), ..
            }) => shown.title.clone(),
            _ => "Full prompt".to_string(),
        })
    };
    // Each message once, with its lower-case text for the search.
    let rows = Memo::new(move |_| {
        d.full.with(|f| match f {
            Some(FullPrompt {
                shown: Ok(shown), ..
            }) => shown
                .prompt
                .messages
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let role = m
                        .get("role")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let source = m.get("source").and_then(Value::as_str).map(str::to_string);
                    let text = message_text(m.get("content").unwrap_or(&Value::Null));
                    let lower = text.to_lowercase();
                    (i, role, source, text, lower)
                })
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        })
    });
    let system = Memo::new(move |_| {
        d.full.with(|f| match f {
            Some(FullPrompt {
                shown: Ok(shown), ..
            }) => Some(shown.prompt.system_prompt.clone()),
            _ => None,
        })
    });
    let query = Memo::new(move |_| d.query.with(|q| q.trim().to_lowercase()));
    let system_match = move || {
        let q = query.get();
        q.is_empty() || system.with(|s| s.as_deref().is_some_and(|s| s.to_lowercase().contains(&q)))
    };
    let matches = move || {
        let q = query.get();
        if q.is_empty() {
            return None;
        }
        let n = rows.with(|r| r.iter().filter(|row| row.4.contains(&q)).count());
        let total = rows.with(Vec::len);
        Some(format!(
            "{n} of {} match{}",
            plural(total as u64, "message"),
            if system_match() {
                " · the system prompt matches"
            } else {
                ""
            }
        ))
    };
    let error = move || {
        d.full.with(|f| match f {
            Some(FullPrompt { shown: Err(e), .. }) => Some(e.clone()),
            _ => None,
        })
    };
    view! {
        <div class="modal-backdrop full-prompt-overlay" on:click=move |e| {
            if e.target() == e.current_target() {
                close_full(d);
            }
        }>
            <div class="modal full-prompt" role="dialog" aria-modal="true" aria-labelledby="full-prompt-title">
                <div class="full-prompt-head">
                    <h2 id="full-prompt-title">{title}</h2>
                    <button class="full-prompt-close" on:click=move |_| close_full(d)>"Close"</button>
                </div>
                <p class="hint">"Exactly what the subagent's model receives: the system prompt, then every message in order. Read-only."</p>
                <input class="search full-prompt-search" type="search" placeholder="Search the prompt"
                    aria-label="Search the prompt"
                    prop:value=move || d.query.get()
                    on:input=move |e| d.query.set(event_target_value(&e))/>
                <p class="full-prompt-matches" aria-live="polite">{matches}</p>
                {move || error().map(|e| view! { <p class="banner error">{e}</p> })}
                <div class="full-prompt-body">
                    {move || system.get().map(|s| view! {
                        <section class="prompt-system" class:dim=move || !system_match()>
                            <h3>"System prompt"</h3>
                            <pre class="prompt-text system-prompt-text">{s}</pre>
                        </section>
                    })}
                    <ol class="prompt-messages" start="0">
                        {move || rows.get().into_iter().map(|(i, role, source, text, lower)| {
                            let hidden = move || {
                                let q = query.get();
                                !q.is_empty() && !lower.contains(&q)
                            };
                            let label = match &source {
                                Some(s) => format!("[{i}] {role} · {s}"),
                                None => format!("[{i}] {role}"),
                            };
                            view! {
                                <li class="prompt-message" class:hidden=hidden data-role=role>
                                    <span class="prompt-role">{label}</span>
                                    <pre class="prompt-text">{text}</pre>
                                </li>
                            }
                        }).collect_view()}
                    </ol>
                </div>
            </div>
        </div>
    }
}

#[component]
fn RunsView(d: Delegation) -> impl IntoView {
    let app = state::app();
    view! {
        <section class="runs" aria-label="Runs">
            {move || match d.runs.get() {
                None => view! { <p class="empty">"Loading runs…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="banner error">{e}</p> }.into_any(),
                Some(Ok(list)) if list.runs.is_empty() => view! {
                    <p class="empty runs-empty">"No subagent has run in this project yet. Approve a plan above to run one; its verified answer and receipt stay here."</p>
                }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="run-rows">
                        {list.runs.into_iter().rev().map(|r| run_row(app, d, r.view)).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}

/// Usage as people read it: tokens, and the cost when Pi priced the run.
fn usage_text(usage: Option<&forge_core::api::RunUsage>) -> String {
    usage.map_or_else(
        || "no usage reported".to_string(),
        |u| {
            let mut text = format!("{} input / {} output tokens", u.input, u.output);
            if let Some(cost) = u.total_cost().filter(|c| *c > 0.0) {
                text.push_str(&format!(" · ${cost:.4}"));
            }
            text
        },
    )
}

fn receipt_text(a: &forge_core::api::RunApproval) -> String {
    if a.source.is_empty() {
        return "no approval recorded".into();
    }
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "?".to_string()
        } else {
            s.to_string()
        }
    };
    format!(
        "approved by {} from {} · full prompt {}",
        a.source,
        or_unknown(&a.from),
        if a.viewed_full_prompt {
            "viewed"
        } else {
            "not viewed"
        }
    )
}

/// Whether a run has no record yet (waiting for a slot or running).
fn in_progress(status: &str) -> bool {
    matches!(status, "queued" | "running")
}

fn run_row(app: App, d: Delegation, r: RunRecord) -> impl IntoView {
    let run = r.run_id.clone();
    let run_open = run.clone();
    let run_toggle = run.clone();
    let run_cancel = run.clone();
    let open = move || d.details.with(|a| a.contains_key(&run_open));
    let open2 = open.clone();
    let completed = r.status == "completed";
    let going = in_progress(&r.status);
    // A run in progress has no record yet (`schemaVersion` 0): no duration.
    let duration = if going {
        format!("{} since {}", r.status, r.started_at)
    } else if r.schema_version > 0 {
        format!("{} ms", r.duration_ms)
    } else {
        "—".to_string()
    };
    let usage = usage_text(r.usage_counts().as_ref());
    let thinking = r.thinking().to_string();
    let receipt = receipt_text(&r.approval);
    let toggle = move |_| {
        if d.details.with_untracked(|a| a.contains_key(&run_toggle)) {
            d.details.update(|a| {
                a.remove(&run_toggle);
            });
        } else {
            fetch_detail(d, run_toggle.clone());
        }
    };
    let run_detail = run.clone();
    let detail = move || {
        d.details
            .with(|a| a.get(&run_detail).cloned())
            .map(|slot| match slot {
                None => view! { <p class="empty">"Reading the run…"</p> }.into_any(),
                Some(Ok(detail)) => run_detail_view(d, run_detail.clone(), detail).into_any(),
                Some(Err(e)) => {
                    view! { <p class="banner error run-answer-error" role="alert">{e}</p> }
                        .into_any()
                }
            })
    };
    let error = r.error.clone();
    let status = r.status.clone();
    let data_status = r.status.clone();
    let label = format!("Cancel run {} ({})", run, r.profile_id);
    view! {
        <li class="run-row" data-run=run.clone() data-status=data_status>
            <div class="run-line">
                <button class="run-toggle" aria-expanded=move || open().to_string() on:click=toggle>
                    <span class="badge run-status" class:active=completed class:pending=going
                        class:error={!completed && !going}>{status}</span>
                    <span class="run-profile">{r.profile_id.clone()}</span>
                    <span class="run-model">{format!("{} · thinking {thinking}", r.model)}</span>
                    <span class="run-duration">{duration}</span>
                    <span class="run-usage">{usage}</span>
                    <span class="run-receipt">{receipt}</span>
                    <span class="run-id">{run.clone()}</span>
                </button>
                {going.then(|| view! {
                    <button class="run-cancel danger" aria-label=label
                        on:click=move |_| cancel_run(app, d, run_cancel.clone())>"Cancel"</button>
                })}
            </div>
            {move || open2().then(|| view! {
                <div class="run-detail">
                    {error.clone().map(|e| view! { <p class="banner error">{e}</p> })}
                    {detail.clone()}
                </div>
            })}
        </li>
    }
}

/// An expanded run: its verified answer, what the child did and the approved prompt.
fn run_detail_view(d: Delegation, run: String, detail: RunDetail) -> impl IntoView {
    let record = &detail.record.view;
    let status = record.status.clone();
    let answer = match (&detail.answer, status.as_str()) {
        (Some(text), _) => view! {
            <div class="run-answer-box">
                <h4>"Answer (verified)"</h4>
                <pre class="run-answer">{text.clone()}</pre>
            </div>
        }
        .into_any(),
        (None, s) if in_progress(s) => {
            view! { <p class="empty">"The answer arrives when the run ends."</p> }.into_any()
        }
        (None, _) => view! { <p class="empty">"This run has no answer."</p> }.into_any(),
    };
    // A kept record counts the model requests and tool calls (a run in progress does not).
    let counts = (record.schema_version > 0).then(|| {
        format!(
            "{} · {}",
            plural(record.turns, "model request"),
            plural(record.tool_calls, "tool call")
        )
    });
    let steps = detail.transcript.clone();
    let prompt = detail.prompt.clone();
    view! {
        {answer}
        {counts.map(|c| view! { <p class="run-counts">{c}</p> })}
        {(!steps.is_empty()).then(|| view! {
            <details class="run-transcript">
                <summary>{format!("Transcript ({})", plural(steps.len() as u64, "message"))}</summary>
                <ol class="transcript-steps">
                    {steps.into_iter().map(|step| {
                        let role = if step.role == "toolResult" {
                            format!(
                                "tool result · {}{}",
                                step.tool_name.clone().unwrap_or_default(),
                                if step.is_error { " · error" } else { "" }
                            )
                        } else {
                            "assistant".to_string()
                        };
                        view! {
                            <li class="transcript-step" data-role=step.role.clone() class:error=step.is_error>
                                <span class="prompt-role">{role}</span>
                                {(!step.text.is_empty()).then(|| view! {
                                    <pre class="prompt-text">{step.text.clone()}</pre>
                                })}
                                {step.tool_calls.into_iter().map(|c| view! {
                                    <code class="transcript-call">{format!("{}({})", c.name, c.arguments)}</code>
                                }).collect_view()}
                            </li>
                        }
                    }).collect_view()}
                </ol>
            </details>
        })}
        {prompt.map(|prompt| view! {
            <button class="run-view-prompt" on:click=move |_| open_approved(d, run.clone(), prompt.clone())>
                "View approved prompt"
            </button>
        })}
    }
}
