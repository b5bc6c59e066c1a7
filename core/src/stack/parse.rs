//! The parse pipeline: JSON → shape checks → normalization → validation → `default.json` warning
//! → dedupe (prompt-stacks spec §2.4).
//!
//! The shape checks run twice, once over the raw root and once over the normalized object, as the
//! original does; passthrough members (`defaults`, `context`, slot names…) therefore report the same
//! problem twice, and the final dedupe by `(level, message, itemId)` keeps the first. When the
//! normalized item id differs from the raw one (a numeric id, for example) both copies survive,
//! which is also what the original shows.

use serde_json::{Map, Value};

use super::model::{
    ItemBody, PromptStack, Role, SchemaVersion, StackItem, StackMode, BUILTIN_SLOTS, STACK_TYPE,
};
use super::policy::{normalize_policy, validate_policy};
use super::regex_rules::validate_regex_config;
use crate::diag::{dedupe, is_usable, Diagnostic};
use crate::id::{base_name, fallback_id, is_valid_id, ID_RULE};
use crate::js::{is_number, is_string_array, js_string, js_trim, number_string};
use crate::json::{parse_bytes_lenient, parse_str_lenient, to_pretty, Lenient};

/// What the parser needs besides the JSON.
#[derive(Clone, Copy, Debug)]
pub struct ParseOptions<'a> {
    /// The stack's file name (`reviewer.json`); a path is reduced to its last component. It gives
    /// the fallback id and triggers the `default.json` warning.
    pub file_name: &'a str,
    /// Slot names registered by trusted extensions; [`BUILTIN_SLOTS`] are always known.
    pub extra_slots: &'a [String],
}

impl<'a> ParseOptions<'a> {
    /// Options with no extension slots.
    pub fn new(file_name: &'a str) -> Self {
        ParseOptions {
            file_name,
            extra_slots: &[],
        }
    }

    fn slot_known(&self, slot: &str) -> bool {
        BUILTIN_SLOTS.contains(&slot) || self.extra_slots.iter().any(|s| s == slot)
    }
}

/// A parsed stack: always a stack (possibly a fallback), plus what was read and what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedStack {
    pub stack: PromptStack,
    /// The JSON root as parsed, unknown keys included; `None` when the text did not parse.
    pub raw: Option<Value>,
    pub diagnostics: Vec<Diagnostic>,
}

impl ParsedStack {
    /// No error diagnostics.
    pub fn usable(&self) -> bool {
        is_usable(&self.diagnostics)
    }
}

/// `{schemaVersion:1, type, id: <stem>, name: <basename>, items:[]}`.
fn fallback_stack(file_name: &str) -> PromptStack {
    let mut stack = PromptStack::new(fallback_id(file_name));
    stack.has_type = true;
    stack.name = Some(base_name(file_name).to_string());
    stack
}

/// The fail-closed stack for a file that could not be read or parsed: the fallback stack with the
/// single error `message` (e.g. `Failed to read prompt stack: <e>`).
pub fn fault_stack(file_name: &str, message: String) -> ParsedStack {
    fault_stack_with(file_name, Diagnostic::error(message))
}

/// [`fault_stack`] with its one diagnostic given (a JSON syntax error keeps its place).
fn fault_stack_with(file_name: &str, diagnostic: Diagnostic) -> ParsedStack {
    ParsedStack {
        stack: fallback_stack(file_name),
        raw: None,
        diagnostics: vec![diagnostic],
    }
}

/// Parses a stack file's bytes (UTF-8, a leading BOM ignored).
///
/// A number too large for a double (`1e400`) does not fail the file: as `JSON.parse` reads it as
/// `Infinity`, it is reported by the field that holds it (see [`parse_stack_lenient`]).
pub fn parse_stack_bytes(bytes: &[u8], opts: &ParseOptions) -> ParsedStack {
    match parse_bytes_lenient(bytes) {
        Ok(read) => parse_stack_lenient(read, opts),
        Err(e) => fault_stack_with(opts.file_name, Diagnostic::json_syntax(&e)),
    }
}

