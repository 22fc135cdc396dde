//! The whole of `kplace tune`, one frame shape after another: find the kernel libraries and
//! the GPU once (`devices`); at each shape, prepare the graph's workload and enumerate its
//! placements (`prepare`), calibrate this machine or reuse a stored calibration, alone and
//! beside the co-tenant (`calibration`), predict and rank every placement, prove the best
//! few with `bisect-rate`, and write the measured best that meets the request as a placement
//! file (`account` words what each step found).
//!
//! [`run`] is the one call a front end makes, with plain [`TuneOptions`] and the sweep's
//! [`BisectConfig`] (the graph, its shapes, its workload kind, and every proving search's
//! settings). It tells its caller what it finds through [`Progress`] as it goes, and returns
//! what each shape's tuning found ([`Tuning`]).
//!
//! # Guarantees
//! - Each shape's results are in `OUT/tune-<SHAPE>/`: `tune.txt` (every part of the account
//!   [`Progress::said`] was given, word for word), `calibration.json` (the calibration the
//!   choice was predicted from), the proofs' sweep in `proofs/`, and the winner `tuned.yaml`
//!   (unless [`TuneOptions::winner`] names another file).
//! - A winner is written only if it meets the request: as measured when proven, as predicted
//!   when predicting only; otherwise nothing is written and the account says why.
//! - An interrupted tuning stops after the shape it is tuning, its proofs' processes ended
//!   (the sweep's [`Stop`]).

mod account;
mod admit;
mod calibration;
mod devices;
mod prepare;
mod results;

use std::path::{Path, PathBuf};

use kplace::model::graph::GraphError;
use kplace::plan::PlanError;
use kplace::plugin::PluginError;
use kplace::workload::kind::KindError;

use crate::bisect::{self, BisectConfig, BisectError, SearchShape, Stop};
use crate::hog::HogError;
use crate::tune::calibrate::{CalibrateError, Calibration, Store};
use crate::tune::model::{self, Feed};
use crate::tune::space::Knobs;
use crate::tune::{Predicted, Provenance, Request, placement_file, predict_all, prove, rank};
use account::Account;
pub use admit::{AdmitRequest, Admitted, CONTEXT_RESERVE, Proof, admit};
use devices::Devices;
use prepare::Prepared;

/// What a tuning is asked to do, besides what its proving searches are (the
/// [`BisectConfig`]).
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The input rate to sustain, frames per second: the placement using the fewest cores
    /// (then the least GPU) that sustains it wins. `None`: the highest rate wins.
    pub rate: Option<f64>,
    /// The executor's knobs every placement is crossed with, and the GPU weighed.
    pub knobs: Knobs,
    /// Weigh the CPU only, even where a GPU is usable.
    pub cpu_only: bool,
    /// The CPU kernel library (a path, or a bare file name looked up as a placement's is);
    /// `None`: the placement's, else the graph's family's, else kplace's own.
    pub cpu_library: Option<PathBuf>,
    /// The GPU kernel library, likewise; `None` and none found: the CPU only is weighed.
    pub gpu_library: Option<PathBuf>,
    /// The placement whose `libraries:` the tuning weighs where no library is named.
    pub placement: Option<PathBuf>,
    /// How many of the best predictions are proven with `bisect-rate`; 0: predict only, and
    /// the best prediction wins.
    pub prove: usize,
    /// Measure the calibration again even when a stored one is fresh.
    pub recalibrate: bool,
    /// A stored calibration older than this many seconds is measured again.
    pub max_age_s: u64,
    /// Where calibrations are stored.
    pub store: Store,
    /// About how long each calibration run lasts, seconds.
    pub calibrate_s: f64,
    /// Where the winner is written; `None`: beside the shape's other results. Names one file,
    /// so a sweep of several shapes is refused it.
    pub winner: Option<PathBuf>,
    /// The command that asked, as the winner's comment quotes it.
    pub command: String,
    /// Now, as the winner's comment dates it (the caller's clock and format).
    pub clock: fn() -> String,
}

/// What a tuning says while it runs, beside its proving searches' progress: each part of
/// its account of a shape (the predictions' table, the proofs', the winner) as soon as it is
/// known. Every method has a default that does nothing.
pub trait Progress: bisect::Progress {
    /// `text` (whole lines) is the next part of the account.
    fn said(&self, _text: &str) {}
}

