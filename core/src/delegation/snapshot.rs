//! D3 `AgentProfileSnapshot`: the immutable, path-free picture of a resolved profile and its stack,
//! and its receiver-side validation.
//!
//! The host resolves the stack reference (workspace resolution) and scans dependencies; this
//! module turns those results into the snapshot, or into the §D3 diagnostics. Registered
//! extension dependencies are inputs: a standalone server cannot execute Pi extensions, so it
//! passes what it knows (usually nothing) and unknown ones surface as `profile.dependency-missing`.

use serde_json::{json, Map, Value};

use super::{has_errors, ContractDiagnostic as D};
use crate::canonical::{fingerprint, is_fingerprint};
use crate::diag::{Diagnostic, Level};
use crate::id::{parse_selector, ResourceKey, Scope};
use crate::profile::AgentProfile;
use crate::stack::PromptStack;

/// How the host's lookup of the profile's stack reference went.
#[derive(Clone, Debug)]
pub enum StackLookup<'a> {
    /// `promptStack: null`.
    NoStack,
    /// Exactly one stack; its codec diagnostics ride along.
    Found {
        key: ResourceKey,
        stack: &'a PromptStack,
        diagnostics: &'a [Diagnostic],
    },
    /// No stack answers the reference.
    Missing,
    /// More than one candidate.
    Ambiguous,
}

/// A dependency of the stack on an extension registration (`slot` or `macro`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dependency {
    pub kind: String,
    pub name: String,
    pub source: Option<String>,
}

impl Dependency {
    /// `<kind>:<source|anonymous>:<name>`.
    pub fn identity(&self) -> String {
        format!(
            "{}:{}:{}",
            self.kind,
            self.source.as_deref().unwrap_or("anonymous"),
            self.name
        )
    }
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("kind".into(), self.kind.clone().into());
        map.insert("name".into(), self.name.clone().into());
        map.insert("identity".into(), self.identity().into());
        if let Some(s) = &self.source {
            map.insert("source".into(), s.clone().into());
        }
        Value::Object(map)
    }
}

/// What the dependency scan found: registered dependencies and unregistered names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DependencyScan {
    pub registered: Vec<Dependency>,
    /// `(kind, name)` of references nothing registers.
    pub missing: Vec<(String, String)>,
}

/// The snapshot `{schemaVersion:1, profileId, profile, promptStackId, promptStack, dependencies,
/// profileFingerprint, promptStackFingerprint}`.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentProfileSnapshot {
    pub profile_id: ResourceKey,
    pub profile: Value,
    pub prompt_stack_id: Option<ResourceKey>,
    pub prompt_stack: Option<Value>,
    pub dependencies: Vec<Dependency>,
    pub profile_fingerprint: String,
    pub prompt_stack_fingerprint: Option<String>,
}

impl AgentProfileSnapshot {
    pub fn to_value(&self) -> Value {
        json!({
            "schemaVersion": 1,
            "profileId": self.profile_id.to_string(),
            "profile": self.profile,
            "promptStackId": self.prompt_stack_id.as_ref().map(ToString::to_string),
            "promptStack": self.prompt_stack,
            "dependencies": self.dependencies.iter().map(Dependency::to_value).collect::<Vec<_>>(),
            "profileFingerprint": self.profile_fingerprint,
            "promptStackFingerprint": self.prompt_stack_fingerprint,
        })
    }
}

