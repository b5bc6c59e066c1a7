//! The Items tab: the ordered item list (click, drag-and-drop, keyboard reordering, enable
//! toggles) and the editor of the selected block or slot.

use forge_core::stack::slot_schema::{slot_schema, unknown_options, OptionKind, SLOT_SCHEMAS};
use leptos::ev;
use leptos::prelude::*;
use serde_json::{json, Value};

use crate::dom::focus_later;
use crate::jp;
use crate::state::{app, StackEditor};
use crate::widgets::{json_field, select_field, text_field};

const ROLES: [(&str, &str); 3] = [
    ("system", "system"),
    ("user", "user"),
    ("assistant", "assistant"),
];

/// The draft's items (none when `items` is not an array yet).
fn items(draft: &Value) -> &[Value] {
    draft
        .get("items")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn item_count(ed: StackEditor) -> usize {
    ed.draft.with(|d| items(d).len())
}

/// Moves item `from` to position `to`, keeping the selection (and buffers) with it.
pub fn move_item(ed: StackEditor, from: usize, to: usize) {
    let len = ed.draft.with_untracked(|d| items(d).len());
    if from >= len || to >= len || from == to {
        return;
    }
    ed.draft.update(|d| {
        if let Some(items) = jp::array_mut(d, "/items") {
            let item = items.remove(from);
            items.insert(to, item);
        }
    });
    // Unparsed option text follows its item.
    ed.buffers.update(|b| {
        let moved: Vec<_> = b
            .keys()
            .filter(|k| k.starts_with("item:"))
            .cloned()
            .collect();
        let mut re = Vec::new();
        for k in moved {
            let v = b.remove(&k).unwrap_or_default();
            let mut parts = k.splitn(3, ':');
            let (_, idx, rest) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
            let Some(i) = idx.and_then(|i| i.parse::<usize>().ok()) else {
                continue;
            };
            let j = if i == from {
                to
            } else if from < to && i > from && i <= to {
                i - 1
            } else if to < from && i >= to && i < from {
                i + 1
            } else {
                i
            };
            re.push((format!("item:{j}:{rest}"), v));
        }
        b.extend(re);
    });
    ed.item.set(Some(to));
}

fn add_item(ed: StackEditor, kind: &str) {
    let ids: Vec<String> = ed
        .draft
        .with_untracked(|d| items(d).iter().map(|i| jp::get_str(i, "/id")).collect());
    let base = if kind == "slot" { "slot" } else { "block" };
    let id = (1..)
        .map(|n| format!("{base}-{n}"))
        .find(|c| !ids.contains(c))
        .unwrap_or_default();
    let item = if kind == "slot" {
        // The first built-in slot the Preset does not have yet: a second chat history is
        // skipped with a warning, and most slots are wanted once.
        let used: Vec<String> = ed
            .draft
            .with_untracked(|d| items(d).iter().map(|i| jp::get_str(i, "/slot")).collect());
        let slot = forge_core::stack::BUILTIN_SLOTS
            .iter()
            .find(|s| !used.iter().any(|u| u == *s))
            .copied()
            .unwrap_or("tools");
        if slot == "chat-history" {
            json!({ "kind": "slot", "id": id, "slot": slot })
        } else {
            // Every other slot renders into a message of a role: without one it is left out.
            json!({ "kind": "slot", "id": id, "role": "system", "slot": slot })
        }
    } else {
        json!({ "kind": "block", "id": id, "role": "system", "content": "" })
    };
    let at = ed
        .item
        .get_untracked()
        .map(|i| i + 1)
        .unwrap_or(ids.len())
        .min(ids.len());
    ed.draft.update(|d| {
        if let Some(items) = jp::array_mut(d, "/items") {
            items.insert(at, item);
        }
    });
    // Unparsed option text follows its item.
    ed.reindex_buffers("item:", |i| Some(if i >= at { i + 1 } else { i }));
    ed.item.set(Some(at));
    focus_later(format!(".item-row[data-index='{at}']"));
}

#[component]
pub fn ItemsTab() -> impl IntoView {
    let ed = app().editor;
    let count = Memo::new(move |_| item_count(ed));
    let dragging: RwSignal<Option<usize>> = RwSignal::new(None);
    let drop_at: RwSignal<Option<usize>> = RwSignal::new(None);
    view! {
        <div class="items-tab">
            <div class="item-list-wrap">
                <div class="list-head">
                    <span class="label">{move || format!("Items ({})", count.get())}</span>
                    <button class="add-block" on:click=move |_| add_item(ed, "block")>"+ Block"</button>
                    <button class="add-slot" on:click=move |_| add_item(ed, "slot")>"+ Slot"</button>
                </div>
                <ol class="item-list" aria-label="Items (Alt+↑/↓ moves the focused item)">
                    <For each=move || 0..count.get() key=|i| *i let:i>
                        <ItemRow i dragging drop_at count/>
                    </For>
                </ol>
                <p class="hint">"Drag to reorder, or focus an item and press Alt+↑ / Alt+↓."</p>
            </div>
            <div class="item-editor">
                {move || match ed.item.get().filter(|i| *i < count.get()) {
                    Some(i) => view! { <ItemEditor i/> }.into_any(),
                    None => view! { <p class="muted">"No item selected. Add a block or a slot."</p> }.into_any(),
                }}
            </div>
        </div>
    }
}

/// Below the phone breakpoint the item editor sits under the list: after a tap on an item,
/// scroll its editor into view. Nothing moves when the editor's top is already on screen (as
/// beside the list on a desktop).
fn reveal_item_editor() {
    request_animation_frame(|| {
        let Some(window) = web_sys::window() else {
            return;
        };
        let Some(el) = window
            .document()
            .and_then(|d| d.query_selector(".item-editor").ok().flatten())
        else {
            return;
        };
        let height = window
            .inner_height()
            .ok()
            .and_then(|h| h.as_f64())
            .unwrap_or(0.0);
        let top = el.get_bounding_client_rect().top();
        if top < 0.0 || top > height - 80.0 {
            let options = web_sys::ScrollIntoViewOptions::new();
            options.set_block(web_sys::ScrollLogicalPosition::Start);
            el.scroll_into_view_with_scroll_into_view_options(&options);
        }
    });
}

#[component]
fn ItemRow(
    i: usize,
    dragging: RwSignal<Option<usize>>,
    drop_at: RwSignal<Option<usize>>,
    count: Memo<usize>,
) -> impl IntoView {
    let ed = app().editor;
    let field = move |key: &'static str| {
        ed.draft
            .with(|d| jp::get_str(d, &format!("/items/{i}/{key}")))
    };
    let enabled = move || {
        ed.draft
            .with(|d| jp::get_bool(d, &format!("/items/{i}/enabled")) != Some(false))
    };
    let label = move || {
        let name = field("name");
        if name.trim().is_empty() {
            field("id")
        } else {
            name
        }
    };
    let meta = move || {
        let kind = field("kind");
        if kind == "slot" {
            format!("slot · {}", field("slot"))
        } else {
            // A block without a role is left out by the compiler: never show a role it lacks.
            let role = field("role");
            if role.is_empty() {
                "block · no role: left out".to_string()
            } else {
                format!("block · {role}")
            }
        }
    };
    let selected = move || ed.item.get() == Some(i);
    let on_key = move |e: ev::KeyboardEvent| {
        let n = count.get_untracked();
        let key = e.key();
        let target = match key.as_str() {
            "ArrowUp" if i > 0 => Some(i - 1),
            "ArrowDown" if i + 1 < n => Some(i + 1),
            "Home" => Some(0),
            "End" => Some(n.saturating_sub(1)),
            _ => None,
        };
        let Some(j) = target else { return };
        e.prevent_default();
        if e.alt_key() && matches!(key.as_str(), "ArrowUp" | "ArrowDown") {
            move_item(ed, i, j);
        } else {
            ed.item.set(Some(j));
        }
        focus_later(format!(".item-row[data-index='{j}']"));
    };
    view! {
        <li class="item-row" tabindex="0" draggable="true" data-index=i
            aria-current=move || selected().to_string()
            class:selected=selected
            class:disabled=move || !enabled()
            class:drop-target=move || drop_at.get() == Some(i) && dragging.get() != Some(i)
            on:click=move |_| { ed.item.set(Some(i)); reveal_item_editor(); }
            on:keydown=on_key
            on:dragstart=move |e: ev::DragEvent| {
                dragging.set(Some(i));
                if let Some(dt) = e.data_transfer() {
                    let _ = dt.set_data("text/plain", &i.to_string());
                    dt.set_effect_allowed("move");
                }
            }
            on:dragover=move |e: ev::DragEvent| { e.prevent_default(); drop_at.set(Some(i)); }
            on:dragleave=move |_| if drop_at.get_untracked() == Some(i) { drop_at.set(None) }
            on:drop=move |e: ev::DragEvent| {
                e.prevent_default();
                if let Some(from) = dragging.get_untracked() { move_item(ed, from, i); }
                dragging.set(None);
                drop_at.set(None);
            }
            on:dragend=move |_| { dragging.set(None); drop_at.set(None); }>
            <span class="grip" aria-hidden="true">"⋮⋮"</span>
            <input type="checkbox" class="item-enabled" title="Enabled" aria-label="Enabled"
                prop:checked=enabled
                on:click=move |e| e.stop_propagation()
                on:change=move |e| {
                    let on = event_target_checked(&e);
                    ed.set(&format!("/items/{i}/enabled"), if on { None } else { Some(Value::Bool(false)) });
                }/>
            <span class="item-label">
                <span class="item-name">{label}</span>
                <span class="item-meta">{meta}</span>
            </span>
            <span class="move-buttons">
                <button class="icon up" tabindex="-1" aria-label="Move up" disabled=move || i == 0
                    on:click=move |e| { e.stop_propagation(); move_item(ed, i, i - 1); }>"↑"</button>
                <button class="icon down" tabindex="-1" aria-label="Move down" disabled=move || { i + 1 >= count.get() }
                    on:click=move |e| { e.stop_propagation(); move_item(ed, i, i + 1); }>"↓"</button>
            </span>
        </li>
    }
}

