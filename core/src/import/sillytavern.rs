//! SillyTavern chat-completion preset → schema-v2 prompt stack (prompt-stacks spec §5, re-targeted
//! to forge-v1 templates as §8 item 16 asks).
//!
//! [`convert`] takes the parsed preset and returns the stack as a JSON value (keys in the stack
//! key order, items in the item key order) plus an [`ImportReport`] that says, for every prompt
//! and regex script, whether it was converted, approximated or dropped, and why.
//!
//! Decisions (documented for users in `docs/file-formats.md`, "SillyTavern import"):
//! - The default stack id is the file name without `.json`, slugified as the 0.4-era importer did
//!   ([`default_stack_id`]: lower case, every run of other characters one `-`); a preset without
//!   `preset_name`/`name` is named after the file name as written. Regex rule ids are
//!   `st-<script name>` slugified the same way ([`lower_slug`]).
//! - Item ids are the prompt identifiers made id-safe (`chatHistory` stays `chatHistory`),
//!   deduplicated with `-2`, `-3`, …; `source` records the original identifier, name and position.
//!   (The original numbered items `1`, `2`, …; identifiers keep the editor and diffs readable.)
//! - Two prompts with the same identifier: the last definition wins (the original kept them in a
//!   map), and the report lists the earlier one as dropped.
//! - `{{char}}` / `{{user}}` become `{{ parameters.char }}` / `{{ parameters.user }}` and the stack
//!   gets `parameters {char, user}` defaults; `{{lastUserMessage}}` becomes
//!   `{{ runtime.lastUserMessage }}` and the history slot gets `includeLastUserMessage: false`
//!   (the message is already quoted by the prompt). `{{// …}}` and `{{trim}}` are removed.
//! - Any other macro cannot be expressed, and a literal `{{` would be parsed by forge-v1, so it is
//!   replaced by the visible text `[SillyTavern macro: <name>]` and the prompt is listed as
//!   *approximated* (it is still imported, the macro is not). A stray `{{` or `{%` is broken up
//!   into `{ {` / `{ %` for the same reason.
//! - A `system` prompt after the chat history cannot stay `system` (those build the system prompt,
//!   which comes first), so it becomes a `custom` message after the conversation: approximated.
//!   A `system` prompt placed after a user/assistant prompt but before the history joins the system
//!   prompt, i.e. moves ahead of those messages: approximated.
//! - In-chat injections (`injection_position: 1`) cannot enter the conversation at a depth; they
//!   are placed right after the chat-history slot, deepest first (a `system` one as `custom`).
//!   Depth 0 with role user/assistant is exact; anything else is approximated.
//! - Regex scripts follow §5: only prompt-only scripts aimed at user input or AI output become
//!   history-stage rules; the others are listed as dropped. As in the original, numeric fields
//!   (`placement` entries, `minDepth`, `maxDepth`, `substituteRegex`) accept numbers, numeric
//!   strings and booleans (`true` is 1), a string `trimStrings` is one entry per line, the name is
//!   the first non-blank of `script_name`, `scriptName`, `name`, and `{{match}}` / `$0` (not
//!   `$01`) become `$&`.

use serde_json::{Map, Value};

use crate::id::is_valid_id;
use crate::js::js_trim;
use crate::stack::{check_pattern, STACK_TYPE};

/// Markers SillyTavern fills from character cards, personas and lore; pi-forge has no source for
/// them. `chatHistory` is handled separately.
const CARD_MARKERS: &[(&str, &str)] = &[
    (
        "worldInfoBefore",
        "world info (lorebook) entries have no pi-forge equivalent",
    ),
    (
        "worldInfoAfter",
        "world info (lorebook) entries have no pi-forge equivalent",
    ),
    (
        "charDescription",
        "character card fields have no pi-forge equivalent",
    ),
    (
        "charPersonality",
        "character card fields have no pi-forge equivalent",
    ),
    (
        "scenario",
        "character card fields have no pi-forge equivalent",
    ),
    (
        "personaDescription",
        "user personas have no pi-forge equivalent",
    ),
    (
        "dialogueExamples",
        "character example dialogues have no pi-forge equivalent",
    ),
];

const CHAT_HISTORY_MARKER: &str = "chatHistory";

/// Top-level preset keys the converter reads; others (sampler settings, …) are ignored.
const KNOWN_ROOT_KEYS: &[&str] = &[
    "prompts",
    "prompt_order",
    "extensions",
    "name",
    "preset_name",
];

