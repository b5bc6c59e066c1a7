//! `cargo xtask`: pi-forge's build, setup and CI driver.
//!
//! Std-only on purpose: it compiles in about a second and works before any tool is installed.
//! Every step checks before it acts and says what it did or skipped, so running a command
//! twice is cheap. The wasm bundle is built with plain cargo + wasm-bindgen + wasm-opt (from
//! the npm package `binaryen`, pinned in tools/): trunk and cargo-leptos are not needed, and
//! Debian's wasm-opt 108 produces modules that fail in Chromium.
#![forbid(unsafe_code)]

use std::env;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

mod package;
mod registry;
mod workflows;

const HELP: &str = "\
cargo xtask: build and check pi-forge

USAGE:
    cargo xtask <COMMAND> [ARGS]

COMMANDS:
    setup            Install missing tools: wasm32 target, wasm-bindgen CLI, tools/ npm, chromium,
                     Node 22 + Pi 1.6.0 + TypeScript, verdaccio, actionlint (cached in
                     ~/.cache/pi-forge/tools), the musl target and musl-tools for `package`
    dist             Build the web bundle into assets/dist (cargo, wasm-split, wasm-bindgen,
                     wasm-opt -Oz, whose results are kept in ~/.cache/pi-forge/wasm-opt; the
                     code lazy parts share goes into one chunks.bin; their loader is
                     imported by the first lazy load) and compress it once
                     (brotli 11 and gzip -9 variants, served as they are); std is rebuilt
                     for size and panics trap: PI_FORGE_WASM_PANIC_MESSAGES=1 keeps messages
    run [-- ARGS]    Build the bundle, then `pi-forge ui ARGS` (adds --demo outside a project)
    ci               All CI checks: setup, fmt, clippy, wasm32 builds, dist, tests; builds in
                     ~/.cache/pi-forge/ci-target, kept between runs (PI_FORGE_CI_TARGET_DIR=off:
                     in target/)
    bench [-- ARGS]  Run `pi-forge bench --json` in a release build and the web benchmarks
                     (first visit and reload; the Payloads surface on a 5 MB capture; keystroke
                     to highlight on a 100 KB template; NAVBENCH_BASELINE=<pi-forge> adds an
                     older build); print the JSON
    package [--target T] [--version V]
                     Build the npm packages `pi install npm:pi-forge` installs: the web bundle,
                     the stripped release binary (profile dist; default target: this machine's,
                     x86_64-unknown-linux-musl on Linux x64), the folders and `npm pack`
                     tarballs in <target dir>/package/ (see docs/distribution.md). --version V:
                     a test package that is version V throughout (binary, manifests), in
                     <target dir>/package/V/; CI builds the next patch version for `pi update`
    help             Print this text
";

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const APT_INSTALL: &str = "apt-get update && apt-get install -y chromium chromium-driver";
/// Files copied from `assets/` into the bundle (verbatim, except `app.css`: see [`minify_css`]).
const STATIC_ASSETS: &[&str] = &["index.html", "app.css", "boot.js", "favicon.png"];
/// The web bundle rebuilds the standard library for size and lets a panic trap at once instead of
/// formatting a message: the main module is 26 KB of brotli smaller (313 → 287 KB; see
/// docs/performance.md). Both are unstable options, enabled on the stable toolchain with
/// `RUSTC_BOOTSTRAP=1` for this one build; they need the `rust-src` component (`cargo xtask
/// setup` adds it).
const BUILD_STD_ARGS: &[&str] = &[
    "-Zbuild-std=std,panic_abort",
    // Smaller variants of std's algorithms (sorting, formatting), chosen for code size.
    "-Zbuild-std-features=optimize_for_size",
];
/// Flags for every crate of that build (merged with `.cargo/config.toml`'s wasm32 `rustflags`).
const SIZE_RUSTFLAGS: &[&str] = &[
    "-Zunstable-options",
    // A panic is a `RuntimeError: unreachable` in the browser's console (boot.js still records
    // it), with no message and no location compiled in.
    "-Cpanic=immediate-abort",
    "-Zlocation-detail=none",
];
const WASM_RUSTFLAGS_ENV: &str = "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS";
/// `PI_FORGE_WASM_PANIC_MESSAGES=1 cargo xtask dist` builds with the stock standard library and
/// panic messages in the console (for debugging a panic; a larger bundle).
const PANIC_MESSAGES_ENV: &str = "PI_FORGE_WASM_PANIC_MESSAGES";
/// wasm-opt's optimisation arguments for every module of the bundle.
const WASM_OPT_ARGS: &[&str] = &[
    "-Oz",
    // Lets wasm-opt fold a small constant added to an address into the load's or store's offset
    // (the add wraps, the offset does not; a wrapped address would land in the lowest 1 KiB,
    // which a Rust module only reaches at the very bottom of its 1 MiB stack, and never through
    // a wrapping add). 8 KB less wasm, 3.6 KB less brotli.
    "--low-memory-unused",
];
/// Wasm features that rustc's wasm32 target emits by default and wasm-bindgen keeps.
const WASM_OPT_FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-bulk-memory-opt",
    "--enable-nontrapping-float-to-int",
    "--enable-sign-ext",
    "--enable-reference-types",
    "--enable-mutable-globals",
    "--enable-multivalue",
];

/// A failed step: what failed, and what the user can do about it.
#[derive(Debug)]
struct Failure {
    message: String,
    hint: Option<String>,
}

type Result<T = ()> = std::result::Result<T, Failure>;

fn fail<T>(message: impl Into<String>) -> Result<T> {
    Err(Failure {
        message: message.into(),
        hint: None,
    })
}

