//! Payload capture and the run diff against a real Pi 1.6.0 (RPC mode) and a fake model that
//! records the bodies and headers it receives. Expected values come from those recorded bytes.

mod pi;
mod support;

use std::time::Duration;

use forge_core::diff::text::{diff_lines, LineTag};
use forge_core::json::to_canonical;
use forge_core::payload::redact;
use pi::{poll, Workspace, FAKE_API_KEY};
use serde_json::Value;

fn probe_stack(rule: &str) -> String {
    format!(
        r#"{{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "probe",
  "mode": "replace",
  "items": [
    {{ "id": "sys", "kind": "block", "role": "system", "content": "You are the payload probe.\nAnswer in one line. {rule}" }},
    {{ "id": "hist", "kind": "slot", "slot": "chat-history" }}
  ]
}}
"#
    )
}

/// Waits until the server holds `count` captures, the last with usage; returns the list.
fn captures(ws: &Workspace, count: usize) -> Value {
    poll(Duration::from_secs(20), || {
        let (status, list) = ws.api("GET", "/api/payloads", "");
        let turns = list["turns"].as_array()?;
        (status == 200 && turns.len() == count && turns[count - 1]["usage"].is_object())
            .then_some(list)
    })
    .unwrap_or_else(|| {
        panic!(
            "the server never held {count} captures with usage: {}",
            ws.api("GET", "/api/payloads", "").1
        )
    })
}

