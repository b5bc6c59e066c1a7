//! The live-host protocol (`/api/host/...`) against bad input: every refusal names the problem
//! and changes nothing. The host here is this test, speaking the protocol; the tests that claim
//! Pi behaviour drive a real Pi (e2e/tests/pi_live.rs).

mod support;

use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{Dirs, Server};

const LEAN: &str = r#"{"schemaVersion":2,"type":"pi-forge.prompt-stack","id":"lean","mode":"replace","items":[{"id":"sys","kind":"block","role":"system","content":"LEAN"}]}"#;

struct Host {
    _dirs: Dirs,
    server: Server,
    client: Client,
}

impl Host {
    fn new() -> Host {
        let dirs = Dirs::new();
        dirs.write(".pi/forge/prompt-stacks/lean.json", LEAN);
        let server = Server::start(&dirs, &[], &[]);
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Host {
            _dirs: dirs,
            server,
            client,
        }
    }

    fn post(&self, path: &str, body: &str) -> (StatusCode, Value) {
        self.send(reqwest::Method::POST, path, body)
    }

    fn live(&self) -> Value {
        self.client
            .get(self.server.url("/api/live"))
            .header("x-pi-forge-token", &self.server.token)
            .send()
            .unwrap()
            .json()
            .unwrap()
    }
}

fn hello(session: &str) -> Value {
    json!({
        "protocol": 1, "extensionVersion": "0.1.0", "piVersion": "1.6.0", "mode": "rpc",
        "hasUI": true, "cwd": "/w", "sessionId": session, "projectTrusted": true,
        "facts": {"tools": [{"name": "read"}], "activeTools": ["read"]}, "entries": []
    })
}

#[test]
fn malformed_host_messages_are_refused_and_change_nothing() {
    let h = Host::new();
    let (status, body) = h.post("/api/host/hello", "{\"protocol\": 1");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_json");

    let (status, body) = h.post("/api/host/hello", r#"{"protocol": 7}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "protocol_mismatch");
    assert_eq!(
        body["error"],
        "This pi-forge server speaks host protocol 1, the extension sent 7. Update both from one place: `pi update npm:pi-forge` for the npm package, `pi-forge pi install` for a binary built from source."
    );

    let mut bad = hello("s1");
    bad["facts"]["tools"] = json!("read");
    let (status, body) = h.post("/api/host/hello", &bad.to_string());
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_host_message");
    assert_eq!(
        body["error"],
        "Malformed hello message: invalid type: string \"read\", expected a sequence."
    );

    let (status, body) = h.post("/api/host/hello", "[1, 2]");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "The hello body must be a JSON object, not array."
    );
    assert_eq!(h.live(), json!({"connected": false}));
}

#[test]
fn unknown_hosts_stale_sessions_and_oversized_bodies_are_refused() {
    let h = Host::new();
    let (status, welcome) = h.post("/api/host/hello", &hello("s1").to_string());
    assert_eq!(status, StatusCode::OK, "{welcome}");
    let id = welcome["hostId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 24);
    assert_eq!(welcome["protocol"], 1);
    // The only stack is not auto-activating: a fresh session starts without a Preset.
    assert_eq!(welcome["activeStackId"], Value::Null);
    assert_eq!(welcome["entries"], json!([]));

    let turn = json!({"sessionId": "s1", "prompt": "hi", "clock": {"epochMs": 0, "utcOffsetMinutes": 0}, "facts": {}});
    let (status, body) = h.post("/api/host/nope/turn", &turn.to_string());
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "unknown_host");
    assert_eq!(
        body["error"],
        "Unknown live host nope: it disconnected or was replaced. Say hello again."
    );

    let stale = json!({"sessionId": "old", "prompt": "hi", "clock": {"epochMs": 0}, "facts": {}});
    let (status, body) = h.post(&format!("/api/host/{id}/turn"), &stale.to_string());
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["code"], "stale_session");
    assert_eq!(
        body["error"],
        "Session old is not the live session (s1); the request was ignored."
    );

    let (status, body) = h.post(
        &format!("/api/host/{id}/turn"),
        &json!({"sessionId": "s1", "clock": 5, "facts": {}}).to_string(),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_host_message");

    // Over the host limit (32,000,000 bytes): 413, and the host keeps its facts.
    let huge = format!(
        r#"{{"sessionId":"s1","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(32_000_001)
    );
    let (status, body) = h.post(&format!("/api/host/{id}/context"), &huge);
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["code"], "body_too_large");

    // A valid turn without a Preset adds nothing (no capability text, no blocked tools).
    let (status, body) = h.post(&format!("/api/host/{id}/turn"), &turn.to_string());
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"active": false, "capabilities": false, "blockedTools": {}})
    );

    // The host never opened its command stream: after the grace period it is gone.
    std::thread::sleep(Duration::from_millis(5_500));
    let (status, body) = h.post(&format!("/api/host/{id}/turn"), &turn.to_string());
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "unknown_host");
    assert_eq!(h.live(), json!({"connected": false}));
}

