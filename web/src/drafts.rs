//! Unsaved Preset drafts survive a reload, a crash or a server restart, and a session that ended
//! can be resumed without a reload.
//!
//! While the open Preset has unsaved changes, the draft is kept in the browser's local storage
//! under the file's absolute path (so two projects never share an entry) together with the
//! revision and the file content it started from; saving or discarding removes it. Opening the
//! file again restores it with a banner, but never silently over a newer file: when the file
//! changed on disk since, the banner offers forge-core's three-way merge (base = the content the
//! draft started from, theirs = disk, mine = the draft) or discarding it.
//!
//! A request refused with the server's "Invalid pi-forge editor token." (the server restarted
//! with a new token) marks the session lost: a banner says to open the URL `pi-forge ui`
//! printed, and the page tries again whenever it regains the focus (or on Reconnect); once the
//! new session cookie is there, the event stream reconnects and the lists refresh, with the
//! draft untouched.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::{App, Tone};

/// The server's answer to a request without a valid session.
pub const INVALID_TOKEN: &str = "Invalid pi-forge editor token.";

/// Local-storage keys of kept drafts start with this.
const PREFIX: &str = "pi-forge.draft.v1:";

/// A draft kept in local storage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The revision of the file the draft started from.
    pub revision: String,
    /// That file's content (the merge base).
    pub base: Value,
    pub draft: Value,
    /// When it was kept (milliseconds since the epoch).
    pub kept_at: f64,
}

/// What the editor shows about a draft restored from local storage.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    pub kept_at: f64,
    /// The file changed on disk since the draft started: it is not applied; `merged` is the
    /// three-way merge and `conflicts` how many places both sides changed.
    pub stale: Option<StaleDraft>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StaleDraft {
    pub merged: Value,
    pub conflicts: Vec<String>,
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

fn key(path: &str) -> String {
    format!("{PREFIX}{path}")
}

/// Keeps `draft` of the file at `path` (started from `revision` with content `base`).
pub fn keep(path: &str, revision: &str, base: &Value, draft: &Value) {
    let Some(storage) = storage() else {
        return;
    };
    let kept = Kept {
        revision: revision.to_string(),
        base: base.clone(),
        draft: draft.clone(),
        kept_at: js_sys::Date::now(),
    };
    if let Ok(text) = serde_json::to_string(&kept) {
        // A full storage (quota) keeps the previous entry; the draft is still on screen.
        let _ = storage.set_item(&key(path), &text);
    }
}

pub fn forget(path: &str) {
    if let Some(storage) = storage() {
        let _ = storage.remove_item(&key(path));
    }
}

pub fn read(path: &str) -> Option<Kept> {
    let text = storage()?.get_item(&key(path)).ok()??;
    crate::api::parse(&text).ok()
}

/// What to do with a kept draft when its file is opened with `revision` and content `saved`:
/// `None` when there is nothing to restore (the kept draft equals the file, or none is kept).
pub fn restore_plan(kept: &Kept, revision: &str, saved: &Value) -> Option<Restored> {
    if kept.draft == *saved {
        return None;
    }
    if kept.revision == revision {
        return Some(Restored {
            kept_at: kept.kept_at,
            stale: None,
        });
    }
    let merge = forge_core::merge::merge3(&kept.base, saved, &kept.draft);
    Some(Restored {
        kept_at: kept.kept_at,
        stale: Some(StaleDraft {
            conflicts: merge.conflicts.iter().map(|c| c.path.clone()).collect(),
            merged: merge.value,
        }),
    })
}

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
            reconnect(app);
        }
    });
    on_cleanup(move || focus.remove());
}

/// Tries the session again; on success the event stream reconnects and everything refetches.
pub fn reconnect(app: App) {
    spawn_local(async move {
        match crate::api::get_as::<Value>("/api/live").await {
            Ok(_) => {
                app.session_lost.set(false);
                app.server_gone.set(false);
                crate::events::connect(app);
                crate::state::refresh_stacks(app);
                app.profile_events.update(|n| *n += 1);
                app.capability_events.update(|n| *n += 1);
                app.say(
                    "Reconnected to the pi-forge server; unsaved changes are still here.",
                    Tone::Ok,
                );
            }
            Err(e) if already_shown(app, &e) => {}
            Err(e) => app.fail(&e),
        }
    });
}

/// The banner already says what `e` means (the session ended, or no server answers).
fn already_shown(app: App, e: &crate::api::ApiError) -> bool {
    (e.message == INVALID_TOKEN && app.session_lost.get_untracked())
        || (e.is_transport() && app.server_gone.get_untracked())
}

/// The event stream failed: finds out why, so the page says so without waiting for a click.
/// No server at all shows the server-gone banner, a server with another token the session
/// banner; a working session with a stream the browser gave up on gets a new stream.
pub fn probe(app: App) {
    thread_local! {
        static PROBING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if PROBING.with(|p| p.replace(true)) {
        return;
    }
    spawn_local(async move {
        let result = crate::api::get_as::<Value>("/api/live").await;
        PROBING.with(|p| p.set(false));
        match result {
            Ok(_) if app.session_lost.get_untracked() || app.server_gone.get_untracked() => {
                reconnect(app);
            }
            Ok(_) => crate::events::reopen_if_closed(app),
            Err(e) if already_shown(app, &e) => {}
            // Only these explain a failed stream; anything else is the next request's to say.
            Err(e) if e.is_transport() || e.message == INVALID_TOKEN => app.fail(&e),
            Err(_) => {}
        }
    });
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
                    <button class="reconnect" on:click=move |_| reconnect(app)>"Reconnect"</button>
                </div>
            }
            .into_any());
        }
        app.session_lost.get().then(|| {
            view! {
                <div class="banner error session-lost" role="alert">
                    <p>"This page's session with the pi-forge server ended (the server restarted or was started again with a new token). Open the editor URL that "<code>"pi-forge ui"</code>" printed in this browser, then come back: this page reconnects by itself, and your unsaved changes are kept in this browser meanwhile."</p>
                    <button class="reconnect" on:click=move |_| reconnect(app)>"Reconnect"</button>
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
