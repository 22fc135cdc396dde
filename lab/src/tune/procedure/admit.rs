//! `kplace admit`: how many pipelines of one placement at one rate fit on this machine. The
//! graph's workload is prepared and this machine calibrated (or its stored calibration
//! reused) as for a tuning; one pipeline of the placement is predicted from it, and the
//! shared resources divided ([`crate::tune::admit`]). With a proof, `bisect-rate` then
//! searches the sustained rate per pipeline with N pipelines and with N + 1: the answer holds
//! when N sustain the rate and N + 1 do not.
//!
//! Guarantees: the account is in `OUT/admit-<SHAPE>/admit.txt`, with the calibration used
//! beside it and the proofs' sweeps in `proof-<N>/`; a rate whose frame period is out of
//! `kplace::model::rate`'s range, and a placement the graph cannot run here, are refused before
//! anything is measured.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kplace::cuda::driver::CudaProvider;
use kplace::model::placement::{Device, Placement};
use kplace::model::rate;
use kplace::plan::layout::Layout;
use kplace::plan::{BufferSpace, Plan, PlanMode};

use super::results::{AdmitFacts, AdmitFile, ProofOfAdmission};
use super::{
    AtShape, Calibrations, Prepared, Progress, TuneError, TuneOptions, Tuner, account::Account,
    create_dir, write,
};
use crate::bisect::{self, BisectConfig, SearchShape, Stop, Systems};
use crate::tune::Request;
use crate::tune::admit::{self, Admission, Capacity, Demand};
use crate::tune::model::{self, Feed, Prediction};
use crate::tune::space::{Candidate, Where};

/// Device memory a CUDA context (with cuFFT's and the kernels' modules) takes besides the
/// plan's pools: a conservative figure for a data-centre GPU.
pub const CONTEXT_RESERVE: u64 = 768 << 20;

/// What `kplace admit` is asked.
#[derive(Clone, Debug)]
pub struct AdmitRequest {
    /// The placement each pipeline runs.
    pub placement: PathBuf,
    /// Frames per second each pipeline is fed.
    pub rate: f64,
    /// Measure the answer: N pipelines must sustain the rate, N + 1 must not.
    pub prove: bool,
    /// The share of each shared resource the pipelines may keep busy
    /// ([`Capacity::utilization`]).
    pub utilization: f64,
    /// Answer only from a calibration already stored (none stored is an error): for a check
    /// that must not measure, as `kplace run --pipelines N` makes.
    pub stored_only: bool,
}

/// What a proof measured: the sustained rate per pipeline with N and with N + 1 pipelines.
#[derive(Clone, Debug, PartialEq)]
pub struct Proof {
    /// Pipelines admitted.
    pub pipelines: u64,
    /// With N pipelines: the sustained rate per pipeline (`None`: none found).
    pub at_n: Option<f64>,
    /// With N + 1 pipelines: likewise.
    pub at_n_plus_one: Option<f64>,
    /// Whether N sustain the rate and N + 1 do not.
    pub holds: bool,
}

/// What `kplace admit` found.
#[derive(Debug)]
pub struct Admitted {
    /// The shape.
    pub shape: SearchShape,
    /// One pipeline, as the model predicts it.
    pub prediction: Prediction,
    /// How many fit, and what bounds it.
    pub admission: Admission,
    /// What the proof measured, when asked.
    pub proof: Option<Proof>,
    /// The account, as printed.
    pub text: String,
    /// Where the account and the proofs are.
    pub dir: PathBuf,
}

