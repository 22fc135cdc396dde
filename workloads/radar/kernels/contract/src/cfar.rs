//! The `radar.cfar` contract: parameters, defaults, validation, and the arithmetic every
//! backend must share to report the same detections.
//!
//! - Parameters ([`PARAMS`]): `guard` (default [`DEFAULT_GUARD`]), `train` (default
//!   [`DEFAULT_TRAIN`], at least 1), and at most one of `pfa` (default [`DEFAULT_PFA`], in
//!   (0, 1)) or `scale` (a raw alpha, in `[0, MAX_SCALE]`).
//! - The window of a cell is the `(2h+1)²` square around it, `h = guard + train`, wrapping on
//!   both axes; its training cells are the window minus the `(2 guard + 1)²` guard square,
//!   [`training_cells`] of them (416 by default). The window side is at most [`MAX_WINDOW`]
//!   (so the exact training sums fit the backends' 64-bit limbs) and must fit the map,
//!   `2h + 1 <= min(N, M)`, so no cell is counted twice ([`CfarWindow::fit`]).
//! - The multiplier is `alpha = K (pfa^(-1/K) - 1)` ([`alpha_for_pfa`]) or the `scale`
//!   parameter; training sums are fixed point with [`FRACTION_BITS`] fraction bits, so a
//!   threshold is the exact sum times [`threshold_scale`], one f64 factor computed once on the
//!   host. How a backend sums exactly and applies the rule (`workloads/radar/kernels/cpu/src/cfar.rs` states
//!   it bit for bit) is its own; the numbers it starts from are these.
//!
//! Validation goes in the order the messages promise: [`CfarWindow::new`] (guard, train)
//! before [`CfarParams::new`] (pfa, scale), then [`CfarWindow::fit`] once the map is known.

use crate::ParamError;

/// The parameters `radar.cfar` accepts.
pub const PARAMS: &[&str] = &["guard", "train", "pfa", "scale"];
/// Default guard cells on each side of the cell under test, on both axes.
pub const DEFAULT_GUARD: u32 = 2;
/// Default training cells beyond the guard, on each side, on both axes.
pub const DEFAULT_TRAIN: u32 = 8;
/// Default false-alarm probability.
pub const DEFAULT_PFA: f64 = 1e-6;
/// The largest `scale` (raw alpha) accepted: far beyond any CFAR's, and small enough that a
/// backend's bound factors stay finite.
pub const MAX_SCALE: f64 = 1e12;
/// The largest window side, `2 (guard + train) + 1`, accepted: its exact sums fit `u64` limbs.
pub const MAX_WINDOW: u64 = 1023;
/// Fraction bits of the fixed-point powers: `q(p) = floor(p * 2^FRACTION_BITS)`.
pub const FRACTION_BITS: u32 = 8;

/// Training cells of a window: `(2 (guard + train) + 1)² - (2 guard + 1)²`.
pub fn training_cells(guard: u32, train: u32) -> u64 {
    let box_side = 2 * (u64::from(guard) + u64::from(train)) + 1;
    let guard_side = 2 * u64::from(guard) + 1;
    box_side * box_side - guard_side * guard_side
}

/// The CA-CFAR multiplier for false-alarm probability `pfa` over `k` training cells:
/// `k * (pfa^(-1/k) - 1)`.
pub fn alpha_for_pfa(pfa: f64, k: u64) -> f64 {
    let k = k as f64;
    k * (pfa.powf(-1.0 / k) - 1.0)
}

/// The factor that turns an exact fixed-point training sum into a threshold:
/// `alpha / K / 2^FRACTION_BITS`.
pub fn threshold_scale(alpha: f64, k: u64) -> f64 {
    alpha / k as f64 / 2f64.powi(FRACTION_BITS as i32)
}

/// A validated CFAR window: `train >= 1` and a side of at most [`MAX_WINDOW`] cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfarWindow {
    guard: u32,
    train: u32,
}

impl Default for CfarWindow {
    fn default() -> Self {
        Self {
            guard: DEFAULT_GUARD,
            train: DEFAULT_TRAIN,
        }
    }
}

impl CfarWindow {
    /// Validates `guard` and `train` (`None`: the default).
    pub fn new(guard: Option<u32>, train: Option<u32>) -> Result<Self, ParamError> {
        let guard = guard.unwrap_or(DEFAULT_GUARD);
        let train = train.unwrap_or(DEFAULT_TRAIN);
        if train == 0 {
            return Err(ParamError::TrainZero);
        }
        let window = Self { guard, train };
        if window.side() > MAX_WINDOW {
            return Err(ParamError::WindowTooLarge {
                window: window.side(),
                guard,
                train,
            });
        }
        Ok(window)
    }

    /// Guard cells on each side of the cell under test.
    pub fn guard(&self) -> u32 {
        self.guard
    }

    /// Training cells beyond the guard, on each side.
    pub fn train(&self) -> u32 {
        self.train
    }

