//! In-app dialogs: confirm, new Preset (template, scope, live id check), fork, import
//! (native or SillyTavern, with the migration report before anything is written).

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use forge_core::api::{ImportPreview, StackView};
use forge_core::diag::Level;

use crate::api::{self, seg};
use crate::state::{self, app, App, Dialog, Scope, Tone};
use crate::task::spawn_while;

/// The New, Fork and Import dialogs (loaded on demand, see `split`).
pub(crate) fn stack_dialog_body(dialog: Dialog) -> AnyView {
    match dialog {
        Dialog::NewStack => view! { <NewStackDialog/> }.into_any(),
        Dialog::Fork => view! { <ForkDialog/> }.into_any(),
        Dialog::Import => view! { <ImportDialog/> }.into_any(),
        Dialog::Confirm { .. } => ().into_any(),
    }
}

/// The server's refusal of the dialog's last attempt, inside the dialog (which stays open).
fn failed_banner(failed: RwSignal<Option<String>>) -> impl IntoView {
    move || {
        failed.get().map(|message| {
            view! { <p class="banner error dialog-error" role="alert">{format!("Not created: {message}")}</p> }
        })
    }
}

/// Why `id` cannot be created in `scope`, if it cannot.
pub fn id_problem(app: App, id: &str, scope: &str) -> Option<String> {
    let taken = app
        .stacks
        .with(|rows| rows.iter().any(|r| r.id == id && r.scope == scope));
    crate::library::new_id_problem(id, scope, "Preset", taken)
}

/// An id input with its live check ("Available." or the problem).
fn id_field(
    name: &'static str,
    label: &'static str,
    autofocus: bool,
    id: RwSignal<String>,
    problem: impl Fn() -> Option<String> + Copy + Send + Sync + 'static,
) -> impl IntoView {
    view! {
        <label class="field">
            <span class="label">{label}</span>
            <input type="text" name=name autofocus=autofocus prop:value=move || id.get() on:input=move |e| id.set(event_target_value(&e))
                class:invalid=move || problem().is_some()/>
            <span class="field-note" class:field-error=move || problem().is_some()>{move || problem().unwrap_or_else(|| "Available.".into())}</span>
        </label>
    }
}

/// The "activate it" checkbox of the create dialogs. Activating needs a live Pi session:
/// without one the box is off and disabled, and a note says why.
fn activate_check(app: App, activate: RwSignal<bool>, label: &'static str) -> impl IntoView {
    let live = move || app.live_host.get();
    view! {
        <label class="check">
            <input type="checkbox" name="activate" aria-describedby="activate-note"
                disabled=move || !live()
                prop:checked=move || live() && activate.get()
                on:change=move |e| activate.set(event_target_checked(&e))/>
            <span>{label}</span>
        </label>
        <Show when=move || !live()>
            <p class="help activate-note" id="activate-note">
                "No live Pi session: the Preset is saved, not activated. Start Pi with the pi-forge extension (pi-forge pi install) to activate it."
            </p>
        </Show>
    }
}

/// Whether a create dialog may ask for activation (the box is checked and a session is live).
fn wants_activation(app: App, activate: RwSignal<bool>) -> bool {
    app.live_host.get_untracked() && activate.get_untracked()
}

/// The status after a create or fork that asked to activate: the answer says whether the live
/// session took it.
fn created_status(app: App, done: String, view: &StackView, asked: bool) {
    let active = view.active;
    if asked && !active {
        app.say(
            format!("{done}; not activated: the live Pi session did not take it"),
            Tone::Error,
        );
    } else if asked {
        app.say(format!("{done} and activated it in Pi"), Tone::Ok);
    } else {
        app.say(done, Tone::Ok);
    }
}

fn scope_select(scope: RwSignal<String>) -> impl IntoView {
    view! {
        <label class="field">
            <span class="label">"Scope"</span>
            <select name="scope" prop:value=move || scope.get() on:change=move |e| scope.set(event_target_value(&e))>
                <option value="project">"Project (.pi/forge)"</option>
                <option value="global">"Global (~/.pi/forge)"</option>
            </select>
        </label>
    }
}

