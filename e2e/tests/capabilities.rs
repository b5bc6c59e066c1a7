//! Browser tests of the capabilities surface (capabilities spec B1–B2, web-editor spec §3.5):
//! create with content and a tool patch, literal content, the stale-save conflict, external
//! edits reaching an open editor, fork, delete, untrusted mode and narrow layouts.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{pretty, Browser, Server};

const CAPS: &str = "project/.pi/forge/capabilities";
const GLOBAL_CAPS: &str = "global/capabilities";
const STACKS: &str = "project/.pi/forge/prompt-stacks";

fn file(dir: &str, id: &str) -> String {
    format!("{dir}/{id}.json")
}

fn capability(id: &str, name: &str, content: &str, add: &[&str], remove: &[&str]) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.capability",
        "id": id,
        "name": name,
        "content": content,
        "tools": { "add": add, "remove": remove }
    })
}

fn stack_binding(id: &str, reference: &str) -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "items": [
            { "kind": "block", "id": "1", "role": "system", "content": "Review the diff. Be brief." },
            { "kind": "slot", "id": "2", "slot": "chat-history" }
        ],
        "capabilities": [{ "ref": reference }]
    }))
}

async fn show_capabilities(browser: &Browser) {
    browser.click_text(".surface-tab", "Capabilities").await;
    browser.wait_css(".capabilities").await;
}

