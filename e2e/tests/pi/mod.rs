//! Real-Pi harness: Pi 1.6.0 in RPC mode with the pi-forge extension installed, against a fake
//! OpenAI-compatible model on loopback that records every request body.
//!
//! Pi comes from `cargo xtask setup` (the pinned tools cache, see xtask `pi_tools_dir`); it is
//! never mocked. Every process a test starts (Pi, the `pi-forge ui` the extension starts, the fake
//! model) is stopped when the harness drops, and the drop checks that the editor server is gone.

#![allow(dead_code)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::pi_forge_binary;

pub mod delegation;

/// Pi's tools cache: the same rule as xtask's `pi_tools_dir`.
pub fn pi_tools() -> PathBuf {
    let base = if let Some(dir) = std::env::var_os("PI_FORGE_TOOLS_DIR").filter(|v| !v.is_empty()) {
        PathBuf::from(dir)
    } else if let Some(cache) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        PathBuf::from(cache).join("pi-forge/tools")
    } else {
        let home = std::env::var_os("HOME").expect("HOME is set");
        PathBuf::from(home).join(".cache/pi-forge/tools")
    };
    let dir = base.join("pi-1.6.0");
    let cli = dir.join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js");
    assert!(
        cli.is_file(),
        "Pi 1.6.0 is not installed at {}: run `cargo xtask setup` (it installs Node 22 and Pi 1.6.0 from npm)",
        dir.display()
    );
    dir
}

// ---------------------------------------------------------------------------------------------
// The fake model

/// The API key models.json gives the fake provider: distinctive, so a test can prove it never
/// leaks into a capture, a response, a file or a log.
pub const FAKE_API_KEY: &str = "sk-forge-e2e-secret-4242";

/// A fake OpenAI-compatible server: `GET /v1/models`, `POST /v1/chat/completions` (SSE with
/// one text delta "ok from fake" and usage). Every POST body is recorded, and the headers with
/// it. Usage: 10 prompt tokens on the first request; from the second on, 40 prompt tokens of
/// which 30 were read from the provider's cache (`prompt_tokens_details.cached_tokens`).
pub struct FakeModel {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Value>>>,
    pub headers: Arc<Mutex<Vec<Vec<String>>>>,
    /// Tool calls to answer with, one per request, before the plain text answer:
    /// `{"name": …, "arguments": {…}}`.
    pub script: Arc<Mutex<std::collections::VecDeque<Value>>>,
}

