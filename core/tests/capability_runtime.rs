//! Capability events and the reducer (spec B7, vectors 31–38) and the tool calculation (B9,
//! vectors 39–43), with property tests of the calculation.

use forge_core::capability::events::{reduce, Actor};
use forge_core::capability::snapshot::{BindingSource, CapabilitySnapshot, SnapshotSource};
use forge_core::capability::tools::{
    blocks_tool, effective_tools, patch_problems, reconcile_baseline,
};
use forge_core::capability::ToolPatch;
use forge_core::id::{ResourceKey, Scope};
use forge_core::stack::Policy;
use proptest::prelude::*;
use serde_json::{json, Value};

fn key(scope: Scope, id: &str) -> ResourceKey {
    ResourceKey {
        scope,
        id: id.to_string(),
    }
}

fn snapshot(activation: &str, source: SnapshotSource) -> Value {
    CapabilitySnapshot {
        activation_id: activation.to_string(),
        source,
        name: None,
        content: "Review carefully.".to_string(),
        tools: ToolPatch::default(),
    }
    .to_value()
}

fn bound(binding: &str) -> SnapshotSource {
    SnapshotSource::Capability {
        key: key(Scope::Project, "review"),
        binding: Some(BindingSource {
            preset: key(Scope::Project, "coder"),
            id: binding.to_string(),
        }),
    }
}

fn activate(event: &str, actor: &str, snapshot: Value) -> Value {
    json!({"schemaVersion": 1, "eventId": event, "op": "activate", "actor": actor, "createdAt": 1000, "snapshot": snapshot})
}

fn deactivate(event: &str, actor: &str, activation: &str) -> Value {
    json!({"schemaVersion": 1, "eventId": event, "op": "deactivate", "actor": actor, "createdAt": 2000, "activationId": activation})
}

fn reset(event: &str) -> Value {
    json!({"schemaVersion": 1, "eventId": event, "op": "reset", "actor": "user", "createdAt": 3000})
}

fn manual(activation: &str) -> Value {
    snapshot(activation, SnapshotSource::Manual)
}

fn active_ids(events: &[Value]) -> Vec<String> {
    reduce(events)
        .unwrap()
        .active
        .iter()
        .map(|a| a.snapshot.activation_id.clone())
        .collect()
}

#[test]
fn v31_an_activation_id_is_never_reused() {
    let err = reduce(&[
        activate("e1", "user", manual("a1")),
        activate("e2", "user", manual("a1")),
    ])
    .unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(
        err.error,
        "Activation id a1 was already used in this branch"
    );
}

#[test]
fn v32_an_identical_repeated_event_is_skipped() {
    let state = reduce(&[
        activate("e1", "user", manual("a1")),
        activate("e1", "user", manual("a1")),
    ])
    .unwrap();
    assert_eq!(state.active.len(), 1);
    assert_eq!(state.last_event_id.as_deref(), Some("e1"));
    assert_eq!(state.active[0].actor, Actor::User);
}

#[test]
fn v33_a_reused_event_id_with_another_payload_is_an_error() {
    let err = reduce(&[
        activate("e1", "user", manual("a1")),
        deactivate("e1", "user", "a1"),
    ])
    .unwrap_err();
    assert_eq!(
        (err.index, err.error.as_str()),
        (1, "Duplicate eventId with conflicting payload")
    );
}

#[test]
fn v34_ownership_rules_of_deactivation() {
    let user_on = activate("e1", "user", snapshot("a1", bound("b1")));
    let err = reduce(&[user_on.clone(), deactivate("e2", "agent", "a1")]).unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(
        err.error,
        "The agent cannot deactivate a1: the user activated it"
    );
    for source in [
        SnapshotSource::Manual,
        SnapshotSource::Capability {
            key: key(Scope::Global, "review"),
            binding: None,
        },
    ] {
        let err = reduce(&[
            activate("e1", "user", snapshot("a1", source)),
            deactivate("e2", "lifecycle", "a1"),
        ])
        .unwrap_err();
        assert_eq!(
            err.error,
            "A Preset switch cannot deactivate a1: it is not bound to a Preset"
        );
    }
    assert_eq!(
        active_ids(&[user_on.clone(), deactivate("e2", "user", "a1")]),
        Vec::<String>::new()
    );
    // The agent may end what it started; the lifecycle may end bound items.
    let agent_on = activate("e1", "agent", snapshot("a1", bound("b1")));
    assert!(active_ids(&[agent_on.clone(), deactivate("e2", "agent", "a1")]).is_empty());
    assert!(active_ids(&[agent_on, deactivate("e2", "lifecycle", "a1")]).is_empty());
}

