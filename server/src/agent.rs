//! `pi-forge agent plan|run|runs|result`: delegation from the terminal.
//!
//! `plan` prepares and seals the exact plan (forge-core `delegation::host::plan_run`) and prints
//! it; nothing is sent. `run` prepares, shows the approval review, and only after a person
//! approved it in this terminal starts a clean child Pi (`--mode json`, no session, no
//! extensions, skills, prompt templates, themes or context files, offline, the exact model and
//! thinking level, only the approved tools) with the child bridge (`assets/pi-child/bridge.ts`).
//! The child's process group is killed on timeout. Success comes from the final `stopReason` and
//! a committed answer; every provider request of the child is checked against the plan before it
//! is sent (forge-core `delegation::verify`), and a mismatch stops the child (`payload_mismatch`).
//!
//! Each run is kept in `<project>/.pi/forge/runs/<run id>/`: `plan.json`, `result.json` and
//! `answer.txt`; `result` prints an answer only when its SHA-256 matches `result.json`.

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use forge_core::api::{RunApproval, RunRecord};
use forge_core::canonical::sha256_hex;
use forge_core::delegation::approval::{approval_full_view, approval_summary, check_approval};
use forge_core::delegation::config::{
    max_concurrent_runs, parse_subagents_bytes, SettingsLayers, SubagentsConfig,
};
use forge_core::delegation::host::{
    child_input, plan_run, read_child_events, HostPlan, HostPlanInput, PlanIds,
};
use forge_core::delegation::plan::{SealedPlan, Stamp};
use forge_core::delegation::result::{
    commit_answer, verify_package, Answer, Attestation, CommitInput, Expected, Failure,
    PackageFiles, ResultPackage, Route,
};
use forge_core::delegation::verify::{ApprovedRequest, RequestVerifier};
use forge_core::delegation::ContractDiagnostic;
use forge_core::id::Scope;
use forge_core::json;
use forge_core::runtime::Clock;
use serde_json::{json, Value};

use crate::cli::AgentAction;
use crate::input::load_workspace;
use crate::live::new_uuid;
use crate::paths::WorkspacePaths;

/// The child bridge, shipped inside the binary.
pub const CHILD_BRIDGE: &str = include_str!("../../assets/pi-child/bridge.ts");

/// The placeholder prompt the child starts from (the bridge replaces it).
const PLACEHOLDER: &str = "pi-forge delegated task";

