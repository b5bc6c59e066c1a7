//! The write service: create, save, delete and fork prompt stacks, agent profiles and
//! capabilities, plus draft validation. HTTP handlers parse their input, call one function here
//! and map the typed [`ServiceError`] to a status, a stable code and a message.
//!
//! Every function takes the current [`WorkspaceSnapshot`] (what the user saw: resolution, ids,
//! duplicates) and a [`Store`] (where the bytes go). The snapshot is never mutated; the caller
//! reloads after a successful write.
//!
//! Rules and decisions:
//! - **Trust.** An untrusted snapshot refuses every write of a project resource
//!   ([`ServiceError::Untrusted`], 403). Global writes stay allowed in an untrusted project: the
//!   web-editor spec lists "global writes tied to project trust" as a weakness (§6.4), and an
//!   untrusted project shows (and so edits) global resources only. A bare stack or capability
//!   selector therefore resolves against global entries alone when the project is untrusted.
//! - **Revisions.** Every update and delete names the revision it is based on, as `sha256:<hex>`
//!   or as a bare 64-digit hex `sourceRevision`; none → [`ServiceError::MissingRevision`] (428).
//!   The store's compare-and-swap decides; a mismatch is [`ServiceError::Stale`] carrying the
//!   file's current revision and its current JSON, both from one read. A create with `overwrite`
//!   replaces an existing same-scope resource only at the revision the snapshot holds — never
//!   blind.
//! - **Selectors.** Stacks and capabilities: a bare id prefers the project (one project match
//!   wins even when invalid; several are ambiguous; only zero fall back to global); a qualified
//!   selector is exact. Profiles: a bare id means the project only, a global profile needs
//!   `global:<id>` (web-editor §2.4). Writes to a legacy stack file update it in place.
//! - **Bodies.** A body is the raw JSON object as the editor holds it and is written exactly as
//!   given (`json::to_pretty`), so unknown fields survive; it is never replaced by the normalized
//!   form. Stacks first pass the server pre-checks of web-editor §2.3, then the id grammar, then
//!   the stack codec (plus the structure of `capabilities` bindings); profiles and capabilities
//!   pass their codecs. Any error diagnostic refuses the write ([`ServiceError::Invalid`], the
//!   first error's message and field, all diagnostics attached); warnings never block a save.
//!   Reference resolution (a profile's stack, a binding's capability) is reported by
//!   [`validate`] but does not block a save, so resources can be written in any order.
//! - **Ids** are immutable on save ([`ServiceError::IdImmutable`]); new files are `<id>.json` in
//!   the scope's primary directory; a capability file must be named `<id>.json` to be saved.
//! - **Profiles**: a second same-scope `autoActivate: true` is refused with
//!   [`ServiceError::AutoActivateConflict`] (409, the profile being replaced excluded).
//! - **Fork** copies the source's raw object with the new id and creates it exclusively. When the
//!   scope changes, bare references (a profile's `promptStack`, a binding's `ref`) are qualified
//!   with the source scope so they keep meaning the same resource (a global copy that would
//!   reference a project resource is then refused by the codec). `autoActivate: true` becomes
//!   `false` in the copy, so a fork never competes with its source for auto-activation.
//! - Nothing is ever half-written: every write is one [`Store`] call.

use serde_json::Value;

use super::{Dir, FileRef, Loaded, Store, StoreError, WorkspaceSnapshot};
use crate::capability;
use crate::diag::{dedupe, Diagnostic};
use crate::id::{
    id_length_problem, is_valid_id, parse_selector, ResourceKey, Scope, Selector, ID_RULE,
};
use crate::js::js_trim;
use crate::json::{parse_bytes, to_pretty};
use crate::profile;
use crate::stack;

pub use super::Kind;

/// A file the service wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub key: ResourceKey,
    pub file: FileRef,
    /// Path for people (absolute on disk).
    pub path: String,
    /// `sha256:<hex>` of the bytes written.
    pub revision: String,
}

