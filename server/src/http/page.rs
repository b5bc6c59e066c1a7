//! `GET /`: the editor's page, built once per workspace snapshot and active Preset (see
//! `viewcache`), in the theme the cookie asks for.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::assets;
use super::first_screen::THEME_COOKIE;
use super::security::cookie_value;
use super::state::AppState;

/// `GET /` (after the guard): the page with the stack list embedded, never cached.
pub async fn index(State(state): State<AppState>, request: HeaderMap) -> Response {
    let views = state.current_views();
    let dark = cookie_value(&request, THEME_COOKIE) == Some("dark");
    match views.page(dark) {
        Some(page) => {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            page.respond(&request, headers)
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            assets::MISSING_BUNDLE,
        )
            .into_response(),
    }
}
