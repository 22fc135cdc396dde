//! The systems a sweep searches, set up before its first trial: kplace placements (the files
//! its placement paths name) or another receiver's command, each with its name in the table.
//!
//! With `--adapt`, one system more switches between the placements given, or between the one
//! given and the `alternatives:` its file lists.
//!
//! Guarantees: a placement path that names nothing, or paths that name no placement file, are
//! refused before anything runs; a placement is planned ([`plan_for`]) before its searches, so
//! that one that cannot run here is skipped with the planner's reason, never failing trials.

use std::fs;
use std::path::{Path, PathBuf};

use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::Plan;

use super::failure::TrialFault;
use super::{BisectConfig, BisectError, SearchShape, Systems};

/// One system searched: a kplace placement, kplace switching between placements while the
/// stream runs (the first preferred), or another receiver's command and its name.
pub(super) enum System {
    Placement(PathBuf),
    Adaptive(Vec<PathBuf>),
    Command { command: String, name: String },
}

impl System {
    /// Every system `config` searches: its receiver command, or each placement file its
    /// placement paths name (a directory's `.yaml` files, sorted).
    pub(super) fn all(config: &BisectConfig) -> Result<Vec<System>, BisectError> {
        Ok(match &config.systems {
            Systems::Command { command, name } => vec![System::Command {
                command: command.clone(),
                name: name.clone(),
            }],
            Systems::Placements(paths) => {
                let files = placement_files(paths)?;
                let adaptive = match config.adapt {
                    true => adaptive_order(&files, &config.graph)?.map(System::Adaptive),
                    false => None,
                };
                files
                    .into_iter()
                    .map(System::Placement)
                    .chain(adaptive)
                    .collect()
            }
        })
    }

    /// The placement file, for kplace (the preferred one, for a system that adapts).
    pub(super) fn placement(&self) -> Option<&PathBuf> {
        match self {
            Self::Placement(path) => Some(path),
            Self::Adaptive(paths) => paths.first(),
            Self::Command { .. } => None,
        }
    }

    /// Every placement file the system runs.
    pub(super) fn placements(&self) -> &[PathBuf] {
        match self {
            Self::Placement(path) => std::slice::from_ref(path),
            Self::Adaptive(paths) => paths,
            Self::Command { .. } => &[],
        }
    }
}

/// The name of `system` in the table: the placement's file stem or the command's name, with
/// the pipelines, co-tenant and MPS the sweep adds.
pub(super) fn system_name(config: &BisectConfig, system: &System) -> String {
    let mut name = match system {
        System::Placement(path) => placement_name(path),
        System::Adaptive(paths) => {
            let names: Vec<String> = paths.iter().map(|p| placement_name(p)).collect();
            format!("adapt {}", names.join(" then "))
        }
        System::Command { name, .. } => name.clone(),
    };
    if config.pipelines > 1 {
        name = format!("{name} x{} {}", config.pipelines, config.pipeline_mode);
    }
    if let Some(spec) = &config.cotenant {
        name += &format!(" +{}", spec.kind());
    }
    if config.mps.is_some() {
        name += " mps";
    }
    name
}

/// The placement files `paths` name: each file, and each directory's `.yaml` files, sorted.
fn placement_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, BisectError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = fs::read_dir(path)
                .map_err(|source| BisectError::Io {
                    action: "read",
                    path: path.clone(),
                    error: source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.exists() {
            files.push(path.clone());
        } else {
            return Err(BisectError::MissingPlacement(path.clone()));
        }
    }
    if files.is_empty() {
        return Err(BisectError::NoPlacements(
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    Ok(files)
}

/// The placements a system that adapts switches between, the first preferred: `files`, when
/// there are several, else the one file and the `alternatives:` it lists (found as
/// `--placement` finds a name, beside `graph`); `None` when that makes one placement.
fn adaptive_order(files: &[PathBuf], graph: &Path) -> Result<Option<Vec<PathBuf>>, BisectError> {
    let [only] = files else {
        return Ok((files.len() > 1).then(|| files.to_vec()));
    };
    let listed = Placement::load(only)
        .map_err(|e| BisectError::Placement(e.to_string()))?
        .alternative_files(graph)
        .map_err(|e| BisectError::Placement(format!("{}: alternatives: {e}", only.display())))?;
    let order: Vec<PathBuf> = std::iter::once(only.clone()).chain(listed).collect();
    Ok((order.len() > 1).then_some(order))
}

/// A placement's name in the table: its file stem.
fn placement_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The plan of `placement` at `shape`, or why there is none (the error with its causes).
/// Planned once before a system's searches, so that a placement that cannot run (a GPU
/// placement without a GPU) is reported as skipped with the planner's reason instead of
/// failing every trial.
pub(super) fn plan_for(
    config: &BisectConfig,
    placement: &Path,
    shape: &SearchShape,
) -> Result<Plan, TrialFault> {
    let overrides = Overrides {
        dims: config.dims(shape)?,
        params: Vec::new(),
    };
    let graph =
        Graph::load(&config.graph, &overrides).map_err(|e| TrialFault::Graph(Box::new(e)))?;
    let placement = Placement::load(placement).map_err(|e| TrialFault::Placement(Box::new(e)))?;
    Plan::new(graph, placement).map_err(|e| TrialFault::Plan(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Several placements adapt between themselves; one adapts between itself and the
    /// alternatives its file lists, found by name beside the graph or by path beside the file.
    #[test]
    fn a_system_that_adapts_takes_the_placements_given_or_the_ones_listed() {
        let dir = tempfile::tempdir().unwrap();
        let graph = dir.path().join("graph.yaml");
        std::fs::write(&graph, "").unwrap();
        let placements = dir.path().join("placements");
        std::fs::create_dir(&placements).unwrap();
        let write = |name: &str, text: &str| {
            let path = placements.join(name);
            std::fs::write(&path, format!("name: {name}\nstages: {{a: cpu}}\n{text}")).unwrap();
            path
        };
        let (one, two) = (write("one.yaml", ""), write("two.yaml", ""));
        let listing = write("listing.yaml", "alternatives: [two, one.yaml]\n");
        assert_eq!(
            adaptive_order(&[one.clone(), two.clone()], &graph).unwrap(),
            Some(vec![one.clone(), two.clone()])
        );
        assert_eq!(
            adaptive_order(std::slice::from_ref(&one), &graph).unwrap(),
            None
        );
        assert_eq!(
            adaptive_order(std::slice::from_ref(&listing), &graph).unwrap(),
            Some(vec![listing.clone(), two, one])
        );
        let missing = write("missing.yaml", "alternatives: [nowhere]\n");
        let e = adaptive_order(&[missing], &graph).unwrap_err().to_string();
        assert!(
            e.contains("missing.yaml: alternatives:") && e.contains("nowhere"),
            "{e}"
        );
    }
}
