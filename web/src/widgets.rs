//! Form controls bound to a JSON pointer of the open draft.
//!
//! Every control reads the draft reactively and writes through [`StackEditor::set`], so a
//! control never re-renders while the user types, and members it does not know stay put.

use leptos::prelude::*;
use serde_json::Value;

use crate::jp;
use crate::state::StackEditor;

/// A text input for a string member; an empty value removes the member when `remove_empty`.
pub fn text_field(
    ed: StackEditor,
    path: String,
    name: &'static str,
    label: &'static str,
    remove_empty: bool,
) -> impl IntoView {
    let read = path.clone();
    view! {
        <label class="field">
            <span class="label">{label}</span>
            <input type="text" name=name
                prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                on:input=move |e| {
                    let v = event_target_value(&e);
                    let value = if v.is_empty() && remove_empty { None } else { Some(Value::String(v)) };
                    ed.set(&path, value);
                }/>
        </label>
    }
}

/// A multi-line text member.
pub fn text_area(
    ed: StackEditor,
    path: String,
    name: &'static str,
    label: &'static str,
    rows: u32,
) -> impl IntoView {
    let read = path.clone();
    view! {
        <label class="field wide">
            <span class="label">{label}</span>
            <textarea name=name rows=rows spellcheck="false"
                prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                on:input=move |e| ed.set(&path, Some(Value::String(event_target_value(&e))))></textarea>
        </label>
    }
}

/// A checkbox for a boolean member. Unchecking writes `false` unless `remove_false`.
pub fn check_field(
    ed: StackEditor,
    path: String,
    name: &'static str,
    label: &'static str,
    default: bool,
    remove_false: bool,
) -> impl IntoView {
    let read = path.clone();
    view! {
        <label class="check">
            <input type="checkbox" name=name
                prop:checked=move || ed.draft.with(|d| jp::get_bool(d, &read).unwrap_or(default))
                on:change=move |e| {
                    let on = event_target_checked(&e);
                    ed.set(&path, if !on && remove_false { None } else { Some(Value::Bool(on)) });
                }/>
            <span>{label}</span>
        </label>
    }
}

/// A select over string values; the empty choice removes the member.
pub fn select_field(
    ed: StackEditor,
    path: String,
    name: &'static str,
    label: &'static str,
    empty_label: &'static str,
    choices: Vec<(&'static str, &'static str)>,
) -> impl IntoView {
    let read = path.clone();
    let read2 = path.clone();
    let known: Vec<&'static str> = choices.iter().map(|(value, _)| *value).collect();
    let options = choices
        .into_iter()
        .map(|(value, text)| view! { <option value=value>{text}</option> })
        .collect_view();
    // A value the choices do not list (a newer Pi's) stays selectable, listed once.
    let extra = move || {
        let current = ed.draft.with(|d| jp::get_str(d, &read2));
        (!current.is_empty() && !known.contains(&current.as_str()))
            .then(|| view! { <option value=current.clone()>{current.clone()}</option> })
    };
    view! {
        <label class="field">
            <span class="label">{label}</span>
            <select name=name
                prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                on:change=move |e| {
                    let v = event_target_value(&e);
                    ed.set(&path, if v.is_empty() { None } else { Some(Value::String(v)) });
                }>
                <option value="">{empty_label}</option>
                {options}
                {extra}
            </select>
        </label>
    }
}

