//! Prompt stack codec: prompt-stacks spec §7 vectors 11–21, §2 rules, tools.initial (B9),
//! capability bindings placement (B4), fingerprint vector C5 #5, and round-trip properties.

use forge_core::diag::{Diagnostic, Level};
use forge_core::stack::{
    fault_stack, parse_stack_bytes, parse_stack_str, parse_stack_value, pattern_matches,
    serialize_stack, validate_stack, ItemBody, ItemKind, ParseOptions, ParsedStack, Policy,
    PromptStack, Role, SchemaVersion, StackItem, StackMode, BUILTIN_SLOTS,
};
use serde_json::{json, Value};

// ------------------------------------------------------------------------------------------------
// helpers

fn parse_in(text: &str, file: &str) -> ParsedStack {
    parse_stack_str(text, &ParseOptions::new(file))
}

fn parse(value: Value) -> ParsedStack {
    parse_stack_value(value, &ParseOptions::new("s.json"))
}

type D = (Level, String, Option<String>);

fn diags(parsed: &ParsedStack) -> Vec<D> {
    parsed
        .diagnostics
        .iter()
        .map(|d| (d.level, d.message.clone(), d.item_id.clone()))
        .collect()
}

fn e(message: &str) -> D {
    (Level::Error, message.to_string(), None)
}
fn w(message: &str) -> D {
    (Level::Warning, message.to_string(), None)
}
fn i(message: &str) -> D {
    (Level::Info, message.to_string(), None)
}
fn at(d: D, item: &str) -> D {
    (d.0, d.1, Some(item.to_string()))
}

const NO_HISTORY: &str =
    "No enabled chat-history slot found; Pi chat context will be appended at the end.";

fn history() -> Value {
    json!({"kind": "slot", "id": "history", "slot": "chat-history"})
}

fn compact(stack: &PromptStack) -> String {
    forge_core::json::to_compact(&stack.to_value())
}

// ------------------------------------------------------------------------------------------------
// §7 Validation vectors 11–21

#[test]
fn v11_broken_json_gives_the_fault_stack() {
    let parsed = parse_in("{not json", "broken.json");
    assert_eq!(parsed.stack.id(), "broken");
    assert_eq!(parsed.stack.name(), Some("broken.json"));
    assert!(parsed.raw.is_none());
    assert!(!parsed.usable());
    assert_eq!(
        diags(&parsed),
        vec![e(
            "Failed to parse JSON: key must be a string at line 1 column 2"
        )]
    );
    assert_eq!(
        serialize_stack(&parsed.stack),
        "{\n  \"schemaVersion\": 1,\n  \"type\": \"pi-forge.prompt-stack\",\n  \"id\": \"broken\",\n  \"name\": \"broken.json\",\n  \"items\": []\n}\n"
    );
}

#[test]
fn numbers_beyond_a_double_are_reported_per_field_not_per_file() {
    // The original's JSON.parse reads 1e400 as Infinity; the file still parses and only the
    // fields holding one are reported.
    let text = r#"{
      "schemaVersion": 2, "id": "big",
      "parameters": {"ok": 1, "huge": 1e400, "nested": {"deep": [-1e999]}, "fine": "x"},
      "items": [
        {"kind": "block", "id": 1e400, "role": "system", "content": "Hi {{ parameters.ok }}"},
        {"kind": "slot", "id": "h", "slot": "chat-history", "options": {"maxMessages": 1e400}}
      ]
    }"#;
    let parsed = parse_in(text, "big.json");
    assert_eq!(
        diags(&parsed),
        vec![
            e("Stack parameter huge must be a JSON-compatible value."),
            e("Stack parameter nested must be a JSON-compatible value."),
            at(e("Item 1 id must be a non-empty string."), "item-1"),
            at(
                e("chat-history option maxMessages must be a positive integer."),
                "h"
            ),
        ]
    );
    assert_eq!(parsed.stack.id, "big");
    assert_eq!(parsed.stack.items[0].id, "item-1");
    assert_eq!(
        Value::Object(parsed.stack.parameters.clone().unwrap()),
        json!({"ok": 1, "fine": "x"})
    );
    // The raw value shows the numbers the way JSON.stringify writes Infinity.
    assert_eq!(
        parsed.raw.as_ref().unwrap()["parameters"]["huge"],
        Value::Null
    );

    // Schema 1: the parameters block is ignored with its warning, whatever it holds.
    let v1 = parse_in(
        r#"{"id": "old", "parameters": {"n": 1e400}, "items": [{"kind": "slot", "id": "h", "slot": "chat-history"}]}"#,
        "old.json",
    );
    assert_eq!(
        diags(&v1),
        vec![w(
            "schemaVersion 1 stacks use variables; parameters is ignored."
        )]
    );
    assert!(v1.usable());
}

#[test]
fn v12_empty_object() {
    let parsed = parse_in("{}", "x.json");
    assert_eq!(parsed.stack.id(), "x");
    assert_eq!(
        diags(&parsed),
        vec![
            e("Stack id must be a non-empty string."),
            e("Prompt stack must contain an items array."),
            w(NO_HISTORY),
        ]
    );
    assert_eq!(
        compact(&parsed.stack),
        r#"{"schemaVersion":1,"id":"x","items":[]}"#
    );
}

