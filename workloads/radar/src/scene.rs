//! The synthetic radar scene: point targets in complex white Gaussian noise, as int16 I/Q.
//!
//! This is the scene of docs/workload.md. For chirp `m` and sample `n` of frame `f`:
//!
//! ```text
//! x[m,n] = sum over targets A * exp(j(2 pi (rb n / N + db m / M) - 4 pi fc R / c)) + noise
//! R  = R0 + v * f * frame_interval         (ranges advance between frames)
//! rb = 2 B R / c                           (range bin: fractional, in FFT bins)
//! db = 2 v fc / c * T * M                  (Doppler bin: fractional, signed)
//! A  = sigma * 10^(SNR / 20)
//! ```
//!
//! Guarantees:
//! - A frame depends only on the configuration and its frame index: its noise comes from a
//!   generator seeded from `(seed, frame)` alone, so frames may be generated independently, in
//!   any order and on any thread, and are bit-identical every time.
//! - Samples are rounded to the nearest integer (ties away from zero). A sample that does not
//!   fit in an `i16` is an error ([`SceneError::Clipping`]), never silently saturated.
//! - [`Scene::truth`] gives each target's fractional bins at a frame, folded into the FFT's
//!   unambiguous intervals: range in `[0, N)`, Doppler in `[0, M)`.

use std::f64::consts::{PI, TAU};
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;
use rustfft::num_complex::Complex;

use crate::cpi::{BANDWIDTH_HZ, CARRIER_HZ, Cpi, SPEED_OF_LIGHT};

/// One point target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// Range at frame 0, in metres.
    pub range_m: f64,
    /// Radial velocity in m/s (positive: receding, range grows).
    pub velocity_mps: f64,
    /// Per-sample signal-to-noise ratio in dB (target amplitude over the per-component sigma).
    pub snr_db: f64,
}

/// Why a target string did not parse.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TargetParseError {
    /// The text does not have exactly three comma-separated fields.
    #[error("invalid target {input:?}: expected RANGE,VELOCITY,SNR (3 fields), found {found}")]
    FieldCount {
        /// The text given.
        input: String,
        /// How many fields it had.
        found: usize,
    },
    /// One field is not a finite number.
    #[error("invalid target {input:?}: {field} {value:?} is not a finite number")]
    Field {
        /// The text given.
        input: String,
        /// `range`, `velocity` or `snr`.
        field: &'static str,
        /// The offending field's text.
        value: String,
    },
}

impl FromStr for Target {
    type Err = TargetParseError;

    /// Parses `RANGE,VELOCITY,SNR`, e.g. `30,2.0,6` (metres, m/s, dB).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fields: Vec<&str> = s.split(',').collect();
        let [range, velocity, snr] = fields[..] else {
            return Err(TargetParseError::FieldCount {
                input: s.into(),
                found: fields.len(),
            });
        };
        let field = |name: &'static str, text: &str| {
            text.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| TargetParseError::Field {
                    input: s.into(),
                    field: name,
                    value: text.into(),
                })
        };
        Ok(Target {
            range_m: field("range", range)?,
            velocity_mps: field("velocity", velocity)?,
            snr_db: field("snr", snr)?,
        })
    }
}

/// The default target set of docs/workload.md: (30 m, 2 m/s), (75 m, -3 m/s), (120 m, 1 m/s) at 6 dB.
pub fn default_targets() -> Vec<Target> {
    targets_at(6.0)
}

/// The high-SNR target set: the default targets at 25 dB.
pub fn high_snr_targets() -> Vec<Target> {
    targets_at(25.0)
}

fn targets_at(snr_db: f64) -> Vec<Target> {
    [(30.0, 2.0), (75.0, -3.0), (120.0, 1.0)]
        .into_iter()
        .map(|(range_m, velocity_mps)| Target {
            range_m,
            velocity_mps,
            snr_db,
        })
        .collect()
}

/// The range bin of a target at `range_m`: `2 B R / c`, fractional and unfolded.
///
/// It does not depend on the CPI: the chirp lasts `N / fs`, so the beat frequency
/// `2 B R / (c T)` lands on bin `f_beat * N / fs = 2 B R / c`.
pub fn range_bin(range_m: f64) -> f64 {
    2.0 * BANDWIDTH_HZ * range_m / SPEED_OF_LIGHT
}

