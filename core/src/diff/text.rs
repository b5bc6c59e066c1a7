//! Line- and word-level text diff for the editor's "draft diff" view.
//!
//! [`diff_lines`] compares two texts line by line and, inside every change run, word by word;
//! [`split_rows`] lays the result out side by side, [`hunks`] keeps only the changes with some
//! context and [`line_counts`] counts them.
//!
//! Conventions:
//! - Texts are split on `'\n'` only. One trailing `'\n'` ends the last line instead of starting
//!   an empty one, so `"a\n"` and `"a"` have the same lines (`["a"]`); `""` has no lines and
//!   `"\n"` has one empty line. `'\r'` is an ordinary character: `"a\r\n"` is the line `"a\r"`.
//! - The line script is minimal (a longest common subsequence of lines) and deterministic.
//!   Inside a change run (the lines between two `Same` lines) every `Removed` line comes before
//!   every `Added` line.
//! - Word level: inside a change run the i-th `Removed` line is paired with the i-th `Added`
//!   line. Both are cut into tokens (a run of alphanumeric or `_` characters, a run of white
//!   space, or any other single character) and the tokens are diffed the same way; a span is
//!   `changed` when its tokens are not in the common subsequence. Adjacent spans with the same
//!   flag are merged.
//! - `Same` lines and unpaired `Removed`/`Added` lines are one span with `changed == false`:
//!   the tag already colors the whole line. An empty line has no spans.
//!
//! Cost limits keep large inputs fast (the crate also runs in the browser):
//! - lines: lines that occur in only one text are set aside first (they can never be `Same`, so
//!   a totally different pair costs nothing); the rest goes to Myers' O(ND) algorithm with a
//!   work budget; past it, to a dynamic-programming LCS when the two differing middles (after
//!   the common prefix and suffix) have at most 4,000,000 line pairs, so the script stays
//!   minimal; past that, the common prefix and suffix are `Same` and everything between them
//!   is removed and then added (10,000 vs 10,000 lines stay in the tens of milliseconds);
//! - words: the same engine with smaller per-line-pair limits and a budget for the whole call;
//!   past them the tokens between the common prefix and suffix of the pair are all `changed`.

use serde::Serialize;
use std::collections::HashMap;

/// Whether a line is in both texts, only the old one or only the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LineTag {
    Same,
    Removed,
    Added,
}

/// A piece of a line; `changed` marks words that differ from the paired line (word-level highlight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub text: String,
    pub changed: bool,
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffLine {
    pub tag: LineTag,
    /// 1-based line number in old (`None` for `Added`).
    pub old_no: Option<usize>,
    /// 1-based line number in new (`None` for `Removed`).
    pub new_no: Option<usize>,
    /// Concatenated, the spans are the line text (without `'\n'`); empty for an empty line.
    pub spans: Vec<Span>,
}

/// One row of the side-by-side view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SplitRow {
    pub left: Option<DiffLine>,
    pub right: Option<DiffLine>,
}

/// A group of changed lines with their context.
///
/// `old_start`/`new_start` are 1-based like unified diff headers: the number of the hunk's first
/// old (new) line, or, when the hunk has no old (new) line, the number of the line it follows
/// (0 at the start of the text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
    pub lines: Vec<DiffLine>,
}

/// Myers work budget for the line diff: diagonals visited plus snake steps. The trace kept for
/// backtracking holds at most this many `u32`s.
const LINE_MYERS_WORK: usize = 4_000_000;
/// Largest differing-middle product (old lines × new lines) the line diff hands to the
/// dynamic-programming LCS when Myers runs out of budget.
const LINE_DP_CELLS: usize = 4_000_000;
/// Myers work budget for one pair of lines at word level.
const WORD_PAIR_MYERS_WORK: usize = 1_000_000;
/// Largest token product for the dynamic-programming fallback of one pair of lines.
const WORD_PAIR_DP_CELLS: usize = 1_000_000;
/// Word-level work budget for one [`diff_lines`] call, shared by all line pairs.
const WORD_TOTAL_WORK: usize = 16_000_000;

