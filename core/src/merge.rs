//! Three-way merge of JSON resources: the draft a user edited (`mine`), the file as it is on
//! disk now (`theirs`) and the revision the draft started from (`base`).
//!
//! Rules, applied from the root down:
//! - a side equal to `base` takes the other side; two equal sides take that value;
//! - objects merge key by key (a key absent on a side is a deletion on that side);
//! - arrays whose elements are all objects with a unique string `id` on every side (stack
//!   `items`, for example) merge element by element, keyed by `id`;
//! - anything else that both sides changed differently is a [`Conflict`]: the merged value keeps
//!   `mine` there until the user decides, and the conflict names the path and all three values.
//!
//! So a change of either side is never dropped silently: it is in the result or in a conflict.
//! Order: `mine`'s keys and elements first, then what only `theirs` added, in its order.

use serde_json::{Map, Value};

/// Both sides changed the value at `path` differently. `path` is a JSON pointer, except that
/// inside a keyed array (see [`merge3`]) a segment is the element's `id`, and `<array>/#order`
/// names a conflict about the order of its elements (the values are the id lists).
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    pub path: String,
    /// `None`: absent on that side.
    pub base: Option<Value>,
    pub theirs: Option<Value>,
    pub mine: Option<Value>,
}

/// The result of [`merge3`].
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// The merged value; at each conflict it holds `mine`'s value.
    pub value: Value,
    /// The paths where `theirs`' change was taken in (for showing what merged by itself).
    pub from_theirs: Vec<String>,
    pub conflicts: Vec<Conflict>,
}

impl Merged {
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }
}

/// Merges `theirs` and `mine`, both derived from `base`.
pub fn merge3(base: &Value, theirs: &Value, mine: &Value) -> Merged {
    merge3_resolved(base, theirs, mine, &[])
}

/// [`merge3`] with the person's choices: at each conflict whose path is in `take_theirs`, the
/// merged value takes `theirs` (that path is then listed in `from_theirs`, not in
/// `conflicts`); every other conflict keeps `mine` and is reported as usual.
pub fn merge3_resolved(
    base: &Value,
    theirs: &Value,
    mine: &Value,
    take_theirs: &[String],
) -> Merged {
    let mut run = Run {
        out: Merged {
            value: Value::Null,
            from_theirs: Vec::new(),
            conflicts: Vec::new(),
        },
        take_theirs,
    };
    run.out.value =
        merge_slot("", Some(base), Some(theirs), Some(mine), &mut run).unwrap_or(Value::Null);
    run.out
}

/// One merge in progress: what it found so far and the person's choices.
struct Run<'a> {
    out: Merged,
    take_theirs: &'a [String],
}

