//! The normalized prompt stack and its items, and their JSON form.

use serde_json::{Map, Value};

use super::policy::Policy;

/// `type` of every prompt stack file.
pub const STACK_TYPE: &str = "pi-forge.prompt-stack";

/// Slots every runtime knows. Extensions may register more (see `ParseOptions::extra_slots`).
pub const BUILTIN_SLOTS: &[&str] = &[
    "chat-history",
    "tools",
    "tool-guidelines",
    "skills",
    "project-context",
    "date",
    "date-cwd",
    "cwd",
    "active-model",
    "append-system-prompt",
    "pi-docs",
];

/// Top-level key order of a serialized stack.
pub const STACK_KEY_ORDER: &[&str] = &[
    "schemaVersion",
    "type",
    "id",
    "name",
    "description",
    "autoActivate",
    "mode",
    "defaults",
    "context",
    "tools",
    "skills",
    "variables",
    "parameters",
    "regex",
    "capabilities",
    "items",
    "import",
];

/// `schemaVersion`: 1 uses `variables` and legacy macros, 2 uses `parameters` and forge-v1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SchemaVersion {
    #[default]
    V1,
    V2,
}

impl SchemaVersion {
    pub fn as_u8(self) -> u8 {
        match self {
            SchemaVersion::V1 => 1,
            SchemaVersion::V2 => 2,
        }
    }
}

/// How the compiled system prompt combines with Pi's base prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StackMode {
    #[default]
    Replace,
    Append,
    Prepend,
}

impl StackMode {
    pub fn as_str(self) -> &'static str {
        match self {
            StackMode::Replace => "replace",
            StackMode::Append => "append",
            StackMode::Prepend => "prepend",
        }
    }

    pub fn parse(text: &str) -> Option<StackMode> {
        match text {
            "replace" => Some(StackMode::Replace),
            "append" => Some(StackMode::Append),
            "prepend" => Some(StackMode::Prepend),
            _ => None,
        }
    }
}

/// Item role. `system` items feed the system prompt; the others become synthetic messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    Custom,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Custom => "custom",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "custom" => Some(Role::Custom),
            _ => None,
        }
    }
}

/// `block` or `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemKind {
    Block,
    Slot,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Block => "block",
            ItemKind::Slot => "slot",
        }
    }
}

/// What an item carries besides its common fields.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemBody {
    /// Literal template text.
    Block { content: String },
    /// A named slot (not trimmed, may be empty) and its free-form options object.
    Slot {
        slot: String,
        options: Option<Map<String, Value>>,
    },
}

/// A normalized stack item.
#[derive(Clone, Debug, PartialEq)]
pub struct StackItem {
    pub id: String,
    pub name: Option<String>,
    /// Only `Some(false)` disables.
    pub enabled: Option<bool>,
    pub role: Option<Role>,
    pub tags: Option<Vec<String>>,
    pub source: Option<Map<String, Value>>,
    pub body: ItemBody,
}

impl StackItem {
    /// An enabled block without name, role or tags.
    pub fn block(id: impl Into<String>, content: impl Into<String>) -> Self {
        StackItem {
            id: id.into(),
            name: None,
            enabled: None,
            role: None,
            tags: None,
            source: None,
            body: ItemBody::Block {
                content: content.into(),
            },
        }
    }

    /// An enabled slot without options.
    pub fn slot(id: impl Into<String>, slot: impl Into<String>) -> Self {
        StackItem {
            body: ItemBody::Slot {
                slot: slot.into(),
                options: None,
            },
            ..StackItem::block(id, "")
        }
    }

    pub fn with_role(mut self, role: Role) -> Self {
        self.role = Some(role);
        self
    }

    pub fn kind(&self) -> ItemKind {
        match self.body {
            ItemBody::Block { .. } => ItemKind::Block,
            ItemBody::Slot { .. } => ItemKind::Slot,
        }
    }

    /// Everything but `enabled: false` is enabled.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }

    /// A block's content.
    pub fn content(&self) -> Option<&str> {
        match &self.body {
            ItemBody::Block { content } => Some(content),
            ItemBody::Slot { .. } => None,
        }
    }

    /// A slot's name.
    pub fn slot_name(&self) -> Option<&str> {
        match &self.body {
            ItemBody::Slot { slot, .. } => Some(slot),
            ItemBody::Block { .. } => None,
        }
    }

    /// A slot's options object, when it has one.
    pub fn options(&self) -> Option<&Map<String, Value>> {
        match &self.body {
            ItemBody::Slot { options, .. } => options.as_ref(),
            ItemBody::Block { .. } => None,
        }
    }

