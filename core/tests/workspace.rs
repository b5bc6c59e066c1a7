//! Discovery, resolution, activation and the filesystem store, against real temp directories.

use forge_core::canonical::revision;
use forge_core::id::{parse_selector, ResourceKey, Scope, Selector};
use forge_core::workspace::{
    self, Dir, Fault, FileRef, FsStore, LoadOptions, MemStore, RestoredStack, Store, StoreError,
    WorkspaceSnapshot,
};
use std::path::{Path, PathBuf};

struct Fixture {
    _temp: tempfile::TempDir,
    project: PathBuf,
    global: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let project = temp.path().join("project");
        let global = temp.path().join("global");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&global).unwrap();
        Fixture {
            _temp: temp,
            project,
            global,
        }
    }

    fn write(&self, scope: Scope, rel: &str, text: &str) -> PathBuf {
        let root = match scope {
            Scope::Project => &self.project,
            Scope::Global => &self.global,
        };
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn stack(&self, scope: Scope, file: &str, body: &str) -> PathBuf {
        let rel = match scope {
            Scope::Project => format!(".pi/forge/prompt-stacks/{file}"),
            Scope::Global => format!("prompt-stacks/{file}"),
        };
        self.write(scope, &rel, body)
    }

    fn profile(&self, scope: Scope, file: &str, body: &str) -> PathBuf {
        let rel = match scope {
            Scope::Project => format!(".pi/forge/agent-profiles/{file}"),
            Scope::Global => format!("agent-profiles/{file}"),
        };
        self.write(scope, &rel, body)
    }

    fn capability(&self, scope: Scope, file: &str, body: &str) -> PathBuf {
        let rel = match scope {
            Scope::Project => format!(".pi/forge/capabilities/{file}"),
            Scope::Global => format!("capabilities/{file}"),
        };
        self.write(scope, &rel, body)
    }

    fn store(&self) -> FsStore {
        FsStore::new(Some(self.project.clone()), self.global.clone())
    }

    fn load(&self) -> WorkspaceSnapshot {
        self.load_with(true)
    }

    fn load_with(&self, trusted: bool) -> WorkspaceSnapshot {
        workspace::load(
            &self.store(),
            &LoadOptions {
                trusted,
                extra_slots: Vec::new(),
            },
        )
    }
}

fn stack_json(id: &str, extra: &str) -> String {
    format!(
        r#"{{"schemaVersion":1,"id":"{id}"{extra},"items":[{{"kind":"block","id":"b","role":"system","content":"hi"}},{{"kind":"slot","id":"h","slot":"chat-history"}}]}}"#
    )
}

fn sel(text: &str) -> Selector {
    parse_selector(text).unwrap()
}

fn messages(diags: &[forge_core::diag::Diagnostic]) -> Vec<String> {
    diags.iter().map(|d| d.message.clone()).collect()
}

fn resolved_key(snapshot: &WorkspaceSnapshot, selector: &str) -> Option<String> {
    snapshot
        .resolve_stack(&sel(selector))
        .found()
        .map(|e| format!("{}@{}", e.key, e.parsed.stack.name().unwrap_or("")))
}

