//! The live link: one `EventSource` on `/api/events` for the whole app (no polling).
//!
//! `changed` events name the files a reload changed; the open editor reacts through
//! [`crate::state::on_stack_change`], lists are refetched. `ready` (sent first, and again after
//! the browser reconnects) and `resync` refetch everything, so nothing missed stays stale; the
//! first `ready` refetches the list the page embedded only when its generation is older.
//! `live` carries the live Pi session's view (`GET /api/live`) after `ready` and on every
//! change; each `ready` also asks `GET /api/live` once, in case the stream's `live` is missing.
//! `capability-state` carries the live session's capability view (`null` without a session)
//! after `ready` and on every change; the Session surface shows it (`session.rs`).
//! `payloads` (a capture, late usage, an arm or a clear) bumps `payload_events`; the views that
//! show captures refetch the list when they are on screen. `agent-plans` (a delegation plan added
//! or decided, a run ended) sets the pending count and bumps `agent_events`; the Delegation
//! surface refetches its lists.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;
use wasm_bindgen::prelude::*;
use web_sys::{EventSource, MessageEvent};

use forge_core::api::{ChangeEvent, Origin};

use crate::state::{
    boot_generation, fetch_live, on_live_event, on_stack_change, refresh_stacks, App, Tone,
};

/// The `origin` of a change as the forms compare it (`self`: the editor's own write).
fn origin_text(origin: &Origin) -> &'static str {
    match origin {
        Origin::Own => "self",
        Origin::External => "external",
    }
}

thread_local! {
    /// The app's one event stream; a reconnect (after a lost session) closes the old one first.
    static STREAM: std::cell::RefCell<Option<EventSource>> = const { std::cell::RefCell::new(None) };
}

/// A new stream when the browser gave up on the current one (it does after an answer that is
/// not an event stream, e.g. a 403).
pub fn reopen_if_closed(app: App) {
    let closed = STREAM.with(|s| {
        s.borrow()
            .as_ref()
            .is_none_or(|source| source.ready_state() == EventSource::CLOSED)
    });
    if closed {
        connect(app);
    }
}

pub fn connect(app: App) {
    if let Some(old) = STREAM.with(|s| s.borrow_mut().take()) {
        old.close();
    }
    let Ok(source) = EventSource::new("/api/events") else {
        return;
    };
    let connected = std::cell::Cell::new(false);
    let on_ready = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        fetch_live(app);
        // The first `ready` follows the initial fetches; a later one follows a reconnect.
        if connected.replace(true) {
            refresh_stacks(app);
            app.profile_events.update(|n| *n += 1);
            app.capability_events.update(|n| *n += 1);
        } else if let Some(embedded) = boot_generation(app) {
            // The list came with the page: refetch it if the workspace changed since.
            let generation = ev
                .data()
                .as_string()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .and_then(|v| v.get("generation").and_then(Value::as_u64));
            if generation != Some(embedded) {
                refresh_stacks(app);
            }
        }
    });
    let on_resync = Closure::<dyn Fn(MessageEvent)>::new(move |_: MessageEvent| {
        refresh_stacks(app);
        app.profile_events.update(|n| *n += 1);
        app.capability_events.update(|n| *n += 1);
    });
    let on_changed = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        let Ok(event) = crate::api::parse::<ChangeEvent>(&text) else {
            return;
        };
        // Workspace problems changed: the stack list carries them.
        let mut stacks = event.problems.is_some();
        for change in event.changes {
            match change.kind.as_str() {
                "stack" => {
                    stacks = true;
                    on_stack_change(app, &change.key, change.revision);
                }
                "profile" => {
                    let origin = origin_text(&change.origin);
                    app.profile_change
                        .set(Some((change.key, change.revision, origin.to_string())));
                    app.profile_events.update(|n| *n += 1);
                }
                "capability" => {
                    let origin = origin_text(&change.origin);
                    app.capability_change.set(Some((
                        change.key,
                        change.revision,
                        origin.to_string(),
                    )));
                    app.capability_events.update(|n| *n += 1);
                }
                _ => {}
            }
        }
        if stacks {
            refresh_stacks(app);
            // Profiles show stack references and preflight results; capabilities show which
            // Presets bind them.
            app.profile_events.update(|n| *n += 1);
            app.capability_events.update(|n| *n += 1);
        }
    });
    let on_live = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        if let Ok(view) = crate::api::parse::<forge_core::api::LiveView>(&text) {
            on_live_event(app, view);
        }
    });
    let on_capability_state = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        if let Ok(event) = crate::api::parse::<forge_core::api::CapabilityStateEvent>(&text) {
            crate::session::on_state_event(app, event.state);
        }
    });
    let on_payloads = Closure::<dyn Fn(MessageEvent)>::new(move |_: MessageEvent| {
        app.payload_events.update(|n| *n += 1);
    });
    let on_agent = Closure::<dyn Fn(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        if let Ok(event) = crate::api::parse::<forge_core::api::AgentPlansEvent>(&text) {
            app.plans_pending.set(event.pending);
            app.agent_events.update(|n| *n += 1);
        }
    });
    let _ =
        source.add_event_listener_with_callback("agent-plans", on_agent.as_ref().unchecked_ref());
    let _ =
        source.add_event_listener_with_callback("payloads", on_payloads.as_ref().unchecked_ref());
    let _ = source.add_event_listener_with_callback(
        "capability-state",
        on_capability_state.as_ref().unchecked_ref(),
    );
    let _ = source.add_event_listener_with_callback("live", on_live.as_ref().unchecked_ref());
    let _ = source.add_event_listener_with_callback("ready", on_ready.as_ref().unchecked_ref());
    let _ = source.add_event_listener_with_callback("resync", on_resync.as_ref().unchecked_ref());
    let _ = source.add_event_listener_with_callback("changed", on_changed.as_ref().unchecked_ref());
    // The browser retries a dropped stream by itself; the page finds out why it dropped.
    let on_error = Closure::<dyn Fn(web_sys::Event)>::new(move |_: web_sys::Event| {
        probe(app);
    });
    let _ = source.add_event_listener_with_callback("error", on_error.as_ref().unchecked_ref());
    on_error.forget();
    // The stream and its handlers live as long as the page.
    on_ready.forget();
    on_resync.forget();
    on_changed.forget();
    on_live.forget();
    on_payloads.forget();
    on_capability_state.forget();
    on_agent.forget();
    STREAM.with(|s| *s.borrow_mut() = Some(source));
}

/// Tries the session again; on success the event stream reconnects and everything refetches.
pub fn reconnect(app: App) {
    spawn_local(async move {
        match crate::api::get_as::<Value>("/api/live").await {
            Ok(_) => {
                app.session_lost.set(false);
                app.server_gone.set(false);
                connect(app);
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
    (e.message == crate::drafts::INVALID_TOKEN && app.session_lost.get_untracked())
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
            Ok(_) => reopen_if_closed(app),
            Err(e) if already_shown(app, &e) => {}
            // Only these explain a failed stream; anything else is the next request's to say.
            Err(e) if e.is_transport() || e.message == crate::drafts::INVALID_TOKEN => app.fail(&e),
            Err(_) => {}
        }
    });
}
