//! The runtime's crates keep their graph: each depends on the crates below it only (see
//! docs/architecture.md, "The crate graph"), read from its manifest's `[dependencies]` and from
//! its sources; and the data path (`kplace-core`) builds without the report's dependencies, as
//! `cargo tree` resolves it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kplace_testkit::source::{non_test_part, rust_files};

/// The runtime's crates, bottom up: (folder, package, the workspace's crates it may depend on).
const GRAPH: &[(&str, &str, &[&str])] = &[
    (
        "runtime/core",
        "kplace-core",
        &["kplace-abi", "kplace-cuda-libs"],
    ),
    ("runtime/net", "kplace-net", &["kplace-core"]),
    (
        "runtime/report",
        "kplace-report",
        &["kplace-core", "kplace-net", "kplace-cuda-libs"],
    ),
    (
        "runtime/harness",
        "kplace-harness",
        &["kplace-core", "kplace-net", "kplace-report", "kplace-abi"],
    ),
];

/// Packages the data path must build without: HTTP and metrics encoding, NVML, JSON Schema,
/// random numbers.
const NOT_IN_CORE: &[&str] = &[
    "prometheus-client",
    "nvml-wrapper",
    "schemars",
    "rand",
    "rand_distr",
    "rand_pcg",
    "tiny_http",
    "hyper",
];

/// The names of the packages in a manifest's `[dependencies]` table (not dev- or build-).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut in_table = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_table = line == "[dependencies]";
            continue;
        }
        if !in_table || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line
            .split(['=', '.'])
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        names.push(name);
    }
    names
}

/// The workspace's own crates (`kplace*`) among `names`.
fn own(names: &[String]) -> Vec<&str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with("kplace"))
        .collect()
}

#[test]
fn each_runtime_crate_depends_only_on_the_crates_below_it() {
    let root = kplace_testkit::workspace();
    let mut wrong = Vec::new();
    for (folder, package, allowed) in GRAPH {
        let manifest = std::fs::read_to_string(root.join(folder).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{folder}/Cargo.toml: {e}"));
        assert!(
            manifest.contains(&format!("name = \"{package}\"")),
            "{folder} is not {package}"
        );
        for dep in own(&dependencies(&manifest)) {
            if !allowed.contains(&dep) {
                wrong.push(format!("{package} depends on {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the crate graph is broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_runtime_crate_names_a_crate_above_it_in_its_sources() {
    let root = kplace_testkit::workspace();
    let mut wrong = Vec::new();
    for (i, (folder, package, _)) in GRAPH.iter().enumerate() {
        // The crates above this one, as their paths are written in Rust, and the facade.
        let above: Vec<String> = GRAPH[i + 1..]
            .iter()
            .map(|(_, p, _)| p.replace('-', "_"))
            .chain(["kplace::".to_string()])
            .collect();
        for path in rust_files(&root.join(folder).join("src")) {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for (number, line) in non_test_part(&text).lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                for name in &above {
                    if code.contains(name.as_str()) {
                        wrong.push(format!(
                            "{}:{}: {package} names {name}",
                            path.strip_prefix(&root).unwrap_or(&path).display(),
                            number + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_manifest_reading_sees_dependencies_and_nothing_else() {
    let manifest = "[package]\nname = \"x\"\n\n[features]\nschema = [\"dep:schemars\"]\n\n\
                    [dependencies]\nkplace-core.workspace = true\n# a comment\n\
                    serde = { workspace = true }\nlibc = \"0.2\"\n\n[dev-dependencies]\n\
                    kplace-report.workspace = true\n";
    assert_eq!(dependencies(manifest), ["kplace-core", "serde", "libc"]);
    assert_eq!(own(&dependencies(manifest)), ["kplace-core"]);
}

/// The packages `cargo tree` resolves for `package`'s normal dependencies, as built alone.
fn tree(package: &str) -> Vec<String> {
    let root = kplace_testkit::workspace();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = kplace_testkit::process::output_within(
        Command::new(cargo)
            .current_dir(&root)
            .args(["tree", "--offline", "--edges", "normal", "--prefix", "none"])
            .args(["--format", "{p}", "--package", package]),
        Duration::from_secs(120),
        None,
    );
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn the_data_path_builds_without_http_nvml_json_schema_or_random_numbers() {
    let core = tree("kplace-core");
    assert!(
        core.iter().any(|p| p == "kplace-core") && core.iter().any(|p| p == "cudarc"),
        "cargo tree printed no packages: {core:?}"
    );
    let found: Vec<&String> = core
        .iter()
        .filter(|p| NOT_IN_CORE.contains(&p.as_str()))
        .collect();
    assert!(found.is_empty(), "kplace-core builds with {found:?}");
    // The report crate does pull them in: the check reads what it means to.
    let report = tree("kplace-report");
    for package in ["prometheus-client", "nvml-wrapper", "schemars"] {
        assert!(
            report.iter().any(|p| p == package),
            "kplace-report without {package}: {report:?}"
        );
    }
}

#[test]
fn the_crates_in_the_graph_are_workspace_members() {
    let root = kplace_testkit::workspace();
    let members = kplace_testkit::source::members(&root);
    for (folder, _, _) in GRAPH {
        assert!(
            members.contains(&Path::new(&root).join(folder)),
            "{folder} is not a member"
        );
    }
}
