//! The first screen as HTML, in the page itself: the top bar and the Presets list exactly as
//! the web app's first frame draws them, so the rows are on screen as soon as the page and its
//! CSS are, not after the wasm has loaded, compiled and mounted. The app replaces this element
//! with its own (same markup, same place) in the task that mounts it; a browser test compares the
//! two (e2e/tests/first_screen.rs).
//!
//! What a row shows comes from forge-core (`StackRow::title`, `detail`, `badges`, and
//! `StackList::opening` for the scope the list opens on), as in the app. Nothing here has its
//! own behaviour: until the app starts, `assets/boot.js` remembers a clicked row and the search
//! box keeps typed text, and the app takes both over.

use std::fmt::Write;

use forge_core::api::{StackList, StackRow, FIRST_SCREEN_ID, NO_LIVE_SESSION};
use forge_core::template::escape_xml as esc;

/// The surfaces of the top bar, in order (the app's `Surface::ALL`).
const SURFACES: [&str; 6] = [
    "Presets",
    "Profiles",
    "Capabilities",
    "Payloads",
    "Session",
    "Delegation",
];

pub use forge_core::api::THEME_COOKIE;

/// The first screen for `list` in the dark or light theme: `<div id="forge-first-screen"
/// class="app">…</div>`.
pub fn render(list: &StackList, dark: bool) -> String {
    let mut h = String::with_capacity(512 + list.stacks.len() * 200);
    h.push_str("<div id=\"");
    h.push_str(FIRST_SCREEN_ID);
    h.push_str("\" class=\"app\" aria-busy=\"true\"><header class=\"topbar\">");
    h.push_str("<span class=\"brand\" title=\"pi-forge\">pi-forge</span>");
    h.push_str(
        "<div class=\"surface-menu\"><button class=\"surface-menu-toggle\" aria-haspopup=\"menu\" \
         aria-expanded=\"false\"><span class=\"surface-menu-current\">Presets</span>\
         <span class=\"sr-only\"> (surfaces menu)</span>\
         <span class=\"caret\" aria-hidden=\"true\">▾</span></button></div>",
    );
    h.push_str("<nav class=\"surfaces\" aria-label=\"Surfaces\">");
    for (i, name) in SURFACES.iter().enumerate() {
        let class = match *name {
            "Presets" => "surface-tab current",
            "Delegation" => "surface-tab delegation-surface-tab",
            _ => "surface-tab",
        };
        let id = if *name == "Session" {
            " id=\"surface-session\""
        } else {
            ""
        };
        let _ = write!(
            h,
            "<button class=\"{class}\"{id} aria-pressed=\"{}\">{name}</button>",
            i == 0
        );
    }
    h.push_str("</nav>");
    let status = if list.stacks.is_empty() {
        "No prompt stacks found."
    } else {
        ""
    };
    let _ = write!(
        h,
        "<output class=\"status\" role=\"status\" aria-live=\"polite\">{status}</output>"
    );
    let _ = write!(
        h,
        "<span id=\"live-indicator\" class=\"live-indicator\" data-live=\"false\" role=\"status\" \
         aria-label=\"No live Pi session\" title=\"{}\"><span class=\"live-dot\" aria-hidden=\"true\">\
         </span><span class=\"live-text\">No live session</span></span>",
        esc(NO_LIVE_SESSION)
    );
    if !list.trusted {
        h.push_str(
            "<span class=\"badge warn\" title=\"pi-forge was started with --untrusted: project \
             files are read-only.\">Read-only</span>",
        );
    }
    let (theme_label, theme_icon) = if dark {
        ("Use light theme", "☀")
    } else {
        ("Use dark theme", "☾")
    };
    let _ = write!(
        h,
        "<button class=\"shortcuts-button icon\" aria-label=\"Keyboard shortcuts\" \
         title=\"Keyboard shortcuts (?) and the command palette (Ctrl+K)\">?</button>\
         <button class=\"theme-toggle icon\" aria-label=\"{theme_label}\" \
         title=\"{theme_label}\">{theme_icon}</button></header>"
    );
    if !list.problems.is_empty() {
        h.push_str("<div class=\"banner error workspace-problems\" role=\"alert\"><ul>");
        for p in &list.problems {
            let _ = write!(h, "<li>{}</li>", esc(&p.message));
        }
        h.push_str("</ul><button class=\"reload\">Reload</button></div>");
    }
    h.push_str("<div class=\"presets\">");
    sidebar(&mut h, list);
    h.push_str("<main class=\"workspace\"></main></div></div>");
    h
}

