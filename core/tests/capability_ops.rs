//! Runtime capability operations (spec B8), the agent tool `forge_capability`, the session view
//! and its guard (B10), with vectors 44–47 of §F and property tests over random operation
//! sequences.

use std::cell::Cell;

use forge_core::canonical::fingerprint;
use forge_core::capability::agent::{
    agent_choices, agent_status, decode_tool_call, run_tool_call, AgentReply, ToolCall,
};
use forge_core::capability::events::{reduce, Actor, CapabilityState};
use forge_core::capability::ops::{
    self, add, control_patch, enable, enable_bound, reset, switch_preset, sync_tools, ActivePreset,
    BindingError, Caller, DeliveryAnchor, OpError, Outcome, Plan, ResolvedBinding, Session, Stamp,
    ToolsEntry,
};
use forge_core::capability::snapshot::SnapshotSource;
use forge_core::capability::view::{
    apply_state_mutation, available_choices, build_view, choice_fingerprint, decode_enable_request,
    decode_state_mutation, enable_choice, preset_revision, revision_value, view_revision,
    ChoiceError, ChoiceKind, Delivery, EnableRequest, MutationError, StateMutation,
    TextPresentation, ViewGuard, ViewInput,
};
use forge_core::capability::ToolPatch;
use forge_core::id::{ResourceKey, Scope};
use forge_core::json::to_pretty;
use forge_core::stack::Policy;
use forge_core::workspace::{self, LoadOptions, MemStore, WorkspaceSnapshot};
use proptest::prelude::*;
use serde_json::{json, Value};

const CAPS: &str = ".pi/forge/capabilities";
const STACKS: &str = ".pi/forge/prompt-stacks";

fn capability(id: &str, content: &str, add: &[&str], remove: &[&str]) -> Value {
    json!({"schemaVersion": 1, "type": "pi-forge.capability", "id": id, "name": format!("{id} rules"),
           "content": content, "tools": {"add": add, "remove": remove}})
}

fn stack(id: &str, tools: Value, bindings: Value) -> Value {
    json!({"schemaVersion": 1, "type": "pi-forge.prompt-stack", "id": id, "tools": tools,
           "capabilities": bindings,
           "items": [{"kind": "block", "id": "b", "role": "system", "content": "hi"},
                     {"kind": "slot", "id": "h", "slot": "chat-history"}]})
}

fn library() -> WorkspaceSnapshot {
    let store = MemStore::new();
    let files = [
        (
            format!("{CAPS}/review.json"),
            capability("review", "Review carefully.", &["grep"], &["bash"]),
        ),
        (
            format!("{CAPS}/danger.json"),
            capability("danger", "No control.", &[], &["forge_capability"]),
        ),
        (
            format!("{CAPS}/writer.json"),
            capability("writer", "Write things.", &["write"], &[]),
        ),
        (
            format!("{CAPS}/plain.json"),
            capability("plain", "Plain words.", &[], &[]),
        ),
        (
            format!("{STACKS}/coder.json"),
            stack(
                "coder",
                json!({"deny": ["write"]}),
                json!([
                    {"ref": "review", "modelCallable": true},
                    {"ref": "review", "id": "human-review"},
                    {"ref": "danger", "modelCallable": true},
                    {"ref": "writer", "modelCallable": true},
                    {"ref": "plain", "modelCallable": true}
                ]),
            ),
        ),
        (
            format!("{STACKS}/other.json"),
            stack(
                "other",
                json!({"deny": ["grep"]}),
                json!([{"ref": "plain", "modelCallable": true}]),
            ),
        ),
    ];
    for (path, value) in &files {
        store.insert(Scope::Project, path, to_pretty(value));
    }
    workspace::load(
        &store,
        &LoadOptions {
            trusted: true,
            extra_slots: Vec::new(),
        },
    )
}

fn key(id: &str) -> ResourceKey {
    ResourceKey::new(Scope::Project, id)
}

fn preset(ws: &WorkspaceSnapshot, id: &str) -> ActivePreset {
    let entry = ws.stacks.iter().find(|s| s.key == key(id)).unwrap();
    ActivePreset::resolve(ws, entry).unwrap()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A live session: its events, tools and stored baseline; ids come from a counter.
struct World {
    ws: WorkspaceSnapshot,
    coder: ActivePreset,
    other: ActivePreset,
    preset: Option<ActivePreset>,
    trusted: bool,
    restoring: bool,
    registered: Vec<String>,
    current: Vec<String>,
    events: Vec<Value>,
    tools_entry: Option<ToolsEntry>,
    next: Cell<u32>,
}

impl World {
    fn new() -> World {
        let ws = library();
        let coder = preset(&ws, "coder");
        let other = preset(&ws, "other");
        World {
            ws,
            preset: Some(coder.clone()),
            coder,
            other,
            trusted: true,
            restoring: false,
            registered: names(&["read", "bash", "edit", "write", "grep", "forge_capability"]),
            current: names(&["read", "bash", "edit", "forge_capability"]),
            events: Vec::new(),
            tools_entry: None,
            next: Cell::new(0),
        }
    }

    fn session(&self) -> Session<'_> {
        Session {
            events: &self.events,
            trusted: self.trusted,
            restoring: self.restoring,
            preset: self.preset.as_ref(),
            registered: &self.registered,
            current_tools: &self.current,
            tools_entry: self.tools_entry.as_ref(),
        }
    }

    /// Runs an operation and persists its plan the way the host does (entry, events, tools).
    fn run(
        &mut self,
        op: impl FnOnce(&World, &Session, &mut Stamp) -> Result<Plan, OpError>,
    ) -> Result<Plan, OpError> {
        let result = {
            let next = &self.next;
            let mut ids = || {
                next.set(next.get() + 1);
                format!("id-{}", next.get())
            };
            let mut stamp = Stamp {
                created_at: 1000.0,
                next_id: &mut ids,
            };
            let session = self.session();
            op(self, &session, &mut stamp)
        };
        if let Ok(plan) = &result {
            if let Some(entry) = &plan.tools_entry {
                self.tools_entry = Some(entry.clone());
            }
            self.events.extend(plan.events.iter().cloned());
            self.current = plan.effective_tools.clone();
        }
        result
    }

    /// A read-only `forge_capability` call (list/status persist nothing).
    fn ask(&self, call: &ToolCall) -> Result<AgentReply, OpError> {
        let mut ids = || "unused".to_string();
        let mut stamp = Stamp {
            created_at: 0.0,
            next_id: &mut ids,
        };
        run_tool_call(&self.session(), call, &mut stamp)
    }

    fn state(&self) -> CapabilityState {
        reduce(&self.events).unwrap()
    }

    fn active_ids(&self) -> Vec<String> {
        self.state()
            .active
            .iter()
            .map(|a| a.snapshot.activation_id.clone())
            .collect()
    }
}

fn activated(plan: &Plan) -> (String, bool) {
    match &plan.outcome {
        Outcome::Activated {
            activation_id,
            idempotent,
        } => (activation_id.clone(), *idempotent),
        other => panic!("not an activation: {other:?}"),
    }
}

fn bound(w: &mut World, caller: Caller, binding: &str) -> Result<Plan, OpError> {
    let binding = binding.to_string();
    w.run(move |_, s, st| enable_bound(s, caller, &binding, st))
}

