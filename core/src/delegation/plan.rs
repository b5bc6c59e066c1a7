//! D7 plan creation and sealing, with the conversation and execution fingerprints of §C3.
//!
//! The host's compiled prompt (system prompt and stack messages from compiling the profile's
//! stack with `crate::compile`, a `regex`-feature module), the backend's accepted preflight and
//! the ids/time of the preparation are inputs; the plan is a pure function of them. Fingerprints:
//! - conversation = `fp({systemPrompt, messages:[{role, content}]})` (portable messages);
//! - execution = `fp({schemaVersion:1, preparedRunId, backendId, preflightId, intent, preflight,
//!   promptRuntime, conversation, effectiveTools:[{requestedName, backendToolId,
//!   backendToolName}], conversationFingerprint})`.
//!
//! `intent` is the AgentRequest object as received; `promptRuntime` is `{profileId,
//! profileFingerprint, promptStackId, promptStackFingerprint, model, thinkingLevel, preparedAt,
//! promptRuntimeFingerprint}` (the fingerprint covers the object without itself). Because
//! `preparedRunId` and `preparedAt` are sealed, two preparations never share an execution
//! fingerprint.

use serde_json::{json, Value};

use super::context::{assemble_messages, budget_context, check_protected_task, portable_messages};
use super::negotiate::{negotiate, CatalogTool};
use super::request::AgentRequest;
use super::snapshot::AgentProfileSnapshot;
use super::{has_errors, is_opaque_id, ContractDiagnostic as D};
use crate::canonical::fingerprint;
use crate::profile::ModelRef;
use crate::stack::Policy;

/// `promptRuntimeFidelity` of a backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RuntimeFidelity {
    ExactPreflight,
    #[default]
    BackendAssisted,
    Partial,
}

impl RuntimeFidelity {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeFidelity::ExactPreflight => "exact-preflight",
            RuntimeFidelity::BackendAssisted => "backend-assisted",
            RuntimeFidelity::Partial => "partial",
        }
    }
}

/// The ids and time of one preparation (the runtime draws them; here they are inputs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// `prepared:<uuid>`.
    pub prepared_run_id: String,
    /// `run:<uuid>`.
    pub run_id: String,
    /// ISO-8601 time of the preparation.
    pub prepared_at: String,
}

/// Everything a plan is made of.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    pub request: &'a AgentRequest,
    pub snapshot: &'a AgentProfileSnapshot,
    pub backend_id: &'a str,
    pub fidelity: RuntimeFidelity,
    /// The accepted preflight object, sealed as is.
    pub preflight: &'a Value,
    pub preflight_id: &'a str,
    /// The model the run uses (profile model or per-run override, as the preflight confirmed).
    pub model: &'a ModelRef,
    pub thinking_level: &'a str,
    pub catalog: &'a [CatalogTool],
    pub stack_policy: Option<&'a Policy>,
    /// The compiled system prompt (`""` without a stack).
    pub system_prompt: &'a str,
    /// The compiled stack messages (none without a stack).
    pub stack_messages: &'a [Value],
    pub stamp: &'a Stamp,
    /// The host preparation's `(effectiveToolIds, effectiveToolNames)`, when a backend-assisted
    /// preparation reported them: they must equal the recomputed negotiation.
    pub host_tools: Option<(&'a [String], &'a [String])>,
    /// A context-budget receipt reported by the preparation: it must equal the recomputation.
    pub context_receipt: Option<&'a Value>,
}

/// The §C3 execution-fingerprint object's parts.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutionSeal {
    pub prepared_run_id: String,
    pub backend_id: String,
    pub preflight_id: String,
    pub intent: Value,
    pub preflight: Value,
    pub prompt_runtime: Value,
    pub conversation: Value,
    /// `(requestedName, backendToolId, backendToolName)`.
    pub effective_tools: Vec<(String, String, String)>,
}