#[component]
fn NewStackDialog() -> impl IntoView {
    let app = app();
    let id = RwSignal::new(String::new());
    let name = RwSignal::new(String::new());
    let scope = RwSignal::new(app.scope.get_untracked().as_str().to_string());
    let kind = RwSignal::new("pi-mirror".to_string());
    let activate = RwSignal::new(true);
    let busy = RwSignal::new(false);
    // What the server refused, shown in the dialog, which stays open (not only the status line).
    let failed = RwSignal::new(None::<String>);
    let problem = move || id_problem(app, id.get().trim(), &scope.get());
    // The open Preset's unsaved draft stays in this browser's draft store when the new one
    // opens: opening it again offers the draft back.
    let ed = app.editor;
    let unsaved = ed
        .dirty
        .get_untracked()
        .then(|| ed.loaded.get_untracked())
        .flatten()
        .filter(|_| !ed.file_gone.get_untracked());
    let unsaved_id = unsaved.as_ref().map(|l| l.id.clone());
    let create = move |_| {
        if problem().is_some() || busy.get_untracked() {
            return;
        }
        let keep_first = unsaved.clone();
        let id_v = id.get_untracked().trim().to_string();
        let scope_v = scope.get_untracked();
        let asked = wants_activation(app, activate);
        let body = json!({
            "stack": forge_core::stack::templates::template(&kind.get_untracked(), &id_v, &name.get_untracked()),
            "scope": scope_v,
            "activate": asked,
        });
        busy.set(true);
        spawn_local(async move {
            // A write answers `Saved<StackView>`; its `ok` is not needed here (see `api::read`).
            match api::post_as::<StackView>("/api/stacks", &body).await {
                Ok(view) => {
                    app.dialog.set(None);
                    if let Some(l) = &keep_first {
                        ed.draft.with_untracked(|d| {
                            crate::drafts::keep(&l.path, &l.revision, &l.saved, d)
                        });
                    }
                    app.scope
                        .set(Scope::parse(&scope_v).unwrap_or(Scope::Project));
                    state::apply_view(app, &view, false);
                    created_status(app, format!("Created {id_v}"), &view, asked);
                    state::refresh_stacks(app);
                }
                Err(e) => {
                    // The dialog may have been closed meanwhile.
                    if !failed.is_disposed() {
                        busy.set(false);
                        failed.set(Some(e.message.clone()));
                    }
                    app.fail(&e);
                }
            }
        });
    };
    view! {
        <h2 id="dialog-title">"New Preset"</h2>
        <form class="dialog-form" on:submit=move |e| { e.prevent_default(); create(()); }>
            {failed_banner(failed)}
            {unsaved_id.map(|open| view! {
                <p class="banner info kept-note">{format!("Your unsaved changes to {open} stay in this browser: opening {open} again offers them.")}</p>
            })}
            <label class="field">
                <span class="label">"Preset ID"</span>
                <input type="text" name="new-id" autofocus placeholder="e.g. reviewer" autocomplete="off"
                    class:invalid=move || !id.get().is_empty() && problem().is_some()
                    prop:value=move || id.get() on:input=move |e| id.set(event_target_value(&e))/>
                <span class="field-note" class:field-error=move || !id.get().is_empty() && problem().is_some()>
                    {move || if id.get().is_empty() { "Letters, digits, dot, dash and underscore; it becomes the file name.".to_string() } else { problem().unwrap_or_else(|| "Available.".into()) }}
                </span>
            </label>
            <label class="field">
                <span class="label">"Name"</span>
                <input type="text" name="new-name" prop:value=move || name.get() on:input=move |e| name.set(event_target_value(&e))/>
            </label>
            {scope_select(scope)}
            <fieldset class="templates">
                <legend>"Start from"</legend>
                {forge_core::stack::templates::TEMPLATES.iter().map(|(key, label, help)| view! {
                    <label class="template">
                        <input type="radio" name="template" value=*key prop:checked=move || kind.get() == *key
                            on:change=move |_| kind.set(key.to_string())/>
                        <span class="template-label">{*label}</span>
                        <span class="help">{*help}</span>
                    </label>
                }).collect_view()}
            </fieldset>
            {activate_check(app, activate, "Activate it now")}
            <div class="row end">
                <button type="button" class="cancel" on:click=move |_| app.dialog.set(None)>"Cancel"</button>
                <button type="submit" class="primary create" disabled=move || problem().is_some() || busy.get()>"Create"</button>
            </div>
        </form>
    }
}

