//! A tour of every main view at 1280×900 and 390×844, light and dark: each view must fit the
//! viewport without horizontal overflow, keep its primary action visible and log no errors.
//! Each stop saves a screenshot to target/screenshots/; `FORGE_UPDATE_SCREENSHOTS=1` also
//! writes them to docs/images/ for docs/user-guide.md. The last test drives the policy picker
//! and a regex rule's roles from the keyboard.

mod support;

use fantoccini::key::Key;
use serde_json::{json, Value};
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
        &[
            "button.save",
            "button.new-stack",
            ".item-list",
            "#live-indicator",
        ],
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
    stop(
        &browser,
        "profiles",
        &["button.new-profile", "button.edit", "#live-indicator"],
    )
    .await;
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
        &[
            "button.save",
            "button.new-stack",
            "#live-indicator",
            ".surface-menu-toggle",
        ],
    )
    .await;

    browser.click(".item-row[data-index='4']").await;
    browser.wait_css("input[name='opt-maxMessages']").await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());

    browser.click(".preview-toggle").await;
    browser.wait_css(".dock .section").await;
    stop(&browser, "mobile-preview", &[".dock-close"]).await;
    browser.click(".dock-close").await;

    // On a phone the surfaces are one menu.
    browser.click(".surface-menu-toggle").await;
    browser.wait_css(".surface-menu-list").await;
    stop(
        &browser,
        "mobile-surface-menu",
        &[".surface-menu-list [role=menuitem][data-surface='Delegation']"],
    )
    .await;
    browser
        .click(".surface-menu-list [role=menuitem][data-surface='Profiles']")
        .await;
    browser
        .click(".profile-row[data-selector='project:reviewer']")
        .await;
    browser.wait_text(".preflight", "Ready to apply").await;
    stop(&browser, "mobile-profiles", &["button.new-profile"]).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

async fn texts(browser: &Browser, css: &str) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(css)],
        )
        .await
}

async fn attr(browser: &Browser, css: &str, name: &str) -> Value {
    browser
        .js(
            "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
            vec![json!(css), json!(name)],
        )
        .await
}