impl ExecutionSeal {
    /// The hashed object (conversation fingerprint included).
    pub fn to_value(&self) -> Value {
        json!({
            "schemaVersion": 1,
            "preparedRunId": self.prepared_run_id,
            "backendId": self.backend_id,
            "preflightId": self.preflight_id,
            "intent": self.intent,
            "preflight": self.preflight,
            "promptRuntime": self.prompt_runtime,
            "conversation": self.conversation,
            "effectiveTools": self.effective_tools.iter().map(|(r, i, n)| json!({
                "requestedName": r, "backendToolId": i, "backendToolName": n,
            })).collect::<Vec<_>>(),
            "conversationFingerprint": fingerprint(&self.conversation),
        })
    }
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.to_value())
    }
}

/// `conversationFingerprint = fp({systemPrompt, messages})` over portable messages.
pub fn conversation_value(system_prompt: &str, messages: &[Value]) -> Value {
    json!({"systemPrompt": system_prompt, "messages": portable_messages(messages)})
}

/// A sealed plan.
#[derive(Clone, Debug, PartialEq)]
pub struct SealedPlan {
    pub run_id: String,
    pub request_id: String,
    pub profile: AgentProfileSnapshot,
    pub model: ModelRef,
    pub thinking_level: String,
    pub system_prompt: String,
    pub messages: Vec<Value>,
    pub effective_tool_ids: Vec<String>,
    pub effective_tool_names: Vec<String>,
    pub access: Value,
    pub limits: Value,
    pub context_budget: Option<Value>,
    pub result_projection: Value,
    pub prompt_runtime_fingerprint: String,
    pub conversation_fingerprint: String,
    pub execution_fingerprint: String,
    pub seal: ExecutionSeal,
    /// Preparation diagnostics (warnings and infos; errors stop the plan).
    pub diagnostics: Vec<D>,
}

impl SealedPlan {
    /// The plan object of §D7 (`plan.json`, the plan routes' `plan`).
    pub fn view(&self) -> crate::api::PlanView {
        crate::api::PlanView {
            schema_version: 1,
            run_id: self.run_id.clone(),
            request_id: self.request_id.clone(),
            backend_id: self.seal.backend_id.clone(),
            preflight_id: self.seal.preflight_id.clone(),
            preflight: self.seal.preflight.clone(),
            profile: self.profile.to_value(),
            model: crate::api::ModelRef {
                provider: self.model.provider.clone(),
                id: self.model.id.clone(),
            },
            thinking_level: self.thinking_level.clone(),
            system_prompt: self.system_prompt.clone(),
            messages: self.messages.clone(),
            effective_tool_ids: self.effective_tool_ids.clone(),
            access: self.access.clone(),
            limits: self.limits.clone(),
            result_projection: self.result_projection.clone(),
            prompt_runtime_fingerprint: self.prompt_runtime_fingerprint.clone(),
            conversation_fingerprint: self.conversation_fingerprint.clone(),
            execution_fingerprint: self.execution_fingerprint.clone(),
            context_budget: self.context_budget.clone(),
        }
    }

    /// [`SealedPlan::view`] as a JSON object.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self.view()).unwrap_or_default()
    }

    /// Re-derives both fingerprints and the protected task; any difference is an error.
    pub fn verify(&self, request: &AgentRequest) -> Vec<D> {
        let mut diags = Vec::new();
        if let Some(d) = check_protected_task(&self.messages, &request.text, &request.media) {
            diags.push(d);
        }
        let conversation = conversation_value(&self.system_prompt, &self.messages);
        if conversation != self.seal.conversation
            || fingerprint(&conversation) != self.conversation_fingerprint
        {
            diags.push(D::error(
                "fingerprint.invalid",
                "conversationFingerprint",
                "The conversation fingerprint does not match the plan's prompt.",
            ));
        }
        if self.seal.fingerprint() != self.execution_fingerprint {
            diags.push(D::error(
                "fingerprint.invalid",
                "executionFingerprint",
                "The execution fingerprint does not match the sealed plan.",
            ));
        }
        diags
    }
}

