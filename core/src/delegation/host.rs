//! The host side of one delegated run, end to end and pure: from a profile selector and a task
//! to a sealed plan (§D1–D7), and from what the child Pi sent and answered to a verified outcome.
//!
//! The one backend we ship is `pi-subprocess-readonly`: a clean child `pi --mode json` with only
//! the read-only candidate tools (read, grep, find, ls), the exact model and thinking level, and
//! a small child bridge that forces the approved system prompt and messages and hands every
//! provider payload to the host before it is sent ([`super::verify`] checks it). It runs as the same OS user ("shared-user, not an OS sandbox").
//!
//! Ids, the clock and the loaded settings are inputs; the server draws them and owns processes
//! and files.

use serde_json::{json, Value};

use super::config::{profile_settings, ProfileSettings, SettingsLayers, DEFAULT_BACKEND};
use super::context::portable_messages;
use super::negotiate::{negotiate, readonly_catalog};
use super::plan::{
    create_plan, prepare_prompt, PlanInput, PrepareInput, RuntimeFidelity, SealedPlan, Stamp,
};
use super::request::{decode_request, foreground_request, AgentRequest};
use super::snapshot::{build_snapshot, scan_dependencies, DependencyScan, StackLookup};
use super::ContractDiagnostic as D;
use crate::compile::MacroRegistry;
use crate::id::{parse_selector, Scope, Selector};
use crate::runtime::Clock;
use crate::workspace::{ProfileStackError, Resolved, WorkspaceSnapshot};

/// The ids of one preparation (drawn by the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanIds {
    /// `request:<uuid>`.
    pub request_id: String,
    /// `preflight:<uuid>`.
    pub preflight_id: String,
    pub stamp: Stamp,
}

/// Everything [`plan_run`] reads.
pub struct HostPlanInput<'a> {
    pub workspace: &'a WorkspaceSnapshot,
    pub settings: &'a SettingsLayers<'a>,
    pub trusted: bool,
    /// The profile selector as the user or the model wrote it (`reviewer`, `global:reviewer`).
    pub profile: &'a str,
    pub task: &'a str,
    /// A per-run timeout (seconds, 1–3,600) over the configured one.
    pub timeout_override_ms: Option<u64>,
    pub cwd: &'a str,
    pub clock: Clock,
    pub ids: &'a PlanIds,
    pub parent_session: Option<&'a str>,
}

/// A sealed plan and what it was made from.
#[derive(Clone, Debug, PartialEq)]
pub struct HostPlan {
    pub plan: SealedPlan,
    pub request: AgentRequest,
    pub settings: ProfileSettings,
    /// The timeout the run uses (milliseconds).
    pub timeout_ms: u64,
}

/// Longest per-run timeout (seconds).
pub const MAX_TIMEOUT_SECONDS: u64 = 3_600;

fn fail(code: &str, path: &str, message: impl Into<String>) -> Vec<D> {
    vec![D::error(code, path, message)]
}

/// The accepted preflight of `pi-subprocess-readonly` for a model and thinking level: the
/// read-only catalog and an honest shared-user access receipt (no isolation claimed).
pub fn readonly_preflight(
    preflight_id: &str,
    provider: &str,
    model: &str,
    thinking_level: &str,
) -> Value {
    let catalog: Vec<Value> = readonly_catalog()
        .iter()
        .map(|t| json!({"id": t.id, "name": t.name(), "effects": t.effects()}))
        .collect();
    json!({
        "status": "accepted",
        "preflightId": preflight_id,
        "backend": {"id": DEFAULT_BACKEND, "version": "1"},
        "model": {"provider": provider, "id": model},
        "thinkingLevel": thinking_level,
        "toolCatalog": catalog,
        "access": {
            "level": "read-only",
            "mounts": [{"workspaceHandle": "project", "mountId": "project", "mode": "read-only"}],
            "workingDirectory": {"mountId": "project", "path": "."},
            "network": "allow",
            "process": false,
            "executionBoundary": "shared-user",
            "enforcement": {
                "readOnlyMountIsolation": false,
                "readWriteMountIsolation": false,
                "symlinkSafeContainment": false,
                "processIsolation": false,
                "agentNetworkIsolation": false
            }
        },
        "limits": {"timeoutMs": {"enforcement": "host-abort"}},
        "diagnostics": []
    })
}

