//! The reference receiver: plain f64 code that every backend is compared against.
//!
//! Each stage is written to be obviously correct rather than fast: the FFTs are rustfft's f64
//! transforms, the CFAR sums every training cell directly, and clustering is a union-find over
//! the detected cells. Nothing here shares code with a kernel library.
//!
//! Stages (docs/workload.md, "The processing"):
//! 1. [`range_doppler_power`]: Hann window and N-point FFT per chirp, Hann window and M-point
//!    FFT per range bin, `|Y|^2`. Output is range-major: `power[range_bin * M + doppler_bin]`.
//! 2. [`cfar`]: 2-D cell-averaging CFAR with guard and training rings, wrapping on both axes.
//! 3. [`cluster`]: 8-connected (wrapping) components, each reported by its strongest cell.
//!
//! [`detect`] chains the three.

use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

use crate::cpi::Cpi;

/// CA-CFAR parameters: guard and training cells on each side of both axes, and the threshold
/// scale `alpha` (detect when `P > alpha * mean(training)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CfarParams {
    /// Guard cells on each side of the cell under test, on both axes.
    pub guard: usize,
    /// Training cells beyond the guard cells, on each side of both axes.
    pub train: usize,
    /// Threshold scale over the mean of the training cells.
    pub alpha: f64,
}

/// Why a set of CFAR parameters cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CfarParamsError {
    /// With no training cells there is no noise estimate.
    #[error("CFAR needs at least one training cell on each side (train = 0)")]
    NoTrainingCells,
    /// The window does not fit the arithmetic.
    #[error("CFAR window too large (guard {guard}, train {train})")]
    WindowTooLarge {
        /// Guard cells per side.
        guard: usize,
        /// Training cells per side.
        train: usize,
    },
    /// `alpha` is negative or not finite (e.g. from a false-alarm probability outside (0, 1)).
    #[error("CFAR scale alpha = {alpha} must be finite and >= 0 (is Pfa in (0, 1)?)")]
    InvalidAlpha {
        /// The scale.
        alpha: f64,
    },
}

impl CfarParams {
    /// Parameters whose `alpha` gives false-alarm probability `pfa` in exponential noise:
    /// `alpha = K (pfa^(-1/K) - 1)` with `K` = [`CfarParams::training_cells`].
    ///
    /// Use [`CfarParams::validate`] on parameters that come from user input.
    pub fn from_pfa(guard: usize, train: usize, pfa: f64) -> Self {
        let mut params = CfarParams {
            guard,
            train,
            alpha: 0.0,
        };
        let k = params.training_cells() as f64;
        params.alpha = k * (pfa.powf(-1.0 / k) - 1.0);
        params
    }

    /// The number of training cells `K`: a `(2(g+t)+1)^2` square minus the `(2g+1)^2` guard
    /// block (416 for g = 2, t = 8). Saturates rather than overflowing for absurd windows,
    /// which [`CfarParams::validate`] rejects.
    pub fn training_cells(&self) -> usize {
        let side = |half: usize| half.saturating_mul(2).saturating_add(1);
        let outer = side(self.guard.saturating_add(self.train));
        let inner = side(self.guard);
        outer
            .saturating_mul(outer)
            .saturating_sub(inner.saturating_mul(inner))
    }

    /// Checks that the parameters describe a usable detector.
    pub fn validate(&self) -> Result<(), CfarParamsError> {
        if self.train == 0 {
            return Err(CfarParamsError::NoTrainingCells);
        }
        // The window half-width is used as an isize offset and squared.
        let half = self.guard.checked_add(self.train);
        let fits = half
            .and_then(|h| h.checked_mul(2))
            .and_then(|s| s.checked_add(1))
            .and_then(|s| s.checked_mul(s))
            .is_some_and(|s| isize::try_from(s).is_ok());
        if !fits {
            return Err(CfarParamsError::WindowTooLarge {
                guard: self.guard,
                train: self.train,
            });
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(CfarParamsError::InvalidAlpha { alpha: self.alpha });
        }
        Ok(())
    }
}

impl Default for CfarParams {
    /// The workload's detector (docs/workload.md): guard 2, training 8, Pfa = 1e-6.
    fn default() -> Self {
        CfarParams::from_pfa(2, 8, 1e-6)
    }
}

