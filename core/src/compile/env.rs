//! Tool and skill selection, and the environment templates see (`runtime.*`, `parameters`).

use serde_json::{Map, Value};

use crate::runtime::{RuntimeSnapshot, SkillInfo};
use crate::stack::{ItemBody, Policy, PromptStack};

/// The tools the model gets: the capabilities spec §B9 calculation without capability patches.
///
/// - the source set is the active tools (which are registered by construction);
/// - `initial`, when present, replaces it: its names in their order, unregistered ones skipped;
/// - otherwise an effective policy filters the source set, or the whole registry for a selective
///   `allow` (non-empty, without `*`);
/// - an effective policy is applied once more at the end, so `initial` never escapes the ceiling.
pub(crate) fn select_tools(runtime: &RuntimeSnapshot, policy: Option<&Policy>) -> Vec<String> {
    let registered = unique(runtime.registered_tool_names());
    let active = unique(runtime.active_tool_names());
    let Some(policy) = policy else {
        return active.into_iter().map(str::to_string).collect();
    };
    let base: Vec<&str> = if let Some(initial) = &policy.initial {
        let mut names: Vec<&str> = Vec::new();
        for name in initial {
            if registered.contains(&name.as_str()) && !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        names
    } else if policy.is_effective() {
        let from = if policy.is_selective_allow() {
            &registered
        } else {
            &active
        };
        policy.apply(from)
    } else {
        active
    };
    policy
        .apply(&base)
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn unique(names: Vec<&str>) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::with_capacity(names.len());
    for name in names {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
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