#[test]
fn v35_deactivating_an_unknown_activation_changes_nothing_but_the_cursor() {
    let state = reduce(&[
        activate("e1", "user", manual("a1")),
        deactivate("e2", "user", "nope"),
    ])
    .unwrap();
    assert_eq!(state.active.len(), 1);
    assert_eq!(state.last_event_id.as_deref(), Some("e2"));
}

#[test]
fn v36_reset_clears_but_activation_ids_stay_used() {
    let events = [
        activate("e1", "user", manual("a1")),
        reset("e2"),
        activate("e3", "user", manual("a2")),
    ];
    assert_eq!(active_ids(&events), ["a2"]);
    let mut again = events.to_vec();
    again.push(activate("e4", "user", manual("a1")));
    assert_eq!(reduce(&again).unwrap_err().index, 3);
}

#[test]
fn v37_decoding_refuses_bad_events() {
    let cases = [
        (
            activate("e1", "agent", manual("a1")),
            "Only the user can add manual capability text.",
        ),
        (
            activate(
                "e1",
                "agent",
                snapshot(
                    "a1",
                    SnapshotSource::Capability {
                        key: key(Scope::Project, "review"),
                        binding: None,
                    },
                ),
            ),
            "The agent can only activate capabilities bound to the active Preset.",
        ),
        (
            {
                let mut s = manual("a1");
                s["fingerprint"] = json!(format!("sha256:v1:{}", "0".repeat(64)));
                activate("e1", "user", s)
            },
            "Snapshot fingerprint mismatch",
        ),
        (
            {
                let mut e = activate("e1", "user", manual("a1"));
                e["createdAt"] = json!(-1);
                e
            },
            "createdAt must be a finite number of milliseconds ≥ 0.",
        ),
        (
            {
                let mut e = activate("e1", "user", manual("a1"));
                e["extra"] = json!(true);
                e
            },
            "Unsupported key extra in a capability event.",
        ),
        (
            json!({"schemaVersion": 1, "eventId": "e1", "op": "reset", "actor": "agent", "createdAt": 1}),
            "Only the user can reset capabilities.",
        ),
    ];
    for (event, message) in cases {
        let err = reduce(&[event]).unwrap_err();
        assert_eq!((err.index, err.error.as_str()), (0, message));
    }
}

#[test]
fn v38_two_activations_of_one_binding_are_an_error() {
    let err = reduce(&[
        activate("e1", "user", snapshot("a1", bound("b1"))),
        activate("e2", "user", snapshot("a2", bound("b1"))),
    ])
    .unwrap_err();
    assert_eq!(
        (err.index, err.error.as_str()),
        (1, "Duplicate preset binding id")
    );
    // After the first ends, the binding may be activated again.
    assert_eq!(
        active_ids(&[
            activate("e1", "user", snapshot("a1", bound("b1"))),
            deactivate("e2", "user", "a1"),
            activate("e3", "user", snapshot("a2", bound("b1"))),
        ]),
        ["a2"]
    );
}

fn policy(allow: &[&str], deny: &[&str], initial: Option<&[&str]>) -> Policy {
    Policy {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
        initial: initial.map(|i| i.iter().map(|s| s.to_string()).collect()),
    }
}

#[test]
fn v39_removal_wins_over_every_add() {
    let p = policy(&[], &["write"], None);
    let p1 = ToolPatch::new(["grep"], ["bash"]);
    let p2 = ToolPatch::new(["bash"], Vec::<String>::new());
    let registered = ["read", "bash", "edit", "write", "grep"];
    let baseline = ["read", "bash", "edit", "write"];
    assert_eq!(
        effective_tools(Some(&p), &registered, &baseline, &[&p1, &p2]),
        ["read", "edit", "grep"]
    );
    assert!(blocks_tool("bash", Some(&p), &[&p1, &p2]));
    assert!(blocks_tool("write", Some(&p), &[]));
    assert!(!blocks_tool("grep", Some(&p), &[&p1, &p2]));
}

#[test]
fn v40_initial_is_a_starting_set_not_a_ceiling() {
    let p = policy(
        &["read", "ls", "bash", "edit", "forge_capability"],
        &[],
        Some(&["read", "ls", "forge_capability"]),
    );
    let registered = ["read", "bash", "edit", "write", "ls", "forge_capability"];
    let baseline = ["read", "bash", "edit", "write"];
    assert_eq!(
        effective_tools(Some(&p), &registered, &baseline, &[]),
        ["read", "ls", "forge_capability"]
    );
    let add = ToolPatch::new(["bash", "edit"], Vec::<String>::new());
    assert_eq!(
        effective_tools(Some(&p), &registered, &baseline, &[&add]),
        ["read", "ls", "forge_capability", "bash", "edit"]
    );
    let none = policy(&[], &[], Some(&[]));
    assert!(effective_tools(Some(&none), &registered, &baseline, &[]).is_empty());
}

