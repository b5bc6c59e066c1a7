//! Undo and redo for the Preset draft (Ctrl+Z, Ctrl+Shift+Z or Ctrl+Y, and the editor's
//! buttons). Every change of the draft is recorded by an effect, whatever made it: typing, a
//! picker, a removed item, the JSON tab. The history itself (steps, coalescing, loads) is
//! forge-core's [`History`].

use leptos::prelude::*;
use serde_json::Value;

use forge_core::undo::History;

fn now() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

/// The draft's history, recorded by an effect on the draft. `steps` counts changes so the
/// buttons' enabled state follows.
#[derive(Clone, Copy)]
pub struct Undo {
    history: StoredValue<History>,
    pub steps: RwSignal<u64>,
}

impl Undo {
    pub fn new(draft: RwSignal<Value>) -> Undo {
        let undo = Undo {
            history: StoredValue::new(History::default()),
            steps: RwSignal::new(0),
        };
        Effect::new(move |_| {
            draft.with(|d| undo.history.update_value(|h| h.observe(d, now())));
            undo.steps.update(|n| *n += 1);
        });
        undo
    }

    pub fn load(&self) {
        self.history.update_value(History::load);
    }

    /// Takes back the last step; false when there is none.
    pub fn undo(&self, draft: RwSignal<Value>) -> bool {
        let mut previous = None;
        self.history.update_value(|h| previous = h.undo());
        previous.map(|v| draft.set(v)).is_some()
    }

    pub fn redo(&self, draft: RwSignal<Value>) -> bool {
        let mut next = None;
        self.history.update_value(|h| next = h.redo());
        next.map(|v| draft.set(v)).is_some()
    }

    pub fn can_undo(&self) -> bool {
        self.steps.track();
        self.history.with_value(History::can_undo)
    }

    pub fn can_redo(&self) -> bool {
        self.steps.track();
        self.history.with_value(History::can_redo)
    }
}