/// Prompt keys the converter reads or knowingly ignores.
const KNOWN_PROMPT_KEYS: &[&str] = &[
    "identifier",
    "name",
    "role",
    "content",
    "marker",
    "system_prompt",
    "enabled",
    "injection_position",
    "injection_depth",
    "injection_order",
    "injection_trigger",
    "forbid_overrides",
];

/// Default values of the `char` and `user` parameters.
pub const DEFAULT_CHAR: &str = "Assistant";
pub const DEFAULT_USER: &str = "User";

/// What the caller decides: which `prompt_order` entry and what the stack is called.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The stack id (already valid, e.g. the slugified file name).
    pub id: String,
    /// `prompt_order[].character_id` to use; compared as text (`100001` matches `"100001"`).
    pub character_id: Option<String>,
    /// File name recorded in `import.sourceFile`.
    pub source_file: Option<String>,
    /// Time recorded in `import.convertedAt` (the converter reads no clock).
    pub converted_at: Option<String>,
}

/// Why a preset cannot be converted at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("Preset root must be a JSON object.")]
    NotObject,
    #[error("Preset has no prompts array.")]
    NoPrompts,
    #[error("Multiple character configs found: [{}]. Choose a character_id and retry.", .0.join(", "))]
    MultipleCharacters(Vec<String>),
    #[error("No character config with character_id {wanted}. Available: [{}].", .available.join(", "))]
    UnknownCharacter {
        wanted: String,
        available: Vec<String>,
    },
    #[error("Invalid stack id: {0}. Ids must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens.")]
    InvalidId(String),
}

/// One line of the report: which prompt (or `regex:<name>`), and why it landed where it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportEntry {
    pub identifier: String,
    pub name: Option<String>,
    pub reason: String,
}

/// The migration report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The `prompt_order` entry used, when there was one.
    pub character_id: Option<String>,
    pub converted: Vec<ReportEntry>,
    pub approximated: Vec<ReportEntry>,
    pub dropped: Vec<ReportEntry>,
    /// How many preset and prompt fields the converter does not read (sampler settings, …).
    pub ignored_fields: usize,
}

impl ImportReport {
    /// `{characterId, converted, approximated, dropped, ignoredFields}`.
    pub fn to_json(&self) -> Value {
        let list = |entries: &[ReportEntry]| {
            Value::Array(
                entries
                    .iter()
                    .map(|e| {
                        let mut m = Map::new();
                        m.insert("identifier".into(), Value::String(e.identifier.clone()));
                        if let Some(name) = &e.name {
                            m.insert("name".into(), Value::String(name.clone()));
                        }
                        m.insert("reason".into(), Value::String(e.reason.clone()));
                        Value::Object(m)
                    })
                    .collect(),
            )
        };
        let mut m = Map::new();
        m.insert(
            "characterId".into(),
            self.character_id.clone().map_or(Value::Null, Value::String),
        );
        m.insert("converted".into(), list(&self.converted));
        m.insert("approximated".into(), list(&self.approximated));
        m.insert("dropped".into(), list(&self.dropped));
        m.insert("ignoredFields".into(), Value::from(self.ignored_fields));
        Value::Object(m)
    }

    /// A plain-text rendering for the command line.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(id) = &self.character_id {
            out.push_str(&format!("character_id: {id}\n"));
        }
        for (title, entries) in [
            ("Converted", &self.converted),
            ("Approximated", &self.approximated),
            ("Dropped", &self.dropped),
        ] {
            out.push_str(&format!("{title} ({}):\n", entries.len()));
            for e in entries {
                match &e.name {
                    Some(name) if name != &e.identifier => {
                        out.push_str(&format!("  - {} ({name}): {}\n", e.identifier, e.reason))
                    }
                    _ => out.push_str(&format!("  - {}: {}\n", e.identifier, e.reason)),
                }
            }
        }
        out.push_str(&format!(
            "Ignored fields (sampler settings and other keys with no pi-forge meaning): {}\n",
            self.ignored_fields
        ));
        out
    }
}

/// The converted stack (a JSON value ready for the write service) and its report.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub stack: Value,
    pub report: ImportReport,
}

