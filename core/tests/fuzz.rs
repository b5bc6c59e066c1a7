//! Robustness targets: arbitrary input to the template parser, the stack validator (regex rules
//! included) and the compiler must never panic.
//!
//! In a normal `cargo test` each target runs a few hundred generated cases. For a long run, give
//! every target a time budget instead:
//!
//! ```sh
//! FORGE_FUZZ_SECONDS=300 cargo test --release -p forge-core --test fuzz -- --test-threads 1 --nocapture
//! ```
//!
//! Each target then generates cases until its budget is spent and prints how many it ran. A
//! failing case is printed before the panic propagates. See docs/testing.md.

use forge_core::compile::{compile, preview, preview_text, CompileInput, MacroRegistry};
use forge_core::runtime::{Clock, ContextFile, ModelInfo, RuntimeSnapshot, SkillInfo};
use forge_core::stack::{parse_stack_value, ParseOptions};
use forge_core::template;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Map, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// Runs `check` on generated values: for `FORGE_FUZZ_SECONDS` seconds when set, else `cases`.
fn fuzz<S>(name: &str, strategy: S, cases: usize, check: impl Fn(&S::Value))
where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let budget = std::env::var("FORGE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let start = Instant::now();
    let mut runner = TestRunner::deterministic();
    let mut ran = 0usize;
    loop {
        match budget {
            Some(b) if start.elapsed() >= b => break,
            None if ran >= cases => break,
            _ => {}
        }
        let value = strategy
            .new_tree(&mut runner)
            .expect("strategy produces values")
            .current();
        if catch_unwind(AssertUnwindSafe(|| check(&value))).is_err() {
            panic!("{name}: panicked on input {value:#?}");
        }
        ran += 1;
    }
    if budget.is_some() {
        println!(
            "{name}: {ran} cases in {:.0}s without a panic",
            start.elapsed().as_secs_f64()
        );
    }
}

fn template_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("{{".to_string()),
        Just("}}".to_string()),
        Just("{%".to_string()),
        Just("%}".to_string()),
        Just(" if ".to_string()),
        Just(" else ".to_string()),
        Just(" endif ".to_string()),
        Just("|".to_string()),
        Just(" upper ".to_string()),
        Just(" json ".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just(" == ".to_string()),
        Just(" != ".to_string()),
        Just("runtime.".to_string()),
        Just("parameters.".to_string()),
        Just("extensions.".to_string()),
        Just("tool.read".to_string()),
        Just("name".to_string()),
        "[a-z._ 😀-]{0,6}",
    ];
    vec(pieces, 0..24).prop_map(|parts| parts.concat())
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-5i64..200).prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        "[a-z *{}|-]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec(("[a-zA-Z]{1,12}", inner), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = Value> {
    proptest::sample::select(options).prop_map(Value::from)
}

fn slot_name() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        4 => proptest::sample::select(forge_core::stack::BUILTIN_SLOTS),
        1 => Just("unknown-slot"),
    ]
}

fn slot_options() -> impl Strategy<Value = Value> {
    let key = pick(&[
        "format",
        "onlyWithSnippets",
        "heading",
        "includePiDefaultGuidelines",
        "piStyle",
        "requireReadTool",
        "includeTime",
        "includeLastUserMessage",
        "stripAssistantThinking",
        "includeSummaries",
        "roles",
        "toolMode",
        "maxMessages",
        "maxChars",
    ]);
    let value = prop_oneof![
        pick(&["xml", "plain", "json", "keep", "drop", "user", ""]),
        any::<bool>().prop_map(Value::from),
        (-2i64..6).prop_map(Value::from),
        vec(pick(&["user", "assistant", "toolResult", "custom"]), 0..3).prop_map(Value::Array),
        arb_json(),
    ];
    vec((key, value), 0..4).prop_map(|entries| {
        Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.as_str().unwrap_or("x").to_string(), v))
                .collect(),
        )
    })
}

fn item() -> impl Strategy<Value = Value> {
    (
        pick(&["block", "slot"]),
        "[a-c]{1,2}",
        option::of(pick(&["system", "user", "assistant", "custom"])),
        slot_name(),
        template_text(),
        slot_options(),
        any::<bool>(),
    )
        .prop_map(|(kind, id, role, slot, content, options, enabled)| {
            let mut m = Map::new();
            m.insert("kind".into(), kind.clone());
            m.insert("id".into(), id.into());
            if let Some(role) = role {
                m.insert("role".into(), role);
            }
            if !enabled {
                m.insert("enabled".into(), false.into());
            }
            if kind == "slot" {
                m.insert("slot".into(), slot.into());
                m.insert("options".into(), options);
            } else {
                m.insert("content".into(), content.into());
            }
            Value::Object(m)
        })
}

