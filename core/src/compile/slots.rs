//! Built-in slot renderers (prompt-stacks spec §4 "Built-in slots") and their text helpers.

use serde_json::{Map, Value};

use crate::js::{is_js_whitespace, js_trim};
use crate::runtime::{RuntimeSnapshot, SkillInfo};

/// Where the `pi-docs` slot points when the runtime does not know the install root.
pub const PI_DOCS_FALLBACK_ROOT: &str = "@earendil-works/pi-coding-agent";

/// Message shown for a tool without a prompt snippet.
pub const NO_SNIPPET: &str = "No prompt snippet provided.";

/// The first lines of the `skills` slot: three lines of our own wording (what skills are, load one
/// with the read tool, resolve relative paths against the skill's folder), then a blank line.
pub const SKILLS_PREAMBLE: &str = "\
Skills below bundle specialized instructions for particular kinds of tasks.
When a task fits a skill's description, load that skill's file with the read tool first.
Paths inside a skill file are relative to the folder holding it; resolve them against that folder.
";

/// What a built-in slot needs besides its options.
pub(crate) struct SlotFacts<'a> {
    pub runtime: &'a RuntimeSnapshot,
    /// Selected tools after the tool policy.
    pub tools: &'a [String],
    /// Visible skills after the skills policy.
    pub skills: &'a [&'a SkillInfo],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Xml,
    Plain,
}

fn format(options: Option<&Map<String, Value>>) -> Format {
    match options.and_then(|o| o.get("format")) {
        Some(Value::String(s)) if s == "plain" => Format::Plain,
        _ => Format::Xml,
    }
}

/// A boolean flag: on only for `true`.
pub(crate) fn flag(options: Option<&Map<String, Value>>, key: &str) -> bool {
    matches!(options.and_then(|o| o.get(key)), Some(Value::Bool(true)))
}

/// An include-option: off only for `false`.
pub(crate) fn include(options: Option<&Map<String, Value>>, key: &str) -> bool {
    !matches!(options.and_then(|o| o.get(key)), Some(Value::Bool(false)))
}

/// XML escaping of `& < > " '` (the template engine's `xml` filter).
pub fn esc(text: &str) -> String {
    crate::template::escape_xml(text)
}

/// Continuation lines (the second and later) indented by two spaces.
pub fn cont(text: &str) -> String {
    text.replace('\n', "\n  ")
}

/// `- label: ` followed by the continued value.
pub fn bullet(label: &str, value: &str) -> String {
    format!("- {label}: {}", cont(value))
}

fn trim_end(text: &str) -> &str {
    text.trim_end_matches(is_js_whitespace)
}

/// Renders a built-in slot, or `None` when `name` is not built in. `chat-history` is not rendered
/// here (the compiler expands it).
pub(crate) fn render_builtin(
    name: &str,
    options: Option<&Map<String, Value>>,
    facts: &SlotFacts,
) -> Option<String> {
    let text = match name {
        "tools" => tools(options, facts),
        "tool-guidelines" => tool_guidelines(options, facts),
        "skills" => skills(options, facts),
        "project-context" => project_context(options, facts.runtime),
        "date" => date(options, facts.runtime),
        "cwd" => cwd(facts.runtime),
        "date-cwd" => format!("{}\n{}", date(options, facts.runtime), cwd(facts.runtime)),
        "active-model" => active_model(facts.runtime),
        "append-system-prompt" => facts
            .runtime
            .append_system_prompt
            .clone()
            .unwrap_or_default(),
        "pi-docs" => pi_docs(facts.runtime.pi_docs_root.as_deref()),
        _ => return None,
    };
    Some(text)
}

/// The tool's snippet; an empty one is still a snippet (only `onlyWithSnippets` skips it).
fn snippet<'a>(runtime: &'a RuntimeSnapshot, tool: &str) -> Option<&'a str> {
    runtime.tool(tool).and_then(|t| t.snippet.as_deref())
}

