//! `pi-forge ui`: start (or reuse) the editor server for a project, and `pi-forge ui stop`.
//!
//! Lifecycle:
//! - One server per project. Its state file (`$XDG_RUNTIME_DIR/pi-forge/` or
//!   `~/.pi/forge/run/`, directory 0700, file 0600, named after a hash of the canonical project
//!   path) holds `{pid, port, token, url, project, startedAt, version}`.
//! - A second `pi-forge ui` for the same project reuses a live server: the pid is alive *and*
//!   `GET /api/meta` with the token answers for this project. It prints the same URL and exits 0.
//!   A dead server's state file is replaced. `--restart`, another `--port` or another pi-forge
//!   version stops the old server (SIGTERM) and starts a fresh one.
//! - `pi-forge ui stop` stops the project's server and removes the state file.
//! - The server binds 127.0.0.1 only: `--port`, else a trusted project's `webEditor.port`, else
//!   an ephemeral port; a preferred port that is taken falls back to an ephemeral one. It prints
//!   `http://127.0.0.1:<port>/?token=<t>` as the first line of stdout (everything else goes to
//!   stderr), watches the forge directories, and on Ctrl-C or SIGTERM shuts down gracefully and
//!   removes its state file.
//! - The browser opens a 0600 launch page beside the state file that redirects with the token:
//!   the token never appears in a process's arguments or on stderr.
//! - `--demo` serves a throw-away workspace seeded with example resources (no state file).

mod demo;

use std::future::IntoFuture as _;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use forge_core::workspace::{FsStore, LoadOptions};
use serde::{Deserialize, Serialize};

use crate::http::security::TOKEN_HEADER;
use crate::http::{self, ServerState};
use crate::paths::WorkspacePaths;
use crate::process::{self, StopSignal};
use crate::state::WorkspaceHandle;
use crate::watch::{self, WatchConfig};

/// Options of `pi-forge ui`.
pub struct UiOptions {
    pub paths: WorkspacePaths,
    /// Port on 127.0.0.1; `None` or `Some(0)` = the configured one, else any free port.
    pub port: Option<u16>,
    pub no_open: bool,
    pub demo: bool,
    pub restart: bool,
}

/// The state file of a running server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerRecord {
    pub pid: u32,
    pub port: u16,
    pub token: String,
    pub url: String,
    pub project: String,
    pub started_at: String,
    pub version: String,
}

/// How long a stopping server may take before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long graceful shutdown may wait for open requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------------------------
// Entry points

pub fn run(opts: UiOptions) -> Result<ExitCode> {
    if opts.demo {
        return serve_demo(&opts);
    }
    let project = canonical(&opts.paths.project)?;
    let state_path = state_file(&project)?;
    let wanted_port = opts.port.filter(|&p| p != 0);
    if let Some(record) = read_record(&state_path) {
        if is_running(&record, &project) {
            let same_port = wanted_port.is_none_or(|p| p == record.port);
            let same_version = record.version == crate::VERSION;
            if !opts.restart && same_port && same_version {
                print_url(&record.url)?;
                eprintln!(
                    "pi-forge: the editor for {} is already running (pid {})",
                    project.display(),
                    record.pid
                );
                if !opts.no_open {
                    open_browser(&launch_file(&state_path), &record.url);
                }
                return Ok(ExitCode::SUCCESS);
            }
            let why = if opts.restart {
                "restarting"
            } else if !same_port {
                "another port was asked for; restarting"
            } else {
                "it is another pi-forge version; restarting"
            };
            eprintln!(
                "pi-forge: the editor is running at port {} ({why})",
                record.port
            );
            stop_server(&record, &project)?;
        }
        remove_record(&state_path, None);
    }
    let paths = WorkspacePaths {
        project,
        ..opts.paths.clone()
    };
    serve(&paths, wanted_port, opts.no_open, false, Some(state_path))
}

