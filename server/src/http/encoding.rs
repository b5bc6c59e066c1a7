//! Bodies kept with their compressed variants, and the answer a request gets from them.
//!
//! An [`Encoded`] body is built once and answered many times: the client's `Accept-Encoding`
//! picks brotli, then gzip, else the identity bytes; `If-None-Match` with the body's entity tag
//! answers `304`. Static assets come with the variants `cargo xtask dist` compressed at build
//! time and never compress anything at request time; views of the workspace
//! ([`super::viewcache`]) compress each variant once, on first demand.

use std::io::Write as _;
use std::sync::OnceLock;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// A content coding the server can send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Brotli,
    Gzip,
    Identity,
}

impl Coding {
    fn header(self) -> Option<HeaderValue> {
        match self {
            Coding::Brotli => Some(HeaderValue::from_static("br")),
            Coding::Gzip => Some(HeaderValue::from_static("gzip")),
            Coding::Identity => None,
        }
    }

    /// The entity-tag suffix of this variant (each coding is its own representation).
    fn tag_suffix(self) -> &'static str {
        match self {
            Coding::Brotli => "-br",
            Coding::Gzip => "-gz",
            Coding::Identity => "",
        }
    }
}

/// The coding to answer with for an `Accept-Encoding` header: brotli when acceptable and not
/// ranked below gzip, else gzip when acceptable, else identity. A coding is acceptable when it
/// is listed with `q` above 0, or `*` is (RFC 9110 §12.5.3).
pub fn negotiate(accept: Option<&HeaderValue>) -> Coding {
    let Some(text) = accept.and_then(|v| v.to_str().ok()) else {
        return Coding::Identity;
    };
    let (mut br, mut gzip, mut any) = (None, None, None);
    for item in text.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q = 1.0_f32;
        for param in parts {
            if let Some((key, value)) = param.split_once('=') {
                if key.trim().eq_ignore_ascii_case("q") {
                    q = value.trim().parse().unwrap_or(0.0);
                }
            }
        }
        match name.as_str() {
            "br" => br = Some(q),
            "gzip" | "x-gzip" => gzip = Some(q),
            "*" => any = Some(q),
            _ => {}
        }
    }
    let br = br.or(any).unwrap_or(0.0);
    let gzip = gzip.or(any).unwrap_or(0.0);
    if br > 0.0 && br >= gzip {
        Coding::Brotli
    } else if gzip > 0.0 {
        Coding::Gzip
    } else {
        Coding::Identity
    }
}

/// How a missing variant is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// Only what the build made: a missing variant is answered with the identity bytes.
    Build,
    /// Compressed here, once, the first time a client asks for it.
    OnDemand,
}

/// A body with its entity tag and compressed variants.
pub struct Encoded {
    identity: Bytes,
    br: OnceLock<Option<Bytes>>,
    gzip: OnceLock<Option<Bytes>>,
    source: Source,
    /// The entity tag of the identity bytes, without quotes.
    tag: String,
}

/// Brotli quality for bodies compressed at run time (a good ratio at well under a millisecond
/// for a 50-stack list).
const RUNTIME_BROTLI_QUALITY: u32 = 5;
/// Bodies smaller than this are always sent as they are.
const MIN_COMPRESS: usize = 256;

impl Encoded {
    /// A static asset and the variants the build made (`None`: the build made none).
    pub fn precompressed(
        identity: Bytes,
        br: Option<Bytes>,
        gzip: Option<Bytes>,
        tag: String,
    ) -> Encoded {
        Encoded {
            identity,
            br: OnceLock::from(br),
            gzip: OnceLock::from(gzip),
            source: Source::Build,
            tag,
        }
    }

    /// A body whose variants are compressed on first demand; the tag is derived from its bytes.
    pub fn on_demand(identity: Bytes) -> Encoded {
        let tag = forge_core::canonical::sha256_hex(&identity)[..20].to_string();
        Encoded {
            identity,
            br: OnceLock::new(),
            gzip: OnceLock::new(),
            source: Source::OnDemand,
            tag,
        }
    }

    pub fn identity(&self) -> &Bytes {
        &self.identity
    }

    /// The bytes of a variant, or `None` when there is none (the identity bytes are sent then).
    pub fn variant(&self, coding: Coding) -> Option<&Bytes> {
        let cell = match coding {
            Coding::Identity => return Some(&self.identity),
            Coding::Brotli => &self.br,
            Coding::Gzip => &self.gzip,
        };
        cell.get_or_init(|| match self.source {
            Source::Build => None,
            Source::OnDemand if self.identity.len() < MIN_COMPRESS => None,
            Source::OnDemand => compress(&self.identity, coding).map(Bytes::from),
        })
        .as_ref()
    }

