//! The web ↔ server contract (`forge_core::api`): every answer the editor reads, from a real
//! `pi-forge ui` on a seeded workspace (with and without a live host), is read into its shared
//! struct and written back, and the two must be the same bytes. A member the server adds,
//! renames, drops or turns from absent into `null` without the struct fails here.

mod support;

use std::time::Duration;

use forge_core::api::{
    Activated, ActiveRun, AgentProfileList, AgentProfileRow, AgentSettings, Applied,
    ApproveRequest, ArmRequest, CapabilityList, CapabilityView, CaptureList, Deleted,
    EffectiveBindings, ErrorBody, ImportPreview, Imported, LiveView, Meta, PlanDecided, PlanDetail,
    PlanList, PrepareRequest, PreparedPlan, ProfileCollection, ProfilePreview, ProfileStatus,
    ProfileValidation, ProfileView, Reloaded, Resources, RunCancelled, RunDetail, RunDiff, RunList,
    RunRecord, Saved, SavedCapture, StackDeleted, StackList, StackPreview, StackView, Validation,
};
use forge_core::json::to_compact;
use forge_core::runtime::RuntimeSnapshot;
use reqwest::blocking::{Client, Response};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use support::{Dirs, Server};

const ALPHA: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "alpha",
  "name": "Alpha",
  "futureField": { "kept": true },
  "tools": { "allow": ["read", "grep"] },
  "items": [
    { "kind": "block", "id": "intro", "role": "system", "content": "You are careful." },
    { "kind": "slot", "id": "history", "slot": "chat-history" }
  ]
}
"#;

const PROFILE: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "scout",
  "name": "Scout",
  "model": { "provider": "test", "id": "target" },
  "thinkingLevel": "medium",
  "promptStack": "alpha"
}
"#;

const CAPABILITY: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "no-writes",
  "name": "No writes",
  "content": "Do not modify files.",
  "tools": { "add": [], "remove": ["write"] }
}
"#;

struct Fixture {
    _dirs: Dirs,
    server: Server,
    client: Client,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_env(&[])
    }

    /// The seeded workspace, the server started with `env`.
    fn with_env(env: &[(&str, &str)]) -> Fixture {
        let dirs = Dirs::new();
        dirs.write(".pi/forge/prompt-stacks/alpha.json", ALPHA);
        dirs.write(".pi/forge/agent-profiles/scout.json", PROFILE);
        dirs.write(".pi/forge/capabilities/no-writes.json", CAPABILITY);
        // A global stack the project's `alpha` shadows.
        dirs.write_global("prompt-stacks/alpha.json", ALPHA);
        let server = Server::start(&dirs, &[], env);
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Fixture {
            _dirs: dirs,
            server,
            client,
        }
    }

    fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Response {
        let mut request = self
            .client
            .request(method, self.server.url(path))
            .header("x-pi-forge-token", &self.server.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        request.send().unwrap()
    }

    /// The answer's body as text, after checking its status.
    fn text(&self, method: Method, path: &str, body: Option<&Value>, status: StatusCode) -> String {
        let response = self.send(method.clone(), path, body);
        assert_eq!(response.status(), status, "{method} {path}");
        response.text().unwrap()
    }

    /// `GET path` read into `T`, exactly.
    fn get<T: Serialize + DeserializeOwned>(&self, path: &str) -> T {
        exact(&self.text(Method::GET, path, None, StatusCode::OK))
    }

    fn post<T: Serialize + DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
        status: StatusCode,
    ) -> T {
        exact(&self.text(Method::POST, path, Some(body), status))
    }
}

/// `text` read into `T` and written back: the same JSON, member for member and in order.
fn exact<T: Serialize + DeserializeOwned>(text: &str) -> T {
    let value: Value = serde_json::from_str(text).unwrap();
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{} does not read {text}: {e}", std::any::type_name::<T>()));
    let again = to_compact(&serde_json::to_value(&typed).unwrap());
    assert_eq!(
        again,
        to_compact(&value),
        "{} does not hold every member",
        std::any::type_name::<T>()
    );
    typed
}

