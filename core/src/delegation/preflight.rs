//! D4 backend descriptor and preflight: the accepted/rejected preflight, the access receipt rules
//! (shared-user honesty) and the checks of a preflight against the request and the snapshot.
//!
//! Decisions: a receipt's `process` is a boolean (process execution granted); `limit-value`
//! demands equality with the request (the spec's `[DECIDE]`); an isolated read-only receipt without
//! mount isolation and symlink safety is refused by the receipt rules themselves
//! (`access-receipt.read-isolation`, §F vector 68), and likewise isolated write access
//! (`access-receipt.write-isolation`).

use serde_json::{Map, Value};

use super::negotiate::{AccessLevel, Network, TOOL_EFFECTS};
use super::request::{AgentRequest, Boundary, Requirement};
use super::{is_safe_relative_path, ContractDiagnostic as D};
use crate::profile::ModelRef;

/// The five enforcement flags of an access receipt / descriptor.
pub const ENFORCEMENT_FLAGS: [&str; 5] = [
    "readOnlyMountIsolation",
    "readWriteMountIsolation",
    "symlinkSafeContainment",
    "processIsolation",
    "agentNetworkIsolation",
];

/// Limit enforcement a backend reports.
pub const LIMIT_ENFORCEMENTS: [&str; 4] =
    ["backend-hard", "host-abort", "best-effort", "unsupported"];

