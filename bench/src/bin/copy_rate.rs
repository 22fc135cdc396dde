//! The PCIe bound: pinned host to device (and back) copy rates on one GPU, through the same
//! CUDA layer, pools' allocators and streams the runtime uses.
//!
//! `copy_rate [--gpu N] [--sizes 65536,1048576,...] [--seconds S]` prints one JSON object per
//! size and direction (`{"direction":"h2d","bytes":...,"gb_per_s":...}`) and exits 1, saying
//! why, when no GPU is usable. Timing is host wall time around a batch of copies enqueued back
//! to back on one stream and one synchronize: the synchronize belongs to the measurement, not
//! to any hot path.

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use kplace::cuda::Gpu;
use kplace::cuda::driver::CudaGpu;

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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let gpu = CudaGpu::open(args.gpu).context("no GPU to measure")?;
    gpu.bind_thread()?;
    let largest = args.sizes.iter().copied().max().unwrap_or(0) as usize;
    if largest == 0 {
        bail!("--sizes must name at least one non-zero size");
    }
    let host = gpu.alloc_pinned(largest)?;
    let device = gpu.alloc_device(largest)?;
    let stream = gpu.create_stream(0)?;
    // SAFETY: the buffers hold `largest` bytes, are freed only after the stream has drained,
    // and nothing else touches them.
    let result = unsafe {
        std::ptr::write_bytes(host, 0x5a, largest);
        measure(&*gpu, &args, host, device, stream)
    };
    // SAFETY: every copy has completed (each batch ends with a synchronize).
    unsafe {
        let _ = gpu.synchronize(stream);
        gpu.destroy_stream(stream);
        gpu.free_device(device);
        gpu.free_pinned(host);
    }
    result
}

/// # Safety
/// `host` (pinned) and `device` hold at least the largest size; `stream` is `gpu`'s.
unsafe fn measure(
    gpu: &dyn Gpu,
    args: &Args,
    host: *mut u8,
    device: *mut u8,
    stream: kplace::cuda::Stream,
) -> anyhow::Result<()> {
    for &bytes in &args.sizes {
        let bytes = bytes as usize;
        for direction in ["h2d", "d2h"] {
            let copy = |n: usize| -> anyhow::Result<()> {
                for _ in 0..n {
                    // SAFETY: per the caller.
                    unsafe {
                        if direction == "h2d" {
                            gpu.copy_to_device(device, host, bytes, stream)?;
                        } else {
                            gpu.copy_to_host(host, device, bytes, stream)?;
                        }
                    }
                }
                // SAFETY: the stream is gpu's.
                unsafe { gpu.synchronize(stream)? };
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
            let gb_per_s = (batch * bytes) as f64 / seconds / 1e9;
            println!(
                "{{\"gpu\":{},\"name\":{:?},\"direction\":\"{direction}\",\"bytes\":{bytes},\"copies\":{batch},\"gb_per_s\":{gb_per_s:.3}}}",
                gpu.ordinal(),
                gpu.name()
            );
        }
    }
    Ok(())
}
