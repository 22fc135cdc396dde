//! The bounds a sustained rate is judged against, measured beside each search: the receiver
//! alone (ingest only, fed by a burst) and the kernels alone (one thread, no runtime).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Stdio;

use kplace::session::child::{ChildFrames, Pace};
use serde_json::{Value, json};

use super::failure::TrialFault;
use super::systems::{System, plan_for};
use super::trial::ready_ports;
use super::{BisectConfig, BisectError, SearchShape, Stop, Trials};
use crate::bounds;

/// The receiver alone and the kernels alone, in frames/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Bounds {
    pub(super) ingest_only: Option<f64>,
    pub(super) kernel_only: Option<f64>,
}

impl Bounds {
    /// The lower of the two, where measured.
    fn least(&self) -> Option<f64> {
        [self.ingest_only, self.kernel_only]
            .into_iter()
            .flatten()
            .reduce(f64::min)
    }

    /// `sustained` over the lower bound; `None` without either, or with a bound of zero.
    pub(super) fn ratio(&self, sustained: Option<f64>) -> Option<f64> {
        let least = self.least().filter(|&l| l > 0.0)?;
        Some(sustained? / least)
    }

    fn to_json(self) -> Value {
        json!({"ingest_only_per_s": self.ingest_only, "kernel_only_per_s": self.kernel_only})
    }
}

/// Bounds measured just before a search and just after it (none after an interrupted one).
#[derive(Clone, Copy, Debug)]
pub(super) struct BracketedBounds {
    pub(super) before: Bounds,
    pub(super) after: Option<Bounds>,
}

impl BracketedBounds {
    /// Each bound's mean over both measurements: the machine's speed across the search.
    pub(super) fn mean(&self) -> Bounds {
        let mean = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some((a + b) / 2.0),
            (a, b) => a.or(b),
        };
        let after = self.after.unwrap_or(Bounds {
            ingest_only: None,
            kernel_only: None,
        });
        Bounds {
            ingest_only: mean(self.before.ingest_only, after.ingest_only),
            kernel_only: mean(self.before.kernel_only, after.kernel_only),
        }
    }

    /// The means, both measurements and the ratio of `sustained` to the lower mean.
    pub(super) fn to_json(self, sustained: Option<f64>) -> Value {
        let mean = self.mean();
        json!({
            "ingest_only_per_s": mean.ingest_only,
            "kernel_only_per_s": mean.kernel_only,
            "sustained_over_min_bound": mean.ratio(sustained),
            "before": self.before.to_json(),
            "after": self.after.map(Bounds::to_json),
        })
    }
}

/// The receiver alone at `shape`, fed by a local burst: its rate, frames/s, and its CPU time per
/// frame, ms (`None` where it could not be measured).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverAlone {
    /// Frames per second received.
    pub rate: f64,
    /// The receiver process's CPU time per frame, ms.
    pub cpu_ms_per_frame: Option<f64>,
    /// The sender's CPU time per frame, ms.
    pub sender_cpu_ms_per_frame: Option<f64>,
}

/// Measures the receiver alone at `shape` with `config`'s graph, recording and sender settings,
/// starting `exe` as `kplace run --ingest-only` and `kplace send --burst`; `None` when the
/// receiver did not report a rate.
pub fn receiver_alone(
    config: &BisectConfig,
    exe: &Path,
    stop: &Stop,
    shape: &SearchShape,
) -> Result<Option<ReceiverAlone>, BisectError> {
    let ctx = Trials {
        mps: None,
        exe,
        config,
        stop,
    };
    ingest_only(&ctx, shape)
}

