//! Typed requests for child `kplace` processes: what a library asks of a child it starts, as
//! a value the binary turns into its own subcommand's options, never as a command line.
//!
//! A library that starts `kplace` again (a pipeline per process, a sweep's receiver and
//! sender, a co-tenant) builds a [`ChildSpec`] and runs [`command`]: the binary's hidden
//! subcommand [`SUBCOMMAND`] takes the spec's [`ChildSpec::KIND`] and its JSON, and builds
//! the options of the subcommand it stands for from the spec's typed fields (a renamed field
//! fails to compile there, and the binary's round-trip tests compare each spec with the
//! command line it stands for). So no library names a flag of the binary.
//!
//! The spec travels as an argument, not on stdin or in a file: nothing is written to a child
//! that may already be gone, and nothing is left behind when it is killed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kplace_core::model::shape::FrameShape;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::several::PipelineMode;

/// The binary's hidden subcommand that runs a spec: `kplace child KIND JSON`.
pub const SUBCOMMAND: &str = "child";

/// A request for a child `kplace` process, serialized to JSON on its command line.
pub trait ChildSpec: Serialize + DeserializeOwned {
    /// The spec's name on the child's command line, which the binary dispatches on.
    const KIND: &'static str;
}

/// Why a spec could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ChildSpecError {
    /// The spec could not be written as JSON (a path that is not UTF-8).
    #[error("cannot pass a {kind} request to a child process: {source}")]
    Write {
        /// The spec's kind.
        kind: &'static str,
        /// What JSON said.
        #[source]
        source: serde_json::Error,
    },
    /// The JSON on the command line is not a spec of this kind.
    #[error("not a {kind} request: {source}")]
    Read {
        /// The spec's kind.
        kind: &'static str,
        /// What JSON said.
        #[source]
        source: serde_json::Error,
    },
}

/// The arguments after the program's name that run `spec`: [`SUBCOMMAND`], its kind, its JSON.
pub fn args<S: ChildSpec>(spec: &S) -> Result<[String; 3], ChildSpecError> {
    let json = serde_json::to_string(spec).map_err(|source| ChildSpecError::Write {
        kind: S::KIND,
        source,
    })?;
    Ok([SUBCOMMAND.to_string(), S::KIND.to_string(), json])
}

/// The command that runs `spec` with the `kplace` executable `exe`.
pub fn command<S: ChildSpec>(exe: &Path, spec: &S) -> Result<Command, ChildSpecError> {
    let mut command = Command::new(exe);
    command.args(args(spec)?);
    Ok(command)
}

/// The spec of kind `S` in `json` (what [`args`] wrote).
pub fn parse<S: ChildSpec>(json: &str) -> Result<S, ChildSpecError> {
    serde_json::from_str(json).map_err(|source| ChildSpecError::Read {
        kind: S::KIND,
        source,
    })
}

/// Whose frames a child runs or sends: the graph's workload's, or a recording's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildFrames {
    /// The graph's workload generates them.
    Workload {
        /// The seed of what it generates.
        seed: u64,
        /// Its options, NAME=VALUE pairs in order.
        options: Vec<(String, String)>,
    },
    /// A recording's frames.
    Recording {
        /// The recording.
        path: PathBuf,
        /// What a run checks every frame against, as the run's check option writes it
        /// (`reference:PLACEMENT`, `golden:DIR`, `none`); `None`: the run's default. A
        /// sender ignores it.
        check: Option<String>,
    },
}

/// `kplace run`, one receiver (or several pipelines of one) on a UDP stream: what a sweep
/// starts for each trial. A field left `None` (or empty) takes the run's default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunChild {
    /// The graph file.
    pub graph: PathBuf,
    /// The placement; `None`: the run's default.
    pub placement: Option<PathBuf>,
    /// Placements to adapt to, in order of preference after `placement`.
    pub adapt: Vec<PathBuf>,
    /// The latency budget the adaptation judges frames against.
    pub budget: Option<Duration>,
    /// Run several pipelines even where the cost model says they do not fit.
    pub force: bool,
    /// The source frame's shape.
    #[serde(with = "shape_text")]
    pub shape: Option<FrameShape>,
    /// Whose frames; `None`: the workload's, at the run's default seed.
    pub frames_of: Option<ChildFrames>,
    /// Frames expected; `None`: the run's default.
    pub frames: Option<u64>,
    /// Warm-up frames, left out of the figures.
    pub warmup_frames: u64,
    /// Where the run writes its report.
    pub report: Option<PathBuf>,
    /// Where the run says it takes packets.
    pub ready_file: Option<PathBuf>,
    /// Pipelines, and how they run.
    pub pipelines: u64,
    /// How several pipelines run.
    pub pipeline_mode: PipelineMode,
    /// The stream's rate, frames/s, which sizes `slots: auto`.
    pub stream_rate: Option<f64>,
    /// The UDP address the receiver binds (port 0: an ephemeral one its ready file tells).
    pub udp: SocketAddr,
    /// A frame that receives no packet for this long ends as partial; `None`: the default.
    pub frame_timeout: Option<Duration>,
    /// Stop when no packet arrives for this long; `None`: the default.
    pub idle_timeout: Option<Duration>,
    /// Stop when no packet at all arrives this long after the receiver is ready.
    pub start_timeout: Option<Duration>,
    /// Receive and assemble frames without processing them.
    pub ingest_only: bool,
}

