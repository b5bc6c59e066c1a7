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
mod agent_hub;
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
mod live_commands;
mod meta;
mod page;
mod payloads;
pub mod preview_gate;
pub mod profiles;
pub mod security;
mod stack_import;
mod stacks;
mod state;
mod viewcache;
mod views;
mod write;

use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use tower_http::set_header::SetResponseHeaderLayer;

use error::ApiError;
pub use state::{new_secret, AppState, Secrets, ServerState};

/// The whole application.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/index.html", get(page::index))
        .merge(meta::routes())
        .merge(events::routes())
        .merge(host::routes())
        .merge(payloads::routes())
        .merge(stacks::routes())
        .merge(stack_import::routes())
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
