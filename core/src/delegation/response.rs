//! D9 `AgentResponse` status matrix and D10 parent projection / retained-report sanitizer.

use serde_json::{Map, Value};

use super::{has_errors, pos_int, ContractDiagnostic as D};

/// Terminal status of a delegated run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResponseStatus {
    Completed,
    Failed,
    Cancelled,
    TimedOut,
    LimitReached,
}

impl ResponseStatus {
    pub const ALL: [ResponseStatus; 5] = [
        ResponseStatus::Completed,
        ResponseStatus::Failed,
        ResponseStatus::Cancelled,
        ResponseStatus::TimedOut,
        ResponseStatus::LimitReached,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseStatus::Completed => "completed",
            ResponseStatus::Failed => "failed",
            ResponseStatus::Cancelled => "cancelled",
            ResponseStatus::TimedOut => "timed-out",
            ResponseStatus::LimitReached => "limit-reached",
        }
    }
    pub fn parse(text: &str) -> Option<ResponseStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
    /// Fields this status forbids.
    pub fn forbidden_fields(self) -> &'static [&'static str] {
        match self {
            ResponseStatus::Completed => &["error", "reason", "reachedLimit", "enforcedTimeoutMs"],
            ResponseStatus::Failed => &["reason", "reachedLimit", "enforcedTimeoutMs"],
            ResponseStatus::Cancelled => &["error", "reachedLimit", "enforcedTimeoutMs"],
            ResponseStatus::TimedOut => &["error", "reachedLimit"],
            ResponseStatus::LimitReached => &["error", "reason", "enforcedTimeoutMs"],
        }
    }
    /// The only `output.partial` value allowed when `output` is present.
    pub fn output_partial(self) -> bool {
        self != ResponseStatus::Completed
    }
}

/// What the plan fixed that a response must agree with.
#[derive(Clone, Debug, Default)]
pub struct ResponseExpectation<'a> {
    pub request_id: &'a str,
    pub run_id: &'a str,
    pub backend_id: &'a str,
    pub execution_fingerprint: &'a str,
    pub profile_fingerprint: &'a str,
    /// The plan's timeout receipt, if any.
    pub timeout_ms: Option<u64>,
    /// Limit names with a plan receipt.
    pub limit_receipts: &'a [&'a str],
    /// The plan's model (`None` = not checked).
    pub model: Option<&'a crate::profile::ModelRef>,
    /// The plan's effective tool ids (`None` = not checked).
    pub effective_tool_ids: Option<&'a [String]>,
    /// The backend advertises trace inspection / artifact retention.
    pub trace_inspection: bool,
    pub artifact_retention: bool,
}

