//! `kplace send`: a workload's frames (or a recording's) as UDP packets, one per row, open loop, paced or in a burst,
//! optionally with faults (see `kplace::net::sender`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use kplace::model::files::GraphFiles;
use kplace::net::sender::{self, Faults, FrameCount, Pacing, SenderConfig};
use kplace::net::wire::{Malformed, WireShape};
use kplace::workload::kind::{Prepared, Request};
use kplace::workload::recording::Recording;

use super::args::ShapeArgs;
use super::workloads::WorkloadArgs;
use kplace::report::output::{self, OutputError, OutputFile};

/// Frames sent when neither `--frames` nor `--duration` is given.
const DEFAULT_FRAMES: u64 = 100;

/// Options of `kplace send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where to send: HOST:PORT (e.g. 127.0.0.1:9000).
    #[arg(long, value_name = "HOST:PORT")]
    dest: String,
    /// The graph whose workload generates the frames sent (its source tensor's frames).
    #[arg(long, default_value = "workloads/radar/graph.yaml")]
    graph: PathBuf,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Send this recording's frames (`kplace record` makes one; its SigMF metadata must give
    /// the frame's type and shape) instead of the workload's, cycling through them: one packet
    /// per index of the frame's first axis. Without --rate, paced at the recording's sample
    /// rate.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["targets", "high_snr", "scene_frames", "options", "shape", "sets"])]
    recording: Option<PathBuf>,
    /// Frames per second, each frame's packets spread evenly over its period.
    #[arg(long, value_name = "FRAMES_PER_S", conflicts_with_all = ["packet_interval_us", "burst"])]
    rate: Option<f64>,
    /// Microseconds between packets [default: the workload's real-time frame period over its
    /// packets (the radar's chirp interval N / fs, 50 us for N = 1024), or one packet's
    /// elements at a recording's sample rate].
    #[arg(
        long,
        value_name = "US",
        conflicts_with = "burst",
        alias = "chirp-interval-us"
    )]
    packet_interval_us: Option<f64>,
    /// Send as fast as the socket takes packets.
    #[arg(long)]
    burst: bool,
    /// Wake at most every this many microseconds and send what is due: packets leave up to
    /// about this late (never early) and the sender sleeps instead of taking a core; 0 spins
    /// to each packet's deadline (exact, but takes a core).
    #[arg(long, value_name = "US", default_value_t = sender::DEFAULT_TICK_US, conflicts_with = "burst")]
    pacing_tick_us: u64,
    /// Frames to send [default: 100].
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    frames: Option<u64>,
    /// Send every frame that starts within this many seconds, instead of a frame count.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Wire id of the first frame; later frames count up from it, wrapping.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    first_frame_id: u32,
    /// Do not send packet PACKET of the run's frame FRAME (0-based; repeatable).
    #[arg(long = "drop", value_name = "FRAME:PACKET", value_parser = parse_packet)]
    drops: Vec<(u64, u32)>,
    /// Send packet PACKET of frame FRAME twice (repeatable).
    #[arg(long = "duplicate", value_name = "FRAME:PACKET", value_parser = parse_packet)]
    duplicates: Vec<(u64, u32)>,
    /// Send frame FRAME's packets in reverse order (repeatable).
    #[arg(long = "reorder", value_name = "FRAME")]
    reorders: Vec<u64>,
    /// Send packet PACKET of frame FRAME malformed: KIND is wrong_size, wrong_elements,
    /// packet_out_of_range or wrong_channel (repeatable).
    #[arg(long = "malformed", value_name = "FRAME:PACKET:KIND", value_parser = parse_malformed)]
    malformed: Vec<(u64, u32, Malformed)>,
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

fn parse_packet(text: &str) -> Result<(u64, u32), String> {
    let (frame, packet) = text
        .split_once(':')
        .ok_or("expected FRAME:PACKET, e.g. 3:17")?;
    let frame = frame.parse().map_err(|e| format!("frame {frame:?}: {e}"))?;
    let packet = packet
        .parse()
        .map_err(|e| format!("packet {packet:?}: {e}"))?;
    Ok((frame, packet))
}

fn parse_malformed(text: &str) -> Result<(u64, u32, Malformed), String> {
    let (at, kind) = text
        .rsplit_once(':')
        .ok_or("expected FRAME:PACKET:KIND, e.g. 3:17:wrong_size")?;
    let (frame, packet) = parse_packet(at)?;
    let kind = Malformed::from_name(kind).ok_or_else(|| {
        let names: Vec<&str> = Malformed::ALL.iter().map(|m| m.name()).collect();
        format!(
            "unknown kind {kind:?}: expected one of {}",
            names.join(", ")
        )
    })?;
    Ok((frame, packet, kind))
}

impl SendArgs {
    fn dest(&self) -> anyhow::Result<SocketAddr> {
        let mut addrs = self
            .dest
            .to_socket_addrs()
            .with_context(|| format!("--dest {:?}: expected HOST:PORT", self.dest))?;
        addrs
            .next()
            .with_context(|| format!("--dest {:?}: the host has no address", self.dest))
    }

