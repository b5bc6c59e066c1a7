//! The template editor of a block (issue 17, "A real template editor"): highlighting with line
//! numbers that lines up with the textarea, the tags that belong together marked at the caret,
//! errors underlined where they are and listed with line and column, completion of runtime
//! fields, parameters, filters and statements by keyboard, and the value of a path under the
//! pointer and at the caret.

mod support;

use fantoccini::key::Key;
use serde_json::{json, Value};
use support::{pretty, Browser, Server};

const STACKS: &str = "project/.pi/forge/prompt-stacks";
const AREA: &str = "textarea[name=item-content]";

fn stack(content: &str) -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "tpl",
        "parameters": { "strict": true, "tone": "dry" },
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": content },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    }))
}

async fn open(content: &str) -> (Server, Browser) {
    let server = Server::start_with(&[(&format!("{STACKS}/tpl.json"), &stack(content))], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded tpl").await;
    browser.click(".item-row[data-index='0']").await;
    browser.wait_css(".tpl-body[data-env='ready']").await;
    (server, browser)
}

/// `[class, text]` of every highlighted piece of line `n` (1-based).
async fn pieces(browser: &Browser, n: usize) -> Value {
    browser
        .js(
            "const line = document.querySelectorAll('.tpl-hl .tl')[arguments[0] - 1]; \
             return [...line.childNodes].map(c => [c.nodeType === 3 ? '' : c.className, c.textContent]);",
            vec![json!(n)],
        )
        .await
}

/// Puts the caret at UTF-16 offset `at` the way a click does.
async fn caret_at(browser: &Browser, at: usize) {
    browser
        .js(
            "const t = document.querySelector(arguments[0]); t.focus(); t.setSelectionRange(arguments[1], arguments[1]); \
             t.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true})); return true;",
            vec![json!(AREA), json!(at)],
        )
        .await;
}

/// The underlined text of the layer, joined.
async fn underlined(browser: &Browser) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll('.tpl-hl .err')].map(s => s.textContent).join('');",
            vec![],
        )
        .await
}

/// Waits until the error list under the editor reads `want`.
async fn wait_errors(browser: &Browser, want: Value) {
    browser
        .wait_js(
            "the error list",
            "return [...document.querySelectorAll('.tpl-errors li')].map(l => l.textContent);",
            want,
        )
        .await;
}

async fn options(browser: &Browser) -> Value {
    browser
        .js(
            "const l = document.querySelector('.tpl-complete'); if (!l || l.hidden) return null; \
             return [...l.querySelectorAll('[role=option]')].map(o => [o.querySelector('.tpl-opt-label').textContent, o.getAttribute('aria-selected')]);",
            vec![],
        )
        .await
}

