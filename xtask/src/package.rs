//! `cargo xtask package [--target T]`: the npm packages users install with `pi install
//! npm:pi-forge` (docs/distribution.md).
//!
//! Builds the web bundle and the stripped release binary (profile `dist`) for one target, then
//! writes two package folders under `<target dir>/package/npm/` and packs each with `npm pack`:
//! `pi-forge` (the Pi package: manifest, the bridge extension, the `bin/pi-forge.js` launcher)
//! and the target's platform package (`@pi-forge/cli-<platform>`: the binary and the license).
//! `manifest.json` beside the tarballs names them. Every version comes from the workspace
//! version; the checked-in `packaging/npm/pi-forge/package.json` must agree with it.

use super::*;

/// One platform package: the Rust target it is built from, npm's `os` and `cpu` values.
pub(crate) struct Platform {
    pub target: &'static str,
    /// `<os>-<cpu>`: the package name's suffix and Node's `${process.platform}-${process.arch}`.
    pub platform: &'static str,
    pub os: &'static str,
    pub cpu: &'static str,
    pub exe: &'static str,
    /// What the package description says it runs on.
    pub runs_on: &'static str,
}

/// Every platform the release workflow builds (.github/workflows/release.yml). Linux binaries
/// are static musl builds, so they run on any distribution whatever its libc.
pub(crate) const PLATFORMS: &[Platform] = &[
    Platform {
        target: "x86_64-unknown-linux-musl",
        platform: "linux-x64",
        os: "linux",
        cpu: "x64",
        exe: "pi-forge",
        runs_on: "Linux x64 (a static binary: any distribution, glibc or musl)",
    },
    Platform {
        target: "aarch64-unknown-linux-musl",
        platform: "linux-arm64",
        os: "linux",
        cpu: "arm64",
        exe: "pi-forge",
        runs_on: "Linux arm64 (a static binary: any distribution, glibc or musl)",
    },
    Platform {
        target: "aarch64-apple-darwin",
        platform: "darwin-arm64",
        os: "darwin",
        cpu: "arm64",
        exe: "pi-forge",
        runs_on: "macOS on Apple silicon",
    },
    Platform {
        target: "x86_64-apple-darwin",
        platform: "darwin-x64",
        os: "darwin",
        cpu: "x64",
        exe: "pi-forge",
        runs_on: "macOS on Intel",
    },
    Platform {
        target: "x86_64-pc-windows-msvc",
        platform: "win32-x64",
        os: "win32",
        cpu: "x64",
        exe: "pi-forge.exe",
        runs_on: "Windows x64",
    },
];

pub(crate) const SCOPE: &str = "@pi-forge";
const PROFILE: &str = "dist";

impl Platform {
    pub fn package(&self) -> String {
        format!("{SCOPE}/cli-{}", self.platform)
    }
}

/// The platform this xtask runs on, as a package target.
pub(crate) fn host_platform() -> Option<&'static Platform> {
    let platform = match (env::consts::OS, env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64",
        ("linux", "aarch64") => "linux-arm64",
        ("macos", "aarch64") => "darwin-arm64",
        ("macos", "x86_64") => "darwin-x64",
        ("windows", "x86_64") => "win32-x64",
        _ => return None,
    };
    PLATFORMS.iter().find(|p| p.platform == platform)
}

/// `version = "…"` of `[workspace.package]` in the root Cargo.toml.
pub(crate) fn workspace_version(root: &Path) -> Result<String> {
    let path = root.join("Cargo.toml");
    let text = fs::read_to_string(&path).map_err(|e| io_failure("read", &path, e))?;
    let section = text
        .split("[workspace.package]")
        .nth(1)
        .ok_or_else(|| Failure {
            message: format!("{} has no [workspace.package]", path.display()),
            hint: None,
        })?;
    section
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .find_map(|l| {
            let rest = l.trim().strip_prefix("version")?.trim_start();
            let value = rest.strip_prefix('=')?.trim();
            Some(value.trim_matches('"').to_string())
        })
        .ok_or_else(|| Failure {
            message: format!("{} [workspace.package] has no version", path.display()),
            hint: None,
        })
}