    /// The window's half width, `guard + train` (at most 511).
    pub fn half(&self) -> u32 {
        self.guard + self.train
    }

    /// The window's side, `2 (guard + train) + 1`.
    pub fn side(&self) -> u64 {
        2 * (u64::from(self.guard) + u64::from(self.train)) + 1
    }

    /// Training cells of the window, `K` ([`training_cells`]).
    pub fn training_cells(&self) -> u64 {
        training_cells(self.guard, self.train)
    }

    /// Fails unless a `rows` x `cols` power map (input 0) can be searched with this window:
    /// both dimensions fit a detection record's `u32` bins, and the window fits inside the map.
    pub fn fit(&self, rows: u64, cols: u64) -> Result<(), ParamError> {
        if rows > u64::from(u32::MAX) || cols > u64::from(u32::MAX) {
            return Err(ParamError::MapBins { rows, cols });
        }
        if self.side() > rows.min(cols) {
            return Err(ParamError::WindowDoesNotFit {
                window: self.side(),
                guard: self.guard,
                train: self.train,
                rows,
                cols,
            });
        }
        Ok(())
    }
}

/// Validated CFAR parameters: the window and the multiplier, with the threshold factor
/// derived from them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CfarParams {
    window: CfarWindow,
    alpha: f64,
    scale: f64,
}

impl CfarParams {
    /// Validates `pfa` and `scale` (at most one; neither: `pfa` = [`DEFAULT_PFA`]) for
    /// `window`, and derives alpha and the threshold factor.
    pub fn new(
        window: CfarWindow,
        pfa: Option<f64>,
        scale: Option<f64>,
    ) -> Result<Self, ParamError> {
        let training = window.training_cells();
        let alpha = match (pfa, scale) {
            (Some(_), Some(_)) => return Err(ParamError::PfaAndScale),
            (None, Some(scale)) if (0.0..=MAX_SCALE).contains(&scale) => scale,
            (None, Some(scale)) => return Err(ParamError::Scale { scale }),
            (pfa, None) => {
                let pfa = pfa.unwrap_or(DEFAULT_PFA);
                if !(pfa > 0.0 && pfa < 1.0) {
                    return Err(ParamError::Pfa { pfa });
                }
                alpha_for_pfa(pfa, training)
            }
        };
        Ok(Self {
            window,
            alpha,
            scale: threshold_scale(alpha, training),
        })
    }

    /// The window.
    pub fn window(&self) -> CfarWindow {
        self.window
    }

    /// The CFAR multiplier in use (from `pfa` or `scale`).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The factor applied to exact fixed-point training sums ([`threshold_scale`]).
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(guard: u32, train: u32) -> CfarWindow {
        CfarWindow::new(Some(guard), Some(train)).expect("valid window")
    }

    #[test]
    fn defaults() {
        assert_eq!((DEFAULT_GUARD, DEFAULT_TRAIN, DEFAULT_PFA), (2, 8, 1e-6));
        assert_eq!((MAX_SCALE, MAX_WINDOW, FRACTION_BITS), (1e12, 1023, 8));
        assert_eq!(PARAMS, ["guard", "train", "pfa", "scale"]);
        let w = CfarWindow::new(None, None).expect("defaults");
        assert_eq!(w, CfarWindow::default());
        assert_eq!((w.guard(), w.train(), w.half(), w.side()), (2, 8, 10, 21));
        assert_eq!(w.training_cells(), 416);
        let p = CfarParams::new(w, None, None).expect("defaults");
        assert_eq!(
            p.alpha().to_bits(),
            alpha_for_pfa(DEFAULT_PFA, 416).to_bits()
        );
        assert_eq!(
            p.scale().to_bits(),
            threshold_scale(p.alpha(), 416).to_bits()
        );
    }

    #[test]
    fn training_cells_count_the_window_outside_the_guard() {
        for (guard, train) in [(0, 1), (1, 1), (2, 8), (1, 4), (3, 0), (0, 5), (7, 3)] {
            let (h, g) = (i64::from(guard + train), i64::from(guard));
            let mut count = 0;
            for r in -h..=h {
                for d in -h..=h {
                    count += u64::from(r.abs() > g || d.abs() > g);
                }
            }
            assert_eq!(
                training_cells(guard, train),
                count,
                "guard {guard} train {train}"
            );
        }
        // The largest window's count.
        assert_eq!(training_cells(0, 511), 1023 * 1023 - 1);
    }

    #[test]
    fn alpha_matches_an_independent_computation_and_gives_the_pfa() {
        for k in [8u64, 24, 80, 416, 4096, 1023 * 1023 - 1] {
            for pfa in [0.5, 1e-2, 1e-3, 1e-6, 1e-9, 1e-15] {
                let alpha = alpha_for_pfa(pfa, k);
                let kf = k as f64;
                // pfa^(-1/k) - 1 = expm1(-ln(pfa) / k), without the cancellation.
                let independent = kf * (-pfa.ln() / kf).exp_m1();
                assert!(
                    (alpha - independent).abs() <= 1e-9 * independent,
                    "k {k} pfa {pfa}: {alpha} vs {independent}"
                );
                // CA-CFAR on exponential noise: P(X > alpha / K * sum) = (1 + alpha / K)^-K.
                let achieved = (1.0 + alpha / kf).powf(-kf);
                assert!(
                    (achieved - pfa).abs() <= 1e-6 * pfa,
                    "k {k}: pfa {pfa} achieved {achieved}"
                );
            }
        }
    }

