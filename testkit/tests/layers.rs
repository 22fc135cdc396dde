//! The layering holds: in every crate of the workspace (the members the root Cargo.toml
//! names), no module imports, directly or through others, a sibling module that imports it
//! back, at every level: between the top-level modules of a crate as between the files of one
//! directory. Read from the sources (see `kplace_testkit::source`): a `crate::a::b`, `super::b`
//! or `self::b` path outside comments and the unit tests is an edge from the importing module
//! to the sibling on the way to `a::b`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kplace_testkit::source::{Edges, circles, cycle_from, edges, members};

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let root = kplace_testkit::workspace();
    let members = members(&root);
    let mut found = Vec::new();
    for member in &members {
        let krate = member.strip_prefix(&root).unwrap_or(member).display();
        let src = member.join("src");
        assert!(
            src.join("lib.rs").is_file()
                || src.join("main.rs").is_file()
                || src.join("bin").is_dir(),
            "{krate}: no src/lib.rs, src/main.rs or src/bin: is this the right folder?"
        );
        found.extend(circles(&src).into_iter().map(|c| format!("{krate}: {c}")));
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
    // The reading sees imports at all: these crates' modules import each other.
    for krate in [
        "runtime/core",
        "runtime/harness",
        "lab",
        "workloads/radar",
        "cli",
    ] {
        assert!(
            members.contains(&root.join(krate)),
            "{krate} is not a member"
        );
        assert!(
            edges(&root.join(krate).join("src"))
                .get("crate")
                .is_some_and(|e| !e.is_empty()),
            "{krate}: no module imports another: is this the right folder?"
        );
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

/// Writes `files` (path under `src/`, text) into a fresh crate's `src/`.
fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        std::fs::write(&path, text).expect("write a source");
    }
    dir
}

fn scope<'a>(edges: &'a BTreeMap<String, Edges>, scope: &str) -> &'a Edges {
    edges
        .get(scope)
        .unwrap_or_else(|| panic!("no edges in {scope}: {edges:?}"))
}

#[test]
fn a_circle_between_the_files_of_one_directory_is_found() {
    let dir = crate_of(&[
        ("lib.rs", "pub mod executor;\npub mod plan;\n"),
        ("plan.rs", "pub struct Plan;\n"),
        (
            "executor/mod.rs",
            "mod scratch;\nmod slot;\nuse crate::plan::Plan;\npub struct RunError;\n",
        ),
        (
            "executor/slot.rs",
            "use super::RunError;\nuse super::scratch::{\n    FrameSets,\n    take,\n};\n",
        ),
        (
            "executor/scratch.rs",
            "// crate::executor::pool is a comment\npub fn f() -> crate::executor::slot::SlotError { todo!() }\n\
             #[cfg(test)]\nmod tests {\n    use super::super::pool;\n}\n",
        ),
        ("executor/pool.rs", "use super::super::plan;\n"),
    ]);
    let src = dir.path().join("src");
    let edges = edges(&src);
    assert_eq!(
        scope(&edges, "crate::executor").get("slot"),
        Some(&BTreeSet::from(["scratch".to_string()]))
    );
    assert_eq!(
        scope(&edges, "crate::executor").get("scratch"),
        Some(&BTreeSet::from(["slot".to_string()])),
        "comments and unit tests are no edge: {edges:?}"
    );
    assert_eq!(
        scope(&edges, "crate").get("executor"),
        Some(&BTreeSet::from(["plan".to_string()])),
        "super::super from executor/pool.rs is the crate root"
    );
    let circles = circles(&src);
    assert!(
        circles.contains(&"crate::executor: scratch -> slot -> scratch".to_string()),
        "{circles:?}"
    );
    assert!(
        circles.iter().all(|c| c.starts_with("crate::executor: ")),
        "only the nested circle: {circles:?}"
    );
}

#[test]
fn the_crates_are_the_workspace_members() {
    let root = kplace_testkit::workspace();
    let members = members(&root);
    assert!(members.contains(&root.join("runtime")));
    assert!(members.contains(&root.join("testkit")));
    assert!(
        members.iter().all(|m| m.join("Cargo.toml").is_file()),
        "{members:?}"
    );
    assert!(!members.contains(&Path::new(&root).to_path_buf()));
}
