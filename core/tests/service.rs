//! The write service: create, save, delete, fork and draft validation, over `MemStore` (and a
//! few real directories through `FsStore`).

use forge_core::canonical::revision;
use forge_core::diag::{Diagnostic, Level};
use forge_core::id::{parse_selector, ResourceKey, Scope, Selector};
use forge_core::json::to_pretty;
use forge_core::workspace::service::{
    create, delete, fork, normalize_revision, parse_scope, resolve_for_write, update, validate,
    validate_update, Kind, ServiceError,
};
use forge_core::workspace::{self, Dir, FsStore, LoadOptions, MemStore, Store, WorkspaceSnapshot};
use serde_json::{json, Value};

const STACKS: &str = ".pi/forge/prompt-stacks";
const LEGACY: &str = ".pi/prompt-stacks";
const PROFILES: &str = ".pi/forge/agent-profiles";
const CAPABILITIES: &str = ".pi/forge/capabilities";

fn stack(id: &str) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "items": [
            {"kind": "block", "id": "intro", "role": "system", "content": "Hello"},
            {"kind": "slot", "id": "history", "slot": "chat-history"}
        ]
    })
}

fn profile(id: &str, stack: Value) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": id,
        "model": {"provider": "anthropic", "id": "claude"},
        "thinkingLevel": "off",
        "promptStack": stack
    })
}

fn capability(id: &str) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.capability",
        "id": id,
        "content": "Review carefully."
    })
}

fn sel(text: &str) -> Selector {
    parse_selector(text).unwrap()
}

/// A store holding `files` (scope, relative path, JSON value written pretty).
fn store_with(files: &[(Scope, String, &Value)]) -> MemStore {
    let store = MemStore::new();
    for (scope, path, value) in files {
        store.insert(*scope, path, to_pretty(value));
    }
    store
}

fn load(store: &dyn Store, trusted: bool) -> WorkspaceSnapshot {
    workspace::load(
        store,
        &LoadOptions {
            trusted,
            extra_slots: Vec::new(),
        },
    )
}

fn text(store: &MemStore, scope: Scope, path: &str) -> Option<String> {
    store
        .get(scope, path)
        .map(|b| String::from_utf8(b).unwrap())
}

fn rev(store: &MemStore, scope: Scope, path: &str) -> String {
    revision(&store.get(scope, path).unwrap())
}

fn file_count(store: &MemStore) -> usize {
    let mut n = 0;
    for scope in [Scope::Project, Scope::Global] {
        for dir in [
            Dir::Stacks,
            Dir::LegacyStacks,
            Dir::Profiles,
            Dir::Capabilities,
        ] {
            if scope == Scope::Global && dir == Dir::LegacyStacks {
                continue;
            }
            n += store.list(scope, dir).unwrap().len();
        }
    }
    n
}

fn invalid(err: &ServiceError) -> (&str, Option<&str>) {
    match err {
        ServiceError::Invalid { message, field, .. } => (message.as_str(), field.as_deref()),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

fn errors(diagnostics: &[Diagnostic]) -> Vec<&str> {
    diagnostics
        .iter()
        .filter(|d| d.level == Level::Error)
        .map(|d| d.message.as_str())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// create

#[test]
fn create_writes_the_raw_body_as_pretty_json_under_its_id() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let mut body = stack("reviewer");
    body["x-editor"] = json!({"collapsed": [1, 2.5]});
    let written = create(&store, &snapshot, Kind::Stack, Scope::Project, &body, false).unwrap();
    let path = format!("{STACKS}/reviewer.json");
    let bytes = store.get(Scope::Project, &path).unwrap();
    assert_eq!(String::from_utf8(bytes.clone()).unwrap(), to_pretty(&body));
    assert!(text(&store, Scope::Project, &path)
        .unwrap()
        .contains("\"x-editor\": {\n    \"collapsed\": [\n      1,\n      2.5\n    ]\n  }"));
    assert_eq!(written.key, ResourceKey::new(Scope::Project, "reviewer"));
    assert_eq!(written.file.dir, Dir::Stacks);
    assert_eq!(written.file.name(), "reviewer.json");
    assert_eq!(
        written.path,
        "project:.pi/forge/prompt-stacks/reviewer.json"
    );
    assert_eq!(written.revision, revision(&bytes));
    // The new file loads as a usable stack.
    let after = load(&store, true);
    assert!(after.stacks[0].usable());
    assert_eq!(after.stacks[0].revision, written.revision);
}

#[test]
fn create_same_scope_id_is_409_exists_and_writes_nothing() {
    let existing = stack("reviewer");
    let store = store_with(&[(Scope::Project, format!("{LEGACY}/old.json"), &existing)]);
    let snapshot = load(&store, true);
    let err = create(
        &store,
        &snapshot,
        Kind::Stack,
        Scope::Project,
        &stack("reviewer"),
        false,
    )
    .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(err.code(), "exists");
    assert_eq!(err.to_string(), "Prompt stack already exists: reviewer");
    assert_eq!(
        err,
        ServiceError::Exists {
            kind: Kind::Stack,
            id: "reviewer".into(),
            path: "project:.pi/prompt-stacks/old.json".into()
        }
    );
    assert_eq!(file_count(&store), 1);
}

#[test]
fn create_exists_messages_per_kind_and_other_scope_is_no_conflict() {
    let store = store_with(&[
        (
            Scope::Global,
            "agent-profiles/p.json".to_string(),
            &profile("p", Value::Null),
        ),
        (
            Scope::Global,
            "capabilities/c.json".to_string(),
            &capability("c"),
        ),
    ]);
    let snapshot = load(&store, true);
    let err = create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Global,
        &profile("p", Value::Null),
        false,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "Agent profile already exists: p");
    let err = create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Global,
        &capability("c"),
        false,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "Capability already exists: c");
    assert_eq!(err.field(), Some("id"));
    // The same ids in the project scope shadow, they do not conflict.
    create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Project,
        &capability("c"),
        false,
    )
    .unwrap();
    assert!(store
        .get(Scope::Project, &format!("{CAPABILITIES}/c.json"))
        .is_some());
}

