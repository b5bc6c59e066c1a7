//! D2 `AgentRequest` decoding: exact key sets, limits, stable codes.
//!
//! Unknown keys are errors with the section's `.unknown` code (`request.unknown`,
//! `access.unknown`, `limits.unknown`, …; the spec only names `limits.unknown`, the others follow
//! the same pattern). Messages are ours; codes and paths are the contract.

use serde_json::{Map, Value};

use super::context::{ContextItem, ContextKind, TaskMedia};
use super::negotiate::{AccessFacts, AccessLevel, Network};
use super::{has_errors, ContractDiagnostic as D};
use super::{is_opaque_id, is_safe_relative_path, non_neg_int, pos_int, unknown_keys};
use crate::canonical::is_fingerprint;

/// Limit names a request may set.
pub const LIMIT_NAMES: [&str; 4] = ["timeoutMs", "maxTurns", "tokenBudget", "maxOutputBytes"];

const REQUEST_KEYS: [&str; 11] = [
    "schemaVersion",
    "requestId",
    "profileId",
    "expectedProfileFingerprint",
    "input",
    "selectedContext",
    "access",
    "limits",
    "resultProjection",
    "parent",
    "remoteEgressConsent",
];

/// Execution boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Boundary {
    Isolated,
    SharedUser,
}

impl Boundary {
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::Isolated => "isolated",
            Boundary::SharedUser => "shared-user",
        }
    }
    pub fn parse(text: &str) -> Option<Boundary> {
        match text {
            "isolated" => Some(Boundary::Isolated),
            "shared-user" => Some(Boundary::SharedUser),
            _ => None,
        }
    }
}

/// Limit enforcement a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Requirement {
    Required,
    BestEffort,
}

