//! The cost model: from what a machine was measured to cost ([`Calibration`]), the sustained
//! rate and the post-frame latency a placement would reach, and which resource limits it.
//!
//! Two halves. Each resource a frame passes through can serve at most so many frames per
//! second, in closed form:
//!
//! | resource | busy per frame |
//! |---|---|
//! | CPU workers (`workers` of them) | every CPU stage's kernel time, every GPU stage's host time (its launches enqueued) |
//! | the machine's cores | the workers' time, the source's, the collector's, the runtime's own, and a local sender's |
//! | the source thread | writing a frame (a replay), or receiving its packets (UDP) |
//! | the collector | judging a frame |
//! | the GPU | its stages' kernel time (kernels run one after another on a busy GPU) |
//! | a stateful stage | its kernel time: it runs one frame at a time, whatever the workers |
//! | each bus direction | the bytes crossing it over the measured copy rate |
//!
//! Those bounds ignore waiting: a frame that holds its slot while a worker is busy elsewhere,
//! a kernel queued behind another frame's. So the rate and latency themselves come from
//! replaying the executor's scheduling rules over the same costs (`simulate`): closed loop for
//! a replay, and for a UDP stream the highest paced rate that drops no frame. The prediction
//! is the lower of that and the cores' bound (the simulation gives every worker a core); its
//! bottleneck is the resource busiest in the simulation, or the slots when none is nearly
//! always busy (the pipeline then waits on its own latency).
//!
//! Assumptions (docs/tune.md says where they fail): stage times add up (no cache or memory
//! bandwidth contention between concurrent stages); a GPU runs one kernel at a time, in the
//! order asked; a GPU stage's kernel time does not depend on its tile; threads beyond the
//! cores share them evenly.
//!
//! Pure: no device is touched; the same inputs give the same prediction on every machine.

use kplace::model::graph::{Graph, StageId};
use kplace::plan::layout::Layout;
use kplace::plan::{Direction, Lifetime};

use super::costs::Calibration;
use super::simulate::{self, Arrivals, SimOutcome, SimPipeline, SimStage};
use super::space::{Candidate, Where};

/// Where a pipeline's frames come from, which decides the source thread's cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// Frames replayed from memory as fast as slots free up (closed loop).
    Replay,
    /// Packets received over UDP from a paced sender.
    Stream,
}

/// A resource that limits a placement's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// The CPU workers.
    Workers,
    /// The machine's cores, shared by every thread.
    Cores,
    /// The source thread (the replay, or the UDP receiver).
    Source,
    /// The collector, judging every frame.
    Collector,
    /// The GPU's kernels.
    Gpu,
    /// Host-to-device copies.
    Upload,
    /// Device-to-host copies.
    Download,
    /// The frame slots.
    Slots,
    /// A stateful stage, which runs one frame at a time whatever the workers.
    Stateful,
}

impl Resource {
    /// The resource as the tables name it.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Workers => "workers",
            Resource::Cores => "cores",
            Resource::Source => "source",
            Resource::Collector => "collector",
            Resource::Gpu => "GPU",
            Resource::Upload => "upload",
            Resource::Download => "download",
            Resource::Slots => "slots",
            Resource::Stateful => "stateful stage",
        }
    }
}

/// What the model predicts of one placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Sustained rate, frames (CPIs) per second.
    pub rate: f64,
    /// Post-frame latency of an unloaded frame, ms.
    pub latency_ms: f64,
    /// The resource that limits the rate.
    pub bottleneck: Resource,
    /// Every resource's own limit, frames per second.
    pub limits: Vec<(Resource, f64)>,
    /// Cores kept busy at `rate`.
    pub cores: f64,
    /// Host CPU time per frame, every thread's, ms.
    pub host_ms: f64,
    /// The share of the GPU's time its kernels take at `rate` (0 without a GPU stage).
    pub gpu_share: f64,
}

