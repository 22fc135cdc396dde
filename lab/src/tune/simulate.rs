//! The executor's scheduling, replayed over calibrated costs: a discrete-event simulation of
//! one pipeline, so that the model predicts what the executor does, queueing included.
//!
//! It follows the executor's rules (`kplace::executor`): at most `slots` frames in flight; the
//! source writes a frame (a replay) or receives it over a frame period (a stream), releasing
//! each streamed tile as its packets are present; `workers` threads take GPU stages' tasks
//! first, then later stages of frames in flight, then new tiles, each queue in order; a CPU
//! task holds its worker for its kernel time; a GPU task holds it for the launches' host time
//! and appends its uploads and kernels to the stage's stream; after a GPU stage's last task
//! come its downloads, its event and its host callback, and its GPU readers are released at
//! once (their streams wait on the event), its CPU readers by the callback; the GPU runs one
//! kernel at a time and one copy at a time each way, in the order asked; a stateful stage runs
//! one frame at a time, in the order frames began (`serial`); the collector hands frames on in
//! the order they began, and a slot is reused once its frame is handed on.
//!
//! What it does not follow: cores shared with other threads (the model bounds that in closed
//! form), caches, and any time not measured by the calibration.
//!
//! Deterministic: the same inputs give the same outcome.

mod events;
mod serial;

use std::collections::{BinaryHeap, HashMap, VecDeque};

use events::{Ev, Timed};
use serial::Gates;

/// One stage as the simulation runs it.
#[derive(Clone, Debug, Default)]
pub(super) struct SimStage {
    /// On a GPU.
    pub on_gpu: bool,
    /// Launched tile by tile as the source delivers its packets.
    pub streamed: bool,
    /// Reads the source tensor without being streamed: starts once the frame is complete.
    pub after_frame: bool,
    /// Stages it reads from.
    pub preds: Vec<usize>,
    /// Launches per frame.
    pub launches: u32,
    /// CPU: kernel time per launch; GPU: host time per launch, ms.
    pub host_ms_per_launch: f64,
    /// GPU: kernel time per launch on the device, ms.
    pub kernel_ms_per_launch: f64,
    /// GPU: upload time per frame (split over the launches of a streamed stage), ms.
    pub upload_ms: f64,
    /// GPU: download time per frame, ms.
    pub download_ms: f64,
    /// Stateful: runs one frame at a time, in frame order (CPU, not split).
    pub serial: bool,
}

/// How frames arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Arrivals {
    /// As fast as slots free up: each written in `source_ms`.
    Replay,
    /// One frame every `period_ms`, its packets spread over the period; a frame that finds no
    /// free slot is dropped.
    Paced {
        /// The frame period, ms.
        period_ms: f64,
    },
}

/// One pipeline to simulate.
#[derive(Clone, Debug)]
pub(super) struct SimPipeline {
    pub stages: Vec<SimStage>,
    pub workers: usize,
    pub slots: usize,
    /// Writing one frame (a replay), ms.
    pub source_ms: f64,
    /// Judging one frame, ms.
    pub collector_ms: f64,
    /// Added to every frame's completion (the runtime's fixed latency), ms.
    pub latency_ms: f64,
    /// Added to every slot's release, ms.
    pub slot_ms: f64,
}

/// What a simulated run measured over its window.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct SimOutcome {
    /// Frames per second completed.
    pub rate: f64,
    /// Post-frame latency, median and largest, ms.
    pub latency_p50_ms: f64,
    pub latency_max_ms: f64,
    /// Frames dropped for want of a slot.
    pub dropped: u64,
    /// Busy share over the window: the workers (all of them), the GPU's kernels, uploads,
    /// downloads, the source and the collector.
    pub busy: Busy,
}

/// Busy shares, each 0..1.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Busy {
    pub workers: f64,
    pub gpu: f64,
    pub upload: f64,
    pub download: f64,
    pub source: f64,
    pub collector: f64,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Upload(f64),
    Kernel(f64),
    Download(f64),
    /// Wait for stage `s`'s event of the same frame.
    Wait(usize),
    Record,
    Callback,
}

/// A GPU stage's event, per frame: the streams waiting for its record, or recorded.
enum EventState {
    Waited(Vec<usize>),
    Recorded,
}