/// Parses stack JSON text, like [`parse_stack_bytes`].
pub fn parse_stack_str(text: &str, opts: &ParseOptions) -> ParsedStack {
    match parse_str_lenient(text) {
        Ok(read) => parse_stack_lenient(read, opts),
        Err(e) => fault_stack_with(opts.file_name, Diagnostic::json_syntax(&e)),
    }
}

/// Normalizes and validates an already parsed JSON root.
pub fn parse_stack_value(value: Value, opts: &ParseOptions) -> ParsedStack {
    parse_stack_lenient(
        Lenient {
            value,
            non_finite: Vec::new(),
        },
        opts,
    )
}

/// Normalizes and validates a root read by [`crate::json::parse_bytes_lenient`]. Each
/// out-of-range number is `null` in the value; on top of what `null` gets there, a schema-2
/// parameter holding one is an error (`Stack parameter <k> must be a JSON-compatible value.`) and
/// is dropped, as the original does for a non-finite number. A numeric item id that is out of
/// range therefore falls back to `item-<n>` with its error, and a schema-1 `parameters` block is
/// ignored with its warning, whatever it holds.
pub fn parse_stack_lenient(read: Lenient, opts: &ParseOptions) -> ParsedStack {
    let bad_parameters = non_finite_parameters(&read);
    let value = read.value;
    let mut diagnostics = Vec::new();
    check_shape(&value, &bad_parameters, &mut diagnostics);
    let mut stack = normalize(&value, opts.file_name, &mut diagnostics);
    if let Some(parameters) = stack.parameters.as_mut() {
        parameters.retain(|key, _| !bad_parameters.contains(key));
    }
    diagnostics.extend(validate_stack(&stack, opts));
    if base_name(opts.file_name) == "default.json"
        && value
            .as_object()
            .is_some_and(|obj| !obj.contains_key("autoActivate"))
    {
        diagnostics.push(Diagnostic::warning(
            "default.json no longer auto-activates by filename; set \"autoActivate\": true to keep auto-activating this stack.",
        ));
    }
    ParsedStack {
        stack,
        raw: Some(value),
        diagnostics: dedupe(diagnostics),
    }
}

/// `JSON.stringify(stack, null, 2) + "\n"` of the normalized object.
pub fn serialize_stack(stack: &PromptStack) -> String {
    to_pretty(&stack.to_value())
}

// ---------------------------------------------------------------------------------------------
// Shape checks (raw and normalized)

fn check_optional_string(
    obj: &Map<String, Value>,
    key: &str,
    label: &str,
    out: &mut Vec<Diagnostic>,
) {
    if obj.get(key).is_some_and(|v| !v.is_string()) {
        out.push(Diagnostic::error(format!(
            "{label} must be a string when provided."
        )));
    }
}

fn check_optional_bool(
    obj: &Map<String, Value>,
    key: &str,
    label: &str,
    out: &mut Vec<Diagnostic>,
) {
    if obj.get(key).is_some_and(|v| !v.is_boolean()) {
        out.push(Diagnostic::error(format!(
            "{label} must be a boolean when provided."
        )));
    }
}

fn non_blank_str(value: Option<&Value>) -> Option<&str> {
    value
        .and_then(Value::as_str)
        .map(js_trim)
        .filter(|s| !s.is_empty())
}

