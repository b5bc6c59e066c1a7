//! Capability codec, Preset bindings, effective capabilities and snapshots: spec B1, B2, B4–B6,
//! C5 rows 11–14, vectors F18–F27 and F30.

use forge_core::canonical::{canonical, sha256_hex};
use forge_core::capability::{
    effective_capability, effective_from_parsed, fault_capability, parse_bindings,
    parse_capability_bytes, parse_capability_value, serialize_capability, Binding, BindingSource,
    Capability, CapabilitySnapshot, ContentOverride, Overrides, ParsedCapability, SnapshotSource,
    ToolOverride, ToolPatch, MAX_CAPABILITY_SOURCE_SIZE,
};
use forge_core::diag::{Diagnostic, Level};
use forge_core::id::{ResourceKey, Scope, Selector};
use proptest::prelude::*;
use serde_json::{json, Value};

const REVIEW_CONTENT: &str = "List findings, evidence and risks. Do not directly edit files.";
const ID_RULE_TEXT: &str = "must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens";

fn review() -> Capability {
    Capability {
        id: "review".into(),
        name: Some("Review".into()),
        description: Some("Report findings and evidence before editing.".into()),
        content: REVIEW_CONTENT.into(),
        tools: ToolPatch::new(
            ["grep", "find", "ls"],
            ["bash", "powershell", "write", "edit"],
        ),
    }
}

fn review_json() -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.capability",
        "id": "review",
        "name": "Review",
        "description": "Report findings and evidence before editing.",
        "content": REVIEW_CONTENT,
        "tools": {
            "add": ["grep", "find", "ls"],
            "remove": ["bash", "powershell", "write", "edit"]
        }
    })
}

fn minimal(content: &str, tools: Value) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.capability",
        "id": "cap",
        "content": content,
        "tools": tools
    })
}

fn parse(value: Value) -> ParsedCapability {
    parse_capability_value(value, "cap.json", String::from("rev"))
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect()
}

fn errors_of(diagnostics: &[Diagnostic]) -> Vec<(String, String)> {
    diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d.level, Level::Error, "{d}");
            (d.field.clone().unwrap_or_default(), d.message.clone())
        })
        .collect()
}

fn errors(parsed: &ParsedCapability) -> Vec<(String, String)> {
    errors_of(&parsed.diagnostics)
}

const EFFECT_RULE: &str =
    "Capability needs non-whitespace content or at least one tool in tools.add or tools.remove.";

// B1 README example + B2 sourceRevision example.
#[test]
fn readme_capability_and_source_revision() {
    let text = serialize_capability(&review());
    assert_eq!(text.len(), 401);
    assert_eq!(
        text,
        "{\n  \"schemaVersion\": 1,\n  \"type\": \"pi-forge.capability\",\n  \"id\": \"review\",\n  \"name\": \"Review\",\n  \"description\": \"Report findings and evidence before editing.\",\n  \"content\": \"List findings, evidence and risks. Do not directly edit files.\",\n  \"tools\": {\n    \"add\": [\n      \"grep\",\n      \"find\",\n      \"ls\"\n    ],\n    \"remove\": [\n      \"bash\",\n      \"powershell\",\n      \"write\",\n      \"edit\"\n    ]\n  }\n}\n"
    );
    let parsed = parse_capability_bytes(text.as_bytes(), "review.json");
    assert_eq!(parsed.diagnostics, vec![]);
    assert!(parsed.usable());
    assert_eq!(parsed.capability, review());
    assert_eq!(
        parsed.source_revision,
        "8e17f5fcff05d298b9cc7d047d4322424b60b96da948d531e92b5c3d5f6aaff4"
    );
    assert_eq!(parsed.raw, Some(review_json()));
    assert_eq!(parse(review_json()).capability, review());
    assert_eq!(review().to_value(), review_json());
}

#[test]
fn source_revision_hashes_the_raw_bytes() {
    let compact = serde_json::to_vec(&review_json()).unwrap();
    let parsed = parse_capability_bytes(&compact, "review.json");
    assert_eq!(parsed.capability, review());
    assert_eq!(parsed.source_revision, sha256_hex(&compact));
    assert_ne!(
        parsed.source_revision,
        "8e17f5fcff05d298b9cc7d047d4322424b60b96da948d531e92b5c3d5f6aaff4"
    );
    // Omitted tools / lists normalize to empty arrays.
    let parsed =
        parse(json!({"schemaVersion":1,"type":"pi-forge.capability","id":"t","content":"x"}));
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(parsed.capability.tools, ToolPatch::default());
    assert_eq!(
        serialize_capability(&parsed.capability),
        "{\n  \"schemaVersion\": 1,\n  \"type\": \"pi-forge.capability\",\n  \"id\": \"t\",\n  \"content\": \"x\",\n  \"tools\": {\n    \"add\": [],\n    \"remove\": []\n  }\n}\n"
    );
    let parsed = parse(minimal("x", json!({"remove": ["bash"]})));
    assert_eq!(
        parsed.capability.tools,
        ToolPatch::new(Vec::<String>::new(), ["bash"])
    );
}

