//! The body of the save-conflict view: the person's draft beside the file on disk, with the
//! places to keep from disk (loaded on demand, see `split`; the frame is in `editor`).

use leptos::prelude::*;
use serde_json::Value;

use crate::dock::diff_view;
use crate::jp;
use crate::state::{self, app, Tone};

/// The conflict view's body for conflict `c`; `take` holds the places where the person keeps
/// the disk's value.
pub fn conflict_body(c: state::Conflict, take: RwSignal<(String, Vec<String>)>) -> AnyView {
    let app = app();
    let ed = app.editor;
    let mine_value = ed.draft.get_untracked();
    let mine = jp::pretty(&mine_value);
    let disk = if c.current.is_null() {
        "(the file on disk is not valid JSON)".to_string()
    } else {
        jp::pretty(&c.current)
    };
    let lines = forge_core::diff::text::diff_lines(&disk, &mine);
    let rev = c.revision.clone();
    if take.with_untracked(|(r, _)| *r != rev) {
        take.set((rev.clone(), Vec::new()));
    }
    // The merge needs the version the draft started from and a readable disk version.
    let base = ed
        .loaded
        .with_untracked(|l| l.as_ref().map(|l| l.saved.clone()))
        .filter(|b| !b.is_null());
    let merged = base
        .clone()
        .filter(|_| !c.current.is_null())
        .map(|base| forge_core::merge::merge3(&base, &c.current, &mine_value));
    let merge_part = merged.map(|m| {
        let clean = m.is_clean();
        let conflicts: Vec<(String, String, String)> = m
            .conflicts
            .iter()
            .map(|k| {
                let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(removed)".to_string(), forge_core::json::to_compact);
                (k.path.clone(), show(&k.theirs), show(&k.mine))
            })
            .collect();
        let base = base.clone().unwrap_or_default();
        let current = c.current.clone();
        let rev = c.revision.clone();
        let mine_value = mine_value.clone();
        let apply = move |_| {
            let chosen = take.with_untracked(|(_, t)| t.clone());
            let value = forge_core::merge::merge3_resolved(&base, &current, &mine_value, &chosen).value;
            ed.draft.set(value);
            ed.loaded.update(|l| {
                if let Some(l) = l {
                    l.revision = rev.clone();
                    l.saved = current.clone();
                }
            });
            ed.conflict.set(None);
            app.say("Merged with the version on disk. Review, then save.", Tone::Ok);
        };
        let label = move || {
            if clean {
                "Merge both"
            } else if take.with(|(_, t)| t.is_empty()) {
                "Merge, keeping mine where both changed"
            } else {
                "Merge with these choices"
            }
        };
        view! {
            <div class="merge" class:clean=clean>
                {if clean {
                    view! { <p class="merge-clean">"Your changes and the changes on disk touch different places: they merge without a conflict."</p> }.into_any()
                } else {
                    view! {
                        <p class="merge-conflicted">"Both versions changed these places; choose for each which one to keep (yours unless you pick the disk's):"</p>
                        <ul class="merge-conflicts">
                            {conflicts.into_iter().enumerate().map(|(i, (path, theirs, mine))| {
                                let name = format!("merge-choice-{i}");
                                let p_theirs = path.clone();
                                let p_mine = path.clone();
                                let p_check = path.clone();
                                let takes_theirs = move || take.with(|(_, t)| t.contains(&p_check));
                                let takes_mine = takes_theirs.clone();
                                view! {
                                    <li data-path=path.clone()>
                                        <span class="merge-conflict-text"><code>{path.clone()}</code>" — on disk: "<code>{theirs}</code>" · yours: "<code>{mine}</code></span>
                                        <span class="merge-choice" role="radiogroup" aria-label=format!("Keep which value of {path}")>
                                            <label><input type="radio" class="merge-take-mine" name=name.clone()
                                                prop:checked=move || !takes_mine()
                                                on:change=move |_| take.update(|(_, t)| t.retain(|x| *x != p_mine))/>"Yours"</label>
                                            <label><input type="radio" class="merge-take-theirs" name=name
                                                prop:checked=takes_theirs
                                                on:change=move |_| take.update(|(_, t)| if !t.contains(&p_theirs) { t.push(p_theirs.clone()) })/>"The disk's"</label>
                                        </span>
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }}
                <button class="primary merge-both" on:click=apply>{label}</button>
            </div>
        }
    });
    view! {
        <section class="conflict" role="alert" aria-label="Save conflict">
            <h3>"The file changed on disk since you opened it"</h3>
            <p>"Nothing was saved. Compare the version on disk (−) with yours (+), then choose."</p>
            {merge_part}
            <div class="conflict-diff">{diff_view(&lines, false, true)}</div>
            <div class="row">
                <button class="overwrite" on:click=move |_| state::save_stack(app, Some(rev.clone()))>"Save mine over it"</button>
                <button class="take-disk" on:click=move |_| {
                    if let Some(l) = ed.loaded.get_untracked() {
                        state::load_stack(app, l.selector, true);
                    }
                }>"Use the disk version"</button>
                <button class="cancel" on:click=move |_| ed.conflict.set(None)>"Keep editing"</button>
            </div>
        </section>
    }
    .into_any()
}
