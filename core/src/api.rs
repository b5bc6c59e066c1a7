//! The web ↔ server contract: the JSON bodies of the editor API as typed structs.
//!
//! The server builds its answers from these structs and the web app reads them into the same
//! structs, so a renamed or retyped field is a compile error on one side instead of a silently
//! empty value on the other. Member names are the wire's (`camelCase`). Where the server leaves a
//! member out (rather than writing `null`), the field says so with `skip_serializing_if`; an
//! `Option` without it is written as `null`. Resource objects (a stack, a profile, a capability as
//! the file holds it) and Pi's own data (provenance, messages, tool policies) stay
//! `serde_json::Value`: their shape belongs to their codecs, and unknown members must survive.
//!
//! `server/tests/contract.rs` reads every answer of a seeded workspace into these structs and
//! writes it back: the two must be equal, so a member the server adds, renames or drops without
//! the struct fails that test.
//!
//! The `/api/agent/*` and `/api/payloads*` bodies are in the `agent` and `payloads` submodules,
//! re-exported here.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::diag::Diagnostic;
use crate::diff::Section;
use crate::runtime::ToolInfo;

/// `Some(value)` for a member that is present, `null` included (`Option<Value>` alone would read
/// `null` as absent).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The error body of every failed request: `{error, code, field?, details?}`; a stale save adds
/// `currentRevision` and `current` (the file as it is now, `null` when it cannot be parsed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// A sentence for people.
    pub error: String,
    /// A stable machine word (`stale_revision`, `not_found`, `no_live_session`, …).
    pub code: String,
    /// The JSON field at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Anything structured: `{diagnostics}`, the conflicting resource, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub current: Option<Value>,
}

