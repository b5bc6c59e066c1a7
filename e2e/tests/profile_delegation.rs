//! The profile view's Delegation card: enabling a profile for delegation with a timeout writes
//! exactly the expected `subagents.json` (every other key kept) and `/api/agent/profiles` lists
//! it; disabling; an invalid timeout blocks Save; a concurrent edit on disk makes Save a
//! conflict that keeps the other writer's file; keyboard-only operation. At 1280 and 390 px.

mod support;

use serde_json::{json, Value};
use support::{pretty, Browser, Server};

const SETTINGS: &str = "project/.pi/forge/subagents.json";

fn stack() -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "default",
        "name": "Default",
        "items": [
            { "kind": "block", "id": "1", "role": "system", "content": "You are careful." }
        ]
    }))
}

fn profile() -> String {
    pretty(&json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": "scout",
        "name": "Scout",
        "model": { "provider": "test", "id": "current" },
        "thinkingLevel": "low",
        "promptStack": "default"
    }))
}

/// The seeded settings: another profile's entry and keys the card must keep.
fn seeded() -> Value {
    json!({
        "backend": "pi-subprocess-readonly",
        "profiles": {
            "other": {"enabled": true, "backend": "pi-subprocess-readonly"}
        },
        "note": "keep me"
    })
}

fn with_scout(entry: Value) -> Value {
    let mut v = seeded();
    v["profiles"]["scout"] = entry;
    v
}

fn start() -> Server {
    Server::start_with(
        &[
            ("project/.pi/forge/prompt-stacks/default.json", &stack()),
            ("project/.pi/forge/agent-profiles/scout.json", &profile()),
            (SETTINGS, &pretty(&seeded())),
        ],
        &[],
    )
}

async fn open(server: &Server, width: u32) -> Browser {
    let browser = Browser::start().await;
    browser.viewport(width, 900).await;
    browser.open(server).await;
    browser.wait_css(".surface-tab").await;
    browser.click_text(".surface-tab", "Profiles").await;
    browser.wait_css(".profiles").await;
    browser
        .wait_eq(".delegation-card .delegation-state", "not enabled")
        .await;
    browser
}

/// The ids `/api/agent/profiles` lists.
fn listed(server: &Server) -> Vec<String> {
    let (status, body) = server.api("GET", "/api/agent/profiles", None, None);
    assert_eq!(status, 200, "{body}");
    body["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profileId"].as_str().unwrap().to_string())
        .collect()
}

async fn no_overflow(browser: &Browser, width: u32) {
    assert_eq!(
        browser.horizontal_overflow().await,
        Vec::<String>::new(),
        "nothing sticks out sideways at {width} px"
    );
}

