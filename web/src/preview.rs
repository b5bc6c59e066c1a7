//! The preview dock: the compiled prompt of the unsaved draft, refreshed as you type, and the
//! draft diff against the saved version (forge-core's section diff and line diff, run in the
//! browser).
//!
//! Ordering: every draft request carries a sequence number and only the newest one's answer is
//! shown; an older answer that arrives late is dropped.

use forge_core::diff::text::diff_lines;
use forge_core::diff::{diff_sections, BlockStatus, Section};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::json;
use std::time::Duration;

use forge_core::api::{Preview, StackPreview};

use crate::api::{self, seg};
use crate::dock::{diff_view, layout_controls, Dock, DockTab};
use crate::state::app;

fn sections(preview: &Preview) -> Vec<Section> {
    std::iter::once(&preview.system)
        .chain(&preview.messages)
        .cloned()
        .collect()
}

#[component]
pub fn PreviewDock() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let dock = expect_context::<Dock>();

    // Another Preset opened: its previous preview (perhaps of a discarded draft) must not
    // show while the new one compiles.
    Effect::new(move |previous: Option<Option<String>>| {
        let current = ed.loaded.with(|l| l.as_ref().map(|l| l.selector.clone()));
        if previous.is_some_and(|p| p != current) {
            dock.draft.set(None);
        }
        current
    });
    // Draft previews: debounce, then request; only the newest answer is kept.
    Effect::new(move |_| {
        if !dock.open.get() {
            return;
        }
        let Some(sel) = ed.loaded.with(|l| l.as_ref().map(|l| l.selector.clone())) else {
            return;
        };
        let draft = ed.draft.get();
        if draft.is_null() {
            return;
        }
        let my = dock.seq.get_value() + 1;
        dock.seq.set_value(my);
        dock.loading.set(true);
        set_timeout(
            move || {
                if dock.seq.get_value() != my {
                    return;
                }
                spawn_local(async move {
                    let path = format!("/api/stacks/{}/preview", seg(&sel));
                    let result =
                        api::post_as::<StackPreview>(&path, &json!({ "stack": draft })).await;
                    if dock.seq.get_value() != my {
                        return; // a newer draft was sent meanwhile
                    }
                    dock.loading.set(false);
                    match result {
                        Ok(v) => {
                            dock.error.set(None);
                            dock.draft.set(Some((sel, v.preview)));
                        }
                        Err(e) => dock.error.set(Some(e.message)),
                    }
                });
            },
            Duration::from_millis(150),
        );
    });
    // The saved side, once per revision.
    Effect::new(move |_| {
        if !dock.open.get() {
            return;
        }
        let Some((sel, rev)) = ed
            .loaded
            .with(|l| l.as_ref().map(|l| (l.selector.clone(), l.revision.clone())))
        else {
            return;
        };
        let key = format!("{sel}@{rev}");
        if dock
            .saved
            .with_untracked(|s| s.as_ref().is_some_and(|(k, _)| *k == key))
        {
            return;
        }
        spawn_local(async move {
            let path = format!("/api/stacks/{}/preview", seg(&sel));
            if let Ok(v) = api::post_as::<StackPreview>(&path, &json!({})).await {
                let current = ed.loaded.with_untracked(|l| {
                    l.as_ref().map(|l| format!("{}@{}", l.selector, l.revision))
                });
                if current.as_deref() == Some(key.as_str()) {
                    dock.saved.set(Some((key, v.preview)));
                }
            }
        });
    });

    let current_sel = move || ed.loaded.with(|l| l.as_ref().map(|l| l.selector.clone()));
    let preview = move || {
        let sel = current_sel()?;
        dock.draft.with(|d| {
            d.as_ref()
                .filter(|(s, _)| *s == sel)
                .map(|(_, v)| v.clone())
        })
    };

    view! {
        <Show when=move || dock.open.get() && current_sel().is_some()>
            <aside class="dock" aria-label="Preview">
                <div class="dock-head">
                    <div class="seg" role="tablist">
                        <button role="tab" class="seg-button dock-compiled" aria-selected=move || (dock.tab.get() == DockTab::Compiled).to_string()
                            class:current=move || dock.tab.get() == DockTab::Compiled
                            on:click=move |_| dock.tab.set(DockTab::Compiled)>"Compiled"</button>
                        <button role="tab" class="seg-button dock-diff" aria-selected=move || (dock.tab.get() == DockTab::Diff).to_string()
                            class:current=move || dock.tab.get() == DockTab::Diff
                            on:click=move |_| dock.tab.set(DockTab::Diff)>"Draft diff"</button>
                        <button role="tab" class="seg-button dock-run" aria-selected=move || (dock.tab.get() == DockTab::Run).to_string()
                            class:current=move || dock.tab.get() == DockTab::Run
                            on:click=move |_| dock.tab.set(DockTab::Run)>"Run diff"</button>
                    </div>
                    <span class="loading" aria-live="polite">{move || dock.loading.get().then_some("Loading preview…")}</span>
                    <span class="spacer"></span>
                    // Focus mode hides the editor and its action bar; Save stays at hand here.
                    <Show when=move || dock.focus.get()>
                        <button class="primary dock-save" title="Save (Ctrl+S)" disabled=move || !ed.can_save()
                            on:click=move |_| crate::state::save_stack(app, None)>"Save"</button>
                    </Show>
                    <button class="focus-toggle" aria-pressed=move || dock.focus.get().to_string()
                        on:click=move |_| dock.focus.update(|f| *f = !*f)>{move || if dock.focus.get() { "Show editor" } else { "Focus" }}</button>
                    <button class="icon dock-close" aria-label="Close preview" on:click=move |_| dock.toggle()>"✕"</button>
                </div>
                {move || dock.error.get().map(|e| view! { <p class="banner error">{e}</p> })}
                <div class="dock-body">
                    {move || match dock.tab.get() {
                        DockTab::Compiled => match preview() {
                            Some(p) => compiled_view(&p).into_any(),
                            None => view! { <p class="muted">"Compiling…"</p> }.into_any(),
                        },
                        DockTab::Diff => view! { <DraftDiff/> }.into_any(),
                        DockTab::Run => view! {
                            <div class="row">
                                <button class="link open-payloads" on:click=move |_| crate::payloads::open_run_diff(app)>"Open in Payloads"</button>
                            </div>
                            <crate::payloads::RunDiffPanel state=crate::payloads::payloads().dock_diff/>
                        }.into_any(),
                    }}
                </div>
            </aside>
        </Show>
    }
}

