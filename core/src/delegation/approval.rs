//! D8 authorization (who may run a delegation and whether a human must approve it), the approval
//! receipt, the compact approval review, and the stale-approval check.
//!
//! [`authorize`] is the invocation decision before anything is prepared; it fails closed: without
//! an interactive UI an approval-requiring call is `cancelled`, and unattended mode needs a
//! trusted project whose own `subagents.json` says `allowAgentInvocationWithoutApproval: true`.

use serde_json::{json, Value};

use super::config::ProfileSettings;
use super::plan::SealedPlan;

/// How the delegation was invoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// The `forge_subagent` agent tool.
    AgentTool,
    /// `/forge-agent run`: always requires approval and a UI.
    SlashRun,
    /// `/forge-agent plan`: prepares and displays, never transports.
    SlashPlan,
}

/// What the caller knows at invocation time.
#[derive(Clone, Debug)]
pub struct AuthorizationInput<'a> {
    pub invocation: Invocation,
    pub trusted: bool,
    pub has_host_session: bool,
    pub has_interactive_ui: bool,
    /// The profile's effective settings (enabled, backend, timeout, unattended).
    pub settings: &'a ProfileSettings,
    /// The configured backend before any per-run override.
    pub configured_backend: &'a str,
    pub per_call_backend: Option<&'a str>,
    /// Per-call model `provider/id`, as typed.
    pub per_call_model: Option<&'a str>,
    pub registered_backends: &'a [&'a str],
    /// A `global:<id>` profile that is enabled and would answer a bare id (for the hint).
    pub global_hint: Option<&'a str>,
}

/// The typed outcome of [`authorize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorizationDecision {
    /// Prepare, then ask the human (serialized dialogs).
    ApprovalRequired,
    /// Prepare and run without showing the prompt (`source: trusted-project-config`).
    Unattended,
    /// Prepare and show only (`/forge-agent plan`).
    DryPlan,
    /// No preparation; the response is `failed` with this code and message.
    Failed { code: &'static str, message: String },
    /// No preparation; the response is `cancelled` with this reason.
    Cancelled { reason: String },
}

fn failed(code: &'static str, message: impl Into<String>) -> AuthorizationDecision {
    AuthorizationDecision::Failed {
        code,
        message: message.into(),
    }
}

/// Parses `provider/id` (both non-empty, split at the first `/`).
pub fn parse_model(text: &str) -> Option<(&str, &str)> {
    let (p, m) = text.split_once('/')?;
    (!p.trim().is_empty() && !m.trim().is_empty()).then_some((p, m))
}

/// The invocation decision of §D8 steps 1–5 (before preparation).
pub fn authorize(input: &AuthorizationInput) -> AuthorizationDecision {
    let s = input.settings;
    let unattended = s.unattended && input.trusted && input.invocation == Invocation::AgentTool;
    if input
        .per_call_model
        .is_some_and(|m| parse_model(m).is_none())
    {
        return failed("host.model", "Invalid model: use provider/id.");
    }
    if !input.has_host_session {
        return failed("host.session", "No pi-forge host session is available.");
    }
    if !input.trusted {
        return failed(
            "host.trust",
            "The project is not trusted: delegation is refused.",
        );
    }
    if !s.enabled {
        let hint = input
            .global_hint
            .map(|g| format!(" Did you mean {g}?"))
            .unwrap_or_default();
        return failed(
            "host.profile-disabled",
            format!("The profile is not enabled for delegation in subagents.json.{hint}"),
        );
    }
    if unattended {
        if input.per_call_model.is_some() {
            return failed(
                "host.unattended-model",
                "Unattended delegation is pinned to the profile's model; a per-call model is refused.",
            );
        }
        if input
            .per_call_backend
            .is_some_and(|b| b != input.configured_backend)
        {
            return failed(
                "host.unattended-backend",
                "Unattended delegation is pinned to the configured backend.",
            );
        }
    }
    if !input.registered_backends.contains(&s.backend.as_str()) {
        return failed(
            "host.backend",
            format!("Backend {} is not registered.", s.backend),
        );
    }
    if input.invocation == Invocation::SlashPlan {
        return AuthorizationDecision::DryPlan;
    }
    if unattended {
        return AuthorizationDecision::Unattended;
    }
    if !input.has_interactive_ui {
        return AuthorizationDecision::Cancelled {
            reason: "Approval is required but no interactive UI is available.".into(),
        };
    }
    AuthorizationDecision::ApprovalRequired
}

/// `source` of an approval receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalSource {
    None,
    Human,
    TrustedProjectConfig,
}

impl ApprovalSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalSource::None => "none",
            ApprovalSource::Human => "human",
            ApprovalSource::TrustedProjectConfig => "trusted-project-config",
        }
    }
}

/// `{required, approved, viewedFullPrompt, source, executionFingerprint?, approvedAt?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalReceipt {
    pub required: bool,
    pub approved: bool,
    pub viewed_full_prompt: bool,
    pub source: ApprovalSource,
    pub execution_fingerprint: Option<String>,
    pub approved_at: Option<String>,
}

