//! The one place the compiler names the template, rewrite and diff modules.
//!
//! The rest of `compile/` only uses the names re-exported here.

pub(crate) mod template {
    pub use crate::template::{
        extension_dependency, render_text_all, MacroContext, MacroRegistry, Scope,
    };
}

pub(crate) mod rewrite {
    pub(crate) use crate::rewrite::field;
    pub use crate::rewrite::{
        apply_compiled_messages_in_place, apply_compiled_system, apply_history_shared,
        finalize_rule_count, rules_from_config, MessageSlot, Rule,
    };
}

pub(crate) mod diff {
    pub use crate::diff::{hash_text, Section};
}
