//! Macros (`extensions.*`): the registry and one compilation's resolution state.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use super::error::{RenderError, RenderErrorKind};
use super::parse::is_path_segment;
use super::scope::{Scope, MACRO_OUTPUT_LIMIT, MAX_MACRO_DEPTH};
use crate::js::js_trim;
use crate::json::utf16_len;

/// A macro: a named renderer whose output templates read as `{{ extensions.<name> }}` (or as a
/// bare `{{ <name> }}` when no parameter or runtime alias has that name).
///
/// `Send + Sync` so one registry can be shared by every compilation of a server.
pub trait Macro: Send + Sync {
    /// Paths this macro reads. Entries of the form `extensions.<name>` are resolved before
    /// [`render`](Macro::render) runs; the others are informational.
    fn dependencies(&self) -> Vec<String> {
        vec![]
    }

    /// Renders the macro. `resolved` holds the extensions resolved so far in this compilation
    /// (at least the declared `extensions.*` dependencies). An `Err(m)` becomes
    /// `forge-v1 extension <name> failed: <m>`.
    fn render(&self, scope: &Scope, resolved: &BTreeMap<String, String>) -> Result<String, String>;
}

/// The macros a process knows, in registration order.
#[derive(Default)]
pub struct MacroRegistry {
    entries: Vec<(String, Box<dyn Macro>)>,
    index: BTreeMap<String, usize>,
}

impl fmt::Debug for MacroRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MacroRegistry")
            .field("names", &self.names())
            .finish()
    }
}

/// True when `name` matches `^[A-Za-z][A-Za-z0-9_-]*$` (one path segment that starts with a
/// letter).
pub fn is_macro_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) && is_path_segment(name)
}

impl MacroRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a macro. Errors (exact texts):
    /// `Macro name must start with a letter and contain only letters, numbers, underscore, or hyphen: <name>`
    /// and `Macro is already registered: <name>`.
    pub fn register(&mut self, name: &str, m: Box<dyn Macro>) -> Result<(), String> {
        if !is_macro_name(name) {
            return Err(format!(
                "Macro name must start with a letter and contain only letters, numbers, \
                 underscore, or hyphen: {name}"
            ));
        }
        if self.index.contains_key(name) {
            return Err(format!("Macro is already registered: {name}"));
        }
        self.index.insert(name.to_string(), self.entries.len());
        self.entries.push((name.to_string(), m));
        Ok(())
    }

    /// Registered names, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// The macro registered under `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Macro> {
        self.index.get(name).map(|&i| self.entries[i].1.as_ref())
    }
}

/// One compilation's macro state: the cache of resolved values, the in-progress set used for
/// cycle and depth detection, and per-macro call counts.
///
/// Share one context between the system prompt and the messages of a compilation so that each
/// macro runs at most once (until [`set_latest_user_message`](Self::set_latest_user_message)
/// changes the message).
pub struct MacroContext<'r> {
    registry: &'r MacroRegistry,
    values: BTreeMap<String, String>,
    /// Names of `values` in resolution order (what `{{ extensions }}` renders).
    order: Vec<String>,
    resolving: Vec<String>,
    calls: BTreeMap<String, usize>,
    latest: Option<String>,
}

impl fmt::Debug for MacroContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MacroContext")
            .field("resolved", &self.order)
            .field("resolving", &self.resolving)
            .field("calls", &self.calls)
            .finish()
    }
}

/// The macro name of an `extensions.<name>` dependency string (trimmed, one path segment).
pub fn extension_dependency(dependency: &str) -> Option<&str> {
    let rest = js_trim(dependency).strip_prefix("extensions.")?;
    let name = js_trim(rest);
    is_path_segment(name).then_some(name)
}

impl<'r> MacroContext<'r> {
    pub fn new(registry: &'r MacroRegistry) -> Self {
        MacroContext {
            registry,
            values: BTreeMap::new(),
            order: Vec::new(),
            resolving: Vec::new(),
            calls: BTreeMap::new(),
            latest: None,
        }
    }

    /// Records the latest user message. When it differs from the one the cached values were
    /// computed with, the cache is cleared so macros run again. The caller renders with a
    /// [`Scope`] whose `runtime.lastUserMessage` carries the same text (see
    /// [`Scope::set_last_user_message`]).
    ///
    /// Before the first call the context adopts `runtime.lastUserMessage` of the first scope it
    /// resolves a macro with, as the original adopted the runtime's value at construction.
    pub fn set_latest_user_message(&mut self, text: &str) {
        if self.latest.as_deref() == Some(text) {
            return;
        }
        self.latest = Some(text.to_string());
        self.values.clear();
        self.order.clear();
    }

