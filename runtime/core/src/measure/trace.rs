//! A run's timeline: what each thread did for each frame, as spans, written as Chrome trace
//! events (`kplace run --trace FILE.json`), which Perfetto and `chrome://tracing` open.
//!
//! The executor records, when asked (`RunOptions::trace`): each frame's packets arriving (the
//! source track, first packet to last), every launch of a CPU stage on its worker, every
//! enqueue of a GPU stage's launch and its fence on the worker that made them, the GPU stage's
//! host callback (on the driver's thread), each wait of the source for a free slot, and each
//! frame's delivery to the sink (the collector track). With GPU profiling on
//! (`RunOptions::profile_gpu`) it also records what each GPU stream ran, from the timing
//! events around each launch (with its uploads) and around the downloads: one track per GPU
//! stage and frame slot (a stream each). Those times are the device's; they are placed on the
//! run's clock by the stage's host callback, which runs once the downloads are done, so they
//! show at most the callback's delay (tens of microseconds) late. Every span carries its frame
//! id. A traced run's launches and enqueues are also NVTX ranges when an NVTX library loads
//! ([`super::nvtx`]).
//!
//! # Guarantees
//! - Off, nothing is recorded and nothing allocated: the executor checks one flag per launch.
//! - On, each thread appends to a buffer of its own, merged when the run ends; the spans of
//!   one run are bounded by [`MAX_SPANS`], past which spans are counted, not kept.
//! - Times are nanoseconds on the run's own clock (from its start), the clock of its latency
//!   figures.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

/// The most spans a run keeps (about 40 bytes each): enough for 100,000 frames of a
/// ten-launch plan.
pub const MAX_SPANS: usize = 4_000_000;

/// The most bytes a trace file is read for (`kplace plot-trace`): 1 GiB, over 256 bytes for
/// each of [`MAX_SPANS`] spans, more than any trace kplace writes.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

/// What a span is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpanKind {
    /// A frame's packets arriving: first to last.
    Packets,
    /// A CPU stage's launch, run on a worker.
    Launch,
    /// A GPU stage's launch enqueued on its stream by a worker (the host's part).
    Enqueue,
    /// A GPU stage's fence: its downloads, event and host callback enqueued.
    Fence,
    /// A GPU stage's host callback: the GPU finished the stage's work.
    Callback,
    /// The source waiting for a free slot.
    SlotWait,
    /// A frame handed to the sink.
    Deliver,
    /// A GPU stage's launch as its stream ran it, uploads included (profiling only).
    GpuLaunch,
    /// A GPU stage's downloads as its stream ran them (profiling only).
    Download,
    /// A run that adapts moved new frames to another placement (its lane), after this frame.
    Switch,
}

impl SpanKind {
    const ALL: [SpanKind; 10] = [
        SpanKind::Packets,
        SpanKind::Launch,
        SpanKind::Enqueue,
        SpanKind::Fence,
        SpanKind::Callback,
        SpanKind::SlotWait,
        SpanKind::Deliver,
        SpanKind::GpuLaunch,
        SpanKind::Download,
        SpanKind::Switch,
    ];

    fn category(self) -> &'static str {
        match self {
            SpanKind::Packets => "packets",
            SpanKind::Launch => "launch",
            SpanKind::Enqueue => "enqueue",
            SpanKind::Fence => "fence",
            SpanKind::Callback => "callback",
            SpanKind::SlotWait => "slot_wait",
            SpanKind::Deliver => "deliver",
            SpanKind::GpuLaunch => "gpu_launch",
            SpanKind::Download => "download",
            SpanKind::Switch => "switch",
        }
    }
}

/// Which thread a span ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Track {
    /// The source thread.
    Source,
    /// Worker `n`.
    Worker(u32),
    /// The GPU driver's callback thread.
    Driver,
    /// The collector (the calling thread).
    Collector,
    /// The GPU stream of stage `stage` in frame slot `slot` (as the device ran it).
    Stream {
        /// The stage's index.
        stage: u32,
        /// The frame slot's index.
        slot: u32,
    },
}

/// Where stream tracks' ids begin: `STREAMS + stage * 1000 + slot`.
const STREAMS: u32 = 1_000_000;

