//! Commands that change the live session's Preset: the server's choice moves first, the
//! capability plan rides along, and a refused command puts the old choice back.

use forge_core::session::{self, STACK_STATE_TYPE};
use serde_json::{json, Map, Value};

use super::capability_state;
use super::error::{command_ok, ApiError, ApiResult};
use super::state::ServerState;

/// Makes `key` (or no Preset) the live session's active Preset: Pi records it as a session
/// entry; leaving a Preset restores the tools that were active before it.
pub async fn set_live_stack(state: &ServerState, key: Option<String>) -> ApiResult<Value> {
    let baseline = state
        .live
        .with_live(|h| h.baseline_tools().to_vec())
        .map_err(ApiError::from)?;
    let mut body = Map::new();
    body.insert(
        "entries".into(),
        json!([{
            "customType": STACK_STATE_TYPE,
            "data": session::stack_state_data(key.as_deref()),
        }]),
    );
    body.insert(
        "activeStackId".into(),
        key.clone().map_or(Value::Null, Value::String),
    );
    if key.is_none() {
        body.insert("tools".into(), json!(baseline));
    }
    command_switching_stack(state, "setStack", body, key).await
}

/// Sends a command that makes `key` the live session's Preset. The server's choice changes
/// first, so a turn that starts while Pi records the entry already compiles the new Preset; a
/// refused or lost command puts the old one back.
///
/// Capabilities follow the switch (B8): the bound activations of the Preset being left get
/// lifecycle deactivations, written with the same command after the Preset's own entries; a
/// surviving capability whose tool patch the target's policy rejects refuses the switch (409)
/// before anything is sent.
pub async fn command_switching_stack(
    state: &ServerState,
    kind: &str,
    mut body: Map<String, Value>,
    key: Option<String>,
) -> ApiResult<Value> {
    let _serial = state.capability_lock.lock().await;
    let (inputs, plan, mirror) = capability_state::switch_plan(state, key.as_deref())?;
    let entries = capability_state::plan_entries(&plan);
    if let Some(Value::Array(list)) = body.get_mut("entries") {
        list.extend(entries);
    } else {
        body.insert("entries".into(), Value::Array(entries));
    }
    if key.is_none() && body.contains_key("tools") {
        body.insert("tools".into(), json!(plan.effective_tools));
    }
    body.extend(mirror.into_iter().filter(|(k, _)| k != "tools"));
    let previous = state.live.with_live(|h| h.replace_active_stack(key))?;
    let outcome = match state.live.command(kind, body).await {
        Ok(result) => command_ok(&result).map(|()| result),
        Err(e) => Err(e.into()),
    };
    match &outcome {
        Ok(_) => capability_state::record_plan(state, &inputs, &plan),
        Err(_) => {
            let _ = state.live.with_live(|h| h.set_active_stack(previous));
        }
    }
    outcome
}