/// Builds the snapshot of `profile` (of `scope`), or returns the diagnostics that stop it.
/// Warnings (e.g. `profile.dependency-anonymous`) come back with the snapshot.
pub fn build_snapshot(
    profile: &AgentProfile,
    scope: Scope,
    profile_diagnostics: &[Diagnostic],
    stack: StackLookup,
    dependencies: DependencyScan,
) -> (Option<AgentProfileSnapshot>, Vec<D>) {
    let mut diags = Vec::new();
    for d in profile_diagnostics {
        let path = format!("profile.{}", d.field.as_deref().unwrap_or(""));
        diags.push(D::new(
            d.level,
            "profile.validation",
            Some(path.trim_end_matches('.')),
            d.message.clone(),
        ));
    }
    let reference = profile.prompt_stack.as_deref();
    if let Some(reference) = reference {
        match parse_selector(reference) {
            Err(e) => diags.push(D::error(
                "profile.stack-reference",
                "profile.promptStack",
                e.to_string(),
            )),
            Ok(sel) if scope == Scope::Global && sel.scope() == Some(Scope::Project) => {
                diags.push(D::error(
                    "profile.stack-reference",
                    "profile.promptStack",
                    "A global profile cannot reference a project prompt stack.",
                ))
            }
            Ok(_) => {}
        }
    }
    let mut stack_value = None;
    let mut stack_key = None;
    match (&stack, reference) {
        (_, None) | (StackLookup::NoStack, _) => {}
        (StackLookup::Missing, Some(r)) => diags.push(D::error(
            "profile.stack-missing",
            "profile.promptStack",
            format!("Unknown prompt stack: {r}."),
        )),
        (StackLookup::Ambiguous, Some(r)) => diags.push(D::error(
            "profile.stack-ambiguous",
            "profile.promptStack",
            format!("Prompt stack reference {r} is ambiguous."),
        )),
        (
            StackLookup::Found {
                key,
                stack,
                diagnostics,
            },
            Some(_),
        ) => {
            for d in diagnostics.iter() {
                diags.push(D::new(
                    d.level,
                    "profile.stack-validation",
                    Some("promptStack"),
                    d.message.clone(),
                ));
            }
            if let Some(mode) = stack.to_value().get("mode").and_then(Value::as_str) {
                if !matches!(mode, "replace" | "append" | "prepend") {
                    diags.push(D::error(
                        "profile.stack-mode",
                        "promptStack.mode",
                        format!("Unsupported stack mode {mode}."),
                    ));
                }
            }
            stack_value = Some(stack.to_value());
            stack_key = Some(key.clone());
        }
    }
    let mut deps = dependencies.registered;
    deps.sort();
    for d in &deps {
        if d.source.is_none() {
            diags.push(D::warning(
                "profile.dependency-anonymous",
                "dependencies",
                format!("Dependency {} has no source.", d.identity()),
            ));
        }
    }
    for (kind, name) in &dependencies.missing {
        diags.push(D::error(
            "profile.dependency-missing",
            "dependencies",
            format!("The prompt stack needs the {kind} {name}, which is not registered."),
        ));
    }
    if has_errors(&diags) {
        return (None, diags);
    }
    let profile_value = profile.to_value();
    let snapshot = AgentProfileSnapshot {
        profile_id: ResourceKey::new(scope, profile.id.clone()),
        profile_fingerprint: fingerprint(&profile_value),
        profile: profile_value,
        prompt_stack_fingerprint: stack_value.as_ref().map(fingerprint),
        prompt_stack: stack_value,
        prompt_stack_id: stack_key,
        dependencies: deps,
    };
    (Some(snapshot), diags)
}