fn off(w: &mut World, caller: Caller, selector: &str) -> Result<Plan, OpError> {
    let selector = selector.to_string();
    w.run(move |_, s, st| ops::disable(s, caller, &selector, st))
}

// ---------------------------------------------------------------------------------------------
// enable-bound (vectors 44, 45)

#[test]
fn v44_agent_needs_model_callable_human_may_and_repeats_are_idempotent() {
    let mut w = World::new();
    let err = bound(&mut w, Caller::Agent, "human-review").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Capability binding human-review is not authorized for agent use."
    );
    assert!(w.events.is_empty());

    let plan = bound(&mut w, Caller::User, "human-review").unwrap();
    assert_eq!(activated(&plan), ("id-2".to_string(), false));
    assert_eq!(plan.events.len(), 1);

    let before = w.events.clone();
    let again = bound(&mut w, Caller::User, "human-review").unwrap();
    assert_eq!(activated(&again), ("id-2".to_string(), true));
    assert!(again.events.is_empty());
    assert_eq!(again.tools_entry, None);
    assert_eq!(w.events, before);
}

#[test]
fn v45_agent_cannot_enable_a_binding_that_removes_the_control_tool() {
    let mut w = World::new();
    let err = bound(&mut w, Caller::Agent, "danger").unwrap_err();
    assert_eq!(err, OpError::RemovesControl("danger".to_string()), "{err}");
    assert_eq!(
        err.to_string(),
        "Capability binding danger removes forge_capability; the agent cannot enable it."
    );
    // The user may.
    assert!(bound(&mut w, Caller::User, "danger").is_ok());
}

#[test]
fn an_agent_activation_persists_baseline_then_event_and_applies_the_tools() {
    let mut w = World::new();
    let plan = bound(&mut w, Caller::Agent, "review").unwrap();
    // Baseline first: the tools before pi-forge filtered them, and what will be applied.
    assert_eq!(
        plan.tools_entry,
        Some(ToolsEntry {
            baseline: names(&["read", "bash", "edit", "forge_capability"]),
            last_applied: names(&["read", "edit", "forge_capability", "grep"]),
        })
    );
    assert_eq!(
        plan.effective_tools,
        names(&["read", "edit", "forge_capability", "grep"])
    );
    let snapshot = json!({
        "activationId": "id-2",
        "source": {"kind": "capability", "key": {"scope": "project", "id": "review"},
                   "binding": {"preset": {"scope": "project", "id": "coder"}, "id": "review"}},
        "name": "review rules",
        "content": "Review carefully.",
        "tools": {"add": ["grep"], "remove": ["bash"]},
    });
    let fp = fingerprint(&json!({
        "type": "pi-forge.capability-snapshot", "schemaVersion": 1,
        "source": snapshot["source"], "name": "review rules", "content": "Review carefully.",
        "tools": snapshot["tools"],
    }));
    let mut stored = snapshot.clone();
    stored["fingerprint"] = json!(fp);
    assert_eq!(
        plan.events,
        vec![
            json!({"schemaVersion": 1, "eventId": "id-1", "op": "activate", "actor": "agent",
                    "createdAt": 1000, "snapshot": stored})
        ]
    );
    assert_eq!(plan.state.active.len(), 1);
    assert_eq!(plan.state.active[0].actor, Actor::Agent);
    assert_eq!(plan.state.last_event_id.as_deref(), Some("id-1"));
    assert_eq!(plan.state, w.state());
}

#[test]
fn enable_bound_refuses_unknown_bindings_stale_identities_and_blocked_tools() {
    let mut w = World::new();
    let err = bound(&mut w, Caller::User, "nope").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Preset project:coder has no capability binding nope."
    );
    let err = bound(&mut w, Caller::User, "writer").unwrap_err();
    assert_eq!(
        err,
        OpError::ToolPatch(vec![
            "Tool write is blocked by prompt stack project:coder".to_string()
        ])
    );
    assert!(w.events.is_empty());

    // Same preset + binding id, another ref: stale identity.
    bound(&mut w, Caller::User, "review").unwrap();
    let mut changed = w.coder.clone();
    changed.bindings[0].reference = ResourceKey::new(Scope::Global, "review");
    w.preset = Some(changed);
    let err = bound(&mut w, Caller::User, "review").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Capability binding review: stale binding identity; disable the old activation"
    );
    // An agent re-enabling a user's activation gets the existing id, never the ownership.
    w.preset = Some(w.coder.clone());
    // (the refused `writer` activation used ids 1 and 2; nothing of it was persisted)
    let again = bound(&mut w, Caller::Agent, "review").unwrap();
    assert_eq!(activated(&again), ("id-4".to_string(), true));
    assert_eq!(w.state().active[0].actor, Actor::User);
}

#[test]
fn an_unregistered_add_is_refused() {
    let mut w = World::new();
    w.registered.retain(|t| t != "grep");
    let err = bound(&mut w, Caller::User, "review").unwrap_err();
    assert_eq!(err.to_string(), "Tool grep is not registered");
}

#[test]
fn agent_calls_recheck_trust_preset_and_the_control_tool() {
    let mut w = World::new();
    w.trusted = false;
    assert_eq!(
        bound(&mut w, Caller::Agent, "review").unwrap_err(),
        OpError::Untrusted
    );
    assert_eq!(
        bound(&mut w, Caller::User, "review").unwrap_err().to_string(),
        "Capabilities require a trusted project; /capability disable and /capability reset stay available."
    );
    w.trusted = true;
    w.preset = None;
    assert_eq!(
        bound(&mut w, Caller::Agent, "review").unwrap_err(),
        OpError::NoActivePreset
    );
    w.preset = Some(w.coder.clone());
    w.current.retain(|t| t != "forge_capability");
    assert_eq!(
        bound(&mut w, Caller::Agent, "review")
            .unwrap_err()
            .to_string(),
        "forge_capability is unavailable: it is not active."
    );
    w.registered.retain(|t| t != "forge_capability");
    assert_eq!(
        bound(&mut w, Caller::Agent, "review").unwrap_err(),
        OpError::ControlUnavailable("not registered")
    );
    // A user capability removing the control tool blocks the agent.
    let mut w = World::new();
    bound(&mut w, Caller::User, "danger").unwrap();
    w.current.push("forge_capability".to_string());
    assert_eq!(
        bound(&mut w, Caller::Agent, "review").unwrap_err(),
        OpError::ControlUnavailable("blocked")
    );
}

// ---------------------------------------------------------------------------------------------
// add, enable

#[test]
fn add_makes_a_manual_user_snapshot() {
    let mut w = World::new();
    let plan = w.run(|_, s, st| add(s, "Be brief.", st)).unwrap();
    let event = &plan.events[0];
    assert_eq!(event["actor"], "user");
    assert_eq!(event["snapshot"]["source"], json!({"kind": "manual"}));
    assert_eq!(event["snapshot"]["tools"], json!({"add": [], "remove": []}));
    assert_eq!(event["snapshot"]["content"], "Be brief.");
    let err = w.run(|_, s, st| add(s, "  ", st)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Invalid capability: Capability needs non-whitespace content or at least one tool in tools.add or tools.remove."
    );
    w.trusted = false;
    assert_eq!(
        w.run(|_, s, st| add(s, "x", st)).unwrap_err(),
        OpError::Untrusted
    );
    assert_eq!(w.events.len(), 1);
}

