//! The Session surface: the live Pi session's capabilities (spec web-editor §3.6).
//!
//! The view (`CapabilityStateView`) arrives with the `capability-state` event, after `ready` and
//! on every change ([`on_state_event`]); entering the surface asks `GET /api/capability-state`
//! once in case the event came before a session did. Nothing polls. The activation picker
//! (`GET /api/capability-state/available`) is loaded on entry, after each mutation and on
//! Refresh, never because the stream moved: its choices stay bound to the state they were read
//! with, so Enable sends that guard and the server answers 409 when the session moved on.
//! Deactivate sends the guard of the view on screen; Reset all sends the guard seen when it was
//! clicked, and any change of the view before Confirm cancels the confirmation. A failure shows
//! the server's words and marks the view stale until Refresh. Capability content is shown as
//! text nodes only.

use forge_core::api::{CapabilityChoices, CapabilityStateAnswer};
use forge_core::capability::view::{
    ActiveView, CapabilityStateView, Choice, ChoiceKind, ViewGuard,
};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use crate::api;
use crate::session_text::{
    active_count, badge_text, choice_value, delivery_text, kind_name, patch_text,
    presentation_text, session_leaf, short_fingerprint, tool_change_text, NO_SESSION,
    PICKER_OUTDATED, RESET_STALE, RESTORING_ENABLE, STALE_ENABLE, UNTRUSTED_ENABLE,
};
use crate::state::{app, App, Tone};

/// A `capability-state` event: the newest view of the live session (`None`: no session).
pub fn on_state_event(app: App, state: Option<CapabilityStateView>) {
    app.cap_seq.update_value(|n| *n += 1);
    app.cap_state_known.set(true);
    if app.cap_state.with_untracked(|s| *s != state) {
        app.cap_state.set(state);
    }
}

/// An answer's view, taken only when no event arrived since the request was sent (the event
/// is at least as new).
fn take_answer(app: App, seq: u64, state: Option<CapabilityStateView>) {
    if app.cap_seq.get_value() != seq {
        return;
    }
    app.cap_state_known.set(true);
    if app.cap_state.with_untracked(|s| *s != state) {
        app.cap_state.set(state);
    }
}

#[derive(Clone, Copy)]
struct Panel {
    /// The picker's catalog and the guard of the state it was read with.
    choices: RwSignal<Vec<Choice>>,
    choices_guard: RwSignal<Option<ViewGuard>>,
    choices_error: RwSignal<Option<String>>,
    choices_loaded: RwSignal<bool>,
    loading: RwSignal<bool>,
    /// The picked option ([`choice_value`]), empty for none.
    selected: RwSignal<String>,
    /// The last failure, in the server's words.
    error: RwSignal<Option<String>>,
    /// Set by a failure, cleared by Refresh or a later success.
    stale: RwSignal<bool>,
    busy: RwSignal<bool>,
    /// Reset all asked for confirmation with this guard.
    confirm_reset: RwSignal<Option<ViewGuard>>,
    /// A confirmation the session overtook.
    notice: RwSignal<Option<String>>,
    /// The newest catalog request; also tells a late answer whether the panel still exists.
    seq: StoredValue<u64>,
}

impl Panel {
    fn new() -> Panel {
        Panel {
            choices: RwSignal::new(Vec::new()),
            choices_guard: RwSignal::new(None),
            choices_error: RwSignal::new(None),
            choices_loaded: RwSignal::new(false),
            loading: RwSignal::new(false),
            selected: RwSignal::new(String::new()),
            error: RwSignal::new(None),
            stale: RwSignal::new(false),
            busy: RwSignal::new(false),
            confirm_reset: RwSignal::new(None),
            notice: RwSignal::new(None),
            seq: StoredValue::new(0),
        }
    }

    /// Whether the surface is still mounted (its stored values are not disposed).
    fn alive(&self) -> bool {
        self.seq.try_get_value().is_some()
    }

    fn fail(&self, message: String) {
        if self.alive() {
            self.busy.set(false);
            self.error.set(Some(message));
            self.stale.set(true);
        }
    }
}

/// `GET /api/capability-state`: 503 means no live session.
fn fetch_state(app: App, p: Panel) {
    let seq = app.cap_seq.get_value();
    spawn_local(async move {
        match api::get_as::<CapabilityStateAnswer>("/api/capability-state").await {
            Ok(a) => take_answer(app, seq, Some(a.state)),
            Err(e) if e.status == 503 => take_answer(app, seq, None),
            Err(e) => {
                if app.cap_seq.get_value() == seq {
                    app.cap_state_known.set(true);
                }
                p.fail(e.message);
            }
        }
    });
}

