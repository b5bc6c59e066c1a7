//! The one owner of the workspace while `pi-forge ui` runs.
//!
//! [`WorkspaceHandle`] holds the current [`WorkspaceSnapshot`] behind an `ArcSwap`: readers take
//! the whole snapshot with one atomic load and never see a half-built one. Every change goes
//! through [`WorkspaceHandle::reload`], which builds a complete new snapshot on the blocking pool,
//! swaps it in, compares it with the old one file by file and publishes at most one
//! [`Event`] on the broadcast channel behind `GET /api/events`.
//!
//! Writes and reloads are serialized by one async mutex ([`WorkspaceHandle::lock`]). A handler
//! holds it across "call the service, reload", so the changes of its own write are published once,
//! with origin `self`, before the watcher's batch for the same files arrives. That batch then
//! finds every reported file already at the revision the snapshot holds and skips the reload
//! ([`WorkspaceHandle::reload_paths`]), so an own save loads the workspace once, not twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use forge_core::diag::Diagnostic;
use forge_core::workspace::{self, FileRef, FsStore, LoadOptions, Loaded, WorkspaceSnapshot};
use tokio::sync::{broadcast, Mutex, MutexGuard};

/// Capacity of the event channel; a subscriber that falls further behind gets a `resync`.
const EVENT_CAPACITY: usize = 256;

// The `changed` event is part of the web ↔ server contract (`forge_core::api`).
pub use forge_core::api::{ChangeEvent as Event, ChangeKind, FileChange as Change, Origin};

/// Identity of a loaded file in a snapshot, for diffing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileState {
    kind: &'static str,
    key: String,
    path: String,
    revision: String,
}

fn file_states(snapshot: &WorkspaceSnapshot) -> BTreeMap<FileRef, FileState> {
    fn add<T>(out: &mut BTreeMap<FileRef, FileState>, kind: &'static str, entries: &[Loaded<T>]) {
        for e in entries {
            out.insert(
                e.file.clone(),
                FileState {
                    kind,
                    key: e.key.to_string(),
                    path: e.path.clone(),
                    revision: e.revision.clone(),
                },
            );
        }
    }
    let mut out = BTreeMap::new();
    add(&mut out, "stack", &snapshot.stacks);
    add(&mut out, "profile", &snapshot.profiles);
    add(&mut out, "capability", &snapshot.capabilities);
    if let Some(config) = &snapshot.config {
        add(&mut out, "config", std::slice::from_ref(config));
    }
    out
}

/// Files larger than this are never read to compare revisions: the reload decides.
const MAX_COMPARE_BYTES: u64 = 16 * 1024 * 1024;

/// True when every path in `paths` is a `.json` file whose bytes hash to the revision `snapshot`
/// holds for it, or a file that neither exists nor is in `snapshot`.
fn snapshot_is_current(snapshot: &WorkspaceSnapshot, paths: &[PathBuf]) -> bool {
    let states = file_states(snapshot);
    let known: HashMap<&str, &str> = states
        .values()
        .map(|s| (s.path.as_str(), s.revision.as_str()))
        .collect();
    paths.iter().all(|path| file_is_current(&known, path))
}

fn file_is_current(known: &HashMap<&str, &str>, path: &Path) -> bool {
    if path.extension().and_then(|e| e.to_str()) != Some("json") {
        return false; // a directory appeared or went away
    }
    let Some(text) = path.to_str() else {
        return false;
    };
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return !known.contains_key(text),
        Err(_) => return false,
    };
    if !metadata.is_file() || metadata.len() > MAX_COMPARE_BYTES {
        return false;
    }
    match (known.get(text), std::fs::read(path)) {
        (Some(revision), Ok(bytes)) => {
            !revision.is_empty() && *revision == forge_core::canonical::revision(&bytes)
        }
        _ => false,
    }
}

