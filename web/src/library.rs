//! What the library surfaces (agent profiles, capabilities) share: the edit form's state (the
//! saved copy, the draft, the base revision), how it follows the file watcher, its banners
//! (read-only, changed on disk, stale save), delete with confirm, and the new-id check.
//!
//! The Preset editor has its own, richer machinery (buffers, merge, per-item state) in
//! `state.rs`; these surfaces edit one small JSON object and need only this.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;

use crate::api::{self, seg, Method};
use crate::state::{App, Change, Dialog, Tone};

/// The resource being edited: `selector: None` is a new, unsaved one.
#[derive(Clone, Debug, PartialEq)]
pub struct Editing {
    pub selector: Option<String>,
    /// The revision the draft is based on (sent with the save; a stale one gets 409).
    pub revision: Option<String>,
    pub saved: Value,
    /// Why the file could not be read: the resource is shown read-only with this reason.
    pub unreadable: Option<String>,
}

/// One edit form. `conflict` holds the disk's revision after a refused (stale) save;
/// `disk_changed` says the file changed while the draft had unsaved edits.
#[derive(Clone, Copy)]
pub struct Form {
    pub editing: RwSignal<Option<Editing>>,
    pub draft: RwSignal<Value>,
    pub conflict: RwSignal<Option<String>>,
    pub disk_changed: RwSignal<bool>,
}

impl Form {
    pub fn new() -> Form {
        Form {
            editing: RwSignal::new(None),
            draft: RwSignal::new(Value::Null),
            conflict: RwSignal::new(None),
            disk_changed: RwSignal::new(false),
        }
    }

    pub fn is_new(&self) -> bool {
        self.editing
            .with(|e| e.as_ref().is_some_and(|e| e.selector.is_none()))
    }

    /// The selector of the saved resource being edited (`None`: nothing, or a new one).
    pub fn selector(&self) -> Option<String> {
        self.editing
            .with(|e| e.as_ref().and_then(|e| e.selector.clone()))
    }

    pub fn dirty(&self) -> bool {
        let draft = self.draft;
        self.editing
            .with(|e| e.as_ref().is_some_and(|e| draft.with(|d| *d != e.saved)))
    }

    fn open(&self, draft: Value, editing: Editing) {
        self.conflict.set(None);
        self.disk_changed.set(false);
        self.draft.set(draft);
        self.editing.set(Some(editing));
    }

    /// Opens a new, unsaved resource with `draft` as its first state.
    pub fn open_new(&self, draft: Value) {
        self.open(
            draft.clone(),
            Editing {
                selector: None,
                revision: None,
                saved: draft,
                unreadable: None,
            },
        );
    }

    /// Opens the saved resource `selector` (the object of its `GET /api/<kind>/:sel` view, that
    /// view's revision and why it cannot be written, if it cannot).
    pub fn open_saved(
        &self,
        selector: String,
        saved: Value,
        revision: Option<String>,
        unreadable: Option<String>,
    ) {
        self.open(
            saved.clone(),
            Editing {
                selector: Some(selector),
                revision,
                saved,
                unreadable,
            },
        );
    }

    pub fn close(&self) {
        self.editing.set(None);
        self.conflict.set(None);
        self.disk_changed.set(false);
    }

    /// Follows the watcher: an external change to the resource being edited reloads a clean
    /// form (`reload(selector)`) and raises the "changed on disk" banner over a dirty one. Only
    /// the event is tracked: tracking the form too would rerun this on every keystroke.
    pub fn follow(self, change: RwSignal<Option<Change>>, reload: impl Fn(String) + 'static) {
        Effect::new(move |_| {
            let Some((key, _revision, origin)) = change.get() else {
                return;
            };
            if origin == "self" {
                return;
            }
            untrack(|| {
                if self.selector().as_deref() != Some(key.as_str()) {
                    return;
                }
                if self.dirty() {
                    self.disk_changed.set(true);
                } else {
                    reload(key);
                }
            });
        });
    }

    /// Cancel: closes the form, asking first when it has unsaved edits.
    pub fn cancel(self, app: App, noun: &str) {
        if self.dirty() {
            app.dialog.set(Some(Dialog::Confirm {
                title: format!("Discard changes to this {noun}?"),
                body: "Your unsaved changes will be lost.".into(),
                confirm: "Discard changes".into(),
                danger: true,
                on_confirm: std::sync::Arc::new(move || self.close()),
            }));
        } else {
            self.close();
        }
    }
}

/// The form's banners: read-only (unreadable file), changed on disk while dirty, and a save
/// refused because the file changed ("Save mine over it" / "Use the disk version").
/// `reload(selector)` reads the disk version; `overwrite(revision)` saves over it.
#[component]
pub fn FormBanners(
    form: Form,
    noun: &'static str,
    #[prop(into)] reload: Callback<String>,
    #[prop(into)] overwrite: Callback<String>,
) -> impl IntoView {
    let reload_now = move || {
        if let Some(sel) = form.selector() {
            reload.run(sel);
        }
    };
    view! {
        {move || form.editing.with(|e| e.as_ref().and_then(|e| e.unreadable.clone())).map(|reason| view! {
            <div class="banner error read-only" role="alert">
                {format!("Read-only: {reason}. pi-forge cannot save or delete this file.")}
            </div>
        })}
        {move || form.disk_changed.get().then(|| view! {
            <div class="banner warn disk-changed" role="alert">
                <span>{format!("This {noun} changed on disk. Your unsaved changes are still here.")}</span>
                <button class="reload-disk" on:click=move |_| reload_now()>"Reload from disk"</button>
                <button class="keep-mine" on:click=move |_| form.disk_changed.set(false)>"Keep mine"</button>
            </div>
        })}
        {move || form.conflict.get().map(|rev| view! {
            <div class="banner error conflict" role="alert">
                <span>"Not saved: the file changed on disk since you opened it."</span>
                <button class="overwrite" on:click=move |_| overwrite.run(rev.clone())>"Save mine over it"</button>
                <button class="reload-disk" on:click=move |_| reload_now()>"Use the disk version"</button>
            </div>
        })}
    }
}

