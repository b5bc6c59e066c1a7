//! Captured provider requests: redaction, the per-session store and the run diff.
//!
//! The live bridge forwards every request Pi sends to the model. The server keeps the
//! *faithful* redacted JSON of each (never a shortened display copy), the last
//! [`HISTORY_LIMIT`](crate::diff::HISTORY_LIMIT) of them per live session plus the one the user
//! armed, pairs each with the usage the provider reported for it, and compares any two.
//!
//! Redaction ([`redact`]): a value whose key looks like a credential becomes `"[redacted]"`, at
//! any depth and inside arrays. A key looks like a credential when, lower-cased, it contains
//! `apikey`, `api-key`, `api_key`, `authorization`, `bearer`, `token`, `secret`, `password`,
//! `cookie` or `credential`, unless its normalised form (camelCase split with `_`, every run of
//! other characters turned into `_`, lower case) is one of the token-count fields of
//! [`TOKEN_COUNT_KEYS`], such as `max_completion_tokens` or `cached_tokens`.

use crate::diff::{
    diff_turns, CaptureInfo, Entry, TurnDiff, TurnHistory, TurnSummary, Usage, UsageReport,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a hidden value becomes.
pub const REDACTED: &str = "[redacted]";

/// Lower-case fragments that mark a key as a credential.
const SECRET_FRAGMENTS: [&str; 10] = [
    "apikey",
    "api-key",
    "api_key",
    "authorization",
    "bearer",
    "token",
    "secret",
    "password",
    "cookie",
    "credential",
];

/// Normalised keys that contain `token` but count tokens: they are kept.
pub const TOKEN_COUNT_KEYS: [&str; 16] = [
    "accepted_prediction_tokens",
    "audio_tokens",
    "cached_tokens",
    "completion_tokens",
    "input_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "max_tokens",
    "output_tokens",
    "prompt_tokens",
    "reasoning_tokens",
    "rejected_prediction_tokens",
    "token_budget",
    "token_count",
    "tokenizer",
    "total_tokens",
];

/// `maxOutputTokens` → `max_output_tokens`, `x-api-key` → `x_api_key`.
pub fn normalize_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    let mut previous: Option<char> = None;
    let mut in_separator = false;
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            let camel_boundary = c.is_ascii_uppercase()
                && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
            if camel_boundary {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            in_separator = false;
        } else if !in_separator {
            out.push('_');
            in_separator = true;
        }
        previous = Some(c);
    }
    out
}

/// Whether a value under `key` is hidden by [`redact`].
pub fn is_secret_key(key: &str) -> bool {
    let lower = key.to_lowercase();
    SECRET_FRAGMENTS.iter().any(|f| lower.contains(f))
        && !TOKEN_COUNT_KEYS.contains(&normalize_key(key).as_str())
}

/// Replaces every credential-like value with [`REDACTED`], in place, at any depth.
pub fn redact_in_place(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if is_secret_key(key) {
                    *child = Value::String(REDACTED.to_string());
                } else {
                    redact_in_place(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_in_place),
        _ => {}
    }
}

/// A redacted copy of `value` (see [`redact_in_place`]).
pub fn redact(value: &Value) -> Value {
    let mut copy = value.clone();
    redact_in_place(&mut copy);
    copy
}

/// The next request is armed: its capture becomes the pinned "latest" one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Armed {
    pub armed_at: String,
    /// Save the capture under `.pi/forge/payloads/` when it arrives.
    pub save: bool,
    /// Who armed it: `web`, `pi` or `cli`.
    pub by: String,
}

/// `GET /api/payloads`: the capture list of the live session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PayloadList {
    pub session_id: Option<String>,
    pub armed: Option<Armed>,
    /// The pinned capture (the last armed one), even after it left the history.
    pub latest: Option<TurnSummary>,
    /// Requests the host could not deliver: its queue was full, or the server refused them (for
    /// example over the body limit).
    pub dropped: u64,
    /// How many turns the history keeps.
    pub limit: usize,
    /// Oldest first.
    pub turns: Vec<TurnSummary>,
}

/// The comparison of two captures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunDiff {
    /// `None` when `to` is the first capture of the session: everything is added.
    pub from: Option<TurnSummary>,
    pub to: TurnSummary,
    /// How many leading blocks of `to` are unchanged (the cached prefix ends before block
    /// `prefixBlocks`); equals the block count when nothing changed.
    pub prefix_blocks: usize,
    /// The key of the first block after the unchanged prefix, if any.
    pub prefix_boundary: Option<String>,
    pub diff: TurnDiff,
}

/// Errors of the payload store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("No captured turn {0} in this session (the history keeps the last 20 turns).")]
    UnknownTurn(String),
    #[error(
        "No captured provider turns yet: Pi is connected, and every request it sends for a prompt is captured here (and compared in the run diff). Send a prompt in Pi."
    )]
    Empty,
}

