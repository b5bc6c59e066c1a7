//! Capabilities in a live session against a real Pi 1.6.0 (RPC mode) and a fake model that
//! records what it receives: activation from the browser's routes, the agent's
//! `forge_capability` tool, Preset switches and a restart. Assertions are on the bytes the model
//! server got and on the session entries Pi wrote.

mod pi;
mod support;

use pi::{message_texts, tool_names, Workspace};
use serde_json::{json, Value};

const REVIEWER: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "reviewer",
  "name": "Reviewer",
  "content": "Review every diff for unsafe shell use.",
  "tools": { "add": ["grep"], "remove": ["bash"] }
}
"#;

const NOTES: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "notes",
  "content": "Keep notes short.",
  "tools": { "add": [], "remove": [] }
}
"#;

/// A Preset binding both capabilities: `rev` the model may enable, `notes` only a person.
const BOUND: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "bound",
  "mode": "replace",
  "capabilities": [
    { "ref": "reviewer", "id": "rev", "modelCallable": true },
    { "ref": "notes", "id": "notes" }
  ],
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are BOUND." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

const OTHER: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "other",
  "mode": "replace",
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are OTHER." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

const FILES: &[(&str, &str)] = &[
    (".pi/forge/capabilities/reviewer.json", REVIEWER),
    (".pi/forge/capabilities/notes.json", NOTES),
    (".pi/forge/prompt-stacks/bound.json", BOUND),
    (".pi/forge/prompt-stacks/other.json", OTHER),
];

fn workspace() -> Workspace {
    Workspace::new(FILES)
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    out.sort();
    out
}

fn state(ws: &Workspace) -> Value {
    let (status, body) = ws.api("GET", "/api/capability-state", "");
    assert_eq!(status, 200, "{body}");
    body["state"].clone()
}

