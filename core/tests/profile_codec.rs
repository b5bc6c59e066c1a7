//! Agent profile codec: spec A1, A7 (capture), C4, C5 rows 4 and 6, vectors F1–F8, F12, F14, F15.

use forge_core::diag::{Diagnostic, Level};
use forge_core::id::{ResourceKey, Scope};
use forge_core::profile::{
    capture_profile, fault_profile, parse_profile_bytes, parse_profile_value, serialize_profile,
    stack_reference_for, validate_profile, AgentProfile, ModelRef, ParsedProfile, RuntimeState,
    ThinkingLevel, MAX_PROFILE_BYTES,
};
use proptest::prelude::*;
use serde_json::{json, Value};

const README_PROFILE: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "reviewer",
  "name": "Reviewer",
  "description": "Reviews code without making changes.",
  "autoActivate": true,
  "model": {
    "provider": "provider-id",
    "id": "model-id"
  },
  "thinkingLevel": "high",
  "promptStack": "reviewer"
}
"#;

const ID_ERROR: &str = "Profile id must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.";

fn base() -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": "worker",
        "model": {"provider": "test", "id": "model"},
        "thinkingLevel": "high",
        "promptStack": "worker"
    })
}

fn with(mut value: Value, key: &str, field: Value) -> Value {
    value[key] = field;
    value
}

fn without(mut value: Value, key: &str) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.remove(key);
    }
    value
}

fn parse(value: Value) -> ParsedProfile {
    parse_profile_value(value, "worker.json", Scope::Project)
}

/// `(field, message)` of every diagnostic; all must be errors.
fn errors(parsed: &ParsedProfile) -> Vec<(String, String)> {
    parsed
        .diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d.level, Level::Error, "{d}");
            (d.field.clone().unwrap_or_default(), d.message.clone())
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect()
}

fn worker() -> AgentProfile {
    AgentProfile {
        id: "worker".into(),
        name: None,
        description: None,
        auto_activate: None,
        model: ModelRef::new("test", "model"),
        thinking_level: ThinkingLevel::High,
        prompt_stack: Some("worker".into()),
    }
}

// F1
#[test]
fn readme_profile_is_clean_and_round_trips() {
    let parsed = parse_profile_bytes(README_PROFILE.as_bytes(), "reviewer.json", Scope::Project);
    assert_eq!(parsed.diagnostics, vec![]);
    assert!(parsed.usable());
    assert_eq!(
        parsed.profile.key(Scope::Project).to_string(),
        "project:reviewer"
    );
    assert_eq!(
        parsed.profile,
        AgentProfile {
            id: "reviewer".into(),
            name: Some("Reviewer".into()),
            description: Some("Reviews code without making changes.".into()),
            auto_activate: Some(true),
            model: ModelRef::new("provider-id", "model-id"),
            thinking_level: ThinkingLevel::High,
            prompt_stack: Some("reviewer".into()),
        }
    );
    assert_eq!(serialize_profile(&parsed.profile), README_PROFILE);
    assert_eq!(
        parsed.raw,
        Some(serde_json::from_str(README_PROFILE).unwrap())
    );
}

// C4
#[test]
fn legacy_fingerprint_is_insertion_order_json() {
    let parsed = parse_profile_bytes(README_PROFILE.as_bytes(), "reviewer.json", Scope::Project);
    let legacy = parsed.profile.legacy_fingerprint();
    assert_eq!(
        legacy,
        r#"{"schemaVersion":1,"type":"pi-forge.agent-profile","id":"reviewer","name":"Reviewer","description":"Reviews code without making changes.","autoActivate":true,"model":{"provider":"provider-id","id":"model-id"},"thinkingLevel":"high","promptStack":"reviewer"}"#
    );
    let fp = parsed.profile.fingerprint();
    assert!(fp.starts_with("sha256:v1:"), "{fp}");
    assert_eq!(fp.len(), "sha256:v1:".len() + 64);
    assert!(
        fp.ends_with("80e21596ad0a28727300d2ddecb505e4f6bf2060009db8c2db0652f13e9544b8"),
        "{fp}"
    );
}