/// `pi-forge ui open`: opens the running editor through its launch page; never starts one.
pub fn open(paths: &WorkspacePaths) -> Result<ExitCode> {
    let project = canonical(&paths.project)?;
    let state_path = state_file(&project)?;
    let running = read_record(&state_path).filter(|record| is_running(record, &project));
    let Some(record) = running else {
        eprintln!(
            "pi-forge: no editor is running for {}; start it with `pi-forge ui`",
            project.display()
        );
        return Ok(ExitCode::from(2));
    };
    if !open_browser(&launch_file(&state_path), &record.url) {
        return Ok(ExitCode::FAILURE);
    }
    eprintln!(
        "pi-forge: opened the editor at http://127.0.0.1:{}/ in the browser",
        record.port
    );
    Ok(ExitCode::SUCCESS)
}

/// `pi-forge ui stop`.
pub fn stop(paths: &WorkspacePaths) -> Result<ExitCode> {
    let project = canonical(&paths.project)?;
    let state_path = state_file(&project)?;
    let Some(record) = read_record(&state_path) else {
        eprintln!("pi-forge: no editor is running for {}", project.display());
        return Ok(ExitCode::SUCCESS);
    };
    if is_running(&record, &project) {
        stop_server(&record, &project)?;
        eprintln!("pi-forge: stopped the editor at port {}", record.port);
    } else {
        eprintln!(
            "pi-forge: the editor for {} was no longer running; removed its state file",
            project.display()
        );
    }
    remove_record(&state_path, None);
    Ok(ExitCode::SUCCESS)
}

fn canonical(project: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(project)
        .with_context(|| format!("cannot resolve the project directory {}", project.display()))
}

fn print_url(url: &str) -> Result<()> {
    // Scripts and tests read the URL from the first line of stdout.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{url}")?;
    stdout.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// State file

/// `$XDG_RUNTIME_DIR/pi-forge`, else `~/.pi/forge/run`.
fn run_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("pi-forge"));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".pi").join("forge").join("run")),
        None => bail!(
            "cannot find a directory for the editor's state file: set XDG_RUNTIME_DIR or HOME"
        ),
    }
}

/// The state file of `project` (a canonical path); creates its directory (0700).
pub fn state_file(project: &Path) -> Result<PathBuf> {
    let dir = run_dir()?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let hash = forge_core::canonical::sha256_hex(project.as_os_str().as_encoded_bytes());
    Ok(dir.join(format!("ui-{}.json", &hash[..32])))
}

fn read_record(path: &Path) -> Option<ServerRecord> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the record atomically with mode 0600.
fn write_record(path: &Path, record: &ServerRecord) -> Result<()> {
    let text = forge_core::json::to_pretty(&serde_json::to_value(record)?);
    crate::files::write_atomic(path, text.as_bytes(), crate::files::Access::Private)
}

/// Removes the state file; with `only_pid`, only when it still names that process. False when
/// another process's record was left in place.
fn remove_record(path: &Path, only_pid: Option<u32>) -> bool {
    if let Some(pid) = only_pid {
        if read_record(path).is_some_and(|r| r.pid != pid) {
            return false;
        }
    }
    let _ = std::fs::remove_file(path);
    true
}

// ---------------------------------------------------------------------------------------------
// Probing and stopping

/// One request with the token to the editor on `port`: `(status, body)`. HTTP/1.1 over
/// loopback with short timeouts, never through a proxy; answers up to 256 MB, chunked or not.
pub fn request(
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(Duration::from_millis(500)))
        .timeout_send_request(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://127.0.0.1:{port}{path}"))
        .header(TOKEN_HEADER, token)
        .header("content-type", "application/json")
        .body(body)
        .with_context(|| format!("cannot build the request {method} {path}"))?;
    let mut response = agent
        .run(request)
        .with_context(|| format!("cannot reach the editor on port {port}"))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(256 << 20)
        .read_to_string()
        .with_context(|| format!("the editor on port {port} sent an incomplete answer"))?;
    Ok((status, text))
}

