//! The one error type of the API: `{error, code, field?, details?}` with a status.
//!
//! `error` is a sentence for people, `code` a stable machine word the editor switches on, `field`
//! the JSON field at fault and `details` anything structured (diagnostics, the conflicting
//! resource). `stale_revision` adds `currentRevision` and `current`. The body is forge-core's
//! [`ErrorBody`], the struct the web app reads it into.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use forge_core::api::ErrorBody;
use forge_core::workspace::service::ServiceError;
use serde_json::Value;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// `field`, `details` and extra members: rare, so boxed to keep results small.
    more: Option<Box<More>>,
}

#[derive(Debug, Default)]
struct More {
    field: Option<String>,
    details: Option<Value>,
    /// `stale_revision`: the file's revision now, and its content (`null` when not JSON).
    current_revision: Option<String>,
    current: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            more: None,
        }
    }

    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_with(Box::default)
    }

    pub fn with_field(mut self, field: impl Into<String>) -> ApiError {
        self.more().field = Some(field.into());
        self
    }

    pub fn with_details(mut self, details: Value) -> ApiError {
        self.more().details = Some(details);
        self
    }

    /// The members a stale save adds: the current revision and content.
    pub fn with_current(mut self, revision: String, current: Value) -> ApiError {
        let more = self.more();
        more.current_revision = Some(revision);
        more.current = Some(current);
        self
    }

    /// 400 `invalid_input`: the body has the wrong shape (the service's code for bad bodies).
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 403 `untrusted_project`; `action` reads like `save the editor config`.
    pub fn untrusted(action: &str) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "untrusted_project",
            format!("Project is not trusted; refusing to {action}."),
        )
    }

    /// The body as the contract's [`ErrorBody`].
    pub fn error_body(&self) -> ErrorBody {
        let more = self.more.as_deref();
        ErrorBody {
            error: self.message.clone(),
            code: self.code.to_string(),
            field: more.and_then(|m| m.field.clone()),
            details: more.and_then(|m| m.details.clone()),
            current_revision: more.and_then(|m| m.current_revision.clone()),
            current: more.and_then(|m| m.current.clone()),
        }
    }

    pub fn body(&self) -> Value {
        // Plain data: serializing it cannot fail.
        serde_json::to_value(self.error_body()).unwrap_or(Value::Null)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> ApiError {
        let status =
            StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut api = ApiError::new(status, error.code(), error.to_string());
        if let Some(field) = error.field() {
            api = api.with_field(field);
        }
        if !error.diagnostics().is_empty() {
            api = api.with_details(serde_json::json!({ "diagnostics": error.diagnostics() }));
        }
        if let ServiceError::Stale {
            current_revision,
            current,
        } = error
        {
            api = api.with_current(current_revision, current.unwrap_or(Value::Null));
        }
        api
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(error: tokio::task::JoinError) -> ApiError {
        ApiError::internal(format!("A background task failed: {error}"))
    }
}

/// A command result `{ok:false, error}` as a 502 with Pi's words.
pub fn command_ok(result: &Value) -> ApiResult<()> {
    if result.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(());
    }
    let error = result
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("Pi did not say why.");
    Err(ApiError::new(
        StatusCode::BAD_GATEWAY,
        "host_refused",
        format!("The live Pi session could not carry out the change: {error}"),
    )
    .with_details(result.clone()))
}
