//! The live path holds for every provider request of a prompt, against a real Pi 1.6.0 (RPC
//! mode) and a fake model that records what it receives: the follow-ups after tool results carry
//! the compiled Preset exactly like the first request, and a Preset session whose server is
//! missing, incompatible or gone mid-prompt sends nothing. Assertions are on the model's bytes.

mod pi;
mod support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::time::Duration;

use pi::{compiled_texts, message_texts, poll, Workspace};
use serde_json::{json, Value};

/// A Preset with a block before the history, one after it, and a history rule that redacts a
/// secret from what the model receives.
const LOOP: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "loop",
  "mode": "replace",
  "tools": { "allow": ["read"] },
  "regex": { "rules": [
    { "id": "redact", "stage": "history", "pattern": "SECRET-[0-9]+", "flags": "g", "replace": "[redacted]" }
  ] },
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are LOOP. Read what you are asked to." },
    { "id": "note", "kind": "block", "role": "user", "content": "Context note for {{ runtime.activeModel }}." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" },
    { "id": "after", "kind": "block", "role": "user", "content": "Reminder: answer in one line." }
  ]
}
"#;

const SECRET: &str = "SECRET-4242";

/// The same Preset, also allowing bash (for a tool that takes a while).
fn slow_loop() -> String {
    LOOP.replace(r#""allow": ["read"]"#, r#""allow": ["read", "bash"]"#)
}

fn loop_workspace() -> Workspace {
    Workspace::new(&[
        (".pi/forge/prompt-stacks/loop.json", LOOP),
        ("a.txt", "alpha\n"),
        ("b.txt", "beta\n"),
        ("c.txt", "gamma\n"),
    ])
}

/// The notifications Pi showed so far.
fn notes(pi: &pi::Pi) -> Vec<String> {
    pi.seen
        .iter()
        .filter(|e| e["method"] == "notify")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The tool names a request declared, in order.
fn declared_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .expect("the request declares tools")
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_request_of_a_tool_loop_carries_the_compiled_preset() {
    let ws = loop_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, body) = ws.api("POST", "/api/stacks/loop/activate", "{}");
    assert_eq!(status, 200, "{body}");
    for file in ["a.txt", "b.txt", "c.txt"] {
        ws.model.call_tool("read", json!({ "path": file }));
    }
    let settled = pi.prompt(&format!("Read a.txt, b.txt and c.txt. My key is {SECRET}."));
    assert_eq!(settled["aborted"], false, "{:?}", notes(&pi));
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 4, "three tool calls and the answer");

    // The redaction holds in every request, the follow-ups after tool results included.
    for (k, sent) in bodies.iter().enumerate() {
        let raw = String::from_utf8(serde_json::to_vec(sent).unwrap()).unwrap();
        assert!(!raw.contains(SECRET), "request {} leaked: {raw}", k + 1);
    }

    // The live conversation of the last request; request k saw its first 1 + 2(k-1) messages.
    let (_, runtime) = ws.api("GET", "/api/runtime", "");
    let conversation = runtime["messages"].as_array().unwrap().clone();
    assert_eq!(conversation.len(), 7, "{conversation:#?}");
    for (k, sent) in bodies.iter().enumerate() {
        let mut state = runtime.clone();
        state["messages"] = Value::Array(conversation[..1 + 2 * k].to_vec());
        let compiled = ws.preview("project:loop", &state, &format!("runtime-{k}.json"));
        let received = message_texts(sent);
        assert_eq!(
            received[0],
            (
                "system".to_string(),
                compiled["systemPrompt"].as_str().unwrap().to_string()
            ),
            "request {}",
            k + 1
        );
        assert_eq!(
            received[1..],
            compiled_texts(&compiled)[..],
            "request {}",
            k + 1
        );
        assert_eq!(declared_tools(sent), ["read"], "request {}", k + 1);
        assert_eq!(compiled["selectedTools"], json!(["read"]));
        // The post-history block follows the newest message exactly once.
        let reminders = received
            .iter()
            .filter(|(_, text)| text == "Reminder: answer in one line.")
            .count();
        assert_eq!(reminders, 1, "request {}", k + 1);
        assert_eq!(
            received.last().unwrap(),
            &(
                "user".to_string(),
                "Reminder: answer in one line.".to_string()
            )
        );
    }
    // What each request carried, in its own words.
    let roles = |body: &Value| -> Vec<String> {
        message_texts(body)
            .into_iter()
            .map(|(role, _)| role)
            .collect()
    };
    assert_eq!(
        roles(&bodies[3]),
        [
            "system",
            "user",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "user"
        ]
    );
    assert_eq!(
        message_texts(&bodies[0])[1..],
        [
            (
                "user".to_string(),
                "Context note for fake/fake-1.".to_string()
            ),
            (
                "user".to_string(),
                "Read a.txt, b.txt and c.txt. My key is [redacted].".to_string()
            ),
            (
                "user".to_string(),
                "Reminder: answer in one line.".to_string()
            ),
        ]
    );
    let results: Vec<String> = message_texts(&bodies[3])
        .into_iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(results, ["alpha\n", "beta\n", "gamma\n"]);
}

