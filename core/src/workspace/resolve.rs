//! Resolution rules over a [`WorkspaceSnapshot`]: selectors to entries, default and automatic
//! activation, profile → stack references and Preset capability bindings.
//!
//! The kinds differ on purpose (and the differences are the original tool's behaviour):
//! - stacks: a bare id prefers the project; one project match wins even when invalid, several
//!   project matches resolve to nothing, and only zero project matches fall back to global;
//! - profiles: a bare id prefers the project, the same way;
//! - capabilities: like stacks, but a match must also be usable and unambiguous, and an invalid or
//!   duplicated project definition never falls back to global;
//! - profile → stack and binding → capability references are scope-relative: a bare reference
//!   means the owner's own scope, never a cross-scope fallback.

use std::collections::BTreeMap;

use super::snapshot::{CapabilityEntry, Loaded, ProfileEntry, StackEntry, WorkspaceSnapshot};
use crate::capability;
use crate::diag::Diagnostic;
use crate::id::{parse_selector, parse_stack_choice, ResourceKey, Scope, Selector, StackChoice};

/// The outcome of looking a selector up.
#[derive(Debug)]
pub enum Resolved<'a, T> {
    Found(&'a T),
    NotFound,
    /// Several files of one scope share the id.
    Ambiguous(Vec<&'a T>),
}

impl<'a, T> Resolved<'a, T> {
    pub fn found(self) -> Option<&'a T> {
        match self {
            Resolved::Found(t) => Some(t),
            _ => None,
        }
    }
}

fn matching<'a, T>(entries: &'a [Loaded<T>], scope: Scope, id: &str) -> Vec<&'a Loaded<T>> {
    entries
        .iter()
        .filter(|e| e.key.scope == scope && e.key.id == id)
        .collect()
}

fn exactly_one<T>(mut found: Vec<&T>) -> Resolved<'_, T> {
    match found.len() {
        0 => Resolved::NotFound,
        1 => Resolved::Found(found.remove(0)),
        _ => Resolved::Ambiguous(found),
    }
}

/// Stack and profile auto-activation candidates: the project entries that ask for it; only when
/// there are none, the global ones that ask for it and that no project entry of the same id
/// shadows.
fn auto_candidates<T>(entries: &[Loaded<T>], auto: impl Fn(&Loaded<T>) -> bool) -> Vec<&Loaded<T>> {
    let project: Vec<&Loaded<T>> = entries
        .iter()
        .filter(|e| e.key.scope == Scope::Project && auto(e))
        .collect();
    if !project.is_empty() {
        return project;
    }
    entries
        .iter()
        .filter(|e| e.key.scope == Scope::Global && auto(e))
        .filter(|g| {
            !entries
                .iter()
                .any(|p| p.key.scope == Scope::Project && p.key.id == g.key.id)
        })
        .collect()
}

/// Stack and profile rule: exact for a scoped selector; bare prefers any project match.
fn resolve_shadowing<'a, T>(
    entries: &'a [Loaded<T>],
    selector: &Selector,
) -> Resolved<'a, Loaded<T>> {
    match selector {
        Selector::Scoped(key) => exactly_one(matching(entries, key.scope, &key.id)),
        Selector::Bare(id) => {
            let project = matching(entries, Scope::Project, id);
            if project.is_empty() {
                exactly_one(matching(entries, Scope::Global, id))
            } else {
                exactly_one(project)
            }
        }
    }
}

/// How a persisted stack choice came back on reload.
#[derive(Debug)]
pub enum RestoredStack<'a> {
    /// `none`/`off` was persisted: run without a stack.
    Disabled,
    /// The persisted id still resolves (used without a usability check).
    Restored(&'a StackEntry),
    /// It no longer resolves; this is the default choice instead (possibly nothing).
    Fallback(Option<&'a StackEntry>),
}

impl PartialEq for RestoredStack<'_> {
    /// Entries compare by the file they came from.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RestoredStack::Disabled, RestoredStack::Disabled) => true,
            (RestoredStack::Restored(a), RestoredStack::Restored(b)) => a.file == b.file,
            (RestoredStack::Fallback(a), RestoredStack::Fallback(b)) => {
                a.map(|e| &e.file) == b.map(|e| &e.file)
            }
            _ => false,
        }
    }
}

