//! `kplace`: plan and run streaming graphs with per-stage CPU/GPU placement.
//!
//! A thin binary: one module per subcommand, each parsing its arguments and printing what the
//! libraries return: the data path in `kplace` (the runtime), the measuring tools in
//! `kplace_lab`, the workloads registered in [`workloads`].

mod admit;
mod args;
mod bisect;
mod child;
mod compare;
mod devices;
mod duration;
mod hog;
mod log;
mod mps;
mod pipelines;
mod plan;
mod plot_trace;
mod plots;
mod progress;
mod record;
mod run;
mod send;
mod shell;
#[cfg(test)]
mod tests;
mod tune;
mod verify;
mod workloads;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// The about is also the man page's NAME line, `kplace - a streaming ...`: lower case, no full
// stop, and not the command's name again.
/// a streaming signal-processing runtime whose every stage runs on the CPU or a GPU, chosen
/// per stage by a placement file
#[derive(Debug, Parser)]
#[command(name = "kplace", version, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Say more on stderr: -v adds debug events, -vv trace events (RUST_LOG, when set,
    /// replaces the level).
    #[arg(short, long, action = clap::ArgAction::Count, global = true, display_order = 1000)]
    verbose: u8,
    /// Say less on stderr: -q shows only warnings and errors, -qq only errors.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, display_order = 1001)]
    quiet: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the plan for a graph on a placement.
    ///
    /// Kernels, libraries, buffers, transfers, pools.
    Plan(plan::PlanArgs),
    /// Run a graph and check every frame.
    ///
    /// The radar on a generated scene, or any graph on a recording against a reference;
    /// replayed from memory or received over UDP.
    Run(run::RunArgs),
    /// Send a scene's or a recording's frames as UDP packets.
    ///
    /// Open loop, paced at a rate or the recording's own, or in a burst.
    Send(send::SendArgs),
    /// Synthesize a recording of a graph's input.
    ///
    /// Tones (plane waves on an array) in noise, with SigMF metadata.
    Record(record::RecordArgs),
    /// Find the highest input rate each placement sustains.
    ///
    /// Paced trials counting every frame lost, unverified or late, searched after RFC 9971
    /// (MLRsearch) for a robust and a strict goal, several placements side by side (exit 1
    /// when a search has no answer).
    #[command(name = "bisect-rate")]
    BisectRate(bisect::BisectArgs),
    /// Verify a detections file against a generated scene's truth.
    Verify(verify::VerifyArgs),
    /// Compare two results files of the same frames.
    ///
    /// As their workload does (the radar's detections: cells exact, powers within a relative
    /// tolerance); exit 1 when they differ, every difference listed by frame.
    #[command(name = "compare-results", visible_alias = "compare-detections")]
    CompareResults(compare::CompareArgs),
    /// List the workloads this binary runs and their options.
    ///
    /// A graph file names one with `workload: NAME`; each takes options `--opt NAME=VALUE`.
    Workloads,
    /// Show the CUDA driver, its devices and the CUDA libraries found.
    ///
    /// Exits 0 without them.
    Devices(devices::DevicesArgs),
    /// Load the GPU or the CPUs, as a co-tenant.
    ///
    /// cuBLAS SGEMM on a GPU, or busy threads on the CPUs; prints its rate as JSON.
    Hog(hog::HogArgs),
    /// Start, stop or inspect a private NVIDIA MPS control daemon.
    Mps(mps::MpsArgs),
    /// Plot bisect-rate results.
    ///
    /// Latency against rate, sustained rates, latency CDFs at the common start rate,
    /// per-stage time, every load classified (five SVGs).
    Plot(plots::PlotArgs),
    /// Draw a window of a run's timeline as an SVG.
    ///
    /// From `kplace run --trace`, a lane per thread.
    #[command(name = "plot-trace")]
    PlotTrace(plot_trace::PlotTraceArgs),
    /// Choose a placement for this machine.
    ///
    /// Calibrates this machine, predicts every placement the libraries allow, proves the
    /// best few with bisect-rate, and writes the measured best that meets the request
    /// (--rate, or the highest rate) as a placement file.
    #[command(mut_arg("placements", |a| a.hide(true)))]
    Tune(Box<tune::TuneArgs>),
    /// How many pipelines of a placement, each at a rate, fit on this machine: from the
    /// calibration and the cost model, naming the resource that runs out first, and with
    /// --prove measured by bisect-rate (N pipelines sustain the rate, N + 1 do not).
    #[command(mut_arg("placements", |a| a.hide(true)), mut_arg("pipelines", |a| a.hide(true)))]
    Admit(Box<admit::AdmitArgs>),
    /// Print a shell's completion script (bash, zsh, fish, ...).
    Completions(shell::CompletionsArgs),
    /// Write the man pages into a directory.
    Man(shell::ManArgs),
    /// List the graphs, or a graph's placements, found by name (for shell completion).
    #[command(hide = true)]
    Complete(shell::CompleteArgs),
    /// Run what a library asks of a child kplace process: a typed spec, as JSON.
    #[command(name = kplace::session::child::SUBCOMMAND, hide = true)]
    Child(child::ChildArgs),
}

