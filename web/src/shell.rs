//! The frame around the surfaces: top bar (surfaces, status, theme), keyboard shortcuts (the
//! command palette and the shortcuts overlay are in `palette`), the unload guard, and the
//! Presets surface layout (sidebar + workspace + preview dock).

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::dock::Dock;
use crate::dom::focus_later;
use crate::editor::StackWorkspace;
use crate::modal::Dialogs;
use crate::state::{self, open_stack, App, Dialog, Scope, Surface, Tone};

const THEME_KEY: &str = "pi-forge-theme";

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// Shows `dark` (or light) now: the app's signal, the page's theme and its first-screen cookie.
fn set_theme(app: App, dark: bool) {
    app.dark.set(dark);
    apply_theme(dark);
}

fn apply_theme(dark: bool) {
    let theme = if dark { "dark" } else { "light" };
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    if let Some(root) = document.document_element() {
        let _ = root.set_attribute("data-theme", theme);
    }
    // The server draws the page's first screen in this theme on the next load (it cannot read
    // local storage). Every port of the host shares the cookie; each app sets it from its own
    // storage when it starts.
    if let Ok(html) = document.dyn_into::<web_sys::HtmlDocument>() {
        let _ = html.set_cookie(&format!(
            "{THEME_COOKIE}={theme}; path=/; max-age=31536000; SameSite=Strict"
        ));
    }
}

/// The theme cookie's name (server/src/http/first_screen.rs reads it).
use forge_core::api::THEME_COOKIE;

