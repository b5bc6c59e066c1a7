//! Run-time regex rules: spec §4 "Regex execution", vectors 33 (regex line) and 51–58, §8 items
//! 10, 11, 14 and 17, plus replacement corner cases and a no-panic property.

use forge_core::diag::Diagnostic;
use forge_core::rewrite::{
    apply_compiled_messages, apply_compiled_system, apply_history, apply_to_text, finalize,
    finalize_rule_count, finalize_rule_count_in_config, rules_from_config, Effect, Rule, Stage,
    Target, TextEdit,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn config(rules: Value) -> Map<String, Value> {
    json!({ "schemaVersion": 1, "rules": rules })
        .as_object()
        .cloned()
        .unwrap()
}

fn load(rules: Value) -> Vec<Rule> {
    let (rules, diagnostics) = rules_from_config(Some(&config(rules)));
    assert_eq!(diagnostics, vec![]);
    rules
}

/// One compiled-stage rule built from `fields` (id `r`, stage `compiled` unless given).
fn rule(fields: Value) -> Rule {
    let mut object = json!({ "id": "r", "stage": "compiled" });
    for (k, v) in fields.as_object().unwrap() {
        object[k] = v.clone();
    }
    let mut rules = load(json!([object]));
    assert_eq!(rules.len(), 1, "rule was skipped");
    rules.remove(0)
}

fn edit(fields: Value, text: &str) -> TextEdit {
    apply_to_text(&rule(fields), text)
}

fn replaced(fields: Value, text: &str) -> String {
    edit(fields, text).text
}

fn info(message: &str) -> Diagnostic {
    Diagnostic::info(message)
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text })
}

fn assistant(text: &str) -> Value {
    json!({ "role": "assistant", "content": [{ "type": "text", "text": text }] })
}

fn text_of(message: &Value) -> String {
    forge_core::message::content_text(&message["content"], forge_core::message::OtherParts::Labels)
}

// ---- Vector 33 (regex line) ----

#[test]
fn v33_system_rule_rewrites_base_text_in_append_mode() {
    let rules = load(
        json!([{ "id": "r", "stage": "compiled", "pattern": "base", "replace": "BASE", "targets": ["system"] }]),
    );
    let (text, diagnostics) = apply_compiled_system(&rules, "base\n\nX".to_string());
    assert_eq!(text, "BASE\n\nX");
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule r matched 1 time(s) and changed 1 text segment(s) in compiled/system."
        )]
    );
    // Empty stack: the base alone is the prompt, and the rule still rewrites it.
    let (text, _) = apply_compiled_system(&rules, "base".to_string());
    assert_eq!(text, "BASE");
}

#[test]
fn system_target_ignores_roles_depth_and_max_messages() {
    let rules = load(json!([{
        "id": "s", "stage": "compiled", "pattern": "a", "flags": "g", "replace": "b",
        "roles": ["user"], "minDepth": 5, "maxMessages": 1, "maxChars": 3
    }]));
    let (text, diagnostics) = apply_compiled_system(&rules, "aaaaa".to_string());
    assert_eq!(text, "aabbb");
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule s matched 3 time(s) and changed 1 text segment(s) in compiled/system."
        )]
    );
}

// ---- Vectors 51 and 52 ----

#[test]
fn v51_history_rule_strips_ooc_from_assistant_history_only() {
    let rules = load(json!([{
        "id": "ooc", "stage": "history", "pattern": "\\s*\\(OOC:[^)]+\\)", "flags": "g",
        "replace": "", "roles": ["assistant"]
    }]));
    let history = vec![
        user("(OOC: user stays) hello"),
        assistant("reply (OOC: hidden)"),
    ];
    let (out, diagnostics) = apply_history(&rules, history.clone());
    assert_eq!(out[0], history[0]);
    assert_eq!(out[1], assistant("reply"));
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule ooc matched 1 time(s) and changed 1 text segment(s) in history/messages."
        )]
    );
    // Synthetic messages only meet compiled rules: a history rule leaves the compiled list alone.
    let synthetic = vec![user("before (OOC: stays)"), user("after")];
    let (out, diagnostics) = apply_compiled_messages(&rules, synthetic.clone());
    assert_eq!(out, synthetic);
    assert!(diagnostics.is_empty());
    let texts: Vec<String> = [
        synthetic[0].clone(),
        history[0].clone(),
        assistant("reply"),
        synthetic[1].clone(),
    ]
    .iter()
    .map(text_of)
    .collect();
    assert_eq!(
        texts.join(" | "),
        "before (OOC: stays) | (OOC: user stays) hello | reply | after"
    );
}

#[test]
fn v52_compiled_rule_sees_rendered_text() {
    let rules = load(
        json!([{ "id": "hi", "stage": "compiled", "pattern": "Hello Ada", "replace": "Hi Ada" }]),
    );
    let (out, diagnostics) = apply_compiled_messages(&rules, vec![user("Hello Ada")]);
    assert_eq!(out, vec![user("Hi Ada")]);
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule hi matched 1 time(s) and changed 1 text segment(s) in compiled/messages."
        )]
    );
}

#[test]
fn v52_tool_call_named_secret_stays_intact() {
    let rules = load(
        json!([{ "id": "redact", "stage": "compiled", "pattern": "secret", "flags": "g", "replace": "redacted" }]),
    );
    let message = json!({
        "role": "assistant",
        "content": [
            { "type": "text", "text": "the secret is out" },
            { "type": "toolCall", "id": "c1", "name": "secret", "arguments": { "q": "secret" } },
            { "type": "thinking", "thinking": "secret thoughts" },
            { "type": "text", "text": 7 },
            "secret"
        ],
        "provider": "p",
        "usage": { "input": 1 }
    });
    let (out, diagnostics) = apply_compiled_messages(&rules, vec![message]);
    assert_eq!(
        out[0],
        json!({
            "role": "assistant",
            "content": [
                { "type": "text", "text": "the redacted is out" },
                { "type": "toolCall", "id": "c1", "name": "secret", "arguments": { "q": "secret" } },
                { "type": "thinking", "thinking": "secret thoughts" },
                { "type": "text", "text": 7 },
                "secret"
            ],
            "provider": "p",
            "usage": { "input": 1 }
        })
    );
    assert_eq!(
        serde_json::to_string(&out[0]).unwrap(),
        r#"{"role":"assistant","content":[{"type":"text","text":"the redacted is out"},{"type":"toolCall","id":"c1","name":"secret","arguments":{"q":"secret"}},{"type":"thinking","thinking":"secret thoughts"},{"type":"text","text":7},"secret"],"provider":"p","usage":{"input":1}}"#
    );
    assert_eq!(
        diagnostics,
        vec![info("Regex rule redact matched 1 time(s) and changed 1 text segment(s) in compiled/messages.")]
    );
}

