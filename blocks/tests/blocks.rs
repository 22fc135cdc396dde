//! The block library driven through its exported C table, as the runtime drives it: every
//! block against an independent double-precision reference (rustfft for the FFT) on seeded
//! random data, over every tiling, with the refusals a user can provoke named.

use std::f64::consts::PI;
use std::ptr::null_mut;
use std::sync::OnceLock;

use kplace_abi::{ABI_VERSION, DeviceKind, Dtype, MemorySpace, Status, TensorDesc, Tile};
use kplace_testkit::abi::*;
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

const CONVERT: &str = "blocks.convert";
const WINDOW: &str = "blocks.window";
const FFT: &str = "blocks.fft";
const POWER: &str = "blocks.power";
const MAGNITUDE: &str = "blocks.magnitude";
const MEAN: &str = "blocks.mean";
const BEAMFORM: &str = "blocks.beamform";
const COMBINE: &str = "blocks.combine";

/// The library's table, linked into this test and used through its function pointers.
fn blocks() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the entry returns a pointer to a static table.
        Loaded::linked(unsafe { &*kplace_blocks::kplace_library_entry() })
    })
}

/// Complex values of a cf32 buffer.
fn complex(b: &Buffer) -> Vec<Complex<f64>> {
    b.f32s()
        .chunks_exact(2)
        .map(|c| Complex::new(f64::from(c[0]), f64::from(c[1])))
        .collect()
}

/// A cf32 buffer of `dims` with random parts in [-1, 1), and its values.
fn random_complex(seed: u64, dims: &[u64]) -> (Buffer, Vec<Complex<f64>>) {
    let len: u64 = dims.iter().product();
    let parts = random_f32(&mut rng(seed), 2 * len as usize, -1.0, 1.0);
    let b = Buffer::from_f32(dims, Dtype::CF32, &parts);
    let values = complex(&b);
    (b, values)
}

#[test]
fn the_table_lists_thirteen_cpu_blocks() {
    let lib = blocks();
    assert_eq!(lib.table.abi_version, ABI_VERSION);
    assert_eq!(text(lib.table.name), "kplace-blocks");
    let names: Vec<&str> = lib.kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(
        names,
        [
            CONVERT,
            WINDOW,
            FFT,
            POWER,
            MAGNITUDE,
            MEAN,
            BEAMFORM,
            "blocks.fir",
            "blocks.channelize",
            COMBINE,
            "blocks.transpose",
            "blocks.add",
            "blocks.multiply"
        ]
    );
    for k in lib.kernels() {
        assert_eq!(k.device, DeviceKind::CPU, "{}", text(k.name));
        assert_eq!(k.memory, MemorySpace::HOST, "{}", text(k.name));
        // The combiner's second input is its weights; the sum's and the product's, their
        // second operand.
        let two = [COMBINE, "blocks.add", "blocks.multiply"];
        let inputs = if two.contains(&text(k.name)) { 2 } else { 1 };
        assert_eq!((k.n_inputs, k.n_outputs), (inputs, 1), "{}", text(k.name));
        let stateful = k.flags.contains(kplace_abi::KernelFlags::STATEFUL);
        let stream = ["blocks.fir", "blocks.channelize"].contains(&text(k.name));
        assert_eq!(stateful, stream, "{}", text(k.name));
    }
}

/// Eight dimensions, the ABI's most: an element-wise block and the mean take them whole.
#[test]
fn eight_dimensions_pass_through_power_and_mean() {
    let dims = [3u64, 2, 2, 2, 2, 2, 2, 5];
    let (input, values) = random_complex(8, &dims);
    let mut power = Buffer::new(Dtype::F32, &dims);
    run(
        blocks(),
        POWER,
        &Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::F32, &dims)),
        &input,
        &mut power,
        null_mut(),
    );
    let want: Vec<f32> = values.iter().map(|c| c.norm_sqr() as f32).collect();
    assert!(max_rel_error(power.f32s(), &want) < 1e-6);
    let mut mean = Buffer::new(Dtype::F32, &dims[1..]);
    run(
        blocks(),
        MEAN,
        &Stage::new(desc(Dtype::F32, &dims), desc(Dtype::F32, &dims[1..])),
        &power,
        &mut mean,
        null_mut(),
    );
    let row = power.f32s().len() / 3;
    let want: Vec<f64> = (0..row)
        .map(|i| {
            (0..3)
                .map(|m| f64::from(power.f32s()[m * row + i]))
                .sum::<f64>()
                / 3.0
        })
        .collect();
    assert!(max_rel_error(mean.f32s(), &want) < 1e-6);
}

