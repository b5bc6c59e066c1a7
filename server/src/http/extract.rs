//! Request input: the JSON body extractor (with the exact 400 and 413 answers), JSON responses in
//! JavaScript's formatting, and the base revision a write names.

use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{Map, Value};

use serde::de::DeserializeOwned;

use super::error::{ApiError, ApiResult};
use forge_core::json;

/// Largest request body the API accepts, in bytes.
pub const BODY_LIMIT: usize = 2_000_000;

/// After the limit is exceeded the rest of the body is read and dropped (up to this many bytes),
/// so the client sees the 413 instead of a reset connection.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        "Request body is too large.",
    )
}

pub fn invalid_json() -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_json",
        "Request body must contain valid JSON.",
    )
}

/// A JSON request body: `{}` when the body is blank, the parsed value otherwise (key order kept).
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        read_json(request, BODY_LIMIT).await.map(JsonBody)
    }
}

/// Largest body of a live-host request (`/api/host/...`): it carries whole conversations.
pub const HOST_BODY_LIMIT: usize = 32_000_000;

/// A JSON body of a live-host request, up to [`HOST_BODY_LIMIT`] bytes.
pub struct HostBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for HostBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        read_json(request, HOST_BODY_LIMIT).await.map(HostBody)
    }
}

/// Reads and parses a JSON body of at most `limit` bytes (413 beyond, 400 when not JSON).
async fn read_json(request: Request, limit: usize) -> Result<Value, ApiError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = request.into_body().into_data_stream();
    let mut bytes: Vec<u8> =
        Vec::with_capacity(declared.map_or(0, |n| n.min(limit as u64) as usize));
    let mut seen = 0usize;
    let mut over = declared.is_some_and(|n| n > limit as u64);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("Could not read the request body: {e}")))?;
        seen = seen.saturating_add(chunk.len());
        if seen > limit {
            over = true;
        }
        if over {
            if seen > DRAIN_LIMIT {
                break;
            }
            continue;
        }
        bytes.extend_from_slice(&chunk);
    }
    if over {
        return Err(too_large());
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    json::parse_bytes(&bytes).map_err(|_| invalid_json())
}

impl JsonBody {
    /// The body as an object, or 400.
    pub fn object(self) -> ApiResult<Map<String, Value>> {
        match self.0 {
            Value::Object(map) => Ok(map),
            other => Err(ApiError::bad_request(format!(
                "Request body must be a JSON object, not {}.",
                json::type_name(&other)
            ))),
        }
    }
}

/// A JSON response written the way JavaScript writes it (`JSON.stringify`).
pub fn json_response(status: StatusCode, value: &Value) -> Response {
    json_text_response(status, json::to_compact(value))
}

fn json_text_response(status: StatusCode, text: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        text,
    )
        .into_response()
}

pub fn ok_json(value: &Value) -> Response {
    json_response(StatusCode::OK, value)
}

/// A contract struct ([`forge_core::api`]) as a JSON response, written like [`json_response`]
/// but straight from the struct (no `Value` tree in between).
pub fn typed_response<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    match json::to_compact_typed(value) {
        Ok(text) => json_text_response(status, text),
        Err(e) => {
            ApiError::internal(format!("Could not serialize the answer: {e}")).into_response()
        }
    }
}

pub fn ok_typed<T: serde::Serialize>(value: &T) -> Response {
    typed_response(StatusCode::OK, value)
}

/// `sha256:<hex>` from either that form or 64 bare hex digits (the 0.5.5 `sourceRevision`).
pub use forge_core::workspace::service::normalize_revision;

/// The 64 hex digits of a revision (`sourceRevision` on the wire).
pub fn bare_revision(revision: &str) -> &str {
    revision.strip_prefix("sha256:").unwrap_or(revision)
}

/// The `ETag` value of a revision.
pub fn etag(revision: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("\"{revision}\"")).ok()
}

fn invalid_revision(field: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_revision",
        format!("{field} must be a revision: \"sha256:\" followed by 64 hex digits."),
    )
    .with_field(field)
}

