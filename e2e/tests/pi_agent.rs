//! Delegation from the terminal against a real Pi 1.6.0 child and a fake model that records what
//! it receives: `pi-forge agent plan|run|runs|result`. The child must send exactly the approved
//! system prompt and messages with only the approved tools; a rejected plan sends nothing; an
//! altered answer is refused; a timed-out child leaves no process behind.

mod pi;
mod support;

use pi::delegation::{parent_session_with, CHILD, PARENT, REVIEWER, SETTINGS};
use pi::{message_texts, tool_names, Workspace};
use serde_json::{json, Value};

fn workspace(settings: &str) -> Workspace {
    Workspace::new(&[
        (".pi/forge/prompt-stacks/child.json", CHILD),
        (".pi/forge/agent-profiles/reviewer.json", REVIEWER),
        (".pi/forge/subagents.json", settings),
    ])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// The command lines and environments of the running processes that name `path` (a run's
/// folder). Pi rewrites its command line to `pi` (`process.title`); the child's environment
/// keeps `PI_FORGE_CHILD_INPUT` with the folder.
fn processes_naming(path: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let mut seen = std::fs::read(e.path().join("cmdline")).ok()?;
            seen.extend(std::fs::read(e.path().join("environ")).unwrap_or_default());
            Some(seen)
        })
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(path))
        .collect()
}

fn folder_has_transcript(ws: &Workspace, run_id: &str) -> bool {
    let path = ws
        .project()
        .join(".pi/forge/runs")
        .join(run_id.replace(':', "-"))
        .join("transcript.jsonl");
    std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l.contains("\"agent_end\"")))
}

#[test]
fn the_thinking_level_pi_used_is_reported_when_it_clamps_the_profiles() {
    let ws = Workspace::new(&[
        (".pi/forge/prompt-stacks/child.json", CHILD),
        (
            ".pi/forge/agent-profiles/reviewer.json",
            &REVIEWER.replace("\"thinkingLevel\": \"off\"", "\"thinkingLevel\": \"high\""),
        ),
        (".pi/forge/subagents.json", SETTINGS),
    ]);
    let out = ws.forge_input(
        &[
            "agent",
            "run",
            "reviewer",
            "Summarize src/",
            "--approve-in-terminal",
        ],
        "a\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(" (fake/fake-1, thinking off (the profile asked for high)).\n"),
        "{err}"
    );
}