/// `GET /api/capability-state/available`; only the newest answer is taken.
fn load_choices(app: App, p: Panel) {
    let Some(my) = p.seq.try_get_value().map(|n| n + 1) else {
        return;
    };
    p.seq.set_value(my);
    p.loading.set(true);
    let seq = app.cap_seq.get_value();
    spawn_local(async move {
        let answer = api::get_as::<CapabilityChoices>("/api/capability-state/available").await;
        if p.seq.try_get_value() != Some(my) {
            return;
        }
        p.loading.set(false);
        p.choices_loaded.set(true);
        match answer {
            Ok(v) => {
                let selected = p.selected.get_untracked();
                if !v
                    .choices
                    .iter()
                    .any(|c| choice_value(c.kind, &c.id) == selected)
                {
                    p.selected.set(String::new());
                }
                p.choices_guard.set(Some(v.state.guard.clone()));
                p.choices.set(v.choices);
                p.choices_error.set(None);
                take_answer(app, seq, Some(v.state));
            }
            Err(e) => {
                p.choices.set(Vec::new());
                p.choices_guard.set(None);
                p.choices_error.set(Some(e.message));
            }
        }
    });
}

/// Posts a mutation; its answer's view is taken (unless an event was newer) and the catalog
/// reloaded. A failure shows the server's words and marks the view stale.
fn mutate(app: App, p: Panel, path: &'static str, body: Value, done: String) {
    p.busy.set(true);
    p.notice.set(None);
    let seq = app.cap_seq.get_value();
    spawn_local(async move {
        match api::post_as::<CapabilityStateAnswer>(path, &body).await {
            Ok(a) => {
                take_answer(app, seq, Some(a.state));
                app.say(done, Tone::Ok);
                if p.alive() {
                    p.busy.set(false);
                    p.error.set(None);
                    p.stale.set(false);
                    load_choices_if_trusted(app, p);
                }
            }
            Err(e) => {
                app.say(format!("Not changed: {}", e.message), Tone::Error);
                p.fail(e.message);
            }
        }
    });
}

fn refresh(app: App, p: Panel) {
    p.error.set(None);
    p.stale.set(false);
    p.notice.set(None);
    fetch_state(app, p);
    load_choices_if_trusted(app, p);
}

/// The catalog, unless the project is untrusted (the server would answer 403; the panel says
/// why instead).
fn load_choices_if_trusted(app: App, p: Panel) {
    if app
        .cap_state
        .with_untracked(|s| s.as_ref().is_some_and(|s| s.trusted))
    {
        load_choices(app, p);
    }
}

fn guard_json(guard: &ViewGuard) -> Value {
    serde_json::to_value(guard).unwrap_or(Value::Null)
}

#[component]
pub fn SessionSurface() -> impl IntoView {
    let app = app();
    let p = Panel::new();
    provide_context(p);
    // The stream sends the view right after `ready`; ask only when it has not yet.
    if !app.cap_state_known.get_untracked() {
        fetch_state(app, p);
    }
    // The catalog is loaded once the session is known (and trusted); later stream updates
    // never reload it.
    Effect::new(move |_| {
        let trusted = app.cap_state.with(|s| s.as_ref().map(|s| s.trusted));
        if trusted == Some(true) && !p.choices_loaded.get_untracked() && !p.loading.get_untracked()
        {
            load_choices(app, p);
        }
    });
    // Any change of the view cancels a pending Reset all confirmation.
    Effect::new(move |_| {
        let current = app.cap_state.with(|s| s.as_ref().map(|s| s.guard.clone()));
        if let Some(seen) = p.confirm_reset.get_untracked() {
            if current.as_ref() != Some(&seen) {
                p.confirm_reset.set(None);
                p.notice.set(Some(RESET_STALE.to_string()));
            }
        }
    });
    let has_state = Memo::new(move |_| app.cap_state.with(Option::is_some));
    view! {
        <main class="workspace session-workspace">
            <div id="session-panel" class="session-panel" data-stale=move || p.stale.get().to_string()>
                {move || {
                    if has_state.get() {
                        view! { <SessionView/> }.into_any()
                    } else if app.cap_state_known.get() {
                        view! {
                            <div class="empty-state session-none">
                                <h2>"No live Pi session"</h2>
                                <p class="session-none-text">{NO_SESSION}</p>
                            </div>
                        }.into_any()
                    } else {
                        view! { <p class="muted session-loading">"Loading the session…"</p> }.into_any()
                    }
                }}
                <ErrorBanner/>
            </div>
        </main>
    }
}