/// Full line diff of two texts (split on '\n'; a trailing '\n' does not create an extra empty line).
pub fn diff_lines(old: &str, new: &str) -> Vec<DiffLine> {
    let old_lines = split_lines(old);
    let new_lines = split_lines(new);
    let (old_ids, new_ids, id_count) = intern(&old_lines, &new_lines);
    let ops = diff_ids(
        &old_ids,
        &new_ids,
        id_count,
        Limits {
            myers_work: LINE_MYERS_WORK,
            dp_cells: LINE_DP_CELLS,
        },
    );

    let mut out = Vec::with_capacity(ops.len());
    let mut word_budget = WORD_TOTAL_WORK;
    let (mut i, mut j, mut at) = (0, 0, 0);
    while at < ops.len() {
        if ops[at] == Op::Equal {
            out.push(DiffLine {
                tag: LineTag::Same,
                old_no: Some(i + 1),
                new_no: Some(j + 1),
                spans: plain_spans(old_lines[i]),
            });
            i += 1;
            j += 1;
            at += 1;
            continue;
        }
        let (mut removed, mut added) = (0, 0);
        while at < ops.len() && ops[at] != Op::Equal {
            match ops[at] {
                Op::Delete => removed += 1,
                _ => added += 1,
            }
            at += 1;
        }
        let mut removed_spans = Vec::with_capacity(removed);
        let mut added_spans = Vec::with_capacity(added);
        for p in 0..removed.max(added) {
            if p < removed && p < added {
                let (left, right) =
                    word_spans(old_lines[i + p], new_lines[j + p], &mut word_budget);
                removed_spans.push(left);
                added_spans.push(right);
            } else if p < removed {
                removed_spans.push(plain_spans(old_lines[i + p]));
            } else {
                added_spans.push(plain_spans(new_lines[j + p]));
            }
        }
        for (p, spans) in removed_spans.into_iter().enumerate() {
            out.push(DiffLine {
                tag: LineTag::Removed,
                old_no: Some(i + p + 1),
                new_no: None,
                spans,
            });
        }
        for (p, spans) in added_spans.into_iter().enumerate() {
            out.push(DiffLine {
                tag: LineTag::Added,
                old_no: None,
                new_no: Some(j + p + 1),
                spans,
            });
        }
        i += removed;
        j += added;
    }
    out
}

/// Side-by-side rows: Same lines appear on both sides; within a change run the i-th removed line pairs with the i-th added line; extra lines get None on the other side.
pub fn split_rows(lines: &[DiffLine]) -> Vec<SplitRow> {
    let mut rows = Vec::with_capacity(lines.len());
    let mut at = 0;
    while at < lines.len() {
        if lines[at].tag == LineTag::Same {
            rows.push(SplitRow {
                left: Some(lines[at].clone()),
                right: Some(lines[at].clone()),
            });
            at += 1;
            continue;
        }
        let start = at;
        while at < lines.len() && lines[at].tag != LineTag::Same {
            at += 1;
        }
        let run = &lines[start..at];
        let removed: Vec<&DiffLine> = run.iter().filter(|l| l.tag == LineTag::Removed).collect();
        let added: Vec<&DiffLine> = run.iter().filter(|l| l.tag == LineTag::Added).collect();
        for p in 0..removed.len().max(added.len()) {
            rows.push(SplitRow {
                left: removed.get(p).map(|l| (*l).clone()),
                right: added.get(p).map(|l| (*l).clone()),
            });
        }
    }
    rows
}

/// "Changes only": groups of changed lines with `context` Same lines around them (merged when they touch/overlap). Empty when texts are equal. context = 0 → only changed lines.
///
/// Two change runs share a hunk when at most `2 * context` `Same` lines separate them.
pub fn hunks(lines: &[DiffLine], context: usize) -> Vec<Hunk> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        if lines[at].tag == LineTag::Same {
            at += 1;
            continue;
        }
        let run_start = at;
        while at < lines.len() && lines[at].tag != LineTag::Same {
            at += 1;
        }
        let start = run_start.saturating_sub(context);
        let end = at.saturating_add(context).min(lines.len());
        match ranges.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => ranges.push((start, end)),
        }
    }

    let mut out = Vec::with_capacity(ranges.len());
    let (mut old_before, mut new_before, mut counted) = (0, 0, 0);
    for (start, end) in ranges {
        for line in &lines[counted..start] {
            old_before += usize::from(line.old_no.is_some());
            new_before += usize::from(line.new_no.is_some());
        }
        let body = &lines[start..end];
        let old_len = body.iter().filter(|l| l.old_no.is_some()).count();
        let new_len = body.iter().filter(|l| l.new_no.is_some()).count();
        out.push(Hunk {
            old_start: if old_len == 0 {
                old_before
            } else {
                old_before + 1
            },
            old_len,
            new_start: if new_len == 0 {
                new_before
            } else {
                new_before + 1
            },
            new_len,
            lines: body.to_vec(),
        });
        old_before += old_len;
        new_before += new_len;
        counted = end;
    }
    out
}