impl ApprovalReceipt {
    /// A human approved this preparation.
    pub fn human(execution_fingerprint: &str, approved_at: &str, viewed_full_prompt: bool) -> Self {
        ApprovalReceipt {
            required: true,
            approved: true,
            viewed_full_prompt,
            source: ApprovalSource::Human,
            execution_fingerprint: Some(execution_fingerprint.to_string()),
            approved_at: Some(approved_at.to_string()),
        }
    }
    /// Unattended mode: approved by the trusted project's config, prompt not shown.
    pub fn unattended(execution_fingerprint: &str, approved_at: &str) -> Self {
        ApprovalReceipt {
            required: false,
            approved: true,
            viewed_full_prompt: false,
            source: ApprovalSource::TrustedProjectConfig,
            execution_fingerprint: Some(execution_fingerprint.to_string()),
            approved_at: Some(approved_at.to_string()),
        }
    }
    /// Rejected (or aborted, or no UI): nothing is approved.
    pub fn rejected(viewed_full_prompt: bool) -> Self {
        ApprovalReceipt {
            required: true,
            approved: false,
            viewed_full_prompt,
            source: ApprovalSource::None,
            execution_fingerprint: None,
            approved_at: None,
        }
    }

    pub fn to_value(&self) -> Value {
        let mut v = json!({
            "required": self.required,
            "approved": self.approved,
            "viewedFullPrompt": self.viewed_full_prompt,
            "source": self.source.as_str(),
        });
        if let Some(map) = v.as_object_mut() {
            if let Some(fp) = &self.execution_fingerprint {
                map.insert("executionFingerprint".into(), fp.clone().into());
            }
            if let Some(at) = &self.approved_at {
                map.insert("approvedAt".into(), at.clone().into());
            }
        }
        v
    }
}

/// The 409 answer when an approval names another preparation than the current one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleApproval {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

/// Approval is bound to one concrete preparation: the approved execution fingerprint must equal
/// the current plan's, else `409 stale_approval` ("prepare it again").
pub fn check_approval(approved: &str, current: &str) -> Result<(), StaleApproval> {
    if approved == current {
        Ok(())
    } else {
        Err(StaleApproval {
            status: 409,
            code: "stale_approval",
            message: format!(
                "The approved execution fingerprint {approved} does not match the current plan ({current}): prepare it again."
            ),
        })
    }
}

/// The `cancelled` reason of a rejected approval.
pub const REJECTED_REASON: &str = "Subagent run rejected by the human before provider transport.";

/// The size of what a plan sends, in bytes: the canonical JSON of its sealed conversation (the
/// system prompt and the portable messages the conversation fingerprint covers). The one
/// definition behind the review (Pi's dialog, the terminal) and the API's `payloadBytes`.
pub fn payload_bytes(plan: &SealedPlan) -> u64 {
    crate::canonical::canonical(&plan.seal.conversation).len() as u64
}

/// The system prompt's length as the review and the API state it: UTF-16 code units, as the
/// editor counts characters.
pub fn system_prompt_chars(plan: &SealedPlan) -> u64 {
    crate::json::utf16_len(&plan.system_prompt) as u64
}

/// The compact review of §D8 (one line per field; `[DECIDE]` extras included).
pub fn approval_summary(plan: &SealedPlan, task: &str, backend: &str) -> String {
    let stack = plan
        .profile
        .prompt_stack_id
        .as_ref()
        .map_or("(none)".to_string(), ToString::to_string);
    let cwd = plan
        .access
        .get("workingDirectory")
        .map_or("(none)".to_string(), |w| {
            format!(
                "{}:{}",
                w.get("workspaceHandle")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                w.get("path").and_then(Value::as_str).unwrap_or("")
            )
        });
    let boundary = plan
        .access
        .get("executionBoundary")
        .and_then(Value::as_str)
        .unwrap_or("");
    let payload = payload_bytes(plan);
    [
        format!("Subagent approval: {}", plan.profile.profile_id),
        format!("Task: {task}"),
        format!("Backend: {backend}"),
        format!("Model: {}/{}", plan.model.provider, plan.model.id),
        format!("Thinking: {}", plan.thinking_level),
        format!("Prompt stack: {stack}"),
        format!("System prompt chars: {}", system_prompt_chars(plan)),
        format!("Messages: {}", plan.messages.len()),
        format!("Effective tools: {}", plan.effective_tool_ids.len()),
        format!("Tool names: {}", plan.effective_tool_names.join(", ")),
        format!("Working directory: {cwd}"),
        format!("Execution boundary: {boundary}"),
        format!("Payload bytes: {payload}"),
        format!("Execution fingerprint: {}", plan.execution_fingerprint),
        format!(
            "Conversation fingerprint: {}",
            plan.conversation_fingerprint
        ),
    ]
    .join("\n")
}

/// The full view: summary, `--- SYSTEM PROMPT ---`, the exact system prompt, `--- MESSAGES ---`,
/// one line per message `[i] role: <JSON content>`.
pub fn approval_full_view(plan: &SealedPlan, task: &str, backend: &str) -> String {
    let mut out = approval_summary(plan, task, backend);
    out.push_str("\n--- SYSTEM PROMPT ---\n");
    out.push_str(&plan.system_prompt);
    out.push_str("\n--- MESSAGES ---");
    for (i, m) in plan.messages.iter().enumerate() {
        out.push_str(&format!(
            "\n[{i}] {}: {}",
            m.get("role").and_then(Value::as_str).unwrap_or(""),
            crate::json::to_compact(m.get("content").unwrap_or(&Value::Null))
        ));
    }
    out
}
