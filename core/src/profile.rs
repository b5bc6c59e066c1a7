//! Agent profiles: model + thinking level + prompt stack (spec A1, A7, C4).
//!
//! A profile file is parsed in two passes. The *shape* pass looks at the raw JSON: unknown keys,
//! wrong types, the fixed `schemaVersion`/`type`, required keys. It produces a normalized
//! [`AgentProfile`] (wrong-typed values fall back to defaults, strings are trimmed). The *semantic*
//! pass ([`validate_profile`]) then checks the normalized profile: id grammar, non-empty model
//! fields, the prompt-stack selector and the scope rule (a global profile may not reference a
//! `project:` stack). Capture runs only the semantic pass.
//!
//! Everything here is pure: no filesystem, no clock, no panics on input.

use serde_json::{Map, Value};

use crate::diag::{dedupe, field_error, is_usable, ok_unless_errors, Diagnostic};
use crate::id::{fallback_id, is_valid_id, parse_selector, ResourceKey, Scope, Selector, ID_RULE};
use crate::js::js_trim;
use crate::json::{object, parse_bytes, to_compact, to_pretty, type_name};
use crate::shape::{check_header, optional_string, required_id, unsupported_keys};

/// `type` of every agent profile.
pub const AGENT_PROFILE_TYPE: &str = "pi-forge.agent-profile";
/// The only supported `schemaVersion`.
pub const PROFILE_SCHEMA_VERSION: u64 = 1;
/// Largest profile file the codec accepts; larger files become faults.
pub const MAX_PROFILE_BYTES: usize = 1_048_576;
/// Allowed top-level keys, in schema (serialization) order.
pub const PROFILE_FIELDS: [&str; 9] = [
    "schemaVersion",
    "type",
    "id",
    "name",
    "description",
    "autoActivate",
    "model",
    "thinkingLevel",
    "promptStack",
];
/// Allowed keys of `model`.
pub const MODEL_FIELDS: [&str; 2] = ["provider", "id"];

/// Pi thinking levels a profile may request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThinkingLevel {
    #[default]
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

impl ThinkingLevel {
    /// Every level, in the order the schema lists them.
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }

    /// Exact (case-sensitive, untrimmed) match against the level names.
    pub fn parse(text: &str) -> Option<ThinkingLevel> {
        ThinkingLevel::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

impl std::fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{provider, id}` of a model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ModelRef {
    pub provider: String,
    pub id: String,
}

impl ModelRef {
    pub fn new(provider: impl Into<String>, id: impl Into<String>) -> Self {
        ModelRef {
            provider: provider.into(),
            id: id.into(),
        }
    }

    pub fn to_value(&self) -> Value {
        object([
            ("provider", Some(Value::String(self.provider.clone()))),
            ("id", Some(Value::String(self.id.clone()))),
        ])
    }
}

/// A normalized agent profile. `schemaVersion` and `type` are implied (always `1` and
/// [`AGENT_PROFILE_TYPE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentProfile {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub auto_activate: Option<bool>,
    pub model: ModelRef,
    pub thinking_level: ThinkingLevel,
    /// The prompt-stack selector as written (trimmed); `None` = JSON `null` (no stack).
    pub prompt_stack: Option<String>,
}

impl AgentProfile {
    /// The placeholder a broken file turns into: basename id, empty model, `off`, no stack.
    pub fn fault(id: impl Into<String>) -> Self {
        AgentProfile {
            id: id.into(),
            name: None,
            description: None,
            auto_activate: None,
            model: ModelRef::default(),
            thinking_level: ThinkingLevel::Off,
            prompt_stack: None,
        }
    }

    /// The normalized JSON object in schema order; absent optionals are omitted, a missing stack
    /// is an explicit `null`.
    pub fn to_value(&self) -> Value {
        object([
            ("schemaVersion", Some(Value::from(PROFILE_SCHEMA_VERSION))),
            ("type", Some(Value::String(AGENT_PROFILE_TYPE.to_string()))),
            ("id", Some(Value::String(self.id.clone()))),
            ("name", self.name.clone().map(Value::String)),
            ("description", self.description.clone().map(Value::String)),
            ("autoActivate", self.auto_activate.map(Value::Bool)),
            ("model", Some(self.model.to_value())),
            (
                "thinkingLevel",
                Some(Value::String(self.thinking_level.as_str().to_string())),
            ),
            (
                "promptStack",
                Some(self.prompt_stack.clone().map_or(Value::Null, Value::String)),
            ),
        ])
    }

    /// `sha256:v1:` fingerprint of the normalized object (`profileFingerprint`).
    pub fn fingerprint(&self) -> String {
        crate::canonical::fingerprint(&self.to_value())
    }

    /// The provenance `sourceFingerprint` (C4): compact JSON in schema order. Not a hash.
    pub fn legacy_fingerprint(&self) -> String {
        to_compact(&self.to_value())
    }

    /// The key of this profile when it lives in `scope`.
    pub fn key(&self, scope: Scope) -> ResourceKey {
        ResourceKey::new(scope, self.id.clone())
    }
}

/// Result of parsing one profile file.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedProfile {
    /// The normalized profile (a fault profile when the file could not be parsed).
    pub profile: AgentProfile,
    /// The parsed JSON root, unknown fields included; `None` when the bytes were not JSON.
    pub raw: Option<Value>,
    pub diagnostics: Vec<Diagnostic>,
}

