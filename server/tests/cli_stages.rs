//! The command line for every compile stage (issue 15), run as a real process: `preview
//! --prompt/--finalize/--json`, `template check|render`, `fingerprint --value` and
//! `import sillytavern --dry-run --json`, with their exit statuses (0 ok, 1 an error diagnostic,
//! 2 usage or unreadable input).

use std::io::Write as _;
use std::process::{Output, Stdio};

use serde_json::{json, Value};

mod support;

use support::Dirs;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

/// Runs `pi-forge <args>` with `input` on standard input.
fn run_stdin(ws: &Dirs, args: &[&str], input: &str) -> Output {
    let mut child = ws
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A Preset whose system block and custom block quote the latest user message, with a tool
/// policy, a parameter and a finalize rule.
const STACK: &str = r#"{
  "schemaVersion": 2, "id": "rev",
  "tools": {"deny": ["bash"]},
  "parameters": {"tone": "calm"},
  "regex": {"schemaVersion": 1, "rules": [
    {"id": "done", "stage": "compiled", "effect": "finalize", "targets": ["messages"],
     "pattern": "TODO", "flags": "g", "replace": "DONE"}
  ]},
  "items": [
    {"kind": "block", "id": "s", "role": "system", "content": "Asked: {{ runtime.lastUserMessage }} ({{ parameters.tone }})"},
    {"kind": "block", "id": "c", "role": "custom", "content": "note {{ runtime.lastUserMessage }}"},
    {"kind": "slot", "id": "h", "slot": "chat-history"}
  ]
}"#;

fn workspace() -> Dirs {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/rev.json", STACK);
    ws
}

// ------------------------------------------------------------------------------------------------
// preview

