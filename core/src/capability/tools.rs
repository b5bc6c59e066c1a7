//! The tool calculation (spec B9): which tools the model gets from a Preset's policy, its
//! `tools.initial`, the session's baseline and the active capabilities' tool patches.
//!
//! ```text
//! src  = baseline ∩ registered            (the baseline as is when nothing is registered)
//! base = initial present  → its registered names, in its order
//!        policy effective → the policy's pick from src (a selective allow picks from registered)
//!        otherwise        → src
//! eff  = base + every patch's registered adds not yet present (activation order)
//! eff  = eff − every patch's removes; the policy ceiling; − removes again
//! ```
//!
//! So removal wins over every add, the Preset's ceiling wins over capability adds, and `initial`
//! is a starting set, never a ceiling. One function for the compiler, the live session and the
//! browser's tool effect preview.

use super::ToolPatch;
use crate::stack::Policy;

fn push_unique<'a>(out: &mut Vec<&'a str>, name: &'a str) {
    if !out.contains(&name) {
        out.push(name);
    }
}

/// The effective tool list (see the module docs). `registered` is in registry order; `baseline`
/// is the session's tools before pi-forge filtered them; `patches` are in activation order.
pub fn effective_tools<'a>(
    policy: Option<&Policy>,
    registered: &[&'a str],
    baseline: &[&'a str],
    patches: &[&'a ToolPatch],
) -> Vec<&'a str> {
    let mut src: Vec<&str> = Vec::new();
    for &name in baseline {
        if registered.is_empty() || registered.contains(&name) {
            push_unique(&mut src, name);
        }
    }
    let effective = policy.is_some_and(Policy::is_effective);
    let mut eff: Vec<&str> = match policy {
        Some(Policy {
            initial: Some(initial),
            ..
        }) => {
            let mut out = Vec::new();
            for name in initial {
                if let Some(&known) = registered.iter().find(|r| **r == name.as_str()) {
                    push_unique(&mut out, known);
                }
            }
            out
        }
        Some(p) if effective => {
            if p.is_selective_allow() {
                let mut all = Vec::new();
                for &name in registered {
                    push_unique(&mut all, name);
                }
                p.apply(&all)
            } else {
                p.apply(&src)
            }
        }
        _ => src,
    };
    for patch in patches {
        for name in &patch.add {
            if let Some(&known) = registered.iter().find(|r| **r == name.as_str()) {
                push_unique(&mut eff, known);
            }
        }
    }
    let removed = |name: &str| patches.iter().any(|p| p.remove.iter().any(|r| r == name));
    eff.retain(|name| !removed(name));
    if let Some(p) = policy.filter(|_| effective) {
        eff = p.apply(&eff);
    }
    eff
}

/// The problems of adding `patches` under a Preset (B9 `validateCapabilities`): an added name that
/// is not registered, or that the Preset's ceiling blocks. Removes may name anything. `initial` is
/// not consulted. `stack` names the Preset in messages.
pub fn patch_problems(
    patches: &[&ToolPatch],
    policy: Option<&Policy>,
    registered: &[&str],
    stack: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for patch in patches {
        for name in &patch.add {
            if !registered.contains(&name.as_str()) {
                out.push(format!("Tool {name} is not registered"));
            } else if policy.is_some_and(|p| !p.permits(name)) {
                out.push(format!("Tool {name} is blocked by prompt stack {stack}"));
            }
        }
    }
    out
}

/// Reconciles the remembered baseline with changes made outside pi-forge: names that appeared
/// since the last applied set join it, names that disappeared leave it. Order: the old baseline's
/// order, then new names in the current order.
pub fn reconcile_baseline(
    baseline: &[String],
    last_applied: &[String],
    current: &[String],
) -> Vec<String> {
    let vanished = |name: &String| last_applied.contains(name) && !current.contains(name);
    let mut out: Vec<String> = baseline.iter().filter(|n| !vanished(n)).cloned().collect();
    for name in current {
        if !last_applied.contains(name) && !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

/// The tool-call guard: the Preset's ceiling excludes `tool`, or an active capability removes it.
pub fn blocks_tool(tool: &str, policy: Option<&Policy>, patches: &[&ToolPatch]) -> bool {
    policy.is_some_and(|p| !p.permits(tool))
        || patches.iter().any(|p| p.remove.iter().any(|r| r == tool))
}

/// What changes from `before` to `after`: the names `after` adds (in its order) and the names it
/// drops (in `before`'s order). The tool effect preview shows a Preset's effective tools this way
/// against the session's active tools.
pub fn tool_delta<'a>(before: &[&'a str], after: &[&'a str]) -> (Vec<&'a str>, Vec<&'a str>) {
    let added = after
        .iter()
        .copied()
        .filter(|n| !before.contains(n))
        .collect();
    let removed = before
        .iter()
        .copied()
        .filter(|n| !after.contains(n))
        .collect();
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_delta_lists_adds_in_new_order_and_drops_in_old_order() {
        let (added, removed) = tool_delta(&["read", "bash", "edit"], &["grep", "read", "ls"]);
        assert_eq!(added, vec!["grep", "ls"]);
        assert_eq!(removed, vec!["bash", "edit"]);
    }

    #[test]
    fn tool_delta_of_equal_sets_is_empty_whatever_the_order() {
        let (added, removed) = tool_delta(&["read", "bash"], &["bash", "read"]);
        assert!(added.is_empty());
        assert!(removed.is_empty());
    }
}
