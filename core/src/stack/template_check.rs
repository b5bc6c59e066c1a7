//! The template analysis of a Preset: every enabled block of a forge-v1 (schemaVersion 2) stack
//! is parsed and analyzed without rendering. A template that does not parse or uses an unknown
//! filter is an error (the compiler would drop the whole block); a `parameters.*` path the Preset
//! does not define is a warning (it renders as nothing). Each diagnostic names the item, the line
//! and the column (1-based, UTF-16 units as the editor counts) and carries
//! [`Category::Template`], so the file-format diagnostics keep their exact shape.

use crate::diag::{Category, Diagnostic};
use crate::stack::{PromptStack, SchemaVersion};
use crate::template::{analyze_text, line_column, OUTPUT_LIMIT};

/// The UTF-16 length of a template's literal text: everything outside `{{ }}`, `{% %}` and
/// `{# #}` tags. The block renders at least that much (loops and values only add), so a
/// literal text above [`OUTPUT_LIMIT`] can never render.
fn literal_units(content: &str) -> usize {
    let mut units = 0;
    let mut rest = content;
    while let Some(open) = rest.find('{') {
        units += rest[..open].encode_utf16().count();
        let after = &rest[open + 1..];
        let close = match after.chars().next() {
            Some('{') => "}}",
            Some('%') => "%}",
            Some('#') => "#}",
            _ => {
                units += 1;
                rest = after;
                continue;
            }
        };
        match after[1..].find(close) {
            Some(end) => rest = &after[1 + end + close.len()..],
            // An unclosed tag is a template error of its own; count nothing after it.
            None => return units,
        }
    }
    units + rest.encode_utf16().count()
}

/// The template diagnostics of `stack` (empty for a v1 stack: its blocks are not forge-v1).
pub fn template_diagnostics(stack: &PromptStack) -> Vec<Diagnostic> {
    if stack.schema_version != SchemaVersion::V2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (index, item) in stack.items.iter().enumerate() {
        let Some(content) = item.content().filter(|_| item.is_enabled()) else {
            continue;
        };
        // The place of UTF-16 offset `at`: `(line, column, "item <id>, line L, column C")`.
        let place = |at: usize| {
            let (line, column) = line_column(content, at);
            (
                line,
                column,
                format!("item {}, line {line}, column {column}", item.id),
            )
        };
        let field = format!("items[{index}].content");
        let literal = literal_units(content);
        if literal > OUTPUT_LIMIT {
            out.push(
                Diagnostic::error(format!(
                    "Block {} holds {literal} characters of text, more than the {OUTPUT_LIMIT} one block may render: the compiler leaves it out of the prompt, and while this Preset is active Pi refuses its prompts. Shorten it or split it across several blocks.",
                    item.id
                ))
                .with_item(item.id.clone())
                .with_field(field.clone())
                .with_category(Category::Template),
            );
        }
        let analysis = analyze_text(content);
        for error in &analysis.errors {
            let (line, column, at) = place(error.span.map_or(0, |s| s.start));
            out.push(
                Diagnostic::error(format!(
                    "Template error in {at}: {}. The block would be left out of the prompt.",
                    error.message
                ))
                .with_position(line, column)
                .with_item(item.id.clone())
                .with_field(field.clone())
                .with_category(Category::Template),
            );
        }
        for dependency in &analysis.dependencies {
            let Some(name) = dependency.path.strip_prefix("parameters.") else {
                continue;
            };
            let name = name.split('.').next().unwrap_or(name);
            let defined = stack
                .parameters
                .as_ref()
                .is_some_and(|p| p.contains_key(name));
            if defined {
                continue;
            }
            let (line, column, at) = place(dependency.spans.first().map_or(0, |s| s.start));
            out.push(
                Diagnostic::warning(format!(
                    "Template in {at} reads parameters.{name}, which this Preset does not define: it renders as nothing."
                ))
                .with_position(line, column)
                .with_item(item.id.clone())
                .with_field(field.clone())
                .with_category(Category::Template),
            );
        }
    }
    out
}
