//! forge-web: the pi-forge single-page app (Leptos CSR).
//!
//! Built only for `wasm32-unknown-unknown` by `cargo xtask dist`; the server embeds the
//! resulting bundle from `assets/dist/`.
#![forbid(unsafe_code)]

use leptos::prelude::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[component]
fn App() -> impl IntoView {
    view! {
        <main id="app">
            <header class="masthead">
                <h1>"pi-forge"</h1>
                <span class="version">"v" {VERSION}</span>
            </header>
            <p class="lead">"Workspace editor — coming soon"</p>
        </main>
    }
}

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}