    fn pacing(&self, frames: &Frames) -> anyhow::Result<Pacing> {
        if self.burst {
            return Ok(Pacing::Burst);
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                bail!("--rate must be a positive number of frames per second, got {rate}");
            }
            return Ok(Pacing::FrameRate(rate));
        }
        let seconds = match (self.packet_interval_us, frames) {
            (Some(us), _) => us / 1e6,
            (None, Frames::Workload { prepared, shape }) => {
                let Some(period) = prepared.workload().real_time_period() else {
                    bail!(
                        "the workload of graph {} has no real-time rate: give --rate or --packet-interval-us",
                        self.graph.display()
                    );
                };
                period.as_secs_f64() / f64::from(shape.packets)
            }
            (None, Frames::Recorded { recording, shape }) => {
                let Some(rate) = recording.sample_rate else {
                    bail!(
                        "recording {} states no sample rate: give --rate or --packet-interval-us",
                        recording.path.display()
                    );
                };
                f64::from(shape.elements) / rate
            }
        };
        let interval = Duration::try_from_secs_f64(seconds).map_err(|_| {
            anyhow::anyhow!(
                "--packet-interval-us must be a non-negative number, got {}",
                seconds * 1e6
            )
        })?;
        Ok(Pacing::PacketInterval(interval))
    }

    fn frame_count(&self) -> anyhow::Result<FrameCount> {
        match (self.frames, self.duration) {
            (_, Some(seconds)) => Duration::try_from_secs_f64(seconds)
                .map(FrameCount::Duration)
                .map_err(|_| {
                    anyhow::anyhow!("--duration must be a non-negative number, got {seconds}")
                }),
            (frames, None) => Ok(FrameCount::Frames(frames.unwrap_or(DEFAULT_FRAMES))),
        }
    }

    fn faults(&self) -> anyhow::Result<Faults> {
        let mut faults = Faults {
            drop: self.drops.iter().copied().collect(),
            duplicate: self.duplicates.iter().copied().collect(),
            reorder: self.reorders.iter().copied().collect(),
            ..Faults::default()
        };
        for &(frame, packet, kind) in &self.malformed {
            if let Some(other) = faults.malformed.insert((frame, packet), kind) {
                bail!("--malformed names frame {frame} packet {packet} twice ({other} and {kind})");
            }
        }
        Ok(faults)
    }
}

/// The frames to send, and their wire.
enum Frames {
    /// A recording's.
    Recorded {
        recording: Recording,
        shape: WireShape,
    },
    /// The graph's workload's, prepared for a replay.
    Workload {
        prepared: Box<dyn Prepared>,
        shape: WireShape,
    },
}

impl Frames {
    /// The recording these options name, or the frames of the graph's workload for a run of
    /// `count` frames.
    fn new(args: &SendArgs, count: FrameCount) -> anyhow::Result<Frames> {
        if let Some(path) = &args.recording {
            let (recording, tensor) = Recording::load_described(path)?;
            let shape = WireShape::for_tensor(&tensor).map_err(anyhow::Error::msg)?;
            return Ok(Frames::Recorded { recording, shape });
        }
        let files = GraphFiles {
            graph: args.graph.clone(),
            dims: args.shape.dims(&args.graph)?,
            sets: args.shape.params(),
            ..GraphFiles::default()
        };
        let graph = files.shaped_graph()?;
        let shape = WireShape::for_source(&graph).map_err(anyhow::Error::msg)?;
        let options = args.workload.options();
        let request = Request {
            files: &files,
            options: &options,
            recording: None,
            seed: args.workload.seed,
            frames: match count {
                FrameCount::Frames(n) => n,
                FrameCount::Duration(_) => u64::MAX,
            },
            pipelines: 0,
            replay: true,
        };
        let prepared_at = Instant::now();
        let prepared = crate::workloads::registry()
            .kind_for(&request)?
            .prepare(&request)?;
        tracing::info!(
            "kplace send: {} prepared in {:.2} s",
            prepared.workload().describe(),
            prepared_at.elapsed().as_secs_f64()
        );
        Ok(Frames::Workload { prepared, shape })
    }

    fn shape(&self) -> WireShape {
        match self {
            Frames::Recorded { shape, .. } | Frames::Workload { shape, .. } => *shape,
        }
    }
}

/// Prepares the workload's frames (or loads the recording), sends them, prints a summary;
/// Ctrl-C ends the run early, still with the summary and exit status 0.
pub fn main(args: SendArgs) -> anyhow::Result<ExitCode> {
    let dest = args.dest()?;
    let frames = args.frame_count()?;
    let source = Frames::new(&args, frames)?;
    let pacing = args.pacing(&source)?;
    let faults = args.faults()?;
    let shape = source.shape();
    let config = SenderConfig {
        dest,
        shape,
        pacing,
        frames,
        first_frame_id: args.first_frame_id,
        faults,
        tick: Duration::from_micros(args.pacing_tick_us),
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

    let prepared: &[Vec<u8>] = match &source {
        Frames::Recorded { recording, .. } => {
            tracing::info!(
                "kplace send: recording {} ({} frames of {} packets) to {dest}, {pacing}, {frames}",
                recording.path.display(),
                recording.frames.len(),
                shape.packets
            );
            &recording.frames
        }
        Frames::Workload { prepared, .. } => {
            let workload = prepared.workload();
            let Some(frames_prepared) = workload.frames() else {
                bail!("the workload prepared no frames to send");
            };
            tracing::info!(
                "kplace send: {} ({} distinct frames of {}) to {dest}, {pacing}, {frames}",
                workload.describe(),
                frames_prepared.len(),
                workload.shape()
            );
            frames_prepared
        }
    };

    // The first signal ends the run after its current batch; a second one at once.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    kplace::interrupt::install()
        .and_then(|()| kplace::interrupt::on_request(move |_| flag.store(true, Ordering::Relaxed)))
        .context("cannot install the signal handler")?;

    let nice = set_nice(args.nice);
    let cpu_before = kplace::report::metrics::process_cpu_time();
    let report =
        sender::send(prepared, &config, &stop).with_context(|| format!("kplace send to {dest}"))?;
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
        serde_json::to_writer_pretty(out.writer(), &report.file(nice))?;
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
