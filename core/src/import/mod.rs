//! Converters from other tools' prompt formats into pi-forge prompt stacks.
//!
//! Pure code like the rest of the core: a converter takes parsed JSON and returns the stack JSON
//! plus a report; reading the file and writing the result belong to the caller.

pub mod sillytavern;
