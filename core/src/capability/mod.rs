//! Capabilities (spec B1, B2): reusable text + tool patches, plus Preset bindings ([`binding`]),
//! effective capabilities after overrides and activation snapshots ([`snapshot`]).
//!
//! Like profiles, a capability file is parsed in two passes: a *shape* pass over the raw JSON
//! (unknown keys, wrong types, invalid tool names, which are dropped from the normalized lists)
//! and a *semantic* pass over the normalized [`Capability`] ([`Capability::validate`]: id grammar,
//! length limits, the "content or a tool effect" rule). Effective capabilities and snapshots are
//! re-checked with the semantic pass.
//!
//! Pure code: no filesystem, no clock, no panics on input. Lengths are UTF-16 code units.

use serde_json::Value;

use crate::canonical::sha256_hex;
use crate::diag::{dedupe, field_error, is_usable, Diagnostic};
use crate::id::{fallback_id, is_valid_id, ID_RULE};
use crate::json::{object, parse_bytes, to_compact, to_pretty, type_name, utf16_len};
use crate::shape::{check_header, optional_string, required_id, unsupported_keys};

pub mod agent;
pub mod binding;
pub mod delivery;
pub mod events;
pub mod ops;
pub mod snapshot;
pub mod tools;
pub mod view;

pub use binding::{
    effective_capability, effective_from_parsed, parse_bindings, parse_bindings_indexed, Binding,
    ContentOverride, Overrides, ToolOverride,
};
pub use snapshot::{BindingSource, CapabilitySnapshot, SnapshotSource};

// The tool-name grammar lives in [`crate::id`] and JavaScript white space in [`crate::js`]; they
// stay reachable here for existing users of this module.
pub use crate::id::{is_valid_tool_name, tool_name_problem, MAX_TOOL_NAME_LENGTH};
pub use crate::js::{is_js_whitespace, js_trim};

/// `type` of every capability definition.
pub const CAPABILITY_TYPE: &str = "pi-forge.capability";
/// The only supported `schemaVersion`.
pub const CAPABILITY_SCHEMA_VERSION: u64 = 1;
/// Longest `content` / `overrides.content` / `overrides.appendContent` (UTF-16 units).
pub const MAX_CONTENT_LENGTH: usize = 100_000;
/// Longest capability `name` (UTF-16 units).
pub const MAX_CAPABILITY_NAME_LENGTH: usize = 1_000;
/// Most names in one `add` or `remove` list.
pub const MAX_TOOL_ARRAY_LENGTH: usize = 256;
/// Largest capability file (bytes); larger files become faults.
pub const MAX_CAPABILITY_SOURCE_SIZE: usize = 1_048_576;
/// Most bindings on one Preset.
pub const MAX_CAPABILITY_BINDINGS: usize = 256;
/// Longest opaque event / activation id.
pub const MAX_OPAQUE_ID_LENGTH: usize = 128;

/// Allowed top-level keys, in schema (serialization) order.
pub const CAPABILITY_FIELDS: [&str; 7] = [
    "schemaVersion",
    "type",
    "id",
    "name",
    "description",
    "content",
    "tools",
];
/// Allowed keys of `tools`.
pub const TOOL_PATCH_FIELDS: [&str; 2] = ["add", "remove"];

fn quoted(text: &str) -> String {
    to_compact(&Value::String(text.to_string()))
}

/// A tool patch: names to add to and remove from the active tool set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ToolPatch {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

impl ToolPatch {
    pub fn new<A, R>(add: A, remove: R) -> Self
    where
        A: IntoIterator,
        A::Item: Into<String>,
        R: IntoIterator,
        R::Item: Into<String>,
    {
        ToolPatch {
            add: add.into_iter().map(Into::into).collect(),
            remove: remove.into_iter().map(Into::into).collect(),
        }
    }

    /// `{add, remove}`.
    pub fn to_value(&self) -> Value {
        let list =
            |names: &[String]| Value::Array(names.iter().cloned().map(Value::String).collect());
        object([
            ("add", Some(list(&self.add))),
            ("remove", Some(list(&self.remove))),
        ])
    }

    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty()
    }

    /// B1 checks on both lists (length and names), with fields `<prefix>.add[i]` etc.
    pub fn validate(&self, prefix: &str) -> Vec<Diagnostic> {
        let mut d = Vec::new();
        for (list_name, list) in [("add", &self.add), ("remove", &self.remove)] {
            let field = format!("{prefix}.{list_name}");
            check_list_length(&field, list.len(), &mut d);
            for (i, name) in list.iter().enumerate() {
                if let Some(problem) = tool_name_problem(name) {
                    d.push(tool_name_error(&field, i, name, problem));
                }
            }
        }
        d
    }
}

