//! Waiting for deadlines: precise sleeps, then a spin or a tick, and how often the thread was
//! kept off the CPU.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{MAX_SLEEP, SPIN_BEFORE, monotonic_ns};

/// The timer slack the pacing thread asks for: Linux lets a sleep of a normal thread end up
/// to 50 us late by default, half a tick at the ticks bisect-rate uses.
pub(super) const TIMER_SLACK: Duration = Duration::from_micros(1);

/// Asks Linux to end this thread's sleeps within [`TIMER_SLACK`] of their deadline. A refusal
/// costs only accuracy, so it is ignored.
pub(super) fn precise_sleeps() {
    let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK.as_nanos() as libc::c_ulong);
}

/// Involuntary context switches of the calling thread so far; 0 where unavailable.
pub(super) fn involuntary_switches() -> u64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_THREAD).map_or(0, |usage| {
        u64::try_from(usage.involuntary_context_switches()).unwrap_or(0)
    })
}

/// Sleeps until [`SPIN_BEFORE`] ahead of `deadline_ns`, then spins to it; with a non-zero
/// `tick`, sleeps at least `tick` at a time and never spins. Raises `oversleep` to the longest
/// any sleep ran past its request. False when `stop` was set.
pub(super) fn wait_until(
    deadline_ns: u64,
    tick: Duration,
    stop: &AtomicBool,
    oversleep: &mut Duration,
) -> bool {
    let spin_ns = if tick.is_zero() {
        SPIN_BEFORE.as_nanos() as u64
    } else {
        0
    };
    loop {
        let now = monotonic_ns();
        if now >= deadline_ns {
            return true;
        }
        let left = deadline_ns - now;
        if left > spin_ns {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let nap = Duration::from_nanos(left - spin_ns)
                .max(tick)
                .min(MAX_SLEEP);
            std::thread::sleep(nap);
            let slept = Duration::from_nanos(monotonic_ns().saturating_sub(now));
            *oversleep = (*oversleep).max(slept.saturating_sub(nap));
        } else {
            std::hint::spin_loop();
        }
    }
}
