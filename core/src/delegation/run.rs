//! E1 `subagent_run` arguments (closed schema) and the route pin.
//!
//! Decisions where the spec gives only defaults: `maxTurns` (24), `maxToolCalls` (120) and
//! `timeoutSeconds` (1,200) are also the maximums (a caller may lower them, never raise them);
//! `name` is 2–6 white-space-separated words, at most 120 characters; `prompt` must not be blank.
//! Every problem is `invalid_arguments` (admission: no child, no artifacts).

use serde_json::Value;

use super::result::{Failure, FailureCode, Route};

pub const DEFAULT_MAX_TURNS: u64 = 24;
pub const DEFAULT_MAX_TOOL_CALLS: u64 = 120;
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 1_200;
/// The tools of the `inspect` capability (plus the artifact range reader the runtime adds).
pub const INSPECT_TOOLS: [&str; 4] = ["read", "grep", "find", "ls"];

const KEYS: [&str; 11] = [
    "name",
    "prompt",
    "route",
    "capability",
    "extensionMode",
    "maxTurns",
    "maxToolCalls",
    "timeoutSeconds",
    "autoDeliver",
    "notifyOnCompletion",
    "triggerOnCompletion",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtensionMode {
    Isolated,
    Ambient,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoDeliver {
    Never,
    WhenSmall,
    Always,
}

/// Decoded `subagent_run` arguments, defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunArgs {
    pub name: String,
    pub prompt: String,
    /// `None` = the parent's current model.
    pub route: Option<Route>,
    pub extension_mode: ExtensionMode,
    pub max_turns: u64,
    pub max_tool_calls: u64,
    pub timeout_seconds: u64,
    pub auto_deliver: AutoDeliver,
    pub notify_on_completion: bool,
    pub trigger_on_completion: bool,
}

fn bad(message: impl Into<String>) -> Failure {
    Failure::new(FailureCode::InvalidArguments, message)
}

fn bounded(value: Option<&Value>, key: &str, max: u64) -> Result<u64, Failure> {
    match value {
        None => Ok(max),
        Some(v) => super::pos_int(v)
            .filter(|n| *n <= max)
            .ok_or_else(|| bad(format!("{key} must be an integer from 1 to {max}."))),
    }
}

fn boolean(value: Option<&Value>, key: &str) -> Result<bool, Failure> {
    match value {
        None => Ok(true),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(format!("{key} must be a boolean."))),
    }
}

/// Decodes `subagent_run` arguments.
pub fn decode_run_args(value: &Value) -> Result<RunArgs, Failure> {
    let map = value
        .as_object()
        .ok_or_else(|| bad("subagent_run arguments must be an object."))?;
    if let Some(key) = super::unknown_keys(map, &KEYS).first() {
        return Err(bad(format!("Unknown subagent_run argument: {key}.")));
    }
    let name = map
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| {
            let words = n.split_whitespace().count();
            (2..=6).contains(&words) && n.chars().count() <= 120
        })
        .ok_or_else(|| bad("name must be 2 to 6 words."))?;
    let prompt = map
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|p| !crate::json_trim_is_empty(p))
        .ok_or_else(|| bad("prompt is required and must not be blank."))?;
    let route = match map.get("route") {
        None => None,
        Some(r) => {
            let ok = r
                .as_object()
                .is_some_and(|m| super::unknown_keys(m, &["provider", "model"]).is_empty());
            let provider = r
                .get("provider")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let model = r
                .get("model")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            match (ok, provider, model) {
                (true, Some(p), Some(m)) => Some(Route::new(p, m)),
                _ => {
                    return Err(bad(
                        "route must be {provider, model} with non-empty strings.",
                    ))
                }
            }
        }
    };
    match map.get("capability") {
        None => {}
        Some(Value::String(c)) if c == "inspect" => {}
        Some(_) => return Err(bad("capability must be \"inspect\".")),
    }
    let extension_mode = match map.get("extensionMode").map(Value::as_str) {
        None | Some(Some("isolated")) => ExtensionMode::Isolated,
        Some(Some("ambient")) => ExtensionMode::Ambient,
        _ => return Err(bad("extensionMode must be \"isolated\" or \"ambient\".")),
    };
    let auto_deliver = match map.get("autoDeliver").map(Value::as_str) {
        None | Some(Some("never")) => AutoDeliver::Never,
        Some(Some("when_small")) => AutoDeliver::WhenSmall,
        Some(Some("always")) => AutoDeliver::Always,
        _ => {
            return Err(bad(
                "autoDeliver must be \"never\", \"when_small\" or \"always\".",
            ))
        }
    };
    Ok(RunArgs {
        name: name.to_string(),
        prompt: prompt.to_string(),
        route,
        extension_mode,
        max_turns: bounded(map.get("maxTurns"), "maxTurns", DEFAULT_MAX_TURNS)?,
        max_tool_calls: bounded(
            map.get("maxToolCalls"),
            "maxToolCalls",
            DEFAULT_MAX_TOOL_CALLS,
        )?,
        timeout_seconds: bounded(
            map.get("timeoutSeconds"),
            "timeoutSeconds",
            DEFAULT_TIMEOUT_SECONDS,
        )?,
        auto_deliver,
        notify_on_completion: boolean(map.get("notifyOnCompletion"), "notifyOnCompletion")?,
        trigger_on_completion: boolean(map.get("triggerOnCompletion"), "triggerOnCompletion")?,
    })
}

/// What the model registry says about a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteStatus {
    Known,
    UnknownCapacity,
    Unknown,
}

/// Pins the route once: omitted → the parent's current model; explicit → the exact registry
/// entry. Never substituted or fallen back: an unknown route is `route_unresolved`, an unknown
/// capacity `route_capacity_unknown`.
pub fn pin_route(
    requested: Option<&Route>,
    parent: Option<&Route>,
    lookup: impl Fn(&Route) -> RouteStatus,
) -> Result<Route, Failure> {
    let route = requested.or(parent).ok_or_else(|| {
        Failure::new(
            FailureCode::RouteUnresolved,
            "No route was given and the parent has no current model.",
        )
    })?;
    match lookup(route) {
        RouteStatus::Known => Ok(route.clone()),
        RouteStatus::UnknownCapacity => Err(Failure::new(
            FailureCode::RouteCapacityUnknown,
            format!(
                "The context capacity of {}/{} is unknown.",
                route.provider, route.model
            ),
        )),
        RouteStatus::Unknown => Err(Failure::new(
            FailureCode::RouteUnresolved,
            format!(
                "Route {}/{} is not in the model registry.",
                route.provider, route.model
            ),
        )),
    }
}
