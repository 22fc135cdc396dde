//! Is the machine steady? The judgement of a steadiness probe, as a pure function.
//!
//! A probe times one fixed compute loop many times back to back (the runner measures; see
//! `kplace bisect-rate`). A steady machine runs it in nearly the same time every time and as
//! fast as at the start of the search; a machine that is being stalled or slowed (another
//! tenant, a hypervisor taking the core, frequency changes) does not. [`Probe::judge`]
//! guarantees:
//!
//! - **Two signals, both stated.** *Jitter* is the p90 of the samples over their median: more
//!   than one sample in ten was held up by that factor. *Slowdown* is the median over the
//!   baseline probe's median (the first of the search): the loop itself got slower.
//! - **Unsteady means a threshold was crossed**: jitter above [`SteadyLimits::max_jitter`] or
//!   slowdown above [`SteadyLimits::max_slowdown`]; the reason names which and by how much.
//! - **Fails closed.** A probe with no samples, or with a sample that is not a positive finite
//!   time, is unsteady.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The limits a steady machine stays within.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteadyLimits {
    /// The largest p90 / median of one probe's samples (default 1.5).
    pub max_jitter: f64,
    /// The largest median / baseline median (default 1.25).
    pub max_slowdown: f64,
}

impl Default for SteadyLimits {
    fn default() -> Self {
        Self {
            max_jitter: 1.5,
            max_slowdown: 1.25,
        }
    }
}

/// What one probe measured: the loop's times, in microseconds, in the order run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// When in the search the probe ran: `before`, `after`, or `after trial N`.
    pub when: String,
    /// The median sample, µs.
    pub median_us: f64,
    /// The 90th percentile sample, µs.
    pub p90_us: f64,
    /// The slowest sample, µs.
    pub max_us: f64,
    /// How many samples.
    pub samples: usize,
}

/// A probe's judgement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Steadiness {
    /// p90 / median.
    pub jitter: f64,
    /// median / the baseline's median (1 for the baseline itself).
    pub slowdown: f64,
    /// Why the machine is unsteady; `None` when it is steady.
    pub unsteady: Option<String>,
}

impl Steadiness {
    /// Whether the machine was steady.
    pub fn is_steady(&self) -> bool {
        self.unsteady.is_none()
    }
}

impl fmt::Display for Steadiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.unsteady {
            None => write!(
                f,
                "steady (jitter {:.2}, slowdown {:.2})",
                self.jitter, self.slowdown
            ),
            Some(why) => write!(f, "unsteady: {why}"),
        }
    }
}

impl Probe {
    /// A probe's summary of `samples_us` (any order), run at `when`.
    pub fn from_samples(when: impl Into<String>, samples_us: &[f64]) -> Self {
        let mut sorted: Vec<f64> = samples_us.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| -> f64 {
            if sorted.is_empty() {
                f64::NAN
            } else {
                sorted[((sorted.len() - 1) as f64 * q).round() as usize]
            }
        };
        Self {
            when: when.into(),
            median_us: at(0.5),
            p90_us: at(0.9),
            max_us: sorted.last().copied().unwrap_or(f64::NAN),
            samples: sorted.len(),
        }
    }

    /// Judges this probe against `limits`, with `baseline` the search's first probe (`None`
    /// when this is it).
    pub fn judge(&self, baseline: Option<&Probe>, limits: &SteadyLimits) -> Steadiness {
        let valid = |p: &Probe| {
            p.samples > 0
                && [p.median_us, p.p90_us, p.max_us]
                    .iter()
                    .all(|v| v.is_finite() && *v > 0.0)
        };
        let jitter = self.p90_us / self.median_us;
        let slowdown = baseline.map_or(1.0, |b| self.median_us / b.median_us);
        let unsteady = if !valid(self) || baseline.is_some_and(|b| !valid(b)) {
            Some("the probe measured no usable time".to_string())
        } else if exceeds(jitter, limits.max_jitter) {
            Some(format!(
                "probe jitter {jitter:.2} (p90 {:.0} us over median {:.0} us) exceeds {:.2}",
                self.p90_us, self.median_us, limits.max_jitter
            ))
        } else if exceeds(slowdown, limits.max_slowdown) {
            Some(format!(
                "the probe ran {slowdown:.2}x slower than at the start of the search (limit {:.2})",
                limits.max_slowdown
            ))
        } else {
            None
        };
        Steadiness {
            jitter,
            slowdown,
            unsteady,
        }
    }
}

/// Whether `value` is above `limit`, or either is NaN (fails closed).
fn exceeds(value: f64, limit: f64) -> bool {
    !matches!(
        value.partial_cmp(&limit),
        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
    )
}

/// `(max - min) / median` of `values`, or `None` with fewer than two finite values: the
/// relative spread every table reports.
pub fn relative_spread(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    Some((v[v.len() - 1] - v[0]) / median)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(samples: &[f64]) -> Probe {
        Probe::from_samples("before", samples)
    }

    #[test]
    fn a_quiet_machine_is_steady() {
        let samples: Vec<f64> = (0..100).map(|i| 500.0 + (i % 7) as f64).collect();
        let p = probe(&samples);
        assert_eq!((p.median_us, p.max_us, p.samples), (503.0, 506.0, 100));
        let s = p.judge(None, &SteadyLimits::default());
        assert!(s.is_steady(), "{s}");
        assert_eq!(s.slowdown, 1.0);
        assert!(s.to_string().starts_with("steady (jitter 1.0"), "{s}");
    }

    #[test]
    fn stalls_in_more_than_one_sample_in_ten_are_jitter() {
        // 85 samples of 500 us, 15 held up by a 2 ms stall.
        let mut samples = vec![500.0; 85];
        samples.extend([2500.0; 15]);
        let s = probe(&samples).judge(None, &SteadyLimits::default());
        let why = s.unsteady.as_deref().expect("unsteady");
        assert!(why.starts_with("probe jitter 5.00"), "{why}");
        // One stall in a hundred is not.
        let mut samples = vec![500.0; 99];
        samples.push(2500.0);
        assert!(
            probe(&samples)
                .judge(None, &SteadyLimits::default())
                .is_steady()
        );
    }

    #[test]
    fn a_slower_loop_than_at_the_start_is_a_slowdown() {
        let base = probe(&[500.0; 50]);
        let slow = probe(&[700.0; 50]);
        let s = slow.judge(Some(&base), &SteadyLimits::default());
        assert!((s.slowdown - 1.4).abs() < 1e-12);
        assert!(
            s.unsteady.as_deref().unwrap().contains("1.40x slower"),
            "{s}"
        );
        let fine = probe(&[600.0; 50]).judge(Some(&base), &SteadyLimits::default());
        assert!(fine.is_steady(), "{fine}");
    }

    #[test]
    fn a_probe_without_usable_samples_fails_closed() {
        let limits = SteadyLimits::default();
        assert!(!probe(&[]).judge(None, &limits).is_steady());
        assert!(!probe(&[0.0, 0.0]).judge(None, &limits).is_steady());
        assert!(!probe(&[f64::NAN, 1.0]).judge(None, &limits).is_steady());
        assert!(!probe(&[5.0]).judge(Some(&probe(&[])), &limits).is_steady());
    }

    #[test]
    fn spreads_are_relative_to_the_median() {
        assert_eq!(relative_spread(&[400.0, 450.0, 500.0]), Some(100.0 / 450.0));
        assert_eq!(relative_spread(&[400.0]), None);
        assert_eq!(relative_spread(&[400.0, f64::NAN]), None);
    }
}
