//! CPU affinity: the one mechanism for pinning a worker thread to a core and for keeping a
//! load generator off the cores of the system it measures.
//!
//! A benchmark on a small machine measures its sender as much as its receiver when the two
//! share cores at the scheduler's whim. [`CpuSet`] names the cores a child process may run
//! on, written as Linux writes CPU lists (`0`, `2-3`, `0,4-7`), and [`CpuSet::confine`] makes
//! a [`Command`]'s child start on exactly those cores; [`pin_current_thread`] moves the calling
//! thread to one core (a placement's `pin_cores`), and [`confine_current_thread`] keeps it on a
//! set of cores until its guard drops (the executor's source and collector, off the pinned
//! workers' cores). All through `sched_setaffinity` (nix).
//! Guarantees:
//!
//! - **Checked before use.** [`CpuSet::check_allowed`] refuses a CPU this process may not use
//!   (absent, offline or outside its cpuset), naming the CPUs it may use, so a typo is an
//!   error before any process starts rather than a child that fails to exec.
//! - **Inherited by every thread.** The child's affinity is set between fork and exec, before
//!   it runs a single instruction of its own: every thread it starts inherits the set, unless
//!   it pins itself elsewhere (a placement's `pin_cores` do so for workers).
//! - **Canonical.** A set is sorted and free of duplicates; it displays as the shortest CPU
//!   list, which parses back to the same set.

use std::fmt;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::str::FromStr;

use nix::sched::{self, CpuSet as Mask};
use nix::unistd::Pid;

/// The highest CPU number a set can hold, plus one: what one `cpu_set_t` holds.
const MAX_CPUS: usize = Mask::count();

/// The calling thread, to the affinity calls (pid 0).
const THIS_THREAD: Pid = Pid::from_raw(0);

/// Moves the calling thread onto CPU `cpu` alone. An error (a CPU that does not exist or that
/// this process may not use) leaves its affinity as it was.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    let mut mask = Mask::new();
    mask.set(cpu)?;
    sched::sched_setaffinity(THIS_THREAD, &mask)?;
    Ok(())
}

/// Confines the calling thread to `cpus` until the returned guard drops, when the thread's
/// previous affinity returns. An error leaves its affinity as it was.
pub fn confine_current_thread(cpus: &CpuSet) -> io::Result<AffinityGuard> {
    let previous = sched::sched_getaffinity(THIS_THREAD)?;
    sched::sched_setaffinity(THIS_THREAD, &cpus.mask())?;
    Ok(AffinityGuard { previous })
}

/// The calling thread's affinity before [`confine_current_thread`], restored on drop. Drop it
/// on the thread that made it: affinity is per thread.
#[derive(Debug)]
pub struct AffinityGuard {
    previous: Mask,
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        // The previous set was this thread's own a moment ago, so it can be set again.
        let _ = sched::sched_setaffinity(THIS_THREAD, &self.previous);
    }
}

/// A non-empty set of CPUs, by number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet(Vec<usize>);

/// Why a CPU list was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// The list is empty.
    #[error("an empty CPU list (expected e.g. 0, 2-3 or 0,4-7)")]
    Empty,
    /// A piece of the list is not a CPU number or a range of them.
    #[error("{piece:?} is not a CPU number or a range like 2-5")]
    Syntax {
        /// The piece that failed.
        piece: String,
    },
    /// A range ends before it starts.
    #[error("the range {first}-{last} ends before it starts")]
    Backwards {
        /// Its first CPU.
        first: usize,
        /// Its last CPU.
        last: usize,
    },
    /// A CPU number is past what the system can address.
    #[error("CPU {0} is out of range (at most {max})", max = MAX_CPUS - 1)]
    OutOfRange(usize),
    /// CPUs this process may not run on.
    #[error("CPU list {refused} is outside the CPUs this process may use ({allowed})")]
    NotAllowed {
        /// The refused CPUs, as a list.
        refused: String,
        /// The CPUs this process may use.
        allowed: CpuSet,
    },
}

