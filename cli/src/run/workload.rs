//! Which workload `kplace run` runs: the one the graph names, found in the binary's registry
//! ([`crate::workloads`]), or the recording workload with `--recording`. Every workload runs
//! through the runtime's workload seam ([`kplace::workload::run::run_pipeline`]); this module
//! only turns options into a request.

use std::path::Path;

use anyhow::{Context, bail};
use kplace::model::graph::{Graph, Overrides};
use kplace::net::udp::UdpSource;
use kplace::net::wire::WireShape;
use kplace::plan::Plan;
use kplace::workload::kind::{self, RecordingRequest, Request};
use kplace::workload::run::{Outputs, PipelineOutcome, PipelineRun, run_pipeline};
use kplace::workload::sinks::SinkFiles;

use super::{RunArgs, SourceArg, check_mps};

/// A run's workload, prepared once for all its pipelines.
pub(crate) struct Prepared {
    /// What every pipeline shares: frames, judge, graph and placement.
    prepared: Box<dyn kind::Prepared>,
    /// How each pipeline runs.
    run: PipelineRun,
}

/// The wire of the stream these options receive: the graph's source as the run binds it, one
/// packet per index of its packet axis.
pub(crate) fn wire(args: &RunArgs) -> anyhow::Result<WireShape> {
    let files = args.graph.files()?;
    let mut dims = files.dims;
    if let Some(recording) = &args.recording {
        // The recording's metadata binds what the command line leaves to the graph file.
        dims = recording_dims(&args.graph.graph, dims, recording)?;
    }
    let graph = Graph::load(
        &files.graph,
        &Overrides {
            dims,
            params: Vec::new(),
        },
    )?;
    WireShape::for_source(&graph).map_err(anyhow::Error::msg)
}

/// `dims`, then what the recording's frame shape binds of the rest.
fn recording_dims(
    graph: &Path,
    mut dims: Vec<(String, u64)>,
    recording: &Path,
) -> anyhow::Result<Vec<(String, u64)>> {
    let Some(mut extents) = kplace::workload::recording::Recording::described_shape(recording)?
    else {
        return Ok(dims);
    };
    extents.reverse();
    let probe = Graph::load(
        graph,
        &Overrides {
            dims: dims.clone(),
            params: Vec::new(),
        },
    )?;
    if let Ok(bound) = probe.bind_source_shape(&extents) {
        for (name, value) in bound {
            if !dims.iter().any(|(n, _)| *n == name) {
                dims.push((name, value));
            }
        }
    }
    Ok(dims)
}

impl Prepared {
    /// Checks and prepares the workload these options name.
    pub(crate) fn new(args: &RunArgs) -> anyhow::Result<Prepared> {
        let files = args.graph.files()?;
        let options = args.workload.options();
        let recording = args.recording.as_ref().map(|path| RecordingRequest {
            path: path.clone(),
            check: args.check.clone(),
        });
        let request = Request {
            files: &files,
            options: &options,
            recording: recording.as_ref(),
            seed: args.workload.seed,
            frames: args.frames,
            pipelines: args.pipelines,
            replay: args.source == SourceArg::Replay,
        };
        let registry = crate::workloads::registry();
        let kind = registry.kind_for(&request)?;
        if args.detections.is_some() && kind.results().is_none() {
            bail!(
                "--detections: workload {} writes no results of its own; write every sink tensor with --write-sinks DIR",
                kind.name()
            );
        }
        let prepared = kind.prepare(&request)?;
        Ok(Prepared {
            prepared,
            run: PipelineRun {
                frames: args.frames,
                warmup_frames: args.warmup_frames,
                profile_gpu: args.profile_gpu,
                progress_every: args.report_every,
                trace: args.trace.is_some(),
            },
        })
    }

    /// The sink files of pipeline `index` in `dir` (`dir/p<i>` with several pipelines).
    pub(crate) fn sink_files(
        &self,
        dir: &Path,
        index: Option<usize>,
        format: kplace::workload::sinks::SinkFormat,
    ) -> anyhow::Result<SinkFiles> {
        let (graph, _) = self.prepared.load()?;
        let dir = match index {
            Some(i) => dir.join(format!("p{i}")),
            None => dir.to_path_buf(),
        };
        SinkFiles::create(&dir, &graph, format)
            .with_context(|| format!("--write-sinks {}", dir.display()))
    }

    /// Plans and runs pipeline `index` (or the only one) on `udp`, or on a replay.
    pub(crate) fn run(
        &self,
        udp: Option<UdpSource>,
        index: Option<usize>,
        outputs: Outputs,
    ) -> anyhow::Result<PipelineOutcome> {
        let (graph, placement) = self.prepared.load()?;
        let plan = Plan::new(graph, placement)?;
        Ok(run_pipeline(
            &plan,
            self.prepared.workload(),
            &self.run,
            udp,
            index,
            outputs,
            &check_mps,
        )?)
    }
}