#[test]
fn v2_project_shadows_global_and_scoped_selectors_are_exact() {
    let f = Fixture::new();
    f.stack(
        Scope::Global,
        "reviewer.json",
        &stack_json("reviewer", r#","name":"g""#),
    );
    f.stack(
        Scope::Project,
        "reviewer.json",
        &stack_json("reviewer", r#","name":"p""#),
    );
    let ws = f.load();
    assert_eq!(
        resolved_key(&ws, "reviewer").as_deref(),
        Some("project:reviewer@p")
    );
    assert_eq!(
        resolved_key(&ws, "global:reviewer").as_deref(),
        Some("global:reviewer@g")
    );
    let effective: Vec<String> = ws
        .effective_stacks()
        .iter()
        .map(|e| e.key.to_string())
        .collect();
    assert_eq!(effective, vec!["project:reviewer"]);
}

#[test]
fn v2_two_project_copies_resolve_to_nothing_and_invalid_still_shadows() {
    let f = Fixture::new();
    f.stack(Scope::Global, "reviewer.json", &stack_json("reviewer", ""));
    f.stack(Scope::Project, "a.json", &stack_json("reviewer", ""));
    f.stack(Scope::Project, "b.json", &stack_json("reviewer", ""));
    let ws = f.load();
    assert_eq!(resolved_key(&ws, "reviewer"), None);
    assert_eq!(resolved_key(&ws, "project:reviewer"), None);
    assert_eq!(
        resolved_key(&ws, "global:reviewer").as_deref(),
        Some("global:reviewer@")
    );

    let f = Fixture::new();
    f.stack(Scope::Global, "reviewer.json", &stack_json("reviewer", ""));
    f.stack(
        Scope::Project,
        "reviewer.json",
        r#"{"id":"reviewer","items":"nope"}"#,
    );
    let ws = f.load();
    let found = ws.resolve_stack(&sel("reviewer")).found().unwrap();
    assert_eq!(found.key, ResourceKey::new(Scope::Project, "reviewer"));
    assert!(!found.usable());
}

#[test]
fn v3_legacy_file_with_same_name_is_shadowed() {
    let f = Fixture::new();
    f.write(
        Scope::Project,
        ".pi/prompt-stacks/default.json",
        &stack_json("legacy", ""),
    );
    f.stack(Scope::Project, "default.json", &stack_json("primary", ""));
    f.write(
        Scope::Project,
        ".pi/prompt-stacks/old.json",
        &stack_json("old", ""),
    );
    let ws = f.load();
    let ids: Vec<&str> = ws.stacks.iter().map(|e| e.key.id.as_str()).collect();
    assert_eq!(ids, vec!["primary", "old"]);
    assert!(ws.stacks[1].is_legacy());
    assert!(!ws.stacks[0].is_legacy());
}

#[test]
fn v4_duplicate_ids_in_one_scope() {
    let f = Fixture::new();
    f.stack(
        Scope::Project,
        "a.json",
        &stack_json("same", r#","autoActivate":true"#),
    );
    f.stack(Scope::Project, "b.json", &stack_json("same", ""));
    f.stack(Scope::Global, "same.json", &stack_json("same", ""));
    let ws = f.load();
    let expected = "Duplicate project stack id: same appears in multiple files (a.json, b.json).";
    for entry in ws.stacks.iter().filter(|e| e.key.scope == Scope::Project) {
        assert_eq!(messages(&entry.diagnostics), vec![expected.to_string()]);
    }
    let global = ws
        .stacks
        .iter()
        .find(|e| e.key.scope == Scope::Global)
        .unwrap();
    assert_eq!(global.diagnostics, vec![]);
    assert!(ws.default_stack(None).is_none());
}

#[test]
fn v5_auto_activation() {
    let f = Fixture::new();
    f.stack(
        Scope::Project,
        "p.json",
        &stack_json("p", r#","autoActivate":true"#),
    );
    f.stack(
        Scope::Global,
        "g.json",
        &stack_json("g", r#","autoActivate":true"#),
    );
    assert_eq!(f.load().auto_stack().unwrap().key.to_string(), "project:p");

    f.stack(
        Scope::Project,
        "p2.json",
        &stack_json("p2", r#","autoActivate":true"#),
    );
    assert!(f.load().auto_stack().is_none());

    let f = Fixture::new();
    f.stack(
        Scope::Project,
        "broken.json",
        r#"{"id":"broken","autoActivate":true,"items":"x"}"#,
    );
    f.stack(
        Scope::Global,
        "g.json",
        &stack_json("g", r#","autoActivate":true"#),
    );
    assert!(f.load().auto_stack().is_none());

    // A global auto stack shadowed by a project stack of the same id is not a candidate.
    let f = Fixture::new();
    f.stack(Scope::Project, "g.json", &stack_json("g", ""));
    f.stack(
        Scope::Global,
        "g.json",
        &stack_json("g", r#","autoActivate":true"#),
    );
    assert!(f.load().auto_stack().is_none());
    let f = Fixture::new();
    f.stack(
        Scope::Global,
        "g.json",
        &stack_json("g", r#","autoActivate":true"#),
    );
    assert_eq!(f.load().auto_stack().unwrap().key.to_string(), "global:g");
}

#[test]
fn v6_default_choice() {
    let f = Fixture::new();
    f.stack(Scope::Project, "default.json", &stack_json("default", ""));
    f.stack(
        Scope::Project,
        "other.json",
        &stack_json("other", r#","autoActivate":true"#),
    );
    let ws = f.load();
    assert_eq!(ws.default_stack(None).unwrap().key.id, "other");
    let default = ws.stacks.iter().find(|e| e.key.id == "default").unwrap();
    assert_eq!(
        messages(&default.diagnostics),
        vec!["default.json no longer auto-activates by filename; set \"autoActivate\": true to keep auto-activating this stack."]
    );
    assert!(ws.default_stack(Some("none")).is_none());
    assert!(ws.default_stack(Some("off")).is_none());

    let f = Fixture::new();
    f.stack(Scope::Project, "bad.json", r#"{"id":"bad","items":5}"#);
    f.stack(
        Scope::Project,
        "good.json",
        &stack_json("good", r#","autoActivate":true"#),
    );
    let ws = f.load();
    assert_eq!(ws.default_stack(Some("bad")).unwrap().key.id, "good");
    assert_eq!(
        ws.default_stack(Some("project:good")).unwrap().key.id,
        "good"
    );
}

#[test]
fn v7_restore_persisted_choice() {
    let f = Fixture::new();
    f.stack(
        Scope::Project,
        "worker.json",
        &stack_json("worker", r#","autoActivate":true"#),
    );
    f.stack(Scope::Project, "bad.json", r#"{"id":"bad","items":5}"#);
    let ws = f.load();
    match ws.restore_stack("project:missing") {
        RestoredStack::Fallback(Some(e)) => assert_eq!(e.key.to_string(), "project:worker"),
        other => panic!("unexpected {other:?}"),
    }
    // A resolvable id is restored without a usability check.
    match ws.restore_stack("project:bad") {
        RestoredStack::Restored(e) => assert_eq!(e.key.to_string(), "project:bad"),
        other => panic!("unexpected {other:?}"),
    }
    // Legacy bare ids resolve as bare selectors.
    assert!(matches!(
        ws.restore_stack("worker"),
        RestoredStack::Restored(_)
    ));
    assert_eq!(ws.restore_stack("none"), RestoredStack::Disabled);

    let f = Fixture::new();
    f.stack(Scope::Project, "x.json", &stack_json("x", ""));
    assert_eq!(
        f.load().restore_stack("project:missing"),
        RestoredStack::Fallback(None)
    );
}

#[test]
fn untrusted_project_shows_global_only() {
    let f = Fixture::new();
    f.stack(
        Scope::Project,
        "p.json",
        &stack_json("p", r#","autoActivate":true"#),
    );
    f.stack(Scope::Global, "g.json", &stack_json("g", ""));
    f.profile(Scope::Project, "pp.json", r#"{"schemaVersion":1,"type":"pi-forge.agent-profile","id":"pp","model":{"provider":"a","id":"b"},"thinkingLevel":"off","promptStack":null}"#);
    f.write(
        Scope::Project,
        ".pi/forge/config.json",
        r#"{"webEditor":{"port":4000}}"#,
    );
    let ws = f.load_with(false);
    assert!(!ws.trusted);
    let keys: Vec<String> = ws.stacks.iter().map(|e| e.key.to_string()).collect();
    assert_eq!(keys, vec!["global:g"]);
    assert!(ws.profiles.is_empty());
    assert!(ws.config.is_none());
    let ws = f.load_with(true);
    assert_eq!(ws.config.unwrap().parsed.config.web_editor_port, Some(4000));
}

fn profile_json(id: &str, extra: &str, stack: &str) -> String {
    format!(
        r#"{{"schemaVersion":1,"type":"pi-forge.agent-profile","id":"{id}"{extra},"model":{{"provider":"p","id":"m"}},"thinkingLevel":"high","promptStack":{stack}}}"#
    )
}

#[test]
fn f9_f10_profile_duplicates_and_auto_conflicts() {
    let f = Fixture::new();
    f.profile(Scope::Project, "a.json", &profile_json("same", "", "null"));
    f.profile(Scope::Project, "b.json", &profile_json("same", "", "null"));
    let ws = f.load();
    for entry in &ws.profiles {
        assert!(entry
            .diagnostics
            .iter()
            .any(|d| d.message.contains("a.json, b.json") && d.field.as_deref() == Some("id")));
    }

    let f = Fixture::new();
    f.profile(
        Scope::Project,
        "one.json",
        &profile_json("one", r#","autoActivate":true"#, "null"),
    );
    f.profile(
        Scope::Project,
        "two.json",
        &profile_json("two", r#","autoActivate":true"#, "null"),
    );
    let ws = f.load();
    for entry in &ws.profiles {
        let auto: Vec<&str> = entry
            .diagnostics
            .iter()
            .filter(|d| d.field.as_deref() == Some("autoActivate"))
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(
            auto,
            vec!["2 project agent profiles set autoActivate: true (one, two); exactly one is allowed."]
        );
    }
    let auto = ws.auto_profile();
    assert!(auto.chosen.is_none());
    assert!(auto.has_auto);
}

#[test]
fn f11_global_auto_profile_shadowed_by_project_id() {
    let f = Fixture::new();
    f.profile(
        Scope::Global,
        "reviewer.json",
        &profile_json("reviewer", r#","autoActivate":true"#, "null"),
    );
    f.profile(
        Scope::Project,
        "reviewer.json",
        &profile_json("reviewer", "", "null"),
    );
    let ws = f.load();
    let auto = ws.auto_profile();
    assert!(auto.chosen.is_none());
    assert!(!auto.has_auto);

    let f = Fixture::new();
    f.profile(
        Scope::Global,
        "reviewer.json",
        &profile_json("reviewer", r#","autoActivate":true"#, "null"),
    );
    let ws = f.load();
    let auto = ws.auto_profile();
    assert_eq!(auto.chosen.unwrap().key.to_string(), "global:reviewer");
    assert!(auto.has_auto);
}

#[test]
fn f13_profile_stack_references_are_scope_relative() {
    let f = Fixture::new();
    f.stack(Scope::Global, "shared.json", &stack_json("shared", ""));
    f.profile(
        Scope::Project,
        "bare.json",
        &profile_json("bare", "", r#""shared""#),
    );
    f.profile(
        Scope::Project,
        "scoped.json",
        &profile_json("scoped", "", r#""global:shared""#),
    );
    let ws = f.load();
    let bare = ws.resolve_profile(&sel("bare")).found().unwrap();
    assert_eq!(
        ws.profile_stack(bare).unwrap_err().to_string(),
        "Unknown prompt stack: shared. Use global:shared to reference the global stack."
    );
    let scoped = ws.resolve_profile(&sel("scoped")).found().unwrap();
    assert_eq!(
        ws.profile_stack(scoped).unwrap().unwrap().key.to_string(),
        "global:shared"
    );
    let none = Fixture::new();
    none.profile(Scope::Global, "n.json", &profile_json("n", "", "null"));
    let ws2 = none.load();
    let n = ws2.resolve_profile(&sel("global:n")).found().unwrap();
    assert!(ws2.profile_stack(n).unwrap().is_none());
}

fn capability_json(id: &str, content: &str) -> String {
    format!(
        r#"{{"schemaVersion":1,"type":"pi-forge.capability","id":"{id}","content":"{content}"}}"#
    )
}

#[test]
fn f28_f29_capability_resolution_never_falls_back_past_a_bad_project_copy() {
    let f = Fixture::new();
    f.capability(
        Scope::Project,
        "review.json",
        r#"{"schemaVersion":1,"type":"pi-forge.capability","id":"review","content":""}"#,
    );
    f.capability(
        Scope::Global,
        "review.json",
        &capability_json("review", "Review."),
    );
    f.stack(
        Scope::Project,
        "worker.json",
        &stack_json("worker", r#","capabilities":[{"ref":"review"}]"#),
    );
    let ws = f.load();
    let err = ws.resolve_capability(&sel("review")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Capability project:review is not usable: "),
        "{err}"
    );
    let worker = ws.resolve_stack(&sel("worker")).found().unwrap();
    let binding_warnings: Vec<&str> = worker
        .diagnostics
        .iter()
        .filter(|d| d.field.as_deref() == Some("capabilities"))
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(binding_warnings.len(), 1);
    assert!(binding_warnings[0].starts_with("Capability binding review at index 0 does not resolve: Capability project:review is not usable"));

    let f = Fixture::new();
    f.capability(
        Scope::Global,
        "review.json",
        &capability_json("review", "Review."),
    );
    let ws = f.load();
    assert_eq!(
        ws.resolve_capability(&sel("review"))
            .unwrap()
            .key
            .to_string(),
        "global:review"
    );
    assert_eq!(
        ws.resolve_capability(&sel("project:review"))
            .unwrap_err()
            .to_string(),
        "Capability not found: project:review."
    );
}

#[test]
fn binding_outcome_gives_the_effective_capability_or_the_exact_problem() {
    use forge_core::capability::{parse_bindings_indexed, ToolPatch};
    let f = Fixture::new();
    f.capability(
        Scope::Project,
        "review.json",
        r#"{"schemaVersion":1,"type":"pi-forge.capability","id":"review","content":"Review.","tools":{"add":["grep"]}}"#,
    );
    let ws = f.load();
    let value = serde_json::json!([
        {"ref": "project:review", "overrides": {"appendContent": "Say why.", "tools": {"remove": ["write"]}}},
        {"ref": 7},
        {"ref": "project:gone"},
        {"ref": "project:review", "id": "blank", "overrides": {"content": " ", "tools": {"add": []}}}
    ]);
    let (bindings, diagnostics) = parse_bindings_indexed(&value, Scope::Project);
    assert_eq!(
        bindings.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![0, 2, 3]
    );
    assert_eq!(
        messages(&diagnostics),
        vec!["capabilities[1].ref must be a non-empty capability selector string, got number."]
    );

    let (target, effective) = ws
        .binding_outcome(Scope::Project, &bindings[0].1, 0)
        .unwrap();
    assert_eq!(target.key.to_string(), "project:review");
    assert_eq!(effective.content, "Review.\n\nSay why.");
    assert_eq!(effective.tools, ToolPatch::new(["grep"], ["write"]));

    let missing = ws
        .binding_outcome(Scope::Project, &bindings[1].1, 2)
        .unwrap_err();
    assert_eq!(
        missing.message,
        "Capability binding gone at index 2 does not resolve: Capability not found: project:gone."
    );
    assert_eq!(missing.field, "capabilities[2].ref");

    let blank = ws
        .binding_outcome(Scope::Project, &bindings[2].1, 3)
        .unwrap_err();
    assert_eq!(
        blank.message,
        "Capability binding blank at index 3 does not apply: Capability needs non-whitespace content or at least one tool in tools.add or tools.remove."
    );
    assert_eq!(blank.field, "capabilities[3].overrides");
}

#[test]
fn bad_files_become_fault_entries_not_failures() {
    let f = Fixture::new();
    f.stack(Scope::Project, "broken.json", "{not json");
    let path = f.project.join(".pi/forge/prompt-stacks/binary.json");
    std::fs::write(&path, b"{\"id\":\"\xff\xfe\"}").unwrap();
    let ws = f.load();
    let broken = ws
        .stacks
        .iter()
        .find(|e| e.file.name() == "broken.json")
        .unwrap();
    assert_eq!(broken.key.id, "broken");
    assert!(broken.diagnostics[0]
        .message
        .starts_with("Failed to parse JSON: "));
    let binary = ws
        .stacks
        .iter()
        .find(|e| e.file.name() == "binary.json")
        .unwrap();
    assert_eq!(binary.key.id, "binary");
    assert!(
        binary.diagnostics[0].message.contains("not valid UTF-8"),
        "{:?}",
        binary.diagnostics
    );
    assert_eq!(binary.revision, revision(b"{\"id\":\"\xff\xfe\"}"));
}

#[test]
fn oversized_file_is_refused_without_reading_it_all() {
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "huge.json", "");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(50 * 1024 * 1024).unwrap();
    let ws = f.load();
    let huge = &ws.stacks[0];
    assert_eq!(huge.key.id, "huge");
    assert_eq!(huge.revision, "");
    assert_eq!(
        messages(&huge.diagnostics),
        vec![format!(
            "Failed to read prompt stack: {} is larger than 8388608 bytes",
            path.display()
        )]
    );
}

#[cfg(unix)]
#[test]
fn symlink_out_of_the_user_folders_is_read_but_never_written() {
    let f = Fixture::new();
    let outside = f._temp.path().join("secret.json");
    std::fs::write(&outside, stack_json("secret", "")).unwrap();
    let dir = f.project.join(".pi/forge/prompt-stacks");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("evil.json")).unwrap();
    let ws = f.load();
    let evil = &ws.stacks[0];
    // The id comes from the file's own content; reading follows the link.
    assert_eq!(evil.key.id, "secret");
    assert!(evil.usable(), "{:?}", evil.diagnostics);
    // Writing through it is refused: its target is outside the project and the global folder.
    let store = f.store();
    let file = FileRef::new(Scope::Project, Dir::Stacks, "evil.json").unwrap();
    let err = store.update(&file, &evil.revision, b"{}").unwrap_err();
    assert_eq!(
        err,
        StoreError::InvalidPath(format!(
            "{} is outside your folders (the project, the global forge directory and your home); pi-forge does not write there",
            std::fs::canonicalize(&outside).unwrap().display()
        ))
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        stack_json("secret", "")
    );
}

#[cfg(unix)]
#[test]
fn symlinked_directory_component_refuses_writes() {
    let f = Fixture::new();
    let elsewhere = f._temp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(f.project.join(".pi/forge")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, f.project.join(".pi/forge/prompt-stacks")).unwrap();
    let store = f.store();
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    let err = store.create(&file, b"{}\n").unwrap_err();
    assert_eq!(err.code(), "invalid_path");
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
}

#[test]
fn file_names_with_path_tricks_are_unrepresentable() {
    for name in [
        "../evil.json",
        "a/b.json",
        "..",
        ".json",
        "x.txt",
        "a\\b.json",
        ".hidden.json",
        "",
    ] {
        let err = FileRef::new(Scope::Project, Dir::Stacks, name).unwrap_err();
        assert_eq!(err.code(), "invalid_path", "{name}");
    }
    assert_eq!(
        FileRef::new(Scope::Global, Dir::Stacks, "ok.json")
            .unwrap()
            .relative_path(),
        "prompt-stacks/ok.json"
    );
}

fn check_store_semantics(store: &dyn Store) {
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    let v1 = b"{\n  \"id\": \"alpha\"\n}\n";
    let r1 = store.create(&file, v1).unwrap();
    assert_eq!(r1, revision(v1));
    assert_eq!(store.create(&file, b"{}").unwrap_err().code(), "exists");
    assert_eq!(store.read(&file, 1 << 20).unwrap(), v1.to_vec());
    let stale = revision(b"something else");
    match store.update(&file, &stale, b"x").unwrap_err() {
        StoreError::Conflict {
            current, expected, ..
        } => {
            assert_eq!(current, r1);
            assert_eq!(expected, stale);
        }
        other => panic!("unexpected {other:?}"),
    }
    let r2 = store.update(&file, &r1, b"v2").unwrap();
    assert_eq!(store.read(&file, 1 << 20).unwrap(), b"v2".to_vec());
    assert_eq!(
        store.delete(&file, &r1).unwrap_err().code(),
        "stale_revision"
    );
    store.delete(&file, &r2).unwrap();
    assert_eq!(store.delete(&file, &r2).unwrap_err().code(), "not_found");
    assert_eq!(
        store.update(&file, &r2, b"x").unwrap_err().code(),
        "not_found"
    );
    assert_eq!(store.read(&file, 10).unwrap_err().code(), "not_found");
}

#[test]
fn fs_and_memory_stores_agree_on_revision_semantics() {
    let f = Fixture::new();
    check_store_semantics(&f.store());
    check_store_semantics(&MemStore::new());
}

#[test]
fn created_files_are_listed_and_loaded() {
    let f = Fixture::new();
    let store = f.store();
    let file = FileRef::new(Scope::Global, Dir::Stacks, "alpha.json").unwrap();
    let text = "{\n  \"schemaVersion\": 1,\n  \"type\": \"pi-forge.prompt-stack\",\n  \"id\": \"alpha\",\n  \"items\": []\n}\n";
    store.create(&file, text.as_bytes()).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.global.join("prompt-stacks/alpha.json")).unwrap(),
        text
    );
    let ws = f.load();
    assert_eq!(ws.stacks[0].key.to_string(), "global:alpha");
    assert_eq!(
        ws.revision_of(&file),
        Some(revision(text.as_bytes()).as_str())
    );
}

#[test]
fn a_write_racing_an_external_edit_is_a_conflict_and_keeps_the_external_bytes() {
    let f = Fixture::new();
    let path = f.stack(
        Scope::Project,
        "alpha.json",
        "{\"id\":\"alpha\",\"items\":[]}\n",
    );
    let ws = f.load();
    let base = ws.stacks[0].revision.clone();
    // Someone edits the file after we loaded it.
    std::fs::write(
        &path,
        "{\"id\":\"alpha\",\"items\":[],\"name\":\"theirs\"}\n",
    )
    .unwrap();
    let store = f.store();
    let err = store
        .update(
            &ws.stacks[0].file,
            &base,
            b"{\"id\":\"alpha\",\"name\":\"mine\"}\n",
        )
        .unwrap_err();
    assert_eq!(err.code(), "stale_revision");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"id\":\"alpha\",\"items\":[],\"name\":\"theirs\"}\n"
    );
}

#[test]
fn crash_between_temp_write_and_rename_leaves_old_file() {
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "alpha.json", "old\n");
    let store = f.store();
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    store.inject_fault(Some(Fault::CrashBeforeRename));
    let err = store
        .update(&file, &revision(b"old\n"), b"new\n")
        .unwrap_err();
    assert_eq!(err.code(), "io");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    // The leftover temp file is never taken for a resource.
    let ws = f.load();
    assert_eq!(ws.stacks.len(), 1);
    assert_eq!(ws.stacks[0].key.id, "alpha");
    // Creating under a crash leaves nothing behind at the target either.
    store.inject_fault(Some(Fault::CrashBeforeRename));
    let fresh = FileRef::new(Scope::Project, Dir::Stacks, "beta.json").unwrap();
    assert_eq!(store.create(&fresh, b"x").unwrap_err().code(), "io");
    assert!(!f.project.join(".pi/forge/prompt-stacks/beta.json").exists());
}

#[test]
fn concurrent_saves_from_one_base_have_exactly_one_winner() {
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "alpha.json", "base\n");
    let store = std::sync::Arc::new(f.store());
    let base = revision(b"base\n");
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let store = store.clone();
            let base = base.clone();
            std::thread::spawn(move || {
                let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
                let body = format!("version {i}\n").repeat(200);
                store.update(&file, &base, body.as_bytes()).map(|_| body)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<&String> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1);
    assert_eq!(
        results
            .iter()
            .filter(|r| matches!(r, Err(StoreError::Conflict { .. })))
            .count(),
        99
    );
    assert_eq!(&std::fs::read_to_string(&path).unwrap(), winners[0]);
}

#[test]
fn missing_directories_load_as_empty() {
    let f = Fixture::new();
    let ws = f.load();
    assert!(ws.stacks.is_empty() && ws.profiles.is_empty() && ws.capabilities.is_empty());
    assert!(ws.problems.is_empty());
    let _ = Path::new("");
}

#[test]
fn profile_stack_references_are_checked_on_load() {
    let f = Fixture::new();
    f.stack(Scope::Global, "shared.json", &stack_json("shared", ""));
    f.stack(Scope::Project, "bad.json", r#"{"id":"bad","items":5}"#);
    f.profile(
        Scope::Project,
        "bare.json",
        &profile_json("bare", "", r#""shared""#),
    );
    f.profile(
        Scope::Project,
        "broken.json",
        &profile_json("broken", "", r#""bad""#),
    );
    f.profile(
        Scope::Project,
        "fine.json",
        &profile_json("fine", "", r#""global:shared""#),
    );
    let ws = f.load();
    let find = |id: &str| {
        ws.profiles
            .iter()
            .find(|e| e.key.id == id)
            .unwrap()
            .diagnostics
            .iter()
            .map(|d| (d.level, d.message.clone(), d.field.clone()))
            .collect::<Vec<_>>()
    };
    use forge_core::diag::Level;
    assert_eq!(
        find("bare"),
        vec![(
            Level::Error,
            "Unknown prompt stack: shared. Use global:shared to reference the global stack."
                .to_string(),
            Some("promptStack".to_string())
        )]
    );
    assert_eq!(
        find("broken"),
        vec![(
            Level::Error,
            "Prompt stack project:bad has errors; this profile cannot be applied until they are fixed.".to_string(),
            Some("promptStack".to_string())
        )]
    );
    assert_eq!(find("fine"), vec![]);
}

// ---------------------------------------------------------------------------------------------
// Issue 16: special and huge files (point 4), writes (point 5)

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
#[test]
fn a_fifo_at_a_resource_path_is_refused_without_blocking() {
    let f = Fixture::new();
    f.stack(Scope::Project, "alpha.json", &stack_json("alpha", ""));
    let fifo = f.project.join(".pi/forge/prompt-stacks/pipe.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Opening the FIFO would block until a writer appears; the load must not.
    let ws = f.load();
    let pipe = ws
        .stacks
        .iter()
        .find(|s| s.file.name() == "pipe.json")
        .unwrap();
    assert_eq!(pipe.revision, "");
    assert_eq!(
        pipe.unreadable(),
        Some("Failed to read prompt stack: pipe.json: it is not a regular file")
    );
    let file = FileRef::new(Scope::Project, Dir::Stacks, "pipe.json").unwrap();
    let err = f.store().read(&file, 1024).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Refusing unsafe path: {} is not a regular file (it is a named pipe)",
            fifo.display()
        )
    );
    assert_eq!(ws.stacks.iter().filter(|s| s.usable()).count(), 1);
}

#[test]
fn the_pre_save_check_refuses_a_huge_file_unread() {
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "big.json", "");
    let big = vec![b' '; (workspace::MAX_FILE_BYTES + 1) as usize];
    std::fs::write(&path, &big).unwrap();
    let file = FileRef::new(Scope::Project, Dir::Stacks, "big.json").unwrap();
    let err = f
        .store()
        .update(&file, &revision(&big), b"{}\n")
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::TooLarge {
            path: path.display().to_string(),
            limit: workspace::MAX_FILE_BYTES
        }
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), big.len() as u64);
}

#[test]
fn an_unreadable_file_cannot_be_saved_or_deleted_and_says_why() {
    use forge_core::workspace::service;
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "big.json", "");
    std::fs::write(&path, vec![b' '; (workspace::MAX_FILE_BYTES + 1) as usize]).unwrap();
    let ws = f.load();
    let reason = format!(
        "Failed to read prompt stack: {} is larger than {} bytes",
        path.display(),
        workspace::MAX_STACK_BYTES
    );
    assert_eq!(ws.stacks[0].unreadable(), Some(reason.as_str()));
    let selector = parse_selector("project:big").unwrap();
    let store = f.store();
    let body = serde_json::json!({"id": "big", "items": []});
    let err = service::update(
        &store,
        &ws,
        workspace::Kind::Stack,
        &selector,
        Some(""),
        &body,
    )
    .unwrap_err();
    assert_eq!((err.status(), err.code()), (409, "unreadable"));
    assert_eq!(
        err.to_string(),
        format!(
            "{} cannot be changed from pi-forge: {reason}",
            path.display()
        )
    );
    let err =
        service::delete(&store, &ws, workspace::Kind::Stack, &selector, Some("")).unwrap_err();
    assert_eq!(err.code(), "unreadable");
}

#[test]
fn create_without_hard_links_is_complete_and_never_overwrites() {
    let f = Fixture::new();
    let store = f.store();
    let dir = f.project.join(".pi/forge/prompt-stacks");
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    store.inject_fault(Some(Fault::NoHardLinks));
    assert_eq!(
        store.create(&file, b"first\n").unwrap(),
        revision(b"first\n")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("alpha.json")).unwrap(),
        "first\n"
    );
    store.inject_fault(Some(Fault::NoHardLinks));
    assert_eq!(
        store.create(&file, b"second\n").unwrap_err().code(),
        "exists"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("alpha.json")).unwrap(),
        "first\n"
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["alpha.json".to_string()]);
}

#[cfg(unix)]
#[test]
fn update_keeps_the_file_mode() {
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "alpha.json", "old\n");
    set_mode(&path, 0o640);
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    f.store()
        .update(&file, &revision(b"old\n"), b"new\n")
        .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    assert_eq!(mode(&path), 0o640);
}

#[cfg(unix)]
#[test]
fn a_read_only_file_is_never_replaced_or_deleted() {
    let f = Fixture::new();
    let path = f.stack(Scope::Project, "alpha.json", "old\n");
    set_mode(&path, 0o444);
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    let store = f.store();
    let err = store
        .update(&file, &revision(b"old\n"), b"new\n")
        .unwrap_err();
    assert_eq!(err, StoreError::ReadOnly(path.display().to_string()));
    assert_eq!(
        err.to_string(),
        format!("{} is read-only; pi-forge does not replace a file you made read-only (make it writable, then save again)", path.display())
    );
    assert_eq!(
        store.delete(&file, &revision(b"old\n")).unwrap_err().code(),
        "read_only"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    assert_eq!(mode(&path), 0o444);
}

#[test]
fn stale_temp_files_of_our_naming_are_cleaned_at_start() {
    let f = Fixture::new();
    let dir = f.project.join(".pi/forge/prompt-stacks");
    f.stack(Scope::Project, "alpha.json", "keep\n");
    let old = std::time::SystemTime::now() - workspace::STALE_TEMP_AGE * 2;
    let write = |name: &str, modified: std::time::SystemTime| {
        let path = dir.join(name);
        std::fs::write(&path, "x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        path
    };
    let stale = write(".alpha.json.4242-7.tmp", old);
    // A temp file being written right now by another process, and files that are not ours.
    write(".alpha.json.4243-0.tmp", std::time::SystemTime::now());
    write(".notes.tmp", old);
    write(".alpha.json.tmp", old);
    let global_stale = {
        let d = f.global.join("agent-profiles");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(".fast.json.17-0.tmp");
        std::fs::write(&p, "x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
        p
    };
    let removed = f.store().clean_stale_temps();
    assert_eq!(removed, vec![stale, global_stale]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ".alpha.json.4243-0.tmp",
            ".alpha.json.tmp",
            ".notes.tmp",
            "alpha.json"
        ]
    );
    assert!(workspace::is_temp_name(".a.json.1-2.tmp"));
    assert!(!workspace::is_temp_name(".a.json.x-2.tmp"));
}

// ---------------------------------------------------------------------------------------------
// Issue 16, point 3: symbolic links (stow, chezmoi)

/// A store whose user's home is `<temp>/home`, with a `dotfiles` folder in it.
#[cfg(unix)]
fn dotfiles(f: &Fixture) -> (FsStore, PathBuf) {
    let home = f._temp.path().join("home");
    let dots = home.join("dotfiles");
    std::fs::create_dir_all(&dots).unwrap();
    (f.store().allow_writes_under(home), dots)
}

#[cfg(unix)]
#[test]
fn a_symlinked_global_file_loads_and_saves_in_place() {
    let f = Fixture::new();
    let (store, dots) = dotfiles(&f);
    let target = dots.join("shared.json");
    std::fs::write(&target, stack_json("shared", "")).unwrap();
    let dir = f.global.join("prompt-stacks");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("shared.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let ws = workspace::load(
        &store,
        &LoadOptions {
            trusted: true,
            extra_slots: vec![],
        },
    );
    let shared = &ws.stacks[0];
    assert_eq!(shared.key.to_string(), "global:shared");
    assert!(shared.usable(), "{:?}", shared.diagnostics);
    assert_eq!(
        shared.revision,
        revision(stack_json("shared", "").as_bytes())
    );
    let new = stack_json("shared", r#","name":"Edited""#);
    store
        .update(&shared.file, &shared.revision, new.as_bytes())
        .unwrap();
    // The link stays a link; its target has the new bytes.
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_link(&link).unwrap(), target);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), new);
    // Deleting removes the link, never its target.
    store
        .delete(&shared.file, &revision(new.as_bytes()))
        .unwrap();
    assert!(std::fs::symlink_metadata(&link).is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), new);
}

#[cfg(unix)]
#[test]
fn a_symlinked_folder_is_read_and_written_through() {
    let f = Fixture::new();
    let (store, dots) = dotfiles(&f);
    let stacks = dots.join("stacks");
    std::fs::create_dir_all(&stacks).unwrap();
    std::fs::write(stacks.join("alpha.json"), stack_json("alpha", "")).unwrap();
    std::fs::create_dir_all(f.project.join(".pi/forge")).unwrap();
    std::os::unix::fs::symlink(&stacks, f.project.join(".pi/forge/prompt-stacks")).unwrap();
    let ws = workspace::load(
        &store,
        &LoadOptions {
            trusted: true,
            extra_slots: vec![],
        },
    );
    assert_eq!(ws.stacks.len(), 1);
    assert!(ws.stacks[0].usable());
    let alpha = &ws.stacks[0];
    store
        .update(
            &alpha.file,
            &alpha.revision,
            b"{\"id\":\"alpha\",\"items\":[]}\n",
        )
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(stacks.join("alpha.json")).unwrap(),
        "{\"id\":\"alpha\",\"items\":[]}\n"
    );
    let beta = FileRef::new(Scope::Project, Dir::Stacks, "beta.json").unwrap();
    store.create(&beta, b"{\"id\":\"beta\"}\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(stacks.join("beta.json")).unwrap(),
        "{\"id\":\"beta\"}\n"
    );
    store
        .delete(&beta, &revision(b"{\"id\":\"beta\"}\n"))
        .unwrap();
    assert!(!stacks.join("beta.json").exists());
}

#[cfg(unix)]
#[test]
fn dangling_links_and_loops_load_as_errors_and_are_never_written() {
    let f = Fixture::new();
    let dir = f.project.join(".pi/forge/prompt-stacks");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = f.project.join("gone.json");
    std::os::unix::fs::symlink(&missing, dir.join("dangling.json")).unwrap();
    std::os::unix::fs::symlink(dir.join("loop-b.json"), dir.join("loop-a.json")).unwrap();
    std::os::unix::fs::symlink(dir.join("loop-a.json"), dir.join("loop-b.json")).unwrap();
    let ws = f.load();
    let errors: Vec<(String, Vec<String>)> = ws
        .stacks
        .iter()
        .map(|s| (s.file.name().to_string(), messages(&s.diagnostics)))
        .collect();
    let loop_reason = "it is a symbolic link that cannot be followed: Too many levels of symbolic links (os error 40)";
    assert_eq!(
        errors,
        vec![
            (
                "dangling.json".to_string(),
                vec![format!(
                    "Failed to read prompt stack: dangling.json: it is a broken symbolic link (to {}, which does not exist)",
                    missing.display()
                )]
            ),
            (
                "loop-a.json".to_string(),
                vec![format!("Failed to read prompt stack: loop-a.json: {loop_reason}")]
            ),
            (
                "loop-b.json".to_string(),
                vec![format!("Failed to read prompt stack: loop-b.json: {loop_reason}")]
            ),
        ]
    );
    // A create never goes through a dangling link of the same name.
    let store = f.store();
    let dangling = FileRef::new(Scope::Project, Dir::Stacks, "dangling.json").unwrap();
    assert_eq!(
        store.create(&dangling, b"{}\n").unwrap_err().code(),
        "exists"
    );
    assert!(!missing.exists());
    let looped = FileRef::new(Scope::Project, Dir::Stacks, "loop-a.json").unwrap();
    assert_eq!(
        store
            .update(&looped, &revision(b""), b"{}\n")
            .unwrap_err()
            .code(),
        "io"
    );
}

#[cfg(unix)]
#[test]
fn no_folder_is_created_through_a_link_out_of_the_user_folders() {
    let f = Fixture::new();
    let outside = f._temp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(f.project.join(".pi")).unwrap();
    std::os::unix::fs::symlink(&outside, f.project.join(".pi/forge")).unwrap();
    let file = FileRef::new(Scope::Project, Dir::Stacks, "alpha.json").unwrap();
    let err = f.store().create(&file, b"{}\n").unwrap_err();
    assert_eq!(err.code(), "invalid_path");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

const REVIEW_CAPABILITY: &str =
    r#"{"schemaVersion":1,"type":"pi-forge.capability","id":"review","content":"Review."}"#;

/// Spec F28: a bare binding ref resolves in the Preset's own scope only (an invalid project
/// `review` does not fall back to `global:review`), and a direct bare selection is shadowed the
/// same way; F29: with no project `review`, a direct bare selection finds the global one.
#[test]
fn f28_f29_binding_and_direct_resolution_never_fall_back_past_the_project() {
    use forge_core::capability::parse_bindings;
    let f = Fixture::new();
    f.capability(Scope::Global, "review.json", REVIEW_CAPABILITY);
    // Project `review` exists but is invalid (no content, no tools).
    f.capability(
        Scope::Project,
        "review.json",
        r#"{"schemaVersion":1,"type":"pi-forge.capability","id":"review","content":""}"#,
    );
    let ws = f.load();
    let (bindings, d) = parse_bindings(&serde_json::json!([{"ref": "review"}]), Scope::Project);
    assert!(d.is_empty(), "{d:?}");
    let problem = ws
        .binding_outcome(Scope::Project, &bindings[0], 0)
        .unwrap_err();
    assert_eq!(
        problem.message,
        "Capability binding review at index 0 does not resolve: Capability project:review is not usable: Capability needs non-whitespace content or at least one tool in tools.add or tools.remove."
    );
    let direct = ws
        .resolve_capability(&Selector::Bare("review".into()))
        .unwrap_err();
    assert_eq!(
        direct.to_string(),
        "Capability project:review is not usable: Capability needs non-whitespace content or at least one tool in tools.add or tools.remove."
    );
    // A qualified global ref is fine.
    let (bindings, _) = parse_bindings(
        &serde_json::json!([{"ref": "global:review"}]),
        Scope::Project,
    );
    let (target, _) = ws.binding_outcome(Scope::Project, &bindings[0], 0).unwrap();
    assert_eq!(target.key.to_string(), "global:review");

    // F29: without a project `review`, the direct bare selection is the global one.
    let g = Fixture::new();
    g.capability(Scope::Global, "review.json", REVIEW_CAPABILITY);
    let ws = g.load();
    let found = ws
        .resolve_capability(&Selector::Bare("review".into()))
        .unwrap();
    assert_eq!(found.key.to_string(), "global:review");
}

#[test]
fn capability_users_lists_each_binding_preset_once_in_snapshot_order() {
    let f = Fixture::new();
    f.capability(Scope::Project, "review.json", REVIEW_CAPABILITY);
    f.capability(Scope::Global, "review.json", REVIEW_CAPABILITY);
    let stack = |id: &str, refs: &str| {
        format!(
            r#"{{"schemaVersion":2,"type":"pi-forge.prompt-stack","id":"{id}","items":[{{"kind":"slot","id":"h","slot":"chat-history"}}],"capabilities":{refs}}}"#
        )
    };
    f.stack(
        Scope::Project,
        "a.json",
        &stack(
            "a",
            r#"[{"ref":"review"},{"ref":"project:review","id":"again"}]"#,
        ),
    );
    f.stack(
        Scope::Project,
        "b.json",
        &stack("b", r#"[{"ref":"global:review"},{"ref":"gone"}]"#),
    );
    f.stack(
        Scope::Global,
        "c.json",
        &stack("c", r#"[{"ref":"review"}]"#),
    );
    let users = f.load().capability_users();
    let show = |scope: Scope| {
        users
            .get(&ResourceKey::new(scope, "review"))
            .map(|keys| keys.iter().map(ToString::to_string).collect::<Vec<_>>())
    };
    assert_eq!(show(Scope::Project), Some(vec!["project:a".to_string()]));
    assert_eq!(
        show(Scope::Global),
        Some(vec!["global:c".to_string(), "project:b".to_string()])
    );
    assert_eq!(users.len(), 2, "an unresolved binding names no capability");
}
