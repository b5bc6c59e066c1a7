//! Browser tests of the Preset (prompt stack) editor: the web-editor spec's §5 scenarios that
//! apply to pi-forge (happy path, preview dock races, shell, empty state, diagnostics panel,
//! slot options, tab drafts) plus live updates, typed parameters, keyboard and drag reordering
//! and layout. One server and one headless browser per test; every wait polls.

mod support;

use std::time::{Duration, Instant};

use fantoccini::key::Key;
use serde_json::{json, Value};
use support::{http_get, pretty, sample_stack, Browser, Server, NO_LIVE_CREATE_NOTE, WAIT};

const STACKS: &str = "project/.pi/forge/prompt-stacks";

fn stack_path(id: &str) -> String {
    format!("{STACKS}/{id}.json")
}

/// Starts a server with `stacks` in the project, opens the editor and waits for
/// "Loaded <first>".
async fn start(stacks: &[Value], first: &str) -> (Server, Browser) {
    let files: Vec<(String, String)> = stacks
        .iter()
        .map(|s| (stack_path(s["id"].as_str().unwrap()), pretty(s)))
        .collect();
    let server = Server::start_with(&files, &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status(&format!("Loaded {first}")).await;
    (server, browser)
}

/// Polls the file until it parses to `want` (a write that is still in flight is waited for).
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

/// The computed `display` of the first element matching `css`.
async fn display(browser: &Browser, css: &str) -> String {
    let v = browser
        .js(
            "return getComputedStyle(document.querySelector(arguments[0])).display;",
            vec![json!(css)],
        )
        .await;
    v.as_str().unwrap_or_default().to_string()
}

/// Whether the first element matching `css` is rendered with a box.
async fn visible(browser: &Browser, css: &str) -> bool {
    browser
        .js(
            "const e = document.querySelector(arguments[0]); if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';",
            vec![json!(css)],
        )
        .await
        == json!(true)
}

/// Sends keys to the element matching `css` (real key events through WebDriver).
async fn keys(browser: &Browser, css: &str, text: &str) {
    browser.type_keys(css, text).await;
}

/// Item ids of the open draft's list, top to bottom (from the rows' titles).
async fn item_titles(browser: &Browser) -> Vec<String> {
    texts(browser, ".item-list .item-row .item-name").await
}

// ---------------------------------------------------------------------------------------------
// 1. Happy path
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn happy_path_rename_validate_policy_regex_save_export_import() {
    let mut default = sample_stack("default", "Default", "You are a careful assistant.");
    default["autoActivate"] = json!(true);
    let (server, browser) = start(std::slice::from_ref(&default), "default").await;
    assert_eq!(
        browser.text(".stack-title").await.as_deref(),
        Some("Default")
    );
    assert_eq!(browser.count(".badge.dirty").await, 0);

    // Stack tab: the id is read-only; renaming makes the draft dirty.
    browser.tab("Stack").await;
    assert_eq!(browser.value("input[name=stack-id]").await, "default");
    assert_eq!(
        browser
            .js(
                "return document.querySelector('input[name=stack-id]').readOnly;",
                vec![]
            )
            .await,
        json!(true)
    );
    browser
        .fill("input[name=stack-name]", "Browser default")
        .await;
    browser.wait_eq(".badge.dirty", "unsaved").await;
    assert_eq!(
        browser.text(".stack-title").await.as_deref(),
        Some("Browser default")
    );

    // Validate asks the server about the draft.
    browser.click("button.validate").await;
    browser
        .wait_status("Validation complete: 0 errors, 0 warnings")
        .await;

    // Policy: the skills disclaimer, and an allow list with a removable `read` chip.
    browser.tab("Policy").await;
    assert!(visible(&browser, "[data-policy=skills] .disclaimer").await);
    assert_eq!(
        browser.text("[data-policy=skills] .disclaimer").await.as_deref(),
        Some("Skill filtering only decides which skills are listed in the prompt. It is not a sandbox: the model can still read a skill's file if it knows where it is.")
    );
    browser.click("[data-policy=tools] button.mode-allow").await;
    browser
        .wait_eq(
            "[data-policy=tools] button.mode-allow[aria-pressed=true]",
            "Allow only",
        )
        .await;
    keys(
        &browser,
        "input[name=tools-pattern]",
        &("read".to_string() + &Key::Enter),
    )
    .await;
    browser.wait_count("[data-policy=tools] .chip", 1).await;
    assert_eq!(
        texts(&browser, "[data-policy=tools] .chip .chip-text").await,
        ["read"]
    );
    assert_eq!(browser.value("input[name=tools-pattern]").await, "");
    // The chip's remove button removes it; the Add button adds it back.
    browser
        .click("[data-policy=tools] .chip[data-pattern=read] button.chip-remove[aria-label='Remove read']")
        .await;
    browser.wait_count("[data-policy=tools] .chip", 0).await;
    browser.fill("input[name=tools-pattern]", "read").await;
    browser
        .click("[data-policy=tools] button.add-pattern-button")
        .await;
    browser
        .wait_count("[data-policy=tools] .chip[data-pattern=read]", 1)
        .await;
    assert_eq!(
        browser
            .count("[data-policy=tools] .chip[data-pattern=read] button.chip-remove")
            .await,
        1
    );

    // Regex: a new rule (compiled stage, messages, as the original editor adds it) turned into a
    // history rule Browser → Typed has no problems.
    browser.tab("Regex").await;
    browser.click("button.add-rule").await;
    browser.wait_css(".rule[data-rule='0']").await;
    assert_eq!(
        texts(&browser, ".rule[data-rule='0'] .rule-problems li").await,
        ["Regex rule regex-1 pattern must be a non-empty string."]
    );
    browser.fill("select[name=rule-stage]", "history").await;
    browser.fill("input[name=rule-pattern]", "Browser").await;
    browser.fill("input[name=rule-replace]", "Typed").await;
    browser.wait_count(".rule .rule-problems", 0).await;
    assert_eq!(browser.value("input[name=rule-id]").await, "regex-1");

    // Save: clean, announced, and the file holds exactly the draft.
    browser.click("button.save").await;
    browser.wait_status("Saved default").await;
    browser.wait_count(".badge.dirty", 0).await;
    let mut want = default.clone();
    want["name"] = json!("Browser default");
    want["tools"] = json!({ "allow": ["read"] });
    want["regex"] = json!({
        "schemaVersion": 1,
        "rules": [{
            "id": "regex-1", "stage": "history", "effect": "outgoing", "targets": ["messages"],
            "pattern": "Browser", "replace": "Typed"
        }]
    });
    let saved = server.read_json(&stack_path("default"));
    assert_eq!(saved, want);
    assert_eq!(saved["tools"]["allow"], json!(["read"]));

    // Export: a download link to the file's bytes.
    browser.click("button.more-toggle").await;
    browser.wait_css(".more .menu a.export").await;
    assert_eq!(
        browser
            .js(
                "const a = document.querySelector('a.export'); return [a.getAttribute('href'), a.getAttribute('download')];",
                vec![]
            )
            .await,
        json!(["/api/stacks/project%3Adefault/export", "default.json"])
    );
    let exported = browser
        .js(
            "return fetch(document.querySelector('a.export').href).then(r => r.text());",
            vec![],
        )
        .await;
    assert_eq!(
        exported.as_str(),
        Some(server.read(&stack_path("default")).as_str())
    );

    // Import a native stack file under a new id, without activating it.
    let dir = tempfile::tempdir().unwrap();
    let source = sample_stack("browser-source", "Imported", "Imported text.");
    let file = dir.path().join("browser-source.json");
    std::fs::write(&file, pretty(&source)).unwrap();
    browser.click(".more .menu button.import").await;
    browser.wait_css(".modal input[name=import-file]").await;
    keys(
        &browser,
        ".modal input[name=import-file]",
        file.to_str().unwrap(),
    )
    .await;
    browser.wait_css(".modal input[name=import-id]").await;
    assert_eq!(
        browser.text(".modal .import-summary").await.as_deref(),
        Some("pi-forge Preset · 2 items · 0 errors · 0 warnings")
    );
    assert_eq!(
        browser.value(".modal input[name=import-id]").await,
        "browser-source"
    );
    browser
        .fill(".modal input[name=import-id]", "imported-browser")
        .await;
    browser
        .wait_eq(".modal .review .field-note", "Available.")
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.modal input[name=activate]').checked;",
                vec![]
            )
            .await,
        json!(false)
    );
    browser.click(".modal button.do-import").await;
    browser.wait_status("Imported imported-browser").await;
    browser.wait_count(".modal", 0).await;
    let mut imported = source.clone();
    imported["id"] = json!("imported-browser");
    assert_eq!(server.read_json(&stack_path("imported-browser")), imported);
    let (status, list) = server.api("GET", "/api/stacks", None, None);
    assert_eq!(status, 200);
    let row = list["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["selector"] == "project:imported-browser")
        .expect("the imported stack is listed");
    assert_eq!(row["active"], json!(false));
    // autoActivate names the Preset a new Pi session starts with; without one nothing is active.
    assert_eq!(list["activeId"], json!(null));
    // The imported Preset is open now.
    browser.wait_eq(".stack-title", "Imported").await;

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Preview dock
// ---------------------------------------------------------------------------------------------

/// Ten lines; `fifth` replaces the fifth one.
fn ten_lines(fifth: &str) -> String {
    let mut lines: Vec<String> = [
        "One", "Two", "Three", "Four", "", "Six", "Seven", "Eight", "Nine", "Ten",
    ]
    .iter()
    .map(|w| format!("Line {}", w.to_lowercase()))
    .collect();
    lines[4] = fifth.to_string();
    lines.join("\n")
}

/// Holds the response of the next draft preview request (`POST …/preview` with a `stack`
/// body) for 1.5 s; `window.__hold.state` goes `armed` → `pending` → `done` (250 ms after the
/// app received the late answer).
const ARM_HOLD: &str = r#"
window.__hold = { state: 'armed' };
if (!window.__origFetch) {
  window.__origFetch = window.fetch;
  window.fetch = function (input, init) {
    const orig = window.__origFetch;
    const req = input instanceof Request ? input : new Request(input, init);
    if (window.__hold.state !== 'armed' || req.method !== 'POST' || !req.url.endsWith('/preview')) {
      return orig(req);
    }
    return req.clone().text().then((body) => {
      if (window.__hold.state !== 'armed' || !body.includes('"stack"')) return orig(req);
      window.__hold.state = 'pending';
      return orig(req).then((resp) => new Promise((resolve) => setTimeout(() => {
        resolve(resp);
        setTimeout(() => { window.__hold.state = 'done'; }, 250);
      }, 1500)));
    });
  };
}
return true;
"#;

/// Records every state of the dock (`<loading>|<first section's text>`) in `window.__dockLog`.
const WATCH_DOCK: &str = r#"
window.__dockLog = [];
const snap = () => {
  const l = document.querySelector('.dock .loading');
  const c = document.querySelector('.dock .compiled .section-content');
  const entry = (l ? l.textContent : '') + '|' + (c ? c.textContent : '');
  const log = window.__dockLog;
  if (log[log.length - 1] !== entry) log.push(entry);
};
new MutationObserver(snap).observe(document.body, { subtree: true, childList: true, characterData: true });
return true;
"#;

async fn dock_log(browser: &Browser) -> Vec<String> {
    serde_json::from_value(browser.js("return window.__dockLog;", vec![]).await).unwrap()
}

/// The unified diff's rows as cell texts.
async fn diff_rows(browser: &Browser) -> Vec<Vec<String>> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('.dock .diff-block table.diff tbody tr')].map(tr => [...tr.children].map(td => td.textContent));",
            vec![],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

