//! Unsaved Preset drafts survive a reload, a crash or a server restart: the local-storage side.
//!
//! While the open Preset has unsaved changes, the draft is kept in the browser's local storage
//! under the file's absolute path (so two projects never share an entry) together with the
//! revision and the file content it started from; saving or discarding removes it. Opening the
//! file again restores it with a banner, but never silently over a newer file: when the file
//! changed on disk since, the banner offers forge-core's three-way merge (base = the content the
//! draft started from, theirs = disk, mine = the draft) or discarding it. The effect that keeps
//! drafts and the banners are in `recovery`.
//!
//! A request refused with the server's "Invalid pi-forge editor token." (the server restarted
//! with a new token) marks the session lost: a banner says to open the URL `pi-forge ui`
//! printed, and the page tries again whenever it regains the focus (or on Reconnect,
//! `events::reconnect`); once the new session cookie is there, the event stream reconnects and
//! the lists refresh, with the draft untouched.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The server's answer to a request without a valid session.
pub const INVALID_TOKEN: &str = "Invalid pi-forge editor token.";

/// Local-storage keys of kept drafts start with this.
const PREFIX: &str = "pi-forge.draft.v1:";

/// A draft kept in local storage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The revision of the file the draft started from.
    pub revision: String,
    /// That file's content (the merge base).
    pub base: Value,
    pub draft: Value,
    /// When it was kept (milliseconds since the epoch).
    pub kept_at: f64,
}

/// What the editor shows about a draft restored from local storage.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    pub kept_at: f64,
    /// The file changed on disk since the draft started: it is not applied; `merged` is the
    /// three-way merge and `conflicts` how many places both sides changed.
    pub stale: Option<StaleDraft>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StaleDraft {
    pub merged: Value,
    pub conflicts: Vec<String>,
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

fn key(path: &str) -> String {
    format!("{PREFIX}{path}")
}

/// Keeps `draft` of the file at `path` (started from `revision` with content `base`).
pub fn keep(path: &str, revision: &str, base: &Value, draft: &Value) {
    let Some(storage) = storage() else {
        return;
    };
    let kept = Kept {
        revision: revision.to_string(),
        base: base.clone(),
        draft: draft.clone(),
        kept_at: js_sys::Date::now(),
    };
    if let Ok(text) = serde_json::to_string(&kept) {
        // A full storage (quota) keeps the previous entry; the draft is still on screen.
        let _ = storage.set_item(&key(path), &text);
    }
}

pub fn forget(path: &str) {
    if let Some(storage) = storage() {
        let _ = storage.remove_item(&key(path));
    }
}

pub fn read(path: &str) -> Option<Kept> {
    let text = storage()?.get_item(&key(path)).ok()??;
    crate::api::parse(&text).ok()
}

/// What to do with a kept draft when its file is opened with `revision` and content `saved`:
/// `None` when there is nothing to restore (the kept draft equals the file, or none is kept).
pub fn restore_plan(kept: &Kept, revision: &str, saved: &Value) -> Option<Restored> {
    if kept.draft == *saved {
        return None;
    }
    if kept.revision == revision {
        return Some(Restored {
            kept_at: kept.kept_at,
            stale: None,
        });
    }
    let merge = forge_core::merge::merge3(&kept.base, saved, &kept.draft);
    Some(Restored {
        kept_at: kept.kept_at,
        stale: Some(StaleDraft {
            conflicts: merge.conflicts.iter().map(|c| c.path.clone()).collect(),
            merged: merge.value,
        }),
    })
}