/// Every disagreement between the workspace version and the main package's manifest (its
/// version and each platform package's pin), and between [`PLATFORMS`] and the platform tables
/// of the launcher and the extension.
pub(crate) fn drift(root: &Path, version: &str) -> Result<Vec<String>> {
    let read = |rel: &str| -> Result<String> {
        let path = root.join(rel);
        fs::read_to_string(&path).map_err(|e| io_failure("read", &path, e))
    };
    let manifest = read("packaging/npm/pi-forge/package.json")?;
    let mut problems = Vec::new();
    let top_version = json_string_field(&manifest.replace("\": \"", "\":\""), "version");
    if top_version.as_deref() != Some(version) {
        problems.push(format!(
            "packaging/npm/pi-forge/package.json has version {top_version:?}, the workspace {version}"
        ));
    }
    let launcher = read("packaging/npm/pi-forge/bin/pi-forge.js")?;
    let extension = read("assets/pi-extension/index.ts")?;
    for p in PLATFORMS {
        let pin = format!("\"{}\": \"{version}\"", p.package());
        if !manifest.contains(&pin) {
            problems.push(format!(
                "packaging/npm/pi-forge/package.json does not pin {} to {version}",
                p.package()
            ));
        }
        let entry = format!("\"{}\": \"{}\"", p.platform, p.package());
        for (file, text) in [
            ("packaging/npm/pi-forge/bin/pi-forge.js", &launcher),
            ("assets/pi-extension/index.ts", &extension),
        ] {
            if !text.contains(&entry) {
                problems.push(format!("{file} does not map {entry}"));
            }
        }
    }
    let pins = manifest.matches(&format!("\"{SCOPE}/cli-")).count();
    if pins != PLATFORMS.len() {
        problems.push(format!(
            "packaging/npm/pi-forge/package.json names {pins} platform packages, xtask builds {}",
            PLATFORMS.len()
        ));
    }
    Ok(problems)
}

fn platform_manifest(p: &Platform, version: &str) -> String {
    format!(
        r#"{{
  "name": "{name}",
  "version": "{version}",
  "description": "The pi-forge binary for {runs_on}. Installed by the pi-forge package; see https://www.npmjs.com/package/pi-forge.",
  "license": "MIT",
  "os": ["{os}"],
  "cpu": ["{cpu}"],
  "files": ["bin/", "LICENSE"],
  "preferUnplugged": true
}}
"#,
        name = p.package(),
        runs_on = p.runs_on,
        os = p.os,
        cpu = p.cpu,
    )
}

/// The repository the packages are built from, for npm's provenance check (which refuses a
/// package without it): `GITHUB_SERVER_URL/GITHUB_REPOSITORY` in the release workflow, else
/// `PI_FORGE_REPOSITORY`; local packages carry none.
fn repository() -> Option<String> {
    let var = |name: &str| env::var(name).ok().filter(|v| !v.is_empty());
    match (var("GITHUB_SERVER_URL"), var("GITHUB_REPOSITORY")) {
        (Some(server), Some(repo)) => Some(format!("git+{server}/{repo}.git")),
        _ => var("PI_FORGE_REPOSITORY"),
    }
}

/// `manifest` with a `"repository"` entry after `"license"` when [`repository`] names one.
fn with_repository(manifest: &str) -> String {
    let Some(url) = repository() else {
        return manifest.to_string();
    };
    const LICENSE: &str = "\"license\": \"MIT\",";
    let url = url.replace('\\', "\\\\").replace('"', "\\\"");
    match manifest.find(LICENSE) {
        Some(at) => {
            let end = at + LICENSE.len();
            format!(
                "{}\n  \"repository\": {{ \"type\": \"git\", \"url\": \"{url}\" }},{}",
                &manifest[..end],
                &manifest[end..]
            )
        }
        None => manifest.to_string(),
    }
}

