//! The steadiness probe: one fixed compute loop timed repeatedly, judged by
//! [`crate::rate::steadiness`]. It runs before and after every search and after every failed
//! trial, in the `bisect-rate` process itself, on the CPUs that process may use.

use std::hint::black_box;
use std::time::Instant;

use crate::rate::Probe;

/// Samples per probe.
const SAMPLES: usize = 200;

/// Dependent steps of the loop per sample: about 0.3 ms on a current x86-64 core, short
/// enough for a 1-3 ms stall to show in a sample, long enough for the clock not to matter.
const STEPS: u32 = 300_000;

/// Runs the probe now and summarizes it as taken `when`.
pub fn run_probe(when: impl Into<String>) -> Probe {
    // One sample first, unmeasured, so the first measured one does not pay for a cold cache
    // or a core waking from idle.
    black_box(spin(STEPS, 1));
    let samples: Vec<f64> = (0..SAMPLES)
        .map(|i| {
            let start = Instant::now();
            black_box(spin(STEPS, i as u64 + 2));
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    Probe::from_samples(when, &samples)
}

/// `steps` rounds of xorshift64 from `seed`: a chain of dependent integer operations that no
/// compiler can shorten, with no memory traffic.
fn spin(steps: u32, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

#[cfg(test)]
mod tests {
    use crate::rate::SteadyLimits;

    use super::*;

    #[test]
    fn a_probe_takes_every_sample_and_measures_time() {
        let probe = run_probe("before");
        assert_eq!(probe.samples, SAMPLES);
        assert_eq!(probe.when, "before");
        assert!(probe.median_us > 0.0 && probe.median_us <= probe.p90_us);
        assert!(probe.p90_us <= probe.max_us);
        // Its judgement is a function of the samples; whether this machine is steady right
        // now is not asserted.
        let s = probe.judge(None, &SteadyLimits::default());
        assert_eq!(s.slowdown, 1.0);
    }

    #[test]
    fn the_loop_depends_on_every_step() {
        assert_ne!(spin(10, 1), spin(11, 1));
        assert_ne!(spin(10, 1), spin(10, 3));
    }
}