#[test]
fn enable_resolves_the_library_and_a_second_enable_is_a_message() {
    let mut w = World::new();
    let plan = w.run(|w, s, st| enable(s, &w.ws, "plain", st)).unwrap();
    assert_eq!(
        plan.events[0]["snapshot"]["source"],
        json!({"kind": "capability", "key": {"scope": "project", "id": "plain"}})
    );
    let again = w
        .run(|w, s, st| enable(s, &w.ws, "project:plain", st))
        .unwrap();
    assert_eq!(
        again.outcome,
        Outcome::Unchanged {
            message: "Capability project:plain is already selected; disable/enable to reapply."
                .to_string()
        }
    );
    assert!(again.events.is_empty() && again.tools_entry.is_none());
    // A bound activation of the same capability does not count as "selected".
    bound(&mut w, Caller::User, "review").unwrap();
    assert!(!w
        .run(|w, s, st| enable(s, &w.ws, "review", st))
        .unwrap()
        .events
        .is_empty());
    let err = w
        .run(|w, s, st| enable(s, &w.ws, "global:review", st))
        .unwrap_err();
    assert_eq!(err.to_string(), "Capability not found: global:review.");
    // Without a Preset, patches are still validated against the registry.
    w.preset = None;
    w.registered.retain(|t| t != "write");
    let err = w
        .run(|w, s, st| enable(s, &w.ws, "writer", st))
        .unwrap_err();
    assert_eq!(err.to_string(), "Tool write is not registered");
}

// ---------------------------------------------------------------------------------------------
// disable, reset

#[test]
fn disable_matches_activation_id_label_key_id_or_binding_id() {
    for selector in ["id-2", "project:review", "review"] {
        let mut w = World::new();
        bound(&mut w, Caller::User, "review").unwrap();
        let plan = off(&mut w, Caller::User, selector).unwrap();
        assert_eq!(
            plan.outcome,
            Outcome::Deactivated {
                activation_id: "id-2".to_string()
            }
        );
        assert_eq!(plan.events[0]["op"], "deactivate");
        assert_eq!(plan.events[0]["activationId"], "id-2");
        assert!(w.active_ids().is_empty());
    }
    let mut w = World::new();
    bound(&mut w, Caller::User, "human-review").unwrap();
    assert!(off(&mut w, Caller::User, "human-review").is_ok());
    let mut w = World::new();
    w.run(|_, s, st| add(s, "x", st)).unwrap();
    assert!(off(&mut w, Caller::User, "manual").is_ok());
}

#[test]
fn disable_without_match_is_a_user_message_but_an_agent_error_and_ambiguity_fails() {
    let mut w = World::new();
    let plan = off(&mut w, Caller::User, "ghost").unwrap();
    assert_eq!(
        plan.outcome,
        Outcome::Unchanged {
            message: "No matching active capability: ghost".to_string()
        }
    );
    assert_eq!(
        off(&mut w, Caller::Agent, "ghost").unwrap_err().to_string(),
        "No matching active capability: ghost"
    );
    bound(&mut w, Caller::User, "review").unwrap();
    bound(&mut w, Caller::User, "human-review").unwrap();
    let err = off(&mut w, Caller::User, "project:review").unwrap_err();
    assert_eq!(
        err.to_string(),
        "project:review matches 2 active capabilities (id-2, id-4); use an activation id."
    );
    assert_eq!(w.active_ids(), names(&["id-2", "id-4"]));
}

#[test]
fn the_agent_may_only_stop_its_own_still_callable_bindings() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "plain").unwrap(); // id-2, user-owned
    assert_eq!(
        off(&mut w, Caller::Agent, "plain").unwrap_err().to_string(),
        "The agent cannot disable id-2: it did not enable it through a Preset binding."
    );
    w.run(|_, s, st| add(s, "mine", st)).unwrap(); // id-4 manual
    assert_eq!(
        off(&mut w, Caller::Agent, "id-4").unwrap_err(),
        OpError::NotAgentOwned("id-4".to_string())
    );
    bound(&mut w, Caller::Agent, "review").unwrap(); // id-6
                                                     // Authorization revoked: the activation stays, the agent may no longer stop it.
    let mut revoked = w.coder.clone();
    revoked.bindings[0].model_callable = false;
    w.preset = Some(revoked);
    assert_eq!(
        off(&mut w, Caller::Agent, "id-6").unwrap_err().to_string(),
        "The agent cannot disable id-6: binding review is no longer model-callable in the active Preset."
    );
    w.preset = Some(w.coder.clone());
    let plan = off(&mut w, Caller::Agent, "id-6").unwrap();
    assert_eq!(plan.events[0]["actor"], "agent");
    assert_eq!(w.active_ids(), names(&["id-2", "id-4"]));
}

#[test]
fn user_disable_and_reset_work_in_an_untrusted_project() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "review").unwrap();
    w.run(|_, s, st| add(s, "x", st)).unwrap();
    w.trusted = false;
    assert!(off(&mut w, Caller::User, "id-2").is_ok());
    let plan = w.run(|_, s, st| reset(s, st)).unwrap();
    assert_eq!(
        plan.outcome,
        Outcome::Reset {
            cleared: names(&["id-4"])
        }
    );
    assert_eq!(plan.events[0]["op"], "reset");
    assert!(w.active_ids().is_empty());
    let nothing = w.run(|_, s, st| reset(s, st)).unwrap();
    assert_eq!(
        nothing.outcome,
        Outcome::Unchanged {
            message: "No capabilities are active.".to_string()
        }
    );
    assert!(nothing.events.is_empty());
}

#[test]
fn disabling_the_last_patch_without_a_selection_policy_restores_the_baseline() {
    let mut w = World::new();
    let mut plain = w.coder.clone();
    plain.policy = None;
    // No model-callable binding, so the control tool's offer is not in force either.
    for binding in &mut plain.bindings {
        binding.model_callable = false;
    }
    w.preset = Some(plain);
    let on = bound(&mut w, Caller::User, "review").unwrap();
    assert_eq!(
        on.effective_tools,
        names(&["read", "edit", "forge_capability", "grep"])
    );
    // Someone outside pi-forge activates `write` meanwhile: the baseline keeps it.
    w.current.push("write".to_string());
    let plan = off(&mut w, Caller::User, "review").unwrap();
    assert_eq!(plan.tools_entry, None);
    assert_eq!(
        plan.effective_tools,
        names(&["read", "bash", "edit", "forge_capability", "write"])
    );
}

#[test]
fn a_model_callable_binding_offers_the_control_tool_under_the_ceiling() {
    let mut w = World::new();
    let mut plain = w.coder.clone();
    plain.policy = None;
    w.preset = Some(plain.clone());
    w.current.retain(|t| t != "forge_capability");
    let plan = w.run(|_, s, st| reset(s, st)).unwrap();
    assert_eq!(
        plan.effective_tools,
        names(&["read", "bash", "edit", "forge_capability"])
    );
    assert_eq!(
        plan.tools_entry, None,
        "a no-op persists nothing, even when the offer changes the tools"
    );
    assert_eq!(
        control_patch(Some(&plain)),
        Some(ToolPatch {
            add: names(&["forge_capability"]),
            remove: Vec::new()
        })
    );
    for binding in &mut plain.bindings {
        binding.model_callable = false;
    }
    assert_eq!(control_patch(Some(&plain)), None);
    assert_eq!(control_patch(None), None);
}

