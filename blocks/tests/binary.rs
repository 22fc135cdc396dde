//! `blocks.add` and `blocks.multiply` through the library's exported table: every dtype pair
//! and every way input 1 repeats (the whole shape, a suffix, one value), conjugated or not,
//! over every tiling, against complex arithmetic in double; a radar scene (pulse compression
//! in the frequency domain: FFT, times the conjugate of the pulse's spectrum, inverse FFT)
//! that puts each echo's peak at its delay; and the refusals a user can provoke named.

use std::f64::consts::TAU;
use std::ptr::null_mut;
use std::sync::OnceLock;

use kplace_abi::{Dtype, MemorySpace, TensorDesc, Tile};
use kplace_testkit::abi::*;
use rustfft::num_complex::Complex;

const ADD: &str = "blocks.add";
const MULTIPLY: &str = "blocks.multiply";
const FFT: &str = "blocks.fft";
const POWER: &str = "blocks.power";

fn blocks() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the entry returns a pointer to a static table.
        Loaded::linked(unsafe { &*kplace_blocks::kplace_library_entry() })
    })
}

/// A stage of two inputs, `x` and `w`, writing `x`'s shape.
fn two(x: TensorDesc, w: TensorDesc) -> Stage<'static> {
    let mut stage = Stage::new(x, x);
    stage.inputs.push(w);
    stage
}

/// Runs `name` over `stage` as the executor does (one launch per tile, in order).
fn run2(name: &str, stage: &Stage<'_>, x: &Buffer, w: &Buffer) -> Buffer {
    let state = create(blocks().kernel(name), stage).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let dims = x.desc.dims().to_vec();
    let mut out = Buffer::new(x.desc.dtype, &dims);
    let tile = stage.split.map_or(dims[0], |(_, t)| t);
    for i in 0..dims[0] / tile {
        let t = Tile {
            begin: i * tile,
            count: tile,
        };
        let inputs = [x.input(MemorySpace::HOST), w.input(MemorySpace::HOST)];
        state
            .launch_ports(&inputs, &[out.output(MemorySpace::HOST)], t, null_mut())
            .unwrap_or_else(|e| panic!("{name}: launch: {e:?}"));
    }
    out
}

/// Random values of `dtype` and `dims` (parts in [-1, 1)), and them as complex doubles.
fn random(seed: u64, dtype: Dtype, dims: &[u64]) -> (Buffer, Vec<Complex<f64>>) {
    let len = dims.iter().product::<u64>() as usize;
    let parts = if dtype == Dtype::CF32 { 2 } else { 1 };
    let values = random_f32(&mut rng(seed), parts * len, -1.0, 1.0);
    let complex = values
        .chunks_exact(parts)
        .map(|v| Complex::new(f64::from(v[0]), v.get(1).map_or(0.0, |&i| f64::from(i))))
        .collect();
    (Buffer::from_f32(dims, dtype, &values), complex)
}

/// The output's values as complex doubles.
fn values(b: &Buffer) -> Vec<Complex<f64>> {
    let parts = if b.desc.dtype == Dtype::CF32 { 2 } else { 1 };
    b.f32s()
        .chunks_exact(parts)
        .map(|v| Complex::new(f64::from(v[0]), v.get(1).map_or(0.0, |&i| f64::from(i))))
        .collect()
}

/// The largest distance between `got` and `want`, relative to `want`'s largest magnitude.
fn worst(got: &[Complex<f64>], want: &[Complex<f64>]) -> f64 {
    assert_eq!(got.len(), want.len());
    let peak = want.iter().fold(0f64, |m, w| m.max(w.norm()));
    got.iter()
        .zip(want)
        .fold(0f64, |m, (g, w)| m.max((g - w).norm()))
        / peak
}

#[test]
fn sums_and_products_meet_input_1_repeated_over_the_leading_axes() {
    let dims = [4u64, 3, 5];
    let shapes: [&[u64]; 4] = [&[4, 3, 5], &[3, 5], &[5], &[1]];
    let pairs = [
        (ADD, Dtype::CF32, Dtype::CF32),
        (ADD, Dtype::F32, Dtype::F32),
        (MULTIPLY, Dtype::CF32, Dtype::CF32),
        (MULTIPLY, Dtype::CF32, Dtype::F32),
        (MULTIPLY, Dtype::F32, Dtype::F32),
    ];
    for (seed, (name, xt, wt)) in pairs.into_iter().enumerate() {
        let (x, xv) = random(10 + seed as u64, xt, &dims);
        for w_dims in shapes {
            let (w, wv) = random(20 + seed as u64, wt, w_dims);
            let conjugations: &[bool] = if name == MULTIPLY {
                &[false, true]
            } else {
                &[false]
            };
            for &conjugate in conjugations {
                let want: Vec<Complex<f64>> = xv
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| {
                        let w = wv[i % wv.len()];
                        let w = if conjugate { w.conj() } else { w };
                        if name == ADD { x + w } else { x * w }
                    })
                    .collect();
                let params = [("conjugate", if conjugate { "true" } else { "false" })];
                for split in splits(dims[0]) {
                    let mut stage = two(desc(xt, &dims), desc(wt, w_dims)).tiled(split);
                    if name == MULTIPLY {
                        stage = stage.params(&params);
                    }
                    let got = run2(name, &stage, &x, &w);
                    let err = worst(&values(&got), &want);
                    assert!(
                        err < 1e-7,
                        "{name} {xt:?} by {wt:?} {w_dims:?} conj {conjugate} {split:?}: {err:e}"
                    );
                }
            }
        }
    }
}