/// Runs the chosen subcommand. `Ok(code)` is the process's exit status: failure when a
/// verification fails; `Err` for errors in the inputs or the run.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plan(args) => plan::main(args),
        Command::Run(args) if args.pipelines > 1 => pipelines::main(args),
        Command::Run(args) => run::main(args),
        Command::Send(args) => send::main(args),
        Command::Record(args) => record::main(args),
        Command::Verify(args) => verify::main(args),
        Command::CompareResults(args) => compare::main(args),
        Command::BisectRate(args) => bisect::main(args),
        Command::Workloads => {
            print!("{}", workloads::list());
            Ok(ExitCode::SUCCESS)
        }
        Command::Devices(args) => devices::main(args),
        Command::Hog(args) => hog::main(args),
        Command::Mps(args) => mps::main(args),
        Command::Plot(args) => plots::main(args),
        Command::PlotTrace(args) => plot_trace::main(args),
        Command::Tune(args) => tune::main(*args),
        Command::Admit(args) => admit::main(*args),
        Command::Completions(args) => shell::completions(args),
        Command::Man(args) => shell::man(args),
        Command::Complete(args) => shell::complete(args),
        Command::Child(spec) => dispatch(child::cli(spec, cli.verbose, cli.quiet)?),
    }
}

fn main() -> ExitCode {
    // Rust starts programs with SIGPIPE ignored, so a write to a closed stdout (`kplace plan |
    // head -1`) fails with EPIPE and `print!` panics. Restore the default disposition: a closed
    // output pipe ends the program quietly, as for any Unix filter. Nothing here relies on
    // EPIPE: sockets are UDP (no SIGPIPE), child processes' output is only read, and the one
    // command written to a child (`kplace_lab::mps`) is written before the child starts.
    // Called first, before any thread exists.
    let _ = kplace::os::process::default_sigpipe();
    let args = match workloads::parse(std::env::args_os()) {
        Ok(args) => args,
        // A command line clap refuses is said as every other error is: `kplace: error: ...`.
        Err(e)
            if e.use_stderr()
                && e.kind() != clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            eprint!("kplace: {e}");
            return ExitCode::from(2);
        }
        // --help, --version, and the help a bare `kplace` prints.
        Err(e) => e.exit(),
    };
    // A child's spec stands for a command line, whose verbosity is the log's (a pipeline's
    // parent's -v or -q).
    let (verbose, quiet) = (args.verbose, args.quiet);
    let args = match args {
        Cli {
            command: Command::Child(spec),
            ..
        } => child::cli(spec, verbose, quiet),
        args => Ok(args),
    };
    let (verbose, quiet) = args
        .as_ref()
        .map_or((verbose, quiet), |a| (a.verbose, a.quiet));
    log::init(verbose, quiet);
    match args.and_then(dispatch) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("kplace: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
