//! `pi-forge ui`: serves the embedded web editor and its JSON API on 127.0.0.1.
//!
//! The single-page app is the bundle that `cargo xtask dist` writes to `assets/dist/`,
//! embedded at compile time with rust-embed (`build.rs` reruns the build when it changes).
//! When the bundle was missing at build time the binary still works: `/` answers 503 and says
//! how to build it. This is the placeholder server; the workspace API and tokens come later.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context as _;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rust_embed::{EmbeddedFile, RustEmbed};
use tower_http::compression::CompressionLayer;

/// The web bundle. Empty when `assets/dist` did not exist at build time.
#[derive(RustEmbed)]
#[folder = "../assets/dist"]
#[allow_missing = true]
struct Dist;

const MISSING_BUNDLE: &str = "\
pi-forge was built without its web bundle (assets/dist was empty).

Build it and rebuild pi-forge:
    cargo xtask dist
    cargo build -p pi-forge
(or simply `cargo xtask run`).
";

/// Options of `pi-forge ui`.
pub struct UiOptions {
    /// Project directory (the folder that holds `.pi/`).
    pub project: PathBuf,
    /// Port on 127.0.0.1; `None` picks a free one.
    pub port: Option<u16>,
    /// Do not open a browser, only print the URL.
    pub no_open: bool,
    /// Serve the built-in demo workspace instead of the project.
    pub demo: bool,
}

/// What every handler may read; cheap to clone.
#[derive(Clone)]
struct AppState {
    demo: bool,
}

/// Serves until Ctrl-C (or SIGTERM). The first line on stdout is the URL.
pub fn run(opts: UiOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(opts))
}

async fn serve(opts: UiOptions) -> anyhow::Result<()> {
    let wanted = SocketAddr::from((Ipv4Addr::LOCALHOST, opts.port.unwrap_or(0)));
    let listener = tokio::net::TcpListener::bind(wanted)
        .await
        .with_context(|| {
            format!("cannot listen on {wanted}; choose another port with --port, or omit it")
        })?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}/");

    // Scripts and tests read the URL from the first line of stdout; everything else goes
    // to stderr.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{url}")?;
    stdout.flush()?;
    drop(stdout);

    if opts.demo {
        eprintln!("pi-forge: serving the built-in demo workspace");
    } else {
        eprintln!("pi-forge: serving {}", opts.project.display());
    }
    if !bundle_present() {
        eprintln!("pi-forge: warning: no web bundle embedded; run `cargo xtask dist` and rebuild");
    }
    eprintln!("pi-forge: press Ctrl-C to stop");
    if !opts.no_open {
        open_browser(&url);
    }

    axum::serve(listener, router(AppState { demo: opts.demo }))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("the web server failed")?;
    eprintln!("pi-forge: stopped");
    Ok(())
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/assets/{*path}", get(asset))
        .route("/api/meta", get(meta))
        .fallback(not_found)
        .layer(CompressionLayer::new())
        .with_state(state)
}

fn bundle_present() -> bool {
    Dist::get("index.html").is_some()
}

async fn index(headers: HeaderMap) -> Response {
    match Dist::get("index.html") {
        Some(file) => embedded(file, &headers),
        None => (StatusCode::SERVICE_UNAVAILABLE, MISSING_BUNDLE).into_response(),
    }
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match Dist::get(&path) {
        Some(file) => embedded(file, &headers),
        None => not_found().await.into_response(),
    }
}

async fn meta(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "name": "pi-forge",
        "version": env!("CARGO_PKG_VERSION"),
        "demo": state.demo,
    }))
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}

/// An embedded file with its content type. Asset names are not hashed yet, so browsers
/// revalidate every time (`no-cache`) and get a 304 when the ETag still matches.
fn embedded(file: EmbeddedFile, request: &HeaderMap) -> Response {
    let etag = format!("\"{}\"", hex(&file.metadata.sha256_hash()));
    let not_modified = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if not_modified {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    if let Ok(value) = HeaderValue::from_str(file.metadata.mimetype()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    (headers, file.data).into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    eprintln!("pi-forge: shutting down");
}

/// Best effort: a missing or failing opener only prints a hint.
fn open_browser(url: &str) {
    let mut cmd = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut cmd = std::process::Command::new("cmd");
        cmd.args(["/C", "start", ""]);
        cmd
    } else {
        std::process::Command::new("xdg-open")
    };
    let spawned = cmd
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if spawned.is_err() {
        eprintln!("pi-forge: could not open a browser; open {url} yourself (or pass --no-open)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{to_bytes, Body};
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn get(path: &str, demo: bool) -> (StatusCode, HeaderMap, String) {
        let response = router(AppState { demo })
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn meta_reports_name_version_and_demo() {
        let (status, headers, body) = get("/api/meta", true).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "pi-forge", "version": env!("CARGO_PKG_VERSION"), "demo": true})
        );
    }

    #[tokio::test]
    async fn index_serves_the_bundle_or_explains_how_to_build_it() {
        let (status, headers, body) = get("/", false).await;
        if bundle_present() {
            assert_eq!(status, StatusCode::OK);
            assert_eq!(headers[header::CONTENT_TYPE], "text/html");
            assert!(body.contains("<title>pi-forge</title>"), "{body}");
        } else {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            assert!(body.contains("cargo xtask dist"), "{body}");
        }
    }

    #[tokio::test]
    async fn assets_have_their_content_type_and_revalidate() {
        if !bundle_present() {
            return; // Nothing embedded: covered by the 503 branch above.
        }
        for (path, mime) in [
            ("/assets/app.css", "text/css"),
            ("/assets/forge_web.js", "text/javascript"),
            ("/assets/forge_web_bg.wasm", "application/wasm"),
        ] {
            let (status, headers, _) = get(path, false).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(headers[header::CONTENT_TYPE], mime, "{path}");
            assert_eq!(headers[header::CACHE_CONTROL], "no-cache", "{path}");
            let etag = headers[header::ETAG].clone();
            let response = router(AppState { demo: false })
                .oneshot(
                    Request::get(path)
                        .header(header::IF_NONE_MATCH, etag)
                        .body(Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::NOT_MODIFIED, "{path}");
        }
    }

    #[tokio::test]
    async fn unknown_paths_are_404() {
        assert_eq!(get("/nope", false).await.0, StatusCode::NOT_FOUND);
        assert_eq!(get("/assets/nope.js", false).await.0, StatusCode::NOT_FOUND);
    }
}