impl Prediction {
    /// Cores kept busy at `rate` frames per second (below the predicted rate).
    pub fn cores_at(&self, rate: f64) -> f64 {
        self.cores * rate / self.rate.max(f64::MIN_POSITIVE)
    }

    /// The GPU's share at `rate` frames per second.
    pub fn gpu_share_at(&self, rate: f64) -> f64 {
        self.gpu_share * rate / self.rate.max(f64::MIN_POSITIVE)
    }
}

/// Why a placement cannot be predicted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// The calibration has no cost for a stage on the device the placement puts it on.
    #[error(
        "stage {stage} on the {device}: the calibration did not measure it there (calibrate with a library that offers it, or --recalibrate)"
    )]
    NotCalibrated {
        /// The stage.
        stage: String,
        /// `CPU` or `GPU`.
        device: &'static str,
    },
    /// The placement does not lay out on this graph (enumerated on another).
    #[error("the placement does not lay out: {0}")]
    Layout(String),
    /// A copy crosses the bus, and the calibration measured no bus.
    #[error("tensor {tensor} crosses the bus, and the calibration measured no bus")]
    NoBus {
        /// The tensor.
        tensor: String,
    },
}

/// A stage's costs on the device a candidate gives it, ms per frame.
#[derive(Clone, Copy, Debug, Default)]
struct StageCost {
    /// CPU kernel time, or a GPU stage's kernel time.
    work_ms: f64,
    /// Host time of a GPU stage's launches (0 on the CPU: `work_ms` is host time).
    host_ms: f64,
    /// Upload and download time of the tensors the stage copies.
    upload_ms: f64,
    download_ms: f64,
    on_gpu: bool,
    launches: u64,
    /// Runs one frame at a time (a stateful CPU stage).
    serial: bool,
}

