//! The JSON tab: opening a file that is not JSON is not an edit (no false "Discard unsaved
//! changes?"), and Ctrl+S with text typed but not applied says why nothing was saved.

mod support;

use serde_json::json;
use support::{pretty, sample_stack, Browser, Server};

const STACKS: &str = "project/.pi/forge/prompt-stacks";

async fn ctrl_s(browser: &Browser) {
    browser
        .js(
            "window.dispatchEvent(new KeyboardEvent('keydown', {key: 's', ctrlKey: true, bubbles: true})); return true;",
            vec![],
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_a_file_that_is_not_json_is_not_an_unsaved_change() {
    let server = Server::start_with(
        &[
            (
                format!("{STACKS}/alpha.json").as_str(),
                pretty(&sample_stack("alpha", "Alpha", "Fine.")).as_str(),
            ),
            (
                &format!("{STACKS}/broken.json"),
                "{ \"id\": \"broken\", \"items\": [\n",
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser
        .click(".stack-row[data-selector='project:broken']")
        .await;
    browser.wait_status("Loaded broken").await;
    browser
        .wait_js(
            "the file's text in the JSON tab",
            "return document.querySelector('textarea[name=stack-json]')?.value ?? null;",
            json!("{ \"id\": \"broken\", \"items\": [\n"),
        )
        .await;
    assert_eq!(browser.count(".field-note.unapplied").await, 0);
    assert_eq!(
        browser.count("button.tab[data-tab='JSON'] .tab-mark").await,
        0
    );
    // Leaving it asks nothing: nothing was edited.
    browser
        .click(".stack-row[data-selector='project:alpha']")
        .await;
    browser.wait_status("Loaded alpha").await;
    assert_eq!(browser.count(".modal").await, 0);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_s_with_unapplied_json_says_why_nothing_was_saved() {
    let text = pretty(&sample_stack("alpha", "Alpha", "Fine."));
    let server = Server::start_with(&[(&format!("{STACKS}/alpha.json"), &text)], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;
    browser.tab("JSON").await;
    let edited = text.replace("Fine.", "Edited in JSON.");
    browser.fill("textarea[name=stack-json]", &edited).await;
    browser.wait_css(".field-note.unapplied").await;
    ctrl_s(&browser).await;
    browser
        .wait_status("Not saved: the JSON tab has text you have not applied. Apply it to the editor (or reset it), then save.")
        .await;
    assert_eq!(server.read(&format!("{STACKS}/alpha.json")), text);
    // Applied, it saves.
    browser.click("button.apply-json").await;
    browser.wait_status("Applied stack JSON to editor").await;
    ctrl_s(&browser).await;
    browser.wait_status("Saved alpha").await;
    assert_eq!(
        server.read_json(&format!("{STACKS}/alpha.json"))["items"][0]["content"],
        "Edited in JSON."
    );
    browser.assert_no_errors().await;
    browser.close().await;
}
