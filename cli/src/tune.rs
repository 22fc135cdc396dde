//! `kplace tune`: the placement chosen for the user. Calibrates this machine (or reuses a
//! stored calibration), predicts every placement the libraries allow, proves the best few with
//! `bisect-rate`, and writes the measured best that meets the request as a placement file.
//! The tuning itself is `kplace_lab::tune::run`; this module parses its options and prints
//! what it says as it goes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplace_lab::bisect::Stop;
use kplace_lab::tune::calibrate::Store;
use kplace_lab::tune::space::Knobs;
use kplace_lab::tune::{self, TuneOptions};

use super::bisect::{BisectArgs, Spinner};

/// Options of `kplace tune`: what to tune for, the space weighed, and how it is proven (every
/// `bisect-rate` option, which each proving search uses).
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The input rate to sustain, in frames per second (a radar frame is a CPI), from 1/86400
    /// to 1e9: the placement using the fewest cores (then the least GPU) that sustains it wins.
    /// Without it, the highest rate wins.
    #[arg(long, value_name = "FRAMES_PER_S", conflicts_with = "max_rate")]
    rate: Option<f64>,
    /// The highest sustained rate wins (the default without --rate).
    #[arg(long)]
    max_rate: bool,
    /// CPU worker counts weighed.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Frame slot counts weighed (more slots ride out longer stalls of a shared machine).
    #[arg(long, value_delimiter = ',', default_value = "4,16")]
    slots: Vec<usize>,
    /// Tiles weighed for split stages on the GPU (indices per launch); none: the runtime's
    /// default tile.
    #[arg(long, value_delimiter = ',', value_name = "TILES")]
    gpu_tiles: Vec<u64>,
    /// Prove the best N predictions with bisect-rate (0: predict only, and write the best
    /// prediction).
    #[arg(long, value_name = "N", default_value_t = 3)]
    prove: usize,
    /// A placement of the graph whose kernel libraries (its `libraries:`) are weighed: a file,
    /// or a name beside the graph [default: the libraries the graph's own placements name,
    /// else kplace's].
    #[arg(long, value_name = "FILE|NAME")]
    placement: Option<PathBuf>,
    /// The devices weighed and the calibration predicted from.
    #[command(flatten)]
    machine: MachineArgs,
    /// Where the winning placement is written (default: OUT/tune-<CPI>/tuned.yaml; with several
    /// CPIs, each CPI's goes beside its other results).
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
    /// Every bisect-rate option (their --placements is ignored: tune writes its own).
    #[command(flatten)]
    search: BisectArgs,
}

/// Tunes every shape asked for; the exit status says whether each found a winner.
pub fn main(args: TuneArgs) -> anyhow::Result<ExitCode> {
    args.check()?;
    let stop = Stop::on_signal().context("cannot install the signal handler")?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let mut options = args.options();
    let config = args.search.config()?;
    options.placement = args
        .placement
        .as_deref()
        .map(|p| super::args::placement_file(p, &config.graph))
        .transpose()?;
    let tuning = tune::run(&options, &config, &exe, &stop, &Spinner::default())?;
    Ok(if tuning.shapes.iter().all(|t| t.winner.is_some()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

impl TuneArgs {
    /// Refuses values that have no meaning, naming the option.
    fn check(&self) -> anyhow::Result<()> {
        if let Some(rate) = self.rate {
            kplace::model::rate::frame_rate("--rate", rate)?;
        }
        self.machine.check()?;
        for (option, values) in [("--workers", &self.workers), ("--slots", &self.slots)] {
            if values.is_empty() || values.iter().any(|&v| v == 0 || v > 64) {
                bail!("{option} takes counts from 1 to 64, not {values:?}");
            }
        }
        Ok(())
    }

    /// The tuning these options ask for, besides its proving searches'.
    fn options(&self) -> TuneOptions {
        let knobs = Knobs {
            workers: self.workers.clone(),
            slots: self.slots.clone(),
            gpu_tiles: self.gpu_tiles.clone(),
            gpu: self.machine.gpu,
        };
        TuneOptions {
            rate: self.rate,
            prove: self.prove,
            winner: self.write.clone(),
            ..self.machine.options(knobs)
        }
    }
}

/// The devices a tuning or an admission weighs, and the calibration it predicts from.
#[derive(Debug, Args)]
pub struct MachineArgs {
    /// The GPU weighed.
    #[arg(long, default_value_t = 0)]
    gpu: u32,
    /// Weigh the CPU only, even where a GPU is usable.
    #[arg(long)]
    cpu_only: bool,
    /// The CPU kernel library: a path, or a file name looked up as a placement's is (beside
    /// kplace, $KPLACE_LIB_DIR) [default: the placement's, else the one the graph's own
    /// placements name, else kplace's].
    #[arg(long, value_name = "PATH")]
    cpu_library: Option<PathBuf>,
    /// The GPU kernel library, likewise.
    #[arg(long, value_name = "PATH")]
    gpu_library: Option<PathBuf>,
    /// Measure the calibration again even when a stored one is fresh.
    #[arg(long)]
    recalibrate: bool,
    /// A stored calibration older than this is measured again (e.g. `7days`; a bare number is
    /// hours).
    #[arg(long, value_name = "DURATION", default_value = "7days", value_parser = crate::duration::or_h, alias = "max-age-h")]
    max_age: Duration,
    /// Where calibrations are stored (default: $KPLACE_CALIBRATIONS, else
    /// ~/.cache/kplace/calibrations).
    #[arg(long, value_name = "DIR")]
    calibrations: Option<PathBuf>,
    /// About how long each calibration run lasts.
    #[arg(long, value_name = "DURATION", default_value = "1500ms", value_parser = crate::duration::or_s, alias = "calibrate-s")]
    calibrate: Duration,
}

impl MachineArgs {
    /// Refuses a calibration length that has no meaning.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        let (least, most) = (Duration::from_millis(50), Duration::from_secs(600));
        if !(least..=most).contains(&self.calibrate) {
            bail!(
                "--calibrate must be 50ms to 600s, not {}",
                humantime::format_duration(self.calibrate)
            );
        }
        Ok(())
    }

    /// The options of an admission on these devices: one placement, so the knobs are what
    /// it names.
    pub(crate) fn admit_options(&self) -> TuneOptions {
        self.options(Knobs {
            workers: vec![1],
            slots: vec![4],
            gpu_tiles: Vec::new(),
            gpu: self.gpu,
        })
    }

    /// The options of a tuning over `knobs` on these devices, predicting only and writing
    /// its winner beside its results.
    pub(crate) fn options(&self, knobs: Knobs) -> TuneOptions {
        TuneOptions {
            rate: None,
            knobs,
            cpu_only: self.cpu_only,
            cpu_library: self.cpu_library.clone(),
            gpu_library: self.gpu_library.clone(),
            placement: None,
            prove: 0,
            recalibrate: self.recalibrate,
            max_age_s: self.max_age.as_secs(),
            store: Store::new(self.calibrations.clone().unwrap_or_else(Store::default_dir)),
            calibrate_s: self.calibrate.as_secs_f64(),
            winner: None,
            command: std::env::args()
                .map(|a| shlex::try_quote(&a).map_or(a.clone(), |q| q.into_owned()))
                .collect::<Vec<_>>()
                .join(" "),
            clock: now,
        }
    }
}

/// A tuning's account goes to stdout as it is said, between its proofs' spinners.
impl tune::Progress for Spinner {
    fn said(&self, text: &str) {
        print!("{text}");
    }
}

/// Now, as UTC text (RFC 3339, to the second).
fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
