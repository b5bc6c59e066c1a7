//! The workspace: every pi-forge resource of one project (and the user's global directory),
//! loaded at once into an immutable [`WorkspaceSnapshot`].
//!
//! Loading never fails: an unreadable or malformed file becomes a *fault* entry with an error
//! diagnostic, so the user sees every problem at once. A reload builds a complete new snapshot;
//! callers swap it in atomically, so nobody ever observes a half-loaded workspace.
//!
//! Trust: an untrusted project contributes nothing; only global resources load, and writes to the
//! project are refused by the services above this module. Who decides trust is the caller's
//! business (see `docs/architecture.md`).

pub mod service;
pub mod store;

mod resolve;
mod snapshot;

pub use resolve::{
    AutoProfile, BindingProblem, CapabilityResolveError, ProfileStackError, Resolved, RestoredStack,
};
pub use snapshot::{CapabilityEntry, Kind, Loaded, ProfileEntry, StackEntry, WorkspaceSnapshot};
pub use store::{
    is_temp_name, Dir, Fault, FileRef, FsStore, Listed, MemStore, Store, StoreError,
    MAX_FILE_BYTES, MAX_STACK_BYTES, STALE_TEMP_AGE,
};

use crate::capability::{self, ParsedCapability};
use crate::config::{self, ParsedConfig};
use crate::diag::{self, Diagnostic};
use crate::id::{ResourceKey, Scope};
use crate::profile::{self, ParsedProfile};
use crate::stack::{self, ParsedStack};

/// How to load.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Whether project resources may be read (and later written).
    pub trusted: bool,
    /// Slot names registered by extensions, on top of the built-in slots.
    pub extra_slots: Vec<String>,
}

/// How each resource kind is read and named; lets one loader serve all of them.
trait Codec: Sized {
    const KIND: Kind;
    const LIMIT: u64;
    fn parse(bytes: &[u8], file_name: &str, scope: Scope, opts: &LoadOptions) -> Self;
    fn fault(file_name: &str, message: String) -> Self;
    fn id(&self) -> &str;
    fn diagnostics(&self) -> &[Diagnostic];
}