// ---- Vectors 53–56 ----

#[test]
fn v53_capture_group_replacement() {
    let e = edit(
        json!({ "pattern": "Name: (\\w+)", "flags": "g", "replace": "Name=$1" }),
        "Name: Ada",
    );
    assert_eq!(
        e,
        TextEdit {
            text: "Name=Ada".into(),
            matches: 1,
            changed: true
        }
    );
}

#[test]
fn v53_trim_strings_remove_brackets_from_match_and_groups() {
    let fields = json!({
        "pattern": "\\[([^\\]]+)\\]", "flags": "g", "replace": "**$&**/$1", "trimStrings": ["[", "]"]
    });
    assert_eq!(replaced(fields, "Status: [OK]"), "Status: **OK**/OK");
}

#[test]
fn v54_dollar_zero_is_the_full_match() {
    assert_eq!(
        replaced(json!({ "pattern": "X", "replace": "[$0]" }), "aXb"),
        "a[X]b"
    );
    assert_eq!(
        replaced(json!({ "pattern": "X", "replace": "[$$0]" }), "aXb"),
        "a[$0]b"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "X", "replace": "[$0]", "trimStrings": ["zzz"] }),
            "aXb"
        ),
        "a[X]b"
    );
    // `$0` followed by a digit is not rewritten: `$01` is group 1 natively.
    assert_eq!(
        replaced(json!({ "pattern": "(X)", "replace": "[$01]" }), "aXb"),
        "a[X]b"
    );
    assert_eq!(
        replaced(json!({ "pattern": "X", "replace": "[$01]" }), "aXb"),
        "a[$01]b"
    );
}

#[test]
fn v55_native_and_trim_paths_differ_on_missing_groups() {
    let template = "[$<w>|$`|$'|$$|$2|$10]";
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<w>a)", "flags": "g", "replace": template }),
            "xay"
        ),
        "x[a|x|y|$|$2|a0]y"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<w>a)", "flags": "g", "replace": template, "trimStrings": ["q"] }),
            "xay"
        ),
        "x[a|x|y|$||]y"
    );
}

#[test]
fn v56_global_empty_matches_advance_one_position() {
    assert_eq!(
        edit(
            json!({ "pattern": "x*", "flags": "g", "replace": "-" }),
            "abc"
        ),
        TextEdit {
            text: "-a-b-c-".into(),
            matches: 4,
            changed: true
        }
    );
    assert_eq!(
        edit(
            json!({ "pattern": "a*", "flags": "g", "replace": "-" }),
            "baac"
        ),
        TextEdit {
            text: "-b--c-".into(),
            matches: 4,
            changed: true
        }
    );
    assert_eq!(
        edit(json!({ "pattern": "x*", "flags": "g", "replace": "-" }), ""),
        TextEdit {
            text: "-".into(),
            matches: 1,
            changed: true
        }
    );
}

#[test]
fn v56_identity_replacement_counts_a_match_but_no_change() {
    assert_eq!(
        edit(json!({ "pattern": "a", "replace": "a" }), "aa"),
        TextEdit {
            text: "aa".into(),
            matches: 1,
            changed: false
        }
    );
    let rules =
        load(json!([{ "id": "same", "stage": "compiled", "pattern": "a", "replace": "a" }]));
    let input = vec![user("aa")];
    let (out, diagnostics) = apply_compiled_messages(&rules, input.clone());
    assert_eq!(out, input);
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule same matched 1 time(s) and changed 0 text segment(s) in compiled/messages."
        )]
    );
}

#[test]
fn non_global_rule_replaces_only_the_first_match() {
    assert_eq!(
        edit(json!({ "pattern": "o", "replace": "0" }), "foo boo"),
        TextEdit {
            text: "f0o boo".into(),
            matches: 1,
            changed: true
        }
    );
    assert_eq!(
        edit(
            json!({ "pattern": "o", "flags": "g", "replace": "0" }),
            "foo boo"
        ),
        TextEdit {
            text: "f00 b00".into(),
            matches: 4,
            changed: true
        }
    );
    assert_eq!(
        edit(
            json!({ "pattern": "z", "flags": "g", "replace": "0" }),
            "foo"
        ),
        TextEdit {
            text: "foo".into(),
            matches: 0,
            changed: false
        }
    );
}

// ---- Vector 57: eligibility ----

#[test]
fn v57_roles_max_messages_and_max_chars() {
    let rules = load(json!([{
        "id": "redact", "stage": "compiled", "pattern": "secret", "flags": "g", "replace": "redacted",
        "roles": ["user"], "maxMessages": 1, "maxChars": 6
    }]));
    let input = vec![
        user("secret old"),
        assistant("secret assistant"),
        user("prefix secret"),
    ];
    let (out, diagnostics) = apply_compiled_messages(&rules, input.clone());
    assert_eq!(
        out,
        vec![input[0].clone(), input[1].clone(), user("prefix redacted")]
    );
    assert_eq!(
        diagnostics,
        vec![info("Regex rule redact matched 1 time(s) and changed 1 text segment(s) in compiled/messages.")]
    );
}

#[test]
fn v57_depth_window() {
    let rules = load(json!([{
        "id": "d", "stage": "compiled", "pattern": "secret", "replace": "redacted",
        "minDepth": 1, "maxDepth": 2
    }]));
    let input = vec![
        user("old secret"),
        assistant("no match here"),
        user("latest secret"),
    ];
    let (out, diagnostics) = apply_compiled_messages(&rules, input.clone());
    assert_eq!(
        out,
        vec![user("old redacted"), input[1].clone(), input[2].clone()]
    );
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule d matched 1 time(s) and changed 1 text segment(s) in compiled/messages."
        )]
    );
}

#[test]
fn v57_history_rule_ignores_targets() {
    let rules = load(json!([{
        "id": "h", "stage": "history", "pattern": "secret", "replace": "redacted", "targets": ["system"]
    }]));
    let (out, diagnostics) = apply_history(&rules, vec![user("a secret")]);
    assert_eq!(out, vec![user("a redacted")]);
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule h matched 1 time(s) and changed 1 text segment(s) in history/messages."
        )]
    );
    // ... but it is never a system rule.
    let (text, diagnostics) = apply_compiled_system(&rules, "secret".to_string());
    assert_eq!(text, "secret");
    assert!(diagnostics.is_empty());
}

#[test]
fn max_depth_below_min_depth_selects_nothing() {
    let rules = load(
        json!([{ "id": "d", "stage": "history", "pattern": "a", "minDepth": 2, "maxDepth": 1 }]),
    );
    let input = vec![user("a"), user("a"), user("a"), user("a")];
    let (out, diagnostics) = apply_history(&rules, input.clone());
    assert_eq!(out, input);
    assert!(diagnostics.is_empty());
}