// C5 rows 4 and 6
#[test]
fn canonical_profile_fingerprints() {
    let profile = worker();
    assert_eq!(
        forge_core::canonical::canonical(&profile.to_value()),
        r#"{"id":"worker","model":{"id":"model","provider":"test"},"promptStack":"worker","schemaVersion":1,"thinkingLevel":"high","type":"pi-forge.agent-profile"}"#
    );
    assert_eq!(
        profile.fingerprint(),
        "sha256:v1:f209ac6b0ec3e1c7decc3cea8807856931596509dcdbce1a4c7d3eaeb1ccb8df"
    );
    let parsed = parse(base());
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(parsed.profile, profile);

    let no_stack = AgentProfile {
        prompt_stack: None,
        ..worker()
    };
    assert_eq!(
        no_stack.fingerprint(),
        "sha256:v1:1ea8e4da84595140fe0f4c6e75622923abca75899907a36b776cb814e7933e41"
    );
    assert_eq!(
        no_stack.legacy_fingerprint(),
        r#"{"schemaVersion":1,"type":"pi-forge.agent-profile","id":"worker","model":{"provider":"test","id":"model"},"thinkingLevel":"high","promptStack":null}"#
    );
    assert_eq!(
        parse(with(base(), "promptStack", Value::Null)).profile,
        no_stack
    );
}

// F2
#[test]
fn extra_field_is_an_error() {
    let parsed = parse(with(base(), "tools", json!(["read"])));
    assert_eq!(
        errors(&parsed),
        pairs(&[("tools", "Unsupported profile field: tools")])
    );
    assert!(!parsed.usable());
    assert_eq!(parsed.profile, worker());
    assert_eq!(parsed.raw.as_ref().unwrap()["tools"], json!(["read"]));
    // Normalized output drops the unknown field.
    assert_eq!(
        serialize_profile(&parsed.profile),
        serialize_profile(&worker())
    );

    let parsed = parse(
        with(base(), "skills", json!([]))
            .as_object()
            .unwrap()
            .clone()
            .into_iter()
            .chain([
                ("temperature".to_string(), json!(0.2)),
                ("backend".into(), json!("x")),
            ])
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("skills", "Unsupported profile field: skills"),
            ("temperature", "Unsupported profile field: temperature"),
            ("backend", "Unsupported profile field: backend"),
        ])
    );
}

// F3
#[test]
fn model_extra_key_and_empty_provider() {
    let parsed = parse(with(
        base(),
        "model",
        json!({"provider": "", "id": "m", "topP": 0.9}),
    ));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("model.topP", "Unsupported profile field: model.topP"),
            (
                "model.provider",
                "Profile model.provider must be a non-empty string."
            ),
        ])
    );
    assert_eq!(parsed.profile.model, ModelRef::new("", "m"));
}

// F4
#[test]
fn schema_version_and_type() {
    let parsed = parse(with(
        with(base(), "schemaVersion", json!(2)),
        "type",
        json!("other"),
    ));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("schemaVersion", "Profile schemaVersion must be 1."),
            ("type", "Profile type must be \"pi-forge.agent-profile\"."),
        ])
    );
    // Normalization always writes the current schema.
    assert_eq!(parsed.profile, worker());
    // JSON.parse reads 1.0 as the number 1.
    let parsed = parse_profile_bytes(
        br#"{"schemaVersion":1.0,"type":"pi-forge.agent-profile","id":"w","model":{"provider":"p","id":"m"},"thinkingLevel":"off","promptStack":null}"#,
        "w.json",
        Scope::Global,
    );
    assert_eq!(parsed.diagnostics, vec![]);
    let parsed = parse(without(without(base(), "schemaVersion"), "type"));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("schemaVersion", "Profile schemaVersion must be 1."),
            ("type", "Profile type must be \"pi-forge.agent-profile\"."),
        ])
    );
    let parsed = parse(with(base(), "schemaVersion", json!("1")));
    assert_eq!(
        errors(&parsed),
        pairs(&[("schemaVersion", "Profile schemaVersion must be 1.")])
    );
}

