//! The radar application's glue: it checks that a graph is a radar receiver for the scene,
//! prepares the scene's frames for the source, and verifies completed frames in the sink.

use std::io::Write;

use anyhow::{Context, bail};
use kplace::abi::{DetectionList, Dtype};
use kplace::executor::{CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::PlanError;
use kplace::plan::memory::{self, BufferSpace, Demand, MemoryAvailable};
use kplace_radar::{Cluster, Cpi, DetectionWriter, Scene, Verifier};

/// The kernel whose parameters define the false-alarm rate.
const CFAR_KERNEL: &str = "radar.cfar";
/// Pfa when the graph gives none.
pub use kplace_kernels::cfar::DEFAULT_PFA;

/// The false-alarm probability the graph's CFAR stage uses: its `pfa`, or the default when it
/// gives a raw `scale` or nothing.
pub fn graph_pfa(graph: &Graph) -> anyhow::Result<f64> {
    let Some(stage) = graph.stages.iter().find(|s| s.kernel == CFAR_KERNEL) else {
        return Ok(DEFAULT_PFA);
    };
    match stage.params.iter().find(|(n, _)| n == "pfa") {
        Some((_, v)) => v.trim().parse().with_context(|| {
            format!(
                "graph {}: stage {} has pfa {v:?}, not a number",
                graph.path.display(),
                stage.name
            )
        }),
        None => Ok(DEFAULT_PFA),
    }
}

/// Fails unless `pfa` is a probability in the open interval (0, 1); `option` (e.g. `--pfa`)
/// names it in the error.
pub(crate) fn check_pfa(pfa: f64, option: &str) -> anyhow::Result<()> {
    if !(pfa > 0.0 && pfa < 1.0) {
        bail!("{option} must be in (0, 1), got {pfa}");
    }
    Ok(())
}

/// The `--pfa` override as a parameter override on the CFAR stage of the graph file.
pub fn pfa_override(
    graph_path: &std::path::Path,
    pfa: Option<f64>,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let Some(pfa) = pfa else {
        return Ok(Vec::new());
    };
    check_pfa(pfa, "--pfa")?;
    // The stage is found by kernel, so the override works whatever the stage is called.
    let text = std::fs::read_to_string(graph_path)
        .with_context(|| format!("cannot read graph {}", graph_path.display()))?;
    let probe = Graph::parse(&text, graph_path, &Default::default())?;
    let stage = probe
        .stages
        .iter()
        .find(|s| s.kernel == CFAR_KERNEL)
        .with_context(|| {
            format!(
                "--pfa: graph {} has no {CFAR_KERNEL} stage",
                graph_path.display()
            )
        })?;
    Ok(vec![(stage.name.clone(), "pfa".into(), pfa.to_string())])
}

/// Overrides binding the graph's `N` and `M` to `cpi`, with `params` (stage, name, value).
pub fn cpi_overrides(cpi: Cpi, params: Vec<(String, String, String)>) -> Overrides {
    Overrides {
        dims: vec![
            ("N".into(), cpi.samples as u64),
            ("M".into(), cpi.chirps as u64),
        ],
        params,
    }
}

/// Fails unless the graph's source tensor is the scene's int16 I/Q frame, chirp-major, and
/// its first sink is a detection list.
pub fn check_graph_fits(graph: &Graph, cpi: Cpi) -> anyhow::Result<()> {
    let source = graph.tensor(graph.source.tensor);
    let want = [cpi.chirps as u64, cpi.samples as u64];
    if source.dtype != Dtype::CI16 || source.shape != want {
        bail!(
            "CPI {cpi} does not match graph {}: its source tensor {} is {}{:?}, the scene needs ci16{:?} \
             (write shapes with the symbols N and M so that --cpi sets them)",
            graph.path.display(),
            source.name,
            source.dtype.name().unwrap_or("?"),
            source.shape,
            want
        );
    }
    let sink = graph.tensor(graph.sinks[0]);
    if sink.dtype != Dtype::DETECTIONS {
        bail!(
            "graph {}: its first sink {} is {}, but the radar application reads a detections list",
            graph.path.display(),
            sink.name,
            sink.dtype.name().unwrap_or("?")
        );
    }
    Ok(())
}

/// Refuses a run whose memory would not fit this machine, before anything CPI-sized is
/// allocated: `copies` times the pools of `graph`'s tensors on `placement` (one set per
/// pipeline) and `prepared` scene frames of `cpi`, against the host's available memory (and a
/// GPU's, where known). The kernels' workspaces are checked when each pipeline is planned.
pub fn check_memory(
    graph: &Graph,
    placement: &Placement,
    cpi: Cpi,
    copies: u64,
    prepared: u64,
) -> anyhow::Result<()> {
    let pools = kplace::plan::tensor_pools_for(graph, placement)?;
    let mut demands: Vec<Demand> = pools
        .iter()
        .map(|p| {
            let mut d = Demand::of_pool(p);
            d.blocks = d.blocks.saturating_mul(copies);
            d
        })
        .collect();
    if prepared > 0 {
        demands.push(scene_frames_demand(cpi, prepared));
    }
    check_demands(&demands, cpi)
}

/// Refuses `count` prepared scene frames of `cpi` that would not fit in the host's available
/// memory: what `kplace send` holds.
pub fn check_prepared_frames(cpi: Cpi, count: u64) -> anyhow::Result<()> {
    check_demands(&[scene_frames_demand(cpi, count)], cpi)
}

/// What `count` prepared scene frames of `cpi` take.
fn scene_frames_demand(cpi: Cpi, count: u64) -> Demand {
    Demand {
        name: "the prepared scene frames".into(),
        space: BufferSpace::Host,
        block_bytes: (cpi.cells() as u64).saturating_mul(4),
        blocks: count,
    }
}

fn check_demands(demands: &[Demand], cpi: Cpi) -> anyhow::Result<()> {
    memory::check_fits(demands, &MemoryAvailable::probe())
        .with_context(|| format!("CPI {cpi} cannot run here"))?;
    Ok(())
}

/// Adds the CPI to a plan error about memory, which it decides; other plan errors pass as
/// they are.
pub fn plan_error(error: PlanError, cpi: Cpi) -> anyhow::Error {
    match error {
        PlanError::OutOfMemory { .. } | PlanError::MemoryOverflow { .. } => {
            anyhow::Error::new(error).context(format!("CPI {cpi} cannot run here"))
        }
        other => other.into(),
    }
}

/// Generates `count` scene frames as the source tensor's bytes (little-endian I, Q pairs).
/// Callers check first that they fit ([`check_memory`], [`check_prepared_frames`]).
pub fn prepare_frames(scene: &Scene, count: u64) -> anyhow::Result<Vec<Vec<u8>>> {
    (0..count)
        .map(|frame| {
            scene
                .frame_bytes(frame)
                .with_context(|| format!("scene frame {frame}"))
        })
        .collect()
}

/// Verifies each completed frame and optionally writes its clusters to a detections file.
pub struct RadarSink<W: Write> {
    verifier: Verifier,
    writer: Option<DetectionWriter<W>>,
    clusters: Vec<Cluster>,
    /// Clusters reported over the run.
    pub total_clusters: u64,
    /// Frames whose cluster list overflowed its capacity.
    pub overflowed_frames: u64,
    /// Frames that ended with packets missing: never processed, so never reported.
    pub partial_frames: u64,
    /// Where to write `frame_id,done_ns` (CLOCK_MONOTONIC) per frame, if anywhere.
    done_times: Option<Box<dyn Write + Send>>,
}

impl<W: Write> RadarSink<W> {
    /// A sink judging frames with `verifier`, writing to `writer` if given.
    pub fn new(verifier: Verifier, writer: Option<DetectionWriter<W>>) -> Self {
        Self {
            verifier,
            writer,
            clusters: Vec::new(),
            total_clusters: 0,
            overflowed_frames: 0,
            partial_frames: 0,
            done_times: None,
        }
    }

    /// Also writes each frame's completion time, `frame_id,done_ns` on CLOCK_MONOTONIC (the
    /// sender's clock in `kplace send --times`), to `file`: the protocol `bisect-rate
    /// --sut-cmd` uses to measure any receiver's post-CPI latency.
    pub fn with_done_times(mut self, out: Box<dyn Write + Send>) -> Self {
        self.done_times = Some(out);
        self
    }

    /// Flushes the detections and completion-times files.
    pub fn finish(self) -> anyhow::Result<Verifier> {
        if let Some(w) = self.writer {
            w.finish().context("cannot write the detections file")?;
        }
        if let Some(mut t) = self.done_times {
            t.flush().context("cannot write the completion times")?;
        }
        Ok(self.verifier)
    }
}

impl<W: Write> FrameSink for RadarSink<W> {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let list = DetectionList::parse(frame.sink(0))
            .map_err(|e| SinkError(format!("frame {}: {e}", frame.frame_id)))?;
        if list.header().overflow > 0 {
            self.overflowed_frames += 1;
        }
        self.clusters.clear();
        self.clusters.extend(list.records().map(|d| Cluster {
            range_bin: d.range_bin,
            doppler_bin: d.doppler_bin,
            power: d.power,
        }));
        self.total_clusters += self.clusters.len() as u64;
        self.verifier.check(frame.frame_id, &self.clusters);
        if let Some(w) = &mut self.writer {
            w.write_frame(frame.frame_id, &self.clusters)
                .map_err(|e| SinkError(format!("cannot write detections: {e}")))?;
        }
        if let Some(t) = &mut self.done_times {
            writeln!(
                t,
                "{},{}",
                frame.frame_id,
                kplace::net::sender::monotonic_ns()
            )
            .map_err(|e| SinkError(format!("cannot write completion times: {e}")))?;
        }
        Ok(())
    }

    fn partial(&mut self, _frame: &PartialFrame) -> Result<(), SinkError> {
        // Not reported: the verifier counts the frame as missing.
        self.partial_frames += 1;
        Ok(())
    }
}

/// Prints the verification verdict; true when it passed.
pub fn print_verdict(verifier: &Verifier, frames_expected: u64) -> bool {
    let (passed, text) = verdict_text(verifier, frames_expected);
    print!("{text}");
    passed
}

/// Whether the verifier passed, and the verdict as [`print_verdict`] prints it.
pub fn verdict_text(verifier: &Verifier, frames_expected: u64) -> (bool, String) {
    use std::fmt::Write as _;
    let summary = verifier.summary();
    let config = verifier.config();
    let reasons = summary.failure_reasons(config);
    let targets = verifier.scene().config().targets.len() as u64;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "verification {}: {}/{} frames reported, {} passed, false alarms {:.3}/frame (bound {:.3}), {} targets per frame",
        if reasons.is_empty() {
            "PASSED"
        } else {
            "FAILED"
        },
        summary.frames_reported,
        frames_expected,
        summary.frames_passed,
        summary.mean_false_alarms(),
        config.max_false_alarms_per_frame,
        targets
    );
    for r in &reasons {
        let _ = writeln!(text, "  {r}");
    }
    (reasons.is_empty(), text)
}
