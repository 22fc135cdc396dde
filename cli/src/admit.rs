//! `kplace admit`: how many pipelines of a placement, each fed at a rate, fit on this machine,
//! from the calibration and the cost model, and, with `--prove`, measured with `bisect-rate`
//! (N pipelines sustain the rate, N + 1 do not). The answer itself is
//! `kplace_lab::tune::admit`; this module parses its options and prints its account.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace_lab::bisect::{Stop, Systems};
use kplace_lab::tune::{self, AdmitRequest, TuneOptions};

use super::bisect::{BisectArgs, Spinner};
use super::tune::MachineArgs;

/// The share of each shared resource pipelines may keep busy, by default: all of it, as the
/// proof measured on the development VM (docs/results/adapt.md).
pub const DEFAULT_UTILIZATION: f64 = 1.0;

/// Options of `kplace admit`.
#[derive(Debug, Args)]
pub struct AdmitArgs {
    /// The placement every pipeline runs: a file, or a name in the graph's `placements/`.
    #[arg(long, value_name = "FILE|NAME")]
    placement: PathBuf,
    /// Frames per second each pipeline is fed: from 1/86400 (a frame a day) to 1e9 (a frame a
    /// nanosecond).
    #[arg(long, value_name = "FRAMES_PER_S")]
    rate: f64,
    /// Measure the answer with bisect-rate: N pipelines must sustain the rate and N + 1 must
    /// not (two searches, with --pipeline-mode and --mps as given).
    #[arg(long)]
    prove: bool,
    /// The share of the cores, the GPU's time and each bus direction the pipelines may keep
    /// busy: below 1, headroom for other work on the machine.
    #[arg(long, value_name = "SHARE", default_value_t = DEFAULT_UTILIZATION)]
    utilization: f64,
    /// The devices weighed and the calibration predicted from.
    #[command(flatten)]
    machine: MachineArgs,
    /// Every bisect-rate option, for the proof and the frame shape (their --placements and
    /// --pipelines are ignored: admit runs its own).
    #[command(flatten)]
    search: BisectArgs,
}

/// Answers how many pipelines fit; with --prove, the exit status says whether the proof held.
pub fn main(args: AdmitArgs) -> anyhow::Result<ExitCode> {
    if !(args.utilization > 0.0 && args.utilization <= 1.0) {
        bail!("--utilization must be in (0, 1], not {}", args.utilization);
    }
    kplace::model::rate::frame_rate("--rate", args.rate)?;
    args.machine.check()?;
    let stop = Stop::on_signal().context("cannot install the signal handler")?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let mut options = args.machine.admit_options();
    let mut config = args.search.config()?;
    if config.shapes.len() != 1 {
        bail!("kplace admit answers at one frame shape: give one --shape");
    }
    let graph = config.graph.clone();
    let placement = match args.placement.exists() {
        true => args.placement.clone(),
        false => super::args::placement_file(&args.placement, &graph)?,
    };
    config.systems = Systems::Placements(vec![placement.clone()]);
    // Its libraries are the ones weighed, where none is named.
    options.placement = Some(placement.clone());
    let request = AdmitRequest {
        placement,
        rate: args.rate,
        prove: args.prove,
        utilization: args.utilization,
        stored_only: false,
    };
    let admitted = tune::admit(
        &options,
        &config,
        &request,
        &exe,
        &stop,
        &Spinner::default(),
    )?;
    println!("account in {}", admitted.dir.join("admit.txt").display());
    Ok(match admitted.proof {
        Some(proof) if !proof.holds => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// Whether `args.pipelines` pipelines fit, by the model and this machine's stored calibration
/// (`kplace run --pipelines N`, before anything starts): refused naming the resource that runs
/// out, unless `--force`; not checked (and said so) without a stored calibration, with a
/// recording, or for a graph without a workload of its own.
pub(crate) fn check_run(args: &super::run::RunArgs) -> anyhow::Result<()> {
    let n = args.pipelines;
    let checked = || -> anyhow::Result<(tune::Admitted, f64)> {
        if args.recording.is_some() {
            bail!("a recording's pipelines are not checked");
        }
        let graph = super::args::graph_file(&args.graph.graph)?;
        // The check keeps nothing: what it writes goes with this directory.
        let scratch = tempfile::tempdir()?;
        let search = BisectArgs::defaults(
            &graph,
            args.graph.shape.shape.as_ref(),
            args.workload.pairs(),
            scratch.path(),
        )?;
        let mut config = search.config()?;
        config.pipeline_mode = args.pipeline_mode.into();
        let shape = config.shapes.first().context("no frame shape")?.clone();
        let rate = match args.graph.stream_rate {
            Some(rate) => rate,
            None => 1.0 / config.frame_period(&shape).as_secs_f64(),
        };
        let machine: MachineArgs = super::args::with_defaults([])?;
        let placement = super::args::placement_file(&args.graph.placement, &graph)?;
        let options = TuneOptions {
            placement: Some(placement.clone()),
            ..machine.admit_options()
        };
        let request = AdmitRequest {
            placement,
            rate,
            prove: false,
            utilization: DEFAULT_UTILIZATION,
            stored_only: true,
        };
        let stop = Stop::default();
        let exe = std::env::current_exe()?;
        Ok((
            tune::admit(&options, &config, &request, &exe, &stop, &())?,
            rate,
        ))
    };
    // The check's own preparation (devices, the workload, the stored calibration) says
    // nothing: its answer is all the run reports.
    let quiet = tracing::subscriber::NoSubscriber::default();
    let (admitted, rate) = match tracing::subscriber::with_default(quiet, checked) {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!(
                "kplace run: --pipelines {n} not checked against the cost model: {e:#}"
            );
            return Ok(());
        }
    };
    match admitted.admission.refusal(n) {
        None => {
            tracing::debug!(
                "kplace run: --pipelines {n}: the model admits {} at {rate:.1} frames/s each",
                admitted.admission.pipelines
            );
            Ok(())
        }
        Some(why) if args.force => {
            tracing::warn!(
                "kplace run: --pipelines {n} forced, though at {rate:.1} frames/s each {why}"
            );
            Ok(())
        }
        Some(why) => bail!(
            "--pipelines {n}: at {rate:.1} frames/s each (--stream-rate), {why}, by this machine's calibration and the cost model (kplace admit says more); --force runs them anyway"
        ),
    }
}
