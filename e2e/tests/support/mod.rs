//! Test support for the browser tests: the real `pi-forge` binary, chromedriver and headless
//! Chromium. Every process runs in its own process group, killed on drop, so a failing test
//! never leaves browsers behind. Nothing here sleeps for a fixed time: waits poll a condition
//! against a deadline.
#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The note under a create dialog's disabled "activate" box without a live Pi session.
pub const NO_LIVE_CREATE_NOTE: &str = "No live Pi session: the Preset is saved, not activated. Start Pi with the pi-forge extension (pi-forge pi install) to activate it.";

/// The live-session indicator's tooltip (and the disabled Activate's title) without a session.
pub const NO_LIVE_SESSION: &str =
    "No live Pi session: start Pi in this project with the pi-forge extension (pi-forge pi install).";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const SETUP_HINT: &str = "run `cargo xtask setup` to install chromium and chromium-driver";

/// How long a process may take to come up (cold Chromium on a busy 2-core machine included).
pub const STARTUP: Duration = Duration::from_secs(30);

/// How long a UI condition may take (a busy 2-core machine included).
pub const WAIT: Duration = Duration::from_secs(10);

/// The app's top bar, not the server-drawn first screen's (`#forge-first-screen`, removed when
/// the app mounts).
pub const APP_READY: &str = ".app:not(#forge-first-screen) .topbar";

/// A child process leading its own process group; drop kills the whole group.
pub struct Group {
    child: Child,
    what: &'static str,
}

impl Group {
    fn spawn(what: &'static str, cmd: &mut Command) -> Group {
        cmd.process_group(0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what} ({cmd:?}): {e}"));
        Group { child, what }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics with `context` when the process has already exited.
    fn assert_running(&mut self, context: &str) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited early ({status}); {context}", self.what);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // std has no killpg; `kill -KILL -- -PGID` reaches the leader and every descendant
        // (chromedriver's Chromium processes in particular).
        let group = format!("-{}", self.child.id());
        let killed = Command::new("kill")
            .args(["-s", "KILL", "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !killed {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Output collected from a child's pipe by a background thread.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<String>>);

impl Log {
    fn collect(pipe: impl Read + Send + 'static) -> Log {
        let log = Log::default();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = sink.0.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        log
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ sits in the workspace root")
}

/// The `pi-forge` binary, built (or found up to date) once per test process.
///
/// `CARGO_BIN_EXE_*` only exists for a package's own binaries, so this asks cargo for the
/// executable: `cargo build --bins --tests` over the default members resolves features exactly
/// like `cargo test` / `cargo xtask ci` (same packages, dev-dependencies active), so it reuses
/// their build. Building just `-p pi-forge` would compile a second variant of tokio, axum and
/// the binary (~45 s) and replace target/debug/pi-forge with it.
pub fn pi_forge_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        // `cargo xtask bench` points at the release binary it built.
        if let Some(path) = std::env::var_os("PI_FORGE_BIN") {
            return PathBuf::from(path);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace_root()).args([
            "build",
            "--bins",
            "--tests",
            "--message-format=json-render-diagnostics",
        ]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let out = cmd
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?} failed ({})", out.status);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|msg| {
                msg["reason"] == "compiler-artifact"
                    && msg["target"]["name"] == "pi-forge"
                    && msg["target"]["kind"][0] == "bin"
                    && msg["profile"]["test"] == false
            })
            .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
            .unwrap_or_else(|| panic!("{cmd:?} reported no pi-forge executable"))
    })
}

/// A running `pi-forge ui` on a free port, serving an empty project in a temp dir.
pub struct Server {
    pub url: String,
    /// `http://127.0.0.1:<port>/`
    pub base: String,
    /// The session token (for API calls from tests: header `x-pi-forge-token`).
    pub token: String,
    pub stderr: Log,
    group: Group,
    home: tempfile::TempDir,
}

impl Server {
    pub fn start(extra_args: &[&str]) -> Server {
        Server::start_with::<&str, &str>(&[], extra_args)
    }