/// The files that differ between two snapshots (by file address, then revision or id), in file
/// order. `own` names the files this server just wrote.
pub fn diff(
    old: &WorkspaceSnapshot,
    new: &WorkspaceSnapshot,
    own: &HashSet<FileRef>,
) -> Vec<Change> {
    let before = file_states(old);
    let after = file_states(new);
    let origin = |file: &FileRef| {
        if own.contains(file) {
            Origin::Own
        } else {
            Origin::External
        }
    };
    let mut changes = Vec::new();
    let mut files: Vec<&FileRef> = before.keys().chain(after.keys()).collect();
    files.sort();
    files.dedup();
    for file in files {
        let (state, change) = match (before.get(file), after.get(file)) {
            (None, Some(now)) => (now, ChangeKind::Created),
            (Some(was), None) => (was, ChangeKind::Deleted),
            (Some(was), Some(now)) if was != now => (now, ChangeKind::Updated),
            _ => continue,
        };
        changes.push(Change {
            kind: state.kind.to_string(),
            key: state.key.clone(),
            path: state.path.clone(),
            revision: (change != ChangeKind::Deleted).then(|| state.revision.clone()),
            change,
            origin: origin(file),
        });
    }
    changes
}

/// The workspace of one running editor.
pub struct WorkspaceHandle {
    pub store: Arc<FsStore>,
    options: LoadOptions,
    snapshot: ArcSwap<WorkspaceSnapshot>,
    events: broadcast::Sender<Event>,
    write_lock: Mutex<()>,
    generation: AtomicU64,
    /// Workspace problems that do not come from loading (the file watcher stopped watching a
    /// folder); they stay until the server restarts.
    added_problems: std::sync::Mutex<Vec<Diagnostic>>,
}

