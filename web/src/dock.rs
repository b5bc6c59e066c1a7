//! The preview dock's state (open, tab, height) and the line-diff view that the dock, the
//! conflict view and the Payloads surface share.

use forge_core::api::Preview;
use forge_core::diff::text::{hunks, split_rows, DiffLine, LineTag};
use leptos::prelude::*;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum DockTab {
    Compiled,
    Diff,
    /// The newest captured request against the one before it (see `payloads.rs`).
    Run,
}

#[derive(Clone, Copy)]
pub struct Dock {
    pub open: RwSignal<bool>,
    pub focus: RwSignal<bool>,
    pub tab: RwSignal<DockTab>,
    pub split: RwSignal<bool>,
    pub changes_only: RwSignal<bool>,
    /// The newest draft preview shown, and the selector it belongs to.
    pub draft: RwSignal<Option<(String, Preview)>>,
    /// The saved version's preview, keyed by `selector@revision`.
    pub saved: RwSignal<Option<(String, Preview)>>,
    pub loading: RwSignal<bool>,
    pub error: RwSignal<Option<String>>,
    pub seq: StoredValue<u64>,
}

impl Dock {
    pub fn new() -> Dock {
        Dock {
            open: RwSignal::new(false),
            focus: RwSignal::new(false),
            tab: RwSignal::new(DockTab::Compiled),
            split: RwSignal::new(false),
            changes_only: RwSignal::new(true),
            draft: RwSignal::new(None),
            saved: RwSignal::new(None),
            loading: RwSignal::new(false),
            error: RwSignal::new(None),
            seq: StoredValue::new(0),
        }
    }

    pub fn toggle(&self) {
        let open = !self.open.get_untracked();
        self.open.set(open);
        if !open {
            self.focus.set(false);
        }
    }
}

fn line_cells(line: &DiffLine) -> impl IntoView {
    line.spans
        .iter()
        .map(|sp| {
            if sp.changed {
                view! { <mark>{sp.text.clone()}</mark> }.into_any()
            } else {
                view! { <span>{sp.text.clone()}</span> }.into_any()
            }
        })
        .collect_view()
}

fn tag_class(tag: LineTag) -> &'static str {
    match tag {
        LineTag::Same => "same",
        LineTag::Removed => "del",
        LineTag::Added => "add",
    }
}

fn sign(tag: LineTag) -> &'static str {
    match tag {
        LineTag::Same => " ",
        LineTag::Removed => "−",
        LineTag::Added => "+",
    }
}

/// Unified/Split and "Changes only": the line-diff layout every diff view shares (kept on the
/// dock, so all diff views follow one choice).
pub fn layout_controls(dock: Dock) -> impl IntoView {
    view! {
                <div class="seg" role="group" aria-label="Diff layout">
                    <button class="seg-button unified" class:current=move || !dock.split.get() on:click=move |_| dock.split.set(false)>"Unified"</button>
                    <button class="seg-button split" class:current=move || dock.split.get() on:click=move |_| dock.split.set(true)>"Split"</button>
                </div>
                <label class="check"><input type="checkbox" name="changes-only" prop:checked=move || dock.changes_only.get()
                    on:change=move |e| dock.changes_only.set(event_target_checked(&e))/>"Changes only"</label>
    }
}

/// A line diff as a table: unified (old no, new no, sign, text) or split (old | new).
/// `changes_only` keeps 2 lines of context around changes.
pub fn diff_view(lines: &[DiffLine], split: bool, changes_only: bool) -> impl IntoView {
    let groups: Vec<Vec<DiffLine>> = if changes_only {
        hunks(lines, 2).into_iter().map(|h| h.lines).collect()
    } else {
        vec![lines.to_vec()]
    };
    let no = |n: Option<usize>| n.map(|n| n.to_string()).unwrap_or_default();
    let body = groups
        .into_iter()
        .enumerate()
        .map(|(gi, group)| {
            let sep = (gi > 0).then(|| view! { <tr class="hunk-sep"><td colspan="4">"⋯"</td></tr> });
            let rows = if split {
                split_rows(&group)
                    .into_iter()
                    .map(|row| {
                        let left = row.left.map(|l| (no(l.old_no), tag_class(l.tag), l));
                        let right = row.right.map(|r| (no(r.new_no), tag_class(r.tag), r));
                        view! {
                            <tr class="split-row">
                                {match left {
                                    Some((n, c, l)) => view! { <td class="ln">{n}</td><td class=format!("code {c}")>{line_cells(&l)}</td> }.into_any(),
                                    None => view! { <td class="ln"></td><td class="code empty"></td> }.into_any(),
                                }}
                                {match right {
                                    Some((n, c, r)) => view! { <td class="ln">{n}</td><td class=format!("code {c}")>{line_cells(&r)}</td> }.into_any(),
                                    None => view! { <td class="ln"></td><td class="code empty"></td> }.into_any(),
                                }}
                            </tr>
                        }
                    })
                    .collect_view()
                    .into_any()
            } else {
                group
                    .into_iter()
                    .map(|l| {
                        let c = tag_class(l.tag);
                        view! {
                            <tr class=format!("line {c}")>
                                <td class="ln">{no(l.old_no)}</td>
                                <td class="ln">{no(l.new_no)}</td>
                                <td class="sign">{sign(l.tag)}</td>
                                <td class="code">{line_cells(&l)}</td>
                            </tr>
                        }
                    })
                    .collect_view()
                    .into_any()
            };
            view! { {sep} {rows} }
        })
        .collect_view();
    view! {
        <table class="diff" class:split=split>
            // The columns' widths: a fixed table takes them from its first row otherwise, and
            // the split view's heading row (two cells spanning two columns each) gave the
            // line-number gutters half of each side.
            {if split {
                view! { <colgroup><col class="ln"/><col class="code"/><col class="ln"/><col class="code"/></colgroup> }.into_any()
            } else {
                view! { <colgroup><col class="ln"/><col class="ln"/><col class="sign"/><col class="code"/></colgroup> }.into_any()
            }}
            {split.then(|| view! { <thead><tr><th colspan="2">"Saved"</th><th colspan="2">"Draft"</th></tr></thead> })}
            <tbody>{body}</tbody>
        </table>
    }
}