impl Requirement {
    pub fn as_str(self) -> &'static str {
        match self {
            Requirement::Required => "required",
            Requirement::BestEffort => "best-effort",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Workspace {
    pub handle: String,
    pub read_write: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkingDirectory {
    pub workspace_handle: String,
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub level: AccessLevel,
    pub execution_boundary: Boundary,
    pub workspaces: Vec<Workspace>,
    pub working_directory: Option<WorkingDirectory>,
    pub network: Network,
    pub allow_process: Option<bool>,
}

impl Access {
    /// The facts the host receives.
    pub fn facts(&self) -> AccessFacts {
        AccessFacts {
            level: self.level,
            network: self.network,
            allow_process: self.allow_process == Some(true),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limit {
    pub name: String,
    pub value: u64,
    pub enforcement: Requirement,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Parent {
    pub run_id: Option<String>,
    pub session_id: Option<String>,
    pub depth: u64,
    pub max_depth: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SelectedContext {
    pub max_bytes: u64,
    pub items: Vec<ContextItem>,
}

/// A decoded request. [`AgentRequest::value`] is the request object as received (it is valid), the
/// `intent` the plan seals.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentRequest {
    pub request_id: String,
    pub profile_id: String,
    pub expected_profile_fingerprint: Option<String>,
    pub text: String,
    pub media: Vec<TaskMedia>,
    pub selected_context: Option<SelectedContext>,
    pub access: Access,
    pub limits: Vec<Limit>,
    pub result_max_chars: u64,
    pub parent: Parent,
    pub remote_egress_consent: bool,
    pub value: Value,
}

impl AgentRequest {
    pub fn limit(&self, name: &str) -> Option<&Limit> {
        self.limits.iter().find(|l| l.name == name)
    }
}

struct Ctx {
    diags: Vec<D>,
}

impl Ctx {
    fn err(&mut self, code: &str, path: &str, message: impl Into<String>) {
        self.diags.push(D::error(code, path, message));
    }
    fn unknown(&mut self, map: &Map<String, Value>, allowed: &[&str], code: &str, at: &str) {
        for key in unknown_keys(map, allowed) {
            let path = if at.is_empty() {
                key.to_string()
            } else {
                format!("{at}.{key}")
            };
            self.err(code, &path, format!("Unsupported key {path}."));
        }
    }
    fn obj<'a>(
        &mut self,
        value: Option<&'a Value>,
        code: &str,
        path: &str,
    ) -> Option<&'a Map<String, Value>> {
        let map = value.and_then(Value::as_object);
        if map.is_none() {
            self.err(code, path, format!("{path} must be an object."));
        }
        map
    }
    fn id(&mut self, value: Option<&Value>, path: &str) -> String {
        match value.and_then(Value::as_str) {
            Some(s) if is_opaque_id(s) => s.to_string(),
            _ => {
                self.err(
                    "id.invalid",
                    path,
                    format!("{path} must match ^[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$."),
                );
                String::new()
            }
        }
    }
}

/// Decodes and validates an `AgentRequest`. Errors → `Err(diagnostics)`; warnings never occur.
pub fn decode_request(value: &Value) -> Result<AgentRequest, Vec<D>> {
    let mut c = Ctx { diags: Vec::new() };
    let Some(map) = value.as_object() else {
        return Err(vec![D::error(
            "request.schema-version",
            "",
            "An AgentRequest must be an object.",
        )]);
    };
    c.unknown(map, &REQUEST_KEYS, "request.unknown", "");
    if map.get("schemaVersion").and_then(Value::as_u64) != Some(1) {
        c.err(
            "request.schema-version",
            "schemaVersion",
            "schemaVersion must be 1.",
        );
    }
    let request_id = c.id(map.get("requestId"), "requestId");
    let profile_id = c.id(map.get("profileId"), "profileId");
    let expected_profile_fingerprint = match map.get("expectedProfileFingerprint") {
        None => None,
        Some(Value::String(s)) if is_fingerprint(s) => Some(s.clone()),
        Some(_) => {
            c.err(
                "fingerprint.invalid",
                "expectedProfileFingerprint",
                "expectedProfileFingerprint must match ^sha256:v1:[a-f0-9]{64}$.",
            );
            None
        }
    };
    // input
    let (mut text, mut media) = (String::new(), Vec::new());
    if let Some(input) = c.obj(map.get("input"), "request.input-text", "input") {
        c.unknown(input, &["text", "media"], "request.unknown", "input");
        match input.get("text").and_then(Value::as_str) {
            Some(t) => text = t.to_string(),
            None => c.err(
                "request.input-text",
                "input.text",
                "input.text must be a string.",
            ),
        }
        match input.get("media") {
            None => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let path = format!("input.media[{i}]");
                    let Some(m) = c.obj(Some(item), "request.media", &path) else {
                        continue;
                    };
                    c.unknown(
                        m,
                        &["id", "kind", "mimeType", "digest", "resourceHandle"],
                        "request.media",
                        &path,
                    );
                    let id = c.id(m.get("id"), &format!("{path}.id"));
                    if m.get("kind").and_then(Value::as_str) != Some("image") {
                        c.err(
                            "request.media-kind",
                            &format!("{path}.kind"),
                            "Media kind must be \"image\".",
                        );
                    }
                    let mime = m.get("mimeType").and_then(Value::as_str).unwrap_or("");
                    if !mime.starts_with("image/") || mime.len() == "image/".len() {
                        c.err(
                            "request.media-mime",
                            &format!("{path}.mimeType"),
                            "Media mimeType must be image/….",
                        );
                    }
                    let digest = m.get("digest").and_then(Value::as_str).unwrap_or("");
                    if !is_fingerprint(digest) {
                        c.err(
                            "fingerprint.invalid",
                            &format!("{path}.digest"),
                            "Media digest must be a sha256:v1 fingerprint.",
                        );
                    }
                    c.id(m.get("resourceHandle"), &format!("{path}.resourceHandle"));
                    media.push(TaskMedia {
                        id,
                        mime_type: mime.to_string(),
                        digest: digest.to_string(),
                    });
                }
            }
            Some(_) => c.err(
                "request.media",
                "input.media",
                "input.media must be an array.",
            ),
        }
        if crate::json_trim_is_empty(&text)
            && media.is_empty()
            && input.get("text").is_some_and(Value::is_string)
        {
            c.err(
                "request.empty-task",
                "input.text",
                "The task is empty: give text or media.",
            );
        }
    }
    // selectedContext
    let selected_context = map.get("selectedContext").and_then(|sc| {
        let m = c.obj(Some(sc), "request.selected-context", "selectedContext")?;
        c.unknown(m, &["maxBytes", "items"], "request.selected-context", "selectedContext");
        let max_bytes = m.get("maxBytes").and_then(pos_int);
        if max_bytes.is_none() {
            c.err("request.selected-context", "selectedContext.maxBytes", "selectedContext.maxBytes must be a positive integer.");
        }
        let mut items = Vec::new();
        match m.get("items").and_then(Value::as_array) {
            None => c.err("request.selected-context", "selectedContext.items", "selectedContext.items must be an array."),
            Some(list) => {
                for (i, item) in list.iter().enumerate() {
                    let path = format!("selectedContext.items[{i}]");
                    let Some(it) = c.obj(Some(item), "request.selected-context", &path) else {
                        continue;
                    };
                    c.unknown(it, &["id", "kind", "text", "required", "provenance"], "request.selected-context", &path);
                    let id = c.id(it.get("id"), &format!("{path}.id"));
                    if items.iter().any(|x: &ContextItem| x.id == id) {
                        c.err("request.selected-context", &format!("{path}.id"), format!("Duplicate context item id {id}."));
                    }
                    let kind = it.get("kind").and_then(Value::as_str).and_then(ContextKind::parse);
                    if kind.is_none() {
                        c.err("request.selected-context", &format!("{path}.kind"), "Context kind must be summary, user-excerpt, assistant-excerpt, tool-result-excerpt or resource-excerpt.");
                    }
                    let text = it.get("text").and_then(Value::as_str);
                    if text.is_none() {
                        c.err("request.selected-context", &format!("{path}.text"), "Context text must be a string.");
                    }
                    let required = match it.get("required") {
                        None => Some(false),
                        Some(Value::Bool(b)) => Some(*b),
                        Some(_) => None,
                    };
                    if required.is_none() {
                        c.err("request.selected-context", &format!("{path}.required"), "required must be a boolean.");
                    }
                    let prov = it.get("provenance").and_then(Value::as_object);
                    let source = prov.and_then(|p| p.get("source")).and_then(Value::as_str);
                    let reference = prov.and_then(|p| p.get("reference"));
                    let ok_prov = prov.is_some_and(|p| unknown_keys(p, &["source", "reference"]).is_empty())
                        && source.is_some()
                        && reference.is_none_or(Value::is_string);
                    if !ok_prov {
                        c.err("request.selected-context", &format!("{path}.provenance"), "provenance must be {source, reference?} with strings.");
                    }
                    if let (Some(kind), Some(text), Some(required), true) = (kind, text, required, ok_prov) {
                        items.push(ContextItem {
                            id,
                            kind,
                            text: text.to_string(),
                            required,
                            source: source.unwrap_or_default().to_string(),
                            reference: reference.and_then(Value::as_str).map(str::to_string),
                        });
                    }
                }
            }
        }
        Some(SelectedContext { max_bytes: max_bytes?, items })
    });
    // access
    let access = decode_access(&mut c, map.get("access"));
    // limits
    let mut limits = Vec::new();
    if let Some(lm) = c.obj(map.get("limits"), "limits.requirement", "limits") {
        c.unknown(lm, &LIMIT_NAMES, "limits.unknown", "limits");
        for name in LIMIT_NAMES {
            let Some(l) = lm.get(name) else { continue };
            let path = format!("limits.{name}");
            let value = l.get("value").and_then(pos_int);
            let enforcement = match l.get("enforcement").and_then(Value::as_str) {
                Some("required") => Some(Requirement::Required),
                Some("best-effort") => Some(Requirement::BestEffort),
                _ => None,
            };
            let exact = l
                .as_object()
                .is_some_and(|o| unknown_keys(o, &["value", "enforcement"]).is_empty());
            match (value, enforcement, exact) {
                (Some(value), Some(enforcement), true) => limits.push(Limit { name: name.to_string(), value, enforcement }),
                _ => c.err("limits.requirement", &path, format!("{path} must be {{value: positive integer, enforcement: \"required\"|\"best-effort\"}}.")),
            }
        }
    }
    // resultProjection
    let mut result_max_chars = 0;
    if let Some(rp) = c.obj(
        map.get("resultProjection"),
        "request.result-projection",
        "resultProjection",
    ) {
        c.unknown(
            rp,
            &["maxChars"],
            "request.result-projection",
            "resultProjection",
        );
        match rp.get("maxChars").and_then(pos_int) {
            Some(n) => result_max_chars = n,
            None => c.err(
                "request.result-projection",
                "resultProjection.maxChars",
                "resultProjection.maxChars must be a positive integer.",
            ),
        }
    }
    // parent
    let mut parent = Parent {
        run_id: None,
        session_id: None,
        depth: 0,
        max_depth: 0,
    };
    if let Some(p) = c.obj(map.get("parent"), "request.parent", "parent") {
        c.unknown(
            p,
            &["runId", "sessionId", "depth", "maxDepth"],
            "request.parent",
            "parent",
        );
        if p.contains_key("runId") {
            parent.run_id = Some(c.id(p.get("runId"), "parent.runId"));
        }
        if p.contains_key("sessionId") {
            parent.session_id = Some(c.id(p.get("sessionId"), "parent.sessionId"));
        }
        let depth = p.get("depth").and_then(non_neg_int);
        let max_depth = p.get("maxDepth").and_then(pos_int);
        if depth.is_none() {
            c.err(
                "request.depth",
                "parent.depth",
                "parent.depth must be a non-negative integer.",
            );
        }
        if max_depth.is_none() {
            c.err(
                "request.max-depth",
                "parent.maxDepth",
                "parent.maxDepth must be a positive integer.",
            );
        }
        if let (Some(d), Some(m)) = (depth, max_depth) {
            parent.depth = d;
            parent.max_depth = m;
            if d >= m {
                c.err(
                    "request.depth-limit",
                    "parent.depth",
                    format!("Delegation depth {d} reaches the maximum depth {m}."),
                );
            }
        }
    }
    let remote_egress_consent = match map.get("remoteEgressConsent") {
        Some(Value::Bool(b)) => *b,
        _ => {
            c.err(
                "request.egress-consent",
                "remoteEgressConsent",
                "remoteEgressConsent must be a boolean.",
            );
            false
        }
    };
    if has_errors(&c.diags) {
        return Err(c.diags);
    }
    let access = access.ok_or_else(Vec::new)?;
    Ok(AgentRequest {
        request_id,
        profile_id,
        expected_profile_fingerprint,
        text,
        media,
        selected_context,
        access,
        limits,
        result_max_chars,
        parent,
        remote_egress_consent,
        value: value.clone(),
    })
}

fn decode_access(c: &mut Ctx, value: Option<&Value>) -> Option<Access> {
    let a = c.obj(value, "access.level", "access")?;
    c.unknown(
        a,
        &[
            "level",
            "executionBoundary",
            "workspaces",
            "workingDirectory",
            "network",
            "allowProcess",
        ],
        "access.unknown",
        "access",
    );
    let level = a
        .get("level")
        .and_then(Value::as_str)
        .and_then(AccessLevel::parse);
    if level.is_none() {
        c.err(
            "access.level",
            "access.level",
            "access.level must be none, read-only or workspace-write.",
        );
    }
    let boundary = a
        .get("executionBoundary")
        .and_then(Value::as_str)
        .and_then(Boundary::parse);
    if boundary.is_none() {
        c.err(
            "access.execution-boundary",
            "access.executionBoundary",
            "access.executionBoundary must be isolated or shared-user.",
        );
    }
    let mut workspaces: Vec<Workspace> = Vec::new();
    match a.get("workspaces").and_then(Value::as_array) {
        None => c.err(
            "access.workspaces",
            "access.workspaces",
            "access.workspaces must be an array.",
        ),
        Some(list) => {
            for (i, w) in list.iter().enumerate() {
                let path = format!("access.workspaces[{i}]");
                let Some(w) = c.obj(Some(w), "access.workspaces", &path) else {
                    continue;
                };
                c.unknown(w, &["handle", "mode"], "access.workspaces", &path);
                let handle = c.id(w.get("handle"), &format!("{path}.handle"));
                let read_write = match w.get("mode").and_then(Value::as_str) {
                    Some("read-only") => false,
                    Some("read-write") => true,
                    _ => {
                        c.err(
                            "access.workspace-mode",
                            &format!("{path}.mode"),
                            "Workspace mode must be read-only or read-write.",
                        );
                        false
                    }
                };
                if workspaces.iter().any(|x| x.handle == handle) {
                    c.err(
                        "access.duplicate-workspace",
                        &format!("{path}.handle"),
                        format!("Duplicate workspace handle {handle}."),
                    );
                }
                workspaces.push(Workspace { handle, read_write });
            }
        }
    }
    let network = a
        .get("network")
        .and_then(Value::as_str)
        .and_then(Network::parse);
    if network.is_none() {
        c.err(
            "access.network",
            "access.network",
            "access.network must be deny or allow.",
        );
    }
    let allow_process = match a.get("allowProcess") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            c.err(
                "access.process",
                "access.allowProcess",
                "access.allowProcess must be a boolean.",
            );
            None
        }
    };
    let working_directory = a.get("workingDirectory").and_then(|wd| {
        let m = c.obj(Some(wd), "access.cwd-workspace", "access.workingDirectory")?;
        c.unknown(
            m,
            &["workspaceHandle", "path"],
            "access.unknown",
            "access.workingDirectory",
        );
        let handle = m
            .get("workspaceHandle")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !workspaces.iter().any(|w| w.handle == handle) {
            c.err(
                "access.cwd-workspace",
                "access.workingDirectory.workspaceHandle",
                "The working directory must name one of the request's workspaces.",
            );
        }
        let path = m.get("path").and_then(Value::as_str).unwrap_or("");
        if !is_safe_relative_path(path, true) {
            c.err(
                "access.cwd-path",
                "access.workingDirectory.path",
                "The working directory path must be a safe relative path.",
            );
        }
        Some(WorkingDirectory {
            workspace_handle: handle.to_string(),
            path: path.to_string(),
        })
    });
    let level = level?;
    match level {
        AccessLevel::None => {
            if !workspaces.is_empty() {
                c.err(
                    "access.none-workspaces",
                    "access.workspaces",
                    "Access level none takes no workspaces.",
                );
            }
            if working_directory.is_some() {
                c.err(
                    "access.none-cwd",
                    "access.workingDirectory",
                    "Access level none takes no working directory.",
                );
            }
        }
        AccessLevel::ReadOnly => {
            if workspaces.iter().any(|w| w.read_write) {
                c.err(
                    "access.read-only-write",
                    "access.workspaces",
                    "Read-only access cannot mount a read-write workspace.",
                );
            }
        }
        AccessLevel::WorkspaceWrite => {
            if !workspaces.iter().any(|w| w.read_write) {
                c.err(
                    "access.write-missing",
                    "access.workspaces",
                    "workspace-write access needs a read-write workspace.",
                );
            }
        }
    }
    if allow_process == Some(true) && level != AccessLevel::WorkspaceWrite {
        c.err(
            "access.process-level",
            "access.allowProcess",
            "allowProcess needs access level workspace-write.",
        );
    }
    Some(Access {
        level,
        execution_boundary: boundary?,
        workspaces,
        working_directory,
        network: network?,
        allow_process,
    })
}

/// The request the shipped foreground path sends (`[REF]` in the spec): text-only input,
/// read-only access to the `project` workspace at `.`, network allowed, shared-user boundary, a
/// best-effort timeout,
/// `resultProjection.maxChars = 12000`, `parent {sessionId, depth:0, maxDepth:1}` and egress
/// consent. `profile_key` is canonical (`project:<id>` for bare input); ids are inputs.
pub fn foreground_request(
    request_id: &str,
    profile_key: &str,
    profile_fingerprint: &str,
    task: &str,
    timeout_ms: u64,
    session_id: Option<&str>,
) -> Value {
    let mut parent = serde_json::json!({"depth": 0, "maxDepth": 1});
    if let (Some(id), Some(map)) = (session_id, parent.as_object_mut()) {
        map.insert("sessionId".into(), id.into());
    }
    serde_json::json!({
        "schemaVersion": 1,
        "requestId": request_id,
        "profileId": profile_key,
        "expectedProfileFingerprint": profile_fingerprint,
        "input": {"text": task},
        "access": {
            "level": "read-only",
            "workspaces": [{"handle": "project", "mode": "read-only"}],
            "workingDirectory": {"workspaceHandle": "project", "path": "."},
            "network": "allow",
            "executionBoundary": "shared-user"
        },
        "limits": {"timeoutMs": {"value": timeout_ms, "enforcement": "best-effort"}},
        "resultProjection": {"maxChars": 12000},
        "parent": parent,
        "remoteEgressConsent": true
    })
}