fn raw_capture(ws: &Workspace, turn: &str) -> String {
    let (authority, token) = ws.editor().expect("the editor runs");
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    use std::io::{Read as _, Write as _};
    write!(
        stream,
        "GET /api/payloads/{turn}?download=1 HTTP/1.1\r\nHost: {authority}\r\nx-pi-forge-token: {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

fn block_role(block: &Value) -> String {
    let side = if block["after"].is_object() {
        &block["after"]
    } else {
        &block["before"]
    };
    side["role"].as_str().unwrap().to_string()
}

#[test]
fn captures_are_what_the_model_received_with_usage_cache_and_run_diff() {
    let ws = Workspace::new(&[(
        ".pi/forge/prompt-stacks/probe.json",
        &probe_stack("Be brief."),
    )]);
    let mut pi = ws.pi(&[]);
    pi.connected();
    assert_eq!(
        pi.command("/forge preset probe"),
        "pi-forge: Preset project:probe active"
    );

    pi.prompt("first question");
    // Before any cache report, the ratio is "not reported" (null), never 0 %.
    let one = captures(&ws, 1);
    assert_eq!(one["turns"][0]["usage"]["cacheReporting"], "not-reported");
    assert_eq!(one["turns"][0]["usage"]["cacheHitRatio"], Value::Null);
    assert_eq!(one["turns"][0]["usage"]["input"], 10);

    pi.prompt("second question");
    let list = captures(&ws, 2);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 2);

    // Each capture is the recorded body after the same redaction, as canonical JSON.
    for (i, body) in bodies.iter().enumerate() {
        let turn = list["turns"][i]["turnId"].as_str().unwrap();
        assert_eq!(turn, format!("turn-{}", i + 1));
        let (status, captured) = ws.api("GET", &format!("/api/payloads/{turn}"), "");
        assert_eq!(status, 200);
        assert_eq!(
            to_canonical(&captured),
            to_canonical(&redact(body)),
            "{turn}"
        );
        assert_eq!(
            captured["max_completion_tokens"], 1000,
            "token counts are kept"
        );
        assert_eq!(list["turns"][i]["provider"], "fake");
        assert_eq!(list["turns"][i]["model"], "fake-1");
        assert_eq!(list["turns"][i]["api"], "openai-completions");
        assert_eq!(list["turns"][i]["requestSeq"], i as u64 + 1);
        assert_eq!(
            list["turns"][i]["bytes"],
            forge_core::json::to_compact(&captured).len()
        );
    }

    // The provider's cache report on the second answer: 30 of 40 prompt tokens read from cache.
    let usage = &list["turns"][1]["usage"];
    assert_eq!(usage["cacheRead"], 30);
    assert_eq!(usage["input"], 10);
    assert_eq!(usage["promptTokens"], 40);
    assert_eq!(usage["cacheReporting"], "reported");
    assert_eq!(usage["cacheHitRatio"], 0.75);

    // Run diff turn-1 → turn-2: the system message and the first question unchanged, the
    // assistant answer and the new question appended, the cached prefix ending at the answer.
    let (status, diff) = ws.api("GET", "/api/payloads/diff", "");
    assert_eq!(status, 200);
    assert_eq!(diff["from"]["turnId"], "turn-1");
    assert_eq!(diff["to"]["turnId"], "turn-2");
    let messages: Vec<(String, String)> = diff["diff"]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| block_role(b) != "request")
        .map(|b| (block_role(b), b["status"].as_str().unwrap().to_string()))
        .collect();
    let pairs: Vec<(&str, &str)> = messages
        .iter()
        .map(|(r, s)| (r.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("system", "same"),
            ("user", "same"),
            ("assistant", "added"),
            ("user", "added")
        ]
    );
    assert_eq!(diff["diff"]["summary"]["added"], 2);
    assert_eq!(diff["diff"]["summary"]["modified"], 0);
    assert_eq!(diff["diff"]["summary"]["removed"], 0);
    let boundary = diff["prefixBoundary"].as_str().unwrap();
    assert!(boundary.starts_with("message-assistant-"), "{boundary}");
    assert_eq!(diff["to"]["usage"]["cacheRead"], 30);

    // A Preset edit between turns: the system block is modified, exactly the edited words marked.
    std::fs::write(
        ws.project().join(".pi/forge/prompt-stacks/probe.json"),
        probe_stack("Be thorough."),
    )
    .unwrap();
    poll(Duration::from_secs(10), || {
        let (_, stack) = ws.api("GET", "/api/stacks/probe", "");
        stack.to_string().contains("Be thorough.").then_some(())
    })
    .expect("the watcher picked up the edit");
    pi.prompt("third question");
    captures(&ws, 3);
    let (_, diff) = ws.api("GET", "/api/payloads/diff", "");
    assert_eq!(diff["from"]["turnId"], "turn-2");
    let modified: Vec<&Value> = diff["diff"]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["status"] == "modified")
        .collect();
    assert_eq!(modified.len(), 1, "{diff}");
    assert_eq!(block_role(modified[0]), "system");
    assert_eq!(
        diff["prefixBlocks"], 1,
        "only the model field precedes the edit"
    );
    let lines = diff_lines(
        modified[0]["before"]["text"].as_str().unwrap(),
        modified[0]["after"]["text"].as_str().unwrap(),
    );
    let marked = |tag: LineTag| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.tag == tag)
            .flat_map(|l| l.spans.iter().filter(|s| s.changed).map(|s| s.text.clone()))
            .collect()
    };
    assert_eq!(marked(LineTag::Removed).concat(), "brief");
    assert_eq!(marked(LineTag::Added).concat(), "thorough");

    // The API key travelled in the Authorization header and nowhere else pi-forge keeps things.
    let headers = ws.model.headers.lock().unwrap().clone();
    assert!(headers[0]
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&format!("authorization: Bearer {FAKE_API_KEY}"))));
    let (status, saved) = ws.api("POST", "/api/payloads/turn-1/save", "");
    assert_eq!(status, 201, "{saved}");
    let file = std::fs::read_to_string(saved["path"].as_str().unwrap()).unwrap();
    assert!(saved["path"].as_str().unwrap().starts_with(
        &ws.project()
            .join(".pi/forge/payloads/pi-forge-turn-1-")
            .display()
            .to_string()
    ));
    assert_eq!(
        to_canonical(&serde_json::from_str(&file).unwrap()),
        to_canonical(&redact(&bodies[0]))
    );
    let mut seen = vec![
        ws.api("GET", "/api/payloads", "").1.to_string(),
        ws.api("GET", "/api/payloads/diff?from=turn-1&to=turn-3", "")
            .1
            .to_string(),
        raw_capture(&ws, "turn-1"),
        raw_capture(&ws, "turn-3"),
        file,
    ];
    let log = std::env::temp_dir().join(format!("pi-forge-ui-{}.log", process_uid()));
    seen.extend(std::fs::read_to_string(log).ok());
    for text in &seen {
        assert!(!text.contains(FAKE_API_KEY), "the API key leaked: {text}");
    }
    assert!(raw_capture(&ws, "turn-1")
        .contains("content-disposition: attachment; filename=\"pi-forge-turn-1-"));

    // The same captures from the terminal.
    let text = |args: &[&str]| {
        let out = ws.forge(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = text(&["payload", "list"]);
    let rows: Vec<&str> = listed.lines().collect();
    assert_eq!(rows.len(), 4, "{listed}");
    assert!(
        rows[2].starts_with("turn-2 ")
            && rows[2].contains("fake/fake-1")
            && rows[2].ends_with("  75.0%"),
        "{listed}"
    );
    assert!(rows[1].ends_with("  not reported"), "{listed}");
    let shown: Value = serde_json::from_str(&text(&["payload", "show", "turn-1"])).unwrap();
    assert_eq!(to_canonical(&shown), to_canonical(&redact(&bodies[0])));
    let cli_diff = text(&["payload", "diff", "turn-1", "turn-2"]);
    assert!(
        cli_diff.starts_with("turn-1 → turn-2: 2 added · 0 removed · 0 modified · "),
        "{cli_diff}"
    );
    assert!(
        cli_diff.contains("Provider: 30 cached of 40 prompt tokens (cache hit 75.0%)"),
        "{cli_diff}"
    );
    let edit_diff = text(&["payload", "diff"]);
    assert!(
        edit_diff.contains(
            "    - Answer in one line. Be brief.\n    + Answer in one line. Be thorough.\n"
        ),
        "{edit_diff}"
    );
    let json_diff: Value = serde_json::from_str(&text(&["payload", "diff", "--json"])).unwrap();
    assert_eq!(json_diff, ws.api("GET", "/api/payloads/diff", "").1);

    // Clearing forgets everything.
    let (status, cleared) = ws.api("DELETE", "/api/payloads", "");
    assert_eq!(status, 200);
    assert_eq!(cleared["turns"], serde_json::json!([]));
    assert_eq!(ws.api("GET", "/api/payloads/turn-1", "").0, 404);
}

/// The JSON pointer of the first string in `value` that contains `needle`.
fn pointer_of(value: &Value, needle: &str, at: &str) -> Option<String> {
    match value {
        Value::String(s) if s.contains(needle) => Some(at.to_string()),
        Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| pointer_of(v, needle, &format!("{at}/{k}"))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| pointer_of(v, needle, &format!("{at}/{i}"))),
        _ => None,
    }
}

