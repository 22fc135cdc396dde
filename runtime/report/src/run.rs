//! The run report's types: what `kplace run --report FILE` writes (schema
//! [`RUN_SCHEMA`]), and with `--pipelines N` the several-pipeline report around it
//! ([`MULTI_SCHEMA`]). The same structs are written by the run and read back by every reader
//! (`bisect-rate`'s trials, the several-pipeline aggregate), through [`super::read_json`], so a
//! field renamed on one side is an error on the other, never a silent zero.
//!
//! Units are in the field names: `_s` seconds, `_ms` milliseconds, `_bytes`, `_per_s` (per
//! second). A workload's own figures (the radar's clusters and false alarms) live in the
//! report's `details`, named by the workload.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use kplace_net::udp::IngestCounters;
use kplace_net::wire::Malformed;

use crate::telemetry::Telemetry;

/// The schema name and version every run report carries.
pub const RUN_SCHEMA: &str = "kplace-run-report/2";

/// The schema of a several-pipeline report.
pub const MULTI_SCHEMA: &str = "kplace-multi-run-report/2";

/// A workload's own figures in a report, by the names it gives them: an object the runtime
/// carries and never reads.
pub type Details = serde_json::Map<String, serde_json::Value>;

/// One pipeline's run, as `kplace run --report FILE` writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunReport {
    /// Always [`RUN_SCHEMA`].
    pub schema: String,
    /// The graph's name, from its file.
    pub graph: String,
    /// The placement's name, from its file.
    pub placement: String,
    /// The frame's shape: the source's dimensions innermost first, e.g. `1024x128`.
    #[schemars(with = "String")]
    pub frame_shape: kplace_core::model::shape::FrameShape,
    /// `replay` (the workload's frames in memory) or `udp://HOST:PORT`.
    pub source: String,
    /// Frames the run was told to expect (`--frames`).
    pub frames_expected: u64,
    /// Frames every stage processed and the sink received.
    pub frames: u64,
    /// Of those, the frames after the warm-up: what the rate, latency and CPU figures cover.
    pub measured_frames: u64,
    /// Frames that ended with packets missing; not processed.
    pub partial_frames: u64,
    /// Frames dropped whole because no frame slot was free.
    pub dropped_frames: u64,
    /// The measured window.
    pub wall_s: f64,
    /// `measured_frames / wall_s`.
    pub frames_per_s: f64,
    /// int16 I/Q bytes of the measured frames over `wall_s`, in Gbit/s.
    pub input_gbit_per_s: f64,
    /// Process CPU time (user + system) in the window over `wall_s`.
    pub cores_used: f64,
    /// The CPUs the process may run on, as a CPU list (`0,2-3`); null if unreadable.
    pub cpus_allowed: Option<String>,
    /// Times a closed-loop source waited for a free slot.
    pub slot_waits: u64,
    /// Per stage, in graph order.
    pub stages: Vec<StageEntry>,
    /// Where the runtime's threads spent their time besides the kernels, per frame.
    pub overhead: OverheadEntry,
    /// The run's latencies.
    pub latency: Latencies,
    /// The UDP receiver's counters; null for replay.
    pub ingest: Option<IngestEntry>,
    /// The verifier's verdict.
    pub verification: Verification,
    /// The workload's own figures, named by it (the radar's `clusters_per_frame`,
    /// `false_alarms_per_frame`, `false_alarm_bound`); empty for a workload without any.
    pub details: Details,
    /// `SIGINT`, `SIGTERM` or `SIGHUP` when a signal stopped the run; null otherwise.
    pub interrupted: Option<String>,
    /// NVML readings of the GPUs the plan uses.
    pub gpu_telemetry: Telemetry,
    /// Whether the process is an MPS client; null for a process without a CUDA context.
    pub mps: Option<RunMps>,
    /// The run's output files that could not be written (a full disk, a vanished directory),
    /// each with its path and why: the run went on without them, and failed for them.
    #[serde(default)]
    pub output_errors: Vec<String>,
    /// Parameters changed while the run went on (`kplace run --control`), applied or refused,
    /// in the order asked; absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ChangeEntry>,
    /// A run that adapts (`kplace run --adapt`): its placements in order of preference, the
    /// frames each ran, and every switch with its evidence; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptation: Option<kplace_core::adapt::Adaptation>,
    /// What the metrics endpoint did over the run (`kplace run --metrics`): connections,
    /// scrapes, and those it refused or cut; absent without `--metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_endpoint: Option<EndpointCounts>,
}

