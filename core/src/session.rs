//! Live-session state that Pi persists for pi-forge as custom session entries, as pure rules.
//!
//! A Pi session records pi-forge's choices on its branch:
//! - `pi-forge-prompt-stack-state` `{activeStackId: "<scope>:<id>" | "none"}` — the active Preset
//!   (legacy files may hold a bare id);
//! - `pi-forge-agent-profile-state` `{provenance: {...} | null}` — the last applied agent profile
//!   (`null` = forgotten).
//!
//! The bridge extension sends the branch's entries as they are; these functions decide what they
//! mean (the last entry of a type wins; a malformed one counts as absent), build the provenance a
//! successful apply records, and compare it with the live facts (drift).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::api::{Change, Drift, FieldDrift, LastApplied};
use crate::id::Scope;
use crate::profile::{AgentProfile, ModelRef};
use crate::workspace::{RestoredStack, WorkspaceSnapshot};

pub const STACK_STATE_TYPE: &str = "pi-forge-prompt-stack-state";
pub const PROFILE_STATE_TYPE: &str = "pi-forge-agent-profile-state";

/// One custom entry of the branch, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    pub custom_type: String,
    #[serde(default)]
    pub data: Value,
}

/// What the branch says about pi-forge.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BranchState {
    /// The last persisted `activeStackId`; `None` when the branch never recorded one.
    pub active_stack_id: Option<String>,
    /// The last recorded provenance: `None` = never recorded, `Some(None)` = forgotten or
    /// malformed, `Some(Some(p))` = applied.
    pub provenance: Option<Option<Value>>,
}

impl BranchState {
    /// A fresh session: pi-forge never wrote to this branch.
    pub fn is_fresh(&self) -> bool {
        self.active_stack_id.is_none() && self.provenance.is_none()
    }
}

/// Reads the branch: the newest entry of each type wins.
pub fn branch_state(entries: &[SessionEntry]) -> BranchState {
    let mut state = BranchState::default();
    for entry in entries.iter().rev() {
        match entry.custom_type.as_str() {
            STACK_STATE_TYPE if state.active_stack_id.is_none() => {
                if let Some(id) = entry.data.get("activeStackId").and_then(Value::as_str) {
                    state.active_stack_id = Some(id.to_string());
                } else {
                    // A malformed entry still ends the search: it was the newest decision.
                    state.active_stack_id = Some("none".to_string());
                }
            }
            PROFILE_STATE_TYPE if state.provenance.is_none() => {
                let p = entry
                    .data
                    .get("provenance")
                    .filter(|p| valid_provenance(p))
                    .cloned();
                state.provenance = Some(p);
            }
            _ => {}
        }
        if state.active_stack_id.is_some() && state.provenance.is_some() {
            break;
        }
    }
    state
}

fn valid_provenance(p: &Value) -> bool {
    p.get("profileId").is_some_and(Value::is_string)
        && p.get("sourcePath").is_some_and(Value::is_string)
        && p.get("snapshot").is_some_and(Value::is_object)
}

/// What a (re)started session's branch means for pi-forge.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    /// `"<scope>:<id>"` of the Preset the session runs, if any.
    pub active_stack: Option<String>,
    /// Entries to append now: the restore changed the choice (a fallback or a fresh default).
    pub record: Vec<SessionEntry>,
    /// The last applied profile's provenance.
    pub provenance: Option<Value>,
}

/// Restores a session from its branch: the newest stack-state entry when it still resolves
/// (without a usability check); otherwise, and in a fresh session, the default auto-activating
/// Preset, which is then recorded. An untrusted project never auto-activates and never records
/// a fallback, so the branch keeps its choice for when the project is trusted again.
pub fn restore(snapshot: &WorkspaceSnapshot, trusted: bool, entries: &[SessionEntry]) -> Restored {
    let branch = branch_state(entries);
    let provenance = branch.provenance.flatten();
    let keep = |active_stack: Option<String>| Restored {
        active_stack,
        record: Vec::new(),
        provenance: provenance.clone(),
    };
    let record = |key: Option<String>| Restored {
        record: vec![SessionEntry {
            custom_type: STACK_STATE_TYPE.to_string(),
            data: stack_state_data(key.as_deref()),
        }],
        active_stack: key,
        provenance: provenance.clone(),
    };
    match branch.active_stack_id.as_deref() {
        Some(persisted) => match snapshot.restore_stack(persisted) {
            RestoredStack::Disabled => keep(None),
            RestoredStack::Restored(entry) => keep(Some(entry.key.to_string())),
            RestoredStack::Fallback(_) if !trusted => keep(None),
            RestoredStack::Fallback(entry) => record(entry.map(|e| e.key.to_string())),
        },
        None if !trusted => keep(None),
        None => match snapshot.default_stack(None) {
            Some(entry) => record(Some(entry.key.to_string())),
            None => keep(None),
        },
    }
}

