//! Context diff: hashes, blocks, alignment, prefix reuse and token deltas (§6 "Context diff").
//!
//! Everything here is pure: a provider payload becomes a list of [`Block`]s
//! ([`extract_blocks`]), two block lists become a [`TurnDiff`] ([`diff_turns`]), and a
//! [`TurnHistory`] keeps the last [`HISTORY_LIMIT`] captured turns with their usage. The editor's
//! draft diff runs the same engine over preview [`Section`]s ([`diff_sections`]).
//!
//! Lengths are JavaScript string lengths (UTF-16 code units) everywhere: `chars`, token
//! estimates, the common-prefix rule and the hash all count code units, never bytes or scalars.
//!
//! Token estimates are `chars / 4` heuristics, not tokenizer output:
//! - a block costs `max(1, ceil(chars / 4))` ([`approx_tokens`]);
//! - a turn costs `ceil(total chars / 4)`, which is 0 for a turn without text ([`turn_tokens`]).

mod extract;
mod history;
pub mod text;

pub use extract::{extract_blocks, payload_content_text};
pub use history::{
    CacheReporting, CaptureInfo, ContextDiffView, Entry, LatestTurn, TurnHistory, TurnSummary,
    Usage, UsageReport, HISTORY_LIMIT,
};

use crate::json::{to_compact, utf16_len};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// FNV-1a offset basis (32 bit).
const FNV_OFFSET: u32 = 0x811c_9dc5;
/// FNV-1a prime (32 bit).
const FNV_PRIME: u32 = 0x0100_0193;

/// `hashText`: 32-bit FNV-1a over the UTF-16 code units of `text`, as 8 lowercase hex digits.
///
/// Each code unit is folded in whole (JavaScript `charCodeAt`), so a character outside the BMP
/// contributes its two surrogates.
pub fn hash_text(text: &str) -> String {
    let mut hash = FNV_OFFSET;
    for unit in text.encode_utf16() {
        hash ^= u32::from(unit);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    format!("{hash:08x}")
}

/// The per-block estimate: `max(1, ceil(chars / 4))`.
pub fn approx_tokens(chars: usize) -> usize {
    chars.div_ceil(4).max(1)
}

/// The turn estimate: `ceil(total chars / 4)`, or 0 when the blocks hold no text.
pub fn turn_tokens(blocks: &[Block]) -> usize {
    total_chars(blocks).div_ceil(4)
}

/// The sum of the blocks' `chars`.
pub fn total_chars(blocks: &[Block]) -> usize {
    blocks.iter().map(|b| b.chars).sum()
}

/// One comparable piece of a request: the system prompt, one message, or one other request field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Block {
    /// Alignment key (may be empty; empty or duplicate keys force positional alignment).
    pub key: String,
    pub role: String,
    /// Display text.
    pub text: String,
    /// `text` length in UTF-16 code units.
    pub chars: usize,
    /// `max(1, ceil(chars / 4))`.
    pub approx_tokens: usize,
    /// [`hash_text`] of the JSON text of `{role, text[, serialized]}`.
    pub hash: String,
}

/// Builds a block. The hash covers `JSON.stringify({role, text, serialized})`, with
/// `serialized` left out when `None`, so two blocks with the same display text but different
/// underlying values (tool arguments, cache markers) still differ.
pub fn block(key: &str, role: &str, text: &str, serialized: Option<&Value>) -> Block {
    let mut hashed = Map::new();
    hashed.insert("role".to_string(), Value::String(role.to_string()));
    hashed.insert("text".to_string(), Value::String(text.to_string()));
    if let Some(value) = serialized {
        hashed.insert("serialized".to_string(), value.clone());
    }
    let chars = utf16_len(text);
    Block {
        key: key.to_string(),
        role: role.to_string(),
        text: text.to_string(),
        chars,
        approx_tokens: approx_tokens(chars),
        hash: hash_text(&to_compact(&Value::Object(hashed))),
    }
}

/// One captured provider request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// `turn-<n>`, counting every capture since the history was created.
    pub turn_id: String,
    pub captured_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_id: Option<String>,
    pub blocks: Vec<Block>,
}

/// How a block pair compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockStatus {
    /// Both sides present with equal hashes.
    Same,
    /// Only in the current list.
    Added,
    /// Only in the previous list.
    Removed,
    /// Both sides present with different hashes.
    Modified,
}

impl BlockStatus {
    /// The wire name: `same`, `added`, `removed`, `modified`.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockStatus::Same => "same",
            BlockStatus::Added => "added",
            BlockStatus::Removed => "removed",
            BlockStatus::Modified => "modified",
        }
    }
}

/// One aligned pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDiff {
    pub status: BlockStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Block>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Block>,
    /// This block's share of the turn's token delta (0 for `same` blocks); the shares of all
    /// blocks add up to [`TurnDiff::delta_tokens`].
    pub token_delta: i64,
}