/// Type checks over a stack-shaped JSON value; nothing happens when the root is not an object.
/// `bad_parameters` are the parameters that hold a non-finite number (see
/// [`parse_stack_lenient`]).
fn check_shape(value: &Value, bad_parameters: &[String], out: &mut Vec<Diagnostic>) {
    let Some(obj) = value.as_object() else {
        return;
    };
    if non_blank_str(obj.get("id")).is_none() {
        out.push(Diagnostic::error("Stack id must be a non-empty string."));
    }
    if obj.get("type").is_some_and(|t| t != STACK_TYPE) {
        out.push(Diagnostic::error(
            "Stack type must be \"pi-forge.prompt-stack\" when provided.",
        ));
    }
    check_optional_string(obj, "name", "Stack name", out);
    check_optional_string(obj, "description", "Stack description", out);
    check_optional_bool(obj, "autoActivate", "Stack autoActivate", out);
    if obj
        .get("mode")
        .is_some_and(|m| m.as_str().and_then(StackMode::parse).is_none())
    {
        out.push(Diagnostic::error(
            "Stack mode must be \"append\", \"prepend\", or \"replace\" when provided.",
        ));
    }

    if let Some(defaults) = obj.get("defaults") {
        match defaults.as_object() {
            None => out.push(Diagnostic::error(
                "Stack defaults must be an object when provided.",
            )),
            Some(defaults) => {
                check_optional_bool(
                    defaults,
                    "syntheticMessagesVisible",
                    "defaults.syntheticMessagesVisible",
                    out,
                );
                // The original coerces with String(), so ["warn"] passes.
                if defaults
                    .get("unresolvedMacroPolicy")
                    .is_some_and(|p| !matches!(js_string(p).as_str(), "warn" | "keep" | "error"))
                {
                    out.push(Diagnostic::error(
                        "defaults.unresolvedMacroPolicy must be \"warn\", \"keep\", or \"error\" when provided.",
                    ));
                }
            }
        }
    }
    if let Some(context) = obj.get("context") {
        match context.as_object() {
            None => out.push(Diagnostic::error(
                "Stack context must be an object when provided.",
            )),
            Some(context) => check_optional_bool(
                context,
                "allowDuplicateChatHistory",
                "context.allowDuplicateChatHistory",
                out,
            ),
        }
    }
    if let Some(variables) = obj.get("variables") {
        match variables.as_object() {
            None => out.push(Diagnostic::error(
                "Stack variables must be an object when provided.",
            )),
            Some(variables) => {
                for (name, value) in variables {
                    if !value.is_string() {
                        out.push(Diagnostic::error(format!(
                            "Stack variable {name} must be a string."
                        )));
                    }
                }
            }
        }
    }
    let v2 = obj.get("schemaVersion").is_some_and(|v| is_number(v, 2.0));
    if v2 && obj.contains_key("variables") {
        out.push(Diagnostic::warning(
            "schemaVersion 2 stacks use parameters; variables is ignored.",
        ));
    }
    if !v2 && obj.contains_key("parameters") {
        out.push(Diagnostic::warning(
            "schemaVersion 1 stacks use variables; parameters is ignored.",
        ));
    }
    // A non-finite number is the only value that is not JSON-compatible; no `Value` holds one,
    // so the lenient reader's list says which parameters had one.
    if obj.get("parameters").is_some_and(|p| !p.is_object()) {
        out.push(Diagnostic::error(
            "Stack parameters must be an object when provided.",
        ));
    }
    out.extend(bad_parameters.iter().map(|key| {
        Diagnostic::error(format!(
            "Stack parameter {key} must be a JSON-compatible value."
        ))
    }));
    if obj.get("capabilities").is_some_and(|c| !c.is_array()) {
        out.push(Diagnostic::error(
            "Stack capabilities must be an array when provided.",
        ));
    }

    let Some(items) = obj.get("items").and_then(Value::as_array) else {
        return;
    };
    for (index, item) in items.iter().enumerate() {
        let Some(item) = item.as_object() else {
            continue;
        };
        check_item_shape(item, index + 1, out);
    }
}

