//! The Session surface against a real Pi 1.6.0 (RPC mode, fake model): the panel follows the
//! live session's capability state through the `capability-state` event (no reload, no
//! polling), Deactivate and Reset all act with the guard the page saw, a stale guard gets the
//! server's 409 message, and the layout fits 390 px in both themes.
//!
//! The panel's exact texts come from `web/src/session_text.rs`, included here so its unit tests
//! run on the host too (forge-web itself only builds for wasm32).

mod pi;
mod support;

#[path = "../../web/src/session_text.rs"]
mod session_text;

use std::time::{Duration, Instant};

use forge_core::capability::view::GUARD_CHANGED_MESSAGE;
use pi::Workspace;
use serde_json::{json, Value};
use support::{Browser, Server, WAIT};

const REVIEW: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "review",
  "name": "Review",
  "content": "List findings, evidence and risks.\n<b>Do not</b> directly edit files.",
  "tools": { "add": ["grep"], "remove": ["bash"] }
}
"#;

const FRENCH: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "french",
  "content": "Answer in French.",
  "tools": { "add": [], "remove": [] }
}
"#;

const LONG: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "a-capability-with-a-rather-long-identifier-that-must-wrap",
  "name": "Averyveryverylongcapabilitynamewithoutanyspacesatallthatmustwrapsomewhere",
  "content": "Averyveryverylongwordwithoutanyspacesatallthatmustwrapinsidethecardandneverpushthepagesideways. And a second sentence.",
  "tools": { "add": ["find", "ls"], "remove": ["write"] }
}
"#;

/// A Preset binding `review` (as `rev`, with a note added) and `french`.
const BOUND: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "bound",
  "mode": "replace",
  "capabilities": [
    { "ref": "review", "id": "rev", "modelCallable": true },
    { "ref": "french", "id": "fr" }
  ],
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are BOUND." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

fn workspace() -> Workspace {
    Workspace::new(&[
        (".pi/forge/prompt-stacks/bound.json", BOUND),
        (".pi/forge/capabilities/review.json", REVIEW),
        (".pi/forge/capabilities/french.json", FRENCH),
        (
            ".pi/forge/capabilities/a-capability-with-a-rather-long-identifier-that-must-wrap.json",
            LONG,
        ),
    ])
}

/// What the picker would send, done through the API: `GET available`, then `POST enable` with
/// that answer's guard and the choice's fingerprint. Returns the new state.
fn enable(ws: &Workspace, id: &str) -> Value {
    let (status, available) = ws.api("GET", "/api/capability-state/available", "");
    assert_eq!(status, 200, "{available}");
    let choice = available["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no choice {id} in {available}"))
        .clone();
    let body = json!({
        "guard": available["state"]["guard"],
        "kind": choice["kind"],
        "id": id,
        "fingerprint": choice["fingerprint"],
    });
    let (status, answer) = ws.api("POST", "/api/capability-state/enable", &body.to_string());
    assert_eq!(status, 200, "{answer}");
    answer["state"].clone()
}