#[test]
fn create_invalid_stack_id_is_400_with_the_grammar_message() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    for id in ["-bad", "a b", "../x", " padded"] {
        let err = create(
            &store,
            &snapshot,
            Kind::Stack,
            Scope::Project,
            &stack(id),
            false,
        )
        .unwrap_err();
        assert_eq!(err.status(), 400, "{id}");
        assert_eq!(err.code(), "invalid_input");
        assert_eq!(
            err.to_string(),
            "Stack id must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens."
        );
        assert_eq!(err.field(), Some("id"));
    }
    assert_eq!(file_count(&store), 0);
}

/// Issue 41, point 5: an id the file system cannot take (`<id>.json` longer than a file name
/// may be) was accepted and failed on write with an OS error; now every kind refuses it with
/// the same rule the editor's live check shows, and writes nothing. 128 characters still work.
#[test]
fn create_refuses_an_id_longer_than_128_characters_for_every_kind() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let long = "a".repeat(300);
    for (kind, body) in [
        (Kind::Stack, stack(&long)),
        (Kind::Profile, profile(&long, json!("x"))),
        (Kind::Capability, capability(&long)),
    ] {
        let err = create(&store, &snapshot, kind, Scope::Project, &body, false).unwrap_err();
        assert_eq!(
            (err.status(), err.code()),
            (400, "invalid_input"),
            "{kind:?}"
        );
        assert_eq!(
            err.to_string(),
            "The id is 300 characters long; an id is at most 128 characters, because the file is named after it."
        );
        assert_eq!(err.field(), Some("id"));
    }
    assert_eq!(file_count(&store), 0);
    let longest = "b".repeat(128);
    create(
        &store,
        &snapshot,
        Kind::Stack,
        Scope::Project,
        &stack(&longest),
        false,
    )
    .unwrap();
    assert_eq!(file_count(&store), 1);
    assert_eq!(
        forge_core::id::id_length_problem(&longest),
        None,
        "the editor's live check agrees"
    );
    assert!(forge_core::id::id_length_problem(&long).is_some());
}

#[test]
fn create_in_an_untrusted_project_is_403_for_project_scope() {
    let store = MemStore::new();
    let snapshot = load(&store, false);
    let cases = [
        (Kind::Stack, stack("s"), "create prompt stacks"),
        (
            Kind::Profile,
            profile("p", Value::Null),
            "create agent profiles",
        ),
        (Kind::Capability, capability("c"), "create capabilities"),
    ];
    for (kind, body, action) in cases {
        let err = create(&store, &snapshot, kind, Scope::Project, &body, false).unwrap_err();
        assert_eq!(err.status(), 403);
        assert_eq!(err.code(), "untrusted_project");
        assert_eq!(
            err.to_string(),
            format!("Project is not trusted; refusing to {action}.")
        );
    }
    assert_eq!(file_count(&store), 0);
}

#[test]
fn global_writes_are_allowed_in_an_untrusted_project() {
    let store = MemStore::new();
    let snapshot = load(&store, false);
    let written = create(
        &store,
        &snapshot,
        Kind::Stack,
        Scope::Global,
        &stack("shared"),
        false,
    )
    .unwrap();
    assert_eq!(written.key.to_string(), "global:shared");
    assert_eq!(written.path, "global:prompt-stacks/shared.json");
    let snapshot = load(&store, false);
    // A bare selector sees only global entries when the project is untrusted.
    let mut body = stack("shared");
    body["name"] = json!("Shared");
    let saved = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("shared"),
        Some(&written.revision),
        &body,
    )
    .unwrap();
    assert_eq!(saved.key.to_string(), "global:shared");
    delete(
        &store,
        &load(&store, false),
        Kind::Stack,
        &sel("global:shared"),
        Some(&saved.revision),
    )
    .unwrap();
    assert_eq!(file_count(&store), 0);
}

#[test]
fn create_with_overwrite_replaces_the_file_at_the_snapshot_revision() {
    let old = stack("reviewer");
    let store = store_with(&[(Scope::Project, format!("{STACKS}/reviewer.json"), &old)]);
    let snapshot = load(&store, true);
    let mut body = stack("reviewer");
    body["description"] = json!("new");
    let written = create(&store, &snapshot, Kind::Stack, Scope::Project, &body, true).unwrap();
    let path = format!("{STACKS}/reviewer.json");
    assert_eq!(
        text(&store, Scope::Project, &path).unwrap(),
        to_pretty(&body)
    );
    assert_eq!(written.revision, rev(&store, Scope::Project, &path));
}

#[test]
fn create_with_overwrite_never_writes_blind_over_a_file_changed_on_disk() {
    let path = format!("{STACKS}/reviewer.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("reviewer"))]);
    let snapshot = load(&store, true);
    let mut external = stack("reviewer");
    external["name"] = json!("edited elsewhere");
    store.insert(Scope::Project, &path, to_pretty(&external));
    let err = create(
        &store,
        &snapshot,
        Kind::Stack,
        Scope::Project,
        &stack("reviewer"),
        true,
    )
    .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(err.code(), "stale_revision");
    assert_eq!(
        err,
        ServiceError::Stale {
            current_revision: revision(to_pretty(&external).as_bytes()),
            current: Some(external.clone()),
        }
    );
    assert_eq!(
        text(&store, Scope::Project, &path).unwrap(),
        to_pretty(&external)
    );
}

#[test]
fn create_with_overwrite_rewrites_a_legacy_file_in_place() {
    let legacy = format!("{LEGACY}/old-name.json");
    let store = store_with(&[(Scope::Project, legacy.clone(), &stack("reviewer"))]);
    let snapshot = load(&store, true);
    let mut body = stack("reviewer");
    body["name"] = json!("Reviewer");
    let written = create(&store, &snapshot, Kind::Stack, Scope::Project, &body, true).unwrap();
    assert_eq!(written.file.dir, Dir::LegacyStacks);
    assert_eq!(written.file.name(), "old-name.json");
    assert_eq!(
        text(&store, Scope::Project, &legacy).unwrap(),
        to_pretty(&body)
    );
    assert!(store
        .get(Scope::Project, &format!("{STACKS}/reviewer.json"))
        .is_none());
}

#[test]
fn create_profile_with_an_unknown_field_is_400_with_the_field() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let mut body = profile("p", Value::Null);
    body["color"] = json!("blue");
    let err = create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Project,
        &body,
        false,
    )
    .unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(
        invalid(&err),
        ("Unsupported profile field: color", Some("color"))
    );
    assert_eq!(err.field(), Some("color"));
    assert_eq!(file_count(&store), 0);
}

