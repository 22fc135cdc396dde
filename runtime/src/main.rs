//! `kplace`: plan and run streaming graphs with per-stage CPU/GPU placement.
//!
//! A thin binary: argument parsing and reporting here, everything else in the `kplace` library
//! and the radar application crate.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kplace: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