/// Answers `request` at the sweep's (first) shape, with the options a tuning would take.
pub fn admit(
    options: &TuneOptions,
    config: &BisectConfig,
    request: &AdmitRequest,
    exe: &Path,
    stop: &Stop,
    progress: &dyn Progress,
) -> Result<Admitted, TuneError> {
    // The rate's period sizes the slots and the latency budget: one a run can represent.
    let period = rate::frame_period("--rate", request.rate)?;
    let tuner = Tuner::new(options, config, exe, stop, progress)?;
    let shape = config
        .shapes
        .first()
        .ok_or_else(|| TuneError::Admit("no frame shape to admit at".into()))?;
    let dir = config.out.join(format!("admit-{shape}"));
    create_dir(&dir)?;
    let mut at = AtShape {
        tuner: &tuner,
        shape,
        prepared: Prepared::new(&tuner, shape, &dir)?,
        dir,
        request: Request {
            rate: Some(request.rate),
            latency_budget: Some(config.latency_budget(shape)),
        },
        account: Account::new(progress),
        proofs: Vec::new(),
    };
    let one = one_pipeline(&at.prepared, request, period)?;
    let calibrations = if request.stored_only {
        stored(&at)?
    } else {
        at.calibrate()?
    };
    let prediction = model::predict(
        &one.layout,
        &one.candidate,
        calibrations.chosen(),
        Feed::Stream,
        calibrations.cores,
    )
    .map_err(|e| TuneError::Admit(format!("{}: {e}", request.placement.display())))?;
    let budget_ms = config.latency_budget(shape).at(request.rate).as_secs_f64() * 1e3;
    let demand = Demand {
        rate: request.rate,
        budget_ms,
    };
    let capacity = Capacity {
        cores: calibrations.cores,
        utilization: request.utilization,
        device_memory: one.device_memory,
        device_bytes_per_pipeline: one.device_bytes,
        context_reserve: CONTEXT_RESERVE,
        context_per_pipeline: config.pipeline_mode.name() == "process",
    };
    let admission = admit::admit(&prediction, demand, capacity);
    at.account.say(account_text(
        &one.name,
        shape,
        &prediction,
        demand,
        &admission,
    ));
    let proof = if request.prove && !stop.interrupted() {
        let proof = prove(&at, &request.placement, admission.pipelines, request.rate)?;
        at.account
            .say(proof_text(&proof, request.rate, config.unit()));
        Some(proof)
    } else {
        None
    };
    write(&at.dir.join("admit.txt"), at.account.text())?;
    let results = AdmitFile::new(AdmitFacts {
        placement: request.placement.clone(),
        shape: shape.to_string(),
        unit: config.unit().to_string(),
        demand,
        utilization: request.utilization,
        cores: calibrations.cores,
        prediction: &prediction,
        admission: &admission,
        proof: proof.as_ref().map(|p| ProofOfAdmission {
            pipelines: p.pipelines,
            at_n: p.at_n,
            at_n_plus_one: p.at_n_plus_one,
            holds: p.holds,
        }),
    });
    write(
        &at.dir.join("admit.json"),
        &(serde_json::to_string_pretty(&results)? + "\n"),
    )?;
    write(
        &at.dir.join("calibration.json"),
        &(serde_json::to_string_pretty(calibrations.chosen())? + "\n"),
    )?;
    Ok(Admitted {
        shape: shape.clone(),
        prediction,
        admission,
        proof,
        text: at.account.text().to_string(),
        dir: at.dir,
    })
}

/// The calibration stored for this machine, graph and shape, alone; none is an error.
fn stored(at: &AtShape<'_>) -> Result<Calibrations, TuneError> {
    let setup = at.prepared.calibration_setup(at.tuner)?;
    let options = at.tuner.options;
    match options.store.load(&setup.key, options.max_age_s)? {
        (Some(alone), _) => Ok(Calibrations {
            alone,
            beside: None,
            cores: setup.key.cores as f64,
        }),
        (None, _) => Err(TuneError::Admit(format!(
            "no fresh calibration of this machine is stored for graph {} at {} (in {}): `kplace admit` or `kplace tune` measures one",
            setup.key.graph,
            at.shape,
            options.store.path(&setup.key).display()
        ))),
    }
}

/// One pipeline of the placement at the shape: what the model predicts from, and the device
/// memory its plan allocates.
struct OnePipeline {
    name: String,
    layout: Layout,
    candidate: Candidate,
    device_bytes: u64,
    device_memory: Option<u64>,
}

