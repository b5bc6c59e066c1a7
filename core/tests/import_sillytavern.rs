//! SillyTavern preset import: conversion, report, errors, and import-then-compile order.
//! Every preset here is written for these tests.

use forge_core::compile::{compile, CompileInput, MessageSource};
use forge_core::diag::Level;
use forge_core::import::sillytavern::{
    convert, default_stack_id, file_stem, is_preset, lower_slug, slugify, ImportError,
    ImportOptions, Imported,
};
use forge_core::message::{content_text, OtherParts};
use forge_core::runtime::{Clock, RuntimeSnapshot};
use forge_core::stack::{parse_stack_value, ParseOptions, PromptStack, STACK_KEY_ORDER};
use forge_core::template::MacroRegistry;
use serde_json::{json, Value};

fn options(character_id: Option<&str>) -> ImportOptions {
    ImportOptions {
        id: "roleplay".into(),
        character_id: character_id.map(str::to_string),
        source_file: Some("Roleplay.json".into()),
        converted_at: Some("2026-01-02T03:04:05.000Z".into()),
    }
}

/// A preset in the shape SillyTavern exports: prompts, two character configs, sampler settings.
fn preset() -> Value {
    json!({
        "temperature": 0.9,
        "openai_max_tokens": 300,
        "stream_openai": true,
        "prompts": [
            {"identifier": "main", "name": "Main Prompt", "system_prompt": true, "role": "system",
             "content": "Write {{char}}'s next reply to {{user}}.{{// keep it short}}\n\n\n\nStay in character.",
             "custom_field": 1},
            {"identifier": "nsfw", "name": "Auxiliary Prompt", "system_prompt": true, "role": "system", "content": ""},
            {"identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": true, "marker": true},
            {"identifier": "charDescription", "name": "Char Description", "system_prompt": true, "marker": true},
            {"identifier": "charPersonality", "name": "Char Personality", "system_prompt": true, "marker": true},
            {"identifier": "scenario", "name": "Scenario", "system_prompt": true, "marker": true},
            {"identifier": "personaDescription", "name": "Persona Description", "system_prompt": true, "marker": true},
            {"identifier": "dialogueExamples", "name": "Chat Examples", "system_prompt": true, "marker": true},
            {"identifier": "worldInfoAfter", "name": "World Info (after)", "system_prompt": true, "marker": true},
            {"identifier": "example-user", "name": "Example user", "role": "user", "content": "Hello there."},
            {"identifier": "example-reply", "name": "Example reply", "role": "assistant", "content": "{{trim}}Greetings, traveller."},
            {"identifier": "chatHistory", "name": "Chat History", "system_prompt": true, "marker": true},
            {"identifier": "depth-note", "name": "Depth note", "role": "system", "content": "Remember the weather.",
             "injection_position": 1, "injection_depth": 2},
            {"identifier": "last-nudge", "name": "Last nudge", "role": "user", "content": "(Answer briefly.)",
             "injection_position": 1, "injection_depth": 0},
            {"identifier": "jailbreak", "name": "Post-History Instructions", "system_prompt": true, "role": "system",
             "content": "Reply to: {{lastUserMessage}} {{random::a::b}}"},
            {"identifier": "off", "name": "Disabled one", "role": "system", "content": "Never sent."},
            {"identifier": "unused", "name": "Not in any order", "role": "system", "content": "Orphan."}
        ],
        "prompt_order": [
            {"character_id": 100000, "order": [
                {"identifier": "main", "enabled": true},
                {"identifier": "chatHistory", "enabled": true}
            ]},
            {"character_id": 100001, "order": [
                {"identifier": "main", "enabled": true},
                {"identifier": "nsfw", "enabled": true},
                {"identifier": "worldInfoBefore", "enabled": true},
                {"identifier": "charDescription", "enabled": true},
                {"identifier": "charPersonality", "enabled": true},
                {"identifier": "scenario", "enabled": true},
                {"identifier": "personaDescription", "enabled": true},
                {"identifier": "off", "enabled": false},
                {"identifier": "worldInfoAfter", "enabled": true},
                {"identifier": "dialogueExamples", "enabled": true},
                {"identifier": "example-user", "enabled": true},
                {"identifier": "example-reply", "enabled": true},
                {"identifier": "chatHistory", "enabled": true},
                {"identifier": "depth-note", "enabled": true},
                {"identifier": "last-nudge", "enabled": true},
                {"identifier": "jailbreak", "enabled": true},
                {"identifier": "ghost", "enabled": true}
            ]}
        ],
        "extensions": {
            "regex_scripts": [
                {"scriptName": "Strip OOC", "findRegex": "/\\(OOC:[^)]*\\)/g", "replaceString": "",
                 "trimStrings": [], "placement": [2], "disabled": false, "markdownOnly": false,
                 "promptOnly": true, "runOnEdit": true, "substituteRegex": 0, "minDepth": null, "maxDepth": 4},
                {"scriptName": "Shout", "findRegex": "hello", "replaceString": "<{{match}}>",
                 "placement": [1, 2], "promptOnly": true},
                {"scriptName": "Pretty", "findRegex": "/x/g", "replaceString": "y",
                 "placement": [2], "markdownOnly": true},
                {"scriptName": "Stored", "findRegex": "/x/g", "replaceString": "y", "placement": [1]}
            ]
        }
    })
}

