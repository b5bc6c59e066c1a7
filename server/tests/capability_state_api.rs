//! The session capability routes (spec B10) and the bridge's capability host routes against bad
//! input, stale guards and changed sources: each refusal has its status, code and message, and
//! changes nothing. The host here is this test speaking the host protocol (it never answers a
//! command, so nothing here commits); committing through a real Pi is in
//! e2e/tests/pi_capabilities.rs.

mod support;

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{Dirs, Server};

const NOTES: &str = r#"{"schemaVersion":1,"type":"pi-forge.capability","id":"notes","content":"Keep notes short.","tools":{"add":[],"remove":[]}}"#;

struct Live {
    _dirs: Dirs,
    server: Server,
    client: Client,
    host: String,
    _stream: Option<Response>,
}

fn hello(trusted: bool) -> Value {
    json!({
        "protocol": 1, "extensionVersion": "0.1.0", "piVersion": "1.6.0", "mode": "rpc",
        "hasUI": true, "cwd": "/w", "sessionId": "s1", "projectTrusted": trusted,
        "facts": {"tools": [{"name": "read"}, {"name": "grep"}], "activeTools": ["read"], "leafId": "leaf-1"},
        "entries": []
    })
}

impl Live {
    /// A server with the `notes` capability; with `connect`, a host said hello and opened its
    /// command stream (so the session is live).
    fn new(connect: Option<bool>) -> Live {
        let dirs = Dirs::new();
        dirs.write(".pi/forge/capabilities/notes.json", NOTES);
        let server = Server::start(&dirs, &[], &[]);
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut live = Live {
            _dirs: dirs,
            server,
            client,
            host: String::new(),
            _stream: None,
        };
        if let Some(trusted) = connect {
            let (status, welcome) =
                live.send("POST", "/api/host/hello", &hello(trusted).to_string());
            assert_eq!(status, StatusCode::OK, "{welcome}");
            live.host = welcome["hostId"].as_str().unwrap().to_string();
            let stream = live
                .client
                .get(
                    live.server
                        .url(&format!("/api/host/{}/commands", live.host)),
                )
                .header("x-pi-forge-token", &live.server.token)
                .send()
                .unwrap();
            assert_eq!(stream.status(), StatusCode::OK);
            live._stream = Some(stream);
        }
        live
    }