/// Why a write (or a lookup for one) was refused. [`status`](ServiceError::status),
/// [`code`](ServiceError::code) and [`field`](ServiceError::field) give the HTTP mapping; the
/// `Display` text is the user-facing message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ServiceError {
    /// 403 `untrusted_project`. `action` is e.g. `save prompt stacks`.
    #[error("Project is not trusted; refusing to {action}.")]
    Untrusted { action: String },
    /// 400 `invalid_input`: the first error's message and field, with every diagnostic.
    #[error("{message}")]
    Invalid {
        message: String,
        field: Option<String>,
        diagnostics: Vec<Diagnostic>,
    },
    /// 400 `id_immutable`.
    #[error("{}", id_immutable_message(*.kind))]
    IdImmutable { kind: Kind },
    /// 404 `not_found`.
    #[error("Unknown {}: {selector}", noun(*.kind))]
    NotFound { kind: Kind, selector: String },
    /// 409 `ambiguous`: several files of one scope define the id.
    #[error("{} {selector} is ambiguous: several files define it ({}).", title(*.kind), .paths.join(", "))]
    Ambiguous {
        kind: Kind,
        selector: String,
        paths: Vec<String>,
    },
    /// 409 `exists`.
    #[error("{} already exists: {id}", title(*.kind))]
    Exists {
        kind: Kind,
        id: String,
        path: String,
    },
    /// 409 `auto_activate_conflict`: another profile of the scope already sets
    /// `autoActivate: true`.
    #[error("Only one {scope} agent profile may set autoActivate: true; it is already requested by {other}.")]
    AutoActivateConflict { scope: Scope, other: String },
    /// 409 `stale_revision`: the file is no longer at the revision the change was based on.
    /// `current` is the file's current JSON (`None` when it does not parse).
    #[error("The file changed on disk and is now at revision {current_revision}; refresh before changing it.")]
    Stale {
        current_revision: String,
        current: Option<Value>,
    },
    /// 428 `revision_required`.
    #[error(
        "This change must name the revision it is based on (an expected revision is required)."
    )]
    MissingRevision,
    /// 403 `invalid_path`.
    #[error("{0}")]
    InvalidPath(String),
    /// 409 `read_only`: the file is read-only on disk; pi-forge does not replace or delete it.
    #[error("{0}")]
    ReadOnly(String),
    /// 409 `unreadable`: the file could not be read (too large, not a regular file, …), so it
    /// has no revision to save over.
    #[error("{path} cannot be changed from pi-forge: {reason}")]
    Unreadable { path: String, reason: String },
    /// 500 `io`.
    #[error("{0}")]
    Io(String),
}

impl ServiceError {
    pub fn status(&self) -> u16 {
        match self {
            ServiceError::Untrusted { .. } | ServiceError::InvalidPath(_) => 403,
            ServiceError::Invalid { .. } | ServiceError::IdImmutable { .. } => 400,
            ServiceError::NotFound { .. } => 404,
            ServiceError::Ambiguous { .. }
            | ServiceError::Exists { .. }
            | ServiceError::AutoActivateConflict { .. }
            | ServiceError::Stale { .. }
            | ServiceError::ReadOnly(_)
            | ServiceError::Unreadable { .. } => 409,
            ServiceError::MissingRevision => 428,
            ServiceError::Io(_) => 500,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::Untrusted { .. } => "untrusted_project",
            ServiceError::Invalid { .. } => "invalid_input",
            ServiceError::IdImmutable { .. } => "id_immutable",
            ServiceError::NotFound { .. } => "not_found",
            ServiceError::Ambiguous { .. } => "ambiguous",
            ServiceError::Exists { .. } => "exists",
            ServiceError::AutoActivateConflict { .. } => "auto_activate_conflict",
            ServiceError::Stale { .. } => "stale_revision",
            ServiceError::MissingRevision => "revision_required",
            ServiceError::InvalidPath(_) => "invalid_path",
            ServiceError::ReadOnly(_) => "read_only",
            ServiceError::Unreadable { .. } => "unreadable",
            ServiceError::Io(_) => "io",
        }
    }

    /// The body field the error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            ServiceError::Invalid { field, .. } => field.as_deref(),
            ServiceError::IdImmutable { .. } | ServiceError::Exists { .. } => Some("id"),
            ServiceError::AutoActivateConflict { .. } => Some("autoActivate"),
            _ => None,
        }
    }

    /// The diagnostics of an [`Invalid`](ServiceError::Invalid) body; empty otherwise.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ServiceError::Invalid { diagnostics, .. } => diagnostics,
            _ => &[],
        }
    }

    fn invalid(message: impl Into<String>, field: Option<&str>) -> ServiceError {
        let message = message.into();
        let mut diagnostic = Diagnostic::error(message.clone());
        if let Some(field) = field {
            diagnostic = diagnostic.with_field(field);
        }
        ServiceError::Invalid {
            message,
            field: field.map(str::to_string),
            diagnostics: vec![diagnostic],
        }
    }
}

/// `prompt stack`, `agent profile`, `capability`.
fn noun(kind: Kind) -> &'static str {
    match kind {
        Kind::Stack => "prompt stack",
        Kind::Profile => "agent profile",
        Kind::Capability => "capability",
    }
}

/// `Prompt stack`, `Agent profile`, `Capability`.
fn title(kind: Kind) -> &'static str {
    match kind {
        Kind::Stack => "Prompt stack",
        Kind::Profile => "Agent profile",
        Kind::Capability => "Capability",
    }
}

/// `prompt stacks`, `agent profiles`, `capabilities` (the untrusted message's object).
fn plural(kind: Kind) -> &'static str {
    match kind {
        Kind::Stack => "prompt stacks",
        Kind::Profile => "agent profiles",
        Kind::Capability => "capabilities",
    }
}

/// How the codecs start an id message: `Stack`, `Profile`, `Capability`.
fn id_subject(kind: Kind) -> &'static str {
    match kind {
        Kind::Stack => "Stack",
        Kind::Profile => "Profile",
        Kind::Capability => "Capability",
    }
}

