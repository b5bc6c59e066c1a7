//! `pi-forge test`: runs the golden cases under `.pi/forge/tests/<preset-id>/<case>.json`
//! (forge-core's [`forge_core::golden`] compiles and judges each) and reports them as text, JSON
//! or JUnit XML; `--update` rewrites the expected parts of each case it ran.

use crate::cli::WorkspaceArgs;
use crate::files::{write_atomic, Access};
use crate::input::load_workspace;
use anyhow::{bail, Context, Result};
use forge_core::golden::{self, Failure, TOKEN_COUNT_KIND};
use forge_core::id::{parse_stack_choice, StackChoice};
use forge_core::json;
use forge_core::workspace::{Resolved, WorkspaceSnapshot};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where a project keeps its cases, below the project folder.
pub const TESTS_DIR: &str = ".pi/forge/tests";

/// What `pi-forge test` was asked.
pub struct TestArgs<'a> {
    pub presets: &'a [String],
    pub workspace: &'a WorkspaceArgs,
    pub update: bool,
    pub json: bool,
    pub junit: Option<&'a Path>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Pass,
    Fail,
    Error,
    Updated,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Error => "error",
            Status::Updated => "updated",
        }
    }
}

/// One case's result.
struct CaseReport {
    preset: String,
    case: String,
    /// Relative to the project folder.
    file: String,
    status: Status,
    failures: Vec<Failure>,
    error: Option<String>,
    /// System and total tokens, when the case compiled.
    tokens: Option<(u64, u64)>,
}

/// The case files below `dir`, by Preset folder then file name; only `*.json` files that do not
/// start with a dot.
fn case_files(dir: &Path) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let mut presets = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        if !entry.path().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        let mut files = Vec::new();
        let inner = std::fs::read_dir(entry.path())
            .with_context(|| format!("cannot read {}", entry.path().display()))?;
        for file in inner {
            let path = file
                .with_context(|| format!("cannot read {}", entry.path().display()))?
                .path();
            let file_name = path.file_name().map(|n| n.to_string_lossy().to_string());
            if path.is_file()
                && file_name.is_some_and(|n| n.ends_with(".json") && !n.starts_with('.'))
            {
                files.push(path);
            }
        }
        files.sort();
        presets.push((name, files));
    }
    presets.sort();
    Ok(presets)
}

