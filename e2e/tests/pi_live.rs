//! The live bridge against a real Pi 1.6.0 (RPC mode) and a fake model that records what it
//! receives. Nothing of Pi is mocked: assertions are on the bytes the model server got.

mod pi;
mod support;

use std::time::{Duration, Instant};

use pi::{assert_request_is_the_preview, poll, runtime_clock_iso, Pi, Workspace};
use serde_json::{json, Value};

const LEAN: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "lean",
  "mode": "replace",
  "tools": { "allow": ["read", "grep"] },
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are LEAN. Last: {{ runtime.lastUserMessage }}" },
    { "id": "note", "kind": "block", "role": "user", "content": "Context note for {{ runtime.activeModel }} at {{ runtime.populatedAt }}." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

const DEEP: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "deep",
  "model": { "provider": "fake", "id": "fake-2" },
  "thinkingLevel": "max",
  "promptStack": "lean"
}
"#;

/// The notifications Pi showed so far.
fn notes(pi: &pi::Pi) -> Vec<String> {
    pi.seen
        .iter()
        .filter(|e| e["method"] == "notify")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn lean_workspace() -> Workspace {
    Workspace::new(&[(".pi/forge/prompt-stacks/lean.json", LEAN)])
}

/// The lean Preset plus the `deep` profile (fake-2, thinking max, Preset lean).
fn deep_workspace() -> Workspace {
    Workspace::new(&[
        (".pi/forge/prompt-stacks/lean.json", LEAN),
        (".pi/forge/agent-profiles/deep.json", DEEP),
    ])
}

/// The tool names a request to the model declared.
fn declared_tools(body: &Value) -> Vec<&str> {
    body["tools"]
        .as_array()
        .expect("the request declares tools")
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect()
}

/// While the stand-in browser `/forge ui` started is still running: it was handed the 0600
/// launch page, whose redirect holds the token, and no process's command line (read from
/// /proc) nor any Pi notification holds the token.
fn assert_token_stays_off_command_lines_and_notes(
    ws: &Workspace,
    pi: &Pi,
    authority: &str,
    token: &str,
) {
    let log = ws.browser_log();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !log.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let opened = std::fs::read_to_string(&log).expect("the browser was opened");
    let target = opened.trim().to_string();
    let launch = target
        .strip_prefix("file://")
        .unwrap_or_else(|| panic!("the browser got {target:?}, not the launch page"));
    assert!(launch.ends_with("-open.html"), "{launch}");
    let page = std::fs::read_to_string(launch).unwrap();
    assert!(
        page.contains(&format!("url=http://{authority}/?token={token}\"")),
        "{page}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(launch).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let mut opener_seen = false;
    let mut scanned = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        scanned += 1;
        assert!(
            !cmdline.contains(token),
            "process {:?} has the token on its command line: {cmdline}",
            entry.file_name()
        );
        opener_seen |= cmdline.contains(&target);
    }
    assert!(scanned > 10, "read {scanned} command lines");
    assert!(
        opener_seen,
        "the browser was still running while /proc was read"
    );
    let notes: Vec<&str> = pi
        .seen
        .iter()
        .filter(|e| e["method"] == "notify")
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(!notes.is_empty());
    for note in notes {
        assert!(
            !note.contains(token),
            "a notification holds the token: {note}"
        );
    }
}

#[test]
fn forge_ui_reports_the_editor_and_the_runtime_lists_pi_tools() {
    let ws = lean_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let note = pi.command("/forge ui");
    let (authority, token) = ws.editor().expect("the extension started the editor");
    assert_eq!(
        note,
        format!("pi-forge editor: http://{authority}/ (opened in your browser)")
    );
    assert_token_stays_off_command_lines_and_notes(&ws, &pi, &authority, &token);

    let (status, runtime) = ws.api("GET", "/api/runtime", "");
    assert_eq!(status, 200);
    assert_eq!(runtime["live"], true);
    let names: Vec<&str> = runtime["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read",
            "bash",
            "powershell",
            "edit",
            "write",
            "grep",
            "find",
            "ls",
            // Registered by the pi-forge extension, inactive until a Preset offers them.
            "forge_subagent_profiles",
            "forge_subagent",
            "forge_subagent_result",
            "forge_capability",
            "codemode",
            "tool_search"
        ]
    );
    let active: Vec<&str> = runtime["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["active"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(active, ["read", "bash", "edit", "write"]);
    // Source info comes from Pi's registry, not from pi-forge's stand-in ("builtin").
    assert_eq!(
        runtime["tools"][0]["source"],
        json!("builtin:read"),
        "{}",
        runtime["tools"][0]
    );
    assert_eq!(
        runtime["model"],
        json!({"provider": "fake", "id": "fake-1", "api": "openai-completions"})
    );

    let (_, live) = ws.api("GET", "/api/live", "");
    assert_eq!(live["connected"], true);
    assert_eq!(live["piVersion"], "1.6.0");
    assert_eq!(live["mode"], "rpc");
    assert_eq!(live["activeStackId"], Value::Null);
}

#[test]
fn an_active_preset_sends_exactly_what_preview_shows() {
    let ws = lean_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    // What the browser's Activate button sends.
    let (status, body) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(
        (status, &body),
        (200, &json!({"ok": true, "activeId": "project:lean"}))
    );
    let entry = pi.wait("the stack-state entry", |e| e["type"] == "entry_appended");
    assert_eq!(entry["entry"]["customType"], "pi-forge-prompt-stack-state");
    assert_eq!(
        entry["entry"]["data"],
        json!({"activeStackId": "project:lean"})
    );

    let settled = pi.prompt("hello there");
    assert_eq!(settled["aborted"], false, "{:?}", notes(&pi));
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1, "one request to the model");
    let sent = &bodies[0];

    // The same stack and the same live facts through `pi-forge preview`.
    let (_, runtime) = ws.api("GET", "/api/runtime", "");
    let compiled = &ws.preview("project:lean", &runtime, "runtime.json");

    assert_eq!(compiled["systemPrompt"], "You are LEAN. Last: hello there");
    let received = assert_request_is_the_preview(sent, compiled);
    assert_eq!(
        received,
        [
            (
                "user".to_string(),
                format!(
                    "Context note for fake/fake-1 at {}.",
                    runtime_clock_iso(&runtime)
                )
            ),
            ("user".to_string(), "hello there".to_string())
        ]
    );
    let tools = declared_tools(sent);
    assert_eq!(tools, ["read", "grep"]);
    assert_eq!(compiled["selectedTools"], json!(["read", "grep"]));
}