impl Track {
    fn from_id(id: u32) -> Option<Track> {
        match id {
            1 => Some(Track::Source),
            2 => Some(Track::Collector),
            3 => Some(Track::Driver),
            n if n >= STREAMS => Some(Track::Stream {
                stage: (n - STREAMS) / 1000,
                slot: (n - STREAMS) % 1000,
            }),
            n if n >= 10 => Some(Track::Worker(n - 10)),
            _ => None,
        }
    }

    fn id(self) -> u32 {
        match self {
            Track::Source => 1,
            Track::Collector => 2,
            Track::Driver => 3,
            Track::Worker(n) => 10 + n,
            Track::Stream { stage, slot } => STREAMS + stage * 1000 + slot % 1000,
        }
    }

    /// The track's name in a trace viewer; `stages` names a stream's stage.
    pub fn name(self, stages: &[String]) -> String {
        match self {
            Track::Source => "source".into(),
            Track::Collector => "collector".into(),
            Track::Driver => "GPU callbacks".into(),
            Track::Worker(n) => format!("worker {n}"),
            Track::Stream { stage, slot } => format!(
                "GPU stream {} (slot {slot})",
                stages.get(stage as usize).map_or("?", String::as_str)
            ),
        }
    }
}

/// One span of a run's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// What it is.
    pub kind: SpanKind,
    /// Where it ran.
    pub track: Track,
    /// The frame id the source gave the frame.
    pub frame: u64,
    /// The stage, for launches, enqueues, fences and callbacks.
    pub stage: Option<u32>,
    /// The launch (tile) of the stage, for launches and enqueues.
    pub launch: Option<u32>,
    /// In a run that adapts: the placement (by index) a delivered frame ran on, or a switch
    /// moved to.
    pub lane: Option<u32>,
    /// Start, ns on the run's clock.
    pub start_ns: u64,
    /// End, ns on the run's clock (the start for an instant).
    pub end_ns: u64,
}

impl Span {
    /// A span of frame `frame` on `track` from `start_ns` to `end_ns` (the same for an
    /// instant), of no stage.
    pub fn new(kind: SpanKind, track: Track, frame: u64, start_ns: u64, end_ns: u64) -> Span {
        Span {
            kind,
            track,
            frame,
            stage: None,
            launch: None,
            lane: None,
            start_ns,
            end_ns,
        }
    }

    /// The span, of placement `lane` in a run that adapts.
    pub fn on_lane(self, lane: u32) -> Span {
        Span {
            lane: Some(lane),
            ..self
        }
    }

    /// The span, of stage `stage` (and its launch `launch`, if one).
    pub fn of_stage(self, stage: u32, launch: Option<u32>) -> Span {
        Span {
            stage: Some(stage),
            launch,
            ..self
        }
    }
}

/// A thread's spans, bounded by a share of [`MAX_SPANS`].
#[derive(Debug, Default)]
pub struct SpanBuffer {
    spans: Vec<Span>,
    limit: usize,
    dropped: u64,
}

impl SpanBuffer {
    /// A buffer keeping at most `limit` spans.
    pub fn new(limit: usize) -> SpanBuffer {
        SpanBuffer {
            spans: Vec::new(),
            limit,
            dropped: 0,
        }
    }

    /// Keeps `span`, or counts it past the limit.
    pub fn push(&mut self, span: Span) {
        if self.spans.len() < self.limit {
            self.spans.push(span);
        } else {
            self.dropped += 1;
        }
    }
}

/// A run's timeline: every span kept, the stages' names, and how many spans were not kept.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Trace {
    /// Every span, in no particular order.
    pub spans: Vec<Span>,
    /// Stage names, by stage index.
    pub stages: Vec<String>,
    /// In a run that adapts: its placements' names, by lane.
    pub placements: Vec<String>,
    /// Spans past [`MAX_SPANS`], counted only.
    pub dropped_spans: u64,
}

impl Trace {
    /// The trace of `buffers`, for a plan whose stages are `stages`.
    pub fn merge(buffers: impl IntoIterator<Item = SpanBuffer>, stages: Vec<String>) -> Trace {
        let mut trace = Trace {
            stages,
            ..Trace::default()
        };
        for b in buffers {
            trace.spans.extend(b.spans);
            trace.dropped_spans += b.dropped;
        }
        trace.spans.sort_by_key(|s| (s.start_ns, s.end_ns));
        trace
    }

