//! `cargo xtask bench` part: how fast the Payloads surface opens a large capture.
//!
//! A release `pi-forge ui` gets one 5 MB provider request (2,000 messages) through the host
//! protocol, exactly as the bridge sends it. In headless Chromium each run reloads the editor,
//! switches to Payloads and measures (performance.now() in the page) the time from the click to
//! the first frame that shows the request's tree; then opening `messages` (first page of 100
//! children) and a search that must open the tree at message 1,999. Prints one JSON object with
//! median, min and max over the runs.
#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

const MESSAGES: usize = 2_000;
const RUNS: usize = 12;

/// Keeps the host's command stream open (a host without one is dropped after 5 s).
fn open_stream(server: &support::Server, host: &str) {
    let authority = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = TcpStream::connect(&authority).expect("connect");
    write!(
        stream,
        "GET /api/host/{host}/commands HTTP/1.1\r\nHost: {authority}\r\nx-pi-forge-token: {}\r\n\r\n",
        server.token
    )
    .unwrap();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
    });
}

fn payload() -> Value {
    let filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(44);
    let mut messages = vec![json!({"role": "system", "content": "You are the benchmark."})];
    for i in 1..MESSAGES {
        let role = if i % 2 == 1 { "user" } else { "assistant" };
        let marker = if i == MESSAGES - 1 {
            " needle-at-the-end"
        } else {
            ""
        };
        messages.push(json!({"role": role, "content": [{"type": "text", "text": format!("Message {i}. {filler}{marker}")}]}));
    }
    json!({"model": "bench-1", "messages": messages, "stream": true, "max_completion_tokens": 4096})
}

/// Runs `action` (a JS statement) and resolves with the ms until `css` is present in a painted
/// frame.
async fn timed(browser: &support::Browser, action: &str, css: &str) -> f64 {
    let script = format!(
        "const done = arguments[0]; const t0 = performance.now(); {action}; \
         const check = () => {{ if (document.querySelector({css:?})) {{ requestAnimationFrame(() => done(performance.now() - t0)); }} else {{ setTimeout(check, 2); }} }}; check();"
    );
    let value = browser
        .client
        .execute_async(&script, vec![])
        .await
        .expect("timed script");
    value.as_f64().expect("a number of ms")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = support::Server::start_with(&[("project/.pi/forge/config.json", "{}\n")], &[]);
    let hello = json!({
        "protocol": 1, "extensionVersion": env!("CARGO_PKG_VERSION"), "piVersion": "1.6.0", "mode": "rpc",
        "hasUI": false, "cwd": "/bench", "sessionId": "bench", "projectTrusted": true,
        "facts": {"tools": [{"name": "read"}], "activeTools": ["read"]}, "entries": []
    });
    let (status, welcome) = server.api("POST", "/api/host/hello", Some(&hello), None);
    assert_eq!(status, 200, "{welcome}");
    let host = welcome["hostId"].as_str().expect("hostId").to_string();
    open_stream(&server, &host);
    std::thread::sleep(Duration::from_millis(200));
    let body = json!({"sessionId": "bench", "seq": 1, "provider": "bench", "model": "bench-1", "api": "openai-completions", "dropped": 0, "payload": payload()});
    let bytes = body["payload"].to_string().len();
    let (status, answer) = server.api(
        "POST",
        &format!("/api/host/{host}/payload"),
        Some(&body),
        None,
    );
    assert_eq!(status, 200, "{answer}");

    let browser = support::Browser::start().await;
    browser.client.goto(&server.url).await.expect("navigation");
    let (mut open, mut expand, mut search) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        browser.client.goto(&server.base).await.expect("reload");
        browser.wait_app().await;
        open.push(
            timed(
                &browser,
                "[...document.querySelectorAll('.surface-tab')].find(b => b.textContent.includes('Payloads')).click()",
                ".json-tree .jn-row[data-path='']",
            )
            .await,
        );
        expand.push(
            timed(
                &browser,
                "document.querySelector(\".jn-row[data-path='/messages'] .jn-toggle\").click()",
                ".jn-row[data-path='/messages/99']",
            )
            .await,
        );
        search.push(
            timed(
                &browser,
                "const i = document.querySelector('.payload-search'); const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set; set.call(i, 'needle-at-the-end'); i.dispatchEvent(new Event('input', {bubbles: true}))",
                &format!(".jn-row.current-match[data-path='/messages/{}/content/0/text']", MESSAGES - 1),
            )
            .await,
        );
    }
    browser.assert_no_errors().await;
    browser.close().await;
    let report = json!({
        "payloadBytes": bytes,
        "messages": MESSAGES,
        "open": support::ms_stats(open),
        "expandMessages": support::ms_stats(expand),
        "searchToLastMessage": support::ms_stats(search),
        "targetOpenMs": 1000,
    });
    println!("{report}");
}
