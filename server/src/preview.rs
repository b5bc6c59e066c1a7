//! `pi-forge preview`: compile a stack against a runtime snapshot and print the result.

use crate::cli::WorkspaceArgs;
use crate::commands::load_workspace;
use anyhow::{bail, Context, Result};
use forge_core::compile::{self, CompileInput, MacroRegistry};
use forge_core::diag::Diagnostic;
use forge_core::id::{parse_stack_choice, StackChoice};
use forge_core::json;
use forge_core::runtime::{Clock, RuntimeSnapshot};
use forge_core::stack::{self, PromptStack};
use forge_core::workspace::Resolved;
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;

fn read_json(path: &Path, what: &str) -> Result<Value> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    json::parse_bytes(&bytes)
        .with_context(|| format!("{what} {} is not valid JSON", path.display()))
}

/// The clock of this machine: now, with the local UTC offset.
fn local_clock() -> Clock {
    let now = chrono::Local::now();
    Clock {
        epoch_ms: now.timestamp_millis(),
        utc_offset_minutes: now.offset().local_minus_utc() / 60,
    }
}

fn load_runtime(path: Option<&Path>, cwd: &Path) -> Result<RuntimeSnapshot> {
    match path {
        Some(path) => {
            let value = read_json(path, "runtime snapshot")?;
            serde_json::from_value(value).with_context(|| {
                format!(
                    "runtime snapshot {} does not have the RuntimeSnapshot shape (see docs/file-formats.md)",
                    path.display()
                )
            })
        }
        None => Ok(RuntimeSnapshot::default_snapshot(
            &cwd.display().to_string(),
            local_clock(),
        )),
    }
}

fn load_messages(path: &Path) -> Result<Vec<Value>> {
    match read_json(path, "conversation")? {
        Value::Array(messages) => Ok(messages),
        Value::Object(mut map) => match map.remove("messages") {
            Some(Value::Array(messages)) => Ok(messages),
            _ => bail!(
                "conversation {} must be an array of messages or an object with a `messages` array",
                path.display()
            ),
        },
        _ => bail!(
            "conversation {} must be an array of messages or an object with a `messages` array",
            path.display()
        ),
    }
}

/// A file path when it names an existing file or ends in `.json`; otherwise a selector.
fn is_file_target(target: &str) -> bool {
    target.ends_with(".json") || Path::new(target).is_file()
}

pub fn run(
    target: &str,
    args: &WorkspaceArgs,
    runtime_path: Option<&Path>,
    messages_path: Option<&Path>,
    as_json: bool,
) -> Result<ExitCode> {
    let (paths, snapshot) = load_workspace(args)?;
    let (stack, label, load_diagnostics): (Option<PromptStack>, String, Vec<Diagnostic>) =
        if is_file_target(target) {
            let path = Path::new(target);
            let bytes = std::fs::read(path)
                .with_context(|| format!("cannot read stack file {}", path.display()))?;
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("stack.json");
            let parsed = stack::parse_stack_bytes(&bytes, &stack::ParseOptions::new(name));
            let label = parsed.stack.id().to_string();
            (Some(parsed.stack), label, parsed.diagnostics)
        } else {
            match parse_stack_choice(target).map_err(|e| anyhow::anyhow!("{e}"))? {
                StackChoice::Disabled => (None, "none".to_string(), Vec::new()),
                StackChoice::Selector(selector) => match snapshot.resolve_stack(&selector) {
                    Resolved::Found(entry) => (
                        Some(entry.parsed.stack.clone()),
                        entry.key.to_string(),
                        entry.diagnostics.clone(),
                    ),
                    Resolved::NotFound => bail!(
                        "Unknown prompt stack: {target}. Run `pi-forge list stacks` to see the available ones."
                    ),
                    Resolved::Ambiguous(entries) => bail!(
                        "Prompt stack {target} is ambiguous: it is defined by {} (run `pi-forge check`)",
                        entries.iter().map(|e| e.path.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                },
            }
        };

    let mut runtime = load_runtime(runtime_path, &paths.project)?;
    if let Some(path) = messages_path {
        runtime.messages = load_messages(path)?;
    }
    let macros = MacroRegistry::new();
    let mut input = CompileInput::new(stack.as_ref(), &runtime, &macros);
    input.stack_key = Some(label.clone());
    let compiled = compile::compile(&input);
    let preview = compile::preview(&compiled, &label, &load_diagnostics, &runtime.clock);

    if as_json {
        let report = json!({
            "stack": label,
            "liveRuntime": runtime.live,
            "compiled": serde_json::to_value(&compiled)?,
            "preview": serde_json::to_value(&preview)?,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        if !runtime.live {
            println!(
                "(No live Pi session: using pi-forge's stand-in runtime. Pass --runtime FILE for real tools, skills and context.)\n"
            );
        }
        print!("{}", compile::preview_text(&preview));
    }
    Ok(ExitCode::SUCCESS)
}