#[test]
fn convert_scales_every_integer_exactly() {
    let (m, n) = (8u64, 24u64);
    let iq = random_ci16(&mut rng(1), m as usize, n as usize);
    let input = Buffer::from_i16(&[m, n], &iq);
    for (scale, text) in [
        (1.0, "1"),
        (2f64.powi(-15), "3.0517578125e-5"),
        (-0.5, "-0.5"),
    ] {
        let params = [("scale", text)];
        for split in splits(m) {
            let stage = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n]))
                .params(&params)
                .tiled(split);
            let mut output = Buffer::new(Dtype::CF32, &[m, n]);
            run(blocks(), CONVERT, &stage, &input, &mut output, null_mut());
            let want: Vec<f32> = iq.iter().map(|&v| (f64::from(v) * scale) as f32).collect();
            assert_eq!(output.f32s(), want, "scale {scale}, split {split:?}");
        }
    }
}

#[test]
fn convert_takes_every_numeric_dtype_to_single_precision() {
    // Seven values per case, each a little-endian encoding and the number it holds.
    let values = [0.0, 1.0, -1.0, 100.0, -128.0, 0.5, 3.25];
    let ints = [0.0, 1.0, -1.0, 100.0, -128.0, 5.0, 7.0];
    let encode = |dtype: Dtype, v: f64| -> Vec<u8> {
        match dtype {
            Dtype::I8 | Dtype::CI8 => vec![v as i8 as u8],
            Dtype::I16 | Dtype::CI16 => (v as i16).to_le_bytes().to_vec(),
            Dtype::I32 => (v as i32).to_le_bytes().to_vec(),
            Dtype::F16 | Dtype::CF16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
            Dtype::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
            Dtype::F32 | Dtype::CF32 => (v as f32).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        }
    };
    let cases = [
        (Dtype::I8, &ints),
        (Dtype::I16, &ints),
        (Dtype::I32, &ints),
        (Dtype::F16, &values),
        (Dtype::BF16, &values),
        (Dtype::F32, &values),
        (Dtype::F64, &values),
        (Dtype::CI8, &ints),
        (Dtype::CI16, &ints),
        (Dtype::CF16, &values),
        (Dtype::CF32, &values),
        (Dtype::CF64, &values),
    ];
    for (dtype, numbers) in cases {
        let complex = dtype.element().unwrap().complex;
        // A complex input's elements pair the values with their reverse.
        let parts: Vec<f64> = if complex {
            numbers
                .iter()
                .zip(numbers.iter().rev())
                .flat_map(|(&a, &b)| [a, b])
                .collect()
        } else {
            numbers.to_vec()
        };
        let bytes: Vec<u8> = parts.iter().flat_map(|&v| encode(dtype, v)).collect();
        let input = Buffer::from_bytes(dtype, &[7], &bytes);
        let outputs: &[Dtype] = if complex {
            &[Dtype::CF32]
        } else {
            &[Dtype::F32, Dtype::CF32]
        };
        for &to in outputs {
            let params = [("scale", "-2")];
            let stage = Stage::new(desc(dtype, &[7]), desc(to, &[7])).params(&params);
            let mut output = Buffer::new(to, &[7]);
            run(blocks(), CONVERT, &stage, &input, &mut output, null_mut());
            let want: Vec<f32> = if complex || to == Dtype::F32 {
                parts.iter().map(|&v| (-2.0 * v) as f32).collect()
            } else {
                parts
                    .iter()
                    .flat_map(|&v| [(-2.0 * v) as f32, 0.0])
                    .collect()
            };
            assert_eq!(output.f32s(), want, "{dtype:?} to {to:?}");
        }
    }
    assert_refuses(
        blocks(),
        CONVERT,
        &Stage::new(desc(Dtype::CI8, &[4]), desc(Dtype::F32, &[4])),
        "output 0 must be cf32: input 0 is complex",
    );
    assert_refuses(
        blocks(),
        CONVERT,
        &Stage::new(desc(Dtype::RECORDS, &[4]), desc(Dtype::CF32, &[4])),
        "input 0 must be numbers",
    );
}