/// The session's summary in the top bar on every surface: active count and delivery state; a
/// click opens the Session surface.
#[component]
pub fn SessionBadge(go: Callback<()>) -> impl IntoView {
    let app = app();
    let summary = Memo::new(move |_| {
        app.cap_state.with(|s| {
            s.as_ref().map(|s| {
                let delivery = s.delivery.as_str();
                let text = badge_text(s.active.len(), s.delivery);
                let title = format!(
                    "Capabilities in this session: {}, delivery {delivery}, session {}{}",
                    active_count(s.active.len()),
                    session_leaf(&s.guard),
                    if s.trusted { "" } else { ", untrusted" }
                );
                (text, title, delivery)
            })
        })
    });
    move || {
        summary.get().map(|(text, title, delivery)| {
            view! {
                <button id="session-badge" class="badge session-badge" data-delivery=delivery
                    title=title.clone() aria-label=title on:click=move |_| go.run(())>{text}</button>
            }
        })
    }
}

#[component]
fn ErrorBanner() -> impl IntoView {
    let app = app();
    let p = expect_context::<Panel>();
    move || {
        p.error.get().map(|message| {
            view! {
                <div class="banner error session-error" role="alert">
                    <span class="message">{message}</span>
                    <button class="session-refresh" on:click=move |_| refresh(app, p)>"Refresh"</button>
                </div>
            }
        })
    }
}

#[component]
fn SessionView() -> impl IntoView {
    let app = app();
    let p = expect_context::<Panel>();
    let field = move |f: fn(&CapabilityStateView) -> String| {
        move || {
            app.cap_state
                .with(|s| s.as_ref().map(f).unwrap_or_default())
        }
    };
    let trusted = move || {
        app.cap_state
            .with(|s| s.as_ref().is_some_and(|s| s.trusted))
    };
    let restoring = move || {
        app.cap_state
            .with(|s| s.as_ref().is_some_and(|s| s.restoring))
    };
    let problem = move || {
        app.cap_state
            .with(|s| s.as_ref().and_then(|s| s.problem.clone()))
    };
    let ids_title = field(|s| {
        format!(
            "Session {} · leaf {}",
            s.guard.session_id,
            s.guard.leaf_id.as_deref().unwrap_or("none")
        )
    });
    let effective = Memo::new(move |_| {
        app.cap_state.with(|s| {
            s.as_ref()
                .map(|s| s.effective_tools.clone())
                .unwrap_or_default()
        })
    });
    view! {
        <header class="session-summary">
            <h2>"Current session"</h2>
            <span class="badge active-count">{field(|s| active_count(s.active.len()))}</span>
            <span class="badge delivery-badge" data-delivery=field(|s| s.delivery.as_str().to_string())
                title=field(|s| delivery_text(s.delivery).to_string())>
                {field(|s| format!("delivery: {}", s.delivery.as_str()))}
            </span>
            <span class="session-ids" title=ids_title>{field(|s| session_leaf(&s.guard))}</span>
            {move || (!trusted()).then(|| view! { <span class="badge warn untrusted-badge" title=UNTRUSTED_ENABLE>"untrusted"</span> })}
            {move || restoring().then(|| view! { <span class="badge warn restoring-badge">"restoring"</span> })}
            {move || p.stale.get().then(|| view! { <span class="badge error stale-badge" title=STALE_ENABLE>"stale"</span> })}
        </header>
        {move || problem().map(|text| view! { <p class="banner warn session-problem" role="alert">{text}</p> })}
        <div class="session-grid">
            <section class="card session-delivery">
                <h3>"Delivery"</h3>
                <p class="delivery-text">{field(|s| delivery_text(s.delivery).to_string())}</p>
                <p class="presentation-text" data-presentation=field(|s| format!("{:?}", s.text_presentation).to_lowercase())>
                    {field(|s| presentation_text(s.text_presentation).to_string())}
                </p>
            </section>
            <section class="card session-tools">
                <h3>"Effective tools"</h3>
                <ul class="chips effective-tools" aria-label="Effective tools">
                    {move || {
                        let tools = effective.get();
                        if tools.is_empty() {
                            return view! { <li class="muted">"No tools"</li> }.into_any();
                        }
                        tools.into_iter().map(|t| { let name = t.clone(); view! { <li class="chip" data-tool=name><span class="chip-text">{t}</span></li> } }).collect_view().into_any()
                    }}
                </ul>
                <p class="tool-change-line"><span class="muted">"Last change: "</span>
                    <span class="tool-change">{field(|s| tool_change_text(s.last_tool_change.as_ref()))}</span>
                </p>
            </section>
        </div>
        <ActiveList/>
        <Picker/>
    }
}

