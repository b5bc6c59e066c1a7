//! Where resource files live and how they change: the [`Store`] trait, the filesystem
//! implementation [`FsStore`] and the in-memory [`MemStore`] used by service tests.
//!
//! Invariants every implementation keeps:
//! - a file is addressed by a [`FileRef`]: an anchor (project or global root), one of the known
//!   resource directories and a plain file name `*.json`; nothing else is addressable, so path
//!   tricks (`..`, `/`, absolute paths) are unrepresentable past [`FileRef::new`];
//! - every update and delete names the revision (`sha256:` of the raw bytes) it is based on, and a
//!   mismatch is a [`StoreError::Conflict`] carrying the current revision — never an overwrite;
//! - creates are exclusive;
//! - a failed write leaves the previous bytes in place (temp file + fsync + rename).
//!
//! Symbolic links ([`FsStore`]) are followed for reading, and for saving in place: the link's
//! target is replaced through a temp file beside it, the link stays. New files are created in
//! the resource folder (through a linked folder, in its target); a delete removes the folder's
//! entry, never a link's target. A write whose real location lies outside the project, the
//! global directory and the folders of [`FsStore::allow_writes_under`] is refused.

use crate::canonical::revision;
use crate::id::Scope;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A resource directory, relative to its scope's anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// `prompt-stacks/` under the forge root.
    Stacks,
    /// `<cwd>/.pi/prompt-stacks/`: read and edited in place, project scope only.
    LegacyStacks,
    /// `agent-profiles/` under the forge root.
    Profiles,
    /// `capabilities/` under the forge root.
    Capabilities,
    /// The forge root itself (`config.json`).
    Root,
    /// `payloads/` under the forge root: captured provider requests the user saved. Written
    /// only, never discovered as resources.
    Payloads,
}

impl Dir {
    /// Every resource directory.
    pub const ALL: [Dir; 6] = [
        Dir::Stacks,
        Dir::LegacyStacks,
        Dir::Profiles,
        Dir::Capabilities,
        Dir::Root,
        Dir::Payloads,
    ];

    /// Path of this directory relative to the scope anchor (the project's cwd or the global root).
    pub fn relative(self, scope: Scope) -> &'static str {
        match (scope, self) {
            (Scope::Project, Dir::Stacks) => ".pi/forge/prompt-stacks",
            (Scope::Project, Dir::LegacyStacks) => ".pi/prompt-stacks",
            (Scope::Project, Dir::Profiles) => ".pi/forge/agent-profiles",
            (Scope::Project, Dir::Capabilities) => ".pi/forge/capabilities",
            (Scope::Project, Dir::Root) => ".pi/forge",
            (Scope::Project, Dir::Payloads) => ".pi/forge/payloads",
            (Scope::Global, Dir::Stacks) => "prompt-stacks",
            // The global scope has no legacy directory; it maps to the primary one.
            (Scope::Global, Dir::LegacyStacks) => "prompt-stacks",
            (Scope::Global, Dir::Profiles) => "agent-profiles",
            (Scope::Global, Dir::Capabilities) => "capabilities",
            (Scope::Global, Dir::Root) => "",
            (Scope::Global, Dir::Payloads) => "payloads",
        }
    }
}

/// The address of one resource file.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileRef {
    pub scope: Scope,
    pub dir: Dir,
    name: String,
}

impl FileRef {
    /// Validates `name` as a plain, non-hidden `*.json` file name.
    pub fn new(scope: Scope, dir: Dir, name: impl Into<String>) -> Result<FileRef, StoreError> {
        let name = name.into();
        if !is_plain_json_name(&name) || name.starts_with('.') {
            return Err(StoreError::InvalidPath(format!(
                "{name:?} is not a plain .json file name"
            )));
        }
        Ok(FileRef { scope, dir, name })
    }