// F18
#[test]
fn needs_content_or_tools() {
    let parsed = parse(minimal("", json!({})));
    assert_eq!(errors(&parsed), pairs(&[("content", EFFECT_RULE)]));
    let parsed = parse(minimal(" \n\t\u{3000}", json!({"add": [], "remove": []})));
    assert_eq!(errors(&parsed), pairs(&[("content", EFFECT_RULE)]));
    assert!(!parsed.usable());
}

// F19
#[test]
fn invalid_tool_names_are_dropped() {
    let long = "x".repeat(129);
    let parsed = parse(minimal(
        "text",
        json!({"add": ["re ad", "gr*p", "a?", long]}),
    ));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            (
                "tools.add[0]",
                "Tool name \"re ad\" in tools.add must not contain whitespace."
            ),
            (
                "tools.add[1]",
                "Tool name \"gr*p\" in tools.add must not contain wildcards (* or ?)."
            ),
            (
                "tools.add[2]",
                "Tool name \"a?\" in tools.add must not contain wildcards (* or ?)."
            ),
            (
                "tools.add[3]",
                &format!("Tool name \"{long}\" in tools.add must be at most 128 characters."),
            ),
        ])
    );
    assert_eq!(parsed.capability.tools.add, Vec::<String>::new());

    let parsed = parse(minimal(
        "text",
        json!({"add": ["ok", "", "tab\there", 5, "x".repeat(128)], "remove": ["nul\u{0}", "del\u{7f}", null]}),
    ));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            (
                "tools.add[1]",
                "Tool name \"\" in tools.add must not be empty."
            ),
            (
                "tools.add[2]",
                "Tool name \"tab\\there\" in tools.add must not contain control characters."
            ),
            (
                "tools.add[3]",
                "Tool names in tools.add must be strings, got number."
            ),
            (
                "tools.remove[0]",
                "Tool name \"nul\\u0000\" in tools.remove must not contain control characters."
            ),
            (
                "tools.remove[1]",
                "Tool name \"del\u{7f}\" in tools.remove must not contain control characters."
            ),
            (
                "tools.remove[2]",
                "Tool names in tools.remove must be strings, got null."
            ),
        ])
    );
    assert_eq!(
        parsed.capability.tools,
        ToolPatch::new(["ok".to_string(), "x".repeat(128)], Vec::<String>::new())
    );
    // Invalid names dropped → no tool effect left → the effect rule fires too.
    let parsed = parse(minimal("", json!({"add": ["a b"]})));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            (
                "tools.add[0]",
                "Tool name \"a b\" in tools.add must not contain whitespace."
            ),
            ("content", EFFECT_RULE),
        ])
    );
}

#[test]
fn tool_list_length_limit() {
    let names: Vec<String> = (0..257).map(|i| format!("t{i}")).collect();
    let parsed = parse(minimal("", json!({"add": names})));
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "tools.add",
            "tools.add must list at most 256 tool names (got 257)."
        )])
    );
    assert_eq!(parsed.capability.tools.add.len(), 257);
    let parsed = parse(minimal("", json!({"remove": names[..256]})));
    assert_eq!(parsed.diagnostics, vec![]);
}

// F20
#[test]
fn unknown_fields_fail_closed() {
    let parsed = parse(minimal("x", json!({"only": ["read"]})));
    assert_eq!(
        errors(&parsed),
        pairs(&[("tools.only", "Unsupported capability field: tools.only")])
    );
    let mut value = minimal("x", json!({}));
    value["mode"] = json!("append");
    let parsed = parse(value);
    assert_eq!(
        errors(&parsed),
        pairs(&[("mode", "Unsupported capability field: mode")])
    );
    assert_eq!(parsed.raw.as_ref().unwrap()["mode"], json!("append"));
    assert!(!serialize_capability(&parsed.capability).contains("mode"));
}

