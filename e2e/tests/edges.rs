//! Browser tests of edge flows: an untrusted project, repairing a file that is not JSON, legacy
//! and shadowed stacks, a large stack, a server that went away, and fork + Activate without a
//! live Pi session (the file is written, nothing is activated, Activate says why). One server and one headless browser per test; every wait polls.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{pretty, sample_stack, Browser, Server, NO_LIVE_CREATE_NOTE, NO_LIVE_SESSION, WAIT};

const STACKS: &str = "project/.pi/forge/prompt-stacks";
const LEGACY: &str = "project/.pi/prompt-stacks";
const GLOBAL: &str = "global/prompt-stacks";

fn project_path(id: &str) -> String {
    format!("{STACKS}/{id}.json")
}

fn global_path(id: &str) -> String {
    format!("{GLOBAL}/{id}.json")
}

/// Starts a server with `files`, opens the editor and waits for "Loaded <first>".
async fn start(files: &[(String, String)], args: &[&str], first: &str) -> (Server, Browser) {
    let server = Server::start_with(files, args);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status(&format!("Loaded {first}")).await;
    (server, browser)
}

/// Polls until the file's text is exactly `want` (a write still in flight is waited for).
async fn wait_file_text(server: &Server, rel: &str, want: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = std::fs::read_to_string(server.path(rel)).ok();
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited {WAIT:?} for {rel} to hold\n{want}\nit holds\n{got:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls until the first element matching `css` has `attr` = `want`.
async fn wait_attr(browser: &Browser, css: &str, attr: &str, want: &str) {
    browser
        .wait_js(
            &format!("{css} [{attr}]"),
            &format!(
                "const e = document.querySelector({css:?}); return e ? e.getAttribute({attr:?}) : null;"
            ),
            json!(want),
        )
        .await;
}

/// The text of every element matching `css`.
async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(css)],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

/// The `data-selector`s of the listed stack rows, top to bottom.
async fn row_selectors(browser: &Browser) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('.stack-list .stack-row')].map(e => e.dataset.selector);",
            vec![],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

/// Switches the sidebar to a scope ("Project" or "Global").
async fn scope(browser: &Browser, label: &str) {
    browser.click_text(".scope-switch .seg-button", label).await;
    browser
        .wait_js(
            "scope switched",
            &format!(
                "return [...document.querySelectorAll('.scope-switch .seg-button')].some(b => b.textContent.startsWith({label:?}) && b.getAttribute('aria-pressed') === 'true');"
            ),
            json!(true),
        )
        .await;
}

/// The scope switch's counts: `[project, global]`.
async fn scope_counts(browser: &Browser) -> Vec<String> {
    texts(browser, ".scope-switch .seg-button .count").await
}