/// A [`Progress`] that says nothing.
impl Progress for () {}

/// What a tuning found, shape by shape.
#[derive(Debug)]
pub struct Tuning {
    /// Each shape tuned, in the sweep's order (those before an interruption).
    pub shapes: Vec<Tuned>,
    /// Whether the tuning was interrupted.
    pub interrupted: bool,
}

/// What one shape's tuning found.
#[derive(Debug)]
pub struct Tuned {
    /// The shape.
    pub shape: SearchShape,
    /// Where its results are.
    pub dir: PathBuf,
    /// The placement file written for its winner; `None`: no placement met the request.
    pub winner: Option<PathBuf>,
}

/// Why a tuning could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// One winner file was named for several shapes.
    #[error(
        "--write names one file; with several --shape, each shape's placement is written beside its results"
    )]
    OneWinnerFile,
    /// The winner's file cannot be named so (`-`).
    #[error(transparent)]
    Winner(kplace::report::output::OutputError),
    /// A file or directory could not be created or written.
    #[error("cannot {action} {}", path.display())]
    Io {
        /// `create` or `write`.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written where it was asked for (see [`kplace::os::write`]).
    #[error(transparent)]
    Place(#[from] kplace::os::write::WriteError),
    /// kplace's own kernel library was not found.
    #[error(transparent)]
    Library(Box<PlanError>),
    /// A kernel library named on the command line was not found.
    #[error("{option} {}: no such kernel library (looked for {searched})", written.display())]
    LibraryNotFound {
        /// `--cpu-library` or `--gpu-library`.
        option: &'static str,
        /// The library as written.
        written: PathBuf,
        /// Every path tried.
        searched: String,
    },
    /// The placements beside the graph name different libraries of a kind.
    #[error(
        "the placements beside the graph name different {kind} libraries: {named}; name one with {option} or --placement"
    )]
    Family {
        /// `cpu` or `gpu`.
        kind: String,
        /// The option that would choose.
        option: &'static str,
        /// Each library and the placement naming it.
        named: String,
    },
    /// The placement the libraries are taken from could not be read.
    #[error(transparent)]
    Placement(Box<kplace::model::placement::PlacementError>),
    /// A kernel library could not be loaded.
    #[error(transparent)]
    Kernels(#[from] PluginError),
    /// The graph could not be loaded at a shape.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A shape the graph cannot be bound at.
    #[error("{0}")]
    Shape(String),
    /// No placement of the graph lays out on the devices weighed.
    #[error(
        "no placement of {} lays out: {why} (name a placement of the graph with --placement, or its kernel libraries with --cpu-library and --gpu-library)",
        graph.display()
    )]
    NoPlacement {
        /// The graph file.
        graph: PathBuf,
        /// Every reason the enumeration gave.
        why: String,
    },
    /// The recording's check is not one.
    #[error("--check: {0}")]
    Check(kplace::workload::reference::UnknownCheck),
    /// The sweep names no workload to run the graph with.
    #[error("graph {}: the sweep names no workload and no recording", .0.display())]
    NoWorkload(PathBuf),
    /// The workload's kind refuses the sweep's options.
    #[error(
        "{0}; kplace tune runs a graph's own workload, or any graph on a recording (--recording FILE --check reference:PLACEMENT)"
    )]
    WorkloadKind(KindError),
    /// The workload could not be prepared.
    #[error(transparent)]
    Workload(#[from] KindError),
    /// A calibration could not be measured, read or stored.
    #[error(transparent)]
    Calibrate(#[from] CalibrateError),
    /// The co-tenant beside a calibration could not be started.
    #[error(transparent)]
    Cotenant(#[from] HogError),
    /// A proving search, or the receiver's calibration, failed.
    #[error(transparent)]
    Sweep(#[from] BisectError),
    /// The model predicted no placement at a shape.
    #[error("no placement could be predicted at {0}")]
    Unpredictable(SearchShape),
    /// `kplace admit` cannot answer for its placement.
    #[error("kplace admit: {0}")]
    Admit(String),
    /// A rate is out of the range a run can represent.
    #[error(transparent)]
    Rate(#[from] kplace::model::rate::RateError),
    /// The calibration could not be encoded.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Tunes every shape of `config` with `options`, starting `exe` (the `kplace` executable) for
/// the receiver's calibration and the proofs, telling `progress` what it finds; stops after
/// the shape it is tuning when `stop` is interrupted.
pub fn run(
    options: &TuneOptions,
    config: &BisectConfig,
    exe: &Path,
    stop: &Stop,
    progress: &dyn Progress,
) -> Result<Tuning, TuneError> {
    if options.winner.is_some() && config.shapes.len() > 1 {
        return Err(TuneError::OneWinnerFile);
    }
    // The winner is written last, after minutes of calibrations and proofs: a name it could
    // never be written to fails now.
    if let Some(path) = &options.winner {
        kplace::report::output::file_only(path, "--write").map_err(TuneError::Winner)?;
        kplace::os::write::check(path, kplace::os::write::Kind::File)?;
    }
    let tuner = Tuner::new(options, config, exe, stop, progress)?;
    let mut shapes = Vec::new();
    for shape in &config.shapes {
        shapes.push(tuner.tune(shape)?);
        if stop.interrupted() {
            break;
        }
    }
    Ok(Tuning {
        shapes,
        interrupted: stop.interrupted(),
    })
}

/// What every shape's tuning shares: the options, the sweep, and the devices found once.
struct Tuner<'a> {
    options: &'a TuneOptions,
    config: &'a BisectConfig,
    exe: &'a Path,
    stop: &'a Stop,
    progress: &'a dyn Progress,
    devices: Devices,
}

impl<'a> Tuner<'a> {
    /// A tuner of `config` with `options`, its devices found.
    fn new(
        options: &'a TuneOptions,
        config: &'a BisectConfig,
        exe: &'a Path,
        stop: &'a Stop,
        progress: &'a dyn Progress,
    ) -> Result<Tuner<'a>, TuneError> {
        Ok(Tuner {
            options,
            config,
            exe,
            stop,
            progress,
            devices: Devices::find(options, &config.graph)?,
        })
    }
}

/// The calibrations a shape's predictions come from.
struct Calibrations {
    /// This machine alone.
    alone: Calibration,
    /// Beside the sweep's co-tenant, if it has one.
    beside: Option<Calibration>,
    /// The cores the pipeline may use.
    cores: f64,
}

impl Calibrations {
    /// The calibration the choice is predicted from: beside the co-tenant where there is one.
    fn chosen(&self) -> &Calibration {
        self.beside.as_ref().unwrap_or(&self.alone)
    }
}

/// The predictions at a shape, and their order for the request (best first).
struct Predictions {
    predicted: Vec<Predicted>,
    order: Vec<usize>,
    /// Indices on the Pareto front.
    front: Vec<usize>,
    /// Placements left out (refused, or not predictable).
    left_out: usize,
}

/// The prediction that won, what its proof measured (`None`: predicting only), and whether
/// that is only a lower bound.
#[derive(Clone, Copy)]
struct Winner {
    index: usize,
    measured: Option<f64>,
    at_least: bool,
}

/// One shape's tuning as it runs.
struct AtShape<'t> {
    tuner: &'t Tuner<'t>,
    shape: &'t SearchShape,
    /// Where its results go.
    dir: PathBuf,
    prepared: Prepared<'t>,
    request: Request,
    account: Account<'t>,
    /// The placements proven, as `tune.json` lists them.
    proofs: Vec<results::ProofEntry>,
}

impl<'t> Tuner<'t> {
    /// Tunes `shape`: prepares, calibrates, predicts, proves, writes the winner; with a
    /// co-tenant, also says how the choice differs from the one alone.
    fn tune(&'t self, shape: &'t SearchShape) -> Result<Tuned, TuneError> {
        let dir = self.config.out.join(format!("tune-{shape}"));
        create_dir(&dir)?;
        let mut at = AtShape {
            tuner: self,
            shape,
            prepared: Prepared::new(self, shape, &dir)?,
            dir,
            request: Request {
                rate: self.options.rate,
                latency_budget: Some(self.config.latency_budget(shape)),
            },
            account: Account::new(self.progress),
            proofs: Vec::new(),
        };
        let calibrations = at.calibrate()?;
        let predictions = at.predict(&calibrations)?;
        let winner = at.choose(&predictions)?;
        let written = match winner {
            Some(winner) => Some(at.write_winner(calibrations.chosen(), &predictions, winner)?),
            None => None,
        };
        if let Some(winner) = winner {
            at.compare_with_alone(&calibrations, &predictions, winner);
        }
        at.keep(calibrations.chosen())?;
        at.write_results(&predictions, winner.zip(written.clone()))?;
        Ok(Tuned {
            shape: shape.clone(),
            dir: at.dir,
            winner: written,
        })
    }
}

impl AtShape<'_> {
    /// The calibrations alone and, with a co-tenant, beside it: stored, or measured now.
    fn calibrate(&self) -> Result<Calibrations, TuneError> {
        let setup = self.prepared.calibration_setup(self.tuner)?;
        let alone = calibration::stored_or_measured(self.tuner, self.shape, &setup, false)?;
        let beside = match &self.tuner.config.cotenant {
            Some(_) => Some(calibration::stored_or_measured(
                self.tuner, self.shape, &setup, true,
            )?),
            None => None,
        };
        Ok(Calibrations {
            alone,
            beside,
            cores: setup.key.cores as f64,
        })
    }

    /// Every placement predicted from the chosen calibration and ranked for the request; says
    /// their table, the Pareto front marked.
    fn predict(&mut self, calibrations: &Calibrations) -> Result<Predictions, TuneError> {
        let (graph, space) = (&self.prepared.graph, &self.prepared.space);
        let (predicted, unpredictable) = predict_all(
            graph,
            space,
            calibrations.chosen(),
            Feed::Stream,
            calibrations.cores,
        );
        for (label, why) in &unpredictable {
            tracing::warn!("tune: {label}: not predicted: {why}");
        }
        if predicted.is_empty() {
            return Err(TuneError::Unpredictable(self.shape.clone()));
        }
        let order = rank(&predicted, &self.request);
        let front = model::pareto(
            &predicted
                .iter()
                .map(|p| p.prediction.clone())
                .collect::<Vec<_>>(),
        );
        let left_out = space.rejected.len() + unpredictable.len();
        self.account.say(account::predictions(
            graph,
            self.shape,
            &predicted,
            left_out,
            &front,
            &self.request,
            self.tuner.config.unit(),
        ));
        Ok(Predictions {
            predicted,
            order,
            front,
            left_out,
        })
    }

    /// The winner: the measured best of the best few predictions, proven side by side; when
    /// predicting only, the best prediction if it meets the requested rate. Without one,
    /// says why.
    fn choose(&mut self, predictions: &Predictions) -> Result<Option<Winner>, TuneError> {
        let prove = self.tuner.options.prove;
        let proving: Vec<usize> = predictions.order.iter().copied().take(prove).collect();
        if proving.is_empty() {
            Ok(self.best_predicted(predictions))
        } else {
            self.best_proven(predictions, &proving)
        }
    }

    /// Predicting only, the best prediction wins if it meets the requested rate; one that
    /// does not is no winner (as a proof that falls short is none).
    fn best_predicted(&mut self, predictions: &Predictions) -> Option<Winner> {
        let Predictions {
            predicted, order, ..
        } = predictions;
        let winner = order
            .first()
            .copied()
            .filter(|&i| {
                self.request
                    .rate
                    .is_none_or(|rate| predicted[i].prediction.rate >= rate)
            })
            .map(|index| Winner {
                index,
                measured: None,
                at_least: false,
            });
        if winner.is_none() {
            self.account.say(account::none_predicted(
                self.shape,
                predicted,
                &self.request,
                self.tuner.config.unit(),
            ));
        }
        winner
    }

    /// Proves the predictions `proving` (indices, best first) with one sweep at this shape,
    /// says their table, and the measured best that meets the request wins.
    fn best_proven(
        &mut self,
        predictions: &Predictions,
        proving: &[usize],
    ) -> Result<Option<Winner>, TuneError> {
        let (tuner, predicted) = (self.tuner, &predictions.predicted);
        let unit = tuner.config.unit();
        let mut config = tuner.config.clone();
        config.shapes = vec![self.shape.clone()];
        let proven = prove(
            &config,
            tuner.exe,
            tuner.stop,
            tuner.progress,
            &self.prepared.graph,
            predicted,
            proving,
            &tuner.devices.libraries,
            tuner.options.knobs.gpu,
            &self.dir.join("proofs"),
        )?;
        self.account
            .say(account::proof_table(predicted, &proven, unit));
        self.proofs = proven
            .iter()
            .map(|p| {
                let of = &predicted[p.index];
                results::ProofEntry::new(p, &of.label, of.prediction.rate)
            })
            .collect();
        let winner = crate::tune::winner(&proven, &self.request).map(|w| Winner {
            index: proven[w].index,
            measured: proven[w].measured,
            at_least: proven[w].at_least,
        });
        if winner.is_none() {
            let found = account::proofs_found(predicted, &proven, unit);
            self.account.say(account::none_proven(
                self.shape,
                &self.request,
                &found,
                unit,
            ));
        }
        Ok(winner)
    }

    /// Writes the winner with its provenance (the calibration it was predicted from, what its
    /// proof measured), and says where.
    fn write_winner(
        &mut self,
        calibration: &Calibration,
        predictions: &Predictions,
        winner: Winner,
    ) -> Result<PathBuf, TuneError> {
        let (tuner, prepared) = (self.tuner, &self.prepared);
        let (options, config) = (tuner.options, tuner.config);
        let p = &predictions.predicted[winner.index];
        let path = options
            .winner
            .clone()
            .unwrap_or_else(|| self.dir.join("tuned.yaml"));
        let machine = format!(
            "{} ({})",
            calibration.key.machine,
            calibration.key.gpu.as_deref().unwrap_or("no GPU weighed")
        );
        let text = placement_file(
            &prepared.graph,
            &p.candidate,
            options.knobs.gpu,
            &tuner.devices.libraries,
            &Provenance {
                command: &options.command,
                machine: &machine,
                when: &(options.clock)(),
                shape: &prepared.workload.workload().shape().to_string(),
                prediction: &p.prediction,
                measured: winner.measured,
                at_least: winner.at_least,
                unit: config.unit(),
                cotenant: config.cotenant.as_ref().map(|c| c.kind()),
            },
        );
        write(&path, &text)?;
        self.account.say(account::winner(
            self.shape,
            p,
            (winner.measured, winner.at_least),
            &path,
            config.unit(),
        ));
        Ok(path)
    }

    /// Beside a co-tenant, says how its winner differs from the placement that would win
    /// alone; alone, says nothing.
    fn compare_with_alone(
        &mut self,
        calibrations: &Calibrations,
        predictions: &Predictions,
        winner: Winner,
    ) {
        let Some(beside) = &calibrations.beside else {
            return;
        };
        let graph = &self.prepared.graph;
        let (alone, _) = predict_all(
            graph,
            &self.prepared.space,
            &calibrations.alone,
            Feed::Stream,
            calibrations.cores,
        );
        let Some(&best) = rank(&alone, &self.request).first() else {
            return;
        };
        let kind = beside.key.cotenant.as_deref().unwrap_or("?");
        self.account.say(account::cotenant_choice(
            graph,
            kind,
            &alone[best],
            &predictions.predicted[winner.index],
        ));
    }

    /// Keeps the account in `tune.txt` and the calibration the choice was predicted from in
    /// `calibration.json`.
    fn keep(&self, calibration: &Calibration) -> Result<(), TuneError> {
        write(&self.dir.join("tune.txt"), self.account.text())?;
        write(
            &self.dir.join("calibration.json"),
            &(serde_json::to_string_pretty(calibration)? + "\n"),
        )
    }
}

/// Creates `dir` and its parents.
fn create_dir(dir: &Path) -> Result<(), TuneError> {
    Ok(kplace::os::write::create_dir_all(dir)?)
}

/// Writes `text` as the whole of the file `path` (see [`kplace::os::write`]).
fn write(path: &Path, text: &str) -> Result<(), TuneError> {
    Ok(kplace::os::write::write_whole(
        path,
        kplace::os::write::Kind::File,
        text.as_bytes(),
    )?)
}
