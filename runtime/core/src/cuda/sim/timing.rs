//! The simulated device's timing model ([`SimTiming`]): how long each kernel, copy and
//! enqueue takes, and the engines that run kernels one at a time and copies one at a time per
//! direction. Time is spent, not slept, where a driver would compute.

use super::*;

/// How long a simulated device's work takes: the timing model of [`SimGpu::with_timing`].
///
/// A kernel not listed takes no time; a bus rate of `None` makes copies take no time.
#[derive(Clone, Debug, PartialEq)]
pub struct SimTiming {
    /// Launch times by kernel name.
    pub kernels: Vec<KernelTime>,
    /// Bytes per second from pinned host to device.
    pub upload_bytes_per_s: Option<f64>,
    /// Bytes per second from device to pinned host.
    pub download_bytes_per_s: Option<f64>,
    /// Host time each enqueued launch costs the thread that enqueues it (the driver's work).
    pub launch_cost: Duration,
    /// A co-tenant's share of the device: every kernel takes this many times longer (1: the
    /// device is this process's alone).
    pub slowdown: f64,
}

impl Default for SimTiming {
    fn default() -> Self {
        SimTiming {
            kernels: Vec::new(),
            upload_bytes_per_s: None,
            download_bytes_per_s: None,
            launch_cost: Duration::ZERO,
            slowdown: 1.0,
        }
    }
}

/// The time one launch of a kernel takes on a simulated device: `fixed + per_index * count`,
/// `count` being the tile's indices (the whole axis for an unsplit stage).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The kernel's logical name.
    pub kernel: String,
    /// Time of every launch.
    pub fixed: Duration,
    /// Time per index of the launched tile.
    pub per_index: Duration,
}

impl SimTiming {
    /// How long a launch of `kernel` over `count` indices takes, slowed by the co-tenant.
    pub(super) fn kernel_time(&self, kernel: &str, count: u64) -> Duration {
        self.kernels
            .iter()
            .find(|k| k.kernel == kernel)
            .map_or(Duration::ZERO, |k| {
                (k.fixed + k.per_index.mul_f64(count as f64)).mul_f64(self.slowdown.max(0.0))
            })
    }

    /// How long `bytes` take across the bus at `rate`.
    pub(super) fn copy_time(rate: Option<f64>, bytes: usize) -> Duration {
        rate.filter(|&r| r > 0.0).map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(bytes as f64 / r)
        })
    }
}

/// A timed device's engines: whoever holds one runs on it, in the order they asked.
#[derive(Debug, Default)]
pub(super) struct Engines {
    pub(super) compute: Engine,
    pub(super) upload: Engine,
    pub(super) download: Engine,
    /// A co-tenant that arrived while the device runs ([`SimGpu::set_cotenant`]): every
    /// kernel takes this many times longer again, as f64 bits; 0 when there is none.
    pub(super) cotenant: AtomicU64,
}

impl Engines {
    /// The factor a co-tenant that arrived while the device runs adds to every kernel.
    pub(super) fn cotenant(&self) -> f64 {
        match self.cotenant.load(Ordering::Relaxed) {
            0 => 1.0,
            bits => f64::from_bits(bits),
        }
    }
}

/// One engine: a ticket lock, so that streams are served in the order they reached it (a
/// mutex would let the operating system choose, and a simulated run's timing would vary
/// from run to run with it).
#[derive(Debug, Default)]
pub(super) struct Engine {
    /// The next ticket to hand out, and the ticket being served.
    pub(super) tickets: Mutex<(u64, u64)>,
    pub(super) turn: Condvar,
}

impl Engine {
    /// Waits for this caller's turn; the engine is held until the guard drops.
    pub(super) fn hold(&self) -> EngineGuard<'_> {
        let mut tickets = lock(&self.tickets);
        let mine = tickets.0;
        tickets.0 += 1;
        while tickets.1 != mine {
            tickets = self
                .turn
                .wait(tickets)
                .unwrap_or_else(PoisonError::into_inner);
        }
        EngineGuard(self)
    }
}

/// A turn on an [`Engine`], passed on when dropped.
pub(super) struct EngineGuard<'a>(&'a Engine);

impl Drop for EngineGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.tickets).1 += 1;
        self.0.turn.notify_all();
    }
}

/// Sleeps until `deadline` (an operation that took less than its modeled time).
pub(super) fn finish_at(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        std::thread::sleep(left);
    }
}

/// Computes for `time`: a host cost is the CPU's work, so a loaded host stretches it in
/// proportion, where a sleep would wake a scheduling quantum late.
pub(super) fn spin_for(time: Duration) {
    let deadline = Instant::now() + time;
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}