/// `GET /api/meta` with the token: true when a pi-forge editor for `project` answers.
fn meta_answers(port: u16, token: &str, project: &Path) -> bool {
    let Ok((200, body)) = request(port, token, "GET", "/api/meta", "") else {
        return false;
    };
    let Ok(meta) = serde_json::from_str::<serde_json::Value>(&body) else {
        return false;
    };
    meta["name"] == "pi-forge" && meta["project"].as_str() == Some(&*project.to_string_lossy())
}

/// The project's running editor, or an error that says how to start one.
pub fn running(paths: &WorkspacePaths) -> Result<ServerRecord> {
    let project = canonical(&paths.project)?;
    let record = read_record(&state_file(&project)?).filter(|r| is_running(r, &project));
    record.with_context(|| {
        format!(
            "no pi-forge editor is running for {}: start one with `pi-forge ui` (or /forge ui in Pi)",
            project.display()
        )
    })
}

fn is_running(record: &ServerRecord, project: &Path) -> bool {
    process::alive(record.pid) && meta_answers(record.port, &record.token, project)
}

/// SIGTERM, wait until the server stops answering; SIGKILL after [`STOP_TIMEOUT`].
fn stop_server(record: &ServerRecord, project: &Path) -> Result<()> {
    process::signal(record.pid, StopSignal::Term);
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if !meta_answers(record.port, &record.token, project) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "pi-forge: the editor (pid {}) did not stop within {}s; killing it",
        record.pid,
        STOP_TIMEOUT.as_secs()
    );
    process::signal(record.pid, StopSignal::Kill);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Serving

/// 24 random bytes, base64url without padding.
fn new_token() -> Result<String> {
    http::new_secret().map_err(|e| anyhow::anyhow!("cannot get random bytes: {e}"))
}

fn serve_demo(opts: &UiOptions) -> Result<ExitCode> {
    let dir = demo::DemoDir::create()?;
    let paths = WorkspacePaths {
        project: dir.project(),
        global: dir.global(),
        trusted: true,
    };
    let result = serve(
        &paths,
        opts.port.filter(|&p| p != 0),
        opts.no_open,
        true,
        None,
    );
    drop(dir);
    result
}

fn serve(
    paths: &WorkspacePaths,
    port: Option<u16>,
    no_open: bool,
    demo: bool,
    state_path: Option<PathBuf>,
) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve_async(paths, port, no_open, demo, state_path))?;
    Ok(ExitCode::SUCCESS)
}

/// Why a port is tried first: asked for (`--port`, `webEditor.port`), or the project's previous
/// one. Each has its own warning when the port is taken.
#[derive(Clone, Copy)]
enum Preferred {
    Asked,
    Previous,
}

async fn bind(preferred: Option<(u16, Preferred)>) -> Result<tokio::net::TcpListener> {
    if let Some((port, why)) = preferred {
        match tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
            Ok(listener) => return Ok(listener),
            Err(error) => match why {
                Preferred::Asked => eprintln!(
                    "pi-forge: warning: cannot listen on 127.0.0.1:{port} ({error}); using a free port instead"
                ),
                Preferred::Previous => eprintln!(
                    "pi-forge: the editor's previous address, port {port}, is not free ({error}); using another port, so tabs still open at the old one must be opened again at the new address (their unsaved drafts stay in the browser, under the old one)"
                ),
            },
        }
    }
    tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .context("cannot listen on 127.0.0.1")
}

/// Reloads the workspace on watcher batches that change something (see
/// [`WorkspaceHandle::reload_paths`]). A batch that arrives before the first load has finished
/// marks it dirty, so it is reloaded once right after.
#[derive(Default)]
struct Reloader {
    ws: OnceLock<Arc<WorkspaceHandle>>,
    dirty: Mutex<bool>,
    /// A watcher failure reported before the first load finished.
    failure: Mutex<Option<String>>,
}