#[test]
fn a_global_profile_cannot_reference_a_project_stack() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let body = profile("p", json!("project:reviewer"));
    let err = create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Global,
        &body,
        false,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "A global profile cannot reference a project prompt stack: project:reviewer.",
            Some("promptStack")
        )
    );
    // The same profile in the project scope is fine (the stack need not exist yet).
    create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Project,
        &body,
        false,
    )
    .unwrap();
}

#[test]
fn a_second_same_scope_auto_activate_profile_is_409() {
    let mut first = profile("first", Value::Null);
    first["autoActivate"] = json!(true);
    let store = store_with(&[(Scope::Project, format!("{PROFILES}/first.json"), &first)]);
    let snapshot = load(&store, true);
    let mut second = profile("second", Value::Null);
    second["autoActivate"] = json!(true);
    let err = create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Project,
        &second,
        false,
    )
    .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(err.code(), "auto_activate_conflict");
    assert_eq!(err.field(), Some("autoActivate"));
    assert_eq!(
        err.to_string(),
        "Only one project agent profile may set autoActivate: true; it is already requested by first."
    );
    // Another scope is independent.
    create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Global,
        &second,
        false,
    )
    .unwrap();
    // Saving the auto-activating profile itself excludes it.
    let mut renamed = first.clone();
    renamed["name"] = json!("First");
    update(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("first"),
        Some(&rev(
            &store,
            Scope::Project,
            &format!("{PROFILES}/first.json"),
        )),
        &renamed,
    )
    .unwrap();
}

#[test]
fn create_capability_checks_the_codec_and_writes_id_json() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let written = create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Project,
        &capability("review"),
        false,
    )
    .unwrap();
    assert_eq!(written.file.name(), "review.json");
    let mut empty = capability("empty");
    empty["content"] = json!("  ");
    let err = create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Project,
        &empty,
        false,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "Capability needs non-whitespace content or at least one tool in tools.add or tools.remove.",
            Some("content")
        )
    );
    let mut extra = capability("extra");
    extra["unknown"] = json!(1);
    let err = create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Project,
        &extra,
        false,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        ("Unsupported capability field: unknown", Some("unknown"))
    );
    assert_eq!(file_count(&store), 1);
}

#[test]
fn stack_codec_errors_refuse_but_warnings_do_not() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    // A warning only: no chat-history slot.
    let body = json!({"id": "warned", "items": [{"kind": "block", "id": "a", "role": "system", "content": "x"}]});
    create(&store, &snapshot, Kind::Stack, Scope::Project, &body, false).unwrap();
    // An error from the codec: duplicate item ids.
    let body = json!({"id": "dup", "items": [
        {"kind": "block", "id": "a", "role": "system", "content": "x"},
        {"kind": "block", "id": "a", "role": "system", "content": "y"}
    ]});
    let err = create(&store, &snapshot, Kind::Stack, Scope::Project, &body, false).unwrap_err();
    assert_eq!(invalid(&err), ("Duplicate item id: a", None));
    assert_eq!(errors(err.diagnostics()), vec!["Duplicate item id: a"]);
    assert!(err.diagnostics().iter().any(|d| d.level == Level::Warning));
    // A structurally broken binding is an error as well.
    let mut body = stack("bound");
    body["capabilities"] = json!([{"ref": "global:x", "bogus": true}]);
    let err = create(&store, &snapshot, Kind::Stack, Scope::Project, &body, false).unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "Unsupported capability binding field: capabilities[0].bogus",
            Some("capabilities[0].bogus")
        )
    );
    assert_eq!(file_count(&store), 1);
}

// ---------------------------------------------------------------------------------------------
// bad bodies

#[test]
fn bad_stack_bodies_get_the_exact_pre_check_messages_and_nothing_is_written() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let cases: Vec<(Value, &str, Option<&str>)> = vec![
        (
            json!([1, 2]),
            "Prompt stack root must be a JSON object.",
            None,
        ),
        (
            json!("stack"),
            "Prompt stack root must be a JSON object.",
            None,
        ),
        (
            json!(null),
            "Prompt stack root must be a JSON object.",
            None,
        ),
        (
            json!({"items": []}),
            "Stack id must be a non-empty string.",
            Some("id"),
        ),
        (
            json!({"id": "  ", "items": []}),
            "Stack id must be a non-empty string.",
            Some("id"),
        ),
        (
            json!({"id": 7, "items": []}),
            "Stack id must be a non-empty string.",
            Some("id"),
        ),
        (
            json!({"id": "s"}),
            "Stack items must be an array.",
            Some("items"),
        ),
        (
            json!({"id": "s", "items": {}}),
            "Stack items must be an array.",
            Some("items"),
        ),
        (
            json!({"id": "s", "items": ["text"]}),
            "Item 1 must be an object.",
            Some("items[0]"),
        ),
        (
            json!({"id": "s", "items": [
                {"kind": "block", "id": "a", "content": ""},
                {"kind": "note", "id": "b", "content": ""}
            ]}),
            "Item 2 kind must be block or slot.",
            Some("items[1].kind"),
        ),
        (
            json!({"id": "s", "items": [{"id": "b", "content": ""}]}),
            "Item 1 kind must be block or slot.",
            Some("items[0].kind"),
        ),
        (
            json!({"id": "s", "items": [{"kind": "block", "content": ""}]}),
            "Item 1 id must be a non-empty string.",
            Some("items[0].id"),
        ),
        (
            json!({"id": "s", "items": [{"kind": "block", "id": 3, "content": ""}]}),
            "Item 1 id must be a non-empty string.",
            Some("items[0].id"),
        ),
        (
            json!({"id": "s", "items": [{"kind": "block", "id": "a", "content": ["x"]}]}),
            "Item 1 content must be a string.",
            Some("items[0].content"),
        ),
        (
            json!({"id": "s", "items": [{"kind": "slot", "id": "a"}]}),
            "Item 1 slot must be a string.",
            Some("items[0].slot"),
        ),
    ];
    for (body, message, field) in cases {
        let err = create(&store, &snapshot, Kind::Stack, Scope::Project, &body, false).unwrap_err();
        assert_eq!(err.status(), 400, "{body}");
        assert_eq!(err.code(), "invalid_input");
        assert_eq!(invalid(&err), (message, field), "{body}");
        assert_eq!(err.diagnostics().len(), 1);
    }
    assert_eq!(file_count(&store), 0);
}

