//! [`Detection`]: the record the radar's CFAR and clustering kernels write in a record list
//! (dtype `records`): one detected cell, or a cluster's strongest cell.
//!
//! The ABI's record list carries records of 12 opaque bytes; what those bytes mean is this
//! workload's, so the type lives here, shared by every backend and by the judge that reads
//! the runtime's output.

/// One detected cell of a range-Doppler map, or the strongest cell of a cluster: a record of
/// the ABI's record list (three 32-bit words, in the machine's byte order).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Detection {
    /// Range bin, `0..N`.
    pub range_bin: u32,
    /// Doppler bin, `0..M` (unshifted: negative velocities wrap to the top).
    pub doppler_bin: u32,
    /// The cell's power, `|X|^2`.
    pub power: f32,
}

/// The bytes of one record: a [`Detection`]'s size.
pub const DETECTION_BYTES: usize = 12;

const _: () = assert!(size_of::<Detection>() == DETECTION_BYTES);
#[cfg(feature = "abi")]
const _: () = assert!(DETECTION_BYTES == kplace_abi::RECORD_BYTES);

impl Detection {
    /// The detection a record's bytes hold.
    pub fn from_record(record: &[u8; DETECTION_BYTES]) -> Detection {
        let w = |i: usize| [record[i], record[i + 1], record[i + 2], record[i + 3]];
        Detection {
            range_bin: u32::from_ne_bytes(w(0)),
            doppler_bin: u32::from_ne_bytes(w(4)),
            power: f32::from_ne_bytes(w(8)),
        }
    }

    /// The detection as a record's bytes.
    pub fn to_record(self) -> [u8; DETECTION_BYTES] {
        let mut out = [0; DETECTION_BYTES];
        out[..4].copy_from_slice(&self.range_bin.to_ne_bytes());
        out[4..8].copy_from_slice(&self.doppler_bin.to_ne_bytes());
        out[8..].copy_from_slice(&self.power.to_ne_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_holds_the_bins_then_the_power_as_the_struct_lays_them_out() {
        let d = Detection {
            range_bin: 7,
            doppler_bin: 0x0102_0304,
            power: 2.5,
        };
        let record = d.to_record();
        assert_eq!(record[4..8], 0x0102_0304u32.to_ne_bytes());
        assert_eq!(record[8..], 2.5f32.to_ne_bytes());
        // SAFETY: Detection is repr(C), 12 bytes of plain words, valid for any bits.
        let raw: [u8; DETECTION_BYTES] = unsafe { std::mem::transmute(d) };
        assert_eq!(raw, record);
        assert_eq!(Detection::from_record(&record), d);
    }
}
