//! Resource identity: the id grammar, scopes, keys and selectors (`id`, `project:id`, `global:id`),
//! the id a file falls back to, and the tool-name grammar.
//!
//! Every resource kind (prompt stack, agent profile, capability, binding) shares one id grammar:
//! `^[A-Za-z0-9][A-Za-z0-9._-]*$`. `:` is reserved to qualify an id with its scope.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::js::is_js_whitespace;
use crate::json::utf16_len;

/// Where a resource lives: the project's `.pi/forge/` or the user's global forge directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    Global,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::Global => "global",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "project" => Some(Scope::Project),
            "global" => Some(Scope::Global),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{scope, id}`; its text form is `<scope>:<id>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceKey {
    pub scope: Scope,
    pub id: String,
}

impl ResourceKey {
    pub fn new(scope: Scope, id: impl Into<String>) -> Self {
        ResourceKey {
            scope,
            id: id.into(),
        }
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scope, self.id)
    }
}

/// True when `id` matches `^[A-Za-z0-9][A-Za-z0-9._-]*$`.
pub fn is_valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The longest id a new resource may have, in characters (ids are ASCII): `<id>.json` must fit
/// in a file name on every file system pi-forge runs on (255 bytes; 143 on eCryptfs).
pub const MAX_ID_LENGTH: usize = 128;

/// Why `id` is too long to name a new resource's file, if it is. One rule for the editor's live
/// check and the server's create, fork and rename.
pub fn id_length_problem(id: &str) -> Option<String> {
    (id.len() > MAX_ID_LENGTH).then(|| {
        format!(
            "The id is {} characters long; an id is at most {MAX_ID_LENGTH} characters, because the file is named after it.",
            id.chars().count()
        )
    })
}

/// The explanation appended to id-grammar errors.
pub const ID_RULE: &str =
    "must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens";

/// Node's `path.basename(path)` (POSIX): trailing `/`s ignored, then the last `/`-separated
/// component. `\\` is not a separator.
pub fn base_name(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// The id a resource file falls back to when its own id is missing or unusable: Node's
/// `path.basename(file_name, ".json")` (POSIX), as the original tool computes it for every kind.
///
/// Like Node, a base name that is exactly `.json` is kept unless it is the whole argument
/// (`".json"` → `""`, `"a/.json"` → `".json"`); the suffix is case-sensitive.
pub fn fallback_id(file_name: &str) -> &str {
    if file_name == ".json" {
        return "";
    }
    let base = base_name(file_name);
    match base.strip_suffix(".json") {
        Some(stem) if !stem.is_empty() => stem,
        _ => base,
    }
}

/// Longest tool name, in UTF-16 units (capabilities spec B1).
pub const MAX_TOOL_NAME_LENGTH: usize = 128;

/// Why a tool (or skill) name is invalid; `None` when it is a valid concrete name (capabilities
/// spec B1): 1..=128 UTF-16 units, no white space (the JavaScript set), no control character
/// (U+0000–U+001F, U+007F), no `*` or `?`. Problems are reported in that order.
pub fn tool_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("must not be empty")
    } else if utf16_len(name) > MAX_TOOL_NAME_LENGTH {
        Some("must be at most 128 characters")
    } else if name.chars().any(|c| (c as u32) < 0x20 || c == '\u{7f}') {
        Some("must not contain control characters")
    } else if name.chars().any(is_js_whitespace) {
        Some("must not contain whitespace")
    } else if name.contains(['*', '?']) {
        Some("must not contain wildcards (* or ?)")
    } else {
        None
    }
}

/// True when `name` is a valid concrete tool (or skill) name; see [`tool_name_problem`].
pub fn is_valid_tool_name(name: &str) -> bool {
    tool_name_problem(name).is_none()
}

/// A parsed reference to a resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    /// No scope given: project first, then global (exact rules depend on the resource kind).
    Bare(String),
    /// `project:<id>` or `global:<id>`.
    Scoped(ResourceKey),
}