    /// `kind, id, name, enabled, role, tags, source`, then `slot, options` or `content`.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("kind".into(), self.kind().as_str().into());
        map.insert("id".into(), self.id.clone().into());
        if let Some(name) = &self.name {
            map.insert("name".into(), name.clone().into());
        }
        if let Some(enabled) = self.enabled {
            map.insert("enabled".into(), enabled.into());
        }
        if let Some(role) = self.role {
            map.insert("role".into(), role.as_str().into());
        }
        if let Some(tags) = &self.tags {
            let tags = tags.iter().cloned().map(Value::String).collect();
            map.insert("tags".into(), Value::Array(tags));
        }
        if let Some(source) = &self.source {
            map.insert("source".into(), Value::Object(source.clone()));
        }
        match &self.body {
            ItemBody::Block { content } => {
                map.insert("content".into(), content.clone().into());
            }
            ItemBody::Slot { slot, options } => {
                map.insert("slot".into(), slot.clone().into());
                if let Some(options) = options {
                    map.insert("options".into(), Value::Object(options.clone()));
                }
            }
        }
        Value::Object(map)
    }
}

/// A normalized prompt stack ("Preset").
///
/// Fields appear in serialization order. `None` means the key is absent from the normalized object.
/// `defaults`, `context`, `regex`, `source`, `import` and `capabilities` are passthroughs: whatever
/// object (or array) the file held, bad members included.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptStack {
    pub schema_version: SchemaVersion,
    /// Whether `type: "pi-forge.prompt-stack"` is present (any other value is dropped).
    pub has_type: bool,
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    /// As written; [`PromptStack::auto_activate()`] tells whether it counts.
    pub auto_activate: Option<bool>,
    /// As written; [`PromptStack::mode()`] gives the effective mode.
    pub mode: Option<StackMode>,
    pub defaults: Option<Map<String, Value>>,
    pub context: Option<Map<String, Value>>,
    pub tools: Option<Policy>,
    pub skills: Option<Policy>,
    /// v1 only: string values, in file order.
    pub variables: Option<Vec<(String, String)>>,
    /// v2 only: any JSON values, in file order.
    pub parameters: Option<Map<String, Value>>,
    pub regex: Option<Map<String, Value>>,
    /// Capability bindings (0.5.5), kept as written when the value is an array.
    pub capabilities: Option<Vec<Value>>,
    pub items: Vec<StackItem>,
    pub import: Option<Map<String, Value>>,
}

impl PromptStack {
    /// An empty v1 stack with the given id and nothing else.
    pub fn new(id: impl Into<String>) -> Self {
        PromptStack {
            schema_version: SchemaVersion::V1,
            has_type: false,
            id: id.into(),
            name: None,
            description: None,
            auto_activate: None,
            mode: None,
            defaults: None,
            context: None,
            tools: None,
            skills: None,
            variables: None,
            parameters: None,
            regex: None,
            capabilities: None,
            items: Vec::new(),
            import: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Only an explicit `autoActivate: true` counts.
    pub fn auto_activate(&self) -> bool {
        self.auto_activate == Some(true)
    }

    /// The effective mode (`replace` when absent).
    pub fn mode(&self) -> StackMode {
        self.mode.unwrap_or_default()
    }

    pub fn items(&self) -> &[StackItem] {
        &self.items
    }

    /// A v1 variable by name.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .as_ref()?
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The normalized object, keys in [`STACK_KEY_ORDER`], absent keys omitted.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert(
            "schemaVersion".into(),
            Value::from(self.schema_version.as_u8()),
        );
        if self.has_type {
            map.insert("type".into(), STACK_TYPE.into());
        }
        map.insert("id".into(), self.id.clone().into());
        if let Some(name) = &self.name {
            map.insert("name".into(), name.clone().into());
        }
        if let Some(description) = &self.description {
            map.insert("description".into(), description.clone().into());
        }
        if let Some(auto) = self.auto_activate {
            map.insert("autoActivate".into(), auto.into());
        }
        if let Some(mode) = self.mode {
            map.insert("mode".into(), mode.as_str().into());
        }
        insert_object(&mut map, "defaults", &self.defaults);
        insert_object(&mut map, "context", &self.context);
        if let Some(tools) = &self.tools {
            map.insert("tools".into(), tools.to_value());
        }
        if let Some(skills) = &self.skills {
            map.insert("skills".into(), skills.to_value());
        }
        if let Some(variables) = &self.variables {
            let vars = variables
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            map.insert("variables".into(), Value::Object(vars));
        }
        insert_object(&mut map, "parameters", &self.parameters);
        insert_object(&mut map, "regex", &self.regex);
        if let Some(capabilities) = &self.capabilities {
            map.insert("capabilities".into(), Value::Array(capabilities.clone()));
        }
        let items = self.items.iter().map(StackItem::to_value).collect();
        map.insert("items".into(), Value::Array(items));
        insert_object(&mut map, "import", &self.import);
        Value::Object(map)
    }

    /// `sha256:v1:` fingerprint of the normalized object.
    pub fn fingerprint(&self) -> String {
        crate::canonical::fingerprint(&self.to_value())
    }
}

fn insert_object(map: &mut Map<String, Value>, key: &str, value: &Option<Map<String, Value>>) {
    if let Some(value) = value {
        map.insert(key.into(), Value::Object(value.clone()));
    }
}

impl serde::Serialize for PromptStack {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}
