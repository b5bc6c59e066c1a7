//! The app side of draft recovery: the effect that keeps the open Preset's draft in local
//! storage while it is dirty (`drafts`), the banner of a restored draft, and the banners of a
//! lost session or a stopped server with their Reconnect button (`events::reconnect`).

use leptos::prelude::*;

use crate::drafts::{forget, keep};
use crate::state::{App, Tone};

/// Keeps the open Preset's draft in local storage while it is dirty and forgets it once saved
/// or discarded (written 300 ms after the last change while typing).
pub fn install(app: App) {
    let ed = app.editor;
    let seq = StoredValue::new(0u64);
    Effect::new(move |_| {
        let dirty = ed.dirty.get();
        ed.draft.track();
        let Some(path) = ed.loaded.with(|l| l.as_ref().map(|l| l.path.clone())) else {
            return;
        };
        let my = seq.get_value() + 1;
        seq.set_value(my);
        // A kept draft for an older file stays until the person merges or discards it.
        let stale = ed
            .restored
            .with(|r| r.as_ref().is_some_and(|r| r.stale.is_some()));
        if !dirty {
            if !stale {
                forget(&path);
            }
            return;
        }
        set_timeout(
            move || {
                if seq.get_value() != my {
                    return;
                }
                let Some(loaded) = ed.loaded.get_untracked() else {
                    return;
                };
                if loaded.path == path && ed.dirty.get_untracked() {
                    ed.draft
                        .with_untracked(|d| keep(&path, &loaded.revision, &loaded.saved, d));
                }
            },
            std::time::Duration::from_millis(300),
        );
    });
    // A lost session is tried again whenever the page regains the focus.
    let focus = window_event_listener(leptos::ev::focus, move |_| {
        if app.session_lost.get_untracked() || app.server_gone.get_untracked() {
            crate::events::reconnect(app);
        }
    });
    on_cleanup(move || focus.remove());
}

/// The banner shown while the session is lost.
#[component]
pub fn SessionLostBanner() -> impl IntoView {
    let app = crate::state::app();
    move || {
        if app.server_gone.get() && !app.session_lost.get() {
            return Some(view! {
                <div class="banner error server-gone" role="alert">
                    <p>"The pi-forge server is not answering at this address: it stopped or is restarting. Start it again with "<code>"pi-forge ui"</code>" (or "<code>"/forge ui"</code>" in Pi); it comes back at this address when the port is free. Then open the URL it prints in this browser: this page reconnects by itself, and your unsaved changes are kept in this browser meanwhile."</p>
                    <button class="reconnect" on:click=move |_| crate::events::reconnect(app)>"Reconnect"</button>
                </div>
            }
            .into_any());
        }
        app.session_lost.get().then(|| {
            view! {
                <div class="banner error session-lost" role="alert">
                    <p>"This page's session with the pi-forge server ended (the server restarted or was started again with a new token). Open the editor URL that "<code>"pi-forge ui"</code>" printed in this browser, then come back: this page reconnects by itself, and your unsaved changes are kept in this browser meanwhile."</p>
                    <button class="reconnect" on:click=move |_| crate::events::reconnect(app)>"Reconnect"</button>
                </div>
            }
            .into_any()
        })
    }
}

/// "HH:MM" of a time in milliseconds since the epoch, in the browser's time zone.
fn clock_text(ms: f64) -> String {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms));
    format!("{:02}:{:02}", date.get_hours(), date.get_minutes())
}

/// The banner over the editor about a draft restored from local storage.
#[component]
pub fn RestoredBanner() -> impl IntoView {
    let app = crate::state::app();
    let ed = app.editor;
    let discard = move |_| {
        if let Some(l) = ed.loaded.get_untracked() {
            forget(&l.path);
            ed.draft.set(l.saved.clone());
        }
        ed.restored.set(None);
        app.say(
            "Discarded the unsaved changes kept in this browser.",
            Tone::Info,
        );
    };
    move || {
        ed.restored.get().map(|r| {
            let at = clock_text(r.kept_at);
            match r.stale {
                None => view! {
                    <div class="banner restored-draft" role="status">
                        <p>{format!("Restored your unsaved changes from {at} (kept in this browser). Save them, or discard them.")}</p>
                        <button class="restored-keep" on:click=move |_| ed.restored.set(None)>"Keep editing"</button>
                        <button class="restored-discard" on:click=discard>"Discard them"</button>
                    </div>
                }
                .into_any(),
                Some(stale) => {
                    let clean = stale.conflicts.is_empty();
                    let merged = stale.merged.clone();
                    let merge = move |_| {
                        ed.draft.set(merged.clone());
                        ed.restored.set(None);
                        app.say("Merged your kept changes into the current file. Review, then save.", Tone::Ok);
                    };
                    let what = if clean {
                        "They touch other places than the change on disk and merge without a conflict.".to_string()
                    } else {
                        format!(
                            "Both changed {}: merging keeps yours there.",
                            stale.conflicts.join(", ")
                        )
                    };
                    view! {
                        <div class="banner warn restored-draft stale" role="alert">
                            <p>{format!("You have unsaved changes from {at}, made to an older version of this file; it changed on disk since, so they are not applied. {what}")}</p>
                            <button class="primary restored-merge" on:click=merge>"Merge them in"</button>
                            <button class="restored-discard" on:click=discard>"Discard them"</button>
                        </div>
                    }
                    .into_any()
                }
            }
        })
    }
}
