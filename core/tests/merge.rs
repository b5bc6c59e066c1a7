//! The three-way JSON merge: exact cases on stack-shaped values, and properties (an unchanged
//! side gives the other side; no change of either side is dropped without a conflict).

use forge_core::merge::{merge3, merge3_resolved, Conflict};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn stack() -> Value {
    json!({
        "schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "reviewer", "name": "Reviewer",
        "items": [
            {"id": "role", "kind": "block", "role": "system", "content": "You review code."},
            {"id": "rules", "kind": "slot", "slot": "tool-guidelines"},
            {"id": "history", "kind": "slot", "slot": "chat-history"}
        ],
        "tools": {"allow": ["read", "grep"]}
    })
}

#[test]
fn changes_to_different_fields_merge_by_themselves() {
    let base = stack();
    let mut theirs = base.clone();
    theirs["name"] = json!("Careful reviewer");
    theirs["items"][1]["slot"] = json!("tools");
    let mut mine = base.clone();
    mine["items"][0]["content"] = json!("You review code carefully.");
    mine["tools"]["allow"] = json!(["read"]);
    let merged = merge3(&base, &theirs, &mine);
    assert!(merged.is_clean(), "{:?}", merged.conflicts);
    let mut want = base.clone();
    want["name"] = json!("Careful reviewer");
    want["items"][1]["slot"] = json!("tools");
    want["items"][0]["content"] = json!("You review code carefully.");
    want["tools"]["allow"] = json!(["read"]);
    assert_eq!(merged.value, want);
    // `rules` is unchanged in mine, so theirs' element is taken whole.
    assert_eq!(merged.from_theirs, ["/name", "/items/rules"]);
}

#[test]
fn the_same_field_changed_twice_is_a_conflict_that_keeps_mine() {
    let base = stack();
    let mut theirs = base.clone();
    theirs["items"][0]["content"] = json!("Theirs.");
    let mut mine = base.clone();
    mine["items"][0]["content"] = json!("Mine.");
    mine["name"] = json!("Mine too");
    let merged = merge3(&base, &theirs, &mine);
    assert_eq!(
        merged.conflicts,
        [Conflict {
            path: "/items/role/content".into(),
            base: Some(json!("You review code.")),
            theirs: Some(json!("Theirs.")),
            mine: Some(json!("Mine.")),
        }]
    );
    assert_eq!(merged.value, mine);
}

#[test]
fn items_added_removed_and_reordered_on_either_side() {
    let base = stack();
    // Theirs adds an item at the end and removes `rules`; mine edits `role` and adds one too.
    let mut theirs = base.clone();
    theirs["items"] = json!([base["items"][0], base["items"][2], {"id": "theirs-new", "kind": "block", "role": "user", "content": "T"}]);
    let mut mine = base.clone();
    mine["items"][0]["content"] = json!("Edited.");
    mine["items"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "mine-new", "kind": "block", "role": "user", "content": "M"}));
    let merged = merge3(&base, &theirs, &mine);
    assert!(merged.is_clean(), "{:?}", merged.conflicts);
    let ids: Vec<&str> = merged.value["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["role", "history", "mine-new", "theirs-new"]);
    assert_eq!(merged.value["items"][0]["content"], "Edited.");

    // Theirs deletes the item mine edited: a conflict (the edit is not lost).
    let mut theirs = base.clone();
    theirs["items"].as_array_mut().unwrap().remove(0);
    let merged = merge3(&base, &theirs, &mine);
    assert_eq!(merged.conflicts.len(), 1);
    assert_eq!(merged.conflicts[0].path, "/items/role");
    assert_eq!(merged.conflicts[0].theirs, None);

    // Only theirs reordered: their order, with mine's edit inside.
    let mut theirs = base.clone();
    theirs["items"] = json!([base["items"][2], base["items"][0], base["items"][1]]);
    let mut mine = base.clone();
    mine["items"][1]["slot"] = json!("tools");
    let merged = merge3(&base, &theirs, &mine);
    assert!(merged.is_clean());
    let ids: Vec<&str> = merged.value["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["history", "role", "rules"]);
    assert_eq!(merged.value["items"][2]["slot"], "tools");

    // Both reordered differently: an order conflict; mine's order kept.
    let mut mine = base.clone();
    mine["items"] = json!([base["items"][1], base["items"][0], base["items"][2]]);
    let merged = merge3(&base, &theirs, &mine);
    assert_eq!(merged.conflicts.len(), 1);
    assert_eq!(merged.conflicts[0].path, "/items/#order");
    assert_eq!(
        merged.conflicts[0].theirs,
        Some(json!(["history", "role", "rules"]))
    );
    assert_eq!(merged.value, mine);
}

#[test]
fn plain_arrays_and_type_changes_merge_whole() {
    let base = json!({"tools": {"deny": ["bash"]}});
    let theirs = json!({"tools": {"deny": ["bash", "write"]}});
    let mine = json!({"tools": {"deny": ["edit"]}});
    let merged = merge3(&base, &theirs, &mine);
    assert_eq!(merged.conflicts.len(), 1);
    assert_eq!(merged.conflicts[0].path, "/tools/deny");
    let mine = json!({"tools": "none"});
    let merged = merge3(&base, &theirs, &mine);
    assert_eq!(merged.conflicts[0].path, "/tools");
    // A key both sides added with the same value is no conflict.
    let merged = merge3(&json!({}), &json!({"a": 1}), &json!({"a": 1, "b": 2}));
    assert!(merged.is_clean());
    assert_eq!(merged.value, json!({"a": 1, "b": 2}));
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0i64..5).prop_map(|n| json!(n)),
        "[ab]{0,2}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[k-n]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// Every (pointer, leaf or empty container) of a value.
fn leaves(value: &Value, at: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                leaves(v, &format!("{at}/{k}"), out);
            }
        }
        other => out.push((at.to_string(), other.clone())),
    }
}

