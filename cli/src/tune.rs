//! `kplace tune`: the placement chosen for the user. Calibrates this machine (or reuses a
//! stored calibration), predicts every placement the libraries allow, proves the best few with
//! `bisect-rate`, and writes the measured best that meets the request as a placement file.
//! The steps are `kplace_lab::tune`'s; this module turns options into them and prints what
//! they found.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace::cuda::GpuProvider;
use kplace::cuda::driver::CudaProvider;
use kplace::model::files::GraphFiles;
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::{Device, library_search_dirs};
use kplace::plan::bind::find_default_library;
use kplace::workload::kind::{self, RecordingRequest, WorkloadOptions};
use kplace_lab::bisect::{BisectConfig, SearchShape, Stop, bounds::receiver_alone};
use kplace_lab::hog::Cotenant;
use kplace_lab::tune::calibrate::{
    self, Calibration, CalibrationKey, LibraryBuild, Lookup, Setup as CalibrationSetup, Store,
};
use kplace_lab::tune::model::{self, Feed};
use kplace_lab::tune::space::{self, Candidate, Knobs, Offers};
use kplace_lab::tune::{self, Predicted, Proven, Provenance, Request};

use super::bisect::{BisectArgs, Spinner};

/// Options of `kplace tune`: what to tune for, the space weighed, and how it is proven (every
/// `bisect-rate` option, which each proving search uses).
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The input rate to sustain, CPI/s: the placement using the fewest cores (then the least
    /// GPU) that sustains it wins. Without it, the highest rate wins.
    #[arg(long, value_name = "CPI_PER_S", conflicts_with = "max_rate")]
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
    /// The GPU weighed.
    #[arg(long, default_value_t = 0)]
    gpu: u32,
    /// Weigh the CPU only, even where a GPU is usable.
    #[arg(long)]
    cpu_only: bool,
    /// The CPU kernel library (default: kplace's own).
    #[arg(long, value_name = "PATH")]
    cpu_library: Option<PathBuf>,
    /// The GPU kernel library (default: kplace's own).
    #[arg(long, value_name = "PATH")]
    gpu_library: Option<PathBuf>,
    /// Prove the best N predictions with bisect-rate (0: predict only, and write the best
    /// prediction).
    #[arg(long, value_name = "N", default_value_t = 3)]
    prove: usize,
    /// Measure the calibration again even when a stored one is fresh.
    #[arg(long)]
    recalibrate: bool,
    /// A stored calibration older than this many hours is measured again.
    #[arg(long, value_name = "HOURS", default_value_t = 168.0)]
    max_age_h: f64,
    /// Where calibrations are stored (default: $KPLACE_CALIBRATIONS, else
    /// ~/.cache/kplace/calibrations).
    #[arg(long, value_name = "DIR")]
    calibrations: Option<PathBuf>,
    /// About how long each calibration run lasts, seconds.
    #[arg(long, value_name = "S", default_value_t = 1.5)]
    calibrate_s: f64,
    /// Where the winning placement is written (default: OUT/tune-<CPI>/tuned.yaml; with several
    /// CPIs, each CPI's goes beside its other results).
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
    /// Every bisect-rate option (their --placements is ignored: tune writes its own).
    #[command(flatten)]
    search: BisectArgs,
}

/// What one CPI's tuning found.
struct Tuned {
    winner: Option<PathBuf>,
}