/// A session that recorded Preset `loop`, then quit: the sessions folder to continue it from.
fn record_a_preset_session(ws: &Workspace) -> String {
    let sessions = ws.root.path().join("sessions").display().to_string();
    let mut pi = ws.pi(&["--session-dir", &sessions]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/loop/activate", "{}");
    assert_eq!(status, 200);
    let settled = pi.prompt("first");
    assert_eq!(settled["aborted"], false, "{:?}", notes(&pi));
    pi.quit();
    let _ = ws.forge(&["ui", "stop"]);
    assert_eq!(ws.model.bodies().len(), 1);
    sessions
}

#[test]
fn a_missing_binary_at_session_start_refuses_the_recorded_presets_prompts() {
    let ws = loop_workspace();
    let sessions = record_a_preset_session(&ws);
    let missing = ws
        .root
        .path()
        .join("no-such/pi-forge")
        .display()
        .to_string();
    let mut pi = ws.pi_env(
        &["--session-dir", &sessions, "--continue"],
        &[("PI_FORGE_BIN", &missing)],
    );
    pi.connected();
    let reason = format!("cannot run {missing} (spawn {missing} ENOENT). Install pi-forge and put it on PATH, or set PI_FORGE_BIN to its path.");
    assert_eq!(
        notes(&pi),
        [format!("pi-forge: could not connect to the editor server: {reason} Preset project:loop is recorded in this session, so prompts are refused until it connects (/forge ui).")]
    );
    pi.refused(&format!("second, with {SECRET}"));
    assert_eq!(
        notes(&pi).last().unwrap(),
        &format!("pi-forge: Preset project:loop is active but the pi-forge server is not reachable, so nothing was sent. {reason}")
    );
    assert_eq!(
        ws.model.bodies().len(),
        1,
        "the model received nothing more"
    );
}

/// A stand-in editor that answers every request as a server of another host protocol would.
fn incompatible_editor() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let answer = r#"{"code":"protocol_mismatch","error":"This pi-forge server speaks host protocol 2, the extension sent 1. Run `pi-forge pi install` to update the extension."}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    port
}

#[test]
fn an_incompatible_server_refuses_the_recorded_presets_prompts() {
    let ws = loop_workspace();
    let sessions = record_a_preset_session(&ws);
    let port = incompatible_editor();
    let script = ws.root.path().join("old-pi-forge");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho 'http://127.0.0.1:{port}/?token=t'\n"),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut pi = ws.pi_env(
        &["--session-dir", &sessions, "--continue"],
        &[("PI_FORGE_BIN", &script.display().to_string())],
    );
    pi.connected();
    pi.refused("second");
    assert_eq!(
        notes(&pi).last().unwrap(),
        "pi-forge: Preset project:loop is active but the pi-forge server is not reachable, so nothing was sent. This pi-forge server speaks host protocol 2, the extension sent 1. Run `pi-forge pi install` to update the extension."
    );
    assert_eq!(
        ws.model.bodies().len(),
        1,
        "the model received nothing more"
    );
}

#[test]
fn a_server_killed_between_two_requests_stops_the_prompt() {
    let ws = Workspace::new(&[(".pi/forge/prompt-stacks/loop.json", &slow_loop())]);
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/loop/activate", "{}");
    assert_eq!(status, 200);
    ws.model
        .call_tool("bash", json!({ "command": "sleep 3; echo slept" }));
    pi.send(json!({"type": "prompt", "message": format!("Sleep first. {SECRET}")}));
    poll(Duration::from_secs(30), || {
        (ws.model.bodies().len() == 1).then_some(())
    })
    .expect("the first request reached the model");
    let server = ws.editor_pid().expect("the editor's pid");
    let killed = std::process::Command::new("kill")
        .args(["-s", "KILL", &server.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let settled = pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    assert_eq!(settled["aborted"], true, "{:?}", notes(&pi));
    let last = notes(&pi).last().cloned().unwrap_or_default();
    assert!(
        last.starts_with("pi-forge: request 2 of Preset project:loop was not sent: "),
        "{last}"
    );
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1, "the follow-up never reached the model");
    assert!(!bodies[0].to_string().contains(SECRET));
}
