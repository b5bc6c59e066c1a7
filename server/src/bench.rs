//! `pi-forge bench`: measured numbers for `cargo xtask bench`, printed as JSON.
//!
//! Workspace load: a generated project with N stacks (plus a few profiles and capabilities) is
//! written to a temporary directory, then loaded and validated several times; the report gives
//! the median and best wall time. Fingerprints: canonical JSON + SHA-256 of a realistic stack,
//! repeated for about half a second. Editor server: `pi-forge ui` started as a child process over
//! a generated 50-stack workspace and measured through plain HTTP/1.1 without keep-alive (see
//! [`server`]).

use anyhow::{Context, Result};
use forge_core::canonical::fingerprint;
use forge_core::json;
use forge_core::workspace::{self, FsStore, LoadOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn sample_stack(i: usize) -> Value {
    json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": format!("stack-{i:05}"),
        "name": format!("Generated stack {i}"),
        "description": "A generated stack for the load benchmark.",
        "mode": if i.is_multiple_of(3) { "append" } else { "replace" },
        "tools": {"allow": ["read", "grep", "find", "ls"]},
        "parameters": {"audience": "main agent", "depth": i % 7, "flags": {"strict": true}},
        "regex": {"schemaVersion": 1, "rules": [
            {"id": "ooc", "stage": "history", "pattern": "\\s*\\(OOC:[^)]+\\)", "flags": "g", "replace": "", "roles": ["assistant"]}
        ]},
        "items": [
            {"kind": "block", "id": "intro", "role": "system", "content": format!("You are helper number {i}. Audience: {{{{ parameters.audience }}}}.")},
            {"kind": "slot", "id": "tools", "role": "system", "slot": "tools", "options": {"format": "plain"}},
            {"kind": "slot", "id": "context", "role": "system", "slot": "project-context"},
            {"kind": "slot", "id": "date", "role": "system", "slot": "date-cwd", "options": {"includeTime": true}},
            {"kind": "slot", "id": "history", "slot": "chat-history", "options": {"maxMessages": 40}},
            {"kind": "block", "id": "reminder", "role": "user", "content": "Remember: {{ runtime.lastUserMessage }}"}
        ]
    })
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("pi-forge-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_workspace(root: &Path, stacks: usize) -> Result<u64> {
    let dir = root.join(".pi/forge/prompt-stacks");
    std::fs::create_dir_all(&dir)?;
    let mut bytes = 0u64;
    for i in 0..stacks {
        let text = json::to_pretty(&sample_stack(i));
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("stack-{i:05}.json")), text)?;
    }
    let profiles = root.join(".pi/forge/agent-profiles");
    std::fs::create_dir_all(&profiles)?;
    for i in 0..20 {
        let p = json!({"schemaVersion": 1, "type": "pi-forge.agent-profile", "id": format!("profile-{i}"),
            "model": {"provider": "prov", "id": "model"}, "thinkingLevel": "high", "promptStack": format!("stack-{i:05}")});
        std::fs::write(
            profiles.join(format!("profile-{i}.json")),
            json::to_pretty(&p),
        )?;
    }
    let caps = root.join(".pi/forge/capabilities");
    std::fs::create_dir_all(&caps)?;
    for i in 0..20 {
        let c = json!({"schemaVersion": 1, "type": "pi-forge.capability", "id": format!("cap-{i}"),
            "content": "Review carefully.", "tools": {"add": ["grep"], "remove": ["write"]}});
        std::fs::write(caps.join(format!("cap-{i}.json")), json::to_pretty(&c))?;
    }
    Ok(bytes)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index.min(samples.len() - 1)]
}

/// A 100-item stack: blocks with templates, every built-in slot, synthetic messages, two
/// history slots (one trimmed), regex rules in both stages.
fn compile_stack() -> Value {
    let mut items = Vec::new();
    // Every built-in slot except chat-history, which gets its own item below.
    let slots: Vec<&str> = forge_core::stack::BUILTIN_SLOTS
        .iter()
        .copied()
        .filter(|s| *s != "chat-history")
        .collect();
    for i in 0..100 {
        let item = match i % 10 {
            0 => {
                json!({"kind": "slot", "id": format!("slot-{i}"), "role": "system", "slot": slots[(i / 10) % slots.len()]})
            }
            5 if i == 55 => {
                json!({"kind": "slot", "id": "history", "slot": "chat-history", "options": {"stripAssistantThinking": true}})
            }
            7 => {
                json!({"kind": "block", "id": format!("user-{i}"), "role": "user", "content": format!("Reminder {i}: {{{{ runtime.lastUserMessage | trim }}}}")})
            }
            _ => json!({"kind": "block", "id": format!("block-{i}"), "role": "system",
                "content": format!("Rule {i} for {{{{ parameters.audience }}}}.{{% if runtime.tool.read %}} Read before editing.{{% else %}} No reads.{{% endif %}} Tools: {{{{ runtime.selectedToolsText }}}}")}),
        };
        items.push(item);
    }
    json!({
        "schemaVersion": 2, "id": "bench", "mode": "append",
        "parameters": {"audience": "the main agent"},
        "regex": {"schemaVersion": 1, "rules": [
            {"id": "ooc", "stage": "history", "pattern": "\\s*\\(OOC:[^)]+\\)", "flags": "g", "replace": ""},
            {"id": "redact", "stage": "compiled", "targets": ["messages", "system"], "pattern": "secret-[0-9]+", "flags": "g", "replace": "[redacted]"}
        ]},
        "items": items
    })
}

fn conversation(len: usize) -> Vec<Value> {
    (0..len)
        .map(|i| match i % 4 {
            0 => json!({"role": "user", "content": [{"type": "text", "text": format!("Question {i}: please look at secret-{i} (OOC: aside)")}], "timestamp": i}),
            1 => json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me think about it."},
                {"type": "text", "text": format!("I will read file {i}.")},
                {"type": "toolCall", "id": format!("c{i}"), "name": "read", "arguments": {"path": format!("src/{i}.rs")}}
            ], "api": "x", "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": i}),
            2 => json!({"role": "toolResult", "toolCallId": format!("c{}", i - 1), "toolName": "read",
                "content": [{"type": "text", "text": "fn main() {}\n".repeat(20)}], "isError": false, "timestamp": i}),
            _ => json!({"role": "assistant", "content": [{"type": "text", "text": format!("Done with step {i}.")}], "timestamp": i}),
        })
        .collect()
}

/// The regex-heavy workload's conversation: [`conversation`] with more text for the rules to
/// find (requests, e-mail addresses, file paths, TODOs).
fn regex_conversation(len: usize) -> Vec<Value> {
    let mut messages = conversation(len);
    for (i, message) in messages.iter_mut().enumerate() {
        let text = match i % 4 {
            0 => format!("Question {i}: Please look at secret-{i} (OOC: aside) and mail dev{i}@example.com about it."),
            1 => format!("I will read src/file{i}.rs first. TODO: step {i}."),
            3 => format!("Done with step {i}. Todo next: the tests."),
            _ => continue,
        };
        let parts = message["content"].as_array_mut().expect("array content");
        if let Some(part) = parts.iter_mut().find(|p| p["type"] == "text") {
            part["text"] = json!(text);
        }
    }
    messages
}