fn flag(map: Option<&Map<String, Value>>, name: &str) -> bool {
    map.and_then(|m| m.get(name)).and_then(Value::as_bool) == Some(true)
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Validates an access receipt on its own (`access-receipt.*`).
pub fn validate_access_receipt(receipt: &Value) -> Vec<D> {
    let mut out = Vec::new();
    let mut err = |code: &str, path: &str, msg: &str| out.push(D::error(code, path, msg));
    let level = s(receipt, "level").and_then(AccessLevel::parse);
    let boundary = match receipt.get("executionBoundary") {
        None => Some(Boundary::Isolated),
        Some(v) => v.as_str().and_then(Boundary::parse),
    };
    if boundary.is_none() {
        err(
            "access-receipt.boundary",
            "executionBoundary",
            "executionBoundary must be isolated or shared-user.",
        );
    }
    let enforcement = receipt.get("enforcement").and_then(Value::as_object);
    let mounts: Vec<&Value> = receipt
        .get("mounts")
        .and_then(Value::as_array)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    let mut handles = Vec::new();
    let mut ids = Vec::new();
    for m in &mounts {
        let h = s(m, "workspaceHandle").unwrap_or("");
        let id = s(m, "mountId").unwrap_or("");
        if handles.contains(&h) {
            err(
                "access-receipt.duplicate-workspace",
                "mounts",
                "Two mounts serve one workspace.",
            );
        }
        if ids.contains(&id) {
            err(
                "access-receipt.duplicate-mount",
                "mounts",
                "Duplicate mountId.",
            );
        }
        handles.push(h);
        ids.push(id);
    }
    let read_write = mounts.iter().any(|m| s(m, "mode") == Some("read-write"));
    let cwd = receipt.get("workingDirectory");
    match level {
        Some(AccessLevel::None) => {
            if !mounts.is_empty() {
                err(
                    "access-receipt.none-mounts",
                    "mounts",
                    "Access level none has no mounts.",
                );
            }
            if cwd.is_some() {
                err(
                    "access-receipt.none-cwd",
                    "workingDirectory",
                    "Access level none has no working directory.",
                );
            }
        }
        Some(AccessLevel::ReadOnly) => {
            if read_write {
                err(
                    "access-receipt.read-only-write",
                    "mounts",
                    "A read-only receipt cannot mount read-write.",
                );
            }
        }
        Some(AccessLevel::WorkspaceWrite) => {
            if !read_write {
                err(
                    "access-receipt.write-missing",
                    "mounts",
                    "workspace-write needs a read-write mount.",
                );
            }
        }
        None => err(
            "access-receipt.boundary",
            "level",
            "level must be none, read-only or workspace-write.",
        ),
    }
    if let Some(cwd) = cwd {
        if !s(cwd, "mountId").is_some_and(|id| ids.contains(&id)) {
            err(
                "access-receipt.cwd-mount",
                "workingDirectory.mountId",
                "The working directory must name a mount.",
            );
        }
        if !s(cwd, "path").is_some_and(|p| is_safe_relative_path(p, true)) {
            err(
                "access-receipt.cwd-path",
                "workingDirectory.path",
                "The working directory path must be a safe relative path.",
            );
        }
    }
    if receipt.get("process").and_then(Value::as_bool) == Some(true)
        && level != Some(AccessLevel::WorkspaceWrite)
    {
        err(
            "access-receipt.process-level",
            "process",
            "Process execution needs workspace-write.",
        );
    }
    match boundary {
        Some(Boundary::SharedUser) if ENFORCEMENT_FLAGS.iter().any(|f| flag(enforcement, f)) => {
            err(
                "access-receipt.shared-user-claim",
                "enforcement",
                "A shared-user receipt cannot claim any isolation.",
            );
        }
        Some(Boundary::Isolated) => {
            let symlink = flag(enforcement, "symlinkSafeContainment");
            if level == Some(AccessLevel::ReadOnly)
                && !(flag(enforcement, "readOnlyMountIsolation") && symlink)
            {
                err("access-receipt.read-isolation", "enforcement", "Isolated read-only access needs read-only mount isolation and symlink-safe containment.");
            }
            if level == Some(AccessLevel::WorkspaceWrite)
                && !(flag(enforcement, "readWriteMountIsolation") && symlink)
            {
                err("access-receipt.write-isolation", "enforcement", "Isolated write access needs read-write mount isolation and symlink-safe containment.");
            }
        }
        _ => {}
    }
    out
}

/// The descriptor facts the checks use.
#[derive(Clone, Debug, Default)]
pub struct Descriptor {
    pub id: String,
    /// Advertised enforcement flags (`capabilities.access`).
    pub access: Vec<String>,
    pub execution_boundaries: Vec<String>,
    /// `(limitName, enforcements)`.
    pub limits: Vec<(String, Vec<String>)>,
    pub cancellation: bool,
    pub media_mime_types: Vec<String>,
    pub remote_transport: bool,
    pub fidelity: super::plan::RuntimeFidelity,
}

/// Checks a preflight object on its own (status, diagnostics, tool catalog, runtime).
pub fn validate_preflight(preflight: &Value, descriptor: &Descriptor) -> Vec<D> {
    let mut out = Vec::new();
    let has_error = preflight
        .get("diagnostics")
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|d| s(d, "level") == Some("error")));
    match s(preflight, "status") {
        Some("rejected") => {
            if !has_error {
                out.push(D::error(
                    "preflight.rejection-error",
                    "diagnostics",
                    "A rejected preflight must carry an error diagnostic.",
                ));
            }
            return out;
        }
        Some("accepted") => {
            if has_error {
                out.push(D::error(
                    "preflight.accepted-error",
                    "diagnostics",
                    "An accepted preflight cannot carry an error diagnostic.",
                ));
            }
        }
        _ => out.push(D::error(
            "preflight.status",
            "status",
            "status must be accepted or rejected.",
        )),
    }
    if !preflight.get("thinkingLevel").is_some_and(Value::is_string) {
        out.push(D::error(
            "preflight.thinking",
            "thinkingLevel",
            "thinkingLevel must be a string.",
        ));
    }
    if preflight.get("promptRuntime").is_some()
        && descriptor.fidelity != super::plan::RuntimeFidelity::ExactPreflight
    {
        out.push(D::error(
            "preflight.runtime-extra",
            "promptRuntime",
            "Only an exact-preflight backend returns a prompt runtime.",
        ));
    }
    match preflight.get("toolCatalog").and_then(Value::as_array) {
        None => out.push(D::error(
            "preflight.tool-catalog",
            "toolCatalog",
            "toolCatalog must be an array.",
        )),
        Some(tools) => {
            let (mut ids, mut names) = (Vec::new(), Vec::new());
            for (i, t) in tools.iter().enumerate() {
                let path = format!("toolCatalog[{i}]");
                let (id, name) = (s(t, "id").unwrap_or(""), s(t, "name").unwrap_or(""));
                if ids.contains(&id) {
                    out.push(D::error(
                        "tools.duplicate-id",
                        &path,
                        format!("Duplicate tool id {id}."),
                    ));
                }
                if names.contains(&name) {
                    out.push(D::error(
                        "tools.duplicate-name",
                        &path,
                        format!("Duplicate tool name {name}."),
                    ));
                }
                ids.push(id);
                names.push(name);
                let effects_ok = t.get("effects").and_then(Value::as_array).is_some_and(|e| {
                    e.iter()
                        .all(|x| x.as_str().is_some_and(|x| TOOL_EFFECTS.contains(&x)))
                });
                if !effects_ok {
                    out.push(D::error("tools.effects", &format!("{path}.effects"), "effects must be a subset of filesystem-read, filesystem-write, process, network."));
                }
            }
        }
    }
    if let Some(receipt) = preflight.get("access") {
        out.extend(validate_access_receipt(receipt));
    }
    out
}