#[component]
fn ItemEditor(i: usize) -> impl IntoView {
    let ed = app().editor;
    let base = format!("/items/{i}");
    // A memo: the editor below is rebuilt only when the kind changes, not on every edit (which
    // would reset the slot editor's Form/JSON choice).
    let kind = Memo::new(move |_| {
        ed.draft
            .with(|d| jp::get_str(d, &format!("/items/{i}/kind")))
    });
    let kind_now = kind.get_untracked();
    let kind = move || kind.get();
    let remove = move |_| {
        let id = ed
            .draft
            .with_untracked(|d| jp::get_str(d, &format!("/items/{i}/id")));
        app().say(
            format!("Removed item {id}. Undo (Ctrl+Z) brings it back."),
            crate::state::Tone::Info,
        );
        ed.draft.update(|d| {
            if let Some(items) = jp::array_mut(d, "/items") {
                if i < items.len() {
                    items.remove(i);
                }
            }
        });
        ed.reindex_buffers("item:", |j| match j.cmp(&i) {
            std::cmp::Ordering::Less => Some(j),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(j - 1),
        });
        let n = item_count(ed);
        ed.item.set(if n == 0 { None } else { Some(i.min(n - 1)) });
    };
    view! {
        <div class="item-form" data-kind=kind>
            <div class="form-head">
                <span class="badge kind">{kind}</span>
                <button class="danger remove-item" on:click=remove>"Remove item"</button>
            </div>
            <div class="grid">
                {text_field(ed, format!("{base}/id"), "item-id", "Item ID", false)}
                {text_field(ed, format!("{base}/name"), "item-name", "Name", true)}
                {select_field(ed, format!("{base}/role"), "item-role", "Role", if kind_now == "block" { "(none: left out of the prompt)" } else { "(none)" }, ROLES.to_vec())}
                <label class="check">
                    <input type="checkbox" name="item-enabled"
                        prop:checked=move || ed.draft.with(|d| jp::get_bool(d, &format!("/items/{i}/enabled")) != Some(false))
                        on:change=move |e| ed.set(&format!("/items/{i}/enabled"), if event_target_checked(&e) { None } else { Some(Value::Bool(false)) })/>
                    <span>"Enabled"</span>
                </label>
            </div>
            {move || if kind() == "slot" {
                view! { <SlotEditor i/> }.into_any()
            } else {
                view! {
                    <crate::template_editor::TemplateEditor i/>
                    <button class="link new-capability-from-block" title="Opens a new capability with this block's text, as literal text"
                        on:click=move |_| {
                            let app = app();
                            let text = ed.draft.with_untracked(|d| jp::get_str(d, &format!("/items/{i}/content")));
                            app.capability_seed.set(Some(text));
                            app.surface.set(crate::state::Surface::Capabilities);
                        }>"New capability from this text"</button>
                }.into_any()
            }}
        </div>
    }
}

