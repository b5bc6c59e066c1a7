//! `GET /api/events`: one server-sent event stream per editor tab.
//!
//! - `event: ready` once at the start, with `{type:"ready", generation}`: the stream is
//!   subscribed, so any later change will arrive;
//! - `event: changed` with `{type:"changed", generation, changes:[…]}` after every reload that
//!   changed something (see `state.rs`);
//! - `event: resync` with `{type:"resync", generation}` when this stream fell behind and missed
//!   changes: refetch everything;
//! - `event: live` with the live Pi session's view (`GET /api/live`) right after `ready` and on
//!   every change: connect, disconnect, model, thinking level, active Preset;
//! - `event: payloads` with the capture summary (`{type:"payloads", sessionId, count, newest,
//!   latest, armed, usage}`) right after `ready` and whenever a capture, a usage report, an arm
//!   or a clear changes it;
//! - `event: capability-state` with `{state}` (the `GET /api/capability-state` view, `null`
//!   without a live session) right after `ready` and whenever it changes;
//! - `event: agent-plans` with `{pending, finished}` (how many delegation plans wait for a
//!   person, how many runs ended) right after `ready` and whenever a plan is added or decided or
//!   a run ends;
//! - a `: keepalive` comment every 15 seconds.
//!
//! `EventSource` cannot send headers, so the session cookie authenticates the stream.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use forge_core::api::{AgentPlansEvent, CapabilityStateEvent};
use forge_core::json;
use futures_util::stream::{self, StreamExt as _};
use serde_json::{json, Value};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};

use super::AppState;

pub const KEEPALIVE: Duration = Duration::from_secs(15);

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/events", get(events))
}

async fn events(State(state): State<AppState>) -> Response {
    let receiver = state.ws.subscribe();
    let ready = Event::default()
        .event("ready")
        .data(json::to_compact(&json!({
            "type": "ready",
            "generation": state.ws.generation(),
        })));
    let ws = std::sync::Arc::clone(&state.ws);
    let updates = BroadcastStream::new(receiver).map(move |item| match item {
        Ok(event) => Event::default().event("changed").data(json::to_compact(
            &serde_json::to_value(&event).unwrap_or_default(),
        )),
        Err(BroadcastStreamRecvError::Lagged(_)) => {
            Event::default()
                .event("resync")
                .data(json::to_compact(&json!({
                    "type": "resync",
                    "generation": ws.generation(),
                })))
        }
    });
    let mut shutdown = state.shutdown.clone();
    let stopped = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let live_event = |view: forge_core::api::LiveView| {
        let view = serde_json::to_value(&view).unwrap_or(Value::Null);
        Event::default().event("live").data(json::to_compact(&view))
    };
    let live = WatchStream::new(state.live.watch()).map(live_event);
    let payload_event = |summary: Value| {
        Event::default()
            .event("payloads")
            .data(json::to_compact(&summary))
    };
    let payloads = WatchStream::new(state.payloads.watch()).map(payload_event);
    // The capability view is recomputed after every change of the live host or the workspace
    // and sent when it differs from the last one this stream sent.
    let caps_state = std::sync::Arc::clone(&state);
    let live_ticks = WatchStream::new(state.live.ticks()).map(|_| ());
    let ws_ticks = BroadcastStream::new(state.ws.subscribe()).map(|_| ());
    let mut last: Option<CapabilityStateEvent> = None;
    let capabilities = stream::select(live_ticks, ws_ticks).filter_map(move |()| {
        let now = CapabilityStateEvent {
            state: super::capability_state::current_view(&caps_state),
        };
        let event = (last.as_ref() != Some(&now)).then(|| {
            let data = json::to_compact(&serde_json::to_value(&now).unwrap_or_default());
            last = Some(now);
            Event::default().event("capability-state").data(data)
        });
        futures_util::future::ready(event)
    });
    let plans = WatchStream::new(state.agents.watch()).map(|event: AgentPlansEvent| {
        Event::default().event("agent-plans").data(json::to_compact(
            &serde_json::to_value(event).unwrap_or_default(),
        ))
    });
    let stream = stream::once(async { ready })
        .chain(stream::select(
            stream::select(updates, plans),
            stream::select(live, stream::select(payloads, capabilities)),
        ))
        .take_until(Box::pin(stopped))
        .map(Ok::<_, Infallible>);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEPALIVE).text("keepalive"))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