/// What the browser's picker does: read the choices, then enable one with the guard and the
/// fingerprint it showed.
fn enable(ws: &Workspace, kind: &str, id: &str) -> (u16, Value) {
    let (status, available) = ws.api("GET", "/api/capability-state/available", "");
    assert_eq!(status, 200, "{available}");
    let choice = available["choices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind && c["id"] == id)
        .unwrap_or_else(|| panic!("no choice {kind} {id} in {available}"))
        .clone();
    let body = json!({
        "guard": available["state"]["guard"],
        "kind": kind,
        "id": id,
        "fingerprint": choice["fingerprint"],
    });
    ws.api("POST", "/api/capability-state/enable", &body.to_string())
}

/// Enables `project:reviewer` through the picker routes; its activation id.
fn enable_reviewer(ws: &Workspace) -> String {
    let (status, body) = enable(ws, "capability", "project:reviewer");
    assert_eq!(status, 200, "{body}");
    body["state"]["active"][0]["activationId"]
        .as_str()
        .unwrap()
        .to_string()
}

fn user_notice(blocks: &[String]) -> String {
    format!(
        "[pi-forge: capabilities active in this session. This note comes from the pi-forge extension, not from the user.]\n<pi-forge-capabilities>\n{}\n</pi-forge-capabilities>",
        blocks.join("\n\n")
    )
}

fn reviewer_block(activation: &str) -> String {
    format!(
        "<capability source=\"project:reviewer\" name=\"Reviewer\" activation=\"{activation}\">\nReview every diff for unsafe shell use.\n</capability>"
    )
}

#[test]
fn enabling_in_the_browser_reaches_the_next_request_and_disabling_removes_it() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let before = state(&ws);
    assert_eq!(before["active"], json!([]));
    assert_eq!(before["delivery"], "none");
    assert_eq!(before["textPresentation"], "user");
    assert_eq!(before["trusted"], true);

    let (status, body) = enable(&ws, "capability", "project:reviewer");
    assert_eq!(status, 200, "{body}");
    let active = body["state"]["active"].as_array().unwrap().clone();
    assert_eq!(active.len(), 1);
    let activation = active[0]["activationId"].as_str().unwrap().to_string();
    assert_eq!(
        active[0],
        json!({
            "activationId": activation,
            "source": "project:reviewer",
            "name": "Reviewer",
            "actor": "user",
            "content": "Review every diff for unsafe shell use.",
            "tools": {"add": ["grep"], "remove": ["bash"]},
        })
    );
    assert_eq!(body["state"]["delivery"], "pending");
    assert_eq!(
        body["state"]["lastToolChange"],
        json!({"added": ["grep"], "removed": ["bash"]})
    );
    // Pi wrote the tools baseline first, then the event.
    let first = pi.wait("the tools entry", |e| e["type"] == "entry_appended");
    assert_eq!(first["entry"]["customType"], "pi-forge-capability-tools");
    assert_eq!(
        first["entry"]["data"]["baseline"],
        json!(["read", "bash", "edit", "write"])
    );
    let second = pi.wait("the event entry", |e| e["type"] == "entry_appended");
    assert_eq!(second["entry"]["customType"], "pi-forge-capability-event");
    assert_eq!(second["entry"]["data"]["op"], "activate");
    assert_eq!(second["entry"]["data"]["actor"], "user");
    assert_eq!(
        second["entry"]["data"]["snapshot"]["activationId"],
        activation.as_str()
    );

    let settled = pi.prompt("hello there");
    assert_eq!(settled["aborted"], false);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1);
    let sent = message_texts(&bodies[0]);
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(sent[0].0, "system");
    assert_eq!(
        sent[1],
        (
            "user".to_string(),
            user_notice(&[reviewer_block(&activation)])
        )
    );
    assert_eq!(sent[2], ("user".to_string(), "hello there".to_string()));
    assert_eq!(
        tool_names(&bodies[0]),
        sorted(&["read", "edit", "write", "grep"])
    );
    // After the request, the idle session records the delivery anchor.
    let is_anchor = |e: &Value| {
        e["type"] == "entry_appended" && e["entry"]["customType"] == "pi-forge-capability-delivery"
    };
    let anchor = match pi.seen.iter().find(|e| is_anchor(e)) {
        Some(e) => e.clone(),
        None => pi.wait("the delivery anchor", is_anchor),
    };
    assert_eq!(anchor["entry"]["data"]["schemaVersion"], 1);
    assert_eq!(
        pi::poll(std::time::Duration::from_secs(5), || {
            (state(&ws)["delivery"] == "none").then_some(())
        }),
        Some(())
    );

    let guard = state(&ws)["guard"].clone();
    let body = json!({"action": "disable", "activationId": activation, "guard": guard});
    let (status, answer) = ws.api("POST", "/api/capability-state", &body.to_string());
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["state"]["active"], json!([]));
    assert_eq!(
        answer["state"]["effectiveTools"],
        json!(["read", "bash", "edit", "write"])
    );
    pi.prompt("again");
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 2);
    let sent = message_texts(&bodies[1]);
    assert!(
        sent.iter()
            .all(|(_, text)| !text.contains("pi-forge-capabilities")),
        "{sent:#?}"
    );
    assert_eq!(
        sent.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(
        tool_names(&bodies[1]),
        sorted(&["read", "bash", "edit", "write"])
    );

    // The same guard again is stale now: 409 with forge-core's message.
    let (status, answer) = ws.api("POST", "/api/capability-state", &body.to_string());
    assert_eq!(status, 409);
    assert_eq!(
        answer["error"],
        "Session, branch or capability state changed; reload the capability state and try again."
    );
}

