//! Find things and move fast: the command palette (Ctrl/Cmd+K) and the keyboard shortcuts
//! overlay (`?`).
//!
//! The palette is a modal dialog with one combobox: typing filters the commands (open a
//! Preset, switch surface, jump to an item of the open Preset, Validate / Preview / Activate
//! it) with a fuzzy match; ↑/↓ move the active entry (`aria-activedescendant`), Enter runs it,
//! Escape closes and gives the focus back. Every command calls the same function as the button
//! it stands for.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::dock::Dock;
use crate::state::{self, App, Surface, Tab};

/// The most entries the list shows at once.
const LIMIT: usize = 50;

/// Whether the palette or the shortcuts overlay is open.
#[derive(Clone, Copy)]
pub struct Palette {
    pub open: RwSignal<bool>,
    pub help: RwSignal<bool>,
    query: RwSignal<String>,
    active: RwSignal<usize>,
}

thread_local! {
    /// The element that had focus when the palette or the overlay opened.
    static OPENER: std::cell::RefCell<Option<web_sys::HtmlElement>> = const { std::cell::RefCell::new(None) };
}

fn document() -> Option<web_sys::Document> {
    web_sys::window().and_then(|w| w.document())
}

fn remember_opener() {
    let el = document()
        .and_then(|d| d.active_element())
        .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok());
    OPENER.with(|o| *o.borrow_mut() = el);
}

/// Gives the focus back to the element that had it before, if it is still on the page.
fn restore_focus() {
    if let Some(el) = OPENER.with(|o| o.borrow_mut().take()) {
        let node: &web_sys::Node = &el;
        if document().is_some_and(|d| d.contains(Some(node))) {
            request_animation_frame(move || {
                let _ = el.focus();
            });
        }
    }
}

impl Palette {
    pub fn new() -> Palette {
        Palette {
            open: RwSignal::new(false),
            help: RwSignal::new(false),
            query: RwSignal::new(String::new()),
            active: RwSignal::new(0),
        }
    }

    pub fn show(&self) {
        if self.open.get_untracked() {
            return;
        }
        if !self.help.get_untracked() {
            remember_opener();
        }
        self.help.set(false);
        self.query.set(String::new());
        self.active.set(0);
        self.open.set(true);
        crate::dom::focus_later(".palette-input".into());
    }

    pub fn show_help(&self) {
        if self.help.get_untracked() {
            return;
        }
        if !self.open.get_untracked() {
            remember_opener();
        }
        self.open.set(false);
        self.help.set(true);
        crate::dom::focus_later(".shortcuts .shortcuts-close".into());
    }

    /// Closes whichever is open; `restore` gives the focus back to where it was.
    pub fn close(&self, restore: bool) {
        let was = self.open.get_untracked() || self.help.get_untracked();
        self.open.set(false);
        self.help.set(false);
        if was && restore {
            restore_focus();
        } else {
            OPENER.with(|o| o.borrow_mut().take());
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.get_untracked() || self.help.get_untracked()
    }
}

pub fn palette() -> Palette {
    expect_context::<Palette>()
}

/// Whether a key typed here is text (a text field, a select, an editable element): `?` is
/// then a character, not a shortcut.
pub fn typing_in(target: Option<web_sys::EventTarget>) -> bool {
    let Some(el) = target.and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok()) else {
        return false;
    };
    if el.is_content_editable() {
        return true;
    }
    match el.tag_name().to_ascii_lowercase().as_str() {
        "textarea" | "select" => true,
        "input" => {
            let kind = el
                .get_attribute("type")
                .unwrap_or_default()
                .to_ascii_lowercase();
            !matches!(
                kind.as_str(),
                "checkbox" | "radio" | "button" | "submit" | "reset" | "range" | "color" | "file"
            )
        }
        _ => false,
    }
}