/// `createAgentExecutionPlan`: checks, negotiates, budgets, assembles and seals. Any error → no
/// plan.
pub fn create_plan(input: &PlanInput) -> Result<SealedPlan, Vec<D>> {
    let req = input.request;
    let snap = input.snapshot;
    let mut diags = Vec::new();
    let stamp = input.stamp;
    let uuid_ok = |id: &str, prefix: &str| {
        id.strip_prefix(prefix).is_some_and(|u| !u.is_empty()) && is_opaque_id(id)
    };
    if !uuid_ok(&stamp.run_id, "run:") {
        diags.push(D::error("id.invalid", "runId", "runId must be run:<uuid>."));
    }
    if !uuid_ok(&stamp.prepared_run_id, "prepared:") {
        diags.push(D::error(
            "id.invalid",
            "preparedRunId",
            "preparedRunId must be prepared:<uuid>.",
        ));
    }
    if input.fidelity == RuntimeFidelity::Partial {
        diags.push(D::error(
            "plan.partial-runtime",
            "preflight.promptRuntimeFidelity",
            "A backend with partial prompt-runtime fidelity cannot plan a run.",
        ));
    }
    if req.profile_id != snap.profile_id.to_string() {
        diags.push(D::error(
            "plan.profile-id",
            "profileId",
            "The request names another profile than the snapshot.",
        ));
    }
    if let Some(expected) = &req.expected_profile_fingerprint {
        if *expected != snap.profile_fingerprint {
            diags.push(D::error(
                "plan.profile-drift",
                "expectedProfileFingerprint",
                "The profile changed since the request was made: prepare it again.",
            ));
        }
    }
    let policy = snap.prompt_stack.as_ref().and(input.stack_policy);
    let negotiation = negotiate(input.catalog, policy, &req.access.facts());
    diags.extend(negotiation.diagnostics.iter().cloned());
    if let Some((ids, names)) = input.host_tools {
        if ids != negotiation.effective_tool_ids.as_slice()
            || names != negotiation.effective_tool_names.as_slice()
        {
            diags.push(D::error(
                "plan.tool-negotiation",
                "effectiveToolIds",
                "The prepared tools differ from the recomputed tool negotiation.",
            ));
        }
    }
    let (rendered, budget) = match &req.selected_context {
        None => (String::new(), None),
        Some(sc) => {
            let sel = budget_context(&sc.items, sc.max_bytes);
            diags.extend(sel.diagnostics.iter().cloned());
            (sel.rendered.clone(), Some(sel.receipt.to_value()))
        }
    };
    match (input.context_receipt, &budget) {
        (Some(_), None) => diags.push(D::error(
            "plan.context-budget-extra",
            "contextBudget",
            "A context budget receipt was given for a request without selected context.",
        )),
        (Some(given), Some(recomputed)) if given != recomputed => diags.push(D::error(
            "plan.context-budget",
            "contextBudget",
            "The context budget receipt differs from the deterministic recomputation.",
        )),
        _ => {}
    }
    let messages = match assemble_messages(&rendered, input.stack_messages, &req.text, &req.media) {
        Ok(m) => m,
        Err(errors) => {
            diags.extend(errors);
            Vec::new()
        }
    };
    if has_errors(&diags) {
        return Err(diags);
    }
    let mut prompt_runtime = json!({
        "profileId": snap.profile_id.to_string(),
        "profileFingerprint": snap.profile_fingerprint,
        "promptStackId": snap.prompt_stack_id.as_ref().map(ToString::to_string),
        "promptStackFingerprint": snap.prompt_stack_fingerprint,
        "model": input.model.to_value(),
        "thinkingLevel": input.thinking_level,
        "preparedAt": stamp.prepared_at,
    });
    let prompt_runtime_fingerprint = fingerprint(&prompt_runtime);
    if let Some(map) = prompt_runtime.as_object_mut() {
        map.insert(
            "promptRuntimeFingerprint".into(),
            prompt_runtime_fingerprint.clone().into(),
        );
    }
    let conversation = conversation_value(input.system_prompt, &messages);
    let conversation_fingerprint = fingerprint(&conversation);
    let effective_tools = negotiation
        .effective_tool_ids
        .iter()
        .zip(&negotiation.effective_tool_names)
        .map(|(id, name)| (name.clone(), id.clone(), name.clone()))
        .collect();
    let seal = ExecutionSeal {
        prepared_run_id: stamp.prepared_run_id.clone(),
        backend_id: input.backend_id.to_string(),
        preflight_id: input.preflight_id.to_string(),
        intent: req.value.clone(),
        preflight: input.preflight.clone(),
        prompt_runtime,
        conversation,
        effective_tools,
    };
    let field = |k: &str| req.value.get(k).cloned().unwrap_or(Value::Null);
    Ok(SealedPlan {
        run_id: stamp.run_id.clone(),
        request_id: req.request_id.clone(),
        profile: snap.clone(),
        model: input.model.clone(),
        thinking_level: input.thinking_level.to_string(),
        system_prompt: input.system_prompt.to_string(),
        messages,
        effective_tool_ids: negotiation.effective_tool_ids,
        effective_tool_names: negotiation.effective_tool_names,
        access: field("access"),
        limits: field("limits"),
        context_budget: budget,
        result_projection: field("resultProjection"),
        prompt_runtime_fingerprint,
        conversation_fingerprint,
        execution_fingerprint: seal.fingerprint(),
        seal,
        diagnostics: diags,
    })
}

