//! The first screen the server draws into the page (server/src/http/first_screen.rs): the rows
//! are on screen before the wasm has loaded, and when the app takes over, its top bar and list
//! have the same markup in the same places, so nothing moves.

mod support;

use serde_json::{json, Value};
use support::{pretty, sample_stack, Browser, Server, NO_LIVE_SESSION};

const STACKS: &str = "project/.pi/forge/prompt-stacks";

/// `shape(node)`: a DOM subtree as comparable data: `[tag, [[attribute, value]…], children]`,
/// attributes sorted, class names sorted, children without comments or empty text and with
/// adjacent text joined. What the app changes after it opened the first Preset (the row's
/// `selected` class and `aria-current`) is left out.
const SHAPE: &str = r#"
const shape = (n) => {
  const attrs = [...n.attributes]
    .filter((a) => a.name !== 'aria-current')
    .map((a) => [a.name, a.name === 'class'
      ? a.value.split(/\s+/).filter((c) => c && c !== 'selected').sort().join(' ')
      : a.value])
    .sort((a, b) => (a[0] < b[0] ? -1 : 1));
  const kids = [];
  for (const c of n.childNodes) {
    if (c.nodeType === 1) kids.push(shape(c));
    else if (c.nodeType === 3 && c.textContent !== '') {
      if (typeof kids[kids.length - 1] === 'string') kids[kids.length - 1] += c.textContent;
      else kids.push(c.textContent);
    }
  }
  return [n.tagName.toLowerCase(), attrs, kids];
};
"#;

/// The parts of the first screen and of the app that must be the same, as shapes (see
/// [`SHAPE`]): the sidebar, and the top bar's fixed parts (the status line and the session badge
/// change as the app works).
const PARTS: &str = r#"
const parts = (root) => Object.fromEntries(
  ['.topbar .brand', '.topbar .surface-menu', '.topbar nav.surfaces', '#live-indicator',
   '.topbar .shortcuts-button', '.topbar .theme-toggle', '.sidebar']
    .map((css) => { const e = root.querySelector(css); return [css, e ? shape(e) : null]; }));
"#;

/// Where the rows and the top bar are, rounded to 0.1 px, measured without scrollbars around the
/// sidebar (at 390 px the opened Preset's editor makes its column scroll; the app's first frame,
/// like the server's, has no editor yet).
const GEOMETRY: &str = r#"
for (let e = document.querySelector('.sidebar'); e; e = e.parentElement) e.style.overflow = 'hidden';
const round = (v) => Math.round(v * 10) / 10;
const box = (e) => { const r = e.getBoundingClientRect(); return [round(r.x), round(r.y), round(r.width), round(r.height)]; };
return {
  topbar: box(document.querySelector('.topbar')),
  search: box(document.querySelector('.sidebar .search')),
  rows: [...document.querySelectorAll('.stack-row')].map(box),
};
"#;

/// The page as the server sends it (the session cookie is set by then).
async fn page_html(browser: &Browser) -> String {
    let v = browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1]; fetch('/').then((r) => r.text()).then(done);",
            vec![],
        )
        .await
        .expect("GET /");
    v.as_str().expect("text").to_string()
}

/// The served page's first screen next to the app's screen: its `aria-busy`, the page's theme,
/// row titles, badge texts, and both screens' [`PARTS`] and status line.
async fn compare(browser: &Browser, html: &str) -> Value {
    let script = format!(
        "{SHAPE}{PARTS}const doc = new DOMParser().parseFromString(arguments[0], 'text/html'); \
         const first = doc.getElementById('forge-first-screen'); \
         const app = document.querySelector('.app'); \
         return {{busy: first.getAttribute('aria-busy'), \
           theme: doc.documentElement.getAttribute('data-theme'), \
           titles: [...first.querySelectorAll('.row-title')].map((e) => e.textContent), \
           badges: [...first.querySelectorAll('.row-badges')].map((e) => e.textContent), \
           status: [first, app].map((e) => e.querySelector('.topbar .status').textContent), \
           first: parts(first), app: parts(app)}};"
    );
    browser.js(&script, vec![json!(html)]).await
}

/// Every part of [`PARTS`] is in the first screen and the same in the app.
fn same_parts(seen: &Value, when: &str) {
    let (first, app) = (&seen["first"], &seen["app"]);
    for (part, shape) in first.as_object().expect("parts") {
        assert_ne!(shape, &Value::Null, "the first screen has {part}");
        assert_eq!(shape, &app[part], "{part} differs {when}");
    }
}

