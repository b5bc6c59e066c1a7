//! Diagnostics: what a codec or the compiler has to say about a resource.
//!
//! One type serves every resource kind. Prompt stacks attach an `itemId`, profiles and
//! capabilities a `field`; both are optional and omitted from JSON when absent, which is the
//! wire shape the original editor used (`{level, message, itemId?}` / `{level, message, field?}`).

use serde::{Deserialize, Serialize};

/// Severity. A resource is *usable* when it has no [`Level::Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
    Info,
}

impl Level {
    /// One-letter code used in compact text output (`E`, `W`, `I`).
    pub fn letter(self) -> char {
        match self {
            Level::Error => 'E',
            Level::Warning => 'W',
            Level::Info => 'I',
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Info => "info",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub level: Level,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What kind of check found it, when it is not the file format's codec (which the original
    /// shared, so its diagnostics keep their exact shape): `template` for the template analysis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// Where in the file or template the problem is (1-based; columns in the file's own
    /// characters for JSON, UTF-16 units for templates), when it has a place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

/// A diagnostic's category (see [`Diagnostic::category`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// A block's forge-v1 template does not parse, uses an unknown filter or reads a parameter
    /// the Preset does not define.
    Template,
}

impl Diagnostic {
    pub fn new(level: Level, message: impl Into<String>) -> Self {
        Diagnostic {
            level,
            message: message.into(),
            item_id: None,
            field: None,
            category: None,
            line: None,
            column: None,
        }
    }

    /// `Failed to parse JSON: <why>`, at the place the parser stopped.
    pub fn json_syntax(error: &crate::json::ParseError) -> Self {
        let d = Self::error(format!("Failed to parse JSON: {error}"));
        match error.position() {
            Some((line, column)) => d.with_position(line, column),
            None => d,
        }
    }

    pub fn with_position(mut self, line: usize, column: usize) -> Self {
        self.line = Some(line);
        self.column = Some(column);
        self
    }
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(Level::Error, message)
    }
    pub fn warning(message: impl Into<String>) -> Self {
        Self::new(Level::Warning, message)
    }
    pub fn info(message: impl Into<String>) -> Self {
        Self::new(Level::Info, message)
    }
    pub fn with_item(mut self, item_id: impl Into<String>) -> Self {
        self.item_id = Some(item_id.into());
        self
    }
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
    pub fn with_category(mut self, category: Category) -> Self {
        self.category = Some(category);
        self
    }
    pub fn is_error(&self) -> bool {
        self.level == Level::Error
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.category == Some(Category::Template) {
            write!(f, "template ")?;
        }
        write!(f, "{}", self.level.as_str())?;
        if let Some(item) = &self.item_id {
            write!(f, " [{item}]")?;
        }
        if let Some(field) = &self.field {
            write!(f, " ({field})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Removes repeated `(level, message, itemId, field)` entries, keeping the first occurrence.
pub fn dedupe(diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut seen = std::collections::HashSet::new();
    diagnostics
        .into_iter()
        .filter(|d| seen.insert(d.clone()))
        .collect()
}

/// True when none of the diagnostics is an error.
pub fn is_usable(diagnostics: &[Diagnostic]) -> bool {
    !diagnostics.iter().any(Diagnostic::is_error)
}

/// An error about one field (profiles, capabilities, bindings, snapshots).
pub(crate) fn field_error(field: &str, message: String) -> Diagnostic {
    Diagnostic::error(message).with_field(field)
}

/// `Ok(value)` when `diagnostics` holds no error; otherwise `Err` with the errors alone, in order.
pub(crate) fn ok_unless_errors<T>(
    value: T,
    diagnostics: Vec<Diagnostic>,
) -> Result<T, Vec<Diagnostic>> {
    let errors: Vec<Diagnostic> = diagnostics
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

/// Counts `(errors, warnings, infos)`.
pub fn counts(diagnostics: &[Diagnostic]) -> (usize, usize, usize) {
    diagnostics
        .iter()
        .fold((0, 0, 0), |(e, w, i), d| match d.level {
            Level::Error => (e + 1, w, i),
            Level::Warning => (e, w + 1, i),
            Level::Info => (e, w, i + 1),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedupe_keeps_first_and_distinguishes_item_ids() {
        let d = vec![
            Diagnostic::error("a").with_item("x"),
            Diagnostic::error("a").with_item("x"),
            Diagnostic::error("a").with_item("y"),
            Diagnostic::warning("a").with_item("x"),
        ];
        let out = dedupe(d);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2], Diagnostic::warning("a").with_item("x"));
    }

    #[test]
    fn wire_shape_omits_absent_fields() {
        let d = Diagnostic::warning("w").with_item("i1");
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"level":"warning","message":"w","itemId":"i1"}"#
        );
        assert_eq!(counts(&[d.clone(), Diagnostic::error("e")]), (1, 1, 0));
        assert!(!is_usable(&[Diagnostic::error("e")]));
    }
}
