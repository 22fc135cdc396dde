//! `radar.cluster`: groups detections into 8-connected clusters and reports the strongest
//! cell of each.
//!
//! - Input 0: `detections [capacity_in]`, sorted by `(range_bin, doppler_bin)` without
//!   duplicates, as `radar.cfar` writes them (checked: an unsorted list is an error).
//! - Output 0: `detections [capacity_out]`: one record per cluster, its strongest cell, sorted
//!   by `(range_bin, doppler_bin)`; the first `capacity_out` are kept, the rest counted in
//!   `overflow`.
//! - Parameters: `range_bins` (N) and `doppler_bins` (M), both required: the map's shape,
//!   which the wrap-around needs.
//! - Not split.
//!
//! Two detections are neighbours when they differ by at most one bin on each axis, counting
//! circularly (bin 0 neighbours bin N-1, and likewise for M); clusters are the connected
//! components. The strongest cell is the one with the largest power in the total order of
//! [`f32::total_cmp`], ties going to the smallest `(range_bin, doppler_bin)`, so the output
//! is the same bytes whatever the order in which a backend visits cells.
//!
//! An input list that overflowed is clustered as it is: the kernel sees only the records the
//! list holds, and the output's `overflow` counts only clusters that did not fit the output.
//!
//! The method: union-find (union by smaller index, path halving) over the input's records,
//! each record joined with the four neighbours of its forward half-neighbourhood, found by
//! binary search in the sorted input: O(D log D) for D detections. Then each component's
//! strongest member is chosen, and members are emitted in input order when they are their
//! component's choice, which is already the required order. The union-find arrays live in
//! the workspace: 8 bytes per input record.

use std::cmp::Ordering;
use std::ffi::CStr;

use kplace_abi::export::ports::{capacity_of, expect_dims};
use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace, TensorDesc};
use kplace_kernels::Detection;
use kplace_kernels::config::unsplit;
use kplace_kernels::names::CLUSTER;

use crate::detections::{ListWriter, read_list};
use crate::tensor::{PORTS, workspace};

/// The forward half of the 8-neighbourhood, as (range, Doppler) offsets modulo (N, M): every
/// neighbouring pair differs by one of these in one direction or the other.
const FORWARD: [(u32, i8); 4] = [(0, 1), (1, -1), (1, 0), (1, 1)];

/// No record chosen yet.
const NONE: u32 = u32::MAX;

/// The `radar.cluster` kernel state: the map's shape and the two lists' capacities.
#[derive(Debug)]
pub struct Cluster {
    input: TensorDesc,
    output: TensorDesc,
    /// N.
    range_bins: u32,
    /// M.
    doppler_bins: u32,
    capacity_in: u32,
    capacity_out: u32,
}

fn required_bins(config: &Config<'_>, name: &str, what: &str) -> Result<u32, KernelError> {
    match config.parse_param::<u32>(name)? {
        Some(0) => Err(KernelError::invalid(format!(
            "parameter {name} must be at least 1"
        ))),
        Some(bins) => Ok(bins),
        None => Err(KernelError::invalid(format!(
            "parameter {name} is required: the map's {what}, which wrap-around needs"
        ))),
    }
}

/// Whether record `a` is a stronger choice than record `b`, which precedes it in the input.
#[inline]
fn stronger(a: &Detection, b: &Detection) -> bool {
    a.power.total_cmp(&b.power) == Ordering::Greater
}

/// The root of `i`'s component, halving the path on the way.
#[inline]
fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        let grandparent = parent[parent[i as usize] as usize];
        parent[i as usize] = grandparent;
        i = grandparent;
    }
    i
}