impl Reloader {
    /// The watcher stopped watching something: a workspace problem the editor shows.
    fn failure(&self, runtime: &tokio::runtime::Handle, message: String) {
        match self.ws.get() {
            Some(ws) => runtime.block_on(ws.add_problem(message)),
            None => {
                if let Ok(mut slot) = self.failure.lock() {
                    *slot = Some(message);
                }
            }
        }
    }

    /// Called on the watcher's thread.
    fn batch(&self, runtime: &tokio::runtime::Handle, paths: &[std::path::PathBuf]) {
        match self.ws.get() {
            Some(ws) => {
                runtime.block_on(ws.reload_paths(paths));
            }
            None => {
                if let Ok(mut dirty) = self.dirty.lock() {
                    *dirty = true;
                }
            }
        }
    }

    /// The first load is done: from now on batches reload `ws`.
    async fn loaded(&self, ws: &Arc<WorkspaceHandle>) {
        let _ = self.ws.set(Arc::clone(ws));
        let failure = self.failure.lock().ok().and_then(|mut f| f.take());
        if let Some(message) = failure {
            ws.add_problem(message).await;
        }
        if self.dirty.lock().map(|d| *d).unwrap_or(false) {
            ws.reload().await;
        }
    }
}

type WatchGuard = watch::Watcher;

/// Watches the forge directories of `store`; `None` (with a warning) when the OS watcher cannot
/// start, in which case `POST /api/reload` still works.
fn start_watcher(store: &FsStore, trusted: bool, reloader: Arc<Reloader>) -> Option<WatchGuard> {
    let runtime = tokio::runtime::Handle::current();
    let roots = watch::forge_roots(store, trusted);
    match watch::spawn(WatchConfig::new(roots), move |batch| {
        if let Some(failure) = batch.failure {
            reloader.failure(&runtime, failure);
        }
        if !batch.paths.is_empty() {
            reloader.batch(&runtime, &batch.paths);
        }
    }) {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            eprintln!(
                "pi-forge: warning: {error:#}; changes on disk will not show up until you reload"
            );
            None
        }
    }
}

