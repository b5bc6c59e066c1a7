//! The Preset's More ▾ menu behaves like a menu: it opens with its first entry focused, ↑/↓,
//! Home and End move between entries, and Escape, a click outside or a tab switch close it.

mod support;

use serde_json::json;
use support::{pretty, sample_stack, Browser, Server};

async fn focused(browser: &Browser) -> serde_json::Value {
    browser
        .js(
            "const e = document.activeElement; return e ? e.className : null;",
            vec![],
        )
        .await
}

async fn key(browser: &Browser, key: &str) {
    browser
        .js(
            "const k = arguments[0]; document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: k, bubbles: true})); return true;",
            vec![json!(key)],
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_more_menu_opens_moves_and_closes_like_a_menu() {
    let server = Server::start_with(
        &[(
            "project/.pi/forge/prompt-stacks/alpha.json",
            &pretty(&sample_stack("alpha", "Alpha", "Fine.")),
        )],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;

    browser.click("button.more-toggle").await;
    browser
        .wait_js(
            "first entry focused",
            "const e = document.activeElement; return e ? e.className : null;",
            json!("fork"),
        )
        .await;
    key(&browser, "ArrowDown").await;
    assert_eq!(focused(&browser).await, json!("import"));
    key(&browser, "End").await;
    assert_eq!(focused(&browser).await, json!("delete danger"));
    key(&browser, "ArrowDown").await;
    assert_eq!(
        focused(&browser).await,
        json!("fork"),
        "↓ on the last entry wraps"
    );
    key(&browser, "ArrowUp").await;
    assert_eq!(focused(&browser).await, json!("delete danger"));
    key(&browser, "Home").await;
    assert_eq!(focused(&browser).await, json!("fork"));

    // Escape closes it and gives the focus back to its button.
    key(&browser, "Escape").await;
    browser.wait_count(".editor .more .menu", 0).await;
    browser
        .wait_js(
            "toggle focused",
            "const e = document.activeElement; return e ? e.className : null;",
            json!("more-toggle"),
        )
        .await;

    // A click elsewhere closes it.
    browser.click("button.more-toggle").await;
    browser.wait_count(".editor .more .menu", 1).await;
    browser.click(".stack-title").await;
    browser.wait_count(".editor .more .menu", 0).await;

    // So does switching tabs.
    browser.click("button.more-toggle").await;
    browser.wait_count(".editor .more .menu", 1).await;
    browser
        .js(
            "document.querySelector(\"button.tab[data-tab='Stack']\").click(); return true;",
            vec![],
        )
        .await;
    browser.wait_count(".editor .more .menu", 0).await;
    browser.assert_no_errors().await;
    browser.close().await;
}
