//! Surfaces a first visit does not show, each split into its own wasm chunk with Leptos'
//! `#[lazy]` (wasm_split_helpers), and what typing loads (the draft checks, the content search)
//! with wasm_split's own macro, `fallible`: a surface's part that cannot be fetched stops the
//! app, these answer `Err` and the editor goes on. `cargo xtask dist` splits the module
//! (wasm-split-cli); a chunk is fetched the first time its function is called, and later calls
//! reuse it.
//!
//! The macro's generated code declares the chunk's loader import (`unsafe extern "C"`,
//! `#[unsafe(no_mangle)]`) and builds a static loader in an `unsafe` block: this module is the
//! one place where the crate allows `unsafe_code` (see `main.rs`), and it holds nothing else.

use leptos::__reexports::send_wrapper::SendWrapper;
use leptos::lazy;
use leptos::prelude::*;

use crate::state::DraftChecks;

/// Renders `load` (a lazy view) when its chunk has arrived.
fn suspended(load: impl std::future::Future<Output = AnyView> + 'static) -> AnyView {
    Suspend::new(SendWrapper::new(load)).into_any()
}

#[lazy]
fn profiles_surface() -> AnyView {
    view! { <crate::profiles::ProfilesSurface/> }.into_any()
}

pub fn profiles() -> AnyView {
    suspended(profiles_surface())
}

#[lazy]
fn capabilities_surface() -> AnyView {
    view! { <crate::capabilities::CapabilitiesSurface/> }.into_any()
}

pub fn capabilities() -> AnyView {
    suspended(capabilities_surface())
}

#[lazy]
fn payloads_surface() -> AnyView {
    view! { <crate::payloads::PayloadsSurface/> }.into_any()
}

pub fn payloads() -> AnyView {
    suspended(payloads_surface())
}

#[lazy]
fn session_surface() -> AnyView {
    view! { <crate::session::SessionSurface/> }.into_any()
}

pub fn session() -> AnyView {
    suspended(session_surface())
}

#[lazy]
fn delegation_surface() -> AnyView {
    view! { <crate::delegation::DelegationSurface/> }.into_any()
}

pub fn delegation() -> AnyView {
    suspended(delegation_surface())
}

/// The Preset editor's Capabilities tab.
#[lazy]
fn capabilities_tab_view() -> AnyView {
    view! { <crate::bindings::CapabilitiesTab/> }.into_any()
}

pub fn capabilities_tab() -> AnyView {
    suspended(capabilities_tab_view())
}

/// The command palette (`help: false`) or the shortcuts overlay (`help: true`).
#[lazy]
fn palette_view(help: bool) -> AnyView {
    if help {
        view! { <crate::palette::ShortcutsOverlay/> }.into_any()
    } else {
        view! { <crate::palette::PaletteDialog/> }.into_any()
    }
}

pub fn palette(help: bool) -> AnyView {
    suspended(palette_view(help))
}

/// The body of the New, Fork and Import dialogs (the confirmation stays in the main module).
#[lazy]
fn stack_dialog_view(dialog: crate::state::Dialog) -> AnyView {
    crate::dialogs::stack_dialog_body(dialog)
}

pub fn stack_dialog(dialog: crate::state::Dialog) -> AnyView {
    suspended(stack_dialog_view(dialog))
}

/// The preview dock, from its first opening on (it is closed on a first visit).
#[lazy]
fn preview_dock_view() -> AnyView {
    view! { <crate::preview::PreviewDock/> }.into_any()
}

pub fn preview_dock() -> AnyView {
    suspended(preview_dock_view())
}

/// The Preset editor's Stack, Regex, Policy and JSON tabs (one chunk: a first visit shows Items).
#[lazy]
fn editor_tab_view(tab: crate::state::Tab) -> AnyView {
    use crate::state::Tab;
    match tab {
        Tab::Stack => view! { <crate::stack_tab::StackTab/> }.into_any(),
        Tab::Regex => view! { <crate::regex::RegexTab/> }.into_any(),
        Tab::Policy => view! { <crate::policy::PolicyTab/> }.into_any(),
        Tab::Json => view! { <crate::stack_tab::JsonTab/> }.into_any(),
        Tab::Items | Tab::Capabilities => ().into_any(),
    }
}

