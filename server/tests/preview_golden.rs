//! Golden tests: `pi-forge preview --json` of every example stack in docs/examples/stacks,
//! compiled against docs/examples/runtime.json, is pinned in tests/golden/<id>.json.
//!
//! After an intended change of compiler output, regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p pi-forge --test preview_golden` and review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn preview_json(stack: &Path) -> String {
    let repo = repo();
    let empty = std::env::temp_dir().join(format!("pi-forge-golden-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pi-forge"))
        .arg("preview")
        .arg(stack)
        .arg("--runtime")
        .arg(repo.join("docs/examples/runtime.json"))
        .arg("--json")
        .arg("--project")
        .arg(&empty)
        .env("PI_FORGE_GLOBAL_DIR", &empty)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // Exit status 1 exactly when the preview reports an error diagnostic.
    let report: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|_| {
        panic!(
            "preview of {} failed: {}",
            stack.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let has_error = report["preview"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["level"] == "error");
    assert_eq!(
        out.status.code(),
        Some(if has_error { 1 } else { 0 }),
        "exit status of the preview of {}",
        stack.display()
    );
    text
}

#[test]
fn example_previews_match_golden_files() {
    let repo = repo();
    let golden_dir = repo.join("server/tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    // Updating turns this test into a writer that always passes: never under CI.
    assert!(
        !(update && std::env::var_os("CI").is_some_and(|v| !v.is_empty())),
        "UPDATE_GOLDEN is set under CI (CI is set): golden files are only updated by hand, then reviewed"
    );
    let mut stacks: Vec<PathBuf> = std::fs::read_dir(repo.join("docs/examples/stacks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    stacks.sort();
    assert!(
        stacks.len() >= 15,
        "expected at least 15 example stacks, found {}",
        stacks.len()
    );
    let mut mismatches = Vec::new();
    for stack in &stacks {
        let actual = preview_json(stack);
        let golden = golden_dir.join(stack.file_name().unwrap());
        if update {
            std::fs::create_dir_all(&golden_dir).unwrap();
            std::fs::write(&golden, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
            panic!(
                "missing golden file {}; run UPDATE_GOLDEN=1 cargo test -p pi-forge --test preview_golden",
                golden.display()
            )
        });
        if expected != actual {
            mismatches.push(stack.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(
        mismatches.is_empty(),
        "preview output changed for {mismatches:?}; if intended, regenerate with UPDATE_GOLDEN=1 and review the diff"
    );
}

#[test]
fn examples_cover_every_slot_mode_and_regex_stage() {
    let repo = repo();
    let mut text = String::new();
    for entry in std::fs::read_dir(repo.join("docs/examples/stacks")).unwrap() {
        text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    for slot in forge_core::stack::BUILTIN_SLOTS {
        assert!(
            text.contains(&format!("\"slot\": \"{slot}\"")),
            "no example uses slot {slot}"
        );
    }
    for mode in [
        "\"mode\": \"append\"",
        "\"mode\": \"prepend\"",
        "\"mode\": \"replace\"",
    ] {
        assert!(text.contains(mode), "no example uses {mode}");
    }
    for stage in [
        "\"stage\": \"history\"",
        "\"stage\": \"compiled\"",
        "\"effect\": \"finalize\"",
        "\"targets\": [\n",
    ] {
        assert!(text.contains(stage), "no example uses {stage:?}");
    }
}
