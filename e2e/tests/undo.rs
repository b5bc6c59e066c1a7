//! Undo and redo of Preset edits (Ctrl+Z, Ctrl+Shift+Z, the buttons), and destructive dialogs
//! that never take the default focus.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{pretty, Browser, Server};

const STACK: &str = "project/.pi/forge/prompt-stacks/review.json";

fn review() -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "review",
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": "Review." },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    }))
}

async fn key(browser: &Browser, key: &str, shift: bool) {
    browser
        .js(
            "const [key, shift] = arguments; window.dispatchEvent(new KeyboardEvent('keydown', {key, ctrlKey: true, shiftKey: shift, bubbles: true}));",
            vec![json!(key), json!(shift)],
        )
        .await;
}

/// Two edits more than the coalescing window apart are two undo steps.
async fn pause() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_and_redo_take_back_every_kind_of_edit() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    assert!(!browser.enabled("button.undo").await);
    assert!(!browser.enabled("button.redo").await);

    browser.click(".item-row[data-index='0']").await;
    browser.fill("input[name=item-name]", "Intro").await;
    pause().await;
    browser.click("button.remove-item").await;
    browser
        .wait_status("Removed item intro. Undo (Ctrl+Z) brings it back.")
        .await;
    browser.wait_count(".item-row", 1).await;

    // Ctrl+Z brings the item back, a second one the old name; then nothing is left to undo
    // and the draft is clean again.
    key(&browser, "z", false).await;
    browser.wait_count(".item-row", 2).await;
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(browser.value("input[name=item-name]").await, "Intro");
    key(&browser, "z", false).await;
    browser
        .wait_js(
            "name undone",
            "return document.querySelector('input[name=item-name]').value;",
            json!(""),
        )
        .await;
    assert!(!browser.enabled("button.undo").await);
    assert_eq!(browser.count(".editor .badge.dirty").await, 0);

    // Redo with Ctrl+Shift+Z, then the button.
    key(&browser, "z", true).await;
    browser
        .wait_js(
            "name redone",
            "return document.querySelector('input[name=item-name]').value;",
            json!("Intro"),
        )
        .await;
    assert!(browser.enabled("button.redo").await);
    browser.click("button.redo").await;
    browser.wait_count(".item-row", 1).await;
    assert!(!browser.enabled("button.redo").await);
    browser.click("button.undo").await;
    browser.wait_count(".item-row", 2).await;

    // Saving keeps the history; the file gets what the draft shows.
    browser.click("button.save").await;
    browser.wait_status("Saved review").await;
    assert_eq!(server.read_json(STACK)["items"][0]["name"], "Intro");
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_discard_dialogs_focus_the_safe_choice() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    browser.click("button.more-toggle").await;
    browser.click(".menu button.delete").await;
    browser.wait_css(".modal").await;
    browser
        .wait_js(
            "cancel has the focus",
            "return document.activeElement && document.activeElement.className;",
            json!("cancel"),
        )
        .await;
    // Enter on the focused button keeps the file.
    browser.type_keys(".modal button.cancel", "\u{E007}").await;
    browser.wait_count(".modal", 0).await;
    assert_eq!(server.read(STACK), review());
    browser.assert_no_errors().await;
    browser.close().await;
}