#[test]
fn a_plan_is_printed_and_nothing_is_sent() {
    let ws = workspace(SETTINGS);
    let out = ws.forge(&["agent", "plan", "reviewer", "Summarize src/", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["systemPrompt"], "You are CHILD REVIEWER.");
    assert_eq!(plan["model"], json!({"provider": "fake", "id": "fake-1"}));
    assert_eq!(plan["effectiveToolIds"], json!(["pi.read", "pi.grep"]));
    assert_eq!(plan["profile"]["profileId"], "project:reviewer");
    let roles: Vec<(&str, &str)> = plan["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["source"].as_str().unwrap(),
                m["content"][0]["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("prompt-stack", "Be brief."),
            ("delegated-task", "Summarize src/")
        ]
    );
    assert!(plan["executionFingerprint"]
        .as_str()
        .unwrap()
        .starts_with("sha256:v1:"));
    assert!(ws.model.bodies().is_empty());

    // The review lists what a person approves.
    let out = ws.forge(&["agent", "plan", "reviewer", "Summarize src/"]);
    assert!(out.status.success());
    let review = text(&out.stdout);
    assert!(
        review.starts_with("Subagent approval: project:reviewer\n"),
        "{review}"
    );
    assert!(review.contains("\nModel: fake/fake-1\n"), "{review}");
    assert!(review.ends_with("Nothing was sent. Run it with: pi-forge agent run reviewer …\n"));
}

#[test]
fn an_approved_run_sends_exactly_the_plan_and_the_answer_is_verified() {
    let ws = workspace(SETTINGS);
    let out = ws.forge_input(
        &[
            "agent",
            "run",
            "reviewer",
            "Summarize src/",
            "--approve-in-terminal",
        ],
        "v\na\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ok from fake\n");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--- SYSTEM PROMPT ---"),
        "the full prompt was shown: {stderr}"
    );

    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        message_texts(&bodies[0]),
        [
            ("system".to_string(), "You are CHILD REVIEWER.".to_string()),
            ("user".to_string(), "Be brief.".to_string()),
            ("user".to_string(), "Summarize src/".to_string()),
        ]
    );
    assert_eq!(tool_names(&bodies[0]), ["grep", "read"]);
    assert_eq!(bodies[0]["model"], "fake-1");

    let out = ws.forge(&["agent", "runs", "--json"]);
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &runs[0];
    assert_eq!(run["status"], "completed");
    assert_eq!(run["profileId"], "project:reviewer");
    assert_eq!(run["approval"]["viewedFullPrompt"], true);
    assert_eq!(run["approval"]["source"], "human");
    assert_eq!(run["usage"]["input"], 10);
    assert_eq!(run["usedThinkingLevel"], "off");
    assert!(folder_has_transcript(&ws, run["runId"].as_str().unwrap()));
    assert_eq!(run["payloadSha256"].as_array().unwrap().len(), 1);
    let run_id = run["runId"].as_str().unwrap().to_string();

    let out = ws.forge(&["agent", "result", &run_id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ok from fake\n");

    // An answer changed on disk is refused.
    let folder = ws
        .project()
        .join(".pi/forge/runs")
        .join(run_id.replace(':', "-"));
    assert!(
        !folder.join("child-input.json").exists(),
        "the child input is deleted"
    );
    // The result package holds the answer in blocks with their SHA-256, bound to the run.
    let package: Value =
        serde_json::from_slice(&std::fs::read(folder.join("package.json")).unwrap()).unwrap();
    assert_eq!(package["task_id"], run_id);
    assert_eq!(package["launch_nonce"], run["launchNonce"]);
    assert_eq!(
        package["route_attestations"],
        json!([{"provider": "fake", "model": "fake-1", "stop_reason": "stop"}])
    );
    let sha = forge_core::canonical::sha256_hex(b"ok from fake");
    assert_eq!(package["answer"]["sha256"], sha);
    assert_eq!(package["answer"]["blocks"][0]["sha256"], sha);
    assert_eq!(
        package["answer"]["blocks"][0]["data_base64"],
        "b2sgZnJvbSBmYWtl"
    );
    assert_eq!(package["usage"]["status"], "observed");
    std::fs::write(folder.join("answer.txt"), "ok from fakf").unwrap();
    let out = ws.forge(&["agent", "result", &run_id]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("pi-forge: answer_hash_mismatch: answer.txt of run "),
        "{err}"
    );
    // Any byte changed in the package is refused before anything is shown.
    std::fs::write(folder.join("answer.txt"), "ok from fake").unwrap();
    assert!(ws.forge(&["agent", "result", &run_id]).status.success());
    let bytes = std::fs::read(folder.join("package.json")).unwrap();
    let text_of = String::from_utf8(bytes.clone()).unwrap();
    let altered = text_of.replace("b2sgZnJvbSBmYWtl", "b2sgZnJvbSBmYWts");
    assert_ne!(altered, text_of);
    std::fs::write(folder.join("package.json"), altered).unwrap();
    let out = ws.forge(&["agent", "result", &run_id]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "pi-forge: answer_hash_mismatch: Answer block 0 does not match its byte length or SHA-256.\n"
    );
    // A package that names another route is refused too.
    let rerouted = text_of.replace("[{\"model\":\"fake-1\"", "[{\"model\":\"fake-2\"");
    assert_ne!(rerouted, text_of);
    std::fs::write(folder.join("package.json"), rerouted).unwrap();
    let out = ws.forge(&["agent", "result", &run_id]);
    assert_eq!(
        text(&out.stderr),
        "pi-forge: route_mismatch: A route attestation differs from the pinned route.\n"
    );
}

#[test]
fn a_rejected_plan_or_a_disabled_profile_sends_nothing() {
    let ws = workspace(SETTINGS);
    let out = ws.forge_input(
        &[
            "agent",
            "run",
            "reviewer",
            "Summarize src/",
            "--approve-in-terminal",
        ],
        "r\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).ends_with("pi-forge: rejected before anything was sent; nothing ran.\n")
    );
    let out = ws.forge(&["agent", "run", "reviewer", "Summarize src/"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("a person must approve the exact prompt first"));
    assert!(ws.model.bodies().is_empty());

    let off = workspace(r#"{ "profiles": {} }"#);
    let out = off.forge(&["agent", "plan", "reviewer", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "pi-forge: error host.profile-disabled (profileId): Profile project:reviewer is not enabled for delegation: add \"project:reviewer\": {\"enabled\": true} under \"profiles\" in .pi/forge/subagents.json.\n"
    );
}

#[test]
fn a_timed_out_run_is_reported_and_leaves_no_process() {
    let ws = workspace(SETTINGS);
    ws.model.hang(20);
    let started = std::time::Instant::now();
    let out = ws.forge_input(
        &[
            "agent",
            "run",
            "reviewer",
            "Summarize src/",
            "--approve-in-terminal",
            "--timeout",
            "3",
        ],
        "a\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert!(
        text(&out.stderr)
            .contains("pi-forge: The run took longer than 3 s; its process group was killed."),
        "{}",
        text(&out.stderr)
    );
    let runs: Value =
        serde_json::from_slice(&ws.forge(&["agent", "runs", "--json"]).stdout).unwrap();
    assert_eq!(runs[0]["status"], "timed-out");
    // No process of the child is left: none has the run's folder on its command line.
    let folder = ws.project().join(".pi/forge/runs").display().to_string();
    assert_eq!(processes_naming(&folder), Vec::<String>::new());
}

#[test]
fn a_stack_changed_on_disk_after_the_review_makes_the_approval_stale() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let ws = workspace(SETTINGS);
    let mut child = ws.forge_spawn(&[
        "agent",
        "run",
        "reviewer",
        "Summarize src/",
        "--approve-in-terminal",
    ]);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    // Wait for the question (it has no newline: read byte-wise until it appears).
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with("reject [r]: ") {
        assert_eq!(
            stderr.read(&mut byte).unwrap(),
            1,
            "pi-forge ended early: {seen}"
        );
        seen.push(byte[0] as char);
    }
    let path = ws.project().join(".pi/forge/prompt-stacks/child.json");
    std::fs::write(&path, CHILD.replace("CHILD REVIEWER", "CHANGED REVIEWER")).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"a\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    for line in stderr.lines() {
        rest.push_str(&line.unwrap());
        rest.push('\n');
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(
        rest.contains("pi-forge: stale_approval: The approved execution fingerprint sha256:v1:"),
        "{rest}"
    );
    assert!(rest.ends_with("prepare it again.\n"), "{rest}");
    assert!(ws.model.bodies().is_empty());
}

/// A parent Pi session in a project whose active Preset lets the model delegate to `reviewer`.
fn parent_session() -> (Workspace, pi::Pi) {
    parent_session_with(PARENT, SETTINGS)
}

/// Approves a waiting plan (as listed by `GET /api/agent/plans`) through the editor's API.
fn approve(ws: &Workspace, plan: &Value, viewed: bool) {
    let run = plan["runId"].as_str().unwrap();
    let (status, body) = ws.api(
        "POST",
        &format!("/api/agent/plans/{run}/approve"),
        &json!({"executionFingerprint": plan["executionFingerprint"], "viewedFullPrompt": viewed})
            .to_string(),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn the_model_delegates_twice_a_person_approves_one_and_rejects_the_other() {
    let (ws, mut pi) = parent_session();
    ws.model.call_tools(&[
        (
            "forge_subagent",
            json!({"profile": "reviewer", "task": "Review src/a.rs"}),
        ),
        (
            "forge_subagent",
            json!({"profile": "reviewer", "task": "Review src/b.rs"}),
        ),
    ]);
    pi.send(json!({"type": "prompt", "message": "delegate both"}));
    let plans = pi::poll(std::time::Duration::from_secs(20), || {
        let (_, body) = ws.api("GET", "/api/agent/plans", "");
        (body["plans"].as_array().map_or(0, Vec::len) == 2).then_some(body)
    })
    .expect("both plans wait for approval");
    let list = plans["plans"].as_array().unwrap();
    let by_task = |task: &str| {
        list.iter()
            .find(|p| p["task"] == task)
            .unwrap_or_else(|| panic!("no plan for {task}: {plans}"))
            .clone()
    };
    let a = by_task("Review src/a.rs");
    let b = by_task("Review src/b.rs");
    assert_eq!(a["boundary"], "shared user, not an OS sandbox");
    assert_eq!(a["tools"], json!(["read", "grep"]));
    assert_eq!(a["model"], json!({"provider": "fake", "id": "fake-1"}));
    // Only the parent's request so far: nothing reached a model before approval.
    assert_eq!(ws.model.bodies().len(), 1);

    let run_a = a["runId"].as_str().unwrap();
    let (status, full) = ws.api("GET", &format!("/api/agent/plans/{run_a}"), "");
    assert_eq!(status, 200);
    assert!(full["fullPrompt"]
        .as_str()
        .unwrap()
        .contains("--- SYSTEM PROMPT ---\nYou are CHILD REVIEWER."));
    let (status, body) = ws.api(
        "POST",
        &format!("/api/agent/plans/{run_a}/approve"),
        &json!({"executionFingerprint": "sha256:v1:wrong", "viewedFullPrompt": true}).to_string(),
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "stale_approval");
    approve(&ws, &a, true);
    let run_b = b["runId"].as_str().unwrap();
    let (status, _) = ws.api("POST", &format!("/api/agent/plans/{run_b}/reject"), "{}");
    assert_eq!(status, 200);
    let settled = pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    assert_eq!(settled["aborted"], false);

    let bodies = ws.model.bodies();
    let children: Vec<&Value> = bodies
        .iter()
        .filter(|b| message_texts(b)[0].1 == "You are CHILD REVIEWER.")
        .collect();
    assert_eq!(
        children.len(),
        1,
        "only the approved plan reached the model"
    );
    assert_eq!(
        message_texts(children[0]),
        [
            ("system".to_string(), "You are CHILD REVIEWER.".to_string()),
            ("user".to_string(), "Be brief.".to_string()),
            ("user".to_string(), "Review src/a.rs".to_string()),
        ]
    );
    assert_eq!(tool_names(children[0]), ["grep", "read"]);
    // The parent's follow-up request carries both tool results.
    let last = bodies.last().unwrap();
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            m["content"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| {
                    m["content"]
                        .as_array()
                        .map(|p| p.iter().filter_map(|x| x["text"].as_str()).collect())
                        .unwrap_or_default()
                })
        })
        .collect();
    assert_eq!(results.len(), 2, "{last}");
    assert!(
        results[0].starts_with(&format!(
            "ok from fake\n\n[pi-forge subagent {run_a} · fake/fake-1 · thinking "
        )),
        "{results:?}"
    );
    assert!(
        results[0].ends_with(" ms · 10 input / 3 output tokens]"),
        "{results:?}"
    );
    assert_eq!(
        results[1],
        "Subagent run rejected by the human before provider transport."
    );
    let (_, runs) = ws.api("GET", "/api/agent/runs", "");
    assert_eq!(runs["runs"][0]["approval"]["from"], "web");
    assert_eq!(runs["runs"][0]["approval"]["viewedFullPrompt"], true);
}

#[test]
fn a_person_approves_in_pi_after_viewing_the_full_prompt() {
    let (ws, mut pi) = parent_session();
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/c.rs"}),
    );
    pi.send(json!({"type": "prompt", "message": "delegate it"}));
    let is_select = |e: &Value| e["type"] == "extension_ui_request" && e["method"] == "select";
    let review = pi.wait("the approval dialog", is_select);
    let title = review["title"].as_str().unwrap();
    assert!(
        title.starts_with("Subagent approval: project:reviewer\n"),
        "{title}"
    );
    assert_eq!(
        review["options"],
        json!(["Reject", "View full prompt", "Approve and run"])
    );
    // Pi's dialog, the plan's review and its summary state the same sizes (one definition).
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    let summary = plans["plans"][0].clone();
    let run = summary["runId"].as_str().unwrap();
    let (_, detail) = ws.api("GET", &format!("/api/agent/plans/{run}"), "");
    assert_eq!(detail["review"], review["title"]);
    let line = |name: &str| -> u64 {
        title
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {title}"))
            .parse()
            .unwrap()
    };
    assert_eq!(summary["payloadBytes"], json!(line("Payload bytes: ")));
    assert_eq!(
        summary["systemPromptChars"],
        json!(line("System prompt chars: "))
    );
    pi.send(
        json!({"type": "extension_ui_response", "id": review["id"], "value": "View full prompt"}),
    );
    let editor = pi.wait("the full prompt", |e| {
        e["type"] == "extension_ui_request" && e["method"] == "editor"
    });
    let full = editor["prefill"].as_str().unwrap_or_default();
    assert!(
        full.contains("--- SYSTEM PROMPT ---\nYou are CHILD REVIEWER."),
        "{editor}"
    );
    assert!(
        ws.model.bodies().len() == 1,
        "nothing was sent while reviewing"
    );
    pi.send(json!({"type": "extension_ui_response", "id": editor["id"], "cancelled": true}));
    let again = pi.wait("the approval dialog again", is_select);
    pi.send(
        json!({"type": "extension_ui_response", "id": again["id"], "value": "Approve and run"}),
    );
    let settled = pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    assert_eq!(settled["aborted"], false);
    let (_, runs) = ws.api("GET", "/api/agent/runs", "");
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "completed");
    assert_eq!(run["approval"]["from"], "pi");
    assert_eq!(run["approval"]["viewedFullPrompt"], true);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 3, "parent, child, parent");
    assert_eq!(message_texts(&bodies[1])[2].1, "Review src/c.rs");
}

