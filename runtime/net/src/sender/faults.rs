//! Which packets a run gets wrong ([`Faults`]), and the command line's names for them:
//! `FRAME:PACKET` ([`PacketAt`]) and `FRAME:PACKET:KIND` ([`MalformedAt`]), parsed with
//! [`str::parse`], so that every program that injects faults reads them alike.

use std::collections::{BTreeMap, BTreeSet};
use std::num::ParseIntError;
use std::str::FromStr;

use crate::wire::{Malformed, UnknownMalformed};

/// Faults to inject, keyed by the frame's index in the run (0-based, not its wire id) and the
/// packet index. A dropped packet is neither duplicated nor corrupted; a duplicated, corrupted
/// packet is sent corrupted twice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Packets not sent.
    pub drop: BTreeSet<(u64, u32)>,
    /// Packets sent twice, back to back in their slot.
    pub duplicate: BTreeSet<(u64, u32)>,
    /// Frames whose packets are sent in reverse order (packet `M-1` in the first slot).
    pub reorder: BTreeSet<u64>,
    /// Packets sent malformed in the given way instead of correctly (see
    /// [`Malformed::corrupt`]).
    pub malformed: BTreeMap<(u64, u32), Malformed>,
}

impl Faults {
    /// The faults a command line names: packets to drop and to duplicate, frames to reorder,
    /// packets to send malformed. Naming a packet twice to drop, duplicate or reorder is the
    /// same as naming it once; naming one malformed twice is refused, even in the same way.
    pub fn new(
        drop: &[PacketAt],
        duplicate: &[PacketAt],
        reorder: &[u64],
        malformed: &[MalformedAt],
    ) -> Result<Faults, MalformedTwice> {
        let mut faults = Faults {
            drop: drop.iter().map(|p| p.key()).collect(),
            duplicate: duplicate.iter().map(|p| p.key()).collect(),
            reorder: reorder.iter().copied().collect(),
            ..Faults::default()
        };
        for &MalformedAt { at, kind } in malformed {
            if let Some(first) = faults.malformed.insert(at.key(), kind) {
                return Err(MalformedTwice {
                    at,
                    first,
                    second: kind,
                });
            }
        }
        Ok(faults)
    }

    /// True when no fault is configured.
    pub fn is_empty(&self) -> bool {
        self.drop.is_empty()
            && self.duplicate.is_empty()
            && self.reorder.is_empty()
            && self.malformed.is_empty()
    }

    /// True when a packet-level fault names frame `frame`.
    pub(super) fn touch(&self, frame: u64) -> bool {
        let packets = (frame, 0)..=(frame, u32::MAX);
        self.drop.range(packets.clone()).next().is_some()
            || self.duplicate.range(packets.clone()).next().is_some()
            || self.malformed.range(packets).next().is_some()
    }
}

/// One packet of a run: the frame's index in the run (0-based, not its wire id) and the
/// packet's index in the frame. Written `FRAME:PACKET` (`3:17`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketAt {
    /// The frame's index in the run.
    pub frame: u64,
    /// The packet's index in its frame.
    pub packet: u32,
}

impl PacketAt {
    /// The key of [`Faults`]' sets and map.
    fn key(self) -> (u64, u32) {
        (self.frame, self.packet)
    }
}

impl FromStr for PacketAt {
    type Err = FaultParseError;

    /// Reads `FRAME:PACKET`.
    fn from_str(text: &str) -> Result<PacketAt, FaultParseError> {
        let (frame, packet) = text.split_once(':').ok_or(FaultParseError::Form {
            expected: "FRAME:PACKET",
            example: "3:17",
        })?;
        Ok(PacketAt {
            frame: frame.parse().map_err(|why| FaultParseError::Frame {
                text: frame.to_string(),
                why,
            })?,
            packet: packet.parse().map_err(|why| FaultParseError::Packet {
                text: packet.to_string(),
                why,
            })?,
        })
    }
}

/// A packet to send malformed, and how. Written `FRAME:PACKET:KIND` (`3:17:wrong_size`), KIND
/// as [`Malformed`] parses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MalformedAt {
    /// The packet.
    pub at: PacketAt,
    /// How it is malformed.
    pub kind: Malformed,
}

impl FromStr for MalformedAt {
    type Err = FaultParseError;

    /// Reads `FRAME:PACKET:KIND`.
    fn from_str(text: &str) -> Result<MalformedAt, FaultParseError> {
        let (at, kind) = text.rsplit_once(':').ok_or(FaultParseError::Form {
            expected: "FRAME:PACKET:KIND",
            example: "3:17:wrong_size",
        })?;
        Ok(MalformedAt {
            at: at.parse()?,
            kind: kind.parse()?,
        })
    }
}

