//! The PCIe bound: pinned host to device, device to host, and both at once, copy rates on one
//! GPU, through the same CUDA layer, pools' allocators and streams the runtime uses.
//!
//! `copy_rate [--gpu N] [--sizes 65536,1048576,...] [--seconds S] [--pcie GEN,WIDTH]` prints
//! one JSON object per size and direction (`{"direction":"h2d","bytes":...,"gb_per_s":...}`)
//! and exits 1, saying why, when no GPU is usable. `h2d` and `d2h` copy one way on one stream;
//! `both` copies host to device on one stream and device to host on another at the same time
//! (separate buffers), and its `gb_per_s` is the sum of the two directions (with each
//! direction's share beside it). With `--pcie` (the link's generation and width, as
//! `nvidia-smi --query-gpu=pcie.link.gen.max,pcie.link.width.max` says) each line also carries
//! the fraction of the link's nominal rate per direction (after line encoding: gen 3 0.985,
//! gen 4 1.969, gen 5 3.938, gen 6 7.563 GB/s per lane; for `both`, of twice that), and a first
//! line `{"bus":...}` states the nominal rate. Timing is host wall time around a batch of
//! copies enqueued back to back and one synchronize per stream: the synchronize belongs to the
//! measurement, not to any hot path.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use kplace::cuda::driver::CudaGpu;
use kplace::cuda::owned::{GpuMemory, MemoryKind, OwnedStream};
use kplace::cuda::{Gpu, GpuError};

/// Measures pinned copy rates on one GPU.
#[derive(Debug, Parser)]
struct Args {
    /// The GPU's ordinal.
    #[arg(long, default_value_t = 0)]
    gpu: u32,
    /// Copy sizes in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [65_536u64, 524_288, 1_048_576, 8_388_608, 67_108_864])]
    sizes: Vec<u64>,
    /// Wall time to spend per size and direction, roughly.
    #[arg(long, default_value_t = 0.5)]
    seconds: f64,
    /// The PCIe link's generation and width, `GEN,WIDTH` (e.g. `5,16`): adds the nominal rate
    /// and each rate's fraction of it.
    #[arg(long, value_name = "GEN,WIDTH", value_parser = parse_pcie)]
    pcie: Option<Pcie>,
}

/// A PCIe link: generation and lane count.
#[derive(Clone, Copy, Debug)]
struct Pcie {
    generation: u32,
    width: u32,
}

impl Pcie {
    /// GB/s per lane and direction after line encoding (8b/10b up to gen 2, 128b/130b for
    /// gens 3 to 5, FLIT for gen 6).
    fn per_lane_gb_per_s(self) -> f64 {
        match self.generation {
            1 => 0.25,
            2 => 0.5,
            3 => 0.985,
            4 => 1.969,
            5 => 3.938,
            _ => 7.563,
        }
    }

    /// The link's nominal rate per direction, GB/s.
    fn nominal_gb_per_s(self) -> f64 {
        self.per_lane_gb_per_s() * f64::from(self.width)
    }
}

fn parse_pcie(text: &str) -> Result<Pcie, String> {
    let bad = || {
        format!("{text:?} is not GEN,WIDTH (e.g. 5,16: a PCIe generation 1..6 and a lane count)")
    };
    let (generation, width) = text.split_once(',').ok_or_else(bad)?;
    let generation: u32 = generation.trim().parse().map_err(|_| bad())?;
    let width: u32 = width.trim().parse().map_err(|_| bad())?;
    if !(1..=6).contains(&generation) || !(1..=32).contains(&width) {
        return Err(bad());
    }
    Ok(Pcie { generation, width })
}

/// The buffers of one direction: pinned host memory, device memory and a stream. Dropping it
/// drains the stream; the handles then release themselves.
struct Lane {
    host: GpuMemory,
    device: GpuMemory,
    stream: OwnedStream,
}