async fn serve_async(
    paths: &WorkspacePaths,
    port: Option<u16>,
    no_open: bool,
    demo: bool,
    state_path: Option<PathBuf>,
) -> Result<()> {
    let store = paths.store();
    // Temp files a crashed write left behind (of our own naming, never a resource file).
    for path in store.clean_stale_temps() {
        eprintln!("pi-forge: removed a stale temp file: {}", path.display());
    }

    // Watch before the first load, so nothing that changes in between is missed.
    let reloader = Arc::new(Reloader::default());
    let watcher = start_watcher(&store, paths.trusted, Arc::clone(&reloader));

    let options = LoadOptions {
        trusted: paths.trusted,
        extra_slots: Vec::new(),
    };
    let ws =
        Arc::new(tokio::task::spawn_blocking(move || WorkspaceHandle::open(store, options)).await?);
    reloader.loaded(&ws).await;

    let configured = port.or_else(|| {
        let snapshot = ws.snapshot();
        snapshot
            .config
            .as_ref()
            .filter(|_| paths.trusted)
            .and_then(|c| c.parsed.config.web_editor_port)
    });
    // Without a port asked for, the project's previous one: the editor's address (its origin)
    // stays the same across `--restart`, `ui stop` and a crash, so open tabs and the unsaved
    // drafts a browser keeps per origin find the new server there.
    let remembered = match (configured, &state_path) {
        (None, Some(state_path)) => last_port(state_path),
        _ => None,
    };
    let listener = match (configured, remembered) {
        (Some(port), _) => bind(Some((port, Preferred::Asked))).await?,
        (None, remembered) => bind(remembered.map(|port| (port, Preferred::Previous))).await?,
    };
    let port = listener.local_addr()?.port();
    if let Some(state_path) = &state_path {
        let _ = std::fs::write(last_port_file(state_path), port.to_string());
    }
    let token = new_token()?;
    let url = format!("http://127.0.0.1:{port}/?token={token}");

    if let Some(state_path) = &state_path {
        let record = ServerRecord {
            pid: std::process::id(),
            port,
            token: token.clone(),
            url: url.clone(),
            project: paths.project.display().to_string(),
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            version: crate::VERSION.to_string(),
        };
        write_record(state_path, &record)?;
        // A launch page left by a server that did not stop cleanly holds a dead token: this
        // server owns the project now, so it goes (a new one is written when a browser opens).
        let _ = std::fs::remove_file(launch_file(state_path));
    }
    // The signal handlers exist before the address is printed: whoever read it may stop this
    // server at once (`pi-forge ui stop`), and SIGTERM must then be a graceful stop, not a kill.
    let stop_signals = shutdown_signal();
    print_url(&url)?;
    if demo {
        eprintln!(
            "pi-forge: serving the demo workspace in {}",
            paths.project.display()
        );
    } else {
        eprintln!("pi-forge: serving {}", paths.project.display());
    }
    if !paths.trusted {
        eprintln!("pi-forge: the project is untrusted: only global resources are shown, and project files are read-only");
    }
    if !http::assets::bundle_present() {
        eprintln!("pi-forge: warning: no web bundle embedded; run `cargo xtask dist` and rebuild");
    }
    eprintln!("pi-forge: press Ctrl-C to stop");
    // The launch page lives beside the state file (the demo has none: its own name in the
    // same 0700 directory).
    let launch = if no_open {
        None
    } else {
        Some(match &state_path {
            Some(state_path) => launch_file(state_path),
            None => launch_file(&state_file(&paths.project)?),
        })
    };
    if let Some(launch) = &launch {
        open_browser(launch, &url);
    }

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let state = Arc::new(ServerState::new(
        Arc::clone(&ws),
        port,
        http::Secrets {
            token,
            cookie: new_token()?,
        },
        demo,
        paths.project.clone(),
        paths.global.clone(),
        stop_rx.clone(),
    ));
    let live = Arc::clone(&state.live);
    let mut server_stop = stop_rx;
    // No Nagle delay: a response written in several segments (a compiled turn, a conversation)
    // must not wait for the client's delayed ACK (that cost ~40 ms per live turn).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // `into_make_service` turns the router into its per-request form once; handing axum the
    // router itself redoes that for every connection (a clone of every route: ~0.3 ms of
    // a new connection's 0.5 on the reference machine).
    let server = axum::serve(listener, http::router(state).into_make_service())
        .with_graceful_shutdown(async move {
            let _ = server_stop.wait_for(|stop| *stop).await;
        })
        .into_future();
    let mut server = tokio::spawn(server);
    // Read now: on Linux the path of a deleted binary reads "<path> (deleted)" later.
    let exe = std::env::current_exe().ok();
    let (outcome, stop) = tokio::select! {
        result = &mut server => (Some(result), Stop::Failed),
        () = stop_signals => (None, Stop::Signal),
        () = binary_replaced(exe.clone()) => (None, Stop::BinaryReplaced),
    };
    // Connected Pi sessions hear it at once, on their command streams, before those end.
    live.farewell(&stopped_notice(stop));
    let waited = std::time::Instant::now();
    while live.connected() && waited.elapsed() < FAREWELL_WAIT {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(true);
    let result = match outcome {
        Some(result) => result,
        None => match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
            Ok(result) => result,
            Err(_) => {
                server.abort();
                Ok(Ok(()))
            }
        },
    };
    // The state file and the launch page (whoever wrote it: this server or `pi-forge ui open`)
    // go with this server, unless a newer server of the project took their place.
    if let Some(state_path) = &state_path {
        if remove_record(state_path, Some(std::process::id())) {
            let _ = std::fs::remove_file(launch_file(state_path));
            // The port is kept for the next start, except after an uninstall (`pi remove`):
            // then nothing of this project's editor is left behind.
            if matches!(stop, Stop::BinaryReplaced) && binary_stays_gone(exe.as_deref()).await {
                let _ = std::fs::remove_file(last_port_file(state_path));
            }
        }
    } else if let Some(launch) = &launch {
        let _ = std::fs::remove_file(launch);
    }
    // The watcher's callback may be waiting on this runtime: stop it off the async threads.
    tokio::task::spawn_blocking(move || drop(watcher)).await?;
    eprintln!("pi-forge: stopped");
    result?.context("the web server failed")
}

