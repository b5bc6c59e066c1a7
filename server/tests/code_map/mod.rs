//! The code map of a crate as the compiler sees it: its module tree (files and inline modules),
//! the items each module defines, and every reference one source file makes to another through
//! `crate::`, `super::`, `self::`, a child module or a module brought in by `use`, in `use`
//! declarations, in code and in macro bodies. `pub use` re-exports are followed to the file that
//! defines the item, so a facade module is not mistaken for the owner.
//!
//! The architecture tests use it to find import circles between files and imports that climb a
//! layer (docs/architecture.md, "Layers").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::Visit;

/// `["http", "host"]` for `crate::http::host`; the crate root is `[]`.
pub type ModPath = Vec<String>;

/// What a crate's sources say, module by module.
pub struct CodeMap {
    /// Every module, inline ones included.
    pub modules: BTreeMap<ModPath, Module>,
    /// Source files by their path relative to `root` (`http/host.rs`), with their module path.
    pub files: BTreeMap<String, ModPath>,
    sources: BTreeMap<String, Vec<String>>,
}

#[derive(Default)]
pub struct Module {
    /// The file it is written in, relative to the crate's `src/`.
    pub file: String,
    pub children: BTreeSet<String>,
    /// Names this module defines itself (functions, types, traits, constants, macros).
    pub items: BTreeSet<String>,
    uses: Vec<UseDecl>,
}

struct UseDecl {
    /// The name it brings in; `None` for a glob.
    name: Option<String>,
    path: Vec<String>,
    public: bool,
    line: usize,
}

/// One reference from a file to another: `from` uses something `to` defines.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub line: usize,
    /// The source line, trimmed.
    pub text: String,
}

impl CodeMap {
    /// Reads every `.rs` file under `root` (a crate's `src/`); the crate root is `lib.rs` or
    /// `main.rs`.
    pub fn read(root: &Path) -> Result<CodeMap, String> {
        let mut map = CodeMap {
            modules: BTreeMap::new(),
            files: BTreeMap::new(),
            sources: BTreeMap::new(),
        };
        let mut found = Vec::new();
        collect_rs(root, &mut found)?;
        found.sort();
        for path in found {
            let rel = path
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .replace('\\', "/");
            let module = file_module(&rel);
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{rel}: {e}"))?;
            let file = syn::parse_file(&text).map_err(|e| format!("{rel}: {e}"))?;
            map.sources
                .insert(rel.clone(), text.lines().map(str::to_string).collect());
            map.files.insert(rel.clone(), module.clone());
            map.add_items(&rel, &module, &file.items);
        }
        // A file module is a child of its parent even where the parent's `mod x;` is behind a
        // cfg the parser cannot see.
        let file_modules: Vec<ModPath> = map.files.values().cloned().collect();
        for module in file_modules {
            if let Some((last, parent)) = module.split_last() {
                map.modules
                    .entry(parent.to_vec())
                    .or_default()
                    .children
                    .insert(last.clone());
            }
        }
        Ok(map)
    }