#[component]
fn ActiveList() -> impl IntoView {
    let app = app();
    let p = expect_context::<Panel>();
    let active = Memo::new(move |_| {
        app.cap_state
            .with(|s| s.as_ref().map(|s| s.active.clone()).unwrap_or_default())
    });
    let ask_reset = move |_| {
        p.notice.set(None);
        p.confirm_reset.set(
            app.cap_state
                .with_untracked(|s| s.as_ref().map(|s| s.guard.clone())),
        );
    };
    let confirm = move |_| {
        let Some(guard) = p.confirm_reset.get_untracked() else {
            return;
        };
        p.confirm_reset.set(None);
        mutate(
            app,
            p,
            "/api/capability-state",
            json!({ "action": "reset", "guard": guard_json(&guard) }),
            "Reset: no capability is active".to_string(),
        );
    };
    view! {
        <section class="card session-active" id="session-active">
            <div class="section-head">
                <h3>"Active capabilities"</h3>
                <button id="capability-reset" class="danger"
                    disabled=move || p.busy.get() || p.confirm_reset.with(Option::is_some) || active.with(Vec::is_empty)
                    on:click=ask_reset>"Reset all"</button>
            </div>
            {move || p.confirm_reset.with(Option::is_some).then(|| view! {
                <div class="banner warn reset-confirm" role="alertdialog" aria-label="Reset all">
                    <span>"Deactivate every capability in this session?"</span>
                    <button id="capability-reset-confirm" class="danger" disabled=move || p.busy.get() on:click=confirm>"Confirm"</button>
                    <button id="capability-reset-cancel" on:click=move |_| p.confirm_reset.set(None)>"Cancel"</button>
                </div>
            })}
            {move || p.notice.get().map(|text| view! { <p class="banner warn session-notice" role="status">{text}</p> })}
            {move || active.with(Vec::is_empty).then(|| view! { <p class="muted session-empty-active">"No capability is active in this session."</p> })}
            <ul class="active-cards">
                <For each=move || active.get() key=|a| a.activation_id.clone() let:a>
                    <ActiveCard a/>
                </For>
            </ul>
        </section>
    }
}

#[component]
fn ActiveCard(a: ActiveView) -> impl IntoView {
    let app = app();
    let p = expect_context::<Panel>();
    let id = a.activation_id.clone();
    let title = a.name.clone().unwrap_or_else(|| a.source.clone());
    let deactivate = {
        let id = id.clone();
        move |_| {
            let Some(guard) = app
                .cap_state
                .with_untracked(|s| s.as_ref().map(|s| s.guard.clone()))
            else {
                return;
            };
            mutate(
                app,
                p,
                "/api/capability-state",
                json!({ "action": "disable", "activationId": id.clone(), "guard": guard_json(&guard) }),
                format!("Deactivated {id}"),
            );
        }
    };
    let content = a.content.clone();
    view! {
        <li class="active-card" data-activation-id=id.clone() data-actor=a.actor.clone()>
            <div class="section-head">
                <h4 class="active-name">{title}</h4>
                <button class="capability-deactivate" disabled=move || p.busy.get() on:click=deactivate>"Deactivate"</button>
            </div>
            <p class="active-meta">
                <span class="active-id" title="Activation id">{id.clone()}</span>
                <span class="active-source" title="Source">{a.source.clone()}</span>
                <span class="badge active-actor" title="Owner">{a.actor.clone()}</span>
            </p>
            <p class="active-tools">{patch_text(&a.tools.add, &a.tools.remove)}</p>
            {if content.is_empty() {
                view! { <p class="muted active-content-empty">"No text: this capability only changes tools."</p> }.into_any()
            } else {
                view! { <pre class="capability-content active-content">{content}</pre> }.into_any()
            }}
        </li>
    }
}

