//! docs/architecture.md is the code map and these tests keep it true: it names every module of
//! forge-core, pi-forge (including `http/*`) and forge-web, every module it describes
//! (`` `name` — ``) and every module path it writes (`capability::ops`, `http::write::mutate`)
//! exists; its layer map lists every source file once, and the imports of the three crates have
//! no circle and never climb a layer.

#[path = "code_map/mod.rs"]
mod code_map;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use code_map::{circles, describe_circles, CodeMap, Layers};

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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn doc() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).unwrap()
}

/// What is wrong with one crate's imports against its layer map.
fn problems(src: &Path, layers: &Layers) -> Vec<String> {
    let map = CodeMap::read(src).unwrap();
    let edges = map.edges().unwrap();
    let found = circles(&edges);
    let mut problems = describe_circles(&found);
    problems.extend(layers.check(&map, &edges));
    problems
}

#[test]
fn no_crate_has_an_import_circle_or_a_use_that_climbs_a_layer() {
    let doc = doc();
    for krate in ["core", "server", "web"] {
        let layers = Layers::parse(&doc, &format!("{krate}/src")).unwrap();
        let problems = problems(&root().join(krate).join("src"), &layers);
        assert!(
            problems.is_empty(),
            "{krate}/src against docs/architecture.md \"Layers\":\n{}",
            problems.join("\n")
        );
    }
}

#[test]
fn the_checker_reports_a_deliberate_circle_and_a_climb_with_their_lines() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/code_map/fixture/src");
    let layers = Layers::parse(
        "```text\nlayers of fixture (top to bottom)\ntop: lib a\nlow: b c\n```\n",
        "fixture",
    )
    .unwrap();
    let problems = problems(&fixture, &layers);
    assert_eq!(
        problems,
        [
            "import circle between a.rs, b.rs:\n    a.rs:1 → b.rs: use crate::b::B;\n    \
             b.rs:3 → a.rs: pub fn make() -> super::a::A {\n    b.rs:4 → a.rs: crate::a::A(B)",
            "b.rs:3 (low) uses a.rs (top), a layer above: pub fn make() -> super::a::A {",
            "b.rs:4 (low) uses a.rs (top), a layer above: crate::a::A(B)",
            "c.rs:1 (low) uses a.rs (top), a layer above: pub fn wrap() -> crate::a::A {",
        ]
    );
}

#[test]
fn the_layer_map_must_list_every_source_file_and_no_other() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/code_map/fixture/src");
    let layers = Layers::parse(
        "layers of fixture\ntop: lib a gone\nlow: b\n```\n",
        "fixture",
    )
    .unwrap();
    let map = CodeMap::read(&fixture).unwrap();
    let problems = layers.check(&map, &[]);
    assert_eq!(
        problems,
        [
            "c.rs (`c`) is in no layer",
            "the layer map names `gone`, which is no source file",
        ]
    );
}

/// Backticked `a::b` paths in `text` whose first segment is one of `tops`.
fn module_paths(text: &str, tops: &BTreeSet<String>) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|inside| {
            inside.contains("::")
                && !inside.ends_with("::")
                && inside
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        })
        .map(|inside| inside.trim_start_matches("crate::").to_string())
        .filter(|path| tops.contains(path.split("::").next().unwrap_or_default()))
        .collect()
}

#[test]
fn every_module_path_the_doc_writes_exists() {
    let doc = doc();
    for (heading, krate) in [
        ("### `core/`", "core"),
        ("### `server/`", "server"),
        ("### `web/`", "web"),
    ] {
        let map = CodeMap::read(&root().join(krate).join("src")).unwrap();
        let tops: BTreeSet<String> = map
            .modules
            .keys()
            .filter(|m| m.len() == 1)
            .map(|m| m[0].clone())
            .collect();
        let mut text = section(&doc, heading).to_string();
        let layers = Layers::parse(&doc, &format!("{krate}/src")).unwrap();
        {
            text.push_str(
                &layers
                    .layers
                    .iter()
                    .flat_map(|(_, m)| m.iter().map(|m| format!(" `{m}` ")))
                    .collect::<String>(),
            );
        }
        let missing: Vec<String> = module_paths(&text, &tops)
            .into_iter()
            .filter(|path| !map.names(path))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/architecture.md names module paths that do not exist in {krate}/src: {missing:?}"
        );
    }
}