/// A fuzzy match of `query` in `text` (both compared lowercased): every word of the query must
/// appear in order as a subsequence. A lower score is a better match: contiguous runs, a match
/// at the start of the text or of a word count most. `None` when it does not match.
pub fn fuzzy(query: &str, text: &str) -> Option<u32> {
    let hay: Vec<char> = text.to_lowercase().chars().collect();
    let mut score = 0u32;
    for word in query.split_whitespace() {
        let needle: Vec<char> = word.to_lowercase().chars().collect();
        // A plain substring is the best case.
        let hay_s: String = hay.iter().collect();
        let word_l: String = needle.iter().collect();
        if let Some(at) = hay_s.find(&word_l) {
            let at = hay_s[..at].chars().count();
            let boundary = at == 0 || !hay[at - 1].is_alphanumeric();
            score += if boundary { 0 } else { 1 };
            continue;
        }
        let mut pos = 0usize;
        let mut last: Option<usize> = None;
        let mut gaps = 0u32;
        for c in &needle {
            let found = hay[pos..].iter().position(|h| h == c)?;
            let at = pos + found;
            if let Some(l) = last {
                if at > l + 1 {
                    gaps += 1;
                }
            }
            last = Some(at);
            pos = at + 1;
        }
        score += 10 + gaps * 5;
    }
    Some(score)
}

/// What a palette entry does.
#[derive(Clone, PartialEq)]
enum Action {
    Go(Surface),
    Open(String),
    Item(usize),
    Validate,
    Preview,
    Activate(String),
    Deactivate,
    Shortcuts,
}

#[derive(Clone, PartialEq)]
struct Entry {
    /// The group shown before the text ("Preset", "Go to", "Item", "Action").
    group: &'static str,
    text: String,
    /// A second line (an id, a detail).
    detail: String,
    action: Action,
}

/// Every command available now, in the order an empty query shows them.
fn entries(app: App) -> Vec<Entry> {
    let ed = app.editor;
    let mut out = Vec::new();
    let open = ed.loaded.with(|l| {
        l.as_ref()
            .map(|l| (l.selector.clone(), l.id.clone(), l.saved.is_null()))
    });
    if let Some((selector, id, unparsable)) = &open {
        // A file that is not JSON has nothing to validate (its button is disabled too).
        if !unparsable {
            out.push(Entry {
                group: "Action",
                text: "Validate".into(),
                detail: format!("Check {id} as the server does"),
                action: Action::Validate,
            });
        }
        out.push(Entry {
            group: "Action",
            text: "Preview".into(),
            detail: format!("The prompt {id} compiles to"),
            action: Action::Preview,
        });
        let active = app
            .active_id
            .with(|a| a.as_deref() == Some(selector.as_str()));
        if active {
            out.push(Entry {
                group: "Action",
                text: "Deactivate".into(),
                detail: "Pi runs without a Preset after this".into(),
                action: Action::Deactivate,
            });
        } else if ed.errors.get() == 0 {
            out.push(Entry {
                group: "Action",
                text: "Activate".into(),
                detail: format!("Make {id} the live Pi session's Preset"),
                action: Action::Activate(selector.clone()),
            });
        }
    }
    for s in Surface::ALL {
        out.push(Entry {
            group: "Go to",
            text: format!("Go to {}", s.label()),
            detail: String::new(),
            action: Action::Go(s),
        });
    }
    app.stacks.with(|rows| {
        for r in rows {
            out.push(Entry {
                group: "Preset",
                text: r.name.clone().unwrap_or_else(|| r.id.clone()),
                detail: r.selector.clone(),
                action: Action::Open(r.selector.clone()),
            });
        }
    });
    if open.is_some() {
        ed.draft.with(|d| {
            if let Some(items) = d.get("items").and_then(|v| v.as_array()) {
                for (i, item) in items.iter().enumerate() {
                    let field = |k: &str| item.get(k).and_then(|v| v.as_str()).unwrap_or("");
                    let name = field("name").trim();
                    let text = if name.is_empty() { field("id") } else { name };
                    let detail = if field("kind") == "slot" {
                        format!("slot · {}", field("slot"))
                    } else {
                        format!("block · {}", field("id"))
                    };
                    out.push(Entry {
                        group: "Item",
                        text: text.to_string(),
                        detail,
                        action: Action::Item(i),
                    });
                }
            }
        });
    }
    out.push(Entry {
        group: "Help",
        text: "Keyboard shortcuts".into(),
        detail: "?".into(),
        action: Action::Shortcuts,
    });
    out
}

