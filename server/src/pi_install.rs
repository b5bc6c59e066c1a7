//! `pi-forge pi install`: writes the bridge extension (embedded in this binary) where Pi finds
//! it, records this binary's path for the extension, and says how to load it.
//!
//! The folder is `$PI_CODING_AGENT_DIR/extensions/pi-forge/` (Pi's own override of its agent
//! directory), else `~/.pi/agent/extensions/pi-forge/`: a global extension loads in every
//! project without project trust. It is also a Pi package (`package.json` with a `pi` manifest),
//! so `pi install <folder>` works too. Re-running upgrades in place; files are written through a
//! temporary file and a rename, so Pi never loads half a file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};

/// The extension's source and manifest, embedded at build time.
pub const INDEX_TS: &str = include_str!("../../assets/pi-extension/index.ts");
const PACKAGE_JSON: &str = include_str!("../../assets/pi-extension/package.json");

/// Pi's agent directory: `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
fn agent_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PI_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".pi").join("agent")),
        None => bail!("cannot find Pi's agent directory: set PI_CODING_AGENT_DIR or HOME"),
    }
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    crate::files::write_atomic(path, text.as_bytes(), crate::files::Access::Default)
}

/// The manifest with this binary's version.
fn package_json() -> Result<String> {
    let mut value: serde_json::Value =
        serde_json::from_str(PACKAGE_JSON).context("the embedded package.json is not JSON")?;
    value["version"] = serde_json::Value::from(crate::VERSION);
    Ok(forge_core::json::to_pretty(&value))
}

/// Writes the extension's three files into `dir`.
fn install(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let bin = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this pi-forge binary's path")?;
    let install = serde_json::json!({
        "version": crate::VERSION,
        "bin": bin.display().to_string(),
    });
    write_atomic(&dir.join("index.ts"), INDEX_TS)?;
    write_atomic(&dir.join("package.json"), &package_json()?)?;
    write_atomic(
        &dir.join("install.json"),
        &forge_core::json::to_pretty(&install),
    )
}

/// `pi-forge pi install [--dir DIR] [--print-path]`.
pub fn run(dir: Option<&Path>, print_path: bool) -> Result<ExitCode> {
    let folder = match dir {
        Some(d) => d.to_path_buf(),
        None => agent_dir()?.join("extensions").join("pi-forge"),
    };
    let upgrade = folder.join("install.json").is_file();
    install(&folder)?;
    let index = folder.join("index.ts");
    if print_path {
        println!("{}", index.display());
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if upgrade { "Updated" } else { "Installed" };
    println!(
        "{verb} the pi-forge extension {} in {}",
        crate::VERSION,
        folder.display()
    );
    println!("Pi loads it in every new session. In Pi, type /forge ui to open the editor.");
    println!("To load it for one run only: pi -e {}", index.display());
    Ok(ExitCode::SUCCESS)
}