/// What the metrics endpoint (`kplace run --metrics ADDR`) did with the connections it
/// accepted: each ends in exactly one of the outcomes after `connections`, so they sum to it
/// once the endpoint has stopped. Accept errors are not connections and are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointCounts {
    /// Connections accepted.
    pub connections: u64,
    /// Scrapes answered: `GET` or `HEAD /metrics`, the answer written whole.
    pub scrapes: u64,
    /// Requests answered with an error: 400 (not HTTP/1.x), 404 (another path) or 405
    /// (another method).
    pub other_requests: u64,
    /// Connections closed unserved (answered 503 when the socket took it) because every
    /// handler was busy and the queue full, or because the endpoint was stopping.
    pub refused: u64,
    /// Requests cut because the request did not arrive, or its answer could not be written,
    /// within the deadline.
    pub timed_out: u64,
    /// Requests refused because their head (request line and headers) was over the limit:
    /// answered 431 and closed, the rest never read.
    pub oversized: u64,
    /// Connections the client closed or broke before its request was whole or its answer
    /// written.
    pub hung_up: u64,
    /// Times accepting a connection failed (out of file descriptors, a connection aborted
    /// before it was accepted); the endpoint backs off and goes on.
    pub accept_errors: u64,
}

impl EndpointCounts {
    /// Whether the endpoint refused or cut anything, or failed to accept: what the run's
    /// summary says in a line.
    pub fn troubled(&self) -> bool {
        self.refused + self.timed_out + self.oversized + self.accept_errors > 0
    }

    /// The outcomes of the connections, summed: `connections` once the endpoint stopped.
    pub fn ended(&self) -> u64 {
        self.scrapes
            + self.other_requests
            + self.refused
            + self.timed_out
            + self.oversized
            + self.hung_up
    }
}

impl std::fmt::Display for EndpointCounts {
    /// `metrics endpoint: 604 connections: 1 scrape answered, 581 refused (busy), ...`: the
    /// outcomes that happened, and the accept errors.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = vec![count(self.scrapes, "scrape answered", "scrapes answered")];
        for (n, what) in [
            (self.refused, "refused (busy)"),
            (self.timed_out, "cut for time"),
            (self.oversized, "refused for size"),
            (self.other_requests, "answered with an error"),
            (self.hung_up, "hung up by the client"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        if self.accept_errors > 0 {
            parts.push(count(self.accept_errors, "accept error", "accept errors"));
        }
        write!(
            f,
            "metrics endpoint: {}: {}",
            count(self.connections, "connection", "connections"),
            parts.join(", ")
        )
    }
}

/// A change of parameters asked for while the run went on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeEntry {
    /// The stage.
    pub stage: String,
    /// The new values, by name.
    pub params: BTreeMap<String, String>,
    /// Where it came from (`control file c.txt, line 2`).
    pub origin: String,
    /// The first frame it applied to, counted in the order frames began from 0; null when
    /// refused, or when no frame began after it.
    pub from_frame: Option<u64>,
    /// Why it was refused; null when applied.
    pub refused: Option<String>,
}