pub fn main(args: TuneArgs) -> anyhow::Result<ExitCode> {
    if let Some(rate) = args.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        bail!("--rate must be a positive number of CPI/s, not {rate}");
    }
    if !(args.max_age_h.is_finite() && args.max_age_h >= 0.0) {
        bail!(
            "--max-age-h must be a number of hours, not {}",
            args.max_age_h
        );
    }
    if !(args.calibrate_s.is_finite() && (0.05..=600.0).contains(&args.calibrate_s)) {
        bail!(
            "--calibrate-s must be 0.05..600 seconds, not {}",
            args.calibrate_s
        );
    }
    for (option, values) in [("--workers", &args.workers), ("--slots", &args.slots)] {
        if values.is_empty() || values.iter().any(|&v| v == 0 || v > 64) {
            bail!("{option} takes counts from 1 to 64, not {values:?}");
        }
    }
    let stop = Stop::on_signal().context("cannot install the signal handler")?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let write = args.write.clone();
    let options = Options::from(&args);
    let config = args.search.config()?;
    if write.is_some() && config.shapes.len() > 1 {
        bail!(
            "--write names one file; with several --shape, each shape's placement is written beside its results"
        );
    }
    let devices = Devices::find(&options)?;
    let mut all_found = true;
    for shape in &config.shapes {
        let tuned = tune_cpi(
            &options,
            &devices,
            &config,
            &exe,
            &stop,
            shape,
            write.as_deref(),
        )?;
        all_found &= tuned.winner.is_some();
        if stop.interrupted() {
            break;
        }
    }
    Ok(if all_found {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The options besides the search's.
struct Options {
    request_rate: Option<f64>,
    knobs: Knobs,
    cpu_only: bool,
    cpu_library: Option<PathBuf>,
    gpu_library: Option<PathBuf>,
    prove: usize,
    recalibrate: bool,
    max_age_s: u64,
    store: Store,
    calibrate_s: f64,
    command: String,
}

impl From<&TuneArgs> for Options {
    fn from(args: &TuneArgs) -> Options {
        Options {
            request_rate: args.rate,
            knobs: Knobs {
                workers: args.workers.clone(),
                slots: args.slots.clone(),
                gpu_tiles: args.gpu_tiles.clone(),
                gpu: args.gpu,
            },
            cpu_only: args.cpu_only,
            cpu_library: args.cpu_library.clone(),
            gpu_library: args.gpu_library.clone(),
            prove: args.prove,
            recalibrate: args.recalibrate,
            max_age_s: (args.max_age_h * 3600.0) as u64,
            store: Store::new(args.calibrations.clone().unwrap_or_else(Store::default_dir)),
            calibrate_s: args.calibrate_s,
            command: std::env::args()
                .map(|a| shlex::try_quote(&a).map_or(a.clone(), |q| q.into_owned()))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// The libraries weighed and the GPU, if one is usable.
struct Devices {
    cpu: PathBuf,
    gpu_library: Option<PathBuf>,
    /// The GPU's name, or why no GPU is weighed.
    gpu: Result<String, String>,
    /// The kernels the libraries weighed offer.
    offers: Offers,
    /// The placements' `libraries:` line.
    libraries: String,
}

impl Devices {
    /// Finds the libraries and opens the GPU, once for every CPI tuned.
    fn find(options: &Options) -> anyhow::Result<Devices> {
        let cpu = match &options.cpu_library {
            Some(path) => path.clone(),
            None => find_default_library(Device::Cpu)?,
        };
        let gpu_library = match &options.gpu_library {
            Some(path) => Some(path.clone()),
            None => find_default_library(Device::Gpu(options.knobs.gpu)).ok(),
        };
        let gpu = if options.cpu_only {
            Err("--cpu-only".to_string())
        } else if gpu_library.is_none() {
            Err("no GPU kernel library was found".to_string())
        } else {
            CudaProvider::global()
                .open(options.knobs.gpu)
                .map(|g| g.name().to_string())
                .map_err(|e| e.to_string())
        };
        if let Err(why) = &gpu {
            tracing::warn!("tune: weighing the CPU only: {why}");
        }
        let mut devices = Devices {
            cpu,
            gpu_library,
            gpu,
            offers: Offers::default(),
            libraries: String::new(),
        };
        devices.offers = Offers::of_libraries(Some(&devices.cpu), devices.weighed_gpu_library())?;
        devices.libraries = devices.libraries_line();
        Ok(devices)
    }

    /// The GPU library, when a GPU is weighed.
    fn weighed_gpu_library(&self) -> Option<&Path> {
        self.gpu
            .is_ok()
            .then_some(self.gpu_library.as_deref())
            .flatten()
    }

    /// The placements' `libraries:` line. A library where kplace's own are is named by its
    /// file name alone, which a placement looks up there (so the file works from any build
    /// directory); any other by its path.
    fn libraries_line(&self) -> String {
        let searched = library_search_dirs();
        let quote = |p: &Path| {
            // A placement resolves a relative path from its own directory: name it whole.
            let p = &std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            let name = match (p.parent(), p.file_name()) {
                (Some(dir), Some(file)) if searched.iter().any(|d| d == dir) => {
                    file.to_string_lossy().into_owned()
                }
                _ => p.display().to_string(),
            };
            serde_json::to_string(&name).unwrap_or_default()
        };
        match (&self.gpu_library, &self.gpu) {
            (Some(gpu), Ok(_)) => format!(
                "libraries: {{cpu: {}, gpu: {}}}\n",
                quote(&self.cpu),
                quote(gpu)
            ),
            _ => format!("libraries: {{cpu: {}}}\n", quote(&self.cpu)),
        }
    }
}

/// The graph at `shape` and its workload, found in the binary's registry: the one the graph
/// names, or the recording's frames judged against their reference.
fn workload(
    config: &BisectConfig,
    shape: &SearchShape,
    placement: &Path,
) -> anyhow::Result<(Graph, Box<dyn kind::Prepared>)> {
    let dims = config.dims(shape).map_err(anyhow::Error::msg)?;
    let files = GraphFiles {
        graph: config.graph.clone(),
        placement: placement.to_path_buf(),
        dims,
        ..GraphFiles::default()
    };
    let recording = config
        .recording
        .as_ref()
        .map(|feed| -> anyhow::Result<RecordingRequest> {
            Ok(RecordingRequest {
                path: feed.path.clone(),
                check: feed
                    .check
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--check: {e}"))?,
            })
        })
        .transpose()?;
    let mut options = WorkloadOptions::default();
    for (name, value) in &config.workload_options {
        options.push(name.as_str(), value.as_str());
    }
    let request = kind::Request {
        files: &files,
        options: &options,
        recording: recording.as_ref(),
        seed: config.seed,
        frames: 64,
        pipelines: 1,
        replay: true,
    };
    let prepared = crate::workloads::registry()
        .kind_for(&request)
        .map_err(|e| anyhow::anyhow!("{e}; kplace tune runs a graph's own workload, or any graph on a recording (--recording FILE --check reference:PLACEMENT)"))?
        .prepare(&request)?;
    let (graph, _) = prepared.load()?;
    Ok((graph, prepared))
}

/// The machine, for a calibration's key and a placement's comment.
fn machine() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown host".into());
    let cpu = kplace_lab::bisect::output::cpu_model().unwrap_or_else(|| "unknown CPU".into());
    format!("{host}, {cpu}")
}

fn cores(config: &BisectConfig) -> usize {
    config
        .sut_cpus
        .as_ref()
        .map(|c| c.cpus().len())
        .or_else(|| std::thread::available_parallelism().map(|n| n.get()).ok())
        .unwrap_or(1)
}

/// Calibrates (or reuses) this machine at `shape`, under the co-tenant `cotenant` names.
#[allow(clippy::too_many_arguments)]
fn calibration(
    options: &Options,
    config: &BisectConfig,
    exe: &Path,
    stop: &Stop,
    shape: &SearchShape,
    setup: &CalibrationSetup<'_>,
    with_cotenant: bool,
) -> anyhow::Result<Calibration> {
    let mut key = setup.key.clone();
    let spec = config.cotenant.as_ref().filter(|_| with_cotenant);
    key.cotenant = spec.map(|s| s.kind().to_string());
    let lookup = if options.recalibrate {
        (None, Lookup::Forced)
    } else {
        options.store.load(&key, options.max_age_s)?
    };
    let under = key
        .cotenant
        .as_deref()
        .map_or_else(String::new, |k| format!(" beside a {k} co-tenant"));
    if let (Some(stored), _) = lookup {
        tracing::info!(
            "tune: at {shape}{under}: reusing the calibration in {}",
            options.store.path(&key).display()
        );
        return Ok(stored);
    }
    let why = match lookup.1 {
        Lookup::Forced => "--recalibrate".to_string(),
        Lookup::Missing => "none stored".to_string(),
        Lookup::Stale { age_s } => format!("the stored one is {:.1} h old", age_s as f64 / 3600.0),
        Lookup::Reused => unreachable!("handled above"),
    };
    tracing::info!("tune: at {shape}{under}: calibrating ({why})");
    let hog = spec.map(Cotenant::start).transpose()?;
    let setup = CalibrationSetup {
        key: key.clone(),
        ..*setup
    };
    let measured = calibrate::measure(&setup);
    let receiver = match &measured {
        Ok(_) => receiver_alone(config, exe, stop, shape)?,
        Err(_) => None,
    };
    if let Some(hog) = hog {
        let _ = hog.stop();
    }
    let mut calibration = measured?;
    calibration.receiver_ms = receiver.map(|r| {
        r.cpu_ms_per_frame
            .unwrap_or(1e3 / r.rate.max(f64::MIN_POSITIVE))
    });
    // bisect-rate's sender shares the pipeline's cores unless both are confined apart.
    let apart = match (&config.sender_cpus, &config.sut_cpus) {
        (Some(a), Some(b)) => a.cpus().iter().all(|c| !b.cpus().contains(c)),
        _ => false,
    };
    calibration.sender_ms = receiver
        .and_then(|r| r.sender_cpu_ms_per_frame)
        .filter(|_| !apart);
    let path = options.store.save(&calibration)?;
    tracing::info!("tune: calibration stored in {}", path.display());
    Ok(calibration)
}

/// What one CPI's tuning works on: the devices and libraries weighed, the graph at the CPI,
/// its workload and every placement of it.
struct Prepared<'a> {
    devices: &'a Devices,
    graph: Graph,
    workload: Box<dyn kind::Prepared>,
    space: space::Enumeration,
}

impl<'a> Prepared<'a> {
    /// Loads the graph and its workload at `shape`, and enumerates the space on `devices`;
    /// `dir` receives the placement the workload is prepared with.
    fn new(
        options: &Options,
        config: &BisectConfig,
        devices: &'a Devices,
        shape: &SearchShape,
        dir: &Path,
    ) -> anyhow::Result<Prepared<'a>> {
        let (offers, libraries) = (&devices.offers, &devices.libraries);
        // Any placement of the graph prepares the workload (its memory check reads one).
        let probe = Graph::load(
            &config.graph,
            &Overrides {
                dims: config.dims(shape).map_err(anyhow::Error::msg)?,
                params: Vec::new(),
            },
        )?;
        let no_placement = |space: &space::Enumeration| {
            let why = space
                .rejected
                .iter()
                .map(|r| r.why.clone())
                .collect::<Vec<_>>()
                .join("; ");
            anyhow::anyhow!(
                "no placement of {} lays out: {why} (name the graph's kernel libraries with --cpu-library and --gpu-library)",
                config.graph.display()
            )
        };
        let probe_space = space::enumerate(&probe, offers, &options.knobs);
        let first = probe_space
            .candidates
            .first()
            .ok_or_else(|| no_placement(&probe_space))?;
        let seed = dir.join("workload-placement.yaml");
        std::fs::write(
            &seed,
            first.placement_yaml(&probe, "tune-workload", options.knobs.gpu, libraries),
        )
        .with_context(|| format!("cannot write {}", seed.display()))?;
        let (graph, workload) = workload(config, shape, &seed)?;
        let space = space::enumerate(&graph, offers, &options.knobs);
        if space.candidates.is_empty() {
            return Err(no_placement(&space));
        }
        Ok(Prepared {
            devices,
            graph,
            workload,
            space,
        })
    }

    /// What a calibration of this graph on these devices depends on.
    fn key(&self, config: &BisectConfig) -> anyhow::Result<CalibrationKey> {
        let mut builds = vec![LibraryBuild::of(&self.devices.cpu)?];
        if let Some(gpu) = self.devices.weighed_gpu_library() {
            builds.push(LibraryBuild::of(gpu)?);
        }
        Ok(CalibrationKey {
            machine: machine(),
            cores: cores(config),
            gpu: self.devices.gpu.clone().ok(),
            libraries: builds,
            graph: calibrate::graph_identity(&self.graph),
            shape: self.workload.workload().shape(),
            workload: self.workload.workload().describe(),
            cotenant: None,
        })
    }
}

/// Tunes one CPI: prepares, calibrates, predicts, proves, writes the winner; with a
/// co-tenant, also says how the choice differs from the one alone.
fn tune_cpi(
    options: &Options,
    devices: &Devices,
    config: &BisectConfig,
    exe: &Path,
    stop: &Stop,
    shape: &SearchShape,
    write: Option<&Path>,
) -> anyhow::Result<Tuned> {
    let unit = config.unit();
    let dir = config.out.join(format!("tune-{shape}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let prepared = Prepared::new(options, config, devices, shape, &dir)?;
    let graph = &prepared.graph;
    let setup = CalibrationSetup {
        graph,
        offers: &prepared.devices.offers,
        libraries: &prepared.devices.libraries,
        workload: prepared.workload.workload(),
        gpus: CudaProvider::global(),
        gpu: prepared.devices.gpu.is_ok().then_some(options.knobs.gpu),
        seconds: options.calibrate_s,
        key: prepared.key(config)?,
    };
    let request = Request {
        rate: options.request_rate,
        latency_budget: Some(config.latency_budget(shape)),
    };
    let cores = setup.key.cores as f64;
    let unloaded = calibration(options, config, exe, stop, shape, &setup, false)?;
    let loaded = match &config.cotenant {
        Some(_) => Some(calibration(
            options, config, exe, stop, shape, &setup, true,
        )?),
        None => None,
    };
    let chosen_calibration = loaded.as_ref().unwrap_or(&unloaded);
    let (predicted, unpredictable) = tune::predict_all(
        graph,
        &prepared.space,
        chosen_calibration,
        Feed::Stream,
        cores,
    );
    for (label, why) in &unpredictable {
        tracing::warn!("tune: {label}: not predicted: {why}");
    }
    if predicted.is_empty() {
        bail!("no placement could be predicted at {shape}");
    }
    let order = tune::rank(&predicted, &request);
    let front = model::pareto(
        &predicted
            .iter()
            .map(|p| p.prediction.clone())
            .collect::<Vec<_>>(),
    );
    let mut out = Said::default();
    out.say(format!(
        "kplace tune: {} at {shape}: {} placements predicted ({} left out), {} on the Pareto front of rate, latency, cores and GPU share\n{}",
        graph.name,
        predicted.len(),
        prepared.space.rejected.len() + unpredictable.len(),
        front.len(),
        prediction_table(&predicted, &front, &request, config.unit())
    ));
    let proving: Vec<usize> = order.iter().copied().take(options.prove).collect();
    let mut proofs_said = String::new();
    let winner = if proving.is_empty() {
        // Predicting only, the best prediction wins if it meets the requested rate; one
        // that does not is no winner (as a proof that falls short is none).
        order
            .first()
            .copied()
            .filter(|&i| {
                request
                    .rate
                    .is_none_or(|rate| predicted[i].prediction.rate >= rate)
            })
            .map(|i| (i, None))
    } else {
        let mut prove_config = config.clone();
        prove_config.shapes = vec![shape.clone()];
        let proven = tune::prove(
            &prove_config,
            exe,
            stop,
            &Spinner::default(),
            graph,
            &predicted,
            &proving,
            &prepared.devices.libraries,
            options.knobs.gpu,
            &dir.join("proofs"),
        )?;
        out.say(proof_table(&predicted, &proven, config.unit()));
        // Why nothing won, should nothing: the fastest proof, or every proof's ending.
        proofs_said = match proven
            .iter()
            .filter_map(|p| Some((p, p.measured?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
        {
            Some((p, m)) => format!(
                ": the fastest proven, {}, sustains {m:.1} {unit}",
                predicted[p.index].label
            ),
            None => format!(
                ": no proof found a rate ({})",
                proven
                    .iter()
                    .map(|p| format!("{}: {}", predicted[p.index].label, p.outcome))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        tune::winner(&proven, &request).map(|w| (proven[w].index, proven[w].measured))
    };
    let written = match winner {
        Some((index, measured)) => {
            let path = write.map_or_else(|| dir.join("tuned.yaml"), Path::to_path_buf);
            write_winner(
                options,
                config,
                &prepared,
                chosen_calibration,
                &predicted[index],
                measured,
                &path,
            )?;
            let p = &predicted[index];
            out.say(format!(
                "kplace tune: at {shape} the winner is {} ({}), written to {}; run it with `kplace run --placement {}`\n",
                p.label,
                measured.map_or_else(
                    || format!("predicted {:.1} {unit}, not measured", p.prediction.rate),
                    |m| format!("{m:.1} {unit} measured, {:.1} predicted", p.prediction.rate)
                ),
                path.display(),
                path.display()
            ));
            Some(path)
        }
        None if proving.is_empty() => {
            let fastest = predicted
                .iter()
                .max_by(|a, b| a.prediction.rate.total_cmp(&b.prediction.rate));
            out.say(format!(
                "kplace tune: at {shape} no placement is predicted to meet the request ({}){}; \
                 nothing written\n",
                request_text(&request, config.unit()),
                fastest.map_or_else(String::new, |p| format!(
                    ": the fastest, {}, is predicted at {:.1} {unit}",
                    p.label, p.prediction.rate
                ))
            ));
            None
        }
        None => {
            out.say(format!(
                "kplace tune: at {shape} no placement proven meets the request ({}){proofs_said}; \
                 nothing written\n",
                request_text(&request, config.unit())
            ));
            None
        }
    };
    if let Some(loaded) = &loaded {
        let (alone, _) = tune::predict_all(graph, &prepared.space, &unloaded, Feed::Stream, cores);
        let alone_best = tune::rank(&alone, &request).first().map(|&i| &alone[i]);
        let loaded_best = winner.map(|(i, _)| &predicted[i]);
        if let (Some(a), Some(b)) = (alone_best, loaded_best) {
            let kind = loaded.key.cotenant.as_deref().unwrap_or("?");
            out.say(if a.label == b.label {
                format!(
                    "kplace tune: beside the {kind} co-tenant the choice is the same as alone ({})\n",
                    a.label
                )
            } else {
                format!(
                    "kplace tune: beside the {kind} co-tenant the choice is {}; alone it would be {} ({})\n",
                    b.label,
                    a.label,
                    differences(graph, &a.candidate, &b.candidate)
                )
            });
        }
    }
    let summary = dir.join("tune.txt");
    std::fs::write(&summary, &out.0)
        .with_context(|| format!("cannot write {}", summary.display()))?;
    let calibration_json = dir.join("calibration.json");
    std::fs::write(
        &calibration_json,
        serde_json::to_string_pretty(chosen_calibration)? + "\n",
    )
    .with_context(|| format!("cannot write {}", calibration_json.display()))?;
    Ok(Tuned { winner: written })
}

/// What a tuning said: printed as it goes, and kept for `tune.txt`.
#[derive(Default)]
struct Said(String);

impl Said {
    fn say(&mut self, text: String) {
        print!("{text}");
        self.0 += &text;
    }
}

/// Writes the winner `p` to `path` with its provenance.
fn write_winner(
    options: &Options,
    config: &BisectConfig,
    prepared: &Prepared,
    calibration: &Calibration,
    p: &Predicted,
    measured: Option<f64>,
    path: &Path,
) -> anyhow::Result<()> {
    let machine = format!(
        "{} ({})",
        calibration.key.machine,
        calibration.key.gpu.as_deref().unwrap_or("no GPU weighed")
    );
    let text = tune::placement_file(
        &prepared.graph,
        &p.candidate,
        options.knobs.gpu,
        &prepared.devices.libraries,
        &Provenance {
            command: &options.command,
            machine: &machine,
            when: &humantime_now(),
            shape: &prepared.workload.workload().shape(),
            prediction: &p.prediction,
            measured,
            unit: config.unit(),
            cotenant: config.cotenant.as_ref().map(|c| c.kind()),
        },
    );
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The request, in words, rates in `unit`.
fn request_text(request: &Request, unit: &str) -> String {
    let rate = request
        .rate
        .map_or_else(|| "the highest rate".into(), |r| format!("{r} {unit}"));
    match request.latency_budget {
        Some(b) => format!("{rate} within a post-frame latency of {b}"),
        None => rate,
    }
}

/// What moved from placement `a` to `b`: stages' devices and the knobs.
fn differences(graph: &Graph, a: &Candidate, b: &Candidate) -> String {
    let mut parts: Vec<String> = graph
        .stages
        .iter()
        .zip(a.devices.iter().zip(&b.devices))
        .filter(|(_, (x, y))| x != y)
        .map(|(s, (x, y))| format!("{} {x:?} -> {y:?}", s.name))
        .collect();
    if a.workers != b.workers {
        parts.push(format!("workers {} -> {}", a.workers, b.workers));
    }
    if a.slots != b.slots {
        parts.push(format!("slots {} -> {}", a.slots, b.slots));
    }
    if a.gpu_tile != b.gpu_tile {
        parts.push(format!("GPU tile {:?} -> {:?}", a.gpu_tile, b.gpu_tile));
    }
    parts.join(", ")
}

/// The predictions, best first for the request, the Pareto front marked, rates in `unit`.
fn prediction_table(
    predicted: &[Predicted],
    front: &[usize],
    request: &Request,
    unit: &str,
) -> String {
    let order = tune::rank(predicted, request);
    let mut out = format!(
        "| placement | predicted {unit} | bound | post-frame ms | cores | GPU share | Pareto |\n|---|---|---|---|---|---|---|\n",
    );
    for i in order {
        let p = &predicted[i].prediction;
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {:.3} | {:.2} | {:.0}% | {} |",
            predicted[i].label,
            p.rate,
            p.bottleneck.name(),
            p.latency_ms,
            p.cores,
            p.gpu_share * 100.0,
            if front.contains(&i) { "yes" } else { "" }
        );
    }
    out
}

/// Predicted against measured for each candidate proven, rates in `unit`.
fn proof_table(predicted: &[Predicted], proven: &[Proven], unit: &str) -> String {
    let mut out = format!(
        "| placement | predicted {unit} | measured {unit} | error | p99 at measured, ms | search |\n|---|---|---|---|---|---|\n",
    );
    for p in proven {
        let prediction = &predicted[p.index].prediction;
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {} | {} | {} |",
            predicted[p.index].label,
            prediction.rate,
            p.measured.map_or("none".into(), |m| format!("{m:.1}")),
            p.measured.map_or(String::new(), |m| format!(
                "{:+.1}%",
                (prediction.rate / m - 1.0) * 100.0
            )),
            p.p99_ms.map_or(String::new(), |l| format!("{l:.2}")),
            p.outcome
        );
    }
    out
}

/// Now, as UTC text.
fn humantime_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
