//! Ending a run cleanly on SIGINT, SIGTERM or SIGHUP.
//!
//! [`install`] replaces the three signals' default action (death on the spot) with a handler
//! that only records the signal. Sources poll [`requested`] (through
//! [`crate::executor::Ingest::stopping`]) and stop taking input; the frames in flight finish,
//! and the program writes its report and exits with [`exit_code`] (130 for SIGINT, 143 for
//! SIGTERM, 129 for SIGHUP, as a shell reports a process killed by them). SIGHUP is the one a
//! closed terminal or a dropped SSH session sends: it must not cost the outputs either. The
//! handler is installed with `SA_RESETHAND`, so a second signal of the same kind kills at
//! once: a wedged run can still be stopped. Until `install` is called, [`requested`] is always
//! false.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// The first signal received; 0 for none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    let _ = SIGNAL.compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire);
}

/// Records SIGINT, SIGTERM and SIGHUP instead of dying of them (see the module docs).
pub fn install() -> io::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(record),
        SaFlags::SA_RESETHAND | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }?;
    }
    Ok(())
}

/// The signal that asked the run to stop, if one did.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::Acquire) {
        0 => None,
        s => Some(s),
    }
}

/// Whether a signal asked the run to stop.
pub fn requested() -> bool {
    SIGNAL.load(Ordering::Relaxed) != 0
}

/// The signal's name: `SIGINT`, `SIGTERM`, `SIGHUP`, or its number.
pub fn name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

/// The exit status of a program that stopped for `signal`: 128 plus its number.
pub fn exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(255)
}