/// One stage's share of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageEntry {
    /// The stage's name.
    pub name: String,
    /// The device it ran on (`cpu`, `gpu0`, ...).
    pub device: String,
    /// Launches run.
    pub launches: u64,
    /// Time in launches, summed over threads; for a GPU stage, the host's time to enqueue.
    pub total_s: f64,
    /// `total_s` per frame, in ms.
    pub per_frame_ms: f64,
    /// The slowest launch.
    pub max_launch_ms: f64,
    /// A GPU stage's time on its stream per frame, with `--profile-gpu`; null otherwise.
    pub gpu_ms_per_frame: Option<f64>,
    /// What became of a stateful stage's carry; absent for a stateless stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry: Option<CarryEntry>,
}

/// What became of a stateful stage's carry over a run: it runs one frame at a time, in frame
/// order, and lost frames either zero its carry or are passed to its kernel to account for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CarryEntry {
    /// Launches, one per frame processed.
    pub launches: u64,
    /// Frames lost between launches, by the frames' numbers (partial, dropped or never sent).
    pub frames_missing: u64,
    /// Times a loss zeroed the carry (kernels that reset on a gap).
    pub resets: u64,
    /// Times the frame numbers went back (the sender restarted) and the carry was zeroed.
    pub restarts: u64,
    /// Times the carry moved to another placement with the stream (`run --adapt`).
    #[serde(default)]
    pub moves: u64,
}

/// The runtime's own time per frame, over the whole run (warm-up included), from
/// [`crate::overhead`]; worker figures are summed over the workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverheadEntry {
    /// Tasks the workers ran per frame (launches and GPU enqueues).
    pub tasks_per_frame: f64,
    /// Time in kernels (or GPU enqueues) per frame, ms.
    pub kernel_ms_per_frame: f64,
    /// Completion bookkeeping per frame (counting tasks done, releasing stages, sending
    /// tasks and completions), us.
    pub bookkeeping_us_per_frame: f64,
    /// Times per frame an idle worker spun briefly and found a task.
    pub spins_per_frame: f64,
    /// Time spinning per frame, us.
    pub spin_us_per_frame: f64,
    /// Times per frame a worker found no task and parked.
    pub parks_per_frame: f64,
    /// Time parked per frame, us.
    pub parked_us_per_frame: f64,
    /// The source's time per frame, less its waits for a free slot and its staging, us: for a
    /// replay its work (writing packets and launching tiles, or handing over frames staged in
    /// pinned memory); for a network receiver also its waits for packets.
    pub source_us_per_frame: f64,
    /// A replay's one copy of its prepared frames into pinned memory before its first frame,
    /// ms (once for the run, not per frame); 0 when it staged none (absent in reports written
    /// before it was counted).
    #[serde(default)]
    pub source_staging_ms: f64,
    /// The source's waits for a free slot per frame.
    pub slot_waits_per_frame: f64,
    /// The collector's time per frame (handing frames to the sink, returning slots), us.
    pub collector_us_per_frame: f64,
    /// Sets of buffers for the tensors that live only while a frame's stages run (one per
    /// slot; 0 when every tensor is a slot's own).
    pub stage_sets: u32,
    /// The most of those sets bound to frames at once: the frames whose stage buffers the
    /// kernels swept in turn (1 with one worker running frames one after another).
    pub stage_sets_peak: u32,
}

impl From<&crate::overhead::Overhead> for OverheadEntry {
    fn from(overhead: &crate::overhead::Overhead) -> Self {
        let p = overhead.per_frame();
        OverheadEntry {
            tasks_per_frame: p.tasks,
            kernel_ms_per_frame: p.launch_ms,
            bookkeeping_us_per_frame: p.bookkeeping_us,
            spins_per_frame: p.spins,
            spin_us_per_frame: p.spun_us,
            parks_per_frame: p.parks,
            parked_us_per_frame: p.parked_us,
            source_us_per_frame: p.source_us,
            source_staging_ms: p.source_staging_ms,
            slot_waits_per_frame: p.slot_waits,
            collector_us_per_frame: p.collector_us,
            stage_sets: overhead.stage_sets,
            stage_sets_peak: overhead.stage_sets_peak,
        }
    }
}