fn id_immutable_message(kind: Kind) -> String {
    let short = match kind {
        Kind::Stack => "stack",
        Kind::Profile => "profile",
        Kind::Capability => "capability",
    };
    format!(
        "{} id is immutable during save; fork the {short} to create a new id.",
        id_subject(kind)
    )
}

/// The primary directory new files of `kind` go to.
fn primary_dir(kind: Kind) -> Dir {
    match kind {
        Kind::Stack => Dir::Stacks,
        Kind::Profile => Dir::Profiles,
        Kind::Capability => Dir::Capabilities,
    }
}

/// The largest file of `kind` the loader reads; larger bodies are refused before writing.
fn byte_limit(kind: Kind) -> u64 {
    match kind {
        Kind::Stack => super::MAX_STACK_BYTES,
        Kind::Profile => profile::MAX_PROFILE_BYTES as u64,
        Kind::Capability => capability::MAX_CAPABILITY_SOURCE_SIZE as u64,
    }
}

/// The wire name of the expected revision, for field-level errors.
fn revision_field(kind: Kind) -> &'static str {
    match kind {
        Kind::Capability => "expectedSourceRevision",
        _ => "expectedRevision",
    }
}

#[derive(Clone, Copy)]
enum Action {
    Create,
    Save,
    Delete,
}

fn untrusted(kind: Kind, action: Action) -> ServiceError {
    let verb = match action {
        Action::Create => "create",
        Action::Save => "save",
        Action::Delete => "delete",
    };
    ServiceError::Untrusted {
        action: format!("{verb} {}", plural(kind)),
    }
}

fn check_trust(
    snapshot: &WorkspaceSnapshot,
    scope: Scope,
    kind: Kind,
    action: Action,
) -> Result<(), ServiceError> {
    if scope == Scope::Project && !snapshot.trusted {
        Err(untrusted(kind, action))
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Small public helpers for handlers

/// Normalizes an expected revision: `sha256:<64 hex>` or a bare 64-digit hex `sourceRevision`
/// (either case) → `sha256:<lowercase hex>`; anything else → `None`.
pub fn normalize_revision(text: &str) -> Option<String> {
    let text = text.trim();
    let hex = text
        .strip_prefix(crate::canonical::REVISION_PREFIX)
        .unwrap_or(text);
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
        format!(
            "{}{}",
            crate::canonical::REVISION_PREFIX,
            hex.to_ascii_lowercase()
        )
    })
}

/// The `scope` member of a create request: absent or `null` → project; `"project"`/`"global"`;
/// anything else → 400 `scope must be "project" or "global".`
pub fn parse_scope(value: Option<&Value>) -> Result<Scope, ServiceError> {
    match value {
        None | Some(Value::Null) => Ok(Scope::Project),
        Some(other) => other.as_str().and_then(Scope::parse).ok_or_else(|| {
            ServiceError::invalid("scope must be \"project\" or \"global\".", Some("scope"))
        }),
    }
}

/// A file that could not be read has no revision: saving or deleting it is refused with the
/// reason (409 `unreadable`), not with a confusing revision error.
fn check_readable(target: &Target<'_>) -> Result<(), ServiceError> {
    match super::snapshot::unreadable_reason(target.revision, target.diagnostics) {
        Some(reason) => Err(ServiceError::Unreadable {
            path: target.path.to_string(),
            reason: reason.to_string(),
        }),
        None => Ok(()),
    }
}

fn require_revision(kind: Kind, expected: Option<&str>) -> Result<String, ServiceError> {
    let Some(text) = expected.filter(|t| !t.trim().is_empty()) else {
        return Err(ServiceError::MissingRevision);
    };
    normalize_revision(text).ok_or_else(|| {
        ServiceError::invalid(
            format!(
                "{} must be sha256:<64 hex digits> or 64 hex digits.",
                revision_field(kind)
            ),
            Some(revision_field(kind)),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Targets: one view over the entries of every kind

/// A loaded resource file as the write service sees it, whatever its kind.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub kind: Kind,
    pub key: &'a ResourceKey,
    pub file: &'a FileRef,
    pub path: &'a str,
    /// `sha256:<hex>` from the same read that parsed the file; empty when it could not be read.
    pub revision: &'a str,
    /// The parsed JSON root, unknown fields included; `None` when the file was not JSON.
    pub raw: Option<&'a Value>,
    pub diagnostics: &'a [Diagnostic],
    /// Whether the resource asks to auto-activate (`autoActivate: true`).
    pub auto_activate: bool,
}

fn target<'a, T>(
    kind: Kind,
    entry: &'a Loaded<T>,
    raw: Option<&'a Value>,
    auto_activate: bool,
) -> Target<'a> {
    Target {
        kind,
        key: &entry.key,
        file: &entry.file,
        path: &entry.path,
        revision: &entry.revision,
        raw,
        diagnostics: &entry.diagnostics,
        auto_activate,
    }
}

fn targets(snapshot: &WorkspaceSnapshot, kind: Kind) -> Vec<Target<'_>> {
    match kind {
        Kind::Stack => snapshot
            .stacks
            .iter()
            .map(|e| {
                target(
                    kind,
                    e,
                    e.parsed.raw.as_ref(),
                    e.parsed.stack.auto_activate(),
                )
            })
            .collect(),
        Kind::Profile => snapshot
            .profiles
            .iter()
            .map(|e| {
                target(
                    kind,
                    e,
                    e.parsed.raw.as_ref(),
                    e.parsed.profile.auto_activate == Some(true),
                )
            })
            .collect(),
        Kind::Capability => snapshot
            .capabilities
            .iter()
            .map(|e| target(kind, e, e.parsed.raw.as_ref(), false))
            .collect(),
    }
}