fn rule() -> impl Strategy<Value = Value> {
    (
        "[r-t]{1}",
        pick(&["history", "compiled", "other"]),
        pick(&["outgoing", "finalize", "display"]),
        "[a-c()\\[\\]{}*+?|^$\\\\.<>=!:0-9sdw-]{0,10}",
        pick(&["", "g", "gi", "gmsu", "gg", "x", "u"]),
        "[a-c$&`'<>0-9]{0,6}",
        option::of(vec(pick(&["user", "assistant", "toolResult"]), 0..3)),
        option::of(vec(pick(&["system", "messages", "payload"]), 0..3)),
        option::of(vec("[a-c]{0,2}", 0..3)),
        (
            option::of(-1i64..4),
            option::of(-1i64..8),
            option::of(0i64..3),
            option::of(0i64..3),
        ),
    )
        .prop_map(
            |(id, stage, effect, pattern, flags, replace, roles, targets, trims, numbers)| {
                let (max_messages, max_chars, min_depth, max_depth) = numbers;
                let mut m = Map::new();
                m.insert("id".into(), id.into());
                m.insert("stage".into(), stage);
                m.insert("effect".into(), effect);
                m.insert("pattern".into(), pattern.into());
                m.insert("flags".into(), flags);
                m.insert("replace".into(), replace.into());
                for (k, v) in [
                    ("roles", roles.map(Value::Array)),
                    ("targets", targets.map(Value::Array)),
                    ("trimStrings", trims.map(|t| json!(t))),
                    ("maxMessages", max_messages.map(Value::from)),
                    ("maxChars", max_chars.map(Value::from)),
                    ("minDepth", min_depth.map(Value::from)),
                    ("maxDepth", max_depth.map(Value::from)),
                ] {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                Value::Object(m)
            },
        )
}

fn message() -> impl Strategy<Value = Value> {
    let part = prop_oneof![
        "[a-c (OOC:)😀]{0,12}".prop_map(|t| json!({"type": "text", "text": t})),
        "[a-c]{0,6}".prop_map(|t| json!({"type": "thinking", "thinking": t})),
        "c[0-2]"
            .prop_map(|id| json!({"type": "toolCall", "id": id, "name": "read", "arguments": {}})),
        Just(json!({"type": "image", "data": "AA=="})),
    ];
    prop_oneof![
        vec(part.clone(), 0..4).prop_map(|c| json!({"role": "user", "content": c})),
        "[a-c ]{0,8}".prop_map(|t| json!({"role": "user", "content": t})),
        vec(part, 0..4).prop_map(|c| json!({"role": "assistant", "content": c})),
        "c[0-2]".prop_map(|id| json!({"role": "toolResult", "toolCallId": id, "content": [{"type": "text", "text": "ok"}]})),
        Just(json!({"role": "compactionSummary", "summary": "earlier"})),
        Just(json!({"role": "bashExecution", "command": "ls", "output": "a"})),
        arb_json(),
    ]
}

fn stack() -> impl Strategy<Value = Value> {
    (
        pick(&["replace", "append", "prepend"]),
        vec(item(), 0..8),
        vec(rule(), 0..4),
        option::of(vec(pick(&["read", "bash", "b*", "*", "gr?p"]), 0..3)),
        any::<bool>(),
        arb_json(),
    )
        .prop_map(|(mode, items, rules, allow, v2, parameters)| {
            let mut stack = json!({
                "schemaVersion": if v2 { 2 } else { 1 },
                "id": "fuzz",
                "mode": mode,
                "items": items,
                "regex": {"schemaVersion": 1, "rules": rules},
                "parameters": {"name": parameters},
                "variables": {"name": "Ada"},
                "defaults": {"syntheticMessagesVisible": v2},
            });
            if let Some(allow) = allow {
                stack["tools"] = json!({"allow": allow});
            }
            stack
        })
}

fn runtime(messages: Vec<Value>) -> RuntimeSnapshot {
    let mut r = RuntimeSnapshot::default_snapshot(
        "C:\\work\\x",
        Clock::from_local((2026, 6, 13), (9, 8, 7), 60),
    );
    r.skills = vec![SkillInfo {
        name: "review".into(),
        description: "Review\ncode".into(),
        file_path: "/s/SKILL.md".into(),
        disable_model_invocation: false,
    }];
    r.context_files = vec![ContextFile {
        path: "AGENTS.md".into(),
        content: "rules <&>".into(),
    }];
    r.model = Some(ModelInfo {
        provider: "p".into(),
        id: "m".into(),
        api: None,
    });
    r.append_system_prompt = Some(" extra ".into());
    r.messages = messages;
    r
}

#[test]
fn template_parser_and_renderer_never_panic() {
    fuzz("template", template_text(), 500, |text| {
        let scope = template::Scope::new(
            json!({"cwd": "/w", "tool": {"read": true}, "selectedTools": ["read"], "selectedToolsText": "read"}),
            json!({"name": "Ada", "obj": {"tone": "x"}}),
        );
        let registry = template::MacroRegistry::new();
        let mut ctx = template::MacroContext::new(&registry);
        if let Ok(t) = template::parse(text) {
            let _ = template::analyze(&t);
            let _ = template::dependencies(&t);
        }
        let _ = template::render_text(text, &scope, &mut ctx);
    });
}

#[test]
fn stack_validation_never_panics_on_arbitrary_rules_and_items() {
    fuzz("validate", stack(), 300, |value| {
        let parsed = parse_stack_value(value.clone(), &ParseOptions::new("fuzz.json"));
        let _ = forge_core::stack::serialize_stack(&parsed.stack);
    });
}

#[test]
fn compiler_never_panics_on_arbitrary_stacks_rules_and_conversations() {
    fuzz(
        "compile",
        (stack(), vec(message(), 0..10)),
        300,
        |(value, messages)| {
            let parsed = parse_stack_value(value.clone(), &ParseOptions::new("fuzz.json"));
            let runtime = runtime(messages.clone());
            let macros = MacroRegistry::new();
            let input = CompileInput::new(Some(&parsed.stack), &runtime, &macros);
            let compiled = compile(&input);
            let preview = preview(&compiled, "fuzz", &parsed.diagnostics, &runtime.clock);
            let _ = preview_text(&preview);
        },
    );
}