    /// For files found by listing: dotfiles are allowed (they were already on disk).
    fn listed(scope: Scope, dir: Dir, name: String) -> FileRef {
        FileRef { scope, dir, name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Path relative to the scope anchor, `/`-separated.
    pub fn relative_path(&self) -> String {
        let dir = self.dir.relative(self.scope);
        if dir.is_empty() {
            self.name.clone()
        } else {
            format!("{dir}/{}", self.name)
        }
    }
}

impl fmt::Display for FileRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scope, self.relative_path())
    }
}

fn is_plain_json_name(name: &str) -> bool {
    name.ends_with(".json")
        && name.len() > ".json".len()
        && !name.contains(['/', '\\', '\0'])
        && name != "."
        && name != ".."
}

/// What went wrong with a store operation. `code()` gives the stable machine code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("Refusing unsafe path: {0}")]
    InvalidPath(String),
    #[error("File already exists: {0}")]
    Exists(String),
    #[error("File does not exist: {0}")]
    Missing(String),
    #[error("{path} changed on disk: it is now at revision {current}, not {expected}")]
    Conflict {
        path: String,
        expected: String,
        current: String,
    },
    #[error("{path} is larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("{0} is read-only; pi-forge does not replace a file you made read-only (make it writable, then save again)")]
    ReadOnly(String),
    #[error("Cannot access {path}: {message}")]
    Io { path: String, message: String },
    #[error("No {0} directory is configured")]
    NoAnchor(Scope),
}

impl StoreError {
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::InvalidPath(_) => "invalid_path",
            StoreError::Exists(_) => "exists",
            StoreError::Missing(_) => "not_found",
            StoreError::Conflict { .. } => "stale_revision",
            StoreError::TooLarge { .. } => "too_large",
            StoreError::ReadOnly(_) => "read_only",
            StoreError::Io { .. } => "io",
            StoreError::NoAnchor(_) => "no_anchor",
        }
    }
}

/// An entry found by [`Store::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub file: FileRef,
    /// Set when the entry cannot be read (a directory, a dangling link, a link loop, …).
    pub refused: Option<String>,
}

/// Storage of resource files. Paths are always [`FileRef`]s; revisions are `sha256:<hex>`.
pub trait Store: Send + Sync {
    /// `*.json` entries of a directory (dotfiles included), sorted by UTF-16 code units.
    /// A missing directory lists as empty.
    fn list(&self, scope: Scope, dir: Dir) -> Result<Vec<Listed>, StoreError>;
    /// Raw bytes, refusing files over `limit` bytes.
    fn read(&self, file: &FileRef, limit: u64) -> Result<Vec<u8>, StoreError>;
    /// Exclusive create; returns the new revision.
    fn create(&self, file: &FileRef, bytes: &[u8]) -> Result<String, StoreError>;
    /// Replace the file if its current revision is `expected`; returns the new revision.
    fn update(&self, file: &FileRef, expected: &str, bytes: &[u8]) -> Result<String, StoreError>;
    /// Delete the file if its current revision is `expected`.
    fn delete(&self, file: &FileRef, expected: &str) -> Result<(), StoreError>;
    /// A human-readable path for messages and API responses.
    fn display_path(&self, file: &FileRef) -> String;
}

fn sort_utf16(names: &mut [String]) {
    names.sort_by(|a, b| crate::json::cmp_utf16(a, b));
}

// ---------------------------------------------------------------------------------------------
// Filesystem

/// Test-only fault injection for [`FsStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Write and fsync the temp file, then stop as if the process died before the rename.
    CrashBeforeRename,
    /// Behave as on a filesystem without hard links (FAT, some network mounts) for one create.
    NoHardLinks,
}

/// The real store: files under the project's cwd and the global forge root.
#[derive(Debug)]
pub struct FsStore {
    project: Option<PathBuf>,
    global: PathBuf,
    /// Folders writes may land in, links followed, besides the two anchors (the user's home).
    write_roots: Vec<PathBuf>,
    /// Serializes check-then-write sequences within this process, so concurrent saves from one
    /// base revision yield exactly one winner.
    write_lock: Mutex<()>,
    fault: Mutex<Option<Fault>>,
}