/// How long a stopping server waits for its Pi sessions' command streams to carry the notice.
const FAREWELL_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Why a server stops.
#[derive(Clone, Copy)]
enum Stop {
    Failed,
    /// SIGTERM or Ctrl-C: `pi-forge ui stop`, `/forge ui restart` (here or in another session).
    Signal,
    BinaryReplaced,
}

/// What a connected Pi session is told when this editor stops.
fn stopped_notice(stop: Stop) -> String {
    const THEN: &str = "a Preset recorded here refuses prompts until it connects again.";
    match stop {
        Stop::Failed => format!("pi-forge: the editor server failed and stopped, so this session is disconnected: /forge ui starts it again, and {THEN}"),
        Stop::Signal => format!("pi-forge: the editor server stopped (`pi-forge ui stop`, or `/forge ui restart` here or in another session, which then has it), so this session is disconnected: /forge ui connects again or names the session that has the editor, and {THEN}"),
        Stop::BinaryReplaced => format!("pi-forge: the editor server stopped because its binary was updated or removed (`pi update`, `pi remove`, a rebuild), so this session is disconnected: /forge ui starts the installed one, and {THEN}"),
    }
}

/// How often a running server checks that its own binary is still the one on disk.
const BINARY_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The identity of a file (device and inode on Unix; size and modification time elsewhere).
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let modified = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some((meta.len(), modified.as_secs()))
    }
}

/// Resolves when this server's binary (`exe`, read at start) is removed or replaced on disk
/// (`pi remove npm:pi-forge`, `pi update`, a rebuild): an editor whose program is gone or
/// outdated stops, and the next `/forge ui` or Pi session starts the binary that is installed
/// now. Never resolves when the binary's path could not be read at start.
async fn binary_replaced(exe: Option<PathBuf>) {
    let Some(path) = exe else {
        return std::future::pending().await;
    };
    let Some(identity) = file_identity(&path) else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(BINARY_CHECK).await;
        if file_identity(&path) != Some(identity) {
            eprintln!(
                "pi-forge: {} was removed or replaced; stopping this editor",
                path.display()
            );
            return;
        }
    }
}

/// Whether the binary was removed rather than replaced: its path is still missing after
/// [`REPLACE_WAIT`] (an update may swap it in several steps).
async fn binary_stays_gone(exe: Option<&Path>) -> bool {
    let Some(path) = exe else {
        return false;
    };
    let waited = std::time::Instant::now();
    while waited.elapsed() < REPLACE_WAIT {
        if path.exists() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    !path.exists()
}

/// How long a missing binary may take to reappear before it counts as uninstalled.
const REPLACE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Ctrl-C (SIGINT) or SIGTERM. On Unix the handlers are installed when this is called, not
/// when the future is first polled, so a signal that comes right after is already caught.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            async fn recv(signal: Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(mut signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            let (interrupt, terminate) = signals;
            tokio::select! {
                () = recv(interrupt) => {}
                () = recv(terminate) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        eprintln!("pi-forge: shutting down");
    }
}

/// The port the project's editor last listened on (kept when the server stops).
fn last_port_file(state_path: &Path) -> PathBuf {
    state_path.with_extension("port")
}

fn last_port(state_path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(last_port_file(state_path)).ok()?;
    text.trim().parse().ok().filter(|&port| port != 0)
}

