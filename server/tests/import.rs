//! `pi-forge import sillytavern`, run as a real process against temp workspaces.

use std::path::Path;
use std::process::Output;

mod support;

use support::Dirs;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const PRESET: &str = r#"{
  "temperature": 0.7,
  "prompts": [
    {"identifier": "main", "name": "Main Prompt", "role": "system", "content": "You are {{char}}."},
    {"identifier": "charDescription", "name": "Char Description", "marker": true},
    {"identifier": "chatHistory", "name": "Chat History", "marker": true},
    {"identifier": "jailbreak", "name": "Post-History Instructions", "role": "system", "content": "Stay brief."}
  ],
  "prompt_order": [
    {"character_id": 100000, "order": [{"identifier": "main", "enabled": true}]},
    {"character_id": 100001, "order": [
      {"identifier": "main", "enabled": true},
      {"identifier": "charDescription", "enabled": true},
      {"identifier": "chatHistory", "enabled": true},
      {"identifier": "jailbreak", "enabled": true}
    ]}
  ]
}"#;

fn files(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
        Err(_) => Vec::new(),
    }
}

#[test]
fn dry_run_prints_report_and_stack_and_writes_nothing() {
    let ws = Dirs::new();
    let preset = ws.write("Story Mode.json", PRESET);
    let out = ws.run(&[
        "import",
        "sillytavern",
        preset.to_str().unwrap(),
        "--character-id",
        "100001",
        "--dry-run",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Converted (2):"), "{text}");
    assert!(text.contains("Approximated (1):"), "{text}");
    assert!(text.contains("Dropped (1):"), "{text}");
    assert!(text.contains("charDescription"), "{text}");
    assert!(text.contains("\"id\": \"story-mode\""), "{text}");
    assert!(text.contains("\"name\": \"Story Mode\""), "{text}");
    assert!(text.contains("Dry run: nothing written."), "{text}");
    assert!(files(&ws.project().join(".pi/forge/prompt-stacks")).is_empty());
}

#[test]
fn import_writes_the_stack_and_refuses_an_existing_id() {
    let ws = Dirs::new();
    let preset = ws.write("preset.json", PRESET);
    let path = preset.to_str().unwrap();
    let args = [
        "import",
        "sillytavern",
        path,
        "--character-id",
        "100001",
        "--id",
        "story",
    ];
    let out = ws.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Wrote"), "{}", stdout(&out));
    assert_eq!(
        files(&ws.project().join(".pi/forge/prompt-stacks")),
        ["story.json"]
    );
    let written = std::fs::read_to_string(
        ws.project()
            .join(".pi/forge/prompt-stacks")
            .join("story.json"),
    )
    .unwrap();
    let value: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(value["id"], "story");
    assert_eq!(value["schemaVersion"], 2);
    assert_eq!(value["import"]["characterId"], "100001");

    // The workspace check sees a clean stack.
    let check = ws.run(&["check"]);
    assert!(check.status.success(), "{}", stdout(&check));

    // Same id again: refused, file untouched.
    let again = ws.run(&args);
    assert_eq!(again.status.code(), Some(2));
    let err = stderr(&again);
    assert!(err.contains("already exists"), "{err}");
    assert!(err.contains("--id"), "{err}");
    assert_eq!(
        std::fs::read_to_string(
            ws.project()
                .join(".pi/forge/prompt-stacks")
                .join("story.json")
        )
        .unwrap(),
        written
    );
}

#[test]
fn several_character_ids_without_a_choice_exit_2() {
    let ws = Dirs::new();
    let preset = ws.write("preset.json", PRESET);
    let out = ws.run(&["import", "sillytavern", preset.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("Multiple character configs found: [100000, 100001]."),
        "{}",
        stderr(&out)
    );
    assert!(files(&ws.project().join(".pi/forge/prompt-stacks")).is_empty());
}

#[test]
fn bad_or_non_preset_json_exits_2_and_writes_nothing() {
    let ws = Dirs::new();
    let cases = [
        ("broken.json", "{\"prompts\": [", "is not valid JSON"),
        ("array.json", "[1, 2]", "Preset root must be a JSON object."),
        (
            "stack.json",
            r#"{"type": "pi-forge.prompt-stack", "id": "x", "items": []}"#,
            "Preset has no prompts array.",
        ),
    ];
    for (name, text, message) in cases {
        let file = ws.write(name, text);
        let out = ws.run(&["import", "sillytavern", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(stderr(&out).contains(message), "{name}: {}", stderr(&out));
    }
    let missing = ws.run(&["import", "sillytavern", "nope.json"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(files(&ws.project().join(".pi/forge/prompt-stacks")).is_empty());
}