impl ErrorBody {
    /// The diagnostics of `details.diagnostics` (empty when there are none or they do not read).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.details
            .as_ref()
            .and_then(|d| d.get("diagnostics"))
            .and_then(|d| Vec::<Diagnostic>::deserialize(d).ok())
            .unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------------------------
// Views with a flattened part

/// A view struct whose first field is written flattened into the same JSON object
/// (`#[serde(flatten)]`). Reading one does not go through serde's `flatten`, which buffers the
/// object in serde's generic content and reads the flattened part from that a second way (a
/// few kilobytes of the browser bundle per struct): the object is read once as a `Value`, and
/// the flattened part and the struct's own members are each read from it, with unknown members
/// ignored, as `flatten` does.
macro_rules! flattened_view {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $(#[$flat_attr:meta])*
            pub $flat:ident: $flat_ty:ty,
            $($(#[$field_attr:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        #[derive(Serialize)]
        $(#[$attr])*
        pub struct $name {
            $(#[$flat_attr])*
            #[serde(flatten)]
            pub $flat: $flat_ty,
            $($(#[$field_attr])* pub $field: $ty,)*
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                /// The struct's own members.
                #[derive(Deserialize)]
                $(#[$attr])*
                struct Own {
                    $($(#[$field_attr])* $field: $ty,)*
                }
                let object = Value::deserialize(deserializer)?;
                let $flat =
                    <$flat_ty>::deserialize(object.clone()).map_err(serde::de::Error::custom)?;
                let own = Own::deserialize(object).map_err(serde::de::Error::custom)?;
                Ok($name {
                    $flat,
                    $($field: own.$field,)*
                })
            }
        }
    };
}

mod agent;
mod payloads;

pub use agent::*;
pub use payloads::*;

// ---------------------------------------------------------------------------------------------
// Resource views

/// The members every resource view has (`docs/api.md`, "Resource views").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceView {
    /// `scope:id`.
    pub selector: String,
    pub id: String,
    /// `project` or `global`.
    pub scope: String,
    /// The absolute path of the file.
    pub path: String,
    /// The same path under the original editor's name.
    pub file_path: String,
    /// `sha256:<hex>` of the file's bytes; empty when the file could not be read.
    pub revision: String,
    /// The bare 64 hex digits of `revision` (0.5.5's name).
    pub source_revision: String,
    /// Why the file could not be read; it is shown read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
    pub errors: usize,
    pub warnings: usize,
}

/// A successful create or save: the resource's view plus `ok: true`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saved<T> {
    #[serde(flatten)]
    pub view: T,
    pub ok: bool,
}

/// `{ok, deleted}` of a profile or capability delete.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deleted {
    pub ok: bool,
    /// The deleted resource's `scope:id`.
    pub deleted: Option<String>,
}

/// `{diagnostics, errors, warnings, valid}` of a stack or capability validation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub diagnostics: Vec<Diagnostic>,
    pub errors: usize,
    pub warnings: usize,
    pub valid: bool,
}

impl Validation {
    pub fn of(diagnostics: Vec<Diagnostic>) -> Validation {
        let (errors, warnings, _) = crate::diag::counts(&diagnostics);
        Validation {
            diagnostics,
            errors,
            warnings,
            valid: errors == 0,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stacks

flattened_view! {
    /// One row of `GET /api/stacks`.
    #[derive(Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct StackRow {
        pub common: ResourceView,
        pub name: Option<String>,
        pub description: Option<String>,
        pub auto_activate: bool,
        /// `replace` or `append`.
        pub mode: String,
        pub item_count: usize,
        /// The live session's active Preset.
        pub active: bool,
        /// A schema-1 file.
        pub legacy: bool,
        /// A global stack a project stack of the same id hides.
        pub shadowed: bool,
    }
}

/// What the app shows wherever it cannot act without a live Pi session (also the live
/// indicator's tooltip, which the server-drawn first screen shows too).
pub const NO_LIVE_SESSION: &str =
    "No live Pi session: start Pi in this project with the pi-forge extension (pi-forge pi install).";

/// The id of the first screen the server draws into the page (the app removes it when it
/// mounts).
pub const FIRST_SCREEN_ID: &str = "forge-first-screen";

/// The cookie the app sets to `dark` or `light` with its theme, so the server draws the page in
/// that theme (it cannot read the app's local storage).
pub const THEME_COOKIE: &str = "pi_forge_theme";

/// A badge of a row in the Presets list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowBadge {
    /// The badge's kind, also its CSS class: `active`, `error`, `warning` or `muted`.
    pub kind: &'static str,
    pub text: String,
    /// Tooltip; `None` for the `active` badge.
    pub title: Option<String>,
    /// The name read out instead of the text (the counts: "2 errors").
    pub label: Option<String>,
}

impl RowBadge {
    /// The error and warning badges of `errors` and `warnings` (none for a zero count), their
    /// names followed by `of` (" in the unsaved draft" for the open Preset's draft).
    pub fn counts(errors: usize, warnings: usize, of: &str) -> Vec<RowBadge> {
        [
            (errors, "error", "error", "✕"),
            (warnings, "warning", "warning", "!"),
        ]
        .into_iter()
        .filter(|(n, ..)| *n > 0)
        .map(|(n, kind, thing, mark)| {
            let label = format!("{}{of}", count_of(n, thing));
            RowBadge {
                kind,
                text: format!("{n} {mark}"),
                title: Some(label.clone()),
                label: Some(label),
            }
        })
        .collect()
    }
}

/// `n thing` or `n things`.
fn count_of(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// How the Presets list shows a row. The web app and the page the server renders before the
/// app starts both draw the row from these, so the two cannot disagree.
impl StackRow {
    /// The Preset's name, or its id when it has no (or a blank) name.
    pub fn title(&self) -> &str {
        self.name
            .as_deref()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(&self.common.id)
    }

    /// `replace · 3 items`.
    pub fn detail(&self) -> String {
        format!("{} · {}", self.mode, count_of(self.item_count, "item"))
    }

    /// The row's badges in the order shown; empty for most rows.
    pub fn badges(&self) -> Vec<RowBadge> {
        let mut out = Vec::new();
        if self.active {
            out.push(RowBadge {
                kind: "active",
                text: "active".into(),
                title: None,
                label: None,
            });
        }
        out.extend(RowBadge::counts(
            self.common.errors,
            self.common.warnings,
            "",
        ));
        let muted = [
            (
                self.shadowed,
                "shadowed",
                "A project Preset with the same id hides this one",
            ),
            (self.legacy, "legacy", ".pi/prompt-stacks (legacy folder)"),
        ];
        for (on, text, title) in muted {
            if on {
                out.push(RowBadge {
                    kind: "muted",
                    text: text.into(),
                    title: Some(title.into()),
                    label: None,
                });
            }
        }
        out
    }
}

impl StackList {
    /// The row to open when nothing is open: the active Preset, else the first row of `scope`,
    /// else the first row.
    pub fn opening(&self, scope: &str) -> Option<&StackRow> {
        let active = self.active_id.as_deref();
        self.stacks
            .iter()
            .find(|r| active == Some(r.common.selector.as_str()))
            .or_else(|| self.stacks.iter().find(|r| r.common.scope == scope))
            .or_else(|| self.stacks.first())
    }
}

/// `GET /api/stacks` (also embedded in the page as `forge-initial.list`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackList {
    pub stacks: Vec<StackRow>,
    pub active_id: Option<String>,
    pub trusted: bool,
    pub cwd: String,
    /// Resource folders that could not be listed.
    pub problems: Vec<Diagnostic>,
}

flattened_view! {
    /// `GET /api/stacks/:sel`: the stack as the file holds it.
    #[derive(Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct StackView {
        pub common: ResourceView,
        pub active: bool,
        pub legacy: bool,
        /// The raw object, unknown members included; `null` when the file is not JSON.
        pub stack: Value,
    }
}

/// `DELETE /api/stacks/:sel` → `{ok, deleted, activeId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackDeleted {
    pub ok: bool,
    pub deleted: Option<String>,
    pub active_id: Option<String>,
}

/// `POST /api/stacks/:sel/activate` and `POST /api/disable` → `{ok, activeId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Activated {
    pub ok: bool,
    pub active_id: Option<String>,
}

/// `POST /api/stacks/import` with `dryRun`: what an import would write, validated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportPreview {
    pub ok: bool,
    pub dry_run: bool,
    /// `native` or `sillytavern`.
    pub format: String,
    pub id: String,
    pub scope: String,
    /// A stack of that id exists in `scope` (the editor then asks for another id).
    pub exists: bool,
    pub existing_path: Option<String>,
    pub stack: Value,
    /// The migration report (`null` for a native file).
    pub report: Value,
    pub diagnostics: Vec<Diagnostic>,
    pub errors: usize,
    pub warnings: usize,
}

flattened_view! {
    /// `POST /api/stacks/import` (written): the new stack's view, the format and the report.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Imported {
        pub view: StackView,
        pub format: String,
        pub report: Value,
    }
}

/// A compiled prompt laid out for display and draft diffs (made by `compile::preview`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub stack_id: String,
    /// UTC ISO time of the compilation.
    pub generated_at: String,
    pub system: Section,
    pub messages: Vec<Section>,
    /// UTF-16 length of every section's content.
    pub total_chars: usize,
    /// `ceil(total_chars / 4)`.
    pub approx_tokens: usize,
    /// Load diagnostics, then the compiler's (system, then messages), then one info per enabled
    /// finalize rule.
    pub diagnostics: Vec<Diagnostic>,
}