/// pi-forge's own tools carry a prompt snippet like Pi's built-in ones: a Preset's tools slot
/// lists `forge_subagent` with its snippet, never "No prompt snippet provided.".
#[test]
fn pi_forge_tools_have_prompt_snippets_in_the_tools_slot() {
    let parent = PARENT.replace(
        r#"{ "id": "hist", "kind": "slot", "slot": "chat-history" }"#,
        r#"{ "id": "tools", "kind": "slot", "slot": "tools", "role": "system" },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }"#,
    );
    assert_ne!(parent, PARENT);
    let (ws, mut pi) = parent_session_with(&parent, SETTINGS);
    let settled = pi.prompt("which tools?");
    assert_eq!(settled["aborted"], false);
    let bodies = ws.model.bodies();
    let system = message_texts(&bodies[0])
        .into_iter()
        .find(|(role, _)| role == "system")
        .map(|(_, text)| text)
        .expect("a system message");
    assert!(
        system.ends_with(
            "<available_tools>\n  <tool name=\"read\">Read file contents</tool>\n  <tool name=\"forge_subagent\">Delegate a read-only task to an agent profile; runs only after a person approves the exact prompt</tool>\n</available_tools>"
        ),
        "{system}"
    );
    assert!(!system.contains("No prompt snippet provided."), "{system}");
}