#[component]
pub fn Shell() -> impl IntoView {
    let app = App::new(crate::split::draft_checks);
    provide_context(app);
    let dock = Dock::new();
    provide_context(dock);
    crate::payload_feed::provide(app, dock);

    // The user's choice once made (the theme button stores it); until then the OS's
    // `prefers-color-scheme`, followed as it changes. Nothing is stored before a choice.
    let chosen = || storage().and_then(|s| s.get_item(THEME_KEY).ok().flatten());
    let os_dark = web_sys::window()
        .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten());
    let dark = match chosen() {
        Some(v) => v == "dark",
        None => os_dark
            .as_ref()
            .is_some_and(web_sys::MediaQueryList::matches),
    };
    set_theme(app, dark);
    if let Some(query) = os_dark {
        let follow = wasm_bindgen::closure::Closure::<dyn Fn()>::new({
            let query = query.clone();
            move || {
                if chosen().is_none() {
                    set_theme(app, query.matches());
                }
            }
        });
        query.set_onchange(Some(wasm_bindgen::JsCast::unchecked_ref(follow.as_ref())));
        // The listener lives as long as the page.
        follow.forget();
    }

    // The page carries the stack list: the rows are in the first render, without a request.
    if !state::boot_list(app) {
        state::refresh_stacks(app);
    }
    take_first_screen_search(app);
    // The editor, the preview dock and the dialogs are built after the first paint.
    request_animation_frame(move || {
        set_timeout(move || app.shell_ready.set(true), std::time::Duration::ZERO)
    });
    crate::events::connect(app);
    crate::recovery::install(app);
    let palette = crate::palette::Palette::new();
    provide_context(palette);

    // Ctrl/Cmd+S saves what the current surface edits.
    let _keys = window_event_listener(ev::keydown, move |e| {
        // Ctrl/Cmd+K opens the command palette (from a text field too); `?` lists the
        // shortcuts, unless it is typed into a text field.
        if (e.ctrl_key() || e.meta_key()) && !e.alt_key() && e.key().eq_ignore_ascii_case("k") {
            if app.dialog.with_untracked(Option::is_none) {
                e.prevent_default();
                palette.show();
            }
            return;
        }
        if e.key() == "?"
            && !(e.ctrl_key() || e.meta_key() || e.alt_key())
            && !palette.is_open()
            && app.dialog.with_untracked(Option::is_none)
            && !crate::palette::typing_in(e.target())
        {
            e.prevent_default();
            palette.show_help();
            return;
        }
        if e.key() == "Escape" && palette.is_open() {
            e.prevent_default();
            palette.close(true);
            return;
        }
        if (e.ctrl_key() || e.meta_key()) && e.key().eq_ignore_ascii_case("s") {
            e.prevent_default();
            match app.surface.get_untracked() {
                Surface::Presets => {
                    if app.dialog.with_untracked(Option::is_none) {
                        state::save_stack(app, None)
                    }
                }
                Surface::Profiles | Surface::Capabilities => {
                    if let Some(save) = app.form_save.get_untracked() {
                        save.run(())
                    }
                }
                Surface::Payloads | Surface::Session | Surface::Delegation => {}
            }
        }
        // Ctrl/Cmd+Z undoes a Preset edit, Ctrl/Cmd+Shift+Z or Ctrl+Y redoes it (the draft's own
        // history, also inside its text fields, so every edit is one history).
        let key = e.key().to_ascii_lowercase();
        if (e.ctrl_key() || e.meta_key())
            && (key == "z" || key == "y")
            && app.surface.get_untracked() == Surface::Presets
            && app.dialog.with_untracked(Option::is_none)
            && !palette.is_open()
            && app.editor.loaded.with_untracked(Option::is_some)
        {
            e.prevent_default();
            let ed = app.editor;
            if key == "y" || e.shift_key() {
                ed.undo.redo(ed.draft);
            } else {
                ed.undo.undo(ed.draft);
            }
        }
        if e.key() == "Escape" && app.dialog.with_untracked(Option::is_some) {
            app.dialog.set(None);
        }
    });
    // Leaving the page with unsaved work asks first (the browser's own prompt).
    let _unload = window_event_listener(ev::beforeunload, move |e| {
        if app.editor.dirty.get_untracked() || app.form_dirty.get_untracked() {
            e.prevent_default();
            e.set_return_value("unsaved");
        }
    });

    let toggle_theme = move |_| {
        let dark = !app.dark.get_untracked();
        set_theme(app, dark);
        if let Some(s) = storage() {
            let _ = s.set_item(THEME_KEY, if dark { "dark" } else { "light" });
        }
    };
    let go = move |surface: Surface| state::go(app, surface);

    view! {
        <div class="app" class:dock-open=move || dock.open.get() class:dock-focus=move || dock.focus.get()>
            <header class="topbar">
                <span class="brand" title="pi-forge">"pi-forge"</span>
                <SurfaceMenu go=Callback::new(go)/>
                <nav class="surfaces" aria-label="Surfaces">
                    <button class="surface-tab" class:current=move || app.surface.get() == Surface::Presets
                        aria-pressed=move || (app.surface.get() == Surface::Presets).to_string()
                        on:click=move |_| go(Surface::Presets)>"Presets"</button>
                    <button class="surface-tab" class:current=move || app.surface.get() == Surface::Profiles
                        aria-pressed=move || (app.surface.get() == Surface::Profiles).to_string()
                        on:click=move |_| go(Surface::Profiles)>"Profiles"</button>
                    <button class="surface-tab" class:current=move || app.surface.get() == Surface::Capabilities
                        aria-pressed=move || (app.surface.get() == Surface::Capabilities).to_string()
                        on:click=move |_| go(Surface::Capabilities)>"Capabilities"</button>
                    <button class="surface-tab" class:current=move || app.surface.get() == Surface::Payloads
                        aria-pressed=move || (app.surface.get() == Surface::Payloads).to_string()
                        on:click=move |_| go(Surface::Payloads)>"Payloads"</button>
                    <button class="surface-tab" id="surface-session" class:current=move || app.surface.get() == Surface::Session
                        aria-pressed=move || (app.surface.get() == Surface::Session).to_string()
                        on:click=move |_| go(Surface::Session)>"Session"</button>
                    <button class="surface-tab delegation-surface-tab" class:current=move || app.surface.get() == Surface::Delegation
                        aria-pressed=move || (app.surface.get() == Surface::Delegation).to_string()
                        on:click=move |_| go(Surface::Delegation)>
                        "Delegation"
                        // The name read out is the visible text plus what the count means.
                        {move || (app.plans_pending.get() > 0).then(|| view! {
                            <span class="badge warn pending-plans">{app.plans_pending.get()}</span>
                            <span class="sr-only">" waiting for approval"</span>
                        })}
                    </button>
                </nav>
                <output class="status" role="status" aria-live="polite"
                    class:ok=move || app.status.with(|s| s.1 == Tone::Ok)
                    class:error=move || app.status.with(|s| s.1 == Tone::Error)>
                    {move || app.status.with(|s| s.0.clone())}
                </output>
                <LiveIndicator/>
                <crate::session::SessionBadge go=Callback::new(move |_| go(Surface::Session))/>
                <Show when=move || !app.trusted.get()>
                    <span class="badge warn" title="pi-forge was started with --untrusted: project files are read-only.">"Read-only"</span>
                </Show>
                <button class="shortcuts-button icon" on:click=move |_| palette.show_help()
                    aria-label="Keyboard shortcuts" title="Keyboard shortcuts (?) and the command palette (Ctrl+K)">"?"</button>
                <button class="theme-toggle icon" on:click=toggle_theme
                    aria-label=move || if app.dark.get() { "Use light theme" } else { "Use dark theme" }
                    title=move || if app.dark.get() { "Use light theme" } else { "Use dark theme" }>
                    {move || if app.dark.get() { "☀" } else { "☾" }}
                </button>
            </header>
            <crate::recovery::SessionLostBanner/>
            {move || {
                let problems = app.problems.get();
                (!problems.is_empty()).then(|| view! {
                    <div class="banner error workspace-problems" role="alert">
                        <ul>{problems.into_iter().map(|m| view! { <li>{m}</li> }).collect_view()}</ul>
                        <button class="reload" on:click=move |_| state::reload_workspace(app)>"Reload"</button>
                    </div>
                })
            }}
            {move || match app.surface.get() {
                Surface::Presets => view! { <PresetsSurface/> }.into_any(),
                Surface::Profiles => crate::split::profiles(),
                Surface::Capabilities => crate::split::capabilities(),
                Surface::Payloads => crate::split::payloads(),
                Surface::Session => crate::split::session(),
                Surface::Delegation => crate::split::delegation(),
            }}
            {move || app.shell_ready.get().then(|| view! { <Dialogs/> })}
            <crate::modal::PaletteLayer/>
        </div>
    }
}