#[test]
fn bad_profile_and_capability_bodies_use_the_codec_messages() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let err = create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Project,
        &json!([1]),
        false,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        ("Profile must be a JSON object, got array.", None)
    );
    let err = create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Project,
        &json!("c"),
        false,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        ("Capability must be a JSON object, got string.", None)
    );
    let mut padded = profile("p", Value::Null);
    padded["id"] = json!(" p ");
    let err = create(
        &store,
        &snapshot,
        Kind::Profile,
        Scope::Project,
        &padded,
        false,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "Profile id must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.",
            Some("id")
        )
    );
    assert_eq!(file_count(&store), 0);
}

#[test]
fn bad_bodies_on_save_write_nothing() {
    let path = format!("{STACKS}/s.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("s"))]);
    let before = store.get(Scope::Project, &path).unwrap();
    let snapshot = load(&store, true);
    let base = revision(&before);
    for (body, message) in [
        (json!(["s"]), "Prompt stack root must be a JSON object."),
        (
            json!({"id": "s", "items": [{"kind": "block", "id": "a", "content": 1}]}),
            "Item 1 content must be a string.",
        ),
    ] {
        let err = update(
            &store,
            &snapshot,
            Kind::Stack,
            &sel("s"),
            Some(&base),
            &body,
        )
        .unwrap_err();
        assert_eq!(invalid(&err).0, message);
    }
    assert_eq!(store.get(Scope::Project, &path).unwrap(), before);
}

// ---------------------------------------------------------------------------------------------
// update

#[test]
fn update_preserves_unknown_fields_byte_for_byte() {
    let path = format!("{STACKS}/s.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("s"))]);
    let snapshot = load(&store, true);
    let body: Value = serde_json::from_str(
        r#"{"zeta": {"nested": [true, null, 1e21, 0.1]}, "schemaVersion": 2, "id": "s",
            "parameters": {"n": 1.5}, "items": [{"kind": "slot", "id": "h", "slot": "chat-history",
            "x-item": "kept"}], "alpha": "\u00e9\ud83d\ude00"}"#,
    )
    .unwrap();
    let written = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("project:s"),
        Some(&rev(&store, Scope::Project, &path)),
        &body,
    )
    .unwrap();
    let expected = "{\n  \"zeta\": {\n    \"nested\": [\n      true,\n      null,\n      1e+21,\n      0.1\n    ]\n  },\n  \"schemaVersion\": 2,\n  \"id\": \"s\",\n  \"parameters\": {\n    \"n\": 1.5\n  },\n  \"items\": [\n    {\n      \"kind\": \"slot\",\n      \"id\": \"h\",\n      \"slot\": \"chat-history\",\n      \"x-item\": \"kept\"\n    }\n  ],\n  \"alpha\": \"é😀\"\n}\n";
    assert_eq!(text(&store, Scope::Project, &path).unwrap(), expected);
    assert_eq!(written.revision, revision(expected.as_bytes()));
    assert_eq!(written.key, ResourceKey::new(Scope::Project, "s"));
}

#[test]
fn update_from_a_stale_revision_is_409_with_the_current_revision_and_json() {
    let path = format!("{STACKS}/s.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("s"))]);
    let snapshot = load(&store, true);
    let base = rev(&store, Scope::Project, &path);
    let mut theirs = stack("s");
    theirs["name"] = json!("Theirs");
    theirs["extra"] = json!({"kept": true});
    store.insert(Scope::Project, &path, to_pretty(&theirs));
    let mut mine = stack("s");
    mine["name"] = json!("Mine");
    let err = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&base),
        &mine,
    )
    .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(err.code(), "stale_revision");
    let current = revision(to_pretty(&theirs).as_bytes());
    assert_eq!(
        err.to_string(),
        format!(
            "The file changed on disk and is now at revision {current}; refresh before changing it."
        )
    );
    assert_eq!(
        err,
        ServiceError::Stale {
            current_revision: current,
            current: Some(theirs.clone()),
        }
    );
    assert_eq!(
        text(&store, Scope::Project, &path).unwrap(),
        to_pretty(&theirs)
    );
}

#[test]
fn stale_with_unparseable_current_bytes_has_no_current_json() {
    let path = format!("{STACKS}/s.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("s"))]);
    let snapshot = load(&store, true);
    let base = rev(&store, Scope::Project, &path);
    store.insert(Scope::Project, &path, "{ not json");
    let err = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&base),
        &stack("s"),
    )
    .unwrap_err();
    assert_eq!(
        err,
        ServiceError::Stale {
            current_revision: revision(b"{ not json"),
            current: None,
        }
    );
}

#[test]
fn update_and_delete_without_a_revision_are_428() {
    let path = format!("{STACKS}/s.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("s"))]);
    let snapshot = load(&store, true);
    for expected in [None, Some(""), Some("  ")] {
        let err = update(
            &store,
            &snapshot,
            Kind::Stack,
            &sel("s"),
            expected,
            &stack("s"),
        )
        .unwrap_err();
        assert_eq!(err, ServiceError::MissingRevision);
        assert_eq!(err.status(), 428);
        assert_eq!(err.code(), "revision_required");
        let err = delete(&store, &snapshot, Kind::Stack, &sel("s"), expected).unwrap_err();
        assert_eq!(err.status(), 428);
    }
    assert!(store.get(Scope::Project, &path).is_some());
}

#[test]
fn a_malformed_revision_is_400_naming_the_wire_field() {
    let store = store_with(&[
        (Scope::Project, format!("{STACKS}/s.json"), &stack("s")),
        (
            Scope::Project,
            format!("{CAPABILITIES}/c.json"),
            &capability("c"),
        ),
    ]);
    let snapshot = load(&store, true);
    let err = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some("sha256:abc"),
        &stack("s"),
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "expectedRevision must be sha256:<64 hex digits> or 64 hex digits.",
            Some("expectedRevision")
        )
    );
    let err = delete(&store, &snapshot, Kind::Capability, &sel("c"), Some("xyz")).unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "expectedSourceRevision must be sha256:<64 hex digits> or 64 hex digits.",
            Some("expectedSourceRevision")
        )
    );
}

