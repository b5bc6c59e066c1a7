//! The web ↔ server contract (`forge_core::api`): every answer the editor reads, from a real
//! `pi-forge ui` on a seeded workspace (with and without a live host), is read into its shared
//! struct and written back, and the two must be the same bytes. A member the server adds,
//! renames, drops or turns from absent into `null` without the struct fails here.

mod support;

use std::time::Duration;

use forge_core::api::{
    Activated, Applied, CapabilityList, CapabilityView, Deleted, EffectiveBindings, ErrorBody,
    ImportPreview, Imported, LiveView, Meta, ProfileCollection, ProfilePreview, ProfileStatus,
    ProfileValidation, ProfileView, Reloaded, Resources, Saved, StackDeleted, StackList,
    StackPreview, StackView, Validation,
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
        let dirs = Dirs::new();
        dirs.write(".pi/forge/prompt-stacks/alpha.json", ALPHA);
        dirs.write(".pi/forge/agent-profiles/scout.json", PROFILE);
        dirs.write(".pi/forge/capabilities/no-writes.json", CAPABILITY);
        // A global stack the project's `alpha` shadows.
        dirs.write_global("prompt-stacks/alpha.json", ALPHA);
        let server = Server::start(&dirs, &[], &[]);
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
