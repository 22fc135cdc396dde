//! `kplace mps`: start, stop and inspect a private NVIDIA MPS control daemon (see
//! `kplace_lab::mps`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use kplace_lab::mps::{self, MpsDirs};

/// Options of `kplace mps`.
#[derive(Debug, Args)]
pub struct MpsArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Start a private control daemon (nvidia-cuda-mps-control -d) and wait until it answers.
    Start(StartArgs),
    /// Stop the daemon (quit) and wait until it is gone; exit 0 if none was running.
    Stop(DirArgs),
    /// Whether a daemon answers, its servers and their clients (exit 0 either way).
    Status(StatusArgs),
}

#[derive(Debug, Args)]
struct DirArgs {
    /// The daemon's base directory, holding pipe/ (CUDA_MPS_PIPE_DIRECTORY) and log/
    /// (CUDA_MPS_LOG_DIRECTORY) [default: $XDG_RUNTIME_DIR/kplace-mps, else
    /// /tmp/kplace-mps-<uid>].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArgs {
    fn dirs(&self) -> MpsDirs {
        self.dir
            .as_deref()
            .map_or_else(MpsDirs::default_dirs, MpsDirs::under)
    }
}

#[derive(Debug, Args)]
struct StartArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The default share of each GPU's SMs a client may use, in (0, 100]
    /// (set_default_active_thread_percentage).
    #[arg(long, value_name = "P")]
    active_thread_percentage: Option<f64>,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the action. `status` exits 0 whether or not a daemon answers, also when MPS cannot be
/// used here (it says why). `start` and `stop` exit 2 when MPS cannot be used here (no control
/// program, no driver), for bad settings, and when the daemon fails to start or
/// stop; so does `status` when a running daemon's answers do not parse.
pub fn main(args: MpsArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Start(a) => {
            let status = mps::start(&a.dir.dirs(), a.active_thread_percentage)?;
            print!("started: {status}");
        }
        Action::Stop(a) => {
            let dirs = a.dirs();
            if mps::stop(&dirs)? {
                println!("stopped the MPS control daemon on {}", dirs.pipe.display());
            } else {
                println!(
                    "no MPS control daemon answers on {}: nothing to stop",
                    dirs.pipe.display()
                );
            }
        }
        Action::Status(a) => {
            let status = mps::status(&a.dir.dirs())?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{status}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
