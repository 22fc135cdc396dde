//! `kplace send`: a workload's frames (or a recording's) as UDP packets, one per row, open loop, paced or in a burst,
//! optionally with faults (see `kplace::net::sender`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kplace::net::sender::{self, Faults, FrameCount, MalformedAt, PacketAt, SenderConfig};
use kplace::report::output::{self, OutputError, OutputFile};
use kplace::report::send::SendFile;
use kplace::session::child::{ChildFrames, Pace, SendChild};
use kplace::workload::send::SendFrames;

use super::args::ShapeArgs;
use super::workloads::WorkloadArgs;

/// The graph sent from when none is named.
const DEFAULT_GRAPH: &str = "radar";

/// Frames sent when neither `--frames` nor `--duration` is given.
const DEFAULT_FRAMES: u64 = 100;

/// Options of `kplace send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where to send: HOST:PORT (e.g. 127.0.0.1:9000).
    #[arg(long, value_name = "HOST:PORT")]
    dest: String,
    /// The graph whose workload generates the frames sent (its source tensor's frames): a
    /// file or a name.
    #[arg(long, default_value = DEFAULT_GRAPH, value_name = "FILE|NAME")]
    graph: PathBuf,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    pub(crate) workload: WorkloadArgs,
    /// Send this recording's frames (`kplace record` makes one; its SigMF metadata must give
    /// the frame's type and shape) instead of the workload's, cycling through them: one packet
    /// per index of the frame's first axis. Without --rate, paced at the recording's sample
    /// rate.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["options", "shape", "sets"])]
    recording: Option<PathBuf>,
    /// Frames per second, each frame's packets spread evenly over its period: from 1/86400
    /// (a frame a day) to 1e9 (a frame a nanosecond).
    #[arg(long, value_name = "FRAMES_PER_S", conflicts_with_all = ["packet_interval", "burst"])]
    rate: Option<f64>,
    /// Time between packets, e.g. `50us` [default: the workload's real-time frame period over its
    /// packets (the radar's chirp interval N / fs, 50 us for N = 1024), or one packet's
    /// elements at a recording's sample rate].
    #[arg(
        long,
        value_name = "DURATION",
        conflicts_with = "burst",
        value_parser = crate::duration::or_us,
        aliases = ["packet-interval-us", "chirp-interval-us"]
    )]
    packet_interval: Option<Duration>,
    /// Send as fast as the socket takes packets.
    #[arg(long)]
    burst: bool,
    /// Wake at most this often and send what is due: packets leave up to about this late
    /// (never early) and the sender sleeps instead of taking a core; `0s` spins to each
    /// packet's deadline (exact, but takes a core) [default: 50us].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::or_us, alias = "pacing-tick-us", conflicts_with = "burst")]
    pacing_tick: Option<Duration>,
    /// Frames to send [default: 100].
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    frames: Option<u64>,
    /// Send every frame that starts within this long (e.g. `10s`; a bare number is seconds),
    /// instead of a frame count.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::or_s)]
    duration: Option<Duration>,
    /// Wire id of the first frame; later frames count up from it, wrapping.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    first_frame_id: u32,
    /// Do not send packet PACKET of the run's frame FRAME (0-based; repeatable).
    #[arg(long = "drop", value_name = "FRAME:PACKET")]
    drops: Vec<PacketAt>,
    /// Send packet PACKET of frame FRAME twice (repeatable).
    #[arg(long = "duplicate", value_name = "FRAME:PACKET")]
    duplicates: Vec<PacketAt>,
    /// Send frame FRAME's packets in reverse order (repeatable).
    #[arg(long = "reorder", value_name = "FRAME")]
    reorders: Vec<u64>,
    /// Send packet PACKET of frame FRAME malformed: KIND is wrong_size, wrong_elements,
    /// packet_out_of_range or wrong_channel (repeatable).
    #[arg(long = "malformed", value_name = "FRAME:PACKET:KIND")]
    malformed: Vec<MalformedAt>,
    /// Write each frame's send times (CLOCK_MONOTONIC ns) as CSV: frame_id,first_ns,last_ns.
    #[arg(long, value_name = "FILE")]
    times: Option<PathBuf>,
    /// Run the sending thread at this nice value (-20 to 19): below 0 the scheduler runs it
    /// promptly when it wakes, beside a busy system under test on the same cores. Lowering it
    /// needs CAP_SYS_NICE; without it the sender says so and runs at its inherited value.
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    nice: i32,
    /// Write what was sent and how well the schedule was kept as JSON (schema
    /// `kplace-send-report/2`): frames, packets, max lag, longest oversleep, involuntary
    /// context switches.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

