//! `pi-forge preview`: compile a stack against a runtime snapshot and print the result.

use crate::cli::WorkspaceArgs;
use crate::clock::local_clock;
use crate::input::{exit_for_errors, input_name, load_workspace, read_input};
use crate::paths::WorkspacePaths;
use anyhow::{bail, Context, Result};
use forge_core::compile::{self, CompileInput, MacroRegistry};
use forge_core::diag::{counts, Diagnostic};
use forge_core::id::{parse_stack_choice, StackChoice};
use forge_core::json;
use forge_core::rewrite;
use forge_core::runtime::RuntimeSnapshot;
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

/// Where the runtime a preview compiles against came from.
enum RuntimeSource {
    File,
    /// The live Pi session of the project's editor on this port.
    Live(u16),
    StandIn,
}

impl RuntimeSource {
    fn name(&self) -> &'static str {
        match self {
            RuntimeSource::File => "file",
            RuntimeSource::Live(_) => "live",
            RuntimeSource::StandIn => "stand-in",
        }
    }
}

fn load_runtime(
    path: Option<&Path>,
    paths: &WorkspacePaths,
    no_live: bool,
) -> Result<(RuntimeSnapshot, RuntimeSource)> {
    if let Some(path) = path {
        let value = read_json(path, "runtime snapshot")?;
        let runtime = serde_json::from_value(value).with_context(|| {
            format!(
                "runtime snapshot {} does not have the RuntimeSnapshot shape (see docs/file-formats.md)",
                path.display()
            )
        })?;
        return Ok((runtime, RuntimeSource::File));
    }
    if !no_live {
        if let Some((runtime, port)) = live_runtime(paths) {
            return Ok((runtime, RuntimeSource::Live(port)));
        }
    }
    Ok((
        RuntimeSnapshot::default_snapshot(&paths.project.display().to_string(), local_clock()),
        RuntimeSource::StandIn,
    ))
}

/// The runtime of the live Pi session the project's running editor has, if it has one (what
/// the editor's own preview compiles against). No editor, no live session or an answer that
/// cannot be read all mean none: the stand-in is used, and the note says so.
fn live_runtime(paths: &WorkspacePaths) -> Option<(RuntimeSnapshot, u16)> {
    let editor = crate::ui::running(paths).ok()?;
    let (status, body) =
        crate::ui::request(editor.port, &editor.token, "GET", "/api/runtime", "").ok()?;
    if status != 200 {
        return None;
    }
    let runtime: RuntimeSnapshot = serde_json::from_str(&body).ok()?;
    runtime.live.then_some((runtime, editor.port))
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

/// What `pi-forge preview` was asked.
pub struct PreviewArgs<'a> {
    pub target: &'a str,
    pub workspace: &'a WorkspaceArgs,
    pub runtime: Option<&'a Path>,
    pub no_live: bool,
    pub messages: Option<&'a Path>,
    pub prompt: Option<String>,
    pub finalize: Option<&'a Path>,
    pub json: bool,
}

pub fn run(args: PreviewArgs) -> Result<ExitCode> {
    let PreviewArgs {
        target,
        workspace,
        runtime: runtime_path,
        no_live,
        messages: messages_path,
        prompt,
        finalize,
        json: as_json,
    } = args;
    let (paths, snapshot) = load_workspace(workspace)?;
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

    if let Some(path) = finalize {
        return run_finalize(stack.as_ref(), &label, load_diagnostics, path, as_json);
    }

    let (mut runtime, source) = load_runtime(runtime_path, &paths, no_live)?;
    if let Some(path) = messages_path {
        runtime.messages = load_messages(path)?;
    }
    let macros = MacroRegistry::new();
    let mut input = CompileInput::new(stack.as_ref(), &runtime, &macros);
    input.stack_key = Some(label.clone());
    input.prompt = prompt.clone();
    let (compiled, template_env) = compile::compile_with_env(&input);
    let preview = compile::preview(&compiled, &label, &load_diagnostics, &runtime.clock);
    let (errors, _, _) = counts(&preview.diagnostics);

    if as_json {
        let report = json!({
            "stack": label,
            "liveRuntime": runtime.live,
            "runtimeSource": source.name(),
            "prompt": prompt,
            "activeTools": compiled.selected_tools,
            "templateEnv": template_env,
            "compiled": serde_json::to_value(&compiled)?,
            "preview": serde_json::to_value(&preview)?,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        match source {
            RuntimeSource::Live(port) => println!(
                "(Live Pi session: using its runtime from the editor on port {port}, model {}, {} tools. Pass --no-live for the stand-in.)\n",
                runtime
                    .model
                    .as_ref()
                    .map_or("none".to_string(), |m| format!("{}/{}", m.provider, m.id)),
                runtime.tools.len()
            ),
            RuntimeSource::StandIn => println!(
                "(No live Pi session: using pi-forge's stand-in runtime. Pass --runtime FILE for real tools, skills and context.)\n"
            ),
            RuntimeSource::File => {}
        }
        print!("{}", compile::preview_text(&preview));
    }
    Ok(exit_for_errors(errors))
}

/// The message `--finalize` names: a message object, or a string taken as an assistant
/// message's text.
fn load_assistant_message(path: &Path) -> Result<Value> {
    let name = input_name(path);
    let bytes = read_input(path, "assistant message")?;
    let value = json::parse_bytes(&bytes)
        .with_context(|| format!("assistant message {name} is not valid JSON"))?;
    match value {
        Value::String(text) => Ok(json!({
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
        })),
        Value::Object(_) => Ok(value),
        _ => bail!("assistant message {name} must be a message object or a JSON string (its text)"),
    }
}

/// `preview --finalize`: the stack's finalize rules on one assistant message, as Pi's
/// `message_end` runs them. Prints the message (changed or not), whether it changed and the
/// diagnostics (the stack's load diagnostics, rule load errors, then the rules' own).
fn run_finalize(
    stack: Option<&PromptStack>,
    label: &str,
    mut diagnostics: Vec<Diagnostic>,
    path: &Path,
    as_json: bool,
) -> Result<ExitCode> {
    let message = load_assistant_message(path)?;
    let (rules, rule_diagnostics) =
        rewrite::rules_from_config(stack.and_then(|s| s.regex.as_ref()));
    diagnostics.extend(rule_diagnostics);
    let rule_count = rewrite::finalize_rule_count(&rules);
    let (result, changed) = match rewrite::finalize(&rules, &message) {
        Some((finalized, finalize_diagnostics)) => {
            diagnostics.extend(finalize_diagnostics);
            (finalized, true)
        }
        None => (message, false),
    };
    let (errors, _, _) = counts(&diagnostics);
    if as_json {
        let report = json!({
            "stack": label,
            "finalizeRules": rule_count,
            "changed": changed,
            "message": result,
            "diagnostics": diagnostics,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        println!(
            "Finalize with {label}: {rule_count} finalize rule(s); the message {}.",
            if changed { "changed" } else { "is unchanged" }
        );
        for d in &diagnostics {
            println!("  {d}");
        }
        println!();
        println!("{}", forge_core::message::preview_text(&result));
    }
    Ok(exit_for_errors(errors))
}
