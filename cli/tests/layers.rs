//! The layering holds: within each crate of the data path, the lab, the workload and the
//! binary, no top-level module imports, directly or through others, a module that imports it
//! back. Read from the sources: a `crate::m` path (or, in a top-level file, `super::m`) outside
//! comments and the unit tests is an edge from the file's top-level module to `m`.

#[path = "../../runtime/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every edge between the top-level modules of the crate whose sources are in `src`.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(src).unwrap();
        let depth = relative.components().count();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut prefixes = vec!["crate::"];
            if depth == 1 {
                prefixes.push("super::");
            }
            for prefix in prefixes {
                for (at, _) in line.match_indices(prefix) {
                    let before = line[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let name: String = line[at + prefix.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != module {
                        edges.entry(module.clone()).or_default().insert(name);
                    }
                }
            }
        }
    }
    edges
}

/// A cycle through `start`, if there is one: the modules in order.
fn cycle_from(edges: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![start.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in edges.get(last).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let root = support::workspace();
    for krate in ["runtime", "lab", "graphs/radar", "cli", "backends/contract"] {
        let edges = edges(&root.join(krate).join("src"));
        assert!(
            !edges.is_empty() || krate == "backends/contract",
            "{krate}: no module imports another: is this the right folder?"
        );
        for module in edges.keys() {
            if let Some(cycle) = cycle_from(&edges, module) {
                panic!("{krate}: an import circle: {}", cycle.join(" -> "));
            }
        }
    }
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("plan", &["model", "plugin"][..]),
        ("plugin", &["cuda"][..]),
        ("cuda", &["plugin"][..]),
        ("model", &[][..]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_string(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    assert_eq!(
        cycle_from(&edges, "plugin"),
        Some(vec!["plugin".into(), "cuda".into(), "plugin".into()])
    );
    assert_eq!(cycle_from(&edges, "model"), None);
    assert_eq!(
        cycle_from(&edges, "plan"),
        None,
        "plan reaches a circle but is not on it"
    );
}
