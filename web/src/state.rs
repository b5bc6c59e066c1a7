//! The app's state: one [`App`] of signals, provided as context, and the stack editor's draft.
//!
//! The draft is the stack's raw JSON object. Editors change members in place through
//! JSON pointers, so unknown members survive every edit. Text that does not parse yet (a JSON
//! option block, a parameter value) lives in `buffers` with its error and blocks saving.

use std::collections::BTreeMap;

use forge_core::diag::{Diagnostic, Level};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};

use forge_core::api::{Activated, LiveView, Reloaded, Resources, StackList, StackView};

use crate::api::{self, seg, ApiError, Method};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    Presets,
    Profiles,
    Capabilities,
    Payloads,
    /// The live session's capabilities (`session`).
    Session,
    Delegation,
}

impl Surface {
    /// Every surface, in the top bar's order.
    pub const ALL: [Surface; 6] = [
        Surface::Presets,
        Surface::Profiles,
        Surface::Capabilities,
        Surface::Payloads,
        Surface::Session,
        Surface::Delegation,
    ];

    /// The surface's name as its tab shows it.
    pub fn label(self) -> &'static str {
        match self {
            Surface::Presets => "Presets",
            Surface::Profiles => "Profiles",
            Surface::Capabilities => "Capabilities",
            Surface::Payloads => "Payloads",
            Surface::Session => "Session",
            Surface::Delegation => "Delegation",
        }
    }
}

/// A watcher change of one resource: `(key, revision, origin)` (`origin` is `self` for the
/// editor's own writes).
pub type Change = (String, Option<String>, String);

/// The scope switch uses forge-core's scope (project / global).
pub use forge_core::id::Scope;

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
    Capabilities,
    Json,
}

/// One row of the stack list (`GET /api/stacks`), with what the row shows (forge-core's
/// `StackRow::title`, `detail` and `badges`, also used by the page the server renders).
#[derive(Clone, Debug, PartialEq)]
pub struct StackRow {
    pub selector: String,
    pub id: String,
    pub scope: String,
    pub name: Option<String>,
    pub active: bool,
    pub title: String,
    pub detail: String,
    pub badges: Vec<forge_core::api::RowBadge>,
}

