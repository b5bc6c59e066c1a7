//! The `/api/agent/*` bodies: subagent plans, runs and the delegation settings (re-exported as
//! `forge_core::api::*`).
//!
//! The server builds every answer from these structs, and the request bodies the editor and the
//! bridge send (`ApproveRequest`, `PrepareRequest`) are parsed with the same structs the web
//! builds. Two parts are kept files rather than answers built per request: a run's record
//! (`.pi/forge/runs/<run>/result.json`) is forwarded as the file holds it ([`Kept`]), and the
//! sealed plan's nested objects (preflight, profile snapshot, access, limits, projection) are
//! §D7's codec data and stay `Value`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::present;
use crate::diag::Diagnostic;

/// A kept file forwarded as it is on disk (`raw`, written back unchanged, unknown and missing
/// members included), with the members a reader uses read from it (`view`). The run records
/// use it: records kept by an older pi-forge (or written by hand) keep their exact bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept<T> {
    pub raw: Value,
    pub view: T,
}

impl<T: DeserializeOwned> Kept<T> {
    /// `raw` with its view (an error when `raw` does not read as `T`).
    pub fn read(raw: Value) -> Result<Kept<T>, serde_json::Error> {
        let view = T::deserialize(&raw)?;
        Ok(Kept { raw, view })
    }
}

impl<T> Serialize for Kept<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Kept<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Kept::read(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------------------------
// Plans

/// A provider and model id (`{provider, id}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRef {
    pub provider: String,
    pub id: String,
}

/// One plan waiting for a person (`GET /api/agent/plans`, the `summary` of
/// `GET /api/agent/plans/:run`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub run_id: String,
    pub profile_id: String,
    pub prompt_stack_id: Option<String>,
    pub task: String,
    pub backend_id: String,
    pub model: ModelRef,
    pub thinking_level: String,
    pub tools: Vec<String>,
    pub working_directory: String,
    pub boundary: String,
    pub system_prompt_chars: u64,
    pub messages: u64,
    pub payload_bytes: u64,
    pub timeout_ms: u64,
    pub execution_fingerprint: String,
    pub conversation_fingerprint: String,
    pub parent_session_id: Option<String>,
    pub created_at: String,
}

/// `GET /api/agent/plans`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanList {
    pub ok: bool,
    pub plans: Vec<PlanSummary>,
}

/// The part of a sealed plan the full-prompt view shows: the exact system prompt and every
/// provider-bound message in order (Pi's messages stay `Value`). Also a run's approved prompt,
/// read from its `plan.json` (other members are not read).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanPrompt {
    pub system_prompt: String,
    pub messages: Vec<Value>,
}

/// The sealed plan object of §D7, as `plan.json` keeps it and the plan routes send it
/// (`delegation::plan::SealedPlan::to_value` writes this struct).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// Always `1`.
    pub schema_version: u32,
    pub run_id: String,
    pub request_id: String,
    pub backend_id: String,
    pub preflight_id: String,
    pub preflight: Value,
    /// The profile snapshot the plan was prepared from.
    pub profile: Value,
    pub model: ModelRef,
    pub thinking_level: String,
    pub system_prompt: String,
    pub messages: Vec<Value>,
    pub effective_tool_ids: Vec<String>,
    pub access: Value,
    pub limits: Value,
    pub result_projection: Value,
    pub prompt_runtime_fingerprint: String,
    pub conversation_fingerprint: String,
    pub execution_fingerprint: String,
    /// The context-budget receipt, when the preparation reported one.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub context_budget: Option<Value>,
}

impl PlanView {
    /// The system prompt and the messages.
    pub fn prompt(&self) -> PlanPrompt {
        PlanPrompt {
            system_prompt: self.system_prompt.clone(),
            messages: self.messages.clone(),
        }
    }
}

/// `GET /api/agent/plans/:run`: the summary, the review text, the full prompt as text and the
/// sealed plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDetail {
    pub ok: bool,
    pub summary: PlanSummary,
    pub review: String,
    pub full_prompt: String,
    pub plan: PlanView,
}

/// `POST /api/agent/prepare`: the plan prepared and sealed, then discarded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PreparedPlan {
    pub ok: bool,
    pub review: String,
    pub plan: PlanView,
}