impl FsStore {
    /// `project` is the project's working directory (the parent of `.pi/`), `global` the global
    /// forge root (`$PI_FORGE_GLOBAL_DIR` or `~/.pi/forge`).
    pub fn new(project: Option<PathBuf>, global: PathBuf) -> FsStore {
        FsStore {
            project,
            global,
            write_roots: Vec::new(),
            write_lock: Mutex::new(()),
            fault: Mutex::new(None),
        }
    }

    /// Also lets writes land under `dir` (the user's home, where stow or chezmoi keep the
    /// targets of linked dotfiles). The project and the global directory are always allowed.
    pub fn allow_writes_under(mut self, dir: PathBuf) -> FsStore {
        self.write_roots.push(dir);
        self
    }

    /// Arms a fault for the next write (tests only).
    pub fn inject_fault(&self, fault: Option<Fault>) {
        if let Ok(mut slot) = self.fault.lock() {
            *slot = fault;
        }
    }

    fn anchor(&self, scope: Scope) -> Result<&Path, StoreError> {
        match scope {
            Scope::Project => self.project.as_deref().ok_or(StoreError::NoAnchor(scope)),
            Scope::Global => Ok(&self.global),
        }
    }

    pub fn dir_path(&self, scope: Scope, dir: Dir) -> Result<PathBuf, StoreError> {
        let rel = dir.relative(scope);
        let anchor = self.anchor(scope)?;
        Ok(if rel.is_empty() {
            anchor.to_path_buf()
        } else {
            anchor.join(rel)
        })
    }

    pub fn path(&self, file: &FileRef) -> Result<PathBuf, StoreError> {
        Ok(self.dir_path(file.scope, file.dir)?.join(&file.name))
    }

    /// The real directory `file` lives in (links followed), created when `create` is set, and
    /// refused when it lies outside the folders pi-forge may write to ([`Self::check_writable`]).
    fn real_dir(&self, file: &FileRef, create: bool) -> Result<PathBuf, StoreError> {
        let dir = self.dir_path(file.scope, file.dir)?;
        let display = dir.display().to_string();
        if create {
            // Folders are only ever created below a place pi-forge may write to.
            if let Some(existing) = dir.ancestors().find(|a| a.exists()) {
                let real = fs::canonicalize(existing)
                    .map_err(|e| io_err(&existing.display().to_string(), e))?;
                self.check_writable(&real)?;
            }
            fs::create_dir_all(&dir).map_err(|e| io_err(&display, e))?;
        }
        let real = fs::canonicalize(&dir).map_err(|e| io_or_missing(&display, e))?;
        self.check_writable(&real)?;
        Ok(real)
    }

    /// The real file behind `file` (links followed): it must exist, be a regular file and lie
    /// inside the folders pi-forge may write to.
    fn real_file(&self, file: &FileRef) -> Result<PathBuf, StoreError> {
        let path = self.path(file)?;
        let display = path.display().to_string();
        let real = fs::canonicalize(&path).map_err(|e| io_or_missing(&display, e))?;
        let meta = fs::metadata(&real).map_err(|e| io_or_missing(&display, e))?;
        if !meta.is_file() {
            return Err(not_regular(&display, &meta));
        }
        self.check_writable(&real)?;
        Ok(real)
    }

    /// Refuses a real (canonical) path outside the project, the global forge directory and the
    /// folders of [`Self::allow_writes_under`].
    fn check_writable(&self, real: &Path) -> Result<(), StoreError> {
        let roots = self
            .project
            .iter()
            .chain(std::iter::once(&self.global))
            .chain(self.write_roots.iter());
        for root in roots {
            let root = fs::canonicalize(root).unwrap_or_else(|_| root.clone());
            if real.starts_with(&root) {
                return Ok(());
            }
        }
        Err(StoreError::InvalidPath(format!(
            "{} is outside your folders (the project, the global forge directory and your home); pi-forge does not write there",
            real.display()
        )))
    }