    /// Starts `pi-forge ui` after writing `files` (paths relative to the temp home: the project
    /// is `project/` (so stacks go to `project/.pi/forge/prompt-stacks/<id>.json`) and the
    /// global directory is `global/`).
    pub fn start_with<P: AsRef<str>, T: AsRef<str>>(
        files: &[(P, T)],
        extra_args: &[&str],
    ) -> Server {
        Server::start_binary(pi_forge_binary(), files, extra_args)
    }

    /// [`Server::start_with`] with another `pi-forge` executable (the benchmark compares two).
    pub fn start_binary<P: AsRef<str>, T: AsRef<str>>(
        binary: &Path,
        files: &[(P, T)],
        extra_args: &[&str],
    ) -> Server {
        let home = tempfile::tempdir().expect("temp dir");
        let project = home.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        for (rel, text) in files {
            let path = home.path().join(rel.as_ref());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text.as_ref()).unwrap();
        }
        Server::spawn(binary, home, extra_args)
    }

    /// `pi-forge ui --restart` for the same project and home, as a user runs it: the old
    /// server stops and this one takes its place (a new token).
    pub fn restart(self) -> Server {
        let Server { home, group, .. } = self;
        let server = Server::spawn(pi_forge_binary(), home, &["--restart"]);
        drop(group);
        server
    }

    fn spawn(binary: &Path, home: tempfile::TempDir, extra_args: &[&str]) -> Server {
        let project = home.path().join("project");
        let mut cmd = Command::new(binary);
        cmd.args(["ui", "--no-open", "--port", "0", "--project"])
            .arg(&project)
            .args(extra_args)
            .env("PI_FORGE_GLOBAL_DIR", home.path().join("global"))
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut group = Group::spawn("pi-forge ui", &mut cmd);
        let stderr = Log::collect(group.child.stderr.take().unwrap());

        // The first stdout line is the URL; the reader thread keeps draining after it.
        let stdout = group.child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            if let Some(first) = lines.next() {
                let _ = tx.send(first);
            }
            lines.for_each(drop);
        });
        let url = match rx.recv_timeout(STARTUP) {
            Ok(url) => url,
            Err(_) => {
                group.assert_running(&format!("stderr:\n{}", stderr.text()));
                panic!(
                    "pi-forge ui printed no URL within {STARTUP:?}; stderr:\n{}",
                    stderr.text()
                );
            }
        };
        let (base, token) = url
            .split_once("?token=")
            .filter(|(base, token)| {
                base.starts_with("http://127.0.0.1:") && base.ends_with('/') && !token.is_empty()
            })
            .map(|(base, token)| (base.to_string(), token.to_string()))
            .unwrap_or_else(|| panic!("unexpected first stdout line of pi-forge ui: {url:?}"));
        // The URL's token is exchanged once for a cookie (303 to the clean URL); the page is then
        // served with that cookie.
        let (status, headers, _) = http_get(&base, &format!("/?token={token}"), None);
        assert_eq!(status, 303, "token exchange answered {status}:\n{headers}");
        let cookie = headers
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("set-cookie")
                    .then(|| value.trim().split(';').next().unwrap_or("").to_string())
            })
            .unwrap_or_else(|| panic!("token exchange set no cookie:\n{headers}"));
        let (status, _, body) = http_get(&base, "/", Some(&cookie));
        assert_eq!(
            status, 200,
            "GET / answered {status} (a 503 means pi-forge was built before `cargo xtask dist`):\n{body}"
        );
        Server {
            url,
            base,
            token,
            stderr,
            group,
            home,
        }
    }

    pub fn pid(&self) -> u32 {
        self.group.pid()
    }

    /// Calls the JSON API with the token header: `(status, body)`.
    pub fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        if_match: Option<&str>,
    ) -> (u16, serde_json::Value) {
        use std::io::Write as _;
        let authority = self
            .base
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix('/'))
            .expect("base URL");
        let mut stream = TcpStream::connect(authority).expect("connect to pi-forge");
        stream.set_read_timeout(Some(STARTUP)).unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let if_match = if_match.map_or(String::new(), |r| format!("If-Match: \"{r}\"\r\n"));
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nx-pi-forge-token: {}\r\n{if_match}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.token,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read response");
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("malformed HTTP response: {response:?}"));
        let (head, raw) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let raw = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(raw)
        } else {
            raw.to_string()
        };
        let json = serde_json::from_str(&raw).unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    /// A path under the temp home (`project/.pi/forge/...`, `global/...`).
    pub fn path(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }

    /// Reads a file under the temp home.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
    }

    /// Reads a file under the temp home as JSON.
    pub fn read_json(&self, rel: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(rel)).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
    }

    /// Replaces a file the way editors do (write a temp file, rename over), as an external
    /// edit the server's watcher must notice.
    pub fn write_external(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let tmp = path.with_extension("json.tmp-external");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
}

