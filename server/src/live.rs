//! The live Pi session: the one owner of everything pi-forge knows about the Pi process that is
//! connected through the bridge extension (`assets/pi-extension/`).
//!
//! The extension is an adapter. It says `hello` with Pi's facts and the branch's pi-forge session
//! entries, keeps one command stream open (`GET /api/host/:id/commands`, SSE; its end is the
//! liveness signal), forwards hook calls (`turn`, `context`, `finalize`) and applies the commands
//! the server pushes (set the active Preset, apply a profile, append session entries). Every rule
//! — which Preset is active after a restore, what a turn compiles to, which tools a Preset
//! allows, what a profile apply changed — is decided here or in forge-core.
//!
//! One live host per project: a second Pi session is refused with `host_busy` unless it asks to
//! take over. A host whose stream does not attach within [`ATTACH_GRACE`], or whose stream ends,
//! is gone: session-bound routes answer 503 `no_live_session` from then on.

use forge_core::api::{LiveSession, LiveView, Model, ModelChoice};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use forge_core::capability::delivery::BranchRecord;
use forge_core::capability::ops::ToolsEntry;
use forge_core::capability::tools::reconcile_baseline;
use forge_core::capability::view::ToolChange;
use forge_core::id::{parse_stack_choice, StackChoice};
use forge_core::profile::ModelRef;
use forge_core::runtime::{Clock, ContextFile, ModelInfo, RuntimeSnapshot, SkillInfo, ToolInfo};
use forge_core::session::{LiveChoice, Restored, SessionEntry};
use forge_core::workspace::{StackEntry, WorkspaceSnapshot};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot, watch};

/// Version of the host protocol; `hello` names the one the extension speaks.
pub const PROTOCOL: u64 = 1;
/// How long a host may take between `hello` and opening its command stream.
pub const ATTACH_GRACE: Duration = Duration::from_secs(5);
/// Interval of the comment pings on the command stream (a dead peer is noticed on the next one).
pub const PING: Duration = Duration::from_secs(1);
/// How long a browser request waits for Pi to carry out a command.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a live-session operation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    #[error("No live Pi session is connected to this editor. Start Pi in this project with the pi-forge extension loaded (see `pi-forge pi install`), then try again.")]
    NoLiveSession,
    #[error("Unknown live host {0}: it disconnected or was replaced. Say hello again.")]
    UnknownHost(String),
    #[error("Session {given} is not the live session ({live}); the request was ignored.")]
    StaleSession { given: String, live: String },
    #[error("Another Pi session ({0}) is already connected to this project's editor. Use `/forge ui restart` in this session to take over.")]
    HostBusy(String),
    #[error("Pi did not carry out the command within {0} seconds (it may be busy with a turn); nothing was recorded.")]
    Timeout(u64),
    #[error("The live Pi session disconnected before the command finished.")]
    Disconnected,
    #[error("Unknown command {0}: it was already answered or never sent.")]
    UnknownCommand(String),
}

// ---------------------------------------------------------------------------------------------
// Facts as the extension sends them

/// Where a tool comes from, as Pi's `sourceInfo` says.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PiSourceInfo {
    pub path: String,
    pub source: String,
    pub scope: String,
    pub origin: String,
}

/// One entry of `pi.getAllTools()` (parameters left out).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PiTool {
    pub name: String,
    pub description: Option<String>,
    pub prompt_guidelines: Vec<String>,
    pub exposure: Option<String>,
    pub source_info: Option<PiSourceInfo>,
}

/// The parts of Pi's `systemPromptOptions` the compiler reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PiPromptOptions {
    pub tool_snippets: Map<String, Value>,
    pub tool_guidelines: Map<String, Value>,
    pub prompt_guidelines: Vec<String>,
    pub append_system_prompt: Option<String>,
    pub context_files: Vec<ContextFile>,
    /// Pi's skills carry the same camelCase fields as forge-core's `SkillInfo`.
    pub skills: Vec<SkillInfo>,
}

