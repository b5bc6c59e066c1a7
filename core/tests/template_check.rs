//! The template analysis of a Preset (`stack::template_check`): errors and unknown parameters
//! with item, line and column, only for enabled blocks of forge-v1 stacks.

use forge_core::diag::{Category, Diagnostic, Level};
use forge_core::stack::template_check::template_diagnostics;
use forge_core::stack::{parse_stack_value, ParseOptions};
use forge_core::template::line_column;
use serde_json::json;

fn diagnostics(items: serde_json::Value, version: u64) -> Vec<Diagnostic> {
    let value = json!({
        "schemaVersion": version, "type": "pi-forge.prompt-stack", "id": "t",
        "parameters": { "tone": "brief" },
        "items": items
    });
    let parsed = parse_stack_value(value, &ParseOptions::new("t.json"));
    template_diagnostics(&parsed.stack)
}

#[test]
fn line_and_column_count_utf16_units() {
    assert_eq!(line_column("abc", 0), (1, 1));
    assert_eq!(line_column("abc", 2), (1, 3));
    assert_eq!(line_column("a\nbc", 2), (2, 1));
    assert_eq!(line_column("a\nbc", 3), (2, 2));
    // "😀" is two UTF-16 units.
    assert_eq!(line_column("😀x{{", 3), (1, 4));
    assert_eq!(line_column("ab", 99), (1, 3));
}

#[test]
fn unclosed_if_and_unclosed_output_are_errors_with_their_place() {
    let d = diagnostics(
        json!([
            { "kind": "block", "id": "intro", "role": "system", "content": "Hello.\n{% if parameters.strict %}Be strict." },
            { "kind": "block", "id": "tools", "role": "system", "content": "Use {{ runtime.tool.read " },
            { "kind": "block", "id": "off", "enabled": false, "content": "{{ broken" },
            { "kind": "slot", "id": "h", "slot": "chat-history" }
        ]),
        2,
    );
    let rows: Vec<(Level, Option<&str>, Option<&str>, &str)> = d
        .iter()
        .map(|d| {
            (
                d.level,
                d.item_id.as_deref(),
                d.field.as_deref(),
                d.message.as_str(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                Level::Error,
                Some("intro"),
                Some("items[0].content"),
                "Template error in item intro, line 2, column 1: forge-v1 parse error: Missing {% endif %}. The block would be left out of the prompt."
            ),
            (
                Level::Error,
                Some("tools"),
                Some("items[1].content"),
                "Template error in item tools, line 1, column 5: forge-v1 parse error: Unclosed output tag {{. The block would be left out of the prompt."
            ),
        ]
    );
    assert!(d.iter().all(|d| d.category == Some(Category::Template)));
    assert_eq!(
        serde_json::to_value(&d[0]).unwrap()["category"],
        json!("template")
    );
}

#[test]
fn unknown_filters_are_errors_and_unknown_parameters_warnings() {
    let d = diagnostics(
        json!([
            { "kind": "block", "id": "a", "role": "system",
              "content": "{{ parameters.tone | shout }}\n  {{ parameters.mood }} {{ parameters.tone }} {{ parameters.mood }}" }
        ]),
        2,
    );
    let rows: Vec<(Level, &str)> = d.iter().map(|d| (d.level, d.message.as_str())).collect();
    assert_eq!(
        rows,
        vec![
            (
                Level::Error,
                "Template error in item a, line 1, column 1: Unknown forge-v1 filter: shout. The block would be left out of the prompt."
            ),
            (
                Level::Warning,
                "Template in item a, line 2, column 3 reads parameters.mood, which this Preset does not define: it renders as nothing."
            ),
        ]
    );
}

#[test]
fn clean_templates_and_v1_stacks_have_none() {
    assert_eq!(
        diagnostics(
            json!([{ "kind": "block", "id": "a", "role": "system",
                     "content": "{% if parameters.tone %}{{ parameters.tone | upper }}{% endif %} {{ runtime.cwd }}" }]),
            2
        ),
        vec![]
    );
    // schemaVersion 1 blocks use legacy macros, not forge-v1.
    assert_eq!(
        diagnostics(
            json!([{ "kind": "block", "id": "a", "role": "system", "content": "{{ broken" }]),
            1
        ),
        vec![]
    );
}

/// A block whose literal text alone is longer than a block may render (100,000 UTF-16 units)
/// is an error on its item: the compiler would leave it out. Tags do not count; a block at
/// the limit, or one a loop may make longer, is not flagged (only a render can tell).
#[test]
fn a_block_longer_than_the_output_limit_is_an_error_on_its_item() {
    let huge = "x".repeat(150_000);
    let at_limit = "é".repeat(100_000);
    let tagged = format!(
        "{}{{{{ runtime.cwd }}}}{{% if true %}}{{# note #}}",
        "y".repeat(99_990)
    );
    let d = diagnostics(
        json!([
            { "kind": "block", "id": "huge", "role": "system", "content": huge },
            { "kind": "block", "id": "limit", "role": "system", "content": at_limit },
            { "kind": "block", "id": "tags", "role": "system", "content": tagged },
            { "kind": "block", "id": "off", "enabled": false, "content": huge },
            { "kind": "slot", "id": "h", "slot": "chat-history" }
        ]),
        2,
    );
    let long: Vec<(&str, &str, Level, Option<Category>)> = d
        .iter()
        .filter(|d| d.message.contains("one block may render"))
        .map(|d| {
            (
                d.item_id.as_deref().unwrap(),
                d.field.as_deref().unwrap(),
                d.level,
                d.category,
            )
        })
        .collect();
    assert_eq!(
        long,
        [(
            "huge",
            "items[0].content",
            Level::Error,
            Some(Category::Template)
        )]
    );
    assert_eq!(
        d.iter().find(|d| d.item_id.as_deref() == Some("huge")).unwrap().message,
        "Block huge holds 150000 characters of text, more than the 100000 one block may render: the compiler leaves it out of the prompt, and while this Preset is active Pi refuses its prompts. Shorten it or split it across several blocks."
    );
    // A forge-v1 stack only: schemaVersion 1 blocks are not rendered by forge-v1.
    let v1 = diagnostics(
        json!([{ "kind": "block", "id": "huge", "role": "system", "content": "x".repeat(150_000) }]),
        1,
    );
    assert!(v1
        .iter()
        .all(|d| !d.message.contains("one block may render")));
}