#[component]
fn SlotEditor(i: usize) -> impl IntoView {
    let ed = app().editor;
    let json_view = RwSignal::new(false);
    let slot = move || {
        ed.draft
            .with(|d| jp::get_str(d, &format!("/items/{i}/slot")))
    };
    let slot_now = Memo::new(move |_| slot());
    let choices: Vec<(&'static str, &'static str)> =
        SLOT_SCHEMAS.iter().map(|s| (s.slot, s.label)).collect();
    let key = format!("item:{i}:options");
    let has_buffer = {
        let key = key.clone();
        move || ed.buffers.with(|b| b.contains_key(&key))
    };
    view! {
        <div class="slot-editor">
            {select_field(ed, format!("/items/{i}/slot"), "item-slot", "Slot", "(choose)", choices)}
            {move || slot_schema(&slot()).map(|s| view! { <p class="help">{s.help}</p> })}
            <div class="options-head">
                <span class="label">"Options"</span>
                <div class="seg" role="group" aria-label="Options view">
                    <button class="seg-button form-view" class:current=move || !json_view.get()
                        disabled=has_buffer.clone()
                        title="The JSON has an error; fix it to use the form"
                        on:click=move |_| json_view.set(false)>"Form"</button>
                    <button class="seg-button json-view" class:current=move || json_view.get()
                        on:click=move |_| json_view.set(true)>"JSON"</button>
                </div>
            </div>
            {move || if json_view.get() || has_buffer() {
                json_field(ed, key.clone(), format!("/items/{i}/options"), "slot-options-json", "Slot options (JSON)", 8, true).into_any()
            } else {
                // Keyed by the slot: choosing another slot builds that slot's form.
                view! {
                    <For each=move || [slot_now.get()] key=|slot| slot.clone() let:_slot>
                        <OptionsForm i/>
                    </For>
                }
                .into_any()
            }}
        </div>
    }
}

