//! Browser smoke test: the real `pi-forge ui` binary in headless Chromium.

mod support;

use support::{Browser, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_project_renders_the_shell_without_console_errors() {
    let server = Server::start(&[]);
    let browser = Browser::start().await;
    browser.open(&server).await;

    assert_eq!(
        browser.text(".topbar .brand").await.as_deref(),
        Some("pi-forge")
    );
    assert_eq!(browser.client.title().await.unwrap(), "pi-forge");
    browser
        .wait_text(".status", "No prompt stacks found.")
        .await;
    assert_eq!(
        browser.text(".empty-state h2").await.as_deref(),
        Some("No prompt stacks found.")
    );
    assert_eq!(
        browser.count("button.save").await,
        0,
        "no editor, so no Save"
    );
    assert_eq!(
        browser.text(".stack-list .empty").await.as_deref(),
        Some("No prompt stacks found.")
    );

    browser.assert_no_errors().await;
    browser.close().await;
}