/// `<aside class="sidebar">`: the scope switch, New, the search box and the rows of the scope the
/// list opens on.
fn sidebar(h: &mut String, list: &StackList) {
    let scope = list
        .opening("project")
        .map_or("project", |r| &r.common.scope);
    let count = |s: &str| list.stacks.iter().filter(|r| r.common.scope == s).count();
    h.push_str(
        "<aside class=\"sidebar\" aria-label=\"Presets\"><div class=\"sidebar-head\">\
         <div class=\"seg scope-switch\" role=\"group\" aria-label=\"Scope\">",
    );
    for (value, label) in [("project", "Project"), ("global", "Global")] {
        let current = value == scope;
        let _ = write!(
            h,
            "<button class=\"seg-button{}\" aria-pressed=\"{current}\">{label}\
             <span class=\"count\">{}</span></button>",
            if current { " current" } else { "" },
            count(value)
        );
    }
    h.push_str(
        "</div><button class=\"new-stack\">New</button></div>\
         <input class=\"search\" type=\"search\" placeholder=\"Search Presets\" \
         aria-label=\"Search Presets by name, text, slots and regex rules\">\
         <ul class=\"stack-list\">",
    );
    let mut shown = list.stacks.iter().filter(|r| r.common.scope == scope);
    match shown.next() {
        None => {
            let text = if list.stacks.is_empty() {
                "No prompt stacks found."
            } else {
                "No Presets in this scope."
            };
            let _ = write!(h, "<li class=\"empty\">{text}</li>");
        }
        Some(first) => {
            for r in std::iter::once(first).chain(shown) {
                row(h, r);
            }
        }
    }
    h.push_str("</ul></aside>");
}

/// One `<li>` of the list, as the app's `StackSidebar` draws it before a Preset is open.
fn row(h: &mut String, r: &StackRow) {
    let _ = write!(
        h,
        "<li><button class=\"stack-row{}\" aria-current=\"false\" data-selector=\"{}\">\
         <span class=\"row-title\">{}</span><span class=\"row-id\">{}</span>\
         <span class=\"row-detail\">{}</span>",
        if r.active { " active" } else { "" },
        esc(&r.common.selector),
        esc(r.title()),
        esc(&r.common.id),
        esc(&r.detail())
    );
    let badges = r.badges();
    if !badges.is_empty() {
        h.push_str("<span class=\"row-badges\">");
        for b in badges {
            let _ = write!(h, "<span class=\"badge {}\"", b.kind);
            if let Some(title) = &b.title {
                let _ = write!(h, " title=\"{}\"", esc(title));
            }
            if let Some(label) = &b.label {
                let _ = write!(h, " aria-label=\"{}\"", esc(label));
            }
            let _ = write!(h, ">{}</span>", esc(&b.text));
        }
        h.push_str("</span>");
    }
    h.push_str("</button></li>");
}

#[cfg(test)]
mod tests {
    use forge_core::api::ResourceView;
    use forge_core::diag::Diagnostic;

    use super::*;

    fn row(selector: &str, name: &str) -> StackRow {
        let (scope, id) = selector.split_once(':').unwrap();
        StackRow {
            common: ResourceView {
                selector: selector.into(),
                id: id.into(),
                scope: scope.into(),
                ..Default::default()
            },
            name: Some(name.into()),
            mode: "replace".into(),
            item_count: 2,
            ..Default::default()
        }
    }

