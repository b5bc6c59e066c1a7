//! The frame's modal layers: the dialog host (Tab stays inside, focus goes back to the opener
//! on close) and the command palette with its shortcuts overlay. Their bodies load on demand
//! (`split`); the confirm dialog is drawn here.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::dom::{document, focus_later, trap_tab};
use crate::state::{app, Dialog};

thread_local! {
    /// The element that had focus when a dialog opened; focus goes back to it on close.
    static OPENER: std::cell::RefCell<Option<web_sys::HtmlElement>> = const { std::cell::RefCell::new(None) };
}

/// The element to give focus back to: the focused one, or for an item of a popup menu (which
/// closes on click) the menu's toggle button.
fn opener() -> Option<web_sys::HtmlElement> {
    let active = document()?.active_element()?;
    let target = match active.closest("[role=menu]").ok().flatten() {
        Some(menu) => menu
            .parent_element()
            .and_then(|p| p.query_selector("[aria-haspopup]").ok().flatten())
            .unwrap_or(active),
        None => active,
    };
    target.dyn_into::<web_sys::HtmlElement>().ok()
}

#[component]
pub fn Dialogs() -> impl IntoView {
    let app = app();
    let _tab = window_event_listener(leptos::ev::keydown, move |e| {
        if e.key() == "Tab" && app.dialog.with_untracked(Option::is_some) {
            trap_tab(&e);
        }
    });
    // Remember the opener when a dialog opens; give focus back to it when the last one closes
    // (a dialog replaced by another keeps the first opener).
    Effect::new(move |was_open: Option<bool>| {
        let open = app.dialog.with(Option::is_some);
        if open && was_open != Some(true) {
            OPENER.with(|o| *o.borrow_mut() = opener());
        } else if !open && was_open == Some(true) {
            if let Some(el) = OPENER.with(|o| o.borrow_mut().take()) {
                let node: &web_sys::Node = &el;
                let connected = document().is_some_and(|d| d.contains(Some(node)));
                if connected {
                    request_animation_frame(move || {
                        let _ = el.focus();
                    });
                }
            }
        }
        open
    });
    move || {
        let dialog = app.dialog.get()?;
        focus_later(".modal [autofocus], .modal input, .modal button.primary".into());
        let body = match dialog {
            Dialog::Confirm {
                title,
                body,
                confirm,
                danger,
                on_confirm,
            } => view! {
                <h2 id="dialog-title">{title}</h2>
                <p>{body}</p>
                // A destructive choice never takes the default focus: Enter keeps the work.
                <div class="row end">
                    <button class="cancel" autofocus=danger on:click=move |_| app.dialog.set(None)>"Cancel"</button>
                    <button class="primary confirm" class:danger=danger autofocus=!danger
                        on:click=move |_| { app.dialog.set(None); on_confirm(); }>{confirm}</button>
                </div>
            }
            .into_any(),
            dialog => crate::split::stack_dialog(dialog),
        };
        Some(view! {
            <div class="modal-backdrop" on:click=move |e| {
                // A click on the backdrop itself (not inside the dialog) closes it.
                if e.target() == e.current_target() { app.dialog.set(None); }
            }>
                <div class="modal" role="dialog" aria-modal="true" aria-labelledby="dialog-title">{body}</div>
            </div>
        })
    }
}

/// The palette and the shortcuts overlay (rendered by the shell, shown on demand).
#[component]
pub fn PaletteLayer() -> impl IntoView {
    let p = crate::palette::palette();
    view! {
        <Show when=move || p.open.get()>
            {crate::split::palette(false)}
        </Show>
        <Show when=move || p.help.get()>
            {crate::split::palette(true)}
        </Show>
    }
}
