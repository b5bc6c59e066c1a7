//! The Payloads surface: what the live Pi session actually sent to the model.
//!
//! - the capture list (time, model, size, estimated tokens, provider usage and cache hit),
//!   refreshed by the `payloads` server event;
//! - one capture as a JSON tree (lazy: a node's children are built only when it is open, long
//!   arrays in pages), with search over keys and values that opens the tree at each match, copy
//!   of a value or its path, and download of the stored redacted JSON;
//! - the same request as text (system prompt and messages as the model reads them);
//! - the run diff between two captures ([`RunDiffPanel`], also the dock's "Run diff" view).
//!
//! Types are forge-core's ([`CaptureList`], [`RunDiff`], [`SavedCapture`], [`ArmRequest`]): the
//! wire is checked by the compiler.

use std::collections::HashSet;
use std::sync::Arc;

use forge_core::api::{ArmRequest, CaptureList, SavedCapture};
use forge_core::diff::text::diff_lines;
use forge_core::diff::{extract_blocks, hash_text, BlockStatus, TurnSummary, Usage};
use forge_core::json;
use forge_core::payload::{PayloadList, RunDiff};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use crate::api::{self, Method};
use crate::dock::{diff_view, layout_controls, Dock};
use crate::state::{self, App, Surface, Tone};

/// What capture cannot see, said wherever captures are shown.
pub const BLIND_SPOTS: &str =
    "Each request is captured as pi-forge saw it just before Pi sent it. \
Capture cannot see changes made by extensions loaded after pi-forge, compaction and summary calls, \
or providers with their own transport.";

/// Children shown per page of a long array or object.
const PAGE: usize = 100;
/// Characters of a string value shown before "Show all".
const STRING_PREVIEW: usize = 400;
/// Search stops collecting matches after this many.
const MATCH_LIMIT: usize = 2000;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PayloadTab {
    Tree,
    Text,
    Diff,
}

/// The shared state of the Payloads surface and the dock's run diff.
#[derive(Clone, Copy)]
pub struct Payloads {
    pub list: RwSignal<Option<PayloadList>>,
    pub error: RwSignal<Option<String>>,
    pub selected: RwSignal<Option<String>>,
    pub tab: RwSignal<PayloadTab>,
    /// The selected capture's stored JSON.
    pub payload: RwSignal<Option<(String, Arc<Value>)>>,
    pub loading: RwSignal<bool>,
    /// Open tree nodes, by JSON pointer ("" is the root).
    pub expanded: RwSignal<HashSet<String>>,
    /// How many children each open node shows, by pointer (default [`PAGE`]).
    pub pages: RwSignal<std::collections::HashMap<String, usize>>,
    /// Strings shown in full, by pointer.
    pub full: RwSignal<HashSet<String>>,
    pub query: RwSignal<String>,
    pub current: RwSignal<usize>,
    /// The surface's run diff (any two captures).
    pub diff: RunDiffState,
    /// The dock's run diff (always the newest against the one before).
    pub dock_diff: RunDiffState,
    pub list_seq: StoredValue<u64>,
    pub payload_seq: StoredValue<u64>,
}

/// One run diff view: its chosen ends and the last answer.
#[derive(Clone, Copy)]
pub struct RunDiffState {
    pub from: RwSignal<Option<String>>,
    pub to: RwSignal<Option<String>>,
    pub result: RwSignal<Option<Result<RunDiff, String>>>,
    pub show_same: RwSignal<bool>,
    seq: StoredValue<u64>,
}

impl RunDiffState {
    pub fn new() -> RunDiffState {
        RunDiffState {
            from: RwSignal::new(None),
            to: RwSignal::new(None),
            result: RwSignal::new(None),
            show_same: RwSignal::new(false),
            seq: StoredValue::new(0),
        }
    }

    /// Fetches the diff for the chosen ends.
    pub fn fetch(self) {
        let my = self.seq.get_value() + 1;
        self.seq.set_value(my);
        let mut query = Vec::new();
        if let Some(from) = self.from.get_untracked() {
            query.push(format!("from={}", api::seg(&from)));
        }
        if let Some(to) = self.to.get_untracked() {
            query.push(format!("to={}", api::seg(&to)));
        }
        let path = if query.is_empty() {
            "/api/payloads/diff".to_string()
        } else {
            format!("/api/payloads/diff?{}", query.join("&"))
        };
        spawn_local(async move {
            let answer = api::get_as::<RunDiff>(&path).await;
            if self.seq.get_value() != my {
                return;
            }
            self.result.set(Some(answer.map_err(|e| e.message)));
        });
    }
}

