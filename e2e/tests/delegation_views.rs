//! The Delegation surface against a real Pi 1.6.0 and a fake model: the parent's model calls
//! `forge_subagent` twice, both plans appear in the browser without a reload, the full prompt
//! shows the exact system prompt and messages, one plan is approved with the keyboard only, a
//! plan whose Preset changed on disk answers 409 and keeps its card, the other is rejected, and
//! the Runs view shows the verified answer. At 390 px nothing sticks out sideways. A 200-message
//! plan's full prompt renders every message. Also the user guide's screenshots.

mod pi;
mod support;

use std::time::{Duration, Instant};

use fantoccini::key::Key;
use pi::delegation::{parent_session_with, CHILD, PARENT, REVIEWER, SETTINGS};
use pi::Workspace;
use serde_json::{json, Value};
use support::Browser;

/// `[[dt, dd], …]` of the plan card for `run`.
async fn facts(browser: &Browser, run: &str) -> Vec<(String, String)> {
    let v = browser
        .js(
            "const card = document.querySelector(`.plan-card[data-run=\"${arguments[0]}\"]`); \
             return [...card.querySelectorAll('.plan-facts dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent]);",
            vec![json!(run)],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(css)],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

/// The class and the card's run id of the focused element.
async fn focused(browser: &Browser) -> (String, String) {
    let v = browser
        .js(
            "const e = document.activeElement; const card = e && e.closest('.plan-card'); \
             return [e ? e.className : '', card ? card.dataset.run : ''];",
            vec![],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

fn card(run: &str, part: &str) -> String {
    format!(".plan-card[data-run=\"{run}\"] {part}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_appear_live_are_reviewed_approved_by_keyboard_rejected_and_the_run_shows_its_answer()
{
    let (ws, mut pi) = parent_session_with(PARENT, SETTINGS);

    let browser = ws.browser().await;
    browser.click_text(".surface-tab", "Delegation").await;
    browser
        .wait_eq(".plans-empty", "No plan is waiting for approval.")
        .await;
    // The empty state says how a plan is made (issue 41, point 9).
    browser
        .wait_eq(".plans-how", "A plan is made when the model calls forge_subagent (a Preset must allow that tool), with /forge agent plan|run <profile> <task> in Pi, or with pi-forge agent plan|run in a terminal. Which profiles may be delegated to is set in .pi/forge/subagents.json.")
        .await;

    ws.model.call_tools(&[
        (
            "forge_subagent",
            json!({"profile": "reviewer", "task": "Review src/a.rs"}),
        ),
        (
            "forge_subagent",
            json!({"profile": "reviewer", "task": "Review src/b.rs"}),
        ),
    ]);
    pi.send(json!({"type": "prompt", "message": "delegate both"}));
    // Both plans arrive through the event stream, without a reload.
    browser.wait_count(".plan-card", 2).await;
    browser.wait_eq(".surface-tab .pending-plans", "2").await;
    let (_, list) = ws.api("GET", "/api/agent/plans", "");
    let plans = list["plans"].as_array().unwrap().clone();
    let by_task = |task: &str| -> Value {
        plans
            .iter()
            .find(|p| p["task"] == task)
            .unwrap_or_else(|| panic!("no plan for {task}: {list}"))
            .clone()
    };
    let a = by_task("Review src/a.rs");
    let b = by_task("Review src/b.rs");
    let run_a = a["runId"].as_str().unwrap().to_string();
    let run_b = b["runId"].as_str().unwrap().to_string();
    let fp_a = a["executionFingerprint"].as_str().unwrap().to_string();
    assert_eq!(
        texts(&browser, ".plan-card .plan-task").await,
        plans
            .iter()
            .map(|p| p["task"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    );
    let short = |fp: &str| {
        let (prefix, hex) = fp.rsplit_once(':').unwrap();
        format!("{prefix}:{}…", &hex[..12])
    };
    assert_eq!(
        facts(&browser, &run_a).await,
        [
            ("Profile", a["profileId"].as_str().unwrap().to_string()),
            ("Preset", a["promptStackId"].as_str().unwrap().to_string()),
            ("Model", "fake/fake-1".into()),
            ("Thinking", "off".into()),
            ("Tools", "read, grep".into()),
            ("Working directory", ".".into()),
            ("Boundary", "shared user, not an OS sandbox".into()),
            (
                "Payload",
                format!(
                    "{} B · 2 messages · system prompt 23 characters",
                    a["payloadBytes"]
                )
            ),
            ("Execution fingerprint", short(&fp_a)),
            (
                "Conversation fingerprint",
                short(a["conversationFingerprint"].as_str().unwrap())
            ),
            ("Run", run_a.clone()),
        ]
        .map(|(k, v)| (k.to_string(), v))
    );
    let title = browser
        .js(
            "return document.querySelector(arguments[0]).title;",
            vec![json!(card(&run_a, ".plan-execution-fp"))],
        )
        .await;
    assert_eq!(title, json!(fp_a));
    // The safe choice has the focus.
    assert_eq!(
        focused(&browser).await,
        (
            "plan-reject".to_string(),
            plans[0]["runId"].as_str().unwrap().to_string()
        )
    );

    // At 390 px the cards fit, and the surface menu's button carries the count.
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    assert_eq!(
        browser
            .text(".surface-menu-toggle .pending-plans")
            .await
            .as_deref(),
        Some("2")
    );
    browser.screenshot("delegation-plans-390").await;
    browser.viewport(1280, 900).await;
    browser.screenshot("delegation-plans").await;

    // The full prompt: the exact system prompt and every message, searchable.
    // Two plan cards on screen: nothing serious for assistive technology (axe-core).
    assert_eq!(browser.axe().await, Vec::<String>::new());
    browser.click(&card(&run_a, ".plan-view-full")).await;
    browser
        .wait_eq(".system-prompt-text", "You are CHILD REVIEWER.")
        .await;
    assert_eq!(browser.axe().await, Vec::<String>::new());
    browser.wait_count(".prompt-message", 2).await;
    assert_eq!(
        texts(&browser, ".prompt-message .prompt-text").await,
        ["Be brief.", "Review src/a.rs"]
    );
    assert_eq!(
        texts(&browser, ".prompt-message .prompt-role").await,
        ["[0] user · prompt-stack", "[1] user · delegated-task"]
    );
    browser.fill(".full-prompt-search", "brief").await;
    browser
        .wait_eq(".full-prompt-matches", "1 of 2 messages match")
        .await;
    assert_eq!(browser.count(".prompt-message:not(.hidden)").await, 1);
    browser.fill(".full-prompt-search", "").await;
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    browser.viewport(1280, 900).await;
    browser.screenshot("delegation-full-prompt").await;
    browser.press(&Key::Escape).await;
    browser.wait_count(".full-prompt", 0).await;

    // Keyboard only: the focus is back on the card's "View full prompt"; Tab, Tab, Enter.
    browser
        .wait_js(
            "focus back on View full prompt",
            "return document.activeElement.className;",
            json!("plan-view-full"),
        )
        .await;
    browser.press(&Key::Tab).await;
    assert_eq!(
        focused(&browser).await,
        ("plan-reject".to_string(), run_a.clone())
    );
    browser.press(&Key::Tab).await;
    assert_eq!(
        focused(&browser).await,
        ("plan-approve primary".to_string(), run_a.clone())
    );
    browser.press(&Key::Enter).await;
    browser
        .wait_status("Approved \"Review src/a.rs\": the subagent runs now.")
        .await;
    browser.wait_count(".plan-card", 1).await;
    // The approved run ends before the other plan is decided.
    pi::poll(Duration::from_secs(30), || {
        let (_, runs) = ws.api("GET", "/api/agent/runs", "");
        (runs["runs"].as_array().map_or(0, Vec::len) == 1).then_some(())
    })
    .expect("the approved run is kept");

    // A plan whose Preset changed on disk since sealing cannot be approved: 409, the card stays.
    let child = ws.project().join(".pi/forge/prompt-stacks/child.json");
    std::fs::write(&child, CHILD.replace("Be brief.", "Be very brief.")).unwrap();
    pi::poll(Duration::from_secs(10), || {
        let (_, stack) = ws.api("GET", "/api/stacks/child", "");
        stack.to_string().contains("Be very brief.").then_some(())
    })
    .expect("the editor reloads the changed Preset");
    browser.click(&card(&run_b, ".plan-approve")).await;
    browser.wait_css(&card(&run_b, ".plan-error")).await;
    let error = browser.text(&card(&run_b, ".plan-error")).await.unwrap();
    assert!(
        error.starts_with(&format!(
            "The approved execution fingerprint {} does not match the current plan (",
            b["executionFingerprint"].as_str().unwrap()
        )),
        "{error}"
    );
    assert!(error.ends_with("): prepare it again."), "{error}");
    assert_eq!(browser.count(".plan-card").await, 1);
    browser.click(&card(&run_b, ".plan-reject")).await;
    browser
        .wait_status("Rejected \"Review src/b.rs\": nothing was sent.")
        .await;
    browser
        .wait_eq(".plans-empty", "No plan is waiting for approval.")
        .await;
    let settled = pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    assert_eq!(settled["aborted"], false);

    // The Runs view: the completed run with its receipt, usage and verified answer.
    browser.click_text(".delegation-tab", "Runs").await;
    browser
        .wait_count(".run-row[data-status='completed']", 1)
        .await;
    assert_eq!(browser.count(".run-row").await, 1);
    let row = format!(".run-row[data-run=\"{run_a}\"]");
    assert_eq!(
        browser.text(&format!("{row} .run-profile")).await.unwrap(),
        a["profileId"].as_str().unwrap()
    );
    let model = browser.text(&format!("{row} .run-model")).await.unwrap();
    assert!(model.starts_with("fake/fake-1 · thinking "), "{model}");
    assert_eq!(
        browser.text(&format!("{row} .run-usage")).await.unwrap(),
        "10 input / 3 output tokens"
    );
    assert_eq!(
        browser.text(&format!("{row} .run-receipt")).await.unwrap(),
        "approved by human from web · full prompt viewed"
    );
    let duration = browser.text(&format!("{row} .run-duration")).await.unwrap();
    assert!(duration.ends_with(" ms"), "{duration}");
    browser.click(&format!("{row} .run-toggle")).await;
    browser
        .wait_eq(&format!("{row} .run-answer"), "ok from fake")
        .await;
    // What the child did, and the prompt the person approved.
    assert_eq!(
        browser.text(&format!("{row} .run-counts")).await.unwrap(),
        "1 model request · 0 tool calls"
    );
    browser
        .click(&format!("{row} .run-transcript summary"))
        .await;
    assert_eq!(
        texts(&browser, &format!("{row} .transcript-step")).await,
        vec!["assistantok from fake".to_string()]
    );
    browser.click(&format!("{row} .run-view-prompt")).await;
    browser
        .wait_eq("#full-prompt-title", &format!("Approved prompt: {run_a}"))
        .await;
    let prompt = texts(&browser, ".prompt-message .prompt-text").await;
    assert_eq!(prompt.last().map(String::as_str), Some("Review src/a.rs"));
    assert_eq!(
        browser.text(".system-prompt-text").await.unwrap(),
        "You are CHILD REVIEWER."
    );
    browser.press(&Key::Escape).await;
    browser.wait_count(".full-prompt", 0).await;
    // Focus goes back to the button in a later frame (`focus_later`), not with the close.
    browser
        .wait_js(
            "focus back on the run's View prompt button",
            "const e = document.activeElement; return e ? e.className : '';",
            json!("run-view-prompt"),
        )
        .await;
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    browser.screenshot("delegation-runs-390").await;
    browser.viewport(1280, 900).await;
    browser.screenshot("delegation-runs").await;
    assert_eq!(browser.axe().await, Vec::<String>::new());
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
    pi.quit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_prompt_of_a_200_message_plan_shows_every_message() {
    // 199 user blocks and the task: 200 messages.
    let items: Vec<Value> = std::iter::once(json!({
        "id": "sys", "kind": "block", "role": "system", "content": "You are MANY."
    }))
    .chain((1..=199).map(|i| {
        json!({"id": format!("n{i}"), "kind": "block", "role": "user", "content": format!("Note {i}.")})
    }))
    .collect();
    let many = json!({
        "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "child", "mode": "replace",
        "tools": {"allow": ["read"]}, "items": items,
    })
    .to_string();
    let ws = Workspace::new(&[
        (".pi/forge/prompt-stacks/child.json", &many),
        (".pi/forge/prompt-stacks/parent.json", PARENT),
        (".pi/forge/agent-profiles/reviewer.json", REVIEWER),
        (".pi/forge/subagents.json", SETTINGS),
    ]);
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/parent/activate", "{}");
    assert_eq!(status, 200);
    let browser = ws.browser().await;
    browser.click_text(".surface-tab", "Delegation").await;
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review everything"}),
    );
    pi.send(json!({"type": "prompt", "message": "delegate"}));
    browser.wait_count(".plan-card", 1).await;
    let started = Instant::now();
    browser.click(".plan-view-full").await;
    browser.wait_count(".prompt-message", 200).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the full prompt took {took:?}"
    );
    let all = texts(&browser, ".prompt-message .prompt-text").await;
    assert_eq!(all.len(), 200);
    assert_eq!(all[0], "Note 1.");
    assert_eq!(all[198], "Note 199.");
    assert_eq!(all[199], "Review everything");
    // Searching 200 messages stays quick.
    browser.fill(".full-prompt-search", "note 19").await;
    browser
        .wait_eq(".full-prompt-matches", "11 of 200 messages match")
        .await;
    browser.press(&Key::Escape).await;
    browser.click(".plan-reject").await;
    browser
        .wait_eq(".plans-empty", "No plan is waiting for approval.")
        .await;
    pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    browser.close().await;
    pi.quit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_is_cancelled_from_the_runs_view() {
    let (ws, mut pi) = parent_session_with(PARENT, SETTINGS);
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/slow.rs", "background": true}),
    );
    ws.model.answer("delegated");
    pi.prompt("delegate it in the background");
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    let plan = plans["plans"][0].clone();
    let run = plan["runId"].as_str().unwrap().to_string();
    ws.model.hang(60);
    let before = ws.model.bodies().len();
    let browser = ws.browser().await;
    browser.click_text(".surface-tab", "Delegation").await;
    browser.click_text(".delegation-tab", "Runs").await;
    let (status, body) = ws.api(
        "POST",
        &format!("/api/agent/plans/{run}/approve"),
        &json!({"executionFingerprint": plan["executionFingerprint"], "viewedFullPrompt": false})
            .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    // The run shows up as running without a reload, with a Cancel button.
    let row = format!(".run-row[data-run=\"{run}\"]");
    browser
        .wait_count(&format!("{row}[data-status='running']"), 1)
        .await;
    let label = browser
        .js(
            "return document.querySelector(arguments[0]).getAttribute('aria-label');",
            vec![json!(format!("{row} .run-cancel"))],
        )
        .await;
    assert_eq!(label, json!(format!("Cancel run {run} (project:reviewer)")));
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    browser.viewport(1280, 900).await;
    // Cancel once the child's request hangs at the model (the child is really running).
    pi::poll(Duration::from_secs(30), || {
        (ws.model.bodies().len() > before).then_some(())
    })
    .expect("the child asks the model");
    browser.click(&format!("{row} .run-cancel")).await;
    browser
        .wait_count(&format!("{row}[data-status='cancelled']"), 1)
        .await;
    assert_eq!(browser.count(&format!("{row} .run-cancel")).await, 0);
    browser.click(&format!("{row} .run-toggle")).await;
    browser
        .wait_eq(
            &format!("{row} .run-detail .banner.error"),
            "Cancelled by a person before the run finished; its process group was killed.",
        )
        .await;
    pi.wait("the parent hears about it", |e| {
        e["type"] == "agent_settled"
    });
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
    pi.quit();
}
