//! Capability snapshots (spec B6): the frozen text and tool patch of one activation.
//!
//! `fingerprint = fp({type:"pi-forge.capability-snapshot", schemaVersion:1, source, name?, content,
//! tools})`. The activation id is not part of it: the fingerprint is content identity, so the
//! picker can compute a choice's fingerprint before any activation exists.

use serde_json::{Map, Value};

use super::{
    check_content_length, check_name_length, effect_rule, Capability, ToolPatch,
    MAX_OPAQUE_ID_LENGTH,
};
use crate::canonical::fingerprint;
use crate::diag::{dedupe, field_error, Diagnostic};
use crate::id::{is_valid_id, is_valid_tool_name, tool_name_problem, ResourceKey, Scope, ID_RULE};
use crate::json::{object, type_name, utf16_len};
use crate::shape::unsupported_keys;

/// `type` inside the hashed snapshot object (its domain tag).
pub const SNAPSHOT_TYPE: &str = "pi-forge.capability-snapshot";
/// `schemaVersion` inside the hashed snapshot object.
pub const SNAPSHOT_SCHEMA_VERSION: u64 = 1;

/// The Preset binding an activation came through.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BindingSource {
    pub preset: ResourceKey,
    /// The binding's effective id.
    pub id: String,
}

/// Where a snapshot's text came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SnapshotSource {
    /// `{"kind":"manual"}`: text typed by the user.
    Manual,
    /// `{"kind":"capability","key":{scope,id},"binding"?:{preset:{scope,id},id}}`.
    Capability {
        key: ResourceKey,
        binding: Option<BindingSource>,
    },
}

fn key_value(key: &ResourceKey) -> Value {
    object([
        ("scope", Some(Value::String(key.scope.as_str().to_string()))),
        ("id", Some(Value::String(key.id.clone()))),
    ])
}

impl SnapshotSource {
    pub fn to_value(&self) -> Value {
        match self {
            SnapshotSource::Manual => object([("kind", Some(Value::String("manual".into())))]),
            SnapshotSource::Capability { key, binding } => object([
                ("kind", Some(Value::String("capability".into()))),
                ("key", Some(key_value(key))),
                (
                    "binding",
                    binding.as_ref().map(|b| {
                        object([
                            ("preset", Some(key_value(&b.preset))),
                            ("id", Some(Value::String(b.id.clone()))),
                        ])
                    }),
                ),
            ]),
        }
    }

    /// `manual` or `<scope>:<id>`, as status views label a source.
    pub fn label(&self) -> String {
        match self {
            SnapshotSource::Manual => "manual".to_string(),
            SnapshotSource::Capability { key, .. } => key.to_string(),
        }
    }

    /// The binding, if the activation came through one.
    pub fn binding(&self) -> Option<&BindingSource> {
        match self {
            SnapshotSource::Manual => None,
            SnapshotSource::Capability { binding, .. } => binding.as_ref(),
        }
    }
}

/// One activation's frozen capability.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilitySnapshot {
    pub activation_id: String,
    pub source: SnapshotSource,
    pub name: Option<String>,
    pub content: String,
    pub tools: ToolPatch,
}

impl CapabilitySnapshot {
    /// Freezes an (effective) capability for an activation.
    pub fn from_capability(
        activation_id: impl Into<String>,
        source: SnapshotSource,
        capability: &Capability,
    ) -> Self {
        CapabilitySnapshot {
            activation_id: activation_id.into(),
            source,
            name: capability.name.clone(),
            content: capability.content.clone(),
            tools: capability.tools.clone(),
        }
    }

    /// The object the fingerprint hashes (activation id excluded, absent name omitted).
    pub fn fingerprint_value(&self) -> Value {
        object([
            ("type", Some(Value::String(SNAPSHOT_TYPE.to_string()))),
            ("schemaVersion", Some(Value::from(SNAPSHOT_SCHEMA_VERSION))),
            ("source", Some(self.source.to_value())),
            ("name", self.name.clone().map(Value::String)),
            ("content", Some(Value::String(self.content.clone()))),
            ("tools", Some(self.tools.to_value())),
        ])
    }

