//! The open Preset: title, action bar, live-change banner, conflict view, section tabs and
//! the diagnostics panel.

use forge_core::diag::Level;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;

use crate::api::{self, seg};
use crate::dock::Dock;
use crate::items::ItemsTab;
use crate::jp;
use crate::state::{self, app, level_class, plural, Dialog, Tab, Tone};

#[component]
pub fn StackWorkspace() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    // Opening another Preset remounts the editor; a save or reload of the open one keeps it
    // (and the focus, the menu and the diagnostics panel state with it).
    let open = Memo::new(move |_| ed.loaded.with(|l| l.as_ref().map(|l| l.selector.clone())));
    move || {
        if open.with(Option::is_none) {
            let empty = app.stacks_loaded.get() && app.stacks.with(Vec::is_empty);
            return view! {
                <div class="empty-state">
                    {if empty {
                        view! {
                            <h2>"No prompt stacks found."</h2>
                            <p>"A Preset shapes Pi's system prompt and message layout. Create one to start."</p>
                        }.into_any()
                    } else {
                        view! { <p>"Select a Preset in the list."</p> }.into_any()
                    }}
                    <button class="primary" on:click=move |_| app.dialog.set(Some(Dialog::NewStack))>"New Preset"</button>
                </div>
            }
            .into_any();
        }
        view! { <Editor/> }.into_any()
    }
}