impl Codec for ParsedStack {
    const KIND: Kind = Kind::Stack;
    const LIMIT: u64 = MAX_STACK_BYTES;
    fn parse(bytes: &[u8], file_name: &str, _scope: Scope, opts: &LoadOptions) -> Self {
        stack::parse_stack_bytes(
            bytes,
            &stack::ParseOptions {
                file_name,
                extra_slots: &opts.extra_slots,
            },
        )
    }
    fn fault(file_name: &str, message: String) -> Self {
        stack::fault_stack(file_name, format!("Failed to read prompt stack: {message}"))
    }
    fn id(&self) -> &str {
        self.stack.id()
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

impl Codec for ParsedProfile {
    const KIND: Kind = Kind::Profile;
    const LIMIT: u64 = profile::MAX_PROFILE_BYTES as u64;
    fn parse(bytes: &[u8], file_name: &str, scope: Scope, _opts: &LoadOptions) -> Self {
        profile::parse_profile_bytes(bytes, file_name, scope)
    }
    fn fault(file_name: &str, message: String) -> Self {
        profile::fault_profile(
            file_name,
            format!("Failed to read agent profile: {message}"),
        )
    }
    fn id(&self) -> &str {
        &self.profile.id
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

impl Codec for ParsedCapability {
    const KIND: Kind = Kind::Capability;
    const LIMIT: u64 = capability::MAX_CAPABILITY_SOURCE_SIZE as u64;
    fn parse(bytes: &[u8], file_name: &str, _scope: Scope, _opts: &LoadOptions) -> Self {
        capability::parse_capability_bytes(bytes, file_name)
    }
    fn fault(file_name: &str, message: String) -> Self {
        capability::fault_capability(file_name, format!("Failed to read capability: {message}"))
    }
    fn id(&self) -> &str {
        &self.capability.id
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

fn load_file<T: Codec>(store: &dyn Store, listed: &Listed, opts: &LoadOptions) -> Loaded<T> {
    let file = listed.file.clone();
    let name = file.name().to_string();
    let path = store.display_path(&file);
    let (parsed, revision) = match &listed.refused {
        Some(reason) => (T::fault(&name, format!("{name}: {reason}")), String::new()),
        None => match store.read(&file, T::LIMIT) {
            Ok(bytes) => (
                T::parse(&bytes, &name, file.scope, opts),
                crate::canonical::revision(&bytes),
            ),
            Err(e) => (T::fault(&name, e.to_string()), String::new()),
        },
    };
    Loaded {
        key: ResourceKey::new(file.scope, parsed.id()),
        diagnostics: parsed.diagnostics().to_vec(),
        file,
        path,
        revision,
        parsed,
    }
}

fn load_dir<T: Codec>(
    store: &dyn Store,
    scope: Scope,
    dir: Dir,
    skip_names: &[String],
    opts: &LoadOptions,
    problems: &mut Vec<Diagnostic>,
) -> Vec<Loaded<T>> {
    match store.list(scope, dir) {
        Ok(listed) => listed
            .iter()
            .filter(|l| !skip_names.iter().any(|n| n == l.file.name()))
            .map(|l| load_file::<T>(store, l, opts))
            .collect(),
        Err(e) => {
            problems.push(Diagnostic::error(format!(
                "Cannot list {scope} {} directory: {e}",
                T::KIND.noun()
            )));
            Vec::new()
        }
    }
}

/// Adds `Duplicate <scope> <noun> id: <id> appears in multiple files (a.json, b.json).` to every
/// entry sharing an id with another entry of the same scope.
fn mark_duplicates<T>(entries: &mut [Loaded<T>], noun: &str, field: Option<&str>) {
    let mut by_key: std::collections::HashMap<ResourceKey, Vec<usize>> =
        std::collections::HashMap::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        by_key.entry(e.key.clone()).or_default().push(i);
    }
    for (key, indices) in by_key {
        if indices.len() < 2 {
            continue;
        }
        let names: Vec<&str> = indices.iter().map(|&i| entries[i].file.name()).collect();
        let mut d = Diagnostic::error(format!(
            "Duplicate {} {noun} id: {} appears in multiple files ({}).",
            key.scope,
            key.id,
            names.join(", ")
        ));
        if let Some(field) = field {
            d = d.with_field(field);
        }
        for i in indices {
            entries[i].diagnostics.push(d.clone());
        }
    }
}

/// A2: more than one profile of a scope with `autoActivate: true` → every one of them errs.
fn mark_profile_auto_conflicts(entries: &mut [ProfileEntry]) {
    for scope in [Scope::Global, Scope::Project] {
        let autos: Vec<usize> = (0..entries.len())
            .filter(|&i| {
                entries[i].key.scope == scope
                    && entries[i].parsed.profile.auto_activate == Some(true)
            })
            .collect();
        if autos.len() > 1 {
            let ids: Vec<String> = autos.iter().map(|&i| entries[i].key.id.clone()).collect();
            for &i in &autos {
                entries[i].diagnostics.push(
                    Diagnostic::error(format!(
                        "{} {scope} agent profiles set autoActivate: true ({}); exactly one is allowed.",
                        autos.len(),
                        ids.join(", ")
                    ))
                    .with_field("autoActivate"),
                );
            }
        }
    }
}

/// Loads every resource reachable through `store`.
pub fn load(store: &dyn Store, opts: &LoadOptions) -> WorkspaceSnapshot {
    let mut problems = Vec::new();
    let mut scopes = vec![Scope::Global];
    if opts.trusted {
        scopes.push(Scope::Project);
    }

    let mut stacks: Vec<StackEntry> = Vec::new();
    let mut profiles: Vec<ProfileEntry> = Vec::new();
    let mut capabilities: Vec<CapabilityEntry> = Vec::new();
    for &scope in &scopes {
        let primary: Vec<StackEntry> =
            load_dir(store, scope, Dir::Stacks, &[], opts, &mut problems);
        if scope == Scope::Project {
            // A legacy file is shadowed by a primary file with the same file name.
            let shadow: Vec<String> = primary.iter().map(|e| e.file.name().to_string()).collect();
            stacks.extend(primary);
            stacks.extend(load_dir::<ParsedStack>(
                store,
                scope,
                Dir::LegacyStacks,
                &shadow,
                opts,
                &mut problems,
            ));
        } else {
            stacks.extend(primary);
        }
        profiles.extend(load_dir::<ParsedProfile>(
            store,
            scope,
            Dir::Profiles,
            &[],
            opts,
            &mut problems,
        ));
        capabilities.extend(load_dir::<ParsedCapability>(
            store,
            scope,
            Dir::Capabilities,
            &[],
            opts,
            &mut problems,
        ));
    }
    mark_duplicates(&mut stacks, "stack", None);
    mark_duplicates(&mut profiles, "profile", Some("id"));
    mark_profile_auto_conflicts(&mut profiles);
    mark_duplicates(&mut capabilities, "capability", Some("id"));

    let config = if opts.trusted {
        load_config(store)
    } else {
        None
    };

    let mut snapshot = WorkspaceSnapshot {
        trusted: opts.trusted,
        stacks,
        profiles,
        capabilities,
        config,
        problems,
    };
    resolve::annotate_stack_bindings(&mut snapshot);
    for entry in &mut snapshot.stacks {
        let templates = crate::stack::template_check::template_diagnostics(&entry.parsed.stack);
        entry.diagnostics.extend(templates);
    }
    resolve::annotate_profile_stacks(&mut snapshot);
    for entry in &mut snapshot.stacks {
        entry.diagnostics = diag::dedupe(std::mem::take(&mut entry.diagnostics));
    }
    for entry in &mut snapshot.profiles {
        entry.diagnostics = diag::dedupe(std::mem::take(&mut entry.diagnostics));
    }
    for entry in &mut snapshot.capabilities {
        entry.diagnostics = diag::dedupe(std::mem::take(&mut entry.diagnostics));
    }
    snapshot
}

fn load_config(store: &dyn Store) -> Option<Loaded<ParsedConfig>> {
    let file = FileRef::new(Scope::Project, Dir::Root, "config.json").ok()?;
    let path = store.display_path(&file);
    let (parsed, revision) = match store.read(&file, config::MAX_CONFIG_BYTES) {
        Ok(bytes) => (
            config::parse_config_bytes(&bytes),
            crate::canonical::revision(&bytes),
        ),
        Err(StoreError::Missing(_)) => return None,
        Err(e) => (
            ParsedConfig {
                config: Default::default(),
                diagnostics: vec![Diagnostic::warning(format!(
                    "Cannot read config.json: {e}; using defaults."
                ))],
            },
            String::new(),
        ),
    };
    Some(Loaded {
        key: ResourceKey::new(Scope::Project, "config"),
        diagnostics: parsed.diagnostics.clone(),
        file,
        path,
        revision,
        parsed,
    })
}
