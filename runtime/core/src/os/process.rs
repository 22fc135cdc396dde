//! Processes: signals to children, dying with the parent, a reaped child's CPU time, the
//! calling thread's nice value, SIGPIPE's disposition, and a child's output drained with a
//! bound ([`drain_tail`]).
//!
//! # Guarantees
//! - [`terminate`] and [`send_signal`] are for a pid the caller names as its own unreaped child,
//!   so the pid cannot have been reused; a child that already exited is not an error.
//! - [`die_with_parent`] and [`term_on_parent_death`] close the race of a parent that dies
//!   before the request: the child checks its parent afterwards and exits (or the caller polls
//!   [`parent_pid`]).
//! - Nothing here panics or allocates between fork and exec.

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::prctl;
use nix::sys::signal::{self, SigHandler, Signal};
use nix::unistd::{self, Pid};

/// Sends SIGTERM to `pid`, a child of this process not yet reaped (so the pid cannot have been
/// reused; a child that exited but awaits reaping takes the signal harmlessly). `Ok(false)`
/// when no such process exists; an error for anything else.
pub fn terminate(pid: u32) -> io::Result<bool> {
    send_signal(pid, Signal::SIGTERM as i32)
}

/// Sends signal number `signal` (e.g. one [`crate::interrupt`] received, to forward it) to
/// `pid`, a child of this process not yet reaped; `Ok(false)` when no such process exists.
pub fn send_signal(pid: u32, signal: i32) -> io::Result<bool> {
    let pid =
        i32::try_from(pid).map_err(|_| io::Error::other(format!("pid {pid} out of range")))?;
    let signal = Signal::try_from(signal)?;
    match signal::kill(Pid::from_raw(pid), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The calling process's parent pid.
pub fn parent_pid() -> u32 {
    u32::try_from(unistd::getppid().as_raw()).unwrap_or(0)
}

/// The calling process's user id.
pub fn user_id() -> u32 {
    unistd::getuid().as_raw()
}

/// Asks Linux to send this process SIGTERM when its parent dies (strictly: when the thread
/// that forked it exits). A parent that died before the call is missed: poll [`parent_pid`]
/// against the expected one to catch it.
pub fn term_on_parent_death() -> io::Result<()> {
    prctl::set_pdeathsig(Signal::SIGTERM)?;
    Ok(())
}

/// Makes `command`'s child get SIGTERM when this process dies, however it dies; a child whose
/// parent died before the request exits at once (status 1) instead of running orphaned.
pub fn die_with_parent(command: &mut Command) {
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe system
    // calls (prctl, getppid, and _exit, which nix lacks: it ends the child before exec,
    // running nothing of the parent's); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            prctl::set_pdeathsig(Signal::SIGTERM)?;
            // The parent may have died before the prctl: then nobody would send the signal.
            if parent_pid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    };
}

/// Reaps `child` if it has exited, returning the CPU time (user + system) it and its reaped
/// descendants used; `None` while it runs. After `Some`, the child is reaped: do not wait for
/// it again through `std`.
pub fn reap_with_usage(child: &Child) -> io::Result<Option<Duration>> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::other(format!("pid {} out of range", child.id())))?;
    let mut status = 0;
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is the caller's own unreaped child; status and usage are ours to fill.
    // nix has no wait4.
    let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    match reaped {
        0 => Ok(None),
        p if p < 0 => Err(io::Error::last_os_error()),
        _ => {
            let tv = |t: libc::timeval| {
                Duration::new(
                    u64::try_from(t.tv_sec).unwrap_or(0),
                    u32::try_from(t.tv_usec).unwrap_or(0) * 1000,
                )
            };
            Ok(Some(tv(usage.ru_utime) + tv(usage.ru_stime)))
        }
    }
}

