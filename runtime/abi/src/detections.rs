//! [`DetectionList`]: reading a detection list's bytes with its consistency checks.

use crate::{Detection, DetectionListHeader};

/// A read-only view of a detection list's bytes (header then records), checked for
/// consistency, read without assuming alignment.
#[derive(Clone, Copy, Debug)]
pub struct DetectionList<'a> {
    header: DetectionListHeader,
    records: &'a [u8],
}

/// Why bytes are not a valid detection list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetectionListError {
    /// Fewer bytes than a header.
    Truncated,
    /// `count` exceeds `capacity`.
    CountExceedsCapacity,
    /// Fewer bytes than `capacity` records.
    ShorterThanCapacity,
}

impl std::fmt::Display for DetectionListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Truncated => "detection list is shorter than its header",
            Self::CountExceedsCapacity => "detection list count exceeds its capacity",
            Self::ShorterThanCapacity => "detection list is shorter than its capacity",
        })
    }
}

impl std::error::Error for DetectionListError {}

impl<'a> DetectionList<'a> {
    const HEADER: usize = size_of::<DetectionListHeader>();
    const RECORD: usize = size_of::<Detection>();

    /// Reads the list in `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, DetectionListError> {
        let word = |i: usize| -> Result<u32, DetectionListError> {
            let b = bytes
                .get(i * 4..i * 4 + 4)
                .ok_or(DetectionListError::Truncated)?;
            Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let header = DetectionListHeader {
            count: word(0)?,
            capacity: word(1)?,
            overflow: word(2)?,
            reserved: word(3)?,
        };
        if header.count > header.capacity {
            return Err(DetectionListError::CountExceedsCapacity);
        }
        let end = Self::HEADER + header.capacity as usize * Self::RECORD;
        if bytes.len() < end {
            return Err(DetectionListError::ShorterThanCapacity);
        }
        let valid = Self::HEADER..Self::HEADER + header.count as usize * Self::RECORD;
        Ok(Self {
            header,
            records: &bytes[valid],
        })
    }

    /// The list's header.
    pub fn header(&self) -> DetectionListHeader {
        self.header
    }

    /// The valid records, in the producer's order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = Detection> + 'a {
        self.records.chunks_exact(Self::RECORD).map(|r| {
            let w = |i: usize| [r[i], r[i + 1], r[i + 2], r[i + 3]];
            Detection {
                range_bin: u32::from_ne_bytes(w(0)),
                doppler_bin: u32::from_ne_bytes(w(4)),
                power: f32::from_ne_bytes(w(8)),
            }
        })
    }
}
