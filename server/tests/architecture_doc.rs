//! docs/architecture.md is the code map: it must name every module of forge-core, pi-forge
//! (including `http/*`) and forge-web, and every module it describes (`` `name` — ``) must exist.

use std::collections::BTreeSet;
use std::path::Path;

/// Module names of a source folder: `x.rs` and `x/` (with `mod.rs` or a sibling `x.rs`), less
/// the crate roots.
fn modules(dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if path.join("mod.rs").is_file() || dir.join(format!("{name}.rs")).is_file() {
                names.insert(name);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && !["lib", "main", "mod"].contains(&name.as_str())
        {
            names.insert(name);
        }
    }
    names
}

/// The text of the `### \`<crate>/\`` section.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/architecture.md has no section {heading}"));
    let rest = &doc[start + heading.len()..];
    let end = rest
        .find("\n### ")
        .or_else(|| rest.find("\n## "))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Backticked names in `text`, and the ones described as `` `name` — ``.
fn named(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut all = BTreeSet::new();
    let mut described = BTreeSet::new();
    let mut parts = text.split('`');
    parts.next();
    while let Some(inside) = parts.next() {
        let after = parts.next().unwrap_or_default();
        let name = inside
            .trim_end_matches(".rs")
            .trim_start_matches("http/")
            .to_string();
        if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !name.is_empty() {
            if after.starts_with(" —") {
                described.insert(name.clone());
            }
            all.insert(name);
        }
    }
    (all, described)
}

#[test]
fn the_architecture_doc_names_every_module_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let crates = [
        ("### `core/`", vec![root.join("core/src")]),
        (
            "### `server/`",
            vec![root.join("server/src"), root.join("server/src/http")],
        ),
        ("### `web/`", vec![root.join("web/src")]),
    ];
    for (heading, dirs) in crates {
        let existing: BTreeSet<String> = dirs.iter().flat_map(|d| modules(d)).collect();
        let (all, described) = named(section(&doc, heading));
        let missing: Vec<&String> = existing.difference(&all).collect();
        assert!(
            missing.is_empty(),
            "docs/architecture.md {heading} does not name the modules {missing:?}"
        );
        let unknown: Vec<&String> = described.difference(&existing).collect();
        assert!(
            unknown.is_empty(),
            "docs/architecture.md {heading} describes modules that do not exist: {unknown:?}"
        );
    }
}
