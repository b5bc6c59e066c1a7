//! The profile view's Delegation card: whether the profile can be delegated to (a subagent
//! run through `forge_subagent` or `pi-forge agent run`), its timeout, the approval mode and the
//! `subagents.json` that holds its entry; "Allow delegation" and the timeout are edited here.
//!
//! A save sends the whole file (`PUT /api/agent/settings/:scope`) at the revision the browser
//! read; the new file is computed here by forge-core's `set_profile_entry`, which changes only
//! this profile's `enabled` and `timeoutMs` and keeps every other key. The watcher does not
//! follow `subagents.json`, so a change on disk shows when saving: the 409 raises a banner with
//! Reload, and nothing is overwritten.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use forge_core::api::{AgentSettings, DelegationProfile, SubagentsFileView};
use forge_core::delegation::config::{set_profile_entry, DEFAULT_TIMEOUT_MS};
use forge_core::id::{parse_selector, Scope};

use crate::api::{self, Method};
use crate::state::{app, Tone};

/// The timeout field's text as milliseconds: blank is `Ok(None)` (inherit); otherwise a number
/// of seconds from 1 to 3600 (up to millisecond precision).
pub fn parse_timeout(text: &str) -> Result<Option<u64>, &'static str> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let problem = "Enter whole or decimal seconds from 1 to 3600, or leave it blank to inherit.";
    let seconds: f64 = text.parse().map_err(|_| problem)?;
    if !seconds.is_finite() || !(1.0..=3600.0).contains(&seconds) {
        return Err(problem);
    }
    Ok(Some((seconds * 1000.0).round() as u64))
}

/// Milliseconds as the field shows them (`120`, `1.5`).
pub fn seconds_text(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        format!("{}", ms as f64 / 1000.0)
    }
}

fn file(settings: &AgentSettings, scope: Scope) -> &SubagentsFileView {
    match scope {
        Scope::Project => &settings.files.project,
        Scope::Global => &settings.files.global,
    }
}

/// What the card shows and edits for one profile, from one settings answer.
#[derive(Clone, Debug, PartialEq)]
struct Loaded {
    profile: DelegationProfile,
    file: SubagentsFileView,
    trusted: bool,
}

fn loaded(settings: &AgentSettings, selector: &str) -> Option<Loaded> {
    let profile = settings
        .profiles
        .iter()
        .find(|p| p.selector == selector)?
        .clone();
    Some(Loaded {
        file: file(settings, profile.entry_scope).clone(),
        profile,
        trusted: settings.trusted,
    })
}

/// Why the file cannot be changed from here, if it cannot.
fn read_only(l: &Loaded) -> Option<String> {
    if l.file.scope == Scope::Project && !l.trusted {
        return Some("The project is not trusted, so its subagents.json cannot be changed.".into());
    }
    if l.file.exists && l.file.revision.is_some() && !l.file.settings.is_object() {
        return Some(format!(
            "{} does not hold a JSON object; fix it in a text editor first (see its diagnostics).",
            l.file.path
        ));
    }
    if l.file.exists && l.file.revision.is_none() {
        return Some(format!(
            "{} cannot be read, so it cannot be changed here.",
            l.file.path
        ));
    }
    None
}

fn fact(label: &'static str, class: &'static str, value: String) -> impl IntoView {
    view! {
        <dt>{label}</dt>
        <dd class=class>{value}</dd>
    }
}