async fn wait_options(browser: &Browser, want: Value) {
    browser
        .wait_js(
            "the completion list",
            "const l = document.querySelector('.tpl-complete'); if (!l || l.hidden) return null; \
             return [...l.querySelectorAll('[role=option] .tpl-opt-label')].map(o => o.textContent);",
            want,
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn highlights_tags_paths_and_filters_with_line_numbers_that_line_up() {
    let content = "Hi {{ runtime.cwd | upper }} & <you>\n{% if parameters.strict %}Be strict.{% else %}Relax.{% endif %}\n";
    let (_server, browser) = open(content).await;
    assert_eq!(browser.count(".tpl-hl .tl").await, 3);
    assert_eq!(
        pieces(&browser, 1).await,
        json!([
            ["", "Hi "],
            ["tk-delim", "{{"],
            ["", " "],
            ["tk-root", "runtime"],
            ["tk-punct", "."],
            ["tk-path", "cwd"],
            ["", " "],
            ["tk-punct", "|"],
            ["", " "],
            ["tk-filter", "upper"],
            ["", " "],
            ["tk-delim", "}}"],
            ["", " & <you>"]
        ])
    );
    let second = pieces(&browser, 2).await;
    assert_eq!(
        json!(second.as_array().unwrap()[..4].to_vec()),
        json!([["tk-delim", "{%"], ["", " "], ["tk-kw", "if"], ["", " "]])
    );
    // The layer holds exactly the textarea's text, numbered per line, and lays it out the same
    // (also a line long enough to wrap).
    let long = format!("{content}{}", "wrap me ".repeat(60));
    browser.fill(AREA, &long).await;
    browser.wait_count(".tpl-hl .tl", 3).await;
    let geometry = browser
        .js(
            "const t = document.querySelector(arguments[0]); const l = document.querySelector('.tpl-hl'); \
             const lines = [...l.querySelectorAll('.tl')]; \
             return [lines.map(d => d.textContent).join('\\n') === t.value, t.scrollHeight, l.scrollHeight, t.clientWidth, l.clientWidth, \
                     getComputedStyle(lines[2], '::before').content, lines[2].getBoundingClientRect().height > 40];",
            vec![json!(AREA)],
        )
        .await;
    assert_eq!(geometry[0], json!(true), "{geometry}");
    assert_eq!(geometry[1], geometry[2], "scroll heights: {geometry}");
    assert_eq!(geometry[3], geometry[4], "content widths: {geometry}");
    assert_eq!(geometry[5], json!("counter(tl)"));
    assert_eq!(geometry[6], json!(true), "the long line wraps");

    // The caret in `else` marks the whole conditional; in `{{ … }}` its two delimiters.
    let at_else = content.find("else").unwrap();
    caret_at(&browser, at_else + 1).await;
    browser
        .wait_js(
            "the tags matching the caret",
            "return [...document.querySelectorAll('.tpl-hl .match')].map(s => s.textContent).join('');",
            json!("{% if parameters.strict %}{% else %}{% endif %}"),
        )
        .await;
    caret_at(&browser, content.find("cwd").unwrap()).await;
    browser
        .wait_js(
            "the delimiters matching the caret",
            "return [...document.querySelectorAll('.tpl-hl .match')].map(s => s.textContent);",
            json!(["{{", "}}"]),
        )
        .await;
    // And the caret's path and its value, for the keyboard (and the screen reader's live region).
    browser
        .wait_js(
            "the caret's place and path",
            "return document.querySelector('.tpl-status').textContent.startsWith('Line 1, column 15 · runtime.cwd = /');",
            json!(true),
        )
        .await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_underlined_where_they_are_and_listed_with_line_and_column() {
    let (_server, browser) = open("Review.\n").await;
    browser
        .fill(
            AREA,
            "Review.\n{% if parameters.strict %}Be strict.\nMore {{ x | shout }}",
        )
        .await;
    wait_errors(
        &browser,
        json!(["Line 2, column 1: forge-v1 parse error: Missing {% endif %}"]),
    )
    .await;
    // Underlined: the `{% if %}` tag only, not the lines after it.
    assert_eq!(
        underlined(&browser).await,
        json!("{% if parameters.strict %}")
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector(arguments[0]).getAttribute('aria-invalid');",
                vec![json!(AREA)]
            )
            .await,
        json!("true")
    );
    // Closing the `if` leaves the unknown filter, underlined on its tag.
    browser
        .fill(
            AREA,
            "Review.\n{% if parameters.strict %}Be strict.{% endif %}\nMore {{ x | shout }}",
        )
        .await;
    wait_errors(
        &browser,
        json!(["Line 3, column 6: Unknown forge-v1 filter: shout"]),
    )
    .await;
    assert_eq!(underlined(&browser).await, json!("{{ x | shout }}"));
    assert_eq!(
        pieces(&browser, 3).await[7],
        json!(["tk-badfilter err", "shout"])
    );
    // The place is a link: it selects the tag.
    browser.click(".tpl-errors .tpl-goto").await;
    let selection = browser
        .js(
            "const t = document.activeElement; return [t.name, t.value.slice(t.selectionStart, t.selectionEnd)];",
            vec![],
        )
        .await;
    assert_eq!(selection, json!(["item-content", "{{ x | shout }}"]));
    // Fixed: no list, not invalid.
    browser
        .fill(
            AREA,
            "Review.\n{% if parameters.strict %}Be strict.{% endif %}\n",
        )
        .await;
    browser.wait_count(".tpl-errors li", 0).await;
    assert_eq!(browser.count(".tpl-hl .err").await, 0);
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_by_keyboard_offers_runtime_fields_parameters_filters_and_statements() {
    let (_server, browser) = open("").await;
    caret_at(&browser, 0).await;
    browser.press("{{ runtime.").await;
    wait_options(
        &browser,
        json!([
            "cwd",
            "date",
            "time",
            "lastUserMessage",
            "selectedTools",
            "selectedToolsText",
            "activeModel",
            "populatedAt",
            "timezone",
            "tool",
            "slot"
        ]),
    )
    .await;
    // The first is chosen and is the textarea's active descendant.
    let state = browser
        .js(
            "const t = document.querySelector(arguments[0]); const id = t.getAttribute('aria-activedescendant'); \
             return [id === document.querySelector('.tpl-complete [aria-selected=true]').id, t.getAttribute('aria-controls') === document.querySelector('.tpl-complete').id];",
            vec![json!(AREA)],
        )
        .await;
    assert_eq!(state, json!([true, true]));
    // Typing narrows, ↓ moves, Enter accepts.
    browser.press("t").await;
    wait_options(&browser, json!(["time", "timezone", "tool"])).await;
    browser.press(&Key::Down).await;
    assert_eq!(
        options(&browser).await,
        json!([["time", "false"], ["timezone", "true"], ["tool", "false"]])
    );
    browser.press(&Key::Enter).await;
    assert_eq!(browser.value(AREA).await, "{{ runtime.timezone");
    assert_eq!(options(&browser).await, Value::Null);
    // Filters after `|`, accepted with Tab.
    browser.press(" | u").await;
    wait_options(&browser, json!(["upper"])).await;
    browser.press(&Key::Tab).await;
    assert_eq!(browser.value(AREA).await, "{{ runtime.timezone | upper");
    browser.press(" }}\n{% ").await;
    wait_options(&browser, json!(["if", "else", "endif"])).await;
    browser.press(&Key::Enter).await;
    // `if ` is followed by the paths: the Preset's parameters among them.
    browser.press("parameters.").await;
    wait_options(&browser, json!(["strict", "tone"])).await;
    // Escape closes the list and nothing else.
    browser.press(&Key::Escape).await;
    assert_eq!(options(&browser).await, Value::Null);
    assert_eq!(
        browser.value(AREA).await,
        "{{ runtime.timezone | upper }}\n{% if parameters."
    );
    // Ctrl+Space opens it where typing did not, right under the caret's line.
    browser.press(&(Key::Control + " ")).await;
    wait_options(&browser, json!(["strict", "tone"])).await;
    let placed = browser
        .js(
            "const line = document.querySelectorAll('.tpl-hl .tl')[1].getBoundingClientRect();              const list = document.querySelector('.tpl-complete').getBoundingClientRect();              return [list.top >= line.bottom - 1 && list.top <= line.bottom + 6, list.left > line.left + 100 && list.left < line.right];",
            vec![],
        )
        .await;
    assert_eq!(placed, json!([true, true]), "the list sits under the caret");
    // The list is accessible while open.
    assert_eq!(browser.axe().await, Vec::<String>::new());
    browser.screenshot("template-editor-completion").await;
    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hovering_a_path_shows_its_value_in_the_preview_environment() {
    let content = "Tone {{ tone }}, tools {{ runtime.selectedToolsText }}, {{ parameters.nope }}.";
    let (_server, browser) = open(content).await;
    let hover = |text: &'static str| {
        let browser = &browser;
        async move {
            browser
                .js(
                    "const span = [...document.querySelectorAll('.tpl-hl span')].find(s => s.textContent === arguments[0]); \
                     const r = span.getBoundingClientRect(); \
                     document.querySelector(arguments[1]).dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + 2, clientY: r.top + r.height / 2})); \
                     return true;",
                    vec![json!(text), json!(AREA)],
                )
                .await;
        }
    };
    hover("tone").await;
    browser.wait_eq(".tpl-hover", "tone = dry").await;
    hover("nope").await;
    browser
        .wait_eq(
            ".tpl-hover",
            "parameters.nope is undefined here: it renders as nothing",
        )
        .await;
    hover("selectedToolsText").await;
    browser
        .wait_js(
            "the hover of runtime.selectedToolsText",
            "const h = document.querySelector('.tpl-hover'); return h && h.textContent.startsWith('runtime.selectedToolsText = read, ');",
            json!(true),
        )
        .await;
    browser.screenshot("template-editor-hover").await;
    // At phone width the editor fits the screen, the layer still lines up with the textarea.
    browser.viewport(390, 844).await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    let widths = browser
        .js(
            "const t = document.querySelector(arguments[0]); const l = document.querySelector('.tpl-hl'); \
             return [t.clientWidth === l.clientWidth, t.scrollHeight === l.scrollHeight, t.getBoundingClientRect().right <= window.innerWidth];",
            vec![json!(AREA)],
        )
        .await;
    assert_eq!(widths, json!([true, true, true]));
    browser
        .js(
            "document.querySelector('.tpl').scrollIntoView({block: 'center'}); return true;",
            vec![],
        )
        .await;
    // A tooltip near the right edge grows to the left, inside the screen, not squeezed.
    hover("selectedToolsText").await;
    browser.wait_css(".tpl-hover").await;
    let tip = browser
        .js(
            "const r = document.querySelector('.tpl-hover').getBoundingClientRect(); return [r.left >= 0, r.right <= window.innerWidth, r.width >= 150];",
            vec![],
        )
        .await;
    assert_eq!(tip, json!([true, true, true]), "the tooltip fits at 390 px");
    browser.screenshot("template-editor-390").await;
    browser.assert_no_errors().await;
    browser.close().await;
}

/// Issue 41, point 8: at 390 px a completion opened near the right edge stays on screen: the
/// list moves left as far as its minimum width needs and is never wider than the room left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_completion_list_stays_on_screen_at_390_px() {
    let (_server, browser) = open("").await;
    browser.viewport(390, 844).await;
    // The caret's x after the text, and the window's width.
    let caret_x = "const t = document.querySelectorAll('.tpl-hl .tl')[0]; const r = document.createRange(); \
                   r.selectNodeContents(t); const b = r.getBoundingClientRect(); return [b.right, window.innerWidth];";
    let mut text = String::new();
    for n in 1..80 {
        text = format!("{} {{{{ runtime.", "m".repeat(n));
        browser.fill(AREA, &text).await;
        let at = browser.js(caret_x, vec![]).await;
        let (right, width) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
        if right > width - 120.0 && right < width - 10.0 {
            break;
        }
    }
    caret_at(&browser, text.encode_utf16().count()).await;
    browser.press(&(Key::Control + " ")).await;
    browser
        .wait_js(
            "the completion list",
            "return !!document.querySelector('.tpl-complete:not([hidden])');",
            json!(true),
        )
        .await;
    let fits = browser
        .js(
            "const l = document.querySelector('.tpl-complete'); if (!l || l.hidden) return null; \
             const b = l.getBoundingClientRect(); const e = document.querySelector('.tpl-body').getBoundingClientRect(); \
             return [b.right <= window.innerWidth, b.right <= e.right + 1, b.width >= 200];",
            vec![],
        )
        .await;
    assert_eq!(fits, json!([true, true, true]), "{text}");
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
}