/// The main manifest with its version and every platform pin (which [`drift`] checked are
/// `workspace`) set to `version`.
fn with_version(manifest: &str, workspace: &str, version: &str) -> String {
    let mut out = manifest.replace(
        &format!("\"version\": \"{workspace}\""),
        &format!("\"version\": \"{version}\""),
    );
    for p in PLATFORMS {
        out = out.replace(
            &format!("\"{}\": \"{workspace}\"", p.package()),
            &format!("\"{}\": \"{version}\"", p.package()),
        );
    }
    out
}

fn copy(from: &Path, to: &Path) -> Result {
    if let Some(dir) = to.parent() {
        create_dir(dir)?;
    }
    fs::copy(from, to).map_err(|e| Failure {
        message: format!("cannot copy {} to {}: {e}", from.display(), to.display()),
        hint: None,
    })?;
    Ok(())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|e| io_failure("chmod", path, e))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result {
    Ok(())
}

/// `npm pack` of `folder` into `out`; the tarball's file name.
fn npm_pack(folder: &Path, out: &Path) -> Result<String> {
    let listing = capture(
        npm()
            .args(["pack", "--silent", "--pack-destination"])
            .arg(out)
            .current_dir(folder),
    )
    .map_err(|f| {
        with_hint(
            f,
            "install Node.js and npm (Debian: `apt-get install -y nodejs npm`)",
        )
    })?;
    listing
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.ends_with(".tgz"))
        .map(str::to_string)
        .ok_or_else(|| Failure {
            message: format!(
                "npm pack in {} printed no tarball name: {listing}",
                folder.display()
            ),
            hint: None,
        })
}

/// What `cargo xtask package` was asked for.
pub(crate) struct Request {
    pub platform: &'static Platform,
    /// `--version V`: a test package of another version (the upgrade test publishes one).
    pub version: Option<String>,
}

const USAGE: &str = "usage: cargo xtask package [--target <rust target>] [--version <x.y.z>]";

fn parse_args(args: &[String]) -> Result<Request> {
    let mut target: Option<String> = None;
    let mut version: Option<String> = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        let slot = match name {
            "--target" => &mut target,
            "--version" => &mut version,
            _ => {
                return fail_with_hint(
                    format!("unknown argument `{arg}` for `cargo xtask package`"),
                    USAGE,
                )
            }
        };
        let value = match inline {
            Some(value) => value,
            None => rest.next().cloned().ok_or_else(|| Failure {
                message: format!("{name} needs a value"),
                hint: Some(if name == "--target" {
                    targets_hint()
                } else {
                    USAGE.to_string()
                }),
            })?,
        };
        *slot = Some(value);
    }
    if let Some(v) = &version {
        if !is_release_version(v) {
            return fail_with_hint(
                format!("--version {v:?} is not a release version"),
                "three numbers, as 1.2.3 (npm installs a prerelease only when asked for it)",
            );
        }
    }
    let platform = match target {
        Some(t) => PLATFORMS
            .iter()
            .find(|p| p.target == t)
            .ok_or_else(|| Failure {
                message: format!("no npm platform package is built from target `{t}`"),
                hint: Some(targets_hint()),
            })?,
        None => host_platform().ok_or_else(|| Failure {
            message: format!(
                "pi-forge publishes no package for this machine ({}-{})",
                env::consts::OS,
                env::consts::ARCH
            ),
            hint: Some(targets_hint()),
        })?,
    };
    Ok(Request { platform, version })
}

/// `1.2.3`: three numbers without leading zeros.
fn is_release_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