/// Pi's selector starts on the first option and Enter picks it (`ExtensionSelector`,
/// `selectedIndex = 0`): the approval dialog's first option is Reject, so a single Enter
/// rejects the plan. Over RPC the test answers with that first option, exactly what Enter
/// picks in the terminal: nothing runs, the child model is never called, and the parent is
/// told the run was rejected.
#[test]
fn enter_alone_in_the_approval_dialog_never_runs_the_child() {
    let (ws, mut pi) = parent_session();
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/d.rs"}),
    );
    pi.send(json!({"type": "prompt", "message": "delegate it"}));
    let review = pi.wait("the approval dialog", |e| {
        e["type"] == "extension_ui_request" && e["method"] == "select"
    });
    let focused = review["options"][0].clone();
    assert_eq!(focused, "Reject", "{review}");
    pi.send(json!({"type": "extension_ui_response", "id": review["id"], "value": focused}));
    let settled = pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    assert_eq!(settled["aborted"], false);
    // A rejected plan never becomes a run, and it no longer waits.
    let (_, runs) = ws.api("GET", "/api/agent/runs", "");
    assert_eq!(runs["runs"], json!([]), "{runs}");
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    assert_eq!(plans["plans"], json!([]), "{plans}");
    let bodies = ws.model.bodies();
    assert_eq!(
        bodies.len(),
        2,
        "the parent's two requests, no child request"
    );
    let last = message_texts(&bodies[1]);
    assert_eq!(
        last.last().unwrap().1,
        "Subagent run rejected by the human before provider transport."
    );
}