#[test]
fn a_preset_that_does_not_compile_sends_nothing_and_leaves_nothing_behind() {
    let ws = lean_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(status, 200);
    // The file changes on disk while active: its system block now has a template error.
    let broken = LEAN.replace(
        "{{ runtime.lastUserMessage }}",
        "{{ runtime.lastUserMessage",
    );
    std::fs::write(
        ws.project().join(".pi/forge/prompt-stacks/lean.json"),
        broken,
    )
    .unwrap();
    poll(Duration::from_secs(10), || {
        let (_, stack) = ws.api("GET", "/api/stacks/lean", "");
        stack
            .to_string()
            .contains("Last: {{ runtime.lastUserMessage\"")
            .then_some(())
    })
    .expect("the watcher saw the broken file");

    pi.refused("hello there");
    assert_eq!(ws.model.bodies().len(), 0, "nothing reached the model");
    let error = pi
        .seen
        .iter()
        .find(|e| e["method"] == "notify" && e["notifyType"] == "error")
        .expect("Pi showed an error")
        .clone();
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "pi-forge: Preset project:lean did not compile, so nothing was sent to the model: "
        ),
        "{message}"
    );
    // Issue 42, point 2: the refused prompt never entered the conversation, so it does not
    // reach the model with the next one.
    assert_eq!(
        pi.command("/forge preset off"),
        "pi-forge: no Preset active"
    );
    let settled = pi.prompt("the next one");
    assert_eq!(settled["aborted"], false);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1);
    let users: Vec<String> = pi::message_texts(&bodies[0])
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(users, ["the next one"]);
}

