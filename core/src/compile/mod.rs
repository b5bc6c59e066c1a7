//! The prompt compiler: system prompt, messages, slots, chat history, tool and skill policy.
//!
//! [`compile`] is a pure function of a stack, a [`RuntimeSnapshot`] and the registered macros and
//! custom slots (prompt-stacks spec §4). Hosts that compile the system prompt and the messages at
//! different moments (Pi's `before_agent_start` and `context` events) use a [`Compiler`], which
//! keeps one macro context across both phases.
//!
//! # Decisions where the spec is silent or leaves room
//!
//! 1. **Own wording.** The skills preamble ([`SKILLS_PREAMBLE`]: three lines plus a blank line)
//!    and the `pi-docs` text ([`pi_docs`]: seven lines) are written for pi-forge: same meaning and
//!    line structure as Pi's, not a copy. `pi-docs` uses `RuntimeSnapshot::pi_docs_root` (trailing
//!    `/` or `\` removed) and falls back to the package name [`PI_DOCS_FALLBACK_ROOT`].
//! 2. **Truthiness of pass-through values.** `display` of custom messages is the JavaScript
//!    truthiness of `defaults.syntheticMessagesVisible` (absent or `null` → `false`), so the field
//!    is always a boolean and `"false"` shows the message (spec §8.1).
//!    `context.allowDuplicateChatHistory` is read the same way.
//! 3. **Synthetic shapes.** `user`, `assistant` and `custom` messages all carry the text as one
//!    `text` part (`content: [{type: "text", text}]`), as the original writes them. `details.stackId` is
//!    `CompileInput::stack_key` when given, else the stack id. Assistant `api` comes from
//!    `model.api`, `provider`/`model` from the model, each `"unknown"` when absent.
//! 4. **Guidelines.** "The runtime guidelines" are the selected tools' own guidelines (in tool
//!    order) followed by `RuntimeSnapshot::prompt_guidelines`; a tool the policy removed
//!    contributes nothing. A snippet that is an empty string is printed as it is (only an absent
//!    one is "missing"); `onlyWithSnippets` leaves it out, as the original's `!!snippet` does.
//! 5. **Chat history** (as the original decides). An info is emitted only when its count is
//!    non-zero (for tool dropping and repair: when calls or results were removed). A `roles`
//!    option that is a non-empty array of strings always sets the repair flag, even when it
//!    removed nothing; the trims set it when they removed a message; `includeSummaries` never
//!    does. A message is "left empty" when its content array has no part left. A tool id is the
//!    first of the listed fields that is a non-empty string (others are skipped); a call or
//!    result without one is dangling. Call ids are collected from every object part of every
//!    message with array content.
//! 6. **Tool selection** is capabilities spec §B9 without capability patches: the active tools,
//!    or `tools.initial` (registered names only, in its order), or for an effective policy the
//!    filtered active tools (a selective `allow` filters the whole registry); an effective policy
//!    is applied once more at the end. Skills: visible skills (not `disableModelInvocation`) that
//!    the skills ceiling permits; `skills.initial` has no effect.
//! 7. **Diagnostics order.** Regex rule load errors (`Regex rule <id> failed to compile: …`) come
//!    first, once per compilation, then system-prompt diagnostics, then message diagnostics. A
//!    block reports every template message (several unknown filters → several errors).
//! 8. **Custom slots.** Only `extensions.*` dependencies are resolved; a failure is reported with
//!    the macro's raw message and the slot renders `""`. [`SlotContext::extensions`] holds every
//!    extension resolved so far. [`Compiled::dependencies`] lists `slot:<name>` and
//!    `extension:<name>` for the custom slots that rendered.
//! 9. **Phases.** [`Compiler`] compiles the system prompt and the messages separately with one
//!    macro context; [`Compiler::set_latest_user_message`] updates `runtime.lastUserMessage` and
//!    clears the macro cache when the text changed. [`compile`] runs both phases.
//! 10. Slot `format` other than `"plain"` is XML; `cont` splits on `\n` only.
//!
//! Preview decisions are listed in [the preview module](mod@preview).

mod adapter;
mod env;
mod history;
pub mod preview;
mod slots;
mod synthetic;