// F5 and more bad ids
#[test]
fn id_grammar() {
    let parsed = parse(with(base(), "id", json!("../bad")));
    assert_eq!(errors(&parsed), pairs(&[("id", ID_ERROR)]));
    assert_eq!(parsed.profile.id, "../bad");
    assert_eq!(
        parsed.profile.key(Scope::Project),
        ResourceKey::new(Scope::Project, "../bad")
    );
    for bad in ["..", "a/b", "project:x", ".hidden", "-x", "a b", "é"] {
        let parsed = parse(with(base(), "id", json!(bad)));
        assert_eq!(errors(&parsed), pairs(&[("id", ID_ERROR)]), "{bad}");
        assert_eq!(parsed.profile.id, bad);
    }
    // Trimmed before checking.
    let parsed = parse(with(base(), "id", json!("  worker\t")));
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(parsed.profile.id, "worker");
    // Empty after trimming.
    let parsed = parse(with(base(), "id", json!("   ")));
    assert_eq!(
        errors(&parsed),
        pairs(&[("id", "Profile id must be a non-empty string.")])
    );
    assert_eq!(parsed.profile.id, "");
    // Missing or wrong type: basename fallback.
    let parsed = parse_profile_value(without(base(), "id"), "dir/fallback.json", Scope::Project);
    assert_eq!(errors(&parsed), pairs(&[("id", "Profile id is required.")]));
    assert_eq!(parsed.profile.id, "fallback");
    let parsed = parse_profile_value(with(base(), "id", json!(7)), "seven.json", Scope::Project);
    assert_eq!(
        errors(&parsed),
        pairs(&[("id", "Profile id must be a string, got number.")])
    );
    assert_eq!(parsed.profile.id, "seven");
}

// F6
#[test]
fn thinking_level_and_auto_activate() {
    let parsed = parse(with(base(), "thinkingLevel", json!("turbo")));
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "thinkingLevel",
            "Profile thinkingLevel must be one of: off, minimal, low, medium, high, xhigh, max."
        )])
    );
    assert_eq!(parsed.profile.thinking_level, ThinkingLevel::Off);
    let parsed = parse(with(base(), "autoActivate", json!("yes")));
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "autoActivate",
            "Profile autoActivate must be a boolean, got string."
        )])
    );
    assert_eq!(parsed.profile.auto_activate, None);
    for level in ["off", "minimal", "low", "medium", "high", "xhigh", "max"] {
        let parsed = parse(with(base(), "thinkingLevel", json!(level)));
        assert_eq!(parsed.diagnostics, vec![]);
        assert_eq!(parsed.profile.thinking_level.as_str(), level);
    }
    let parsed = parse(with(base(), "thinkingLevel", json!(" high")));
    assert_eq!(parsed.profile.thinking_level, ThinkingLevel::Off);
    assert_eq!(parsed.diagnostics.len(), 1);
    let parsed = parse(with(base(), "autoActivate", json!(false)));
    assert_eq!(parsed.profile.auto_activate, Some(false));
    assert!(serialize_profile(&parsed.profile).contains("\"autoActivate\": false,\n"));
}

// F7
#[test]
fn prompt_stack_rules() {
    let parsed = parse(without(base(), "promptStack"));
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "promptStack",
            "Profile promptStack is required (use null for no prompt stack)."
        )])
    );
    assert_eq!(parsed.profile.prompt_stack, None);
    let message = "Profile promptStack must be null or a non-empty prompt stack selector.";
    for bad in [
        json!(""),
        json!("   "),
        json!(3),
        json!(["x"]),
        json!(false),
    ] {
        let parsed = parse(with(base(), "promptStack", bad.clone()));
        assert_eq!(errors(&parsed), pairs(&[("promptStack", message)]), "{bad}");
    }
    let parsed = parse(with(base(), "promptStack", Value::Null));
    assert_eq!(parsed.diagnostics, vec![]);
    assert!(parsed.usable());
    let parsed = parse(with(base(), "promptStack", json!("  global:shared ")));
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(
        parsed.profile.prompt_stack.as_deref(),
        Some("global:shared")
    );
}

