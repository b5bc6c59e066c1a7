//! One rule applied to one string: the `maxChars` scope, match iteration, and the two
//! replacement paths (JavaScript `String.prototype.replace` substitution, and the expander used
//! when the rule has `trimStrings`).
//!
//! All offsets here are UTF-8 byte offsets into Rust strings; lengths that the spec defines in
//! UTF-16 code units (`maxChars`) are converted at the edge.

use std::ops::Range;

use regress::{Match, Regex};

use super::rule::{search_start, Rule};
use crate::json::utf16_len;

/// The outcome of one rule on one string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEdit {
    /// The whole text after the edit (the untouched head included).
    pub text: String,
    /// Matches found in the scoped text: 0 or 1 for a non-global rule, every match otherwise.
    pub matches: usize,
    /// Whether `text` differs from the input.
    pub changed: bool,
}

/// Applies `rule` to `text`.
///
/// - With `maxChars` N and a text longer than N UTF-16 units, only the last N units are searched
///   and edited; the regex sees that tail as its whole input (so `^` and lookbehind stop at the
///   cut). When the cut falls between the halves of a surrogate pair, the whole astral character
///   stays in the untouched head, so the scope is then N−1 units.
/// - A non-global rule finds at most one match; a global rule finds every match, stepping one
///   character past an empty match.
/// - Without (or with empty) `trimStrings` the replacement follows JavaScript's substitution
///   rules, after `$0` (not followed by a digit) is read as `$&`. With `trimStrings` the custom
///   expander runs instead.
pub fn apply_to_text(rule: &Rule, text: &str) -> TextEdit {
    apply_if_matched(rule, text).unwrap_or_else(|| TextEdit {
        text: text.to_string(),
        matches: 0,
        changed: false,
    })
}

/// [`apply_to_text`], but `None` (and no allocation) when the rule does not match at all.
pub(crate) fn apply_if_matched(rule: &Rule, text: &str) -> Option<TextEdit> {
    let cut = scope_start(text, rule.max_chars);
    let (head, body) = text.split_at(cut);
    let start = search_start(rule, body)?;
    let found = find_matches(&rule.regex, body, start, rule.global);
    if found.is_empty() {
        return None;
    }
    let trims = rule.trim_strings.as_deref().filter(|t| !t.is_empty());
    let mut out = String::with_capacity(text.len() + rule.replace.len());
    out.push_str(head);
    let mut last = 0;
    for m in &found {
        out.push_str(&body[last..m.start()]);
        match trims {
            Some(trims) => expand_trimmed(&rule.replace, body, m, trims, &mut out),
            None => substitute(&rule.native_template, body, m, &mut out),
        }
        last = m.end();
    }
    out.push_str(&body[last..]);
    let changed = out != text;
    Some(TextEdit {
        text: out,
        matches: found.len(),
        changed,
    })
}

/// Byte offset where the `maxChars` scope begins: the first character boundary at or after
/// `len16 − max` UTF-16 units (0 when the text fits).
pub(crate) fn scope_start(text: &str, max_chars: Option<usize>) -> usize {
    let Some(max) = max_chars else {
        return 0;
    };
    let len = utf16_len(text);
    if len <= max {
        return 0;
    }
    crate::json::utf16_to_byte(text, len - max)
}

/// The matches `String.prototype.replace` would visit: the first one only for a non-global rule,
/// otherwise each successive match from where the previous one ended. After an empty match the
/// search resumes one character (code point) further on, so surrogate pairs are never split.
/// regress's own iterator steps exactly so, and reuses one matcher for the whole text. `start`
/// is where the first match can begin at the earliest (see [`Prefilter::lead`]); lookbehinds
/// still see the text before it.
pub(crate) fn find_matches(regex: &Regex, text: &str, start: usize, global: bool) -> Vec<Match> {
    let matches = regex.find_from(text, start);
    if global {
        matches.collect()
    } else {
        matches.take(1).collect()
    }
}

fn slice<'t>(subject: &'t str, range: &Option<Range<usize>>) -> &'t str {
    range.clone().map_or("", |r| &subject[r])
}

/// True when the regex has at least one named group.
fn has_named_groups(m: &Match) -> bool {
    m.named_groups().next().is_some()
}

/// The named group's text: `None` when the regex has no group of that name, `Some("")` when the
/// group did not participate.
fn named<'t>(subject: &'t str, m: &Match, name: &str) -> Option<&'t str> {
    m.named_groups()
        .find(|(n, _)| *n == name)
        .map(|(_, range)| slice(subject, &range))
}