/// The host preparation of a plan's prompt: the profile's stack compiled with an empty base
/// prompt and no parent conversation.
#[cfg(feature = "regex")]
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedPrompt {
    pub system_prompt: String,
    /// The stack's own messages (synthetic `user`/`assistant`/`custom` items), Pi message objects.
    pub stack_messages: Vec<Value>,
    /// Compiler warnings and infos (errors stop the preparation with `host.preparation`).
    pub diagnostics: Vec<crate::diag::Diagnostic>,
}

/// What the host compiles a delegated prompt with. Time and the working directory are inputs.
#[cfg(feature = "regex")]
pub struct PrepareInput<'a> {
    /// The snapshot's stack (`None` → empty system prompt, no stack messages).
    pub stack: Option<&'a crate::stack::PromptStack>,
    pub stack_key: Option<String>,
    /// The effective tool names (negotiated), which the `tools` slots describe.
    pub tool_names: &'a [String],
    pub model: &'a ModelRef,
    pub cwd: &'a str,
    pub clock: crate::runtime::Clock,
    pub macros: &'a crate::compile::MacroRegistry,
}

/// Compiles the profile's stack for a delegated run (§D1 `prepare`): base system prompt empty,
/// no parent history, the negotiated tools active. Compiler errors → `host.preparation`.
#[cfg(feature = "regex")]
pub fn prepare_prompt(input: &PrepareInput) -> Result<PreparedPrompt, Vec<D>> {
    use crate::compile::{compile, CompileInput, MessageSource};
    use crate::runtime::{ModelInfo, RuntimeSnapshot, ToolInfo};
    let Some(stack) = input.stack else {
        return Ok(PreparedPrompt {
            system_prompt: String::new(),
            stack_messages: Vec::new(),
            diagnostics: Vec::new(),
        });
    };
    let runtime = RuntimeSnapshot {
        cwd: input.cwd.to_string(),
        base_system_prompt: String::new(),
        tools: input
            .tool_names
            .iter()
            .map(|name| ToolInfo {
                name: name.clone(),
                description: None,
                snippet: None,
                guidelines: Vec::new(),
                source: None,
                active: true,
            })
            .collect(),
        model: Some(ModelInfo {
            provider: input.model.provider.clone(),
            id: input.model.id.clone(),
            ..ModelInfo::default()
        }),
        clock: input.clock,
        ..RuntimeSnapshot::default()
    };
    let mut compile_input = CompileInput::new(Some(stack), &runtime, input.macros);
    compile_input.stack_key = input.stack_key.clone();
    let compiled = compile(&compile_input);
    let errors: Vec<D> = compiled
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| D::error("host.preparation", "promptStack", d.message.clone()))
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(PreparedPrompt {
        system_prompt: compiled.system_prompt.clone(),
        stack_messages: compiled
            .messages
            .iter()
            .filter(|m| matches!(m.source, MessageSource::StackItem { .. }))
            .map(|m| m.message.clone())
            .collect(),
        diagnostics: compiled.diagnostics,
    })
}

