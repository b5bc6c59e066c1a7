//! The JSON API client: every request the app makes goes through [`call`].
//!
//! The session cookie travels with every same-origin request, and the browser adds the
//! `Origin` header the server checks on writes, so nothing here handles credentials.

use gloo_net::http::{Request, RequestBuilder};
use serde_json::Value;

/// A failed request: the server's `{error, code, ...}` body, or a transport failure.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status; 0 when the request never got an answer.
    pub status: u16,
    pub code: String,
    pub message: String,
    /// The whole error body (`currentRevision`, `current`, `details`, ...).
    pub body: Value,
}

impl ApiError {
    fn transport(message: String) -> ApiError {
        ApiError {
            status: 0,
            code: "network".into(),
            message: format!("The pi-forge server did not answer: {message}"),
            body: Value::Null,
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

/// Sends one request; `if_match` becomes an `If-Match` header. A 2xx answer's JSON body is
/// returned (`Null` when empty); anything else becomes an [`ApiError`].
pub async fn call(
    method: Method,
    path: &str,
    body: Option<&Value>,
    if_match: Option<&str>,
) -> Result<Value, ApiError> {
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
    let json: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    if (200..300).contains(&status) {
        return Ok(json);
    }
    let message = json
        .get("error")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("The server answered {status}."));
    let code = json
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or("error")
        .to_string();
    Err(ApiError {
        status,
        code,
        message,
        body: json,
    })
}

pub async fn get(path: &str) -> Result<Value, ApiError> {
    call(Method::Get, path, None, None).await
}

pub async fn post(path: &str, body: &Value) -> Result<Value, ApiError> {
    call(Method::Post, path, Some(body), None).await
}

/// Small accessors over API JSON (responses are read leniently: a missing member is empty).
pub fn s(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

pub fn opt_s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

pub fn n(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

pub fn b(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}
