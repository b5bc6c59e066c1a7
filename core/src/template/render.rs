//! forge-v1 evaluation: path lookup, filters, predicates, limits.

use serde_json::Value;

use super::error::{RenderError, RenderErrorKind};
use super::macros::MacroContext;
use super::parse::{Node, Predicate, Template};
use super::scope::{Scope, MAX_NESTING};
use crate::js::{js_string, js_trim};
use crate::json::{to_compact, utf16_len, write_string};

/// The filters a template may use.
pub const FILTERS: [&str; 5] = ["trim", "upper", "lower", "json", "xml"];

/// Bare names that stand for runtime fields when no parameter has that name.
fn runtime_alias(name: &str) -> Option<&'static str> {
    Some(match name {
        "cwd" => "cwd",
        "date" => "date",
        "time" => "time",
        "lastUserMessage" => "lastUserMessage",
        "activeModel" => "activeModel",
        "selectedTools" | "tools" => "selectedToolsText",
        _ => return None,
    })
}

/// Rendered text of a value: undefined → `""`, a string → itself, anything else → JSON text
/// (JavaScript property order: integer-like keys first).
pub fn value_to_string(value: Option<&Value>) -> String {
    match value {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => js_json(other),
    }
}

/// `JSON.stringify(value)` of the value as a JavaScript object holds it: integer-like keys
/// (array indexes, `"0"` to `"4294967294"` without leading zeros) come first in ascending numeric
/// order, then the other keys in insertion order, at every level.
pub fn js_json(value: &Value) -> String {
    let mut out = String::new();
    write_js_json(&mut out, value);
    out
}

fn write_js_json(out: &mut String, value: &Value) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_js_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut indexes: Vec<(u32, &String, &Value)> = map
                .iter()
                .filter_map(|(k, v)| array_index(k).map(|n| (n, k, v)))
                .collect();
            indexes.sort_by_key(|(n, _, _)| *n);
            let named = map.iter().filter(|(k, _)| array_index(k).is_none());
            out.push('{');
            let entries = indexes.into_iter().map(|(_, k, v)| (k, v)).chain(named);
            for (i, (key, item)) in entries.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_js_json(out, item);
            }
            out.push('}');
        }
        scalar => out.push_str(&to_compact(scalar)),
    }
}

/// The key's value when it is an ECMAScript array index: the canonical decimal text of an
/// integer from 0 to 2^32 − 2.
fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    u32::try_from(n).ok().filter(|&n| n != u32::MAX)
}

/// Template truthiness: null/undefined false, booleans themselves, strings non-empty, numbers
/// non-zero, arrays and objects non-empty.
pub fn is_truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
    }
}

/// Escapes `& < > " '` as `&amp; &lt; &gt; &quot; &apos;`.
pub fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn apply_filter(name: &str, value: Value) -> Result<Value, RenderError> {
    Ok(Value::String(match name {
        "trim" => js_trim(&js_string(&value)).to_string(),
        "upper" => js_string(&value).to_uppercase(),
        "lower" => js_string(&value).to_lowercase(),
        "json" => js_json(&value),
        "xml" => escape_xml(&js_string(&value)),
        other => {
            return Err(RenderError::new(
                RenderErrorKind::Filter,
                format!("Unknown forge-v1 filter: {other}"),
            ))
        }
    }))
}

/// Walks own keys of non-array objects.
fn walk<'v>(mut cursor: &'v Value, rest: &[String]) -> Option<&'v Value> {
    for segment in rest {
        cursor = cursor.as_object()?.get(segment)?;
    }
    Some(cursor)
}

/// The value `path` has in `scope` without running macros: `runtime.*` and `parameters.*` walk
/// their objects, a bare name is a parameter or a runtime alias; `extensions.*` (and any other
/// unrooted path) is `None`, since only the compiler resolves macros. Used by the editor to show
/// a path's current value.
pub fn lookup_plain(scope: &Scope, path: &[String]) -> Option<Value> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "runtime" => return walk(&scope.runtime, rest).cloned(),
        "parameters" => return walk(&scope.parameters, rest).cloned(),
        "extensions" => return None,
        _ => {}
    }
    if !rest.is_empty() {
        return None;
    }
    if let Some(value) = scope.parameters.as_object().and_then(|p| p.get(first)) {
        return Some(value.clone());
    }
    let field = runtime_alias(first)?;
    scope.runtime.as_object()?.get(field).cloned()
}

/// The undefined-path error. A bare runtime alias reports the runtime path it stands for (it
/// is only undefined when the scope lacks that runtime field).
fn undefined(path: &[String]) -> RenderError {
    let joined = match path {
        [name] if !is_root(name) => match runtime_alias(name) {
            Some(field) => format!("runtime.{field}"),
            None => name.clone(),
        },
        _ => path.join("."),
    };
    RenderError::new(
        RenderErrorKind::Undefined,
        format!("Undefined forge-v1 path: {{{{{joined}}}}}"),
    )
}

