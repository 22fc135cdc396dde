//! The run's packets in send order, each with its deadline: frames in order, a frame's slots in
//! order, the faults applied.

use crate::wire::PacketHeader;

use super::{Clock, FrameCount, SenderConfig};

/// One packet planned by the cursor.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planned<'a> {
    /// The frame's index in the run.
    pub(super) frame: u64,
    /// Its deadline after the start.
    pub(super) offset_ns: u64,
    pub(super) header: PacketHeader,
    /// The payload to send (shorter than a row for a wrong-size packet).
    pub(super) payload: &'a [u8],
}

/// Walks the run's packets in send order: frames in order, slots in order, each slot's packet
/// (reversed for a reordered frame), dropped ones skipped, duplicates twice.
pub(super) struct Cursor<'a> {
    pub(super) frames: &'a [Vec<u8>],
    pub(super) config: &'a SenderConfig,
    pub(super) clock: Clock,
    /// The frame of the next packet.
    pub(super) frame: u64,
    /// Its slot within the frame; `packets` once the frame's last slot was sent.
    pub(super) slot: u32,
    /// The packet in that slot (valid after `peek` returned a packet).
    pub(super) packet: u32,
    /// The next packet is the second copy of a duplicated packet.
    pub(super) copy: bool,
    /// `frame` passed its start check and its flags below are set.
    pub(super) begun: bool,
    /// The run is over; stays over.
    pub(super) ended: bool,
    /// A packet-level fault names this frame (skip the lookups when not).
    pub(super) faulty: bool,
    /// This frame is sent in reverse packet order.
    pub(super) reversed: bool,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(frames: &'a [Vec<u8>], config: &'a SenderConfig, clock: Clock) -> Self {
        Cursor {
            frames,
            config,
            clock,
            frame: 0,
            slot: 0,
            packet: 0,
            copy: false,
            begun: false,
            ended: false,
            faulty: false,
            reversed: false,
        }
    }

    pub(super) fn packets(&self) -> u32 {
        self.config.shape.packets
    }

    /// Whether the run ends before `self.frame`, `elapsed_ns` after its start.
    pub(super) fn run_over(&self, elapsed_ns: u64) -> bool {
        match self.config.frames {
            FrameCount::Frames(n) => self.frame >= n,
            FrameCount::Duration(d) => {
                let limit = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                match self.clock {
                    Clock::Burst => elapsed_ns >= limit,
                    Clock::Interval { .. } => self.first_slot_offset() >= limit,
                }
            }
        }
    }

    pub(super) fn first_slot_offset(&self) -> u64 {
        self.clock
            .offset_ns(self.frame.saturating_mul(u64::from(self.packets())))
    }

    /// The next packet, without consuming it (`elapsed_ns` decides a burst's duration); `None`
    /// once the run is over. Repeated calls return the same packet.
    pub(super) fn peek(&mut self, elapsed_ns: u64) -> Option<Planned<'a>> {
        let packets = self.packets();
        let faults = &self.config.faults;
        loop {
            if self.ended {
                return None;
            }
            if self.slot == packets {
                self.frame += 1;
                self.slot = 0;
                self.begun = false;
            }
            if !self.begun {
                if self.run_over(elapsed_ns) {
                    self.ended = true;
                    return None;
                }
                self.begun = true;
                self.faulty = faults.touch(self.frame);
                self.reversed = faults.reorder.contains(&self.frame);
            }
            self.packet = if self.reversed {
                packets - 1 - self.slot
            } else {
                self.slot
            };
            if self.faulty && faults.drop.contains(&(self.frame, self.packet)) {
                self.slot += 1;
                continue;
            }
            return Some(self.plan());
        }
    }

    pub(super) fn plan(&self) -> Planned<'a> {
        let shape = self.config.shape;
        let frames: &'a [Vec<u8>] = self.frames;
        let prepared = &frames[(self.frame % frames.len() as u64) as usize];
        let size = shape.payload_bytes();
        let at = self.packet as usize * size;
        let mut payload = &prepared[at..at + size];
        let mut header = PacketHeader {
            // Wire ids wrap: the frame index modulo 2^32 is exactly what `as` keeps.
            frame_id: self.config.first_frame_id.wrapping_add(self.frame as u32),
            packet_id: self.packet,
            channel_id: 0,
            n_elements: shape.elements,
        };
        if self.faulty
            && let Some(kind) = self.config.faults.malformed.get(&(self.frame, self.packet))
        {
            let (bad, len) = kind.corrupt(header, shape);
            header = bad;
            payload = &payload[..len.min(size)];
        }
        let slot = self
            .frame
            .saturating_mul(u64::from(shape.packets))
            .saturating_add(u64::from(self.slot));
        Planned {
            frame: self.frame,
            offset_ns: self.clock.offset_ns(slot),
            header,
            payload,
        }
    }

    /// Consumes the packet `peek` returned.
    pub(super) fn advance(&mut self) {
        let faults = &self.config.faults;
        if !self.copy && self.faulty && faults.duplicate.contains(&(self.frame, self.packet)) {
            self.copy = true;
        } else {
            self.copy = false;
            self.slot += 1;
        }
    }

    /// Frames all of whose packets were consumed, once `peek` has brought the cursor to the
    /// next packet.
    pub(super) fn frames_done(&self) -> u64 {
        if self.slot == self.packets() {
            self.frame + 1
        } else {
            self.frame
        }
    }
}