#[test]
fn v41_patch_validation_names_unregistered_and_blocked_tools() {
    let p = policy(&[], &["write"], None);
    let registered = ["read", "write"];
    let patch = ToolPatch::new(["write", "nosuch"], ["unregistered-is-fine"]);
    assert_eq!(
        patch_problems(&[&patch], Some(&p), &registered, "project:coder"),
        [
            "Tool write is blocked by prompt stack project:coder",
            "Tool nosuch is not registered"
        ]
    );
    let fine = ToolPatch::new(["read"], ["gone"]);
    assert!(patch_problems(&[&fine], Some(&p), &registered, "project:coder").is_empty());
}

#[test]
fn v42_a_selective_allow_picks_from_the_registry() {
    let registered = ["read", "paint_a", "bash"];
    let baseline = ["bash"];
    let allow = policy(&["read", "paint_*"], &[], None);
    assert_eq!(
        effective_tools(Some(&allow), &registered, &baseline, &[]),
        ["read", "paint_a"]
    );
    let deny = policy(&[], &["bash"], None);
    assert!(effective_tools(Some(&deny), &registered, &baseline, &[]).is_empty());
}

#[test]
fn v43_the_baseline_follows_changes_made_outside_pi_forge() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        reconcile_baseline(&s(&["a", "b"]), &s(&["a"]), &s(&["a", "c"])),
        s(&["a", "b", "c"])
    );
    assert_eq!(
        reconcile_baseline(&s(&["a", "b"]), &s(&["a"]), &s(&["c"])),
        s(&["b", "c"])
    );
}

const NAMES: [&str; 8] = [
    "read", "bash", "edit", "write", "grep", "ls", "paint_a", "paint_b",
];

fn names() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(NAMES.to_vec(), 0..=NAMES.len()).prop_shuffle()
}

fn a_policy() -> impl Strategy<Value = Option<Policy>> {
    let patterns = proptest::sample::subsequence(vec!["read", "bash", "paint_*", "*", "ls"], 0..=3);
    (0u8..4, patterns, proptest::option::of(names())).prop_map(|(kind, pats, initial)| {
        let pats: Vec<String> = pats.into_iter().map(str::to_string).collect();
        let initial = initial.map(|i| i.into_iter().map(str::to_string).collect());
        match kind {
            0 => None,
            1 => Some(Policy {
                allow: pats,
                deny: Vec::new(),
                initial,
            }),
            2 => Some(Policy {
                allow: Vec::new(),
                deny: pats,
                initial,
            }),
            _ => Some(Policy {
                allow: Vec::new(),
                deny: Vec::new(),
                initial,
            }),
        }
    })
}