#[test]
fn roles_compare_against_string_coercion_of_role() {
    let rules = load(json!([{
        "id": "r", "stage": "compiled", "pattern": "x", "replace": "y", "roles": ["undefined", "5", "a,b"]
    }]));
    let input = vec![
        json!({ "content": "x" }),
        json!({ "role": 5, "content": "x" }),
        json!({ "role": ["a", "b"], "content": "x" }),
        json!({ "role": "user", "content": "x" }),
        json!({ "role": null, "content": "x" }),
    ];
    let (out, diagnostics) = apply_compiled_messages(&rules, input.clone());
    assert_eq!(out[0], json!({ "content": "y" }));
    assert_eq!(out[1], json!({ "role": 5, "content": "y" }));
    assert_eq!(out[2], json!({ "role": ["a", "b"], "content": "y" }));
    assert_eq!(out[3], input[3]);
    assert_eq!(out[4], input[4]);
    assert_eq!(
        diagnostics,
        vec![info(
            "Regex rule r matched 3 time(s) and changed 3 text segment(s) in compiled/messages."
        )]
    );
}

#[test]
fn max_messages_keeps_the_newest_eligible() {
    let rules = load(json!([{
        "id": "m", "stage": "history", "pattern": "a", "replace": "b", "roles": ["user"], "maxMessages": 2
    }]));
    let input = vec![
        user("a1"),
        user("a2"),
        assistant("a3"),
        user("a4"),
        assistant("a5"),
    ];
    let (out, _) = apply_history(&rules, input.clone());
    let texts: Vec<String> = out.iter().map(text_of).collect();
    assert_eq!(texts, vec!["a1", "b2", "a3", "b4", "a5"]);
}

#[test]
fn segments_count_each_text_part_and_rules_chain_in_order() {
    let rules = load(json!([
        { "id": "one", "stage": "compiled", "pattern": "a", "flags": "g", "replace": "b" },
        { "id": "two", "stage": "compiled", "pattern": "b", "flags": "g", "replace": "c" }
    ]));
    let message = json!({
        "role": "user",
        "content": [{ "type": "text", "text": "aa" }, { "type": "image", "data": "a" }, { "type": "text", "text": "xa" }]
    });
    let (out, diagnostics) = apply_compiled_messages(&rules, vec![message, user("b")]);
    assert_eq!(
        out[0],
        json!({
            "role": "user",
            "content": [{ "type": "text", "text": "cc" }, { "type": "image", "data": "a" }, { "type": "text", "text": "xc" }]
        })
    );
    assert_eq!(out[1], user("c"));
    assert_eq!(
        diagnostics,
        vec![
            info("Regex rule one matched 3 time(s) and changed 2 text segment(s) in compiled/messages."),
            info("Regex rule two matched 4 time(s) and changed 3 text segment(s) in compiled/messages."),
        ]
    );
}

#[test]
fn unchanged_messages_and_unknown_fields_survive() {
    let rules =
        load(json!([{ "id": "r", "stage": "compiled", "pattern": "hello", "replace": "bye" }]));
    let input = vec![
        json!({ "role": "custom", "customType": "x", "content": "hello", "details": { "k": [1, 2] }, "display": false }),
        json!({ "role": "toolResult", "toolCallId": "c", "content": [{ "type": "text", "text": "nothing" }], "isError": false }),
        json!({ "role": "bashExecution", "command": "hello", "output": "hello" }),
        json!({ "role": "user", "content": { "text": "hello" } }),
        json!("hello"),
    ];
    let (out, _) = apply_compiled_messages(&rules, input.clone());
    assert_eq!(
        serde_json::to_string(&out[0]).unwrap(),
        r#"{"role":"custom","customType":"x","content":"bye","details":{"k":[1,2]},"display":false}"#
    );
    assert_eq!(out[1..], input[1..]);
}

// ---- Vector 58: finalize ----

fn finalize_rules() -> Vec<Rule> {
    load(json!([{
        "id": "f", "stage": "compiled", "effect": "finalize", "pattern": "\\s*\\(OOC:[^)]+\\)",
        "flags": "g", "replace": ""
    }]))
}

#[test]
fn v58_finalize_rewrites_assistant_text_and_keeps_other_fields() {
    let message = json!({
        "role": "assistant",
        "content": [
            { "type": "text", "text": "Visible (OOC: hide)" },
            { "type": "toolCall", "id": "c1", "name": "read", "arguments": { "path": "(OOC: x)" } }
        ],
        "api": "a", "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": 5
    });
    let (out, diagnostics) = finalize(&finalize_rules(), &message).unwrap();
    assert_eq!(
        serde_json::to_string(&out).unwrap(),
        r#"{"role":"assistant","content":[{"type":"text","text":"Visible"},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"(OOC: x)"}}],"api":"a","provider":"p","model":"m","stopReason":"toolUse","timestamp":5}"#
    );
    assert_eq!(
        diagnostics,
        vec![
            info("Regex rule f matched 1 time(s) and changed 1 text segment(s) in finalize/messages."),
            Diagnostic::warning("Finalize regex replaced finalized assistant message content; original model output is not preserved in the stored transcript."),
        ]
    );
}

#[test]
fn v58_finalize_returns_nothing_for_outgoing_rules_or_user_messages() {
    let outgoing = load(
        json!([{ "id": "o", "stage": "compiled", "pattern": "\\(OOC:[^)]+\\)", "replace": "" }]),
    );
    assert!(finalize(&outgoing, &assistant("Visible (OOC: hide)")).is_none());
    assert!(finalize(&finalize_rules(), &user("Visible (OOC: hide)")).is_none());
    assert!(finalize(&finalize_rules(), &json!({ "content": "(OOC: x)" })).is_none());
    // A match that changes nothing is not a rewrite.
    let same = load(
        json!([{ "id": "s", "stage": "compiled", "effect": "finalize", "pattern": "a", "replace": "$&" }]),
    );
    assert!(finalize(&same, &assistant("a")).is_none());
    assert!(finalize(&same, &assistant("b")).is_none());
}