    /// `sha256:v1:` content fingerprint.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.fingerprint_value())
    }

    /// The stored form: `{activationId, source, name?, content, tools, fingerprint}`.
    pub fn to_value(&self) -> Value {
        object([
            (
                "activationId",
                Some(Value::String(self.activation_id.clone())),
            ),
            ("source", Some(self.source.to_value())),
            ("name", self.name.clone().map(Value::String)),
            ("content", Some(Value::String(self.content.clone()))),
            ("tools", Some(self.tools.to_value())),
            ("fingerprint", Some(Value::String(self.fingerprint()))),
        ])
    }

    /// B6 checks on a snapshot value: activation id, source consistency, limits, tool names and
    /// the "content or tool effect" rule.
    pub fn validate(&self) -> Vec<Diagnostic> {
        let mut d = Vec::new();
        check_opaque_id("activationId", &self.activation_id, &mut d);
        if let SnapshotSource::Capability { key, binding } = &self.source {
            check_id("source.key.id", &key.id, &mut d);
            if let Some(binding) = binding {
                check_id("source.binding.preset.id", &binding.preset.id, &mut d);
                check_id("source.binding.id", &binding.id, &mut d);
                if binding.preset.scope == Scope::Global && key.scope == Scope::Project {
                    d.push(field_error(
                        "source.binding",
                        "A binding of a global Preset cannot target a project capability."
                            .to_string(),
                    ));
                }
            }
        }
        check_name_length("Snapshot", self.name.as_deref(), &mut d);
        check_content_length("content", &self.content, &mut d);
        d.extend(self.tools.validate("tools"));
        d.extend(effect_rule(&self.content, &self.tools));
        dedupe(d)
    }

    /// Decodes a stored snapshot with exact key sets and checks that the stored fingerprint equals
    /// the recomputed one ("Snapshot fingerprint mismatch").
    pub fn from_value(value: &Value) -> Result<CapabilitySnapshot, Vec<Diagnostic>> {
        let mut d = Vec::new();
        let Some(map) = expect_object(value, "snapshot", &mut d) else {
            return Err(d);
        };
        unsupported_keys(
            map,
            &[
                "activationId",
                "source",
                "name",
                "content",
                "tools",
                "fingerprint",
            ],
            "snapshot",
            "",
            &mut d,
        );
        let activation_id = required_string(map, "activationId", "activationId", &mut d);
        let source = match map.get("source") {
            Some(v) => decode_source(v, &mut d),
            None => {
                d.push(field_error("source", "source is required.".to_string()));
                None
            }
        };
        let name = match map.get("name") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                d.push(field_error(
                    "name",
                    format!("name must be a string, got {}.", type_name(other)),
                ));
                None
            }
        };
        let content = required_string(map, "content", "content", &mut d);
        let tools = decode_tools(map.get("tools"), &mut d);
        let stored = required_string(map, "fingerprint", "fingerprint", &mut d);
        let (Some(activation_id), Some(source), Some(content), Some(tools), Some(stored)) =
            (activation_id, source, content, tools, stored)
        else {
            return Err(dedupe(d));
        };
        let snapshot = CapabilitySnapshot {
            activation_id,
            source,
            name,
            content,
            tools,
        };
        d.extend(snapshot.validate());
        if d.iter().any(Diagnostic::is_error) {
            return Err(dedupe(d));
        }
        if snapshot.fingerprint() != stored {
            return Err(vec![field_error(
                "fingerprint",
                "Snapshot fingerprint mismatch".to_string(),
            )]);
        }
        Ok(snapshot)
    }
}

fn check_id(field: &str, id: &str, d: &mut Vec<Diagnostic>) {
    if !is_valid_id(id) {
        d.push(field_error(field, format!("{field} {ID_RULE}.")));
    }
}

fn check_opaque_id(field: &str, id: &str, d: &mut Vec<Diagnostic>) {
    check_id(field, id, d);
    let len = utf16_len(id);
    if len > MAX_OPAQUE_ID_LENGTH {
        d.push(field_error(
            field,
            format!("{field} must be at most {MAX_OPAQUE_ID_LENGTH} characters (got {len})."),
        ));
    }
}

