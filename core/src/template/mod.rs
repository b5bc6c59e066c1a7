//! forge-v1 templates: parser, analyzer, renderer and macros (prompt-stacks spec §3).
//!
//! ```text
//! text := (literal | "{{" output "}}" | "{%" statement "%}")*
//! output := path ("|" filter)*             filters: trim upper lower json xml
//! statement := "if " predicate | "else" | "endif"
//! predicate := path | path "==" quoted | path "!=" quoted
//! path := segment ("." segment)*           segment: ^[A-Za-z_][A-Za-z0-9_-]*$ (trimmed)
//! ```
//!
//! [`parse`] → [`analyze`] → [`render`]; [`render_text`] does the three and formats the block
//! diagnostic the compiler reports (`forge-v1 parse error: …`, the raw analysis error,
//! `forge-v1 render error: …`, `forge-v1 compile error: …`). A failing block renders `""`; the
//! caller never re-injects the raw text.
//!
//! # Decisions where the spec is silent or ambiguous
//!
//! 1. **`Invalid predicate path` is a parse error.** The original parser raises it while parsing
//!    the `if` tag, so the block diagnostic is `forge-v1 parse error: Invalid predicate path: …`.
//!    [`analyze`] therefore reports only unknown filters (`Unknown forge-v1 filter: f`), one
//!    message per unknown filter, in document order.
//! 2. **Tag bodies.** A statement body is trimmed (JavaScript `trim`) before it is matched, so
//!    `{%if x%}` is an `if`, while a bare `{% if %}` or `{% if\tx %}` is
//!    `Unsupported forge-v1 tag: {% if %}` / `{% if\tx %}` (only a space may follow `if`). The
//!    close `%}` is searched from the opener itself, so `{%}` closes on its own `%` and reports
//!    `Unsupported forge-v1 tag: {%  %}`, exactly like the original. There is no escape for
//!    `{{` or `{%`.
//! 3. **Nesting.** Parsing is iterative and accepts any depth. The 64-level limit is enforced
//!    while rendering, on the branches actually taken (a body at depth > [`MAX_NESTING`] fails
//!    with `forge-v1 template nesting exceeds 64 levels.`, kind `Recursion`), as in the original.
//!    An empty body still counts, an absent `else` body does not.
//! 4. **Output limit.** Lengths are UTF-16 code units. As in the original, every node list (the
//!    top level, every `if` body) checks its own accumulated output after each node; for the top
//!    level that is the cumulative output. So with limit 50, `40×a{% if t %}20×b{{missing}}…`
//!    reports the undefined path, not the limit.
//! 5. **Paths.** Rooted paths walk own keys of non-array objects only (`runtime.toString` is
//!    undefined). A bare root (`{{ runtime }}`, `{{ parameters }}`, `{{ extensions }}`) renders
//!    the object as JSON; the three roots win over a parameter of the same name. Parameter keys
//!    containing `.` are unreachable. Unrooted paths of two or more segments are undefined.
//! 6. **`extensions`.** `extensions.<n>` resolves the macro lazily. `{{ extensions }}` and the
//!    (always undefined) `extensions.<n>.<more>` see the extensions resolved when this render
//!    started, in resolution order. An unregistered macro is an undefined path.
//! 7. **Bare names** try a parameter, then a runtime alias (`cwd date time lastUserMessage
//!    activeModel`; `selectedTools`/`tools` → `runtime.selectedToolsText`), then a resolved
//!    extension or a macro. An alias whose runtime field is missing from the scope reports
//!    `Undefined forge-v1 path: {{runtime.<field>}}`.
//! 8. **Filters** coerce with JavaScript `String()` (numbers in ECMAScript form, arrays joined
//!    with `,` and null elements empty, objects `[object Object]`); `upper`/`lower` use Rust's
//!    Unicode full case mapping (final sigma included), which matches JavaScript's
//!    locale-independent mapping. Predicates compare the unfiltered rendered text.
//! 9. **Macros.** The [`MacroContext`] keeps a cache, the in-progress set and call counts. It
//!    adopts `runtime.lastUserMessage` from the first scope it resolves with;
//!    [`MacroContext::set_latest_user_message`] with a different text clears the cache. A failed
//!    resolution is not cached. Unregistered `extensions.*` dependencies of a macro are skipped.
//!    [`Macro`] is `Send + Sync` so a registry can be shared across threads.
//! 10. **`forge-v1 compile error`.** The original used it for non-template exceptions (a macro
//!     returning a non-string, …), which Rust's types rule out. Here it reports a malformed
//!     [`Scope`]: `forge-v1 compile error: scope runtime must be an object.` (or `parameters`).
//! 11. [`render_text`] returns the first message; [`render_text_all`] returns every message
//!     (several unknown filters give several diagnostics, as in the original).
//! 12. [`dependencies`] lists each referenced path once (first occurrence, document order),
//!     as written: `parameters.name`, `extensions.A`, `runtime.tool.read`, or a bare `name`.
//!
//! # Fuzzing
//!
//! `core/tests/template.rs` has a property test over arbitrary template-like strings; run it
//! for minutes with `PROPTEST_CASES=500000 cargo test -p forge-core --release --test template
//! -- never_panics`.

mod macros;
mod parse;
mod render;

use serde_json::Value;

pub use macros::{extension_dependency, is_macro_name, Macro, MacroContext, MacroRegistry};
pub use parse::Template;
pub use render::{escape_xml, is_truthy, value_to_string, RenderError, RenderErrorKind, FILTERS};