#[derive(Default)]
struct StreamState {
    ops: VecDeque<Op>,
    running: bool,
}

#[derive(Clone, Default)]
struct Frame {
    waiting: Vec<u32>,
    tasks_left: Vec<u32>,
    stages_left: usize,
    last_packet: f64,
    completed: Option<f64>,
    dropped: bool,
}

struct Sim<'a> {
    p: &'a SimPipeline,
    succs: Vec<Vec<usize>>,
    now: f64,
    seq: u64,
    heap: BinaryHeap<Timed>,
    frames: Vec<Frame>,
    /// Frames the source has begun (a replay).
    begun: usize,
    free_slots: usize,
    source_busy: bool,
    idle_workers: usize,
    gpu_q: VecDeque<(usize, usize)>,
    ready_q: VecDeque<(usize, usize)>,
    streamed_q: VecDeque<(usize, usize)>,
    streams: HashMap<(usize, usize), StreamState>,
    /// The stateful stages' turns.
    gates: Gates,
    /// Each (frame, GPU stage)'s event.
    events: HashMap<(usize, usize), EventState>,
    /// Per engine (kernels, uploads, downloads): whether it runs an operation, and the
    /// operations waiting for it as (frame, order asked, stage, ms).
    engine_busy: [bool; 3],
    engine_waiting: [Vec<(usize, u64, usize, f64)>; 3],
    collector_free: bool,
    next_collect: usize,
    busy: [f64; 6],
    window: Option<(f64, [f64; 6])>,
    warmup: usize,
}

const WORKERS: usize = 0;
const GPU: usize = 1;
const UPLOAD: usize = 2;
const DOWNLOAD: usize = 3;
const SOURCE: usize = 4;
const COLLECTOR: usize = 5;