/// Takes over what was typed into the server-drawn first screen's search box before the app
/// started (and the focus, when the box had it).
fn take_first_screen_search(app: App) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let selector = format!("#{} .search", crate::dom::FIRST_SCREEN_ID);
    let Some(input) = document
        .query_selector(&selector)
        .ok()
        .flatten()
        .and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok())
    else {
        return;
    };
    let text = input.value();
    if !text.is_empty() {
        app.search.set(text);
    }
    let focused = document
        .active_element()
        .is_some_and(|a| a.is_same_node(Some(&input)));
    if focused {
        focus_later(".sidebar .search".into());
    }
}

/// The count badge of a surface, if it has one: the delegation plans waiting for a person.
fn surface_badge(app: App, surface: Surface) -> Option<u64> {
    (surface == Surface::Delegation)
        .then(|| app.plans_pending.get())
        .filter(|n| *n > 0)
}

/// On a narrow screen the surface tabs collapse into this one button (the CSS shows one or the
/// other): it names the current surface, carries any tab's count badge, and opens a menu of
/// every surface (↑/↓, Home, End, Enter; Escape, Tab or a click outside close it, Escape gives
/// the focus back to the button).
#[component]
fn SurfaceMenu(go: Callback<Surface>) -> impl IntoView {
    let app = state::app();
    let open = RwSignal::new(false);
    const TOGGLE: &str = ".surface-menu-toggle";
    const ITEMS: &str = ".surface-menu-list [role=menuitem]";
    let close = move |focus_toggle: bool| {
        if open.try_get_untracked() == Some(true) {
            open.set(false);
            if focus_toggle {
                focus_later(TOGGLE.into());
            }
        }
    };
    let escape = window_event_listener(ev::keydown, move |e| {
        if e.key() == "Escape" && open.try_get_untracked() == Some(true) {
            e.prevent_default();
            close(true);
        }
    });
    let outside = window_event_listener(ev::click, move |e| {
        let inside = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .and_then(|el| el.closest(".surface-menu").ok().flatten())
            .is_some();
        if !inside {
            close(false);
        }
    });
    on_cleanup(move || {
        escape.remove();
        outside.remove();
    });
    // Opening focuses the current surface's entry; another way of switching closes the menu.
    Effect::new(move |_| {
        if open.get() {
            focus_later(".surface-menu-list [aria-current=page]".into());
        }
    });
    Effect::new(move |prev: Option<Surface>| {
        let now = app.surface.get();
        if prev.is_some_and(|p| p != now) {
            close(false);
        }
        now
    });
    // Any tab's badge, summed, on the button (today only Delegation has one).
    let badge = move || {
        Surface::ALL
            .into_iter()
            .filter_map(|s| surface_badge(app, s))
            .sum::<u64>()
    };

    view! {
        <div class="surface-menu">
            <button class="surface-menu-toggle" aria-haspopup="menu"
                aria-expanded=move || open.get().to_string()
                on:click=move |_| open.update(|o| *o = !*o)>
                <span class="surface-menu-current">{move || app.surface.get().label()}</span>
                <span class="sr-only">" (surfaces menu)"</span>
                {move || (badge() > 0).then(|| view! {
                    <span class="badge warn pending-plans">{badge()}</span>
                    <span class="sr-only">" waiting for approval in Delegation"</span>
                })}
                <span class="caret" aria-hidden="true">"▾"</span>
            </button>
            <Show when=move || open.get()>
                <div class="menu surface-menu-list" role="menu" aria-label="Surfaces"
                    on:keydown=move |e| {
                        if e.key() == "Tab" {
                            close(false);
                        } else {
                            crate::widgets::menu_keys(&e, ITEMS);
                        }
                    }>
                    {Surface::ALL.into_iter().map(|s| view! {
                        <button role="menuitem" class="surface-menu-item" data-surface=s.label()
                            aria-current=move || (app.surface.get() == s).then_some("page")
                            on:click=move |_| {
                                close(true);
                                go.run(s);
                            }>
                            {s.label()}
                            {move || surface_badge(app, s).map(|n| view! { <span class="badge warn pending-plans">{n}</span> })}
                        </button>
                    }).collect_view()}
                </div>
            </Show>
        </div>
    }
}

