//! The editor's undo history (`forge_core::undo::History`).

use forge_core::undo::{History, COALESCE_MS};
use serde_json::{json, Value};

fn loaded(v: Value) -> History {
    let mut h = History::default();
    h.observe(&Value::Null, 0.0);
    h.load();
    h.observe(&v, 0.0);
    h
}

#[test]
fn a_load_starts_over_and_nothing_to_undo() {
    let mut h = loaded(json!({"a": 1}));
    assert!(!h.can_undo());
    assert!(!h.can_redo());
    assert_eq!(h.undo(), None);
}

#[test]
fn quick_changes_are_one_step_slow_ones_several() {
    let mut h = loaded(json!("a"));
    h.observe(&json!("ab"), 1000.0);
    h.observe(&json!("abc"), 1000.0 + COALESCE_MS - 1.0);
    h.observe(&json!("abcd"), 3000.0);
    assert_eq!(h.undo(), Some(json!("abc")));
    h.observe(&json!("abc"), 3001.0); // the draft follows the undo
    assert_eq!(h.undo(), Some(json!("a")));
    h.observe(&json!("a"), 3002.0);
    assert_eq!(h.undo(), None, "never before the load");
    assert_eq!(h.redo(), Some(json!("abc")));
    h.observe(&json!("abc"), 3003.0);
    assert_eq!(h.redo(), Some(json!("abcd")));
    h.observe(&json!("abcd"), 3004.0);
    assert_eq!(h.redo(), None);
}

#[test]
fn a_new_edit_after_undo_drops_the_redo_steps() {
    let mut h = loaded(json!(1));
    h.observe(&json!(2), 1000.0);
    assert_eq!(h.undo(), Some(json!(1)));
    h.observe(&json!(1), 1001.0);
    assert!(h.can_redo());
    h.observe(&json!(5), 5000.0);
    assert!(!h.can_redo());
    assert_eq!(h.undo(), Some(json!(1)));
}

#[test]
fn an_unchanged_draft_records_nothing_and_a_reload_forgets() {
    let mut h = loaded(json!(1));
    h.observe(&json!(1), 1000.0);
    assert!(!h.can_undo());
    h.observe(&json!(2), 2000.0);
    assert!(h.can_undo());
    h.load();
    h.observe(&json!(3), 3000.0);
    assert!(!h.can_undo(), "a reload from disk is a new history");
}

#[test]
fn the_history_is_bounded() {
    let mut h = loaded(json!(0));
    for i in 1..=500 {
        h.observe(&json!(i), f64::from(i) * 1000.0);
    }
    let mut steps = 0;
    while h.undo().is_some() {
        steps += 1;
    }
    assert_eq!(steps, 200);
}
