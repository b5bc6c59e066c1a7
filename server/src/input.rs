//! What the subcommands share: an input file's bytes and display name, the exit status for
//! errors, the workspace the flags point at.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use forge_core::workspace::{self, LoadOptions, WorkspaceSnapshot};

use crate::cli::WorkspaceArgs;
use crate::paths::WorkspacePaths;

/// The bytes of an input file; `-` reads standard input.
pub fn read_input(path: &Path, what: &str) -> Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .with_context(|| format!("cannot read {what} from standard input"))?;
        return Ok(bytes);
    }
    std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))
}

/// A display name for an input path (`<stdin>` for `-`).
pub fn input_name(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// Exit status 1 when `errors` is non-zero, else 0.
pub fn exit_for_errors(errors: usize) -> ExitCode {
    if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Loads the workspace the arguments point at.
pub fn load_workspace(args: &WorkspaceArgs) -> Result<(WorkspacePaths, WorkspaceSnapshot)> {
    let paths = WorkspacePaths::from_args(args)?;
    let store = paths.store();
    let snapshot = workspace::load(
        &store,
        &LoadOptions {
            trusted: paths.trusted,
            extra_slots: Vec::new(),
        },
    );
    Ok((paths, snapshot))
}
