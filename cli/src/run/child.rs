//! `kplace run`'s options from a library's typed child spec ([`kplace::session::child`]): a pipeline
//! of a process-mode run ([`PipelineChild`]), or a sweep's receiver ([`RunChild`]).

use kplace::net::source::FrameSource;
use kplace::session::child::{ChildFrames, RunChild};
use kplace::session::children::PipelineChild;
use kplace::session::several::PipelineMode;

use super::{ModeArg, RunArgs};

impl RunArgs {
    /// These options (a process-mode parent's, as it parsed them) as its child `spec` runs
    /// them: one pipeline, with the spec's source, report, ready file and outputs in place of
    /// the parent's.
    pub(crate) fn for_pipeline(&mut self, spec: PipelineChild) {
        self.pipelines = 1;
        self.pipeline_mode = ModeArg::Thread;
        self.source = spec.udp.map_or(FrameSource::Replay, FrameSource::Udp);
        self.report = Some(spec.report);
        self.ready_file = spec.ready_file;
        self.detections = spec.detections;
        self.done_times = spec.done_times;
        self.trace = spec.trace;
        self.progress_out = spec.progress_out;
        self.write_sinks = spec.write_sinks;
    }

    /// The options `spec` stands for, every other one at its default.
    pub(crate) fn from_child(spec: RunChild) -> anyhow::Result<RunArgs> {
        let mut args: RunArgs = crate::args::with_defaults(std::iter::empty())?;
        args.graph.graph = spec.graph;
        if let Some(placement) = spec.placement {
            args.graph.placement = placement;
        }
        args.adapt = spec.adapt;
        args.budget = spec.budget;
        args.force = spec.force;
        args.graph.shape.shape = spec.shape;
        match spec.frames_of {
            None => {}
            Some(ChildFrames::Workload { seed, options }) => {
                args.workload.seed = seed;
                args.workload.given = crate::workloads::OptionPairs(options);
            }
            Some(ChildFrames::Recording { path, check }) => {
                args.recording = Some(path);
                if let Some(check) = check {
                    args.check = check.parse().map_err(anyhow::Error::msg)?;
                }
            }
        }
        if let Some(frames) = spec.frames {
            args.frames = frames;
        }
        args.warmup_frames = spec.warmup_frames;
        args.report = spec.report;
        args.ready_file = spec.ready_file;
        args.pipelines = spec.pipelines;
        args.pipeline_mode = match spec.pipeline_mode {
            PipelineMode::Thread => ModeArg::Thread,
            PipelineMode::Process => ModeArg::Process,
        };
        args.graph.stream_rate = spec.stream_rate;
        args.source = FrameSource::Udp(spec.udp);
        if let Some(timeout) = spec.frame_timeout {
            args.frame_timeout = timeout;
        }
        if let Some(timeout) = spec.idle_timeout {
            args.idle_timeout = timeout;
        }
        args.start_timeout = spec.start_timeout;
        args.ingest_only = spec.ingest_only;
        Ok(args)
    }
}
