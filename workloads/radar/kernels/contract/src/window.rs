//! The Hann window both FFT stages apply, in every backend.
//!
//! `w[i] = 0.5 (1 - cos(2 pi i / (L - 1)))` for `i` in `0..L` (the symmetric form
//! docs/workload.md specifies), evaluated in f64 on the host and rounded once to f32. Every
//! backend multiplies by exactly these coefficients (a GPU uploads them at create time rather
//! than evaluating `cos` on the device, whose last f64 bit may differ from the host's and so,
//! now and then, the f32 coefficient), which is what makes the windowed samples of the CPU and
//! GPU libraries the same bits. A window of one point is `[1.0]`, of none empty.

/// The Hann window of `len` points.
pub fn hann(len: usize) -> Vec<f32> {
    if len <= 1 {
        return vec![1.0; len];
    }
    let denom = (len - 1) as f64;
    (0..len)
        .map(|i| (0.5 * (1.0 - (2.0 * std::f64::consts::PI * i as f64 / denom).cos())) as f32)
        .collect()
}

/// The Hann window of `len` points with every coefficient repeated twice: multiplying it
/// element by element with `len` interleaved complex values (real, imaginary, ...) windows
/// them as one contiguous stream of f32, which compilers vectorise.
pub fn hann_interleaved(len: usize) -> Vec<f32> {
    hann(len).into_iter().flat_map(|w| [w, w]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formula written out independently: `sin²(pi i / (L - 1))`, equal to
    /// `0.5 (1 - cos(2 pi i / (L - 1)))`, in f64.
    fn formula(i: usize, len: usize) -> f64 {
        (std::f64::consts::PI * i as f64 / (len - 1) as f64)
            .sin()
            .powi(2)
    }

    #[test]
    fn coefficients_follow_the_formula() {
        for len in [2, 3, 4, 9, 16, 127, 128, 1000, 1024, 4096] {
            let w = hann(len);
            assert_eq!(w.len(), len);
            for (i, &c) in w.iter().enumerate() {
                // One f32 rounding (half an f32 epsilon, relative) of a value within a few
                // f64 ulps (absolute) of the formula's.
                let exact = formula(i, len);
                assert!(
                    (f64::from(c) - exact).abs() <= f64::from(f32::EPSILON) * exact + 1e-15,
                    "len {len}, i {i}: {c} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn endpoints_are_zero_the_middle_one_and_the_window_symmetric() {
        let w = hann(9);
        assert_eq!(w[0], 0.0);
        assert_eq!(w[8], 0.0);
        assert_eq!(w[4], 1.0);
        for i in 0..9 {
            assert!((w[i] - w[8 - i]).abs() <= 1e-7);
        }
        assert_eq!(hann(5), vec![0.0, 0.5, 1.0, 0.5, 0.0]);
        assert_eq!(hann(2), vec![0.0, 0.0]);
        assert_eq!(hann(1), vec![1.0]);
        assert!(hann(0).is_empty());
    }

    #[test]
    fn the_interleaved_window_repeats_every_coefficient() {
        assert_eq!(hann_interleaved(3), vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        let (w, twice) = (hann(128), hann_interleaved(128));
        assert_eq!(twice.len(), 256);
        for (i, c) in w.iter().enumerate() {
            assert_eq!(c.to_bits(), twice[2 * i].to_bits());
            assert_eq!(c.to_bits(), twice[2 * i + 1].to_bits());
        }
        assert!(hann_interleaved(0).is_empty());
    }
}
