//! What every handler can reach: the one `ServerState` of a running editor server, and the
//! secrets it is started with.

use std::path::PathBuf;
use std::sync::Arc;

use forge_core::runtime::{Clock, RuntimeSnapshot};

use super::{agent_hub, preview_gate, viewcache};
use crate::clock::local_clock;
use crate::live::LiveHub;
use crate::payloads::PayloadHub;
use crate::state::WorkspaceHandle;

/// The session cookie's name. It carries the port because browsers share cookies between the
/// ports of one host: two editors (two projects) must not overwrite each other's cookie.
pub fn cookie_name(port: u16) -> String {
    format!("pi_forge_token_{port}")
}

/// The two secrets of one server: the API token (in the launch link, `--print-token` and the
/// state file) and the cookie value, which only the token exchange hands out.
pub struct Secrets {
    pub token: String,
    pub cookie: String,
}

/// 24 random bytes, base64url without padding: the API token and the cookie value.
pub fn new_secret() -> Result<String, getrandom::Error> {
    use base64::Engine as _;
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// What every handler can reach.
pub struct ServerState {
    pub ws: Arc<WorkspaceHandle>,
    pub port: u16,
    pub token: String,
    pub cookie_name: String,
    /// The session cookie's value: random per server and never the API token, so a cookie a
    /// browser also sent to another port on 127.0.0.1 does not work as the token header.
    pub cookie_secret: String,
    /// Accepted `Host` values.
    pub hosts: [String; 2],
    /// Accepted `Origin` values.
    pub origins: [String; 2],
    pub demo: bool,
    pub project: PathBuf,
    pub global: PathBuf,
    /// The live Pi session (the one owner of the active Preset, the applied profile and Pi's
    /// facts); empty when no Pi is connected.
    pub live: Arc<LiveHub>,
    /// Captured provider requests of the live session (see `payloads.rs`).
    pub payloads: Arc<PayloadHub>,
    /// Draft previews in flight: one compile per stack, a newer draft supersedes older ones.
    pub previews: Arc<preview_gate::PreviewGate>,
    /// Turns true when the server shuts down; event streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The stack list and the page, serialized once per snapshot and active Preset.
    pub views: viewcache::ViewCache,
    /// Serializes capability mutations of the live session (one commit at a time).
    pub capability_lock: tokio::sync::Mutex<()>,
    /// Subagent plans waiting for a person, and the child-run limit.
    pub agents: agent_hub::Agents,
}

impl ServerState {
    pub fn new(
        ws: Arc<WorkspaceHandle>,
        port: u16,
        secrets: Secrets,
        demo: bool,
        project: PathBuf,
        global: PathBuf,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> ServerState {
        // Children a killed or crashed server left running are stopped before anything else.
        let agents = Arc::new(agent_hub::AgentHub::starting(&project));
        ServerState {
            ws,
            port,
            cookie_name: cookie_name(port),
            cookie_secret: secrets.cookie,
            hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            origins: [
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
            ],
            token: secrets.token,
            demo,
            project,
            global,
            live: Arc::new(LiveHub::new()),
            payloads: Arc::new(PayloadHub::new()),
            previews: Arc::new(preview_gate::PreviewGate::new()),
            shutdown,
            views: viewcache::ViewCache::default(),
            capability_lock: tokio::sync::Mutex::new(()),
            agents,
        }
    }

    /// The active Preset (`scope:id`) of the live Pi session; `None` without one.
    pub fn active_id(&self) -> Option<String> {
        self.live
            .with_live(|h| h.active_stack().map(str::to_string))
            .unwrap_or(None)
    }

    /// The facts the compiler works from: the live Pi session's, else the documented stand-in
    /// (`live: false`).
    pub fn runtime(&self) -> RuntimeSnapshot {
        let clock = local_clock();
        self.live
            .with_live(|h| h.runtime(clock))
            .unwrap_or_else(|_| self.stand_in(clock))
    }

    /// The same facts without the conversation: for tool policies, where messages play no part
    /// and copying a long session's conversation would be waste.
    pub fn tool_runtime(&self) -> RuntimeSnapshot {
        let clock = local_clock();
        self.live
            .with_live(|h| h.runtime_with(clock, Vec::new()))
            .unwrap_or_else(|_| self.stand_in(clock))
    }

    /// The stack list and the page of the current snapshot and active Preset.
    pub fn current_views(&self) -> Arc<viewcache::Views> {
        self.views
            .current(&self.ws, self.active_id(), &self.project)
    }

    fn stand_in(&self, clock: Clock) -> RuntimeSnapshot {
        RuntimeSnapshot::default_snapshot(&self.project.display().to_string(), clock)
    }
}

pub type AppState = Arc<ServerState>;
