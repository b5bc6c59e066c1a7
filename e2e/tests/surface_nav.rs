//! Every surface is reachable at every width: on a desktop the six surface tabs sit in the top
//! bar; on a phone (390 px) they collapse into one button naming the current surface, which
//! opens a menu of all six (click or touch, ↑/↓/Home/End, Enter, Escape, a click outside). The
//! bar stays one row (≤ 44 px) and every control is on screen, not clipped by a scrolling row.

mod support;

use fantoccini::key::Key;
use serde_json::{json, Value};
use support::{pretty, sample_stack, Browser, Server};

/// The surfaces in the top bar's order, with an element only that surface renders.
const SURFACES: [(&str, &str); 6] = [
    ("Presets", ".presets"),
    ("Profiles", ".profiles:not(.capabilities)"),
    ("Capabilities", ".capabilities"),
    ("Payloads", ".payloads"),
    ("Session", "#session-panel"),
    ("Delegation", "main.delegation"),
];

/// For each label, why the first element matching `css` whose text starts with the label
/// cannot be seen and clicked where it is ("ok" when it can): zero size, outside the viewport,
/// hidden, clipped by an ancestor that does not show overflow (a sideways-scrolling row), or
/// covered by another element at its centre.
const REACHABLE: &str = r#"
const [css, labels] = arguments;
const vw = document.documentElement.clientWidth, vh = window.innerHeight;
const out = {};
for (const label of labels) {
  const el = [...document.querySelectorAll(css)].find(e => e.textContent.trim().startsWith(label));
  if (!el) { out[label] = 'missing'; continue; }
  const r = el.getBoundingClientRect();
  const s = getComputedStyle(el);
  let why = 'ok';
  if (r.width < 1 || r.height < 1) why = 'zero size';
  else if (s.visibility !== 'visible' || Number(s.opacity) === 0) why = 'invisible';
  else if (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5)
    why = 'outside the viewport: ' + [r.left, r.top, r.right, r.bottom].map(Math.round).join(',');
  else {
    for (let p = el.parentElement; p && p !== document.documentElement; p = p.parentElement) {
      const ps = getComputedStyle(p);
      if (ps.overflowX === 'visible' && ps.overflowY === 'visible') continue;
      const pr = p.getBoundingClientRect();
      if (r.left < pr.left - 0.5 || r.right > pr.right + 0.5 || r.top < pr.top - 0.5 || r.bottom > pr.bottom + 0.5) {
        why = 'clipped by ' + p.tagName.toLowerCase() + '.' + [...p.classList].join('.');
        break;
      }
    }
    if (why === 'ok') {
      const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      if (!hit || !(hit === el || el.contains(hit)))
        why = 'covered by ' + (hit ? hit.tagName.toLowerCase() + '.' + [...hit.classList].join('.') : 'nothing');
    }
  }
  out[label] = why;
}
return out;
"#;

fn all_ok() -> Value {
    let mut map = serde_json::Map::new();
    for (label, _) in SURFACES {
        map.insert(label.into(), json!("ok"));
    }
    Value::Object(map)
}

async fn reachable(browser: &Browser, css: &str) -> Value {
    let labels: Vec<&str> = SURFACES.iter().map(|(l, _)| *l).collect();
    browser.js(REACHABLE, vec![json!(css), json!(labels)]).await
}

async fn displayed(browser: &Browser, css: &str) -> bool {
    browser
        .js(
            "const e = document.querySelector(arguments[0]); return !!e && e.getClientRects().length > 0;",
            vec![json!(css)],
        )
        .await
        == json!(true)
}

async fn focused(browser: &Browser) -> Value {
    browser
        .js(
            "const e = document.activeElement; return e ? (e.getAttribute('role') === 'menuitem' ? 'item:' + e.dataset.surface : e.className) : null;",
            vec![],
        )
        .await
}

async fn wait_focus(browser: &Browser, want: &str) {
    browser
        .wait_js(
            "focus",
            "const e = document.activeElement; return e ? (e.getAttribute('role') === 'menuitem' ? 'item:' + e.dataset.surface : e.className) : null;",
            json!(want),
        )
        .await;
}

