//! The processes seen on a GPU: their names and their roles relative to this process, from
//! `/proc`.

use std::collections::HashMap;
use std::path::Path;

use super::ProcessRole;
use kplace_core::os::files::{MAX_PROC_BYTES, read_text_bounded};

/// How far up the parent chain a process is followed to find whether this process started it.
const MAX_ANCESTRY: usize = 64;

/// `pid`'s role relative to `own`, following parents through `parent_of` (`None`: unknown or
/// gone) at most [`MAX_ANCESTRY`] steps; stops at a loop or the root.
pub(super) fn classify(pid: u32, own: u32, parent_of: impl Fn(u32) -> Option<u32>) -> ProcessRole {
    if pid == own {
        return ProcessRole::Ours;
    }
    let mut p = pid;
    for _ in 0..MAX_ANCESTRY {
        match parent_of(p) {
            Some(parent) if parent == own => return ProcessRole::Child,
            Some(parent) if parent != 0 && parent != p => p = parent,
            _ => break,
        }
    }
    ProcessRole::Other
}

/// The parent of `pid` from `/proc/<pid>/stat`; `None` when it cannot be read (gone, another
/// pid namespace, not Linux).
pub(super) fn proc_parent(pid: u32) -> Option<u32> {
    let path = format!("/proc/{pid}/stat");
    let stat = read_text_bounded(Path::new(&path), MAX_PROC_BYTES, "process status").ok()?;
    parse_stat_parent(&stat)
}

/// The parent pid in a `/proc/<pid>/stat` line: `pid (comm) state ppid ...`, where comm may
/// itself hold spaces and parentheses, so the fields after the last `)` are read.
pub(super) fn parse_stat_parent(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid`'s name from `/proc/<pid>/comm`.
pub(super) fn proc_name(pid: u32) -> Option<String> {
    let path = format!("/proc/{pid}/comm");
    let comm = read_text_bounded(Path::new(&path), MAX_PROC_BYTES, "process name").ok()?;
    let name = comm.trim_end_matches('\n');
    (!name.is_empty()).then(|| name.to_string())
}

/// Names and roles of the pids seen so far, each looked up once.
pub(super) struct ProcessBook {
    pub(super) own: u32,
    pub(super) known: HashMap<u32, (Option<String>, ProcessRole)>,
}

impl ProcessBook {
    pub(super) fn new() -> Self {
        ProcessBook {
            own: std::process::id(),
            known: HashMap::new(),
        }
    }

    pub(super) fn resolve(&mut self, pid: u32) -> (Option<String>, ProcessRole) {
        let own = self.own;
        self.known
            .entry(pid)
            .or_insert_with(|| (proc_name(pid), classify(pid, own, proc_parent)))
            .clone()
    }
}