// ---------------------------------------------------------------------------------------------
// 1. Untrusted project
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_project_lists_only_global_stacks_and_global_stays_writable() {
    let project = sample_stack("local", "Local", "Project text.");
    let global = sample_stack("shared", "Shared", "Global text.");
    let files = vec![
        (project_path("local"), pretty(&project)),
        (global_path("shared"), pretty(&global)),
    ];
    let (server, browser) = start(&files, &["--untrusted"], "shared").await;

    // The top bar says so; the project's stacks are not read at all.
    browser.wait_eq(".topbar .badge.warn", "Read-only").await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.topbar .badge.warn').title;",
                vec![]
            )
            .await,
        json!("pi-forge was started with --untrusted: project files are read-only.")
    );
    assert_eq!(scope_counts(&browser).await, ["0", "1"]);
    let (status, list) = server.api("GET", "/api/stacks", None, None);
    assert_eq!(status, 200);
    assert_eq!(list["trusted"], json!(false));
    let listed: Vec<&str> = list["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["selector"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["global:shared"]);

    // The open stack is the global one, and the list shows its scope with its row current.
    assert_eq!(
        browser.text(".editor .selector").await.as_deref(),
        Some("global:shared")
    );
    wait_attr(
        &browser,
        ".scope-switch .seg-button:nth-child(2)",
        "aria-pressed",
        "true",
    )
    .await;
    assert_eq!(row_selectors(&browser).await, ["global:shared"]);
    wait_attr(
        &browser,
        ".stack-row[data-selector='global:shared']",
        "aria-current",
        "true",
    )
    .await;
    scope(&browser, "Project").await;
    assert_eq!(row_selectors(&browser).await, Vec::<String>::new());
    assert_eq!(
        browser.text(".stack-list .empty").await.as_deref(),
        Some("No Presets in this scope.")
    );
    scope(&browser, "Global").await;
    assert_eq!(row_selectors(&browser).await, ["global:shared"]);

    // Editing and saving the global stack works.
    browser
        .fill("textarea[name=item-content]", "Global text, edited.")
        .await;
    browser.wait_eq(".badge.dirty", "unsaved").await;
    browser.click("button.save").await;
    browser.wait_status("Saved shared").await;
    browser.wait_count(".badge.dirty", 0).await;
    let mut want = global.clone();
    want["items"][0]["content"] = json!("Global text, edited.");
    assert_eq!(server.read(&global_path("shared")), pretty(&want));
    assert_eq!(server.read(&project_path("local")), pretty(&project));

    // A project write (a new Preset in the project scope) is refused by the server; the app
    // says why, keeps the dialog open and writes nothing.
    browser.click("button.new-stack").await;
    browser.wait_css(".modal input[name=new-id]").await;
    assert_eq!(browser.value(".modal select[name=scope]").await, "global");
    browser.fill(".modal input[name=new-id]", "blocked").await;
    browser.fill(".modal select[name=scope]", "project").await;
    browser.wait_eq(".modal .field-note", "Available.").await;
    browser.click(".modal button.create").await;
    browser
        .wait_status("Project is not trusted; refusing to create prompt stacks.")
        .await;
    browser
        .expect_failed_requests(&server, &["/api/stacks 403 (Forbidden)"])
        .await;
    assert_eq!(browser.count(".modal").await, 1);
    assert!(!server.path(&project_path("blocked")).exists());
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.topbar .status').classList.contains('error');",
                vec![]
            )
            .await,
        json!(true)
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Repairing a file that is not JSON
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_json_is_repaired_in_the_json_tab() {
    let good = sample_stack("alpha", "Alpha", "Fine.");
    let broken_text = "{ \"id\": \"broken\", \"items\": [\n";
    let files = vec![
        (project_path("alpha"), pretty(&good)),
        (project_path("broken"), broken_text.to_string()),
    ];
    let (server, browser) = start(&files, &[], "alpha").await;

    let badge = ".stack-row[data-selector='project:broken'] .badge.error";
    browser.wait_eq(badge, "1 ✕").await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector(arguments[0]).getAttribute('aria-label');",
                vec![json!(badge)]
            )
            .await,
        json!("1 error")
    );

    browser
        .click(".stack-row[data-selector='project:broken']")
        .await;
    browser.wait_status("Loaded broken").await;
    browser
        .wait_eq(
            ".editor .banner.error",
            "This file is not valid JSON. Open the JSON tab to repair it.",
        )
        .await;
    // Diagnostics says what is wrong and where (it said "No problems").
    browser
        .wait_eq(".diagnostics .summary", "1 error · 0 warnings · 0 info")
        .await;
    browser
        .wait_eq(
            ".diagnostic-list .diagnostic.error .message",
            "Failed to parse JSON: EOF while parsing a list at line 2 column 0",
        )
        .await;
    // The JSON tab is shown (and marked as the selected tab) with the file's exact text.
    browser.wait_css("textarea[name=stack-json]").await;
    wait_attr(
        &browser,
        "button.tab[data-tab='JSON']",
        "aria-selected",
        "true",
    )
    .await;
    browser
        .wait_js(
            "the file's text in the JSON tab",
            "return document.querySelector('textarea[name=stack-json]')?.value ?? null;",
            json!(broken_text),
        )
        .await;
    assert!(!browser.enabled("button.save").await);

    let fixed = json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "broken",
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": "Repaired." }
        ]
    });
    browser
        .fill("textarea[name=stack-json]", &pretty(&fixed))
        .await;
    browser.click("button.apply-json").await;
    browser.wait_status("Applied stack JSON to editor").await;
    browser.wait_eq(".badge.dirty", "unsaved").await;
    assert!(browser.enabled("button.save").await);
    browser.click("button.save").await;
    browser.wait_status("Saved broken").await;
    wait_file_text(&server, &project_path("broken"), &pretty(&fixed)).await;

    // Repaired: no error badge, no banner, the normal tabs again.
    browser.wait_count(badge, 0).await;
    browser.wait_count(".editor .banner.error", 0).await;
    browser.wait_count(".badge.dirty", 0).await;
    assert_eq!(
        browser
            .text(".stack-row[data-selector='project:broken'] .row-detail")
            .await
            .as_deref(),
        Some("replace · 1 item")
    );
    browser.tab("Items").await;
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "Repaired."
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Legacy folder
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_stack_saves_back_to_its_legacy_file() {
    let old = sample_stack("old", "Old", "Legacy text.");
    let legacy_rel = format!("{LEGACY}/old.json");
    let files = vec![(legacy_rel.clone(), pretty(&old))];
    let (server, browser) = start(&files, &[], "old").await;

    let row = ".stack-row[data-selector='project:old']";
    assert_eq!(texts(&browser, &format!("{row} .badge")).await, ["legacy"]);
    assert_eq!(
        browser
            .js(
                "return document.querySelector(arguments[0]).title;",
                vec![json!(format!("{row} .badge.muted"))]
            )
            .await,
        json!(".pi/prompt-stacks (legacy folder)")
    );
    let shown = browser.text(".editor .file-path").await.unwrap();
    assert!(
        shown.ends_with("/project/.pi/prompt-stacks/old.json"),
        "file path shown: {shown}"
    );

    browser
        .fill("textarea[name=item-content]", "Legacy text, edited.")
        .await;
    browser.click("button.save").await;
    browser.wait_status("Saved old").await;
    let mut want = old.clone();
    want["items"][0]["content"] = json!("Legacy text, edited.");
    wait_file_text(&server, &legacy_rel, &pretty(&want)).await;
    assert!(!server.path(&project_path("old")).exists());
    assert!(!server.path(STACKS).exists());
    // Still one row, still legacy.
    browser.wait_count(".badge.dirty", 0).await;
    assert_eq!(row_selectors(&browser).await, ["project:old"]);
    assert_eq!(texts(&browser, &format!("{row} .badge")).await, ["legacy"]);

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Shadowing
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadowed_global_stack_is_marked_and_saves_only_the_global_file() {
    let project = sample_stack("dup", "Project dup", "Project version.");
    let global = sample_stack("dup", "Global dup", "Global version.");
    let files = vec![
        (project_path("dup"), pretty(&project)),
        (global_path("dup"), pretty(&global)),
    ];
    let (server, browser) = start(&files, &[], "dup").await;
    assert_eq!(
        browser.text(".editor .selector").await.as_deref(),
        Some("project:dup")
    );
    assert_eq!(scope_counts(&browser).await, ["1", "1"]);
    assert_eq!(
        texts(&browser, ".stack-row[data-selector='project:dup'] .badge").await,
        Vec::<String>::new()
    );

    scope(&browser, "Global").await;
    let row = ".stack-row[data-selector='global:dup']";
    assert_eq!(
        texts(&browser, &format!("{row} .badge")).await,
        ["shadowed"]
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector(arguments[0]).title;",
                vec![json!(format!("{row} .badge.muted"))]
            )
            .await,
        json!("A project Preset with the same id hides this one")
    );

    browser.click(row).await;
    browser.wait_eq(".editor .selector", "global:dup").await;
    browser.wait_eq(".stack-title", "Global dup").await;
    browser.wait_status("Loaded dup").await;
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "Global version."
    );
    browser
        .fill("textarea[name=item-content]", "Global version, edited.")
        .await;
    browser.click("button.save").await;
    browser.wait_status("Saved dup").await;
    let mut want = global.clone();
    want["items"][0]["content"] = json!("Global version, edited.");
    wait_file_text(&server, &global_path("dup"), &pretty(&want)).await;
    assert_eq!(server.read(&project_path("dup")), pretty(&project));
    browser.wait_count(".badge.dirty", 0).await;
    assert_eq!(
        texts(&browser, &format!("{row} .badge")).await,
        ["shadowed"]
    );
    assert_eq!(
        browser.text(".editor .selector").await.as_deref(),
        Some("global:dup")
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 5. A large stack
// ---------------------------------------------------------------------------------------------

/// A long block text: 40 lines of words plus one 300-character token without a break.
fn long_content(i: usize) -> String {
    let mut lines: Vec<String> = (0..40)
        .map(|l| format!("Item {i} line {l}: keep the answer short, cite the file and the line, and never guess a path you have not read."))
        .collect();
    lines.push("x".repeat(300));
    lines.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_of_200_long_items_opens_edits_and_saves() {
    let small = sample_stack("a-small", "Small", "Small.");
    let items: Vec<Value> = (0..200)
        .map(|i| {
            json!({
                "kind": "block",
                "id": format!("item-{i}"),
                "name": format!("Item number {i} with a fairly long descriptive name"),
                "role": "system",
                "content": long_content(i)
            })
        })
        .collect();
    let big = json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "big",
        "name": "Big",
        "items": items
    });
    let files = vec![
        (project_path("a-small"), pretty(&small)),
        (project_path("big"), pretty(&big)),
    ];
    let (server, browser) = start(&files, &[], "a-small").await;

    // Open it; the page measures click → 200 rows on screen (reported, not asserted).
    let opened = browser
        .js(
            "const t0 = performance.now(); \
             document.querySelector(\".stack-row[data-selector='project:big']\").click(); \
             return new Promise((resolve) => { const tick = () => { \
               if (document.querySelectorAll('.item-list .item-row').length === 200) { \
                 requestAnimationFrame(() => resolve(performance.now() - t0)); } \
               else if (performance.now() - t0 > 20000) { resolve(-1); } \
               else { requestAnimationFrame(tick); } }; tick(); });",
            vec![],
        )
        .await;
    eprintln!("edges: opening the 200-item stack took {opened} ms");
    browser.wait_status("Loaded big").await;
    browser.wait_count(".item-list .item-row", 200).await;

    // Select the last item.
    browser.click(".item-row[data-index='199']").await;
    wait_attr(
        &browser,
        ".item-row[data-index='199']",
        "aria-current",
        "true",
    )
    .await;
    assert_eq!(browser.value("input[name=item-id]").await, "item-199");
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        long_content(199)
    );

    // Real key events into the block: the draft follows.
    let typed = browser
        .js(
            "const e = document.querySelector('textarea[name=item-content]'); e.focus(); \
             e.setSelectionRange(e.value.length, e.value.length); return performance.now();",
            vec![],
        )
        .await;
    browser
        .type_keys("textarea[name=item-content]", " edited")
        .await;
    let want_content = long_content(199) + " edited";
    browser
        .wait_js(
            "typed text in the block",
            "return document.querySelector('textarea[name=item-content]').value;",
            json!(want_content),
        )
        .await;
    let after = browser.js("return performance.now();", vec![]).await;
    eprintln!(
        "edges: typing 7 keys into item 199 took {} ms (WebDriver round trips included)",
        after.as_f64().unwrap_or(0.0) - typed.as_f64().unwrap_or(0.0)
    );
    browser.wait_eq(".badge.dirty", "unsaved").await;
    // The draft (not only the textarea) has it: the JSON tab shows the draft.
    browser.tab("JSON").await;
    let draft: Value =
        serde_json::from_str(&browser.value("textarea[name=stack-json]").await).unwrap();
    assert_eq!(draft["items"][199]["content"], json!(want_content));
    assert_eq!(draft["items"].as_array().unwrap().len(), 200);
    browser.tab("Items").await;

    let saved_ms = browser
        .js(
            "const t0 = performance.now(); document.querySelector('button.save').click(); \
             return new Promise((resolve) => { const tick = () => { \
               if (document.querySelector('.topbar .status').textContent === 'Saved big') { resolve(performance.now() - t0); } \
               else if (performance.now() - t0 > 20000) { resolve(-1); } \
               else { requestAnimationFrame(tick); } }; tick(); });",
            vec![],
        )
        .await;
    eprintln!("edges: saving the 200-item stack took {saved_ms} ms");
    browser.wait_status("Saved big").await;
    let mut want = big.clone();
    want["items"][199]["content"] = json!(want_content);
    wait_file_text(&server, &project_path("big"), &pretty(&want)).await;
    browser.wait_count(".badge.dirty", 0).await;

    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 6. The server went away
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_without_a_server_says_so_and_keeps_the_draft() {
    let base = sample_stack("keep", "Keep", "Before.");
    let files = vec![(project_path("keep"), pretty(&base))];
    let (server, browser) = start(&files, &[], "keep").await;
    let origin = server.base.trim_end_matches('/').to_string();
    drop(server);

    browser
        .fill(
            "textarea[name=item-content]",
            "Typed while the server is gone.",
        )
        .await;
    browser.wait_eq(".badge.dirty", "unsaved").await;
    browser.click("button.save").await;
    browser
        .wait_status(
            "The pi-forge server did not answer (it stopped or is restarting); see the banner.",
        )
        .await;
    // The banner says what happened and what to do (before: only "TypeError: Failed to fetch").
    let banner = browser.text(".server-gone p").await.unwrap_or_default();
    assert_eq!(
        banner,
        "The pi-forge server is not answering at this address: it stopped or is restarting. Start it again with pi-forge ui (or /forge ui in Pi); it comes back at this address when the port is free. Then open the URL it prints in this browser: this page reconnects by itself, and your unsaved changes are kept in this browser meanwhile."
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.topbar .status').classList.contains('error');",
                vec![]
            )
            .await,
        json!(true)
    );
    // The draft is intact and still unsaved; Save can be tried again.
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "Typed while the server is gone."
    );
    assert_eq!(
        browser.text(".badge.dirty").await.as_deref(),
        Some("unsaved")
    );
    assert!(browser.enabled("button.save").await);

    // The console logs the failed PUT once, the edit's failed load of the lazy parts' loader
    // once (the draft checks come with the first edit; the editor goes on without them), and
    // the event stream's end and its reconnection attempts (Chromium retries every ~3 s). Wait
    // for the first retry, so the next one is seconds away when `assert_no_errors` reads the log.
    let put = "/api/stacks/project%3Akeep - Failed to load resource: net::ERR_CONNECTION_REFUSED";
    let loader = "/assets/__wasm_split.js - Failed to load resource: net::ERR_CONNECTION_REFUSED";
    let retry = "/api/events - Failed to load resource: net::ERR_CONNECTION_REFUSED";
    let stream_end = "/api/events - Failed to load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING";
    // The page asks why the stream failed, on each of its failures.
    let probe = "/api/live - Failed to load resource: net::ERR_CONNECTION_REFUSED";
    let deadline = Instant::now() + WAIT;
    let mut got: Vec<String> = Vec::new();
    while !(got.iter().any(|m| m == put) && got.iter().any(|m| m == retry)) {
        assert!(
            Instant::now() < deadline,
            "waited {WAIT:?} for the failed PUT and an event-stream retry; console errors: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        got.extend(
            browser
                .console_errors()
                .await
                .into_iter()
                .map(|m| m.replace(&origin, "")),
        );
    }
    assert_eq!(
        got.iter().filter(|m| *m == put).count(),
        1,
        "console errors: {got:?}"
    );
    assert_eq!(
        got.iter().filter(|m| *m == loader).count(),
        1,
        "console errors: {got:?}"
    );
    let unexpected: Vec<&String> = got
        .iter()
        .filter(|m| ![put, loader, retry, stream_end, probe].contains(&m.as_str()))
        .collect();
    assert_eq!(unexpected, Vec::<&String>::new(), "console errors");

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Fork, and Activate without a live Pi session
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_to_global_without_a_live_session_writes_the_copy_and_activates_nothing() {
    let mut base = sample_stack("base", "Base", "Base text.");
    base["autoActivate"] = json!(true);
    base["x-custom"] = json!({ "kept": true });
    let files = vec![(project_path("base"), pretty(&base))];
    let (server, browser) = start(&files, &[], "base").await;
    // autoActivate is for a new Pi session; without one nothing is active.
    browser
        .wait_eq(
            "#live-indicator[data-live='false'] .live-text",
            "No live session",
        )
        .await;
    let active = ".stack-row[data-selector='project:base'] .badge.active";
    assert_eq!(browser.count(active).await, 0);

    browser.click("button.more-toggle").await;
    browser.click(".more .menu button.fork").await;
    browser.wait_css(".modal input[name=fork-id]").await;
    assert_eq!(
        browser.text(".modal #dialog-title").await.as_deref(),
        Some("Fork base")
    );
    assert_eq!(
        browser.value(".modal input[name=fork-id]").await,
        "base-copy"
    );
    assert_eq!(browser.value(".modal select[name=scope]").await, "project");
    // The copy gets its own display name, so the list never shows two identical rows.
    assert_eq!(
        browser.value(".modal input[name=fork-name]").await,
        "Base (copy)"
    );
    browser
        .fill(".modal input[name=fork-id]", "base-fork")
        .await;
    browser.fill(".modal select[name=scope]", "global").await;
    browser.wait_eq(".modal .field-note", "Available.").await;
    // "Activate the fork" is off and disabled, and says why.
    assert!(!browser.enabled(".modal input[name=activate]").await);
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.modal input[name=activate]').checked;",
                vec![]
            )
            .await,
        json!(false)
    );
    assert_eq!(
        browser.text(".modal .activate-note").await.as_deref(),
        Some(NO_LIVE_CREATE_NOTE)
    );
    browser.click_text(".modal button.primary", "Fork").await;
    browser.wait_status("Forked to base-fork").await;
    browser.wait_count(".modal", 0).await;

    // The copy: same raw object, new id and name, autoActivate turned off (docs/api.md, fork).
    let mut want = base.clone();
    want["id"] = json!("base-fork");
    want["name"] = json!("Base (copy)");
    want["autoActivate"] = json!(false);
    wait_file_text(&server, &global_path("base-fork"), &pretty(&want)).await;
    assert_eq!(server.read(&project_path("base")), pretty(&base));

    // The fork is open and listed under Global; nothing is active.
    browser
        .wait_eq(".editor .selector", "global:base-fork")
        .await;
    let fork_row = ".stack-row[data-selector='global:base-fork']";
    browser.wait_css(fork_row).await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector(arguments[0]).getAttribute('aria-current');",
                vec![json!(fork_row)]
            )
            .await,
        json!("true")
    );
    assert_eq!(browser.count(".badge.active").await, 0);
    assert_eq!(scope_counts(&browser).await, ["1", "1"]);

    // Activate goes to the live session: without one it is off and says why.
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.editor button.activate').title;",
                vec![]
            )
            .await,
        json!(NO_LIVE_SESSION)
    );
    assert!(!browser.enabled(".editor button.activate").await);
    browser.wait_css(".editor #activate-note").await;
    assert_eq!(browser.count(".badge.active").await, 0);
    assert_eq!(browser.count(".editor button.deactivate").await, 0);
    scope(&browser, "Project").await;
    assert_eq!(browser.count(active).await, 0);

    let (status, list) = server.api("GET", "/api/stacks", None, None);
    assert_eq!(status, 200);
    assert_eq!(list["activeId"], json!(null));
    let rows: Vec<(String, bool)> = list["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["selector"].as_str().unwrap().to_string(),
                r["active"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("global:base-fork".to_string(), false),
            ("project:base".to_string(), false)
        ]
    );
    assert_eq!(server.read(&global_path("base-fork")), pretty(&want));
    assert_eq!(server.read(&project_path("base")), pretty(&base));

    browser.assert_no_errors().await;
    browser.close().await;
}