/// Validates a response object against the status matrix and the plan.
pub fn validate_response(value: &Value, expect: &ResponseExpectation) -> Vec<D> {
    let mut diags = Vec::new();
    let mut err = |code: &str, path: &str, msg: String| diags.push(D::error(code, path, msg));
    let Some(map) = value.as_object() else {
        err(
            "response.status",
            "",
            "A response must be an object.".into(),
        );
        return diags;
    };
    let Some(status) = map
        .get("status")
        .and_then(Value::as_str)
        .and_then(ResponseStatus::parse)
    else {
        err(
            "response.status",
            "status",
            "status must be completed, failed, cancelled, timed-out or limit-reached.".into(),
        );
        return diags;
    };
    for (key, code, want) in [
        ("requestId", "response.request-id", expect.request_id),
        ("runId", "response.run-id", expect.run_id),
        ("backendId", "response.backend-id", expect.backend_id),
        (
            "executionFingerprint",
            "response.execution-fingerprint",
            expect.execution_fingerprint,
        ),
        (
            "profileFingerprint",
            "response.profile-fingerprint",
            expect.profile_fingerprint,
        ),
    ] {
        if map.get(key).and_then(Value::as_str) != Some(want) {
            err(code, key, format!("{key} does not match the plan."));
        }
    }
    if map.get("durationMs").and_then(super::non_neg_int).is_none() {
        err(
            "response.duration",
            "durationMs",
            "durationMs must be a non-negative integer.".into(),
        );
    }
    for field in status.forbidden_fields() {
        if map.contains_key(*field) {
            err(
                "response.forbidden-field",
                field,
                format!("A {} response may not carry {field}.", status.as_str()),
            );
        }
    }
    match map.get("output") {
        None => {}
        Some(Value::Object(output)) => match output.get("partial") {
            Some(Value::Bool(p)) if *p == status.output_partial() => {}
            Some(Value::Bool(true)) => err(
                "response.completed-partial",
                "output.partial",
                "A completed response cannot be partial.".into(),
            ),
            Some(_) => err(
                "response.partial",
                "output.partial",
                format!(
                    "output.partial must be {} for a {} response.",
                    status.output_partial(),
                    status.as_str()
                ),
            ),
            None if status == ResponseStatus::Completed => {}
            None => err(
                "response.partial",
                "output.partial",
                "output.partial must be true when a non-completed response carries output.".into(),
            ),
        },
        Some(_) => err(
            "response.output",
            "output",
            "output must be an object.".into(),
        ),
    }
    match status {
        ResponseStatus::Completed => {}
        ResponseStatus::Failed => {
            let ok = map
                .get("error")
                .and_then(Value::as_object)
                .is_some_and(|e| {
                    e.get("code").is_some_and(Value::is_string)
                        && e.get("message").is_some_and(Value::is_string)
                        && e.get("retryable").is_none_or(Value::is_boolean)
                });
            if !ok {
                err(
                    "response.failed-error",
                    "error",
                    "A failed response needs error {code, message, retryable?}.".into(),
                );
            }
        }
        ResponseStatus::Cancelled | ResponseStatus::TimedOut => {
            if map
                .get("reason")
                .and_then(Value::as_str)
                .is_none_or(crate::json_trim_is_empty)
            {
                err(
                    "response.reason",
                    "reason",
                    "A cancelled or timed-out response needs a non-blank reason.".into(),
                );
            }
            if status == ResponseStatus::TimedOut {
                match map.get("enforcedTimeoutMs").and_then(pos_int) {
                    None => err(
                        "response.timeout",
                        "enforcedTimeoutMs",
                        "A timed-out response needs enforcedTimeoutMs.".into(),
                    ),
                    Some(t) if Some(t) != expect.timeout_ms => err(
                        "response.timeout-receipt",
                        "enforcedTimeoutMs",
                        "enforcedTimeoutMs differs from the plan's timeout receipt.".into(),
                    ),
                    Some(_) => {}
                }
            }
        }
        ResponseStatus::LimitReached => match map.get("reachedLimit").and_then(Value::as_str) {
            Some(l) if super::request::LIMIT_NAMES.contains(&l) && l != "timeoutMs" => {
                if !expect.limit_receipts.contains(&l) {
                    err(
                        "response.limit-receipt-missing",
                        "reachedLimit",
                        format!("The plan has no receipt for limit {l}."),
                    );
                }
            }
            _ => err(
                "response.reached-limit",
                "reachedLimit",
                "reachedLimit must name a limit other than timeoutMs.".into(),
            ),
        },
    }
    if let Some(model) = expect.model {
        let m = map.get("model");
        if m.and_then(|m| m.get("provider")).and_then(Value::as_str)
            != Some(model.provider.as_str())
            || m.and_then(|m| m.get("id")).and_then(Value::as_str) != Some(model.id.as_str())
        {
            err(
                "response.model-mismatch",
                "model",
                "The response model differs from the plan.".into(),
            );
        }
    }
    if let Some(ids) = expect.effective_tool_ids {
        let got: Option<Vec<&str>> = map
            .get("effectiveToolIds")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect());
        if got.as_deref()
            != Some(
                ids.iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .as_slice(),
            )
        {
            err(
                "response.tools-mismatch",
                "effectiveToolIds",
                "The response tools differ from the plan.".into(),
            );
        }
    }
    match map.get("artifacts").and_then(Value::as_array) {
        None => err(
            "response.artifact-capability",
            "artifacts",
            "artifacts must be an array.".into(),
        ),
        Some(list) => {
            if !list.is_empty() && !expect.artifact_retention {
                err(
                    "response.artifact-capability",
                    "artifacts",
                    "The backend does not advertise artifact retention.".into(),
                );
            }
            for (i, a) in list.iter().enumerate() {
                if !valid_artifact(a) {
                    err("response.artifact-capability", &format!("artifacts[{i}]"), "An artifact needs {id, workspaceNamespace, path (safe relative), authorization read|write, lifetime run|session|persistent, cleanup backend|host|user}.".into());
                }
            }
        }
    }
    if let Some(trace) = map.get("trace") {
        let ok = expect.trace_inspection
            && trace.get("handle").is_some_and(Value::is_string)
            && trace.get("backendId").and_then(Value::as_str) == Some(expect.backend_id)
            && trace
                .get("authorizationScope")
                .is_some_and(Value::is_string)
            && trace.get("expiresAt").is_none_or(Value::is_string);
        if !ok {
            err(
                "response.trace-capability",
                "trace",
                "The trace is unadvertised or malformed.".into(),
            );
        }
    }
    if let Some(usage) = map.get("usage") {
        diags.extend(validate_usage(usage));
    }
    diags
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`.
fn is_namespace(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

fn valid_artifact(a: &Value) -> bool {
    let s = |k: &str| a.get(k).and_then(Value::as_str);
    s("id").is_some_and(super::is_opaque_id)
        && s("workspaceNamespace").is_some_and(is_namespace)
        && s("path").is_some_and(|p| super::is_safe_relative_path(p, false))
        && matches!(s("authorization"), Some("read" | "write"))
        && matches!(s("lifetime"), Some("run" | "session" | "persistent"))
        && matches!(s("cleanup"), Some("backend" | "host" | "user"))
}

/// Usage checks: token counts non-negative with `total ≥ input + output`; cost
/// `{amount ≥ 0, currency: /^[A-Z]{3}$/}`.
pub fn validate_usage(usage: &Value) -> Vec<D> {
    let mut diags = Vec::new();
    let count = |k: &str| usage.get(k).and_then(super::non_neg_int);
    if let (Some(i), Some(o), Some(t)) = (
        count("inputTokens"),
        count("outputTokens"),
        count("totalTokens"),
    ) {
        if t < i + o {
            diags.push(D::error(
                "usage.token-total",
                "usage.totalTokens",
                "totalTokens must be at least inputTokens + outputTokens.",
            ));
        }
    }
    if let Some(cost) = usage.get("cost") {
        let amount_ok = cost
            .get("amount")
            .and_then(Value::as_f64)
            .is_some_and(|a| a >= 0.0);
        let currency_ok = cost
            .get("currency")
            .and_then(Value::as_str)
            .is_some_and(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()));
        if !amount_ok || !currency_ok {
            diags.push(D::error(
                "usage.cost",
                "usage.cost",
                "cost must be {amount ≥ 0, currency: three capital letters}.",
            ));
        }
    }
    diags
}

/// True when a response passes [`validate_response`].
pub fn is_valid_response(value: &Value, expect: &ResponseExpectation) -> bool {
    !has_errors(&validate_response(value, expect))
}

/// Default projection cap (`resultProjection.maxChars`).
pub const DEFAULT_MAX_CHARS: usize = 12_000;

/// The model-visible tool result: `output.text`, `(no output)`, or `Subagent failed: <error
/// JSON>`, capped at `max_chars` UTF-16 units with an explicit marker.
pub fn project_response(response: &Value, max_chars: usize) -> String {
    let text = if response.get("status").and_then(Value::as_str) == Some("failed") {
        format!(
            "Subagent failed: {}",
            crate::json::to_compact(response.get("error").unwrap_or(&Value::Null))
        )
    } else {
        match response
            .get("output")
            .and_then(|o| o.get("text"))
            .and_then(Value::as_str)
        {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => "(no output)".to_string(),
        }
    };
    cap_chars(&text, max_chars)
}

