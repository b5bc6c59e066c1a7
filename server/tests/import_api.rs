//! `POST /api/stacks/import` against a real `pi-forge ui` process.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{Dirs, Server};

const STACK_DIR: &str = ".pi/forge/prompt-stacks";

const PRESET: &str = r#"{
  "temperature": 0.7,
  "prompts": [
    {"identifier": "main", "name": "Main Prompt", "role": "system", "content": "You are {{char}}."},
    {"identifier": "charDescription", "name": "Char Description", "marker": true},
    {"identifier": "chatHistory", "name": "Chat History", "marker": true},
    {"identifier": "jailbreak", "name": "Post-History Instructions", "role": "system", "content": "Stay brief."}
  ],
  "prompt_order": [
    {"character_id": 100000, "order": [{"identifier": "main", "enabled": true}]},
    {"character_id": 100001, "order": [
      {"identifier": "main", "enabled": true},
      {"identifier": "charDescription", "enabled": true},
      {"identifier": "chatHistory", "enabled": true},
      {"identifier": "jailbreak", "enabled": true}
    ]}
  ]
}"#;

struct Fixture {
    dirs: Dirs,
    server: Server,
    client: Client,
}

impl Fixture {
    fn new() -> Fixture {
        let dirs = Dirs::new();
        let server = Server::start(&dirs, &[], &[]);
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Fixture {
            dirs,
            server,
            client,
        }
    }

    fn import(&self, body: &Value) -> (StatusCode, Value) {
        let response = self
            .client
            .post(self.server.url("/api/stacks/import"))
            .header("x-pi-forge-token", &self.server.token)
            .json(body)
            .send()
            .unwrap();
        let status = response.status();
        (status, response.json().unwrap_or(Value::Null))
    }

    fn stack_path(&self, id: &str) -> PathBuf {
        self.dirs
            .project()
            .join(STACK_DIR)
            .join(format!("{id}.json"))
    }

    fn stack_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.dirs.project().join(STACK_DIR)) {
            Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn preset() -> Value {
    serde_json::from_str(PRESET).unwrap()
}

fn assert_error(status: StatusCode, body: &Value, expected: StatusCode, code: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
}

#[test]
fn a_sillytavern_preset_is_dry_run_then_imported_once_and_never_overwritten() {
    let f = Fixture::new();

    // Two character configs and no characterId: the UI must ask.
    let (status, body) =
        f.import(&json!({"content": preset(), "dryRun": true, "fileName": "My Preset.json"}));
    assert_error(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        "character_id_required",
    );
    assert_eq!(body["details"]["characterIds"], json!(["100000", "100001"]));

    // An unknown id lists the same choices.
    let (status, body) = f.import(&json!({"content": preset(), "dryRun": true, "characterId": 7}));
    assert_error(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        "unknown_character_id",
    );
    assert_eq!(body["details"]["characterIds"], json!(["100000", "100001"]));

    // With a characterId: the stack and the report, nothing written.
    let (status, body) = f.import(&json!({
        "content": preset(), "dryRun": true, "characterId": 100001, "fileName": "My Preset.json"
    }));
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ok"], true);
    assert_eq!(body["format"], "sillytavern");
    assert_eq!(body["id"], "my-preset");
    assert_eq!(body["exists"], false);
    assert_eq!(body["stack"]["id"], "my-preset");
    assert!(
        body["stack"]["items"]
            .as_array()
            .is_some_and(|i| !i.is_empty()),
        "{body}"
    );
    assert_eq!(body["report"]["characterId"], "100001");
    assert!(
        body["report"]["converted"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{body}"
    );
    assert!(f.stack_files().is_empty(), "a dry run writes nothing");

    // The real import (characterId as a string, content as the file's text).
    let request = json!({
        "content": PRESET, "characterId": "100001", "id": "st-preset"
    });
    let (status, body) = f.import(&request);
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["ok"], true);
    assert_eq!(body["selector"], "project:st-preset");
    assert_eq!(body["format"], "sillytavern");
    assert_eq!(body["report"]["characterId"], "100001");
    assert_eq!(body["stack"]["id"], "st-preset");
    let path = f.stack_path("st-preset");
    let written = std::fs::read(&path).expect("the stack file exists");
    let on_disk: Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(on_disk["id"], "st-preset");

    // A dry run now reports the clash.
    let (status, body) = f.import(&json!({
        "content": preset(), "characterId": "100001", "id": "st-preset", "dryRun": true
    }));
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["exists"], true);

    // The same import again: 409 and the file untouched.
    let (status, body) = f.import(&request);
    assert_error(status, &body, StatusCode::CONFLICT, "exists");
    assert_eq!(std::fs::read(&path).unwrap(), written);
}

#[test]
fn a_native_stack_is_imported_with_its_own_id_or_the_given_one() {
    let f = Fixture::new();
    let stack = json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "native",
        "items": [{"kind": "block", "id": "intro", "role": "system", "content": "Hi."}]
    });
    let (status, body) = f.import(&json!({"content": stack}));
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["format"], "native");
    assert_eq!(body["selector"], "project:native");
    assert_eq!(body["report"], Value::Null);
    assert!(f.stack_path("native").exists());

    // `id` renames the copy; the content as text works too.
    let (status, body) = f.import(&json!({
        "content": serde_json::to_string(&stack).unwrap(), "id": "native-copy", "format": "native"
    }));
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["selector"], "project:native-copy");
    assert!(f.stack_path("native-copy").exists());

    // An invalid native stack: 400 with diagnostics, nothing written.
    let (status, body) = f.import(&json!({
        "content": {"id": "broken", "items": [{"kind": "nope"}]}
    }));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_input");
    assert!(!f.stack_path("broken").exists());
}

#[test]
fn unknown_and_malformed_content_is_refused_and_writes_nothing() {
    let f = Fixture::new();
    let (status, body) = f.import(&json!({"content": {"hello": "world"}}));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "unknown_format");
    assert_eq!(
        body["error"],
        "This file is neither a pi-forge prompt stack nor a SillyTavern chat-completion preset."
    );
    let (status, body) = f.import(&json!({"content": [1, 2, 3]}));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "unknown_format");

    let (status, body) = f.import(&json!({"content": "{\"prompts\": [", "dryRun": false}));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_json");
    assert_eq!(body["field"], "content");

    let (status, body) = f.import(&json!({}));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_input");
    let (status, body) = f.import(&json!({"content": preset(), "format": "word"}));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_input");
    let (status, body) =
        f.import(&json!({"content": preset(), "characterId": 100001, "id": "bad id"}));
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_input");
    assert_eq!(body["field"], "id");
    assert!(f.stack_files().is_empty());
}

#[test]
fn an_untrusted_project_refuses_a_project_import() {
    let dirs = Dirs::new();
    let server = Server::start(&dirs, &[], &[("PI_FORGE_UNTRUSTED", "1")]);
    let response = Client::new()
        .post(server.url("/api/stacks/import"))
        .header("x-pi-forge-token", &server.token)
        .json(&json!({"content": preset(), "characterId": 100001, "id": "st"}))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let body: Value = response.json().unwrap();
    assert_eq!(body["code"], "untrusted_project");
    assert!(!dirs.project().join(STACK_DIR).join("st.json").exists());
}