/// True when `value` looks like a SillyTavern chat-completion preset (an object with a `prompts`
/// array and no pi-forge `type`).
pub fn is_preset(value: &Value) -> bool {
    value.get("prompts").is_some_and(Value::is_array) && value.get("type").is_none()
}

/// Makes `text` a valid resource id: other characters become `-`, leading non-alphanumerics are
/// removed, and an empty result becomes `fallback`.
pub fn slugify(text: &str, fallback: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let trimmed = trimmed.trim_end_matches('-');
    if trimmed.is_empty() {
        fallback.to_string()
    } else {
        trimmed.to_string()
    }
}

/// The 0.4-era slug: every run of characters other than ASCII letters, digits, `_` and `-` becomes
/// one `-`, runs of `-` collapse, `-` and `_` are trimmed from the ends (an id starts with a letter
/// or digit) and the result is lower case; empty → `fallback`.
/// `story-teller (v3)!` → `story-teller-v3`.
pub fn lower_slug(text: &str, fallback: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches(|c: char| c == '-' || c == '_');
    if trimmed.is_empty() {
        fallback.to_string()
    } else {
        trimmed.to_string()
    }
}

/// The file name without its directory and a final `.json` (any case): the preset's name when it
/// has none.
pub fn file_stem(file_name: &str) -> &str {
    let base = crate::id::base_name(file_name);
    match base.len().checked_sub(5) {
        Some(cut) if base.is_char_boundary(cut) && base[cut..].eq_ignore_ascii_case(".json") => {
            &base[..cut]
        }
        _ => base,
    }
}

/// The stack id an import gets when none is chosen: the file stem, [`lower_slug`]ged
/// (`Space Opera.json` → `space-opera`), `imported` when nothing is left.
pub fn default_stack_id(file_name: &str) -> String {
    lower_slug(file_stem(file_name), DEFAULT_STACK_ID)
}

/// The id of an import whose file name gives none.
pub const DEFAULT_STACK_ID: &str = "imported";

/// Converts a preset. Errors only when the input is not a usable preset; everything else is a
/// report entry.
pub fn convert(preset: &Value, options: &ImportOptions) -> Result<Imported, ImportError> {
    let root = preset.as_object().ok_or(ImportError::NotObject)?;
    // An empty array is as unusable as a missing one (the original tested the length).
    let prompts = root
        .get("prompts")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or(ImportError::NoPrompts)?;
    if !is_valid_id(&options.id) {
        return Err(ImportError::InvalidId(options.id.clone()));
    }
    let mut report = ImportReport::default();
    report.ignored_fields += root
        .keys()
        .filter(|k| !KNOWN_ROOT_KEYS.contains(&k.as_str()))
        .count();

    // identifier → prompt: a later prompt with the same identifier replaces the earlier one and
    // takes its place in the prompts order, as the original's map did.
    let mut by_id: Vec<(String, &Map<String, Value>)> = Vec::new();
    for (index, prompt) in prompts.iter().enumerate() {
        let Some(obj) = prompt.as_object() else {
            report
                .dropped
                .push(entry(format!("prompts[{index}]"), None, "not an object"));
            continue;
        };
        report.ignored_fields += obj
            .keys()
            .filter(|k| !KNOWN_PROMPT_KEYS.contains(&k.as_str()))
            .count();
        let Some(identifier) = obj.get("identifier").and_then(Value::as_str) else {
            report.dropped.push(entry(
                format!("prompts[{index}]"),
                str_field(obj, "name"),
                "prompt has no identifier",
            ));
            continue;
        };
        if let Some(slot) = by_id.iter_mut().find(|(id, _)| id == identifier) {
            report.dropped.push(entry(
                identifier.to_string(),
                str_field(slot.1, "name"),
                format!(
                    "duplicate identifier: prompts[{index}] defines it again and replaces this \
                     definition"
                ),
            ));
            slot.1 = obj;
            continue;
        }
        by_id.push((identifier.to_string(), obj));
    }

    let order = choose_order(root, options, &by_id, &mut report)?;

    let mut state = Walk::default();
    for (index, (identifier, enabled)) in order.iter().enumerate() {
        let Some((_, prompt)) = by_id.iter().find(|(id, _)| id == identifier) else {
            report.dropped.push(entry(
                identifier.clone(),
                None,
                "listed in prompt_order but missing from the prompts array",
            ));
            continue;
        };
        state.prompt(identifier, prompt, *enabled, index, &mut report);
    }
    if !state.injections.is_empty() && state.history_at.is_none() {
        for injected in &state.injections {
            report.approximated.push(entry(
                injected.identifier.clone(),
                injected.name.clone(),
                "in-chat injection, but the preset has no chat history marker: placed after the \
                 other prompts, before the conversation",
            ));
        }
    }

    let regex_rules = convert_regex_scripts(root, &mut report);
    Ok(Imported {
        stack: build_stack(root, options, &report, state, regex_rules),
        report,
    })
}

