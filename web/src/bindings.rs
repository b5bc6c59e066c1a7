//! The Preset editor's Capabilities tab: the Preset's `capabilities` bindings (capabilities spec
//! B4/B5) and the tool effect preview (B9). Tool lists use `toolpicker::ToolList`, as the
//! Policy tab's default tools and the capability editor do.
//!
//! Everything shown is computed by forge-core in the browser: the library (`GET
//! /api/capabilities`) becomes a [`WorkspaceSnapshot`] holding only capabilities, each binding is
//! resolved with [`WorkspaceSnapshot::binding_outcome`] (the wording the server's loader and draft
//! validation use), and the tool effect is [`capability::tools::effective_tools`]. Capability
//! content is literal text: it is only ever rendered as text nodes.

use std::sync::Arc;

use forge_core::api::CapabilityList;
use forge_core::capability::{self, tools::tool_delta, ToolPatch};
use forge_core::diag::Diagnostic;
use forge_core::diff::text::{diff_lines, DiffLine, LineTag};
use forge_core::id::{ResourceKey, Scope};
use forge_core::runtime::RuntimeSnapshot;
use forge_core::stack::{parse_stack_value, ParseOptions};
use forge_core::workspace::{Dir, FileRef, Loaded, WorkspaceSnapshot};
use leptos::prelude::*;
use serde_json::{json, Map, Value};
use wasm_bindgen::JsCast;

use crate::api;
use crate::jp;
use crate::state::{app, StackEditor};
use crate::task::spawn_while;
use crate::toolpicker::ToolList;

/// The capability library as the browser knows it.
#[derive(Clone)]
pub struct Library {
    /// Only `capabilities` is filled: enough for forge-core's binding resolution.
    pub snapshot: Arc<WorkspaceSnapshot>,
    /// `(selector, label, scope, usable)` in the server's order.
    pub choices: Vec<(String, String, Scope, bool)>,
}

/// `None` until the first answer; an error message when the request failed.
pub type LibrarySignal = RwSignal<Option<Result<Library, String>>>;

/// Loads the library now and again after every capability change event, so an open tab
/// follows edits made in the Capabilities surface or on disk.
fn follow_library(into: LibrarySignal) {
    let app = app();
    Effect::new(move |_| {
        app.capability_events.track();
        load_library(into);
    });
}

/// Fetches `GET /api/capabilities` into `into` (dropped when the tab that owns it goes).
fn load_library(into: LibrarySignal) {
    spawn_while(into, async move {
        let answer = api::get_as::<CapabilityList>("/api/capabilities").await;
        into.set(Some(answer.map(|v| library_from(&v)).map_err(|e| {
            format!("The capability library could not be read: {}", e.message)
        })));
    });
}

fn library_from(list: &CapabilityList) -> Library {
    let mut snapshot = WorkspaceSnapshot {
        trusted: list.trusted,
        ..WorkspaceSnapshot::default()
    };
    let mut choices = Vec::new();
    for e in &list.capabilities {
        let Some(scope) = Scope::parse(&e.common.scope) else {
            continue;
        };
        let id = e.common.id.clone();
        let path = e.common.file_path.clone();
        let file_name = path.rsplit('/').next().unwrap_or("").to_string();
        let Ok(file) = FileRef::new(scope, Dir::Capabilities, file_name.clone())
            .or_else(|_| FileRef::new(scope, Dir::Capabilities, "capability.json"))
        else {
            continue;
        };
        let diagnostics: Vec<Diagnostic> = e.common.diagnostics.clone();
        let source_revision = e.common.source_revision.clone();
        let parsed = match Some(&e.capability).filter(|v| !v.is_null()) {
            Some(raw) => {
                capability::parse_capability_value(raw.clone(), &file_name, source_revision)
            }
            None => capability::ParsedCapability::fault(
                &file_name,
                diagnostics
                    .first()
                    .map(|d| d.message.clone())
                    .unwrap_or_else(|| "Capability file could not be read.".into()),
                source_revision,
            ),
        };
        let name = parsed
            .capability
            .name
            .clone()
            .filter(|n| !n.trim().is_empty());
        let selector = format!("{}:{id}", scope.as_str());
        let label = match name {
            Some(n) => format!("{n} ({selector})"),
            None => selector.clone(),
        };
        let entry = Loaded {
            key: ResourceKey::new(scope, id),
            file,
            path,
            revision: e.common.revision.clone(),
            parsed,
            diagnostics,
        };
        choices.push((selector, label, scope, entry.usable()));
        snapshot.capabilities.push(entry);
    }
    Library {
        snapshot: Arc::new(snapshot),
        choices,
    }
}