    /// Writes the trace as Chrome trace events (JSON object format): a complete event (`X`)
    /// per span, an instant (`i`) for a callback or a delivery, and a name per thread.
    pub fn write_chrome(&self, out: &mut impl Write) -> io::Result<()> {
        let mut tracks: Vec<Track> = self.spans.iter().map(|s| s.track).collect();
        tracks.sort();
        tracks.dedup();
        let mut events: Vec<ChromeEvent> = tracks
            .iter()
            .map(|t| ChromeEvent {
                name: "thread_name".into(),
                cat: "",
                ph: "M",
                ts: 0.0,
                dur: None,
                s: None,
                pid: 1,
                tid: t.id(),
                args: ChromeArgs {
                    name: Some(t.name(&self.stages)),
                    ..ChromeArgs::default()
                },
            })
            .collect();
        for span in &self.spans {
            let stage = span
                .stage
                .map(|s| self.stages.get(s as usize).map_or("?", String::as_str));
            let placement = span
                .lane
                .map(|l| self.placements.get(l as usize).map_or("?", String::as_str));
            let name = match (span.kind, stage) {
                (SpanKind::Launch, Some(stage)) => stage.to_string(),
                (SpanKind::Enqueue, Some(stage)) => format!("{stage} enqueue"),
                (SpanKind::Fence, Some(stage)) => format!("{stage} fence"),
                (SpanKind::Callback, Some(stage)) => format!("{stage} done on GPU"),
                (SpanKind::GpuLaunch, Some(stage)) => format!("{stage} on GPU"),
                (SpanKind::Download, Some(stage)) => format!("{stage} download"),
                (SpanKind::Packets, _) => format!("frame {} packets", span.frame),
                (SpanKind::Deliver, _) => format!("frame {} done", span.frame),
                (SpanKind::SlotWait, _) => "wait for a slot".into(),
                (SpanKind::Switch, _) => format!("switch to {}", placement.unwrap_or("?")),
                (kind, None) => kind.category().into(),
            };
            let instant = matches!(
                span.kind,
                SpanKind::Callback | SpanKind::Deliver | SpanKind::Switch
            );
            events.push(ChromeEvent {
                name,
                cat: span.kind.category(),
                ph: if instant { "i" } else { "X" },
                ts: span.start_ns as f64 / 1e3,
                dur: (!instant).then(|| span.end_ns.saturating_sub(span.start_ns) as f64 / 1e3),
                s: instant.then_some("t"),
                pid: 1,
                tid: span.track.id(),
                args: ChromeArgs {
                    name: None,
                    frame: Some(span.frame),
                    stage: stage.map(str::to_string),
                    launch: span.launch,
                    placement: placement.map(str::to_string),
                },
            });
        }
        serde_json::to_writer(
            &mut *out,
            &ChromeTrace {
                trace_events: events,
                display_time_unit: "ms",
                dropped_spans: self.dropped_spans,
            },
        )
        .map_err(io::Error::other)?;
        out.flush()
    }
}