    fn take_fault(&self) -> Option<Fault> {
        self.fault.lock().ok().and_then(|mut f| f.take())
    }

    /// Reads at most `limit` bytes of a regular file. The type is checked before opening, so a
    /// FIFO or a device at a resource path is refused instead of blocking the thread.
    fn read_path(path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
        let display = path.display().to_string();
        let before = fs::metadata(path).map_err(|e| io_or_missing(&display, e))?;
        if !before.is_file() {
            return Err(not_regular(&display, &before));
        }
        if before.len() > limit {
            return Err(StoreError::TooLarge {
                path: display,
                limit,
            });
        }
        let file = fs::File::open(path).map_err(|e| io_or_missing(&display, e))?;
        let meta = file.metadata().map_err(|e| io_err(&display, e))?;
        if !meta.is_file() {
            return Err(not_regular(&display, &meta));
        }
        if meta.len() > limit {
            return Err(StoreError::TooLarge {
                path: display,
                limit,
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| io_err(&display, e))?;
        if bytes.len() as u64 > limit {
            return Err(StoreError::TooLarge {
                path: display,
                limit,
            });
        }
        Ok(bytes)
    }

    /// Writes `bytes` to a temp file in `dir` (with `permissions`, when given), fsyncs it and
    /// returns its path. The name is `.<name>.<pid>-<n>.tmp` ([`is_temp_name`]).
    fn write_temp(
        dir: &Path,
        name: &str,
        bytes: &[u8],
        permissions: Option<fs::Permissions>,
    ) -> Result<PathBuf, StoreError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        // Never ends in `.json`, so discovery never mistakes a leftover for a resource.
        let temp = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
        let display = temp.display().to_string();
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| io_err(&display, e))?;
        let result = out
            .write_all(bytes)
            .and_then(|_| match permissions {
                Some(permissions) => out.set_permissions(permissions),
                None => Ok(()),
            })
            .and_then(|_| out.sync_all());
        if let Err(e) = result {
            let _ = fs::remove_file(&temp);
            return Err(io_err(&display, e));
        }
        Ok(temp)
    }

    fn sync_dir(dir: &Path) {
        // Best effort: not every platform can open a directory for fsync.
        if let Ok(handle) = fs::File::open(dir) {
            let _ = handle.sync_all();
        }
    }

    /// The revision of the file as it is now; files over [`MAX_FILE_BYTES`] are refused, not read.
    fn current_revision(path: &Path) -> Result<String, StoreError> {
        Ok(revision(&Self::read_path(path, MAX_FILE_BYTES)?))
    }

    /// Removes temp files of pi-forge's own naming ([`is_temp_name`]) that a crashed write left
    /// in the resource directories: those of other processes, older than [`STALE_TEMP_AGE`].
    /// Returns the paths removed. Best effort: an unreadable directory is skipped.
    pub fn clean_stale_temps(&self) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        let own = format!(".{}-", std::process::id());
        let now = std::time::SystemTime::now();
        for scope in [Scope::Project, Scope::Global] {
            for dir in Dir::ALL {
                let Ok(path) = self.dir_path(scope, dir) else {
                    continue;
                };
                let Ok(entries) = fs::read_dir(&path) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let Ok(name) = entry.file_name().into_string() else {
                        continue;
                    };
                    if !is_temp_name(&name) || name.contains(&own) {
                        continue;
                    }
                    let Ok(meta) = entry.metadata() else {
                        continue;
                    };
                    let old = meta
                        .modified()
                        .ok()
                        .and_then(|m| now.duration_since(m).ok())
                        .is_some_and(|age| age >= STALE_TEMP_AGE);
                    if meta.is_file() && old && fs::remove_file(entry.path()).is_ok() {
                        removed.push(entry.path());
                    }
                }
            }
        }
        removed
    }
}