// ---------------------------------------------------------------------------------------------
// Preset switch

#[test]
fn a_preset_switch_ends_bound_items_of_the_old_preset_only() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "plain").unwrap(); // id-2 bound to coder
    w.run(|_, s, st| add(s, "manual", st)).unwrap(); // id-4
    w.run(|w, s, st| enable(s, &w.ws, "plain", st)).unwrap(); // id-6 unbound
    let same = w
        .run(|w, s, st| switch_preset(s, Some(&w.coder), st))
        .unwrap();
    assert_eq!(
        same.outcome,
        Outcome::Switched {
            deactivated: vec![]
        }
    );
    assert!(same.events.is_empty());
    let plan = w
        .run(|w, s, st| switch_preset(s, Some(&w.other), st))
        .unwrap();
    assert_eq!(
        plan.outcome,
        Outcome::Switched {
            deactivated: names(&["id-2"])
        }
    );
    assert_eq!(
        plan.events,
        vec![
            json!({"schemaVersion": 1, "eventId": "id-7", "op": "deactivate",
                    "actor": "lifecycle", "createdAt": 1000, "activationId": "id-2"})
        ]
    );
    assert_eq!(w.active_ids(), names(&["id-4", "id-6"]));
}

#[test]
fn a_preset_switch_that_would_block_a_surviving_patch_changes_nothing() {
    let mut w = World::new();
    w.run(|w, s, st| enable(s, &w.ws, "review", st)).unwrap(); // unbound, adds grep
    let before = (w.events.clone(), w.tools_entry.clone(), w.current.clone());
    let err = w
        .run(|w, s, st| switch_preset(s, Some(&w.other), st))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Preset switch rejected: Tool grep is blocked by prompt stack project:other"
    );
    assert_eq!(
        (w.events.clone(), w.tools_entry.clone(), w.current.clone()),
        before
    );
    // Turning Presets off keeps unbound items and ends bound ones.
    bound(&mut w, Caller::User, "plain").unwrap();
    let plan = w.run(|_, s, st| switch_preset(s, None, st)).unwrap();
    assert_eq!(
        plan.outcome,
        Outcome::Switched {
            deactivated: names(&["id-4"])
        }
    );
}

#[test]
fn a_broken_history_fails_closed() {
    let mut w = World::new();
    w.events
        .push(json!({"schemaVersion": 1, "eventId": "e1", "op": "reset", "actor": "agent", "createdAt": 1}));
    let err = off(&mut w, Caller::User, "x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "The capability history of this branch is invalid: Capability event 0: Only the user can reset capabilities."
    );
}

#[test]
fn a_reused_id_from_the_stamp_is_refused_by_the_prospective_reduce() {
    let mut w = World::new();
    w.run(|_, s, st| add(s, "x", st)).unwrap(); // event id-1, activation id-2
    w.next.set(0); // the id source repeats itself
    let err = w.run(|_, s, st| add(s, "y", st)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Event id id-1 is already used in this branch."
    );
    // A fresh event id with a used activation id: the prospective replay refuses it.
    w.next.set(1);
    let mut n = 0;
    let err = {
        let mut ids = || {
            n += 1;
            if n == 1 {
                "fresh".to_string()
            } else {
                "id-2".to_string()
            }
        };
        let mut stamp = Stamp {
            created_at: 5.0,
            next_id: &mut ids,
        };
        add(&w.session(), "z", &mut stamp).unwrap_err()
    };
    assert_eq!(
        err.to_string(),
        "The change would break the capability history: Capability event 1: Activation id id-2 was already used in this branch"
    );
    // An identical deactivation under a reused event id would be skipped: refused as well.
    off(&mut w, Caller::User, "id-2").unwrap(); // event id-2
    w.run(|_, s, st| add(s, "again", st)).unwrap(); // id-3, id-4
    w.next.set(1);
    let err = off(&mut w, Caller::User, "id-4").unwrap_err();
    assert_eq!(err, OpError::EventIdReused("id-2".to_string()));
    assert_eq!(w.events.len(), 3);
}

#[test]
fn bindings_that_do_not_resolve_report_their_index() {
    let ws = library();
    let mut entry = ws
        .stacks
        .iter()
        .find(|s| s.key == key("coder"))
        .unwrap()
        .clone();
    entry.parsed.stack.capabilities =
        Some(vec![json!({"ref": "plain"}), json!({"ref": "missing"})]);
    assert_eq!(
        ActivePreset::resolve(&ws, &entry).unwrap_err(),
        BindingError {
            index: 1,
            error: "Capability not found: project:missing.".to_string()
        }
    );
    entry.parsed.stack.capabilities = Some(vec![json!({"ref": "plain"}), json!({"ref": "plain"})]);
    assert_eq!(
        ActivePreset::resolve(&ws, &entry).unwrap_err(),
        BindingError {
            index: 1,
            error: "Duplicate binding id \"plain\" at index 1".to_string()
        }
    );
    let coder = preset(&ws, "coder");
    assert_eq!(
        coder.binding("human-review"),
        Some(&ResolvedBinding {
            id: "human-review".to_string(),
            reference: key("review"),
            model_callable: false,
            capability: coder.bindings[0].capability.clone(),
        })
    );
}

#[test]
fn sync_without_policy_or_patches_forgets_and_with_them_remembers() {
    let current = names(&["a", "b"]);
    let registered = names(&["a", "b", "c"]);
    let none = sync_tools(None, &registered, &current, None, &[]);
    assert_eq!(
        (none.effective.clone(), none.entry),
        (current.clone(), None)
    );
    let patch = ToolPatch::new(["c"], ["a"]);
    let some = sync_tools(None, &registered, &current, None, &[&patch]);
    assert_eq!(some.effective, names(&["b", "c"]));
    let entry = some.entry.unwrap();
    assert_eq!(
        entry.to_value(),
        json!({"baseline": ["a", "b"], "lastApplied": ["b", "c"]})
    );
    // Unchanged entry → nothing to persist.
    let again = sync_tools(
        None,
        &registered,
        &names(&["b", "c"]),
        Some(&entry),
        &[&patch],
    );
    assert_eq!(again.entry, None);
    let initial = Policy {
        initial: Some(names(&["a"])),
        ..Policy::default()
    };
    let with_initial = sync_tools(Some(&initial), &registered, &current, None, &[]);
    assert_eq!(with_initial.effective, names(&["a"]));
    assert!(with_initial.entry.is_some());
}

#[test]
fn session_entries_round_trip_with_exact_keys() {
    let entry = ToolsEntry::from_value(&json!({"baseline": ["a"], "lastApplied": []})).unwrap();
    assert_eq!(entry.baseline, names(&["a"]));
    assert!(ToolsEntry::from_value(&json!({"baseline": [], "lastApplied": [], "x": 1})).is_err());
    assert!(ToolsEntry::from_value(&json!({"baseline": []})).is_err());
    let anchor = DeliveryAnchor::new("e7");
    assert_eq!(
        anchor.to_value(),
        json!({"schemaVersion": 1, "throughEventId": "e7"})
    );
    assert_eq!(
        DeliveryAnchor::from_value(&anchor.to_value()).unwrap(),
        anchor
    );
    assert!(
        DeliveryAnchor::from_value(&json!({"schemaVersion": 2, "throughEventId": "e"})).is_err()
    );
    assert!(DeliveryAnchor::from_value(
        &json!({"schemaVersion": 1, "throughEventId": "e", "k": 1})
    )
    .is_err());
}

