//! The capabilities surface: the library (filterable list with scope, diagnostics and the
//! Presets that bind each capability), one capability's view (literal content, tool patch,
//! bindings, file), and its editor (create, edit, fork to the other scope, export, delete).
//!
//! Content is literal text: it is shown as text nodes, never as HTML or a template. Saving a
//! capability never activates it. The edit form, its banners and delete-with-confirm are the
//! ones profiles use (`library.rs`).

use forge_core::api::{CapabilityList, CapabilityView};
use forge_core::capability::{parse_capability_value, MAX_CONTENT_LENGTH};
use forge_core::diag::Level;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use crate::api::{self, seg};
use crate::jp;
use crate::library::{self, confirm_delete, label, new_id_problem, Form, FormBanners};
use crate::state::{self, app, level_class, App, Surface, Tone};
use crate::task::spawn_while;
use crate::toolpicker::ToolList;

/// Said wherever a save might be mistaken for turning a capability on.
const NEVER_ACTIVATES: &str = "Saving never activates a capability: a Pi session turns it on \
     (/capability enable, or a Preset binding).";

#[derive(Clone, Copy)]
struct Caps {
    collection: RwSignal<CapabilityList>,
    loaded: RwSignal<bool>,
    selected: RwSignal<Option<String>>,
    form: Form,
    /// The scope a new capability is created in.
    scope: RwSignal<String>,
    search: RwSignal<String>,
}

impl Caps {
    /// Whether the surface is still mounted (its signals are disposed when the user leaves it).
    fn alive(self) -> bool {
        !self.collection.is_disposed()
    }
}

fn refresh(app: App, c: Caps) {
    spawn_while(c.collection, async move {
        match api::get_as::<CapabilityList>("/api/capabilities").await {
            Ok(v) => {
                if !c.loaded.get_untracked() {
                    let k = v.capabilities.len();
                    app.say(
                        format!("{k} capabilit{}", if k == 1 { "y" } else { "ies" }),
                        Tone::Info,
                    );
                }
                c.collection.set(v);
                c.loaded.set(true);
                let exists = c
                    .selected
                    .get_untracked()
                    .is_some_and(|sel| entry(c, &sel).is_some());
                if !exists && c.form.editing.with_untracked(Option::is_none) {
                    let first = c.collection.with_untracked(|col| {
                        col.capabilities.first().map(|e| e.common.selector.clone())
                    });
                    c.selected.set(first);
                }
            }
            Err(e) => app.fail(&e),
        }
    });
}

fn entry(c: Caps, selector: &str) -> Option<CapabilityView> {
    c.collection.with_untracked(|col| {
        col.capabilities
            .iter()
            .find(|e| e.common.selector.clone() == selector)
            .cloned()
    })
}

/// Why a capability of `scope` cannot be changed here (`None`: it can).
fn read_only_reason(app: App, scope: &str) -> Option<String> {
    (scope == "project" && !app.trusted.get()).then(|| {
        "This project is not trusted: its capabilities are read-only. Global capabilities stay editable."
            .to_string()
    })
}

fn blank(content: &str) -> Value {
    json!({
        "schemaVersion": 1, "type": "pi-forge.capability", "id": "",
        "content": content, "tools": { "add": [], "remove": [] }
    })
}

fn new_capability(app: App, c: Caps, content: &str) {
    if !app.trusted.get_untracked() {
        c.scope.set("global".into());
    }
    c.form.open_new(blank(content));
}

fn start_edit(app: App, c: Caps, selector: String) {
    spawn_while(c.collection, async move {
        match api::get_as::<CapabilityView>(&format!("/api/capabilities/{}", seg(&selector))).await
        {
            Ok(v) => c.form.open_saved(
                selector,
                v.capability,
                Some(v.common.revision),
                v.common.unreadable,
            ),
            Err(e) => app.fail(&e),
        }
    });
}

