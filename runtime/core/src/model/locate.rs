//! Where kplace finds the graphs, placements and kernel libraries it ships, wherever it runs
//! from: relative to its own executable, in either of the two layouts it is run from.
//!
//! - **Installed** (`scripts/install.sh PREFIX`): `PREFIX/bin/kplace`, the kernel libraries in
//!   `PREFIX/lib/kplace/`, the workloads' graphs and placements in
//!   `PREFIX/share/kplace/workloads/`.
//! - **Built** (`cargo build`): `target/<profile>/kplace` with the libraries beside it, in a
//!   workspace whose `workloads/` is two levels above.
//!
//! A `--graph` or `--placement` that names an existing file is that file. Otherwise a name is
//! looked up: graph `radar` is `workloads/radar/graph.yaml` under the current directory or a
//! data directory ([`data_dirs`]), and graph `beamformer/filtered` is
//! `workloads/beamformer/filtered/graph.yaml`; placement `all-cpu` is `placements/all-cpu.yaml`
//! or `all-cpu.yaml` beside the graph, or else the one workload placement of that name under
//! the data directories (so the radar's `all-cpu`, the default, serves a graph of the
//! user's own beside no placements). A name found nowhere is an error naming every place
//! looked and the names that are there ([`graph_names`], [`placement_names`]), the closest
//! first (`did you mean all-cpu?`); one that several workloads have, an error naming them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable naming a directory to search first for graphs and placements by name
/// (a directory holding `workloads/`).
pub const DATA_DIR_ENV: &str = "KPLACE_DATA_DIR";

/// Why a graph or placement named on the command line was not found.
#[derive(Debug, thiserror::Error)]
pub enum NotFound {
    /// No file and no file of that name.
    #[error(
        "{what} {name}: no such file, and not found by name in: {}{}",
        searched_list(.searched),
        Suggestion { name, known, what }
    )]
    Nowhere {
        /// `graph` or `placement`.
        what: &'static str,
        /// The name as written.
        name: String,
        /// Every path tried, in order.
        searched: Vec<PathBuf>,
        /// The names that would have been found, sorted.
        known: Vec<String>,
    },
    /// Several workloads have a placement of that name, and none is beside the graph.
    #[error("placement {name}: not beside the graph, and several workloads have one: {}; give its path", searched_list(.candidates))]
    Ambiguous {
        /// The name as written.
        name: String,
        /// The placements of that name.
        candidates: Vec<PathBuf>,
    },
}

/// What a [`NotFound::Nowhere`] error adds: the closest names that are there, and all of them.
struct Suggestion<'a> {
    name: &'a str,
    known: &'a [String],
    what: &'a str,
}

impl std::fmt::Display for Suggestion<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.known.is_empty() {
            return Ok(());
        }
        let closest = closest(self.name, self.known);
        if !closest.is_empty() {
            write!(f, "; did you mean {}?", closest.join(" or "))?;
        }
        let whose = match self.what {
            "placement" => "the graph's placements",
            _ => "graphs by name",
        };
        write!(f, " ({whose}: {})", self.known.join(", "))
    }
}

/// The names of `known` nearest `name` by edit distance (insertions, deletions and
/// substitutions of a character), when near enough to be a slip rather than another name: at
/// most 2 edits, or a third of the name's length for a longer one. Ties all, in `known`'s
/// order.
pub fn closest<'a>(name: &str, known: &'a [String]) -> Vec<&'a str> {
    let limit = 2.max(name.chars().count() / 3);
    let distances: Vec<(usize, &str)> = known
        .iter()
        .map(|k| (edit_distance(name, k), k.as_str()))
        .filter(|&(d, _)| d <= limit)
        .collect();
    let Some(best) = distances.iter().map(|&(d, _)| d).min() else {
        return Vec::new();
    };
    distances
        .into_iter()
        .filter(|&(d, _)| d == best)
        .map(|(_, k)| k)
        .collect()
}

/// Levenshtein distance between `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