impl Selector {
    pub fn id(&self) -> &str {
        match self {
            Selector::Bare(id) => id,
            Selector::Scoped(key) => &key.id,
        }
    }

    pub fn scope(&self) -> Option<Scope> {
        match self {
            Selector::Bare(_) => None,
            Selector::Scoped(key) => Some(key.scope),
        }
    }

    /// Resolve a bare selector against a default scope.
    pub fn key_in(&self, default_scope: Scope) -> ResourceKey {
        match self {
            Selector::Bare(id) => ResourceKey::new(default_scope, id.clone()),
            Selector::Scoped(key) => key.clone(),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Bare(id) => f.write_str(id),
            Selector::Scoped(key) => key.fmt(f),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("Resource selector must not be empty.")]
    Empty,
    #[error("Unknown scope prefix: {0}. Expected \"project\" or \"global\".")]
    UnknownScope(String),
    #[error("Invalid resource id: {0}. Resource ids {ID_RULE}.")]
    InvalidId(String),
}

/// Parses `id`, `project:id` or `global:id` (input is trimmed; the split is at the first colon).
///
/// The opt-out words `none`/`off` are not handled here: see [`parse_stack_choice`].
pub fn parse_selector(input: &str) -> Result<Selector, SelectorError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(SelectorError::Empty);
    }
    match text.split_once(':') {
        None => {
            if is_valid_id(text) {
                Ok(Selector::Bare(text.to_string()))
            } else {
                Err(SelectorError::InvalidId(text.to_string()))
            }
        }
        Some((prefix, rest)) => {
            let scope =
                Scope::parse(prefix).ok_or_else(|| SelectorError::UnknownScope(prefix.into()))?;
            if is_valid_id(rest) {
                Ok(Selector::Scoped(ResourceKey::new(scope, rest)))
            } else {
                Err(SelectorError::InvalidId(rest.to_string()))
            }
        }
    }
}

/// A prompt-stack choice: a selector, or one of the opt-out words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StackChoice {
    /// `none`, `off` (and `disable`): run without a stack.
    Disabled,
    Selector(Selector),
}

