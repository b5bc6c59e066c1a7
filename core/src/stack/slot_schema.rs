//! A machine-readable description of the options every built-in slot understands, so an editor
//! can build a form for a slot item instead of asking for raw JSON.
//!
//! The lists mirror what the compiler reads (`compile/slots.rs` for the rendered slots,
//! `compile/history.rs` for `chat-history`) and nothing else: an option the compiler ignores is
//! not listed, and the tests below fail when the two drift apart. Option objects stay free-form
//! in the stack file; [`unknown_options`] names the keys a form would keep as they are.

use serde::Serialize;
use serde_json::{Map, Value};

/// The JSON type of an option's value, and what a form field for it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum OptionKind {
    /// A JSON boolean.
    Bool,
    /// A JSON integer, at least `min` when given.
    Integer { min: Option<i64> },
    /// A single-line JSON string.
    Text,
    /// A JSON string, one of `values`.
    Choice { values: &'static [&'static str] },
    /// A JSON array of message role strings (`user`, `assistant`, `toolResult`, `custom`,
    /// `bashExecution`, `branchSummary`, `compactionSummary`).
    Roles,
    /// A JSON array of strings.
    TextList,
}

/// One option of a slot.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotOption {
    /// The key inside the item's `options` object.
    pub name: &'static str,
    pub label: &'static str,
    pub help: &'static str,
    pub kind: OptionKind,
    /// What the compiler does when the option is absent, in words (`"true"`, `"all"`,
    /// `"unlimited"`, …).
    pub default: Option<&'static str>,
}

/// A built-in slot and its options, in the order a form should show them.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotSchema {
    pub slot: &'static str,
    pub label: &'static str,
    pub help: &'static str,
    /// The role a new item of this slot should get; `None` when the compiler ignores the role.
    pub default_role: Option<&'static str>,
    pub options: &'static [SlotOption],
}

const FORMAT_VALUES: &[&str] = &["xml", "plain"];

const fn format_option(help: &'static str) -> SlotOption {
    SlotOption {
        name: "format",
        label: "Format",
        help,
        kind: OptionKind::Choice {
            values: FORMAT_VALUES,
        },
        default: Some("xml"),
    }
}

const INCLUDE_TIME: SlotOption = SlotOption {
    name: "includeTime",
    label: "Include time",
    help: "Adds a second line with the local time of day.",
    kind: OptionKind::Bool,
    default: Some("false"),
};

const CHAT_HISTORY: &[SlotOption] = &[
    SlotOption {
        name: "includeLastUserMessage",
        label: "Include last user message",
        help: "Turn off when another item already quotes the newest user message.",
        kind: OptionKind::Bool,
        default: Some("true"),
    },
    SlotOption {
        name: "stripAssistantThinking",
        label: "Strip assistant thinking",
        help: "Removes the reasoning parts of earlier assistant replies.",
        kind: OptionKind::Bool,
        default: Some("false"),
    },
    SlotOption {
        name: "includeSummaries",
        label: "Include summaries",
        help: "Keeps branch and compaction summary messages in the history.",
        kind: OptionKind::Bool,
        default: Some("true"),
    },
    SlotOption {
        name: "roles",
        label: "Roles",
        help: "Only messages with one of these roles are kept; an empty list keeps every role.",
        kind: OptionKind::Roles,
        default: Some("all"),
    },
    SlotOption {
        name: "toolMode",
        label: "Tool messages",
        help: "Whether tool calls and their results stay in the history or are removed.",
        kind: OptionKind::Choice {
            values: &["keep", "drop"],
        },
        default: Some("keep"),
    },
    SlotOption {
        name: "maxMessages",
        label: "Max messages",
        help: "Keeps only this many of the newest messages.",
        kind: OptionKind::Integer { min: Some(1) },
        default: Some("unlimited"),
    },
    SlotOption {
        name: "maxChars",
        label: "Max characters",
        help: "Drops older messages once the history text would grow past this size; the newest always stays.",
        kind: OptionKind::Integer { min: Some(1) },
        default: Some("unlimited"),
    },
];