/// Finds the Preset a folder name selects; the error says why none is used.
fn resolve<'a>(
    snapshot: &'a WorkspaceSnapshot,
    name: &str,
) -> Result<&'a forge_core::workspace::StackEntry, String> {
    let selector = match parse_stack_choice(name) {
        Ok(StackChoice::Selector(selector)) => selector,
        Ok(StackChoice::Disabled) | Err(_) => {
            return Err(format!(
                "the folder name {name:?} is not a Preset id (the folder of a case is named after its Preset)"
            ))
        }
    };
    match snapshot.resolve_stack(&selector) {
        Resolved::Found(entry) => Ok(entry),
        Resolved::NotFound => Err(format!(
            "no Preset {name} in this workspace (run `pi-forge list stacks`; a case for a missing Preset is an error, not a skip)"
        )),
        Resolved::Ambiguous(entries) => Err(format!(
            "Preset {name} is ambiguous: it is defined by {} (run `pi-forge check`)",
            entries
                .iter()
                .map(|e| e.path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A case's status, failures, error and (system, total) tokens.
type CaseRun = (Status, Vec<Failure>, Option<String>, Option<(u64, u64)>);

fn run_case(snapshot: &WorkspaceSnapshot, preset: &str, path: &Path, update: bool) -> CaseRun {
    let entry = match resolve(snapshot, preset) {
        Ok(entry) => entry,
        Err(why) => return (Status::Error, Vec::new(), Some(why), None),
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            return (
                Status::Error,
                Vec::new(),
                Some(format!("cannot read: {e}")),
                None,
            )
        }
    };
    let case = match golden::parse_case(&bytes) {
        Ok(case) => case,
        Err(e) => return (Status::Error, Vec::new(), Some(e.to_string()), None),
    };
    let key = entry.key.to_string();
    let outcome = golden::compile_case(&case, &entry.parsed.stack, &key, &entry.diagnostics);
    let tokens = Some((outcome.system_tokens, outcome.total_tokens));
    let mut failures = golden::check_case(&case, &outcome);
    let mut status = if failures.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    if update && outcome.errors.is_empty() {
        let updated = golden::updated_case(&case, &outcome);
        // Only a change of value is written: a passing case keeps its own layout.
        if updated != Value::Object(case.raw.clone()) {
            let text = json::to_pretty(&updated);
            if let Err(e) = write_atomic(path, text.as_bytes(), Access::Default) {
                return (Status::Error, failures, Some(format!("{e:#}")), tokens);
            }
            // What is left after the update: what an expected part cannot fix (budgets).
            match golden::parse_case(text.as_bytes()) {
                Ok(rewritten) => failures = golden::check_case(&rewritten, &outcome),
                Err(e) => return (Status::Error, failures, Some(e.to_string()), tokens),
            }
            status = if failures.is_empty() {
                Status::Updated
            } else {
                Status::Fail
            };
        }
    }
    (status, failures, None, tokens)
}

pub fn run(args: TestArgs) -> Result<ExitCode> {
    let (paths, snapshot) = load_workspace(args.workspace)?;
    let dir = paths.project.join(TESTS_DIR);
    let mut found = if dir.is_dir() {
        case_files(&dir)?
    } else {
        Vec::new()
    };
    if !args.presets.is_empty() {
        for wanted in args.presets {
            if !found.iter().any(|(name, _)| name == wanted) {
                bail!(
                    "no cases for Preset {wanted}: {}/{wanted}/ does not exist (a case is {TESTS_DIR}/<preset-id>/<case>.json)",
                    TESTS_DIR
                );
            }
        }
        found.retain(|(name, _)| args.presets.contains(name));
    }
    let mut reports = Vec::new();
    for (preset, files) in &found {
        for path in files {
            let (status, failures, error, tokens) = run_case(&snapshot, preset, path, args.update);
            let case = path
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            reports.push(CaseReport {
                preset: preset.clone(),
                file: format!("{TESTS_DIR}/{preset}/{case}.json"),
                case,
                status,
                failures,
                error,
                tokens,
            });
        }
    }
    if let Some(junit) = args.junit {
        write_atomic(junit, junit_xml(&reports).as_bytes(), Access::Default)
            .with_context(|| format!("cannot write the JUnit report {}", junit.display()))?;
    }
    if args.json {
        print!("{}", json::to_pretty(&json_report(&reports)));
    } else {
        print!("{}", text_report(&reports, dir.is_dir()));
    }
    let bad = reports
        .iter()
        .filter(|r| matches!(r.status, Status::Fail | Status::Error))
        .count();
    Ok(crate::input::exit_for_errors(bad))
}

fn count(reports: &[CaseReport], status: Status) -> usize {
    reports.iter().filter(|r| r.status == status).count()
}

fn summary_line(reports: &[CaseReport]) -> String {
    let mut line = format!(
        "{} case{}: {} passed, {} failed, {} error{}",
        reports.len(),
        if reports.len() == 1 { "" } else { "s" },
        count(reports, Status::Pass),
        count(reports, Status::Fail),
        count(reports, Status::Error),
        if count(reports, Status::Error) == 1 {
            ""
        } else {
            "s"
        },
    );
    let updated = count(reports, Status::Updated);
    if updated > 0 {
        line.push_str(&format!(", {updated} updated"));
    }
    line
}

fn text_report(reports: &[CaseReport], has_dir: bool) -> String {
    if reports.is_empty() {
        return if has_dir {
            format!("No golden cases in {TESTS_DIR}/ (a case is {TESTS_DIR}/<preset-id>/<case>.json; see docs/file-formats.md).\n")
        } else {
            format!("No golden cases: {TESTS_DIR}/ does not exist (a case is {TESTS_DIR}/<preset-id>/<case>.json; see docs/file-formats.md).\n")
        };
    }
    let mut out = String::new();
    for report in reports {
        let word = report.status.word().to_uppercase();
        out.push_str(&format!("{word} {}/{}", report.preset, report.case));
        if let Some(error) = &report.error {
            out.push_str(&format!(": {error}"));
        }
        out.push('\n');
        for failure in &report.failures {
            out.push_str(&format!("  {}: {}\n", failure.part, failure.summary));
            if let Some(diff) = &failure.diff {
                for line in diff.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
    }
    out.push('\n');
    out.push_str(&summary_line(reports));
    out.push('\n');
    out
}

fn json_report(reports: &[CaseReport]) -> Value {
    let cases: Vec<Value> = reports
        .iter()
        .map(|r| {
            json!({
                "preset": r.preset,
                "case": r.case,
                "file": r.file,
                "status": r.status.word(),
                "error": r.error,
                "failures": r.failures.iter().map(|f| json!({
                    "part": f.part, "summary": f.summary, "diff": f.diff,
                })).collect::<Vec<_>>(),
                "tokens": r.tokens.map(|(system, total)| json!({
                    "system": system, "total": total, "count": TOKEN_COUNT_KIND,
                })),
            })
        })
        .collect();
    json!({
        "cases": cases,
        "summary": {
            "cases": reports.len(),
            "passed": count(reports, Status::Pass),
            "failed": count(reports, Status::Fail),
            "errors": count(reports, Status::Error),
            "updated": count(reports, Status::Updated),
        },
    })
}

/// forge-core's XML escaping, after the control characters XML 1.0 cannot hold (CI readers
/// reject them) became U+FFFD.
fn xml_escape(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| {
            if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    forge_core::template::escape_xml(&clean)
}

/// A JUnit report: one suite, one `testcase` per case (class = Preset), failures with their
/// diffs, case errors as `error`.
fn junit_xml(reports: &[CaseReport]) -> String {
    let failed = count(reports, Status::Fail);
    let errors = count(reports, Status::Error);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pi-forge test\" tests=\"{}\" failures=\"{failed}\" errors=\"{errors}\">\n  <testsuite name=\"pi-forge golden cases\" tests=\"{}\" failures=\"{failed}\" errors=\"{errors}\">\n",
        reports.len(),
        reports.len()
    );
    for r in reports {
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"",
            xml_escape(&r.preset),
            xml_escape(&r.case),
            xml_escape(&r.file)
        ));
        match (r.status, &r.error) {
            (Status::Error, Some(error)) => out.push_str(&format!(
                ">\n      <error message=\"{}\"/>\n    </testcase>\n",
                xml_escape(error)
            )),
            (Status::Fail, _) => {
                let message = r
                    .failures
                    .iter()
                    .map(|f| format!("{}: {}", f.part, f.summary))
                    .collect::<Vec<_>>()
                    .join("; ");
                let body: String = r
                    .failures
                    .iter()
                    .filter_map(|f| f.diff.as_deref())
                    .collect();
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml_escape(&message),
                    xml_escape(&body)
                ));
            }
            _ => out.push_str("/>\n"),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