#[test]
fn a_200_kib_answer_comes_back_as_a_reference_with_nothing_lost() {
    let (ws, mut pi) = parent_session();
    let long: String = (0..200 * 1024 / 16)
        .map(|i| format!("l{i:>11} ok\n"))
        .collect();
    assert_eq!(long.len(), 200 * 1024);
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "List everything"}),
    );
    ws.model.answer(&long);
    pi.send(json!({"type": "prompt", "message": "delegate it"}));
    let plan = pi::poll(std::time::Duration::from_secs(20), || {
        let (_, body) = ws.api("GET", "/api/agent/plans", "");
        body["plans"].as_array().and_then(|p| p.first().cloned())
    })
    .expect("the plan waits");
    let run = plan["runId"].as_str().unwrap();
    approve(&ws, &plan, false);
    pi.wait("agent_settled", |e| e["type"] == "agent_settled");
    let bodies = ws.model.bodies();
    let last = bodies.last().unwrap();
    let result = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap();
    let folder = format!(".pi/forge/runs/{}/answer.txt", run.replace(':', "-"));
    assert!(
        result.starts_with(&format!(
            "The answer is 204800 bytes, more than the 12000 characters a tool result carries. Nothing was cut: the whole answer is kept in {folder} (SHA-256 "
        )),
        "{}",
        &result[..300.min(result.len())]
    );
    assert!(
        result.len() < 4_000,
        "the reference is short: {}",
        result.len()
    );
    let kept = std::fs::read_to_string(ws.project().join(&folder)).unwrap();
    assert_eq!(kept, long);
    let out = ws.forge(&["agent", "result", run]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{long}\n"));
}