fn cap_chars(text: &str, max_chars: usize) -> String {
    let total = crate::json::utf16_len(text);
    if total <= max_chars {
        return text.to_string();
    }
    let mut units = 0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        if units + c.len_utf16() > max_chars {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    format!(
        "{}\n[Subagent output truncated: {max_chars} of {total} characters shown]",
        &text[..end]
    )
}

/// Strings at least this long may be base64-like data.
pub const BASE64_MIN: usize = 4_096;
/// Longest retained string (64 KiB).
pub const MAX_RETAINED_STRING: usize = 65_536;

fn base64_like(text: &str) -> bool {
    if text.len() >= BASE64_MIN && text.starts_with("data:") && text.contains(";base64,") {
        return true;
    }
    let stripped: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    stripped.len() >= BASE64_MIN
        && stripped.len() * 100 >= text.len() * 95
        && stripped
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'=' | b'-'))
}

/// Sanitizes one retained string (D10).
pub fn sanitize_string(text: &str) -> String {
    if base64_like(text) {
        return format!(
            "[Base64-like data omitted from retained subagent report: {} encoded bytes]",
            text.len()
        );
    }
    if text.len() <= MAX_RETAINED_STRING {
        return text.to_string();
    }
    let suffix = format!(
        "\n[Text truncated in retained subagent report: {} original bytes]",
        text.len()
    );
    let mut end = MAX_RETAINED_STRING - suffix.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &text[..end])
}