const TOOLS: &[SlotOption] = &[
    format_option("XML tags or a plain bulleted list."),
    SlotOption {
        name: "onlyWithSnippets",
        label: "Only tools with snippets",
        help: "Leaves out tools that have no prompt snippet.",
        kind: OptionKind::Bool,
        default: Some("false"),
    },
];

const TOOL_GUIDELINES: &[SlotOption] = &[
    format_option("XML tags or a plain bulleted list."),
    SlotOption {
        name: "heading",
        label: "Heading",
        help: "The first line in plain format; leave it empty for no heading.",
        kind: OptionKind::Text,
        default: Some("Tool guidelines:"),
    },
    SlotOption {
        name: "includePiDefaultGuidelines",
        label: "Include Pi's default guidelines",
        help: "Appends Pi's own two general guidelines to the list.",
        kind: OptionKind::Bool,
        default: Some("false"),
    },
    SlotOption {
        name: "piStyle",
        label: "Pi style",
        help: "Writes the bash hint exactly as Pi does, without a final period.",
        kind: OptionKind::Bool,
        default: Some("false"),
    },
];

const SKILLS: &[SlotOption] = &[
    format_option("XML tags or a plain bulleted list."),
    SlotOption {
        name: "requireReadTool",
        label: "Require the read tool",
        help:
            "Renders nothing when the read tool is not selected, since skills are loaded with it.",
        kind: OptionKind::Bool,
        default: Some("false"),
    },
];

const PROJECT_CONTEXT: &[SlotOption] = &[format_option(
    "XML tags around each file or plain indented text.",
)];

/// Every built-in slot, in the order of [`crate::stack::BUILTIN_SLOTS`].
pub const SLOT_SCHEMAS: &[SlotSchema] = &[
    SlotSchema {
        slot: "chat-history",
        label: "Chat history",
        help: "Where the conversation goes, optionally filtered and trimmed.",
        default_role: None,
        options: CHAT_HISTORY,
    },
    SlotSchema {
        slot: "tools",
        label: "Tools",
        help: "Lists the selected tools with their prompt snippets.",
        default_role: Some("system"),
        options: TOOLS,
    },
    SlotSchema {
        slot: "tool-guidelines",
        label: "Tool guidelines",
        help: "Lists the usage guidelines of the selected tools.",
        default_role: Some("system"),
        options: TOOL_GUIDELINES,
    },
    SlotSchema {
        slot: "skills",
        label: "Skills",
        help: "Lists the skills the model may load, with where to find each one.",
        default_role: Some("system"),
        options: SKILLS,
    },
    SlotSchema {
        slot: "project-context",
        label: "Project context",
        help: "The project's context files, such as AGENTS.md, with their paths.",
        default_role: Some("system"),
        options: PROJECT_CONTEXT,
    },
    SlotSchema {
        slot: "date",
        label: "Date",
        help: "Today's date.",
        default_role: Some("system"),
        options: &[INCLUDE_TIME],
    },
    SlotSchema {
        slot: "date-cwd",
        label: "Date and working directory",
        help: "Today's date followed by the working directory.",
        default_role: Some("system"),
        options: &[INCLUDE_TIME],
    },
    SlotSchema {
        slot: "cwd",
        label: "Working directory",
        help: "The directory Pi runs in.",
        default_role: Some("system"),
        options: &[],
    },
    SlotSchema {
        slot: "active-model",
        label: "Active model",
        help: "The provider and id of the model in use.",
        default_role: Some("system"),
        options: &[],
    },
    SlotSchema {
        slot: "append-system-prompt",
        label: "Appended system prompt",
        help: "The extra system prompt text Pi was started with.",
        default_role: Some("system"),
        options: &[],
    },
    SlotSchema {
        slot: "pi-docs",
        label: "Pi documentation",
        help: "Points the model at Pi's readme, docs and examples.",
        default_role: Some("system"),
        options: &[],
    },
];

/// The schema of a built-in slot, or `None` for any other name.
pub fn slot_schema(slot: &str) -> Option<&'static SlotSchema> {
    SLOT_SCHEMAS.iter().find(|s| s.slot == slot)
}

