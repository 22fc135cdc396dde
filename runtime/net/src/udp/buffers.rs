//! Plain frame buffers to assemble into without processing: `kplace run --ingest-only`.

use std::fmt;
use std::time::Duration;

use super::{Assembly, IngestCounters};
use kplace_core::executor::pool::{Block, Pool, PoolError};
use kplace_core::executor::{BeginError, PacketStatus};

/// Plain frame buffers to assemble into without processing: the receiver's own ceiling.
///
/// Frames are opened in a ring of `slots` buffers and released as soon as they end, so the
/// measurement is the receive path alone (parsing, placement, bookkeeping).
pub struct FrameBuffers {
    packet_bytes: usize,
    packets: u64,
    // Raw blocks: their bytes are written by the kernel through the places handed out.
    _pool: Pool,
    buffers: Vec<Block>,
    present: Vec<Vec<bool>>,
    received: Vec<u64>,
    free: Vec<usize>,
}

/// A frame open in [`FrameBuffers`].
#[derive(Debug)]
pub struct BufferFrame {
    slot: usize,
    frame_id: u64,
}

impl FrameBuffers {
    /// `slots` buffers of `packets` packets of `packet_bytes` bytes.
    pub fn new(slots: usize, packets: u64, packet_bytes: usize) -> Result<Self, PoolError> {
        let mut pool = Pool::host("ingest-only", packets * packet_bytes as u64, slots)?;
        let buffers = std::iter::from_fn(|| pool.take()).collect();
        Ok(Self {
            packet_bytes,
            packets,
            _pool: pool,
            buffers,
            present: vec![vec![false; packets as usize]; slots],
            received: vec![0; slots],
            free: (0..slots).rev().collect(),
        })
    }
}

impl Assembly for FrameBuffers {
    type Frame = BufferFrame;

    fn capacity(&self) -> usize {
        self.buffers.len()
    }
    fn try_begin(&mut self, frame_id: u64) -> Result<BufferFrame, BeginError> {
        let slot = self.free.pop().ok_or(BeginError::NoFreeSlot)?;
        self.present[slot].fill(false);
        self.received[slot] = 0;
        Ok(BufferFrame { slot, frame_id })
    }
    fn id(frame: &BufferFrame) -> u64 {
        frame.frame_id
    }
    fn place(&self, frame: &BufferFrame, index: u64) -> Option<*mut u8> {
        if *self.present[frame.slot].get(index as usize)? {
            return None;
        }
        // SAFETY: index < packets, so the offset is inside the block.
        Some(unsafe {
            self.buffers[frame.slot]
                .ptr
                .add(index as usize * self.packet_bytes)
        })
    }
    fn done(&mut self, frame: &BufferFrame, index: u64) -> PacketStatus {
        match self.present[frame.slot].get_mut(index as usize) {
            None => PacketStatus::OutOfRange,
            Some(true) => PacketStatus::Duplicate,
            Some(p) => {
                *p = true;
                self.received[frame.slot] += 1;
                PacketStatus::Accepted
            }
        }
    }
    fn received(&self, frame: &BufferFrame) -> u64 {
        self.received[frame.slot]
    }
    fn finish(&mut self, frame: BufferFrame) -> bool {
        self.free.push(frame.slot);
        self.received[frame.slot] == self.packets
    }
    fn stopping(&self) -> bool {
        kplace_core::interrupt::requested()
    }
}

/// What receiving without processing measured ([`super::UdpSource::receive_only`]).
#[derive(Clone, Debug)]
pub struct IngestOnly {
    /// The process's CPU time while receiving.
    pub cpu: Duration,
    /// What the receiver counted.
    pub counters: IngestCounters,
}

impl IngestOnly {
    /// Complete frames per second, from the first packet to the last: neither the wait for
    /// the sender nor the idle timeout counts.
    pub fn frames_per_s(&self) -> f64 {
        self.counters.complete_frames as f64 / self.busy().as_secs_f64()
    }

    fn busy(&self) -> Duration {
        self.counters.receiving.max(Duration::from_micros(1))
    }
}

impl fmt::Display for IngestOnly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let busy = self.busy().as_secs_f64();
        let frames = self.counters.complete_frames;
        writeln!(
            f,
            "ingest only: {frames} complete frames in {busy:.3} s: {:.1} frames/s, {:.2} Gbit/s of packets",
            self.frames_per_s(),
            self.counters.bytes as f64 * 8.0 / busy / 1e9
        )?;
        // The receiver's CPU time per frame: what `kplace tune` charges a stream's source.
        writeln!(
            f,
            "receiver CPU: {:.4} ms per frame",
            self.cpu.as_secs_f64() * 1e3 / frames.max(1) as f64
        )?;
        write!(f, "{}", self.counters)
    }
}