#[component]
fn ForkDialog() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let Some(loaded) = ed.loaded.get_untracked() else {
        return view! { <p>"Open a Preset first."</p> }.into_any();
    };
    let id = RwSignal::new(format!("{}-copy", loaded.id));
    // Without a saved file (deleted on disk, draft kept) the fork is made from the draft.
    let gone = ed.file_gone.get_untracked();
    let draft = gone.then(|| ed.draft.get_untracked());
    // The copy gets its own display name, so the list does not show two identical rows.
    let source_name = crate::jp::get_str(draft.as_ref().unwrap_or(&loaded.saved), "/name");
    let name = RwSignal::new(if source_name.trim().is_empty() {
        String::new()
    } else {
        format!("{source_name} (copy)")
    });
    let scope = RwSignal::new(loaded.scope.clone());
    let activate = RwSignal::new(false);
    let failed = RwSignal::new(None::<String>);
    let problem = move || id_problem(app, id.get().trim(), &scope.get());
    let dirty = ed.dirty.get_untracked() && !gone;
    let gone_path = gone.then(|| loaded.path.clone());
    let source_scope = loaded.scope.clone();
    let source = loaded.selector.clone();
    let fork = move |_| {
        if problem().is_some() {
            return;
        }
        let new_id = id.get_untracked().trim().to_string();
        let scope_v = scope.get_untracked();
        let asked = wants_activation(app, activate);
        let new_name = name.get_untracked().trim().to_string();
        let (path, body) = match &draft {
            // A create of the draft under the new ID and name.
            // A create of the draft, copied as the server's fork copies a file.
            Some(draft) => {
                use forge_core::workspace::service::{fork_copy, Kind};
                let scope_of = |s: &str| Scope::parse(s).unwrap_or(Scope::Project);
                let raw = draft.as_object().cloned().unwrap_or_default();
                let name = (!new_name.is_empty()).then_some(new_name.as_str());
                let stack = fork_copy(
                    Kind::Stack,
                    &raw,
                    &new_id,
                    name,
                    scope_of(&source_scope),
                    scope_of(&scope_v),
                );
                let body = json!({ "stack": stack, "scope": scope_v, "activate": asked });
                ("/api/stacks".to_string(), body)
            }
            None => {
                let mut body = json!({ "id": new_id, "scope": scope_v, "activate": asked });
                if !new_name.is_empty() {
                    body["name"] = json!(new_name);
                }
                (format!("/api/stacks/{}/fork", seg(&source)), body)
            }
        };
        let gone_path = gone_path.clone();
        spawn_local(async move {
            match api::post_as::<StackView>(&path, &body).await {
                Ok(view) => {
                    app.dialog.set(None);
                    if dirty {
                        app.say(
                            format!("Forked to {new_id}; your unsaved changes stay here"),
                            Tone::Ok,
                        );
                    } else {
                        if let Some(gone) = &gone_path {
                            crate::drafts::forget(gone); // the draft lives on in the fork
                        }
                        app.scope
                            .set(Scope::parse(&scope_v).unwrap_or(Scope::Project));
                        state::apply_view(app, &view, false);
                        created_status(app, format!("Forked to {new_id}"), &view, asked);
                    }
                    state::refresh_stacks(app);
                }
                Err(e) => {
                    // The dialog may have been closed meanwhile.
                    if !failed.is_disposed() {
                        failed.set(Some(e.message.clone()));
                    }
                    app.fail(&e);
                }
            }
        });
    };
    view! {
        <h2 id="dialog-title">{format!("Fork {}", loaded.id)}</h2>
        <form class="dialog-form" on:submit=move |e| { e.prevent_default(); fork(()); }>
            {failed_banner(failed)}
            {dirty.then(|| view! { <p class="banner warn">"The fork copies the saved file. Your unsaved changes are not included."</p> })}
            {gone.then(|| view! { <p class="banner info">"The saved file was deleted on disk: the fork is made from your draft."</p> })}
            {id_field("fork-id", "New ID", true, id, problem)}
            <label class="field">
                <span class="label">"Name"</span>
                <input type="text" name="fork-name" prop:value=move || name.get() on:input=move |e| name.set(event_target_value(&e))/>
            </label>
            {scope_select(scope)}
            {activate_check(app, activate, "Activate the fork")}
            <div class="row end">
                <button type="button" class="cancel" on:click=move |_| app.dialog.set(None)>"Cancel"</button>
                <button type="submit" class="primary" disabled=move || problem().is_some()>"Fork"</button>
            </div>
        </form>
    }
    .into_any()
}

