//! Reading and writing the radar's detection lists: `kplace_record_list` tensors whose records
//! are [`Detection`]s.
//!
//! A list tensor of shape `[capacity]` is a [`RecordListHeader`] followed by `capacity`
//! records. [`ListWriter`] fills one in a producer's order, keeping the first `capacity`
//! records and counting the rest as overflow; [`read_list`] validates a list before a
//! consumer trusts its count.

use kplace_abi::export::KernelError;
use kplace_abi::{RecordListHeader, Tensor};
use kplace_kernels::Detection;

/// Appends records to an output list; [`finish`](Self::finish) writes the header.
pub(crate) struct ListWriter<'a> {
    header: &'a mut RecordListHeader,
    records: &'a mut [Detection],
    count: usize,
    overflow: u64,
}

impl<'a> ListWriter<'a> {
    /// Starts an empty list in `tensor`, whose descriptor was checked to be `records
    /// [capacity]` with enough bytes.
    ///
    /// # Safety
    /// The tensor's data must be valid for writes of its bytes and accessed by nothing else
    /// while the writer lives.
    pub(crate) unsafe fn new(tensor: &'a Tensor, capacity: u32) -> Self {
        let header = tensor.data.cast::<RecordListHeader>();
        // SAFETY: the data is 64-byte aligned (checked to be at least 4-aligned, all these
        // types need), holds a header then `capacity` records (checked at create and launch),
        // and is exclusive to this launch per the caller's contract.
        unsafe {
            let records = header.add(1).cast::<Detection>();
            Self {
                header: &mut *header,
                records: std::slice::from_raw_parts_mut(records, capacity as usize),
                count: 0,
                overflow: 0,
            }
        }
    }

    /// Appends a record, or counts it as overflow when the list is full.
    #[inline]
    pub(crate) fn push(&mut self, record: Detection) {
        match self.records.get_mut(self.count) {
            Some(slot) => {
                *slot = record;
                self.count += 1;
            }
            None => self.overflow += 1,
        }
    }

    /// Writes the header: count, capacity, overflow (saturating at `u32::MAX`), reserved 0.
    pub(crate) fn finish(self) {
        *self.header = RecordListHeader {
            count: self.count as u32,
            capacity: self.records.len() as u32,
            overflow: u32::try_from(self.overflow).unwrap_or(u32::MAX),
            reserved: 0,
        };
    }
}

/// The header and valid records of an input list with room for `capacity` records.
///
/// # Safety
/// The tensor's data must be valid for reads of its bytes (a header then `capacity` records)
/// and not written while the returned references live.
pub(crate) unsafe fn read_list<'a>(
    tensor: &'a Tensor,
    capacity: u32,
    what: &str,
) -> Result<(RecordListHeader, &'a [Detection]), KernelError> {
    let header_ptr = tensor.data.cast::<RecordListHeader>();
    // SAFETY: aligned and large enough for a header (checked at create and launch); nothing
    // writes it during the launch per the caller's contract.
    let header = unsafe { *header_ptr };
    if header.count > capacity || header.count > header.capacity {
        return Err(KernelError::invalid(format!(
            "{what}: the list claims {} records but has room for {} (header capacity {})",
            header.count, capacity, header.capacity
        )));
    }
    // SAFETY: `count` records follow the header within the tensor's checked bytes.
    let records = unsafe {
        std::slice::from_raw_parts(header_ptr.add(1).cast::<Detection>(), header.count as usize)
    };
    Ok((header, records))
}
