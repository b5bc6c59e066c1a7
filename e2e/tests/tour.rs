//! A tour of every main view at 1280×900 and 390×844, light and dark: each view must fit the
//! viewport without horizontal overflow, keep its primary action visible and log no errors.
//! Each stop saves a screenshot to target/screenshots/; `FORGE_UPDATE_SCREENSHOTS=1` also
//! writes them to docs/images/ for docs/user-guide.md.

mod support;

use support::{Browser, Server};

const REVIEWER: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "reviewer",
  "name": "Reviewer",
  "description": "Careful review with a strong model.",
  "model": { "provider": "anthropic", "id": "claude-sonnet-4" },
  "thinkingLevel": "high",
  "promptStack": "careful-reviewer"
}
"#;

const BROKEN_PROFILE: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "legacy-triage",
  "model": { "provider": "anthropic", "id": "claude-sonnet-4" },
  "thinkingLevel": "medium",
  "promptStack": "gone"
}
"#;

fn workspace() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "project/.pi/forge/prompt-stacks/careful-reviewer.json",
            include_str!("../../docs/examples/stacks/careful-reviewer.json"),
        ),
        (
            "project/.pi/forge/prompt-stacks/terse-pair.json",
            include_str!("../../docs/examples/stacks/terse-pair.json"),
        ),
        (
            "project/.pi/forge/prompt-stacks/test-first.json",
            include_str!("../../docs/examples/stacks/test-first.json"),
        ),
        (
            "project/.pi/forge/prompt-stacks/transcript-scrubber.json",
            include_str!("../../docs/examples/stacks/transcript-scrubber.json"),
        ),
        (
            "project/.pi/forge/prompt-stacks/validation-issues.json",
            include_str!("../../docs/examples/stacks/validation-issues.json"),
        ),
        (
            "global/prompt-stacks/pi-mirror.json",
            include_str!("../../docs/examples/stacks/pi-mirror.json"),
        ),
        ("project/.pi/forge/agent-profiles/reviewer.json", REVIEWER),
        (
            "project/.pi/forge/agent-profiles/legacy-triage.json",
            BROKEN_PROFILE,
        ),
    ]
}

/// Asserts the view fits and the given controls are on screen, then saves the screenshot.
async fn stop(browser: &Browser, name: &str, visible: &[&str]) {
    assert_eq!(
        browser.horizontal_overflow().await,
        Vec::<String>::new(),
        "{name}: horizontal overflow"
    );
    for css in visible {
        assert!(
            browser.in_viewport(css).await,
            "{name}: {css} is not fully on screen"
        );
    }
    browser.screenshot(name).await;
}

async fn open_careful_reviewer(browser: &Browser) {
    browser
        .click(".stack-row[data-selector='project:careful-reviewer']")
        .await;
    browser.wait_text(".stack-title", "Careful reviewer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_tour_light_and_dark() {
    let server = Server::start_with(&workspace(), &[]);
    let browser = Browser::start().await;
    browser.viewport(1280, 900).await;
    browser.open(&server).await;
    open_careful_reviewer(&browser).await;
    stop(
        &browser,
        "presets-items",
        &["button.save", "button.new-stack", ".item-list"],
    )
    .await;

    // A slot and its generated options form.
    browser.click(".item-row[data-index='4']").await;
    browser.wait_css("input[name='opt-maxMessages']").await;
    stop(&browser, "presets-slot-options", &["button.save"]).await;

    // Edit the role block and look at the preview dock's draft diff.
    browser.click(".item-row[data-index='0']").await;
    let content = browser.value("textarea[name='item-content']").await;
    browser
        .fill(
            "textarea[name='item-content']",
            &content.replace("careful code reviewer", "meticulous code reviewer"),
        )
        .await;
    browser.click(".preview-toggle").await;
    browser
        .wait_text(".dock .section-content", "meticulous")
        .await;
    stop(&browser, "presets-preview", &["button.save", ".dock"]).await;
    browser.click(".dock-diff").await;
    browser.wait_css(".diff-block.modified mark").await;
    stop(&browser, "presets-draft-diff", &[".dock .diff"]).await;
    browser.click(".dock-close").await;

    browser.click(".tab[data-tab='Policy']").await;
    browser.wait_css(".policy .chip").await;
    stop(&browser, "presets-policy", &["button.save"]).await;

    browser.click(".tab[data-tab='Stack']").await;
    browser.wait_css("input[name='stack-name']").await;
    stop(&browser, "presets-stack", &["button.save"]).await;

    // Regex rules with the browser's engine trying a sample.
    browser
        .click(".stack-row[data-selector='project:transcript-scrubber']")
        .await;
    browser.wait_css(".modal").await; // the careful-reviewer draft is dirty
    browser.click(".modal button.confirm").await;
    browser.wait_text(".stack-title", "scrubber").await;
    browser.click(".tab[data-tab='Regex']").await;
    browser.wait_css(".rule").await;
    stop(&browser, "presets-regex", &["button.save"]).await;

    browser.click("button.new-stack").await;
    browser.wait_css(".modal input[name='new-id']").await;
    browser
        .fill(".modal input[name='new-id']", "careful-reviewer")
        .await;
    browser
        .wait_text(".modal .field-note", "already exists")
        .await;
    stop(&browser, "new-preset-dialog", &[".modal button.create"]).await;
    browser.click(".modal button.cancel").await;

    // Profiles: a ready one and one that fails preflight.
    browser.click_text(".surface-tab", "Profiles").await;
    browser
        .click(".profile-row[data-selector='project:reviewer']")
        .await;
    browser.wait_text(".preflight", "Ready to apply").await;
    stop(&browser, "profiles", &["button.new-profile", "button.edit"]).await;
    browser
        .click(".profile-row[data-selector='project:legacy-triage']")
        .await;
    browser.wait_text(".preflight", "Preflight failed").await;
    stop(&browser, "profile-preflight-failed", &["button.edit"]).await;
    browser.click("button.edit").await;
    browser.wait_css("input[name='profile-id']").await;
    stop(&browser, "profile-editor", &["button.save-profile"]).await;
    browser.click(".profile-editor button.cancel").await;

    // Dark theme.
    browser.click(".theme-toggle").await;
    browser.click_text(".surface-tab", "Presets").await;
    open_careful_reviewer(&browser).await;
    stop(&browser, "dark-items", &["button.save"]).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrow_tour() {
    let server = Server::start_with(&workspace(), &[]);
    let browser = Browser::start().await;
    browser.viewport(390, 844).await;
    browser.open(&server).await;
    open_careful_reviewer(&browser).await;
    stop(
        &browser,
        "mobile-presets",
        &["button.save", "button.new-stack"],
    )
    .await;

    browser.click(".item-row[data-index='4']").await;
    browser.wait_css("input[name='opt-maxMessages']").await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());

    browser.click(".preview-toggle").await;
    browser.wait_css(".dock .section").await;
    stop(&browser, "mobile-preview", &[".dock-close"]).await;
    browser.click(".dock-close").await;

    browser.click_text(".surface-tab", "Profiles").await;
    browser
        .click(".profile-row[data-selector='project:reviewer']")
        .await;
    browser.wait_text(".preflight", "Ready to apply").await;
    stop(&browser, "mobile-profiles", &["button.new-profile"]).await;

    browser.assert_no_errors().await;
    browser.close().await;
}
