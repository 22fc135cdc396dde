//! The placements `kplace tune` weighs: every assignment of a graph's stages to the CPU or a
//! GPU whose library offers the stage's kernel, crossed with the executor's knobs (CPU
//! workers, frame slots, a split GPU stage's tile), each checked by the planner's pure
//! layout ([`Layout::new`]) so that no unsupported crossing is ever proposed.
//!
//! Pure: no device is opened and no kernel created; what the libraries offer is given as
//! [`Offers`] (read from their tables by [`Offers::of_libraries`]).
//!
//! Guarantees: every [`Candidate`] places each stage on a device whose library offers its
//! kernel, and its placement text ([`Candidate::placement_yaml`]) parses and lays out;
//! every assignment left out is in [`Enumeration::rejected`] with the planner's reason, or
//! the stage whose kernel no library offers; a knob that changes nothing (workers without a
//! CPU stage, a GPU tile without a split GPU stage) is not crossed in.

use std::collections::BTreeSet;
use std::path::Path;

use kplace::abi::DeviceKind;
use kplace::model::graph::Graph;
use kplace::model::placement::Placement;
use kplace::plan::layout::Layout;
use kplace::plugin::{KernelLibrary, PluginError};

/// The kernels each device kind's library offers, by logical name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Offers {
    /// CPU kernels.
    pub cpu: BTreeSet<String>,
    /// CUDA kernels (every GPU runs the same library).
    pub gpu: BTreeSet<String>,
}

impl Offers {
    /// What the libraries at `cpu` and `gpu` offer (either may be absent), read from their
    /// tables.
    pub fn of_libraries(cpu: Option<&Path>, gpu: Option<&Path>) -> Result<Offers, PluginError> {
        let mut offers = Offers::default();
        for path in [cpu, gpu].into_iter().flatten() {
            let library = KernelLibrary::load(path)?;
            for kernel in library.kernels() {
                let set = match kernel.device {
                    DeviceKind::CPU => &mut offers.cpu,
                    DeviceKind::CUDA => &mut offers.gpu,
                    _ => continue,
                };
                set.insert(kernel.name.clone());
            }
        }
        Ok(offers)
    }
}

/// The executor's knobs a candidate is crossed with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// CPU worker counts to weigh.
    pub workers: Vec<usize>,
    /// Frame slot counts to weigh.
    pub slots: Vec<usize>,
    /// Tiles (indices per launch) for split stages on a GPU; empty: the runtime's default.
    pub gpu_tiles: Vec<u64>,
    /// The GPU every GPU stage goes on.
    pub gpu: u32,
}

/// Where a stage runs in a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Where {
    /// The CPU.
    Cpu,
    /// The tuned GPU.
    Gpu,
}

/// One placement to predict: a device per stage (graph order) and the executor's knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Each stage's device, in graph order.
    pub devices: Vec<Where>,
    /// CPU workers.
    pub workers: usize,
    /// Frame slots.
    pub slots: usize,
    /// The tile of the split stages on the GPU; `None`: the runtime's default.
    pub gpu_tile: Option<u64>,
}

/// An assignment of devices the space leaves out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// Each stage's device, in graph order; empty when no assignment exists at all.
    pub devices: Vec<Where>,
    /// The planner's reason, or the stage whose kernel no library offers.
    pub why: String,
}

/// The search space of a graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Enumeration {
    /// Every placement the planner accepts, crossed with the knobs that matter to it.
    pub candidates: Vec<Candidate>,
    /// Every device assignment left out, with its reason.
    pub rejected: Vec<Rejected>,
}

impl Candidate {
    /// The candidate as a placement file for `graph` named `name`, its GPU stages on GPU
    /// `gpu`; `libraries` is the file's `libraries:` line (with its newline), or empty for the
    /// default libraries.
    pub fn placement_yaml(&self, graph: &Graph, name: &str, gpu: u32, libraries: &str) -> String {
        let mut text = format!("name: {name}\n{libraries}stages:\n");
        for (stage, device) in graph.stages.iter().zip(&self.devices) {
            let device = match device {
                Where::Cpu => "cpu".to_string(),
                Where::Gpu => format!("gpu:{gpu}"),
            };
            let tile = self
                .gpu_tile
                .filter(|_| stage.split.is_some() && device != "cpu");
            text.push_str(&match tile {
                Some(tile) => format!("  {}: {{device: {device}, tile: {tile}}}\n", stage.name),
                None => format!("  {}: {device}\n", stage.name),
            });
        }
        text.push_str(&format!(
            "runtime: {{slots: {}, workers: {}}}\n",
            self.slots, self.workers
        ));
        text
    }
}