#[component]
fn Picker() -> impl IntoView {
    let app = app();
    let p = expect_context::<Panel>();
    let trusted = move || {
        app.cap_state
            .with(|s| s.as_ref().is_some_and(|s| s.trusted))
    };
    let restoring = move || {
        app.cap_state
            .with(|s| s.as_ref().is_some_and(|s| s.restoring))
    };
    let chosen = Memo::new(move |_| {
        let selected = p.selected.get();
        p.choices.with(|cs| {
            cs.iter()
                .find(|c| choice_value(c.kind, &c.id) == selected)
                .cloned()
        })
    });
    let outdated = move || {
        let seen = p.choices_guard.get();
        let now = app.cap_state.with(|s| s.as_ref().map(|s| s.guard.clone()));
        seen.is_some() && seen != now
    };
    let reason = move || -> Option<String> {
        if !trusted() {
            Some(UNTRUSTED_ENABLE.to_string())
        } else if restoring() {
            Some(RESTORING_ENABLE.to_string())
        } else if p.stale.get() {
            Some(STALE_ENABLE.to_string())
        } else {
            chosen.with(|c| c.as_ref().and_then(|c| c.problem.clone()))
        }
    };
    let enable = move |_| {
        let (Some(choice), Some(guard)) = (chosen.get_untracked(), p.choices_guard.get_untracked())
        else {
            return;
        };
        mutate(
            app,
            p,
            "/api/capability-state/enable",
            json!({
                "guard": guard_json(&guard),
                "kind": kind_name(choice.kind),
                "id": choice.id,
                "fingerprint": choice.fingerprint,
            }),
            format!("Enabled {}", choice.label),
        );
    };
    let group = move |kind: ChoiceKind, label: &'static str| {
        move || {
            let list: Vec<Choice> = p
                .choices
                .with(|cs| cs.iter().filter(|c| c.kind == kind).cloned().collect());
            (!list.is_empty()).then(|| {
                view! {
                    <optgroup label=label>
                        {list.into_iter().map(|c| {
                            let value = choice_value(c.kind, &c.id);
                            let value2 = value.clone();
                            let text = if c.label == c.id { c.id.clone() } else { format!("{} ({})", c.label, c.id) };
                            view! { <option value=value prop:selected=move || p.selected.with(|s| *s == value2)>{text}</option> }
                        }).collect_view()}
                    </optgroup>
                }
            })
        }
    };
    view! {
        <section class="card session-picker" id="session-picker">
            <div class="section-head">
                <h3>"Enable a capability"</h3>
                <button id="capability-refresh" disabled=move || p.loading.get() on:click=move |_| refresh(app, p)>"Refresh"</button>
            </div>
            {move || (!trusted()).then(|| view! { <p class="banner warn picker-untrusted" role="note">{UNTRUSTED_ENABLE}</p> })}
            {move || p.choices_error.get().map(|e| view! { <p class="banner error picker-error" role="alert">{e}</p> })}
            {move || outdated().then(|| view! { <p class="banner warn picker-outdated" role="status">{PICKER_OUTDATED}</p> })}
            <label class="field wide">
                <span class="label">"Capability"</span>
                <select id="capability-picker" disabled=move || !trusted()
                    on:change=move |e| p.selected.set(event_target_value(&e))>
                    <option value="" prop:selected=move || p.selected.with(String::is_empty)>
                        {move || if p.loading.get() { "Loading…" } else if p.choices_loaded.get() && p.choices.with(Vec::is_empty) { "Nothing to enable" } else { "Choose a capability…" }}
                    </option>
                    {group(ChoiceKind::Capability, "Library (unbound)")}
                    {group(ChoiceKind::Binding, "Current preset (bound)")}
                </select>
            </label>
            {move || chosen.get().map(|c| view! { <ChoicePreview c/> })}
            <div class="actions">
                <button id="capability-enable" class="primary"
                    disabled=move || p.busy.get() || chosen.with(Option::is_none) || reason().is_some()
                    on:click=enable>"Enable"</button>
                {move || reason().map(|r| view! { <span class="help enable-reason" id="capability-enable-reason">{r}</span> })}
            </div>
        </section>
    }
}

#[component]
fn ChoicePreview(c: Choice) -> impl IntoView {
    let content = c.content.clone();
    view! {
        <div class="choice-preview" id="capability-preview" data-kind=kind_name(c.kind) data-id=c.id.clone()>
            <div class="title-line">
                <h4 class="choice-label">{c.label.clone()}</h4>
                <span class="badge muted choice-kind">{kind_name(c.kind)}</span>
                <span class="selector choice-id">{c.id.clone()}</span>
                <span class="selector choice-fingerprint" title=c.fingerprint.clone()>{short_fingerprint(&c.fingerprint)}</span>
            </div>
            <p class="choice-tools">{patch_text(&c.tools.add, &c.tools.remove)}</p>
            {c.problem.clone().map(|text| view! { <p class="banner warn choice-problem" role="alert">{text}</p> })}
            {if content.is_empty() {
                view! { <p class="muted">"No text: this capability only changes tools."</p> }.into_any()
            } else {
                view! { <pre class="capability-content choice-content">{content}</pre> }.into_any()
            }}
        </div>
    }
}