/// Counts of (added, removed) lines.
pub fn line_counts(lines: &[DiffLine]) -> (usize, usize) {
    lines
        .iter()
        .fold((0, 0), |(added, removed), line| match line.tag {
            LineTag::Same => (added, removed),
            LineTag::Removed => (added, removed + 1),
            LineTag::Added => (added + 1, removed),
        })
}

// ---- lines and tokens ------------------------------------------------------------------------

/// The lines of `text`: split on `'\n'`, one trailing `'\n'` ends the last line.
fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

/// Line ids: equal lines get equal ids, in order of first appearance (deterministic).
/// Returns both id lists and the number of distinct ids.
fn intern<'a>(old: &[&'a str], new: &[&'a str]) -> (Vec<u32>, Vec<u32>, usize) {
    let mut ids: HashMap<&'a str, u32> = HashMap::new();
    let mut id_of = |line: &'a str| -> u32 {
        let next = ids.len() as u32;
        *ids.entry(line).or_insert(next)
    };
    let old_ids = old.iter().map(|&l| id_of(l)).collect();
    let new_ids = new.iter().map(|&l| id_of(l)).collect();
    (old_ids, new_ids, ids.len())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Word,
    Space,
    Other,
}

fn token_kind(c: char) -> TokenKind {
    if c.is_alphanumeric() || c == '_' {
        TokenKind::Word
    } else if c.is_whitespace() {
        TokenKind::Space
    } else {
        TokenKind::Other
    }
}

/// Tokens of a line: runs of word characters, runs of white space, single other characters.
fn tokenize(line: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut start = 0;
    let mut current: Option<TokenKind> = None;
    for (at, c) in line.char_indices() {
        let kind = token_kind(c);
        if let Some(prev) = current {
            if prev != kind || kind == TokenKind::Other {
                tokens.push(&line[start..at]);
                start = at;
            }
        }
        current = Some(kind);
    }
    if start < line.len() {
        tokens.push(&line[start..]);
    }
    tokens
}

fn plain_spans(text: &str) -> Vec<Span> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![Span {
            text: text.to_owned(),
            changed: false,
        }]
    }
}

fn push_span(spans: &mut Vec<Span>, text: &str, changed: bool) {
    match spans.last_mut() {
        Some(last) if last.changed == changed => last.text.push_str(text),
        _ => spans.push(Span {
            text: text.to_owned(),
            changed,
        }),
    }
}

/// Word-level spans of a removed line and the added line paired with it.
fn word_spans(old: &str, new: &str, budget: &mut usize) -> (Vec<Span>, Vec<Span>) {
    let old_tokens = tokenize(old);
    let new_tokens = tokenize(new);
    let limits = Limits {
        myers_work: WORD_PAIR_MYERS_WORK.min(*budget),
        dp_cells: WORD_PAIR_DP_CELLS.min(*budget),
    };
    let (ops, spent) = diff_seq(&old_tokens, &new_tokens, limits);
    *budget = budget.saturating_sub(spent);

    let (mut left, mut right) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    for op in ops {
        match op {
            Op::Equal => {
                push_span(&mut left, old_tokens[i], false);
                push_span(&mut right, new_tokens[j], false);
                i += 1;
                j += 1;
            }
            Op::Delete => {
                push_span(&mut left, old_tokens[i], true);
                i += 1;
            }
            Op::Insert => {
                push_span(&mut right, new_tokens[j], true);
                j += 1;
            }
        }
    }
    (left, right)
}

// ---- sequence diff engine ----------------------------------------------------------------------

/// One step of an edit script: keep `a[i]` (== `b[j]`), delete `a[i]` or insert `b[j]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equal,
    Delete,
    Insert,
}

