//! Canonical JSON and `sha256:v1:` fingerprints, byte-identical to the original implementation.
//!
//! `canonical(v)` is compact JSON with object keys sorted by UTF-16 code units, ECMAScript number
//! formatting (`-0` → `0`, `1e+21`) and `JSON.stringify` string escapes. A fingerprint is
//! `sha256:v1:` + lowercase hex SHA-256 of the canonical text's UTF-8 bytes.
//!
//! Differences from JavaScript that cannot arise here, by construction:
//! - non-finite numbers cannot live in a `serde_json::Value` (they are refused by
//!   [`crate::json::format_number`], which the emitter uses);
//! - cycles and sparse arrays cannot be built from serde values;
//! - lone surrogates cannot live in a Rust `String` (serde_json refuses `"\ud800"`), so a file
//!   carrying one fails to parse instead of being fingerprinted.
//!
//! File revisions are a different thing: `sha256:` + hex of a file's raw bytes ([`revision`]), and
//! the bare hex form used by capability `sourceRevision`s ([`sha256_hex`]).

use serde_json::Value;
use sha2::{Digest, Sha256};

pub use crate::json::to_canonical as canonical;

/// Prefix of every fingerprint.
pub const FINGERPRINT_PREFIX: &str = "sha256:v1:";
/// Prefix of every file revision.
pub const REVISION_PREFIX: &str = "sha256:";

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// `sha256:v1:<hex>` of the canonical JSON of `value`.
pub fn fingerprint(value: &Value) -> String {
    format!(
        "{FINGERPRINT_PREFIX}{}",
        sha256_hex(canonical(value).as_bytes())
    )
}

/// `sha256:<hex>` of a file's raw bytes: the revision every read returns and every write names.
pub fn revision(bytes: &[u8]) -> String {
    format!("{REVISION_PREFIX}{}", sha256_hex(bytes))
}

/// True for `^sha256:v1:[a-f0-9]{64}$`.
pub fn is_fingerprint(text: &str) -> bool {
    text.strip_prefix(FINGERPRINT_PREFIX).is_some_and(is_hex64)
}

/// True for `^sha256:[a-f0-9]{64}$`.
pub fn is_revision(text: &str) -> bool {
    text.strip_prefix(REVISION_PREFIX).is_some_and(is_hex64)
}

/// True for exactly 64 lowercase hex digits (a bare `sourceRevision`).
pub fn is_hex64(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