impl Lane {
    fn new(gpu: &Arc<dyn Gpu>, bytes: usize) -> Result<Lane, GpuError> {
        let lane = Lane {
            host: GpuMemory::new(gpu, MemoryKind::Pinned, bytes)?,
            device: GpuMemory::new(gpu, MemoryKind::Device, bytes)?,
            stream: OwnedStream::new(gpu, 0)?,
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

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let gpu = CudaGpu::open(args.gpu).context("no GPU to measure")?;
    gpu.bind_thread()?;
    let largest = args.sizes.iter().copied().max().unwrap_or(0) as usize;
    if largest == 0 {
        bail!("--sizes must name at least one non-zero size");
    }
    if let Some(pcie) = args.pcie {
        println!(
            "{{\"bus\":{{\"pcie_gen\":{},\"pcie_width\":{},\"nominal_gb_per_s_per_direction\":{:.3}}}}}",
            pcie.generation,
            pcie.width,
            pcie.nominal_gb_per_s()
        );
    }
    // Two lanes, so that `both` reads and writes separate buffers on separate streams.
    let gpu: Arc<dyn Gpu> = gpu;
    let lanes = [Lane::new(&gpu, largest)?, Lane::new(&gpu, largest)?];
    // SAFETY: each lane's buffers hold `largest` bytes, are freed only after its stream has
    // drained (Lane's Drop), and nothing else touches them.
    unsafe { measure(&*gpu, &args, &lanes) }
}

/// # Safety
/// Each lane's `host` (pinned) and `device` hold at least the largest size; its `stream` is
/// `gpu`'s.
unsafe fn measure(gpu: &dyn Gpu, args: &Args, lanes: &[Lane]) -> anyhow::Result<()> {
    let (up, down) = (&lanes[0], &lanes[1]);
    for &bytes in &args.sizes {
        let bytes = bytes as usize;
        for direction in ["h2d", "d2h", "both"] {
            let copy = |n: usize| -> anyhow::Result<()> {
                for _ in 0..n {
                    // SAFETY: per the caller.
                    unsafe {
                        if direction != "d2h" {
                            gpu.copy_to_device(
                                up.device.ptr(),
                                up.host.ptr(),
                                bytes,
                                up.stream.raw(),
                            )?;
                        }
                        if direction != "h2d" {
                            gpu.copy_to_host(
                                down.host.ptr(),
                                down.device.ptr(),
                                bytes,
                                down.stream.raw(),
                            )?;
                        }
                    }
                }
                // SAFETY: the streams are gpu's.
                unsafe {
                    gpu.synchronize(up.stream.raw())?;
                    gpu.synchronize(down.stream.raw())?;
                }
                Ok(())
            };
            copy(4)?;
            // Size the batch from one timed copy so every size takes about the same time.
            let probe = Instant::now();
            copy(1)?;
            let one = probe.elapsed().as_secs_f64().max(1e-6);
            let batch = ((args.seconds / one) as usize).clamp(4, 100_000);
            let started = Instant::now();
            copy(batch)?;
            let seconds = started.elapsed().as_secs_f64();
            let one_way = (batch * bytes) as f64 / seconds / 1e9;
            let (gb_per_s, ways) = if direction == "both" {
                (2.0 * one_way, 2.0)
            } else {
                (one_way, 1.0)
            };
            let mut line = format!(
                "{{\"gpu\":{},\"name\":{:?},\"direction\":\"{direction}\",\"bytes\":{bytes},\"copies\":{batch},\"gb_per_s\":{gb_per_s:.3}",
                gpu.ordinal(),
                gpu.name()
            );
            if direction == "both" {
                line.push_str(&format!(
                    ",\"h2d_gb_per_s\":{one_way:.3},\"d2h_gb_per_s\":{one_way:.3}"
                ));
            }
            if let Some(pcie) = args.pcie {
                let fraction = gb_per_s / (ways * pcie.nominal_gb_per_s());
                line.push_str(&format!(",\"fraction_of_nominal\":{fraction:.3}"));
            }
            line.push('}');
            println!("{line}");
        }
    }
    Ok(())
}