#[component]
fn Editor() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let dock = expect_context::<Dock>();
    let loaded = move || ed.loaded.get();
    let selector = move || {
        ed.loaded
            .with(|l| l.as_ref().map(|l| l.selector.clone()).unwrap_or_default())
    };
    let is_active = move || {
        let sel = selector();
        app.active_id.with(|a| a.as_deref() == Some(sel.as_str()))
    };
    let title = move || {
        ed.draft.with(|d| {
            let name = jp::get_str(d, "/name");
            if name.trim().is_empty() {
                jp::get_str(d, "/id")
            } else {
                name
            }
        })
    };
    let unparsable = Memo::new(move |_| {
        ed.loaded
            .with(|l| l.as_ref().is_some_and(|l| l.saved.is_null()))
    });
    let revision = Memo::new(move |_| ed.loaded.with(|l| l.as_ref().map(|l| l.revision.clone())));
    // A file that is not JSON can only be shown (and repaired) as text.
    let shown_tab = move || {
        if unparsable.get() {
            Tab::Json
        } else {
            ed.tab.get()
        }
    };

    let export_href = move || format!("/api/stacks/{}/export", seg(&selector()));
    let export_name = move || {
        format!(
            "{}.json",
            ed.loaded
                .with(|l| l.as_ref().map(|l| l.id.clone()).unwrap_or_default())
        )
    };
    let more_open = RwSignal::new(false);
    more_menu_closes(more_open, ed.tab);
    let delete = move |_| {
        more_open.set(false);
        let Some(l) = ed.loaded.get_untracked() else {
            return;
        };
        app.dialog.set(Some(Dialog::Confirm {
            title: format!("Delete {}?", l.id),
            body: format!("This deletes {} from disk. It cannot be undone.", l.path),
            confirm: "Delete".into(),
            danger: true,
            // This handler runs under the menu's owner, which closing the menu disposes; the
            // callback must live until the dialog answers.
            on_confirm: std::sync::Arc::new(move || delete_stack(app, l.clone())),
        }));
    };

    view! {
        <div class="editor">
            <div class="editor-head">
                <div class="title-line">
                    <h2 class="stack-title">{title}</h2>
                    <code class="selector">{selector}</code>
                    <Show when=is_active><span class="badge active">"active"</span></Show>
                    <Show when=move || ed.dirty.get()><span class="badge dirty">"unsaved"</span></Show>
                </div>
                <div class="actions" role="toolbar" aria-label="Preset actions">
                    <button class="primary save" disabled=move || !ed.can_save()
                        title="Save (Ctrl+S)" on:click=move |_| state::save_stack(app, None)>"Save"</button>
                    <button class="undo icon" aria-label="Undo" title="Undo (Ctrl+Z)" disabled=move || !ed.undo.can_undo()
                        on:click=move |_| { ed.undo.undo(ed.draft); }>"↶"</button>
                    <button class="redo icon" aria-label="Redo" title="Redo (Ctrl+Shift+Z)" disabled=move || !ed.undo.can_redo()
                        on:click=move |_| { ed.undo.redo(ed.draft); }>"↷"</button>
                    <button class="validate" on:click=move |_| state::validate_stack(app) disabled=move || unparsable.get()>"Validate"</button>
                    <button class="preview-toggle" aria-pressed=move || dock.open.get().to_string()
                        on:click=move |_| dock.toggle()>"Preview"</button>
                    {move || if is_active() {
                        view! {
                            <button class="deactivate" title="Pi runs without a Preset after this"
                                on:click=move |_| state::deactivate(app)>"Deactivate"</button>
                        }.into_any()
                    } else {
                        view! {
                            <button class="activate" disabled=move || { ed.errors.get() > 0 || !app.live_host.get() }
                                aria-describedby="activate-note"
                                title=move || if app.live_host.get() { "Make this the live Pi session's Preset" } else { state::NO_LIVE_SESSION }
                                on:click=move |_| state::activate(app, selector())>"Activate"</button>
                        }.into_any()
                    }}
                    <div class="more">
                        <button class="more-toggle" aria-haspopup="menu" aria-expanded=move || more_open.get().to_string()
                            on:click=move |_| more_open.update(|o| *o = !*o)>"More ▾"</button>
                        <Show when=move || more_open.get()>
                            <div class="menu" role="menu" on:click=move |_| more_open.set(false)
                                on:keydown=move |e| crate::widgets::menu_keys(&e, ".editor .more .menu [role=menuitem]")>
                                <button role="menuitem" class="fork" on:click=move |_| app.dialog.set(Some(Dialog::Fork))>"Fork…"</button>
                                <button role="menuitem" class="import" on:click=move |_| app.dialog.set(Some(Dialog::Import))>"Import…"</button>
                                <a role="menuitem" class="export" href=export_href download=export_name>"Export JSON"</a>
                                <button role="menuitem" class="delete danger" on:click=delete>"Delete…"</button>
                            </div>
                        </Show>
                    </div>
                </div>
            </div>
            // Why Activate is off, in words (a disabled button's tooltip is out of reach for
            // keyboard and touch users); Apply on Profiles says the same.
            {move || (!app.live_host.get() && !is_active()).then(|| view! {
                <p class="help activate-note" id="activate-note">"Activate needs a live Pi session: start Pi in this project with the pi-forge extension (pi-forge pi install)."</p>
            })}
            {move || app.live_error.get().map(|text| view! {
                <div class="banner error live-error" role="alert">
                    <span>{text}</span>
                    <button class="dismiss" on:click=move |_| app.live_error.set(None)>"Dismiss"</button>
                </div>
            })}
            {move || ed.loaded.with(|l| l.as_ref().and_then(|l| l.unreadable.clone())).map(|reason| view! {
                <div class="banner error read-only" role="alert">
                    {format!("Read-only: {reason}. pi-forge cannot save or delete this file.")}
                </div>
            })}
            <DiskBanner/>
            <crate::recovery::RestoredBanner/>
            <ConflictView/>
            {move || unparsable.get().then(|| view! {
                <div class="banner error" role="alert">
                    "This file is not valid JSON. Open the JSON tab to repair it."
                </div>
            })}
            <nav class="tabs" role="tablist" aria-label="Preset sections">
                {[(Tab::Items, "Items"), (Tab::Stack, "Stack"), (Tab::Regex, "Regex"), (Tab::Policy, "Policy"), (Tab::Capabilities, "Capabilities"), (Tab::Json, "JSON")]
                    .into_iter()
                    .map(|(tab, label)| view! {
                        <button role="tab" class="tab" data-tab=label
                            aria-selected=move || (shown_tab() == tab).to_string()
                            on:click=move |_| ed.tab.set(tab)>
                            {label}
                            {move || (tab == Tab::Json && ed.json_pending())
                                .then(|| view! { <span class="tab-mark" title="Edited, not applied">" •"</span> })}
                        </button>
                    })
                    .collect_view()}
            </nav>
            <div class="tab-body">
                {move || {
                    match shown_tab() {
                        Tab::Items => view! { <ItemsTab/> }.into_any(),
                        Tab::Capabilities => crate::split::capabilities_tab(),
                        Tab::Json => {
                            // The JSON text is a copy: a new revision (save, reload) refreshes it.
                            revision.track();
                            crate::split::editor_tab(Tab::Json)
                        }
                        // Loaded on demand (`split`): a first visit shows Items.
                        tab => crate::split::editor_tab(tab),
                    }
                }}
            </div>
            <DiagnosticsPanel/>
            {move || loaded().map(|l| view! { <p class="file-path" title="File">{l.path}</p> })}
        </div>
    }
}