#[test]
fn every_answer_the_editor_reads_is_its_contract_struct_exactly() {
    let f = Fixture::new();

    let list: StackList = f.get("/api/stacks");
    let rows: Vec<(&str, bool)> = list
        .stacks
        .iter()
        .map(|r| (r.common.selector.as_str(), r.shadowed))
        .collect();
    assert_eq!(rows, [("global:alpha", true), ("project:alpha", false)]);
    assert_eq!(list.stacks[1].name.as_deref(), Some("Alpha"));
    assert_eq!(list.stacks[1].item_count, 2);
    assert_eq!(list.active_id, None);
    assert!(list.trusted);

    let view: StackView = f.get("/api/stacks/project:alpha");
    assert_eq!(view.stack["futureField"], json!({ "kept": true }));
    assert_eq!(view.common.revision.len(), "sha256:".len() + 64);
    assert_eq!(
        view.common.source_revision,
        view.common.revision["sha256:".len()..]
    );

    let validation: Validation = f.post(
        "/api/stacks/project:alpha/validate",
        &json!({ "stack": { "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "alpha", "items": "x" } }),
        StatusCode::OK,
    );
    assert!(!validation.valid);
    let errors = validation
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .count();
    assert_eq!((validation.errors, errors), (1, 1));

    let saved_preview: StackPreview = f.post(
        "/api/stacks/project:alpha/preview",
        &json!({}),
        StatusCode::OK,
    );
    assert_eq!(saved_preview.stack_id, "project:alpha");
    assert_eq!(saved_preview.preview.system.content, "You are careful.");
    let draft: Value = serde_json::from_str(&ALPHA.replace("careful", "brief")).unwrap();
    let draft_preview: StackPreview = f.post(
        "/api/stacks/project:alpha/preview",
        &json!({ "stack": draft }),
        StatusCode::OK,
    );
    assert_eq!(draft_preview.preview.system.content, "You are brief.");

    // Writes: create, save, a stale save, fork, import, delete.
    let mut beta: Value = serde_json::from_str(ALPHA).unwrap();
    beta["id"] = json!("beta");
    let created: Saved<StackView> = f.post(
        "/api/stacks",
        &json!({ "stack": beta }),
        StatusCode::CREATED,
    );
    assert!(created.ok);
    assert_eq!(created.view.common.selector, "project:beta");
    let revision = created.view.common.revision.clone();
    beta["name"] = json!("Beta");
    let saved: Saved<StackView> = exact(&f.text(
        Method::PUT,
        "/api/stacks/project:beta",
        Some(&json!({ "stack": beta, "sourceRevision": revision })),
        StatusCode::OK,
    ));
    assert_eq!(saved.view.stack["name"], "Beta");
    let stale: ErrorBody = exact(&f.text(
        Method::PUT,
        "/api/stacks/project:beta",
        Some(&json!({ "stack": beta, "sourceRevision": revision })),
        StatusCode::CONFLICT,
    ));
    assert_eq!(stale.code, "stale_revision");
    assert_eq!(
        stale.current_revision.as_deref(),
        Some(saved.view.common.revision.as_str())
    );
    assert_eq!(
        stale.current.as_ref().map(|c| &c["name"]),
        Some(&json!("Beta"))
    );
    let _: Saved<StackView> = f.post(
        "/api/stacks/project:beta/fork",
        &json!({ "id": "gamma" }),
        StatusCode::CREATED,
    );
    let dry: ImportPreview = f.post(
        "/api/stacks/import",
        &json!({ "content": beta, "id": "delta", "dryRun": true }),
        StatusCode::OK,
    );
    assert_eq!(
        (dry.format.as_str(), dry.id.as_str(), dry.exists),
        ("native", "delta", false)
    );
    let imported: Saved<Imported> = f.post(
        "/api/stacks/import",
        &json!({ "content": beta, "id": "delta" }),
        StatusCode::CREATED,
    );
    assert_eq!(imported.view.view.common.selector, "project:delta");
    assert_eq!(imported.view.report, Value::Null);
    let refused: ErrorBody = exact(&f.text(
        Method::DELETE,
        "/api/stacks/project:beta",
        Some(&json!({ "sourceRevision": revision })),
        StatusCode::CONFLICT,
    ));
    assert_eq!(refused.code, "stale_revision");
    let deleted: StackDeleted = exact(&f.text(
        Method::DELETE,
        "/api/stacks/project:beta",
        Some(&json!({ "sourceRevision": saved.view.common.revision })),
        StatusCode::OK,
    ));
    assert_eq!(deleted.deleted.as_deref(), Some("project:beta"));

    // Errors: a bad selector (with nothing else), an activation without a live session.
    let unknown: ErrorBody =
        exact(&f.text(Method::GET, "/api/stacks/nope", None, StatusCode::NOT_FOUND));
    assert_eq!(
        unknown,
        ErrorBody {
            error: "Unknown prompt stack: nope".into(),
            code: "not_found".into(),
            ..ErrorBody::default()
        }
    );
    let no_live: ErrorBody = f.post(
        "/api/stacks/project:alpha/activate",
        &json!({}),
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert_eq!(no_live.code, "no_live_session");

    // Profiles.
    let profiles: ProfileCollection = f.get("/api/profiles");
    assert_eq!(profiles.profiles.len(), 1);
    let scout = &profiles.profiles[0];
    assert_eq!(
        scout.preview.target.prompt_stack.as_deref(),
        Some("project:alpha")
    );
    assert_eq!(scout.preview.target.model.label(), "test/target");
    assert!(scout.preview.applicable);
    assert_eq!(scout.last_applied, None);
    let stacks: Vec<&str> = profiles
        .prompt_stacks
        .iter()
        .map(|s| s.selector.as_str())
        .collect();
    assert_eq!(
        stacks,
        [
            "global:alpha",
            "project:alpha",
            "project:delta",
            "project:gamma"
        ]
    );
    let one: ProfileView = f.get("/api/profiles/scout");
    assert_eq!(&one, scout);
    let status: ProfileStatus = f.get("/api/profiles/status");
    assert!(!status.live_host);
    let checked: ProfileValidation = f.post(
        "/api/profiles/validate",
        &json!({ "profile": serde_json::from_str::<Value>(PROFILE).unwrap(), "existingId": "project:scout" }),
        StatusCode::OK,
    );
    assert!(checked.valid);
    let preview: Saved<ProfilePreview> =
        f.post("/api/profiles/scout/preview", &json!({}), StatusCode::OK);
    assert_eq!(preview.view, scout.preview);
    let mut copy: Value = serde_json::from_str(PROFILE).unwrap();
    copy["id"] = json!("copy");
    let made: Saved<ProfileView> = f.post(
        "/api/profiles",
        &json!({ "profile": copy }),
        StatusCode::CREATED,
    );
    let gone: Deleted = exact(&f.text(
        Method::DELETE,
        "/api/profiles/project:copy",
        Some(&json!({ "sourceRevision": made.view.common.revision })),
        StatusCode::OK,
    ));
    assert_eq!(gone.deleted.as_deref(), Some("project:copy"));

    // Capabilities.
    let capabilities: CapabilityList = f.get("/api/capabilities");
    assert_eq!(capabilities.capabilities.len(), 1);
    let capability: CapabilityView = f.get("/api/capabilities/project:no-writes");
    assert_eq!(capability, capabilities.capabilities[0]);
    assert!(capability.usable);
    let effective: EffectiveBindings = f.post(
        "/api/capabilities/effective",
        &json!({ "presetSelector": "project:alpha", "bindings": [{ "ref": "no-writes" }] }),
        StatusCode::OK,
    );
    assert_eq!(effective.bindings[0].reference, "project:no-writes");
    assert_eq!(effective.bindings[0].source.binding.preset.id, "alpha");

    // Meta, runtime, resources, reload.
    let meta: Meta = f.get("/api/meta");
    assert_eq!(meta.live, LiveView::default());
    let _: RuntimeSnapshot = f.get("/api/runtime");
    let resources: Resources = f.get("/api/resources");
    assert!(resources.tools.iter().any(|t| t.name == "read" && t.active));
    let reloaded: Reloaded = f.post("/api/reload", &json!({}), StatusCode::OK);
    assert_eq!(reloaded.generation, meta.generation);
}

#[test]
fn the_live_session_answers_are_their_contract_structs_exactly() {
    let f = Fixture::new();
    let hello = json!({
        "protocol": 1, "extensionVersion": "0.0.1", "piVersion": "1.6.0", "mode": "rpc",
        "hasUI": true, "cwd": "/w", "sessionId": "s1", "projectTrusted": true,
        "facts": {
            "tools": [{"name": "read"}], "activeTools": ["read"],
            "model": {"provider": "test", "id": "target"}, "thinkingLevel": "high",
            "models": [{"provider": "test", "id": "target", "name": "Target"}, {"provider": "test", "id": "other"}]
        },
        "entries": []
    });
    let welcome: Value = f
        .send(Method::POST, "/api/host/hello", Some(&hello))
        .json()
        .unwrap();
    let id = welcome["hostId"].as_str().unwrap().to_string();
    // The command stream makes the host live while the response lives.
    let stream = f.send(Method::GET, &format!("/api/host/{id}/commands"), None);
    assert_eq!(stream.status(), StatusCode::OK);

    let live: LiveView = f.get("/api/live");
    let session = live.session().unwrap();
    assert_eq!(
        (session.session_id.as_str(), session.session_file.as_deref()),
        ("s1", None)
    );
    assert!(session.version_mismatch);
    assert_eq!(
        session.model.as_ref().map(|m| m.label()).as_deref(),
        Some("test/target")
    );
    let meta: Meta = f.get("/api/meta");
    assert!(meta.live_host);
    assert_eq!(meta.live, live);
    let profiles: ProfileCollection = f.get("/api/profiles");
    let models: Vec<(&str, Option<&str>)> = profiles
        .models
        .iter()
        .map(|m| (m.id.as_str(), m.name.as_deref()))
        .collect();
    assert_eq!(models, [("target", Some("Target")), ("other", None)]);
    assert_eq!(
        profiles.status.current.thinking_level.as_deref(),
        Some("high")
    );
    assert!(profiles.profiles[0].preview.live_host);
    let status: ProfileStatus = f.get("/api/profiles/status");
    assert_eq!(status.current, profiles.status.current);
    drop(stream);
}

/// The receipts a live Pi must answer (activate, apply) are not reachable without one: their
/// structs still read what the server writes.
#[test]
fn receipts_that_need_pi_read_what_the_server_writes() {
    let _: Activated = exact(r#"{"ok":true,"activeId":"project:alpha"}"#);
    let _: Activated = exact(r#"{"ok":true,"activeId":null}"#);
    let applied: Applied = exact(
        r#"{"ok":true,"profileId":"project:scout","applied":{"model":{"provider":"test","id":"target"},"thinkingLevel":"medium","promptStack":"project:alpha","activeTools":["read"]},"changed":[{"field":"thinkingLevel","from":"high","to":"medium"}],"notes":[]}"#,
    );
    assert_eq!(applied.applied.tools(), ["read"]);
}

/// The hello of a live host for session `s1`: its id (it counts as connected once its command
/// stream is open).
fn say_hello(f: &Fixture) -> String {
    let hello = json!({
        "protocol": 1, "extensionVersion": "0.0.1", "piVersion": "1.6.0", "mode": "rpc",
        "hasUI": true, "cwd": "/w", "sessionId": "s1", "projectTrusted": true,
        "facts": {"tools": [{"name": "read"}], "activeTools": ["read"]},
        "entries": []
    });
    let welcome: Value = f
        .send(Method::POST, "/api/host/hello", Some(&hello))
        .json()
        .unwrap();
    welcome["hostId"].as_str().unwrap().to_string()
}

/// Polls `f` every 50 ms until it answers, for up to 20 s.
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn body<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

/// Every `/api/agent/*` answer but the runs': the settings (read, then the project's file
/// created to enable `scout`), the profiles delegation may use, a prepared plan, a plan waiting
/// (`forge_subagent` in the background), its detail, a stale and a good approval, a rejection
/// and the refusals.
#[test]
fn the_agent_answers_are_their_contract_structs_exactly() {
    let f = Fixture::new();

    let settings: AgentSettings = f.get("/api/agent/settings");
    assert!(!settings.files.project.exists);
    assert!(settings.profiles.iter().all(|p| !p.enabled));
    let none: AgentProfileList = f.get("/api/agent/profiles");
    assert_eq!(none.profiles, []);
    let saved: AgentSettings = exact(&f.text(
        Method::PUT,
        "/api/agent/settings/project",
        Some(&json!({ "settings": { "profiles": { "scout": { "enabled": true } } } })),
        StatusCode::OK,
    ));
    assert!(saved.files.project.exists);
    assert!(saved
        .profiles
        .iter()
        .any(|p| p.profile_id == "scout" && p.enabled));

    let profiles: AgentProfileList = f.get("/api/agent/profiles");
    assert_eq!(
        profiles.profiles,
        [AgentProfileRow {
            profile_id: "project:scout".into(),
            model: "test/target".into(),
            thinking_level: "medium".into(),
            prompt_stack: Some("alpha".into()),
            ready: true,
            approval: "required".into(),
            problem: None,
        }]
    );

    let request = PrepareRequest {
        profile: "scout".into(),
        task: "Look around".into(),
    };
    let prepared: PreparedPlan = f.post("/api/agent/prepare", &body(&request), StatusCode::OK);
    assert!(prepared.plan.run_id.starts_with("run:"));
    assert_eq!(prepared.plan.schema_version, 1);
    assert!(
        prepared.review.contains("Look around"),
        "{}",
        prepared.review
    );
    let failed: ErrorBody = f.post(
        "/api/agent/prepare",
        &body(&PrepareRequest {
            profile: "nope".into(),
            task: "x".into(),
        }),
        StatusCode::BAD_REQUEST,
    );
    assert_eq!(failed.code, "plan_failed");
    let malformed: ErrorBody = f.post(
        "/api/agent/prepare",
        &json!({ "profile": "scout", "task": "x", "extra": 1 }),
        StatusCode::BAD_REQUEST,
    );
    assert!(
        malformed.error.starts_with("Malformed plan request"),
        "{malformed:?}"
    );

    let empty: PlanList = f.get("/api/agent/plans");
    assert_eq!(empty.plans, []);
    let host = say_hello(&f);
    let delegate = |task: &str| {
        let answer: Value = f
            .send(
                Method::POST,
                &format!("/api/host/{host}/subagent"),
                Some(&json!({"sessionId": "s1", "profile": "scout", "task": task, "background": true})),
            )
            .json()
            .unwrap();
        assert_eq!(answer["ok"], true, "{answer}");
        answer["runId"].as_str().unwrap().to_string()
    };
    let run = delegate("Review a.rs");
    let plans: PlanList = f.get("/api/agent/plans");
    assert_eq!(plans.plans.len(), 1);
    let summary = &plans.plans[0];
    assert_eq!(
        (summary.run_id.as_str(), summary.task.as_str()),
        (run.as_str(), "Review a.rs")
    );
    assert_eq!(summary.parent_session_id.as_deref(), Some("s1"));
    assert_eq!(summary.prompt_stack_id.as_deref(), Some("project:alpha"));
    let path = format!("/api/agent/plans/{}", run.replace(':', "%3A"));
    let detail: PlanDetail = f.get(&path);
    assert_eq!(&detail.summary, summary);
    assert_eq!(
        detail.plan.execution_fingerprint,
        summary.execution_fingerprint
    );
    assert!(detail
        .plan
        .prompt()
        .system_prompt
        .contains("You are careful."));
    assert_eq!(detail.plan.messages.len() as u64, summary.messages);

    let stale: ErrorBody = f.post(
        &format!("{path}/approve"),
        &body(&ApproveRequest {
            execution_fingerprint: "sha256:v1:0".into(),
            ..ApproveRequest::default()
        }),
        StatusCode::CONFLICT,
    );
    assert_eq!(stale.code, "stale_approval");
    let rejected: PlanDecided = f.post(&format!("{path}/reject"), &json!({}), StatusCode::OK);
    assert_eq!(rejected.run_id, run);
    let gone: ErrorBody = exact(&f.text(Method::GET, &path, None, StatusCode::NOT_FOUND));
    assert_eq!(gone.code, "not_found");
    let unknown: ErrorBody = exact(&f.text(
        Method::GET,
        "/api/agent/runs/run%3Anope",
        None,
        StatusCode::NOT_FOUND,
    ));
    assert_eq!(unknown.code, "not_found");
    let nothing: ErrorBody = f.post(
        "/api/agent/runs/run%3Anope/cancel",
        &json!({}),
        StatusCode::NOT_FOUND,
    );
    assert_eq!(nothing.code, "not_found");
    // The rejected plan never ran: no run is listed.
    let runs: RunList = f.get("/api/agent/runs");
    assert_eq!(runs.runs, []);
}

/// The runs' answers: an approved plan whose child (a stand-in for Pi that only waits) runs,
/// listed and read while it runs, cancelled, then listed and read as its kept record. Every run
/// in a list and every record is also exactly its `ActiveRun` or `RunRecord`.
#[cfg(unix)]
#[test]
fn the_run_answers_are_their_contract_structs_exactly() {
    use std::os::unix::fs::PermissionsExt as _;

    let bin = tempfile::tempdir().unwrap();
    let pi = bin.path().join("pi");
    std::fs::write(&pi, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&pi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = Fixture::with_env(&[("PI_FORGE_PI", pi.to_str().unwrap())]);
    f.text(
        Method::PUT,
        "/api/agent/settings/project",
        Some(&json!({ "settings": { "profiles": { "scout": { "enabled": true } } } })),
        StatusCode::OK,
    );
    let host = say_hello(&f);
    let answer: Value = f
        .send(
            Method::POST,
            &format!("/api/host/{host}/subagent"),
            Some(&json!({"sessionId": "s1", "profile": "scout", "task": "Review a.rs", "background": true})),
        )
        .json()
        .unwrap();
    let run = answer["runId"].as_str().unwrap().to_string();
    let seg = run.replace(':', "%3A");
    let detail: PlanDetail = f.get(&format!("/api/agent/plans/{seg}"));
    let approved: PlanDecided = f.post(
        &format!("/api/agent/plans/{seg}/approve"),
        &body(&ApproveRequest {
            execution_fingerprint: detail.plan.execution_fingerprint.clone(),
            viewed_full_prompt: true,
            from: None,
        }),
        StatusCode::OK,
    );
    assert_eq!(approved.run_id, run);

    // Running: the list and the detail show the run's summary.
    let running: RunList = until("the run is running", || {
        let list: RunList = f.get("/api/agent/runs");
        list.runs
            .iter()
            .any(|r| r.view.status == "running")
            .then_some(list)
    });
    assert_eq!(running.runs.len(), 1);
    let active: ActiveRun = exact(&to_compact(&running.runs[0].raw));
    assert_eq!(
        (active.run_id.as_str(), active.profile_id.as_str()),
        (run.as_str(), "project:scout")
    );
    assert_eq!(active.model, "test/target");
    assert_eq!(
        (
            active.approval.source.as_str(),
            active.approval.from.as_str()
        ),
        ("human", "web")
    );
    assert!(active.approval.viewed_full_prompt);
    let path = format!("/api/agent/runs/{seg}");
    let shown: RunDetail = f.get(&path);
    assert_eq!(shown.record, running.runs[0]);
    assert_eq!(shown.answer, None);

    let cancelled: RunCancelled = f.post(&format!("{path}/cancel"), &json!({}), StatusCode::OK);
    assert_eq!(
        cancelled,
        RunCancelled {
            ok: true,
            run_id: run.clone(),
            status: "running".into(),
        }
    );

    // Cancelled: the kept record.
    let kept: RunDetail = until("the run is recorded", || {
        let detail: RunDetail = f.get(&path);
        (detail.record.view.schema_version == 1).then_some(detail)
    });
    let record: RunRecord = exact(&to_compact(&kept.record.raw));
    assert_eq!(record.status, "cancelled");
    assert_eq!(record.run_id, run);
    assert_eq!(record.approval, active.approval);
    assert_eq!(
        record.execution_fingerprint,
        detail.plan.execution_fingerprint
    );
    assert!(record.launch_nonce.is_some());
    assert_eq!(kept.answer, None);
    assert_eq!(kept.prompt, Some(detail.plan.prompt()));
    assert_eq!(kept.transcript, []);
    let list: RunList = f.get("/api/agent/runs");
    assert_eq!(list.runs, std::slice::from_ref(&kept.record));
    let ended: ErrorBody = f.post(&format!("{path}/cancel"), &json!({}), StatusCode::CONFLICT);
    assert_eq!(ended.code, "run_ended");
}

/// Every `/api/payloads*` answer: the list empty, armed (to save), with two captures (one
/// pinned and saved, one with usage), a capture as stored, both run diffs, a save, the
/// refusals and the list cleared.
#[test]
fn the_payload_answers_are_their_contract_structs_exactly() {
    let f = Fixture::new();
    let host = say_hello(&f);
    let stream = f.send(Method::GET, &format!("/api/host/{host}/commands"), None);
    assert_eq!(stream.status(), StatusCode::OK);
    let empty: CaptureList = f.get("/api/payloads");
    assert_eq!(empty.list.turns, []);
    assert!(empty.connected && empty.trusted);

    let armed: CaptureList = f.post(
        "/api/payloads/arm",
        &body(&ArmRequest {
            save: true,
            by: None,
        }),
        StatusCode::OK,
    );
    let arm = armed.list.armed.as_ref().unwrap();
    assert_eq!((arm.by.as_str(), arm.save), ("web", true));
    let robot: ErrorBody = f.post(
        "/api/payloads/arm",
        &json!({ "by": "robot" }),
        StatusCode::BAD_REQUEST,
    );
    assert_eq!(robot.field.as_deref(), Some("by"));

    let first = json!({"model": "m", "apiKey": "sk-secret", "messages": [
        {"role": "system", "content": "You are careful."}, {"role": "user", "content": "hi"}]});
    let second = json!({"model": "m", "apiKey": "sk-secret", "messages": [
        {"role": "system", "content": "You are careful."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]});
    for (seq, payload) in [(1, &first), (2, &second)] {
        let answer: Value = f
            .send(
                Method::POST,
                &format!("/api/host/{host}/payload"),
                Some(
                    &json!({"sessionId": "s1", "seq": seq, "provider": "test", "model": "m",
                    "api": "openai-completions", "dropped": 0, "payload": payload}),
                ),
            )
            .json()
            .unwrap();
        assert_eq!(answer["turnId"], format!("turn-{seq}"), "{answer}");
    }
    let usage = json!({"sessionId": "s1", "seq": 2, "input": 7, "output": 1, "cacheRead": 0, "cacheWrite": 0});
    let response = f.send(
        Method::POST,
        &format!("/api/host/{host}/usage"),
        Some(&usage),
    );
    assert_eq!(response.status(), StatusCode::NO_CONTENT);

    let list: CaptureList = f.get("/api/payloads");
    let turns: Vec<&str> = list.list.turns.iter().map(|t| t.turn_id.as_str()).collect();
    assert_eq!(turns, ["turn-1", "turn-2"]);
    assert_eq!(
        list.list.latest.as_ref().map(|t| t.turn_id.as_str()),
        Some("turn-1")
    );
    assert_eq!(list.list.armed, None);
    assert_eq!(list.list.session_id.as_deref(), Some("s1"));
    assert!(list.list.turns[1].usage.is_some());
    assert!(list.list.turns[0].usage.is_none());
    assert!(list.connected);

    let response = f.send(Method::GET, "/api/payloads/turn-2", None);
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-pi-forge-turn"], "turn-2");
    let mut redacted = second.clone();
    redacted["apiKey"] = json!("[redacted]");
    assert_eq!(response.json::<Value>().unwrap(), redacted);

    let newest: RunDiff = f.get("/api/payloads/diff");
    assert_eq!(
        newest.from.as_ref().map(|t| t.turn_id.as_str()),
        Some("turn-1")
    );
    assert_eq!(newest.to.turn_id, "turn-2");
    let chosen: RunDiff = f.get("/api/payloads/diff?from=turn-1&to=turn-2");
    assert_eq!(chosen, newest);
    let first_diff: RunDiff = f.get("/api/payloads/diff?to=turn-1");
    assert_eq!(first_diff.from, None);

    let saved: SavedCapture = f.post("/api/payloads/turn-2/save", &json!({}), StatusCode::CREATED);
    assert_eq!(saved.turn_id, "turn-2");
    assert!(saved.path.ends_with(&saved.name), "{saved:?}");
    let missing: ErrorBody = exact(&f.text(
        Method::GET,
        "/api/payloads/turn-9",
        None,
        StatusCode::NOT_FOUND,
    ));
    assert_eq!(missing.code, "unknown_turn");

    let cleared: CaptureList =
        exact(&f.text(Method::DELETE, "/api/payloads", None, StatusCode::OK));
    assert_eq!(cleared.list.turns, []);
    assert_eq!(cleared.list.latest, None);
    let no_captures: ErrorBody = exact(&f.text(
        Method::GET,
        "/api/payloads/diff",
        None,
        StatusCode::NOT_FOUND,
    ));
    assert_eq!(no_captures.code, "no_captures");
    drop(stream);
}