/// The Doppler bin of a target at `velocity_mps`: `2 v fc / c * T * M`, fractional and signed.
pub fn doppler_bin(velocity_mps: f64, cpi: Cpi) -> f64 {
    2.0 * velocity_mps * CARRIER_HZ / SPEED_OF_LIGHT * cpi.period_s()
}

/// Everything that defines a scene.
#[derive(Clone, Debug)]
pub struct SceneConfig {
    /// Frame shape.
    pub cpi: Cpi,
    /// The targets, with their ranges at frame 0.
    pub targets: Vec<Target>,
    /// Noise seed; with the frame index it determines every frame's noise.
    pub seed: u64,
    /// Noise standard deviation per component (I and Q), in ADC counts.
    pub noise_sigma: f64,
    /// Time between frames, in seconds; ranges advance by `v * frame_interval_s` per frame.
    pub frame_interval_s: f64,
}

impl SceneConfig {
    /// The workload's scene (docs/workload.md) at `cpi`: default targets, seed 1, sigma 512 counts, 5 ms frames.
    pub fn new(cpi: Cpi) -> Self {
        SceneConfig {
            cpi,
            targets: default_targets(),
            seed: 1,
            noise_sigma: 512.0,
            frame_interval_s: 0.005,
        }
    }
}

/// Fractional truth bins of one target at one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruthBin {
    /// Range bin, folded into `[0, N)` as the range FFT folds it.
    pub range_bin: f64,
    /// Doppler bin, folded into `[0, M)` (a negative velocity lands near `M`).
    pub doppler_bin: f64,
}

/// What is wrong with a scene configuration or a frame request.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SceneError {
    /// The CPI has a zero dimension or is too large to index.
    #[error("invalid CPI {cpi}: both dimensions must be in 1..=u32::MAX")]
    InvalidCpi {
        /// The CPI given.
        cpi: Cpi,
    },
    /// The noise sigma is negative or not finite.
    #[error("invalid noise sigma {sigma}: must be finite and >= 0")]
    InvalidNoiseSigma {
        /// The sigma given.
        sigma: f64,
    },
    /// The frame interval is negative or not finite.
    #[error("invalid frame interval {interval_s} s: must be finite and >= 0")]
    InvalidFrameInterval {
        /// The interval given.
        interval_s: f64,
    },
    /// A target has a non-finite field, or an amplitude that overflows.
    #[error("target {index} ({target:?}): {reason}")]
    InvalidTarget {
        /// Position of the target in the configuration.
        index: usize,
        /// The target.
        target: Target,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A target's initial range bin is outside `[0, N)`: beyond what the CPI can see.
    #[error(
        "target {index} at {range_m} m is at range bin {range_bin:.2}, outside [0, {samples}) \
         for this CPI"
    )]
    TargetOutOfRange {
        /// Position of the target in the configuration.
        index: usize,
        /// Its range at frame 0.
        range_m: f64,
        /// Its range bin at frame 0.
        range_bin: f64,
        /// N, the number of range bins.
        samples: usize,
    },
    /// The output buffer does not hold exactly `N * M` samples.
    #[error("frame buffer holds {actual} samples, the CPI needs {expected}")]
    BufferSize {
        /// `N * M`.
        expected: usize,
        /// The buffer's length.
        actual: usize,
    },
    /// A rounded sample does not fit in an `i16`.
    #[error(
        "frame {frame} clips: chirp {chirp}, sample {sample} rounds to {value}, outside i16 \
         (lower the targets' SNR or the noise sigma)"
    )]
    Clipping {
        /// The frame being generated.
        frame: u64,
        /// The chirp (slow-time index).
        chirp: usize,
        /// The sample within the chirp (fast-time index).
        sample: usize,
        /// The rounded I or Q value that did not fit.
        value: f64,
    },
}

/// A validated scene: generates frames and reports their truth.
#[derive(Clone, Debug)]
pub struct Scene {
    config: SceneConfig,
}

