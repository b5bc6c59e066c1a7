//! The one place the compiler names the template, rewrite and diff modules.
//!
//! `diff` is a TEMPORARY stand-in until that module lands; the rest of `compile/` only uses the
//! names re-exported here.

pub(crate) mod template {
    pub use crate::template::{
        extension_dependency, render_text_all, MacroContext, MacroRegistry, Scope,
    };
}

pub(crate) mod rewrite {
    pub use crate::rewrite::{
        apply_compiled_messages, apply_compiled_system, apply_history, finalize_rule_count,
        rules_from_config, Rule,
    };
}

pub(crate) mod diff {
    use serde::Serialize;

    /// One block of a preview.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Section {
        pub id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub diff_key: Option<String>,
        pub title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub role: Option<String>,
        pub content: String,
        pub chars: usize,
        pub approx_tokens: usize,
    }

    /// 32-bit FNV-1a over UTF-16 code units, 8 lowercase hex digits.
    pub fn hash_text(text: &str) -> String {
        let mut hash: u32 = 0x811c_9dc5;
        for unit in text.encode_utf16() {
            hash ^= u32::from(unit);
            hash = hash.wrapping_mul(0x0100_0193);
        }
        format!("{hash:08x}")
    }

    /// `max(1, ceil(chars / 4))`.
    pub fn approx_tokens(chars: usize) -> usize {
        chars.div_ceil(4).max(1)
    }
}
