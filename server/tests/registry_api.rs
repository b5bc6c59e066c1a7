//! `GET /api/registry` against the real `pi-forge ui` process: the slot option schemas and the
//! thinking levels the editor builds its forms from.

mod support;

use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{Dirs, Server};

fn get(server: &Server, path: &str) -> (StatusCode, Value) {
    let response = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .get(server.url(path))
        .header("x-pi-forge-token", &server.token)
        .send()
        .unwrap();
    let status = response.status();
    (status, response.json().unwrap_or(Value::Null))
}

#[test]
fn registry_lists_slot_schemas_and_thinking_levels() {
    let dirs = Dirs::new();
    let server = Server::start(&dirs, &[], &[]);
    let (status, body) = get(&server, "/api/registry");
    assert_eq!(status, StatusCode::OK, "{body}");

    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["slots", "thinkingLevels"]);
    assert_eq!(
        body["thinkingLevels"],
        json!(["off", "minimal", "low", "medium", "high", "xhigh", "max"])
    );

    let slots = body["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 11);
    let names: Vec<&str> = slots.iter().map(|s| s["slot"].as_str().unwrap()).collect();
    assert_eq!(names, forge_core::stack::BUILTIN_SLOTS);

    let history = &slots[0];
    assert_eq!(history["slot"], "chat-history");
    assert_eq!(history["defaultRole"], Value::Null);
    let option_names: Vec<&str> = history["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        option_names,
        [
            "includeLastUserMessage",
            "stripAssistantThinking",
            "includeSummaries",
            "roles",
            "toolMode",
            "maxMessages",
            "maxChars",
        ]
    );
    let max_messages = &history["options"][5];
    assert_eq!(max_messages["kind"], json!({"type": "integer", "min": 1}));
    assert_eq!(max_messages["default"], "unlimited");
    assert_eq!(history["options"][3]["kind"], json!({"type": "roles"}));

    let tools = &slots[1];
    assert_eq!(tools["slot"], "tools");
    assert_eq!(tools["defaultRole"], "system");
    let format = &tools["options"][0];
    assert_eq!(format["name"], "format");
    assert_eq!(
        format["kind"],
        json!({"type": "choice", "values": ["xml", "plain"]})
    );
    assert_eq!(format["default"], "xml");

    let cwd = slots.iter().find(|s| s["slot"] == "cwd").unwrap();
    assert_eq!(cwd["options"], json!([]));

    // The whole answer is exactly the core constant, serialized.
    assert_eq!(
        body["slots"],
        serde_json::to_value(forge_core::stack::slot_schema::SLOT_SCHEMAS).unwrap()
    );
}

#[test]
fn registry_needs_the_token_and_only_answers_get() {
    let dirs = Dirs::new();
    let server = Server::start(&dirs, &[], &[]);
    let client = Client::new();
    let anonymous = client.get(server.url("/api/registry")).send().unwrap();
    assert_eq!(anonymous.status(), StatusCode::FORBIDDEN);
    let post = client
        .post(server.url("/api/registry"))
        .header("x-pi-forge-token", &server.token)
        .header("origin", server.origin())
        .send()
        .unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
}
