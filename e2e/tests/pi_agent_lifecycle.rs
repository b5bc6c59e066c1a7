//! Delegated children never outlive the editor server's control: a real Pi 1.6.0 parent
//! delegates in the background, a person approves, the real child's request to the fake model
//! hangs, and then the server stops. On SIGTERM the server kills the child's process group
//! before it exits; after SIGKILL the child is orphaned until the next server starts, which
//! kills its group and records the run as `orphaned`. Each time no process of the child is left
//! within 5 s.

mod pi;
mod support;

use std::time::{Duration, Instant};

use pi::delegation::{parent_session_with, PARENT, SETTINGS};
use pi::Workspace;
use serde_json::{json, Value};

/// The pids of the running processes whose command line or environment names `path` (a run's
/// folder: Pi rewrites its command line to `pi`, `PI_FORGE_CHILD_INPUT` stays).
fn processes_naming(path: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let mut cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            cmd.extend(std::fs::read(e.path().join("environ")).unwrap_or_default());
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let zombie = stat.rsplit(')').next()?.trim_start().starts_with('Z');
            (!zombie && String::from_utf8_lossy(&cmd).contains(path)).then_some(pid)
        })
        .collect()
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args(["-s", name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
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

/// A background run approved and running, its child's request hanging at the fake model:
/// `(run id, run folder)`.
fn running_child(ws: &Workspace, pi: &mut pi::Pi) -> (String, String) {
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/slow.rs", "background": true}),
    );
    pi.prompt("delegate it in the background");
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    let plan = plans["plans"][0].clone();
    let run = plan["runId"].as_str().unwrap().to_string();
    ws.model.hang(120);
    let before = ws.model.bodies().len();
    let (status, body) = ws.api(
        "POST",
        &format!("/api/agent/plans/{run}/approve"),
        &json!({"executionFingerprint": plan["executionFingerprint"], "viewedFullPrompt": false})
            .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let asked = pi::poll(Duration::from_secs(60), || {
        (ws.model.bodies().len() > before).then_some(())
    });
    assert!(asked.is_some(), "the child never asked the model");
    let folder = ws
        .project()
        .join(".pi/forge/runs")
        .join(run.replace(':', "-"))
        .display()
        .to_string();
    let runs = ws.api("GET", "/api/agent/runs", "").1;
    assert!(
        !processes_naming(&folder).is_empty(),
        "the child runs: {runs:#}"
    );
    (run, folder)
}

fn record(folder: &str) -> Value {
    serde_json::from_slice(&std::fs::read(format!("{folder}/result.json")).unwrap()).unwrap()
}

#[test]
fn sigterm_kills_the_child_first_and_the_server_exits_promptly() {
    let (ws, mut pi) = parent_session_with(PARENT, SETTINGS);
    let (_, folder) = running_child(&ws, &mut pi);
    let server = ws.editor_pid().expect("the editor runs");
    let stopped = Instant::now();
    signal(server, "TERM");
    let gone = pi::poll(Duration::from_secs(5), || {
        (processes_naming(&folder).is_empty() && !alive(server)).then_some(stopped.elapsed())
    });
    let took = gone.unwrap_or_else(|| {
        panic!(
            "within 5 s of SIGTERM: child processes {:?}, server alive {}",
            processes_naming(&folder),
            alive(server)
        )
    });
    eprintln!(
        "SIGTERM: child and server gone after {} ms",
        took.as_millis()
    );
    let kept = record(&folder);
    assert_eq!(kept["status"], "cancelled");
    assert_eq!(
        kept["error"],
        "The pi-forge server stopped before the run finished; its process group was killed."
    );
    assert!(!std::path::Path::new(&format!("{folder}/child.json")).exists());
    pi.quit();
}

#[test]
fn after_sigkill_the_next_server_kills_the_orphaned_child_and_records_it() {
    let (ws, mut pi) = parent_session_with(PARENT, SETTINGS);
    let (run, folder) = running_child(&ws, &mut pi);
    let server = ws.editor_pid().expect("the editor runs");
    signal(server, "KILL");
    assert!(pi::poll(Duration::from_secs(5), || (!alive(server)).then_some(())).is_some());
    // Nothing stopped the child: it is an orphan now.
    std::thread::sleep(Duration::from_millis(500));
    let orphans = processes_naming(&folder);
    assert!(!orphans.is_empty(), "the child outlived the killed server");
    assert!(std::path::Path::new(&format!("{folder}/child.json")).exists());

    let started = Instant::now();
    let mut next = ws.forge_spawn(&["ui", "--no-open", "--port", "0"]);
    let gone = pi::poll(Duration::from_secs(5), || {
        (processes_naming(&folder).is_empty()
            && std::path::Path::new(&format!("{folder}/result.json")).exists())
        .then_some(started.elapsed())
    });
    let took = gone.unwrap_or_else(|| {
        let _ = next.kill();
        panic!(
            "within 5 s of the next server's start: child processes {:?}",
            processes_naming(&folder)
        )
    });
    eprintln!(
        "SIGKILL: the next server killed the orphan after {} ms",
        took.as_millis()
    );
    let kept = record(&folder);
    assert_eq!(kept["runId"], run);
    assert_eq!(kept["status"], "orphaned");
    assert_eq!(
        kept["error"],
        "orphaned: the pi-forge process that ran this child ended without stopping it (killed or crashed); the next pi-forge server killed its process group."
    );
    assert_eq!(kept["approval"]["source"], "human");
    assert!(!std::path::Path::new(&format!("{folder}/child.json")).exists());
    for pid in orphans {
        assert!(!alive(pid), "{pid}");
    }
    let _ = next.kill();
    let _ = next.wait();
    pi.quit();
}
