//! forge-v1 lexer and parser.
//!
//! The parser is iterative (an explicit stack of open conditionals), so template text of any
//! nesting depth parses without growing the Rust call stack. The tree is stored flat: every body
//! is one entry of [`Template::lists`], and an `if` node refers to its bodies by index, so dropping
//! or walking a deep template never recurses either.

use crate::js::js_trim;

/// A parsed forge-v1 template. Build one with [`parse`](super::parse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// Node lists; index 0 is the top level, the others are `if` bodies.
    pub(crate) lists: Vec<Vec<Node>>,
}

/// One template node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    /// Literal text, whitespace kept.
    Text(String),
    /// `{{ path | filter | … }}`; `at` is the tag's byte range.
    Output {
        path: Vec<String>,
        filters: Vec<String>,
        at: ByteRange,
    },
    /// `{% if … %}…{% else %}…{% endif %}`; bodies are indices into [`Template::lists`]; `at` is
    /// the byte range of the `{% if … %}` tag.
    If {
        predicate: Predicate,
        then_body: usize,
        else_body: Option<usize>,
        at: ByteRange,
    },
}

/// A byte range of the template text, `start..end`.
pub(crate) type ByteRange = (usize, usize);

/// Why text is not a template: the spec message and the byte range it is about (the tag, or from
/// an unclosed opener to the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParseFailure {
    pub(crate) message: String,
    pub(crate) at: ByteRange,
}

fn fail<T>(message: impl Into<String>, at: ByteRange) -> Result<T, ParseFailure> {
    Err(ParseFailure {
        message: message.into(),
        at,
    })
}

/// The condition of an `if` tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Predicate {
    Truthy(Vec<String>),
    Equals(Vec<String>, String),
    NotEquals(Vec<String>, String),
}

impl Predicate {
    pub(crate) fn path(&self) -> &[String] {
        match self {
            Predicate::Truthy(p) | Predicate::Equals(p, _) | Predicate::NotEquals(p, _) => p,
        }
    }
}

impl Template {
    /// Visits every node in document order: a node, then its then-body, then its else-body, then
    /// the next sibling. Iterative, whatever the nesting depth.
    pub(crate) fn visit(&self, mut f: impl FnMut(&Node)) {
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        while let Some((list, index)) = stack.pop() {
            let Some(node) = self.lists[list].get(index) else {
                continue;
            };
            stack.push((list, index + 1));
            f(node);
            if let Node::If {
                then_body,
                else_body,
                ..
            } = node
            {
                if let Some(else_body) = else_body {
                    stack.push((*else_body, 0));
                }
                stack.push((*then_body, 0));
            }
        }
    }
}