/// A scene: two echoes of a chirp, one per row, at delays 21 and 40 of 64 samples, in noise.
/// Compressed in the frequency domain with the blocks (FFT, times the conjugate of the chirp's
/// spectrum as a constant, inverse FFT scaled by 1/N, power), each row's peak is its delay
/// and holds the chirp's energy squared.
#[test]
fn pulse_compression_puts_each_echo_at_its_delay() {
    let (n, len) = (64usize, 16usize);
    let chirp: Vec<Complex<f64>> = (0..len)
        .map(|k| Complex::from_polar(1.0, TAU * 0.5 * 0.4 * (k * k) as f64 / len as f64))
        .collect();
    let noise = random_f32(&mut rng(30), 4 * n, -0.05, 0.05);
    let delays = [21usize, 40];
    let mut echoes = Vec::new();
    for (row, &d) in delays.iter().enumerate() {
        for t in 0..n {
            let v = if (d..d + len).contains(&t) {
                chirp[t - d]
            } else {
                Complex::new(0.0, 0.0)
            };
            let k = 2 * (row * n + t);
            echoes.extend([v.re as f32 + noise[k], v.im as f32 + noise[k + 1]]);
        }
    }
    // The chirp's spectrum (zero-padded to N), by its definition.
    let spectrum: Vec<f32> = (0..n)
        .flat_map(|f| {
            let s: Complex<f64> = chirp
                .iter()
                .enumerate()
                .map(|(t, c)| c * Complex::from_polar(1.0, -TAU * (f * t) as f64 / n as f64))
                .sum();
            [s.re as f32, s.im as f32]
        })
        .collect();
    let rows = [2u64, n as u64];
    let x = Buffer::from_f32(&rows, Dtype::CF32, &echoes);
    let reference = Buffer::from_f32(&[n as u64], Dtype::CF32, &spectrum);
    let same = Stage::new(desc(Dtype::CF32, &rows), desc(Dtype::CF32, &rows));
    let mut spectra = Buffer::new(Dtype::CF32, &rows);
    run(blocks(), FFT, &same, &x, &mut spectra, null_mut());
    let matched = two(desc(Dtype::CF32, &rows), desc(Dtype::CF32, &[n as u64]))
        .params(&[("conjugate", "true")]);
    let product = run2(MULTIPLY, &matched, &spectra, &reference);
    let inverse = [("direction", "inverse"), ("scale", "0.015625")];
    let mut compressed = Buffer::new(Dtype::CF32, &rows);
    run(
        blocks(),
        FFT,
        &same.clone().params(&inverse),
        &product,
        &mut compressed,
        null_mut(),
    );
    let mut power = Buffer::new(Dtype::F32, &rows);
    let detect = Stage::new(desc(Dtype::CF32, &rows), desc(Dtype::F32, &rows));
    run(
        blocks(),
        POWER,
        &detect,
        &compressed,
        &mut power,
        null_mut(),
    );
    for (row, &d) in delays.iter().enumerate() {
        let p = &power.f32s()[row * n..(row + 1) * n];
        let peak = (0..n).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        assert_eq!(peak, d, "row {row}: {p:?}");
        // The chirp's energy is len; compressed, the peak is len² within the noise.
        let energy = (len * len) as f32;
        assert!(
            (p[d] - energy).abs() < 0.1 * energy,
            "{} for {energy}",
            p[d]
        );
    }
}

#[test]
fn what_two_inputs_cannot_be_is_refused_by_name() {
    let lib = blocks();
    let cf = |dims: &[u64]| desc(Dtype::CF32, dims);
    let f = |dims: &[u64]| desc(Dtype::F32, dims);
    for (name, stage, phrase) in [
        (
            ADD,
            two(cf(&[4, 5]), f(&[5])),
            "input 1 must be cf32, got f32",
        ),
        (
            MULTIPLY,
            two(f(&[4, 5]), cf(&[5])),
            "input 1 must be f32 (a real input 0 makes a real output), got cf32",
        ),
        (
            MULTIPLY,
            two(cf(&[4, 5]), cf(&[4])),
            "input 1 must have input 0's last dimensions (for input 0 cf32 [4, 5]: e.g. [5] or \
             [4, 5]), or hold one value; got cf32 [4]",
        ),
        (
            ADD,
            two(cf(&[4, 5]), cf(&[2, 4, 5])),
            "or hold one value; got cf32 [2, 4, 5]",
        ),
        (
            ADD,
            two(desc(Dtype::CI16, &[4, 5]), desc(Dtype::CI16, &[5])),
            "input 0 must be cf32 or f32, got ci16",
        ),
        (
            ADD,
            two(cf(&[4, 5]), cf(&[5])).params(&[("conjugate", "true")]),
            "unknown parameter conjugate",
        ),
        (
            MULTIPLY,
            two(cf(&[4, 5]), cf(&[5])).params(&[("conjugate", "yes")]),
            "parameter conjugate: cannot parse \"yes\"",
        ),
        (
            MULTIPLY,
            two(cf(&[4, 5]), cf(&[5])).split(0, 3),
            "split tile of 3 does not divide the 4",
        ),
    ] {
        assert_refuses(lib, name, &stage, phrase);
    }
    let mut mismatched = two(cf(&[4, 5]), cf(&[5]));
    mismatched.outputs[0] = cf(&[4, 4]);
    assert_refuses(
        lib,
        ADD,
        &mismatched,
        "output 0 must have the input's dimensions [4, 5]",
    );
}