/// ECMAScript `GetSubstitution`: `$$`, `$&`, `` $` ``, `$'`, `$n`/`$nn` (two digits when that
/// group exists, else one digit when that group exists, else literal), and `$<name>` (literal
/// `$<` when the regex has no named groups or no `>` follows; an unknown name gives `""`).
fn substitute(template: &str, subject: &str, m: &Match, out: &mut String) {
    let bytes = template.as_bytes();
    let groups = m.captures.len();
    let mut i = 0;
    while let Some(offset) = template[i..].find('$') {
        let at = i + offset;
        out.push_str(&template[i..at]);
        match bytes.get(at + 1).copied() {
            Some(b'$') => {
                out.push('$');
                i = at + 2;
            }
            Some(b'&') => {
                out.push_str(&subject[m.range()]);
                i = at + 2;
            }
            Some(b'`') => {
                out.push_str(&subject[..m.start()]);
                i = at + 2;
            }
            Some(b'\'') => {
                out.push_str(&subject[m.end()..]);
                i = at + 2;
            }
            Some(first @ b'0'..=b'9') => {
                let one = usize::from(first - b'0');
                let two = bytes
                    .get(at + 2)
                    .filter(|b| b.is_ascii_digit())
                    .map(|b| one * 10 + usize::from(b - b'0'));
                let (index, digits) = match two {
                    Some(n) if n <= groups => (n, 2),
                    _ => (one, 1),
                };
                let end = at + 1 + digits;
                if (1..=groups).contains(&index) {
                    out.push_str(slice(subject, &m.captures[index - 1]));
                } else {
                    out.push_str(&template[at..end]);
                }
                i = end;
            }
            Some(b'<') => {
                let close = template[at + 2..].find('>');
                match close.filter(|_| has_named_groups(m)) {
                    Some(len) => {
                        let name = &template[at + 2..at + 2 + len];
                        out.push_str(named(subject, m, name).unwrap_or(""));
                        i = at + 2 + len + 1;
                    }
                    None => {
                        out.push_str("$<");
                        i = at + 2;
                    }
                }
            }
            _ => {
                out.push('$');
                i = at + 1;
            }
        }
    }
    out.push_str(&template[i..]);
}

/// Removes every occurrence of each non-empty trim string, one trim string after another.
fn trimmed(value: &str, trims: &[String]) -> String {
    let mut result = value.to_string();
    for trim in trims.iter().filter(|t| !t.is_empty()) {
        if result.contains(trim.as_str()) {
            result = result.replace(trim.as_str(), "");
        }
    }
    result
}

/// The `trimStrings` expander. Tokens: `$$` → `$`; `$&` and `$0` (no digit after) → the match;
/// `` $` `` / `$'` → the text before / after the match; `$1`..`$99` (greedy: two digits when
/// present) → the group or `""`; `$<name>` (at least one character, up to the first `>`) → the
/// named group or `""`. The match and the groups have every trim string removed; the before and
/// after texts and `$` are inserted as they are. Anything else is literal.
fn expand_trimmed(template: &str, subject: &str, m: &Match, trims: &[String], out: &mut String) {
    let bytes = template.as_bytes();
    let mut i = 0;
    while let Some(offset) = template[i..].find('$') {
        let at = i + offset;
        out.push_str(&template[i..at]);
        let next = bytes.get(at + 1).copied();
        let after = bytes.get(at + 2).copied();
        match next {
            Some(b'$') => {
                out.push('$');
                i = at + 2;
            }
            Some(b'&') => {
                out.push_str(&trimmed(&subject[m.range()], trims));
                i = at + 2;
            }
            Some(b'0') if !after.is_some_and(|b| b.is_ascii_digit()) => {
                out.push_str(&trimmed(&subject[m.range()], trims));
                i = at + 2;
            }
            Some(b'`') => {
                out.push_str(&subject[..m.start()]);
                i = at + 2;
            }
            Some(b'\'') => {
                out.push_str(&subject[m.end()..]);
                i = at + 2;
            }
            Some(first @ b'1'..=b'9') => {
                let mut index = usize::from(first - b'0');
                let mut end = at + 2;
                if let Some(second) = after.filter(u8::is_ascii_digit) {
                    index = index * 10 + usize::from(second - b'0');
                    end += 1;
                }
                if let Some(range) = m.captures.get(index - 1) {
                    out.push_str(&trimmed(slice(subject, range), trims));
                }
                i = end;
            }
            Some(b'<') if after.is_some_and(|b| b != b'>') => match template[at + 2..].find('>') {
                Some(len) => {
                    let name = &template[at + 2..at + 2 + len];
                    if let Some(value) = named(subject, m, name) {
                        out.push_str(&trimmed(value, trims));
                    }
                    i = at + 2 + len + 1;
                }
                None => {
                    out.push('$');
                    i = at + 1;
                }
            },
            _ => {
                out.push('$');
                i = at + 1;
            }
        }
    }
    out.push_str(&template[i..]);
}