impl ChildSpec for RunChild {
    const KIND: &'static str = "run";
}

impl RunChild {
    /// A receiver of `graph`'s frames on `udp`, every other field at the run's default.
    pub fn new(graph: PathBuf, udp: SocketAddr) -> RunChild {
        RunChild {
            graph,
            placement: None,
            adapt: Vec::new(),
            budget: None,
            force: false,
            shape: None,
            frames_of: None,
            frames: None,
            warmup_frames: 0,
            report: None,
            ready_file: None,
            pipelines: 1,
            pipeline_mode: PipelineMode::Thread,
            stream_rate: None,
            udp,
            frame_timeout: None,
            idle_timeout: None,
            start_timeout: None,
            ingest_only: false,
        }
    }
}

/// How a sender paces its frames.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pace {
    /// As fast as the socket takes packets.
    Burst,
    /// At a frame rate.
    Rate {
        /// Frames per second.
        frames_per_s: f64,
        /// How often the sender wakes to send what is due; `None`: the default.
        tick: Option<Duration>,
    },
}

/// `kplace send`: a workload's (or a recording's) frames to a receiver, as a sweep sends
/// them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SendChild {
    /// Where to send.
    pub dest: SocketAddr,
    /// The graph whose workload generates the frames; `None`: the sender's default.
    pub graph: Option<PathBuf>,
    /// The source frame's shape (ignored for a recording).
    #[serde(with = "shape_text")]
    pub shape: Option<FrameShape>,
    /// Whose frames; `None`: the workload's, at the default seed.
    pub frames_of: Option<ChildFrames>,
    /// The pace.
    pub pace: Pace,
    /// Frames to send.
    pub frames: u64,
    /// The sending thread's nice value; `None`: the default.
    pub nice: Option<i32>,
    /// Where to write each frame's send times.
    pub times: Option<PathBuf>,
    /// Where to write the sender's report.
    pub report: Option<PathBuf>,
}

impl ChildSpec for SendChild {
    const KIND: &'static str = "send";
}

/// A frame shape as text (`1024x128`), as people and tables write it.
mod shape_text {
    use kplace_core::model::shape::FrameShape;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(shape: &Option<FrameShape>, s: S) -> Result<S::Ok, S::Error> {
        match shape {
            Some(shape) => s.serialize_some(&shape.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<FrameShape>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| text.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_travels_as_its_kind_and_json_and_reads_back_equal() {
        let mut spec = RunChild::new("g.yaml".into(), "127.0.0.1:0".parse().unwrap());
        spec.shape = Some("1024x128".parse().unwrap());
        spec.budget = Some(Duration::from_micros(1500));
        spec.frames_of = Some(ChildFrames::Workload {
            seed: 7,
            options: vec![("pfa".into(), "1e-6".into())],
        });
        let [sub, kind, json] = args(&spec).unwrap();
        assert_eq!((sub.as_str(), kind.as_str()), (SUBCOMMAND, "run"));
        assert!(json.contains("\"shape\":\"1024x128\""), "{json}");
        assert_eq!(parse::<RunChild>(&json).unwrap(), spec);
        let e = parse::<SendChild>(&json).unwrap_err().to_string();
        assert!(e.starts_with("not a send request: "), "{e}");
        let bad = json.replace("1024x128", "1024x0");
        let e = parse::<RunChild>(&bad).unwrap_err().to_string();
        assert!(e.contains("\"0\" is not a positive integer"), "{e}");
    }
}