#[test]
fn finalize_rules_never_run_as_outgoing_and_respect_roles() {
    let rules = finalize_rules();
    let input = vec![assistant("x (OOC: y)")];
    let (out, diagnostics) = apply_compiled_messages(&rules, input.clone());
    assert_eq!((out, diagnostics), (input, vec![]));
    let (text, diagnostics) = apply_compiled_system(&rules, "x (OOC: y)".to_string());
    assert_eq!((text.as_str(), diagnostics.len()), ("x (OOC: y)", 0));
    let user_only = load(
        json!([{ "id": "u", "stage": "compiled", "effect": "finalize", "pattern": "x", "roles": ["user"] }]),
    );
    assert!(finalize(&user_only, &assistant("x")).is_none());
    // String(role) is what is compared: ["assistant"] coerces to "assistant".
    let odd = json!({ "role": ["assistant"], "content": "x (OOC: y)" });
    let (out, _) = finalize(&rules, &odd).unwrap();
    assert_eq!(out, json!({ "role": ["assistant"], "content": "x" }));
}

#[test]
fn finalize_rule_counts_for_the_preview_note() {
    let regex = config(json!([
        { "id": "f1", "stage": "compiled", "effect": "finalize", "pattern": "a" },
        { "id": "f2", "stage": "compiled", "effect": "finalize", "pattern": "b", "enabled": true },
        { "id": "f3", "stage": "compiled", "effect": "finalize", "pattern": "c", "enabled": false },
        { "id": "f4", "stage": "history", "effect": "finalize", "pattern": "d" },
        { "id": "o", "stage": "compiled", "pattern": "e" },
        "not a rule"
    ]));
    let (rules, _) = rules_from_config(Some(&regex));
    // f4 is runnable (a finalize rule at the history stage simply never fires).
    assert_eq!(finalize_rule_count(&rules), 3);
    assert_eq!(finalize_rule_count_in_config(Some(&regex)), 3);
    let broken = config(
        json!([{ "effect": "finalize" }, { "id": "x", "effect": "finalize", "stage": "compiled", "pattern": "(" }]),
    );
    let (rules, _) = rules_from_config(Some(&broken));
    assert_eq!(finalize_rule_count(&rules), 0);
    assert_eq!(finalize_rule_count_in_config(Some(&broken)), 2);
    assert_eq!(finalize_rule_count_in_config(None), 0);
}

// ---- Rule reading ----

#[test]
fn invalid_rules_are_skipped_silently() {
    let regex = config(json!([
        null, 5, "rule", [],
        { "stage": "compiled", "pattern": "a" },
        { "id": "  ", "stage": "compiled", "pattern": "a" },
        { "id": 3, "stage": "compiled", "pattern": "a" },
        { "id": "s", "stage": "other", "pattern": "a" },
        { "id": "e", "stage": "compiled", "effect": "display", "pattern": "a" },
        { "id": "e2", "stage": "compiled", "effect": 1, "pattern": "a" },
        { "id": "p", "stage": "compiled", "pattern": "" },
        { "id": "p2", "stage": "compiled", "pattern": 1 },
        { "id": "f", "stage": "compiled", "pattern": "a", "flags": "gg" },
        { "id": "f2", "stage": "compiled", "pattern": "a", "flags": "y" },
        { "id": "off", "stage": "compiled", "pattern": "a", "enabled": false }
    ]));
    let (rules, diagnostics) = rules_from_config(Some(&regex));
    assert!(rules.is_empty());
    assert!(diagnostics.is_empty());
    assert_eq!(rules_from_config(None).0.len(), 0);
    let not_array = config(json!({ "id": "r" }));
    assert_eq!(rules_from_config(Some(&not_array)).0.len(), 0);
}

#[test]
fn compile_failure_is_an_error_and_drops_the_rule() {
    let regex = config(json!([
        { "id": " bad ", "stage": "compiled", "pattern": "(", "flags": "g" },
        { "id": "good", "stage": "history", "pattern": "a" }
    ]));
    let (rules, diagnostics) = rules_from_config(Some(&regex));
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].id, "good");
    assert_eq!(
        diagnostics,
        vec![Diagnostic::error(
            "Regex rule  bad  failed to compile: Invalid regular expression: /(/g: Unbalanced parenthesis"
        )]
    );
}

#[test]
fn ill_typed_optional_fields_fall_back_to_defaults() {
    let r = rule(json!({
        "id": "  spaced  ", "pattern": "a", "flags": 7, "effect": null, "enabled": "false",
        "replace": 5, "roles": "user", "trimStrings": ["x", 1], "targets": "system",
        "maxMessages": 0, "maxChars": 1.5, "minDepth": -1, "maxDepth": "2"
    }));
    assert_eq!(r.id, "spaced");
    assert_eq!((r.stage, r.effect), (Stage::Compiled, Effect::Outgoing));
    assert_eq!(
        (r.flags.as_str(), r.global, r.replace.as_str()),
        ("", false, "")
    );
    assert_eq!(
        (r.roles.clone(), r.trim_strings.clone(), r.targets.clone()),
        (None, None, None)
    );
    assert_eq!(
        (r.max_messages, r.max_chars, r.min_depth, r.max_depth),
        (None, None, None, None)
    );
    assert_eq!(apply_to_text(&r, "banana").text, "bnana");

    let r = rule(json!({
        "pattern": "a", "flags": "gimsu", "targets": ["messages", "bogus", 3, "system"],
        "maxMessages": 2.0, "maxChars": 1e300, "minDepth": 0, "maxDepth": 4
    }));
    assert!(r.global);
    assert_eq!(r.targets, Some(vec![Target::Messages, Target::System]));
    assert_eq!(
        (r.max_messages, r.max_chars, r.min_depth, r.max_depth),
        (Some(2), Some(usize::MAX), Some(0), Some(4))
    );
}

#[test]
fn compiled_targets_select_system_and_messages() {
    let rules = load(json!([
        { "id": "sys", "stage": "compiled", "pattern": "a", "replace": "S", "targets": ["system"] },
        { "id": "msg", "stage": "compiled", "pattern": "a", "replace": "M", "targets": ["messages"] },
        { "id": "none", "stage": "compiled", "pattern": "a", "replace": "N", "targets": ["bogus"] },
        { "id": "empty", "stage": "compiled", "pattern": "a", "replace": "E", "targets": [] },
        { "id": "both", "stage": "compiled", "pattern": "b", "replace": "B", "targets": "nonsense" }
    ]));
    let (text, diagnostics) = apply_compiled_system(&rules, "ab".to_string());
    assert_eq!(text, "SB");
    assert_eq!(
        diagnostics,
        vec![
            info("Regex rule sys matched 1 time(s) and changed 1 text segment(s) in compiled/system."),
            info("Regex rule both matched 1 time(s) and changed 1 text segment(s) in compiled/system."),
        ]
    );
    let (out, diagnostics) = apply_compiled_messages(&rules, vec![user("ab")]);
    assert_eq!(out, vec![user("MB")]);
    assert_eq!(diagnostics.len(), 2);
    // History-stage calls never run compiled rules.
    let (out, diagnostics) = apply_history(&rules, vec![user("ab")]);
    assert_eq!((out, diagnostics), (vec![user("ab")], vec![]));
}

