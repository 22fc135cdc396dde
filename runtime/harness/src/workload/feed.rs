//! One pipeline fed by its caller: frames handed over from memory a batch at a time, each
//! frame's sinks written back into the caller's buffers, and one run of the executor across
//! every batch, so that a stateful stage carries from one batch to the next exactly as it does
//! on a stream. What a binding drives (kplace's Python module: `Pipeline.process`).
//!
//! A [`Feed`] starts the run on a thread of its own when it opens. [`Feed::process`] hands the
//! run's source a batch (frame ids continue from the batch before) and the sink the buffers
//! the batch's sinks go to, and returns once every frame of the batch has reached the sink.
//! [`Feed::finish`] ends the stream: the run drains, and its report is built by
//! [`session::report`], as every runner of a pipeline builds it.
//!
//! Guarantees: the caller's frames are read in place, never copied but into the frames' slots;
//! `process` returns only once no thread reads its frames or writes its outputs any more
//! (every frame of the batch was handed to the sink, or the run has ended and its threads are
//! joined); a failed run fails this `process` and every later one, with the run's error.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{self, Receiver, RecvTimeoutError, Sender};

use crate::session::{self, RunFacts, Session};
use kplace_core::executor::{
    CompletedFrame, FrameSink, Ingest, PartialFrame, RunError, RunOptions, SinkError, Source,
    SourceError,
};
use kplace_core::model::files::{self, FilesError, GraphFiles, Setting};
use kplace_core::model::graph::{Overrides, TensorSpec};
use kplace_core::model::locate::{self, NotFound};
use kplace_core::plan::{Plan, PlanError};
use kplace_report::run::{Details, RunReport, Verification};

/// Why a feed could not open, or a batch could not run.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The graph or placement was not found.
    #[error(transparent)]
    NotFound(#[from] NotFound),
    /// A setting is not `DIM=VALUE` or `STAGE.PARAM=VALUE`.
    #[error("setting {setting:?}: {why}")]
    Setting {
        /// The setting as written.
        setting: String,
        /// Why it is refused.
        why: kplace_core::model::files::SettingError,
    },
    /// The graph or placement cannot be loaded as asked.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The graph cannot run on the placement.
    #[error(transparent)]
    Plan(#[from] Box<PlanError>),
    /// The plan cannot run on this machine.
    #[error("placement {placement}: {cause}")]
    NotRunnable {
        /// The placement's name.
        placement: String,
        /// Why.
        cause: String,
    },
    /// A batch or its outputs are not the size the graph's tensors make them.
    #[error("{0}")]
    Size(String),
    /// The run failed (this batch's, or an earlier one's).
    #[error("the run failed: {0}")]
    Run(String),
    /// The stream was ended ([`Feed::finish`]): nothing more can be fed to it.
    #[error("the stream has ended: open a new one to process more frames")]
    Ended,
}

/// A caller's batch, as the source reads it: `frames` frames back to back from `data`, after
/// `lost_before` frames of the stream that never arrived.
struct Batch {
    data: *const u8,
    frames: usize,
    lost_before: u64,
}

// SAFETY: the batch's bytes are the caller's, who waits in `Feed::process` until every frame
// of the batch has reached the sink or the run has ended (its source thread joined), so the
// pointer is valid, and not written, for as long as the source thread may read it.
unsafe impl Send for Batch {}

/// Where a batch's sinks go: per sink, the caller's buffer for every frame of the batch.
struct Targets {
    outputs: Vec<(*mut u8, usize)>,
    frames: usize,
    done: usize,
}

// SAFETY: as for `Batch`: the buffers are the caller's, who waits in `Feed::process` until the
// sink has written every frame of the batch or the run has ended; the sink is their only
// writer meanwhile.
unsafe impl Send for Targets {}

/// What the run's thread tells the caller.
enum Event {
    /// Every frame of the current batch reached the sink.
    BatchDone,
    /// The run ended: its session, or why it failed.
    Ended(Box<Result<Session, RunError>>),
}

/// A pipeline whose frames its caller hands over a batch at a time.
pub struct Feed {
    plan: Arc<Plan>,
    /// Frames to the source; `None` once the stream has ended.
    batches: Option<Sender<Batch>>,
    targets: Arc<Mutex<Option<Targets>>>,
    events: Receiver<Event>,
    thread: Option<JoinHandle<()>>,
    /// Frames fed so far.
    fed: u64,
    /// Frames of the stream lost before the next batch ([`Feed::lose`]).
    lose: u64,
    /// Frames of the stream lost so far.
    lost: u64,
    /// Why the run failed, once it has.
    failed: Option<String>,
    /// The report, once the stream has ended.
    report: Option<RunReport>,
}

/// The graph and placement a feed runs, and what it sets in them.
#[derive(Clone, Debug)]
pub struct FeedSpec<'a> {
    /// The graph: a file, or a name kplace finds (`spectrogram`, `beamformer/filtered`).
    pub graph: &'a Path,
    /// The placement: a file, or a name beside the graph (`cpu`).
    pub placement: &'a Path,
    /// Dimensions and parameters, each `DIM=VALUE` or `STAGE.PARAM=VALUE`, as `--set` takes.
    pub settings: &'a [String],
}

