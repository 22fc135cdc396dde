//! A running pipeline's metrics in the OpenMetrics text format, for a monitoring system to
//! scrape (`kplace run --metrics ADDR`).
//!
//! A [`Board`] holds each pipeline's latest [`Progress`], which the run posts at every progress
//! interval, and its receiver's latest [`IngestTotals`], which a UDP receiver posts as often
//! between batches; [`Board::render`] writes them as OpenMetrics text with
//! `prometheus-client`'s encoder. What a scrape sees is therefore at most one interval old,
//! and the board holds a fixed amount per pipeline (a few words per stage, GPU and packet
//! class), however long the run.
//! Every metric is listed in docs/report.md.

use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

pub use kplace_net::udp::IngestTotals;

use super::progress::{LATENCY_BOUNDS_S, Progress};

/// The latest progress of each of a run's pipelines and of its receiver, and the names of
/// their stages.
#[derive(Debug)]
pub struct Board {
    stages: Vec<String>,
    latest: Mutex<Vec<Option<Progress>>>,
    ingest: Mutex<Vec<Option<IngestTotals>>>,
}

impl Board {
    /// A board for `pipelines` pipelines of a graph whose stages are `stages`, in graph order.
    pub fn new(pipelines: usize, stages: Vec<String>) -> Board {
        Board {
            stages,
            latest: Mutex::new(vec![None; pipelines]),
            ingest: Mutex::new(vec![None; pipelines]),
        }
    }

    /// Posts pipeline `pipeline`'s receiver's latest counters (an index past the board's is
    /// ignored).
    pub fn post_ingest(&self, pipeline: usize, totals: IngestTotals) {
        let mut ingest = self.ingest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(place) = ingest.get_mut(pipeline) {
            *place = Some(totals);
        }
    }

    /// Posts pipeline `pipeline`'s latest progress (an index past the board's is ignored).
    pub fn post(&self, pipeline: usize, progress: &Progress) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(place) = latest.get_mut(pipeline) {
            *place = Some(progress.clone());
        }
    }

    /// The metrics as OpenMetrics text, ending with `# EOF`.
    pub fn render(&self) -> String {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let ingest = self
            .ingest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Snapshot {
            stages: self.stages.clone(),
            latest,
            ingest,
        }));
        let mut text = String::new();
        // Writing to a String cannot fail, and every value is a number the encoder takes.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        text
    }
}

/// What one scrape encodes.
#[derive(Debug)]
struct Snapshot {
    stages: Vec<String>,
    latest: Vec<Option<Progress>>,
    ingest: Vec<Option<IngestTotals>>,
}