async fn enable_and_disable(width: u32) {
    let server = start();
    let browser = open(&server, width).await;
    assert_eq!(
        browser.text(".delegation-timeout-value").await.as_deref(),
        Some("60 s (inherited: the default)")
    );
    assert_eq!(
        browser.text(".delegation-approval").await.as_deref(),
        Some("required: a person approves each run")
    );
    let path = server.path(SETTINGS).display().to_string();
    assert_eq!(
        browser.text(".delegation-file").await,
        Some(format!("{path} (no entry yet)"))
    );
    assert!(
        !browser.enabled(".save-delegation").await,
        "nothing to save yet"
    );
    no_overflow(&browser, width).await;

    // An invalid timeout shows inline and disables Save.
    browser.click("input[name=delegation-enabled]").await;
    for bad in ["0", "3601", "abc"] {
        browser.fill("input[name=delegation-timeout]", bad).await;
        browser
            .wait_eq(
                ".delegation-timeout-error",
                "Enter whole or decimal seconds from 1 to 3600, or leave it blank to inherit.",
            )
            .await;
        assert!(
            !browser.enabled(".save-delegation").await,
            "{bad} blocks Save"
        );
    }
    no_overflow(&browser, width).await;

    // Enable with 120 s.
    browser.fill("input[name=delegation-timeout]", "120").await;
    assert_eq!(browser.count(".delegation-timeout-error").await, 0);
    assert!(browser.enabled(".save-delegation").await);
    browser.click(".save-delegation").await;
    browser
        .wait_eq(
            ".delegation-card .delegation-state",
            "enabled: this profile can run delegated tasks",
        )
        .await;
    browser.wait_status("Delegation settings saved").await;
    assert_eq!(
        server.read(SETTINGS),
        pretty(&with_scout(json!({"enabled": true, "timeoutMs": 120000})))
    );
    assert_eq!(listed(&server), vec!["project:scout".to_string()]);
    assert_eq!(
        browser.text(".delegation-timeout-value").await.as_deref(),
        Some("120 s (this profile's entry)")
    );
    assert_eq!(
        browser.text(".delegation-file").await,
        Some(format!("{path} (entry scout)"))
    );
    assert_eq!(browser.value("input[name=delegation-timeout]").await, "120");
    assert!(
        !browser.enabled(".save-delegation").await,
        "saved: clean again"
    );
    no_overflow(&browser, width).await;

    // Disable, inheriting the timeout again.
    browser.click("input[name=delegation-enabled]").await;
    browser.fill("input[name=delegation-timeout]", "").await;
    browser.click(".save-delegation").await;
    browser
        .wait_eq(".delegation-card .delegation-state", "not enabled")
        .await;
    assert_eq!(
        server.read(SETTINGS),
        pretty(&with_scout(json!({"enabled": false})))
    );
    assert_eq!(listed(&server), Vec::<String>::new());
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabling_and_disabling_delegation_writes_the_file_at_1280() {
    enable_and_disable(1280).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabling_and_disabling_delegation_writes_the_file_at_390() {
    enable_and_disable(390).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_edit_on_disk_is_a_conflict_that_overwrites_nothing() {
    let server = start();
    let browser = open(&server, 1280).await;
    // Another writer changes the file after the browser read it.
    let theirs = pretty(&with_scout(json!({"enabled": true, "timeoutMs": 30000})));
    server.write_external(SETTINGS, &theirs);
    browser.click("input[name=delegation-enabled]").await;
    browser.fill("input[name=delegation-timeout]", "45").await;
    browser.click(".save-delegation").await;
    browser
        .wait_eq(
            ".delegation-conflict span",
            "Not saved: subagents.json changed on disk since it was read. Nothing was overwritten; reload to see the current settings.",
        )
        .await;
    browser
        .expect_failed_requests(&server, &["/api/agent/settings/project 409 (Conflict)"])
        .await;
    assert_eq!(server.read(SETTINGS), theirs);
    assert!(
        !browser.enabled(".save-delegation").await,
        "no second try before a reload"
    );

    // Reload shows the other writer's settings; a save from there works.
    browser.click(".reload-delegation").await;
    browser.wait_count(".delegation-conflict", 0).await;
    browser
        .wait_eq(
            ".delegation-card .delegation-state",
            "enabled: this profile can run delegated tasks",
        )
        .await;
    assert_eq!(
        browser.text(".delegation-timeout-value").await.as_deref(),
        Some("30 s (this profile's entry)")
    );
    assert_eq!(browser.value("input[name=delegation-timeout]").await, "30");
    browser.fill("input[name=delegation-timeout]", "45").await;
    browser.click(".save-delegation").await;
    browser
        .wait_eq(".delegation-timeout-value", "45 s (this profile's entry)")
        .await;
    assert_eq!(
        server.read(SETTINGS),
        pretty(&with_scout(json!({"enabled": true, "timeoutMs": 45000})))
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

async fn focused_name(browser: &Browser) -> Value {
    browser
        .js(
            "const e = document.activeElement; return e ? (e.getAttribute('name') || e.className) : '';",
            vec![],
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_is_operable_with_the_keyboard_only() {
    use fantoccini::key::Key;
    let server = start();
    let browser = open(&server, 390).await;
    // The controls are labelled.
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.delegation-card input')].map(e => e.closest('label').textContent.trim());",
                vec![],
            )
            .await,
        json!(["Allow delegation", "Timeout (seconds)1–3600; blank inherits the file's timeout, else 60 s."])
    );
    browser
        .js(
            "document.querySelector('input[name=delegation-enabled]').focus(); return true;",
            vec![],
        )
        .await;
    browser.press(" ").await;
    browser
        .wait_js(
            "checkbox checked",
            "return document.querySelector('input[name=delegation-enabled]').checked;",
            json!(true),
        )
        .await;
    browser.press(&Key::Tab).await;
    assert_eq!(focused_name(&browser).await, json!("delegation-timeout"));
    browser.press("90").await;
    browser.press(&Key::Tab).await;
    assert_eq!(
        focused_name(&browser).await,
        json!("primary save-delegation")
    );
    browser.press(&Key::Enter).await;
    browser
        .wait_eq(".delegation-timeout-value", "90 s (this profile's entry)")
        .await;
    assert_eq!(
        server.read(SETTINGS),
        pretty(&with_scout(json!({"enabled": true, "timeoutMs": 90000})))
    );
    assert_eq!(listed(&server), vec!["project:scout".to_string()]);
    no_overflow(&browser, 390).await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_json_is_never_replaced() {
    let server = Server::start_with(
        &[
            (
                "project/.pi/forge/prompt-stacks/default.json",
                stack().as_str(),
            ),
            (
                "project/.pi/forge/agent-profiles/scout.json",
                profile().as_str(),
            ),
            (SETTINGS, "{not json"),
        ],
        &[],
    );
    let browser = open(&server, 1280).await;
    let path = server.path(SETTINGS).display().to_string();
    browser
        .wait_eq(
            ".delegation-locked",
            &format!("{path} does not hold a JSON object; fix it in a text editor first (see its diagnostics)."),
        )
        .await;
    assert!(!browser.enabled("input[name=delegation-enabled]").await);
    assert!(!browser.enabled("input[name=delegation-timeout]").await);
    assert!(!browser.enabled(".save-delegation").await);
    assert_eq!(server.read(SETTINGS), "{not json");
    browser.assert_no_errors().await;
    browser.close().await;
}