fn searched_list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The directories that may hold `workloads/`: the current one (as the relative path ``, so
/// what is found there reads as it would be typed), `$KPLACE_DATA_DIR` (when set and not
/// empty), the installed `share/kplace` beside the executable's `bin/`, and the workspace a
/// built executable sits in (`target/<profile>/../..`), each only when it has `workloads/`.
pub fn data_dirs() -> Vec<PathBuf> {
    dirs_for(
        std::env::var_os(DATA_DIR_ENV),
        std::env::current_exe().ok().as_deref(),
    )
}

fn dirs_for(data_dir: Option<OsString>, exe: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::new()];
    if let Some(dir) = data_dir.filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir));
    }
    if let Some(prefix) = exe.and_then(Path::parent).and_then(Path::parent) {
        dirs.push(prefix.join("share").join("kplace"));
        if let Some(workspace) = prefix.parent() {
            dirs.push(workspace.to_path_buf());
        }
    }
    dirs.retain(|d| d.join("workloads").is_dir());
    // The current directory may be the workspace too: each directory once, first spelling.
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let canonical = d.join("workloads").canonicalize().ok();
        let new = !seen.contains(&canonical);
        seen.push(canonical);
        new
    });
    dirs
}

/// The kernel library directory of an installed executable: `PREFIX/lib/kplace` for
/// `PREFIX/bin/kplace`.
pub fn installed_lib_dir(exe: &Path) -> Option<PathBuf> {
    Some(exe.parent()?.parent()?.join("lib").join("kplace"))
}

/// Whether `written` is a placement's name to look up rather than a path: one component, no
/// extension.
pub(crate) fn is_name(written: &Path) -> bool {
    written.components().count() == 1 && written.extension().is_none()
}

/// Whether `written` is a graph's name to look up rather than a path: a relative path of
/// plain components (`radar`, `beamformer/filtered`) without an extension.
fn is_graph_name(written: &Path) -> bool {
    written.extension().is_none()
        && written.components().count() > 0
        && written
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The graph file `written` names: the file itself, or graph `NAME` under a data directory.
pub fn graph(written: &Path) -> Result<PathBuf, NotFound> {
    graph_in(written, &data_dirs())
}

fn graph_in(written: &Path, dirs: &[PathBuf]) -> Result<PathBuf, NotFound> {
    if written.is_file() || !is_graph_name(written) {
        return Ok(written.to_path_buf());
    }
    let searched: Vec<PathBuf> = std::iter::once(written.to_path_buf())
        .chain(
            dirs.iter()
                .map(|d| d.join("workloads").join(written).join("graph.yaml")),
        )
        .collect();
    match searched.iter().skip(1).find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(NotFound::Nowhere {
            what: "graph",
            name: written.display().to_string(),
            searched,
            known: graph_names_in(dirs),
        }),
    }
}

/// How deep under `workloads/` a graph may be found by name (`beamformer/filtered` is 2).
const GRAPH_NAME_DEPTH: usize = 3;

/// The name of every graph found by name under the data directories ([`data_dirs`]): the
/// directories under their `workloads/` that hold a `graph.yaml` (`radar`,
/// `beamformer/filtered`), sorted, each once.
pub fn graph_names() -> Vec<String> {
    graph_names_in(&data_dirs())
}