/// The policy picker is a set of toggle buttons (aria-pressed; Enter adds a tool, Enter again
/// removes it), the pattern box has a label, a pattern that matches nothing says so, and a
/// regex rule's roles and trim strings are edited under "Limits and roles".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_picker_and_regex_roles_from_the_keyboard() {
    let server = Server::start_with(&workspace(), &[]);
    let browser = Browser::start().await;
    browser.viewport(1280, 900).await;
    browser.open(&server).await;
    open_careful_reviewer(&browser).await;

    browser.click(".tab[data-tab='Policy']").await;
    let tools = "[data-policy=tools]";
    browser
        .wait_css(&format!("{tools} .pick[data-name=bash]"))
        .await;
    assert_eq!(
        attr(&browser, "input[name=tools-pattern]", "aria-label").await,
        json!("Add a tool name or pattern")
    );
    assert_eq!(
        attr(
            &browser,
            &format!("{tools} .pick[data-name=read]"),
            "aria-pressed"
        )
        .await,
        json!("true")
    );
    assert_eq!(
        attr(
            &browser,
            &format!("{tools} .pick[data-name=bash]"),
            "aria-pressed"
        )
        .await,
        json!("false")
    );
    browser
        .type_keys(&format!("{tools} .pick[data-name=bash]"), &Key::Enter)
        .await;
    browser
        .wait_css(&format!("{tools} .pick[data-name=bash][aria-pressed=true]"))
        .await;
    assert_eq!(
        texts(&browser, &format!("{tools} .chip .chip-text")).await,
        json!(["read", "grep", "find", "ls", "bash"])
    );
    browser
        .type_keys(&format!("{tools} .pick[data-name=bash]"), &Key::Enter)
        .await;
    browser
        .wait_css(&format!(
            "{tools} .pick[data-name=bash][aria-pressed=false]"
        ))
        .await;
    assert_eq!(
        texts(&browser, &format!("{tools} .chip .chip-text")).await,
        json!(["read", "grep", "find", "ls"])
    );
    browser
        .type_keys(
            "input[name=tools-pattern]",
            &("nope*".to_string() + &Key::Enter),
        )
        .await;
    browser
        .wait_css(&format!("{tools} .chip.no-match[data-pattern='nope*']"))
        .await;
    assert_eq!(
        browser
            .text(&format!("{tools} .chip[data-pattern='nope*'] .chip-note"))
            .await
            .as_deref(),
        Some("matches nothing")
    );

    // A rule limited to some roles; all four ticked again drops `roles`.
    browser.click(".tab[data-tab='Regex']").await;
    browser.click("button.add-rule").await;
    let rule = ".rule[data-rule='0']";
    browser
        .fill(&format!("{rule} input[name=rule-pattern]"), "TODO")
        .await;
    browser
        .click(&format!("{rule} details.advanced summary"))
        .await;
    let roles = format!("{rule} fieldset.roles input");
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll(arguments[0])].map(e => [e.name, e.checked]);",
                vec![json!(roles)],
            )
            .await,
        json!([
            ["rule-role-system", true],
            ["rule-role-user", true],
            ["rule-role-assistant", true],
            ["rule-role-custom", true]
        ])
    );
    for role in ["system", "user", "assistant", "custom"] {
        browser
            .type_keys(&format!("{rule} input[name=rule-role-{role}]"), " ")
            .await;
    }
    browser
        .wait_text(&format!("{rule} .advanced .help"), "No role is ticked")
        .await;
    for role in ["user", "assistant"] {
        browser
            .type_keys(&format!("{rule} input[name=rule-role-{role}]"), " ")
            .await;
    }
    browser
        .fill(&format!("{rule} textarea[name=rule-trim]"), "<b>\n\n</b>")
        .await;
    assert_eq!(
        attr(
            &browser,
            &format!("{rule} textarea[name=rule-sample]"),
            "aria-label"
        )
        .await,
        json!("Sample text to try the rule on")
    );
    browser.click("button.save").await;
    browser.wait_text(".status", "Saved careful-reviewer").await;
    let saved = server.read_json("project/.pi/forge/prompt-stacks/careful-reviewer.json");
    assert_eq!(
        saved["tools"],
        json!({ "allow": ["read", "grep", "find", "ls", "nope*"] })
    );
    assert_eq!(
        saved["regex"]["rules"],
        json!([{
            "id": "regex-1", "stage": "compiled", "effect": "outgoing", "targets": ["messages"],
            "pattern": "TODO", "replace": "", "roles": ["user", "assistant"],
            "trimStrings": ["<b>", "</b>"]
        }])
    );

    // Every role ticked again: `roles` is gone (absent means every role).
    for role in ["system", "custom"] {
        browser
            .type_keys(&format!("{rule} input[name=rule-role-{role}]"), " ")
            .await;
    }
    browser
        .wait_text(
            &format!("{rule} .advanced .help"),
            "Only messages with a ticked role",
        )
        .await;
    browser.click("button.save").await;
    browser
        .wait_js(
            "roles dropped on save",
            "return document.querySelector('.editor .badge.dirty') === null;",
            json!(true),
        )
        .await;
    let saved = server.read_json("project/.pi/forge/prompt-stacks/careful-reviewer.json");
    assert_eq!(saved["regex"]["rules"][0].get("roles"), None);

    // A file with both an allow and a deny list: the hidden deny list is named.
    browser
        .click(".stack-row[data-selector='project:validation-issues']")
        .await;
    browser.wait_text(".stack-title", "Validation issues").await;
    browser.click(".tab[data-tab='Policy']").await;
    assert_eq!(
        browser
            .text(&format!("{tools} .both-lists"))
            .await
            .as_deref(),
        Some("This file has an allow list and a deny list, which is an error. The allow list is shown; the deny list (bash) is dropped when you pick a mode.")
    );
    browser.click(&format!("{tools} button.mode-allow")).await;
    browser.wait_css(".editor .badge.dirty").await;
    assert_eq!(browser.count(&format!("{tools} .both-lists")).await, 0);

    browser.assert_no_errors().await;
    browser.close().await;
}