    fn send(&self, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = self
            .client
            .request(method, self.server.url(path))
            .header("x-pi-forge-token", &self.server.token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap();
        let status = response.status();
        (status, response.json().unwrap_or(Value::Null))
    }

    fn state(&self) -> Value {
        let (status, body) = self.send("GET", "/api/capability-state", "");
        assert_eq!(status, StatusCode::OK, "{body}");
        body["state"].clone()
    }
}

#[test]
fn without_a_live_session_the_routes_answer_503_after_checking_the_body() {
    let live = Live::new(None);
    let (status, body) = live.send("GET", "/api/capability-state", "");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["code"], "no_live_session");
    let guard = json!({"sessionId": "s1", "leafId": null, "revision": "r"});
    let (status, body) = live.send(
        "POST",
        "/api/capability-state",
        &json!({"action": "reset", "guard": guard}).to_string(),
    );
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, body) = live.send(
        "POST",
        "/api/capability-state",
        &json!({"action": "reset", "guard": guard, "extra": 1}).to_string(),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "Unsupported key extra.");
    let (status, _) = live.send("GET", "/api/capability-state/available", "");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn the_view_of_a_fresh_session_and_the_picker() {
    let live = Live::new(Some(true));
    let state = live.state();
    let revision = state["guard"]["revision"].as_str().unwrap();
    assert!(revision.starts_with("sha256:v1:"), "{revision}");
    assert_eq!(
        state,
        json!({
            "guard": {"sessionId": "s1", "leafId": "leaf-1", "revision": revision},
            "trusted": true,
            "restoring": false,
            "delivery": "none",
            "textPresentation": "user",
            "effectiveTools": ["read"],
            "active": [],
        })
    );
    let (status, body) = live.send("GET", "/api/capability-state/available", "");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], state);
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0]["kind"], "capability");
    assert_eq!(choices[0]["id"], "project:notes");
    assert_eq!(choices[0]["label"], "project:notes");
    assert_eq!(choices[0]["content"], "Keep notes short.");
    assert!(choices[0]["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("sha256:v1:"));
}

#[test]
fn mutations_and_activations_refuse_stale_guards_unknown_ids_and_changed_sources() {
    let live = Live::new(Some(true));
    let guard = live.state()["guard"].clone();
    let (status, body) = live.send(
        "POST",
        "/api/capability-state",
        &json!({"action": "disable", "activationId": "nope", "guard": guard}).to_string(),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["error"],
        "No active capability has the activation id nope."
    );
    let mut stale = guard.clone();
    stale["revision"] = json!("sha256:v1:00");
    let (status, body) = live.send(
        "POST",
        "/api/capability-state",
        &json!({"action": "reset", "guard": stale}).to_string(),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["code"], "guard_changed");
    assert_eq!(
        body["error"],
        "Session, branch or capability state changed; reload the capability state and try again."
    );

    let enable = |id: &str, fingerprint: &str, guard: &Value| {
        json!({"guard": guard, "kind": "capability", "id": id, "fingerprint": fingerprint})
            .to_string()
    };
    let (status, body) = live.send(
        "POST",
        "/api/capability-state/enable",
        &enable("project:notes", "sha256:v1:old", &guard),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body["error"],
        "Capability source changed since it was shown; review it again before enabling."
    );
    let (status, body) = live.send(
        "POST",
        "/api/capability-state/enable",
        &enable("notes", "sha256:v1:x", &guard),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body["error"],
        "A capability choice needs a qualified id (project:<id> or global:<id>), got notes."
    );
    let (status, body) = live.send(
        "POST",
        "/api/capability-state/enable",
        &enable("project:notes", "sha256:v1:x", &stale),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body["error"],
        "Session, branch or capability state changed; reload the capability state and try again."
    );
    let (status, body) = live.send(
        "POST",
        "/api/capability-state/enable",
        &json!({"guard": guard, "kind": "capability", "id": "project:notes"}).to_string(),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "fingerprint is required.");
    // Nothing was committed.
    assert_eq!(live.state()["active"], json!([]));
    assert_eq!(live.state()["guard"], guard);
}

#[test]
fn an_untrusted_session_cannot_list_or_enable_choices() {
    let live = Live::new(Some(false));
    let state = live.state();
    assert_eq!(state["trusted"], false);
    let (status, body) = live.send("GET", "/api/capability-state/available", "");
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["error"],
        "Capability activation needs a trusted project; Deactivate and Reset all stay available."
    );
    let (status, _) = live.send(
        "POST",
        "/api/capability-state/enable",
        &json!({"guard": state["guard"], "kind": "capability", "id": "project:notes", "fingerprint": "f"})
            .to_string(),
    );
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Reset with nothing active is a no-op that still answers with the state.
    let (status, body) = live.send(
        "POST",
        "/api/capability-state",
        &json!({"action": "reset", "guard": state["guard"]}).to_string(),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"]["active"], json!([]));
}

#[test]
fn the_capability_host_routes_answer_in_one_line_and_project_nothing_when_idle() {
    let live = Live::new(Some(true));
    let host = live.host.clone();
    let command = |command: &str, arg: &str| {
        live.send(
            "POST",
            &format!("/api/host/{host}/capability"),
            &json!({"sessionId": "s1", "command": command, "arg": arg}).to_string(),
        )
    };
    assert_eq!(
        command("status", ""),
        (
            StatusCode::OK,
            json!({"ok": true, "message": "0 active · delivery none · tools: read"})
        )
    );
    assert_eq!(
        command("bindings", ""),
        (
            StatusCode::OK,
            json!({"ok": true, "message": "No Preset is active."})
        )
    );
    let usage = "usage: /capability add <text> | enable <capability> | enable-bound <binding> | disable <id> | reset | bindings | status";
    assert_eq!(
        command("frobnicate", ""),
        (StatusCode::OK, json!({"ok": false, "message": usage}))
    );
    assert_eq!(
        command("enable", " "),
        (StatusCode::OK, json!({"ok": false, "message": usage}))
    );
    assert_eq!(
        command("disable", "nothing"),
        (
            StatusCode::OK,
            json!({"ok": true, "message": "No matching active capability: nothing"})
        )
    );
    assert_eq!(
        command("enable-bound", "rev"),
        (
            StatusCode::OK,
            json!({"ok": false, "message": "No Preset is active."})
        )
    );
    let (status, body) = live.send(
        "POST",
        &format!("/api/host/{host}/capability-tool"),
        &json!({"sessionId": "s1", "args": {"action": "status", "id": "x"}}).to_string(),
    );
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ok"], false);
    let (status, body) = live.send(
        "POST",
        &format!("/api/host/{host}/system-context"),
        &json!({"sessionId": "s1", "roles": ["system", "user"]}).to_string(),
    );
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (status, body) = live.send(
        "POST",
        &format!("/api/host/{host}/settled"),
        &json!({"sessionId": "s1"}).to_string(),
    );
    assert_eq!((status, body), (StatusCode::OK, json!({"entries": []})));
    let (status, body) = live.send(
        "POST",
        &format!("/api/host/{host}/capability"),
        &json!({"sessionId": "old", "command": "status"}).to_string(),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["code"], "stale_session");
}

#[test]
fn the_event_stream_sends_the_capability_state_once_per_change() {
    use std::io::{BufRead as _, BufReader};
    let live = Live::new(Some(true));
    let response = live
        .client
        .get(live.server.url("/api/events"))
        .header("cookie", live.server.cookie())
        .timeout(Duration::from_secs(60))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut name = String::new();
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { break };
            if let Some(event) = line.strip_prefix("event: ") {
                name = event.to_string();
            } else if let Some(data) = line.strip_prefix("data: ") {
                let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                if tx.send((std::mem::take(&mut name), value)).is_err() {
                    break;
                }
            }
        }
    });
    let states = |limit: Duration| {
        let deadline = std::time::Instant::now() + limit;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok((name, value)) if name == "capability-state" => out.push(value),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        out
    };
    let first = states(Duration::from_secs(2));
    assert_eq!(first.len(), 1, "{first:#?}");
    assert_eq!(first[0]["state"], live.state());
    // A change of the host's facts that changes the view (another leaf) sends one new state;
    // reads of the view never trigger another.
    let facts = json!({"sessionId": "s1", "facts": {"tools": [{"name": "read"}, {"name": "grep"}], "activeTools": ["read"], "leafId": "leaf-2"}});
    let (status, _) = live.send(
        "POST",
        &format!("/api/host/{}/facts", live.host),
        &facts.to_string(),
    );
    assert_eq!(status, StatusCode::NO_CONTENT);
    for _ in 0..5 {
        live.state();
    }
    let next = states(Duration::from_secs(2));
    assert_eq!(next.len(), 1, "{next:#?}");
    assert_eq!(next[0]["state"]["guard"]["leafId"], "leaf-2");
}
