//! `pi-forge bench`: measured numbers for `cargo xtask bench`, printed as JSON.
//!
//! Workspace load: a generated project with N stacks (plus a few profiles and capabilities) is
//! written to a temporary directory, then loaded and validated several times; the report gives
//! the median and best wall time. Fingerprints: canonical JSON + SHA-256 of a realistic stack,
//! repeated for about half a second.

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
        "mode": if i % 3 == 0 { "append" } else { "replace" },
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

fn bench_compile() -> Value {
    use forge_core::compile::{compile, CompileInput, MacroRegistry};
    use forge_core::runtime::{Clock, RuntimeSnapshot};
    let parsed = forge_core::stack::parse_stack_value(
        compile_stack(),
        &forge_core::stack::ParseOptions::new("bench.json"),
    );
    let mut runtime =
        RuntimeSnapshot::default_snapshot("/home/user/project", Clock::utc(1_781_341_687_000));
    runtime.messages = conversation(1000);
    let macros = MacroRegistry::new();
    let input = CompileInput::new(Some(&parsed.stack), &runtime, &macros);
    let mut samples = Vec::new();
    let mut messages = 0;
    for _ in 0..5 {
        std::hint::black_box(compile(&input)); // warm-up
    }
    for _ in 0..200 {
        let start = Instant::now();
        let compiled = compile(std::hint::black_box(&input));
        samples.push(start.elapsed());
        messages = compiled.messages.len();
    }
    json!({
        "items": parsed.stack.items().len(),
        "conversation": 1000,
        "outputMessages": messages,
        "stackErrors": parsed.diagnostics.iter().filter(|d| d.is_error()).count(),
        "runs": samples.len(),
        "p50Ms": ms(percentile(&mut samples, 0.5)),
        "p90Ms": ms(percentile(&mut samples, 0.9)),
        "targetP50Ms": 2,
    })
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

pub fn run(stacks: usize, only: &[String]) -> Result<()> {
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
    print!("{}", json::to_pretty(&Value::Object(report)));
    Ok(())
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
