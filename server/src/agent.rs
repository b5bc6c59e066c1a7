//! `pi-forge agent plan|run|runs|result`: delegation from the terminal.
//!
//! `plan` prepares and seals the exact plan (forge-core `delegation::host::plan_run`) and prints
//! it; nothing is sent. `run` prepares, shows the approval review, and only after a person
//! approved it in this terminal starts a clean child Pi (`--mode json`, no session, no
//! extensions, skills, prompt templates, themes or context files, offline, the exact model and
//! thinking level, only the approved tools) with the child bridge (`assets/pi-child/bridge.ts`).
//! The child's process group is killed on timeout. Success comes from the final `stopReason` and
//! a committed answer; every provider request the child recorded is checked against the plan.
//!
//! Each run is kept in `<project>/.pi/forge/runs/<run id>/`: `plan.json`, `result.json` and
//! `answer.txt`; `result` prints an answer only when its SHA-256 matches `result.json`.

use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use forge_core::api::{RunApproval, RunRecord};
use forge_core::canonical::sha256_hex;
use forge_core::delegation::approval::{approval_full_view, approval_summary, check_approval};
use forge_core::delegation::config::{
    max_concurrent_runs, parse_subagents_bytes, SettingsLayers, SubagentsConfig,
};
use forge_core::delegation::host::{
    child_input, plan_run, read_child_events, verify_payload, HostPlan, HostPlanInput, PlanIds,
};
use forge_core::delegation::plan::{SealedPlan, Stamp};
use forge_core::delegation::result::{
    commit_answer, verify_package, Answer, Attestation, CommitInput, Expected, Failure,
    PackageFiles, ResultPackage, Route,
};
use forge_core::delegation::ContractDiagnostic;
use forge_core::id::Scope;
use forge_core::json;
use forge_core::runtime::Clock;
use serde_json::{json, Value};

use crate::cli::AgentAction;
use crate::commands::load_workspace;
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
        crate::http::local_clock(),
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

/// Writes a run file owner-only and atomically: a temporary file beside it, fsync, rename over
/// the target, fsync of the folder (a crash leaves the old file or the new one, never half).
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let folder = path.parent().context("a run file has a folder")?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .context("a run file has a name")?;
    let temp = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let written = (|| -> std::io::Result<()> {
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // Where folders cannot be opened or synced, the rename stands on its own.
        if let Ok(dir) = std::fs::File::open(folder) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
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
fn cancel_on_interrupt() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
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
            set.store(true, Ordering::SeqCst);
        }
    });
    flag
}

/// Why a run was cancelled, as its record says.
pub const CANCELLED_ERROR: &str =
    "Cancelled by a person before the run finished; its process group was killed.";

/// Runs the approved plan in a child Pi and keeps the run record (blocking; the server calls it
/// on a blocking thread). Setting `cancel` stops the run: the child's process group is killed
/// and the run is recorded as `cancelled` (a run cancelled before it started never starts).
pub fn execute(
    project: &Path,
    prepared: &HostPlan,
    approval: RunApproval,
    cancel: &AtomicBool,
) -> Result<Value> {
    let plan = &prepared.plan;
    let folder = run_folder(project, &plan.run_id);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    write_private(
        &folder.join("plan.json"),
        json::to_pretty(&plan.to_value()).as_bytes(),
    )?;
    let payloads = folder.join("payloads.jsonl");
    let mut input = child_input(plan, chrono::Utc::now().timestamp_millis() as f64);
    let facts_path = folder.join("child-facts.json");
    if let Some(map) = input.as_object_mut() {
        map.insert("payloadOut".into(), json!(payloads.display().to_string()));
        map.insert("factsOut".into(), json!(facts_path.display().to_string()));
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
    .args([
        "--model",
        &format!("{}/{}", plan.model.provider, plan.model.id),
    ])
    .args(["--thinking", &plan.thinking_level]);
    if plan.effective_tool_names.is_empty() {
        cmd.arg("--no-tools");
    } else {
        cmd.args(["--tools", &plan.effective_tool_names.join(",")]);
    }
    cmd.arg("-e")
        .arg(&bridge)
        .arg(PLACEHOLDER)
        .current_dir(project)
        .env("PI_FORGE_CHILD_INPUT", &input_path)
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
    if cancel.load(Ordering::SeqCst) {
        let _ = std::fs::remove_file(&input_path);
        let _ = std::fs::remove_file(&bridge);
        let outcome = read_child_events("");
        let ended = Ended {
            status: "cancelled",
            error: Some(CANCELLED_ERROR.to_string()),
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
    let mut cancelled = false;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        cancelled = cancel.load(Ordering::SeqCst);
        timed_out = Instant::now() >= deadline;
        if cancelled || timed_out {
            kill_group(pid);
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The whole group goes, also when the child itself exited first.
    kill_group(pid);
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
    let recorded = std::fs::read_to_string(&payloads).unwrap_or_default();
    let mut payload_hashes = Vec::new();
    let mut mismatch = None;
    for line in recorded.lines().filter(|l| !l.is_empty()) {
        payload_hashes.push(sha256_hex(line.as_bytes()));
        match json::parse_str(line) {
            Ok(payload) => {
                if let Err(e) = verify_payload(plan, &payload) {
                    mismatch.get_or_insert(e);
                }
            }
            Err(e) => {
                mismatch.get_or_insert(format!("a recorded request is not JSON: {e}"));
            }
        }
    }
    let mut committed = None;
    let (status, error) = if cancelled {
        ("cancelled", Some(CANCELLED_ERROR.to_string()))
    } else if timed_out {
        (
            "timed-out",
            Some(format!(
                "The run took longer than {} s; its process group was killed.",
                prepared.timeout_ms / 1_000
            )),
        )
    } else if let Some(e) = mismatch {
        ("failed", Some(format!("payload_mismatch: {e}")))
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
    #[cfg(unix)]
    {
        // `--` first: procps reads a bare `-PGID` after the signal as another signal.
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    #[cfg(not(unix))]
    let _ = pid;
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