use std::collections::BTreeMap;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::js::js_trim;
use crate::json::utf16_len;
use crate::message::latest_user_message;
use crate::runtime::{RuntimeSnapshot, SkillInfo};
use crate::stack::{ItemBody, PromptStack, Role, StackItem, StackMode, BUILTIN_SLOTS};

use adapter::rewrite::{self, Rule};
use adapter::template::{extension_dependency, render_text_all, MacroContext, Scope};

pub use adapter::template::MacroRegistry;
pub use preview::{preview, preview_text, Preview, PREVIEW_MESSAGE_LIMIT};
pub use slots::{
    bullet, cont, esc, pi_docs, BASH_FILE_OPS_GUIDELINE, NO_SNIPPET, PI_DEFAULT_GUIDELINES,
    PI_DOCS_FALLBACK_ROOT, SKILLS_PREAMBLE,
};
pub use synthetic::CUSTOM_TYPE;

/// Longest slot output, in UTF-16 code units; longer output is an error and the slot is dropped.
pub const SLOT_OUTPUT_LIMIT: usize = 16_384;

/// The slot that expands to the conversation.
pub const CHAT_HISTORY_SLOT: &str = "chat-history";

/// Title of implicit-history messages in previews.
pub const IMPLICIT_HISTORY_NAME: &str = "Conversation history";

// ------------------------------------------------------------------------------------------------
// Custom slots

/// What a custom slot renderer sees.
pub struct SlotContext<'a> {
    /// The slot name.
    pub slot: &'a str,
    pub item: &'a StackItem,
    pub options: Option<&'a Map<String, Value>>,
    pub runtime: &'a RuntimeSnapshot,
    /// The `runtime` object templates see.
    pub env: &'a Value,
    /// The `parameters` object templates see.
    pub parameters: &'a Value,
    /// Selected tools after the tool policy.
    pub selected_tools: &'a [String],
    /// Visible skills after the skills policy.
    pub selected_skills: &'a [String],
    /// The values of the `extensions.*` dependencies, resolved before `render` runs.
    pub extensions: &'a BTreeMap<String, String>,
}

/// A slot an extension registers.
pub trait SlotRenderer {
    /// Names the renderer needs resolved first; `extensions.<name>` entries are macros.
    fn dependencies(&self) -> Vec<String> {
        Vec::new()
    }
    /// The slot text, or an error message (reported as `Slot "<s>" failed: <m>`).
    fn render(&self, ctx: &SlotContext<'_>) -> Result<String, String>;
}

/// Custom slots by name.
#[derive(Default)]
pub struct SlotRegistry {
    renderers: Vec<(String, Box<dyn SlotRenderer>)>,
}

impl SlotRegistry {
    pub fn new() -> Self {
        SlotRegistry::default()
    }

    /// Registers `name`. Built-in names and names registered before are refused.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        renderer: Box<dyn SlotRenderer>,
    ) -> Result<(), String> {
        let name = name.into();
        if BUILTIN_SLOTS.contains(&name.as_str()) {
            return Err(format!("Slot {name} is built in."));
        }
        if self.get(&name).is_some() {
            return Err(format!("Slot {name} is already registered."));
        }
        self.renderers.push((name, renderer));
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&dyn SlotRenderer> {
        self.renderers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.as_ref())
    }

    /// Registered names, in registration order (for `ParseOptions::extra_slots`).
    pub fn names(&self) -> Vec<String> {
        self.renderers.iter().map(|(n, _)| n.clone()).collect()
    }
}

// ------------------------------------------------------------------------------------------------
// Input and output

/// Everything one compilation reads.
pub struct CompileInput<'a> {
    /// The active stack; `None` compiles to Pi's own prompt and messages.
    pub stack: Option<&'a PromptStack>,
    /// `"<scope>:<id>"` of the stack; custom messages name it in `details.stackId` (the bare
    /// stack id when absent).
    pub stack_key: Option<String>,
    pub runtime: &'a RuntimeSnapshot,
    pub macros: &'a MacroRegistry,
    /// Custom slots; `None` = only the built-in ones.
    pub extra_slots: Option<&'a SlotRegistry>,
    /// The latest user message; `None` = the last non-blank user text of `runtime.messages`
    /// (or `""`).
    pub latest_user_message: Option<String>,
    /// The turn's prompt, given apart from the conversation (Pi's `before_agent_start`): the
    /// system phase sees it as the latest user message, and the message phase falls back to it
    /// when the conversation has no user text. Ignored when `latest_user_message` is set.
    pub prompt: Option<String>,
    /// Tool patches in force in the live session (active capabilities, then the control tool's
    /// offer; see `capability::ops::sync_patches`): the selected tools are the B9 effective
    /// tools with them.
    pub tool_patches: &'a [&'a crate::capability::ToolPatch],
}