/// Largest prompt stack file pi-forge reads (stacks carry prose; the editor's request limit is
/// 2,000,000 bytes, so anything larger was not written by pi-forge).
pub const MAX_STACK_BYTES: u64 = 8 * 1024 * 1024;

/// The largest file any store operation reads: the largest resource pi-forge loads
/// ([`MAX_STACK_BYTES`]). The pre-save revision check refuses larger files unread.
pub const MAX_FILE_BYTES: u64 = MAX_STACK_BYTES;

/// How old a temp file of another process must be before [`FsStore::clean_stale_temps`] takes it
/// for a crash's leftover (a write takes milliseconds).
pub const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// `.<name>.json.<pid>-<n>.tmp`: the temp files [`FsStore`] writes.
pub fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let Some((stem, counters)) = rest.rsplit_once('.') else {
        return false;
    };
    let Some((pid, n)) = counters.split_once('-') else {
        return false;
    };
    stem.ends_with(".json")
        && !pid.is_empty()
        && !n.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && n.bytes().all(|b| b.is_ascii_digit())
}

/// Why a path that should be a regular file is not one, naming what it is.
fn not_regular(display: &str, meta: &fs::Metadata) -> StoreError {
    let what = if meta.is_dir() {
        "a directory"
    } else {
        special_kind(meta)
    };
    StoreError::InvalidPath(format!("{display} is not a regular file (it is {what})"))
}

#[cfg(unix)]
fn special_kind(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_fifo() {
        "a named pipe"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_meta: &fs::Metadata) -> &'static str {
    "a special file"
}

fn io_err(path: &str, e: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_string(),
        message: e.to_string(),
    }
}

fn io_or_missing(path: &str, e: std::io::Error) -> StoreError {
    if e.kind() == std::io::ErrorKind::NotFound {
        StoreError::Missing(path.to_string())
    } else {
        io_err(path, e)
    }
}

impl Store for FsStore {
    fn list(&self, scope: Scope, dir: Dir) -> Result<Vec<Listed>, StoreError> {
        let path = match self.dir_path(scope, dir) {
            Ok(p) => p,
            Err(StoreError::NoAnchor(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let display = path.display().to_string();
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&display, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&display, e))?;
            if let Ok(name) = entry.file_name().into_string() {
                if name.ends_with(".json") && name.len() > 5 {
                    names.push(name);
                }
            }
        }
        sort_utf16(&mut names);
        let out = names
            .into_iter()
            .map(|name| {
                let full = path.join(&name);
                let refused = refusal(&full);
                Listed {
                    file: FileRef::listed(scope, dir, name),
                    refused,
                }
            })
            .collect();
        Ok(out)
    }

    fn read(&self, file: &FileRef, limit: u64) -> Result<Vec<u8>, StoreError> {
        Self::read_path(&self.path(file)?, limit)
    }