#[test]
fn a_bare_hex_source_revision_is_accepted_and_normalized() {
    let path = format!("{CAPABILITIES}/c.json");
    let store = store_with(&[(Scope::Project, path.clone(), &capability("c"))]);
    let snapshot = load(&store, true);
    let source_revision = snapshot.capabilities[0].parsed.source_revision.clone();
    assert_eq!(
        format!("sha256:{source_revision}"),
        snapshot.capabilities[0].revision
    );
    let mut body = capability("c");
    body["content"] = json!("Changed.");
    let upper = source_revision.to_uppercase();
    let written = update(
        &store,
        &snapshot,
        Kind::Capability,
        &sel("c"),
        Some(&upper),
        &body,
    )
    .unwrap();
    assert_eq!(written.revision, rev(&store, Scope::Project, &path));
    assert_eq!(
        normalize_revision(&upper),
        Some(format!("sha256:{source_revision}"))
    );
    assert_eq!(normalize_revision("sha256:12"), None);
    assert_eq!(
        normalize_revision(&format!("sha256:v1:{source_revision}")),
        None
    );
}

#[test]
fn changing_the_id_on_save_is_400_id_immutable() {
    let store = store_with(&[
        (Scope::Project, format!("{STACKS}/s.json"), &stack("s")),
        (
            Scope::Project,
            format!("{PROFILES}/p.json"),
            &profile("p", Value::Null),
        ),
        (
            Scope::Project,
            format!("{CAPABILITIES}/c.json"),
            &capability("c"),
        ),
    ]);
    let snapshot = load(&store, true);
    let base = "0".repeat(64);
    let err = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&base),
        &stack("t"),
    )
    .unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), "id_immutable");
    assert_eq!(err.field(), Some("id"));
    assert_eq!(
        err.to_string(),
        "Stack id is immutable during save; fork the stack to create a new id."
    );
    let err = update(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("p"),
        Some(&base),
        &profile("q", Value::Null),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Profile id is immutable during save; fork the profile to create a new id."
    );
    let err = update(
        &store,
        &snapshot,
        Kind::Capability,
        &sel("c"),
        Some(&base),
        &capability("d"),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Capability id is immutable during save; fork the capability to create a new id."
    );
}

#[test]
fn saving_a_legacy_stack_updates_it_in_place() {
    let legacy = format!("{LEGACY}/s.json");
    let store = store_with(&[(Scope::Project, legacy.clone(), &stack("s"))]);
    let snapshot = load(&store, true);
    let mut body = stack("s");
    body["description"] = json!("edited");
    let written = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&rev(&store, Scope::Project, &legacy)),
        &body,
    )
    .unwrap();
    assert_eq!(written.file.dir, Dir::LegacyStacks);
    assert_eq!(written.path, "project:.pi/prompt-stacks/s.json");
    assert_eq!(
        text(&store, Scope::Project, &legacy).unwrap(),
        to_pretty(&body)
    );
    assert!(store
        .get(Scope::Project, &format!("{STACKS}/s.json"))
        .is_none());
}

#[test]
fn unknown_selectors_are_404_with_the_kind_in_the_message() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let base = "a".repeat(64);
    let cases = [
        (Kind::Stack, stack("nope"), "Unknown prompt stack: nope"),
        (
            Kind::Profile,
            profile("nope", Value::Null),
            "Unknown agent profile: nope",
        ),
        (
            Kind::Capability,
            capability("nope"),
            "Unknown capability: nope",
        ),
    ];
    for (kind, body, message) in cases {
        let err = update(&store, &snapshot, kind, &sel("nope"), Some(&base), &body).unwrap_err();
        assert_eq!(err.status(), 404);
        assert_eq!(err.code(), "not_found");
        assert_eq!(err.to_string(), message);
    }
    let err = delete(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("global:nope"),
        Some(&base),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "Unknown prompt stack: global:nope");
}

#[test]
fn two_files_with_one_id_are_409_ambiguous_and_block_fallback() {
    let store = store_with(&[
        (Scope::Project, format!("{STACKS}/a.json"), &stack("s")),
        (Scope::Project, format!("{STACKS}/b.json"), &stack("s")),
        (
            Scope::Global,
            "prompt-stacks/s.json".to_string(),
            &stack("s"),
        ),
    ]);
    let snapshot = load(&store, true);
    let base = "a".repeat(64);
    let err = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&base),
        &stack("s"),
    )
    .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(err.code(), "ambiguous");
    assert_eq!(
        err,
        ServiceError::Ambiguous {
            kind: Kind::Stack,
            selector: "s".into(),
            paths: vec![
                "project:.pi/forge/prompt-stacks/a.json".into(),
                "project:.pi/forge/prompt-stacks/b.json".into()
            ],
        }
    );
    assert_eq!(
        err.to_string(),
        "Prompt stack s is ambiguous: several files define it (project:.pi/forge/prompt-stacks/a.json, project:.pi/forge/prompt-stacks/b.json)."
    );
    // The global one stays reachable by its qualified selector.
    let target = resolve_for_write(&snapshot, Kind::Stack, &sel("global:s")).unwrap();
    assert_eq!(target.path, "global:prompt-stacks/s.json");
}

#[test]
fn an_invalid_project_stack_still_shadows_the_global_one() {
    let broken = json!({"id": "s", "items": "nope"});
    let store = store_with(&[
        (Scope::Project, format!("{STACKS}/s.json"), &broken),
        (
            Scope::Global,
            "prompt-stacks/s.json".to_string(),
            &stack("s"),
        ),
    ]);
    let snapshot = load(&store, true);
    let target = resolve_for_write(&snapshot, Kind::Stack, &sel("s")).unwrap();
    assert_eq!(target.key.to_string(), "project:s");
    // …and saving fixes it.
    let written = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(target.revision),
        &stack("s"),
    )
    .unwrap();
    assert_eq!(written.key.to_string(), "project:s");
}

#[test]
fn profile_bare_selectors_mean_the_project_only() {
    let path = "agent-profiles/g.json";
    let store = store_with(&[(Scope::Global, path.to_string(), &profile("g", Value::Null))]);
    let snapshot = load(&store, true);
    let base = rev(&store, Scope::Global, path);
    let err = update(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("g"),
        Some(&base),
        &profile("g", Value::Null),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "Unknown agent profile: g");
    let err = delete(&store, &snapshot, Kind::Profile, &sel("g"), Some(&base)).unwrap_err();
    assert_eq!(err.status(), 404);
    // Stacks and capabilities fall back to global for a bare id; profiles need `global:`.
    let mut body = profile("g", Value::Null);
    body["name"] = json!("Global");
    let written = update(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("global:g"),
        Some(&base),
        &body,
    )
    .unwrap();
    assert_eq!(written.key.to_string(), "global:g");
    // In an untrusted project a bare profile selector is a project write: 403, not 404.
    let err = update(
        &store,
        &load(&store, false),
        Kind::Profile,
        &sel("g"),
        Some(&base),
        &body,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Project is not trusted; refusing to save agent profiles."
    );
}