/// The run's latencies over the measured frames.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Latencies {
    /// Completion minus the frame's last packet.
    pub post_frame: LatencyEntry,
    /// Completion minus the frame's first packet.
    pub end_to_end: LatencyEntry,
    /// Least-squares slope of post-frame latency against completion time, ms per s.
    pub post_frame_trend_ms_per_s: f64,
}

/// One latency's distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LatencyEntry {
    /// Frames recorded.
    pub count: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Every frame's latency in ns as a base64 HdrHistogram V2 (deflate) record; null only if
    /// serializing failed.
    pub histogram: Option<String>,
}

impl From<&crate::metrics::LatencySummary> for LatencyEntry {
    fn from(l: &crate::metrics::LatencySummary) -> LatencyEntry {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        LatencyEntry {
            count: l.count,
            p50_ms: ms(l.p50),
            p99_ms: ms(l.p99),
            p999_ms: ms(l.p999),
            max_ms: ms(l.max),
            histogram: l.histogram.clone(),
        }
    }
}

/// The UDP receiver's counters: every datagram counted once, under exactly one name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestEntry {
    /// Datagrams received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Packets stored in their frame.
    pub accepted: u64,
    /// Of those, payloads received straight into their place.
    pub in_place: u64,
    /// Malformed packets by class, dropped.
    pub malformed: MalformedEntry,
    /// Packets of a row already stored.
    pub duplicates: u64,
    /// Packets of a frame already ended or passed over.
    pub late: u64,
    /// Packets whose frame id is outside the expected range.
    pub unexpected: u64,
    /// Packets naming a frame beyond the frame window.
    pub out_of_window: u64,
    /// Packets held before their frame opened (a frame's first, or any before a sender
    /// proved the stream) that nothing confirmed.
    pub stray: u64,
    /// Packets from a source other than the one the stream locked to.
    pub foreign: u64,
    /// The first 16 foreign sources.
    pub foreign_sources: Vec<ForeignSource>,
    /// `HOST:PORT` the stream locked to, or null.
    pub locked_source: Option<String>,
    /// Whether the lock was confirmed by a frame's worth of the source's packets in order
    /// (at least 2, at most 64): no frame opens before a source has sent a frame's worth, so
    /// a stream with a source has a confirmed one (of one-packet frames, from its second).
    pub lock_confirmed: bool,
    /// Packets of the locked source that counted toward confirming the lock.
    pub lock_evidence: u64,
    /// `HOST:PORT` the lock was taken from, if it moved, or null.
    pub lock_replaced: Option<String>,
    /// Frames the stream passed over with none of their packets stored.
    pub missed_frames: u64,
    /// Times the stream was followed to a new position or source.
    pub restarts: u64,
    /// Packets lost because no slot was free.
    pub dropped_packets: u64,
    /// Frames lost because no slot was free.
    pub dropped_frames: u64,
    /// Frames ended with every packet.
    pub complete_frames: u64,
    /// Frames ended without every packet.
    pub partial_frames: u64,
    /// The receive buffer the kernel granted.
    pub socket_receive_buffer_bytes: u64,
    /// From the first batch of packets to the last.
    pub receiving_s: f64,
}

/// Malformed packets by class ([`kplace_net::wire::Malformed`]'s names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MalformedEntry {
    /// Not exactly one header plus the configured samples.
    pub wrong_size: u64,
    /// The header's `n_elements` is not the configured one.
    pub wrong_elements: u64,
    /// `packet_id` is not below the configured packets per frame.
    pub packet_out_of_range: u64,
    /// `channel_id` is not 0.
    pub wrong_channel: u64,
}

/// A source whose packets were refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForeignSource {
    /// `HOST:PORT`.
    pub addr: String,
    /// Its packets.
    pub packets: u64,
}

