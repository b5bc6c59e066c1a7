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
//! 13. **Spans.** [`analyze_text`] and [`render_checked`] say where each problem is, in UTF-16
//!     code units (what JavaScript and the editor count), end exclusive: the whole tag for a bad
//!     tag or an unknown filter, the unclosed opener to the end of the text for `Unclosed …`,
//!     the `{% if %}` tag for `Missing {% else %}` / `Missing {% endif %}`, and for a render
//!     error the innermost tag being evaluated. Dependencies carry the span of every tag that
//!     names them.
//!
//! # Fuzzing
//!
//! `core/tests/template.rs` has a property test over arbitrary template-like strings; run it
//! for minutes with `PROPTEST_CASES=500000 cargo test -p forge-core --release --test template
//! -- never_panics`.

pub mod assist;
mod error;
mod macros;
mod parse;
mod render;
mod scope;

pub use error::{RenderError, RenderErrorKind};
pub use macros::{extension_dependency, is_macro_name, Macro, MacroContext, MacroRegistry};
pub use parse::Template;
pub use render::{escape_xml, is_truthy, lookup_plain, value_to_string, FILTERS};
pub use scope::{Scope, MACRO_OUTPUT_LIMIT, MAX_MACRO_DEPTH, MAX_NESTING, OUTPUT_LIMIT};

/// Parses template text. Errors are the exact spec messages (`Unclosed output tag {{`, …),
/// without the `forge-v1 parse error: ` prefix.
pub fn parse(text: &str) -> Result<Template, String> {
    parse::parse_template(text).map_err(|failure| failure.message)
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
    spanned_dependencies(t)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// Each referenced path once (document order) with the byte ranges of the tags naming it.
fn spanned_dependencies(t: &Template) -> Vec<(String, Vec<parse::ByteRange>)> {
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut paths: Vec<(String, Vec<parse::ByteRange>)> = Vec::new();
    t.visit(|node| {
        let (path, at) = match node {
            parse::Node::Output { path, at, .. } => (path.as_slice(), *at),
            parse::Node::If { predicate, at, .. } => (predicate.path(), *at),
            parse::Node::Text(_) => return,
        };
        let joined = path.join(".");
        match index.get(&joined) {
            Some(&i) => paths[i].1.push(at),
            None => {
                index.insert(joined.clone(), paths.len());
                paths.push((joined, vec![at]));
            }
        }
    });
    paths
}

// ------------------------------------------------------------------------------------------------
// Analysis with positions (for `pi-forge template` and the editor)

/// A range of template text in UTF-16 code units, `start..end` (end exclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// A problem with a template: the message a block diagnostic would carry
/// (`forge-v1 parse error: …`, `Unknown forge-v1 filter: f`, `forge-v1 render error: …`,
/// `forge-v1 compile error: …`) and where it is, when it is about a place in the text.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TemplateError {
    pub message: String,
    pub span: Option<Span>,
}

/// A path the template reads and every tag that reads it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Dependency {
    pub path: String,
    pub spans: Vec<Span>,
}

/// What [`analyze_text`] finds: the errors (a parse error alone, or every unknown filter) and,
/// when the text parses, the dependencies.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Analysis {
    pub errors: Vec<TemplateError>,
    pub dependencies: Vec<Dependency>,
}

/// Byte offsets of one text → UTF-16 offsets; cheap for offsets asked in increasing order.
struct Utf16Cursor<'a> {
    text: &'a str,
    byte: usize,
    units: usize,
}

impl<'a> Utf16Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Utf16Cursor {
            text,
            byte: 0,
            units: 0,
        }
    }

    fn units(&mut self, byte: usize) -> usize {
        if byte < self.byte {
            self.byte = 0;
            self.units = 0;
        }
        let byte = byte.min(self.text.len());
        self.units += crate::json::utf16_len(self.text.get(self.byte..byte).unwrap_or(""));
        self.byte = byte;
        self.units
    }

    fn span(&mut self, (start, end): parse::ByteRange) -> Span {
        Span {
            start: self.units(start),
            end: self.units(end),
        }
    }
}

/// 1-based line and column of the UTF-16 offset `at` in `text` (columns in UTF-16 units, as
/// the editor counts them).
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let (mut line, mut column, mut units) = (1, 1, 0);
    for c in text.chars() {
        if units >= at {
            break;
        }
        units += c.len_utf16();
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += c.len_utf16();
        }
    }
    (line, column)
}

/// Parses and analyzes `text` without rendering it: the same errors [`render_text_all`] reports
/// before rendering, with their spans, and the dependencies with theirs.
pub fn analyze_text(text: &str) -> Analysis {
    analyze_parsed(text).0
}

/// [`analyze_text`] and the parsed template, when the text parses.
fn analyze_parsed(text: &str) -> (Analysis, Option<Template>) {
    let mut cursor = Utf16Cursor::new(text);
    let template = match parse::parse_template(text) {
        Ok(template) => template,
        Err(failure) => {
            let analysis = Analysis {
                errors: vec![TemplateError {
                    message: format!("forge-v1 parse error: {}", failure.message),
                    span: Some(cursor.span(failure.at)),
                }],
                dependencies: Vec::new(),
            };
            return (analysis, None);
        }
    };
    let mut errors = Vec::new();
    template.visit(|node| {
        if let parse::Node::Output { filters, at, .. } = node {
            for filter in filters {
                if !FILTERS.contains(&filter.as_str()) {
                    errors.push((format!("Unknown forge-v1 filter: {filter}"), *at));
                }
            }
        }
    });
    let errors = errors
        .into_iter()
        .map(|(message, at)| TemplateError {
            message,
            span: Some(cursor.span(at)),
        })
        .collect();
    let dependencies = spanned_dependencies(&template)
        .into_iter()
        .map(|(path, ats)| Dependency {
            path,
            spans: ats.into_iter().map(|at| cursor.span(at)).collect(),
        })
        .collect();
    let analysis = Analysis {
        errors,
        dependencies,
    };
    (analysis, Some(template))
}

/// [`render_text_all`] with spans: the analysis errors of [`analyze_text`], else the scope check,
/// else the render error with the span of the tag that failed.
pub fn render_checked(
    text: &str,
    scope: &Scope,
    macros: &mut MacroContext,
) -> Result<String, Vec<TemplateError>> {
    let (analysis, template) = analyze_parsed(text);
    let template = match template {
        Some(template) if analysis.errors.is_empty() => template,
        _ => return Err(analysis.errors),
    };
    if let Some(message) = scope_error(scope) {
        return Err(vec![TemplateError {
            message,
            span: None,
        }]);
    }
    render(&template, scope, macros, OUTPUT_LIMIT).map_err(|e| {
        vec![TemplateError {
            message: format!("forge-v1 render error: {}", e.message),
            span: e.at.map(|at| Utf16Cursor::new(text).span(at)),
        }]
    })
}

/// `forge-v1 compile error: scope <name> must be an object.` when the scope is malformed.
fn scope_error(scope: &Scope) -> Option<String> {
    [
        ("runtime", &scope.runtime),
        ("parameters", &scope.parameters),
    ]
    .into_iter()
    .find(|(_, value)| !value.is_object())
    .map(|(name, _)| format!("forge-v1 compile error: scope {name} must be an object."))
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
    if let Some(message) = scope_error(scope) {
        return Err(vec![message]);
    }
    render(template, scope, macros, OUTPUT_LIMIT)
        .map_err(|e| vec![format!("forge-v1 render error: {}", e.message)])
}
