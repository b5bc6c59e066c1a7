//! Small DOM helpers every part of the app may use: focus after a render, the dialog's Tab
//! trap, performance marks, the first screen the server drew.

use leptos::prelude::request_animation_frame;
use wasm_bindgen::JsCast;

pub fn document() -> Option<web_sys::Document> {
    web_sys::window().and_then(|w| w.document())
}

/// The id of the server-drawn first screen (server/src/http/first_screen.rs).
pub use forge_core::api::FIRST_SCREEN_ID;

/// A performance mark (read by `cargo xtask bench`; see e2e/examples/navbench.rs).
pub fn mark(name: &str) {
    if let Some(perf) = web_sys::window().and_then(|w| w.performance()) {
        let _ = perf.mark(name);
    }
}

/// Focuses the element matching `selector` on the next frame (after the DOM update), or on a
/// later one within about a second: a lazily loaded view (`split`) is on the page only once its
/// chunk has arrived.
pub fn focus_later(selector: String) {
    focus_within_frames(selector, 60);
}

/// Tries on each of the next `frames` animation frames.
fn focus_within_frames(selector: String, frames: u32) {
    request_animation_frame(move || {
        match web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.query_selector(&selector).ok().flatten())
            .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
        {
            Some(el) => {
                let _ = el.focus();
            }
            None if frames > 1 => focus_within_frames(selector, frames - 1),
            None => {}
        }
    });
}

/// The Preset whose row was clicked on the page's own first screen before the app started
/// (assets/boot.js remembers it in `window.__forgeFirstScreenOpen`); taken once. When that row
/// still has the focus, the app's row gets it.
pub fn take_first_screen_click() -> Option<String> {
    const KEY: &str = "__forgeFirstScreenOpen";
    let window = web_sys::window()?;
    let key = wasm_bindgen::JsValue::from_str(KEY);
    let selector = js_sys::Reflect::get(&window, &key).ok()?.as_string()?;
    let _ = js_sys::Reflect::delete_property(&window, &key);
    let focused = window
        .document()
        .and_then(|d| d.active_element())
        .is_some_and(|a| {
            a.closest(&format!("#{}", FIRST_SCREEN_ID))
                .ok()
                .flatten()
                .is_some()
                && a.get_attribute("data-selector").as_deref() == Some(selector.as_str())
        });
    // Selectors are `scope:id` with ids of letters, digits, `-`, `_` and `.`: safe in quotes.
    if focused && !selector.contains(['"', '\\']) {
        focus_later(format!(".sidebar .stack-row[data-selector=\"{selector}\"]"));
    }
    Some(selector)
}

/// The dialog's focusable controls that are shown, in document order.
fn focusables(root: &web_sys::Element) -> Vec<web_sys::HtmlElement> {
    let mut out = Vec::new();
    let mut next = root.first_element_child();
    let mut stack = Vec::new();
    while let Some(el) = next {
        let tag = el.tag_name().to_ascii_lowercase();
        let focusable = match tag.as_str() {
            "button" | "input" | "select" | "textarea" => !el.has_attribute("disabled"),
            "summary" => true,
            "a" => el.has_attribute("href"),
            _ => el.get_attribute("tabindex").is_some_and(|t| t != "-1"),
        };
        if let Ok(h) = el.clone().dyn_into::<web_sys::HtmlElement>() {
            // Hidden controls (a closed <details>, display: none) have no offset parent.
            if focusable && h.offset_parent().is_some() {
                out.push(h);
            }
        }
        if let Some(child) = el.first_element_child() {
            stack.push(el.next_element_sibling());
            next = Some(child);
        } else {
            next = el.next_element_sibling();
            while next.is_none() {
                match stack.pop() {
                    Some(sibling) => next = sibling,
                    None => break,
                }
            }
        }
    }
    out
}

/// Keeps Tab and Shift+Tab inside the open dialog (it is modal: the page behind is inert).
pub fn trap_tab(e: &web_sys::KeyboardEvent) {
    let Some(modal) = document().and_then(|d| d.query_selector(".modal").ok().flatten()) else {
        return;
    };
    let list = focusables(&modal);
    let (Some(first), Some(last)) = (list.first(), list.last()) else {
        return;
    };
    let active = document().and_then(|d| d.active_element());
    let inside = active.as_ref().is_some_and(|a| {
        let node: &web_sys::Node = a;
        modal.contains(Some(node))
    });
    let at = |h: &web_sys::HtmlElement| {
        let h: &web_sys::Element = h;
        active.as_ref().is_some_and(|a| a == h)
    };
    let to = if !inside {
        Some(if e.shift_key() { last } else { first })
    } else if e.shift_key() && at(first) {
        Some(last)
    } else if !e.shift_key() && at(last) {
        Some(first)
    } else {
        None
    };
    if let Some(to) = to {
        e.prevent_default();
        let _ = to.focus();
    }
}