/// Receiver-side validation of a plan object against the request and the accepted preflight
/// (§D7 plan validation codes), plus both fingerprints recomputed from the plan's own fields
/// where they are self-contained (the conversation fingerprint).
pub fn validate_plan_value(plan: &Value, request: &AgentRequest, preflight: &Value) -> Vec<D> {
    let mut out = Vec::new();
    let mut err = |code: &str, path: &str, msg: &str| out.push(D::error(code, path, msg));
    let get = |k: &str| plan.get(k).unwrap_or(&Value::Null);
    if plan.get("schemaVersion").and_then(Value::as_u64) != Some(1) {
        err(
            "plan.schema-version",
            "schemaVersion",
            "schemaVersion must be 1.",
        );
    }
    if !get("runId").as_str().is_some_and(is_opaque_id) {
        err("id.invalid", "runId", "runId must be an opaque id.");
    }
    if get("requestId").as_str() != Some(request.request_id.as_str()) {
        err(
            "plan.request-id",
            "requestId",
            "The plan names another request.",
        );
    }
    if get("preflightId") != preflight.get("preflightId").unwrap_or(&Value::Null) {
        err(
            "plan.preflight-id",
            "preflightId",
            "The plan names another preflight.",
        );
    }
    if get("backendId") != preflight.get("backend").unwrap_or(&Value::Null) {
        err(
            "plan.backend-id",
            "backendId",
            "The plan names another backend than the preflight.",
        );
    }
    if get("model") != preflight.get("model").unwrap_or(&Value::Null) {
        err(
            "plan.model-receipt",
            "model",
            "The plan model differs from the preflight receipt.",
        );
    }
    if get("thinkingLevel") != preflight.get("thinkingLevel").unwrap_or(&Value::Null) {
        err(
            "plan.thinking-receipt",
            "thinkingLevel",
            "The plan thinking level differs from the preflight receipt.",
        );
    }
    if get("resultProjection")
        != request
            .value
            .get("resultProjection")
            .unwrap_or(&Value::Null)
    {
        err(
            "plan.result-projection-mismatch",
            "resultProjection",
            "The plan's result projection differs from the request.",
        );
    }
    let catalog: Vec<&str> = preflight
        .get("toolCatalog")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|t| t.get("id").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    for id in get("effectiveToolIds").as_array().into_iter().flatten() {
        if !id.as_str().is_some_and(|id| catalog.contains(&id)) {
            err(
                "plan.tool-receipt",
                "effectiveToolIds",
                "An effective tool is not in the preflight catalog.",
            );
        }
    }
    let messages = get("messages").as_array().cloned().unwrap_or_default();
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        if !matches!(
            m.get("role").and_then(Value::as_str),
            Some("user" | "assistant" | "custom")
        ) {
            err(
                "plan.message-role",
                &path,
                "A plan message role must be user, assistant or custom.",
            );
        }
        match m.get("content").and_then(Value::as_array) {
            Some(parts) if !parts.is_empty() => {
                for p in parts {
                    if !matches!(
                        p.get("type").and_then(Value::as_str),
                        Some("text" | "media")
                    ) {
                        err(
                            "plan.content-type",
                            &path,
                            "A content part must be text or media.",
                        );
                    }
                }
            }
            _ => err(
                "plan.message-content",
                &path,
                "Message content must be a non-empty array.",
            ),
        }
    }
    if let Some(d) = check_protected_task(&messages, &request.text, &request.media) {
        out.push(d);
    }
    let system_prompt = get("systemPrompt").as_str().unwrap_or("");
    if get("conversationFingerprint").as_str()
        != Some(fingerprint(&conversation_value(system_prompt, &messages)).as_str())
    {
        out.push(D::error(
            "fingerprint.invalid",
            "conversationFingerprint",
            "The conversation fingerprint does not match the plan's prompt.",
        ));
    }
    out
}
