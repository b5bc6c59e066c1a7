//! What a template sees (`Scope`) and the limits a render stays within.

use serde_json::Value;

/// Maximum rendered length of one block, in UTF-16 code units.
pub const OUTPUT_LIMIT: usize = 100_000;
/// Maximum length of one macro's output, in UTF-16 code units.
pub const MACRO_OUTPUT_LIMIT: usize = 16_384;
/// Maximum `if` nesting depth.
pub const MAX_NESTING: usize = 64;
/// Resolving a macro while this many are already in progress fails.
pub const MAX_MACRO_DEPTH: usize = 32;

/// The values a template sees, frozen once per compilation.
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    /// Object: `cwd`, `date`, `time`, `lastUserMessage`, `selectedTools` (array),
    /// `selectedToolsText`, `activeModel`, `populatedAt`, `timezone`, `tool {name: true}`,
    /// `slot {name: true}`.
    pub runtime: Value,
    /// Object: v2 `parameters` or v1 `variables`.
    pub parameters: Value,
}

impl Scope {
    pub fn new(runtime: Value, parameters: Value) -> Self {
        Scope {
            runtime,
            parameters,
        }
    }

    /// Sets `runtime.lastUserMessage` (pair with
    /// [`MacroContext::set_latest_user_message`](super::MacroContext::set_latest_user_message)).
    pub fn set_last_user_message(&mut self, text: &str) {
        if let Value::Object(runtime) = &mut self.runtime {
            runtime.insert(
                "lastUserMessage".to_string(),
                Value::String(text.to_string()),
            );
        }
    }
}