/// The receiver alone at `shape`, fed by a burst of 2000 frames.
fn ingest_only(
    ctx: &Trials<'_>,
    shape: &SearchShape,
) -> Result<Option<ReceiverAlone>, BisectError> {
    let fail = |why: String| BisectError::Bounds {
        shape: shape.to_string(),
        why,
    };
    let frames = 2000u64;
    let ready = tempfile::NamedTempFile::new()
        .map_err(|e| fail(format!("cannot create a ready file: {e}")))?;
    let ready = ready.into_temp_path();
    let _ = std::fs::remove_file(&ready);
    let mut spec = ctx.receiver();
    spec.ingest_only = true;
    spec.ready_file = Some(ready.to_path_buf());
    spec.shape = Some(shape.shape.clone());
    spec.frames = Some(frames);
    spec.frames_of = ctx
        .config
        .recording
        .as_ref()
        .map(|r| ChildFrames::Recording {
            path: r.path.clone(),
            check: None,
        });
    let mut receiver = ctx
        .receiver_command(&spec)
        .map_err(|e| fail(e.to_string()))?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start the ingest-only receiver: {e}")))?;
    ctx.stop.add(receiver.id());
    let ingest_only = match ready_ports(&mut receiver, &ready) {
        Ok(ports) => {
            let port = ports.first().copied().unwrap_or(0);
            let dest = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let burst = ctx.config.sender(shape, dest, Pace::Burst, frames);
            // A sender that cannot be started is a burst that failed: the receiver then ends
            // on its own start timeout.
            let burst = ctx
                .sender_child(&burst)
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|mut sender| {
                    sender.stdout(Stdio::piped()).stderr(Stdio::null()).output()
                });
            let sender_cpu_ms_per_frame = burst
                .as_ref()
                .ok()
                .and_then(|o| number_after(&String::from_utf8_lossy(&o.stdout), "sender CPU: "));
            let id = receiver.id();
            let out = receiver.wait_with_output();
            ctx.stop.remove(id);
            let text = out
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            burst.ok().filter(|o| o.status.success()).and_then(|_| {
                let rate = text
                    .split(" frames/s")
                    .next()
                    .and_then(|t| t.rsplit(' ').next())
                    .and_then(|v| v.parse().ok())?;
                let cpu_ms_per_frame = number_after(&text, "receiver CPU: ");
                Some(ReceiverAlone {
                    rate,
                    cpu_ms_per_frame,
                    sender_cpu_ms_per_frame,
                })
            })
        }
        Err(_) => {
            let _ = receiver.kill();
            let _ = receiver.wait();
            ctx.stop.remove(receiver.id());
            None
        }
    };
    Ok(ingest_only)
}

/// The number `label` is followed by in `text` (`receiver CPU: 0.1845 ms per frame`).
fn number_after(text: &str, label: &str) -> Option<f64> {
    text.split(label)
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The receiver alone (for every system) and the kernels alone (for a CPU placement) at `shape`,
/// measured now.
pub(super) fn measure_bounds(
    ctx: &Trials<'_>,
    system: &System,
    shape: &SearchShape,
) -> Result<Bounds, BisectError> {
    let fail = |why: String| BisectError::Bounds {
        shape: shape.to_string(),
        why,
    };
    let ingest_only = ingest_only(ctx, shape)?.map(|r| r.rate);
    let kernel_only = match system {
        System::Placement(placement) => 'bound: {
            let plan = plan_for(ctx.config, placement, shape).map_err(|e| fail(e.to_string()))?;
            if plan.stages.iter().any(|s| s.gpu().is_some()) {
                // Kernels back to back on one CPU thread say nothing of a GPU placement.
                break 'bound None;
            }
            let prepared: std::sync::Arc<[Vec<u8>]> = match &ctx.config.recording {
                Some(r) => {
                    kplace::workload::recording::Recording::load(&r.path, &plan.graph)
                        .map_err(|e| fail(e.to_string()))?
                        .frames
                }
                None => ctx
                    .config
                    .workload_request(shape, 4, |kind, request| {
                        let prepared = kind
                            .prepare(request)
                            .map_err(|e| TrialFault::Kind(Box::new(e)))?;
                        prepared
                            .workload()
                            .frames()
                            .cloned()
                            .ok_or(TrialFault::NoFrames)
                    })
                    .map_err(|e| fail(e.to_string()))?,
            };
            let rate = |count| bounds::kernel_only_rate(&plan, &prepared, count);
            // About a second of frames, from a short first measurement.
            let probe = rate(8).map_err(|e| fail(e.to_string()))?;
            Some(rate((probe as u64).clamp(8, 5000)).map_err(|e| fail(e.to_string()))?)
        }
        System::Adaptive(_) | System::Command { .. } => None,
    };
    tracing::info!(
        "bisect-rate: bounds at {shape}: ingest only {}, kernels only {}",
        ingest_only.map_or("n/a".into(), |r| format!("{r:.1} frames/s")),
        kernel_only.map_or("n/a".into(), |r| format!("{r:.1} frames/s"))
    );
    Ok(Bounds {
        ingest_only,
        kernel_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketing_bounds_average_what_both_sides_measured() {
        let before = Bounds {
            ingest_only: Some(1000.0),
            kernel_only: Some(800.0),
        };
        let after = Bounds {
            ingest_only: None,
            kernel_only: Some(1200.0),
        };
        let both = BracketedBounds {
            before,
            after: Some(after),
        };
        assert_eq!(
            both.mean(),
            Bounds {
                ingest_only: Some(1000.0),
                kernel_only: Some(1000.0)
            }
        );
        let json = both.to_json(Some(500.0));
        assert_eq!(json["sustained_over_min_bound"], 0.5);
        assert_eq!(json["before"]["kernel_only_per_s"], 800.0);
        assert_eq!(json["after"]["ingest_only_per_s"], Value::Null);
        let interrupted = BracketedBounds {
            before,
            after: None,
        };
        assert_eq!(
            interrupted.mean(),
            before,
            "an interrupted search has one side"
        );
        assert_eq!(
            interrupted.to_json(None)["sustained_over_min_bound"],
            Value::Null
        );
    }
}