#[test]
fn a_second_session_is_told_the_project_is_taken() {
    let h = Host::new();
    let (_, welcome) = h.post("/api/host/hello", &hello("s1").to_string());
    let id = welcome["hostId"].as_str().unwrap().to_string();
    // Open the first host's command stream (it stays open while the response lives).
    let stream = h
        .client
        .get(h.server.url(&format!("/api/host/{id}/commands")))
        .header("x-pi-forge-token", &h.server.token)
        .send()
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let live = h.live();
    assert_eq!(live["connected"], true);
    assert_eq!(live["sessionId"], "s1");

    let (status, body) = h.post("/api/host/hello", &hello("s2").to_string());
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["code"], "host_busy");
    assert_eq!(
        body["error"],
        "Another Pi session (s1) is already connected to this project's editor. Use `/forge ui restart` in this session to take over."
    );
    assert_eq!(h.live()["sessionId"], "s1");

    let mut takeover = hello("s2");
    takeover["takeover"] = json!(true);
    let (status, _) = h.post("/api/host/hello", &takeover.to_string());
    assert_eq!(status, StatusCode::OK);
    // The first session hears it on its stream at once, then the stream ends.
    let text = stream.text().unwrap();
    let commands: Vec<serde_json::Value> = text
        .split("\n\n")
        .filter(|block| block.starts_with("event: command\n"))
        .map(|block| serde_json::from_str(block.split_once("data: ").unwrap().1).unwrap())
        .collect();
    assert_eq!(
        commands,
        [json!({
            "id": "takeover",
            "kind": "notify",
            "level": "error",
            "message": "pi-forge: another Pi session (s2) took over this project's editor with /forge ui restart. This session is no longer connected: a Preset recorded here refuses its prompts until it connects again, and /forge ui restart here takes the editor back."
        })]
    );
}

const AUTO: &str = r#"{"schemaVersion":2,"type":"pi-forge.prompt-stack","id":"auto","autoActivate":true,"items":[{"id":"sys","kind":"block","role":"system","content":"AUTO"}]}"#;

fn hello_with(session: &str, active: &str) -> String {
    let mut body = hello(session);
    body["entries"] = json!([
        {"customType": "pi-forge-prompt-stack-state", "data": {"activeStackId": "project:auto"}},
        {"customType": "other", "data": {}},
        {"customType": "pi-forge-prompt-stack-state", "data": {"activeStackId": active}}
    ]);
    body.to_string()
}