/// `POST /api/stacks/:sel/preview`: the draft (or saved stack) compiled against the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackPreview {
    pub ok: bool,
    /// The stack's `scope:id` (a new draft's id).
    pub stack_id: String,
    /// Compiled against a live Pi session's facts.
    pub live_host: bool,
    /// The preview as markdown text.
    pub text: String,
    pub diagnostics: Vec<Diagnostic>,
    pub preview: Preview,
    /// The compiler's whole output (`compile::Compiled`).
    pub compiled: Value,
}

/// `POST /api/stacks/:sel/template-env`: what the draft's system-prompt templates see.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateEnv {
    pub ok: bool,
    /// `runtime.*` of the template scope (cwd, date, time, selected tools, `tool`, `slot`, …).
    pub runtime: Value,
    /// The Preset's parameters (v2) or variables (v1).
    pub parameters: Value,
}

/// `POST /api/reload` → `{ok, generation, changed, activeId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reloaded {
    pub ok: bool,
    pub generation: u64,
    /// How many resources changed.
    pub changed: usize,
    pub active_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Profiles

/// A model as `{provider, id}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    pub provider: String,
    pub id: String,
}

impl Model {
    /// `provider/id`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }
}

impl From<&crate::profile::ModelRef> for Model {
    fn from(m: &crate::profile::ModelRef) -> Model {
        Model {
            provider: m.provider.clone(),
            id: m.id.clone(),
        }
    }
}

