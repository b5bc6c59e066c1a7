//! Preset capability bindings (spec B4) and effective capabilities (B5).
//!
//! A Preset (prompt stack) may carry a top-level `capabilities` array of bindings:
//! `{ref, id?, modelCallable?, overrides?{content | appendContent, tools?{add?, remove?}}}`.
//! [`parse_bindings`] does the structural validation; resolving `ref` against the library is the
//! workspace loader's job (bare refs resolve in the Preset's own scope, see [`Binding::target`]).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{
    check_content_length, parse_tool_list, Capability, ParsedCapability, ToolPatch,
    MAX_CAPABILITY_BINDINGS,
};
use crate::diag::{dedupe, field_error, ok_unless_errors, Diagnostic};
use crate::id::{is_valid_id, parse_selector, ResourceKey, Scope, Selector, ID_RULE};
use crate::js::js_trim;
use crate::json::type_name;
use crate::shape::unsupported_keys;

/// Allowed keys of a binding.
pub const BINDING_FIELDS: [&str; 4] = ["ref", "id", "modelCallable", "overrides"];
/// Allowed keys of `overrides`.
pub const OVERRIDE_FIELDS: [&str; 3] = ["content", "appendContent", "tools"];

/// How a binding changes the capability's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentOverride {
    /// `overrides.content`: replaces the text.
    Replace(String),
    /// `overrides.appendContent`: appended after a blank line (see [`effective_capability`]).
    Append(String),
}

/// `overrides.tools`: a list that is present replaces the base list (`[]` clears it); an absent
/// list is inherited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOverride {
    pub add: Option<Vec<String>>,
    pub remove: Option<Vec<String>>,
}

/// A binding's `overrides`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub content: Option<ContentOverride>,
    pub tools: Option<ToolOverride>,
}

/// One structurally valid binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The capability reference as parsed (`review`, `global:review`).
    pub reference: Selector,
    /// Explicit binding id, if given.
    pub id: Option<String>,
    /// `modelCallable === true` (absent = false).
    pub model_callable: bool,
    pub overrides: Option<Overrides>,
}

impl Binding {
    /// `id ?? ref.id`: the id the binding is known by within its Preset.
    pub fn effective_id(&self) -> &str {
        self.id.as_deref().unwrap_or(self.reference.id())
    }

    /// The capability key the binding targets: a bare ref resolves in the Preset's own scope
    /// (exactly; never project-over-global fallback), a qualified ref in its scope.
    pub fn target(&self, preset_scope: Scope) -> ResourceKey {
        self.reference.key_in(preset_scope)
    }
}

/// Validates a Preset's `capabilities` array. `owner` is the Preset's scope: a global Preset may
/// not use `project:` refs.
///
/// Returns the bindings that are valid on their own and do not repeat an earlier effective id,
/// in array order, plus all diagnostics (fields like `capabilities[1].ref`). Above 256 entries
/// only the limit error is reported and no binding is returned.
pub fn parse_bindings(value: &Value, owner: Scope) -> (Vec<Binding>, Vec<Diagnostic>) {
    let (indexed, d) = parse_bindings_indexed(value, owner);
    (indexed.into_iter().map(|(_, b)| b).collect(), d)
}

/// [`parse_bindings`] with each returned binding's index in the array, so an editor can show the
/// outcome of every binding next to the element it came from.
pub fn parse_bindings_indexed(
    value: &Value,
    owner: Scope,
) -> (Vec<(usize, Binding)>, Vec<Diagnostic>) {
    let mut d = Vec::new();
    let Value::Array(items) = value else {
        d.push(field_error(
            "capabilities",
            format!(
                "capabilities must be an array of capability bindings, got {}.",
                type_name(value)
            ),
        ));
        return (Vec::new(), d);
    };
    if items.len() > MAX_CAPABILITY_BINDINGS {
        d.push(field_error(
            "capabilities",
            format!("Exceeded maximum bindings limit of {MAX_CAPABILITY_BINDINGS}"),
        ));
        return (Vec::new(), d);
    }
    let mut bindings = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        let before = d.len();
        let (effective_id, binding) = parse_binding(index, item, owner, &mut d);
        let own_errors = d.len() > before;
        let mut duplicate = false;
        if let Some(effective_id) = effective_id {
            if !seen.insert(effective_id.clone()) {
                duplicate = true;
                d.push(field_error(
                    &format!("capabilities[{index}]"),
                    format!("Duplicate binding id \"{effective_id}\" at index {index}"),
                ));
            }
        }
        if let Some(binding) = binding {
            if !own_errors && !duplicate {
                bindings.push((index, binding));
            }
        }
    }
    (bindings, dedupe(d))
}