/// Receiver-side validation of a snapshot object (the subset of §D3 codes that needs no
/// registry): shape, ids, fingerprints, stack reference consistency.
pub fn validate_snapshot(value: &Value) -> Vec<D> {
    let mut diags = Vec::new();
    let mut err = |code: &str, path: &str, msg: &str| diags.push(D::error(code, path, msg));
    let Some(map) = value.as_object() else {
        err(
            "snapshot.schema-version",
            "",
            "A snapshot must be an object.",
        );
        return diags;
    };
    if map.get("schemaVersion").and_then(Value::as_u64) != Some(1) {
        err(
            "snapshot.schema-version",
            "schemaVersion",
            "schemaVersion must be 1.",
        );
    }
    let profile_id =
        map.get("profileId")
            .and_then(Value::as_str)
            .and_then(|s| match parse_selector(s) {
                Ok(sel) => sel.scope().map(|_| sel.key_in(Scope::Project)),
                Err(_) => None,
            });
    if profile_id.is_none() {
        err(
            "snapshot.profile-id",
            "profileId",
            "profileId must be <scope>:<id>.",
        );
    }
    let Some(profile) = map.get("profile").filter(|p| p.is_object()) else {
        err("snapshot.profile", "profile", "profile must be an object.");
        return diags;
    };
    if let Some(key) = &profile_id {
        if profile.get("id").and_then(Value::as_str) != Some(key.id.as_str()) {
            err(
                "snapshot.profile-id-field",
                "profile.id",
                "profile.id differs from profileId.",
            );
        }
    }
    if !profile.get("model").is_some_and(Value::is_object) {
        err(
            "snapshot.profile-model",
            "profile.model",
            "profile.model must be an object.",
        );
    }
    if !profile.get("thinkingLevel").is_some_and(Value::is_string) {
        err(
            "snapshot.profile-thinking",
            "profile.thinkingLevel",
            "profile.thinkingLevel must be a string.",
        );
    }
    match map.get("profileFingerprint").and_then(Value::as_str) {
        Some(fp) if is_fingerprint(fp) => {
            if fingerprint(profile) != fp {
                err(
                    "snapshot.profile-fingerprint",
                    "profileFingerprint",
                    "profileFingerprint does not match the profile.",
                );
            }
        }
        _ => err(
            "fingerprint.invalid",
            "profileFingerprint",
            "profileFingerprint must be a sha256:v1 fingerprint.",
        ),
    }
    let stack = map.get("promptStack").unwrap_or(&Value::Null);
    let stack_id = map.get("promptStackId").unwrap_or(&Value::Null);
    let stack_fp = map.get("promptStackFingerprint").unwrap_or(&Value::Null);
    let reference = profile.get("promptStack").unwrap_or(&Value::Null);
    if reference.is_null() {
        if !stack.is_null() {
            err(
                "snapshot.unexpected-stack",
                "promptStack",
                "A profile without a stack cannot carry one.",
            );
        }
        if !stack_id.is_null() {
            err(
                "snapshot.null-stack-id",
                "promptStackId",
                "promptStackId must be null without a stack.",
            );
        }
        if !stack_fp.is_null() {
            err(
                "snapshot.null-stack-fingerprint",
                "promptStackFingerprint",
                "promptStackFingerprint must be null without a stack.",
            );
        }
    } else {
        match stack {
            Value::Object(_) => match stack_fp.as_str() {
                Some(fp) if is_fingerprint(fp) => {
                    if fingerprint(stack) != fp {
                        err(
                            "snapshot.stack-fingerprint",
                            "promptStackFingerprint",
                            "promptStackFingerprint does not match the stack.",
                        );
                    }
                }
                _ => err(
                    "fingerprint.invalid",
                    "promptStackFingerprint",
                    "promptStackFingerprint must be a sha256:v1 fingerprint.",
                ),
            },
            _ => err(
                "snapshot.stack",
                "promptStack",
                "promptStack must be an object.",
            ),
        }
        let key = stack_id
            .as_str()
            .and_then(|s| parse_selector(s).ok())
            .filter(|s| s.scope().is_some());
        match key {
            None => err(
                "snapshot.stack-reference",
                "promptStackId",
                "promptStackId must be <scope>:<id>.",
            ),
            Some(sel) => {
                if stack.get("id").and_then(Value::as_str) != Some(sel.id()) {
                    err(
                        "snapshot.stack-reference",
                        "promptStackId",
                        "promptStackId differs from the stack's id.",
                    );
                }
                let global_profile = profile_id.as_ref().is_some_and(|_| {
                    map.get("profileId")
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.starts_with("global:"))
                });
                if global_profile && sel.scope() == Some(Scope::Project) {
                    err(
                        "snapshot.stack-reference-scope",
                        "promptStackId",
                        "A global profile cannot use a project stack.",
                    );
                }
            }
        }
    }
    match map.get("dependencies").and_then(Value::as_array) {
        None => err(
            "snapshot.dependencies",
            "dependencies",
            "dependencies must be an array.",
        ),
        Some(list) => {
            let mut seen = Vec::new();
            for d in list {
                match d.get("identity").and_then(Value::as_str) {
                    None => err(
                        "snapshot.dependency",
                        "dependencies",
                        "A dependency needs an identity.",
                    ),
                    Some(id) if seen.contains(&id) => err(
                        "snapshot.duplicate-dependency",
                        "dependencies",
                        "Duplicate dependency.",
                    ),
                    Some(id) => seen.push(id),
                }
            }
        }
    }
    diags
}