/// The part of a write's answer the forms need (the rest of the view is not read).
#[derive(serde::Deserialize)]
struct Receipt {
    selector: String,
}

/// Saves the form's draft (`draft`, already checked by the caller): `PUT /api/<route>/:sel` at
/// the form's base revision (or `force`, the disk's, to save over it), or `POST /api/<route>`
/// with `scope` for a new one. `field` names the object in the body (`profile`, `capability`);
/// `label` names it in the status line. A stale save keeps the draft and raises the conflict
/// banner; `done(selector)` runs after a write.
#[allow(clippy::too_many_arguments)]
pub fn save(
    app: App,
    form: Form,
    route: &'static str,
    field: &'static str,
    draft: Value,
    scope: String,
    label: String,
    force: Option<String>,
    done: impl Fn(String) + 'static,
) {
    let Some(editing) = form.editing.get_untracked() else {
        return;
    };
    if force.is_none() && !untrack(|| form.dirty()) && editing.selector.is_some() {
        return;
    }
    spawn_local(async move {
        let result = match &editing.selector {
            Some(sel) => {
                let rev = force.or(editing.revision.clone());
                let mut body = serde_json::Map::new();
                body.insert(field.into(), draft);
                let path = format!("/api/{route}/{}", seg(sel));
                let body = Value::Object(body);
                api::call_as::<Receipt>(Method::Put, &path, Some(&body), rev.as_deref()).await
            }
            None => {
                let mut body = serde_json::Map::new();
                body.insert(field.into(), draft);
                body.insert("scope".into(), Value::String(scope));
                api::post_as::<Receipt>(&format!("/api/{route}"), &Value::Object(body)).await
            }
        };
        // Written (or not) whether or not the form is still open: the status line says so
        // either way; the form's own state only while its surface is mounted.
        let alive = !form.editing.is_disposed();
        match result {
            Ok(receipt) => {
                let created = editing.selector.is_none();
                app.say(
                    format!("{} {label}", if created { "Created" } else { "Saved" }),
                    Tone::Ok,
                );
                if alive {
                    form.close();
                    done(receipt.selector);
                }
            }
            Err(e) if e.is_stale() => {
                if alive {
                    form.conflict
                        .set(Some(e.body.current_revision.clone().unwrap_or_default()));
                }
                app.say(format!("Not saved: {label} changed on disk."), Tone::Error);
            }
            Err(e) => app.fail(&e),
        }
    });
}

/// Delete with confirm: `DELETE /api/<route>/:sel` at `revision`; a stale revision (the file
/// changed since it was shown) deletes nothing and says so. `label` names it in the status
/// line; `done` runs after a delete while `view` (a signal of the surface that asked) is alive.
#[allow(clippy::too_many_arguments)]
pub fn confirm_delete(
    app: App,
    view: impl IsDisposed + Copy + Send + Sync + 'static,
    route: &'static str,
    selector: String,
    revision: String,
    label: String,
    path: String,
    done: impl Fn() + Send + Sync + 'static,
) {
    let done = std::sync::Arc::new(done);
    app.dialog.set(Some(Dialog::Confirm {
        title: format!("Delete {selector}?"),
        body: format!("This deletes {path} from disk. It cannot be undone."),
        confirm: "Delete".into(),
        danger: true,
        on_confirm: std::sync::Arc::new(move || {
            let (sel, rev, label, done) = (
                selector.clone(),
                revision.clone(),
                label.clone(),
                done.clone(),
            );
            spawn_local(async move {
                let path = format!("/api/{route}/{}", seg(&sel));
                match api::call(Method::Delete, &path, None, Some(&rev)).await {
                    Ok(_) => {
                        app.say(format!("Deleted {label}"), Tone::Ok);
                        // The user may have left the surface meanwhile.
                        if !view.is_disposed() {
                            done();
                        }
                    }
                    Err(e) if e.is_stale() => app.say(
                        format!(
                            "Not deleted: {label} changed on disk. Look at the new version first."
                        ),
                        Tone::Error,
                    ),
                    Err(e) => app.fail(&e),
                }
            });
        }),
    }));
}

/// Why `id` cannot be the id of a new `noun` in `scope` (`taken`: one with that id exists there).
pub fn new_id_problem(id: &str, scope: &str, noun: &str, taken: bool) -> Option<String> {
    if id.is_empty() {
        return Some("Enter an id.".into());
    }
    if !forge_core::id::is_valid_id(id) {
        return Some(format!("Not a valid id: {}", forge_core::id::ID_RULE));
    }
    if let Some(problem) = forge_core::id::id_length_problem(id) {
        return Some(problem);
    }
    taken.then(|| format!("A {scope} {noun} with the id {id} already exists."))
}

/// How the status line names a resource: the bare id in the project, `global:id` otherwise.
pub fn label(scope: &str, id: &str) -> String {
    if scope == "global" {
        format!("global:{id}")
    } else {
        id.to_string()
    }
}