/// What a capture did, for the host and the event stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured {
    pub summary: TurnSummary,
    /// Set when this capture consumed the armed state.
    pub armed: Option<Armed>,
}

/// The captures of the live session: history, arm state, pinned latest capture, drop count.
#[derive(Debug, Clone, Default)]
pub struct PayloadStore {
    session_id: Option<String>,
    history: TurnHistory,
    armed: Option<Armed>,
    latest: Option<Entry>,
    dropped: u64,
}

impl PayloadStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts over when `session_id` is not the session the captures belong to.
    fn enter(&mut self, session_id: &str) {
        if self.session_id.as_deref() != Some(session_id) {
            *self = PayloadStore {
                session_id: Some(session_id.to_string()),
                // An arm made before the session said hello still applies to its first request.
                armed: self.armed.take(),
                ..PayloadStore::default()
            };
        }
    }

    /// Arms the next capture; drops the previously pinned one.
    pub fn arm(&mut self, armed: Armed) {
        self.latest = None;
        self.armed = Some(armed);
    }

    /// Redacts and records one request. `dropped` is the host's count of requests it dropped so
    /// far in this session.
    pub fn capture(
        &mut self,
        session_id: &str,
        captured_at: &str,
        stack_id: Option<&str>,
        info: CaptureInfo,
        mut payload: Value,
        dropped: u64,
    ) -> Captured {
        self.enter(session_id);
        self.dropped = self.dropped.max(dropped);
        redact_in_place(&mut payload);
        let entry = self
            .history
            .capture_request(captured_at, stack_id, info, payload);
        let summary = entry.summary.clone();
        let armed = self.armed.take();
        // Only a pinned capture is copied (its blocks hold the whole request's text).
        if armed.is_some() {
            self.latest = Some(entry.clone());
        }
        Captured { summary, armed }
    }

    /// Pairs a provider's usage report with the request it answered.
    pub fn record_usage(
        &mut self,
        session_id: &str,
        request_seq: u64,
        report: &UsageReport,
    ) -> Option<Usage> {
        if self.session_id.as_deref() != Some(session_id) {
            return None;
        }
        let usage = self.history.record_usage_for(request_seq, report)?;
        if let Some(latest) = &mut self.latest {
            if latest.summary.request_seq == Some(request_seq) {
                latest.summary.usage = Some(usage.clone());
            }
        }
        Some(usage)
    }

    /// Forgets every capture, the arm state, the pinned capture and pending usage.
    pub fn clear(&mut self) {
        self.history.clear();
        self.armed = None;
        self.latest = None;
    }

    pub fn armed(&self) -> Option<&Armed> {
        self.armed.as_ref()
    }

    pub fn view(&self) -> PayloadList {
        PayloadList {
            session_id: self.session_id.clone(),
            armed: self.armed.clone(),
            latest: self.latest.as_ref().map(|e| e.summary.clone()),
            dropped: self.dropped,
            limit: crate::diff::HISTORY_LIMIT,
            turns: self.history.entries().map(|e| e.summary.clone()).collect(),
        }
    }

    /// A capture by turn id: a kept turn, or the pinned one.
    pub fn get(&self, turn_id: &str) -> Result<&Entry, PayloadError> {
        self.history
            .entry(turn_id)
            .or_else(|| self.latest.as_ref().filter(|e| e.turn.turn_id == turn_id))
            .ok_or_else(|| PayloadError::UnknownTurn(turn_id.to_string()))
    }

    /// Compares two captures. Without `to`, the newest; without `from`, the turn captured just
    /// before `to` (none for the first capture).
    pub fn diff(&self, from: Option<&str>, to: Option<&str>) -> Result<RunDiff, PayloadError> {
        let to = match to {
            Some(id) => self.get(id)?,
            None => self.history.newest().ok_or(PayloadError::Empty)?,
        };
        let from = match from {
            Some(id) => Some(self.get(id)?),
            None => {
                let mut previous = None;
                for entry in self.history.entries() {
                    if entry.turn.turn_id == to.turn.turn_id {
                        break;
                    }
                    previous = Some(entry);
                }
                previous
            }
        };
        Ok(run_diff(from, to))
    }
}

fn run_diff(from: Option<&Entry>, to: &Entry) -> RunDiff {
    let before = from.map(|e| e.turn.blocks.as_slice()).unwrap_or(&[]);
    let after = &to.turn.blocks;
    let prefix_blocks = after
        .iter()
        .zip(before)
        .take_while(|(a, b)| a.hash == b.hash)
        .count();
    RunDiff {
        from: from.map(|e| e.summary.clone()),
        to: to.summary.clone(),
        prefix_blocks,
        prefix_boundary: after.get(prefix_blocks).map(|b| b.key.clone()),
        diff: diff_turns(from.map(|e| e.turn.blocks.as_slice()), after),
    }
}