/// The regex-heavy workload: 100 items (the compile stack's), a chat-history slot that keeps the
/// newest 600 messages, and 10 rules in both stages (two case-insensitive, some limited by role,
/// depth or `maxMessages`).
fn regex_stack() -> Value {
    let mut stack = compile_stack();
    for item in stack["items"].as_array_mut().into_iter().flatten() {
        if item["id"] == "history" {
            item["options"] = json!({"maxMessages": 600});
        }
    }
    stack["regex"] = json!({"schemaVersion": 1, "rules": [
        {"id": "ooc", "stage": "history", "pattern": "\\s*\\(OOC:[^)]+\\)", "flags": "g", "replace": ""},
        {"id": "secret", "stage": "compiled", "targets": ["messages", "system"], "pattern": "secret-[0-9]+", "flags": "g", "replace": "[redacted]"},
        {"id": "todo", "stage": "history", "pattern": "\\b(todo|fixme)\\b", "flags": "gi", "replace": "to-do"},
        {"id": "please", "stage": "history", "pattern": "(please|kindly) look at", "flags": "gi", "replace": "look at", "roles": ["user"]},
        {"id": "paths", "stage": "history", "pattern": "src/(\\w+)\\.rs", "flags": "g", "replace": "src/$1.rs", "roles": ["assistant"]},
        {"id": "steps", "stage": "history", "pattern": "step (\\d{2,})", "flags": "g", "replace": "step #$1", "maxMessages": 200},
        {"id": "fn", "stage": "compiled", "targets": ["messages"], "pattern": "fn main\\(\\) \\{\\}", "flags": "g", "replace": "fn main() { /* elided */ }", "roles": ["toolResult"], "maxMessages": 50},
        {"id": "email", "stage": "compiled", "targets": ["messages"], "pattern": "[\\w.]+@[\\w.]+\\.[a-z]{2,}", "flags": "g", "replace": "<email>"},
        {"id": "think", "stage": "history", "pattern": "^Let me think", "flags": "m", "replace": "Thinking", "minDepth": 10},
        {"id": "spaces", "stage": "compiled", "targets": ["system"], "pattern": " {2,}", "flags": "g", "replace": " "}
    ]});
    stack
}

/// 10 items around a 20-message conversation: what a live turn compiles.
fn live_turn_stack() -> Value {
    json!({
        "schemaVersion": 2, "id": "live", "mode": "append",
        "parameters": {"audience": "the main agent"},
        "regex": {"schemaVersion": 1, "rules": [
            {"id": "ooc", "stage": "history", "pattern": "\\s*\\(OOC:[^)]+\\)", "flags": "g", "replace": ""}
        ]},
        "items": [
            {"kind": "block", "id": "intro", "role": "system", "content": "You help {{ parameters.audience }}."},
            {"kind": "slot", "id": "tools", "role": "system", "slot": "tools"},
            {"kind": "slot", "id": "guidelines", "role": "system", "slot": "guidelines"},
            {"kind": "slot", "id": "context", "role": "system", "slot": "project-context"},
            {"kind": "slot", "id": "skills", "role": "system", "slot": "skills"},
            {"kind": "slot", "id": "date", "role": "system", "slot": "date-cwd"},
            {"kind": "block", "id": "rules", "role": "system", "content": "{% if runtime.tool.read %}Read before editing.{% endif %}"},
            {"kind": "block", "id": "pre", "role": "user", "content": "Context follows."},
            {"kind": "slot", "id": "history", "slot": "chat-history", "options": {"stripAssistantThinking": true}},
            {"kind": "block", "id": "reminder", "role": "user", "content": "Remember: {{ runtime.lastUserMessage }}"}
        ]
    })
}

/// Compiles `stack` over a `len`-message conversation `runs` times (after warm-up runs) and
/// reports p50/p99.
fn measure_compile(
    stack: Value,
    conversation: Vec<Value>,
    runs: usize,
    target_p50_ms: f64,
) -> Value {
    use forge_core::compile::{compile, CompileInput, MacroRegistry};
    use forge_core::runtime::{Clock, RuntimeSnapshot};
    let parsed = forge_core::stack::parse_stack_value(
        stack,
        &forge_core::stack::ParseOptions::new("bench.json"),
    );
    let mut runtime =
        RuntimeSnapshot::default_snapshot("/home/user/project", Clock::utc(1_781_341_687_000));
    let len = conversation.len();
    runtime.messages = conversation;
    let macros = MacroRegistry::new();
    let input = CompileInput::new(Some(&parsed.stack), &runtime, &macros);
    let mut samples = Vec::with_capacity(runs);
    let mut messages = 0;
    let mut rule_matches = 0;
    for _ in 0..(runs / 20).max(5) {
        std::hint::black_box(compile(&input)); // warm-up
    }
    for _ in 0..runs {
        let start = Instant::now();
        let compiled = compile(std::hint::black_box(&input));
        samples.push(start.elapsed());
        messages = compiled.messages.len();
        rule_matches = compiled
            .diagnostics
            .iter()
            .filter(|d| d.message.starts_with("Regex rule "))
            .count();
    }
    let p50 = ms(percentile(&mut samples, 0.5));
    json!({
        "items": parsed.stack.items().len(),
        "conversation": len,
        "outputMessages": messages,
        "rulesThatMatched": rule_matches,
        "stackErrors": parsed.diagnostics.iter().filter(|d| d.is_error()).count(),
        "runs": samples.len(),
        "p50Ms": p50,
        "p90Ms": ms(percentile(&mut samples, 0.9)),
        "p99Ms": ms(percentile(&mut samples, 0.99)),
        "targetP50Ms": target_p50_ms,
        "meetsTarget": p50 <= target_p50_ms,
    })
}

