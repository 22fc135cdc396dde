//! Admission control: how many pipelines of one placement, each fed at one rate, fit on this
//! machine, from the cost model's prediction of one pipeline (docs/adapt.md, "Admission").
//!
//! One pipeline must first keep up on its own: its predicted rate at least the rate asked, its
//! unloaded post-frame latency within the budget. Then every shared resource is divided by
//! what one pipeline demands of it at that rate, and the fewest whole pipelines any resource
//! holds is the answer, named by that resource (none is named when every resource holds
//! [`MAX_PIPELINES`], the most counted):
//!
//! | resource | capacity | one pipeline's demand at rate R |
//! |---|---|---|
//! | cores | the cores the pipelines may use, times the utilization | cores the prediction keeps busy, scaled to R |
//! | the GPU's compute | the utilization (of all its time) | the share its kernels take at R |
//! | each bus direction (a copy engine each) | the direction's frames per second, times the utilization | R |
//! | device memory | the GPU's memory, less a reserve per context | the plan's device pools |
//!
//! Limits: each pipeline's workers, source and collector are its own, so they are counted in
//! its cores, not shared; the GPU's kernels are assumed to run one after another however many
//! pipelines feed it (MPS may overlap them, so the GPU's count is a floor there); latency
//! under sharing grows with queueing the closed form does not see. That is why `kplace admit
//! --prove` measures the answer: N pipelines must sustain R, and N + 1 must not.
//!
//! Pure: no device is touched.

use super::model::{Prediction, Resource};

/// What each pipeline must do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Demand {
    /// Frames per second each pipeline is fed.
    pub rate: f64,
    /// Post-frame latency each frame should stay within, ms.
    pub budget_ms: f64,
}

/// What the machine has for the pipelines.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capacity {
    /// Cores the pipelines may use.
    pub cores: f64,
    /// The share of the cores, the GPU's time and each bus direction the pipelines may keep
    /// busy, in (0, 1]: below 1, headroom for other work on the machine.
    pub utilization: f64,
    /// The GPU's memory, bytes, when the placement has GPU stages and the GPU says.
    pub device_memory: Option<u64>,
    /// Device memory one pipeline's plan allocates, bytes.
    pub device_bytes_per_pipeline: u64,
    /// Device memory each CUDA context takes besides the plan's pools, bytes: one per
    /// pipeline in process (MPS) mode, one for all in thread mode.
    pub context_reserve: u64,
    /// Whether each pipeline has a context of its own (process mode, MPS).
    pub context_per_pipeline: bool,
}

/// A shared resource that bounds how many pipelines fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shared {
    /// The machine's cores.
    Cores,
    /// The GPU's compute.
    Gpu,
    /// Host-to-device copies.
    Upload,
    /// Device-to-host copies.
    Download,
    /// The GPU's memory.
    DeviceMemory,
}

impl Shared {
    /// The resource as the answer names it.
    pub fn name(self) -> &'static str {
        match self {
            Shared::Cores => "cores",
            Shared::Gpu => "GPU compute",
            Shared::Upload => "host-to-device copies",
            Shared::Download => "device-to-host copies",
            Shared::DeviceMemory => "device memory",
        }
    }
}

/// How many pipelines one resource holds, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// The resource.
    pub resource: Shared,
    /// Whole pipelines it holds, at most [`MAX_PIPELINES`] (it may hold more).
    pub pipelines: u64,
    /// Its capacity and one pipeline's demand, in words.
    pub detail: String,
}

impl Fit {
    /// The pipelines it holds, in words: `5 pipelines`, or `at least 64 pipelines` at the
    /// most counted.
    pub fn held(&self) -> String {
        if self.pipelines >= MAX_PIPELINES {
            format!("at least {MAX_PIPELINES} pipelines")
        } else {
            format!("{:>2} pipelines", self.pipelines)
        }
    }
}

/// The answer: how many pipelines fit, and what bounds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// Pipelines that fit (0: not even one).
    pub pipelines: u64,
    /// Why not even one, when none fits on its own terms (its rate or latency).
    pub alone: Option<String>,
    /// Each shared resource's count, fewest first: the first is what runs out.
    pub fits: Vec<Fit>,
}

impl Admission {
    /// The resource that runs out first, if any bounds the count: none when every resource
    /// holds [`MAX_PIPELINES`], the most that are counted.
    pub fn limit(&self) -> Option<&Fit> {
        self.fits.first().filter(|f| f.pipelines < MAX_PIPELINES)
    }