/// Compares the server's first screen with the app's at one window width, in the light or (after
/// the theme was switched, which the app tells the server in a cookie) the dark theme.
async fn same_screen_at(width: u32, dark: bool) {
    let legacy = sample_stack("old", "Old", "Legacy text.");
    let files = [
        (
            format!("{STACKS}/alpha.json"),
            pretty(&sample_stack("alpha", "Alpha", "A.")),
        ),
        (
            format!("{STACKS}/beta.json"),
            pretty(&sample_stack("beta", "<b>Beta & \"co\"</b>", "B.")),
        ),
        (
            format!("{STACKS}/broken.json"),
            "{ \"id\": \"broken\", ".to_string(),
        ),
        (
            "project/.pi/prompt-stacks/old.json".to_string(),
            pretty(&legacy),
        ),
        (
            "global/prompt-stacks/gamma.json".to_string(),
            pretty(&sample_stack("gamma", "Gamma", "G.")),
        ),
    ];
    let server = Server::start_with(&files, &[]);
    let browser = Browser::start().await;
    browser.client.set_window_size(width, 900).await.unwrap();
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;
    if dark {
        browser.click("button.theme-toggle").await;
        browser.open(&server).await;
        browser.wait_status("Loaded alpha").await;
    }
    assert_eq!(
        browser.count("#forge-first-screen").await,
        0,
        "the app removed it"
    );

    let html = page_html(&browser).await;
    let seen = compare(&browser, &html).await;
    assert_eq!(seen["busy"], "true");
    assert_eq!(
        seen["theme"],
        if dark { json!("dark") } else { Value::Null }
    );
    assert_eq!(
        seen["titles"],
        json!(["Alpha", "<b>Beta & \"co\"</b>", "broken.json", "Old"])
    );
    assert_eq!(seen["badges"], json!(["1 ✕", "legacy"]));
    same_parts(&seen, &format!("at {width} px"));
    let first = &seen["first"];
    assert_eq!(
        first["#live-indicator"][1],
        json!([
            ["aria-label", "No live Pi session"],
            ["class", "live-indicator"],
            ["data-live", "false"],
            ["id", "live-indicator"],
            ["role", "status"],
            ["title", NO_LIVE_SESSION]
        ])
    );

    // Where things are: the app's screen, then the server's in the same window (the page
    // without its scripts, so the app does not start again).
    let app_geometry = browser.js(GEOMETRY, vec![]).await;
    let start = html
        .find("<script type=\"module\"")
        .expect("the boot script");
    let end = start + html[start..].find("</script>").expect("its end") + "</script>".len();
    let static_page = format!("{}{}", &html[..start], &html[end..]);
    assert!(!static_page.contains("<script type=\"module\""));
    browser
        .js(
            "document.open(); document.write(arguments[0]); document.close(); return true;",
            vec![json!(static_page)],
        )
        .await;
    browser.wait_css("#forge-first-screen .stack-row").await;
    // The stylesheet is in the page (a `<style>` element the Content-Security-Policy allows by
    // its hash): a blocked one would have no sheet, and both screens would be unstyled alike.
    let sheets = browser
        .js(
            "return [...document.styleSheets].map((s) => \
               [s.ownerNode.tagName, s.href, s.cssRules.length > 100]);",
            vec![],
        )
        .await;
    assert_eq!(sheets, json!([["STYLE", null, true]]));
    let first_geometry = browser.js(GEOMETRY, vec![]).await;
    assert_eq!(first_geometry["rows"].as_array().map(Vec::len), Some(4));
    assert_eq!(first_geometry, app_geometry, "at {width} px");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_screen_is_the_apps_at_1280_px() {
    same_screen_at(1280, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_screen_is_the_apps_at_390_px_in_the_dark_theme() {
    same_screen_at(390, true).await;
}

/// Without any Preset both screens say so, in the list and in the status line, and the project
/// is read-only when started `--untrusted` (the top bar's badge).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_untrusted_project_has_the_same_first_screen() {
    let server = Server::start(&["--untrusted"]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("No prompt stacks found.").await;
    let html = page_html(&browser).await;
    let seen = compare(&browser, &html).await;
    same_parts(&seen, "without Presets");
    assert_eq!(seen["titles"], json!([]));
    assert_eq!(
        seen["status"],
        json!(["No prompt stacks found.", "No prompt stacks found."])
    );
    let list = "return new DOMParser().parseFromString(arguments[0], 'text/html') \
        .querySelector('#forge-first-screen .stack-list').outerHTML;";
    assert_eq!(
        browser.js(list, vec![json!(html)]).await,
        "<ul class=\"stack-list\"><li class=\"empty\">No prompt stacks found.</li></ul>"
    );
    let read_only = "return [...new DOMParser().parseFromString(arguments[0], 'text/html') \
        .querySelectorAll('#forge-first-screen .topbar .badge.warn')].map((e) => e.textContent);";
    assert_eq!(
        browser.js(read_only, vec![json!(html)]).await,
        json!(["Read-only"])
    );
    assert_eq!(
        browser.text(".topbar .badge.warn").await.as_deref(),
        Some("Read-only")
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Opens the editor in a second window from the current page and, as soon as that window's
/// first screen (the server's) shows the row of `arguments[0]` and its boot script has run but
/// the app has not started yet, clicks the row. Reports whether it got there first, and what
/// the row and the page looked like right after the click.
const CLICK_BEFORE_THE_APP: &str = r#"
const [selector, done] = [arguments[0], arguments[arguments.length - 1]];
const w = window.open('/', 'early');
const started = performance.now();
const poll = () => {
  let row = null;
  try { row = w.document.querySelector(`#forge-first-screen .stack-row[data-selector="${selector}"]`); } catch (e) {}
  if (row && w.__forgeErrors && !w.__forgeModule) {
    row.click();
    done({ clicked: true, rowClass: row.className, current: row.getAttribute('aria-current'),
      remembered: w.__forgeFirstScreenOpen,
      selectedRows: w.document.querySelectorAll('#forge-first-screen .stack-row.selected').length });
  } else if (w.__forgeModule || performance.now() - started > 10000) {
    done({ clicked: false });
  } else {
    setTimeout(poll, 0);
  }
};
poll();
"#;

/// A click on a row of the page's own first screen, before the app has started, is not lost:
/// the row shows as opened at once, and the app opens that Preset instead of the first one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_clicked_before_the_app_starts_is_the_preset_it_opens() {
    let files: Vec<(String, String)> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|id| {
            let name = format!("{}{}", id[..1].to_uppercase(), &id[1..]);
            (
                format!("{STACKS}/{id}.json"),
                pretty(&sample_stack(id, &name, "Text.")),
            )
        })
        .collect();
    let server = Server::start_with(&files, &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;
    let opener = browser.client.window().await.expect("the first window");

    // The click has to land in the moment between the first screen's paint and the app's start;
    // when the app was quicker, the attempt is repeated in a fresh window.
    let mut seen = Value::Null;
    for _ in 0..5 {
        seen = browser
            .client
            .execute_async(CLICK_BEFORE_THE_APP, vec![json!("project:beta")])
            .await
            .expect("the second window opens");
        let windows = browser.client.windows().await.expect("windows");
        let early = windows
            .into_iter()
            .find(|w| w != &opener)
            .expect("the second window");
        browser
            .client
            .switch_to_window(early)
            .await
            .expect("switch");
        if seen["clicked"] == true {
            break;
        }
        browser.client.close_window().await.expect("close");
        browser
            .client
            .switch_to_window(opener.clone())
            .await
            .expect("back");
    }
    assert_eq!(
        seen,
        json!({"clicked": true, "rowClass": "stack-row selected", "current": "true",
               "remembered": "project:beta", "selectedRows": 1}),
        "the row shows as opened before the app starts (clicked: false means the app started \
         before the click in all 5 attempts)"
    );

    browser.wait_app().await;
    browser.wait_status("Loaded beta").await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.sidebar .stack-row[aria-current=true]')] \
                 .map((e) => e.dataset.selector);",
                vec![]
            )
            .await,
        json!(["project:beta"])
    );
    assert_eq!(
        browser
            .js("return window.__forgeFirstScreenOpen ?? null;", vec![])
            .await,
        Value::Null,
        "taken once"
    );
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Issue 41, point 11: until the user picks a theme the app follows the OS's
/// `prefers-color-scheme` (here Chromium told the OS prefers dark) and stores no choice; the
/// theme button's choice is stored and wins from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_theme_follows_the_os_until_the_user_picks_one() {
    let server = Server::start_with(
        &[(
            "project/.pi/forge/prompt-stacks/alpha.json",
            &pretty(&sample_stack("alpha", "Alpha", "Fine.")),
        )],
        &[],
    );
    let browser = Browser::start_with_args(&["--blink-settings=preferredColorScheme=0"]).await;
    browser.open(&server).await;
    browser.wait_app().await;
    let state = "return [matchMedia('(prefers-color-scheme: dark)').matches, document.documentElement.getAttribute('data-theme'), localStorage.getItem('pi-forge-theme')];";
    browser
        .wait_js(
            "the OS's dark theme, no stored choice",
            state,
            json!([true, "dark", null]),
        )
        .await;
    browser.click("button.theme-toggle").await;
    browser
        .wait_js(
            "the user's light choice, stored",
            state,
            json!([true, "light", "light"]),
        )
        .await;
    browser.open(&server).await;
    browser.wait_app().await;
    browser
        .wait_js(
            "the stored choice wins over the OS",
            state,
            json!([true, "light", "light"]),
        )
        .await;
}