/// The three compile workloads: the 100-item stack over 1,000 messages, the regex-heavy one, and
/// one live turn.
fn bench_compile() -> Value {
    json!({
        "items100x1000": measure_compile(compile_stack(), conversation(1000), 400, 1.0),
        "regex100x1000": measure_compile(regex_stack(), regex_conversation(1000), 400, 2.5),
        "liveTurn10x20": measure_compile(live_turn_stack(), conversation(20), 10_000, 0.05),
    })
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The benchmarks `--only` can name.
const BENCHMARKS: &[&str] = &[
    "workspace",
    "compile",
    "fingerprint",
    "delegation",
    "template",
    "server",
    "bridge",
];

pub fn run(stacks: usize, only: &[String]) -> Result<()> {
    if let Some(unknown) = only.iter().find(|o| !BENCHMARKS.contains(&o.as_str())) {
        anyhow::bail!(
            "unknown benchmark `{unknown}` (known: {})",
            BENCHMARKS.join(", ")
        );
    }
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let mut report = serde_json::Map::new();
    if wanted("workspace") {
        report.insert("workspaceLoad".into(), bench_workspace(stacks)?);
    }
    if wanted("compile") {
        report.insert("compile".into(), bench_compile());
    }
    if wanted("fingerprint") {
        report.insert("fingerprint".into(), bench_fingerprint());
    }
    if wanted("delegation") {
        report.insert("delegationPlan".into(), bench_delegation()?);
    }
    if wanted("template") {
        report.insert("templateEditor".into(), bench_template_editor());
    }
    if wanted("server") {
        report.insert(
            "server".into(),
            server::bench_server().context("the editor server benchmark failed")?,
        );
    }
    if wanted("bridge") {
        report.insert(
            "bridge".into(),
            server::bench_bridge().context("the live-bridge benchmark failed")?,
        );
    }
    print!("{}", json::to_pretty(&Value::Object(report)));
    Ok(())
}

/// Plan preparation (`pi-forge agent plan` without printing): a 50-item Preset (the first 50
/// items of the compile benchmark's stack: templates, conditionals, every built-in slot) behind
/// an enabled profile; trust, settings, snapshot, request, negotiation, compile and sealing.
fn bench_delegation() -> Result<Value> {
    use forge_core::delegation::config::{parse_subagents_bytes, SettingsLayers};
    use forge_core::delegation::host::{plan_run, HostPlanInput, PlanIds};
    use forge_core::delegation::plan::Stamp;
    use forge_core::id::Scope;
    use forge_core::runtime::Clock;
    let temp = TempDir::new()?;
    let project = temp.0.join("project");
    let mut stack = compile_stack();
    if let Some(items) = stack.get_mut("items").and_then(Value::as_array_mut) {
        items.truncate(50);
    }
    stack["id"] = json!("delegated");
    stack["type"] = json!("pi-forge.prompt-stack");
    for (rel, value) in [
        (".pi/forge/prompt-stacks/delegated.json", stack),
        (
            ".pi/forge/agent-profiles/reviewer.json",
            json!({"schemaVersion": 1, "type": "pi-forge.agent-profile", "id": "reviewer",
                "model": {"provider": "prov", "id": "model"}, "thinkingLevel": "high", "promptStack": "delegated"}),
        ),
    ] {
        let path = project.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, json::to_pretty(&value))?;
    }
    let store = FsStore::new(Some(project.clone()), temp.0.join("global"));
    let snapshot = workspace::load(
        &store,
        &LoadOptions {
            trusted: true,
            extra_slots: Vec::new(),
        },
    );
    let settings = parse_subagents_bytes(
        br#"{"profiles": {"project:reviewer": {"enabled": true}}}"#,
        Scope::Project,
    )
    .config;
    let layers = SettingsLayers {
        global: Vec::new(),
        project: vec![&settings],
    };
    let task = "Summarize what the parser does and list its public functions.";
    let cwd = project.display().to_string();
    let mut samples = Vec::new();
    let mut messages = 0;
    for i in 0..220 {
        let ids = PlanIds {
            request_id: format!("request:{i}"),
            preflight_id: format!("preflight:{i}"),
            stamp: Stamp {
                prepared_run_id: format!("prepared:{i}"),
                run_id: format!("run:{i}"),
                prepared_at: "2026-12-02T00:00:00.000Z".into(),
            },
        };
        let start = Instant::now();
        let plan = plan_run(&HostPlanInput {
            workspace: &snapshot,
            settings: &layers,
            trusted: true,
            profile: "reviewer",
            task,
            timeout_override_ms: None,
            cwd: &cwd,
            clock: Clock::utc(1_781_341_687_000),
            ids: &ids,
            parent_session: None,
        });
        let elapsed = start.elapsed();
        let plan = plan.map_err(|d| {
            anyhow::anyhow!(
                "the delegation benchmark's plan failed: {}",
                d.iter()
                    .map(|d| d.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        })?;
        messages = plan.plan.messages.len();
        if i >= 20 {
            samples.push(elapsed);
        }
    }
    let p50 = ms(percentile(&mut samples, 0.5));
    Ok(json!({
        "items": 50,
        "planMessages": messages,
        "runs": samples.len(),
        "p50Ms": p50,
        "p99Ms": ms(percentile(&mut samples, 0.99)),
        "targetP50Ms": 10.0,
        "meetsTarget": p50 <= 10.0,
    }))
}

fn bench_workspace(stacks: usize) -> Result<Value> {
    let temp = TempDir::new()?;
    let project = temp.0.join("project");
    let global = temp.0.join("global");
    std::fs::create_dir_all(&global)?;
    let bytes = write_workspace(&project, stacks)?;
    let store = FsStore::new(Some(project.clone()), global);
    let opts = LoadOptions {
        trusted: true,
        extra_slots: Vec::new(),
    };

    let mut samples = Vec::new();
    let mut loaded = 0;
    let mut errors = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let snapshot = workspace::load(&store, &opts);
        samples.push(start.elapsed());
        loaded = snapshot.stacks.len() + snapshot.profiles.len() + snapshot.capabilities.len();
        errors = snapshot
            .all_diagnostics()
            .iter()
            .flat_map(|(_, d)| d.iter())
            .filter(|d| d.is_error())
            .count();
    }
    let best = samples.iter().min().copied().unwrap_or_default();
    let load_median = median(samples);

    Ok(json!({
        "stacks": stacks,
        "files": loaded,
        "bytes": bytes,
        "errors": errors,
        "runs": 5,
        "medianMs": ms(load_median),
        "bestMs": ms(best),
        "targetMs": 1000,
    }))
}

/// A forge-v1 template of at least `bytes` bytes: prose lines with outputs, filters and
/// conditionals, as a long hand-written block would have them.
pub(crate) fn long_template(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 200);
    let mut n = 0;
    while text.len() < bytes {
        n += 1;
        match n % 4 {
            0 => text.push_str(&format!(
                "{{% if runtime.tool.read %}}Rule {n}: read files before you edit them; quote what you read.{{% else %}}Rule {n}: ask for the file.{{% endif %}}\n"
            )),
            1 => text.push_str(&format!(
                "Step {n}. Work in {{{{ runtime.cwd }}}} on {{{{ date }}}}; the user wrote {{{{ lastUserMessage | trim | xml }}}}.\n"
            )),
            2 => text.push_str(&format!(
                "Line {n} of plain guidance: keep answers short, name the files you touched, and never invent output.\n"
            )),
            _ => text.push_str(&format!(
                "{{% if parameters.strict == \"yes\" %}}Be strict ({n}).{{% endif %}} Tools: {{{{ selectedTools }}}}\n"
            )),
        }
    }
    text
}

/// The template editor's work per keystroke (`--only template`): a character typed at one of
/// 200 places spread over a 100 KB template, then lex + analyze + the HTML of every line with
/// the caret's matching tags ([`forge_core::template::assist::highlight`]), as the browser runs
/// it (there in wasm; `cargo xtask bench --only web` times the browser end to end).
fn bench_template_editor() -> Value {
    use forge_core::template::assist::highlight;
    let mut text = long_template(100 * 1024);
    let bytes = text.len();
    let lines = text.lines().count();
    let mut samples = Vec::with_capacity(200);
    for i in 0..200 {
        let mut at = (text.len() / 200) * i;
        while !text.is_char_boundary(at) {
            at += 1;
        }
        text.insert(at, 'x');
        let start = Instant::now();
        let out = highlight(std::hint::black_box(&text), Some(at + 1));
        samples.push(start.elapsed());
        std::hint::black_box(out);
    }
    let mut sorted = samples.clone();
    json!({
        "templateBytes": bytes,
        "lines": lines,
        "keystrokes": samples.len(),
        "highlightMedianMs": ms(median(samples)),
        "highlightP99Ms": ms(percentile(&mut sorted, 0.99)),
        "highlightMaxMs": ms(*sorted.last().unwrap_or(&Duration::ZERO)),
        "targetMs": 16.0,
    })
}

