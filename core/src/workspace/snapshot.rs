//! The loaded workspace as callers see it: one entry per resource file and the snapshot that
//! holds them all.

use super::store::{Dir, FileRef};
use crate::capability::ParsedCapability;
use crate::config::ParsedConfig;
use crate::diag::{self, Diagnostic};
use crate::id::{ResourceKey, Scope};
use crate::profile::ParsedProfile;
use crate::stack::ParsedStack;

/// What kind of resource a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Stack,
    Profile,
    Capability,
}

impl Kind {
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Stack => "stack",
            Kind::Profile => "profile",
            Kind::Capability => "capability",
        }
    }
}

/// One loaded resource file.
#[derive(Clone, Debug)]
pub struct Loaded<T> {
    pub key: ResourceKey,
    pub file: FileRef,
    /// Path for people (absolute on disk).
    pub path: String,
    /// `sha256:<hex>` of the raw bytes; empty when the file could not be read.
    pub revision: String,
    pub parsed: T,
    /// The codec's diagnostics plus workspace-level ones (duplicates, autoActivate conflicts).
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> Loaded<T> {
    pub fn usable(&self) -> bool {
        diag::is_usable(&self.diagnostics)
    }
    /// Why the file could not be read (too large, not a regular file, a refused link, an I/O
    /// error): such an entry has no revision and cannot be saved or deleted from pi-forge.
    pub fn unreadable(&self) -> Option<&str> {
        unreadable_reason(&self.revision, &self.diagnostics)
    }
    /// True for a file in the legacy `.pi/prompt-stacks/` directory.
    pub fn is_legacy(&self) -> bool {
        self.file.dir == Dir::LegacyStacks && self.key.scope == Scope::Project
    }
}

pub type StackEntry = Loaded<ParsedStack>;
pub type ProfileEntry = Loaded<ParsedProfile>;
pub type CapabilityEntry = Loaded<ParsedCapability>;

/// Everything pi-forge knows about the files of one workspace, at one moment.
#[derive(Clone, Debug, Default)]
pub struct WorkspaceSnapshot {
    pub trusted: bool,
    /// Global entries first, then project (primary, then legacy), each in file-name order.
    pub stacks: Vec<StackEntry>,
    pub profiles: Vec<ProfileEntry>,
    pub capabilities: Vec<CapabilityEntry>,
    /// The project's `config.json`, when trusted and present.
    pub config: Option<Loaded<ParsedConfig>>,
    /// Problems that belong to no single file (an unreadable directory).
    pub problems: Vec<Diagnostic>,
}

/// The reason behind an empty revision: the fault's error diagnostic.
pub(crate) fn unreadable_reason<'a>(
    revision: &str,
    diagnostics: &'a [Diagnostic],
) -> Option<&'a str> {
    if !revision.is_empty() {
        return None;
    }
    Some(
        diagnostics
            .iter()
            .find(|d| d.is_error())
            .map_or("the file could not be read", |d| d.message.as_str()),
    )
}

impl WorkspaceSnapshot {
    /// Every diagnostic with the file it belongs to, in load order (for `pi-forge check`).
    pub fn all_diagnostics(&self) -> Vec<(String, &[Diagnostic])> {
        let mut out: Vec<(String, &[Diagnostic])> = Vec::new();
        if !self.problems.is_empty() {
            out.push(("(workspace)".to_string(), &self.problems));
        }
        if let Some(config) = &self.config {
            out.push((config.path.clone(), &config.diagnostics));
        }
        for e in &self.stacks {
            out.push((e.path.clone(), &e.diagnostics));
        }
        for e in &self.profiles {
            out.push((e.path.clone(), &e.diagnostics));
        }
        for e in &self.capabilities {
            out.push((e.path.clone(), &e.diagnostics));
        }
        out
    }

    /// The current revision of a file, if the snapshot has it.
    pub fn revision_of(&self, file: &FileRef) -> Option<&str> {
        let revision = self
            .stacks
            .iter()
            .find(|e| &e.file == file)
            .map(|e| e.revision.as_str())
            .or_else(|| {
                self.profiles
                    .iter()
                    .find(|e| &e.file == file)
                    .map(|e| e.revision.as_str())
            })
            .or_else(|| {
                self.capabilities
                    .iter()
                    .find(|e| &e.file == file)
                    .map(|e| e.revision.as_str())
            })?;
        Some(revision)
    }
}
