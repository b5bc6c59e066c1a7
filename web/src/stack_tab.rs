//! The Stack tab (metadata, context options, parameters) and the JSON tab (the whole stack as
//! text, with apply and repair).

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{Map, Value};

use crate::api::seg;
use crate::jp;
use crate::state::{app, StackEditor, Tone};
use crate::widgets::{check_field, json_field, select_field, text_area, text_field};

#[component]
pub fn StackTab() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let id = move || ed.draft.with(|d| jp::get_str(d, "/id"));
    let version = move || {
        ed.draft.with(|d| {
            jp::get(d, "/schemaVersion")
                .and_then(Value::as_u64)
                .unwrap_or(1)
        })
    };
    view! {
        <div class="stack-tab">
            <section class="card">
                <h3>"Metadata"</h3>
                <div class="grid">
                    <label class="field">
                        <span class="label">"Preset ID"</span>
                        <input type="text" name="stack-id" readonly class="readonly" prop:value=id
                            title="The id is the file name; fork the Preset to use another id."/>
                    </label>
                    {text_field(ed, "/name".into(), "stack-name", "Name", true)}
                    {select_field(ed, "/mode".into(), "stack-mode", "Mode", "replace (default)", vec![
                        ("replace", "replace: the stack is the whole system prompt"),
                        ("append", "append: after Pi's system prompt"),
                        ("prepend", "prepend: before Pi's system prompt"),
                    ])}
                    <label class="field">
                        <span class="label">"Schema"</span>
                        <input type="text" readonly class="readonly" prop:value=move || format!("version {}", version())/>
                    </label>
                    {check_field(ed, "/autoActivate".into(), "stack-auto-activate", "Activate automatically in new sessions", false, true)}
                </div>
                {text_area(ed, "/description".into(), "stack-description", "Description", 2)}
            </section>
            <section class="card">
                <h3>"Context"</h3>
                {check_field(ed, "/context/allowDuplicateChatHistory".into(), "allow-duplicate-history",
                    "Allow more than one chat-history slot", false, true)}
            </section>
            <Parameters/>
        </div>
    }
}