fn graph_names_in(dirs: &[PathBuf]) -> Vec<String> {
    let mut names = Vec::new();
    for dir in dirs {
        let root = dir.join("workloads");
        let mut pending = vec![(root.clone(), 0)];
        while let Some((at, depth)) = pending.pop() {
            if depth > 0 && at.join("graph.yaml").is_file() {
                let relative = at.strip_prefix(&root).unwrap_or(&at);
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                names.push(parts.join("/"));
            }
            if depth < GRAPH_NAME_DEPTH
                && let Ok(entries) = std::fs::read_dir(&at)
            {
                pending.extend(
                    entries
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| (e.path(), depth + 1)),
                );
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The name of every placement a graph file `graph` finds by name ([`placement`]): the
/// `.yaml` files in its `placements/` and beside it (but the graph itself), or, where there
/// are none, the workload placements under the data directories that one workload alone has;
/// sorted, each once.
pub fn placement_names(graph: &Path) -> Vec<String> {
    placement_names_in(graph, &data_dirs())
}

fn placement_names_in(graph: &Path, dirs: &[PathBuf]) -> Vec<String> {
    let yaml_names = |dir: &Path, skip: Option<&Path>| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml") && p.is_file())
            .filter(|p| skip.is_none_or(|g| !same_file(p, g)))
            .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
            .collect()
    };
    let graph_dir = graph.parent().unwrap_or(Path::new(""));
    let graph_dir = if graph_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        graph_dir
    };
    let mut names = yaml_names(&graph_dir.join("placements"), None);
    names.extend(yaml_names(graph_dir, Some(graph)));
    if names.is_empty() {
        let mut everywhere: Vec<String> = per_workload(dirs)
            .into_iter()
            .flat_map(|w| yaml_names(&w.join("placements"), None))
            .collect();
        everywhere.sort();
        // A name several workloads have is not found by name alone.
        let mut unique = Vec::new();
        for (i, name) in everywhere.iter().enumerate() {
            let repeated = (i > 0 && everywhere[i - 1] == *name)
                || everywhere.get(i + 1).is_some_and(|next| next == name);
            if !repeated {
                unique.push(name.clone());
            }
        }
        names = unique;
    }
    names.sort();
    names.dedup();
    names
}

/// Whether two paths name one file (through links, as written otherwise).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The placement file `written` names: the file itself, `placements/NAME.yaml` or `NAME.yaml`
/// beside the graph file `graph`, or the one workload placement of that name under the data
/// directories.
pub fn placement(written: &Path, graph: &Path) -> Result<PathBuf, NotFound> {
    placement_in(written, graph, &data_dirs())
}

/// Each workload's folder in `dirs`, once: a workload in several data directories (the
/// current directory a checkout, and an installed kplace beside it) is the first one's, as a
/// graph named is the first found.
fn per_workload(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen = Vec::new();
    let mut folders = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir.join("workloads")) else {
            continue;
        };
        let mut here: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        here.sort();
        for folder in here {
            let name = folder.file_name().map(|n| n.to_os_string());
            if !seen.contains(&name) {
                seen.push(name);
                folders.push(folder);
            }
        }
    }
    folders
}