pub fn run(action: AgentAction) -> Result<ExitCode> {
    match action {
        AgentAction::Plan {
            profile,
            task,
            json,
            workspace,
        } => {
            let (_, prepared) = prepare(&workspace, &profile, &task, None)?;
            let Some(prepared) = prepared else {
                return Ok(ExitCode::from(1));
            };
            if json {
                println!("{}", json::to_pretty(&prepared.plan.plan.to_value()));
            } else {
                println!(
                    "{}",
                    approval_summary(&prepared.plan.plan, &task, backend())
                );
                println!("Nothing was sent. Run it with: pi-forge agent run {profile} …");
            }
            Ok(ExitCode::SUCCESS)
        }
        AgentAction::Run {
            profile,
            task,
            approve_in_terminal,
            timeout,
            workspace,
        } => {
            let (paths, prepared) =
                prepare(&workspace, &profile, &task, timeout.map(|s| s * 1_000))?;
            let Some(prepared) = prepared else {
                return Ok(ExitCode::from(1));
            };
            let (approved, viewed) = if approve_in_terminal {
                ask_approval(&prepared.plan, &task)?
            } else {
                eprintln!(
                    "pi-forge: not run: a person must approve the exact prompt first. Add --approve-in-terminal to review and approve it here, or approve it in the editor's Plans view."
                );
                return Ok(ExitCode::from(1));
            };
            if !approved {
                eprintln!("pi-forge: rejected before anything was sent; nothing ran.");
                return Ok(ExitCode::from(1));
            }
            // The approval covers the plan as sealed: prepare it again from disk with the same
            // ids and clock; any change of profile, stack or settings changes the fingerprint.
            let again = prepare_with(
                &workspace,
                &profile,
                &task,
                timeout.map(|s| s * 1_000),
                &prepared.ids,
                prepared.clock,
            )?;
            let current = again
                .1
                .as_ref()
                .map(|p| p.plan.plan.execution_fingerprint.clone())
                .unwrap_or_default();
            if let Err(stale) = check_approval(&prepared.plan.plan.execution_fingerprint, &current)
            {
                eprintln!("pi-forge: {}: {}", stale.code, stale.message);
                return Ok(ExitCode::from(1));
            }
            let approval = human_approval(&prepared.plan, viewed, "terminal");
            sweep_orphans(&paths.project);
            let record = execute(
                &paths.project,
                &prepared.plan,
                approval,
                &cancel_on_interrupt(),
            )?;
            print_record(&record);
            if record["status"] != "completed" {
                return Ok(ExitCode::from(1));
            }
            // The answer as kept on disk, checked against its record.
            let run_id = record["runId"].as_str().unwrap_or_default();
            println!("{}", verified_answer(&paths.project, run_id)?);
            Ok(ExitCode::SUCCESS)
        }
        AgentAction::Runs { json, workspace } => {
            let paths = WorkspacePaths::from_args(&workspace)?;
            let runs = list_runs(&paths.project);
            if json {
                println!("{}", json::to_pretty(&Value::Array(runs)));
            } else if runs.is_empty() {
                println!(
                    "No delegated runs in {}.",
                    runs_dir(&paths.project).display()
                );
            } else {
                for r in &runs {
                    println!(
                        "{}  {:<10} {}  {}  {} ms",
                        r["runId"].as_str().unwrap_or("?"),
                        r["status"].as_str().unwrap_or("?"),
                        r["profileId"].as_str().unwrap_or("?"),
                        r["model"].as_str().unwrap_or("?"),
                        r["durationMs"]
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AgentAction::Result { run_id, workspace } => {
            let paths = WorkspacePaths::from_args(&workspace)?;
            match verified_answer(&paths.project, &run_id) {
                Ok(answer) => {
                    println!("{answer}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("pi-forge: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}

fn backend() -> &'static str {
    forge_core::delegation::config::DEFAULT_BACKEND
}

fn read_settings(path: &Path, scope: Scope) -> Option<SubagentsConfig> {
    let bytes = std::fs::read(path).ok()?;
    let parsed = parse_subagents_bytes(&bytes, scope);
    for d in &parsed.diagnostics {
        eprintln!("pi-forge: {}: {}", path.display(), d.message);
    }
    Some(parsed.config)
}

fn print_diagnostics(diags: &[ContractDiagnostic]) {
    for d in diags {
        eprintln!(
            "pi-forge: {} {}{}: {}",
            match d.level {
                forge_core::diag::Level::Error => "error",
                forge_core::diag::Level::Warning => "warning",
                forge_core::diag::Level::Info => "info",
            },
            d.code,
            d.path
                .as_deref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default(),
            d.message
        );
    }
}

/// A sealed plan with the ids and clock it was prepared with.
struct Prepared {
    plan: HostPlan,
    ids: PlanIds,
    clock: Clock,
}

/// Loads the workspace and the delegation settings and seals a plan with fresh ids; `None`
/// after printing why it could not be prepared.
fn prepare(
    args: &crate::cli::WorkspaceArgs,
    profile: &str,
    task: &str,
    timeout_ms: Option<u64>,
) -> Result<(WorkspacePaths, Option<Prepared>)> {
    prepare_with(
        args,
        profile,
        task,
        timeout_ms,
        &new_ids(),
        crate::clock::local_clock(),
    )
}

fn prepare_with(
    args: &crate::cli::WorkspaceArgs,
    profile: &str,
    task: &str,
    timeout_ms: Option<u64>,
    ids: &PlanIds,
    clock: Clock,
) -> Result<(WorkspacePaths, Option<Prepared>)> {
    let (paths, snapshot) = load_workspace(args)?;
    let request = PlanRequest {
        profile,
        task,
        timeout_ms,
        parent_session: None,
    };
    match prepare_plan(&snapshot, &paths, &request, ids, clock) {
        Ok(plan) => {
            print_diagnostics(&plan.plan.diagnostics);
            Ok((
                paths,
                Some(Prepared {
                    plan,
                    ids: ids.clone(),
                    clock,
                }),
            ))
        }
        Err(diags) => {
            print_diagnostics(&diags);
            Ok((paths, None))
        }
    }
}

/// What a delegated run is asked for.
pub struct PlanRequest<'a> {
    pub profile: &'a str,
    pub task: &'a str,
    pub timeout_ms: Option<u64>,
    pub parent_session: Option<&'a str>,
}

/// Fresh ids for one preparation.
pub fn new_ids() -> PlanIds {
    PlanIds {
        request_id: format!("request:{}", new_uuid()),
        preflight_id: format!("preflight:{}", new_uuid()),
        stamp: Stamp {
            prepared_run_id: format!("prepared:{}", new_uuid()),
            run_id: format!("run:{}", new_uuid()),
            prepared_at: crate::live::now_iso(),
        },
    }
}

/// The project's and the global `subagents.json`, read once (absent files are `None`).
pub struct SubagentsFiles {
    project: Option<SubagentsConfig>,
    global: Option<SubagentsConfig>,
}

impl SubagentsFiles {
    pub fn read(paths: &WorkspacePaths) -> SubagentsFiles {
        SubagentsFiles {
            project: read_settings(
                &paths.project.join(".pi/forge/subagents.json"),
                Scope::Project,
            ),
            global: read_settings(&paths.global.join("subagents.json"), Scope::Global),
        }
    }

    fn layers(&self) -> SettingsLayers<'_> {
        SettingsLayers {
            global: self.global.iter().collect(),
            project: self.project.iter().collect(),
        }
    }

    /// How many children may run at once (`maxConcurrentRuns`, default 4).
    pub fn max_concurrent_runs(&self, trusted: bool) -> usize {
        max_concurrent_runs(&self.layers(), trusted) as usize
    }
}

/// Reads the delegation settings of `paths` and seals a plan over `snapshot` (the CLI and the
/// editor server share it).
pub fn prepare_plan(
    snapshot: &forge_core::workspace::WorkspaceSnapshot,
    paths: &WorkspacePaths,
    request: &PlanRequest,
    ids: &PlanIds,
    clock: Clock,
) -> std::result::Result<HostPlan, Vec<ContractDiagnostic>> {
    let files = SubagentsFiles::read(paths);
    prepare_plan_with(snapshot, paths, &files, request, ids, clock)
}

/// [`prepare_plan`] with settings already read (several plans over the same files).
pub fn prepare_plan_with(
    snapshot: &forge_core::workspace::WorkspaceSnapshot,
    paths: &WorkspacePaths,
    files: &SubagentsFiles,
    request: &PlanRequest,
    ids: &PlanIds,
    clock: Clock,
) -> std::result::Result<HostPlan, Vec<ContractDiagnostic>> {
    let layers = files.layers();
    let cwd = paths.project.display().to_string();
    plan_run(&HostPlanInput {
        workspace: snapshot,
        settings: &layers,
        trusted: paths.trusted,
        profile: request.profile,
        task: request.task,
        timeout_override_ms: request.timeout_ms,
        cwd: &cwd,
        clock,
        ids,
        parent_session: request.parent_session,
    })
}

/// The review, then `[a]pprove / [v]iew full prompt / [r]eject` on standard input (end of input
/// rejects). Returns `(approved, viewedFullPrompt)`.
fn ask_approval(prepared: &HostPlan, task: &str) -> Result<(bool, bool)> {
    let mut out = std::io::stderr();
    writeln!(out, "{}", approval_summary(&prepared.plan, task, backend()))?;
    let mut viewed = false;
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        write!(
            out,
            "Approve and run [a], view the full prompt [v], reject [r]: "
        )?;
        out.flush()?;
        let Some(line) = lines.next() else {
            return Ok((false, viewed));
        };
        match line?.trim() {
            "a" | "approve" | "y" | "yes" => return Ok((true, viewed)),
            "v" | "view" => {
                viewed = true;
                writeln!(
                    out,
                    "{}",
                    approval_full_view(&prepared.plan, task, backend())
                )?;
            }
            "r" | "reject" | "n" | "no" | "" => return Ok((false, viewed)),
            other => writeln!(out, "Unknown answer {other:?}.")?,
        }
    }
}

/// `<project>/.pi/forge/runs`.
pub fn runs_dir(project: &Path) -> PathBuf {
    project.join(".pi/forge/runs")
}

/// A run id as a folder name (`run:<uuid>` → `run-<uuid>`).
fn run_folder(project: &Path, run_id: &str) -> PathBuf {
    runs_dir(project).join(run_id.replace(':', "-"))
}

/// Writes a run file owner-only and atomically ([`crate::files::write_atomic`]).
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::files::write_atomic(path, bytes, crate::files::Access::Private)
}

/// The Pi the child runs: `PI_FORGE_PI` (an executable), else `pi` on PATH.
fn pi_command() -> Command {
    match std::env::var_os("PI_FORGE_PI").filter(|v| !v.is_empty()) {
        Some(pi) => Command::new(pi),
        None => Command::new("pi"),
    }
}

/// The approval receipt of a person's approval.
pub fn human_approval(plan: &HostPlan, viewed: bool, from: &str) -> RunApproval {
    RunApproval {
        required: true,
        approved: true,
        viewed_full_prompt: viewed,
        source: "human".into(),
        from: from.to_string(),
        execution_fingerprint: plan.plan.execution_fingerprint.clone(),
        approved_at: crate::live::now_iso(),
    }
}

/// The receipt of a run a trusted project's settings let through without review (§D8): no one
/// saw the prompt, and the receipt says so.
pub fn unattended_approval(plan: &HostPlan) -> RunApproval {
    RunApproval {
        required: false,
        approved: true,
        viewed_full_prompt: false,
        source: "trusted-project-config".into(),
        from: "subagents.json".into(),
        execution_fingerprint: plan.plan.execution_fingerprint.clone(),
        approved_at: crate::live::now_iso(),
    }
}

/// A flag Ctrl+C sets: the child runs in its own process group, so the terminal's interrupt
/// does not reach it; `execute` kills the group and records the run as cancelled.
fn cancel_on_interrupt() -> Arc<AtomicU8> {
    let flag = Arc::new(AtomicU8::new(NOT_CANCELLED));
    let set = Arc::clone(&flag);
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        if rt.block_on(tokio::signal::ctrl_c()).is_ok() {
            eprintln!("pi-forge: interrupted; stopping the subagent…");
            set.store(CANCELLED_BY_PERSON, Ordering::SeqCst);
        }
    });
    flag
}

/// Why a run was cancelled, as its record says.
pub const CANCELLED_ERROR: &str =
    "Cancelled by a person before the run finished; its process group was killed.";

/// Why a run was cancelled when the server stopped under it.
pub const SERVER_STOPPED_ERROR: &str =
    "The pi-forge server stopped before the run finished; its process group was killed.";

/// The values of a run's cancel flag: not cancelled, cancelled by a person, cancelled because
/// the server stops.
pub const NOT_CANCELLED: u8 = 0;
pub const CANCELLED_BY_PERSON: u8 = 1;
pub const CANCELLED_BY_SHUTDOWN: u8 = 2;

fn cancel_error(flag: u8) -> &'static str {
    if flag == CANCELLED_BY_SHUTDOWN {
        SERVER_STOPPED_ERROR
    } else {
        CANCELLED_ERROR
    }
}

/// A test hook: `PI_FORGE_TEST_CHILD_DRIFT` set on pi-forge makes the child differ from the
/// approved plan (`extra-message`: the bridge is handed one more user message; `extra-tool`:
/// the child also gets `find`; `model=<provider/id>`: the child runs another model), so tests
/// can show that such a request is stopped before it is sent.
fn drift() -> Option<String> {
    std::env::var("PI_FORGE_TEST_CHILD_DRIFT")
        .ok()
        .filter(|v| !v.is_empty())
}

/// What the request checker found (shared with the run's main loop).
#[derive(Default)]
struct Checked {
    /// SHA-256 of every request that was checked and sent.
    hashes: Vec<String>,
    /// The first mismatch (the child was killed before that request was sent).
    mismatch: Option<String>,
}

/// Answers the child bridge's "may I send this?" (one connection per provider request:
/// `<nonce>\n<payload JSON>`, then `ok` or `mismatch`). A mismatch kills the child's process
/// group before the answer is written, so the request never leaves.
fn serve_checks(
    listener: TcpListener,
    nonce: String,
    mut verifier: RequestVerifier,
    pgid: u32,
    folder: PathBuf,
    checked: Arc<Mutex<Checked>>,
    done: Arc<std::sync::atomic::AtomicBool>,
) {
    for stream in listener.incoming() {
        if done.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
        let mut bytes = Vec::new();
        if stream.read_to_end(&mut bytes).is_err() {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let (line, payload) = text.split_once('\n').unwrap_or((&text, ""));
        if line != nonce {
            // Not the child: nothing is checked or answered.
            continue;
        }
        let payload = payload.trim_end_matches('\n');
        let verdict = match json::parse_str(payload) {
            Ok(value) => verifier.check(&value).map_err(|e| e.0),
            Err(e) => Err(format!("the request is not JSON: {e}")),
        };
        let mut state = checked.lock().unwrap_or_else(|e| e.into_inner());
        match verdict {
            Ok(()) => {
                state.hashes.push(sha256_hex(payload.as_bytes()));
                drop(state);
                let _ = write_payload_line(&folder.join("payloads.jsonl"), payload);
                let _ = stream.write_all(b"ok\n");
            }
            Err(reason) => {
                kill_group(pgid);
                state.mismatch.get_or_insert(reason);
                drop(state);
                let _ = write_private(&folder.join("refused-request.json"), payload.as_bytes());
                let _ = stream.write_all(b"mismatch\n");
                return;
            }
        }
    }
}

fn write_payload_line(path: &Path, payload: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(payload.as_bytes())?;
    file.write_all(b"\n")
}

/// Creates the run's folder and writes its `plan.json` (owner-only); the folder.
fn create_run_folder(project: &Path, prepared: &HostPlan) -> Result<PathBuf> {
    let plan = &prepared.plan;
    let folder = run_folder(project, &plan.run_id);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    write_private(
        &folder.join("plan.json"),
        json::to_pretty(&plan.to_value()).as_bytes(),
    )?;
    Ok(folder)
}

/// Writes the record of an approved run that never started its child (cancelled while queued,
/// no slot within its queue wait, the server stopping): `status` and `error` say why.
pub fn record_unstarted(
    project: &Path,
    prepared: &HostPlan,
    approval: RunApproval,
    status: &'static str,
    error: String,
) -> Result<Value> {
    let folder = create_run_folder(project, prepared)?;
    let outcome = read_child_events("");
    let ended = Ended {
        status,
        error: Some(error),
        started_at: crate::live::now_iso(),
        duration_ms: 0,
        payload_hashes: Vec::new(),
        answer: None,
        directive_sha256: String::new(),
    };
    keep_record(&folder, prepared, approval, &outcome, ended)
}

/// Runs the approved plan in a child Pi and keeps the run record (blocking; the server calls it
/// on a blocking thread). Setting `cancel` ([`CANCELLED_BY_PERSON`], [`CANCELLED_BY_SHUTDOWN`])
/// stops the run: the child's process group is killed and the run is recorded as `cancelled`
/// (a run cancelled before it started never starts).
///
/// Every provider request the child is about to send is first handed to this process by the
/// child bridge (a loopback connection with a per-run nonce) and checked against the plan
/// ([`RequestVerifier`]); the bridge sends only on `ok`. A mismatch kills the process group
/// before the answer, and the run is recorded as `payload_mismatch`.
pub fn execute(
    project: &Path,
    prepared: &HostPlan,
    approval: RunApproval,
    cancel: &AtomicU8,
) -> Result<Value> {
    let plan = &prepared.plan;
    let folder = create_run_folder(project, prepared)?;
    let listener =
        TcpListener::bind("127.0.0.1:0").context("cannot listen for the child's requests")?;
    let check_port = listener.local_addr()?.port();
    let nonce: String = crate::live::random_bytes::<16>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut input = child_input(plan, chrono::Utc::now().timestamp_millis() as f64);
    let facts_path = folder.join("child-facts.json");
    let drift = drift();
    let mut model = format!("{}/{}", plan.model.provider, plan.model.id);
    let mut tools = plan.effective_tool_names.clone();
    match drift.as_deref() {
        Some("extra-message") => {
            if let Some(messages) = input["messages"].as_array_mut() {
                let mut extra = messages.last().cloned().unwrap_or(Value::Null);
                extra["content"] = json!([{"type": "text", "text": "An unapproved message."}]);
                messages.push(extra);
            }
        }
        Some("extra-tool") => tools.push("find".into()),
        Some(other) if other.starts_with("model=") => model = other["model=".len()..].to_string(),
        _ => {}
    }
    if let Some(map) = input.as_object_mut() {
        map.insert("factsOut".into(), json!(facts_path.display().to_string()));
        map.insert("check".into(), json!({"port": check_port, "nonce": nonce}));
        map.insert("tools".into(), json!(tools));
    }
    let input_path = folder.join("child-input.json");
    let input_bytes = json::to_compact(&input);
    let directive_sha256 = sha256_hex(input_bytes.as_bytes());
    write_private(&input_path, input_bytes.as_bytes())?;
    let bridge = folder.join("bridge.ts");
    write_private(&bridge, CHILD_BRIDGE.as_bytes())?;

    let mut cmd = pi_command();
    cmd.args([
        "--mode",
        "json",
        "-p",
        "--no-session",
        "-ne",
        "-ns",
        "-np",
        "-nc",
    ])
    .args(["--no-themes", "--offline"])
    .args(["--model", &model])
    .args(["--thinking", &plan.thinking_level]);
    if tools.is_empty() {
        cmd.arg("--no-tools");
    } else {
        cmd.args(["--tools", &tools.join(",")]);
    }
    cmd.arg("-e")
        .arg(&bridge)
        .arg(PLACEHOLDER)
        .current_dir(project)
        .env("PI_FORGE_CHILD_INPUT", &input_path)
        .env_remove("PI_FORGE_TEST_CHILD_DRIFT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        cmd.process_group(0);
    }
    let started = Instant::now();
    let started_at = crate::live::now_iso();
    let flag = cancel.load(Ordering::SeqCst);
    if flag != NOT_CANCELLED {
        let _ = std::fs::remove_file(&input_path);
        let _ = std::fs::remove_file(&bridge);
        let outcome = read_child_events("");
        let ended = Ended {
            status: "cancelled",
            error: Some(cancel_error(flag).to_string()),
            started_at,
            duration_ms: 0,
            payload_hashes: Vec::new(),
            answer: None,
            directive_sha256,
        };
        return keep_record(&folder, prepared, approval, &outcome, ended);
    }
    let mut child = cmd.spawn().context(
        "cannot start the child Pi (set PI_FORGE_PI to Pi's executable, or put `pi` on PATH)",
    )?;
    let pid = child.id();
    // Kept until the group is gone: a server that starts after a crash finds and kills it.
    let _ = register_child(&folder, pid, prepared, &approval, &started_at);
    let checked = Arc::new(Mutex::new(Checked::default()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checker = {
        let checked = Arc::clone(&checked);
        let done = Arc::clone(&done);
        let folder = folder.clone();
        let verifier = RequestVerifier::new(ApprovedRequest::from_plan(plan));
        std::thread::spawn(move || {
            serve_checks(listener, nonce, verifier, pid, folder, checked, done)
        })
    };
    let mut stdout = child.stdout.take().context("child stdout")?;
    let mut stderr = child.stderr.take().context("child stderr")?;
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = started + Duration::from_millis(prepared.timeout_ms);
    let mut timed_out = false;
    let mut cancelled = NOT_CANCELLED;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        cancelled = cancel.load(Ordering::SeqCst);
        timed_out = Instant::now() >= deadline;
        let refused = checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .mismatch
            .is_some();
        if cancelled != NOT_CANCELLED || timed_out || refused {
            kill_group(pid);
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The whole group goes, also when the child itself exited first.
    kill_group(pid);
    let _ = std::fs::remove_file(folder.join(CHILD_FILE));
    done.store(true, Ordering::SeqCst);
    // Wakes the checker if it waits for a connection.
    let _ = TcpStream::connect(("127.0.0.1", check_port));
    let _ = checker.join();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let duration_ms = started.elapsed().as_millis() as u64;
    let _ = std::fs::remove_file(&input_path);
    let _ = std::fs::remove_file(&bridge);

    // The child's event stream is the run's transcript.
    write_private(&folder.join("transcript.jsonl"), stdout.as_bytes())?;
    let mut outcome = read_child_events(&stdout);
    if let Some(level) = std::fs::read(&facts_path)
        .ok()
        .and_then(|b| json::parse_bytes(&b).ok())
        .and_then(|v| v["thinkingLevel"].as_str().map(str::to_string))
    {
        outcome.thinking_level = Some(level);
    }
    let _ = std::fs::remove_file(&facts_path);
    let (payload_hashes, mismatch) = {
        let mut state = checked.lock().unwrap_or_else(|e| e.into_inner());
        (std::mem::take(&mut state.hashes), state.mismatch.take())
    };
    let mut committed = None;
    let (status, error) = if let Some(e) = mismatch {
        (
            "payload_mismatch",
            Some(format!(
                "payload_mismatch: {e}; the child was stopped before the request was sent."
            )),
        )
    } else if cancelled != NOT_CANCELLED {
        ("cancelled", Some(cancel_error(cancelled).to_string()))
    } else if timed_out {
        (
            "timed-out",
            Some(format!(
                "The run took longer than {} s; its process group was killed.",
                prepared.timeout_ms / 1_000
            )),
        )
    } else if payload_hashes.is_empty() {
        (
            "failed",
            Some(format!(
                "The child sent no request to the model. {}",
                stderr.lines().last().unwrap_or("")
            )),
        )
    } else {
        // The commit rule (§E2): only a final `stop` with a non-blank answer commits.
        match commit_answer(&CommitInput {
            stop_reason: outcome.stop_reason.as_deref().unwrap_or(""),
            text: Some(outcome.answer.as_str()).filter(|t| !t.is_empty()),
            degraded: None,
        }) {
            Ok(answer) => {
                committed = Some(answer);
                ("completed", None)
            }
            Err(code) => (
                "failed",
                Some(format!(
                    "{}: the child ended with stopReason {}{}.",
                    code.as_str(),
                    outcome.stop_reason.as_deref().unwrap_or("none"),
                    outcome
                        .error_message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                )),
            ),
        }
    };
    let ended = Ended {
        status,
        error,
        started_at,
        duration_ms,
        payload_hashes,
        answer: committed,
        directive_sha256,
    };
    keep_record(&folder, prepared, approval, &outcome, ended)
}

/// How a run ended, as `execute` found it.
struct Ended {
    status: &'static str,
    error: Option<String>,
    started_at: String,
    duration_ms: u64,
    payload_hashes: Vec<String>,
    /// The committed answer of a run that completed.
    answer: Option<Answer>,
    /// SHA-256 of the input the child bridge forced (prompt, messages, tools).
    directive_sha256: String,
}

/// The run's result package (§E2, `package.json`): the committed answer in blocks with per-block
/// and aggregate SHA-256, bound to the run id, a launch nonce, `plan.json` (the seed) and the
/// routes the child's requests took.
fn package(
    folder: &Path,
    plan: &forge_core::delegation::plan::SealedPlan,
    outcome: &forge_core::delegation::host::ChildOutcome,
    answer: Answer,
    directive_sha256: &str,
    launch_nonce: &str,
) -> Result<ResultPackage> {
    let seed = std::fs::read(folder.join("plan.json")).context("plan.json of the run")?;
    let usage = match &outcome.usage {
        Some(usage) => json!({"status": "observed", "usage": usage}),
        None => json!({"status": "unavailable", "reason": "Pi reported no usage for this run."}),
    };
    Ok(ResultPackage {
        task_id: plan.run_id.clone(),
        launch_nonce: launch_nonce.to_string(),
        seed_sha256: sha256_hex(&seed),
        directive_sha256: directive_sha256.to_string(),
        route: Route::new(plan.model.provider.clone(), plan.model.id.clone()),
        route_attestations: outcome
            .routes
            .iter()
            .map(|(provider, model, stop)| Attestation {
                route: Route::new(provider.clone(), model.clone()),
                stop_reason: stop.clone(),
            })
            .collect(),
        stop_reason: outcome.stop_reason.clone().unwrap_or_default(),
        turns: outcome.turns,
        tool_calls: outcome.tool_calls,
        usage,
        answer,
        spilled_artifacts: Vec::new(),
    })
}

/// Writes the result package of a completed run, then `answer.txt` (a readable copy of the
/// verified answer; empty for a run without one) and last `result.json`, the record that seals
/// the run. A package that does not verify (the child's requests took another route, …) turns
/// the run into a failure with the verification's code.
fn keep_record(
    folder: &Path,
    prepared: &HostPlan,
    approval: RunApproval,
    outcome: &forge_core::delegation::host::ChildOutcome,
    mut ended: Ended,
) -> Result<Value> {
    let plan = &prepared.plan;
    let launch_nonce: String = crate::live::random_bytes::<16>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut answer = String::new();
    if let Some(committed) = ended.answer.take() {
        let package = package(
            folder,
            plan,
            outcome,
            committed,
            &ended.directive_sha256,
            &launch_nonce,
        )?;
        let bytes = package.to_bytes();
        write_private(&folder.join("package.json"), &bytes)?;
        match verify_run_package(folder, &plan.run_id, &launch_nonce, plan_route(plan)) {
            Ok(verified) => answer = verified,
            Err(failure) => {
                ended.status = "failed";
                ended.error = Some(format!("{}: {}", failure.code.as_str(), failure.message));
            }
        }
    }
    write_private(&folder.join("answer.txt"), answer.as_bytes())?;
    let record = RunRecord {
        schema_version: 1,
        run_id: plan.run_id.clone(),
        request_id: plan.request_id.clone(),
        profile_id: plan.profile.profile_id.to_string(),
        backend_id: backend().to_string(),
        status: ended.status.to_string(),
        error: ended.error,
        model: format!("{}/{}", plan.model.provider, plan.model.id),
        thinking_level: plan.thinking_level.clone(),
        used_thinking_level: outcome.thinking_level.clone(),
        effective_tools: plan.effective_tool_names.clone(),
        execution_fingerprint: plan.execution_fingerprint.clone(),
        conversation_fingerprint: plan.conversation_fingerprint.clone(),
        approval,
        started_at: ended.started_at,
        launch_nonce: Some(launch_nonce),
        duration_ms: ended.duration_ms,
        usage: outcome.usage.clone(),
        turns: outcome.turns,
        tool_calls: outcome.tool_calls,
        payload_sha256: ended.payload_hashes,
        answer_sha256: sha256_hex(answer.as_bytes()),
        result_max_chars: plan
            .result_projection
            .get("maxChars")
            .and_then(Value::as_u64),
        answer_bytes: answer.len() as u64,
    };
    let record = serde_json::to_value(&record).context("the run record")?;
    write_private(
        &folder.join("result.json"),
        json::to_pretty(&record).as_bytes(),
    )?;
    Ok(record)
}

fn kill_group(pid: u32) {
    crate::process::signal_group(pid, crate::process::StopSignal::Kill);
}

/// The file in a run's folder that names its running child (`pid`, `pgid`, the start times of
/// the child and of the pi-forge process that owns it, and the run's record so far). It exists
/// only while the child's group may be alive.
pub const CHILD_FILE: &str = "child.json";

/// Why a run whose owner died is recorded as `orphaned`.
pub const ORPHANED_ERROR: &str = "orphaned: the pi-forge process that ran this child ended without stopping it (killed or crashed); the next pi-forge server killed its process group.";

/// A process's start time (clock ticks since boot) and process group from `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let pgid = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, pgid))
}

/// A process's environment as `NAME=value` entries (Pi rewrites its command line through
/// `process.title`, its environment stays as it was started).
fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|e| {
            e.split(|b| *b == 0)
                .map(|v| String::from_utf8_lossy(v).to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn register_child(
    folder: &Path,
    pid: u32,
    prepared: &HostPlan,
    approval: &RunApproval,
    started_at: &str,
) -> Result<()> {
    let plan = &prepared.plan;
    let record = RunRecord {
        schema_version: 1,
        run_id: plan.run_id.clone(),
        request_id: plan.request_id.clone(),
        profile_id: plan.profile.profile_id.to_string(),
        backend_id: backend().to_string(),
        status: "running".into(),
        error: None,
        model: format!("{}/{}", plan.model.provider, plan.model.id),
        thinking_level: plan.thinking_level.clone(),
        used_thinking_level: None,
        effective_tools: plan.effective_tool_names.clone(),
        execution_fingerprint: plan.execution_fingerprint.clone(),
        conversation_fingerprint: plan.conversation_fingerprint.clone(),
        approval: approval.clone(),
        started_at: started_at.to_string(),
        launch_nonce: None,
        duration_ms: 0,
        usage: None,
        turns: 0,
        tool_calls: 0,
        payload_sha256: Vec::new(),
        answer_sha256: sha256_hex(b""),
        result_max_chars: plan
            .result_projection
            .get("maxChars")
            .and_then(Value::as_u64),
        answer_bytes: 0,
    };
    let owner = std::process::id();
    let entry = json!({
        "pid": pid,
        "pgid": pid,
        "startTime": proc_stat(pid).map(|s| s.0),
        "input": folder.join("child-input.json").display().to_string(),
        "ownerPid": owner,
        "ownerStartTime": proc_stat(owner).map(|s| s.0),
        "record": serde_json::to_value(&record).context("the run record")?,
    });
    write_private(&folder.join(CHILD_FILE), json::to_pretty(&entry).as_bytes())
}

/// Whether the process group `pgid` recorded in `entry` is still this run's child: its leader
/// runs with the recorded start time and `PI_FORGE_CHILD_INPUT` naming this run's input in its
/// environment, or the leader is
/// gone and processes of the group remain (a group id is not reused while the group has
/// members). A reused pid never matches.
fn group_is_ours(entry: &Value) -> Option<u32> {
    let pgid = u32::try_from(entry["pgid"].as_u64()?).ok()?;
    let input = format!("PI_FORGE_CHILD_INPUT={}", entry["input"].as_str()?);
    match proc_stat(pgid) {
        Some((start, group)) => {
            let same = Some(start) == entry["startTime"].as_u64()
                && group == pgid
                && environ(pgid).contains(&input);
            same.then_some(pgid)
        }
        None => {
            let members = std::fs::read_dir("/proc")
                .ok()?
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .any(|pid| proc_stat(pid).is_some_and(|(_, g)| g == pgid));
            members.then_some(pgid)
        }
    }
}

/// Finds the runs of `project` whose child outlived the pi-forge process that ran it (killed,
/// crashed), kills each one's process group and records the run as `orphaned`. Runs whose owner
/// still runs (another server, a terminal `pi-forge agent run`) are left alone. Returns the run
/// ids it marked.
pub fn sweep_orphans(project: &Path) -> Vec<String> {
    let mut marked = Vec::new();
    for entry in std::fs::read_dir(runs_dir(project))
        .into_iter()
        .flatten()
        .flatten()
    {
        let folder = entry.path();
        let Some(child) = std::fs::read(folder.join(CHILD_FILE))
            .ok()
            .and_then(|b| json::parse_bytes(&b).ok())
        else {
            continue;
        };
        let owner_alive = child["ownerPid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .and_then(proc_stat)
            .is_some_and(|(start, _)| Some(start) == child["ownerStartTime"].as_u64());
        if owner_alive {
            continue;
        }
        if let Some(pgid) = group_is_ours(&child) {
            kill_group(pgid);
        }
        let mut record = child["record"].clone();
        if folder.join("result.json").exists() || !record.is_object() {
            let _ = std::fs::remove_file(folder.join(CHILD_FILE));
            continue;
        }
        let run_id = record["runId"].as_str().unwrap_or_default().to_string();
        record["status"] = json!("orphaned");
        record["error"] = json!(ORPHANED_ERROR);
        if let Ok(started) =
            chrono::DateTime::parse_from_rfc3339(record["startedAt"].as_str().unwrap_or_default())
        {
            let ms = (chrono::Utc::now() - started.with_timezone(&chrono::Utc)).num_milliseconds();
            record["durationMs"] = json!(ms.max(0));
        }
        let _ = write_private(&folder.join("answer.txt"), b"");
        if write_private(
            &folder.join("result.json"),
            json::to_pretty(&record).as_bytes(),
        )
        .is_ok()
        {
            let _ = std::fs::remove_file(folder.join(CHILD_FILE));
            for name in ["child-input.json", "bridge.ts"] {
                let _ = std::fs::remove_file(folder.join(name));
            }
            eprintln!("pi-forge: run {run_id} was orphaned; its process group was killed");
            marked.push(run_id);
        }
    }
    marked
}

fn print_record(record: &Value) {
    let status = record["status"].as_str().unwrap_or("?");
    let asked = record["thinkingLevel"].as_str().unwrap_or("?");
    let used = record["usedThinkingLevel"].as_str().unwrap_or(asked);
    let clamp = if used == asked {
        String::new()
    } else {
        format!(" (the profile asked for {asked})")
    };
    eprintln!(
        "pi-forge: run {} {status} in {} ms ({}, thinking {used}{clamp}).",
        record["runId"].as_str().unwrap_or("?"),
        record["durationMs"],
        record["model"].as_str().unwrap_or("?"),
    );
    if let Some(error) = record["error"].as_str() {
        eprintln!("pi-forge: {error}");
    }
}

/// The kept run records, oldest first.
pub fn list_runs(project: &Path) -> Vec<Value> {
    list_runs_with(project, Vec::new())
}

/// The kept run records and the runs in `active` that have no record yet, oldest first.
pub fn list_runs_with(project: &Path, active: Vec<Value>) -> Vec<Value> {
    let mut runs: Vec<Value> = std::fs::read_dir(runs_dir(project))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("result.json")).ok())
        .filter_map(|bytes| json::parse_bytes(&bytes).ok())
        .collect();
    for run in active {
        if !runs.iter().any(|r| r["runId"] == run["runId"]) {
            runs.push(run);
        }
    }
    runs.sort_by(|a, b| {
        a["startedAt"]
            .as_str()
            .unwrap_or("")
            .cmp(b["startedAt"].as_str().unwrap_or(""))
    });
    runs
}

/// The kept record of one run (`None` for an id that is not a run id or has no record).
pub fn read_run(project: &Path, run_id: &str) -> Option<Value> {
    if !forge_core::delegation::is_opaque_id(run_id) {
        return None;
    }
    let bytes = std::fs::read(run_folder(project, run_id).join("result.json")).ok()?;
    json::parse_bytes(&bytes).ok()
}

/// What a run folder keeps besides its record, as the Runs view shows it.
pub struct RunFiles {
    /// The approved system prompt and messages (`plan.json`).
    pub prompt: Option<forge_core::api::PlanPrompt>,
    /// The child's messages (`transcript.jsonl`).
    pub transcript: Vec<forge_core::delegation::host::TranscriptEntry>,
}

impl RunFiles {
    /// Reads them (missing or unreadable files give nothing; the record is what counts).
    pub fn read(project: &Path, run_id: &str) -> RunFiles {
        if !forge_core::delegation::is_opaque_id(run_id) {
            return RunFiles {
                prompt: None,
                transcript: Vec::new(),
            };
        }
        let folder = run_folder(project, run_id);
        let prompt = std::fs::read(folder.join("plan.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let transcript = std::fs::read_to_string(folder.join("transcript.jsonl"))
            .map(|t| forge_core::delegation::host::transcript(&t))
            .unwrap_or_default();
        RunFiles { prompt, transcript }
    }
}

fn plan_route(plan: &SealedPlan) -> Route {
    Route::new(plan.model.provider.clone(), plan.model.id.clone())
}

/// Verifies a run's `package.json` in the §E2 order against the run id, the launch nonce and the
/// route pinned at launch and `plan.json` as kept; the answer comes from the verified bytes.
fn verify_run_package(
    folder: &Path,
    run_id: &str,
    launch_nonce: &str,
    route: Route,
) -> std::result::Result<String, Failure> {
    let seed = std::fs::read(folder.join("plan.json")).unwrap_or_default();
    let package = std::fs::read(folder.join("package.json")).ok();
    let expected = Expected {
        task_id: run_id,
        launch_nonce,
        route: &route,
    };
    let files = PackageFiles {
        seed_json: &seed,
        result_json: package.as_deref(),
    };
    verify_package(files, &expected).map(|v| v.text)
}

/// The run's answer, verified before anything is returned: the record says it completed, its
/// result package (`package.json`) passes every §E2 check (`answer_hash_mismatch`,
/// `route_mismatch`, `child_exited_without_commit`, …) against the run id, the launch nonce
/// and the model of `plan.json`, and `answer.txt`, the readable copy, is exactly the verified
/// answer. A record without a launch nonce (kept before packages existed) is checked against
/// its `answerSha256` alone.
pub fn verified_answer(project: &Path, run_id: &str) -> Result<String> {
    if !forge_core::delegation::is_opaque_id(run_id) {
        bail!("{run_id:?} is not a run id (run:<uuid>, as `pi-forge agent runs` lists them)");
    }
    let folder = run_folder(project, run_id);
    let record = std::fs::read(folder.join("result.json"))
        .with_context(|| format!("no run {run_id} in {}", runs_dir(project).display()))?;
    let record = json::parse_bytes(&record)
        .map_err(|e| anyhow::anyhow!("result.json of run {run_id} is not valid JSON: {e}"))?;
    let answer = std::fs::read(folder.join("answer.txt"))
        .with_context(|| format!("answer.txt of run {run_id} is missing"))?;
    if record["status"] != "completed" {
        bail!(
            "run {run_id} did not complete ({}): {}",
            record["status"].as_str().unwrap_or("?"),
            record["error"].as_str().unwrap_or("no answer")
        );
    }
    let expected = match record["launchNonce"].as_str() {
        Some(nonce) => {
            let plan: Value = std::fs::read(folder.join("plan.json"))
                .ok()
                .and_then(|b| json::parse_bytes(&b).ok())
                .unwrap_or(Value::Null);
            let route = Route::new(
                plan["model"]["provider"].as_str().unwrap_or_default(),
                plan["model"]["id"].as_str().unwrap_or_default(),
            );
            let verified = verify_run_package(&folder, run_id, nonce, route)
                .map_err(|f| anyhow::anyhow!("{}: {}", f.code.as_str(), f.message))?;
            sha256_hex(verified.as_bytes())
        }
        None => record["answerSha256"].as_str().unwrap_or("").to_string(),
    };
    let actual = sha256_hex(&answer);
    if expected != actual {
        bail!(
            "answer_hash_mismatch: answer.txt of run {run_id} has SHA-256 {actual}, the verified answer has {expected}; it was changed after the run and is not shown"
        );
    }
    String::from_utf8(answer).context("answer.txt is not UTF-8")
}