    fn create(&self, file: &FileRef, bytes: &[u8]) -> Result<String, StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        // The new entry goes into the resource folder itself (through a linked folder, into
        // its target); an existing entry, a dangling link included, is never replaced.
        let dir = self.real_dir(file, true)?;
        let target = dir.join(&file.name);
        let display = target.display().to_string();
        if fs::symlink_metadata(&target).is_ok() {
            return Err(StoreError::Exists(display));
        }
        let temp = Self::write_temp(&dir, &file.name, bytes, None)?;
        let fault = self.take_fault();
        if fault == Some(Fault::CrashBeforeRename) {
            return Err(io_err(&display, std::io::Error::other("simulated crash")));
        }
        // hard_link fails when the target exists: an exclusive create of complete content.
        let linked = if fault == Some(Fault::NoHardLinks) {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        } else {
            fs::hard_link(&temp, &target)
        };
        let result = match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(StoreError::Exists(display.clone()))
            }
            // Filesystems without hard links: rename the complete temp file into place, unless
            // the name was taken meanwhile. Readers see no file or the whole file, never a part;
            // a crash leaves only the temp file, which the next start removes.
            Err(_) => match fs::symlink_metadata(&target) {
                Ok(_) => Err(StoreError::Exists(display.clone())),
                Err(_) => fs::rename(&temp, &target).map_err(|e| io_err(&display, e)),
            },
        };
        let _ = fs::remove_file(&temp);
        result?;
        Self::sync_dir(&dir);
        Ok(revision(bytes))
    }

    fn update(&self, file: &FileRef, expected: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        // Saved in place: through a link, the link's target is replaced (via a temp file beside
        // it) and the link stays.
        let target = self.real_file(file)?;
        let dir = target
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| StoreError::InvalidPath(target.display().to_string()))?;
        let display = target.display().to_string();
        let meta = fs::metadata(&target).map_err(|e| io_or_missing(&display, e))?;
        if meta.permissions().readonly() {
            return Err(StoreError::ReadOnly(display));
        }
        let current = Self::current_revision(&target)?;
        expect_revision(&display, expected, current)?;
        // The new file keeps the old one's permissions (mode bits on Unix).
        let temp = Self::write_temp(&dir, &file.name, bytes, Some(meta.permissions()))?;
        if self.take_fault() == Some(Fault::CrashBeforeRename) {
            return Err(io_err(&display, std::io::Error::other("simulated crash")));
        }
        // Re-check right before the rename to keep the window for external edits small.
        let latest =
            Self::current_revision(&target).and_then(|c| expect_revision(&display, expected, c));
        if let Err(e) = latest {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        if let Err(e) = fs::rename(&temp, &target) {
            let _ = fs::remove_file(&temp);
            return Err(io_err(&display, e));
        }
        Self::sync_dir(&dir);
        Ok(revision(bytes))
    }

    fn delete(&self, file: &FileRef, expected: &str) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        // The entry of the resource folder goes, never a link's target.
        self.real_file(file)?;
        let target = self.real_dir(file, false)?.join(&file.name);
        let display = target.display().to_string();
        let meta = fs::metadata(&target).map_err(|e| io_or_missing(&display, e))?;
        if meta.permissions().readonly() {
            return Err(StoreError::ReadOnly(display));
        }
        let current = Self::current_revision(&target)?;
        expect_revision(&display, expected, current)?;
        fs::remove_file(&target).map_err(|e| io_or_missing(&display, e))?;
        if let Some(dir) = target.parent() {
            Self::sync_dir(dir);
        }
        Ok(())
    }

    fn display_path(&self, file: &FileRef) -> String {
        self.path(file)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| file.to_string())
    }
}

/// The optimistic-concurrency check of `update` and `delete`: a [`StoreError::Conflict`] on `path`
/// unless the file's `current` revision is the `expected` one.
fn expect_revision(path: &str, expected: &str, current: String) -> Result<(), StoreError> {
    if current == expected {
        Ok(())
    } else {
        Err(StoreError::Conflict {
            path: path.to_string(),
            expected: expected.to_string(),
            current,
        })
    }
}