#[test]
fn applying_a_profile_switches_model_thinking_and_tools_and_reports_the_clamp() {
    let ws = deep_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    // The profile editor's model list is what Pi has credentials for.
    let (_, collection) = ws.api("GET", "/api/profiles", "");
    assert_eq!(
        collection["models"],
        json!([
            {"provider": "fake", "id": "fake-1", "name": "fake-1"},
            {"provider": "fake", "id": "fake-2", "name": "fake-2"}
        ])
    );
    let (status, body) = ws.api("POST", "/api/profiles/deep/apply", "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["notes"],
        json!(["Thinking level max is not available for fake/fake-2; Pi uses high."])
    );
    assert_eq!(body["applied"]["thinkingLevel"], "high");
    assert_eq!(
        body["changed"],
        json!([
            {"field": "model", "from": {"provider": "fake", "id": "fake-1"}, "to": {"provider": "fake", "id": "fake-2"}},
            {"field": "thinkingLevel", "from": "off", "to": "high"},
            {"field": "promptStack", "from": null, "to": "project:lean"}
        ])
    );
    assert_eq!(body["applied"]["promptStack"], "project:lean");
    assert_eq!(
        body["applied"]["model"],
        json!({"provider": "fake", "id": "fake-2"})
    );

    pi.prompt("go");
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "fake-2");
    assert_eq!(bodies[0]["reasoning_effort"], "high");
    assert_eq!(
        bodies[0]["messages"][0]["content"],
        "You are LEAN. Last: go"
    );

    // The profile is recorded, and a manual change afterwards shows as drift.
    let (_, status_view) = ws.api("GET", "/api/profiles/status", "");
    assert_eq!(status_view["lastApplied"]["sourceState"], "unchanged");
    assert_eq!(status_view["lastApplied"]["drifted"], json!([]));
    pi.send(json!({"type": "set_thinking_level", "level": "low"}));
    let drift = poll(Duration::from_secs(5), || {
        let (_, view) = ws.api("GET", "/api/profiles/status", "");
        (view["lastApplied"]["drifted"] == json!(["thinkingLevel"])).then_some(view)
    })
    .expect("thinking drift reported");
    assert_eq!(
        drift["lastApplied"]["drift"]["thinkingLevel"],
        json!({"expected": "high", "actual": "low", "changed": true})
    );
}

#[test]
fn a_fresh_session_applies_the_auto_activating_profile() {
    let auto = DEEP.replace(r#""id": "deep","#, r#""id": "deep", "autoActivate": true,"#);
    let ws = Workspace::new(&[
        (".pi/forge/prompt-stacks/lean.json", LEAN),
        (".pi/forge/agent-profiles/deep.json", &auto),
    ]);
    let mut pi = ws.pi(&["--no-session"]);
    let recorded = pi.wait("the profile provenance entry", |e| {
        e["type"] == "entry_appended" && e["entry"]["customType"] == "pi-forge-agent-profile-state"
    });
    assert_eq!(recorded["entry"]["data"]["provenance"]["profileId"], "deep");
    assert_eq!(
        recorded["entry"]["data"]["provenance"]["snapshot"],
        json!({"model": {"provider": "fake", "id": "fake-2"}, "thinkingLevel": "high", "promptStack": "project:lean"})
    );
    pi.prompt("auto");
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "fake-2");
    assert_eq!(
        bodies[0]["messages"][0]["content"],
        "You are LEAN. Last: auto"
    );
}

#[test]
fn a_restarted_pi_restores_the_active_preset_from_its_session() {
    let ws = lean_workspace();
    let sessions = ws.root.path().join("sessions").display().to_string();
    let mut pi = ws.pi(&["--session-dir", &sessions]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(status, 200);
    pi.prompt("first");
    pi.quit();
    let (_, live) = ws.api("GET", "/api/live", "");
    assert_eq!(live["connected"], false);

    let mut again = ws.pi(&["--session-dir", &sessions, "--continue"]);
    again.connected();
    let (_, live) = ws.api("GET", "/api/live", "");
    assert_eq!(live["connected"], true);
    assert_eq!(live["activeStackId"], "project:lean");
    again.prompt("second");
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[1]["messages"][0]["content"],
        "You are LEAN. Last: second"
    );
}

#[test]
fn killing_pi_ends_the_live_session_within_five_seconds() {
    let ws = lean_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (_, live) = ws.api("GET", "/api/live", "");
    assert_eq!(live["connected"], true);
    pi.kill();
    let killed = Instant::now();
    poll(Duration::from_secs(5), || {
        let (_, live) = ws.api("GET", "/api/live", "");
        (live == json!({"connected": false})).then_some(())
    })
    .expect("the editor noticed within 5 s");
    let noticed = killed.elapsed();
    assert!(noticed < Duration::from_secs(5), "{noticed:?}");
    let (status, body) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(status, 503);
    assert_eq!(body["code"], "no_live_session");
    assert_eq!(
        body["error"],
        "No live Pi session is connected to this editor. Start Pi in this project with the pi-forge extension loaded (see `pi-forge pi install`), then try again."
    );
}