/// A JSON value editor: the text is parsed as the user types. Valid JSON replaces the member
/// (typed: objects stay objects); invalid text is kept in a buffer with its error, which
/// blocks saving until fixed.
pub fn json_field(
    ed: StackEditor,
    key: String,
    path: String,
    name: &'static str,
    label: &'static str,
    rows: u32,
    require_object: bool,
) -> impl IntoView {
    let key_read = key.clone();
    let key_err = key.clone();
    let read = path.clone();
    // The valid text last typed here: shown as typed (not reformatted under the caret) while
    // it still means the member's value.
    let typed: StoredValue<Option<String>> = StoredValue::new(None);
    let text = move || {
        ed.buffers
            .with(|b| b.get(&key_read).map(|(t, _)| t.clone()))
            .unwrap_or_else(|| {
                ed.draft.with(|d| {
                    let value = jp::get(d, &read);
                    typed
                        .get_value()
                        .filter(|t| parse_json(t, require_object).ok().flatten().as_ref() == value)
                        .unwrap_or_else(|| value.map(jp::pretty).unwrap_or_default())
                })
            })
    };
    let error = move || ed.buffers.with(|b| b.get(&key_err).map(|(_, e)| e.clone()));
    view! {
        <div class="json-field">
            <textarea name=name aria-label=label rows=rows spellcheck="false" class:invalid={ let er = error.clone(); move || er().is_some() }
                prop:value=text
                on:input=move |e| {
                    let t = event_target_value(&e);
                    match parse_json(&t, require_object) {
                        Ok(v) => {
                            typed.set_value(Some(t.clone()));
                            ed.set_buffer(&key, t, None);
                            ed.set(&path, v);
                        }
                        Err(msg) => ed.set_buffer(&key, t, Some(msg)),
                    }
                }></textarea>
            {move || error().map(|e| view! { <p class="field-error" role="alert">{e}</p> })}
        </div>
    }
}

/// Parses editor text. An object field (slot options) treats blank text as "no member"; a
/// value field (a parameter) needs a value.
pub fn parse_json(text: &str, require_object: bool) -> Result<Option<Value>, String> {
    if text.trim().is_empty() {
        return if require_object {
            Ok(None)
        } else {
            Err("Enter a JSON value (\"\" for empty text).".into())
        };
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v) if require_object && !v.is_object() => Err("Must be a JSON object.".into()),
        Ok(v) => Ok(Some(v)),
        Err(_) if !require_object && is_bare_text(text) => Err(bare_text_problem(text.trim())),
        Err(e) => Err(format!("Invalid JSON: {e}")),
    }
}

/// Text typed without quotes (`calm`, `two words`): it starts like a word, not like any JSON
/// value (`true`, `false` and `null` parse before this is asked).
fn is_bare_text(text: &str) -> bool {
    text.trim_start()
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// What to type instead of bare text: the value is JSON, so text goes in double quotes.
fn bare_text_problem(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""));
    format!("Text goes in double quotes: {quoted}. A value is JSON: a number, true, false, null, [a list] or {{an object}} go as they are.")
}

/// ↑/↓, Home and End move the focus between a popup menu's entries (`items`: a selector of
/// every entry); ↓ on the last and ↑ on the first wrap around.
pub fn menu_keys(e: &leptos::ev::KeyboardEvent, items: &str) {
    use wasm_bindgen::JsCast;
    let key = e.key();
    if !matches!(key.as_str(), "ArrowDown" | "ArrowUp" | "Home" | "End") {
        return;
    }
    e.prevent_default();
    let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let Ok(list) = doc.query_selector_all(items) else {
        return;
    };
    let items: Vec<web_sys::HtmlElement> = (0..list.length())
        .filter_map(|i| list.item(i))
        .filter_map(|n| n.dyn_into::<web_sys::HtmlElement>().ok())
        .collect();
    if items.is_empty() {
        return;
    }
    let active = doc.active_element();
    let at = items.iter().position(|el| {
        active
            .as_ref()
            .is_some_and(|a| a == el.as_ref() as &web_sys::Element)
    });
    let last = items.len() - 1;
    let next = match (key.as_str(), at) {
        ("Home", _) => 0,
        ("End", _) => last,
        ("ArrowDown", Some(i)) if i < last => i + 1,
        ("ArrowDown", _) => 0,
        ("ArrowUp", Some(i)) if i > 0 => i - 1,
        _ => last,
    };
    let _ = items[next].focus();
}
