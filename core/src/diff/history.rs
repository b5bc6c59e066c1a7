//! The run history behind the payload routes: the last turns, their redacted payloads, their
//! diffs and the usage the provider reported for each.

use super::{diff_turns, extract_blocks, total_chars, turn_tokens, Block, Turn, TurnDiff};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

/// How many turns the history keeps.
pub const HISTORY_LIMIT: usize = 20;

/// Token usage as a provider reported it for one response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Uncached input tokens.
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    /// For example `stop`, `toolUse`, `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The total cost in the provider's currency, when Pi knows the model's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// Whether the model has ever reported cache activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheReporting {
    /// `reported`: the model has reported a non-zero cache read or write at least once.
    Reported,
    /// `not-reported`: it never has; a cache hit ratio would be meaningless.
    NotReported,
}

/// A usage report with the derived prompt and cache figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// `input + cacheRead + cacheWrite`.
    pub prompt_tokens: u64,
    pub cache_reporting: CacheReporting,
    /// `cacheRead / promptTokens` once reported (0 when `promptTokens` is 0), otherwise `null`.
    pub cache_hit_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// Where a captured request came from (the input of [`TurnHistory::capture_request`]; the
/// list row carries the same facts as [`TurnSummary`] fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureInfo {
    /// The host's counter of provider requests in this session (pairs usage with its request).
    pub request_seq: Option<u64>,
    /// Pi's turn index within the prompt that sent the request.
    pub pi_turn: Option<u64>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub api: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Usage {
    /// The cache hit as people read it: `75.0%`, or `not reported` while the model has never
    /// reported cache use (a ratio would be meaningless then, and is never shown as 0 %).
    pub fn hit_text(&self) -> String {
        match self.cache_hit_ratio {
            Some(r) => format!("{:.1}%", r * 100.0),
            None => "not reported".to_string(),
        }
    }
}

/// One row of the turn list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSummary {
    pub turn_id: String,
    pub captured_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_id: Option<String>,
    /// The turn estimate, `ceil(chars / 4)`.
    pub approx_tokens: usize,
    pub block_count: usize,
    pub chars: usize,
    /// Against the turn captured just before this one (kept or not).
    pub delta_tokens: i64,
    pub prefix_tokens: usize,
    pub prefix_ratio: f64,
    pub changed_blocks: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    // Where the request came from ([`CaptureInfo`]) and its stored size; absent for turns that
    // are not captures.
    // Spelled out rather than `#[serde(flatten)]`, which would cost the browser bundle a
    // buffering deserializer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pi_turn: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Length in bytes of the compact JSON of the stored (redacted) payload.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: usize,
}

/// The newest turn with its diff against the turn before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatestTurn {
    pub turn: Turn,
    pub diff: TurnDiff,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `ContextDiffView`: turns oldest first; `latest` and `latestDiff` are `null` when empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextDiffView {
    pub turns: Vec<TurnSummary>,
    pub latest: Option<LatestTurn>,
    /// The same diff as `latest.diff`.
    pub latest_diff: Option<TurnDiff>,
}

/// One kept turn: its blocks, its list row and (for real captures) the stored payload.
#[derive(Debug, Clone)]
pub struct Entry {
    pub turn: Turn,
    pub summary: TurnSummary,
    /// The redacted payload exactly as stored; shared, so pinning a turn copies nothing.
    pub payload: Option<Arc<Value>>,
}

/// The captured turns of a session (at most [`HISTORY_LIMIT`]) plus the per-model memory of
/// cache reporting.
#[derive(Debug, Clone, Default)]
pub struct TurnHistory {
    captured: u64,
    entries: VecDeque<Entry>,
    latest_diff: Option<TurnDiff>,
    reported_models: BTreeSet<String>,
}

