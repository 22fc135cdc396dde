//! The simulated device's streams: each is a thread that executes its operations in order
//! (copies, event records and waits, host callbacks, kernel launches), with the device's
//! delay and timing model, and stops at the device's first sticky error.

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
    Flush(Sender<()>),
}

pub(super) struct SimStream {
    pub(super) ops: Sender<Op>,
    pub(super) thread: Option<JoinHandle<()>>,
}

pub(super) fn run_stream(
    ops: channel::Receiver<Op>,
    delay: Duration,
    timing: Option<(Arc<SimTiming>, Arc<Engines>)>,
    sticky: Arc<Mutex<Option<GpuError>>>,
    device: String,
    epoch: Instant,
) {
    // This stream's clock on a timed device: the modeled time of the work it ran (see the
    // module docs). An untimed device's records read the host's clock instead.
    let mut clock = Duration::ZERO;
    for op in ops {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if lock(&sticky).is_some() {
            // A failed device executes nothing more; a flush still answers, so a
            // synchronize returns (with the error) instead of hanging.
            if let Op::Flush(done) = op {
                let _ = done.send(());
            }
            continue;
        }
        match op {
            Op::Copy {
                dst,
                src,
                bytes,
                upload,
            } => {
                let engine = timing.as_ref().map(|(timing, engines)| {
                    let (engine, rate) = if upload {
                        (&engines.upload, timing.upload_bytes_per_s)
                    } else {
                        (&engines.download, timing.download_bytes_per_s)
                    };
                    let held = engine.hold();
                    let time = SimTiming::copy_time(rate, bytes);
                    clock += time;
                    (held, Instant::now() + time)
                });
                // SAFETY: ranges were checked at enqueue and stay valid until executed.
                unsafe { std::ptr::copy_nonoverlapping(src.0, dst.0, bytes) };
                if let Some((_held, deadline)) = engine {
                    finish_at(deadline);
                }
            }
            Op::Record { event, generation } => {
                // SAFETY: events outlive the operations enqueued with them.
                let event = unsafe { &*event.0.cast::<SimEvent>() };
                let at = if timing.is_some() {
                    clock
                } else {
                    epoch.elapsed()
                };
                *lock(&event.recorded_at) = Some(at);
                let mut state = lock(&event.state);
                state.1 = state.1.max(generation);
                event.done.notify_all();
            }
            Op::Wait { event, generation } => {
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
            Op::Host { func, data } => unsafe { func(data.0.cast::<c_void>()) },
            Op::Launch(request) => {
                let engine = timing.as_ref().map(|(timing, engines)| {
                    // SAFETY: the enqueuer keeps the request's targets valid until it has run.
                    let kernel = unsafe { request.kernel_name() };
                    let time = timing
                        .kernel_time(kernel, request.tile().count)
                        .mul_f64(engines.cotenant());
                    let held = engines.compute.hold();
                    clock += time;
                    (held, Instant::now() + time)
                });
                // SAFETY: the enqueuer keeps the request's targets valid until it has run.
                let result = unsafe { request.run(std::ptr::null_mut()) };
                if let Some((_held, deadline)) = engine {
                    finish_at(deadline);
                }
                if let Err(e) = result {
                    lock(&sticky).get_or_insert(GpuError::new(
                        device.clone(),
                        "kernel",
                        e.to_string(),
                    ));
                }
            }
            Op::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