impl<'a> Sim<'a> {
    fn at(&mut self, at: f64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Timed {
            at,
            seq: self.seq,
            ev,
        });
    }

    fn begin(&mut self, frame: usize) {
        let stages = &self.p.stages;
        let mut state = Frame {
            waiting: stages
                .iter()
                .map(|s| s.preds.len() as u32 + u32::from(s.after_frame))
                .collect(),
            tasks_left: stages
                .iter()
                .map(|s| {
                    if s.on_gpu && !s.streamed {
                        1
                    } else {
                        s.launches
                    }
                })
                .collect(),
            stages_left: stages.len(),
            ..Frame::default()
        };
        state.last_packet = f64::NAN;
        self.frames[frame] = state;
        self.free_slots -= 1;
        self.begun += 1;
        // Stages with nothing to wait for start at once.
        let free: Vec<usize> = (0..stages.len())
            .filter(|&s| self.frames[frame].waiting[s] == 0 && !stages[s].streamed)
            .collect();
        for s in free {
            self.dispatch(frame, s);
        }
    }

    /// Schedules the arrival of frame `frame`'s packets over `span` ms from now.
    fn deliver(&mut self, frame: usize, span: f64) {
        for (s, stage) in self.p.stages.iter().enumerate() {
            if stage.streamed {
                for t in 0..stage.launches {
                    let at = self.now + span * f64::from(t + 1) / f64::from(stage.launches);
                    self.at(at, Ev::TileReady(frame, s, t));
                }
            }
        }
        self.at(self.now + span, Ev::Written(frame));
    }

    fn push_task(&mut self, frame: usize, stage: usize, streamed: bool) {
        let task = (frame, stage);
        if self.p.stages[stage].on_gpu {
            self.gpu_q.push_back(task);
        } else if streamed {
            self.streamed_q.push_back(task);
        } else {
            self.ready_q.push_back(task);
        }
    }

    /// Stage `stage` of `frame` has its inputs: its tasks are queued, or, for a stateful
    /// stage, those of the frame whose turn it is.
    fn dispatch(&mut self, frame: usize, stage: usize) {
        if self.gates.is_serial(stage) {
            let frames = &self.frames;
            if let Some(now) = self
                .gates
                .ready(stage, frame, |f| frames.get(f).is_some_and(|x| x.dropped))
            {
                self.queue(now, stage);
            }
            return;
        }
        self.queue(frame, stage);
    }

    fn queue(&mut self, frame: usize, stage: usize) {
        let s = &self.p.stages[stage];
        let tasks = if s.on_gpu { 1 } else { s.launches };
        for _ in 0..tasks {
            self.push_task(frame, stage, false);
        }
    }

    fn satisfy(&mut self, frame: usize, stage: usize) {
        let waiting = &mut self.frames[frame].waiting[stage];
        *waiting -= 1;
        if *waiting == 0 {
            self.dispatch(frame, stage);
        }
    }

    fn assign(&mut self) {
        while self.idle_workers > 0 {
            let Some((frame, stage)) = self
                .gpu_q
                .pop_front()
                .or_else(|| self.ready_q.pop_front())
                .or_else(|| self.streamed_q.pop_front())
            else {
                return;
            };
            self.idle_workers -= 1;
            let s = &self.p.stages[stage];
            let launches = if s.on_gpu && !s.streamed {
                s.launches
            } else {
                1
            };
            let ms = s.host_ms_per_launch * f64::from(launches);
            self.busy[WORKERS] += ms;
            self.at(self.now + ms, Ev::TaskDone(frame, stage));
        }
    }

    fn stage_done(&mut self, frame: usize) {
        let state = &mut self.frames[frame];
        state.stages_left -= 1;
        if state.stages_left == 0 {
            let at = self.now + self.p.latency_ms;
            self.at(at, Ev::Complete(frame));
        }
    }

    fn task_done(&mut self, frame: usize, stage: usize) {
        self.idle_workers += 1;
        let s = self.p.stages[stage].clone();
        self.frames[frame].tasks_left[stage] -= 1;
        let last = self.frames[frame].tasks_left[stage] == 0;
        if s.on_gpu {
            let launches = f64::from(s.launches.max(1));
            let mut ops = Vec::new();
            if s.streamed {
                if s.upload_ms > 0.0 {
                    ops.push(Op::Upload(s.upload_ms / launches));
                }
                ops.push(Op::Kernel(s.kernel_ms_per_launch));
            } else {
                for &p in &s.preds {
                    if self.p.stages[p].on_gpu {
                        ops.push(Op::Wait(p));
                    }
                }
                if s.upload_ms > 0.0 {
                    ops.push(Op::Upload(s.upload_ms));
                }
                for _ in 0..s.launches {
                    ops.push(Op::Kernel(s.kernel_ms_per_launch));
                }
            }
            if last {
                if s.download_ms > 0.0 {
                    ops.push(Op::Download(s.download_ms));
                }
                ops.extend([Op::Record, Op::Callback]);
            }
            self.streams
                .entry((frame, stage))
                .or_default()
                .ops
                .extend(ops);
            if last {
                for next in self.succs[stage].clone() {
                    if self.p.stages[next].on_gpu {
                        self.satisfy(frame, next);
                    }
                }
            }
            self.advance(frame, stage);
        } else if last {
            for next in self.succs[stage].clone() {
                self.satisfy(frame, next);
            }
            let frames = &self.frames;
            if let Some(now) = self
                .gates
                .done(stage, |f| frames.get(f).is_some_and(|x| x.dropped))
            {
                self.queue(now, stage);
            }
            self.stage_done(frame);
        }
        self.assign();
    }

    /// Runs the stream of `stage` of `frame` as far as it can go now.
    fn advance(&mut self, frame: usize, stage: usize) {
        loop {
            let Some(stream) = self.streams.get_mut(&(frame, stage)) else {
                return;
            };
            if stream.running {
                return;
            }
            let Some(op) = stream.ops.pop_front() else {
                return;
            };
            let engine = match op {
                Op::Upload(ms) => Some((UPLOAD, ms)),
                Op::Kernel(ms) => Some((GPU, ms)),
                Op::Download(ms) => Some((DOWNLOAD, ms)),
                Op::Wait(p) => {
                    match self
                        .events
                        .entry((frame, p))
                        .or_insert_with(|| EventState::Waited(Vec::new()))
                    {
                        EventState::Recorded => continue,
                        EventState::Waited(waiters) => waiters.push(stage),
                    }
                    stream.ops.push_front(op);
                    stream.running = true;
                    return;
                }
                Op::Record => {
                    let waiters = match self.events.insert((frame, stage), EventState::Recorded) {
                        Some(EventState::Waited(waiters)) => waiters,
                        _ => Vec::new(),
                    };
                    for w in waiters {
                        if let Some(ws) = self.streams.get_mut(&(frame, w)) {
                            ws.running = false;
                            if let Some(Op::Wait(_)) = ws.ops.front() {
                                ws.ops.pop_front();
                            }
                        }
                        self.advance(frame, w);
                    }
                    None
                }
                Op::Callback => {
                    for next in self.succs[stage].clone() {
                        if !self.p.stages[next].on_gpu {
                            self.satisfy(frame, next);
                        }
                    }
                    self.stage_done(frame);
                    self.assign();
                    None
                }
            };
            if let Some((engine, ms)) = engine {
                if let Some(stream) = self.streams.get_mut(&(frame, stage)) {
                    stream.running = true;
                }
                self.seq += 1;
                self.engine_waiting[engine - 1].push((frame, self.seq, stage, ms));
                self.start_engine(engine);
                return;
            }
        }
    }

    /// Starts the engine's next operation if it is idle: the one asked for first (the
    /// simulated device's engines serve in order; a GPU's scheduler has no notion of frames).
    fn start_engine(&mut self, engine: usize) {
        let waiting = &mut self.engine_waiting[engine - 1];
        if self.engine_busy[engine - 1] || waiting.is_empty() {
            return;
        }
        let next = (0..waiting.len())
            .min_by_key(|&i| waiting[i].1)
            .expect("not empty");
        let (frame, _, stage, ms) = waiting.swap_remove(next);
        self.engine_busy[engine - 1] = true;
        self.busy[engine] += ms;
        self.at(self.now + ms, Ev::EngineDone(engine, frame, stage));
    }

    fn collect(&mut self) {
        if !self.collector_free || self.next_collect >= self.frames.len() {
            return;
        }
        let f = self.next_collect;
        let state = &self.frames[f];
        if state.dropped {
            self.next_collect += 1;
            return self.collect();
        }
        if state.completed.is_none() {
            return;
        }
        self.collector_free = false;
        self.busy[COLLECTOR] += self.p.collector_ms;
        self.at(self.now + self.p.collector_ms, Ev::Collected(f));
    }

    fn try_source(&mut self) {
        if self.source_busy || self.free_slots == 0 || self.begun >= self.frames.len() {
            return;
        }
        let frame = self.begun;
        self.source_busy = true;
        self.begin(frame);
        let ms = self.p.source_ms;
        self.busy[SOURCE] += ms;
        self.deliver(frame, ms);
        self.at(self.now + ms, Ev::SourceFree);
    }

    fn handle(&mut self, ev: Ev, arrivals: Arrivals) {
        match ev {
            Ev::SourceFree => {
                self.source_busy = false;
                self.try_source();
            }
            Ev::Arrive(f) => {
                let Arrivals::Paced { period_ms } = arrivals else {
                    return;
                };
                if f + 1 < self.frames.len() {
                    self.at(self.now + period_ms, Ev::Arrive(f + 1));
                }
                if self.free_slots == 0 {
                    self.frames[f].dropped = true;
                    let frames = &self.frames;
                    for (stage, now) in self
                        .gates
                        .dropped(|f| frames.get(f).is_some_and(|x| x.dropped))
                    {
                        self.queue(now, stage);
                    }
                    self.assign();
                    self.collect();
                } else {
                    self.begin(f);
                    self.deliver(f, period_ms);
                }
            }
            Ev::TileReady(f, s, _) => {
                if !self.frames[f].dropped {
                    self.push_task(f, s, true);
                    self.assign();
                }
            }
            Ev::Written(f) => {
                if self.frames[f].dropped {
                    return;
                }
                self.frames[f].last_packet = self.now;
                for s in 0..self.p.stages.len() {
                    if self.p.stages[s].after_frame {
                        self.satisfy(f, s);
                    }
                }
                self.assign();
            }
            Ev::TaskDone(f, s) => self.task_done(f, s),
            Ev::EngineDone(e, f, s) => {
                self.engine_busy[e - 1] = false;
                if let Some(stream) = self.streams.get_mut(&(f, s)) {
                    stream.running = false;
                }
                self.advance(f, s);
                self.start_engine(e);
                if self
                    .streams
                    .get(&(f, s))
                    .is_some_and(|st| st.ops.is_empty() && !st.running)
                {
                    self.streams.remove(&(f, s));
                }
            }
            Ev::Complete(f) => {
                self.frames[f].completed = Some(self.now);
                if f + 1 == self.warmup {
                    self.window = Some((self.now, self.busy));
                }
                self.collect();
            }
            Ev::Collected(_) => {
                self.collector_free = true;
                self.next_collect += 1;
                self.at(self.now + self.p.slot_ms, Ev::SlotFree);
                self.collect();
            }
            Ev::SlotFree => {
                self.free_slots += 1;
                if arrivals == Arrivals::Replay {
                    self.try_source();
                }
            }
        }
    }
}

