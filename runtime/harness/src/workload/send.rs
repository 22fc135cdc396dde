//! What a sender sends: a recording's frames, or those the graph's workload prepares, with the
//! wire they go out on and the pace they are real-time at.
//!
//! `kplace send` streams frames to a receiver under test; which frames, and how fast by
//! default, depends on the workload, so it is decided here, for any workload kind a program
//! registers ([`Registry`]), and the sender itself ([`kplace_net::sender`]) only sees bytes.
//!
//! Guarantees: a [`SendFrames`] holds at least one frame, each one frame of its
//! [`WireShape`]'s bytes as the workload or recording gave them; nothing is sent here.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::kind::{KindError, Prepared, Registry, Request, WorkloadOptions};
use super::recording::{Recording, RecordingError};
use kplace_core::model::files::GraphFiles;
use kplace_core::model::graph::GraphError;
use kplace_net::sender::{FrameCount, Pacing};
use kplace_net::wire::WireShape;

/// The frames a sender sends, and their wire.
pub struct SendFrames {
    source: Source,
    shape: WireShape,
}

/// Where the frames come from.
enum Source {
    /// A recording's.
    Recorded(Recording),
    /// The graph's workload's, prepared for a replay.
    Workload {
        /// The graph file, for messages.
        graph: PathBuf,
        /// The workload, holding its frames.
        prepared: Box<dyn Prepared>,
    },
}

/// Why the frames, or their pace, cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SendFramesError {
    /// The recording cannot be read.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// The graph cannot be loaded.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The workload cannot be found or prepared.
    #[error(transparent)]
    Kind(#[from] KindError),
    /// The source tensor does not go on the wire (its message names the tensor).
    #[error("{0}")]
    Wire(kplace_net::wire::WireError),
    /// The workload prepared nothing to send.
    #[error("the workload prepared no frames to send")]
    NoFrames,
    /// No pace was given, and the workload has no real-time rate.
    #[error(
        "the workload of graph {} has no real-time rate: give --rate or --packet-interval",
        .0.display()
    )]
    NoRealTimeRate(PathBuf),
    /// No pace was given, and the recording states no sample rate.
    #[error(
        "recording {} states no sample rate: give --rate or --packet-interval",
        .0.display()
    )]
    NoSampleRate(PathBuf),
    /// A frame rate whose period is out of [`kplace_core::model::rate`]'s range.
    #[error(transparent)]
    Rate(#[from] kplace_core::model::rate::RateError),
    /// A packet interval, in microseconds, that is no duration.
    #[error("--packet-interval must be a duration from 0 (e.g. 50us), got {0} us")]
    PacketInterval(f64),
}

impl SendFrames {
    /// The frames of the recording at `recording` (which its SigMF metadata describes), or,
    /// without one, those the workload of `files`' graph prepares for a run of `count` frames
    /// with `options` and `seed`, looked up in `registry`.
    pub fn new(
        registry: &Registry,
        files: &GraphFiles,
        options: &WorkloadOptions,
        seed: u64,
        recording: Option<&Path>,
        count: FrameCount,
    ) -> Result<SendFrames, SendFramesError> {
        if let Some(path) = recording {
            let (recording, tensor) = Recording::load_described(path)?;
            let shape = WireShape::for_tensor(&tensor).map_err(SendFramesError::Wire)?;
            return Ok(SendFrames {
                source: Source::Recorded(recording),
                shape,
            });
        }
        let graph = files.shaped_graph()?;
        let shape = WireShape::for_source(&graph).map_err(SendFramesError::Wire)?;
        let request = Request {
            files,
            options,
            recording: None,
            seed,
            frames: match count {
                FrameCount::Frames(n) => n,
                FrameCount::Duration(_) => u64::MAX,
            },
            pipelines: 0,
            replay: true,
        };
        let prepared_at = Instant::now();
        let prepared = registry.kind_for(&request)?.prepare(&request)?;
        tracing::info!(
            "kplace send: {} prepared in {:.2} s",
            prepared.workload().describe(),
            prepared_at.elapsed().as_secs_f64()
        );
        if prepared.workload().frames().is_none() {
            return Err(SendFramesError::NoFrames);
        }
        Ok(SendFrames {
            source: Source::Workload {
                graph: files.graph_path().to_path_buf(),
                prepared,
            },
            shape,
        })
    }