fn fail_with_hint<T>(message: impl Into<String>, hint: impl Into<String>) -> Result<T> {
    Err(Failure {
        message: message.into(),
        hint: Some(hint.into()),
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let (command, rest) = match args.split_first() {
        Some((command, rest)) => (command.as_str(), rest),
        None => {
            eprint!("{HELP}");
            return ExitCode::from(2);
        }
    };
    let rest = rest.strip_prefix(&["--".to_string()]).unwrap_or(rest);
    let ctx = Ctx::new();
    let result = match command {
        "setup" => no_args(command, rest).and_then(|()| setup(&ctx, Setup::All).map(drop)),
        "dist" => no_args(command, rest).and_then(|()| dist(&ctx).map(drop)),
        "run" => run_ui(&ctx, rest),
        "ci" => no_args(command, rest).and_then(|()| ci(&ctx)),
        "bench" => bench(&ctx, rest),
        "package" => package::package(&ctx, rest),
        "help" | "-h" | "--help" => {
            print!("{HELP}");
            Ok(())
        }
        other => fail_with_hint(
            format!("unknown command `{other}`"),
            "run `cargo xtask --help` for the list of commands",
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("xtask: error: {}", failure.message);
            if let Some(hint) = failure.hint {
                eprintln!("xtask: hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

fn no_args(command: &str, rest: &[String]) -> Result {
    if rest.is_empty() {
        Ok(())
    } else {
        fail_with_hint(
            format!("`{command}` takes no arguments, got {rest:?}"),
            "run `cargo xtask --help`",
        )
    }
}

/// Paths and programs every command needs.
#[derive(Clone)]
struct Ctx {
    root: PathBuf,
    cargo: String,
    /// `CARGO_TARGET_DIR` for every cargo this context runs (set by `ci` for its build cache).
    target_dir: Option<PathBuf>,
}

impl Ctx {
    fn new() -> Ctx {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask lives one level below the workspace root")
            .to_path_buf();
        let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        Ctx {
            root,
            cargo,
            target_dir: None,
        }
    }

    fn cargo(&self) -> Command {
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(&self.root);
        if let Some(dir) = &self.target_dir {
            cmd.env("CARGO_TARGET_DIR", dir);
        }
        cmd
    }

    /// `$XDG_CACHE_HOME/pi-forge`, else `~/.cache/pi-forge`.
    fn cache_dir(&self) -> Option<PathBuf> {
        match (
            env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()),
            env::var_os("HOME").filter(|v| !v.is_empty()),
        ) {
            (Some(cache), _) => Some(PathBuf::from(cache).join("pi-forge")),
            (None, Some(home)) => Some(PathBuf::from(home).join(".cache/pi-forge")),
            _ => None,
        }
    }

    fn tools_dir(&self) -> PathBuf {
        self.root.join("tools")
    }

    /// binaryen's wasm-opt as npm links it (`wasm-opt.cmd` on Windows, which Command runs
    /// only when named with its extension).
    fn wasm_opt(&self) -> PathBuf {
        let name = if cfg!(windows) {
            "wasm-opt.cmd"
        } else {
            "wasm-opt"
        };
        self.tools_dir().join("node_modules/.bin").join(name)
    }

    /// `$PI_FORGE_TOOLS_DIR`, else `$XDG_CACHE_HOME/pi-forge/tools`, else
    /// `~/.cache/pi-forge/tools`, plus `pi-1.6.0` (the e2e tests look in the same place).
    fn pi_tools_dir(&self) -> Result<PathBuf> {
        let base = match (
            env::var_os("PI_FORGE_TOOLS_DIR").filter(|v| !v.is_empty()),
            self.cache_dir(),
        ) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(cache)) => cache.join("tools"),
            _ => {
                return fail_with_hint(
                    "cannot find a cache folder for the Pi tools",
                    "set PI_FORGE_TOOLS_DIR (or HOME)",
                )
            }
        };
        Ok(base.join(PI_TOOLS_NAME))
    }
}

/// Folder name of the pinned Pi tools inside the tools cache.
const PI_TOOLS_NAME: &str = "pi-1.6.0";
/// Node 22 inside that folder.
const PI_NODE: &str = "node_modules/node/bin/node";
/// Pi's CLI inside that folder.
const PI_CLI: &str = "node_modules/@earendil-works/pi-coding-agent/dist/cli.js";

// ---------------------------------------------------------------------------------------------
// setup

#[derive(Clone, Copy, PartialEq)]
enum Setup {
    /// Only what `dist` needs.
    Wasm,
    /// Wasm tools plus the browser for the e2e tests.
    All,
}

/// Tools located by setup.
struct Tools {
    wasm_bindgen: PathBuf,
    wasm_split: PathBuf,
}

fn setup(ctx: &Ctx, scope: Setup) -> Result<Tools> {
    ensure_wasm_target(ctx)?;
    ensure_rust_src(ctx)?;
    let wasm_bindgen = ensure_wasm_bindgen(ctx)?;
    let wasm_split = ensure_wasm_split(ctx)?;
    ensure_npm_tools(ctx)?;
    if scope == Setup::All {
        ensure_chromium()?;
        ensure_pi_tools(ctx)?;
        package::ensure_build_tools(ctx, None)?;
        workflows::ensure_actionlint(&workflows::tools_cache(ctx)?)?;
        registry::ensure_verdaccio(ctx)?;
    }
    Ok(Tools {
        wasm_bindgen,
        wasm_split,
    })
}

/// `<sysroot>/lib/rustlib` of the toolchain's `rustc` (targets and the `rust-src` sources).
fn rustlib() -> Result<PathBuf> {
    let sysroot = capture(Command::new("rustc").args(["--print", "sysroot"]))?;
    Ok(Path::new(sysroot.trim()).join("lib/rustlib"))
}

/// The standard library's sources, which `cargo xtask dist` rebuilds for size ([`BUILD_STD_ARGS`]).
fn ensure_rust_src(ctx: &Ctx) -> Result {
    let src = rustlib()?.join("src/rust/library/std");
    if src.is_dir() {
        skipped("rust component rust-src is installed");
        return Ok(());
    }
    step("installing rust component rust-src (dist rebuilds std for size)");
    run(Command::new("rustup")
        .args(["component", "add", "rust-src"])
        .current_dir(&ctx.root))
    .map_err(|f| with_hint(f, "rustup component add rust-src"))
}

fn ensure_wasm_target(ctx: &Ctx) -> Result {
    ensure_target(ctx, WASM_TARGET)
}

/// Installs the Rust target `target` with rustup unless it is there.
fn ensure_target(ctx: &Ctx, target: &str) -> Result {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(&ctx.root)
        .output();
    match installed {
        Ok(out) if out.status.success() => {
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == target)
            {
                skipped(&format!("rust target {target} is installed"));
                return Ok(());
            }
            step(&format!("installing rust target {target}"));
            run(Command::new("rustup")
                .args(["target", "add", target])
                .current_dir(&ctx.root))
            .map_err(|f| with_hint(f, format!("rustup target add {target}")))
        }
        _ => {
            // No rustup (e.g. a distro toolchain): accept a sysroot that already has the target.
            let lib = rustlib()?.join(target);
            if lib.is_dir() {
                skipped(&format!("rust target {target} is in {}", lib.display()));
                Ok(())
            } else {
                fail_with_hint(
                    format!("the rust target {target} is missing and rustup is not available"),
                    format!("install rustup, then run `rustup target add {target}`"),
                )
            }
        }
    }
}

fn ensure_wasm_bindgen(ctx: &Ctx) -> Result<PathBuf> {
    let wanted = locked_version(&ctx.root.join("Cargo.lock"), "wasm-bindgen")?;
    // Any copy with the right version will do (PATH first, then $CARGO_HOME/bin), so an
    // older wasm-bindgen earlier on PATH does not trigger a reinstall on every run.
    let mut seen = Vec::new();
    for path in find_programs("wasm-bindgen") {
        let have = tool_version(&path);
        if have.as_deref() == Some(wanted.as_str()) {
            skipped(&format!("wasm-bindgen {wanted} at {}", path.display()));
            return Ok(path);
        }
        seen.push(format!(
            "{} is {}",
            path.display(),
            have.as_deref().unwrap_or("unknown")
        ));
    }
    if !seen.is_empty() {
        step(&format!(
            "Cargo.lock wants wasm-bindgen {wanted}; {}",
            seen.join(", ")
        ));
    }
    step(&format!(
        "installing wasm-bindgen-cli {wanted} (takes about 4 minutes on 2 cores)"
    ));
    // `--locked` does not resolve against this registry snapshot; see the toolchain notes.
    run(ctx
        .cargo()
        .args(["install", "wasm-bindgen-cli", "--version", &wanted]))
    .map_err(|f| {
        with_hint(
            f,
            format!("cargo install wasm-bindgen-cli --version {wanted}"),
        )
    })?;
    find_programs("wasm-bindgen")
        .into_iter()
        .find(|path| tool_version(path).as_deref() == Some(wanted.as_str()))
        .ok_or_else(|| Failure {
            message: format!("wasm-bindgen {wanted} was installed but cannot be found"),
            hint: Some("add $CARGO_HOME/bin (usually ~/.cargo/bin) to PATH".into()),
        })
}

/// The wasm-split CLI (crate `wasm_split_cli_support`, feature `build-binary`) that cuts the
/// module at the web crate's `#[lazy]` functions. 0.2.4 reads the split-point format of
/// `wasm_split_helpers` 0.2.x / `wasm_split_macros` 0.2.x (what Leptos 0.8 uses; Cargo.lock).
const WASM_SPLIT_CRATE: &str = "wasm_split_cli_support";
const WASM_SPLIT_VERSION: &str = "0.2.4";
const WASM_SPLIT_BIN: &str = "wasm-split-cli";

fn ensure_wasm_split(ctx: &Ctx) -> Result<PathBuf> {
    let helpers = locked_version(&ctx.root.join("Cargo.lock"), "wasm_split_helpers")?;
    if !helpers.starts_with("0.2.") {
        return fail_with_hint(
            format!(
                "Cargo.lock has wasm_split_helpers {helpers}; {WASM_SPLIT_CRATE} {WASM_SPLIT_VERSION} reads 0.2.x"
            ),
            "update WASM_SPLIT_VERSION in xtask/src/main.rs to the matching wasm_split_cli_support",
        );
    }
    // `cargo install --list` names the installed version: `wasm_split_cli_support v0.2.4:`.
    let listed = capture(ctx.cargo().args(["install", "--list"])).unwrap_or_default();
    let wanted = format!("{WASM_SPLIT_CRATE} v{WASM_SPLIT_VERSION}:");
    let installed = listed.lines().any(|l| l.trim() == wanted);
    if let (true, Some(path)) = (installed, find_programs(WASM_SPLIT_BIN).into_iter().next()) {
        skipped(&format!(
            "{WASM_SPLIT_BIN} {WASM_SPLIT_VERSION} at {}",
            path.display()
        ));
        return Ok(path);
    }
    step(&format!(
        "installing {WASM_SPLIT_CRATE} {WASM_SPLIT_VERSION} (the {WASM_SPLIT_BIN} binary; about 2 minutes on 2 cores)"
    ));
    run(ctx.cargo().args([
        "install",
        WASM_SPLIT_CRATE,
        "--version",
        WASM_SPLIT_VERSION,
        "--features",
        "build-binary",
    ]))
    .map_err(|f| {
        with_hint(
            f,
            format!(
                "cargo install {WASM_SPLIT_CRATE} --version {WASM_SPLIT_VERSION} --features build-binary"
            ),
        )
    })?;
    find_programs(WASM_SPLIT_BIN)
        .into_iter()
        .next()
        .ok_or_else(|| Failure {
            message: format!("{WASM_SPLIT_BIN} was installed but cannot be found"),
            hint: Some("add $CARGO_HOME/bin (usually ~/.cargo/bin) to PATH".into()),
        })
}

/// `wasm-bindgen 0.2.130` -> `0.2.130`.
fn tool_version(path: &Path) -> Option<String> {
    let out = Command::new(path).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().nth(1).map(str::to_string)
}

/// The version of `package` recorded in Cargo.lock (exactly one must be present).
fn locked_version(lock: &Path, package: &str) -> Result<String> {
    let text = fs::read_to_string(lock).map_err(|e| Failure {
        message: format!("cannot read {}: {e}", lock.display()),
        hint: Some("run `cargo generate-lockfile` in the workspace root".into()),
    })?;
    let name_line = format!("name = \"{package}\"");
    let mut versions = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name_line {
            if let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = \""))
                .and_then(|l| l.strip_suffix('"'))
            {
                versions.push(v.to_string());
            }
        }
    }
    match versions.as_slice() {
        [one] => Ok(one.clone()),
        [] => fail_with_hint(
            format!("{} has no `{package}` package", lock.display()),
            "run `cargo update -p forge-web` (web/Cargo.toml pins wasm-bindgen)",
        ),
        many => fail_with_hint(
            format!(
                "{} has several `{package}` versions: {many:?}",
                lock.display()
            ),
            "keep exactly one wasm-bindgen version in the lockfile",
        ),
    }
}

