//! Fixtures shared by the delegation tests: a child Preset and the `reviewer` profile that
//! delegation may use, its settings, and a parent Preset that lets the model delegate.

/// The child's Preset: its policy allows `bash` too, which delegation never grants.
pub const CHILD: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "child",
  "mode": "replace",
  "tools": { "allow": ["read", "grep", "bash"] },
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are CHILD REVIEWER." },
    { "id": "note", "kind": "block", "role": "user", "content": "Be brief." }
  ]
}
"#;

pub const REVIEWER: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "reviewer",
  "model": { "provider": "fake", "id": "fake-1" },
  "thinkingLevel": "off",
  "promptStack": "child"
}
"#;

/// `subagents.json` enabling `project:reviewer`.
pub const SETTINGS: &str = r#"{ "profiles": { "project:reviewer": { "enabled": true } } }"#;

/// The parent's Preset lets the model delegate (its tool policy allows `forge_subagent`).
pub const PARENT: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "parent",
  "mode": "replace",
  "tools": { "allow": ["read", "forge_subagent"] },
  "items": [
    { "id": "sys", "kind": "block", "role": "system", "content": "You are PARENT." },
    { "id": "hist", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

/// A parent Pi session in a project with the child, the `reviewer` profile, `settings` as its
/// `subagents.json` and `parent` as the active Preset (which lets the model delegate).
pub fn parent_session_with(parent: &str, settings: &str) -> (super::Workspace, super::Pi) {
    let ws = super::Workspace::new(&[
        (".pi/forge/prompt-stacks/child.json", CHILD),
        (".pi/forge/prompt-stacks/parent.json", parent),
        (".pi/forge/agent-profiles/reviewer.json", REVIEWER),
        (".pi/forge/subagents.json", settings),
    ]);
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let (status, _) = ws.api("POST", "/api/stacks/parent/activate", "{}");
    assert_eq!(status, 200);
    (ws, pi)
}