fn in_scope<'a>(all: &[Target<'a>], scope: Scope, id: &str) -> Vec<Target<'a>> {
    all.iter()
        .filter(|t| t.key.scope == scope && t.key.id == id)
        .copied()
        .collect()
}

/// The scope a selector must write to, when it is known before resolution.
fn selector_scope(kind: Kind, selector: &Selector) -> Option<Scope> {
    match (kind, selector) {
        (_, Selector::Scoped(key)) => Some(key.scope),
        (Kind::Profile, Selector::Bare(_)) => Some(Scope::Project),
        _ => None,
    }
}

/// Resolves the file a mutation of `selector` targets. Stacks and capabilities: qualified →
/// exact; bare → the project matches when there are any (even invalid), else global. Profiles:
/// bare → project only. No match → 404; several files of one scope → 409 `ambiguous`.
pub fn resolve_for_write<'a>(
    snapshot: &'a WorkspaceSnapshot,
    kind: Kind,
    selector: &Selector,
) -> Result<Target<'a>, ServiceError> {
    let all = targets(snapshot, kind);
    let mut found = match selector {
        Selector::Scoped(key) => in_scope(&all, key.scope, &key.id),
        Selector::Bare(id) => {
            let project = in_scope(&all, Scope::Project, id);
            if kind == Kind::Profile || !project.is_empty() {
                project
            } else {
                in_scope(&all, Scope::Global, id)
            }
        }
    };
    match found.len() {
        0 => Err(ServiceError::NotFound {
            kind,
            selector: selector.to_string(),
        }),
        1 => Ok(found.remove(0)),
        _ => Err(ServiceError::Ambiguous {
            kind,
            selector: selector.to_string(),
            paths: found.iter().map(|t| t.path.to_string()).collect(),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Body checks

/// The first error of `diagnostics` as an [`ServiceError::Invalid`], all diagnostics attached.
fn refuse_on_error(diagnostics: Vec<Diagnostic>) -> Result<Vec<Diagnostic>, ServiceError> {
    match diagnostics.iter().find(|d| d.is_error()) {
        None => Ok(diagnostics),
        Some(first) => Err(ServiceError::Invalid {
            message: first.message.clone(),
            field: first.field.clone(),
            diagnostics: diagnostics.clone(),
        }),
    }
}

fn non_blank(value: Option<&Value>) -> Option<&str> {
    value
        .and_then(Value::as_str)
        .filter(|s| !js_trim(s).is_empty())
}

/// The server pre-checks of a stack body (web-editor §2.3), in order; the first failure wins.
/// Returns the body's id.
fn precheck_stack(body: &Value) -> Result<&str, ServiceError> {
    let Some(obj) = body.as_object() else {
        return Err(ServiceError::invalid(
            "Prompt stack root must be a JSON object.",
            None,
        ));
    };
    let Some(id) = non_blank(obj.get("id")) else {
        return Err(ServiceError::invalid(
            "Stack id must be a non-empty string.",
            Some("id"),
        ));
    };
    let Some(items) = obj.get("items").and_then(Value::as_array) else {
        return Err(ServiceError::invalid(
            "Stack items must be an array.",
            Some("items"),
        ));
    };
    for (index, item) in items.iter().enumerate() {
        let n = index + 1;
        let field = |member: &str| format!("items[{index}]{member}");
        let Some(item) = item.as_object() else {
            return Err(ServiceError::invalid(
                format!("Item {n} must be an object."),
                Some(&field("")),
            ));
        };
        let kind = item.get("kind").and_then(Value::as_str);
        if !matches!(kind, Some("block" | "slot")) {
            return Err(ServiceError::invalid(
                format!("Item {n} kind must be block or slot."),
                Some(&field(".kind")),
            ));
        }
        if non_blank(item.get("id")).is_none() {
            return Err(ServiceError::invalid(
                format!("Item {n} id must be a non-empty string."),
                Some(&field(".id")),
            ));
        }
        if kind == Some("block") && !item.get("content").is_some_and(Value::is_string) {
            return Err(ServiceError::invalid(
                format!("Item {n} content must be a string."),
                Some(&field(".content")),
            ));
        }
        if kind == Some("slot") && !item.get("slot").is_some_and(Value::is_string) {
            return Err(ServiceError::invalid(
                format!("Item {n} slot must be a string."),
                Some(&field(".slot")),
            ));
        }
    }
    Ok(id)
}

/// The id grammar error for an id as written (untrimmed), if it breaks the grammar.
fn id_grammar_error(kind: Kind, id: &str) -> Option<Diagnostic> {
    (!is_valid_id(id))
        .then(|| Diagnostic::error(format!("{} id {ID_RULE}.", id_subject(kind))).with_field("id"))
}

/// Why `id` cannot name a new file: its grammar, else its length.
fn new_id_error(kind: Kind, id: &str) -> Option<ServiceError> {
    id_grammar_error(kind, id)
        .map(|e| e.message)
        .or_else(|| id_length_problem(id))
        .map(|message| ServiceError::invalid(message, Some("id")))
}

/// Codec diagnostics of a body living in `scope` under `file_name`. Stacks also get their
/// template analysis and the structural checks of their `capabilities` bindings. An id with surrounding white space (which
/// the codecs trim, but which the file would keep) is an error too.
pub fn codec_diagnostics(
    kind: Kind,
    scope: Scope,
    body: &Value,
    file_name: &str,
) -> Vec<Diagnostic> {
    let mut d = match kind {
        Kind::Stack => {
            let parsed =
                stack::parse_stack_value(body.clone(), &stack::ParseOptions::new(file_name));
            let mut d = parsed.diagnostics;
            d.extend(stack::template_check::template_diagnostics(&parsed.stack));
            if let Some(bindings) = body.get("capabilities").filter(|b| b.is_array()) {
                d.extend(capability::parse_bindings(bindings, scope).1);
            }
            d
        }
        Kind::Profile => profile::parse_profile_value(body.clone(), file_name, scope).diagnostics,
        Kind::Capability => {
            capability::parse_capability_value(body.clone(), file_name, String::new()).diagnostics
        }
    };
    if let Some(id) = body.get("id").and_then(Value::as_str) {
        let trimmed = js_trim(id);
        if trimmed != id && !trimmed.is_empty() && is_valid_id(trimmed) {
            d.extend(id_grammar_error(kind, id));
        }
    }
    dedupe(d)
}

/// A body that passed every check: its id and the bytes to write.
struct Prepared {
    id: String,
    bytes: Vec<u8>,
}

/// Checks a body for writing as `kind` in `scope`. `existing` is the file being replaced (its
/// id must be kept and its name is the codec's file name).
fn prepare(
    kind: Kind,
    scope: Scope,
    body: &Value,
    existing: Option<&Target<'_>>,
) -> Result<Prepared, ServiceError> {
    let id = match kind {
        Kind::Stack => Some(precheck_stack(body)?),
        Kind::Profile | Kind::Capability => {
            if !body.is_object() {
                // The codec words it: `Profile must be a JSON object, got array.`
                refuse_on_error(codec_diagnostics(kind, scope, body, "draft.json"))?;
            }
            body.get("id").and_then(Value::as_str)
        }
    };
    if let (Some(existing), Some(id)) = (existing, id) {
        if id != existing.key.id {
            return Err(ServiceError::IdImmutable { kind });
        }
    }
    if kind == Kind::Stack {
        if let Some(error) = id.and_then(|id| id_grammar_error(kind, id)) {
            return Err(ServiceError::invalid(error.message, Some("id")));
        }
    }
    if existing.is_none() {
        if let Some(error) = id.and_then(id_length_problem) {
            return Err(ServiceError::invalid(error, Some("id")));
        }
    }
    let file_name = match (existing, id) {
        (Some(existing), _) => existing.file.name().to_string(),
        (None, Some(id)) if is_valid_id(id) => format!("{id}.json"),
        (None, _) => "draft.json".to_string(),
    };
    refuse_on_error(codec_diagnostics(kind, scope, body, &file_name))?;
    // The codecs passed, so the id is present and valid.
    let id = id.unwrap_or_default().to_string();
    if kind == Kind::Capability && file_name != format!("{id}.json") {
        return Err(ServiceError::invalid(
            format!("Capability file name must be {id}.json, not {file_name}."),
            Some("id"),
        ));
    }
    let bytes = to_pretty(body).into_bytes();
    let limit = byte_limit(kind);
    if bytes.len() as u64 > limit {
        return Err(ServiceError::invalid(
            format!(
                "{} is too large: {} bytes (the limit is {limit} bytes).",
                title(kind),
                bytes.len()
            ),
            None,
        ));
    }
    Ok(Prepared { id, bytes })
}

/// A second same-scope `autoActivate: true` profile (the file being replaced excluded).
fn auto_activate_conflict<'a>(
    snapshot: &'a WorkspaceSnapshot,
    scope: Scope,
    body: &Value,
    replacing: Option<&FileRef>,
) -> Option<Target<'a>> {
    if body.get("autoActivate") != Some(&Value::Bool(true)) {
        return None;
    }
    targets(snapshot, Kind::Profile)
        .into_iter()
        .find(|t| t.key.scope == scope && t.auto_activate && Some(t.file) != replacing)
}

fn check_auto_activate(
    snapshot: &WorkspaceSnapshot,
    kind: Kind,
    scope: Scope,
    body: &Value,
    replacing: Option<&FileRef>,
) -> Result<(), ServiceError> {
    if kind != Kind::Profile {
        return Ok(());
    }
    match auto_activate_conflict(snapshot, scope, body, replacing) {
        Some(other) => Err(ServiceError::AutoActivateConflict {
            scope,
            other: other.key.id.clone(),
        }),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Store calls

/// Maps a store failure. A conflict re-reads the file so the caller gets its current revision
/// and JSON from one read.
fn store_error(
    store: &dyn Store,
    kind: Kind,
    file: &FileRef,
    id: &str,
    e: StoreError,
) -> ServiceError {
    match e {
        StoreError::Conflict { current, .. } => match store.read(file, byte_limit(kind)) {
            Ok(bytes) => ServiceError::Stale {
                current_revision: crate::canonical::revision(&bytes),
                current: parse_bytes(&bytes).ok(),
            },
            Err(StoreError::Missing(_)) => ServiceError::NotFound {
                kind,
                selector: ResourceKey::new(file.scope, id).to_string(),
            },
            Err(_) => ServiceError::Stale {
                current_revision: current,
                current: None,
            },
        },
        StoreError::Missing(_) => ServiceError::NotFound {
            kind,
            selector: ResourceKey::new(file.scope, id).to_string(),
        },
        StoreError::Exists(path) => ServiceError::Exists {
            kind,
            id: id.to_string(),
            path,
        },
        StoreError::InvalidPath(_) => ServiceError::InvalidPath(e.to_string()),
        StoreError::ReadOnly(_) => ServiceError::ReadOnly(e.to_string()),
        StoreError::TooLarge { path, limit } => ServiceError::Unreadable {
            path,
            reason: format!("it is larger than {limit} bytes"),
        },
        other => ServiceError::Io(other.to_string()),
    }
}

fn written(store: &dyn Store, file: FileRef, id: &str, revision: String) -> Written {
    Written {
        key: ResourceKey::new(file.scope, id),
        path: store.display_path(&file),
        file,
        revision,
    }
}

/// Replaces `existing` with `bytes` if it is still at `expected`.
fn replace(
    store: &dyn Store,
    kind: Kind,
    existing: &Target<'_>,
    expected: &str,
    prepared: Prepared,
) -> Result<Written, ServiceError> {
    let file = existing.file.clone();
    let revision = store
        .update(&file, expected, &prepared.bytes)
        .map_err(|e| store_error(store, kind, &file, &prepared.id, e))?;
    Ok(written(store, file, &prepared.id, revision))
}

// ---------------------------------------------------------------------------------------------
// Mutations

/// Creates `<id>.json` in `scope`'s primary directory from the raw `body`.
///
/// A same-scope resource with the id → 409 `exists`, unless `overwrite`: then that one file (a
/// legacy stack file included) is replaced at the revision the snapshot holds, so a file changed
/// on disk since is 409 `stale_revision`, never overwritten blind.
pub fn create(
    store: &dyn Store,
    snapshot: &WorkspaceSnapshot,
    kind: Kind,
    scope: Scope,
    body: &Value,
    overwrite: bool,
) -> Result<Written, ServiceError> {
    check_trust(snapshot, scope, kind, Action::Create)?;
    let all = targets(snapshot, kind);
    // Same-scope resources with the body's id: a conflict, or (overwrite) the file to replace.
    let body_id = body.get("id").and_then(Value::as_str).unwrap_or_default();
    let same = in_scope(&all, scope, body_id);
    let existing = (overwrite && same.len() == 1).then(|| same[0]);
    let prepared = prepare(kind, scope, body, existing.as_ref())?;
    if !overwrite && !same.is_empty() {
        return Err(ServiceError::Exists {
            kind,
            id: prepared.id,
            path: same[0].path.to_string(),
        });
    }
    if same.len() > 1 {
        return Err(ServiceError::Ambiguous {
            kind,
            selector: ResourceKey::new(scope, prepared.id).to_string(),
            paths: same.iter().map(|t| t.path.to_string()).collect(),
        });
    }
    check_auto_activate(
        snapshot,
        kind,
        scope,
        body,
        existing.as_ref().map(|t| t.file),
    )?;
    match existing {
        Some(existing) => {
            let expected = existing.revision.to_string();
            replace(store, kind, &existing, &expected, prepared)
        }
        None => {
            let file = FileRef::new(scope, primary_dir(kind), format!("{}.json", prepared.id))
                .map_err(|e| ServiceError::InvalidPath(e.to_string()))?;
            let revision = store
                .create(&file, &prepared.bytes)
                .map_err(|e| store_error(store, kind, &file, &prepared.id, e))?;
            Ok(written(store, file, &prepared.id, revision))
        }
    }
}

/// Saves `body` over the resource `selector` names, if its file is still at
/// `expected_revision`. The id is immutable; a legacy stack file is updated in place.
pub fn update(
    store: &dyn Store,
    snapshot: &WorkspaceSnapshot,
    kind: Kind,
    selector: &Selector,
    expected_revision: Option<&str>,
    body: &Value,
) -> Result<Written, ServiceError> {
    if let Some(scope) = selector_scope(kind, selector) {
        check_trust(snapshot, scope, kind, Action::Save)?;
    }
    let existing = resolve_for_write(snapshot, kind, selector)?;
    let scope = existing.key.scope;
    check_trust(snapshot, scope, kind, Action::Save)?;
    check_readable(&existing)?;
    let expected = require_revision(kind, expected_revision)?;
    let prepared = prepare(kind, scope, body, Some(&existing))?;
    check_auto_activate(snapshot, kind, scope, body, Some(existing.file))?;
    replace(store, kind, &existing, &expected, prepared)
}

/// Deletes the resource `selector` names, if its file is still at `expected_revision`.
pub fn delete(
    store: &dyn Store,
    snapshot: &WorkspaceSnapshot,
    kind: Kind,
    selector: &Selector,
    expected_revision: Option<&str>,
) -> Result<(), ServiceError> {
    if let Some(scope) = selector_scope(kind, selector) {
        check_trust(snapshot, scope, kind, Action::Delete)?;
    }
    let existing = resolve_for_write(snapshot, kind, selector)?;
    check_trust(snapshot, existing.key.scope, kind, Action::Delete)?;
    check_readable(&existing)?;
    let expected = require_revision(kind, expected_revision)?;
    store
        .delete(existing.file, &expected)
        .map_err(|e| store_error(store, kind, existing.file, &existing.key.id, e))
}

/// Copies the resource `selector` names to `new_id` in `scope` (exclusive create). The copy is
/// the source's raw object with `id` replaced; bare references are qualified with the source
/// scope when the scope changes, and `autoActivate: true` becomes `false`.
pub fn fork(
    store: &dyn Store,
    snapshot: &WorkspaceSnapshot,
    kind: Kind,
    selector: &Selector,
    new_id: &str,
    scope: Scope,
) -> Result<Written, ServiceError> {
    fork_named(store, snapshot, kind, selector, new_id, scope, None)
}

/// [`fork`] that also gives the copy a display `name` (so a fork is not a second row with the
/// same name); `None` keeps the source's.
pub fn fork_named(
    store: &dyn Store,
    snapshot: &WorkspaceSnapshot,
    kind: Kind,
    selector: &Selector,
    new_id: &str,
    scope: Scope,
    name: Option<&str>,
) -> Result<Written, ServiceError> {
    check_trust(snapshot, scope, kind, Action::Create)?;
    if let Some(error) = new_id_error(kind, new_id) {
        return Err(error);
    }
    let source = resolve_for_write(snapshot, kind, selector)?;
    let Some(Value::Object(raw)) = source.raw else {
        return Err(ServiceError::invalid(
            format!("Cannot fork {}: its file is not a JSON object.", source.key),
            None,
        ));
    };
    let copy = fork_copy(kind, raw, new_id, name, source.key.scope, scope);
    create(store, snapshot, kind, scope, &Value::Object(copy), false)
}

/// What a fork of `raw` (a resource of `kind` in scope `from`) writes to scope `to`: the same
/// object with the new id and name, `autoActivate: true` turned off (a copy never starts Pi
/// sessions on its own), and references that were bare qualified with `from` when the scope
/// changes, so they keep naming what they named. The editor forks an unsaved draft with it too.
pub fn fork_copy(
    kind: Kind,
    raw: &serde_json::Map<String, Value>,
    new_id: &str,
    name: Option<&str>,
    from: Scope,
    to: Scope,
) -> serde_json::Map<String, Value> {
    let mut copy = raw.clone();
    copy.insert("id".to_string(), Value::String(new_id.to_string()));
    if let Some(name) = name {
        copy.insert("name".to_string(), Value::String(name.to_string()));
    }
    if copy.get("autoActivate") == Some(&Value::Bool(true)) {
        copy.insert("autoActivate".to_string(), Value::Bool(false));
    }
    if from != to {
        match kind {
            Kind::Profile => {
                if let Some(reference) = copy.get_mut("promptStack") {
                    qualify(reference, from);
                }
            }
            Kind::Stack => {
                if let Some(Value::Array(bindings)) = copy.get_mut("capabilities") {
                    for binding in bindings {
                        if let Some(reference) = binding.get_mut("ref") {
                            qualify(reference, from);
                        }
                    }
                }
            }
            Kind::Capability => {}
        }
    }
    copy
}

/// Rewrites a bare selector string to `<scope>:<id>`; anything else is left alone.
fn qualify(reference: &mut Value, scope: Scope) {
    if let Some(Ok(Selector::Bare(id))) = reference.as_str().map(parse_selector) {
        *reference = Value::String(ResourceKey::new(scope, id).to_string());
    }
}

// ---------------------------------------------------------------------------------------------
// Draft validation

/// Validates a draft of a *new* resource in `scope` without writing: the codec's diagnostics
/// (plus the structure of stack bindings) and the workspace-level checks — the id already used in
/// the scope, a second same-scope profile `autoActivate`, the global→project rule (profiles and
/// bindings), whether a profile's stack and a Preset's bindings resolve. Deduplicated.
pub fn validate(
    kind: Kind,
    scope: Scope,
    body: &Value,
    snapshot: &WorkspaceSnapshot,
) -> Vec<Diagnostic> {
    validate_draft(kind, scope, body, snapshot, None)
}

/// Validates a draft of the existing resource `selector` names (as a save would see it): the
/// resource itself is not a duplicate or an autoActivate rival, and a changed id is an error.
pub fn validate_update(
    kind: Kind,
    selector: &Selector,
    body: &Value,
    snapshot: &WorkspaceSnapshot,
) -> Result<Vec<Diagnostic>, ServiceError> {
    let existing = resolve_for_write(snapshot, kind, selector)?;
    let mut d = Vec::new();
    if body
        .get("id")
        .and_then(Value::as_str)
        .is_some_and(|id| id != existing.key.id)
    {
        d.push(Diagnostic::error(id_immutable_message(kind)).with_field("id"));
    }
    d.extend(validate_draft(
        kind,
        existing.key.scope,
        body,
        snapshot,
        Some(&existing),
    ));
    Ok(dedupe(d))
}

fn validate_draft(
    kind: Kind,
    scope: Scope,
    body: &Value,
    snapshot: &WorkspaceSnapshot,
    existing: Option<&Target<'_>>,
) -> Vec<Diagnostic> {
    let id = body.get("id").and_then(Value::as_str).unwrap_or_default();
    let file_name = match existing {
        Some(existing) => existing.file.name().to_string(),
        None if is_valid_id(id) => format!("{id}.json"),
        None => "draft.json".to_string(),
    };
    let mut d = codec_diagnostics(kind, scope, body, &file_name);
    let replacing = existing.map(|t| t.file);

    if !id.is_empty() {
        let all = targets(snapshot, kind);
        if let Some(other) = in_scope(&all, scope, id)
            .into_iter()
            .find(|t| Some(t.file) != replacing)
        {
            d.push(
                Diagnostic::error(format!(
                    "{} already exists: {id} ({}).",
                    title(kind),
                    other.path
                ))
                .with_field("id"),
            );
        }
    }
    match kind {
        Kind::Stack => d.extend(binding_diagnostics(snapshot, scope, body)),
        Kind::Profile => {
            if let Some(other) = auto_activate_conflict(snapshot, scope, body, replacing) {
                d.push(
                    Diagnostic::error(
                        ServiceError::AutoActivateConflict {
                            scope,
                            other: other.key.id.clone(),
                        }
                        .to_string(),
                    )
                    .with_field("autoActivate"),
                );
            }
            d.extend(profile_stack_diagnostics(snapshot, scope, body, &file_name));
        }
        Kind::Capability => {
            if let Some(existing) = existing {
                let wanted = format!("{id}.json");
                if is_valid_id(id) && existing.file.name() != wanted {
                    d.push(
                        Diagnostic::error(format!(
                            "Capability file name must be {wanted}, not {}.",
                            existing.file.name()
                        ))
                        .with_field("id"),
                    );
                }
            }
        }
    }
    dedupe(d)
}

/// Whether each binding of a draft Preset resolves and applies (warnings, as on load).
fn binding_diagnostics(
    snapshot: &WorkspaceSnapshot,
    owner: Scope,
    body: &Value,
) -> Vec<Diagnostic> {
    let Some(value) = body.get("capabilities").filter(|v| v.is_array()) else {
        return Vec::new();
    };
    let (bindings, structural) = capability::parse_bindings(value, owner);
    if structural.iter().any(Diagnostic::is_error) {
        return Vec::new(); // already reported by codec_diagnostics
    }
    let mut d = Vec::new();
    for (i, binding) in bindings.iter().enumerate() {
        if let Err(problem) = snapshot.binding_outcome(owner, binding, i) {
            d.push(Diagnostic::warning(problem.message).with_field("capabilities"));
        }
    }
    d
}

/// Whether a draft profile's `promptStack` resolves (relative to the profile's scope).
fn profile_stack_diagnostics(
    snapshot: &WorkspaceSnapshot,
    scope: Scope,
    body: &Value,
    file_name: &str,
) -> Vec<Diagnostic> {
    if !body.is_object() {
        return Vec::new();
    }
    let parsed = profile::parse_profile_value(body.clone(), file_name, scope);
    let Ok(file) = FileRef::new(scope, Dir::Profiles, "draft.json") else {
        return Vec::new();
    };
    let entry = Loaded {
        key: parsed.profile.key(scope),
        file,
        path: String::new(),
        revision: String::new(),
        parsed,
        diagnostics: Vec::new(),
    };
    match snapshot.profile_stack(&entry) {
        Ok(Some(stack)) if !stack.usable() => vec![Diagnostic::error(format!(
            "Prompt stack {} has errors; this profile cannot be applied until they are fixed.",
            stack.key
        ))
        .with_field("promptStack")],
        Ok(_) => Vec::new(),
        // Selector and scope problems are the codec's diagnostics already.
        Err(super::ProfileStackError::Selector(_))
        | Err(super::ProfileStackError::GlobalToProject(_)) => Vec::new(),
        Err(e) => vec![Diagnostic::error(e.to_string()).with_field("promptStack")],
    }
}
