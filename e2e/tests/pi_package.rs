//! The npm packages `cargo xtask package` builds, installed the way Pi users install them.
//!
//! Each test starts a local npm registry (verdaccio, pinned in `tools/registry/`, installed by
//! `cargo xtask setup`; no uplinks, so nothing comes from or goes to the public registry) on
//! 127.0.0.1, publishes the tarballs named in `<target dir>/package/manifest.json` (platform
//! packages first), and runs the real Pi 1.6.0, npm and npx against it with a scratch `HOME` and
//! `PI_CODING_AGENT_DIR`, `npm_config_registry` pointing at it, and a `PATH` of the pinned Node 22
//! plus `/usr/bin:/bin` with no cargo, rustc or pi-forge on it ([`Workspace::from_registry`]).
//! Nothing here is skipped: without `manifest.json` the tests fail with the command that builds
//! it (`cargo xtask package`; `cargo xtask ci` runs it before the tests).

mod pi;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pi::{assert_request_is_the_preview, poll, runtime_clock_iso, Pi, Workspace};
use serde_json::{json, Value};

const LEAN: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "lean",
  "mode": "replace",
  "tools": { "allow": ["read", "grep"] },
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are LEAN. Last: {{ runtime.lastUserMessage }}" },
    { "id": "note", "kind": "block", "role": "user", "content": "Context note for {{ runtime.activeModel }} at {{ runtime.populatedAt }}." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

/// The glibc the Linux x64 binary may require at most (Debian 10, RHEL 8, Ubuntu 18.10).
const MAX_GLIBC: (u32, u32) = (2, 28);

// ---------------------------------------------------------------------------------------------
// The packages `cargo xtask package` wrote

/// `<target dir>/package/` (or `PI_FORGE_PACKAGE_DIR`) and its `manifest.json`.
struct Package {
    dir: PathBuf,
    version: String,
    target: String,
    /// `(package name, tarball)`, platform packages first (the order they are published in).
    tarballs: Vec<(String, PathBuf)>,
}

impl Package {
    fn find() -> Package {
        Package::read(Package::default_dir())
    }

    /// The test package of the next patch version beside this one: `<package dir>/<x.y.z+1>/`,
    /// which `cargo xtask package --version <x.y.z+1>` writes (`cargo xtask ci` builds it).
    fn next(&self) -> Package {
        let parts: Vec<u64> = self
            .version
            .split('.')
            .map(|n| n.parse().expect("a release version x.y.z"))
            .collect();
        let next = format!("{}.{}.{}", parts[0], parts[1], parts[2] + 1);
        let dir = self.dir.join(&next);
        assert!(
            dir.join("manifest.json").is_file(),
            "{} is missing: run `cargo xtask package --version {next}` (the upgrade test publishes it; `cargo xtask ci` builds it)",
            dir.join("manifest.json").display()
        );
        let package = Package::read(dir);
        assert_eq!(package.version, next);
        assert_eq!(package.target, self.target);
        package
    }

    fn default_dir() -> PathBuf {
        match std::env::var_os("PI_FORGE_PACKAGE_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            // This test binary is `<target dir>/<profile>/deps/pi_package-<hash>`; the packages
            // are beside the profile folders, where `cargo xtask package` (and the package
            // step of `cargo xtask ci`, in its own target dir) writes them.
            None => std::env::current_exe()
                .expect("the test binary's path")
                .ancestors()
                .nth(3)
                .expect("the test binary sits in <target dir>/<profile>/deps")
                .join("package"),
        }
    }

    fn read(dir: PathBuf) -> Package {
        let manifest_path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&manifest_path).unwrap_or_else(|e| {
            panic!(
                "{} is missing ({e}): run `cargo xtask package` first (it builds the npm packages these tests install; `cargo xtask ci` runs it), or set PI_FORGE_PACKAGE_DIR to a folder it wrote",
                manifest_path.display()
            )
        });
        let manifest: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", manifest_path.display()));
        let mut tarballs: Vec<(String, PathBuf)> = manifest["tarballs"]
            .as_object()
            .unwrap_or_else(|| panic!("{} has no tarballs: {text}", manifest_path.display()))
            .iter()
            .map(|(name, file)| (name.clone(), dir.join(file.as_str().unwrap())))
            .collect();
        tarballs.sort_by_key(|(name, _)| name == "pi-forge");
        for (name, path) in &tarballs {
            assert!(
                path.is_file(),
                "{} names {} for {name}, which is missing: run `cargo xtask package`",
                manifest_path.display(),
                path.display()
            );
        }
        let package = Package {
            version: manifest["version"].as_str().unwrap().to_string(),
            target: manifest["target"].as_str().unwrap().to_string(),
            dir,
            tarballs,
        };
        // A package built from an older checkout would test old code: its extension must be
        // this checkout's.
        let packaged = std::fs::read(package.folder("pi-forge").join("extension/index.ts"))
            .expect("the pi-forge folder holds extension/index.ts");
        let source = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/pi-extension/index.ts"),
        )
        .expect("assets/pi-extension/index.ts");
        assert!(
            packaged == source,
            "{} holds another extension than assets/pi-extension/index.ts: run `cargo xtask package` again",
            package.dir.display()
        );
        package
    }

    /// The platform package of this machine: `@pi-forge/cli-linux-x64` on Linux x64.
    fn platform_package(&self) -> &str {
        let names: Vec<&str> = self
            .tarballs
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| name.starts_with("@pi-forge/cli-"))
            .collect();
        assert_eq!(names.len(), 1, "one platform package: {names:?}");
        names[0]
    }

    /// The folder `cargo xtask package` packed `name` from.
    fn folder(&self, name: &str) -> PathBuf {
        let short = name.strip_prefix("@pi-forge/").unwrap_or(name);
        self.dir.join("npm").join(short)
    }

    /// The binary in the platform package's folder.
    fn binary(&self) -> PathBuf {
        self.folder(self.platform_package()).join("bin/pi-forge")
    }

    /// What `--version` of the binary at `path` prints.
    fn version_line(&self, path: &Path) -> String {
        format!(
            "pi-forge {} ({}) {}\n",
            self.version,
            self.target,
            path.display()
        )
    }
}

