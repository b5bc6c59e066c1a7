//! Browser smoke tests: the real `pi-forge ui` binary in headless Chromium.

mod support;

use std::time::Duration;

use fantoccini::Locator;
use support::{Browser, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_renders_heading_without_console_errors() {
    let server = Server::start(&[]);
    let browser = Browser::start().await;
    let client = &browser.client;

    client.goto(&server.url).await.expect("page loads");
    let heading = client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("main#app h1"))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the app did not render (is assets/dist built? run `cargo xtask dist`): {e}\n\
                 server stderr:\n{}",
                server.stderr.text()
            )
        });
    assert_eq!(heading.text().await.unwrap(), "pi-forge");
    assert_eq!(client.title().await.unwrap(), "pi-forge");
    let lead = client.find(Locator::Css("main#app .lead")).await.unwrap();
    assert_eq!(lead.text().await.unwrap(), "Workspace editor — coming soon");
    let version = client
        .find(Locator::Css("main#app .version"))
        .await
        .unwrap();
    assert_eq!(
        version.text().await.unwrap(),
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );

    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    assert_eq!(browser.console_errors().await, Vec::<String>::new());
    browser.close().await;
}