/// Sanitizes a retained message value: every string, and image parts lose `data` (gaining
/// `dataOmitted:true, encodedBytes`).
pub fn sanitize_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(sanitize_string(s)),
        Value::Array(a) => Value::Array(a.iter().map(sanitize_value).collect()),
        Value::Object(m) => {
            let image = m.get("type").and_then(Value::as_str) == Some("image");
            let mut out = Map::new();
            for (k, v) in m {
                if image && k == "data" {
                    let n = v.as_str().map_or(0, str::len);
                    out.insert("dataOmitted".into(), true.into());
                    out.insert("encodedBytes".into(), n.into());
                } else {
                    out.insert(k.clone(), sanitize_value(v));
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Bound of the retained report's rolling tail (512 KiB of compact JSON).
pub const MAX_REPORT_BYTES: usize = 524_288;

/// The retained run report: sanitized messages in a rolling tail of at most
/// [`MAX_REPORT_BYTES`] (compact JSON bytes, summed per message).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetainedReport {
    messages: Vec<(Value, usize)>,
    omitted: usize,
    truncated: bool,
}

fn json_len(value: &Value) -> usize {
    crate::json::to_compact(value).len()
}

/// The summary an oversized message is compacted to: role, `reportDataOmitted:true`,
/// `originalBytes`, the tool identity fields, and an assistant's text.
fn compact_message(message: &Value, original: usize) -> Value {
    let mut out = Map::new();
    if let Some(role) = message.get("role") {
        out.insert("role".into(), role.clone());
    }
    out.insert("reportDataOmitted".into(), true.into());
    out.insert("originalBytes".into(), original.into());
    for key in ["toolName", "toolCallId", "isError"] {
        if let Some(v) = message.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if message.get("role").and_then(Value::as_str) == Some("assistant") {
        let text: Vec<Value> = match message.get("content") {
            Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        out.insert("content".into(), Value::Array(text));
    }
    Value::Object(out)
}

impl RetainedReport {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sanitizes and appends one message, then drops the oldest while over the bound.
    pub fn push(&mut self, message: &Value) {
        let mut sanitized = sanitize_value(message);
        let mut size = json_len(&sanitized);
        if size > MAX_REPORT_BYTES {
            sanitized = compact_message(&sanitized, size);
            size = json_len(&sanitized);
            self.truncated = true;
        }
        self.messages.push((sanitized, size));
        while self.retained_bytes() > MAX_REPORT_BYTES && self.messages.len() > 1 {
            self.messages.remove(0);
            self.omitted += 1;
            self.truncated = true;
        }
    }

    pub fn retained_bytes(&self) -> usize {
        self.messages.iter().map(|(_, n)| n).sum()
    }

    pub fn messages(&self) -> Vec<&Value> {
        self.messages.iter().map(|(m, _)| m).collect()
    }

    /// `{maxBytes:524288, retainedBytes, truncated, omittedMessages}`.
    pub fn retention(&self) -> Value {
        serde_json::json!({
            "maxBytes": MAX_REPORT_BYTES,
            "retainedBytes": self.retained_bytes(),
            "truncated": self.truncated,
            "omittedMessages": self.omitted,
        })
    }
}

/// Largest retained stderr (64 KiB), cut at a character boundary from the end (the tail is kept).
pub const MAX_STDERR_BYTES: usize = 65_536;

/// The retained tail of a child's stderr.
pub fn retain_stderr(stderr: &str) -> &str {
    if stderr.len() <= MAX_STDERR_BYTES {
        return stderr;
    }
    let mut start = stderr.len() - MAX_STDERR_BYTES;
    while !stderr.is_char_boundary(start) {
        start += 1;
    }
    &stderr[start..]
}

/// Tool-details status of a delegated run: `preparing → prepared|awaiting-approval → running →
/// completed|failed|cancelled|timed-out|limit-reached`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunPhase {
    Preparing,
    Prepared,
    AwaitingApproval,
    Running,
    Done(ResponseStatus),
}

impl RunPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            RunPhase::Preparing => "preparing",
            RunPhase::Prepared => "prepared",
            RunPhase::AwaitingApproval => "awaiting-approval",
            RunPhase::Running => "running",
            RunPhase::Done(status) => status.as_str(),
        }
    }
    /// Whether `next` may follow `self`.
    pub fn can_move_to(self, next: RunPhase) -> bool {
        use RunPhase::*;
        matches!(
            (self, next),
            (Preparing, Prepared | AwaitingApproval | Done(_))
                | (Prepared | AwaitingApproval, Running | Done(_))
                | (Running, Done(_))
        )
    }
}

