//! What keeps the Payloads state current for the whole app: it is created with the shell, and
//! the capture list and the run diffs load (their code on demand, `split`) while a view that
//! shows them is on screen.

use std::collections::HashSet;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::dock::Dock;
use crate::payloads::{PayloadTab, Payloads, RunDiffState};
use crate::state::{App, Surface};

/// Creates the shared state; fetches the capture list whenever a view that shows captures is on
/// screen and the server reports a change (or the view appears).
pub fn provide(app: App, dock: Dock) {
    let p = Payloads {
        list: RwSignal::new(None),
        error: RwSignal::new(None),
        selected: RwSignal::new(None),
        tab: RwSignal::new(PayloadTab::Tree),
        payload: RwSignal::new(None),
        loading: RwSignal::new(false),
        expanded: RwSignal::new(HashSet::from([String::new()])),
        pages: RwSignal::new(Default::default()),
        full: RwSignal::new(HashSet::new()),
        query: RwSignal::new(String::new()),
        current: RwSignal::new(0),
        diff: RunDiffState::new(),
        dock_diff: RunDiffState::new(),
        list_seq: StoredValue::new(0),
        payload_seq: StoredValue::new(0),
    };
    provide_context(p);
    let on_screen = move || {
        app.surface.get() == Surface::Payloads
            || (dock.open.get() && dock.tab.get() == crate::dock::DockTab::Run)
    };
    Effect::new(move |_| {
        app.payload_events.track();
        if on_screen() {
            crate::split::payload_list(app, p);
        }
    });
    // The surface's diff follows its ends and every list change (new captures, late usage).
    Effect::new(move |_| {
        p.list.track();
        p.diff.from.track();
        p.diff.to.track();
        if app.surface.get() == Surface::Payloads && p.tab.get() == PayloadTab::Diff {
            crate::split::run_diff(p.diff);
        }
    });
    Effect::new(move |_| {
        p.list.track();
        if dock.open.get() && dock.tab.get() == crate::dock::DockTab::Run {
            crate::split::run_diff(p.dock_diff);
        }
    });
    // The selected capture's JSON.
    Effect::new(move |_| {
        let Some(turn) = p.selected.get() else {
            p.payload.set(None);
            return;
        };
        if p.payload
            .with_untracked(|x| x.as_ref().is_some_and(|(t, _)| *t == turn))
        {
            return;
        }
        let my = p.payload_seq.get_value() + 1;
        p.payload_seq.set_value(my);
        p.loading.set(true);
        spawn_local(async move {
            let answer = api::get(&format!("/api/payloads/{}", api::seg(&turn))).await;
            if p.payload_seq.get_value() != my {
                return;
            }
            p.loading.set(false);
            match answer {
                Ok(v) => {
                    p.error.set(None);
                    p.expanded.set(HashSet::from([String::new()]));
                    p.pages.set(Default::default());
                    p.full.set(HashSet::new());
                    p.current.set(0);
                    p.payload.set(Some((turn, Arc::new(v))));
                }
                Err(e) => {
                    p.payload.set(None);
                    p.error.set(Some(e.message));
                }
            }
        });
    });
}