/// Outcome of profile auto-activation (A8).
#[derive(Debug)]
pub struct AutoProfile<'a> {
    pub chosen: Option<&'a ProfileEntry>,
    /// Whether any profile asks to auto-activate in the shadow-aware view.
    pub has_auto: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityResolveError {
    #[error("Capability not found: {0}.")]
    NotFound(String),
    #[error("Ambiguous capability {0}: several files define it.")]
    Ambiguous(String),
    #[error("Capability {key} is not usable: {message}")]
    Unusable { key: String, message: String },
}

/// A binding that does not resolve or whose overrides do not apply
/// ([`WorkspaceSnapshot::binding_outcome`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BindingProblem {
    /// `Capability binding <id> at index <i> does not resolve: …` / `… does not apply: …`.
    pub message: String,
    /// The binding member to fix: `capabilities[i].ref` or `capabilities[i].overrides`.
    pub field: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileStackError {
    #[error("{0}")]
    Selector(String),
    #[error("A global agent profile cannot reference the project prompt stack {0}.")]
    GlobalToProject(String),
    #[error("Unknown prompt stack: {selector}.{hint}")]
    Unknown { selector: String, hint: String },
    #[error("Prompt stack {0} is ambiguous: several files define it.")]
    Ambiguous(String),
}

