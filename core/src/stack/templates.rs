//! The built-in templates the editor's New dialog offers: `(key, label, help)` and the stack
//! each one creates. They live here so tests can compile every one of them.

use serde_json::{json, Value};

/// `(key, label, help)` of every built-in template, in the order the dialog lists them.
pub const TEMPLATES: [(&str, &str, &str); 3] = [
    ("pi-mirror", "Pi mirror layout", "Pi's own prompt layout as editable items: identity, tools, guidelines, project context, skills, date and chat history."),
    ("minimal-worker", "Minimal worker", "A short role block, read-only tools and the chat history. A start for subagents."),
    ("empty", "Empty", "No items at all."),
];

/// The new stack of template `kind` (unknown kinds: no items) with `id` and an optional name.
pub fn template(kind: &str, id: &str, name: &str) -> Value {
    let mut stack = json!({ "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": id });
    if !name.trim().is_empty() {
        stack["name"] = json!(name.trim());
    }
    let items = match kind {
        "pi-mirror" => json!([
            { "kind": "block", "id": "identity", "role": "system", "content": "You are a coding agent working in the user's project. Read before you change, keep edits small, and say what you did." },
            { "kind": "slot", "id": "tools", "role": "system", "slot": "tools" },
            { "kind": "slot", "id": "guidelines", "role": "system", "slot": "tool-guidelines" },
            { "kind": "slot", "id": "project", "role": "system", "slot": "project-context" },
            { "kind": "slot", "id": "skills", "role": "system", "slot": "skills" },
            { "kind": "slot", "id": "when", "role": "system", "slot": "date-cwd" },
            { "kind": "slot", "id": "history", "slot": "chat-history" }
        ]),
        "minimal-worker" => {
            stack["tools"] = json!({ "allow": ["read", "grep", "find", "ls"] });
            json!([
                { "kind": "block", "id": "role", "role": "system", "content": "You do one focused task and report the result briefly. You do not modify files." },
                { "kind": "slot", "id": "history", "slot": "chat-history" }
            ])
        }
        _ => json!([]),
    };
    stack["items"] = items;
    stack
}