/// One detected cell, in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detection64 {
    /// Range bin, in `[0, N)`.
    pub range_bin: u32,
    /// Doppler bin, in `[0, M)`.
    pub doppler_bin: u32,
    /// `|Y|^2` at the cell.
    pub power: f64,
}

/// The symmetric Hann window `w[i] = 0.5 (1 - cos(2 pi i / (L - 1)))`.
///
/// A window of length 1 is `[1.0]` (the formula would divide by zero).
pub fn hann(len: usize) -> Vec<f64> {
    if len <= 1 {
        return vec![1.0; len];
    }
    let denom = (len - 1) as f64;
    (0..len)
        .map(|i| 0.5 * (1.0 - (std::f64::consts::TAU * i as f64 / denom).cos()))
        .collect()
}

/// The range-Doppler power map of one frame, range-major: `power[range_bin * M + doppler_bin]`.
///
/// `iq` is chirp-major (`iq[m * N + n]`), as the scene and the wire deliver it. FFTs are
/// forward (`e^{-j...}`), unnormalised and unshifted.
///
/// # Panics
/// If `iq.len() != cpi.cells()`.
pub fn range_doppler_power(iq: &[[i16; 2]], cpi: Cpi) -> Vec<f64> {
    let (n, m) = (cpi.samples, cpi.chirps);
    assert_eq!(
        iq.len(),
        cpi.cells(),
        "frame has {} samples, CPI {cpi} needs {}",
        iq.len(),
        cpi.cells()
    );
    let mut planner = FftPlanner::<f64>::new();

    // Stage 1: windowed range FFT of every chirp, in place (chirp-major).
    let window_n = hann(n);
    let mut chirps: Vec<Complex<f64>> = iq
        .chunks_exact(n)
        .flat_map(|chirp| {
            chirp
                .iter()
                .zip(&window_n)
                .map(|(&[i, q], &w)| Complex::new(f64::from(i) * w, f64::from(q) * w))
        })
        .collect();
    planner.plan_fft_forward(n).process(&mut chirps);

    // Stage 2: transpose to range-major with the slow-time window, then a Doppler FFT per row.
    let window_m = hann(m);
    let mut rows: Vec<Complex<f64>> = (0..n)
        .flat_map(|k| {
            let chirps = &chirps;
            window_m
                .iter()
                .enumerate()
                .map(move |(chirp, &w)| chirps[chirp * n + k] * w)
        })
        .collect();
    planner.plan_fft_forward(m).process(&mut rows);

    rows.iter().map(|y| y.norm_sqr()).collect()
}

/// 2-D CA-CFAR over a range-major power map, wrapping on both axes.
///
/// For cell `(r, d)` the training cells are `(r + i mod N, d + j mod M)` for
/// `max(|i|, |j|) <= guard + train` and not `max(|i|, |j|) <= guard`; the cell detects when
/// `power > alpha * (sum / K)`. When the window is wider than an axis, cells are visited (and
/// counted) once per offset, so the mean is always over `K` terms. Output is in row-major
/// order: range bin ascending, then Doppler bin.
///
/// # Panics
/// If `power.len() != cpi.cells()` or `params` fails [`CfarParams::validate`].
pub fn cfar(power: &[f64], cpi: Cpi, params: &CfarParams) -> Vec<Detection64> {
    let (n, m) = (cpi.samples, cpi.chirps);
    assert_eq!(
        power.len(),
        cpi.cells(),
        "power map does not match CPI {cpi}"
    );
    if let Err(e) = params.validate() {
        panic!("invalid CFAR parameters: {e}");
    }
    let guard = params.guard as isize;
    let reach = (params.guard + params.train) as isize;
    let k = params.training_cells() as f64;
    let wrap = |x: usize, offset: isize, len: usize| {
        (x as isize + offset).rem_euclid(len as isize) as usize
    };

    let mut detections = Vec::new();
    for r in 0..n {
        for d in 0..m {
            let mut sum = 0.0f64;
            for i in -reach..=reach {
                let row = &power[wrap(r, i, n) * m..][..m];
                for j in -reach..=reach {
                    if i.abs() <= guard && j.abs() <= guard {
                        continue;
                    }
                    sum += row[wrap(d, j, m)];
                }
            }
            let p = power[r * m + d];
            if p > params.alpha * (sum / k) {
                detections.push(Detection64 {
                    range_bin: r as u32,
                    doppler_bin: d as u32,
                    power: p,
                });
            }
        }
    }
    detections
}