#[derive(Clone, Copy)]
struct Limits {
    /// Myers work budget (diagonals visited plus snake steps).
    myers_work: usize,
    /// Largest `n * m` (of the differing middles) for the dynamic-programming fallback.
    dp_cells: usize,
}

/// Edit script from `a` to `b` and the work it cost. Minimal unless both limits were exceeded,
/// then the common prefix and suffix are kept and the rest is deleted and inserted. In every
/// change run the deletions come first.
fn diff_seq<T: PartialEq>(a: &[T], b: &[T], limits: Limits) -> (Vec<Op>, usize) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a_rest, b_rest) = (&a[prefix..], &b[prefix..]);
    let suffix = a_rest
        .iter()
        .rev()
        .zip(b_rest.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let a_mid = &a_rest[..a_rest.len() - suffix];
    let b_mid = &b_rest[..b_rest.len() - suffix];

    let mut ops = Vec::with_capacity(a.len() + b.len() - prefix - suffix);
    ops.resize(prefix, Op::Equal);
    let mut spent = 0;
    if !a_mid.is_empty() && !b_mid.is_empty() {
        match myers(a_mid, b_mid, limits.myers_work, &mut spent) {
            Some(middle) => ops.extend(middle),
            None => {
                let cells = a_mid.len().saturating_mul(b_mid.len());
                if cells <= limits.dp_cells {
                    spent += cells;
                    lcs_table(a_mid, b_mid, &mut ops);
                } else {
                    replace_all(a_mid.len(), b_mid.len(), &mut ops);
                }
            }
        }
    } else {
        replace_all(a_mid.len(), b_mid.len(), &mut ops);
    }
    ops.resize(ops.len() + suffix, Op::Equal);
    deletions_first(&mut ops);
    (ops, spent)
}

/// [`diff_seq`] over ids below `id_count`, after dropping the elements that do not occur on the
/// other side at all. They can never be kept, so the longest common subsequence is unchanged,
/// and mostly different inputs become small (a totally different pair becomes empty).
fn diff_ids(a: &[u32], b: &[u32], id_count: usize, limits: Limits) -> Vec<Op> {
    let mut in_a = vec![false; id_count];
    let mut in_b = vec![false; id_count];
    a.iter().for_each(|&id| in_a[id as usize] = true);
    b.iter().for_each(|&id| in_b[id as usize] = true);
    let kept_a: Vec<usize> = (0..a.len()).filter(|&i| in_b[a[i] as usize]).collect();
    let kept_b: Vec<usize> = (0..b.len()).filter(|&j| in_a[b[j] as usize]).collect();
    if kept_a.len() == a.len() && kept_b.len() == b.len() {
        return diff_seq(a, b, limits).0;
    }
    let sub_a: Vec<u32> = kept_a.iter().map(|&i| a[i]).collect();
    let sub_b: Vec<u32> = kept_b.iter().map(|&j| b[j]).collect();
    let (sub_ops, _) = diff_seq(&sub_a, &sub_b, limits);

    let mut ops = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j, mut sub_i, mut sub_j) = (0, 0, 0, 0);
    for op in sub_ops {
        match op {
            Op::Equal => {
                let (to_i, to_j) = (kept_a[sub_i], kept_b[sub_j]);
                replace_all(to_i - i, to_j - j, &mut ops);
                ops.push(Op::Equal);
                (i, j) = (to_i + 1, to_j + 1);
                sub_i += 1;
                sub_j += 1;
            }
            Op::Delete => sub_i += 1,
            Op::Insert => sub_j += 1,
        }
    }
    replace_all(a.len() - i, b.len() - j, &mut ops);
    deletions_first(&mut ops);
    ops
}

fn replace_all(deleted: usize, inserted: usize, ops: &mut Vec<Op>) {
    ops.resize(ops.len() + deleted, Op::Delete);
    ops.resize(ops.len() + inserted, Op::Insert);
}

/// Reorders every change run so its deletions precede its insertions (same counts, still valid).
fn deletions_first(ops: &mut [Op]) {
    let mut at = 0;
    while at < ops.len() {
        if ops[at] == Op::Equal {
            at += 1;
            continue;
        }
        let start = at;
        let mut deleted = 0;
        while at < ops.len() && ops[at] != Op::Equal {
            deleted += usize::from(ops[at] == Op::Delete);
            at += 1;
        }
        ops[start..start + deleted].fill(Op::Delete);
        ops[start + deleted..at].fill(Op::Insert);
    }
}

