//! `cargo xtask bench` part: time from navigation to a rendered stack list in headless
//! Chromium, against a release `pi-forge ui` serving 50 stacks.
//!
//! The app sets the performance mark `pi-forge:stack-list` in the first animation frame after
//! the list rendered; its `startTime` is milliseconds since the navigation started (the first
//! run includes the token exchange and an empty cache; later runs reload with a warm cache).
//! Prints one JSON object.
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

const STACKS: usize = 50;
const RUNS: usize = 15;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let files: Vec<(String, String)> = (0..STACKS)
        .map(|i| {
            let id = format!("stack-{i:02}");
            let body = serde_json::json!({
                "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": id, "name": format!("Stack {i}"),
                "items": [
                    { "kind": "block", "id": "role", "role": "system", "content": "You are a careful assistant." },
                    { "kind": "slot", "id": "history", "slot": "chat-history" }
                ]
            });
            (format!("project/.pi/forge/prompt-stacks/{id}.json"), body.to_string())
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let server = support::Server::start_with(&refs, &[]);
    let browser = support::Browser::start().await;
    let mut cold = None;
    let mut warm = Vec::new();
    for run in 0..=RUNS {
        let url = if run == 0 {
            server.url.clone()
        } else {
            server.base.clone()
        };
        browser.client.goto(&url).await.expect("navigation");
        let ms = wait_mark(&browser).await;
        let rows = browser.count(".stack-row").await;
        assert_eq!(rows, STACKS, "the list shows every stack");
        if run == 0 {
            cold = Some(ms);
        } else {
            warm.push(ms);
        }
    }
    browser.assert_no_errors().await;
    browser.close().await;
    warm.sort_by(f64::total_cmp);
    let pick = |q: f64| warm[((warm.len() - 1) as f64 * q).round() as usize];
    let report = serde_json::json!({
        "stacks": STACKS,
        "runs": RUNS,
        "firstNavigationMs": round(cold.unwrap_or(f64::NAN)),
        "reloadMedianMs": round(pick(0.5)),
        "reloadP90Ms": round(pick(0.9)),
        "targetMs": 500,
    });
    println!("{report}");
}

async fn wait_mark(browser: &support::Browser) -> f64 {
    let script = "const m = performance.getEntriesByName('pi-forge:stack-list'); return m.length ? m[0].startTime : null;";
    for _ in 0..2000 {
        if let Some(ms) = browser.js(script, vec![]).await.as_f64() {
            return ms;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the app never marked pi-forge:stack-list");
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}
