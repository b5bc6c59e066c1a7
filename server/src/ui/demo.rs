//! The demo workspace of `pi-forge ui --demo`: a temporary project and global directory seeded
//! with example stacks (from `docs/examples`), two agent profiles and two capabilities. It is
//! removed when the server stops.

use std::path::PathBuf;

use anyhow::{Context as _, Result};

/// `(path below the temp root, contents)`.
const FILES: [(&str, &str); 10] = [
    (
        "project/.pi/forge/prompt-stacks/careful-reviewer.json",
        include_str!("../../../docs/examples/stacks/careful-reviewer.json"),
    ),
    (
        "project/.pi/forge/prompt-stacks/terse-pair.json",
        include_str!("../../../docs/examples/stacks/terse-pair.json"),
    ),
    (
        "project/.pi/forge/prompt-stacks/test-first.json",
        include_str!("../../../docs/examples/stacks/test-first.json"),
    ),
    (
        "project/.pi/forge/prompt-stacks/validation-issues.json",
        include_str!("../../../docs/examples/stacks/validation-issues.json"),
    ),
    (
        "global/prompt-stacks/pi-mirror.json",
        include_str!("../../../docs/examples/stacks/pi-mirror.json"),
    ),
    (
        "global/prompt-stacks/docs-writer.json",
        include_str!("../../../docs/examples/stacks/docs-writer.json"),
    ),
    ("project/.pi/forge/agent-profiles/reviewer.json", REVIEWER),
    ("global/agent-profiles/writer.json", WRITER),
    ("project/.pi/forge/capabilities/no-writes.json", NO_WRITES),
    ("global/capabilities/explain-steps.json", EXPLAIN_STEPS),
];

const REVIEWER: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "reviewer",
  "name": "Reviewer",
  "description": "Careful review with a strong model.",
  "model": { "provider": "anthropic", "id": "claude-sonnet-4" },
  "thinkingLevel": "high",
  "promptStack": "careful-reviewer"
}
"#;

const WRITER: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "writer",
  "name": "Docs writer",
  "model": { "provider": "openai", "id": "gpt-5" },
  "thinkingLevel": "medium",
  "promptStack": "docs-writer"
}
"#;

const NO_WRITES: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "no-writes",
  "name": "No writes",
  "description": "Look, do not touch.",
  "content": "Do not modify files in this session; describe the change instead.",
  "tools": { "add": [], "remove": ["edit", "write"] }
}
"#;

const EXPLAIN_STEPS: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "explain-steps",
  "name": "Explain steps",
  "content": "Before each tool call, say in one sentence why you make it.",
  "tools": { "add": [], "remove": [] }
}
"#;

/// A seeded temp directory, removed on drop.
pub struct DemoDir {
    root: PathBuf,
}

impl DemoDir {
    pub fn create() -> Result<DemoDir> {
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix)
            .map_err(|e| anyhow::anyhow!("cannot get random bytes: {e}"))?;
        let name: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        let root = std::env::temp_dir().join(format!("pi-forge-demo-{name}"));
        let dir = DemoDir { root };
        for (path, contents) in FILES {
            let target = dir.root.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::write(&target, contents)
                .with_context(|| format!("cannot write {}", target.display()))?;
        }
        Ok(dir)
    }

    pub fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    pub fn global(&self) -> PathBuf {
        self.root.join("global")
    }

    #[cfg(test)]
    fn root(&self) -> &std::path::Path {
        &self.root
    }
}

impl Drop for DemoDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_core::workspace::{self, FsStore, LoadOptions};

    #[test]
    fn the_demo_workspace_loads_with_every_kind_and_is_removed() {
        let dir = DemoDir::create().unwrap();
        let store = FsStore::new(Some(dir.project()), dir.global());
        let snapshot = workspace::load(
            &store,
            &LoadOptions {
                trusted: true,
                extra_slots: Vec::new(),
            },
        );
        assert_eq!(snapshot.stacks.len(), 6);
        assert_eq!(snapshot.profiles.len(), 2);
        assert_eq!(snapshot.capabilities.len(), 2);
        for entry in &snapshot.profiles {
            assert!(entry.usable(), "{:?}", entry.diagnostics);
        }
        for entry in &snapshot.capabilities {
            assert!(entry.usable(), "{:?}", entry.diagnostics);
        }
        let root = dir.root().to_path_buf();
        drop(dir);
        assert!(!root.exists());
    }
}