    /// Resolves a macro: from the cache, or by resolving its `extensions.*` dependencies and
    /// rendering it. Errors carry the raw message (`forge-v1 extension cycle detected at: A`, …);
    /// an unregistered name gives `forge-v1 extension <name> is not registered.` (a template
    /// treats it as an undefined path instead).
    pub fn resolve(&mut self, name: &str, scope: &Scope) -> Result<String, String> {
        match self.lookup(name, scope) {
            Ok(Some(value)) => Ok(value),
            Ok(None) => Err(format!("forge-v1 extension {name} is not registered.")),
            Err(e) => Err(e.message),
        }
    }

    /// Resolves every `extensions.*` entry of `dependencies` (other entries and unregistered
    /// names are skipped) and returns one raw error message per failed entry. This is what a
    /// custom slot does before rendering.
    pub fn resolve_dependencies(&mut self, dependencies: &[String], scope: &Scope) -> Vec<String> {
        let mut errors = Vec::new();
        for dependency in dependencies {
            if let Some(name) = extension_dependency(dependency) {
                if let Err(e) = self.lookup(name, scope) {
                    errors.push(e.message);
                }
            }
        }
        errors
    }

    /// The extensions resolved so far.
    pub fn resolved(&self) -> &BTreeMap<String, String> {
        &self.values
    }

    /// How many times the macro `name` has been rendered through this context.
    pub fn calls(&self, name: &str) -> usize {
        self.calls.get(name).copied().unwrap_or(0)
    }

    /// Total macro renders through this context.
    pub fn total_calls(&self) -> usize {
        self.calls.values().sum()
    }

    /// Number of resolved values (a marker for [`snapshot`](Self::snapshot)).
    pub(crate) fn resolved_len(&self) -> usize {
        self.order.len()
    }

    /// The first `len` resolved extensions as an object in resolution order.
    pub(crate) fn snapshot(&self, len: usize) -> Value {
        let mut map = Map::new();
        for name in self.order.iter().take(len) {
            if let Some(value) = self.values.get(name) {
                map.insert(name.clone(), Value::String(value.clone()));
            }
        }
        Value::Object(map)
    }

    /// `Ok(None)` when no macro has that name.
    pub(crate) fn lookup(
        &mut self,
        name: &str,
        scope: &Scope,
    ) -> Result<Option<String>, RenderError> {
        if self.latest.is_none() {
            let latest = scope
                .runtime
                .get("lastUserMessage")
                .and_then(Value::as_str)
                .unwrap_or("");
            self.latest = Some(latest.to_string());
        }
        if let Some(value) = self.values.get(name) {
            return Ok(Some(value.clone()));
        }
        if self.resolving.iter().any(|n| n == name) {
            return Err(RenderError::new(
                RenderErrorKind::Evaluate,
                format!("forge-v1 extension cycle detected at: {name}"),
            ));
        }
        if self.resolving.len() >= MAX_MACRO_DEPTH {
            return Err(RenderError::new(
                RenderErrorKind::Evaluate,
                "forge-v1 extension dependency graph is too deep.",
            ));
        }
        let registry = self.registry;
        let Some(definition) = registry.get(name) else {
            return Ok(None);
        };

        self.resolving.push(name.to_string());
        let result = self.run(name, definition, scope);
        self.resolving.pop();
        let value = result?;

        self.values.insert(name.to_string(), value.clone());
        self.order.push(name.to_string());
        Ok(Some(value))
    }

    fn run(
        &mut self,
        name: &str,
        definition: &dyn Macro,
        scope: &Scope,
    ) -> Result<String, RenderError> {
        for dependency in definition.dependencies() {
            if let Some(dependency) = extension_dependency(&dependency) {
                self.lookup(dependency, scope)?;
            }
        }
        *self.calls.entry(name.to_string()).or_insert(0) += 1;
        let value = definition.render(scope, &self.values).map_err(|m| {
            RenderError::new(
                RenderErrorKind::Evaluate,
                format!("forge-v1 extension {name} failed: {m}"),
            )
        })?;
        if utf16_len(&value) > MACRO_OUTPUT_LIMIT {
            return Err(RenderError::new(
                RenderErrorKind::ExtensionLimit,
                format!("forge-v1 extension {name} exceeds {MACRO_OUTPUT_LIMIT} characters."),
            ));
        }
        Ok(value)
    }
}