/// Maximum rendered length of one block, in UTF-16 code units.
pub const OUTPUT_LIMIT: usize = 100_000;
/// Maximum length of one macro's output, in UTF-16 code units.
pub const MACRO_OUTPUT_LIMIT: usize = 16_384;
/// Maximum `if` nesting depth.
pub const MAX_NESTING: usize = 64;
/// Resolving a macro while this many are already in progress fails.
pub const MAX_MACRO_DEPTH: usize = 32;

/// The values a template sees, frozen once per compilation.
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    /// Object: `cwd`, `date`, `time`, `lastUserMessage`, `selectedTools` (array),
    /// `selectedToolsText`, `activeModel`, `populatedAt`, `timezone`, `tool {name: true}`,
    /// `slot {name: true}`.
    pub runtime: Value,
    /// Object: v2 `parameters` or v1 `variables`.
    pub parameters: Value,
}

impl Scope {
    pub fn new(runtime: Value, parameters: Value) -> Self {
        Scope {
            runtime,
            parameters,
        }
    }

    /// Sets `runtime.lastUserMessage` (pair with [`MacroContext::set_latest_user_message`]).
    pub fn set_last_user_message(&mut self, text: &str) {
        if let Value::Object(runtime) = &mut self.runtime {
            runtime.insert(
                "lastUserMessage".to_string(),
                Value::String(text.to_string()),
            );
        }
    }
}

/// Parses template text. Errors are the exact spec messages (`Unclosed output tag {{`, …),
/// without the `forge-v1 parse error: ` prefix.
pub fn parse(text: &str) -> Result<Template, String> {
    parse::parse_template(text)
}

/// Analysis errors (`Unknown forge-v1 filter: f`), in document order.
pub fn analyze(t: &Template) -> Vec<String> {
    let mut errors = Vec::new();
    t.visit(|node| {
        if let parse::Node::Output { filters, .. } = node {
            for filter in filters {
                if !FILTERS.contains(&filter.as_str()) {
                    errors.push(format!("Unknown forge-v1 filter: {filter}"));
                }
            }
        }
    });
    errors
}

/// Paths referenced by outputs and predicates, each once, in document order.
pub fn dependencies(t: &Template) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut paths = Vec::new();
    t.visit(|node| {
        let path = match node {
            parse::Node::Output { path, .. } => path.as_slice(),
            parse::Node::If { predicate, .. } => predicate.path(),
            parse::Node::Text(_) => return,
        };
        let joined = path.join(".");
        if seen.insert(joined.clone()) {
            paths.push(joined);
        }
    });
    paths
}

/// Renders a parsed template with an output limit (UTF-16 code units). The error carries the
/// raw message (no `forge-v1 render error: ` prefix). Does not run [`analyze`]: an unknown
/// filter fails when it is reached.
pub fn render(
    t: &Template,
    scope: &Scope,
    macros: &mut MacroContext,
    limit: usize,
) -> Result<String, RenderError> {
    render::render_template(t, scope, macros, limit)
}

/// Renders a block's text; `Err` carries the complete diagnostic message:
/// `forge-v1 parse error: …` | the raw analysis error | `forge-v1 render error: …` |
/// `forge-v1 compile error: …`. With several analysis errors, the first.
pub fn render_text(text: &str, scope: &Scope, macros: &mut MacroContext) -> Result<String, String> {
    render_text_all(text, scope, macros).map_err(|mut messages| messages.swap_remove(0))
}

/// A template text parsed and analyzed, or its parse or analysis errors.
type Checked = Result<Template, Vec<String>>;

thread_local! {
    /// Parsed templates by text: stack items are the same from one compile to the next, so each
    /// is parsed once per thread. Parsing is a pure function of the text, so the cache changes
    /// no result. Bounded: it starts over when it holds [`PARSED_LIMIT`] texts, and texts longer
    /// than [`PARSED_MAX_TEXT`] bytes are not kept.
    static PARSED: std::cell::RefCell<std::collections::HashMap<String, std::rc::Rc<Checked>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// How many parsed templates [`PARSED`] keeps.
const PARSED_LIMIT: usize = 256;

/// The longest text [`PARSED`] keeps, in bytes.
const PARSED_MAX_TEXT: usize = 16 * 1024;

fn checked_template(text: &str) -> std::rc::Rc<Checked> {
    if let Some(hit) = PARSED.with(|cache| cache.borrow().get(text).cloned()) {
        return hit;
    }
    let checked = std::rc::Rc::new(
        parse(text)
            .map_err(|m| vec![format!("forge-v1 parse error: {m}")])
            .and_then(|template| {
                let errors = analyze(&template);
                if errors.is_empty() {
                    Ok(template)
                } else {
                    Err(errors)
                }
            }),
    );
    if text.len() > PARSED_MAX_TEXT {
        return checked;
    }
    PARSED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= PARSED_LIMIT {
            cache.clear();
        }
        cache.insert(text.to_string(), checked.clone());
    });
    checked
}

/// [`render_text`] with every diagnostic message (never an empty `Err`).
pub fn render_text_all(
    text: &str,
    scope: &Scope,
    macros: &mut MacroContext,
) -> Result<String, Vec<String>> {
    let checked = checked_template(text);
    let template = match checked.as_ref() {
        Ok(template) => template,
        Err(errors) => return Err(errors.clone()),
    };
    for (name, value) in [
        ("runtime", &scope.runtime),
        ("parameters", &scope.parameters),
    ] {
        if !value.is_object() {
            return Err(vec![format!(
                "forge-v1 compile error: scope {name} must be an object."
            )]);
        }
    }
    render(template, scope, macros, OUTPUT_LIMIT)
        .map_err(|e| vec![format!("forge-v1 render error: {}", e.message)])
}
