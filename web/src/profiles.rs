//! The agent profiles surface: a searchable list, the preflight view of one profile (what
//! applying it would set), and the profile editor (create, edit, validate, delete).
//!
//! Applying needs a live Pi session (`POST /api/profiles/:sel/apply`); without one the view
//! says so and shows the preflight. After an apply the view shows what Pi took (and what it
//! clamped); the status line shows drift since the last apply.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use forge_core::api::{Applied, CurrentChoice, ProfileCollection, ProfileValidation, ProfileView};
use forge_core::diag::{Diagnostic, Level};

use crate::api::{self, seg};
use crate::jp;
use crate::library::{self, confirm_delete, label, new_id_problem, Form, FormBanners};
use crate::profile_delegation::DelegationCard;
use crate::state::{self, app, App, Surface, Tone, NO_LIVE_SESSION};
use crate::task::spawn_while;

const THINKING: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

#[derive(Clone, Copy)]
struct Profiles {
    collection: RwSignal<ProfileCollection>,
    loaded: RwSignal<bool>,
    selected: RwSignal<Option<String>>,
    form: Form,
    scope: RwSignal<String>,
    search: RwSignal<String>,
    validation: RwSignal<Option<(String, Vec<Diagnostic>, bool)>>,
    /// The last apply's answer, by profile selector: `Ok(answer)` or `Err(message)`.
    applied: RwSignal<Option<(String, Result<Applied, String>)>>,
    applying: RwSignal<bool>,
}

impl Profiles {
    /// Whether the surface is still mounted (its signals are disposed when the user leaves it).
    fn alive(self) -> bool {
        !self.collection.is_disposed()
    }
}