/// A model Pi offers: `{provider, id, name}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChoice {
    pub provider: String,
    pub id: String,
    pub name: Option<String>,
}

/// What the live session runs with now (all `null` without one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentChoice {
    pub model: Option<Model>,
    pub thinking_level: Option<String>,
    pub prompt_stack: Option<String>,
    pub effective_tools: Vec<String>,
}

/// What applying a profile would set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetChoice {
    pub model: Model,
    pub thinking_level: String,
    /// The resolved stack's `scope:id`; `null` for none or when it does not resolve.
    pub prompt_stack: Option<String>,
    pub effective_tools: Vec<String>,
    /// The stack's tool policy as written.
    pub tool_policy: Option<Value>,
}

/// A profile's preflight: what applying it would set and whether it could be applied.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfilePreview {
    pub profile_id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub source_path: String,
    pub auto_activate: bool,
    pub current: CurrentChoice,
    pub target: TargetChoice,
    pub applicable: bool,
    pub live_host: bool,
    pub diagnostics: Vec<Diagnostic>,
}

/// One field's drift since the last apply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldDrift {
    /// What was applied (a model object, a string or `null`).
    pub expected: Value,
    /// What the session has now.
    pub actual: Value,
    pub changed: bool,
}

/// The drift of each field the last apply set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    pub model: FieldDrift,
    pub thinking_level: FieldDrift,
    pub prompt_stack: FieldDrift,
}

/// `lastApplied`: the provenance the last apply recorded, its source file's state and drift.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastApplied {
    /// As recorded in Pi's session (`profileId`, `scope`, `sourcePath`, `snapshot`, …).
    pub provenance: Value,
    /// `missing` | `unchanged` | `changed`.
    pub source_state: String,
    pub drift: Drift,
    /// The names of the drifted fields.
    pub drifted: Vec<String>,
}

/// `GET /api/profiles/status` and the collection's `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileStatus {
    pub live_host: bool,
    pub current: CurrentChoice,
    pub last_applied: Option<LastApplied>,
}

flattened_view! {
    /// `GET /api/profiles/:sel` and each entry of the collection.
    #[derive(Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct ProfileView {
        pub common: ResourceView,
        pub shadowed: bool,
        /// The raw object, unknown members included; `null` when the file is not JSON.
        pub profile: Value,
        pub preview: ProfilePreview,
        pub last_applied: Option<LastApplied>,
    }
}

/// A stack a profile may name: `{id, name, selector, scope}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StackChoice {
    pub id: String,
    pub name: Option<String>,
    pub selector: String,
    pub scope: String,
}

/// `GET /api/profiles`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileCollection {
    pub trusted: bool,
    pub live_host: bool,
    pub profile_directory: Option<String>,
    pub global_profile_directory: Option<String>,
    pub profiles: Vec<ProfileView>,
    pub status: ProfileStatus,
    /// The models the live Pi offers (empty without one).
    pub models: Vec<ModelChoice>,
    pub prompt_stacks: Vec<StackChoice>,
    /// The profile a fresh session applies (spec A8), as a selector; `None` when none would.
    #[serde(default)]
    pub auto_applies: Option<String>,
    /// Every profile that sets `autoActivate: true`, as selectors; more than one is a conflict.
    #[serde(default)]
    pub auto_claimants: Vec<String>,
}

/// `POST /api/profiles/validate` and `POST /api/profiles/:sel/preview`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileValidation {
    pub preview: ProfilePreview,
    pub diagnostics: Vec<Diagnostic>,
    pub errors: usize,
    pub warnings: usize,
    pub valid: bool,
}

/// What Pi took when a profile was applied.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedChoice {
    /// Pi's model as it answered (its own object), else the profile's.
    pub model: Value,
    pub thinking_level: Option<String>,
    pub prompt_stack: Option<String>,
    /// The tools Pi activated, as it answered (`null` when it did not say).
    pub active_tools: Value,
}