/// §D8 step 5 and §D1–D7: checks trust and the profile's delegation settings, resolves the
/// profile into its snapshot, compiles its stack for the child (empty base prompt, the
/// negotiated read-only tools), budgets and seals the plan. Nothing is sent anywhere.
pub fn plan_run(input: &HostPlanInput) -> Result<HostPlan, Vec<D>> {
    if !input.trusted {
        return Err(fail(
            "host.trust",
            "project",
            "Delegation needs a trusted project.",
        ));
    }
    let selector = parse_selector(input.profile)
        .map_err(|e| fail("host.profile-missing", "profileId", e.to_string()))?;
    let entry = match input.workspace.resolve_profile(&selector) {
        Resolved::Found(entry) => entry,
        Resolved::Ambiguous(_) => {
            return Err(fail(
                "host.profile-missing",
                "profileId",
                format!(
                    "Profile {} is ambiguous; name its scope (project: or global:).",
                    input.profile
                ),
            ))
        }
        Resolved::NotFound => {
            let global = matches!(selector, Selector::Bare(_))
                && matches!(
                    input
                        .workspace
                        .resolve_profile(&Selector::Scoped(selector.key_in(Scope::Global))),
                    Resolved::Found(_)
                );
            let hint = if global {
                format!(
                    " Use global:{} for the global profile.",
                    input.profile.trim()
                )
            } else {
                String::new()
            };
            return Err(fail(
                "host.profile-missing",
                "profileId",
                format!("No agent profile {}.{hint}", input.profile.trim()),
            ));
        }
    };
    let key = entry.key.clone();
    let settings = profile_settings(input.settings, input.trusted, &key, None);
    if !settings.enabled {
        return Err(fail(
            "host.profile-disabled",
            "profileId",
            format!(
                "Profile {key} is not enabled for delegation: add \"{key}\": {{\"enabled\": true}} under \"profiles\" in .pi/forge/subagents.json."
            ),
        ));
    }
    if settings.backend != DEFAULT_BACKEND {
        return Err(fail(
            "host.backend",
            "backend",
            format!(
                "Backend {} is not available; pi-forge runs {DEFAULT_BACKEND}.",
                settings.backend
            ),
        ));
    }
    let timeout_ms = match input.timeout_override_ms {
        Some(ms) if !(1_000..=MAX_TIMEOUT_SECONDS * 1_000).contains(&ms) => {
            return Err(fail(
                "host.timeout",
                "timeoutMs",
                format!("The timeout must be 1 to {MAX_TIMEOUT_SECONDS} seconds."),
            ))
        }
        Some(ms) => ms,
        None => settings.timeout_ms,
    };
    let profile = &entry.parsed.profile;
    let (lookup, stack) = match input.workspace.profile_stack(entry) {
        Ok(None) => (StackLookup::NoStack, None),
        Ok(Some(stack)) => (
            StackLookup::Found {
                key: stack.key.clone(),
                stack: &stack.parsed.stack,
                diagnostics: &stack.diagnostics,
            },
            Some(stack),
        ),
        Err(ProfileStackError::Ambiguous(_)) => (StackLookup::Ambiguous, None),
        Err(_) => (StackLookup::Missing, None),
    };
    let (scan, mut scan_diags) = match stack {
        // A standalone host knows no extension registrations: every custom slot or macro the
        // stack uses is a missing dependency.
        Some(stack) => scan_dependencies(&stack.parsed.stack, &[]),
        None => (DependencyScan::default(), Vec::new()),
    };
    let (snapshot, mut diags) =
        build_snapshot(profile, key.scope, &entry.diagnostics, lookup, scan);
    diags.append(&mut scan_diags);
    let Some(snapshot) = snapshot.filter(|_| !super::has_errors(&diags)) else {
        return Err(diags);
    };
    let request_value = foreground_request(
        &input.ids.request_id,
        &key.to_string(),
        &snapshot.profile_fingerprint,
        input.task,
        timeout_ms,
        input.parent_session,
    );
    let request = decode_request(&request_value)?;
    let catalog = readonly_catalog();
    let policy = stack.and_then(|s| s.parsed.stack.tools.as_ref());
    let negotiation = negotiate(&catalog, policy, &request.access.facts());
    let macros = MacroRegistry::new();
    let prepared = prepare_prompt(&PrepareInput {
        stack: stack.map(|s| &s.parsed.stack),
        stack_key: stack.map(|s| s.key.to_string()),
        tool_names: &negotiation.effective_tool_names,
        model: &profile.model,
        cwd: input.cwd,
        clock: input.clock,
        macros: &macros,
    })?;
    let thinking = profile.thinking_level.as_str();
    let preflight = readonly_preflight(
        &input.ids.preflight_id,
        &profile.model.provider,
        &profile.model.id,
        thinking,
    );
    let plan = create_plan(&PlanInput {
        request: &request,
        snapshot: &snapshot,
        backend_id: DEFAULT_BACKEND,
        fidelity: RuntimeFidelity::BackendAssisted,
        preflight: &preflight,
        preflight_id: &input.ids.preflight_id,
        model: &profile.model,
        thinking_level: thinking,
        catalog: &catalog,
        stack_policy: policy,
        system_prompt: &prepared.system_prompt,
        stack_messages: &prepared.stack_messages,
        stamp: &input.ids.stamp,
        host_tools: Some((
            &negotiation.effective_tool_ids,
            &negotiation.effective_tool_names,
        )),
        context_receipt: None,
    })?;
    Ok(HostPlan {
        plan,
        request,
        settings,
        timeout_ms,
    })
}