// ---------------------------------------------------------------------------------------------
// forge_capability

#[test]
fn tool_arguments_have_a_fixed_schema() {
    assert_eq!(
        decode_tool_call(&json!({"action": "list"})),
        Ok(ToolCall::List)
    );
    assert_eq!(
        decode_tool_call(&json!({"action": "status"})),
        Ok(ToolCall::Status)
    );
    assert_eq!(
        decode_tool_call(&json!({"action": "enable", "id": "review"})),
        Ok(ToolCall::Enable("review".to_string()))
    );
    assert_eq!(
        decode_tool_call(&json!({"action": "disable", "id": "x".repeat(128)})),
        Ok(ToolCall::Disable("x".repeat(128)))
    );
    let cases = [
        (
            json!("list"),
            "forge_capability arguments must be an object, got string.",
        ),
        (
            json!({"action": "list", "force": true}),
            "Unknown argument force: forge_capability takes only action and id.",
        ),
        (
            json!({}),
            "action must be one of list, status, enable, disable.",
        ),
        (
            json!({"action": "reset"}),
            "action must be one of list, status, enable, disable.",
        ),
        (
            json!({"action": "list", "id": "a"}),
            "id is not allowed for action list.",
        ),
        (
            json!({"action": "status", "id": null}),
            "id is not allowed for action status.",
        ),
        (
            json!({"action": "enable"}),
            "id is required for action enable.",
        ),
        (
            json!({"action": "disable", "id": ""}),
            "id must be a non-empty string of at most 128 characters.",
        ),
        (
            json!({"action": "disable", "id": "x".repeat(129)}),
            "id must be a non-empty string of at most 128 characters.",
        ),
        (
            json!({"action": "enable", "id": 7}),
            "id must be a non-empty string of at most 128 characters.",
        ),
    ];
    for (args, message) in cases {
        assert_eq!(decode_tool_call(&args), Err(message.to_string()), "{args}");
    }
}

#[test]
fn list_shows_only_what_the_agent_may_enable_and_no_rule_bodies() {
    let mut w = World::new();
    bound(&mut w, Caller::Agent, "plain").unwrap();
    let choices = agent_choices(&w.coder, &w.state(), &w.registered);
    let ids: Vec<&str> = choices.iter().map(|c| c.id.as_str()).collect();
    // human-review: not model-callable; danger: removes the control tool; writer: blocked.
    assert_eq!(ids, ["review", "plain"]);
    assert_eq!(
        serde_json::to_value(&choices[1]).unwrap(),
        json!({"id": "plain", "ref": "project:plain", "name": "plain rules",
               "tools": {"add": [], "remove": []}, "activationId": "id-2"})
    );
    let status = agent_status(&w.state());
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        json!([{"activationId": "id-2", "source": "project:plain", "binding": "plain",
                "name": "plain rules", "actor": "agent", "tools": {"add": [], "remove": []}}])
    );
    assert_eq!(w.ask(&ToolCall::Status), Ok(AgentReply::Status(status)));
    assert_eq!(w.ask(&ToolCall::List), Ok(AgentReply::List(choices)));
    w.trusted = false;
    assert_eq!(w.ask(&ToolCall::List), Err(OpError::Untrusted));
    assert_eq!(w.ask(&ToolCall::Status), Err(OpError::Untrusted));
}

#[test]
fn the_agent_tool_enables_and_disables_through_the_operations() {
    let mut w = World::new();
    let plan = w
        .run(
            |_, s, st| match run_tool_call(s, &ToolCall::Enable("review".into()), st)? {
                AgentReply::Changed(plan) => Ok(plan),
                other => panic!("{other:?}"),
            },
        )
        .unwrap();
    assert_eq!(plan.events[0]["actor"], "agent");
    let plan = w
        .run(
            |_, s, st| match run_tool_call(s, &ToolCall::Disable("review".into()), st)? {
                AgentReply::Changed(plan) => Ok(plan),
                other => panic!("{other:?}"),
            },
        )
        .unwrap();
    assert_eq!(plan.events[0]["op"], "deactivate");
    assert!(w.active_ids().is_empty());
}

// ---------------------------------------------------------------------------------------------
// The view and its guard (B10, vectors 46, 47)

fn view_input<'a>(
    w: &'a World,
    state: &'a CapabilityState,
    stack: &'a forge_core::stack::PromptStack,
) -> ViewInput<'a> {
    ViewInput {
        instance_id: "inst-1",
        lifecycle_revision: 3,
        session_id: "s1",
        leaf_id: None,
        state,
        effective_tools: &w.current,
        trusted: true,
        restoring: false,
        model: Some(("anthropic", "claude")),
        delivery: Delivery::Pending,
        text_presentation: TextPresentation::Native,
        preset: Some((&w.coder.key, stack)),
        baseline: w.tools_entry.as_ref().map(|e| e.baseline.as_slice()),
    }
}

#[test]
fn the_view_has_the_spec_shape_and_a_revision_over_the_spec_fields() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "plain").unwrap();
    let state = w.state();
    let stack = &w
        .ws
        .stacks
        .iter()
        .find(|s| s.key == key("coder"))
        .unwrap()
        .parsed
        .stack;
    let input = view_input(&w, &state, stack);
    let view = build_view(&input);
    let value = serde_json::to_value(&view).unwrap();
    let revision = view_revision(&input);
    assert!(revision.starts_with("sha256:v1:"));
    assert_eq!(
        value,
        json!({
            "guard": {"sessionId": "s1", "leafId": null, "revision": revision},
            "presetRevision": preset_revision(&w.coder.key, stack),
            "trusted": true, "restoring": false, "delivery": "pending",
            "textPresentation": "native",
            "effectiveTools": ["read", "bash", "edit", "forge_capability"],
            "active": [{"activationId": "id-2", "source": "project:plain", "name": "plain rules",
                        "actor": "user", "content": "Plain words.",
                        "tools": {"add": [], "remove": []}}]
        })
    );
    let expected = json!({
        "domain": "forge-capability-view-v1", "instanceId": "inst-1", "lifecycleRevision": 3,
        "sessionId": "s1", "leafId": null, "lastEventId": "id-1",
        "active": [{"actor": "user", "snapshot": state.active[0].snapshot.to_value()}],
        "effectiveTools": ["read", "bash", "edit", "forge_capability"],
        "trusted": true, "restoring": false, "model": {"provider": "anthropic", "id": "claude"},
        "delivery": "pending",
        "preset": {"key": "project:coder", "tools": {"deny": ["write"]},
                   "capabilities": stack.capabilities.clone().unwrap()},
        "baseline": ["read", "bash", "edit", "forge_capability"],
    });
    assert_eq!(revision_value(&input), expected);
    assert_eq!(revision, fingerprint(&expected));
    assert_eq!(
        preset_revision(&w.coder.key, stack),
        fingerprint(
            &json!({"domain": "forge-inspection-preset-v1", "key": "project:coder",
                            "stack": stack.to_value()})
        )
    );
    // Every guarded fact moves the revision.
    let variants = [
        ViewInput {
            leaf_id: Some("leaf"),
            ..input
        },
        ViewInput {
            trusted: false,
            ..input
        },
        ViewInput {
            restoring: true,
            ..input
        },
        ViewInput {
            delivery: Delivery::Prepared,
            ..input
        },
        ViewInput {
            lifecycle_revision: 4,
            ..input
        },
        ViewInput {
            instance_id: "inst-2",
            ..input
        },
        ViewInput {
            model: None,
            ..input
        },
        ViewInput {
            preset: None,
            ..input
        },
        ViewInput {
            effective_tools: &[],
            ..input
        },
    ];
    for variant in variants {
        assert_ne!(view_revision(&variant), revision);
    }
    let empty = CapabilityState::default();
    assert_ne!(
        view_revision(&ViewInput {
            state: &empty,
            ..input
        }),
        revision
    );
}

