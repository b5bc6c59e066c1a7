//! The `pi-forge` command line, run as a real process against temp workspaces.

use std::path::Path;
use std::process::Output;

mod support;

use support::Dirs;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const GOOD_STACK: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.prompt-stack",
  "id": "reviewer",
  "items": [
    {"kind": "block", "id": "intro", "role": "system", "content": "Review."},
    {"kind": "slot", "id": "history", "slot": "chat-history"}
  ]
}
"#;

#[test]
fn check_clean_workspace_exits_zero() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/reviewer.json", GOOD_STACK);
    let out = ws.run(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "1 file(s) checked, 0 with diagnostics: 0 error(s), 0 warning(s), 0 info.\n"
    );
}

#[test]
fn check_groups_diagnostics_by_file_and_exits_one_on_error() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/reviewer.json", GOOD_STACK);
    ws.write(".pi/forge/prompt-stacks/x.json", "{}");
    let out = ws.run(&["check"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        ".pi/forge/prompt-stacks/x.json (project:x)\n  \
error: Stack id must be a non-empty string.\n  \
error: Prompt stack must contain an items array.\n  \
warning: No enabled chat-history slot found; Pi chat context will be appended at the end.\n\
2 file(s) checked, 1 with diagnostics: 2 error(s), 1 warning(s), 0 info.\n"
    );
}

#[test]
fn check_reports_template_errors_as_their_own_category() {
    let ws = Dirs::new();
    ws.write(
        ".pi/forge/prompt-stacks/strict.json",
        r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "strict",
  "items": [
    {"kind": "block", "id": "intro", "role": "system", "content": "Review.\n{% if parameters.strict %}Be strict."},
    {"kind": "slot", "id": "history", "slot": "chat-history"}
  ]
}
"#,
    );
    let out = ws.run(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        ".pi/forge/prompt-stacks/strict.json (project:strict)\n  \
template error [intro] (items[0].content): Template error in item intro, line 2, column 1: forge-v1 parse error: Missing {% endif %}. The block would be left out of the prompt.\n\
1 file(s) checked, 1 with diagnostics: 1 error(s), 0 warning(s), 0 info.\n"
    );
    let out = ws.run(&["check", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["files"][0]["diagnostics"],
        serde_json::json!([{
            "level": "error",
            "message": "Template error in item intro, line 2, column 1: forge-v1 parse error: Missing {% endif %}. The block would be left out of the prompt.",
            "itemId": "intro",
            "field": "items[0].content",
            "category": "template",
            "line": 2,
            "column": 1
        }])
    );
}