/// True when `segment` matches `^[A-Za-z_][A-Za-z0-9_-]*$`.
pub(crate) fn is_path_segment(segment: &str) -> bool {
    let mut bytes = segment.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Splits a path on `.`, trims each segment and checks the segment grammar.
pub(crate) fn parse_path(raw: &str) -> Option<Vec<String>> {
    raw.split('.')
        .map(|segment| {
            let segment = js_trim(segment);
            is_path_segment(segment).then(|| segment.to_string())
        })
        .collect()
}

/// Remembers where the next occurrence of a needle is, so scanning a long template with many
/// tags stays linear (the original searched from scratch for both openers at every tag).
pub(crate) struct Finder {
    needle: &'static str,
    searched_from: usize,
    found: Option<usize>,
    valid: bool,
}

impl Finder {
    pub(crate) fn new(needle: &'static str) -> Self {
        Finder {
            needle,
            searched_from: 0,
            found: None,
            valid: false,
        }
    }

    /// The first occurrence at or after `at` (a char boundary).
    pub(crate) fn find(&mut self, source: &str, at: usize) -> Option<usize> {
        let reusable = self.valid
            && self.searched_from <= at
            && self.found.is_none_or(|position| position >= at);
        if !reusable {
            self.searched_from = at;
            self.found = source[at..].find(self.needle).map(|p| p + at);
            self.valid = true;
        }
        self.found
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Top,
    Then,
    Else,
}

struct Frame {
    list: usize,
    kind: FrameKind,
    /// The `if` node that owns this body: (list, index).
    owner: Option<(usize, usize)>,
    /// The byte range of the `{% if %}` tag that opened this body.
    opened_at: ByteRange,
}

pub(crate) fn parse_template(source: &str) -> Result<Template, ParseFailure> {
    let mut lists: Vec<Vec<Node>> = vec![Vec::new()];
    let mut frames = vec![Frame {
        list: 0,
        kind: FrameKind::Top,
        owner: None,
        opened_at: (0, 0),
    }];
    let mut outputs = Finder::new("{{");
    let mut statements = Finder::new("{%");
    let mut output_ends = Finder::new("}}");
    let mut statement_ends = Finder::new("%}");
    let mut index = 0;

    while index < source.len() {
        let current = frames.last().map_or(0, |f| f.list);
        let next_output = outputs.find(source, index);
        let next_statement = statements.find(source, index);
        let (start, is_output) = match (next_output, next_statement) {
            (None, None) => {
                lists[current].push(Node::Text(source[index..].to_string()));
                break;
            }
            (Some(o), None) => (o, true),
            (None, Some(s)) => (s, false),
            (Some(o), Some(s)) => {
                if o <= s {
                    (o, true)
                } else {
                    (s, false)
                }
            }
        };
        if start > index {
            lists[current].push(Node::Text(source[index..start].to_string()));
        }

        if is_output {
            let Some(end) = output_ends.find(source, start) else {
                return fail("Unclosed output tag {{", (start, source.len()));
            };
            let expression = js_trim(&source[start + 2..end]);
            index = end + 2;
            let at = (start, index);
            let (path, filters) =
                parse_output(expression).map_err(|message| ParseFailure { message, at })?;
            lists[current].push(Node::Output { path, filters, at });
            continue;
        }

        // The close is searched from the opener itself, so `{%}` closes on its own `%`.
        let Some(end) = statement_ends.find(source, start) else {
            return fail("Unclosed forge-v1 tag", (start, source.len()));
        };
        let raw = if end >= start + 2 {
            js_trim(&source[start + 2..end])
        } else {
            ""
        };
        index = end + 2;
        let at = (start, index);

        if raw == "else" || raw == "endif" {
            let frame = frames.last_mut().expect("the top frame is never popped");
            match (frame.kind, raw) {
                (FrameKind::Then, "else") => {
                    let else_list = lists.len();
                    lists.push(Vec::new());
                    let (owner_list, owner_index) = frame.owner.expect("an if body has an owner");
                    if let Node::If { else_body, .. } = &mut lists[owner_list][owner_index] {
                        *else_body = Some(else_list);
                    }
                    frame.list = else_list;
                    frame.kind = FrameKind::Else;
                }
                (FrameKind::Then, "endif") | (FrameKind::Else, "endif") => {
                    frames.pop();
                }
                _ => return fail(format!("Unexpected {{% {raw} %}}"), at),
            }
            continue;
        }

        if let Some(rest) = raw.strip_prefix("if ") {
            let predicate =
                parse_predicate(js_trim(rest)).map_err(|message| ParseFailure { message, at })?;
            let then_list = lists.len();
            lists.push(Vec::new());
            let owner = (current, lists[current].len());
            lists[current].push(Node::If {
                predicate,
                then_body: then_list,
                else_body: None,
                at,
            });
            frames.push(Frame {
                list: then_list,
                kind: FrameKind::Then,
                owner: Some(owner),
                opened_at: at,
            });
            continue;
        }

        return fail(format!("Unsupported forge-v1 tag: {{% {raw} %}}"), at);
    }

    // An unclosed body points at the `{% if %}` that opened it.
    match frames.last() {
        // The original said "Missing {% else %}" here, but an `if` needs no `else`: what is
        // missing is the `endif` (prompt-stacks spec §8, item 5).
        Some(frame) if frame.kind == FrameKind::Then => {
            fail("Missing {% endif %}", frame.opened_at)
        }
        Some(frame) if frame.kind == FrameKind::Else => {
            fail("Missing {% endif %}", frame.opened_at)
        }
        _ => Ok(Template { lists }),
    }
}

/// The path and filters of an output tag's expression.
fn parse_output(expression: &str) -> Result<(Vec<String>, Vec<String>), String> {
    if expression.is_empty() {
        return Err("Empty output tag {{}}".to_string());
    }
    let mut parts = expression.split('|').map(js_trim);
    let head = parts.next().unwrap_or("");
    let Some(path) = parse_path(head) else {
        return Err(format!("Invalid path: {head}"));
    };
    let filters = parts
        .filter(|part| !part.is_empty())
        .map(str::to_string)
        .collect();
    Ok((path, filters))
}

fn parse_predicate(raw: &str) -> Result<Predicate, String> {
    if let Some((left, expected)) = comparison(raw, "==") {
        let path = parse_path(left).ok_or_else(|| format!("Invalid predicate path: {left}"))?;
        return Ok(Predicate::Equals(path, expected));
    }
    if let Some((left, expected)) = comparison(raw, "!=") {
        let path = parse_path(left).ok_or_else(|| format!("Invalid predicate path: {left}"))?;
        return Ok(Predicate::NotEquals(path, expected));
    }
    if raw.is_empty() {
        // Unreachable from `parse` (the tag body is trimmed before `if ` is matched); kept so the
        // function is total.
        return Err("Missing predicate in {% if %}".to_string());
    }
    parse_path(raw)
        .map(Predicate::Truthy)
        .ok_or_else(|| format!("Invalid predicate path: {raw}"))
}

/// `left <op> "literal"` with the operator at an index > 0 and a quoted right side.
fn comparison<'a>(raw: &'a str, op: &str) -> Option<(&'a str, String)> {
    let index = raw.find(op)?;
    if index == 0 {
        return None;
    }
    let left = js_trim(&raw[..index]);
    let right = js_trim(&raw[index + op.len()..]);
    if right.is_empty() {
        return None;
    }
    Some((left, quoted_literal(right)?))
}

/// A literal wrapped in matching `"` or `'`; unescapes `\"`, then `\'`, then `\\`, each pass over
/// the result of the previous one.
pub(crate) fn quoted_literal(value: &str) -> Option<String> {
    let quote = value.chars().next()?;
    if quote != '"' && quote != '\'' {
        return None;
    }
    // At least two characters, the last one the same quote.
    if value.len() < 2 || !value.ends_with(quote) {
        return None;
    }
    let inner = &value[1..value.len() - 1];
    Some(
        inner
            .replace("\\\"", "\"")
            .replace("\\'", "'")
            .replace("\\\\", "\\"),
    )
}
