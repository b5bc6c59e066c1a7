//! The Policy tab: which tools and skills the model sees. Patterns may use `*` wildcards;
//! the pickers list the runtime's tools grouped by source, and every pattern shows what it
//! matches (a pattern matching nothing is flagged).

use forge_core::stack::pattern_matches;
use leptos::prelude::*;
use serde_json::{json, Value};

use crate::bindings::{read_only, PolicyToolEffect};
use crate::jp;
use crate::state::{app, StackEditor};
use crate::toolpicker::ToolList;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    None,
    Allow,
    Deny,
}

fn mode(ed: StackEditor, member: &str) -> Mode {
    ed.draft.with(|d| {
        if jp::get(d, &format!("/{member}/allow")).is_some() {
            Mode::Allow
        } else if jp::get(d, &format!("/{member}/deny")).is_some() {
            Mode::Deny
        } else {
            Mode::None
        }
    })
}

fn patterns(ed: StackEditor, member: &str) -> Vec<String> {
    ed.draft.with(|d| {
        ["allow", "deny"]
            .iter()
            .find_map(|k| jp::get(d, &format!("/{member}/{k}")).and_then(Value::as_array))
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    })
}

fn set_mode(ed: StackEditor, member: &str, to: Mode) {
    let list = patterns(ed, member);
    ed.draft.update(|d| {
        jp::set(d, &format!("/{member}/allow"), None);
        jp::set(d, &format!("/{member}/deny"), None);
        match to {
            Mode::Allow => jp::set(d, &format!("/{member}/allow"), Some(json!(list))),
            Mode::Deny => jp::set(d, &format!("/{member}/deny"), Some(json!(list))),
            Mode::None => {
                // Drop an emptied policy object; keep one that still holds other members.
                if jp::get(d, &format!("/{member}"))
                    .and_then(Value::as_object)
                    .is_some_and(|o| o.is_empty())
                {
                    jp::set(d, &format!("/{member}"), None);
                }
            }
        }
    });
}

fn set_patterns(ed: StackEditor, member: &str, list: Vec<String>) {
    let key = match mode(ed, member) {
        Mode::Deny => "deny",
        _ => "allow",
    };
    ed.set(&format!("/{member}/{key}"), Some(json!(list)));
}

#[component]
pub fn PolicyTab() -> impl IntoView {
    view! {
        <div class="policy-tab">
            <PolicyCard member="tools" title="Tools" noun="tool"/>
            <DefaultTools/>
            <PolicyToolEffect/>
            <PolicyCard member="skills" title="Skills" noun="skill"/>
        </div>
    }
}