/// Issue 41, point 6: a file that is not JSON gives its error with a structured place in
/// `check --json` (not only inside the message), as every diagnostic with a place does. A
/// leading UTF-8 byte order mark is accepted (and ignored), as the file formats say.
#[test]
fn check_json_gives_the_line_and_column_of_a_json_syntax_error() {
    let ws = Dirs::new();
    ws.write(
        ".pi/forge/prompt-stacks/x.json",
        "{\n  \"schemaVersion\": 2,\n  \"id\": \"x\",\n  \"items\": [,]\n}\n",
    );
    ws.write(
        ".pi/forge/prompt-stacks/bom.json",
        &format!("\u{feff}{}", GOOD_STACK.replace("reviewer", "bom")),
    );
    let out = ws.run(&["check", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = report["files"].as_array().unwrap();
    assert_eq!(files[0]["path"], ".pi/forge/prompt-stacks/bom.json");
    assert_eq!(files[0]["diagnostics"], serde_json::json!([]), "{report}");
    assert_eq!(
        files[1]["diagnostics"],
        serde_json::json!([{
            "level": "error",
            "message": "Failed to parse JSON: expected value at line 4 column 13",
            "line": 4,
            "column": 13
        }])
    );
}

/// Issue 41, point 1: a block too long to render was dropped from the prompt while `check`
/// said 0 errors; now it is an error on the item (exit 1), as in the editor's diagnostics.
#[test]
fn check_reports_a_block_longer_than_a_block_may_render() {
    let ws = Dirs::new();
    let stack = serde_json::json!({
        "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "big",
        "items": [
            {"kind": "block", "id": "intro", "role": "system", "content": "Review."},
            {"kind": "block", "id": "pasted", "role": "system", "content": "x".repeat(1_000_000)},
            {"kind": "slot", "id": "history", "slot": "chat-history"}
        ]
    });
    ws.write(".pi/forge/prompt-stacks/big.json", &stack.to_string());
    let out = ws.run(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        ".pi/forge/prompt-stacks/big.json (project:big)\n  \
template error [pasted] (items[1].content): Block pasted holds 1000000 characters of text, more than the 100000 one block may render: the compiler leaves it out of the prompt, and while this Preset is active Pi refuses its prompts. Shorten it or split it across several blocks.\n\
1 file(s) checked, 1 with diagnostics: 1 error(s), 0 warning(s), 0 info.\n"
    );
}

#[test]
fn check_json_report() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/broken.json", "{not json");
    let out = ws.run(&["check", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["errors"], 1);
    assert_eq!(report["trusted"], true);
    let file = &report["files"][0];
    assert_eq!(file["path"], ".pi/forge/prompt-stacks/broken.json");
    assert_eq!(file["kind"], "stack");
    assert_eq!(file["key"], "project:broken");
    assert_eq!(file["diagnostics"][0]["level"], "error");
    assert!(file["diagnostics"][0]["message"]
        .as_str()
        .unwrap()
        .starts_with("Failed to parse JSON: "));
}

#[test]
fn usage_errors_exit_two() {
    let ws = Dirs::new();
    assert_eq!(ws.run(&["check", "--bogus"]).status.code(), Some(2));
    assert_eq!(ws.run(&["list", "widgets"]).status.code(), Some(2));
    let missing = ws.run(&["check", "--project", "/definitely/not/here"]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        "pi-forge: project directory /definitely/not/here does not exist or is not a directory\n"
    );
}

#[test]
fn untrusted_checks_global_only() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/x.json", "{}");
    ws.write_global("prompt-stacks/reviewer.json", GOOD_STACK);
    let out = ws.run(&["check", "--untrusted"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "Project is untrusted: only global resources were checked.\n\
1 file(s) checked, 0 with diagnostics: 0 error(s), 0 warning(s), 0 info.\n"
    );
}

#[test]
fn list_json_and_text() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/reviewer.json", GOOD_STACK);
    ws.write_global("agent-profiles/worker.json",
        r#"{"schemaVersion":1,"type":"pi-forge.agent-profile","id":"worker","model":{"provider":"test","id":"model"},"thinkingLevel":"high","promptStack":null}"#,
    );
    let out = ws.run(&["list", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let selectors: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["selector"].as_str().unwrap())
        .collect();
    assert_eq!(selectors, vec!["project:reviewer", "global:worker"]);
    let out = ws.run(&["list", "profiles"]);
    let text = stdout(&out);
    assert!(text.starts_with("profile    global:worker  ok  "), "{text}");
    assert!(!text.contains("reviewer"));
}

#[test]
fn fingerprint_of_a_profile_matches_spec_vector() {
    let ws = Dirs::new();
    // Spec C5 #4, written with extra whitespace: formatting does not change the fingerprint.
    let path = ws.write(".pi/forge/agent-profiles/worker.json",
        "{ \"schemaVersion\": 1, \"type\": \"pi-forge.agent-profile\", \"id\": \"worker\",\n \"model\": {\"provider\": \"test\", \"id\": \"model\"}, \"thinkingLevel\": \"high\", \"promptStack\": \"worker\" }",
    );
    let out = ws.run(&["fingerprint", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["kind"], "profile");
    assert_eq!(report["id"], "worker");
    assert_eq!(
        report["fingerprint"],
        "sha256:v1:f209ac6b0ec3e1c7decc3cea8807856931596509dcdbce1a4c7d3eaeb1ccb8df"
    );
    let other = ws.write("data.json", "{\"z\":1,\"a\":{\"d\":2,\"b\":1}}");
    let out = ws.run(&["fingerprint", other.to_str().unwrap()]);
    assert!(stdout(&out).contains(
        "fingerprint: sha256:v1:7abf5da5469eb969a507f9772e693effee5ed11b4ad9dcdccbe160d292dfcd68\n"
    ));
    let bad = ws.write("bad.json", "{");
    let out = ws.run(&["fingerprint", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid JSON"));
}

#[test]
fn help_teaches_with_examples() {
    let ws = Dirs::new();
    let out = ws.run(&["--help"]);
    let text = stdout(&out);
    for needle in [
        "pi-forge check --project ~/code/app --json",
        "PI_FORGE_GLOBAL_DIR",
        "Exit status: 0 success; 1 the input was read but has an error diagnostic",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let _ = Path::new("");
}

#[test]
fn pi_install_writes_the_extension_package_and_upgrades_in_place() {
    let dirs = Dirs::new();
    let agent = dirs.root.path().join("agent");
    let run = |args: &[&str]| {
        dirs.command(args)
            .env("PI_CODING_AGENT_DIR", &agent)
            .output()
            .unwrap()
    };
    let folder = agent.join("extensions/pi-forge");
    let first = run(&["pi", "install"]);
    assert_eq!(first.status.code(), Some(0));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        stdout(&first),
        format!(
            "Installed the pi-forge extension {version} in {}\nPi loads it in every new session. In Pi, type /forge ui to open the editor.\nTo load it for one run only: pi -e {}\n",
            folder.display(),
            folder.join("index.ts").display()
        )
    );
    // The source is the embedded one, byte for byte.
    let index = std::fs::read_to_string(folder.join("index.ts")).unwrap();
    assert_eq!(index, include_str!("../../assets/pi-extension/index.ts"));
    // A Pi package: the manifest names the extension, host packages are `*` peers only.
    let package: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("package.json")).unwrap())
            .unwrap();
    assert_eq!(package["version"], version);
    assert_eq!(
        package["pi"],
        serde_json::json!({"extensions": ["./index.ts"]})
    );
    assert_eq!(package["keywords"], serde_json::json!(["pi-package"]));
    assert_eq!(
        package["peerDependencies"],
        serde_json::json!({"@earendil-works/pi-coding-agent": "*"})
    );
    assert_eq!(package.get("dependencies"), None);
    let install: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("install.json")).unwrap())
            .unwrap();
    assert_eq!(install["version"], version);
    let bin = std::fs::canonicalize(env!("CARGO_BIN_EXE_pi-forge")).unwrap();
    assert_eq!(install["bin"], bin.display().to_string());

    // Again: an upgrade in place; --print-path prints only the path for `pi -e`.
    let again = run(&["pi", "install"]);
    assert!(stdout(&again).starts_with(&format!("Updated the pi-forge extension {version} in ")));
    let path = run(&["pi", "install", "--print-path"]);
    assert_eq!(
        stdout(&path),
        format!("{}\n", folder.join("index.ts").display())
    );
    let mut entries: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["index.ts", "install.json", "package.json"]);
}

#[test]
fn payload_commands_need_a_running_editor_and_a_real_turn_id() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/reviewer.json", GOOD_STACK);
    let out = ws.run(&["payload", "list"]);
    assert_eq!(out.status.code(), Some(2));
    let project = std::fs::canonicalize(ws.project()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "pi-forge: no pi-forge editor is running for {}: start one with `pi-forge ui` (or /forge ui in Pi)\n",
            project.display()
        )
    );
    let out = ws.run(&["payload", "show", "../../etc/passwd"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "pi-forge: `../../etc/passwd` is not a turn id (turn ids look like turn-3; see `pi-forge payload list`)\n"
    );
    let out = ws.run(&["payload", "--help"]);
    assert!(
        stdout(&out).contains("pi-forge payload diff turn-1 turn-4 --json"),
        "{}",
        stdout(&out)
    );
}