/// Why a candidate placement does not lay a graph out.
#[derive(Debug, thiserror::Error)]
enum NoLayout {
    /// The placement written is not one.
    #[error("{0}")]
    Placement(Box<kplace::model::placement::PlacementError>),
    /// The planner refuses it.
    #[error("{0}")]
    Plan(Box<kplace::plan::PlanError>),
}

/// Whether `placement_text` lays `graph` out, or the planner's reason.
fn lays_out(graph: &Graph, text: &str) -> Result<(), NoLayout> {
    let placement = Placement::parse(text, Path::new("tune.yaml"))
        .map_err(|e| NoLayout::Placement(Box::new(e)))?;
    Layout::new(graph.clone(), placement)
        .map(drop)
        .map_err(|e| NoLayout::Plan(Box::new(e)))
}

/// Every placement of `graph` on the devices `offers` allows, crossed with `knobs`.
pub fn enumerate(graph: &Graph, offers: &Offers, knobs: &Knobs) -> Enumeration {
    let mut out = Enumeration::default();
    let mut choices: Vec<Vec<Where>> = Vec::with_capacity(graph.stages.len());
    for stage in &graph.stages {
        let mut here = Vec::new();
        if offers.cpu.contains(&stage.kernel) {
            here.push(Where::Cpu);
        }
        if offers.gpu.contains(&stage.kernel) {
            here.push(Where::Gpu);
        }
        if here.is_empty() {
            out.rejected.push(Rejected {
                devices: Vec::new(),
                why: format!(
                    "stage {}: no library offers kernel {} on the CPU or a GPU",
                    stage.name, stage.kernel
                ),
            });
            return out;
        }
        choices.push(here);
    }
    let workers = knobs.workers.first().copied().unwrap_or(1);
    let slots = knobs.slots.first().copied().unwrap_or(4);
    for devices in product(&choices) {
        let base = Candidate {
            devices: devices.clone(),
            workers,
            slots,
            gpu_tile: None,
        };
        if let Err(why) = lays_out(graph, &base.placement_yaml(graph, "check", knobs.gpu, "")) {
            out.rejected.push(Rejected {
                devices,
                why: why.to_string(),
            });
            continue;
        }
        let any_cpu = devices.contains(&Where::Cpu);
        let split_gpu = graph
            .stages
            .iter()
            .zip(&devices)
            .any(|(s, d)| s.split.is_some() && *d == Where::Gpu);
        let worker_counts: Vec<usize> = if any_cpu {
            knobs.workers.clone()
        } else {
            vec![workers]
        };
        let tiles: Vec<Option<u64>> = if split_gpu && !knobs.gpu_tiles.is_empty() {
            knobs.gpu_tiles.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
        for &w in &worker_counts {
            for &s in &knobs.slots {
                for &tile in &tiles {
                    let candidate = Candidate {
                        devices: devices.clone(),
                        workers: w,
                        slots: s,
                        gpu_tile: tile,
                    };
                    let text = candidate.placement_yaml(graph, "check", knobs.gpu, "");
                    match lays_out(graph, &text) {
                        Ok(()) => out.candidates.push(candidate),
                        Err(why) => out.rejected.push(Rejected {
                            devices: devices.clone(),
                            why: why.to_string(),
                        }),
                    }
                }
            }
        }
    }
    out
}

/// Every combination of one choice per position, the first position slowest.
fn product(choices: &[Vec<Where>]) -> Vec<Vec<Where>> {
    choices.iter().fold(vec![Vec::new()], |acc, here| {
        acc.into_iter()
            .flat_map(|prefix| {
                here.iter().map(move |&c| {
                    let mut next = prefix.clone();
                    next.push(c);
                    next
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplace::model::graph::Overrides;

    fn radar() -> Graph {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/radar/graph.yaml");
        Graph::load(&path, &Overrides::default()).unwrap()
    }

    fn offers(cpu: &[&str], gpu: &[&str]) -> Offers {
        Offers {
            cpu: cpu.iter().map(|s| s.to_string()).collect(),
            gpu: gpu.iter().map(|s| s.to_string()).collect(),
        }
    }

    const RADAR: [&str; 4] = [
        "radar.range_fft",
        "radar.doppler_fft",
        "radar.cfar",
        "radar.cluster",
    ];

    fn knobs() -> Knobs {
        Knobs {
            workers: vec![1, 2],
            slots: vec![4, 8],
            gpu_tiles: vec![32, 64],
            gpu: 0,
        }
    }

    #[test]
    fn every_assignment_the_libraries_allow_is_a_candidate_and_no_other() {
        let graph = radar();
        let space = enumerate(&graph, &offers(&RADAR, &RADAR[..3]), &knobs());
        assert!(space.rejected.is_empty(), "{:?}", space.rejected);
        let mut assignments: Vec<Vec<Where>> =
            space.candidates.iter().map(|c| c.devices.clone()).collect();
        assignments.dedup();
        // Three stages either way, clustering on the CPU only: 2^3 assignments.
        assert_eq!(assignments.len(), 8);
        for c in &space.candidates {
            assert_eq!(c.devices[3], Where::Cpu, "no GPU clustering is offered");
            // Every candidate's file lays out, and the knobs that matter are crossed in.
            let text = c.placement_yaml(&graph, "c", 0, "");
            assert!(lays_out(&graph, &text).is_ok(), "{text}");
            assert_eq!(c.gpu_tile.is_some(), c.devices[0] == Where::Gpu, "{c:?}");
        }
        // Range FFT on the GPU: 2 workers x 2 slots x 2 tiles; on the CPU: 2 x 2.
        let count = |range: Where| {
            space
                .candidates
                .iter()
                .filter(|c| c.devices[0] == range)
                .count()
        };
        assert_eq!(count(Where::Gpu), 4 * 8);
        assert_eq!(count(Where::Cpu), 4 * 4);
    }

    #[test]
    fn a_kernel_no_library_offers_leaves_no_candidate_and_says_which() {
        let space = enumerate(&radar(), &offers(&RADAR[..3], &RADAR[..3]), &knobs());
        assert!(space.candidates.is_empty());
        assert_eq!(space.rejected.len(), 1);
        assert!(
            space.rejected[0]
                .why
                .contains("stage cluster: no library offers kernel radar.cluster"),
            "{:?}",
            space.rejected
        );
    }

    #[test]
    fn an_unsupported_crossing_is_rejected_with_the_planners_reason() {
        let graph = Graph::parse(
            "name: fanout\ndims: {R: 64, C: 24}\nsource: {tensor: iq, packet_axis: 0}\n\
             tensors:\n  - {name: iq, dtype: ci16, shape: [R, C]}\n  - {name: mag, dtype: f32, shape: [R, C]}\n  - {name: a, dtype: f32, shape: [C]}\n  - {name: b, dtype: f32, shape: [C]}\n\
             stages:\n  - {name: magnitude, kernel: k.mag, inputs: [iq], outputs: [mag]}\n  - {name: sum_a, kernel: k.sum, inputs: [mag], outputs: [a]}\n  - {name: sum_b, kernel: k.sum, inputs: [mag], outputs: [b]}\nsinks: [a, b]\n",
            Path::new("fanout.yaml"),
            &Overrides::default(),
        )
        .unwrap();
        let all = ["k.mag", "k.sum"];
        let space = enumerate(&graph, &offers(&all, &all), &knobs());
        // A host tensor read by two GPU stages is refused: magnitude on the CPU with both sums
        // on the GPU.
        let rejected: Vec<&Vec<Where>> = space.rejected.iter().map(|r| &r.devices).collect();
        assert_eq!(
            rejected,
            [&vec![Where::Cpu, Where::Gpu, Where::Gpu]],
            "{:?}",
            space.rejected
        );
        assert!(
            space.rejected[0].why.contains("read by 2 GPU stages"),
            "{:?}",
            space.rejected
        );
        let mut assignments: Vec<Vec<Where>> =
            space.candidates.iter().map(|c| c.devices.clone()).collect();
        assignments.dedup();
        assert_eq!(assignments.len(), 7);
        // All on the GPU: no CPU stage, so one worker count; no split stage, so no tile.
        let all_gpu: Vec<&Candidate> = space
            .candidates
            .iter()
            .filter(|c| c.devices.iter().all(|d| *d == Where::Gpu))
            .collect();
        assert_eq!(all_gpu.len(), 2, "{all_gpu:?}");
        assert!(
            all_gpu
                .iter()
                .all(|c| c.workers == 1 && c.gpu_tile.is_none())
        );
    }

    #[test]
    fn the_offers_are_read_from_a_librarys_table() {
        let exe = std::env::current_exe().unwrap();
        let lib = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("libkplace_cpu.so");
        assert!(
            lib.is_file(),
            "{} is missing: build the workspace first (cargo build --workspace)",
            lib.display()
        );
        let offers = Offers::of_libraries(Some(&lib), None).unwrap();
        assert_eq!(offers.cpu, RADAR.iter().map(|s| s.to_string()).collect());
        assert!(offers.gpu.is_empty());
        let e = Offers::of_libraries(None, Some(Path::new("/nonexistent/lib.so")));
        assert!(e.is_err());
    }

    #[test]
    fn a_tile_that_does_not_divide_its_axis_is_rejected() {
        let knobs = Knobs {
            gpu_tiles: vec![32, 48],
            ..knobs()
        };
        let space = enumerate(&radar(), &offers(&RADAR, &RADAR[..3]), &knobs);
        assert!(space.candidates.iter().all(|c| c.gpu_tile != Some(48)));
        assert!(
            space.rejected.iter().any(|r| r.why.contains("48")),
            "{:?}",
            space.rejected
        );
    }
}