/// Groups detections into 8-connected clusters, wrapping on both axes, and reports each
/// cluster's strongest cell (ties: the smallest `(range_bin, doppler_bin)`), sorted by
/// `(range_bin, doppler_bin)`.
///
/// Detections naming the same cell are one cell.
///
/// # Panics
/// If a detection lies outside the CPI.
pub fn cluster(detections: &[Detection64], cpi: Cpi) -> Vec<Detection64> {
    let (n, m) = (cpi.samples, cpi.chirps);
    const EMPTY: usize = usize::MAX;
    let mut cell_owner = vec![EMPTY; cpi.cells()];
    let mut parent: Vec<usize> = (0..detections.len()).collect();

    for (index, det) in detections.iter().enumerate() {
        let (r, d) = (det.range_bin as usize, det.doppler_bin as usize);
        assert!(r < n && d < m, "detection ({r}, {d}) outside CPI {cpi}");
        // Union with every already-placed detection in the 3x3 neighbourhood (itself
        // included, which merges duplicates). Each edge is seen from its later end.
        for dr in [n - 1, 0, 1] {
            for dd in [m - 1, 0, 1] {
                let owner = cell_owner[((r + dr) % n) * m + (d + dd) % m];
                if owner != EMPTY {
                    union(&mut parent, owner, index);
                }
            }
        }
        let slot = &mut cell_owner[r * m + d];
        if *slot == EMPTY {
            *slot = index;
        }
    }

    let mut best: Vec<Option<Detection64>> = vec![None; detections.len()];
    for (index, det) in detections.iter().enumerate() {
        let root = find(&mut parent, index);
        let slot = &mut best[root];
        if slot.is_none_or(|b| stronger(det, &b)) {
            *slot = Some(*det);
        }
    }
    let mut clusters: Vec<Detection64> = best.into_iter().flatten().collect();
    clusters.sort_by_key(|c| (c.range_bin, c.doppler_bin));
    clusters
}

/// Whether `a` beats `b` as a cluster's representative: more power, then the smaller cell.
fn stronger(a: &Detection64, b: &Detection64) -> bool {
    match a.power.total_cmp(&b.power) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => (a.range_bin, a.doppler_bin) < (b.range_bin, b.doppler_bin),
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}