/// The browser against a live Pi: the indicator, Activate through the session, and "no live
/// session" within 5 s of Pi dying. Also the user guide's screenshot of the live indicator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_activates_in_the_live_session_and_sees_pi_die() {
    let ws = lean_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (_, live) = ws.api("GET", "/api/live", "");
    let session = live["sessionId"].as_str().unwrap().to_string();

    let browser = ws.browser().await;
    browser
        .wait_eq(
            "#live-indicator .live-text",
            &format!("Pi 1.6.0 · fake/fake-1 · session {}", &session[..8]),
        )
        .await;

    // Activate in the editor: Pi records it, and the next prompt uses the Preset.
    browser
        .click(".stack-row[data-selector='project:lean']")
        .await;
    browser.wait_eq(".editor .selector", "project:lean").await;
    browser.wait_status("Loaded lean").await;
    // The editor may re-render once more right after loading; click until Pi has it.
    for _ in 0..5 {
        browser.click(".editor button.activate").await;
        let active = poll(Duration::from_secs(2), || {
            (ws.api("GET", "/api/live", "").1["activeStackId"] == "project:lean").then_some(())
        });
        if active.is_some() {
            break;
        }
    }
    let entry = pi.wait("the stack-state entry", |e| e["type"] == "entry_appended");
    assert_eq!(
        entry["entry"]["data"],
        json!({"activeStackId": "project:lean"})
    );
    assert_eq!(
        ws.api("GET", "/api/live", "").1["activeStackId"],
        "project:lean"
    );
    browser.wait_css(".editor button.deactivate").await;
    browser.screenshot("live-session").await;
    // The connected indicator fits a phone-sized window too.
    browser.viewport(390, 844).await;
    browser.wait_css("#live-indicator[data-live='true']").await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    assert!(browser.in_viewport("#live-indicator").await);
    browser.screenshot("live-session-390").await;
    browser.viewport(1280, 900).await;
    pi.prompt("hello there");
    assert_eq!(
        ws.model.bodies()[0]["messages"][0]["content"],
        "You are LEAN. Last: hello there"
    );

    // Pi dies: the indicator says so within 5 s, and Activate is off and says why.
    pi.kill();
    let killed = Instant::now();
    browser.wait_css("#live-indicator[data-live='false']").await;
    let noticed = killed.elapsed();
    assert!(
        noticed < Duration::from_secs(5),
        "noticed after {noticed:?}"
    );
    browser.wait_count(".badge.active", 0).await;
    browser.wait_css(".editor #activate-note").await;
    assert!(!browser.enabled(".editor button.activate").await);
    assert_eq!(browser.console_errors().await, Vec::<String>::new());
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}

/// Apply in the browser: the next request uses the profile's model, thinking level and tools,
/// and the clamped thinking level is reported where the user clicked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_applies_a_profile_and_reports_the_clamp() {
    let ws = deep_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let browser = ws.browser().await;
    browser.click_text(".surface-tab", "Profiles").await;
    browser
        .click(".profile-row[data-selector='project:deep']")
        .await;
    browser.wait_css("button.apply:not([disabled])").await;
    browser.click("button.apply").await;
    browser.wait_css(".apply-result").await;
    assert_eq!(
        browser
            .text(".apply-result .applied-thinking")
            .await
            .as_deref(),
        Some("high")
    );
    assert_eq!(
        browser
            .text(".apply-result .apply-notes li")
            .await
            .as_deref(),
        Some("Thinking level max is not available for fake/fake-2; Pi uses high.")
    );
    assert_eq!(
        browser
            .text(".apply-result .applied-tools")
            .await
            .as_deref(),
        Some("read, grep")
    );
    pi.prompt("go");
    let sent = &ws.model.bodies()[0];
    assert_eq!(sent["model"], "fake-2");
    assert_eq!(sent["reasoning_effort"], "high");
    let tools = declared_tools(sent);
    assert_eq!(tools, ["read", "grep"]);
    browser.assert_no_errors().await;
    browser.close().await;
}