/// The uid the extension names its log after (`process.getuid()`).
fn process_uid() -> String {
    let out = std::process::Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn capturing_never_changes_the_request() {
    let ws = Workspace::new(&[(".pi/forge/config.json", "{}\n")]);
    // Session 1: capture off.
    let mut pi = ws.pi(&[]);
    pi.connected();
    assert_eq!(
        pi.command("/forge payload off"),
        "pi-forge: not capturing provider requests in this session"
    );
    pi.prompt("the same question");
    let (_, list) = ws.api("GET", "/api/payloads", "");
    assert_eq!(list["turns"], serde_json::json!([]), "nothing was captured");
    pi.quit();
    // Session 2: capture on (the default), armed from Pi with save.
    let mut pi = ws.pi(&[]);
    pi.connected();
    assert_eq!(
        pi.command("/forge payload next save"),
        "pi-forge: the next provider request will be captured and saved to .pi/forge/payloads/"
    );
    pi.prompt("the same question");
    let is_note = |e: &Value| {
        e["method"] == "notify"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("pi-forge: captured turn-1 ("))
    };
    // The notification may come before or after the agent settles.
    let note = match pi.seen.iter().find(|e| is_note(e)).cloned() {
        Some(note) => note,
        None => pi.wait("the capture notification", is_note),
    };
    let note = note["message"].as_str().unwrap().to_string();
    let saved_dir = ws.project().join(".pi/forge/payloads");
    assert!(
        note.contains(&format!(
            " · saved to {}/pi-forge-turn-1-",
            saved_dir.display()
        )),
        "{note}"
    );
    let saved: Vec<_> = std::fs::read_dir(&saved_dir).unwrap().flatten().collect();
    assert_eq!(saved.len(), 1);
    captures(&ws, 1);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 2);
    // The session id is the one thing that differs between two sessions' requests.
    let strip = |body: &Value| {
        let mut body = body.clone();
        if let Some(map) = body.as_object_mut() {
            map.remove("prompt_cache_key");
        }
        to_canonical(&body)
    };
    assert_eq!(strip(&bodies[0]), strip(&bodies[1]));
    assert!(bodies[1].to_string().contains("the same question"));
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(saved[0].path()).unwrap()).unwrap();
    assert_eq!(to_canonical(&saved), to_canonical(&redact(&bodies[1])));
    assert_eq!(
        pi.command("/forge payload clear"),
        "pi-forge: captures cleared"
    );
    assert_eq!(
        ws.api("GET", "/api/payloads", "").1["turns"],
        serde_json::json!([])
    );
}