fn placement_in(written: &Path, graph: &Path, dirs: &[PathBuf]) -> Result<PathBuf, NotFound> {
    if written.is_file() || !is_name(written) {
        return Ok(written.to_path_buf());
    }
    let mut file = written.as_os_str().to_owned();
    file.push(".yaml");
    let graph_dir = graph.parent().unwrap_or(Path::new(""));
    let beside = [
        graph_dir.join("placements").join(&file),
        graph_dir.join(&file),
    ];
    // The graph itself is never its own placement (a placement named `graph`).
    if let Some(found) = beside.iter().find(|p| p.is_file() && *p != graph) {
        return Ok(found.clone());
    }
    let mut candidates: Vec<PathBuf> = per_workload(dirs)
        .into_iter()
        .map(|workload| workload.join("placements").join(&file))
        .filter(|p| p.is_file())
        .collect();
    candidates.sort();
    match candidates.len() {
        1 => Ok(candidates.remove(0)),
        0 => Err(NotFound::Nowhere {
            what: "placement",
            name: written.display().to_string(),
            searched: std::iter::once(written.to_path_buf())
                .chain(beside)
                .chain(
                    dirs.iter()
                        .map(|d| d.join("workloads/*/placements").join(&file)),
                )
                .collect(),
            known: placement_names_in(graph, dirs),
        }),
        _ => Err(NotFound::Ambiguous {
            name: written.display().to_string(),
            candidates,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefix laid out as the installer lays it out, with one graph and one placement.
    fn installed() -> (tempfile::TempDir, PathBuf) {
        let prefix = tempfile::tempdir().unwrap();
        let radar = prefix.path().join("share/kplace/workloads/radar");
        std::fs::create_dir_all(radar.join("placements")).unwrap();
        std::fs::write(radar.join("graph.yaml"), "").unwrap();
        std::fs::write(radar.join("placements/all-cpu.yaml"), "").unwrap();
        std::fs::create_dir_all(prefix.path().join("bin")).unwrap();
        let exe = prefix.path().join("bin/kplace");
        (prefix, exe)
    }

    #[test]
    fn names_resolve_in_the_installed_share_and_paths_stay_paths() {
        let (prefix, exe) = installed();
        let dirs = dirs_for(None, Some(&exe));
        let share = prefix.path().join("share/kplace");
        // The tests run in the package's directory, which has no workloads/.
        assert_eq!(dirs.last(), Some(&share));
        let graph = graph_in(Path::new("radar"), &dirs).unwrap();
        assert_eq!(
            graph,
            prefix
                .path()
                .join("share/kplace/workloads/radar/graph.yaml")
        );
        let all_cpu = prefix
            .path()
            .join("share/kplace/workloads/radar/placements/all-cpu.yaml");
        assert_eq!(
            placement_in(Path::new("all-cpu"), &graph, &dirs).unwrap(),
            all_cpu
        );
        // A graph of the user's own, beside no placements, gets the one workload's of that name.
        let own = prefix.path().join("mine/graph.yaml");
        assert_eq!(
            placement_in(Path::new("all-cpu"), &own, &dirs).unwrap(),
            all_cpu
        );
        // A graph beside its placements (no placements/ folder), named by its path under
        // workloads/.
        let filtered = prefix
            .path()
            .join("share/kplace/workloads/beamformer/filtered");
        std::fs::create_dir_all(&filtered).unwrap();
        std::fs::write(filtered.join("graph.yaml"), "").unwrap();
        std::fs::write(filtered.join("gpu.yaml"), "").unwrap();
        let graph = graph_in(Path::new("beamformer/filtered"), &dirs).unwrap();
        assert_eq!(graph, filtered.join("graph.yaml"));
        assert_eq!(
            placement_in(Path::new("gpu"), &graph, &dirs).unwrap(),
            filtered.join("gpu.yaml")
        );
        // A path, existing or not, is the user's: never replaced by a name's lookup.
        for path in ["graphs/radar.yaml", "radar.yaml", "./radar", "/abs/radar"] {
            assert_eq!(graph_in(Path::new(path), &dirs).unwrap(), Path::new(path));
        }
        assert_eq!(
            installed_lib_dir(&exe).unwrap(),
            prefix.path().join("lib/kplace")
        );
    }

    #[test]
    fn a_workload_in_two_data_directories_is_the_firsts_and_two_workloads_are_ambiguous() {
        // A checkout and an installed kplace, both with the radar's all-cpu.
        let (first, _) = installed();
        let (second, _) = installed();
        let dirs: Vec<PathBuf> = [&first, &second]
            .iter()
            .map(|p| p.path().join("share/kplace"))
            .collect();
        let own = first.path().join("mine/graph.yaml");
        let all_cpu = |root: &tempfile::TempDir| {
            root.path()
                .join("share/kplace/workloads/radar/placements/all-cpu.yaml")
        };
        assert_eq!(
            placement_in(Path::new("all-cpu"), &own, &dirs).unwrap(),
            all_cpu(&first)
        );
        assert_eq!(placement_names_in(&own, &dirs), ["all-cpu"]);
        // Another workload with an all-cpu of its own: the name alone says neither.
        let other = second
            .path()
            .join("share/kplace/workloads/sonar/placements");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("all-cpu.yaml"), "").unwrap();
        match placement_in(Path::new("all-cpu"), &own, &dirs) {
            Err(NotFound::Ambiguous { candidates, .. }) => {
                let mut both = vec![all_cpu(&first), other.join("all-cpu.yaml")];
                both.sort();
                assert_eq!(candidates, both)
            }
            found => panic!("not ambiguous: {found:?}"),
        }
        assert!(placement_names_in(&own, &dirs).is_empty());
    }

    #[test]
    fn a_name_found_nowhere_names_every_place_looked() {
        let (prefix, exe) = installed();
        let dirs = dirs_for(Some("".into()), Some(&exe));
        let e = graph_in(Path::new("sonar"), &dirs).unwrap_err().to_string();
        let want = prefix
            .path()
            .join("share/kplace/workloads/sonar/graph.yaml");
        assert!(
            e.starts_with("graph sonar: no such file, and not found by name in: sonar, ")
                && e.contains(&want.display().to_string()),
            "{e}"
        );
        let graph = prefix
            .path()
            .join("share/kplace/workloads/radar/graph.yaml");
        let e = placement(Path::new("all-gpu"), &graph)
            .unwrap_err()
            .to_string();
        assert!(e.contains("placements/all-gpu.yaml"), "{e}");
        // What is there is listed, the closest first when it is near enough to be a slip.
        assert!(
            e.ends_with("; did you mean all-cpu? (the graph's placements: all-cpu)"),
            "{e}"
        );
        let e = graph_in(Path::new("sonar"), &dirs).unwrap_err().to_string();
        assert!(
            e.ends_with(" (graphs by name: radar)") && !e.contains("did you mean"),
            "{e}"
        );
        let e = graph_in(Path::new("radr"), &dirs).unwrap_err().to_string();
        assert!(
            e.ends_with("; did you mean radar? (graphs by name: radar)"),
            "{e}"
        );
        let e = placement_in(Path::new("allcpu"), &graph, &dirs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("; did you mean all-cpu? "), "{e}");
        // A data directory without workloads/ is not one.
        let empty = tempfile::tempdir().unwrap();
        assert!(!dirs_for(Some(empty.path().into()), None).contains(&empty.path().to_path_buf()));
    }

    #[test]
    fn the_names_that_are_there_are_listed_and_the_closest_suggested() {
        let (prefix, exe) = installed();
        let dirs = dirs_for(None, Some(&exe));
        let workloads = prefix.path().join("share/kplace/workloads");
        for graph in ["beamformer", "beamformer/filtered", "spectrogram/blocks"] {
            std::fs::create_dir_all(workloads.join(graph)).unwrap();
            std::fs::write(workloads.join(graph).join("graph.yaml"), "").unwrap();
        }
        // A directory without a graph is no graph's name; one too deep is not looked at.
        std::fs::create_dir_all(workloads.join("radar/src")).unwrap();
        std::fs::create_dir_all(workloads.join("a/b/c/d")).unwrap();
        std::fs::write(workloads.join("a/b/c/d/graph.yaml"), "").unwrap();
        assert_eq!(
            graph_names_in(&dirs),
            [
                "beamformer",
                "beamformer/filtered",
                "radar",
                "spectrogram/blocks"
            ]
        );
        // Beside a graph: its placements/ and its own folder, not the graph itself.
        let filtered = workloads.join("beamformer/filtered");
        std::fs::write(filtered.join("cpu.yaml"), "").unwrap();
        std::fs::write(filtered.join("cpu-2.yaml"), "").unwrap();
        std::fs::write(filtered.join("notes.txt"), "").unwrap();
        assert_eq!(
            placement_names_in(&filtered.join("graph.yaml"), &dirs),
            ["cpu", "cpu-2"]
        );
        // Beside none: the workload placements one workload alone has.
        let spectrogram = workloads.join("spectrogram/placements");
        std::fs::create_dir_all(&spectrogram).unwrap();
        std::fs::write(spectrogram.join("all-cpu.yaml"), "").unwrap();
        std::fs::write(spectrogram.join("cpu.yaml"), "").unwrap();
        let own = tempfile::tempdir().unwrap();
        let graph = own.path().join("mine.yaml");
        std::fs::write(&graph, "").unwrap();
        assert_eq!(placement_names_in(&graph, &dirs), ["cpu"]);
        let known: Vec<String> = ["all-cpu", "all-gpu", "cpu", "cpu-2", "hybrid"]
            .map(String::from)
            .to_vec();
        assert_eq!(closest("all-cpus", &known), ["all-cpu"]);
        assert_eq!(closest("cpu_2", &known), ["cpu-2"]);
        assert_eq!(closest("cpu2", &known), ["cpu", "cpu-2"]);
        assert_eq!(closest("all-xpu", &known), ["all-cpu", "all-gpu"]);
        assert!(closest("sonar", &known).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
