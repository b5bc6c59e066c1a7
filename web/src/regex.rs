//! The Regex tab: ordered rule cards with live validation (forge-core's rules, run in the
//! browser) and a match preview against sample text.

use forge_core::diag::Level;
use leptos::prelude::*;
use serde_json::{json, Value};

use crate::jp;
use crate::state::{app, level_class, StackEditor};
use crate::widgets::{check_field, select_field, text_field};

/// The message roles a rule can be limited to.
const ROLES: [&str; 4] = ["system", "user", "assistant", "custom"];

fn rule_count(ed: StackEditor) -> usize {
    ed.draft.with(|d| {
        jp::get(d, "/regex/rules")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    })
}

fn move_rule(ed: StackEditor, from: usize, to: usize) {
    ed.draft.update(|d| {
        if let Some(rules) = jp::array_mut(d, "/regex/rules") {
            if from < rules.len() && to < rules.len() {
                let r = rules.remove(from);
                rules.insert(to, r);
            }
        }
    });
}

#[component]
pub fn RegexTab() -> impl IntoView {
    let ed = app().editor;
    let count = Memo::new(move |_| rule_count(ed));
    let add = move |_| {
        let ids: Vec<String> = ed.draft.with_untracked(|d| {
            jp::get(d, "/regex/rules")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|r| jp::get_str(r, "/id")).collect())
                .unwrap_or_default()
        });
        let id = (1..)
            .map(|n| format!("regex-{n}"))
            .find(|c| !ids.contains(c))
            .unwrap_or_default();
        ed.draft.update(|d| {
            if jp::get(d, "/regex/schemaVersion").is_none() {
                jp::set(d, "/regex/schemaVersion", Some(json!(1)));
            }
            if let Some(rules) = jp::array_mut(d, "/regex/rules") {
                rules.push(json!({ "id": id, "stage": "compiled", "effect": "outgoing", "targets": ["messages"], "pattern": "", "replace": "" }));
            }
        });
    };
    view! {
        <div class="regex-tab">
            <p class="help">"Rules rewrite text with ECMAScript regular expressions: the history stage edits Pi's chat history before layout, the compiled stage edits the compiled system prompt or messages. Rules run top to bottom."</p>
            <For each=move || 0..count.get() key=|i| *i let:i>
                <RuleCard i count/>
            </For>
            <button class="add-rule" on:click=add>"Add rule"</button>
        </div>
    }
}

