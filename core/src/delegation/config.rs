//! `subagents.json` (project `.pi/forge/subagents.json`, trusted projects only; global
//! `~/.pi/forge/subagents.json` always) and the effective delegation settings (§D8).
//!
//! Shape: `{backend?, timeoutMs?, allowAgentInvocationWithoutApproval?, summaryInToolDescription?,
//! profiles?: {"project:<id>"|"global:<id>"|"<id>": {enabled?, backend?: string|null,
//! timeoutMs?: integer|null}}}`. Like `config.json`, problems are warnings and the bad value is
//! ignored; a bad file never stops anything, it only leaves delegation with defaults (which keep
//! every profile disabled and approval required). The legacy `config.json` → `subagents` object
//! has the same shape and is applied before the dedicated file of the same scope.
//!
//! Decisions: bare profile keys mean `project:<id>` in both files (a bare key in the global file
//! warns); `allowAgentInvocationWithoutApproval` counts only from a trusted project's file (in the
//! global file it warns and is ignored); a non-boolean value there is treated as `false`.

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::id::{parse_selector, ResourceKey, Scope};
use crate::json;

/// Built-in default backend.
pub const DEFAULT_BACKEND: &str = "pi-subprocess-readonly";
/// Default timeout (60 s).
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Smallest and largest accepted timeouts (1 s – 1 h).
pub const MIN_TIMEOUT_MS: u64 = 1_000;
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

const TOP_KEYS: [&str; 6] = [
    "backend",
    "timeoutMs",
    "allowAgentInvocationWithoutApproval",
    "summaryInToolDescription",
    "maxConcurrentRuns",
    "profiles",
];

/// Children that run at once when no file says otherwise.
pub const DEFAULT_MAX_CONCURRENT_RUNS: u64 = 4;
/// The most `maxConcurrentRuns` may allow.
pub const MAX_CONCURRENT_RUNS: u64 = 16;

/// Per-profile policy. `backend`/`timeout_ms`: `None` = key absent or `null` (inherit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfilePolicy {
    pub enabled: bool,
    pub backend: Option<String>,
    pub timeout_ms: Option<u64>,
}

/// One parsed file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubagentsConfig {
    pub backend: Option<String>,
    pub timeout_ms: Option<u64>,
    /// `Some(true)` only for a boolean `true` in a project file.
    pub allow_without_approval: Option<bool>,
    pub summary_in_tool_description: Option<bool>,
    /// `maxConcurrentRuns` (a pi-forge extension of the format, 1–16): how many children run at
    /// once.
    pub max_concurrent_runs: Option<u64>,
    /// Profile entries keyed by canonical `scope:id`, in file order.
    pub profiles: Vec<(ResourceKey, ProfilePolicy)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedSubagents {
    pub config: SubagentsConfig,
    pub diagnostics: Vec<Diagnostic>,
}