fn import(character_id: Option<&str>) -> Imported {
    convert(&preset(), &options(character_id)).expect("converts")
}

fn parse(stack: &Value) -> PromptStack {
    let parsed = parse_stack_value(stack.clone(), &ParseOptions::new("roleplay.json"));
    let errors: Vec<_> = parsed
        .diagnostics
        .iter()
        .filter(|d| d.level == Level::Error)
        .map(|d| d.message.clone())
        .collect();
    assert!(errors.is_empty(), "stack has errors: {errors:?}");
    parsed.stack
}

fn ids(list: &[forge_core::import::sillytavern::ReportEntry]) -> Vec<&str> {
    list.iter().map(|e| e.identifier.as_str()).collect()
}

#[test]
fn several_character_ids_need_a_choice() {
    let err = convert(&preset(), &options(None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Multiple character configs found: [100000, 100001]. Choose a character_id and retry."
    );
    let err = convert(&preset(), &options(Some("7"))).unwrap_err();
    assert!(matches!(err, ImportError::UnknownCharacter { .. }));
    // A documented decision: the original only said "Multiple character configs found" here.
    assert_eq!(
        err.to_string(),
        "No character config with character_id 7. Available: [100000, 100001]."
    );

    let small = import(Some("100000"));
    let items = small.stack["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(small.report.character_id.as_deref(), Some("100000"));
    assert_eq!(small.stack["import"]["characterId"], "100000");
    parse(&small.stack);
}

#[test]
fn a_single_config_is_used_without_asking() {
    let mut value = preset();
    value["prompt_order"].as_array_mut().unwrap().remove(0);
    let imported = convert(&value, &options(None)).unwrap();
    assert_eq!(imported.report.character_id.as_deref(), Some("100001"));
}

#[test]
fn without_prompt_order_the_prompts_array_order_is_used() {
    let value = json!({"prompts": [
        {"identifier": "b", "role": "user", "content": "second?"},
        {"identifier": "a", "role": "system", "content": "first", "enabled": false},
        {"identifier": "chatHistory", "marker": true}
    ]});
    let imported = convert(&value, &options(None)).unwrap();
    let items = imported.stack["items"].as_array().unwrap();
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["b", "a", "chatHistory"]);
    assert_eq!(items[1]["enabled"], false);
    assert_eq!(imported.report.character_id, None);
    parse(&imported.stack);
}

#[test]
fn full_conversion_items_and_report() {
    let imported = import(Some("100001"));
    let stack = &imported.stack;
    // Top-level keys in the stack key order.
    let keys: Vec<&str> = stack
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected: Vec<&str> = STACK_KEY_ORDER
        .iter()
        .copied()
        .filter(|k| stack.get(*k).is_some())
        .collect();
    expected.dedup();
    assert_eq!(keys, expected);
    assert_eq!(stack["schemaVersion"], 2);
    assert_eq!(stack["mode"], "replace");
    assert_eq!(stack["autoActivate"], false);
    assert_eq!(
        stack["parameters"],
        json!({"char": "Assistant", "user": "User"})
    );
    assert_eq!(stack["import"]["source"], "sillytavern");
    assert_eq!(stack["import"]["sourceFile"], "Roleplay.json");
    assert_eq!(stack["import"]["convertedAt"], "2026-01-02T03:04:05.000Z");

    let items = stack["items"].as_array().unwrap();
    let layout: Vec<(String, String)> = items
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap().to_string(),
                i["role"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    let expect = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        layout,
        expect(&[
            ("main", "system"),
            ("off", "system"),
            ("example-user", "user"),
            ("example-reply", "assistant"),
            ("chatHistory", "-"),
            ("depth-note", "custom"),
            ("last-nudge", "user"),
            ("jailbreak", "custom"),
        ])
    );
    assert_eq!(
        items[0]["content"],
        "Write {{ parameters.char }}'s next reply to {{ parameters.user }}.\n\nStay in character."
    );
    assert_eq!(items[0]["source"]["previousId"], "main");
    assert_eq!(items[0]["source"]["previousName"], "Main Prompt");
    assert_eq!(items[0]["source"]["orderIndex"], 0);
    assert_eq!(items[1]["enabled"], false);
    assert_eq!(items[3]["content"], "Greetings, traveller.");
    assert_eq!(items[4]["kind"], "slot");
    assert_eq!(items[4]["slot"], "chat-history");
    assert_eq!(
        items[4]["options"],
        json!({"includeLastUserMessage": false})
    );
    assert_eq!(items[5]["source"]["injectionDepth"], 2);
    assert_eq!(
        items[7]["content"],
        "Reply to: {{ runtime.lastUserMessage }} [SillyTavern macro: random]"
    );
    // Item keys in the item key order.
    let item_keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        item_keys,
        ["kind", "id", "name", "role", "source", "content"]
    );

    let report = &imported.report;
    assert_eq!(
        ids(&report.converted),
        [
            "main",
            "off",
            "example-user",
            "example-reply",
            "chatHistory",
            "last-nudge",
            "regex:Strip OOC",
            "regex:Shout"
        ]
    );
    assert_eq!(ids(&report.approximated), ["depth-note", "jailbreak"]);
    assert_eq!(
        ids(&report.dropped),
        [
            "nsfw",
            "worldInfoBefore",
            "charDescription",
            "charPersonality",
            "scenario",
            "personaDescription",
            "worldInfoAfter",
            "dialogueExamples",
            "ghost",
            "regex:Pretty",
            "regex:Stored"
        ]
    );
    assert!(report.dropped[0].reason.contains("empty content"));
    assert!(report.dropped[1].reason.contains("world info"));
    assert!(report.dropped[2].reason.contains("character card"));
    assert!(report.dropped[8]
        .reason
        .contains("missing from the prompts array"));
    assert!(report.approximated[1].reason.contains("random"));
    assert!(report.approximated[0].reason.contains("depth 2"));
    // 3 sampler settings + 1 unknown prompt field.
    assert_eq!(report.ignored_fields, 4);
    let text = report.to_text();
    assert!(text.contains("Dropped (11):"));
    assert!(text.contains("Ignored fields"));
    assert_eq!(report.to_json()["dropped"].as_array().unwrap().len(), 11);

    let parsed = parse(stack);
    assert_eq!(parsed.items.len(), 8);
}