fn bench_fingerprint() -> Value {
    let value = sample_stack(7);
    let start = Instant::now();
    let mut count = 0u64;
    while start.elapsed() < Duration::from_millis(500) {
        for _ in 0..100 {
            std::hint::black_box(fingerprint(std::hint::black_box(&value)));
        }
        count += 100;
    }
    let per_sec = count as f64 / start.elapsed().as_secs_f64();
    json!({
        "canonicalBytes": forge_core::canonical::canonical(&value).len(),
        "perSecond": per_sec.round(),
    })
}

/// The editor server benchmark (`--only server`): `pi-forge ui` as a child process over a
/// generated 50-stack workspace, measured without keep-alive (every request opens a new loopback
/// TCP connection and sends `Connection: close`) by a minimal HTTP/1.1 client on
/// [`std::net::TcpStream`].
///
/// - **Cold start**: from spawning the process to the first `200` of `GET /api/meta` (polled every
///   millisecond), five fresh processes, each with its own empty `XDG_RUNTIME_DIR` so no state
///   file of an earlier run is probed.
/// - **RSS**: `VmRSS` of `/proc/<pid>/status` right after the first `200`, and again after the
///   latency runs (just over 1,000 requests in all).
/// - **Latency**: p50/p99 of list, read and draft preview, each under four concurrent clients.
/// - **Watcher**: an open `GET /api/events` stream; 20 stack files rewritten on disk, each timed
///   until the `changed` event naming that stack with the new file's revision arrives.
///
/// Every wait has a deadline; a server that does not start, answers something other than `200`
/// or sends no event in time fails the benchmark with its exit status and the end of its stderr.
/// The server is killed when the benchmark ends, however it ends.
mod server {
    use super::{median, ms, percentile, sample_stack, write_workspace, TempDir};
    use crate::http::security::TOKEN_HEADER;
    use anyhow::{anyhow, bail, Context, Result};
    use forge_core::json;
    use serde_json::{json, Value};
    use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
    use std::net::{Ipv4Addr, SocketAddr, TcpStream};
    use std::path::{Path, PathBuf};
    use std::process::{Child, ChildStdout, Command, Stdio};
    use std::sync::{mpsc, Barrier};
    use std::time::{Duration, Instant};

    const STACKS: usize = 50;
    const COLD_STARTS: usize = 5;
    const CLIENTS: usize = 4;
    /// Requests per client, route and connection mode: 4 × 84 = 336 each, 2,016 in all.
    const REQUESTS_PER_CLIENT: usize = 84;
    const EDITS: usize = 20;
    /// From spawn to the printed address, and from spawn to the first `200`.
    const STARTUP_DEADLINE: Duration = Duration::from_secs(10);
    /// Connect, write and each read of one request.
    const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
    /// From a write on disk to its `changed` event (and from opening the stream to `ready`).
    const EVENT_DEADLINE: Duration = Duration::from_secs(5);
    /// Pause after each measured edit, so the watcher is quiet before the next one.
    const EDIT_PAUSE: Duration = Duration::from_millis(100);

    const TARGET_COLD_START_MS: u64 = 30;
    const TARGET_RSS_AFTER_START_MIB: u64 = 20;
    const TARGET_EVENT_MEDIAN_MS: u64 = 100;
    /// Without keep-alive, 4 clients: half the original TypeScript server's p50 on the same
    /// recipe (list 0.382, read 0.191, draft preview 0.612 ms; docs/performance.md).
    fn target_p50_ms(route: &str) -> Option<f64> {
        match route {
            "list" => Some(0.191),
            "read" => Some(0.096),
            "draftPreview" => Some(0.306),
            _ => None,
        }
    }
    const TARGET_LIST_CPU_MS: f64 = 0.1;

    pub fn bench_server() -> Result<Value> {
        let temp = TempDir::new()?;
        let env = Env {
            project: temp.0.join("project"),
            global: temp.0.join("global"),
            scratch: temp.0.join("scratch"),
        };
        std::fs::create_dir_all(&env.global)?;
        std::fs::create_dir_all(&env.scratch)?;
        write_workspace(&env.project, STACKS)?;
        // The server reports canonical paths; the edits below only need the file names.
        let stacks_dir = env.project.join(".pi/forge/prompt-stacks");

        // Cold starts: fresh processes; the last one stays up for the rest.
        let mut starts = Vec::new();
        let mut rss_after_start = Vec::new();
        let mut server = None;
        for n in 0..COLD_STARTS {
            let (started, elapsed) = Server::start(&env, n)?;
            starts.push(elapsed);
            rss_after_start.push(started.status_kib("VmRSS"));
            server = Some(started);
        }
        let server = server.ok_or_else(|| anyhow!("no server was started"))?;
        let mut requests = 1usize; // the first GET /api/meta

        // Sanity: the server sees the generated workspace.
        let list = server.expect_ok("GET", "/api/stacks", None)?;
        requests += 1;
        let listed: Value =
            serde_json::from_slice(&list).context("GET /api/stacks did not answer JSON")?;
        let count = listed["stacks"].as_array().map_or(0, Vec::len);
        if count != STACKS {
            bail!("GET /api/stacks listed {count} stacks, expected {STACKS}");
        }

        // Latency under four concurrent clients, one route at a time.
        let list_route = |_: usize| ("GET", "/api/stacks".to_string(), None);
        let read_route = |i: usize| ("GET", format!("/api/stacks/stack-{:05}", i % STACKS), None);
        let preview_route = |i: usize| {
            let body = json!({"stack": draft(i % STACKS, i), "messages": short_conversation()});
            (
                "POST",
                format!("/api/stacks/stack-{:05}/preview", i % STACKS),
                Some(json::to_compact(&body).into_bytes()),
            )
        };
        let routes: [(&str, &(dyn Fn(usize) -> Request + Sync)); 3] = [
            ("list", &list_route),
            ("read", &read_route),
            ("draftPreview", &preview_route),
        ];
        // Each route twice: a new connection per request (as the CLI, the extension's host
        // calls and a browser's first requests meet the server), then one kept-alive
        // connection per client (the handlers alone).
        let mut latency = [serde_json::Map::new(), serde_json::Map::new()];
        for (name, route) in routes {
            // One warm-up request, then the measured ones.
            let (method, path, body) = route(usize::MAX / 2);
            let answer = server
                .expect_ok(method, &path, body.as_deref())
                .with_context(|| format!("warm-up of {name}"))?;
            requests += 1;
            for (keep_alive, into) in [(false, 0), (true, 1)] {
                let cpu_before = server.cpu_ns();
                let (mut entry, sent) =
                    measure_route(&server, route, keep_alive).with_context(|| {
                        format!("while measuring {name} ({method} {path}, keep-alive {keep_alive})")
                    })?;
                let cpu_after = server.cpu_ns();
                requests += sent;
                entry["bodyBytes"] = json!(answer.len());
                entry["serverCpuMsPerRequest"] = match (cpu_before, cpu_after) {
                    (Some(before), Some(after)) if sent > 0 => json!(
                        (after.saturating_sub(before) as f64 / sent as f64 / 1e3).round() / 1e3
                    ),
                    _ => Value::Null,
                };
                if !keep_alive {
                    if let Some(target) = target_p50_ms(name) {
                        entry["targetP50Ms"] = json!(target);
                    }
                    if name == "list" {
                        entry["targetServerCpuMsPerRequest"] = json!(TARGET_LIST_CPU_MS);
                    }
                }
                latency[into].insert(name.into(), entry);
            }
        }
        let [mut latency, mut kept_alive] = latency;
        let rss_after_requests = server.status_kib("VmRSS");
        let rss_peak = server.status_kib("VmHWM");

        let events = measure_events(&server, &stacks_dir)?;
        drop(server);

        let rss_start = rss_after_start.iter().flatten().copied().max();
        Ok(json!({
            "stacks": STACKS,
            "profiles": 20,
            "capabilities": 20,
            "coldStart": {
                "runs": starts.len(),
                "runsMs": starts.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
                "medianMs": ms(median(starts.clone())),
                "bestMs": ms(starts.iter().min().copied().unwrap_or_default()),
                "targetMedianMs": TARGET_COLD_START_MS,
            },
            "rss": {
                "afterStartMiB": rss_start.map(mib),
                "afterStartNote": "largest of the cold starts, read right after the first 200",
                "afterRequestsMiB": rss_after_requests.map(mib),
                "requests": requests,
                "peakMiB": rss_peak.map(mib),
                "targetAfterStartMiB": TARGET_RSS_AFTER_START_MIB,
            },
            "latency": {
                "clients": CLIENTS,
                "keepAlive": false,
                "list": latency.remove("list"),
                "read": latency.remove("read"),
                "draftPreview": latency.remove("draftPreview"),
            },
            "latencyKeepAlive": {
                "clients": CLIENTS,
                "keepAlive": true,
                "list": kept_alive.remove("list"),
                "read": kept_alive.remove("read"),
                "draftPreview": kept_alive.remove("draftPreview"),
            },
            "externalEditToEvent": events,
        }))
    }