/// What the indicator shows for a live view: `(text, label, tooltip)`.
fn live_texts(v: &forge_core::api::LiveView) -> (String, String, String) {
    let Some(v) = v.session() else {
        return (
            "No live session".into(),
            "No live Pi session".into(),
            state::NO_LIVE_SESSION.into(),
        );
    };
    let model = v
        .model
        .as_ref()
        .map_or_else(|| "no model".into(), |m| m.label());
    let session = &v.session_id;
    let short: String = session.chars().take(8).collect();
    let version = &v.pi_version;
    let text = format!("Pi {version} · {model} · session {short}");
    let label = format!("Live Pi session: Pi {version}, model {model}, session {session}");
    let mut tip = vec![
        format!("Live Pi session {session}"),
        format!(
            "Session file: {}",
            v.session_file.as_deref().unwrap_or("none (not saved)")
        ),
        format!(
            "Pi {version} ({} mode), extension {}, pi-forge {}",
            v.mode, v.extension_version, v.server_version
        ),
        format!(
            "Model {model}, thinking {}",
            v.thinking_level.as_deref().unwrap_or("")
        ),
        format!("Preset: {}", v.active_stack_id.as_deref().unwrap_or("none")),
    ];
    if !v.connected_at.is_empty() {
        tip.push(format!("Connected {}", v.connected_at));
    }
    (text, label, tip.join("\n"))
}

/// The live Pi session in the top bar: Pi version, model and session, or "No live session".
#[component]
fn LiveIndicator() -> impl IntoView {
    let app = state::app();
    let connected = move || app.live.with(|v| v.connected);
    let texts = Memo::new(move |_| app.live.with(live_texts));
    let mismatch = move || {
        app.live
            .with(|v| v.session().is_some_and(|s| s.version_mismatch))
    };
    let mismatch_tip = move || {
        app.live.with(|v| {
            let (extension, server) = v
                .session()
                .map(|s| (s.extension_version.clone(), s.server_version.clone()))
                .unwrap_or_default();
            format!(
                "The pi-forge extension in Pi is version {extension}, this pi-forge is {server}. Run `pi-forge pi install` and restart Pi."
            )
        })
    };
    view! {
        <span id="live-indicator" class="live-indicator" class:connected=connected
            data-live=move || connected().to_string()
            role="status" aria-label=move || texts.with(|t| t.1.clone())
            title=move || texts.with(|t| t.2.clone())>
            <span class="live-dot" aria-hidden="true"></span>
            <span class="live-text">{move || texts.with(|t| t.0.clone())}</span>
        </span>
        <Show when=mismatch>
            <span class="badge warn live-mismatch" title=mismatch_tip>"Version mismatch"</span>
        </Show>
    }
}