pub fn editor_tab(tab: crate::state::Tab) -> AnyView {
    suspended(editor_tab_view(tab))
}

/// A save conflict's view: the diff of disk and draft and the three-way merge (only a 409 shows
/// it). `take` is the conflict view's own state, kept in the main module.
#[lazy]
fn conflict_view(c: crate::state::Conflict, take: RwSignal<(String, Vec<String>)>) -> AnyView {
    crate::conflict::conflict_body(c, take)
}

pub fn conflict(c: crate::state::Conflict, take: RwSignal<(String, Vec<String>)>) -> AnyView {
    suspended(conflict_view(c, take))
}

/// The capture list's fetch, started by the Payloads state's effects in the main module: only
/// lazy parts (the Payloads surface, the preview dock's Run tab) show its answer, so its reader
/// waits with them.
#[lazy]
fn payload_list_fetch(app: crate::state::App, p: crate::payloads::Payloads) {
    crate::payloads::fetch_list(app, p)
}

pub fn payload_list(app: crate::state::App, p: crate::payloads::Payloads) {
    leptos::task::spawn_local(payload_list_fetch(app, p));
}

/// A run diff's fetch (see [`payload_list`]).
#[lazy]
fn run_diff_fetch(state: crate::payloads::RunDiffState) {
    state.fetch()
}

pub fn run_diff(state: crate::payloads::RunDiffState) {
    leptos::task::spawn_local(run_diff_fetch(state));
}

fn check_draft(
    scope: forge_core::id::Scope,
    draft: &serde_json::Value,
    file: &str,
) -> Vec<forge_core::diag::Diagnostic> {
    use forge_core::workspace::service::{codec_diagnostics, Kind};
    codec_diagnostics(Kind::Stack, scope, draft, file)
}

/// The editor's draft checks: a first visit shows the server's diagnostics of the opened file,
/// so the parsers and checks load with the first edit. Unlike the surfaces' parts, a part loaded
/// by typing may fail to arrive (the server stopped while the page stayed open, and the
/// editor keeps working on the draft): `fallible` makes that an `Err` instead of a trap.
#[leptos::wasm_split::wasm_split(draft_checks, wasm_split_path = ::leptos::wasm_split, fallible)]
fn draft_checks_part() -> Result<DraftChecks, leptos::wasm_split::SplitLoaderError> {
    Ok(check_draft)
}

/// Loads the draft checks into `into`; when they cannot be fetched, `asked` is cleared so the
/// next edit asks again.
pub fn draft_checks(into: RwSignal<Option<DraftChecks>>, asked: StoredValue<bool>) {
    leptos::task::spawn_local(async move {
        match draft_checks_part().await {
            Ok(checks) => into.set(Some(checks)),
            Err(_) => asked.set_value(false),
        }
    });
}

type Hits = Option<Vec<forge_core::stack::search::StackSearchHit>>;

/// The sidebar's content search (`GET /api/search?q=`), whose answer's reader loads with the
/// first query (fallible, as [`draft_checks`]).
#[leptos::wasm_split::wasm_split(search, wasm_split_path = ::leptos::wasm_split, fallible)]
fn search_part(
    q: String,
) -> Result<
    std::pin::Pin<Box<dyn std::future::Future<Output = Hits>>>,
    leptos::wasm_split::SplitLoaderError,
> {
    Ok(Box::pin(async move {
        let path = format!("/api/search?q={}", crate::api::seg(&q));
        crate::api::get_as::<forge_core::api::StackSearch>(&path)
            .await
            .ok()
            .map(|found| found.results)
    }))
}

/// The hits of `q`; `None` when the search (or its part) could not be fetched.
pub async fn search(q: String) -> Hits {
    match search_part(q).await {
        Ok(answer) => answer.await,
        Err(_) => None,
    }
}
