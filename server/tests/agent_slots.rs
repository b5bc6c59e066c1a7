//! The delegation run slot belongs to the run, not to the HTTP request that asked for it, and a
//! plan whose request went away is withdrawn. The host here is this test speaking the live-host
//! protocol; the child is a stand-in `pi` (`PI_FORGE_PI`) that only sleeps, so a run stays
//! `running` until it is cancelled. Real-Pi runs are in e2e/tests/pi_agent*.rs.

mod support;

use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{Dirs, Server};

const CHILD: &str = r#"{"schemaVersion":2,"type":"pi-forge.prompt-stack","id":"child","mode":"replace","items":[{"id":"sys","kind":"block","role":"system","content":"You are CHILD."}]}"#;
const REVIEWER: &str = r#"{"schemaVersion":1,"type":"pi-forge.agent-profile","id":"reviewer","model":{"provider":"fake","id":"fake-1"},"thinkingLevel":"off","promptStack":"child"}"#;
const SETTINGS: &str =
    r#"{ "maxConcurrentRuns": 1, "profiles": { "project:reviewer": { "enabled": true } } }"#;

struct Editor {
    dirs: Dirs,
    server: Server,
    host: String,
}

fn client(timeout: Duration) -> Client {
    Client::builder().timeout(timeout).build().unwrap()
}