// F8 and other faults
#[test]
fn faults() {
    let parsed = parse_profile_bytes(b"{not json", "broken.json", Scope::Project);
    assert_eq!(parsed.diagnostics.len(), 1);
    assert_eq!(
        parsed.diagnostics[0],
        Diagnostic::error("Failed to parse JSON: key must be a string at line 1 column 2")
            .with_position(1, 2)
    );
    assert!(parsed.diagnostics[0]
        .message
        .starts_with("Failed to parse JSON"));
    assert_eq!(parsed.profile, AgentProfile::fault("broken"));
    assert_eq!(parsed.profile.model, ModelRef::new("", ""));
    assert_eq!(parsed.profile.thinking_level, ThinkingLevel::Off);
    assert_eq!(parsed.profile.prompt_stack, None);
    assert_eq!(parsed.raw, None);
    assert!(!parsed.usable());

    let parsed = parse_profile_bytes(b"{\"id\":\"\xff\"}", "bin.json", Scope::Project);
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Failed to parse JSON: file is not valid UTF-8 (invalid byte at offset 7)"
        )]
    );
    assert_eq!(parsed.profile.id, "bin");

    let parsed = parse_profile_bytes(b"", "empty.json", Scope::Project);
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Failed to parse JSON: EOF while parsing a value at line 1 column 0"
        )
        .with_position(1, 0)]
    );

    let mut big = README_PROFILE.as_bytes().to_vec();
    big.resize(MAX_PROFILE_BYTES, b' ');
    let parsed = parse_profile_bytes(&big, "reviewer.json", Scope::Project);
    assert_eq!(parsed.diagnostics, vec![]);
    big.push(b' ');
    let parsed = parse_profile_bytes(&big, "reviewer.json", Scope::Project);
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error(
            "Profile file is too large: 1048577 bytes (the limit is 1048576 bytes)."
        )]
    );
    assert_eq!(parsed.profile, AgentProfile::fault("reviewer"));

    for (root, kind) in [
        (json!([]), "array"),
        (json!("x"), "string"),
        (Value::Null, "null"),
    ] {
        let parsed = parse_profile_value(root.clone(), "odd.json", Scope::Project);
        assert_eq!(
            parsed.diagnostics,
            vec![Diagnostic::error(format!(
                "Profile must be a JSON object, got {kind}."
            ))]
        );
        assert_eq!(parsed.profile, AgentProfile::fault("odd"));
        assert_eq!(parsed.raw, Some(root));
    }

    let parsed = fault_profile("x/y/gone.json", "Failed to read agent profile: denied");
    assert_eq!(
        parsed.diagnostics,
        vec![Diagnostic::error("Failed to read agent profile: denied")]
    );
    assert_eq!(parsed.profile.id, "gone");
}