/// Names of the options of `slot` that the schema does not know (for "kept as-is" notes in the
/// form), in the object's key order. For a slot without a schema (one an extension registers)
/// every key is unknown.
pub fn unknown_options(slot: &str, options: &Map<String, Value>) -> Vec<String> {
    let known = slot_schema(slot).map_or(&[][..], |s| s.options);
    options
        .keys()
        .filter(|key| !known.iter().any(|o| o.name == key.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::BUILTIN_SLOTS;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn names(slot: &str) -> Vec<&'static str> {
        slot_schema(slot)
            .unwrap()
            .options
            .iter()
            .map(|o| o.name)
            .collect()
    }

    #[test]
    fn every_builtin_slot_has_a_schema_and_no_other() {
        let schemas: Vec<&str> = SLOT_SCHEMAS.iter().map(|s| s.slot).collect();
        assert_eq!(schemas, BUILTIN_SLOTS);
        for slot in BUILTIN_SLOTS {
            assert_eq!(slot_schema(slot).unwrap().slot, *slot);
        }
        assert!(slot_schema("not-real").is_none());
        assert!(slot_schema("Chat-History").is_none());
    }

    #[test]
    fn option_names_are_unique_and_texts_are_filled() {
        for schema in SLOT_SCHEMAS {
            assert!(!schema.label.is_empty() && !schema.help.is_empty());
            let unique: BTreeSet<&str> = schema.options.iter().map(|o| o.name).collect();
            assert_eq!(unique.len(), schema.options.len(), "{}", schema.slot);
            for option in schema.options {
                assert!(!option.label.is_empty(), "{}", option.name);
                assert!(option.help.ends_with('.'), "{}", option.name);
            }
        }
    }

    #[test]
    fn exact_option_lists() {
        assert_eq!(
            names("chat-history"),
            [
                "includeLastUserMessage",
                "stripAssistantThinking",
                "includeSummaries",
                "roles",
                "toolMode",
                "maxMessages",
                "maxChars",
            ]
        );
        assert_eq!(
            names("tool-guidelines"),
            ["format", "heading", "includePiDefaultGuidelines", "piStyle"]
        );
        assert_eq!(names("skills"), ["format", "requireReadTool"]);
        assert_eq!(names("date-cwd"), ["includeTime"]);
        assert!(names("pi-docs").is_empty());
    }

    #[test]
    fn serialized_form() {
        let history = serde_json::to_value(slot_schema("chat-history").unwrap()).unwrap();
        assert_eq!(history["slot"], "chat-history");
        assert_eq!(history["defaultRole"], Value::Null);
        assert_eq!(
            history["options"][4],
            json!({
                "name": "toolMode",
                "label": "Tool messages",
                "help": "Whether tool calls and their results stay in the history or are removed.",
                "kind": {"type": "choice", "values": ["keep", "drop"]},
                "default": "keep",
            })
        );
        assert_eq!(
            history["options"][5]["kind"],
            json!({"type": "integer", "min": 1})
        );
        assert_eq!(history["options"][3]["kind"], json!({"type": "roles"}));
        assert_eq!(history["options"][0]["kind"], json!({"type": "bool"}));
        let tools = serde_json::to_value(slot_schema("tools").unwrap()).unwrap();
        assert_eq!(tools["defaultRole"], "system");
        assert_eq!(
            tools["options"][0]["kind"],
            json!({"type": "choice", "values": ["xml", "plain"]})
        );
        let guidelines = serde_json::to_value(slot_schema("tool-guidelines").unwrap()).unwrap();
        assert_eq!(guidelines["options"][1]["kind"], json!({"type": "text"}));
        assert_eq!(guidelines["options"][1]["default"], "Tool guidelines:");
        assert_eq!(
            serde_json::to_value(OptionKind::TextList).unwrap(),
            json!({"type": "textList"})
        );
        assert_eq!(
            serde_json::to_value(OptionKind::Integer { min: None }).unwrap(),
            json!({"type": "integer", "min": null})
        );
    }

    #[test]
    fn unknown_options_keep_key_order() {
        let options = json!({
            "zeta": 1,
            "maxChars": 100,
            "format": "plain",
            "roles": ["user"],
            "alpha": true,
        });
        let options = options.as_object().unwrap();
        assert_eq!(
            unknown_options("chat-history", options),
            ["zeta", "format", "alpha"]
        );
        assert_eq!(
            unknown_options("tools", options),
            ["zeta", "maxChars", "roles", "alpha"]
        );
        assert_eq!(
            unknown_options("cwd", options),
            ["zeta", "maxChars", "format", "roles", "alpha"]
        );
        assert_eq!(
            unknown_options("my-extension-slot", options),
            ["zeta", "maxChars", "format", "roles", "alpha"]
        );
        assert!(unknown_options("chat-history", &Map::new()).is_empty());
    }

    /// The options each built-in slot's renderer reads, written down by hand from
    /// `render_builtin` (slots.rs) and `pipeline` (history.rs).
    const READ_BY_COMPILER: &[(&str, &[&str])] = &[
        (
            "chat-history",
            &[
                "includeLastUserMessage",
                "stripAssistantThinking",
                "includeSummaries",
                "roles",
                "toolMode",
                "maxMessages",
                "maxChars",
            ],
        ),
        ("tools", &["format", "onlyWithSnippets"]),
        (
            "tool-guidelines",
            &["format", "heading", "includePiDefaultGuidelines", "piStyle"],
        ),
        ("skills", &["format", "requireReadTool"]),
        ("project-context", &["format"]),
        ("date", &["includeTime"]),
        ("date-cwd", &["includeTime"]),
        ("cwd", &[]),
        ("active-model", &[]),
        ("append-system-prompt", &[]),
        ("pi-docs", &[]),
    ];

    /// Option names a compiler source reads through its helpers: `flag(options, "x")`,
    /// `include(options, "x")`, `positive(options, "x")` and `o.get("x")`.
    fn names_read_in(source: &str) -> BTreeSet<String> {
        let source = source.split("#[cfg(test)]").next().unwrap();
        let mut out = BTreeSet::new();
        for prefix in [
            "flag(options, \"",
            "include(options, \"",
            "positive(options, \"",
            "o.get(\"",
        ] {
            for (at, _) in source.match_indices(prefix) {
                let rest = &source[at + prefix.len()..];
                out.insert(rest[..rest.find('"').unwrap()].to_string());
            }
        }
        out
    }

    #[test]
    fn schema_matches_what_the_compiler_reads() {
        let listed: Vec<&str> = READ_BY_COMPILER.iter().map(|(s, _)| *s).collect();
        assert_eq!(listed, BUILTIN_SLOTS);
        for (slot, read) in READ_BY_COMPILER {
            let mut expected: Vec<&str> = read.to_vec();
            let mut actual = names(slot);
            expected.sort_unstable();
            actual.sort_unstable();
            assert_eq!(actual, expected, "{slot}");
        }

        // The hand-written lists against the compiler's source text.
        let history: BTreeSet<String> = names_read_in(include_str!("../compile/history.rs"));
        let expected: BTreeSet<String> = names("chat-history")
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(history, expected, "compile/history.rs");
        let rendered: BTreeSet<String> = names_read_in(include_str!("../compile/slots.rs"));
        let expected: BTreeSet<String> = SLOT_SCHEMAS
            .iter()
            .filter(|s| s.slot != "chat-history")
            .flat_map(|s| s.options.iter().map(|o| o.name.to_string()))
            .collect();
        assert_eq!(rendered, expected, "compile/slots.rs");
    }

    #[test]
    fn option_kinds_match_what_the_compiler_accepts() {
        // Booleans are read with `=== true` / `=== false`, numbers as positive integers,
        // `format` and `toolMode` as exact strings.
        for schema in SLOT_SCHEMAS {
            for option in schema.options {
                let expected = match option.name {
                    "roles" => OptionKind::Roles,
                    "maxMessages" | "maxChars" => OptionKind::Integer { min: Some(1) },
                    "heading" => OptionKind::Text,
                    "format" => OptionKind::Choice {
                        values: &["xml", "plain"],
                    },
                    "toolMode" => OptionKind::Choice {
                        values: &["keep", "drop"],
                    },
                    _ => OptionKind::Bool,
                };
                assert_eq!(option.kind, expected, "{}.{}", schema.slot, option.name);
            }
        }
    }
}