fn check_list_length(field: &str, len: usize, d: &mut Vec<Diagnostic>) {
    if len > MAX_TOOL_ARRAY_LENGTH {
        d.push(field_error(
            field,
            format!("{field} must list at most {MAX_TOOL_ARRAY_LENGTH} tool names (got {len})."),
        ));
    }
}

fn tool_name_error(list_field: &str, index: usize, name: &str, problem: &str) -> Diagnostic {
    field_error(
        &format!("{list_field}[{index}]"),
        format!("Tool name {} in {list_field} {problem}.", quoted(name)),
    )
}

/// Shape pass over a raw tool-name list: non-arrays are reported, invalid entries are reported and
/// dropped. `field` is the list's path (`tools.add`, `capabilities[0].overrides.tools.remove`).
pub(crate) fn parse_tool_list(value: &Value, field: &str, d: &mut Vec<Diagnostic>) -> Vec<String> {
    let Value::Array(items) = value else {
        d.push(field_error(
            field,
            format!(
                "{field} must be an array of tool names, got {}.",
                type_name(value)
            ),
        ));
        return Vec::new();
    };
    check_list_length(field, items.len(), d);
    let mut names = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(name) => match tool_name_problem(name) {
                None => names.push(name.clone()),
                Some(problem) => d.push(tool_name_error(field, i, name, problem)),
            },
            other => d.push(field_error(
                &format!("{field}[{i}]"),
                format!(
                    "Tool names in {field} must be strings, got {}.",
                    type_name(other)
                ),
            )),
        }
    }
    names
}

/// Checks an optional `name` against [`MAX_CAPABILITY_NAME_LENGTH`]; `what` starts the message
/// (`Capability`, `Snapshot`).
pub(crate) fn check_name_length(what: &str, name: Option<&str>, d: &mut Vec<Diagnostic>) {
    let Some(name) = name else {
        return;
    };
    let len = utf16_len(name);
    if len > MAX_CAPABILITY_NAME_LENGTH {
        d.push(field_error(
            "name",
            format!(
                "{what} name must be at most {MAX_CAPABILITY_NAME_LENGTH} characters (got {len})."
            ),
        ));
    }
}

/// Checks a content string's length; `field` names it in the message.
pub(crate) fn check_content_length(field: &str, text: &str, d: &mut Vec<Diagnostic>) {
    let len = utf16_len(text);
    if len > MAX_CONTENT_LENGTH {
        d.push(field_error(
            field,
            format!("{field} must be at most {MAX_CONTENT_LENGTH} characters (got {len})."),
        ));
    }
}

/// A normalized capability definition. `schemaVersion` and `type` are implied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capability {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    /// Literal text (no templates, not a path). May be empty when `tools` has an effect.
    pub content: String,
    pub tools: ToolPatch,
}

impl Capability {
    /// The placeholder a broken file turns into: basename id, empty content, no tools.
    pub fn fault(id: impl Into<String>) -> Self {
        Capability {
            id: id.into(),
            ..Capability::default()
        }
    }

    /// The normalized object in schema order; `tools` always has both lists.
    pub fn to_value(&self) -> Value {
        object([
            (
                "schemaVersion",
                Some(Value::from(CAPABILITY_SCHEMA_VERSION)),
            ),
            ("type", Some(Value::String(CAPABILITY_TYPE.to_string()))),
            ("id", Some(Value::String(self.id.clone()))),
            ("name", self.name.clone().map(Value::String)),
            ("description", self.description.clone().map(Value::String)),
            ("content", Some(Value::String(self.content.clone()))),
            ("tools", Some(self.tools.to_value())),
        ])
    }

    /// Semantic (B1) checks: id grammar, name and content lengths, tool lists, and the rule that a
    /// capability needs non-whitespace content or at least one tool effect.
    pub fn validate(&self) -> Vec<Diagnostic> {
        let mut d = Vec::new();
        if !is_valid_id(&self.id) {
            d.push(field_error("id", format!("Capability id {ID_RULE}.")));
        }
        check_name_length("Capability", self.name.as_deref(), &mut d);
        check_content_length("content", &self.content, &mut d);
        d.extend(self.tools.validate("tools"));
        d.extend(effect_rule(&self.content, &self.tools));
        dedupe(d)
    }
}

/// The "non-whitespace content or at least one tool effect" rule.
pub(crate) fn effect_rule(content: &str, tools: &ToolPatch) -> Option<Diagnostic> {
    if js_trim(content).is_empty() && tools.is_empty() {
        Some(field_error(
            "content",
            "Capability needs non-whitespace content or at least one tool in tools.add or tools.remove."
                .to_string(),
        ))
    } else {
        None
    }
}