#[test]
fn v13_invalid_id_falls_back_to_the_file_name() {
    let parsed = parse_in(r#"{"id":"proj:x","items":[]}"#, "x.json");
    assert_eq!(parsed.stack.id(), "x");
    assert_eq!(
        diags(&parsed),
        vec![
            e("Stack id proj:x must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens; falling back to x."),
            w(NO_HISTORY),
        ]
    );
}

#[test]
fn v14_unsupported_schema_version_with_parameters() {
    let parsed =
        parse(json!({"schemaVersion": 3, "id": "s", "parameters": {"a": 1}, "items": [history()]}));
    assert_eq!(
        diags(&parsed),
        vec![
            w("schemaVersion 1 stacks use variables; parameters is ignored."),
            w("Unsupported schemaVersion; assuming 1."),
        ]
    );
    assert_eq!(parsed.stack.schema_version, SchemaVersion::V1);
    assert_eq!(parsed.stack.parameters, None);
    assert!(parsed.usable());
}

#[test]
fn v14_v2_stack_with_variables() {
    let parsed = parse(json!({
        "schemaVersion": 2, "id": "s", "variables": {"a": "x"}, "parameters": {"b": "y"},
        "items": [history()]
    }));
    assert_eq!(
        diags(&parsed),
        vec![w(
            "schemaVersion 2 stacks use parameters; variables is ignored."
        )]
    );
    assert_eq!(parsed.stack.variables, None);
    assert_eq!(
        compact(&parsed.stack),
        r#"{"schemaVersion":2,"id":"s","parameters":{"b":"y"},"items":[{"kind":"slot","id":"history","slot":"chat-history"}]}"#
    );
}

#[test]
fn v15_bad_item_fields_make_a_block_and_an_unusable_stack() {
    let parsed = parse(json!({"id": "s", "items": [{
        "kind": "sloot", "id": "bad", "enabled": "false", "role": "sysstem",
        "tags": ["valid", 1], "source": "inline"
    }]}));
    assert_eq!(
        diags(&parsed),
        vec![
            at(e("Item 1 kind must be \"block\" or \"slot\"."), "bad"),
            at(e("Item enabled must be a boolean when provided."), "bad"),
            at(e("Invalid role: sysstem"), "bad"),
            at(
                e("Item tags must be an array of strings when provided."),
                "bad"
            ),
            at(e("Item source must be an object when provided."), "bad"),
            at(w("Enabled block has no role and will be ignored."), "bad"),
            w(NO_HISTORY),
        ]
    );
    assert!(!parsed.usable());
    let item = &parsed.stack.items()[0];
    assert_eq!(item.kind(), ItemKind::Block);
    assert_eq!(
        forge_core::json::to_compact(&item.to_value()),
        r#"{"kind":"block","id":"bad","tags":["valid"],"content":""}"#
    );
}

#[test]
fn v16_bad_booleans_in_defaults_and_context_report_once() {
    let parsed = parse(json!({
        "id": "s",
        "defaults": {"syntheticMessagesVisible": "yes", "unresolvedMacroPolicy": "loud"},
        "context": {"allowDuplicateChatHistory": 1},
        "items": [history()]
    }));
    assert_eq!(
        diags(&parsed),
        vec![
            e("defaults.syntheticMessagesVisible must be a boolean when provided."),
            e("defaults.unresolvedMacroPolicy must be \"warn\", \"keep\", or \"error\" when provided."),
            e("context.allowDuplicateChatHistory must be a boolean when provided."),
        ]
    );
    // Passthrough: the bad members stay.
    assert_eq!(
        parsed.stack.to_value()["defaults"],
        json!({"syntheticMessagesVisible": "yes", "unresolvedMacroPolicy": "loud"})
    );
}

#[test]
fn v17_item_objects_ids_and_duplicates() {
    let parsed = parse(json!({"id": "s", "items": [
        null,
        {"kind": "block", "id": " sp ", "content": "x"},
        {"kind": "block", "content": 5, "role": "user"},
        {"kind": "block", "id": "sp", "role": "user", "content": "y"}
    ]}));
    assert_eq!(
        diags(&parsed),
        vec![
            at(e("Item 3 id must be a non-empty string."), "item-3"),
            at(e("Block content must be a string."), "item-3"),
            at(e("Item 1 must be an object."), "item-1"),
            at(w("Enabled block has no role and will be ignored."), "sp"),
            at(e("Duplicate item id: sp"), "sp"),
            w(NO_HISTORY),
        ]
    );
    assert_eq!(
        forge_core::json::to_compact(&parsed.stack.to_value()["items"]),
        r#"[{"kind":"block","id":"item-1","enabled":false,"content":""},{"kind":"block","id":"sp","content":"x"},{"kind":"block","id":"item-3","role":"user","content":""},{"kind":"block","id":"sp","role":"user","content":"y"}]"#
    );
}

#[test]
fn v18_chat_history_options() {
    let parsed = parse(json!({"id": "s", "items": [{
        "kind": "slot", "id": "h", "slot": "chat-history",
        "options": {"includeLastUserMessage": "no", "roles": "user", "toolMode": "x", "maxMessages": 0, "maxChars": 1.5}
    }]}));
    assert_eq!(
        diags(&parsed),
        vec![
            at(
                w("chat-history option includeLastUserMessage should be a boolean."),
                "h"
            ),
            at(
                e("chat-history option roles must be an array of strings."),
                "h"
            ),
            at(
                e("chat-history option toolMode must be \"keep\" or \"drop\"."),
                "h"
            ),
            at(
                e("chat-history option maxMessages must be a positive integer."),
                "h"
            ),
            at(
                e("chat-history option maxChars must be a positive integer."),
                "h"
            ),
        ]
    );
}

#[test]
fn v18_history_options_are_checked_on_disabled_slots_too() {
    let parsed = parse(json!({"id": "s", "items": [
        history(),
        {"kind": "slot", "id": "off", "slot": "chat-history", "enabled": false, "options": {"stripAssistantThinking": 1, "maxMessages": 2.0}}
    ]}));
    assert_eq!(
        diags(&parsed),
        vec![at(
            w("chat-history option stripAssistantThinking should be a boolean."),
            "off"
        )]
    );
}

#[test]
fn v19_tools_policy_with_both_lists() {
    let parsed = parse(json!({
        "id": "s", "tools": {"allow": ["read", "read"], "deny": ["bash"]}, "items": [history()]
    }));
    assert_eq!(
        diags(&parsed),
        vec![
            e("tools policy must use either allow or deny, not both."),
            w("Duplicate tools.allow pattern: read."),
        ]
    );
    assert_eq!(
        parsed.stack.to_value()["tools"],
        json!({"allow": ["read", "read"]})
    );
}

#[test]
fn v19_skills_policy_in_append_mode() {
    let parsed = parse(json!({
        "id": "s", "mode": "append",
        "skills": {"allow": "review", "deny": ["browser-*"]}, "items": [history()]
    }));
    assert_eq!(
        diags(&parsed),
        vec![
            e("skills.allow must be an array of strings when provided."),
            i("skills policy only filters model-visible skills rendered by pi-forge skills slots; it does not disable explicit skill invocation and is not a security boundary."),
            w("skills policy only filters pi-forge skills slots. Use mode \"replace\" if you need the base Pi prompt to omit filtered skills."),
        ]
    );
    assert_eq!(
        parsed.stack.to_value()["skills"],
        json!({"deny": ["browser-*"]})
    );
}

#[test]
fn v19_empty_or_star_allow_says_nothing() {
    for (policy, normalized) in [
        (json!({"allow": []}), json!({})),
        (json!({"allow": ["*"]}), json!({"allow": ["*"]})),
    ] {
        let parsed = parse(json!({
            "id": "s", "mode": "prepend", "tools": policy.clone(), "skills": policy,
            "items": [history()]
        }));
        assert_eq!(diags(&parsed), vec![]);
        assert_eq!(parsed.stack.to_value()["tools"], normalized);
        assert_eq!(parsed.stack.to_value()["skills"], normalized);
    }
}

fn regex_stack(rules: Value) -> ParsedStack {
    parse(json!({"id": "s", "regex": {"rules": rules}, "items": [history()]}))
}

#[test]
fn v20_regex_identity_flags_pattern_stage_target() {
    let parsed = regex_stack(json!([
        {"id": "r1", "stage": "history", "pattern": "a"},
        {"id": " r1 ", "stage": "history", "pattern": "b"},
        {"id": "flags", "stage": "history", "pattern": "a", "flags": "gg"},
        {"id": "paren", "stage": "history", "pattern": "("},
        {"id": "stage", "stage": "other", "pattern": "a"},
        {"id": "target", "stage": "compiled", "pattern": "a", "targets": ["payload", "system"]}
    ]));
    assert_eq!(
        diags(&parsed),
        vec![
            e("Duplicate regex rule id: r1."),
            e("Regex rule flags has duplicate regex flag: g."),
            e("Regex rule paren pattern failed to compile: Invalid regular expression: /(/: Unbalanced parenthesis"),
            e("Regex rule stage stage must be \"history\" or \"compiled\"."),
            e("Regex rule target target must be \"system\" or \"messages\": payload."),
        ]
    );
}

#[test]
fn v20_regex_rule_shapes_and_labels() {
    let parsed = regex_stack(json!([
        "not a rule",
        {"id": "  ", "stage": "compiled", "pattern": ""},
        {"id": "x", "stage": "compiled", "pattern": "a", "flags": "gy"},
        {"id": "n", "stage": "compiled", "pattern": "a", "flags": 5, "enabled": "no", "replace": 5},
        {"id": "nums", "stage": "history", "pattern": "a", "maxMessages": 0, "maxChars": "5", "minDepth": -1, "maxDepth": 1.5}
    ]));
    assert_eq!(
        diags(&parsed),
        vec![
            e("regex rule 1 must be an object."),
            e("regex rule 2 must have a non-empty id."),
            e("regex rule 2 pattern must be a non-empty string."),
            e("Regex rule x has unsupported regex flag: y."),
            w("Regex rule n enabled must be a boolean when provided."),
            e("Regex rule n flags must be a string when provided."),
            e("Regex rule n replace must be a string when provided."),
            e("Regex rule nums maxMessages must be a positive integer when provided."),
            e("Regex rule nums maxChars must be a positive integer when provided."),
            e("Regex rule nums minDepth must be a non-negative integer when provided."),
            e("Regex rule nums maxDepth must be a non-negative integer when provided."),
        ]
    );
}

#[test]
fn v20_regex_effect_display_is_rejected() {
    let parsed = regex_stack(json!([
        {"id": "d", "stage": "compiled", "pattern": "a", "effect": "display"},
        {"id": "b", "stage": "compiled", "pattern": "a", "effect": "both"}
    ]));
    assert_eq!(
        diags(&parsed),
        vec![
            e("Regex rule d effect must be \"outgoing\" or \"finalize\"."),
            e("Regex rule b effect must be \"outgoing\" or \"finalize\"."),
        ]
    );
}

#[test]
fn v20_regex_depth_order_and_trim_strings() {
    let parsed = regex_stack(json!([
        {"id": "depth", "stage": "history", "pattern": "a", "minDepth": 3, "maxDepth": 1},
        {"id": "t", "stage": "history", "pattern": "a", "trimStrings": "x", "roles": ["user", 1], "targets": "system"}
    ]));
    assert_eq!(
        diags(&parsed),
        vec![
            e("Regex rule depth maxDepth must be greater than or equal to minDepth."),
            e("Regex rule t trimStrings must be an array of strings when provided."),
            e("Regex rule t roles must be an array of strings when provided."),
            e("Regex rule t targets must be an array of strings when provided."),
        ]
    );
}

#[test]
fn v20_match_placeholder_warns_once() {
    let parsed = regex_stack(json!([
        {"id": "m", "stage": "history", "pattern": "a", "replace": "{{match}} $0 {{ MATCH }}"},
        {"id": "ok", "stage": "history", "pattern": "a", "replace": "$& {{matched}}"}
    ]));
    assert_eq!(
        diags(&parsed),
        vec![w("Regex rule m replacement contains {{match}}; use JavaScript $& or $0 for the full match.")]
    );
    assert!(parsed.usable());
}

#[test]
fn v20_finalize_rules() {
    const REWRITES: &str = "effect \"finalize\" rewrites finalized assistant messages and replaces the original model output in the stored transcript.";
    let parsed = regex_stack(json!([
        {"id": "f1", "stage": "history", "effect": "finalize", "pattern": "a"},
        {"id": "f2", "stage": "compiled", "effect": "finalize", "pattern": "a", "targets": ["system", "messages"]},
        {"id": "f3", "stage": "compiled", "effect": "finalize", "pattern": "a", "roles": ["user"]},
        {"id": "f4", "stage": "compiled", "effect": "finalize", "pattern": "a", "roles": ["assistant"]}
    ]));
    assert_eq!(
        diags(&parsed),
        vec![
            w(&format!("Regex rule f1 {REWRITES}")),
            e("Regex rule f1 effect \"finalize\" requires stage \"compiled\"."),
            w(&format!("Regex rule f2 {REWRITES}")),
            e("Regex rule f2 effect \"finalize\" only supports target \"messages\": system."),
            w(&format!("Regex rule f3 {REWRITES}")),
            w("Regex rule f3 effect \"finalize\" only runs for finalized assistant messages, but roles does not include \"assistant\"."),
            w(&format!("Regex rule f4 {REWRITES}")),
        ]
    );
}

#[test]
fn v20_regex_rules_pass_through_unnormalized() {
    let rules = json!({"schemaVersion": 1, "rules": [
        {"id": " keep ", "stage": "history", "pattern": "(?<w>a)", "flags": "gu", "extra": [1, 2.5], "replace": "[$<w>]"}
    ], "note": "x"});
    let parsed = parse(json!({"id": "s", "regex": rules.clone(), "items": [history()]}));
    assert_eq!(diags(&parsed), vec![]);
    assert_eq!(parsed.stack.to_value()["regex"], rules);
}

#[test]
fn v20_regex_config_level_checks() {
    let parsed =
        parse(json!({"id": "s", "regex": {"schemaVersion": 2, "rules": {}}, "items": [history()]}));
    assert_eq!(
        diags(&parsed),
        vec![
            w("Missing or unsupported regex.schemaVersion; assuming 1."),
            e("regex.rules must be an array when provided."),
        ]
    );
    // A non-object regex is only a warning: the stack stays usable and loses the key.
    let parsed = parse(json!({"id": "s", "regex": [], "items": [history()]}));
    assert_eq!(
        diags(&parsed),
        vec![w("regex must be an object when provided.")]
    );
    assert!(parsed.usable());
    assert_eq!(parsed.stack.regex, None);
}

#[test]
fn v21_serialize_parse_is_idempotent_and_drops_unknown_keys() {
    let text = r#"{"id":" keep ","bogus":1,"items":[{"kind":"block","id":7,"content":"Hi","role":"system","extra":true},{"kind":"slot","id":"h","slot":"chat-history","options":{"maxMessages":3,"custom":[1]}}],"state":{}}"#;
    let first = parse_in(text, "keep.json");
    let raw = first.raw.clone().unwrap_or(Value::Null);
    assert_eq!(raw["bogus"], json!(1));
    assert_eq!(raw["items"][0]["extra"], json!(true));
    let once = serialize_stack(&first.stack);
    assert_eq!(
        once,
        "{\n  \"schemaVersion\": 1,\n  \"id\": \"keep\",\n  \"items\": [\n    {\n      \"kind\": \"block\",\n      \"id\": \"7\",\n      \"role\": \"system\",\n      \"content\": \"Hi\"\n    },\n    {\n      \"kind\": \"slot\",\n      \"id\": \"h\",\n      \"slot\": \"chat-history\",\n      \"options\": {\n        \"maxMessages\": 3,\n        \"custom\": [\n          1\n        ]\n      }\n    }\n  ]\n}\n"
    );
    let second = parse_in(&once, "keep.json");
    assert_eq!(second.stack, first.stack);
    assert_eq!(serialize_stack(&second.stack), once);
    assert_eq!(diags(&second), vec![]);
}

// ------------------------------------------------------------------------------------------------
// Fingerprint (capabilities spec C5 #5) and serialization layout

#[test]
fn c5_5_stack_fingerprint() {
    let text = r#"{"schemaVersion":1,"id":"worker","mode":"replace","tools":{"allow":["read","paint_*"]},"items":[{"kind":"block","id":"system","role":"system","content":"Built in {{date}} and custom {{ extensions.customMacro }}."}]}"#;
    let parsed = parse_in(text, "worker.json");
    assert_eq!(
        parsed.stack.fingerprint(),
        "sha256:v1:1bb1aa5f470fc57bf136f63026ee63acfff6e46f97eadbea49029781391742c5"
    );
    assert_eq!(
        forge_core::canonical::fingerprint(&parsed.stack.to_value()),
        parsed.stack.fingerprint()
    );
    // The normalized object has no `type` (absent in the file) and no `enabled` (absent on the item).
    assert_eq!(compact(&parsed.stack), text);
    assert_eq!(diags(&parsed), vec![w(NO_HISTORY)]);
}

#[test]
fn serialization_uses_the_spec_key_order() {
    let text = r#"{"unknown":true,"import":{"from":"x"},
      "items":[{"options":{"maxMessages":5},"slot":"chat-history","extra":0,"source":{"a":1},"tags":["t"],"role":"user","enabled":true,"name":"N","id":"h","kind":"slot"},
               {"content":"Hi","role":"system","id":"b","kind":"block"}],
      "capabilities":[{"ref":"review","id":"r"}],"regex":{"rules":[]},"parameters":{"p":1.0},
      "skills":{"deny":["s"]},"tools":{"initial":["read"],"deny":[],"allow":["read"]},
      "context":{"allowDuplicateChatHistory":false},"defaults":{"syntheticMessagesVisible":true},
      "mode":"append","autoActivate":true,"description":"D","name":"Name","id":"order",
      "type":"pi-forge.prompt-stack","schemaVersion":2}"#;
    let parsed = parse_in(text, "order.json");
    assert_eq!(
        serialize_stack(&parsed.stack),
        r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "order",
  "name": "Name",
  "description": "D",
  "autoActivate": true,
  "mode": "append",
  "defaults": {
    "syntheticMessagesVisible": true
  },
  "context": {
    "allowDuplicateChatHistory": false
  },
  "tools": {
    "allow": [
      "read"
    ],
    "initial": [
      "read"
    ]
  },
  "skills": {
    "deny": [
      "s"
    ]
  },
  "parameters": {
    "p": 1
  },
  "regex": {
    "rules": []
  },
  "capabilities": [
    {
      "ref": "review",
      "id": "r"
    }
  ],
  "items": [
    {
      "kind": "slot",
      "id": "h",
      "name": "N",
      "enabled": true,
      "role": "user",
      "tags": [
        "t"
      ],
      "source": {
        "a": 1
      },
      "slot": "chat-history",
      "options": {
        "maxMessages": 5
      }
    },
    {
      "kind": "block",
      "id": "b",
      "role": "system",
      "content": "Hi"
    }
  ],
  "import": {
    "from": "x"
  }
}
"#
    );
    assert_eq!(
        diags(&parsed),
        vec![
            i("skills policy only filters model-visible skills rendered by pi-forge skills slots; it does not disable explicit skill invocation and is not a security boundary."),
            w("skills policy only filters pi-forge skills slots. Use mode \"replace\" if you need the base Pi prompt to omit filtered skills."),
        ]
    );
}

