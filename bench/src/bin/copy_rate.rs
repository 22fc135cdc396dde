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

use anyhow::{Context, bail};
use clap::Parser;
use kplace::cuda::Gpu;
use kplace::cuda::bus::{BusProbe, CopyDirection};
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
    let gpu: Arc<dyn Gpu> = gpu;
    let probe = BusProbe::new(&gpu, largest)?;
    measure(&probe, &args)
}

/// Prints one line per size and direction.
fn measure(probe: &BusProbe, args: &Args) -> anyhow::Result<()> {
    let gpu = probe.gpu();
    for &bytes in &args.sizes {
        let bytes = bytes as usize;
        for (direction, copies) in [
            ("h2d", CopyDirection::Upload),
            ("d2h", CopyDirection::Download),
            ("both", CopyDirection::Both),
        ] {
            let (rate, batch) = probe.rate(copies, bytes, args.seconds)?;
            let one_way = rate / 1e9;
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