/// The whole reference receiver: power map, CFAR, clustering.
///
/// # Panics
/// As [`range_doppler_power`] and [`cfar`].
pub fn detect(iq: &[[i16; 2]], cpi: Cpi, params: &CfarParams) -> Vec<Detection64> {
    let power = range_doppler_power(iq, cpi);
    cluster(&cfar(&power, cpi, params), cpi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::TAU;

    fn cpi(s: &str) -> Cpi {
        s.parse().unwrap()
    }

    #[test]
    fn default_params() {
        let p = CfarParams::default();
        assert_eq!((p.guard, p.train), (2, 8));
        assert_eq!(p.training_cells(), 416);
        let expected = 416.0 * (1e-6f64.powf(-1.0 / 416.0) - 1.0);
        assert!((p.alpha - expected).abs() < 1e-12);
        assert!((p.alpha - 14.05).abs() < 0.01, "alpha {}", p.alpha);
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn invalid_params_are_reported() {
        assert_eq!(
            CfarParams::from_pfa(2, 0, 1e-6).validate(),
            Err(CfarParamsError::NoTrainingCells)
        );
        assert!(matches!(
            CfarParams::from_pfa(2, 8, 0.0).validate(),
            Err(CfarParamsError::InvalidAlpha { .. })
        ));
        assert!(matches!(
            CfarParams::from_pfa(2, 8, -1.0).validate(),
            Err(CfarParamsError::InvalidAlpha { .. })
        ));
        assert!(matches!(
            CfarParams {
                guard: usize::MAX,
                train: 1,
                alpha: 1.0
            }
            .validate(),
            Err(CfarParamsError::WindowTooLarge { .. })
        ));
    }

    #[test]
    fn hann_window() {
        let w = hann(5);
        let expected = [0.0, 0.5, 1.0, 0.5, 0.0];
        for (a, b) in w.iter().zip(expected) {
            assert!((a - b).abs() < 1e-15);
        }
        assert_eq!(hann(1), vec![1.0]);
        assert!(hann(0).is_empty());
    }

    /// The power map by the definition: a direct 2-D DFT of the windowed frame.
    fn naive_power(iq: &[[i16; 2]], c: Cpi) -> Vec<f64> {
        let (n, m) = (c.samples, c.chirps);
        let (wn, wm) = (hann(n), hann(m));
        let mut out = vec![0.0; n * m];
        for k in 0..n {
            for d in 0..m {
                let mut acc = Complex::new(0.0, 0.0);
                for chirp in 0..m {
                    for s in 0..n {
                        let [i, q] = iq[chirp * n + s];
                        let x = Complex::new(f64::from(i), f64::from(q)) * wn[s] * wm[chirp];
                        let angle =
                            -TAU * ((k * s) as f64 / n as f64 + (d * chirp) as f64 / m as f64);
                        acc += x * Complex::from_polar(1.0, angle);
                    }
                }
                out[k * m + d] = acc.norm_sqr();
            }
        }
        out
    }

    #[test]
    fn power_map_matches_a_naive_dft() {
        let c = cpi("16x8");
        // Deterministic, non-symmetric content that exercises every bin.
        let iq: Vec<[i16; 2]> = (0..c.cells())
            .map(|i| {
                let x = (i * 7919 + 13) % 2001;
                let y = (i * 104_729 + 5) % 1999;
                [x as i16 - 1000, y as i16 - 999]
            })
            .collect();
        let fast = range_doppler_power(&iq, c);
        let slow = naive_power(&iq, c);
        let peak = slow.iter().cloned().fold(0.0, f64::max);
        for (idx, (a, b)) in fast.iter().zip(&slow).enumerate() {
            let err = (a - b).abs() / b.abs().max(peak * 1e-6);
            assert!(err < 1e-9, "cell {idx}: {a} vs {b}");
        }
    }

    #[test]
    fn power_map_is_range_major() {
        // A pure tone on bin (range 3, Doppler 5) of a 16x8 frame.
        let c = cpi("16x8");
        let iq: Vec<[i16; 2]> = (0..c.cells())
            .map(|i| {
                let (chirp, s) = (i / 16, i % 16);
                let phase = TAU * (3.0 * s as f64 / 16.0 + 5.0 * chirp as f64 / 8.0);
                [
                    (1000.0 * phase.cos()).round() as i16,
                    (1000.0 * phase.sin()).round() as i16,
                ]
            })
            .collect();
        let power = range_doppler_power(&iq, c);
        let argmax = (0..power.len())
            .max_by(|&a, &b| power[a].total_cmp(&power[b]))
            .unwrap();
        assert_eq!(argmax, 3 * 8 + 5);
    }

    fn flat_map_with(c: Cpi, hot: &[(usize, usize, f64)]) -> Vec<f64> {
        let mut power = vec![1.0; c.cells()];
        for &(r, d, p) in hot {
            power[r * c.chirps + d] = p;
        }
        power
    }

    #[test]
    fn cfar_finds_a_single_hot_cell() {
        let c = cpi("64x32");
        let params = CfarParams::default();
        let power = flat_map_with(c, &[(40, 10, 20.0)]);
        let dets = cfar(&power, c, &params);
        assert_eq!(
            dets,
            vec![Detection64 {
                range_bin: 40,
                doppler_bin: 10,
                power: 20.0
            }]
        );
        // Just under the threshold: the mean is exactly 1, so P must exceed alpha.
        let power = flat_map_with(c, &[(40, 10, params.alpha)]);
        assert!(cfar(&power, c, &params).is_empty());
    }

    #[test]
    fn cfar_training_ring_excludes_the_guard_block() {
        let c = cpi("64x32");
        let params = CfarParams {
            guard: 2,
            train: 8,
            alpha: 5.0,
        };
        // A second hot cell inside the guard block does not raise the threshold...
        let power = flat_map_with(c, &[(20, 10, 10.0), (22, 12, 10.0)]);
        let dets = cfar(&power, c, &params);
        assert_eq!(dets.len(), 2);
        // ...but in the training ring it does: mean = (415 + 1000) / 416 = 3.40, threshold 17.
        let power = flat_map_with(c, &[(20, 10, 10.0), (23, 10, 1000.0)]);
        let dets = cfar(&power, c, &params);
        assert_eq!(dets.len(), 1);
        assert_eq!((dets[0].range_bin, dets[0].doppler_bin), (23, 10));
    }

    #[test]
    fn cfar_wraps_both_axes() {
        let c = cpi("64x32");
        let params = CfarParams {
            guard: 2,
            train: 8,
            alpha: 5.0,
        };
        // A loud cell across the range wrap sits in (0, 0)'s training ring: with wrapping the
        // threshold for (0, 0) rises above 10 and it is not detected.
        let power = flat_map_with(c, &[(0, 0, 10.0), (61, 31, 3000.0)]);
        let dets = cfar(&power, c, &params);
        assert_eq!(dets.len(), 1);
        assert_eq!((dets[0].range_bin, dets[0].doppler_bin), (61, 31));
    }

    #[test]
    fn cfar_output_is_row_major() {
        let c = cpi("64x32");
        let params = CfarParams::default();
        let power = flat_map_with(c, &[(50, 1, 50.0), (5, 30, 50.0), (5, 3, 50.0)]);
        let cells: Vec<(u32, u32)> = cfar(&power, c, &params)
            .iter()
            .map(|d| (d.range_bin, d.doppler_bin))
            .collect();
        assert_eq!(cells, vec![(5, 3), (5, 30), (50, 1)]);
    }

    fn det(r: u32, d: u32, power: f64) -> Detection64 {
        Detection64 {
            range_bin: r,
            doppler_bin: d,
            power,
        }
    }

    #[test]
    fn cluster_merges_across_both_wraps() {
        let c = cpi("64x128");
        // A blob straddling range bin 0 and Doppler bin M-1, plus a diagonal neighbour across
        // both wraps at once.
        let dets = [
            det(0, 0, 3.0),
            det(0, 127, 5.0),
            det(63, 127, 4.0),
            det(1, 0, 2.0),
            det(62, 126, 1.0),
            det(30, 60, 7.0),
        ];
        let clusters = cluster(&dets, c);
        assert_eq!(clusters, vec![det(0, 127, 5.0), det(30, 60, 7.0)]);
    }

    #[test]
    fn cluster_diagonals_connect_and_gaps_separate() {
        let c = cpi("64x32");
        let dets = [det(10, 10, 1.0), det(11, 11, 2.0), det(13, 11, 3.0)];
        let clusters = cluster(&dets, c);
        assert_eq!(clusters, vec![det(11, 11, 2.0), det(13, 11, 3.0)]);
    }

    #[test]
    fn cluster_ties_go_to_the_smallest_cell() {
        let c = cpi("64x32");
        let dets = [
            det(11, 5, 9.0),
            det(10, 6, 9.0),
            det(10, 7, 9.0),
            det(11, 4, 1.0),
        ];
        assert_eq!(cluster(&dets, c), vec![det(10, 6, 9.0)]);
        // Input order does not matter.
        let mut reversed = dets;
        reversed.reverse();
        assert_eq!(cluster(&reversed, c), vec![det(10, 6, 9.0)]);
    }

    #[test]
    fn target_at_the_corner_is_one_cluster_end_to_end() {
        use crate::scene::{Scene, SceneConfig, Target, doppler_bin, range_bin};
        // A target at range bin ~0.3 and Doppler bin ~M-0.6: its main lobe straddles both
        // wraps, and the receiver must still report it as one cluster.
        let c = cpi("64x32");
        let range_m = 0.3 / range_bin(1.0);
        let velocity_mps = -0.6 / doppler_bin(1.0, c);
        let scene = Scene::new(SceneConfig {
            targets: vec![Target {
                range_m,
                velocity_mps,
                snr_db: 6.0,
            }],
            ..SceneConfig::new(c)
        })
        .unwrap();
        let mut iq = vec![[0i16; 2]; c.cells()];
        scene.generate_frame(0, &mut iq).unwrap();
        let clusters = detect(&iq, c, &CfarParams::default());
        assert_eq!(clusters.len(), 1, "{clusters:?}");
        let (r, d) = (clusters[0].range_bin, clusters[0].doppler_bin);
        assert!([63, 0, 1].contains(&r), "range {r}");
        assert!([30, 31, 0].contains(&d), "doppler {d}");
        // The main lobe really does cross both wraps: detections exist on both sides.
        let dets = cfar(&range_doppler_power(&iq, c), c, &CfarParams::default());
        assert!(dets.iter().any(|x| x.range_bin == 63) && dets.iter().any(|x| x.range_bin == 0));
        assert!(
            dets.iter().any(|x| x.doppler_bin == 31) && dets.iter().any(|x| x.doppler_bin == 0)
        );
    }
}