    type Request = (&'static str, String, Option<Vec<u8>>);

    struct Env {
        project: PathBuf,
        global: PathBuf,
        scratch: PathBuf,
    }

    fn mib(kib: u64) -> f64 {
        (kib as f64 / 1024.0 * 10.0).round() / 10.0
    }

    /// An unsaved edit of stack `i`: another name, description and intro text.
    fn draft(i: usize, n: usize) -> Value {
        let mut stack = sample_stack(i);
        stack["name"] = json!(format!("Draft {n} of stack {i}"));
        stack["description"] = json!("An unsaved draft sent to the preview route.");
        stack["items"][0]["content"] = json!(format!(
            "You are draft {n}. Audience: {{{{ parameters.audience }}}}."
        ));
        stack
    }

    fn short_conversation() -> Value {
        json!([
            {"role": "user", "content": "Please review main.rs (OOC: be brief)", "timestamp": 1},
            {"role": "assistant", "content": [{"type": "text", "text": "I will read it first."}], "timestamp": 2},
            {"role": "user", "content": "Thanks.", "timestamp": 3}
        ])
    }

    /// The live bridge's added latency per turn (`--only bridge`): what the Pi extension does
    /// on every user prompt with a Preset active — `POST /api/host/:id/turn` (system prompt and
    /// tools, from `before_agent_start`) then `POST /api/host/:id/context` (the messages, from
    /// the first provider request), and one more `context` per follow-up request after a tool
    /// call, timed on its own — for a 50-item Preset and a 200-message conversation, over
    /// loopback with a new connection per request, as the extension's `fetch` may. The host is
    /// this benchmark speaking the protocol, with an open command stream like the extension's.
    pub fn bench_bridge() -> Result<Value> {
        const ITEMS: usize = 50;
        const MESSAGES: usize = 200;
        const WARMUP: usize = 20;
        const TURNS: usize = 300;
        const TARGET_P50_MS: f64 = 5.0;
        const TARGET_P99_MS: f64 = 20.0;
        let temp = TempDir::new()?;
        let env = Env {
            project: temp.0.join("project"),
            global: temp.0.join("global"),
            scratch: temp.0.join("scratch"),
        };
        let stacks = env.project.join(".pi/forge/prompt-stacks");
        std::fs::create_dir_all(&stacks)?;
        std::fs::create_dir_all(&env.global)?;
        std::fs::create_dir_all(&env.scratch)?;
        let mut items: Vec<Value> = (0..ITEMS - 1)
            .map(|i| {
                json!({"id": format!("b{i}"), "kind": "block", "role": if i % 5 == 4 { "user" } else { "system" },
                       "content": format!("Rule {i}: be precise about {{{{ runtime.cwd }}}} and {{{{ runtime.lastUserMessage }}}}.")})
            })
            .collect();
        items.insert(
            ITEMS / 2,
            json!({"id": "history", "kind": "slot", "slot": "chat-history"}),
        );
        let stack = json!({"schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "bridge",
                           "autoActivate": true, "mode": "replace", "tools": {"allow": ["read", "grep", "find"]}, "items": items});
        std::fs::write(stacks.join("bridge.json"), json::to_pretty(&stack))?;
        let (server, _) = Server::start(&env, 0)?;

        let tools: Vec<Value> = ["read", "bash", "powershell", "edit", "write", "grep", "find", "ls", "codemode", "tool_search"]
            .iter()
            .map(|n| json!({"name": n, "description": format!("The {n} tool."), "sourceInfo": {"path": "", "source": "builtin", "scope": "builtin", "origin": "builtin"}}))
            .collect();
        let facts = json!({"tools": tools, "activeTools": ["read", "bash", "edit", "write"],
                           "systemPrompt": "Pi's own prompt.", "model": {"provider": "fake", "id": "fake-1"}, "thinkingLevel": "off"});
        let hello = json!({"protocol": crate::live::PROTOCOL, "extensionVersion": crate::VERSION, "piVersion": "1.6.0",
                           "mode": "rpc", "hasUI": true, "cwd": env.project.display().to_string(), "sessionId": "bench",
                           "projectTrusted": true, "facts": facts, "entries": []});
        let welcome: Value = serde_json::from_slice(&server.expect_ok(
            "POST",
            "/api/host/hello",
            Some(json::to_compact(&hello).as_bytes()),
        )?)?;
        let host = welcome["hostId"]
            .as_str()
            .ok_or_else(|| anyhow!("hello answered no hostId"))?
            .to_string();
        if welcome["activeStackId"] != "project:bridge" {
            bail!("the auto-activating Preset was not chosen at hello: {welcome}");
        }
        let _stream = EventStream::open_path(&server, &format!("/api/host/{host}/commands"))?;

        let messages: Vec<Value> = (0..MESSAGES)
            .map(|i| {
                if i % 2 == 0 {
                    json!({"role": "user", "content": [{"type": "text", "text": format!("Question {i}: what does module {i} do, and why?")}], "timestamp": i})
                } else {
                    json!({"role": "assistant", "content": [{"type": "text", "text": format!("Answer {i}: module {i} parses the input, checks it and writes the result. ").repeat(3)}],
                           "api": "openai-completions", "provider": "fake", "model": "fake-1", "stopReason": "stop", "timestamp": i})
                }
            })
            .collect();
        let turn = json::to_compact(
            &json!({"sessionId": "bench", "prompt": "Question 198: what does module 198 do, and why?",
                                            "clock": {"epochMs": 1_796_140_000_000_i64, "utcOffsetMinutes": 0}, "facts": facts}),
        );
        let context =
            json::to_compact(&json!({"sessionId": "bench", "request": 1, "messages": messages}));
        // A follow-up request of the same prompt: the model called a tool, Pi ran it, and the
        // next request carries the call and its result. The extension sends only `/context`
        // for it (the turn was compiled at `before_agent_start`).
        let mut follow_up_messages = messages.clone();
        follow_up_messages.push(json!({"role": "assistant", "content": [{"type": "toolCall", "id": "call-1", "name": "read", "arguments": {"path": "src/module198.rs"}}],
                                       "api": "openai-completions", "provider": "fake", "model": "fake-1", "stopReason": "toolUse", "timestamp": MESSAGES}));
        follow_up_messages.push(json!({"role": "toolResult", "toolCallId": "call-1", "toolName": "read",
                                       "content": [{"type": "text", "text": "pub fn parse(input: &str) -> Result<Module, Error> { todo!() }\n".repeat(20)}],
                                       "isError": false, "timestamp": MESSAGES + 1}));
        let follow_up = json::to_compact(
            &json!({"sessionId": "bench", "request": 2, "messages": follow_up_messages}),
        );
        let turn_path = format!("/api/host/{host}/turn");
        let context_path = format!("/api/host/{host}/context");
        let mut samples = Vec::with_capacity(TURNS);
        let mut follow_samples = Vec::with_capacity(TURNS);
        for n in 0..WARMUP + TURNS {
            let started = Instant::now();
            let answer: Value = serde_json::from_slice(&server.expect_ok(
                "POST",
                &turn_path,
                Some(turn.as_bytes()),
            )?)?;
            let compiled: Value = serde_json::from_slice(&server.expect_ok(
                "POST",
                &context_path,
                Some(context.as_bytes()),
            )?)?;
            let elapsed = started.elapsed();
            let follow_started = Instant::now();
            let followed: Value = serde_json::from_slice(&server.expect_ok(
                "POST",
                &context_path,
                Some(follow_up.as_bytes()),
            )?)?;
            let follow_elapsed = follow_started.elapsed();
            if n == 0 {
                // The tool call and its result reach the model, in that order, in the history.
                let out = followed["messages"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice);
                let paired = out.windows(2).any(|w| {
                    w[0]["content"][0]["type"] == "toolCall"
                        && w[1]["role"] == "toolResult"
                        && w[1]["toolCallId"] == "call-1"
                });
                if out.len() < MESSAGES + 2 || !paired {
                    bail!(
                        "the follow-up context answered {} messages without the tool call and its result",
                        out.len()
                    );
                }
                if answer["active"] != true || answer.get("abort").is_some() {
                    bail!("the turn did not compile: {answer}");
                }
                let count = compiled["messages"].as_array().map_or(0, Vec::len);
                if count < MESSAGES {
                    bail!("the context answered {count} messages, expected at least {MESSAGES}");
                }
            }
            if n >= WARMUP {
                samples.push(elapsed);
                follow_samples.push(follow_elapsed);
            }
        }
        let p50 = ms(percentile(&mut samples, 0.5));
        let p99 = ms(percentile(&mut samples, 0.99));
        let follow_p50 = ms(percentile(&mut follow_samples, 0.5));
        let follow_p99 = ms(percentile(&mut follow_samples, 0.99));
        Ok(json!({
            "items": ITEMS,
            "messages": MESSAGES,
            "turns": TURNS,
            "contextBodyBytes": context.len(),
            "followUpBodyBytes": follow_up.len(),
            "perTurnMs": {"p50": p50, "p99": p99},
            "perFollowUpRequestMs": {"p50": follow_p50, "p99": follow_p99},
            "targetP50Ms": TARGET_P50_MS,
            "targetP99Ms": TARGET_P99_MS,
            "meetsTargets": p50 < TARGET_P50_MS && p99 < TARGET_P99_MS
                && follow_p50 < TARGET_P50_MS && follow_p99 < TARGET_P99_MS,
        }))
    }

    // -----------------------------------------------------------------------------------------
    // The server process

    /// A running `pi-forge ui`; killed (and reaped) on drop.
    struct Server {
        child: Child,
        /// Kept open so the server never writes into a closed pipe.
        _stdout: Option<BufReader<ChildStdout>>,
        port: u16,
        token: String,
        log: PathBuf,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl Server {
        /// Spawns `pi-forge ui --no-open --port 0 --project <project>` and polls
        /// `GET /api/meta` every millisecond; returns the server and the time from spawn to
        /// the first `200`.
        fn start(env: &Env, n: usize) -> Result<(Server, Duration)> {
            let exe = std::env::current_exe().context("cannot find the pi-forge executable")?;
            let run_dir = env.scratch.join(format!("run-{n}"));
            std::fs::create_dir_all(&run_dir)?;
            let log = env.scratch.join(format!("server-{n}.log"));
            let stderr = std::fs::File::create(&log)
                .with_context(|| format!("cannot create {}", log.display()))?;
            let spawned = Instant::now();
            let child = Command::new(&exe)
                .args(["ui", "--no-open", "--port", "0", "--project"])
                .arg(&env.project)
                .env("PI_FORGE_GLOBAL_DIR", &env.global)
                .env("XDG_RUNTIME_DIR", &run_dir)
                .env_remove("PI_FORGE_UNTRUSTED")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(stderr)
                .spawn()
                .with_context(|| format!("cannot start `{} ui`", exe.display()))?;
            let mut server = Server {
                child,
                _stdout: None,
                port: 0,
                token: String::new(),
                log,
            };
            let deadline = spawned + STARTUP_DEADLINE;

            // The first line of stdout is the address; read it on a thread to bound the wait.
            let stdout = server
                .child
                .stdout
                .take()
                .ok_or_else(|| anyhow!("the server's stdout is not a pipe"))?;
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                let result = reader.read_line(&mut line).map(|_| line);
                let _ = tx.send((result, reader));
            });
            let line = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok((Ok(line), reader)) => {
                    server._stdout = Some(reader);
                    line
                }
                Ok((Err(error), _)) => {
                    return Err(server.failure(&format!("cannot read its stdout: {error}")))
                }
                Err(_) => {
                    return Err(server.failure(&format!(
                        "it printed no address within {STARTUP_DEADLINE:?}"
                    )))
                }
            };
            if line.is_empty() {
                return Err(server.failure("it closed its stdout without printing an address"));
            }
            let Some((port, token)) = parse_url(&line) else {
                return Err(server.failure(&format!(
                    "its first line of stdout is not the editor's address: {:?}",
                    line.trim_end()
                )));
            };
            server.port = port;
            server.token = token;

            let mut last = String::from("no answer");
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(server.failure(&format!(
                        "GET /api/meta did not answer 200 within {STARTUP_DEADLINE:?} (last: {last})"
                    )));
                }
                match server.request("GET", "/api/meta", None, left) {
                    Ok(response) if response.status == 200 => {
                        return Ok((server, spawned.elapsed()));
                    }
                    Ok(response) => last = format!("status {}", response.status),
                    Err(error) => last = format!("{error:#}"),
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    return Err(server.failure(&format!("it exited ({status})")));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }

        /// An error naming what went wrong, the exit status and the end of the server's stderr.
        fn failure(&mut self, what: &str) -> anyhow::Error {
            let status = match self.child.try_wait() {
                Ok(Some(status)) => format!("exited: {status}"),
                Ok(None) => "still running; killed".to_string(),
                Err(error) => format!("status unknown: {error}"),
            };
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            anyhow!(
                "the editor server (pid {}, {status}): {what}\n--- the end of its stderr:\n{}",
                self.child.id(),
                if tail.is_empty() {
                    "(nothing)".to_string()
                } else {
                    tail.join("\n")
                }
            )
        }

        /// CPU time the server's threads have used, in nanoseconds: the sum of the first
        /// field of `/proc/<pid>/task/*/schedstat`; `None` off Linux.
        fn cpu_ns(&self) -> Option<u64> {
            let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id())).ok()?;
            let mut total = 0u64;
            for task in tasks.flatten() {
                let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
                total += text.split_whitespace().next()?.parse::<u64>().ok()?;
            }
            Some(total)
        }

        /// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`); `None` off Linux.
        fn status_kib(&self, field: &str) -> Option<u64> {
            let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
            text.lines().find_map(|line| {
                line.strip_prefix(field)?
                    .strip_prefix(':')?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
        }

        fn request(
            &self,
            method: &str,
            path: &str,
            body: Option<&[u8]>,
            timeout: Duration,
        ) -> Result<Response> {
            request(self.port, &self.token, method, path, body, timeout)
        }

        /// One request that must answer `200`; returns the body.
        fn expect_ok(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Vec<u8>> {
            let response = self
                .request(method, path, body, REQUEST_TIMEOUT)
                .with_context(|| format!("{method} {path} failed"))?;
            if response.status != 200 {
                bail!(
                    "{method} {path} answered {}: {}",
                    response.status,
                    String::from_utf8_lossy(&response.body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                );
            }
            Ok(response.body)
        }
    }

    /// `http://127.0.0.1:<port>/?token=<t>` → (port, token).
    fn parse_url(line: &str) -> Option<(u16, String)> {
        let rest = line.trim().strip_prefix("http://127.0.0.1:")?;
        let (port, rest) = rest.split_once('/')?;
        let token = rest.strip_prefix("?token=")?;
        if token.is_empty() {
            return None;
        }
        Some((port.parse().ok()?, token.to_string()))
    }

    // -----------------------------------------------------------------------------------------
    // A minimal HTTP/1.1 client: one connection per request, `Connection: close`
    //
    // Kept by hand on purpose (the CLI's client is ureq): the benchmark times the server, so the
    // client must add nothing of its own to a request (no pool, no header or body processing) and
    // must send exactly the bytes of the recipe the targets were measured with (the original
    // server's numbers in docs/performance.md), on a fresh connection or on one kept open as the
    // caller chooses. It only reads answers of the measured routes, which this server writes.

    struct Response {
        status: u16,
        body: Vec<u8>,
    }

    fn connect(port: u16, timeout: Duration) -> Result<TcpStream> {
        let timeout = timeout.max(Duration::from_millis(1));
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    fn request_head(
        port: u16,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        keep_alive: bool,
    ) -> Vec<u8> {
        let connection = if keep_alive { "keep-alive" } else { "close" };
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{TOKEN_HEADER}: {token}\r\nConnection: {connection}\r\n"
        );
        if let Some(body) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if let Some(body) = body {
            bytes.extend_from_slice(body);
        }
        bytes
    }

    fn request(
        port: u16,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Response> {
        let mut stream = connect(port, timeout)?;
        stream.write_all(&request_head(port, token, method, path, body, false))?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw)?;
        parse_response(&raw)
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|w| w == needle)
    }

    /// One kept-alive connection: requests one after another, each answer read to its
    /// `Content-Length` (every answer the measured routes give has one).
    struct KeptAlive {
        stream: TcpStream,
        port: u16,
        token: String,
        buffer: Vec<u8>,
    }

    impl KeptAlive {
        fn open(server: &Server) -> Result<KeptAlive> {
            Ok(KeptAlive {
                stream: connect(server.port, REQUEST_TIMEOUT)?,
                port: server.port,
                token: server.token.clone(),
                buffer: Vec::new(),
            })
        }

        fn request(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Response> {
            let head = request_head(self.port, &self.token, method, path, body, true);
            self.stream.write_all(&head)?;
            let mut chunk = [0u8; 64 * 1024];
            let mut expected = None;
            loop {
                if expected.is_none() {
                    if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                        let head =
                            String::from_utf8_lossy(&self.buffer[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .ok_or_else(|| anyhow!("a kept-alive answer had no Content-Length"))?;
                        expected = Some(end + 4 + length);
                    }
                }
                if let Some(total) = expected {
                    if self.buffer.len() >= total {
                        let rest = self.buffer.split_off(total);
                        let raw = std::mem::replace(&mut self.buffer, rest);
                        return parse_response(&raw);
                    }
                }
                let read = self.stream.read(&mut chunk)?;
                if read == 0 {
                    bail!("the server closed a kept-alive connection");
                }
                self.buffer.extend_from_slice(&chunk[..read]);
            }
        }
    }

    fn parse_response(raw: &[u8]) -> Result<Response> {
        let end = find(raw, b"\r\n\r\n").ok_or_else(|| {
            anyhow!(
                "incomplete HTTP response ({} bytes): no end of headers",
                raw.len()
            )
        })?;
        let head = String::from_utf8_lossy(&raw[..end]);
        let status = parse_status(&head)?;
        let chunked = head.lines().any(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("transfer-encoding:")
                .is_some_and(|v| v.contains("chunked"))
        });
        let body = &raw[end + 4..];
        let body = if chunked {
            dechunk(body)?
        } else {
            body.to_vec()
        };
        Ok(Response { status, body })
    }

    fn parse_status(head: &str) -> Result<u16> {
        let line = head.lines().next().unwrap_or("");
        line.strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| anyhow!("not an HTTP/1.1 status line: {line:?}"))
    }

    fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let line_end = find(data, b"\r\n").ok_or_else(|| anyhow!("truncated chunked body"))?;
            let size = chunk_size(&data[..line_end])?;
            data = &data[line_end + 2..];
            if size == 0 {
                return Ok(out);
            }
            if data.len() < size + 2 {
                bail!("truncated chunked body");
            }
            out.extend_from_slice(&data[..size]);
            data = &data[size + 2..];
        }
    }

    fn chunk_size(line: &[u8]) -> Result<usize> {
        let text = String::from_utf8_lossy(line);
        let hex = text.split(';').next().unwrap_or("").trim();
        usize::from_str_radix(hex, 16).map_err(|_| anyhow!("bad chunk size line: {text:?}"))
    }

    // -----------------------------------------------------------------------------------------
    // Latency

    /// Runs `CLIENTS` threads × `REQUESTS_PER_CLIENT` requests of `route(index)`, each on its
    /// own connection; every answer must be `200`. Returns the report entry and the count.
    fn measure_route(
        server: &Server,
        route: &(dyn Fn(usize) -> Request + Sync),
        keep_alive: bool,
    ) -> Result<(Value, usize)> {
        let barrier = Barrier::new(CLIENTS);
        let wall = Instant::now();
        let results: Vec<Result<Vec<Duration>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..CLIENTS)
                .map(|client| {
                    let barrier = &barrier;
                    scope.spawn(move || -> Result<Vec<Duration>> {
                        let requests: Vec<Request> = (0..REQUESTS_PER_CLIENT)
                            .map(|j| route(client * REQUESTS_PER_CLIENT + j))
                            .collect();
                        let mut samples = Vec::with_capacity(requests.len());
                        let mut kept = if keep_alive {
                            Some(KeptAlive::open(server)?)
                        } else {
                            None
                        };
                        barrier.wait();
                        for (method, path, body) in &requests {
                            let start = Instant::now();
                            let response = match &mut kept {
                                Some(kept) => kept.request(method, path, body.as_deref()),
                                None => {
                                    server.request(method, path, body.as_deref(), REQUEST_TIMEOUT)
                                }
                            }
                            .with_context(|| format!("{method} {path} failed"))?;
                            samples.push(start.elapsed());
                            if response.status != 200 {
                                bail!(
                                    "{method} {path} answered {}: {}",
                                    response.status,
                                    String::from_utf8_lossy(&response.body)
                                        .chars()
                                        .take(300)
                                        .collect::<String>()
                                );
                            }
                        }
                        Ok(samples)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")))
                })
                .collect()
        });
        let wall = wall.elapsed();
        let mut samples = Vec::new();
        for result in results {
            samples.extend(result?);
        }
        let count = samples.len();
        Ok((
            json!({
                "requests": count,
                "p50Ms": ms(percentile(&mut samples, 0.5)),
                "minMs": ms(samples.first().copied().unwrap_or_default()),
                "p99Ms": ms(percentile(&mut samples, 0.99)),
                "maxMs": ms(samples.last().copied().unwrap_or_default()),
                "perSecond": (count as f64 / wall.as_secs_f64()).round(),
            }),
            count,
        ))
    }

    // -----------------------------------------------------------------------------------------
    // External edit → SSE event

    /// `GET /api/events` read as it streams.
    struct EventStream {
        reader: BufReader<TcpStream>,
        chunked: bool,
        /// Decoded bytes not yet split into events.
        pending: Vec<u8>,
    }

    impl EventStream {
        fn open(server: &Server) -> Result<EventStream> {
            EventStream::open_path(server, "/api/events")
        }

        /// Any server-sent event stream of the server (`/api/events`, a host command stream).
        fn open_path(server: &Server, path: &str) -> Result<EventStream> {
            let mut stream = connect(server.port, REQUEST_TIMEOUT)?;
            let mut head = request_head(server.port, &server.token, "GET", path, None, false);
            // `Accept` goes before the blank line that ends the head.
            head.truncate(head.len() - 2);
            head.extend_from_slice(b"Accept: text/event-stream\r\n\r\n");
            stream.write_all(&head)?;
            let mut reader = BufReader::new(stream);
            let mut status_line = String::new();
            reader.read_line(&mut status_line)?;
            let status = parse_status(&status_line)?;
            let mut chunked = false;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line)? == 0 {
                    bail!("GET {path}: the connection closed inside the headers");
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("transfer-encoding:") {
                    chunked = value.contains("chunked");
                }
            }
            if status != 200 {
                bail!("GET {path} answered {status}");
            }
            Ok(EventStream {
                reader,
                chunked,
                pending: Vec::new(),
            })
        }

        /// The next event as (name, data); comments (keep-alives) are skipped.
        fn next(&mut self, deadline: Instant) -> Result<(String, String)> {
            loop {
                if let Some(end) = find(&self.pending, b"\n\n") {
                    let block: Vec<u8> = self.pending.drain(..end + 2).collect();
                    let block = String::from_utf8_lossy(&block).replace('\r', "");
                    let mut name = String::new();
                    let mut data = String::new();
                    for line in block.lines() {
                        if let Some(value) = line.strip_prefix("event:") {
                            name = value.trim().to_string();
                        } else if let Some(value) = line.strip_prefix("data:") {
                            if !data.is_empty() {
                                data.push('\n');
                            }
                            data.push_str(value.strip_prefix(' ').unwrap_or(value));
                        }
                    }
                    if !name.is_empty() || !data.is_empty() {
                        return Ok((name, data));
                    }
                    continue;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    bail!("no event in time");
                }
                self.reader.get_ref().set_read_timeout(Some(left))?;
                self.fill()
                    .map_err(|error| match error.downcast_ref::<std::io::Error>() {
                        Some(io)
                            if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                        {
                            anyhow!("no event in time")
                        }
                        _ => error,
                    })?;
            }
        }

        /// Reads more of the body into `pending`.
        fn fill(&mut self) -> Result<()> {
            if !self.chunked {
                let mut buf = [0u8; 8192];
                let n = self.reader.read(&mut buf)?;
                if n == 0 {
                    bail!("the event stream ended");
                }
                self.pending.extend_from_slice(&buf[..n]);
                return Ok(());
            }
            let mut line = Vec::new();
            self.reader.read_until(b'\n', &mut line)?;
            if line.is_empty() {
                bail!("the event stream ended");
            }
            let size = chunk_size(line.trim_ascii())?;
            if size == 0 {
                bail!("the event stream ended");
            }
            let start = self.pending.len();
            self.pending.resize(start + size, 0);
            self.reader.read_exact(&mut self.pending[start..])?;
            let mut crlf = [0u8; 2];
            self.reader.read_exact(&mut crlf)?;
            Ok(())
        }
    }

    /// Rewrites `EDITS` stack files on disk and times each until its `changed` event.
    fn measure_events(server: &Server, stacks_dir: &Path) -> Result<Value> {
        let mut events = EventStream::open(server).context("cannot open GET /api/events")?;
        loop {
            let (name, _) = events
                .next(Instant::now() + EVENT_DEADLINE)
                .context("waiting for the `ready` event of GET /api/events")?;
            if name == "ready" {
                break;
            }
        }
        let mut samples = Vec::new();
        for k in 0..EDITS {
            let id = format!("stack-{k:05}");
            let key = format!("project:{id}");
            let mut stack = sample_stack(k);
            stack["description"] = json!(format!("Edited on disk, edit {}.", k + 1));
            stack["items"][0]["content"] = json!(format!("You are edited helper {k}."));
            let text = json::to_pretty(&stack);
            let revision = forge_core::canonical::revision(text.as_bytes());
            let path = stacks_dir.join(format!("{id}.json"));

            let start = Instant::now();
            std::fs::write(&path, &text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let deadline = start + EVENT_DEADLINE;
            loop {
                let (name, data) = events.next(deadline).with_context(|| {
                    format!(
                        "edit {} of {EDITS}: no `changed` event naming {key} at {revision} within {EVENT_DEADLINE:?}",
                        k + 1
                    )
                })?;
                if name != "changed" {
                    continue;
                }
                let event: Value = serde_json::from_str(&data)
                    .with_context(|| format!("a `changed` event is not JSON: {data}"))?;
                let named = event["changes"].as_array().is_some_and(|changes| {
                    changes
                        .iter()
                        .any(|c| c["key"] == key.as_str() && c["revision"] == revision.as_str())
                });
                if named {
                    break;
                }
            }
            samples.push(start.elapsed());
            std::thread::sleep(EDIT_PAUSE);
        }
        let max = samples.iter().max().copied().unwrap_or_default();
        let min = samples.iter().min().copied().unwrap_or_default();
        Ok(json!({
            "edits": samples.len(),
            "medianMs": ms(median(samples)),
            "minMs": ms(min),
            "maxMs": ms(max),
            "targetMedianMs": TARGET_EVENT_MEDIAN_MS,
        }))
    }
}