    fn add_items(&mut self, rel: &str, module: &ModPath, items: &[syn::Item]) {
        let entry = self.modules.entry(module.clone()).or_default();
        entry.file = rel.to_string();
        for item in items {
            let name = match item {
                syn::Item::Fn(f) => Some(f.sig.ident.to_string()),
                syn::Item::Struct(s) => Some(s.ident.to_string()),
                syn::Item::Enum(e) => Some(e.ident.to_string()),
                syn::Item::Const(c) => Some(c.ident.to_string()),
                syn::Item::Static(s) => Some(s.ident.to_string()),
                syn::Item::Type(t) => Some(t.ident.to_string()),
                syn::Item::Trait(t) => Some(t.ident.to_string()),
                syn::Item::Union(u) => Some(u.ident.to_string()),
                syn::Item::Macro(m) => m.ident.as_ref().map(|i| i.to_string()),
                _ => None,
            };
            if let Some(name) = name {
                self.modules
                    .entry(module.clone())
                    .or_default()
                    .items
                    .insert(name);
            }
        }
        for item in items {
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    self.modules
                        .entry(module.clone())
                        .or_default()
                        .children
                        .insert(name.clone());
                    if let Some((_, inner)) = &m.content {
                        let mut child = module.clone();
                        child.push(name);
                        self.add_items(rel, &child, inner);
                    }
                }
                syn::Item::Use(u) => {
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    let line = line_of(u.use_token.span);
                    let mut decls = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut decls);
                    let entry = self.modules.entry(module.clone()).or_default();
                    for (path, name) in decls {
                        entry.uses.push(UseDecl {
                            name,
                            path,
                            public,
                            line,
                        });
                    }
                }
                _ => {}
            }
        }
    }

    /// The module a path written in `module` names, as an absolute path, or `None` when it
    /// leaves the crate (another crate, the prelude, a local name).
    fn absolute(&self, module: &ModPath, path: &[String], depth: usize) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        if depth > 16 {
            return None;
        }
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.clone(),
            "super" => {
                let mut base = module.clone();
                base.pop()?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name => {
                let here = self.modules.get(module)?;
                if here.children.contains(name) {
                    let mut base = module.clone();
                    base.push(name.to_string());
                    base
                } else if here.items.contains(name) {
                    return None;
                } else {
                    let decl = here.uses.iter().find(|u| u.name.as_deref() == Some(name))?;
                    let mut target = self.absolute(module, &decl.path, depth + 1)?;
                    target.extend(rest.iter().cloned());
                    return Some(target);
                }
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what `path` (absolute) names: the deepest module on the path, with
    /// a named `pub use` there followed to where the item comes from.
    fn owner(&self, path: &ModPath, depth: usize) -> Option<String> {
        let mut len = path.len();
        while len > 0 && !self.modules.contains_key(&path[..len]) {
            len -= 1;
        }
        let module_path = path[..len].to_vec();
        let module = self.modules.get(&module_path)?;
        if let Some(name) = path.get(len) {
            if depth < 16 && !module.items.contains(name) && !module.children.contains(name) {
                if let Some(mut target) = self.imported(&module_path, name, depth) {
                    target.extend(path[len + 1..].iter().cloned());
                    return self.owner(&target, depth + 1);
                }
            }
        }
        Some(module.file.clone())
    }

    /// Where a name that `module` imports (by name, else through a glob) comes from.
    fn imported(&self, module_path: &ModPath, name: &str, depth: usize) -> Option<ModPath> {
        let module = self.modules.get(module_path)?;
        if let Some(decl) = module.uses.iter().find(|u| u.name.as_deref() == Some(name)) {
            return self.absolute(module_path, &decl.path, 0);
        }
        module
            .uses
            .iter()
            .filter(|u| u.name.is_none())
            .filter_map(|u| self.absolute(module_path, &u.path, 0))
            .find(|glob| {
                self.modules.get(glob).is_some_and(|m| {
                    m.items.contains(name)
                        || m.children.contains(name)
                        || (depth < 8 && self.imported(glob, name, depth + 1).is_some())
                })
            })
            .map(|mut glob| {
                glob.push(name.to_string());
                glob
            })
    }

    /// Every reference between two different files, once per (file, line, target).
    pub fn edges(&self) -> Result<Vec<Edge>, String> {
        let mut edges = BTreeSet::new();
        for (module_path, module) in &self.modules {
            for decl in &module.uses {
                // A module re-exporting its own descendants declares its interface, as `mod`
                // does; whoever uses the name is led to the owner.
                let facade = decl.public
                    && self
                        .absolute(module_path, &decl.path, 0)
                        .is_some_and(|target| {
                            target.len() > module_path.len() && target.starts_with(module_path)
                        });
                if !facade {
                    self.add_edge(&mut edges, &module.file, module_path, &decl.path, decl.line);
                }
            }
        }
        for rel in self.files.keys() {
            let text = self.sources[rel].join("\n");
            let file = syn::parse_file(&text).map_err(|e| format!("{rel}: {e}"))?;
            let mut visitor = PathVisitor {
                map: self,
                file: rel,
                module: self.files[rel].clone(),
                edges: &mut edges,
            };
            visitor.visit_file(&file);
        }
        Ok(edges.into_iter().collect())
    }

    fn add_edge(
        &self,
        edges: &mut BTreeSet<Edge>,
        file: &str,
        module: &ModPath,
        path: &[String],
        line: usize,
    ) {
        let Some(absolute) = self.absolute(module, path, 0) else {
            return;
        };
        let Some(to) = self.owner(&absolute, 0) else {
            return;
        };
        if to != file {
            let text = self.sources[file]
                .get(line.saturating_sub(1))
                .map(|l| l.trim().to_string())
                .unwrap_or_default();
            edges.insert(Edge {
                from: file.to_string(),
                to,
                line,
                text,
            });
        }
    }
}

struct PathVisitor<'a> {
    map: &'a CodeMap,
    file: &'a str,
    module: ModPath,
    edges: &'a mut BTreeSet<Edge>,
}