// ---- Replacement corner cases ----

#[test]
fn native_numbered_group_rules() {
    assert_eq!(
        replaced(
            json!({ "pattern": "(a)", "flags": "g", "replace": "[$<w>|$01|$00|$05|$1$|$<]" }),
            "xay"
        ),
        "x[$<w>|a|$00|$05|a$|$<]y"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(a)(b)?", "replace": "[$2|$3|$12|$11]" }),
            "xay"
        ),
        "x[|$3|a2|a1]y"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(a)|(b)", "flags": "g", "replace": "[$1,$2]" }),
            "ab"
        ),
        "[a,][,b]"
    );
    assert_eq!(
        replaced(json!({ "pattern": "a", "replace": "$" }), "a"),
        "$"
    );
    assert_eq!(
        replaced(json!({ "pattern": "a", "replace": "$x$" }), "a"),
        "$x$"
    );
}

#[test]
fn named_group_lookup_native() {
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<w>a)", "replace": "[$<missing>|$<w|$<>|$<w>>]" }),
            "xay"
        ),
        "x[||a>]y"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<y>\\d{4})-(?<m>\\d{2})", "flags": "g", "replace": "$<m>/$<y>" }),
            "2024-05 and 1999-12"
        ),
        "05/2024 and 12/1999"
    );
    // Without named groups `$<` is literal.
    assert_eq!(
        replaced(json!({ "pattern": "(a)", "replace": "$<missing>" }), "a"),
        "$<missing>"
    );
    // A named group that did not take part gives "".
    assert_eq!(
        replaced(json!({ "pattern": "(?<p>x)?a", "replace": "[$<p>]" }), "a"),
        "[]"
    );
}

#[test]
fn trim_expander_corner_cases() {
    let trim = |replace: &str, pattern: &str, text: &str| {
        replaced(
            json!({ "pattern": pattern, "replace": replace, "trimStrings": ["-", ""] }),
            text,
        )
    };
    // `$<missing>` and missing numbered groups are empty; `$<` without a closing `>` or with an
    // empty name is literal.
    assert_eq!(trim("[$<missing>|$<w>]", "(?<w>a-)", "a-"), "[|a]");
    assert_eq!(trim("[$<missing>]", "(a)", "a"), "[]");
    assert_eq!(trim("[$<w|$<>]", "(a)", "a"), "[]");
    assert_eq!(trim("[$<>|$<w", "(a)", "a"), "[$<>|$<w");
    // `$&`, `$0` and groups are trimmed; the before/after text and `$$` are not.
    assert_eq!(
        trim("[$&|$0|$1|$`|$'|$$]", "b(-c-)", "-a-b-c-d-"),
        "-a-[bc|bc|c|-a-|d-|$]d-"
    );
    // Greedy two-digit groups, `$00` and `$05` literal.
    assert_eq!(trim("[$10|$01|$00|$1]", "(a)", "a"), "[|$01|$00|a]");
    // An empty trimStrings list takes the native path.
    assert_eq!(
        replaced(
            json!({ "pattern": "(a)", "replace": "[$2|$0]", "trimStrings": [] }),
            "a"
        ),
        "[$2|a]"
    );
}

#[test]
fn full_match_with_trim_strings() {
    assert_eq!(
        replaced(
            json!({ "pattern": "\\*\\*[^*]+\\*\\*", "flags": "g", "replace": "<b>$&</b>", "trimStrings": ["**"] }),
            "a **bold** and **more**"
        ),
        "a <b>bold</b> and <b>more</b>"
    );
    // Trim strings apply one after another.
    assert_eq!(
        replaced(
            json!({ "pattern": "x.*", "replace": "$&", "trimStrings": ["ab", "c"] }),
            "xacbb"
        ),
        "xabb"
    );
}

#[test]
fn lookbehind_and_backreferences() {
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<=a)b", "flags": "g", "replace": "X" }),
            "abcb"
        ),
        "aXcb"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<!a)b", "flags": "g", "replace": "X" }),
            "abcb"
        ),
        "abcX"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(\\w)\\1", "flags": "g", "replace": "<$1>" }),
            "aabbcd"
        ),
        "<a><b>cd"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<q>['\"]).*?\\k<q>", "flags": "g", "replace": "S" }),
            "say \"hi\" or 'yo'"
        ),
        "say S or S"
    );
}

#[test]
fn flags_i_m_s() {
    assert_eq!(
        replaced(
            json!({ "pattern": "A", "flags": "gi", "replace": "b" }),
            "aAa"
        ),
        "bbb"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "A", "flags": "g", "replace": "b" }),
            "aAa"
        ),
        "aba"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "^b", "flags": "gm", "replace": "B" }),
            "a\nb\nb"
        ),
        "a\nB\nB"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "^b", "flags": "g", "replace": "B" }),
            "a\nb\nb"
        ),
        "a\nb\nb"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "a.b", "flags": "s", "replace": "X" }),
            "a\nb"
        ),
        "X"
    );
    assert_eq!(
        replaced(json!({ "pattern": "a.b", "replace": "X" }), "a\nb"),
        "a\nb"
    );
}

#[test]
fn unicode_flag_and_astral_characters() {
    assert_eq!(
        edit(
            json!({ "pattern": "\\u{1F600}", "flags": "gu", "replace": "<smile>" }),
            "a😀b😀"
        ),
        TextEdit {
            text: "a<smile>b<smile>".into(),
            matches: 2,
            changed: true
        }
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "\\p{Lu}", "flags": "gu", "replace": "_" }),
            "aÉb"
        ),
        "a_b"
    );
    assert_eq!(
        replaced(
            json!({ "pattern": "😀", "flags": "g", "replace": "X" }),
            "a😀b"
        ),
        "aXb"
    );
    // `.` consumes a whole astral character with and without `u` (see the module docs).
    assert_eq!(
        edit(
            json!({ "pattern": ".", "flags": "gu", "replace": "-" }),
            "😀é"
        ),
        TextEdit {
            text: "--".into(),
            matches: 2,
            changed: true
        }
    );
    assert_eq!(
        edit(
            json!({ "pattern": ".", "flags": "g", "replace": "-" }),
            "😀é"
        ),
        TextEdit {
            text: "--".into(),
            matches: 2,
            changed: true
        }
    );
}

#[test]
fn empty_matches_step_over_astral_characters_whole() {
    for flags in ["g", "gu"] {
        assert_eq!(
            edit(
                json!({ "pattern": "x*", "flags": flags, "replace": "-" }),
                "a😀"
            ),
            TextEdit {
                text: "-a-😀-".into(),
                matches: 3,
                changed: true
            },
            "flags {flags}"
        );
    }
}

