//! Issue 17: axe-core (pinned in tools/package.json) reports no serious or critical
//! accessibility violation on any surface, wide and narrow, light and dark.

mod support;

use serde_json::json;
use support::{pretty, Browser, Server};

fn review() -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "review",
        "name": "Review",
        "regex": {"schemaVersion": 1, "rules": [
            {"id": "scrub", "stage": "history", "pattern": "x", "flags": "g", "replace": ""}
        ]},
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": "Review {{ parameters.who }}." },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ],
        "parameters": {"who": "code"}
    }))
}

const PROFILE: &str = r#"{ "schemaVersion": 1, "type": "pi-forge.agent-profile", "id": "scout",
  "model": { "provider": "fake", "id": "fake-1" }, "thinkingLevel": "off", "promptStack": "review" }"#;

const CAPABILITY: &str = r#"{ "schemaVersion": 1, "type": "pi-forge.capability", "id": "notes",
  "name": "Notes", "instructions": "Keep notes." }"#;

/// Every surface through its control (the tabs, or the phone menu at 390 px).
async fn surfaces(browser: &Browser, narrow: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for surface in [
        "Presets",
        "Profiles",
        "Capabilities",
        "Payloads",
        "Session",
        "Delegation",
    ] {
        if narrow {
            browser.click(".surface-menu-toggle").await;
            browser
                .click_text(".surface-menu-list [role=menuitem]", surface)
                .await;
        } else {
            browser.click_text(".surface-tab", surface).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        for v in browser.axe().await {
            problems.push(format!("{surface}: {v}"));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_surface_has_a_serious_accessibility_problem() {
    let server = Server::start_with(
        &[
            (
                "project/.pi/forge/prompt-stacks/review.json",
                review().as_str(),
            ),
            ("project/.pi/forge/agent-profiles/scout.json", PROFILE),
            ("project/.pi/forge/capabilities/notes.json", CAPABILITY),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    let mut problems = surfaces(&browser, false).await;
    // The Preset editor's tabs.
    browser.click_text(".surface-tab", "Presets").await;
    for tab in ["Items", "Stack", "Regex", "Policy", "Capabilities", "JSON"] {
        browser.tab(tab).await;
        for v in browser.axe().await {
            problems.push(format!("Presets/{tab}: {v}"));
        }
    }
    browser.click(".theme-toggle").await;
    for v in browser.axe().await {
        problems.push(format!("dark: {v}"));
    }
    browser.viewport(390, 844).await;
    problems.extend(surfaces(&browser, true).await);
    assert_eq!(problems, Vec::<String>::new());
    browser.close().await;
}
