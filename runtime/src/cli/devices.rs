//! `kplace devices`: what this machine offers for CUDA.

use std::process::ExitCode;

use clap::Args;
use kplace::cuda::driver;

/// Options of `kplace devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print the probe as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Probes and prints. Exits 0 whether or not a driver or device was found: their absence is
/// the answer, not an error.
pub fn main(args: DevicesArgs) -> anyhow::Result<ExitCode> {
    let probe = driver::probe();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&probe)?);
    } else {
        print!("{probe}");
    }
    Ok(ExitCode::SUCCESS)
}