#[test]
fn regex_scripts_become_history_rules() {
    let imported = import(Some("100001"));
    let rules = imported.stack["regex"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0]["id"], "st-strip-ooc");
    assert_eq!(rules[0]["stage"], "history");
    assert_eq!(rules[0]["pattern"], "\\(OOC:[^)]*\\)");
    assert_eq!(rules[0]["flags"], "g");
    assert_eq!(rules[0]["roles"], json!(["assistant"]));
    assert_eq!(rules[0]["maxDepth"], 4);
    assert!(rules[0].get("minDepth").is_none());
    assert_eq!(rules[1]["replace"], "<$&>");
    assert_eq!(rules[1]["flags"], "");
    assert_eq!(rules[1]["roles"], json!(["user", "assistant"]));
}

#[test]
fn macros_that_forge_v1_cannot_express_become_placeholders() {
    let value = json!({"prompts": [
        {"identifier": "x", "role": "system",
         "content": "A {{getvar::mood}} B {{ROLL:1d6}} C {% raw %} D {{ unclosed"},
    ]});
    let imported = convert(&value, &options(None)).unwrap();
    let content = imported.stack["items"][0]["content"].as_str().unwrap();
    assert_eq!(
        content,
        "A [SillyTavern macro: getvar] B [SillyTavern macro: ROLL] C { % raw %} D { { unclosed"
    );
    assert!(imported.stack.get("parameters").is_none());
    let reason = &imported.report.approximated[0].reason;
    assert!(reason.contains("getvar, ROLL"), "{reason}");
    assert!(reason.contains("stray"), "{reason}");
    parse(&imported.stack);
}

