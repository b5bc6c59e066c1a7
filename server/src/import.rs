//! `pi-forge import sillytavern`: convert a SillyTavern chat-completion preset into a prompt stack,
//! print the migration report, and create the stack through the write service (never overwriting).

use crate::cli::{ImportScope, WorkspaceArgs};
use anyhow::{bail, Context, Result};
use forge_core::id::{is_valid_id, Scope};
use forge_core::import::sillytavern::{self, ImportOptions};
use forge_core::json;
use forge_core::runtime::Clock;
use forge_core::workspace::service::{self, Kind, ServiceError};
use std::path::Path;
use std::process::ExitCode;

pub struct SillyTavernArgs<'a> {
    pub file: &'a Path,
    pub character_id: Option<String>,
    pub id: Option<String>,
    pub scope: ImportScope,
    pub dry_run: bool,
    pub json: bool,
    pub workspace: &'a WorkspaceArgs,
}

pub fn sillytavern(args: SillyTavernArgs) -> Result<ExitCode> {
    let bytes =
        std::fs::read(args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    let value = json::parse_bytes(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not valid JSON: {e}", args.file.display()))?;
    let file_name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = match args.id {
        Some(id) => {
            let id = id.trim().to_string();
            if !is_valid_id(&id) {
                bail!(
                    "invalid --id {id}: ids must start with a letter or number and contain only \
                     letters, numbers, dots, underscores, and hyphens"
                );
            }
            id
        }
        None => sillytavern::default_stack_id(&file_name),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let options = ImportOptions {
        id: id.clone(),
        character_id: args.character_id,
        source_file: Some(file_name),
        converted_at: Some(Clock::utc(now_ms).iso_utc()),
    };
    let imported = sillytavern::convert(&value, &options)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;

    // `--json`: one object, printed once the outcome is known.
    let report_json = |written: Option<&str>| {
        serde_json::json!({
            "id": id,
            "dryRun": args.dry_run,
            "report": imported.report.to_json(),
            "stack": imported.stack,
            "written": written,
        })
    };
    if !args.json {
        println!("SillyTavern import of {} → stack {id}", args.file.display());
        print!("{}", imported.report.to_text());
    }
    if args.dry_run {
        if args.json {
            print!("{}", json::to_pretty(&report_json(None)));
        } else {
            println!();
            print!("{}", json::to_pretty(&imported.stack));
            println!("Dry run: nothing written.");
        }
        return Ok(ExitCode::SUCCESS);
    }

    let (paths, snapshot) = crate::input::load_workspace(args.workspace)?;
    let store = paths.store();
    let scope = match args.scope {
        ImportScope::Project => Scope::Project,
        ImportScope::Global => Scope::Global,
    };
    match service::create(
        &store,
        &snapshot,
        Kind::Stack,
        scope,
        &imported.stack,
        false,
    ) {
        Ok(written) => {
            if args.json {
                print!("{}", json::to_pretty(&report_json(Some(&written.path))));
            } else {
                println!("Wrote {} ({})", written.path, written.key);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(ServiceError::Exists { id, path, .. }) => bail!(
            "a {scope} prompt stack with id {id} already exists ({path}); nothing was written. \
             Choose another id with --id."
        ),
        Err(error) => bail!("{error}"),
    }
}