/// The More menu closes on Escape (focus back on its button), on a click outside it and when
/// the tab changes; opening it focuses its first entry.
fn more_menu_closes(open: RwSignal<bool>, tab: RwSignal<Tab>) {
    // `try_`: the listeners are removed when the editor goes, but an event already queued may
    // still arrive after its signals are gone.
    let close = move || {
        if open.try_get_untracked() == Some(true) {
            open.set(false);
        }
    };
    let escape = window_event_listener(leptos::ev::keydown, move |e| {
        if e.key() == "Escape" && open.try_get_untracked() == Some(true) {
            close();
            crate::dom::focus_later(".editor .more-toggle".into());
        }
    });
    let outside = window_event_listener(leptos::ev::click, move |e| {
        use wasm_bindgen::JsCast;
        let inside = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .and_then(|el| el.closest(".editor .more").ok().flatten())
            .is_some();
        if !inside {
            close();
        }
    });
    on_cleanup(move || {
        escape.remove();
        outside.remove();
    });
    Effect::new(move |prev: Option<Tab>| {
        let now = tab.get();
        if prev.is_some_and(|p| p != now) {
            close();
        }
        now
    });
    Effect::new(move |_| {
        if open.get() {
            crate::dom::focus_later(".editor .more .menu [role=menuitem]".into());
        }
    });
}

fn delete_stack(app: state::App, l: state::Loaded) {
    spawn_local(async move {
        let path = format!("/api/stacks/{}", seg(&l.selector));
        let answer = api::call_as::<forge_core::api::StackDeleted>(
            api::Method::Delete,
            &path,
            None,
            Some(&l.revision),
        );
        match answer.await {
            Ok(_) => {
                // Another Preset may have been opened meanwhile; it stays open.
                let still_open = app
                    .editor
                    .loaded
                    .with_untracked(|o| o.as_ref().is_some_and(|o| o.selector == l.selector));
                if still_open {
                    state::close_stack(app);
                }
                app.say(format!("Deleted {}", l.id), Tone::Ok);
                state::refresh_stacks(app);
            }
            Err(e) if e.is_stale() => app.say(
                format!(
                    "Not deleted: {} changed on disk. Review the new version first.",
                    l.id
                ),
                Tone::Error,
            ),
            Err(e) => app.fail(&e),
        }
    });
}

/// "Changed on disk" while the draft has unsaved edits: the draft stays until the user picks.
#[component]
fn DiskBanner() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    move || {
        ed.disk_change.get().map(|rev| {
            let deleted = rev == "deleted";
            view! {
                <div class="banner warn disk-changed" role="alert">
                    <span>{if deleted {
                        "This Preset was deleted on disk. Your unsaved changes are still here."
                    } else {
                        "This Preset changed on disk. Your unsaved changes are still here."
                    }}</span>
                    <button class="reload-disk" on:click=move |_| {
                        if let Some(l) = ed.loaded.get_untracked() {
                            if deleted {
                                state::close_stack(app);
                                state::refresh_stacks(app);
                            } else {
                                state::load_stack(app, l.selector, true);
                            }
                        }
                    }>{if deleted { "Close" } else { "Reload from disk" }}</button>
                    <button class="keep-mine" on:click=move |_| {
                        if deleted {
                            ed.file_gone.set(true);
                        }
                        ed.disk_change.set(None);
                    }>"Keep mine"</button>
                </div>
            }
            .into_any()
        }).or_else(|| ed.file_gone.get().then(|| view! {
            <div class="banner info file-gone" role="status">
                "This Preset's file was deleted on disk. Save writes your draft to it again; Fork saves the draft under another ID."
            </div>
        }.into_any()))
    }
}

