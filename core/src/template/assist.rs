//! What the template editor needs to help while you type: the tokens to colour, the tags and
//! which ones belong together, completions at the caret, the value of the path under the
//! pointer, and the highlighted text as HTML, one string per line.
//!
//! The lexer scans the text the way the parser does (the first `{{` or `{%`, then the first
//! `}}` / `%}` searched from the opener; `{%}` closes on its own `%`), so every tag the parser
//! sees is a tag here. It never fails: what the grammar does not allow is an `Invalid` token,
//! and the parser's message for it comes from [`super::analyze_text`]. An unclosed tag is lexed
//! to the end of its line only, so one `{{` typed at the top of a long text does not repaint
//! all of it. Offsets are byte offsets into the text unless a name says UTF-16;
//! [`byte_offset`] and [`utf16_offset`] convert the editor's caret.
//!
//! Linear in the text: the whole pipeline (lex, analyze, HTML for every line) is what the
//! editor runs per keystroke, and `pi-forge bench` times it on a 100 KB template.

use serde_json::Value;

use super::parse::{is_path_segment, quoted_literal, Finder};
use super::render::lookup_plain;
use super::{value_to_string, Scope, Span, FILTERS};
use crate::js::is_js_whitespace;

/// What a token is, for colouring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// `{{`, `}}`, `{%`, `%}`.
    Delim,
    /// `if`, `else`, `endif`.
    Keyword,
    /// `runtime`, `parameters` or `extensions` as the first segment of a path.
    Root,
    /// Any other path segment (a bare name included).
    Path,
    /// `.` between segments and `|` before a filter.
    Punct,
    /// A known filter.
    Filter,
    /// A filter the renderer does not know.
    UnknownFilter,
    /// `==` or `!=`.
    Operator,
    /// A quoted literal.
    Str,
    /// Text inside a tag that the grammar does not allow.
    Invalid,
}

impl TokenKind {
    /// The CSS class of the token's `span`.
    pub fn class(self) -> &'static str {
        match self {
            TokenKind::Delim => "tk-delim",
            TokenKind::Keyword => "tk-kw",
            TokenKind::Root => "tk-root",
            TokenKind::Path => "tk-path",
            TokenKind::Punct => "tk-punct",
            TokenKind::Filter => "tk-filter",
            TokenKind::UnknownFilter => "tk-badfilter",
            TokenKind::Operator => "tk-op",
            TokenKind::Str => "tk-str",
            TokenKind::Invalid => "tk-invalid",
        }
    }
}

/// A coloured piece of the text, `start..end` in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub start: usize,
    pub end: usize,
    pub kind: TokenKind,
}

/// What a tag is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagKind {
    Output,
    If,
    Else,
    Endif,
    /// A statement the parser rejects (`{% for x %}`, `{%}`, …).
    Other,
}

/// One tag: `start..end` is the whole tag (for an unclosed one, to the end of its line) and
/// `inner` the text between the delimiters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    pub start: usize,
    pub end: usize,
    pub inner: (usize, usize),
    pub kind: TagKind,
    pub closed: bool,
}

/// The lexed text: tokens in order, never overlapping, and the tags in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub tags: Vec<Tag>,
}

impl Lexed {
    /// The tag whose inside (or closing delimiter) holds `at`: the caret right after `{{` is
    /// inside, right before it is not.
    pub fn tag_at(&self, at: usize) -> Option<&Tag> {
        let i = self.tags.partition_point(|t| t.start < at);
        let tag = self.tags.get(i.checked_sub(1)?)?;
        (at <= tag.end && at >= tag.inner.0).then_some(tag)
    }
}

/// Lexes `text` (see the module documentation).
pub fn lex(text: &str) -> Lexed {
    let mut lexer = Lexer {
        text,
        out: Lexed::default(),
    };
    lexer.run();
    lexer.out
}

struct Lexer<'a> {
    text: &'a str,
    out: Lexed,
}

