//! The local npm registry the package tests publish to (e2e/tests/pi_package.rs): verdaccio,
//! pinned by `tools/registry/package-lock.json` and installed with `npm ci` into
//! `<tools cache>/verdaccio-<version>/` (next to the Pi tools, see `Ctx::pi_tools_dir`), run by
//! the pinned Node 22.
//!
//! Pinned at 6.8.0 (its `engines`: node >= 20; 6.10.4 asks for node >= 22), so it also runs with a
//! machine's older Node; the tests and this install use the pinned Node 22.
//! The tests start it on 127.0.0.1 with a config of their own (storage in a temp folder, no
//! uplinks), so nothing is fetched from or published to the public registry.

use super::*;

/// The pinned verdaccio (`tools/registry/package.json`; the lock pins its dependencies).
pub(crate) const VERDACCIO_VERSION: &str = "6.8.0";
/// verdaccio's CLI inside the install folder (the e2e harness looks in the same place).
const VERDACCIO_CLI: &str = "node_modules/verdaccio/bin/verdaccio";
const STAMP: &str = "node_modules/.pi-forge-stamp";

/// `<tools cache>/verdaccio-<version>`.
pub(crate) fn install_dir(cache: &Path) -> PathBuf {
    cache.join(format!("verdaccio-{VERDACCIO_VERSION}"))
}

/// The version in the installed `node_modules/verdaccio/package.json`, if any.
fn installed_version(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join("node_modules/verdaccio/package.json")).ok()?;
    json_string_field(&text.replace("\": \"", "\":\""), "version")
}

/// Installs verdaccio into `<tools cache>/verdaccio-<version>/` unless the folder already holds
/// the install of the current package.json and lock (a stamp of both, as [`npm_ci_stamped`]
/// keeps); `npm ci` runs with the pinned Node 22 first on PATH. Returns verdaccio's CLI.
pub(crate) fn ensure_verdaccio(ctx: &Ctx) -> Result<PathBuf> {
    let cache = workflows::tools_cache(ctx)?;
    let dir = install_dir(&cache);
    let cli = dir.join(VERDACCIO_CLI);
    let node = ctx.pi_tools_dir()?.join(PI_NODE);
    let Some(node_bin) = node.parent().filter(|_| node.is_file()) else {
        return fail_with_hint(
            format!(
                "Node 22 is missing at {} (verdaccio runs with it)",
                node.display()
            ),
            "run `cargo xtask setup` (it installs Node 22 and Pi 1.6.0 first)",
        );
    };
    create_dir(&dir)?;
    let mut inputs = Vec::new();
    for name in ["package.json", "package-lock.json"] {
        let from = ctx.root.join("tools/registry").join(name);
        let bytes = fs::read(&from).map_err(|e| io_failure("read", &from, e))?;
        let to = dir.join(name);
        if fs::read(&to).ok().as_deref() != Some(bytes.as_slice()) {
            write_file(&to, &bytes)?;
        }
        inputs.extend(bytes);
    }
    let stamp = format!("{:016x}\n", fnv1a(&inputs));
    let stamp_path = dir.join(STAMP);
    if fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str())
        && cli.is_file()
        && installed_version(&dir).as_deref() == Some(VERDACCIO_VERSION)
    {
        skipped(&format!(
            "verdaccio {VERDACCIO_VERSION} in {} matches tools/registry/package-lock.json",
            dir.display()
        ));
        return Ok(cli);
    }
    step(&format!(
        "installing verdaccio {VERDACCIO_VERSION} (the package tests' local npm registry) in {} (npm ci)",
        dir.display()
    ));
    // npm's launcher is `#!/usr/bin/env node`: Node 22 first on PATH runs it (and verdaccio's
    // own install) with the Node the tests run verdaccio with.
    let mut path = vec![node_bin.to_path_buf()];
    path.extend(env::var_os("PATH").map_or_else(Vec::new, |p| env::split_paths(&p).collect()));
    let path = env::join_paths(path).map_err(|e| Failure {
        message: format!("cannot put {} first on PATH: {e}", node_bin.display()),
        hint: None,
    })?;
    run(npm()
        .args(["ci", "--no-audit", "--no-fund"])
        .env("PATH", path)
        .current_dir(&dir))
    .map_err(|f| {
        with_hint(
            f,
            "install npm (Debian: `apt-get install -y npm`), then rerun `cargo xtask setup`",
        )
    })?;
    match installed_version(&dir) {
        Some(v) if v == VERDACCIO_VERSION && cli.is_file() => {}
        other => {
            return fail(format!(
                "npm ci in {} finished, but {} is {} (expected verdaccio {VERDACCIO_VERSION})",
                dir.display(),
                cli.display(),
                other.map_or_else(|| "missing".to_string(), |v| format!("version {v}"))
            ))
        }
    }
    write_file(&stamp_path, stamp.as_bytes())?;
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_verdaccio_is_the_one_tools_registry_asks_for() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let manifest = fs::read_to_string(root.join("tools/registry/package.json")).unwrap();
        assert!(
            manifest.contains(&format!("\"verdaccio\": \"{VERDACCIO_VERSION}\"")),
            "{manifest}"
        );
        let lock = fs::read_to_string(root.join("tools/registry/package-lock.json")).unwrap();
        let entry = lock
            .split("\"node_modules/verdaccio\": {")
            .nth(1)
            .expect("the lock has verdaccio");
        assert_eq!(
            json_string_field(&entry.replace("\": \"", "\":\""), "version").as_deref(),
            Some(VERDACCIO_VERSION)
        );
        assert_eq!(
            install_dir(Path::new("/cache")),
            Path::new("/cache/verdaccio-6.8.0")
        );
    }
}