#[test]
fn max_chars_scope_counts_utf16_units() {
    // The last 3 units of "abcabc" are "abc": `^` anchors at the cut and only that tail is edited.
    assert_eq!(
        edit(
            json!({ "pattern": "^a", "flags": "g", "replace": "X", "maxChars": 3 }),
            "abcabc"
        ),
        TextEdit {
            text: "abcXbc".into(),
            matches: 1,
            changed: true
        }
    );
    // Lookbehind does not see the untouched head.
    assert_eq!(
        replaced(
            json!({ "pattern": "(?<=c)a", "flags": "g", "replace": "X", "maxChars": 3 }),
            "abcabc"
        ),
        "abcabc"
    );
    // "é" is one unit, "😀" two.
    assert_eq!(
        replaced(
            json!({ "pattern": ".", "flags": "gu", "replace": "-", "maxChars": 3 }),
            "aé😀"
        ),
        "a--"
    );
    // A text that fits is edited whole.
    assert_eq!(
        replaced(
            json!({ "pattern": "a", "flags": "g", "replace": "-", "maxChars": 5 }),
            "aaaaa"
        ),
        "-----"
    );
    // `$\`` and `$'` see the scoped text only.
    assert_eq!(
        replaced(
            json!({ "pattern": "c", "replace": "[$`|$']", "maxChars": 2 }),
            "abcd"
        ),
        "ab[|d]d"
    );
}

#[test]
fn max_chars_cut_inside_a_surrogate_pair_keeps_the_pair_in_the_head() {
    // "a😀b" is 4 units; the last 2 start inside the pair, so only "b" is in scope.
    assert_eq!(
        edit(
            json!({ "pattern": ".", "flags": "g", "replace": "-", "maxChars": 2 }),
            "a😀b"
        ),
        TextEdit {
            text: "a😀-".into(),
            matches: 1,
            changed: true
        }
    );
    assert_eq!(
        edit(
            json!({ "pattern": ".", "flags": "gu", "replace": "-", "maxChars": 3 }),
            "a😀b"
        ),
        TextEdit {
            text: "a--".into(),
            matches: 2,
            changed: true
        }
    );
    // A 1-unit scope that starts on a low surrogate is empty: only an empty match is possible.
    assert_eq!(
        edit(
            json!({ "pattern": "x*", "flags": "g", "replace": "-", "maxChars": 1 }),
            "a😀"
        ),
        TextEdit {
            text: "a😀-".into(),
            matches: 1,
            changed: true
        }
    );
}

// ---- Properties ----

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..5).prop_map(|n| json!(n)),
        Just(json!(1.5)),
        "[a-z]{0,3}".prop_map(Value::String),
        prop::collection::vec("[a-z]{0,2}".prop_map(Value::String), 0..3).prop_map(Value::Array),
        Just(json!([1, "x"])),
        Just(json!({ "k": "v" })),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "a",
        "b",
        "😀",
        "é",
        ".",
        "*",
        "+",
        "?",
        "(",
        ")",
        "[",
        "]",
        "^",
        "$",
        "|",
        "\\",
        "{",
        "}",
        "1",
        "2",
        ",",
        "-",
        "<",
        ">",
        "?<n>",
        "?:",
        "?=",
        "?<=",
        "?!",
        "\\1",
        "\\k<n>",
        "\\d",
        "\\w",
        "\\s",
        "\\b",
        "\\u{1F600}",
        "\\p{L}",
        "\\uD83D",
    ]);
    prop::collection::vec(atoms, 1..8).prop_map(|parts| parts.concat())
}

fn replacement() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "$", "$$", "$&", "$0", "$1", "$2", "$10", "$01", "$`", "$'", "$<n>", "$<", ">", "x", "😀",
        "0",
    ]);
    prop::collection::vec(atoms, 0..6).prop_map(|parts| parts.concat())
}

fn flags() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::subsequence(vec!['g', 'i', 'm', 's', 'u'], 0..=5)
            .prop_map(|f| Value::String(f.into_iter().collect())),
        1 => "[gimsuyx]{0,3}".prop_map(Value::String),
        1 => json_value(),
    ]
}

fn subject() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec!["a", "b", "😀", "é", "\n", " ", "1", "<", "-"]);
    prop::collection::vec(atoms, 0..12).prop_map(|parts| parts.concat())
}

fn raw_rule() -> impl Strategy<Value = Value> {
    let stage = prop_oneof![
        Just(json!("history")),
        Just(json!("compiled")),
        json_value()
    ];
    let effect = prop_oneof![
        Just(json!("outgoing")),
        Just(json!("finalize")),
        json_value()
    ];
    let small = prop_oneof![(0i64..4).prop_map(|n| json!(n)), json_value()];
    let targets = prop_oneof![
        Just(json!(["system"])),
        Just(json!(["messages"])),
        Just(json!(["system", "messages"])),
        json_value()
    ];
    let roles = prop_oneof![
        Just(json!(["user"])),
        Just(json!(["assistant", "user"])),
        json_value()
    ];
    let trims = prop_oneof![Just(json!(["a"])), Just(json!(["", "😀"])), json_value()];
    (
        (
            prop_oneof![Just(json!("r")), json_value()],
            stage,
            effect,
            pattern(),
            flags(),
        ),
        (replacement(), trims, roles, targets),
        (
            small.clone(),
            small.clone(),
            small.clone(),
            small,
            any::<u8>(),
        ),
    )
        .prop_map(
            |(
                (id, stage, effect, pattern, flags),
                (replace, trims, roles, targets),
                (mm, mc, min, max, mask),
            )| {
                let mut object = Map::new();
                let mut put = |bit: u8, key: &str, value: Value| {
                    if mask & bit == 0 {
                        object.insert(key.to_string(), value);
                    }
                };
                put(0, "id", id);
                put(0, "stage", stage);
                put(1, "effect", effect);
                put(0, "pattern", Value::String(pattern));
                put(2, "flags", flags);
                put(0, "replace", Value::String(replace));
                put(4, "trimStrings", trims);
                put(8, "roles", roles);
                put(16, "targets", targets);
                put(32, "maxMessages", mm);
                put(64, "maxChars", mc);
                put(128, "minDepth", min);
                put(128, "maxDepth", max);
                Value::Object(object)
            },
        )
}