/// Checks an accepted preflight against the request and the model the snapshot (or a per-run
/// override) fixes.
pub fn check_preflight(
    preflight: &Value,
    descriptor: &Descriptor,
    request: &AgentRequest,
    model: &ModelRef,
    thinking_level: &str,
) -> Vec<D> {
    let mut out = Vec::new();
    let mut err = |code: &str, path: &str, msg: String| out.push(D::error(code, path, msg));
    if descriptor.remote_transport && !request.remote_egress_consent {
        err(
            "preflight.egress",
            "remoteEgressConsent",
            "The backend sends the prompt to a remote transport and the request gives no consent."
                .into(),
        );
    }
    for m in &request.media {
        if !descriptor.media_mime_types.contains(&m.mime_type) {
            err(
                "preflight.media",
                "input.media",
                format!("The backend does not accept {}.", m.mime_type),
            );
        }
    }
    let pm = preflight.get("model");
    if pm.and_then(|m| s(m, "provider")) != Some(model.provider.as_str())
        || pm.and_then(|m| s(m, "id")) != Some(model.id.as_str())
    {
        err(
            "preflight.model-mismatch",
            "model",
            "The preflight model differs from the profile's (or the per-run override).".into(),
        );
    }
    if s(preflight, "thinkingLevel") != Some(thinking_level) {
        err(
            "preflight.thinking-mismatch",
            "thinkingLevel",
            "The preflight thinking level differs from the profile's.".into(),
        );
    }
    let access = &request.access;
    let Some(receipt) = preflight.get("access") else {
        err(
            "preflight.access-level",
            "access",
            "The preflight has no access receipt.".into(),
        );
        return out;
    };
    let enforcement = receipt.get("enforcement").and_then(Value::as_object);
    if s(receipt, "level") != Some(access.level.as_str()) {
        err(
            "preflight.access-level",
            "access.level",
            "The access receipt level differs from the request.".into(),
        );
    }
    let boundary = s(receipt, "executionBoundary").unwrap_or("isolated");
    if boundary != access.execution_boundary.as_str() {
        err(
            "preflight.execution-boundary",
            "access.executionBoundary",
            "The receipt's execution boundary differs from the request.".into(),
        );
    }
    let isolated = access.execution_boundary == Boundary::Isolated;
    match access.network {
        Network::Deny => {
            if s(receipt, "network") != Some("deny") || !flag(enforcement, "agentNetworkIsolation")
            {
                err(
                    "preflight.network-isolation",
                    "access.network",
                    "Denied network needs agent-network isolation.".into(),
                );
            }
        }
        Network::Allow => {
            if s(receipt, "network") != Some("allow") {
                err(
                    "preflight.network",
                    "access.network",
                    "The receipt's network differs from the request.".into(),
                );
            }
        }
    }
    let allow_process = access.allow_process == Some(true);
    if receipt
        .get("process")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        != allow_process
    {
        err(
            "preflight.process",
            "access.allowProcess",
            "The receipt's process grant differs from the request.".into(),
        );
    }
    if isolated
        && !allow_process
        && !flag(enforcement, "processIsolation")
        && access.level == AccessLevel::WorkspaceWrite
    {
        err(
            "preflight.process-isolation",
            "access.allowProcess",
            "Isolated write access without processes needs process isolation.".into(),
        );
    }
    let symlink = flag(enforcement, "symlinkSafeContainment");
    if isolated
        && access.level == AccessLevel::ReadOnly
        && !(flag(enforcement, "readOnlyMountIsolation") && symlink)
    {
        err(
            "preflight.read-isolation",
            "access",
            "Isolated read-only access needs mount isolation and symlink safety.".into(),
        );
    }
    if isolated
        && access.level == AccessLevel::WorkspaceWrite
        && !(flag(enforcement, "readWriteMountIsolation") && symlink)
    {
        err(
            "preflight.write-isolation",
            "access",
            "Isolated write access needs mount isolation and symlink safety.".into(),
        );
    }
    for f in ENFORCEMENT_FLAGS {
        if flag(enforcement, f) && !descriptor.access.iter().any(|a| a == f) {
            err(
                "preflight.access-capability",
                &format!("access.enforcement.{f}"),
                format!("The receipt claims {f}, which the backend does not advertise."),
            );
        }
    }
    let mounts: Vec<&Value> = receipt
        .get("mounts")
        .and_then(Value::as_array)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    for w in &access.workspaces {
        match mounts
            .iter()
            .find(|m| s(m, "workspaceHandle") == Some(w.handle.as_str()))
        {
            None => err(
                "preflight.mount-missing",
                "access.workspaces",
                format!("Workspace {} has no mount.", w.handle),
            ),
            Some(m) => {
                let mode = if w.read_write {
                    "read-write"
                } else {
                    "read-only"
                };
                if s(m, "mode") != Some(mode) {
                    err(
                        "preflight.mount-mode",
                        "access.workspaces",
                        format!("Workspace {} is mounted with another mode.", w.handle),
                    );
                }
            }
        }
    }
    for m in &mounts {
        let h = s(m, "workspaceHandle").unwrap_or("");
        if !access.workspaces.iter().any(|w| w.handle == h) {
            err(
                "preflight.mount-extra",
                "access.mounts",
                format!("Mount for unknown workspace {h}."),
            );
        }
    }
    match (&access.working_directory, receipt.get("workingDirectory")) {
        (None, Some(_)) => err(
            "preflight.cwd-extra",
            "access.workingDirectory",
            "The receipt has a working directory the request did not ask for.".into(),
        ),
        (Some(wd), got) => {
            let mount_id = mounts
                .iter()
                .find(|m| s(m, "workspaceHandle") == Some(wd.workspace_handle.as_str()))
                .and_then(|m| s(m, "mountId"));
            let ok = got.is_some_and(|g| {
                s(g, "mountId") == mount_id
                    && mount_id.is_some()
                    && s(g, "path") == Some(wd.path.as_str())
            });
            if !ok {
                err(
                    "preflight.cwd",
                    "access.workingDirectory",
                    "The receipt's working directory differs from the request.".into(),
                );
            }
        }
        (None, None) => {}
    }
    let limits = preflight.get("limits").and_then(Value::as_object);
    for l in &request.limits {
        let path = format!("limits.{}", l.name);
        let Some(r) = limits.and_then(|m| m.get(&l.name)) else {
            let d = D::new(
                if l.enforcement == Requirement::Required {
                    super::Level::Error
                } else {
                    super::Level::Warning
                },
                "preflight.limit-missing",
                Some(&path),
                format!("The preflight has no receipt for {}.", l.name),
            );
            out.push(d);
            continue;
        };
        let enforcement = s(r, "enforcement").unwrap_or("");
        let mut err = |code: &str, msg: String| out.push(D::error(code, &path, msg));
        if r.get("value").and_then(Value::as_u64) != Some(l.value) {
            err(
                "preflight.limit-value",
                format!("The {} receipt value differs from the request.", l.name),
            );
        }
        if l.enforcement == Requirement::Required && enforcement != "backend-hard" {
            err(
                "preflight.limit-enforcement",
                format!(
                    "A required {} must be enforced backend-hard, not {enforcement}.",
                    l.name
                ),
            );
        }
        let advertised = descriptor
            .limits
            .iter()
            .find(|(n, _)| *n == l.name)
            .is_some_and(|(_, e)| e.iter().any(|x| x == enforcement));
        if !advertised || !LIMIT_ENFORCEMENTS.contains(&enforcement) {
            err(
                "preflight.limit-capability",
                format!(
                    "The backend does not advertise {enforcement} for {}.",
                    l.name
                ),
            );
        }
        if l.name == "timeoutMs" && enforcement == "host-abort" && !descriptor.cancellation {
            err(
                "preflight.timeout-cancellation",
                "A host-abort timeout needs cancellation support.".into(),
            );
        }
    }
    if let Some(limits) = limits {
        for name in limits.keys() {
            if request.limit(name).is_none() {
                out.push(D::error(
                    "preflight.limit-extra",
                    &format!("limits.{name}"),
                    format!("The preflight reports a limit {name} the request did not set."),
                ));
            }
        }
    }
    out
}