/// A model as the extension reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PiModel {
    pub provider: String,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub reasoning: bool,
    /// Pi's `compat.supportsMidConvoSystemMessages` for this model: capability text goes in a
    /// native system message when true, else in an attributed user-role message.
    pub mid_convo_system: bool,
}

/// Everything the extension knows about the Pi process that may change during a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PiFacts {
    pub tools: Vec<PiTool>,
    pub active_tools: Vec<String>,
    /// Pi's own system prompt (before pi-forge), when known.
    pub system_prompt: Option<String>,
    pub prompt_options: Option<PiPromptOptions>,
    pub model: Option<PiModel>,
    pub thinking_level: Option<String>,
    /// Models with credentials (`modelRegistry.getAvailable()`).
    pub models: Vec<PiModel>,
    pub pi_docs_root: Option<String>,
    pub leaf_id: Option<String>,
}

/// `POST /api/host/hello`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hello {
    /// Checked before parsing (see the hello route); kept so the field is not unknown.
    #[allow(dead_code)]
    pub protocol: u64,
    pub extension_version: String,
    pub pi_version: String,
    pub mode: String,
    #[serde(default, rename = "hasUI")]
    pub has_ui: bool,
    pub cwd: String,
    pub session_id: String,
    #[serde(default)]
    pub session_file: Option<String>,
    #[serde(default)]
    pub project_trusted: bool,
    pub facts: PiFacts,
    #[serde(default)]
    pub entries: Vec<SessionEntry>,
    #[serde(default)]
    pub takeover: bool,
}

/// Who is connected.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostInfo {
    pub extension_version: String,
    pub pi_version: String,
    pub mode: String,
    pub has_ui: bool,
    pub cwd: String,
    pub session_id: String,
    pub session_file: Option<String>,
    pub project_trusted: bool,
    pub connected_at: String,
}

// ---------------------------------------------------------------------------------------------
// The hub

/// The connected host.
struct Host {
    id: String,
    info: HostInfo,
    facts: PiFacts,
    /// The conversation of the last `context` call (what the next preview compiles against).
    messages: Vec<Value>,
    clock: Option<Clock>,
    /// `"<scope>:<id>"` of the active Preset.
    active_stack: Option<String>,
    /// The last applied profile's provenance.
    provenance: Option<Value>,
    /// Active tools before any Preset policy (what a Preset's policy starts from).
    baseline_tools: Vec<String>,
    /// The tools the last turn asked Pi to activate.
    applied_tools: Option<Vec<String>>,
    /// What pi-forge knows about the branch's capabilities.
    caps: CapSession,
    /// Bumped on every lifecycle change of this host (hello, takeover); part of the guard.
    lifecycle: u64,
    /// Generation of the attached command stream, if any.
    stream: Option<u64>,
    commands: Option<mpsc::UnboundedSender<Value>>,
    pending: HashMap<String, oneshot::Sender<Value>>,
}

#[derive(Default)]
struct Inner {
    host: Option<Host>,
    counter: u64,
}

/// The one owner of the live-session state.
pub struct LiveHub {
    inner: Mutex<Inner>,
    view: watch::Sender<LiveView>,
    /// Bumped after every change of the host (facts, capabilities, connect, disconnect): the
    /// capability view is recomputed from it.
    ticks: watch::Sender<u64>,
}

/// The branch's capability record as far as pi-forge read or wrote it, plus the delivery cursor.
#[derive(Clone, Debug, Default)]
pub struct CapSession {
    /// Events, newest tools entry and delivery anchor of the branch.
    pub record: BranchRecord,
    /// The newest event id a provider request carried (set when a projection was built).
    pub prepared_through: Option<String>,
    /// What the last tool sync changed.
    pub last_tool_change: Option<ToolChange>,
}

impl Default for LiveHub {
    fn default() -> Self {
        LiveHub::new()
    }
}