#[test]
fn window_multiplies_each_row_by_its_formula() {
    let dims = [3u64, 2, 16];
    let (input, x) = random_complex(2, &dims);
    let n = 16usize;
    let formula = |name: &str, i: usize| {
        let t = 2.0 * PI * i as f64 / n as f64;
        match name {
            "rect" => 1.0,
            "hann" => 0.5 * (1.0 - t.cos()),
            "hamming" => 0.54 - 0.46 * t.cos(),
            _ => 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos(),
        }
    };
    for name in ["rect", "hann", "hamming", "blackman"] {
        let params = [("window", name)];
        for split in splits(dims[0]) {
            let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &dims))
                .params(&params)
                .tiled(split);
            let mut output = Buffer::new(Dtype::CF32, &dims);
            run(blocks(), WINDOW, &stage, &input, &mut output, null_mut());
            let got = complex(&output);
            for (i, (g, x)) in got.iter().zip(&x).enumerate() {
                let want = x * formula(name, i % n);
                assert!(
                    (g - want).norm() <= 1e-7 * want.norm().max(1e-30),
                    "{name} value {i}: {g} != {want}"
                );
            }
        }
    }
    // The default is Hann: its first coefficient is 0.
    let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &dims));
    let mut output = Buffer::new(Dtype::CF32, &dims);
    run(blocks(), WINDOW, &stage, &input, &mut output, null_mut());
    assert_eq!(&output.f32s()[..2], &[0.0, 0.0]);
}

/// Each row of `x` (rows of `n`) transformed by rustfft in double: forward or inverse, scaled.
fn reference_fft(x: &[Complex<f64>], n: usize, inverse: bool, scale: f64) -> Vec<Complex<f64>> {
    let mut planner = FftPlanner::<f64>::new();
    let fft = if inverse {
        planner.plan_fft_inverse(n)
    } else {
        planner.plan_fft_forward(n)
    };
    let mut y = x.to_vec();
    fft.process(&mut y);
    y.iter().map(|v| v * scale).collect()
}

/// The largest error of any value of each row of `n`, relative to that row's peak.
fn worst_row_error(got: &[Complex<f64>], want: &[Complex<f64>], n: usize) -> f64 {
    got.chunks(n)
        .zip(want.chunks(n))
        .map(|(g, w)| {
            let peak = w.iter().map(|v| v.norm()).fold(0.0, f64::max);
            g.iter()
                .zip(w)
                .map(|(g, w)| (g - w).norm() / peak)
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max)
}

#[test]
fn fft_matches_rustfft_forward_and_inverse_on_every_tiling() {
    // Powers of two and not, ranks 1 to 3, rows in one block and in several with a tail.
    let cases: &[&[u64]] = &[&[64], &[4, 48], &[6, 1000], &[8, 3, 256], &[2, 40, 512]];
    for (seed, &dims) in cases.iter().enumerate() {
        let n = *dims.last().unwrap() as usize;
        let (input, x) = random_complex(10 + seed as u64, dims);
        let scale_text = format!("{:e}", 1.0 / n as f64);
        for (direction, scale) in [("forward", "1"), ("inverse", scale_text.as_str())] {
            let params = [("direction", direction), ("scale", scale)];
            let want = reference_fft(
                &x,
                n,
                direction == "inverse",
                scale.parse::<f32>().unwrap().into(),
            );
            let tilings = if dims.len() == 1 {
                vec![None]
            } else {
                splits(dims[0])
            };
            for split in tilings {
                let stage = Stage::new(desc(Dtype::CF32, dims), desc(Dtype::CF32, dims))
                    .params(&params)
                    .tiled(split);
                let mut output = Buffer::new(Dtype::CF32, dims);
                run(blocks(), FFT, &stage, &input, &mut output, null_mut());
                let worst = worst_row_error(&complex(&output), &want, n);
                assert!(
                    worst < 1e-5,
                    "{dims:?} {direction} split {split:?}: error {worst:e} of the row's peak"
                );
            }
        }
    }
}

#[test]
fn fft_along_any_axis_matches_rustfft_on_each_column() {
    // (shape, axis): the first axis of a matrix (a Doppler FFT across rows), a middle axis, and
    // the middle axis of a tensor whose transforms outnumber one block.
    let cases: &[(&[u64], usize)] = &[(&[8, 5], 0), (&[4, 16, 3], 1), (&[2, 64, 300], 1)];
    for (seed, &(dims, axis)) in cases.iter().enumerate() {
        let (input, x) = random_complex(80 + seed as u64, dims);
        let n = dims[axis] as usize;
        let inner: usize = dims[axis + 1..].iter().product::<u64>() as usize;
        // The reference: every column gathered, transformed by rustfft, put back.
        let mut want = x.clone();
        let mut fft = FftPlanner::<f64>::new();
        let plan = fft.plan_fft_forward(n);
        for group in 0..x.len() / (n * inner) {
            for j in 0..inner {
                let at = |k: usize| group * n * inner + k * inner + j;
                let mut column: Vec<Complex<f64>> = (0..n).map(|k| x[at(k)]).collect();
                plan.process(&mut column);
                for (k, v) in column.into_iter().enumerate() {
                    want[at(k)] = v;
                }
            }
        }
        let axis_text = axis.to_string();
        let params = [("axis", axis_text.as_str())];
        let tilings = if axis == 0 {
            vec![None]
        } else {
            splits(dims[0])
        };
        for split in tilings {
            let stage = Stage::new(desc(Dtype::CF32, dims), desc(Dtype::CF32, dims))
                .params(&params)
                .tiled(split);
            let mut output = Buffer::new(Dtype::CF32, dims);
            run(blocks(), FFT, &stage, &input, &mut output, null_mut());
            let got = complex(&output);
            let peak = want.iter().map(|v| v.norm()).fold(0.0, f64::max);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).norm() / peak)
                .fold(0.0, f64::max);
            assert!(
                worst < 1e-5,
                "{dims:?} axis {axis} split {split:?}: {worst:e}"
            );
        }
    }
}