impl<'a> CompileInput<'a> {
    /// An input without stack key, custom slots or latest-message override.
    pub fn new(
        stack: Option<&'a PromptStack>,
        runtime: &'a RuntimeSnapshot,
        macros: &'a MacroRegistry,
    ) -> Self {
        CompileInput {
            stack,
            stack_key: None,
            runtime,
            macros,
            extra_slots: None,
            latest_user_message: None,
            prompt: None,
            tool_patches: &[],
        }
    }
}

/// Where a compiled message came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageSource {
    /// A synthetic message made from a `user`, `assistant` or `custom` item.
    StackItem {
        item_id: String,
        item_name: Option<String>,
        role: Role,
    },
    /// One message of an expanded `chat-history` slot.
    ChatHistory {
        item_id: String,
        item_name: Option<String>,
        /// 1-based position within this slot's expansion.
        history_index: usize,
        history_count: usize,
    },
    /// Host messages appended because the stack has no enabled `chat-history` slot (or no stack).
    ImplicitHistory,
}

impl Serialize for MessageSource {
    /// `{kind: "stack-item", itemId, itemName?, role}`,
    /// `{kind: "chat-history", itemId, itemName?, historyIndex, historyCount}` or
    /// `{kind: "implicit-history", itemName: "Conversation history"}`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            MessageSource::StackItem {
                item_id,
                item_name,
                role,
            } => {
                map.serialize_entry("kind", "stack-item")?;
                map.serialize_entry("itemId", item_id)?;
                if let Some(name) = item_name {
                    map.serialize_entry("itemName", name)?;
                }
                map.serialize_entry("role", role.as_str())?;
            }
            MessageSource::ChatHistory {
                item_id,
                item_name,
                history_index,
                history_count,
            } => {
                map.serialize_entry("kind", "chat-history")?;
                map.serialize_entry("itemId", item_id)?;
                if let Some(name) = item_name {
                    map.serialize_entry("itemName", name)?;
                }
                map.serialize_entry("historyIndex", history_index)?;
                map.serialize_entry("historyCount", history_count)?;
            }
            MessageSource::ImplicitHistory => {
                map.serialize_entry("kind", "implicit-history")?;
                map.serialize_entry("itemName", IMPLICIT_HISTORY_NAME)?;
            }
        }
        map.end()
    }
}

/// One message of the compiled list.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CompiledMessage {
    /// Pi's message object (fields pi-forge does not know are kept).
    pub message: Value,
    pub source: MessageSource,
}

/// The result of [`compile`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Compiled {
    pub system_prompt: String,
    pub messages: Vec<CompiledMessage>,
    /// Active tools after the tool policy (`runtime.selectedTools`).
    pub selected_tools: Vec<String>,
    /// Model-visible skills after the skills policy.
    pub selected_skills: Vec<String>,
    /// System-prompt diagnostics, then message diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// Non-built-in things the compilation used, sorted: `slot:<name>` for each custom slot that
    /// rendered and `extension:<name>` for each macro such a slot declared as a dependency.
    pub dependencies: Vec<String>,
    /// Enabled finalize regex rules (they never run at compile time; previews mention them).
    pub finalize_rules: usize,
}

impl rewrite::MessageSlot for CompiledMessage {
    fn message(&self) -> &Value {
        &self.message
    }
    fn message_mut(&mut self) -> &mut Value {
        &mut self.message
    }
}

impl Compiled {
    /// The message objects alone.
    pub fn message_values(&self) -> Vec<Value> {
        self.messages.iter().map(|m| m.message.clone()).collect()
    }
}

/// Compiles the system prompt and the messages (`runtime.messages`) with one macro context.
pub fn compile(input: &CompileInput) -> Compiled {
    compile_with_env(input).0
}