/// Counts and token totals of a diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffSummary {
    pub same: usize,
    pub added: usize,
    pub removed: usize,
    pub modified: usize,
    /// `added + removed + modified`.
    pub changed_blocks: usize,
    /// Sum of the positive `tokenDelta`s.
    pub added_tokens: i64,
    /// Sum of the magnitudes of the negative `tokenDelta`s (a non-negative number).
    pub removed_tokens: i64,
    /// The turn delta (`deltaTokens`); equals `addedTokens - removedTokens`.
    pub net_tokens: i64,
}

/// The comparison of two turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnDiff {
    pub blocks: Vec<BlockDiff>,
    /// Estimated reusable prefix of the current turn, in tokens.
    pub prefix_tokens: usize,
    /// `prefixTokens / current turn tokens`, or 0 when the current turn has no tokens.
    pub prefix_ratio: f64,
    /// Current turn tokens minus previous turn tokens.
    pub delta_tokens: i64,
    pub summary: DiffSummary,
}

/// Compares `current` with `previous` (`None`: the first turn, everything is added).
///
/// - Alignment: by key when every key on both sides is non-empty and unique and the sides share
///   at least one key; otherwise by position.
/// - Prefix: see [`prefix_tokens`].
/// - Token deltas: each changed block with a non-zero char delta gets `trunc(delta / 4)`; the
///   rest of the turn delta is spread over the blocks whose char delta has its sign, in equal
///   whole shares and then ±1 each in order.
pub fn diff_turns(previous: Option<&[Block]>, current: &[Block]) -> TurnDiff {
    let before = previous.unwrap_or(&[]);
    let mut blocks = align(before, current);

    let current_tokens = turn_tokens(current);
    let delta_tokens = to_i64(current_tokens) - to_i64(turn_tokens(before));
    distribute_tokens(&mut blocks, delta_tokens);

    let prefix = prefix_tokens(before, current);
    let prefix_ratio = if current_tokens == 0 {
        0.0
    } else {
        prefix as f64 / current_tokens as f64
    };

    let mut summary = DiffSummary {
        net_tokens: delta_tokens,
        ..DiffSummary::default()
    };
    for entry in &blocks {
        match entry.status {
            BlockStatus::Same => summary.same += 1,
            BlockStatus::Added => summary.added += 1,
            BlockStatus::Removed => summary.removed += 1,
            BlockStatus::Modified => summary.modified += 1,
        }
        if entry.token_delta > 0 {
            summary.added_tokens += entry.token_delta;
        } else {
            summary.removed_tokens -= entry.token_delta;
        }
    }
    summary.changed_blocks = summary.added + summary.removed + summary.modified;

    TurnDiff {
        blocks,
        prefix_tokens: prefix,
        prefix_ratio,
        delta_tokens,
        summary,
    }
}

/// The estimated reusable prefix of `current` after `previous`, in tokens.
///
/// Walks the current blocks by position, adding the chars of each block whose hash equals the
/// previous block at the same position. At the first mismatch (including a current block with
/// no counterpart) the walk stops; if both blocks have the same role but different text, the
/// length of their common prefix (UTF-16 code units) is added first.
///
/// The result is the whole current turn estimate when nothing mismatched or the prefix covers
/// every char, and `min(current, floor(prefixChars / 4))` otherwise.
pub fn prefix_tokens(previous: &[Block], current: &[Block]) -> usize {
    let current_tokens = turn_tokens(current);
    let current_chars = total_chars(current);
    let mut prefix_chars = 0usize;
    let mut mismatched = false;
    for (index, after) in current.iter().enumerate() {
        match previous.get(index) {
            Some(before) if before.hash == after.hash => prefix_chars += after.chars,
            Some(before) => {
                if before.role == after.role && before.text != after.text {
                    prefix_chars += common_prefix_len(&before.text, &after.text);
                }
                mismatched = true;
                break;
            }
            None => {
                mismatched = true;
                break;
            }
        }
    }
    if !mismatched || prefix_chars >= current_chars {
        current_tokens
    } else {
        current_tokens.min(prefix_chars / 4)
    }
}