/// Myers' greedy O(ND) shortest edit script, with the furthest-reaching points of every `d`
/// kept for backtracking. `None` once `*work` would exceed `limit`.
///
/// Paths may step past the grid's right or bottom edge (no snakes there); such points never lie
/// on a path to `(n, m)`, since moves only go right or down, so the backtracked path stays inside.
fn myers<T: PartialEq>(a: &[T], b: &[T], limit: usize, work: &mut usize) -> Option<Vec<Op>> {
    let n = a.len();
    let m = b.len();
    // Block `d` starts at d(d+1)/2 and holds the furthest x on diagonals k = x - y =
    // -d, -d + 2, ..., d; diagonal k sits at index (k + d) / 2. In block d - 1, diagonal k + 1
    // then sits at the same index as k in block d, and k - 1 one index before.
    let block = |d: usize| d * (d + 1) / 2;
    // Whether the furthest point on diagonal `idx` of block `d` came from k + 1 (a down move,
    // inserting) rather than from k - 1 (a right move, deleting).
    let came_down = |trace: &[u32], d: usize, idx: usize| {
        idx == 0 || (idx != d && trace[block(d - 1) + idx - 1] < trace[block(d - 1) + idx])
    };
    let mut trace: Vec<u32> = Vec::new();

    let mut found = None;
    'search: for d in 0..=(n + m) {
        *work = work.saturating_add(d + 1);
        if *work > limit {
            return None;
        }
        trace.reserve(d + 1);
        for idx in 0..=d {
            // k = 2 idx - d; with y = x - k, x + d = y + 2 idx.
            let mut x = if d == 0 {
                0
            } else if came_down(&trace, d, idx) {
                trace[block(d - 1) + idx] as usize
            } else {
                trace[block(d - 1) + idx - 1] as usize + 1
            };
            let mut y = x + d - 2 * idx;
            let start = x;
            while x < n && y < m && a[x] == b[y] {
                x += 1;
                y += 1;
            }
            *work = work.saturating_add(x - start);
            trace.push(x as u32);
            // Only an in-grid path can end here first: a furthest point past the edge would
            // project onto a shorter path to (n, m).
            if x == n && y == m {
                found = Some(d);
                break 'search;
            }
        }
    }
    let depth = found?;

    // Walk back from (n, m). The path there only moves right or down, so it never left the
    // grid, although other furthest points may have (no snakes happen out there).
    let mut ops = Vec::with_capacity(n + m);
    let (mut x, mut y) = (n, m);
    for d in (1..=depth).rev() {
        // k = x - y = 2 idx - d.
        let idx = (x + d - y) / 2;
        let (prev_x, prev_y, snake_start, step) = if came_down(&trace, d, idx) {
            let px = trace[block(d - 1) + idx] as usize;
            (px, y - (x - px) - 1, px, Op::Insert)
        } else {
            let px = trace[block(d - 1) + idx - 1] as usize;
            (px, y + 1 - (x - px), px + 1, Op::Delete)
        };
        ops.resize(ops.len() + (x - snake_start), Op::Equal);
        ops.push(step);
        x = prev_x;
        y = prev_y;
    }
    debug_assert_eq!(x, y);
    ops.resize(ops.len() + x, Op::Equal);
    ops.reverse();
    Some(ops)
}