/// The options form generated from the slot's schema; unknown options are listed and kept.
#[component]
fn OptionsForm(i: usize) -> impl IntoView {
    let ed = app().editor;
    let slot = ed
        .draft
        .with_untracked(|d| jp::get_str(d, &format!("/items/{i}/slot")));
    let Some(schema) = slot_schema(&slot) else {
        return view! { <p class="muted">"This slot is not built in; edit its options as JSON."</p> }.into_any();
    };
    let unknown = move || {
        ed.draft.with(|d| {
            jp::get(d, &format!("/items/{i}/options"))
                .and_then(Value::as_object)
                .map(|o| unknown_options(&slot, o))
                .unwrap_or_default()
        })
    };
    let fields = schema
        .options
        .iter()
        .map(|opt| {
            let path = format!("/items/{i}/options/{}", jp::tok(opt.name));
            let name = format!("opt-{}", opt.name);
            let help = opt.help;
            let default = opt.default.map(|d| format!("Default: {d}")).unwrap_or_default();
            let read = path.clone();
            let control = match opt.kind {
                OptionKind::Bool => {
                    let on = opt.default == Some("true");
                    view! {
                        <label class="check" title=help>
                            <input type="checkbox" name=name.clone()
                                prop:checked=move || ed.draft.with(|d| jp::get_bool(d, &read).unwrap_or(on))
                                on:change=move |e| ed.set(&path, Some(Value::Bool(event_target_checked(&e))))/>
                            <span>{opt.label}</span>
                        </label>
                    }.into_any()
                }
                OptionKind::Integer { min } => view! {
                    <label class="field" title=help>
                        <span class="label">{opt.label}</span>
                        <input type="number" name=name.clone() step="1" min=min.map(|m| m.to_string()) placeholder=opt.default.unwrap_or("")
                            prop:value=move || ed.draft.with(|d| jp::get(d, &read).map(|v| v.to_string()).unwrap_or_default())
                            on:input=move |e| {
                                let t = event_target_value(&e);
                                let v = t.trim().parse::<i64>().ok().map(Value::from);
                                if t.trim().is_empty() || v.is_some() { ed.set(&path, v); }
                            }/>
                    </label>
                }.into_any(),
                OptionKind::Text => view! {
                    <label class="field" title=help>
                        <span class="label">{opt.label}</span>
                        <input type="text" name=name.clone() placeholder=opt.default.unwrap_or("")
                            prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                            on:input=move |e| { let t = event_target_value(&e); ed.set(&path, if t.is_empty() { None } else { Some(Value::String(t)) }); }/>
                    </label>
                }.into_any(),
                OptionKind::Choice { values } => view! {
                    <label class="field" title=help>
                        <span class="label">{opt.label}</span>
                        <select name=name.clone()
                            prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                            on:change=move |e| { let t = event_target_value(&e); ed.set(&path, if t.is_empty() { None } else { Some(Value::String(t)) }); }>
                            <option value="">{format!("(default{})", opt.default.map(|d| format!(": {d}")).unwrap_or_default())}</option>
                            {values.iter().map(|v| view! { <option value=*v>{*v}</option> }).collect_view()}
                        </select>
                    </label>
                }.into_any(),
                OptionKind::Roles | OptionKind::TextList => {
                    let read2 = read.clone();
                    view! {
                        <label class="field" title=help>
                            <span class="label">{opt.label}</span>
                            <input type="text" name=name.clone() placeholder=opt.default.map(|d| d.to_string()).unwrap_or_else(|| "comma-separated".into())
                                prop:value=move || ed.draft.with(|d| {
                                    jp::get(d, &read2).and_then(Value::as_array)
                                        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                                        .unwrap_or_default()
                                })
                                on:change=move |e| {
                                    let t = event_target_value(&e);
                                    let list: Vec<Value> = t.split(',').map(str::trim).filter(|x| !x.is_empty()).map(|x| Value::String(x.into())).collect();
                                    ed.set(&path, if list.is_empty() { None } else { Some(Value::Array(list)) });
                                }/>
                        </label>
                    }.into_any()
                }
            };
            view! {
                <div class="option">
                    {control}
                    <span class="option-help">{help}" "{default}</span>
                </div>
            }
        })
        .collect_view();
    view! {
        <div class="options-form">
            {fields}
            {move || {
                let names = unknown();
                (!names.is_empty()).then(|| view! {
                    <p class="unknown-options">"Kept as written (not known to this form): " {names.join(", ")}</p>
                })
            }}
        </div>
    }
    .into_any()
}