proptest! {
    #[test]
    fn the_calculation_respects_the_ceiling_and_removals_and_is_order_stable(
        policy in a_policy(),
        registered in names(),
        baseline in names(),
        patches in proptest::collection::vec((names(), names()), 0..4),
    ) {
        let patches: Vec<ToolPatch> = patches.into_iter().map(|(a, r)| ToolPatch::new(a, r)).collect();
        let refs: Vec<&ToolPatch> = patches.iter().collect();
        let out = effective_tools(policy.as_ref(), &registered, &baseline, &refs);
        let again = effective_tools(policy.as_ref(), &registered, &baseline, &refs);
        prop_assert_eq!(&out, &again);
        let mut unique = out.clone();
        unique.dedup();
        prop_assert_eq!(unique.len(), out.len());
        for name in &out {
            prop_assert!(policy.as_ref().is_none_or(|p| p.permits(name)), "{} passed the ceiling", name);
            prop_assert!(!patches.iter().any(|p| p.remove.iter().any(|r| r == name)), "{} was removed", name);
            prop_assert!(registered.is_empty() || registered.contains(name));
        }
        // Order: the base's order, then adds in activation order.
        let mut candidates: Vec<&str> = match policy.as_ref().and_then(|p| p.initial.as_ref()) {
            Some(initial) => initial.iter().map(String::as_str).collect(),
            None if policy.as_ref().is_some_and(|p| p.is_effective() && p.is_selective_allow()) => registered.clone(),
            None => baseline.clone(),
        };
        for p in &patches {
            candidates.extend(p.add.iter().map(String::as_str));
        }
        let mut at = 0;
        for name in &out {
            match candidates[at..].iter().position(|c| c == name) {
                Some(i) => at += i + 1,
                None => prop_assert!(false, "{} is out of order in {:?} (candidates {:?})", name, out, candidates),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Delivery: the request-time projection and the branch record

mod delivery_projection {
    use super::*;
    use forge_core::capability::delivery::{
        insertion_index, project, projection_text, BranchRecord, USER_ATTRIBUTION,
    };
    use forge_core::capability::view::TextPresentation;
    use forge_core::session::SessionEntry;

    fn tool_only(activation: &str) -> Value {
        CapabilitySnapshot {
            activation_id: activation.to_string(),
            source: SnapshotSource::Manual,
            name: None,
            content: String::new(),
            tools: ToolPatch {
                add: vec!["grep".to_string()],
                remove: Vec::new(),
            },
        }
        .to_value()
    }

    #[test]
    fn the_projection_goes_before_the_newest_user_message_and_never_first() {
        assert_eq!(insertion_index(&["system", "user"]), 1);
        assert_eq!(
            insertion_index(&["system", "user", "assistant", "user", "assistant", "tool"]),
            3
        );
        assert_eq!(insertion_index(&["system", "assistant"]), 2);
        assert_eq!(insertion_index(&["user"]), 1);
        assert_eq!(insertion_index(&[]), 0);
    }

    #[test]
    fn text_in_activation_order_with_escaped_attributes_and_no_tool_only_blocks() {
        let named = CapabilitySnapshot {
            activation_id: "a2".to_string(),
            source: bound("rev"),
            name: Some("R&D \"review\"".to_string()),
            content: "Line <one>\nLine two".to_string(),
            tools: ToolPatch::default(),
        }
        .to_value();
        let events = vec![
            activate("e1", "user", manual("a1")),
            activate("e2", "user", named),
            activate("e3", "user", tool_only("a3")),
        ];
        let state = reduce(&events).unwrap();
        let native = projection_text(&state, TextPresentation::Native).unwrap();
        assert_eq!(
            native,
            "<pi-forge-capabilities>\n<capability source=\"manual\" activation=\"a1\">\nReview carefully.\n</capability>\n\n<capability source=\"project:review\" name=\"R&amp;D &quot;review&quot;\" activation=\"a2\">\nLine <one>\nLine two\n</capability>\n</pi-forge-capabilities>"
        );
        let user = projection_text(&state, TextPresentation::User).unwrap();
        assert_eq!(user, format!("{USER_ATTRIBUTION}\n{native}"));

        let (index, message) =
            project(&state, TextPresentation::Native, &["system", "user"], 5.0).unwrap();
        assert_eq!(index, 1);
        assert_eq!(
            message,
            json!({"role": "system", "content": native, "timestamp": 5.0})
        );
        let (_, message) =
            project(&state, TextPresentation::User, &["system", "user"], 5.0).unwrap();
        assert_eq!(
            message,
            json!({"role": "user", "content": [{"type": "text", "text": user}], "timestamp": 5.0})
        );
        // Only tool patches, or nothing active: nothing to project.
        let tools_only = reduce(&[activate("e9", "user", tool_only("a9"))]).unwrap();
        assert_eq!(projection_text(&tools_only, TextPresentation::User), None);
        let cleared = reduce(&[events.clone(), vec![reset("e4")]].concat()).unwrap();
        assert_eq!(
            project(&cleared, TextPresentation::Native, &["system"], 0.0),
            None
        );
    }

    #[test]
    fn the_branch_record_keeps_events_in_order_and_the_newest_readable_entries() {
        let entry = |custom_type: &str, data: Value| SessionEntry {
            custom_type: custom_type.to_string(),
            data,
        };
        let entries = vec![
            entry("pi-forge-capability-event", json!({"eventId": "e1"})),
            entry(
                "pi-forge-capability-tools",
                json!({"baseline": ["read"], "lastApplied": ["read", "grep"]}),
            ),
            entry("pi-forge-prompt-stack-state", json!({"activeStackId": "x"})),
            entry(
                "pi-forge-capability-delivery",
                json!({"schemaVersion": 1, "throughEventId": "e1"}),
            ),
            entry("pi-forge-capability-event", json!("broken")),
            entry("pi-forge-capability-tools", json!({"baseline": 3})),
            entry("pi-forge-capability-delivery", json!({"schemaVersion": 2})),
        ];
        let record = BranchRecord::from_entries(&entries);
        assert_eq!(
            record.events,
            vec![json!({"eventId": "e1"}), json!("broken")]
        );
        let tools = record.tools.unwrap();
        assert_eq!(tools.baseline, vec!["read".to_string()]);
        assert_eq!(
            tools.last_applied,
            vec!["read".to_string(), "grep".to_string()]
        );
        assert_eq!(record.anchor.unwrap().through_event_id, "e1");
    }
}
