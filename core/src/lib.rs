//! forge-core: the workspace core of pi-forge.
//!
//! Pure domain code (codecs, identity, canonical JSON, discovery rules) plus the [`store`]
//! abstraction over the filesystem. No async runtime, no HTTP: this crate also builds for
//! `wasm32-unknown-unknown` so the browser runs the same validation as the server.
//! See `docs/architecture.md` for the code map.
#![forbid(unsafe_code)]

pub mod canonical;
pub mod config;
pub mod diag;
pub mod id;
pub mod json;
pub mod capability;
pub mod profile;
pub mod stack;
pub mod workspace;