fn tools(options: Option<&Map<String, Value>>, facts: &SlotFacts) -> String {
    let only_with_snippets = flag(options, "onlyWithSnippets");
    let listed: Vec<(&str, &str)> = facts
        .tools
        .iter()
        .filter_map(|name| match snippet(facts.runtime, name) {
            Some("") if only_with_snippets => None,
            Some(s) => Some((name.as_str(), s)),
            None if only_with_snippets => None,
            None => Some((name.as_str(), NO_SNIPPET)),
        })
        .collect();
    let mut lines: Vec<String> = Vec::new();
    match format(options) {
        Format::Xml => {
            lines.push("<available_tools>".into());
            for (name, text) in &listed {
                lines.push(format!(
                    "  <tool name=\"{}\">{}</tool>",
                    esc(name),
                    esc(text)
                ));
            }
            if listed.is_empty() {
                lines.push("  (none)".into());
            }
            lines.push("</available_tools>".into());
        }
        Format::Plain => {
            lines.push("Available tools:".into());
            for (name, text) in &listed {
                lines.push(bullet(name, text));
            }
            if listed.is_empty() {
                let none = if only_with_snippets {
                    "(none)"
                } else {
                    "- (none)"
                };
                lines.push(none.into());
            }
        }
    }
    lines.join("\n")
}

/// The guideline line Pi adds when bash must stand in for the search tools.
pub const BASH_FILE_OPS_GUIDELINE: &str = "Use bash for file operations like ls, rg, find";
/// Pi's two default guidelines.
pub const PI_DEFAULT_GUIDELINES: [&str; 2] = [
    "Be concise in your responses",
    "Show file paths clearly when working with files",
];

/// The de-duplicated guideline list: the bash line, the selected tools' guidelines and the
/// runtime guidelines, then (optionally) Pi's defaults.
pub(crate) fn guideline_list(
    options: Option<&Map<String, Value>>,
    facts: &SlotFacts,
) -> Vec<String> {
    let mut candidates: Vec<String> = Vec::new();
    let has = |n: &str| facts.tools.iter().any(|t| t == n);
    if has("bash") && !has("grep") && !has("find") && !has("ls") {
        let mut line = BASH_FILE_OPS_GUIDELINE.to_string();
        if !flag(options, "piStyle") {
            line.push('.');
        }
        candidates.push(line);
    }
    for name in facts.tools {
        if let Some(tool) = facts.runtime.tool(name) {
            candidates.extend(tool.guidelines.iter().cloned());
        }
    }
    candidates.extend(facts.runtime.prompt_guidelines.iter().cloned());
    if flag(options, "includePiDefaultGuidelines") {
        candidates.extend(PI_DEFAULT_GUIDELINES.iter().map(|s| s.to_string()));
    }
    let mut out: Vec<String> = Vec::new();
    for line in candidates {
        let line = js_trim(&line);
        if !line.is_empty() && !out.iter().any(|l| l == line) {
            out.push(line.to_string());
        }
    }
    out
}

fn tool_guidelines(options: Option<&Map<String, Value>>, facts: &SlotFacts) -> String {
    let list = guideline_list(options, facts);
    if list.is_empty() {
        return String::new();
    }
    let mut lines: Vec<String> = Vec::new();
    match format(options) {
        Format::Xml => {
            lines.push("<tool_guidelines>".into());
            lines.extend(list.iter().map(|l| format!("- {l}")));
            lines.push("</tool_guidelines>".into());
        }
        Format::Plain => {
            let heading = match options.and_then(|o| o.get("heading")) {
                Some(Value::String(h)) => js_trim(h).to_string(),
                _ => "Tool guidelines:".to_string(),
            };
            if !heading.is_empty() {
                lines.push(heading);
            }
            lines.extend(list.iter().map(|l| format!("- {}", cont(l))));
        }
    }
    lines.join("\n")
}