fn guard() -> Value {
    json!({"sessionId": "s1", "leafId": null, "revision": "sha256:v1:00"})
}

#[test]
fn v46_v47_session_request_bodies_are_exact() {
    assert_eq!(
        decode_state_mutation(
            &json!({"action": "disable", "activationId": "nope", "guard": guard()})
        ),
        Ok(StateMutation::Disable {
            activation_id: "nope".to_string(),
            guard: ViewGuard {
                session_id: "s1".to_string(),
                leaf_id: None,
                revision: "sha256:v1:00".to_string()
            }
        })
    );
    assert!(matches!(
        decode_state_mutation(&json!({"action": "reset", "guard": guard()})),
        Ok(StateMutation::Reset { .. })
    ));
    let bad = [
        json!({"action": "reset", "guard": guard(), "x": 1}),
        json!({"action": "reset"}),
        json!({"action": "disable", "guard": guard()}),
        json!({"action": "disable", "activationId": "a".repeat(129), "guard": guard()}),
        json!({"action": "purge", "guard": guard()}),
        json!({"action": "reset", "guard": {"sessionId": "s", "revision": "r"}}),
        json!({"action": "reset", "guard": {"sessionId": "s\n", "leafId": null, "revision": "r"}}),
        json!({"action": "reset", "guard": {"sessionId": "s", "leafId": "l", "revision": "r".repeat(257)}}),
        json!({"action": "reset", "guard": {"sessionId": "s".repeat(1025), "leafId": null, "revision": "r"}}),
    ];
    for body in bad {
        assert!(decode_state_mutation(&body).is_err(), "{body}");
    }
    let ok = json!({"guard": guard(), "kind": "capability", "id": "review", "fingerprint": "sha256:v1:ab"});
    let request = decode_enable_request(&ok).unwrap();
    assert_eq!(
        (request.kind, request.id.as_str()),
        (ChoiceKind::Capability, "review")
    );
    let mut extra = ok.clone();
    extra["more"] = json!(1);
    let mut unknown = ok.clone();
    unknown["kind"] = json!("unknown");
    let mut empty = ok.clone();
    empty["fingerprint"] = json!("");
    assert_eq!(
        decode_enable_request(&extra).unwrap_err(),
        "Unsupported key more."
    );
    assert_eq!(
        decode_enable_request(&unknown).unwrap_err(),
        "kind must be \"capability\" or \"binding\"."
    );
    assert_eq!(
        decode_enable_request(&empty).unwrap_err(),
        "fingerprint must be a non-empty string of at most 256 characters."
    );
}

#[test]
fn every_mutation_fails_closed_while_restoring() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "plain").unwrap();
    w.restoring = true;
    let results = [
        w.run(|_, s, st| add(s, "x", st)),
        w.run(|w, s, st| enable(s, &w.ws, "review", st)),
        bound(&mut w, Caller::User, "review"),
        bound(&mut w, Caller::Agent, "review"),
        off(&mut w, Caller::User, "plain"),
        w.run(|_, s, st| reset(s, st)),
        w.run(|w, s, st| switch_preset(s, Some(&w.other), st)),
    ];
    for result in results {
        assert_eq!(result.unwrap_err(), OpError::Restoring);
    }
    assert_eq!(
        OpError::Restoring.to_string(),
        "Capabilities are being restored; try again when the session is ready."
    );
    assert_eq!(w.events.len(), 1);
}

#[test]
fn tool_sync_in_an_untrusted_project_refuses_while_capabilities_are_active() {
    let mut w = World::new();
    assert_eq!(ops::check_sync_trust(false, &w.state()), Ok(()));
    bound(&mut w, Caller::User, "plain").unwrap();
    assert_eq!(ops::check_sync_trust(true, &w.state()), Ok(()));
    let err = ops::check_sync_trust(false, &w.state()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Active capabilities require a trusted project; trust it, or remove them with /capability disable or /capability reset."
    );
}

#[test]
fn saving_the_active_preset_prevalidates_active_patches() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "review").unwrap(); // adds grep
    let mut saved = w.coder.clone();
    assert_eq!(ops::check_active_preset_save(&w.session(), &saved), Ok(()));
    saved.policy = Some(Policy {
        deny: names(&["grep"]),
        ..Policy::default()
    });
    let err = ops::check_active_preset_save(&w.session(), &saved).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Saving the active Preset would break active capabilities: Tool grep is blocked by prompt stack project:coder"
    );
}

#[test]
fn delivery_follows_the_anchor_cursor() {
    let mut w = World::new();
    assert_eq!(
        ops::delivery_status(&w.state(), None, false),
        Delivery::None
    );
    bound(&mut w, Caller::User, "plain").unwrap(); // event id-1
    let state = w.state();
    assert_eq!(ops::delivery_status(&state, None, false), Delivery::Pending);
    assert_eq!(ops::delivery_status(&state, None, true), Delivery::Prepared);
    let anchor = DeliveryAnchor::new("id-1");
    assert_eq!(
        ops::delivery_status(&state, Some(&anchor), true),
        Delivery::None
    );
    let old = DeliveryAnchor::new("id-0");
    assert_eq!(
        ops::delivery_status(&state, Some(&old), false),
        Delivery::Pending
    );
}

// ---------------------------------------------------------------------------------------------
// The picker (B10 available / enable, vector 46)

fn request(kind: ChoiceKind, id: &str, fingerprint: &str) -> EnableRequest {
    EnableRequest {
        guard: ViewGuard {
            session_id: "s1".to_string(),
            leaf_id: None,
            revision: "r".to_string(),
        },
        kind,
        id: id.to_string(),
        fingerprint: fingerprint.to_string(),
    }
}

/// Runs a picker activation like the host: the plan is persisted only on success.
fn pick(w: &mut World, request: &EnableRequest) -> Result<(), ChoiceError> {
    let mut refused = None;
    let _ = w.run(|w, s, st| {
        enable_choice(s, &w.ws, request, st).map_err(|e| {
            refused = Some(e);
            OpError::NoActivePreset // any error: nothing is persisted
        })
    });
    refused.map_or(Ok(()), Err)
}

