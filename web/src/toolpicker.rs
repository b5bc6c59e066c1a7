//! A list of concrete tool names edited through chips, a name field and the grouped picker of
//! the session's registered tools (grouped by source; inactive tools shown and marked). Names
//! the session does not register are kept and marked, never dropped.

use forge_core::api::Resources;
use leptos::prelude::*;

use crate::state::app;

/// The registered tools as `(name, source, description, active)`, in registry order.
pub fn registered_tools() -> Vec<(String, String, String, bool)> {
    app().resources().with(tool_rows)
}

/// `resources`' tools as `(name, source, description, active)` (the pickers' rows).
pub fn tool_rows(resources: &Resources) -> Vec<(String, String, String, bool)> {
    resources
        .tools
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.source.clone().unwrap_or_default(),
                t.description.clone().unwrap_or_default(),
                t.active,
            )
        })
        .collect()
}

/// Why `name` cannot be added to `list` (`None`: it can).
pub fn tool_name_problem(name: &str, list: &[String]) -> Option<String> {
    if !forge_core::id::is_valid_tool_name(name) {
        return Some(format!(
            "{name} is not a tool name: 1 to 128 characters, no spaces, no control characters, no * or ?."
        ));
    }
    list.iter()
        .any(|n| n == name)
        .then(|| format!("{name} is already listed."))
}

/// `list` edited in place through `set`. `name` names the inputs (`<name>-input`) and the
/// section (`data-tools=<name>`); `readonly` (default false) hides the controls. Used for a
/// capability's tool patch, a binding's tool overrides and a Preset's default tools.
#[component]
pub fn ToolList(
    #[prop(into)] name: String,
    #[prop(into)] title: String,
    #[prop(into)] list: Signal<Vec<String>>,
    #[prop(into)] set: Callback<Vec<String>>,
    #[prop(optional, into)] readonly: Signal<bool>,
) -> impl IntoView {
    let title = StoredValue::new(title);
    let name = StoredValue::new(name);
    let input = RwSignal::new(String::new());
    let problem: RwSignal<Option<String>> = RwSignal::new(None);
    let add = move |text: String| {
        let text = text.trim().to_string();
        if text.is_empty() {
            return;
        }
        let mut l = list.get_untracked();
        if let Some(p) = tool_name_problem(&text, &l) {
            problem.set(Some(p));
            return;
        }
        l.push(text);
        set.run(l);
        input.set(String::new());
        problem.set(None);
    };
    let remove = move |name: String| {
        let l: Vec<String> = list
            .get_untracked()
            .into_iter()
            .filter(|n| *n != name)
            .collect();
        set.run(l);
    };
    let known = Memo::new(move |_| {
        registered_tools()
            .into_iter()
            .map(|t| t.0)
            .collect::<Vec<_>>()
    });
    view! {
        <section class="tool-list" data-tools=name.get_value()>
            <span class="label">{title.get_value()}</span>
            <ul class="chips" aria-label=title.get_value()>
                {move || {
                    let l = list.get();
                    if l.is_empty() {
                        return view! { <li class="muted none">"none"</li> }.into_any();
                    }
                    l.into_iter().map(|t| {
                        let unknown = known.with(|k| !k.is_empty() && !k.contains(&t));
                        let t2 = t.clone();
                        view! {
                            <li class="chip" class:no-match=unknown data-tool=t.clone()>
                                <span class="chip-text">{t.clone()}</span>
                                {unknown.then(|| view! { <span class="chip-note" title="The current session does not register this tool; the name is kept.">"not registered"</span> })}
                                <Show when=move || !readonly.get()>
                                    {let t3 = t2.clone(); view! { <button class="chip-remove" aria-label=format!("Remove {t3}") on:click=move |_| remove(t3.clone())>"✕"</button> }}
                                </Show>
                            </li>
                        }
                    }).collect_view().into_any()
                }}
            </ul>
            <Show when=move || !readonly.get()>
                <div class="row add-pattern">
                    <input type="text" name=format!("{}-input", name.get_value()) placeholder="Tool name" aria-label=format!("{}: tool name", title.get_value())
                        autocomplete="off" spellcheck="false"
                        aria-invalid=move || problem.with(Option::is_some).to_string()
                        prop:value=move || input.get()
                        on:input=move |e| { input.set(event_target_value(&e)); problem.set(None); }
                        on:keydown=move |e| if e.key() == "Enter" { e.prevent_default(); add(input.get_untracked()); }/>
                    <button class="add-tool" aria-label=format!("{}: add", title.get_value()) on:click=move |_| add(input.get_untracked())>"Add"</button>
                </div>
                {move || problem.get().map(|p| view! { <p class="field-error" role="alert">{p}</p> })}
                <div class="picker">
                    {move || {
                        let items = registered_tools();
                        if items.is_empty() {
                            return view! { <p class="muted">"The session reports no tools."</p> }.into_any();
                        }
                        let mut sources: Vec<String> = Vec::new();
                        for i in &items {
                            if !sources.contains(&i.1) {
                                sources.push(i.1.clone());
                            }
                        }
                        sources.into_iter().map(|src| {
                            let group_label = if src.is_empty() { "other".to_string() } else { src.clone() };
                            let group: Vec<_> = items.iter().filter(|i| i.1 == src).cloned().collect();
                            view! {
                                <div class="picker-group" role="group" aria-label=format!("{}: tools from {group_label}", title.get_value())>
                                    <span class="label" aria-hidden="true">{group_label.clone()}</span>
                                    {group.into_iter().map(|(tool, _, desc, active)| {
                                        let t1 = tool.clone();
                                        let t2 = tool.clone();
                                        let listed = Memo::new(move |_| list.with(|l| l.contains(&t1)));
                                        let mut tip = desc.clone();
                                        if !active {
                                            if !tip.is_empty() { tip.push('\n'); }
                                            tip.push_str("Registered, but not active in the session right now.");
                                        }
                                        view! {
                                            <button class="pick" class:listed=listed class:inactive=!active title=tip
                                                aria-pressed=move || listed.get().to_string() data-name=tool.clone()
                                                on:click=move |_| if listed.get_untracked() { remove(t2.clone()) } else { add(t2.clone()) }>
                                                {tool.clone()}
                                            </button>
                                        }
                                    }).collect_view()}
                                </div>
                            }
                        }).collect_view().into_any()
                    }}
                </div>
            </Show>
        </section>
    }
}