#[test]
fn hello_restores_the_branch_choice_and_falls_back_only_in_a_trusted_project() {
    let dirs = Dirs::new();
    dirs.write(".pi/forge/prompt-stacks/lean.json", LEAN);
    dirs.write(".pi/forge/prompt-stacks/auto.json", AUTO);
    let server = Server::start(&dirs, &[], &[]);
    let h = Host {
        _dirs: dirs,
        server,
        client: Client::new(),
    };
    // The newest entry wins, and it still resolves: used as is, nothing to record.
    let (status, welcome) = h.post("/api/host/hello", &hello_with("s1", "project:lean"));
    assert_eq!(status, StatusCode::OK, "{welcome}");
    assert_eq!(welcome["activeStackId"], "project:lean");
    assert_eq!(welcome["entries"], json!([]));
    // `none` stays off.
    let (_, welcome) = h.post("/api/host/hello", &hello_with("s1", "none"));
    assert_eq!(welcome["activeStackId"], Value::Null);
    assert_eq!(welcome["entries"], json!([]));
    // A Preset that is gone falls back to the auto-activating one, which is recorded.
    let (_, welcome) = h.post("/api/host/hello", &hello_with("s1", "project:missing"));
    assert_eq!(welcome["activeStackId"], "project:auto");
    assert_eq!(
        welcome["entries"],
        json!([{"customType": "pi-forge-prompt-stack-state", "data": {"activeStackId": "project:auto"}}])
    );
    // A fresh session starts with the auto-activating Preset.
    let (_, welcome) = h.post("/api/host/hello", &hello("s1").to_string());
    assert_eq!(welcome["activeStackId"], "project:auto");
}

#[test]
fn an_untrusted_project_never_auto_activates_and_keeps_the_branch_choice() {
    let dirs = Dirs::new();
    dirs.write(".pi/forge/prompt-stacks/auto.json", AUTO);
    let server = Server::start(&dirs, &["--untrusted"], &[]);
    let h = Host {
        _dirs: dirs,
        server,
        client: Client::new(),
    };
    let (status, welcome) = h.post("/api/host/hello", &hello_with("s1", "project:auto"));
    assert_eq!(status, StatusCode::OK, "{welcome}");
    assert_eq!(welcome["activeStackId"], Value::Null);
    assert_eq!(welcome["entries"], json!([]));
    let (_, welcome) = h.post("/api/host/hello", &hello("s1").to_string());
    assert_eq!(welcome["activeStackId"], Value::Null);
    assert_eq!(welcome["entries"], json!([]));
}

impl Host {
    fn send(&self, method: reqwest::Method, path: &str, body: &str) -> (StatusCode, Value) {
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
}

#[test]
fn payload_routes_redact_refuse_bad_input_and_name_missing_turns() {
    use reqwest::Method;
    let h = Host::new();
    let (_, welcome) = h.post("/api/host/hello", &hello("s1").to_string());
    let id = welcome["hostId"].as_str().unwrap().to_string();
    let path = format!("/api/host/{id}/payload");

    let (status, body) = h.post(
        &path,
        &json!({"sessionId": "s1", "payload": {}}).to_string(),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "Malformed payload message: missing field `seq`."
    );
    let stale = json!({"sessionId": "old", "seq": 1, "payload": {}});
    let (status, body) = h.post(&path, &stale.to_string());
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["code"], "stale_session");
    let (_, list) = h.send(Method::GET, "/api/payloads", "");
    assert_eq!(list["turns"], json!([]));

    let request = json!({"model": "m", "apiKey": "sk-secret", "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi", "headers": {"Authorization": "Bearer sk-secret"}}]});
    let capture = json!({"sessionId": "s1", "seq": 1, "provider": "p", "model": "m", "dropped": 2, "payload": request});
    let (status, answer) = h.post(&path, &capture.to_string());
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["turnId"], "turn-1");
    assert_eq!(answer["armed"], Value::Null);
    let (status, stored) = h.send(Method::GET, "/api/payloads/turn-1", "");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        stored,
        json!({"model": "m", "apiKey": "[redacted]", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi", "headers": {"Authorization": "[redacted]"}}]})
    );
    assert_eq!(answer["bytes"], stored.to_string().len());
    let (_, list) = h.send(Method::GET, "/api/payloads", "");
    assert_eq!(list["dropped"], 2);
    assert!(!list.to_string().contains("sk-secret"));

    let usage = json!({"sessionId": "s1", "seq": 1, "input": 7, "output": 1, "cacheRead": 0, "cacheWrite": 0});
    let (status, _) = h.post(&format!("/api/host/{id}/usage"), &usage.to_string());
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, list) = h.send(Method::GET, "/api/payloads", "");
    assert_eq!(list["turns"][0]["usage"]["promptTokens"], 7);
    assert_eq!(list["turns"][0]["usage"]["cacheReporting"], "not-reported");

    let (status, body) = h.send(Method::GET, "/api/payloads/turn-9", "");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "unknown_turn");
    assert_eq!(
        body["error"],
        "No captured turn turn-9 in this session (the history keeps the last 20 turns)."
    );
    let (status, body) = h.send(Method::POST, "/api/payloads/arm", r#"{"by": "robot"}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "by must be \"web\", \"pi\" or \"cli\", not \"robot\"."
    );
    let (status, body) = h.send(Method::POST, "/api/payloads/arm", r#"{"save": "yes"}"#);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "Malformed arm request: invalid type: string \"yes\", expected a boolean."
    );

    let (status, cleared) = h.send(Method::DELETE, "/api/payloads", "");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cleared["turns"], json!([]));
    let (status, body) = h.send(Method::GET, "/api/payloads/diff", "");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "no_captures");
}

