//! Developer tool: screenshot a running pi-forge editor.
//! `cargo run -p forge-e2e --example shot -- <url-with-token> <out.png> [width height] [css-to-click...]`
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use fantoccini::Locator;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = &args[1];
    let out = &args[2];
    let w: u32 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1280);
    let h: u32 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(900);
    let browser = support::Browser::start().await;
    let c = &browser.client;
    c.set_window_size(w, h).await.unwrap();
    c.goto(url).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(support::APP_READY))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    for css in args.iter().skip(5) {
        if let Some(ms) = css.strip_prefix("sleep:") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            continue;
        }
        match c.find(Locator::Css(css)).await {
            Ok(el) => el.click().await.unwrap(),
            Err(e) => eprintln!("no {css}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let png = c.screenshot().await.unwrap();
    std::fs::write(out, png).unwrap();
    eprintln!("page errors: {:?}", browser.page_errors().await);
    eprintln!("console: {:?}", browser.console_errors().await);
    browser.close().await;
}