// Wrong types everywhere.
#[test]
fn wrong_types_everywhere() {
    let value = json!({
        "schemaVersion": "one",
        "type": 5,
        "id": {"x": 1},
        "name": 1,
        "description": [],
        "autoActivate": 0,
        "model": "provider/model",
        "thinkingLevel": true,
        "promptStack": 12
    });
    let parsed = parse_profile_value(value, "typed.json", Scope::Global);
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("schemaVersion", "Profile schemaVersion must be 1."),
            ("type", "Profile type must be \"pi-forge.agent-profile\"."),
            ("id", "Profile id must be a string, got object."),
            ("name", "Profile name must be a string, got number."),
            ("description", "Profile description must be a string, got array."),
            ("autoActivate", "Profile autoActivate must be a boolean, got number."),
            (
                "model",
                "Profile model must be an object with provider and id, got string."
            ),
            (
                "thinkingLevel",
                "Profile thinkingLevel must be one of: off, minimal, low, medium, high, xhigh, max."
            ),
            (
                "promptStack",
                "Profile promptStack must be null or a non-empty prompt stack selector."
            ),
            (
                "model.provider",
                "Profile model.provider must be a non-empty string."
            ),
            ("model.id", "Profile model.id must be a non-empty string."),
        ])
    );
    assert_eq!(
        serialize_profile(&parsed.profile),
        "{\n  \"schemaVersion\": 1,\n  \"type\": \"pi-forge.agent-profile\",\n  \"id\": \"typed\",\n  \"model\": {\n    \"provider\": \"\",\n    \"id\": \"\"\n  },\n  \"thinkingLevel\": \"off\",\n  \"promptStack\": null\n}\n"
    );

    let parsed = parse(with(base(), "model", json!({"provider": 1, "id": null})));
    assert_eq!(
        errors(&parsed),
        pairs(&[
            (
                "model.provider",
                "Profile model.provider must be a non-empty string."
            ),
            ("model.id", "Profile model.id must be a non-empty string."),
        ])
    );
    let parsed = parse(without(base(), "model"));
    assert_eq!(
        errors(&parsed)[0],
        (
            "model".to_string(),
            "Profile model is required: an object with provider and id.".to_string()
        )
    );
    let parsed = parse(with(
        base(),
        "model",
        json!({"provider": " p ", "id": "\u{feff}m\n"}),
    ));
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(parsed.profile.model, ModelRef::new("p", "m"));
    let parsed = parse(with(base(), "name", Value::Null));
    assert_eq!(
        errors(&parsed),
        pairs(&[("name", "Profile name must be a string, got null.")])
    );
}

// F12 (pure part)
#[test]
fn global_profile_cannot_reference_project_stack() {
    let value = with(base(), "promptStack", json!("project:x"));
    let parsed = parse_profile_value(value.clone(), "worker.json", Scope::Global);
    assert_eq!(
        errors(&parsed),
        pairs(&[(
            "promptStack",
            "A global profile cannot reference a project prompt stack: project:x."
        )])
    );
    assert_eq!(parsed.profile.prompt_stack.as_deref(), Some("project:x"));
    let parsed = parse_profile_value(value, "worker.json", Scope::Project);
    assert_eq!(parsed.diagnostics, vec![]);
    for ok in ["global:x", "x"] {
        let parsed = parse_profile_value(
            with(base(), "promptStack", json!(ok)),
            "w.json",
            Scope::Global,
        );
        assert_eq!(parsed.diagnostics, vec![], "{ok}");
    }
}

// F14 through the profile codec
#[test]
fn prompt_stack_selector_grammar() {
    let cases = [
        (
            "team:x",
            "Profile promptStack is not a valid prompt stack selector: Unknown scope prefix: team. Expected \"project\" or \"global\".",
        ),
        (
            "global:",
            "Profile promptStack is not a valid prompt stack selector: Invalid resource id: . Resource ids must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.",
        ),
        (
            "global:a:b",
            "Profile promptStack is not a valid prompt stack selector: Invalid resource id: a:b. Resource ids must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.",
        ),
        (
            "../x",
            "Profile promptStack is not a valid prompt stack selector: Invalid resource id: ../x. Resource ids must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.",
        ),
    ];
    for (text, message) in cases {
        let parsed = parse(with(base(), "promptStack", json!(text)));
        assert_eq!(
            errors(&parsed),
            pairs(&[("promptStack", message)]),
            "{text}"
        );
    }
    let parsed = parse(with(base(), "promptStack", json!(" project:a ")));
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(parsed.profile.prompt_stack.as_deref(), Some("project:a"));
}