impl Lexer<'_> {
    fn push(&mut self, start: usize, end: usize, kind: TokenKind) {
        if end > start {
            self.out.tokens.push(Token { start, end, kind });
        }
    }

    fn line_end(&self, from: usize) -> usize {
        self.text[from..]
            .find('\n')
            .map_or(self.text.len(), |i| from + i)
    }

    fn run(&mut self) {
        let text = self.text;
        let mut outputs = Finder::new("{{");
        let mut statements = Finder::new("{%");
        let mut output_ends = Finder::new("}}");
        let mut statement_ends = Finder::new("%}");
        let mut index = 0;
        while index < text.len() {
            let (start, is_output) = match (outputs.find(text, index), statements.find(text, index))
            {
                (None, None) => break,
                (Some(o), None) => (o, true),
                (None, Some(s)) => (s, false),
                (Some(o), Some(s)) => (o.min(s), o <= s),
            };
            let close = if is_output {
                output_ends.find(text, start)
            } else {
                statement_ends.find(text, start)
            };
            let Some(close) = close else {
                // Unclosed: the rest of the line is lexed as the tag's inside.
                let end = self.line_end(start + 2);
                self.push(start, start + 2, TokenKind::Delim);
                let kind = self.inside(is_output, start + 2, end);
                self.out.tags.push(Tag {
                    start,
                    end,
                    inner: (start + 2, end),
                    kind,
                    closed: false,
                });
                break;
            };
            if close < start + 2 {
                // `{%}`: the opener's `%` is also the closer's.
                self.push(start, close + 2, TokenKind::Invalid);
                self.out.tags.push(Tag {
                    start,
                    end: close + 2,
                    inner: (start + 2, start + 2),
                    kind: TagKind::Other,
                    closed: true,
                });
                index = close + 2;
                continue;
            }
            self.push(start, start + 2, TokenKind::Delim);
            let kind = self.inside(is_output, start + 2, close);
            self.push(close, close + 2, TokenKind::Delim);
            self.out.tags.push(Tag {
                start,
                end: close + 2,
                inner: (start + 2, close),
                kind,
                closed: true,
            });
            index = close + 2;
        }
    }

    fn inside(&mut self, is_output: bool, start: usize, end: usize) -> TagKind {
        if is_output {
            self.expression(start, end);
            TagKind::Output
        } else {
            self.statement(start, end)
        }
    }

    /// `path | filter | …`
    fn expression(&mut self, start: usize, end: usize) {
        let mut from = start;
        let mut first = true;
        for (i, _) in self.text[start..end].match_indices('|') {
            let bar = start + i;
            self.part(from, bar, first);
            self.push(bar, bar + 1, TokenKind::Punct);
            first = false;
            from = bar + 1;
        }
        self.part(from, end, first);
    }

    fn part(&mut self, start: usize, end: usize, is_path: bool) {
        if is_path {
            self.path(start, end);
            return;
        }
        let (start, end) = trimmed(self.text, start, end);
        let name = &self.text[start..end];
        let kind = if FILTERS.contains(&name) {
            TokenKind::Filter
        } else {
            TokenKind::UnknownFilter
        };
        self.push(start, end, kind);
    }

    /// `segment . segment …`; the first segment is a root when it names one. An empty segment
    /// marks the dot after it (or, at the end, the dot before it) as the mistake.
    fn path(&mut self, start: usize, end: usize) {
        let dots: Vec<usize> = self.text[start..end]
            .match_indices('.')
            .map(|(i, _)| start + i)
            .collect();
        let mut from = start;
        for (index, position) in dots.iter().copied().chain([end]).enumerate() {
            let (a, b) = trimmed(self.text, from, position);
            let segment = &self.text[a..b];
            if segment.is_empty() {
                if position < end {
                    self.push(position, position + 1, TokenKind::Invalid);
                } else if index > 0 {
                    if let Some(dot) = self.out.tokens.last_mut() {
                        dot.kind = TokenKind::Invalid;
                    }
                }
            } else {
                let kind = if !is_path_segment(segment) {
                    TokenKind::Invalid
                } else if index == 0 && matches!(segment, "runtime" | "parameters" | "extensions") {
                    TokenKind::Root
                } else {
                    TokenKind::Path
                };
                self.push(a, b, kind);
                if position < end {
                    self.push(position, position + 1, TokenKind::Punct);
                }
            }
            from = position + 1;
        }
    }

    fn statement(&mut self, start: usize, end: usize) -> TagKind {
        let (a, b) = trimmed(self.text, start, end);
        let raw = &self.text[a..b];
        match raw {
            "else" => {
                self.push(a, b, TokenKind::Keyword);
                return TagKind::Else;
            }
            "endif" => {
                self.push(a, b, TokenKind::Keyword);
                return TagKind::Endif;
            }
            _ => {}
        }
        if !raw.starts_with("if ") {
            self.push(a, b, TokenKind::Invalid);
            return TagKind::Other;
        }
        self.push(a, a + 2, TokenKind::Keyword);
        let (p, q) = trimmed(self.text, a + 3, b);
        let predicate = &self.text[p..q];
        match comparison(predicate) {
            Some(op) => {
                self.path(p, p + op);
                self.push(p + op, p + op + 2, TokenKind::Operator);
                let (s, e) = trimmed(self.text, p + op + 2, q);
                self.push(s, e, TokenKind::Str);
            }
            None => {
                // `a == b` without a quoted right side is a path that does not parse.
                let kind_before = self.out.tokens.len();
                self.path(p, q);
                if predicate.contains("==") || predicate.contains("!=") {
                    for token in &mut self.out.tokens[kind_before..] {
                        token.kind = TokenKind::Invalid;
                    }
                }
            }
        }
        TagKind::If
    }
}

