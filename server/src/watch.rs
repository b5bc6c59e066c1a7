//! The file watcher: tells the editor server when resource files change on disk.
//!
//! [`spawn`] watches the forge directories (the project's `.pi/forge` and `.pi/prompt-stacks`
//! and the global forge root) with notify's recommended backend (inotify on Linux) and calls
//! `on_batch` with a debounced, deduplicated [`ChangeBatch`] of absolute paths. The caller
//! reloads the whole [`WorkspaceSnapshot`](forge_core::workspace::WorkspaceSnapshot) and
//! publishes what changed.
//!
//! What is reported, relative to the root that contains the path:
//! - `*.json` files one or two levels down (`config.json`, `prompt-stacks/x.json`): created,
//!   written, removed, renamed to or from;
//! - directories up to one level down, the root included (`prompt-stacks/` appearing or
//!   disappearing): created, removed, renamed. A directory path means "anything below it may
//!   have changed". When a directory appears, the `*.json` files already inside it are
//!   reported too (they were written before any watch could see them).
//!
//! Never reported: reads (so reloading cannot feed itself), the store's temp files
//! (`.<name>.<pid>-<n>.tmp`), editor swap, backup and lock files (`*.swp`, `*~`, `4913`,
//! `.#*`), anything deeper, anything outside the roots. A rename of such a file onto `x.json`
//! (how editors and [`FsStore`] save) is a change of `x.json`.
//!
//! Only what matters is watched, each directory on its own and non-recursively: every root and
//! its resource folders (`prompt-stacks/`, `agent-profiles/`, `capabilities/`). A linked resource
//! folder costs one watch on its target; nothing deeper and no other folder under a root (a big
//! or linked tree, `payloads/`) is ever watched. Roots that do not exist yet are handled by
//! watching their nearest existing ancestor; when a root or a resource folder appears it is
//! watched and scanned. Every second the worker also re-checks the watches (existence and inode),
//! so a folder that was replaced or moved away is re-armed even when no event said so.
//!
//! A folder that cannot be watched (the inotify budget exhausted) is not retried; the first such
//! failure is handed over once in [`ChangeBatch::failure`] so the editor can say so (with a manual
//! Reload) instead of the watcher spinning.
//!
//! Threads: notify runs its own event thread; one worker thread (`pi-forge-watch`) debounces and
//! calls `on_batch`, so the callback may block (read files, take locks). Dropping the [`Watcher`]
//! stops both.
//!
//! Why not `notify-debouncer-full`: it settles each path on its own timer (a file rewritten without
//! pause keeps waiting; nothing bounds a burst as [`MAX_BATCH_DELAY`] does) and hands over events
//! per path, not one batch for the whole forge; its rename pairing rests on a file-id cache of the
//! trees it watches recursively, while this watcher watches single folders non-recursively,
//! re-arms them by inode and waits on the nearest ancestor of a root that does not exist yet. It
//! would add a second timer and cache under these rules without removing any of them.
//!
//! Start the watcher *before* the initial load of the snapshot: a change that lands between the
//! two is then reported (and causes one redundant reload) instead of being missed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;

use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use forge_core::id::Scope;
use forge_core::workspace::{Dir, FsStore};
use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher as _};

/// Quiet time after the last relevant event before a batch is delivered.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(75);
/// During a continuous burst a batch is still delivered this long after its first event.
pub const MAX_BATCH_DELAY: Duration = Duration::from_millis(500);
/// How often every root is re-checked (existence, identity) regardless of events.
const RECHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Resource files sit at most this many levels below a root (`prompt-stacks/x.json` is 2).
const MAX_FILE_DEPTH: usize = 2;
/// Directories that matter sit at most this many levels below a root (`prompt-stacks/` is 1).
const MAX_DIR_DEPTH: usize = 1;
/// The folders one level below a root that hold resources; only these are watched (each on its
/// own, non-recursively), so a big or linked tree elsewhere under a root costs nothing.
const RESOURCE_DIRS: [&str; 3] = ["prompt-stacks", "agent-profiles", "capabilities"];

/// What changed, after debouncing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeBatch {
    /// Absolute paths that changed under the watched forge directories, sorted, each once.
    /// `*.json` paths are resource files; any other path is a directory
    /// that appeared or disappeared (anything below it may have changed).
    pub paths: Vec<PathBuf>,
    /// Set once, on the first folder that could not be watched (the inotify budget exhausted,
    /// …): a sentence for the editor. That folder is not retried; edits made elsewhere need a
    /// manual reload.
    pub failure: Option<String>,
}

/// What to watch and how to debounce.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// Directories to watch: the project's `.pi/forge`, `.pi/prompt-stacks` and the global forge
    /// root (see [`forge_roots`]). Roots that do not exist yet are fine. Relative paths are
    /// resolved against the current directory.
    pub roots: Vec<PathBuf>,
    /// Quiet time before a batch is delivered ([`DEFAULT_DEBOUNCE`]).
    pub debounce: Duration,
    /// Test hook: watching this directory fails as if the inotify budget were exhausted; the
    /// counter counts the attempts.
    pub refuse: Option<(PathBuf, Arc<AtomicUsize>)>,
}

impl WatchConfig {
    pub fn new(roots: Vec<PathBuf>) -> WatchConfig {
        WatchConfig {
            roots,
            debounce: DEFAULT_DEBOUNCE,
            refuse: None,
        }
    }
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig::new(Vec::new())
    }
}

/// The directories to watch for `store`: the global root, plus the project's `.pi/forge` and
/// `.pi/prompt-stacks` when the project is trusted (an untrusted project is never read).
pub fn forge_roots(store: &FsStore, trusted: bool) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if trusted {
        roots.extend(store.dir_path(Scope::Project, Dir::Root).ok());
        roots.extend(store.dir_path(Scope::Project, Dir::LegacyStacks).ok());
    }
    roots.extend(store.dir_path(Scope::Global, Dir::Root).ok());
    roots
}

// ---------------------------------------------------------------------------------------------
// Own writes

// ---------------------------------------------------------------------------------------------
// Watcher

