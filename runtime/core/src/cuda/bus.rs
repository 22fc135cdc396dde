//! The bus between host and device, measured: pinned copy rates one way, the other, or both
//! at once, through the same seam, allocators and streams the runtime uses.
//!
//! `bench/copy_rate` prints these rates, and `kplace tune` calibrates its model with them.
//! Timing is the device's: a batch of copies enqueued back to back between two timing events
//! on each direction's stream, read after one synchronize per stream (which belongs to the
//! measurement, never to a hot path). So the host's wake-up after the synchronize is not
//! counted, and a loaded host does not make the bus look slow.
//!
//! Guarantees: the buffers are released only after their streams have drained, on errors
//! too; a measurement copies only within the buffers it allocated.

use std::sync::Arc;

use super::owned::{GpuMemory, MemoryKind, OwnedEvent, OwnedStream};
use super::{Gpu, GpuError};

/// Which way copies go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyDirection {
    /// Pinned host to device.
    Upload,
    /// Device to pinned host.
    Download,
    /// Both at once, on separate streams and buffers.
    Both,
}

/// A pinned buffer, a device buffer, a stream and two timing events: one direction's copies.
struct Lane {
    host: GpuMemory,
    device: GpuMemory,
    stream: OwnedStream,
    start: OwnedEvent,
    end: OwnedEvent,
}

impl Lane {
    fn new(gpu: &Arc<dyn Gpu>, bytes: usize) -> Result<Lane, GpuError> {
        let lane = Lane {
            host: GpuMemory::new(gpu, MemoryKind::Pinned, bytes)?,
            device: GpuMemory::new(gpu, MemoryKind::Device, bytes)?,
            stream: OwnedStream::new(gpu, 0)?,
            start: OwnedEvent::timing(gpu)?,
            end: OwnedEvent::timing(gpu)?,
        };
        // SAFETY: the pinned buffer was just allocated with `bytes` bytes.
        unsafe { std::ptr::write_bytes(lane.host.ptr(), 0x5a, bytes) };
        Ok(lane)
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // SAFETY: the stream is this lane's; a failure means a broken context, which the
        // measurement has already reported.
        let _ = unsafe { self.host.gpu().synchronize(self.stream.raw()) };
    }
}

/// Two lanes of up to `capacity` bytes on one GPU, so that both directions can copy at once.
pub struct BusProbe {
    gpu: Arc<dyn Gpu>,
    capacity: usize,
    up: Lane,
    down: Lane,
}

impl BusProbe {
    /// Allocates the buffers for copies of up to `capacity` bytes on `gpu`.
    pub fn new(gpu: &Arc<dyn Gpu>, capacity: usize) -> Result<BusProbe, GpuError> {
        gpu.bind_thread()?;
        let capacity = capacity.max(1);
        Ok(BusProbe {
            gpu: Arc::clone(gpu),
            capacity,
            up: Lane::new(gpu, capacity)?,
            down: Lane::new(gpu, capacity)?,
        })
    }

    /// Copies `count` times `bytes` (clamped to the capacity) in `direction`, waits, and
    /// returns the device time the batch took, in seconds: the slower direction's for
    /// [`CopyDirection::Both`].
    fn copy(&self, direction: CopyDirection, bytes: usize, count: usize) -> Result<f64, GpuError> {
        let bytes = bytes.min(self.capacity);
        let gpu = &*self.gpu;
        let lanes: &[&Lane] = match direction {
            CopyDirection::Upload => &[&self.up],
            CopyDirection::Download => &[&self.down],
            CopyDirection::Both => &[&self.up, &self.down],
        };
        for lane in lanes {
            // SAFETY: the event and stream are this GPU's.
            unsafe { gpu.record(lane.start.raw(), lane.stream.raw())? };
        }
        for _ in 0..count {
            // SAFETY: each lane's buffers hold `capacity >= bytes` bytes and are released only
            // after its stream has drained (Lane's Drop); the streams are this GPU's.
            unsafe {
                if direction != CopyDirection::Download {
                    let up = &self.up;
                    gpu.copy_to_device(up.device.ptr(), up.host.ptr(), bytes, up.stream.raw())?;
                }
                if direction != CopyDirection::Upload {
                    let down = &self.down;
                    gpu.copy_to_host(down.host.ptr(), down.device.ptr(), bytes, down.stream.raw())?;
                }
            }
        }
        let mut seconds: f64 = 0.0;
        for lane in lanes {
            // SAFETY: the events and stream are this GPU's; both records have executed once
            // the stream is synchronized.
            unsafe {
                gpu.record(lane.end.raw(), lane.stream.raw())?;
                gpu.synchronize(lane.stream.raw())?;
                let ms = gpu.elapsed_ms(lane.start.raw(), lane.end.raw())?;
                seconds = seconds.max(f64::from(ms) / 1e3);
            }
        }
        Ok(seconds)
    }

    /// The rate of copies of `bytes` in `direction`, one way, in bytes per second, from a
    /// batch sized to take about `seconds`; with `count` the batch's copies. For
    /// [`CopyDirection::Both`], each direction's rate while the other runs.
    pub fn rate(
        &self,
        direction: CopyDirection,
        bytes: usize,
        seconds: f64,
    ) -> Result<(f64, usize), GpuError> {
        let bytes = bytes.clamp(1, self.capacity);
        self.copy(direction, bytes, 4)?;
        let one = self.copy(direction, bytes, 1)?.max(1e-6);
        let batch = ((seconds / one) as usize).clamp(4, 100_000);
        let elapsed = self.copy(direction, bytes, batch)?.max(1e-9);
        Ok(((batch * bytes) as f64 / elapsed, batch))
    }

    /// The GPU measured.
    pub fn gpu(&self) -> &Arc<dyn Gpu> {
        &self.gpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::sim::{SimGpu, SimTiming};

    #[test]
    fn a_timed_bus_measures_its_modeled_rates_exactly() {
        let timing = SimTiming {
            upload_bytes_per_s: Some(200e6),
            download_bytes_per_s: Some(100e6),
            ..SimTiming::default()
        };
        let sim = SimGpu::with_timing(0, timing);
        let gpu: Arc<dyn Gpu> = sim.clone();
        let probe = BusProbe::new(&gpu, 1 << 20).unwrap();
        // Timed by the simulated device's own clock: exactly the modeled rates, however
        // loaded the host is; both at once, each direction on its own engine.
        let (up, _) = probe.rate(CopyDirection::Upload, 1 << 20, 0.05).unwrap();
        let (down, _) = probe.rate(CopyDirection::Download, 1 << 20, 0.05).unwrap();
        let (both, _) = probe.rate(CopyDirection::Both, 1 << 20, 0.05).unwrap();
        let near = |got: f64, want: f64| (got / want - 1.0).abs() < 1e-6;
        assert!(near(up, 200e6), "upload {up}");
        assert!(near(down, 100e6), "download {down}");
        assert!(
            near(both, 100e6),
            "both at once: the slower direction's {both}"
        );
        drop(probe);
        assert_eq!(
            sim.live_handles(),
            0,
            "the probe released its streams and buffers"
        );
    }
}