#[test]
fn fft_then_its_scaled_inverse_is_the_identity() {
    let dims = [4u64, 100];
    let (input, x) = random_complex(20, &dims);
    let mut spectrum = Buffer::new(Dtype::CF32, &dims);
    let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &dims));
    run(blocks(), FFT, &stage, &input, &mut spectrum, null_mut());
    let inverse = [("direction", "inverse"), ("scale", "0.01")];
    let mut back = Buffer::new(Dtype::CF32, &dims);
    run(
        blocks(),
        FFT,
        &stage.clone().params(&inverse),
        &spectrum,
        &mut back,
        null_mut(),
    );
    let worst = worst_row_error(&complex(&back), &x, 100);
    assert!(worst < 1e-5, "round trip error {worst:e}");
}

#[test]
fn power_and_magnitude_match_double_precision() {
    let dims = [4u64, 3, 10];
    let (input, x) = random_complex(30, &dims);
    for (name, law) in [
        (
            POWER,
            (|v: &Complex<f64>| v.norm_sqr()) as fn(&Complex<f64>) -> f64,
        ),
        (MAGNITUDE, |v: &Complex<f64>| v.norm()),
    ] {
        for split in splits(dims[0]) {
            let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::F32, &dims)).tiled(split);
            let mut output = Buffer::new(Dtype::F32, &dims);
            run(blocks(), name, &stage, &input, &mut output, null_mut());
            let want: Vec<f64> = x.iter().map(law).collect();
            let err = max_rel_error(output.f32s(), &want);
            assert!(err < 1e-7, "{name} split {split:?}: {err:e}");
        }
    }
}

#[test]
fn mean_averages_axis_0_in_double_with_its_scale() {
    let dims = [5u64, 3, 7];
    let values = random_f32(&mut rng(40), 105, 0.0, 10.0);
    let input = Buffer::from_f32(&dims, Dtype::F32, &values);
    for (scale, text) in [(1.0, None), (2.5, Some("2.5"))] {
        let params: Vec<(&str, &str)> = text.map(|t| ("scale", t)).into_iter().collect();
        let stage = Stage::new(desc(Dtype::F32, &dims), desc(Dtype::F32, &[3, 7])).params(&params);
        let mut output = Buffer::new(Dtype::F32, &[3, 7]);
        run(blocks(), MEAN, &stage, &input, &mut output, null_mut());
        let want: Vec<f64> = (0..21)
            .map(|j| {
                let sum: f64 = (0..5).map(|m| f64::from(values[m * 21 + j])).sum();
                sum * scale / 5.0
            })
            .collect();
        let err = max_rel_error(output.f32s(), &want);
        assert!(err < 1e-7, "scale {scale}: {err:e}");
    }
}