fn expect_object<'a>(
    value: &'a Value,
    field: &str,
    d: &mut Vec<Diagnostic>,
) -> Option<&'a Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        other => {
            d.push(field_error(
                field,
                format!("{field} must be an object, got {}.", type_name(other)),
            ));
            None
        }
    }
}

fn required_string(
    map: &Map<String, Value>,
    key: &str,
    field: &str,
    d: &mut Vec<Diagnostic>,
) -> Option<String> {
    match map.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        None => {
            d.push(field_error(field, format!("{field} is required.")));
            None
        }
        Some(other) => {
            d.push(field_error(
                field,
                format!("{field} must be a string, got {}.", type_name(other)),
            ));
            None
        }
    }
}

fn decode_key(value: Option<&Value>, field: &str, d: &mut Vec<Diagnostic>) -> Option<ResourceKey> {
    let Some(value) = value else {
        d.push(field_error(field, format!("{field} is required.")));
        return None;
    };
    let map = expect_object(value, field, d)?;
    unsupported_keys(map, &["scope", "id"], "snapshot", &format!("{field}."), d);
    let scope_field = format!("{field}.scope");
    let scope = match map
        .get("scope")
        .and_then(Value::as_str)
        .and_then(Scope::parse)
    {
        Some(scope) => Some(scope),
        None => {
            d.push(field_error(
                &scope_field,
                format!("{scope_field} must be \"project\" or \"global\"."),
            ));
            None
        }
    };
    let id = required_string(map, "id", &format!("{field}.id"), d);
    Some(ResourceKey::new(scope?, id?))
}

fn decode_source(value: &Value, d: &mut Vec<Diagnostic>) -> Option<SnapshotSource> {
    let map = expect_object(value, "source", d)?;
    match map.get("kind").and_then(Value::as_str) {
        Some("manual") => {
            unsupported_keys(map, &["kind"], "snapshot", "source.", d);
            Some(SnapshotSource::Manual)
        }
        Some("capability") => {
            unsupported_keys(map, &["kind", "key", "binding"], "snapshot", "source.", d);
            let key = decode_key(map.get("key"), "source.key", d);
            let binding = match map.get("binding") {
                None => Some(None),
                Some(value) => {
                    let b = expect_object(value, "source.binding", d)?;
                    unsupported_keys(b, &["preset", "id"], "snapshot", "source.binding.", d);
                    let preset = decode_key(b.get("preset"), "source.binding.preset", d);
                    let id = required_string(b, "id", "source.binding.id", d);
                    match (preset, id) {
                        (Some(preset), Some(id)) => Some(Some(BindingSource { preset, id })),
                        _ => None,
                    }
                }
            };
            Some(SnapshotSource::Capability {
                key: key?,
                binding: binding?,
            })
        }
        _ => {
            d.push(field_error(
                "source.kind",
                "source.kind must be \"manual\" or \"capability\".".to_string(),
            ));
            None
        }
    }
}

fn decode_tools(value: Option<&Value>, d: &mut Vec<Diagnostic>) -> Option<ToolPatch> {
    let Some(value) = value else {
        d.push(field_error("tools", "tools is required.".to_string()));
        return None;
    };
    let map = expect_object(value, "tools", d)?;
    unsupported_keys(map, &["add", "remove"], "snapshot", "tools.", d);
    let mut list = |key: &str| -> Option<Vec<String>> {
        let field = format!("tools.{key}");
        let Some(Value::Array(items)) = map.get(key) else {
            d.push(field_error(
                &field,
                format!("{field} must be an array of tool names."),
            ));
            return None;
        };
        let mut names = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(name) if is_valid_tool_name(name) => names.push(name.to_string()),
                Some(name) => {
                    ok = false;
                    let problem = tool_name_problem(name).unwrap_or("is invalid");
                    d.push(super::tool_name_error(&field, i, name, problem));
                }
                None => {
                    ok = false;
                    d.push(field_error(
                        &format!("{field}[{i}]"),
                        format!(
                            "Tool names in {field} must be strings, got {}.",
                            type_name(item)
                        ),
                    ));
                }
            }
        }
        ok.then_some(names)
    };
    let add = list("add");
    let remove = list("remove");
    Some(ToolPatch {
        add: add?,
        remove: remove?,
    })
}
