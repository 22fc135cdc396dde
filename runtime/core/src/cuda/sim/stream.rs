//! The simulated device's streams: each is a thread that executes its operations in order
//! (copies, event records and waits, host callbacks, kernel launches, and graphs of copies,
//! callbacks and launches, one operation after another), with the device's delay and timing
//! model, and stops at the device's first sticky error.

use super::timing::{Engines, SimTiming};
use super::*;

/// A raw address that may cross to a stream thread.
#[derive(Clone, Copy)]
pub(super) struct Addr(pub(super) *mut u8);
// SAFETY: the enqueuer promises validity until the operation has executed (the seam's
// contract); the stream thread only copies through it.
unsafe impl Send for Addr {}

/// A simulated event: how many records were enqueued and how many have executed, and the
/// device time of the latest executed record.
#[derive(Default)]
pub(super) struct SimEvent {
    pub(super) state: Mutex<(u64, u64)>,
    pub(super) done: Condvar,
    /// Whether it was made for timing ([`Gpu::elapsed_ms`] refuses others).
    pub(super) timing: bool,
    /// The device time of the latest executed record.
    pub(super) recorded_at: Mutex<Option<Duration>>,
}

pub(super) enum Op {
    Copy {
        dst: Addr,
        src: Addr,
        bytes: usize,
        upload: bool,
    },
    Record {
        event: Addr,
        generation: u64,
    },
    Wait {
        event: Addr,
        generation: u64,
    },
    Host {
        func: HostFn,
        data: Addr,
    },
    Launch(LaunchRequest),
    /// A captured graph's operations, executed in order as if each were enqueued alone.
    Graph(Arc<SimGraph>),
    Flush(Sender<()>),
}

/// What a capture recorded: copies, host callbacks and launches, in stream order.
pub(super) struct SimGraph {
    pub(super) ops: Vec<Op>,
}

// SAFETY: a graph is never changed once made; its operations are addresses and requests that
// streams only read to execute (their targets' validity is the launcher's contract), so
// several launches may share it.
unsafe impl Sync for SimGraph {}

pub(super) struct SimStream {
    pub(super) ops: Sender<Op>,
    pub(super) thread: Option<JoinHandle<()>>,
    /// While the stream captures: the operations recorded so far.
    pub(super) capture: Mutex<Option<Vec<Op>>>,
}

/// A stream thread's state while it executes.
struct Executor {
    delay: Duration,
    timing: Option<(Arc<SimTiming>, Arc<Engines>)>,
    sticky: Arc<Mutex<Option<GpuError>>>,
    device: String,
    epoch: Instant,
    /// This stream's clock on a timed device: the modeled time of the work it ran (see the
    /// module docs). An untimed device's records read the host's clock instead.
    clock: Duration,
}

pub(super) fn run_stream(
    ops: channel::Receiver<Op>,
    delay: Duration,
    timing: Option<(Arc<SimTiming>, Arc<Engines>)>,
    sticky: Arc<Mutex<Option<GpuError>>>,
    device: String,
    epoch: Instant,
) {
    let mut executor = Executor {
        delay,
        timing,
        sticky,
        device,
        epoch,
        clock: Duration::ZERO,
    };
    for op in ops {
        executor.execute(&op);
    }
}

impl Executor {
    /// Executes `op` after the device's delay, unless the device has failed; a graph's
    /// operations one after another, each so.
    fn execute(&mut self, op: &Op) {
        if let Op::Graph(graph) = op {
            for op in &graph.ops {
                self.execute(op);
            }
            return;
        }
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        if lock(&self.sticky).is_some() {
            // A failed device executes nothing more; a flush still answers, so a
            // synchronize returns (with the error) instead of hanging.
            if let Op::Flush(done) = op {
                let _ = done.send(());
            }
            return;
        }
        match op {
            &Op::Copy {
                dst,
                src,
                bytes,
                upload,
            } => {
                let engine = self.timing.as_ref().map(|(timing, engines)| {
                    let (engine, rate) = if upload {
                        (&engines.upload, timing.upload_bytes_per_s)
                    } else {
                        (&engines.download, timing.download_bytes_per_s)
                    };
                    let held = engine.hold();
                    let time = SimTiming::copy_time(rate, bytes);
                    self.clock += time;
                    (held, Instant::now() + time)
                });
                // SAFETY: ranges were checked at enqueue and stay valid until executed.
                unsafe { std::ptr::copy_nonoverlapping(src.0, dst.0, bytes) };
                if let Some((_held, deadline)) = engine {
                    finish_at(deadline);
                }
            }
            &Op::Record { event, generation } => {
                // SAFETY: events outlive the operations enqueued with them.
                let event = unsafe { &*event.0.cast::<SimEvent>() };
                let at = if self.timing.is_some() {
                    self.clock
                } else {
                    self.epoch.elapsed()
                };
                *lock(&event.recorded_at) = Some(at);
                let mut state = lock(&event.state);
                state.1 = state.1.max(generation);
                event.done.notify_all();
            }
            &Op::Wait { event, generation } => {
                // SAFETY: as above.
                let event = unsafe { &*event.0.cast::<SimEvent>() };
                let mut state = lock(&event.state);
                while state.1 < generation {
                    state = event
                        .done
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            // SAFETY: the enqueuer promised `data` valid until the callback has run.
            &Op::Host { func, data } => unsafe { func(data.0.cast::<c_void>()) },
            Op::Launch(request) => {
                let engine = self.timing.as_ref().map(|(timing, engines)| {
                    // SAFETY: the enqueuer keeps the request's targets valid until it has run.
                    let kernel = unsafe { request.kernel_name() };
                    let time = timing
                        .kernel_time(kernel, request.tile().count)
                        .mul_f64(engines.cotenant());
                    let held = engines.compute.hold();
                    self.clock += time;
                    (held, Instant::now() + time)
                });
                // SAFETY: the enqueuer keeps the request's targets valid until it has run.
                let result = unsafe { request.run(std::ptr::null_mut()) };
                if let Some((_held, deadline)) = engine {
                    finish_at(deadline);
                }
                if let Err(e) = result {
                    lock(&self.sticky).get_or_insert(GpuError::new(
                        self.device.clone(),
                        "kernel",
                        e.to_string(),
                    ));
                }
            }
            // Executed operation by operation above.
            Op::Graph(_) => {}
            Op::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