#[test]
fn roles_and_odd_prompts() {
    let value = json!({"prompts": [
        {"identifier": "no-role", "content": "defaults to system"},
        {"identifier": "tool", "role": "tool", "content": "nope"},
        {"identifier": "blank", "role": "user", "content": "  \n\n "},
        {"identifier": "dup", "role": "user", "content": "one"},
        {"identifier": "dup", "role": "user", "content": "two"},
        {"identifier": "custom marker", "marker": true},
        {"name": "anonymous", "content": "x"},
        "not an object",
        {"identifier": "Über prompt!", "role": "assistant", "content": "ok"}
    ]});
    let imported = convert(&value, &options(None)).unwrap();
    let items = imported.stack["items"].as_array().unwrap();
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["no-role", "dup", "ber-prompt"]);
    assert_eq!(items[0]["role"], "system");
    let dropped = ids_of(&imported.report.dropped);
    assert_eq!(
        dropped,
        [
            "dup",
            "prompts[6]",
            "prompts[7]",
            "tool",
            "blank",
            "custom marker"
        ]
    );
    parse(&imported.stack);
}

fn ids_of(list: &[forge_core::import::sillytavern::ReportEntry]) -> Vec<String> {
    list.iter().map(|e| e.identifier.clone()).collect()
}

#[test]
fn malformed_inputs_are_errors() {
    let opts = options(None);
    assert_eq!(
        convert(&json!([1, 2]), &opts).unwrap_err().to_string(),
        "Preset root must be a JSON object."
    );
    assert_eq!(
        convert(&json!({"name": "x"}), &opts)
            .unwrap_err()
            .to_string(),
        "Preset has no prompts array."
    );
    assert_eq!(
        convert(&json!({"prompts": {}}), &opts).unwrap_err(),
        ImportError::NoPrompts
    );
    let bad_id = ImportOptions {
        id: "../x".into(),
        ..ImportOptions::default()
    };
    assert!(matches!(
        convert(&json!({"prompts": [{"identifier": "a"}]}), &bad_id).unwrap_err(),
        ImportError::InvalidId(_)
    ));
    assert!(is_preset(&preset()));
    assert!(!is_preset(
        &json!({"type": "pi-forge.prompt-stack", "items": []})
    ));
    assert_eq!(slugify("My Preset (v2)", "x"), "My-Preset--v2");
    assert_eq!(slugify("!!!", "fallback"), "fallback");
}

