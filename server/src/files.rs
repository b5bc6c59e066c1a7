//! Writing a file so that a crash leaves the old content or the new, never half of either: a
//! temporary file beside it, fsync, rename over the target, fsync of the folder. The state file,
//! a delegation run's files and Pi's settings are written so; the workspace's resources go
//! through forge-core's store, which adds revision checks to the same steps.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};

/// Who may read the file written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The user only (0600 on Unix): tokens, run records, prompts.
    Private,
    /// As a new file gets by default (the umask decides).
    Default,
}

/// Replaces `path` with `bytes` atomically (see the module docs). On an error the temporary file
/// is removed and the target is as it was.
pub fn write_atomic(path: &Path, bytes: &[u8], access: Access) -> Result<()> {
    let folder = path
        .parent()
        .with_context(|| format!("{} has no folder", path.display()))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} has no file name", path.display()))?;
    let temp = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if access == Access::Private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = access;
    let written = (|| -> std::io::Result<()> {
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // Where folders cannot be opened or synced, the rename stands on its own.
        if let Ok(dir) = std::fs::File::open(folder) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_whole_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("pi-forge-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        write_atomic(&path, b"old", Access::Default).unwrap();
        write_atomic(&path, b"new", Access::Private).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["state.json"]);
        // A folder that does not exist: an error naming the file, nothing written.
        let missing = dir.join("no/such/state.json");
        let error = write_atomic(&missing, b"x", Access::Private).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("cannot write {}", missing.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
