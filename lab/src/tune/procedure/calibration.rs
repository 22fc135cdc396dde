//! The calibration a shape's tuning predicts from: the one stored for its key when it is
//! fresh, else a new measurement (the kernels in this process, then the receiver alone with
//! `bisect-rate`'s sender), stored for the next tuning. Beside a co-tenant it is a calibration
//! of its own, keyed by the co-tenant's kind and measured with the co-tenant running.
//!
//! Guarantees: a co-tenant started for a measurement is stopped before its result is used, on
//! errors too; the sender's cost is charged only when it shares the pipeline's cores.

use kplace::os::CpuSet;

use super::{TuneError, Tuner};
use crate::bisect::SearchShape;
use crate::bisect::bounds::receiver_alone;
use crate::hog::Cotenant;
use crate::tune::calibrate::{self, Calibration, Lookup, Setup as CalibrationSetup};

/// Calibrates (or reuses) this machine at `shape` with `setup`, alone or beside the sweep's
/// co-tenant.
pub(super) fn stored_or_measured(
    tuner: &Tuner<'_>,
    shape: &SearchShape,
    setup: &CalibrationSetup<'_>,
    beside_cotenant: bool,
) -> Result<Calibration, TuneError> {
    let (options, config) = (tuner.options, tuner.config);
    let mut key = setup.key.clone();
    let spec = config.cotenant.as_ref().filter(|_| beside_cotenant);
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
    let why = match lookup {
        (Some(stored), _) => {
            tracing::info!(
                "tune: at {shape}{under}: reusing the calibration in {}",
                options.store.path(&key).display()
            );
            return Ok(stored);
        }
        (None, Lookup::Forced) => "--recalibrate".to_string(),
        (None, Lookup::Stale { age_s }) => {
            format!("the stored one is {:.1} h old", age_s as f64 / 3600.0)
        }
        // A lookup that reuses comes with the stored calibration (above).
        (None, Lookup::Missing | Lookup::Reused) => "none stored".to_string(),
    };
    tracing::info!("tune: at {shape}{under}: calibrating ({why})");
    let hog = spec.map(Cotenant::start).transpose()?;
    let setup = CalibrationSetup {
        key: key.clone(),
        ..*setup
    };
    let measured = calibrate::measure(&setup);
    let receiver = match &measured {
        Ok(_) => receiver_alone(config, tuner.exe, tuner.stop, shape)?,
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
    calibration.sender_ms = receiver
        .and_then(|r| r.sender_cpu_ms_per_frame)
        .filter(|_| !apart(config.sender_cpus.as_ref(), config.sut_cpus.as_ref()));
    let path = options.store.save(&calibration)?;
    tracing::info!("tune: calibration stored in {}", path.display());
    Ok(calibration)
}

/// Whether `bisect-rate`'s sender runs apart from the pipeline: both confined, to CPU sets
/// that share no CPU (otherwise it shares the pipeline's cores).
fn apart(sender: Option<&CpuSet>, sut: Option<&CpuSet>) -> bool {
    match (sender, sut) {
        (Some(a), Some(b)) => a.cpus().iter().all(|c| !b.cpus().contains(c)),
        _ => false,
    }
}