/// Simulates `frames` frames of `pipeline` arriving as `arrivals`; the first `warmup` are left
/// out of the figures.
pub(super) fn run(
    pipeline: &SimPipeline,
    arrivals: Arrivals,
    frames: usize,
    warmup: usize,
) -> SimOutcome {
    let n = pipeline.stages.len();
    let mut succs = vec![Vec::new(); n];
    for (s, stage) in pipeline.stages.iter().enumerate() {
        for &p in &stage.preds {
            succs[p].push(s);
        }
    }
    let warmup = warmup.clamp(1, frames.saturating_sub(2).max(1));
    let mut sim = Sim {
        p: pipeline,
        succs,
        now: 0.0,
        seq: 0,
        heap: BinaryHeap::new(),
        frames: vec![Frame::default(); frames],
        begun: 0,
        free_slots: pipeline.slots.max(1),
        source_busy: false,
        idle_workers: pipeline.workers.max(1),
        gpu_q: VecDeque::new(),
        ready_q: VecDeque::new(),
        streamed_q: VecDeque::new(),
        streams: HashMap::new(),
        gates: Gates::new(pipeline.stages.iter().map(|s| s.serial && !s.on_gpu)),
        events: HashMap::new(),
        engine_busy: [false; 3],
        engine_waiting: [Vec::new(), Vec::new(), Vec::new()],
        collector_free: true,
        next_collect: 0,
        busy: [0.0; 6],
        window: None,
        warmup,
    };
    match arrivals {
        Arrivals::Replay => sim.try_source(),
        Arrivals::Paced { .. } => sim.at(0.0, Ev::Arrive(0)),
    }
    while let Some(Timed { at, ev, .. }) = sim.heap.pop() {
        sim.now = at;
        sim.handle(ev, arrivals);
    }
    let done: Vec<(usize, f64)> = sim
        .frames
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.completed.map(|c| (i, c)))
        .collect();
    let dropped = sim.frames.iter().filter(|f| f.dropped).count() as u64;
    let (start, busy_at_start) = sim.window.unwrap_or((0.0, [0.0; 6]));
    let end = done.iter().map(|&(_, c)| c).fold(0.0, f64::max);
    let measured = done.iter().filter(|&&(i, _)| i >= warmup).count();
    let window = (end - start).max(1e-9);
    let mut latencies: Vec<f64> = done
        .iter()
        .filter(|&&(i, _)| i >= warmup)
        .map(|&(i, c)| c - sim.frames[i].last_packet)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let share = |k: usize, capacity: f64| (sim.busy[k] - busy_at_start[k]) / window / capacity;
    SimOutcome {
        rate: measured as f64 / window * 1e3,
        latency_p50_ms: latencies.get(latencies.len() / 2).copied().unwrap_or(0.0),
        latency_max_ms: latencies.last().copied().unwrap_or(0.0),
        dropped,
        busy: Busy {
            workers: share(WORKERS, pipeline.workers.max(1) as f64),
            gpu: share(GPU, 1.0),
            upload: share(UPLOAD, 1.0),
            download: share(DOWNLOAD, 1.0),
            source: share(SOURCE, 1.0),
            collector: share(COLLECTOR, 1.0),
        },
    }
}

#[cfg(test)]
mod tests;