impl CpuSet {
    /// The CPUs, ascending.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// The CPUs this process may run on now (`sched_getaffinity`).
    pub fn allowed() -> io::Result<CpuSet> {
        let mask = sched::sched_getaffinity(THIS_THREAD)?;
        let cpus: Vec<usize> = (0..MAX_CPUS)
            .filter(|&cpu| mask.is_set(cpu).unwrap_or(false))
            .collect();
        if cpus.is_empty() {
            return Err(io::Error::other("sched_getaffinity returned no CPU"));
        }
        Ok(CpuSet(cpus))
    }

    /// Refuses the set unless this process may run on every CPU in it.
    pub fn check_allowed(&self) -> Result<(), CpuSetError> {
        let allowed = match CpuSet::allowed() {
            Ok(allowed) => allowed,
            // Nothing to check against; `confine` reports the failure when the child starts.
            Err(_) => return Ok(()),
        };
        let refused: Vec<usize> = self
            .0
            .iter()
            .copied()
            .filter(|cpu| !allowed.0.contains(cpu))
            .collect();
        match refused.is_empty() {
            true => Ok(()),
            false => Err(CpuSetError::NotAllowed {
                refused: CpuSet(refused).to_string(),
                allowed,
            }),
        }
    }

    /// These CPUs, less `others`; `None` when nothing is left.
    pub fn without(&self, others: &[usize]) -> Option<CpuSet> {
        let left: Vec<usize> = self
            .0
            .iter()
            .copied()
            .filter(|cpu| !others.contains(cpu))
            .collect();
        (!left.is_empty()).then_some(CpuSet(left))
    }

    /// The set as the system's mask.
    fn mask(&self) -> Mask {
        let mut mask = Mask::new();
        for &cpu in &self.0 {
            // Below CPU_SETSIZE, checked at parse or read from the system, so it cannot fail.
            let _ = mask.set(cpu);
        }
        mask
    }

    /// Makes `command`'s child run on these CPUs from its first instruction. A child whose
    /// affinity cannot be set fails to spawn, with the system's error.
    pub fn confine(&self, command: &mut Command) {
        // Built here, in the parent: between fork and exec only the system call may run.
        let mask = self.mask();
        // SAFETY: the closure makes one async-signal-safe system call on memory it owns.
        unsafe {
            command.pre_exec(move || Ok(sched::sched_setaffinity(THIS_THREAD, &mask)?));
        }
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let cpu = |s: &str| -> Result<usize, CpuSetError> {
            let n: usize = s.trim().parse().map_err(|_| CpuSetError::Syntax {
                piece: s.trim().to_string(),
            })?;
            if n >= MAX_CPUS {
                return Err(CpuSetError::OutOfRange(n));
            }
            Ok(n)
        };
        let mut cpus = Vec::new();
        for piece in text.split(',').filter(|p| !p.trim().is_empty()) {
            match piece.split_once('-') {
                Some((first, last)) => {
                    let (first, last) = (cpu(first)?, cpu(last)?);
                    if last < first {
                        return Err(CpuSetError::Backwards { first, last });
                    }
                    cpus.extend(first..=last);
                }
                None => cpus.push(cpu(piece)?),
            }
        }
        if cpus.is_empty() {
            return Err(CpuSetError::Empty);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuSet(cpus))
    }
}