fn entry(identifier: String, name: Option<String>, reason: impl Into<String>) -> ReportEntry {
    ReportEntry {
        identifier,
        name,
        reason: reason.into(),
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_string)
}

fn character_key(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "null".to_string(),
        Some(other) => other.to_string(),
    }
}

/// The `(identifier, enabled)` list to walk.
fn choose_order(
    root: &Map<String, Value>,
    options: &ImportOptions,
    by_id: &[(String, &Map<String, Value>)],
    report: &mut ImportReport,
) -> Result<Vec<(String, bool)>, ImportError> {
    let configs: Vec<&Map<String, Value>> = root
        .get("prompt_order")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    if configs.is_empty() {
        // No order: the prompts array order, each prompt's own `enabled`.
        return Ok(by_id
            .iter()
            .map(|(id, p)| (id.clone(), p.get("enabled") != Some(&Value::Bool(false))))
            .collect());
    }
    let keys: Vec<String> = configs
        .iter()
        .map(|c| character_key(c.get("character_id")))
        .collect();
    let chosen = match &options.character_id {
        Some(wanted) => match keys.iter().position(|k| k == wanted.trim()) {
            Some(i) => i,
            None => {
                return Err(ImportError::UnknownCharacter {
                    wanted: wanted.clone(),
                    available: keys,
                })
            }
        },
        None if keys.len() == 1 => 0,
        None => return Err(ImportError::MultipleCharacters(keys)),
    };
    report.character_id = Some(keys[chosen].clone());
    let order = configs[chosen]
        .get("order")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (index, item) in order.iter().enumerate() {
        match item.get("identifier").and_then(Value::as_str) {
            Some(id) => out.push((
                id.to_string(),
                item.get("enabled") != Some(&Value::Bool(false)),
            )),
            None => report.dropped.push(entry(
                format!("prompt_order[{chosen}].order[{index}]"),
                None,
                "order entry has no identifier",
            )),
        }
    }
    Ok(out)
}

/// An item waiting to be placed after the history slot.
struct Injection {
    depth: u64,
    identifier: String,
    name: Option<String>,
    item: Value,
}

#[derive(Default)]
struct Walk {
    items: Vec<Value>,
    used_ids: Vec<String>,
    /// Index in `items` of the chat-history slot.
    history_at: Option<usize>,
    /// A user/assistant message was placed before the history.
    message_before_history: bool,
    injections: Vec<Injection>,
    uses_char: bool,
    uses_user: bool,
    uses_last_user_message: bool,
}

impl Walk {
    fn item_id(&mut self, identifier: &str) -> String {
        let base = slugify(identifier, "prompt");
        let mut id = base.clone();
        let mut n = 2;
        while self.used_ids.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        self.used_ids.push(id.clone());
        id
    }

