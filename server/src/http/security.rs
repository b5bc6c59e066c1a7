//! The request guard, in this order: `Host` allow-list → session token → same `Origin` for
//! state-changing requests. (The body limit comes last, in the JSON extractor.)
//!
//! - `Host` must be exactly `127.0.0.1:<port>` or `localhost:<port>` (DNS-rebinding defence),
//!   else 421 `bad_host`.
//! - `GET /?token=<t>` trades the printed URL's token for an `HttpOnly; SameSite=Strict` cookie
//!   and redirects (303) to the clean `/`; a wrong token is 403. The cookie's value is a second
//!   random secret of this server, not the token: browsers send a host's cookies to every port
//!   of it, so another listener on 127.0.0.1 may see the cookie, and it must not work as the
//!   token header. `/` without the cookie is a 403 page that says to open the printed URL.
//! - `/api/*` needs the cookie or the `x-pi-forge-token` header (never a query token), else 403
//!   `forbidden`. Secrets are compared in constant time.
//! - A request authenticated by the cookie must come from the editor's own page: an `Origin`
//!   other than `http://127.0.0.1:<port>` / `http://localhost:<port>`, or a `Sec-Fetch-Site`
//!   other than `same-origin` / `none` (a page on another port of 127.0.0.1 is `same-site`),
//!   is 403 `bad_origin` on every method; `POST`, `PUT`, `PATCH` and `DELETE` also need the
//!   `Origin` present. The token header (scripts, the Pi extension) skips these checks.
//! - `/assets/*` is public: the bundle holds no secrets.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq as _;

use super::error::ApiError;
use super::state::ServerState;

/// The header that carries the token for scripts and the editor's own fetches.
pub const TOKEN_HEADER: &str = "x-pi-forge-token";

/// `Content-Security-Policy` of every response: only the server's own files, plus the one
/// stylesheet the page carries inline, named by its hash.
pub fn csp() -> &'static str {
    static CSP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSP.get_or_init(|| policy(super::assets::inline_style_hash()))
}

fn policy(inline_style_hash: Option<&str>) -> String {
    let style = inline_style_hash
        .map(|h| format!("style-src 'self' 'sha256-{h}'; "))
        .unwrap_or_default();
    format!(
        "default-src 'self'; {style}script-src 'self' 'wasm-unsafe-eval'; frame-ancestors 'none'"
    )
}

pub const INVALID_TOKEN: &str = "Invalid pi-forge editor token.";

/// Constant-time comparison of a presented token with the server's.
pub fn token_matches(presented: &str, token: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(token.as_bytes()))
}

/// The value of the cookie `name`, if the request has it.
pub fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v)
}

fn has_cookie(state: &ServerState, headers: &HeaderMap) -> bool {
    cookie_value(headers, &state.cookie_name)
        .is_some_and(|v| token_matches(v, &state.cookie_secret))
}

/// Whether a cookie-authenticated request did not come from the editor's own page: a foreign
/// or missing `Origin` (missing is only refused when it changes state), or a `Sec-Fetch-Site`
/// that is not `same-origin` or `none`.
fn from_elsewhere(state: &ServerState, headers: &HeaderMap, changes_state: bool) -> bool {
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or(""));
    let foreign_origin = match origin {
        Some(o) => !state.origins.iter().any(|allowed| allowed == o),
        None => changes_state,
    };
    let site = headers
        .get("sec-fetch-site")
        .map(|v| v.to_str().unwrap_or(""));
    foreign_origin || site.is_some_and(|s| s != "same-origin" && s != "none")
}

fn has_token_header(state: &ServerState, headers: &HeaderMap) -> bool {
    headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| token_matches(v.trim(), &state.token))
}

fn text(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

const NEED_TOKEN_PAGE: &str = "<!doctype html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pi-forge editor</title></head>
<body><h1>pi-forge editor</h1>
<p>This page needs the editor's session token. Open the address that <code>pi-forge ui</code> printed
(it ends in <code>/?token=…</code>), or run <code>pi-forge ui</code> again in the project to print it.</p>
</body></html>
";

/// The guard middleware (see the module documentation).
pub async fn guard(
    State(state): State<Arc<ServerState>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if !host.is_some_and(|h| state.hosts.iter().any(|allowed| allowed == h)) {
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "bad_host",
            format!(
                "Host must be 127.0.0.1:{port} or localhost:{port}.",
                port = state.port
            ),
        )
        .into_response();
    }

    let path = request.uri().path();
    if path == "/" || path == "/index.html" {
        if let Some(presented) = query_token(request.uri().query()) {
            if !token_matches(presented, &state.token) {
                return text(StatusCode::FORBIDDEN, INVALID_TOKEN);
            }
            let cookie = format!(
                "{}={}; HttpOnly; SameSite=Strict; Path=/",
                state.cookie_name, state.cookie_secret
            );
            let mut response = StatusCode::SEE_OTHER.into_response();
            let headers = response.headers_mut();
            headers.insert(header::LOCATION, HeaderValue::from_static("/"));
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                headers.insert(header::SET_COOKIE, value);
            }
            return response;
        }
        if !has_cookie(&state, headers) || from_elsewhere(&state, headers, false) {
            return (
                StatusCode::FORBIDDEN,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                )],
                NEED_TOKEN_PAGE,
            )
                .into_response();
        }
        return next.run(request).await;
    }

    if path == "/api" || path.starts_with("/api/") {
        let by_header = has_token_header(&state, headers);
        if !by_header && !has_cookie(&state, headers) {
            return ApiError::new(StatusCode::FORBIDDEN, "forbidden", INVALID_TOKEN)
                .into_response();
        }
        let changes_state = !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        );
        if !by_header && from_elsewhere(&state, headers, changes_state) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "bad_origin",
                format!(
                    "Cross-origin request refused: the session cookie only works from the editor's own page (Origin http://127.0.0.1:{port} or http://localhost:{port}); scripts send the {TOKEN_HEADER} header.",
                    port = state.port
                ),
            )
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_inline_stylesheet_by_its_hash() {
        assert_eq!(
            policy(None),
            "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; frame-ancestors 'none'"
        );
        assert_eq!(
            policy(Some("q83vEjRWeJA=")),
            "default-src 'self'; style-src 'self' 'sha256-q83vEjRWeJA='; \
             script-src 'self' 'wasm-unsafe-eval'; frame-ancestors 'none'"
        );
    }

    #[test]
    fn cookies_and_query_tokens_are_found_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; pi_forge_token_80=xyz; pi_forge_token_8=no"),
        );
        assert_eq!(cookie_value(&headers, "pi_forge_token_80"), Some("xyz"));
        assert_eq!(cookie_value(&headers, "pi_forge_token_8"), Some("no"));
        assert_eq!(cookie_value(&headers, "pi_forge_token"), None);
        assert_eq!(query_token(Some("x=1&token=abc")), Some("abc"));
        assert_eq!(query_token(Some("tokens=abc")), None);
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abd", "abc"));
        assert!(!token_matches("ab", "abc"));
        assert!(!token_matches("", "abc"));
    }
}