pub fn payloads() -> Payloads {
    expect_context::<Payloads>()
}

pub fn fetch_list(app: App, p: Payloads) {
    let my = p.list_seq.get_value() + 1;
    p.list_seq.set_value(my);
    spawn_local(async move {
        let answer = api::get_as::<CaptureList>("/api/payloads")
            .await
            .map(|answer| answer.list);
        if p.list_seq.get_value() != my {
            return;
        }
        match answer {
            Ok(list) => {
                let previous_latest = p.list.with_untracked(|l| {
                    l.as_ref()
                        .and_then(|l| l.latest.as_ref().map(|t| t.turn_id.clone()))
                });
                let latest = list.latest.as_ref().map(|t| t.turn_id.clone());
                let newest = list.turns.last().map(|t| t.turn_id.clone());
                let keep = p.selected.with_untracked(|s| {
                    s.as_ref().is_some_and(|s| {
                        list.turns.iter().any(|t| t.turn_id == *s) || latest.as_deref() == Some(s)
                    })
                });
                // A newly pinned capture opens by itself; otherwise keep the selection.
                if latest.is_some() && latest != previous_latest {
                    p.selected.set(latest.clone());
                    if let Some(t) = &latest {
                        app.status.set((format!("Captured {t}."), Tone::Ok));
                    }
                } else if !keep {
                    p.selected.set(newest);
                }
                p.error.set(None);
                p.list.set(Some(list));
            }
            Err(e) => p.error.set(Some(e.message)),
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Formatting

fn size_text(bytes: usize) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1_000_000.0)
    } else if bytes >= 1_000 {
        format!("{:.1} KB", bytes as f64 / 1_000.0)
    } else {
        format!("{bytes} B")
    }
}

fn time_of(iso: &str) -> String {
    iso.split('T')
        .nth(1)
        .map(|t| t.chars().take(8).collect())
        .unwrap_or_else(|| iso.to_string())
}

/// "cache hit 75.0%", "cache not reported" or "usage pending".
pub fn cache_text(usage: Option<&Usage>) -> String {
    match usage {
        None => "usage pending".into(),
        Some(u) if u.cache_hit_ratio.is_some() => format!("cache hit {}", u.hit_text()),
        Some(u) => format!("cache {}", u.hit_text()),
    }
}

fn usage_text(usage: Option<&Usage>) -> String {
    match usage {
        None => "usage pending".into(),
        Some(u) => {
            let mut parts = vec![
                format!("prompt {}", u.prompt_tokens),
                format!("uncached input {}", u.input),
                format!("cache read {}", u.cache_read),
                format!("cache write {}", u.cache_write),
                format!("output {}", u.output),
                cache_text(Some(u)),
            ];
            if let Some(cost) = u.cost.filter(|c| *c > 0.0) {
                parts.push(format!("cost {cost:.4}"));
            }
            parts.join(" · ")
        }
    }
}

fn model_of(t: &TurnSummary) -> String {
    match (&t.provider, &t.model) {
        (Some(p), Some(m)) => format!("{p}/{m}"),
        (None, Some(m)) => m.clone(),
        _ => "unknown model".into(),
    }
}

fn copy_text(text: String) {
    if let Some(w) = web_sys::window() {
        let _ = w.navigator().clipboard().write_text(&text);
    }
}

// ---------------------------------------------------------------------------------------------
// The surface

#[component]
pub fn PayloadsSurface() -> impl IntoView {
    let app = state::app();
    let p = payloads();
    let arm = move |save: bool| {
        spawn_local(async move {
            let body = serde_json::to_value(ArmRequest { save, by: None }).unwrap_or_default();
            match api::post_as::<CaptureList>("/api/payloads/arm", &body).await {
                Ok(_) => {
                    app.status.set((
                        if save {
                            "Armed: the next request will be captured and saved.".into()
                        } else {
                            "Armed: the next request will be captured.".into()
                        },
                        Tone::Ok,
                    ));
                    fetch_list(app, p);
                }
                Err(e) => app.status.set((e.message, Tone::Error)),
            }
        });
    };
    let clear = move |_| {
        spawn_local(async move {
            match api::call_as::<CaptureList>(Method::Delete, "/api/payloads", None, None).await {
                Ok(_) => {
                    app.status.set(("Captures cleared.".into(), Tone::Ok));
                    p.selected.set(None);
                    fetch_list(app, p);
                }
                Err(e) => app.status.set((e.message, Tone::Error)),
            }
        });
    };
    let turns = move || {
        p.list
            .with(|l| l.as_ref().map(|l| l.turns.clone()).unwrap_or_default())
    };
    let armed = move || p.list.with(|l| l.as_ref().and_then(|l| l.armed.clone()));
    let latest = move || p.list.with(|l| l.as_ref().and_then(|l| l.latest.clone()));
    let connected = move || app.live.with(|v| v.connected);
    view! {
        <div class="payloads">
            <aside class="sidebar capture-list" aria-label="Captured requests">
                <div class="sidebar-head">
                    <button class="arm" on:click=move |_| arm(false)
                        title="Capture the next request Pi sends and keep it pinned">{move || if armed().is_some() { "Armed" } else { "Arm next" }}</button>
                    <button class="arm-save" on:click=move |_| arm(true) disabled=move || !app.trusted.get()
                        title="Capture the next request and save it to .pi/forge/payloads/">"Arm + save"</button>
                    <button class="clear-captures" on:click=clear>"Clear"</button>
                </div>
                {move || armed().map(|a| view! {
                    <p class="banner info armed-note">{format!("Armed at {} — the next request will be pinned{}.", time_of(&a.armed_at), if a.save { " and saved" } else { "" })}</p>
                })}
                <ul class="capture-rows">
                    {move || {
                        let mut rows = turns();
                        if let Some(pinned) = latest() {
                            if !rows.iter().any(|t| t.turn_id == pinned.turn_id) {
                                rows.insert(0, pinned);
                            }
                        }
                        if rows.is_empty() {
                            // Connected: forge-core's one wording of the empty capture list.
                            let text = if connected() {
                                forge_core::payload::PayloadError::Empty.to_string()
                            } else {
                                "No live Pi session. Install the bridge once (`pi install npm:pi-forge`, or `pi-forge pi install` for a binary built from source), start Pi in this project (it connects by itself; `/forge ui` opens this editor), then send a prompt.".to_string()
                            };
                            return view! { <li class="empty">{text}</li> }.into_any();
                        }
                        let pinned = latest().map(|t| t.turn_id);
                        rows.into_iter().rev().map(|t| {
                            let id = t.turn_id.clone();
                            let id2 = id.clone();
                            let is_pinned = pinned.as_deref() == Some(id.as_str());
                            let selected = move || p.selected.with(|s| s.as_deref() == Some(id2.as_str()));
                            let usage = t.usage.as_ref();
                            let detail = format!("{} · {} · ~{} tokens", model_of(&t), size_text(t.bytes), t.approx_tokens);
                            let tokens = match usage {
                                Some(u) => format!("in {} · cached {} · {}", u.prompt_tokens, u.cache_read, cache_text(usage)),
                                None => "usage pending".into(),
                            };
                            view! {
                                <li>
                                    <button class="capture-row" class:selected=selected data-turn=id.clone()
                                        on:click=move |_| p.selected.set(Some(id.clone()))>
                                        <span class="row-title">{t.turn_id.clone()}" · "{time_of(&t.captured_at)}</span>
                                        {is_pinned.then(|| view! { <span class="badge active">"pinned"</span> })}
                                        <span class="row-detail">{detail}</span>
                                        <span class="row-detail usage">{tokens}</span>
                                    </button>
                                </li>
                            }
                        }).collect_view().into_any()
                    }}
                </ul>
                {move || p.list.with(|l| l.as_ref().filter(|l| l.dropped > 0).map(|l| view! {
                    <p class="muted">{format!("{} request(s) were not captured (the bridge's queue was full, or a request was too large).", l.dropped)}</p>
                }))}
                <p class="muted blind-spots">{BLIND_SPOTS}</p>
            </aside>
            <main class="workspace capture-detail">
                <CaptureDetail/>
            </main>
        </div>
    }
}

#[component]
fn CaptureDetail() -> impl IntoView {
    let app = state::app();
    let p = payloads();
    let tab_button = move |tab: PayloadTab, label: &'static str, class: &'static str| {
        view! {
            <button role="tab" class=format!("seg-button {class}") class:current=move || p.tab.get() == tab
                aria-selected=move || (p.tab.get() == tab).to_string()
                on:click=move |_| p.tab.set(tab)>{label}</button>
        }
    };
    let summary = move || {
        let sel = p.selected.get()?;
        p.list.with(|l| {
            let l = l.as_ref()?;
            l.turns
                .iter()
                .chain(l.latest.iter())
                .find(|t| t.turn_id == sel)
                .cloned()
        })
    };
    let save = move |_| {
        let Some(turn) = p.selected.get_untracked() else {
            return;
        };
        spawn_local(async move {
            match api::post_as::<SavedCapture>(
                &format!("/api/payloads/{}/save", api::seg(&turn)),
                &json!({}),
            )
            .await
            {
                Ok(saved) => app.status.set((format!("Saved {}", saved.path), Tone::Ok)),
                Err(e) => app.status.set((e.message, Tone::Error)),
            }
        });
    };
    view! {
        <div class="capture-head">
            <div class="seg" role="tablist" aria-label="Capture view">
                {tab_button(PayloadTab::Tree, "JSON", "tab-tree")}
                {tab_button(PayloadTab::Text, "Text", "tab-text")}
                {tab_button(PayloadTab::Diff, "Run diff", "tab-diff")}
            </div>
            <span class="spacer"></span>
            {move || p.selected.get().map(|turn| view! {
                <a class="button download" href=format!("/api/payloads/{}?download=1", api::seg(&turn)) download="">"Download JSON"</a>
                <button class="copy-json" on:click=move |_| {
                    if let Some(text) = p.payload.with_untracked(|x| x.as_ref().map(|(_, v)| json::to_pretty(v))) { copy_text(text); }
                }>"Copy JSON"</button>
                <button class="save-capture" disabled=move || !app.trusted.get() on:click=save>"Save to project"</button>
            })}
        </div>
        {move || summary().map(|t| view! {
            <p class="muted capture-meta">{format!(
                "{} · {} · {} · {} · ~{} tokens (chars/4) · {}",
                t.turn_id, t.captured_at, model_of(&t), size_text(t.bytes), t.approx_tokens, usage_text(t.usage.as_ref())
            )}</p>
        })}
        {move || p.error.get().map(|e| view! { <p class="banner error">{e}</p> })}
        {move || match p.tab.get() {
            PayloadTab::Diff => view! { <RunDiffPanel state=p.diff pick=true/> }.into_any(),
            tab => match p.payload.get() {
                None if p.selected.with(Option::is_none) => view! { <p class="muted">"Select a captured request."</p> }.into_any(),
                None => view! { <p class="muted">"Loading the request…"</p> }.into_any(),
                Some((_, root)) if tab == PayloadTab::Tree => view! { <JsonTree root=root/> }.into_any(),
                Some((_, root)) => text_view(&root).into_any(),
            },
        }}
    }
}

// ---------------------------------------------------------------------------------------------
// The JSON tree

fn pointer_push(parent: &str, key: &str) -> String {
    format!("{parent}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn jq_push(parent: &str, key: &str, index: bool) -> String {
    if index {
        format!("{parent}[{key}]")
    } else if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !key.is_empty() {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", serde_json::Value::String(key.to_string()))
    }
}

fn node_id(pointer: &str) -> String {
    format!("jn-{}", hash_text(pointer))
}

/// Every node whose key or scalar value contains `q` (lower case), in document order.
fn find_matches(value: &Value, pointer: &str, key: Option<&str>, q: &str, out: &mut Vec<String>) {
    if out.len() >= MATCH_LIMIT {
        return;
    }
    let key_hit = key.is_some_and(|k| k.to_lowercase().contains(q));
    let value_hit = match value {
        Value::String(s) => s.to_lowercase().contains(q),
        Value::Number(n) => n.to_string().contains(q),
        Value::Bool(b) => b.to_string().contains(q),
        Value::Null => "null".contains(q),
        _ => false,
    };
    if key_hit || value_hit {
        out.push(pointer.to_string());
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                find_matches(v, &pointer_push(pointer, k), Some(k), q, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                find_matches(v, &pointer_push(pointer, &i.to_string()), None, q, out);
            }
        }
        _ => {}
    }
}

/// The pointers of `pointer`'s ancestors, root first ("" included).
fn ancestors(pointer: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut at = 0;
    while let Some(i) = pointer[at + 1..].find('/') {
        at += 1 + i;
        out.push(pointer[..at].to_string());
    }
    out
}

/// Opens the tree down to `pointer` and the page that holds it, then scrolls it into view.
fn reveal(p: Payloads, root: &Value, pointer: &str) {
    let chain = ancestors(pointer);
    p.expanded.update(|e| e.extend(chain.iter().cloned()));
    // A child beyond the first page of its parent needs a longer page.
    let mut parent = String::new();
    for part in pointer.split('/').skip(1) {
        if let Some(Value::Array(_)) = root.pointer(&parent) {
            if let Ok(index) = part.parse::<usize>() {
                p.pages.update(|pages| {
                    let shown = pages.entry(parent.clone()).or_insert(PAGE);
                    if index >= *shown {
                        *shown = (index / PAGE + 1) * PAGE;
                    }
                });
            }
        }
        if let Some(Value::Object(map)) = root.pointer(&parent) {
            let key = part.replace("~1", "/").replace("~0", "~");
            if let Some(index) = map.keys().position(|k| *k == key) {
                p.pages.update(|pages| {
                    let shown = pages.entry(parent.clone()).or_insert(PAGE);
                    if index >= *shown {
                        *shown = (index / PAGE + 1) * PAGE;
                    }
                });
            }
        }
        parent = format!("{parent}/{part}");
    }
    let id = node_id(pointer);
    request_animation_frame(move || {
        if let Some(el) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.get_element_by_id(&id))
        {
            let options = web_sys::ScrollIntoViewOptions::new();
            options.set_block(web_sys::ScrollLogicalPosition::Center);
            el.scroll_into_view_with_scroll_into_view_options(&options);
        }
    });
}