    fn prompt(
        &mut self,
        identifier: &str,
        prompt: &Map<String, Value>,
        enabled: bool,
        order_index: usize,
        report: &mut ImportReport,
    ) {
        let name = str_field(prompt, "name");
        let is_marker = prompt.get("marker") == Some(&Value::Bool(true));
        let mut source = Map::new();
        source.insert("previousId".into(), Value::String(identifier.to_string()));
        if let Some(name) = &name {
            source.insert("previousName".into(), Value::String(name.clone()));
        }
        source.insert("orderIndex".into(), Value::from(order_index));

        if identifier == CHAT_HISTORY_MARKER {
            if self.history_at.is_some() {
                report.dropped.push(entry(
                    identifier.to_string(),
                    name,
                    "second chat history marker",
                ));
                return;
            }
            let id = self.item_id(identifier);
            let mut item = Map::new();
            item.insert("kind".into(), "slot".into());
            item.insert("id".into(), Value::String(id));
            item.insert(
                "name".into(),
                Value::String(name.clone().unwrap_or_else(|| "Chat History".into())),
            );
            if !enabled {
                item.insert("enabled".into(), Value::Bool(false));
            }
            item.insert("source".into(), Value::Object(source));
            item.insert("slot".into(), "chat-history".into());
            self.history_at = Some(self.items.len());
            self.items.push(Value::Object(item));
            report.converted.push(entry(
                identifier.to_string(),
                name,
                "chat history marker → chat-history slot",
            ));
            return;
        }
        if let Some((_, reason)) = CARD_MARKERS.iter().find(|(m, _)| *m == identifier) {
            report.dropped.push(entry(
                identifier.to_string(),
                name,
                format!("marker: {reason}"),
            ));
            return;
        }
        if is_marker {
            report.dropped.push(entry(
                identifier.to_string(),
                name,
                "marker filled by SillyTavern at send time; no pi-forge equivalent",
            ));
            return;
        }

        let role = match prompt.get("role") {
            None | Some(Value::Null) => "system",
            Some(Value::String(r)) if matches!(r.as_str(), "system" | "user" | "assistant") => {
                r.as_str()
            }
            Some(other) => {
                report.dropped.push(entry(
                    identifier.to_string(),
                    name,
                    format!("unsupported role {other}"),
                ));
                return;
            }
        };
        let raw = prompt.get("content").and_then(Value::as_str).unwrap_or("");
        let converted = convert_content(raw);
        self.uses_char |= converted.uses_char;
        self.uses_user |= converted.uses_user;
        self.uses_last_user_message |= converted.uses_last_user_message;
        if converted.text.is_empty() {
            report.dropped.push(entry(
                identifier.to_string(),
                name,
                "empty content (skipped)",
            ));
            return;
        }

        let mut notes: Vec<String> = Vec::new();
        if !converted.unsupported.is_empty() {
            notes.push(format!(
                "SillyTavern macros with no forge-v1 equivalent were replaced by placeholders: {}",
                converted.unsupported.join(", ")
            ));
        }
        if converted.broke_delimiters {
            notes.push("a stray {{ or {% was split so forge-v1 prints it".into());
        }

        let injection_depth = (prompt.get("injection_position").and_then(Value::as_u64) == Some(1))
            .then(|| {
                prompt
                    .get("injection_depth")
                    .and_then(Value::as_u64)
                    .unwrap_or(4)
            });

        let mut item_role = role;
        let mut placement_note = None;
        if let Some(depth) = injection_depth {
            if role == "system" {
                item_role = "custom";
            }
            source.insert("injectionDepth".into(), Value::from(depth));
            if depth > 0 || role == "system" {
                placement_note = Some(format!(
                    "in-chat injection at depth {depth}{}: placed right after the chat history \
                     instead of inside it",
                    if role == "system" {
                        " (a system message, imported as a hidden custom message)"
                    } else {
                        ""
                    }
                ));
            }
        } else if role == "system" && self.history_at.is_some() {
            item_role = "custom";
            placement_note = Some(
                "system prompt after the chat history: imported as a hidden custom message after \
                 the conversation (system items always build the system prompt)"
                    .into(),
            );
        } else if role == "system" && self.message_before_history {
            placement_note = Some(
                "system prompt after a user/assistant prompt: joins the system prompt, ahead of \
                 those messages"
                    .into(),
            );
        } else if role != "system" && self.history_at.is_none() {
            self.message_before_history = true;
        }
        notes.extend(placement_note);

        let id = self.item_id(identifier);
        let mut item = Map::new();
        item.insert("kind".into(), "block".into());
        item.insert("id".into(), Value::String(id));
        if let Some(name) = &name {
            item.insert("name".into(), Value::String(name.clone()));
        }
        if !enabled {
            item.insert("enabled".into(), Value::Bool(false));
        }
        item.insert("role".into(), item_role.into());
        item.insert("source".into(), Value::Object(source));
        item.insert("content".into(), Value::String(converted.text));
        let item = Value::Object(item);

        let state = if enabled { "" } else { " (disabled)" };
        if notes.is_empty() {
            report.converted.push(entry(
                identifier.to_string(),
                name.clone(),
                format!("{role} block{state}"),
            ));
        } else {
            report.approximated.push(entry(
                identifier.to_string(),
                name.clone(),
                format!("{item_role} block{state}; {}", notes.join("; ")),
            ));
        }
        match injection_depth {
            Some(depth) => self.injections.push(Injection {
                depth,
                identifier: identifier.to_string(),
                name,
                item,
            }),
            None => self.items.push(item),
        }
    }

