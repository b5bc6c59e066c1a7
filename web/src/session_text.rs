//! The Session panel's words, as pure functions of forge-core's view types: short ids, tool
//! patches and changes, the delivery and presentation explanations, the picker's option values.
//!
//! No Leptos and nothing of the browser here: `e2e/tests/session_panel.rs` includes this file
//! (`#[path]`) so its exact texts are tested on the host, where forge-web is not built.
#![allow(dead_code)]

use forge_core::capability::view::{ChoiceKind, Delivery, TextPresentation, ToolChange, ViewGuard};

/// The panel without a live Pi session.
pub const NO_SESSION: &str = "No live Pi session. Start Pi in this project with the pi-forge \
     extension (pi-forge pi install): its capabilities show here and follow every change.";

/// A Reset all confirmation that the session overtook.
pub const RESET_STALE: &str = "The session changed; review it again.";

/// Why Enable is off in an untrusted project.
pub const UNTRUSTED_ENABLE: &str =
    "This project is not trusted: capabilities cannot be enabled from the web.";

/// Why Enable is off while the session rebuilds its state.
pub const RESTORING_ENABLE: &str =
    "The session is restoring its capability state: wait for it to finish.";

/// Why Enable is off after a failure.
pub const STALE_ENABLE: &str = "This view may be out of date: Refresh to review it again.";

/// The picker was loaded for a state the session has since left.
pub const PICKER_OUTDATED: &str =
    "The session changed since these choices were loaded: Refresh to review them again.";

/// The first 8 characters of an id.
pub fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// `session·leaf`, both shortened; a session without entries has no leaf.
pub fn session_leaf(guard: &ViewGuard) -> String {
    let leaf = guard
        .leaf_id
        .as_deref()
        .map_or_else(|| "no leaf".to_string(), short_id);
    format!("{}·{leaf}", short_id(&guard.session_id))
}

/// `#` and the first 8 hex digits of a `sha256:v1:<hex>` fingerprint.
pub fn short_fingerprint(fingerprint: &str) -> String {
    let hex = fingerprint.rsplit(':').next().unwrap_or(fingerprint);
    format!("#{}", short_id(hex))
}

/// A tool patch as `+add … −remove …`, or "No tool changes".
pub fn patch_text(add: &[String], remove: &[String]) -> String {
    let parts: Vec<String> = add
        .iter()
        .map(|t| format!("+{t}"))
        .chain(remove.iter().map(|t| format!("−{t}")))
        .collect();
    if parts.is_empty() {
        "No tool changes".to_string()
    } else {
        parts.join(" ")
    }
}

/// What the last tool sync did to the effective tools: `+added … −removed …`, or "tools
/// unchanged".
pub fn tool_change_text(change: Option<&ToolChange>) -> String {
    match change {
        Some(c) if !(c.added.is_empty() && c.removed.is_empty()) => {
            patch_text(&c.added, &c.removed)
        }
        _ => "tools unchanged".to_string(),
    }
}

/// The summary's count.
pub fn active_count(n: usize) -> String {
    format!("{n} active")
}

/// The top bar's summary: the count, and the delivery state unless there is nothing to deliver.
pub fn badge_text(active: usize, delivery: Delivery) -> String {
    match delivery {
        Delivery::None => active_count(active),
        _ => format!("{} · {}", active_count(active), delivery.as_str()),
    }
}

/// What the delivery state means.
pub fn delivery_text(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::None => "Nothing to deliver: no capability text is waiting for the model.",
        Delivery::Pending => {
            "Pending: the capability text goes to the model with the next request."
        }
        Delivery::Prepared => {
            "Prepared: the next request's context was assembled with the capability text. \
             This says what the model receives, not that it complies."
        }
    }
}

/// How the capability text reaches the model.
pub fn presentation_text(presentation: TextPresentation) -> &'static str {
    match presentation {
        TextPresentation::Native => "Presented as native system sections.",
        TextPresentation::User => {
            "Presented as an attributed user-role notice: this model does not take system \
             messages in the middle of a conversation."
        }
    }
}

/// The picker option value of a choice: `capability:<scope:id>` or `binding:<id>`.
pub fn choice_value(kind: ChoiceKind, id: &str) -> String {
    match kind {
        ChoiceKind::Capability => format!("capability:{id}"),
        ChoiceKind::Binding => format!("binding:{id}"),
    }
}

/// The kind name the preview shows and the enable request sends.
pub fn kind_name(kind: ChoiceKind) -> &'static str {
    match kind {
        ChoiceKind::Capability => "capability",
        ChoiceKind::Binding => "binding",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(leaf: Option<&str>) -> ViewGuard {
        ViewGuard {
            session_id: "0f3c9a71-5d2e-4c1b-9a7e-2b8d4e6f1a30".into(),
            leaf_id: leaf.map(str::to_string),
            revision: "sha256:v1:00".into(),
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn short_ids_take_eight_characters() {
        assert_eq!(short_id("abc"), "abc");
        assert_eq!(short_id("0123456789"), "01234567");
        assert_eq!(short_id("ééééééééé"), "éééééééé");
        assert_eq!(
            session_leaf(&guard(Some("a1b2c3d4e5"))),
            "0f3c9a71·a1b2c3d4"
        );
        assert_eq!(session_leaf(&guard(None)), "0f3c9a71·no leaf");
    }

    #[test]
    fn fingerprints_show_their_first_hex_digits() {
        assert_eq!(
            short_fingerprint(
                "sha256:v1:f92c6b56c11b0ea645f3ec6a9ab3afed8fbd9f47a77d1b76f8be84fb027b3cdf"
            ),
            "#f92c6b56"
        );
        assert_eq!(short_fingerprint("deadbeef00"), "#deadbeef");
    }

    #[test]
    fn tool_patches_and_changes_read_as_plus_minus() {
        assert_eq!(
            patch_text(&names(&["grep", "find"]), &names(&["bash"])),
            "+grep +find −bash"
        );
        assert_eq!(patch_text(&[], &[]), "No tool changes");
        assert_eq!(tool_change_text(None), "tools unchanged");
        assert_eq!(
            tool_change_text(Some(&ToolChange::default())),
            "tools unchanged"
        );
        assert_eq!(
            tool_change_text(Some(&ToolChange {
                added: names(&["ls"]),
                removed: names(&["write", "edit"]),
            })),
            "+ls −write −edit"
        );
    }

    #[test]
    fn summary_and_explanations() {
        assert_eq!(active_count(0), "0 active");
        assert_eq!(active_count(2), "2 active");
        assert_eq!(badge_text(0, Delivery::None), "0 active");
        assert_eq!(badge_text(1, Delivery::Pending), "1 active · pending");
        assert_eq!(badge_text(2, Delivery::Prepared), "2 active · prepared");
        assert!(delivery_text(Delivery::Prepared).ends_with("not that it complies."));
        assert_eq!(
            presentation_text(TextPresentation::Native),
            "Presented as native system sections."
        );
        assert_eq!(
            choice_value(ChoiceKind::Capability, "project:review"),
            "capability:project:review"
        );
        assert_eq!(
            choice_value(ChoiceKind::Binding, "review"),
            "binding:review"
        );
        assert_eq!(kind_name(ChoiceKind::Binding), "binding");
    }
}
