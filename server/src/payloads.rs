//! The one owner of captured provider requests: forge-core's [`PayloadStore`] behind a lock,
//! with a small summary published to every editor tab (`event: payloads`) on each change.
//!
//! The live bridge forwards each request Pi sends (`POST /api/host/:id/payload`) and the usage
//! that answered it (`POST /api/host/:id/usage`); the browser and `pi-forge payload` read them
//! through `/api/payloads`. Captures live in memory only, unless the user saves one.

use std::sync::{Arc, Mutex, MutexGuard};

use forge_core::diff::{CaptureInfo, Entry, Usage, UsageReport};
use forge_core::payload::{Armed, Captured, PayloadError, PayloadList, PayloadStore, RunDiff};
use serde_json::{json, Value};
use tokio::sync::watch;

pub struct PayloadHub {
    store: Mutex<PayloadStore>,
    summary: watch::Sender<Value>,
}

impl Default for PayloadHub {
    fn default() -> Self {
        PayloadHub::new()
    }
}

/// One capture as the routes need it: its list row and the shared stored payload.
pub struct CaptureRef {
    pub summary: forge_core::diff::TurnSummary,
    pub payload: Option<Arc<Value>>,
}

impl From<&Entry> for CaptureRef {
    fn from(entry: &Entry) -> Self {
        CaptureRef {
            summary: entry.summary.clone(),
            payload: entry.payload.clone(),
        }
    }
}

impl PayloadHub {
    pub fn new() -> PayloadHub {
        let (summary, _) = watch::channel(summary_of(&PayloadStore::new().view()));
        PayloadHub {
            store: Mutex::new(PayloadStore::new()),
            summary,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PayloadStore> {
        // Every store operation leaves it consistent; a panic elsewhere cannot half-update it.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the store and publishes the new summary when it changed.
    fn update<T>(&self, f: impl FnOnce(&mut PayloadStore) -> T) -> T {
        let mut store = self.lock();
        let out = f(&mut store);
        let summary = summary_of(&store.view());
        drop(store);
        self.summary.send_if_modified(|current| {
            let changed = *current != summary;
            if changed {
                *current = summary;
            }
            changed
        });
        out
    }

    /// The summary each change publishes: `{type, sessionId, count, newest, latest, armed,
    /// usage}` where `usage` counts the turns that have usage (so a late report is an event too).
    pub fn watch(&self) -> watch::Receiver<Value> {
        self.summary.subscribe()
    }

    pub fn capture(
        &self,
        session_id: &str,
        captured_at: &str,
        stack_id: Option<&str>,
        info: CaptureInfo,
        payload: Value,
        dropped: u64,
    ) -> Captured {
        self.update(|s| s.capture(session_id, captured_at, stack_id, info, payload, dropped))
    }

    pub fn record_usage(&self, session_id: &str, seq: u64, report: &UsageReport) -> Option<Usage> {
        self.update(|s| s.record_usage(session_id, seq, report))
    }

    pub fn arm(&self, armed: Armed) -> PayloadList {
        self.update(|s| {
            s.arm(armed);
            s.view()
        })
    }

    pub fn clear(&self) -> PayloadList {
        self.update(|s| {
            s.clear();
            s.view()
        })
    }

    pub fn view(&self) -> PayloadList {
        self.lock().view()
    }

    pub fn get(&self, turn_id: &str) -> Result<CaptureRef, PayloadError> {
        self.lock().get(turn_id).map(CaptureRef::from)
    }

    pub fn diff(&self, from: Option<&str>, to: Option<&str>) -> Result<RunDiff, PayloadError> {
        self.lock().diff(from, to)
    }
}

fn summary_of(view: &PayloadList) -> Value {
    json!({
        "type": "payloads",
        "sessionId": view.session_id,
        "count": view.turns.len(),
        "newest": view.turns.last().map(|t| &t.turn_id),
        "latest": view.latest.as_ref().map(|t| &t.turn_id),
        "armed": view.armed.is_some(),
        "usage": view.turns.iter().filter(|t| t.usage.is_some()).count(),
    })
}