/// [`compile`], plus the template environment of the system phase
/// (`{runtime: {...}, parameters: {...}}`, see [`Compiler::template_env`]).
pub fn compile_with_env(input: &CompileInput) -> (Compiled, Value) {
    let mut compiler = Compiler::new(input);
    let env = compiler.template_env();
    let (system_prompt, mut diagnostics) = compiler.compile_system();
    if let (Some(prompt), None) = (&input.prompt, &input.latest_user_message) {
        let latest = latest_user_message(&input.runtime.messages).unwrap_or_else(|| prompt.clone());
        compiler.set_latest_user_message(&latest);
    }
    let (messages, message_diagnostics) = compiler.compile_messages(&input.runtime.messages);
    diagnostics.extend(message_diagnostics);
    let compiled = Compiled {
        system_prompt,
        messages,
        selected_tools: compiler.selected_tools.clone(),
        selected_skills: compiler.selected_skill_names.clone(),
        diagnostics,
        dependencies: compiler.dependencies(),
        finalize_rules: compiler.finalize_rules(),
    };
    (compiled, env)
}

// ------------------------------------------------------------------------------------------------
// The compiler

/// A compilation in progress: the frozen environment, the regex rules and one macro context.
pub struct Compiler<'a> {
    stack: Option<&'a PromptStack>,
    stack_id: String,
    runtime: &'a RuntimeSnapshot,
    extra_slots: Option<&'a SlotRegistry>,
    selected_tools: Vec<String>,
    selected_skills: Vec<&'a SkillInfo>,
    selected_skill_names: Vec<String>,
    latest_user_message: String,
    scope: Scope,
    ctx: MacroContext<'a>,
    rules: Vec<Rule>,
    /// Rule diagnostics not reported yet (the first phase reports them).
    pending: Vec<Diagnostic>,
    dependencies: Vec<String>,
}