fn timeout(value: &Value, field: &str, diags: &mut Vec<Diagnostic>) -> Option<u64> {
    let ok = super::pos_int(value).filter(|n| (MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(n));
    if ok.is_none() {
        diags.push(
            Diagnostic::warning(format!(
                "{field} must be an integer from 1000 to 3600000 (milliseconds); it is ignored."
            ))
            .with_field(field),
        );
    }
    ok
}

fn backend(value: &Value, field: &str, diags: &mut Vec<Diagnostic>) -> Option<String> {
    match value.as_str() {
        Some(s) if super::is_opaque_id(s) => Some(s.to_string()),
        _ => {
            diags.push(
                Diagnostic::warning(format!("{field} must be a backend id; it is ignored."))
                    .with_field(field),
            );
            None
        }
    }
}

/// Parses the bytes of a `subagents.json` of `scope`. `label` names the file in messages.
pub fn parse_subagents_bytes(bytes: &[u8], scope: Scope) -> ParsedSubagents {
    match json::parse_bytes(bytes) {
        Ok(value) => parse_subagents_value(&value, scope, "subagents.json"),
        Err(e) => ParsedSubagents {
            config: SubagentsConfig::default(),
            diagnostics: vec![Diagnostic::warning(format!(
                "Failed to parse subagents.json: {e}; delegation uses defaults."
            ))],
        },
    }
}

/// Parses the legacy `config.json` → `subagents` object: same shape, plus a warning that it is
/// deprecated.
pub fn parse_legacy_subagents(config_json: &Value, scope: Scope) -> Option<ParsedSubagents> {
    let value = config_json.get("subagents")?;
    let mut parsed = parse_subagents_value(value, scope, "config.json subagents");
    parsed.diagnostics.insert(
        0,
        Diagnostic::warning(
            "config.json subagents is a legacy location; move these settings to subagents.json.",
        )
        .with_field("subagents"),
    );
    Some(parsed)
}

/// Parses a parsed subagents object.
pub fn parse_subagents_value(value: &Value, scope: Scope, label: &str) -> ParsedSubagents {
    let mut diags = Vec::new();
    let mut config = SubagentsConfig::default();
    let Some(map) = value.as_object() else {
        diags.push(Diagnostic::warning(format!(
            "{label} must contain a JSON object, not {}; delegation uses defaults.",
            json::type_name(value)
        )));
        return ParsedSubagents {
            config,
            diagnostics: diags,
        };
    };
    for key in super::unknown_keys(map, &TOP_KEYS) {
        diags.push(
            Diagnostic::warning(format!("Unknown key {key} in {label}; it is ignored."))
                .with_field(key),
        );
    }
    if let Some(v) = map.get("backend") {
        config.backend = backend(v, "backend", &mut diags);
    }
    if let Some(v) = map.get("timeoutMs") {
        config.timeout_ms = timeout(v, "timeoutMs", &mut diags);
    }
    if let Some(v) = map.get("allowAgentInvocationWithoutApproval") {
        if scope == Scope::Global {
            diags.push(
                Diagnostic::warning(
                    "allowAgentInvocationWithoutApproval is honoured only in a trusted project's subagents.json; it is ignored here.",
                )
                .with_field("allowAgentInvocationWithoutApproval"),
            );
        } else if let Some(b) = v.as_bool() {
            config.allow_without_approval = Some(b);
        } else {
            diags.push(
                Diagnostic::warning(
                    "allowAgentInvocationWithoutApproval must be a boolean; approval stays required.",
                )
                .with_field("allowAgentInvocationWithoutApproval"),
            );
            config.allow_without_approval = Some(false);
        }
    }
    if let Some(v) = map.get("summaryInToolDescription") {
        match v.as_bool() {
            Some(b) => config.summary_in_tool_description = Some(b),
            None => diags.push(
                Diagnostic::warning("summaryInToolDescription must be a boolean; it is ignored.")
                    .with_field("summaryInToolDescription"),
            ),
        }
    }
    if let Some(v) = map.get("maxConcurrentRuns") {
        match super::pos_int(v).filter(|n| (1..=MAX_CONCURRENT_RUNS).contains(n)) {
            Some(n) => config.max_concurrent_runs = Some(n),
            None => diags.push(
                Diagnostic::warning(format!(
                    "maxConcurrentRuns must be an integer from 1 to {MAX_CONCURRENT_RUNS}; it is ignored."
                ))
                .with_field("maxConcurrentRuns"),
            ),
        }
    }
    match map.get("profiles") {
        None => {}
        Some(Value::Object(profiles)) => parse_profiles(profiles, scope, &mut config, &mut diags),
        Some(_) => diags.push(
            Diagnostic::warning("profiles must be an object; it is ignored.")
                .with_field("profiles"),
        ),
    }
    ParsedSubagents {
        config,
        diagnostics: diags,
    }
}

fn parse_profiles(
    profiles: &Map<String, Value>,
    scope: Scope,
    config: &mut SubagentsConfig,
    diags: &mut Vec<Diagnostic>,
) {
    for (raw_key, entry) in profiles {
        let field = format!("profiles.{raw_key}");
        let key = match parse_selector(raw_key) {
            Ok(selector) => {
                if selector.scope().is_none() && scope == Scope::Global {
                    diags.push(
                        Diagnostic::warning(format!(
                            "Bare key {raw_key} in the global subagents.json means project:{raw_key}; write global:{raw_key} for the global profile."
                        ))
                        .with_field(field.clone()),
                    );
                }
                selector.key_in(Scope::Project)
            }
            Err(e) => {
                diags.push(
                    Diagnostic::warning(format!(
                        "Profile key {raw_key:?} is invalid: {e}; it is ignored."
                    ))
                    .with_field(field),
                );
                continue;
            }
        };
        let Some(entry) = entry.as_object() else {
            diags.push(
                Diagnostic::warning(format!("{field} must be an object; it is ignored."))
                    .with_field(field),
            );
            continue;
        };
        let mut policy = ProfilePolicy::default();
        for k in super::unknown_keys(entry, &["enabled", "backend", "timeoutMs"]) {
            diags.push(
                Diagnostic::warning(format!("Unknown key {field}.{k}; it is ignored."))
                    .with_field(format!("{field}.{k}")),
            );
        }
        match entry.get("enabled") {
            None => {}
            Some(Value::Bool(b)) => policy.enabled = *b,
            Some(_) => diags.push(
                Diagnostic::warning(format!(
                    "{field}.enabled must be a boolean; the profile stays disabled."
                ))
                .with_field(format!("{field}.enabled")),
            ),
        }
        match entry.get("backend") {
            None | Some(Value::Null) => {}
            Some(v) => policy.backend = backend(v, &format!("{field}.backend"), diags),
        }
        match entry.get("timeoutMs") {
            None | Some(Value::Null) => {}
            Some(v) => policy.timeout_ms = timeout(v, &format!("{field}.timeoutMs"), diags),
        }
        config.profiles.retain(|(k, _)| *k != key);
        config.profiles.push((key, policy));
    }
}

/// The layers in precedence order, lowest first: legacy global, global, legacy project, project.
/// Untrusted projects contribute nothing (pass `None`).
#[derive(Clone, Debug, Default)]
pub struct SettingsLayers<'a> {
    pub global: Vec<&'a SubagentsConfig>,
    pub project: Vec<&'a SubagentsConfig>,
}