/// A capability's content and tool patch, for display.
#[derive(Clone, Debug, PartialEq)]
pub struct CapView {
    pub content: String,
    pub tools: ToolPatch,
}

/// What the editor knows about one element of the `capabilities` array.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The element has structural errors (its diagnostics say which).
    Invalid,
    /// The library is not loaded (yet).
    Unknown,
    /// It does not resolve or its overrides do not apply: forge-core's message and the field.
    Problem { message: String, field: String },
    Resolved {
        key: String,
        base: CapView,
        effective: CapView,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct RowInfo {
    /// This element's own structural diagnostics: `(message, field)`.
    pub diagnostics: Vec<(String, Option<String>)>,
    pub outcome: Outcome,
}

fn preset_scope(ed: StackEditor) -> Scope {
    ed.loaded.with(|l| {
        l.as_ref()
            .and_then(|l| Scope::parse(&l.scope))
            .unwrap_or(Scope::Project)
    })
}

/// Whether `field` belongs to element `i` (`capabilities[1]` is not `capabilities[10]`).
fn field_of(field: &str, i: usize) -> bool {
    let prefix = format!("capabilities[{i}]");
    field
        .strip_prefix(&prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// The outcome of every element of the draft's `capabilities` array.
pub fn row_infos(draft: &Value, owner: Scope, lib: Option<&Library>) -> Vec<RowInfo> {
    let Some(value) = draft.get("capabilities").filter(|v| v.is_array()) else {
        return Vec::new();
    };
    let len = value.as_array().map_or(0, Vec::len);
    let (bindings, diagnostics) = capability::parse_bindings_indexed(value, owner);
    (0..len)
        .map(|i| {
            let own: Vec<(String, Option<String>)> = diagnostics
                .iter()
                .filter(|d| d.field.as_deref().is_some_and(|f| field_of(f, i)))
                .map(|d| (d.message.clone(), d.field.clone()))
                .collect();
            let outcome = match bindings.iter().find(|(j, _)| *j == i) {
                None => Outcome::Invalid,
                Some((_, binding)) => match lib {
                    None => Outcome::Unknown,
                    Some(lib) => match lib.snapshot.binding_outcome(owner, binding, i) {
                        Ok((target, effective)) => Outcome::Resolved {
                            key: target.key.to_string(),
                            base: CapView {
                                content: target.parsed.capability.content.clone(),
                                tools: target.parsed.capability.tools.clone(),
                            },
                            effective: CapView {
                                content: effective.content,
                                tools: effective.tools,
                            },
                        },
                        Err(p) => Outcome::Problem {
                            message: p.message,
                            field: p.field,
                        },
                    },
                },
            };
            RowInfo {
                diagnostics: own,
                outcome,
            }
        })
        .collect()
}

/// The element id of the control that edits `field` (`capabilities[i].…`), opening the row's
/// Override disclosure when the field is inside it.
fn focus_field(field: &str) {
    let Some(rest) = field.strip_prefix("capabilities[") else {
        return;
    };
    let Some((index, tail)) = rest.split_once(']') else {
        return;
    };
    let Ok(i) = index.parse::<usize>() else {
        return;
    };
    let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let target = if tail.starts_with(".overrides") {
        if let Some(details) = doc.get_element_by_id(&format!("cap-{i}-details")) {
            let _ = details.set_attribute("open", "");
        }
        if tail.starts_with(".overrides.tools.add") {
            format!("cap-{i}-add")
        } else if tail.starts_with(".overrides.tools.remove") {
            format!("cap-{i}-remove")
        } else if tail.starts_with(".overrides.tools") {
            format!("cap-{i}-add")
        } else {
            format!("cap-{i}-content")
        }
    } else if tail.starts_with(".id") {
        format!("cap-{i}-id")
    } else if tail.starts_with(".modelCallable") {
        format!("cap-{i}-model")
    } else {
        format!("cap-{i}-ref")
    };
    let el = doc
        .get_element_by_id(&target)
        .or_else(|| doc.get_element_by_id(&format!("cap-{i}-ref")));
    if let Some(el) = el.and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok()) {
        let _ = el.focus();
    }
}

/// Whether the open Preset can be edited here: an unreadable file, or a project Preset of an
/// untrusted project, is read-only.
pub fn read_only(ed: StackEditor, trusted: RwSignal<bool>) -> bool {
    ed.loaded.with(|l| {
        l.as_ref()
            .is_none_or(|l| l.unreadable.is_some() || (l.scope == "project" && !trusted.get()))
    })
}

fn names(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Removes `overrides` (and `overrides.tools`) of binding `i` when they became empty.
fn tidy_overrides(d: &mut Value, i: usize) {
    let tools = format!("/capabilities/{i}/overrides/tools");
    if jp::get(d, &tools)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        jp::set(d, &tools, None);
    }
    let overrides = format!("/capabilities/{i}/overrides");
    if jp::get(d, &overrides)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        jp::set(d, &overrides, None);
    }
}

#[component]
pub fn CapabilitiesTab() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let lib: LibrarySignal = RwSignal::new(None);
    follow_library(lib);
    provide_context(lib);
    let infos = Memo::new(move |_| {
        let owner = preset_scope(ed);
        lib.with(|l| {
            let l = l.as_ref().and_then(|r| r.as_ref().ok());
            ed.draft.with(|d| row_infos(d, owner, l))
        })
    });
    let count = Memo::new(move |_| {
        ed.draft.with(|d| {
            jp::get(d, "/capabilities")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        })
    });
    let not_array = Memo::new(move |_| {
        ed.draft
            .with(|d| jp::get(d, "/capabilities").is_some_and(|v| !v.is_array()))
    });
    let ro = Memo::new(move |_| read_only(ed, app.trusted));
    let picked = RwSignal::new(String::new());
    let is_global = move || preset_scope(ed) == Scope::Global;
    let add = move |_| {
        let sel = picked.get_untracked();
        if sel.is_empty() {
            return;
        }
        ed.draft.update(|d| {
            if jp::get(d, "/capabilities").is_none() {
                jp::set(d, "/capabilities", Some(json!([])));
            }
            if let Some(list) = jp::array_mut(d, "/capabilities") {
                list.push(json!({ "ref": sel }));
            }
        });
        picked.set(String::new());
    };
    view! {
        <div class="capabilities-tab">
            <fieldset class="bare" disabled=move || ro.get()>
            <section class="card bindings">
                <h3>"Capability bindings"</h3>
                <p class="help">"A binding makes a capability from the library available in sessions that run this Preset: the user can enable it, and the model too when it is model-callable. Bindings are not active by themselves."</p>
                {move || ro.get().then(|| view! {
                    <p class="banner warn" role="note">"This Preset is read-only here."</p>
                })}
                {move || match lib.get() {
                    None => view! { <p class="muted">"Loading the capability library…"</p> }.into_any(),
                    Some(Err(e)) => view! { <p class="field-error" role="alert">{e}</p> }.into_any(),
                    Some(Ok(l)) => {
                        let global = is_global();
                        let options = l.choices.iter().map(|(sel, label, scope, usable)| {
                            let blocked = global && *scope == Scope::Project;
                            let text = if blocked {
                                format!("{label} — a global Preset cannot bind a project capability")
                            } else if !usable {
                                format!("{label} — has errors")
                            } else {
                                label.clone()
                            };
                            view! { <option value=sel.clone() disabled=blocked>{text}</option> }
                        }).collect_view();
                        view! {
                            <div class="row add-binding">
                                <label class="field">
                                    <span class="label">"Capability"</span>
                                    <select name="capability-pick" prop:value=move || picked.get()
                                        on:change=move |e| picked.set(event_target_value(&e))>
                                        <option value="">"Choose a capability…"</option>
                                        {options}
                                    </select>
                                </label>
                                <button class="add-binding-button" disabled=move || picked.with(String::is_empty)
                                    on:click=add>"Bind"</button>
                            </div>
                            {(global && l.choices.iter().any(|c| c.2 == Scope::Project)).then(|| view! {
                                <p class="help">"Project capabilities are listed but disabled: a global Preset cannot bind a project capability."</p>
                            })}
                            {l.choices.is_empty().then(|| view! {
                                <p class="muted">"The library has no capabilities yet."</p>
                            })}
                        }.into_any()
                    }
                }}
                {move || not_array.get().then(|| view! {
                    <p class="field-error" role="alert">"capabilities is not an array: fix it in the JSON tab."</p>
                })}
                <ol class="binding-list">
                    {move || (0..count.get()).map(|i| view! { <BindingRow i infos count/> }).collect_view()}
                </ol>
                {move || (count.get() == 0 && !not_array.get()).then(|| view! {
                    <p class="muted no-bindings">"No capabilities are bound to this Preset."</p>
                })}
            </section>
            </fieldset>
            <ToolEffect infos/>
        </div>
    }
}

