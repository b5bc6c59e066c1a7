//! Find things and move fast: the command palette (Ctrl+K) opens a Preset by a fuzzy part of
//! its name, switches surface, jumps to an item of the open Preset and runs Validate; `?` (not
//! while typing) shows the keyboard shortcuts. Escape closes both and gives the focus back.

mod support;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use serde_json::{json, Value};
use support::{pretty, sample_stack, Browser, Server};

/// A Preset with 30 blocks and the chat history; the 28th block (index 27) is "Release
/// checklist".
fn long_stack() -> Value {
    let mut items: Vec<Value> = (0..30)
        .map(|i| {
            json!({ "kind": "block", "id": format!("b{i:02}"), "name": format!("Block {i:02}"),
                    "role": "system", "content": format!("Text {i}.") })
        })
        .collect();
    items[27]["name"] = json!("Release checklist");
    items.push(json!({ "kind": "slot", "id": "history", "slot": "chat-history" }));
    json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": "notes",
        "name": "Release Notes Writer",
        "items": items
    })
}

fn server() -> Server {
    Server::start_with(
        &[
            (
                "project/.pi/forge/prompt-stacks/alpha.json",
                &pretty(&sample_stack("alpha", "Alpha", "Fine.")),
            ),
            (
                "project/.pi/forge/prompt-stacks/notes.json",
                &pretty(&long_stack()),
            ),
        ],
        &[],
    )
}

/// Ctrl+K as real key events on whatever has focus.
async fn ctrl_k(browser: &Browser) {
    let actions = KeyActions::new("keyboard".to_string())
        .then(KeyAction::Down {
            value: Key::Control.into(),
        })
        .then(KeyAction::Down { value: 'k' })
        .then(KeyAction::Up { value: 'k' })
        .then(KeyAction::Up {
            value: Key::Control.into(),
        });
    browser.client.perform_actions(actions).await.unwrap();
    browser.wait_css(".palette .palette-input").await;
    browser
        .wait_js(
            "the palette's input has the focus",
            "return document.activeElement && document.activeElement.classList.contains('palette-input');",
            json!(true),
        )
        .await;
}

/// The texts of the palette's options, in order.
async fn options(browser: &Browser) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('.palette-list [role=option] .palette-text')].map(e => e.textContent);",
            vec![],
        )
        .await;
    serde_json::from_value(v).unwrap()
}