async fn wait_hold(browser: &Browser, state: &str) {
    browser
        .wait_js("held preview", "return window.__hold.state;", json!(state))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_dock_shows_only_the_newest_draft_and_diffs_it() {
    let disk = ten_lines("Line five says hello");
    let (_server, browser) = start(&[sample_stack("notes", "Notes", &disk)], "notes").await;
    browser.js(WATCH_DOCK, vec![]).await;

    // The first draft preview (still the disk text) is held; an edit overtakes it.
    browser.js(ARM_HOLD, vec![]).await;
    browser.click("button.preview-toggle").await;
    browser.wait_css(".dock").await;
    wait_hold(&browser, "pending").await;
    let first = ten_lines("Line five says goodbye");
    browser.fill("textarea[name=item-content]", &first).await;
    browser
        .wait_eq(".dock .compiled .section-content", &first)
        .await;
    wait_hold(&browser, "done").await;
    assert_eq!(
        browser.text(".dock .compiled .section-content").await,
        Some(first.clone())
    );
    let log = dock_log(&browser).await;
    assert!(
        log.iter().all(|e| !e.contains("hello")),
        "the disk text was shown: {log:?}"
    );
    assert!(
        log.iter().any(|e| e.starts_with("Loading preview…|")),
        "no loading state: {log:?}"
    );
    assert_eq!(
        log.last().map(String::as_str),
        Some(format!("|{first}").as_str())
    );

    // Second round: the next edit's preview is held, a newer edit wins, the late answer is
    // dropped.
    browser
        .js("window.__dockLog = []; return true;", vec![])
        .await;
    browser.js(ARM_HOLD, vec![]).await;
    let stale = ten_lines("Line five says stale");
    browser.fill("textarea[name=item-content]", &stale).await;
    wait_hold(&browser, "pending").await;
    let newest = ten_lines("Line five says farewell");
    browser.fill("textarea[name=item-content]", &newest).await;
    browser
        .wait_eq(".dock .compiled .section-content", &newest)
        .await;
    wait_hold(&browser, "done").await;
    assert_eq!(
        browser.text(".dock .compiled .section-content").await,
        Some(newest.clone())
    );
    // The log records the dock at every change of the page; entries before the dock reacted
    // to the edit (the template editor repaints at once) show it as it was.
    let log = dock_log(&browser).await;
    let before = format!("|{first}");
    assert_eq!(
        log.iter().find(|e| **e != before).map(String::as_str),
        Some(format!("Loading preview…|{first}").as_str()),
        "{log:?}"
    );
    assert!(
        log.iter().all(|e| !e.contains("stale")),
        "the stale answer was shown: {log:?}"
    );
    assert_eq!(
        log.last().map(String::as_str),
        Some(format!("|{newest}").as_str())
    );

    // Draft diff: one modified block, unified with line numbers and word marks.
    browser.click(".dock button.dock-diff").await;
    browser.wait_count(".dock .diff-block.modified", 1).await;
    assert_eq!(browser.count(".dock .diff-block").await, 1);
    assert_eq!(browser.count(".dock .diff-block.same").await, 0);
    assert_eq!(
        browser
            .text(".dock .diff-block .block-key")
            .await
            .as_deref(),
        Some("system")
    );
    assert_eq!(
        diff_rows(&browser).await,
        [
            ["3", "3", " ", "Line three"],
            ["4", "4", " ", "Line four"],
            ["5", "", "−", "Line five says hello"],
            ["", "5", "+", "Line five says farewell"],
            ["6", "6", " ", "Line six"],
            ["7", "7", " ", "Line seven"],
        ]
        .map(|r| r.map(str::to_string).to_vec())
        .to_vec()
    );
    assert_eq!(
        texts(&browser, ".dock .diff-block table.diff mark").await,
        ["hello", "farewell"]
    );
    // All lines: more rows than "Changes only".
    browser.click(".dock input[name=changes-only]").await;
    browser
        .wait_count(".dock .diff-block table.diff tbody tr", 11)
        .await;
    browser.click(".dock input[name=changes-only]").await;
    browser
        .wait_count(".dock .diff-block table.diff tbody tr", 6)
        .await;
    // Split: Saved | Draft.
    browser.click(".dock button.split").await;
    browser.wait_css(".dock table.diff.split").await;
    assert_eq!(
        texts(&browser, ".dock table.diff.split thead th").await,
        ["Saved", "Draft"]
    );
    // Each side's line numbers take a narrow gutter, not half of the side (issue 41, point 7).
    let widths = browser
        .js(
            "const cells = document.querySelector('.dock table.diff.split tbody tr.split-row').children; return [...cells].map(c => Math.round(c.getBoundingClientRect().width));",
            vec![],
        )
        .await;
    let widths: Vec<u64> = serde_json::from_value(widths).unwrap();
    assert_eq!(widths.len(), 4, "{widths:?}");
    assert!(
        widths[0] * 4 < widths[1] && widths[2] * 4 < widths[3],
        "gutter and code widths: {widths:?}"
    );

    // At 1280 px with the dock open the editor keeps room: the workspace is at least 600 px,
    // the block editor stays beside the item list, and the action bar is one line.
    let layout = browser
        .js(
            "const r = s => document.querySelector(s).getBoundingClientRect(); \
             const tops = [...document.querySelectorAll('.editor-head .actions > button, .editor-head .actions > .more')].map(b => Math.round(b.getBoundingClientRect().top)); \
             return [Math.round(r('main.workspace').width), r('.items-tab .item-list-wrap').right <= r('.items-tab .item-editor').left, new Set(tops).size];",
            vec![],
        )
        .await;
    let layout: (u64, bool, usize) = serde_json::from_value(layout).unwrap();
    assert!(layout.0 >= 600, "workspace width {layout:?}");
    assert_eq!((layout.1, layout.2), (true, 1), "{layout:?}");

    // Focus hides the workspace; "Show editor" brings it back.
    assert_eq!(display(&browser, "main.workspace").await, "block");
    browser.click(".dock button.focus-toggle").await;
    browser
        .wait_eq(".dock button.focus-toggle", "Show editor")
        .await;
    assert_eq!(display(&browser, "main.workspace").await, "none");
    // The editor's Save is hidden with it: the dock offers its own while focused.
    assert!(browser.enabled(".dock button.dock-save").await);
    browser.click(".dock button.focus-toggle").await;
    browser.wait_eq(".dock button.focus-toggle", "Focus").await;
    assert_eq!(display(&browser, "main.workspace").await, "block");
    assert_eq!(browser.count(".dock button.dock-save").await, 0);

    // Saving keeps the dock open; the saved side catches up, so the diff is empty.
    browser.click("button.save").await;
    browser.wait_status("Saved notes").await;
    browser
        .wait_eq(
            ".dock .no-changes",
            "No changes: the draft compiles to the same prompt as the saved version.",
        )
        .await;
    assert_eq!(browser.count(".dock .diff-block").await, 0);

    // A phone: the dock replaces the workspace, nothing sticks out sideways.
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    assert_eq!(display(&browser, "main.workspace").await, "none");
    assert!(visible(&browser, ".dock").await);
    assert!(visible(&browser, ".dock .no-changes").await);

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Shell
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_security_layout_theme_guard_and_json_apply() {
    let mut alpha = sample_stack("alpha", "Alpha", "Alpha text.");
    alpha["autoActivate"] = json!(true);
    let beta = sample_stack("beta", "Beta", "Beta text.");
    let (server, browser) = start(&[alpha, beta.clone()], "alpha").await;

    // Without the session cookie the page is refused.
    let (status, _, _) = http_get(&server.base, "/", None);
    assert_eq!(status, 403);
    assert_eq!(browser.client.title().await.unwrap(), "pi-forge");

    // Delete lives in the More menu only.
    assert_eq!(browser.count("button.delete").await, 0);
    browser.click("button.more-toggle").await;
    browser.wait_css(".actions .more .menu button.delete").await;
    assert_eq!(browser.count("button.delete").await, 1);
    assert_eq!(
        texts(&browser, ".more .menu [role=menuitem]").await,
        ["Fork…", "Import…", "Export JSON", "Delete…"]
    );
    browser.click("button.more-toggle").await;
    browser.wait_count(".more .menu", 0).await;

    // Desktop layout: compact sidebar head, one action row, tabs near the top.
    let [_, _, _, head_h] = browser.rect(".sidebar-head").await;
    assert!(head_h < 120.0, ".sidebar-head is {head_h}px high");
    let [_, scope_y, _, _] = browser.rect(".sidebar-head .scope-switch").await;
    let [_, new_y, _, _] = browser.rect(".sidebar-head button.new-stack").await;
    assert!(
        (scope_y - new_y).abs() < 20.0,
        "scope at {scope_y}, New at {new_y}"
    );
    let [_, _, _, actions_h] = browser.rect(".actions").await;
    assert!(actions_h <= 44.0, ".actions is {actions_h}px high");
    let [_, tabs_y, _, _] = browser.rect(".tabs").await;
    assert!(tabs_y <= 225.0, ".tabs start at {tabs_y}px");

    // Just above the phone breakpoint nothing overlaps or sticks out.
    browser.viewport(901, 900).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    let [ax, _, aw, _] = browser.rect(".actions").await;
    let [sx, _, sw, _] = browser.rect(".sidebar").await;
    assert!(
        sx + sw <= ax,
        "sidebar ends at {} but actions start at {ax}",
        sx + sw
    );
    assert!(ax + aw <= 901.0, "actions end at {}", ax + aw);

    // Phone layout.
    browser.viewport(390, 844).await;
    let [_, _, _, bar_h] = browser.rect(".topbar").await;
    assert!(bar_h <= 44.0, ".topbar is {bar_h}px high");
    let [_, _, _, side_h] = browser.rect(".sidebar").await;
    assert!(side_h <= 240.0, ".sidebar is {side_h}px high");
    browser.viewport(1280, 900).await;

    // Theme: persists across a reload and applies on the Profiles surface.
    let theme = "return document.documentElement.getAttribute('data-theme');";
    assert_eq!(browser.js(theme, vec![]).await, json!("light"));
    browser.click("button.theme-toggle").await;
    assert_eq!(browser.js(theme, vec![]).await, json!("dark"));
    browser.client.refresh().await.unwrap();
    browser.wait_app().await;
    browser.wait_status("Loaded alpha").await;
    assert_eq!(browser.js(theme, vec![]).await, json!("dark"));
    browser.click_text("button.surface-tab", "Profiles").await;
    browser.wait_css(".profiles .sidebar").await;
    let surface_bg =
        "return getComputedStyle(document.querySelector('.profiles .sidebar')).backgroundColor;";
    assert_eq!(
        browser.js(surface_bg, vec![]).await,
        json!("rgb(28, 30, 36)")
    );
    browser.click("button.theme-toggle").await;
    assert_eq!(browser.js(theme, vec![]).await, json!("light"));
    assert_eq!(
        browser.js(surface_bg, vec![]).await,
        json!("rgb(255, 255, 255)")
    );
    browser.click_text("button.surface-tab", "Presets").await;
    browser.wait_css(".presets .editor").await;

    // A dirty draft asks before another Preset opens.
    browser.tab("Stack").await;
    browser.fill("input[name=stack-name]", "Alpha draft").await;
    browser.wait_count(".badge.dirty", 1).await;
    browser
        .click(".stack-row[data-selector='project:beta']")
        .await;
    browser
        .wait_eq(".modal #dialog-title", "Discard unsaved changes?")
        .await;
    assert_eq!(
        browser.text(".modal p").await.as_deref(),
        Some("You have unsaved changes. Opening another Preset discards them.")
    );
    browser.click(".modal button.cancel").await;
    browser.wait_count(".modal", 0).await;
    assert_eq!(browser.value("input[name=stack-name]").await, "Alpha draft");
    assert_eq!(browser.count(".badge.dirty").await, 1);
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.stack-row[aria-current=true]').dataset.selector;",
                vec![]
            )
            .await,
        json!("project:alpha")
    );
    browser
        .click(".stack-row[data-selector='project:beta']")
        .await;
    browser
        .wait_eq(".modal button.confirm", "Discard changes")
        .await;
    browser.click(".modal button.confirm").await;
    browser.wait_status("Loaded beta").await;
    browser.wait_eq(".stack-title", "Beta").await;
    assert_eq!(browser.count(".badge.dirty").await, 0);

    // JSON tab: shape errors are shown; a valid object replaces the draft.
    browser.tab("JSON").await;
    browser
        .fill("textarea[name=stack-json]", r#"{"id":"beta"}"#)
        .await;
    browser.click("button.apply-json").await;
    browser
        .wait_eq(".json-tab .field-error", "Stack JSON needs an items array.")
        .await;
    assert_eq!(browser.count(".badge.dirty").await, 0);
    let mut edited = beta.clone();
    edited["name"] = json!("Beta from JSON");
    browser
        .fill("textarea[name=stack-json]", &pretty(&edited))
        .await;
    browser.click("button.apply-json").await;
    browser.wait_status("Applied stack JSON to editor").await;
    assert_eq!(browser.count(".json-tab .field-error").await, 0);
    browser.wait_eq(".stack-title", "Beta from JSON").await;
    browser.wait_count(".badge.dirty", 1).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Empty state
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_only_stack_shows_the_empty_state_and_new_creates_one() {
    let (server, browser) = start(&[sample_stack("solo", "Solo", "Solo text.")], "solo").await;

    browser.click("button.more-toggle").await;
    browser.click(".more .menu button.delete").await;
    browser
        .wait_eq(".modal #dialog-title", "Delete solo?")
        .await;
    browser.wait_eq(".modal button.confirm", "Delete").await;
    browser.click(".modal button.confirm").await;
    browser.wait_status("Deleted solo").await;
    browser
        .wait_eq(".empty-state h2", "No prompt stacks found.")
        .await;
    browser
        .wait_eq(".stack-list .empty", "No prompt stacks found.")
        .await;
    assert_eq!(browser.count("button.save").await, 0);
    assert_eq!(browser.count(".editor").await, 0);
    assert!(!server.path(&stack_path("solo")).exists());

    // New: live id checks, then create.
    browser.click("button.new-stack").await;
    browser.wait_eq(".modal #dialog-title", "New Preset").await;
    browser.fill(".modal input[name=new-id]", "a b").await;
    browser.wait_eq(".modal .field-note",
        "Not a valid id: must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens",
    )
    .await;
    assert!(!browser.enabled(".modal button.create").await);
    // An id too long to name a file is refused as it is typed, with the server's rule.
    browser
        .fill(".modal input[name=new-id]", &"a".repeat(300))
        .await;
    browser.wait_eq(".modal .field-note",
        "The id is 300 characters long; an id is at most 128 characters, because the file is named after it.",
    )
    .await;
    assert!(!browser.enabled(".modal button.create").await);
    browser
        .fill(".modal input[name=new-id]", "replacement")
        .await;
    browser.wait_eq(".modal .field-note", "Available.").await;
    // Without a live Pi session "Activate it now" is off and says why.
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
    assert!(browser.enabled(".modal button.create").await);
    browser.click(".modal button.create").await;
    browser.wait_status("Created replacement").await;
    browser.wait_count(".modal", 0).await;
    browser
        .wait_css(".stack-row[data-selector='project:replacement']")
        .await;
    assert_eq!(
        browser
            .count(".stack-row[data-selector='project:replacement'] .badge.active")
            .await,
        0
    );
    assert_eq!(
        server.read_json(&stack_path("replacement")),
        json!({
            "schemaVersion": 2,
            "type": "pi-forge.prompt-stack",
            "id": "replacement",
            "items": [
                { "kind": "block", "id": "identity", "role": "system", "content": "You are a coding agent working in the user's project. Read before you change, keep edits small, and say what you did." },
                { "kind": "slot", "id": "tools", "role": "system", "slot": "tools" },
                { "kind": "slot", "id": "guidelines", "role": "system", "slot": "tool-guidelines" },
                { "kind": "slot", "id": "project", "role": "system", "slot": "project-context" },
                { "kind": "slot", "id": "skills", "role": "system", "slot": "skills" },
                { "kind": "slot", "id": "when", "role": "system", "slot": "date-cwd" },
                { "kind": "slot", "id": "history", "slot": "chat-history" }
            ]
        })
    );
    // Written, not activated: nothing is active without a live session.
    let (_, list) = server.api("GET", "/api/stacks", None, None);
    assert_eq!(list["activeId"], json!(null));

    // An id that exists now is refused as you type.
    browser.click("button.new-stack").await;
    browser
        .fill(".modal input[name=new-id]", "replacement")
        .await;
    browser
        .wait_eq(
            ".modal .field-note",
            "A project Preset with the id replacement already exists.",
        )
        .await;
    assert!(!browser.enabled(".modal button.create").await);
    browser.click(".modal button.cancel").await;
    browser.wait_count(".modal", 0).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Diagnostics panel
// ---------------------------------------------------------------------------------------------

const NO_HISTORY: &str =
    "No enabled chat-history slot found; Pi chat context will be appended at the end.";

async fn panel(browser: &Browser) -> (bool, String, Vec<String>) {
    let open = browser
        .js(
            "return document.querySelector('.diagnostics-toggle').getAttribute('aria-expanded');",
            vec![],
        )
        .await
        == json!("true");
    let summary = browser
        .text(".diagnostics .summary")
        .await
        .unwrap_or_default();
    (
        open,
        summary,
        texts(browser, ".diagnostics .diagnostic .message").await,
    )
}

async fn wait_panel(browser: &Browser, want: (bool, &str, &[&str])) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = panel(browser).await;
        if got.0 == want.0 && got.1 == want.1 && got.2 == want.2 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited {WAIT:?} for the diagnostics panel {want:?}; it is {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_panel_follows_problems_until_the_user_toggles_it() {
    let (_server, browser) = start(&[sample_stack("clean", "Clean", "Clean text.")], "clean").await;
    let toggle_history = "[data-index='1'] input.item-enabled";
    wait_panel(&browser, (false, "No problems", &[])).await;

    // A warning opens the panel, its fix closes it.
    browser.click(toggle_history).await;
    wait_panel(
        &browser,
        (true, "0 errors · 1 warning · 0 info", &[NO_HISTORY]),
    )
    .await;
    browser.click(toggle_history).await;
    wait_panel(&browser, (false, "No problems", &[])).await;

    // Opened by the user: stays open through a warning and its fix.
    browser.click(".diagnostics-toggle").await;
    wait_panel(&browser, (true, "No problems", &[])).await;
    browser.click(toggle_history).await;
    wait_panel(
        &browser,
        (true, "0 errors · 1 warning · 0 info", &[NO_HISTORY]),
    )
    .await;
    browser.click(toggle_history).await;
    wait_panel(&browser, (true, "No problems", &[])).await;

    // Closed by the user: stays closed when a warning appears.
    browser.click(".diagnostics-toggle").await;
    wait_panel(&browser, (false, "No problems", &[])).await;
    browser.click(toggle_history).await;
    wait_panel(&browser, (false, "0 errors · 1 warning · 0 info", &[])).await;
    assert!(
        browser.enabled("button.save").await,
        "a warning never blocks saving"
    );
    // Saving keeps the user's choice.
    browser.click("button.save").await;
    browser.wait_status("Saved clean").await;
    wait_panel(&browser, (false, "0 errors · 1 warning · 0 info", &[])).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

/// The paths of the lazy parts, their shared chunks and their loader the page has fetched.
const LAZY_FETCHES: &str = "return performance.getEntriesByType('resource').map((r) => new URL(r.name).pathname).filter((p) => /^\\/assets\\/(split_|chunks|__wasm_split)/.test(p)).map((p) => p.replace(/_[0-9]+\\.wasm$/, '.wasm')).sort();";

/// While the draft is the file, the panel shows the server's diagnostics of it, the workspace's
/// checks included (a binding whose capability does not exist); once edited, the draft's own
/// checks, computed in the browser by a part loaded with that first edit (a first visit fetches
/// no lazy part, nor their loader); back at the file, the server's list again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_are_the_files_until_an_edit_then_the_drafts() {
    const GONE: &str =
        "Capability binding gone at index 0 does not resolve: Capability not found: project:gone.";
    let mut stack = sample_stack("worker", "Worker", "You are a worker.");
    stack["capabilities"] = json!([{ "ref": "project:gone" }]);
    let (_server, browser) = start(&[stack], "worker").await;
    let toggle_history = "[data-index='1'] input.item-enabled";
    wait_panel(&browser, (true, "0 errors · 1 warning · 0 info", &[GONE])).await;
    assert_eq!(browser.js(LAZY_FETCHES, vec![]).await, json!([]));

    browser.click(toggle_history).await;
    wait_panel(
        &browser,
        (true, "0 errors · 1 warning · 0 info", &[NO_HISTORY]),
    )
    .await;
    assert_eq!(
        browser.js(LAZY_FETCHES, vec![]).await,
        json!([
            "/assets/__wasm_split.js",
            "/assets/chunks.bin",
            "/assets/split_draft_checks.wasm"
        ])
    );

    browser.click(toggle_history).await;
    wait_panel(&browser, (true, "0 errors · 1 warning · 0 info", &[GONE])).await;
    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Slot options
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_options_form_keeps_unknown_options_and_json_errors_block_saving() {
    let mut s = sample_stack("slots", "Slots", "Slot text.");
    s["items"][1]["options"] = json!({ "futureOption": 7 });
    let (server, browser) = start(std::slice::from_ref(&s), "slots").await;

    browser.click(".item-row[data-index='1']").await;
    browser.wait_css(".slot-editor .options-form").await;
    browser
        .wait_eq(
            ".options-form .unknown-options",
            "Kept as written (not known to this form): futureOption",
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('input[name=opt-includeLastUserMessage]').checked;",
                vec![]
            )
            .await,
        json!(true)
    );
    browser
        .click("input[name=opt-includeLastUserMessage]")
        .await;
    browser.fill("input[name=opt-maxMessages]", "3").await;
    browser.wait_count(".badge.dirty", 1).await;
    browser.click("button.save").await;
    browser.wait_status("Saved slots").await;
    let saved = server.read_json(&stack_path("slots"));
    assert_eq!(
        saved["items"][1]["options"],
        json!({ "futureOption": 7, "includeLastUserMessage": false, "maxMessages": 3 })
    );
    let mut want = s.clone();
    want["items"][1]["options"] =
        json!({ "futureOption": 7, "includeLastUserMessage": false, "maxMessages": 3 });
    assert_eq!(saved, want);

    // JSON view: invalid text stays, with its error, and blocks saving.
    browser.click(".slot-editor button.json-view").await;
    assert_eq!(
        browser.value("textarea[name=slot-options-json]").await,
        "{\n  \"futureOption\": 7,\n  \"includeLastUserMessage\": false,\n  \"maxMessages\": 3\n}"
    );
    // Typed with real keys: the field keeps focus while its text turns invalid.
    let broken = "{\"futureOption\": 7,";
    browser.fill("textarea[name=slot-options-json]", "").await;
    keys(&browser, "textarea[name=slot-options-json]", broken).await;
    assert_eq!(
        browser.value("textarea[name=slot-options-json]").await,
        broken
    );
    let error = "Invalid JSON: EOF while parsing a value at line 1 column 19";
    browser.wait_eq(".slot-editor .field-error", error).await;
    browser.wait_count(".badge.dirty", 1).await;
    assert!(!browser.enabled("button.save").await);
    browser.tab("Stack").await;
    browser.tab("Items").await;
    browser.wait_eq(".slot-editor .field-error", error).await;
    assert_eq!(
        browser.value("textarea[name=slot-options-json]").await,
        broken
    );
    assert!(!browser.enabled("button.save").await);
    // Ctrl+S refuses too.
    keys(
        &browser,
        "textarea[name=slot-options-json]",
        &(Key::Control + "s"),
    )
    .await;
    browser.wait_status("Fix the errors before saving.").await;
    assert_eq!(server.read_json(&stack_path("slots")), want);

    // Repaired, the form is back; choosing another slot shows that slot's options.
    browser
        .fill("textarea[name=slot-options-json]", "{\"futureOption\": 7}")
        .await;
    browser.wait_count(".slot-editor .field-error", 0).await;
    browser.click(".slot-editor button.form-view").await;
    browser.wait_css("input[name=opt-maxMessages]").await;
    browser.fill("select[name=item-slot]", "tools").await;
    browser.wait_css("select[name=opt-format]").await;
    assert_eq!(browser.count("input[name=opt-maxMessages]").await, 0);
    browser
        .wait_eq(
            ".options-form .unknown-options",
            "Kept as written (not known to this form): futureOption",
        )
        .await;

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Tab drafts
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_errors_persist_and_block_saving_and_unknown_fields_survive() {
    let original = json!({
        "schemaVersion": 1,
        "type": "pi-forge.prompt-stack",
        "id": "drafts",
        "name": "Drafts",
        "futureTop": { "keep": [1, 2] },
        "context": { "allowDuplicateChatHistory": true },
        "tools": { "allow": ["read"], "futurePolicyField": true },
        "variables": { "var1": "resolved", "var2": "second" },
        "regex": {
            "rules": [
                { "id": "trim", "stage": "history", "pattern": "x", "replace": "y", "maxMessages": 2, "futureRuleField": "kept" }
            ]
        },
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": "Uses {{ parameters.var1 }}." },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    });
    let (server, browser) = start(std::slice::from_ref(&original), "drafts").await;

    // A duplicate variable name: an error that survives tab switches and blocks saving.
    browser.tab("Stack").await;
    assert_eq!(
        browser
            .js("return [...document.querySelectorAll('input[name=param-name]')].map(e => e.value);", vec![])
            .await,
        json!(["var1", "var2"])
    );
    browser
        .fill(".param-row:nth-child(2) input[name=param-name]", "var1")
        .await;
    let dup = "Duplicate variable name: var1";
    browser.wait_eq(".param-row .field-error", dup).await;
    assert!(!browser.enabled("button.save").await);
    browser.tab("Regex").await;

    // Regex maxMessages 0: an error on the rule card.
    browser
        .fill(".rule[data-rule='0'] input[name=rule-maxMessages]", "0")
        .await;
    browser
        .wait_css(".rule[data-rule='0'] .rule-problems")
        .await;
    let rule_error = texts(&browser, ".rule[data-rule='0'] .rule-problems li").await;
    assert_eq!(
        rule_error,
        ["Regex rule trim maxMessages must be a positive integer when provided."]
    );
    browser.tab("Policy").await;
    browser.tab("Stack").await;
    browser.wait_eq(".param-row .field-error", dup).await;
    assert_eq!(
        browser
            .js("return [...document.querySelectorAll('input[name=param-name]')].map(e => e.value);", vec![])
            .await,
        json!(["var1", "var1"])
    );
    browser.tab("Regex").await;
    assert_eq!(
        texts(&browser, ".rule[data-rule='0'] .rule-problems li").await,
        rule_error
    );
    assert!(!browser.enabled("button.save").await);

    // A duplicate tool pattern is refused where it is typed.
    browser.tab("Policy").await;
    keys(
        &browser,
        "input[name=tools-pattern]",
        &("read".to_string() + &Key::Enter),
    )
    .await;
    browser
        .wait_eq(
            "[data-policy=tools] .field-error",
            "read is already listed.",
        )
        .await;
    assert_eq!(
        texts(&browser, "[data-policy=tools] .chip .chip-text").await,
        ["read"]
    );

    // Fix both, rename, save: every unknown member is kept exactly.
    browser.tab("Regex").await;
    browser
        .fill(".rule[data-rule='0'] input[name=rule-maxMessages]", "2")
        .await;
    browser
        .wait_count(".rule[data-rule='0'] .rule-problems", 0)
        .await;
    browser.tab("Stack").await;
    browser
        .fill(".param-row:nth-child(2) input[name=param-name]", "var2")
        .await;
    browser.wait_count(".param-row .field-error", 0).await;
    browser.fill("input[name=stack-name]", "Drafts saved").await;
    browser
        .wait_js(
            "Save enabled",
            "return !document.querySelector('button.save').disabled;",
            json!(true),
        )
        .await;
    browser.click("button.save").await;
    browser.wait_status("Saved drafts").await;
    let mut want = original.clone();
    want["name"] = json!("Drafts saved");
    assert_eq!(server.read_json(&stack_path("drafts")), want);

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 8. Live updates
// ---------------------------------------------------------------------------------------------

/// Two writers change different places: the conflict view offers a three-way merge, and both
/// changes reach the file; where both changed the same place, the merge names it and keeps mine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_save_merges_both_writers_changes() {
    let live = sample_stack("live", "Live", "Live text.");
    let (server, browser) = start(std::slice::from_ref(&live), "live").await;
    browser.tab("Stack").await;
    browser.fill("input[name=stack-name]", "Mine").await;
    browser.wait_count(".badge.dirty", 1).await;
    // Another writer changes the block's text.
    let mut theirs = live.clone();
    theirs["items"][0]["content"] = json!("Their text.");
    server.write_external(&stack_path("live"), &pretty(&theirs));
    browser.wait_css(".disk-changed").await;
    browser.click(".disk-changed button.keep-mine").await;
    browser.click("button.save").await;
    browser.wait_css(".conflict .merge.clean").await;
    assert_eq!(
        browser.text(".merge-clean").await.as_deref(),
        Some("Your changes and the changes on disk touch different places: they merge without a conflict.")
    );
    browser.click(".conflict button.merge-both").await;
    browser
        .wait_status("Merged with the version on disk. Review, then save.")
        .await;
    browser.wait_count(".conflict", 0).await;
    browser.click("button.save").await;
    browser.wait_status("Saved live").await;
    let mut both = live.clone();
    both["name"] = json!("Mine");
    both["items"][0]["content"] = json!("Their text.");
    wait_file(&server, &stack_path("live"), &both).await;

    // Now both change the name: the merge names the place and keeps mine.
    browser.fill("input[name=stack-name]", "Mine again").await;
    let mut theirs = both.clone();
    theirs["name"] = json!("Theirs");
    server.write_external(&stack_path("live"), &pretty(&theirs));
    browser.wait_css(".disk-changed").await;
    browser.click(".disk-changed button.keep-mine").await;
    browser.click("button.save").await;
    browser.wait_css(".conflict .merge-conflicts").await;
    assert_eq!(
        texts(&browser, ".merge-conflicts li .merge-conflict-text").await,
        ["/name — on disk: \"Theirs\" · yours: \"Mine again\""]
    );
    browser.click(".conflict button.merge-both").await;
    browser.click("button.save").await;
    browser.wait_status("Saved live").await;
    let mut mine = both.clone();
    mine["name"] = json!("Mine again");
    wait_file(&server, &stack_path("live"), &mine).await;

    // Both change the name and the text; the person keeps the disk's name and their own text.
    browser
        .fill("input[name=stack-name]", "Mine once more")
        .await;
    browser.tab("Items").await;
    browser.click(".item-row[data-index='0']").await;
    browser
        .fill("textarea[name=item-content]", "My text.")
        .await;
    let mut theirs = mine.clone();
    theirs["name"] = json!("Their final name");
    theirs["items"][0]["content"] = json!("Their final text.");
    server.write_external(&stack_path("live"), &pretty(&theirs));
    browser.wait_css(".disk-changed").await;
    browser.click(".disk-changed button.keep-mine").await;
    browser.click("button.save").await;
    browser.wait_count(".merge-conflicts li", 2).await;
    assert_eq!(
        browser.text(".conflict button.merge-both").await.as_deref(),
        Some("Merge, keeping mine where both changed")
    );
    browser
        .click(".merge-conflicts li[data-path='/name'] .merge-take-theirs")
        .await;
    assert_eq!(
        browser.text(".conflict button.merge-both").await.as_deref(),
        Some("Merge with these choices")
    );
    browser.screenshot("merge-view").await;
    // The view (loaded on demand) also at phone width, then back to the desktop.
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("resize");
    browser.wait_count(".merge-conflicts li", 2).await;
    browser.screenshot("merge-view-390x844").await;
    browser
        .client
        .set_window_size(1280, 900)
        .await
        .expect("resize");
    browser.click(".conflict button.merge-both").await;
    browser.click("button.save").await;
    browser.wait_status("Saved live").await;
    let mut chosen = theirs.clone();
    chosen["items"][0]["content"] = json!("My text.");
    wait_file(&server, &stack_path("live"), &chosen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_edits_reach_a_clean_editor_and_conflict_with_a_dirty_one() {
    let live = sample_stack("live", "Live", "Live text.");
    let (server, browser) = start(std::slice::from_ref(&live), "live").await;
    browser.tab("Stack").await;

    // A clean editor follows the file within a second.
    let mut external = live.clone();
    external["name"] = json!("External one");
    let started = Instant::now();
    server.write_external(&stack_path("live"), &pretty(&external));
    browser.wait_eq(".stack-title", "External one").await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the edit took {took:?} to show"
    );
    assert_eq!(
        browser.value("input[name=stack-name]").await,
        "External one"
    );
    browser.wait_status("Reloaded live from disk").await;
    assert_eq!(browser.count(".badge.dirty").await, 0);

    // A dirty editor keeps the draft and says the file changed.
    browser.fill("input[name=stack-name]", "Mine").await;
    browser.wait_count(".badge.dirty", 1).await;
    let mut external2 = live.clone();
    external2["name"] = json!("External two");
    server.write_external(&stack_path("live"), &pretty(&external2));
    browser.wait_css(".disk-changed").await;
    assert_eq!(
        browser.text(".disk-changed span").await.as_deref(),
        Some("This Preset changed on disk. Your unsaved changes are still here.")
    );
    assert_eq!(browser.value("input[name=stack-name]").await, "Mine");
    assert_eq!(browser.count(".badge.dirty").await, 1);

    // Keep mine, then Save: refused with a conflict view; the disk version is untouched.
    browser.click(".disk-changed button.keep-mine").await;
    browser.wait_count(".disk-changed", 0).await;
    browser.click("button.save").await;
    browser.wait_css(".conflict").await;
    browser
        .wait_status("Not saved: the file changed on disk. Choose which version to keep.")
        .await;
    assert_eq!(server.read_json(&stack_path("live")), external2);
    assert_eq!(browser.value("input[name=stack-name]").await, "Mine");
    // The refused PUT is the one expected failed-resource log.
    assert_eq!(
        browser.console_errors().await,
        [format!(
            "{}api/stacks/project%3Alive - Failed to load resource: the server responded with a status of 409 (Conflict)",
            server.base
        )]
    );
    let marks = texts(&browser, ".conflict table.diff mark").await;
    assert_eq!(marks, ["External two", "Mine"]);

    // Save mine over it.
    browser.click(".conflict button.overwrite").await;
    browser.wait_status("Saved live").await;
    browser.wait_count(".conflict", 0).await;
    let mut mine = live.clone();
    mine["name"] = json!("Mine");
    assert_eq!(server.read_json(&stack_path("live")), mine);
    assert_eq!(browser.count(".badge.dirty").await, 0);

    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_whose_file_was_deleted_is_saved_again_or_forked_from_the_draft() {
    let live = sample_stack("live", "Live", "Live text.");
    let (server, browser) = start(std::slice::from_ref(&live), "live").await;
    browser.tab("Stack").await;
    browser.fill("input[name=stack-name]", "Mine").await;
    browser.wait_count(".badge.dirty", 1).await;

    std::fs::remove_file(server.path(&stack_path("live"))).expect("delete the file");
    browser.wait_css(".disk-changed").await;
    assert_eq!(
        browser.text(".disk-changed span").await.as_deref(),
        Some("This Preset was deleted on disk. Your unsaved changes are still here.")
    );
    // Keep mine: the draft stays, and the editor says what Save and Fork now do.
    browser.click(".disk-changed button.keep-mine").await;
    browser.wait_count(".disk-changed", 0).await;
    assert_eq!(
        browser.text(".file-gone").await.as_deref(),
        Some("This Preset's file was deleted on disk. Save writes your draft to it again; Fork saves the draft under another ID.")
    );
    assert_eq!(browser.value("input[name=stack-name]").await, "Mine");

    // Save creates the file again with the draft's content (before: "Unknown prompt stack").
    browser.click("button.save").await;
    browser
        .wait_status("Saved live: its file was written again")
        .await;
    let mut mine = live.clone();
    mine["name"] = json!("Mine");
    wait_file(&server, &stack_path("live"), &mine).await;
    browser.wait_count(".file-gone", 0).await;
    browser.wait_count(".badge.dirty", 0).await;

    // Deleted again with a new unsaved edit: Fork copies the draft (there is no file to copy).
    browser.fill("input[name=stack-name]", "Mine again").await;
    browser.wait_count(".badge.dirty", 1).await;
    std::fs::remove_file(server.path(&stack_path("live"))).expect("delete the file");
    browser.wait_css(".disk-changed").await;
    browser.click(".disk-changed button.keep-mine").await;
    browser.wait_css(".file-gone").await;
    browser.click("button.more-toggle").await;
    browser.click(".more .menu button.fork").await;
    browser.wait_css(".modal input[name=fork-id]").await;
    assert_eq!(
        browser.text(".modal .banner.info").await.as_deref(),
        Some("The saved file was deleted on disk: the fork is made from your draft.")
    );
    assert_eq!(
        browser.value(".modal input[name=fork-name]").await,
        "Mine again (copy)"
    );
    browser
        .fill(".modal input[name=fork-id]", "live-kept")
        .await;
    browser.wait_eq(".modal .field-note", "Available.").await;
    browser.click_text(".modal button.primary", "Fork").await;
    browser.wait_status("Forked to live-kept").await;
    let mut fork = live.clone();
    fork["id"] = json!("live-kept");
    fork["name"] = json!("Mine again (copy)");
    wait_file(&server, &stack_path("live-kept"), &fork).await;
    // The editor now shows the fork, saved; the deleted file stays deleted.
    browser.wait_eq(".stack-title", "Mine again (copy)").await;
    assert_eq!(browser.count(".badge.dirty").await, 0);
    assert!(!server.path(&stack_path("live")).exists());

    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_from_disk_drops_the_draft_for_the_external_version() {
    let live = sample_stack("live", "Live", "Live text.");
    let (server, browser) = start(std::slice::from_ref(&live), "live").await;
    browser.tab("Stack").await;
    browser.fill("input[name=stack-name]", "Mine").await;
    browser.wait_count(".badge.dirty", 1).await;

    let mut external = live.clone();
    external["name"] = json!("External");
    external["description"] = json!("Changed elsewhere.");
    server.write_external(&stack_path("live"), &pretty(&external));
    browser.wait_css(".disk-changed").await;
    assert_eq!(browser.value("input[name=stack-name]").await, "Mine");

    browser.click(".disk-changed button.reload-disk").await;
    browser.wait_status("Loaded live").await;
    browser.wait_count(".disk-changed", 0).await;
    browser.wait_count(".badge.dirty", 0).await;
    assert_eq!(browser.value("input[name=stack-name]").await, "External");
    assert_eq!(
        browser.value("textarea[name=stack-description]").await,
        "Changed elsewhere."
    );
    assert_eq!(server.read_json(&stack_path("live")), external);

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 9. Typed parameters
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_parameters_survive_editing_another_parameter() {
    let mut s = sample_stack(
        "typed",
        "Typed",
        "At most {{ parameters.maxFindings }} findings.",
    );
    s["parameters"] = json!({ "style": { "tone": "dry", "bullets": true }, "maxFindings": 5 });
    let (server, browser) = start(std::slice::from_ref(&s), "typed").await;

    browser.tab("Stack").await;
    assert_eq!(
        browser
            .js("return [...document.querySelectorAll('.param-row')].map(r => [r.querySelector('input[name=param-name]').value, r.querySelector('textarea[name=param-value]').value]);", vec![])
            .await,
        json!([
            ["style", "{\n  \"tone\": \"dry\",\n  \"bullets\": true\n}"],
            ["maxFindings", "5"]
        ])
    );
    browser
        .fill(".param-row:nth-child(2) textarea[name=param-value]", "8")
        .await;
    browser.wait_count(".badge.dirty", 1).await;
    browser.click("button.save").await;
    browser.wait_status("Saved typed").await;
    let saved = server.read_json(&stack_path("typed"));
    assert_eq!(
        saved["parameters"],
        json!({ "style": { "tone": "dry", "bullets": true }, "maxFindings": 8 })
    );
    assert!(
        saved["parameters"]["maxFindings"].is_u64(),
        "8 stays a number"
    );
    let mut want = s.clone();
    want["parameters"]["maxFindings"] = json!(8);
    assert_eq!(saved, want);

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 10. Reordering
// ---------------------------------------------------------------------------------------------

fn three_blocks() -> Value {
    json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "order",
        "name": "Order",
        "items": [
            { "kind": "block", "id": "a", "name": "A", "role": "system", "content": "A." },
            { "kind": "block", "id": "b", "name": "B", "role": "system", "content": "B." },
            { "kind": "block", "id": "c", "name": "C", "role": "system", "content": "C." },
            { "kind": "slot", "id": "history", "name": "History", "slot": "chat-history" }
        ]
    })
}

fn reordered(base: &Value, order: &[&str]) -> Value {
    let mut out = base.clone();
    let items = base["items"].as_array().unwrap();
    out["items"] = Value::Array(
        order
            .iter()
            .map(|id| items.iter().find(|i| i["id"] == *id).unwrap().clone())
            .collect(),
    );
    out
}

async fn focused_index(browser: &Browser) -> Value {
    browser
        .js(
            "const e = document.activeElement; return e && e.classList.contains('item-row') ? e.dataset.index : null;",
            vec![],
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_reorder_with_the_keyboard_and_with_drag_and_drop() {
    let base = three_blocks();
    let (server, browser) = start(std::slice::from_ref(&base), "order").await;
    assert_eq!(item_titles(&browser).await, ["A", "B", "C", "History"]);

    // Alt+↓ on the focused first row moves it down; focus and selection follow it.
    browser.click(".item-row[data-index='0']").await;
    assert_eq!(focused_index(&browser).await, json!("0"));
    keys(
        &browser,
        ".item-row[data-index='0']",
        &(Key::Alt + &Key::Down),
    )
    .await;
    browser
        .wait_js(
            "order after Alt+Down",
            "return [...document.querySelectorAll('.item-row .item-name')].map(e => e.textContent);",
            json!(["B", "A", "C", "History"]),
        )
        .await;
    browser
        .wait_js(
            "focus follows",
            "const e = document.activeElement; return e && e.dataset ? e.dataset.index : null;",
            json!("1"),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.item-row[aria-current=true]').dataset.index;",
                vec![]
            )
            .await,
        json!("1")
    );
    assert_eq!(browser.value("input[name=item-id]").await, "a");
    // Plain ↓ only moves the selection.
    keys(&browser, ".item-row[data-index='1']", &Key::Down).await;
    browser
        .wait_js(
            "selection moves",
            "return document.querySelector('.item-row[aria-current=true]').dataset.index;",
            json!("2"),
        )
        .await;
    assert_eq!(item_titles(&browser).await, ["B", "A", "C", "History"]);

    // Ctrl+S saves the new order.
    keys(&browser, ".item-row[data-index='2']", &(Key::Control + "s")).await;
    browser.wait_status("Saved order").await;
    assert_eq!(
        focused_index(&browser).await,
        json!("2"),
        "focus stays after saving"
    );
    assert_eq!(
        server.read_json(&stack_path("order")),
        reordered(&base, &["b", "a", "c", "history"])
    );

    // Drag the last row onto the first.
    browser
        .js(
            r#"
            const rows = () => document.querySelectorAll('.item-row');
            const dt = new DataTransfer();
            const from = rows()[3], to = rows()[0];
            from.dispatchEvent(new DragEvent('dragstart', { bubbles: true, cancelable: true, dataTransfer: dt }));
            to.dispatchEvent(new DragEvent('dragenter', { bubbles: true, cancelable: true, dataTransfer: dt }));
            to.dispatchEvent(new DragEvent('dragover', { bubbles: true, cancelable: true, dataTransfer: dt }));
            to.dispatchEvent(new DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt }));
            from.dispatchEvent(new DragEvent('dragend', { bubbles: true, cancelable: true, dataTransfer: dt }));
            return true;
            "#,
            vec![],
        )
        .await;
    browser
        .wait_js(
            "order after drop",
            "return [...document.querySelectorAll('.item-row .item-name')].map(e => e.textContent);",
            json!(["History", "B", "A", "C"]),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.item-row[aria-current=true]').dataset.index;",
                vec![]
            )
            .await,
        json!("0")
    );
    assert_eq!(browser.count(".item-row.drop-target").await, 0);
    browser.click("button.save").await;
    browser.wait_status("Saved order").await;
    wait_file(
        &server,
        &stack_path("order"),
        &reordered(&base, &["history", "b", "a", "c"]),
    )
    .await;

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 11. Layout
// ---------------------------------------------------------------------------------------------

async fn assert_fits(browser: &Browser, what: &str) {
    assert_eq!(
        browser.horizontal_overflow().await,
        Vec::<String>::new(),
        "{what}: horizontal overflow"
    );
    for css in ["button.save", "button.new-stack"] {
        assert!(
            browser.in_viewport(css).await,
            "{what}: {css} is outside the viewport at {:?}",
            browser.rect(css).await
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_fits_desktop_and_phone_on_items_and_policy() {
    let mut s = three_blocks();
    s["tools"] = json!({ "allow": ["read", "grep", "find", "ls", "some-very-long-tool-name-*"] });
    let (_server, browser) = start(std::slice::from_ref(&s), "order").await;

    for (w, h) in [(1280, 900), (390, 844)] {
        browser.viewport(w, h).await;
        browser.tab("Items").await;
        browser.wait_css(".item-form").await;
        assert_fits(&browser, &format!("Items at {w}×{h}")).await;
        browser.tab("Policy").await;
        browser.wait_css("[data-policy=tools] .chip").await;
        assert_fits(&browser, &format!("Policy at {w}×{h}")).await;
        browser.screenshot(&format!("presets-policy-{w}x{h}")).await;
    }

    browser.assert_no_errors().await;
    browser.close().await;
}

/// The "Discard unsaved changes?" confirm is opened from a stack row's click handler. When the
/// stack list re-renders while it is open (any file change), confirming must still work (it
/// once held a reactive `Callback` owned by the row, disposed with it, and panicked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_confirm_survives_a_stack_list_refresh() {
    let mut alpha = sample_stack("alpha", "Alpha", "Alpha text.");
    alpha["autoActivate"] = json!(true);
    let beta = sample_stack("beta", "Beta", "Beta text.");
    let (server, browser) = start(&[alpha, beta.clone()], "alpha").await;
    browser.tab("Stack").await;
    browser.fill("input[name=stack-name]", "Alpha draft").await;
    browser.wait_count(".badge.dirty", 1).await;
    browser
        .click(".stack-row[data-selector='project:beta']")
        .await;
    browser
        .wait_eq(".modal button.confirm", "Discard changes")
        .await;
    // Another program changes beta while the dialog is open: the list re-renders.
    let mut changed = beta.clone();
    changed["name"] = json!("Beta two");
    server.write_external(&stack_path("beta"), &pretty(&changed));
    browser
        .wait_eq(
            ".stack-row[data-selector='project:beta'] .row-title",
            "Beta two",
        )
        .await;
    browser.click(".modal button.confirm").await;
    browser.wait_status("Loaded beta").await;
    browser.wait_eq(".stack-title", "Beta two").await;

    browser.assert_no_errors().await;
    browser.close().await;
}

/// Removing the last regex rule removes the `regex` member (as the original editor did); a
/// `regex` object that holds something else is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_last_regex_rule_drops_the_regex_member() {
    let mut only = sample_stack("only", "Only", "Text.");
    only["regex"] = json!({
        "schemaVersion": 1,
        "rules": [{ "id": "x", "stage": "history", "pattern": "a", "replace": "b" }]
    });
    let (server, browser) = start(&[only.clone()], "only").await;
    browser.tab("Regex").await;
    browser
        .click(".rule[data-rule='0'] button[aria-label='Remove rule']")
        .await;
    browser.wait_count(".rule", 0).await;
    browser.click("button.save").await;
    browser.wait_status("Saved only").await;
    let mut want = only.clone();
    want.as_object_mut().unwrap().shift_remove("regex");
    assert_eq!(server.read_json(&stack_path("only")), want);
    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// 12. Races and lost keystrokes
// ---------------------------------------------------------------------------------------------

/// Delays the answer of the next request whose method is `method` and whose path matches the
/// regular expression `path` by `ms`; `window.__gate.state` goes `armed` → `pending` → `done`
/// (250 ms after the app received the late answer). Every request's `METHOD path` is logged in
/// `window.__requests`.
const GATE: &str = r#"
const [method, path, ms] = arguments;
window.__gate = { state: 'armed', method, path: new RegExp(path), ms };
window.__requests = window.__requests || [];
if (!window.__gateFetch) {
  window.__gateFetch = window.fetch;
  window.fetch = function (input, init) {
    const orig = window.__gateFetch;
    const req = input instanceof Request ? input : new Request(input, init);
    const p = new URL(req.url).pathname;
    window.__requests.push(req.method + ' ' + p);
    const g = window.__gate;
    if (g.state !== 'armed' || req.method !== g.method || !g.path.test(p)) return orig(req);
    g.state = 'pending';
    return orig(req).then((resp) => new Promise((resolve) => setTimeout(() => {
      resolve(resp);
      setTimeout(() => { g.state = 'done'; }, 250);
    }, g.ms)));
  };
}
return true;
"#;

async fn gate(browser: &Browser, method: &str, path: &str, ms: u64) {
    browser
        .js(GATE, vec![json!(method), json!(path), json!(ms)])
        .await;
}

async fn wait_gate(browser: &Browser, state: &str) {
    browser
        .wait_js("gated request", "return window.__gate.state;", json!(state))
        .await;
}

/// Records whether an element matching `css` ever appears (in `window.__seen[css]`).
async fn watch_for(browser: &Browser, css: &str) {
    browser
        .js(
            "const css = arguments[0]; window.__seen = window.__seen || {}; window.__seen[css] = !!document.querySelector(css); \
             new MutationObserver(() => { if (document.querySelector(css)) window.__seen[css] = true; }) \
               .observe(document.body, { subtree: true, childList: true }); return true;",
            vec![json!(css)],
        )
        .await;
}

async fn seen(browser: &Browser, css: &str) -> bool {
    browser
        .js("return window.__seen[arguments[0]];", vec![json!(css)])
        .await
        == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_stack_load_never_replaces_a_later_choice() {
    let stacks = [
        sample_stack("alpha", "Alpha", "Alpha text."),
        sample_stack("beta", "Beta", "Beta text."),
        sample_stack("gamma", "Gamma", "Gamma text."),
    ];
    let (_server, browser) = start(&stacks, "alpha").await;
    gate(&browser, "GET", "/api/stacks/project%3Abeta$", 1500).await;
    browser
        .click(".stack-row[data-selector='project:beta']")
        .await;
    wait_gate(&browser, "pending").await;
    browser
        .click(".stack-row[data-selector='project:gamma']")
        .await;
    browser.wait_status("Loaded gamma").await;
    wait_gate(&browser, "done").await;
    assert_eq!(browser.text(".stack-title").await.as_deref(), Some("Gamma"));
    assert_eq!(
        browser
            .text(".stack-row[aria-current=true] .row-id")
            .await
            .as_deref(),
        Some("gamma")
    );
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "Gamma text."
    );
    assert_eq!(
        browser.text(".topbar .status").await.as_deref(),
        Some("Loaded gamma")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Ctrl+S while typing in a block's template keeps the focus, the caret and the scroll in the
/// textarea: the keys typed right after the save land in the text (issue 17, point 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_s_in_a_template_keeps_focus_caret_and_scroll() {
    let long: String = (1..=60).map(|n| format!("Line {n}.\n")).collect();
    let (server, browser) = start(&[sample_stack("alpha", "Alpha", &long)], "alpha").await;
    let area = "textarea[name=item-content]";
    // Caret after "Line 30." and the textarea scrolled to it.
    let at = long.find("Line 31.").unwrap() - 1;
    browser
        .js(
            "const t = document.querySelector(arguments[0]); t.focus(); t.setSelectionRange(arguments[1], arguments[1]); return true;",
            vec![json!(area), json!(at)],
        )
        .await;
    let typed = |text: &'static str| async {
        let el = browser
            .client
            .active_element()
            .await
            .expect("a focused element");
        el.send_keys(text).await.expect("typing");
    };
    typed(" A").await;
    browser.wait_count(".badge.dirty", 1).await;
    let scroll = browser
        .js("return document.activeElement.scrollTop;", vec![])
        .await;
    assert!(scroll.as_f64().unwrap() > 0.0, "the textarea is scrolled");
    let focused = browser.client.active_element().await.unwrap();
    focused.send_keys(&(Key::Control + "s")).await.unwrap();
    browser.wait_status("Saved alpha").await;
    browser.wait_count(".badge.dirty", 0).await;
    let state = browser
        .js(
            "const t = document.activeElement; return [t.name, t.selectionStart, t.scrollTop];",
            vec![],
        )
        .await;
    assert_eq!(state, json!(["item-content", at + 2, scroll]));
    typed(" B").await;
    let want = long.replacen("Line 30.", "Line 30. A B", 1);
    assert_eq!(browser.value(area).await, want);
    browser.click("button.save").await;
    wait_file(
        &server,
        &stack_path("alpha"),
        &sample_stack("alpha", "Alpha", &want),
    )
    .await;
}

/// Each choice of a select is listed once, and a value the list does not know (a newer Pi's
/// role) is listed once too (issue 17, point 10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selects_list_each_value_once() {
    let mut stack = sample_stack("alpha", "Alpha", "One.");
    stack["items"]
        .as_array_mut()
        .unwrap()
        .push(json!({"kind": "block", "id": "dev", "role": "developer", "content": "Two."}));
    stack["regex"] = json!({"rules": [{"id": "r", "stage": "compiled", "effect": "finalize", "targets": ["messages"], "pattern": "x", "replace": "y"}]});
    let (_server, browser) = start(&[stack], "alpha").await;
    let values = |css: &'static str| {
        let browser = &browser;
        async move {
            browser
                .js("return [...document.querySelectorAll(arguments[0] + ' option')].map(o => o.value);", vec![json!(css)])
                .await
        }
    };
    browser.wait_css("select[name=item-role]").await;
    assert_eq!(
        values("select[name=item-role]").await,
        json!(["", "system", "user", "assistant"])
    );
    browser.click(".item-row[data-index='2']").await;
    browser
        .wait_js(
            "the dev item's editor",
            "return document.querySelector('input[name=item-id]').value;",
            json!("dev"),
        )
        .await;
    assert_eq!(
        values("select[name=item-role]").await,
        json!(["", "system", "user", "assistant", "developer"])
    );
    browser.tab("Regex").await;
    browser.wait_css("select[name=rule-stage]").await;
    assert_eq!(
        values("select[name=rule-stage]").await,
        json!(["", "history", "compiled"])
    );
    assert_eq!(
        values("select[name=rule-effect]").await,
        json!(["", "outgoing", "finalize"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystrokes_typed_while_a_save_is_in_flight_stay_in_the_draft() {
    let (server, browser) = start(&[sample_stack("alpha", "Alpha", "One.")], "alpha").await;
    watch_for(&browser, ".disk-changed").await;
    gate(&browser, "PUT", "/api/stacks/", 1500).await;
    browser.fill("textarea[name=item-content]", "Two.").await;
    browser.click("button.save").await;
    wait_gate(&browser, "pending").await;
    browser
        .fill("textarea[name=item-content]", "Two. Three.")
        .await;
    wait_gate(&browser, "done").await;
    browser.wait_status("Saved alpha").await;
    let mut saved = sample_stack("alpha", "Alpha", "Two.");
    wait_file(&server, &stack_path("alpha"), &saved).await;
    // The later keystrokes are still there, and still unsaved; our own save's change event
    // never raised the "changed on disk" banner.
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "Two. Three."
    );
    browser.wait_eq(".badge.dirty", "unsaved").await;
    assert!(!seen(&browser, ".disk-changed").await, "the banner flashed");
    browser.click("button.save").await;
    saved["items"][0]["content"] = json!("Two. Three.");
    wait_file(&server, &stack_path("alpha"), &saved).await;
    browser.wait_count(".badge.dirty", 0).await;
    // No conflict: its view is loaded on demand, so the status line (set at once) says it too.
    assert_eq!(browser.count(".conflict").await, 0);
    assert_eq!(
        browser.text(".topbar .status").await.as_deref(),
        Some("Saved alpha")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_s_during_a_save_sends_nothing_and_raises_no_conflict() {
    let (server, browser) = start(&[sample_stack("alpha", "Alpha", "One.")], "alpha").await;
    gate(&browser, "PUT", "/api/stacks/", 800).await;
    browser.fill("textarea[name=item-content]", "Two.").await;
    browser
        .js(
            "for (let i = 0; i < 2; i++) window.dispatchEvent(new KeyboardEvent('keydown', { key: 's', ctrlKey: true, bubbles: true })); return true;",
            vec![],
        )
        .await;
    wait_gate(&browser, "done").await;
    browser.wait_status("Saved alpha").await;
    wait_file(
        &server,
        &stack_path("alpha"),
        &sample_stack("alpha", "Alpha", "Two."),
    )
    .await;
    let puts = browser
        .js(
            "return window.__requests.filter(r => r.startsWith('PUT ')).length;",
            vec![],
        )
        .await;
    assert_eq!(puts, json!(1));
    // No conflict: its view is loaded on demand, so the status line (set at once) says it too.
    assert_eq!(browser.count(".conflict").await, 0);
    assert_eq!(
        browser.text(".topbar .status").await.as_deref(),
        Some("Saved alpha")
    );
    assert_eq!(browser.count(".badge.dirty").await, 0);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_answer_never_replaces_keystrokes_typed_while_it_was_in_flight() {
    let (server, browser) = start(&[sample_stack("alpha", "Alpha", "One.")], "alpha").await;
    gate(&browser, "GET", "/api/stacks/project%3Aalpha$", 1500).await;
    let external = sample_stack("alpha", "Alpha", "Changed elsewhere.");
    server.write_external(&stack_path("alpha"), &pretty(&external));
    wait_gate(&browser, "pending").await;
    browser.fill("textarea[name=item-content]", "Mine.").await;
    wait_gate(&browser, "done").await;
    browser.wait_css(".disk-changed").await;
    assert_eq!(browser.value("textarea[name=item-content]").await, "Mine.");
    browser.wait_eq(".badge.dirty", "unsaved").await;
    // The banner's reload takes the external version.
    browser.click(".disk-changed button.reload-disk").await;
    // The status may already read "Loaded alpha" from the first load: wait for the text itself.
    browser
        .wait_js(
            "the reloaded text",
            "return document.querySelector('textarea[name=item-content]').value;",
            json!("Changed elsewhere."),
        )
        .await;
    browser.wait_status("Loaded alpha").await;
    browser.wait_count(".badge.dirty", 0).await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_slot_is_one_the_preset_does_not_have_yet() {
    let s = sample_stack("slots2", "Slots", "Text.");
    let (_server, browser) = start(std::slice::from_ref(&s), "slots2").await;
    // The Preset has a chat history: "+ Slot" adds the next built-in slot, tools, with no
    // warning (before: a second chat-history slot, skipped with a warning at once).
    browser.click("button.add-slot").await;
    browser.wait_count(".item-row", 3).await;
    assert_eq!(browser.value("select[name=item-slot]").await, "tools");
    browser.click("button.add-slot").await;
    browser.wait_count(".item-row", 4).await;
    assert_eq!(
        browser.value("select[name=item-slot]").await,
        "tool-guidelines"
    );
    let warnings = texts(&browser, ".diagnostic.warning .message").await;
    assert_eq!(warnings, Vec::<String>::new());
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_a_parameter_keeps_its_unparsed_value_with_it() {
    let mut params = sample_stack("params", "Params", "Tone: {{ parameters.tone }}");
    params["parameters"] = json!({ "tone": "calm", "other": 1 });
    let (server, browser) = start(std::slice::from_ref(&params), "params").await;
    browser.tab("Stack").await;
    let first = ".param-row:nth-child(1)";
    // A word typed without quotes: the error says how to write it, not the parser's words.
    browser
        .fill(&format!("{first} textarea[name=param-value]"), "warm")
        .await;
    browser
        .wait_eq(
            &format!("{first} .param-value .field-error"),
            "Text goes in double quotes: \"warm\". A value is JSON: a number, true, false, null, [a list] or {an object} go as they are.",
        )
        .await;
    browser
        .fill(&format!("{first} textarea[name=param-value]"), "\"warm")
        .await;
    browser
        .wait_count(&format!("{first} .param-value .field-error"), 1)
        .await;
    browser
        .fill(&format!("{first} input[name=param-name]"), "mood")
        .await;
    browser
        .wait_js(
            "renamed",
            "return [...document.querySelectorAll('input[name=param-name]')].map(e => e.value);",
            json!(["mood", "other"]),
        )
        .await;
    // The unparsed text moved with the parameter: shown, flagged, and fixable.
    assert_eq!(
        browser
            .value(&format!("{first} textarea[name=param-value]"))
            .await,
        "\"warm"
    );
    assert_eq!(browser.count(".param-value .field-error").await, 1);
    assert!(!browser.enabled("button.save").await);
    browser
        .fill(&format!("{first} textarea[name=param-value]"), "\"warm\"")
        .await;
    browser.wait_count(".field-error", 0).await;
    browser
        .wait_js(
            "Save enabled",
            "return !document.querySelector('button.save').disabled;",
            json!(true),
        )
        .await;
    browser.click("button.save").await;
    browser.wait_status("Saved params").await;
    let mut want = params.clone();
    want["parameters"] = json!({ "mood": "warm", "other": 1 });
    assert_eq!(server.read_json(&stack_path("params")), want);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_an_item_keeps_another_items_unparsed_options() {
    let (_server, browser) = start(&[sample_stack("alpha", "Alpha", "One.")], "alpha").await;
    // The slot (item 1): options as invalid JSON.
    browser.click(".item-row[data-index='1']").await;
    browser.click(".slot-editor button.json-view").await;
    browser
        .fill("textarea[name=slot-options-json]", "{\"maxMessages\": ")
        .await;
    browser.wait_css(".slot-editor .field-error").await;
    // A new block after item 0 pushes the slot to index 2; its text follows it.
    browser.click(".item-row[data-index='0']").await;
    browser.click("button.add-block").await;
    browser.wait_count(".item-row", 3).await;
    assert_eq!(item_titles(&browser).await, ["intro", "block-1", "history"]);
    browser.click(".item-row[data-index='2']").await;
    assert_eq!(
        browser.value("textarea[name=slot-options-json]").await,
        "{\"maxMessages\": "
    );
    browser.wait_css(".slot-editor .field-error").await;
    assert!(!browser.enabled("button.save").await);
    // Removing the new block moves it back to index 1, text included.
    browser.click(".item-row[data-index='1']").await;
    browser.click("button.remove-item").await;
    browser.wait_count(".item-row", 2).await;
    browser.click(".item-row[data-index='1']").await;
    assert_eq!(
        browser.value("textarea[name=slot-options-json]").await,
        "{\"maxMessages\": "
    );
    assert!(!browser.enabled("button.save").await);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_valid_json_is_not_reformatted_under_the_caret() {
    let mut params = sample_stack("params", "Params", "{{ parameters.list }}");
    params["parameters"] = json!({ "list": "" });
    let (server, browser) = start(std::slice::from_ref(&params), "params").await;
    browser.tab("Stack").await;
    let field = "textarea[name=param-value]";
    browser.click(field).await;
    keys(
        &browser,
        field,
        &format!("{}a{}", Key::Control, Key::Control),
    )
    .await;
    keys(&browser, field, "[1, 2]").await;
    assert_eq!(browser.value(field).await, "[1, 2]");
    // Back to just after the 1, then type two zeros.
    let left = Key::Left.to_string();
    keys(&browser, field, &format!("{}00", left.repeat(4))).await;
    assert_eq!(browser.value(field).await, "[100, 2]");
    browser.click("button.save").await;
    browser.wait_status("Saved params").await;
    let mut want = params.clone();
    want["parameters"] = json!({ "list": [100, 2] });
    assert_eq!(server.read_json(&stack_path("params")), want);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_from_a_renamed_parameter_lands_in_its_value() {
    let mut params = sample_stack("params", "Params", "{{ parameters.tone }}");
    params["parameters"] = json!({ "tone": "\"calm\"" });
    let (_server, browser) = start(std::slice::from_ref(&params), "params").await;
    browser.tab("Stack").await;
    let name = ".param-row:nth-child(1) input[name=param-name]";
    browser.click(name).await;
    keys(&browser, name, &format!("x{}", Key::Tab)).await;
    browser
        .wait_js(
            "renamed",
            "return [...document.querySelectorAll('input[name=param-name]')].map(e => e.value);",
            json!(["tonex"]),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "const e = document.activeElement; return e ? e.tagName + '.' + (e.name || '') : null;",
                vec![]
            )
            .await,
        json!("TEXTAREA.param-value")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_name_the_list_does_not_know_stays_selected_while_editing() {
    let mut custom = sample_stack("custom", "Custom", "Text.");
    custom["items"][1]["slot"] = json!("future-slot");
    let (server, browser) = start(std::slice::from_ref(&custom), "custom").await;
    browser.click(".item-row[data-index='1']").await;
    let select = "select[name=item-slot]";
    assert_eq!(browser.value(select).await, "future-slot");
    browser.fill("input[name=item-name]", "Later").await;
    browser
        .wait_eq(".item-row[data-index='1'] .item-name", "Later")
        .await;
    assert_eq!(browser.value(select).await, "future-slot");
    assert_eq!(
        texts(&browser, "select[name=item-slot] option:checked").await,
        ["future-slot"]
    );
    browser.click("button.save").await;
    browser.wait_status("Saved custom").await;
    custom["items"][1]["name"] = json!("Later");
    assert_eq!(server.read_json(&stack_path("custom")), custom);
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Text edited in the JSON tab and not applied survives tab switches, is marked on the tab,
/// counts as unsaved work when opening another Preset, and Reset brings back the draft.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unapplied_json_text_survives_tab_switches_and_is_guarded() {
    let alpha = sample_stack("alpha", "Alpha", "Alpha text.");
    let beta = sample_stack("beta", "Beta", "Beta text.");
    let (_server, browser) = start(&[alpha.clone(), beta], "alpha").await;
    browser.tab("JSON").await;
    let draft_text = browser.value("textarea[name=stack-json]").await;
    assert_eq!(draft_text, pretty(&alpha).trim_end());
    let edited = draft_text.replace("Alpha text.", "Edited in JSON.");
    browser.fill("textarea[name=stack-json]", &edited).await;
    browser
        .wait_eq(".tab[data-tab='JSON'] .tab-mark", " •")
        .await;

    browser.tab("Items").await;
    browser.tab("JSON").await;
    assert_eq!(browser.value("textarea[name=stack-json]").await, edited);
    assert_eq!(
        browser.count(".badge.dirty").await,
        0,
        "the draft itself is unchanged"
    );

    // Opening another Preset asks first; Cancel keeps the text.
    browser
        .click(".stack-row[data-selector='project:beta']")
        .await;
    browser.wait_css(".modal").await;
    browser.click(".modal button.cancel").await;
    assert_eq!(browser.value("textarea[name=stack-json]").await, edited);

    browser.click("button.reset-json").await;
    assert_eq!(browser.value("textarea[name=stack-json]").await, draft_text);
    assert_eq!(browser.count(".tab[data-tab='JSON'] .tab-mark").await, 0);
    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// Issue 19: counted quantifiers in "Try it"
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_it_applies_counted_quantifiers() {
    let mut s = sample_stack("counted", "Counted", "aaa ab ab 1234 x");
    s["regex"] = json!({ "rules": [
        { "id": "twice", "pattern": "a{2,}", "replace": "[A]", "flags": "g", "stage": "compiled", "target": "system" },
        { "id": "digits", "pattern": "\\d{4}", "replace": "[D]", "flags": "g", "stage": "compiled", "target": "system" }
    ]});
    let (_server, browser) = start(std::slice::from_ref(&s), "counted").await;
    browser.tab("Regex").await;
    for (n, want) in [(0, "[A] ab ab 1234 x"), (1, "aaa ab ab [D] x")] {
        let card = format!("section.rule[data-rule='{n}']");
        browser.click(&format!("{card} details.try summary")).await;
        browser
            .fill(
                &format!("{card} textarea[name=rule-sample]"),
                "aaa ab ab 1234 x",
            )
            .await;
        browser
            .wait_eq(&format!("{card} .try-result pre"), want)
            .await;
        assert_eq!(
            browser
                .text(&format!("{card} .try-result .badge"))
                .await
                .as_deref(),
            Some("1 match")
        );
    }
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Issue 17, point 6: "Try it" runs the compiler's rule pipeline (here `trimStrings`, which the
/// browser's own engine ignored: it showed `**[OK]**`), and a pattern the compiler rejects shows
/// the compiler's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_it_gives_the_compilers_result_with_trim_strings() {
    let mut s = sample_stack("trims", "Trims", "Status: [OK]");
    s["regex"] = json!({ "rules": [
        { "id": "bold", "pattern": "\\[([^\\]]+)\\]", "replace": "**$&**", "flags": "g",
          "stage": "compiled", "trimStrings": ["[", "]"] }
    ]});
    let (_server, browser) = start(std::slice::from_ref(&s), "trims").await;
    browser.tab("Regex").await;
    let card = "section.rule[data-rule='0']";
    browser.click(&format!("{card} details.try summary")).await;
    browser
        .fill(
            &format!("{card} textarea[name=rule-sample]"),
            "Status: [OK] and [NO]",
        )
        .await;
    browser
        .wait_eq(
            &format!("{card} .try-result pre"),
            "Status: **OK** and **NO**",
        )
        .await;
    assert_eq!(
        browser
            .text(&format!("{card} .try-result .badge"))
            .await
            .as_deref(),
        Some("2 matches")
    );
    // The result follows edits of the rule.
    browser
        .fill(&format!("{card} input[name=rule-replace]"), "<$1>")
        .await;
    browser
        .wait_eq(&format!("{card} .try-result pre"), "Status: <OK> and <NO>")
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Issue 17, point 10: at 390 px the item editor sits under a long item list; tapping an item
/// scrolls its editor into view (it used to stay off-screen below the list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_phone_width_a_tapped_items_editor_scrolls_into_view() {
    let mut long = sample_stack("long", "Long", "First.");
    let items = long["items"].as_array_mut().unwrap();
    for k in 0..16 {
        items.push(json!({ "kind": "block", "id": format!("b{k}"), "role": "user", "content": format!("Block {k}.") }));
    }
    let (_server, browser) = start(&[long], "long").await;
    browser.viewport(390, 844).await;
    // (A pixel of tolerance: scrolled to the top of a box at a fractional position, its top may
    // be a fraction above 0.)
    let on_screen = "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return r.top >= -1 && r.top < window.innerHeight - 80;";
    browser.click(".item-row[data-index='2']").await;
    browser
        .wait_js(
            "the tapped item's editor",
            "return document.querySelector('textarea[name=item-content]').value;",
            json!("Block 0."),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(2);
    while browser.js(on_screen, vec![json!(".item-editor")]).await != json!(true) {
        if Instant::now() > deadline {
            let [_, y, _, h] = browser.rect(".item-editor").await;
            panic!("the item editor stays off-screen at 390 px: top {y}, height {h}, viewport 844");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        browser
            .js(on_screen, vec![json!("textarea[name=item-content]")])
            .await,
        json!(true),
        "the content field is on screen"
    );
    browser.assert_no_errors().await;
    browser.close().await;
}