/// Length of the longest common prefix, in UTF-16 code units.
fn common_prefix_len(a: &str, b: &str) -> usize {
    a.encode_utf16()
        .zip(b.encode_utf16())
        .take_while(|(x, y)| x == y)
        .count()
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Pairs the two lists (see [`diff_turns`]) and classifies each pair; token deltas are zero.
fn align(before: &[Block], after: &[Block]) -> Vec<BlockDiff> {
    let mut out = Vec::with_capacity(before.len().max(after.len()));
    let Some(index) = key_index(before, after) else {
        pair_by_position(&mut out, before, &after.iter().collect::<Vec<_>>());
        return out;
    };
    let mut cursor = 0usize;
    let mut pending: Vec<&Block> = Vec::new();
    for block in after {
        match index.get(block.key.as_str()) {
            Some(&at) if at >= cursor => {
                pair_by_position(&mut out, &before[cursor..at], &pending);
                pending.clear();
                out.push(pair(Some(&before[at]), Some(block)));
                cursor = at + 1;
            }
            _ => pending.push(block),
        }
    }
    pair_by_position(&mut out, &before[cursor..], &pending);
    out
}

/// Key → position in `before`, when keyed alignment applies: every key on both sides non-empty
/// and unique within its side, and at least one key shared.
fn key_index<'a>(before: &'a [Block], after: &[Block]) -> Option<HashMap<&'a str, usize>> {
    let mut index = HashMap::with_capacity(before.len());
    for (position, block) in before.iter().enumerate() {
        if block.key.is_empty() || index.insert(block.key.as_str(), position).is_some() {
            return None;
        }
    }
    let mut seen = HashSet::with_capacity(after.len());
    let mut shared = false;
    for block in after {
        if block.key.is_empty() || !seen.insert(block.key.as_str()) {
            return None;
        }
        shared |= index.contains_key(block.key.as_str());
    }
    shared.then_some(index)
}

fn pair_by_position(out: &mut Vec<BlockDiff>, before: &[Block], after: &[&Block]) {
    for i in 0..before.len().max(after.len()) {
        out.push(pair(before.get(i), after.get(i).copied()));
    }
}

fn pair(before: Option<&Block>, after: Option<&Block>) -> BlockDiff {
    let status = match (before, after) {
        (Some(b), Some(a)) if b.hash == a.hash => BlockStatus::Same,
        (Some(_), Some(_)) => BlockStatus::Modified,
        (Some(_), None) => BlockStatus::Removed,
        _ => BlockStatus::Added,
    };
    BlockDiff {
        status,
        before: before.cloned(),
        after: after.cloned(),
        token_delta: 0,
    }
}

fn char_delta(entry: &BlockDiff) -> i64 {
    let chars = |b: &Option<Block>| b.as_ref().map_or(0, |b| to_i64(b.chars));
    chars(&entry.after) - chars(&entry.before)
}

/// Gives each changed block `trunc(charDelta / 4)` and spreads the remainder of `delta_tokens`
/// over the blocks whose char delta has the remainder's sign.
fn distribute_tokens(blocks: &mut [BlockDiff], delta_tokens: i64) {
    let mut assigned = 0i64;
    let mut deltas = Vec::with_capacity(blocks.len());
    for entry in blocks.iter_mut() {
        let delta = if entry.status == BlockStatus::Same {
            0
        } else {
            char_delta(entry)
        };
        // Integer division truncates toward zero, like `Math.trunc`.
        entry.token_delta = delta / 4;
        assigned += entry.token_delta;
        deltas.push(delta);
    }
    let remainder = delta_tokens - assigned;
    if remainder == 0 {
        return;
    }
    let sign = remainder.signum();
    let targets: Vec<usize> = (0..blocks.len())
        .filter(|&i| deltas[i].signum() == sign)
        .collect();
    if targets.is_empty() {
        return;
    }
    let count = to_i64(targets.len());
    let share = remainder / count;
    let mut leftover = remainder - share * count;
    for &i in &targets {
        blocks[i].token_delta += share;
        if leftover != 0 {
            blocks[i].token_delta += sign;
            leftover -= sign;
        }
    }
}

/// A preview section (web-editor `Section`), as the preview produces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Section {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_key: Option<String>,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub content: String,
    pub chars: usize,
    pub approx_tokens: usize,
}

impl Section {
    /// Builds a section, computing `chars` (UTF-16 units) and `approxTokens` from `content`.
    pub fn new(
        id: &str,
        diff_key: Option<&str>,
        title: &str,
        role: Option<&str>,
        content: &str,
    ) -> Self {
        let chars = utf16_len(content);
        Section {
            id: id.to_string(),
            diff_key: diff_key.map(str::to_string),
            title: title.to_string(),
            role: role.map(str::to_string),
            content: content.to_string(),
            chars,
            approx_tokens: approx_tokens(chars),
        }
    }

    /// The section as a diff block: key `diffKey ?? id`, role (`""` when absent), content.
    pub fn to_block(&self) -> Block {
        let key = self.diff_key.as_deref().unwrap_or(&self.id);
        block(key, self.role.as_deref().unwrap_or(""), &self.content, None)
    }
}

/// The editor's draft diff: [`diff_turns`] over preview sections keyed by `diffKey ?? id`.
pub fn diff_sections(previous: &[Section], current: &[Section]) -> TurnDiff {
    let before: Vec<Block> = previous.iter().map(Section::to_block).collect();
    let after: Vec<Block> = current.iter().map(Section::to_block).collect();
    diff_turns(Some(&before), &after)
}
