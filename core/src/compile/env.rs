//! Tool and skill selection, and the environment templates see (`runtime.*`, `parameters`).

use serde_json::{Map, Value};

use crate::runtime::{RuntimeSnapshot, SkillInfo};
use crate::stack::{ItemBody, Policy, PromptStack};

/// The tools the model gets: the capabilities spec §B9 calculation
/// ([`effective_tools`](crate::capability::tools::effective_tools)) with the runtime's active
/// tools as the baseline and no capability patches.
pub(crate) fn select_tools(
    runtime: &RuntimeSnapshot,
    policy: Option<&Policy>,
    patches: &[&crate::capability::ToolPatch],
) -> Vec<String> {
    let registered = runtime.registered_tool_names();
    let active = runtime.active_tool_names();
    crate::capability::tools::effective_tools(policy, &registered, &active, patches)
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Skills the model may see: not `disableModelInvocation`, and let through by the skills policy.
pub(crate) fn select_skills<'a>(
    runtime: &'a RuntimeSnapshot,
    policy: Option<&Policy>,
) -> Vec<&'a SkillInfo> {
    runtime
        .skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .filter(|s| policy.is_none_or(|p| p.permits(&s.name)))
        .collect()
}

/// `provider/id` of the active model, or `""`.
pub(crate) fn active_model(runtime: &RuntimeSnapshot) -> String {
    runtime
        .model
        .as_ref()
        .map(|m| format!("{}/{}", m.provider, m.id))
        .unwrap_or_default()
}

/// The `runtime` object of the template environment (prompt-stacks spec §3, key order as listed
/// there).
pub(crate) fn runtime_env(
    runtime: &RuntimeSnapshot,
    stack: &PromptStack,
    selected_tools: &[String],
    latest_user_message: &str,
) -> Value {
    let local = runtime.clock.local();
    let mut env = Map::new();
    env.insert("cwd".into(), runtime.cwd.clone().into());
    env.insert("date".into(), local.date_text().into());
    env.insert("time".into(), local.time_text().into());
    env.insert("lastUserMessage".into(), latest_user_message.into());
    env.insert(
        "selectedTools".into(),
        Value::Array(selected_tools.iter().cloned().map(Value::String).collect()),
    );
    env.insert("selectedToolsText".into(), selected_tools.join(", ").into());
    env.insert("activeModel".into(), active_model(runtime).into());
    env.insert("populatedAt".into(), runtime.clock.iso_utc().into());
    env.insert("timezone".into(), "local".into());
    let tools = selected_tools
        .iter()
        .map(|t| (t.clone(), Value::Bool(true)))
        .collect();
    env.insert("tool".into(), Value::Object(tools));
    let mut slots = Map::new();
    for item in stack.items.iter().filter(|i| i.is_enabled()) {
        if let ItemBody::Slot { slot, .. } = &item.body {
            slots.insert(slot.clone(), Value::Bool(true));
        }
    }
    env.insert("slot".into(), Value::Object(slots));
    Value::Object(env)
}

/// `parameters`: the v2 parameters, or the v1 variables, as an object.
pub(crate) fn parameters(stack: &PromptStack) -> Value {
    if let Some(parameters) = &stack.parameters {
        return Value::Object(parameters.clone());
    }
    let variables = stack
        .variables
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Value::Object(variables)
}