fn ensure_npm_tools(ctx: &Ctx) -> Result {
    npm_ci_stamped(
        &ctx.tools_dir(),
        &ctx.tools_dir(),
        &ctx.wasm_opt(),
        "tools/",
    )
}

/// Node 22, Pi 1.6.0 and TypeScript, pinned by tools/pi/package-lock.json and installed into a
/// cache folder outside the checkout (fresh clones on this machine reuse it).
fn ensure_pi_tools(ctx: &Ctx) -> Result {
    let dir = ctx.pi_tools_dir()?;
    create_dir(&dir)?;
    for name in ["package.json", "package-lock.json"] {
        let from = ctx.root.join("tools/pi").join(name);
        let bytes = fs::read(&from).map_err(|e| io_failure("read", &from, e))?;
        let to = dir.join(name);
        if fs::read(&to).ok().as_deref() != Some(bytes.as_slice()) {
            write_file(&to, &bytes)?;
        }
    }
    npm_ci_stamped(&dir, &dir, &dir.join(PI_CLI), "Node 22 + Pi 1.6.0")?;
    let node = dir.join(PI_NODE);
    let version = capture(Command::new(&node).arg("--version"))?;
    if !version.starts_with("v22.") {
        return fail(format!(
            "{} is {}, not Node 22",
            node.display(),
            version.trim()
        ));
    }
    Ok(())
}

/// `npm ci` in `install_dir` (holding package.json and package-lock.json copied from
/// `source_dir`) unless its stamp matches those files and `check` exists.
fn npm_ci_stamped(source_dir: &Path, install_dir: &Path, check: &Path, label: &str) -> Result {
    let stamp_path = install_dir.join("node_modules/.pi-forge-stamp");
    let mut inputs = Vec::new();
    for name in ["package.json", "package-lock.json"] {
        let path = source_dir.join(name);
        inputs.extend(fs::read(&path).map_err(|e| Failure {
            message: format!("cannot read {}: {e}", path.display()),
            hint: None,
        })?);
    }
    let stamp = format!("{:016x}\n", fnv1a(&inputs));
    let current = fs::read_to_string(&stamp_path).unwrap_or_default();
    if current == stamp && check.is_file() {
        skipped(&format!(
            "{label} in {} matches its package-lock.json",
            install_dir.display()
        ));
        return Ok(());
    }
    step(&format!(
        "installing pinned npm packages for {label} in {} (npm ci)",
        install_dir.display()
    ));
    run(npm()
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(install_dir))
    .map_err(|f| {
        with_hint(
            f,
            "install Node.js and npm (Debian: `apt-get install -y nodejs npm`), then rerun `cargo xtask setup`",
        )
    })?;
    if !check.is_file() {
        return fail(format!(
            "npm ci finished but {} is missing",
            check.display()
        ));
    }
    write_file(&stamp_path, stamp.as_bytes())
}

/// Type-checks the Pi extension against Pi 1.6.0's own `.d.ts` (strict TypeScript).
fn check_extension(ctx: &Ctx) -> Result {
    let tools = ctx.pi_tools_dir()?;
    let dir = ctx.root.join("target/pi-extension-check");
    remove_dir_if_exists(&dir)?;
    create_dir(&dir)?;
    for (from, name) in [
        ("assets/pi-extension/index.ts", "index.ts"),
        ("assets/pi-extension/package.json", "package.json"),
        ("assets/pi-child/bridge.ts", "child-bridge.ts"),
    ] {
        let from = ctx.root.join(from);
        let bytes = fs::read(&from).map_err(|e| io_failure("read", &from, e))?;
        write_file(&dir.join(name), &bytes)?;
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(tools.join("node_modules"), dir.join("node_modules"))
        .map_err(|e| io_failure("link", &dir.join("node_modules"), e))?;
    write_file(
        &dir.join("tsconfig.json"),
        br#"{"compilerOptions":{"strict":true,"noEmit":true,"target":"ES2023","lib":["ES2023"],"module":"NodeNext","moduleResolution":"NodeNext","skipLibCheck":true,"types":["node"],"noUnusedLocals":true,"noUnusedParameters":true},"files":["index.ts","child-bridge.ts"]}"#,
    )?;
    run(Command::new(tools.join(PI_NODE))
        .arg(tools.join("node_modules/typescript/bin/tsc"))
        .args(["-p", "tsconfig.json"])
        .current_dir(&dir))
    .map_err(|f| {
        with_hint(
            f,
            "fix assets/pi-extension/index.ts or assets/pi-child/bridge.ts (the errors name lines of their copies, index.ts and child-bridge.ts, in target/pi-extension-check)",
        )
    })
}

fn ensure_chromium() -> Result {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        skipped(&format!("{CHROMIUM} and {CHROMEDRIVER} are installed"));
        return Ok(());
    }
    if !is_root() {
        return fail_with_hint(
            format!(
                "{} missing and installing needs root",
                missing.join(" and ")
            ),
            format!("run: sudo sh -c '{APT_INSTALL}'"),
        );
    }
    step(&format!(
        "installing chromium and chromium-driver ({} missing)",
        missing.join(", ")
    ));
    let hint = format!("run as root: {APT_INSTALL}");
    run(Command::new("apt-get").arg("update")).map_err(|f| with_hint(f, hint.clone()))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "chromium", "chromium-driver"])
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .map_err(|f| with_hint(f, hint.clone()))?;
    for path in [CHROMIUM, CHROMEDRIVER] {
        if !Path::new(path).exists() {
            return fail_with_hint(format!("{path} is still missing after apt-get"), hint);
        }
    }
    Ok(())
}

