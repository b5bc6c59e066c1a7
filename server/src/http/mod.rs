//! The editor's HTTP surface: the page, its assets and the JSON API under `/api`.
//!
//! One router per resource (`stacks`, `profiles`, `capabilities`, `config`) plus `meta` (meta,
//! resources, activation) and `events` (SSE); `assets` serves the page and the bundle,
//! `encoding` answers stored bodies by `Accept-Encoding`, `viewcache` keeps the stack list and the
//! page serialized per snapshot. Every request passes [`security::guard`] first
//! (Host, token, Origin); JSON bodies go through [`extract::JsonBody`] (size limit, exact 400 and
//! 413 answers); every error is an [`error::ApiError`]. Handlers stay thin: parse, call
//! forge-core (the write service, the compiler), map the result. `docs/api.md` documents the wire.

pub mod agent;
mod agent_settings;
pub mod assets;
mod capabilities;
pub mod capability_state;
mod config;
mod encoding;
pub mod error;
mod events;
pub mod extract;
pub mod first_screen;
mod host;
mod meta;
mod payloads;
pub mod preview_gate;
pub mod profiles;
pub mod security;
mod stack_import;
mod stacks;
mod viewcache;
mod views;
mod write;

use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use forge_core::runtime::{Clock, RuntimeSnapshot};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::live::LiveHub;
use crate::payloads::PayloadHub;
use crate::state::WorkspaceHandle;
use error::ApiError;

/// What every handler can reach.
pub struct ServerState {
    pub ws: Arc<WorkspaceHandle>,
    pub port: u16,
    pub token: String,
    pub cookie_name: String,
    /// The session cookie's value: random per server and never the API token, so a cookie a
    /// browser also sent to another port on 127.0.0.1 does not work as the token header.
    pub cookie_secret: String,
    /// Accepted `Host` values.
    pub hosts: [String; 2],
    /// Accepted `Origin` values.
    pub origins: [String; 2],
    pub demo: bool,
    pub project: PathBuf,
    pub global: PathBuf,
    /// The live Pi session (the one owner of the active Preset, the applied profile and Pi's
    /// facts); empty when no Pi is connected.
    pub live: Arc<LiveHub>,
    /// Captured provider requests of the live session (see `payloads.rs`).
    pub payloads: Arc<PayloadHub>,
    /// Draft previews in flight: one compile per stack, a newer draft supersedes older ones.
    pub previews: Arc<preview_gate::PreviewGate>,
    /// Turns true when the server shuts down; event streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The stack list and the page, serialized once per snapshot and active Preset.
    pub views: viewcache::ViewCache,
    /// Serializes capability mutations of the live session (one commit at a time).
    pub capability_lock: tokio::sync::Mutex<()>,
    /// Subagent plans waiting for a person, and the child-run limit.
    pub agents: agent::Agents,
}

impl ServerState {
    pub fn new(
        ws: Arc<WorkspaceHandle>,
        port: u16,
        secrets: security::Secrets,
        demo: bool,
        project: PathBuf,
        global: PathBuf,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> ServerState {
        // Children a killed or crashed server left running are stopped before anything else.
        let agents = Arc::new(agent::AgentHub::starting(&project));
        ServerState {
            ws,
            port,
            cookie_name: security::cookie_name(port),
            cookie_secret: secrets.cookie,
            hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            origins: [
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
            ],
            token: secrets.token,
            demo,
            project,
            global,
            live: Arc::new(LiveHub::new()),
            payloads: Arc::new(PayloadHub::new()),
            previews: Arc::new(preview_gate::PreviewGate::new()),
            shutdown,
            views: viewcache::ViewCache::default(),
            capability_lock: tokio::sync::Mutex::new(()),
            agents,
        }
    }

    /// The active Preset (`scope:id`) of the live Pi session; `None` without one.
    pub fn active_id(&self) -> Option<String> {
        self.live
            .with_live(|h| h.active_stack().map(str::to_string))
            .unwrap_or(None)
    }

    /// The facts the compiler works from: the live Pi session's, else the documented stand-in
    /// (`live: false`).
    pub fn runtime(&self) -> RuntimeSnapshot {
        let clock = local_clock();
        self.live
            .with_live(|h| h.runtime(clock))
            .unwrap_or_else(|_| self.stand_in(clock))
    }

    /// The same facts without the conversation: for tool policies, where messages play no part
    /// and copying a long session's conversation would be waste.
    pub fn tool_runtime(&self) -> RuntimeSnapshot {
        let clock = local_clock();
        self.live
            .with_live(|h| h.runtime_with(clock, Vec::new()))
            .unwrap_or_else(|_| self.stand_in(clock))
    }

    fn stand_in(&self, clock: Clock) -> RuntimeSnapshot {
        RuntimeSnapshot::default_snapshot(&self.project.display().to_string(), clock)
    }
}

/// The clock of this machine: now, with the local UTC offset.
pub fn local_clock() -> Clock {
    let now = chrono::Local::now();
    Clock {
        epoch_ms: now.timestamp_millis(),
        utc_offset_minutes: now.offset().local_minus_utc() / 60,
    }
}

pub type AppState = Arc<ServerState>;

/// The whole application.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/index.html", get(assets::index))
        .merge(meta::routes())
        .merge(events::routes())
        .merge(host::routes())
        .merge(payloads::routes())
        .merge(stacks::routes())
        .merge(profiles::routes())
        .merge(capabilities::routes())
        .merge(capability_state::routes())
        .merge(agent::routes())
        .merge(agent_settings::routes())
        .merge(config::routes())
        .route("/assets/{*path}", get(assets::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            security::guard,
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(security::csp()),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .with_state(state)
}

fn is_api(uri: &Uri) -> bool {
    uri.path() == "/api" || uri.path().starts_with("/api/")
}

async fn not_found(uri: Uri) -> Response {
    if is_api(&uri) {
        ApiError::not_found("Unknown pi-forge editor API route.").into_response()
    } else {
        assets::not_found()
    }
}

async fn method_not_allowed(uri: Uri) -> Response {
    if is_api(&uri) {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "This API route does not support that method.",
        )
        .into_response()
    } else {
        (StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.").into_response()
    }
}
