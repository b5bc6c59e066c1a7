//! The non-server commands: `check`, `list`, `fingerprint`; dispatch for `preview`, `test`, `template`,
//! `ui`, `ui stop`, `import` and `bench`.

use crate::cli::{
    Cli, Command, ImportSource, ListKind, PiAction, TemplateAction, UiAction, WorkspaceArgs,
};
use crate::input::{exit_for_errors, input_name, load_workspace, read_input};
use crate::paths::WorkspacePaths;
use anyhow::{Context, Result};
use forge_core::canonical::{fingerprint, revision};
use forge_core::diag::{counts, Diagnostic};
use forge_core::workspace::{Kind, Loaded, WorkspaceSnapshot};
use forge_core::{capability, json, profile, stack};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Check { workspace, json } => check(&workspace, json),
        Command::List {
            kind,
            workspace,
            json,
        } => list(kind, &workspace, json),
        Command::Fingerprint {
            file,
            value: true,
            json,
        } => fingerprint_value(&file, json),
        Command::Fingerprint { file, json, .. } => fingerprint_file(&file, json),
        Command::Payload { action } => crate::payload_cli::run(action),
        Command::Agent { action } => crate::agent::run(action),
        Command::Test {
            presets,
            workspace,
            update,
            json,
            junit,
        } => crate::golden::run(crate::golden::TestArgs {
            presets: &presets,
            workspace: &workspace,
            update,
            json,
            junit: junit.as_deref(),
        }),
        Command::Preview {
            target,
            workspace,
            runtime,
            no_live,
            messages,
            prompt,
            finalize,
            json,
        } => crate::preview::run(crate::preview::PreviewArgs {
            target: &target,
            workspace: &workspace,
            runtime: runtime.as_deref(),
            no_live,
            messages: messages.as_deref(),
            prompt,
            finalize: finalize.as_deref(),
            json,
        }),
        Command::Template { action } => match action {
            TemplateAction::Check { args } => crate::template::check(&args),
            TemplateAction::Render { args } => crate::template::render(&args),
        },
        Command::Ui {
            action: Some(UiAction::Stop { workspace: stop }),
            workspace,
            ..
        } => crate::ui::stop(&WorkspacePaths::from_args(&merge(stop, workspace))?),
        Command::Ui {
            action: Some(UiAction::Open { workspace: open }),
            workspace,
            ..
        } => crate::ui::open(&WorkspacePaths::from_args(&merge(open, workspace))?),
        Command::Ui {
            action: None,
            workspace,
            port,
            no_open,
            restart,
            demo,
        } => {
            let paths = if demo {
                // The demo serves its own temp directories; the current directory is not read.
                WorkspacePaths {
                    project: std::env::temp_dir(),
                    global: std::env::temp_dir(),
                    trusted: true,
                }
            } else {
                WorkspacePaths::from_args(&workspace)?
            };
            crate::ui::run(crate::ui::UiOptions {
                paths,
                port,
                no_open,
                demo,
                restart,
            })
        }
        Command::Pi {
            action: PiAction::Install { dir, print_path },
        } => crate::pi_install::run(dir.as_deref(), print_path),
        Command::Import {
            source:
                ImportSource::Sillytavern {
                    file,
                    character_id,
                    id,
                    scope,
                    dry_run,
                    json,
                    workspace,
                },
        } => crate::import::sillytavern(crate::import::SillyTavernArgs {
            file: &file,
            character_id,
            id,
            scope,
            dry_run,
            json,
            workspace: &workspace,
        }),
        Command::Bench {
            stacks,
            only,
            json: _,
        } => {
            crate::bench::run(stacks, &only)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `pi-forge ui --project X stop` and `pi-forge ui stop --project X` mean the same.
fn merge(inner: WorkspaceArgs, outer: WorkspaceArgs) -> WorkspaceArgs {
    WorkspaceArgs {
        project: inner.project.or(outer.project),
        global_dir: inner.global_dir.or(outer.global_dir),
        untrusted: inner.untrusted || outer.untrusted,
    }
}

/// A path relative to the project when it is inside it, for shorter output.
fn short_path(path: &str, project: &Path) -> String {
    Path::new(path)
        .strip_prefix(project)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_string())
}

struct Row<'a> {
    kind: Kind,
    key: String,
    path: String,
    revision: &'a str,
    diagnostics: &'a [Diagnostic],
}