/// The id the combobox points at and the id of the option marked selected.
async fn active(browser: &Browser) -> Value {
    browser
        .js(
            "const i = document.querySelector('.palette-input'); const s = document.querySelector('.palette-list [aria-selected=true]'); return [i.getAttribute('aria-activedescendant'), s ? s.id : null];",
            vec![],
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_palette_opens_a_preset_switches_surface_jumps_to_an_item_and_validates() {
    let server = server();
    let browser = Browser::start().await;
    browser.viewport(1280, 900).await;
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;

    // Ctrl+K works from a text field too; the dialog is a combobox over a listbox.
    browser.click(".sidebar input.search").await;
    ctrl_k(&browser).await;
    assert_eq!(
        browser
            .js(
                "const d = document.querySelector('.palette'); const i = d.querySelector('.palette-input'); return [d.getAttribute('role'), d.getAttribute('aria-modal'), i.getAttribute('role'), i.getAttribute('aria-controls'), document.getElementById(i.getAttribute('aria-controls')).getAttribute('role')];",
                vec![]
            )
            .await,
        json!(["dialog", "true", "combobox", "palette-list", "listbox"])
    );
    // Escape closes it and the filter field has the focus again.
    browser.press(&Key::Escape.to_string()).await;
    browser.wait_count(".palette", 0).await;
    browser
        .wait_js(
            "focus back on the filter",
            "return document.activeElement.className;",
            json!("search"),
        )
        .await;

    // A fuzzy part of a name, Enter: that Preset opens.
    ctrl_k(&browser).await;
    browser.press("relnot").await;
    browser
        .wait_js(
            "the best match first",
            "const o = document.querySelector('.palette-list [role=option] .palette-text'); return o ? o.textContent : null;",
            json!("Release Notes Writer"),
        )
        .await;
    browser.screenshot("palette").await;
    assert_eq!(
        active(&browser).await,
        json!(["palette-opt-0", "palette-opt-0"])
    );
    browser.press(&Key::Enter.to_string()).await;
    browser.wait_count(".palette", 0).await;
    browser.wait_status("Loaded notes").await;
    browser
        .wait_eq(".stack-title", "Release Notes Writer")
        .await;

    // ↓ and ↑ move the active option (aria-activedescendant follows).
    ctrl_k(&browser).await;
    browser.press("go to").await;
    browser
        .wait_js(
            "surfaces listed",
            "return document.querySelectorAll('.palette-list [role=option]').length;",
            json!(6),
        )
        .await;
    assert_eq!(
        options(&browser).await,
        [
            "Go to Presets",
            "Go to Profiles",
            "Go to Capabilities",
            "Go to Payloads",
            "Go to Session",
            "Go to Delegation"
        ]
    );
    browser.press(&Key::Down.to_string()).await;
    assert_eq!(
        active(&browser).await,
        json!(["palette-opt-1", "palette-opt-1"])
    );
    browser.press(&Key::Up.to_string()).await;
    browser.press(&Key::Up.to_string()).await;
    assert_eq!(
        active(&browser).await,
        json!(["palette-opt-5", "palette-opt-5"]),
        "↑ on the first option wraps"
    );
    browser.press(&Key::Escape.to_string()).await;
    browser.wait_count(".palette", 0).await;

    // "Go to Profiles" switches surface.
    ctrl_k(&browser).await;
    browser.press("profiles").await;
    browser
        .wait_js(
            "Go to Profiles first",
            "const o = document.querySelector('.palette-list [role=option] .palette-text'); return o ? o.textContent : null;",
            json!("Go to Profiles"),
        )
        .await;
    browser.press(&Key::Enter.to_string()).await;
    browser.wait_css(".profiles:not(.capabilities)").await;
    assert_eq!(browser.count(".presets").await, 0);

    // An item of the open Preset: back on Presets, the item is selected, focused and on screen.
    ctrl_k(&browser).await;
    browser.press("checklist").await;
    browser
        .wait_js(
            "the item first",
            "const o = document.querySelector('.palette-list [role=option]'); return o ? [o.dataset.group, o.querySelector('.palette-text').textContent] : null;",
            json!(["Item", "Release checklist"]),
        )
        .await;
    browser.press(&Key::Enter.to_string()).await;
    browser
        .wait_css(".item-row[data-index='27'][aria-current='true']")
        .await;
    browser
        .wait_js(
            "the item has the focus",
            "const e = document.activeElement; return e ? e.dataset.index ?? null : null;",
            json!("27"),
        )
        .await;
    assert!(browser.in_viewport(".item-row[data-index='27']").await);
    assert_eq!(browser.count(".item-row[aria-current='true']").await, 1);

    // Validate runs the same validation as the button and says so in the status line.
    ctrl_k(&browser).await;
    browser.press("validate").await;
    browser
        .wait_js(
            "Validate first",
            "const o = document.querySelector('.palette-list [role=option] .palette-text'); return o ? o.textContent : null;",
            json!("Validate"),
        )
        .await;
    browser.press(&Key::Enter.to_string()).await;
    browser.wait_count(".palette", 0).await;
    browser
        .wait_status("Validation complete: 0 errors, 0 warnings")
        .await;
    // The focus went back to the item.
    browser
        .wait_js(
            "focus back on the item",
            "const e = document.activeElement; return e ? e.dataset.index ?? null : null;",
            json!("27"),
        )
        .await;

    // Nothing matches: the list says so, Enter does nothing.
    ctrl_k(&browser).await;
    browser.press("zzqqxx").await;
    browser
        .wait_eq(".palette-list .palette-empty", "No command matches.")
        .await;
    browser.press(&Key::Enter.to_string()).await;
    assert_eq!(browser.count(".palette").await, 1);
    // A click on the backdrop closes it.
    browser
        .js(
            "document.querySelector('.palette-backdrop').dispatchEvent(new MouseEvent('click', {bubbles: true})); return true;",
            vec![],
        )
        .await;
    browser.wait_count(".palette", 0).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_mark_lists_the_shortcuts_except_in_a_text_field_and_both_fit_a_phone() {
    let server = server();
    let browser = Browser::start().await;
    browser.viewport(1280, 900).await;
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;

    // `?` on an item row (not a text field) opens the overlay.
    browser.click(".item-row[data-index='0']").await;
    browser
        .wait_js(
            "item focused",
            "return document.activeElement.dataset.index ?? null;",
            json!("0"),
        )
        .await;
    browser.press("?").await;
    browser.wait_css(".shortcuts").await;
    assert_eq!(
        browser
            .js(
                "const d = document.querySelector('.shortcuts'); return [d.getAttribute('role'), d.getAttribute('aria-modal'), document.getElementById(d.getAttribute('aria-labelledby')).textContent];",
                vec![]
            )
            .await,
        json!(["dialog", "true", "Keyboard shortcuts"])
    );
    let keys = browser
        .js(
            "return [...document.querySelectorAll('.shortcuts kbd')].map(e => e.textContent);",
            vec![],
        )
        .await;
    let keys: Vec<String> = serde_json::from_value(keys).unwrap();
    for want in ["Ctrl+K", "?", "Ctrl+S", "Ctrl+Z", "Escape"] {
        assert!(
            keys.iter().any(|k| k.contains(want)),
            "{want} is not listed in {keys:?}"
        );
    }
    // Escape closes it and the item row has the focus again.
    browser.press(&Key::Escape.to_string()).await;
    browser.wait_count(".shortcuts", 0).await;
    browser
        .wait_js(
            "focus back on the item",
            "const e = document.activeElement; return e ? e.dataset.index ?? null : null;",
            json!("0"),
        )
        .await;

    // In a textarea `?` is just a character.
    browser.wait_css("textarea[name=item-content]").await;
    browser
        .js(
            "const t = document.querySelector('textarea[name=item-content]'); t.focus(); t.setSelectionRange(t.value.length, t.value.length); return true;",
            vec![],
        )
        .await;
    browser.press("?").await;
    browser
        .wait_js(
            "the ? typed",
            "return document.querySelector('textarea[name=item-content]').value;",
            json!("Fine.?"),
        )
        .await;
    assert_eq!(browser.count(".shortcuts").await, 0);
    // So is it in the filter field.
    browser.click(".sidebar input.search").await;
    browser.press("?").await;
    assert_eq!(browser.value(".sidebar input.search").await, "?");
    assert_eq!(browser.count(".shortcuts").await, 0);
    browser.fill(".sidebar input.search", "").await;

    // The top bar's button opens it too; from there the palette is one click away.
    browser.click(".topbar .shortcuts-button").await;
    browser.wait_css(".shortcuts").await;
    browser.click(".shortcuts .open-palette").await;
    browser.wait_css(".palette .palette-input").await;
    assert_eq!(browser.count(".shortcuts").await, 0);
    browser.press(&Key::Escape.to_string()).await;
    browser.wait_count(".palette", 0).await;
    browser
        .wait_js(
            "focus back on the button",
            "return document.activeElement.className;",
            json!("shortcuts-button icon"),
        )
        .await;

    // 390 px: the bar stays one row, and the palette and the overlay fit the width.
    browser.viewport(390, 844).await;
    let [_, _, _, bar_h] = browser.rect(".topbar").await;
    assert!(bar_h <= 44.0, ".topbar is {bar_h}px high");
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    assert!(browser.in_viewport(".topbar .shortcuts-button").await);
    browser.click(".topbar .shortcuts-button").await;
    browser.wait_css(".shortcuts").await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    assert!(browser.in_viewport(".shortcuts .shortcuts-close").await);
    browser.screenshot("shortcuts-390").await;
    browser.click(".shortcuts .open-palette").await;
    browser.wait_css(".palette .palette-input").await;
    browser.press("rel").await;
    browser
        .wait_css(".palette-list [role=option][aria-selected=true]")
        .await;
    assert_eq!(browser.horizontal_overflow().await, Vec::<String>::new());
    assert!(browser.in_viewport(".palette .palette-input").await);
    browser.screenshot("palette-390").await;
    browser.press(&Key::Escape.to_string()).await;
    browser.wait_count(".palette", 0).await;

    browser.assert_no_errors().await;
    browser.close().await;
}
