//! Frame sources that need no network: replay of frames prepared in memory.
//!
//! [`FrameReplay`] delivers prepared frames through the same [`Ingest`] seam a packet receiver
//! uses, as fast as slots free up, or one frame per period ([`FrameReplay::paced`]). It
//! offers whole frames ([`Delivery::Frames`]): when the run takes them (only a GPU stage reads
//! the source tensor, [`Ingest::takes_whole_frames`]), it stages its prepared frames once in
//! pinned memory before its first frame and hands each frame over staged, so the GPU's copy
//! engine reads it there and no thread copies a frame's bytes; otherwise, or with
//! [`FrameReplay::by_packets`], it writes each frame into its slot packet by packet, in packet
//! order, as a receiver writing payloads into place does (one copy per packet), so stages
//! split along the packet axis start on each tile as its packets land.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kplace_core::executor::{Delivery, Ingest, OpenFrame, Source, SourceError};

/// Replays `frames` prepared source buffers cyclically until `count` frames were delivered;
/// frame `i` carries id `i` and the bytes of prepared frame `i % frames.len()`. Several
/// replays (pipelines in one process) may share one set of prepared frames.
#[derive(Debug)]
pub struct FrameReplay {
    frames: Arc<[Vec<u8>]>,
    count: u64,
    period: Option<Duration>,
    /// The ids delivered, when not `0..count`: a stream that lost the others.
    ids: Option<Vec<u64>>,
    /// Whole frames (staged when the run takes them), or packet by packet.
    delivery: Delivery,
}

impl FrameReplay {
    /// A replay of `count` frames drawn cyclically from `frames` (at least one).
    pub fn new(frames: impl Into<Arc<[Vec<u8>]>>, count: u64) -> Self {
        Self {
            frames: frames.into(),
            count,
            period: None,
            ids: None,
            delivery: Delivery::Frames,
        }
    }

    /// A replay of the frames numbered `ids` only (in increasing order), frame `i` carrying
    /// prepared frame `i % frames.len()`: the stream a run saw when it lost the others, as a
    /// stateful stage then fills them.
    pub fn of_ids(frames: impl Into<Arc<[Vec<u8>]>>, ids: Vec<u64>) -> Self {
        Self {
            count: ids.len() as u64,
            ids: Some(ids),
            ..Self::new(frames, 0)
        }
    }

    /// The replay, beginning frame `i` no earlier than `i * period` after it starts: a stream
    /// at a steady rate, as a paced sender's. A frame that finds no free slot waits for one
    /// (the replay is never lossy), and the frames after it keep the schedule.
    pub fn paced(self, period: Duration) -> Self {
        Self {
            period: Some(period),
            ..self
        }
    }

    /// The replay, writing every frame into its slot packet by packet as a receiver does,
    /// never staged: stages split along the packet axis start on each tile as its packets
    /// land, as they do on a stream.
    pub fn by_packets(self) -> Self {
        Self {
            delivery: Delivery::Packets,
            ..self
        }
    }

    /// Prepared frames in the cycle.
    pub fn period(&self) -> usize {
        self.frames.len()
    }

    /// Writes prepared frame `frame` into `open`'s slot packet by packet, then ends it.
    fn write_packets(
        &self,
        ingest: &mut Ingest<'_>,
        open: OpenFrame,
        frame: usize,
    ) -> Result<(), SourceError> {
        ingest.write_frame(open, &self.frames[frame])
    }
}

impl Source for FrameReplay {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let frame_bytes = ingest.packet_bytes() * ingest.packets_per_frame() as usize;
        if self.frames.is_empty() && self.count > 0 {
            return Err(SourceError::NoFrames);
        }
        if let Some(bad) = self.frames.iter().position(|f| f.len() != frame_bytes) {
            return Err(SourceError::FrameBytes {
                frame: bad,
                bytes: self.frames[bad].len(),
                needs: frame_bytes,
            });
        }
        // Whole frames staged once, when the run takes them; a failure to stage (pinned memory
        // short) costs a copy per packet, not the run.
        let staged = self.delivery == Delivery::Frames
            && ingest.takes_whole_frames()
            && match ingest.stage(&self.frames) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!("replay: frames not staged, written packet by packet: {e}");
                    false
                }
            };
        let start = Instant::now();
        for n in 0..self.count {
            let id = self.ids.as_ref().map_or(n, |ids| ids[n as usize]);
            if let Some(period) = self.period {
                let due = start + period.saturating_mul(n.min(u64::from(u32::MAX)) as u32);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            let frame = (id % self.frames.len() as u64) as usize;
            let Some(open) = ingest.begin_frame(id) else {
                return Ok(());
            };
            let open = match staged {
                true => match ingest.deliver_staged(open, frame) {
                    Ok(_) => continue,
                    Err(open) => open,
                },
                false => open,
            };
            self.write_packets(ingest, open, frame)?;
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        self.delivery
    }
}