/// Where the parser splits `left <op> "literal"`: the operator's offset in `predicate`.
fn comparison(predicate: &str) -> Option<usize> {
    ["==", "!="].into_iter().find_map(|op| {
        let index = predicate.find(op)?;
        let right = crate::js::js_trim(&predicate[index + 2..]);
        (index > 0 && !right.is_empty() && quoted_literal(right).is_some()).then_some(index)
    })
}

/// `start..end` without JavaScript whitespace at either end.
fn trimmed(text: &str, start: usize, end: usize) -> (usize, usize) {
    let slice = &text[start..end];
    let head = slice.len() - slice.trim_start_matches(is_js_whitespace).len();
    let tail = slice.trim_end_matches(is_js_whitespace).len();
    if tail <= head {
        return (start + head, start + head);
    }
    (start + head, start + tail)
}

// ------------------------------------------------------------------------------------------------
// Offsets

/// The byte offset of the UTF-16 offset `units` (clamped to the text, and to a char boundary).
pub fn byte_offset(text: &str, units: usize) -> usize {
    crate::json::utf16_to_byte(text, units)
}

/// The UTF-16 offset of the byte offset `byte`.
pub fn utf16_offset(text: &str, byte: usize) -> usize {
    let byte = byte.min(text.len());
    let byte = (0..=byte)
        .rev()
        .find(|&b| text.is_char_boundary(b))
        .unwrap_or(0);
    crate::json::utf16_len(&text[..byte])
}

/// A UTF-16 span of the text as a byte range.
pub fn span_bytes(text: &str, span: Span) -> (usize, usize) {
    let start = byte_offset(text, span.start);
    let end = start + byte_offset(&text[start..], span.end.saturating_sub(span.start));
    (start, end)
}

// ------------------------------------------------------------------------------------------------
// Tags that belong together

/// The ranges to mark when the caret is at `at`: the two delimiters of the output tag it is
/// in or next to, or every tag of the `if` / `else` / `endif` group it is in or next to. Empty
/// when the caret is at no tag or the tag has no partner.
pub fn matching(lexed: &Lexed, at: usize) -> Vec<(usize, usize)> {
    let i = lexed.tags.partition_point(|t| t.start <= at);
    // The caret touches a tag when it is inside it or right after it.
    let Some(tag_index) = i.checked_sub(1).filter(|&j| at <= lexed.tags[j].end) else {
        return Vec::new();
    };
    let tag = lexed.tags[tag_index];
    match tag.kind {
        TagKind::Output if tag.closed => {
            vec![(tag.start, tag.start + 2), (tag.inner.1, tag.inner.1 + 2)]
        }
        TagKind::If | TagKind::Else | TagKind::Endif => {
            let group = if_group(lexed, tag_index);
            if group.len() < 2 {
                return Vec::new();
            }
            group
                .into_iter()
                .map(|j| (lexed.tags[j].start, lexed.tags[j].end))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The indices of the tags of the conditional `tag_index` belongs to, in order.
fn if_group(lexed: &Lexed, tag_index: usize) -> Vec<usize> {
    let mut open: Vec<Vec<usize>> = Vec::new();
    for (j, tag) in lexed.tags.iter().enumerate() {
        match tag.kind {
            TagKind::If => open.push(vec![j]),
            TagKind::Else => match open.last_mut() {
                Some(group) => group.push(j),
                None if j == tag_index => return vec![j],
                None => {}
            },
            TagKind::Endif => match open.pop() {
                Some(mut group) => {
                    group.push(j);
                    if group.contains(&tag_index) {
                        return group;
                    }
                }
                None if j == tag_index => return vec![j],
                None => {}
            },
            _ => {}
        }
        if j > tag_index && open.iter().all(|g| !g.contains(&tag_index)) {
            break;
        }
    }
    // An unclosed `if`: its tags so far.
    open.into_iter()
        .find(|g| g.contains(&tag_index))
        .unwrap_or_else(|| vec![tag_index])
}

// ------------------------------------------------------------------------------------------------
// Completion

/// What a completion offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// A path segment (a root, a runtime field, a parameter, an alias).
    Path,
    Filter,
    /// `if`, `else`, `endif`.
    Tag,
    /// Not a completion: why there is none (`parameters.` in a Preset without parameters).
    /// Accepting it inserts nothing.
    Hint,
}

/// One entry of the completion list: `label` is shown, `insert` replaces the range, `detail`
/// says what it is or holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletionItem {
    pub label: String,
    pub insert: String,
    pub detail: String,
    pub kind: ItemKind,
}

/// The completions at a caret: accepting one replaces `from..to` (bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub from: usize,
    pub to: usize,
    pub items: Vec<CompletionItem>,
}

