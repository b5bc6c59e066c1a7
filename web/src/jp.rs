//! Editing a draft in place: JSON-pointer paths (`/items/2/options/maxMessages`) that create
//! missing objects on the way. The draft is the stack's raw object, so members the editor does
//! not know stay exactly where they were.

use serde_json::{Map, Value};

/// Escapes one pointer token (`~` → `~0`, `/` → `~1`).
pub fn tok(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn tokens(path: &str) -> Vec<String> {
    path.split('/').skip(1).map(unescape).collect()
}

pub fn get<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    root.pointer(path)
}

pub fn get_str(root: &Value, path: &str) -> String {
    get(root, path)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub fn get_bool(root: &Value, path: &str) -> Option<bool> {
    get(root, path).and_then(Value::as_bool)
}

/// Sets `path` to `value` (creating objects for missing parents), or removes the member when
/// `value` is `None`. Array indexes must exist; a path through a non-container is ignored.
pub fn set(root: &mut Value, path: &str, value: Option<Value>) {
    let toks = tokens(path);
    let Some((last, parents)) = toks.split_last() else {
        if let Some(v) = value {
            *root = v;
        }
        return;
    };
    let mut node = root;
    for t in parents {
        node = match node {
            Value::Object(map) => {
                if value.is_none() && !map.contains_key(t) {
                    return;
                }
                let child = map
                    .entry(t.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !child.is_object() && !child.is_array() {
                    if value.is_none() {
                        return;
                    }
                    *child = Value::Object(Map::new());
                }
                child
            }
            Value::Array(items) => match t.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(child) => child,
                None => return,
            },
            _ => return,
        };
    }
    match (node, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(last.clone(), v);
        }
        (Value::Object(map), None) => {
            map.shift_remove(last);
        }
        (Value::Array(items), Some(v)) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = v;
            }
        }
        (Value::Array(items), None) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < items.len() {
                    items.remove(i);
                }
            }
        }
        _ => {}
    }
}

/// The array at `path`, created when missing.
pub fn array_mut<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Vec<Value>> {
    if get(root, path).is_none() {
        set(root, path, Some(Value::Array(Vec::new())));
    }
    root.pointer_mut(path).and_then(Value::as_array_mut)
}

/// Pretty JSON the way the files are written (2 spaces), without the trailing newline.
pub fn pretty(value: &Value) -> String {
    forge_core::json::to_pretty(value).trim_end().to_string()
}