/// The tools' order is part of the provider's cacheable prefix. Pi 1.6 declares tools in the
/// transcript (system messages with `toolsAdded` / `toolsRemoved`) and sends their replay, so
/// a tool that becomes active again goes last, after the ones that stayed. pi-forge hands Pi
/// the effective list in the baseline's order (the capability state says `read, bash, edit,
/// write` after the disable) and never reorders what stays: the tools common to two requests
/// keep their order, so the longest prefix Pi allows survives each change.
#[test]
fn tools_that_stay_keep_their_order_across_a_capability_on_and_off() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    pi.prompt("before");
    let before = pi::tool_order(&ws.model.bodies()[0]);
    assert_eq!(before, ["read", "bash", "edit", "write"]);

    let activation = enable_reviewer(&ws);
    pi.prompt("with the reviewer");
    assert_eq!(
        pi::tool_order(&ws.model.bodies()[1]),
        ["read", "edit", "write", "grep"]
    );

    let guard = state(&ws)["guard"].clone();
    let body = json!({"action": "disable", "activationId": activation, "guard": guard});
    let (status, answer) = ws.api("POST", "/api/capability-state", &body.to_string());
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["state"]["effectiveTools"],
        json!(["read", "bash", "edit", "write"])
    );
    pi.prompt("after");
    assert_eq!(
        pi::tool_order(&ws.model.bodies()[2]),
        ["read", "edit", "write", "bash"]
    );
}

/// One rule for reaching the editor: a prompt that needs it (a capability is active) starts it
/// again when it died, as every `/forge` and `/capability` command does; the request then
/// carries the capability as before.
#[test]
fn a_prompt_with_an_active_capability_starts_a_dead_editor_again() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let activation = enable_reviewer(&ws);
    let old = ws.editor_pid().expect("the editor");
    std::process::Command::new("kill")
        .args(["-KILL", &old.to_string()])
        .status()
        .unwrap();
    let gone = pi::poll(std::time::Duration::from_secs(10), || {
        (!std::path::Path::new(&format!("/proc/{old}")).exists()).then_some(())
    });
    assert_eq!(gone, Some(()));
    // Pi notices the stream's end (its status line changes); then the prompt.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let settled = pi.prompt("after the crash");
    assert_eq!(
        settled["aborted"],
        false,
        "{:?}",
        pi.seen
            .iter()
            .filter(|e| e["method"] == "notify")
            .collect::<Vec<_>>()
    );
    let new = ws.editor_pid().expect("a new editor");
    assert_ne!(new, old);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1);
    let sent = message_texts(&bodies[0]);
    assert_eq!(
        sent[1],
        (
            "user".to_string(),
            user_notice(&[reviewer_block(&activation)])
        )
    );
    assert_eq!(
        tool_names(&bodies[0]),
        sorted(&["read", "edit", "write", "grep"])
    );
}

#[test]
fn a_model_that_accepts_system_messages_gets_a_native_system_message() {
    let native = json!({"id": "fake-native", "name": "fake-native", "reasoning": false, "input": ["text"],
        "contextWindow": 100000, "maxTokens": 1000,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "compat": {"supportsMidConvoSystemMessages": true}});
    let ws = Workspace::with_models(FILES, &[native]);
    let mut pi = ws.pi(&["--no-session", "--model", "fake/fake-native"]);
    pi.connected();
    assert_eq!(state(&ws)["textPresentation"], "native");
    let activation = enable_reviewer(&ws);
    pi.prompt("hello there");
    let bodies = ws.model.bodies();
    let sent = message_texts(&bodies[0]);
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(
        sent[1],
        (
            "system".to_string(),
            format!(
                "<pi-forge-capabilities>\n{}\n</pi-forge-capabilities>",
                reviewer_block(&activation)
            )
        )
    );
    assert_eq!(sent[2], ("user".to_string(), "hello there".to_string()));
}