/// Predicts `candidate`, laid out as `layout`, from `calibration`, fed by `feed`, on a
/// machine with `cores` cores for the pipeline.
pub fn predict(
    layout: &Layout,
    candidate: &Candidate,
    calibration: &Calibration,
    feed: Feed,
    cores: f64,
) -> Result<Prediction, ModelError> {
    let graph = &layout.graph;
    let costs = stage_costs(layout, candidate, calibration)?;
    let any_gpu = costs.iter().any(|c| c.on_gpu);
    let overheads = if any_gpu {
        calibration
            .gpu_overheads
            .unwrap_or(calibration.cpu_overheads)
    } else {
        calibration.cpu_overheads
    };
    let source_ms = match feed {
        Feed::Replay => calibration.source_ms,
        Feed::Stream => calibration.receiver_ms.unwrap_or(calibration.source_ms),
    };
    let worker_ms: f64 = costs
        .iter()
        .map(|c| if c.on_gpu { c.host_ms } else { c.work_ms })
        .sum();
    let sender_ms = match feed {
        Feed::Replay => 0.0,
        Feed::Stream => calibration.sender_ms.unwrap_or(0.0),
    };
    let host_ms = worker_ms + source_ms + sender_ms + calibration.collector_ms + overheads.host_ms;
    let gpu_ms = costs
        .iter()
        .filter(|c| c.on_gpu)
        .fold(0.0, |sum, c| sum + c.work_ms);
    let upload_ms: f64 = costs.iter().map(|c| c.upload_ms).sum();
    let download_ms: f64 = costs.iter().map(|c| c.download_ms).sum();
    let per_s = |ms: f64| if ms > 0.0 { 1e3 / ms } else { f64::INFINITY };
    let mut limits = vec![
        (
            Resource::Workers,
            candidate.workers as f64 * per_s(worker_ms),
        ),
        (Resource::Cores, cores * per_s(host_ms)),
        (Resource::Source, per_s(source_ms)),
        (Resource::Collector, per_s(calibration.collector_ms)),
    ];
    if any_gpu {
        limits.push((Resource::Gpu, per_s(gpu_ms)));
    }
    // The slowest stateful stage, which no worker count speeds up.
    let serial_ms = costs
        .iter()
        .filter(|c| c.serial)
        .fold(0.0, |most: f64, c| most.max(c.work_ms));
    if serial_ms > 0.0 {
        limits.push((Resource::Stateful, per_s(serial_ms)));
    }
    if upload_ms > 0.0 {
        limits.push((Resource::Upload, per_s(upload_ms)));
    }
    if download_ms > 0.0 {
        limits.push((Resource::Download, per_s(download_ms)));
    }
    let pipeline = SimPipeline {
        stages: sim_stages(graph, &costs),
        workers: candidate.workers,
        slots: candidate.slots,
        source_ms: calibration.source_ms,
        collector_ms: calibration.collector_ms,
        latency_ms: overheads.latency_ms,
        slot_ms: overheads.slot_ms,
    };
    // The simulation gives every thread its own core; the cores are bounded apart.
    let closed_form = limits
        .iter()
        .filter(|&&(resource, _)| resource != Resource::Cores)
        .map(|&(_, r)| r)
        .fold(f64::INFINITY, f64::min);
    let simulated = match feed {
        Feed::Replay => simulate::run(&pipeline, Arrivals::Replay, SIM_FRAMES, SIM_WARMUP),
        Feed::Stream => highest_paced(&pipeline, closed_form),
    };
    limits.push((Resource::Slots, simulated.rate));
    let rate = simulated.rate.min(cores * per_s(host_ms));
    // A stateful stage nearly always running limits the rate when the workers are not
    // busier than it (with one worker, they are: then the workers are what limits).
    let serial_share = simulated.rate * serial_ms / 1e3;
    let bottleneck = if rate < simulated.rate {
        Resource::Cores
    } else if serial_share >= 0.9 && serial_share > simulated.busy.workers + 1e-9 {
        Resource::Stateful
    } else {
        busiest(&simulated)
    };
    let latency_ms = match feed {
        Feed::Replay => simulated.latency_p50_ms,
        Feed::Stream => {
            let period_ms = 1e3 / (0.9 * rate).max(f64::MIN_POSITIVE);
            simulate::run(
                &pipeline,
                Arrivals::Paced { period_ms },
                SIM_FRAMES,
                SIM_WARMUP,
            )
            .latency_p50_ms
        }
    };
    Ok(Prediction {
        rate,
        latency_ms,
        bottleneck,
        limits,
        cores: rate * host_ms / 1e3,
        host_ms,
        gpu_share: (rate * gpu_ms / 1e3).min(1.0),
    })
}

/// Frames each simulated run completes, and the first of them left out.
const SIM_FRAMES: usize = 240;
const SIM_WARMUP: usize = 40;

/// The busiest resource of a simulated run; the slots when none is nearly always busy (the
/// pipeline waits on its own latency).
fn busiest(outcome: &SimOutcome) -> Resource {
    let b = &outcome.busy;
    let (resource, share) = [
        (Resource::Workers, b.workers),
        (Resource::Gpu, b.gpu),
        (Resource::Upload, b.upload),
        (Resource::Download, b.download),
        (Resource::Source, b.source),
        (Resource::Collector, b.collector),
    ]
    .into_iter()
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .expect("six resources");
    if share >= 0.9 {
        resource
    } else {
        Resource::Slots
    }
}

/// The highest paced rate `pipeline` keeps up with (no frame dropped, latency not growing),
/// at most `ceiling`: a bisection over simulated streams.
fn highest_paced(pipeline: &SimPipeline, ceiling: f64) -> SimOutcome {
    let keeps_up = |rate: f64| {
        let period_ms = 1e3 / rate;
        let out = simulate::run(
            pipeline,
            Arrivals::Paced { period_ms },
            SIM_FRAMES,
            SIM_WARMUP,
        );
        let steady =
            out.dropped == 0 && out.latency_max_ms <= 2.0 * out.latency_p50_ms + 2.0 * period_ms;
        (steady, out)
    };
    let ceiling = if ceiling.is_finite() { ceiling } else { 1e6 };
    let (mut lo, mut hi) = (0.0f64, ceiling);
    let mut best = SimOutcome::default();
    if let (true, out) = keeps_up(ceiling) {
        return SimOutcome {
            rate: ceiling,
            ..out
        };
    }
    for _ in 0..16 {
        let mid = (lo + hi) / 2.0;
        match keeps_up(mid) {
            (true, out) => {
                lo = mid;
                best = SimOutcome { rate: mid, ..out };
            }
            (false, _) => hi = mid,
        }
    }
    best
}