impl<'a> Compiler<'a> {
    pub fn new(input: &CompileInput<'a>) -> Compiler<'a> {
        let runtime = input.runtime;
        let stack = input.stack;
        let tools_policy = stack.and_then(|s| s.tools.as_ref());
        let skills_policy = stack.and_then(|s| s.skills.as_ref());
        let selected_tools = env::select_tools(runtime, tools_policy, input.tool_patches);
        let selected_skills = env::select_skills(runtime, skills_policy);
        let selected_skill_names = selected_skills.iter().map(|s| s.name.clone()).collect();
        let latest_user_message = input
            .latest_user_message
            .clone()
            .or_else(|| input.prompt.clone())
            .or_else(|| latest_user_message(&runtime.messages))
            .unwrap_or_default();
        let scope = match stack {
            Some(stack) => Scope {
                runtime: env::runtime_env(runtime, stack, &selected_tools, &latest_user_message),
                parameters: env::parameters(stack),
            },
            None => Scope {
                runtime: Value::Object(Map::new()),
                parameters: Value::Object(Map::new()),
            },
        };
        let mut ctx = MacroContext::new(input.macros);
        ctx.set_latest_user_message(&latest_user_message);
        let (rules, pending) = match stack {
            Some(stack) => rewrite::rules_from_config(stack.regex.as_ref()),
            None => (Vec::new(), Vec::new()),
        };
        let stack_id = input
            .stack_key
            .clone()
            .or_else(|| stack.map(|s| s.id.clone()))
            .unwrap_or_default();
        Compiler {
            stack,
            stack_id,
            runtime,
            extra_slots: input.extra_slots,
            selected_tools,
            selected_skills,
            selected_skill_names,
            latest_user_message,
            scope,
            ctx,
            rules,
            pending,
            dependencies: Vec::new(),
        }
    }

    /// Active tools after the tool policy.
    pub fn selected_tools(&self) -> &[String] {
        &self.selected_tools
    }

    /// Model-visible skills after the skills policy.
    pub fn selected_skills(&self) -> &[String] {
        &self.selected_skill_names
    }

    /// What templates see now: `{runtime: {...}, parameters: {...}}` (both `{}` without a
    /// stack). Before [`Compiler::compile_system`] this is the system phase's environment.
    pub fn template_env(&self) -> Value {
        let mut env = Map::new();
        env.insert("runtime".into(), self.scope.runtime.clone());
        env.insert("parameters".into(), self.scope.parameters.clone());
        Value::Object(env)
    }

    /// Enabled finalize regex rules.
    pub fn finalize_rules(&self) -> usize {
        rewrite::finalize_rule_count(&self.rules)
    }

    /// `slot:<name>` and `extension:<name>` entries used so far, sorted and de-duplicated.
    pub fn dependencies(&self) -> Vec<String> {
        let mut out = self.dependencies.clone();
        out.sort();
        out.dedup();
        out
    }

    /// Changes the latest user message between phases: `runtime.lastUserMessage` follows, and the
    /// macro context drops its cache when the value changed.
    pub fn set_latest_user_message(&mut self, text: &str) {
        if text == self.latest_user_message {
            return;
        }
        self.latest_user_message = text.to_string();
        if self.stack.is_some() {
            self.scope.set_last_user_message(text);
        }
        self.ctx.set_latest_user_message(text);
    }

    /// The system prompt (spec §4 "System prompt") and its diagnostics.
    pub fn compile_system(&mut self) -> (String, Vec<Diagnostic>) {
        let mut diagnostics = std::mem::take(&mut self.pending);
        let base = self.runtime.base_system_prompt.clone();
        let Some(stack) = self.stack else {
            return (base, diagnostics);
        };
        let mut parts: Vec<String> = Vec::new();
        let mut errors = false;
        for item in stack.items.iter().filter(|i| i.is_enabled()) {
            if item.role != Some(Role::System) {
                continue;
            }
            let mut item_diagnostics = Vec::new();
            let text = match &item.body {
                ItemBody::Slot { slot, .. } if slot == CHAT_HISTORY_SLOT => {
                    item_diagnostics.push(
                        Diagnostic::warning(
                            "chat-history slot cannot be placed in the system prompt.",
                        )
                        .with_item(&item.id),
                    );
                    String::new()
                }
                _ => self.render_item(item, &mut item_diagnostics),
            };
            errors |= item_diagnostics.iter().any(Diagnostic::is_error);
            diagnostics.extend(item_diagnostics);
            let text = js_trim(&text);
            if !text.is_empty() {
                parts.push(text.to_string());
            }
        }
        let system = if parts.is_empty() {
            diagnostics.push(Diagnostic::warning(if errors {
                "Compiled system prompt failed; preserving base system prompt."
            } else {
                "Compiled system prompt is empty; preserving base system prompt."
            }));
            base
        } else {
            let compiled = parts.join("\n\n");
            match stack.mode() {
                StackMode::Replace => compiled,
                StackMode::Append => format!("{base}\n\n{compiled}"),
                StackMode::Prepend => format!("{compiled}\n\n{base}"),
            }
        };
        let (system, rule_diagnostics) = rewrite::apply_compiled_system(&self.rules, system);
        diagnostics.extend(rule_diagnostics);
        (system, diagnostics)
    }

    /// The message list (spec §4 "Messages") built around `host`, and its diagnostics.
    pub fn compile_messages(&mut self, host: &[Value]) -> (Vec<CompiledMessage>, Vec<Diagnostic>) {
        let mut diagnostics = std::mem::take(&mut self.pending);
        let Some(stack) = self.stack else {
            return (implicit(host), diagnostics);
        };
        // Only a real `true` turns these on. The original used JavaScript truthiness, so the
        // string "false" enabled them in a stack the validator had already rejected (§8.1).
        let allow_duplicates = stack
            .context
            .as_ref()
            .and_then(|c| c.get("allowDuplicateChatHistory"))
            == Some(&Value::Bool(true));
        let visible = stack
            .defaults
            .as_ref()
            .and_then(|d| d.get("syntheticMessagesVisible"))
            == Some(&Value::Bool(true));
        // The chat-history pipeline borrows `host`; only the messages it keeps are copied.
        let mut messages: Vec<CompiledMessage> = Vec::with_capacity(host.len() + stack.items.len());
        let mut inserted = false;
        for item in stack.items.iter().filter(|i| i.is_enabled()) {
            if item.slot_name() == Some(CHAT_HISTORY_SLOT) {
                if inserted && !allow_duplicates {
                    diagnostics.push(
                        Diagnostic::warning("Skipped duplicate chat-history slot.")
                            .with_item(&item.id),
                    );
                    continue;
                }
                let mut expanded =
                    history::pipeline(host, item.options(), &item.id, &mut diagnostics);
                diagnostics.extend(rewrite::apply_history_shared(&self.rules, &mut expanded));
                let count = expanded.len();
                // The one copy of what no step or rule changed: the output owns its messages.
                messages.extend(expanded.into_iter().enumerate().map(|(index, message)| {
                    CompiledMessage {
                        message: message.into_owned(),
                        source: MessageSource::ChatHistory {
                            item_id: item.id.clone(),
                            item_name: item.name.clone(),
                            history_index: index + 1,
                            history_count: count,
                        },
                    }
                }));
                inserted = true;
                continue;
            }
            let role = match item.role {
                None | Some(Role::System) => continue,
                Some(role) => role,
            };
            let text = self.render_item(item, &mut diagnostics);
            if js_trim(&text).is_empty() {
                continue;
            }
            let message =
                synthetic::synthetic_message(role, text, self.runtime, visible, &self.stack_id);
            messages.push(CompiledMessage {
                message,
                source: MessageSource::StackItem {
                    item_id: item.id.clone(),
                    item_name: item.name.clone(),
                    role,
                },
            });
        }
        if !inserted {
            messages.extend(implicit(host));
        }
        diagnostics.extend(rewrite::apply_compiled_messages_in_place(
            &self.rules,
            &mut messages,
        ));
        (messages, diagnostics)
    }

    /// A block's rendered template, or a slot's text (untrimmed). Failures render `""`.
    fn render_item(&mut self, item: &StackItem, diagnostics: &mut Vec<Diagnostic>) -> String {
        match &item.body {
            ItemBody::Block { content } => {
                match render_text_all(content, &self.scope, &mut self.ctx) {
                    Ok(text) => text,
                    Err(messages) => {
                        diagnostics.extend(
                            messages
                                .into_iter()
                                .map(|m| Diagnostic::error(m).with_item(&item.id)),
                        );
                        String::new()
                    }
                }
            }
            ItemBody::Slot { slot, options } => {
                self.render_slot(item, slot, options.as_ref(), diagnostics)
            }
        }
    }

    fn render_slot(
        &mut self,
        item: &StackItem,
        slot: &str,
        options: Option<&Map<String, Value>>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> String {
        let facts = slots::SlotFacts {
            runtime: self.runtime,
            tools: &self.selected_tools,
            skills: &self.selected_skills,
        };
        let text = if let Some(text) = slots::render_builtin(slot, options, &facts) {
            text
        } else if let Some(renderer) = self.extra_slots.and_then(|r| r.get(slot)) {
            self.dependencies.push(format!("slot:{slot}"));
            let dependencies = renderer.dependencies();
            for dependency in &dependencies {
                if let Some(name) = extension_dependency(dependency) {
                    self.dependencies.push(format!("extension:{name}"));
                }
            }
            let errors = self.ctx.resolve_dependencies(&dependencies, &self.scope);
            if !errors.is_empty() {
                diagnostics.extend(
                    errors
                        .into_iter()
                        .map(|m| Diagnostic::error(m).with_item(&item.id)),
                );
                return String::new();
            }
            let extensions = self.ctx.resolved().clone();
            let ctx = SlotContext {
                slot,
                item,
                options,
                runtime: self.runtime,
                env: &self.scope.runtime,
                parameters: &self.scope.parameters,
                selected_tools: &self.selected_tools,
                selected_skills: &self.selected_skill_names,
                extensions: &extensions,
            };
            match renderer.render(&ctx) {
                Ok(text) => text,
                Err(message) => {
                    diagnostics.push(
                        Diagnostic::error(format!("Slot \"{slot}\" failed: {message}"))
                            .with_item(&item.id),
                    );
                    return String::new();
                }
            }
        } else {
            diagnostics
                .push(Diagnostic::warning(format!("Unsupported slot: {slot}")).with_item(&item.id));
            return String::new();
        };
        if utf16_len(&text) > SLOT_OUTPUT_LIMIT {
            diagnostics.push(
                Diagnostic::error(format!(
                    "Slot \"{slot}\" exceeds {SLOT_OUTPUT_LIMIT} characters."
                ))
                .with_item(&item.id),
            );
            return String::new();
        }
        text
    }
}

fn implicit(host: &[Value]) -> Vec<CompiledMessage> {
    host.iter()
        .map(|message| CompiledMessage {
            message: message.clone(),
            source: MessageSource::ImplicitHistory,
        })
        .collect()
}