fn message() -> impl Strategy<Value = Value> {
    let role = prop_oneof![Just(json!("user")), Just(json!("assistant")), json_value()];
    (role, subject(), subject(), any::<bool>()).prop_map(|(role, a, b, parts)| {
        if parts {
            json!({ "role": role, "content": [{ "type": "text", "text": a }, { "type": "toolCall", "name": b }, { "type": "text", "text": b }] })
        } else {
            json!({ "role": role, "content": a })
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn arbitrary_rules_never_panic(
        raw in prop::collection::vec(raw_rule(), 0..4),
        messages in prop::collection::vec(message(), 0..4),
        text in subject(),
    ) {
        let regex = config(Value::Array(raw));
        let (rules, diagnostics) = rules_from_config(Some(&regex));
        prop_assert!(diagnostics.iter().all(|d| d.message.contains("failed to compile")));
        for rule in &rules {
            let e = apply_to_text(rule, &text);
            prop_assert_eq!(e.changed, e.text != text);
            if e.matches == 0 {
                prop_assert_eq!(&e.text, &text);
            }
        }
        let _ = apply_compiled_system(&rules, text.clone());
        let (history, _) = apply_history(&rules, messages.clone());
        prop_assert_eq!(history.len(), messages.len());
        let (compiled, _) = apply_compiled_messages(&rules, messages.clone());
        prop_assert_eq!(compiled.len(), messages.len());
        for m in &messages {
            if let Some((_, diagnostics)) = finalize(&rules, m) {
                prop_assert!(diagnostics.len() >= 2);
            }
        }
        prop_assert!(finalize_rule_count(&rules) <= finalize_rule_count_in_config(Some(&regex)));
    }

    #[test]
    fn full_match_replacement_never_changes_text(
        pattern in pattern(),
        replace in prop::sample::select(vec!["$&", "$0"]),
        flags in prop::sample::subsequence(vec!['g', 'i', 'm', 's', 'u'], 0..=5),
        max_chars in prop::option::of(1u32..8),
        text in subject(),
    ) {
        let mut raw = json!({
            "id": "same", "stage": "compiled", "pattern": pattern,
            "flags": flags.into_iter().collect::<String>(), "replace": replace
        });
        if let Some(n) = max_chars {
            raw["maxChars"] = json!(n);
        }
        let (rules, _) = rules_from_config(Some(&config(json!([raw]))));
        for rule in &rules {
            let e = apply_to_text(rule, &text);
            prop_assert_eq!(&e.text, &text);
            prop_assert!(!e.changed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Step budget (issue 16, point 1)

/// The error a rule that ran out of steps reports.
fn over_budget(id: &str, place: &str) -> Diagnostic {
    Diagnostic::error(format!(
        "Regex rule {id} exceeded its time budget (20000000 steps of the regex engine) in {place}: the pattern backtracks catastrophically on this text. Simplify it (no nested quantifiers such as (a+)+)."
    ))
}

#[test]
fn catastrophic_pattern_on_a_long_message_stops_with_a_budget_error() {
    let rules = load(json!([
        { "id": "nested", "stage": "history", "pattern": "(a+)+$", "replace": "x" },
        { "id": "after", "stage": "history", "pattern": "b", "replace": "c" },
    ]));
    // 2^26 ways to split the run: minutes of backtracking without a budget.
    let long = format!("{}!", "a".repeat(26));
    let (messages, diagnostics) = apply_history(&rules, vec![user(&long), user("b")]);
    // The runaway rule is named; the next rule gets a fresh budget and still runs.
    assert_eq!(
        diagnostics,
        vec![
            over_budget("nested", "history/messages"),
            info("Regex rule after matched 1 time(s) and changed 1 text segment(s) in history/messages."),
        ]
    );
    assert_eq!(text_of(&messages[0]), long);
    assert_eq!(text_of(&messages[1]), "c");
}

#[test]
fn budget_covers_the_system_prompt_and_finalize() {
    let text = format!("{}!", "a".repeat(64));
    let rules = load(json!([
        { "id": "sys", "stage": "compiled", "targets": ["system"], "pattern": "(a+)+$", "replace": "x" },
    ]));
    let (out, diagnostics) = apply_compiled_system(&rules, text.clone());
    assert_eq!(out, text);
    assert_eq!(diagnostics, vec![over_budget("sys", "compiled/system")]);

    let rules = load(json!([
        { "id": "fin", "stage": "compiled", "effect": "finalize", "pattern": "(a+)+$", "replace": "x" },
    ]));
    // Finalize stops too; it reports only changes, and the runaway rule changed nothing.
    assert_eq!(finalize(&rules, &assistant(&text)), None);
}

// ---------------------------------------------------------------------------------------------
// Nested empty loops and the backtrack stack cap (issue 34)

/// What one rule does to `text` through `try_rule`, the compiler's own pipeline and budget.
fn trial(pattern: &str, flags: &str, replace: &str, text: &str) -> forge_core::rewrite::RuleTrial {
    let raw = json!({ "pattern": pattern, "flags": flags, "replace": replace });
    forge_core::rewrite::try_rule(raw.as_object().unwrap(), text).unwrap()
}

#[test]
fn nested_empty_loops_give_the_javascript_answer() {
    // A history rule without its prefilter, so the engine tries every position from the start
    // (with it, `Bb` missing from `--s` would skip the engine, and `--s Bb` would start at 4).
    let run = |pattern: &str, flags: &str, replace: &str, text: &str| {
        let rules: Vec<Rule> = load(json!([{
            "id": "r", "stage": "history", "pattern": pattern, "flags": flags, "replace": replace
        }]))
        .into_iter()
        .map(Rule::without_prefilter)
        .collect();
        let (messages, diagnostics) = apply_history(&rules, vec![user(text)]);
        (text_of(&messages[0]), diagnostics)
    };
    let matched = |n: usize| {
        vec![info(&format!(
            "Regex rule r matched {n} time(s) and changed 1 text segment(s) in history/messages."
        ))]
    };
    // Each expected text is what node 22 gives for `text.replace(/pattern/flags, replace)`.
    // Unpatched regress 0.12 never returned on the first two: with the budget they took all
    // 20,000,000 steps and ended with the budget error; without it, memory until abort.
    assert_eq!(
        run("(?:(?:-?)?){2}Bb", "", "<$&>", "--s Bb"),
        ("--s <Bb>".to_string(), matched(1))
    );
    assert_eq!(
        run("((-*){1}){3}Bb", "", "<$&>", "--s"),
        ("--s".to_string(), vec![])
    );
    // Where it matches at the first position, it still does, with JavaScript's captures.
    assert_eq!(
        run("(?:(?:-?)?){2}Bb", "", "<$&>", "--Bb"),
        ("<--Bb>".to_string(), matched(1))
    );
    assert_eq!(
        run("((-*){1}){3}Bb", "", "<$&|$1|$2>", "--Bb"),
        ("<--Bb||>".to_string(), matched(1))
    );
    assert_eq!(
        run("((-*){1}){3}Bb", "g", "<$&|$1|$2>", "--s Bb --Bb"),
        ("--s <Bb||> <--Bb||>".to_string(), matched(2))
    );
    assert_eq!(
        run("(?:(?:-?)?){2}Bb", "g", "<$&>", "--s Bb --Bb"),
        ("--s <Bb> <--Bb>".to_string(), matched(2))
    );
}

/// Runs `pattern` once on `text` in the engine with the rules' step budget and `stack_limit`:
/// (match range, steps taken, budget spent, most backtrack states held).
fn engine_run(
    pattern: &str,
    text: &str,
    stack_limit: usize,
) -> (Option<std::ops::Range<usize>>, u64, bool, usize) {
    use forge_core::rewrite::RULE_STEP_BUDGET;
    let re = regress::Regex::new(pattern).unwrap();
    regress::budget::set(RULE_STEP_BUDGET);
    regress::budget::set_stack_limit(stack_limit);
    regress::budget::reset_stack_peak();
    let found = re.find(text).map(|m| m.range());
    let out = (
        found,
        RULE_STEP_BUDGET - regress::budget::remaining(),
        regress::budget::exhausted(),
        regress::budget::stack_peak(),
    );
    regress::budget::set(u64::MAX);
    regress::budget::set_stack_limit(usize::MAX);
    out
}

#[test]
fn nested_empty_loops_end_in_a_few_steps_with_a_small_stack() {
    use forge_core::rewrite::RULE_STACK_LIMIT;
    // Exact step counts and stack peaks of the patched engine (backtrack states, the bottom
    // marker included); unpatched, the first two took all 20,000,000 steps.
    assert_eq!(
        engine_run("(?:(?:-?)?){2}Bb", "--s Bb", RULE_STACK_LIMIT),
        (Some(4..6), 74, false, 12)
    );
    assert_eq!(
        engine_run("((-*){1}){3}Bb", "--s", RULE_STACK_LIMIT),
        (None, 310, false, 29)
    );
    assert_eq!(
        engine_run("(?:(?:-?)?){2}Bb", "--Bb", RULE_STACK_LIMIT),
        (Some(0..4), 11, false, 12)
    );
}

#[test]
fn backtrack_stack_is_capped_within_the_budget() {
    use forge_core::rewrite::RULE_STACK_LIMIT;
    assert_eq!(RULE_STACK_LIMIT, 2_000_000);
    assert_eq!(regress::budget::STACK_ENTRY_BYTES, 40);
    // A failing `(?:a|b)*[cd]` holds three states per character it loops over (the class leaves
    // the prefilter no literal, so the compiler runs the engine on texts without `c`): on a million `a`s
    // the step budget alone lets the stack reach three million states (120 MB of states).
    let text = "a".repeat(1_000_000);
    assert_eq!(
        engine_run("(?:a|b)*[cd]", &text, usize::MAX),
        (None, 20_000_000, true, 3_000_005)
    );
    // With the cap the attempt stops at the cap (at most 3 states past it), and the budget is
    // spent: the rest of the rule's matching fails at once.
    let (found, _, spent, peak) = engine_run("(?:a|b)*[cd]", &text, RULE_STACK_LIMIT);
    assert_eq!((found, spent, peak), (None, true, 2_000_000));
    assert!(peak <= RULE_STACK_LIMIT + 3);

    // The compiler sets the cap itself and reports it as the step budget's error.
    regress::budget::reset_stack_peak();
    let rules = load(json!([
        { "id": "deep", "stage": "history", "pattern": "(?:a|b)*[cd]", "replace": "x" },
        { "id": "after", "stage": "history", "pattern": "b", "replace": "c" },
    ]));
    let (messages, diagnostics) = apply_history(&rules, vec![user(&text), user("b")]);
    assert_eq!(regress::budget::stack_peak(), 2_000_000);
    assert_eq!(
        diagnostics,
        vec![
            over_budget("deep", "history/messages"),
            info("Regex rule after matched 1 time(s) and changed 1 text segment(s) in history/messages."),
        ]
    );
    assert_eq!(text_of(&messages[0]), text);
    assert_eq!(text_of(&messages[1]), "c");
    assert!(
        trial("(?:a|b)*[cd]", "", "x", &text).out_of_budget,
        "try_rule runs within the same cap"
    );
    // Below the cap the same pattern still answers: 300,000 characters hold 900,005 states.
    regress::budget::reset_stack_peak();
    let shorter = format!("{}c", "a".repeat(300_000));
    let trial = trial("(?:a|b)*[cd]", "", "x", &shorter);
    assert_eq!((trial.matches, trial.out_of_budget), (1, false));
    assert_eq!(trial.text, "x");
    assert_eq!(regress::budget::stack_peak(), 900_005);
}

#[test]
fn try_rule_gives_what_the_compiler_does_to_a_text() {
    use forge_core::rewrite::{try_rule, RuleTrial};
    let raw = |v: Value| v.as_object().unwrap().clone();
    // trimStrings (the case the browser's own engine got wrong), without id, stage or enabled.
    assert_eq!(
        try_rule(
            &raw(
                json!({"pattern": "\\[([^\\]]+)\\]", "flags": "g", "replace": "**$&**/$1",
                       "trimStrings": ["[", "]"], "enabled": false})
            ),
            "Status: [OK] and [NO]"
        ),
        Ok(RuleTrial {
            matches: 2,
            text: "Status: **OK**/OK and **NO**/NO".into(),
            changed: true,
            out_of_budget: false
        })
    );
    // maxChars: only the last 5 UTF-16 units are searched.
    assert_eq!(
        try_rule(
            &raw(json!({"pattern": "a", "flags": "g", "replace": "b", "maxChars": 5})),
            "aaaaaaaa"
        )
        .unwrap()
        .text,
        "aaabbbbb"
    );
    assert_eq!(
        try_rule(&raw(json!({"pattern": "(", "replace": ""})), "x"),
        Err("Invalid regular expression: /(/: Unbalanced parenthesis".to_string())
    );
    assert_eq!(
        try_rule(&raw(json!({"pattern": "", "replace": ""})), "x"),
        Err("Enter a pattern first.".to_string())
    );
    // The same rule in the history stage of the compiler gives the same text.
    let fields = json!({"id": "r", "stage": "history", "pattern": "\\[([^\\]]+)\\]", "flags": "g",
                        "replace": "<$1>", "trimStrings": ["O"]});
    let sample = "Say [OK] [NO]";
    let (messages, _) = apply_history(
        &load(json!([fields.clone()])),
        vec![json!({"role": "user", "content": sample})],
    );
    assert_eq!(
        try_rule(&raw(fields), sample).unwrap().text,
        messages[0]["content"].as_str().unwrap()
    );
}