    /// `"<tag>"`, `"<tag>-br"` or `"<tag>-gz"`.
    fn etag(&self, coding: Coding) -> String {
        format!("\"{}{}\"", self.tag, coding.tag_suffix())
    }

    /// Whether `If-None-Match` names this body (any of its variants) or is `*`.
    fn not_modified(&self, request: &HeaderMap) -> bool {
        request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().trim_start_matches("W/").trim_matches('"'))
            .any(|t| {
                t == "*"
                    || t.strip_prefix(self.tag.as_str())
                        .is_some_and(|rest| ["", "-br", "-gz"].contains(&rest))
            })
    }

    /// The answer to a `GET` with these request headers: `304` when `If-None-Match` names the
    /// body, else `200` with the variant `Accept-Encoding` prefers. `headers` (content type,
    /// caching) are added to both.
    pub fn respond(&self, request: &HeaderMap, mut headers: HeaderMap) -> Response {
        let wanted = negotiate(request.get(header::ACCEPT_ENCODING));
        let (coding, body) = match self.variant(wanted) {
            Some(body) => (wanted, body.clone()),
            None => (Coding::Identity, self.identity.clone()),
        };
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        if let Ok(value) = HeaderValue::from_str(&self.etag(coding)) {
            headers.insert(header::ETAG, value);
        }
        if self.not_modified(request) {
            headers.remove(header::CONTENT_TYPE);
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        if let Some(value) = coding.header() {
            headers.insert(header::CONTENT_ENCODING, value);
        }
        (headers, body).into_response()
    }
}