#[component]
fn PresetsSurface() -> impl IntoView {
    let app = state::app();
    let ready = move || app.shell_ready.get();
    let dock = expect_context::<Dock>();
    // The dock shows nothing until it is first opened, so its code (`split`) is fetched then;
    // once mounted it stays.
    let dock_used = Memo::new(move |used: Option<&bool>| used == Some(&true) || dock.open.get());
    view! {
        <div class="presets">
            <StackSidebar/>
            <main class="workspace">
                {move || ready().then(|| view! { <StackWorkspace/> })}
            </main>
            {move || (ready() && dock_used.get()).then(crate::split::preview_dock)}
        </div>
    }
}

/// Content matches of the sidebar's search (`GET /api/search`): the query they answer and the
/// hits by selector.
type ContentHits = (
    String,
    std::collections::HashMap<String, forge_core::stack::search::StackSearchHit>,
);

/// Searches the Presets' content 150 ms after the last keystroke (two characters or more); an
/// answer to an older query is dropped.
fn search_content(hits: RwSignal<ContentHits>, seq: StoredValue<u64>, q: String) {
    let my = seq.get_value() + 1;
    seq.set_value(my);
    if q.chars().count() < 2 {
        hits.set((q, Default::default()));
        return;
    }
    set_timeout(
        move || {
            // The sidebar may be gone by now (another surface).
            if seq.try_get_value() != Some(my) {
                return;
            }
            crate::task::spawn_while(hits, async move {
                let answer = crate::split::search(q.clone()).await;
                if seq.get_value() != my {
                    return;
                }
                if let Some(found) = answer {
                    let map = found.into_iter().map(|h| (h.selector.clone(), h)).collect();
                    hits.set((q, map));
                }
            });
        },
        std::time::Duration::from_millis(150),
    );
}

