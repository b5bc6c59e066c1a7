//! Browser test of the import dialog with a SillyTavern chat-completion preset (issue 6): the
//! character choice, the migration report before anything is written, an id that already
//! exists, and files that are not presets.

mod support;

use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use serde_json::{json, Value};
use support::{Browser, Server, WAIT};

const STACKS: &str = "project/.pi/forge/prompt-stacks";

/// A file's text as pi-forge writes it (`JSON.stringify(v, null, 2)` plus a newline).
fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

/// The Preset the project starts with (the More menu needs an open Preset).
fn default_stack() -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "default",
        "items": [{ "kind": "slot", "id": "history", "slot": "chat-history" }]
    }))
}

/// A SillyTavern chat-completion preset with two characters whose prompt orders differ: a main
/// prompt, markers (chat history, world info, character description), a prompt the order
/// disables, an absolute-depth injection, user and assistant prompts, and a sampler setting.
fn preset() -> Value {
    json!({
        "temperature": 0.7,
        "prompts": [
            { "identifier": "main", "name": "Main Prompt", "system_prompt": true, "role": "system",
              "content": "Write {{char}}'s next reply in a roleplay with {{user}}." },
            { "identifier": "chatHistory", "name": "Chat History", "system_prompt": true, "marker": true },
            { "identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": true, "marker": true },
            { "identifier": "charDescription", "name": "Char Description", "system_prompt": true, "marker": true },
            { "identifier": "styleGuide", "name": "Style guide", "role": "system", "content": "Keep replies short." },
            { "identifier": "depthNote", "name": "Depth note", "role": "user", "content": "Remember the plan.",
              "injection_position": 1, "injection_depth": 2 },
            { "identifier": "userNudge", "name": "User nudge", "role": "user", "content": "Continue the scene." },
            { "identifier": "assistantPrefill", "name": "Assistant prefill", "role": "assistant", "content": "Understood." }
        ],
        "prompt_order": [
            { "character_id": 100000, "order": [
                { "identifier": "main", "enabled": true },
                { "identifier": "chatHistory", "enabled": true }
            ] },
            { "character_id": 100001, "order": [
                { "identifier": "styleGuide", "enabled": false },
                { "identifier": "main", "enabled": true },
                { "identifier": "worldInfoBefore", "enabled": true },
                { "identifier": "charDescription", "enabled": true },
                { "identifier": "userNudge", "enabled": true },
                { "identifier": "assistantPrefill", "enabled": true },
                { "identifier": "chatHistory", "enabled": true },
                { "identifier": "depthNote", "enabled": true }
            ] }
        ]
    })
}

/// Character 100001's prompt order without the two dropped markers (world info, character
/// description). The depth-2 injection already follows the chat history, where it is placed.
const IMPORTED_IDS: [&str; 6] = [
    "styleGuide",
    "main",
    "userNudge",
    "assistantPrefill",
    "chatHistory",
    "depthNote",
];

async fn texts(browser: &Browser, css: &str) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(css)],
        )
        .await
}