    /// The items with the injections placed after the history slot, deepest first.
    fn finish(mut self) -> Vec<Value> {
        let mut injections = std::mem::take(&mut self.injections);
        injections.sort_by_key(|i| std::cmp::Reverse(i.depth));
        let at = self.history_at.map_or(self.items.len(), |i| i + 1);
        let mut items = self.items;
        for (offset, injected) in injections.into_iter().enumerate() {
            items.insert(at + offset, injected.item);
        }
        if self.uses_last_user_message {
            if let Some(Value::Object(slot)) = self.history_at.map(|i| &mut items[i]) {
                let mut opts = Map::new();
                opts.insert("includeLastUserMessage".into(), Value::Bool(false));
                slot.insert("options".into(), Value::Object(opts));
            }
        }
        items
    }
}

struct Content {
    text: String,
    uses_char: bool,
    uses_user: bool,
    uses_last_user_message: bool,
    unsupported: Vec<String>,
    broke_delimiters: bool,
}

/// Rewrites SillyTavern macros into forge-v1, then collapses 3+ newlines to 2 and trims.
fn convert_content(raw: &str) -> Content {
    let mut out = Content {
        text: String::new(),
        uses_char: false,
        uses_user: false,
        uses_last_user_message: false,
        unsupported: Vec::new(),
        broke_delimiters: false,
    };
    let mut text = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(start) = rest.find("{{") {
        text.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            text.push_str("{ {");
            out.broke_delimiters = true;
            rest = after;
            continue;
        };
        let body = after[..end].trim();
        let lower = body.to_ascii_lowercase();
        match lower.as_str() {
            "char" => {
                text.push_str("{{ parameters.char }}");
                out.uses_char = true;
            }
            "user" => {
                text.push_str("{{ parameters.user }}");
                out.uses_user = true;
            }
            "lastusermessage" => {
                text.push_str("{{ runtime.lastUserMessage }}");
                out.uses_last_user_message = true;
            }
            "trim" => {}
            _ if body.starts_with("//") => {}
            _ => {
                let name: String = body
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .chars()
                    .filter(|c| !matches!(c, '{' | '}' | '%'))
                    .collect();
                let name = if name.is_empty() { "?".into() } else { name };
                text.push_str(&format!("[SillyTavern macro: {name}]"));
                if !out.unsupported.contains(&name) {
                    out.unsupported.push(name);
                }
            }
        }
        rest = &after[end + 2..];
    }
    text.push_str(rest);
    if text.contains("{%") {
        text = text.replace("{%", "{ %");
        out.broke_delimiters = true;
    }
    let mut collapsed = String::with_capacity(text.len());
    let mut newlines = 0;
    for c in text.chars() {
        if c == '\n' {
            newlines += 1;
            if newlines <= 2 {
                collapsed.push(c);
            }
        } else {
            newlines = 0;
            collapsed.push(c);
        }
    }
    out.text = js_trim(&collapsed).to_string();
    out
}

