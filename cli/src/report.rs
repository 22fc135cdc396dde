//! The report of a run (`kplace run --report FILE`): the typed
//! [`kplace::report::run::RunReport`] built from what the executor, the receiver and the
//! verifier measured; documented in docs/report.md.

use std::time::Duration;

use kplace::net::udp::IngestCounters;
use kplace::net::wire::Malformed;
use kplace::os::CpuSet;
use kplace::report::metrics::RunMetrics;
use kplace::report::run::{
    ForeignSource, IngestEntry, Latencies, LatencyEntry, MalformedEntry, RUN_SCHEMA, RunReport,
    StageEntry, Verification,
};
use kplace::report::telemetry::Telemetry;
use kplace_lab::mps::RunMps;
use kplace_radar::{Cpi, Verifier};

/// What a run knows about itself besides the executor's report.
pub struct RunFacts<'a> {
    /// Graph name.
    pub graph: &'a str,
    /// Placement name.
    pub placement: &'a str,
    /// The CPI.
    pub cpi: Cpi,
    /// `replay` or `udp://...`.
    pub source: String,
    /// Frames the run expected.
    pub frames_expected: u64,
    /// Clusters reported over the run.
    pub clusters: u64,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<String>,
    /// What NVML saw of the run's GPUs.
    pub gpu_telemetry: Telemetry,
    /// Whether the process is an MPS client; `None` without a CUDA context.
    pub mps: Option<RunMps>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ingest_entry(c: &IngestCounters) -> IngestEntry {
    IngestEntry {
        packets: c.packets,
        bytes: c.bytes,
        accepted: c.accepted,
        in_place: c.in_place,
        malformed: MalformedEntry {
            wrong_size: c.malformed(Malformed::WrongSize),
            wrong_samples: c.malformed(Malformed::WrongSamples),
            chirp_out_of_range: c.malformed(Malformed::ChirpOutOfRange),
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

/// The report of one pipeline's run.
pub fn build(
    facts: RunFacts<'_>,
    report: &RunMetrics,
    ingest: Option<&IngestCounters>,
    verifier: &Verifier,
) -> RunReport {
    let summary = verifier.summary();
    let config = verifier.config();
    let frame_bytes = (facts.cpi.cells() * 4) as f64;
    let wall = report.wall.as_secs_f64();
    RunReport {
        schema: RUN_SCHEMA.to_string(),
        graph: facts.graph.to_string(),
        placement: facts.placement.to_string(),
        cpi: facts.cpi.to_string(),
        source: facts.source,
        frames_expected: facts.frames_expected,
        frames: report.frames,
        measured_frames: report.measured_frames,
        partial_frames: report.partial_frames,
        dropped_frames: report.dropped_frames,
        wall_s: wall,
        throughput_cpi_per_s: report.frames_per_second(),
        input_gbit_per_s: if wall > 0.0 {
            report.measured_frames as f64 * frame_bytes * 8.0 / wall / 1e9
        } else {
            0.0
        },
        cores_used: report.cores_used(),
        cpus_allowed: CpuSet::allowed().ok().map(|cpus| cpus.to_string()),
        slot_waits: report.slot_waits,
        stages: report
            .stages
            .iter()
            .map(|s| StageEntry {
                name: s.name.clone(),
                device: s.device.clone(),
                launches: s.launches,
                total_s: s.total.as_secs_f64(),
                per_frame_ms: ms(s.per_frame),
                max_launch_ms: ms(s.max_launch),
                gpu_ms_per_frame: s.gpu_per_frame.map(ms),
            })
            .collect(),
        latency: Latencies {
            post_cpi: LatencyEntry::from(&report.post_cpi),
            end_to_end: LatencyEntry::from(&report.end_to_end),
            post_cpi_trend_ms_per_s: report.post_cpi_trend * 1e3,
        },
        ingest: ingest.map(ingest_entry),
        clusters_per_frame: facts.clusters as f64 / report.frames.max(1) as f64,
        verification: Verification {
            passed: summary.passed(config),
            frames_reported: summary.frames_reported,
            frames_passed: summary.frames_passed,
            frames_failed: summary.frames_failed,
            frames_missing: summary.frames_missing,
            false_alarms_per_frame: summary.mean_false_alarms(),
            false_alarm_bound: config.max_false_alarms_per_frame,
            reasons: summary.failure_reasons(config),
        },
        interrupted: facts.interrupted,
        gpu_telemetry: facts.gpu_telemetry,
        mps: facts.mps,
    }
}

/// A report of a replay run with `frames` frames at `rate` CPI/s and a post-CPI p99 of
/// `p99_ms`, that verified: for the readers' tests.
#[cfg(test)]
pub(crate) fn fixture(frames: u64, rate: f64, p99_ms: f64) -> RunReport {
    let latency = LatencyEntry {
        count: frames,
        p50_ms: p99_ms / 2.0,
        p99_ms,
        p999_ms: p99_ms * 2.0,
        max_ms: p99_ms * 2.0,
        histogram: None,
    };
    RunReport {
        schema: RUN_SCHEMA.to_string(),
        graph: "radar".into(),
        placement: "all-cpu".into(),
        cpi: "1024x128".into(),
        source: "replay".into(),
        frames_expected: frames,
        frames,
        measured_frames: frames,
        partial_frames: 0,
        dropped_frames: 0,
        wall_s: frames as f64 / rate,
        throughput_cpi_per_s: rate,
        input_gbit_per_s: 0.0,
        cores_used: 1.0,
        cpus_allowed: Some("0".into()),
        slot_waits: 0,
        stages: Vec::new(),
        latency: Latencies {
            post_cpi: latency.clone(),
            end_to_end: latency,
            post_cpi_trend_ms_per_s: 0.0,
        },
        ingest: None,
        clusters_per_frame: 1.0,
        verification: Verification {
            passed: true,
            frames_reported: frames,
            frames_passed: frames,
            frames_failed: 0,
            frames_missing: 0,
            false_alarms_per_frame: 0.0,
            false_alarm_bound: 1.0,
            reasons: Vec::new(),
        },
        interrupted: None,
        gpu_telemetry: Telemetry::unavailable("no GPU stage"),
        mps: None,
    }
}