/// The import dialog's steps.
#[derive(Clone, PartialEq)]
enum Step {
    Pick,
    /// A SillyTavern preset with several `prompt_order` entries: which one?
    Character(Vec<String>),
    /// The dry run's answer: review, then import.
    Review(ImportPreview),
}

#[component]
fn ImportDialog() -> impl IntoView {
    let app = app();
    let step = RwSignal::new(Step::Pick);
    let content = RwSignal::new(String::new());
    let file_name = RwSignal::new(String::new());
    let character: RwSignal<Option<String>> = RwSignal::new(None);
    let id = RwSignal::new(String::new());
    let scope = RwSignal::new(app.scope.get_untracked().as_str().to_string());
    let activate = RwSignal::new(false);
    let error: RwSignal<Option<String>> = RwSignal::new(None);
    // Every error of a file refused for its diagnostics (the message names only the first).
    let error_list: RwSignal<Vec<String>> = RwSignal::new(Vec::new());
    let refuse = move |e: api::ApiError| {
        let list: Vec<String> = e
            .body
            .diagnostics()
            .into_iter()
            .filter(|d| d.level == Level::Error)
            .map(|d| d.message)
            .collect();
        if list.len() > 1 {
            error.set(Some(format!(
                "This file has {} errors; fix them in the file and choose it again:",
                list.len()
            )));
            error_list.set(list);
        } else {
            error.set(Some(e.message));
            error_list.set(Vec::new());
        }
    };
    let busy = RwSignal::new(false);

    let dry_run = move || {
        let mut body = json!({ "content": content.get_untracked(), "fileName": file_name.get_untracked(), "dryRun": true, "scope": scope.get_untracked() });
        if let Some(c) = character.get_untracked() {
            body["characterId"] = json!(c);
        }
        busy.set(true);
        // A dry run writes nothing: dropped with the dialog.
        spawn_while(step, async move {
            let result = api::post_as::<ImportPreview>("/api/stacks/import", &body).await;
            busy.set(false);
            match result {
                Ok(v) => {
                    id.set(v.id.clone());
                    error.set(None);
                    step.set(Step::Review(v));
                }
                Err(e) if e.code == "character_id_required" => {
                    let ids: Vec<String> = e
                        .body
                        .details
                        .as_ref()
                        .and_then(|d| d.get("characterIds"))
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| {
                                    v.as_str()
                                        .map(str::to_string)
                                        .or_else(|| Some(v.to_string()))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    character.set(ids.first().cloned());
                    error.set(None);
                    step.set(Step::Character(ids));
                }
                Err(e) => refuse(e),
            }
        });
    };
    let on_file = move |e: leptos::ev::Event| {
        let Some(input) = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        let Some(file) = input.files().and_then(|f| f.get(0)) else {
            return;
        };
        file_name.set(file.name());
        character.set(None);
        // A new file starts over: no stale review or error from the previous one.
        step.set(Step::Pick);
        error.set(None);
        error_list.set(Vec::new());
        busy.set(true);
        spawn_while(step, async move {
            match JsFuture::from(file.text()).await {
                Ok(text) => {
                    let text = text.as_string().unwrap_or_default();
                    // A SillyTavern preset with several characters: ask first, so the
                    // server's dry run is not a 400 on the normal path.
                    let ids = character_ids(&text);
                    content.set(text);
                    if ids.len() > 1 {
                        busy.set(false);
                        character.set(ids.first().cloned());
                        error.set(None);
                        step.set(Step::Character(ids));
                    } else {
                        dry_run();
                    }
                }
                Err(_) => {
                    busy.set(false);
                    error.set(Some("The file could not be read.".into()));
                }
            }
        });
    };
    let problem = move || id_problem(app, id.get().trim(), &scope.get());
    let import = move |_| {
        if problem().is_some() || busy.get_untracked() {
            return;
        }
        let new_id = id.get_untracked().trim().to_string();
        let mut body = json!({ "content": content.get_untracked(), "fileName": file_name.get_untracked(), "id": new_id, "scope": scope.get_untracked() });
        if let Some(c) = character.get_untracked() {
            body["characterId"] = json!(c);
        }
        let activate_now = wants_activation(app, activate);
        let scope_v = scope.get_untracked();
        busy.set(true);
        spawn_local(async move {
            // `Saved<Imported>`: the view is all the editor needs.
            let result = api::post_as::<StackView>("/api/stacks/import", &body).await;
            // Imported (or not) whether or not the dialog is still open: the editor and the
            // status line follow either way; the dialog's own state only while it is open.
            let open = !busy.is_disposed();
            if open {
                busy.set(false);
            }
            match result {
                Ok(view) => {
                    app.dialog.set(None);
                    app.say(format!("Imported {new_id}"), Tone::Ok);
                    let selector = view.common.selector.clone();
                    app.guard("Opening the imported Preset", move || {
                        app.scope
                            .set(Scope::parse(&scope_v).unwrap_or(Scope::Project));
                        state::apply_view(app, &view, false);
                    });
                    if activate_now {
                        state::activate(app, selector);
                    }
                    state::refresh_stacks(app);
                }
                Err(e) => {
                    if open {
                        refuse(e);
                    }
                }
            }
        });
    };

    view! {
        <h2 id="dialog-title">"Import a Preset"</h2>
        <div class="dialog-form import">
            <p class="help">"A pi-forge Preset file, or a SillyTavern chat-completion preset (converted, with a report). Nothing is written until you confirm, and an existing Preset is never replaced."</p>
            <label class="field">
                <span class="label">"File"</span>
                <input type="file" name="import-file" accept=".json,application/json" on:change=on_file/>
            </label>
            {move || error.get().map(|e| view! {
                <div class="import-error" role="alert">
                    <p class="field-error">{e}</p>
                    {move || {
                        let list = error_list.get();
                        (!list.is_empty()).then(|| view! {
                            <ul class="diagnostic-list import-errors">
                                {list.into_iter().map(|m| view! { <li class="diagnostic error"><span class="level">"error"</span><span class="message">{m}</span></li> }).collect_view()}
                            </ul>
                        })
                    }}
                </div>
            })}
            {move || match step.get() {
                Step::Pick => view! {
                    <p class="muted" role="status">{move || if busy.get() { "Reading…" } else { "Choose a file." }}</p>
                    <div class="row end">{cancel_button(app)}</div>
                }.into_any(),
                Step::Character(ids) => view! {
                    <form class="character-step dialog-form" on:submit=move |e| { e.prevent_default(); dry_run(); }>
                        <p>"This preset has prompt orders for several characters. Which one should be imported?"</p>
                        <label class="field">
                            <span class="label">"Character ID"</span>
                            <select name="character-id" prop:value=move || character.get().unwrap_or_default()
                                on:change=move |e| character.set(Some(event_target_value(&e)))>
                                {ids.into_iter().map(|c| view! { <option value=c.clone()>{c.clone()}</option> }).collect_view()}
                            </select>
                        </label>
                        <div class="row end">
                            {cancel_button(app)}
                            <button type="submit" class="primary use-character" disabled=move || busy.get()>"Continue"</button>
                        </div>
                    </form>
                }.into_any(),
                Step::Review(v) => review(app, v, id, scope, activate, problem, busy, import).into_any(),
            }}
        </div>
    }
}

#[allow(clippy::too_many_arguments)]
fn review(
    app: App,
    v: ImportPreview,
    id: RwSignal<String>,
    scope: RwSignal<String>,
    activate: RwSignal<bool>,
    problem: impl Fn() -> Option<String> + Copy + Send + Sync + 'static,
    busy: RwSignal<bool>,
    import: impl Fn(()) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let format = v.format.clone();
    // The migration report is the converter's own JSON (`import::sillytavern`), read leniently.
    let report = v.report.clone();
    let text = |e: &Value, key: &str| e.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let items = v
        .stack
        .get("items")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let section = |key: &str, title: &str| {
        let list = report
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        (!list.is_empty()).then(|| {
            let count = list.len();
            view! {
                <details class=format!("report {key}") open=key != "converted">
                    <summary>{format!("{title} ({count})")}</summary>
                    <ul>
                        {list.into_iter().map(|e| view! {
                            <li><strong>{if text(&e, "name").is_empty() { text(&e, "identifier") } else { text(&e, "name") }}</strong>" — "{text(&e, "reason")}</li>
                        }).collect_view()}
                    </ul>
                </details>
            }
        })
    };
    let (errors, warnings) = (v.errors, v.warnings);
    let diagnostics: Vec<_> = v
        .diagnostics
        .into_iter()
        .filter(|d| d.level != Level::Info)
        .collect();
    let character = text(&report, "characterId");
    view! {
        <form class="review dialog-form" on:submit=move |e| { e.prevent_default(); if errors == 0 { import(()); } }>
            <p class="import-summary">{format!(
                "{} · {items} item{} · {errors} error{} · {warnings} warning{}",
                if format == "sillytavern" { "SillyTavern preset".to_string() } else { "pi-forge Preset".to_string() },
                if items == 1 { "" } else { "s" }, if errors == 1 { "" } else { "s" }, if warnings == 1 { "" } else { "s" }
            )}{(!character.is_empty()).then(|| format!(" · character {character}"))}</p>
            {section("converted", "Converted")}
            {section("approximated", "Approximated")}
            {section("dropped", "Dropped")}
            {id_field("import-id", "Preset ID", false, id, problem)}
            {scope_select(scope)}
            {activate_check(app, activate, "Activate it now")}
            {(!diagnostics.is_empty()).then(|| view! {
                <ul class="diagnostic-list import-diagnostics">
                    {diagnostics.into_iter().map(|d| { let level = d.level.as_str(); view! {
                        <li class=format!("diagnostic {level}")><span class="level">{level}</span><span class="message">{d.message}</span></li>
                    }}).collect_view()}
                </ul>
            })}
            <div class="row end">
                {cancel_button(app)}
                <button type="submit" class="primary do-import" disabled=move || { problem().is_some() || busy.get() || errors > 0 }>"Import"</button>
            </div>
        </form>
    }
}

fn cancel_button(app: App) -> impl IntoView {
    view! { <button type="button" class="cancel" on:click=move |_| app.dialog.set(None)>"Cancel"</button> }
}

/// The distinct `prompt_order[].character_id`s of a SillyTavern preset's text, in file order
/// (numbers written as JSON writes them); empty for anything else.
fn character_ids(text: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = Vec::new();
    // The user's file, not an answer: read leniently.
    let order = v.get("prompt_order").and_then(Value::as_array);
    for entry in order.into_iter().flatten() {
        let id = match entry.get("character_id") {
            Some(Value::String(s)) => s.clone(),
            Some(n @ Value::Number(_)) => n.to_string(),
            _ => continue,
        };
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}