fn is_root() -> bool {
    // std has no getuid; /proc is enough on Linux, `id -u` elsewhere.
    if let Ok(status) = fs::read_to_string("/proc/self/status") {
        if let Some(line) = status.lines().find(|l| l.starts_with("Uid:")) {
            return line.split_whitespace().nth(1) == Some("0");
        }
    }
    capture(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

// ---------------------------------------------------------------------------------------------
// dist

/// Builds the web bundle into `assets/dist` and compresses it; returns its files with raw,
/// brotli and gzip sizes.
fn dist(ctx: &Ctx) -> Result<Vec<DistFile>> {
    let tools = setup(ctx, Setup::Wasm)?;
    let started = Instant::now();

    let panic_messages = env::var_os(PANIC_MESSAGES_ENV).is_some_and(|v| v == "1");
    step(if panic_messages {
        "building forge-web for wasm32 (profile wasm-release, with panic messages)"
    } else {
        "building forge-web for wasm32 (profile wasm-release, std rebuilt for size, panics trap)"
    });
    // `cargo rustc` passes the link argument to forge-web only, so the dependencies stay cached.
    let mut build = ctx.cargo();
    build.args(["rustc", "-p", "forge-web", "--bin", "forge_web"]);
    if !panic_messages {
        build
            .env("RUSTC_BOOTSTRAP", "1")
            .env(WASM_RUSTFLAGS_ENV, SIZE_RUSTFLAGS.join(" "))
            .args(BUILD_STD_ARGS);
    }
    build.args([
        "--target",
        WASM_TARGET,
        "--profile",
        "wasm-release",
        "--",
        "-C",
        "link-arg=--emit-relocs",
    ]);
    run(&mut build)?;
    let wasm = target_dir(ctx)?
        .join(WASM_TARGET)
        .join("wasm-release/forge_web.wasm");
    if !wasm.is_file() {
        return fail(format!("cargo build did not produce {}", wasm.display()));
    }

    let assets = ctx.root.join("assets");
    let dist = assets.join("dist");
    let staging_guard = StagingDir(assets.join("dist.partial"));
    let staging = staging_guard.0.as_path();
    remove_dir_if_exists(staging)?;
    create_dir(staging)?;

    // The module is cut at the `#[lazy]` functions (web/src/split.rs) before wasm-bindgen:
    // `split/forge_web.wasm` is the main module, `split_*.wasm` / `chunk_*.wasm` the parts
    // fetched on demand, `__wasm_split.js` their loader (which the main module's JS imports on
    // the first lazy load).
    step("splitting the module at its #[lazy] functions (wasm-split-cli)");
    let split_dir = wasm.with_file_name("split");
    remove_dir_if_exists(&split_dir)?;
    create_dir(&split_dir)?;
    run(Command::new(&tools.wasm_split)
        .arg(&wasm)
        .arg(&split_dir)
        .args(["--target", "web", "--out-name", "forge_web"]))?;
    let mut chunks = Vec::new();
    for path in read_dir(&split_dir)? {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "forge_web.wasm" {
            continue;
        }
        if name == SPLIT_LOADER {
            let js = fs::read_to_string(&path).map_err(|e| io_failure("read", &path, e))?;
            write_file(&staging.join(&name), split_loader(&js)?.as_bytes())?;
        } else if name.ends_with(".wasm") {
            let to = staging.join(&name);
            fs::copy(&path, &to).map_err(|e| io_failure("copy", &path, e))?;
            chunks.push(to);
        }
    }

    step("generating JS bindings (wasm-bindgen --target web --keep-lld-exports)");
    // The chunks link against the main module's exports (table, memory, stack pointer):
    // `--keep-lld-exports` keeps them.
    run(Command::new(&tools.wasm_bindgen)
        .args([
            "--target",
            "web",
            "--no-typescript",
            "--keep-lld-exports",
            "--out-dir",
        ])
        .arg(staging)
        .arg(split_dir.join("forge_web.wasm")))?;

    step("optimizing wasm (wasm-opt -Oz --low-memory-unused, binaryen from tools/)");
    let mut modules = vec![staging.join("forge_web_bg.wasm")];
    modules.extend(chunks);
    let opt_cache = OptCache::open(ctx);
    let cached = std::sync::atomic::AtomicUsize::new(0);
    // Two at a time (each run is mostly the tool's start-up; the machines have 2 cores).
    let optimize = |module: &PathBuf| -> Result {
        let input = fs::read(module).map_err(|e| io_failure("read", module, e))?;
        if opt_cache.take(&input, module) {
            cached.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(());
        }
        let optimized = module.with_extension("opt.wasm");
        run(Command::new(ctx.wasm_opt())
            .args(WASM_OPT_ARGS)
            .args(WASM_OPT_FEATURES)
            .arg(module)
            .arg("-o")
            .arg(&optimized))
        .map_err(|f| with_hint(f, "run `cargo xtask setup` to reinstall tools/node_modules"))?;
        opt_cache.keep(&input, &optimized);
        rename(&optimized, module)
    };
    let (even, odd): (Vec<_>, Vec<_>) = modules.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let lane = |list: Vec<(usize, &PathBuf)>| list.into_iter().try_for_each(|(_, m)| optimize(m));
    std::thread::scope(|scope| {
        let other = scope.spawn(|| lane(odd));
        let first = lane(even);
        let second = other
            .join()
            .unwrap_or_else(|_| fail("wasm-opt worker panicked"));
        first.and(second)
    })?;
    println!(
        "wasm-opt: {} of {} modules were optimised before (taken from {})",
        cached.into_inner(),
        modules.len(),
        opt_cache
            .dir
            .as_ref()
            .map_or_else(|| "nowhere".to_string(), |d| d.display().to_string())
    );

    step("packing the shared chunks into one file (chunks.bin, fetched once, on the first lazy load)");
    pack_chunks(staging)?;
    let main_js = staging.join("forge_web.js");
    let js = fs::read_to_string(&main_js).map_err(|e| io_failure("read", &main_js, e))?;
    write_file(&main_js, defer_split_loader(&js)?.as_bytes())?;

    for name in STATIC_ASSETS {
        let from = assets.join(name);
        if name.ends_with(".css") {
            // The page carries the stylesheet inline on every load: comments and indentation go.
            let css = fs::read_to_string(&from).map_err(|e| io_failure("read", &from, e))?;
            write_file(&staging.join(name), minify_css(&css).as_bytes())?;
            continue;
        }
        fs::copy(&from, staging.join(name)).map_err(|e| Failure {
            message: format!("cannot copy {}: {e}", from.display()),
            hint: None,
        })?;
    }

    step("compressing the bundle once (brotli quality 11 and gzip -9, tools/compress.mjs)");
    let mut to_compress: Vec<PathBuf> = read_dir(staging)?
        .into_iter()
        .filter(|p| {
            p.extension()
                .is_some_and(|e| COMPRESSED_EXTENSIONS.iter().any(|c| e == *c))
        })
        .collect();
    to_compress.sort();
    let listing = capture(
        Command::new("node")
            .arg(ctx.tools_dir().join("compress.mjs"))
            .args(&to_compress),
    )
    .map_err(|f| with_hint(f, "install Node.js (see docs/development.md)"))?;
    let compressed = parse_compressed(&listing)?;

    // Swap the finished bundle in, so a failed build never leaves a half-written dist.
    remove_dir_if_exists(&dist)?;
    rename(staging, &dist)?;

    let mut files: Vec<DistFile> = Vec::new();
    let mut entries: Vec<_> = read_dir(&dist)?;
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".br") || name.ends_with(".gz") {
            continue;
        }
        let raw = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let (br, gz) = compressed
            .iter()
            .find(|c| c.0 == name)
            .map_or((None, None), |c| (Some(c.2), Some(c.3)));
        files.push(DistFile { name, raw, br, gz });
    }
    println!("assets/dist ({:.1}s):", started.elapsed().as_secs_f64());
    for f in &files {
        let size = |v: Option<u64>| v.map_or_else(|| "-".to_string(), kib);
        println!(
            "  {:<40} {:>10} raw {:>10} br {:>10} gzip",
            f.name,
            kib(f.raw),
            size(f.br),
            size(f.gz)
        );
    }
    // What a first visit fetches: everything but the lazy parts, their shared chunks and their
    // loader, each file as brotli when built so (app.css arrives inside the page, compressed
    // with it).
    let (first, later): (Vec<&DistFile>, Vec<&DistFile>) = files.iter().partition(|f| {
        !((f.name.ends_with(".wasm") && f.name != "forge_web_bg.wasm")
            || f.name == CHUNK_PACK
            || f.name == SPLIT_LOADER)
    });
    let wire = |fs: &[&DistFile]| fs.iter().map(|f| f.br.unwrap_or(f.raw)).sum::<u64>();
    println!(
        "  first visit: {} (brotli); on demand: {} in {} files",
        kib(wire(&first)),
        kib(wire(&later)),
        later.len()
    );
    Ok(files)
}

/// `css` without comments and with every run of whitespace outside strings made one space (or
/// none, next to `{`, `}`, `;`, `,` and `>`, and at the ends). Strings are kept as they are.
fn minify_css(css: &str) -> String {
    let mut out = String::with_capacity(css.len());
    let mut chars = css.chars().peekable();
    let mut space = false;
    let tight = |c: char| matches!(c, '{' | '}' | ';' | ',' | '>');
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                space = true;
            }
            c if c.is_whitespace() => space = true,
            '"' | '\'' => {
                if space && !out.is_empty() && !out.ends_with(tight) {
                    out.push(' ');
                }
                space = false;
                out.push(c);
                while let Some(s) = chars.next() {
                    out.push(s);
                    if s == '\\' {
                        if let Some(escaped) = chars.next() {
                            out.push(escaped);
                        }
                    } else if s == c {
                        break;
                    }
                }
            }
            c => {
                if space && !out.is_empty() && !out.ends_with(tight) && !tight(c) {
                    out.push(' ');
                }
                space = false;
                out.push(c);
            }
        }
    }
    out
}

/// The loader wasm-split-cli writes next to the chunks.
const SPLIT_LOADER: &str = "__wasm_split.js";

/// `__wasm_split.js` without its static import of `./forge_web.js`. The server serves that
/// module under a content-hashed name (what boot.js imports), so the plain name would load a
/// second, uninitialized copy of the module; boot.js hands the loaded module over in
/// `window.__forgeModule` instead (read only when a chunk loads, long after boot).
fn split_loader(js: &str) -> Result<String> {
    let import = "import { initSync } from \"./forge_web.js\";";
    if !js.contains(import) {
        return fail(format!(
            "{SPLIT_LOADER} from wasm-split-cli has no `{import}` line"
        ));
    }
    Ok(js.replacen(
        import,
        "const initSync = (...args) => window.__forgeModule.initSync(...args);",
        1,
    ))
}

/// What replaces the main module JS's static imports of [`SPLIT_LOADER`]: an object whose every
/// member is a loader function that imports the loader on its first call and hands the call on.
/// Each loader function takes a callback's table index and data and answers through that
/// callback, so a loader that cannot be fetched answers `false` there, as a part that cannot be
/// fetched does (the browser logs the failed request; the next load tries again). The callback
/// is found as the loader finds it, through wasm-bindgen's `initSync` of the running module.
const DEFERRED_SPLIT_LOADER: &str = r#"// `__wasm_split.js` (the lazy parts' loader) is imported by the first lazy load, not with the app.
let __splitModule;
const __splitLoader = new Proxy({}, {
    get: (_, name) => (index, data) => {
        const load = (__splitModule ??= import("./__wasm_split.js"));
        load.then((m) => m[name](index, data), () => {
            if (__splitModule === load) __splitModule = undefined;
            initSync(undefined, undefined).__indirect_function_table.get(index)(data, false);
        });
    },
});
"#;

/// The main module's JS with its static imports of [`SPLIT_LOADER`] (one per lazy part, written
/// by wasm-bindgen) replaced by [`DEFERRED_SPLIT_LOADER`]: a first visit that opens no lazy part
/// does not fetch the loader (56 KB, 3.3 KB brotli). A JS without such imports is returned as it
/// is; one whose imports look different fails the build.
fn defer_split_loader(js: &str) -> Result<String> {
    let from = format!(" from \"./{SPLIT_LOADER}\"");
    let mut first = true;
    let mut out = String::with_capacity(js.len() + DEFERRED_SPLIT_LOADER.len());
    let unexpected = |line: &str| {
        fail(format!(
            "the main module's JS imports {SPLIT_LOADER} in an unexpected form: {}",
            line.trim_end()
        ))
    };
    for line in js.split_inclusive('\n') {
        let Some(rest) = line.trim_end().strip_suffix(from.as_str()) else {
            if line.contains(SPLIT_LOADER) && line.trim_start().starts_with("import") {
                return unexpected(line);
            }
            out.push_str(line);
            continue;
        };
        let Some(name) = rest.strip_prefix("import * as ") else {
            return unexpected(line);
        };
        if first {
            out.push_str(DEFERRED_SPLIT_LOADER);
            first = false;
        }
        out.push_str(&format!("const {name} = __splitLoader;\n"));
    }
    Ok(out)
}