enum Msg {
    Event(notify::Result<notify::Event>),
    Stop,
}

/// A running watcher. Dropping it stops notify and the worker thread; when `drop` returns no
/// further `on_batch` call starts (a call in progress is waited for, so do not drop the watcher
/// while holding a lock the callback takes).
pub struct Watcher {
    tx: mpsc::Sender<Msg>,
    worker: Option<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(worker) = self.worker.take() {
            // Dropped from inside `on_batch`: the worker ends after the callback returns.
            if worker.thread().id() != thread::current().id() {
                let _ = worker.join();
            }
        }
    }
}

/// Starts watching. The roots that exist are armed before this returns, so a write made after
/// `spawn` returns is seen. Fails only when the OS watcher cannot be created at all; roots that
/// cannot be watched are logged and retried.
pub fn spawn(
    config: WatchConfig,
    on_batch: impl Fn(ChangeBatch) + Send + Sync + 'static,
) -> anyhow::Result<Watcher> {
    let (tx, rx) = mpsc::channel();
    let events = tx.clone();
    let notify = notify::recommended_watcher(move |result| {
        let _ = events.send(Msg::Event(result));
    })
    .context("cannot start the file watcher")?;
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut roots: Vec<PathBuf> = Vec::new();
    for root in config.roots {
        let absolute: PathBuf = cwd.join(root).components().collect();
        if !roots.contains(&absolute) {
            roots.push(absolute);
        }
    }
    let mut worker = Worker {
        notify,
        roots,
        debounce: config.debounce,
        armed: HashMap::new(),
        known_dirs: HashSet::new(),
        pending: BTreeSet::new(),
        to_scan: BTreeSet::new(),
        first_event: None,
        last_event: None,
        recheck_now: false,
        next_recheck: Instant::now() + RECHECK_INTERVAL,
        logged: HashSet::new(),
        failed: HashSet::new(),
        failure: None,
        told: false,
        refuse: config.refuse,
    };
    worker.reconcile(false);
    let handle = thread::Builder::new()
        .name("pi-forge-watch".to_string())
        .spawn(move || worker.run(rx, on_batch))
        .context("cannot start the file watcher thread")?;
    Ok(Watcher {
        tx,
        worker: Some(handle),
    })
}

/// What a watched directory is to the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// A root (`.pi/forge`, the global root, `.pi/prompt-stacks`).
    Root,
    /// A resource folder one level below a root ([`RESOURCE_DIRS`]).
    Resources,
    /// The nearest existing ancestor of a root that does not exist yet.
    Ancestor,
}

impl Watched {
    /// Levels below its root, for the directories whose contents matter.
    fn depth(self) -> Option<usize> {
        match self {
            Watched::Root => Some(0),
            Watched::Resources => Some(1),
            Watched::Ancestor => None,
        }
    }
}

/// One watch the worker holds (always non-recursive).
struct Armed {
    what: Watched,
    /// Device and inode when armed: a root replaced under the same path needs a new watch.
    identity: Option<(u64, u64)>,
}

/// How a path took part in an event.
#[derive(Clone, Copy, Debug)]
enum Role {
    /// Created or renamed to; `dir` when the event says whether it is a directory.
    Appeared { dir: Option<bool> },
    /// Removed or renamed from.
    Gone { dir: Option<bool> },
    /// Contents or metadata changed.
    Changed,
}

struct Worker {
    notify: notify::RecommendedWatcher,
    roots: Vec<PathBuf>,
    debounce: Duration,
    armed: HashMap<PathBuf, Armed>,
    /// Directories up to [`MAX_DIR_DEPTH`] below an armed root: a rename *from* one of these is
    /// a directory disappearing (the event itself does not say).
    known_dirs: HashSet<PathBuf>,
    pending: BTreeSet<PathBuf>,
    /// Directories that appeared; their contents are listed just before the batch is delivered.
    to_scan: BTreeSet<PathBuf>,
    first_event: Option<Instant>,
    last_event: Option<Instant>,
    recheck_now: bool,
    next_recheck: Instant,
    /// Error kinds already written to stderr.
    logged: HashSet<String>,
    /// Directories that could not be watched: never retried (no spinning on an exhausted
    /// inotify budget).
    failed: HashSet<PathBuf>,
    /// The failure to hand to the next batch.
    failure: Option<String>,
    /// Whether a failure was handed over already (the editor is told once).
    told: bool,
    /// Test hook: watching this path fails as if the inotify budget were exhausted.
    refuse: Option<(PathBuf, Arc<AtomicUsize>)>,
}

