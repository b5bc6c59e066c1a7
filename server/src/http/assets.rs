//! The embedded single-page app.
//!
//! `cargo xtask dist` writes the bundle to `assets/dist/` and compresses its wasm, js, css and bin
//! files once, at build time (`<name>.br`: brotli quality 11, `<name>.gz`: gzip -9); rust-embed
//! embeds it all at compile time. At first use the server derives content-hashed names
//! (`app.3f2a9c01d4.css`) for every file and rewrites the references in `index.html` to them,
//! so browsers may cache assets forever (`immutable`) while the page itself is never cached.
//! The plain names keep working with revalidation (`no-cache` + `ETag`). An asset is answered
//! with the build's variant that `Accept-Encoding` prefers, byte for byte; nothing is compressed
//! at request time. The page carries `app.css` inline (see [`STYLESHEET`]). The page is built
//! per workspace snapshot with the stack list embedded
//! ([`super::viewcache`]). Without a bundle `/` answers 503 and says how to build it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

use super::encoding::Encoded;

/// The web bundle. Empty when `assets/dist` did not exist at build time.
#[derive(RustEmbed)]
#[folder = "../assets/dist"]
#[allow_missing = true]
struct Dist;

pub(super) const MISSING_BUNDLE: &str = "\
pi-forge was built without its web bundle (assets/dist was empty).

Build it and rebuild pi-forge:
    cargo xtask dist
    cargo build -p pi-forge
(or simply `cargo xtask run`).
";

/// The page; its references are rewritten to the hashed names, and it is never served as is.
const INDEX: &str = "index.html";
/// The stylesheet. The page carries it inline (`<style>`, allowed by its hash in the
/// Content-Security-Policy), so the first screen paints without waiting for a second request;
/// `/assets/app.css` is still served.
const STYLESHEET: &str = "app.css";
/// Suffixes of the build's compressed variants (served only as variants of their file).
const VARIANTS: [&str; 2] = [".br", ".gz"];

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

struct Asset {
    body: Encoded,
    mime: HeaderValue,
}

struct Bundle {
    /// By plain name (`false`) and by hashed name (`true`: immutable).
    files: HashMap<String, (Arc<Asset>, bool)>,
    /// `index.html` with hashed references and the stylesheet inline.
    index: Option<String>,
    /// Base64 SHA-256 of the inline stylesheet (for the Content-Security-Policy).
    style_hash: Option<String>,
}

fn hashed_name(name: &str, hash: &str) -> String {
    let short = &hash[..10.min(hash.len())];
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{short}.{ext}"),
        None => format!("{name}.{short}"),
    }
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

fn embedded(name: &str) -> Option<Bytes> {
    Dist::get(name).map(|f| bytes_of(f.data))
}

fn bundle() -> &'static Bundle {
    static BUNDLE: OnceLock<Bundle> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let mut files = HashMap::new();
        // Longest names first, so no name is rewritten inside a longer one.
        let mut renames: Vec<(String, String)> = Vec::new();
        let mut names: Vec<String> = Dist::iter().map(|n| n.into_owned()).collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let served = names
            .iter()
            .filter(|n| n.as_str() != INDEX && !VARIANTS.iter().any(|v| n.ends_with(v)));
        for name in served {
            let Some(file) = Dist::get(name) else {
                continue;
            };
            let hash = hex(&file.metadata.sha256_hash());
            let hashed = hashed_name(name, &hash);
            renames.push((name.clone(), hashed.clone()));
            let mime = HeaderValue::from_str(file.metadata.mimetype())
                .unwrap_or(HeaderValue::from_static("application/octet-stream"));
            let asset = Arc::new(Asset {
                body: Encoded::precompressed(
                    bytes_of(file.data),
                    embedded(&format!("{name}.br")),
                    embedded(&format!("{name}.gz")),
                    hash,
                ),
                mime,
            });
            files.insert(hashed, (Arc::clone(&asset), true));
            files.insert(name.clone(), (asset, false));
        }
        let mut index =
            Dist::get(INDEX).map(|f| rewrite(&String::from_utf8_lossy(&f.data), &renames));
        let style_hash = match (&mut index, Dist::get(STYLESHEET)) {
            (Some(page), Some(css)) => inline_stylesheet(page, &css.data, &renames)
                .then(|| base64(&css.metadata.sha256_hash())),
            _ => None,
        };
        Bundle {
            files,
            index,
            style_hash,
        }
    })
}

/// Replaces the page's `<link rel="stylesheet">` to [`STYLESHEET`] with a `<style>` element
/// holding `css`. The page is left as it is (`false`) when the link is missing or the text is not
/// UTF-8 or could end the element early.
fn inline_stylesheet(page: &mut String, css: &[u8], renames: &[(String, String)]) -> bool {
    let Ok(text) = std::str::from_utf8(css) else {
        return false;
    };
    if text.to_ascii_lowercase().contains("</style") {
        return false;
    }
    let href = renames
        .iter()
        .find(|(plain, _)| plain == STYLESHEET)
        .map_or(STYLESHEET, |(_, hashed)| hashed.as_str());
    let link = format!("<link rel=\"stylesheet\" href=\"/assets/{href}\">");
    let Some(at) = page.find(&link) else {
        return false;
    };
    page.replace_range(at..at + link.len(), &format!("<style>{text}</style>"));
    true
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Base64 SHA-256 of the stylesheet the page carries inline; `None` without a bundle.
pub fn inline_style_hash() -> Option<&'static str> {
    bundle().style_hash.as_deref()
}

pub fn bundle_present() -> bool {
    bundle().index.is_some()
}

/// `index.html` with its references rewritten to the hashed names; `None` without a bundle.
pub fn index_html() -> Option<&'static str> {
    bundle().index.as_deref()
}

/// `GET /assets/<name>`: hashed names are immutable, plain names revalidate.
pub async fn asset(Path(path): Path<String>, request: HeaderMap) -> Response {
    let Some((file, hashed)) = bundle().files.get(&path) else {
        return not_found();
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if *hashed { IMMUTABLE } else { "no-cache" }),
    );
    headers.insert(header::CONTENT_TYPE, file.mime.clone());
    file.body.respond(&request, headers)
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

    #[test]
    fn the_stylesheet_link_becomes_an_inline_style_element() {
        let renames = vec![("app.css".to_string(), "app.0123456789.css".to_string())];
        let head = r#"<head><link rel="stylesheet" href="/assets/app.0123456789.css"><script></script></head>"#;
        let mut page = head.to_string();
        assert!(inline_stylesheet(&mut page, b"a { color: red }", &renames));
        assert_eq!(
            page,
            "<head><style>a { color: red }</style><script></script></head>"
        );
        // Text that could close the element, text that is not UTF-8, or a page without the
        // link: the page stays as it is.
        for css in [
            &b"a{} </STYLE><script>x()</script>"[..],
            &b"a{content:\"\xff\"}"[..],
        ] {
            let mut page = head.to_string();
            assert!(!inline_stylesheet(&mut page, css, &renames));
            assert_eq!(page, head);
        }
        let mut page = r#"<link rel="stylesheet" href="/assets/other.css">"#.to_string();
        assert!(!inline_stylesheet(&mut page, b"a{}", &renames));
        assert_eq!(page, r#"<link rel="stylesheet" href="/assets/other.css">"#);
    }
}