// F21
#[test]
fn content_length_limit_counts_utf16_units() {
    let parsed = parse(minimal(&"a".repeat(100_000), json!({})));
    assert_eq!(parsed.diagnostics, vec![]);
    let parsed = parse(minimal(&"a".repeat(100_001), json!({})));
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "content",
            "content must be at most 100000 characters (got 100001)."
        )])
    );
    // 50,000 astral characters = 100,000 UTF-16 units: ok; one more BMP char is too many.
    let parsed = parse(minimal(&"😀".repeat(50_000), json!({})));
    assert_eq!(parsed.diagnostics, vec![]);
    let parsed = parse(minimal(&format!("{}é", "😀".repeat(50_000)), json!({})));
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "content",
            "content must be at most 100000 characters (got 100001)."
        )])
    );
    let mut value = minimal("x", json!({}));
    value["name"] = json!("n".repeat(1001));
    assert_eq!(
        errors(&parse(value.clone())),
        pairs(&[(
            "name",
            "Capability name must be at most 1000 characters (got 1001)."
        )])
    );
    value["name"] = json!("n".repeat(1000));
    assert_eq!(parse(value).diagnostics, vec![]);
}

// F22
#[test]
fn tool_only_capability_is_valid() {
    let parsed = parse(minimal("", json!({"add": ["bash"]})));
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(parsed.capability.content, "");
    assert_eq!(parsed.capability.tools.add, vec!["bash".to_string()]);
}

#[test]
fn wrong_types_everywhere() {
    let parsed = parse_capability_value(
        json!({
            "schemaVersion": "1",
            "type": null,
            "id": 12,
            "name": false,
            "description": {},
            "content": ["text"],
            "tools": ["read"]
        }),
        "typed.json",
        "r".into(),
    );
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("schemaVersion", "Capability schemaVersion must be 1."),
            ("type", "Capability type must be \"pi-forge.capability\"."),
            ("id", "Capability id must be a string, got number."),
            ("name", "Capability name must be a string, got boolean."),
            (
                "description",
                "Capability description must be a string, got object."
            ),
            ("content", "Capability content must be a string, got array."),
            (
                "tools",
                "Capability tools must be an object with optional add and remove arrays, got array."
            ),
            ("content", EFFECT_RULE),
        ])
    );
    assert_eq!(parsed.capability, Capability::fault("typed"));
    assert_eq!(parsed.source_revision, "r");

    let parsed = parse(minimal("x", json!({"add": "read", "remove": {"a": 1}})));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            (
                "tools.add",
                "tools.add must be an array of tool names, got string."
            ),
            (
                "tools.remove",
                "tools.remove must be an array of tool names, got object."
            ),
        ])
    );
    let parsed = parse(json!({"schemaVersion":1,"type":"pi-forge.capability","id":"c"}));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            (
                "content",
                "Capability content is required (a string; it may be empty when tools has an effect)."
            ),
            ("content", EFFECT_RULE),
        ])
    );
    let parsed = parse_capability_value(
        json!({"schemaVersion":1,"type":"pi-forge.capability","content":"x"}),
        "nameless.json",
        String::new(),
    );
    assert_eq!(
        errors(&parsed),
        pairs(&[("id", "Capability id is required.")])
    );
    assert_eq!(parsed.capability.id, "nameless");
}

#[test]
fn bad_ids() {
    for bad in ["..", "../x", "a/b", "global:x", " review", "", "-a", "a*"] {
        let mut value = minimal("x", json!({}));
        value["id"] = json!(bad);
        let parsed = parse(value);
        assert_eq!(
            errors(&parsed),
            pairs(&[("id", &format!("Capability id {ID_RULE_TEXT}."))]),
            "{bad:?}"
        );
        assert_eq!(parsed.capability.id, bad);
    }
}

#[test]
fn faults() {
    let parsed = parse_capability_bytes(b"{\"id\": ", "broken.json");
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Failed to parse JSON: EOF while parsing a value at line 1 column 7"
        )
        .with_position(1, 7)]
    );
    assert_eq!(parsed.capability, Capability::fault("broken"));
    assert_eq!(parsed.raw, None);
    assert_eq!(parsed.source_revision, sha256_hex(b"{\"id\": "));

    let parsed = parse_capability_bytes(b"\xfe\xff", "bin.json");
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Failed to parse JSON: file is not valid UTF-8 (invalid byte at offset 0)"
        )]
    );
    assert_eq!(parsed.capability.id, "bin");

    let mut big = serialize_capability(&review()).into_bytes();
    big.resize(MAX_CAPABILITY_SOURCE_SIZE, b'\n');
    let parsed = parse_capability_bytes(&big, "review.json");
    assert_eq!(parsed.diagnostics, vec![]);
    big.push(b'\n');
    let parsed = parse_capability_bytes(&big, "review.json");
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Capability file is too large: 1048577 bytes (the limit is 1048576 bytes)."
        )]
    );
    assert_eq!(parsed.capability, Capability::fault("review"));
    assert_eq!(parsed.source_revision, sha256_hex(&big));
    assert!(!parsed.usable());

    let parsed = parse_capability_bytes(b"[1]", "arr.json");
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Capability must be a JSON object, got array."
        )]
    );
    assert_eq!(parsed.raw, Some(json!([1])));

    let parsed = fault_capability("dir/gone.json", "Failed to read capability: denied");
    assert_eq!(parsed.capability.id, "gone");
    assert_eq!(parsed.source_revision, "");
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error("Failed to read capability: denied")]
    );
}