/// The data of a `pi-forge-prompt-stack-state` entry.
pub fn stack_state_data(active: Option<&str>) -> Value {
    json!({ "activeStackId": active.unwrap_or("none") })
}

/// The facts a provenance snapshot and drift compare.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveChoice {
    pub model: Option<ModelRef>,
    pub thinking_level: Option<String>,
    /// `"<scope>:<id>"` or `None`.
    pub prompt_stack: Option<String>,
}

fn model_value(model: Option<&ModelRef>) -> Value {
    model.map_or(Value::Null, ModelRef::to_value)
}

/// The provenance recorded after `profile` (from `scope`, file `source_path`) was applied and
/// the session ended up in `applied` (the values read back from Pi).
pub fn provenance(
    profile: &AgentProfile,
    scope: Scope,
    source_path: &str,
    applied_at: &str,
    applied: &LiveChoice,
) -> Value {
    json!({
        "profileId": profile.id,
        "scope": scope.as_str(),
        "sourcePath": source_path,
        "sourceFingerprint": profile.legacy_fingerprint(),
        "appliedAt": applied_at,
        "snapshot": {
            "model": model_value(applied.model.as_ref()),
            "thinkingLevel": applied.thinking_level,
            "promptStack": applied.prompt_stack,
        },
    })
}

fn model_of(value: &Value) -> Option<ModelRef> {
    let provider = value.get("provider")?.as_str()?;
    let id = value.get("id")?.as_str()?;
    Some(ModelRef::new(provider, id))
}

/// `lastApplied` of the profile status (A6): the provenance plus `sourceState`
/// (`missing` | `unchanged` | `changed`), `drift` of each field against `current` and the names
/// of the fields that `drifted`. `source` is the loaded profile whose file is
/// `provenance.sourcePath`, if any.
pub fn last_applied(
    provenance: &Value,
    source: Option<&AgentProfile>,
    current: &LiveChoice,
) -> LastApplied {
    let source_state = match source {
        None => "missing",
        Some(p)
            if provenance.get("sourceFingerprint").and_then(Value::as_str)
                == Some(p.legacy_fingerprint().as_str()) =>
        {
            "unchanged"
        }
        Some(_) => "changed",
    };
    let snapshot = provenance.get("snapshot").cloned().unwrap_or(Value::Null);
    let expected_model = snapshot.get("model").and_then(model_of);
    let expected_thinking = snapshot
        .get("thinkingLevel")
        .and_then(Value::as_str)
        .map(str::to_string);
    let expected_stack = snapshot
        .get("promptStack")
        .and_then(Value::as_str)
        .map(str::to_string);
    let drift = Drift {
        model: FieldDrift {
            expected: model_value(expected_model.as_ref()),
            actual: model_value(current.model.as_ref()),
            changed: expected_model != current.model,
        },
        thinking_level: FieldDrift {
            expected: json!(expected_thinking),
            actual: json!(current.thinking_level),
            changed: expected_thinking != current.thinking_level,
        },
        prompt_stack: FieldDrift {
            expected: json!(expected_stack),
            actual: json!(current.prompt_stack),
            changed: expected_stack != current.prompt_stack,
        },
    };
    let mut view = LastApplied {
        provenance: provenance.clone(),
        source_state: source_state.to_string(),
        drift,
        drifted: Vec::new(),
    };
    view.drifted = drifted(&view).into_iter().map(str::to_string).collect();
    view
}