    #[test]
    fn threshold_scale_divides_by_k_and_the_fraction() {
        assert_eq!(threshold_scale(416.0 * 2f64.powi(-52), 416), 2f64.powi(-60));
        assert_eq!(threshold_scale(256.0, 1), 1.0);
        assert_eq!(threshold_scale(0.0, 416), 0.0);
    }

    #[test]
    fn window_bounds() {
        assert_eq!(window(0, 511).side(), MAX_WINDOW);
        assert_eq!(window(510, 1).side(), MAX_WINDOW);
        assert_eq!(window(0, 1).side(), 3);
        assert_eq!(
            CfarWindow::new(Some(2), Some(0)),
            Err(ParamError::TrainZero)
        );
        for (guard, train) in [(0, 512), (1, 511), (2, 600), (u32::MAX, u32::MAX)] {
            let e = CfarWindow::new(Some(guard), Some(train)).expect_err("too large");
            let side = 2 * (u64::from(guard) + u64::from(train)) + 1;
            assert_eq!(
                e,
                ParamError::WindowTooLarge {
                    window: side,
                    guard,
                    train
                }
            );
            assert_eq!(e.parameter(), "guard, train");
            assert_eq!(
                e.to_string(),
                format!(
                    "the CFAR window, 2 (guard + train) + 1 = {side} cells (guard {guard}, \
                     train {train}), exceeds the largest supported, 1023"
                )
            );
        }
        let e = CfarWindow::new(None, Some(0)).expect_err("train 0");
        assert_eq!(e.to_string(), "parameter train must be at least 1");
        assert_eq!(e.parameter(), "train");
    }

    #[test]
    fn the_window_must_fit_the_map() {
        let w = CfarWindow::default();
        assert_eq!(w.fit(21, 21), Ok(()));
        assert_eq!(w.fit(4096, 512), Ok(()));
        assert_eq!(w.fit(u64::from(u32::MAX), u64::from(u32::MAX)), Ok(()));
        for (rows, cols) in [(20, 64), (64, 20), (128, 16)] {
            let e = w.fit(rows, cols).expect_err("does not fit");
            assert_eq!(e.parameter(), "input 0");
            assert_eq!(
                e.to_string(),
                format!(
                    "the CFAR window, 2 (guard + train) + 1 = 21 cells (guard 2, train 8), does \
                     not fit the {rows} x {cols} map of input 0"
                )
            );
        }
        for (rows, cols) in [(1 << 32, 64), (64, 1 << 32), (0, 1 << 40)] {
            let e = w.fit(rows, cols).expect_err("too many bins");
            assert_eq!(
                e.to_string(),
                format!("input 0: [{rows}, {cols}] has more bins than detection records can name")
            );
        }
    }

    #[test]
    fn pfa_and_scale() {
        let w = window(1, 4);
        let k = w.training_cells();
        let p = CfarParams::new(w, Some(1e-3), None).expect("pfa");
        assert_eq!(p.window(), w);
        assert_eq!(p.alpha().to_bits(), alpha_for_pfa(1e-3, k).to_bits());
        assert_eq!(p.scale().to_bits(), threshold_scale(p.alpha(), k).to_bits());
        for scale in [0.0, -0.0, 14.0, MAX_SCALE] {
            let p = CfarParams::new(w, None, Some(scale)).expect("scale");
            assert_eq!(p.alpha().to_bits(), scale.to_bits());
        }
        assert_eq!(
            CfarParams::new(w, Some(1e-6), Some(14.0)),
            Err(ParamError::PfaAndScale)
        );
        assert_eq!(
            ParamError::PfaAndScale.to_string(),
            "parameters pfa and scale both given; give at most one (scale is a raw alpha)"
        );
        for scale in [-1.0, f64::INFINITY, f64::NAN, 1.0000001e12] {
            let e = CfarParams::new(w, None, Some(scale)).expect_err("bad scale");
            assert_eq!(e.parameter(), "scale");
            assert_eq!(
                e.to_string(),
                format!("parameter scale must be >= 0 and <= 1e12, got {scale}")
            );
        }
        for pfa in [0.0, 1.0, 1.5, -1e-6, f64::NAN, f64::INFINITY] {
            let e = CfarParams::new(w, Some(pfa), None).expect_err("bad pfa");
            assert_eq!(e.parameter(), "pfa");
            assert_eq!(
                e.to_string(),
                format!("parameter pfa must be in (0, 1), got {pfa}")
            );
        }
    }
}