impl Scene {
    /// Validates `config`: a nonzero CPI that fits `u32` bins, finite target fields, every
    /// target's range bin at frame 0 inside `[0, N)`, and finite, non-negative sigma and frame
    /// interval.
    pub fn new(config: SceneConfig) -> Result<Scene, SceneError> {
        let cpi = config.cpi;
        let fits_u32 = |d: usize| d > 0 && u32::try_from(d).is_ok();
        if !fits_u32(cpi.samples)
            || !fits_u32(cpi.chirps)
            || cpi.samples.checked_mul(cpi.chirps).is_none()
        {
            return Err(SceneError::InvalidCpi { cpi });
        }
        let sigma = config.noise_sigma;
        if !(sigma.is_finite() && sigma >= 0.0) {
            return Err(SceneError::InvalidNoiseSigma { sigma });
        }
        let interval_s = config.frame_interval_s;
        if !(interval_s.is_finite() && interval_s >= 0.0) {
            return Err(SceneError::InvalidFrameInterval { interval_s });
        }
        for (index, target) in config.targets.iter().enumerate() {
            let invalid = |reason| SceneError::InvalidTarget {
                index,
                target: *target,
                reason,
            };
            if ![target.range_m, target.velocity_mps, target.snr_db]
                .iter()
                .all(|v| v.is_finite())
            {
                return Err(invalid("fields must be finite"));
            }
            if !amplitude(sigma, target.snr_db).is_finite() {
                return Err(invalid("SNR too large: amplitude overflows"));
            }
            let bin = range_bin(target.range_m);
            if !(0.0..cpi.samples as f64).contains(&bin) {
                return Err(SceneError::TargetOutOfRange {
                    index,
                    range_m: target.range_m,
                    range_bin: bin,
                    samples: cpi.samples,
                });
            }
        }
        Ok(Scene { config })
    }

    /// The configuration this scene was built from.
    pub fn config(&self) -> &SceneConfig {
        &self.config
    }

    /// The CPI of every frame.
    pub fn cpi(&self) -> Cpi {
        self.config.cpi
    }

    /// Each target's fractional truth bins at `frame`, in configuration order.
    pub fn truth(&self, frame: u64) -> Vec<TruthBin> {
        let mut out = Vec::with_capacity(self.config.targets.len());
        self.truth_into(frame, &mut out);
        out
    }

    /// Like [`Scene::truth`], into `out` (cleared first), so a caller can reuse one buffer.
    pub fn truth_into(&self, frame: u64, out: &mut Vec<TruthBin>) {
        let cpi = self.config.cpi;
        out.clear();
        out.extend(self.config.targets.iter().map(|t| TruthBin {
            range_bin: fold(range_bin(self.range_at(t, frame)), cpi.samples),
            doppler_bin: fold(doppler_bin(t.velocity_mps, cpi), cpi.chirps),
        }));
    }

    /// Frame `frame` as bytes, the way the source tensor and the wire carry it: chirp-major
    /// int16 I/Q pairs, little endian (`4 * N * M` bytes; chirp `m` is bytes
    /// `[4 N m, 4 N (m + 1))`).
    ///
    /// # Errors
    /// As [`Scene::generate_frame`].
    pub fn frame_bytes(&self, frame: u64) -> Result<Vec<u8>, SceneError> {
        let mut samples = vec![[0i16; 2]; self.config.cpi.cells()];
        self.generate_frame(frame, &mut samples)?;
        Ok(samples
            .iter()
            .flat_map(|[i, q]| [i.to_le_bytes(), q.to_le_bytes()])
            .flatten()
            .collect())
    }