impl FakeModel {
    pub fn start() -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let headers = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(std::collections::VecDeque::new()));
        let log = Arc::clone(&requests);
        let header_log = Arc::clone(&headers);
        let queue = Arc::clone(&script);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&log);
                let header_log = Arc::clone(&header_log);
                let queue = Arc::clone(&queue);
                std::thread::spawn(move || serve(stream, &log, &header_log, &queue));
            }
        });
        FakeModel {
            port,
            requests,
            headers,
            script,
        }
    }

    /// The next request is answered with several tool calls at once: `(name, arguments)`.
    pub fn call_tools(&self, calls: &[(&str, Value)]) {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(name, arguments)| json!({"name": name, "arguments": arguments}))
            .collect();
        self.script
            .lock()
            .unwrap()
            .push_back(json!({ "calls": calls }));
    }

    /// The next request is answered with this text (instead of "ok from fake").
    pub fn answer(&self, text: &str) {
        self.script
            .lock()
            .unwrap()
            .push_back(json!({ "text": text }));
    }

    /// The next request gets no answer for `seconds`, then the connection closes.
    pub fn hang(&self, seconds: u64) {
        self.script
            .lock()
            .unwrap()
            .push_back(json!({"hangSeconds": seconds}));
    }

    /// The next request is answered with a call of tool `name` with `arguments`.
    pub fn call_tool(&self, name: &str, arguments: Value) {
        self.script
            .lock()
            .unwrap()
            .push_back(json!({"name": name, "arguments": arguments}));
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    log: &Mutex<Vec<Value>>,
    header_log: &Mutex<Vec<Vec<String>>>,
    script: &Mutex<std::collections::VecDeque<Value>>,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0usize;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line == "\r\n" || line.is_empty() {
            break;
        }
        headers.push(line.trim_end().to_string());
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    if request_line.starts_with("GET") {
        let text = r#"{"object":"list","data":[{"id":"fake-1","object":"model"},{"id":"fake-2","object":"model"}]}"#;
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
        return;
    }
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = value["model"].as_str().unwrap_or("fake-1").to_string();
    let nth = {
        let mut log = log.lock().unwrap();
        log.push(value);
        header_log.lock().unwrap().push(headers);
        log.len()
    };
    let usage = if nth == 1 {
        json!({"prompt_tokens":10,"completion_tokens":3,"total_tokens":13})
    } else {
        json!({"prompt_tokens":40,"completion_tokens":3,"total_tokens":43,
               "prompt_tokens_details":{"cached_tokens":30}})
    };
    let chunk = |delta: Value, finish: Value| {
        json!({"id":"c1","object":"chat.completion.chunk","created":0,"model":model,
               "choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
    };
    let mut out = String::new();
    let scripted = script.lock().unwrap().pop_front();
    if let Some(seconds) = scripted.as_ref().and_then(|s| s["hangSeconds"].as_u64()) {
        std::thread::sleep(Duration::from_secs(seconds));
        return;
    }
    let (answer, finish) = match scripted {
        Some(reply) if reply["text"].is_string() => {
            (json!({"content": reply["text"]}), json!("stop"))
        }
        Some(call) => {
            let calls = match call["calls"].as_array() {
                Some(list) => list.clone(),
                None => vec![call],
            };
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"index": i, "id": format!("call_{nth}_{i}"), "type": "function",
                           "function": {"name": c["name"], "arguments": c["arguments"].to_string()}})
                })
                .collect();
            (json!({ "tool_calls": calls }), json!("tool_calls"))
        }
        None => (json!({"content":"ok from fake"}), json!("stop")),
    };
    for event in [
        chunk(json!({"role":"assistant","content":""}), Value::Null),
        chunk(answer, Value::Null),
        chunk(json!({}), finish),
        json!({"id":"c1","object":"chat.completion.chunk","created":0,"model":model,"choices":[],
               "usage":usage}),
    ] {
        out.push_str(&format!("data: {event}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// A project, Pi's agent folder and the editor's runtime folder

pub struct Workspace {
    pub root: tempfile::TempDir,
    pub model: FakeModel,
    bin: PathBuf,
    /// Set by [`Workspace::from_registry`]: Pi finds the extension and the binary the way a
    /// user's install does, with this environment instead of `PI_FORGE_BIN`.
    packaged: Option<Packaged>,
}

/// The environment of a [`Workspace::from_registry`] workspace.
struct Packaged {
    /// The pinned Node 22's folder, then `/usr/bin:/bin`.
    path: std::ffi::OsString,
    /// `npm_config_registry`: the local registry the packages were published to.
    registry: String,
}

/// Programs that must not be reachable on a packaged workspace's PATH: a user's install needs
/// no Rust toolchain, and a `pi-forge` there would be found before a missing package is noticed.
pub const NOT_ON_PATH: &[&str] = &["cargo", "rustc", "pi-forge"];

impl Workspace {
    /// Writes `files` (relative to the project) and a models.json for the fake model, then
    /// installs the extension with `pi-forge pi install`.
    pub fn new(files: &[(&str, &str)]) -> Workspace {
        Workspace::with_models(files, &[])
    }

    /// [`Workspace::new`] with more models for the fake provider (`models.json` entries).
    pub fn with_models(files: &[(&str, &str)], extra_models: &[Value]) -> Workspace {
        let ws = Workspace::prepare(files, extra_models, pi_forge_binary().to_path_buf(), None);
        let out = ws.forge(&["pi", "install"]);
        assert!(
            out.status.success(),
            "pi-forge pi install failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ws
    }

    /// A workspace for the npm packages: nothing is installed (no `pi-forge pi install`, no
    /// `PI_FORGE_BIN`); Pi, npm and npx run with `PATH` = the pinned Node 22's folder +
    /// `/usr/bin:/bin` (asserted to hold no cargo, rustc or pi-forge), the scratch `HOME` and
    /// `PI_CODING_AGENT_DIR`, and `npm_config_registry` = `registry`. `bin` is the binary
    /// [`Workspace::forge`] runs (the packaged one; see [`Workspace::use_binary`]).
    pub fn from_registry(files: &[(&str, &str)], registry: &str, bin: &Path) -> Workspace {
        let tools = pi_tools();
        let node_bin = tools.join("node_modules/node/bin");
        let dirs = [node_bin, PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
        for dir in &dirs {
            for name in NOT_ON_PATH {
                let found = dir.join(name);
                assert!(
                    !found.exists(),
                    "{} is on the packaged workspace's PATH: the test would not show that an install works without it",
                    found.display()
                );
            }
        }
        // The pinned Node has no npm of its own: npm (and npx) come from the system, and their
        // `#!/usr/bin/env node` runs them with the pinned Node 22, first on PATH.
        for tool in ["npm", "npx"] {
            assert!(
                dirs.iter().any(|dir| dir.join(tool).is_file()),
                "no {tool} in {dirs:?}: install npm (Debian: `apt-get install -y npm`)"
            );
        }
        let path = std::env::join_paths(&dirs).expect("PATH");
        let packaged = Packaged {
            path,
            registry: registry.to_string(),
        };
        Workspace::prepare(files, &[], bin.to_path_buf(), Some(packaged))
    }

    /// The binary [`Workspace::forge`] (and the drop's `ui stop`) runs from now on.
    pub fn use_binary(&mut self, bin: &Path) {
        self.bin = bin.to_path_buf();
    }

    /// The temp folders, `files` and models.json for the fake model.
    fn prepare(
        files: &[(&str, &str)],
        extra_models: &[Value],
        bin: PathBuf,
        packaged: Option<Packaged>,
    ) -> Workspace {
        let root = tempfile::tempdir().expect("temp dir");
        let model = FakeModel::start();
        let ws = Workspace {
            root,
            model,
            bin,
            packaged,
        };
        for dir in [
            "project/.pi/forge",
            "agent",
            "run",
            "home",
            "global",
            "sessions",
        ] {
            std::fs::create_dir_all(ws.root.path().join(dir)).unwrap();
        }
        for (rel, text) in files {
            let path = ws.project().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let model_entry = |id: &str, reasoning: bool| {
            json!({"id": id, "name": id, "reasoning": reasoning, "input": ["text"], "contextWindow": 100000,
                   "maxTokens": 1000, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}})
        };
        let models: Vec<Value> = [model_entry("fake-1", false), model_entry("fake-2", true)]
            .into_iter()
            .chain(extra_models.iter().cloned())
            .collect();
        let models = json!({"providers": {"fake": {
            "baseUrl": format!("http://127.0.0.1:{}/v1", ws.model.port),
            "api": "openai-completions",
            "apiKey": FAKE_API_KEY,
            "models": models,
        }}});
        std::fs::write(ws.agent().join("models.json"), models.to_string()).unwrap();
        ws
    }

    pub fn project(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path().join("project")).unwrap()
    }

    pub fn agent(&self) -> PathBuf {
        self.root.path().join("agent")
    }

    /// A `pi` executable for child runs: the pinned Pi through its Node.
    fn pi_wrapper(&self) -> PathBuf {
        let wrapper = self.root.path().join("pi");
        if !wrapper.exists() {
            let tools = pi_tools();
            let script = format!(
                "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
                tools.join("node_modules/node/bin/node").display(),
                tools
                    .join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js")
                    .display()
            );
            std::fs::write(&wrapper, script).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        wrapper
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("PI_FORGE_PI", self.pi_wrapper())
            .env("PI_CODING_AGENT_DIR", self.agent())
            .env("XDG_RUNTIME_DIR", self.root.path().join("run"))
            .env("HOME", self.root.path().join("home"))
            .env("PI_FORGE_GLOBAL_DIR", self.root.path().join("global"))
            .env("PI_FORGE_BROWSER", self.opener())
            .env_remove("PI_FORGE_UNTRUSTED");
        match &self.packaged {
            None => {
                cmd.env("PI_FORGE_BIN", &self.bin);
            }
            Some(packaged) => {
                // npm's own settings only from here (the scratch HOME has no .npmrc); nothing
                // it does at install time may reach beyond the local registry.
                let inherited: Vec<_> = std::env::vars_os()
                    .map(|(name, _)| name)
                    .filter(|name| {
                        let name = name.to_string_lossy().to_ascii_lowercase();
                        name.starts_with("npm_config_") || name == "node_options"
                    })
                    .collect();
                for name in inherited {
                    cmd.env_remove(name);
                }
                cmd.env_remove("PI_FORGE_BIN")
                    .env("PATH", &packaged.path)
                    .env("npm_config_registry", &packaged.registry)
                    .env("npm_config_audit", "false")
                    .env("npm_config_fund", "false")
                    .env("npm_config_update_notifier", "false")
                    .env("PI_SKIP_VERSION_CHECK", "1");
            }
        }
    }

    /// `program` with this workspace's environment, in the project folder (npm, npx, a
    /// packaged binary).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.project());
        self.env(&mut cmd);
        cmd
    }

    /// Runs Pi's CLI (`pi <args>`, e.g. `install npm:pi-forge`) with the pinned Node and this
    /// workspace's environment, in the project folder.
    pub fn pi_cli(&self, args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
        let tools = pi_tools();
        let mut cmd = self.command(tools.join("node_modules/node/bin/node"));
        cmd.arg(tools.join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js"))
            .args(args)
            .stdin(Stdio::null());
        for (name, value) in vars {
            cmd.env(name, value);
        }
        cmd.output().expect("run Pi's CLI")
    }

    /// The stand-in browser `/forge ui` opens: it appends its arguments to `browser.log` and
    /// stays alive for 3 s (so a test can read every command line while it runs).
    fn opener(&self) -> PathBuf {
        let opener = self.root.path().join("browser");
        if !opener.exists() {
            let log = self.browser_log();
            let script = format!(
                "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nsleep 3\n",
                log.display()
            );
            std::fs::write(&opener, script).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        opener
    }

    /// What the stand-in browser was asked to open, one line per call.
    pub fn browser_log(&self) -> PathBuf {
        self.root.path().join("browser.log")
    }

    /// Runs `pi-forge <args>` with this workspace's environment, `stdin` as its input and Pi
    /// itself as `PI_FORGE_PI` (for delegated child runs).
    pub fn forge_input(&self, args: &[&str], stdin: &str) -> std::process::Output {
        let mut child = self.forge_spawn(args);
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().expect("pi-forge output")
    }

    /// Starts `pi-forge <args>` with piped standard streams and Pi as `PI_FORGE_PI`.
    pub fn forge_spawn(&self, args: &[&str]) -> Child {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .current_dir(self.project())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.env(&mut cmd);
        cmd.spawn().expect("run pi-forge")
    }

    /// Runs `pi-forge <args>` with this workspace's environment.
    pub fn forge(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).current_dir(self.project());
        self.env(&mut cmd);
        cmd.output().expect("run pi-forge")
    }

    /// `pi-forge preview <key> --runtime <runtime> --json` (the runtime written to `file` in
    /// the temp root) → its `compiled` object: what the editor's preview shows for that state.
    pub fn preview(&self, key: &str, runtime: &Value, file: &str) -> Value {
        let path = self.root.path().join(file);
        std::fs::write(&path, runtime.to_string()).unwrap();
        let out = self.forge(&[
            "preview",
            key,
            "--runtime",
            &path.display().to_string(),
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let value: Value = serde_json::from_slice(&out.stdout).unwrap();
        value["compiled"].clone()
    }

    /// Starts Pi in RPC mode with the extension (found in the agent folder).
    pub fn pi(&self, extra: &[&str]) -> Pi {
        self.pi_env(extra, &[])
    }

    /// Pi with extra environment on top of the workspace's (e.g. another `PI_FORGE_BIN`).
    pub fn pi_env(&self, extra: &[&str], vars: &[(&str, &str)]) -> Pi {
        self.spawn_pi(&["--offline"], extra, vars)
    }

    /// Pi in RPC mode without `--offline`: it may install packages (`-e npm:…` installs from
    /// the registry before it loads them; offline it skips them).
    pub fn pi_online(&self, extra: &[&str], vars: &[(&str, &str)]) -> Pi {
        self.spawn_pi(&[], extra, vars)
    }

    fn spawn_pi(&self, mode: &[&str], extra: &[&str], vars: &[(&str, &str)]) -> Pi {
        let tools = pi_tools();
        let mut cmd = Command::new(tools.join("node_modules/node/bin/node"));
        cmd.arg(tools.join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js"))
            .args(["--mode", "rpc"])
            .args(mode)
            .args(["--model", "fake/fake-1"])
            .args(extra)
            .current_dir(self.project())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.env(&mut cmd);
        for (name, value) in vars {
            cmd.env(name, value);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt as _;
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().expect("start Pi");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            // RPC framing is LF only.
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if let Ok(value) = serde_json::from_slice::<Value>(&line) {
                    if tx.send(value).is_err() {
                        break;
                    }
                }
                line.clear();
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let err_log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&err_log);
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            sink.lock().unwrap().push_str(&text);
        });
        Pi {
            child: Some(child),
            events: rx,
            seen: Vec::new(),
            stderr: err_log,
        }
    }

    /// The editor this project's extension started: `(base, token)` from the state file.
    pub fn editor(&self) -> Option<(String, String)> {
        let dir = self.root.path().join("run/pi-forge");
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                let record: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
                let port = record["port"].as_u64()?;
                let token = record["token"].as_str()?.to_string();
                return Some((format!("127.0.0.1:{port}"), token));
            }
        }
        None
    }

    /// The process id of the editor this project's extension started (from its state file).
    pub fn editor_pid(&self) -> Option<u32> {
        let dir = self.root.path().join("run/pi-forge");
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                let record: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
                return record["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
            }
        }
        None
    }

    /// A headless browser on the editor the extension started (token address), once the app
    /// shows a connected live session.
    pub async fn browser(&self) -> crate::support::Browser {
        let (authority, token) = self.editor().expect("the extension started the editor");
        let browser = crate::support::Browser::start().await;
        browser
            .client
            .goto(&format!("http://{authority}/?token={token}"))
            .await
            .expect("page loads");
        browser.wait_css("#live-indicator[data-live='true']").await;
        browser
    }

    /// An API call to the editor (`x-pi-forge-token`): `(status, JSON body)`.
    pub fn api(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let (authority, token) = self.editor().expect("the editor is running");
        http(&authority, &token, method, path, body)
    }
}

pub fn http(authority: &str, token: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(authority).expect("connect to pi-forge");
    stream
        .set_read_timeout(Some(Duration::from_secs(40)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nx-pi-forge-token: {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response).to_string();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let record = self.editor();
        if !self.bin.exists() {
            // Removed by the test (`pi remove`): its editor stopped with it.
            if !std::thread::panicking() {
                assert_eq!(record, None, "an editor is recorded but its binary is gone");
            }
            return;
        }
        let _ = self.forge(&["ui", "stop"]);
        if let Some((authority, _)) = record {
            // No orphan: the editor the extension started is gone.
            let gone = TcpStream::connect(&authority).is_err();
            if !std::thread::panicking() {
                assert!(
                    gone,
                    "the editor at {authority} is still running after `pi-forge ui stop`"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pi over RPC

pub struct Pi {
    child: Option<Child>,
    events: mpsc::Receiver<Value>,
    /// Every event received so far.
    pub seen: Vec<Value>,
    stderr: Arc<Mutex<String>>,
}

pub const WAIT: Duration = Duration::from_secs(30);

impl Pi {
    pub fn send(&mut self, command: Value) {
        let stdin = self
            .child
            .as_mut()
            .and_then(|c| c.stdin.as_mut())
            .expect("Pi's stdin");
        writeln!(stdin, "{command}").expect("write to Pi");
        stdin.flush().unwrap();
    }

    /// Waits for an event matching `want`, keeping every event in `seen`.
    pub fn wait(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    self.seen.push(event.clone());
                    if want(&event) {
                        return event;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "Pi never sent {what} within {WAIT:?}; events: {:#?}\nstderr: {}",
            self.seen
                .iter()
                .map(|e| e.to_string().chars().take(300).collect::<String>())
                .collect::<Vec<_>>(),
            self.stderr.lock().unwrap()
        );
    }

    /// Sends a `/forge` command (or any prompt handled by an extension) and returns the text of
    /// the notification it produced.
    pub fn command(&mut self, text: &str) -> String {
        self.send(json!({"type": "prompt", "message": text}));
        let note = self.wait("a notify", |e| {
            e["type"] == "extension_ui_request" && e["method"] == "notify"
        });
        self.wait("the command's response", |e| {
            e["type"] == "response" && e["command"] == "prompt"
        });
        note["message"].as_str().unwrap_or_default().to_string()
    }

    /// Sends a user prompt and waits until the agent settled; returns the `agent_settled` event.
    pub fn prompt(&mut self, text: &str) -> Value {
        self.send(json!({"type": "prompt", "message": text}));
        self.wait("agent_settled", |e| e["type"] == "agent_settled")
    }

    /// Sends a prompt pi-forge refuses before it starts (the extension's `input` handler says
    /// it is handled): no run starts, so nothing of it enters the conversation. The refusal
    /// notice, once Pi answered the prompt command; a run that starts instead fails the test.
    pub fn refused(&mut self, text: &str) -> String {
        self.send(json!({"type": "prompt", "message": text}));
        let note = self.wait("the refusal notice", |e| {
            e["method"] == "notify" || e["type"] == "agent_start"
        });
        assert_eq!(note["method"], "notify", "a run started: {note}");
        self.wait("the prompt's response", |e| {
            e["type"] == "response" && e["command"] == "prompt" || e["type"] == "agent_start"
        });
        assert!(
            !self.seen.iter().any(|e| e["type"] == "agent_start"),
            "a run started for a refused prompt"
        );
        note["message"].as_str().unwrap_or_default().to_string()
    }

    /// Waits until the extension has connected (its status line is set).
    pub fn connected(&mut self) {
        self.wait("the pi-forge status", |e| {
            e["method"] == "setStatus" && e["statusKey"] == "pi-forge"
        });
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Kills Pi's whole process group at once (as a crash would).
    pub fn kill(&mut self) {
        if let Some(child) = self.child.take() {
            kill_group(child);
        }
    }

    /// Asks Pi to quit (stdin closed) and waits up to 10 s.
    pub fn quit(&mut self) {
        if let Some(mut child) = self.child.take() {
            drop(child.stdin.take());
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Pi {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` every 50 ms until it returns `Some`, for at most `limit`.
pub fn poll<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// SIGKILL to the process group `child` leads (it was started in its own group), then reaps it.
pub fn kill_group(mut child: Child) {
    // `--` first: procps reads a bare `-PGID` after the signal as another signal.
    #[cfg(unix)]
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{}", child.id())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// The text of an OpenAI-style or Pi-style message content (string content, or the text parts
/// joined).
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// `runtime.populatedAt` of a runtime snapshot: its clock as a UTC ISO string.
pub fn runtime_clock_iso(runtime: &Value) -> String {
    let ms = runtime["clock"]["epochMs"].as_i64().unwrap();
    let secs = ms.div_euclid(1000);
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .unwrap();
    format!(
        "{}.{:03}Z",
        String::from_utf8_lossy(&out.stdout).trim(),
        ms.rem_euclid(1000)
    )
}

/// The compiled messages of a preview as the OpenAI-style `(role, text)` pairs the model
/// receives (Pi sends a `toolResult` as role `tool`).
pub fn compiled_texts(compiled: &Value) -> Vec<(String, String)> {
    let messages: Vec<Value> = compiled["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut message = m["message"].clone();
            if message["role"] == "toolResult" {
                message["role"] = json!("tool");
            }
            message
        })
        .collect();
    message_texts(&json!({ "messages": messages }))
}

/// A request the model received is exactly the compiled preview: its system prompt first, then
/// the compiled messages. Returns the messages after the system prompt.
pub fn assert_request_is_the_preview(sent: &Value, compiled: &Value) -> Vec<(String, String)> {
    let received = message_texts(sent);
    assert_eq!(
        received[0],
        (
            "system".to_string(),
            compiled["systemPrompt"].as_str().unwrap().to_string()
        )
    );
    assert_eq!(received[1..], compiled_texts(compiled)[..]);
    received[1..].to_vec()
}

/// `(role, text)` of every message of a request the fake model received (string content, or the
/// text parts joined).
pub fn message_texts(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                text_of(&m["content"]),
            )
        })
        .collect()
}

/// The tool names a request declared, sorted (Pi declares them in registry order).
pub fn tool_names(body: &Value) -> Vec<String> {
    let mut names = tool_order(body);
    names.sort();
    names
}

/// The request's tool names in the order the provider receives them (part of the cacheable
/// prefix).
pub fn tool_order(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