/// The version after `version` by its last number (`0.1.0` → `0.1.1`): what CI builds the
/// upgrade test's package as.
pub(crate) fn next_patch(version: &str) -> Result<String> {
    let parts: Vec<&str> = version.split('.').collect();
    match (parts.as_slice(), is_release_version(version)) {
        ([major, minor, patch], true) => {
            let patch: u64 = patch.parse().map_err(|_| Failure {
                message: format!("version {version:?} has no patch number"),
                hint: None,
            })?;
            Ok(format!("{major}.{minor}.{}", patch + 1))
        }
        _ => fail(format!("the workspace version {version:?} is not x.y.z")),
    }
}

fn targets_hint() -> String {
    let list: Vec<&str> = PLATFORMS.iter().map(|p| p.target).collect();
    format!("targets: {}", list.join(", "))
}

/// What building `platform` (default: this machine's) needs: its Rust target and, for the
/// static Linux builds, `musl-gcc` (mimalloc is C; Debian's `musl-tools`, installed as root).
pub(crate) fn ensure_build_tools(ctx: &Ctx, platform: Option<&'static Platform>) -> Result {
    let Some(platform) = platform.or_else(host_platform) else {
        skipped("no npm platform package is built on this machine");
        return Ok(());
    };
    ensure_target(ctx, platform.target)?;
    if !platform.target.ends_with("-linux-musl") || env::consts::OS != "linux" {
        return Ok(());
    }
    if !find_programs("musl-gcc").is_empty() {
        skipped("musl-gcc is installed (static Linux builds)");
        return Ok(());
    }
    let install = "apt-get update && apt-get install -y musl-tools";
    if !is_root() {
        return fail_with_hint(
            "musl-gcc is missing (the static Linux build compiles mimalloc with it) and installing needs root",
            format!("run: sudo sh -c '{install}'"),
        );
    }
    step("installing musl-tools (musl-gcc, for the static Linux build)");
    let hint = format!("run as root: {install}");
    run(Command::new("apt-get").arg("update")).map_err(|f| with_hint(f, hint.clone()))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "musl-tools"])
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .map_err(|f| with_hint(f, hint.clone()))?;
    if find_programs("musl-gcc").is_empty() {
        return fail_with_hint("musl-gcc is still missing after apt-get", hint);
    }
    Ok(())
}

/// `cargo xtask package [--target T]`.
pub(crate) fn package(ctx: &Ctx, args: &[String]) -> Result {
    let request = parse_args(args)?;
    dist(ctx)?;
    build(ctx, request.platform, request.version.as_deref())
}