#[component]
fn BindingRow(i: usize, infos: Memo<Vec<RowInfo>>, count: Memo<usize>) -> impl IntoView {
    let ed = app().editor;
    let base = format!("/capabilities/{i}");
    let info = move || infos.with(|v| v.get(i).cloned());
    let raw = {
        let base = base.clone();
        move || ed.draft.with(|d| jp::get(d, &base).cloned())
    };
    let is_object = {
        let raw = raw.clone();
        Memo::new(move |_| raw().is_some_and(|v| v.is_object()))
    };
    let ref_text = {
        let base = base.clone();
        move || {
            ed.draft
                .with(|d| jp::get(d, &format!("{base}/ref")).cloned())
        }
    };
    let move_to = move |to: usize| {
        ed.draft.update(|d| {
            if let Some(list) = jp::array_mut(d, "/capabilities") {
                if i < list.len() && to < list.len() {
                    list.swap(i, to);
                }
            }
        });
    };
    let remove = move |_| {
        ed.draft.update(|d| {
            if let Some(list) = jp::array_mut(d, "/capabilities") {
                if i < list.len() {
                    list.remove(i);
                }
            }
        });
    };
    let title = {
        let ref_text = ref_text.clone();
        move || match ref_text() {
            Some(Value::String(r)) => r,
            Some(other) => other.to_string(),
            None => "(no ref)".into(),
        }
    };
    view! {
        <li class="binding" data-index=i.to_string()>
            <div class="binding-head">
                <span class="binding-title">{move || format!("{}. {}", i + 1, title())}</span>
                <div class="binding-actions">
                    <button class="binding-up" aria-label=format!("Move binding {} up", i + 1)
                        disabled=move || i == 0 on:click=move |_| move_to(i.saturating_sub(1))>"↑"</button>
                    <button class="binding-down" aria-label=format!("Move binding {} down", i + 1)
                        disabled=move || { i + 1 >= count.get() } on:click=move |_| move_to(i + 1)>"↓"</button>
                    <button class="binding-remove danger" aria-label=format!("Remove binding {}", i + 1)
                        on:click=remove>"Remove"</button>
                </div>
            </div>
            {move || if is_object.get() {
                view! { <BindingFields i/> }.into_any()
            } else {
                let text = raw().map(|v| jp::pretty(&v)).unwrap_or_default();
                view! {
                    <p class="muted">"This binding is not an object; it is shown as written (edit it in the JSON tab)."</p>
                    <pre class="raw-binding">{text}</pre>
                }.into_any()
            }}
            <ul class="binding-diagnostics">
                {move || info().map(|r| r.diagnostics).unwrap_or_default().into_iter().map(|(message, field)| {
                    let f = field.clone();
                    view! {
                        <li class="diagnostic error">
                            <span class="message">{message}</span>
                            {f.map(|f| view! { <button class="link fix-field" on:click=move |_| focus_field(&f)>"Go to field"</button> })}
                        </li>
                    }
                }).collect_view()}
            </ul>
            {move || info().map(|r| match r.outcome {
                Outcome::Invalid | Outcome::Unknown => ().into_any(),
                Outcome::Problem { message, field } => view! {
                    <p class="binding-problem diagnostic warning" role="alert">
                        <span class="message">{message}</span>
                        <button class="link fix-field" on:click=move |_| focus_field(&field)>"Go to field"</button>
                    </p>
                }.into_any(),
                Outcome::Resolved { key, base, effective } => view! { <EffectiveView key base effective/> }.into_any(),
            })}
        </li>
    }
}