impl KernelImpl for Cluster {
    const NAME: &'static CStr = CLUSTER.c_str();
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["range_bins", "doppler_bins"])?;
        unsplit(config, CLUSTER)?;
        let range_bins = required_bins(config, "range_bins", "range bins N")?;
        let doppler_bins = required_bins(config, "doppler_bins", "Doppler bins M")?;
        let input = PORTS.port(config.inputs(), 0, "input 0", Dtype::RECORDS, "[capacity]")?;
        let output = PORTS.port(
            config.outputs(),
            0,
            "output 0",
            Dtype::RECORDS,
            "[capacity]",
        )?;
        let capacity_in = capacity_of(&input, "input 0")?;
        let capacity_out = capacity_of(&output, "output 0")?;
        expect_dims(
            &input,
            "input 0",
            &[u64::from(capacity_in)],
            "a detection list",
        )?;
        expect_dims(
            &output,
            "output 0",
            &[u64::from(capacity_out)],
            "a detection list",
        )?;
        Ok(Self {
            input,
            output,
            range_bins,
            doppler_bins,
            capacity_in,
            capacity_out,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        2 * u64::from(self.capacity_in) * size_of::<u32>() as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        // SAFETY: checked against the descriptor create accepted; nothing writes the input
        // while the stage runs.
        let (_, records) = unsafe { read_list(input, self.capacity_in, "input 0") }?;
        self.check_order(records)?;

        let n = records.len();
        // SAFETY: the workspace is this launch's alone (ABI rule); its size was checked.
        let ws = unsafe { workspace::<u32>(launch, 2 * self.capacity_in as usize) }?;
        let (parent, best) = ws.split_at_mut(self.capacity_in as usize);
        let (parent, best) = (&mut parent[..n], &mut best[..n]);
        for (i, p) in parent.iter_mut().enumerate() {
            *p = i as u32;
        }
        best.fill(NONE);

        let (nr, nd) = (self.range_bins, self.doppler_bins);
        for (i, a) in records.iter().enumerate() {
            for (dr, dd) in FORWARD {
                let r = (a.range_bin + dr) % nr;
                let d =
                    ((i64::from(a.doppler_bin) + i64::from(dd)).rem_euclid(i64::from(nd))) as u32;
                if let Ok(j) =
                    records.binary_search_by(|x| (x.range_bin, x.doppler_bin).cmp(&(r, d)))
                {
                    let (ri, rj) = (find(parent, i as u32), find(parent, j as u32));
                    parent[ri.max(rj) as usize] = ri.min(rj);
                }
            }
        }
        for (i, a) in records.iter().enumerate() {
            let root = find(parent, i as u32) as usize;
            if best[root] == NONE || stronger(a, &records[best[root] as usize]) {
                best[root] = i as u32;
            }
        }

        // SAFETY: the output was checked to hold a header and `capacity_out` records; an
        // unsplit stage's output is this launch's alone.
        let mut list = unsafe { ListWriter::new(output, self.capacity_out) };
        for (i, a) in records.iter().enumerate() {
            if best[find(parent, i as u32) as usize] == i as u32 {
                list.push(*a);
            }
        }
        list.finish();
        Ok(())
    }
}

impl Cluster {
    /// Fails unless the records are inside the map and strictly increasing in
    /// `(range_bin, doppler_bin)`, which the neighbour search relies on.
    fn check_order(&self, records: &[Detection]) -> Result<(), KernelError> {
        let mut previous: Option<(u32, u32)> = None;
        for (i, a) in records.iter().enumerate() {
            let key = (a.range_bin, a.doppler_bin);
            if a.range_bin >= self.range_bins || a.doppler_bin >= self.doppler_bins {
                return Err(KernelError::invalid(format!(
                    "input 0: record {i} at {key:?} is outside the {} x {} map",
                    self.range_bins, self.doppler_bins
                )));
            }
            if previous.is_some_and(|p| p >= key) {
                return Err(KernelError::invalid(format!(
                    "input 0: record {i} at {key:?} does not follow {:?}; the list must be \
                     sorted by (range_bin, doppler_bin) without duplicates",
                    previous.unwrap_or_default()
                )));
            }
            previous = Some(key);
        }
        Ok(())
    }
}