/// The body of `POST /api/agent/prepare`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrepareRequest {
    /// The profile's selector.
    pub profile: String,
    pub task: String,
}

/// The body of `POST /api/agent/plans/:run/approve`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproveRequest {
    /// The execution fingerprint the person saw.
    pub execution_fingerprint: String,
    #[serde(default)]
    pub viewed_full_prompt: bool,
    /// Where the person approved: `web` (the default) or `pi` (the bridge's dialog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// `POST /api/agent/plans/:run/approve|reject`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDecided {
    pub ok: bool,
    pub run_id: String,
}

/// One profile delegation may use (`GET /api/agent/profiles`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProfileRow {
    /// The profile's `scope:id`.
    pub profile_id: String,
    /// `provider/id`.
    pub model: String,
    pub thinking_level: String,
    /// The profile's `promptStack` as written.
    pub prompt_stack: Option<String>,
    /// A plan can be prepared with it.
    pub ready: bool,
    /// `required`, or `none (trusted project setting)` in unattended mode.
    pub approval: String,
    /// Why it is not ready.
    pub problem: Option<String>,
}

/// `GET /api/agent/profiles`: the profiles `subagents.json` enables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentProfileList {
    pub ok: bool,
    pub profiles: Vec<AgentProfileRow>,
}

// ---------------------------------------------------------------------------------------------
// Runs

/// The approval receipt of a run: a person's (`source: "human"`, `from: "web"`, `"pi"` or
/// `"terminal"`) or a trusted project's settings (`source: "trusted-project-config"`, `from:
/// "subagents.json"`, `required: false`). Members a kept receipt lacks read as empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunApproval {
    pub required: bool,
    pub approved: bool,
    pub viewed_full_prompt: bool,
    pub source: String,
    pub from: String,
    pub execution_fingerprint: String,
    pub approved_at: String,
}

/// A child run's token usage as the record keeps it (Pi's usage: `cost` is Pi's
/// `{input, output, cacheRead, cacheWrite, total}`, kept as it is). Read from
/// [`RunRecord::usage`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cost: Option<Value>,
}

impl RunUsage {
    /// The total cost Pi reported (`cost.total`, or a bare number), if any.
    pub fn total_cost(&self) -> Option<f64> {
        let cost = self.cost.as_ref()?;
        cost.as_f64()
            .or_else(|| cost.get("total").and_then(Value::as_f64))
    }
}

/// An approved run without a record yet (`status` `queued` or `running`), as `GET
/// /api/agent/runs` lists it and `GET /api/agent/runs/:run` answers its `record`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveRun {
    pub run_id: String,
    pub profile_id: String,
    /// `queued` or `running`.
    pub status: String,
    /// `provider/id`.
    pub model: String,
    pub thinking_level: String,
    pub started_at: String,
    pub approval: RunApproval,
}

/// A run record (`.pi/forge/runs/<run>/result.json`) as pi-forge writes it. Read leniently (a
/// member a record lacks reads as empty), so it is also the view of an older record and of an
/// [`ActiveRun`] in a run list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunRecord {
    /// `1` (`0`: an [`ActiveRun`]).
    pub schema_version: u32,
    pub run_id: String,
    pub request_id: String,
    pub profile_id: String,
    pub backend_id: String,
    /// `completed`, `failed`, `timed-out` or `cancelled` (`queued` or `running` for an
    /// [`ActiveRun`]).
    pub status: String,
    pub error: Option<String>,
    /// `provider/id`.
    pub model: String,
    /// The profile's thinking level.
    pub thinking_level: String,
    /// The level the child ran with (Pi clamps it to the model).
    pub used_thinking_level: Option<String>,
    pub effective_tools: Vec<String>,
    pub execution_fingerprint: String,
    pub conversation_fingerprint: String,
    pub approval: RunApproval,
    pub started_at: String,
    /// Binds the result package to this launch (absent in records kept before packages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_nonce: Option<String>,
    pub duration_ms: u64,
    /// Pi's usage summed over the run (`null` when Pi reported none); see
    /// [`RunRecord::usage_counts`].
    pub usage: Option<Value>,
    /// Model requests.
    pub turns: u64,
    pub tool_calls: u64,
    /// SHA-256 of each request the child sent.
    pub payload_sha256: Vec<String>,
    pub answer_sha256: String,
    pub result_max_chars: Option<u64>,
    pub answer_bytes: u64,
}