/// What the server decided at `hello`.
pub struct Welcome {
    pub host_id: String,
    pub active_stack: Option<String>,
    /// Session entries the extension must append now (the restore changed the state).
    pub entries: Vec<SessionEntry>,
}

/// A claimed command stream: commands to forward, and a guard that ends the host when dropped.
pub struct Attached {
    pub commands: mpsc::UnboundedReceiver<Value>,
    pub guard: StreamGuard,
}

/// Dropped when the command stream ends (the peer closed it or a ping failed).
pub struct StreamGuard {
    hub: Arc<LiveHub>,
    host_id: String,
    generation: u64,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.hub.detach(&self.host_id, self.generation);
    }
}

/// `N` random bytes; without an OS entropy source (getrandom fails), clock-derived bytes, so ids
/// still work.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
            .to_le_bytes();
        for (b, n) in bytes.iter_mut().zip(nanos.iter().cycle()) {
            *b = *n;
        }
    }
    bytes
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_id() -> String {
    hex(&random_bytes::<12>())
}

/// A random UUIDv4 (activation and event ids).
pub fn new_uuid() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

pub(crate) fn now_iso() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

impl LiveHub {
    pub fn new() -> LiveHub {
        let (view, _) = watch::channel(LiveView::default());
        let (ticks, _) = watch::channel(0);
        LiveHub {
            inner: Mutex::new(Inner::default()),
            view,
            ticks,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every update is one assignment).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Browser-facing view of the live session; changes are published to [`Self::watch`].
    pub fn view(&self) -> LiveView {
        self.view.borrow().clone()
    }

    pub fn watch(&self) -> watch::Receiver<LiveView> {
        self.view.subscribe()
    }

    /// A counter bumped after every change of the live host.
    pub fn ticks(&self) -> watch::Receiver<u64> {
        self.ticks.subscribe()
    }

    fn publish(&self, inner: &Inner) {
        self.ticks.send_modify(|n| *n = n.wrapping_add(1));
        let view = match &inner.host {
            Some(host) if host.stream.is_some() => LiveView {
                connected: true,
                session: Some(LiveSession {
                    pi_version: host.info.pi_version.clone(),
                    extension_version: host.info.extension_version.clone(),
                    server_version: crate::VERSION.to_string(),
                    version_mismatch: host.info.extension_version != crate::VERSION,
                    mode: host.info.mode.clone(),
                    session_id: host.info.session_id.clone(),
                    session_file: host.info.session_file.clone(),
                    project_trusted: host.info.project_trusted,
                    connected_at: host.info.connected_at.clone(),
                    model: host.facts.model.as_ref().map(|m| Model {
                        provider: m.provider.clone(),
                        id: m.id.clone(),
                    }),
                    thinking_level: host.facts.thinking_level.clone(),
                    active_stack_id: host.active_stack.clone(),
                    provenance: host.provenance.clone(),
                }),
            },
            _ => LiveView::default(),
        };
        self.view.send_if_modified(|current| {
            if *current == view {
                false
            } else {
                *current = view;
                true
            }
        });
    }

    /// Whether a host with an attached stream is connected.
    pub fn connected(&self) -> bool {
        self.lock()
            .host
            .as_ref()
            .is_some_and(|h| h.stream.is_some())
    }

    /// Registers a host. `decide` turns the branch's entries into the initial state (a rule of
    /// forge-core's; see `restore` in the hello route).
    pub fn hello(
        self: &Arc<Self>,
        hello: Hello,
        decide: impl FnOnce(&[SessionEntry]) -> Restored,
    ) -> Result<Welcome, LiveError> {
        let mut inner = self.lock();
        if let Some(existing) = &inner.host {
            if existing.stream.is_some() && existing.info.session_id != hello.session_id {
                if !hello.takeover {
                    return Err(LiveError::HostBusy(existing.info.session_id.clone()));
                }
                // The session taken over hears it at once, on its own command stream, before
                // the stream ends with the host it belonged to.
                let by = hello
                    .session_file
                    .clone()
                    .unwrap_or_else(|| hello.session_id.clone());
                if let Some(commands) = &existing.commands {
                    let _ = commands.send(notice_command("takeover", &taken_over_notice(&by)));
                }
            }
        }
        let Restored {
            active_stack,
            record: entries,
            provenance,
        } = decide(&hello.entries);
        let host_id = random_id();
        let record = BranchRecord::from_entries(&hello.entries);
        // The branch's durable baseline, reconciled with what Pi has active now; else Pi's
        // current tools.
        let baseline = match &record.tools {
            Some(entry) => reconcile_baseline(
                &entry.baseline,
                &entry.last_applied,
                &hello.facts.active_tools,
            ),
            None => hello.facts.active_tools.clone(),
        };
        inner.counter += 1;
        let lifecycle = inner.counter;
        inner.host = Some(Host {
            id: host_id.clone(),
            info: HostInfo {
                extension_version: hello.extension_version,
                pi_version: hello.pi_version,
                mode: hello.mode,
                has_ui: hello.has_ui,
                cwd: hello.cwd,
                session_id: hello.session_id,
                session_file: hello.session_file,
                project_trusted: hello.project_trusted,
                connected_at: now_iso(),
            },
            facts: hello.facts,
            messages: Vec::new(),
            clock: None,
            active_stack: active_stack.clone(),
            provenance,
            baseline_tools: baseline,
            applied_tools: None,
            caps: CapSession {
                record,
                ..CapSession::default()
            },
            lifecycle,
            stream: None,
            commands: None,
            pending: HashMap::new(),
        });
        self.publish(&inner);
        drop(inner);
        // A host that never opens its stream is not live.
        let hub = Arc::clone(self);
        let id = host_id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ATTACH_GRACE).await;
            let mut inner = hub.lock();
            if inner
                .host
                .as_ref()
                .is_some_and(|h| h.id == id && h.stream.is_none())
            {
                inner.host = None;
                hub.publish(&inner);
            }
        });
        Ok(Welcome {
            host_id,
            active_stack,
            entries,
        })
    }

    /// Claims the command stream of host `id`; a newer claim replaces an older one.
    pub fn attach(self: &Arc<Self>, id: &str) -> Result<Attached, LiveError> {
        let mut inner = self.lock();
        inner.counter += 1;
        let generation = inner.counter;
        let host = inner
            .host
            .as_mut()
            .filter(|h| h.id == id)
            .ok_or_else(|| LiveError::UnknownHost(id.to_string()))?;
        let (tx, rx) = mpsc::unbounded_channel();
        host.stream = Some(generation);
        host.commands = Some(tx);
        self.publish(&inner);
        Ok(Attached {
            commands: rx,
            guard: StreamGuard {
                hub: Arc::clone(self),
                host_id: id.to_string(),
                generation,
            },
        })
    }

    fn detach(&self, id: &str, generation: u64) {
        let mut inner = self.lock();
        if inner
            .host
            .as_ref()
            .is_some_and(|h| h.id == id && h.stream == Some(generation))
        {
            // Pending commands fail at once: their senders are dropped with the host.
            inner.host = None;
            self.publish(&inner);
        }
    }

    /// The server is stopping: every attached host gets `message` as a notice on its command
    /// stream, and the stream then ends (its sender is dropped).
    pub fn farewell(&self, message: &str) {
        let mut inner = self.lock();
        if let Some(host) = inner.host.as_mut() {
            if let Some(commands) = host.commands.take() {
                let _ = commands.send(notice_command("farewell", message));
            }
        }
    }

    /// `bye`: the session ended on purpose.
    pub fn bye(&self, id: &str, session_id: &str) -> Result<(), LiveError> {
        let mut inner = self.lock();
        check(inner.host.as_ref(), id, session_id)?;
        inner.host = None;
        self.publish(&inner);
        Ok(())
    }

    /// Runs `f` on the host `id` after checking the session id; publishes afterwards.
    pub fn with_host<T>(
        &self,
        id: &str,
        session_id: &str,
        f: impl FnOnce(&mut HostView<'_>) -> T,
    ) -> Result<T, LiveError> {
        let mut inner = self.lock();
        check(inner.host.as_ref(), id, session_id)?;
        let host = inner.host.as_mut().ok_or(LiveError::NoLiveSession)?;
        let out = f(&mut HostView { host });
        self.publish(&inner);
        Ok(out)
    }

    /// Runs `f` on the connected host, whatever its id (browser routes).
    pub fn with_live<T>(&self, f: impl FnOnce(&mut HostView<'_>) -> T) -> Result<T, LiveError> {
        let mut inner = self.lock();
        let host = inner
            .host
            .as_mut()
            .filter(|h| h.stream.is_some())
            .ok_or(LiveError::NoLiveSession)?;
        let out = f(&mut HostView { host });
        self.publish(&inner);
        Ok(out)
    }

    /// Reads the connected host without changing it (nothing is published, no tick).
    pub fn read_live<T>(&self, f: impl FnOnce(&HostView<'_>) -> T) -> Result<T, LiveError> {
        let mut inner = self.lock();
        let host = inner
            .host
            .as_mut()
            .filter(|h| h.stream.is_some())
            .ok_or(LiveError::NoLiveSession)?;
        Ok(f(&HostView { host }))
    }

    /// Sends a command to the live host and waits for its result.
    pub async fn command(
        &self,
        kind: &str,
        mut body: Map<String, Value>,
    ) -> Result<Value, LiveError> {
        let (rx, cid) = {
            let mut inner = self.lock();
            inner.counter += 1;
            let cid = format!("c{}", inner.counter);
            let host = inner
                .host
                .as_mut()
                .filter(|h| h.stream.is_some())
                .ok_or(LiveError::NoLiveSession)?;
            let (tx, rx) = oneshot::channel();
            body.insert("id".into(), Value::String(cid.clone()));
            body.insert("kind".into(), Value::String(kind.to_string()));
            let sent = host
                .commands
                .as_ref()
                .is_some_and(|c| c.send(Value::Object(body)).is_ok());
            if !sent {
                return Err(LiveError::Disconnected);
            }
            host.pending.insert(cid.clone(), tx);
            (rx, cid)
        };
        match tokio::time::timeout(COMMAND_TIMEOUT, rx).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Err(LiveError::Disconnected),
            Err(_) => {
                if let Some(host) = self.lock().host.as_mut() {
                    host.pending.remove(&cid);
                }
                Err(LiveError::Timeout(COMMAND_TIMEOUT.as_secs()))
            }
        }
    }

    /// `POST /api/host/:id/commands/:cid/result`.
    pub fn complete(
        &self,
        id: &str,
        session_id: &str,
        cid: &str,
        result: Value,
    ) -> Result<(), LiveError> {
        let mut inner = self.lock();
        check(inner.host.as_ref(), id, session_id)?;
        let host = inner.host.as_mut().ok_or(LiveError::NoLiveSession)?;
        let tx = host
            .pending
            .remove(cid)
            .ok_or_else(|| LiveError::UnknownCommand(cid.to_string()))?;
        // The waiter may have timed out meanwhile; then the result has nobody to go to.
        let _ = tx.send(result);
        Ok(())
    }
}

/// A `notify` command the server sends on its own (`id` names why): an error notice in Pi.
fn notice_command(id: &str, message: &str) -> Value {
    serde_json::json!({"id": id, "kind": "notify", "level": "error", "message": message})
}

/// What a session hears when another one takes over the editor (`/forge ui restart` there).
pub fn taken_over_notice(by: &str) -> String {
    format!(
        "pi-forge: another Pi session ({by}) took over this project's editor with /forge ui restart. This session is no longer connected: a Preset recorded here refuses its prompts until it connects again, and /forge ui restart here takes the editor back."
    )
}

fn check(host: Option<&Host>, id: &str, session_id: &str) -> Result<(), LiveError> {
    let host = host
        .filter(|h| h.id == id)
        .ok_or_else(|| LiveError::UnknownHost(id.to_string()))?;
    if host.info.session_id != session_id {
        return Err(LiveError::StaleSession {
            given: session_id.to_string(),
            live: host.info.session_id.clone(),
        });
    }
    Ok(())
}

/// Access to the connected host under the hub's lock.
pub struct HostView<'a> {
    host: &'a mut Host,
}