/// Why a trace file could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum TraceReadError {
    /// Not JSON, or not Chrome trace events.
    #[error("{origin}: not a kplace trace: {source}")]
    Json {
        /// The file.
        origin: String,
        /// The parser's error, with line and column.
        source: serde_json::Error,
    },
    /// An event this writer never writes.
    #[error("{origin}: traceEvents[{index}]: {why}")]
    Event {
        /// The file.
        origin: String,
        /// The event's place.
        index: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl Trace {
    /// Reads back a trace [`Trace::write_chrome`] wrote (`origin` names it in errors): every
    /// span, with the stages named in it, in the order first seen.
    pub fn read_chrome(text: &str, origin: &str) -> Result<Trace, TraceReadError> {
        let file: ChromeTraceIn =
            serde_json::from_str(text).map_err(|source| TraceReadError::Json {
                origin: origin.to_string(),
                source,
            })?;
        let mut trace = Trace {
            dropped_spans: file.dropped_spans,
            ..Trace::default()
        };
        for (index, e) in file.trace_events.into_iter().enumerate() {
            if e.ph == "M" {
                continue;
            }
            let bad = |why: String| TraceReadError::Event {
                origin: origin.to_string(),
                index,
                why,
            };
            let kind = SpanKind::ALL
                .into_iter()
                .find(|k| k.category() == e.cat)
                .ok_or_else(|| bad(format!("unknown category {:?}", e.cat)))?;
            let track =
                Track::from_id(e.tid).ok_or_else(|| bad(format!("unknown tid {}", e.tid)))?;
            let stage = e.args.stage.map(|name| {
                let at = trace.stages.iter().position(|s| *s == name);
                at.unwrap_or_else(|| {
                    trace.stages.push(name);
                    trace.stages.len() - 1
                }) as u32
            });
            let lane = e.args.placement.map(|name| {
                let at = trace.placements.iter().position(|p| *p == name);
                at.unwrap_or_else(|| {
                    trace.placements.push(name);
                    trace.placements.len() - 1
                }) as u32
            });
            let start_ns = (e.ts * 1e3).round() as u64;
            trace.spans.push(Span {
                kind,
                track,
                frame: e.args.frame.ok_or_else(|| bad("no args.frame".into()))?,
                stage,
                launch: e.args.launch,
                lane,
                start_ns,
                end_ns: start_ns + (e.dur.unwrap_or(0.0) * 1e3).round() as u64,
            });
        }
        Ok(trace)
    }
}

#[derive(Deserialize)]
struct ChromeTraceIn {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<ChromeEventIn>,
    #[serde(rename = "kplaceDroppedSpans", default)]
    dropped_spans: u64,
}

#[derive(Deserialize)]
struct ChromeEventIn {
    cat: String,
    ph: String,
    ts: f64,
    dur: Option<f64>,
    tid: u32,
    #[serde(default)]
    args: ChromeArgsIn,
}

#[derive(Default, Deserialize)]
struct ChromeArgsIn {
    frame: Option<u64>,
    stage: Option<String>,
    launch: Option<u32>,
    placement: Option<String>,
}

#[derive(Serialize)]
struct ChromeTrace {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<ChromeEvent>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "kplaceDroppedSpans")]
    dropped_spans: u64,
}

#[derive(Serialize)]
struct ChromeEvent {
    name: String,
    cat: &'static str,
    ph: &'static str,
    /// Microseconds.
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    pid: u32,
    tid: u32,
    args: ChromeArgs,
}

#[derive(Default, Serialize)]
struct ChromeArgs {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    launch: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_past_the_limit_are_counted_and_the_json_names_every_thread() {
        let mut b = SpanBuffer::new(2);
        let span = |kind, track, start| Span {
            kind,
            track,
            frame: 7,
            stage: Some(0),
            launch: Some(1),
            lane: None,
            start_ns: start,
            end_ns: start + 1500,
        };
        b.push(span(SpanKind::Launch, Track::Worker(0), 3000));
        // An instant: it ends where it starts.
        b.push(Span {
            end_ns: 9000,
            ..span(SpanKind::Deliver, Track::Collector, 9000)
        });
        b.push(span(SpanKind::Launch, Track::Worker(1), 1000));
        let trace = Trace::merge([b], vec!["range_fft".into()]);
        assert_eq!((trace.spans.len(), trace.dropped_spans), (2, 1));
        let mut out = Vec::new();
        trace.write_chrome(&mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["worker 0", "collector"]);
        let launch = events.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(launch["name"], "range_fft");
        assert_eq!(
            (launch["ts"].as_f64(), launch["dur"].as_f64()),
            (Some(3.0), Some(1.5))
        );
        assert_eq!(launch["args"]["frame"], 7);
        let done = events.iter().find(|e| e["ph"] == "i").unwrap();
        assert_eq!(done["name"], "frame 7 done");
        assert_eq!(json["kplaceDroppedSpans"], 1);

        let back = Trace::read_chrome(std::str::from_utf8(&out).unwrap(), "t.json").unwrap();
        assert_eq!(back, trace, "what is written reads back");
        let e = Trace::read_chrome("{\"traceEvents\": 3}", "t.json").unwrap_err();
        assert!(
            e.to_string().starts_with("t.json: not a kplace trace"),
            "{e}"
        );
        let e = Trace::read_chrome(
            r#"{"traceEvents": [{"cat": "x", "ph": "X", "ts": 1, "tid": 1, "args": {"frame": 0}}]}"#,
            "t.json",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("traceEvents[0]: unknown category"),
            "{e}"
        );
    }
}
