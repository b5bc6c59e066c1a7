//! The app's state: one [`App`] of signals, provided as context, and the stack editor's draft.
//!
//! The draft is the stack's raw JSON object. Editors change members in place through
//! JSON pointers, so unknown members survive every edit. Text that does not parse yet (a JSON
//! option block, a parameter value) lives in `buffers` with its error and blocks saving.

use std::collections::BTreeMap;

use forge_core::diag::{Diagnostic, Level};
use forge_core::stack::{parse_stack_value, ParseOptions};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use crate::api::{self, arr, b, n, opt_s, s, seg, ApiError, Method};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    Presets,
    Profiles,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Project,
    Global,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::Global => "global",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Info,
    Ok,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Items,
    Stack,
    Regex,
    Policy,
    Json,
}

/// One row of the stack list (`GET /api/stacks`).
#[derive(Clone, Debug, PartialEq)]
pub struct StackRow {
    pub selector: String,
    pub id: String,
    pub scope: String,
    pub name: Option<String>,
    pub mode: String,
    pub items: u64,
    pub errors: u64,
    pub warnings: u64,
    pub active: bool,
    pub shadowed: bool,
    pub legacy: bool,
}

impl StackRow {
    fn from_json(v: &Value) -> StackRow {
        StackRow {
            selector: s(v, "selector"),
            id: s(v, "id"),
            scope: s(v, "scope"),
            name: opt_s(v, "name").filter(|n| !n.trim().is_empty()),
            mode: opt_s(v, "mode").unwrap_or_else(|| "replace".into()),
            items: n(v, "itemCount"),
            errors: n(v, "errors"),
            warnings: n(v, "warnings"),
            active: b(v, "active"),
            shadowed: b(v, "shadowed"),
            legacy: b(v, "legacy"),
        }
    }
}

/// The saved side of the open stack.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    pub selector: String,
    pub id: String,
    pub scope: String,
    pub path: String,
    pub revision: String,
    /// The file's JSON (`Null` when the file is not JSON).
    pub saved: Value,
    pub server_diagnostics: Vec<Value>,
}

/// A save refused because the file changed: what is on disk now.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    pub revision: String,
    pub current: Value,
}

/// An in-app dialog (the app never uses the browser's prompt/confirm).
#[derive(Clone)]
pub enum Dialog {
    Confirm {
        title: String,
        body: String,
        confirm: String,
        danger: bool,
        /// Plain shared closure, not a reactive `Callback`: the view that opened the dialog
        /// may be gone (re-rendered) by the time the user confirms.
        on_confirm: std::sync::Arc<dyn Fn() + Send + Sync>,
    },
    NewStack,
    Fork,
    Import,
}

#[derive(Clone, Copy)]
pub struct StackEditor {
    pub loaded: RwSignal<Option<Loaded>>,
    pub draft: RwSignal<Value>,
    /// Unparsed text by field key: `(text, error)`. Non-empty blocks saving.
    pub buffers: RwSignal<BTreeMap<String, (String, String)>>,
    pub tab: RwSignal<Tab>,
    pub item: RwSignal<Option<usize>>,
    /// The revision a watcher event reported while the draft was dirty (banner).
    pub disk_change: RwSignal<Option<String>>,
    pub conflict: RwSignal<Option<Conflict>>,
    pub busy: RwSignal<bool>,
    pub dirty: Memo<bool>,
    pub diagnostics: Memo<Vec<Diagnostic>>,
    pub errors: Memo<usize>,
}