/// Effective settings of one profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileSettings {
    pub enabled: bool,
    pub backend: String,
    pub timeout_ms: u64,
    /// Unattended mode (`allowAgentInvocationWithoutApproval` from a trusted project file).
    pub unattended: bool,
}

/// Settings for `profile` (canonical key): backend = per-run override › profile entry › project ›
/// global › built-in; timeout = profile › project › global › 60,000. Layers of the same scope
/// apply in order (legacy first, dedicated file last wins).
pub fn profile_settings(
    layers: &SettingsLayers,
    trusted: bool,
    profile: &ResourceKey,
    per_run_backend: Option<&str>,
) -> ProfileSettings {
    let project: &[&SubagentsConfig] = if trusted { &layers.project } else { &[] };
    let ordered: Vec<&SubagentsConfig> = layers.global.iter().chain(project).copied().collect();
    let entry = ordered.iter().rev().find_map(|c| {
        c.profiles
            .iter()
            .find(|(k, _)| k == profile)
            .map(|(_, p)| p)
    });
    let last =
        |f: &dyn Fn(&SubagentsConfig) -> Option<String>| ordered.iter().rev().find_map(|c| f(c));
    let backend = per_run_backend
        .map(str::to_string)
        .or_else(|| entry.and_then(|e| e.backend.clone()))
        .or_else(|| last(&|c| c.backend.clone()))
        .unwrap_or_else(|| DEFAULT_BACKEND.to_string());
    let timeout_ms = entry
        .and_then(|e| e.timeout_ms)
        .or_else(|| ordered.iter().rev().find_map(|c| c.timeout_ms))
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    let unattended = project
        .iter()
        .rev()
        .find_map(|c| c.allow_without_approval)
        .unwrap_or(false);
    ProfileSettings {
        enabled: entry.is_some_and(|e| e.enabled),
        backend,
        timeout_ms,
        unattended,
    }
}

/// How many children may run at once: a trusted project's `maxConcurrentRuns` › the global
/// file's › [`DEFAULT_MAX_CONCURRENT_RUNS`].
pub fn max_concurrent_runs(layers: &SettingsLayers, trusted: bool) -> u64 {
    let project: &[&SubagentsConfig] = if trusted { &layers.project } else { &[] };
    layers
        .global
        .iter()
        .chain(project)
        .rev()
        .find_map(|c| c.max_concurrent_runs)
        .unwrap_or(DEFAULT_MAX_CONCURRENT_RUNS)
}

/// Most profiles named in the tool description summary.
pub const SUMMARY_MAX_PROFILES: usize = 8;
/// Longest tool description summary (characters).
pub const SUMMARY_MAX_CHARS: usize = 1_000;

/// One enabled profile as the summary sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryEntry {
    pub key: ResourceKey,
    pub description: Option<String>,
    /// Usable and resolvable now.
    pub ready: bool,
}

/// The `summaryInToolDescription` text: ready profiles first (then the others), at most 8, one
/// line each (`- scope:id: description` or `- scope:id (not ready)`), whole lines only, at most
/// 1,000 characters; an ellipsis line says how many were left out.
pub fn tool_description_summary(entries: &[SummaryEntry]) -> String {
    let mut sorted: Vec<&SummaryEntry> = entries.iter().filter(|e| e.ready).collect();
    sorted.extend(entries.iter().filter(|e| !e.ready));
    let mut lines: Vec<String> = Vec::new();
    let mut used = 0;
    for e in &sorted {
        if lines.len() == SUMMARY_MAX_PROFILES {
            break;
        }
        let line = match (&e.description, e.ready) {
            (_, false) => format!("- {} (not ready)", e.key),
            (Some(d), true) => format!("- {}: {d}", e.key),
            (None, true) => format!("- {}", e.key),
        };
        let cost = line.chars().count() + usize::from(!lines.is_empty());
        if used + cost > SUMMARY_MAX_CHARS - 32 {
            break;
        }
        used += cost;
        lines.push(line);
    }
    let left = sorted.len() - lines.len();
    if left > 0 {
        lines.push(format!("- … and {left} more"));
    }
    lines.join("\n")
}