/// The entries matching `query`, best first (ties keep the natural order).
fn matching(app: App, query: &str) -> Vec<Entry> {
    let all = entries(app);
    if query.trim().is_empty() {
        return all.into_iter().take(LIMIT).collect();
    }
    let mut scored: Vec<(u32, usize, Entry)> = all
        .into_iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let text = fuzzy(query, &e.text);
            let detail = fuzzy(query, &e.detail).map(|s| s + 3);
            let both = fuzzy(query, &format!("{} {} {}", e.group, e.text, e.detail)).map(|s| s + 6);
            [text, detail, both]
                .into_iter()
                .flatten()
                .min()
                .map(|s| (s, i, e))
        })
        .collect();
    scored.sort_by_key(|(s, i, _)| (*s, *i));
    scored.into_iter().take(LIMIT).map(|(_, _, e)| e).collect()
}

/// Focuses the element matching `selector` once it is on the page (a surface switch renders
/// it a frame or two later).
fn focus_when_shown(selector: String, tries: u32) {
    request_animation_frame(move || {
        let el = document()
            .and_then(|d| d.query_selector(&selector).ok().flatten())
            .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok());
        match el {
            Some(el) => {
                let _ = el.focus();
                el.scroll_into_view_with_bool(false);
            }
            None if tries > 0 => focus_when_shown(selector, tries - 1),
            None => {}
        }
    });
}

fn run(app: App, p: Palette, dock: Dock, action: Action) {
    match action {
        Action::Shortcuts => {
            // Keeps the element the palette was opened from as the one to go back to.
            p.show_help();
            return;
        }
        Action::Validate | Action::Activate(_) | Action::Deactivate => p.close(true),
        _ => p.close(false),
    }
    match action {
        Action::Go(s) => crate::state::go(app, s),
        Action::Open(selector) => {
            crate::state::go(app, Surface::Presets);
            state::open_stack(app, selector);
        }
        Action::Item(i) => {
            crate::state::go(app, Surface::Presets);
            app.editor.tab.set(Tab::Items);
            app.editor.item.set(Some(i));
            focus_when_shown(format!(".item-row[data-index='{i}']"), 30);
        }
        Action::Validate => state::validate_stack(app),
        Action::Preview => {
            crate::state::go(app, Surface::Presets);
            if !dock.open.get_untracked() {
                dock.toggle();
            }
        }
        Action::Activate(selector) => state::activate(app, selector),
        Action::Deactivate => state::deactivate(app),
        Action::Shortcuts => {}
    }
}