impl StackEditor {
    fn new() -> StackEditor {
        let loaded: RwSignal<Option<Loaded>> = RwSignal::new(None);
        let draft = RwSignal::new(Value::Null);
        let buffers = RwSignal::new(BTreeMap::new());
        let dirty = Memo::new(move |_| {
            loaded.with(|l| match l {
                Some(l) => draft.with(|d| *d != l.saved),
                None => false,
            }) || buffers.with(|b| !b.is_empty())
        });
        let diagnostics = Memo::new(move |_| {
            let file = loaded.with(|l| {
                l.as_ref()
                    .map(|l| {
                        l.path
                            .rsplit('/')
                            .next()
                            .unwrap_or("draft.json")
                            .to_string()
                    })
                    .unwrap_or_else(|| "draft.json".into())
            });
            draft.with(|d| {
                if d.is_null() {
                    return Vec::new();
                }
                parse_stack_value(d.clone(), &ParseOptions::new(&file)).diagnostics
            })
        });
        let errors = Memo::new(move |_| {
            diagnostics.with(|d| d.iter().filter(|d| d.level == Level::Error).count())
                + buffers.with(BTreeMap::len)
        });
        StackEditor {
            loaded,
            draft,
            buffers,
            tab: RwSignal::new(Tab::Items),
            item: RwSignal::new(None),
            disk_change: RwSignal::new(None),
            conflict: RwSignal::new(None),
            busy: RwSignal::new(false),
            dirty,
            diagnostics,
            errors,
        }
    }

    /// Changes the draft at a JSON pointer (`None` removes the member).
    pub fn set(&self, path: &str, value: Option<Value>) {
        self.draft.update(|d| crate::jp::set(d, path, value));
    }

    pub fn set_buffer(&self, key: &str, text: String, error: Option<String>) {
        self.buffers.update(|b| match error {
            Some(e) => {
                b.insert(key.to_string(), (text, e));
            }
            None => {
                b.remove(key);
            }
        });
    }

    /// Drops buffers whose key starts with `prefix` (a removed item, rule or parameter).
    pub fn clear_buffers(&self, prefix: &str) {
        self.buffers
            .update(|b| b.retain(|k, _| !k.starts_with(prefix)));
    }

    pub fn can_save(&self) -> bool {
        self.loaded.with(Option::is_some)
            && self.dirty.get()
            && self.errors.get() == 0
            && !self.busy.get()
    }
}

#[derive(Clone, Copy)]
pub struct App {
    pub surface: RwSignal<Surface>,
    pub scope: RwSignal<Scope>,
    pub search: RwSignal<String>,
    pub stacks: RwSignal<Vec<StackRow>>,
    pub stacks_loaded: RwSignal<bool>,
    pub active_id: RwSignal<Option<String>>,
    pub trusted: RwSignal<bool>,
    pub live_host: RwSignal<bool>,
    pub cwd: RwSignal<String>,
    pub status: RwSignal<(String, Tone)>,
    pub dialog: RwSignal<Option<Dialog>>,
    pub dark: RwSignal<bool>,
    pub editor: StackEditor,
    /// Tools and skills of the runtime (`GET /api/resources`).
    pub resources: RwSignal<Value>,
    /// Increments on every change event about profiles; the profiles surface refetches.
    pub profile_events: RwSignal<u64>,
    /// The last profile change event: `(key, revision, origin)`.
    pub profile_change: RwSignal<Option<(String, Option<String>, String)>>,
    /// The profiles surface has unsaved edits (for the surface-switch guard and Ctrl+S).
    pub profile_dirty: RwSignal<bool>,
    pub profile_save: RwSignal<Option<Callback<()>>>,
}

impl App {
    pub fn new() -> App {
        App {
            surface: RwSignal::new(Surface::Presets),
            scope: RwSignal::new(Scope::Project),
            search: RwSignal::new(String::new()),
            stacks: RwSignal::new(Vec::new()),
            stacks_loaded: RwSignal::new(false),
            active_id: RwSignal::new(None),
            trusted: RwSignal::new(true),
            live_host: RwSignal::new(false),
            cwd: RwSignal::new(String::new()),
            status: RwSignal::new(("Loading…".into(), Tone::Info)),
            dialog: RwSignal::new(None),
            dark: RwSignal::new(false),
            editor: StackEditor::new(),
            resources: RwSignal::new(Value::Null),
            profile_events: RwSignal::new(0),
            profile_change: RwSignal::new(None),
            profile_dirty: RwSignal::new(false),
            profile_save: RwSignal::new(None),
        }
    }

    pub fn say(&self, text: impl Into<String>, tone: Tone) {
        self.status.set((text.into(), tone));
    }

    pub fn fail(&self, e: &ApiError) {
        self.say(e.message.clone(), Tone::Error);
    }

