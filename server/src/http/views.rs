//! JSON views of loaded resources, shared by the routers.
//!
//! Every resource view carries `selector` (`scope:id`), `id`, `scope`, `path` (absolute; also as
//! `filePath`, the original editor's name), `revision` (`sha256:<hex>`; also as the bare 64-digit
//! `sourceRevision` of 0.5.5), `diagnostics`, `errors` and `warnings`, plus the resource object
//! exactly as the file holds it (unknown fields included; `null` when the file is not JSON).
//! A file that could not be read (empty `revision`) also has `unreadable`: the reason.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use forge_core::diag::counts;
use forge_core::id::{ResourceKey, Scope};
use forge_core::workspace::{CapabilityEntry, Loaded, ProfileEntry, StackEntry, WorkspaceSnapshot};
use serde_json::{json, Map, Value};

use super::extract::{bare_revision, etag, ok_json};

/// The members every resource view has.
pub fn common<T>(entry: &Loaded<T>) -> Map<String, Value> {
    let (errors, warnings, _) = counts(&entry.diagnostics);
    let mut map = Map::new();
    map.insert("selector".into(), json!(entry.key.to_string()));
    map.insert("id".into(), json!(entry.key.id));
    map.insert("scope".into(), json!(entry.key.scope.as_str()));
    map.insert("path".into(), json!(entry.path));
    map.insert("filePath".into(), json!(entry.path));
    map.insert("revision".into(), json!(entry.revision));
    map.insert(
        "sourceRevision".into(),
        json!(bare_revision(&entry.revision)),
    );
    if let Some(reason) = entry.unreadable() {
        // The editor shows the file read-only with this reason; saving it is 409 `unreadable`.
        map.insert("unreadable".into(), json!(reason));
    }
    map.insert("diagnostics".into(), json!(entry.diagnostics));
    map.insert("errors".into(), json!(errors));
    map.insert("warnings".into(), json!(warnings));
    map
}

/// A 200 with the view and `ETag: "<revision>"`.
pub fn with_etag(view: &Value, revision: &str) -> Response {
    let mut response = ok_json(view);
    if let Some(value) = etag(revision) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response.into_response()
}

fn shadowed<T>(entry: &Loaded<T>, all: &[Loaded<T>]) -> bool {
    entry.key.scope == Scope::Global
        && all
            .iter()
            .any(|e| e.key.scope == Scope::Project && e.key.id == entry.key.id)
}

/// One row of `GET /api/stacks`.
pub fn stack_summary(
    entry: &StackEntry,
    snapshot: &WorkspaceSnapshot,
    active: Option<&str>,
) -> Value {
    let stack = &entry.parsed.stack;
    let mut map = common(entry);
    map.insert("name".into(), json!(stack.name()));
    map.insert("description".into(), json!(stack.description()));
    map.insert("autoActivate".into(), json!(stack.auto_activate()));
    map.insert("mode".into(), json!(stack.mode().as_str()));
    map.insert("itemCount".into(), json!(stack.items().len()));
    map.insert(
        "active".into(),
        json!(active == Some(entry.key.to_string().as_str())),
    );
    map.insert("legacy".into(), json!(entry.is_legacy()));
    map.insert("shadowed".into(), json!(shadowed(entry, &snapshot.stacks)));
    Value::Object(map)
}

/// `GET /api/stacks/:sel`.
pub fn stack_detail(entry: &StackEntry, active: Option<&str>) -> Value {
    let mut map = common(entry);
    map.insert(
        "active".into(),
        json!(active == Some(entry.key.to_string().as_str())),
    );
    map.insert("legacy".into(), json!(entry.is_legacy()));
    map.insert(
        "stack".into(),
        entry.parsed.raw.clone().unwrap_or(Value::Null),
    );
    Value::Object(map)
}

/// The resource part of a profile view; `preview` is added by the profiles router.
pub fn profile_view(entry: &ProfileEntry, snapshot: &WorkspaceSnapshot) -> Map<String, Value> {
    let mut map = common(entry);
    map.insert(
        "shadowed".into(),
        json!(shadowed(entry, &snapshot.profiles)),
    );
    map.insert(
        "profile".into(),
        entry.parsed.raw.clone().unwrap_or(Value::Null),
    );
    map
}

/// `GET /api/capabilities/:sel` and each row of the list.
/// One capability as the API shows it. `bound_by` names the Presets that bind it
/// (`WorkspaceSnapshot::capability_users`; computed once per list).
pub fn capability_view(
    entry: &CapabilityEntry,
    snapshot: &WorkspaceSnapshot,
    bound_by: &[ResourceKey],
) -> Value {
    let mut map = common(entry);
    map.insert(
        "boundBy".into(),
        json!(bound_by.iter().map(ToString::to_string).collect::<Vec<_>>()),
    );
    map.insert(
        "shadowed".into(),
        json!(shadowed(entry, &snapshot.capabilities)),
    );
    map.insert("usable".into(), json!(entry.usable()));
    map.insert(
        "capability".into(),
        entry.parsed.raw.clone().unwrap_or(Value::Null),
    );
    Value::Object(map)
}