    #[test]
    fn rows_are_drawn_as_the_app_draws_them_with_their_text_escaped() {
        let mut broken = row("project:broken", "");
        broken.common.errors = 1;
        broken.legacy = true;
        broken.item_count = 1;
        let list = StackList {
            stacks: vec![
                row("global:g", "G"),
                row("project:a", "<b>A & \"B\"</b>"),
                broken,
            ],
            trusted: true,
            ..Default::default()
        };
        let mut h = String::new();
        sidebar(&mut h, &list);
        assert_eq!(
            h,
            "<aside class=\"sidebar\" aria-label=\"Presets\"><div class=\"sidebar-head\">\
             <div class=\"seg scope-switch\" role=\"group\" aria-label=\"Scope\">\
             <button class=\"seg-button current\" aria-pressed=\"true\">Project<span class=\"count\">2</span></button>\
             <button class=\"seg-button\" aria-pressed=\"false\">Global<span class=\"count\">1</span></button>\
             </div><button class=\"new-stack\">New</button></div>\
             <input class=\"search\" type=\"search\" placeholder=\"Search Presets\" \
             aria-label=\"Search Presets by name, text, slots and regex rules\"><ul class=\"stack-list\">\
             <li><button class=\"stack-row\" aria-current=\"false\" data-selector=\"project:a\">\
             <span class=\"row-title\">&lt;b&gt;A &amp; &quot;B&quot;&lt;/b&gt;</span><span class=\"row-id\">a</span>\
             <span class=\"row-detail\">replace · 2 items</span></button></li>\
             <li><button class=\"stack-row\" aria-current=\"false\" data-selector=\"project:broken\">\
             <span class=\"row-title\">broken</span><span class=\"row-id\">broken</span>\
             <span class=\"row-detail\">replace · 1 item</span><span class=\"row-badges\">\
             <span class=\"badge error\" title=\"1 error\" aria-label=\"1 error\">1 ✕</span>\
             <span class=\"badge muted\" title=\".pi/prompt-stacks (legacy folder)\">legacy</span>\
             </span></button></li></ul></aside>"
        );
    }

    #[test]
    fn the_list_opens_on_the_active_presets_scope_and_says_when_a_scope_is_empty() {
        let mut list = StackList {
            stacks: vec![row("global:g", "G"), row("project:a", "A")],
            active_id: Some("global:g".into()),
            trusted: true,
            ..Default::default()
        };
        let html = render(&list, false);
        assert!(html.contains("<button class=\"seg-button current\" aria-pressed=\"true\">Global<"));
        assert!(html.contains("data-selector=\"global:g\""));
        assert!(!html.contains("data-selector=\"project:a\""));
        assert!(html
            .contains("<output class=\"status\" role=\"status\" aria-live=\"polite\"></output>"));
        assert!(!html.contains("Read-only"));

        list.stacks.remove(1);
        list.active_id = None;
        list.trusted = false;
        list.problems = vec![Diagnostic::error("Cannot list <dir>.")];
        let html = render(&list, false);
        // No project Presets: the list opens on the global ones.
        assert!(html.contains("<button class=\"seg-button current\" aria-pressed=\"true\">Global<"));
        assert!(html.contains("data-selector=\"global:g\""));
        assert!(html.contains(">Read-only</span>"));
        assert!(html.contains(
            "<div class=\"banner error workspace-problems\" role=\"alert\"><ul><li>Cannot list &lt;dir&gt;.</li></ul>"
        ));

        list.stacks.clear();
        let html = render(&list, false);
        assert!(html.contains("<li class=\"empty\">No prompt stacks found.</li>"));
        assert!(html.contains("aria-live=\"polite\">No prompt stacks found.</output>"));
        assert!(
            html.starts_with("<div id=\"forge-first-screen\" class=\"app\" aria-busy=\"true\">")
        );
    }
}
