//! Finding Presets by what they contain: the stack's name and description, every item's id,
//! name, text and slot, every regex rule's id, pattern and replacement, and the parameter names.
//!
//! Matching is case-insensitive (Unicode lower case) on the raw file value, so a file with
//! problems is still found. Each match names its place and shows an excerpt around the first
//! occurrence, cut at character boundaries.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most places reported per Preset (the rest is counted in [`StackSearchHit::more`]).
pub const MAX_MATCHES_PER_STACK: usize = 3;
/// Characters of context on each side of a match in an excerpt.
pub const EXCERPT_CONTEXT: usize = 32;

/// One place of a Preset where the query occurs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentMatch {
    /// Where: `name`, `description`, `item intro`, `item intro (name)`, `slot history`,
    /// `regex rule no-ooc (pattern)`, `parameter audience`, ….
    pub place: String,
    /// The text around the match, `…` where it was cut.
    pub excerpt: String,
}

/// The places one Preset matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackSearchHit {
    pub selector: String,
    pub matches: Vec<ContentMatch>,
    /// Further matching places not listed.
    pub more: usize,
}

/// The excerpt of `text` around the first case-insensitive occurrence of `needle` (lower case),
/// or `None` when it does not occur.
fn excerpt(text: &str, needle: &str) -> Option<String> {
    let lower: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
    let needle: Vec<char> = needle.chars().collect();
    if needle.is_empty() || lower.len() < needle.len() {
        return None;
    }
    let at = lower
        .windows(needle.len())
        .position(|w| w == needle.as_slice())?;
    // Lower-casing can change the length (`İ`); map back by character count when it did not.
    let chars: Vec<char> = text.chars().collect();
    let (chars, at) = if chars.len() == lower.len() {
        (chars, at)
    } else {
        (lower, at)
    };
    let start = at.saturating_sub(EXCERPT_CONTEXT);
    let end = (at + needle.len() + EXCERPT_CONTEXT).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(
        chars[start..end]
            .iter()
            .map(|c| if c.is_whitespace() { ' ' } else { *c }),
    );
    if end < chars.len() {
        out.push('…');
    }
    Some(out)
}

/// Where `query` occurs in the raw stack value `stack`, in file order.
pub fn search_stack(stack: &Value, query: &str) -> Vec<ContentMatch> {
    let needle = query.trim().to_lowercase();
    let mut out = Vec::new();
    if needle.is_empty() {
        return out;
    }
    let mut check = |place: String, text: Option<&str>| {
        if let Some(found) = text.and_then(|t| excerpt(t, &needle)) {
            out.push(ContentMatch {
                place,
                excerpt: found,
            });
        }
    };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    check("name".into(), text(stack, "name").as_deref());
    check("description".into(), text(stack, "description").as_deref());
    if let Some(parameters) = stack.get("parameters").and_then(Value::as_object) {
        for name in parameters.keys() {
            check(format!("parameter {name}"), Some(name));
        }
    }
    for item in stack
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = text(item, "id").unwrap_or_default();
        let kind = if item.get("kind").and_then(Value::as_str) == Some("slot") {
            "slot"
        } else {
            "item"
        };
        check(format!("{kind} {id} (id)"), Some(&id));
        check(format!("{kind} {id} (name)"), text(item, "name").as_deref());
        check(format!("{kind} {id}"), text(item, "content").as_deref());
        check(format!("{kind} {id} (slot)"), text(item, "slot").as_deref());
    }
    for rule in stack
        .get("regex")
        .and_then(|r| r.get("rules"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = text(rule, "id").unwrap_or_default();
        check(format!("regex rule {id} (id)"), Some(&id));
        for key in ["pattern", "replace"] {
            check(
                format!("regex rule {id} ({key})"),
                text(rule, key).as_deref(),
            );
        }
    }
    out
}

/// [`search_stack`] as a list hit: the first [`MAX_MATCHES_PER_STACK`] places and how many more;
/// `None` when nothing matches.
pub fn search_hit(selector: &str, stack: &Value, query: &str) -> Option<StackSearchHit> {
    let mut matches = search_stack(stack, query);
    if matches.is_empty() {
        return None;
    }
    let more = matches.len().saturating_sub(MAX_MATCHES_PER_STACK);
    matches.truncate(MAX_MATCHES_PER_STACK);
    Some(StackSearchHit {
        selector: selector.to_string(),
        matches,
        more,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stack() -> Value {
        json!({
            "id": "reviewer", "name": "Careful reviewer",
            "parameters": {"audience": "x"},
            "regex": {"rules": [{"id": "no-ooc", "pattern": "\\(OOC:[^)]+\\)", "replace": ""}]},
            "items": [
                {"kind": "block", "id": "intro", "content": "You review code for the main agent.\nReport every finding with its file and line, most severe first."},
                {"kind": "slot", "id": "history", "slot": "chat-history"}
            ]
        })
    }

    #[test]
    fn every_place_is_searched_case_insensitively_with_an_excerpt() {
        assert_eq!(
            search_stack(&stack(), "SEVERE"),
            vec![ContentMatch {
                place: "item intro".into(),
                excerpt: "…ng with its file and line, most severe first.".into(),
            }]
        );
        assert_eq!(
            search_stack(&stack(), "review"),
            vec![
                ContentMatch {
                    place: "name".into(),
                    excerpt: "Careful reviewer".into()
                },
                ContentMatch {
                    place: "item intro".into(),
                    excerpt: "You review code for the main agent. Report…".into()
                },
            ]
        );
        let places = |q: &str| -> Vec<String> {
            search_stack(&stack(), q)
                .into_iter()
                .map(|m| m.place)
                .collect()
        };
        assert_eq!(places("chat-hist"), ["slot history (slot)"]);
        assert_eq!(
            places("ooc"),
            ["regex rule no-ooc (id)", "regex rule no-ooc (pattern)"]
        );
        assert_eq!(places("audience"), ["parameter audience"]);
        assert_eq!(places("  "), Vec::<String>::new());
        assert_eq!(places("absent"), Vec::<String>::new());
    }

    #[test]
    fn a_hit_lists_three_places_and_counts_the_rest() {
        let hit = search_hit("project:reviewer", &stack(), "o").unwrap();
        assert_eq!(hit.matches.len(), 3);
        assert_eq!(hit.more, search_stack(&stack(), "o").len() - 3);
        assert_eq!(search_hit("project:reviewer", &stack(), "zzz"), None);
    }

    #[test]
    fn excerpts_cut_at_characters_not_bytes() {
        let text = format!("{}ünïcödé{}", "é".repeat(40), "ß".repeat(40));
        let found = excerpt(&text, "ünïcödé").unwrap();
        assert_eq!(
            found,
            format!("…{}ünïcödé{}…", "é".repeat(32), "ß".repeat(32))
        );
    }
}