#[component]
fn BindingFields(i: usize) -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let base = format!("/capabilities/{i}");
    let p = move |rest: &str| format!("/capabilities/{i}{rest}");
    let ref_value = {
        let base = base.clone();
        Memo::new(move |_| ed.draft.with(|d| jp::get_str(d, &format!("{base}/ref"))))
    };
    let lib_choices = expect_context::<LibrarySignal>();
    let content_mode = move || {
        ed.draft.with(|d| {
            if jp::get(d, &p("/overrides/content")).is_some() {
                "replace"
            } else if jp::get(d, &p("/overrides/appendContent")).is_some() {
                "append"
            } else {
                "none"
            }
        })
    };
    let content_text = move || {
        ed.draft.with(|d| {
            jp::get(d, &p("/overrides/content"))
                .or_else(|| jp::get(d, &p("/overrides/appendContent")))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
    };
    let set_mode = move |mode: &str| {
        let text = content_text();
        ed.draft.update(|d| {
            jp::set(d, &p("/overrides/content"), None);
            jp::set(d, &p("/overrides/appendContent"), None);
            match mode {
                "replace" => jp::set(d, &p("/overrides/content"), Some(Value::String(text))),
                "append" => jp::set(d, &p("/overrides/appendContent"), Some(Value::String(text))),
                _ => {}
            }
            tidy_overrides(d, i);
        });
    };
    let radio = move |mode: &'static str, label: &'static str| {
        view! {
            <label class="check">
                <input type="radio" name=format!("cap-{i}-content-mode") value=mode
                    prop:checked=move || content_mode() == mode
                    on:change=move |_| set_mode(mode)/>
                <span>{label}</span>
            </label>
        }
    };
    let model_path = p("/modelCallable");
    let model_read = model_path.clone();
    let id_path = p("/id");
    let id_read = id_path.clone();
    view! {
        <div class="binding-fields grid">
            <label class="field">
                <span class="label">"Capability"</span>
                <select id=format!("cap-{i}-ref") name="binding-ref"
                    prop:value=move || ref_value.get()
                    on:change={
                        let base = base.clone();
                        move |e| ed.set(&format!("{base}/ref"), Some(Value::String(event_target_value(&e))))
                    }>
                    {move || {
                        let current = ref_value.get();
                        let global = preset_scope(ed) == Scope::Global;
                        let choices = lib_choices.with(|l| match l {
                            Some(Ok(l)) => l.choices.clone(),
                            _ => Vec::new(),
                        });
                        let listed = choices.iter().any(|c| c.0 == current);
                        let extra = (!listed).then(|| {
                            let c = current.clone();
                            view! { <option value=c.clone()>{format!("{c} (not in the library)")}</option> }
                        });
                        let opts = choices.into_iter().map(|(sel, label, scope, _)| {
                            let blocked = global && scope == Scope::Project;
                            let text = if blocked {
                                format!("{label} — a global Preset cannot bind a project capability")
                            } else {
                                label
                            };
                            view! { <option value=sel.clone() disabled=blocked selected={sel == current}>{text}</option> }
                        }).collect_view();
                        view! { {extra} {opts} }
                    }}
                </select>
            </label>
            <label class="field">
                <span class="label">"Binding id (optional)"</span>
                <input type="text" id=format!("cap-{i}-id") name="binding-id" autocomplete="off" spellcheck="false"
                    placeholder="defaults to the capability's id"
                    prop:value=move || ed.draft.with(|d| jp::get_str(d, &id_read))
                    on:input=move |e| {
                        let v = event_target_value(&e);
                        ed.set(&id_path, if v.is_empty() { None } else { Some(Value::String(v)) });
                    }/>
            </label>
            <div class="field wide">
                <label class="check">
                    <input type="checkbox" id=format!("cap-{i}-model") name="binding-model-callable"
                        prop:checked=move || ed.draft.with(|d| jp::get_bool(d, &model_read).unwrap_or(false))
                        on:change=move |e| {
                            let on = event_target_checked(&e);
                            ed.set(&model_path, on.then_some(Value::Bool(true)));
                        }/>
                    <span>"Model-callable"</span>
                </label>
                <p class="help">"Lets the model enable or disable this capability itself, through the forge_capability tool. Off: only you can."</p>
            </div>
            <details class="overrides wide" id=format!("cap-{i}-details")
                prop:open=move || ed.draft.with_untracked(|d| jp::get(d, &p("/overrides")).is_some())>
                <summary>"Override"</summary>
                <fieldset class="bare content-mode">
                    <legend class="label">"Content"</legend>
                    {radio("none", "Keep the capability's content")}
                    {radio("replace", "Replace it")}
                    {radio("append", "Append to it (after a blank line)")}
                </fieldset>
                <label class="field wide">
                    <span class="label">{move || match content_mode() {
                        "replace" => "Replacement content",
                        "append" => "Appended content",
                        _ => "Content (choose Replace or Append first)",
                    }}</span>
                    <textarea id=format!("cap-{i}-content") name="binding-content" rows=4 spellcheck="false"
                        disabled=move || content_mode() == "none"
                        prop:value=content_text
                        on:input=move |e| {
                            let key = if content_mode() == "replace" { "/overrides/content" } else { "/overrides/appendContent" };
                            ed.set(&p(key), Some(Value::String(event_target_value(&e))));
                        }></textarea>
                </label>
                <ToolListOverride i list="add" label="Tools the capability adds"/>
                <ToolListOverride i list="remove" label="Tools the capability removes"/>
            </details>
        </div>
    }
}

/// One of `overrides.tools.add` / `.remove`: inherit the capability's list, or replace it with an
/// explicit list (`[]` clears it).
#[component]
fn ToolListOverride(i: usize, list: &'static str, label: &'static str) -> impl IntoView {
    let ed = app().editor;
    let path = format!("/capabilities/{i}/overrides/tools/{list}");
    let read = path.clone();
    let replaced = Memo::new(move |_| ed.draft.with(|d| jp::get(d, &read).is_some()));
    let read2 = path.clone();
    let selected = Signal::derive(move || ed.draft.with(|d| names(jp::get(d, &read2))));
    let write = path.clone();
    let on_change = Callback::new(move |l: Vec<String>| ed.set(&write, Some(json!(l))));
    let toggle = path.clone();
    view! {
        <div class="tool-override field wide" data-list=list>
            <label class="check">
                <input type="checkbox" id=format!("cap-{i}-{list}") name=format!("binding-replace-{list}")
                    prop:checked=move || replaced.get()
                    on:change=move |e| {
                        let on = event_target_checked(&e);
                        ed.draft.update(|d| {
                            jp::set(d, &toggle, on.then(|| json!([])));
                            tidy_overrides(d, i);
                        });
                    }/>
                <span>{format!("Replace: {label}")}</span>
            </label>
            <Show when=move || replaced.get() fallback=|| view! { <p class="muted">"Inherited from the capability."</p> }>
                <ToolList name=format!("binding-{i}-{list}") title=label list=selected set=on_change/>
            </Show>
        </div>
    }
}

/// The effective capability of a resolved binding, and what its overrides changed.
#[component]
fn EffectiveView(key: String, base: CapView, effective: CapView) -> impl IntoView {
    let overridden = base != effective;
    let content_diff: Vec<DiffLine> = if base.content != effective.content {
        diff_lines(&base.content, &effective.content)
    } else {
        Vec::new()
    };
    let patch_text = |t: &ToolPatch| {
        let mut parts: Vec<String> = t.add.iter().map(|n| format!("+{n}")).collect();
        parts.extend(t.remove.iter().map(|n| format!("−{n}")));
        if parts.is_empty() {
            "no tool changes".to_string()
        } else {
            parts.join(" ")
        }
    };
    let tools_changed = base.tools != effective.tools;
    view! {
        <div class="effective" data-key=key.clone()>
            <p class="label">{if overridden { format!("Effective capability ({key}, overridden)") } else { format!("Effective capability ({key})") }}</p>
            <pre class="effective-content">{effective.content.clone()}</pre>
            <p class="effective-tools">{format!("Tools: {}", patch_text(&effective.tools))}</p>
            {overridden.then(|| view! {
                <div class="override-diff">
                    <p class="label">"Changed by the overrides, against the library definition:"</p>
                    {(!content_diff.is_empty()).then(|| view! {
                        <pre class="content-diff">
                            {content_diff.iter().map(|l| {
                                let (class, mark) = match l.tag {
                                    LineTag::Added => ("add", "+ "),
                                    LineTag::Removed => ("del", "− "),
                                    _ => ("same", "  "),
                                };
                                let text: String = l.spans.iter().map(|s| s.text.as_str()).collect();
                                view! { <span class=format!("diff-line {class}")>{format!("{mark}{text}\n")}</span> }
                            }).collect_view()}
                        </pre>
                    })}
                    {tools_changed.then(|| view! {
                        <p class="tools-diff">{format!("Tools: {} → {}", patch_text(&base.tools), patch_text(&effective.tools))}</p>
                    })}
                </div>
            })}
        </div>
    }
}

/// The tool effect preview: the Preset's effective tools (policy, `tools.initial`, then every
/// bound capability's tool patch) against the session's active tools.
#[component]
pub fn ToolEffect(infos: Memo<Vec<RowInfo>>) -> impl IntoView {
    let app = app();
    let ed = app.editor;
    // The runtime snapshot lists the tools in registry order, as the live calculation sees them;
    // until it arrives (or when it cannot be read) the resource list stands in.
    let runtime: RwSignal<Option<RuntimeSnapshot>> = RwSignal::new(None);
    spawn_while(runtime, async move {
        if let Ok(v) = api::get_as::<RuntimeSnapshot>("/api/runtime").await {
            runtime.set(Some(v));
        }
    });
    let rows = Memo::new(move |_| {
        let from_runtime = runtime.with(|r| r.as_ref().is_some_and(|v| !v.tools.is_empty()));
        let names = |tools: Vec<(String, bool)>| -> (Vec<String>, Vec<String>) {
            (
                tools.iter().map(|t| t.0.clone()).collect(),
                tools.into_iter().filter(|t| t.1).map(|t| t.0).collect(),
            )
        };
        let (registered, active): (Vec<String>, Vec<String>) = if from_runtime {
            names(runtime.with(|r| {
                r.as_ref()
                    .map(|r| r.tools.iter().map(|t| (t.name.clone(), t.active)).collect())
                    .unwrap_or_default()
            }))
        } else {
            names(
                app.resources()
                    .with(|r| r.tools.iter().map(|t| (t.name.clone(), t.active)).collect()),
            )
        };
        let policy = ed.draft.with(|d| {
            if d.is_null() {
                return None;
            }
            parse_stack_value(d.clone(), &ParseOptions::new("draft.json"))
                .stack
                .tools
        });
        let patches: Vec<(String, ToolPatch)> = infos.with(|v| {
            v.iter()
                .filter_map(|r| match &r.outcome {
                    Outcome::Resolved { key, effective, .. } => {
                        Some((key.clone(), effective.tools.clone()))
                    }
                    _ => None,
                })
                .collect()
        });
        let reg: Vec<&str> = registered.iter().map(String::as_str).collect();
        let act: Vec<&str> = active.iter().map(String::as_str).collect();
        let line = |ps: &[&ToolPatch]| {
            let eff = capability::tools::effective_tools(policy.as_ref(), &reg, &act, ps);
            let (added, removed) = tool_delta(&act, &eff);
            (
                eff.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                added.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                removed.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            )
        };
        let mut out = vec![("The Preset alone".to_string(), line(&[]))];
        if !patches.is_empty() {
            let all: Vec<&ToolPatch> = patches.iter().map(|(_, p)| p).collect();
            out.push((
                "With every bound capability enabled".to_string(),
                line(&all),
            ));
        }
        (active, out)
    });
    view! {
        <section class="card tool-effect">
            <h3>"Tool effect"</h3>
            <p class="help">"The tools the model gets, computed like the live session does (policy ceiling, default tools, then the capabilities' adds and removes; removal wins, the ceiling wins over adds), shown against the session's active tools."</p>
            {move || {
                let (active, lines) = rows.get();
                view! {
                    <p class="tool-effect-active">{format!("Active now: {}", if active.is_empty() { "none".to_string() } else { active.join(", ") })}</p>
                    <ul class="tool-effect-lines">
                        {lines.into_iter().map(|(label, (eff, added, removed))| {
                            let delta = {
                                let mut parts: Vec<String> = added.iter().map(|n| format!("+{n}")).collect();
                                parts.extend(removed.iter().map(|n| format!("−{n}")));
                                if parts.is_empty() { "no change".to_string() } else { parts.join(" ") }
                            };
                            view! {
                                <li class="tool-effect-line">
                                    <span class="label">{label}</span>
                                    <span class="tool-delta">{delta}</span>
                                    <span class="tool-list">{format!("→ {}", if eff.is_empty() { "no tools".to_string() } else { eff.join(", ") })}</span>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }
            }}
        </section>
    }
}

/// The tool effect preview for the Policy tab: loads the library itself to know the bindings'
/// tool patches.
#[component]
pub fn PolicyToolEffect() -> impl IntoView {
    let ed = app().editor;
    let lib: LibrarySignal = RwSignal::new(None);
    follow_library(lib);
    let infos = Memo::new(move |_| {
        let owner = preset_scope(ed);
        lib.with(|l| {
            let l = l.as_ref().and_then(|r| r.as_ref().ok());
            ed.draft.with(|d| row_infos(d, owner, l))
        })
    });
    view! { <ToolEffect infos/> }
}