    /// Writes frame `frame` into `out` (length `N * M`, chirp-major: `out[m * N + n]` is
    /// `[I, Q]` of chirp `m`, sample `n`).
    ///
    /// The noise is drawn chirp by chirp, sample by sample, I before Q, from a `Pcg64Mcg`
    /// seeded by splitmix64-mixing the seed and the frame index.
    ///
    /// # Errors
    /// [`SceneError::BufferSize`] if `out` has the wrong length; [`SceneError::Clipping`] at the
    /// first sample that leaves the `i16` range (`out` is then partly written).
    pub fn generate_frame(&self, frame: u64, out: &mut [[i16; 2]]) -> Result<(), SceneError> {
        let cpi = self.config.cpi;
        let (n, m) = (cpi.samples, cpi.chirps);
        if out.len() != cpi.cells() {
            return Err(SceneError::BufferSize {
                expected: cpi.cells(),
                actual: out.len(),
            });
        }

        // Each target's signal is the outer product of a fast-time phasor (range) and a
        // slow-time phasor (Doppler, amplitude and the range phase). Tabulating both costs
        // O(N + M) trig per target instead of O(N * M).
        let targets = &self.config.targets;
        let mut fast = Vec::with_capacity(targets.len() * n);
        let mut slow = Vec::with_capacity(targets.len() * m);
        for t in targets {
            let range = self.range_at(t, frame);
            let rb = range_bin(range);
            let db = doppler_bin(t.velocity_mps, cpi);
            let a = amplitude(self.config.noise_sigma, t.snr_db);
            // Reduce the (large) carrier phase once so the per-chirp angles stay small.
            let phase0 = (-4.0 * PI * CARRIER_HZ * range / SPEED_OF_LIGHT).rem_euclid(TAU);
            fast.extend((0..n).map(|i| Complex::from_polar(1.0, TAU * rb * i as f64 / n as f64)));
            slow.extend(
                (0..m).map(|i| Complex::from_polar(a, TAU * db * i as f64 / m as f64 + phase0)),
            );
        }

        let sigma = self.config.noise_sigma;
        let mut rng = noise_rng(self.config.seed, frame);
        let mut row = vec![Complex::new(0.0f64, 0.0); n];
        for (chirp, out_row) in out.chunks_exact_mut(n).enumerate() {
            row.fill(Complex::new(0.0, 0.0));
            for (fast_t, slow_t) in fast.chunks_exact(n).zip(slow.chunks_exact(m)) {
                let s = slow_t[chirp];
                for (acc, f) in row.iter_mut().zip(fast_t) {
                    *acc += s * f;
                }
            }
            for (sample, (x, o)) in row.iter().zip(out_row.iter_mut()).enumerate() {
                let i = x.re + sigma * rng.sample::<f64, _>(StandardNormal);
                let q = x.im + sigma * rng.sample::<f64, _>(StandardNormal);
                let clip = |value| SceneError::Clipping {
                    frame,
                    chirp,
                    sample,
                    value,
                };
                *o = [quantize(i).map_err(clip)?, quantize(q).map_err(clip)?];
            }
        }
        Ok(())
    }

    fn range_at(&self, target: &Target, frame: u64) -> f64 {
        target.range_m + target.velocity_mps * frame as f64 * self.config.frame_interval_s
    }
}

fn amplitude(sigma: f64, snr_db: f64) -> f64 {
    sigma * 10f64.powf(snr_db / 20.0)
}

/// Folds `x` into `[0, len)`. `rem_euclid` can round up to exactly `len` for tiny negative
/// inputs, which would name a bin that does not exist.
fn fold(x: f64, len: usize) -> f64 {
    let len = len as f64;
    let r = x.rem_euclid(len);
    if r < len { r } else { 0.0 }
}

/// Rounds to nearest, or returns the rounded value if it does not fit in an `i16`.
fn quantize(v: f64) -> Result<i16, f64> {
    let r = v.round();
    if (f64::from(i16::MIN)..=f64::from(i16::MAX)).contains(&r) {
        Ok(r as i16)
    } else {
        Err(r)
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The noise generator of one frame. Mixing through splitmix64 (rather than seeding with
/// `seed + frame`) keeps neighbouring frames' and seeds' streams unrelated.
fn noise_rng(seed: u64, frame: u64) -> Pcg64Mcg {
    let mut state = seed;
    let mut state = splitmix64(&mut state) ^ frame;
    let lo = splitmix64(&mut state);
    let hi = splitmix64(&mut state);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&lo.to_le_bytes());
    bytes[8..].copy_from_slice(&hi.to_le_bytes());
    Pcg64Mcg::from_seed(bytes)
}

#[cfg(test)]
mod tests;