#[test]
fn serialize_then_parse_is_stable_for_a_hand_built_stack() {
    let mut stack = PromptStack::new("built");
    stack.schema_version = SchemaVersion::V2;
    stack.mode = Some(StackMode::Prepend);
    stack
        .items
        .push(StackItem::block("sys", "Hello").with_role(Role::System));
    stack.items.push(StackItem::slot("history", "chat-history"));
    let text = serialize_stack(&stack);
    assert_eq!(
        text,
        "{\n  \"schemaVersion\": 2,\n  \"id\": \"built\",\n  \"mode\": \"prepend\",\n  \"items\": [\n    {\n      \"kind\": \"block\",\n      \"id\": \"sys\",\n      \"role\": \"system\",\n      \"content\": \"Hello\"\n    },\n    {\n      \"kind\": \"slot\",\n      \"id\": \"history\",\n      \"slot\": \"chat-history\"\n    }\n  ]\n}\n"
    );
    let parsed = parse_in(&text, "built.json");
    assert_eq!(parsed.stack, stack);
    assert_eq!(diags(&parsed), vec![]);
    assert_eq!(
        validate_stack(&stack, &ParseOptions::new("built.json")),
        vec![]
    );
}

// ------------------------------------------------------------------------------------------------
// Pipeline edges