/// `/forge profile`, `/forge preset` and `/forge status` typed in Pi (RPC prompts).
#[test]
fn forge_commands_apply_a_profile_switch_presets_and_report_status() {
    let ws = deep_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    assert_eq!(
        pi.command("/forge profile deep"),
        "pi-forge: profile deep applied\nmodel: fake/fake-1 → fake/fake-2\nthinkingLevel: off → high\npromptStack: none → project:lean\nThinking level max is not available for fake/fake-2; Pi uses high."
    );
    assert_eq!(
        pi.command("/forge preset off"),
        "pi-forge: no Preset active"
    );
    let (authority, _) = ws.editor().unwrap();
    assert_eq!(
        pi.command("/forge status"),
        format!("pi-forge: server http://{authority} · Preset none · profile deep (changed since: promptStack) · extension {v}, server {v} · binary {bin} (PI_FORGE_BIN)",
                v = env!("CARGO_PKG_VERSION"), bin = support::pi_forge_binary().display())
    );
    assert_eq!(
        pi.command("/forge preset lean"),
        "pi-forge: Preset project:lean active"
    );
    assert_eq!(
        pi.command("/forge preset nope"),
        "pi-forge: Unknown prompt stack: nope"
    );
    assert_eq!(
        pi.command("/forge bogus"),
        "usage: /forge ui [stop|restart] | status | preset <id>|off | profile <id> | payload next [save]|clear|on|off | agent plan|run|runs|result|cancel"
    );
}

/// Issue 42, point 4: a session whose editor another session takes over with `/forge ui
/// restart` is told at once (the stopping server's notice on its command stream), not at its
/// next prompt; `/forge ui` there then names the session that has the editor.
#[test]
fn a_session_whose_editor_is_taken_over_is_told_at_once() {
    let ws = lean_workspace();
    let mut first = ws.pi(&["--no-session"]);
    first.connected();
    let (_, live) = ws.api("GET", "/api/live", "");
    let first_session = live["sessionId"].as_str().unwrap().to_string();
    let mut second = ws.pi(&["--no-session"]);
    let busy = second.wait("the busy notice", |e| e["method"] == "notify");
    assert_eq!(
        busy["message"],
        format!("pi-forge: could not connect to the editor server: Another Pi session ({first_session}) is already connected to this project's editor. Use `/forge ui restart` in this session to take over.")
    );
    let note = second.command("/forge ui restart");
    let (authority, _) = ws.editor().expect("the restarted editor");
    assert_eq!(
        note,
        format!("pi-forge editor: http://{authority}/ (opened in your browser)")
    );
    let told = first.wait("the notice", |e| e["method"] == "notify")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        told,
        "pi-forge: the editor server stopped (`pi-forge ui stop`, or `/forge ui restart` here or in another session, which then has it), so this session is disconnected: /forge ui connects again or names the session that has the editor, and a Preset recorded here refuses prompts until it connects again."
    );
    let (_, live) = ws.api("GET", "/api/live", "");
    let second_session = live["sessionId"].as_str().unwrap().to_string();
    assert_ne!(second_session, first_session);
    assert_eq!(
        first.command("/forge ui"),
        format!("pi-forge: Another Pi session ({second_session}) is already connected to this project's editor. Use `/forge ui restart` in this session to take over.")
    );
}

/// Issue 42, point 3: while the project's editor has a live Pi session, `pi-forge preview`
/// compiles against that session's runtime (Pi's real tools, model and clock) and says so:
/// exactly what `--runtime <the editor's live snapshot>` gives, which is what Pi sends. The
/// request after a prompt is that preview; `--no-live` keeps the stand-in.
#[test]
fn preview_uses_the_live_session_by_default() {
    let ws = lean_workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(status, 200);
    pi.wait("the stack-state entry", |e| e["type"] == "entry_appended");
    let settled = pi.prompt("hello there");
    assert_eq!(settled["aborted"], false, "{:?}", notes(&pi));
    let sent = ws.model.bodies()[0].clone();

    let (_, runtime) = ws.api("GET", "/api/runtime", "");
    assert_eq!(runtime["live"], true);
    let by_file = ws.preview("project:lean", &runtime, "runtime.json");
    let out = ws.forge(&["preview", "project:lean", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(live["runtimeSource"], "live");
    assert_eq!(live["liveRuntime"], true);
    assert_eq!(live["compiled"], by_file);
    assert_request_is_the_preview(&sent, &live["compiled"]);

    let (authority, _) = ws.editor().unwrap();
    let port = authority.rsplit(':').next().unwrap();
    let tools = runtime["tools"].as_array().unwrap().len();
    let out = ws.forge(&["preview", "project:lean"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().next().unwrap(),
        format!("(Live Pi session: using its runtime from the editor on port {port}, model fake/fake-1, {tools} tools. Pass --no-live for the stand-in.)")
    );

    let out = ws.forge(&["preview", "project:lean", "--no-live", "--json"]);
    let stand_in: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stand_in["runtimeSource"], "stand-in");
    assert_eq!(stand_in["liveRuntime"], false);
}