#[component]
fn PolicyCard(member: &'static str, title: &'static str, noun: &'static str) -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let current = move || mode(ed, member);
    let list = move || patterns(ed, member);
    let available = move || {
        app.resources().with(|r| {
            if member == "tools" {
                crate::toolpicker::tool_rows(r)
            } else {
                // A skill has no active flag: the policy decides.
                r.skills
                    .iter()
                    .map(|s| {
                        (
                            s.name.clone(),
                            s.source.clone(),
                            s.description.clone(),
                            false,
                        )
                    })
                    .collect()
            }
        })
    };
    let input = RwSignal::new(String::new());
    let input_error: RwSignal<Option<String>> = RwSignal::new(None);
    let add = move |name: String| {
        let name = name.trim().to_string();
        if name.is_empty() {
            return;
        }
        if name.chars().any(char::is_whitespace) {
            input_error.set(Some(format!("A {noun} name or pattern has no spaces.")));
            return;
        }
        let mut l = list();
        if l.contains(&name) {
            input_error.set(Some(format!("{name} is already listed.")));
            return;
        }
        if current() == Mode::None {
            set_mode(ed, member, Mode::Allow);
        }
        l.push(name);
        set_patterns(ed, member, l);
        input.set(String::new());
        input_error.set(None);
    };
    let mode_button = move |m: Mode, label: &'static str, class: &'static str| {
        view! {
            <button class=format!("seg-button {class}") class:current=move || current() == m
                aria-pressed=move || (current() == m).to_string()
                on:click=move |_| set_mode(ed, member, m)>{label}</button>
        }
    };
    view! {
        <section class="card policy" data-policy=member>
            <h3>{title}</h3>
            <div class="seg" role="group" aria-label=format!("{title} filter")>
                {mode_button(Mode::None, "All", "mode-none")}
                {mode_button(Mode::Allow, "Allow only", "mode-allow")}
                {mode_button(Mode::Deny, "Deny", "mode-deny")}
            </div>
            // Both lists is an error the mode buttons cannot show: say what is hidden.
            {move || {
                let hidden: Option<Vec<String>> = ed.draft.with(|d| {
                    jp::get(d, &format!("/{member}/allow"))?;
                    let deny = jp::get(d, &format!("/{member}/deny"))?;
                    Some(match deny.as_array() {
                        Some(a) => a.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect(),
                        None => vec![deny.to_string()],
                    })
                });
                hidden.map(|hidden| view! {
                    <p class="banner warn both-lists" role="note">{format!(
                        "This file has an allow list and a deny list, which is an error. The allow list is shown; the deny list ({}) is dropped when you pick a mode.",
                        if hidden.is_empty() { "empty".to_string() } else { hidden.join(", ") }
                    )}</p>
                })
            }}
            {(member == "skills").then(|| view! {
                <p class="help disclaimer">"Skill filtering only decides which skills are listed in the prompt. It is not a sandbox: the model can still read a skill's file if it knows where it is."</p>
            })}
            <Show when=move || current() != Mode::None fallback=move || view! {
                <p class="muted">{format!("Every {noun} of the session is available.")}</p>
            }>
                <ul class="chips" aria-label=format!("{title} patterns")>
                    {move || {
                        let names: Vec<String> = available().into_iter().map(|(n, ..)| n).collect();
                        list().into_iter().map(|p| {
                            let hits = names.iter().filter(|n| pattern_matches(&p, n)).count();
                            let remove_p = p.clone();
                            view! {
                                <li class="chip" class:no-match=hits == 0 data-pattern=p.clone()>
                                    <span class="chip-text">{p.clone()}</span>
                                    {if hits == 0 {
                                        view! { <span class="chip-note" title=format!("No {noun} of the current session matches this pattern")>"matches nothing"</span> }.into_any()
                                    } else if p.contains('*') {
                                        view! { <span class="chip-note">{format!("{hits} match{}", if hits == 1 { "" } else { "es" })}</span> }.into_any()
                                    } else {
                                        ().into_any()
                                    }}
                                    <button class="chip-remove" aria-label=format!("Remove {p}")
                                        on:click=move |_| {
                                            let l: Vec<String> = list().into_iter().filter(|x| *x != remove_p).collect();
                                            set_patterns(ed, member, l);
                                        }>"✕"</button>
                                </li>
                            }
                        }).collect_view()
                    }}
                </ul>
            </Show>
            <div class="row add-pattern">
                <input type="text" name=format!("{member}-pattern") placeholder=format!("Add a {noun} name or pattern (e.g. grep*)")
                    aria-label=format!("Add a {noun} name or pattern") autocomplete="off" spellcheck="false"
                    aria-invalid=move || input_error.with(Option::is_some).to_string()
                    prop:value=move || input.get()
                    on:input=move |e| { input.set(event_target_value(&e)); input_error.set(None); }
                    on:keydown=move |e| if e.key() == "Enter" { e.prevent_default(); add(input.get_untracked()); }/>
                <button class="add-pattern-button" aria-label=format!("Add {noun} pattern") on:click=move |_| add(input.get_untracked())>"Add"</button>
            </div>
            {move || input_error.get().map(|e| view! { <p class="field-error" role="alert">{e}</p> })}
            <div class="picker">
                {move || {
                    let items = available();
                    if items.is_empty() {
                        return view! { <p class="muted">{format!("The session reports no {noun}s.")}</p> }.into_any();
                    }
                    let mut sources: Vec<String> = items.iter().map(|i| i.1.clone()).collect();
                    sources.dedup();
                    sources.into_iter().map(|src| {
                        let group: Vec<_> = items.iter().filter(|i| i.1 == src).cloned().collect();
                        let group_label = if src.is_empty() { "other".to_string() } else { src.clone() };
                        view! {
                            <div class="picker-group" role="group" aria-label=format!("{title} from {group_label}")>
                                <span class="label" aria-hidden="true">{group_label.clone()}</span>
                                {group.into_iter().map(|(name, _, desc, active)| {
                                    let n2 = name.clone();
                                    let listed = move || list().iter().any(|p| pattern_matches(p, &n2));
                                    let n3 = name.clone();
                                    let n4 = name.clone();
                                    // Listed by its exact name: a click removes it again. Covered by
                                    // a wildcard only: the chip says so and a click adds the name.
                                    let exact = move || list().contains(&n3);
                                    let exact2 = exact.clone();
                                    let title = {
                                        let mut t = desc.clone();
                                        if !active {
                                            if !t.is_empty() { t.push('\n'); }
                                            t.push_str("Registered, but not active in the session right now.");
                                        }
                                        t
                                    };
                                    view! {
                                        <button class="pick" class:listed=listed class:inactive=!active title=title
                                            aria-pressed=move || exact2().to_string()
                                            data-name=name.clone() on:click=move |_| {
                                                if exact() {
                                                    let l: Vec<String> = list().into_iter().filter(|x| *x != n4).collect();
                                                    set_patterns(ed, member, l);
                                                } else {
                                                    add(n4.clone());
                                                }
                                            }>
                                            {name.clone()}
                                        </button>
                                    }
                                }).collect_view()}
                            </div>
                        }
                    }).collect_view().into_any()
                }}
            </div>
        </section>
    }
}