impl AppliedChoice {
    /// The active tools' names.
    pub fn tools(&self) -> Vec<String> {
        self.active_tools
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// One field an apply changed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// `model`, `thinkingLevel` or `promptStack`.
    pub field: String,
    pub from: Value,
    pub to: Value,
}

/// `POST /api/profiles/:sel/apply`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub ok: bool,
    pub profile_id: String,
    pub applied: AppliedChoice,
    pub changed: Vec<Change>,
    /// What Pi could not take as asked (a clamped thinking level, an unregistered tool).
    pub notes: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Capabilities

flattened_view! {
    /// `GET /api/capabilities/:sel` and each row of the list.
    #[derive(Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct CapabilityView {
        pub common: ResourceView,
        /// The Presets whose bindings resolve to this capability (selectors, each once).
        pub bound_by: Vec<String>,
        pub shadowed: bool,
        /// No error diagnostics.
        pub usable: bool,
        /// The raw object, unknown members included; `null` when the file is not JSON.
        pub capability: Value,
    }
}

/// `GET /api/capabilities`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityList {
    pub ok: bool,
    pub trusted: bool,
    pub capabilities: Vec<CapabilityView>,
}

/// A resource key as `{scope, id}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub scope: String,
    pub id: String,
}

/// Which binding of which Preset an effective capability comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingRef {
    pub preset: Key,
    pub id: String,
}

/// Where an effective capability comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingSource {
    /// Always `capability`.
    pub kind: String,
    pub key: Key,
    pub binding: BindingRef,
    /// The capability file's revision.
    pub revision: String,
}

/// One resolved binding of `POST /api/capabilities/effective`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveBinding {
    pub id: String,
    /// The capability's `scope:id`.
    #[serde(rename = "ref")]
    pub reference: String,
    pub model_callable: bool,
    pub source: BindingSource,
    /// The capability with the binding's overrides applied.
    pub effective: Value,
}

/// `GET /api/capability-state`, and the answer of both session mutations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapabilityStateAnswer {
    pub ok: bool,
    pub state: crate::capability::view::CapabilityStateView,
}

/// `GET /api/capability-state/available`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapabilityChoices {
    pub ok: bool,
    pub state: crate::capability::view::CapabilityStateView,
    pub choices: Vec<crate::capability::view::Choice>,
}

/// The `capability-state` event: the live session's capability view, `None` without one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityStateEvent {
    pub state: Option<crate::capability::view::CapabilityStateView>,
}

/// `POST /api/capabilities/effective`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EffectiveBindings {
    pub ok: bool,
    pub bindings: Vec<EffectiveBinding>,
}

// ---------------------------------------------------------------------------------------------
// Events

/// What changed for one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Created,
    Updated,
    Deleted,
}

/// Who caused a change: this server's own write, or anything else (an editor, git, a script).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    #[serde(rename = "self")]
    Own,
    External,
}

/// One changed resource file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// `stack`, `profile`, `capability` or `config`.
    pub kind: String,
    /// `scope:id` (`project:config` for the config file).
    pub key: String,
    /// Absolute path on disk.
    pub path: String,
    /// The new revision; `null` after a delete.
    pub revision: Option<String>,
    pub change: ChangeKind,
    pub origin: Origin,
}

/// The payload of one `changed` server-sent event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeEvent {
    /// Always `changed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Increases by one with every published change set.
    pub generation: u64,
    pub changes: Vec<FileChange>,
    /// The workspace-level problems (a resource folder that cannot be listed), present only
    /// when they changed with this reload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problems: Option<Vec<Diagnostic>>,
}

// ---------------------------------------------------------------------------------------------
// Meta, the live session, the runtime

/// The connected Pi session (the members of [`LiveView`] beside `connected: true`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    pub pi_version: String,
    pub extension_version: String,
    pub server_version: String,
    /// The extension and the server are different versions.
    pub version_mismatch: bool,
    pub mode: String,
    pub session_id: String,
    pub session_file: Option<String>,
    pub project_trusted: bool,
    pub connected_at: String,
    pub model: Option<Model>,
    pub thinking_level: Option<String>,
    pub active_stack_id: Option<String>,
    /// The last apply's provenance, as Pi's session holds it.
    pub provenance: Option<Value>,
}

/// `GET /api/live` and the `live` event: `{connected: false}` or the session.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LiveView {
    pub connected: bool,
    #[serde(flatten)]
    pub session: Option<LiveSession>,
}