/// The packages of `platform` from the web bundle already in `assets/dist` (CI builds it in
/// its own step), in `<target dir>/package/`. With `version` (not the workspace's), a test
/// package of that version instead, in `<target dir>/package/<version>/`: the binary reports
/// it and both manifests carry it (server/build.rs, `PI_FORGE_BUILD_VERSION`).
pub(crate) fn build(ctx: &Ctx, platform: &'static Platform, version: Option<&str>) -> Result {
    let started = Instant::now();
    let workspace = workspace_version(&ctx.root)?;
    let problems = drift(&ctx.root, &workspace)?;
    if !problems.is_empty() {
        return fail_with_hint(
            format!("package versions drifted:\n  {}", problems.join("\n  ")),
            "every version is the workspace version in Cargo.toml; update packaging/npm/pi-forge/package.json",
        );
    }
    if version == Some(workspace.as_str()) {
        return fail_with_hint(
            format!("--version {workspace} is the workspace version"),
            "leave --version out to build the release packages",
        );
    }
    let test_build = version.is_some();
    let version = version.unwrap_or(&workspace).to_string();
    ensure_build_tools(ctx, Some(platform))?;
    step(&format!(
        "building pi-forge {version} for {} (profile {PROFILE}: release, stripped{})",
        platform.target,
        if test_build { "; a test package" } else { "" }
    ));
    let mut cargo = ctx.cargo();
    cargo.args([
        "build",
        "--locked",
        "-p",
        "pi-forge",
        "--profile",
        PROFILE,
        "--target",
        platform.target,
    ]);
    if test_build {
        cargo.env("PI_FORGE_BUILD_VERSION", &version);
    } else {
        cargo.env_remove("PI_FORGE_BUILD_VERSION");
    }
    run(&mut cargo)?;
    let target = target_dir(ctx)?;
    let built = target
        .join(platform.target)
        .join(PROFILE)
        .join(platform.exe);
    let out = if test_build {
        target.join("package").join(&version)
    } else {
        target.join("package")
    };
    let npm = out.join("npm");
    if npm.exists() {
        fs::remove_dir_all(&npm).map_err(|e| io_failure("remove", &npm, e))?;
    }
    for entry in fs::read_dir(&out).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "tgz") {
            fs::remove_file(&path).map_err(|e| io_failure("remove", &path, e))?;
        }
    }

    // The Pi package: its manifest as checked in, the extension, the launcher.
    let template = ctx.root.join("packaging/npm/pi-forge");
    let main = npm.join("pi-forge");
    for rel in ["README.md", "bin/pi-forge.js"] {
        copy(&template.join(rel), &main.join(rel))?;
    }
    let manifest_path = template.join("package.json");
    let manifest =
        fs::read_to_string(&manifest_path).map_err(|e| io_failure("read", &manifest_path, e))?;
    write_file(
        &main.join("package.json"),
        with_repository(&with_version(&manifest, &workspace, &version)).as_bytes(),
    )?;
    make_executable(&main.join("bin/pi-forge.js"))?;
    copy(&ctx.root.join("LICENSE"), &main.join("LICENSE"))?;
    copy(
        &ctx.root.join("assets/pi-extension/index.ts"),
        &main.join("extension/index.ts"),
    )?;

    // The platform package: the binary and the license.
    let folder = npm.join(format!("cli-{}", platform.platform));
    create_dir(&folder)?;
    write_file(
        &folder.join("package.json"),
        with_repository(&platform_manifest(platform, &version)).as_bytes(),
    )?;
    copy(&ctx.root.join("LICENSE"), &folder.join("LICENSE"))?;
    let bin = folder.join("bin").join(platform.exe);
    copy(&built, &bin)?;
    make_executable(&bin)?;

    if host_platform().is_some_and(|h| h.target == platform.target) {
        let line = capture(Command::new(&bin).arg("--version"))?;
        let expected = format!("pi-forge {version} ({})", platform.target);
        if !line.starts_with(&expected) {
            return fail(format!(
                "{} --version printed {line:?}, expected it to start with {expected:?}",
                bin.display()
            ));
        }
        step(&format!("smoke test: {}", line.trim()));
    }

    let main_tgz = npm_pack(&main, &out)?;
    let platform_tgz = npm_pack(&folder, &out)?;
    let manifest = format!(
        "{{\n  \"version\": \"{version}\",\n  \"target\": \"{}\",\n  \"tarballs\": {{\n    \"pi-forge\": \"{main_tgz}\",\n    \"{}\": \"{platform_tgz}\"\n  }}\n}}\n",
        platform.target,
        platform.package()
    );
    write_file(&out.join("manifest.json"), manifest.as_bytes())?;
    let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    println!(
        "xtask package: {} in {:.0}s: binary {} ({}), {main_tgz} {}, {platform_tgz} {}",
        out.display(),
        started.elapsed().as_secs_f64(),
        bin.display(),
        kib(size(&bin)),
        kib(size(&out.join(&main_tgz))),
        kib(size(&out.join(&platform_tgz))),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask sits in the workspace")
            .to_path_buf()
    }

    #[test]
    fn package_versions_and_platform_tables_agree_with_the_workspace() {
        let version = workspace_version(&root()).unwrap();
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        assert_eq!(drift(&root(), &version).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn drift_names_every_disagreement() {
        let problems = drift(&root(), "9.9.9").unwrap();
        assert_eq!(problems.len(), 1 + PLATFORMS.len(), "{problems:#?}");
        assert_eq!(
            problems[0],
            format!(
                "packaging/npm/pi-forge/package.json has version Some(\"{}\"), the workspace 9.9.9",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(
            problems[1],
            "packaging/npm/pi-forge/package.json does not pin @pi-forge/cli-linux-x64 to 9.9.9"
        );
    }

    #[test]
    fn a_test_version_replaces_the_version_and_every_pin() {
        let template =
            fs::read_to_string(root().join("packaging/npm/pi-forge/package.json")).unwrap();
        let v = env!("CARGO_PKG_VERSION");
        let next = next_patch(v).unwrap();
        let out = with_version(&template, v, &next);
        assert_eq!(drift_of(&out, &next), Vec::<String>::new());
        assert_eq!(
            out.matches(&format!("\"{next}\"")).count(),
            1 + PLATFORMS.len()
        );
        assert!(!out.contains(&format!("\"{v}\"")), "{out}");
    }

    /// [`drift`] of a manifest text (the launcher and extension tables as checked in).
    fn drift_of(manifest: &str, version: &str) -> Vec<String> {
        let dir = tempfile_dir();
        for rel in [
            "packaging/npm/pi-forge/bin/pi-forge.js",
            "assets/pi-extension/index.ts",
        ] {
            let to = dir.join(rel);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(root().join(rel), to).unwrap();
        }
        fs::write(dir.join("packaging/npm/pi-forge/package.json"), manifest).unwrap();
        let problems = drift(&dir, version).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        problems
    }

    fn tempfile_dir() -> PathBuf {
        let dir = env::temp_dir().join(format!(
            "xtask-package-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn next_patch_and_release_versions() {
        assert_eq!(next_patch("0.1.0").unwrap(), "0.1.1");
        assert_eq!(next_patch("1.9.19").unwrap(), "1.9.20");
        assert!(next_patch("1.0.0-rc.1").is_err());
        for good in ["0.1.1", "10.0.0", "1.2.30"] {
            assert!(is_release_version(good), "{good}");
        }
        for bad in [
            "0.1",
            "0.1.1-rc.1",
            "01.2.3",
            "1..2",
            "a.b.c",
            "1.2.3.4",
            "",
        ] {
            assert!(!is_release_version(bad), "{bad}");
        }
    }

    #[test]
    fn package_arguments() {
        let args = |a: &[&str]| parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let r = args(&["--target", "x86_64-pc-windows-msvc", "--version=2.0.0"]).unwrap();
        assert_eq!(
            (r.platform.platform, r.version.as_deref()),
            ("win32-x64", Some("2.0.0"))
        );
        let r = args(&["--target=aarch64-apple-darwin"]).unwrap();
        assert_eq!((r.platform.platform, r.version), ("darwin-arm64", None));
        let message = |a: &[&str]| match args(a) {
            Err(f) => f.message,
            Ok(_) => panic!("{a:?} was accepted"),
        };
        assert_eq!(message(&["--version"]), "--version needs a value");
        assert_eq!(
            message(&["--version", "2.0"]),
            "--version \"2.0\" is not a release version"
        );
        assert_eq!(
            message(&["--target", "x"]),
            "no npm platform package is built from target `x`"
        );
        assert_eq!(
            message(&["--fast"]),
            "unknown argument `--fast` for `cargo xtask package`"
        );
    }

    #[test]
    fn platform_manifests_declare_os_and_cpu() {
        let linux = platform_manifest(&PLATFORMS[0], "1.2.3");
        assert!(
            linux.contains("\"name\": \"@pi-forge/cli-linux-x64\""),
            "{linux}"
        );
        assert!(linux.contains("\"version\": \"1.2.3\""), "{linux}");
        assert!(linux.contains("\"os\": [\"linux\"]"), "{linux}");
        assert!(linux.contains("\"cpu\": [\"x64\"]"), "{linux}");
        assert!(!linux.contains("scripts"), "{linux}");
    }
}