fn is_root(name: &str) -> bool {
    matches!(name, "runtime" | "parameters" | "extensions")
}

struct Renderer<'a, 'm, 'r> {
    template: &'a Template,
    scope: &'a Scope,
    macros: &'m mut MacroContext<'r>,
    limit: usize,
    /// How many extensions were resolved when rendering started: `{{ extensions }}` and
    /// `extensions.a.b` see that snapshot.
    snapshot: usize,
}

impl Renderer<'_, '_, '_> {
    fn evaluate(
        &mut self,
        path: &[String],
        allow_undefined: bool,
    ) -> Result<Option<Value>, RenderError> {
        let value = self.lookup(path)?;
        if value.is_none() && !allow_undefined {
            return Err(undefined(path));
        }
        Ok(value)
    }

    fn lookup(&mut self, path: &[String]) -> Result<Option<Value>, RenderError> {
        let Some(first) = path.first() else {
            return Ok(None);
        };
        let scope = self.scope;
        if first == "extensions" && path.len() == 2 {
            return Ok(self.macros.lookup(&path[1], scope)?.map(Value::String));
        }
        match first.as_str() {
            "runtime" => return Ok(walk(&scope.runtime, &path[1..]).cloned()),
            "parameters" => return Ok(walk(&scope.parameters, &path[1..]).cloned()),
            "extensions" => {
                let snapshot = self.macros.snapshot(self.snapshot);
                return Ok(walk(&snapshot, &path[1..]).cloned());
            }
            _ => {}
        }
        if path.len() != 1 {
            return Ok(None);
        }
        if let Some(value) = scope.parameters.as_object().and_then(|p| p.get(first)) {
            return Ok(Some(value.clone()));
        }
        if let Some(field) = runtime_alias(first) {
            return Ok(scope
                .runtime
                .as_object()
                .and_then(|r| r.get(field))
                .cloned());
        }
        Ok(self.macros.lookup(first, scope)?.map(Value::String))
    }

    fn predicate(&mut self, predicate: &Predicate) -> Result<bool, RenderError> {
        match predicate {
            Predicate::Truthy(path) => {
                let value = self.lookup(path)?;
                Ok(is_truthy(value.as_ref()))
            }
            Predicate::Equals(path, expected) => {
                let value = self.evaluate(path, false)?;
                Ok(value_to_string(value.as_ref()) == *expected)
            }
            Predicate::NotEquals(path, expected) => {
                let value = self.evaluate(path, false)?;
                Ok(value_to_string(value.as_ref()) != *expected)
            }
        }
    }

    /// Renders one node list into `out`; the limit applies to what this list produced (as in
    /// the original, where every list accumulated its own string).
    fn list(&mut self, list: usize, depth: usize, out: &mut String) -> Result<usize, RenderError> {
        if depth > MAX_NESTING {
            return Err(RenderError::new(
                RenderErrorKind::Recursion,
                format!("forge-v1 template nesting exceeds {MAX_NESTING} levels."),
            ));
        }
        let template = self.template;
        let mut length = 0;
        for node in &template.lists[list] {
            match node {
                Node::Text(text) => {
                    out.push_str(text);
                    length += utf16_len(text);
                }
                Node::Output { path, filters, at } => {
                    let mut value = self
                        .evaluate(path, false)
                        .map_err(|e| e.within(*at))?
                        .unwrap_or(Value::Null);
                    for filter in filters {
                        value = apply_filter(filter, value).map_err(|e| e.within(*at))?;
                    }
                    let text = value_to_string(Some(&value));
                    out.push_str(&text);
                    length += utf16_len(&text);
                }
                Node::If {
                    predicate,
                    then_body,
                    else_body,
                    at,
                } => {
                    let branch = if self.predicate(predicate).map_err(|e| e.within(*at))? {
                        Some(*then_body)
                    } else {
                        *else_body
                    };
                    if let Some(branch) = branch {
                        length += self
                            .list(branch, depth + 1, out)
                            .map_err(|e| e.within(*at))?;
                    }
                }
            }
            if length > self.limit {
                return Err(RenderError::new(
                    RenderErrorKind::OutputLimit,
                    format!(
                        "forge-v1 template output exceeds {} characters.",
                        self.limit
                    ),
                ));
            }
        }
        Ok(length)
    }
}

pub(crate) fn render_template(
    template: &Template,
    scope: &Scope,
    macros: &mut MacroContext,
    limit: usize,
) -> Result<String, RenderError> {
    let snapshot = macros.resolved_len();
    let mut renderer = Renderer {
        template,
        scope,
        macros,
        limit,
        snapshot,
    };
    let mut out = String::new();
    renderer.list(0, 0, &mut out)?;
    Ok(out)
}