/// A save refused with 409: disk and draft side by side, and the three-way merge of the two
/// over the revision the draft started from (forge-core `merge3`). Where both changed the same
/// place, the person picks per place: theirs (the disk's) or mine (the default).
///
/// Only a 409 shows it, so its body (and the diff and merge code) is loaded on demand
/// ([`crate::split::conflict`]).
#[component]
fn ConflictView() -> impl IntoView {
    let ed = app().editor;
    // The places where the person takes the disk's value, for the conflict of this revision.
    let take: RwSignal<(String, Vec<String>)> = RwSignal::new((String::new(), Vec::new()));
    move || ed.conflict.get().map(|c| crate::split::conflict(c, take))
}

/// Diagnostics of the draft (forge-core in the browser). Opens when there is something to
/// read and closes when the list empties, until the user toggles it: then it stays as set.
#[component]
fn DiagnosticsPanel() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let user_open: RwSignal<Option<bool>> = RwSignal::new(None);
    let buffers = move || {
        ed.buffers
            .with(|b| b.values().map(|(_, e)| e.clone()).collect::<Vec<_>>())
    };
    let counts = move || {
        let (mut e, mut w, mut i) = (0, 0, 0);
        ed.diagnostics.with(|ds| {
            for d in ds {
                match d.level {
                    Level::Error => e += 1,
                    Level::Warning => w += 1,
                    Level::Info => i += 1,
                }
            }
        });
        (e + ed.buffers.with(|b| b.len()), w, i)
    };
    let has_problems = move || {
        let (e, w, _) = counts();
        e + w > 0
    };
    let open = move || user_open.get().unwrap_or_else(has_problems);
    let summary = move || {
        let (e, w, i) = counts();
        if e + w + i == 0 {
            "No problems".to_string()
        } else {
            format!(
                "{e} error{} · {w} warning{} · {i} info",
                plural(e),
                plural(w)
            )
        }
    };
    let jump = move |item_id: Option<String>| {
        let Some(id) = item_id else { return };
        let index = ed.draft.with_untracked(|d| {
            d.get("items").and_then(Value::as_array).and_then(|items| {
                items
                    .iter()
                    .position(|it| it.get("id").and_then(Value::as_str) == Some(id.as_str()))
            })
        });
        if let Some(i) = index {
            ed.tab.set(Tab::Items);
            ed.item.set(Some(i));
        }
    };
    view! {
        <section class="diagnostics" class:open=open class:has-errors=move || { counts().0 > 0 }>
            <button class="diagnostics-toggle" aria-expanded=move || open().to_string()
                on:click=move |_| user_open.set(Some(!open()))>
                <span>"Diagnostics"</span>
                <span class="summary">{summary}</span>
            </button>
            <Show when=open>
                <ul class="diagnostic-list">
                    {move || buffers().into_iter().map(|e| view! {
                        <li class="diagnostic error"><span class="level">"error"</span><span class="message">{e}</span></li>
                    }).collect_view()}
                    {move || ed.diagnostics.get().into_iter().map(|d| {
                        let item = d.item_id.clone();
                        let has_item = item.is_some();
                        view! {
                            <li class=format!("diagnostic {}", level_class(d.level))>
                                <span class="level">{level_class(d.level)}</span>
                                <span class="message">{d.message.clone()}</span>
                                {has_item.then(|| {
                                    let label = item.clone().unwrap_or_default();
                                    view! { <button class="link jump" on:click=move |_| jump(item.clone())>{label}</button> }
                                })}
                            </li>
                        }
                    }).collect_view()}
                </ul>
            </Show>
        </section>
    }
}
