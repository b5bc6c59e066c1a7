//! The embedded single-page app.
//!
//! `cargo xtask dist` writes the bundle to `assets/dist/`; rust-embed embeds it at compile time.
//! At first use the server derives content-hashed names (`app.3f2a9c01d4.css`) for every file
//! and rewrites the references in `index.html` and `boot.js` to them, so browsers may cache
//! assets forever (`immutable`) while the page itself is never cached. The plain names keep
//! working with revalidation (`no-cache` + `ETag`). Without a bundle `/` answers 503 and says how
//! to build it.

use std::borrow::Cow;

use axum::body::Bytes;
use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use forge_core::canonical::sha256_hex;
use rust_embed::RustEmbed;

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

/// Files that name other assets; their references are rewritten to the hashed names.
const REFERRING: [&str; 2] = ["boot.js", "index.html"];

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

struct Asset {
    data: Bytes,
    mime: String,
    etag: String,
    /// Served under its content-hashed name.
    hashed: bool,
}

struct Bundle {
    /// By plain and by hashed name.
    files: HashMap<String, Asset>,
    /// `index.html` with hashed references.
    index: Option<Vec<u8>>,
}

fn hashed_name(name: &str, hash: &str) -> String {
    let short = &hash[..10.min(hash.len())];
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{short}.{ext}"),
        None => format!("{name}.{short}"),
    }
}

fn mime_of(name: &str) -> String {
    Dist::get(name)
        .map(|f| f.metadata.mimetype().to_string())
        .unwrap_or_else(|| "application/octet-stream".to_string())
}

fn rewrite(text: &str, renames: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (plain, hashed) in renames {
        for quote in ['"', '\''] {
            out = out.replace(
                &format!("/assets/{plain}{quote}"),
                &format!("/assets/{hashed}{quote}"),
            );
        }
    }
    out
}

fn bundle() -> &'static Bundle {
    static BUNDLE: OnceLock<Bundle> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let mut files = HashMap::new();
        // Longest names first, so no name is rewritten inside a longer one.
        let mut renames: Vec<(String, String)> = Vec::new();
        let mut names: Vec<String> = Dist::iter().map(|n| n.into_owned()).collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        for name in names.iter().filter(|n| !REFERRING.contains(&n.as_str())) {
            let Some(file) = Dist::get(name) else {
                continue;
            };
            let hash = hex(&file.metadata.sha256_hash());
            let hashed = hashed_name(name, &hash);
            renames.push((name.clone(), hashed.clone()));
            let mime = file.metadata.mimetype().to_string();
            files.insert(
                hashed,
                Asset {
                    data: bytes_of(file.data.clone()),
                    mime: mime.clone(),
                    etag: format!("\"{hash}\""),
                    hashed: true,
                },
            );
            files.insert(
                name.clone(),
                Asset {
                    data: bytes_of(file.data),
                    mime,
                    etag: format!("\"{hash}\""),
                    hashed: false,
                },
            );
        }
        if let Some(boot) = Dist::get("boot.js") {
            let text = rewrite(&String::from_utf8_lossy(&boot.data), &renames);
            let hash = sha256_hex(text.as_bytes());
            let hashed = hashed_name("boot.js", &hash);
            renames.push(("boot.js".to_string(), hashed.clone()));
            let mime = mime_of("boot.js");
            files.insert(
                hashed,
                Asset {
                    data: Bytes::from(text.clone().into_bytes()),
                    mime: mime.clone(),
                    etag: format!("\"{hash}\""),
                    hashed: true,
                },
            );
            files.insert(
                "boot.js".to_string(),
                Asset {
                    data: Bytes::from(text.into_bytes()),
                    mime,
                    etag: format!("\"{hash}\""),
                    hashed: false,
                },
            );
        }
        let index = Dist::get("index.html")
            .map(|f| rewrite(&String::from_utf8_lossy(&f.data), &renames).into_bytes());
        Bundle { files, index }
    })
}

pub fn bundle_present() -> bool {
    bundle().index.is_some()
}

/// `GET /` (after the guard): the page, never cached.
pub async fn index() -> Response {
    match &bundle().index {
        Some(html) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            html.clone(),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            MISSING_BUNDLE,
        )
            .into_response(),
    }
}

/// `GET /assets/<name>`: hashed names are immutable, plain names revalidate.
pub async fn asset(Path(path): Path<String>, request: HeaderMap) -> Response {
    let Some(file) = bundle().files.get(&path) else {
        return not_found();
    };
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&file.etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if file.hashed { IMMUTABLE } else { "no-cache" }),
    );
    let not_modified = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == file.etag));
    if not_modified {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    if let Ok(value) = HeaderValue::from_str(&file.mime) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    (headers, file.data.clone()).into_response()
}

pub fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        "Not found.",
    )
        .into_response()
}

fn bytes_of(data: Cow<'static, [u8]>) -> Bytes {
    match data {
        Cow::Borrowed(slice) => Bytes::from_static(slice),
        Cow::Owned(vec) => Bytes::from(vec),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_keep_the_extension() {
        assert_eq!(
            hashed_name("app.css", "0123456789abcdef"),
            "app.0123456789.css"
        );
        assert_eq!(
            hashed_name("forge_web_bg.wasm", "ffffffffffff"),
            "forge_web_bg.ffffffffff.wasm"
        );
    }

    #[test]
    fn references_are_rewritten_only_as_whole_names() {
        let renames = vec![
            (
                "forge_web_bg.wasm".to_string(),
                "forge_web_bg.1.wasm".to_string(),
            ),
            ("forge_web.js".to_string(), "forge_web.2.js".to_string()),
        ];
        assert_eq!(
            rewrite(
                r#"import("/assets/forge_web.js"); x('/assets/forge_web_bg.wasm'); "/assets/forge_web.jsx""#,
                &renames
            ),
            r#"import("/assets/forge_web.2.js"); x('/assets/forge_web_bg.1.wasm'); "/assets/forge_web.jsx""#
        );
    }
}
