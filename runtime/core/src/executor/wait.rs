//! How the executor's threads wait for each other: spin briefly, then sleep.
//!
//! Handing work to a sleeping thread costs the sender a wake-up: on a virtual machine whose
//! other vCPU is halted, 30-40 us (measured by `bench/src/bin/overhead.rs`), as much as a
//! small kernel. A thread that expects a hand-off soon can instead poll for it for a while
//! ([`spin`]), and sleep only after that. The placement's `runtime.spin_us` sets how long;
//! zero (the default) sleeps at once. Spinning uses crossbeam's backoff: a few busy rounds,
//! then yielding the core to any other thread that is ready to run, so a spinning thread
//! delays no one, but it is never idle: its core shows as used.
//!
//! Blocking on a crossbeam channel allocates, once: a thread's wait context the first time
//! that thread blocks on any channel, and a channel's list of waiting receivers the first time
//! as many threads wait on it at once. [`prepare_to_block`] and [`prepare_thread`] make those
//! allocations at start-up, so that a thread that first has to wait deep into a run (a source
//! that finds every slot busy only under load) allocates nothing on the hot path.

use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Select, TryRecvError};

/// Polls `poll` until it yields a value or `budget` has passed. Returns the value, if any, and
/// how long it spun (zero when `budget` is zero: then `poll` is not called).
pub(super) fn spin<T>(
    budget: Duration,
    mut poll: impl FnMut() -> Option<T>,
) -> (Option<T>, Duration) {
    if budget.is_zero() {
        return (None, Duration::ZERO);
    }
    let from = Instant::now();
    let backoff = crossbeam::utils::Backoff::new();
    loop {
        if let Some(value) = poll() {
            return (Some(value), from.elapsed());
        }
        let spun = from.elapsed();
        if spun >= budget {
            return (None, spun);
        }
        backoff.snooze();
    }
}

/// [`spin`] on one channel: `Some(Some(value))` when a value came, `Some(None)` when the
/// channel disconnected, `None` when `budget` passed with neither (then block on it).
pub(super) fn spin_recv<T>(budget: Duration, receiver: &Receiver<T>) -> Option<Option<T>> {
    let (polled, _) = spin(budget, || match receiver.try_recv() {
        Ok(value) => Some(Some(value)),
        Err(TryRecvError::Disconnected) => Some(None),
        Err(TryRecvError::Empty) => None,
    });
    polled
}

/// Registers `waiters` waits on the empty `receiver` with a deadline already past: crossbeam
/// grows the channel's list of waiting receivers to hold `waiters` (it never shrinks) and
/// makes the calling thread's wait context, and nothing is taken. Does nothing when
/// `receiver` is not empty (a wait would then take a value). Call it before any other thread
/// uses the channel.
pub(super) fn prepare_to_block<T>(receiver: &Receiver<T>, waiters: usize) {
    if !receiver.is_empty() {
        return;
    }
    let mut select = Select::new();
    for _ in 0..waiters.max(1) {
        select.recv(receiver);
    }
    if let Ok(taken) = select.select_timeout(Duration::ZERO) {
        // Only if another thread sent meanwhile, which the caller rules out; complete the
        // operation (crossbeam requires it) and keep nothing.
        let _ = taken.recv(receiver);
    }
}

/// Makes the calling thread's wait context now (see the module's docs), on a private channel.
pub(super) fn prepare_thread() {
    let (_keep_open, receiver) = crossbeam::channel::bounded::<()>(1);
    prepare_to_block(&receiver, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_budget_never_polls() {
        let (value, spun) = spin(Duration::ZERO, || -> Option<()> { panic!("polled") });
        assert!(value.is_none());
        assert_eq!(spun, Duration::ZERO);
    }

    #[test]
    fn returns_what_the_poll_finds() {
        let mut polls = 0;
        let (value, _) = spin(Duration::from_secs(10), || {
            polls += 1;
            (polls == 3).then_some(polls)
        });
        assert_eq!(value, Some(3));
    }

    #[test]
    fn preparing_to_block_takes_nothing_and_leaves_the_channel_working() {
        let (tx, rx) = crossbeam::channel::bounded(2);
        prepare_to_block(&rx, 3);
        tx.send(1).unwrap();
        prepare_to_block(&rx, 3);
        assert_eq!(rx.len(), 1, "a value waiting is left alone");
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(1));
        prepare_thread();
        let waiter = std::thread::spawn(move || rx.recv_timeout(Duration::from_secs(5)));
        tx.send(2).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(2));
    }

    #[test]
    fn spin_recv_tells_a_value_from_a_closed_channel_and_from_nothing() {
        let (tx, rx) = crossbeam::channel::unbounded();
        let budget = Duration::from_millis(2);
        assert_eq!(spin_recv(budget, &rx), None::<Option<u8>>, "nothing came");
        tx.send(7).unwrap();
        assert_eq!(spin_recv(budget, &rx), Some(Some(7)));
        drop(tx);
        assert_eq!(spin_recv(budget, &rx), Some(None), "disconnected");
    }

    #[test]
    fn gives_up_after_its_budget() {
        let (value, spun) = spin(Duration::from_millis(2), || None::<()>);
        assert!(value.is_none());
        assert!(spun >= Duration::from_millis(2), "{spun:?}");
    }
}