fn readme_binding() -> Value {
    json!([{
        "ref": "global:review",
        "id": "review",
        "modelCallable": true,
        "overrides": {
            "appendContent": "Also inspect backwards compatibility.",
            "tools": { "add": ["grep", "find"] }
        }
    }])
}

#[test]
fn readme_binding_parses() {
    let (bindings, diagnostics) = parse_bindings(&readme_binding(), Scope::Project);
    assert_eq!(diagnostics, vec![]);
    assert_eq!(
        bindings,
        vec![Binding {
            reference: Selector::Scoped(ResourceKey::new(Scope::Global, "review")),
            id: Some("review".into()),
            model_callable: true,
            overrides: Some(Overrides {
                content: Some(ContentOverride::Append(
                    "Also inspect backwards compatibility.".into()
                )),
                tools: Some(ToolOverride {
                    add: Some(vec!["grep".into(), "find".into()]),
                    remove: None,
                }),
            }),
        }]
    );
    assert_eq!(bindings[0].effective_id(), "review");
    assert_eq!(
        bindings[0].target(Scope::Project),
        ResourceKey::new(Scope::Global, "review")
    );
    let (bindings, diagnostics) = parse_bindings(&json!([{"ref": "review"}]), Scope::Global);
    assert_eq!(diagnostics, vec![]);
    assert_eq!(
        bindings[0].target(Scope::Global),
        ResourceKey::new(Scope::Global, "review")
    );
    assert!(!bindings[0].model_callable);
    assert_eq!(bindings[0].overrides, None);
    assert_eq!(parse_bindings(&json!([]), Scope::Project), (vec![], vec![]));
}

// F23
#[test]
fn content_and_append_are_exclusive() {
    let (bindings, diagnostics) = parse_bindings(
        &json!([{"ref": "review", "overrides": {"content": "X", "appendContent": "Y"}}]),
        Scope::Project,
    );
    assert_eq!(bindings, vec![]);
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[(
            "capabilities[0].overrides",
            "capabilities[0].overrides.content and capabilities[0].overrides.appendContent are mutually exclusive."
        )])
    );
}

fn append(text: &str) -> Overrides {
    Overrides {
        content: Some(ContentOverride::Append(text.into())),
        tools: None,
    }
}

// F24
#[test]
fn append_content_rules() {
    let base = Capability {
        id: "a".into(),
        content: "A".into(),
        ..Capability::default()
    };
    assert_eq!(
        effective_capability(&base, Some(&append("B")))
            .unwrap()
            .content,
        "A\n\nB"
    );
    assert_eq!(
        effective_capability(&base, Some(&append("")))
            .unwrap()
            .content,
        "A"
    );
    let empty = Capability {
        id: "e".into(),
        content: String::new(),
        tools: ToolPatch::new(["read"], Vec::<String>::new()),
        ..Capability::default()
    };
    assert_eq!(
        effective_capability(&empty, Some(&append("B")))
            .unwrap()
            .content,
        "B"
    );
    let replace = Overrides {
        content: Some(ContentOverride::Replace("R".into())),
        tools: None,
    };
    assert_eq!(
        effective_capability(&base, Some(&replace)).unwrap().content,
        "R"
    );
    assert_eq!(effective_capability(&base, None).unwrap(), base);

    // Tool-only base, appendContent "" and tools cleared → nothing left.
    let cleared = Overrides {
        content: Some(ContentOverride::Append(String::new())),
        tools: Some(ToolOverride {
            add: Some(vec![]),
            remove: Some(vec![]),
        }),
    };
    assert_eq!(
        effective_capability(&empty, Some(&cleared)).unwrap_err(),
        vec![Diagnostic::error(EFFECT_RULE).with_field("content")]
    );
    // Overrides cannot push content past the limit.
    let long = Capability {
        id: "l".into(),
        content: "a".repeat(99_999),
        ..Capability::default()
    };
    assert_eq!(
        effective_capability(&long, Some(&append("b"))).unwrap_err(),
        vec![
            Diagnostic::error("content must be at most 100000 characters (got 100002).")
                .with_field("content")
        ]
    );
}