impl ParsedProfile {
    /// A fault: placeholder profile with one error and no raw value.
    pub fn fault(file_name: &str, message: impl Into<String>) -> Self {
        ParsedProfile {
            profile: AgentProfile::fault(fallback_id(file_name)),
            raw: None,
            diagnostics: vec![Diagnostic::error(message)],
        }
    }

    /// True when no diagnostic is an error.
    pub fn usable(&self) -> bool {
        is_usable(&self.diagnostics)
    }
}

/// A fault for a file that could not be read or parsed: placeholder profile, one error.
pub fn fault_profile(file_name: &str, message: impl Into<String>) -> ParsedProfile {
    ParsedProfile::fault(file_name, message)
}

/// Parses a profile file's bytes. Oversized, non-UTF-8 and malformed JSON files become faults.
pub fn parse_profile_bytes(bytes: &[u8], file_name: &str, scope: Scope) -> ParsedProfile {
    if bytes.len() > MAX_PROFILE_BYTES {
        return ParsedProfile::fault(
            file_name,
            format!(
                "Profile file is too large: {} bytes (the limit is {MAX_PROFILE_BYTES} bytes).",
                bytes.len()
            ),
        );
    }
    match parse_bytes(bytes) {
        Ok(value) => parse_profile_value(value, file_name, scope),
        Err(err) => ParsedProfile {
            diagnostics: vec![Diagnostic::json_syntax(&err)],
            ..ParsedProfile::fault(file_name, "")
        },
    }
}

/// Validates and normalizes a parsed profile JSON value. `scope` is where the file lives; it
/// decides whether a `project:` stack reference is allowed.
pub fn parse_profile_value(value: Value, file_name: &str, scope: Scope) -> ParsedProfile {
    let Value::Object(map) = &value else {
        let message = format!("Profile must be a JSON object, got {}.", type_name(&value));
        let mut parsed = ParsedProfile::fault(file_name, message);
        parsed.raw = Some(value);
        return parsed;
    };
    let (profile, mut diagnostics) = normalize(map, file_name);
    diagnostics.extend(validate_profile(&profile, scope));
    ParsedProfile {
        profile,
        raw: Some(value),
        diagnostics: dedupe(diagnostics),
    }
}

/// Shape pass: builds the normalized profile from the raw object.
fn normalize(map: &Map<String, Value>, file_name: &str) -> (AgentProfile, Vec<Diagnostic>) {
    let mut d = Vec::new();
    unsupported_keys(map, &PROFILE_FIELDS, "profile", "", &mut d);
    check_header(
        map,
        "Profile",
        PROFILE_SCHEMA_VERSION,
        AGENT_PROFILE_TYPE,
        &mut d,
    );

    let id = required_id(map, "Profile", &mut d)
        .map_or_else(|| fallback_id(file_name), js_trim)
        .to_string();

    let name = optional_string(map, "Profile", "name", &mut d);
    let description = optional_string(map, "Profile", "description", &mut d);
    let auto_activate = match map.get("autoActivate") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(v) => {
            d.push(field_error(
                "autoActivate",
                format!(
                    "Profile autoActivate must be a boolean, got {}.",
                    type_name(v)
                ),
            ));
            None
        }
    };

    let model = match map.get("model") {
        Some(Value::Object(m)) => {
            unsupported_keys(m, &MODEL_FIELDS, "profile", "model.", &mut d);
            // Wrong types normalize to "" and are reported by the semantic pass.
            let text = |k: &str| m.get(k).and_then(Value::as_str).map(js_trim).unwrap_or("");
            ModelRef::new(text("provider"), text("id"))
        }
        other => {
            let message = match other {
                None => "Profile model is required: an object with provider and id.".to_string(),
                Some(v) => format!(
                    "Profile model must be an object with provider and id, got {}.",
                    type_name(v)
                ),
            };
            d.push(field_error("model", message));
            ModelRef::default()
        }
    };

    let thinking_level = match map
        .get("thinkingLevel")
        .and_then(Value::as_str)
        .and_then(ThinkingLevel::parse)
    {
        Some(level) => level,
        None => {
            d.push(field_error("thinkingLevel", thinking_level_message()));
            ThinkingLevel::Off
        }
    };

    let prompt_stack = match map.get("promptStack") {
        None => {
            d.push(field_error(
                "promptStack",
                "Profile promptStack is required (use null for no prompt stack).".to_string(),
            ));
            None
        }
        Some(Value::Null) => None,
        // Emptiness and selector grammar are checked by the semantic pass.
        Some(Value::String(s)) => Some(js_trim(s).to_string()),
        Some(_) => {
            d.push(field_error("promptStack", prompt_stack_type_message()));
            None
        }
    };

    let profile = AgentProfile {
        id,
        name,
        description,
        auto_activate,
        model,
        thinking_level,
        prompt_stack,
    };
    (profile, d)
}