impl fmt::Display for CpuSet {
    /// The shortest CPU list: runs of three or more as ranges (`0-3,5,7-9`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            match j - i {
                0 => pieces.push(self.0[i].to_string()),
                1 => pieces.extend([self.0[i].to_string(), self.0[j].to_string()]),
                _ => pieces.push(format!("{}-{}", self.0[i], self.0[j])),
            }
            i = j + 1;
        }
        f.write_str(&pieces.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> CpuSet {
        text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn lists_parse_to_sorted_sets_and_display_canonically() {
        assert_eq!(set("0").cpus(), &[0]);
        assert_eq!(set("3,1,2,1").cpus(), &[1, 2, 3]);
        assert_eq!(set("0-3,6").cpus(), &[0, 1, 2, 3, 6]);
        assert_eq!(set(" 4 - 5 , 0 ").cpus(), &[0, 4, 5]);
        assert_eq!(set("0,1,2,3,5,7,8,9").to_string(), "0-3,5,7-9");
        assert_eq!(set("2,3").to_string(), "2,3");
        for text in ["0", "0-3,5,7-9", "1,3", "0-1023"] {
            assert_eq!(set(&set(text).to_string()), set(text), "{text}");
        }
    }

    #[test]
    fn bad_lists_are_refused_with_the_piece_named() {
        assert_eq!("".parse::<CpuSet>(), Err(CpuSetError::Empty));
        assert_eq!(",".parse::<CpuSet>(), Err(CpuSetError::Empty));
        assert_eq!(
            "0,x".parse::<CpuSet>(),
            Err(CpuSetError::Syntax { piece: "x".into() })
        );
        assert_eq!(
            "1-".parse::<CpuSet>(),
            Err(CpuSetError::Syntax { piece: "".into() })
        );
        assert_eq!(
            "5-2".parse::<CpuSet>(),
            Err(CpuSetError::Backwards { first: 5, last: 2 })
        );
        assert_eq!(
            "0,99999".parse::<CpuSet>(),
            Err(CpuSetError::OutOfRange(99999))
        );
        let message = "a-b".parse::<CpuSet>().unwrap_err().to_string();
        assert!(message.contains("\"a\""), "{message}");
    }

    #[test]
    fn cpus_outside_the_process_affinity_are_refused_by_name() {
        let allowed = CpuSet::allowed().expect("sched_getaffinity works on Linux");
        assert_eq!(allowed.check_allowed(), Ok(()));
        let missing = MAX_CPUS - 1;
        assert!(
            !allowed.cpus().contains(&missing),
            "a machine with 1024 CPUs?"
        );
        let err = CpuSet(vec![allowed.cpus()[0], missing])
            .check_allowed()
            .unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!("CPU list {missing} is outside")),
            "{message}"
        );
        assert!(message.contains(&allowed.to_string()), "{message}");
    }

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_alone_and_a_bad_cpu_is_refused() {
        let allowed = CpuSet::allowed().expect("sched_getaffinity works on Linux");
        let last = *allowed.cpus().last().unwrap();
        let seen = std::thread::spawn(move || {
            pin_current_thread(last).expect("an allowed CPU");
            CpuSet::allowed().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen.cpus(), &[last]);
        assert!(pin_current_thread(MAX_CPUS).is_err(), "past CPU_SETSIZE");
        assert!(
            pin_current_thread(MAX_CPUS - 1).is_err(),
            "a CPU this machine lacks"
        );
        assert_eq!(
            CpuSet::allowed().unwrap(),
            allowed,
            "this thread was not moved"
        );
    }

    #[test]
    fn a_confined_child_runs_on_exactly_the_set() {
        let allowed = CpuSet::allowed().expect("sched_getaffinity works on Linux");
        let one = CpuSet(vec![*allowed.cpus().last().unwrap()]);
        let mut command = Command::new("sh");
        command.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        one.confine(&mut command);
        let out = command.output().expect("sh runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().last(),
            Some(one.to_string().as_str()),
            "{text}"
        );
    }

    #[test]
    fn without_removes_cpus_and_says_when_none_are_left() {
        assert_eq!(set("0-3").without(&[1, 2]), Some(set("0,3")));
        assert_eq!(set("0-1").without(&[0, 1]), None);
        assert_eq!(set("2").without(&[]), Some(set("2")));
    }

    #[test]
    fn a_confined_thread_gets_its_cpus_back_when_the_guard_drops() {
        std::thread::spawn(|| {
            let before = CpuSet::allowed().unwrap();
            let one = CpuSet(vec![before.cpus()[0]]);
            {
                let _guard = confine_current_thread(&one).unwrap();
                assert_eq!(CpuSet::allowed().unwrap(), one);
            }
            assert_eq!(CpuSet::allowed().unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