/// Sets the calling thread's nice value (Linux applies PRIO_PROCESS with who 0 to the calling
/// thread); an error when not allowed (lowering it needs CAP_SYS_NICE).
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority takes plain integers and touches no memory. nix has no setpriority.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's nice value.
pub fn nice() -> i32 {
    // SAFETY: getpriority takes plain integers and touches no memory; -1 is a valid answer,
    // never confused with a failure, which needs an invalid `which` or `who`.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// Restores SIGPIPE's default disposition, so a write to a closed pipe ends the process quietly
/// (Rust starts programs with it ignored). Call it first in `main`, before any thread exists.
pub fn default_sigpipe() -> io::Result<()> {
    // SAFETY: SIG_DFL installs no handler, so no handler can break async-signal safety.
    unsafe { signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) }?;
    Ok(())
}

/// Reads `pipe` (a child's stderr) to its end, so that the child never blocks on a full pipe,
/// keeping only its last `keep` bytes, as text: a child that writes without end costs this
/// process `2 * keep` bytes at most, not all it wrote. What was dropped before the tail is
/// counted, `... (N bytes before) `, in front of it.
pub fn drain_tail(mut pipe: impl Read, keep: usize) -> String {
    let mut tail = Vec::new();
    let mut dropped = 0usize;
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => tail.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        if tail.len() > keep.saturating_mul(2) {
            let cut = tail.len() - keep;
            tail.drain(..cut);
            dropped += cut;
        }
    }
    if tail.len() > keep {
        let cut = tail.len() - keep;
        tail.drain(..cut);
        dropped += cut;
    }
    // A cut in the middle of a character starts at the next one.
    let start = if dropped > 0 {
        tail.iter()
            .take(3)
            .take_while(|b| (0x80..0xc0).contains(*b))
            .count()
    } else {
        0
    };
    let text = String::from_utf8_lossy(&tail[start..]);
    match dropped + start {
        0 => text.into_owned(),
        before => format!("... ({before} bytes before) {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A child that is killed and reaped on drop unless the test reaped it.
    struct Sleeper {
        child: Child,
        reaped: bool,
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            if !self.reaped {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }

    #[test]
    fn a_terminated_child_is_reaped_with_its_cpu_time() {
        let mut sleeper = Sleeper {
            child: Command::new("sleep").arg("30").spawn().expect("sleep runs"),
            reaped: false,
        };
        assert_eq!(
            reap_with_usage(&sleeper.child).unwrap(),
            None,
            "still running"
        );
        assert!(terminate(sleeper.child.id()).unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        let used = loop {
            if let Some(used) = reap_with_usage(&sleeper.child).unwrap() {
                sleeper.reaped = true;
                break used;
            }
            assert!(Instant::now() < deadline, "SIGTERM ended sleep");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(used < Duration::from_secs(5), "sleep barely runs: {used:?}");
        assert!(
            reap_with_usage(&sleeper.child).is_err(),
            "reaped: no such child any more"
        );
    }

    #[test]
    fn a_child_dies_with_its_parent_request_in_place() {
        // The request runs between fork and exec; the child then runs as usual, our child.
        let mut command = Command::new("sh");
        command.args(["-c", "echo $PPID"]);
        die_with_parent(&mut command);
        let out = command.output().expect("sh runs");
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().last(),
            Some(std::process::id().to_string().as_str())
        );
    }

    #[test]
    fn nice_values_are_read_and_raised() {
        let before = std::thread::spawn(|| {
            let before = nice();
            set_nice(before + 1).expect("raising nice is always allowed");
            (before, nice())
        })
        .join()
        .unwrap();
        assert_eq!(before.1, before.0 + 1);
        assert_eq!(nice(), before.0, "only that thread changed");
        assert!(parent_pid() > 0);
    }

    #[test]
    fn a_drained_pipe_keeps_its_tail_only() {
        assert_eq!(drain_tail(&b"short"[..], 16), "short");
        let mut long = "x".repeat(1 << 20).into_bytes();
        long.extend_from_slice("é the end".as_bytes());
        let text = drain_tail(&long[..], 9);
        assert_eq!(
            text,
            format!("... ({} bytes before)  the end", (1 << 20) + 2)
        );
        assert!(drain_tail(std::io::repeat(b'y').take(10 << 20), 4096).len() < 4200);
    }
}
