//! The Hann window both FFT stages apply: the CPU library's coefficients, to the bit.
//!
//! `w[i] = 0.5 (1 - cos(2 pi i / (L - 1)))` for `i` in `0..L`, evaluated in f64 on the host
//! and rounded once to f32 (`backends/cpu/src/window.rs` does the same), then uploaded at
//! create time. Evaluating it on the device instead would use the device's `cos`, which may
//! differ from the host's in the last f64 bit and so, now and then, in the f32 coefficient.

/// The Hann window of `len` points; a window of one point is `[1.0]`.
pub fn hann(len: usize) -> Vec<f32> {
    if len <= 1 {
        return vec![1.0; len];
    }
    let denom = (len - 1) as f64;
    (0..len)
        .map(|i| (0.5 * (1.0 - (2.0 * std::f64::consts::PI * i as f64 / denom).cos())) as f32)
        .collect()
}
