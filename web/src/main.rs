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
mod delegation;
mod dialogs;
mod drafts;
mod editor;
mod events;
mod items;
mod jp;
mod jsregex;
mod library;
mod palette;
mod payloads;
mod policy;
mod preview;
mod profile_delegation;
mod profiles;
mod regex;
mod session;
mod session_text;
mod shell;
#[allow(unsafe_code)]
mod split;
mod stack_tab;
mod state;
mod template_editor;
mod toolpicker;
mod undo;
mod widgets;

fn main() {
    mark("pi-forge:app-start");
    // index.html's loading line (see there).
    if let Some(splash) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("boot-splash"))
    {
        splash.remove();
    }
    console_error_panic_hook::set_once();
    forge_core::stack::set_pattern_checker(jsregex::check);
    leptos::mount::mount_to_body(shell::Shell);
}

/// A performance mark (read by `cargo xtask bench`; see e2e/examples/navbench.rs).
pub fn mark(name: &str) {
    if let Some(perf) = web_sys::window().and_then(|w| w.performance()) {
        let _ = perf.mark(name);
    }
}