/// Why a packet's name does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultParseError {
    /// Not of the form asked for.
    #[error("expected {expected}, e.g. {example}")]
    Form {
        /// The form, `FRAME:PACKET`.
        expected: &'static str,
        /// One of that form.
        example: &'static str,
    },
    /// The frame is not a frame index.
    #[error("frame {text:?}: {why}")]
    Frame {
        /// What was given.
        text: String,
        /// Why it is not a number.
        why: ParseIntError,
    },
    /// The packet is not a packet index.
    #[error("packet {text:?}: {why}")]
    Packet {
        /// What was given.
        text: String,
        /// Why it is not a number.
        why: ParseIntError,
    },
    /// The kind names no [`Malformed`] class.
    #[error(transparent)]
    Kind(#[from] UnknownMalformed),
}

/// A packet named malformed twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "--malformed names frame {} packet {} twice ({first} and {second})",
    at.frame,
    at.packet
)]
pub struct MalformedTwice {
    /// The packet.
    pub at: PacketAt,
    /// How it was named malformed first.
    pub first: Malformed,
    /// And then.
    pub second: Malformed,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(frame: u64, packet: u32) -> PacketAt {
        PacketAt { frame, packet }
    }

    fn error<T: FromStr<Err = FaultParseError> + std::fmt::Debug>(text: &str) -> String {
        text.parse::<T>().unwrap_err().to_string()
    }

    #[test]
    fn packets_read_as_frame_colon_packet() {
        assert_eq!("3:17".parse(), Ok(at(3, 17)));
        assert_eq!("0:0".parse(), Ok(at(0, 0)));
        assert_eq!(error::<PacketAt>("3"), "expected FRAME:PACKET, e.g. 3:17");
        assert_eq!(
            error::<PacketAt>("x:1"),
            "frame \"x\": invalid digit found in string"
        );
        assert_eq!(
            error::<PacketAt>("1:-2"),
            "packet \"-2\": invalid digit found in string"
        );
        assert_eq!(
            error::<PacketAt>("1:2:3"),
            "packet \"2:3\": invalid digit found in string"
        );
        assert_eq!(
            error::<PacketAt>("1:4294967296"),
            "packet \"4294967296\": number too large to fit in target type"
        );
    }

    #[test]
    fn malformed_packets_read_as_frame_packet_kind() {
        assert_eq!(
            "3:17:wrong_size".parse(),
            Ok(MalformedAt {
                at: at(3, 17),
                kind: Malformed::WrongSize
            })
        );
        assert_eq!(
            "0:1:chirp_out_of_range"
                .parse::<MalformedAt>()
                .map(|m| m.kind),
            Ok(Malformed::PacketOutOfRange)
        );
        assert_eq!(
            error::<MalformedAt>("3"),
            "expected FRAME:PACKET:KIND, e.g. 3:17:wrong_size"
        );
        assert_eq!(
            error::<MalformedAt>("3:wrong_size"),
            "expected FRAME:PACKET, e.g. 3:17"
        );
        assert_eq!(
            error::<MalformedAt>("0:1:bogus"),
            "unknown kind \"bogus\": expected one of wrong_size, wrong_elements, packet_out_of_range, wrong_channel"
        );
    }

    #[test]
    fn faults_collect_what_is_named_and_refuse_a_packet_malformed_twice() {
        let malformed = |frame, packet, kind| MalformedAt {
            at: at(frame, packet),
            kind,
        };
        let faults = Faults::new(
            &[at(0, 1), at(0, 1), at(2, 0)],
            &[at(1, 3)],
            &[4, 4],
            &[
                malformed(0, 2, Malformed::WrongChannel),
                malformed(1, 2, Malformed::WrongSize),
            ],
        )
        .expect("faults");
        assert_eq!(faults.drop, BTreeSet::from([(0, 1), (2, 0)]));
        assert_eq!(faults.duplicate, BTreeSet::from([(1, 3)]));
        assert_eq!(faults.reorder, BTreeSet::from([4]));
        assert_eq!(
            faults.malformed,
            BTreeMap::from([
                ((0, 2), Malformed::WrongChannel),
                ((1, 2), Malformed::WrongSize)
            ])
        );
        assert!(faults.touch(0) && faults.touch(1) && faults.touch(2));
        assert!(!faults.touch(4), "reordering alone touches no packet");
        assert!(Faults::new(&[], &[], &[], &[]).expect("none").is_empty());

        let twice = Faults::new(
            &[],
            &[],
            &[],
            &[
                malformed(5, 6, Malformed::WrongSize),
                malformed(5, 6, Malformed::WrongChannel),
            ],
        )
        .unwrap_err();
        assert_eq!(
            twice.to_string(),
            "--malformed names frame 5 packet 6 twice (wrong_size and wrong_channel)"
        );
    }
}