/// Read as `flattened_view!` reads its views (one `Value`, each part read from it); the session
/// is `None` when the object's members do not make one (as serde's `flatten` reads an `Option`).
impl<'de> Deserialize<'de> for LiveView {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Own {
            connected: bool,
        }
        let object = Value::deserialize(deserializer)?;
        let session = LiveSession::deserialize(object.clone()).ok();
        let own = Own::deserialize(object).map_err(serde::de::Error::custom)?;
        Ok(LiveView {
            connected: own.connected,
            session,
        })
    }
}

impl LiveView {
    /// The session when one is connected.
    pub fn session(&self) -> Option<&LiveSession> {
        self.session.as_ref().filter(|_| self.connected)
    }
}

/// `GET /api/meta`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub name: String,
    pub version: String,
    pub features: Vec<String>,
    pub trusted: bool,
    pub live_host: bool,
    pub live: LiveView,
    /// Serving the demo workspace.
    pub demo: bool,
    pub project: String,
    pub global_dir: String,
    pub generation: u64,
    /// Resource folders that could not be listed.
    pub problems: Vec<Diagnostic>,
}

/// A skill of `GET /api/resources`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillView {
    pub name: String,
    pub description: String,
    /// The skill's file.
    pub source: String,
    /// Hidden from the model (`disableModelInvocation`).
    pub hidden: bool,
}

/// The tool and skill names of one source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceGroup {
    pub source: String,
    pub tools: Vec<String>,
    pub skills: Vec<String>,
}

/// A tool of `GET /api/resources`: `{name, description, source, active}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub description: Option<String>,
    pub source: Option<String>,
    pub active: bool,
}

impl From<&ToolInfo> for ToolView {
    fn from(tool: &ToolInfo) -> ToolView {
        ToolView {
            name: tool.name.clone(),
            description: tool.description.clone(),
            source: tool.source.clone(),
            active: tool.active,
        }
    }
}

/// `GET /api/resources`: the tools and skills previews compile against, grouped by source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub live_host: bool,
    pub tools: Vec<ToolView>,
    pub skills: Vec<SkillView>,
    pub groups: Vec<ResourceGroup>,
}

/// `POST /api/regex/try` (without `ok`).
pub use crate::stack::RuleTrial;

/// `GET /api/search?q=`: the Presets whose content matches, in list order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSearch {
    pub ok: bool,
    pub query: String,
    pub results: Vec<crate::stack::search::StackSearchHit>,
}