impl Worker {
    fn run(mut self, rx: mpsc::Receiver<Msg>, on_batch: impl Fn(ChangeBatch)) {
        loop {
            let now = Instant::now();
            let deadline = match self.flush_deadline() {
                Some(flush) => flush.min(self.next_recheck),
                None => self.next_recheck,
            };
            match rx.recv_timeout(deadline.saturating_duration_since(now)) {
                Ok(Msg::Event(Ok(event))) => self.on_event(event),
                Ok(Msg::Event(Err(error))) => self.log_error("event stream", &error),
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.recheck_now || Instant::now() >= self.next_recheck {
                self.reconcile(true);
                self.recheck_now = false;
                self.next_recheck = Instant::now() + RECHECK_INTERVAL;
            }
            if self
                .flush_deadline()
                .is_some_and(|flush| Instant::now() >= flush)
            {
                let batch = self.take_batch();
                if !batch.paths.is_empty() || batch.failure.is_some() {
                    let delivered =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_batch(batch)));
                    if delivered.is_err() {
                        self.log_once("panic", "a change handler panicked; watching goes on");
                    }
                }
            }
        }
    }

    fn flush_deadline(&self) -> Option<Instant> {
        let first = self.first_event?;
        let last = self.last_event.unwrap_or(first);
        Some((last + self.debounce).min(first + MAX_BATCH_DELAY))
    }

    fn report(&mut self, path: PathBuf) {
        let now = Instant::now();
        self.first_event.get_or_insert(now);
        self.last_event = Some(now);
        self.pending.insert(path);
    }

    fn take_batch(&mut self) -> ChangeBatch {
        if !self.to_scan.is_empty() {
            // A resource folder that appeared was armed by the re-check its event triggered; a
            // round trip through notify's event loop makes sure that watch is in place, so
            // nothing written after this listing can be missed.
            self.barrier();
            for dir in std::mem::take(&mut self.to_scan) {
                if let Some(depth) = self.depth(&dir) {
                    self.scan(&dir, depth, true);
                }
            }
        }
        self.first_event = None;
        self.last_event = None;
        ChangeBatch {
            paths: std::mem::take(&mut self.pending).into_iter().collect(),
            failure: self.failure.take(),
        }
    }

    /// Waits until notify's event loop has finished whatever it was doing.
    fn barrier(&mut self) {
        // A path containing NUL can exist nowhere, so it is never watched: unwatching it is a
        // no-op that still goes through the event loop and back.
        let _ = self.notify.unwatch(Path::new("/\0pi-forge-barrier"));
    }

    // -- events -------------------------------------------------------------------------------

    fn on_event(&mut self, event: notify::Event) {
        if event.need_rescan() {
            self.rescan();
            return;
        }
        let paths = event.paths;
        match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                for path in paths {
                    self.on_path(path, Role::Changed);
                }
            }
            // Opening and reading: the server's own reloads must never look like changes.
            EventKind::Access(_) => {}
            EventKind::Create(kind) => {
                let dir = match kind {
                    CreateKind::Folder => Some(true),
                    CreateKind::File => Some(false),
                    _ => None,
                };
                for path in paths {
                    self.on_path(path, Role::Appeared { dir });
                }
            }
            EventKind::Remove(kind) => {
                let dir = match kind {
                    RemoveKind::Folder => Some(true),
                    RemoveKind::File => Some(false),
                    _ => None,
                };
                for path in paths {
                    self.on_path(path, Role::Gone { dir });
                }
            }
            EventKind::Modify(ModifyKind::Name(mode)) => {
                for (i, path) in paths.into_iter().enumerate() {
                    let role = match mode {
                        RenameMode::From => Role::Gone { dir: None },
                        RenameMode::To => Role::Appeared { dir: None },
                        RenameMode::Both if i == 0 => Role::Gone { dir: None },
                        RenameMode::Both => Role::Appeared { dir: None },
                        _ if path.symlink_metadata().is_ok() => Role::Appeared { dir: None },
                        _ => Role::Gone { dir: None },
                    };
                    self.on_path(path, role);
                }
            }
            EventKind::Modify(_) | EventKind::Any | EventKind::Other => {
                for path in paths {
                    self.on_path(path, Role::Changed);
                }
            }
        }
    }

    fn on_path(&mut self, path: PathBuf, role: Role) {
        if self.roots.iter().any(|root| root.starts_with(&path)) {
            // A root or one of its ancestors appeared, vanished or moved: re-arm now.
            self.recheck_now = true;
        }
        let Some(depth) = self.depth(&path) else {
            return; // outside every root
        };
        let name = match path.file_name() {
            Some(name) => name.to_string_lossy().into_owned(),
            None => String::new(),
        };
        if is_ignored_name(&name) {
            return;
        }
        let json = is_json_name(&name) && (1..=MAX_FILE_DEPTH).contains(&depth);
        if depth == 1 && RESOURCE_DIRS.contains(&name.as_str()) {
            // A resource folder appeared, vanished or moved: (un)watch it now.
            self.recheck_now = true;
        }
        match role {
            Role::Appeared { dir } => {
                if dir.unwrap_or_else(|| path.is_dir()) {
                    if depth <= MAX_DIR_DEPTH {
                        self.known_dirs.insert(path.clone());
                        self.to_scan.insert(path.clone());
                        self.report(path);
                    }
                } else if json {
                    self.report(path);
                }
            }
            Role::Gone { dir } => {
                // A root is a directory; so is any directory seen below one.
                let was_dir = dir.unwrap_or_else(|| depth == 0 || self.known_dirs.contains(&path));
                if was_dir {
                    if depth <= MAX_DIR_DEPTH {
                        self.known_dirs.retain(|known| !known.starts_with(&path));
                        self.to_scan.retain(|known| !known.starts_with(&path));
                        self.report(path);
                    }
                } else if json {
                    self.report(path);
                }
            }
            Role::Changed => {
                if json {
                    self.report(path);
                }
            }
        }
    }

    /// The queue overflowed: anything may have changed.
    fn rescan(&mut self) {
        self.log_once(
            "rescan",
            "the event queue overflowed; reloading everything that is watched",
        );
        self.reconcile(true);
        let roots: Vec<PathBuf> = self.roots.iter().filter(|r| r.is_dir()).cloned().collect();
        for root in roots {
            self.known_dirs.retain(|known| !known.starts_with(&root));
            self.scan(&root, 0, false);
            self.report(root);
        }
    }

    /// Levels below the closest root containing `path` (0 for a root itself).
    fn depth(&self, path: &Path) -> Option<usize> {
        self.roots
            .iter()
            .filter_map(|root| path.strip_prefix(root).ok())
            .map(|rel| rel.components().count())
            .min()
    }

    /// Lists `dir` (at `depth` below its root): remembers its directories and, with `report`,
    /// reports them and the `*.json` files within reach.
    fn scan(&mut self, dir: &Path, depth: usize, report: bool) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subdirs = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_ignored_name(&name) {
                continue;
            }
            let path = entry.path();
            let child_depth = depth + 1;
            // Follows symbolic links, as loading does.
            if path.is_dir() {
                if child_depth <= MAX_DIR_DEPTH {
                    self.known_dirs.insert(path.clone());
                    if report {
                        self.report(path.clone());
                    }
                    subdirs.push(path);
                }
            } else if report && is_json_name(&name) && child_depth <= MAX_FILE_DEPTH {
                self.report(path);
            }
        }
        for sub in subdirs {
            self.scan(&sub, depth + 1, report);
        }
    }

    // -- arming -------------------------------------------------------------------------------

    /// What should be watched now, each directory on its own (non-recursively): every existing
    /// root and its existing [`RESOURCE_DIRS`], else the root's nearest existing ancestor. A
    /// linked resource folder is watched where it points (one watch); nothing below it, and no
    /// other folder under a root, is ever watched. Folders that failed are left out.
    fn desired(&self) -> HashMap<PathBuf, Watched> {
        let mut want: HashMap<PathBuf, Watched> = HashMap::new();
        for root in &self.roots {
            if root.is_dir() {
                want.insert(root.clone(), Watched::Root);
                for name in RESOURCE_DIRS {
                    let sub = root.join(name);
                    if sub.is_dir() {
                        want.entry(sub).or_insert(Watched::Resources);
                    }
                }
            } else if let Some(ancestor) = root.ancestors().skip(1).find(|a| a.is_dir()) {
                want.entry(ancestor.to_path_buf())
                    .or_insert(Watched::Ancestor);
            }
        }
        want.retain(|path, _| !self.failed.contains(path));
        want
    }

    /// Watches one directory, non-recursively.
    fn watch(&mut self, path: &Path) -> notify::Result<()> {
        if let Some((refused, attempts)) = &self.refuse {
            if refused == path {
                attempts.fetch_add(1, AtomicOrdering::SeqCst);
                return Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch));
            }
        }
        self.notify.watch(path, RecursiveMode::NonRecursive)
    }

    /// A directory cannot be watched: it is left alone from now on, and the editor is told
    /// (once).
    fn watch_failed(&mut self, path: &Path, error: &notify::Error) {
        self.failed.insert(path.to_path_buf());
        self.log_error(&format!("cannot watch {}", path.display()), error);
        if !self.told {
            self.told = true;
            let hint = if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) {
                " (the system's inotify watch limit is reached; raise fs.inotify.max_user_watches)"
            } else {
                ""
            };
            self.failure = Some(format!(
                "Cannot watch {} for changes: {error}{hint}. Edits made outside the editor are not picked up; use Reload after making them.",
                path.display()
            ));
            let now = Instant::now();
            self.first_event.get_or_insert(now);
            self.last_event = Some(now);
        }
    }

    /// Brings the watches in line with the filesystem. With `report`, a root that just became
    /// watchable is reported together with what it already contains.
    fn reconcile(&mut self, report: bool) {
        // A directory can appear between looking and watching; go round until nothing changes.
        for _ in 0..8 {
            let desired = self.desired();
            let mut changed = false;
            let stale: Vec<PathBuf> = self
                .armed
                .iter()
                .filter(|(path, armed)| {
                    desired.get(*path) != Some(&armed.what) || identity(path) != armed.identity
                })
                .map(|(path, _)| path.clone())
                .collect();
            for path in stale {
                // notify may already have dropped it (the directory was deleted).
                let _ = self.notify.unwatch(&path);
                if self
                    .armed
                    .remove(&path)
                    .is_some_and(|a| a.what.depth().is_some())
                {
                    self.known_dirs.retain(|known| !known.starts_with(&path));
                    // The root went away or was replaced (perhaps with no event: an ancestor
                    // was renamed); whatever it held is gone.
                    if report {
                        self.report(path.clone());
                    }
                }
                changed = true;
            }
            for (path, what) in desired {
                if self.armed.contains_key(&path) {
                    continue;
                }
                match self.watch(&path) {
                    Ok(()) => {
                        let identity = identity(&path);
                        self.armed.insert(path.clone(), Armed { what, identity });
                        changed = true;
                        if let Some(depth) = what.depth() {
                            if depth == 0 {
                                self.known_dirs.retain(|known| !known.starts_with(&path));
                            } else {
                                self.known_dirs.insert(path.clone());
                            }
                            self.scan(&path, depth, report);
                            if report {
                                self.report(path);
                            }
                        }
                    }
                    // Gone again before we could watch it; the next round sees that.
                    Err(e) if matches!(e.kind, notify::ErrorKind::PathNotFound) => {
                        changed = true;
                    }
                    Err(e) => {
                        let _ = self.notify.unwatch(&path);
                        self.watch_failed(&path, &e);
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    // -- errors -------------------------------------------------------------------------------

    fn log_error(&mut self, context: &str, error: &notify::Error) {
        let kind = match &error.kind {
            notify::ErrorKind::Generic(_) => "generic".to_string(),
            notify::ErrorKind::Io(e) => format!("io-{:?}", e.kind()),
            notify::ErrorKind::PathNotFound => "path-not-found".to_string(),
            notify::ErrorKind::WatchNotFound => "watch-not-found".to_string(),
            notify::ErrorKind::InvalidConfig(_) => "invalid-config".to_string(),
            notify::ErrorKind::MaxFilesWatch => "max-files-watch".to_string(),
        };
        let hint = if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) {
            " (raise fs.inotify.max_user_watches)"
        } else {
            ""
        };
        self.log_once(&kind, &format!("{context}: {error}{hint}"));
    }

    fn log_once(&mut self, kind: &str, message: &str) {
        if self.logged.insert(kind.to_string()) {
            eprintln!("pi-forge: file watcher: {message}");
        }
    }
}

fn is_json_name(name: &str) -> bool {
    name.len() > ".json".len() && name.ends_with(".json")
}

/// Temp, swap, backup and lock files of the store and of editors.
fn is_ignored_name(name: &str) -> bool {
    name.ends_with(".tmp") // FsStore: `.<name>.<pid>-<n>.tmp`
        || name.starts_with(".#") // Emacs lock files
        || (name.starts_with('#') && name.ends_with('#')) // Emacs auto-save files
        || name.ends_with('~') // backups
        || [".swp", ".swo", ".swx"].iter().any(|ext| name.ends_with(ext)) // Vim swap files
        || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())) // Vim's `4913` probe
}

#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_path: &Path) -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_core::workspace::{FileRef, Store as _};
    use std::fs;
    use std::sync::Mutex;

    /// Generous: the suite must pass on a loaded two-core machine.
    const DEADLINE: Duration = Duration::from_secs(10);

    struct Harness {
        _temp: tempfile::TempDir,
        project: PathBuf,
        global: PathBuf,
        rx: mpsc::Receiver<(Instant, ChangeBatch)>,
        _watcher: Watcher,
        sentinels: std::cell::Cell<u32>,
    }

    impl Harness {
        /// A project and a global root inside a temp dir; `setup` prepares the tree before the
        /// watcher starts.
        fn start(debounce: Duration, setup: impl FnOnce(&Path, &Path)) -> Harness {
            let temp = tempfile::tempdir().unwrap();
            let project = temp.path().join("project");
            let global = temp.path().join("home/.pi/forge");
            fs::create_dir_all(&project).unwrap();
            setup(&project, &global);
            let store = FsStore::new(Some(project.clone()), global.clone());
            let (tx, rx) = mpsc::channel();
            let tx = Mutex::new(tx);
            let config = WatchConfig {
                roots: forge_roots(&store, true),
                debounce,
                refuse: None,
            };
            let watcher = spawn(config, move |batch| {
                let _ = tx.lock().unwrap().send((Instant::now(), batch));
            })
            .unwrap();
            Harness {
                _temp: temp,
                project,
                global,
                rx,
                _watcher: watcher,
                sentinels: std::cell::Cell::new(0),
            }
        }

        fn stacks(&self) -> PathBuf {
            self.project.join(".pi/forge/prompt-stacks")
        }

        fn next(&self) -> ChangeBatch {
            match self.rx.recv_timeout(DEADLINE) {
                Ok((_, batch)) => batch,
                Err(e) => panic!("no batch within {DEADLINE:?}: {e}"),
            }
        }

        /// Batches until one names `path`, that one included.
        fn until(&self, path: &Path) -> Vec<ChangeBatch> {
            let end = Instant::now() + DEADLINE;
            let mut out = Vec::new();
            loop {
                let left = end.saturating_duration_since(Instant::now());
                match self.rx.recv_timeout(left) {
                    Ok((_, batch)) => {
                        let done = batch.paths.iter().any(|p| p == path);
                        out.push(batch);
                        if done {
                            return out;
                        }
                    }
                    Err(_) => panic!("{} never reported; got {out:?}", path.display()),
                }
            }
        }

        /// Waits until every event so far has been delivered (contents unchecked).
        fn settle(&self, dir: &Path) {
            let n = self.sentinels.get() + 1;
            self.sentinels.set(n);
            let sentinel = dir.join(format!("zz-settle-{n}.json"));
            fs::write(&sentinel, b"{}").unwrap();
            self.until(&sentinel);
        }

        /// Proves that nothing else is on its way: writes a fresh file into `dir` (an existing,
        /// watched directory) and expects the very next batch to name that file only. Events
        /// arrive in order, so anything pending would show up first or alongside.
        fn assert_quiet(&self, dir: &Path) {
            let n = self.sentinels.get() + 1;
            self.sentinels.set(n);
            let sentinel = dir.join(format!("zz-sentinel-{n}.json"));
            fs::write(&sentinel, b"{}").unwrap();
            let batches = self.until(&sentinel);
            assert_eq!(
                batches,
                vec![ChangeBatch {
                    paths: vec![sentinel],
                    failure: None,
                }],
                "unexpected changes reported"
            );
        }
    }

    fn with_stacks_dir(project: &Path, _global: &Path) {
        fs::create_dir_all(project.join(".pi/forge/prompt-stacks")).unwrap();
    }

    /// Debounce for tests that expect exactly one batch per operation: a plain `fs::write` is
    /// three system calls, and a loaded machine may pause between them for longer than 75 ms.
    const TEST_DEBOUNCE: Duration = Duration::from_millis(150);

    #[test]
    fn create_edit_delete_each_yield_one_batch() {
        let h = Harness::start(TEST_DEBOUNCE, with_stacks_dir);
        let x = h.stacks().join("x.json");

        fs::write(&x, b"{\"id\":\"x\"}\n").unwrap();
        assert_eq!(h.next().paths, vec![x.clone()], "create");
        h.assert_quiet(&h.stacks());

        fs::write(&x, b"{\"id\":\"x\",\"name\":\"X\"}\n").unwrap();
        assert_eq!(h.next().paths, vec![x.clone()], "edit");
        h.assert_quiet(&h.stacks());

        fs::remove_file(&x).unwrap();
        assert_eq!(h.next().paths, vec![x.clone()], "delete");
        h.assert_quiet(&h.stacks());
    }

    #[test]
    fn atomic_rename_save_reports_the_target_only() {
        let h = Harness::start(TEST_DEBOUNCE, |project, global| {
            with_stacks_dir(project, global);
            fs::write(project.join(".pi/forge/prompt-stacks/x.json"), b"{}").unwrap();
        });
        let x = h.stacks().join("x.json");

        // By hand, the way the store names its temp files.
        let temp = h.stacks().join(".x.json.4242-0.tmp");
        fs::write(&temp, b"{\"id\":\"x\"}\n").unwrap();
        fs::rename(&temp, &x).unwrap();
        assert_eq!(h.next().paths, vec![x.clone()], "rename over x.json");
        h.assert_quiet(&h.stacks());

        // Vim with `backupcopy=no`: the original becomes the backup, a new file is written.
        fs::rename(&x, h.stacks().join("x.json~")).unwrap();
        fs::write(&x, b"{\"id\":\"x\",\"v\":2}\n").unwrap();
        fs::remove_file(h.stacks().join("x.json~")).unwrap();
        assert_eq!(h.next().paths, vec![x.clone()], "vim-style save");
        h.assert_quiet(&h.stacks());

        // The real store: update (temp + rename) and an exclusive create (temp + hard link).
        let store = FsStore::new(Some(h.project.clone()), h.global.clone());
        let file = FileRef::new(Scope::Project, Dir::Stacks, "x.json").unwrap();
        let current = forge_core::canonical::revision(&fs::read(&x).unwrap());
        let bytes = b"{\"id\":\"x\",\"v\":3}\n";
        store.update(&file, &current, bytes).unwrap();
        let batch = h.next();
        assert_eq!(batch.paths, vec![x.clone()], "FsStore::update");
        h.assert_quiet(&h.stacks());

        let y = FileRef::new(Scope::Project, Dir::Stacks, "y.json").unwrap();
        store.create(&y, b"{}").unwrap();
        assert_eq!(h.next().paths, vec![h.stacks().join("y.json")], "create");
        h.assert_quiet(&h.stacks());
    }

    #[test]
    fn a_burst_of_writes_is_one_batch() {
        let h = Harness::start(DEFAULT_DEBOUNCE, with_stacks_dir);
        let x = h.stacks().join("x.json");
        let started = Instant::now();
        for i in 0..50 {
            fs::write(&x, format!("{{\"id\":\"x\",\"n\":{i}}}\n")).unwrap();
        }
        let took = started.elapsed();
        let sentinel = h.stacks().join("zz-after-burst.json");
        let first = h.next();
        fs::write(&sentinel, b"{}").unwrap();
        let mut batches = vec![first];
        batches.extend(h.until(&sentinel));
        let naming_x: Vec<&ChangeBatch> = batches.iter().filter(|b| b.paths.contains(&x)).collect();
        eprintln!(
            "50 writes took {took:?}; {} batch(es) named x.json",
            naming_x.len()
        );
        // At most two when the burst fits the window, as it does on an idle machine (about
        // 10 ms); a starved writer pauses mid-burst, and every pause longer than the debounce
        // may end a batch.
        let allowed = 2 + (took.as_millis() / DEFAULT_DEBOUNCE.as_millis()) as usize;
        assert!(
            (1..=allowed).contains(&naming_x.len()),
            "{} batches after {took:?}: {batches:?}",
            naming_x.len()
        );
        for batch in naming_x {
            assert_eq!(batch.paths.iter().filter(|p| **p == x).count(), 1);
        }
    }

    #[test]
    fn temp_swap_and_lock_files_are_ignored() {
        let h = Harness::start(TEST_DEBOUNCE, with_stacks_dir);
        let dir = h.stacks();
        for name in [
            ".x.json.4242-7.tmp",
            ".x.json.swp",
            "x.json~",
            "4913",
            ".#x.json",
            "#x.json#",
            "notes.txt",
        ] {
            fs::write(dir.join(name), b"{}").unwrap();
            fs::remove_file(dir.join(name)).unwrap();
        }
        h.assert_quiet(&dir);
    }

    #[test]
    fn reads_deep_files_and_paths_outside_the_roots_are_ignored() {
        // `.pi/prompt-stacks` is missing, so `.pi` itself is watched (non-recursively).
        let h = Harness::start(TEST_DEBOUNCE, |project, global| {
            with_stacks_dir(project, global);
            fs::write(project.join(".pi/forge/prompt-stacks/x.json"), b"{}").unwrap();
        });
        fs::write(h.project.join(".pi/settings.json"), b"{}").unwrap();
        fs::write(h.project.join("package.json"), b"{}").unwrap();
        fs::create_dir_all(h.project.join(".pi/other")).unwrap();
        fs::write(h.project.join(".pi/other/a.json"), b"{}").unwrap();
        let deep = h.stacks().join("nested/deeper");
        fs::create_dir_all(&deep).unwrap();
        fs::write(deep.join("a.json"), b"{}").unwrap();
        fs::write(h.stacks().join("nested/b.json"), b"{}").unwrap();
        // What a reload does.
        let store = FsStore::new(Some(h.project.clone()), h.global.clone());
        let snapshot = forge_core::workspace::load(
            &store,
            &forge_core::workspace::LoadOptions {
                trusted: true,
                ..Default::default()
            },
        );
        assert_eq!(snapshot.stacks.len(), 1);
        h.assert_quiet(&h.stacks());
    }

    #[test]
    fn a_resource_directory_created_later_is_picked_up() {
        // `.pi/forge` exists, `prompt-stacks` does not.
        let h = Harness::start(TEST_DEBOUNCE, |project, _| {
            fs::create_dir_all(project.join(".pi/forge")).unwrap();
        });
        let x = h.stacks().join("x.json");
        fs::create_dir_all(h.stacks()).unwrap();
        fs::write(&x, b"{}").unwrap();
        let batches = h.until(&x);
        let all: BTreeSet<&PathBuf> = batches.iter().flat_map(|b| &b.paths).collect();
        assert!(all.contains(&h.stacks()), "{batches:?}");
        // The new directory is watched now.
        h.settle(&h.stacks());
        fs::write(&x, b"{\"v\":2}").unwrap();
        assert_eq!(h.next().paths, vec![x.clone()]);
        h.assert_quiet(&h.stacks());
    }

    #[test]
    fn roots_that_do_not_exist_at_spawn_are_picked_up() {
        // Neither `.pi` nor the global root exist.
        let h = Harness::start(TEST_DEBOUNCE, |_, _| {});
        let x = h.stacks().join("x.json");
        fs::create_dir_all(h.stacks()).unwrap();
        fs::write(&x, b"{}").unwrap();
        let batches = h.until(&x);
        let all: BTreeSet<&PathBuf> = batches.iter().flat_map(|b| &b.paths).collect();
        assert!(all.contains(&h.project.join(".pi/forge")), "{batches:?}");
        assert!(!all.contains(&h.project.join(".pi")), "outside the roots");
        h.settle(&h.stacks());
        fs::write(&x, b"{\"v\":2}").unwrap();
        assert_eq!(h.next().paths, vec![x.clone()]);
        h.assert_quiet(&h.stacks());

        // The legacy directory and the global root too.
        let legacy = h.project.join(".pi/prompt-stacks/old.json");
        fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        fs::write(&legacy, b"{}").unwrap();
        h.until(&legacy);
        let global = h.global.join("agent-profiles/p.json");
        fs::create_dir_all(global.parent().unwrap()).unwrap();
        fs::write(&global, b"{}").unwrap();
        h.until(&global);
        h.settle(global.parent().unwrap());
        fs::write(&global, b"{\"v\":2}").unwrap();
        assert_eq!(h.next().paths, vec![global.clone()]);
        h.assert_quiet(global.parent().unwrap());
    }

    #[test]
    fn a_root_removed_and_recreated_is_watched_again() {
        let h = Harness::start(TEST_DEBOUNCE, |project, global| {
            with_stacks_dir(project, global);
            fs::write(project.join(".pi/forge/prompt-stacks/x.json"), b"{}").unwrap();
        });
        let forge = h.project.join(".pi/forge");
        let x = h.stacks().join("x.json");
        fs::remove_dir_all(&forge).unwrap();
        let batches = h.until(&forge);
        let all: BTreeSet<&PathBuf> = batches.iter().flat_map(|b| &b.paths).collect();
        assert!(all.contains(&x), "{batches:?}");

        fs::create_dir_all(h.stacks()).unwrap();
        fs::write(&x, b"{\"v\":2}").unwrap();
        h.until(&x);
        h.settle(&h.stacks());
        fs::write(&x, b"{\"v\":3}").unwrap();
        assert_eq!(h.next().paths, vec![x.clone()]);
        h.assert_quiet(&h.stacks());

        // Replaced in one step by a directory moved in from elsewhere.
        let staged = h.project.join("staged-forge");
        fs::create_dir_all(staged.join("prompt-stacks")).unwrap();
        fs::write(staged.join("prompt-stacks/z.json"), b"{}").unwrap();
        fs::remove_dir_all(&forge).unwrap();
        fs::rename(&staged, &forge).unwrap();
        let z = h.stacks().join("z.json");
        h.until(&z);
        h.settle(&h.stacks());
        fs::write(&z, b"{\"v\":2}").unwrap();
        assert_eq!(h.next().paths, vec![z.clone()]);
        h.assert_quiet(&h.stacks());
    }

    #[test]
    fn a_root_moved_away_is_reported_and_rearmed() {
        // Both project roots exist, so no ancestor is watched: only the root's own watch and
        // the periodic re-check can notice.
        let h = Harness::start(TEST_DEBOUNCE, |project, global| {
            with_stacks_dir(project, global);
            fs::create_dir_all(project.join(".pi/prompt-stacks")).unwrap();
        });
        let forge = h.project.join(".pi/forge");
        fs::rename(&forge, h.project.join(".pi/forge-old")).unwrap();
        h.until(&forge);
        fs::create_dir_all(h.stacks()).unwrap();
        let x = h.stacks().join("x.json");
        fs::write(&x, b"{}").unwrap();
        h.until(&x);
        h.settle(&h.stacks());

        // An ancestor renamed: no event reaches the watcher; the re-check finds out.
        let legacy = h.project.join(".pi/prompt-stacks");
        fs::rename(h.project.join(".pi"), h.project.join(".pi-moved")).unwrap();
        let batches = h.until(&forge);
        let all: BTreeSet<&PathBuf> = batches.iter().flat_map(|b| &b.paths).collect();
        assert!(all.contains(&legacy), "{batches:?}");
        fs::rename(h.project.join(".pi-moved"), h.project.join(".pi")).unwrap();
        h.until(&x);
        h.settle(&h.stacks());
        fs::write(&x, b"{\"v\":2}").unwrap();
        assert_eq!(h.next().paths, vec![x]);
        h.assert_quiet(&legacy);
    }

    #[test]
    fn a_resource_directory_renamed_away_is_reported() {
        let h = Harness::start(TEST_DEBOUNCE, |project, global| {
            with_stacks_dir(project, global);
            fs::write(project.join(".pi/forge/prompt-stacks/x.json"), b"{}").unwrap();
        });
        let forge = h.project.join(".pi/forge");
        let old = forge.join("stacks-old");
        let x = h.stacks().join("x.json");
        // Both names are directories one level down; what the new one holds is listed.
        fs::rename(h.stacks(), &old).unwrap();
        assert_eq!(
            h.next().paths,
            vec![h.stacks(), old.clone(), old.join("x.json")]
        );
        h.assert_quiet(&forge);
        fs::rename(&old, h.stacks()).unwrap();
        assert_eq!(h.next().paths, vec![h.stacks(), x.clone(), old.clone()]);
        fs::write(&x, b"{\"v\":2}").unwrap();
        assert_eq!(h.next().paths, vec![x]);
        h.assert_quiet(&forge);
    }

    #[test]
    fn notify_errors_and_panicking_handlers_do_not_stop_the_watcher() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("forge");
        fs::create_dir_all(&root).unwrap();
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let (panics_tx, panics) = mpsc::channel();
        let panics_tx = Mutex::new(panics_tx);
        let watcher = spawn(
            WatchConfig {
                roots: vec![root.clone()],
                debounce: TEST_DEBOUNCE,
                refuse: None,
            },
            move |batch| {
                if batch.paths.iter().any(|p| p.ends_with("boom.json")) {
                    let _ = panics_tx.lock().unwrap().send(());
                    panic!("handler failure (expected by the test)");
                }
                let _ = tx.lock().unwrap().send(batch);
            },
        )
        .unwrap();
        for _ in 0..3 {
            let _ = watcher
                .tx
                .send(Msg::Event(Err(notify::Error::generic("injected failure"))));
        }
        let _ = watcher.tx.send(Msg::Event(Err(notify::Error::new(
            notify::ErrorKind::MaxFilesWatch,
        ))));
        fs::write(root.join("boom.json"), b"{}").unwrap();
        panics.recv_timeout(DEADLINE).unwrap();
        let after = root.join("after.json");
        fs::write(&after, b"{}").unwrap();
        let batch = rx.recv_timeout(DEADLINE).unwrap();
        assert_eq!(batch.paths, vec![after]);

        // An overflowed queue: the roots are reported, meaning "reload everything".
        let _ = watcher.tx.send(Msg::Event(Ok(
            notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan)
        )));
        let batch = rx.recv_timeout(DEADLINE).unwrap();
        assert_eq!(batch.paths, vec![root]);
    }

    #[test]
    fn dropping_the_watcher_stops_it() {
        let temp = tempfile::tempdir().unwrap();
        let token = Arc::new(());
        let held = Arc::clone(&token);
        let watcher = spawn(
            WatchConfig::new(vec![temp.path().to_path_buf()]),
            move |_| {
                let _held = &held;
            },
        )
        .unwrap();
        assert_eq!(Arc::strong_count(&token), 2);
        let started = Instant::now();
        drop(watcher);
        assert_eq!(Arc::strong_count(&token), 1, "the callback was released");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn watcher_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Watcher>();
    }

    #[test]
    fn names() {
        assert!(is_ignored_name(".x.json.123-4.tmp"));
        assert!(is_ignored_name(".x.json.swp"));
        assert!(is_ignored_name("x.json~"));
        assert!(is_ignored_name("4913"));
        assert!(is_ignored_name(".#x.json"));
        assert!(!is_ignored_name("x.json"));
        assert!(!is_ignored_name("prompt-stacks"));
        assert!(is_json_name("x.json"));
        assert!(!is_json_name(".json"));
    }

    /// The inodes this process's inotify instances watch (`/proc/self/fdinfo`).
    #[cfg(target_os = "linux")]
    fn watched_inodes() -> BTreeSet<u64> {
        let mut inodes = BTreeSet::new();
        for entry in fs::read_dir("/proc/self/fdinfo").unwrap().flatten() {
            let Ok(text) = fs::read_to_string(entry.path()) else {
                continue;
            };
            for line in text.lines().filter(|l| l.starts_with("inotify wd:")) {
                let ino = line
                    .split_whitespace()
                    .find_map(|field| field.strip_prefix("ino:"))
                    .and_then(|hex| u64::from_str_radix(hex, 16).ok());
                inodes.extend(ino);
            }
        }
        inodes
    }

    #[cfg(target_os = "linux")]
    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        fs::metadata(path).unwrap().ino()
    }

    /// Issue 16, point 7: only the roots and their resource folders are watched; deeper
    /// folders, other folders and linked trees cost no watch.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_roots_and_resource_folders_are_watched() {
        let outside = tempfile::tempdir().unwrap();
        let big = outside.path().join("big");
        fs::create_dir_all(big.join("a/b/c")).unwrap();
        let big_for_setup = big.clone();
        let h = Harness::start(TEST_DEBOUNCE, move |project, global| {
            with_stacks_dir(project, global);
            let forge = project.join(".pi/forge");
            fs::create_dir_all(forge.join("prompt-stacks/nested/deeper")).unwrap();
            fs::create_dir_all(forge.join("payloads/old")).unwrap();
            std::os::unix::fs::symlink(&big_for_setup, forge.join("linked-tree")).unwrap();
            std::os::unix::fs::symlink(&big_for_setup, forge.join("agent-profiles")).unwrap();
        });
        let forge = h.project.join(".pi/forge");
        let watched = watched_inodes();
        for path in [forge.clone(), h.stacks()] {
            assert!(
                watched.contains(&inode(&path)),
                "{} is not watched",
                path.display()
            );
        }
        // A linked resource folder is watched where it points (one watch), nothing below it.
        assert!(watched.contains(&inode(&big)));
        for path in [
            h.stacks().join("nested"),
            h.stacks().join("nested/deeper"),
            forge.join("payloads"),
            forge.join("payloads/old"),
            big.join("a"),
            big.join("a/b"),
            big.join("a/b/c"),
        ] {
            assert!(
                !watched.contains(&inode(&path)),
                "{} is watched",
                path.display()
            );
        }
        // Still live: a file in the linked resource folder.
        let p = forge.join("agent-profiles/p.json");
        fs::write(big.join("p.json"), b"{}").unwrap();
        h.until(&p);
    }

    /// Issue 16, point 7: a folder that cannot be watched is reported once and not retried.
    #[test]
    fn a_folder_that_cannot_be_watched_is_reported_once_and_not_retried() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("forge");
        fs::create_dir_all(root.join("prompt-stacks")).unwrap();
        let stacks = root.join("prompt-stacks");
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let attempts = Arc::new(AtomicUsize::new(0));
        let watcher = spawn(
            WatchConfig {
                roots: vec![root.clone()],
                debounce: TEST_DEBOUNCE,
                refuse: Some((stacks.clone(), Arc::clone(&attempts))),
            },
            move |batch| {
                let _ = tx.lock().unwrap().send(batch);
            },
        )
        .unwrap();
        let first = rx.recv_timeout(DEADLINE).unwrap();
        assert_eq!(
            first.failure.as_deref(),
            Some(format!(
                "Cannot watch {} for changes: OS file watch limit reached. (the system's inotify watch limit is reached; raise fs.inotify.max_user_watches). Edits made outside the editor are not picked up; use Reload after making them.",
                stacks.display()
            ).as_str())
        );
        // The root itself is still watched. A new resource folder makes the worker re-check its
        // watches before that batch is delivered: the failed folder is not tried again, and no
        // second failure is reported.
        let profiles = root.join("agent-profiles");
        fs::create_dir_all(&profiles).unwrap();
        let end = Instant::now() + DEADLINE;
        loop {
            let batch = rx
                .recv_timeout(end.saturating_duration_since(Instant::now()))
                .unwrap();
            assert_eq!(batch.failure, None);
            if batch.paths.contains(&profiles) {
                break;
            }
        }
        assert_eq!(attempts.load(AtomicOrdering::SeqCst), 1);
        drop(watcher);
    }

    #[test]
    fn roots_follow_trust() {
        let store = FsStore::new(Some(PathBuf::from("/p")), PathBuf::from("/g"));
        assert_eq!(
            forge_roots(&store, true),
            vec![
                PathBuf::from("/p/.pi/forge"),
                PathBuf::from("/p/.pi/prompt-stacks"),
                PathBuf::from("/g")
            ]
        );
        assert_eq!(forge_roots(&store, false), vec![PathBuf::from("/g")]);
    }
}