/// Minimal edit script by the classic LCS table, one bit per cell: for a mismatch, whether
/// deleting `a[i]` keeps the longest common subsequence (preferred over inserting `b[j]`).
fn lcs_table<T: PartialEq>(a: &[T], b: &[T], ops: &mut Vec<Op>) {
    let (n, m) = (a.len(), b.len());
    let mut prefer_delete = vec![0u64; (n * m).div_ceil(64)];
    // `next[j]` = LCS(a[i + 1..], b[j..]), `row[j]` = LCS(a[i..], b[j..]).
    let mut next = vec![0u32; m + 1];
    let mut row = vec![0u32; m + 1];
    for i in (0..n).rev() {
        row[m] = 0;
        for j in (0..m).rev() {
            row[j] = if a[i] == b[j] {
                next[j + 1] + 1
            } else if next[j] >= row[j + 1] {
                let cell = i * m + j;
                prefer_delete[cell / 64] |= 1 << (cell % 64);
                next[j]
            } else {
                row[j + 1]
            };
        }
        std::mem::swap(&mut row, &mut next);
    }
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        let cell = i * m + j;
        if a[i] == b[j] {
            ops.push(Op::Equal);
            i += 1;
            j += 1;
        } else if prefer_delete[cell / 64] & (1 << (cell % 64)) != 0 {
            ops.push(Op::Delete);
            i += 1;
        } else {
            ops.push(Op::Insert);
            j += 1;
        }
    }
    replace_all(n - i, m - j, ops);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lcs_len(a: &[u8], b: &[u8]) -> usize {
        let mut ops = Vec::new();
        lcs_table(a, b, &mut ops);
        ops.iter().filter(|op| **op == Op::Equal).count()
    }

    /// The script turns `a` into `b`.
    fn check_script<T: PartialEq + std::fmt::Debug>(a: &[T], b: &[T], ops: &[Op]) {
        let (mut i, mut j) = (0, 0);
        for op in ops {
            match op {
                Op::Equal => {
                    assert_eq!(a[i], b[j]);
                    i += 1;
                    j += 1;
                }
                Op::Delete => i += 1,
                Op::Insert => j += 1,
            }
        }
        assert_eq!((i, j), (a.len(), b.len()));
    }

    fn equal_count(ops: &[Op]) -> usize {
        ops.iter().filter(|op| **op == Op::Equal).count()
    }

    #[test]
    fn lcs_table_small() {
        assert_eq!(lcs_len(b"abcbdab", b"bdcaba"), 4);
        assert_eq!(lcs_len(b"", b"abc"), 0);
    }

    #[test]
    fn fallback_keeps_prefix_and_suffix() {
        let limits = Limits {
            myers_work: 0,
            dp_cells: 0,
        };
        let (ops, _) = diff_seq(b"xabcy".as_slice(), b"xdey".as_slice(), limits);
        use Op::*;
        assert_eq!(ops, [Equal, Delete, Delete, Delete, Insert, Insert, Equal]);
    }

    #[test]
    fn tokens() {
        assert_eq!(
            tokenize("foo_1  bar(x)!="),
            ["foo_1", "  ", "bar", "(", "x", ")", "!", "="]
        );
        assert_eq!(
            tokenize("日本語 テキスト😀😀"),
            ["日本語", " ", "テキスト", "😀", "😀"]
        );
        assert!(tokenize("").is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn myers_is_minimal(a in proptest::collection::vec(0u8..4, 0..24),
                            b in proptest::collection::vec(0u8..4, 0..24)) {
            let mut work = 0;
            let ops = myers(&a, &b, usize::MAX, &mut work).expect("unlimited");
            check_script(&a, &b, &ops);
            prop_assert_eq!(equal_count(&ops), lcs_len(&a, &b));

            let mut table = Vec::new();
            lcs_table(&a, &b, &mut table);
            check_script(&a, &b, &table);

            for limits in [
                Limits { myers_work: usize::MAX, dp_cells: 0 },
                Limits { myers_work: 0, dp_cells: usize::MAX },
            ] {
                let (ops, _) = diff_seq(&a, &b, limits);
                check_script(&a, &b, &ops);
                prop_assert_eq!(equal_count(&ops), lcs_len(&a, &b));
            }
            let (ops, _) = diff_seq(&a, &b, Limits { myers_work: 0, dp_cells: 0 });
            check_script(&a, &b, &ops);
        }

        #[test]
        fn dropping_one_sided_ids_keeps_the_diff_minimal(
            a in proptest::collection::vec(0u32..10, 0..24),
            b in proptest::collection::vec(0u32..10, 0..24),
        ) {
            let bytes = |v: &[u32]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
            let best = lcs_len(&bytes(&a), &bytes(&b));
            let unlimited = Limits { myers_work: usize::MAX, dp_cells: usize::MAX };
            let ops = diff_ids(&a, &b, 10, unlimited);
            check_script(&a, &b, &ops);
            prop_assert_eq!(equal_count(&ops), best);
            prop_assert!(ops.windows(2).all(|w| !(w[0] == Op::Insert && w[1] == Op::Delete)));
            let ops = diff_ids(&a, &b, 10, Limits { myers_work: 0, dp_cells: 0 });
            check_script(&a, &b, &ops);
        }
    }
}
