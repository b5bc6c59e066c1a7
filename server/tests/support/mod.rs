//! A real `pi-forge ui` process per test: temp project, global and runtime directories, the URL
//! read from the first stdout line, the process killed (and reaped) on drop.

#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const STARTUP: Duration = Duration::from_secs(30);

/// Temp directories for one test: `project/`, `global/`, `run/` (XDG_RUNTIME_DIR), `home/`.
pub struct Dirs {
    pub root: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        for dir in ["project", "global", "run", "home"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        Dirs { root }
    }

    pub fn project(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path().join("project")).unwrap()
    }

    pub fn global(&self) -> PathBuf {
        self.root.path().join("global")
    }

    pub fn run_dir(&self) -> PathBuf {
        self.root.path().join("run")
    }

    /// Writes a file below the project.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.project().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes a file below the global forge directory.
    pub fn write_global(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.global().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `pi-forge <args>` to completion with this test's environment.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().unwrap()
    }

    /// `pi-forge <args>` with this test's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi-forge"));
        cmd.args(args)
            .current_dir(self.project())
            .env("PI_FORGE_GLOBAL_DIR", self.global())
            .env("XDG_RUNTIME_DIR", self.run_dir())
            .env("HOME", self.root.path().join("home"))
            .env_remove("PI_FORGE_UNTRUSTED");
        cmd
    }

    /// The state files in the runtime directory.
    pub fn state_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.run_dir().join("pi-forge")) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// A running `pi-forge ui`.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:<port>/?token=<t>`.
    pub url: String,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub port: u16,
    pub token: String,
    stderr: PathBuf,
}

impl Server {
    /// Starts `pi-forge ui --no-open --port 0 --project <project>` (plus `extra` arguments).
    pub fn start(dirs: &Dirs, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let project = dirs.project();
        let mut args = vec!["ui", "--no-open", "--port", "0", "--project"];
        let project_text = project.to_str().unwrap().to_string();
        args.push(&project_text);
        args.extend_from_slice(extra);
        let mut cmd = dirs.command(&args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Server::from_command(dirs, &mut cmd)
    }

    /// Spawns `cmd` (a `pi-forge ui` command) and reads the URL from its first stdout line.
    pub fn from_command(dirs: &Dirs, cmd: &mut Command) -> Server {
        let stderr = dirs.root.path().join(format!(
            "stderr-{}.txt",
            std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos()
        ));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&stderr).unwrap()));
        // A binary a test just copied may be briefly "busy" (ETXTBSY): another test thread's
        // fork can hold the copy's write descriptor until its exec. Retry that, nothing else.
        let mut tries = 0;
        let mut child = loop {
            match cmd.spawn() {
                Err(e) if e.raw_os_error() == Some(26) && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.expect("pi-forge starts"),
            }
        };
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            if let Some(first) = lines.next() {
                let _ = tx.send(first);
            }
            for _ in lines {}
        });
        let url = match rx.recv_timeout(STARTUP) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "pi-forge ui printed no URL; stderr:\n{}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                );
            }
        };
        let (base, token) = split_url(&url);
        let port = base.rsplit(':').next().unwrap().parse().unwrap();
        Server {
            child,
            url,
            base,
            port,
            token,
            stderr,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The session cookie header value, as the browser gets it: traded for the URL's token
    /// (its value is the server's cookie secret, not the token).
    pub fn cookie(&self) -> String {
        let client = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let exchange = client.get(&self.url).send().unwrap();
        let set = exchange.headers()["set-cookie"].to_str().unwrap();
        let pair = set.split(';').next().unwrap().to_string();
        assert!(
            pair.starts_with(&format!("pi_forge_token_{}=", self.port)),
            "{set}"
        );
        pair
    }

    /// The same-origin `Origin` value.
    pub fn origin(&self) -> String {
        self.base.clone()
    }

    /// Waits up to `limit` for the process to exit on its own.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `http://127.0.0.1:<port>/?token=<t>` → (`http://127.0.0.1:<port>`, `<t>`).
pub fn split_url(url: &str) -> (String, String) {
    let (base, token) = url
        .split_once("/?token=")
        .unwrap_or_else(|| panic!("unexpected URL {url:?}"));
    assert!(base.starts_with("http://127.0.0.1:"), "{url}");
    (base.to_string(), token.to_string())
}

/// Reads a file, or `None` when it does not exist.
pub fn read(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// The messages of the error diagnostics in `body["diagnostics"]`.
pub fn error_messages(body: &serde_json::Value) -> Vec<String> {
    body["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics in {body}"))
        .iter()
        .filter(|d| d["level"] == "error")
        .filter_map(|d| d["message"].as_str().map(str::to_string))
        .collect()
}