fn refresh(app: App, p: Profiles) {
    spawn_while(p.collection, async move {
        match api::get_as::<ProfileCollection>("/api/profiles").await {
            Ok(v) => {
                let first_load = !p.loaded.get_untracked();
                if first_load {
                    let n = v.profiles.len();
                    app.say(
                        format!("{n} profile{}", if n == 1 { "" } else { "s" }),
                        Tone::Info,
                    );
                }
                p.collection.set(v);
                p.loaded.set(true);
                let sel = p.selected.get_untracked();
                let exists = sel.as_ref().is_some_and(|sel| entry(p, sel).is_some());
                if !exists && p.form.editing.with_untracked(Option::is_none) {
                    let first = p
                        .collection
                        .with_untracked(|c| c.profiles.first().map(|e| e.common.selector.clone()));
                    p.selected.set(first);
                }
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// The `promptStack` the profile file names (`None` for none).
fn entry_profile_stack(entry: &ProfileView) -> Option<String> {
    entry
        .profile
        .get("promptStack")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn find(c: &ProfileCollection, selector: &str) -> Option<ProfileView> {
    c.profiles
        .iter()
        .find(|e| e.common.selector == selector)
        .cloned()
}

fn entry(p: Profiles, selector: &str) -> Option<ProfileView> {
    p.collection.with_untracked(|c| find(c, selector))
}

/// The Preset choices for a profile of `scope`, as `(stored value, selector, scope)`: a
/// same-scope stack by its bare id, a global one from a project profile as `global:x`. A global
/// profile may only use global stacks.
fn stack_choices(collection: &ProfileCollection, scope: &str) -> Vec<(String, String, String)> {
    collection
        .prompt_stacks
        .iter()
        .filter(|st| scope == "project" || st.scope == "global")
        .map(|st| {
            let value = if st.scope == scope {
                st.id.clone()
            } else {
                st.selector.clone()
            };
            (value, st.selector.clone(), st.scope.clone())
        })
        .collect()
}

/// The scope of the profile being edited (the selector's, or the create scope).
fn editing_scope(p: Profiles) -> String {
    match p.form.selector() {
        Some(sel) => sel
            .split_once(':')
            .map_or("project", |(scope, _)| scope)
            .to_string(),
        None => p.scope.get(),
    }
}

#[component]
pub fn ProfilesSurface() -> impl IntoView {
    let app = app();
    let p = Profiles {
        collection: RwSignal::new(ProfileCollection::default()),
        loaded: RwSignal::new(false),
        selected: RwSignal::new(None),
        form: Form::new(),
        scope: RwSignal::new("project".into()),
        search: RwSignal::new(String::new()),
        validation: RwSignal::new(None),
        applied: RwSignal::new(None),
        applying: RwSignal::new(false),
    };
    provide_context(p);
    // Refetch on every profile or stack change event (no polling).
    Effect::new(move |_| {
        app.profile_events.get();
        refresh(app, p);
    });
    // An external change to the profile being edited: reload a clean form, keep a dirty one.
    p.form
        .follow(app.profile_change, move |sel| start_edit(p, sel));
    Effect::new(move |_| app.form_dirty.set(p.form.dirty()));
    app.form_save
        .set(Some(Callback::new(move |_| save(app, p, None))));
    on_cleanup(move || {
        app.form_dirty.set(false);
        app.form_save.set(None);
    });

    view! {
        <div class="profiles">
            <ProfileSidebar/>
            <main class="workspace">
                <ProfileStatus/>
                {move || p.collection.with(auto_conflict).map(|text| view! { <p class="banner warn auto-conflict" role="status">{text}</p> })}
                {move || {
                    if p.form.editing.with(Option::is_some) {
                        return view! { <ProfileEditor/> }.into_any();
                    }
                    match p.selected.get().and_then(|sel| p.collection.with(|c| find(c, &sel))) {
                        Some(e) => view! { <ProfileDetail entry=e/> }.into_any(),
                        None => view! {
                            <div class="empty-state">
                                {move || if p.loaded.get() && p.collection.with(|c| c.profiles.is_empty()) {
                                    view! { <h2>"No agent profiles found."</h2><p>"A profile sets the model, thinking level and Preset in one step."</p> }.into_any()
                                } else {
                                    view! { <p>"Select a profile."</p> }.into_any()
                                }}
                                <button class="primary" on:click=move |_| new_profile(p)>"New profile"</button>
                            </div>
                        }.into_any(),
                    }
                }}
            </main>
        </div>
    }
}

/// A8: when several profiles set `autoActivate`, which one a fresh session applies (or that
/// none does).
fn auto_conflict(c: &ProfileCollection) -> Option<String> {
    if c.auto_claimants.len() < 2 {
        return None;
    }
    let outcome = match &c.auto_applies {
        Some(sel) => format!("Only {sel} applies when a session starts."),
        None => "None applies when a session starts.".into(),
    };
    Some(format!(
        "Several profiles set autoActivate: {}. {outcome}",
        c.auto_claimants.join(", ")
    ))
}

/// Whether `selector` is the profile a fresh session applies.
fn auto_applies(p: Profiles, selector: &str) -> bool {
    p.collection
        .with(|c| c.auto_applies.as_deref() == Some(selector))
}

/// The badge of the profile a fresh session applies.
fn auto_badge() -> impl IntoView {
    view! { <span class="badge active auto-applies" title="Applied automatically when a Pi session starts">"Auto-applies"</span> }
}

/// Why a model is suspicious: Pi reports its models and this one is not among them. Nothing
/// when Pi reports none (no live session) or the model is not filled in yet.
fn unknown_model(c: &ProfileCollection, provider: &str, id: &str) -> Option<String> {
    let (provider, id) = (provider.trim(), id.trim());
    if c.models.is_empty() || provider.is_empty() || id.is_empty() {
        return None;
    }
    let known = c
        .models
        .iter()
        .any(|m| m.provider == provider && m.id == id);
    (!known).then(|| format!("Model {provider}/{id} is not among the models Pi reports."))
}

/// Opens a Preset in the Presets surface (asking first when this surface has unsaved work).
fn open_preset(app: App, selector: String) {
    app.guard("Opening the Preset", move || {
        app.surface.set(Surface::Presets);
        state::open_stack(app, selector.clone());
    });
}

fn new_profile(p: Profiles) {
    let draft = json!({
        "schemaVersion": 1, "type": "pi-forge.agent-profile", "id": "",
        "model": { "provider": "", "id": "" }, "thinkingLevel": "medium", "promptStack": null
    });
    p.validation.set(None);
    p.form.open_new(draft);
}

fn start_edit(p: Profiles, selector: String) {
    spawn_while(p.collection, async move {
        if let Ok(v) =
            api::get_as::<ProfileView>(&format!("/api/profiles/{}", seg(&selector))).await
        {
            p.validation.set(None);
            p.form.open_saved(
                selector,
                v.profile,
                Some(v.common.revision),
                v.common.unreadable,
            );
        }
    });
}

#[component]
fn ProfileSidebar() -> impl IntoView {
    let app = app();
    let p = expect_context::<Profiles>();
    let rows = move || {
        let q = p.search.get().trim().to_lowercase();
        p.collection.with(|c| {
            c.profiles
                .iter()
                .filter(|e| {
                    q.is_empty()
                        || e.common.id.to_lowercase().contains(&q)
                        || jp::get_str(&e.profile, "/name").to_lowercase().contains(&q)
                })
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    let select = move |sel: String| {
        app.guard("Opening another profile", move || {
            p.form.editing.set(None);
            p.selected.set(Some(sel.clone()));
        });
    };
    view! {
        <aside class="sidebar" aria-label="Agent profiles">
            <div class="sidebar-head">
                <input class="search" type="search" placeholder="Filter profiles" aria-label="Filter profiles"
                    prop:value=move || p.search.get() on:input=move |e| p.search.set(event_target_value(&e))/>
                <button class="new-profile" on:click=move |_| app.guard("Creating a profile", move || new_profile(p))>"New"</button>
            </div>
            <ul class="stack-list profile-list">
                {move || {
                    let rows = rows();
                    if rows.is_empty() {
                        return view! { <li class="empty">{move || if p.loaded.get() { "No agent profiles found." } else { "Loading…" }}</li> }.into_any();
                    }
                    rows.into_iter().map(|e| {
                        let sel = e.common.selector.clone();
                        let sel2 = sel.clone();
                        let is_selected = move || p.selected.get().as_deref() == Some(sel2.as_str());
                        let name = jp::get_str(&e.profile, "/name");
                        let id = e.common.id.clone();
                        let errors = e.common.errors;
                        let warnings = e.common.warnings;
                        let applicable = e.preview.applicable;
                        view! {
                            <li>
                                <button class="stack-row profile-row" class:selected=is_selected data-selector=sel.clone()
                                    on:click=move |_| select(sel.clone())>
                                    <span class="row-title">{if name.is_empty() { id.clone() } else { name }}</span>
                                    <span class="row-id">{e.common.selector.clone()}</span>
                                    <span class="row-badges">
                                        <span class="badge muted">{e.common.scope.clone()}</span>
                                        {auto_applies(p, &e.common.selector).then(auto_badge)}
                                    </span>
                                    // What it sets, then its state: the badges have the row's width
                                    // here, so they never squeeze the id into an ellipsis.
                                    <span class="row-detail">
                                        <span class="row-model">{model_line(&e.profile)}</span>
                                        {(!applicable).then(|| view! { <span class="badge error">"preflight failed"</span> })}
                                        {(errors > 0).then(|| { let t = count_label(errors, "error"); view! { <span class="badge error" title=t.clone() aria-label=t>{errors}" ✕"</span> } })}
                                        {(warnings > 0).then(|| { let t = count_label(warnings, "warning"); view! { <span class="badge warning" title=t.clone() aria-label=t>{warnings}" !"</span> } })}
                                    </span>
                                </button>
                            </li>
                        }
                    }).collect_view().into_any()
                }}
            </ul>
        </aside>
    }
}

/// The row's "provider/model · thinking" line (what applying the profile sets), from the file.
fn model_line(profile: &Value) -> String {
    let provider = jp::get_str(profile, "/model/provider");
    let model = jp::get_str(profile, "/model/id");
    let thinking = jp::get_str(profile, "/thinkingLevel");
    let model = match (provider.is_empty(), model.is_empty()) {
        (_, true) => "no model".to_string(),
        (true, false) => model,
        (false, false) => format!("{provider}/{model}"),
    };
    if thinking.is_empty() {
        model
    } else {
        format!("{model} · {thinking}")
    }
}

/// "1 error", "2 warnings".
fn count_label(k: usize, noun: &str) -> String {
    format!("{k} {noun}{}", if k == 1 { "" } else { "s" })
}

/// `provider/id` of a model, or `none` when there is none.
fn model_text(current: &CurrentChoice, none: &str) -> String {
    current
        .model
        .as_ref()
        .map_or_else(|| none.to_string(), |m| m.label())
}

/// A drift value: a model object as `provider/id`, a string as it is, anything else `none`.
fn drift_text(v: &Value) -> String {
    match v {
        Value::Object(m) => format!(
            "{}/{}",
            m.get("provider").and_then(Value::as_str).unwrap_or(""),
            m.get("id").and_then(Value::as_str).unwrap_or("")
        ),
        Value::String(x) => x.clone(),
        _ => "none".into(),
    }
}

/// The class and the rows of a diagnostics list.
fn diagnostic_rows(diags: Vec<Diagnostic>) -> impl IntoView {
    diags
        .into_iter()
        .map(|d| {
            let level = d.level.as_str();
            view! {
                <li class=format!("diagnostic {level}")><span class="level">{level}</span><span class="message">{d.message}</span></li>
            }
        })
        .collect_view()
}

/// What Pi runs with now, the last applied profile and what drifted since.
#[component]
fn ProfileStatus() -> impl IntoView {
    let app = app();
    let p = expect_context::<Profiles>();
    let line = move || {
        p.collection.with(|c| {
            let cur = &c.status.current;
            let model = model_text(cur, "no model");
            let thinking = cur
                .thinking_level
                .clone()
                .unwrap_or_else(|| "thinking unknown".into());
            let stack = cur
                .prompt_stack
                .clone()
                .unwrap_or_else(|| "no Preset".into());
            let last = c
                .status
                .last_applied
                .as_ref()
                .map(|l| {
                    // The provenance is what Pi's session recorded: read leniently.
                    let id = l
                        .provenance
                        .get("profileId")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let scope = l
                        .provenance
                        .get("scope")
                        .and_then(Value::as_str)
                        .unwrap_or("project");
                    format!("Last applied {}", label(scope, id))
                })
                .unwrap_or_else(|| "No profile has been applied".into());
            (format!("{model} · {thinking} · {stack}"), last)
        })
    };
    // "model changed since applied": each drifted field with what was applied and what is now.
    let drift = move || {
        p.collection.with(|c| {
            let Some(last) = &c.status.last_applied else {
                return Vec::new();
            };
            let d = &last.drift;
            [
                ("model", "model", &d.model),
                ("thinkingLevel", "thinking level", &d.thinking_level),
                ("promptStack", "Preset", &d.prompt_stack),
            ]
            .into_iter()
            .filter(|(_, _, d)| d.changed)
            .map(|(key, name, d)| {
                (
                    key,
                    format!("{name} changed since applied"),
                    format!(
                        "Applied: {}; now: {}",
                        drift_text(&d.expected),
                        drift_text(&d.actual)
                    ),
                )
            })
            .collect::<Vec<_>>()
        })
    };
    let source_changed = move || {
        p.collection.with(|c| {
            c.status
                .last_applied
                .as_ref()
                .and_then(|l| match l.source_state.as_str() {
                    "changed" => Some("profile file changed since applied"),
                    "missing" => Some("profile file is gone"),
                    _ => None,
                })
        })
    };
    view! {
        <section class="profile-status" aria-label="Current session">
            <span class="label">"Now"</span>
            <span class="current">{move || line().0}</span>
            <span class="last">{move || line().1}</span>
            {move || drift().into_iter().map(|(key, text, tip)| {
                let label = format!("{text}. {tip}");
                view! { <span class="badge warn drift" data-field=key title=tip aria-label=label>{text}</span> }
            }).collect_view()}
            {move || source_changed().map(|text| view! { <span class="badge muted source-state">{text}</span> })}
            <Show when=move || !app.live_host.get()>
                <span class="badge muted no-live" title=NO_LIVE_SESSION>"no live Pi session"</span>
            </Show>
        </section>
    }
}

/// Applies the profile to the live Pi session and keeps the answer for the detail view.
fn apply(app: App, p: Profiles, selector: String, id: String) {
    if p.applying.get_untracked() {
        return;
    }
    p.applying.set(true);
    spawn_local(async move {
        let result = api::post_as::<Applied>(
            &format!("/api/profiles/{}/apply", seg(&selector)),
            &json!({}),
        )
        .await;
        // Pi applied it (or not) whether or not the surface is still open: the status line says
        // so either way; the surface's own state only while it is mounted.
        let alive = p.alive();
        if alive {
            p.applying.set(false);
        }
        match result {
            Ok(v) => {
                let notes = v.notes.len();
                app.say(
                    if notes == 0 {
                        format!("Applied {id} to Pi")
                    } else {
                        format!("Applied {id} to Pi, with {}", count_label(notes, "note"))
                    },
                    Tone::Ok,
                );
                if alive {
                    p.applied.set(Some((selector, Ok(v))));
                    refresh(app, p);
                }
            }
            Err(e) => {
                let message = state::live_failure(app, &e);
                app.say(format!("Not applied: {message}"), Tone::Error);
                if alive {
                    p.applied.set(Some((selector, Err(message))));
                }
            }
        }
    });
}

/// What the last Apply of `selector` did: the values Pi took and its notes, or why it failed.
fn apply_outcome(p: Profiles, selector: String) -> impl IntoView {
    move || {
        let (sel, result) = p.applied.get()?;
        if sel != selector {
            return None;
        }
        Some(match result {
            Ok(v) => {
                let applied = &v.applied;
                // Pi's own model object, as it answered.
                let model = if applied.model.is_object() {
                    drift_text(&applied.model)
                } else {
                    "no model".into()
                };
                let stack = applied
                    .prompt_stack
                    .clone()
                    .unwrap_or_else(|| "none".into());
                let thinking = applied.thinking_level.clone().unwrap_or_default();
                let tools = applied.tools();
                let notes = v.notes.clone();
                view! {
                    <section class="banner apply-result" role="status">
                        <strong>"Applied to Pi"</strong>
                        <dl class="applied">
                            <dt>"Model"</dt><dd class="applied-model">{model}</dd>
                            <dt>"Thinking"</dt><dd class="applied-thinking">{thinking}</dd>
                            <dt>"Preset"</dt><dd class="applied-stack">{stack}</dd>
                            <dt>"Tools"</dt><dd class="applied-tools">{if tools.is_empty() { "none".to_string() } else { tools.join(", ") }}</dd>
                        </dl>
                        {(!notes.is_empty()).then(|| view! {
                            <ul class="apply-notes">{notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
                        })}
                        <button class="dismiss" on:click=move |_| p.applied.set(None)>"Dismiss"</button>
                    </section>
                }
                .into_any()
            }
            Err(message) => view! {
                <div class="banner error apply-error" role="alert">
                    <span>{format!("Not applied. {message}")}</span>
                    <button class="dismiss" on:click=move |_| p.applied.set(None)>"Dismiss"</button>
                </div>
            }
            .into_any(),
        })
    }
}

#[component]
fn ProfileDetail(entry: ProfileView) -> impl IntoView {
    let app = app();
    let p = expect_context::<Profiles>();
    let selector = entry.common.selector.clone();
    let preview = &entry.preview;
    let applicable = preview.applicable;
    let target = &preview.target;
    let current = &preview.current;
    let stack_text = |v: &CurrentChoice| v.prompt_stack.clone().unwrap_or_else(|| "none".into());
    // An unresolved reference is shown as written, so the user sees what to fix.
    let wanted = entry_profile_stack(&entry);
    let target_stack = match (target.prompt_stack.clone(), wanted) {
        (Some(resolved), _) => resolved,
        (None, Some(written)) => format!("{written} (not found)"),
        (None, None) => "none".into(),
    };
    let thinking_text = |v: Option<&String>| v.cloned().unwrap_or_else(|| "—".into());
    let target_model = target.model.label();
    let target_thinking = target.thinking_level.clone();
    let card = format!("{target_model} · {target_thinking} · {target_stack}");
    let diagnostics = entry.common.diagnostics.clone();
    let mut preview_diags: Vec<Diagnostic> = preview
        .diagnostics
        .iter()
        .filter(|d| !diagnostics.contains(d))
        .cloned()
        .collect();
    let model_warning = p
        .collection
        .with_untracked(|c| unknown_model(c, &target.model.provider, &target.model.id));
    preview_diags.extend(model_warning.map(|m| Diagnostic::warning(m).with_field("model")));
    let tools = target.effective_tools.clone();
    let name = jp::get_str(&entry.profile, "/name");
    let description = jp::get_str(&entry.profile, "/description");
    let revision = entry.common.revision.clone();
    let id = label(&entry.common.scope, &entry.common.id);
    let path = entry.common.path.clone();
    let sel_edit = selector.clone();
    let sel_del = selector.clone();
    let sel_apply = selector.clone();
    let apply_id = id.clone();
    let outcome = apply_outcome(p, selector.clone());
    let delete = move |_| {
        confirm_delete(
            app,
            p.collection,
            "profiles",
            sel_del.clone(),
            revision.clone(),
            id.clone(),
            path.clone(),
            move || {
                p.selected.set(None);
                refresh(app, p);
            },
        );
    };
    let diag_list = diagnostics
        .into_iter()
        .chain(preview_diags)
        .collect::<Vec<_>>();
    view! {
        <div class="profile-detail">
            <div class="editor-head">
                <div class="title-line">
                    <h2>{if name.is_empty() { entry.common.id.clone() } else { name }}</h2>
                    <code class="selector">{selector.clone()}</code>
                    {auto_applies(p, &selector).then(auto_badge)}
                </div>
                <div class="actions">
                    <button class="primary apply" disabled=move || !applicable || !app.live_host.get() || p.applying.get()
                        aria-describedby="apply-note"
                        title=move || if app.live_host.get() { "Apply this profile to the live Pi session" } else { NO_LIVE_SESSION }
                        on:click=move |_| apply(app, p, sel_apply.clone(), apply_id.clone())>"Apply"</button>
                    <button class="edit" on:click=move |_| start_edit(p, sel_edit.clone())>"Edit"</button>
                    <button class="delete danger" on:click=delete>"Delete…"</button>
                </div>
            </div>
            {(!description.is_empty()).then(|| view! { <p class="description">{description.clone()}</p> })}
            {outcome}
            // Why Apply is disabled, in words (a disabled button's tooltip is out of reach for
            // keyboard and touch users).
            {move || {
                let note = if !applicable {
                    "Apply is off until the preflight passes: see the problems below."
                } else if !app.live_host.get() {
                    "Apply needs a live Pi session: start Pi in this project with the pi-forge extension (pi-forge pi install). The preflight below shows what it would do."
                } else {
                    return None;
                };
                Some(view! { <p class="help apply-note" id="apply-note">{note}</p> })
            }}
            <div class=if applicable { "preflight ok" } else { "preflight failed" }>
                <strong>{if applicable { "Ready to apply" } else { "Preflight failed" }}</strong>
                <span class="target-card">{card}</span>
            </div>
            <table class="transition">
                <thead><tr><th></th><th>"Now"</th><th>"After applying"</th></tr></thead>
                <tbody>
                    <tr><th>"Model"</th><td>{model_text(current, "—")}</td><td>{target_model}</td></tr>
                    <tr><th>"Thinking"</th><td>{thinking_text(current.thinking_level.as_ref())}</td><td>{target_thinking}</td></tr>
                    <tr><th>"Preset"</th><td>{stack_text(current)}</td><td>{match target.prompt_stack.clone() {
                        Some(sel) => { let open = sel.clone(); view! { <button class="link open-preset" title="Open this Preset in the Presets surface" on:click=move |_| open_preset(app, open.clone())>{sel}</button> }.into_any() }
                        None => target_stack.clone().into_any(),
                    }}</td></tr>
                </tbody>
            </table>
            <section class="card">
                <h3>"Effective tools"</h3>
                <ul class="chips">{tools.into_iter().map(|t| view! { <li class="chip"><span class="chip-text">{t}</span></li> }).collect_view()}</ul>
            </section>
            <DelegationCard selector=selector.clone()/>
            {(!diag_list.is_empty()).then(|| view! {
                <section class="card">
                    <h3>"Diagnostics"</h3>
                    <ul class="diagnostic-list">{diagnostic_rows(diag_list)}</ul>
                </section>
            })}
            <p class="file-path">{entry.common.path.clone()}</p>
        </div>
    }
}

fn save(app: App, p: Profiles, force: Option<String>) {
    let draft = p.form.draft.get_untracked();
    let scope = untrack(|| editing_scope(p));
    let name = label(&scope, &jp::get_str(&draft, "/id"));
    library::save(
        app,
        p.form,
        "profiles",
        "profile",
        draft,
        scope,
        name,
        force,
        move |selector| {
            p.selected.set(Some(selector));
            refresh(app, p);
        },
    );
}

#[component]
fn ProfileEditor() -> impl IntoView {
    let app = app();
    let p = expect_context::<Profiles>();
    let editing = move || p.form.editing.get();
    let is_new = move || editing().is_some_and(|e| e.selector.is_none());
    let unreadable = move || editing().and_then(|e| e.unreadable);
    let get = move |path: &'static str| p.form.draft.with(|d| jp::get_str(d, path));
    let set = move |path: &'static str, v: Option<Value>| {
        p.form.draft.update(|d| jp::set(d, path, v));
        p.validation.set(None);
    };
    let text_input = move |path: &'static str,
                           name: &'static str,
                           label: &'static str,
                           list: Option<&'static str>| {
        view! {
            <label class="field">
                <span class="label">{label}</span>
                <input type="text" name=name list=list prop:value=move || get(path)
                    on:input=move |e| { let v = event_target_value(&e); set(path, if v.is_empty() && !path.starts_with("/model") && path != "/id" { None } else { Some(Value::String(v)) }); }/>
            </label>
        }
    };
    let validate = move |_| {
        let draft = p.form.draft.get_untracked();
        let mut body = json!({ "profile": draft, "scope": p.scope.get_untracked() });
        if let Some(sel) = untrack(|| p.form.selector()) {
            body["existingId"] = json!(sel);
        }
        spawn_while(p.collection, async move {
            match api::post_as::<ProfileValidation>("/api/profiles/validate", &body).await {
                Ok(v) => {
                    let valid = v.valid;
                    let ready = valid && v.preview.applicable;
                    let (errors, warnings) = (v.errors, v.warnings);
                    let plural = |k: usize| if k == 1 { "" } else { "s" };
                    let text = if errors > 0 || !valid {
                        format!("{errors} validation error{}", plural(errors))
                    } else if warnings > 0 {
                        format!("Valid with {warnings} warning{}", plural(warnings))
                    } else if ready {
                        "Valid and ready to apply".into()
                    } else {
                        "Valid, but it cannot be applied yet".into()
                    };
                    p.validation.set(Some((text, v.diagnostics, ready)));
                }
                Err(e) => app.fail(&e),
            }
        });
    };
    let cancel = move |_| p.form.cancel(app, "profile");
    let id_problem = move || {
        let id = get("/id");
        is_new()
            .then(|| {
                let scope = p.scope.get();
                let taken = p.collection.with(|c| {
                    c.profiles
                        .iter()
                        .any(|e| e.common.id == id && e.common.scope == scope)
                });
                new_id_problem(&id, &scope, "profile", taken)
            })
            .flatten()
    };
    // The choices as the file stores them: a same-scope stack by its bare id, a global one from
    // a project profile as `global:x`. A global profile may only use global stacks.
    let stacks = move || p.collection.with(|c| stack_choices(c, &editing_scope(p)));
    let models = move || {
        p.collection.with(|c| {
            c.models
                .iter()
                .map(|m| (m.provider.clone(), m.id.clone()))
                .collect::<Vec<_>>()
        })
    };
    // Opening the form moves focus into it (the Edit/New button that had it is gone): the id
    // for a new profile, the name otherwise.
    crate::dom::focus_later(if is_new() {
        ".profile-editor input[name=profile-id]".into()
    } else {
        ".profile-editor input[name=profile-name]".into()
    });
    view! {
        <div class="profile-editor">
            <div class="editor-head">
                <div class="title-line">
                    <h2>{move || if is_new() { "New profile".to_string() } else { format!("Edit {}", editing().and_then(|e| e.selector).unwrap_or_default()) }}</h2>
                    <Show when=move || p.form.dirty()><span class="badge dirty">"unsaved"</span></Show>
                </div>
                <div class="actions">
                    <button class="primary save-profile" disabled=move || !(p.form.dirty() || is_new()) || id_problem().is_some() || unreadable().is_some()
                        on:click=move |_| save(app, p, None)>{move || if is_new() { "Create" } else { "Save" }}</button>
                    <button class="validate-profile" on:click=validate>"Validate"</button>
                    <button class="cancel" on:click=cancel>"Cancel"</button>
                </div>
            </div>
            <FormBanners form=p.form noun="profile"
                reload=move |sel: String| start_edit(p, sel)
                overwrite=move |rev: String| save(app, p, Some(rev))/>
            <div class="grid">
                <label class="field">
                    <span class="label">"Profile ID"</span>
                    <input type="text" name="profile-id" readonly=move || !is_new() class:readonly=move || !is_new()
                        prop:value=move || get("/id") on:input=move |e| set("/id", Some(Value::String(event_target_value(&e))))/>
                    {move || id_problem().filter(|_| !get("/id").is_empty()).map(|e| view! { <span class="field-error">{e}</span> })}
                    <Show when=move || !is_new()>
                        <span class="field-note">"The file name: fixed once created."</span>
                    </Show>
                </label>
                {text_input("/name", "profile-name", "Name", None)}
                {text_input("/model/provider", "profile-provider", "Provider", Some("model-providers"))}
                <label class="field">
                    <span class="label">"Model"</span>
                    <input type="text" name="profile-model" list="model-ids" prop:value=move || get("/model/id")
                        on:input=move |e| set("/model/id", Some(Value::String(event_target_value(&e))))/>
                    // A typo shows at once; a warning, so it never blocks a save.
                    {move || {
                        let warning = p.collection.with(|c| unknown_model(c, &get("/model/provider"), &get("/model/id")));
                        warning.map(|w| view! { <span class="field-note field-warning model-warning" role="status">{w}</span> })
                    }}
                </label>
                <label class="field">
                    <span class="label">"Thinking level"</span>
                    <select name="profile-thinking" prop:value=move || get("/thinkingLevel")
                        on:change=move |e| set("/thinkingLevel", Some(Value::String(event_target_value(&e))))>
                        {THINKING.iter().map(|t| view! { <option value=*t>{*t}</option> }).collect_view()}
                    </select>
                </label>
                <label class="field">
                    <span class="label">"Preset"</span>
                    <select name="profile-stack"
                        prop:value=move || p.form.draft.with(|d| d.get("promptStack").and_then(Value::as_str).unwrap_or("").to_string())
                        on:change=move |e| { let v = event_target_value(&e); set("/promptStack", Some(if v.is_empty() { Value::Null } else { Value::String(v) })); }>
                        <option value="">"(none: no Preset)"</option>
                        {move || stacks().into_iter().map(|(value, sel, _scope)| view! { <option value=value>{sel}</option> }).collect_view()}
                        {move || {
                            let cur = p.form.draft.with(|d| d.get("promptStack").and_then(Value::as_str).unwrap_or("").to_string());
                            let listed = stacks().iter().any(|(value, _, _)| *value == cur);
                            (!cur.is_empty() && !listed).then(|| view! { <option value=cur.clone()>{format!("{cur} (not found)")}</option> })
                        }}
                    </select>
                    {move || {
                        let cur = p.form.draft.with(|d| d.get("promptStack").and_then(Value::as_str).unwrap_or("").to_string());
                        stacks().into_iter().find(|(value, _, _)| *value == cur).map(|(_, sel, _)| view! {
                            <button type="button" class="link open-preset" on:click=move |_| open_preset(app, sel.clone())>"Open this Preset"</button>
                        })
                    }}
                </label>
                <Show when=is_new>
                    <label class="field">
                        <span class="label">"Scope"</span>
                        <select name="profile-scope" prop:value=move || p.scope.get() on:change=move |e| {
                            let scope = event_target_value(&e);
                            // A Preset the new scope cannot use is cleared, not kept dangling.
                            let cur = p.form.draft.with_untracked(|d| d.get("promptStack").and_then(Value::as_str).map(str::to_string));
                            let usable = cur.as_ref().is_none_or(|cur| p.collection.with_untracked(|c| stack_choices(c, &scope)).iter().any(|(v, _, _)| v == cur));
                            if !usable { set("/promptStack", Some(Value::Null)); }
                            p.scope.set(scope);
                        }>
                            <option value="project">"Project"</option>
                            <option value="global">"Global"</option>
                        </select>
                    </label>
                </Show>
                <label class="check">
                    <input type="checkbox" name="profile-auto" prop:checked=move || p.form.draft.with(|d| jp::get_bool(d, "/autoActivate").unwrap_or(false))
                        on:change=move |e| set("/autoActivate", if event_target_checked(&e) { Some(Value::Bool(true)) } else { None })/>
                    <span>"Apply automatically when a session starts"</span>
                </label>
            </div>
            <label class="field wide">
                <span class="label">"Description"</span>
                <textarea name="profile-description" rows="2" prop:value=move || get("/description")
                    on:input=move |e| { let v = event_target_value(&e); set("/description", if v.is_empty() { None } else { Some(Value::String(v)) }); }></textarea>
            </label>
            <datalist id="model-providers">{move || { let mut ps: Vec<String> = models().into_iter().map(|m| m.0).collect(); ps.dedup(); ps.into_iter().map(|x| view! { <option value=x/> }).collect_view() }}</datalist>
            <datalist id="model-ids">{move || {
                // The typed provider's models (all of them while the provider is not one of Pi's).
                let provider = get("/model/provider");
                let all = models();
                let known = all.iter().any(|m| m.0 == provider);
                all.into_iter().filter(|m| !known || m.0 == provider).map(|m| view! { <option value=m.1/> }).collect_view()
            }}</datalist>
            {move || p.validation.get().map(|(text, diags, ready)| {
                // Red only for errors; valid with warnings (or not applicable yet) is amber.
                let warn = !ready && !diags.iter().any(|d| d.level == Level::Error);
                view! {
                <section class="validation" class:ok=ready class:warn=warn role="status">
                    <strong class="validation-result">{text}</strong>
                    <ul class="diagnostic-list">{diagnostic_rows(diags)}</ul>
                </section>
            }})}
        </div>
    }
}