/// These tests are for the Linux x64 package (the one `cargo xtask ci` builds here).
fn linux_x64_package() -> Package {
    let package = Package::find();
    assert_eq!(
        (std::env::consts::OS, std::env::consts::ARCH),
        ("linux", "x86_64"),
        "the package tests run on Linux x64"
    );
    assert_eq!(package.target, "x86_64-unknown-linux-musl");
    assert_eq!(package.platform_package(), "@pi-forge/cli-linux-x64");
    assert_eq!(package.version, env!("CARGO_PKG_VERSION"));
    package
}

// ---------------------------------------------------------------------------------------------
// The local registry

/// verdaccio on 127.0.0.1 with the packages published; its process group is killed on drop.
struct Registry {
    url: String,
    authority: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// The npmrc holding the publishing user's token.
    npmrc: PathBuf,
}

/// PATH for npm outside a workspace: the pinned Node 22, then the system's npm.
fn node_path() -> std::ffi::OsString {
    let node_bin = pi::pi_tools().join("node_modules/node/bin");
    std::env::join_paths([node_bin, PathBuf::from("/usr/bin"), PathBuf::from("/bin")]).unwrap()
}

impl Registry {
    fn start(package: &Package) -> Registry {
        let started = Instant::now();
        let tools = pi::pi_tools();
        let cache = tools.parent().expect("the tools cache");
        let cli = cache.join("verdaccio-6.8.0/node_modules/verdaccio/bin/verdaccio");
        assert!(
            cli.is_file(),
            "verdaccio 6.8.0 is not installed at {}: run `cargo xtask setup` (it installs tools/registry with npm ci)",
            cli.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let authority = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yaml");
        // No uplinks: a package that was not published here is a 404, never a download.
        std::fs::write(
            &config,
            format!(
                "storage: {storage}\n\
                 auth:\n  htpasswd:\n    file: {htpasswd}\n\
                 uplinks: {{}}\n\
                 packages:\n  '**':\n    access: $all\n    publish: $authenticated\n    unpublish: $authenticated\n\
                 web:\n  enable: false\n\
                 log: {{ type: stdout, format: pretty, level: warn }}\n",
                storage = dir.path().join("storage").display(),
                htpasswd = dir.path().join("htpasswd").display(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("verdaccio.log")).unwrap();
        let mut cmd = Command::new(tools.join("node_modules/node/bin/node"));
        cmd.arg(&cli)
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg(&authority)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt as _;
            cmd.process_group(0);
        }
        let child = cmd.spawn().expect("start verdaccio");
        let npmrc = dir.path().join("publish.npmrc");
        let mut registry = Registry {
            url: format!("http://{authority}/"),
            authority,
            child: Some(child),
            dir,
            npmrc,
        };
        let up = poll(Duration::from_secs(30), || {
            if let Some(Ok(Some(status))) = registry.child.as_mut().map(Child::try_wait) {
                panic!("verdaccio exited ({status}): {}", registry.log());
            }
            std::net::TcpStream::connect(&registry.authority)
                .ok()
                .and_then(|_| (registry.get("/-/ping").0 == 200).then_some(()))
        });
        assert!(
            up.is_some(),
            "verdaccio did not answer within 30 s: {}",
            registry.log()
        );
        registry.log_in();
        registry.publish(package);
        eprintln!(
            "registry {} with {} packages in {:.1} s",
            registry.url,
            package.tarballs.len(),
            started.elapsed().as_secs_f64()
        );
        registry
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("verdaccio.log")).unwrap_or_default()
    }

    fn get(&self, path: &str) -> (u16, Value) {
        pi::http(&self.authority, "", "GET", path, "")
    }

    /// A user through the registry's CouchDB route; its token goes to [`Registry::npmrc`].
    fn log_in(&self) {
        let (status, answer) = pi::http(
            &self.authority,
            "",
            "PUT",
            "/-/user/org.couchdb.user:forge",
            r#"{"name":"forge","password":"forge-e2e-password"}"#,
        );
        assert_eq!(status, 201, "{answer}\n{}", self.log());
        let token = answer["token"].as_str().expect("a token").to_string();
        std::fs::write(
            &self.npmrc,
            format!(
                "registry={url}\n//{authority}/:_authToken={token}\n",
                url = self.url,
                authority = self.authority
            ),
        )
        .unwrap();
    }

    /// `npm publish` of every tarball of `package` (platform packages first, so `pi-forge`'s
    /// pins exist when it is published); each becomes the `latest` version.
    fn publish(&self, package: &Package) {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        for (name, tarball) in &package.tarballs {
            let out = Command::new("npm")
                .arg("publish")
                .arg(tarball)
                .arg("--userconfig")
                .arg(&self.npmrc)
                .env("PATH", node_path())
                .env("HOME", &home)
                .env("npm_config_update_notifier", "false")
                .env_remove("npm_config_registry")
                .current_dir(self.dir.path())
                .output()
                .expect("run npm publish (npm from /usr/bin, run by the pinned Node 22)");
            assert!(
                out.status.success(),
                "npm publish {} failed: {}\n{}",
                tarball.display(),
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
            let (status, packument) = self.get(&format!("/{}", name.replace('/', "%2f")));
            assert_eq!(status, 200, "{name}: {packument}");
            assert_eq!(packument["dist-tags"]["latest"], json!(package.version));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            pi::kill_group(child);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// The notifications Pi showed so far.
fn notes(pi: &Pi) -> Vec<String> {
    pi.seen
        .iter()
        .filter(|e| e["method"] == "notify")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_ok(what: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A packaged workspace with Preset lean, installing from `registry`.
fn lean_workspace(package: &Package, registry: &Registry) -> Workspace {
    Workspace::from_registry(
        &[(".pi/forge/prompt-stacks/lean.json", LEAN)],
        &registry.url,
        &package.binary(),
    )
}

/// `pi install npm:pi-forge` (Pi's own CLI) with `vars`; Pi's last line says it is installed.
fn pi_install(ws: &Workspace, vars: &[(&str, &str)]) {
    let out = ws.pi_cli(&["install", "npm:pi-forge"], vars);
    assert_ok("pi install npm:pi-forge", &out);
    assert_eq!(
        stdout(&out).lines().last(),
        Some("Installed npm:pi-forge"),
        "{}",
        stdout(&out)
    );
    let settings: Value =
        serde_json::from_slice(&std::fs::read(ws.agent().join("settings.json")).unwrap()).unwrap();
    assert_eq!(settings, json!({"packages": ["npm:pi-forge"]}));
}

/// The platform package's binary inside an npm install's `node_modules`: it must be byte for
/// byte the packaged binary.
fn installed_binary(package: &Package, node_modules: &Path) -> PathBuf {
    let bin = node_modules.join("@pi-forge/cli-linux-x64/bin/pi-forge");
    let installed = std::fs::read(&bin)
        .unwrap_or_else(|e| panic!("npm did not install {}: {e}", bin.display()));
    assert!(
        installed == std::fs::read(package.binary()).unwrap(),
        "{} is not the packaged binary {}",
        bin.display(),
        package.binary().display()
    );
    std::fs::canonicalize(bin).unwrap()
}

/// The editor the extension started runs `bin`.
fn assert_editor_runs(ws: &Workspace, bin: &Path) {
    let pid = ws.editor_pid().expect("the editor's pid");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the editor's executable");
    assert_eq!(exe, bin);
}

/// `/forge ui` answers the editor's address and the editor runs `bin`; the address.
fn forge_ui_runs(ws: &Workspace, pi: &mut Pi, bin: &Path) -> String {
    let note = pi.command("/forge ui");
    let (authority, _) = ws.editor().expect("the extension started the editor");
    assert_eq!(
        note,
        format!("pi-forge editor: http://{authority}/ (opened in your browser)")
    );
    assert_editor_runs(ws, bin);
    authority
}

/// With Preset lean active: the prompt `text` reaches the fake model (its newest request)
/// exactly as `pi-forge preview --runtime <live snapshot>` (the workspace's binary) compiles it:
/// the context note, the session's `history` (role, text), then `text`.
fn a_lean_prompt_is_sent_as_preview_compiles(
    ws: &Workspace,
    pi: &mut Pi,
    history: &[(&str, &str)],
    text: &str,
) {
    let before = ws.model.bodies().len();
    let settled = pi.prompt(text);
    assert_eq!(settled["aborted"], false, "{:?}", notes(pi));
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), before + 1, "one request to the model");
    let sent = &bodies[before];

    let (_, runtime) = ws.api("GET", "/api/runtime", "");
    let compiled = &ws.preview("project:lean", &runtime, "runtime.json");
    assert_eq!(
        compiled["systemPrompt"],
        format!("You are LEAN. Last: {text}")
    );
    let received = assert_request_is_the_preview(sent, compiled);
    let note = format!(
        "Context note for fake/fake-1 at {}.",
        runtime_clock_iso(&runtime)
    );
    let expected: Vec<(String, String)> = std::iter::once(("user", note.as_str()))
        .chain(history.iter().copied())
        .chain([("user", text)])
        .map(|(role, text)| (role.to_string(), text.to_string()))
        .collect();
    assert_eq!(received, expected);
    assert_eq!(pi::tool_names(sent), ["grep", "read"]);
    assert_eq!(compiled["selectedTools"], json!(["read", "grep"]));
}

/// `/forge status` names the Preset, both versions (`package`'s) and the npm package's binary.
fn assert_status(pi: &mut Pi, authority: &str, package: &Package, bin: &Path) {
    assert_eq!(
        pi.command("/forge status"),
        format!(
            "pi-forge: server http://{authority} · Preset project:lean · profile none · extension {v}, server {v} · binary {bin} (npm package @pi-forge/cli-linux-x64)",
            v = package.version,
            bin = bin.display()
        )
    );
}

/// With the extension loaded and connected: `/forge ui` answers the editor's address, a Preset
/// activated through the API (the browser's Activate) reaches the fake model exactly as
/// preview compiles it, and `/forge status` says where the binary was found.
fn a_preset_reaches_the_model_as_preview_shows(
    ws: &Workspace,
    pi: &mut Pi,
    package: &Package,
    bin: &Path,
) {
    let authority = forge_ui_runs(ws, pi, bin);
    let (status, body) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(
        (status, &body),
        (200, &json!({"ok": true, "activeId": "project:lean"}))
    );
    let entry = pi.wait("the stack-state entry", |e| e["type"] == "entry_appended");
    assert_eq!(
        entry["entry"]["data"],
        json!({"activeStackId": "project:lean"})
    );
    a_lean_prompt_is_sent_as_preview_compiles(ws, pi, &[], "hello there");
    assert_status(pi, &authority, package, bin);
}

/// Every path under `dir`.
fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        found.push(entry.path());
        found.extend(walkdir(&entry.path()));
    }
    found
}

/// The pi-forge processes of this workspace: those whose program lies in its scratch folder
/// (an installed package's binary; " (deleted)" once removed) or that serve its project.
fn forge_processes(ws: &Workspace) -> Vec<u32> {
    let root = ws.root.path().display().to_string();
    let project = ws.project().display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let exe = std::fs::read_link(entry.path().join("exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let program = args.first().map(String::as_str).unwrap_or_default();
        let serves_project = program.ends_with("pi-forge") && args.contains(&project);
        if (exe.starts_with(&root) && exe.contains("pi-forge")) || serves_project {
            found.push(pid);
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Tests

/// `pi install npm:pi-forge` from the registry, then Pi (offline) loads the installed package:
/// the editor runs the installed binary and a Preset reaches the model exactly as preview shows.
#[test]
fn pi_install_npm_pi_forge_runs_the_packaged_binary_and_preset() {
    let package = linux_x64_package();
    let registry = Registry::start(&package);
    let mut ws = lean_workspace(&package, &registry);
    pi_install(&ws, &[]);
    let bin = installed_binary(&package, &ws.agent().join("npm/node_modules"));
    ws.use_binary(&bin);
    let out = ws.command(&bin).arg("--version").output().unwrap();
    assert_ok("pi-forge --version", &out);
    assert_eq!(stdout(&out), package.version_line(&bin));

    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    a_preset_reaches_the_model_as_preview_shows(&ws, &mut pi, &package, &bin);
}

/// `pi -e npm:pi-forge`: Pi installs the package for this run only (into its temp folder, not
/// the settings) and it works the same.
#[test]
fn pi_e_npm_pi_forge_loads_the_package_for_one_run() {
    let package = linux_x64_package();
    let registry = Registry::start(&package);
    let mut ws = lean_workspace(&package, &registry);
    let mut pi = ws.pi_online(&["--no-session", "-e", "npm:pi-forge"], &[]);
    pi.connected();
    // Pi's temporary install: <agent>/tmp/extensions/npm/<hash>/node_modules.
    let temp = ws.agent().join("tmp/extensions/npm");
    let installs: Vec<PathBuf> = std::fs::read_dir(&temp)
        .unwrap_or_else(|e| panic!("Pi made no temporary install in {}: {e}", temp.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(installs.len(), 1, "{installs:?}");
    let bin = installed_binary(&package, &installs[0].join("node_modules"));
    ws.use_binary(&bin);
    assert!(
        !ws.agent().join("settings.json").exists() && !ws.agent().join("npm").exists(),
        "-e installs nothing permanently"
    );
    a_preset_reaches_the_model_as_preview_shows(&ws, &mut pi, &package, &bin);
}

/// `npx pi-forge --version` in an empty folder: npx fetches pi-forge and its platform package
/// from the registry and the launcher runs the binary.
#[test]
fn npx_pi_forge_prints_the_version_target_and_path() {
    let package = linux_x64_package();
    let registry = Registry::start(&package);
    let ws = Workspace::from_registry(&[], &registry.url, &package.binary());
    let empty = ws.root.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = ws
        .command("npx")
        .args(["--yes", "pi-forge", "--version"])
        .current_dir(&empty)
        .output()
        .expect("run npx");
    assert_ok("npx pi-forge --version", &out);
    let line = stdout(&out);
    let prefix = format!("pi-forge {} ({}) ", package.version, package.target);
    let path = PathBuf::from(
        line.strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{line:?} does not start with {prefix:?}"))
            .strip_suffix('\n')
            .unwrap(),
    );
    // npx's cache in the scratch HOME: ~/.npm/_npx/<hash>/node_modules/….
    let npx = std::fs::canonicalize(ws.root.path().join("home/.npm/_npx")).unwrap();
    let rest = path
        .strip_prefix(&npx)
        .unwrap_or_else(|_| panic!("{} is not in {}", path.display(), npx.display()));
    let node_modules = npx
        .join(rest.components().next().unwrap())
        .join("node_modules");
    assert_eq!(installed_binary(&package, &node_modules), path);
    assert_eq!(line, package.version_line(&path));
}

/// `npm install --ignore-scripts pi-forge` into a fresh prefix gives a working
/// `node_modules/.bin/pi-forge`, and no package has an install-time script: not in the folders
/// `npm pack` packs (checked with `npm pack --dry-run --json`), not in the registry's metadata,
/// not in what npm installed.
#[test]
fn npm_install_ignore_scripts_works_and_no_package_has_install_scripts() {
    let package = linux_x64_package();
    let registry = Registry::start(&package);
    let ws = Workspace::from_registry(&[], &registry.url, &package.binary());
    let prefix = ws.root.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    let out = ws
        .command("npm")
        .args(["install", "--ignore-scripts", "--prefix"])
        .arg(&prefix)
        .arg("pi-forge")
        .output()
        .expect("run npm install");
    assert_ok("npm install --ignore-scripts pi-forge", &out);
    let bin = installed_binary(&package, &prefix.join("node_modules"));
    let out = ws
        .command(prefix.join("node_modules/.bin/pi-forge"))
        .arg("--version")
        .output()
        .unwrap();
    assert_ok("node_modules/.bin/pi-forge --version", &out);
    assert_eq!(stdout(&out), package.version_line(&bin));

    const INSTALL_SCRIPTS: &[&str] = &["preinstall", "install", "postinstall"];
    let no_install_scripts = |what: &str, manifest: &Value| {
        for script in INSTALL_SCRIPTS {
            assert_eq!(
                manifest["scripts"][script],
                Value::Null,
                "{what} has a {script} script"
            );
        }
    };
    // What npm pack packs from each folder: exactly these files (no binding.gyp, which would
    // make npm add `node-gyp rebuild` as the install script), and package.json's scripts.
    let expected_files: &[(&str, &[&str])] = &[
        (
            "pi-forge",
            &[
                "LICENSE",
                "README.md",
                "bin/pi-forge.js",
                "extension/index.ts",
                "package.json",
            ],
        ),
        (
            "@pi-forge/cli-linux-x64",
            &["LICENSE", "bin/pi-forge", "package.json"],
        ),
    ];
    for (name, files) in expected_files {
        let folder = package.folder(name);
        let out = ws
            .command("npm")
            .args(["pack", "--dry-run", "--json"])
            .current_dir(&folder)
            .output()
            .expect("run npm pack");
        assert_ok(
            &format!("npm pack --dry-run --json in {}", folder.display()),
            &out,
        );
        let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(listing[0]["name"], json!(name));
        assert_eq!(listing[0]["version"], json!(package.version));
        let packed: Vec<&str> = listing[0]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(packed, *files, "{name}");
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(folder.join("package.json")).unwrap()).unwrap();
        no_install_scripts(&format!("{}/package.json", folder.display()), &manifest);

        let (status, packument) = registry.get(&format!("/{}", name.replace('/', "%2f")));
        assert_eq!(status, 200);
        no_install_scripts(
            &format!("the registry's {name}"),
            &packument["versions"][&package.version],
        );
        assert_eq!(
            packument["versions"][&package.version]["hasInstallScript"],
            Value::Null
        );
        let installed = prefix.join("node_modules").join(name).join("package.json");
        let installed: Value = serde_json::from_slice(&std::fs::read(installed).unwrap()).unwrap();
        no_install_scripts(&format!("the installed {name}"), &installed);
    }
    let lock = std::fs::read_to_string(prefix.join("package-lock.json")).unwrap();
    assert!(!lock.contains("hasInstallScript"), "{lock}");
}

/// The upgrade and the removal. `pi update npm:pi-forge` installs the next version published
/// to the registry (the test package `cargo xtask package --version` built): the running
/// editor of the old version stops by itself (its binary was replaced), the next `/forge ui`
/// in the same Pi session runs the new binary, and exactly one editor runs; the Preset the
/// session recorded still reaches the model as preview compiles it. `pi remove npm:pi-forge`
/// (after Pi quit; the editor outlives it) stops that editor too: no pi-forge process, no
/// state file, no package left, the project's `.pi/forge/` untouched.
#[test]
fn pi_update_runs_the_new_binary_and_pi_remove_leaves_no_process() {
    let package = linux_x64_package();
    let next = package.next();
    let registry = Registry::start(&package);
    let mut ws = lean_workspace(&package, &registry);
    pi_install(&ws, &[]);
    let node_modules = ws.agent().join("npm/node_modules");
    let bin = installed_binary(&package, &node_modules);
    ws.use_binary(&bin);
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    a_preset_reaches_the_model_as_preview_shows(&ws, &mut pi, &package, &bin);
    let old = ws.editor_pid().expect("the editor's pid");
    assert_eq!(forge_processes(&ws), [old]);

    registry.publish(&next);
    let out = ws.pi_cli(&["update", "npm:pi-forge"], &[]);
    assert_ok("pi update npm:pi-forge", &out);
    let update = stdout(&out);
    assert_eq!(
        update.lines().rev().take(2).collect::<Vec<_>>(),
        [
            format!("  npm:pi-forge {} -> {}", package.version, next.version).as_str(),
            "Updated 1 package:"
        ],
        "{update}"
    );
    assert_eq!(installed_binary(&next, &node_modules), bin, "the same path");
    let out = ws.command(&bin).arg("--version").output().unwrap();
    assert_ok("pi-forge --version", &out);
    assert_eq!(stdout(&out), next.version_line(&bin));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(node_modules.join("pi-forge/package.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["version"], json!(next.version));

    // The old editor notices its binary was replaced (it checks every 2 s) and stops.
    let stopped = poll(Duration::from_secs(10), || {
        (!forge_processes(&ws).contains(&old)).then_some(())
    });
    assert!(
        stopped.is_some(),
        "the editor of version {} still runs 10 s after pi update: {:?}",
        package.version,
        forge_processes(&ws)
    );
    assert_eq!(ws.editor(), None, "the old editor removed its state file");
    // The session heard it at once.
    let told = pi.wait("the stopped editor's notice", |e| e["method"] == "notify");
    assert_eq!(
        told["message"],
        "pi-forge: the editor server stopped because its binary was updated or removed (`pi update`, `pi remove`, a rebuild), so this session is disconnected: /forge ui starts the installed one, and a Preset recorded here refuses prompts until it connects again."
    );

    let authority = forge_ui_runs(&ws, &mut pi, &bin);
    let new = ws.editor_pid().expect("the new editor's pid");
    assert_ne!(new, old);
    assert_eq!(forge_processes(&ws), [new], "one editor runs");
    let (status, meta) = ws.api("GET", "/api/meta", "");
    assert_eq!((status, &meta["version"]), (200, &json!(next.version)));
    // The session's stack-state entry came with the new hello: Preset lean is still active.
    a_lean_prompt_is_sent_as_preview_compiles(
        &ws,
        &mut pi,
        &[("user", "hello there"), ("assistant", "ok from fake")],
        "after the update",
    );
    assert_status(&mut pi, &authority, &next, &bin);

    // Pi quits; the editor it started keeps running until `pi remove` takes its binary away.
    pi.quit();
    assert_eq!(forge_processes(&ws), [new], "the editor outlives Pi");
    let out = ws.pi_cli(&["remove", "npm:pi-forge"], &[]);
    assert_ok("pi remove npm:pi-forge", &out);
    assert_eq!(
        stdout(&out).lines().last(),
        Some("Removed npm:pi-forge"),
        "{}",
        stdout(&out)
    );
    let gone = poll(Duration::from_secs(10), || {
        forge_processes(&ws).is_empty().then_some(())
    });
    assert!(
        gone.is_some(),
        "pi-forge processes left 10 s after pi remove: {:?}",
        forge_processes(&ws)
    );
    let run: Vec<PathBuf> = std::fs::read_dir(ws.root.path().join("run/pi-forge"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(
        run,
        Vec::<PathBuf>::new(),
        "no state file or launch page left"
    );
    assert!(
        !node_modules.join("pi-forge").exists(),
        "pi-forge is still installed"
    );
    // npm uninstall leaves the scope's folder, empty: nothing of the platform package is left.
    assert_eq!(
        walkdir(&node_modules.join("@pi-forge")),
        Vec::<PathBuf>::new()
    );
    assert!(!bin.exists());
    let settings: Value =
        serde_json::from_slice(&std::fs::read(ws.agent().join("settings.json")).unwrap()).unwrap();
    assert_eq!(settings, json!({"packages": []}));
    assert_eq!(
        std::fs::read_to_string(ws.project().join(".pi/forge/prompt-stacks/lean.json")).unwrap(),
        LEAN
    );
}

/// A Pi session that recorded Preset `lean`, then quit; the extension is the npm package's, the
/// binary the packaged one through `PI_FORGE_BIN` (the platform package is not installed).
fn record_a_preset_session(ws: &Workspace, package: &Package) -> String {
    let sessions = ws.root.path().join("sessions").display().to_string();
    let bin = package.binary().display().to_string();
    let mut pi = ws.pi_env(&["--session-dir", &sessions], &[("PI_FORGE_BIN", &bin)]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/lean/activate", "{}");
    assert_eq!(status, 200);
    let settled = pi.prompt("first");
    assert_eq!(settled["aborted"], false, "{:?}", notes(&pi));
    pi.quit();
    let _ = ws.forge(&["ui", "stop"]);
    assert_eq!(ws.model.bodies().len(), 1);
    sessions
}

/// `pi install` with optional dependencies omitted: no platform package. Pi starts, `/forge
/// status` and `/forge ui` name the missing package and the platform, and a session that
/// recorded a Preset refuses its prompts with that reason; the model receives nothing.
#[test]
fn without_the_platform_package_forge_names_it_and_a_preset_session_fails_closed() {
    let package = linux_x64_package();
    let registry = Registry::start(&package);
    let ws = lean_workspace(&package, &registry);
    pi_install(&ws, &[("npm_config_omit", "optional")]);
    let node_modules = ws.agent().join("npm/node_modules");
    assert!(node_modules.join("pi-forge/package.json").is_file());
    assert!(
        !node_modules.join("@pi-forge").exists(),
        "npm installed a platform package despite --omit=optional"
    );

    let sessions = record_a_preset_session(&ws, &package);
    let mut pi = ws.pi(&["--session-dir", &sessions, "--continue"]);
    pi.connected();
    let reason = "no pi-forge binary for linux-x64: the package @pi-forge/cli-linux-x64 is not installed (npm leaves it out with --omit=optional or on another os/cpu). Reinstall with `pi install npm:pi-forge`, or build pi-forge from source and set PI_FORGE_BIN to the binary.";
    assert_eq!(
        notes(&pi),
        [format!("pi-forge: could not connect to the editor server: {reason} Preset project:lean is recorded in this session, so prompts are refused until it connects (/forge ui).")]
    );
    assert_eq!(pi.command("/forge status"), format!("pi-forge: {reason}"));
    assert_eq!(pi.command("/forge ui"), format!("pi-forge: {reason}"));
    pi.refused("second");
    assert_eq!(
        notes(&pi).last().unwrap(),
        &format!("pi-forge: Preset project:lean is active but the pi-forge server is not reachable, so nothing was sent. {reason}")
    );
    assert_eq!(
        ws.model.bodies().len(),
        1,
        "the model received nothing in the session without a binary"
    );
    assert!(ws.editor_pid().is_none(), "no editor was started");
}

// ---------------------------------------------------------------------------------------------
// The binary's glibc requirement

/// What an ELF file needs from the system's dynamic loader.
#[derive(Debug, Default)]
struct ElfNeeds {
    /// PT_INTERP: the dynamic loader a dynamically linked executable names.
    interp: Option<String>,
    /// DT_NEEDED: the shared libraries it links.
    needed: Vec<String>,
    /// The symbol versions it requires (`.gnu.version_r`), e.g. `GLIBC_2.28`.
    versions: Vec<String>,
}

/// Reads an ELF64 little-endian file's program headers (PT_INTERP), its dynamic section
/// (DT_NEEDED) and its version needs (SHT_GNU_verneed). Sections survive `strip`.
fn elf_needs(bytes: &[u8]) -> ElfNeeds {
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| {
        usize::try_from(u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())).unwrap()
    };
    let c_str = |at: usize| {
        let end = bytes[at..].iter().position(|&b| b == 0).unwrap() + at;
        String::from_utf8_lossy(&bytes[at..end]).into_owned()
    };
    assert_eq!(&bytes[..4], b"\x7fELF", "not an ELF file");
    assert_eq!((bytes[4], bytes[5]), (2, 1), "not ELF64 little-endian");
    let mut needs = ElfNeeds::default();
    let (phoff, phentsize, phnum) = (u64_at(0x20), usize::from(u16_at(0x36)), u16_at(0x38));
    for i in 0..usize::from(phnum) {
        let ph = phoff + i * phentsize;
        if u32_at(ph) == 3 {
            needs.interp = Some(c_str(u64_at(ph + 8)));
        }
    }
    let (shoff, shentsize, shnum) = (u64_at(0x28), usize::from(u16_at(0x3a)), u16_at(0x3c));
    let section = |i: usize| shoff + i * shentsize;
    for i in 0..usize::from(shnum) {
        let sh = section(i);
        let (kind, offset, size) = (u32_at(sh + 4), u64_at(sh + 24), u64_at(sh + 32));
        let strtab = u64_at(section(usize::try_from(u32_at(sh + 40)).unwrap()) + 24);
        match kind {
            // SHT_DYNAMIC: (tag, value) pairs; DT_NEEDED = 1 names a library in its strtab.
            6 => {
                for entry in (offset..offset + size).step_by(16) {
                    if u64_at(entry) == 1 {
                        needs.needed.push(c_str(strtab + u64_at(entry + 8)));
                    }
                }
            }
            // SHT_GNU_verneed: Verneed entries (per library), each with Vernaux entries.
            0x6fff_fffe => {
                let mut entry = offset;
                for _ in 0..u32_at(sh + 44) {
                    let count = u16_at(entry + 2);
                    let mut aux = entry + usize::try_from(u32_at(entry + 8)).unwrap();
                    for _ in 0..count {
                        let name = usize::try_from(u32_at(aux + 8)).unwrap();
                        needs.versions.push(c_str(strtab + name));
                        aux += usize::try_from(u32_at(aux + 12)).unwrap();
                    }
                    let next = usize::try_from(u32_at(entry + 12)).unwrap();
                    if next == 0 {
                        break;
                    }
                    entry += next;
                }
            }
            _ => {}
        }
    }
    needs
}

/// The highest `GLIBC_x.y[.z]` among `versions`, as numbers.
fn highest_glibc(versions: &[String]) -> Option<Vec<u32>> {
    versions
        .iter()
        .filter_map(|v| v.strip_prefix("GLIBC_"))
        .filter_map(|v| v.split('.').map(|n| n.parse().ok()).collect())
        .max()
}

/// `[2, 28]` → `2.28`.
fn dotted(version: &[u32]) -> String {
    version
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// The Linux x64 binary runs on glibc 2.28 and older: it needs no GLIBC symbol version above
/// 2.28. The shipped build is static (musl), so it needs none at all: no dynamic loader, no
/// shared library, no version need.
#[test]
fn the_linux_x64_binary_needs_no_glibc_above_2_28() {
    let package = linux_x64_package();
    // The reader finds what a dynamically linked glibc program needs (the pinned Node is one),
    // so the empty answer below means there is nothing, not that nothing was read.
    let node = pi::pi_tools().join("node_modules/node/bin/node");
    let dynamic = elf_needs(&std::fs::read(&node).unwrap());
    assert_eq!(
        dynamic.interp.as_deref(),
        Some("/lib64/ld-linux-x86-64.so.2"),
        "{dynamic:?}"
    );
    assert!(
        dynamic.needed.iter().any(|l| l == "libc.so.6"),
        "{dynamic:?}"
    );
    let node_glibc = highest_glibc(&dynamic.versions).expect("Node needs GLIBC versions");
    assert!(node_glibc >= vec![2, 17], "{dynamic:?}");

    let bin = package.binary();
    let needs = elf_needs(&std::fs::read(&bin).unwrap());
    if let Some(highest) = highest_glibc(&needs.versions) {
        assert!(
            highest <= vec![MAX_GLIBC.0, MAX_GLIBC.1],
            "{} needs GLIBC_{}, above GLIBC_{}.{}: {needs:?}",
            bin.display(),
            dotted(&highest),
            MAX_GLIBC.0,
            MAX_GLIBC.1
        );
    }
    // The shipped Linux build is static: nothing above holds because nothing is needed.
    assert_eq!(needs.interp, None, "{}: {needs:?}", bin.display());
    assert_eq!(needs.needed, Vec::<String>::new(), "{}", bin.display());
    assert_eq!(needs.versions, Vec::<String>::new(), "{}", bin.display());
    eprintln!(
        "{}: static (no PT_INTERP, no DT_NEEDED, no symbol version needs; highest GLIBC: none); the reader found in {}: interpreter {:?}, {} libraries, highest GLIBC_{}",
        bin.display(),
        node.display(),
        dynamic.interp.unwrap_or_default(),
        dynamic.needed.len(),
        dotted(&node_glibc)
    );
}