/// Lays out and plans the placement of `request` on the prepared graph, its slots sized for
/// a frame every `period` (the rate's); refused with the planner's reason.
fn one_pipeline(
    prepared: &Prepared<'_>,
    request: &AdmitRequest,
    period: Duration,
) -> Result<OnePipeline, TuneError> {
    let refuse = |why: String| TuneError::Admit(format!("{}: {why}", request.placement.display()));
    let mut placement = Placement::load(&request.placement).map_err(|e| refuse(e.to_string()))?;
    placement.runtime.size_slots(period);
    let graph = prepared.graph.clone();
    let plan = Plan::with_gpus(
        graph.clone(),
        placement.clone(),
        CudaProvider::global(),
        PlanMode::Run,
    )
    .map_err(|e| refuse(e.to_string()))?;
    let device_bytes = plan
        .pools
        .iter()
        .filter(|p| matches!(p.space, BufferSpace::Device(_)))
        .map(|p| p.total_bytes())
        .fold(0, u64::saturating_add);
    let device_memory = plan.gpus.values().next().and_then(|g| g.total_memory());
    let layout = Layout::new(graph, placement.clone()).map_err(|e| refuse(e.to_string()))?;
    let devices = layout
        .entries
        .iter()
        .map(|e| match e.device {
            Device::Cpu => Where::Cpu,
            Device::Gpu(_) => Where::Gpu,
        })
        .collect();
    let gpu_tile = layout
        .entries
        .iter()
        .zip(&layout.graph.stages)
        .find(|(e, s)| e.device != Device::Cpu && s.split.is_some())
        .and_then(|(e, _)| e.tile);
    let candidate = Candidate {
        devices,
        workers: placement.runtime.workers,
        slots: placement.runtime.slots,
        gpu_tile,
    };
    Ok(OnePipeline {
        name: placement.name,
        layout,
        candidate,
        device_bytes,
        device_memory,
    })
}

/// Searches the sustained rate per pipeline with `n` and `n + 1` pipelines of `placement`
/// (each its own sweep, in `proof-<N>/`, starting at `rate`).
fn prove(at: &AtShape<'_>, placement: &Path, n: u64, rate: f64) -> Result<Proof, TuneError> {
    let tuner = at.tuner;
    let sustained = |pipelines: u64| -> Result<Option<f64>, TuneError> {
        if pipelines == 0 {
            return Ok(None);
        }
        let mut config = tuner.config.clone();
        config.shapes = vec![at.shape.clone()];
        config.pipelines = pipelines;
        config.systems = Systems::Placements(vec![placement.to_path_buf()]);
        config.start_rates.insert(placement.to_path_buf(), rate);
        config.out = at.dir.join(format!("proof-{pipelines}"));
        let sweep = bisect::run(&config, tuner.exe, tuner.stop, tuner.progress)?;
        Ok(sweep.file.searches.first().and_then(|s| s.sustained_rate))
    };
    let at_n = sustained(n)?;
    let at_n_plus_one = if n < admit::MAX_PIPELINES {
        sustained(n + 1)?
    } else {
        None
    };
    let holds =
        (n == 0 || at_n.is_some_and(|r| r >= rate)) && at_n_plus_one.is_none_or(|r| r < rate);
    Ok(Proof {
        pipelines: n,
        at_n,
        at_n_plus_one,
        holds,
    })
}

/// The account of the model's answer.
fn account_text(
    name: &str,
    shape: &SearchShape,
    one: &Prediction,
    demand: Demand,
    admission: &Admission,
) -> String {
    let mut text = format!(
        "admit {name} at {shape}, {} frames/s each within a {:.3} ms budget: one pipeline is predicted to sustain {:.1} frames/s (bound by {}), {:.3} ms after its last packet, {:.2} cores and {:.1}% of the GPU at the rate\n",
        per_s(demand.rate),
        demand.budget_ms,
        one.rate,
        one.bottleneck.name(),
        one.latency_ms,
        one.cores_at(demand.rate),
        one.gpu_share_at(demand.rate) * 100.0,
    );
    if admission.alone.is_some() {
        text.push_str(&admission.conclusion());
        text.push('\n');
        return text;
    }
    for fit in &admission.fits {
        text.push_str(&format!(
            "  {:>22}: {} ({})\n",
            fit.resource.name(),
            fit.held(),
            fit.detail
        ));
    }
    text.push_str(&admission.conclusion());
    text.push('\n');
    text
}

/// A rate as the account says it: to a tenth, or to four significant digits below 0.1 (a
/// frame a day is `1.157e-5`, not `0.0`).
fn per_s(rate: f64) -> String {
    if rate >= 0.1 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.3e}")
    }
}

/// The account of a proof.
fn proof_text(proof: &Proof, rate: f64, unit: &str) -> String {
    let shown = |r: Option<f64>| r.map_or_else(|| "no rate".into(), |r| format!("{r:.1} {unit}"));
    format!(
        "proof: {} pipelines sustain {} each, {} pipelines {} each (asked {rate:.1}): the answer {}\n",
        proof.pipelines,
        shown(proof.at_n),
        proof.pipelines + 1,
        shown(proof.at_n_plus_one),
        if proof.holds {
            "holds"
        } else {
            "does NOT hold"
        }
    )
}