#[test]
fn beamform_sums_the_channels_with_their_steering_weights() {
    // Snapshots [4, 3] of 5 channels, to 3 beams of each of the 12 snapshots; the reference
    // computes each weight itself.
    let (dims, out) = ([4u64, 3, 5], [12u64, 3]);
    let (input, x) = random_complex(70, &dims);
    let angles = [-30.0f64, 0.0, 52.5];
    let params = [("angles", "-30, 0,52.5"), ("spacing", "0.4")];
    let want: Vec<Complex<f64>> = x
        .chunks(5)
        .flat_map(|snapshot| {
            angles.iter().map(move |a| {
                snapshot
                    .iter()
                    .enumerate()
                    .map(|(c, v)| {
                        let phase = -2.0 * PI * 0.4 * c as f64 * a.to_radians().sin();
                        v * Complex::from_polar(1.0, phase)
                    })
                    .sum::<Complex<f64>>()
                    / 5.0
            })
        })
        .collect();
    for split in splits(dims[0]) {
        let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &out))
            .params(&params)
            .tiled(split);
        let mut output = Buffer::new(Dtype::CF32, &out);
        run(blocks(), BEAMFORM, &stage, &input, &mut output, null_mut());
        for (i, (g, w)) in complex(&output).iter().zip(&want).enumerate() {
            assert!(
                (g - w).norm() <= 1e-6 * (1.0 + w.norm()),
                "split {split:?} value {i}: {g} != {w}"
            );
        }
    }
}

/// Runs `blocks.combine` over `x` with `weights`, tile by tile.
fn combine(x: &Buffer, weights: &Buffer, out: &[u64], tile: Option<u64>) -> Buffer {
    let stage = Stage {
        inputs: vec![x.desc, weights.desc],
        ..Stage::new(x.desc, desc(Dtype::CF32, out))
    }
    .tiled(tile);
    let state = create(blocks().kernel(COMBINE), &stage).unwrap();
    let mut output = Buffer::new(Dtype::CF32, out);
    let rows = x.desc.shape[0];
    let tile = tile.unwrap_or(rows);
    for i in 0..rows / tile {
        let host = MemorySpace::HOST;
        state
            .launch_ports(
                &[x.input(host), weights.input(host)],
                &[output.output(host)],
                Tile {
                    begin: i * tile,
                    count: tile,
                },
                null_mut(),
            )
            .unwrap();
    }
    output
}

#[test]
fn combine_sums_the_channels_with_the_weights_it_is_given() {
    // Snapshots [4, 3] of 5 channels, to 2 beams with random weights; the reference multiplies
    // in double precision.
    let (input, x) = random_complex(71, &[4, 3, 5]);
    let (weights, w) = random_complex(72, &[2, 5]);
    let want: Vec<Complex<f64>> = x
        .chunks(5)
        .flat_map(|snapshot| {
            w.chunks(5)
                .map(move |row| row.iter().zip(snapshot).map(|(w, x)| w * x).sum())
        })
        .collect();
    for split in splits(4) {
        let output = combine(&input, &weights, &[12, 2], split);
        for (i, (g, w)) in complex(&output).iter().zip(&want).enumerate() {
            assert!(
                (g - w).norm() <= 1e-6 * (1.0 + w.norm()),
                "split {split:?} value {i}: {g} != {w}"
            );
        }
    }
}

#[test]
fn combine_given_the_steering_weights_is_the_beamformer() {
    let (dims, out) = ([8u64, 6], [8u64, 3]);
    let (input, _) = random_complex(73, &dims);
    let angles = [-30.0f64, 0.0, 14.4775];
    let parts: Vec<f32> = angles
        .iter()
        .flat_map(|a| {
            (0..6).flat_map(move |c| {
                let phase = -PI * c as f64 * a.to_radians().sin();
                [(phase.cos() / 6.0) as f32, (phase.sin() / 6.0) as f32]
            })
        })
        .collect();
    let weights = Buffer::from_f32(&[3, 6], Dtype::CF32, &parts);
    let combined = combine(&input, &weights, &out, Some(2));
    let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &out))
        .params(&[("angles", "-30, 0, 14.4775")]);
    let mut beams = Buffer::new(Dtype::CF32, &out);
    run(blocks(), BEAMFORM, &stage, &input, &mut beams, null_mut());
    // The weights differ only by their rounding to single precision.
    for (g, w) in complex(&combined).iter().zip(&complex(&beams)) {
        assert!((g - w).norm() <= 1e-6, "{g} != {w}");
    }
}