#[test]
fn an_untrusted_project_never_saves_captures() {
    use reqwest::Method;
    let dirs = Dirs::new();
    let server = Server::start(&dirs, &["--untrusted"], &[]);
    let h = Host {
        _dirs: dirs,
        server,
        client: Client::new(),
    };
    let (status, body) = h.send(Method::POST, "/api/payloads/arm", r#"{"save": true}"#);
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["error"],
        "Project is not trusted; refusing to save captured payloads."
    );
    let (status, body) = h.send(Method::POST, "/api/payloads/turn-1/save", "");
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["code"], "untrusted_project");
    // Arming without saving is fine anywhere.
    let (status, list) = h.send(Method::POST, "/api/payloads/arm", "{}");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["armed"]["by"], "web");
    assert!(!h._dirs.project().join(".pi/forge/payloads").exists());
}

/// Issue 16, point 1 on the live path: a runaway regex rule in the active Preset ends the
/// turn's compile with the budget error (the turn is aborted: nothing is sent), not a hang.
#[test]
fn a_runaway_rule_in_the_active_preset_aborts_the_turn_with_the_budget_error() {
    let dirs = Dirs::new();
    let runaway = json!({
        "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "runaway", "mode": "replace",
        "regex": {"schemaVersion": 1, "rules": [
            {"id": "nested", "stage": "compiled", "targets": ["system"], "pattern": "(a+)+$", "replace": "x"}
        ]},
        // Without a budget, 2^40 ways to split the run: the turn would never be answered.
        "items": [{"id": "sys", "kind": "block", "role": "system", "content": format!("{}!", "a".repeat(40))}]
    });
    dirs.write(".pi/forge/prompt-stacks/runaway.json", &runaway.to_string());
    let server = Server::start(&dirs, &[], &[]);
    let h = Host {
        _dirs: dirs,
        server,
        client: Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    };
    let (status, welcome) = h.post("/api/host/hello", &hello_with("s1", "project:runaway"));
    assert_eq!(status, StatusCode::OK, "{welcome}");
    assert_eq!(welcome["activeStackId"], "project:runaway");
    let id = welcome["hostId"].as_str().unwrap().to_string();
    let turn = json!({"sessionId": "s1", "prompt": "hi", "clock": {"epochMs": 0, "utcOffsetMinutes": 0}, "facts": {}});
    let (status, body) = h.post(&format!("/api/host/{id}/turn"), &turn.to_string());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["active"], true);
    assert_eq!(body["stackId"], "project:runaway");
    assert!(body["abort"].is_string(), "{body}");
    assert!(body.get("systemPrompt").is_none(), "{body}");
    let errors = support::error_messages(&body);
    assert_eq!(
        errors,
        vec!["Regex rule nested exceeded its time budget (20000000 steps of the regex engine) in compiled/system: the pattern backtracks catastrophically on this text. Simplify it (no nested quantifiers such as (a+)+)."]
    );
}