impl HostView<'_> {
    pub fn active_stack(&self) -> Option<&str> {
        self.host.active_stack.as_deref()
    }
    pub fn set_active_stack(&mut self, key: Option<String>) {
        self.host.active_stack = key;
    }
    /// Sets the active Preset and returns the one it replaces.
    pub fn replace_active_stack(&mut self, key: Option<String>) -> Option<String> {
        std::mem::replace(&mut self.host.active_stack, key)
    }
    pub fn provenance(&self) -> Option<&Value> {
        self.host.provenance.as_ref()
    }
    pub fn set_provenance(&mut self, provenance: Option<Value>) {
        self.host.provenance = provenance;
    }
    pub fn baseline_tools(&self) -> &[String] {
        &self.host.baseline_tools
    }

    /// New facts from Pi. Active tools that differ from what pi-forge last applied were changed
    /// by someone else (the user, another extension): they become the new baseline.
    pub fn update_facts(&mut self, facts: PiFacts) {
        match &self.host.applied_tools {
            Some(applied) if *applied == facts.active_tools => {}
            // B9 reconciliation: what someone else activated joins the baseline, what they
            // deactivated leaves it.
            Some(applied) => {
                self.host.baseline_tools =
                    reconcile_baseline(&self.host.baseline_tools, applied, &facts.active_tools);
                self.host.applied_tools = None;
            }
            None => self.host.baseline_tools = facts.active_tools.clone(),
        }
        self.host.facts = facts;
    }

    /// Host id, session id and leaf id.
    pub fn host_id(&self) -> &str {
        &self.host.id
    }
    pub fn session_id(&self) -> &str {
        &self.host.info.session_id
    }
    pub fn leaf_id(&self) -> Option<&str> {
        self.host.facts.leaf_id.as_deref()
    }
    pub fn lifecycle(&self) -> u64 {
        self.host.lifecycle
    }
    pub fn trusted(&self) -> bool {
        self.host.info.project_trusted
    }
    pub fn facts(&self) -> &PiFacts {
        &self.host.facts
    }
    /// Registered tool names, in Pi's order.
    pub fn registered_tools(&self) -> Vec<String> {
        self.host
            .facts
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }
    pub fn caps(&self) -> &CapSession {
        &self.host.caps
    }
    pub fn caps_mut(&mut self) -> &mut CapSession {
        &mut self.host.caps
    }
    /// The tool baseline as the capability operations read it: the branch's entry when there
    /// is one, else what the host remembers (baseline and what it applied last).
    pub fn tools_entry(&self) -> ToolsEntry {
        match &self.host.caps.record.tools {
            Some(entry) => entry.clone(),
            None => ToolsEntry {
                baseline: self.host.baseline_tools.clone(),
                last_applied: self
                    .host
                    .applied_tools
                    .clone()
                    .unwrap_or_else(|| self.host.facts.active_tools.clone()),
            },
        }
    }
    /// After a committed tool sync: the baseline it reconciled and the tools Pi now has.
    pub fn tools_applied(&mut self, baseline: Vec<String>, applied: Vec<String>) {
        self.host.baseline_tools = baseline;
        self.host.facts.active_tools = applied.clone();
        self.host.applied_tools = Some(applied);
    }

    pub fn set_applied_tools(&mut self, tools: Vec<String>) {
        self.host.applied_tools = Some(tools);
    }

    pub fn set_messages(&mut self, messages: Vec<Value>) {
        self.host.messages = messages;
    }

    pub fn set_clock(&mut self, clock: Clock) {
        self.host.clock = Some(clock);
    }

    /// The current choice (model, thinking, Preset) for provenance and drift.
    pub fn choice(&self) -> LiveChoice {
        LiveChoice {
            model: self
                .host
                .facts
                .model
                .as_ref()
                .map(|m| ModelRef::new(m.provider.clone(), m.id.clone())),
            thinking_level: self.host.facts.thinking_level.clone(),
            prompt_stack: self.host.active_stack.clone(),
        }
    }

    /// The compiler's runtime snapshot from the live facts (tools active as in the baseline),
    /// with the conversation of the last `context` call (what a preview compiles against).
    pub fn runtime(&self, fallback_clock: Clock) -> RuntimeSnapshot {
        self.runtime_with(fallback_clock, self.host.messages.clone())
    }

    /// The same facts with another conversation: none where only the system prompt and the
    /// tools matter, the one Pi just sent on the prompt path (no copy of the stored one).
    pub fn runtime_with(&self, fallback_clock: Clock, messages: Vec<Value>) -> RuntimeSnapshot {
        runtime_of(
            &self.host.facts,
            &self.host.baseline_tools,
            &self.host.info.cwd,
            self.host.clock.unwrap_or(fallback_clock),
            messages,
        )
    }

    /// The models Pi has credentials for, as `{provider, id, name?}`.
    pub fn models(&self) -> Vec<ModelChoice> {
        self.host
            .facts
            .models
            .iter()
            .map(|m| ModelChoice {
                provider: m.provider.clone(),
                id: m.id.clone(),
                name: m.name.clone(),
            })
            .collect()
    }
}