#[test]
fn a_background_run_answers_at_once_and_notifies_the_parent_when_done() {
    let (ws, mut pi) = parent_session();
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/d.rs", "background": true}),
    );
    // The parent's turn ends without waiting for anyone.
    let settled = pi.prompt("delegate it in the background");
    assert_eq!(settled["aborted"], false);
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 2, "the tool call and the parent's answer");
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    let plan = plans["plans"][0].clone();
    let run = plan["runId"].as_str().unwrap().to_string();
    let tool_result = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap();
    assert_eq!(
        tool_result,
        format!("Subagent {run} runs in the background once a person approves it; its result arrives as a message when it finishes.")
    );
    approve(&ws, &plan, false);
    // The result arrives as a message that starts a new turn of the parent.
    pi.wait("the follow-up turn", |e| e["type"] == "agent_settled");
    let bodies = ws.model.bodies();
    assert_eq!(
        bodies.len(),
        4,
        "child request, then the parent's follow-up"
    );
    let texts = message_texts(bodies.last().unwrap());
    let notice = texts
        .iter()
        .find(|(_, t)| t.starts_with("Background subagent "))
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(
        notice
            .1
            .starts_with(&format!("Background subagent {run} (Review src/d.rs) finished:\n\nok from fake\n\n[pi-forge subagent {run} · fake/fake-1")),
        "{}",
        notice.1
    );
}