/// What the child bridge reads: the approved system prompt, the messages as Pi messages (the
/// provider-bound form, with a timestamp) and the approved tool names.
pub fn child_input(plan: &SealedPlan, timestamp: f64) -> Value {
    let messages: Vec<Value> = portable_messages(&plan.messages)
        .into_iter()
        .map(|mut m| {
            if let Some(map) = m.as_object_mut() {
                map.insert("timestamp".into(), json!(timestamp));
            }
            m
        })
        .collect();
    json!({
        "systemPrompt": plan.system_prompt,
        "messages": messages,
        "tools": plan.effective_tool_names,
    })
}

/// A child message's text: what it said, its text parts joined as Pi's print mode writes them.
fn text_of(content: &Value) -> String {
    crate::message::content_text(content, crate::message::OtherParts::Dropped)
}

/// How a child run ended, read from its JSON-mode event stream.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildOutcome {
    /// The final assistant message's text.
    pub answer: String,
    /// The final assistant message's `stopReason`.
    pub stop_reason: Option<String>,
    pub error_message: Option<String>,
    /// Usage summed over every assistant message of the run (a child that called tools made
    /// several requests): `{input, output, cacheRead, cacheWrite, totalTokens, cost: {input,
    /// output, cacheRead, cacheWrite, total}}`. `None` when no message reported usage (missing
    /// usage is never zero).
    pub usage: Option<Value>,
    /// Assistant messages (model requests) in the run.
    pub turns: u64,
    /// Tool calls the child's model made.
    pub tool_calls: u64,
    /// `(provider, model, stopReason)` of every assistant message, in order: the routes the
    /// child's requests actually took (the result package attests them).
    pub routes: Vec<(String, String, String)>,
    /// The thinking level the child ran with (Pi clamps it to the model).
    pub thinking_level: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
}

impl ChildOutcome {
    /// Success is decided from the final `stopReason` and a committed answer, never from the
    /// exit status (JSON mode exits 0 when the assistant failed).
    pub fn succeeded(&self) -> bool {
        self.stop_reason.as_deref() == Some("stop") && !self.answer.trim().is_empty()
    }
}

/// The token counters of Pi's usage object, summed over a run.
const USAGE_COUNTERS: [&str; 5] = ["input", "output", "cacheRead", "cacheWrite", "totalTokens"];
/// The members of Pi's `usage.cost`, summed over a run.
const COST_MEMBERS: [&str; 5] = ["input", "output", "cacheRead", "cacheWrite", "total"];

/// Adds one message's usage to the run's sum (integers stay integers; costs are dollars).
fn add_usage(sum: &mut Option<Value>, usage: &Value) {
    if !usage.is_object() {
        return;
    }
    let total = sum.get_or_insert_with(|| {
        let mut zero = serde_json::Map::new();
        for k in USAGE_COUNTERS {
            zero.insert(k.into(), Value::from(0u64));
        }
        Value::Object(zero)
    });
    for k in USAGE_COUNTERS {
        let add = usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let was = total[k].as_u64().unwrap_or(0);
        total[k] = Value::from(was.saturating_add(add));
    }
    if let Some(cost) = usage.get("cost").filter(|c| c.is_object()) {
        if total.get("cost").is_none() {
            let mut zero = serde_json::Map::new();
            for k in COST_MEMBERS {
                zero.insert(k.into(), Value::from(0.0));
            }
            total["cost"] = Value::Object(zero);
        }
        for k in COST_MEMBERS {
            let add = cost.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            let was = total["cost"][k].as_f64().unwrap_or(0.0);
            total["cost"][k] = Value::from(was + add);
        }
    }
}

/// The assistant and tool-result messages of a child's JSON-mode stdout, in order (`message_end`
/// events; the placeholder prompt the bridge replaces is not part of it).
fn child_messages(stdout: &str) -> impl Iterator<Item = Value> + '_ {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event.get("type").and_then(Value::as_str) == Some("message_end"))
        .filter_map(|mut event| event.get_mut("message").map(Value::take))
        .filter(|m| {
            matches!(
                m.get("role").and_then(Value::as_str),
                Some("assistant" | "toolResult")
            )
        })
}

fn tool_calls_of(message: &Value) -> impl Iterator<Item = &Value> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("toolCall"))
}