/// The stages as the simulation runs them.
fn sim_stages(graph: &Graph, costs: &[StageCost]) -> Vec<SimStage> {
    let source = graph.source.tensor;
    costs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let id = StageId(i);
            let launches = c.launches.max(1) as f64;
            let streamed = graph.is_streamed(id);
            SimStage {
                on_gpu: c.on_gpu,
                streamed,
                after_frame: !streamed && graph.stage(id).inputs.contains(&source),
                preds: graph.predecessors(id).iter().map(|p| p.0).collect(),
                launches: c.launches.max(1) as u32,
                host_ms_per_launch: if c.on_gpu { c.host_ms } else { c.work_ms } / launches,
                kernel_ms_per_launch: if c.on_gpu { c.work_ms / launches } else { 0.0 },
                upload_ms: c.upload_ms,
                download_ms: c.download_ms,
                serial: c.serial,
            }
        })
        .collect()
}

/// Each stage's costs on its device in `candidate`.
fn stage_costs(
    layout: &Layout,
    candidate: &Candidate,
    calibration: &Calibration,
) -> Result<Vec<StageCost>, ModelError> {
    let graph = &layout.graph;
    let mut costs = Vec::with_capacity(graph.stages.len());
    for (i, (stage, place)) in graph.stages.iter().zip(&candidate.devices).enumerate() {
        let measured = calibration.stages.iter().find(|s| s.name == stage.name);
        let launches = graph.launches(StageId(i));
        let mut cost = StageCost {
            launches,
            ..StageCost::default()
        };
        match place {
            Where::Cpu => {
                cost.work_ms =
                    measured
                        .and_then(|m| m.cpu_ms)
                        .ok_or_else(|| ModelError::NotCalibrated {
                            stage: stage.name.clone(),
                            device: "CPU",
                        })?;
                cost.serial = measured.is_some_and(|m| m.serial);
            }
            Where::Gpu => {
                let gpu = measured.and_then(|m| m.gpu.as_ref()).ok_or_else(|| {
                    ModelError::NotCalibrated {
                        stage: stage.name.clone(),
                        device: "GPU",
                    }
                })?;
                cost.on_gpu = true;
                cost.work_ms = gpu.kernel_ms;
                cost.host_ms = gpu.host_ms_per_launch * launches as f64;
            }
        }
        costs.push(cost);
    }
    // A constant's upload is made once, before the run: it costs no frame anything.
    for edge in layout.edges.iter().filter(|e| e.lifetime != Lifetime::Run) {
        let Some(mirror) = edge.mirror else { continue };
        let transfer = mirror.transfer;
        let bus = calibration.bus.ok_or_else(|| ModelError::NoBus {
            tensor: graph.tensor(edge.tensor).name.clone(),
        })?;
        let cost = &mut costs[transfer.stage.0];
        let ms = bus.copy_ms(transfer.direction, transfer.bytes, transfer.pieces);
        match transfer.direction {
            Direction::HostToDevice => cost.upload_ms += ms,
            Direction::DeviceToHost => cost.download_ms += ms,
        }
    }
    Ok(costs)
}

