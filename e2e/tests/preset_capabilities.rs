//! Browser tests of capabilities on a Preset: the Capabilities tab (bindings, overrides, the
//! effective capability and its diff, exact diagnostics, literal content), default tools
//! (`tools.initial`) in the Policy tab, the tool effect preview, and the layout of the new tab.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{pretty, sample_stack, Browser, Server, WAIT};

const STACKS: &str = "project/.pi/forge/prompt-stacks";
const CAPABILITIES: &str = "project/.pi/forge/capabilities";

fn stack_path(id: &str) -> String {
    format!("{STACKS}/{id}.json")
}

fn capability_path(id: &str) -> String {
    format!("{CAPABILITIES}/{id}.json")
}

fn capability(id: &str, content: &str, add: &[&str], remove: &[&str]) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.capability",
        "id": id,
        "content": content,
        "tools": { "add": add, "remove": remove }
    })
}

/// Starts a server with one project Preset and the given project capabilities, opens the editor
/// on the Preset and shows the Capabilities tab.
async fn start(stack: &Value, capabilities: &[Value], tab: &str) -> (Server, Browser) {
    let mut files: Vec<(String, String)> =
        vec![(stack_path(stack["id"].as_str().unwrap()), pretty(stack))];
    for c in capabilities {
        files.push((capability_path(c["id"].as_str().unwrap()), pretty(c)));
    }
    let server = Server::start_with(&files, &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser
        .wait_status(&format!("Loaded {}", stack["id"].as_str().unwrap()))
        .await;
    browser.tab(tab).await;
    (server, browser)
}

async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(css)],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