/// Parses one binding. Returns its effective id whenever `ref` (and `id`, if present) are valid,
/// so duplicates are found even among otherwise broken bindings.
fn parse_binding(
    index: usize,
    item: &Value,
    owner: Scope,
    d: &mut Vec<Diagnostic>,
) -> (Option<String>, Option<Binding>) {
    let base = format!("capabilities[{index}]");
    let Value::Object(map) = item else {
        d.push(field_error(
            &base,
            format!(
                "{base} must be a capability binding object, got {}.",
                type_name(item)
            ),
        ));
        return (None, None);
    };
    unsupported_keys(
        map,
        &BINDING_FIELDS,
        "capability binding",
        &format!("{base}."),
        d,
    );

    let ref_field = format!("{base}.ref");
    let reference = match map.get("ref") {
        None => {
            d.push(field_error(&ref_field, format!("{ref_field} is required.")));
            None
        }
        Some(Value::String(text)) if !js_trim(text).is_empty() => match parse_selector(text) {
            Ok(selector) => {
                if owner == Scope::Global && selector.scope() == Some(Scope::Project) {
                    d.push(field_error(
                        &ref_field,
                        format!(
                            "{ref_field}: a global Preset cannot reference the project capability {selector}."
                        ),
                    ));
                }
                Some(selector)
            }
            Err(err) => {
                d.push(field_error(
                    &ref_field,
                    format!("{ref_field} is not a valid capability selector: {err}"),
                ));
                None
            }
        },
        Some(other) => {
            d.push(field_error(
                &ref_field,
                format!(
                    "{ref_field} must be a non-empty capability selector string, got {}.",
                    describe(other)
                ),
            ));
            None
        }
    };

    let id_field = format!("{base}.id");
    let (id, id_ok) = match map.get("id") {
        None => (None, true),
        Some(Value::String(text)) if is_valid_id(text) => (Some(text.clone()), true),
        Some(Value::String(_)) => {
            d.push(field_error(
                &id_field,
                format!("{id_field} is not a valid binding id: binding ids {ID_RULE}."),
            ));
            (None, false)
        }
        Some(other) => {
            d.push(field_error(
                &id_field,
                format!("{id_field} must be a string, got {}.", type_name(other)),
            ));
            (None, false)
        }
    };

    let model_callable = match map.get("modelCallable") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            let field = format!("{base}.modelCallable");
            d.push(field_error(
                &field,
                format!("{field} must be a boolean, got {}.", type_name(other)),
            ));
            false
        }
    };

    let overrides = map
        .get("overrides")
        .map(|value| parse_overrides(value, &format!("{base}.overrides"), d));

    let effective_id = match (&reference, id_ok) {
        (Some(selector), true) => Some(id.clone().unwrap_or_else(|| selector.id().to_string())),
        _ => None,
    };
    let binding = match (reference, overrides) {
        (Some(reference), None) => Some(Binding {
            reference,
            id,
            model_callable,
            overrides: None,
        }),
        (Some(reference), Some(Some(overrides))) => Some(Binding {
            reference,
            id,
            model_callable,
            overrides: Some(overrides),
        }),
        _ => None,
    };
    (effective_id, binding)
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "an empty string",
        other => type_name(other),
    }
}