#[test]
fn import_then_compile_gives_sillytavern_order() {
    let imported = import(Some("100001"));
    let stack = parse(&imported.stack);
    let mut runtime = RuntimeSnapshot::default_snapshot(
        "/tmp/project",
        Clock::from_local((2026, 1, 2), (3, 4, 5), 0),
    );
    let user =
        |t: &str| json!({"role": "user", "content": [{"type": "text", "text": t}], "timestamp": 1});
    let assistant = |t: &str| {
        json!({"role": "assistant", "content": [{"type": "text", "text": t}],
               "provider": "p", "model": "m", "timestamp": 2})
    };
    runtime.messages = vec![
        user("Hi (OOC: ignore)"),
        assistant("Hello! (OOC: a note)"),
        user("What is the plan?"),
    ];
    let macros = MacroRegistry::new();
    let compiled = compile(&CompileInput::new(Some(&stack), &runtime, &macros));
    let errors: Vec<_> = compiled
        .diagnostics
        .iter()
        .filter(|d| d.level == Level::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    // SillyTavern sends the system prompts first (here: the main prompt only, the disabled one is
    // left out), then the example exchange, the chat, the in-chat injections, and the
    // post-history instructions last.
    assert_eq!(
        compiled.system_prompt,
        "Write Assistant's next reply to User.\n\nStay in character."
    );
    let layout: Vec<(String, String)> = compiled
        .messages
        .iter()
        .map(|m| {
            let role = m.message["role"].as_str().unwrap_or("").to_string();
            let text = content_text(&m.message["content"], OtherParts::Labels);
            (role, text)
        })
        .collect();
    let expect: Vec<(String, String)> = [
        ("user", "Hello there."),
        ("assistant", "Greetings, traveller."),
        // The OOC rule only edits assistant messages (placement 2).
        ("user", "Hi (OOC: ignore)"),
        ("assistant", "Hello! "),
        ("custom", "Remember the weather."),
        ("user", "(Answer briefly.)"),
        (
            "custom",
            "Reply to: What is the plan? [SillyTavern macro: random]",
        ),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(layout, expect);
    // The last user message is quoted by the post-history prompt, so history leaves it out.
    assert!(matches!(
        compiled.messages[2].source,
        MessageSource::ChatHistory {
            history_count: 2,
            ..
        }
    ));
}

// ------------------------------------------------------------------------------------------------
// Parity with the 0.4-era importer (issue 15)

#[test]
fn default_ids_and_names_follow_the_original_slug() {
    assert_eq!(default_stack_id("Space Opera.json"), "space-opera");
    assert_eq!(
        default_stack_id("story-teller (v3)!.json"),
        "story-teller-v3"
    );
    assert_eq!(default_stack_id("/presets/My.Preset.JSON"), "my-preset");
    assert_eq!(default_stack_id("__Über__.json"), "ber");
    assert_eq!(default_stack_id("!!!.json"), "imported");
    assert_eq!(lower_slug("st-Trim Junk", "st-regex"), "st-trim-junk");
    assert_eq!(file_stem("dir/Space Opera.json"), "Space Opera");

    // No preset_name / name: the file name as written, spaces kept, not the slug.
    let value = json!({"prompts": [{"identifier": "a", "content": "x"}]});
    let opts = ImportOptions {
        id: default_stack_id("Space Opera.json"),
        source_file: Some("Space Opera.json".into()),
        ..ImportOptions::default()
    };
    let imported = convert(&value, &opts).unwrap();
    assert_eq!(imported.stack["id"], "space-opera");
    assert_eq!(imported.stack["name"], "Space Opera");
    // preset_name comes before name.
    let named = json!({"name": "Second", "preset_name": "First",
                       "prompts": [{"identifier": "a", "content": "x"}]});
    assert_eq!(convert(&named, &opts).unwrap().stack["name"], "First");
}

#[test]
fn an_empty_prompts_array_is_an_error() {
    let err = convert(&json!({"prompts": []}), &options(None)).unwrap_err();
    assert_eq!(err, ImportError::NoPrompts);
    assert_eq!(err.to_string(), "Preset has no prompts array.");
}

#[test]
fn a_duplicated_identifier_keeps_the_last_definition_and_reports_the_first() {
    let value = json!({
        "prompts": [
            {"identifier": "main", "name": "Old main", "role": "system", "content": "old"},
            {"identifier": "chatHistory", "marker": true},
            {"identifier": "main", "name": "New main", "role": "system", "content": "new"}
        ],
        "prompt_order": [{"character_id": 1, "order": [
            {"identifier": "main", "enabled": true},
            {"identifier": "chatHistory", "enabled": true}
        ]}]
    });
    let imported = convert(&value, &options(None)).unwrap();
    let items = imported.stack["items"].as_array().unwrap();
    assert_eq!(items[0]["content"], "new");
    assert_eq!(items[0]["name"], "New main");
    assert_eq!(imported.report.dropped.len(), 1);
    let dropped = &imported.report.dropped[0];
    assert_eq!(dropped.identifier, "main");
    assert_eq!(dropped.name.as_deref(), Some("Old main"));
    assert_eq!(
        dropped.reason,
        "duplicate identifier: prompts[2] defines it again and replaces this definition"
    );
}

fn rule_of(script: Value) -> (Option<Value>, Vec<String>) {
    let value = json!({
        "prompts": [{"identifier": "a", "content": "x"}],
        "extensions": {"regex_scripts": [script]}
    });
    let imported = convert(&value, &options(None)).unwrap();
    let rule = imported.stack["regex"]["rules"].get(0).cloned();
    let dropped = imported
        .report
        .dropped
        .iter()
        .map(|e| format!("{}: {}", e.identifier, e.reason))
        .collect();
    (rule, dropped)
}

#[test]
fn regex_script_fields_convert_like_the_original() {
    let (rule, dropped) = rule_of(json!({
        "script_name": "Trim Junk", "findRegex": " /(a)(b)\\/c/gi ",
        "replaceString": "[{{ MATCH }}|$0|$01|$1|$$0]",
        "trimStrings": "junk\r\n\nmore\n", "placement": [true, "2", 9],
        "minDepth": "1", "maxDepth": "3", "promptOnly": true
    }));
    assert!(dropped.is_empty(), "{dropped:?}");
    let rule = rule.unwrap();
    assert_eq!(rule["id"], "st-trim-junk");
    assert_eq!(rule["name"], "Trim Junk");
    assert_eq!(rule["pattern"], "(a)(b)\\/c");
    assert_eq!(rule["flags"], "gi");
    assert_eq!(rule["replace"], "[$&|$&|$01|$1|$$&]");
    assert_eq!(rule["trimStrings"], json!(["junk", "more"]));
    // true is 1 (user input), "2" is AI output; 9 maps to nothing.
    assert_eq!(rule["roles"], json!(["user", "assistant"]));
    assert_eq!(rule["minDepth"], 1);
    assert_eq!(rule["maxDepth"], 3);
    assert_eq!(rule["source"]["sillytavern"]["placement"], json!([1, 2, 9]));

    // A placement of only `true` is user input only.
    let (rule, _) = rule_of(json!({
        "scriptName": "Only user", "findRegex": "x", "placement": [true], "promptOnly": true,
        "trimStrings": ["", "keep"], "minDepth": 0, "maxDepth": false
    }));
    let rule = rule.unwrap();
    assert_eq!(rule["roles"], json!(["user"]));
    assert_eq!(rule["trimStrings"], json!(["keep"]));
    assert_eq!(rule["minDepth"], 0);
    assert_eq!(rule["maxDepth"], 0);

    // The name falls back to `name`, then to regex-<n>.
    let (rule, _) = rule_of(json!({"name": "By name", "findRegex": "x", "promptOnly": true}));
    assert_eq!(rule.unwrap()["id"], "st-by-name");
    let (rule, _) = rule_of(json!({"scriptName": "  ", "findRegex": "x", "promptOnly": true}));
    assert_eq!(rule.unwrap()["id"], "st-regex-1");
}

#[test]
fn an_unclosed_regex_literal_is_dropped_with_a_reason() {
    let (rule, dropped) =
        rule_of(json!({"scriptName": "Half", "findRegex": "/abc", "promptOnly": true}));
    assert_eq!(rule, None);
    assert_eq!(
        dropped,
        ["regex:Half: find pattern starts a /…/ literal that is never closed"]
    );
    // An escaped slash does not close it either.
    let (rule, dropped) =
        rule_of(json!({"scriptName": "Esc", "findRegex": "/abc\\/", "promptOnly": true}));
    assert_eq!(rule, None);
    assert_eq!(
        dropped,
        ["regex:Esc: find pattern starts a /…/ literal that is never closed"]
    );
    let (_, dropped) =
        rule_of(json!({"scriptName": "Flags", "findRegex": "/a/gg", "promptOnly": true}));
    assert_eq!(
        dropped,
        ["regex:Flags: find pattern has flags outside gimsu or repeats one"]
    );
}

#[test]
fn three_or_more_newlines_collapse_to_two() {
    let value = json!({"prompts": [
        {"identifier": "a", "content": "\n\none\n\n\n\n\ntwo\n\n\nthree\n\nfour\n{{// gone}}\n\nfive\r\n\r\n\r\nsix\n\n\n"}
    ]});
    let imported = convert(&value, &options(None)).unwrap();
    assert_eq!(
        imported.stack["items"][0]["content"],
        "one\n\ntwo\n\nthree\n\nfour\n\nfive\r\n\r\n\r\nsix"
    );
}
