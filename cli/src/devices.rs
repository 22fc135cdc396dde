//! `kplace devices`: what this machine offers for CUDA, and where its CUDA libraries are.

use std::process::ExitCode;

use clap::Args;
use kplace::cuda::probe;

/// Options of `kplace devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print the probe as JSON instead of text.
    #[arg(long, conflicts_with = "library_path")]
    json: bool,

    /// Print only the `:`-joined directories of the CUDA user-space libraries found (cuFFT,
    /// NVRTC and its builtins, cuBLASLt, cuBLAS), for another program's LD_LIBRARY_PATH; an
    /// empty line when none was found. Touches no driver.
    #[arg(long)]
    library_path: bool,
}

/// Probes and prints. Exits 0 whether or not a driver, device or library was found: their
/// absence is the answer, not an error.
pub fn main(args: DevicesArgs) -> anyhow::Result<ExitCode> {
    if args.library_path {
        let dirs = kplace_cuda_libs::library_path();
        let joined = std::env::join_paths(&dirs).map_err(|e| {
            anyhow::anyhow!("a CUDA library directory cannot be listed in a path: {e}")
        })?;
        println!("{}", joined.to_string_lossy());
        return Ok(ExitCode::SUCCESS);
    }
    let probe = probe::probe();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&probe)?);
    } else {
        print!("{probe}");
    }
    Ok(ExitCode::SUCCESS)
}