/// The level of a diagnostic list's worst entry (handy for callers).
pub fn worst(diags: &[D]) -> Option<Level> {
    diags.iter().map(|d| d.level).min()
}

/// Template names every stack may use without an extension (§D3).
pub const BUILTIN_MACROS: [&str; 7] = [
    "cwd",
    "date",
    "time",
    "lastUserMessage",
    "selectedTools",
    "tools",
    "activeModel",
];

/// The inner text of every `{{ … }}` tag of `text`, trimmed.
fn tags(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    out
}

/// Scans `stack` for extension dependencies: slot items whose slot is not built-in, and custom
/// macros its templates reference (`{{ extensions.X }}`, or a legacy bare `{{X}}` that is neither
/// a stack variable/parameter nor a built-in name). A reference `registered` answers (by kind and
/// name) becomes a dependency; the others are missing. Forge-v1 (schema 2) template analysis
/// errors are `prompt-stack.template-analyze` errors. Dependencies are sorted by kind, then name.
pub fn scan_dependencies(
    stack: &PromptStack,
    registered: &[Dependency],
) -> (DependencyScan, Vec<D>) {
    let mut wanted: Vec<(String, String)> = Vec::new();
    let mut diags = Vec::new();
    let mut want = |kind: &str, name: &str| {
        let entry = (kind.to_string(), name.to_string());
        if !wanted.contains(&entry) {
            wanted.push(entry);
        }
    };
    let known = |name: &str| {
        BUILTIN_MACROS.contains(&name)
            || stack.variable(name).is_some()
            || stack
                .parameters
                .as_ref()
                .is_some_and(|p| p.contains_key(name))
    };
    for item in stack.items.iter().filter(|i| i.is_enabled()) {
        if let Some(slot) = item.slot_name() {
            if !crate::stack::BUILTIN_SLOTS.contains(&slot) {
                want("slot", slot);
            }
        }
        let Some(content) = item.content() else {
            continue;
        };
        if stack.schema_version == crate::stack::SchemaVersion::V2 {
            for e in crate::template::analyze_text(content).errors {
                diags.push(D::error(
                    "prompt-stack.template-analyze",
                    &format!("items.{}", item.id),
                    e.message,
                ));
            }
        }
        for tag in tags(content) {
            let head = tag
                .split(|c: char| c == '|' || c.is_whitespace())
                .next()
                .unwrap_or("");
            if let Some(name) = head.strip_prefix("extensions.") {
                if !name.is_empty() {
                    want("macro", name);
                }
            } else if !head.is_empty()
                && head
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !known(head)
            {
                want("macro", head);
            }
        }
    }
    let mut scan = DependencyScan::default();
    for (kind, name) in wanted {
        match registered.iter().find(|d| d.kind == kind && d.name == name) {
            Some(d) => scan.registered.push(d.clone()),
            None => scan.missing.push((kind, name)),
        }
    }
    scan.registered.sort();
    scan.missing.sort();
    (scan, diags)
}