#[test]
fn a_conflict_resolved_for_the_disk_takes_theirs_and_leaves_the_others() {
    let base = stack();
    let mut theirs = base.clone();
    theirs["items"][0]["content"] = json!("Theirs.");
    theirs["name"] = json!("Their name");
    let mut mine = base.clone();
    mine["items"][0]["content"] = json!("Mine.");
    mine["name"] = json!("My name");
    let plain = merge3(&base, &theirs, &mine);
    assert_eq!(plain.conflicts.len(), 2);
    let merged = merge3_resolved(&base, &theirs, &mine, &["/items/role/content".to_string()]);
    let mut want = mine.clone();
    want["items"][0]["content"] = json!("Theirs.");
    assert_eq!(merged.value, want);
    assert_eq!(merged.from_theirs, ["/items/role/content"]);
    assert_eq!(
        merged.conflicts,
        [Conflict {
            path: "/name".into(),
            base: Some(json!("Reviewer")),
            theirs: Some(json!("Their name")),
            mine: Some(json!("My name")),
        }]
    );
}

#[test]
fn an_order_conflict_resolved_for_the_disk_takes_their_order() {
    let base = stack();
    let mut theirs = base.clone();
    theirs["items"] = json!([base["items"][2], base["items"][0], base["items"][1]]);
    let mut mine = base.clone();
    mine["items"] = json!([base["items"][1], base["items"][0], base["items"][2]]);
    assert_eq!(
        merge3(&base, &theirs, &mine).conflicts[0].path,
        "/items/#order"
    );
    let merged = merge3_resolved(&base, &theirs, &mine, &["/items/#order".to_string()]);
    assert!(merged.is_clean());
    assert_eq!(merged.value, theirs);
}

proptest! {
    #[test]
    fn choosing_the_disk_everywhere_leaves_no_conflict(base in value(), theirs in value(), mine in value()) {
        let plain = merge3(&base, &theirs, &mine);
        prop_assert_eq!(&merge3_resolved(&base, &theirs, &mine, &[]), &plain);
        let all: Vec<String> = plain.conflicts.iter().map(|c| c.path.clone()).collect();
        let resolved = merge3_resolved(&base, &theirs, &mine, &all);
        prop_assert!(resolved.is_clean(), "{:?}", resolved.conflicts);
        for c in &plain.conflicts {
            prop_assert!(resolved.from_theirs.contains(&c.path));
            // Plain JSON pointers (no keyed arrays are generated here) hold theirs' value.
            prop_assert_eq!(resolved.value.pointer(&c.path).cloned(), c.theirs.clone());
        }
    }

    #[test]
    fn an_unchanged_side_gives_the_other_side(base in value(), other in value()) {
        let m = merge3(&base, &base, &other);
        prop_assert!(m.is_clean());
        prop_assert_eq!(&m.value, &other);
        let t = merge3(&base, &other, &base);
        prop_assert!(t.is_clean());
        prop_assert_eq!(&t.value, &other);
        let same = merge3(&base, &other, &other);
        prop_assert!(same.is_clean());
        prop_assert_eq!(&same.value, &other);
    }

    #[test]
    fn no_change_is_dropped_without_a_conflict(base in value(), theirs in value(), mine in value()) {
        let merged = merge3(&base, &theirs, &mine);
        let covered = |path: &str| {
            merged.conflicts.iter().any(|c| {
                c.path.is_empty() || path == c.path || path.starts_with(&format!("{}/", c.path))
            })
        };
        let mut base_leaves = Vec::new();
        leaves(&base, "", &mut base_leaves);
        // Objects are merged key by key; arrays here are merged whole (no `id` keys generated).
        for (side, other) in [(&theirs, &mine), (&mine, &theirs)] {
            let mut side_leaves = Vec::new();
            leaves(side, "", &mut side_leaves);
            for (path, v) in side_leaves {
                if base.pointer(&path) == Some(&v) {
                    continue; // not a change of this side
                }
                if v == json!({}) && base.pointer(&path).is_some_and(Value::is_object) {
                    continue; // emptied: the deletions are checked below
                }
                // An added empty object is kept when an object is there (the other side may
                // have added keys to it).
                let kept = merged.value.pointer(&path) == Some(&v)
                    || (v == json!({}) && merged.value.pointer(&path).is_some_and(Value::is_object));
                let agreed = other.pointer(&path) == Some(&v);
                prop_assert!(kept || agreed || covered(&path),
                    "change at {} ({}) lost: base {} theirs {} mine {} merged {} conflicts {:?}",
                    path, v, base, theirs, mine, merged.value, merged.conflicts);
            }
            for (path, _) in &base_leaves {
                if path.is_empty() || side.pointer(path).is_some() {
                    continue;
                }
                // Deleted by this side: gone from the result unless a conflict says why.
                prop_assert!(merged.value.pointer(path).is_none() || covered(path),
                    "deletion of {} lost: base {} theirs {} mine {} merged {} conflicts {:?}",
                    path, base, theirs, mine, merged.value, merged.conflicts);
            }
        }
    }
}