/// Progress events kept per run.
pub const MAX_PROGRESS_EVENTS: usize = 100;

/// The last [`MAX_PROGRESS_EVENTS`] progress events `{phase, message, details?}` (phase:
/// `starting|message|tool-result|finishing`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgressLog {
    events: std::collections::VecDeque<Value>,
}

impl ProgressLog {
    pub fn push(&mut self, phase: &str, message: &str, details: Option<Value>) {
        let mut event = Map::new();
        event.insert("phase".into(), phase.into());
        event.insert("message".into(), message.into());
        if let Some(d) = details {
            event.insert("details".into(), d);
        }
        self.events.push_back(Value::Object(event));
        while self.events.len() > MAX_PROGRESS_EVENTS {
            self.events.pop_front();
        }
    }
    pub fn events(&self) -> Vec<&Value> {
        self.events.iter().collect()
    }
}

/// The fields every response shares, from the plan and the host's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseCommon {
    pub request_id: String,
    pub run_id: String,
    pub backend_id: String,
    pub profile_fingerprint: String,
    pub execution_fingerprint: String,
    pub model: crate::profile::ModelRef,
    pub effective_tool_ids: Vec<String>,
    pub duration_ms: u64,
}

/// A `failed` response for what the backend could not report itself: a thrown provider error
/// (`execution.backend-error`), a malformed result (`execution.invalid-result`) or a child that
/// settled without a result (`execution.internal`). Enforcement receipts are empty: the backend
/// gave none.
pub fn failed_response(common: &ResponseCommon, code: &str, message: &str) -> Value {
    serde_json::json!({
        "schemaVersion": 1,
        "status": "failed",
        "requestId": common.request_id,
        "runId": common.run_id,
        "backendId": common.backend_id,
        "profileFingerprint": common.profile_fingerprint,
        "executionFingerprint": common.execution_fingerprint,
        "model": common.model.to_value(),
        "effectiveToolIds": common.effective_tool_ids,
        "enforcement": {"access": {}, "limits": {}},
        "durationMs": common.duration_ms,
        "artifacts": [],
        "error": {"code": code, "message": message, "retryable": false},
    })
}