/// The texts of all elements matching `css`.
async fn texts(browser: &Browser, css: &str) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(css)],
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_a_capability_with_content_and_a_tool_patch() {
    let server = Server::start_with(
        &[(
            &file(STACKS, "review"),
            &stack_binding("review", "project:careful"),
        )],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    show_capabilities(&browser).await;
    browser.wait_status("0 capabilities").await;
    assert_eq!(
        browser.text(".capability-list .empty").await.as_deref(),
        Some("No capabilities yet.")
    );

    browser.click(".sidebar button.new-capability").await;
    browser
        .wait_eq(".capability-editor h2", "New capability")
        .await;
    assert_eq!(
        browser.text(".capability-editor .never-activates").await.as_deref(),
        Some("Saving never activates a capability: a Pi session turns it on (/capability enable, or a Preset binding).")
    );
    // Nothing typed yet: Save is off, but the form does not open with errors (before: two).
    assert!(!browser.enabled(".save-capability").await);
    assert_eq!(browser.count(".capability-editor .validation").await, 0);
    assert_eq!(browser.count(".capability-editor .field-error").await, 0);
    // Typed in: the id is there, and B1 needs content or a tool change.
    browser.fill("input[name=capability-id]", "careful").await;
    assert_eq!(
        texts(&browser, ".capability-editor .validation .message").await,
        json!(["Capability needs non-whitespace content or at least one tool in tools.add or tools.remove."])
    );
    assert!(!browser.enabled(".save-capability").await);

    let content = "Run <script>alert(1)</script> nowhere.\n{{ runtime.x }} stays as written.";
    browser.fill("input[name=capability-name]", "Careful").await;
    browser
        .fill("textarea[name=capability-content]", content)
        .await;
    // Tools: one from the grouped picker (an inactive registered tool), one typed by name.
    browser
        .click(".tool-list[data-tools=tools-add] .pick[data-name=grep]")
        .await;
    browser
        .fill(
            ".tool-list[data-tools=tools-remove] input[name=tools-remove-input]",
            "write",
        )
        .await;
    browser
        .click(".tool-list[data-tools=tools-remove] button.add-tool")
        .await;
    browser
        .fill(
            ".tool-list[data-tools=tools-remove] input[name=tools-remove-input]",
            "bad name",
        )
        .await;
    browser
        .click(".tool-list[data-tools=tools-remove] button.add-tool")
        .await;
    assert_eq!(
        browser.text(".tool-list[data-tools=tools-remove] .field-error").await.as_deref(),
        Some("bad name is not a tool name: 1 to 128 characters, no spaces, no control characters, no * or ?.")
    );
    assert_eq!(
        texts(
            &browser,
            ".tool-list[data-tools=tools-add] .chip .chip-text"
        )
        .await,
        json!(["grep"])
    );
    assert_eq!(browser.count(".capability-editor .validation").await, 0);
    browser.click(".save-capability").await;
    browser.wait_status("Created careful").await;

    // On disk: exactly what was typed, in the canonical layout.
    assert_eq!(
        server.read(&file(CAPS, "careful")),
        pretty(&json!({
            "schemaVersion": 1,
            "type": "pi-forge.capability",
            "id": "careful",
            "name": "Careful",
            "content": content,
            "tools": { "add": ["grep"], "remove": ["write"] }
        }))
    );

    // The view, after a full reload: literal content (no script element), the patch, the
    // Preset that binds it.
    browser.open(&server).await;
    show_capabilities(&browser).await;
    browser.wait_eq(".capability-detail h2", "Careful").await;
    assert_eq!(
        browser.text(".capability-content").await.as_deref(),
        Some(content)
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelectorAll('.capability-detail script').length;",
                vec![]
            )
            .await,
        json!(0)
    );
    assert_eq!(
        texts(&browser, ".capability-detail .tool-patch .chip-text").await,
        json!(["+grep", "−write"])
    );
    assert_eq!(
        texts(&browser, ".capability-detail .bound-list li").await,
        json!(["project:review"])
    );
    assert_eq!(
        texts(&browser, ".capability-row .row-bound").await,
        json!(["bound by project:review"])
    );
    browser.screenshot("capabilities-library").await;

    // "Bound by" opens the Preset.
    browser.click(".bound-list .open-preset").await;
    browser.wait_css(".presets").await;
    browser
        .wait_count(".stack-row.selected[data-selector='project:review']", 1)
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_save_conflicts_and_external_edits_reach_the_editor() {
    let saved = capability("careful", "Careful", "Be careful.", &[], &["write"]);
    let saved_text = pretty(&saved);
    let server = Server::start_with(&[(&file(CAPS, "careful"), &saved_text)], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    show_capabilities(&browser).await;
    browser.wait_eq(".capability-detail h2", "Careful").await;
    browser.click(".edit-capability").await;
    browser
        .wait_eq(".capability-editor h2", "Edit project:careful")
        .await;

    // A clean editor follows an external edit within a second.
    let mut theirs = saved.clone();
    theirs["content"] = json!("Be very careful.");
    let started = Instant::now();
    server.write_external(&file(CAPS, "careful"), &pretty(&theirs));
    browser
        .wait_js(
            "editor follows the external edit",
            "return document.querySelector('textarea[name=capability-content]').value;",
            json!("Be very careful."),
        )
        .await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the open editor showed the external edit after {took:?}"
    );
    assert_eq!(browser.count(".capability-editor .badge.dirty").await, 0);

    // Dirty, then changed on disk: the banner; Keep mine, then Save is refused (409) and
    // nothing on disk changes.
    browser
        .fill("textarea[name=capability-content]", "Mine.")
        .await;
    let mut third = theirs.clone();
    third["content"] = json!("Theirs, again.");
    let third_text = pretty(&third);
    server.write_external(&file(CAPS, "careful"), &third_text);
    browser
        .wait_text(".disk-changed", "This capability changed on disk.")
        .await;
    browser.click(".disk-changed .keep-mine").await;
    browser.click(".save-capability").await;
    browser.wait_text(".conflict", "changed on disk").await;
    assert_eq!(
        browser.text(".conflict span").await.as_deref(),
        Some("Not saved: the file changed on disk since you opened it.")
    );
    browser
        .wait_status("Not saved: careful changed on disk.")
        .await;
    browser
        .expect_failed_requests(
            &server,
            &["/api/capabilities/project%3Acareful 409 (Conflict)"],
        )
        .await;
    assert_eq!(server.read(&file(CAPS, "careful")), third_text);
    assert_eq!(
        browser.value("textarea[name=capability-content]").await,
        "Mine."
    );

    // Use the disk version: the form shows it, clean.
    browser.click(".conflict .reload-disk").await;
    browser
        .wait_js(
            "form reloaded",
            "return document.querySelector('textarea[name=capability-content]').value;",
            json!("Theirs, again."),
        )
        .await;
    assert_eq!(browser.count(".conflict").await, 0);
    browser.click(".capability-editor button.cancel").await;
    browser.wait_css(".capability-detail").await;

    // Copy to global, then delete the project one with confirm.
    browser.click(".fork-capability").await;
    assert_eq!(browser.value("input[name=fork-id]").await, "careful");
    browser.click(".fork-form .do-fork").await;
    browser
        .wait_status("Copied project:careful to global:careful")
        .await;
    assert_eq!(server.read_json(&file(GLOBAL_CAPS, "careful")), third);
    browser
        .click_text(".capability-row", "project:careful")
        .await;
    browser
        .wait_eq(".capability-detail .selector", "project:careful")
        .await;
    browser.click(".delete-capability").await;
    browser.wait_css(".modal").await;
    browser.click(".modal button.danger").await;
    browser.wait_status("Deleted careful").await;
    assert!(!server.path(&file(CAPS, "careful")).exists());
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_project_capabilities_are_read_only_and_global_ones_editable() {
    let server = Server::start_with(
        &[
            (
                &file(CAPS, "local"),
                &pretty(&capability("local", "Local", "Project rule.", &[], &[])),
            ),
            (
                &file(GLOBAL_CAPS, "shared"),
                &pretty(&capability("shared", "Shared", "Global rule.", &[], &[])),
            ),
        ],
        &["--untrusted"],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    show_capabilities(&browser).await;
    browser.wait_css(".capability-row").await;
    let rows = texts(&browser, ".capability-row .row-id").await;
    for row in rows.as_array().unwrap() {
        let sel = row.as_str().unwrap().to_string();
        browser.click_text(".capability-row", &sel).await;
        browser.wait_eq(".capability-detail .selector", &sel).await;
        if sel.starts_with("project:") {
            assert!(!browser.enabled(".edit-capability").await);
            assert!(!browser.enabled(".delete-capability").await);
            assert_eq!(
                browser.text(".capability-detail .read-only").await.as_deref(),
                Some("This project is not trusted: its capabilities are read-only. Global capabilities stay editable.")
            );
        } else {
            assert!(browser.enabled(".edit-capability").await);
            assert_eq!(browser.count(".capability-detail .read-only").await, 0);
        }
    }
    // Global stays editable.
    browser.click_text(".capability-row", "global:shared").await;
    browser.click(".edit-capability").await;
    browser
        .fill("textarea[name=capability-content]", "Global rule, edited.")
        .await;
    browser.click(".save-capability").await;
    browser.wait_status("Saved global:shared").await;
    assert_eq!(
        server.read_json(&file(GLOBAL_CAPS, "shared"))["content"],
        "Global rule, edited."
    );
    // A new capability goes to the global library.
    browser.click(".sidebar button.new-capability").await;
    assert_eq!(
        browser.value("select[name=capability-scope]").await,
        "global"
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layouts_fit_and_a_block_becomes_a_capability() {
    let long = "x".repeat(400);
    let server = Server::start_with(
        &[
            (
                &file(CAPS, "careful"),
                &pretty(&capability(
                    "careful",
                    "A capability with a rather long name to wrap",
                    &format!("{long}\nSecond line."),
                    &["grep", "find"],
                    &["write", "edit"],
                )),
            ),
            (&file(STACKS, "review"), &stack_binding("review", "careful")),
        ],
        &[],
    );
    let browser = Browser::start().await;
    for width in [1280, 390] {
        browser.viewport(width, 900).await;
        browser.open(&server).await;
        show_capabilities(&browser).await;
        browser.wait_css(".capability-detail").await;
        assert_eq!(
            browser.horizontal_overflow().await,
            Vec::<String>::new(),
            "detail at {width} px"
        );
        browser.click(".edit-capability").await;
        browser.wait_css(".capability-editor").await;
        assert_eq!(
            browser.horizontal_overflow().await,
            Vec::<String>::new(),
            "editor at {width} px"
        );
        if width == 1280 {
            browser.screenshot("capabilities-editor").await;
        }
        browser.click(".capability-editor button.cancel").await;
    }

    // A Preset block's text starts a new capability (literal text, unsaved until Create).
    browser.viewport(1280, 900).await;
    browser.click_text(".surface-tab", "Presets").await;
    browser
        .wait_count(".stack-row.selected[data-selector='project:review']", 1)
        .await;
    browser.click(".item-row[data-index='0']").await;
    browser.click(".new-capability-from-block").await;
    browser
        .wait_eq(".capability-editor h2", "New capability")
        .await;
    assert_eq!(
        browser.value("textarea[name=capability-content]").await,
        "Review the diff. Be brief."
    );
    browser.assert_no_errors().await;
    browser.close().await;
}