#[test]
fn the_picker_lists_library_capabilities_and_every_binding_with_problems() {
    let w = World::new();
    let choices = available_choices(&w.ws, Some(&w.coder), &w.registered);
    let ids: Vec<(ChoiceKind, &str)> = choices.iter().map(|c| (c.kind, c.id.as_str())).collect();
    assert_eq!(
        ids,
        [
            (ChoiceKind::Capability, "project:danger"),
            (ChoiceKind::Capability, "project:plain"),
            (ChoiceKind::Capability, "project:review"),
            (ChoiceKind::Capability, "project:writer"),
            (ChoiceKind::Binding, "review"),
            (ChoiceKind::Binding, "human-review"),
            (ChoiceKind::Binding, "danger"),
            (ChoiceKind::Binding, "writer"),
            (ChoiceKind::Binding, "plain"),
        ]
    );
    let writer = &choices[3];
    assert_eq!(
        serde_json::to_value(writer).unwrap(),
        json!({"kind": "capability", "id": "project:writer", "label": "writer rules",
               "content": "Write things.", "tools": {"add": ["write"], "remove": []},
               "fingerprint": choice_fingerprint(
                   SnapshotSource::Capability { key: key("writer"), binding: None },
                   &w.ws.capabilities.iter().find(|c| c.key == key("writer")).unwrap().parsed.capability),
               "problem": "Tool write is blocked by prompt stack project:coder"})
    );
    // A binding's fingerprint includes the binding in its source: it differs from the library's.
    assert_ne!(choices[4].fingerprint, choices[2].fingerprint);
    // The fingerprint is the one the activation's snapshot carries.
    let mut w = World::new();
    let plan = bound(&mut w, Caller::User, "review").unwrap();
    assert_eq!(
        plan.events[0]["snapshot"]["fingerprint"],
        json!(choices[4].fingerprint)
    );
}

#[test]
fn v46_picker_activation_refusals_write_nothing() {
    let mut w = World::new();
    let choices = available_choices(&w.ws, Some(&w.coder), &w.registered);
    let plain = choices[1].fingerprint.clone();
    let review_binding = choices[4].fingerprint.clone();

    let err = pick(&mut w, &request(ChoiceKind::Capability, "plain", &plain)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "A capability choice needs a qualified id (project:<id> or global:<id>), got plain."
    );
    let err = pick(
        &mut w,
        &request(ChoiceKind::Capability, "project:nonexistent", &plain),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Capability not found: project:nonexistent."
    );
    let err = pick(
        &mut w,
        &request(ChoiceKind::Capability, "project:plain", &review_binding),
    )
    .unwrap_err();
    assert_eq!(err, ChoiceError::SourceChanged);
    assert_eq!(
        err.to_string(),
        "Capability source changed since it was shown; review it again before enabling."
    );
    let err = pick(&mut w, &request(ChoiceKind::Binding, "nope", &plain)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Preset project:coder has no capability binding nope."
    );
    w.trusted = false;
    let err = pick(
        &mut w,
        &request(ChoiceKind::Capability, "project:plain", &plain),
    )
    .unwrap_err();
    assert_eq!(err, ChoiceError::Op(OpError::Untrusted));
    w.restoring = true;
    let err = pick(
        &mut w,
        &request(ChoiceKind::Capability, "project:plain", &plain),
    )
    .unwrap_err();
    assert_eq!(err, ChoiceError::Op(OpError::Restoring));
    assert!(w.events.is_empty() && w.tools_entry.is_none());

    w.trusted = true;
    w.restoring = false;
    pick(
        &mut w,
        &request(ChoiceKind::Capability, "project:plain", &plain),
    )
    .unwrap();
    pick(
        &mut w,
        &request(ChoiceKind::Binding, "review", &review_binding),
    )
    .unwrap();
    let state = w.state();
    assert_eq!(state.active.len(), 2);
    assert!(state.active.iter().all(|a| a.actor == Actor::User));
}

fn guard_of(w: &World) -> ViewGuard {
    ViewGuard {
        session_id: "s1".to_string(),
        leaf_id: Some("leaf".to_string()),
        revision: format!("rev-{}", w.events.len()),
    }
}

/// `sent`: the guard the page sends (`None`: the current one).
fn mutate(w: &mut World, sent: Option<ViewGuard>, body: Value) -> Result<(), MutationError> {
    let mutation = decode_state_mutation(&body).unwrap();
    let mut refused = None;
    let current = guard_of(w);
    let sent = sent.unwrap_or_else(|| current.clone());
    let mutation = match mutation {
        StateMutation::Disable { activation_id, .. } => StateMutation::Disable {
            activation_id,
            guard: sent,
        },
        StateMutation::Reset { .. } => StateMutation::Reset { guard: sent },
    };
    let _ = w.run(|_, s, st| {
        apply_state_mutation(s, &current, &mutation, st).map_err(|e| {
            refused = Some(e);
            OpError::NoActivePreset
        })
    });
    refused.map_or(Ok(()), Err)
}

#[test]
fn v47_web_mutations_check_trust_guard_and_exact_activation_ids() {
    let mut w = World::new();
    bound(&mut w, Caller::User, "plain").unwrap(); // id-2
    let body = |id: &str| json!({"action": "disable", "activationId": id, "guard": guard()});
    let err = mutate(&mut w, None, body("nope")).unwrap_err();
    assert_eq!(
        err,
        MutationError::Op(OpError::UnknownActivation("nope".to_string()))
    );
    assert_eq!(
        err.to_string(),
        "No active capability has the activation id nope."
    );
    // A label is not an activation id here.
    assert!(mutate(&mut w, None, body("plain")).is_err());
    let mut stale = guard_of(&w);
    stale.revision = "rev-0".to_string();
    let err = mutate(&mut w, Some(stale), body("id-2")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Session, branch or capability state changed; reload the capability state and try again."
    );
    w.restoring = true;
    assert_eq!(
        mutate(&mut w, None, body("id-2")),
        Err(MutationError::Op(OpError::Restoring))
    );
    w.restoring = false;
    assert_eq!(w.events.len(), 1);
    // The recovery path works in an untrusted project too.
    w.trusted = false;
    mutate(&mut w, None, body("id-2")).unwrap();
    w.trusted = true;
    assert!(w.active_ids().is_empty());
    bound(&mut w, Caller::User, "plain").unwrap();
    mutate(&mut w, None, json!({"action": "reset", "guard": guard()})).unwrap();
    assert!(w.active_ids().is_empty());
    assert_eq!(w.events.last().unwrap()["op"], "reset");
}

// ---------------------------------------------------------------------------------------------
// Properties over random operation sequences