#[test]
fn a_trusted_projects_unattended_setting_runs_without_review_and_says_so() {
    let (ws, mut pi) = parent_session_with(
        PARENT,
        r#"{ "allowAgentInvocationWithoutApproval": true, "profiles": { "project:reviewer": { "enabled": true } } }"#,
    );
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/e.rs"}),
    );
    let settled = pi.prompt("delegate it");
    assert_eq!(settled["aborted"], false);
    assert!(
        !pi.seen
            .iter()
            .any(|e| e["type"] == "extension_ui_request" && e["method"] == "select"),
        "no review dialog"
    );
    let bodies = ws.model.bodies();
    assert_eq!(bodies.len(), 3, "parent, child, parent");
    assert_eq!(message_texts(&bodies[1])[2].1, "Review src/e.rs");
    let (_, runs) = ws.api("GET", "/api/agent/runs", "");
    let receipt = &runs["runs"][0]["approval"];
    assert_eq!(receipt["source"], "trusted-project-config");
    let (_, profiles) = ws.api("GET", "/api/agent/profiles", "");
    assert_eq!(
        profiles["profiles"][0]["approval"],
        "none (trusted project setting)"
    );
    assert_eq!(receipt["required"], false);
    assert_eq!(receipt["viewedFullPrompt"], false);
}

