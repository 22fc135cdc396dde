//! What a simulated device counts: every call that enqueues, every capture, and the work they
//! enqueue to run (directly, or by a graph's launch), so tests can assert what crossed the bus
//! and what a frame costs the host ([`SimStats`]).

use super::stream::Op;
use super::*;

/// What a simulated device has been asked to do, counted at enqueue time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Host-to-device copies, and their bytes.
    pub uploads: u64,
    /// Bytes uploaded.
    pub upload_bytes: u64,
    /// Device-to-host copies.
    pub downloads: u64,
    /// Bytes downloaded.
    pub download_bytes: u64,
    /// Event records.
    pub records: u64,
    /// Stream waits on events.
    pub waits: u64,
    /// Host callbacks.
    pub callbacks: u64,
    /// Kernel launches enqueued through [`Gpu::enqueue_launch`].
    pub launches: u64,
    /// Streams created.
    pub streams: u64,
    /// Timing events created (only when profiling).
    pub timing_events: u64,
    /// Synchronizations (never expected on the hot path).
    pub synchronizations: u64,
    /// Device allocations (only at start: pools and kernel states, never per frame).
    pub device_allocations: u64,
    /// Pinned host allocations (only at start, never per frame).
    pub pinned_allocations: u64,
    /// Events created, timing events included (only at start).
    pub events: u64,
    /// Calls that enqueue work to run: copies, records, waits, host callbacks, kernel-library
    /// launches and graph launches (one each, whatever the graph holds). What a frame costs
    /// the host in driver calls.
    pub driver_calls: u64,
    /// Calls a capture recorded instead (once, when a graph is made).
    pub captured_calls: u64,
    /// Graph launches, each also one of [`driver_calls`](Self::driver_calls).
    pub graph_launches: u64,
    /// Graphs instantiated from captures (only at start).
    pub graphs: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) streams_destroyed: AtomicU64,
    pub(super) events_destroyed: AtomicU64,
    pub(super) uploads: AtomicU64,
    pub(super) upload_bytes: AtomicU64,
    pub(super) downloads: AtomicU64,
    pub(super) download_bytes: AtomicU64,
    pub(super) records: AtomicU64,
    pub(super) waits: AtomicU64,
    pub(super) callbacks: AtomicU64,
    pub(super) launches: AtomicU64,
    pub(super) streams: AtomicU64,
    pub(super) timing_events: AtomicU64,
    pub(super) synchronizations: AtomicU64,
    pub(super) device_allocations: AtomicU64,
    pub(super) pinned_allocations: AtomicU64,
    pub(super) events: AtomicU64,
    pub(super) driver_calls: AtomicU64,
    pub(super) captured_calls: AtomicU64,
    pub(super) graph_launches: AtomicU64,
    pub(super) graphs: AtomicU64,
    pub(super) graphs_destroyed: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counters")
    }
}

impl SimGpu {
    /// What has been enqueued so far.
    pub fn stats(&self) -> SimStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SimStats {
            uploads: get(&c.uploads),
            upload_bytes: get(&c.upload_bytes),
            downloads: get(&c.downloads),
            download_bytes: get(&c.download_bytes),
            records: get(&c.records),
            waits: get(&c.waits),
            callbacks: get(&c.callbacks),
            launches: get(&c.launches),
            streams: get(&c.streams),
            timing_events: get(&c.timing_events),
            synchronizations: get(&c.synchronizations),
            device_allocations: get(&c.device_allocations),
            pinned_allocations: get(&c.pinned_allocations),
            events: get(&c.events),
            driver_calls: get(&c.driver_calls),
            captured_calls: get(&c.captured_calls),
            graph_launches: get(&c.graph_launches),
            graphs: get(&c.graphs),
        }
    }

    /// Counts `op` as work enqueued to run (directly, or by a graph's launch).
    pub(super) fn count_work(&self, op: &Op) {
        let c = &self.counters;
        match op {
            Op::Copy { bytes, upload, .. } => {
                let (count, total) = if *upload {
                    (&c.uploads, &c.upload_bytes)
                } else {
                    (&c.downloads, &c.download_bytes)
                };
                bump(count, 1);
                bump(total, *bytes as u64);
            }
            Op::Record { .. } => bump(&c.records, 1),
            Op::Wait { .. } => bump(&c.waits, 1),
            Op::Host { .. } => bump(&c.callbacks, 1),
            Op::Launch(_) => bump(&c.launches, 1),
            Op::Graph(graph) => graph.ops.iter().for_each(|op| self.count_work(op)),
            Op::Flush(_) => {}
        }
    }
}