#[test]
fn capability_saves_require_the_id_file_name() {
    let path = format!("{CAPABILITIES}/other-name.json");
    let store = store_with(&[(Scope::Project, path.clone(), &capability("c"))]);
    let snapshot = load(&store, true);
    let err = update(
        &store,
        &snapshot,
        Kind::Capability,
        &sel("c"),
        Some(&rev(&store, Scope::Project, &path)),
        &capability("c"),
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "Capability file name must be c.json, not other-name.json.",
            Some("id")
        )
    );
}

// ---------------------------------------------------------------------------------------------
// delete

#[test]
fn delete_removes_the_file_at_its_revision() {
    let path = format!("{PROFILES}/p.json");
    let store = store_with(&[(Scope::Project, path.clone(), &profile("p", Value::Null))]);
    let snapshot = load(&store, true);
    delete(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("p"),
        Some(&rev(&store, Scope::Project, &path)),
    )
    .unwrap();
    assert!(store.get(Scope::Project, &path).is_none());
}

#[test]
fn delete_of_a_file_changed_on_disk_is_stale_and_keeps_it() {
    let path = format!("{CAPABILITIES}/c.json");
    let store = store_with(&[(Scope::Project, path.clone(), &capability("c"))]);
    let snapshot = load(&store, true);
    let base = rev(&store, Scope::Project, &path);
    let mut changed = capability("c");
    changed["content"] = json!("Changed.");
    store.insert(Scope::Project, &path, to_pretty(&changed));
    let err = delete(
        &store,
        &snapshot,
        Kind::Capability,
        &sel("project:c"),
        Some(&base),
    )
    .unwrap_err();
    assert_eq!(
        err,
        ServiceError::Stale {
            current_revision: revision(to_pretty(&changed).as_bytes()),
            current: Some(changed.clone()),
        }
    );
    assert!(store.get(Scope::Project, &path).is_some());
}

#[test]
fn delete_of_a_file_removed_since_the_snapshot_is_404() {
    let path = format!("{STACKS}/s.json");
    let store = store_with(&[(Scope::Project, path.clone(), &stack("s"))]);
    let snapshot = load(&store, true);
    let base = rev(&store, Scope::Project, &path);
    store.delete(&snapshot.stacks[0].file, &base).unwrap();
    let err = delete(&store, &snapshot, Kind::Stack, &sel("s"), Some(&base)).unwrap_err();
    assert_eq!(err.status(), 404);
    assert_eq!(err.to_string(), "Unknown prompt stack: project:s");
}

#[test]
fn delete_in_an_untrusted_project_is_403() {
    let store = MemStore::new();
    let snapshot = load(&store, false);
    let err = delete(&store, &snapshot, Kind::Stack, &sel("project:s"), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Project is not trusted; refusing to delete prompt stacks."
    );
    assert_eq!(err.status(), 403);
    let err = delete(&store, &snapshot, Kind::Capability, &sel("project:c"), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Project is not trusted; refusing to delete capabilities."
    );
}

// ---------------------------------------------------------------------------------------------
// fork

#[test]
fn fork_copies_the_raw_object_with_the_new_id() {
    let mut source = stack("s");
    source["x-kept"] = json!([1, {"a": null}]);
    source["autoActivate"] = json!(true);
    let store = store_with(&[(Scope::Project, format!("{STACKS}/s.json"), &source)]);
    let snapshot = load(&store, true);
    let written = fork(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        "s-copy",
        Scope::Project,
    )
    .unwrap();
    assert_eq!(written.key.to_string(), "project:s-copy");
    let mut expected = source.clone();
    expected["id"] = json!("s-copy");
    expected["autoActivate"] = json!(false);
    assert_eq!(
        text(&store, Scope::Project, &format!("{STACKS}/s-copy.json")).unwrap(),
        to_pretty(&expected)
    );
    // The source is untouched.
    assert_eq!(
        text(&store, Scope::Project, &format!("{STACKS}/s.json")).unwrap(),
        to_pretty(&source)
    );
}

#[test]
fn fork_onto_an_existing_id_is_409_and_a_bad_id_is_400() {
    let store = store_with(&[
        (Scope::Project, format!("{STACKS}/a.json"), &stack("a")),
        (Scope::Project, format!("{STACKS}/b.json"), &stack("b")),
    ]);
    let snapshot = load(&store, true);
    let err = fork(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("a"),
        "b",
        Scope::Project,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "Prompt stack already exists: b");
    let err = fork(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("a"),
        "b/../c",
        Scope::Project,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "Stack id must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.",
            Some("id")
        )
    );
    let err = fork(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("zzz"),
        "c",
        Scope::Project,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "Unknown prompt stack: zzz");
    assert_eq!(file_count(&store), 2);
}

