//! The JSON report of a run (`kplace run --report FILE`), schema `kplace-run-report/1`,
//! documented in docs/report.md.

use std::time::Duration;

use kplace::affinity::CpuSet;
use kplace::metrics::{LatencySummary, RunReport};
use kplace::udp::IngestCounters;
use kplace::wire::Malformed;
use kplace_radar::{Cpi, Verifier};
use serde_json::{Value, json};

/// The schema name and version every report carries.
pub const SCHEMA: &str = "kplace-run-report/1";

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
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn latency(l: &LatencySummary) -> Value {
    json!({"count": l.count, "p50_ms": ms(l.p50), "p99_ms": ms(l.p99), "p999_ms": ms(l.p999), "max_ms": ms(l.max), "histogram": l.histogram})
}

/// The report as JSON.
pub fn to_json(
    facts: &RunFacts<'_>,
    report: &RunReport,
    ingest: Option<&IngestCounters>,
    verifier: &Verifier,
) -> Value {
    let summary = verifier.summary();
    let config = verifier.config();
    let frame_bytes = (facts.cpi.cells() * 4) as f64;
    let wall = report.wall.as_secs_f64();
    json!({
        "schema": SCHEMA,
        "graph": facts.graph,
        "placement": facts.placement,
        "cpi": facts.cpi.to_string(),
        "source": facts.source,
        "frames_expected": facts.frames_expected,
        "frames": report.frames,
        "measured_frames": report.measured_frames,
        "partial_frames": report.partial_frames,
        "dropped_frames": report.dropped_frames,
        "wall_s": wall,
        "throughput_cpi_per_s": report.frames_per_second(),
        "input_gbit_per_s": if wall > 0.0 { report.measured_frames as f64 * frame_bytes * 8.0 / wall / 1e9 } else { 0.0 },
        "cores_used": report.cores_used(),
        "cpus_allowed": CpuSet::allowed().ok().map(|cpus| cpus.to_string()),
        "slot_waits": report.slot_waits,
        "stages": report.stages.iter().map(|s| json!({
            "name": s.name,
            "device": s.device,
            "launches": s.launches,
            "total_s": s.total.as_secs_f64(),
            "per_frame_ms": ms(s.per_frame),
            "max_launch_ms": ms(s.max_launch),
            "gpu_ms_per_frame": s.gpu_per_frame.map(ms),
        })).collect::<Vec<_>>(),
        "latency": {
            "post_cpi": latency(&report.post_cpi),
            "end_to_end": latency(&report.end_to_end),
            "post_cpi_trend_ms_per_s": report.post_cpi_trend * 1e3,
        },
        "ingest": ingest.map(|c| json!({
            "packets": c.packets,
            "bytes": c.bytes,
            "accepted": c.accepted,
            "in_place": c.in_place,
            "malformed": Malformed::ALL.iter().map(|m| (m.name().to_string(), json!(c.malformed(*m)))).collect::<serde_json::Map<_, _>>(),
            "duplicates": c.duplicates,
            "late": c.late,
            "unexpected": c.unexpected,
            "out_of_window": c.out_of_window,
            "stray": c.stray,
            "foreign": c.foreign,
            "foreign_sources": c.foreign_sources.iter().map(|(a, n)| json!({"addr": a.to_string(), "packets": n})).collect::<Vec<_>>(),
            "locked_source": c.locked_source.map(|a| a.to_string()),
            "missed_frames": c.missed_frames,
            "restarts": c.restarts,
            "dropped_packets": c.dropped_packets,
            "dropped_frames": c.dropped_frames,
            "complete_frames": c.complete_frames,
            "partial_frames": c.partial_frames,
            "socket_receive_buffer_bytes": c.recv_buffer,
            "receiving_s": c.receiving.as_secs_f64(),
        })),
        "clusters_per_frame": facts.clusters as f64 / report.frames.max(1) as f64,
        "verification": {
            "passed": summary.passed(config),
            "frames_reported": summary.frames_reported,
            "frames_passed": summary.frames_passed,
            "frames_failed": summary.frames_failed,
            "frames_missing": summary.frames_missing,
            "false_alarms_per_frame": summary.mean_false_alarms(),
            "false_alarm_bound": config.max_false_alarms_per_frame,
            "reasons": summary.failure_reasons(config),
        },
    })
}