#[component]
fn RuleCard(i: usize, count: Memo<usize>) -> impl IntoView {
    let ed = app().editor;
    let base = format!("/regex/rules/{i}");
    let id = move || {
        ed.draft
            .with(|d| jp::get_str(d, &format!("/regex/rules/{i}/id")))
    };
    // Diagnostics naming this rule ("Regex rule <id> ..." / "regex rule <n> ...").
    let problems = move || {
        let id = id();
        let by_id = format!("Regex rule {id} ");
        let by_n = format!("regex rule {} ", i + 1);
        let dup = format!("Duplicate regex rule id: {id}.");
        ed.diagnostics.with(|ds| {
            ds.iter()
                .filter(|d| d.level != Level::Info)
                .filter(|d| {
                    (!id.is_empty() && d.message.starts_with(&by_id))
                        || d.message.starts_with(&by_n)
                        || d.message == dup
                })
                .map(|d| (d.level, d.message.clone()))
                .collect::<Vec<_>>()
        })
    };
    let sample = RwSignal::new(String::new());
    // "Try it" asks the server to run the rule on the sample with forge-core's rule pipeline
    // (the compiler's regex engine, trimStrings, maxChars, `$0`), so the result is what the
    // preview produces. 200 ms after the last change; an older answer is dropped.
    let trial: RwSignal<Option<Result<forge_core::api::RuleTrial, String>>> = RwSignal::new(None);
    let trial_seq = StoredValue::new(0u64);
    Effect::new(move |_| {
        let text = sample.get();
        let rule = ed
            .draft
            .with(|d| jp::get(d, &format!("/regex/rules/{i}")).cloned())
            .unwrap_or(Value::Null);
        let my = trial_seq.get_value() + 1;
        trial_seq.set_value(my);
        if text.is_empty() {
            trial.set(None);
            return;
        }
        set_timeout(
            move || {
                // The card may be gone by now (the rule removed, another tab or Preset).
                if trial_seq.try_get_value() != Some(my) {
                    return;
                }
                crate::task::spawn_while(trial, async move {
                    let body = json!({"rule": rule, "sample": text});
                    let answer =
                        crate::api::post_as::<forge_core::api::RuleTrial>("/api/regex/try", &body)
                            .await
                            .map_err(|e| e.message);
                    if trial_seq.get_value() == my {
                        trial.set(Some(answer));
                    }
                });
            },
            std::time::Duration::from_millis(200),
        );
    });
    let outcome = move || trial.get();
    let remove = move |_| {
        ed.draft.update(|d| {
            jp::set(d, &format!("/regex/rules/{i}"), None);
            // No rules left: drop the whole `regex` member (as the original editor does),
            // unless it holds something besides `rules` and `schemaVersion`.
            let empty = jp::get(d, "/regex/rules")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
            let only_known = jp::get(d, "/regex")
                .and_then(Value::as_object)
                .is_some_and(|o| o.keys().all(|k| k == "rules" || k == "schemaVersion"));
            if empty && only_known {
                jp::set(d, "/regex", None);
            }
        });
    };
    let targets = move |t: &'static str| {
        ed.draft.with(|d| {
            jp::get(d, &format!("/regex/rules/{i}/targets"))
                .and_then(Value::as_array)
                .is_none_or(|a| a.iter().any(|v| v.as_str() == Some(t)))
        })
    };
    let toggle_target = move |t: &'static str, on: bool| {
        let mut list: Vec<&str> = ["system", "messages"]
            .into_iter()
            .filter(|x| if *x == t { on } else { targets(x) })
            .collect();
        list.dedup();
        let value = if list.len() == 2 {
            None
        } else {
            Some(json!(list))
        };
        ed.set(&format!("/regex/rules/{i}/targets"), value);
    };
    let number = move |key: &'static str, label: &'static str| {
        let path = format!("/regex/rules/{i}/{key}");
        let read = path.clone();
        view! {
            <label class="field small">
                <span class="label">{label}</span>
                <input type="number" name=format!("rule-{key}") step="1"
                    prop:value=move || ed.draft.with(|d| jp::get(d, &read).map(|v| v.to_string()).unwrap_or_default())
                    on:input=move |e| {
                        let t = event_target_value(&e);
                        if t.trim().is_empty() { ed.set(&path, None); }
                        else if let Ok(n) = t.trim().parse::<i64>() { ed.set(&path, Some(json!(n))); }
                    }/>
            </label>
        }
    };
    // `roles` absent = every role; all four known roles ticked writes it absent again. Roles
    // the form does not know (written by hand) are kept.
    let roles = move || {
        ed.draft.with(|d| {
            jp::get(d, &format!("/regex/rules/{i}/roles"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
        })
    };
    let has_role = move |r: &str| roles().is_none_or(|l| l.iter().any(|x| x == r));
    let toggle_role = move |r: &'static str, on: bool| {
        let mut list = roles().unwrap_or_else(|| ROLES.iter().map(|x| x.to_string()).collect());
        list.retain(|x| x != r);
        if on {
            list.push(r.to_string());
        }
        let all = list.len() == ROLES.len() && ROLES.iter().all(|k| list.iter().any(|x| x == k));
        ed.set(
            &format!("/regex/rules/{i}/roles"),
            (!all).then(|| json!(list)),
        );
    };
    // Trim strings, one per line. The typed text is kept while it means the same list, so a
    // new empty line is not swallowed while typing.
    let trims_text = RwSignal::new(String::new());
    let trims = move || {
        ed.draft.with(|d| {
            jp::get(d, &format!("/regex/rules/{i}/trimStrings"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
    };
    let parse_trims = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    let stage = move || {
        ed.draft
            .with(|d| jp::get_str(d, &format!("/regex/rules/{i}/stage")))
    };
    view! {
        <section class="card rule" data-rule=i class:has-errors=move || problems().iter().any(|(l, _)| *l == Level::Error)>
            <div class="rule-head">
                {check_field(ed, format!("{base}/enabled"), "rule-enabled", "Enabled", true, false)}
                <span class="rule-title">{move || { let id = id(); if id.is_empty() { format!("Rule {}", i + 1) } else { id } }}</span>
                <span class="spacer"></span>
                <button class="icon" aria-label="Move rule up" disabled=move || i == 0 on:click=move |_| move_rule(ed, i, i - 1)>"↑"</button>
                <button class="icon" aria-label="Move rule down" disabled=move || { i + 1 >= count.get() } on:click=move |_| move_rule(ed, i, i + 1)>"↓"</button>
                <button class="icon danger" aria-label="Remove rule" on:click=remove>"✕"</button>
            </div>
            <div class="grid">
                {text_field(ed, format!("{base}/id"), "rule-id", "Rule ID", false)}
                {text_field(ed, format!("{base}/name"), "rule-name", "Name", true)}
                {select_field(ed, format!("{base}/stage"), "rule-stage", "Stage", "(choose)", vec![("history", "history"), ("compiled", "compiled")])}
                {select_field(ed, format!("{base}/effect"), "rule-effect", "Effect", "outgoing (default)", vec![("outgoing", "outgoing"), ("finalize", "finalize (stored replies)")])}
            </div>
            <div class="grid pattern-line">
                {mono_field(ed, format!("{base}/pattern"), "rule-pattern", "Pattern")}
                {text_field(ed, format!("{base}/flags"), "rule-flags", "Flags (gimsu)", true)}
                {mono_field(ed, format!("{base}/replace"), "rule-replace", "Replace with")}
            </div>
            <Show when=move || stage() == "compiled">
                <div class="row targets">
                    <span class="label">"Targets"</span>
                    <label class="check"><input type="checkbox" name="rule-target-system" prop:checked=move || targets("system")
                        on:change=move |e| toggle_target("system", event_target_checked(&e))/>"system prompt"</label>
                    <label class="check"><input type="checkbox" name="rule-target-messages" prop:checked=move || targets("messages")
                        on:change=move |e| toggle_target("messages", event_target_checked(&e))/>"messages"</label>
                </div>
            </Show>
            <details class="advanced">
                <summary>"Limits and roles"</summary>
                <div class="grid">
                    {number("maxMessages", "Max messages")}
                    {number("maxChars", "Max chars")}
                    {number("minDepth", "Min depth")}
                    {number("maxDepth", "Max depth")}
                </div>
                <fieldset class="row roles">
                    <legend class="label">"Roles"</legend>
                    {ROLES.iter().map(|r| view! {
                        <label class="check"><input type="checkbox" name=format!("rule-role-{r}") prop:checked=move || has_role(r)
                            on:change=move |e| toggle_role(r, event_target_checked(&e))/>{*r}</label>
                    }).collect_view()}
                </fieldset>
                <p class="help">{move || if roles().is_some_and(|l| l.is_empty()) {
                    "No role is ticked: this rule edits no message."
                } else {
                    "Only messages with a ticked role are edited."
                }}</p>
                <label class="field wide">
                    <span class="label">"Trim strings (one per line)"</span>
                    <textarea name="rule-trim" rows="2" spellcheck="false"
                        prop:value=move || {
                            let list = trims();
                            let typed = trims_text.get();
                            if parse_trims(&typed) == list { typed } else { list.join("\n") }
                        }
                        on:input=move |e| {
                            let t = event_target_value(&e);
                            let list = parse_trims(&t);
                            trims_text.set(t);
                            ed.set(&format!("/regex/rules/{i}/trimStrings"), (!list.is_empty()).then(|| json!(list)));
                        }></textarea>
                    <span class="help">"Removed from the matched text (and groups) where Replace with inserts it."</span>
                </label>
            </details>
            {move || {
                let ps = problems();
                (!ps.is_empty()).then(|| view! {
                    <ul class="rule-problems">
                        {ps.into_iter().map(|(l, m)| view! { <li class=format!("diagnostic {}", level_class(l))>{m}</li> }).collect_view()}
                    </ul>
                })
            }}
            <details class="try">
                <summary>"Try it"</summary>
                <textarea name="rule-sample" rows="2" placeholder="Sample text" aria-label="Sample text to try the rule on" prop:value=move || sample.get()
                    on:input=move |e| sample.set(event_target_value(&e))></textarea>
                {move || outcome().map(|o| match o {
                    Ok(t) => view! {
                        <div class="try-result" role="status">
                            <span class="badge">{format!("{} match{}", t.matches, if t.matches == 1 { "" } else { "es" })}</span>
                            {t.out_of_budget.then(|| view! { <span class="badge error">"stopped: out of time budget"</span> })}
                            <pre class="mono">{t.text}</pre>
                        </div>
                    }.into_any(),
                    Err(e) => view! { <p class="field-error">{e}</p> }.into_any(),
                })}
            </details>
        </section>
    }
}

/// A monospace text input for a string member that is kept even when empty (pattern, replace).
fn mono_field(
    ed: StackEditor,
    path: String,
    name: &'static str,
    label: &'static str,
) -> impl IntoView {
    let read = path.clone();
    view! {
        <label class="field wide2">
            <span class="label">{label}</span>
            <input type="text" name=name class="mono" spellcheck="false"
                prop:value=move || ed.draft.with(|d| jp::get_str(d, &read))
                on:input=move |e| ed.set(&path, Some(Value::String(event_target_value(&e))))/>
        </label>
    }
}