/// The file holding every shared chunk (`chunk_*.wasm`) of the split module, one after another.
const CHUNK_PACK: &str = "chunks.bin";

/// Replaces the shared chunks in `staging` with [`CHUNK_PACK`] and points the loader at it.
/// wasm-split-cli writes a chunk for each set of lazy parts that share code (about a hundred,
/// most under 2 KB): fetched one by one, opening a surface meant dozens of requests; packed, it
/// is one request (compressed as a whole, which also makes it smaller) on the first lazy load,
/// and every later surface finds its shared code already there.
fn pack_chunks(staging: &Path) -> Result {
    let mut chunks: Vec<PathBuf> = read_dir(staging)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("chunk_") && n.ends_with(".wasm"))
        })
        .collect();
    if chunks.is_empty() {
        return Ok(());
    }
    chunks.sort();
    let loader = staging.join(SPLIT_LOADER);
    let js = fs::read_to_string(&loader).map_err(|e| io_failure("read", &loader, e))?;
    let mut pack = Vec::new();
    let mut parts = Vec::new();
    for chunk in &chunks {
        let bytes = fs::read(chunk).map_err(|e| io_failure("read", chunk, e))?;
        let name = chunk.file_name().unwrap().to_string_lossy().into_owned();
        parts.push((name, bytes.len()));
        pack.extend_from_slice(&bytes);
    }
    let js = pack_loader(&js, &parts)?;
    write_file(&staging.join(CHUNK_PACK), &pack)?;
    write_file(&loader, js.as_bytes())?;
    for chunk in &chunks {
        fs::remove_file(chunk).map_err(|e| io_failure("remove", chunk, e))?;
    }
    Ok(())
}

