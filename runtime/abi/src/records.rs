//! The record list (dtype `records`): its header and record as the C ABI lays them out, and
//! [`RecordList`], reading a list's bytes with its consistency checks.
//!
//! A record list is a counted list of fixed-size records: a [`RecordListHeader`], then room
//! for `capacity` records of [`RECORD_BYTES`] bytes, of which the first `count` are valid.
//! What a record's bytes mean is agreed between the kernels that write and read it (the
//! radar's detections, for one); the runtime only counts, moves and compares them as bytes.

/// `KPLACE_RECORD_BYTES`: the bytes of one record of a record list.
pub const RECORD_BYTES: usize = 12;

/// `kplace_record`: one record of a record list, three 32-bit words whose meaning the
/// kernels that write and read the list agree on (the radar's detection: range bin, Doppler
/// bin, power). The runtime moves and compares records as bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Record {
    /// The record's words.
    pub words: [u32; 3],
}

const _: () = assert!(size_of::<Record>() == RECORD_BYTES);

/// `kplace_record_list` without its flexible array: the header of a record list.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecordListHeader {
    /// Valid records that follow.
    pub count: u32,
    /// Records the list has room for.
    pub capacity: u32,
    /// Records that did not fit.
    pub overflow: u32,
    /// Zero.
    pub reserved: u32,
}

/// A read-only view of a record list's bytes (header then records), checked for consistency,
/// read without assuming alignment.
#[derive(Clone, Copy, Debug)]
pub struct RecordList<'a> {
    header: RecordListHeader,
    records: &'a [u8],
}

/// Why bytes are not a valid record list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordListError {
    /// Fewer bytes than a header.
    Truncated,
    /// `count` exceeds `capacity`.
    CountExceedsCapacity,
    /// Fewer bytes than `capacity` records.
    ShorterThanCapacity,
}

impl std::fmt::Display for RecordListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Truncated => "record list is shorter than its header",
            Self::CountExceedsCapacity => "record list count exceeds its capacity",
            Self::ShorterThanCapacity => "record list is shorter than its capacity",
        })
    }
}

impl std::error::Error for RecordListError {}

impl<'a> RecordList<'a> {
    const HEADER: usize = size_of::<RecordListHeader>();

    /// Reads the list in `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, RecordListError> {
        let word = |i: usize| -> Result<u32, RecordListError> {
            let b = bytes
                .get(i * 4..i * 4 + 4)
                .ok_or(RecordListError::Truncated)?;
            Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let header = RecordListHeader {
            count: word(0)?,
            capacity: word(1)?,
            overflow: word(2)?,
            reserved: word(3)?,
        };
        if header.count > header.capacity {
            return Err(RecordListError::CountExceedsCapacity);
        }
        let end = Self::HEADER + header.capacity as usize * RECORD_BYTES;
        if bytes.len() < end {
            return Err(RecordListError::ShorterThanCapacity);
        }
        let valid = Self::HEADER..Self::HEADER + header.count as usize * RECORD_BYTES;
        Ok(Self {
            header,
            records: &bytes[valid],
        })
    }

    /// The list's header.
    pub fn header(&self) -> RecordListHeader {
        self.header
    }

    /// The valid records' bytes, in the producer's order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &'a [u8; RECORD_BYTES]> + 'a {
        self.records.as_chunks::<RECORD_BYTES>().0.iter()
    }
}