#[component]
fn JsonTree(root: Arc<Value>) -> impl IntoView {
    let p = payloads();
    let search_root = Arc::clone(&root);
    let matches = Memo::new(move |_| {
        let q = p.query.get().trim().to_lowercase();
        let mut out = Vec::new();
        if !q.is_empty() {
            find_matches(&search_root, "", None, &q, &mut out);
        }
        out
    });
    let current_pointer = move || matches.with(|m| m.get(p.current.get()).cloned());
    let reveal_root = Arc::clone(&root);
    let step = Callback::new(move |delta: isize| {
        let count = matches.with(Vec::len);
        if count == 0 {
            return;
        }
        let next = (p.current.get_untracked() as isize + delta).rem_euclid(count as isize) as usize;
        p.current.set(next);
        if let Some(ptr) = matches.with_untracked(|m| m.get(next).cloned()) {
            reveal(p, &reveal_root, &ptr);
        }
    });
    let first_root = Arc::clone(&root);
    // A new query jumps to its first match.
    Effect::new(move |_| {
        let first = matches.with(|m| m.first().cloned());
        p.current.set(0);
        if let Some(ptr) = first {
            reveal(p, &first_root, &ptr);
        }
    });
    let hits = Memo::new(move |_| matches.with(|m| m.iter().cloned().collect::<HashSet<String>>()));
    let tree_root = Arc::clone(&root);
    view! {
        <div class="json-search row">
            <input class="search payload-search" type="search" placeholder="Search keys and values" aria-label="Search the request"
                prop:value=move || p.query.get()
                on:input=move |e| p.query.set(event_target_value(&e))
                on:keydown=move |e| if e.key() == "Enter" { e.prevent_default(); step.run(if e.shift_key() { -1 } else { 1 }); }/>
            <span class="muted match-count" aria-live="polite">{move || {
                let count = matches.with(Vec::len);
                if p.query.with(|q| q.trim().is_empty()) { String::new() }
                else if count == 0 { "No matches".into() }
                else { format!("{} of {}{}", p.current.get() + 1, count, if count >= MATCH_LIMIT { "+" } else { "" }) }
            }}</span>
            <button class="icon match-prev" aria-label="Previous match" on:click=move |_| step.run(-1)>"▲"</button>
            <button class="icon match-next" aria-label="Next match" on:click=move |_| step.run(1)>"▼"</button>
        </div>
        <div class="json-tree" role="tree">
            {node(p, tree_root, String::new(), ".".into(), "request".into(), hits, Signal::derive(current_pointer))}
        </div>
    }
}

