//! `GET /api/meta`, `GET /api/resources`, `GET /api/registry` and `POST /api/reload`.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use forge_core::api::{Meta, Reloaded, ResourceGroup, Resources, SkillView, ToolView};
use forge_core::profile::ThinkingLevel;
use forge_core::runtime::ToolInfo;
use forge_core::stack::slot_schema::SLOT_SCHEMAS;
use serde_json::json;

use super::extract::{ok_json, ok_typed};
use super::AppState;

/// What this server can do; the editor compares it with what it expects and asks for a reload
/// when they differ.
pub const FEATURES: [&str; 13] = [
    "stacks",
    "profiles",
    "capabilities",
    "config",
    "revisions",
    "events",
    "validate",
    "preview",
    "fork",
    "export",
    "activate",
    "resources",
    "live",
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/meta", get(meta))
        .route("/api/resources", get(resources))
        .route("/api/registry", get(registry))
        .route("/api/reload", post(reload))
}

/// `GET /api/meta`.
async fn meta(State(state): State<AppState>) -> Response {
    ok_typed(&Meta {
        name: "pi-forge".to_string(),
        version: crate::VERSION.to_string(),
        features: FEATURES.iter().map(|f| f.to_string()).collect(),
        trusted: state.ws.trusted(),
        live_host: state.live.connected(),
        live: state.live.view(),
        demo: state.demo,
        project: state.project.display().to_string(),
        global_dir: state.global.display().to_string(),
        generation: state.ws.generation(),
        // A resource folder that cannot be listed (permission denied, a file in its place):
        // the path and the reason. What could be read is served as usual.
        problems: state.ws.problems(),
    })
}

/// `GET /api/resources` → the tools and skills of the runtime pi-forge compiles against (without
/// a live Pi session: Pi's built-in tools, no skills), sorted, and grouped by source.
async fn resources(State(state): State<AppState>) -> Response {
    let runtime = state.runtime();
    let mut tools: Vec<&ToolInfo> = runtime.tools.iter().collect();
    tools.sort_by(|a, b| (&a.source, &a.name).cmp(&(&b.source, &b.name)));
    let mut skills: Vec<_> = runtime.skills.iter().collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    let mut groups: Vec<ResourceGroup> = Vec::new();
    for tool in &tools {
        let source = tool.source.clone().unwrap_or_else(|| "unknown".to_string());
        match groups.iter_mut().find(|g| g.source == source) {
            Some(group) => group.tools.push(tool.name.clone()),
            None => groups.push(ResourceGroup {
                source,
                tools: vec![tool.name.clone()],
                skills: Vec::new(),
            }),
        }
    }
    for skill in &skills {
        let source = skill.file_path.clone();
        match groups.iter_mut().find(|g| g.source == source) {
            Some(group) => group.skills.push(skill.name.clone()),
            None => groups.push(ResourceGroup {
                source,
                tools: Vec::new(),
                skills: vec![skill.name.clone()],
            }),
        }
    }
    ok_typed(&Resources {
        live_host: runtime.live,
        tools: tools.iter().map(|t| ToolView::from(*t)).collect(),
        skills: skills
            .iter()
            .map(|s| SkillView {
                name: s.name.clone(),
                description: s.description.clone(),
                source: s.file_path.clone(),
                hidden: s.disable_model_invocation,
            })
            .collect(),
        groups,
    })
}

/// `GET /api/registry` → the fixed vocabulary the editor builds forms from: the option schema of
/// every built-in slot and the thinking levels a profile may name. It does not depend on the
/// workspace.
async fn registry() -> Response {
    let levels: Vec<&str> = ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
    ok_json(&json!({
        "slots": SLOT_SCHEMAS,
        "thinkingLevels": levels,
    }))
}

/// `POST /api/reload` → re-reads every file now (the watcher normally does this on its own) and
/// answers `{ok, generation, changed}`.
async fn reload(State(state): State<AppState>) -> Response {
    let event = state.ws.reload().await;
    ok_typed(&Reloaded {
        ok: true,
        generation: state.ws.generation(),
        changed: event.map_or(0, |e| e.changes.len()),
        active_id: state.active_id(),
    })
}
