//! The JSON API client: every request the app makes goes through [`call`].
//!
//! Answers are read into forge-core's contract structs ([`forge_core::api`]) with [`get_as`],
//! [`post_as`] and [`call_as`]: the server writes the same types, so a renamed member is a
//! compile error, and an answer that does not read is an error (`invalid_answer`), never a
//! silently empty field.
//!
//! The session cookie travels with every same-origin request, and the browser adds the
//! `Origin` header the server checks on writes, so nothing here handles credentials.

use forge_core::api::ErrorBody;
use gloo_net::http::{Request, RequestBuilder};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A failed request: the server's `{error, code, ...}` body, or a transport failure.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status; 0 when the request never got an answer.
    pub status: u16,
    pub code: String,
    pub message: String,
    /// The error body (`currentRevision`, `current`, `details`, ...); empty members when the
    /// answer was not one. Boxed: it is rare and large, and results stay small.
    pub body: Box<ErrorBody>,
}

impl ApiError {
    fn transport(message: String) -> ApiError {
        ApiError {
            status: 0,
            code: "network".into(),
            message: format!("The pi-forge server did not answer: {message}"),
            body: Box::default(),
        }
    }

    /// No answer at all: the server is not there (stopped, restarting, crashed).
    pub fn is_transport(&self) -> bool {
        self.status == 0 && self.code == "network"
    }

    /// A 2xx answer that does not read as the contract's `what`.
    pub fn invalid_answer(what: &str, error: impl std::fmt::Display) -> ApiError {
        ApiError {
            status: 200,
            code: "invalid_answer".into(),
            message: format!("The {what} could not be read: {error}"),
            body: Box::default(),
        }
    }

    pub fn is_stale(&self) -> bool {
        self.status == 409 && self.code == "stale_revision"
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

/// Percent-encodes one path segment (selectors hold `:`; ids may hold `.`).
pub fn seg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Sends one request; `if_match` becomes an `If-Match` header. A 2xx answer's text is
/// returned; anything else becomes an [`ApiError`].
async fn send(
    method: Method,
    path: &str,
    body: Option<&Value>,
    if_match: Option<&str>,
) -> Result<String, ApiError> {
    let builder: RequestBuilder = match method {
        Method::Get => Request::get(path),
        Method::Post => Request::post(path),
        Method::Put => Request::put(path),
        Method::Delete => Request::delete(path),
    };
    let builder = match if_match {
        Some(rev) => builder.header("If-Match", &format!("\"{rev}\"")),
        None => builder,
    };
    let request = match body {
        Some(body) => builder
            .header("Content-Type", "application/json")
            .body(body.to_string()),
        None => builder.build(),
    }
    .map_err(|e| ApiError::transport(e.to_string()))?;
    let response = request
        .send()
        .await
        .map_err(|e| ApiError::transport(e.to_string()))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| ApiError::transport(e.to_string()))?;
    if (200..300).contains(&status) {
        return Ok(text);
    }
    // A proxy or a crash may answer without the contract's body: the status says it then.
    let body = parse::<ErrorBody>(&text).unwrap_or_default();
    let message = if body.error.is_empty() {
        format!("The server answered {status}.")
    } else {
        body.error.clone()
    };
    let code = if body.code.is_empty() {
        "error".to_string()
    } else {
        body.code.clone()
    };
    Err(ApiError {
        status,
        code,
        message,
        body: Box::new(body),
    })
}

/// Sends one request; `if_match` becomes an `If-Match` header. A 2xx answer's JSON body is
/// returned (`Null` when empty); anything else becomes an [`ApiError`].
pub async fn call(
    method: Method,
    path: &str,
    body: Option<&Value>,
    if_match: Option<&str>,
) -> Result<Value, ApiError> {
    let text = send(method, path, body, if_match).await?;
    Ok(if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    })
}

/// An answer's text read into its contract struct (through a `Value`: see [`parse`]). A write's
/// answer (`Saved<T>`, `T` flattened beside `ok`) is read as its `T`:
/// unknown members are ignored, and a flattened `T` would be deserialized a second way (through
/// serde's buffered content), which costs bundle size for nothing.
pub fn read<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    parse(text).map_err(|e| {
        let name = std::any::type_name::<T>();
        ApiError::invalid_answer(name.rsplit("::").next().unwrap_or(name), e)
    })
}

/// JSON text read as `T` through a [`Value`]. Every contract struct is then deserialized from one
/// kind of input, a parsed `Value`, not from the text: serde inlines the text parser into each
/// struct's field reader, and the app reads about 80 types (15 KB less wasm, 1.7 KB brotli).
/// The price is one more pass over an answer (a `Value`, then `T`); errors name no line or
/// column.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str::<Value>(text).and_then(serde_json::from_value)
}

/// [`call`], its answer read as `T`.
pub async fn call_as<T: DeserializeOwned>(
    method: Method,
    path: &str,
    body: Option<&Value>,
    if_match: Option<&str>,
) -> Result<T, ApiError> {
    read(&send(method, path, body, if_match).await?)
}

pub async fn get_as<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    call_as(Method::Get, path, None, None).await
}

pub async fn post_as<T: DeserializeOwned>(path: &str, body: &Value) -> Result<T, ApiError> {
    call_as(Method::Post, path, Some(body), None).await
}

pub async fn get(path: &str) -> Result<Value, ApiError> {
    call(Method::Get, path, None, None).await
}