    /// Asks before dropping unsaved work of the current surface; runs `then` at once when
    /// there is none.
    pub fn guard(&self, what: &str, then: impl Fn() + Send + Sync + 'static) {
        let dirty = match self.surface.get_untracked() {
            Surface::Presets => self.editor.dirty.get_untracked(),
            Surface::Profiles => self.profile_dirty.get_untracked(),
        };
        if !dirty {
            then();
            return;
        }
        self.confirm_discard(what, then);
    }

    /// The in-app "discard unsaved changes?" dialog; `then` runs on confirm.
    pub fn confirm_discard(&self, what: &str, then: impl Fn() + Send + Sync + 'static) {
        self.dialog.set(Some(Dialog::Confirm {
            title: "Discard unsaved changes?".into(),
            body: format!("You have unsaved changes. {what} discards them."),
            confirm: "Discard changes".into(),
            danger: true,
            on_confirm: std::sync::Arc::new(then),
        }));
    }
}

pub fn app() -> App {
    expect_context::<App>()
}

/// Refetches the stack list; when nothing is open, opens the active stack or the first one.
pub fn refresh_stacks(app: App) {
    spawn_local(async move {
        match api::get("/api/stacks").await {
            Ok(v) => {
                let rows: Vec<StackRow> =
                    arr(&v, "stacks").iter().map(StackRow::from_json).collect();
                app.active_id.set(opt_s(&v, "activeId"));
                app.trusted
                    .set(v.get("trusted").and_then(Value::as_bool).unwrap_or(true));
                app.cwd.set(s(&v, "cwd"));
                app.stacks.set(rows);
                let first_load = !app.stacks_loaded.get_untracked();
                if first_load {
                    // After the DOM update: "pi-forge:stack-list" marks when the list is on
                    // screen (read by `cargo xtask bench`).
                    request_animation_frame(|| {
                        if let Some(perf) = web_sys::window().and_then(|w| w.performance()) {
                            let _ = perf.mark("pi-forge:stack-list");
                        }
                    });
                }
                app.stacks_loaded.set(true);
                let open = app
                    .editor
                    .loaded
                    .with_untracked(|l| l.as_ref().map(|l| l.selector.clone()));
                match open {
                    None => {
                        let pick = app.stacks.with_untracked(|rows| {
                            let active = app.active_id.get_untracked();
                            rows.iter()
                                .find(|r| Some(&r.selector) == active.as_ref())
                                .or_else(|| {
                                    rows.iter()
                                        .find(|r| r.scope == app.scope.get_untracked().as_str())
                                })
                                .or_else(|| rows.first())
                                .map(|r| r.selector.clone())
                        });
                        match pick {
                            Some(sel) => load_stack(app, sel, true),
                            None if first_load => app.say("No prompt stacks found.", Tone::Info),
                            None => {}
                        }
                    }
                    Some(sel) => {
                        let exists = app
                            .stacks
                            .with_untracked(|rows| rows.iter().any(|r| r.selector == sel));
                        if !exists && !app.editor.dirty.get_untracked() {
                            close_stack(app);
                            refresh_stacks(app);
                        }
                    }
                }
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// Clears the editor (the open stack is gone).
pub fn close_stack(app: App) {
    let ed = app.editor;
    ed.loaded.set(None);
    ed.draft.set(Value::Null);
    ed.buffers.set(BTreeMap::new());
    ed.item.set(None);
    ed.disk_change.set(None);
    ed.conflict.set(None);
}

/// Fills the editor from a stack view (`GET /api/stacks/:sel` or a write's answer).
pub fn apply_view(app: App, view: &Value, keep_item: bool) {
    let ed = app.editor;
    let stack = view.get("stack").cloned().unwrap_or(Value::Null);
    let loaded = Loaded {
        selector: s(view, "selector"),
        id: s(view, "id"),
        scope: s(view, "scope"),
        path: s(view, "path"),
        revision: s(view, "revision"),
        saved: stack.clone(),
        server_diagnostics: arr(view, "diagnostics").to_vec(),
    };
    let count = arr(&stack, "items").len();
    ed.draft.set(stack);
    ed.buffers.set(BTreeMap::new());
    ed.disk_change.set(None);
    ed.conflict.set(None);
    let item = if keep_item {
        ed.item.get_untracked().filter(|i| *i < count)
    } else {
        None
    }
    .or(if count > 0 { Some(0) } else { None });
    ed.item.set(item);
    ed.loaded.set(Some(loaded));
}

/// Loads `selector` into the editor (callers guard unsaved work first).
pub fn load_stack(app: App, selector: String, announce: bool) {
    spawn_local(async move {
        match api::get(&format!("/api/stacks/{}", seg(&selector))).await {
            Ok(view) => {
                let same = app
                    .editor
                    .loaded
                    .with_untracked(|l| l.as_ref().is_some_and(|l| l.selector == selector));
                apply_view(app, &view, same);
                if announce {
                    app.say(format!("Loaded {}", s(&view, "id")), Tone::Info);
                }
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// Opens another stack, asking first when the draft has unsaved changes.
pub fn open_stack(app: App, selector: String) {
    let current = app
        .editor
        .loaded
        .with_untracked(|l| l.as_ref().map(|l| l.selector.clone()));
    if current.as_deref() == Some(selector.as_str()) {
        return;
    }
    app.guard("Opening another Preset", move || {
        load_stack(app, selector.clone(), true)
    });
}

/// Saves the draft over the loaded revision; `force_revision` overwrites a conflicting file on
/// the user's explicit choice.
pub fn save_stack(app: App, force_revision: Option<String>) {
    let ed = app.editor;
    let Some(loaded) = ed.loaded.get_untracked() else {
        return;
    };
    if ed.errors.get_untracked() > 0 {
        app.say("Fix the errors before saving.", Tone::Error);
        return;
    }
    if force_revision.is_none() && !ed.dirty.get_untracked() {
        return;
    }
    let revision = force_revision.unwrap_or(loaded.revision.clone());
    let body = json!({ "stack": ed.draft.get_untracked() });
    ed.busy.set(true);
    spawn_local(async move {
        let path = format!("/api/stacks/{}", seg(&loaded.selector));
        let result = api::call(Method::Put, &path, Some(&body), Some(&revision)).await;
        ed.busy.set(false);
        match result {
            Ok(view) => {
                apply_view(app, &view, true);
                app.say(format!("Saved {}", loaded.id), Tone::Ok);
                refresh_stacks(app);
            }
            Err(e) if e.is_stale() => {
                ed.conflict.set(Some(Conflict {
                    revision: s(&e.body, "currentRevision"),
                    current: e.body.get("current").cloned().unwrap_or(Value::Null),
                }));
                ed.disk_change.set(None);
                app.say(
                    "Not saved: the file changed on disk. Choose which version to keep.",
                    Tone::Error,
                );
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// Applies one change from `/api/events` to the open stack.
pub fn on_stack_change(app: App, key: &str, revision: Option<String>) {
    let ed = app.editor;
    let Some(loaded) = ed.loaded.get_untracked() else {
        return;
    };
    if loaded.selector != key {
        return;
    }
    if revision.as_deref() == Some(loaded.revision.as_str()) {
        return; // our own save, already applied
    }
    if ed.dirty.get_untracked() {
        ed.disk_change
            .set(Some(revision.unwrap_or_else(|| "deleted".into())));
        return;
    }
    match revision {
        Some(_) => {
            load_stack(app, loaded.selector.clone(), false);
            app.say(format!("Reloaded {} from disk", loaded.id), Tone::Info);
        }
        None => {
            close_stack(app);
            app.say(format!("{} was deleted on disk", loaded.id), Tone::Info);
        }
    }
}

/// Loads `GET /api/resources` once.
pub fn load_resources(app: App) {
    spawn_local(async move {
        if let Ok(v) = api::get("/api/resources").await {
            app.live_host.set(b(&v, "liveHost"));
            app.resources.set(v);
        }
    });
}

/// Activates the open stack.
pub fn activate(app: App, selector: String) {
    spawn_local(async move {
        let path = format!("/api/stacks/{}/activate", seg(&selector));
        match api::post(&path, &json!({})).await {
            Ok(v) => {
                app.active_id.set(opt_s(&v, "activeId"));
                app.say(format!("Activated {selector}"), Tone::Ok);
                refresh_stacks(app);
            }
            Err(e) => app.fail(&e),
        }
    });
}

pub fn level_class(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Info => "info",
    }
}