/// The verifier's verdict over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    /// Whether the run passed.
    pub passed: bool,
    /// What every frame was checked against: `the scene's truth` (the radar), `reference
    /// placement NAME`, `golden files DIR`, or `nothing` (no check asked for).
    pub against: String,
    /// Frame reports checked.
    pub frames_reported: u64,
    /// Reports that passed: every target found (the radar), every sink element within its
    /// tolerance (a reference).
    pub frames_passed: u64,
    /// Reports that failed.
    pub frames_failed: u64,
    /// Expected frames never reported.
    pub frames_missing: u64,
    /// The first few frames the run was seen to lose (partial, or never begun before a later
    /// one), in order; absent when it lost none or its verifier does not list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_frames: Vec<u64>,
    /// Frames of a graph with a stateful stage that differed from the reference after a loss
    /// and were judged again against the graph replayed with the same frames lost (counted
    /// in `frames_passed` or `frames_failed` as that judged them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub frames_rejudged: u64,
    /// The first sink elements outside their tolerance (at most
    /// [`MAX_MISMATCHES`]), in the order found.
    pub mismatches: Vec<Mismatch>,
    /// Why the run failed, in sentences; empty when it passed.
    pub reasons: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Mismatches a report lists at most; the rest are counted in the reasons.
pub const MAX_MISMATCHES: usize = 16;

/// A sink element that differs from its reference beyond the tensor's tolerance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mismatch {
    /// The frame's id.
    pub frame: u64,
    /// The sink tensor's name.
    pub tensor: String,
    /// The element's flat index (row-major; a record list's record, or its header).
    pub index: u64,
    /// The element as the run computed it, as text (`1.25`, `(1, -2)`, a record).
    pub got: String,
    /// The element as the reference has it.
    pub want: String,
}

/// `kplace run --pipelines N --report FILE`: every pipeline's report and their aggregate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiRunReport {
    /// Always [`MULTI_SCHEMA`].
    pub schema: String,
    /// The pipelines together.
    pub aggregate: Aggregate,
    /// Each pipeline's report, or why it has none.
    pub pipelines: Vec<PipelineEntry>,
    /// `SIGINT`, `SIGTERM` or `SIGHUP` when a signal stopped the run; null otherwise.
    pub interrupted: Option<String>,
    /// What the metrics endpoint the pipelines shared did (`kplace run --metrics`, thread
    /// mode); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_endpoint: Option<EndpointCounts>,
}

/// One pipeline of a several-pipeline run: an object with an `error` is a failure, any other
/// is the pipeline's report, read as strictly as a report on its own.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum PipelineEntry {
    /// A pipeline that could not run, or left no report.
    Failed(PipelineFailure),
    /// The pipeline's own report.
    Ran(Box<RunReport>),
}

impl PipelineEntry {
    /// The pipeline's report, if it ran.
    pub fn report(&self) -> Option<&RunReport> {
        match self {
            PipelineEntry::Ran(report) => Some(report),
            PipelineEntry::Failed(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for PipelineEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let value = serde_json::Value::deserialize(d)?;
        if value.get("error").is_some() {
            return PipelineFailure::deserialize(value)
                .map(PipelineEntry::Failed)
                .map_err(D::Error::custom);
        }
        serde_path_to_error::deserialize(value)
            .map(|report| PipelineEntry::Ran(Box::new(report)))
            .map_err(|e| D::Error::custom(format!("{}: {}", e.path(), e.inner())))
    }
}

/// Why a pipeline has no report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineFailure {
    /// What went wrong, in words.
    pub error: String,
}

/// The pipelines of a several-pipeline run together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    /// Pipelines run.
    pub pipelines: usize,
    /// `thread` or `process`.
    pub mode: String,
    /// Frames processed, summed.
    pub frames: u64,
    /// Partial frames, summed.
    pub partial_frames: u64,
    /// Dropped frames, summed.
    pub dropped_frames: u64,
    /// The pipelines' rates, summed.
    pub frames_per_s: f64,
    /// Their input rates, summed.
    pub input_gbit_per_s: f64,
    /// The slowest pipeline's rate; null if none ran.
    pub min_pipeline_frames_per_s: Option<f64>,
    /// Cores used: summed over processes; for threads, the process's.
    pub cores_used: f64,
    /// The worst post-frame p99 over the pipelines; null if none ran.
    pub worst_post_frame_p99_ms: Option<f64>,
    /// The worst post-frame p99.9; null if none ran.
    pub worst_post_frame_p999_ms: Option<f64>,
    /// Pipelines that verified.
    pub pipelines_passed: usize,
    /// Whether every pipeline verified.
    pub all_passed: bool,
}