#[derive(Clone, Debug)]
enum Step {
    Add,
    Enable(&'static str),
    Bound(Caller, &'static str),
    Disable(Caller, &'static str),
    Reset,
    Switch(u8),
}

const BINDINGS: [&str; 5] = ["review", "human-review", "danger", "writer", "plain"];
const SELECTORS: [&str; 8] = [
    "id-2",
    "id-4",
    "id-6",
    "review",
    "plain",
    "manual",
    "project:review",
    "human-review",
];

fn caller() -> impl Strategy<Value = Caller> {
    prop_oneof![Just(Caller::User), Just(Caller::Agent)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Add),
        proptest::sample::select(vec!["review", "plain", "writer", "danger"])
            .prop_map(Step::Enable),
        (caller(), proptest::sample::select(BINDINGS.to_vec()))
            .prop_map(|(c, b)| Step::Bound(c, b)),
        (caller(), proptest::sample::select(SELECTORS.to_vec()))
            .prop_map(|(c, s)| Step::Disable(c, s)),
        Just(Step::Reset),
        (0u8..3).prop_map(Step::Switch),
    ]
}

fn perform(w: &mut World, step: &Step) -> Result<Plan, OpError> {
    match step.clone() {
        Step::Add => w.run(|_, s, st| add(s, "typed", st)),
        Step::Enable(sel) => w.run(move |w, s, st| enable(s, &w.ws, sel, st)),
        Step::Bound(c, b) => bound(w, c, b),
        Step::Disable(c, sel) => off(w, c, sel),
        Step::Reset => w.run(|_, s, st| reset(s, st)),
        Step::Switch(n) => {
            let target = match n {
                0 => Some(w.coder.clone()),
                1 => Some(w.other.clone()),
                _ => None,
            };
            let result = w.run(|_, s, st| switch_preset(s, target.as_ref(), st));
            if result.is_ok() {
                w.preset = target;
            }
            result
        }
    }
}

fn activation_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["op"] == "activate")
        .map(|e| e["snapshot"]["activationId"].as_str().unwrap().to_string())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn operations_keep_every_invariant(
        steps in proptest::collection::vec(step(), 1..14),
        untrusted_at in proptest::option::of(0usize..14),
    ) {
        let mut w = World::new();
        for (i, step) in steps.iter().enumerate() {
            if untrusted_at == Some(i) {
                w.trusted = false;
            }
            let before_events = w.events.clone();
            let before_state = w.state();
            let before_entry = w.tools_entry.clone();
            let result = perform(&mut w, step);
            match result {
                Err(_) => {
                    // A failed operation persists nothing.
                    prop_assert_eq!(&w.events, &before_events);
                    prop_assert_eq!(&w.tools_entry, &before_entry);
                }
                Ok(plan) => {
                    // The plan's state is what replaying the log gives, every time.
                    let replay = reduce(&w.events).unwrap();
                    prop_assert_eq!(&plan.state, &replay);
                    prop_assert_eq!(reduce(&w.events).unwrap(), replay.clone());
                    // Only appends.
                    prop_assert_eq!(&w.events[..before_events.len()], &before_events[..]);
                    // An agent never ends a user-owned activation.
                    if matches!(step, Step::Bound(Caller::Agent, _) | Step::Disable(Caller::Agent, _)) {
                        for item in before_state.active.iter().filter(|a| a.actor == Actor::User) {
                            prop_assert!(replay.active.iter().any(|a| a.snapshot.activation_id == item.snapshot.activation_id));
                        }
                    }
                    // Untrusted: no activation.
                    if !w.trusted {
                        prop_assert!(plan.events.iter().all(|e| e["op"] != "activate"));
                    }
                    // Removal always wins.
                    for a in &replay.active {
                        for removed in &a.snapshot.tools.remove {
                            prop_assert!(!plan.effective_tools.contains(removed));
                        }
                    }
                    // Lifecycle ends only bound items.
                    for e in plan.events.iter().filter(|e| e["actor"] == "lifecycle") {
                        let id = e["activationId"].as_str().unwrap();
                        let item = before_state.active.iter().find(|a| a.snapshot.activation_id == id).unwrap();
                        let is_bound = matches!(item.snapshot.source, SnapshotSource::Capability { binding: Some(_), .. });
                        prop_assert!(is_bound);
                    }
                }
            }
            // An activation id is never reused.
            let ids = activation_ids(&w.events);
            let mut unique = ids.clone();
            unique.sort();
            unique.dedup();
            prop_assert_eq!(ids.len(), unique.len());
        }
    }

    #[test]
    fn replaying_any_event_sequence_is_deterministic(
        steps in proptest::collection::vec(step(), 0..10),
        cut in 0usize..20,
    ) {
        let mut w = World::new();
        for step in &steps {
            let _ = perform(&mut w, step);
        }
        let mut events = w.events.clone();
        // Any prefix, and any log with an event repeated (identical repeats are skipped).
        events.truncate(cut.min(events.len()));
        let repeated = events.first().cloned();
        if let Some(first) = &repeated {
            events.push(first.clone());
        }
        let a = reduce(&events);
        let b = reduce(&events);
        prop_assert_eq!(a.clone(), b);
        let unrepeated = &events[..events.len() - usize::from(repeated.is_some())];
        prop_assert_eq!(a, Ok(reduce(unrepeated).unwrap()));
    }
}

/// Raw events over small id pools: valid shapes, any order, any actor.
fn raw_event() -> impl Strategy<Value = Value> {
    let event_id = proptest::sample::select(vec!["e1", "e2", "e3", "e4", "e5", "e6"]);
    let activation = proptest::sample::select(vec!["a1", "a2", "a3"]);
    let binding = proptest::option::of(proptest::sample::select(vec!["b1", "b2"]));
    prop_oneof![
        (event_id.clone(), activation.clone(), binding, any::<bool>()).prop_map(
            |(e, a, b, agent)| {
                let source = match b {
                    Some(b) => SnapshotSource::Capability {
                        key: key("review"),
                        binding: Some(forge_core::capability::snapshot::BindingSource {
                            preset: key("coder"),
                            id: b.to_string(),
                        }),
                    },
                    None => SnapshotSource::Manual,
                };
                let snapshot = forge_core::capability::snapshot::CapabilitySnapshot {
                    activation_id: a.to_string(),
                    source,
                    name: None,
                    content: "x".to_string(),
                    tools: ToolPatch::new(["grep"], ["bash"]),
                };
                json!({"schemaVersion": 1, "eventId": e, "op": "activate",
                       "actor": if agent { "agent" } else { "user" }, "createdAt": 1,
                       "snapshot": snapshot.to_value()})
            }
        ),
        (
            event_id.clone(),
            activation,
            proptest::sample::select(vec!["user", "agent", "lifecycle"])
        )
            .prop_map(|(e, a, actor)| json!({"schemaVersion": 1, "eventId": e,
                "op": "deactivate", "actor": actor, "createdAt": 2, "activationId": a})),
        event_id.prop_map(|e| json!({"schemaVersion": 1, "eventId": e, "op": "reset",
            "actor": "user", "createdAt": 3})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_reducer_is_deterministic_and_protects_user_activations(
        events in proptest::collection::vec(raw_event(), 0..12),
    ) {
        let first = reduce(&events);
        prop_assert_eq!(&first, &reduce(&events));
        for i in 0..events.len() {
            let Ok(before) = reduce(&events[..i]) else { break };
            let after = reduce(&events[..=i]);
            let event = &events[i];
            let seen = events[..i].iter().any(|e| e["eventId"] == event["eventId"]);
            if event["op"] == "deactivate" && event["actor"] == "agent" && !seen {
                let target = event["activationId"].as_str().unwrap();
                let user_owned = before.active.iter().any(|a| {
                    a.snapshot.activation_id == target && a.actor == Actor::User
                });
                if user_owned {
                    prop_assert!(after.is_err());
                }
            }
            if let Ok(after) = after {
                // Every remaining activation was active before or is the event's own.
                for a in &after.active {
                    let was = before.active.iter().any(|b| b.snapshot.activation_id == a.snapshot.activation_id);
                    prop_assert!(was || event["op"] == "activate");
                }
            }
        }
    }
}