fn tools_of(v: &Value, which: &str) -> Vec<String> {
    v.pointer(&format!("/tools/{which}"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[component]
pub fn CapabilitiesSurface() -> impl IntoView {
    let app = app();
    let c = Caps {
        collection: RwSignal::new(CapabilityList::default()),
        loaded: RwSignal::new(false),
        selected: RwSignal::new(None),
        form: Form::new(),
        scope: RwSignal::new("project".into()),
        search: RwSignal::new(String::new()),
    };
    provide_context(c);
    Effect::new(move |_| {
        app.capability_events.get();
        refresh(app, c);
    });
    c.form
        .follow(app.capability_change, move |sel| start_edit(app, c, sel));
    Effect::new(move |_| app.form_dirty.set(c.form.dirty()));
    app.form_save
        .set(Some(Callback::new(move |_| save(app, c, None))));
    // A Preset block handed its text over ("New capability from this text").
    Effect::new(move |_| {
        if let Some(text) = app.capability_seed.get() {
            app.capability_seed.set(None);
            new_capability(app, c, &text);
        }
    });
    on_cleanup(move || {
        app.form_dirty.set(false);
        app.form_save.set(None);
    });
    view! {
        <div class="profiles capabilities">
            <CapabilitySidebar/>
            <main class="workspace">
                {move || {
                    if c.form.editing.with(Option::is_some) {
                        return view! { <CapabilityEditor/> }.into_any();
                    }
                    let shown = c.selected.get().and_then(|sel| c.collection.with(|col| {
                        col.capabilities.iter().find(|e| e.common.selector.clone() == sel).cloned()
                    }));
                    match shown {
                        Some(e) => view! { <CapabilityDetail entry=e/> }.into_any(),
                        None => view! {
                            <div class="empty-state">
                                {move || if c.loaded.get() && c.collection.with(|col| col.capabilities.is_empty()) {
                                    view! {
                                        <h2>"No capabilities yet."</h2>
                                        <p>"A capability is a reusable block of instructions and tool changes that a Pi session can turn on and off, directly or through a Preset's bindings."</p>
                                    }.into_any()
                                } else {
                                    view! { <p>"Select a capability."</p> }.into_any()
                                }}
                                <button class="primary new-capability" on:click=move |_| new_capability(app, c, "")>"New capability"</button>
                            </div>
                        }.into_any(),
                    }
                }}
            </main>
        </div>
    }
}

#[component]
fn CapabilitySidebar() -> impl IntoView {
    let app = app();
    let c = expect_context::<Caps>();
    let rows = move || {
        let q = c.search.get().trim().to_lowercase();
        c.collection.with(|col| {
            col.capabilities
                .iter()
                .filter(|e| {
                    q.is_empty()
                        || e.common.selector.clone().to_lowercase().contains(&q)
                        || jp::get_str(&e.capability, "/name")
                            .to_lowercase()
                            .contains(&q)
                        || jp::get_str(&e.capability, "/description")
                            .to_lowercase()
                            .contains(&q)
                })
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    let select = move |sel: String| {
        app.guard("Opening another capability", move || {
            c.form.close();
            c.selected.set(Some(sel.clone()));
        });
    };
    view! {
        <aside class="sidebar" aria-label="Capabilities">
            <div class="sidebar-head">
                <input class="search" type="search" placeholder="Filter capabilities" aria-label="Filter capabilities"
                    prop:value=move || c.search.get() on:input=move |e| c.search.set(event_target_value(&e))/>
                <button class="new-capability" on:click=move |_| app.guard("Creating a capability", move || new_capability(app, c, ""))>"New"</button>
            </div>
            <ul class="stack-list profile-list capability-list">
                {move || {
                    let rows = rows();
                    if rows.is_empty() {
                        return view! { <li class="empty">{move || if !c.loaded.get() { "Loading…" } else if c.search.with(|q| q.trim().is_empty()) { "No capabilities yet." } else { "No capability matches the filter." }}</li> }.into_any();
                    }
                    rows.into_iter().map(|e| {
                        let sel = e.common.selector.clone();
                        let sel2 = sel.clone();
                        let is_selected = move || c.selected.get().as_deref() == Some(sel2.as_str());
                        let name = jp::get_str(&e.capability, "/name");
                        let title = if name.trim().is_empty() { e.common.id.clone() } else { name };
                        let (errors, warnings) = (e.common.errors, e.common.warnings);
                        let bound = e.bound_by.clone();
                        let bound_text = match bound.len() {
                            0 => "not bound".to_string(),
                            1 => format!("bound by {}", bound[0]),
                            k => format!("bound by {k} Presets"),
                        };
                        view! {
                            <li>
                                <button class="stack-row profile-row capability-row" class:selected=is_selected data-selector=sel.clone()
                                    on:click=move |_| select(sel.clone())>
                                    <span class="row-title">{title}</span>
                                    <span class="row-id">{e.common.selector.clone()}</span>
                                    <span class="row-badges"><span class="badge muted">{e.common.scope.clone()}</span></span>
                                    <span class="row-detail">
                                        <span class="row-bound" title=bound.join(", ")>{bound_text}</span>
                                        {(errors > 0).then(|| { let t = format!("{errors} error{}", if errors == 1 { "" } else { "s" }); view! { <span class="badge error" title=t.clone() aria-label=t>{errors}" ✕"</span> } })}
                                        {(warnings > 0).then(|| { let t = format!("{warnings} warning{}", if warnings == 1 { "" } else { "s" }); view! { <span class="badge warning" title=t.clone() aria-label=t>{warnings}" !"</span> } })}
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

/// The tool patch as `+add` / `−remove` chips.
fn patch_chips(add: Vec<String>, remove: Vec<String>) -> impl IntoView {
    let empty = add.is_empty() && remove.is_empty();
    view! {
        <ul class="chips tool-patch" aria-label="Tool changes">
            {add.into_iter().map(|t| view! { <li class="chip add" data-tool=t.clone()><span class="chip-text">{format!("+{t}")}</span></li> }).collect_view()}
            {remove.into_iter().map(|t| view! { <li class="chip remove" data-tool=t.clone()><span class="chip-text">{format!("−{t}")}</span></li> }).collect_view()}
            {empty.then(|| view! { <li class="muted">"No tool changes"</li> })}
        </ul>
    }
}

#[component]
fn CapabilityDetail(entry: CapabilityView) -> impl IntoView {
    let app = app();
    let c = expect_context::<Caps>();
    let selector = entry.common.selector.clone();
    let scope = entry.common.scope.clone();
    let id = entry.common.id.clone();
    let cap = entry.capability.clone();
    let name = jp::get_str(&cap, "/name");
    let description = jp::get_str(&cap, "/description");
    let content = jp::get_str(&cap, "/content");
    let path = entry.common.path.clone();
    let revision = entry.common.revision.clone();
    let source_revision = entry.common.source_revision.clone();
    let unreadable = entry.common.unreadable.clone();
    let diagnostics = entry.common.diagnostics.clone();
    let bound = entry.bound_by.clone();
    let scope_for_ro = scope.clone();
    let read_only = move || {
        read_only_reason(app, &scope_for_ro).or_else(|| {
            unreadable
                .clone()
                .map(|r| format!("Read-only: {r}. pi-forge cannot save or delete this file."))
        })
    };
    let read_only2 = read_only.clone();
    let read_only3 = read_only.clone();
    let other = if scope == "project" {
        "global"
    } else {
        "project"
    };
    let fork_id = RwSignal::new(id.clone());
    let fork_open = RwSignal::new(false);
    let sel_edit = selector.clone();
    let sel_fork = selector.clone();
    let (sel_del, id_del, path_del) = (selector.clone(), label(&scope, &id), path.clone());
    let delete = move |_| {
        confirm_delete(
            app,
            c.collection,
            "capabilities",
            sel_del.clone(),
            revision.clone(),
            id_del.clone(),
            path_del.clone(),
            move || {
                c.selected.set(None);
                refresh(app, c);
            },
        );
    };
    let fork_problem = move || {
        let id = fork_id.get();
        let taken = c.collection.with(|col| {
            col.capabilities
                .iter()
                .any(|e| e.common.id == id && e.common.scope == other)
        });
        new_id_problem(&id, other, "capability", taken).or_else(|| read_only_reason(app, other))
    };
    let fork = Callback::new(move |_: ()| {
        let sel = sel_fork.clone();
        let body = json!({ "id": fork_id.get_untracked(), "scope": other });
        spawn_local(async move {
            match api::post_as::<CapabilityView>(
                &format!("/api/capabilities/{}/fork", seg(&sel)),
                &body,
            )
            .await
            {
                Ok(view) => {
                    let new_sel = view.common.selector;
                    app.say(format!("Copied {sel} to {new_sel}"), Tone::Ok);
                    // The copy exists whether or not this view is still shown; its own state
                    // only while it is (the detail is rebuilt on every list change).
                    if !fork_open.is_disposed() {
                        fork_open.set(false);
                    }
                    if c.alive() {
                        c.selected.set(Some(new_sel));
                        refresh(app, c);
                    }
                }
                Err(e) => app.fail(&e),
            }
        });
    });
    let open_preset = move |preset: String| {
        app.surface.set(Surface::Presets);
        state::open_stack(app, preset);
    };
    let heading = if name.trim().is_empty() {
        id.clone()
    } else {
        name.clone()
    };
    let export_href = format!("/api/capabilities/{}/export", seg(&selector));
    let export_name = format!("{id}.json");
    let chars = content.encode_utf16().count();
    view! {
        <div class="profile-detail capability-detail">
            <div class="editor-head">
                <div class="title-line">
                    <h2>{heading}</h2>
                    <span class="badge muted">{scope.clone()}</span>
                    <span class="selector">{selector.clone()}</span>
                </div>
                <div class="actions">
                    <button class="primary edit-capability" disabled=move || read_only2().is_some()
                        on:click=move |_| start_edit(app, c, sel_edit.clone())>"Edit"</button>
                    <button class="fork-capability" on:click=move |_| fork_open.update(|o| *o = !*o)
                        aria-expanded=move || fork_open.get().to_string()>{format!("Copy to {other}")}</button>
                    <a class="button export" href=export_href download=export_name>"Export JSON"</a>
                    <button class="danger delete-capability" disabled=move || read_only3().is_some() on:click=delete>"Delete"</button>
                </div>
            </div>
            {move || read_only().map(|r| view! { <p class="banner warn read-only" role="note">{r}</p> })}
            {move || fork_open.get().then(|| view! {
                <form class="fork-form card" on:submit=move |e| { e.prevent_default(); if fork_problem().is_none() { fork.run(()) } }>
                    <label class="field">
                        <span class="label">{format!("ID of the {other} copy")}</span>
                        <input type="text" name="fork-id" prop:value=move || fork_id.get() on:input=move |e| fork_id.set(event_target_value(&e))/>
                        {move || fork_problem().map(|p| view! { <span class="field-error">{p}</span> })}
                    </label>
                    <button type="submit" class="primary do-fork" disabled=move || fork_problem().is_some()>{format!("Copy to {other}")}</button>
                </form>
            })}
            {(!description.is_empty()).then(|| view! { <p class="description">{description.clone()}</p> })}
            <section class="card">
                <h3>"Tools"</h3>
                {patch_chips(tools_of(&cap, "add"), tools_of(&cap, "remove"))}
            </section>
            <section class="card">
                <h3>"Content" <span class="muted count">{format!("{chars} characters")}</span></h3>
                {if content.is_empty() {
                    view! { <p class="muted">"No text: this capability only changes tools."</p> }.into_any()
                } else {
                    view! { <pre class="capability-content">{content.clone()}</pre> }.into_any()
                }}
                <p class="help">"Literal text: sent as written, never expanded as a template."</p>
            </section>
            <section class="card bound-by">
                <h3>"Bound by"</h3>
                {if bound.is_empty() {
                    view! { <p class="muted">"No Preset binds this capability."</p> }.into_any()
                } else {
                    view! {
                        <ul class="bound-list">
                            {bound.into_iter().map(|p| { let p2 = p.clone(); view! { <li><button class="link open-preset" on:click=move |_| open_preset(p2.clone())>{p}</button></li> } }).collect_view()}
                        </ul>
                    }.into_any()
                }}
            </section>
            <p class="help never-activates">{NEVER_ACTIVATES}</p>
            {(!diagnostics.is_empty()).then(|| view! {
                <section class="card">
                    <h3>"Diagnostics"</h3>
                    <ul class="diagnostic-list">
                        {diagnostics.into_iter().map(|d| view! {
                            <li class=format!("diagnostic {}", level_class(d.level))><span class="level">{level_class(d.level)}</span><span class="message">{d.message}</span></li>
                        }).collect_view()}
                    </ul>
                </section>
            })}
            <p class="file-path">{path}</p>
            <p class="file-path revision" title="sourceRevision: SHA-256 of the file's bytes">{source_revision}</p>
        </div>
    }
}

/// The scope of the capability being edited (the selector's, or the create scope).
fn editing_scope(c: Caps) -> String {
    match c.form.selector() {
        Some(sel) => sel
            .split_once(':')
            .map_or("project", |(scope, _)| scope)
            .to_string(),
        None => c.scope.get(),
    }
}

fn save(app: App, c: Caps, force: Option<String>) {
    let draft = canonical_order(c.form.draft.get_untracked());
    if untrack(|| draft_errors(&draft)) > 0 {
        app.say("Not saved: fix the errors first.", Tone::Error);
        return;
    }
    let scope = untrack(|| editing_scope(c));
    let name = label(&scope, &jp::get_str(&draft, "/id"));
    library::save(
        app,
        c.form,
        "capabilities",
        "capability",
        draft,
        scope,
        name,
        force,
        move |selector| {
            c.selected.set(Some(selector));
            refresh(app, c);
        },
    );
}

/// The draft with its members in the file format's order (a member typed later, such as the
/// name, is not appended at the end of the file); unknown members keep their place after them.
fn canonical_order(draft: Value) -> Value {
    let Value::Object(mut map) = draft else {
        return draft;
    };
    let mut out = serde_json::Map::new();
    for key in forge_core::capability::CAPABILITY_FIELDS {
        if let Some(v) = map.remove(key) {
            out.insert(key.to_string(), v);
        }
    }
    out.extend(map);
    Value::Object(out)
}

/// The draft's diagnostics from forge-core's capability codec (the server runs the same).
fn draft_diagnostics(draft: &Value) -> Vec<forge_core::diag::Diagnostic> {
    let file = format!("{}.json", jp::get_str(draft, "/id"));
    parse_capability_value(draft.clone(), &file, String::new()).diagnostics
}

fn draft_errors(draft: &Value) -> usize {
    draft_diagnostics(draft)
        .iter()
        .filter(|d| d.level == Level::Error)
        .count()
}

#[component]
fn CapabilityEditor() -> impl IntoView {
    let app = app();
    let c = expect_context::<Caps>();
    let form = c.form;
    let is_new = move || form.is_new();
    let get = move |path: &'static str| form.draft.with(|d| jp::get_str(d, path));
    let set =
        move |path: &'static str, v: Option<Value>| form.draft.update(|d| jp::set(d, path, v));
    let optional_text = move |path: &'static str, e: leptos::ev::Event| {
        let v = event_target_value(&e);
        set(
            path,
            if v.is_empty() {
                None
            } else {
                Some(Value::String(v))
            },
        );
    };
    let diagnostics = Memo::new(move |_| form.draft.with(draft_diagnostics));
    let errors = Memo::new(move |_| {
        diagnostics.with(|d| d.iter().filter(|d| d.level == Level::Error).count())
    });
    let id_problem = move || {
        if !is_new() {
            return None;
        }
        let id = get("/id");
        let scope = c.scope.get();
        let taken = c.collection.with(|col| {
            col.capabilities
                .iter()
                .any(|e| e.common.id == id && e.common.scope == scope)
        });
        new_id_problem(&id, &scope, "capability", taken)
    };
    let read_only = move || {
        read_only_reason(app, &editing_scope(c)).or_else(|| {
            form.editing
                .with(|e| e.as_ref().and_then(|e| e.unreadable.clone()))
                .map(|r| format!("Read-only: {r}."))
        })
    };
    let read_only_sig = Signal::derive(move || read_only().is_some());
    let tool_list =
        move |which: &'static str| Signal::derive(move || form.draft.with(|d| tools_of(d, which)));
    let set_tools = move |which: &'static str| {
        Callback::new(move |list: Vec<String>| {
            set(
                if which == "add" {
                    "/tools/add"
                } else {
                    "/tools/remove"
                },
                Some(json!(list)),
            )
        })
    };
    let chars = move || {
        form.draft
            .with(|d| jp::get_str(d, "/content").encode_utf16().count())
    };
    crate::dom::focus_later(if is_new() {
        ".capability-editor input[name=capability-id]".into()
    } else {
        ".capability-editor input[name=capability-name]".into()
    });
    view! {
        <div class="profile-editor capability-editor">
            <div class="editor-head">
                <div class="title-line">
                    <h2>{move || if is_new() { "New capability".to_string() } else { format!("Edit {}", form.selector().unwrap_or_default()) }}</h2>
                    <Show when=move || form.dirty()><span class="badge dirty">"unsaved"</span></Show>
                </div>
                <div class="actions">
                    <button class="primary save-capability"
                        disabled=move || { !(form.dirty() || is_new()) || id_problem().is_some() || errors.get() > 0 || read_only().is_some() }
                        on:click=move |_| save(app, c, None)>{move || if is_new() { "Create" } else { "Save" }}</button>
                    <button class="cancel" on:click=move |_| form.cancel(app, "capability")>"Cancel"</button>
                </div>
            </div>
            <FormBanners form noun="capability"
                reload=move |sel: String| start_edit(app, c, sel)
                overwrite=move |rev: String| save(app, c, Some(rev))/>
            {move || read_only().map(|r| view! { <p class="banner warn read-only" role="note">{r}</p> })}
            <p class="help never-activates">{NEVER_ACTIVATES}</p>
            <div class="grid">
                <label class="field">
                    <span class="label">"Capability ID"</span>
                    <input type="text" name="capability-id" readonly=move || !is_new() class:readonly=move || !is_new()
                        prop:value=move || get("/id") on:input=move |e| set("/id", Some(Value::String(event_target_value(&e))))/>
                    {move || id_problem().filter(|_| !get("/id").is_empty()).map(|e| view! { <span class="field-error">{e}</span> })}
                    <Show when=move || !is_new()>
                        <span class="field-note">"The file name: fixed once created."</span>
                    </Show>
                </label>
                <label class="field">
                    <span class="label">"Name"</span>
                    <input type="text" name="capability-name" prop:value=move || get("/name") on:input=move |e| optional_text("/name", e)/>
                </label>
                <Show when=is_new>
                    <label class="field">
                        <span class="label">"Scope"</span>
                        <select name="capability-scope" prop:value=move || c.scope.get() on:change=move |e| c.scope.set(event_target_value(&e))>
                            <option value="project" disabled=move || !app.trusted.get()>"Project"</option>
                            <option value="global">"Global"</option>
                        </select>
                        <Show when=move || !app.trusted.get()>
                            <span class="field-note">"The project is not trusted: new capabilities go to the global library."</span>
                        </Show>
                    </label>
                </Show>
            </div>
            <label class="field wide">
                <span class="label">"Description"</span>
                <textarea name="capability-description" rows="2" prop:value=move || get("/description")
                    on:input=move |e| optional_text("/description", e)></textarea>
            </label>
            <label class="field wide">
                <span class="label">"Content" <span class="muted count">{move || format!("{} / {MAX_CONTENT_LENGTH}", chars())}</span></span>
                <textarea name="capability-content" rows="10" spellcheck="false" readonly=read_only_sig
                    prop:value=move || get("/content")
                    on:input=move |e| set("/content", Some(Value::String(event_target_value(&e))))></textarea>
                <span class="field-note">"Literal text, sent as written: no template expansion, not a file path."</span>
            </label>
            <div class="grid tool-lists">
                <ToolList name="tools-add" title="Tools to add" list=tool_list("add") set=set_tools("add") readonly=read_only_sig/>
                <ToolList name="tools-remove" title="Tools to remove" list=tool_list("remove") set=set_tools("remove") readonly=read_only_sig/>
            </div>
            <p class="help">"A removal wins over every add, and a Preset's allow/deny list still limits what a capability adds."</p>
            {move || {
                // A new form nobody has typed in yet has nothing wrong with it to say.
                let pristine = form.is_new() && !form.dirty();
                let d = diagnostics.get();
                (!d.is_empty() && !pristine).then(|| view! {
                    <section class="validation" class:warn=move || errors.get() == 0 role="status">
                        <ul class="diagnostic-list">
                            {d.into_iter().map(|d| view! {
                                <li class=format!("diagnostic {}", level_class(d.level))>
                                    <span class="level">{level_class(d.level)}</span>
                                    <span class="message">{d.message.clone()}</span>
                                </li>
                            }).collect_view()}
                        </ul>
                    </section>
                })
            }}
        </div>
    }
}
