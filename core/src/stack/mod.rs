//! Prompt stacks ("Presets"): schema, normalization, validation, serialization.
//!
//! A stack file is JSON. [`parse_stack_bytes`] (or `_str` / `_value`) turns it into a normalized
//! [`PromptStack`] plus diagnostics, following the pipeline of the prompt-stacks spec §2.4:
//! shape checks over the raw root, normalization (ill-typed optional fields dropped, ids trimmed,
//! items repaired), validation of the normalized stack, the `default.json` warning, and a dedupe by
//! `(level, message, itemId)`. The result is *usable* when it has no error.
//!
//! [`serialize_stack`] writes the normalized object as 2-space JSON plus a newline, keys in
//! [`STACK_KEY_ORDER`]; parse→serialize is idempotent and drops unknown keys (the parsed root stays
//! available in [`ParsedStack::raw`] for editors that save the raw object).
//! [`PromptStack::fingerprint`] hashes the same normalized object.
//!
//! Decisions where the spec is silent:
//! - `capabilities` (0.5.5 bindings) is kept as written when it is an array and placed between
//!   `regex` and `items`; a non-array is dropped with an error. The bindings themselves are checked
//!   by the capability module.
//! - `tools.initial` / `skills.initial`: kept inside the policy object after `allow` and `deny`;
//!   the validation rules are documented on [`Policy`] (entries must be concrete valid
//!   names, repeated entries are dropped with a warning, names the ceiling excludes are errors).
//! - Regex compile failures are worded `Invalid regular expression: /<p>/<flags>: <reason>` with
//!   regress's reason text.
//! - A JSON number too large for an f64 (`1e400`) fails to parse instead of becoming a non-finite
//!   parameter; either way the stack is unusable.
//!
//! Pure code: no filesystem, clock or threads, so it also runs in the browser build.

mod model;
mod parse;
mod policy;
mod regex_rules;
pub use regex_rules::RuleTrial;
pub mod search;
pub mod slot_schema;
pub mod template_check;
pub mod templates;

pub use model::{
    ItemBody, ItemKind, PromptStack, Role, SchemaVersion, StackItem, StackMode, BUILTIN_SLOTS,
    STACK_KEY_ORDER, STACK_TYPE,
};
pub use parse::{
    fault_stack, parse_stack_bytes, parse_stack_lenient, parse_stack_str, parse_stack_value,
    serialize_stack, validate_stack, ParseOptions, ParsedStack,
};
pub use policy::{matches_any, pattern_matches, Policy};
// The tool-name grammar is shared with capabilities and lives in [`crate::id`].
pub use crate::id::{is_valid_tool_name, MAX_TOOL_NAME_LENGTH};
#[cfg(feature = "regex")]
pub use regex_rules::compile_pattern;
#[cfg(not(feature = "regex"))]
pub use regex_rules::set_pattern_checker;
pub use regex_rules::{check_pattern, engine_pattern, PatternChecker, REGEX_FLAGS};