impl WorkspaceSnapshot {
    /// Resolves a stack selector (§1 Resolution).
    pub fn resolve_stack(&self, selector: &Selector) -> Resolved<'_, StackEntry> {
        resolve_shadowing(&self.stacks, selector)
    }

    /// Resolves a profile selector (bare: project shadows global).
    pub fn resolve_profile(&self, selector: &Selector) -> Resolved<'_, ProfileEntry> {
        resolve_shadowing(&self.profiles, selector)
    }

    /// One stack per id, in first-appearance order, each the entry a bare selector resolves to.
    pub fn effective_stacks(&self) -> Vec<&StackEntry> {
        let mut seen: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for entry in &self.stacks {
            if seen.contains(&entry.key.id.as_str()) {
                continue;
            }
            seen.push(&entry.key.id);
            if let Resolved::Found(e) = self.resolve_stack(&Selector::Bare(entry.key.id.clone())) {
                out.push(e);
            }
        }
        out
    }

    /// The stack that activates on its own (§1 Activation, auto-pick).
    pub fn auto_stack(&self) -> Option<&StackEntry> {
        let candidates = auto_candidates(&self.stacks, |e| e.parsed.stack.auto_activate());
        match candidates.as_slice() {
            [only] if only.usable() => Some(only),
            _ => None,
        }
    }

    /// `chooseDefaultStack`: `none`/`off` → nothing; a usable resolved preference → it;
    /// otherwise the auto-pick.
    pub fn default_stack(&self, preferred: Option<&str>) -> Option<&StackEntry> {
        if let Some(pref) = preferred {
            match parse_stack_choice(pref) {
                Ok(StackChoice::Disabled) => return None,
                Ok(StackChoice::Selector(sel)) => {
                    if let Resolved::Found(e) = self.resolve_stack(&sel) {
                        if e.usable() {
                            return Some(e);
                        }
                    }
                }
                Err(_) => {}
            }
        }
        self.auto_stack()
    }

    /// Restores a persisted `activeStackId` (`<scope>:<id>`, a legacy bare id, or `none`).
    pub fn restore_stack(&self, persisted: &str) -> RestoredStack<'_> {
        match parse_stack_choice(persisted) {
            Ok(StackChoice::Disabled) => RestoredStack::Disabled,
            Ok(StackChoice::Selector(sel)) => match self.resolve_stack(&sel) {
                Resolved::Found(e) => RestoredStack::Restored(e),
                _ => RestoredStack::Fallback(self.default_stack(None)),
            },
            Err(_) => RestoredStack::Fallback(self.default_stack(None)),
        }
    }

    /// Profile auto-activation for a fresh session (A8).
    pub fn auto_profile(&self) -> AutoProfile<'_> {
        let candidates = auto_candidates(&self.profiles, |e| {
            e.parsed.profile.auto_activate == Some(true)
        });
        AutoProfile {
            has_auto: !candidates.is_empty(),
            chosen: match candidates.as_slice() {
                [only] if only.usable() => Some(only),
                _ => None,
            },
        }
    }

    /// A3 step 4: the stack a profile names, relative to the profile's own scope.
    /// `Ok(None)` means the profile runs without a stack (`promptStack: null`).
    pub fn profile_stack(
        &self,
        profile: &ProfileEntry,
    ) -> Result<Option<&StackEntry>, ProfileStackError> {
        let Some(reference) = profile.parsed.profile.prompt_stack.as_deref() else {
            return Ok(None);
        };
        let selector =
            parse_selector(reference).map_err(|e| ProfileStackError::Selector(e.to_string()))?;
        let owner = profile.key.scope;
        if owner == Scope::Global && selector.scope() == Some(Scope::Project) {
            return Err(ProfileStackError::GlobalToProject(selector.to_string()));
        }
        let key = selector.key_in(owner);
        match exactly_one(matching(&self.stacks, key.scope, &key.id)) {
            Resolved::Found(e) => Ok(Some(e)),
            Resolved::Ambiguous(_) => Err(ProfileStackError::Ambiguous(key.to_string())),
            Resolved::NotFound => {
                let global_exists = !matching(&self.stacks, Scope::Global, &key.id).is_empty();
                let hint = if owner == Scope::Project
                    && matches!(selector, Selector::Bare(_))
                    && global_exists
                {
                    format!(" Use global:{} to reference the global stack.", key.id)
                } else {
                    String::new()
                };
                Err(ProfileStackError::Unknown {
                    selector: reference.trim().to_string(),
                    hint,
                })
            }
        }
    }

    /// B3: direct capability resolution (library selection, CLI `enable`).
    pub fn resolve_capability(
        &self,
        selector: &Selector,
    ) -> Result<&CapabilityEntry, CapabilityResolveError> {
        let in_scope =
            |key: ResourceKey| -> Option<Result<&CapabilityEntry, CapabilityResolveError>> {
                let found = matching(&self.capabilities, key.scope, &key.id);
                match found.as_slice() {
                    [] => None,
                    [one] if one.usable() => Some(Ok(one)),
                    [one] => Some(Err(CapabilityResolveError::Unusable {
                        key: key.to_string(),
                        message: one
                            .diagnostics
                            .iter()
                            .find(|d| d.is_error())
                            .map(|d| d.message.clone())
                            .unwrap_or_default(),
                    })),
                    _ => Some(Err(CapabilityResolveError::Ambiguous(key.to_string()))),
                }
            };
        match selector {
            Selector::Scoped(key) => in_scope(key.clone())
                .unwrap_or_else(|| Err(CapabilityResolveError::NotFound(key.to_string()))),
            Selector::Bare(id) => in_scope(ResourceKey::new(Scope::Project, id.clone()))
                .or_else(|| in_scope(ResourceKey::new(Scope::Global, id.clone())))
                .unwrap_or_else(|| Err(CapabilityResolveError::NotFound(id.clone()))),
        }
    }

    /// Which Presets bind each capability: capability key → the binding Presets' keys, in
    /// stack order, each once. Bindings that do not parse or resolve are left out.
    pub fn capability_users(&self) -> BTreeMap<ResourceKey, Vec<ResourceKey>> {
        let mut users: BTreeMap<ResourceKey, Vec<ResourceKey>> = BTreeMap::new();
        for stack in &self.stacks {
            let Some(value) = stack
                .parsed
                .raw
                .as_ref()
                .and_then(|r| r.get("capabilities"))
            else {
                continue;
            };
            let (bindings, _) = capability::parse_bindings(value, stack.key.scope);
            for binding in &bindings {
                if let Ok(target) = self.binding_target(stack.key.scope, &binding.reference) {
                    let list = users.entry(target.key.clone()).or_default();
                    if !list.contains(&stack.key) {
                        list.push(stack.key.clone());
                    }
                }
            }
        }
        users
    }

    /// One structurally valid binding of a Preset in `owner`'s scope, at `index` of its
    /// `capabilities` array: its capability (B4 target resolution) and the effective capability
    /// after its overrides (B5), or the problem, worded as the loader, the draft validation and
    /// the editor report it.
    pub fn binding_outcome(
        &self,
        owner: Scope,
        binding: &capability::Binding,
        index: usize,
    ) -> Result<(&CapabilityEntry, capability::Capability), BindingProblem> {
        let target = self
            .binding_target(owner, &binding.reference)
            .map_err(|e| BindingProblem {
                message: format!(
                    "Capability binding {} at index {index} does not resolve: {e}",
                    binding.effective_id()
                ),
                field: format!("capabilities[{index}].ref"),
            })?;
        let effective =
            capability::effective_from_parsed(&target.parsed, binding.overrides.as_ref()).map_err(
                |errors| BindingProblem {
                    message: format!(
                        "Capability binding {} at index {index} does not apply: {}",
                        binding.effective_id(),
                        errors
                            .first()
                            .map(|d| d.message.as_str())
                            .unwrap_or("invalid overrides")
                    ),
                    field: format!("capabilities[{index}].overrides"),
                },
            )?;
        Ok((target, effective))
    }

    /// B4 target resolution: a binding's capability, relative to the Preset's scope.
    pub fn binding_target(
        &self,
        owner: Scope,
        reference: &Selector,
    ) -> Result<&CapabilityEntry, CapabilityResolveError> {
        self.resolve_capability(&Selector::Scoped(reference.key_in(owner)))
    }
}