fn rows<'a>(
    snapshot: &'a WorkspaceSnapshot,
    project: &Path,
    only: Option<ListKind>,
) -> Vec<Row<'a>> {
    fn push<'a, T>(out: &mut Vec<Row<'a>>, kind: Kind, entries: &'a [Loaded<T>], project: &Path) {
        out.extend(entries.iter().map(|e| Row {
            kind,
            key: e.key.to_string(),
            path: short_path(&e.path, project),
            revision: &e.revision,
            diagnostics: &e.diagnostics,
        }));
    }
    let mut out = Vec::new();
    if matches!(only, None | Some(ListKind::Stacks)) {
        push(&mut out, Kind::Stack, &snapshot.stacks, project);
    }
    if matches!(only, None | Some(ListKind::Profiles)) {
        push(&mut out, Kind::Profile, &snapshot.profiles, project);
    }
    if matches!(only, None | Some(ListKind::Capabilities)) {
        push(&mut out, Kind::Capability, &snapshot.capabilities, project);
    }
    out
}

fn check(args: &WorkspaceArgs, as_json: bool) -> Result<ExitCode> {
    let (paths, snapshot) = load_workspace(args)?;
    let mut groups: Vec<(String, Option<Kind>, String, &[Diagnostic])> = Vec::new();
    if !snapshot.problems.is_empty() {
        groups.push((
            "(workspace)".into(),
            None,
            String::new(),
            &snapshot.problems,
        ));
    }
    if let Some(config) = &snapshot.config {
        groups.push((
            short_path(&config.path, &paths.project),
            None,
            String::new(),
            &config.diagnostics,
        ));
    }
    for row in rows(&snapshot, &paths.project, None) {
        groups.push((row.path, Some(row.kind), row.key, row.diagnostics));
    }
    let all: Vec<Diagnostic> = groups.iter().flat_map(|g| g.3.iter().cloned()).collect();
    let (errors, warnings, infos) = counts(&all);
    let files = groups.len();

    if as_json {
        let report = json!({
            "ok": errors == 0,
            "trusted": snapshot.trusted,
            "project": paths.project.display().to_string(),
            "globalDir": paths.global.display().to_string(),
            "files": groups.iter().map(|(path, kind, key, diags)| json!({
                "path": path,
                "kind": kind.map(|k| k.noun()),
                "key": if key.is_empty() { Value::Null } else { json!(key) },
                "diagnostics": diags,
            })).collect::<Vec<_>>(),
            "errors": errors,
            "warnings": warnings,
            "infos": infos,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        if !snapshot.trusted {
            println!("Project is untrusted: only global resources were checked.");
        }
        for (path, _, key, diags) in &groups {
            if diags.is_empty() {
                continue;
            }
            if key.is_empty() {
                println!("{path}");
            } else {
                println!("{path} ({key})");
            }
            for d in diags.iter() {
                println!("  {d}");
            }
        }
        let with_problems = groups.iter().filter(|g| !g.3.is_empty()).count();
        println!(
            "{files} file(s) checked, {with_problems} with diagnostics: {errors} error(s), {warnings} warning(s), {infos} info."
        );
    }
    Ok(exit_for_errors(errors))
}

fn list(kind: Option<ListKind>, args: &WorkspaceArgs, as_json: bool) -> Result<ExitCode> {
    let (paths, snapshot) = load_workspace(args)?;
    let rows = rows(&snapshot, &paths.project, kind);
    if as_json {
        let items: Vec<Value> = rows
            .iter()
            .map(|r| {
                let (e, w, i) = counts(r.diagnostics);
                json!({
                    "kind": r.kind.noun(),
                    "selector": r.key,
                    "path": r.path,
                    "revision": r.revision,
                    "errors": e,
                    "warnings": w,
                    "infos": i,
                })
            })
            .collect();
        print!("{}", json::to_pretty(&Value::Array(items)));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!(
            "No resources found (project {}, global {}).",
            paths.project.display(),
            paths.global.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let statuses: Vec<String> = rows
        .iter()
        .map(|r| match counts(r.diagnostics) {
            (0, 0, _) => "ok".to_string(),
            (0, w, _) => format!("{w} warning(s)"),
            (e, 0, _) => format!("{e} error(s)"),
            (e, w, _) => format!("{e} error(s), {w} warning(s)"),
        })
        .collect();
    let width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
    let status_width = statuses.iter().map(String::len).max().unwrap_or(0);
    for (r, status) in rows.iter().zip(&statuses) {
        println!(
            "{:<10} {:<width$}  {:<status_width$}  {}",
            r.kind.noun(),
            r.key,
            status,
            r.path
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn detect_kind(path: &Path, value: &Value) -> Option<Kind> {
    match value.get("type").and_then(Value::as_str) {
        Some("pi-forge.prompt-stack") => return Some(Kind::Stack),
        Some("pi-forge.agent-profile") => return Some(Kind::Profile),
        Some("pi-forge.capability") => return Some(Kind::Capability),
        _ => {}
    }
    let parent = path.parent()?.file_name()?.to_str()?;
    match parent {
        "prompt-stacks" => Some(Kind::Stack),
        "agent-profiles" => Some(Kind::Profile),
        "capabilities" => Some(Kind::Capability),
        _ => None,
    }
}

fn fingerprint_file(file: &Path, as_json: bool) -> Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let value = json::parse_bytes(&bytes)
        .with_context(|| format!("{} is not valid JSON", file.display()))?;
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("resource.json");
    let kind = detect_kind(file, &value);
    let (id, fp, diagnostics): (Option<String>, String, Vec<Diagnostic>) = match kind {
        Some(Kind::Stack) => {
            let parsed = stack::parse_stack_bytes(
                &bytes,
                &stack::ParseOptions {
                    file_name: name,
                    extra_slots: &[],
                },
            );
            (
                Some(parsed.stack.id().to_string()),
                parsed.stack.fingerprint(),
                parsed.diagnostics,
            )
        }
        Some(Kind::Profile) => {
            let parsed = profile::parse_profile_bytes(&bytes, name, forge_core::id::Scope::Project);
            (
                Some(parsed.profile.id.clone()),
                parsed.profile.fingerprint(),
                parsed.diagnostics,
            )
        }
        Some(Kind::Capability) => {
            let parsed = capability::parse_capability_bytes(&bytes, name);
            (
                Some(parsed.capability.id.clone()),
                fingerprint(&parsed.capability.to_value()),
                parsed.diagnostics,
            )
        }
        None => (None, fingerprint(&value), Vec::new()),
    };
    let kind_name = kind.map(|k| k.noun()).unwrap_or("json");
    let rev = revision(&bytes);
    if as_json {
        let report = json!({
            "path": file.display().to_string(),
            "kind": kind_name,
            "id": id,
            "revision": rev,
            "fingerprint": fp,
            "diagnostics": diagnostics,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        println!("path:        {}", file.display());
        println!("kind:        {kind_name}");
        if let Some(id) = &id {
            println!("id:          {id}");
        }
        println!("revision:    {rev}");
        println!("fingerprint: {fp}");
        if kind.is_some() {
            println!("(the fingerprint covers the normalized resource, so formatting and unknown fields do not change it)");
        }
        let (e, w, _) = counts(&diagnostics);
        if e + w > 0 {
            println!("note: the file has {e} error(s) and {w} warning(s); run `pi-forge check` to see them");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `pi-forge fingerprint --value`: the canonical JSON and fingerprint of any JSON value, as it
/// is. A number too large for a double is refused (exit 1), as canonicalization refuses
/// non-finite numbers.
fn fingerprint_value(file: &Path, as_json: bool) -> Result<ExitCode> {
    let bytes = read_input(file, "JSON file")?;
    let name = input_name(file);
    let read = json::parse_bytes_lenient(&bytes)
        .map_err(|e| anyhow::anyhow!("{name} is not valid JSON: {e}"))?;
    if let Some(bad) = read.non_finite.first() {
        let pointer = if bad.pointer.is_empty() {
            "the root"
        } else {
            bad.pointer.as_str()
        };
        let message = format!(
            "Cannot canonicalize a non-finite number ({}) at {pointer}.",
            bad.text
        );
        if as_json {
            print!(
                "{}",
                json::to_pretty(&json!({"path": name, "ok": false, "error": message}))
            );
        } else {
            eprintln!("pi-forge: {name}: {message}");
        }
        return Ok(ExitCode::from(1));
    }
    let canonical = json::to_canonical(&read.value);
    let fp = fingerprint(&read.value);
    if as_json {
        let report = json!({
            "path": name,
            "ok": true,
            "canonical": canonical,
            "fingerprint": fp,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        println!("canonical:   {canonical}");
        println!("fingerprint: {fp}");
    }
    Ok(ExitCode::SUCCESS)
}