#[component]
pub(crate) fn PaletteDialog() -> impl IntoView {
    let app = state::app();
    let p = palette();
    let dock = expect_context::<Dock>();
    let list = Memo::new(move |_| p.query.with(|q| matching(app, q)));
    // A new query starts at the best match.
    Effect::new(move |_| {
        p.query.track();
        p.active.set(0);
    });
    let active_id = move || {
        let n = list.with(Vec::len);
        (n > 0).then(|| format!("palette-opt-{}", p.active.get().min(n - 1)))
    };
    let scroll_active = move || {
        request_animation_frame(move || {
            if let Some(el) = document().and_then(|d| {
                d.query_selector(".palette-list [aria-selected=true]")
                    .ok()
                    .flatten()
            }) {
                let options = web_sys::ScrollIntoViewOptions::new();
                options.set_block(web_sys::ScrollLogicalPosition::Nearest);
                el.scroll_into_view_with_scroll_into_view_options(&options);
            }
        });
    };
    let on_key = move |e: leptos::ev::KeyboardEvent| {
        let n = list.with_untracked(Vec::len);
        match e.key().as_str() {
            "ArrowDown" if n > 0 => {
                e.prevent_default();
                p.active.update(|a| *a = (*a + 1) % n);
                scroll_active();
            }
            "ArrowUp" if n > 0 => {
                e.prevent_default();
                p.active.update(|a| *a = (*a + n - 1) % n);
                scroll_active();
            }
            "Enter" => {
                e.prevent_default();
                let at = p.active.get_untracked();
                if let Some(entry) =
                    list.with_untracked(|l| l.get(at.min(n.saturating_sub(1))).cloned())
                {
                    run(app, p, dock, entry.action);
                }
            }
            "Escape" => {
                e.prevent_default();
                e.stop_propagation();
                p.close(true);
            }
            // The input is the dialog's only control: Tab stays in it.
            "Tab" => e.prevent_default(),
            _ => {}
        }
    };
    view! {
        <div class="modal-backdrop palette-backdrop" on:click=move |e| {
            if e.target() == e.current_target() { p.close(true); }
        }>
            <div class="modal palette" role="dialog" aria-modal="true" aria-label="Command palette">
                <input class="palette-input" type="text" role="combobox" autocomplete="off" spellcheck="false"
                    aria-label="Command" aria-expanded="true" aria-controls="palette-list" aria-autocomplete="list"
                    aria-activedescendant=active_id
                    placeholder="Open a Preset, go to a surface, jump to an item, run an action"
                    prop:value=move || p.query.get()
                    on:input=move |e| p.query.set(event_target_value(&e))
                    on:keydown=on_key/>
                <ul id="palette-list" class="palette-list" role="listbox" aria-label="Commands">
                    {move || {
                        let entries = list.get();
                        if entries.is_empty() {
                            return view! { <li class="palette-empty" role="presentation">"No command matches."</li> }.into_any();
                        }
                        entries.into_iter().enumerate().map(|(i, entry)| {
                            let action = entry.action.clone();
                            view! {
                                <li id=format!("palette-opt-{i}") class="palette-option" role="option"
                                    data-group=entry.group
                                    aria-selected=move || (p.active.get() == i).to_string()
                                    on:mousemove=move |_| if p.active.get_untracked() != i { p.active.set(i) }
                                    on:click=move |_| run(app, p, dock, action.clone())>
                                    <span class="palette-group">{entry.group}</span>
                                    <span class="palette-text">{entry.text}</span>
                                    <span class="palette-detail">{entry.detail}</span>
                                </li>
                            }
                        }).collect_view().into_any()
                    }}
                </ul>
                <p class="palette-hint muted">"↑ ↓ to choose · Enter to run · Esc to close"</p>
            </div>
        </div>
    }
}

/// Every keyboard shortcut of the editor, as the overlay lists them: `(keys, what)`.
pub const SHORTCUTS: &[(&str, &str)] = &[
    ("Ctrl+K / ⌘K", "Open the command palette: open a Preset, go to a surface, jump to an item, Validate, Preview, Activate"),
    ("?", "Show this list (in a text field it is just a question mark)"),
    ("Ctrl+S / ⌘S", "Save the open Preset (on Profiles and Capabilities: the open form)"),
    ("Ctrl+Z / ⌘Z", "Undo the last edit of the Preset draft"),
    ("Ctrl+Shift+Z / Ctrl+Y", "Redo"),
    ("Escape", "Close the palette, this list, a dialog, a menu or the full prompt; the focus goes back"),
    ("Tab / Shift+Tab", "Move between controls (inside a dialog the focus stays in it)"),
    ("↑ ↓ Home End", "Item list: select another item; menus: move between entries"),
    ("Alt+↑ / Alt+↓", "Item list: move the focused item"),
    ("Enter / Shift+Enter", "Payloads search: next / previous match"),
    ("Enter", "Pattern box: add the pattern; dialog field: confirm the dialog"),
];

#[component]
pub(crate) fn ShortcutsOverlay() -> impl IntoView {
    let p = palette();
    view! {
        <div class="modal-backdrop palette-backdrop" on:click=move |e| {
            if e.target() == e.current_target() { p.close(true); }
        }>
            <div class="modal shortcuts" role="dialog" aria-modal="true" aria-labelledby="shortcuts-title"
                on:keydown=move |e| if e.key() == "Tab" { crate::dom::trap_tab(&e) }>
                <h2 id="shortcuts-title">"Keyboard shortcuts"</h2>
                <table class="shortcut-list">
                    <tbody>
                        {SHORTCUTS.iter().map(|(keys, what)| view! {
                            <tr>
                                <th scope="row"><kbd>{*keys}</kbd></th>
                                <td>{*what}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
                <div class="row end">
                    <button class="open-palette" on:click=move |_| p.show()>"Open the command palette"</button>
                    <button class="primary shortcuts-close" on:click=move |_| p.close(true)>"Close"</button>
                </div>
            </div>
        </div>
    }
}