/// Validates the `capabilities` array of every stack (B4) and checks that each binding's target
/// resolves. Structural problems are errors; a target that does not resolve (yet) is a warning,
/// so a Preset stays usable while its capability files are being written.
pub(super) fn annotate_stack_bindings(snapshot: &mut WorkspaceSnapshot) {
    let mut additions: Vec<(usize, Vec<Diagnostic>)> = Vec::new();
    for (index, entry) in snapshot.stacks.iter().enumerate() {
        let Some(value) = entry
            .parsed
            .raw
            .as_ref()
            .and_then(|raw| raw.get("capabilities"))
        else {
            continue;
        };
        if !value.is_array() {
            continue; // the stack codec already reported the wrong type
        }
        let owner = entry.key.scope;
        let (bindings, mut diagnostics) = capability::parse_bindings(value, owner);
        if diagnostics.iter().all(|d| !d.is_error()) {
            for (i, binding) in bindings.iter().enumerate() {
                if let Err(problem) = snapshot.binding_outcome(owner, binding, i) {
                    diagnostics
                        .push(Diagnostic::warning(problem.message).with_field("capabilities"));
                }
            }
        }
        if !diagnostics.is_empty() {
            additions.push((index, diagnostics));
        }
    }
    for (index, diagnostics) in additions {
        snapshot.stacks[index].diagnostics.extend(diagnostics);
    }
}

/// Checks every profile's `promptStack` reference (A3 step 4). An unresolvable reference is an
/// error on the profile, and so is a reference to a stack that has errors (A3 step 5: the
/// profile cannot be applied until the stack is fixed, and only errors fail a preflight).
pub(super) fn annotate_profile_stacks(snapshot: &mut WorkspaceSnapshot) {
    let mut additions: Vec<(usize, Diagnostic)> = Vec::new();
    for (index, entry) in snapshot.profiles.iter().enumerate() {
        match snapshot.profile_stack(entry) {
            Ok(Some(stack)) if !stack.usable() => additions.push((
                index,
                Diagnostic::error(format!(
                    "Prompt stack {} has errors; this profile cannot be applied until they are fixed.",
                    stack.key
                ))
                .with_field("promptStack"),
            )),
            Ok(_) => {}
            // Selector and scope errors are already reported by the profile codec.
            Err(ProfileStackError::Selector(_)) | Err(ProfileStackError::GlobalToProject(_)) => {}
            Err(e) => additions.push((index, Diagnostic::error(e.to_string()).with_field("promptStack"))),
        }
    }
    for (index, d) in additions {
        snapshot.profiles[index].diagnostics.push(d);
    }
}