/// MPS as a run used it, for reports: what was asked and what was found. Always produced, even
/// when nothing could be checked (`checked` then says why).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunMps {
    /// Whether the run asked for MPS.
    pub requested: bool,
    /// The pipe directory checked: the one given, else `CUDA_MPS_PIPE_DIRECTORY`, else CUDA's
    /// default `/tmp/nvidia-mps`.
    pub pipe_dir: PathBuf,
    /// The daemon's default active-thread percentage, when it answered.
    pub active_thread_percentage: Option<f64>,
    /// Whether the daemon lists the process as a client. `false` also when it could not be
    /// checked.
    pub is_client: bool,
    /// How `is_client` was established, or why it could not be, in words.
    pub checked: String,
}

impl From<&IngestCounters> for IngestEntry {
    fn from(c: &IngestCounters) -> Self {
        IngestEntry {
            packets: c.packets,
            bytes: c.bytes,
            accepted: c.accepted,
            in_place: c.in_place,
            malformed: MalformedEntry {
                wrong_size: c.malformed(Malformed::WrongSize),
                wrong_elements: c.malformed(Malformed::WrongElements),
                packet_out_of_range: c.malformed(Malformed::PacketOutOfRange),
                wrong_channel: c.malformed(Malformed::WrongChannel),
            },
            duplicates: c.duplicates,
            late: c.late,
            unexpected: c.unexpected,
            out_of_window: c.out_of_window,
            stray: c.stray,
            foreign: c.foreign,
            foreign_sources: c
                .foreign_sources
                .iter()
                .map(|(addr, packets)| ForeignSource {
                    addr: addr.to_string(),
                    packets: *packets,
                })
                .collect(),
            locked_source: c.locked_source.map(|a| a.to_string()),
            lock_confirmed: c.lock_confirmed,
            lock_evidence: c.lock_evidence,
            lock_replaced: c.lock_replaced.map(|a| a.to_string()),
            missed_frames: c.missed_frames,
            restarts: c.restarts,
            dropped_packets: c.dropped_packets,
            dropped_frames: c.dropped_frames,
            complete_frames: c.complete_frames,
            partial_frames: c.partial_frames,
            socket_receive_buffer_bytes: c.recv_buffer as u64,
            receiving_s: c.receiving.as_secs_f64(),
        }
    }
}

/// The aggregate as `kplace run --pipelines N` prints it: two lines.
impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== {} pipelines ({}): {} frames, partial {}, dropped {}; aggregate {:.1} frames/s ({:.2} Gbit/s), slowest pipeline {:.1} frames/s; worst post-frame p99 {:.3} ms; cores used {:.2}",
            self.pipelines,
            self.mode,
            self.frames,
            self.partial_frames,
            self.dropped_frames,
            self.frames_per_s,
            self.input_gbit_per_s,
            self.min_pipeline_frames_per_s.unwrap_or(0.0),
            self.worst_post_frame_p99_ms.unwrap_or(f64::NAN),
            self.cores_used,
        )?;
        writeln!(
            f,
            "verification {}: {}/{} pipelines passed",
            if self.all_passed { "PASSED" } else { "FAILED" },
            self.pipelines_passed,
            self.pipelines
        )
    }
}