type Labels = Vec<(&'static str, String)>;

/// A receiver's child value: its extra label, if any, and its count.
type ReceiverValue = (Option<(&'static str, &'static str)>, u64);

/// A family of receiver counters: name, help, and each child of one receiver's totals.
type ReceiverFamily = (
    &'static str,
    &'static str,
    fn(&IngestTotals) -> Vec<ReceiverValue>,
);

/// A value: a count, written as an integer, or a measurement.
#[derive(Clone, Copy, Debug)]
enum Num {
    Count(u64),
    Real(f64),
}

impl Snapshot {
    /// Each pipeline that has reported, with its label.
    fn pipelines(&self) -> impl Iterator<Item = (String, &Progress)> {
        self.latest
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((i.to_string(), p.as_ref()?)))
    }

    /// One family: `values` gives each child's labels and value.
    fn family(
        encoder: &mut DescriptorEncoder,
        (name, help, kind): (&str, &str, MetricType),
        values: Vec<(Labels, Num)>,
    ) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(name, help, None, kind)?;
        for (labels, value) in values {
            let child = family.encode_family(&labels)?;
            match (kind, value) {
                (MetricType::Counter, Num::Count(n)) => ConstCounter::new(n).encode(child)?,
                (MetricType::Counter, Num::Real(x)) => ConstCounter::new(x).encode(child)?,
                (_, Num::Count(n)) => ConstGauge::new(n as i64).encode(child)?,
                (_, Num::Real(x)) => ConstGauge::new(x).encode(child)?,
            }
        }
        Ok(())
    }

    fn per_pipeline(&self, value: impl Fn(&Progress) -> Num) -> Vec<(Labels, Num)> {
        self.pipelines()
            .map(|(i, p)| (vec![("pipeline", i)], value(p)))
            .collect()
    }

    fn per_stage(&self, value: impl Fn(usize, &Progress) -> Option<Num>) -> Vec<(Labels, Num)> {
        let mut out = Vec::new();
        for (i, p) in self.pipelines() {
            for (s, name) in self.stages.iter().enumerate() {
                if let Some(v) = value(s, p) {
                    out.push((vec![("pipeline", i.clone()), ("stage", name.clone())], v));
                }
            }
        }
        out
    }

    fn per_gpu(
        &self,
        value: impl Fn(&super::telemetry::GpuNow) -> Option<Num>,
    ) -> Vec<(Labels, Num)> {
        let mut out = Vec::new();
        for (i, p) in self.pipelines() {
            for g in &p.gpus {
                if let Some(v) = value(g) {
                    out.push((
                        vec![("pipeline", i.clone()), ("gpu", g.ordinal.to_string())],
                        v,
                    ));
                }
            }
        }
        out
    }

    /// Each receiver's totals: `value` gives each child's extra label and value.
    fn per_receiver(
        &self,
        value: impl Fn(&IngestTotals) -> Vec<ReceiverValue>,
    ) -> Vec<(Labels, Num)> {
        let mut out = Vec::new();
        for (i, totals) in self.ingest.iter().enumerate() {
            let Some(totals) = totals else { continue };
            for (label, n) in value(totals) {
                let mut labels: Labels = vec![("pipeline", i.to_string())];
                labels.extend(label.map(|(k, v)| (k, v.to_string())));
                out.push((labels, Num::Count(n)));
            }
        }
        out
    }

    /// A run that adapts: its switches so far, and the placement new frames begin on (a
    /// gauge of 1 labelled with its name).
    fn adaptation(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let adapting = || self.pipelines().filter(|(_, p)| p.placement.is_some());
        let switches = adapting()
            .map(|(i, p)| (vec![("pipeline", i)], Num::Count(p.switches)))
            .collect();
        let help = "Switches between placements while the stream runs";
        Self::family(
            e,
            ("kplace_adapt_switches", help, MetricType::Counter),
            switches,
        )?;
        let running = adapting()
            .filter_map(|(i, p)| {
                let placement = p.placement.clone()?;
                Some((
                    vec![("pipeline", i), ("placement", placement)],
                    Num::Count(1),
                ))
            })
            .collect();
        let help = "The placement new frames begin on (1), in a run that adapts";
        Self::family(
            e,
            ("kplace_adapt_placement", help, MetricType::Gauge),
            running,
        )
    }

    fn ingest(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let families: [ReceiverFamily; 5] = [
            (
                "kplace_ingest_packets",
                "Datagrams the receiver read",
                |t| vec![(None, t.packets)],
            ),
            ("kplace_ingest_bytes", "Bytes the receiver read", |t| {
                vec![(None, t.bytes)]
            }),
            (
                "kplace_ingest_classified_packets",
                "Datagrams by what the receiver made of them",
                |t| {
                    t.classes
                        .iter()
                        .map(|&(class, n)| (Some(("class", class)), n))
                        .collect()
                },
            ),
            (
                "kplace_ingest_frames",
                "Frames the receiver ended, by outcome",
                |t| {
                    t.frames
                        .iter()
                        .map(|&(outcome, n)| (Some(("outcome", outcome)), n))
                        .collect()
                },
            ),
            (
                "kplace_ingest_restarts",
                "Times the stream was followed to a new position or source",
                |t| vec![(None, t.restarts)],
            ),
        ];
        for (name, help, value) in families {
            let values = self.per_receiver(value);
            Self::family(e, (name, help, MetricType::Counter), values)?;
        }
        Ok(())
    }

    fn histograms(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "kplace_post_frame_latency_seconds",
            "Time from a frame's last packet to its results, every frame so far",
            None,
            MetricType::Histogram,
        )?;
        for (i, p) in self.pipelines() {
            let b = &p.post_frame_buckets;
            let mut buckets: Vec<(f64, u64)> =
                LATENCY_BOUNDS_S.iter().copied().zip(b.counts).collect();
            let counted: u64 = b.counts.iter().sum();
            buckets.push((f64::MAX, b.count - counted));
            let labels: Labels = vec![("pipeline", i)];
            let mut child: MetricEncoder = family.encode_family(&labels)?;
            child.encode_histogram::<Labels>(b.sum.as_secs_f64(), b.count, &buckets, None)?;
        }
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use MetricType::{Counter, Gauge};
        let e = &mut encoder;
        let frames = ("kplace_frames", "Frames processed by every stage", Counter);
        Self::family(e, frames, self.per_pipeline(|p| Num::Count(p.frames)))?;
        let partial = (
            "kplace_partial_frames",
            "Frames ended with packets missing",
            Counter,
        );
        Self::family(
            e,
            partial,
            self.per_pipeline(|p| Num::Count(p.partial_frames)),
        )?;
        let dropped = (
            "kplace_dropped_frames",
            "Frames dropped for want of a free slot",
            Counter,
        );
        Self::family(
            e,
            dropped,
            self.per_pipeline(|p| Num::Count(p.dropped_frames)),
        )?;
        let waits = (
            "kplace_slot_waits",
            "Times the source waited for a free slot",
            Counter,
        );
        Self::family(e, waits, self.per_pipeline(|p| Num::Count(p.slot_waits)))?;
        let rate = (
            "kplace_frame_rate",
            "Frames per second over the last interval",
            Gauge,
        );
        Self::family(e, rate, self.per_pipeline(|p| Num::Real(p.rate())))?;
        let cores = (
            "kplace_cores_used",
            "Cores the process used over the last interval",
            Gauge,
        );
        Self::family(e, cores, self.per_pipeline(|p| Num::Real(p.cores_used())))?;
        self.histograms(e)?;
        self.adaptation(e)?;
        let launches = (
            "kplace_stage_launches",
            "Launches of each stage ended",
            Counter,
        );
        Self::family(
            e,
            launches,
            self.per_stage(|s, p| Some(Num::Count(p.stages.get(s)?.launches))),
        )?;
        let busy = (
            "kplace_stage_busy_seconds",
            "Time each stage's launches took (for a GPU stage, to enqueue)",
            Counter,
        );
        Self::family(
            e,
            busy,
            self.per_stage(|s, p| Some(Num::Real(p.stages.get(s)?.busy.as_secs_f64()))),
        )?;
        let util = (
            "kplace_gpu_utilization_ratio",
            "GPU utilisation as NVML last read it",
            Gauge,
        );
        Self::family(
            e,
            util,
            self.per_gpu(|g| Some(Num::Real(f64::from(g.gpu_util_pct?) / 100.0))),
        )?;
        let memory = (
            "kplace_gpu_memory_used_bytes",
            "GPU memory in use as NVML last read it",
            Gauge,
        );
        Self::family(
            e,
            memory,
            self.per_gpu(|g| Some(Num::Count(g.memory_used_bytes?))),
        )?;
        self.ingest(e)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::StageTotals;
    use crate::progress::LatencyBuckets;
    use crate::telemetry::GpuNow;

    fn progress(frames: u64) -> Progress {
        let mut buckets = LatencyBuckets::default();
        for ns in [150_000, 150_000, 3_000_000, 20_000_000_000] {
            buckets.record(ns);
        }
        Progress {
            elapsed: Duration::from_secs(2),
            interval: Duration::from_secs(1),
            frames,
            interval_frames: 10,
            partial_frames: 1,
            interval_partial_frames: 0,
            dropped_frames: 2,
            interval_dropped_frames: 0,
            post_frame: Default::default(),
            cpu: Duration::from_millis(500),
            slot_waits: 3,
            gpus: vec![GpuNow {
                ordinal: 0,
                gpu_util_pct: Some(40),
                memory_used_bytes: None,
            }],
            stages: vec![
                StageTotals {
                    launches: 40,
                    busy: Duration::from_millis(250),
                },
                StageTotals::default(),
            ],
            post_frame_buckets: buckets,
            placement: None,
            switches: 0,
            last: false,
        }
    }

    #[test]
    fn a_scrape_holds_every_pipelines_latest_counts_in_openmetrics_text() {
        let board = Board::new(2, vec!["fft".into(), "power".into()]);
        assert_eq!(
            board.render(),
            "# EOF\n".replace("# EOF\n", &board.render())
        );
        board.post(0, &progress(5));
        board.post(0, &progress(12));
        board.post(7, &progress(99));
        let text = board.render();
        for line in [
            "# TYPE kplace_frames counter",
            "kplace_frames_total{pipeline=\"0\"} 12",
            "kplace_partial_frames_total{pipeline=\"0\"} 1",
            "kplace_dropped_frames_total{pipeline=\"0\"} 2",
            "kplace_slot_waits_total{pipeline=\"0\"} 3",
            "kplace_frame_rate{pipeline=\"0\"} 10.0",
            "kplace_cores_used{pipeline=\"0\"} 0.5",
            "# TYPE kplace_post_frame_latency_seconds histogram",
            "kplace_post_frame_latency_seconds_count{pipeline=\"0\"} 4",
            "kplace_post_frame_latency_seconds_bucket{le=\"0.0001\",pipeline=\"0\"} 0",
            "kplace_post_frame_latency_seconds_bucket{le=\"0.00025\",pipeline=\"0\"} 2",
            "kplace_post_frame_latency_seconds_bucket{le=\"0.005\",pipeline=\"0\"} 3",
            "kplace_post_frame_latency_seconds_bucket{le=\"10.0\",pipeline=\"0\"} 3",
            "kplace_post_frame_latency_seconds_bucket{le=\"+Inf\",pipeline=\"0\"} 4",
            "kplace_stage_launches_total{pipeline=\"0\",stage=\"fft\"} 40",
            "kplace_stage_launches_total{pipeline=\"0\",stage=\"power\"} 0",
            "kplace_stage_busy_seconds_total{pipeline=\"0\",stage=\"fft\"} 0.25",
            "kplace_gpu_utilization_ratio{pipeline=\"0\",gpu=\"0\"} 0.4",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        // The receiver's counters appear once it posts them.
        assert!(!text.contains("kplace_ingest_packets_total{"), "{text}");
        board.post_ingest(
            0,
            IngestTotals {
                packets: 70,
                bytes: 7000,
                classes: vec![("accepted", 64), ("late", 6)],
                frames: vec![("complete", 3), ("partial", 1)],
                restarts: 1,
            },
        );
        let text = board.render();
        for line in [
            "# TYPE kplace_ingest_packets counter",
            "kplace_ingest_packets_total{pipeline=\"0\"} 70",
            "kplace_ingest_bytes_total{pipeline=\"0\"} 7000",
            "kplace_ingest_classified_packets_total{pipeline=\"0\",class=\"accepted\"} 64",
            "kplace_ingest_classified_packets_total{pipeline=\"0\",class=\"late\"} 6",
            "kplace_ingest_frames_total{pipeline=\"0\",outcome=\"partial\"} 1",
            "kplace_ingest_restarts_total{pipeline=\"0\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        // Pipeline 1 has not reported; nothing is made up for it, nor for the unread memory.
        assert!(!text.contains("pipeline=\"1\""), "{text}");
        assert!(!text.contains("kplace_gpu_memory_used_bytes{"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_run_that_adapts_shows_its_switches_and_the_placement_it_runs() {
        let board = Board::new(2, vec!["fft".into()]);
        board.post(0, &progress(5));
        let adapting = Progress {
            placement: Some("all-cpu".into()),
            switches: 3,
            ..progress(4)
        };
        board.post(1, &adapting);
        let text = board.render();
        for line in [
            "# TYPE kplace_adapt_switches counter",
            "kplace_adapt_switches_total{pipeline=\"1\"} 3",
            "kplace_adapt_placement{pipeline=\"1\",placement=\"all-cpu\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        // A pipeline that does not adapt has neither.
        assert!(
            !text.contains("kplace_adapt_switches_total{pipeline=\"0\"}"),
            "{text}"
        );
    }
}