#[test]
fn dedupes_identical_diagnostics() {
    // Duplicate keys resolve last-wins, so only one unsupported-field error per key exists; the
    // semantic pass never repeats a shape error.
    let parsed = parse_profile_bytes(
        br#"{"x":1,"x":2,"schemaVersion":1,"type":"pi-forge.agent-profile","id":"w","model":{"provider":"p","id":"m"},"thinkingLevel":"off","promptStack":""}"#,
        "w.json",
        Scope::Project,
    );
    assert_eq!(
        errors(&parsed),
        pairs(&[
            ("x", "Unsupported profile field: x"),
            (
                "promptStack",
                "Profile promptStack must be null or a non-empty prompt stack selector."
            ),
        ])
    );
}

// F15
#[test]
fn capture() {
    let current = RuntimeState {
        model: Some(ModelRef::new("p", "m")),
        thinking_level: ThinkingLevel::Medium,
        active_stack: Some(ResourceKey::new(Scope::Global, "shared")),
    };
    let captured = capture_profile("cap", Scope::Project, &current, None).unwrap();
    assert_eq!(
        captured,
        AgentProfile {
            id: "cap".into(),
            name: Some("cap".into()),
            description: None,
            auto_activate: None,
            model: ModelRef::new("p", "m"),
            thinking_level: ThinkingLevel::Medium,
            prompt_stack: Some("global:shared".into()),
        }
    );
    assert_eq!(
        serialize_profile(&captured),
        "{\n  \"schemaVersion\": 1,\n  \"type\": \"pi-forge.agent-profile\",\n  \"id\": \"cap\",\n  \"name\": \"cap\",\n  \"model\": {\n    \"provider\": \"p\",\n    \"id\": \"m\"\n  },\n  \"thinkingLevel\": \"medium\",\n  \"promptStack\": \"global:shared\"\n}\n"
    );
    // Same scope → bare id.
    let captured = capture_profile("cap", Scope::Global, &current, None).unwrap();
    assert_eq!(captured.prompt_stack.as_deref(), Some("shared"));

    // Global target with a project stack.
    let project_stack = RuntimeState {
        active_stack: Some(ResourceKey::new(Scope::Project, "p")),
        ..current.clone()
    };
    let err = capture_profile("cap", Scope::Global, &project_stack, None).unwrap_err();
    assert_eq!(
        err,
        vec![Diagnostic::error(
            "Cannot capture the project prompt stack project:p into a global profile; a global profile cannot reference a project prompt stack."
        )
        .with_field("promptStack")]
    );
    assert_eq!(
        capture_profile("cap", Scope::Project, &project_stack, None)
            .unwrap()
            .prompt_stack
            .as_deref(),
        Some("p")
    );
    assert_eq!(
        stack_reference_for(Scope::Project, &ResourceKey::new(Scope::Global, "g")),
        Ok("global:g".to_string())
    );

    // No model.
    let no_model = RuntimeState {
        model: None,
        ..current.clone()
    };
    let err = capture_profile("cap", Scope::Project, &no_model, None).unwrap_err();
    assert_eq!(
        err,
        vec![Diagnostic::error(
            "No model is selected; a profile cannot be captured without a model."
        )
        .with_field("model")]
    );

    // Existing metadata is kept.
    let existing = AgentProfile {
        name: Some("Old name".into()),
        description: Some("Old description".into()),
        auto_activate: Some(true),
        thinking_level: ThinkingLevel::Low,
        ..worker()
    };
    let none_active = RuntimeState {
        active_stack: None,
        ..current.clone()
    };
    let captured =
        capture_profile("worker", Scope::Project, &none_active, Some(&existing)).unwrap();
    assert_eq!(
        captured,
        AgentProfile {
            id: "worker".into(),
            name: Some("Old name".into()),
            description: Some("Old description".into()),
            auto_activate: Some(true),
            model: ModelRef::new("p", "m"),
            thinking_level: ThinkingLevel::Medium,
            prompt_stack: None,
        }
    );
    // Existing without a name → name = id.
    let captured =
        capture_profile("worker", Scope::Project, &none_active, Some(&worker())).unwrap();
    assert_eq!(captured.name.as_deref(), Some("worker"));

    // Invalid id is reported by validation.
    let err = capture_profile("../x", Scope::Project, &none_active, None).unwrap_err();
    assert_eq!(err, vec![Diagnostic::error(ID_ERROR).with_field("id")]);
    let empty_model = RuntimeState {
        model: Some(ModelRef::new(" ", "m")),
        ..none_active
    };
    let err = capture_profile("x", Scope::Project, &empty_model, None).unwrap_err();
    assert_eq!(
        err,
        vec![
            Diagnostic::error("Profile model.provider must be a non-empty string.")
                .with_field("model.provider")
        ]
    );
}