impl StackRow {
    fn from_row(v: forge_core::api::StackRow) -> StackRow {
        let (title, detail, badges) = (v.title().to_string(), v.detail(), v.badges());
        StackRow {
            selector: v.common.selector,
            id: v.common.id,
            scope: v.common.scope,
            name: v.name.filter(|n| !n.trim().is_empty()),
            active: v.active,
            title,
            detail,
            badges,
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
    /// The server's diagnostics of `saved` (`None` once `saved` is no longer the file the
    /// server checked: a merge takes the disk's version from a conflict answer).
    pub server_diagnostics: Option<Vec<Diagnostic>>,
    /// Why the file could not be read (too large, not a regular file, …): the editor shows it
    /// read-only with this reason.
    pub unreadable: Option<String>,
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

/// forge-core's checks of a Preset draft, as the server validates one: the file format, the
/// templates and the structure of the capability bindings (relative to the Preset's scope).
/// `file` is the file name the diagnostics name.
pub type DraftChecks =
    fn(forge_core::id::Scope, &serde_json::Value, &str) -> Vec<forge_core::diag::Diagnostic>;

/// Loads the draft checks into the signal; clears the flag when they could not be fetched, so
/// the next edit asks again.
pub type LoadDraftChecks = fn(RwSignal<Option<DraftChecks>>, StoredValue<bool>);

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
    /// The open Preset's file was deleted on disk and the person kept the draft: Save creates
    /// the file again from it, Fork copies the draft (there is no saved file to copy).
    pub file_gone: RwSignal<bool>,
    /// A draft restored from the browser's local storage (banner; `crate::drafts`).
    pub restored: RwSignal<Option<crate::drafts::Restored>>,
    pub conflict: RwSignal<Option<Conflict>>,
    pub busy: RwSignal<bool>,
    pub dirty: Memo<bool>,
    pub diagnostics: Memo<Vec<Diagnostic>>,
    pub errors: Memo<usize>,
    /// Text edited in the JSON tab and not applied yet (`None`: the tab shows the draft). It
    /// survives tab switches and saves of the same Preset; opening another Preset asks first.
    pub json_scratch: RwSignal<Option<String>>,
    /// The text the JSON tab was filled with from disk (a file that is not JSON, to repair):
    /// scratch text equal to it is not an edit.
    pub json_origin: RwSignal<Option<String>>,
    /// Undo/redo over every change of the draft.
    pub undo: crate::undo::Undo,
    /// The newest load (or direct fill) of the editor; an answer to an older one is dropped.
    load_seq: StoredValue<u64>,
    /// The newest load whose answer has arrived (`!= load_seq`: a load is in flight).
    load_done: StoredValue<u64>,
    /// A change event for the open stack that arrived while a save was in flight (it may be
    /// that save's own event, which arrives before the PUT's answer); replayed after it.
    pending_change: StoredValue<Option<(String, Option<String>)>>,
}

impl StackEditor {
    fn new(load_checks: LoadDraftChecks) -> StackEditor {
        let loaded: RwSignal<Option<Loaded>> = RwSignal::new(None);
        let draft = RwSignal::new(Value::Null);
        let buffers = RwSignal::new(BTreeMap::new());
        let dirty = Memo::new(move |_| {
            loaded.with(|l| match l {
                Some(l) => draft.with(|d| *d != l.saved),
                None => false,
            }) || buffers.with(|b| !b.is_empty())
        });
        let checks: RwSignal<Option<DraftChecks>> = RwSignal::new(None);
        let checks_asked = StoredValue::new(false);
        let diagnostics = Memo::new(move |previous: Option<&Vec<Diagnostic>>| {
            // While the draft is the file, the server's diagnostics of that file (the codec's,
            // the templates' and the workspace's own checks; for a file that is not JSON, its
            // parse error with line and column).
            let of_file = loaded.with(|l| {
                l.as_ref()
                    .filter(|l| draft.with(|d| *d == l.saved))
                    .and_then(|l| l.server_diagnostics.clone())
            });
            if let Some(d) = of_file {
                return d;
            }
            if draft.with(Value::is_null) {
                return Vec::new();
            }
            // An edited draft is checked here, by forge-core's file format, template and
            // binding checks (the server's draft validation), from the lazy part that holds
            // them: asked for the first time a draft differs from its file (and again at the
            // next edit when it could not be fetched). Until it has arrived, the previous list
            // stays.
            let Some(check) = checks.get() else {
                if !checks_asked.get_value() {
                    checks_asked.set_value(true);
                    load_checks(checks, checks_asked);
                }
                return previous.cloned().unwrap_or_default();
            };
            let (file, scope) = loaded.with(|l| match l {
                Some(l) => (
                    l.path
                        .rsplit('/')
                        .next()
                        .unwrap_or("draft.json")
                        .to_string(),
                    Scope::parse(&l.scope).unwrap_or(Scope::Project),
                ),
                None => ("draft.json".to_string(), Scope::Project),
            });
            draft.with(|d| check(scope, d, &file))
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
            file_gone: RwSignal::new(false),
            restored: RwSignal::new(None),
            conflict: RwSignal::new(None),
            busy: RwSignal::new(false),
            dirty,
            json_scratch: RwSignal::new(None),
            json_origin: RwSignal::new(None),
            undo: crate::undo::Undo::new(draft),
            diagnostics,
            errors,
            load_seq: StoredValue::new(0),
            load_done: StoredValue::new(0),
            pending_change: StoredValue::new(None),
        }
    }

    /// Starts a new load generation: answers to older loads and saves are dropped.
    fn next_load(&self) -> u64 {
        let my = self.load_seq.get_value() + 1;
        self.load_seq.set_value(my);
        my
    }

    fn load_pending(&self) -> bool {
        self.load_seq.get_value() != self.load_done.get_value()
    }

    /// Moves buffers of `prefix<index>:…` keys to `map(index)` (`None` drops them): items or
    /// parameters inserted or removed before them.
    pub fn reindex_buffers(&self, prefix: &str, map: impl Fn(usize) -> Option<usize>) {
        self.buffers.update(|b| {
            let keys: Vec<String> = b
                .keys()
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect();
            let mut moved = Vec::new();
            for k in keys {
                let rest = &k[prefix.len()..];
                let (idx, tail) = rest
                    .split_once(':')
                    .map_or((rest, None), |(i, t)| (i, Some(t)));
                let Ok(i) = idx.parse::<usize>() else {
                    continue;
                };
                let v = b.remove(&k).unwrap_or_default();
                if let Some(j) = map(i) {
                    let key = match tail {
                        Some(t) => format!("{prefix}{j}:{t}"),
                        None => format!("{prefix}{j}"),
                    };
                    moved.push((key, v));
                }
            }
            b.extend(moved);
        });
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

    /// The JSON tab holds text the user typed and has not applied to the editor.
    pub fn json_pending(&self) -> bool {
        let origin = self.json_origin;
        self.json_scratch.with(|s| {
            s.as_ref()
                .is_some_and(|t| origin.with(|o| o.as_deref() != Some(t.as_str())))
        })
    }

    pub fn can_save(&self) -> bool {
        self.loaded
            .with(|l| l.as_ref().is_some_and(|l| l.unreadable.is_none()))
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
    /// Whether a live Pi session is connected (`live.connected`).
    pub live_host: RwSignal<bool>,
    /// The live Pi session as `GET /api/live` and the `live` event describe it
    /// (`{"connected":false}` without one).
    pub live: RwSignal<LiveView>,
    /// Why the last Activate/Deactivate could not act (the server's words), shown as a banner
    /// in the editor until dismissed or a later one succeeds.
    pub live_error: RwSignal<Option<String>>,
    /// Counts `live` events; a `GET /api/live` sent before the newest one is dropped.
    live_seq: StoredValue<u64>,
    /// The live session's capability view (the `capability-state` event, `GET
    /// /api/capability-state`, a mutation's answer); `None` without a live session.
    pub cap_state: RwSignal<Option<forge_core::capability::view::CapabilityStateView>>,
    /// Whether `cap_state` has been heard of at all (an event or an answer).
    pub cap_state_known: RwSignal<bool>,
    /// Counts `capability-state` events; an answer to a request sent before the newest one is
    /// dropped (the event is newer).
    pub cap_seq: StoredValue<u64>,
    pub cwd: RwSignal<String>,
    /// Workspace-level problems (a resource folder that cannot be listed, a watcher that
    /// stopped): shown as a banner until a reload clears them.
    pub problems: RwSignal<Vec<String>>,
    pub status: RwSignal<(String, Tone)>,
    pub dialog: RwSignal<Option<Dialog>>,
    pub dark: RwSignal<bool>,
    pub editor: StackEditor,
    /// Tools and skills of the runtime (`GET /api/resources`), read through [`App::resources`].
    resources: RwSignal<Resources>,
    /// Whether [`App::resources`] has asked for them.
    resources_asked: StoredValue<bool>,
    /// Increments on every change event about profiles; the profiles surface refetches.
    pub profile_events: RwSignal<u64>,
    /// Bumped by every `payloads` server event (a capture, late usage, an arm or a clear).
    pub payload_events: RwSignal<u64>,
    /// Bumped by every `agent-plans` server event (a plan added or decided, a run ended).
    pub agent_events: RwSignal<u64>,
    /// How many delegation plans wait for a person (the `agent-plans` event).
    pub plans_pending: RwSignal<u64>,
    /// The last profile change event.
    pub profile_change: RwSignal<Option<Change>>,
    /// Increments on every change event about capabilities or stacks (which Presets bind a
    /// capability); the capabilities surface refetches.
    pub capability_events: RwSignal<u64>,
    pub capability_change: RwSignal<Option<Change>>,
    /// Text a Preset block hands to a new capability ("New capability from this text").
    pub capability_seed: RwSignal<Option<String>>,
    /// The library surface on screen (profiles, capabilities) has unsaved edits (for the
    /// surface-switch guard, the unload prompt and Ctrl+S).
    pub form_dirty: RwSignal<bool>,
    pub form_save: RwSignal<Option<Callback<()>>>,
    /// The newest stack-list request; an older answer arriving later is dropped.
    list_seq: StoredValue<u64>,
    /// The workspace generation of the list embedded in the page (`None`: it was fetched).
    boot_generation: StoredValue<Option<u64>>,
    /// A request was refused with "Invalid pi-forge editor token." (the server restarted): the
    /// banner asks to open the new URL and the page reconnects (`crate::drafts`).
    pub session_lost: RwSignal<bool>,
    /// A request or the event stream found no server at this address (stopped, restarting or
    /// crashed): the banner says how to start it and the page reconnects (`crate::drafts`).
    pub server_gone: RwSignal<bool>,
    /// False until the stack list has been painted once; the editor, the preview dock and the
    /// dialogs are built after that, so they never delay the first rows.
    pub shell_ready: RwSignal<bool>,
}

impl App {
    /// `load_checks` fetches the draft checks on demand (`split::draft_checks`).
    pub fn new(load_checks: LoadDraftChecks) -> App {
        App {
            surface: RwSignal::new(Surface::Presets),
            scope: RwSignal::new(Scope::Project),
            search: RwSignal::new(String::new()),
            stacks: RwSignal::new(Vec::new()),
            stacks_loaded: RwSignal::new(false),
            active_id: RwSignal::new(None),
            trusted: RwSignal::new(true),
            live_host: RwSignal::new(false),
            live: RwSignal::new(LiveView::default()),
            live_error: RwSignal::new(None),
            live_seq: StoredValue::new(0),
            cap_state: RwSignal::new(None),
            cap_state_known: RwSignal::new(false),
            cap_seq: StoredValue::new(0),
            cwd: RwSignal::new(String::new()),
            problems: RwSignal::new(Vec::new()),
            status: RwSignal::new(("Loading…".into(), Tone::Info)),
            dialog: RwSignal::new(None),
            dark: RwSignal::new(false),
            editor: StackEditor::new(load_checks),
            resources: RwSignal::new(Resources::default()),
            resources_asked: StoredValue::new(false),
            profile_events: RwSignal::new(0),
            payload_events: RwSignal::new(0),
            agent_events: RwSignal::new(0),
            plans_pending: RwSignal::new(0),
            profile_change: RwSignal::new(None),
            capability_events: RwSignal::new(0),
            capability_change: RwSignal::new(None),
            capability_seed: RwSignal::new(None),
            form_dirty: RwSignal::new(false),
            form_save: RwSignal::new(None),
            list_seq: StoredValue::new(0),
            boot_generation: StoredValue::new(None),
            shell_ready: RwSignal::new(false),
            session_lost: RwSignal::new(false),
            server_gone: RwSignal::new(false),
        }
    }

    /// Tools and skills of the runtime, fetched (`GET /api/resources`) the first time a view
    /// asks: only lazy parts (the tool lists of the Policy and Capabilities tabs and of the
    /// Capabilities surface) show them, so their reader is not in the main module.
    pub fn resources(self) -> RwSignal<Resources> {
        if !self.resources_asked.get_value() {
            self.resources_asked.set_value(true);
            spawn_local(async move {
                if let Ok(v) = api::get_as::<Resources>("/api/resources").await {
                    self.resources.set(v);
                }
            });
        }
        self.resources
    }

    pub fn say(&self, text: impl Into<String>, tone: Tone) {
        self.status.set((text.into(), tone));
    }

    pub fn fail(&self, e: &ApiError) {
        if e.is_transport() {
            self.server_gone.set(true);
            self.say(SERVER_GONE_STATUS, Tone::Error);
            return;
        }
        if e.status == 403 && e.message == crate::drafts::INVALID_TOKEN {
            self.server_gone.set(false);
            self.session_lost.set(true);
            self.say(
                "Not saved: the session with the pi-forge server ended; see the banner.",
                Tone::Error,
            );
            return;
        }
        self.say(e.message.clone(), Tone::Error);
    }

    /// Asks before dropping unsaved work of the current surface; runs `then` at once when
    /// there is none.
    pub fn guard(&self, what: &str, then: impl Fn() + Send + Sync + 'static) {
        let dirty = match self.surface.get_untracked() {
            Surface::Presets => {
                self.editor.dirty.get_untracked() || untrack(|| self.editor.json_pending())
            }
            Surface::Profiles | Surface::Capabilities => self.form_dirty.get_untracked(),
            Surface::Payloads | Surface::Session | Surface::Delegation => false,
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
/// The banner's Reload: the server reads the workspace again, then the list follows.
pub fn reload_workspace(app: App) {
    spawn_local(async move {
        match api::post_as::<Reloaded>("/api/reload", &json!({})).await {
            Ok(_) => refresh_stacks(app),
            Err(e) => app.say(e.message, Tone::Error),
        }
    });
}

pub fn refresh_stacks(app: App) {
    let my = app.list_seq.get_value() + 1;
    app.list_seq.set_value(my);
    let loads_before = app.editor.load_seq.get_value();
    spawn_local(async move {
        let result = api::get_as::<StackList>("/api/stacks").await;
        if app.list_seq.get_value() != my {
            return; // a newer list was asked for
        }
        match result {
            Ok(v) => apply_list(app, v, loads_before),
            Err(e) => app.fail(&e),
        }
    });
}

/// Takes the stack list the server embedded in the page (`<script type="application/json"
/// id="forge-initial">{generation, list}</script>`), so the first rows need no request. Returns
/// false when the page has none (the caller fetches the list then).
pub fn boot_list(app: App) -> bool {
    let Some(text) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("forge-initial"))
        .and_then(|e| e.text_content())
    else {
        return false;
    };
    #[derive(serde::Deserialize)]
    struct Initial {
        generation: u64,
        list: StackList,
    }
    let Ok(data) = crate::api::parse::<Initial>(&text) else {
        return false;
    };
    app.boot_generation.set_value(Some(data.generation));
    apply_list(app, data.list, app.editor.load_seq.get_value());
    true
}

/// The generation of the embedded list, when the page had one: the first `ready` event
/// refetches the list only when the workspace changed since.
pub fn boot_generation(app: App) -> Option<u64> {
    app.boot_generation.get_value()
}

/// Shows a stack list (`GET /api/stacks` or the page's embedded copy); when nothing is open,
/// opens the active stack or the first one. `loads_before` is the editor's load count when the
/// list was asked for.
fn apply_list(app: App, v: StackList, loads_before: u64) {
    let first_load = !app.stacks_loaded.get_untracked();
    // A row clicked on the page's first screen before the app started wins over the default.
    let clicked = first_load
        .then(crate::dom::take_first_screen_click)
        .flatten()
        .and_then(|sel| v.stacks.iter().find(|r| r.common.selector == sel));
    let pick = clicked
        .or_else(|| v.opening(app.scope.get_untracked().as_str()))
        .map(|r| (r.common.selector.clone(), r.common.scope.clone()));
    let rows: Vec<StackRow> = v.stacks.into_iter().map(StackRow::from_row).collect();
    app.active_id.set(v.active_id);
    app.trusted.set(v.trusted);
    app.cwd.set(v.cwd);
    app.problems
        .set(v.problems.into_iter().map(|d| d.message).collect());
    app.stacks.set(rows);
    if first_load {
        // After the DOM update: "pi-forge:stack-list" marks when the list is on screen,
        // "pi-forge:stack-list-painted" when it was painted (read by `cargo xtask bench`).
        request_animation_frame(|| {
            crate::dom::mark("pi-forge:stack-list");
            // A task queued from the frame runs after that frame's paint.
            set_timeout(
                || crate::dom::mark("pi-forge:stack-list-painted"),
                std::time::Duration::ZERO,
            );
        });
    }
    app.stacks_loaded.set(true);
    let open = app
        .editor
        .loaded
        .with_untracked(|l| l.as_ref().map(|l| l.selector.clone()));
    match open {
        // A stack the user chose is on its way.
        None if app.editor.load_pending() => {}
        None => match pick {
            Some((sel, scope)) => {
                // The list shows the opened Preset's scope (an untrusted project has global
                // Presets only).
                if let Some(scope) = Scope::parse(&scope) {
                    app.scope.set(scope);
                }
                load_stack(app, sel, true)
            }
            None if first_load => app.say("No prompt stacks found.", Tone::Info),
            None => {}
        },
        Some(sel) => {
            let exists = app
                .stacks
                .with_untracked(|rows| rows.iter().any(|r| r.selector == sel));
            // A list asked for before the open stack was created or loaded may not hold it yet.
            let opened_since = app.editor.load_seq.get_value() != loads_before;
            if !exists && !opened_since && !app.editor.dirty.get_untracked() {
                close_stack(app);
                refresh_stacks(app);
            }
        }
    }
}

/// Clears the editor (the open stack is gone).
pub fn close_stack(app: App) {
    let ed = app.editor;
    let my = ed.next_load();
    ed.load_done.set_value(my);
    ed.loaded.set(None);
    ed.undo.load();
    ed.draft.set(Value::Null);
    ed.buffers.set(BTreeMap::new());
    ed.json_scratch.set(None);
    ed.json_origin.set(None);
    ed.item.set(None);
    ed.disk_change.set(None);
    ed.file_gone.set(false);
    ed.restored.set(None);
    ed.conflict.set(None);
}

/// The saved side described by a stack view (`GET /api/stacks/:sel` or a write's answer).
fn loaded_from(view: &StackView) -> Loaded {
    let c = &view.common;
    Loaded {
        selector: c.selector.clone(),
        id: c.id.clone(),
        scope: c.scope.clone(),
        path: c.path.clone(),
        revision: c.revision.clone(),
        saved: view.stack.clone(),
        server_diagnostics: Some(c.diagnostics.clone()),
        unreadable: c.unreadable.clone(),
    }
}

/// Fills the editor from a stack view (a create, fork or import answer): any load or save
/// still in flight is superseded.
pub fn apply_view(app: App, view: &StackView, keep_item: bool) {
    let my = app.editor.next_load();
    app.editor.load_done.set_value(my);
    fill(app, view, keep_item);
}

fn fill(app: App, view: &StackView, keep_item: bool) {
    let ed = app.editor;
    let loaded = loaded_from(view);
    let same = ed
        .loaded
        .with_untracked(|l| l.as_ref().is_some_and(|l| l.selector == loaded.selector));
    if !same {
        ed.json_scratch.set(None);
        ed.json_origin.set(None);
        // An activation's failure is about the Preset it was for.
        if app.live_error.with_untracked(Option::is_some) {
            app.live_error.set(None);
        }
    }
    let stack = loaded.saved.clone();
    let count = stack
        .get("items")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    // Only what changed is set: after a save the draft already equals the file, and setting it
    // again would rebuild the open item's editor and take the focus and caret from the user.
    if ed.draft.with_untracked(|d| *d != stack) {
        ed.undo.load();
        ed.draft.set(stack);
    }
    if ed.buffers.with_untracked(|b| !b.is_empty()) {
        ed.buffers.set(BTreeMap::new());
    }
    if ed.disk_change.with_untracked(Option::is_some) {
        ed.disk_change.set(None);
    }
    if ed.file_gone.get_untracked() {
        ed.file_gone.set(false);
    }
    if ed.conflict.with_untracked(Option::is_some) {
        ed.conflict.set(None);
    }
    let item = if keep_item {
        ed.item.get_untracked().filter(|i| *i < count)
    } else {
        None
    }
    .or(if count > 0 { Some(0) } else { None });
    if ed.item.get_untracked() != item {
        ed.item.set(item);
    }
    // Opening a file restores the unsaved draft this browser kept for it (never silently over
    // a newer file: that one is offered as a merge); a save or reload of the open file ends
    // the banner.
    let restored = if same {
        None
    } else {
        crate::drafts::read(&loaded.path).and_then(|kept| {
            let plan = crate::drafts::restore_plan(&kept, &loaded.revision, &loaded.saved);
            if plan.as_ref().is_some_and(|p| p.stale.is_none()) {
                ed.draft.set(kept.draft);
            }
            plan
        })
    };
    if ed.restored.with_untracked(|r| *r != restored) {
        ed.restored.set(restored);
    }
    ed.loaded.set(Some(loaded));
}

/// Loads `selector` into the editor (callers guard unsaved work first). Only the newest load's
/// answer is applied: clicking two stacks quickly opens the second, whatever answers first.
pub fn load_stack(app: App, selector: String, announce: bool) {
    let ed = app.editor;
    let my = ed.next_load();
    spawn_local(async move {
        let result = api::get_as::<StackView>(&format!("/api/stacks/{}", seg(&selector))).await;
        if ed.load_seq.get_value() != my {
            return; // the user moved on
        }
        ed.load_done.set_value(my);
        match result {
            Ok(view) => {
                let same = ed
                    .loaded
                    .with_untracked(|l| l.as_ref().is_some_and(|l| l.selector == selector));
                fill(app, &view, same);
                if announce {
                    app.say(format!("Loaded {}", view.common.id), Tone::Info);
                }
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// Reloads the open, clean stack after a change on disk. Edits typed while the request was in
/// flight are kept (the banner offers the reload instead); a load the user started wins.
fn reload_stack(app: App, selector: String) {
    let ed = app.editor;
    if ed.load_pending() {
        return;
    }
    let my = ed.next_load();
    spawn_local(async move {
        let result = api::get_as::<StackView>(&format!("/api/stacks/{}", seg(&selector))).await;
        if ed.load_seq.get_value() != my {
            return;
        }
        ed.load_done.set_value(my);
        let Ok(view) = result else {
            return; // deleted meanwhile: its own event follows
        };
        let Some(loaded) = ed.loaded.get_untracked() else {
            return;
        };
        if loaded.selector != selector || view.common.revision == loaded.revision {
            return;
        }
        if ed.dirty.get_untracked() {
            ed.disk_change.set(Some(view.common.revision));
            return;
        }
        fill(app, &view, true);
        app.say(format!("Reloaded {} from disk", loaded.id), Tone::Info);
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
    if untrack(|| ed.json_pending()) {
        app.say(
            "Not saved: the JSON tab has text you have not applied. Apply it to the editor (or reset it), then save.",
            Tone::Error,
        );
        return;
    }
    if ed.errors.get_untracked() > 0 {
        app.say("Fix the errors before saving.", Tone::Error);
        return;
    }
    let gone = ed.file_gone.get_untracked();
    if force_revision.is_none() && !gone && !ed.dirty.get_untracked() {
        return;
    }
    if ed.busy.get_untracked() {
        return; // one save at a time (a second one would conflict with the first)
    }
    if gone {
        recreate_stack(app, loaded);
        return;
    }
    let revision = force_revision.unwrap_or(loaded.revision.clone());
    let sent = ed.draft.get_untracked();
    let body = json!({ "stack": sent });
    let seq = ed.load_seq.get_value();
    ed.busy.set(true);
    spawn_local(async move {
        let path = format!("/api/stacks/{}", seg(&loaded.selector));
        let result =
            api::call_as::<StackView>(Method::Put, &path, Some(&body), Some(&revision)).await;
        ed.busy.set(false);
        let pending = ed.pending_change.try_update_value(Option::take).flatten();
        // Another stack was opened (or this one reloaded) meanwhile: the answer is not the
        // editor's any more.
        let current = ed.load_seq.get_value() == seq
            && ed
                .loaded
                .with_untracked(|l| l.as_ref().is_some_and(|l| l.selector == loaded.selector));
        match result {
            Ok(_) if !current => {
                app.say(format!("Saved {}", loaded.id), Tone::Ok);
                refresh_stacks(app);
            }
            Ok(view) => {
                let unchanged = ed.draft.with_untracked(|d| *d == sent)
                    && ed.buffers.with_untracked(BTreeMap::is_empty);
                if unchanged {
                    fill(app, &view, true);
                } else {
                    // Typed while the save was in flight: keep it, as unsaved changes over
                    // the new revision.
                    ed.loaded.set(Some(loaded_from(&view)));
                    ed.disk_change.set(None);
                    ed.conflict.set(None);
                }
                app.say(format!("Saved {}", loaded.id), Tone::Ok);
                refresh_stacks(app);
                if let Some((key, rev)) = pending {
                    on_stack_change(app, &key, rev);
                }
            }
            Err(e) if !current => app.fail(&e),
            Err(e) if e.is_stale() => {
                ed.conflict.set(Some(Conflict {
                    revision: e.body.current_revision.clone().unwrap_or_default(),
                    current: e.body.current.clone().unwrap_or(Value::Null),
                }));
                ed.disk_change.set(None);
                app.say(
                    "Not saved: the file changed on disk. Choose which version to keep.",
                    Tone::Error,
                );
            }
            Err(e) => {
                app.fail(&e);
                if let Some((key, rev)) = pending {
                    on_stack_change(app, &key, rev);
                }
            }
        }
    });
}

/// Save when the file was deleted on disk and the person kept the draft: a create with the
/// draft's content in the same scope (never over a file that appeared meanwhile: that is a 409
/// naming it, and its own change event offers the reload).
fn recreate_stack(app: App, loaded: Loaded) {
    let ed = app.editor;
    let sent = ed.draft.get_untracked();
    let body = json!({ "stack": sent, "scope": loaded.scope });
    let seq = ed.load_seq.get_value();
    ed.busy.set(true);
    spawn_local(async move {
        let result = api::post_as::<StackView>("/api/stacks", &body).await;
        ed.busy.set(false);
        let current = ed.load_seq.get_value() == seq
            && ed
                .loaded
                .with_untracked(|l| l.as_ref().is_some_and(|l| l.selector == loaded.selector));
        match result {
            Ok(view) => {
                if current {
                    if ed.draft.with_untracked(|d| *d == sent) {
                        fill(app, &view, true);
                    } else {
                        ed.loaded.set(Some(loaded_from(&view)));
                        ed.file_gone.set(false);
                    }
                }
                app.say(
                    format!("Saved {}: its file was written again", loaded.id),
                    Tone::Ok,
                );
                refresh_stacks(app);
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
    if ed.busy.get_untracked() {
        // Most likely our own save's event, ahead of the PUT's answer: decide after it.
        ed.pending_change
            .set_value(Some((key.to_string(), revision)));
        return;
    }
    if revision.is_some() && ed.file_gone.get_untracked() {
        ed.file_gone.set(false); // written again (not by this tab): a save is a PUT once more
    }
    if ed.dirty.get_untracked() || ed.file_gone.get_untracked() {
        ed.disk_change
            .set(Some(revision.unwrap_or_else(|| "deleted".into())));
        return;
    }
    match revision {
        Some(_) => reload_stack(app, loaded.selector.clone()),
        None => {
            close_stack(app);
            app.say(format!("{} was deleted on disk", loaded.id), Tone::Info);
        }
    }
}

pub use forge_core::api::NO_LIVE_SESSION;

/// The status line when a request found no server (the banner says what to do).
pub const SERVER_GONE_STATUS: &str =
    "The pi-forge server did not answer (it stopped or is restarting); see the banner.";

/// Takes a new view of the live Pi session (a `live` event or `GET /api/live`). When the
/// session or what it runs changed, lists that show the live facts are refetched.
pub fn set_live(app: App, view: LiveView) {
    let connected = view.connected;
    if app.live.with_untracked(|v| *v == view) {
        return;
    }
    app.live.set(view.clone());
    app.live_host.set(connected);
    if connected {
        app.live_error.set(None);
    }
    let active = view.session().and_then(|s| s.active_stack_id.clone());
    app.active_id.set(active);
    // The stack list's `active` flags and the profiles' "Now" column follow the session.
    refresh_stacks(app);
    app.profile_events.update(|n| *n += 1);
}

/// A `live` event from `/api/events`.
pub fn on_live_event(app: App, view: LiveView) {
    app.live_seq.update_value(|n| *n += 1);
    set_live(app, view);
}

/// Fetches `GET /api/live` (on every (re)connect of the event stream). An answer that arrives
/// after a newer `live` event is dropped.
pub fn fetch_live(app: App) {
    let seq = app.live_seq.get_value();
    spawn_local(async move {
        if let Ok(v) = api::get_as::<LiveView>("/api/live").await {
            if app.live_seq.get_value() == seq {
                set_live(app, v);
            }
        }
    });
}

/// What the app says about a failed Activate, Deactivate or Apply: the server's own words,
/// and the indicator is told when the answer says there is no session.
pub fn live_failure(app: App, e: &ApiError) -> String {
    if e.code == "no_live_session" && app.live.with_untracked(|v| v.connected) {
        set_live(app, LiveView::default());
    }
    e.message.clone()
}

/// Validates the open draft as the server does (`POST /api/stacks/:selector/validate`) and
/// says the result in the status line. The Validate button and the palette's Validate.
pub fn validate_stack(app: App) {
    let ed = app.editor;
    let Some(selector) = ed
        .loaded
        .with_untracked(|l| l.as_ref().map(|l| l.selector.clone()))
    else {
        return;
    };
    let body = json!({ "stack": ed.draft.get_untracked() });
    spawn_local(async move {
        let path = format!("/api/stacks/{}/validate", seg(&selector));
        match api::post_as::<forge_core::api::Validation>(&path, &body).await {
            Ok(v) => {
                let (errors, warnings) = (v.errors, v.warnings);
                app.say(
                    format!(
                        "Validation complete: {errors} error{}, {warnings} warning{}",
                        plural(errors),
                        plural(warnings)
                    ),
                    if errors > 0 { Tone::Error } else { Tone::Ok },
                );
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// Activates `selector` in the live Pi session. Without one the server answers 503 and the
/// editor says why (status line and a banner); nothing changes.
pub fn activate(app: App, selector: String) {
    spawn_local(async move {
        let path = format!("/api/stacks/{}/activate", seg(&selector));
        match api::post_as::<Activated>(&path, &json!({})).await {
            Ok(v) => {
                app.live_error.set(None);
                app.active_id.set(v.active_id);
                app.say(format!("Activated {selector} in Pi"), Tone::Ok);
                refresh_stacks(app);
            }
            Err(e) => {
                let message = live_failure(app, &e);
                app.say(format!("Not activated: {message}"), Tone::Error);
                app.live_error
                    .set(Some(format!("{selector} was not activated. {message}")));
            }
        }
    });
}

/// Turns the active Preset off in the live Pi session (`POST /api/disable`).
pub fn deactivate(app: App) {
    spawn_local(async move {
        match api::post_as::<Activated>("/api/disable", &json!({})).await {
            Ok(v) => {
                app.live_error.set(None);
                app.active_id.set(v.active_id);
                app.say("Pi runs without a Preset now", Tone::Ok);
                refresh_stacks(app);
            }
            Err(e) => {
                let message = live_failure(app, &e);
                app.say(format!("Not deactivated: {message}"), Tone::Error);
                app.live_error
                    .set(Some(format!("The Preset was not deactivated. {message}")));
            }
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

/// `"s"` unless `n` is 1.
pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Shows `surface`; the status line starts empty there (an earlier surface's message is about
/// that surface).
fn switch_to(app: App, surface: Surface) {
    app.say("", Tone::Info);
    app.surface.set(surface);
}

/// Shows `surface`. The Preset draft lives in app state and survives a surface switch; an
/// unsaved profile or capability form does not, so leaving its surface with one asks first.
pub fn go(app: App, surface: Surface) {
    if app.surface.get_untracked() == surface {
        return;
    }
    if app.form_dirty.get_untracked() {
        let from = match app.surface.get_untracked() {
            Surface::Capabilities => "Leaving Capabilities",
            _ => "Leaving Profiles",
        };
        app.confirm_discard(from, move || switch_to(app, surface));
    } else {
        switch_to(app, surface);
    }
}