    /// The wire the frames go out on.
    pub fn shape(&self) -> WireShape {
        self.shape
    }

    /// The frames, each one frame of [`SendFrames::shape`]'s bytes: a recording's, or the
    /// distinct frames the workload prepared (a run cycles through them).
    pub fn frames(&self) -> &[Vec<u8>] {
        match &self.source {
            Source::Recorded(recording) => &recording.frames,
            // `new` refused a workload that prepared none.
            Source::Workload { prepared, .. } => prepared.workload().frames().map_or(&[], |f| f),
        }
    }

    /// The real-time interval between packets: the workload's real-time frame period over its
    /// packets (the radar's chirp interval), or one packet's elements per channel at the
    /// recording's sample rate per channel.
    pub fn default_interval(&self) -> Result<Duration, SendFramesError> {
        packet_interval(self.default_seconds()?)
    }

    /// The pacing asked for: a `burst`; else `rate` frames per second; else a packet every
    /// `packet_interval_us` microseconds; else every [`SendFrames::default_interval`].
    pub fn pacing(
        &self,
        burst: bool,
        rate: Option<f64>,
        packet_interval_us: Option<f64>,
    ) -> Result<Pacing, SendFramesError> {
        if burst {
            return Ok(Pacing::Burst);
        }
        if let Some(rate) = rate {
            return Ok(Pacing::FrameRate(kplace_core::model::rate::frame_rate(
                "--rate", rate,
            )?));
        }
        let seconds = match packet_interval_us {
            Some(us) => us / 1e6,
            None => self.default_seconds()?,
        };
        packet_interval(seconds).map(Pacing::PacketInterval)
    }

    /// [`SendFrames::default_interval`] in seconds, not yet checked to be a duration.
    fn default_seconds(&self) -> Result<f64, SendFramesError> {
        match &self.source {
            Source::Workload { graph, prepared } => {
                let Some(period) = prepared.workload().real_time_period() else {
                    return Err(SendFramesError::NoRealTimeRate(graph.clone()));
                };
                Ok(period.as_secs_f64() / f64::from(self.shape.packets))
            }
            Source::Recorded(recording) => {
                let Some(rate) = recording.sample_rate else {
                    return Err(SendFramesError::NoSampleRate(recording.path.clone()));
                };
                // A packet holds its elements' share of every channel sampled at once.
                Ok(f64::from(self.shape.elements) / recording.channels.max(1) as f64 / rate)
            }
        }
    }
}

/// `seconds` between packets as a duration, if it is one.
fn packet_interval(seconds: f64) -> Result<Duration, SendFramesError> {
    Duration::try_from_secs_f64(seconds).map_err(|_| SendFramesError::PacketInterval(seconds * 1e6))
}