// F25
#[test]
fn tool_overrides_replace_whole_lists() {
    let base = Capability {
        id: "t".into(),
        content: "x".into(),
        tools: ToolPatch::new(["g"], ["b"]),
        ..Capability::default()
    };
    let (bindings, diagnostics) = parse_bindings(
        &json!([{"ref": "t", "overrides": {"tools": {"add": []}}}]),
        Scope::Project,
    );
    assert_eq!(diagnostics, vec![]);
    let effective = effective_capability(&base, bindings[0].overrides.as_ref()).unwrap();
    assert_eq!(effective.tools, ToolPatch::new(Vec::<String>::new(), ["b"]));
    assert_eq!(effective.id, "t");
    let (bindings, _) = parse_bindings(
        &json!([{"ref": "t", "overrides": {"tools": {"remove": ["c", "d"]}}}]),
        Scope::Project,
    );
    let effective = effective_capability(&base, bindings[0].overrides.as_ref()).unwrap();
    assert_eq!(effective.tools, ToolPatch::new(["g"], ["c", "d"]));
}

#[test]
fn effective_from_parsed_refuses_broken_bases() {
    let parsed = parse(minimal("", json!({})));
    assert_eq!(
        effective_from_parsed(&parsed, Some(&append("fix"))).unwrap_err(),
        vec![
            Diagnostic::error(format!("Capability cap is invalid: {EFFECT_RULE}"))
                .with_field("content")
        ]
    );
    let parsed = parse(review_json());
    assert_eq!(effective_from_parsed(&parsed, None).unwrap(), review());
}

// F26
#[test]
fn duplicate_effective_binding_ids() {
    let (bindings, diagnostics) = parse_bindings(
        &json!([{"ref": "review"}, {"ref": "global:review"}]),
        Scope::Project,
    );
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[(
            "capabilities[1]",
            "Duplicate binding id \"review\" at index 1"
        )])
    );
    assert_eq!(bindings.len(), 1);
    assert_eq!(bindings[0].reference, Selector::Bare("review".into()));

    let (bindings, diagnostics) = parse_bindings(
        &json!([{"ref": "review"}, {"ref": "global:review", "id": "review-global"}]),
        Scope::Project,
    );
    assert_eq!(diagnostics, vec![]);
    assert_eq!(
        bindings
            .iter()
            .map(Binding::effective_id)
            .collect::<Vec<_>>(),
        vec!["review", "review-global"]
    );

    // A broken binding still claims its id.
    let (bindings, diagnostics) = parse_bindings(
        &json!([{"ref": "a", "modelCallable": "yes"}, {"ref": "global:a"}]),
        Scope::Project,
    );
    assert_eq!(bindings, vec![]);
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[
            (
                "capabilities[0].modelCallable",
                "capabilities[0].modelCallable must be a boolean, got string."
            ),
            ("capabilities[1]", "Duplicate binding id \"a\" at index 1"),
        ])
    );
}

// F27
#[test]
fn global_preset_cannot_bind_project_capability() {
    let (bindings, diagnostics) = parse_bindings(&json!([{"ref": "project:x"}]), Scope::Global);
    assert_eq!(bindings, vec![]);
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[(
            "capabilities[0].ref",
            "capabilities[0].ref: a global Preset cannot reference the project capability project:x."
        )])
    );
    let (bindings, diagnostics) = parse_bindings(&json!([{"ref": "project:x"}]), Scope::Project);
    assert_eq!(diagnostics, vec![]);
    assert_eq!(bindings.len(), 1);
}

// F30
#[test]
fn binding_limit() {
    let items: Vec<Value> = (0..257).map(|i| json!({"ref": format!("c{i}")})).collect();
    let (bindings, diagnostics) = parse_bindings(&Value::Array(items.clone()), Scope::Project);
    assert_eq!(bindings, vec![]);
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[("capabilities", "Exceeded maximum bindings limit of 256")])
    );
    let (bindings, diagnostics) =
        parse_bindings(&Value::Array(items[..256].to_vec()), Scope::Project);
    assert_eq!(diagnostics, vec![]);
    assert_eq!(bindings.len(), 256);
}