fn summary_of(value: &Value) -> String {
    match value {
        Value::Object(map) => format!("object{{{}}}", map.len()),
        Value::Array(items) => format!("array[{}]", items.len()),
        Value::String(s) => format!("string · {} chars", json::utf16_len(s)),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Null => "null".into(),
    }
}

/// One tree node: its row, and (when open) its children, built on demand.
fn node(
    p: Payloads,
    root: Arc<Value>,
    pointer: String,
    jq: String,
    label: String,
    hits: Memo<HashSet<String>>,
    current: Signal<Option<String>>,
) -> AnyView {
    let Some(value) = root.pointer(&pointer) else {
        return ().into_any();
    };
    let container = value.is_object() || value.is_array();
    let bytes = json::to_compact(value).len();
    let size = format!("{} · ~{} tok", size_text(bytes), bytes.div_ceil(4).max(1));
    let summary = summary_of(value);
    let ptr_open = pointer.clone();
    let open = Memo::new(move |_| p.expanded.with(|e| e.contains(&ptr_open)));
    let ptr_toggle = pointer.clone();
    let toggle = move |_| {
        p.expanded.update(|e| {
            if !e.remove(&ptr_toggle) {
                e.insert(ptr_toggle.clone());
            }
        })
    };
    let ptr_hit = pointer.clone();
    let ptr_cur = pointer.clone();
    let is_hit = move || hits.with(|h| h.contains(&ptr_hit));
    let is_current = move || current.with(|c| c.as_deref() == Some(ptr_cur.as_str()));
    let copy_value = {
        let root = Arc::clone(&root);
        let pointer = pointer.clone();
        move |_| {
            if let Some(v) = root.pointer(&pointer) {
                copy_text(match v {
                    Value::String(s) => s.clone(),
                    other => json::to_pretty(other),
                });
            }
        }
    };
    let jq_copy = jq.clone();
    let scalar = (!container).then(|| {
        let ptr_full = pointer.clone();
        let text = match value {
            Value::String(s) => s.clone(),
            other => json::to_compact(other),
        };
        let is_string = value.is_string();
        let long = text.chars().count() > STRING_PREVIEW;
        let ptr_more = pointer.clone();
        view! {
            <span class="jv" class:string=is_string>{move || {
                let full = p.full.with(|f| f.contains(&ptr_full));
                if long && !full { format!("{}…", text.chars().take(STRING_PREVIEW).collect::<String>()) } else { text.clone() }
            }}</span>
            {long.then(|| view! {
                <button class="link show-all" on:click=move |_| p.full.update(|f| { f.insert(ptr_more.clone()); })>"Show all"</button>
            })}
        }
    });
    let children_root = Arc::clone(&root);
    let ptr_children = pointer.clone();
    let jq_children = jq.clone();
    let children = move || {
        if !open.get() || !container {
            return ().into_any();
        }
        let Some(value) = children_root.pointer(&ptr_children) else {
            return ().into_any();
        };
        let shown = p
            .pages
            .with(|pages| pages.get(&ptr_children).copied().unwrap_or(PAGE));
        let entries: Vec<(String, String, String)> = match value {
            Value::Object(map) => map
                .keys()
                .take(shown)
                .map(|k| {
                    (
                        pointer_push(&ptr_children, k),
                        jq_push(if jq_children == "." { "" } else { &jq_children }, k, false),
                        k.clone(),
                    )
                })
                .collect(),
            Value::Array(items) => (0..items.len().min(shown))
                .map(|i| {
                    (
                        pointer_push(&ptr_children, &i.to_string()),
                        jq_push(
                            if jq_children == "." { "" } else { &jq_children },
                            &i.to_string(),
                            true,
                        ),
                        i.to_string(),
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        let total = match value {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => 0,
        };
        let ptr_page = ptr_children.clone();
        let rest = total.saturating_sub(shown);
        view! {
            <div class="jn-children" role="group">
                {entries.into_iter().map(|(ptr, jq, label)| node(p, Arc::clone(&children_root), ptr, jq, label, hits, current)).collect_view()}
                {(rest > 0).then(|| view! {
                    <button class="link show-more" on:click=move |_| p.pages.update(|pages| { *pages.entry(ptr_page.clone()).or_insert(PAGE) += PAGE; })>
                        {format!("Show {} more of {rest}", rest.min(PAGE))}
                    </button>
                })}
            </div>
        }
        .into_any()
    };
    let ptr_attr = pointer.clone();
    view! {
        <div class="jn" role="treeitem" aria-expanded=move || container.then(|| open.get().to_string())>
            <div class="jn-row" id=node_id(&pointer) data-path=ptr_attr class:match=is_hit class:current-match=is_current>
                {if container {
                    view! { <button class="icon jn-toggle" aria-label=move || if open.get() { "Collapse" } else { "Expand" } on:click=toggle>{move || if open.get() { "▾" } else { "▸" }}</button> }.into_any()
                } else {
                    view! { <span class="jn-leaf"></span> }.into_any()
                }}
                <span class="jk">{label}</span>
                {container.then(|| view! { <span class="jt muted">{summary.clone()}</span> })}
                {scalar}
                <span class="js muted">{size}</span>
                <span class="jn-actions">
                    <button class="link copy-value" on:click=copy_value>"Copy"</button>
                    <button class="link copy-path" title=jq.clone() on:click=move |_| copy_text(jq_copy.clone())>"Path"</button>
                </span>
            </div>
            {children}
        </div>
    }
    .into_any()
}

// ---------------------------------------------------------------------------------------------
// The text view

fn text_view(root: &Value) -> impl IntoView {
    let blocks = extract_blocks(root);
    let total = blocks.len();
    let shown = RwSignal::new(PAGE.min(total));
    let blocks = Arc::new(blocks);
    view! {
        <div class="payload-text">
            {move || {
                let n = shown.get();
                blocks.iter().take(n).map(|b| view! {
                    <section class="section" data-key=b.key.clone()>
                        <header>
                            <span class="badge role">{b.role.clone()}</span>
                            <code class="block-key">{b.key.clone()}</code>
                            <span class="muted">{format!("{} chars · ~{} tokens", b.chars, b.approx_tokens)}</span>
                        </header>
                        <pre class="section-content">{b.text.clone()}</pre>
                    </section>
                }).collect_view()
            }}
            {move || (shown.get() < total).then(|| view! {
                <button class="link show-more" on:click=move |_| shown.update(|n| *n = (*n + PAGE).min(total))>
                    {format!("Show more ({} of {total} blocks shown)", shown.get())}
                </button>
            })}
        </div>
    }
}

// ---------------------------------------------------------------------------------------------
// The run diff

/// The run diff of `state`. With `pick`, selects choose both ends.
#[component]
pub fn RunDiffPanel(state: RunDiffState, #[prop(optional)] pick: bool) -> impl IntoView {
    let p = payloads();
    let dock = expect_context::<Dock>();
    let ids = move || {
        p.list.with(|l| {
            l.as_ref()
                .map(|l| {
                    l.turns
                        .iter()
                        .map(|t| t.turn_id.clone())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
    };
    let picker = move |signal: RwSignal<Option<String>>,
                       name: &'static str,
                       default: &'static str| {
        view! {
            <label class="diff-end">{name}
                <select name=name prop:value=move || signal.get().unwrap_or_default()
                    on:change=move |e| { let v = event_target_value(&e); signal.set((!v.is_empty()).then_some(v)); }>
                    <option value="">{default}</option>
                    {move || ids().into_iter().map(|id| view! { <option value=id.clone()>{id.clone()}</option> }).collect_view()}
                </select>
            </label>
        }
    };
    view! {
        <div class="run-diff">
            {pick.then(|| view! {
                <div class="row diff-ends">
                    {picker(state.from, "From", "the turn before")}
                    {picker(state.to, "To", "the newest turn")}
                </div>
            })}
            <div class="row diff-options">
                {layout_controls(dock)}
                <label class="check"><input type="checkbox" name="show-same" prop:checked=move || state.show_same.get()
                    on:change=move |e| state.show_same.set(event_target_checked(&e))/>"Show unchanged"</label>
            </div>
            {move || match state.result.get() {
                None => view! { <p class="muted">"Comparing captures…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="muted run-diff-empty">{e}</p> }.into_any(),
                Some(Ok(d)) => run_diff_view(d, dock.split.get(), dock.changes_only.get(), state.show_same.get()).into_any(),
            }}
        </div>
    }
}

fn run_diff_view(d: RunDiff, split: bool, changes_only: bool, show_same: bool) -> impl IntoView {
    let s = &d.diff.summary;
    let from = d
        .from
        .as_ref()
        .map_or("(nothing)".to_string(), |f| f.turn_id.clone());
    let delta = d.diff.delta_tokens;
    let head = format!(
        "{from} → {} · {} · estimated Δ ~{}{} tokens · {} added · {} removed · {} modified · {} unchanged",
        d.to.turn_id,
        model_of(&d.to),
        if delta >= 0 { "+" } else { "" },
        delta,
        s.added,
        s.removed,
        s.modified,
        s.same
    );
    let prefix = format!(
        "Reusable prefix ~{} tokens ({:.1}%) over {} block{}{}",
        d.diff.prefix_tokens,
        d.diff.prefix_ratio * 100.0,
        d.prefix_blocks,
        if d.prefix_blocks == 1 { "" } else { "s" },
        d.prefix_boundary
            .as_ref()
            .map(|k| format!("; the cache prefix ends before {k}"))
            .unwrap_or_else(|| "; nothing changed".into())
    );
    let provider = match d.to.usage.as_ref() {
        None => "Provider usage: pending".to_string(),
        Some(u) => format!(
            "Provider: {} of {} prompt tokens read from cache ({}) · estimate ~{} reusable",
            u.cache_read,
            u.prompt_tokens,
            cache_text(Some(u)),
            d.diff.prefix_tokens
        ),
    };
    let boundary = d.prefix_boundary.clone();
    let same_count = s.same;
    let blocks = d
        .diff
        .blocks
        .into_iter()
        .filter(|b| show_same || b.status != BlockStatus::Same)
        .map(|b| {
            let status = b.status.as_str();
            let side = b.after.as_ref().or(b.before.as_ref());
            let key = side.map(|x| x.key.clone()).unwrap_or_default();
            let role = side.map(|x| x.role.clone()).unwrap_or_default();
            let at_boundary = boundary.as_deref() == Some(key.as_str());
            let old = b.before.as_ref().map(|x| x.text.clone()).unwrap_or_default();
            let new = b.after.as_ref().map(|x| x.text.clone()).unwrap_or_default();
            let metadata_only = b.status == BlockStatus::Modified && old == new;
            let lines = diff_lines(&old, &new);
            let body = if b.status == BlockStatus::Same {
                view! { <pre class="section-content same-text">{new.clone()}</pre> }.into_any()
            } else if metadata_only {
                view! { <p class="role-change">"Provider-visible metadata changed; the text is unchanged."</p> }.into_any()
            } else {
                diff_view(&lines, split, changes_only).into_any()
            };
            view! {
                {at_boundary.then(|| view! { <p class="prefix-boundary" role="separator">"Cache prefix ends here"</p> })}
                <section class=format!("diff-block {status}") data-status=status data-key=key.clone()>
                    <header>
                        <span class=format!("badge {status}")>{status}</span>
                        <code class="block-key">{key.clone()}</code>
                        <span class="badge role">{role}</span>
                        <span class="muted">{format!("~{}{} tokens", if b.token_delta >= 0 { "+" } else { "" }, b.token_delta)}</span>
                    </header>
                    {body}
                </section>
            }
        })
        .collect_view();
    view! {
        <div class="run-meta">
            <p class="diff-summary">{head}</p>
            <p class="muted prefix-line">{prefix}</p>
            <p class="muted provider-line">{provider}</p>
            <p class="muted">"Token figures marked ~ are chars/4 estimates; the provider's numbers are exact."</p>
        </div>
        {(!show_same && same_count > 0).then(|| view! { <p class="muted">{format!("{same_count} unchanged block(s) hidden.")}</p> })}
        {blocks}
    }
}

/// Switches to the Payloads surface showing the run diff.
pub fn open_run_diff(app: App) {
    let p = payloads();
    p.tab.set(PayloadTab::Diff);
    app.surface.set(Surface::Payloads);
}