/// Chromedriver plus a headless Chromium session with a fresh profile.
pub struct Browser {
    pub client: Client,
    _driver: Group,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        Browser::start_with_args(&[]).await
    }

    /// [`Browser::start`] with more Chromium arguments (e.g. an OS colour preference).
    pub async fn start_with_args(extra: &[&str]) -> Browser {
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(Path::new(path).exists(), "{path} is missing: {SETUP_HINT}");
        }
        let profile = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let mut driver = Group::spawn(
            "chromedriver",
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .arg(format!(
                    "--log-path={}",
                    profile.path().join("chromedriver.log").display()
                ))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let deadline = Instant::now() + STARTUP;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            driver.assert_running(SETUP_HINT);
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on port {port} within {STARTUP:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let user_data_dir = profile.path().join("chromium");
        const ARGS: &[&str] = &[
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
        ];
        let args: Vec<String> = ARGS
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .chain([format!("--user-data-dir={}", user_data_dir.display())])
            .collect();
        let capabilities: Capabilities = serde_json::from_value(serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": args,
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        }))
        .unwrap();
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let mut builder = ClientBuilder::new(connector);
        builder.capabilities(capabilities);
        let webdriver = format!("http://127.0.0.1:{port}/");
        let client = match tokio::time::timeout(STARTUP, builder.connect(&webdriver)).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => panic!("cannot start headless Chromium: {e}; {SETUP_HINT}"),
            Err(_) => panic!("no Chromium session within {STARTUP:?}"),
        };
        Browser {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    /// Console messages at level SEVERE (errors, failed loads) since the last call.
    pub async fn console_errors(&self) -> Vec<String> {
        let entries = self
            .client
            .issue_cmd(BrowserLog)
            .await
            .expect("chromedriver returns the browser log (goog:loggingPrefs)");
        entries
            .as_array()
            .expect("the browser log is an array")
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Errors that the page itself recorded in `window.__forgeErrors` (see assets/boot.js).
    pub async fn page_errors(&self) -> Vec<String> {
        let value = self
            .client
            .execute(
                "return window.__forgeErrors ?? ['window.__forgeErrors is missing'];",
                vec![],
            )
            .await
            .expect("script runs");
        serde_json::from_value(value).expect("__forgeErrors is a list of strings")
    }

    /// Opens the editor and waits until the app has rendered its frame.
    pub async fn open(&self, server: &Server) {
        self.client.goto(&server.url).await.expect("page loads");
        self.wait_app().await;
    }

    /// Waits until the app has started: the page's server-drawn first screen (same markup; a
    /// click there is only remembered for the app) is gone and the app's own top bar is there.
    pub async fn wait_app(&self) {
        self.wait_css(APP_READY).await;
    }

    /// Waits (up to 10 s) for an element matching `css`.
    pub async fn wait_css(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(fantoccini::Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css} within {WAIT:?}: {e}"))
    }

    /// Runs a script (`return ...;`) and returns its value.
    pub async fn js(&self, script: &str, args: Vec<serde_json::Value>) -> serde_json::Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// The serious and critical accessibility problems axe-core (pinned in tools/package.json,
    /// installed by `cargo xtask setup`) finds in the page as it is now, one line each:
    /// `rule: help (first elements)`.
    pub async fn axe(&self) -> Vec<String> {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{} is missing ({e}): run `cargo xtask setup` (it installs tools/ with npm ci)",
                path.display()
            )
        });
        self.js(&format!("{source}\nreturn typeof axe;"), vec![])
            .await;
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, {resultTypes: ['violations']}).then(r => done(
                   r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
                     .map(v => v.id + ': ' + v.help + ' (' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ') + ')')
                 ), e => done(['axe failed: ' + e]));",
                vec![],
            )
            .await
            .unwrap_or_else(|e| panic!("axe-core did not run: {e}"));
        serde_json::from_value(found).unwrap_or_default()
    }

    /// Polls `script` (which returns a value) until it equals `want`, or panics after 10 s
    /// with the last value seen.
    pub async fn wait_js(&self, what: &str, script: &str, want: serde_json::Value) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.js(script, vec![]).await;
            if got == want {
                return;
            }
            if Instant::now() > deadline {
                panic!("{what}: waited {WAIT:?} for {want}, last value {got}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The text content of the first element matching `css` (`None` when there is none).
    pub async fn text(&self, css: &str) -> Option<String> {
        let v = self
            .js(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                vec![serde_json::json!(css)],
            )
            .await;
        v.as_str().map(str::to_string)
    }

    /// Waits until the text of `css` contains `needle`.
    pub async fn wait_text(&self, css: &str, needle: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.text(css).await;
            if got.as_deref().is_some_and(|t| t.contains(needle)) {
                return;
            }
            if Instant::now() > deadline {
                panic!("waited {WAIT:?} for {css} to contain {needle:?}; it is {got:?}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Clicks the first element matching `css` (waiting for it).
    pub async fn click(&self, css: &str) {
        let el = self.wait_css(css).await;
        el.click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
    }

    /// Clicks the first element matching `css` whose text contains `text`.
    pub async fn click_text(&self, css: &str, text: &str) {
        let script = "const [css, text] = arguments; for (const e of document.querySelectorAll(css)) { if (e.textContent.includes(text)) { e.click(); return true; } } return false;";
        let deadline = Instant::now() + WAIT;
        while self
            .js(
                script,
                vec![serde_json::json!(css), serde_json::json!(text)],
            )
            .await
            != serde_json::json!(true)
        {
            if Instant::now() > deadline {
                panic!("no {css} with text {text:?} within {WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Replaces the value of an input/textarea the way typing does (native setter + `input`
    /// and `change` events), which is fast for long text.
    pub async fn fill(&self, css: &str, value: &str) {
        self.wait_css(css).await;
        let script = "const [css, value] = arguments; const e = document.querySelector(css); \
            const proto = e instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : (e instanceof HTMLSelectElement ? HTMLSelectElement.prototype : HTMLInputElement.prototype); \
            Object.getOwnPropertyDescriptor(proto, 'value').set.call(e, value); \
            e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true;";
        self.js(
            script,
            vec![serde_json::json!(css), serde_json::json!(value)],
        )
        .await;
    }

    /// Sends `keys` to the element that has the focus, as real key events.
    pub async fn press(&self, keys: &str) {
        let el = self
            .client
            .active_element()
            .await
            .expect("a focused element");
        el.send_keys(keys).await.expect("keys");
    }

    /// Types into the focused element with real key events.
    pub async fn type_keys(&self, css: &str, keys: &str) {
        let el = self.wait_css(css).await;
        el.send_keys(keys)
            .await
            .unwrap_or_else(|e| panic!("cannot type into {css}: {e}"));
    }

    /// The value of an input, textarea or select.
    pub async fn value(&self, css: &str) -> String {
        self.wait_css(css).await;
        let v = self
            .js(
                "return document.querySelector(arguments[0]).value;",
                vec![serde_json::json!(css)],
            )
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    /// Whether `css` matches an element that is rendered and not disabled.
    pub async fn enabled(&self, css: &str) -> bool {
        self.wait_css(css).await;
        let v = self
            .js(
                "return !document.querySelector(arguments[0]).disabled;",
                vec![serde_json::json!(css)],
            )
            .await;
        v == serde_json::json!(true)
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        let v = self
            .js(
                "return document.querySelectorAll(arguments[0]).length;",
                vec![serde_json::json!(css)],
            )
            .await;
        v.as_u64().unwrap_or(0) as usize
    }

    /// Resizes the window so the viewport (not the window) is `width`×`height`.
    pub async fn viewport(&self, width: u32, height: u32) {
        self.client.set_window_size(width, height).await.unwrap();
        let inner = self
            .js("return [window.innerWidth, window.innerHeight];", vec![])
            .await;
        let (iw, ih) = (
            inner[0].as_u64().unwrap_or(0) as u32,
            inner[1].as_u64().unwrap_or(0) as u32,
        );
        self.client
            .set_window_size(
                width + (width - iw.min(width)),
                height + (height - ih.min(height)),
            )
            .await
            .unwrap();
        self.wait_js(
            "viewport size",
            "return [window.innerWidth, window.innerHeight];",
            serde_json::json!([width, height]),
        )
        .await;
    }

    /// Elements (tag.class) that stick out of the viewport horizontally, and whether the page
    /// itself scrolls sideways. Empty when the layout fits.
    pub async fn horizontal_overflow(&self) -> Vec<String> {
        let v = self
            .js(
                "const w = document.documentElement.clientWidth; const out = []; \
                 if (document.documentElement.scrollWidth > w) out.push('page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + w); \
                 for (const e of document.querySelectorAll('body *')) { \
                   const r = e.getBoundingClientRect(); if (r.width === 0 || r.height === 0) continue; \
                   let clipped = false; for (let p = e.parentElement; p; p = p.parentElement) { const s = getComputedStyle(p); if (s.overflowX !== 'visible' && s.overflowX !== 'clip' || s.display === 'none') { const pr = p.getBoundingClientRect(); if (r.right <= pr.right + 1) { clipped = true; } break; } } \
                   if (r.right > w + 1 && !clipped) out.push(e.tagName.toLowerCase() + '.' + [...e.classList].join('.') + ' right=' + Math.round(r.right)); } \
                 return out.slice(0, 20);",
                vec![],
            )
            .await;
        serde_json::from_value(v).unwrap_or_default()
    }

    /// The bounding box `[x, y, width, height]` of the first element matching `css`.
    pub async fn rect(&self, css: &str) -> [f64; 4] {
        self.wait_css(css).await;
        let v = self
            .js(
                "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return [r.x, r.y, r.width, r.height];",
                vec![serde_json::json!(css)],
            )
            .await;
        serde_json::from_value(v).expect("a rect")
    }

    /// Whether the element matching `css` lies fully inside the viewport.
    pub async fn in_viewport(&self, css: &str) -> bool {
        let [x, y, w, h] = self.rect(css).await;
        let size = self
            .js(
                "return [document.documentElement.clientWidth, window.innerHeight];",
                vec![],
            )
            .await;
        let (vw, vh) = (
            size[0].as_f64().unwrap_or(0.0),
            size[1].as_f64().unwrap_or(0.0),
        );
        w > 0.0 && h > 0.0 && x >= -0.5 && y >= -0.5 && x + w <= vw + 0.5 && y + h <= vh + 0.5
    }

    /// Saves a PNG of the page to `target/screenshots/<name>.png`; with
    /// `FORGE_UPDATE_SCREENSHOTS=1` also to `docs/images/<name>.png` (the user guide's images).
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let root = workspace_root();
        let dir = root.join("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
        if std::env::var_os("FORGE_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
            let docs = root.join("docs/images");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(format!("{name}.png")), &png).unwrap();
        }
    }

    /// Polls until the text of `css` is exactly `want`.
    pub async fn wait_eq(&self, css: &str, want: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.text(css).await;
            if got.as_deref() == Some(want) {
                return;
            }
            if Instant::now() > deadline {
                let errors = self.page_errors().await;
                panic!("waited {WAIT:?} for {css} to read {want:?}; it reads {got:?} (page errors: {errors:?})");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Polls until the status line reads exactly `want`.
    pub async fn wait_status(&self, want: &str) {
        self.wait_eq(".topbar .status", want).await;
    }

    /// Polls until `count(css) == n`.
    pub async fn wait_count(&self, css: &str, n: usize) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.count(css).await;
            if got == n {
                return;
            }
            if Instant::now() > deadline {
                let errors = self.page_errors().await;
                panic!(
                    "waited {WAIT:?} for {n} × {css}; there are {got} (page errors: {errors:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Opens a section tab of the Preset editor and waits until it is selected and shown.
    pub async fn tab(&self, label: &str) {
        let css = format!("button.tab[data-tab='{label}']");
        self.click(&css).await;
        self.wait_js(
            "tab selected",
            &format!("return document.querySelector(\"{css}\").getAttribute('aria-selected');"),
            serde_json::json!("true"),
        )
        .await;
        // Most tabs are loaded on demand (web/src/split.rs): wait for the content too.
        self.wait_js(
            "the tab's content",
            "return (document.querySelector('.tab-body')?.children.length ?? 0) > 0;",
            serde_json::json!(true),
        )
        .await;
    }

    /// Waits until the console has logged `want.len()` errors and checks that they are exactly
    /// these failed requests (`"<path> <status>"`, e.g. `"/api/profiles 409 (Conflict)"`),
    /// which the test provoked on purpose. This empties the log, so [`Self::assert_no_errors`]
    /// at the end still catches anything unexpected.
    pub async fn expect_failed_requests(&self, server: &Server, want: &[&str]) {
        let origin = server.base.trim_end_matches('/');
        let mut got: Vec<String> = Vec::new();
        let deadline = Instant::now() + WAIT;
        loop {
            got.extend(self.console_errors().await.into_iter().map(|m| {
                let m = m.replace(origin, "");
                match m.split_once(
                    " - Failed to load resource: the server responded with a status of ",
                ) {
                    Some((path, status)) => format!("{path} {status}"),
                    None => m,
                }
            }));
            if got.len() >= want.len() || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(got, want, "console errors");
    }

    /// Asserts that the page recorded no errors and the console logged none.
    pub async fn assert_no_errors(&self) {
        assert_eq!(
            self.page_errors().await,
            Vec::<String>::new(),
            "page errors"
        );
        assert_eq!(
            self.console_errors().await,
            Vec::<String>::new(),
            "console errors"
        );
    }

    /// Ends the session cleanly; drop alone would kill the processes instead.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

/// Chromedriver's legacy log endpoint (`goog:loggingPrefs`), not part of W3C WebDriver.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_string()),
        )
    }
}

/// A minimal HTTP/1.1 GET over std (status code, response head and body), for checks before the
/// browser.
pub fn http_get(base_url: &str, path: &str, cookie: Option<&str>) -> (u16, String, String) {
    use std::io::Write as _;
    let authority = base_url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("not an http://host:port/ URL: {base_url}"));
    let mut stream = TcpStream::connect(authority).expect("connect to pi-forge");
    stream.set_read_timeout(Some(STARTUP)).unwrap();
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\n{cookie}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("malformed HTTP response: {response:?}"));
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (status, head.to_string(), body.to_string())
}

/// Median, min and max of benchmark samples in milliseconds (rounded to 0.01 ms), and how many
/// (`cargo xtask bench`'s browser examples).
pub fn ms_stats(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    let round = |x: f64| (x * 100.0).round() / 100.0;
    serde_json::json!({"medianMs": round(median), "minMs": round(v[0]), "maxMs": round(v[v.len() - 1]), "samples": v.len()})
}

/// The on-disk format of resource files: pretty JSON (2 spaces) plus a newline.
pub fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap() + "\n"
}

/// A schema-2 stack with a system block and a chat-history slot (no diagnostics).
pub fn sample_stack(id: &str, name: &str, content: &str) -> serde_json::Value {
    serde_json::json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "name": name,
        "items": [
            { "kind": "block", "id": "intro", "role": "system", "content": content },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]
    })
}

/// Decodes a chunked HTTP/1.1 body.
fn dechunk(mut raw: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = raw.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        raw = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("a free local port")
        .port()
}