#[test]
fn default_json_warning() {
    const DEFAULT_W: &str = "default.json no longer auto-activates by filename; set \"autoActivate\": true to keep auto-activating this stack.";
    let body = r#"{"id":"default","items":[{"kind":"slot","id":"h","slot":"chat-history"}]}"#;
    assert_eq!(diags(&parse_in(body, "default.json")), vec![w(DEFAULT_W)]);
    assert_eq!(
        diags(&parse_in(body, "/p/.pi/forge/prompt-stacks/default.json")),
        vec![w(DEFAULT_W)]
    );
    assert_eq!(diags(&parse_in(body, "other.json")), vec![]);
    let explicit = r#"{"id":"default","autoActivate":null,"items":[{"kind":"slot","id":"h","slot":"chat-history"}]}"#;
    let parsed = parse_in(explicit, "default.json");
    assert_eq!(
        diags(&parsed),
        vec![e("Stack autoActivate must be a boolean when provided.")]
    );
    assert!(!parsed.stack.auto_activate());
    // A non-object root gets the root error but not the filename warning.
    assert_eq!(
        diags(&parse_in("[]", "default.json")),
        vec![e("Prompt stack root must be a JSON object."), w(NO_HISTORY)]
    );
}

#[test]
fn non_utf8_bytes_give_a_fault_stack() {
    let parsed = parse_stack_bytes(b"{\"id\":\"\xff\"}", &ParseOptions::new("bin.json"));
    assert_eq!(
        diags(&parsed),
        vec![e(
            "Failed to parse JSON: file is not valid UTF-8 (invalid byte at offset 7)"
        )]
    );
    assert_eq!(parsed.stack.id(), "bin");
    assert!(parsed.raw.is_none());
    // A byte-order mark is fine.
    let parsed = parse_stack_bytes(
        b"\xef\xbb\xbf{\"id\":\"bom\",\"items\":[]}",
        &ParseOptions::new("x.json"),
    );
    assert_eq!(parsed.stack.id(), "bom");
    assert_eq!(diags(&parsed), vec![w(NO_HISTORY)]);
}

