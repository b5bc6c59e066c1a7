//! forge-core: the workspace core of pi-forge.
//!
//! Pure domain code (codecs, identity, canonical JSON, discovery rules) plus the [`workspace::store`]
//! abstraction over the filesystem. No async runtime, no HTTP: this crate also builds for
//! `wasm32-unknown-unknown` so the browser runs the same validation as the server.
//! See `docs/architecture.md` for the code map.
#![forbid(unsafe_code)]

pub mod api;
pub mod canonical;
pub mod capability;
#[cfg(feature = "regex")]
pub mod compile;
pub mod config;
pub mod delegation;
pub mod diag;
pub mod diff;
#[cfg(feature = "regex")]
pub mod golden;
pub mod id;
pub mod import;
pub mod js;
pub mod json;
pub mod merge;
pub mod message;
pub mod payload;
pub mod profile;
#[cfg(feature = "regex")]
pub mod rewrite;
pub mod runtime;
pub mod session;
mod shape;
pub mod stack;
pub mod template;
pub mod undo;
pub mod workspace;

/// True when `text` is empty after JavaScript `trim()`.
pub(crate) fn json_trim_is_empty(text: &str) -> bool {
    js::js_trim(text).is_empty()
}
