//! `kplace`: plan and run streaming graphs with per-stage CPU/GPU placement.
//!
//! A thin binary: argument parsing and reporting here, everything else in the `kplace` library
//! and the radar application crate.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Rust starts programs with SIGPIPE ignored, so a write to a closed stdout (`kplace plan |
    // head -1`) fails with EPIPE and `print!` panics. Restore the default disposition: a closed
    // output pipe ends the program quietly, as for any Unix filter. Nothing here relies on
    // EPIPE: sockets are UDP (no SIGPIPE), child processes' output is only read, and the one
    // command written to a child (`kplace::mps`) is written before the child starts.
    // SAFETY: called first, before any thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kplace: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