impl fmt::Display for SendFrames {
    /// What is sent, for the log: `recording x.sigmf-data (4 frames of 16 packets)`, or the
    /// workload's description with its distinct frames and their shape.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Recorded(recording) => write!(
                f,
                "recording {} ({} frames of {} packets)",
                recording.path.display(),
                recording.frames.len(),
                self.shape.packets
            ),
            Source::Workload { prepared, .. } => {
                let workload = prepared.workload();
                write!(
                    f,
                    "{} ({} distinct frames of {})",
                    workload.describe(),
                    self.frames().len(),
                    workload.shape()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::workload::kind::{KindOptions, OptionSpec, ResultsFiles, SweepWords, WorkloadKind};
    use crate::workload::recording::write;
    use crate::workload::{Judge, JudgeError, Workload};
    use kplace_core::model::graph::{Graph, Overrides};
    use kplace_core::model::placement::Placement;

    /// A graph of 4 packets of 8 ci16 elements, naming `workload` if given.
    const GRAPH: &str = "name: g\ndims: {N: 8, M: 4}\nsource: {tensor: x, packet_axis: 0}\n\
         tensors:\n  - {name: x, dtype: ci16, shape: [M, N]}\n  - {name: y, dtype: f32, shape: [M, N]}\n\
         stages:\n  - {name: s, kernel: k, inputs: [x], outputs: [y]}\nsinks: [y]\n";

    /// A workload of two frames of 4x8 ci16 elements, real-time at `period` if any.
    struct Fake {
        frames: Arc<[Vec<u8>]>,
        period: Option<Duration>,
    }

    impl Workload for Fake {
        fn describe(&self) -> String {
            "the fake scene".into()
        }
        fn shape(&self) -> kplace_core::model::shape::FrameShape {
            "8x4".parse().unwrap()
        }
        fn frame_bytes(&self) -> u64 {
            128
        }
        fn frames(&self) -> Option<&Arc<[Vec<u8>]>> {
            Some(&self.frames).filter(|f| !f.is_empty())
        }
        fn real_time_period(&self) -> Option<Duration> {
            self.period
        }
        fn judge(
            &self,
            _: u64,
            _: Option<Box<dyn std::io::Write + Send>>,
        ) -> Result<Box<dyn Judge>, JudgeError> {
            Err(JudgeError::Output {
                frame: 0,
                why: "not judged".into(),
            })
        }
    }

    impl Prepared for Fake {
        fn workload(&self) -> &dyn Workload {
            self
        }
        fn load(&self) -> Result<(Graph, Placement), KindError> {
            Err(KindError::Kind("not loaded".into()))
        }
        fn load_as(&self, _: &Placement) -> Result<(Graph, Placement), KindError> {
            self.load()
        }
    }

    /// The kind `fake`: its `frames` option is how many it prepares, `period-us` its period.
    struct FakeKind;

    impl KindOptions for FakeKind {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn about(&self) -> &'static str {
            "a test kind"
        }
        fn options(&self) -> &'static [OptionSpec] {
            &[
                OptionSpec {
                    name: "frames",
                    value: "N",
                    help: "",
                    repeatable: false,
                    flag: false,
                },
                OptionSpec {
                    name: "period-us",
                    value: "US",
                    help: "",
                    repeatable: false,
                    flag: false,
                },
            ]
        }
    }
    impl ResultsFiles for FakeKind {}
    impl SweepWords for FakeKind {}
    impl WorkloadKind for FakeKind {
        fn prepare(&self, request: &Request<'_>) -> Result<Box<dyn Prepared>, KindError> {
            assert!(request.replay && request.recording.is_none());
            let count: u8 = request.options.parse("frames")?.unwrap_or(2);
            Ok(Box::new(Fake {
                frames: (0..count).map(|i| vec![i; 128]).collect(),
                period: request
                    .options
                    .parse("period-us")?
                    .map(Duration::from_micros),
            }))
        }
    }

    fn files(dir: &Path, workload: Option<&str>) -> GraphFiles {
        let graph = dir.join("g.yaml");
        let named = workload.map_or(String::new(), |w| format!("workload: {w}\n"));
        std::fs::write(&graph, format!("{named}{GRAPH}")).unwrap();
        let placement = Placement::parse("name: none\nstages: {}\n", Path::new("p.yaml"));
        GraphFiles::new(
            kplace_core::model::graph::GraphSource::read(&graph).unwrap(),
            placement.unwrap(),
        )
    }

    fn options(pairs: &[(&str, &str)]) -> WorkloadOptions {
        let mut o = WorkloadOptions::default();
        for (n, v) in pairs {
            o.push(*n, *v);
        }
        o
    }

    fn workload(dir: &Path, given: &[(&str, &str)]) -> Result<SendFrames, SendFramesError> {
        SendFrames::new(
            &Registry::new().register(FakeKind),
            &files(dir, Some("fake")),
            &options(given),
            1,
            None,
            FrameCount::Frames(10),
        )
    }

    #[test]
    fn a_workloads_frames_go_at_its_real_time_pace_unless_told_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let frames = workload(dir.path(), &[("period-us", "400")]).unwrap();
        assert_eq!(frames.shape(), WireShape::ci16(8, 4));
        assert_eq!(frames.frames(), &[vec![0; 128], vec![1; 128]][..]);
        assert_eq!(
            frames.to_string(),
            "the fake scene (2 distinct frames of 8x4)"
        );
        assert_eq!(
            frames.default_interval().unwrap(),
            Duration::from_micros(100)
        );
        let pacing = |burst, rate, us| frames.pacing(burst, rate, us).map_err(|e| e.to_string());
        assert_eq!(
            pacing(false, None, None),
            Ok(Pacing::PacketInterval(Duration::from_micros(100)))
        );
        assert_eq!(
            pacing(false, None, Some(20.0)),
            Ok(Pacing::PacketInterval(Duration::from_micros(20)))
        );
        assert_eq!(pacing(false, Some(50.0), None), Ok(Pacing::FrameRate(50.0)));
        assert_eq!(pacing(true, None, None), Ok(Pacing::Burst));
        for rate in [0.0, 1e-300, 1e30] {
            let e = pacing(false, Some(rate), None).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "--rate {rate:?} is out of range: a frame rate must be from"
                )),
                "{e}"
            );
        }
        assert_eq!(
            pacing(false, None, Some(-5.0)),
            Err("--packet-interval must be a duration from 0 (e.g. 50us), got -5 us".into())
        );

        let timeless = workload(dir.path(), &[]).unwrap();
        let e = timeless.default_interval().unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "the workload of graph {} has no real-time rate: give --rate or --packet-interval",
                dir.path().join("g.yaml").display()
            )
        );
        assert_eq!(
            timeless.pacing(false, Some(5.0), None).unwrap(),
            Pacing::FrameRate(5.0)
        );
    }

    #[test]
    fn a_workload_that_cannot_give_frames_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = workload(dir.path(), &[("frames", "0")]).err().unwrap();
        assert_eq!(e.to_string(), "the workload prepared no frames to send");
        let e = workload(dir.path(), &[("pfa", "1")]).err().unwrap();
        assert!(
            e.to_string().contains("is not an option of workload fake"),
            "{e}"
        );
        let e = SendFrames::new(
            &Registry::new(),
            &files(dir.path(), None),
            &WorkloadOptions::default(),
            1,
            None,
            FrameCount::Duration(Duration::from_secs(1)),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("names no workload"), "{e}");
    }

    #[test]
    fn a_recordings_frames_go_at_its_sample_rate() {
        let dir = tempfile::tempdir().unwrap();
        let graph = Graph::parse(GRAPH, Path::new("g.yaml"), &Overrides::default()).unwrap();
        let frames = vec![vec![7u8; 128]; 3];
        let timed = dir.path().join("timed.sigmf-data");
        write(&timed, &graph, &frames, Some(1e6), "test").unwrap();
        let load = |path: &Path| {
            SendFrames::new(
                &Registry::new(),
                &files(dir.path(), None),
                &WorkloadOptions::default(),
                1,
                Some(path),
                FrameCount::Frames(1),
            )
        };
        let sent = load(&timed).unwrap();
        assert_eq!(sent.shape(), WireShape::ci16(8, 4));
        assert_eq!(sent.frames(), &frames[..]);
        assert_eq!(
            sent.to_string(),
            format!("recording {} (3 frames of 4 packets)", timed.display())
        );
        assert_eq!(sent.default_interval().unwrap(), Duration::from_micros(8));

        let untimed = dir.path().join("untimed.sigmf-data");
        write(&untimed, &graph, &frames, None, "test").unwrap();
        let e = load(&untimed).unwrap().default_interval().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "recording {} states no sample rate: give --rate or --packet-interval",
                untimed.display()
            )
        );
        let e = load(&dir.path().join("none.sigmf-data")).err().unwrap();
        assert!(matches!(e, SendFramesError::Recording(_)), "{e}");
    }
}
