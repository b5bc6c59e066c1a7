//! JSON views of loaded resources, shared by the routers.
//!
//! Every resource view carries `selector` (`scope:id`), `id`, `scope`, `path` (absolute; also as
//! `filePath`, the original editor's name), `revision` (`sha256:<hex>`; also as the bare 64-digit
//! `sourceRevision` of 0.5.5), `diagnostics`, `errors` and `warnings`, plus the resource object
//! exactly as the file holds it (unknown fields included; `null` when the file is not JSON).
//! A file that could not be read (empty `revision`) also has `unreadable`: the reason.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use forge_core::api::{CapabilityView, ResourceView, StackRow, StackView};
use forge_core::diag::counts;
use forge_core::id::{ResourceKey, Scope};
use forge_core::workspace::{CapabilityEntry, Loaded, ProfileEntry, StackEntry, WorkspaceSnapshot};
use serde::Serialize;
use serde_json::Value;

use super::extract::{bare_revision, etag, ok_typed};

/// The members every resource view has.
pub fn common<T>(entry: &Loaded<T>) -> ResourceView {
    let (errors, warnings, _) = counts(&entry.diagnostics);
    ResourceView {
        selector: entry.key.to_string(),
        id: entry.key.id.clone(),
        scope: entry.key.scope.as_str().to_string(),
        path: entry.path.clone(),
        file_path: entry.path.clone(),
        revision: entry.revision.clone(),
        source_revision: bare_revision(&entry.revision).to_string(),
        // The editor shows the file read-only with this reason; saving it is 409 `unreadable`.
        unreadable: entry.unreadable().map(|reason| reason.to_string()),
        diagnostics: entry.diagnostics.clone(),
        errors,
        warnings,
    }
}

/// A 200 with the view and `ETag: "<revision>"`.
pub fn with_etag<T: Serialize>(view: &T, revision: &str) -> Response {
    let mut response = ok_typed(view);
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
) -> StackRow {
    let stack = &entry.parsed.stack;
    StackRow {
        common: common(entry),
        name: stack.name().map(str::to_string),
        description: stack.description().map(str::to_string),
        auto_activate: stack.auto_activate(),
        mode: stack.mode().as_str().to_string(),
        item_count: stack.items().len(),
        active: active == Some(entry.key.to_string().as_str()),
        legacy: entry.is_legacy(),
        shadowed: shadowed(entry, &snapshot.stacks),
    }
}

/// `GET /api/stacks/:sel`.
pub fn stack_detail(entry: &StackEntry, active: Option<&str>) -> StackView {
    StackView {
        common: common(entry),
        active: active == Some(entry.key.to_string().as_str()),
        legacy: entry.is_legacy(),
        stack: entry.parsed.raw.clone().unwrap_or(Value::Null),
    }
}

/// The resource part of a profile view (`common`, `shadowed`, `profile`); the profiles router
/// adds the preview.
pub fn profile_view(
    entry: &ProfileEntry,
    snapshot: &WorkspaceSnapshot,
) -> (ResourceView, bool, Value) {
    (
        common(entry),
        shadowed(entry, &snapshot.profiles),
        entry.parsed.raw.clone().unwrap_or(Value::Null),
    )
}

/// `GET /api/capabilities/:sel` and each row of the list.
/// One capability as the API shows it. `bound_by` names the Presets that bind it
/// (`WorkspaceSnapshot::capability_users`; computed once per list).
pub fn capability_view(
    entry: &CapabilityEntry,
    snapshot: &WorkspaceSnapshot,
    bound_by: &[ResourceKey],
) -> CapabilityView {
    CapabilityView {
        common: common(entry),
        bound_by: bound_by.iter().map(ToString::to_string).collect(),
        shadowed: shadowed(entry, &snapshot.capabilities),
        usable: entry.usable(),
        capability: entry.parsed.raw.clone().unwrap_or(Value::Null),
    }
}