#[test]
fn preview_prompt_reaches_the_system_phase_and_json_shows_env_and_tools() {
    let ws = workspace();
    let out = ws.run(&["preview", "rev", "--prompt", "fix it", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["prompt"], "fix it");
    // The stand-in runtime's active tools (read, bash, edit, write) minus the denied bash.
    assert_eq!(report["activeTools"], json!(["read", "edit", "write"]));
    assert_eq!(report["templateEnv"]["parameters"], json!({"tone": "calm"}));
    let env = &report["templateEnv"]["runtime"];
    assert_eq!(env["lastUserMessage"], "fix it");
    assert_eq!(env["selectedTools"], json!(["read", "edit", "write"]));
    assert_eq!(env["selectedToolsText"], "read, edit, write");
    assert_eq!(
        env["tool"],
        json!({"read": true, "edit": true, "write": true})
    );
    assert_eq!(report["compiled"]["systemPrompt"], "Asked: fix it (calm)");
    // No user text in the conversation: the message phase falls back to the prompt. The custom
    // message carries its text as one text part, as the original writes it.
    let custom = &report["compiled"]["messages"][0]["message"];
    assert_eq!(custom["role"], "custom");
    assert_eq!(
        custom["content"],
        json!([{"type": "text", "text": "note fix it"}])
    );

    // With user text in the conversation, only the system phase sees the prompt.
    let chat = ws.write(
        "chat.json",
        r#"[{"role": "user", "content": "earlier question", "timestamp": 1}]"#,
    );
    let out = ws.run(&[
        "preview",
        "rev",
        "--prompt",
        "fix it",
        "--messages",
        chat.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["compiled"]["systemPrompt"], "Asked: fix it (calm)");
    assert_eq!(
        report["compiled"]["messages"][0]["message"]["content"],
        json!([{"type": "text", "text": "note earlier question"}])
    );
    assert_eq!(
        report["templateEnv"]["runtime"]["lastUserMessage"],
        "fix it"
    );

    // Without --prompt the conversation feeds both phases, and `prompt` is null.
    let out = ws.run(&[
        "preview",
        "rev",
        "--messages",
        chat.to_str().unwrap(),
        "--json",
    ]);
    let report = json_of(&out);
    assert_eq!(report["prompt"], Value::Null);
    assert_eq!(
        report["compiled"]["systemPrompt"],
        "Asked: earlier question (calm)"
    );
}

#[test]
fn preview_exits_one_when_the_stack_reports_an_error() {
    let ws = Dirs::new();
    let broken = ws.write(
        "broken.json",
        r#"{"id": "broken", "items": [{"kind": "block", "id": "b", "role": "system", "content": "{{ x | shout }}"}]}"#,
    );
    let out = ws.run(&["preview", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("ERROR [b]: Unknown forge-v1 filter: shout"),
        "{}",
        stdout(&out)
    );
    // An unknown stack or an unreadable runtime is a usage/input failure.
    assert_eq!(ws.run(&["preview", "nope"]).status.code(), Some(2));
    let out = ws.run(&["preview", "rev", "--runtime", "/definitely/missing.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn preview_finalize_runs_the_finalize_rules_on_an_assistant_message() {
    let ws = workspace();
    let reply = ws.write(
        "reply.json",
        r#"{"role": "assistant", "content": [{"type": "text", "text": "a TODO and TODO"}], "stopReason": "stop"}"#,
    );
    let out = ws.run(&[
        "preview",
        "rev",
        "--finalize",
        reply.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["stack"], "project:rev");
    assert_eq!(report["finalizeRules"], 1);
    assert_eq!(report["changed"], true);
    assert_eq!(
        report["message"],
        json!({"role": "assistant", "content": [{"type": "text", "text": "a DONE and DONE"}], "stopReason": "stop"})
    );
    let messages: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages.last().copied(),
        Some("Finalize regex replaced finalized assistant message content; original model output is not preserved in the stored transcript.")
    );

    // A JSON string on standard input is the text of an assistant message; text output.
    let out = run_stdin(&ws, &["preview", "rev", "--finalize", "-"], "\"one TODO\"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Finalize with project:rev: 1 finalize rule(s); the message changed.\n"),
        "{text}"
    );
    assert!(text.ends_with("\none DONE\n"), "{text}");

    // Nothing to change, or not an assistant message: unchanged, exit 0.
    let out = run_stdin(
        &ws,
        &["preview", "rev", "--finalize", "-", "--json"],
        r#"{"role": "user", "content": "TODO"}"#,
    );
    let report = json_of(&out);
    assert_eq!(report["changed"], false);
    assert_eq!(
        report["message"],
        json!({"role": "user", "content": "TODO"})
    );

    // Not JSON, or a number: exit 2; --finalize with --prompt: usage error, exit 2.
    assert_eq!(
        run_stdin(&ws, &["preview", "rev", "--finalize", "-"], "{")
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run_stdin(&ws, &["preview", "rev", "--finalize", "-"], "5")
            .status
            .code(),
        Some(2)
    );
    let out = ws.run(&[
        "preview",
        "rev",
        "--finalize",
        reply.to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

// ------------------------------------------------------------------------------------------------
// template

#[test]
fn template_check_reports_errors_and_dependencies_with_utf16_spans() {
    let ws = Dirs::new();
    // "😀" counts 2 UTF-16 units; the filter error spans the whole tag.
    let file = ws.write("block.txt", "😀 {{ parameters.name | shout }}\nok");
    let out = ws.run(&["template", "check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "error: line 1, column 4 [3..32]: Unknown forge-v1 filter: shout\n\
uses parameters.name: line 1, column 4 [3..32]\n\
1 error(s), 1 dependency.\n"
    );

    let out = run_stdin(
        &ws,
        &["template", "check", "-", "--json"],
        "é\n{% if runtime.tool.read %}{{ parameters.name | upper }}{% else %}-{% endif %}",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        json_of(&out),
        json!({
            "ok": true,
            "errors": [],
            "dependencies": [
                {"path": "runtime.tool.read", "spans": [{"start": 2, "end": 28}]},
                {"path": "parameters.name", "spans": [{"start": 28, "end": 57}]}
            ]
        })
    );

    // A parse error: the unclosed opener to the end of the text.
    let out = run_stdin(&ws, &["template", "check", "-", "--json"], "ab {{ name");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_of(&out),
        json!({
            "ok": false,
            "errors": [{"message": "forge-v1 parse error: Unclosed output tag {{",
                        "span": {"start": 3, "end": 10}}],
            "dependencies": []
        })
    );

    // With --env the template is rendered too: an undefined path is an error.
    let env = ws.write("env.json", r#"{"parameters": {"name": "ada"}}"#);
    let out = run_stdin(
        &ws,
        &["template", "check", "-", "--env", env.to_str().unwrap()],
        "{{ parameters.name }} {{ parameters.missing }}",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "error: line 1, column 23 [22..46]: forge-v1 render error: Undefined forge-v1 path: {{parameters.missing}}\n\
uses parameters.name: line 1, column 1 [0..21]\n\
uses parameters.missing: line 1, column 23 [22..46]\n\
1 error(s), 2 dependencies.\n"
    );
}

#[test]
fn template_render_prints_the_output_and_errors_on_stderr() {
    let ws = Dirs::new();
    let env = ws.write(
        "env.json",
        r#"{"runtime": {"tool": {"read": true}}, "parameters": {"name": "ada"}}"#,
    );
    let env = env.to_str().unwrap();
    let template = "Hi {{ parameters.name | upper }}{% if runtime.tool.read %}, read{% endif %}.";
    let out = run_stdin(&ws, &["template", "render", "-", "--env", env], template);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hi ADA, read.");

    let out = run_stdin(
        &ws,
        &["template", "render", "-", "--env", env, "--json"],
        template,
    );
    assert_eq!(
        json_of(&out),
        json!({"ok": true, "output": "Hi ADA, read.", "errors": []})
    );

    // Without --env both objects are empty: a parameter is undefined.
    let out = run_stdin(&ws, &["template", "render", "-"], "x {{ parameters.name }}");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "error: line 1, column 3 [2..23]: forge-v1 render error: Undefined forge-v1 path: {{parameters.name}}\n"
    );

    // Usage and input errors exit 2.
    assert_eq!(ws.run(&["template", "render"]).status.code(), Some(2));
    assert_eq!(
        ws.run(&["template", "render", "/definitely/missing.txt"])
            .status
            .code(),
        Some(2)
    );
    let bad_env = ws.write("bad-env.json", r#"{"parameters": [1]}"#);
    let out = run_stdin(
        &ws,
        &[
            "template",
            "render",
            "-",
            "--env",
            bad_env.to_str().unwrap(),
        ],
        "x",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`parameters` must be an object, not array"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn preview_template_env_renders_with_template_render() {
    // The documented pipeline: preview --json's templateEnv is a valid --env.
    let ws = workspace();
    let out = ws.run(&["preview", "rev", "--prompt", "fix it", "--json"]);
    let env = serde_json::to_string(&json_of(&out)["templateEnv"]).unwrap();
    let env = ws.write("env.json", &env);
    let out = run_stdin(
        &ws,
        &["template", "render", "-", "--env", env.to_str().unwrap()],
        "{{ runtime.lastUserMessage }} / {{ parameters.tone }} / {{ runtime.selectedToolsText }}",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "fix it / calm / read, edit, write");
}

// ------------------------------------------------------------------------------------------------
// fingerprint --value

#[test]
fn fingerprint_value_prints_canonical_json_and_refuses_non_finite_numbers() {
    let ws = Dirs::new();
    // sha256 of the canonical text below, computed independently.
    let expected = "sha256:v1:5d35a1fea848a3a28cc43465c3b1a8cf30aa826b2d5623bf2e392b5680e606a0";
    let out = run_stdin(
        &ws,
        &["fingerprint", "--value", "-"],
        r#"{"b": 1, "a": [1.0, -0, 1e21]}"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("canonical:   {{\"a\":[1,0,1e+21],\"b\":1}}\nfingerprint: {expected}\n")
    );

    // No kind detection: a stack-typed file is hashed as written, not normalized.
    let file = ws.write(
        "stack.json",
        r#"{"type": "pi-forge.prompt-stack", "id": "x", "items": [], "junk": true}"#,
    );
    let out = ws.run(&["fingerprint", "--value", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let report = json_of(&out);
    assert_eq!(
        report["canonical"],
        r#"{"id":"x","items":[],"junk":true,"type":"pi-forge.prompt-stack"}"#
    );
    assert_eq!(report["ok"], true);

    // A number beyond a double cannot be canonicalized: exit 1, with where it is.
    let out = run_stdin(
        &ws,
        &["fingerprint", "--value", "-"],
        r#"{"a": {"b": 1e400}}"#,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "pi-forge: <stdin>: Cannot canonicalize a non-finite number (1e400) at /a/b.\n"
    );
    // Invalid JSON: exit 2.
    assert_eq!(
        run_stdin(&ws, &["fingerprint", "--value", "-"], "{")
            .status
            .code(),
        Some(2)
    );
}

// ------------------------------------------------------------------------------------------------
// import sillytavern --dry-run --json

#[test]
fn import_dry_run_json_is_the_migration_report() {
    let ws = Dirs::new();
    let preset = ws.write(
        "story-teller (v3)!.json",
        r#"{"prompts": [
            {"identifier": "main", "name": "Main", "role": "system", "content": "Be {{char}}."},
            {"identifier": "chatHistory", "marker": true},
            {"identifier": "scenario", "marker": true}
        ],
        "extensions": {"regex_scripts": [
            {"script_name": "Trim Junk", "findRegex": "/junk/g", "replaceString": "{{match}}!",
             "promptOnly": true, "placement": [true]},
            {"scriptName": "Half", "findRegex": "/abc", "promptOnly": true}
        ]}}"#,
    );
    let out = ws.run(&[
        "import",
        "sillytavern",
        preset.to_str().unwrap(),
        "--dry-run",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = json_of(&out);
    assert_eq!(result["id"], "story-teller-v3");
    assert_eq!(result["dryRun"], true);
    assert_eq!(result["written"], Value::Null);
    assert_eq!(result["stack"]["id"], "story-teller-v3");
    assert_eq!(result["stack"]["name"], "story-teller (v3)!");
    assert_eq!(
        result["report"],
        json!({
            "characterId": null,
            "converted": [
                {"identifier": "main", "name": "Main", "reason": "system block"},
                {"identifier": "chatHistory", "reason": "chat history marker → chat-history slot"},
                {"identifier": "regex:Trim Junk", "reason": "history-stage regex rule"}
            ],
            "approximated": [],
            "dropped": [
                {"identifier": "scenario", "reason": "marker: character card fields have no pi-forge equivalent"},
                {"identifier": "regex:Half", "reason": "find pattern starts a /…/ literal that is never closed"}
            ],
            "ignoredFields": 0
        })
    );
    let rule = &result["stack"]["regex"]["rules"][0];
    assert_eq!(rule["id"], "st-trim-junk");
    assert_eq!(rule["replace"], "$&!");
    assert_eq!(rule["roles"], json!(["user"]));
    assert!(!ws.project().join(".pi/forge/prompt-stacks").exists());

    // An empty prompts array is not a preset: exit 2, nothing written.
    let empty = ws.write("empty.json", r#"{"prompts": []}"#);
    let out = ws.run(&[
        "import",
        "sillytavern",
        empty.to_str().unwrap(),
        "--dry-run",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).ends_with("Preset has no prompts array.\n"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn import_json_without_dry_run_names_the_written_file() {
    let ws = Dirs::new();
    let preset = ws.write(
        "Space Opera.json",
        r#"{"prompts": [{"identifier": "main", "content": "Hi."}]}"#,
    );
    let out = ws.run(&["import", "sillytavern", preset.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = json_of(&out);
    assert_eq!(result["id"], "space-opera");
    assert_eq!(result["stack"]["name"], "Space Opera");
    let written = ws
        .project()
        .join(".pi/forge/prompt-stacks/space-opera.json");
    assert_eq!(result["written"], written.display().to_string());
    assert!(written.is_file());
}

// ------------------------------------------------------------------------------------------------
// help

#[test]
fn every_stage_command_documents_examples_and_exit_status() {
    let ws = Dirs::new();
    for (args, needles) in [
        (
            &["preview", "--help"][..],
            &[
                "--prompt <TEXT>",
                "--finalize <FILE>",
                "templateEnv",
                "activeTools",
            ][..],
        ),
        (
            &["template", "check", "--help"],
            &["UTF-16", "pi-forge template check block.txt"],
        ),
        (
            &["template", "render", "--help"],
            &[
                "--env <FILE>",
                "pi-forge template render block.txt --env env.json",
            ],
        ),
        (
            &["fingerprint", "--help"],
            &["--value", "pi-forge fingerprint --value params.json --json"],
        ),
        (
            &["import", "sillytavern", "--help"],
            &["--json", "--dry-run --json", "space-opera"],
        ),
    ] {
        let out = ws.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = stdout(&out);
        for needle in ["Examples:", "Exit status: 0 "].iter().chain(needles) {
            assert!(
                text.contains(needle),
                "{args:?}: missing {needle:?} in\n{text}"
            );
        }
    }
}