const FILTER_HELP: [(&str, &str); 5] = [
    ("trim", "removes whitespace at both ends"),
    ("upper", "UPPER CASE"),
    ("lower", "lower case"),
    ("json", "the value as JSON text"),
    ("xml", "escapes & < > \" '"),
];

const ALIASES: [(&str, &str); 7] = [
    ("cwd", "cwd"),
    ("date", "date"),
    ("time", "time"),
    ("lastUserMessage", "lastUserMessage"),
    ("activeModel", "activeModel"),
    ("selectedTools", "selectedToolsText"),
    ("tools", "selectedToolsText"),
];

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// The completions at byte offset `caret`: path segments in a tag's path (the children of what
/// precedes the caret, from `scope`), filters after `|`, statements right after `{%`. `None`
/// outside tags and where nothing fits (after `==`, under `extensions.`).
pub fn complete(text: &str, lexed: &Lexed, caret: usize, scope: &Scope) -> Option<Completion> {
    let tag = lexed.tag_at(caret)?;
    if caret > tag.inner.1 {
        return None; // in the closing delimiter
    }
    let before = &text[tag.inner.0..caret];
    let word_start = caret
        - before
            .bytes()
            .rev()
            .take_while(|&b| is_name_byte(b))
            .count();
    let word_end = caret
        + text[caret..tag.inner.1]
            .bytes()
            .take_while(|&b| is_name_byte(b))
            .count();
    let prefix = &text[word_start..caret];
    let head = before[..word_start - tag.inner.0].trim_start_matches(is_js_whitespace);
    let items = match tag.kind {
        TagKind::Output => match head.rfind('|') {
            // After `|`: only whitespace may stand between the bar and the filter's name.
            Some(bar) if head[bar + 1..].trim_matches(is_js_whitespace).is_empty() => {
                filters(prefix)
            }
            Some(_) => return None,
            None => path_items(head, prefix, scope)?,
        },
        _ => {
            if head.is_empty() {
                let mut items = Vec::new();
                for (label, insert, detail) in [
                    ("if", "if ", "{% if path %} … {% endif %}"),
                    ("else", "else", "the other branch of an if"),
                    ("endif", "endif", "closes the if"),
                ] {
                    if starts_with_ignoring_case(label, prefix) {
                        items.push(CompletionItem {
                            label: label.into(),
                            insert: insert.into(),
                            detail: detail.into(),
                            kind: ItemKind::Tag,
                        });
                    }
                }
                items
            } else {
                let predicate = head.strip_prefix("if ")?;
                if predicate.contains("==") || predicate.contains("!=") {
                    return None;
                }
                path_items(
                    predicate.trim_start_matches(is_js_whitespace),
                    prefix,
                    scope,
                )?
            }
        }
    };
    (!items.is_empty()).then_some(Completion {
        from: word_start,
        to: word_end,
        items,
    })
}