/// The loader's fetch of each chunk in `parts` (name and length, in pack order) replaced by a
/// slice of [`CHUNK_PACK`], served as a `Response` so the loader's
/// `WebAssembly.instantiateStreaming` stays as wasm-split-cli wrote it. Fails when a chunk is not
/// fetched exactly once (a wasm-split-cli whose loader looks different).
fn pack_loader(js: &str, parts: &[(String, usize)]) -> Result<String> {
    let mut out = js.to_string();
    let mut at = 0;
    for (name, len) in parts {
        let fetch = format!("fetch(new URL(\"./{name}\", import.meta.url))");
        if out.matches(&fetch).count() != 1 {
            return fail(format!(
                "{SPLIT_LOADER} from wasm-split-cli does not fetch {name} exactly once as `{fetch}`"
            ));
        }
        out = out.replacen(&fetch, &format!("__pack({at}, {len})"), 1);
        at += len;
    }
    Ok(format!(
        "// The shared chunks arrive in one file ({CHUNK_PACK}, written by `cargo xtask dist`).
let __packed;
function __pack(at, len) {{
    if (__packed === undefined) {{
        const load = fetch(new URL(\"./{CHUNK_PACK}\", import.meta.url)).then((r) => {{
            if (!r.ok) throw new Error(`{CHUNK_PACK}: HTTP ${{r.status}}`);
            return r.arrayBuffer();
        }});
        // A failed fetch is tried again by the next load.
        load.catch(() => {{ if (__packed === load) __packed = undefined; }});
        __packed = load;
    }}
    return __packed.then((b) => new Response(new Uint8Array(b, at, len), {{ headers: {{ \"Content-Type\": \"application/wasm\" }} }}));
}}
{out}"
    ))
}

/// Files `dist` compresses at build time (the server sends `<file>.br` / `<file>.gz` as they are).
const COMPRESSED_EXTENSIONS: &[&str] = &["wasm", "js", "css", "bin"];

/// One file of the bundle: raw size and the sizes of its build-time brotli and gzip variants.
struct DistFile {
    name: String,
    raw: u64,
    br: Option<u64>,
    gz: Option<u64>,
}

/// `name raw br gz` lines printed by tools/compress.mjs.
fn parse_compressed(listing: &str) -> Result<Vec<(String, u64, u64, u64)>> {
    listing
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| parts.get(i).and_then(|p| p.parse::<u64>().ok());
            match (parts.first(), num(1), num(2), num(3)) {
                (Some(name), Some(raw), Some(br), Some(gz)) if parts.len() == 4 => {
                    Ok((name.to_string(), raw, br, gz))
                }
                _ => fail(format!(
                    "tools/compress.mjs printed an unexpected line: {line:?}"
                )),
            }
        })
        .collect()
}

/// The bundle being built; removed on drop so a failed build leaves no stray folder behind
/// (after a successful build it has been renamed to `assets/dist`).
struct StagingDir(PathBuf);

impl Drop for StagingDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// Cargo's target directory (honours CARGO_TARGET_DIR and `build.target-dir`).
fn target_dir(ctx: &Ctx) -> Result<PathBuf> {
    let json = capture(
        ctx.cargo()
            .args(["metadata", "--format-version", "1", "--no-deps"]),
    )?;
    json_string_field(&json, "target_directory")
        .map(PathBuf::from)
        .ok_or_else(|| Failure {
            message: "`cargo metadata` output has no target_directory".into(),
            hint: None,
        })
}

/// The first string value of `"key":` in a JSON text (enough for cargo metadata's top level).
fn json_string_field(json: &str, key: &str) -> Option<String> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let mut out = String::new();
    let mut chars = json[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// run, ci, bench

fn run_ui(ctx: &Ctx, args: &[String]) -> Result {
    dist(ctx)?;
    let cwd = env::current_dir().map_err(|e| Failure {
        message: format!("cannot read the current directory: {e}"),
        hint: None,
    })?;
    let mut ui_args: Vec<String> = args.to_vec();
    let chose_project = args
        .iter()
        .any(|a| a == "--project" || a.starts_with("--project="));
    if !chose_project && !args.iter().any(|a| a == "--demo") && !cwd.join(".pi/forge").is_dir() {
        step(&format!(
            "{} has no .pi/forge: serving the built-in demo workspace (--demo)",
            cwd.display()
        ));
        ui_args.push("--demo".to_string());
    }
    let mut cmd = Command::new(&ctx.cargo);
    cmd.arg("run")
        .arg("--manifest-path")
        .arg(ctx.root.join("Cargo.toml"))
        .args(["-p", "pi-forge", "--bin", "pi-forge", "--", "ui"])
        .args(&ui_args)
        .current_dir(&cwd);
    run(&mut cmd)
}

/// Where `cargo xtask ci` builds: a target folder kept between runs on this machine, so a
/// fresh clone compiles only the workspace's own crates and reuses the dependencies.
struct CiCache {
    dir: PathBuf,
    /// Held for the whole run: a second run at the same time builds in its own `target/`.
    _lock: fs::File,
}

/// Above this size the default cache folder is emptied before a run (old dependency versions
/// pile up).
const CI_CACHE_LIMIT: u64 = 40 << 30;

/// The CI build cache: `$PI_FORGE_CI_TARGET_DIR` (relative to the workspace), else
/// `~/.cache/pi-forge/ci-target`. None when cargo is configured to build elsewhere than
/// `target/` (`CARGO_TARGET_DIR`, `CARGO_BUILD_TARGET_DIR`, `build.target-dir`: that folder is
/// used as it is), when `PI_FORGE_CI_TARGET_DIR=off`, while another run holds the cache, or when
/// the checkout's files cannot be stamped (see [`open_ci_cache`]).
fn ci_cache(ctx: &Ctx) -> Result<Option<CiCache>> {
    let configured = target_dir(ctx)?;
    if configured != ctx.root.join("target") {
        println!(
            "ci: building in {} (cargo's configured target folder)",
            configured.display()
        );
        return Ok(None);
    }
    let (dir, limit) = match env::var_os("PI_FORGE_CI_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(v) if v == "off" => {
            println!("ci: PI_FORGE_CI_TARGET_DIR=off: building in the checkout's target/");
            return Ok(None);
        }
        // A folder the user chose is never emptied.
        Some(v) => (ctx.root.join(v), None),
        None => match ctx.cache_dir() {
            Some(cache) => (cache.join("ci-target"), Some(CI_CACHE_LIMIT)),
            None => return Ok(None),
        },
    };
    open_ci_cache(ctx, dir, limit)
}

/// Locks the cache folder `dir` for this run (none while another run holds it), empties it when
/// it is over `limit`, and stamps the checkout's files when the cached build may not be theirs.
fn open_ci_cache(ctx: &Ctx, dir: PathBuf, limit: Option<u64>) -> Result<Option<CiCache>> {
    create_dir(&dir)?;
    let lock_path = dir.join(".pi-forge-ci.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| io_failure("open", &lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            println!(
                "ci: the build cache {} is in use by another run: building in the checkout's target/",
                dir.display()
            );
            return Ok(None);
        }
        Err(fs::TryLockError::Error(e)) => return Err(io_failure("lock", &lock_path, e)),
    }
    let stamp = dir.join(".pi-forge-ci-checkout");
    let mut size = dir_size(&dir);
    if let Some(limit) = limit.filter(|l| size > *l) {
        println!(
            "ci: the build cache {} holds {} GiB (limit {}): emptying it",
            dir.display(),
            size >> 30,
            limit >> 30
        );
        for entry in read_dir(&dir)? {
            if entry != lock_path {
                let removed = if entry.is_dir() {
                    fs::remove_dir_all(&entry)
                } else {
                    fs::remove_file(&entry)
                };
                removed.map_err(|e| io_failure("remove", &entry, e))?;
            }
        }
        size = dir_size(&dir);
    }
    // Cargo judges the workspace's own crates by file times, with paths relative to the
    // workspace: a build left by another checkout, or by another tree at this path (a reused
    // CI folder, files extracted with their old times), can be newer than these files and would
    // pass for current. So unless the last run came from this path with exactly these files,
    // the checkout's files are stamped "now" first: its crates are rebuilt, the dependencies
    // reused.
    let Some(files) = tracked_files(ctx) else {
        println!(
            "ci: cannot list the checkout's files with git: building in the checkout's target/"
        );
        return Ok(None);
    };
    let checkout = checkout_fingerprint(ctx, &files);
    if fs::read_to_string(&stamp).ok().as_deref() != Some(checkout.as_str()) {
        if let Err(failure) = touch_files(&files) {
            println!(
                "ci: {}: building in the checkout's target/",
                failure.message
            );
            return Ok(None);
        }
        write_file(&stamp, checkout.as_bytes())?;
    }
    println!(
        "ci: building in {} ({:.1} GiB cached; PI_FORGE_CI_TARGET_DIR=off builds in target/)",
        dir.display(),
        size as f64 / f64::from(1u32 << 30)
    );
    Ok(Some(CiCache { dir, _lock: lock }))
}

/// The files git tracks in the checkout, as paths under it (a file deleted from the working
/// tree is still listed); None outside a git checkout.
fn tracked_files(ctx: &Ctx) -> Option<Vec<PathBuf>> {
    let listing = Command::new("git")
        .current_dir(&ctx.root)
        .args(["ls-files", "-z"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?
        .stdout;
    let names = listing.split(|b| *b == 0).filter(|n| !n.is_empty());
    Some(
        names
            .map(|n| ctx.root.join(String::from_utf8_lossy(n).as_ref()))
            .collect(),
    )
}

/// Whether `path` is a regular file (not a symbolic link, not missing).
fn is_regular_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// The checkout's path and a fingerprint of the names and contents of `files` as they are in
/// the working tree (read here: git's own status trusts file times and sizes).
fn checkout_fingerprint(ctx: &Ctx, files: &[PathBuf]) -> String {
    let mut hash = fnv1a(b"pi-forge checkout");
    for path in files {
        hash = fnv1a_from(hash, path.as_os_str().as_encoded_bytes());
        let content = is_regular_file(path).then(|| fs::read(path).ok()).flatten();
        hash = match content {
            Some(bytes) => fnv1a_from(fnv1a_from(hash, b"\x01"), &bytes),
            None => fnv1a_from(hash, b"\x02"),
        };
    }
    format!("{}\n{hash:016x}\n", ctx.root.display())
}

/// Bytes under a folder (symbolic links not followed; unreadable entries count as 0).
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Sets the modification time of each of `files` to now (symbolic links and missing files are
/// left alone).
fn touch_files(files: &[PathBuf]) -> Result {
    let now = std::time::SystemTime::now();
    for path in files.iter().filter(|p| is_regular_file(p)) {
        // Setting a file's times needs its owner, not write access.
        fs::File::open(path)
            .and_then(|file| file.set_modified(now))
            .map_err(|e| io_failure("set the time of", path, e))?;
    }
    Ok(())
}

fn ci(ctx: &Ctx) -> Result {
    let started = Instant::now();
    let cache = ci_cache(ctx)?;
    let cached;
    let ctx = match &cache {
        Some(cache) => {
            cached = Ctx {
                target_dir: Some(cache.dir.clone()),
                ..ctx.clone()
            };
            &cached
        }
        None => ctx,
    };
    let mut done: Vec<(String, f64)> = Vec::new();
    let mut stage = |name: &str, f: &mut dyn FnMut() -> Result| -> Result {
        println!("\n==> ci: {name}");
        let t = Instant::now();
        f().map_err(|failure| Failure {
            message: format!("ci step `{name}` failed: {}", failure.message),
            hint: failure.hint,
        })?;
        done.push((name.to_string(), t.elapsed().as_secs_f64()));
        Ok(())
    };

    stage("setup", &mut || setup(ctx, Setup::All).map(drop))?;
    stage("fmt", &mut || {
        run(ctx.cargo().args(["fmt", "--all", "--", "--check"]))
            .map_err(|f| with_hint(f, "run `cargo fmt --all` and commit the result"))
    })?;
    // Host builds and tests select the default members (no `--workspace`): that flag would
    // add forge-web and compile Leptos for the host, and the e2e tests build pi-forge with
    // the same selection so cargo's feature unification matches (see e2e/tests/support).
    stage("pi extension type check (tsc, Pi 1.6.0 .d.ts)", &mut || {
        check_extension(ctx)
    })?;
    stage("lint release workflow (actionlint)", &mut || {
        workflows::lint_workflows(&ctx.root, &workflows::tools_cache(ctx)?)
    })?;
    stage("clippy", &mut || {
        run(ctx.cargo().args([
            "clippy",
            "--locked",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    stage("clippy web (wasm32)", &mut || {
        run(ctx.cargo().args([
            "clippy",
            "--locked",
            "-p",
            "forge-web",
            "--target",
            WASM_TARGET,
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    stage("core builds for wasm32", &mut || {
        run(ctx.cargo().args([
            "build",
            "--locked",
            "-p",
            "forge-core",
            "--target",
            WASM_TARGET,
        ]))
        .map_err(|f| {
            with_hint(
                f,
                "forge-core must stay wasm-compatible: no tokio, filesystem-only code behind cfg",
            )
        })
    })?;
    // The browser builds forge-core without its `regex` feature (see docs/architecture.md).
    stage("core unit tests without regex (browser build)", &mut || {
        run(ctx.cargo().args([
            "test",
            "--locked",
            "-q",
            "-p",
            "forge-core",
            "--no-default-features",
            "--lib",
        ]))
    })?;
    // Broken intra-doc links and private links fail the build (both feature sets of core).
    stage("rustdoc (warnings are errors)", &mut || {
        run(ctx.cargo().env("RUSTDOCFLAGS", "-D warnings").args([
            "doc",
            "--locked",
            "--no-deps",
            "-q",
        ]))?;
        run(ctx.cargo().env("RUSTDOCFLAGS", "-D warnings").args([
            "doc",
            "--locked",
            "--no-deps",
            "-q",
            "-p",
            "forge-core",
            "--no-default-features",
        ]))
    })?;
    stage("dist", &mut || dist(ctx).map(drop))?;
    // The npm packages of this machine's platform, which the package tests install from a
    // local registry (e2e/tests/pi_package.rs), and the same packages as the next patch
    // version, which its upgrade test publishes for `pi update`.
    stage(
        "package (npm tarballs)",
        &mut || match package::host_platform() {
            Some(platform) => {
                package::build(ctx, platform, None)?;
                let next = package::next_patch(&package::workspace_version(&ctx.root)?)?;
                package::build(ctx, platform, Some(&next))
            }
            None => fail("pi-forge builds no npm platform package on this machine"),
        },
    )?;
    let nextest = ctx
        .cargo()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if nextest {
        // nextest does not run doctests; run them first so the test summary comes last.
        stage("doctests", &mut || {
            run(ctx.cargo().args(["test", "--locked", "--doc"]))
        })?;
        stage("tests (nextest)", &mut || {
            run(ctx.cargo().args(["nextest", "run", "--locked"]))
        })?;
    } else {
        stage("tests", &mut || run(ctx.cargo().args(["test", "--locked"])))?;
    }

    let mut summary = String::new();
    for (name, secs) in &done {
        let _ = write!(summary, "{name} {secs:.0}s, ");
    }
    println!(
        "\nxtask ci: OK: all {} steps passed in {:.0}s ({})",
        done.len(),
        started.elapsed().as_secs_f64(),
        summary.trim_end_matches(", ")
    );
    Ok(())
}

fn bench(ctx: &Ctx, args: &[String]) -> Result {
    // `--only web` measures the web app alone; any other `--only` goes to `pi-forge bench`.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let run_core = only != Some("web");
    let run_web = only.is_none() || only == Some("web");

    let core = if run_core {
        Some(core_bench(ctx, args)?)
    } else {
        None
    };
    let web = if run_web { Some(web_bench(ctx)?) } else { None };
    let mut parts = Vec::new();
    if let Some(core) = core {
        parts.push(format!("\"server\": {}", core.trim()));
    }
    if let Some(web) = web {
        parts.push(format!("\"web\": {web}"));
    }
    println!("{{{}}}", parts.join(", "));
    Ok(())
}

/// `pi-forge bench --json` (release build): workspace load, compile, fingerprints, server.
fn core_bench(ctx: &Ctx, args: &[String]) -> Result<String> {
    step("running pi-forge bench --json (release build)");
    let out = ctx
        .cargo()
        .args([
            "run",
            "--release",
            "-p",
            "pi-forge",
            "--bin",
            "pi-forge",
            "--",
            "bench",
            "--json",
        ])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure {
            message: format!("cannot start {}: {e}", ctx.cargo),
            hint: None,
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return fail_with_hint(
            format!("`pi-forge bench --json` failed ({})", out.status),
            "see the output above; `cargo run -p pi-forge -- bench --help` lists its options",
        );
    }
    if !stdout.trim_start().starts_with(['{', '[']) {
        return fail("`pi-forge bench --json` did not print JSON");
    }
    Ok(stdout)
}

/// The web app: release bundle sizes (raw, and the build-time brotli and gzip variants the
/// server sends), the first visit / warm reload in headless Chromium (e2e/examples/navbench.rs),
/// the Payloads surface (payloadbench.rs) and the template editor's keystroke (tplbench.rs).
fn web_bench(ctx: &Ctx) -> Result<String> {
    let files = dist(ctx)?;
    setup(ctx, Setup::All)?;
    let mut sizes = Vec::new();
    for f in &files {
        let opt = |v: Option<u64>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
        sizes.push(format!(
            "\"{}\": {{\"raw\": {}, \"br\": {}, \"gzip\": {}}}",
            f.name,
            f.raw,
            opt(f.br),
            opt(f.gz)
        ));
    }
    step("building the release pi-forge binary (it embeds the bundle just built)");
    run(ctx
        .cargo()
        .args(["build", "--release", "-p", "pi-forge", "--bin", "pi-forge"]))?;
    let binary = target_dir(ctx)?.join("release/pi-forge");
    step(
        "timing first visits (fresh Chromium profile each) and warm reloads to 50 rendered rows (release pi-forge)",
    );
    let nav = bench_example(ctx, &binary, "navbench", "the navigation benchmark")?;
    step("timing the Payloads surface on a 5 MB capture of 2,000 messages (release pi-forge)");
    let payloads = bench_example(ctx, &binary, "payloadbench", "the payload benchmark")?;
    step(
        "timing keystroke to highlight in the template editor on a 100 KB block (release pi-forge)",
    );
    let template = bench_example(ctx, &binary, "tplbench", "the template editor benchmark")?;
    Ok(format!(
        "{{\"bundleBytes\": {{{}}}, \"navigation\": {nav}, \"payloads\": {payloads}, \"templateEditor\": {template}}}",
        sizes.join(", ")
    ))
}

/// Runs one browser benchmark (an example of forge-e2e) against `binary`; returns its JSON line.
fn bench_example(ctx: &Ctx, binary: &Path, example: &str, what: &str) -> Result<String> {
    let out = ctx
        .cargo()
        .env("PI_FORGE_BIN", binary)
        .args(["run", "--release", "-p", "forge-e2e", "--example", example])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure {
            message: format!("cannot start {}: {e}", ctx.cargo),
            hint: None,
        })?;
    let json = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !json.starts_with('{') {
        return fail_with_hint(
            format!("{what} failed ({})", out.status),
            "see the output above; it needs chromium (`cargo xtask setup`)",
        );
    }
    Ok(json)
}

// ---------------------------------------------------------------------------------------------
// helpers

fn step(message: &str) {
    println!("xtask: {message}");
}

fn skipped(message: &str) {
    println!("xtask: ok, skipped: {message}");
}

fn with_hint(mut failure: Failure, hint: impl Into<String>) -> Failure {
    failure.hint = Some(hint.into());
    failure
}

/// `cmd` as a shell line, with the environment it sets first (`NAME=value program args`).
fn display(cmd: &Command) -> String {
    let mut text = String::new();
    for (name, value) in cmd.get_envs() {
        if let Some(value) = value {
            text.push_str(&name.to_string_lossy());
            text.push('=');
            text.push_str(&shell_word(value));
            text.push(' ');
        }
    }
    text.push_str(&cmd.get_program().to_string_lossy());
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&shell_word(arg));
    }
    text
}

fn shell_word(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Runs a command with inherited stdio; a non-zero exit is a failure naming the command.
fn run(cmd: &mut Command) -> Result {
    let shown = display(cmd);
    println!("$ {shown}");
    let _ = std::io::stdout().flush();
    match cmd.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => fail(format!("`{shown}` failed ({status})")),
        Err(e) => fail(format!("cannot start `{shown}`: {e}")),
    }
}

/// Runs a command and returns its stdout; stderr is passed through.
fn capture(cmd: &mut Command) -> Result<String> {
    let shown = display(cmd);
    match cmd.stderr(Stdio::inherit()).output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => fail(format!("`{shown}` failed ({})", out.status)),
        Err(e) => fail(format!("cannot start `{shown}`: {e}")),
    }
}

/// npm: `npm.cmd` on Windows (Command finds only `.exe` files by a bare name).
fn npm() -> Command {
    Command::new(if cfg!(windows) { "npm.cmd" } else { "npm" })
}

/// Every copy of a program on PATH, then in $CARGO_HOME/bin (cargo install's destination);
/// `name` without the platform's executable suffix (`.exe` on Windows).
fn find_programs(name: &str) -> Vec<PathBuf> {
    let name = format!("{name}{}", env::consts::EXE_SUFFIX);
    let mut dirs: Vec<PathBuf> = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    if let Some(home) = env::var_os("HOME").or_else(|| env::var_os("USERPROFILE")) {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for path in dirs.into_iter().map(|d| d.join(&name)) {
        let canonical = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if path.is_file()
            && !found
                .iter()
                .any(|f| fs::canonicalize(f).ok() == Some(canonical.clone()))
        {
            found.push(path);
        }
    }
    found
}

/// 64-bit FNV-1a: a stable fingerprint for stamp files (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(0xcbf2_9ce4_8422_2325, bytes)
}

/// FNV-1a continued from `hash` (another start value gives an independent second hash).
fn fnv1a_from(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// wasm-opt's results by input, in `~/.cache/pi-forge/wasm-opt`: a module whose bytes, the
/// arguments and the installed binaryen (`tools/node_modules/binaryen/package.json`) were seen
/// before is not optimised again (wasm-opt is deterministic; it is most of `dist` when only CSS
/// changed, and of every CI run's `dist`). Entries unused for 30 days are removed. The cache
/// only saves time: when it cannot be read or written, wasm-opt runs as without it.
struct OptCache {
    dir: Option<PathBuf>,
    /// Fingerprint of the arguments and the binaryen version, part of every key.
    tool: Vec<u8>,
}

impl OptCache {
    fn open(ctx: &Ctx) -> OptCache {
        let off = OptCache {
            dir: None,
            tool: Vec::new(),
        };
        let Some(dir) = ctx.cache_dir().map(|c| c.join("wasm-opt")) else {
            return off;
        };
        let binaryen = ctx.tools_dir().join("node_modules/binaryen/package.json");
        let read = fs::read(&binaryen).and_then(|tool| fs::create_dir_all(&dir).map(|()| tool));
        let mut tool = match read {
            Ok(tool) => tool,
            Err(e) => {
                println!("wasm-opt cache off ({e}): every module is optimised");
                return off;
            }
        };
        for arg in WASM_OPT_ARGS.iter().chain(WASM_OPT_FEATURES) {
            tool.extend_from_slice(arg.as_bytes());
            tool.push(0);
        }
        let month = std::time::Duration::from_secs(30 * 24 * 3600);
        for entry in read_dir(&dir).unwrap_or_default() {
            let unused = fs::metadata(&entry)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > month);
            if unused {
                let _ = fs::remove_file(&entry);
            }
        }
        OptCache {
            dir: Some(dir),
            tool,
        }
    }

    /// The cache file for an input module: two 64-bit FNV-1a hashes (from different start
    /// values, against accidental collisions; nothing here is adversarial) and the length.
    fn entry(&self, input: &[u8]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let first = fnv1a_from(fnv1a(&self.tool), input);
        let second = fnv1a_from(fnv1a_from(0x6c62_272e_07bb_0142, &self.tool), input);
        Some(dir.join(format!("{first:016x}{second:016x}-{}.wasm", input.len())))
    }

    /// Writes the cached result for `input` to `to`; false when there is none (or it could not
    /// be read).
    fn take(&self, input: &[u8], to: &Path) -> bool {
        let Some(entry) = self.entry(input) else {
            return false;
        };
        if fs::copy(&entry, to).is_err() {
            return false;
        }
        // Marks the entry as used (see the 30 days above).
        if let Ok(file) = fs::File::open(&entry) {
            let _ = file.set_modified(std::time::SystemTime::now());
        }
        true
    }

    /// Stores wasm-opt's result for `input` (written aside under the module's own name, then
    /// renamed into place); a failure is only reported.
    fn keep(&self, input: &[u8], optimized: &Path) {
        let Some(entry) = self.entry(input) else {
            return;
        };
        let name = optimized.file_name().map(OsStr::to_string_lossy);
        let partial = entry.with_extension(format!(
            "partial-{}-{}",
            std::process::id(),
            name.unwrap_or_default()
        ));
        if let Err(e) = fs::copy(optimized, &partial).and_then(|_| fs::rename(&partial, &entry)) {
            let _ = fs::remove_file(&partial);
            println!("wasm-opt cache: cannot keep {}: {e}", optimized.display());
        }
    }
}

fn io_failure(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure {
        message: format!("cannot {what} {}: {e}", path.display()),
        hint: None,
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result {
    fs::write(path, bytes).map_err(|e| io_failure("write", path, e))
}

fn create_dir(path: &Path) -> Result {
    fs::create_dir_all(path).map_err(|e| io_failure("create", path, e))
}

fn remove_dir_if_exists(path: &Path) -> Result {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_failure("remove", path, e)),
        _ => Ok(()),
    }
}

fn rename(from: &Path, to: &Path) -> Result {
    fs::rename(from, to).map_err(|e| io_failure("rename", from, e))
}

fn read_dir(path: &Path) -> Result<Vec<PathBuf>> {
    fs::read_dir(path)
        .and_then(|entries| entries.map(|e| e.map(|e| e.path())).collect())
        .map_err(|e| io_failure("list", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn css_loses_comments_and_spacing_but_not_strings() {
        let css = "/* head */\n.a > .b,\n.c  .d {\n  content: \"x  /* y */\";\n  margin: 0 auto; /* c */\n}\n\n@media (max-width: 700px) {\n  .e:hover { font: 12px 'A  B', serif; }\n}\n.f::after { content: \"\\\"  \"; }\n";
        assert_eq!(
            minify_css(css),
            ".a>.b,.c .d{content: \"x  /* y */\";margin: 0 auto;}@media (max-width: 700px){.e:hover{font: 12px 'A  B',serif;}}.f::after{content: \"\\\"  \";}"
        );
    }

    /// Sets a file's modification time to 2001 and returns that time.
    fn age(path: &Path) -> std::time::SystemTime {
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(old).unwrap();
        old
    }

    fn modified(path: &Path) -> std::time::SystemTime {
        fs::metadata(path).unwrap().modified().unwrap()
    }

    #[test]
    fn ci_cache_is_locked_per_run_and_stamps_files_it_may_not_have_built() {
        let base = env::temp_dir().join(format!("xtask-ci-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let (checkout, other, cache) = (base.join("a"), base.join("b"), base.join("cache"));
        let git = |root: &Path, args: &[&str]| {
            let status = Command::new("git")
                .current_dir(root)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .status()
                .unwrap();
            assert!(status.success());
        };
        for root in [&checkout, &other] {
            fs::create_dir_all(root).unwrap();
            fs::write(root.join("lib.rs"), "// tracked").unwrap();
            fs::write(root.join("untracked.rs"), "// not tracked").unwrap();
            git(root, &["init", "-q"]);
            git(root, &["add", "lib.rs"]);
            git(root, &["commit", "-q", "-m", "start"]);
        }
        let ctx = |root: &Path| Ctx {
            root: root.to_path_buf(),
            cargo: "cargo".into(),
            target_dir: None,
        };
        let open = |root: &Path, limit| open_ci_cache(&ctx(root), cache.clone(), limit).unwrap();
        let lib = checkout.join("lib.rs");

        // First run from checkout a: its tracked files are stamped now, untracked ones are not.
        let old = age(&lib);
        age(&checkout.join("untracked.rs"));
        let held = open(&checkout, None).unwrap();
        assert_eq!(held.dir, cache);
        assert!(modified(&lib) > old);
        assert_eq!(modified(&checkout.join("untracked.rs")), old);
        // A second run while the first holds the lock builds without the cache.
        assert!(open(&other, None).is_none());
        drop(held);

        // The same checkout with the same files: cargo's file times are trusted.
        let old = age(&lib);
        drop(open(&checkout, None).unwrap());
        assert_eq!(modified(&lib), old);

        // The same path with other contents (as a reused CI folder has): stamped again.
        fs::write(&lib, "// changed").unwrap();
        let old = age(&lib);
        drop(open(&checkout, None).unwrap());
        assert!(modified(&lib) > old);

        // Another checkout: its files are stamped.
        let old = age(&other.join("lib.rs"));
        drop(open(&other, None).unwrap());
        assert!(modified(&other.join("lib.rs")) > old);
        assert!(fs::read_to_string(cache.join(".pi-forge-ci-checkout"))
            .unwrap()
            .starts_with(&format!("{}\n", other.display())));

        // Over the limit, everything but the lock goes; under it, nothing.
        fs::write(cache.join("artifact"), vec![0u8; 3000]).unwrap();
        drop(open(&other, Some(1_000_000)).unwrap());
        assert!(cache.join("artifact").is_file());
        drop(open(&other, Some(2000)).unwrap());
        let mut left: Vec<_> = read_dir(&cache).unwrap();
        left.sort();
        assert_eq!(
            left,
            [
                cache.join(".pi-forge-ci-checkout"),
                cache.join(".pi-forge-ci.lock")
            ]
        );

        // Outside a git checkout there is nothing to fingerprint: no cache.
        let plain = base.join("plain");
        fs::create_dir_all(&plain).unwrap();
        assert!(open(&plain, None).is_none());
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn wasm_opt_results_are_kept_by_input_and_tool() {
        let dir = env::temp_dir().join(format!("xtask-opt-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let cache = |tool: &[u8]| OptCache {
            dir: Some(dir.clone()),
            tool: tool.to_vec(),
        };
        let (a, b) = (cache(b"binaryen 1"), cache(b"binaryen 2"));
        let out = dir.join("out.wasm");
        assert!(!a.take(b"module", &out), "nothing kept yet");
        fs::write(dir.join("optimized.wasm"), b"small").unwrap();
        a.keep(b"module", &dir.join("optimized.wasm"));
        assert!(a.take(b"module", &out));
        assert_eq!(fs::read(&out).unwrap(), b"small");
        assert!(!a.take(b"module2", &out), "another input");
        assert!(!b.take(b"module", &out), "another tool or arguments");
        // Nothing is left aside.
        let mut names: Vec<_> = read_dir(&dir).unwrap();
        names.retain(|p| p.to_string_lossy().contains("partial"));
        assert_eq!(names, Vec::<PathBuf>::new());
        assert_ne!(a.entry(b"module"), a.entry(b"moduld"));
        assert!(OptCache {
            dir: None,
            tool: Vec::new()
        }
        .entry(b"module")
        .is_none());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn locked_version_reads_the_package_entry() {
        let dir = env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let lock = dir.join("Cargo.lock");
        fs::write(
            &lock,
            r#"
[[package]]
name = "wasm-bindgen-macro"
version = "0.2.130"

[[package]]
name = "wasm-bindgen"
version = "0.2.130"
source = "registry+https://github.com/rust-lang/crates.io-index"
"#,
        )
        .unwrap();
        assert_eq!(
            locked_version(&lock, "wasm-bindgen").ok().as_deref(),
            Some("0.2.130")
        );
        assert!(locked_version(&lock, "leptos").is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_string_field_unescapes() {
        let json = r#"{"packages":[],"target_directory":"/a \"b\"\\c","version":1}"#;
        assert_eq!(
            json_string_field(json, "target_directory").as_deref(),
            Some(r#"/a "b"\c"#)
        );
        assert_eq!(json_string_field(json, "missing"), None);
    }

    #[test]
    fn a_shown_command_names_the_environment_it_sets() {
        let mut cmd = Command::new("cargo");
        cmd.env("RUSTC_BOOTSTRAP", "1")
            .env("FLAGS", "-Za -Zb")
            .env_remove("GONE")
            .args(["rustc", "-Zbuild-std"]);
        assert_eq!(
            display(&cmd),
            "FLAGS='-Za -Zb' RUSTC_BOOTSTRAP=1 cargo rustc -Zbuild-std"
        );
    }

    #[test]
    fn the_loader_takes_the_shared_chunks_from_the_pack() {
        let js = "const a = fetch(new URL(\"./chunk_1.wasm\", import.meta.url));\nconst b = fetch(new URL(\"./chunk_2.wasm\", import.meta.url));\nconst c = fetch(new URL(\"./split_x.wasm\", import.meta.url));\n";
        let parts = [
            ("chunk_1.wasm".to_string(), 10),
            ("chunk_2.wasm".to_string(), 7),
        ];
        let out = pack_loader(js, &parts).unwrap();
        assert!(out.ends_with("const a = __pack(0, 10);\nconst b = __pack(10, 7);\nconst c = fetch(new URL(\"./split_x.wasm\", import.meta.url));\n"), "{out}");
        assert!(
            out.contains("fetch(new URL(\"./chunks.bin\", import.meta.url))"),
            "{out}"
        );
        let missing = pack_loader(js, &[("chunk_3.wasm".to_string(), 1)]).unwrap_err();
        assert_eq!(
            missing.message,
            "__wasm_split.js from wasm-split-cli does not fetch chunk_3.wasm exactly once as `fetch(new URL(\"./chunk_3.wasm\", import.meta.url))`"
        );
    }

    #[test]
    fn the_main_module_imports_the_split_loader_on_first_use() {
        let js = "import * as import1 from \"./__wasm_split.js\"\nimport * as import2 from \"./__wasm_split.js\"\n\nlet wasm;\n";
        let out = defer_split_loader(js).unwrap();
        assert_eq!(
            out,
            format!(
                "{DEFERRED_SPLIT_LOADER}const import1 = __splitLoader;\nconst import2 = __splitLoader;\n\nlet wasm;\n"
            )
        );
        assert_eq!(defer_split_loader("let wasm;\n").unwrap(), "let wasm;\n");
        let odd = defer_split_loader("import { x } from \"./__wasm_split.js\"\n").unwrap_err();
        assert_eq!(
            odd.message,
            "the main module's JS imports __wasm_split.js in an unexpected form: import { x } from \"./__wasm_split.js\""
        );
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word(OsStr::new("--target")), "--target");
        assert_eq!(shell_word(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_word(OsStr::new("it's")), r"'it'\''s'");
    }
}