/// Result of parsing one capability file.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedCapability {
    /// The normalized capability (a fault capability when the file could not be parsed).
    pub capability: Capability,
    /// The parsed JSON root, unknown fields included; `None` when the bytes were not JSON.
    pub raw: Option<Value>,
    pub diagnostics: Vec<Diagnostic>,
    /// Lowercase hex SHA-256 of the raw file bytes (no prefix).
    pub source_revision: String,
}

impl ParsedCapability {
    /// A fault: placeholder capability with one error and no raw value.
    pub fn fault(file_name: &str, message: impl Into<String>, source_revision: String) -> Self {
        ParsedCapability {
            capability: Capability::fault(fallback_id(file_name)),
            raw: None,
            diagnostics: vec![Diagnostic::error(message)],
            source_revision,
        }
    }

    /// True when no diagnostic is an error.
    pub fn usable(&self) -> bool {
        is_usable(&self.diagnostics)
    }
}

/// A fault for a file that could not be read at all (no bytes, so `source_revision` is empty).
pub fn fault_capability(file_name: &str, message: impl Into<String>) -> ParsedCapability {
    ParsedCapability::fault(file_name, message, String::new())
}

/// Parses a capability file's bytes; `sourceRevision` is the SHA-256 of exactly these bytes.
/// Files over 1 MiB, non-UTF-8 and malformed JSON become faults (id = basename).
pub fn parse_capability_bytes(bytes: &[u8], file_name: &str) -> ParsedCapability {
    let revision = sha256_hex(bytes);
    if bytes.len() > MAX_CAPABILITY_SOURCE_SIZE {
        return ParsedCapability::fault(
            file_name,
            format!(
                "Capability file is too large: {} bytes (the limit is {MAX_CAPABILITY_SOURCE_SIZE} bytes).",
                bytes.len()
            ),
            revision,
        );
    }
    match parse_bytes(bytes) {
        Ok(value) => parse_capability_value(value, file_name, revision),
        Err(err) => ParsedCapability {
            diagnostics: vec![Diagnostic::json_syntax(&err)],
            ..ParsedCapability::fault(file_name, "", revision)
        },
    }
}

/// Validates and normalizes a parsed capability value. `source_revision` is passed through.
pub fn parse_capability_value(
    value: Value,
    file_name: &str,
    source_revision: String,
) -> ParsedCapability {
    let Value::Object(map) = &value else {
        let message = format!(
            "Capability must be a JSON object, got {}.",
            type_name(&value)
        );
        let mut parsed = ParsedCapability::fault(file_name, message, source_revision);
        parsed.raw = Some(value);
        return parsed;
    };
    let mut d = Vec::new();
    unsupported_keys(map, &CAPABILITY_FIELDS, "capability", "", &mut d);
    check_header(
        map,
        "Capability",
        CAPABILITY_SCHEMA_VERSION,
        CAPABILITY_TYPE,
        &mut d,
    );
    let id = required_id(map, "Capability", &mut d)
        .unwrap_or_else(|| fallback_id(file_name))
        .to_string();
    let name = optional_string(map, "Capability", "name", &mut d);
    let description = optional_string(map, "Capability", "description", &mut d);
    let content = match map.get("content") {
        Some(Value::String(s)) => s.clone(),
        other => {
            let message = match other {
                None => "Capability content is required (a string; it may be empty when tools has an effect).".to_string(),
                Some(v) => format!("Capability content must be a string, got {}.", type_name(v)),
            };
            d.push(field_error("content", message));
            String::new()
        }
    };
    let tools = match map.get("tools") {
        None => ToolPatch::default(),
        Some(Value::Object(t)) => {
            unsupported_keys(t, &TOOL_PATCH_FIELDS, "capability", "tools.", &mut d);
            let mut list = |key: &str| match t.get(key) {
                None => Vec::new(),
                Some(v) => parse_tool_list(v, &format!("tools.{key}"), &mut d),
            };
            let add = list("add");
            let remove = list("remove");
            ToolPatch { add, remove }
        }
        Some(v) => {
            d.push(field_error(
                "tools",
                format!(
                    "Capability tools must be an object with optional add and remove arrays, got {}.",
                    type_name(v)
                ),
            ));
            ToolPatch::default()
        }
    };
    let capability = Capability {
        id,
        name,
        description,
        content,
        tools,
    };
    d.extend(capability.validate());
    ParsedCapability {
        capability,
        raw: Some(value),
        diagnostics: dedupe(d),
        source_revision,
    }
}

/// Writes a capability as stored on disk: 2-space JSON in schema order plus a newline.
pub fn serialize_capability(capability: &Capability) -> String {
    to_pretty(&capability.to_value())
}