/// The Payloads surface against a live Pi: arm from the browser, the capture appears without a
/// reload, search opens the tree at a match deep in a message, download is the stored JSON, and
/// the run diff shows the appended messages. Also the user guide's screenshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_arms_inspects_searches_downloads_and_diffs() {
    let ws = Workspace::new(&[(
        ".pi/forge/prompt-stacks/probe.json",
        &probe_stack("Be brief."),
    )]);
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    assert_eq!(
        pi.command("/forge preset probe"),
        "pi-forge: Preset project:probe active"
    );

    let browser = ws.browser().await;
    browser.click_text(".surface-tab", "Payloads").await;
    browser
        .wait_eq(
            ".capture-rows .empty",
            "No captured provider turns yet: Pi is connected, and every request it sends for a prompt is captured here (and compared in the run diff). Send a prompt in Pi.",
        )
        .await;
    browser
        .wait_text(".blind-spots", "extensions loaded after pi-forge")
        .await;
    browser.click("button.arm").await;
    browser.wait_css(".armed-note").await;
    assert_eq!(ws.api("GET", "/api/payloads", "").1["armed"]["by"], "web");

    let long_prompt = format!(
        "{} The marker needle-deep-7731 sits in the middle. {}",
        "Context line. ".repeat(40),
        "More context. ".repeat(40)
    );
    pi.prompt(&long_prompt);
    // No reload: the server's event brings the capture, pinned and selected.
    browser
        .wait_css(".capture-row[data-turn='turn-1'].selected")
        .await;
    browser.wait_status("Captured turn-1.").await;
    browser.wait_count(".capture-row .badge.active", 1).await;
    browser.wait_css(".json-tree .jn-row[data-path='']").await;

    browser.fill(".payload-search", "needle-deep-7731").await;
    browser.wait_eq(".match-count", "1 of 1").await;
    let at = pointer_of(&ws.model.bodies()[0], "needle-deep-7731", "")
        .expect("the model got the needle");
    assert!(at.starts_with("/messages/1/content"), "{at}");
    browser
        .wait_css(&format!(".jn-row.current-match[data-path='{at}']"))
        .await;
    assert!(browser.in_viewport(".jn-row.current-match").await);
    browser.screenshot("payload-inspector").await;

    // Download is the stored JSON: the recorded body after redaction.
    let href = browser
        .js(
            "return document.querySelector('a.download').getAttribute('href')",
            vec![],
        )
        .await;
    assert_eq!(href, "/api/payloads/turn-1?download=1");
    let downloaded = browser
        .js(
            "return fetch('/api/payloads/turn-1?download=1').then(r => r.text())",
            vec![],
        )
        .await;
    let downloaded: Value = serde_json::from_str(downloaded.as_str().unwrap()).unwrap();
    let bodies = ws.model.bodies();
    assert_eq!(to_canonical(&downloaded), to_canonical(&redact(&bodies[0])));

    // A second prompt, then the run diff.
    pi.prompt("and a follow-up");
    browser.wait_css(".capture-row[data-turn='turn-2']").await;
    browser.click(".tab-diff").await;
    browser
        .wait_text(".run-meta .diff-summary", "turn-1 → turn-2")
        .await;
    browser.wait_count(".run-diff .diff-block.added", 2).await;
    browser
        .wait_count(".run-diff .diff-block.modified", 0)
        .await;
    browser.wait_css(".run-diff .prefix-boundary").await;
    browser
        .wait_text(
            ".provider-line",
            "Provider: 30 of 40 prompt tokens read from cache (cache hit 75.0%)",
        )
        .await;
    browser.screenshot("payload-run-diff").await;
    // The same view in the Preset dock, next to Compiled and Draft diff.
    browser.click_text(".surface-tab", "Presets").await;
    browser
        .click(".stack-row[data-selector='project:probe']")
        .await;
    browser.click("button.preview-toggle").await;
    browser.click(".dock .dock-run").await;
    browser
        .wait_count(".dock .run-diff .diff-block.added", 2)
        .await;
    browser
        .wait_text(".dock .run-meta .diff-summary", "turn-1 → turn-2")
        .await;
    browser.click(".dock button.open-payloads").await;
    browser.wait_css(".payloads .tab-diff.current").await;
    // Phone width: no horizontal overflow.
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    browser.viewport(1280, 900).await;
    assert_eq!(browser.page_errors().await, Vec::<String>::new());
    browser.close().await;
}