#[test]
fn a_plane_wave_fills_its_own_beam_and_nulls_the_others() {
    // 8 channels half a wavelength apart; a unit wave from -30 degrees (sin -0.5). Beams at
    // sines -0.5, 0 and 0.25 differ from it by multiples of 2/8: the last two are nulls.
    let n = 8;
    let parts: Vec<f32> = (0..n)
        .flat_map(|c| {
            let phase = std::f64::consts::PI * c as f64 * (-0.5);
            [phase.cos() as f32, phase.sin() as f32]
        })
        .collect();
    let input = Buffer::from_f32(&[1, 8], Dtype::CF32, &parts);
    let params = [("angles", "-30, 0, 14.477512185929923")];
    let stage = Stage::new(desc(Dtype::CF32, &[1, 8]), desc(Dtype::CF32, &[1, 3])).params(&params);
    let mut output = Buffer::new(Dtype::CF32, &[1, 3]);
    run(blocks(), BEAMFORM, &stage, &input, &mut output, null_mut());
    let beams: Vec<f64> = complex(&output).iter().map(|v| v.norm()).collect();
    assert!((beams[0] - 1.0).abs() < 1e-6, "{beams:?}");
    assert!(beams[1] < 1e-6 && beams[2] < 1e-6, "{beams:?}");
}

#[test]
fn a_tile_writes_only_its_rows() {
    let dims = [4u64, 32];
    let (input, _) = random_complex(50, &dims);
    let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &dims)).split(0, 1);
    for name in [WINDOW, FFT] {
        let state = create(blocks().kernel(name), &stage).unwrap();
        let mut output = Buffer::new(Dtype::CF32, &dims);
        let tile = Tile { begin: 2, count: 1 };
        state
            .launch(
                input.input(MemorySpace::HOST),
                output.output(MemorySpace::HOST),
                tile,
                null_mut(),
            )
            .unwrap();
        for (i, v) in output.f32s().iter().enumerate() {
            let row = i / 64;
            assert_eq!(v.is_nan(), row != 2, "{name}: value {i} of row {row}");
        }
    }
}

#[test]
fn a_tile_past_axis_0_is_refused() {
    let dims = [4u64, 8];
    let (input, _) = random_complex(60, &dims);
    let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::F32, &dims)).split(0, 2);
    let state = create(blocks().kernel(POWER), &stage).unwrap();
    let mut output = Buffer::new(Dtype::F32, &dims);
    let (status, text) = state
        .launch(
            input.input(MemorySpace::HOST),
            output.output(MemorySpace::HOST),
            Tile { begin: 3, count: 2 },
            null_mut(),
        )
        .unwrap_err();
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert_eq!(
        text,
        "blocks.power: tile [3, +2) is outside the 4 indices of axis 0"
    );
}