/// The focused element as `tag.class[name]`, e.g. `button.more-toggle[]`.
async fn focused(browser: &Browser) -> String {
    browser
        .js(
            "const e = document.activeElement; return e ? `${e.tagName.toLowerCase()}.${e.className}[${e.name || ''}]` : '';",
            vec![],
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Presses `keys` together (down in order, up in reverse) on whatever has focus.
async fn press(browser: &Browser, keys: &[Key]) {
    let mut actions = KeyActions::new("keyboard".to_string());
    for k in keys {
        actions = actions.then(KeyAction::Down { value: (*k).into() });
    }
    for k in keys.iter().rev() {
        actions = actions.then(KeyAction::Up { value: (*k).into() });
    }
    browser.client.perform_actions(actions).await.unwrap();
}

/// Waits until the focused element is `want` (see [`focused`]).
async fn wait_focus(browser: &Browser, want: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = focused(browser).await;
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "focus is on {got}, not {want}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The project's stack files, sorted.
fn stack_files(server: &Server) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(server.path(STACKS))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// More ▾ → Import…, then sends `file` to the file input.
async fn import_file(browser: &Browser, file: &std::path::Path) {
    browser.click(".editor .more-toggle").await;
    browser.click(".more .menu button.import").await;
    browser.wait_text(".modal h2", "Import a Preset").await;
    browser
        .type_keys("input[name=import-file]", &file.display().to_string())
        .await;
}

/// The character step: the choices are exactly the preset's two ids; picks 100001.
async fn choose_character_100001(browser: &Browser) {
    browser.wait_css("select[name=character-id]").await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('select[name=character-id] option')].map(o => [o.value, o.textContent]);",
                vec![]
            )
            .await,
        json!([["100000", "100000"], ["100001", "100001"]])
    );
    // The dialog read the ids from the file itself: no request failed on the way.
    assert_eq!(browser.console_errors().await, Vec::<String>::new());
    browser.fill("select[name=character-id]", "100001").await;
    browser.click(".character-step button.use-character").await;
    browser.wait_css(".modal .review").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sillytavern_preset_with_two_characters_imports_through_the_dialog() {
    let server = Server::start_with(
        &[(&format!("{STACKS}/default.json"), &default_stack())],
        &[],
    );
    let preset_path = server.path("My Preset.json");
    std::fs::write(&preset_path, pretty(&preset())).unwrap();
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;

    // File → character → review.
    import_file(&browser, &preset_path).await;
    choose_character_100001(&browser).await;
    assert_eq!(
        browser.text(".review .import-summary").await.as_deref(),
        Some("SillyTavern preset · 6 items · 0 errors · 0 warnings · character 100001")
    );
    assert_eq!(
        texts(&browser, ".review details.report > summary").await,
        json!(["Converted (5)", "Approximated (1)", "Dropped (2)"])
    );
    assert_eq!(
        texts(&browser, ".review details.report.converted li").await,
        json!([
            "Style guide — system block (disabled)",
            "Main Prompt — system block",
            "User nudge — user block",
            "Assistant prefill — assistant block",
            "Chat History — chat history marker → chat-history slot"
        ])
    );
    assert_eq!(
        texts(&browser, ".review details.report.approximated li").await,
        json!([
            "Depth note — user block; in-chat injection at depth 2: placed right after the chat history instead of inside it"
        ])
    );
    assert_eq!(
        texts(&browser, ".review details.report.dropped li").await,
        json!([
            "World Info (before) — marker: world info (lorebook) entries have no pi-forge equivalent",
            "Char Description — marker: character card fields have no pi-forge equivalent"
        ])
    );
    assert_eq!(browser.value("input[name=import-id]").await, "my-preset");
    assert_eq!(
        browser.text(".review .field-note").await.as_deref(),
        Some("Available.")
    );
    assert_eq!(
        stack_files(&server),
        ["default.json"],
        "the review writes nothing"
    );

    browser.click(".review button.do-import").await;
    browser.wait_text(".status", "Imported my-preset").await;
    assert_eq!(
        browser.text(".status").await.as_deref(),
        Some("Imported my-preset")
    );
    assert_eq!(browser.count(".modal").await, 0);
    let first_text = server.read(&format!("{STACKS}/my-preset.json"));
    let stack: Value = serde_json::from_str(&first_text).unwrap();
    let ids: Vec<&str> = stack["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, IMPORTED_IDS, "character 100001's order");
    assert_eq!(stack["items"][0]["enabled"], json!(false));
    assert_eq!(stack["items"][4]["slot"], json!("chat-history"));
    assert_eq!(stack["import"]["characterId"], json!("100001"));
    assert_eq!(stack["import"]["sourceFile"], json!("My Preset.json"));
    browser
        .wait_text(".editor code.selector", "project:my-preset")
        .await;

    // The same file again: the id exists, so Import waits for another one.
    import_file(&browser, &preset_path).await;
    choose_character_100001(&browser).await;
    assert_eq!(browser.value("input[name=import-id]").await, "my-preset");
    browser
        .wait_text(".review .field-note", "already exists")
        .await;
    assert_eq!(
        browser.text(".review .field-note").await.as_deref(),
        Some("A project Preset with the id my-preset already exists.")
    );
    assert!(!browser.enabled(".review button.do-import").await);
    browser.fill("input[name=import-id]", "My-Preset-2").await;
    browser.wait_text(".review .field-note", "Available.").await;
    assert!(browser.enabled(".review button.do-import").await);
    browser.click(".review button.do-import").await;
    browser.wait_text(".status", "Imported My-Preset-2").await;
    assert_eq!(server.read(&format!("{STACKS}/my-preset.json")), first_text);
    let second = server.read_json(&format!("{STACKS}/My-Preset-2.json"));
    assert_eq!(second["id"], json!("My-Preset-2"));
    assert_eq!(second["items"], stack["items"]);
    assert_eq!(
        stack_files(&server),
        ["My-Preset-2.json", "default.json", "my-preset.json"]
    );

    // Files that are not presets: a clear error in the dialog, and nothing written.
    let broken = server.path("broken.json");
    std::fs::write(&broken, "{\"prompts\": [").unwrap();
    import_file(&browser, &broken).await;
    browser
        .wait_text(
            ".modal .field-error",
            "The imported file is not valid JSON: EOF while parsing a list at line 1 column 13",
        )
        .await;
    browser
        .expect_failed_requests(&server, &["/api/stacks/import 400 (Bad Request)"])
        .await;
    assert_eq!(browser.count(".modal .review").await, 0);
    let other = server.path("notes.json");
    std::fs::write(&other, "{\"hello\": 1}").unwrap();
    browser
        .type_keys("input[name=import-file]", &other.display().to_string())
        .await;
    browser
        .wait_text(
            ".modal .field-error",
            "This file is neither a pi-forge prompt stack nor a SillyTavern chat-completion preset.",
        )
        .await;
    browser
        .expect_failed_requests(&server, &["/api/stacks/import 400 (Bad Request)"])
        .await;
    browser.click(".modal button.cancel").await;
    assert_eq!(browser.count(".modal").await, 0);
    assert_eq!(
        stack_files(&server),
        ["My-Preset-2.json", "default.json", "my-preset.json"]
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// A pi-forge file with errors: the dialog lists every one (the server's message names only
/// the first) and writes nothing. The dialog keeps Tab inside itself, Escape gives focus back
/// to More ▾, and Enter in the id field imports a good file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_errors_are_all_listed_and_the_dialog_works_from_the_keyboard() {
    let server = Server::start_with(
        &[(&format!("{STACKS}/default.json"), &default_stack())],
        &[],
    );
    let bad = server.path("bad.json");
    std::fs::write(
        &bad,
        pretty(&json!({
            "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "bad",
            "items": [{ "kind": "slot", "id": "history", "slot": "chat-history" }],
            "regex": { "schemaVersion": 1, "rules": [{ "id": "strip", "pattern": "" }] }
        })),
    )
    .unwrap();
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;

    import_file(&browser, &bad).await;
    browser
        .wait_text(".modal .import-error .field-error", "2 errors")
        .await;
    browser
        .expect_failed_requests(&server, &["/api/stacks/import 400 (Bad Request)"])
        .await;
    assert_eq!(
        browser
            .text(".modal .import-error .field-error")
            .await
            .as_deref(),
        Some("This file has 2 errors; fix them in the file and choose it again:")
    );
    assert_eq!(
        texts(&browser, ".modal .import-errors .message").await,
        json!([
            "Regex rule strip stage must be \"history\" or \"compiled\".",
            "Regex rule strip pattern must be a non-empty string."
        ])
    );
    assert_eq!(browser.count(".modal .review").await, 0);
    assert_eq!(browser.count(".modal button.cancel").await, 1);

    // Tab from the last control wraps to the first one, Shift+Tab from the first to the last.
    browser.type_keys(".modal button.cancel", &Key::Tab).await;
    wait_focus(&browser, "input.[import-file]").await;
    press(&browser, &[Key::Shift, Key::Tab]).await;
    wait_focus(&browser, "button.cancel[]").await;

    // Escape closes the dialog and focus is back on More ▾ (the menu item that opened it is
    // gone with its menu).
    press(&browser, &[Key::Escape]).await;
    assert_eq!(browser.count(".modal").await, 0);
    wait_focus(&browser, "button.more-toggle[]").await;
    assert_eq!(stack_files(&server), ["default.json"]);

    // A good file: Enter in the id field imports it.
    let good = server.path("good.json");
    std::fs::write(
        &good,
        pretty(&json!({
            "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "good",
            "items": [{ "kind": "slot", "id": "history", "slot": "chat-history" }]
        })),
    )
    .unwrap();
    import_file(&browser, &good).await;
    browser.wait_css(".modal .review").await;
    assert_eq!(browser.count(".review .import-diagnostics").await, 0);
    assert_eq!(browser.value("input[name=import-id]").await, "good");
    browser
        .type_keys("input[name=import-id]", &("-2".to_string() + &Key::Enter))
        .await;
    browser.wait_text(".status", "Imported good-2").await;
    assert_eq!(browser.count(".modal").await, 0);
    assert_eq!(stack_files(&server), ["default.json", "good-2.json"]);

    browser.assert_no_errors().await;
    browser.close().await;
}