    /// The answer in words: how many fit and what runs out first, or why none fits, or that
    /// the most counted fit with nothing running out.
    pub fn conclusion(&self) -> String {
        if let Some(why) = &self.alone {
            return format!("0 pipelines fit: {why}");
        }
        match self.limit() {
            Some(limit) => format!(
                "{} pipelines fit: {} {} out first",
                self.pipelines,
                limit.resource.name(),
                match limit.resource {
                    Shared::Gpu | Shared::DeviceMemory => "runs",
                    Shared::Cores | Shared::Upload | Shared::Download => "run",
                }
            ),
            None => format!(
                "{MAX_PIPELINES} pipelines fit, the most kplace admit counts: no resource runs out before"
            ),
        }
    }

    /// Why `pipelines` do not fit, if they do not: what runs out, in words.
    pub fn refusal(&self, pipelines: u64) -> Option<String> {
        if let Some(alone) = &self.alone {
            return Some(alone.clone());
        }
        let fit = self.fits.iter().find(|f| f.pipelines < pipelines)?;
        Some(format!(
            "{} fit by {} ({}), not {pipelines}",
            fit.pipelines,
            fit.resource.name(),
            fit.detail
        ))
    }
}

/// The most pipelines there may be: past this, nothing is counted.
pub const MAX_PIPELINES: u64 = 64;

/// How many pipelines predicted as `one` fit `capacity` at `demand`.
pub fn admit(one: &Prediction, demand: Demand, capacity: Capacity) -> Admission {
    let rate = demand.rate;
    if !(rate > 0.0 && rate.is_finite()) {
        return none(format!("the rate must be above zero, not {rate}"));
    }
    if one.rate < rate {
        return none(format!(
            "one pipeline alone is predicted to sustain {:.1} frames/s (bound by {}), below {rate:.1}",
            one.rate,
            one.bottleneck.name()
        ));
    }
    if one.latency_ms > demand.budget_ms {
        return none(format!(
            "one pipeline's frames are predicted to take {:.3} ms after their last packet, over the {:.3} ms budget",
            one.latency_ms, demand.budget_ms
        ));
    }
    let whole = |capacity: f64, demand: f64| -> u64 {
        if demand <= 0.0 {
            MAX_PIPELINES
        } else {
            ((capacity / demand + 1e-9).floor().max(0.0) as u64).min(MAX_PIPELINES)
        }
    };
    let busy = capacity.utilization.clamp(f64::MIN_POSITIVE, 1.0);
    let mut fits = Vec::new();
    let cores = one.cores_at(rate);
    fits.push(Fit {
        resource: Shared::Cores,
        pipelines: whole(capacity.cores * busy, cores),
        detail: format!(
            "{:.0}% of {:.2} cores, {cores:.3} per pipeline",
            busy * 100.0,
            capacity.cores
        ),
    });
    let gpu = one.gpu_share_at(rate);
    if gpu > 0.0 {
        fits.push(Fit {
            resource: Shared::Gpu,
            pipelines: whole(busy, gpu),
            detail: format!(
                "{:.0}% of the GPU's time, {:.1}% per pipeline",
                busy * 100.0,
                gpu * 100.0
            ),
        });
    }
    for (resource, shared) in [
        (Resource::Upload, Shared::Upload),
        (Resource::Download, Shared::Download),
    ] {
        let limit = one.limits.iter().find(|(r, _)| *r == resource);
        if let Some(&(_, frames_per_s)) = limit.filter(|(_, l)| l.is_finite()) {
            fits.push(Fit {
                resource: shared,
                pipelines: whole(frames_per_s * busy, rate),
                detail: format!(
                    "{:.0}% of {frames_per_s:.0} frames/s across the bus that way",
                    busy * 100.0
                ),
            });
        }
    }
    if let Some(total) = capacity.device_memory
        && capacity.device_bytes_per_pipeline > 0
    {
        let (shared, each) = if capacity.context_per_pipeline {
            (
                0,
                capacity.device_bytes_per_pipeline + capacity.context_reserve,
            )
        } else {
            (capacity.context_reserve, capacity.device_bytes_per_pipeline)
        };
        let usable = total.saturating_sub(shared);
        fits.push(Fit {
            resource: Shared::DeviceMemory,
            pipelines: whole(usable as f64, each as f64),
            detail: format!(
                "{} usable, {} per pipeline",
                kplace::plan::human_bytes(usable),
                kplace::plan::human_bytes(each)
            ),
        });
    }
    fits.sort_by_key(|f| (f.pipelines, f.resource));
    Admission {
        pipelines: fits.first().map_or(MAX_PIPELINES, |f| f.pipelines),
        alone: None,
        fits,
    }
}

fn none(why: String) -> Admission {
    Admission {
        pipelines: 0,
        alone: Some(why),
        fits: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