/// Parses a stack choice, handling the opt-out words `none`, `off` and `disable` before the
/// selector grammar.
pub fn parse_stack_choice(input: &str) -> Result<StackChoice, SelectorError> {
    match input.trim() {
        "none" | "off" | "disable" => Ok(StackChoice::Disabled),
        other => parse_selector(other).map(StackChoice::Selector),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_ids() {
        for id in ["reviewer", "my.stack", "a_b-c", "A0", "x.1_2"] {
            assert!(is_valid_id(id), "{id}");
        }
        for id in [
            "",
            " project",
            "proj:reviewer",
            "-leading",
            ".leading",
            "a b",
            "with/slash",
            "..",
            "é",
        ] {
            assert!(!is_valid_id(id), "{id}");
        }
    }

    #[test]
    fn fallback_id_is_node_basename_without_json() {
        assert_eq!(fallback_id("reviewer.json"), "reviewer");
        assert_eq!(fallback_id("a/b/broken.json"), "broken");
        assert_eq!(fallback_id("dir/fallback.json"), "fallback");
        assert_eq!(fallback_id("plain"), "plain");
        assert_eq!(fallback_id("x.JSON"), "x.JSON");
        assert_eq!(fallback_id("a.json/"), "a");
        assert_eq!(fallback_id(".json"), "");
        assert_eq!(fallback_id("a/.json"), ".json");
        assert_eq!(fallback_id(".json/"), ".json");
        assert_eq!(fallback_id("a.json.json"), "a.json");
        assert_eq!(fallback_id(""), "");
        assert_eq!(fallback_id("/"), "");
        // POSIX semantics: a backslash is part of the name.
        assert_eq!(fallback_id("c:\\x\\y.json"), "c:\\x\\y");
        assert_eq!(base_name("a/b/c.json"), "c.json");
        assert_eq!(base_name("a.json/"), "a.json");
        assert_eq!(base_name("//"), "");
    }

    #[test]
    fn tool_name_rules() {
        assert_eq!(tool_name_problem("read"), None);
        assert_eq!(tool_name_problem(""), Some("must not be empty"));
        assert_eq!(
            tool_name_problem("a\u{7f}"),
            Some("must not contain control characters")
        );
        assert_eq!(
            tool_name_problem("a\u{1f}"),
            Some("must not contain control characters")
        );
        assert_eq!(
            tool_name_problem("a\u{3000}b"),
            Some("must not contain whitespace")
        );
        assert_eq!(
            tool_name_problem("a*"),
            Some("must not contain wildcards (* or ?)")
        );
        assert_eq!(tool_name_problem(&"é".repeat(128)), None);
        assert_eq!(
            tool_name_problem(&"😀".repeat(65)),
            Some("must be at most 128 characters")
        );
        // Spec B1: control characters are U+0000–U+001F and U+007F only.
        assert_eq!(tool_name_problem("a\u{80}\u{9f}"), None);
        assert!(is_valid_tool_name(&"x".repeat(128)));
        assert!(!is_valid_tool_name(&"x".repeat(129)));
        assert!(!is_valid_tool_name("a b"));
        // U+0085 is neither JavaScript white space nor a B1 control character.
        assert!(is_valid_tool_name("a\u{85}b"));
        assert!(!is_valid_tool_name("a?"));
    }

    #[test]
    fn selectors() {
        assert_eq!(
            parse_selector("project:reviewer"),
            Ok(Selector::Scoped(ResourceKey::new(
                Scope::Project,
                "reviewer"
            )))
        );
        assert_eq!(
            parse_selector(" project:a "),
            Ok(Selector::Scoped(ResourceKey::new(Scope::Project, "a")))
        );
        assert_eq!(
            parse_selector("bad:scope:reviewer")
                .unwrap_err()
                .to_string(),
            "Unknown scope prefix: bad. Expected \"project\" or \"global\"."
        );
        assert_eq!(
            parse_selector("unknown:reviewer"),
            Err(SelectorError::UnknownScope("unknown".into()))
        );
        assert_eq!(
            parse_selector("team:x"),
            Err(SelectorError::UnknownScope("team".into()))
        );
        assert_eq!(
            parse_selector("project:").unwrap_err().to_string(),
            "Invalid resource id: . Resource ids must start with a letter or number and contain only letters, numbers, dots, underscores, and hyphens."
        );
        assert_eq!(
            parse_selector("global:"),
            Err(SelectorError::InvalidId(String::new()))
        );
        assert_eq!(
            parse_selector("global:a:b"),
            Err(SelectorError::InvalidId("a:b".into()))
        );
        assert_eq!(parse_selector("   "), Err(SelectorError::Empty));
        assert_eq!(
            parse_selector("   ").unwrap_err().to_string(),
            "Resource selector must not be empty."
        );
        assert_eq!(parse_selector("x"), Ok(Selector::Bare("x".into())));
        assert_eq!(
            parse_selector("../x"),
            Err(SelectorError::InvalidId("../x".into()))
        );
    }

    #[test]
    fn opt_out_words_come_before_parsing() {
        assert_eq!(parse_stack_choice(" none "), Ok(StackChoice::Disabled));
        assert_eq!(parse_stack_choice("off"), Ok(StackChoice::Disabled));
        assert_eq!(
            parse_stack_choice("global:none"),
            Ok(StackChoice::Selector(Selector::Scoped(ResourceKey::new(
                Scope::Global,
                "none"
            ))))
        );
        assert_eq!(
            Selector::Scoped(ResourceKey::new(Scope::Global, "a")).to_string(),
            "global:a"
        );
    }
}
