//! Issue 17, "Find things": the sidebar's search finds Presets by what they contain (block text,
//! slot names, regex patterns), not only by id and name, and shows where it matched.

mod support;

use serde_json::json;
use support::{pretty, Browser, Server};

fn stack(id: &str, name: &str, text: &str, pattern: &str) -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "name": name,
        "regex": {"schemaVersion": 1, "rules": [
            {"id": "scrub", "stage": "history", "pattern": pattern, "flags": "g", "replace": ""}
        ]},
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": text },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    }))
}

async fn rows(browser: &Browser) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('.stack-row')].map(r => r.dataset.selector);",
            vec![],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_finds_presets_by_block_text_and_regex_patterns() {
    let server = Server::start_with(
        &[
            (
                "project/.pi/forge/prompt-stacks/alpha.json",
                &stack(
                    "alpha",
                    "Alpha",
                    "Review the migration scripts first.",
                    "OOC:",
                ),
            ),
            (
                "project/.pi/forge/prompt-stacks/beta.json",
                &stack("beta", "Beta", "Write release notes.", "\\[draft\\]"),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_count(".stack-row", 2).await;

    // A word only in alpha's block text: the row stays and says where.
    browser.fill(".sidebar input.search", "migration").await;
    browser.wait_count(".stack-row .row-match", 1).await;
    assert_eq!(rows(&browser).await, ["project:alpha"]);
    assert_eq!(
        browser.text(".stack-row .row-match").await.as_deref(),
        Some("item intro: Review the migration scripts first.")
    );

    // A regex pattern.
    browser.fill(".sidebar input.search", "[draft").await;
    browser
        .wait_eq(
            ".stack-row .row-match",
            "regex rule scrub (pattern): \\[draft\\]",
        )
        .await;
    assert_eq!(rows(&browser).await, ["project:beta"]);

    // Names still match as before, with no content line; a slot name matches both.
    browser.fill(".sidebar input.search", "alph").await;
    browser.wait_count(".stack-row", 1).await;
    assert_eq!(rows(&browser).await, ["project:alpha"]);
    browser.fill(".sidebar input.search", "chat-history").await;
    browser.wait_count(".stack-row .row-match", 2).await;
    assert_eq!(rows(&browser).await, ["project:alpha", "project:beta"]);
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    browser.viewport(1280, 900).await;
    browser
        .fill(".sidebar input.search", "nothing like this")
        .await;
    browser
        .wait_eq(".stack-list .empty", "No Presets match the search.")
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}