#[test]
fn binding_wrong_types() {
    let value = json!([
        "review",
        {},
        {"ref": 3},
        {"ref": "  "},
        {"ref": "team:x"},
        {"ref": "ok1", "id": "bad id"},
        {"ref": "ok2", "id": 4},
        {"ref": "ok3", "extra": true},
        {"ref": "ok4", "overrides": []},
        {"ref": "ok5", "overrides": {"content": 1, "mode": "x"}},
        {"ref": "ok6", "overrides": {"tools": {"add": ["a b"], "only": []}}},
        {"ref": "ok7", "overrides": {"tools": "read"}},
        {"ref": "ok8", "overrides": {"appendContent": "z".repeat(100_001)}},
        {"ref": "ok9", "overrides": {"tools": {"remove": "x"}}}
    ]);
    let (bindings, diagnostics) = parse_bindings(&value, Scope::Project);
    assert_eq!(bindings, vec![]);
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[
            ("capabilities[0]", "capabilities[0] must be a capability binding object, got string."),
            ("capabilities[1].ref", "capabilities[1].ref is required."),
            ("capabilities[2].ref", "capabilities[2].ref must be a non-empty capability selector string, got number."),
            ("capabilities[3].ref", "capabilities[3].ref must be a non-empty capability selector string, got an empty string."),
            ("capabilities[4].ref", "capabilities[4].ref is not a valid capability selector: Unknown scope prefix: team. Expected \"project\" or \"global\"."),
            ("capabilities[5].id", &format!("capabilities[5].id is not a valid binding id: binding ids {ID_RULE_TEXT}.")),
            ("capabilities[6].id", "capabilities[6].id must be a string, got number."),
            ("capabilities[7].extra", "Unsupported capability binding field: capabilities[7].extra"),
            ("capabilities[8].overrides", "capabilities[8].overrides must be an object, got array."),
            ("capabilities[9].overrides.mode", "Unsupported capability binding field: capabilities[9].overrides.mode"),
            ("capabilities[9].overrides.content", "capabilities[9].overrides.content must be a string, got number."),
            ("capabilities[10].overrides.tools.only", "Unsupported capability binding field: capabilities[10].overrides.tools.only"),
            ("capabilities[10].overrides.tools.add[0]", "Tool name \"a b\" in capabilities[10].overrides.tools.add must not contain whitespace."),
            ("capabilities[11].overrides.tools", "capabilities[11].overrides.tools must be an object with optional add and remove arrays, got string."),
            ("capabilities[12].overrides.appendContent", "capabilities[12].overrides.appendContent must be at most 100000 characters (got 100001)."),
            ("capabilities[13].overrides.tools.remove", "capabilities[13].overrides.tools.remove must be an array of tool names, got string."),
        ])
    );
    let (bindings, diagnostics) = parse_bindings(&json!({"ref": "x"}), Scope::Project);
    assert_eq!(bindings, vec![]);
    assert_eq!(
        errors_of(&diagnostics),
        pairs(&[(
            "capabilities",
            "capabilities must be an array of capability bindings, got object."
        )])
    );
}

fn snapshot_of(source: SnapshotSource, capability: &Capability) -> CapabilitySnapshot {
    CapabilitySnapshot::from_capability("00000000-0000-4000-8000-000000000001", source, capability)
}

// C5 #11
#[test]
fn snapshot_direct() {
    let snapshot = snapshot_of(
        SnapshotSource::Capability {
            key: ResourceKey::new(Scope::Project, "review"),
            binding: None,
        },
        &review(),
    );
    assert_eq!(
        canonical(&snapshot.fingerprint_value()),
        r#"{"content":"List findings, evidence and risks. Do not directly edit files.","name":"Review","schemaVersion":1,"source":{"key":{"id":"review","scope":"project"},"kind":"capability"},"tools":{"add":["grep","find","ls"],"remove":["bash","powershell","write","edit"]},"type":"pi-forge.capability-snapshot"}"#
    );
    assert_eq!(
        snapshot.fingerprint(),
        "sha256:v1:f92c6b56c11b0ea645f3ec6a9ab3afed8fbd9f47a77d1b76f8be84fb027b3cdf"
    );
    // The activation id is not part of the fingerprint.
    let other = CapabilitySnapshot {
        activation_id: "another".into(),
        ..snapshot.clone()
    };
    assert_eq!(other.fingerprint(), snapshot.fingerprint());
    assert_eq!(snapshot.validate(), vec![]);
    assert_eq!(snapshot.source.label(), "project:review");
}

// C5 #12: the README binding applied to the README capability.
#[test]
fn snapshot_through_binding() {
    let (bindings, diagnostics) = parse_bindings(&readme_binding(), Scope::Project);
    assert_eq!(diagnostics, vec![]);
    let binding = &bindings[0];
    let base = parse_capability_bytes(serialize_capability(&review()).as_bytes(), "review.json");
    let effective = effective_from_parsed(&base, binding.overrides.as_ref()).unwrap();
    assert_eq!(
        effective.content,
        format!("{REVIEW_CONTENT}\n\nAlso inspect backwards compatibility.")
    );
    assert_eq!(
        effective.tools,
        ToolPatch::new(["grep", "find"], ["bash", "powershell", "write", "edit"])
    );
    assert_eq!(effective.name.as_deref(), Some("Review"));
    assert_eq!(
        effective.description.as_deref(),
        Some("Report findings and evidence before editing.")
    );
    let snapshot = snapshot_of(
        SnapshotSource::Capability {
            key: binding.target(Scope::Project),
            binding: Some(BindingSource {
                preset: ResourceKey::new(Scope::Project, "worker"),
                id: binding.effective_id().to_string(),
            }),
        },
        &effective,
    );
    assert_eq!(
        snapshot.fingerprint(),
        "sha256:v1:faaeea68e75760146b8d975bb24342f5cd822bac028258c9efe8887551a37cf6"
    );
    assert_eq!(snapshot.validate(), vec![]);
    assert_eq!(
        snapshot.source.binding().map(|b| b.id.as_str()),
        Some("review")
    );
}

