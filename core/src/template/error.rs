//! A render failure and its kind.

use std::fmt;

use super::parse::ByteRange;

/// What went wrong while rendering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenderErrorKind {
    /// `Undefined forge-v1 path: {{a.b}}`.
    Undefined,
    /// `Unknown forge-v1 filter: f` (only when rendering a template that was not analyzed).
    Filter,
    /// `forge-v1 template output exceeds <limit> characters.`
    OutputLimit,
    /// `forge-v1 template nesting exceeds 64 levels.`
    Recursion,
    /// A macro cycle, a too-deep dependency graph or a failing macro.
    Evaluate,
    /// `forge-v1 extension <n> exceeds 16384 characters.`
    ExtensionLimit,
}

/// A render failure: its kind and the raw message (without the `forge-v1 render error: `
/// prefix a block diagnostic adds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderError {
    pub kind: RenderErrorKind,
    pub message: String,
    /// The byte range of the tag being evaluated when it failed (innermost), if any.
    pub(crate) at: Option<ByteRange>,
}

impl RenderError {
    pub(crate) fn new(kind: RenderErrorKind, message: impl Into<String>) -> Self {
        RenderError {
            kind,
            message: message.into(),
            at: None,
        }
    }

    /// Records `at` unless an inner tag already did.
    pub(super) fn within(mut self, at: ByteRange) -> Self {
        self.at.get_or_insert(at);
        self
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RenderError {}