fn starts_with_ignoring_case(label: &str, prefix: &str) -> bool {
    label.len() >= prefix.len()
        && label.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn filters(prefix: &str) -> Vec<CompletionItem> {
    FILTER_HELP
        .iter()
        .filter(|(name, _)| starts_with_ignoring_case(name, prefix))
        .map(|(name, help)| CompletionItem {
            label: (*name).into(),
            insert: (*name).into(),
            detail: (*help).into(),
            kind: ItemKind::Filter,
        })
        .collect()
}

/// `head` is the path text before the segment being typed (`runtime.tool.` or empty).
fn path_items(head: &str, prefix: &str, scope: &Scope) -> Option<Vec<CompletionItem>> {
    let parents: Vec<String> = if head.is_empty() {
        Vec::new()
    } else {
        let inner = head.strip_suffix('.')?;
        let parents: Vec<String> = inner
            .split('.')
            .map(|s| s.trim_matches(is_js_whitespace).to_string())
            .collect();
        if !parents.iter().all(|s| is_path_segment(s)) {
            return None;
        }
        parents
    };
    let mut items = Vec::new();
    let mut add = |label: &str, detail: String| {
        if starts_with_ignoring_case(label, prefix) {
            items.push(CompletionItem {
                label: label.to_string(),
                insert: label.to_string(),
                detail,
                kind: ItemKind::Path,
            });
        }
    };
    if parents.is_empty() {
        add("runtime", "Pi's runtime facts".into());
        add("parameters", "this Preset's parameters".into());
        add(
            "extensions",
            "macros, resolved when the Preset compiles".into(),
        );
        if let Some(parameters) = scope.parameters.as_object() {
            for (name, value) in parameters {
                add(name, format!("parameter: {}", preview(value)));
            }
        }
        for (alias, field) in ALIASES {
            let shadowed = scope
                .parameters
                .as_object()
                .is_some_and(|p| p.contains_key(alias));
            if !shadowed {
                let value = scope.runtime.get(field).map(preview).unwrap_or_default();
                add(alias, format!("runtime.{field}: {value}"));
            }
        }
        return Some(items);
    }
    let root = match parents[0].as_str() {
        "runtime" => &scope.runtime,
        "parameters" => &scope.parameters,
        _ => return None,
    };
    let mut cursor = root;
    for segment in &parents[1..] {
        cursor = cursor.as_object()?.get(segment)?;
    }
    for (key, value) in cursor.as_object()? {
        if is_path_segment(key) {
            add(key, preview(value));
        }
    }
    if parents.len() == 1 && parents[0] == "parameters" && cursor.as_object()?.is_empty() {
        items.push(CompletionItem {
            label: "No parameters yet".into(),
            insert: prefix.to_string(),
            detail: "add them in the Stack tab (Parameters)".into(),
            kind: ItemKind::Hint,
        });
    }
    Some(items)
}

/// A short description of a value for a completion or a hover: strings quoted, objects and
/// arrays by size, cut at 60 characters.
pub fn preview(value: &Value) -> String {
    let text = match value {
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        Value::Object(map) => format!("{{…}} {} key{}", map.len(), plural(map.len())),
        Value::Array(items) if items.len() > 3 => {
            format!("[…] {} item{}", items.len(), plural(items.len()))
        }
        other => other.to_string(),
    };
    cut(&text, 60)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

// ------------------------------------------------------------------------------------------------
// Hover

/// The path under a position and what it holds now.
#[derive(Clone, Debug, PartialEq)]
pub struct Hover {
    /// The path up to the hovered segment (`runtime.tool` when hovering `tool` in
    /// `runtime.tool.read`).
    pub path: String,
    /// Bytes of the hovered segment.
    pub from: usize,
    pub to: usize,
    /// The value in the preview environment; `None` when the path is undefined there.
    pub value: Option<Value>,
}

impl Hover {
    /// One line for a tooltip or a screen reader: `runtime.cwd = /work` (the rendered text,
    /// cut at 200 characters), or why there is no value.
    pub fn describe(&self) -> String {
        match &self.value {
            Some(value) => {
                let shown = value_to_string(Some(value));
                let shown = if shown.is_empty() {
                    "(empty text)".to_string()
                } else {
                    cut(&shown, 200)
                };
                format!("{} = {shown}", self.path)
            }
            None if self.path.starts_with("extensions") => {
                format!("{}: a macro, resolved when the Preset compiles", self.path)
            }
            None => format!("{} is undefined here: it renders as nothing", self.path),
        }
    }
}

/// The path segment at byte `at` (inside a tag) and its value in `scope`.
pub fn hover(text: &str, lexed: &Lexed, at: usize, scope: &Scope) -> Option<Hover> {
    let tag = lexed.tag_at(at)?;
    let first = lexed.tokens.partition_point(|t| t.end <= tag.inner.0);
    let mut segments: Vec<(usize, usize)> = Vec::new();
    let mut hovered = None;
    for token in &lexed.tokens[first..] {
        if token.start >= tag.inner.1 {
            break;
        }
        match token.kind {
            TokenKind::Root | TokenKind::Path => {
                segments.push((token.start, token.end));
                if token.start <= at && at <= token.end {
                    hovered = Some(segments.len());
                }
            }
            TokenKind::Punct if &text[token.start..token.end] == "." => {}
            TokenKind::Keyword => {}
            _ => {
                if hovered.is_some() {
                    break;
                }
                segments.clear();
            }
        }
    }
    let n = hovered?;
    let path: Vec<String> = segments[..n]
        .iter()
        .map(|&(a, b)| text[a..b].to_string())
        .collect();
    let (from, to) = segments[n - 1];
    Some(Hover {
        value: lookup_plain(scope, &path),
        path: path.join("."),
        from,
        to,
    })
}

// ------------------------------------------------------------------------------------------------
// HTML

/// A mark over the tokens: an error underline (`err`) or a matched tag (`match`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overlay {
    pub start: usize,
    pub end: usize,
    pub class: &'static str,
}

/// The highlighted text as HTML, one string per line (`text.split('\n')`): escaped text and
/// `<span class="tk-…">` pieces. An overlay is drawn on the first line it touches only (an
/// unclosed tag's error would otherwise cover the rest of the text). Every piece of text is in
/// the output exactly once, so the lines' text equals the text.
pub fn html_lines(text: &str, tokens: &[Token], overlays: &[Overlay]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line_start = 0;
    let mut token = 0;
    let mut by_line: Vec<Overlay> = overlays.to_vec();
    by_line.sort_by_key(|o| o.start);
    let mut overlay = 0;
    let mut cuts: Vec<usize> = Vec::new();
    loop {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        while token < tokens.len() && tokens[token].end <= line_start {
            token += 1;
        }
        while overlay < by_line.len() && by_line[overlay].start < line_start {
            overlay += 1;
        }
        let first_token = token;
        let mut last_token = token;
        while last_token < tokens.len() && tokens[last_token].start < line_end {
            last_token += 1;
        }
        let first_overlay = overlay;
        let mut last_overlay = overlay;
        while last_overlay < by_line.len() && by_line[last_overlay].start <= line_end {
            last_overlay += 1;
        }
        let here = &by_line[first_overlay..last_overlay];
        let spans = &tokens[first_token..last_token];
        let mut html = String::with_capacity(line_end - line_start + 16);
        if spans.is_empty() && here.iter().all(|o| o.start >= line_end) {
            escape_into(&mut html, &text[line_start..line_end]);
        } else {
            cuts.clear();
            cuts.push(line_start);
            cuts.push(line_end);
            for t in spans {
                cuts.push(t.start.clamp(line_start, line_end));
                cuts.push(t.end.clamp(line_start, line_end));
            }
            for o in here {
                cuts.push(o.start.clamp(line_start, line_end));
                cuts.push(o.end.clamp(line_start, line_end));
            }
            cuts.sort_unstable();
            cuts.dedup();
            let mut t = 0;
            for pair in cuts.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                while t < spans.len() && spans[t].end <= a {
                    t += 1;
                }
                let class = spans
                    .get(t)
                    .filter(|s| s.start <= a && b <= s.end)
                    .map(|s| s.kind.class());
                let mut classes = String::new();
                if let Some(class) = class {
                    classes.push_str(class);
                }
                for o in here {
                    if o.start <= a && b <= o.end && !classes.split(' ').any(|c| c == o.class) {
                        if !classes.is_empty() {
                            classes.push(' ');
                        }
                        classes.push_str(o.class);
                    }
                }
                if classes.is_empty() {
                    escape_into(&mut html, &text[a..b]);
                } else {
                    html.push_str("<span class=\"");
                    html.push_str(&classes);
                    html.push_str("\">");
                    escape_into(&mut html, &text[a..b]);
                    html.push_str("</span>");
                }
            }
        }
        lines.push(html);
        if line_end >= text.len() {
            break;
        }
        line_start = line_end + 1;
    }
    lines
}

