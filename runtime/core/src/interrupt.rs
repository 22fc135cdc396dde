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
//!
//! A program that must act at once rather than poll (end a child process, stop a sender
//! mid-batch) registers [`on_request`]: the handler wakes a thread of its own through a pipe,
//! and that thread calls it. This is the one stop mechanism of every kplace command.

use std::io::{self, Read};
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// The first signal received; 0 for none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The write end of the pipe that wakes [`on_request`]'s thread; -1 while none watches.
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn record(signal: libc::c_int) {
    // Only an atomic store and a write(2): both async-signal-safe.
    let _ = SIGNAL.compare_exchange(0, signal, Ordering::AcqRel, Ordering::Acquire);
    let fd = WAKE.load(Ordering::Acquire);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: `fd` is the pipe's write end, open for the rest of the process (never
        // closed once stored), and `byte` is a live one-byte buffer; a full pipe only fails
        // the write, and the watcher has been woken already then.
        let _ = unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
    }
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

/// Calls `f` with the signal, once, on a thread of its own, as soon as a signal asks the run to
/// stop (at once if one already did). Call [`install`] first; one watcher per process (a
/// second call is refused).
pub fn on_request(f: impl FnOnce(i32) + Send + 'static) -> io::Result<()> {
    let (read, write) = nix::unistd::pipe()?;
    let write = write.into_raw_fd();
    if WAKE
        .compare_exchange(-1, write, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // SAFETY: `write` came from `pipe` above and was stored nowhere: this is its one close.
        unsafe { libc::close(write) };
        return Err(io::Error::other("a stop watcher is registered already"));
    }
    std::thread::Builder::new()
        .name("kplace-stop".into())
        .spawn(move || {
            let mut pipe = std::fs::File::from(read);
            let mut byte = [0u8];
            loop {
                // Checked before each wait: a signal that came before the pipe was stored
                // wrote nothing to it.
                if let Some(signal) = received() {
                    f(signal);
                    return;
                }
                match pipe.read(&mut byte) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        })?;
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
