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
use crate::id::{parse_selector, ResourceKey, Scope, SelectorError};
use crate::json;

/// Built-in default backend.
pub const DEFAULT_BACKEND: &str = "pi-subprocess-readonly";
/// Default timeout (60 s).
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Smallest and largest accepted timeouts (1 s – 1 h).
pub const MIN_TIMEOUT_MS: u64 = 1_000;
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// Largest `subagents.json` the editor writes (256 KiB).
pub const MAX_SUBAGENTS_BYTES: u64 = 262_144;

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

/// The canonical key of a raw `profiles` key (in either file a bare `<id>` means `project:<id>`)
/// and whether the key was bare.
pub fn profile_entry_key(raw_key: &str) -> Result<(ResourceKey, bool), SelectorError> {
    let selector = parse_selector(raw_key)?;
    Ok((selector.key_in(Scope::Project), selector.scope().is_none()))
}

fn parse_profiles(
    profiles: &Map<String, Value>,
    scope: Scope,
    config: &mut SubagentsConfig,
    diags: &mut Vec<Diagnostic>,
) {
    for (raw_key, entry) in profiles {
        let field = format!("profiles.{raw_key}");
        let key = match profile_entry_key(raw_key) {
            Ok((key, bare)) => {
                if bare && scope == Scope::Global {
                    diags.push(
                        Diagnostic::warning(format!(
                            "Bare key {raw_key} in the global subagents.json means project:{raw_key}; write global:{raw_key} for the global profile."
                        ))
                        .with_field(field.clone()),
                    );
                }
                key
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

/// The raw key of `profile`'s entry in one file's raw value, as [`parse_subagents_value`] reads
/// it: of the keys that canonicalize to `profile`, the last one whose entry is an object (a later
/// duplicate replaces an earlier one), else the last one at all. `None` when the file names the
/// profile nowhere (or the value, or its `profiles`, is not an object).
pub fn find_profile_key(raw: &Value, profile: &ResourceKey) -> Option<String> {
    let profiles = raw.get("profiles")?.as_object()?;
    let names = |k: &str| profile_entry_key(k).is_ok_and(|(key, _)| key == *profile);
    profiles
        .iter()
        .rev()
        .find(|(k, v)| v.is_object() && names(k))
        .or_else(|| profiles.iter().rev().find(|(k, _)| names(k)))
        .map(|(k, _)| k.clone())
}

/// The key a new entry for `profile` gets in the file of `file_scope`: the bare id for a project
/// profile in the project file, else the scoped `scope:id` (never a bare key in the global file,
/// where a bare key would mean `project:<id>` and warn).
pub fn new_profile_key(file_scope: Scope, profile: &ResourceKey) -> String {
    if file_scope == Scope::Project && profile.scope == Scope::Project {
        profile.id.clone()
    } else {
        profile.to_string()
    }
}

/// Why [`set_profile_entry`] cannot edit a file's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditError {
    /// The file's root is not a JSON object (names its type).
    NotObject(&'static str),
    /// `profiles` is present but not an object (names its type).
    ProfilesNotObject(&'static str),
    /// A timeout outside 1,000–3,600,000 ms.
    Timeout(u64),
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditError::NotObject(t) => write!(
                f,
                "subagents.json must contain a JSON object, not {t}; fix the file first."
            ),
            EditError::ProfilesNotObject(t) => write!(
                f,
                "profiles in subagents.json must be an object, not {t}; fix the file first."
            ),
            EditError::Timeout(ms) => write!(
                f,
                "The timeout must be from 1 to 3600 seconds; {ms} ms is outside that range."
            ),
        }
    }
}

/// `raw` (one `subagents.json` of `file_scope`; `Null` for a file that does not exist yet) with
/// `profile`'s entry set to `enabled` and `timeout_ms` (`None`: the key is removed, so the
/// timeout is inherited). Every other key and entry, and the entry's other keys (`backend`,
/// unknown ones), stay as they were and where they were. The entry edited is the one
/// [`find_profile_key`] finds; without one a new entry is appended under [`new_profile_key`].
pub fn set_profile_entry(
    raw: &Value,
    file_scope: Scope,
    profile: &ResourceKey,
    enabled: bool,
    timeout_ms: Option<u64>,
) -> Result<Value, EditError> {
    if let Some(ms) = timeout_ms {
        if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&ms) {
            return Err(EditError::Timeout(ms));
        }
    }
    let mut root = match raw {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        other => return Err(EditError::NotObject(json::type_name(other))),
    };
    let key =
        find_profile_key(raw, profile).unwrap_or_else(|| new_profile_key(file_scope, profile));
    let profiles = root
        .entry("profiles")
        .or_insert_with(|| Value::Object(Map::new()));
    let profiles = match profiles {
        Value::Object(map) => map,
        other => return Err(EditError::ProfilesNotObject(json::type_name(other))),
    };
    let entry = profiles
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    let Value::Object(entry) = entry else {
        unreachable!("the entry was just made an object")
    };
    entry.insert("enabled".into(), Value::Bool(enabled));
    match timeout_ms {
        Some(ms) => {
            entry.insert("timeoutMs".into(), Value::from(ms));
        }
        None => {
            entry.shift_remove("timeoutMs");
        }
    }
    Ok(Value::Object(root))
}

/// The file whose entry decides `profile`'s settings, so an editor changes it there: the
/// project file's when the project is trusted and it names the profile (project wins, as in
/// [`profile_settings`]), else the global file's when it names it, else the file of the
/// profile's own scope. `project`/`global`: the parsed files (`None` when absent).
pub fn effective_entry_scope(
    project: Option<&SubagentsConfig>,
    global: Option<&SubagentsConfig>,
    trusted: bool,
    profile: &ResourceKey,
) -> Scope {
    let names = |c: Option<&SubagentsConfig>| {
        c.is_some_and(|c| c.profiles.iter().any(|(k, _)| k == profile))
    };
    if trusted && names(project) {
        Scope::Project
    } else if names(global) {
        Scope::Global
    } else {
        profile.scope
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(text: &str) -> ResourceKey {
        parse_selector(text).unwrap().key_in(Scope::Project)
    }

    #[test]
    fn entry_keys_canonicalize_like_the_parser() {
        assert_eq!(
            profile_entry_key("reviewer"),
            Ok((ResourceKey::new(Scope::Project, "reviewer"), true))
        );
        assert_eq!(
            profile_entry_key("global:reviewer"),
            Ok((ResourceKey::new(Scope::Global, "reviewer"), false))
        );
        assert_eq!(
            profile_entry_key("project:reviewer"),
            Ok((ResourceKey::new(Scope::Project, "reviewer"), false))
        );
        assert!(profile_entry_key("bad key").is_err());
    }

    #[test]
    fn finds_the_raw_key_the_parser_uses() {
        let raw = json!({"profiles": {
            "reviewer": {"enabled": true},
            "global:reviewer": {"enabled": false},
            "project:writer": 3,
            "writer": {"enabled": true},
            "global:odd": "no",
        }});
        assert_eq!(
            find_profile_key(&raw, &key("reviewer")).as_deref(),
            Some("reviewer")
        );
        assert_eq!(
            find_profile_key(&raw, &key("global:reviewer")).as_deref(),
            Some("global:reviewer")
        );
        // The object entry wins over a later or earlier non-object duplicate.
        assert_eq!(
            find_profile_key(&raw, &key("writer")).as_deref(),
            Some("writer")
        );
        assert_eq!(
            find_profile_key(&raw, &key("global:odd")).as_deref(),
            Some("global:odd")
        );
        assert_eq!(find_profile_key(&raw, &key("other")), None);
        assert_eq!(find_profile_key(&json!([]), &key("reviewer")), None);
        assert_eq!(
            find_profile_key(&json!({"profiles": []}), &key("reviewer")),
            None
        );
        // Of two object entries, the later one (the one the parser keeps).
        let dup = json!({"profiles": {"project:a": {}, "a": {}}});
        assert_eq!(find_profile_key(&dup, &key("a")).as_deref(), Some("a"));
    }

    #[test]
    fn new_entries_use_bare_keys_only_for_project_profiles_in_the_project_file() {
        assert_eq!(new_profile_key(Scope::Project, &key("a")), "a");
        assert_eq!(
            new_profile_key(Scope::Project, &key("global:a")),
            "global:a"
        );
        assert_eq!(new_profile_key(Scope::Global, &key("global:a")), "global:a");
        assert_eq!(new_profile_key(Scope::Global, &key("a")), "project:a");
    }

    #[test]
    fn setting_an_entry_keeps_everything_else_in_place() {
        let raw = json!({
            "backend": "pi-subprocess-readonly",
            "profiles": {
                "other": {"enabled": true, "x": 1},
                "reviewer": {"backend": "b1", "enabled": false, "timeoutMs": 5000, "note": "n"},
            },
            "unknown": [1, 2],
        });
        let set =
            set_profile_entry(&raw, Scope::Project, &key("reviewer"), true, Some(120_000)).unwrap();
        assert_eq!(
            json::to_pretty(&set),
            json::to_pretty(&json!({
                "backend": "pi-subprocess-readonly",
                "profiles": {
                    "other": {"enabled": true, "x": 1},
                    "reviewer": {"backend": "b1", "enabled": true, "timeoutMs": 120000, "note": "n"},
                },
                "unknown": [1, 2],
            }))
        );
        let inherit =
            set_profile_entry(&set, Scope::Project, &key("reviewer"), false, None).unwrap();
        assert_eq!(
            json::to_compact(&inherit),
            r#"{"backend":"pi-subprocess-readonly","profiles":{"other":{"enabled":true,"x":1},"reviewer":{"backend":"b1","enabled":false,"note":"n"}},"unknown":[1,2]}"#
        );
    }

    #[test]
    fn new_entries_are_appended_under_the_right_key() {
        assert_eq!(
            json::to_compact(
                &set_profile_entry(&Value::Null, Scope::Project, &key("a"), true, None).unwrap()
            ),
            r#"{"profiles":{"a":{"enabled":true}}}"#
        );
        assert_eq!(
            json::to_compact(
                &set_profile_entry(
                    &json!({"timeoutMs": 2000}),
                    Scope::Global,
                    &key("global:a"),
                    true,
                    Some(1000)
                )
                .unwrap()
            ),
            r#"{"timeoutMs":2000,"profiles":{"global:a":{"enabled":true,"timeoutMs":1000}}}"#
        );
        assert_eq!(
            json::to_compact(
                &set_profile_entry(
                    &json!({"profiles": {"global:a": {"enabled": true}}}),
                    Scope::Global,
                    &key("a"),
                    true,
                    None
                )
                .unwrap()
            ),
            r#"{"profiles":{"global:a":{"enabled":true},"project:a":{"enabled":true}}}"#
        );
        // An existing bare key in the global file (it means project:a) is edited in place.
        assert_eq!(
            json::to_compact(
                &set_profile_entry(
                    &json!({"profiles": {"a": {"enabled": false}}}),
                    Scope::Global,
                    &key("a"),
                    true,
                    None
                )
                .unwrap()
            ),
            r#"{"profiles":{"a":{"enabled":true}}}"#
        );
        // A non-object entry is replaced.
        assert_eq!(
            json::to_compact(
                &set_profile_entry(
                    &json!({"profiles": {"a": 7}}),
                    Scope::Project,
                    &key("a"),
                    false,
                    Some(60_000)
                )
                .unwrap()
            ),
            r#"{"profiles":{"a":{"enabled":false,"timeoutMs":60000}}}"#
        );
    }

    #[test]
    fn files_that_cannot_be_edited_say_why() {
        assert_eq!(
            set_profile_entry(&json!([1]), Scope::Project, &key("a"), true, None),
            Err(EditError::NotObject("array"))
        );
        assert_eq!(
            set_profile_entry(
                &json!({"profiles": "x"}),
                Scope::Project,
                &key("a"),
                true,
                None
            ),
            Err(EditError::ProfilesNotObject("string"))
        );
        let err =
            set_profile_entry(&json!({}), Scope::Project, &key("a"), true, Some(999)).unwrap_err();
        assert_eq!(err, EditError::Timeout(999));
        assert_eq!(
            err.to_string(),
            "The timeout must be from 1 to 3600 seconds; 999 ms is outside that range."
        );
        assert_eq!(
            set_profile_entry(&json!({}), Scope::Project, &key("a"), true, Some(3_600_001)),
            Err(EditError::Timeout(3_600_001))
        );
        assert!(
            set_profile_entry(&json!({}), Scope::Project, &key("a"), true, Some(3_600_000)).is_ok()
        );
    }

    #[test]
    fn the_effective_entry_lives_where_profile_settings_finds_it() {
        let parse = |v: Value, scope| parse_subagents_value(&v, scope, "subagents.json").config;
        let project = parse(
            json!({"profiles": {"a": {"enabled": true}}}),
            Scope::Project,
        );
        let global = parse(
            json!({"profiles": {"project:a": {"enabled": false}, "global:b": {}}}),
            Scope::Global,
        );
        let a = key("a");
        assert_eq!(
            effective_entry_scope(Some(&project), Some(&global), true, &a),
            Scope::Project
        );
        assert_eq!(
            effective_entry_scope(Some(&project), Some(&global), false, &a),
            Scope::Global
        );
        assert_eq!(
            effective_entry_scope(None, Some(&global), true, &key("global:b")),
            Scope::Global
        );
        assert_eq!(effective_entry_scope(None, None, true, &a), Scope::Project);
        assert_eq!(
            effective_entry_scope(Some(&project), None, true, &key("global:c")),
            Scope::Global
        );
        // The same answer as profile_settings: the project entry decides when trusted.
        let layers = SettingsLayers {
            global: vec![&global],
            project: vec![&project],
        };
        assert!(profile_settings(&layers, true, &a, None).enabled);
        assert!(!profile_settings(&layers, false, &a, None).enabled);
    }
}