/// What an apply changed: `[{field, from, to}]` for model, thinking level and Preset, in that
/// order, leaving out what stayed the same.
pub fn changes(before: &LiveChoice, after: &LiveChoice) -> Vec<Change> {
    let mut out = Vec::new();
    if before.model != after.model {
        out.push(Change {
            field: "model".into(),
            from: model_value(before.model.as_ref()),
            to: model_value(after.model.as_ref()),
        });
    }
    if before.thinking_level != after.thinking_level {
        out.push(Change {
            field: "thinkingLevel".into(),
            from: json!(before.thinking_level),
            to: json!(after.thinking_level),
        });
    }
    if before.prompt_stack != after.prompt_stack {
        out.push(Change {
            field: "promptStack".into(),
            from: json!(before.prompt_stack),
            to: json!(after.prompt_stack),
        });
    }
    out
}

/// The fields of a `last_applied` view that drifted.
pub fn drifted(last_applied: &LastApplied) -> Vec<&'static str> {
    let drift = &last_applied.drift;
    [
        ("model", &drift.model),
        ("thinkingLevel", &drift.thinking_level),
        ("promptStack", &drift.prompt_stack),
    ]
    .into_iter()
    .filter(|(_, d)| d.changed)
    .map(|(k, _)| k)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ThinkingLevel;

    fn entry(t: &str, data: Value) -> SessionEntry {
        SessionEntry {
            custom_type: t.to_string(),
            data,
        }
    }

    fn profile() -> AgentProfile {
        AgentProfile {
            id: "fast".into(),
            name: None,
            description: None,
            auto_activate: None,
            model: ModelRef::new("fake", "m1"),
            thinking_level: ThinkingLevel::High,
            prompt_stack: Some("lean".into()),
        }
    }

    #[test]
    fn newest_entry_of_each_type_wins() {
        let entries = vec![
            entry(STACK_STATE_TYPE, json!({"activeStackId": "project:a"})),
            entry("other", json!({})),
            entry(PROFILE_STATE_TYPE, json!({"provenance": null})),
            entry(STACK_STATE_TYPE, json!({"activeStackId": "global:b"})),
        ];
        let state = branch_state(&entries);
        assert_eq!(state.active_stack_id.as_deref(), Some("global:b"));
        assert_eq!(state.provenance, Some(None));
        assert!(!state.is_fresh());
        assert!(branch_state(&[]).is_fresh());
        assert_eq!(
            branch_state(&[entry(STACK_STATE_TYPE, json!({"activeStackId": 3}))])
                .active_stack_id
                .as_deref(),
            Some("none")
        );
    }

    #[test]
    fn provenance_and_drift() {
        let applied = LiveChoice {
            model: Some(ModelRef::new("fake", "m1")),
            thinking_level: Some("medium".into()),
            prompt_stack: Some("project:lean".into()),
        };
        let p = provenance(
            &profile(),
            Scope::Project,
            "/p/.pi/forge/agent-profiles/fast.json",
            "2026-12-01T00:00:00.000Z",
            &applied,
        );
        assert_eq!(p["snapshot"]["thinkingLevel"], "medium");
        assert_eq!(p["sourceFingerprint"], profile().legacy_fingerprint());
        let state = branch_state(&[entry(PROFILE_STATE_TYPE, json!({ "provenance": p }))]);
        assert_eq!(state.provenance, Some(Some(p.clone())));

        let same = last_applied(&p, Some(&profile()), &applied);
        assert_eq!(same.source_state, "unchanged");
        assert!(drifted(&same).is_empty());

        let moved = LiveChoice {
            model: Some(ModelRef::new("fake", "m2")),
            ..applied.clone()
        };
        let view = last_applied(&p, None, &moved);
        assert_eq!(view.source_state, "missing");
        assert_eq!(drifted(&view), vec!["model"]);
        assert_eq!(view.drifted, vec!["model"]);
        assert_eq!(
            changes(&moved, &applied),
            vec![Change {
                field: "model".into(),
                from: json!({"provider":"fake","id":"m2"}),
                to: json!({"provider":"fake","id":"m1"}),
            }]
        );
        assert_eq!(changes(&applied, &applied), Vec::<Change>::new());
        assert_eq!(
            view.drift.model,
            FieldDrift {
                expected: json!({"provider":"fake","id":"m1"}),
                actual: json!({"provider":"fake","id":"m2"}),
                changed: true,
            }
        );
    }
}