/// Converts `extensions.regex_scripts` into history-stage rules (spec §5).
fn convert_regex_scripts(root: &Map<String, Value>, report: &mut ImportReport) -> Vec<Value> {
    let Some(scripts) = root
        .get("extensions")
        .and_then(|e| e.get("regex_scripts"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut rules = Vec::new();
    let mut used: Vec<String> = Vec::new();
    for (index, script) in scripts.iter().enumerate() {
        let Some(obj) = script.as_object() else {
            report.dropped.push(entry(
                format!("regex_scripts[{index}]"),
                None,
                "regex script is not an object",
            ));
            continue;
        };
        let name = ["script_name", "scriptName", "name"]
            .iter()
            .filter_map(|key| obj.get(*key).and_then(Value::as_str))
            .find(|n| !js_trim(n).is_empty())
            .map_or_else(|| format!("regex-{}", index + 1), str::to_string);
        let label = format!("regex:{name}");
        let mut drop = |reason: &str| report.dropped.push(entry(label.clone(), None, reason));
        if obj.get("promptOnly") != Some(&Value::Bool(true)) {
            drop("regex script edits the stored chat or the display, not the prompt");
            continue;
        }
        if obj.get("markdownOnly") == Some(&Value::Bool(true)) {
            drop("regex script is display-only (markdownOnly)");
            continue;
        }
        let placement: Vec<f64> = obj
            .get("placement")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(js_number).collect())
            .unwrap_or_default();
        if !placement.is_empty() && !placement.iter().any(|p| *p == 1.0 || *p == 2.0) {
            drop("regex script targets neither user input nor AI output");
            continue;
        }
        let find = obj.get("findRegex").and_then(Value::as_str).unwrap_or("");
        let (pattern, flags) = match split_regex(find) {
            Ok(parts) => parts,
            Err(reason) => {
                drop(&format!("find pattern {reason}"));
                continue;
            }
        };
        if let Err(reason) = check_pattern(&pattern, &flags) {
            drop(&format!("find pattern does not compile: {reason}"));
            continue;
        }
        let mut notes = Vec::new();
        let replace = st_replacement(
            obj.get("replaceString")
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        if replace.contains("{{") {
            notes.push("the replacement contains macros, which are inserted literally");
        }
        if obj
            .get("substituteRegex")
            .and_then(js_number)
            .is_some_and(|n| n != 0.0)
        {
            notes.push("macro substitution inside the pattern is not supported");
        }
        let base = lower_slug(&format!("st-{name}"), "st-regex");
        let mut id = base.clone();
        let mut n = 2;
        while used.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        used.push(id.clone());

        let mut rule = Map::new();
        rule.insert("id".into(), Value::String(id));
        rule.insert("name".into(), Value::String(name.clone()));
        if obj.get("disabled") == Some(&Value::Bool(true)) {
            rule.insert("enabled".into(), Value::Bool(false));
        }
        rule.insert("stage".into(), "history".into());
        rule.insert("effect".into(), "outgoing".into());
        rule.insert("pattern".into(), Value::String(pattern));
        rule.insert("flags".into(), Value::String(flags));
        rule.insert("replace".into(), Value::String(replace));
        // A string is one entry per line (how SillyTavern's editor stores them).
        let trims: Vec<Value> = match obj.get("trimStrings") {
            Some(Value::String(text)) => text
                .split('\n')
                .map(|line| line.strip_suffix('\r').unwrap_or(line))
                .filter(|line| !line.is_empty())
                .map(Value::from)
                .collect(),
            Some(Value::Array(items)) => items
                .iter()
                .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        if !trims.is_empty() {
            rule.insert("trimStrings".into(), Value::Array(trims));
        }
        let mut roles = Vec::new();
        if placement.contains(&1.0) {
            roles.push(Value::from("user"));
        }
        if placement.contains(&2.0) {
            roles.push(Value::from("assistant"));
        }
        if !roles.is_empty() {
            rule.insert("roles".into(), Value::Array(roles));
        }
        let depth = |key: &str| {
            obj.get(key)
                .and_then(js_number)
                .filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= 9_007_199_254_740_991.0)
                .map(|n| n as u64)
        };
        let min = depth("minDepth");
        let max = depth("maxDepth");
        if let Some(min) = min {
            rule.insert("minDepth".into(), Value::from(min));
        }
        if let Some(max) = max.filter(|m| min.is_none_or(|min| *m >= min)) {
            rule.insert("maxDepth".into(), Value::from(max));
        }
        let mut st = Map::new();
        st.insert("scriptName".into(), Value::String(name.clone()));
        st.insert(
            "placement".into(),
            Value::Array(placement.iter().map(|p| number_value(*p)).collect()),
        );
        let mut source = Map::new();
        source.insert("sillytavern".into(), Value::Object(st));
        rule.insert("source".into(), Value::Object(source));
        rules.push(Value::Object(rule));

        let what = "history-stage regex rule";
        if notes.is_empty() {
            report.converted.push(entry(label, None, what));
        } else {
            report
                .approximated
                .push(entry(label, None, format!("{what}; {}", notes.join("; "))));
        }
    }
    rules
}

/// A trimmed `/pattern/flags` (the last unescaped `/` closes it) or a bare pattern →
/// `(pattern, flags)`; `Err` says why not: empty, a `/` literal that never closes, or flags that
/// are not a repeat-free subset of `gimsu`.
fn split_regex(find: &str) -> Result<(String, String), &'static str> {
    let find = js_trim(find);
    if find.is_empty() {
        return Err("is empty");
    }
    let (pattern, flags) = match find.strip_prefix('/') {
        None => (find, ""),
        Some(rest) => {
            let close = rest.char_indices().rev().find(|(i, c)| {
                *c == '/' && rest[..*i].chars().rev().take_while(|b| *b == '\\').count() % 2 == 0
            });
            match close {
                Some((i, _)) => (&rest[..i], &rest[i + 1..]),
                None => return Err("starts a /…/ literal that is never closed"),
            }
        }
    };
    if pattern.is_empty() {
        return Err("is empty");
    }
    let mut seen = String::new();
    for c in flags.chars() {
        if !"gimsu".contains(c) || seen.contains(c) {
            return Err("has flags outside gimsu or repeats one");
        }
        seen.push(c);
    }
    Ok((pattern.to_string(), flags.to_string()))
}

/// A SillyTavern replacement in JavaScript's dialect: `{{match}}` (any case, spaces allowed) and
/// a `$0` that is not the start of `$01`… become `$&`; two-digit references keep their meaning.
fn st_replacement(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("{{") {
            if let Some(end) = after.find("}}") {
                if after[..end].trim().eq_ignore_ascii_case("match") {
                    out.push_str("$&");
                    rest = &after[end + 2..];
                    continue;
                }
            }
        }
        if let Some(after) = rest.strip_prefix("$0") {
            if !after.starts_with(|d: char| d.is_ascii_digit()) {
                out.push_str("$&");
                rest = after;
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// JavaScript-style number reading of a script field: a finite number, a non-blank string that
/// `Number()` reads as finite (decimal forms), or a boolean (1 / 0).
fn js_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = js_trim(s);
            let looks_decimal = !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
            looks_decimal
                .then(|| t.parse::<f64>().ok())
                .flatten()
                .filter(|n| n.is_finite())
        }
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// An integer-valued number as a JSON integer, others as they are.
fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_991.0 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

fn build_stack(
    root: &Map<String, Value>,
    options: &ImportOptions,
    report: &ImportReport,
    walk: Walk,
    regex_rules: Vec<Value>,
) -> Value {
    // `preset_name`, else `name`, else the file name as written (spaces kept), as the original.
    let preset_name = ["preset_name", "name"]
        .iter()
        .filter_map(|key| root.get(*key).and_then(Value::as_str))
        .map(js_trim)
        .find(|n| !n.is_empty())
        .or_else(|| {
            options
                .source_file
                .as_deref()
                .map(file_stem)
                .filter(|stem| !stem.is_empty())
        })
        .map(str::to_string);
    let uses_params = walk.uses_char || walk.uses_user;
    let mut stack = Map::new();
    stack.insert("schemaVersion".into(), Value::from(2));
    stack.insert("type".into(), STACK_TYPE.into());
    stack.insert("id".into(), Value::String(options.id.clone()));
    stack.insert(
        "name".into(),
        Value::String(preset_name.unwrap_or_else(|| options.id.clone())),
    );
    stack.insert(
        "description".into(),
        Value::String(match &options.source_file {
            Some(file) => format!("Imported from the SillyTavern preset {file}."),
            None => "Imported from a SillyTavern preset.".into(),
        }),
    );
    stack.insert("autoActivate".into(), Value::Bool(false));
    stack.insert("mode".into(), "replace".into());
    if uses_params {
        let mut params = Map::new();
        params.insert("char".into(), DEFAULT_CHAR.into());
        params.insert("user".into(), DEFAULT_USER.into());
        stack.insert("parameters".into(), Value::Object(params));
    }
    if !regex_rules.is_empty() {
        let mut regex = Map::new();
        regex.insert("schemaVersion".into(), Value::from(1));
        regex.insert("rules".into(), Value::Array(regex_rules));
        stack.insert("regex".into(), Value::Object(regex));
    }
    stack.insert("items".into(), Value::Array(walk.finish()));
    let mut import = Map::new();
    import.insert("source".into(), "sillytavern".into());
    if let Some(file) = &options.source_file {
        import.insert("sourceFile".into(), Value::String(file.clone()));
    }
    if let Some(id) = &report.character_id {
        import.insert("characterId".into(), Value::String(id.clone()));
    }
    if let Some(at) = &options.converted_at {
        import.insert("convertedAt".into(), Value::String(at.clone()));
    }
    stack.insert("import".into(), Value::Object(import));
    Value::Object(stack)
}