#[test]
fn validate_profile_checks_the_typed_value() {
    let mut profile = worker();
    assert_eq!(validate_profile(&profile, Scope::Global), vec![]);
    profile.prompt_stack = Some("project:w".into());
    assert_eq!(
        validate_profile(&profile, Scope::Global),
        vec![Diagnostic::error(
            "A global profile cannot reference a project prompt stack: project:w."
        )
        .with_field("promptStack")]
    );
    assert_eq!(validate_profile(&profile, Scope::Project), vec![]);
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|n| json!(n)),
        "[a-z :./\\-]{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("schemaVersion"),
            Just("type"),
            Just("id"),
            Just("model"),
            Just("promptStack"),
            Just("pi-forge.agent-profile"),
            Just("project:x"),
            Just("high"),
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
                        Just("description".to_string()),
                        Just("autoActivate".to_string()),
                        Just("model".to_string()),
                        Just("provider".to_string()),
                        Just("thinkingLevel".to_string()),
                        Just("promptStack".to_string()),
                        "[a-z]{1,4}",
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9._-]{1,12}",
        "\\PC{0,12}",
        "[ \t\u{a0}\u{feff}]{0,2}[a-z]{1,4}[ \n]{0,2}",
    ]
}

fn profile_strategy() -> impl Strategy<Value = AgentProfile> {
    (
        text(),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(any::<bool>()),
        (text(), text()),
        prop::sample::select(ThinkingLevel::ALL.to_vec()),
        prop::option::of(prop_oneof![text(), "(project|global):[a-z]{1,6}",]),
    )
        .prop_map(
            |(id, name, description, auto_activate, (provider, model), thinking_level, stack)| {
                AgentProfile {
                    id,
                    name,
                    description,
                    auto_activate,
                    model: ModelRef::new(provider, model),
                    thinking_level,
                    prompt_stack: stack,
                }
            },
        )
}

proptest! {
    #[test]
    fn generated_profiles_round_trip(profile in profile_strategy(), global in any::<bool>()) {
        let scope = if global { Scope::Global } else { Scope::Project };
        let first = serialize_profile(&profile);
        let parsed = parse_profile_bytes(first.as_bytes(), "p.json", scope);
        let second = serialize_profile(&parsed.profile);
        let reparsed = parse_profile_bytes(second.as_bytes(), "p.json", scope);
        prop_assert_eq!(&serialize_profile(&reparsed.profile), &second);
        prop_assert_eq!(&reparsed.diagnostics, &parsed.diagnostics);
        prop_assert_eq!(reparsed.profile.fingerprint(), parsed.profile.fingerprint());
        // Already-normalized profiles survive unchanged.
        let normalized = parsed.profile.clone();
        let again = parse_profile_bytes(serialize_profile(&normalized).as_bytes(), "p.json", scope);
        prop_assert_eq!(again.profile, normalized);
    }

    #[test]
    fn arbitrary_json_never_panics_and_normalization_is_idempotent(value in json_value()) {
        let parsed = parse_profile_value(value, "any.json", Scope::Project);
        let first = serialize_profile(&parsed.profile);
        let reparsed = parse_profile_bytes(first.as_bytes(), "any.json", Scope::Project);
        let second = serialize_profile(&reparsed.profile);
        prop_assert_eq!(first, second);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let parsed = parse_profile_bytes(&bytes, "b.json", Scope::Global);
        let _ = serialize_profile(&parsed.profile);
    }
}