// C5 #13
#[test]
fn snapshot_manual() {
    let snapshot = CapabilitySnapshot {
        activation_id: "a1".into(),
        source: SnapshotSource::Manual,
        name: None,
        content: "Answer in French.".into(),
        tools: ToolPatch::default(),
    };
    assert_eq!(
        canonical(&snapshot.fingerprint_value()),
        r#"{"content":"Answer in French.","schemaVersion":1,"source":{"kind":"manual"},"tools":{"add":[],"remove":[]},"type":"pi-forge.capability-snapshot"}"#
    );
    assert_eq!(
        snapshot.fingerprint(),
        "sha256:v1:c305bedeff64ad48b511dae6e53356707c2b18b618872a026960886ccbda0218"
    );
    assert_eq!(snapshot.source.label(), "manual");
}

// C5 #14
#[test]
fn snapshot_tool_only() {
    let parsed = parse_capability_value(
        json!({"schemaVersion":1,"type":"pi-forge.capability","id":"write-tools","content":"","tools":{"add":["bash","edit"]}}),
        "write-tools.json",
        String::new(),
    );
    assert_eq!(parsed.diagnostics, vec![]);
    let snapshot = snapshot_of(
        SnapshotSource::Capability {
            key: ResourceKey::new(Scope::Project, "write-tools"),
            binding: None,
        },
        &parsed.capability,
    );
    assert_eq!(
        snapshot.fingerprint(),
        "sha256:v1:921b0348e1c572653ce5cc4ed82a0044616978ba733421004f18bee7a03e1055"
    );
}

#[test]
fn snapshot_decoding() {
    let snapshot = snapshot_of(
        SnapshotSource::Capability {
            key: ResourceKey::new(Scope::Global, "review"),
            binding: Some(BindingSource {
                preset: ResourceKey::new(Scope::Project, "worker"),
                id: "review".into(),
            }),
        },
        &review(),
    );
    let value = snapshot.to_value();
    assert_eq!(
        forge_core::json::to_compact(&value),
        format!(
            r#"{{"activationId":"00000000-0000-4000-8000-000000000001","source":{{"kind":"capability","key":{{"scope":"global","id":"review"}},"binding":{{"preset":{{"scope":"project","id":"worker"}},"id":"review"}}}},"name":"Review","content":"{REVIEW_CONTENT}","tools":{{"add":["grep","find","ls"],"remove":["bash","powershell","write","edit"]}},"fingerprint":"{}"}}"#,
            snapshot.fingerprint()
        )
    );
    assert_eq!(CapabilitySnapshot::from_value(&value).unwrap(), snapshot);

    let mut tampered = value.clone();
    tampered["content"] = json!("changed");
    assert_eq!(
        CapabilitySnapshot::from_value(&tampered).unwrap_err(),
        vec![Diagnostic::error("Snapshot fingerprint mismatch").with_field("fingerprint")]
    );

    let mut extra = value.clone();
    extra["source"]["extra"] = json!(1);
    extra["x"] = json!(1);
    assert_eq!(
        errors_of(&CapabilitySnapshot::from_value(&extra).unwrap_err()),
        pairs(&[
            ("x", "Unsupported snapshot field: x"),
            ("source.extra", "Unsupported snapshot field: source.extra"),
        ])
    );

    let mut manual_with_key = value.clone();
    manual_with_key["source"] = json!({"kind": "manual", "key": {"scope": "project", "id": "r"}});
    assert_eq!(
        errors_of(&CapabilitySnapshot::from_value(&manual_with_key).unwrap_err()),
        pairs(&[("source.key", "Unsupported snapshot field: source.key")])
    );

    let mut cross = snapshot.clone();
    cross.source = SnapshotSource::Capability {
        key: ResourceKey::new(Scope::Project, "review"),
        binding: Some(BindingSource {
            preset: ResourceKey::new(Scope::Global, "worker"),
            id: "review".into(),
        }),
    };
    assert_eq!(
        errors_of(&CapabilitySnapshot::from_value(&cross.to_value()).unwrap_err()),
        pairs(&[(
            "source.binding",
            "A binding of a global Preset cannot target a project capability."
        )])
    );

    let mut bad = value.clone();
    bad["activationId"] = json!("a".repeat(129));
    bad["tools"] = json!({"add": ["a b"]});
    bad["source"]["key"]["scope"] = json!("team");
    assert_eq!(
        errors_of(&CapabilitySnapshot::from_value(&bad).unwrap_err()),
        pairs(&[
            (
                "source.key.scope",
                "source.key.scope must be \"project\" or \"global\"."
            ),
            (
                "tools.add[0]",
                "Tool name \"a b\" in tools.add must not contain whitespace."
            ),
            (
                "tools.remove",
                "tools.remove must be an array of tool names."
            ),
        ])
    );
    let mut long_id = value.clone();
    long_id["activationId"] = json!("a".repeat(129));
    assert_eq!(
        errors_of(&CapabilitySnapshot::from_value(&long_id).unwrap_err()),
        pairs(&[(
            "activationId",
            "activationId must be at most 128 characters (got 129)."
        )])
    );
    assert_eq!(
        errors_of(&CapabilitySnapshot::from_value(&json!(null)).unwrap_err()),
        pairs(&[("snapshot", "snapshot must be an object, got null.")])
    );
    let mut empty = snapshot.clone();
    empty.content = " ".into();
    empty.tools = ToolPatch::default();
    assert_eq!(
        errors_of(&empty.validate()),
        pairs(&[("content", EFFECT_RULE)])
    );
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-z_][a-z0-9_.-]{0,10}",
        1 => "[a-z ]{1,4}",
        1 => "[a-z*?]{1,3}",
    ]
}