/// The activation id of the active capability from `source`.
fn activation_of(state: &Value, source: &str) -> String {
    state["active"]
        .as_array()
        .expect("active")
        .iter()
        .find(|a| a["source"] == source)
        .and_then(|a| a["activationId"].as_str())
        .unwrap_or_else(|| panic!("{source} is not active: {state}"))
        .to_string()
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

/// Opens the Session surface and waits for the live panel.
async fn open_session(browser: &Browser) {
    browser.click("#surface-session").await;
    browser.wait_css("#session-panel .session-summary").await;
}

/// Waits until the picker offers `value` (the catalog was loaded).
async fn wait_choice(browser: &Browser, value: &str) {
    browser
        .wait_css(&format!("#capability-picker option[value='{value}']"))
        .await;
}

/// Picks `value` in the picker the way a user does (a `change` event).
async fn pick(browser: &Browser, value: &str) {
    wait_choice(browser, value).await;
    browser.fill("#capability-picker", value).await;
    browser.wait_css("#capability-preview").await;
}

/// Console errors since the last call, each as `"<path> <status>"` for a failed request.
async fn failed_requests(browser: &Browser, n: usize) -> Vec<String> {
    let mut got: Vec<String> = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        for m in browser.console_errors().await {
            let m = match m
                .split_once(" - Failed to load resource: the server responded with a status of ")
            {
                Some((url, status)) => {
                    let path = url.find("/api/").map_or(url, |i| &url[i..]);
                    format!("{path} {status}")
                }
                None => m,
            };
            got.push(m);
        }
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_follows_an_enable_through_the_api_without_reload() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let browser = ws.browser().await;
    // The top bar's summary (every surface) opens the Session surface.
    browser.wait_eq("#session-badge", "0 active").await;
    browser.click("#session-badge").await;
    browser.wait_css("#session-panel .session-summary").await;
    browser
        .wait_eq(".session-summary .active-count", "0 active")
        .await;
    assert_eq!(
        browser.text(".session-empty-active").await.as_deref(),
        Some("No capability is active in this session.")
    );
    wait_choice(&browser, "capability:project:review").await;
    assert_eq!(
        texts(&browser, "#capability-picker optgroup").await.len(),
        1,
        "no Preset is active: only the library group"
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector('#capability-picker optgroup').label;",
                vec![]
            )
            .await,
        json!("Library (unbound)")
    );
    // A marker that a reload would lose.
    browser
        .js("window.__sessionMarker = 42; return true;", vec![])
        .await;

    let state = enable(&ws, "project:review");
    let id = activation_of(&state, "project:review");
    let card = format!(".active-card[data-activation-id='{id}']");
    browser.wait_css(&card).await;
    browser
        .wait_eq(".session-summary .active-count", "1 active")
        .await;
    assert_eq!(
        browser
            .text(&format!("{card} .active-name"))
            .await
            .as_deref(),
        Some("Review")
    );
    assert_eq!(
        browser.text(&format!("{card} .active-id")).await.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(
        browser
            .text(&format!("{card} .active-source"))
            .await
            .as_deref(),
        Some("project:review")
    );
    assert_eq!(
        browser
            .text(&format!("{card} .active-actor"))
            .await
            .as_deref(),
        Some("user")
    );
    assert_eq!(
        browser
            .text(&format!("{card} .active-tools"))
            .await
            .as_deref(),
        Some("+grep −bash")
    );
    // Literal text: the markup-looking part is text, not an element.
    assert_eq!(
        browser
            .text(&format!("{card} .active-content"))
            .await
            .as_deref(),
        Some("List findings, evidence and risks.\n<b>Do not</b> directly edit files.")
    );
    assert_eq!(browser.count(&format!("{card} .active-content b")).await, 0);
    browser
        .wait_eq(".session-tools .tool-change", "+grep −bash")
        .await;
    let mut tools = texts(&browser, ".effective-tools .chip").await;
    tools.sort();
    let mut want: Vec<String> = state["effectiveTools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    want.sort();
    assert_eq!(tools, want);
    assert!(tools.contains(&"grep".to_string()) && !tools.contains(&"bash".to_string()));
    browser
        .wait_css(".delivery-badge[data-delivery='pending']")
        .await;
    browser
        .wait_eq("#session-badge", "1 active · pending")
        .await;
    assert_eq!(
        browser.text(".delivery-badge").await.as_deref(),
        Some("delivery: pending")
    );
    assert_eq!(
        browser
            .js("return window.__sessionMarker ?? null;", vec![])
            .await,
        json!(42),
        "the page was not reloaded"
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_picker_previews_and_enables_a_capability() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let browser = ws.browser().await;
    open_session(&browser).await;
    pick(&browser, "capability:project:review").await;
    let (_, available) = ws.api("GET", "/api/capability-state/available", "");
    let fingerprint = available["choices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "project:review")
        .and_then(|c| c["fingerprint"].as_str())
        .unwrap()
        .to_string();
    let hex = fingerprint.rsplit(':').next().unwrap();
    assert_eq!(
        browser
            .text("#capability-preview .choice-label")
            .await
            .as_deref(),
        Some("Review")
    );
    assert_eq!(
        browser
            .text("#capability-preview .choice-kind")
            .await
            .as_deref(),
        Some("capability")
    );
    assert_eq!(
        browser
            .text("#capability-preview .choice-id")
            .await
            .as_deref(),
        Some("project:review")
    );
    assert_eq!(
        browser
            .text("#capability-preview .choice-fingerprint")
            .await,
        Some(format!("#{}", &hex[..8]))
    );
    assert_eq!(
        browser
            .text("#capability-preview .choice-tools")
            .await
            .as_deref(),
        Some("+grep −bash")
    );
    assert_eq!(
        browser
            .text("#capability-preview .choice-content")
            .await
            .as_deref(),
        Some("List findings, evidence and risks.\n<b>Do not</b> directly edit files.")
    );
    pick(&browser, "capability:project:french").await;
    assert_eq!(
        browser
            .text("#capability-preview .choice-tools")
            .await
            .as_deref(),
        Some("No tool changes")
    );
    assert!(browser.enabled("#capability-enable").await);
    browser.click("#capability-enable").await;
    browser.wait_count(".active-card", 1).await;
    browser.wait_status("Enabled project:french").await;
    let (_, state) = ws.api("GET", "/api/capability-state", "");
    let id = activation_of(&state["state"], "project:french");
    assert_eq!(
        browser
            .text(&format!(
                ".active-card[data-activation-id='{id}'] .active-name"
            ))
            .await
            .as_deref(),
        Some("project:french")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

/// With a Preset active the picker has both groups; a binding is enabled as kind `binding`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_picker_offers_the_active_presets_bindings() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, body) = ws.api("POST", "/api/stacks/bound/activate", "{}");
    assert_eq!(status, 200, "{body}");
    let browser = ws.browser().await;
    open_session(&browser).await;
    wait_choice(&browser, "binding:fr").await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('#capability-picker optgroup')].map(g => [g.label, [...g.querySelectorAll('option')].map(o => o.value)]);",
                vec![]
            )
            .await,
        json!([
            ["Library (unbound)", [
                "capability:project:a-capability-with-a-rather-long-identifier-that-must-wrap",
                "capability:project:french",
                "capability:project:review"
            ]],
            ["Current preset (bound)", ["binding:rev", "binding:fr"]]
        ])
    );
    pick(&browser, "binding:fr").await;
    assert_eq!(
        browser
            .text("#capability-preview .choice-kind")
            .await
            .as_deref(),
        Some("binding")
    );
    assert_eq!(
        browser
            .text("#capability-preview .choice-id")
            .await
            .as_deref(),
        Some("fr")
    );
    browser.click("#capability-enable").await;
    browser.wait_count(".active-card", 1).await;
    let (_, state) = ws.api("GET", "/api/capability-state", "");
    let active = &state["state"]["active"][0];
    let id = active["activationId"].as_str().unwrap();
    let card = format!(".active-card[data-activation-id='{id}']");
    assert_eq!(
        browser
            .text(&format!("{card} .active-source"))
            .await
            .as_deref(),
        active["source"].as_str()
    );
    assert_eq!(
        browser
            .text(&format!("{card} .active-actor"))
            .await
            .as_deref(),
        Some("user")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deactivate_from_the_panel_removes_the_card() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    enable(&ws, "project:review");
    let state = enable(&ws, "project:french");
    let review = activation_of(&state, "project:review");
    let french = activation_of(&state, "project:french");
    let browser = ws.browser().await;
    open_session(&browser).await;
    browser.wait_count(".active-card", 2).await;
    browser
        .click(&format!(
            ".active-card[data-activation-id='{review}'] .capability-deactivate"
        ))
        .await;
    browser.wait_count(".active-card", 1).await;
    assert_eq!(
        browser
            .count(&format!(".active-card[data-activation-id='{french}']"))
            .await,
        1
    );
    browser
        .wait_eq(".session-summary .active-count", "1 active")
        .await;
    browser.wait_status(&format!("Deactivated {review}")).await;
    let (_, now) = ws.api("GET", "/api/capability-state", "");
    let active: Vec<&str> = now["state"]["active"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["activationId"].as_str().unwrap())
        .collect();
    assert_eq!(active, [french.as_str()]);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_guard_gets_the_servers_409_and_the_panel_says_so() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let browser = ws.browser().await;
    open_session(&browser).await;
    pick(&browser, "capability:project:french").await;
    // The session changes after the page read the catalog.
    let state = enable(&ws, "project:review");
    let review = activation_of(&state, "project:review");
    browser
        .wait_css(&format!(".active-card[data-activation-id='{review}']"))
        .await;
    // The catalog is not reloaded by the stream; the panel says it is outdated.
    browser
        .wait_eq(
            ".picker-outdated",
            "The session changed since these choices were loaded: Refresh to review them again.",
        )
        .await;
    browser.click("#capability-enable").await;
    browser
        .wait_eq(".session-error .message", GUARD_CHANGED_MESSAGE)
        .await;
    browser.wait_css("#session-panel[data-stale='true']").await;
    assert!(!browser.enabled("#capability-enable").await);
    assert_eq!(
        browser.text("#capability-enable-reason").await.as_deref(),
        Some("This view may be out of date: Refresh to review it again.")
    );
    assert_eq!(
        failed_requests(&browser, 1).await,
        ["/api/capability-state/enable 409 (Conflict)"]
    );
    assert_eq!(
        browser.count(".active-card").await,
        1,
        "nothing was enabled"
    );

    // Refresh reads the catalog again; Enable then works.
    browser.click(".session-error .session-refresh").await;
    browser.wait_count(".session-error", 0).await;
    browser.wait_css("#session-panel[data-stale='false']").await;
    browser.wait_count(".picker-outdated", 0).await;
    pick(&browser, "capability:project:french").await;
    browser.click("#capability-enable").await;
    browser.wait_count(".active-card", 2).await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_all_asks_first_and_a_change_cancels_the_question() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    enable(&ws, "project:review");
    enable(&ws, "project:french");
    let browser = ws.browser().await;
    open_session(&browser).await;
    browser.wait_count(".active-card", 2).await;

    // Cancel keeps everything.
    browser.click("#capability-reset").await;
    browser.wait_css("#capability-reset-confirm").await;
    browser.click("#capability-reset-cancel").await;
    browser.wait_count("#capability-reset-confirm", 0).await;
    assert_eq!(browser.count(".active-card").await, 2);
    let (_, state) = ws.api("GET", "/api/capability-state", "");
    assert_eq!(state["state"]["active"].as_array().unwrap().len(), 2);

    // A change of the session before Confirm cancels the question.
    browser.click("#capability-reset").await;
    browser.wait_css("#capability-reset-confirm").await;
    let state = enable(
        &ws,
        "project:a-capability-with-a-rather-long-identifier-that-must-wrap",
    );
    assert_eq!(state["active"].as_array().unwrap().len(), 3);
    browser
        .wait_eq(".session-notice", "The session changed; review it again.")
        .await;
    assert_eq!(browser.count("#capability-reset-confirm").await, 0);
    browser.wait_count(".active-card", 3).await;

    // Confirm clears.
    browser.click("#capability-reset").await;
    browser.click("#capability-reset-confirm").await;
    browser.wait_count(".active-card", 0).await;
    browser
        .wait_eq(".session-summary .active-count", "0 active")
        .await;
    let (_, state) = ws.api("GET", "/api/capability-state", "");
    assert_eq!(state["state"]["active"], json!([]));
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_fits_390_px_and_1280_px_in_both_themes() {
    let ws = workspace();
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    enable(
        &ws,
        "project:a-capability-with-a-rather-long-identifier-that-must-wrap",
    );
    enable(&ws, "project:review");
    let browser = ws.browser().await;
    open_session(&browser).await;
    browser.wait_count(".active-card", 2).await;
    pick(
        &browser,
        "capability:project:a-capability-with-a-rather-long-identifier-that-must-wrap",
    )
    .await;
    for (width, height) in [(390, 844), (1280, 900)] {
        browser.viewport(width, height).await;
        for theme in ["light", "dark"] {
            if browser
                .js(
                    "return document.documentElement.getAttribute('data-theme');",
                    vec![],
                )
                .await
                != json!(theme)
            {
                browser.click(".theme-toggle").await;
                browser
                    .wait_js(
                        "theme",
                        "return document.documentElement.getAttribute('data-theme');",
                        json!(theme),
                    )
                    .await;
            }
            assert_eq!(
                browser.horizontal_overflow().await,
                Vec::<String>::new(),
                "{width} px, {theme}"
            );
            // The user guide's images.
            match (width, theme) {
                (1280, "light") => browser.screenshot("session-panel").await,
                (390, "dark") => browser.screenshot("session-panel-390-dark").await,
                _ => {}
            }
        }
    }
    browser.assert_no_errors().await;
    browser.close().await;
}

/// An untrusted project: Enable is off with the reason and the picker is not loaded (the server
/// would answer 403); Deactivate and Reset all still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_refuses_enable_but_keeps_deactivate_and_reset() {
    let ws = workspace();
    // Activate while trusted, then come back untrusted on the same session.
    let sessions = ws.root.path().join("sessions").display().to_string();
    let mut pi = ws.pi(&["--session-dir", &sessions]);
    pi.connected();
    enable(&ws, "project:review");
    enable(&ws, "project:french");
    // Pi writes the session file with the first message.
    pi.prompt("first");
    pi.quit();
    let mut pi = ws.pi(&["--session-dir", &sessions, "--continue", "-na"]);
    pi.connected();
    let (_, now) = ws.api("GET", "/api/capability-state", "");
    assert_eq!(now["state"]["trusted"], false);
    let review = activation_of(&now["state"], "project:review");

    let browser = ws.browser().await;
    open_session(&browser).await;
    browser.wait_count(".active-card", 2).await;
    assert_eq!(
        browser
            .text(".session-summary .untrusted-badge")
            .await
            .as_deref(),
        Some("untrusted")
    );
    assert_eq!(
        browser.text(".session-problem").await.as_deref(),
        Some("Active capabilities require a trusted project; trust it, or remove them with /capability disable or /capability reset.")
    );
    assert!(!browser.enabled("#capability-enable").await);
    assert!(!browser.enabled("#capability-picker").await);
    assert_eq!(
        browser.text("#capability-enable-reason").await.as_deref(),
        Some(session_text::UNTRUSTED_ENABLE)
    );

    browser
        .click(&format!(
            ".active-card[data-activation-id='{review}'] .capability-deactivate"
        ))
        .await;
    browser.wait_count(".active-card", 1).await;
    browser.click("#capability-reset").await;
    browser.click("#capability-reset-confirm").await;
    browser.wait_count(".active-card", 0).await;
    let (_, now) = ws.api("GET", "/api/capability-state", "");
    assert_eq!(now["state"]["active"], json!([]));
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Without Pi the panel says how to get a live session (the stream's `capability-state` is
/// `null`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_live_session_the_panel_says_how_to_start_one() {
    let server = Server::start(&[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.click("#surface-session").await;
    browser
        .wait_eq(".session-none-text", session_text::NO_SESSION)
        .await;
    assert_eq!(
        browser.text(".session-none h2").await.as_deref(),
        Some("No live Pi session")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}