impl<'ast> Visit<'ast> for PathVisitor<'_> {
    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        self.module.push(node.ident.to_string());
        syn::visit::visit_item_mod(self, node);
        self.module.pop();
    }

    // `use` declarations were counted from the module table.
    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}

    fn visit_path(&mut self, node: &'ast syn::Path) {
        if node.leading_colon.is_none() && node.segments.len() > 1 {
            let path: Vec<String> = node.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = line_of(node.segments[0].ident.span());
            self.map
                .add_edge(self.edges, self.file, &self.module, &path, line);
        }
        syn::visit::visit_path(self, node);
    }

    fn visit_macro(&mut self, node: &'ast syn::Macro) {
        self.visit_path(&node.path);
        self.tokens(node.tokens.clone());
    }
}

impl PathVisitor<'_> {
    /// Paths written inside a macro call (`view!`, `format!`, …): `a::b…` sequences.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(group) => self.tokens(group.stream()),
                TokenTree::Ident(first) if !preceded_by_colons(&trees, i) => {
                    let mut path = vec![first.to_string()];
                    let mut j = i + 1;
                    while colons_at(&trees, j) {
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => {
                                path.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if path.len() > 1 {
                        let line = line_of(first.span());
                        self.map
                            .add_edge(self.edges, self.file, &self.module, &path, line);
                        i = j;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

fn colons_at(trees: &[TokenTree], at: usize) -> bool {
    matches!((trees.get(at), trees.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':' && a.spacing() == proc_macro2::Spacing::Joint)
}

fn preceded_by_colons(trees: &[TokenTree], at: usize) -> bool {
    at >= 2 && colons_at(trees, at - 2)
}

fn line_of(span: Span) -> usize {
    span.start().line
}

/// `use a::{b, c::d as e, f::*}` as `([a, b], Some(b))`, `([a, c, d], Some(e))`,
/// `([a, f], None)`; `self` in a group names the group's own path.
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                out.push((prefix.clone(), prefix.last().cloned()));
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                flatten_use(item, prefix, out);
            }
        }
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `lib.rs`/`main.rs` → `[]`, `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
pub fn file_module(rel: &str) -> ModPath {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        return Vec::new();
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The import circles: sets of two or more files that reach each other (strongly connected
/// components of the file graph), each with the edges inside it.
pub fn circles(edges: &[Edge]) -> Vec<(Vec<String>, Vec<Edge>)> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for edge in edges {
        graph.entry(&edge.from).or_default().insert(&edge.to);
        graph.entry(&edge.to).or_default();
    }
    let nodes: Vec<&str> = graph.keys().copied().collect();
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            for next in &graph[node] {
                if seen.insert(*next) {
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for node in &nodes {
        if done.contains(node) || !reaches[node].contains(node) {
            continue;
        }
        let members: Vec<String> = nodes
            .iter()
            .filter(|other| reaches[node].contains(*other) && reaches[*other].contains(node))
            .map(|s| s.to_string())
            .collect();
        for member in &nodes {
            if members.iter().any(|m| m == member) {
                done.insert(member);
            }
        }
        let inside: Vec<Edge> = edges
            .iter()
            .filter(|e| members.contains(&e.from) && members.contains(&e.to))
            .cloned()
            .collect();
        if members.len() > 1 {
            out.push((members, inside));
        }
    }
    out
}

/// A file's module path as docs/architecture.md writes it: `http::host`; the crate root is
/// `lib` or `main` (its file name).
pub fn display_path(rel: &str, module: &ModPath) -> String {
    if module.is_empty() {
        rel.trim_end_matches(".rs").to_string()
    } else {
        module.join("::")
    }
}

/// The layers of one crate, top first: each a name and the module paths in it.
#[derive(Debug)]
pub struct Layers {
    pub layers: Vec<(String, Vec<String>)>,
}

impl Layers {
    /// Reads the block that opens with `layers of <crate>`: one `name: module module …` line
    /// per layer (continued on indented lines), top first, up to the closing fence.
    pub fn parse(doc: &str, krate: &str) -> Result<Layers, String> {
        let opening = format!("layers of {krate}");
        let mut lines = doc
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(&opening));
        if lines.next().is_none() {
            return Err(format!("docs/architecture.md has no `{opening}` block"));
        }
        let mut layers: Vec<(String, Vec<String>)> = Vec::new();
        for line in lines {
            if line.trim_start().starts_with("```") {
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            let continued = line.starts_with(char::is_whitespace);
            let (name, rest) = match line.split_once(':') {
                Some((name, rest)) if !continued && !name.contains(' ') => (Some(name), rest),
                _ => (None, line),
            };
            let modules = rest
                .split_whitespace()
                .filter(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
                })
                .map(str::to_string);
            match (name, layers.last_mut()) {
                (Some(name), _) => layers.push((name.to_string(), modules.collect())),
                (None, Some(last)) => last.1.extend(modules),
                (None, None) => {
                    return Err(format!(
                        "`{opening}`: a module list before any layer name: {line}"
                    ))
                }
            }
        }
        Ok(Layers { layers })
    }

    fn index_of(&self, module: &str) -> Option<usize> {
        self.layers
            .iter()
            .position(|(_, modules)| modules.iter().any(|m| m == module))
    }

    /// What is wrong between the code and the layer map: files in no layer, names in the map
    /// that are no file, modules named twice, and every reference that climbs a layer.
    pub fn check(&self, map: &CodeMap, edges: &[Edge]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
        let mut named: BTreeMap<String, usize> = BTreeMap::new();
        for (_, modules) in &self.layers {
            for module in modules {
                *named.entry(module.clone()).or_default() += 1;
            }
        }
        for (module, count) in &named {
            if *count > 1 {
                problems.push(format!("`{module}` is in more than one layer"));
            }
        }
        let mut files: BTreeSet<String> = BTreeSet::new();
        for (rel, module) in &map.files {
            let shown = display_path(rel, module);
            match self.index_of(&shown) {
                Some(index) => {
                    layer_of.insert(rel, index);
                }
                None => problems.push(format!("{rel} (`{shown}`) is in no layer")),
            }
            files.insert(shown);
        }
        for module in named.keys() {
            if !files.contains(module) {
                problems.push(format!(
                    "the layer map names `{module}`, which is no source file"
                ));
            }
        }
        for edge in edges {
            let (Some(from), Some(to)) = (
                layer_of.get(edge.from.as_str()),
                layer_of.get(edge.to.as_str()),
            ) else {
                continue;
            };
            if to < from {
                problems.push(format!(
                    "{}:{} ({}) uses {} ({}), a layer above: {}",
                    edge.from,
                    edge.line,
                    self.layers[*from].0,
                    edge.to,
                    self.layers[*to].0,
                    edge.text
                ));
            }
        }
        problems
    }
}

/// Every circle as text: its files, then each reference inside it with its line.
pub fn describe_circles(circles: &[(Vec<String>, Vec<Edge>)]) -> Vec<String> {
    circles
        .iter()
        .map(|(members, inside)| {
            let mut text = format!("import circle between {}:", members.join(", "));
            for edge in inside {
                text.push_str(&format!(
                    "\n    {}:{} → {}: {}",
                    edge.from, edge.line, edge.to, edge.text
                ));
            }
            text
        })
        .collect()
}

impl CodeMap {
    /// Whether `path` (`capability::ops`, `http::write::mutate`) names a module of this crate or
    /// an item one of them defines or imports.
    pub fn names(&self, path: &str) -> bool {
        let path: ModPath = path.split("::").map(str::to_string).collect();
        if self.modules.contains_key(&path) {
            return true;
        }
        let Some((last, parent)) = path.split_last() else {
            return false;
        };
        self.modules.get(parent).is_some_and(|m| {
            m.items.contains(last)
                || m.uses
                    .iter()
                    .any(|u| u.name.as_deref() == Some(last.as_str()))
                || self.imported(&parent.to_vec(), last, 0).is_some()
        })
    }
}