impl TurnHistory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Captures a provider payload as the next turn (see [`extract_blocks`]).
    pub fn capture(&mut self, captured_at: &str, stack_id: Option<&str>, payload: &Value) -> &Turn {
        self.push(captured_at, stack_id, extract_blocks(payload))
    }

    /// Captures an (already redacted) provider payload as the next turn and keeps the payload
    /// itself with it, as [`Entry::payload`].
    pub fn capture_request(
        &mut self,
        captured_at: &str,
        stack_id: Option<&str>,
        info: CaptureInfo,
        payload: Value,
    ) -> &Entry {
        let bytes = crate::json::to_compact(&payload).len();
        let blocks = extract_blocks(&payload);
        self.push(captured_at, stack_id, blocks);
        let entry = self.entries.back_mut().expect("just pushed");
        let summary = &mut entry.summary;
        summary.request_seq = info.request_seq;
        summary.pi_turn = info.pi_turn;
        summary.provider = info.provider;
        summary.model = info.model;
        summary.api = info.api;
        summary.bytes = bytes;
        entry.payload = Some(Arc::new(payload));
        entry
    }

    /// Records the next turn, `turn-<n>` with `n` counting every capture (1-based), diffed
    /// against the turn before it; the oldest turn beyond [`HISTORY_LIMIT`] is dropped.
    pub fn push(&mut self, captured_at: &str, stack_id: Option<&str>, blocks: Vec<Block>) -> &Turn {
        self.captured += 1;
        let previous = self.entries.back().map(|e| e.turn.blocks.as_slice());
        let diff = diff_turns(previous, &blocks);
        let turn = Turn {
            turn_id: format!("turn-{}", self.captured),
            captured_at: captured_at.to_string(),
            stack_id: stack_id.map(str::to_string),
            blocks,
        };
        let summary = TurnSummary {
            turn_id: turn.turn_id.clone(),
            captured_at: turn.captured_at.clone(),
            stack_id: turn.stack_id.clone(),
            approx_tokens: turn_tokens(&turn.blocks),
            block_count: turn.blocks.len(),
            chars: total_chars(&turn.blocks),
            delta_tokens: diff.delta_tokens,
            prefix_tokens: diff.prefix_tokens,
            prefix_ratio: diff.prefix_ratio,
            changed_blocks: diff.summary.changed_blocks,
            usage: None,
            request_seq: None,
            pi_turn: None,
            provider: None,
            model: None,
            api: None,
            bytes: 0,
        };
        self.latest_diff = Some(diff);
        self.entries.push_back(Entry {
            turn,
            summary,
            payload: None,
        });
        while self.entries.len() > HISTORY_LIMIT {
            self.entries.pop_front();
        }
        &self.entries.back().expect("just pushed").turn
    }

    /// Derives [`Usage`] from a report and remembers whether its model reports cache activity
    /// (keyed by `provider/model`). Does not attach it to a turn.
    pub fn observe_usage(&mut self, report: &UsageReport) -> Usage {
        let model_key = format!(
            "{}/{}",
            report.provider.as_deref().unwrap_or(""),
            report.model.as_deref().unwrap_or("")
        );
        if report.cache_read > 0 || report.cache_write > 0 {
            self.reported_models.insert(model_key.clone());
        }
        let prompt_tokens = report
            .input
            .saturating_add(report.cache_read)
            .saturating_add(report.cache_write);
        let reported = self.reported_models.contains(&model_key);
        let cache_hit_ratio = reported.then(|| {
            if prompt_tokens == 0 {
                0.0
            } else {
                report.cache_read as f64 / prompt_tokens as f64
            }
        });
        Usage {
            provider: report.provider.clone(),
            model: report.model.clone(),
            input: report.input,
            output: report.output,
            cache_read: report.cache_read,
            cache_write: report.cache_write,
            prompt_tokens,
            cache_reporting: if reported {
                CacheReporting::Reported
            } else {
                CacheReporting::NotReported
            },
            cache_hit_ratio,
            stop_reason: report.stop_reason.clone(),
            cost: report.cost,
        }
    }

    /// Derives usage (as [`observe_usage`](Self::observe_usage)) and attaches it to the newest
    /// turn when that turn is still waiting for usage. Returns the usage, or `None` (usage still
    /// observed) when no turn is pending.
    pub fn record_usage(&mut self, report: &UsageReport) -> Option<Usage> {
        let usage = self.observe_usage(report);
        let entry = self.entries.back_mut()?;
        if entry.summary.usage.is_some() {
            return None;
        }
        entry.summary.usage = Some(usage.clone());
        Some(usage)
    }

    /// Derives usage and attaches it to the kept turn whose request carried `request_seq`, when
    /// that turn has no usage yet. Usage for a request that was never captured (dropped by the
    /// host, or a compaction call) is observed but attached to nothing: pairing by sequence
    /// number never shifts a report onto the wrong turn.
    pub fn record_usage_for(&mut self, request_seq: u64, report: &UsageReport) -> Option<Usage> {
        let usage = self.observe_usage(report);
        let entry = self
            .entries
            .iter_mut()
            .rev()
            .find(|e| e.summary.request_seq == Some(request_seq))?;
        if entry.summary.usage.is_some() {
            return None;
        }
        entry.summary.usage = Some(usage.clone());
        Some(usage)
    }

    /// A kept turn by id.
    pub fn entry(&self, turn_id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.turn.turn_id == turn_id)
    }

    /// The kept entries, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// The newest entry.
    pub fn newest(&self) -> Option<&Entry> {
        self.entries.back()
    }

    /// Whether the newest turn is still waiting for usage.
    pub fn usage_pending(&self) -> bool {
        self.entries
            .back()
            .is_some_and(|e| e.summary.usage.is_none())
    }

    /// The kept turns, oldest first.
    pub fn turns(&self) -> impl Iterator<Item = &Turn> {
        self.entries.iter().map(|e| &e.turn)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every turn and pending usage. The per-model cache-reporting memory and the turn
    /// counter survive, so numbering continues and a model stays `reported`.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.latest_diff = None;
    }

    /// The wire view.
    pub fn view(&self) -> ContextDiffView {
        let turns: Vec<TurnSummary> = self.entries.iter().map(|e| e.summary.clone()).collect();
        let latest = match (self.entries.back(), &self.latest_diff) {
            (Some(entry), Some(diff)) => Some(LatestTurn {
                turn: entry.turn.clone(),
                diff: diff.clone(),
                usage: entry.summary.usage.clone(),
            }),
            _ => None,
        };
        let latest_diff = latest.as_ref().map(|l| l.diff.clone());
        ContextDiffView {
            turns,
            latest,
            latest_diff,
        }
    }
}