#[test]
fn what_a_block_cannot_take_is_refused_by_name() {
    let lib = blocks();
    let cf = |dims: &[u64]| desc(Dtype::CF32, dims);
    let f = |dims: &[u64]| desc(Dtype::F32, dims);
    let weighed = |weights: TensorDesc, out: &[u64]| Stage {
        inputs: vec![cf(&[4, 8]), weights],
        ..Stage::new(cf(&[4, 8]), cf(out))
    };
    for (stage, phrase) in [
        (
            weighed(cf(&[3, 7]), &[4, 3]),
            "input 1 must be the weights, cf32 [B, 8]: one per channel",
        ),
        (
            weighed(cf(&[24]), &[4, 3]),
            "input 1 must be the weights, cf32 [B, 8] (beams, channels)",
        ),
        (weighed(f(&[3, 8]), &[4, 3]), "input 1 must be cf32"),
        (
            weighed(cf(&[3, 8]), &[4, 2]),
            "one value per row of the weights (3)",
        ),
    ] {
        assert_refuses(lib, COMBINE, &stage, phrase);
    }
    let same = Stage::new(cf(&[4, 8]), cf(&[4, 8]));
    assert_refuses(
        lib,
        FFT,
        &Stage::new(f(&[4, 8]), cf(&[4, 8])),
        "input 0 must be cf32",
    );
    assert_refuses(
        lib,
        FFT,
        &Stage::new(cf(&[4, 8]), cf(&[4, 4])),
        "must have the input's dimensions [4, 8]",
    );
    assert_refuses(
        lib,
        FFT,
        &same.clone().split(1, 2),
        "cannot be split along axis 1",
    );
    assert_refuses(
        lib,
        WINDOW,
        &same.clone().split(0, 3),
        "split tile of 3 does not divide the 4",
    );
    assert_refuses(
        lib,
        FFT,
        &Stage::new(cf(&[8]), cf(&[8])).split(0, 4),
        "its one axis is the axis it works along",
    );
    assert_refuses(
        lib,
        FFT,
        &same.clone().params(&[("direction", "backward")]),
        "expected forward or inverse",
    );
    assert_refuses(
        lib,
        FFT,
        &same.clone().params(&[("scale", "inf")]),
        "scale must be a finite number",
    );
    assert_refuses(
        lib,
        FFT,
        &same.clone().params(&[("planer", "measure")]),
        "unknown parameter planer",
    );
    assert_refuses(
        lib,
        WINDOW,
        &same.clone().params(&[("window", "kaiser")]),
        "expected rect, hann, hamming or blackman",
    );
    assert_refuses(lib, POWER, &same, "output 0 must be f32");
    assert_refuses(
        lib,
        MEAN,
        &Stage::new(f(&[8]), f(&[1])),
        "takes f32 [.., M, ..] to f32 [..]",
    );
    assert_refuses(
        lib,
        MEAN,
        &Stage::new(f(&[4, 8]), f(&[4])),
        "got f32 [4, 8] to f32 [4]",
    );
    assert_refuses(
        lib,
        MEAN,
        &Stage::new(f(&[4, 8]), f(&[8])).split(0, 2),
        "cannot be split",
    );
    assert_refuses(
        lib,
        POWER,
        &Stage::new(cf(&[4, 0]), f(&[4, 0])),
        "without empty dimensions",
    );
    assert_refuses(
        lib,
        FFT,
        &same.clone().params(&[("axis", "2")]),
        "parameter axis is 2, but input 0 has 2 axes",
    );
    assert_refuses(
        lib,
        FFT,
        &same.clone().params(&[("axis", "0")]).split(0, 2),
        "cannot be split along axis 0: it is the axis transformed",
    );
    let beams = [("angles", "10, 20")];
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[4, 8]), cf(&[4, 2])),
        "parameter angles is missing",
    );
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[4, 8]), cf(&[4, 3])).params(&beams),
        "output 0 must be cf32 [.., 2]: one value per angle (2) for each of the input's 4 snapshots",
    );
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[4, 8]), cf(&[4, 2])).params(&[("angles", "10, 95")]),
        "parameter angles: 95 is not an angle in degrees within [-90, 90]",
    );
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[4, 8]), cf(&[4, 2])).params(&[("angles", "10, west")]),
        "parameter angles: item 1, \"west\", cannot be parsed",
    );
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[4, 8]), cf(&[4, 0])).params(&[("angles", "")]),
        "parameter angles is empty",
    );
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[4, 8]), cf(&[4, 2]))
            .params(&beams)
            .split(1, 4),
        "only along axis 0",
    );
    assert_refuses(
        lib,
        BEAMFORM,
        &Stage::new(cf(&[8]), cf(&[2])).params(&beams).split(0, 4),
        "its one axis is the channels",
    );
    let mut short = Stage::new(cf(&[4, 8]), f(&[4, 8]));
    short.inputs[0] = short_by(short.inputs[0], 8);
    assert_refuses(lib, POWER, &short, "needs 256 bytes");
    assert_refuses(
        lib,
        POWER,
        &Stage::new(cf(&[4, 8]), f(&[4, 8])).in_memory(MemorySpace::DEVICE),
        "must be in host memory",
    );
}
