//! An undo history over JSON values (the editor's draft). Changes less than [`COALESCE_MS`]
//! apart form one step, so undo takes back a typed word, not a letter. Loading a file starts a
//! new history: undo never crosses into another version of the file. Pure: the caller passes
//! the time.

use serde_json::Value;

/// Changes closer together than this are one undo step.
pub const COALESCE_MS: f64 = 700.0;
/// At most this many steps are kept.
const LIMIT: usize = 200;

#[derive(Debug, Default)]
pub struct History {
    past: Vec<Value>,
    future: Vec<Value>,
    current: Value,
    last_at: f64,
    /// The next draft change is a load (start over) or an undo/redo (already recorded).
    skip: Option<Skip>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Skip {
    Load,
    Step,
}

impl History {
    /// Records that the draft is now `draft` (called on every draft change).
    pub fn observe(&mut self, draft: &Value, now: f64) {
        match self.skip.take() {
            Some(Skip::Load) => {
                self.past.clear();
                self.future.clear();
                self.current = draft.clone();
                return;
            }
            Some(Skip::Step) => {
                self.current = draft.clone();
                return;
            }
            None => {}
        }
        if *draft == self.current {
            return;
        }
        let previous = std::mem::replace(&mut self.current, draft.clone());
        if self.past.is_empty() || now - self.last_at > COALESCE_MS || previous.is_null() {
            self.past.push(previous);
            if self.past.len() > LIMIT {
                self.past.remove(0);
            }
        }
        self.last_at = now;
        self.future.clear();
    }

    /// The next draft change loads a file: the history starts over there.
    pub fn load(&mut self) {
        self.skip = Some(Skip::Load);
    }

    /// The draft to show after an undo, if there is a step to take back.
    pub fn undo(&mut self) -> Option<Value> {
        let previous = self.past.pop().filter(|v| !v.is_null())?;
        self.future
            .push(std::mem::replace(&mut self.current, previous.clone()));
        self.skip = Some(Skip::Step);
        self.last_at = 0.0;
        Some(previous)
    }

    /// The draft to show after a redo, if an undo can be taken back.
    pub fn redo(&mut self) -> Option<Value> {
        let next = self.future.pop()?;
        self.past
            .push(std::mem::replace(&mut self.current, next.clone()));
        self.skip = Some(Skip::Step);
        self.last_at = 0.0;
        Some(next)
    }

    pub fn can_undo(&self) -> bool {
        self.past.last().is_some_and(|v| !v.is_null())
    }

    pub fn can_redo(&self) -> bool {
        !self.future.is_empty()
    }
}