/// Polls until the text of `css` equals `want`.
async fn wait_text_eq(browser: &Browser, css: &str, want: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = browser.text(css).await;
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited {WAIT:?} for {css} to be {want:?}; it is {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls until the texts of every element matching `css` equal `want`.
async fn wait_texts(browser: &Browser, css: &str, want: Value) {
    let script = format!(
        "return [...document.querySelectorAll({})].map(e => e.textContent);",
        json!(css)
    );
    browser.wait_js(css, &script, want).await;
}

async fn wait_file(server: &Server, rel: &str, want: &Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got: Option<Value> = std::fs::read_to_string(server.path(rel))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if got.as_ref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited {WAIT:?} for {rel} to hold\n{want:#}\nit holds\n{got:#?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn assert_no_overflow(browser: &Browser, what: &str) {
    assert_eq!(
        browser.horizontal_overflow().await,
        Vec::<String>::new(),
        "{what}: horizontal overflow"
    );
}

#[tokio::test]
async fn bind_with_append_override_shows_the_effective_capability_and_saves_exactly() {
    let review = capability("review", "Review every change.", &["grep"], &["write"]);
    let (server, browser) = start(
        &sample_stack("worker", "Worker", "You are a worker."),
        &[review],
        "Capabilities",
    )
    .await;

    // Bind from the library: the UI writes the qualified ref.
    browser
        .wait_css("select[name='capability-pick'] option[value='project:review']")
        .await;
    browser
        .fill("select[name='capability-pick']", "project:review")
        .await;
    browser.click("button.add-binding-button").await;
    browser.wait_count("li.binding", 1).await;
    wait_text_eq(
        &browser,
        ".binding .effective-content",
        "Review every change.",
    )
    .await;
    assert_eq!(
        browser.text(".binding .effective-tools").await.as_deref(),
        Some("Tools: +grep −write")
    );
    assert_eq!(browser.count(".binding .override-diff").await, 0);

    // Append content and replace the removed tools.
    browser.click("#cap-0-details summary").await;
    browser
        .click("input[name='cap-0-content-mode'][value='append']")
        .await;
    browser.fill("#cap-0-content", "Say why.").await;
    browser.click("#cap-0-remove").await;
    browser
        .click(".tool-override[data-list='remove'] .pick[data-name='bash']")
        .await;

    wait_text_eq(
        &browser,
        ".binding .effective-content",
        "Review every change.\n\nSay why.",
    )
    .await;
    assert_eq!(
        browser.text(".binding .effective-tools").await.as_deref(),
        Some("Tools: +grep −bash")
    );
    assert_eq!(
        texts(&browser, ".binding .content-diff .diff-line").await,
        vec!["  Review every change.\n", "+ \n", "+ Say why.\n"]
    );
    assert_eq!(
        browser.text(".binding .tools-diff").await.as_deref(),
        Some("Tools: +grep −write → +grep −bash")
    );
    // The tool effect against the session's active tools (Pi's defaults in registry order:
    // read, bash, edit, write): the Preset alone changes nothing; with the binding grep joins
    // and bash goes.
    wait_texts(
        &browser,
        ".tool-effect .tool-delta",
        json!(["no change", "+grep −bash"]),
    )
    .await;
    wait_texts(
        &browser,
        ".tool-effect .tool-list",
        json!(["→ read, bash, edit, write", "→ read, edit, write, grep"]),
    )
    .await;

    // Layout of the new tab, with the disclosure open.
    browser.viewport(1280, 900).await;
    assert_no_overflow(&browser, "1280 px").await;
    browser.screenshot("preset-capabilities-binding").await;
    browser.viewport(390, 844).await;
    assert_no_overflow(&browser, "390 px").await;
    browser.viewport(1280, 900).await;

    browser.click("button.save").await;
    browser.wait_status("Saved worker").await;
    let mut want = sample_stack("worker", "Worker", "You are a worker.");
    want["capabilities"] = json!([{
        "ref": "project:review",
        "overrides": { "appendContent": "Say why.", "tools": { "remove": ["bash"] } }
    }]);
    wait_file(&server, &stack_path("worker"), &want).await;
    let saved: Value = server.read_json(&stack_path("worker"));
    assert_eq!(saved["capabilities"], want["capabilities"]);

    // After a reload the tab shows the same binding.
    browser.open(&server).await;
    browser.wait_status("Loaded worker").await;
    browser.tab("Capabilities").await;
    wait_text_eq(
        &browser,
        ".binding .effective-content",
        "Review every change.\n\nSay why.",
    )
    .await;
    assert_eq!(browser.value("#cap-0-ref").await, "project:review");

    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test]
async fn a_binding_to_a_missing_capability_shows_the_exact_diagnostic_and_focuses_the_ref() {
    let mut stack = sample_stack("worker", "Worker", "You are a worker.");
    stack["capabilities"] = json!([{ "ref": "project:gone" }]);
    let (_server, browser) = start(&stack, &[], "Capabilities").await;
    wait_text_eq(
        &browser,
        ".binding .binding-problem .message",
        "Capability binding gone at index 0 does not resolve: Capability not found: project:gone.",
    )
    .await;
    assert_eq!(browser.count(".binding .effective").await, 0);
    browser.click(".binding .binding-problem .fix-field").await;
    browser
        .wait_js(
            "the ref select is focused",
            "return document.activeElement && document.activeElement.id;",
            json!("cap-0-ref"),
        )
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test]
async fn overrides_that_do_not_apply_show_the_exact_diagnostic_and_focus_the_content() {
    let mut stack = sample_stack("worker", "Worker", "You are a worker.");
    stack["capabilities"] = json!([{ "ref": "project:notes", "overrides": { "content": " " } }]);
    let (_server, browser) = start(
        &stack,
        &[capability("notes", "Take notes.", &[], &[])],
        "Capabilities",
    )
    .await;
    wait_text_eq(
        &browser,
        ".binding .binding-problem .message",
        "Capability binding notes at index 0 does not apply: Capability needs non-whitespace content or at least one tool in tools.add or tools.remove.",
    )
    .await;
    browser.click(".binding .binding-problem .fix-field").await;
    browser
        .wait_js(
            "the override content is focused inside the opened disclosure",
            "return [document.activeElement && document.activeElement.id, document.getElementById('cap-0-details').open];",
            json!(["cap-0-content", true]),
        )
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test]
async fn capability_content_is_shown_as_literal_text() {
    let content = "<script>alert(1)</script> and {{ runtime.x }}";
    let mut stack = sample_stack("worker", "Worker", "You are a worker.");
    stack["capabilities"] = json!([{ "ref": "project:odd" }]);
    let (_server, browser) = start(
        &stack,
        &[capability("odd", content, &[], &[])],
        "Capabilities",
    )
    .await;
    wait_text_eq(&browser, ".binding .effective-content", content).await;
    assert_eq!(
        browser
            .js(
                "return document.querySelectorAll('.capabilities-tab script').length;",
                vec![]
            )
            .await,
        json!(0)
    );
    assert_eq!(
        browser
            .js(
                "return [...document.scripts].some(s => s.textContent.includes('alert(1)'));",
                vec![]
            )
            .await,
        json!(false)
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test]
async fn default_tools_outside_the_deny_ceiling_are_an_error_that_blocks_saving() {
    let mut stack = sample_stack("worker", "Worker", "You are a worker.");
    stack["tools"] = json!({ "deny": ["bash"] });
    let (server, browser) = start(&stack, &[], "Policy").await;
    browser.click("input[name='tools-initial-on']").await;
    browser
        .click(".default-tools .pick[data-name='bash']")
        .await;
    wait_text_eq(
        &browser,
        ".default-tools .initial-problems li",
        "tools.initial entry bash is excluded by the tools policy.",
    )
    .await;
    assert!(!browser.enabled("button.save").await);
    // The tool effect: a starting set of nothing but read.
    browser
        .click(".default-tools .pick[data-name='bash']")
        .await;
    browser
        .click(".default-tools .pick[data-name='read']")
        .await;
    browser
        .wait_count(".default-tools .initial-problems li", 0)
        .await;
    wait_texts(
        &browser,
        ".tool-effect .tool-delta",
        json!(["−bash −edit −write"]),
    )
    .await;
    assert!(browser.enabled("button.save").await);
    browser.screenshot("preset-default-tools").await;
    browser.click("button.save").await;
    browser.wait_status("Saved worker").await;
    let saved: Value = server.read_json(&stack_path("worker"));
    assert_eq!(
        saved["tools"],
        json!({ "deny": ["bash"], "initial": ["read"] })
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test]
async fn a_global_preset_lists_project_capabilities_disabled() {
    let stack = sample_stack("shared", "Shared", "Shared.");
    let files = [
        (
            "global/prompt-stacks/shared.json".to_string(),
            pretty(&stack),
        ),
        (
            capability_path("local"),
            pretty(&capability("local", "Local.", &[], &[])),
        ),
        (
            "global/capabilities/everywhere.json".to_string(),
            pretty(&capability("everywhere", "Everywhere.", &[], &[])),
        ),
    ];
    let server = Server::start_with(&files, &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded shared").await;
    browser.tab("Capabilities").await;
    browser
        .wait_css("select[name='capability-pick'] option[value='project:local']")
        .await;
    assert_eq!(
        browser
            .js(
                "const o = document.querySelector(\"select[name='capability-pick'] option[value='project:local']\"); return [o.disabled, o.textContent];",
                vec![]
            )
            .await,
        json!([true, "project:local — a global Preset cannot bind a project capability"])
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector(\"select[name='capability-pick'] option[value='global:everywhere']\").disabled;",
                vec![]
            )
            .await,
        json!(false)
    );
    browser.assert_no_errors().await;
    browser.close().await;
}