#[test]
fn forking_a_global_profile_into_the_project_keeps_its_stack_reference() {
    let store = store_with(&[
        (
            Scope::Global,
            "prompt-stacks/base.json".to_string(),
            &stack("base"),
        ),
        (
            Scope::Global,
            "agent-profiles/g.json".to_string(),
            &profile("g", json!("base")),
        ),
    ]);
    let snapshot = load(&store, true);
    let written = fork(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("global:g"),
        "mine",
        Scope::Project,
    )
    .unwrap();
    assert_eq!(written.path, "project:.pi/forge/agent-profiles/mine.json");
    let copy: Value = serde_json::from_str(
        &text(&store, Scope::Project, &format!("{PROFILES}/mine.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(copy["promptStack"], json!("global:base"));
    assert_eq!(copy["id"], json!("mine"));
    // The reloaded copy resolves to the same global stack.
    let after = load(&store, true);
    let entry = after.profiles.iter().find(|p| p.key.id == "mine").unwrap();
    assert!(entry.usable(), "{:?}", entry.diagnostics);
    assert_eq!(
        after.profile_stack(entry).unwrap().unwrap().key.to_string(),
        "global:base"
    );
}

#[test]
fn forking_a_project_profile_to_global_cannot_keep_a_project_reference() {
    let store = store_with(&[
        (
            Scope::Project,
            format!("{STACKS}/local.json"),
            &stack("local"),
        ),
        (
            Scope::Project,
            format!("{PROFILES}/p.json"),
            &profile("p", json!("local")),
        ),
    ]);
    let snapshot = load(&store, true);
    let err = fork(
        &store,
        &snapshot,
        Kind::Profile,
        &sel("p"),
        "p",
        Scope::Global,
    )
    .unwrap_err();
    assert_eq!(
        invalid(&err),
        (
            "A global profile cannot reference a project prompt stack: project:local.",
            Some("promptStack")
        )
    );
    assert!(store.get(Scope::Global, "agent-profiles/p.json").is_none());
}

#[test]
fn forking_into_an_untrusted_project_is_403_but_into_global_works() {
    let store = store_with(&[(
        Scope::Global,
        "capabilities/c.json".to_string(),
        &capability("c"),
    )]);
    let snapshot = load(&store, false);
    let err = fork(
        &store,
        &snapshot,
        Kind::Capability,
        &sel("c"),
        "d",
        Scope::Project,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Project is not trusted; refusing to create capabilities."
    );
    let written = fork(
        &store,
        &snapshot,
        Kind::Capability,
        &sel("c"),
        "d",
        Scope::Global,
    )
    .unwrap();
    assert_eq!(written.path, "global:capabilities/d.json");
}

// ---------------------------------------------------------------------------------------------
// validate

#[test]
fn validate_reports_a_duplicate_id_in_the_scope() {
    let store = store_with(&[(Scope::Project, format!("{STACKS}/s.json"), &stack("s"))]);
    let snapshot = load(&store, true);
    let d = validate(Kind::Stack, Scope::Project, &stack("s"), &snapshot);
    assert_eq!(
        errors(&d),
        vec!["Prompt stack already exists: s (project:.pi/forge/prompt-stacks/s.json)."]
    );
    assert!(errors(&validate(
        Kind::Stack,
        Scope::Global,
        &stack("s"),
        &snapshot
    ))
    .is_empty());
    // Editing the existing stack is not a duplicate of itself.
    let d = validate_update(Kind::Stack, &sel("s"), &stack("s"), &snapshot).unwrap();
    assert!(errors(&d).is_empty(), "{d:?}");
    let d = validate_update(Kind::Stack, &sel("s"), &stack("t"), &snapshot).unwrap();
    assert_eq!(
        errors(&d),
        vec!["Stack id is immutable during save; fork the stack to create a new id."]
    );
}

#[test]
fn validate_reports_auto_activate_conflicts() {
    let mut first = profile("first", Value::Null);
    first["autoActivate"] = json!(true);
    let store = store_with(&[(Scope::Project, format!("{PROFILES}/first.json"), &first)]);
    let snapshot = load(&store, true);
    let mut second = profile("second", Value::Null);
    second["autoActivate"] = json!(true);
    let d = validate(Kind::Profile, Scope::Project, &second, &snapshot);
    assert_eq!(
        d,
        vec![Diagnostic::error(
            "Only one project agent profile may set autoActivate: true; it is already requested by first."
        )
        .with_field("autoActivate")]
    );
    assert!(
        validate_update(Kind::Profile, &sel("first"), &first, &snapshot)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn validate_reports_global_to_project_references() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let d = validate(
        Kind::Profile,
        Scope::Global,
        &profile("g", json!("project:s")),
        &snapshot,
    );
    assert_eq!(
        errors(&d),
        vec!["A global profile cannot reference a project prompt stack: project:s."]
    );
    let mut preset = stack("g");
    preset["capabilities"] = json!([{"ref": "project:c"}]);
    let d = validate(Kind::Stack, Scope::Global, &preset, &snapshot);
    assert_eq!(
        errors(&d),
        vec!["capabilities[0].ref: a global Preset cannot reference the project capability project:c."]
    );
}

#[test]
fn validate_resolves_profile_stacks_and_preset_bindings() {
    let store = store_with(&[
        (
            Scope::Global,
            "prompt-stacks/base.json".to_string(),
            &stack("base"),
        ),
        (
            Scope::Project,
            format!("{CAPABILITIES}/c.json"),
            &capability("c"),
        ),
    ]);
    let snapshot = load(&store, true);
    let d = validate(
        Kind::Profile,
        Scope::Project,
        &profile("p", json!("base")),
        &snapshot,
    );
    assert_eq!(
        d,
        vec![Diagnostic::error(
            "Unknown prompt stack: base. Use global:base to reference the global stack."
        )
        .with_field("promptStack")]
    );
    assert!(validate(
        Kind::Profile,
        Scope::Project,
        &profile("p", json!("global:base")),
        &snapshot
    )
    .is_empty());
    let mut preset = stack("s");
    preset["capabilities"] = json!([{"ref": "c"}, {"ref": "missing"}]);
    let d = validate(Kind::Stack, Scope::Project, &preset, &snapshot);
    assert_eq!(
        d,
        vec![Diagnostic::warning(
            "Capability binding missing at index 1 does not resolve: Capability not found: project:missing."
        )
        .with_field("capabilities")]
    );
    // Reference problems never block a save.
    create(
        &store,
        &snapshot,
        Kind::Stack,
        Scope::Project,
        &preset,
        false,
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// mapping and helpers

#[test]
fn statuses_codes_and_fields() {
    let table: Vec<(ServiceError, u16, &str, Option<&str>)> = vec![
        (
            ServiceError::Untrusted {
                action: "save prompt stacks".into(),
            },
            403,
            "untrusted_project",
            None,
        ),
        (
            ServiceError::Invalid {
                message: "m".into(),
                field: Some("f".into()),
                diagnostics: vec![],
            },
            400,
            "invalid_input",
            Some("f"),
        ),
        (
            ServiceError::IdImmutable { kind: Kind::Stack },
            400,
            "id_immutable",
            Some("id"),
        ),
        (
            ServiceError::NotFound {
                kind: Kind::Capability,
                selector: "x".into(),
            },
            404,
            "not_found",
            None,
        ),
        (
            ServiceError::Ambiguous {
                kind: Kind::Profile,
                selector: "x".into(),
                paths: vec![],
            },
            409,
            "ambiguous",
            None,
        ),
        (
            ServiceError::Exists {
                kind: Kind::Stack,
                id: "x".into(),
                path: "p".into(),
            },
            409,
            "exists",
            Some("id"),
        ),
        (
            ServiceError::AutoActivateConflict {
                scope: Scope::Global,
                other: "a".into(),
            },
            409,
            "auto_activate_conflict",
            Some("autoActivate"),
        ),
        (
            ServiceError::Stale {
                current_revision: "sha256:0".into(),
                current: None,
            },
            409,
            "stale_revision",
            None,
        ),
        (
            ServiceError::MissingRevision,
            428,
            "revision_required",
            None,
        ),
        (
            ServiceError::InvalidPath("p".into()),
            403,
            "invalid_path",
            None,
        ),
        (ServiceError::Io("e".into()), 500, "io", None),
    ];
    for (err, status, code, field) in table {
        assert_eq!(
            (err.status(), err.code(), err.field()),
            (status, code, field),
            "{err:?}"
        );
    }
    assert_eq!(
        ServiceError::Ambiguous {
            kind: Kind::Profile,
            selector: "global:x".into(),
            paths: vec!["a".into(), "b".into()]
        }
        .to_string(),
        "Agent profile global:x is ambiguous: several files define it (a, b)."
    );
}

#[test]
fn parse_scope_defaults_to_project_and_refuses_other_values() {
    assert_eq!(parse_scope(None), Ok(Scope::Project));
    assert_eq!(parse_scope(Some(&Value::Null)), Ok(Scope::Project));
    assert_eq!(parse_scope(Some(&json!("global"))), Ok(Scope::Global));
    assert_eq!(parse_scope(Some(&json!("project"))), Ok(Scope::Project));
    for bad in [json!("Global"), json!(1), json!("team")] {
        let err = parse_scope(Some(&bad)).unwrap_err();
        assert_eq!(
            invalid(&err),
            ("scope must be \"project\" or \"global\".", Some("scope"))
        );
    }
}

#[test]
fn oversized_bodies_are_refused_before_writing() {
    let store = MemStore::new();
    let snapshot = load(&store, true);
    let mut body = capability("big");
    body["description"] = json!("x".repeat(1_048_576));
    let err = create(
        &store,
        &snapshot,
        Kind::Capability,
        Scope::Project,
        &body,
        false,
    )
    .unwrap_err();
    let (message, _) = invalid(&err);
    assert!(
        message.starts_with("Capability is too large: 1048")
            && message.ends_with(" bytes (the limit is 1048576 bytes)."),
        "{message}"
    );
    assert_eq!(file_count(&store), 0);
}

// ---------------------------------------------------------------------------------------------
// FsStore

struct Dirs {
    _temp: tempfile::TempDir,
    project: std::path::PathBuf,
    global: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let temp = tempfile::tempdir().unwrap();
    let project = temp.path().join("project");
    let global = temp.path().join("global");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&global).unwrap();
    Dirs {
        _temp: temp,
        project,
        global,
    }
}

impl Dirs {
    fn store(&self) -> FsStore {
        FsStore::new(Some(self.project.clone()), self.global.clone())
    }
}

#[test]
fn fs_create_save_conflict_and_delete_round_trip() {
    let d = dirs();
    let store = d.store();
    let written = create(
        &store,
        &load(&store, true),
        Kind::Stack,
        Scope::Project,
        &stack("s"),
        false,
    )
    .unwrap();
    let on_disk = d.project.join(".pi/forge/prompt-stacks/s.json");
    assert_eq!(written.path, on_disk.display().to_string());
    assert_eq!(
        std::fs::read_to_string(&on_disk).unwrap(),
        to_pretty(&stack("s"))
    );

    let snapshot = load(&store, true);
    let mut external = stack("s");
    external["name"] = json!("vim");
    std::fs::write(&on_disk, to_pretty(&external)).unwrap();
    let err = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&written.revision),
        &stack("s"),
    )
    .unwrap_err();
    assert_eq!(
        err,
        ServiceError::Stale {
            current_revision: revision(to_pretty(&external).as_bytes()),
            current: Some(external.clone()),
        }
    );
    let snapshot = load(&store, true);
    let current = snapshot.stacks[0].revision.clone();
    let saved = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("s"),
        Some(&current),
        &stack("s"),
    )
    .unwrap();
    assert_eq!(saved.revision, written.revision);
    delete(
        &store,
        &load(&store, true),
        Kind::Stack,
        &sel("s"),
        Some(&saved.revision),
    )
    .unwrap();
    assert!(!on_disk.exists());
    // No temp files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(on_disk.parent().unwrap())
        .unwrap()
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn fs_legacy_file_is_updated_in_place() {
    let d = dirs();
    let legacy = d.project.join(".pi/prompt-stacks/s.json");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::write(&legacy, to_pretty(&stack("s"))).unwrap();
    let store = d.store();
    let snapshot = load(&store, true);
    let mut body = stack("s");
    body["name"] = json!("Legacy");
    let written = update(
        &store,
        &snapshot,
        Kind::Stack,
        &sel("project:s"),
        Some(&snapshot.stacks[0].revision),
        &body,
    )
    .unwrap();
    assert_eq!(written.path, legacy.display().to_string());
    assert_eq!(std::fs::read_to_string(&legacy).unwrap(), to_pretty(&body));
    assert!(!d.project.join(".pi/forge/prompt-stacks").exists());
}

#[cfg(unix)]
#[test]
fn fs_symlinked_resource_directory_is_403_invalid_path() {
    let d = dirs();
    let elsewhere = d._temp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(d.project.join(".pi/forge")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, d.project.join(".pi/forge/capabilities")).unwrap();
    let store = d.store();
    let err = create(
        &store,
        &load(&store, true),
        Kind::Capability,
        Scope::Project,
        &capability("c"),
        false,
    )
    .unwrap_err();
    assert_eq!(err.status(), 403);
    assert_eq!(err.code(), "invalid_path");
    assert!(
        err.to_string().starts_with("Refusing unsafe path: "),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn fs_project_writes_without_a_project_directory_are_io_errors() {
    let d = dirs();
    let store = FsStore::new(None, d.global.clone());
    let err = create(
        &store,
        &load(&store, true),
        Kind::Profile,
        Scope::Project,
        &profile("p", Value::Null),
        false,
    )
    .unwrap_err();
    assert_eq!(err.status(), 500);
    assert_eq!(err.code(), "io");
    assert_eq!(err.to_string(), "No project directory is configured");
}