fn parse_overrides(value: &Value, field: &str, d: &mut Vec<Diagnostic>) -> Option<Overrides> {
    let Value::Object(map) = value else {
        d.push(field_error(
            field,
            format!("{field} must be an object, got {}.", type_name(value)),
        ));
        return None;
    };
    let before = d.len();
    unsupported_keys(
        map,
        &OVERRIDE_FIELDS,
        "capability binding",
        &format!("{field}."),
        d,
    );
    let content = override_text(map, "content", field, d);
    let append = override_text(map, "appendContent", field, d);
    let content = match (content, append) {
        (Some(_), Some(_)) => {
            d.push(field_error(
                field,
                format!("{field}.content and {field}.appendContent are mutually exclusive."),
            ));
            None
        }
        (Some(text), None) => Some(ContentOverride::Replace(text)),
        (None, Some(text)) => Some(ContentOverride::Append(text)),
        (None, None) => None,
    };
    let tools_field = format!("{field}.tools");
    let tools = match map.get("tools") {
        None => None,
        Some(Value::Object(t)) => {
            unsupported_keys(
                t,
                &["add", "remove"],
                "capability binding",
                &format!("{tools_field}."),
                d,
            );
            let mut list = |key: &str| {
                t.get(key)
                    .map(|v| parse_tool_list(v, &format!("{tools_field}.{key}"), d))
            };
            let add = list("add");
            let remove = list("remove");
            Some(ToolOverride { add, remove })
        }
        Some(other) => {
            d.push(field_error(
                &tools_field,
                format!(
                    "{tools_field} must be an object with optional add and remove arrays, got {}.",
                    type_name(other)
                ),
            ));
            None
        }
    };
    if d.len() > before {
        None
    } else {
        Some(Overrides { content, tools })
    }
}

fn override_text(
    map: &Map<String, Value>,
    key: &str,
    parent: &str,
    d: &mut Vec<Diagnostic>,
) -> Option<String> {
    let field = format!("{parent}.{key}");
    match map.get(key) {
        None => None,
        Some(Value::String(text)) => {
            check_content_length(&field, text, d);
            Some(text.clone())
        }
        Some(other) => {
            d.push(field_error(
                &field,
                format!("{field} must be a string, got {}.", type_name(other)),
            ));
            None
        }
    }
}

/// B5 including step 1: the parsed base must have no errors (overrides never repair a broken
/// definition), then [`effective_capability`].
pub fn effective_from_parsed(
    base: &ParsedCapability,
    overrides: Option<&Overrides>,
) -> Result<Capability, Vec<Diagnostic>> {
    if let Some(first) = base.diagnostics.iter().find(|d| d.is_error()) {
        let mut error = Diagnostic::error(format!(
            "Capability {} is invalid: {}",
            base.capability.id, first.message
        ));
        error.field = first.field.clone();
        return Err(vec![error]);
    }
    effective_capability(&base.capability, overrides)
}

/// B5 steps 2–5: applies binding overrides to a (usable) capability and re-validates the result
/// with the B1 rules. Use [`effective_from_parsed`] to also refuse a base with errors.
///
/// - `Replace` swaps the text; `Append` adds `"\n\n" + text` to a non-empty base, leaves the base
///   alone when the appended text is empty, and becomes the text when the base is empty.
/// - A present `tools.add`/`tools.remove` replaces that list; an absent one is inherited.
/// - Identity, `name` and `description` are kept.
pub fn effective_capability(
    base: &Capability,
    overrides: Option<&Overrides>,
) -> Result<Capability, Vec<Diagnostic>> {
    let mut candidate = base.clone();
    if let Some(overrides) = overrides {
        match &overrides.content {
            None => {}
            Some(ContentOverride::Replace(text)) => candidate.content = text.clone(),
            Some(ContentOverride::Append(text)) => {
                if base.content.is_empty() {
                    candidate.content = text.clone();
                } else if !text.is_empty() {
                    candidate.content = format!("{}\n\n{text}", base.content);
                }
            }
        }
        if let Some(tools) = &overrides.tools {
            candidate.tools = ToolPatch {
                add: tools.add.clone().unwrap_or_else(|| base.tools.add.clone()),
                remove: tools
                    .remove
                    .clone()
                    .unwrap_or_else(|| base.tools.remove.clone()),
            };
        }
    }
    let diagnostics = candidate.validate();
    ok_unless_errors(candidate, diagnostics)
}
