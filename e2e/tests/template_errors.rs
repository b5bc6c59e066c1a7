//! Template errors are shown where they are (issue: "Template errors are invisible"): a block
//! whose forge-v1 template does not parse is an error in the editor's diagnostics (with item,
//! line and column, linked to the item), blocks Save, counts in the list badge, and fails the
//! preflight of a profile that uses the Preset, naming the item.

mod support;

use serde_json::json;
use support::{pretty, Browser, Server};

const STACKS: &str = "project/.pi/forge/prompt-stacks";
const PROFILES: &str = "project/.pi/forge/agent-profiles";

fn stack(id: &str, content: &str) -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": content },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    }))
}

const UNCLOSED_IF: &str = "Template error in item intro, line 2, column 1: forge-v1 parse error: Missing {% endif %}. The block would be left out of the prompt.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_template_is_an_error_that_blocks_save_and_links_to_the_item() {
    let server = Server::start_with(
        &[(
            &format!("{STACKS}/review.json"),
            &stack("review", "Review."),
        )],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    browser.click(".item-row[data-index='0']").await;
    browser
        .fill(
            "textarea[name=item-content]",
            "Review.\n{% if parameters.strict %}Be strict.",
        )
        .await;
    browser
        .wait_eq(".diagnostics .summary", "1 error · 0 warnings · 0 info")
        .await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.diagnostics .diagnostic .message')].map(e => e.textContent);",
                vec![]
            )
            .await,
        json!([UNCLOSED_IF])
    );
    assert!(!browser.enabled("button.save").await);
    // The link jumps to the item (from another tab).
    browser.tab("Policy").await;
    browser.click(".diagnostics .jump").await;
    browser
        .wait_css(".item-row[data-index='0'][aria-current='true']")
        .await;

    // Fixed: no problems, Save is back.
    browser
        .fill(
            "textarea[name=item-content]",
            "Review.\n{% if parameters.strict %}Be strict.{% endif %}",
        )
        .await;
    browser
        .wait_eq(".diagnostics .summary", "0 errors · 1 warning · 0 info")
        .await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.diagnostics .diagnostic .message')].map(e => e.textContent);",
                vec![]
            )
            .await,
        json!(["Template in item intro, line 2, column 1 reads parameters.strict, which this Preset does not define: it renders as nothing."])
    );
    assert!(browser.enabled("button.save").await);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_broken_template_counts_in_the_list_and_fails_the_profile_preflight() {
    let profile = pretty(&json!({
        "schemaVersion": 1, "type": "pi-forge.agent-profile", "id": "scout",
        "model": { "provider": "test", "id": "current" }, "thinkingLevel": "low",
        "promptStack": "strict"
    }));
    let server = Server::start_with(
        &[
            (
                &format!("{STACKS}/strict.json"),
                &stack("strict", "Review.\n{% if parameters.strict %}Be strict."),
            ),
            (&format!("{PROFILES}/scout.json"), &profile),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser
        .wait_css(".stack-row[data-selector='project:strict']")
        .await;
    assert_eq!(
        browser
            .text(".stack-row[data-selector='project:strict'] .badge.error")
            .await
            .as_deref(),
        Some("1 ✕")
    );
    browser.click_text(".surface-tab", "Profiles").await;
    browser
        .wait_text(".profile-detail .preflight strong", "Preflight failed")
        .await;
    let messages = browser
        .js(
            "return [...document.querySelectorAll('.profile-detail .diagnostic-list .message')].map(e => e.textContent);",
            vec![],
        )
        .await;
    assert_eq!(
        messages,
        json!([
            "Prompt stack project:strict has errors; this profile cannot be applied until they are fixed.",
            format!("Preset project:strict has errors: {UNCLOSED_IF}")
        ])
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Issue 41, point 4: a block without a role is left out by the compiler, so the editor never
/// shows it as a system block: its row says so, the role field names what empty means, and
/// Diagnostics warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_without_a_role_says_it_is_left_out() {
    let roleless = pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "plain",
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": "Kept." },
            { "kind": "block", "id": "loose", "content": "Left out." },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    }));
    let server = Server::start_with(&[(&format!("{STACKS}/plain.json"), &roleless)], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded plain").await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.item-row .item-meta')].map(e => e.textContent);",
                vec![]
            )
            .await,
        json!(["block · system", "block · no role: left out", "slot · chat-history"])
    );
    browser.click(".item-row[data-index='1']").await;
    browser
        .wait_js(
            "the role field's empty choice",
            "return document.querySelector('select[name=item-role] option[value=\"\"]')?.textContent ?? null;",
            json!("(none: left out of the prompt)"),
        )
        .await;
    browser
        .wait_eq(".diagnostics .summary", "0 errors · 1 warning · 0 info")
        .await;
    assert_eq!(
        browser
            .text(".diagnostics .diagnostic .message")
            .await
            .as_deref(),
        Some("Enabled block has no role and will be ignored.")
    );
    // The compiler agrees: the preview's system prompt holds only the kept block.
    let out = std::process::Command::new(support::pi_forge_binary())
        .args(["preview", "plain", "--no-live", "--json", "--project"])
        .arg(server.path("project"))
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["compiled"]["systemPrompt"], "Kept.");
}