impl Run<'_> {
    /// Whether the person chose `theirs` at `path` (recorded as taken from theirs); otherwise
    /// the conflict is recorded.
    fn decide(&mut self, conflict: Conflict) -> bool {
        if self.take_theirs.contains(&conflict.path) {
            self.out.from_theirs.push(conflict.path);
            true
        } else {
            self.out.conflicts.push(conflict);
            false
        }
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Merges one slot (present or absent on each side); `None` means the result deletes it.
fn merge_slot(
    path: &str,
    base: Option<&Value>,
    theirs: Option<&Value>,
    mine: Option<&Value>,
    out: &mut Run,
) -> Option<Value> {
    if theirs == mine || theirs == base {
        return mine.cloned();
    }
    if mine == base {
        out.out.from_theirs.push(path.to_string());
        return theirs.cloned();
    }
    match (base, theirs, mine) {
        (Some(Value::Object(b)), Some(Value::Object(t)), Some(Value::Object(m))) => {
            Some(Value::Object(merge_objects(path, Some(b), t, m, out)))
        }
        (None, Some(Value::Object(t)), Some(Value::Object(m))) => {
            Some(Value::Object(merge_objects(path, None, t, m, out)))
        }
        (Some(Value::Array(b)), Some(Value::Array(t)), Some(Value::Array(m))) => {
            match (keyed(b), keyed(t), keyed(m)) {
                (Some(bk), Some(tk), Some(mk)) => {
                    Some(Value::Array(merge_keyed(path, &bk, &tk, &mk, out)))
                }
                _ => conflict(path, base, theirs, mine, out),
            }
        }
        _ => conflict(path, base, theirs, mine, out),
    }
}

fn conflict(
    path: &str,
    base: Option<&Value>,
    theirs: Option<&Value>,
    mine: Option<&Value>,
    out: &mut Run,
) -> Option<Value> {
    let take = out.decide(Conflict {
        path: path.to_string(),
        base: base.cloned(),
        theirs: theirs.cloned(),
        mine: mine.cloned(),
    });
    if take {
        theirs.cloned()
    } else {
        mine.cloned()
    }
}

fn merge_objects(
    path: &str,
    base: Option<&Map<String, Value>>,
    theirs: &Map<String, Value>,
    mine: &Map<String, Value>,
    out: &mut Run,
) -> Map<String, Value> {
    let mut keys: Vec<&String> = mine.keys().collect();
    keys.extend(theirs.keys().filter(|k| !mine.contains_key(*k)));
    // Keys only `base` had were deleted by both sides: nothing to keep.
    let mut merged = Map::new();
    for key in keys {
        let child = format!("{path}/{}", escape(key));
        let b = base.and_then(|b| b.get(key));
        if let Some(v) = merge_slot(&child, b, theirs.get(key), mine.get(key), out) {
            merged.insert(key.clone(), v);
        }
    }
    merged
}

fn ids_of<'a>(list: &[(&'a str, &Value)]) -> Vec<&'a str> {
    list.iter().map(|(k, _)| *k).collect()
}

fn ids_value(ids: &[&str]) -> Value {
    Value::Array(ids.iter().map(|id| Value::String(id.to_string())).collect())
}

/// The elements of an array keyed by their `id`, when every element is an object with a unique
/// string `id`.
fn keyed(items: &[Value]) -> Option<Vec<(&str, &Value)>> {
    let mut out: Vec<(&str, &Value)> = Vec::with_capacity(items.len());
    for item in items {
        let id = item.get("id")?.as_str()?;
        if out.iter().any(|(seen, _)| *seen == id) {
            return None;
        }
        out.push((id, item));
    }
    Some(out)
}

fn merge_keyed(
    path: &str,
    base: &[(&str, &Value)],
    theirs: &[(&str, &Value)],
    mine: &[(&str, &Value)],
    out: &mut Run,
) -> Vec<Value> {
    let find = |list: &[(&str, &Value)], id: &str| {
        list.iter()
            .find(|(k, _)| *k == id)
            .map(|(_, v)| (*v).clone())
    };
    let (base_ids, their_ids, my_ids) = (ids_of(base), ids_of(theirs), ids_of(mine));
    // The relative order of the ids a side shares with base: did that side reorder?
    let reordered = |side: &[&str]| {
        let kept: Vec<&str> = side
            .iter()
            .copied()
            .filter(|k| base_ids.contains(k))
            .collect();
        let was: Vec<&str> = base_ids
            .iter()
            .copied()
            .filter(|k| kept.contains(k))
            .collect();
        kept != was
    };
    let (first, second) = match (reordered(&their_ids), reordered(&my_ids)) {
        (true, false) => (&their_ids, &my_ids),
        (true, true) if their_ids != my_ids => {
            let take = out.decide(Conflict {
                path: format!("{path}/#order"),
                base: Some(ids_value(&base_ids)),
                theirs: Some(ids_value(&their_ids)),
                mine: Some(ids_value(&my_ids)),
            });
            if take {
                (&their_ids, &my_ids)
            } else {
                (&my_ids, &their_ids)
            }
        }
        _ => (&my_ids, &their_ids),
    };
    let mut ids: Vec<&str> = first.clone();
    ids.extend(second.iter().copied().filter(|k| !first.contains(k)));
    let mut merged = Vec::new();
    for id in ids {
        let child = format!("{path}/{}", escape(id));
        let (b, t, m) = (find(base, id), find(theirs, id), find(mine, id));
        if let Some(v) = merge_slot(&child, b.as_ref(), t.as_ref(), m.as_ref(), out) {
            merged.push(v);
        }
    }
    merged
}