/// The revision a write is based on: `If-Match` first, then the body's `sourceRevision`,
/// `expectedSourceRevision` or `revision`. `Ok(None)` when none is given (an empty `If-Match: ""`
/// counts as none).
pub fn base_revision(headers: &HeaderMap, body: &Map<String, Value>) -> ApiResult<Option<String>> {
    if let Some(value) = headers.get(header::IF_MATCH) {
        let text = value.to_str().unwrap_or_default().trim();
        let text = text.strip_prefix("W/").unwrap_or(text);
        let text = text.trim_matches('"');
        if text.is_empty() {
            // `If-Match: ""`: no revision (the editor sends it for a file it could not read,
            // which the write service then refuses with the reason).
            return Ok(None);
        }
        return normalize_revision(text)
            .map(Some)
            .ok_or_else(|| invalid_revision("If-Match"));
    }
    for field in ["sourceRevision", "expectedSourceRevision", "revision"] {
        match body.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(text)) => {
                return normalize_revision(text)
                    .map(Some)
                    .ok_or_else(|| invalid_revision(field))
            }
            Some(_) => return Err(invalid_revision(field)),
        }
    }
    Ok(None)
}

/// The resource object of a write body: `body[key]` when it is an object (`{"stack": {...}}`),
/// else the body itself minus the revision fields (a bare resource).
pub fn resource_object(body: &Map<String, Value>, key: &str) -> ApiResult<Value> {
    match body.get(key) {
        Some(Value::Object(_)) => Ok(body[key].clone()),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} must be a JSON object, not {}.",
            json::type_name(other)
        ))
        .with_field(key)),
        None => {
            let mut bare = body.clone();
            for field in [
                "sourceRevision",
                "expectedSourceRevision",
                "scope",
                "activate",
            ] {
                bare.remove(field);
            }
            if bare.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "Request body must contain a {key} object."
                ))
                .with_field(key));
            }
            Ok(Value::Object(bare))
        }
    }
}

pub fn require_object(body: &Value, what: &str) -> ApiResult<()> {
    if body.is_object() {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "The {what} body must be a JSON object, not {}.",
        json::type_name(body)
    )))
}

/// Parses a host body into `T`, naming the field at fault.
pub fn parse<T: DeserializeOwned>(body: Value, what: &str) -> ApiResult<T> {
    require_object(&body, what)?;
    serde_json::from_value(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_host_message",
            format!("Malformed {what} message: {e}."),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_accepted_with_or_without_the_prefix() {
        let hex = "a".repeat(64);
        assert_eq!(normalize_revision(&hex), Some(format!("sha256:{hex}")));
        assert_eq!(
            normalize_revision(&format!("sha256:{hex}")),
            Some(format!("sha256:{hex}"))
        );
        assert_eq!(normalize_revision("sha256:abc"), None);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_MATCH,
            HeaderValue::from_str(&format!("\"sha256:{hex}\"")).unwrap(),
        );
        let body = Map::new();
        assert_eq!(
            base_revision(&headers, &body).unwrap(),
            Some(format!("sha256:{hex}"))
        );
        let mut body = Map::new();
        body.insert("expectedSourceRevision".into(), Value::String(hex.clone()));
        assert_eq!(
            base_revision(&HeaderMap::new(), &body).unwrap(),
            Some(format!("sha256:{hex}"))
        );
        assert_eq!(base_revision(&HeaderMap::new(), &Map::new()).unwrap(), None);
    }

    #[test]
    fn bare_and_wrapped_resources() {
        let wrapped: Map<String, Value> =
            serde_json::from_str(r#"{"stack":{"id":"a"},"sourceRevision":"x"}"#).unwrap();
        assert_eq!(
            resource_object(&wrapped, "stack").unwrap(),
            serde_json::json!({"id":"a"})
        );
        let bare: Map<String, Value> =
            serde_json::from_str(r#"{"id":"a","items":[],"sourceRevision":"x"}"#).unwrap();
        assert_eq!(
            resource_object(&bare, "stack").unwrap(),
            serde_json::json!({"id":"a","items":[]})
        );
        assert_eq!(
            resource_object(&Map::new(), "stack").unwrap_err().code,
            "invalid_input"
        );
    }
}