/// `tools.initial`: the tools a session starts with. Off = the key is absent (the session's
/// active tools, filtered by the ceiling); on = an explicit list picked from the registered tools.
/// The stack codec's diagnostics about it are shown as they are and block saving like any error.
#[component]
fn DefaultTools() -> impl IntoView {
    let app = app();
    let ed = app.editor;
    let on = Memo::new(move |_| ed.draft.with(|d| jp::get(d, "/tools/initial").is_some()));
    let ro = Memo::new(move |_| read_only(ed, app.trusted));
    let selected = Signal::derive(move || {
        ed.draft.with(|d| {
            jp::get(d, "/tools/initial")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        })
    });
    let on_change = Callback::new(move |l: Vec<String>| ed.set("/tools/initial", Some(json!(l))));
    let problems = move || {
        ed.diagnostics.with(|ds| {
            ds.iter()
                .filter(|d| d.message.contains("tools.initial"))
                .map(|d| (crate::state::level_class(d.level), d.message.clone()))
                .collect::<Vec<_>>()
        })
    };
    view! {
        <section class="card policy default-tools" data-policy="tools-initial">
            <fieldset class="bare" disabled=move || ro.get()>
            <h3>"Default tools"</h3>
            <p class="help">"The tools a session starts with. It is a starting set, not a ceiling: the allow/deny list above stays the limit, and capabilities may still add or remove tools. Off: the session's active tools, filtered by the list above."</p>
            <label class="check">
                <input type="checkbox" name="tools-initial-on"
                    prop:checked=move || on.get()
                    on:change=move |e| {
                        let enable = event_target_checked(&e);
                        ed.draft.update(|d| {
                            if enable {
                                jp::set(d, "/tools/initial", Some(json!([])));
                            } else {
                                jp::set(d, "/tools/initial", None);
                                if jp::get(d, "/tools").and_then(Value::as_object).is_some_and(|o| o.is_empty()) {
                                    jp::set(d, "/tools", None);
                                }
                            }
                        });
                    }/>
                <span>"Choose the default tools"</span>
            </label>
            <ul class="initial-problems">
                {move || problems().into_iter().map(|(class, message)| view! {
                    <li class=format!("diagnostic {class}") role="alert">{message}</li>
                }).collect_view()}
            </ul>
            <Show when=move || on.get()>
                <ToolList name="default-tools" title="Default tools" list=selected set=on_change/>
            </Show>
            </fieldset>
        </section>
    }
}