fn check_item_shape(item: &Map<String, Value>, n: usize, out: &mut Vec<Diagnostic>) {
    let fallback = format!("item-{n}");
    let item_id = non_blank_str(item.get("id"))
        .unwrap_or(&fallback)
        .to_string();
    let mut push =
        |message: String| out.push(Diagnostic::error(message).with_item(item_id.clone()));
    let kind = item.get("kind").and_then(Value::as_str);
    if !matches!(kind, Some("block" | "slot")) {
        push(format!("Item {n} kind must be \"block\" or \"slot\"."));
    }
    if non_blank_str(item.get("id")).is_none() {
        push(format!("Item {n} id must be a non-empty string."));
    }
    if item.get("name").is_some_and(|v| !v.is_string()) {
        push("Item name must be a string when provided.".into());
    }
    if item.get("enabled").is_some_and(|v| !v.is_boolean()) {
        push("Item enabled must be a boolean when provided.".into());
    }
    if let Some(role) = item.get("role") {
        if role.as_str().and_then(Role::parse).is_none() {
            push(format!("Invalid role: {}", js_string(role)));
        }
    }
    if item.get("tags").is_some_and(|t| !is_string_array(t)) {
        push("Item tags must be an array of strings when provided.".into());
    }
    if item.get("source").is_some_and(|s| !s.is_object()) {
        push("Item source must be an object when provided.".into());
    }
    match kind {
        Some("block") if !item.get("content").is_some_and(Value::is_string) => {
            push("Block content must be a string.".into());
        }
        Some("slot") => {
            if non_blank_str(item.get("slot")).is_none() {
                push("Slot name must be a non-empty string.".into());
            }
            if item.get("options").is_some_and(|o| !o.is_object()) {
                push("Slot options must be an object when provided.".into());
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Normalization

/// Schema-2 `parameters` keys whose value holds an out-of-range number, in key order.
fn non_finite_parameters(read: &Lenient) -> Vec<String> {
    let Some(obj) = read.value.as_object() else {
        return Vec::new();
    };
    if read.non_finite.is_empty() || !obj.get("schemaVersion").is_some_and(|v| is_number(v, 2.0)) {
        return Vec::new();
    }
    let Some(parameters) = obj.get("parameters").and_then(Value::as_object) else {
        return Vec::new();
    };
    parameters
        .keys()
        .filter(|key| {
            let escaped = key.replace('~', "~0").replace('/', "~1");
            read.non_finite_under(&format!("/parameters/{escaped}"))
        })
        .cloned()
        .collect()
}

fn object_of(value: Option<&Value>) -> Option<Map<String, Value>> {
    value.and_then(Value::as_object).cloned()
}

fn normalize(value: &Value, file_name: &str, out: &mut Vec<Diagnostic>) -> PromptStack {
    let Some(obj) = value.as_object() else {
        out.push(Diagnostic::error(
            "Prompt stack root must be a JSON object.",
        ));
        return fallback_stack(file_name);
    };

    let raw_id = non_blank_str(obj.get("id"));
    let id = match raw_id {
        Some(raw) if is_valid_id(raw) => raw.to_string(),
        _ => fallback_id(file_name).to_string(),
    };
    if let Some(raw) = raw_id.filter(|raw| !is_valid_id(raw)) {
        out.push(Diagnostic::error(format!(
            "Stack id {raw} {ID_RULE}; falling back to {id}."
        )));
    }

    let schema_version = match obj.get("schemaVersion") {
        Some(v) if is_number(v, 2.0) => SchemaVersion::V2,
        None => SchemaVersion::V1,
        Some(v) if is_number(v, 1.0) => SchemaVersion::V1,
        Some(_) => {
            out.push(Diagnostic::warning(
                "Unsupported schemaVersion; assuming 1.",
            ));
            SchemaVersion::V1
        }
    };

    let items = match obj.get("items").and_then(Value::as_array) {
        Some(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| normalize_item(item, index + 1, out))
            .collect(),
        None => {
            out.push(Diagnostic::error(
                "Prompt stack must contain an items array.",
            ));
            Vec::new()
        }
    };

    if obj
        .get("state")
        .and_then(Value::as_object)
        .is_some_and(|state| !state.is_empty())
    {
        out.push(Diagnostic::info(
            "state is no longer supported and was ignored; use stack.variables and template interpolation instead.",
        ));
    }

    let tools = normalize_policy(obj.get("tools"), "tools", out);
    let skills = normalize_policy(obj.get("skills"), "skills", out);

    let variables = match schema_version {
        SchemaVersion::V1 => obj.get("variables").and_then(Value::as_object).map(|vars| {
            vars.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        }),
        SchemaVersion::V2 => None,
    };
    let parameters = match schema_version {
        SchemaVersion::V2 => object_of(obj.get("parameters")),
        SchemaVersion::V1 => None,
    };

    let regex = match obj.get("regex") {
        None => None,
        Some(Value::Object(regex)) => Some(regex.clone()),
        Some(_) => {
            out.push(Diagnostic::warning(
                "regex must be an object when provided.",
            ));
            None
        }
    };

    PromptStack {
        schema_version,
        has_type: obj.get("type").is_some_and(|t| t == STACK_TYPE),
        id,
        name: obj.get("name").and_then(Value::as_str).map(str::to_string),
        description: obj
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string),
        auto_activate: obj.get("autoActivate").and_then(Value::as_bool),
        mode: obj
            .get("mode")
            .and_then(Value::as_str)
            .and_then(StackMode::parse),
        defaults: object_of(obj.get("defaults")),
        context: object_of(obj.get("context")),
        tools,
        skills,
        variables,
        parameters,
        regex,
        capabilities: obj.get("capabilities").and_then(Value::as_array).cloned(),
        items,
        import: object_of(obj.get("import")),
    }
}

/// Item id: a trimmed non-blank string, a number in JS `String()` form, else `item-<n>`.
fn normalize_item_id(value: Option<&Value>, fallback: String) -> String {
    match value {
        Some(Value::String(s)) if !js_trim(s).is_empty() => js_trim(s).to_string(),
        Some(Value::Number(n)) => number_string(n),
        _ => fallback,
    }
}

fn normalize_item(value: &Value, n: usize, out: &mut Vec<Diagnostic>) -> StackItem {
    let fallback = format!("item-{n}");
    let Some(obj) = value.as_object() else {
        out.push(
            Diagnostic::error(format!("Item {n} must be an object.")).with_item(fallback.clone()),
        );
        let mut item = StackItem::block(fallback, "");
        item.enabled = Some(false);
        return item;
    };
    let body = if obj.get("kind").is_some_and(|k| k == "slot") {
        ItemBody::Slot {
            slot: obj
                .get("slot")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            options: object_of(obj.get("options")),
        }
    } else {
        ItemBody::Block {
            content: obj
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        }
    };
    StackItem {
        id: normalize_item_id(obj.get("id"), fallback),
        name: obj.get("name").and_then(Value::as_str).map(str::to_string),
        enabled: obj.get("enabled").and_then(Value::as_bool),
        role: obj
            .get("role")
            .and_then(Value::as_str)
            .and_then(Role::parse),
        tags: obj.get("tags").and_then(Value::as_array).map(|tags| {
            tags.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        }),
        source: object_of(obj.get("source")),
        body,
    }
}

// ---------------------------------------------------------------------------------------------
// Validation of a normalized stack

/// Validates a normalized stack: the shape checks again, then the semantic checks (items, history
/// slots, policies, regex rules). Not deduplicated.
pub fn validate_stack(stack: &PromptStack, opts: &ParseOptions) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    check_shape(&stack.to_value(), &[], &mut out);
    if js_trim(&stack.id).is_empty() {
        out.push(Diagnostic::error("Stack id must not be empty."));
    }

    let mut seen: Vec<&str> = Vec::new();
    let mut history_slots = 0usize;
    for item in &stack.items {
        if seen.contains(&item.id.as_str()) {
            out.push(
                Diagnostic::error(format!("Duplicate item id: {}", item.id)).with_item(&item.id),
            );
        }
        seen.push(&item.id);

        match &item.body {
            ItemBody::Slot { slot, options } => {
                if !opts.slot_known(slot) {
                    out.push(
                        Diagnostic::warning(format!("Unsupported slot: {slot}"))
                            .with_item(&item.id),
                    );
                }
                // The original ignored a role-less slot silently (spec §8.7); say so instead.
                if slot != "chat-history"
                    && opts.slot_known(slot)
                    && item.is_enabled()
                    && item.role.is_none()
                {
                    out.push(
                        Diagnostic::warning(format!(
                            "Enabled slot {slot} has no role and will be ignored."
                        ))
                        .with_item(&item.id),
                    );
                }
                if slot == "chat-history" {
                    if item.is_enabled() {
                        history_slots += 1;
                    }
                    if let Some(options) = options {
                        check_history_options(options, &item.id, &mut out);
                    }
                }
            }
            ItemBody::Block { .. } => {
                if item.is_enabled() && item.role.is_none() {
                    out.push(
                        Diagnostic::warning("Enabled block has no role and will be ignored.")
                            .with_item(&item.id),
                    );
                }
            }
        }
    }

    if history_slots == 0 {
        out.push(Diagnostic::warning(
            "No enabled chat-history slot found; Pi chat context will be appended at the end.",
        ));
    } else if history_slots > 1
        && !stack
            .context
            .as_ref()
            .and_then(|c| c.get("allowDuplicateChatHistory"))
            .is_some_and(|v| v == &Value::Bool(true))
    {
        out.push(Diagnostic::warning(
            "Multiple enabled chat-history slots found; only the first will be expanded unless context.allowDuplicateChatHistory is true.",
        ));
    }

    validate_policy(stack.tools.as_ref(), "tools", &mut out);
    validate_policy(stack.skills.as_ref(), "skills", &mut out);
    if stack.skills.as_ref().is_some_and(|s| s.is_effective()) {
        out.push(Diagnostic::info(
            "skills policy only filters model-visible skills rendered by pi-forge skills slots; it does not disable explicit skill invocation and is not a security boundary.",
        ));
        if matches!(stack.mode, Some(StackMode::Append | StackMode::Prepend)) {
            out.push(Diagnostic::warning(
                "skills policy only filters pi-forge skills slots. Use mode \"replace\" if you need the base Pi prompt to omit filtered skills.",
            ));
        }
    }

    if let Some(regex) = &stack.regex {
        validate_regex_config(regex, &mut out);
    }
    out
}

fn check_history_options(options: &Map<String, Value>, item_id: &str, out: &mut Vec<Diagnostic>) {
    for key in [
        "includeLastUserMessage",
        "stripAssistantThinking",
        "includeSummaries",
    ] {
        if options.get(key).is_some_and(|v| !v.is_boolean()) {
            out.push(
                Diagnostic::warning(format!("chat-history option {key} should be a boolean."))
                    .with_item(item_id),
            );
        }
    }
    if options.get("roles").is_some_and(|r| !is_string_array(r)) {
        out.push(
            Diagnostic::error("chat-history option roles must be an array of strings.")
                .with_item(item_id),
        );
    }
    if options
        .get("toolMode")
        .is_some_and(|m| !matches!(m.as_str(), Some("keep" | "drop")))
    {
        out.push(
            Diagnostic::error("chat-history option toolMode must be \"keep\" or \"drop\".")
                .with_item(item_id),
        );
    }
    for key in ["maxMessages", "maxChars"] {
        if options
            .get(key)
            .is_some_and(|v| !crate::js::is_positive_integer(v))
        {
            out.push(
                Diagnostic::error(format!(
                    "chat-history option {key} must be a positive integer."
                ))
                .with_item(item_id),
            );
        }
    }
}