/// Why a listed entry cannot be read: links are followed, so only an entry that is not (or does
/// not lead to) a regular file is refused: a directory, a special file, a dangling link, a loop.
fn refusal(full: &Path) -> Option<String> {
    let meta = fs::symlink_metadata(full).ok()?;
    if meta.file_type().is_symlink() {
        return match fs::metadata(full) {
            Ok(target) if target.is_file() => None,
            Ok(_) => Some(format!(
                "it is a symbolic link to {}, which is not a regular file",
                fs::canonicalize(full).unwrap_or_default().display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!(
                "it is a broken symbolic link (to {}, which does not exist)",
                fs::read_link(full).unwrap_or_default().display()
            )),
            Err(e) => Some(format!(
                "it is a symbolic link that cannot be followed: {e}"
            )),
        };
    }
    if !meta.is_file() {
        return Some("it is not a regular file".to_string());
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Memory

/// An in-memory store with the same semantics as [`FsStore`], for service tests.
#[derive(Debug, Default)]
pub struct MemStore {
    files: Mutex<BTreeMap<(Scope, String), Vec<u8>>>,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// Puts a file in place without any check (test setup).
    pub fn insert(&self, scope: Scope, relative_path: &str, bytes: impl Into<Vec<u8>>) {
        if let Ok(mut files) = self.files.lock() {
            files.insert((scope, relative_path.to_string()), bytes.into());
        }
    }

    /// Raw bytes of a file, if present (test assertions).
    pub fn get(&self, scope: Scope, relative_path: &str) -> Option<Vec<u8>> {
        self.files
            .lock()
            .ok()?
            .get(&(scope, relative_path.to_string()))
            .cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Scope, String), Vec<u8>>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Missing` when `key` is absent, `Conflict` when its revision is not `expected`.
    fn expect_current(
        files: &BTreeMap<(Scope, String), Vec<u8>>,
        key: &(Scope, String),
        file: &FileRef,
        expected: &str,
    ) -> Result<(), StoreError> {
        let current = files
            .get(key)
            .map(|b| revision(b))
            .ok_or_else(|| StoreError::Missing(file.to_string()))?;
        expect_revision(&file.to_string(), expected, current)
    }
}

impl Store for MemStore {
    fn list(&self, scope: Scope, dir: Dir) -> Result<Vec<Listed>, StoreError> {
        let prefix = dir.relative(scope);
        let files = self.lock();
        let mut names: Vec<String> = files
            .keys()
            .filter(|(s, _)| *s == scope)
            .filter_map(|(_, path)| {
                let rest = if prefix.is_empty() {
                    path.as_str()
                } else {
                    path.strip_prefix(prefix)?.strip_prefix('/')?
                };
                (!rest.contains('/') && is_plain_json_name(rest)).then(|| rest.to_string())
            })
            .collect();
        sort_utf16(&mut names);
        Ok(names
            .into_iter()
            .map(|name| Listed {
                file: FileRef::listed(scope, dir, name),
                refused: None,
            })
            .collect())
    }

    fn read(&self, file: &FileRef, limit: u64) -> Result<Vec<u8>, StoreError> {
        let key = (file.scope, file.relative_path());
        let files = self.lock();
        let bytes = files
            .get(&key)
            .ok_or_else(|| StoreError::Missing(file.to_string()))?;
        if bytes.len() as u64 > limit {
            return Err(StoreError::TooLarge {
                path: file.to_string(),
                limit,
            });
        }
        Ok(bytes.clone())
    }

    fn create(&self, file: &FileRef, bytes: &[u8]) -> Result<String, StoreError> {
        let key = (file.scope, file.relative_path());
        let mut files = self.lock();
        if files.contains_key(&key) {
            return Err(StoreError::Exists(file.to_string()));
        }
        files.insert(key, bytes.to_vec());
        Ok(revision(bytes))
    }

    fn update(&self, file: &FileRef, expected: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let key = (file.scope, file.relative_path());
        let mut files = self.lock();
        Self::expect_current(&files, &key, file, expected)?;
        files.insert(key, bytes.to_vec());
        Ok(revision(bytes))
    }

    fn delete(&self, file: &FileRef, expected: &str) -> Result<(), StoreError> {
        let key = (file.scope, file.relative_path());
        let mut files = self.lock();
        Self::expect_current(&files, &key, file, expected)?;
        files.remove(&key);
        Ok(())
    }

    fn display_path(&self, file: &FileRef) -> String {
        file.to_string()
    }
}
