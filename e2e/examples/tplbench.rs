//! `cargo xtask bench` part: keystroke to highlight in the template editor on a 100 KB block.
//!
//! A release `pi-forge ui` serves a Preset whose one block is a 100 KB forge-v1 template (prose
//! lines with outputs, filters and conditionals, ~950 lines). In headless Chromium a character
//! is typed (`insertText`, as a key press inserts it) at 40 places spread over the text, and the
//! page measures with performance.now():
//!
//! - **highlight**: from the keystroke until the highlight layer holds the new text, with style
//!   and layout of the change done (a MutationObserver on the layer, then a forced layout);
//! - **frame**: from the keystroke until the next frame has been produced (everything the app
//!   does for the keystroke: the draft, diagnostics, undo history, the local-storage draft).
//!
//! Prints one JSON object with median, min and max of each.
#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;

const SAMPLES: usize = 40;

fn long_template(bytes: usize) -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < bytes {
        n += 1;
        let line = match n % 4 {
            0 => format!("{{% if runtime.tool.read %}}Rule {n}: read files before you edit them.{{% else %}}Rule {n}: ask for the file.{{% endif %}}\n"),
            1 => format!("Step {n}. Work in {{{{ runtime.cwd }}}} on {{{{ date }}}}; the user wrote {{{{ lastUserMessage | trim | xml }}}}.\n"),
            2 => format!("Line {n} of plain guidance: keep answers short, name the files you touched, never invent output.\n"),
            _ => format!("{{% if parameters.strict == \"yes\" %}}Be strict ({n}).{{% endif %}} Tools: {{{{ selectedTools }}}}\n"),
        };
        text.push_str(&line);
    }
    text
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bytes = std::env::var("TPLBENCH_BYTES")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(100 * 1024);
    let content = long_template(bytes);
    let stack = json!({
        "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "long",
        "parameters": {"strict": "yes"},
        "items": [
            {"kind": "block", "id": "rules", "role": "system", "content": content},
            {"kind": "slot", "id": "history", "slot": "chat-history"}
        ]
    });
    let server = support::Server::start_with(
        &[(
            "project/.pi/forge/prompt-stacks/long.json",
            &support::pretty(&stack),
        )],
        &[],
    );
    let browser = support::Browser::start().await;
    browser.open(&server).await;
    browser.wait_status("Loaded long").await;
    browser.click(".item-row[data-index='0']").await;
    browser.wait_css(".tpl-body[data-env='ready']").await;
    let lines = browser.count(".tpl-hl .tl").await;
    let length = content.encode_utf16().count();
    let (mut highlight, mut frame) = (Vec::new(), Vec::new());
    for i in 0..SAMPLES {
        // Spread over the text, never inside a tag's delimiters' pair of braces.
        let at = (length / SAMPLES) * i + 1;
        let script = "const [at, done] = [arguments[0], arguments[1]]; \
            const t = document.querySelector('textarea[name=item-content]'); const layer = document.querySelector('.tpl-hl'); \
            let highlighted = null; \
            const observer = new MutationObserver(() => { if (highlighted === null) { layer.getBoundingClientRect(); void layer.offsetHeight; highlighted = performance.now() - t0; } }); \
            observer.observe(layer, {childList: true, subtree: true, characterData: true}); \
            const t0 = performance.now(); \
            document.execCommand('insertText', false, 'x'); \
            requestAnimationFrame(() => setTimeout(() => { observer.disconnect(); done([highlighted, performance.now() - t0]); }, 0));";
        // The caret goes there first (the textarea and the layer scroll to it), then the
        // keystroke is timed, as when a person types at one place.
        browser
            .client
            .execute_async(
                "const [at, done] = arguments; const t = document.querySelector('textarea[name=item-content]'); t.focus(); t.setSelectionRange(at, at); \
                 t.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true})); requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 50)));",
                vec![json!(at)],
            )
            .await
            .expect("caret placed");
        let value = browser
            .client
            .execute_async(script, vec![json!(at)])
            .await
            .expect("timed keystroke");
        let h = value[0].as_f64().expect("the layer changed");
        let f = value[1].as_f64().expect("a frame time");
        highlight.push(h);
        frame.push(f);
        // Let the debounced work of the keystroke (preview environment, local-storage draft)
        // finish before the next one, as between a person's keystrokes.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
    let typed = browser.value("textarea[name=item-content]").await;
    assert_eq!(
        typed.encode_utf16().count(),
        length + SAMPLES,
        "every keystroke landed"
    );
    browser.assert_no_errors().await;
    browser.close().await;
    let report = json!({
        "templateBytes": content.len(),
        "lines": lines,
        "keystrokeToHighlight": support::ms_stats(highlight),
        "keystrokeToFrame": support::ms_stats(frame),
        "targetMs": 16,
    });
    println!("{report}");
}