impl RunRecord {
    /// The token counts and cost of [`RunRecord::usage`], when it reads.
    pub fn usage_counts(&self) -> Option<RunUsage> {
        self.usage
            .as_ref()
            .and_then(|u| RunUsage::deserialize(u).ok())
    }

    /// The thinking level the child ran with, else the profile's.
    pub fn thinking(&self) -> &str {
        self.used_thinking_level
            .as_deref()
            .unwrap_or(&self.thinking_level)
    }
}

/// `GET /api/agent/runs`: the kept records and the approved runs in progress, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunList {
    pub ok: bool,
    pub runs: Vec<Kept<RunRecord>>,
}

/// One step of a run's transcript as the Runs view shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptEntry {
    /// `assistant` or `toolResult`.
    pub role: String,
    /// The message's text (an assistant's answer or a tool's output).
    pub text: String,
    /// The tool calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<TranscriptToolCall>,
    /// The tool a result belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptToolCall {
    pub name: String,
    /// The arguments as compact JSON.
    pub arguments: String,
}

/// `GET /api/agent/runs/:run`: the record (a run in progress: its [`ActiveRun`]) and, for a
/// completed run, the answer verified against its result package (`None` otherwise).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    pub ok: bool,
    pub record: Kept<RunRecord>,
    pub answer: Option<String>,
    /// The approved prompt (`plan.json`'s system prompt and messages), when kept.
    #[serde(default)]
    pub prompt: Option<PlanPrompt>,
    /// The child's messages after the approved prompt: answers, tool calls and tool results.
    #[serde(default)]
    pub transcript: Vec<TranscriptEntry>,
}

/// `POST /api/agent/runs/:run/cancel`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCancelled {
    pub ok: bool,
    pub run_id: String,
    /// The status the run had: `queued` or `running`.
    pub status: String,
}

// ---------------------------------------------------------------------------------------------
// Settings

/// One `subagents.json` in `GET /api/agent/settings` (project `.pi/forge/subagents.json`,
/// global `<global>/subagents.json`). An untrusted project's file is not read (`exists: false`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentsFileView {
    pub scope: crate::id::Scope,
    pub path: String,
    pub exists: bool,
    /// `sha256:<hex>` of the bytes read; `None` when absent or unreadable.
    pub revision: Option<String>,
    /// The same revision as 64 bare hex digits.
    pub source_revision: Option<String>,
    /// The raw parsed file (`{}` when absent or unreadable, `null` when it does not parse).
    pub settings: Value,
    /// The parser's warnings (they never block a save), or why the file could not be read.
    pub diagnostics: Vec<Diagnostic>,
}

/// Both files of `GET /api/agent/settings`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubagentsFileViews {
    pub project: SubagentsFileView,
    pub global: SubagentsFileView,
}

/// One profile's effective delegation settings (forge-core `profile_settings`) and the entry an
/// editor changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegationProfile {
    /// `id` for a project profile, `global:id` for a global one.
    pub profile_id: String,
    /// `scope:id`, as the profile views' `selector`.
    pub selector: String,
    pub enabled: bool,
    /// The effective timeout (the entry's, else the files', else 60,000).
    pub timeout_ms: u64,
    /// The effective entry's own `timeoutMs` (`None`: inherited).
    pub entry_timeout_ms: Option<u64>,
    pub backend: String,
    /// `allowAgentInvocationWithoutApproval` from a trusted project's file.
    pub unattended: bool,
    /// The file whose entry decides (or, without one, the file of the profile's scope).
    pub entry_scope: crate::id::Scope,
    /// The raw key of the entry in that file (`None`: no entry yet).
    pub entry_key: Option<String>,
}

/// `GET /api/agent/settings` and the answer of `PUT /api/agent/settings/:scope`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentSettings {
    pub ok: bool,
    pub trusted: bool,
    pub files: SubagentsFileViews,
    pub profiles: Vec<DelegationProfile>,
}
