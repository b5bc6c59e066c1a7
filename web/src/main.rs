//! forge-web: the pi-forge single-page app (Leptos CSR).
//!
//! Built only for `wasm32-unknown-unknown` by `cargo xtask dist`; the server embeds the
//! resulting bundle from `assets/dist/`. It talks to the server through the JSON API
//! (`api`) and the event stream (`events`), and runs forge-core in the browser for
//! validation and diffs, so browser and server agree on every rule.
// `deny`, not `forbid`: `split` allows the unsafe code Leptos' `#[lazy]` macro generates.
#![deny(unsafe_code)]

mod api;
mod bindings;
mod capabilities;
mod conflict;
mod delegation;
mod dialogs;
mod dock;
mod dom;
mod drafts;
mod editor;
mod events;
mod items;
mod jp;
mod jsregex;
mod library;
mod modal;
mod palette;
mod payload_feed;
mod payloads;
mod policy;
mod preview;
mod profile_delegation;
mod profiles;
mod recovery;
mod regex;
mod session;
mod session_text;
mod shell;
#[allow(unsafe_code)]
mod split;
mod stack_tab;
mod state;
mod task;
mod template_editor;
mod toolpicker;
mod undo;
mod widgets;

fn main() {
    dom::mark("pi-forge:app-start");
    console_error_panic_hook::set_once();
    forge_core::stack::set_pattern_checker(jsregex::check);
    leptos::mount::mount_to_body(shell::Shell);
    // The page's stand-in for the first screen (drawn by the server: the same top bar and rows,
    // see server/src/http/first_screen.rs), or index.html's loading line without one. Removed in
    // the task that mounted the app, so no frame shows both or neither.
    let document = web_sys::window().and_then(|w| w.document());
    for id in [dom::FIRST_SCREEN_ID, "boot-splash"] {
        if let Some(el) = document.as_ref().and_then(|d| d.get_element_by_id(id)) {
            el.remove();
        }
    }
}
