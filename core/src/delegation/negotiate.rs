//! D5 tool negotiation: backend catalog ∩ stack tool policy ∩ request access.

use crate::stack::Policy;

use super::ContractDiagnostic;

/// Tool effects a backend may declare.
pub const TOOL_EFFECTS: [&str; 4] = ["filesystem-read", "filesystem-write", "process", "network"];

/// The candidate catalog of the shipped read-only backends (`pi.read/read`, …): all
/// `filesystem-read`.
pub const READONLY_CANDIDATES: [(&str, &str); 4] = [
    ("pi.read", "read"),
    ("pi.grep", "grep"),
    ("pi.find", "find"),
    ("pi.ls", "ls"),
];

/// One backend catalog entry as the host sees it (`{id, name?, effects?}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogTool {
    pub id: String,
    pub name: Option<String>,
    pub effects: Option<Vec<String>>,
}

impl CatalogTool {
    pub fn new(id: &str, name: Option<&str>, effects: Option<&[&str]>) -> Self {
        CatalogTool {
            id: id.to_string(),
            name: name.map(str::to_string),
            effects: effects.map(|e| e.iter().map(|s| s.to_string()).collect()),
        }
    }
    /// The name, defaulting to the id.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
    /// The effects, defaulting to none.
    pub fn effects(&self) -> &[String] {
        self.effects.as_deref().unwrap_or(&[])
    }
}

/// The read-only backends' candidate catalog.
pub fn readonly_catalog() -> Vec<CatalogTool> {
    READONLY_CANDIDATES
        .iter()
        .map(|(id, name)| CatalogTool::new(id, Some(name), Some(&["filesystem-read"])))
        .collect()
}

/// Access level of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessLevel {
    None,
    ReadOnly,
    WorkspaceWrite,
}

impl AccessLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            AccessLevel::None => "none",
            AccessLevel::ReadOnly => "read-only",
            AccessLevel::WorkspaceWrite => "workspace-write",
        }
    }
    pub fn parse(text: &str) -> Option<AccessLevel> {
        match text {
            "none" => Some(AccessLevel::None),
            "read-only" => Some(AccessLevel::ReadOnly),
            "workspace-write" => Some(AccessLevel::WorkspaceWrite),
            _ => None,
        }
    }
}

/// Network access: `deny` | `allow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Network {
    Deny,
    Allow,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Deny => "deny",
            Network::Allow => "allow",
        }
    }
    pub fn parse(text: &str) -> Option<Network> {
        match text {
            "deny" => Some(Network::Deny),
            "allow" => Some(Network::Allow),
            _ => None,
        }
    }
}

/// The access facts the host receives: `{level, network, allowProcess}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AccessFacts {
    pub level: AccessLevel,
    pub network: Network,
    pub allow_process: bool,
}

impl AccessFacts {
    /// Whether every effect of a tool is allowed.
    pub fn allows_effect(&self, effect: &str) -> bool {
        match effect {
            "network" => self.network == Network::Allow,
            "process" => self.allow_process,
            "filesystem-read" => self.level != AccessLevel::None,
            "filesystem-write" => self.level == AccessLevel::WorkspaceWrite,
            _ => false,
        }
    }
}

/// The outcome of [`negotiate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiation {
    pub effective_tool_ids: Vec<String>,
    pub effective_tool_names: Vec<String>,
    pub stack_selected_tool_names: Vec<String>,
    pub unmatched_allow_patterns: Vec<String>,
    pub diagnostics: Vec<ContractDiagnostic>,
}

/// `negotiate(catalog, stackToolPolicy, access)`.
pub fn negotiate(
    catalog: &[CatalogTool],
    policy: Option<&Policy>,
    access: &AccessFacts,
) -> Negotiation {
    let names: Vec<&str> = catalog.iter().map(CatalogTool::name).collect();
    let selected: Vec<&str> = match policy {
        Some(policy) => policy.apply(&names),
        None => names.clone(),
    };
    let mut out = Negotiation {
        effective_tool_ids: Vec::new(),
        effective_tool_names: Vec::new(),
        stack_selected_tool_names: selected.iter().map(|s| s.to_string()).collect(),
        unmatched_allow_patterns: Vec::new(),
        diagnostics: Vec::new(),
    };
    if let Some(policy) = policy {
        for pattern in policy.allow.iter().filter(|p| *p != "*") {
            if !names
                .iter()
                .any(|n| crate::stack::pattern_matches(pattern, n))
            {
                out.unmatched_allow_patterns.push(pattern.clone());
                out.diagnostics.push(ContractDiagnostic::warning(
                    "tools.unmatched-allow",
                    "tools.allow",
                    format!("Tool allow pattern {pattern} matches no tool of the backend catalog."),
                ));
            }
        }
    }
    for tool in catalog {
        if !selected.contains(&tool.name()) {
            continue;
        }
        if tool.effects().iter().all(|e| access.allows_effect(e)) {
            out.effective_tool_ids.push(tool.id.clone());
            out.effective_tool_names.push(tool.name().to_string());
        } else {
            out.diagnostics.push(ContractDiagnostic::info(
                "tools.access-filtered",
                &format!("tools.{}", tool.name()),
                format!(
                    "Tool {} is removed: the requested access does not allow its effects.",
                    tool.name()
                ),
            ));
        }
    }
    out
}