impl Editor {
    fn start() -> Editor {
        let dirs = Dirs::new();
        dirs.write(".pi/forge/prompt-stacks/child.json", CHILD);
        dirs.write(".pi/forge/agent-profiles/reviewer.json", REVIEWER);
        dirs.write(".pi/forge/subagents.json", SETTINGS);
        // The stand-in child: it records its pid and sleeps in the run's process group.
        let pids = dirs.root.path().join("child-pids");
        let script = dirs.root.path().join("pi");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho $$ >> '{}'\nexec sleep 120\n",
                pids.display()
            ),
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let script = script.display().to_string();
        let server = Server::start(&dirs, &[], &[("PI_FORGE_PI", &script)]);
        let mut editor = Editor {
            dirs,
            server,
            host: String::new(),
        };
        let hello = json!({
            "protocol": 1, "extensionVersion": "0.1.0", "piVersion": "1.6.0", "mode": "rpc",
            "hasUI": true, "cwd": "/w", "sessionId": "s1", "projectTrusted": true,
            "facts": {"tools": [{"name": "read"}], "activeTools": ["read"]}, "entries": []
        });
        let (status, welcome) = editor.post("/api/host/hello", &hello, Duration::from_secs(30));
        assert_eq!(status, StatusCode::OK, "{welcome}");
        editor.host = welcome["hostId"].as_str().unwrap().to_string();
        editor
    }

    fn post(&self, path: &str, body: &Value, timeout: Duration) -> (StatusCode, Value) {
        let response = client(timeout)
            .post(self.server.url(path))
            .header("x-pi-forge-token", &self.server.token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap();
        let status = response.status();
        (status, response.json().unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> Value {
        client(Duration::from_secs(30))
            .get(self.server.url(path))
            .header("x-pi-forge-token", &self.server.token)
            .send()
            .unwrap()
            .json()
            .unwrap()
    }

    /// Asks for a subagent as the `forge_subagent` tool does, on a thread whose client gives up
    /// after `patience` (the request is dropped then).
    fn ask(
        &self,
        task: &str,
        background: bool,
        patience: Duration,
    ) -> std::thread::JoinHandle<bool> {
        let url = self
            .server
            .url(&format!("/api/host/{}/subagent", self.host));
        let token = self.server.token.clone();
        let body = json!({"sessionId": "s1", "profile": "reviewer", "task": task, "background": background});
        std::thread::spawn(move || {
            let sent = client(patience)
                .post(url)
                .header("x-pi-forge-token", token)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send();
            // `true` when the client gave up (the request was dropped).
            sent.is_err_and(|e| e.is_timeout())
        })
    }

    /// Waits for the plan of `task` to wait for approval.
    fn plan(&self, task: &str) -> Value {
        let found = poll(Duration::from_secs(20), || {
            self.get("/api/agent/plans")["plans"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["task"] == task).cloned())
        });
        found.unwrap_or_else(|| panic!("no plan for {task}"))
    }

    fn approve(&self, plan: &Value) -> (StatusCode, Value) {
        let run = plan["runId"].as_str().unwrap();
        self.post(
            &format!("/api/agent/plans/{run}/approve"),
            &json!({"executionFingerprint": plan["executionFingerprint"], "viewedFullPrompt": true}),
            Duration::from_secs(30),
        )
    }

    fn status(&self, run: &str) -> String {
        self.get("/api/agent/runs")["runs"]
            .as_array()
            .and_then(|runs| runs.iter().find(|r| r["runId"] == run).cloned())
            .and_then(|r| r["status"].as_str().map(str::to_string))
            .unwrap_or_else(|| "absent".into())
    }

    fn wait_status(&self, run: &str, want: &str) {
        let reached = poll(Duration::from_secs(20), || {
            (self.status(run) == want).then_some(())
        });
        assert!(
            reached.is_some(),
            "run {run} never became {want} (it is {})",
            self.status(run)
        );
    }

    fn child_pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dirs.root.path().join("child-pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

fn poll<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
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

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn a_dropped_request_never_frees_the_slot_of_its_running_child() {
    let editor = Editor::start();
    // The first run's request gives up after 4 s: by then its child runs.
    let first = editor.ask("first", false, Duration::from_secs(4));
    let plan = editor.plan("first");
    let first_run = plan["runId"].as_str().unwrap().to_string();
    assert_eq!(editor.approve(&plan).0, StatusCode::OK);
    editor.wait_status(&first_run, "running");
    assert!(
        first.join().unwrap(),
        "the first request was dropped by its client"
    );
    let pids = editor.child_pids();
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert!(alive(pids[0]));

    // The second run is approved after the first request went away: the only slot is still
    // the first run's, so it stays queued and its child does not start.
    let second = editor.ask("second", true, Duration::from_secs(30));
    assert!(!second.join().unwrap());
    let plan = editor.plan("second");
    let second_run = plan["runId"].as_str().unwrap().to_string();
    assert_eq!(editor.approve(&plan).0, StatusCode::OK);
    editor.wait_status(&second_run, "queued");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(editor.status(&first_run), "running");
    assert_eq!(editor.status(&second_run), "queued");
    assert_eq!(editor.child_pids().len(), 1);

    // The first run ends (cancelled): its group is killed, and only then the second starts.
    let (status, body) = editor.post(
        &format!("/api/agent/runs/{first_run}/cancel"),
        &json!({}),
        Duration::from_secs(30),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    editor.wait_status(&first_run, "cancelled");
    editor.wait_status(&second_run, "running");
    assert!(poll(Duration::from_secs(5), || (!alive(pids[0])).then_some(())).is_some());
    assert_eq!(editor.child_pids().len(), 2);
    let (status, _) = editor.post(
        &format!("/api/agent/runs/{second_run}/cancel"),
        &json!({}),
        Duration::from_secs(30),
    );
    assert_eq!(status, StatusCode::OK);
    editor.wait_status(&second_run, "cancelled");
    let second_pid = editor.child_pids()[1];
    assert!(poll(Duration::from_secs(5), || (!alive(second_pid))
        .then_some(()))
    .is_some());
}

#[test]
fn a_plan_whose_request_went_away_is_withdrawn_and_cannot_be_approved() {
    let editor = Editor::start();
    let asked = editor.ask("never decided", false, Duration::from_secs(2));
    let plan = editor.plan("never decided");
    let run = plan["runId"].as_str().unwrap().to_string();
    assert!(
        asked.join().unwrap(),
        "the request was dropped by its client"
    );
    // Gone from the waiting plans.
    let gone = poll(Duration::from_secs(5), || {
        editor.get("/api/agent/plans")["plans"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    });
    assert!(gone.is_some());
    let (status, body) = editor.approve(&plan);
    assert_eq!(status, StatusCode::GONE, "{body}");
    assert_eq!(body["code"], "plan_withdrawn");
    assert_eq!(
        body["error"],
        format!("Plan {run} was withdrawn: the request that asked for it ended before anyone decided (its caller went away), so nothing will run. Ask for the subagent again.")
    );
    let (status, body) = editor.post(
        &format!("/api/agent/plans/{run}/reject"),
        &json!({}),
        Duration::from_secs(30),
    );
    assert_eq!(status, StatusCode::GONE, "{body}");
    assert_eq!(body["code"], "plan_withdrawn");
    // Nothing ran.
    assert_eq!(editor.status(&run), "absent");
    assert_eq!(editor.child_pids(), Vec::<u32>::new());
}