fn skills(options: Option<&Map<String, Value>>, facts: &SlotFacts) -> String {
    if flag(options, "requireReadTool") && !facts.tools.iter().any(|t| t == "read") {
        return String::new();
    }
    if facts.skills.is_empty() {
        return String::new();
    }
    let mut lines: Vec<String> = vec![SKILLS_PREAMBLE.to_string()];
    match format(options) {
        Format::Xml => {
            lines.push("<available_skills>".into());
            for skill in facts.skills {
                lines.push("  <skill>".into());
                lines.push(format!("    <name>{}</name>", esc(&skill.name)));
                lines.push(format!(
                    "    <description>{}</description>",
                    esc(&skill.description)
                ));
                lines.push(format!(
                    "    <location>{}</location>",
                    esc(&skill.file_path)
                ));
                lines.push("  </skill>".into());
            }
            lines.push("</available_skills>".into());
        }
        Format::Plain => {
            lines.push("Available skills:".into());
            for skill in facts.skills {
                lines.push(bullet(&skill.name, &skill.description));
                lines.push(format!("  Location: {}", cont(&skill.file_path)));
            }
        }
    }
    lines.join("\n")
}

const PROJECT_GUIDELINES_LINE: &str = "Project-specific instructions and guidelines:";

fn project_context(options: Option<&Map<String, Value>>, runtime: &RuntimeSnapshot) -> String {
    if runtime.context_files.is_empty() {
        return String::new();
    }
    let mut lines: Vec<String> = Vec::new();
    match format(options) {
        Format::Xml => {
            lines.extend(["<project_context>", "", PROJECT_GUIDELINES_LINE, ""].map(String::from));
            for file in &runtime.context_files {
                lines.push(format!(
                    "<project_instructions path=\"{}\">",
                    esc(&file.path)
                ));
                lines.push(file.content.clone());
                lines.push("</project_instructions>".into());
                lines.push(String::new());
            }
            lines.push("</project_context>".into());
        }
        Format::Plain => {
            lines.extend(["Project context:", "", PROJECT_GUIDELINES_LINE, ""].map(String::from));
            for file in &runtime.context_files {
                lines.push(format!("Path: {}", file.path));
                lines.extend(file.content.split('\n').map(|l| format!("  {l}")));
                lines.push(String::new());
            }
        }
    }
    trim_end(&lines.join("\n")).to_string()
}

fn date(options: Option<&Map<String, Value>>, runtime: &RuntimeSnapshot) -> String {
    let local = runtime.clock.local();
    let mut text = format!("Current date: {}", local.date_text());
    if flag(options, "includeTime") {
        text.push_str(&format!("\nCurrent time: {}", local.time_text()));
    }
    text
}

fn cwd(runtime: &RuntimeSnapshot) -> String {
    format!(
        "Current working directory: {}",
        runtime.cwd.replace('\\', "/")
    )
}

fn active_model(runtime: &RuntimeSnapshot) -> String {
    match &runtime.model {
        Some(m) => format!("Current model: {}/{}", m.provider, m.id),
        None => "Current model: (none)".to_string(),
    }
}

/// The `pi-docs` slot: seven lines of our own wording pointing at Pi's readme, docs and examples
/// under `root` (the `@earendil-works/pi-coding-agent` install root, or that package name).
pub fn pi_docs(root: Option<&str>) -> String {
    let root = root
        .map(|r| r.trim_end_matches(['/', '\\']))
        .filter(|r| !r.is_empty())
        .unwrap_or(PI_DOCS_FALLBACK_ROOT);
    [
        "Pi documentation (consult it only when the user asks about Pi itself: its SDK, extensions, themes, skills or TUI):".to_string(),
        format!("- Readme: {root}/README.md"),
        format!("- Documentation folder: {root}/docs"),
        format!("- Examples folder: {root}/examples (extensions, custom tools, SDK usage)"),
        "- Topic map: extensions → docs/extensions.md and examples/extensions/; themes → docs/themes.md; skills → docs/skills.md; prompt templates → docs/prompt-templates.md; TUI components → docs/tui.md; keybindings → docs/keybindings.md; SDK → docs/sdk.md; custom providers → docs/custom-provider.md; models → docs/models.md; packages → docs/packages.md".to_string(),
        "- For Pi-related work, read the relevant docs and examples first and follow their .md cross-references before writing code.".to_string(),
        "- Read Pi's .md files in full and follow links to related pages (for example tui.md for the TUI API).".to_string(),
    ]
    .join("\n")
}