impl SendArgs {
    /// The options a library's `spec` stands for ([`kplace::session::child`]), every other one at its
    /// default.
    pub(crate) fn from_child(spec: SendChild) -> SendArgs {
        let (workload, recording) = match spec.frames_of {
            None => (WorkloadArgs::default(), None),
            Some(ChildFrames::Workload { seed, options }) => (
                WorkloadArgs {
                    given: crate::workloads::OptionPairs(options),
                    seed,
                },
                None,
            ),
            Some(ChildFrames::Recording { path, .. }) => (WorkloadArgs::default(), Some(path)),
        };
        let (rate, burst, pacing_tick) = match spec.pace {
            Pace::Burst => (None, true, None),
            Pace::Rate { frames_per_s, tick } => (Some(frames_per_s), false, tick),
        };
        SendArgs {
            dest: spec.dest.to_string(),
            graph: spec.graph.unwrap_or_else(|| DEFAULT_GRAPH.into()),
            shape: ShapeArgs {
                shape: spec.shape,
                sets: Vec::new(),
            },
            workload,
            recording,
            rate,
            packet_interval: None,
            burst,
            pacing_tick,
            frames: Some(spec.frames),
            duration: None,
            first_frame_id: 0,
            drops: Vec::new(),
            duplicates: Vec::new(),
            reorders: Vec::new(),
            malformed: Vec::new(),
            times: spec.times,
            nice: spec.nice.unwrap_or(0),
            report: spec.report,
        }
    }

    fn dest(&self) -> anyhow::Result<SocketAddr> {
        let mut addrs = self
            .dest
            .to_socket_addrs()
            .with_context(|| format!("--dest {:?}: expected HOST:PORT", self.dest))?;
        addrs
            .next()
            .with_context(|| format!("--dest {:?}: the host has no address", self.dest))
    }

    fn frame_count(&self) -> anyhow::Result<FrameCount> {
        match (self.frames, self.duration) {
            (_, Some(duration)) => Ok(FrameCount::Duration(duration)),
            (frames, None) => Ok(FrameCount::Frames(frames.unwrap_or(DEFAULT_FRAMES))),
        }
    }

    /// The frames to send: the recording's, or those of the graph's workload for a run of
    /// `count` frames.
    fn frames(&self, count: FrameCount) -> anyhow::Result<SendFrames> {
        let files = self.shape.graph_only(&self.graph)?;
        Ok(SendFrames::new(
            &crate::workloads::registry(),
            &files,
            &self.workload.options(),
            self.workload.seed,
            self.recording.as_deref(),
            count,
        )?)
    }
}

/// Prepares the workload's frames (or loads the recording), sends them, prints a summary;
/// Ctrl-C ends the run early, still with the summary and exit status 0.
pub fn main(args: SendArgs) -> anyhow::Result<ExitCode> {
    let dest = args.dest()?;
    let frames = args.frame_count()?;
    let source = args.frames(frames)?;
    let interval_us = args.packet_interval.map(|d| d.as_secs_f64() * 1e6);
    let pacing = source.pacing(args.burst, args.rate, interval_us)?;
    let faults = Faults::new(
        &args.drops,
        &args.duplicates,
        &args.reorders,
        &args.malformed,
    )?;
    let config = SenderConfig {
        dest,
        shape: source.shape(),
        pacing,
        frames,
        first_frame_id: args.first_frame_id,
        faults,
        tick: args
            .pacing_tick
            .unwrap_or(Duration::from_micros(sender::DEFAULT_TICK_US)),
    };
    config.check().context("kplace send")?;
    // Fail on an unwritable times or report file before the run, not after it. Standard
    // output carries the summary, so neither can be `-`. Each appears whole, or not at all.
    let create = |path: &Option<PathBuf>,
                  option: &str,
                  what: &'static str|
     -> Result<Option<OutputFile>, OutputError> {
        path.as_ref()
            .map(|path| {
                output::file_only(path, option)?;
                OutputFile::create(path, what)
            })
            .transpose()
    };
    let times = create(&args.times, "--times", "send times")?;
    let report_file = create(&args.report, "--report", "send report")?;

    tracing::info!("kplace send: {source} to {dest}, {pacing}, {frames}");

    // The first signal ends the run after its current batch; a second one at once.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    kplace::interrupt::install()
        .and_then(|()| kplace::interrupt::on_request(move |_| flag.store(true, Ordering::Relaxed)))
        .context("cannot install the signal handler")?;

    let nice = set_nice(args.nice);
    let cpu_before = kplace::report::metrics::process_cpu_time();
    let report = sender::send(source.frames(), &config, &stop)
        .with_context(|| format!("kplace send to {dest}"))?;
    let cpu = kplace::report::metrics::process_cpu_time().saturating_sub(cpu_before);
    println!("{}", report.summary(dest));
    // The sender's CPU time per frame: what `kplace tune` charges a stream sent from this
    // machine.
    println!(
        "sender CPU: {:.4} ms per frame",
        cpu.as_secs_f64() * 1e3 / report.frames.max(1) as f64
    );
    // The report is completed last, and whatever the times file met.
    let mut failed = Vec::new();
    if let Some(out) = times {
        report.write_times(&mut out.writer())?;
        failed.extend(out.commit().err().map(|e| e.to_string()));
    }
    if let Some(out) = report_file {
        serde_json::to_writer_pretty(out.writer(), &SendFile::of(&report, nice))?;
        out.commit()?;
    }
    if let Some(e) = failed.first() {
        anyhow::bail!("{e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Sets the calling thread's nice value to `nice` where allowed; the value it runs at.
fn set_nice(nice: i32) -> i32 {
    if let Err(e) = kplace::os::process::set_nice(nice) {
        tracing::warn!(
            "kplace send: warning: cannot set nice {nice} ({e}); sending at the inherited priority"
        );
    }
    kplace::os::process::nice()
}