/// Compresses for run-time variants; `None` if the encoder fails (the identity bytes are sent).
fn compress(data: &[u8], coding: Coding) -> Option<Vec<u8>> {
    match coding {
        Coding::Identity => None,
        Coding::Brotli => {
            let mut out = Vec::with_capacity(data.len() / 4);
            {
                let mut writer =
                    brotli::CompressorWriter::new(&mut out, 4096, RUNTIME_BROTLI_QUALITY, 22);
                writer.write_all(data).ok()?;
                writer.flush().ok()?;
            }
            Some(out)
        }
        Coding::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 4),
                flate2::Compression::default(),
            );
            encoder.write_all(data).ok()?;
            encoder.finish().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn accept(text: &str) -> Coding {
        negotiate(Some(&HeaderValue::from_str(text).unwrap()))
    }

    #[test]
    fn negotiation_prefers_brotli_then_gzip_and_honours_q_values() {
        assert_eq!(negotiate(None), Coding::Identity);
        assert_eq!(accept(""), Coding::Identity);
        assert_eq!(accept("gzip, deflate, br, zstd"), Coding::Brotli);
        assert_eq!(accept("gzip"), Coding::Gzip);
        assert_eq!(accept("x-gzip"), Coding::Gzip);
        assert_eq!(accept("BR"), Coding::Brotli);
        assert_eq!(accept("deflate"), Coding::Identity);
        assert_eq!(accept("identity"), Coding::Identity);
        assert_eq!(accept("br;q=0, gzip"), Coding::Gzip);
        assert_eq!(accept("br;q=0.5, gzip;q=0.8"), Coding::Gzip);
        assert_eq!(accept("br;q=0.8, gzip;q=0.8"), Coding::Brotli);
        assert_eq!(accept("br;q=0, gzip;q=0"), Coding::Identity);
        assert_eq!(accept("*"), Coding::Brotli);
        assert_eq!(accept("*;q=0.1, br;q=0"), Coding::Gzip);
        assert_eq!(accept("gzip;q=nonsense"), Coding::Identity);
    }

    fn request(accept: Option<&str>, if_none_match: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(a).unwrap());
        }
        if let Some(t) = if_none_match {
            headers.insert(header::IF_NONE_MATCH, HeaderValue::from_str(t).unwrap());
        }
        headers
    }

    async fn answer(body: &Encoded, req: HeaderMap) -> (StatusCode, HeaderMap, Vec<u8>) {
        let response = body.respond(&req, HeaderMap::new());
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, headers, bytes.to_vec())
    }

    #[tokio::test]
    async fn a_precompressed_body_is_answered_with_the_build_variant_byte_for_byte() {
        // The "variants" are deliberately not real compressions of the identity bytes: the
        // answer must be exactly what the build made, never a compression done here.
        let body = Encoded::precompressed(
            Bytes::from_static(b"identity bytes"),
            Some(Bytes::from_static(b"build brotli")),
            Some(Bytes::from_static(b"build gzip")),
            "abc".into(),
        );
        let (status, headers, bytes) = answer(&body, request(Some("gzip, br"), None)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(bytes, b"build brotli");
        assert_eq!(headers[header::CONTENT_ENCODING], "br");
        assert_eq!(headers[header::ETAG], "\"abc-br\"");
        assert_eq!(headers[header::VARY], "accept-encoding");
        let (_, headers, bytes) = answer(&body, request(Some("gzip"), None)).await;
        assert_eq!(bytes, b"build gzip");
        assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
        assert_eq!(headers[header::ETAG], "\"abc-gz\"");
        let (_, headers, bytes) = answer(&body, request(None, None)).await;
        assert_eq!(bytes, b"identity bytes");
        assert_eq!(headers.get(header::CONTENT_ENCODING), None);
        assert_eq!(headers[header::ETAG], "\"abc\"");
    }

    #[tokio::test]
    async fn an_asset_without_a_build_variant_is_never_compressed_at_request_time() {
        let data = Bytes::from(vec![b'a'; 10_000]);
        let body = Encoded::precompressed(data.clone(), None, None, "t".into());
        for accept in ["br", "gzip", "gzip, deflate, br, zstd", "*"] {
            let (status, headers, bytes) = answer(&body, request(Some(accept), None)).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(bytes, data.to_vec(), "{accept}");
            assert_eq!(headers.get(header::CONTENT_ENCODING), None, "{accept}");
            assert_eq!(headers[header::ETAG], "\"t\"");
        }
    }

    #[tokio::test]
    async fn an_on_demand_body_is_compressed_once_and_decodes_to_its_identity_bytes() {
        let text: String = (0..400)
            .map(|i| format!("{{\"id\":\"stack-{i}\"}},"))
            .collect();
        let body = Encoded::on_demand(Bytes::from(text.clone()));
        let (_, headers, br) = answer(&body, request(Some("br"), None)).await;
        assert_eq!(headers[header::CONTENT_ENCODING], "br");
        assert!(br.len() < text.len() / 4, "{} of {}", br.len(), text.len());
        let mut decoded = Vec::new();
        brotli::Decompressor::new(br.as_slice(), 4096)
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, text.as_bytes());
        // The same bytes again: compressed once, kept.
        let (_, _, again) = answer(&body, request(Some("br"), None)).await;
        assert_eq!(again, br);
        assert!(std::ptr::eq(
            body.variant(Coding::Brotli).unwrap().as_ptr(),
            body.variant(Coding::Brotli).unwrap().as_ptr()
        ));
        let (_, headers, gz) = answer(&body, request(Some("gzip"), None)).await;
        assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(gz.as_slice())
            .read_to_string(&mut decoded)
            .unwrap();
        assert_eq!(decoded, text);
        assert_eq!(
            headers[header::ETAG].to_str().unwrap(),
            format!(
                "\"{}-gz\"",
                &forge_core::canonical::sha256_hex(text.as_bytes())[..20]
            )
        );
    }

    #[tokio::test]
    async fn a_small_on_demand_body_is_sent_as_it_is() {
        let body = Encoded::on_demand(Bytes::from_static(b"{\"stacks\":[]}"));
        let (_, headers, bytes) = answer(&body, request(Some("br, gzip"), None)).await;
        assert_eq!(bytes, b"{\"stacks\":[]}");
        assert_eq!(headers.get(header::CONTENT_ENCODING), None);
    }

    #[tokio::test]
    async fn if_none_match_with_any_variant_tag_is_304_without_a_body() {
        let body = Encoded::precompressed(
            Bytes::from_static(b"x"),
            Some(Bytes::from_static(b"y")),
            None,
            "abc".into(),
        );
        for tag in [
            "\"abc\"",
            "\"abc-br\"",
            "W/\"abc-gz\"",
            "\"zzz\", \"abc\"",
            "*",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css"));
            let response = body.respond(&request(Some("br"), Some(tag)), headers);
            assert_eq!(response.status(), StatusCode::NOT_MODIFIED, "{tag}");
            assert_eq!(response.headers()[header::ETAG], "\"abc-br\"");
            assert_eq!(response.headers().get(header::CONTENT_TYPE), None);
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            assert!(bytes.is_empty());
        }
        for tag in ["\"ab\"", "\"abcd\"", "\"abc-xx\""] {
            let (status, _, _) = answer(&body, request(None, Some(tag))).await;
            assert_eq!(status, StatusCode::OK, "{tag}");
        }
    }
}