#[component]
fn StackSidebar() -> impl IntoView {
    let app = state::app();
    let hits: RwSignal<ContentHits> = RwSignal::new(Default::default());
    let seq = StoredValue::new(0u64);
    Effect::new(move |_| {
        let q = app.search.get().trim().to_string();
        // A changed Preset may match differently: search again on list changes too.
        app.stacks.track();
        search_content(hits, seq, q);
    });
    let rows = Memo::new(move |_| {
        let scope = app.scope.get();
        let q = app.search.get().trim().to_lowercase();
        let content = hits.with(|(asked, h)| {
            if asked.to_lowercase() == q {
                h.keys().cloned().collect::<std::collections::HashSet<_>>()
            } else {
                Default::default()
            }
        });
        app.stacks.with(|rows| {
            rows.iter()
                .filter(|r| r.scope == scope.as_str())
                .filter(|r| {
                    q.is_empty()
                        || r.id.to_lowercase().contains(&q)
                        || r.name
                            .as_deref()
                            .is_some_and(|n| n.to_lowercase().contains(&q))
                        || content.contains(&r.selector)
                })
                .cloned()
                .collect::<Vec<_>>()
        })
    });
    let count = move |scope: Scope| {
        app.stacks
            .with(|rows| rows.iter().filter(|r| r.scope == scope.as_str()).count())
    };
    // A memo: the rows re-run only when another Preset is opened, not on every save.
    let selected = Memo::new(move |_| {
        app.editor
            .loaded
            .with(|l| l.as_ref().map(|l| l.selector.clone()))
    });
    let scope_button = move |scope: Scope, label: &'static str| {
        view! {
            <button class="seg-button" class:current=move || app.scope.get() == scope
                aria-pressed=move || (app.scope.get() == scope).to_string()
                on:click=move |_| app.scope.set(scope)>
                {label} <span class="count">{move || count(scope)}</span>
            </button>
        }
    };
    view! {
        <aside class="sidebar" aria-label="Presets">
            <div class="sidebar-head">
                <div class="seg scope-switch" role="group" aria-label="Scope">
                    {scope_button(Scope::Project, "Project")}
                    {scope_button(Scope::Global, "Global")}
                </div>
                // An unsaved draft is kept in this browser when the new Preset opens (the dialog
                // says so); only JSON text not applied yet would be lost, so only that asks.
                <button class="new-stack" on:click=move |_| {
                    if untrack(|| app.editor.json_pending()) {
                        app.confirm_discard("Creating a Preset", move || app.dialog.set(Some(Dialog::NewStack)));
                    } else {
                        app.dialog.set(Some(Dialog::NewStack));
                    }
                }>"New"</button>
            </div>
            <input class="search" type="search" placeholder="Search Presets" aria-label="Search Presets by name, text, slots and regex rules"
                prop:value=move || app.search.get()
                on:input=move |e| app.search.set(event_target_value(&e))/>
            <ul class="stack-list">
                {move || {
                    let rows = rows.get();
                    if rows.is_empty() {
                        let text = if app.stacks.with(Vec::is_empty) {
                            "No prompt stacks found."
                        } else if app.search.with(|q| !q.trim().is_empty()) {
                            "No Presets match the search."
                        } else {
                            "No Presets in this scope."
                        };
                        return view! { <li class="empty">{text}</li> }.into_any();
                    }
                    rows.into_iter().map(|r| {
                        let sel = r.selector.clone();
                        let sel2 = r.selector.clone();
                        let is_selected = move || selected.with(|s| s.as_deref() == Some(sel2.as_str()));
                        let is_selected2 = is_selected.clone();
                        let (title, detail) = (r.title.clone(), r.detail.clone());
                        let sel3 = r.selector.clone();
                        // The open Preset's row counts what Diagnostics counts: the unsaved
                        // draft's problems while there is one, the file's otherwise.
                        let is_selected3 = is_selected.clone();
                        let row = r.clone();
                        let badges = move || {
                            let ed = app.editor;
                            let draft = (is_selected3() && ed.dirty.get()).then(|| {
                                let warnings = ed.diagnostics.with(|d| {
                                    d.iter().filter(|d| d.level == forge_core::diag::Level::Warning).count()
                                });
                                (ed.errors.get(), warnings)
                            });
                            row_badges(&row, draft)
                        };
                        // Where the search text occurs in the Preset's content.
                        let found = move || hits.with(|(asked, h)| h.get(&sel3).filter(|_| app.search.with(|q| q.trim() == asked.as_str())).map(|hit| {
                            let first = hit.matches.first().map(|m| format!("{}: {}", m.place, m.excerpt)).unwrap_or_default();
                            let extra = hit.matches.len() - 1 + hit.more;
                            if extra > 0 { format!("{first} (+{extra} more)") } else { first }
                        }));
                        view! {
                            <li>
                                <button class="stack-row" class:selected=is_selected class:active=r.active
                                    aria-current=move || if is_selected2() { "true" } else { "false" }
                                    data-selector=r.selector.clone()
                                    on:click=move |_| open_stack(app, sel.clone())>
                                    <span class="row-title">{title}</span>
                                    <span class="row-id">{r.id.clone()}</span>
                                    <span class="row-detail">{detail}</span>
                                    {move || found().map(|text| view! { <span class="row-match">{text}</span> })}
                                    {badges}
                                </button>
                            </li>
                        }
                    }).collect_view().into_any()
                }}
            </ul>
        </aside>
    }
}

/// The badges of a stack row; no element at all for a row without any (most rows). `draft`:
/// the error and warning counts of the open Preset's unsaved draft, which take the place of
/// the file's.
fn row_badges(r: &state::StackRow, draft: Option<(usize, usize)>) -> Option<AnyView> {
    let badges = match draft {
        None => r.badges.clone(),
        Some(counts) => draft_badges(&r.badges, counts),
    };
    if badges.is_empty() {
        return None;
    }
    Some(view! {
        <span class="row-badges">
            {badges.into_iter().map(|b| view! {
                <span class=format!("badge {}", b.kind) title=b.title.clone() aria-label=b.label.clone()>{b.text.clone()}</span>
            }).collect_view()}
        </span>
    }.into_any())
}

/// `badges` with the file's error and warning counts replaced by the draft's (`counts`), in
/// the same place and form, their names saying they are the draft's.
fn draft_badges(
    badges: &[forge_core::api::RowBadge],
    (errors, warnings): (usize, usize),
) -> Vec<forge_core::api::RowBadge> {
    let is_count = |b: &&forge_core::api::RowBadge| matches!(b.kind, "error" | "warning");
    let (active, rest): (Vec<_>, Vec<_>) = badges
        .iter()
        .filter(|b| !is_count(b))
        .cloned()
        .partition(|b| b.kind == "active");
    let counts = forge_core::api::RowBadge::counts(errors, warnings, " in the unsaved draft");
    active.into_iter().chain(counts).chain(rest).collect()
}