impl Feed {
    /// Finds, loads and plans the graph on the placement as `kplace run` does (`slots: auto`
    /// sized for a frame every 10 ms), and starts the run.
    pub fn open(spec: &FeedSpec<'_>) -> Result<Feed, FeedError> {
        let graph = locate::graph(spec.graph)?;
        let placement = locate::placement(spec.placement, &graph)?;
        let settings = spec
            .settings
            .iter()
            .map(|s| {
                s.parse::<Setting>().map_err(|why| FeedError::Setting {
                    setting: s.clone(),
                    why,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let files = GraphFiles::read(&graph, &placement)?;
        let files = GraphFiles {
            dims: files::bind_dims(&files.graph, None, &settings)?,
            sets: files::params(&settings),
            ..files
        };
        let period = super::generic::DEFAULT_FRAME_PERIOD;
        let (graph, placement) = files.load_with(Overrides::default(), period)?;
        let plan = Plan::new(graph, placement).map_err(Box::new)?;
        Feed::start(plan)
    }

    /// Starts the run of `plan`, waiting for its first batch.
    pub fn start(plan: Plan) -> Result<Feed, FeedError> {
        plan.runnable().map_err(|cause| FeedError::NotRunnable {
            placement: plan.placement.name.clone(),
            cause: cause.to_string(),
        })?;
        let plan = Arc::new(plan);
        let (batches, batch_rx) = channel::unbounded::<Batch>();
        let (event_tx, events) = channel::unbounded();
        let targets = Arc::new(Mutex::new(None));
        let thread = {
            let plan = Arc::clone(&plan);
            let targets = Arc::clone(&targets);
            std::thread::Builder::new()
                .name("kplace-feed".into())
                .spawn(move || {
                    let mut source = BatchSource {
                        batches: batch_rx,
                        next_id: 0,
                    };
                    let mut sink = BatchSink {
                        targets,
                        events: event_tx.clone(),
                    };
                    let ended = session::run(&plan, &mut source, &mut sink, &RunOptions::default());
                    // No frame is read from a batch once the source is gone.
                    drop(source);
                    let _ = event_tx.send(Event::Ended(Box::new(ended)));
                })
                .map_err(|e| FeedError::Run(format!("cannot start the run's thread: {e}")))?
        };
        Ok(Feed {
            plan,
            batches: Some(batches),
            targets,
            events,
            thread: Some(thread),
            fed: 0,
            lose: 0,
            lost: 0,
            failed: None,
            report: None,
        })
    }

    /// The plan the feed runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The graph's source tensor: what each frame of a batch is.
    pub fn source(&self) -> &TensorSpec {
        let graph = &self.plan.graph;
        graph.tensor(graph.source.tensor)
    }

    /// The graph's sink tensors, in its `sinks` order: what each frame's outputs are.
    pub fn sinks(&self) -> Vec<&TensorSpec> {
        let graph = &self.plan.graph;
        graph.sinks.iter().map(|&t| graph.tensor(t)).collect()
    }

    /// Frames fed so far.
    pub fn frames_fed(&self) -> u64 {
        self.fed
    }

    /// The stream's next `frames` frames were lost (never arrived): the next batch's frames
    /// follow the gap, as a receiver's frames follow the ones the network lost, and each
    /// stateful stage meets it by its kernel's loss rule (the FIR's: the lost frames are
    /// silence). Frames lost after the last batch are no gap anything sees.
    pub fn lose(&mut self, frames: u64) -> Result<(), FeedError> {
        if let Some(why) = &self.failed {
            return Err(FeedError::Run(why.clone()));
        }
        if self.batches.is_none() {
            return Err(FeedError::Ended);
        }
        self.lose = self
            .lose
            .checked_add(frames)
            .filter(|lost| lost.checked_add(self.fed + self.lost).is_some())
            .ok_or_else(|| FeedError::Size(format!("{frames} frames lost: too many to count")))?;
        Ok(())
    }

    /// Frames of the stream lost so far ([`Feed::lose`]) and followed by a batch.
    pub fn frames_lost(&self) -> u64 {
        self.lost
    }

    /// Runs the frames in `input` (whole source frames back to back) through the stream, and
    /// writes each sink's frames back to back into `outputs` (in the graph's `sinks` order,
    /// each exactly the batch's frames of that sink).
    pub fn process(&mut self, input: &[u8], outputs: &mut [&mut [u8]]) -> Result<(), FeedError> {
        if let Some(why) = &self.failed {
            return Err(FeedError::Run(why.clone()));
        }
        if self.batches.is_none() {
            return Err(FeedError::Ended);
        }
        let frames = self.check_sizes(input, outputs)?;
        if frames == 0 {
            return Ok(());
        }
        *self.lock_targets() = Some(Targets {
            outputs: outputs
                .iter_mut()
                .map(|o| (o.as_mut_ptr(), o.len()))
                .collect(),
            frames,
            done: 0,
        });
        let batch = Batch {
            data: input.as_ptr(),
            frames,
            lost_before: self.lose,
        };
        if let Some(batches) = &self.batches {
            // The source's end of the channel goes only when the run ends, said below.
            let _ = batches.send(batch);
        }
        let result = match self.events.recv() {
            Ok(Event::BatchDone) => {
                self.fed += frames as u64;
                self.lost += std::mem::take(&mut self.lose);
                Ok(())
            }
            Ok(Event::Ended(ended)) => {
                let why = match *ended {
                    Err(e) => e.to_string(),
                    Ok(_) => "the run ended before the batch's frames reached its sink".into(),
                };
                self.fail(why)
            }
            Err(_) => self.fail("the run's thread is gone".into()),
        };
        *self.lock_targets() = None;
        result
    }

    /// Ends the stream without a report, as dropping the feed does: the run ends and its
    /// thread is joined, so no frame and no kernel state outlives this call. Calls after it
    /// fail, saying the stream ended; `finish` still returns its report.
    pub fn close(&mut self) {
        self.batches = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Ends the stream: no more frames; the run finishes those in flight (none: every batch
    /// has), and its report is built. Once ended, the same report again.
    pub fn finish(&mut self) -> Result<&RunReport, FeedError> {
        if self.report.is_none() {
            if let Some(why) = &self.failed {
                return Err(FeedError::Run(why.clone()));
            }
            self.batches = None;
            let ended = loop {
                match self.events.recv() {
                    Ok(Event::Ended(ended)) => break ended,
                    Ok(Event::BatchDone) => continue,
                    Err(_) => return self.fail("the run's thread is gone".into()),
                }
            };
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
            let session = match *ended {
                Ok(session) => session,
                Err(e) => return self.fail(e.to_string()),
            };
            self.report = Some(self.report_of(&session));
        }
        self.report.as_ref().ok_or(FeedError::Ended)
    }

    /// The report of the ended run: every frame fed counts as passed once reported (there is
    /// nothing to check it against here; the caller has the outputs).
    fn report_of(&self, run: &Session) -> RunReport {
        let source = self.source();
        let reported = run.metrics.frames;
        let missing = self.fed.saturating_sub(reported);
        let facts = RunFacts {
            graph: self.plan.graph.name.clone(),
            placement: self.plan.placement.name.clone(),
            shape: self.plan.graph.frame_shape(),
            frame_bytes: source.bytes,
            source: "memory".into(),
            frames_expected: self.fed,
            details: Details::new(),
            interrupted: None,
            mps: None,
        };
        let verification = Verification {
            passed: missing == 0,
            against: "nothing".into(),
            frames_reported: reported,
            frames_passed: reported,
            frames_failed: 0,
            frames_missing: missing,
            lost_frames: Vec::new(),
            frames_rejudged: 0,
            mismatches: Vec::new(),
            reasons: match missing {
                0 => Vec::new(),
                n => vec![format!("{n} of {} frames were never reported", self.fed)],
            },
        };
        session::report(facts, run, None, verification)
    }

    /// The frames in `input`, once it and `outputs` are checked against the graph.
    fn check_sizes(&self, input: &[u8], outputs: &[&mut [u8]]) -> Result<usize, FeedError> {
        let source = self.source();
        let frame = source.bytes as usize;
        if frame == 0 || !input.len().is_multiple_of(frame) {
            return Err(FeedError::Size(format!(
                "{} bytes of frames is not a whole number of {} frames of {frame} bytes",
                input.len(),
                source.name
            )));
        }
        let frames = input.len() / frame;
        let sinks = self.sinks();
        if outputs.len() != sinks.len() {
            return Err(FeedError::Size(format!(
                "{} output buffers for the graph's {} sinks",
                outputs.len(),
                sinks.len()
            )));
        }
        for (sink, out) in sinks.iter().zip(outputs) {
            let want = frames * sink.bytes as usize;
            if out.len() != want {
                return Err(FeedError::Size(format!(
                    "sink {}: {} bytes for {frames} frames of {} bytes",
                    sink.name,
                    out.len(),
                    sink.bytes
                )));
            }
        }
        Ok(frames)
    }

    fn lock_targets(&self) -> std::sync::MutexGuard<'_, Option<Targets>> {
        // A panic while the lock was held left nothing half-written that matters: the
        // targets are replaced whole.
        self.targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the run failed, and says so.
    fn fail<T>(&mut self, why: String) -> Result<T, FeedError> {
        self.batches = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.failed = Some(why.clone());
        Err(FeedError::Run(why))
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.close();
    }
}

/// The run's source: each batch's frames in order, packet by packet into their slots.
struct BatchSource {
    batches: Receiver<Batch>,
    next_id: u64,
}

impl Source for BatchSource {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let packet = ingest.packet_bytes();
        let frame = packet * ingest.packets_per_frame() as usize;
        // The stream ends when the feed drops its end of the channel, or when the run stops
        // (a kernel failed): the wait for the next batch looks at that in between.
        loop {
            let batch = match self.batches.recv_timeout(STOP_POLL) {
                Ok(batch) => batch,
                Err(RecvTimeoutError::Timeout) if ingest.stopping() => return Ok(()),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            };
            // SAFETY: `Batch`'s pointer holds `frames` frames of the source's bytes (checked
            // by `Feed::check_sizes`) and stays valid while the source may read it (`Batch`).
            let data = unsafe { std::slice::from_raw_parts(batch.data, batch.frames * frame) };
            self.next_id += batch.lost_before;
            for bytes in data.chunks_exact(frame) {
                let id = self.next_id;
                self.next_id += 1;
                let Some(open) = ingest.begin_frame(id) else {
                    return Ok(());
                };
                ingest.write_frame(open, bytes)?;
            }
        }
    }
}

/// How often the source, waiting for the next batch, looks whether the run has stopped.
const STOP_POLL: Duration = Duration::from_millis(10);

/// The run's sink: each frame's sinks into the current batch's buffers, in order.
struct BatchSink {
    targets: Arc<Mutex<Option<Targets>>>,
    events: Sender<Event>,
}

impl FrameSink for BatchSink {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let mut guard = self
            .targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(targets) = guard.as_mut() else {
            return Err(SinkError::failed(format!(
                "frame {} completed outside a batch",
                frame.frame_id
            )));
        };
        let k = targets.done;
        for (i, &(ptr, len)) in targets.outputs.iter().enumerate() {
            let bytes = frame.sink(i);
            let at = k * bytes.len();
            if at + bytes.len() > len {
                return Err(SinkError::failed(format!(
                    "frame {}: sink {i} does not fit its output",
                    frame.frame_id
                )));
            }
            // SAFETY: the buffer is the caller's, `len` bytes long, written by this sink alone
            // until the batch is done (`Targets`); `at + bytes.len() <= len` was checked.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.add(at), bytes.len()) };
        }
        targets.done += 1;
        if targets.done == targets.frames {
            let _ = self.events.send(Event::BatchDone);
        }
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed(format!(
            "frame {} ended with packets missing",
            frame.frame_id
        )))
    }
}
