//! Subagent delegation (spec §D) and the pi-subagent result package (spec §E), as pure functions.
//!
//! Nothing here does IO, reads a clock or draws randomness: run ids, timestamps, file contents and
//! the host's compiled prompt are inputs. The pieces, in flow order:
//! - [`config`] — `subagents.json` (authorization, backend, timeout) and the effective settings;
//! - [`request`] — D2 `AgentRequest` decoding with exact key sets and stable codes;
//! - [`snapshot`] — D3 `AgentProfileSnapshot` (path-free) and its receiver-side validation;
//! - [`preflight`] — D4 preflight and access-receipt rules, checks against request and snapshot;
//! - [`negotiate`] — D5 tool negotiation (backend catalog ∩ stack policy ∩ request access);
//! - [`context`] — D6 context budgeting, rendering and message assembly (protected final task);
//! - [`plan`] — D7 plan creation and sealing, conversation and execution fingerprints (§C3);
//! - [`approval`] — D8 authorization decision, approval receipt and the stale-approval check;
//! - [`response`] — D9 `AgentResponse` status matrix and D10 parent projection / report sanitizer;
//! - [`run`] — E1 `subagent_run` arguments (closed schema) and the route pin;
//! - [`verify`] — the check of each provider request a child is about to send, against the plan;
//! - [`result`] — E2 result package (blocks, per-block and aggregate SHA-256), verification and the
//!   E3 failure taxonomy.
//!
//! Delegation diagnostics are `{level, code, message, path?}` with stable dotted codes (§0.2); they
//! are a different type from the resource codecs' [`crate::diag::Diagnostic`].

pub mod approval;
pub mod config;
pub mod context;
#[cfg(feature = "regex")]
pub mod host;
pub mod negotiate;
pub mod plan;
pub mod preflight;
pub mod request;
pub mod response;
pub mod result;
pub mod run;
pub mod snapshot;
pub mod verify;

use serde_json::{Map, Value};

pub use crate::diag::Level;

/// A delegation-contract diagnostic: `{level, code, message, path?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContractDiagnostic {
    pub level: Level,
    pub code: String,
    pub message: String,
    pub path: Option<String>,
}

impl ContractDiagnostic {
    pub fn new(level: Level, code: &str, path: Option<&str>, message: impl Into<String>) -> Self {
        ContractDiagnostic {
            level,
            code: code.to_string(),
            message: message.into(),
            path: path.map(str::to_string),
        }
    }
    pub fn error(code: &str, path: &str, message: impl Into<String>) -> Self {
        Self::new(Level::Error, code, Some(path), message)
    }
    pub fn warning(code: &str, path: &str, message: impl Into<String>) -> Self {
        Self::new(Level::Warning, code, Some(path), message)
    }
    pub fn info(code: &str, path: &str, message: impl Into<String>) -> Self {
        Self::new(Level::Info, code, Some(path), message)
    }
    pub fn is_error(&self) -> bool {
        self.level == Level::Error
    }
    /// The wire object `{level, code, message, path?}`.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("level".into(), self.level.as_str().into());
        map.insert("code".into(), self.code.clone().into());
        map.insert("message".into(), self.message.clone().into());
        if let Some(path) = &self.path {
            map.insert("path".into(), path.clone().into());
        }
        Value::Object(map)
    }
}

/// True when any diagnostic is an error.
pub fn has_errors(diagnostics: &[ContractDiagnostic]) -> bool {
    diagnostics.iter().any(ContractDiagnostic::is_error)
}

/// The codes of `diagnostics`, in order (handy for tests and logs).
pub fn codes(diagnostics: &[ContractDiagnostic]) -> Vec<&str> {
    diagnostics.iter().map(|d| d.code.as_str()).collect()
}

/// Opaque id: `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
pub fn is_opaque_id(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Safe relative path: no `\`, no leading `/`, no NUL; `"."` only when `allow_dot` (working
/// directories); otherwise non-empty `/` segments, none `.` or `..`.
pub fn is_safe_relative_path(path: &str, allow_dot: bool) -> bool {
    if path == "." {
        return allow_dot;
    }
    !path.is_empty()
        && !path.contains('\\')
        && !path.contains('\0')
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// A positive integer that is a safe JavaScript integer (1 ..= 2^53 − 1).
pub(crate) fn pos_int(value: &Value) -> Option<u64> {
    non_neg_int(value).filter(|n| *n >= 1)
}

/// A non-negative safe JavaScript integer.
pub(crate) fn non_neg_int(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return (n <= 9_007_199_254_740_991).then_some(n);
    }
    let f = value.as_f64()?;
    (f.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&f)).then_some(f as u64)
}

/// Unknown keys of `map` (not in `allowed`), in the map's order.
pub(crate) fn unknown_keys<'a>(map: &'a Map<String, Value>, allowed: &[&str]) -> Vec<&'a str> {
    map.keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect()
}