/// Reads a child's JSON-mode stdout (one event per line): the last assistant `message_end` gives
/// the answer and stop reason; usage, turns and tool calls add up over the run.
pub fn read_child_events(stdout: &str) -> ChildOutcome {
    let mut out = ChildOutcome {
        answer: String::new(),
        stop_reason: None,
        error_message: None,
        usage: None,
        turns: 0,
        tool_calls: 0,
        routes: Vec::new(),
        thinking_level: None,
        provider: None,
        model: None,
    };
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(level) = event.get("thinkingLevel").and_then(Value::as_str) {
            out.thinking_level = Some(level.to_string());
        }
    }
    for message in child_messages(stdout) {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        out.turns += 1;
        out.tool_calls += tool_calls_of(&message).count() as u64;
        if let Some(usage) = message.get("usage") {
            add_usage(&mut out.usage, usage);
        }
        out.answer = text_of(&message["content"]);
        let text = |k: &str| message.get(k).and_then(Value::as_str).map(str::to_string);
        out.stop_reason = text("stopReason");
        out.error_message = text("errorMessage");
        out.provider = text("provider");
        out.model = text("model");
        out.routes.push((
            out.provider.clone().unwrap_or_default(),
            out.model.clone().unwrap_or_default(),
            out.stop_reason.clone().unwrap_or_default(),
        ));
    }
    out
}

pub use crate::api::{TranscriptEntry, TranscriptToolCall};

/// How much of one transcript message the Runs view shows; the rest is named, not dropped.
pub const TRANSCRIPT_TEXT_CHARS: usize = 16_000;

/// Cuts `text` to `max` characters and says how many follow in the kept file.
fn shown_text(text: String, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text;
    }
    let mut shown: String = text.chars().take(max).collect();
    shown.push_str(&format!(
        "\n[… {} more characters in transcript.jsonl]",
        total - max
    ));
    shown
}

/// The transcript of a run from its kept JSON-mode stdout (`transcript.jsonl`); each message's
/// text is shown up to [`TRANSCRIPT_TEXT_CHARS`] characters, with the count of the rest.
pub fn transcript(stdout: &str) -> Vec<TranscriptEntry> {
    child_messages(stdout)
        .map(|m| {
            let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
            TranscriptEntry {
                role: text("role").unwrap_or_default(),
                text: shown_text(
                    text_of(m.get("content").unwrap_or(&Value::Null)),
                    TRANSCRIPT_TEXT_CHARS,
                ),
                tool_calls: tool_calls_of(&m)
                    .map(|c| TranscriptToolCall {
                        name: c.get("name").and_then(Value::as_str).unwrap_or("?").into(),
                        arguments: crate::json::to_compact(
                            c.get("arguments").unwrap_or(&Value::Null),
                        ),
                    })
                    .collect(),
                tool_name: text("toolName"),
                is_error: m.get("isError").and_then(Value::as_bool).unwrap_or(false),
                stop_reason: text("stopReason"),
            }
        })
        .collect()
}

/// How much of an over-long answer's beginning the parent sees next to the reference.
pub const ANSWER_PREVIEW_CHARS: usize = 2_000;

/// The answer as the parent model receives it: whole when it fits `max_chars` (the plan's
/// `resultProjection.maxChars`); otherwise nothing is cut from the kept answer: the parent gets
/// a reference to the verified file (its path relative to the project, size and SHA-256) and
/// the answer's first [`ANSWER_PREVIEW_CHARS`] characters.
pub fn project_answer(answer: &str, max_chars: usize, path: &str, sha256: &str) -> String {
    if answer.chars().count() <= max_chars {
        return answer.to_string();
    }
    let preview: String = answer.chars().take(ANSWER_PREVIEW_CHARS).collect();
    format!(
        "The answer is {} bytes, more than the {max_chars} characters a tool result carries. Nothing was cut: the whole answer is kept in {path} (SHA-256 {sha256}); read that file for the rest. It begins:\n\n{preview}\n[…]",
        answer.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_transcript_message_names_what_is_not_shown() {
        assert_eq!(shown_text("abc".into(), 3), "abc");
        assert_eq!(
            shown_text("abcdé".into(), 3),
            "abc\n[… 2 more characters in transcript.jsonl]"
        );
    }

    #[test]
    fn a_long_answer_becomes_a_reference_with_its_beginning() {
        assert_eq!(project_answer("short", 10, "a.txt", "00"), "short");
        let long = "é".repeat(3_000);
        let text = project_answer(&long, 2_500, ".pi/forge/runs/r/answer.txt", "ab");
        assert!(text.starts_with(
            "The answer is 6000 bytes, more than the 2500 characters a tool result carries. Nothing was cut: the whole answer is kept in .pi/forge/runs/r/answer.txt (SHA-256 ab); read that file for the rest. It begins:\n\n"
        ));
        assert!(text.ends_with(&format!("{}\n[…]", "é".repeat(2_000))));
    }
}