/// Template parameters: schema 2 `parameters` (any JSON value, edited as typed JSON), schema 1
/// `variables` (strings).
#[component]
fn Parameters() -> impl IntoView {
    let ed = app().editor;
    // A memo: the rows are rebuilt when the member or the names change, not on every edit.
    let v2 = Memo::new(move |_| {
        ed.draft.with(|d| {
            jp::get(d, "/schemaVersion").and_then(Value::as_u64) == Some(2)
                || jp::get(d, "/parameters").is_some()
        })
    });
    let v2 = move || v2.get();
    let member = move || if v2() { "parameters" } else { "variables" };
    let names = Memo::new(move |_| {
        let m = member();
        ed.draft.with(|d| {
            jp::get(d, &format!("/{m}"))
                .and_then(Value::as_object)
                .map(|o| o.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        })
    });
    let add = move |_| {
        let m = member();
        let existing = names.get_untracked();
        let name = (1..)
            .map(|n| format!("var{n}"))
            .find(|c| !existing.contains(c))
            .unwrap_or_default();
        let value = Value::String(String::new());
        ed.set(&format!("/{m}/{}", jp::tok(&name)), Some(value));
    };
    view! {
        <section class="card parameters">
            <h3>{move || if v2() { "Parameters" } else { "Variables" }}</h3>
            <p class="help">{move || if v2() {
                "Values are JSON: text in quotes, numbers, true/false, lists and objects keep their type. Templates read them as {{ parameters.name }}."
            } else {
                "Schema 1 variables are text. Templates read them as {{ parameters.name }}."
            }}</p>
            <div class="param-rows">
                {move || {
                    let m = member();
                    names.get().into_iter().enumerate().map(|(idx, name)| view! { <ParamRow member=m idx name/> }).collect_view()
                }}
            </div>
            <button class="add-param" on:click=add>{move || if v2() { "Add parameter" } else { "Add variable" }}</button>
        </section>
    }
}

/// Renames the key at `idx` of the object at `/member`, keeping its position.
fn rename_key(ed: StackEditor, member: &str, idx: usize, from: &str, to: &str) {
    // Unparsed value text moves with its parameter.
    ed.buffers.update(|b| {
        if let Some(v) = b.remove(&format!("{member}:{from}")) {
            b.insert(format!("{member}:{to}"), v);
        }
    });
    ed.draft.update(|d| {
        if let Some(Value::Object(obj)) = d.pointer_mut(&format!("/{member}")) {
            let entries: Vec<(String, Value)> = std::mem::take(obj).into_iter().collect();
            let mut out = Map::new();
            for (i, (k, v)) in entries.into_iter().enumerate() {
                out.insert(if i == idx { to.to_string() } else { k }, v);
            }
            *obj = out;
        }
    });
}

#[component]
fn ParamRow(member: &'static str, idx: usize, name: String) -> impl IntoView {
    let ed = app().editor;
    let name_key = format!("{member}-name:{idx}");
    let value_key = format!("{member}:{}", name);
    let value_path = format!("/{member}/{}", jp::tok(&name));
    // What the user typed, committed (renamed) on change; an invalid name is kept with its
    // error in the editor's buffers, so it survives tab switches and blocks saving.
    let typed: RwSignal<Option<String>> = RwSignal::new(None);
    let shown_name = {
        let name_key = name_key.clone();
        let name = name.clone();
        move || {
            ed.buffers
                .with(|b| b.get(&name_key).map(|(t, _)| t.clone()))
                .or_else(|| typed.get())
                .unwrap_or_else(|| name.clone())
        }
    };
    let name_error = {
        let name_key = name_key.clone();
        move || {
            ed.buffers
                .with(|b| b.get(&name_key).map(|(_, e)| e.clone()))
        }
    };
    let check = {
        let name_key = name_key.clone();
        move |typed: &str| -> bool {
            let others: Vec<String> = ed.draft.with_untracked(|d| {
                jp::get(d, &format!("/{member}"))
                    .and_then(Value::as_object)
                    .map(|o| {
                        o.keys()
                            .enumerate()
                            .filter(|(i, _)| *i != idx)
                            .map(|(_, k)| k.clone())
                            .collect()
                    })
                    .unwrap_or_default()
            });
            let label = if member == "parameters" {
                "parameter"
            } else {
                "variable"
            };
            let error = if typed.trim().is_empty() {
                Some(format!("A {label} needs a name."))
            } else if others.iter().any(|o| o == typed) {
                Some(format!("Duplicate {label} name: {typed}"))
            } else {
                None
            };
            let ok = error.is_none();
            ed.set_buffer(&name_key, typed.to_string(), error);
            ok
        }
    };
    let check2 = check.clone();
    let on_name = move |e: leptos::ev::Event| {
        let t = event_target_value(&e);
        check(&t);
        typed.set(Some(t));
    };
    let current = name.clone();
    let on_commit = move |e: leptos::ev::Event| {
        let t = event_target_value(&e);
        if check2(&t) && t != current {
            rename_key(ed, member, idx, &current, &t);
        }
    };
    let remove = {
        let value_path = value_path.clone();
        let name_key = name_key.clone();
        let value_key = value_key.clone();
        move |_| {
            ed.set(&value_path, None);
            ed.set_buffer(&name_key, String::new(), None);
            ed.set_buffer(&value_key, String::new(), None);
            // The rows below move up one: their unparsed names follow them.
            ed.reindex_buffers(&format!("{member}-name:"), |j| match j.cmp(&idx) {
                std::cmp::Ordering::Less => Some(j),
                std::cmp::Ordering::Equal => None,
                std::cmp::Ordering::Greater => Some(j - 1),
            });
        }
    };
    let value_editor = if member == "parameters" {
        json_field(
            ed,
            value_key,
            value_path,
            "param-value",
            "Value (JSON)",
            2,
            false,
        )
        .into_any()
    } else {
        let read = value_path.clone();
        view! {
            <input type="text" name="param-value" aria-label="Value"
                prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                on:input=move |e| ed.set(&value_path, Some(Value::String(event_target_value(&e))))/>
        }
        .into_any()
    };
    view! {
        <div class="param-row">
            <div class="param-name">
                <input type="text" name="param-name" aria-label="Name" prop:value=shown_name on:input=on_name on:change=on_commit
                    class:invalid={ let ne = name_error.clone(); move || ne().is_some() }/>
                {move || name_error().map(|e| view! { <p class="field-error" role="alert">{e}</p> })}
            </div>
            <div class="param-value">{value_editor}</div>
            <button class="icon remove-param" aria-label="Remove" title="Remove" on:click=remove>"✕"</button>
        </div>
    }
}

/// The whole stack as JSON: edit freely, then apply to the editor. For a file that is not JSON
/// at all, the file's own text is loaded here so it can be repaired.
#[component]
pub fn JsonTab() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    // Unapplied text lives in the editor state (it survives tab switches); without any, the
    // tab shows the draft as it is now.
    let text = move || {
        ed.json_scratch.get().unwrap_or_else(|| {
            ed.draft.with(|d| {
                if d.is_null() {
                    String::new()
                } else {
                    jp::pretty(d)
                }
            })
        })
    };
    let error: RwSignal<Option<String>> = RwSignal::new(None);
    let broken = ed
        .loaded
        .with_untracked(|l| l.as_ref().is_some_and(|l| l.saved.is_null()));
    if broken && ed.json_scratch.with_untracked(Option::is_none) {
        if let Some(sel) = ed
            .loaded
            .with_untracked(|l| l.as_ref().map(|l| l.selector.clone()))
        {
            spawn_local(async move {
                let url = format!("/api/stacks/{}/export", seg(&sel));
                if let Ok(resp) = gloo_net::http::Request::get(&url).send().await {
                    if let Ok(t) = resp.text().await {
                        // Never over text the user already started typing.
                        if ed.json_scratch.with_untracked(Option::is_none) {
                            ed.json_origin.set(Some(t.clone()));
                            ed.json_scratch.set(Some(t));
                        }
                    }
                }
            });
        }
    }
    let apply = move |_| {
        let t = text();
        let parsed = match serde_json::from_str::<Value>(&t) {
            Ok(v) => v,
            Err(e) => {
                error.set(Some(format!("Stack JSON is not valid JSON: {e}")));
                return;
            }
        };
        if !parsed.is_object() {
            error.set(Some("Stack JSON must be an object.".into()));
            return;
        }
        if !parsed.get("items").is_some_and(Value::is_array) {
            error.set(Some("Stack JSON needs an items array.".into()));
            return;
        }
        let loaded_id = ed
            .loaded
            .with_untracked(|l| l.as_ref().map(|l| l.id.clone()).unwrap_or_default());
        if !broken && jp::get_str(&parsed, "/id") != loaded_id {
            error.set(Some(format!(
                "The id must stay {loaded_id}; fork the Preset to change it."
            )));
            return;
        }
        error.set(None);
        ed.buffers.set(Default::default());
        ed.draft.set(parsed);
        ed.json_scratch.set(None);
        ed.json_origin.set(None);
        app.say("Applied stack JSON to editor", Tone::Ok);
    };
    let reset = move |_| {
        ed.json_scratch.set(None);
        error.set(None);
    };
    view! {
        <div class="json-tab">
            <p class="help">"The Preset exactly as it will be saved, unknown fields included. Edit it, then apply it to the editor; nothing is saved until you Save."</p>
            <textarea name="stack-json" aria-label="The Preset as JSON" rows="24" spellcheck="false" class:invalid=move || error.with(Option::is_some)
                prop:value=text on:input=move |e| ed.json_scratch.set(Some(event_target_value(&e)))></textarea>
            {move || ed.json_pending().then(|| view! {
                <p class="field-note unapplied">"Edited here and not applied yet: Save does not include this text."</p>
            })}
            {move || error.get().map(|e| view! { <p class="field-error" role="alert">{e}</p> })}
            <div class="row">
                <button class="primary apply-json" on:click=apply>"Apply to editor"</button>
                <button class="reset-json" on:click=reset disabled=move || broken || !ed.json_pending()>"Reset to the editor's version"</button>
            </div>
        </div>
    }
}
