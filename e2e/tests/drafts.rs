//! Unsaved drafts survive a reload (restored with a banner), are never applied silently over a
//! file that changed on disk meanwhile (offered as a three-way merge instead), and a session
//! that ended (the server's token no longer matches) is resumed without a reload, the draft
//! intact.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
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

fn on_disk(server: &Server) -> Value {
    let text = std::fs::read_to_string(server.path(STACK)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// How many drafts this browser keeps.
async fn kept(browser: &Browser) -> u64 {
    browser
        .js(
            "return Object.keys(localStorage).filter(k => k.startsWith('pi-forge.draft.v1:')).length;",
            vec![],
        )
        .await
        .as_u64()
        .unwrap()
}

/// Names the first item and waits until the draft is kept.
async fn name_first_item(browser: &Browser, name: &str) {
    browser.click(".item-row[data-index='0']").await;
    browser.fill("input[name=item-name]", name).await;
    browser
        .wait_js(
            "the draft is kept",
            "return Object.keys(localStorage).filter(k => k.startsWith('pi-forge.draft.v1:')).length;",
            json!(1),
        )
        .await;
}

async fn save(browser: &Browser) {
    browser.click("button.save").await;
    browser.wait_status("Saved review").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_survives_a_reload_and_is_forgotten_once_saved() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    name_first_item(&browser, "Intro").await;

    // A reload (or a crash) loses nothing: the draft comes back with a banner.
    browser.open(&server).await;
    browser.wait_css(".restored-draft").await;
    let banner = browser.text(".restored-draft p").await.unwrap();
    assert!(
        banner.starts_with("Restored your unsaved changes from ")
            && banner.ends_with(" (kept in this browser). Save them, or discard them."),
        "{banner}"
    );
    assert_eq!(browser.count(".restored-draft.stale").await, 0);
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(browser.value("input[name=item-name]").await, "Intro");
    save(&browser).await;
    assert_eq!(on_disk(&server)["items"][0]["name"], "Intro");
    browser.wait_count(".restored-draft", 0).await;
    assert_eq!(kept(&browser).await, 0);

    // Discard from the banner drops the kept draft and goes back to the file.
    name_first_item(&browser, "Again").await;
    browser.open(&server).await;
    browser.wait_css(".restored-draft").await;
    browser.click(".restored-discard").await;
    browser.wait_count(".restored-draft", 0).await;
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(browser.value("input[name=item-name]").await, "Intro");
    assert_eq!(kept(&browser).await, 0);
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_for_a_file_changed_since_is_merged_only_when_asked() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    name_first_item(&browser, "Intro").await;

    // Another writer changes a different field while the page is closed.
    let mut theirs = on_disk(&server);
    theirs["items"][0]["content"] = json!("Review carefully.");
    std::fs::write(server.path(STACK), pretty(&theirs)).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    browser.open(&server).await;
    browser.wait_css(".restored-draft.stale").await;
    let banner = browser.text(".restored-draft p").await.unwrap();
    assert!(
        banner.ends_with(", made to an older version of this file; it changed on disk since, so they are not applied. They touch other places than the change on disk and merge without a conflict."),
        "{banner}"
    );
    // Not applied: the editor shows the file as it is on disk.
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(browser.value("input[name=item-name]").await, "");
    assert_eq!(browser.count(".editor .badge.dirty").await, 0);
    // Still kept until the person decides, also across another reload.
    assert_eq!(kept(&browser).await, 1);
    browser.open(&server).await;
    browser.wait_css(".restored-draft.stale").await;
    browser.click(".restored-merge").await;
    browser
        .wait_status("Merged your kept changes into the current file. Review, then save.")
        .await;
    save(&browser).await;
    let saved = on_disk(&server);
    assert_eq!(saved["items"][0]["name"], "Intro");
    assert_eq!(saved["items"][0]["content"], "Review carefully.");
    assert_eq!(kept(&browser).await, 0);
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_is_resumed_without_a_reload_and_the_draft_is_saved() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    name_first_item(&browser, "Intro").await;

    // The server's token no longer matches this page's cookie (as after `pi-forge ui
    // --restart`): Save is refused and the banner explains what to do.
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session = cookies
        .into_iter()
        .find(|c| c.name().starts_with("pi_forge_token_"))
        .expect("the session cookie");
    browser.client.delete_cookie(session.name()).await.unwrap();
    browser.click("button.save").await;
    browser
        .wait_status("Not saved: the session with the pi-forge server ended; see the banner.")
        .await;
    let banner = browser.text(".session-lost p").await.unwrap();
    assert!(
        banner.starts_with("This page's session with the pi-forge server ended"),
        "{banner}"
    );
    assert_eq!(on_disk(&server)["items"][0].get("name"), None);

    // Opening the editor URL gives the browser a valid cookie again; back on this page (focus)
    // it reconnects by itself, and the draft is still there to save.
    browser.client.add_cookie(session).await.unwrap();
    browser
        .js("window.dispatchEvent(new Event('focus'));", vec![])
        .await;
    browser.wait_count(".session-lost", 0).await;
    browser
        .wait_status("Reconnected to the pi-forge server; unsaved changes are still here.")
        .await;
    save(&browser).await;
    assert_eq!(on_disk(&server)["items"][0]["name"], "Intro");
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_restart_keeps_the_address_the_old_tab_says_so_and_the_draft_comes_back() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    name_first_item(&browser, "Intro").await;

    // `pi-forge ui --restart`: a new server (new token) at the same address.
    let base = server.base.clone();
    let old_url = server.url.clone();
    let server = server.restart();
    assert_eq!(server.base, base, "{}", server.stderr.text());
    assert_ne!(server.url, old_url);

    // The open tab finds out by itself (its event stream dropped) and says what to do; it
    // never shows only "Failed to fetch".
    browser.wait_css(".session-lost").await;
    let banner = browser.text(".session-lost p").await.unwrap();
    assert!(
        banner.starts_with("This page's session with the pi-forge server ended"),
        "{banner}"
    );
    assert_eq!(on_disk(&server)["items"][0].get("name"), None);

    // The new URL in this browser: same origin, so the kept draft is offered again.
    browser.open(&server).await;
    browser.wait_css(".restored-draft").await;
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(browser.value("input[name=item-name]").await, "Intro");
    save(&browser).await;
    assert_eq!(on_disk(&server)["items"][0]["name"], "Intro");
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keeps_the_open_draft_in_the_browser_instead_of_asking_to_discard_it() {
    let server = Server::start_with(&[(STACK, &review())], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded review").await;
    name_first_item(&browser, "Intro").await;

    // New opens its dialog at once (before: "Discard unsaved changes?") and says where the
    // draft stays.
    browser.click("button.new-stack").await;
    browser.wait_eq(".modal #dialog-title", "New Preset").await;
    assert_eq!(
        browser.text(".modal .kept-note").await.as_deref(),
        Some("Your unsaved changes to review stay in this browser: opening review again offers them.")
    );
    browser.fill(".modal input[name=new-id]", "second").await;
    browser.wait_eq(".modal .field-note", "Available.").await;
    browser.click(".modal button.create").await;
    browser.wait_count(".modal", 0).await;
    browser.wait_eq(".editor .selector", "project:second").await;

    // Back on review: the draft is offered again.
    browser
        .click(".stack-row[data-selector='project:review']")
        .await;
    browser.wait_css(".restored-draft").await;
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(browser.value("input[name=item-name]").await, "Intro");
    assert_eq!(on_disk(&server)["items"][0].get("name"), None);
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}