async fn toggle_label(browser: &Browser) -> String {
    browser
        .text(".surface-menu-toggle .surface-menu-current")
        .await
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_surface_is_reachable_on_a_phone_and_the_desktop_tabs_stay() {
    let server = Server::start_with(
        &[(
            "project/.pi/forge/prompt-stacks/alpha.json",
            &pretty(&sample_stack("alpha", "Alpha", "Fine.")),
        )],
        &[],
    );
    let browser = Browser::start().await;
    browser.viewport(1280, 900).await;
    browser.open(&server).await;
    browser.wait_status("Loaded alpha").await;

    // Desktop: the six tabs in one row, all visible; no menu button.
    assert_eq!(
        reachable(&browser, ".surfaces .surface-tab").await,
        all_ok()
    );
    assert!(!displayed(&browser, ".surface-menu-toggle").await);
    let tab_ys = browser
        .js(
            "return [...document.querySelectorAll('.surfaces .surface-tab')].map(e => Math.round(e.getBoundingClientRect().y));",
            vec![],
        )
        .await;
    let ys = tab_ys.as_array().unwrap();
    assert_eq!(ys.len(), 6);
    assert!(ys.iter().all(|y| *y == ys[0]), "one row: {tab_ys}");

    // Every width in between reaches every surface without scrolling a row sideways.
    for width in [1024, 901, 900, 801, 800, 768, 600, 480, 390] {
        browser.viewport(width, 844).await;
        let [_, _, _, bar_h] = browser.rect(".topbar").await;
        assert!(bar_h <= 44.0, "at {width}px the .topbar is {bar_h}px high");
        assert_eq!(
            browser.horizontal_overflow().await,
            Vec::<String>::new(),
            "at {width}px"
        );
        if displayed(&browser, ".surface-menu-toggle").await {
            assert!(
                !displayed(&browser, ".surfaces").await,
                "at {width}px the tabs and the menu button are both shown"
            );
            assert_eq!(
                reachable(&browser, ".surface-menu-toggle").await["Presets"],
                json!("ok"),
                "the menu button at {width}px"
            );
            browser.click(".surface-menu-toggle").await;
            browser.wait_css(".surface-menu-list").await;
            assert_eq!(
                reachable(&browser, ".surface-menu-list [role=menuitem]").await,
                all_ok(),
                "the menu entries at {width}px"
            );
            browser.click(".surface-menu-toggle").await;
            browser.wait_count(".surface-menu-list", 0).await;
        } else {
            assert_eq!(
                reachable(&browser, ".surfaces .surface-tab").await,
                all_ok(),
                "the tabs at {width}px"
            );
        }
    }

    // Phone: one button named after the current surface.
    browser.viewport(390, 844).await;
    assert!(displayed(&browser, ".surface-menu-toggle").await);
    assert!(!displayed(&browser, ".surfaces").await);
    assert_eq!(toggle_label(&browser).await, "Presets");
    assert_eq!(
        browser
            .js(
                "const b = document.querySelector('.surface-menu-toggle'); return [b.getAttribute('aria-haspopup'), b.getAttribute('aria-expanded')];",
                vec![]
            )
            .await,
        json!(["menu", "false"])
    );

    // Touch / click: open, pick each surface in turn, the surface shows and the button says so.
    for (label, container) in SURFACES.iter().skip(1).chain(SURFACES.iter().take(1)) {
        browser.click(".surface-menu-toggle").await;
        browser.wait_css(".surface-menu-list").await;
        assert_eq!(browser.count(".surface-menu-list [role=menuitem]").await, 6);
        browser
            .click(&format!(
                ".surface-menu-list [role=menuitem][data-surface='{label}']"
            ))
            .await;
        browser.wait_css(container).await;
        browser.wait_count(".surface-menu-list", 0).await;
        assert_eq!(toggle_label(&browser).await, *label);
        assert_eq!(
            browser.horizontal_overflow().await,
            Vec::<String>::new(),
            "{label} at 390px"
        );
    }
    browser.wait_css(".presets").await;

    // The current surface is marked in the menu.
    browser.click(".surface-menu-toggle").await;
    browser.wait_css(".surface-menu-list").await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.surface-menu-list [aria-current=page]')].map(e => e.dataset.surface);",
                vec![]
            )
            .await,
        json!(["Presets"])
    );
    // A click outside closes it.
    browser.click(".presets").await;
    browser.wait_count(".surface-menu-list", 0).await;

    // Keyboard: Enter opens with the current surface focused, ↓/↑/Home/End move, Escape closes
    // and gives the focus back to the button.
    browser
        .js(
            "document.querySelector('.surface-menu-toggle').focus(); return true;",
            vec![],
        )
        .await;
    browser.press(&Key::Enter.to_string()).await;
    browser.wait_css(".surface-menu-list").await;
    wait_focus(&browser, "item:Presets").await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.surface-menu-toggle').getAttribute('aria-expanded');",
                vec![]
            )
            .await,
        json!("true")
    );
    browser.press(&Key::Down.to_string()).await;
    assert_eq!(focused(&browser).await, json!("item:Profiles"));
    browser.press(&Key::End.to_string()).await;
    assert_eq!(focused(&browser).await, json!("item:Delegation"));
    browser.press(&Key::Down.to_string()).await;
    assert_eq!(focused(&browser).await, json!("item:Presets"), "↓ wraps");
    browser.press(&Key::Up.to_string()).await;
    assert_eq!(focused(&browser).await, json!("item:Delegation"), "↑ wraps");
    browser.press(&Key::Home.to_string()).await;
    assert_eq!(focused(&browser).await, json!("item:Presets"));
    browser.press(&Key::Escape.to_string()).await;
    browser.wait_count(".surface-menu-list", 0).await;
    wait_focus(&browser, "surface-menu-toggle").await;

    // Enter on an entry switches; the focus returns to the button, which names the new surface.
    browser.press(&Key::Enter.to_string()).await;
    wait_focus(&browser, "item:Presets").await;
    browser.press(&Key::Down.to_string()).await;
    browser.press(&Key::Down.to_string()).await;
    assert_eq!(focused(&browser).await, json!("item:Capabilities"));
    browser.press(&Key::Enter.to_string()).await;
    browser.wait_css(".capabilities").await;
    browser.wait_count(".surface-menu-list", 0).await;
    wait_focus(&browser, "surface-menu-toggle").await;
    assert_eq!(toggle_label(&browser).await, "Capabilities");

    // Back on a desktop the tabs are as before and the current one is marked.
    browser.viewport(1280, 900).await;
    assert!(!displayed(&browser, ".surface-menu-toggle").await);
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.surfaces .surface-tab')].map(e => [e.textContent, e.getAttribute('aria-pressed')]);",
                vec![]
            )
            .await,
        json!([
            ["Presets", "false"],
            ["Profiles", "false"],
            ["Capabilities", "true"],
            ["Payloads", "false"],
            ["Session", "false"],
            ["Delegation", "false"]
        ])
    );
    assert_eq!(
        reachable(&browser, ".surfaces .surface-tab").await,
        all_ok()
    );
    browser
        .click_text(".surfaces .surface-tab", "Presets")
        .await;
    browser.wait_css(".presets").await;

    browser.assert_no_errors().await;
    browser.close().await;
}