fn escape_into(out: &mut String, text: &str) {
    let mut from = 0;
    for (i, b) in text.bytes().enumerate() {
        let entity = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            _ => continue,
        };
        out.push_str(&text[from..i]);
        out.push_str(entity);
        from = i + 1;
    }
    out.push_str(&text[from..]);
}

/// Everything the editor draws for `text` with the caret at byte `caret`: the lines' HTML with
/// the analysis errors underlined and the tags that match the caret's tag marked, the errors
/// (message, UTF-16 span, 1-based line and column) and the lexed text.
pub struct Highlighted {
    pub lines: Vec<String>,
    pub errors: Vec<LocatedError>,
    pub lexed: Lexed,
}

/// A template error with its place, for the list under the editor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocatedError {
    pub message: String,
    /// UTF-16 offsets (what the textarea counts).
    pub span: Span,
    pub line: usize,
    pub column: usize,
}

/// Lexes and analyzes `text` and renders its lines (see [`Highlighted`]).
pub fn highlight(text: &str, caret: Option<usize>) -> Highlighted {
    let lexed = lex(text);
    let analysis = super::analyze_text(text);
    let mut overlays = Vec::new();
    let mut errors = Vec::new();
    for error in analysis.errors {
        let span = error.span.unwrap_or(Span { start: 0, end: 0 });
        let (start, mut end) = span_bytes(text, span);
        if end <= start {
            end = (start + 1).min(text.len());
        }
        overlays.push(Overlay {
            start,
            end,
            class: "err",
        });
        let (line, column) = super::line_column(text, span.start);
        errors.push(LocatedError {
            message: error.message,
            span,
            line,
            column,
        });
    }
    if let Some(caret) = caret {
        for (start, end) in matching(&lexed, caret) {
            overlays.push(Overlay {
                start,
                end,
                class: "match",
            });
        }
    }
    Highlighted {
        lines: html_lines(text, &lexed.tokens, &overlays),
        errors,
        lexed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kinds(text: &str) -> Vec<(&str, TokenKind)> {
        lex(text)
            .tokens
            .iter()
            .map(|t| (&text[t.start..t.end], t.kind))
            .collect()
    }

    #[test]
    fn lexes_outputs_statements_and_mistakes() {
        use TokenKind::*;
        assert_eq!(
            kinds("Hi {{ runtime.cwd | upper | shout }}!"),
            vec![
                ("{{", Delim),
                ("runtime", Root),
                (".", Punct),
                ("cwd", Path),
                ("|", Punct),
                ("upper", Filter),
                ("|", Punct),
                ("shout", UnknownFilter),
                ("}}", Delim),
            ]
        );
        assert_eq!(
            kinds("{% if parameters.mode == \"x\" %}a{% else %}b{% endif %}"),
            vec![
                ("{%", Delim),
                ("if", Keyword),
                ("parameters", Root),
                (".", Punct),
                ("mode", Path),
                ("==", Operator),
                ("\"x\"", Str),
                ("%}", Delim),
                ("{%", Delim),
                ("else", Keyword),
                ("%}", Delim),
                ("{%", Delim),
                ("endif", Keyword),
                ("%}", Delim),
            ]
        );
        assert_eq!(
            kinds("{% for x %}{%}{{ a..b }}{{ 9x }}"),
            vec![
                ("{%", Delim),
                ("for x", Invalid),
                ("%}", Delim),
                ("{%}", Invalid),
                ("{{", Delim),
                ("a", Path),
                (".", Punct),
                (".", Invalid),
                ("b", Path),
                ("}}", Delim),
                ("{{", Delim),
                ("9x", Invalid),
                ("}}", Delim),
            ]
        );
        // Unclosed: lexed to the end of its line only.
        let text = "{{ runtime.tool.read \nNext line";
        let lexed = lex(text);
        assert_eq!(lexed.tags.len(), 1);
        assert_eq!(lexed.tags[0].end, text.find('\n').unwrap());
        assert!(!lexed.tags[0].closed);
    }

    #[test]
    fn html_lines_escape_and_keep_every_byte() {
        let text = "<b> & {{ x | nope }}\n\n{% if a %}\u{e9}{% endif %}";
        let h = highlight(text, None);
        assert_eq!(
            h.lines,
            vec![
                "&lt;b&gt; &amp; <span class=\"tk-delim err\">{{</span><span class=\"err\"> </span><span class=\"tk-path err\">x</span><span class=\"err\"> </span><span class=\"tk-punct err\">|</span><span class=\"err\"> </span><span class=\"tk-badfilter err\">nope</span><span class=\"err\"> </span><span class=\"tk-delim err\">}}</span>".to_string(),
                String::new(),
                "<span class=\"tk-delim\">{%</span> <span class=\"tk-kw\">if</span> <span class=\"tk-path\">a</span> <span class=\"tk-delim\">%}</span>\u{e9}<span class=\"tk-delim\">{%</span> <span class=\"tk-kw\">endif</span> <span class=\"tk-delim\">%}</span>".to_string(),
            ]
        );
        assert_eq!(
            h.errors,
            vec![LocatedError {
                message: "Unknown forge-v1 filter: nope".into(),
                span: Span { start: 6, end: 20 },
                line: 1,
                column: 7
            }]
        );
    }

    #[test]
    fn unclosed_if_is_underlined_on_its_tag() {
        let text = "A\n{% if parameters.strict %}Be strict.\nMore";
        let h = highlight(text, None);
        assert_eq!(h.errors.len(), 1);
        assert_eq!(
            h.errors[0].message,
            "forge-v1 parse error: Missing {% endif %}"
        );
        assert_eq!((h.errors[0].line, h.errors[0].column), (2, 1));
        assert!(h.lines[1].starts_with("<span class=\"tk-delim err\">{%</span>"));
        assert!(!h.lines[2].contains("err"));
    }

    #[test]
    fn matching_finds_delimiters_and_if_groups() {
        let text = "{% if a %}xyz{% else %}{{ b }}{% endif %}";
        let lexed = lex(text);
        let at_else = text.find("else").unwrap();
        let group = matching(&lexed, at_else);
        let pieces: Vec<&str> = group.iter().map(|&(a, b)| &text[a..b]).collect();
        assert_eq!(pieces, vec!["{% if a %}", "{% else %}", "{% endif %}"]);
        let at_b = text.find("b }}").unwrap();
        let pieces: Vec<&str> = matching(&lexed, at_b)
            .iter()
            .map(|&(a, b)| &text[a..b])
            .collect();
        assert_eq!(pieces, vec!["{{", "}}"]);
        // Right after a tag counts; plain text does not.
        assert_eq!(matching(&lexed, text.len()).len(), 3);
        assert!(matching(&lexed, text.find('x').unwrap() + 1).is_empty());
        // Nested: the inner group only.
        let text = "{% if a %}{% if b %}y{% endif %}{% endif %}";
        let lexed = lex(text);
        let inner = text.find("if b").unwrap();
        let pieces: Vec<&str> = matching(&lexed, inner)
            .iter()
            .map(|&(a, b)| &text[a..b])
            .collect();
        assert_eq!(pieces, vec!["{% if b %}", "{% endif %}"]);
    }

    fn scope() -> Scope {
        Scope::new(
            json!({"cwd": "/work", "date": "2026-12-02", "tool": {"read": true, "bash": true}, "selectedToolsText": "read, bash"}),
            json!({"strict": true, "tone": "dry"}),
        )
    }

    fn labels(c: &Option<Completion>) -> Vec<String> {
        c.as_ref()
            .map(|c| c.items.iter().map(|i| i.label.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn parameters_without_any_say_so_and_insert_nothing() {
        let s = Scope::new(json!({"cwd": "/work"}), json!({}));
        let text = "{{ parameters. }}";
        let caret = text.find(". ").unwrap() + 1;
        let got = complete(text, &lex(text), caret, &s).expect("a hint, not nothing");
        assert_eq!(
            got.items,
            vec![CompletionItem {
                label: "No parameters yet".into(),
                insert: String::new(),
                detail: "add them in the Stack tab (Parameters)".into(),
                kind: ItemKind::Hint,
            }]
        );
        // With parameters there is no hint.
        let labels_with = labels(&complete(text, &lex(text), caret, &scope()));
        assert_eq!(labels_with, vec!["strict", "tone"]);
    }

    #[test]
    fn completes_paths_filters_and_tags() {
        let s = scope();
        let at = |text: &str| {
            let caret = text.find('^').unwrap();
            let text = text.replace('^', "");
            let lexed = lex(&text);
            complete(&text, &lexed, caret, &s)
        };
        assert_eq!(
            labels(&at("{{ runtime.^")),
            vec!["cwd", "date", "tool", "selectedToolsText"]
        );
        assert_eq!(labels(&at("{{ runtime.tool.r^ }}")), vec!["read"]);
        assert_eq!(labels(&at("{{ parameters.^ }}")), vec!["strict", "tone"]);
        assert_eq!(labels(&at("{{ cwd | u^ }}")), vec!["upper"]);
        assert_eq!(labels(&at("{% ^")), vec!["if", "else", "endif"]);
        assert_eq!(labels(&at("{% e^ %}")), vec!["else", "endif"]);
        assert_eq!(labels(&at("{% if parameters.s^ %}")), vec!["strict"]);
        assert_eq!(
            labels(&at("{{ t^")),
            vec!["tone", "time", "tools"],
            "bare names: parameters, then aliases"
        );
        assert_eq!(at("{% if a == \"^\" %}"), None);
        assert_eq!(at("plain ^ text"), None);
        assert_eq!(at("{{ extensions.^ }}"), None);
        // The range covers the whole word around the caret.
        let c = at("{{ runtime.cw^d }}").unwrap();
        assert_eq!((c.from, c.to), (11, 14));
        assert_eq!(c.items[0].detail, "\"/work\"");
    }

    #[test]
    fn hover_shows_the_value_of_the_path_so_far() {
        let s = scope();
        let text = "x {{ runtime.tool.read }} {{ tone }} {{ parameters.nope }}";
        let lexed = lex(text);
        let h = hover(text, &lexed, text.find("read").unwrap() + 1, &s).unwrap();
        assert_eq!(h.describe(), "runtime.tool.read = true");
        let h = hover(text, &lexed, text.find("tool").unwrap(), &s).unwrap();
        assert_eq!(h.describe(), "runtime.tool = {\"read\":true,\"bash\":true}");
        let h = hover(text, &lexed, text.find("tone").unwrap(), &s).unwrap();
        assert_eq!(h.describe(), "tone = dry");
        let h = hover(text, &lexed, text.find("nope").unwrap(), &s).unwrap();
        assert_eq!(
            h.describe(),
            "parameters.nope is undefined here: it renders as nothing"
        );
        assert_eq!(hover(text, &lexed, 0, &s), None);
    }

    #[test]
    fn offsets_convert_between_utf16_and_bytes() {
        let text = "a\u{1f600}b\u{e9}";
        assert_eq!(byte_offset(text, 3), 5);
        assert_eq!(utf16_offset(text, 5), 3);
        assert_eq!(byte_offset(text, 99), text.len());
        assert_eq!(span_bytes(text, Span { start: 1, end: 4 }), (1, 6));
    }
}