#[test]
fn the_agent_enables_a_model_callable_binding_and_is_refused_the_other() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, body) = ws.api("POST", "/api/stacks/bound/activate", "{}");
    assert_eq!(status, 200, "{body}");
    ws.model
        .call_tool("forge_capability", json!({"action": "enable", "id": "rev"}));
    ws.model.call_tool(
        "forge_capability",
        json!({"action": "enable", "id": "notes"}),
    );
    let settled = pi.prompt("use what you need");
    assert_eq!(settled["aborted"], false);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 3, "tool call, tool call, answer");
    // The model was offered the control tool (the Preset has a model-callable binding).
    assert_eq!(
        tool_names(&bodies[0]),
        sorted(&["read", "bash", "edit", "write", "forge_capability"])
    );
    let now = state(&ws);
    let active = now["active"].as_array().unwrap();
    assert_eq!(active.len(), 1, "{now}");
    assert_eq!(active[0]["actor"], "agent");
    assert_eq!(active[0]["source"], "project:reviewer");
    let activation = active[0]["activationId"].as_str().unwrap();
    // The second request carries the tool result and, from then on, the capability's text
    // (before the newest user message) and its tools.
    let second = message_texts(&bodies[1]);
    let tool_result = second.iter().find(|(role, _)| role == "tool").unwrap();
    assert_eq!(
        tool_result.1,
        format!(
            "capability activated ({activation}); its text reaches the model with the next request"
        )
    );
    assert_eq!(second[1].0, "user");
    assert_eq!(second[1].1, user_notice(&[reviewer_block(activation)]));
    assert_eq!(
        tool_names(&bodies[1]),
        sorted(&["read", "edit", "write", "grep", "forge_capability"])
    );
    let third = message_texts(&bodies[2]);
    let refused = third
        .iter()
        .filter(|(role, _)| role == "tool")
        .nth(1)
        .unwrap();
    assert_eq!(
        refused.1,
        "Capability binding notes is not authorized for agent use."
    );
}

#[test]
fn switching_presets_ends_bound_activations_and_keeps_manual_ones() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/bound/activate", "{}");
    assert_eq!(status, 200);
    let (status, body) = enable(&ws, "binding", "notes");
    assert_eq!(status, 200, "{body}");
    let note = pi.command("/capability add Answer in English.");
    assert!(
        note.starts_with("pi-forge: capability activated ("),
        "{note}"
    );
    let before = state(&ws);
    let active = before["active"].as_array().unwrap();
    assert_eq!(
        active
            .iter()
            .map(|a| a["source"].clone())
            .collect::<Vec<_>>(),
        [json!("project:notes"), json!("manual")]
    );
    let bound_id = active[0]["activationId"].as_str().unwrap().to_string();

    let (status, body) = ws.api("POST", "/api/stacks/other/activate", "{}");
    assert_eq!(status, 200, "{body}");
    let lifecycle = pi.wait("the lifecycle deactivation", |e| {
        e["type"] == "entry_appended"
            && e["entry"]["customType"] == "pi-forge-capability-event"
            && e["entry"]["data"]["op"] == "deactivate"
    });
    assert_eq!(lifecycle["entry"]["data"]["actor"], "lifecycle");
    assert_eq!(
        lifecycle["entry"]["data"]["activationId"],
        bound_id.as_str()
    );
    let after = state(&ws);
    let active = after["active"].as_array().unwrap();
    assert_eq!(active.len(), 1, "{after}");
    assert_eq!(active[0]["source"], "manual");
    assert_eq!(active[0]["content"], "Answer in English.");
    let status_line = pi.command("/capability status");
    assert!(
        status_line.starts_with("pi-forge: 1 active · delivery pending · tools: "),
        "{status_line}"
    );
}

#[test]
fn a_restarted_pi_rebuilds_the_same_state_from_its_session() {
    let ws = workspace();
    let sessions = ws.root.path().join("sessions").display().to_string();
    let mut pi = ws.pi(&["--session-dir", &sessions]);
    pi.connected();
    let (status, body) = enable(&ws, "capability", "project:reviewer");
    assert_eq!(status, 200, "{body}");
    pi.prompt("first");
    let before = state(&ws);
    pi.quit();

    let mut again = ws.pi(&["--session-dir", &sessions, "--continue"]);
    again.connected();
    let after = state(&ws);
    assert_eq!(after["active"], before["active"]);
    assert_eq!(after["effectiveTools"], before["effectiveTools"]);
    again.prompt("second");
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 2);
    let activation = after["active"][0]["activationId"].as_str().unwrap();
    let sent = message_texts(&bodies[1]);
    assert!(
        sent.contains(&(
            "user".to_string(),
            user_notice(&[reviewer_block(activation)])
        )),
        "{sent:#?}"
    );
    assert_eq!(
        tool_names(&bodies[1]),
        sorted(&["read", "edit", "write", "grep"])
    );
}