/// Waits until `want` holds for the run list (`GET /api/agent/runs`).
fn wait_runs(ws: &Workspace, what: &str, want: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, body) = ws.api("GET", "/api/agent/runs", "");
        let runs = body["runs"].as_array().cloned().unwrap_or_default();
        if want(&runs) {
            return runs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {runs:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn status_of(runs: &[Value], run: &str) -> String {
    runs.iter()
        .find(|r| r["runId"] == run)
        .and_then(|r| r["status"].as_str())
        .unwrap_or("absent")
        .to_string()
}

#[test]
fn a_running_run_is_cancelled_from_the_browser_and_the_next_one_waits_for_its_slot() {
    let (ws, mut pi) = parent_session_with(
        PARENT,
        r#"{ "maxConcurrentRuns": 1, "profiles": { "project:reviewer": { "enabled": true } } }"#,
    );
    ws.model.call_tools(&[
        (
            "forge_subagent",
            json!({"profile": "reviewer", "task": "Review src/slow.rs", "background": true}),
        ),
        (
            "forge_subagent",
            json!({"profile": "reviewer", "task": "Review src/next.rs", "background": true}),
        ),
    ]);
    ws.model.answer("both delegated");
    pi.prompt("delegate two in the background");
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    let plans = plans["plans"].as_array().unwrap().clone();
    assert_eq!(plans.len(), 2, "{plans:#?}");
    let by_task = |task: &str| plans.iter().find(|p| p["task"] == task).unwrap().clone();
    let (slow, next) = (by_task("Review src/slow.rs"), by_task("Review src/next.rs"));
    let slow_run = slow["runId"].as_str().unwrap().to_string();
    let next_run = next["runId"].as_str().unwrap().to_string();
    // The first child's request hangs; the second run has to wait for the only slot.
    ws.model.hang(60);
    approve(&ws, &slow, false);
    let before = ws.model.bodies().len();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while ws.model.bodies().len() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    approve(&ws, &next, false);
    let runs = wait_runs(&ws, "one running, one queued", |runs| {
        status_of(runs, &slow_run) == "running" && status_of(runs, &next_run) == "queued"
    });
    assert_eq!(runs.len(), 2);
    let (status, body) = ws.api("POST", &format!("/api/agent/runs/{slow_run}/cancel"), "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"ok": true, "runId": slow_run, "status": "running"})
    );
    let runs = wait_runs(
        &ws,
        "the cancelled run's record and the next run's end",
        |runs| {
            status_of(runs, &slow_run) == "cancelled" && status_of(runs, &next_run) == "completed"
        },
    );
    let cancelled = runs.iter().find(|r| r["runId"] == slow_run).unwrap();
    assert_eq!(
        cancelled["error"],
        "Cancelled by a person before the run finished; its process group was killed."
    );
    // The cancelled child's whole process group is gone.
    let folder = ws
        .project()
        .join(".pi/forge/runs")
        .join(slow_run.replace(':', "-"))
        .display()
        .to_string();
    assert_eq!(processes_naming(&folder), Vec::<String>::new());
    // Cancelling again: it already ended.
    let (status, body) = ws.api("POST", &format!("/api/agent/runs/{slow_run}/cancel"), "{}");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "run_ended");
    // The parent hears about both.
    let notices = || {
        ws.model
            .bodies()
            .iter()
            .flat_map(message_texts)
            .map(|(_, t)| t)
            .filter(|t| t.starts_with("Background subagent "))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while notices() < 2 {
        assert!(std::time::Instant::now() < deadline, "both notices");
        let _ = pi.wait("a follow-up turn", |e| e["type"] == "agent_settled");
    }
    let texts: Vec<String> = ws
        .model
        .bodies()
        .iter()
        .flat_map(message_texts)
        .map(|(_, t)| t)
        .collect();
    assert!(
        texts.iter().any(|t| t.starts_with(&format!(
            "Background subagent {slow_run} (Review src/slow.rs) did not finish:\n\nSubagent failed: {{\"status\":\"cancelled\""
        ))),
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with(&format!(
            "Background subagent {next_run} (Review src/next.rs) finished:\n\nok from fake"
        ))),
        "{texts:#?}"
    );
}

/// The content of the last tool message of the last request the model received.
fn last_tool_result(ws: &Workspace) -> String {
    let bodies = ws.model.bodies();
    bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn forge_subagent_result_reads_a_background_runs_verified_answer() {
    let parent = PARENT.replace(
        r#""allow": ["read", "forge_subagent"]"#,
        r#""allow": ["read", "forge_subagent", "forge_subagent_result"]"#,
    );
    assert_ne!(parent, PARENT);
    let (ws, mut pi) = parent_session_with(&parent, SETTINGS);
    ws.model.call_tool(
        "forge_subagent",
        json!({"profile": "reviewer", "task": "Review src/f.rs", "background": true}),
    );
    pi.prompt("delegate it in the background");
    assert_eq!(
        tool_names(&ws.model.bodies()[0]),
        vec!["forge_subagent", "forge_subagent_result", "read"]
    );
    let (_, plans) = ws.api("GET", "/api/agent/plans", "");
    let plan = plans["plans"][0].clone();
    let run = plan["runId"].as_str().unwrap().to_string();
    // Before anyone approved it.
    ws.model
        .call_tool("forge_subagent_result", json!({ "runId": run }));
    pi.prompt("is it done?");
    assert_eq!(
        last_tool_result(&ws),
        format!("Subagent {run} waits for a person's approval; nothing has run yet.")
    );
    approve(&ws, &plan, true);
    pi.wait("the follow-up turn", |e| e["type"] == "agent_settled");
    // After it ended: the verified answer and the run line, as forge_subagent gives them.
    ws.model
        .call_tool("forge_subagent_result", json!({ "runId": run }));
    pi.prompt("read the result");
    let text = last_tool_result(&ws);
    assert!(
        text.starts_with(&format!(
            "ok from fake\n\n[pi-forge subagent {run} · fake/fake-1 · thinking "
        )),
        "{text}"
    );
    // An unknown run.
    ws.model.call_tool(
        "forge_subagent_result",
        json!({ "runId": "run:00000000-0000-4000-8000-000000000000" }),
    );
    pi.prompt("and this one?");
    assert_eq!(
        last_tool_result(&ws),
        "No subagent run run:00000000-0000-4000-8000-000000000000 is known here (run ids look like run:<uuid>)."
    );
}