/// The label a tool is grouped under: its extension's path, or Pi's source word for built-ins.
fn source_label(info: Option<&PiSourceInfo>) -> Option<String> {
    let info = info?;
    if !info.source.is_empty() && (info.path.is_empty() || info.path.starts_with('<')) {
        Some(info.source.clone())
    } else if !info.path.is_empty() {
        Some(info.path.clone())
    } else {
        None
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Pi's facts as forge-core's [`RuntimeSnapshot`].
pub fn runtime_of(
    facts: &PiFacts,
    active: &[String],
    cwd: &str,
    clock: Clock,
    messages: Vec<Value>,
) -> RuntimeSnapshot {
    let options = facts.prompt_options.clone().unwrap_or_default();
    let tools = facts
        .tools
        .iter()
        .map(|t| ToolInfo {
            name: t.name.clone(),
            description: t.description.clone(),
            snippet: options
                .tool_snippets
                .get(&t.name)
                .and_then(Value::as_str)
                .map(str::to_string),
            guidelines: match options.tool_guidelines.get(&t.name) {
                Some(v) => strings(Some(v)),
                None => t.prompt_guidelines.clone(),
            },
            source: source_label(t.source_info.as_ref()),
            active: active.contains(&t.name),
        })
        .collect();
    RuntimeSnapshot {
        cwd: cwd.to_string(),
        base_system_prompt: facts.system_prompt.clone().unwrap_or_default(),
        append_system_prompt: options.append_system_prompt.filter(|s| !s.is_empty()),
        tools,
        prompt_guidelines: options.prompt_guidelines,
        skills: options.skills,
        context_files: options.context_files,
        model: facts.model.as_ref().map(|m| ModelInfo {
            provider: m.provider.clone(),
            id: m.id.clone(),
            api: m.api.clone(),
        }),
        clock,
        pi_docs_root: facts.pi_docs_root.clone(),
        messages,
        live: true,
    }
}

/// The Preset a key (`"<scope>:<id>"`) names in `snapshot`.
pub fn stack_entry<'a>(snapshot: &'a WorkspaceSnapshot, key: &str) -> Option<&'a StackEntry> {
    match parse_stack_choice(key) {
        Ok(StackChoice::Selector(sel)) => snapshot.resolve_stack(&sel).found(),
        _ => None,
    }
}