#[component]
pub fn DelegationCard(selector: String) -> impl IntoView {
    let app = app();
    let state: RwSignal<Option<Loaded>> = RwSignal::new(None);
    let load_error: RwSignal<Option<String>> = RwSignal::new(None);
    let enabled = RwSignal::new(false);
    let timeout = RwSignal::new(String::new());
    let conflict = RwSignal::new(false);
    let saving = RwSignal::new(false);
    let save_error: RwSignal<Option<String>> = RwSignal::new(None);
    let selector = StoredValue::new(selector);

    let show = move |l: Option<Loaded>| {
        if let Some(l) = &l {
            enabled.set(l.profile.enabled);
            timeout.set(
                l.profile
                    .entry_timeout_ms
                    .map(seconds_text)
                    .unwrap_or_default(),
            );
        }
        conflict.set(false);
        save_error.set(None);
        state.set(l);
    };
    let reload = move || {
        spawn_local(async move {
            let answer = api::get_as::<AgentSettings>("/api/agent/settings").await;
            // The card may be gone by now (another profile, the editor opened).
            let Some(selector) = selector.try_get_value() else {
                return;
            };
            if state.is_disposed() {
                return;
            }
            match answer {
                Ok(settings) => {
                    load_error.set(None);
                    show(loaded(&settings, &selector));
                }
                Err(e) => load_error.set(Some(e.message)),
            }
        });
    };
    reload();

    let parsed = move || parse_timeout(&timeout.get());
    let dirty = move || {
        state.with(|l| {
            l.as_ref().is_some_and(|l| {
                enabled.get() != l.profile.enabled
                    || parsed().ok() != Some(l.profile.entry_timeout_ms)
            })
        })
    };
    let locked = move || state.with(|l| l.as_ref().and_then(read_only));
    let save = move || {
        let Some(l) = state.get_untracked() else {
            return;
        };
        let Ok(timeout_ms) = parse_timeout(&timeout.get_untracked()) else {
            return;
        };
        let Ok(key) = parse_selector(&l.profile.selector).map(|s| s.key_in(Scope::Project)) else {
            return;
        };
        let raw = if l.file.exists {
            l.file.settings.clone()
        } else {
            Value::Null
        };
        let next = match set_profile_entry(
            &raw,
            l.file.scope,
            &key,
            enabled.get_untracked(),
            timeout_ms,
        ) {
            Ok(next) => next,
            Err(e) => {
                save_error.set(Some(e.to_string()));
                return;
            }
        };
        saving.set(true);
        save_error.set(None);
        spawn_local(async move {
            let path = format!("/api/agent/settings/{}", l.file.scope.as_str());
            let body = json!({ "settings": next });
            let result = api::call_as::<AgentSettings>(
                Method::Put,
                &path,
                Some(&body),
                l.file.revision.as_deref(),
            )
            .await;
            // Saved whether or not the card is still shown: the status line says so either
            // way; the card's own state only while it is mounted.
            if result.is_ok() {
                app.say("Delegation settings saved", Tone::Ok);
            }
            let Some(selector) = selector.try_get_value() else {
                return;
            };
            if state.is_disposed() {
                return;
            }
            saving.set(false);
            match result {
                Ok(settings) => show(loaded(&settings, &selector)),
                Err(e) if e.is_stale() || e.code == "exists" => conflict.set(true),
                Err(e) => save_error.set(Some(e.message)),
            }
        });
    };

    let facts = move || {
        state.get().map(|l| {
            let p = &l.profile;
            let timeout_text = match p.entry_timeout_ms {
                Some(ms) => format!("{} s (this profile's entry)", seconds_text(ms)),
                None if p.timeout_ms == DEFAULT_TIMEOUT_MS => {
                    format!("{} s (inherited: the default)", seconds_text(p.timeout_ms))
                }
                None => format!(
                    "{} s (inherited from the file settings)",
                    seconds_text(p.timeout_ms)
                ),
            };
            let approval = if p.unattended {
                "without approval (trusted project setting)"
            } else {
                "required: a person approves each run"
            };
            let file = match &p.entry_key {
                Some(key) => format!("{} (entry {key})", l.file.path),
                None if l.file.exists => format!("{} (no entry yet)", l.file.path),
                None => format!("{} (not created yet)", l.file.path),
            };
            view! {
                <dl class="plan-facts delegation-facts">
                    {fact("Delegation", "delegation-state", if p.enabled { "enabled: this profile can run delegated tasks".into() } else { "not enabled".into() })}
                    {fact("Timeout", "delegation-timeout-value", timeout_text)}
                    {fact("Approval", "delegation-approval", approval.into())}
                    {fact("Backend", "delegation-backend", p.backend.clone())}
                    {fact("Settings file", "delegation-file", file)}
                </dl>
            }
        })
    };

    view! {
        <section class="card delegation-card" aria-labelledby="delegation-heading">
            <h3 id="delegation-heading">"Delegation"</h3>
            {move || load_error.get().map(|e| view! { <p class="banner error delegation-load-error" role="alert">{e}</p> })}
            {facts}
            {move || locked().map(|why| view! { <p class="help delegation-locked">{why}</p> })}
            {move || conflict.get().then(|| view! {
                <div class="banner error delegation-conflict" role="alert">
                    <span>"Not saved: subagents.json changed on disk since it was read. Nothing was overwritten; reload to see the current settings."</span>
                    <button type="button" class="reload-delegation" on:click=move |_| reload()>"Reload"</button>
                </div>
            })}
            {move || save_error.get().map(|e| view! { <p class="banner error delegation-error" role="alert">{e}</p> })}
            <Show when=move || state.with(Option::is_some)>
                <div class="grid delegation-controls">
                    <label class="check">
                        <input type="checkbox" name="delegation-enabled"
                            disabled=move || locked().is_some()
                            prop:checked=move || enabled.get()
                            on:change=move |e| enabled.set(event_target_checked(&e))/>
                        <span>"Allow delegation"</span>
                    </label>
                    <label class="field">
                        <span class="label">"Timeout (seconds)"</span>
                        <input type="text" inputmode="decimal" name="delegation-timeout"
                            placeholder="blank: inherit"
                            disabled=move || locked().is_some()
                            class:invalid=move || parsed().is_err()
                            aria-invalid=move || parsed().is_err().to_string()
                            aria-describedby="delegation-timeout-note"
                            prop:value=move || timeout.get()
                            on:input=move |e| timeout.set(event_target_value(&e))/>
                        {move || match parsed() {
                            Err(problem) => view! { <span class="field-error delegation-timeout-error" id="delegation-timeout-note" role="alert">{problem}</span> }.into_any(),
                            Ok(_) => view! { <span class="field-note" id="delegation-timeout-note">"1–3600; blank inherits the file's timeout, else 60 s."</span> }.into_any(),
                        }}
                    </label>
                </div>
                <div class="row end">
                    <button type="button" class="primary save-delegation"
                        disabled=move || !dirty() || parsed().is_err() || saving.get() || locked().is_some() || conflict.get()
                        on:click=move |_| save()>"Save delegation"</button>
                </div>
            </Show>
        </section>
    }
}
