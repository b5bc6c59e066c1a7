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