/// The launch page of the server whose state file is `state_path`: `ui-<hash>-open.html` beside it.
fn launch_file(state_path: &Path) -> PathBuf {
    let stem = state_path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("ui");
    state_path.with_file_name(format!("{stem}-open.html"))
}

/// The launch page: it sends the browser on to `url` (token included) without the token ever
/// being a command-line argument.
fn launch_page(url: &str) -> String {
    let attr = url
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0;url={attr}\">\n<title>pi-forge</title></head>\n<body><p>Opening the pi-forge editor… <a href=\"{attr}\">Continue</a></p></body></html>\n"
    )
}

/// Writes the launch page at `path`, readable by the user only (0600, in the 0700 run
/// directory), replacing any older one.
fn write_launch_page(path: &Path, url: &str) -> Result<()> {
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(launch_page(url).as_bytes())?;
    file.sync_all()?;
    Ok(())
}

/// Opens the editor in a browser through a user-only launch page at `launch` that redirects
/// to `url`: the opener's argument (visible to every local user in the process list) is the
/// page's `file://` path, never the token. `PI_FORGE_BROWSER` names another opener program.
/// Best effort: a missing or failing opener only prints a warning (and answers false).
fn open_browser(launch: &Path, url: &str) -> bool {
    if let Err(e) = write_launch_page(launch, url) {
        eprintln!("pi-forge: warning: could not open a browser ({e:#}); open the URL above yourself (or pass --no-open)");
        return false;
    }
    let target = format!("file://{}", launch.display());
    let mut cmd =
        if let Some(program) = std::env::var_os("PI_FORGE_BROWSER").filter(|p| !p.is_empty()) {
            std::process::Command::new(program)
        } else if cfg!(target_os = "macos") {
            std::process::Command::new("open")
        } else if cfg!(windows) {
            let mut cmd = std::process::Command::new("cmd");
            cmd.args(["/C", "start", ""]);
            cmd
        } else {
            std::process::Command::new("xdg-open")
        };
    let spawned = cmd
        .arg(&target)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reap the opener in the background so it never lingers as a zombie.
        Ok(mut child) => {
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            true
        }
        Err(e) => {
            eprintln!(
                "pi-forge: warning: could not open a browser ({e}); open the URL above yourself (or pass --no-open)"
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One answer from a loopback listener that writes `answer` after reading the request
    /// head; the request as received.
    fn answered_with(answer: &'static str) -> (u16, std::thread::JoinHandle<String>) {
        use std::io::{BufRead as _, BufReader};
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                head.push_str(&line);
            }
            reader.get_mut().write_all(answer.as_bytes()).unwrap();
            head
        });
        (port, served)
    }

    #[test]
    fn a_chunked_answer_reads_as_its_body_and_the_request_carries_the_token() {
        let (port, served) = answered_with(
            "HTTP/1.1 409 Conflict\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n7\r\n{\"ok\":f\r\n5\r\nalse}\r\n0\r\n\r\n",
        );
        let (status, body) = request(port, "secret", "GET", "/api/meta", "").unwrap();
        assert_eq!((status, body.as_str()), (409, "{\"ok\":false}"));
        let head = served.join().unwrap().to_ascii_lowercase();
        assert!(head.starts_with("get /api/meta http/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("host: 127.0.0.1:{port}\r\n")),
            "{head}"
        );
        assert!(head.contains("x-pi-forge-token: secret\r\n"), "{head}");
    }

    #[test]
    fn tokens_are_24_random_bytes_in_base64url() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }

    #[test]
    fn records_round_trip_with_camel_case_names() {
        let record = ServerRecord {
            pid: 7,
            port: 8080,
            token: "t".into(),
            url: "http://127.0.0.1:8080/?token=t".into(),
            project: "/p".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            version: "0.1.0".into(),
        };
        let value = serde_json::to_value(&record).unwrap();
        assert_eq!(value["startedAt"], "2026-01-01T00:00:00.000Z");
        assert_eq!(
            serde_json::from_value::<ServerRecord>(value).unwrap(),
            record
        );
    }
}