impl WorkspaceHandle {
    /// Loads the workspace once (blocking: call it before serving, or on the blocking pool).
    pub fn open(store: FsStore, options: LoadOptions) -> WorkspaceHandle {
        let snapshot = workspace::load(&store, &options);
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        WorkspaceHandle {
            store: Arc::new(store),
            options,
            snapshot: ArcSwap::from_pointee(snapshot),
            events,
            write_lock: Mutex::new(()),
            generation: AtomicU64::new(0),
            added_problems: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The workspace-level problems: the snapshot's (folders that cannot be listed), then the
    /// added ones ([`Self::add_problem`]).
    pub fn problems(&self) -> Vec<Diagnostic> {
        let mut problems = self.snapshot().problems.clone();
        if let Ok(added) = self.added_problems.lock() {
            problems.extend(added.iter().cloned());
        }
        problems
    }

    /// Adds a workspace problem (an error, once) and publishes the new list in a `changed` event.
    pub async fn add_problem(&self, message: String) {
        let _guard = self.write_lock.lock().await;
        let problem = Diagnostic::error(message);
        {
            let Ok(mut added) = self.added_problems.lock() else {
                return;
            };
            if added.contains(&problem) {
                return;
            }
            added.push(problem);
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.events.send(Event {
            kind: "changed".to_string(),
            generation,
            changes: Vec::new(),
            problems: Some(self.problems()),
        });
    }

    /// The current snapshot: complete and immutable.
    pub fn snapshot(&self) -> Arc<WorkspaceSnapshot> {
        self.snapshot.load_full()
    }

    pub fn trusted(&self) -> bool {
        self.options.trusted
    }

    /// The number of change sets published so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Serializes writes and reloads. Hold the guard across "write, then [`Self::reload_locked`]".
    pub async fn lock(&self) -> MutexGuard<'_, ()> {
        self.write_lock.lock().await
    }

    /// Reloads after changes made by someone else (the watcher's path).
    pub async fn reload(&self) -> Option<Event> {
        let guard = self.lock().await;
        self.reload_locked(&guard, &HashSet::new()).await
    }

    /// The watcher's path: reloads unless every reported path is a resource file whose bytes on
    /// disk are exactly those the current snapshot was built from (or a file that neither exists
    /// nor is in the snapshot). That is the case for this server's own writes, which were
    /// reloaded and published before their watcher batch arrives, and for tools that touch a
    /// file without changing it. A directory path, an unknown file or any doubt reloads.
    pub async fn reload_paths(&self, paths: &[PathBuf]) -> Option<Event> {
        let guard = self.lock().await;
        let snapshot = self.snapshot.load_full();
        let paths = paths.to_vec();
        let current = tokio::task::spawn_blocking(move || snapshot_is_current(&snapshot, &paths))
            .await
            .unwrap_or(false);
        if current {
            return None;
        }
        self.reload_locked(&guard, &HashSet::new()).await
    }

    /// Builds a new snapshot, swaps it in and publishes what changed (nothing when nothing did).
    /// `own` names the files the caller just wrote; their changes carry origin `self`.
    pub async fn reload_locked(
        &self,
        _guard: &MutexGuard<'_, ()>,
        own: &HashSet<FileRef>,
    ) -> Option<Event> {
        let store = Arc::clone(&self.store);
        let options = self.options.clone();
        let fresh =
            match tokio::task::spawn_blocking(move || workspace::load(&*store, &options)).await {
                Ok(snapshot) => snapshot,
                Err(error) => {
                    eprintln!("pi-forge: reloading the workspace failed: {error}");
                    return None;
                }
            };
        let old = self.snapshot.swap(Arc::new(fresh));
        let new = self.snapshot.load();
        let changes = diff(&old, &new, own);
        let problems = (old.problems != new.problems).then(|| self.problems());
        if changes.is_empty() && problems.is_none() {
            return None;
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let event = Event {
            kind: "changed".to_string(),
            generation,
            changes,
            problems,
        };
        // No subscriber is fine: nobody is listening.
        let _ = self.events.send(event.clone());
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_core::id::Scope;
    use forge_core::workspace::{Dir, MemStore, Store};

    const STACK: &str = r#"{"id":"a","items":[]}"#;

    fn load(store: &MemStore) -> WorkspaceSnapshot {
        workspace::load(
            store,
            &LoadOptions {
                trusted: true,
                extra_slots: Vec::new(),
            },
        )
    }

    #[test]
    fn diff_reports_created_updated_and_deleted_files_with_their_origin() {
        let store = MemStore::new();
        store.insert(Scope::Project, ".pi/forge/prompt-stacks/a.json", STACK);
        store.insert(Scope::Global, "agent-profiles/p.json", "{}");
        let before = load(&store);
        assert!(diff(&before, &before, &HashSet::new()).is_empty());

        let a = FileRef::new(Scope::Project, Dir::Stacks, "a.json").unwrap();
        let old_revision = before.revision_of(&a).unwrap().to_string();
        store
            .update(&a, &old_revision, br#"{"id":"a","name":"A","items":[]}"#)
            .unwrap();
        store.insert(Scope::Global, "capabilities/c.json", "{}");
        let p = FileRef::new(Scope::Global, Dir::Profiles, "p.json").unwrap();
        let p_revision = before.revision_of(&p).unwrap().to_string();
        store.delete(&p, &p_revision).unwrap();
        let after = load(&store);

        let own: HashSet<FileRef> = [a.clone()].into_iter().collect();
        let changes = diff(&before, &after, &own);
        let summary: Vec<(&str, &str, ChangeKind, Origin, bool)> = changes
            .iter()
            .map(|c| {
                (
                    c.kind.as_str(),
                    c.key.as_str(),
                    c.change,
                    c.origin,
                    c.revision.is_some(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("stack", "project:a", ChangeKind::Updated, Origin::Own, true),
                (
                    "profile",
                    "global:p",
                    ChangeKind::Deleted,
                    Origin::External,
                    false
                ),
                (
                    "capability",
                    "global:c",
                    ChangeKind::Created,
                    Origin::External,
                    true
                ),
            ]
        );
        assert_eq!(
            changes[0].revision.as_deref(),
            after.revision_of(&a),
            "an update names the new revision"
        );
    }

    /// Issue 16, point 7: a watcher failure becomes a workspace problem, published once.
    #[tokio::test]
    async fn an_added_problem_is_listed_and_published_once() {
        let home = tempfile::tempdir().unwrap();
        let store = FsStore::new(Some(home.path().join("p")), home.path().join("g"));
        let ws = WorkspaceHandle::open(
            store,
            LoadOptions {
                trusted: true,
                extra_slots: Vec::new(),
            },
        );
        let mut events = ws.subscribe();
        assert_eq!(ws.problems(), vec![]);
        ws.add_problem("Cannot watch /g for changes.".to_string())
            .await;
        ws.add_problem("Cannot watch /g for changes.".to_string())
            .await;
        let expected = vec![Diagnostic::error("Cannot watch /g for changes.")];
        assert_eq!(ws.problems(), expected);
        let event = events.try_recv().unwrap();
        assert_eq!((event.generation, event.changes.len()), (1, 0));
        assert_eq!(event.problems, Some(expected));
        assert!(events.try_recv().is_err(), "published once");
    }

    #[test]
    fn events_serialize_with_the_wire_names() {
        let event = Event {
            kind: "changed".to_string(),
            generation: 3,
            changes: vec![Change {
                kind: "stack".to_string(),
                key: "project:a".into(),
                path: "/p/.pi/forge/prompt-stacks/a.json".into(),
                revision: None,
                change: ChangeKind::Deleted,
                origin: Origin::Own,
            }],
            problems: None,
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({
                "type": "changed",
                "generation": 3,
                "changes": [{
                    "kind": "stack",
                    "key": "project:a",
                    "path": "/p/.pi/forge/prompt-stacks/a.json",
                    "revision": null,
                    "change": "deleted",
                    "origin": "self"
                }]
            })
        );
    }

    /// The watcher's skip rule: a reported file whose bytes are the snapshot's is current; any
    /// change, an unknown file or a directory is not.
    #[test]
    fn a_batch_of_files_already_at_their_snapshot_revision_needs_no_reload() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        let stacks = project.join(".pi/forge/prompt-stacks");
        std::fs::create_dir_all(&stacks).unwrap();
        let file = stacks.join("a.json");
        std::fs::write(&file, STACK).unwrap();
        let store = FsStore::new(Some(project.clone()), home.path().join("global"));
        let snapshot = workspace::load(
            &store,
            &LoadOptions {
                trusted: true,
                extra_slots: Vec::new(),
            },
        );
        assert_eq!(snapshot.stacks.len(), 1);
        let path = PathBuf::from(&snapshot.stacks[0].path);
        assert_eq!(
            path, file,
            "the snapshot names files by the watcher's absolute path"
        );

        assert!(snapshot_is_current(&snapshot, std::slice::from_ref(&path)));
        // A file that is neither on disk nor in the snapshot (a deleted temp file, say).
        assert!(snapshot_is_current(&snapshot, &[stacks.join("gone.json")]));
        // A directory that appeared: anything below it may have changed.
        assert!(!snapshot_is_current(
            &snapshot,
            std::slice::from_ref(&stacks)
        ));
        // A new file the snapshot does not know.
        std::fs::write(stacks.join("b.json"), STACK).unwrap();
        assert!(!snapshot_is_current(&snapshot, &[stacks.join("b.json")]));
        // Same path, other bytes.
        std::fs::write(&file, r#"{"id":"a","items":[],"name":"x"}"#).unwrap();
        assert!(!snapshot_is_current(&snapshot, std::slice::from_ref(&path)));
        // Deleted although the snapshot has it.
        std::fs::remove_file(&file).unwrap();
        assert!(!snapshot_is_current(&snapshot, &[path]));
    }
}
