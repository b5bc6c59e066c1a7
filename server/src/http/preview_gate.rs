//! At most one draft preview compiling per stack: a newer draft supersedes the older ones.
//!
//! Every compile is bounded (forge-core gives each regex rule a step budget), but a user typing
//! into a stack with a slow rule would otherwise queue one compile per keystroke on the blocking
//! pool. [`PreviewGate`] is the one owner of the per-selector state: a request takes a ticket,
//! waits until the compile before it has finished, and is answered 409 `superseded` without
//! compiling when a newer ticket was taken meanwhile (the editor only shows the newest answer).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;

use super::error::ApiError;

/// One selector's state: the newest ticket and the lock a compile holds.
#[derive(Default)]
struct Lane {
    newest: AtomicU64,
    compiling: Arc<tokio::sync::Mutex<()>>,
}

/// Draft previews in flight, per selector.
#[derive(Default)]
pub struct PreviewGate {
    lanes: Mutex<HashMap<String, Arc<Lane>>>,
}

/// The right to compile one draft preview; held while compiling.
pub struct Turn {
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl PreviewGate {
    pub fn new() -> PreviewGate {
        PreviewGate::default()
    }

    /// Waits for the compile before this one on `sel`; 409 `superseded` when a newer draft of
    /// the same selector arrived meanwhile.
    pub async fn enter(&self, sel: &str) -> Result<Turn, ApiError> {
        let lane = {
            let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            lanes.entry(sel.to_string()).or_default().clone()
        };
        let ticket = lane.newest.fetch_add(1, Ordering::SeqCst) + 1;
        let guard = lane.compiling.clone().lock_owned().await;
        if lane.newest.load(Ordering::SeqCst) != ticket {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "superseded",
                "A newer draft of this stack was sent for preview; this one was not compiled.",
            ));
        }
        Ok(Turn { _guard: guard })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_newer_draft_supersedes_the_ones_waiting() {
        let gate = Arc::new(PreviewGate::new());
        let first = gate.enter("alpha").await.ok();
        assert!(first.is_some());
        let waiting = |gate: &Arc<PreviewGate>| {
            let gate = gate.clone();
            tokio::spawn(async move { gate.enter("alpha").await.map(|_| ()) })
        };
        let older = waiting(&gate);
        while newest(&gate) < 2 {
            tokio::task::yield_now().await;
        }
        let newer = waiting(&gate);
        while newest(&gate) < 3 {
            tokio::task::yield_now().await;
        }
        // Another stack has its own lane.
        assert!(gate.enter("beta").await.is_ok());
        drop(first);
        let older = older.await.ok().map(|r| r.map_err(|e| e.code));
        let newer = newer.await.ok().map(|r| r.map_err(|e| e.code));
        assert_eq!(older, Some(Err("superseded")));
        assert_eq!(newer, Some(Ok(())));
    }

    fn newest(gate: &PreviewGate) -> u64 {
        let lanes = gate.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes
            .get("alpha")
            .map_or(0, |lane| lane.newest.load(Ordering::SeqCst))
    }
}