fn thinking_level_message() -> String {
    let names: Vec<&str> = ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
    format!(
        "Profile thinkingLevel must be one of: {}.",
        names.join(", ")
    )
}

fn prompt_stack_type_message() -> String {
    "Profile promptStack must be null or a non-empty prompt stack selector.".to_string()
}

/// Semantic checks of a normalized profile living in `scope`: id, model, prompt-stack selector and
/// the global→project rule.
pub fn validate_profile(profile: &AgentProfile, scope: Scope) -> Vec<Diagnostic> {
    let mut d = Vec::new();
    if js_trim(&profile.id).is_empty() {
        d.push(field_error(
            "id",
            "Profile id must be a non-empty string.".to_string(),
        ));
    } else if !is_valid_id(&profile.id) {
        d.push(field_error("id", format!("Profile id {ID_RULE}.")));
    }
    for (field, text) in [
        ("model.provider", &profile.model.provider),
        ("model.id", &profile.model.id),
    ] {
        if js_trim(text).is_empty() {
            d.push(field_error(
                field,
                format!("Profile {field} must be a non-empty string."),
            ));
        }
    }
    if let Some(stack) = &profile.prompt_stack {
        if js_trim(stack).is_empty() {
            d.push(field_error("promptStack", prompt_stack_type_message()));
        } else {
            match parse_selector(stack) {
                Err(err) => d.push(field_error(
                    "promptStack",
                    format!("Profile promptStack is not a valid prompt stack selector: {err}"),
                )),
                Ok(Selector::Scoped(key))
                    if scope == Scope::Global && key.scope == Scope::Project =>
                {
                    d.push(field_error(
                        "promptStack",
                        format!("A global profile cannot reference a project prompt stack: {key}."),
                    ))
                }
                Ok(_) => {}
            }
        }
    }
    dedupe(d)
}

/// Writes a profile as it is stored on disk: 2-space JSON in schema order plus a newline.
pub fn serialize_profile(profile: &AgentProfile) -> String {
    to_pretty(&profile.to_value())
}

/// The runtime facts a capture starts from (A7).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeState {
    /// The current model, if any.
    pub model: Option<ModelRef>,
    pub thinking_level: ThinkingLevel,
    /// The active prompt stack, if any.
    pub active_stack: Option<ResourceKey>,
}

/// How `active` is written in a profile saved to `target` (A7): same scope → bare id, project
/// profile referencing a global stack → `global:<id>`, global profile referencing a project stack
/// → error.
pub fn stack_reference_for(target: Scope, active: &ResourceKey) -> Result<String, Diagnostic> {
    if active.scope == target {
        Ok(active.id.clone())
    } else if target == Scope::Project {
        Ok(active.to_string())
    } else {
        Err(field_error(
            "promptStack",
            format!(
                "Cannot capture the project prompt stack {active} into a global profile; a global profile cannot reference a project prompt stack."
            ),
        ))
    }
}

/// Builds a profile from the current runtime state (A7, pure part) and validates it for `target`.
///
/// `existing` is the profile being overwritten, if any: its `name`, `description` and
/// `autoActivate` are kept (`name` defaults to the id). The returned profile is normalized and
/// free of errors.
pub fn capture_profile(
    id: &str,
    target: Scope,
    current: &RuntimeState,
    existing: Option<&AgentProfile>,
) -> Result<AgentProfile, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let model = match &current.model {
        Some(model) => ModelRef::new(js_trim(&model.provider), js_trim(&model.id)),
        None => {
            errors.push(field_error(
                "model",
                "No model is selected; a profile cannot be captured without a model.".to_string(),
            ));
            ModelRef::default()
        }
    };
    let prompt_stack = match &current.active_stack {
        None => None,
        Some(key) => match stack_reference_for(target, key) {
            Ok(text) => Some(text),
            Err(diagnostic) => {
                errors.push(diagnostic);
                None
            }
        },
    };
    let id = js_trim(id).to_string();
    let profile = AgentProfile {
        name: Some(
            existing
                .and_then(|e| e.name.clone())
                .unwrap_or_else(|| id.clone()),
        ),
        description: existing.and_then(|e| e.description.clone()),
        auto_activate: existing.and_then(|e| e.auto_activate),
        id,
        model,
        thinking_level: current.thinking_level,
        prompt_stack,
    };
    if current.model.is_some() {
        errors.extend(validate_profile(&profile, target));
    } else {
        // The model error already explains the empty model fields.
        errors.extend(
            validate_profile(&profile, target)
                .into_iter()
                .filter(|d| !d.field.as_deref().is_some_and(|f| f.starts_with("model"))),
        );
    }
    ok_unless_errors(profile, dedupe(errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_levels_round_trip() {
        for level in ThinkingLevel::ALL {
            assert_eq!(ThinkingLevel::parse(level.as_str()), Some(level));
        }
        assert_eq!(ThinkingLevel::parse("High"), None);
    }
}
