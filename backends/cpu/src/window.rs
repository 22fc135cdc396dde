//! The Hann window both FFT stages apply.
//!
//! `w[i] = 0.5 (1 - cos(2 pi i / (L - 1)))` for `i` in `0..L` (the symmetric form docs/workload.md
//! specifies), evaluated in f64 and rounded once to f32, so every backend that follows this
//! recipe multiplies by the same coefficients. A window of one point is `[1.0]`.

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

    #[test]
    fn endpoints_are_zero_and_the_window_is_symmetric() {
        let w = hann(9);
        assert_eq!(w[0], 0.0);
        assert_eq!(w[8], 0.0);
        assert_eq!(w[4], 1.0);
        for i in 0..9 {
            assert!((w[i] - w[8 - i]).abs() <= 1e-7);
        }
        assert_eq!(hann(1), vec![1.0]);
        assert!(hann(0).is_empty());
        assert_eq!(hann_interleaved(3), vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    }
}