#[test]
fn items_that_are_not_an_array() {
    let parsed = parse_in(r#"{"id":"a","autoActivate":true,"items":"x"}"#, "a.json");
    assert_eq!(
        diags(&parsed),
        vec![
            e("Prompt stack must contain an items array."),
            w(NO_HISTORY)
        ]
    );
    assert!(parsed.stack.items().is_empty());
    assert!(parsed.stack.auto_activate());
    assert!(!parsed.usable());
    assert_eq!(
        compact(&parsed.stack),
        r#"{"schemaVersion":1,"id":"a","autoActivate":true,"items":[]}"#
    );
}

#[test]
fn non_object_root() {
    for text in ["[]", "null", "\"x\"", "3"] {
        let parsed = parse_in(text, "root.json");
        assert_eq!(
            diags(&parsed),
            vec![e("Prompt stack root must be a JSON object."), w(NO_HISTORY)],
            "{text}"
        );
        assert!(parsed.raw.is_some());
        assert_eq!(
            compact(&parsed.stack),
            r#"{"schemaVersion":1,"type":"pi-forge.prompt-stack","id":"root","name":"root.json","items":[]}"#
        );
    }
}

#[test]
fn wrong_types_everywhere() {
    let parsed = parse(json!({
        "schemaVersion": "2", "type": "other", "id": 42, "name": 1, "description": false,
        "autoActivate": "yes", "mode": "merge", "defaults": [], "context": "x", "tools": "read",
        "skills": [], "variables": [], "parameters": 3, "regex": "r", "capabilities": {},
        "items": [], "import": "i", "state": {"a": 1}
    }));
    assert_eq!(
        diags(&parsed),
        vec![
            e("Stack id must be a non-empty string."),
            e("Stack type must be \"pi-forge.prompt-stack\" when provided."),
            e("Stack name must be a string when provided."),
            e("Stack description must be a string when provided."),
            e("Stack autoActivate must be a boolean when provided."),
            e("Stack mode must be \"append\", \"prepend\", or \"replace\" when provided."),
            e("Stack defaults must be an object when provided."),
            e("Stack context must be an object when provided."),
            e("Stack variables must be an object when provided."),
            w("schemaVersion 1 stacks use variables; parameters is ignored."),
            e("Stack parameters must be an object when provided."),
            e("Stack capabilities must be an array when provided."),
            w("Unsupported schemaVersion; assuming 1."),
            i("state is no longer supported and was ignored; use stack.variables and template interpolation instead."),
            e("tools policy must be an object when provided."),
            e("skills policy must be an object when provided."),
            w("regex must be an object when provided."),
            w(NO_HISTORY),
        ]
    );
    assert_eq!(
        compact(&parsed.stack),
        r#"{"schemaVersion":1,"id":"s","items":[]}"#
    );
}

#[test]
fn wrong_types_in_items() {
    let parsed = parse(json!({"id": "s", "items": [
        {"kind": "slot", "id": 5, "slot": " ", "options": [], "name": 3},
        {"kind": "block", "id": "", "role": 5, "content": "c"},
        {"kind": "block", "id": "arr", "role": ["a", null, ["b"]], "content": "c"},
        {"kind": "block", "id": "obj", "role": {}, "content": "c", "tags": "t"},
        {"kind": "slot", "id": "nos"}
    ]}));
    assert_eq!(
        diags(&parsed),
        vec![
            at(e("Item 1 id must be a non-empty string."), "item-1"),
            at(e("Item name must be a string when provided."), "item-1"),
            at(e("Slot name must be a non-empty string."), "item-1"),
            at(e("Slot options must be an object when provided."), "item-1"),
            at(e("Item 2 id must be a non-empty string."), "item-2"),
            at(e("Invalid role: 5"), "item-2"),
            at(e("Invalid role: a,,b"), "arr"),
            at(e("Invalid role: [object Object]"), "obj"),
            at(
                e("Item tags must be an array of strings when provided."),
                "obj"
            ),
            at(e("Slot name must be a non-empty string."), "nos"),
            // The normalized pass sees the numeric id as "5".
            at(e("Slot name must be a non-empty string."), "5"),
            at(w("Unsupported slot:  "), "5"),
            at(
                w("Enabled block has no role and will be ignored."),
                "item-2"
            ),
            at(w("Enabled block has no role and will be ignored."), "arr"),
            at(w("Enabled block has no role and will be ignored."), "obj"),
            at(w("Unsupported slot: "), "nos"),
            w(NO_HISTORY),
        ]
    );
    let ids: Vec<&str> = parsed
        .stack
        .items()
        .iter()
        .map(|it| it.id.as_str())
        .collect();
    assert_eq!(ids, ["5", "item-2", "arr", "obj", "nos"]);
    assert_eq!(
        parsed.stack.items()[0].body,
        ItemBody::Slot {
            slot: " ".into(),
            options: None
        }
    );
}

#[test]
fn item_ids_from_numbers_use_js_formatting() {
    let parsed = parse(json!({"id": "s", "items": [
        {"kind": "block", "id": 1.5, "role": "system", "content": ""},
        {"kind": "block", "id": 1e21, "role": "system", "content": ""},
        {"kind": "block", "id": 2.0, "role": "system", "content": ""},
        {"kind": "block", "id": true, "role": "system", "content": ""}
    ]}));
    let ids: Vec<&str> = parsed
        .stack
        .items()
        .iter()
        .map(|it| it.id.as_str())
        .collect();
    assert_eq!(ids, ["1.5", "1e+21", "2", "item-4"]);
}

#[test]
fn non_object_items_become_disabled_blocks() {
    let parsed = parse(json!({"id": "s", "items": [history(), "text", [1], 3]}));
    assert_eq!(
        diags(&parsed),
        vec![
            at(e("Item 2 must be an object."), "item-2"),
            at(e("Item 3 must be an object."), "item-3"),
            at(e("Item 4 must be an object."), "item-4"),
        ]
    );
    let item = &parsed.stack.items()[1];
    assert!(!item.is_enabled());
    assert_eq!(item.content(), Some(""));
    assert_eq!(
        forge_core::json::to_compact(&item.to_value()),
        r#"{"kind":"block","id":"item-2","enabled":false,"content":""}"#
    );
}

#[test]
fn slots_are_checked_against_builtins_and_extensions() {
    assert_eq!(BUILTIN_SLOTS.len(), 11);
    let value = json!({"id": "s", "items": [
        history(),
        {"kind": "slot", "id": "custom", "slot": "my-slot", "role": "system"},
        {"kind": "slot", "id": "off", "slot": "not-real", "enabled": false},
        {"kind": "slot", "id": "docs", "slot": "pi-docs", "role": "system"}
    ]});
    let parsed = parse(value.clone());
    assert_eq!(
        diags(&parsed),
        vec![
            at(w("Unsupported slot: my-slot"), "custom"),
            at(w("Unsupported slot: not-real"), "off"),
        ]
    );
    let extra = vec!["my-slot".to_string()];
    let opts = ParseOptions {
        file_name: "s.json",
        extra_slots: &extra,
    };
    let parsed = parse_stack_value(value, &opts);
    assert_eq!(
        diags(&parsed),
        vec![at(w("Unsupported slot: not-real"), "off")]
    );
}

#[test]
fn multiple_history_slots() {
    const MULTI: &str = "Multiple enabled chat-history slots found; only the first will be expanded unless context.allowDuplicateChatHistory is true.";
    let items = json!([history(), {"kind": "slot", "id": "h2", "slot": "chat-history"}]);
    assert_eq!(
        diags(&parse(json!({"id": "s", "items": items.clone()}))),
        vec![w(MULTI)]
    );
    let allowed =
        json!({"id": "s", "context": {"allowDuplicateChatHistory": true}, "items": items.clone()});
    assert_eq!(diags(&parse(allowed)), vec![]);
    // Only a real `true` allows duplicates (the original's JS truthiness let the string "false"
    // suppress the warning); the string is also an error itself.
    let truthy = json!({"id": "s", "context": {"allowDuplicateChatHistory": "false"}, "items": items.clone()});
    assert_eq!(
        diags(&parse(truthy)),
        vec![
            e("context.allowDuplicateChatHistory must be a boolean when provided."),
            w(MULTI)
        ]
    );
    // A disabled second slot does not count.
    let disabled = json!({"id": "s", "items": [history(), {"kind": "slot", "id": "h2", "slot": "chat-history", "enabled": false}]});
    assert_eq!(diags(&parse(disabled)), vec![]);
}

#[test]
fn state_info_only_when_non_empty() {
    let parsed = parse(json!({"id": "s", "state": {"x": 1}, "items": [history()]}));
    assert_eq!(
        diags(&parsed),
        vec![i("state is no longer supported and was ignored; use stack.variables and template interpolation instead.")]
    );
    assert!(parsed.usable());
    assert_eq!(
        diags(&parse(
            json!({"id": "s", "state": {}, "items": [history()]})
        )),
        vec![]
    );
    assert_eq!(
        diags(&parse(
            json!({"id": "s", "state": [1], "items": [history()]})
        )),
        vec![]
    );
}

#[test]
fn type_is_kept_only_when_exact() {
    let ok = parse(json!({"type": "pi-forge.prompt-stack", "id": "s", "items": [history()]}));
    assert!(ok.stack.has_type);
    assert_eq!(diags(&ok), vec![]);
    let bad = parse(json!({"type": "pi-forge.agent-profile", "id": "s", "items": [history()]}));
    assert!(!bad.stack.has_type);
    assert_eq!(
        diags(&bad),
        vec![e(
            "Stack type must be \"pi-forge.prompt-stack\" when provided."
        )]
    );
    assert_eq!(bad.stack.to_value().get("type"), None);
}

#[test]
fn ids_are_trimmed_and_blank_ids_fall_back() {
    let parsed = parse_in(r#"{"id":"  spaced\t","items":[]}"#, "file.json");
    assert_eq!(parsed.stack.id(), "spaced");
    assert_eq!(diags(&parsed), vec![w(NO_HISTORY)]);
    let parsed = parse_in(r#"{"id":"   ","items":[]}"#, "dir/file.json");
    assert_eq!(parsed.stack.id(), "file");
    assert_eq!(
        diags(&parsed),
        vec![e("Stack id must be a non-empty string."), w(NO_HISTORY)]
    );
    // A file literally named ".json" leaves nothing to fall back to.
    let parsed = parse_in(r#"{"items":[]}"#, ".json");
    assert_eq!(parsed.stack.id(), "");
    assert_eq!(
        diags(&parsed),
        vec![
            e("Stack id must be a non-empty string."),
            e("Stack id must not be empty."),
            w(NO_HISTORY),
        ]
    );
}

#[test]
fn accessors_report_effective_values() {
    let parsed = parse(
        json!({"id": "s", "name": "N", "autoActivate": false, "items": [
            {"kind": "block", "id": "a", "role": "user", "content": "x", "enabled": true},
            {"kind": "slot", "id": "b", "slot": "tools", "enabled": false, "options": {"format": "plain"}}
        ]}),
    );
    let stack = &parsed.stack;
    assert_eq!(stack.name(), Some("N"));
    assert!(!stack.auto_activate());
    assert_eq!(stack.mode(), StackMode::Replace);
    assert_eq!(stack.mode, None);
    assert!(stack.items()[0].is_enabled());
    assert_eq!(stack.items()[0].role, Some(Role::User));
    assert!(!stack.items()[1].is_enabled());
    assert_eq!(stack.items()[1].slot_name(), Some("tools"));
    assert_eq!(
        stack.items()[1].options().map(|o| o["format"].clone()),
        Some(json!("plain"))
    );
    assert_eq!(stack.items()[1].content(), None);
    let append = parse(json!({"id": "s", "mode": "append", "autoActivate": true, "items": []}));
    assert_eq!(append.stack.mode(), StackMode::Append);
    assert!(append.stack.auto_activate());
}

#[test]
fn fault_stack_for_read_failures() {
    let parsed = fault_stack(
        "global/x.json",
        "Failed to read prompt stack: EACCES".to_string(),
    );
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error("Failed to read prompt stack: EACCES")]
    );
    assert!(!parsed.usable());
    assert!(parsed.raw.is_none());
    assert_eq!(
        compact(&parsed.stack),
        r#"{"schemaVersion":1,"type":"pi-forge.prompt-stack","id":"x","name":"x.json","items":[]}"#
    );
}

// ------------------------------------------------------------------------------------------------
// Variables and parameters

#[test]
fn v1_variables_keep_only_strings() {
    let parsed = parse(
        json!({"id": "s", "variables": {"name": "static", "n": 1, "char": "Konata", "o": {}}, "items": [history()]}),
    );
    assert_eq!(
        diags(&parsed),
        vec![
            e("Stack variable n must be a string."),
            e("Stack variable o must be a string."),
        ]
    );
    assert_eq!(parsed.stack.variable("char"), Some("Konata"));
    assert_eq!(parsed.stack.variable("n"), None);
    assert_eq!(
        parsed.stack.to_value()["variables"],
        json!({"name": "static", "char": "Konata"})
    );
}

#[test]
fn v2_parameters_keep_any_json_value() {
    let parsed = parse(json!({"schemaVersion": 2, "id": "s", "parameters": {
        "audience": "main agent", "obj": {"tone": "x", "n": [1.0, null, true]}, "arr": ["a", "b"],
        "num": 2.50, "nil": null
    }, "items": [history()]}));
    assert_eq!(diags(&parsed), vec![]);
    let params = parsed.stack.parameters.clone().unwrap_or_default();
    assert_eq!(params["obj"], json!({"tone": "x", "n": [1.0, null, true]}));
    assert!(params["obj"].is_object());
    assert_eq!(
        forge_core::json::to_compact(&parsed.stack.to_value()["parameters"]),
        r#"{"audience":"main agent","obj":{"tone":"x","n":[1,null,true]},"arr":["a","b"],"num":2.5,"nil":null}"#
    );
}

#[test]
fn v1_parameters_and_v2_variables_are_dropped() {
    let v1 = parse(json!({"id": "s", "parameters": "x", "items": [history()]}));
    assert_eq!(
        diags(&v1),
        vec![
            w("schemaVersion 1 stacks use variables; parameters is ignored."),
            e("Stack parameters must be an object when provided."),
        ]
    );
    assert_eq!(v1.stack.to_value().get("parameters"), None);
    // Variables of a v2 stack are still type-checked although they are ignored.
    let v2 = parse(
        json!({"schemaVersion": 2.0, "id": "s", "variables": {"a": 1}, "items": [history()]}),
    );
    assert_eq!(
        diags(&v2),
        vec![
            e("Stack variable a must be a string."),
            w("schemaVersion 2 stacks use parameters; variables is ignored."),
        ]
    );
    assert_eq!(v2.stack.schema_version, SchemaVersion::V2);
    assert_eq!(v2.stack.to_value().get("variables"), None);
}

#[test]
fn defaults_unresolved_macro_policy_uses_string_coercion() {
    let parsed = parse(
        json!({"id": "s", "defaults": {"unresolvedMacroPolicy": ["warn"]}, "items": [history()]}),
    );
    assert_eq!(diags(&parsed), vec![]);
    let parsed = parse(
        json!({"id": "s", "defaults": {"unresolvedMacroPolicy": null}, "items": [history()]}),
    );
    assert_eq!(
        diags(&parsed),
        vec![e("defaults.unresolvedMacroPolicy must be \"warn\", \"keep\", or \"error\" when provided.")]
    );
}

// ------------------------------------------------------------------------------------------------
// Capabilities (bindings array)

#[test]
fn capabilities_array_is_kept_as_written() {
    let bindings = json!([{"ref": "project:review", "modelCallable": true}, "odd", {"ref": 5}]);
    let parsed = parse(
        json!({"id": "s", "items": [history()], "capabilities": bindings.clone(), "regex": {}}),
    );
    assert_eq!(diags(&parsed), vec![]);
    assert_eq!(parsed.stack.to_value()["capabilities"], bindings);
    let keys: Vec<String> = parsed
        .stack
        .to_value()
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["schemaVersion", "id", "regex", "capabilities", "items"]
    );
    let bad = parse(json!({"id": "s", "items": [history()], "capabilities": "review"}));
    assert_eq!(
        diags(&bad),
        vec![e("Stack capabilities must be an array when provided.")]
    );
    assert_eq!(bad.stack.capabilities, None);
}

// ------------------------------------------------------------------------------------------------
// Policy

#[test]
fn pattern_matching_rules() {
    assert!(pattern_matches("*", "anything"));
    assert!(pattern_matches("*", ""));
    assert!(pattern_matches("read", "read"));
    assert!(!pattern_matches("read", "reader"));
    assert!(!pattern_matches("rea", "read"));
    assert!(pattern_matches("browser-*", "browser-search"));
    assert!(pattern_matches("browser-*", "browser-"));
    assert!(!pattern_matches("browser-*", "my-browser-search"));
    assert!(pattern_matches("*_tool", "paint_tool"));
    assert!(pattern_matches("a*c*e", "abcde"));
    assert!(!pattern_matches("a*c*e", "abcd"));
    // Everything but `*` is literal.
    assert!(pattern_matches("a.b*", "a.bc"));
    assert!(!pattern_matches("a.b*", "axbc"));
    assert!(pattern_matches("(x)+*", "(x)+y"));
    assert!(!pattern_matches("?", "a"));
}

#[test]
fn vector59_policy_application() {
    let names = [
        "read",
        "bash",
        "browser-search",
        "write",
        "browser-danger",
        "edit",
    ];
    let star = Policy {
        allow: vec!["*".into()],
        ..Policy::default()
    };
    assert!(!star.is_effective());
    assert_eq!(star.apply(&names), names.to_vec());
    let allow = Policy {
        allow: vec!["read".into(), "browser-*".into()],
        ..Policy::default()
    };
    assert!(allow.is_effective());
    assert_eq!(
        allow.apply(&names),
        ["read", "browser-search", "browser-danger"]
    );
    let deny = Policy {
        deny: vec!["edit".into()],
        ..Policy::default()
    };
    assert_eq!(deny.apply(&["read", "bash", "edit"]), ["read", "bash"]);
    assert_eq!(Policy::default().apply(&["a"]), ["a"]);
}

#[test]
fn policy_flags() {
    let star_and_more = Policy {
        allow: vec!["*".into(), "read".into()],
        ..Policy::default()
    };
    assert!(star_and_more.is_effective());
    assert!(!star_and_more.is_selective_allow());
    let glob = Policy {
        allow: vec!["paint_*".into()],
        ..Policy::default()
    };
    assert!(glob.is_selective_allow());
    let deny = Policy {
        deny: vec!["bash".into()],
        ..Policy::default()
    };
    assert!(deny.is_effective());
    assert!(!deny.is_selective_allow());
    assert!(!Policy::default().is_effective());
    assert!(!Policy::default().is_selective_allow());
    // A hand-built policy with `*` allow and a deny list acts as a deny policy.
    let mixed = Policy {
        allow: vec!["*".into()],
        deny: vec!["bash".into()],
        initial: None,
    };
    assert_eq!(mixed.apply(&["read", "bash"]), ["read"]);
}

#[test]
fn policy_entries_are_trimmed_and_checked() {
    let parsed = parse(
        json!({"id": "s", "tools": {"allow": [" read ", "", 5, "  "]}, "skills": {}, "items": [history()]}),
    );
    assert_eq!(
        diags(&parsed),
        vec![
            e("tools.allow[1] must be a non-empty string."),
            e("tools.allow[2] must be a non-empty string."),
            e("tools.allow[3] must be a non-empty string."),
        ]
    );
    assert_eq!(parsed.stack.to_value()["tools"], json!({"allow": ["read"]}));
    assert_eq!(parsed.stack.to_value()["skills"], json!({}));
    let deny = parse(json!({"id": "s", "tools": {"deny": "bash"}, "items": [history()]}));
    assert_eq!(
        diags(&deny),
        vec![e("tools.deny must be an array of strings when provided.")]
    );
    assert_eq!(deny.stack.to_value()["tools"], json!({}));
    let dup =
        parse(json!({"id": "s", "skills": {"deny": ["a", " a", "a "]}, "items": [history()]}));
    assert_eq!(
        diags(&dup),
        vec![
            w("Duplicate skills.deny pattern: a."),
            i("skills policy only filters model-visible skills rendered by pi-forge skills slots; it does not disable explicit skill invocation and is not a security boundary."),
        ]
    );
}

// ------------------------------------------------------------------------------------------------
// tools.initial (capabilities spec B9)

#[test]
fn tools_initial_is_kept_after_allow_and_deny() {
    let parsed = parse(
        json!({"id": "s", "tools": {"initial": ["read", "grep"], "allow": ["read", "gr*"]}, "items": [history()]}),
    );
    assert_eq!(diags(&parsed), vec![]);
    assert_eq!(
        forge_core::json::to_compact(&parsed.stack.to_value()["tools"]),
        r#"{"allow":["read","gr*"],"initial":["read","grep"]}"#
    );
    let tools = parsed.stack.tools.clone().unwrap_or_default();
    assert_eq!(
        tools.initial,
        Some(vec!["read".to_string(), "grep".to_string()])
    );
    // `[]` means zero tools initially and survives the round trip; no allow/deny is needed.
    let empty = parse(json!({"id": "s", "tools": {"initial": []}, "items": [history()]}));
    assert_eq!(diags(&empty), vec![]);
    assert_eq!(empty.stack.to_value()["tools"], json!({"initial": []}));
    let again = parse_in(&serialize_stack(&empty.stack), "s.json");
    assert_eq!(again.stack.tools, empty.stack.tools);
}

#[test]
fn tools_initial_entries_must_be_concrete_valid_names() {
    let parsed = parse(
        json!({"id": "s", "tools": {"initial": ["read", "bash*", "a?", "two words", "", 3, "read", "x\u{1}"]}, "items": [history()]}),
    );
    assert_eq!(
        diags(&parsed),
        vec![
            e("tools.initial[1] must be a concrete name without wildcards: bash*."),
            e("tools.initial[2] must be a concrete name without wildcards: a?."),
            e("tools.initial[3] is not a valid name (1-128 characters, no white space or control characters): two words."),
            e("tools.initial[4] must be a non-empty string."),
            e("tools.initial[5] must be a non-empty string."),
            w("Duplicate tools.initial entry: read."),
            e("tools.initial[7] is not a valid name (1-128 characters, no white space or control characters): x\u{1}."),
        ]
    );
    assert_eq!(
        parsed.stack.to_value()["tools"],
        json!({"initial": ["read"]})
    );
    let not_array = parse(
        json!({"id": "s", "tools": {"allow": ["read"], "initial": "read"}, "items": [history()]}),
    );
    assert_eq!(
        diags(&not_array),
        vec![e(
            "tools.initial must be an array of strings when provided."
        )]
    );
    assert_eq!(
        not_array.stack.to_value()["tools"],
        json!({"allow": ["read"]})
    );
}

#[test]
fn tools_initial_names_outside_the_ceiling_are_errors() {
    let allow = parse(
        json!({"id": "s", "tools": {"allow": ["read", "paint_*"], "initial": ["read", "bash", "paint_x"]}, "items": [history()]}),
    );
    assert_eq!(
        diags(&allow),
        vec![e(
            "tools.initial entry bash is excluded by the tools policy."
        )]
    );
    // Excluded names stay in the normalized list (the runtime filters them through the ceiling).
    assert_eq!(
        allow.stack.to_value()["tools"]["initial"],
        json!(["read", "bash", "paint_x"])
    );
    let deny = parse(
        json!({"id": "s", "tools": {"deny": ["ba*"], "initial": ["bash", "read"]}, "items": [history()]}),
    );
    assert_eq!(
        diags(&deny),
        vec![e(
            "tools.initial entry bash is excluded by the tools policy."
        )]
    );
    let star = parse(
        json!({"id": "s", "tools": {"allow": ["*"], "initial": ["anything"]}, "items": [history()]}),
    );
    assert_eq!(diags(&star), vec![]);
    let skills = parse(
        json!({"id": "s", "skills": {"allow": ["review"], "initial": ["other"]}, "items": [history()]}),
    );
    assert_eq!(
        diags(&skills),
        vec![
            e("skills.initial entry other is excluded by the skills policy."),
            i("skills policy only filters model-visible skills rendered by pi-forge skills slots; it does not disable explicit skill invocation and is not a security boundary."),
        ]
    );
}

// ------------------------------------------------------------------------------------------------
// Round-trip properties

mod properties {
    use super::*;
    use proptest::collection::{btree_map, vec};
    use proptest::option;
    use proptest::prelude::*;
    use serde_json::Map;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e25f64..1e25).prop_map(Value::from),
            "[a-z *{}-]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn one_of(options: &'static [&'static str]) -> impl Strategy<Value = Value> {
        proptest::sample::select(options).prop_map(Value::from)
    }

    fn or_any(good: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
        prop_oneof![4 => good, 1 => arb_json()]
    }

    fn arb_item() -> impl Strategy<Value = Value> {
        (
            or_any(one_of(&["block", "slot", "sloot"])),
            option::of(or_any(one_of(&["a", " a ", "b", "", "item-2", "x y"]))),
            option::of(or_any(one_of(&[
                "system",
                "user",
                "assistant",
                "custom",
                "sysstem",
            ]))),
            option::of(or_any(one_of(&[
                "chat-history",
                "tools",
                "date",
                "nope",
                "",
            ]))),
            option::of(or_any("[a-z{} ]{0,8}".prop_map(Value::from))),
            option::of(arb_json()),
            option::of(any::<bool>()),
        )
            .prop_map(|(kind, id, role, slot, content, options, enabled)| {
                let mut m = Map::new();
                m.insert("kind".into(), kind);
                let fields = [
                    ("id", id),
                    ("role", role),
                    ("slot", slot),
                    ("content", content),
                    ("options", options),
                ];
                for (k, v) in fields {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                if let Some(enabled) = enabled {
                    m.insert("enabled".into(), enabled.into());
                }
                Value::Object(m)
            })
    }

    fn pattern_list() -> impl Strategy<Value = Value> {
        vec(
            or_any(one_of(&["read", " read", "*", "b*", "", "bash", "a?"])),
            0..4,
        )
        .prop_map(Value::Array)
    }

    fn arb_policy() -> impl Strategy<Value = Value> {
        (
            option::of(pattern_list()),
            option::of(pattern_list()),
            option::of(or_any(pattern_list())),
        )
            .prop_map(|(allow, deny, initial)| {
                let mut m = Map::new();
                for (k, v) in [("allow", allow), ("deny", deny), ("initial", initial)] {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                Value::Object(m)
            })
    }

    fn arb_rule() -> impl Strategy<Value = Value> {
        (
            option::of(one_of(&["r", "s", " ", ""])),
            option::of(or_any(one_of(&["history", "compiled"]))),
            option::of("[a-z()\\[\\]{}*+?|^$\\\\.<>]{0,8}"),
            option::of(or_any(one_of(&["", "g", "gimsu", "gg", "x"]))),
        )
            .prop_map(|(id, stage, pattern, flags)| {
                let mut m = Map::new();
                let pattern = pattern.map(Value::from);
                for (k, v) in [
                    ("id", id),
                    ("stage", stage),
                    ("pattern", pattern),
                    ("flags", flags),
                ] {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                Value::Object(m)
            })
    }

    fn arb_stack() -> impl Strategy<Value = Value> {
        (
            (
                option::of(or_any(prop_oneof![
                    Just(json!(1)),
                    Just(json!(2)),
                    Just(json!(3))
                ])),
                option::of(or_any(one_of(&["s", " s ", "proj:x", "", "a.b_c-d"]))),
                option::of(or_any(one_of(&["replace", "append", "prepend", "merge"]))),
                option::of(arb_json()),
                option::of(or_any(
                    btree_map("[a-z.]{1,4}", arb_json(), 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                )),
            ),
            (
                option::of(or_any(arb_policy())),
                option::of(or_any(arb_policy())),
                option::of(or_any(vec(or_any(arb_item()), 0..6).prop_map(Value::Array))),
                option::of(or_any(
                    vec(or_any(arb_rule()), 0..4).prop_map(|rules| json!({"rules": rules})),
                )),
                option::of(arb_json()),
            ),
        )
            .prop_map(
                |(
                    (version, id, mode, variables, parameters),
                    (tools, skills, items, regex, extra),
                )| {
                    let mut m = Map::new();
                    let fields = [
                        ("schemaVersion", version),
                        ("id", id),
                        ("mode", mode),
                        ("variables", variables),
                        ("parameters", parameters),
                        ("tools", tools),
                        ("skills", skills),
                        ("items", items),
                        ("regex", regex),
                        ("unknownKey", extra),
                    ];
                    for (k, v) in fields {
                        if let Some(v) = v {
                            m.insert(k.into(), v);
                        }
                    }
                    Value::Object(m)
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn serialize_parse_serialize_is_byte_identical(value in arb_stack()) {
            let opts = ParseOptions::new("prop.json");
            let first = parse_stack_value(value, &opts);
            let once = serialize_stack(&first.stack);
            let second = parse_stack_str(&once, &opts);
            let twice = serialize_stack(&second.stack);
            prop_assert_eq!(&once, &twice);
            let third = parse_stack_str(&twice, &opts);
            prop_assert_eq!(&third.stack, &second.stack);
            prop_assert_eq!(&third.diagnostics, &second.diagnostics);
        }

        #[test]
        fn arbitrary_json_never_panics(value in arb_json()) {
            let parsed = parse_stack_value(value, &ParseOptions::new("default.json"));
            let text = serialize_stack(&parsed.stack);
            let closed = text.ends_with("}\n");
            prop_assert!(closed);
            let again = parse_stack_str(&text, &ParseOptions::new("default.json"));
            prop_assert_eq!(serialize_stack(&again.stack), text);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..64)) {
            let parsed = parse_stack_bytes(&bytes, &ParseOptions::new("b.json"));
            prop_assert!(!parsed.diagnostics.is_empty());
        }

        #[test]
        fn glob_matching_agrees_with_a_reference(pattern in "[ab*]{0,6}", name in "[ab]{0,6}") {
            // Reference: regex over the escaped pattern, as the original builds it.
            let expected = if pattern == "*" {
                true
            } else if !pattern.contains('*') {
                pattern == name
            } else {
                let source = format!("^{}$", pattern.split('*').collect::<Vec<_>>().join(".*"));
                forge_core::stack::compile_pattern(&source, "")
                    .map(|re| re.find(&name).is_some())
                    .unwrap_or(false)
            };
            prop_assert_eq!(pattern_matches(&pattern, &name), expected);
        }
    }
}

#[test]
fn role_less_slot_is_reported_instead_of_silently_ignored() {
    let parsed = parse(json!({"id": "s", "items": [
        {"kind": "slot", "id": "t", "slot": "tools"},
        {"kind": "slot", "id": "off", "slot": "date", "enabled": false},
        {"kind": "slot", "id": "h", "slot": "chat-history"}
    ]}));
    assert_eq!(
        diags(&parsed),
        vec![at(
            w("Enabled slot tools has no role and will be ignored."),
            "t"
        )]
    );
}
