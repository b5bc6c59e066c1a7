//! Where the workspace is: project directory, global forge directory, trust.

use crate::cli::WorkspaceArgs;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// The resolved location of a workspace.
#[derive(Debug, Clone)]
pub struct WorkspacePaths {
    pub project: PathBuf,
    pub global: PathBuf,
    pub trusted: bool,
}

/// `$PI_FORGE_GLOBAL_DIR`, else `~/.pi/forge`.
pub fn default_global_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PI_FORGE_GLOBAL_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".pi").join("forge")),
        None => bail!(
            "cannot find the global forge directory: neither PI_FORGE_GLOBAL_DIR nor HOME is set \
             (set PI_FORGE_GLOBAL_DIR or pass --global-dir)"
        ),
    }
}

impl WorkspacePaths {
    /// The filesystem store of this workspace. Writes may also land under the user's home,
    /// where linked dotfiles (stow, chezmoi) keep their targets.
    pub fn store(&self) -> forge_core::workspace::FsStore {
        let store =
            forge_core::workspace::FsStore::new(Some(self.project.clone()), self.global.clone());
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(home) => store.allow_writes_under(PathBuf::from(home)),
            None => store,
        }
    }

    pub fn from_args(args: &WorkspaceArgs) -> Result<WorkspacePaths> {
        let project = match &args.project {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        if !project.is_dir() {
            bail!(
                "project directory {} does not exist or is not a directory",
                project.display()
            );
        }
        let global = match &args.global_dir {
            Some(dir) => dir.clone(),
            None => default_global_dir()?,
        };
        let env_untrusted = std::env::var("PI_FORGE_UNTRUSTED")
            .map(|v| v == "1" || v.eq_ignore_ascii_case("true"))
            .unwrap_or(false);
        Ok(WorkspacePaths {
            project,
            global,
            trusted: !(args.untrusted || env_untrusted),
        })
    }
}