/// The candidates no other beats on rate, latency, cores and GPU share all at once, by
/// index into `predictions`, fastest first.
pub fn pareto(predictions: &[Prediction]) -> Vec<usize> {
    let dominates = |a: &Prediction, b: &Prediction| {
        let no_worse = a.rate >= b.rate
            && a.latency_ms <= b.latency_ms
            && a.cores <= b.cores
            && a.gpu_share <= b.gpu_share;
        let better = a.rate > b.rate
            || a.latency_ms < b.latency_ms
            || a.cores < b.cores
            || a.gpu_share < b.gpu_share;
        no_worse && better
    };
    let mut front: Vec<usize> = (0..predictions.len())
        .filter(|&i| {
            !predictions
                .iter()
                .any(|other| dominates(other, &predictions[i]))
        })
        .collect();
    front.sort_by(|&a, &b| predictions[b].rate.total_cmp(&predictions[a].rate));
    front
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kplace::model::graph::Overrides;
    use kplace::model::placement::Placement;

    use super::*;
    use crate::tune::calibrate::{
        Bus, CalibrationKey, GpuStageCosts, Overheads, SCHEMA, StageCosts,
    };

    fn graph() -> Graph {
        let text = "name: two
dims: {M: 16, N: 256}
source: {tensor: x, packet_axis: 0}
tensors:
  - {name: x, dtype: f32, shape: [M, N]}
  - {name: a, dtype: f32, shape: [M, N]}
  - {name: y, dtype: f32, shape: [M, N]}
stages:
  - {name: first, kernel: k.first, inputs: [x], outputs: [a], split: {axis: 0, tile: 4}}
  - {name: second, kernel: k.second, inputs: [a], outputs: [y]}
sinks: [y]
";
        Graph::parse(text, Path::new("g.yaml"), &Overrides::default()).unwrap()
    }

    fn calibration(gpu: bool, bus: Option<Bus>) -> Calibration {
        let gpu_costs = |kernel_ms| {
            gpu.then_some(GpuStageCosts {
                kernel_ms,
                host_ms_per_launch: 0.01,
            })
        };
        Calibration {
            schema: SCHEMA.into(),
            key: CalibrationKey {
                machine: "m".into(),
                cores: 8,
                gpu: None,
                libraries: Vec::new(),
                graph: "two".into(),
                shape: "256x16".into(),
                workload: "w".into(),
                cotenant: None,
            },
            measured_at_unix_s: 0,
            stages: vec![
                StageCosts {
                    name: "first".into(),
                    cpu_ms: Some(2.0),
                    gpu: gpu_costs(0.2),
                    serial: false,
                },
                StageCosts {
                    name: "second".into(),
                    cpu_ms: Some(1.0),
                    gpu: gpu_costs(0.1),
                    serial: false,
                },
            ],
            source_ms: 0.0,
            collector_ms: 0.0,
            receiver_ms: None,
            sender_ms: None,
            cpu_overheads: Overheads::default(),
            gpu_overheads: None,
            bus,
            runs: Vec::new(),
        }
    }

    fn predict_on(
        devices: [Where; 2],
        workers: usize,
        c: &Calibration,
    ) -> Result<Prediction, ModelError> {
        let candidate = Candidate {
            devices: devices.to_vec(),
            workers,
            slots: 4,
            gpu_tile: None,
        };
        let g = graph();
        let text = candidate.placement_yaml(&g, "t", 0, "");
        let layout = Layout::new(g, Placement::parse(&text, Path::new("t.yaml")).unwrap()).unwrap();
        predict(&layout, &candidate, c, Feed::Replay, 8.0)
    }

    #[test]
    fn cpu_stages_share_the_workers_and_two_workers_double_the_rate() {
        let c = calibration(false, None);
        let one = predict_on([Where::Cpu; 2], 1, &c).unwrap();
        let two = predict_on([Where::Cpu; 2], 2, &c).unwrap();
        assert!((one.rate - 1000.0 / 3.0).abs() < 1.0, "{one:?}");
        assert_eq!(one.bottleneck, Resource::Workers);
        assert!((two.rate - 2000.0 / 3.0).abs() < 7.0, "{two:?}");
        assert!(
            (one.cores - 1.0).abs() < 0.01,
            "one worker always busy: {one:?}"
        );
    }

    #[test]
    fn a_stateful_stage_caps_the_rate_whatever_the_workers() {
        let mut c = calibration(false, None);
        // `second` (1 ms) carries state: it runs one frame at a time.
        c.stages[1].serial = true;
        let one = predict_on([Where::Cpu; 2], 1, &c).unwrap();
        let two = predict_on([Where::Cpu; 2], 2, &c).unwrap();
        let four = predict_on([Where::Cpu; 2], 4, &c).unwrap();
        assert!((one.rate - 1000.0 / 3.0).abs() < 1.0, "{one:?}");
        assert_eq!(one.bottleneck, Resource::Workers, "one worker is busier");
        assert!((two.rate - 2000.0 / 3.0).abs() < 7.0, "{two:?}");
        // Four workers could take 4000/3 frames/s of both stages, but the stateful stage, 1 ms
        // a frame one frame at a time, allows 1000.
        assert!(four.rate <= 1000.0 + 1.0 && four.rate > 950.0, "{four:?}");
        assert_eq!(four.bottleneck, Resource::Stateful);
        assert!(
            four.limits.contains(&(Resource::Stateful, 1000.0)),
            "{four:?}"
        );
        c.stages[1].serial = false;
        let free = predict_on([Where::Cpu; 2], 4, &c).unwrap();
        assert!(free.rate > 1300.0, "without state, four workers: {free:?}");
    }

    #[test]
    fn a_fast_gpu_wins_until_the_bus_is_slow() {
        let fast_bus = Bus {
            upload_bytes_per_s: 16e9,
            download_bytes_per_s: 16e9,
            upload_latency_ms: 0.01,
            download_latency_ms: 0.01,
        };
        let gpu = predict_on([Where::Gpu; 2], 1, &calibration(true, Some(fast_bus))).unwrap();
        assert_eq!(gpu.bottleneck, Resource::Gpu, "{gpu:?}");
        assert!(gpu.rate > 2500.0, "0.3 ms of kernels per frame: {gpu:?}");
        assert!(gpu.gpu_share > 0.9);
        // 16 KiB each way at 1 MB/s: 16 ms of copies per frame.
        let slow_bus = Bus {
            upload_bytes_per_s: 1e6,
            download_bytes_per_s: 1e6,
            upload_latency_ms: 0.01,
            download_latency_ms: 0.01,
        };
        let slow = predict_on([Where::Gpu; 2], 1, &calibration(true, Some(slow_bus))).unwrap();
        assert!(slow.rate < 70.0, "{slow:?}");
        assert!(matches!(
            slow.bottleneck,
            Resource::Upload | Resource::Download
        ));
    }

    #[test]
    fn a_placement_the_calibration_did_not_measure_is_refused_with_the_reason() {
        let e = predict_on([Where::Gpu, Where::Cpu], 1, &calibration(false, None)).unwrap_err();
        assert_eq!(
            e,
            ModelError::NotCalibrated {
                stage: "first".into(),
                device: "GPU"
            }
        );
        let e = predict_on([Where::Gpu, Where::Cpu], 1, &calibration(true, None)).unwrap_err();
        assert!(matches!(e, ModelError::NoBus { .. }), "{e:?}");
    }

    #[test]
    fn the_pareto_front_keeps_what_no_other_beats_on_every_count() {
        let p = |rate: f64, latency_ms: f64, cores: f64| Prediction {
            rate,
            latency_ms,
            bottleneck: Resource::Workers,
            limits: Vec::new(),
            cores,
            host_ms: 0.0,
            gpu_share: 0.0,
        };
        let set = [
            p(100.0, 1.0, 1.0),
            p(200.0, 1.0, 2.0),
            p(150.0, 2.0, 2.0), // beaten by the second on every count
            p(90.0, 0.5, 1.0),
        ];
        assert_eq!(pareto(&set), vec![1, 0, 3]);
    }
}