#[test]
fn an_untrusted_project_refuses_activation_but_keeps_disable_and_reset() {
    let ws = workspace();
    // Activate while trusted, then come back untrusted on the same session.
    let sessions = ws.root.path().join("sessions").display().to_string();
    let mut pi = ws.pi(&["--session-dir", &sessions]);
    pi.connected();
    let (status, _) = enable(&ws, "capability", "project:reviewer");
    assert_eq!(status, 200);
    // Pi writes the session file with the first message.
    pi.prompt("first");
    pi.quit();
    let mut pi = ws.pi(&["--session-dir", &sessions, "--continue", "-na"]);
    pi.connected();
    let now = state(&ws);
    assert_eq!(now["trusted"], false);
    assert_eq!(
        now["problem"],
        "Active capabilities require a trusted project; trust it, or remove them with /capability disable or /capability reset."
    );
    let (status, body) = ws.api("GET", "/api/capability-state/available", "");
    assert_eq!(status, 403, "{body}");
    let refused = pi.command("/capability enable notes");
    assert_eq!(
        refused,
        "pi-forge: Capabilities require a trusted project; /capability disable and /capability reset stay available."
    );
    let body = json!({"action": "reset", "guard": now["guard"]});
    let (status, answer) = ws.api("POST", "/api/capability-state", &body.to_string());
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["state"]["active"], json!([]));
}

#[test]
fn saving_the_active_preset_may_not_break_an_active_capability_and_compaction_keeps_delivery() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/bound/activate", "{}");
    assert_eq!(status, 200);
    let activation = enable_reviewer(&ws);

    let (_, current) = ws.api("GET", "/api/stacks/project:bound", "");
    let revision = current["sourceRevision"].as_str().unwrap().to_string();
    let mut stack: Value = serde_json::from_str(BOUND).unwrap();
    stack["tools"] = json!({"deny": ["grep"]});
    let save = json!({"stack": stack, "sourceRevision": revision});
    let (status, body) = ws.api("PUT", "/api/stacks/project:bound", &save.to_string());
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "capability_conflict");
    assert_eq!(
        body["error"],
        "Saving the active Preset would break active capabilities: Tool grep is blocked by prompt stack project:bound"
    );
    let on_disk =
        std::fs::read_to_string(ws.project().join(".pi/forge/prompt-stacks/bound.json")).unwrap();
    assert_eq!(on_disk, BOUND);

    // Compaction rewrites the history; the capability text is projected per request, so the
    // request after it still carries it once, before the newest user message.
    pi.prompt("first");
    pi.send(json!({"type": "compact"}));
    pi.wait("the compaction", |e| {
        e["type"] == "response" && e["command"] == "compact"
    });
    pi.prompt("after compaction");
    let bodies = ws.model.bodies();
    let last = message_texts(bodies.last().unwrap());
    let notices = last
        .iter()
        .filter(|(_, text)| text.contains("<pi-forge-capabilities>"))
        .count();
    assert_eq!(notices, 1, "{last:#?}");
    let newest_user = last.iter().rposition(|(role, _)| role == "user").unwrap();
    assert_eq!(
        last[newest_user - 1],
        (
            "user".to_string(),
            user_notice(&[format!(
                "<capability source=\"project:reviewer\" name=\"Reviewer\" activation=\"{activation}\">\nReview every diff for unsafe shell use.\n</capability>"
            )])
        )
    );
    assert_eq!(last[newest_user].1, "after compaction");
}