fn capability_strategy() -> impl Strategy<Value = Capability> {
    (
        prop_oneof!["[A-Za-z0-9][A-Za-z0-9._-]{0,10}", "\\PC{0,6}"],
        prop::option::of("\\PC{0,12}"),
        prop::option::of("\\PC{0,12}"),
        prop_oneof!["\\PC{0,40}", Just(String::new()), "[ \n]{0,3}"],
        prop::collection::vec(tool_name(), 0..4),
        prop::collection::vec(tool_name(), 0..4),
    )
        .prop_map(|(id, name, description, content, add, remove)| Capability {
            id,
            name,
            description,
            content,
            tools: ToolPatch { add, remove },
        })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |n| n.is_finite())
            .prop_map(|n| json!(n)),
        "\\PC{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("read"),
            Just("a b"),
            Just("global:x"),
            Just("pi-forge.capability")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("schemaVersion".to_string()),
                        Just("type".to_string()),
                        Just("id".to_string()),
                        Just("name".to_string()),
                        Just("content".to_string()),
                        Just("tools".to_string()),
                        Just("add".to_string()),
                        Just("remove".to_string()),
                        Just("ref".to_string()),
                        Just("overrides".to_string()),
                        Just("appendContent".to_string()),
                        Just("modelCallable".to_string()),
                        "[a-z]{1,3}",
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn generated_capabilities_round_trip(capability in capability_strategy()) {
        let first = serialize_capability(&capability);
        let parsed = parse_capability_bytes(first.as_bytes(), "c.json");
        prop_assert_eq!(&parsed.source_revision, &sha256_hex(first.as_bytes()));
        let second = serialize_capability(&parsed.capability);
        let reparsed = parse_capability_bytes(second.as_bytes(), "c.json");
        prop_assert_eq!(&serialize_capability(&reparsed.capability), &second);
        if parsed.usable() {
            // A clean capability is already normalized: bytes are stable from the start.
            prop_assert_eq!(&first, &second);
            prop_assert_eq!(&parsed.capability, &capability);
        }
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value(), global in any::<bool>()) {
        let parsed = parse_capability_value(value.clone(), "any.json", String::new());
        let first = serialize_capability(&parsed.capability);
        let second = serialize_capability(&parse_capability_bytes(first.as_bytes(), "any.json").capability);
        prop_assert_eq!(first, second);
        let scope = if global { Scope::Global } else { Scope::Project };
        let (bindings, _) = parse_bindings(&value, scope);
        for binding in &bindings {
            let _ = effective_capability(&parsed.capability, binding.overrides.as_ref());
        }
        let wrapped = Value::Array(vec![value.clone()]);
        let (bindings, diagnostics) = parse_bindings(&wrapped, scope);
        prop_assert!(bindings.len() <= 1);
        prop_assert!(bindings.is_empty() || diagnostics.is_empty());
        let _ = CapabilitySnapshot::from_value(&value);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let parsed = parse_capability_bytes(&bytes, "b.json");
        prop_assert_eq!(parsed.source_revision, sha256_hex(&bytes));
    }
}