fn compiled_view(p: &Preview) -> impl IntoView {
    let secs = sections(p);
    let total = p.total_chars;
    let tokens = p.approx_tokens;
    view! {
        <div class="compiled">
            <p class="muted totals">{format!("{total} chars · ~{tokens} tokens (chars/4)")}</p>
            {secs.into_iter().map(|sec| view! {
                <section class="section" data-key=sec.diff_key.clone().unwrap_or_else(|| sec.id.clone())>
                    <header>
                        <span class="section-title">{sec.title.clone()}</span>
                        {sec.role.clone().map(|r| view! { <span class="badge role">{r}</span> })}
                        <span class="muted">{format!("{} chars · ~{} tokens", sec.chars, sec.approx_tokens)}</span>
                    </header>
                    <pre class="section-content">{sec.content.clone()}</pre>
                </section>
            }).collect_view()}
            {
                let diags = p.diagnostics.clone();
                (!diags.is_empty()).then(|| view! {
                    <ul class="preview-diagnostics">
                        {diags.into_iter().map(|d| view! { <li class=format!("diagnostic {}", d.level.as_str())>{d.message}</li> }).collect_view()}
                    </ul>
                })
            }
        </div>
    }
}

#[component]
fn DraftDiff() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let dock = expect_context::<Dock>();
    let body = move || {
        let sel = ed
            .loaded
            .with(|l| l.as_ref().map(|l| format!("{}@{}", l.selector, l.revision)))?;
        let before = dock.saved.with(|s| {
            s.as_ref()
                .filter(|(k, _)| *k == sel)
                .map(|(_, v)| sections(v))
        })?;
        let selector = ed.loaded.with(|l| l.as_ref().map(|l| l.selector.clone()))?;
        let after = dock.draft.with(|d| {
            d.as_ref()
                .filter(|(s, _)| *s == selector)
                .map(|(_, v)| sections(v))
        })?;
        Some(diff_sections(&before, &after))
    };
    view! {
        <div class="draft-diff">
            <div class="row diff-options">
                {layout_controls(dock)}
            </div>
            {move || match body() {
                None => view! { <p class="muted">"Comparing with the saved version…"</p> }.into_any(),
                Some(diff) if diff.summary.changed_blocks == 0 => view! {
                    <p class="muted no-changes">"No changes: the draft compiles to the same prompt as the saved version."</p>
                }.into_any(),
                Some(diff) => {
                    let split = dock.split.get();
                    let changes_only = dock.changes_only.get();
                    let delta = diff.delta_tokens;
                    view! {
                        <p class="muted diff-summary">{format!(
                            "{} modified · {} added · {} removed · token estimate {}{}",
                            diff.summary.modified, diff.summary.added, diff.summary.removed,
                            if delta >= 0 { "+" } else { "" }, delta
                        )}</p>
                        {diff.blocks.into_iter().filter(|b| b.status != BlockStatus::Same).map(|b| {
                            let status = b.status.as_str();
                            let old = b.before.as_ref().map(|x| x.text.clone()).unwrap_or_default();
                            let new = b.after.as_ref().map(|x| x.text.clone()).unwrap_or_default();
                            let title = b.after.as_ref().or(b.before.as_ref()).map(|x| x.key.clone()).unwrap_or_default();
                            let role_change = match (&b.before, &b.after) {
                                (Some(x), Some(y)) if x.role != y.role => Some(format!("Role changed: {} → {}", x.role, y.role)),
                                _ => None,
                            };
                            let lines = diff_lines(&old, &new);
                            view! {
                                <section class=format!("diff-block {status}") data-status=status>
                                    <header>
                                        <span class=format!("badge {status}")>{status}</span>
                                        <code class="block-key">{title}</code>
                                        <span class="muted">{format!("~{}{} tokens", if b.token_delta >= 0 { "+" } else { "" }, b.token_delta)}</span>
                                    </header>
                                    {role_change.map(|r| view! { <p class="role-change">{r}</p> })}
                                    {diff_view(&lines, split, changes_only)}
                                </section>
                            }
                        }).collect_view()}
                    }.into_any()
                }
            }}
        </div>
    }
}
