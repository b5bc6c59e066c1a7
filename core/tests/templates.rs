//! Every built-in New-Preset template is a clean Preset that compiles to what its name promises
//! (issue 17: the "Pi mirror layout" slots had no role and were ignored).

use forge_core::compile::{compile, CompileInput};
use forge_core::runtime::{Clock, RuntimeSnapshot};
use forge_core::stack::templates::{template, TEMPLATES};
use forge_core::stack::{parse_stack_value, ParseOptions};
use forge_core::template::MacroRegistry;
use serde_json::json;

fn runtime() -> RuntimeSnapshot {
    let mut runtime = RuntimeSnapshot::default_snapshot(
        "/home/user/project",
        Clock {
            epoch_ms: 1_767_225_600_000,
            utc_offset_minutes: 0,
        },
    );
    runtime.base_system_prompt = "PI BASE PROMPT".into();
    runtime.messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1}),
    ];
    runtime
}

fn compiled(kind: &str) -> (Vec<String>, forge_core::compile::Compiled) {
    let parsed = parse_stack_value(
        template(kind, "new-stack", "New"),
        &ParseOptions::new("new-stack.json"),
    );
    let diagnostics = parsed
        .diagnostics
        .iter()
        .map(|d| d.message.clone())
        .collect();
    let runtime = runtime();
    let macros = MacroRegistry::default();
    let out = compile(&CompileInput::new(Some(&parsed.stack), &runtime, &macros));
    (diagnostics, out)
}

#[test]
fn the_dialog_offers_three_templates() {
    let keys: Vec<&str> = TEMPLATES.iter().map(|(k, _, _)| *k).collect();
    assert_eq!(keys, ["pi-mirror", "minimal-worker", "empty"]);
}

#[test]
fn pi_mirror_lays_out_pis_prompt_as_items() {
    let (diagnostics, out) = compiled("pi-mirror");
    assert_eq!(diagnostics, Vec::<String>::new());
    assert_eq!(out.diagnostics, Vec::new());
    let prompt = &out.system_prompt;
    assert!(
        prompt.starts_with("You are a coding agent working in the user's project."),
        "{prompt}"
    );
    // Every slot renders: the tool list, its guidelines, the date and working directory.
    for needle in [
        "<tool name=\"read\">",
        "<tool name=\"write\">",
        "/home/user/project",
    ] {
        assert!(prompt.contains(needle), "{needle:?} missing from\n{prompt}");
    }
    assert!(!prompt.contains("PI BASE PROMPT"));
    assert_eq!(out.messages.len(), 1, "the chat history follows");
    assert_eq!(out.selected_tools, ["read", "bash", "edit", "write"]);
}

#[test]
fn minimal_worker_is_read_only() {
    let (diagnostics, out) = compiled("minimal-worker");
    assert_eq!(diagnostics, Vec::<String>::new());
    assert_eq!(out.diagnostics, Vec::new());
    assert_eq!(
        out.system_prompt,
        "You do one focused task and report the result briefly. You do not modify files."
    );
    assert_eq!(out.selected_tools, ["read", "grep", "find", "ls"]);
    assert_eq!(out.messages.len(), 1);
}

#[test]
fn empty_has_no_items_and_says_what_that_means() {
    let (diagnostics, out) = compiled("empty");
    assert_eq!(
        diagnostics,
        ["No enabled chat-history slot found; Pi chat context will be appended at the end."]
    );
    assert_eq!(out.system_prompt, "PI BASE PROMPT");
    assert_eq!(out.messages.len(), 1);
}
