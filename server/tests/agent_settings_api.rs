//! `GET /api/agent/settings` and `PUT /api/agent/settings/:scope`: the delegation settings files
//! (`subagents.json`) read and written with revisions, each profile's effective settings, and
//! `GET /api/agent/profiles` following a save at once.

mod support;

use std::time::Duration;

use forge_core::canonical::revision;
use forge_core::json::to_pretty;
use reqwest::blocking::Client;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{Dirs, Server};

const STACK: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "alpha",
  "name": "Alpha",
  "items": [
    { "kind": "block", "id": "intro", "role": "system", "content": "You are careful." }
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

struct Fixture {
    dirs: Dirs,
    server: Server,
    client: Client,
}

impl Fixture {
    fn new(env: &[(&str, &str)]) -> Fixture {
        let dirs = Dirs::new();
        dirs.write(".pi/forge/prompt-stacks/alpha.json", STACK);
        dirs.write(".pi/forge/agent-profiles/scout.json", PROFILE);
        let server = Server::start(&dirs, &[], env);
        Fixture {
            dirs,
            server,
            client: Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    fn get(&self, path: &str) -> Value {
        let response = self
            .client
            .get(self.server.url(path))
            .header("x-pi-forge-token", &self.server.token)
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        response.json().unwrap()
    }

    fn put(&self, path: &str, body: &Value) -> (StatusCode, HeaderMap, Value) {
        let response = self
            .client
            .request(Method::PUT, self.server.url(path))
            .header("x-pi-forge-token", &self.server.token)
            .json(body)
            .send()
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        (status, headers, response.json().unwrap_or(Value::Null))
    }

    fn project_file(&self) -> std::path::PathBuf {
        self.dirs.project().join(".pi/forge/subagents.json")
    }

    fn global_file(&self) -> std::path::PathBuf {
        self.dirs.global().join("subagents.json")
    }
}

fn absent(scope: &str, path: &std::path::Path) -> Value {
    json!({
        "scope": scope,
        "path": path.display().to_string(),
        "exists": false,
        "revision": null,
        "sourceRevision": null,
        "settings": {},
        "diagnostics": [],
    })
}

fn scout(enabled: bool, timeout: u64, entry_timeout: Value, entry_key: Value) -> Value {
    json!({
        "profileId": "scout",
        "selector": "project:scout",
        "enabled": enabled,
        "timeoutMs": timeout,
        "entryTimeoutMs": entry_timeout,
        "backend": "pi-subprocess-readonly",
        "unattended": false,
        "entryScope": "project",
        "entryKey": entry_key,
    })
}

fn assert_error(body: &Value, status: StatusCode, expected: StatusCode, code: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
}

#[test]
fn an_empty_workspace_has_no_files_and_every_profile_disabled() {
    let f = Fixture::new(&[]);
    let settings = f.get("/api/agent/settings");
    assert_eq!(
        settings,
        json!({
            "ok": true,
            "trusted": true,
            "files": {
                "project": absent("project", &f.project_file()),
                "global": absent("global", &f.global_file()),
            },
            "profiles": [scout(false, 60_000, Value::Null, Value::Null)],
        })
    );
    // The typed contract reads it.
    let typed: forge_core::api::AgentSettings = serde_json::from_value(settings.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), settings);
    assert_eq!(f.get("/api/agent/profiles")["profiles"], json!([]));
}

#[test]
fn create_update_and_a_stale_save_that_changes_nothing() {
    let f = Fixture::new(&[]);
    let first = json!({
        "backend": "pi-subprocess-readonly",
        "profiles": {"scout": {"enabled": true, "timeoutMs": 120000}},
        "extra": 1,
    });
    let (status, headers, body) =
        f.put("/api/agent/settings/project", &json!({ "settings": first }));
    assert_eq!(status, StatusCode::OK, "{body}");
    let bytes = std::fs::read(f.project_file()).unwrap();
    assert_eq!(String::from_utf8(bytes.clone()).unwrap(), to_pretty(&first));
    let rev1 = revision(&bytes);
    assert_eq!(headers["etag"], format!("\"{rev1}\"").as_str());
    assert_eq!(
        body["files"]["project"],
        json!({
            "scope": "project",
            "path": f.project_file().display().to_string(),
            "exists": true,
            "revision": rev1,
            "sourceRevision": rev1.strip_prefix("sha256:").unwrap(),
            "settings": first,
            "diagnostics": [{
                "level": "warning",
                "message": "Unknown key extra in subagents.json; it is ignored.",
                "field": "extra",
            }],
        })
    );
    assert_eq!(
        body["profiles"],
        json!([scout(true, 120_000, json!(120_000), json!("scout"))])
    );
    assert_eq!(f.get("/api/agent/settings"), body);

    // GET /api/agent/profiles follows the save at once.
    let profiles = f.get("/api/agent/profiles")["profiles"].clone();
    assert_eq!(profiles.as_array().unwrap().len(), 1, "{profiles}");
    assert_eq!(profiles[0]["profileId"], "project:scout");

    // Replacing the file needs its revision.
    let second = json!({"profiles": {"scout": {"enabled": false}}, "extra": 1});
    let (status, _, body) = f.put(
        "/api/agent/settings/project",
        &json!({ "settings": second }),
    );
    assert_error(
        &body,
        status,
        StatusCode::PRECONDITION_REQUIRED,
        "revision_required",
    );
    let (status, _, body) = f.put(
        "/api/agent/settings/project",
        &json!({ "settings": second, "sourceRevision": rev1 }),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    let bytes = std::fs::read(f.project_file()).unwrap();
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        to_pretty(&second)
    );
    let rev2 = revision(&bytes);
    assert_eq!(body["files"]["project"]["revision"], rev2.as_str());
    assert_eq!(
        body["profiles"],
        json!([scout(false, 60_000, Value::Null, json!("scout"))])
    );
    assert_eq!(f.get("/api/agent/profiles")["profiles"], json!([]));

    // A save based on the old revision is refused with the current one; the file stays.
    let (status, _, body) = f.put(
        "/api/agent/settings/project",
        &json!({ "settings": {"profiles": {}}, "sourceRevision": rev1 }),
    );
    assert_error(&body, status, StatusCode::CONFLICT, "stale_revision");
    assert_eq!(body["currentRevision"], rev2.as_str());
    assert_eq!(body["current"], second);
    assert_eq!(std::fs::read(f.project_file()).unwrap(), bytes);

    // If-Match works as well.
    let response = f
        .client
        .request(Method::PUT, f.server.url("/api/agent/settings/project"))
        .header("x-pi-forge-token", &f.server.token)
        .header("if-match", format!("\"{rev2}\""))
        .json(&json!({"settings": {}}))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(std::fs::read_to_string(f.project_file()).unwrap(), "{}\n");
}

#[test]
fn the_global_file_is_written_in_an_untrusted_project_but_the_project_file_is_refused() {
    let f = Fixture::new(&[("PI_FORGE_UNTRUSTED", "1")]);
    let (status, _, body) = f.put(
        "/api/agent/settings/project",
        &json!({"settings": {"profiles": {"scout": {"enabled": true}}}}),
    );
    assert_error(&body, status, StatusCode::FORBIDDEN, "untrusted_project");
    assert_eq!(
        body["error"],
        "Project is not trusted; refusing to save the project's subagents.json."
    );
    assert!(!f.project_file().exists());

    let global = json!({"profiles": {"global:helper": {"enabled": true, "backend": "b"}}});
    let (status, _, body) = f.put("/api/agent/settings/global", &json!({ "settings": global }));
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        std::fs::read_to_string(f.global_file()).unwrap(),
        to_pretty(&global)
    );
    assert_eq!(body["trusted"], false);
    assert_eq!(
        body["files"]["project"],
        absent("project", &f.project_file())
    );
    assert_eq!(body["files"]["global"]["settings"], global);
    // The project's profiles are not loaded in an untrusted project.
    assert_eq!(body["profiles"], json!([]));
}

#[test]
fn bad_bodies_are_400_and_write_nothing() {
    let f = Fixture::new(&[]);
    let cases = [
        (
            json!({"settings": [1]}),
            "settings must be a JSON object, not array.",
        ),
        (
            json!({"settings": "x"}),
            "settings must be a JSON object, not string.",
        ),
        (
            json!({"profiles": {}}),
            "Request body must contain a settings object.",
        ),
        (json!([]), "Request body must be a JSON object, not array."),
    ];
    for (body, message) in cases {
        let (status, _, answer) = f.put("/api/agent/settings/project", &body);
        assert_error(&answer, status, StatusCode::BAD_REQUEST, "invalid_input");
        assert_eq!(answer["error"], message, "{body}");
    }
    let big = "x".repeat(300_000);
    let (status, _, answer) = f.put(
        "/api/agent/settings/global",
        &json!({"settings": {"note": big}}),
    );
    assert_error(&answer, status, StatusCode::BAD_REQUEST, "invalid_input");
    assert_eq!(
        answer["error"],
        "subagents.json is too large: 300017 bytes (the limit is 262144 bytes)."
    );
    let (status, _, answer) = f.put("/api/agent/settings/other", &json!({"settings": {}}));
    assert_error(&answer, status, StatusCode::NOT_FOUND, "not_found");
    assert!(!f.project_file().exists());
    assert!(!f.global_file().exists());
}

#[test]
fn a_file_that_is_not_json_reads_as_null_settings_with_a_warning() {
    let f = Fixture::new(&[]);
    f.dirs.write_global("subagents.json", "{not json");
    let settings = f.get("/api/agent/settings");
    let global = &settings["files"]["global"];
    assert_eq!(global["exists"], true);
    assert_eq!(global["settings"], Value::Null);
    assert_eq!(global["revision"], revision(b"{not json").as_str());
    assert_eq!(global["diagnostics"].as_array().unwrap().len(), 1);
    assert_eq!(global["diagnostics"][0]["level"], "warning");
    assert!(global["diagnostics"][0]["message"]
        .as_str()
        .unwrap()
        .starts_with("Failed to parse subagents.json: "));
    assert_eq!(
        settings["profiles"],
        json!([scout(false, 60_000, Value::Null, Value::Null)])
    );
}

#[test]
fn a_global_entry_decides_until_the_trusted_project_names_the_profile() {
    let f = Fixture::new(&[]);
    let global = json!({"timeoutMs": 5000, "profiles": {"project:scout": {"enabled": true}}});
    f.dirs.write_global("subagents.json", &to_pretty(&global));
    let settings = f.get("/api/agent/settings");
    assert_eq!(
        settings["profiles"],
        json!([{
            "profileId": "scout",
            "selector": "project:scout",
            "enabled": true,
            "timeoutMs": 5000,
            "entryTimeoutMs": null,
            "backend": "pi-subprocess-readonly",
            "unattended": false,
            "entryScope": "global",
            "entryKey": "project:scout",
        }])
    );
    f.dirs.write(
        ".pi/forge/subagents.json",
        r#"{"allowAgentInvocationWithoutApproval": true, "profiles": {"scout": {"enabled": false, "timeoutMs": 9000}}}"#,
    );
    let settings = f.get("/api/agent/settings");
    assert_eq!(
        settings["profiles"],
        json!([{
            "profileId": "scout",
            "selector": "project:scout",
            "enabled": false,
            "timeoutMs": 9000,
            "entryTimeoutMs": 9000,
            "backend": "pi-subprocess-readonly",
            "unattended": true,
            "entryScope": "project",
            "entryKey": "scout",
        }])
    );
}