/// The `agent-plans` event: how many plans wait for a person, how many approved runs are in
/// progress (queued or running), how many runs started a child and how many this server
/// finished (sent after `ready` and whenever any of them changes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPlansEvent {
    pub pending: u64,
    #[serde(default)]
    pub running: u64,
    #[serde(default)]
    pub started: u64,
    pub finished: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip<T: Serialize + for<'de> Deserialize<'de>>(value: Value) {
        let typed: T = serde_json::from_value(value.clone()).expect("reads");
        assert_eq!(
            crate::json::to_compact(&serde_json::to_value(&typed).expect("writes")),
            crate::json::to_compact(&value)
        );
    }

    fn row(selector: &str, name: Option<&str>) -> StackRow {
        let (scope, id) = selector.split_once(':').unwrap_or(("project", selector));
        StackRow {
            common: ResourceView {
                selector: selector.into(),
                id: id.into(),
                scope: scope.into(),
                ..Default::default()
            },
            name: name.map(str::to_string),
            mode: "append".into(),
            item_count: 1,
            ..Default::default()
        }
    }

    #[test]
    fn a_row_shows_its_name_or_id_its_mode_and_item_count_and_its_badges_in_order() {
        let mut r = row("project:reviewer", Some("  "));
        assert_eq!(r.title(), "reviewer");
        assert_eq!(r.detail(), "append · 1 item");
        assert_eq!(r.badges(), vec![]);
        r.name = Some("Careful reviewer".into());
        r.item_count = 0;
        r.active = true;
        r.common.errors = 2;
        r.common.warnings = 1;
        r.shadowed = true;
        r.legacy = true;
        assert_eq!(r.title(), "Careful reviewer");
        assert_eq!(r.detail(), "append · 0 items");
        let shown: Vec<_> = r
            .badges()
            .into_iter()
            .map(|b| (b.kind, b.text, b.title, b.label))
            .collect();
        let s = |t: &str| Some(t.to_string());
        assert_eq!(
            shown,
            vec![
                ("active", "active".into(), None, None),
                ("error", "2 ✕".into(), s("2 errors"), s("2 errors")),
                ("warning", "1 !".into(), s("1 warning"), s("1 warning")),
                (
                    "muted",
                    "shadowed".into(),
                    s("A project Preset with the same id hides this one"),
                    None
                ),
                (
                    "muted",
                    "legacy".into(),
                    s(".pi/prompt-stacks (legacy folder)"),
                    None
                ),
            ]
        );
    }

    #[test]
    fn the_list_opens_the_active_preset_else_the_scopes_first_else_the_first() {
        let mut list = StackList {
            stacks: vec![
                row("global:a", None),
                row("project:b", None),
                row("project:c", None),
            ],
            ..Default::default()
        };
        let opened = |l: &StackList, scope| l.opening(scope).map(|r| r.common.selector.clone());
        assert_eq!(opened(&list, "project").as_deref(), Some("project:b"));
        assert_eq!(opened(&list, "global").as_deref(), Some("global:a"));
        list.active_id = Some("project:c".into());
        assert_eq!(opened(&list, "global").as_deref(), Some("project:c"));
        list.active_id = Some("project:gone".into());
        list.stacks.remove(1);
        list.stacks.remove(1);
        assert_eq!(opened(&list, "project").as_deref(), Some("global:a"));
        list.stacks.clear();
        assert_eq!(opened(&list, "project"), None);
    }

    #[test]
    fn absent_and_null_members_are_written_as_the_server_wrote_them() {
        round_trip::<ErrorBody>(json!({"error": "Gone.", "code": "not_found"}));
        round_trip::<ErrorBody>(json!({
            "error": "Stale.", "code": "stale_revision", "field": "stack",
            "details": {"diagnostics": []}, "currentRevision": "sha256:ab", "current": null
        }));
        round_trip::<LiveView>(json!({"connected": false}));
        round_trip::<ChangeEvent>(json!({
            "type": "changed", "generation": 3,
            "changes": [{
                "kind": "stack", "key": "project:a", "path": "/p/a.json", "revision": null,
                "change": "deleted", "origin": "self"
            }]
        }));
        round_trip::<ChangeEvent>(json!({
            "type": "changed", "generation": 4, "changes": [],
            "problems": [{"level": "error", "message": "Cannot list /p."}]
        }));
        round_trip::<ResourceView>(json!({
            "selector": "project:a", "id": "a", "scope": "project", "path": "/p/a.json",
            "filePath": "/p/a.json", "revision": "", "sourceRevision": "",
            "unreadable": "Permission denied", "diagnostics": [], "errors": 0, "warnings": 0
        }));
    }

    #[test]
    fn a_member_the_struct_lacks_or_misses_fails_the_round_trip() {
        let extra = json!({"ok": true, "activeId": null, "generation": 1});
        let typed: Activated = serde_json::from_value(extra.clone()).expect("reads");
        assert_eq!(
            serde_json::to_value(&typed).expect("writes"),
            json!({"ok": true, "activeId": null})
        );
        // An absent `Option` member reads as `None` and comes back as `null`: the round trip
        // differs. An absent required member does not read at all.
        let missing: Activated = serde_json::from_value(json!({"ok": true})).expect("reads");
        assert_eq!(
            serde_json::to_value(&missing).expect("writes"),
            json!({"ok": true, "activeId": null})
        );
        assert!(serde_json::from_value::<Activated>(json!({"activeId": null})).is_err());
    }

    #[test]
    fn an_error_body_reads_its_diagnostics() {
        let body: ErrorBody = serde_json::from_value(json!({
            "error": "x", "code": "not_usable",
            "details": {"diagnostics": [{"level": "error", "message": "Bad."}]}
        }))
        .expect("reads");
        assert_eq!(body.diagnostics(), vec![Diagnostic::error("Bad.")]);
        assert_eq!(body.current, None);
    }
}
