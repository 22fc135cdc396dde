//! The blocks that work along a chosen axis or reorder axes, through the library's exported
//! table: `blocks.mean` and `blocks.power`/`blocks.magnitude` with `axis`, against sums
//! written index by index in double; `blocks.transpose` against NumPy's rule
//! (`y[i_axes[0], ..] = x[i_0, ..]`) for every element size; over every tiling the block
//! allows, on seeded random data, with the refusals a user can provoke named.

use std::ptr::null_mut;
use std::sync::OnceLock;

use kplace_abi::{Dtype, MemorySpace, Status};
use kplace_testkit::abi::*;
use rand::Rng;

const MEAN: &str = "blocks.mean";
const POWER: &str = "blocks.power";
const MAGNITUDE: &str = "blocks.magnitude";
const TRANSPOSE: &str = "blocks.transpose";

fn blocks() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the entry returns a pointer to a static table.
        Loaded::linked(unsafe { &*kplace_blocks::kplace_library_entry() })
    })
}

/// Row-major index of `index` in `dims`.
fn flat(index: &[u64], dims: &[u64]) -> usize {
    index
        .iter()
        .zip(dims)
        .fold(0u64, |acc, (&i, &d)| acc * d + i) as usize
}

/// Every index of `dims`, in row-major order.
fn indices(dims: &[u64]) -> Vec<Vec<u64>> {
    let mut all = vec![vec![]];
    for &d in dims {
        all = all
            .into_iter()
            .flat_map(|prefix: Vec<u64>| {
                (0..d).map(move |i| prefix.iter().copied().chain([i]).collect())
            })
            .collect();
    }
    all
}

/// `dims` without `axis`.
fn without(dims: &[u64], axis: usize) -> Vec<u64> {
    dims.iter()
        .enumerate()
        .filter(|&(a, _)| a != axis)
        .map(|(_, &d)| d)
        .collect()
}

/// The mean along `axis` of `value(element)` for every output index, each sum over the axis
/// written out index by index in double.
fn reference_mean(dims: &[u64], axis: usize, scale: f64, value: impl Fn(usize) -> f64) -> Vec<f64> {
    indices(&without(dims, axis))
        .into_iter()
        .map(|out| {
            let sum: f64 = (0..dims[axis])
                .map(|m| {
                    let mut index = out.clone();
                    index.insert(axis, m);
                    value(flat(&index, dims))
                })
                .sum();
            sum * scale / dims[axis] as f64
        })
        .collect()
}

/// A buffer's bytes.
fn bytes(b: &Buffer) -> Vec<u8> {
    let t = b.input(MemorySpace::HOST);
    // SAFETY: a buffer's data holds its descriptor's bytes, alive while `b` is.
    unsafe { std::slice::from_raw_parts(t.data.cast::<u8>(), t.desc.bytes as usize) }.to_vec()
}

/// The tilings a block reducing `axis` of `dims` takes: splits of axis 0 unless it is the
/// axis reduced.
fn tilings(dims: &[u64], axis: usize) -> Vec<Option<u64>> {
    if axis == 0 {
        vec![None]
    } else {
        splits(dims[0])
    }
}

#[test]
fn mean_averages_any_axis_in_double_over_every_tiling() {
    for (seed, dims) in [
        (1u64, vec![4u64, 3, 5]),
        (2, vec![2, 6]),
        (3, vec![4, 2, 3, 2]),
    ] {
        let len = dims.iter().product::<u64>() as usize;
        let values = random_f32(&mut rng(seed), len, -5.0, 10.0);
        let input = Buffer::from_f32(&dims, Dtype::F32, &values);
        for axis in 0..dims.len() {
            let out = without(&dims, axis);
            let axis_text = axis.to_string();
            for (scale, scale_text) in [(1.0, "1"), (-2.5, "-2.5")] {
                let params = [("axis", axis_text.as_str()), ("scale", scale_text)];
                let want = reference_mean(&dims, axis, scale, |i| f64::from(values[i]));
                for split in tilings(&dims, axis) {
                    let stage = Stage::new(desc(Dtype::F32, &dims), desc(Dtype::F32, &out))
                        .params(&params)
                        .tiled(split);
                    let mut output = Buffer::new(Dtype::F32, &out);
                    run(blocks(), MEAN, &stage, &input, &mut output, null_mut());
                    let err = max_rel_error(output.f32s(), &want);
                    assert!(
                        err < 1e-6,
                        "{dims:?} axis {axis} x{scale} {split:?}: {err:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn power_and_magnitude_along_an_axis_are_their_means() {
    let dims = [4u64, 5, 3];
    let len = dims.iter().product::<u64>() as usize;
    let parts = random_f32(&mut rng(4), 2 * len, -1.0, 1.0);
    let input = Buffer::from_f32(&dims, Dtype::CF32, &parts);
    let norm = |i: usize| {
        let (re, im) = (f64::from(parts[2 * i]), f64::from(parts[2 * i + 1]));
        re * re + im * im
    };
    for axis in 0..dims.len() {
        let out = without(&dims, axis);
        let axis_text = axis.to_string();
        let params = [("axis", axis_text.as_str())];
        for (name, want) in [
            (POWER, reference_mean(&dims, axis, 1.0, norm)),
            (
                MAGNITUDE,
                reference_mean(&dims, axis, 1.0, |i| norm(i).sqrt()),
            ),
        ] {
            for split in tilings(&dims, axis) {
                let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::F32, &out))
                    .params(&params)
                    .tiled(split);
                let mut output = Buffer::new(Dtype::F32, &out);
                run(blocks(), name, &stage, &input, &mut output, null_mut());
                let err = max_rel_error(output.f32s(), &want);
                assert!(err < 1e-6, "{name} axis {axis} {split:?}: {err:e}");
            }
        }
    }
}

/// A scene: four channels, each a tone of its own amplitude in its own bin; the power along
/// the time axis is each channel's tone power, and the mean over the channels of the power
/// spectrum holds each tone's power over 4 in its bin.
#[test]
fn a_channel_s_mean_power_is_its_tone_s_power() {
    let (samples, channels) = (32u64, 4u64);
    let amplitudes = [0.5f64, 0.25, 0.125, 1.0];
    let mut parts = Vec::new();
    for n in 0..samples {
        for (c, a) in amplitudes.iter().enumerate() {
            let phase = std::f64::consts::TAU * (c as f64 + 1.0) * 3.0 * n as f64 / 32.0;
            parts.extend([(a * phase.cos()) as f32, (a * phase.sin()) as f32]);
        }
    }
    let input = Buffer::from_f32(&[samples, channels], Dtype::CF32, &parts);
    let stage = Stage::new(
        desc(Dtype::CF32, &[samples, channels]),
        desc(Dtype::F32, &[channels]),
    )
    .params(&[("axis", "0")]);
    let mut power = Buffer::new(Dtype::F32, &[channels]);
    run(blocks(), POWER, &stage, &input, &mut power, null_mut());
    for (got, a) in power.f32s().iter().zip(amplitudes) {
        assert!(
            (f64::from(*got) - a * a).abs() < 1e-6,
            "{got} for amplitude {a}"
        );
    }
}

#[test]
fn transpose_moves_every_element_of_every_size_where_numpy_would() {
    let cases: [(Dtype, usize); 5] = [
        (Dtype::I8, 1),
        (Dtype::CI8, 2),
        (Dtype::F32, 4),
        (Dtype::CF32, 8),
        (Dtype::CF64, 16),
    ];
    let shapes: [(&[u64], Option<&str>, &[usize]); 5] = [
        (&[3, 5], None, &[1, 0]),
        (&[2, 3, 4], None, &[2, 1, 0]),
        (&[2, 3, 4], Some("1, 2, 0"), &[1, 2, 0]),
        (&[4, 1, 3, 2], Some("0, 3, 1, 2"), &[0, 3, 1, 2]),
        (&[6], Some("0"), &[0]),
    ];
    let mut rng = rng(5);
    for (dtype, size) in cases {
        for (dims, text, axes) in shapes {
            let len = dims.iter().product::<u64>() as usize;
            let data: Vec<u8> = (0..len * size).map(|_| rng.random()).collect();
            let input = Buffer::from_bytes(dtype, dims, &data);
            let out: Vec<u64> = axes.iter().map(|&a| dims[a]).collect();
            let params: Vec<(&str, &str)> = text.map(|t| ("axes", t)).into_iter().collect();
            let stage = Stage::new(desc(dtype, dims), desc(dtype, &out)).params(&params);
            let mut output = Buffer::new(dtype, &out);
            run(blocks(), TRANSPOSE, &stage, &input, &mut output, null_mut());
            // y[j] for j the input's index i permuted: j[a] = i[axes[a]].
            let mut want = vec![0u8; len * size];
            for i in indices(dims) {
                let j: Vec<u64> = axes.iter().map(|&a| i[a]).collect();
                let (from, to) = (flat(&i, dims) * size, flat(&j, &out) * size);
                want[to..to + size].copy_from_slice(&data[from..from + size]);
            }
            assert_eq!(bytes(&output), want, "{dtype:?} {dims:?} axes {axes:?}");
        }
    }
}

/// The transpose of the transpose is the input, and a time-major `[S, C]` becomes the
/// channel-major `[C, S]` whose rows the FFT's default axis takes.
#[test]
fn transposing_twice_is_the_identity() {
    let dims = [6u64, 4];
    let values = random_f32(&mut rng(6), 48, -1.0, 1.0);
    let input = Buffer::from_f32(&dims, Dtype::CF32, &values);
    let mut turned = Buffer::new(Dtype::CF32, &[4, 6]);
    let there = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &[4, 6]));
    run(blocks(), TRANSPOSE, &there, &input, &mut turned, null_mut());
    assert_eq!(
        &turned.f32s()[..4],
        &[values[0], values[1], values[8], values[9]]
    );
    let mut back = Buffer::new(Dtype::CF32, &dims);
    let again = Stage::new(desc(Dtype::CF32, &[4, 6]), desc(Dtype::CF32, &dims));
    run(blocks(), TRANSPOSE, &again, &turned, &mut back, null_mut());
    assert_eq!(back.bits(), input.bits());
}

#[test]
fn what_an_axis_cannot_be_is_refused_by_name() {
    let lib = blocks();
    let f = |dims: &[u64]| desc(Dtype::F32, dims);
    let cf = |dims: &[u64]| desc(Dtype::CF32, dims);
    let axis = |a: &'static str| -> &'static [(&'static str, &'static str)] {
        Box::leak(Box::new([("axis", a)]))
    };
    for (name, stage, phrase) in [
        (
            MEAN,
            Stage::new(f(&[4, 3]), f(&[4])).params(axis("2")),
            "parameter axis is 2, but input 0 (f32 [4, 3]) has 2 axes",
        ),
        (
            MEAN,
            Stage::new(f(&[4, 3]), f(&[4])).params(axis("-1")),
            "parameter axis: cannot parse \"-1\"",
        ),
        (
            MEAN,
            Stage::new(f(&[4, 3]), f(&[3])).params(axis("1")),
            "the input's dimensions without axis 1 (a rank of 2 or more), got f32 [4, 3] to f32 [3]",
        ),
        (
            MEAN,
            Stage::new(f(&[4, 3]), f(&[3])).split(0, 2),
            "cannot be split along axis 0: it is the axis reduced",
        ),
        (
            MEAN,
            Stage::new(f(&[4, 3]), f(&[4]))
                .params(axis("1"))
                .split(0, 3),
            "split tile of 3 does not divide the 4",
        ),
        (
            POWER,
            Stage::new(cf(&[4, 3]), f(&[4])).params(axis("3")),
            "parameter axis is 3, but input 0 (cf32 [4, 3]) has 2 axes",
        ),
        (
            POWER,
            Stage::new(cf(&[4, 3]), f(&[4, 3])).params(axis("1")),
            "takes cf32 [.., M, ..] to f32 [..], the input's dimensions without axis 1",
        ),
        (
            MAGNITUDE,
            Stage::new(cf(&[4, 3]), f(&[4])).params(&[("axes", "1")]),
            "unknown parameter axes; this kernel takes axis",
        ),
        (
            TRANSPOSE,
            Stage::new(f(&[4, 3]), f(&[3, 4])).params(&[("axes", "0, 0")]),
            "parameter axes must name every axis of input 0 (f32 [4, 3]) once, as a permutation of 0..2; got [0, 0]",
        ),
        (
            TRANSPOSE,
            Stage::new(f(&[4, 3]), f(&[3, 4])).params(&[("axes", "1, 0, 2")]),
            "as a permutation of 0..2; got [1, 0, 2]",
        ),
        (
            TRANSPOSE,
            Stage::new(f(&[4, 3]), f(&[4, 3])),
            "output 0 must be input 0's dimensions in the order of axes [1, 0], [3, 4]; got f32 [4, 3]",
        ),
        (
            TRANSPOSE,
            Stage::new(f(&[4, 3]), cf(&[3, 4])),
            "output 0 must be f32",
        ),
        (
            TRANSPOSE,
            Stage::new(f(&[4, 3]), f(&[3, 4])).split(0, 2),
            "cannot be split",
        ),
    ] {
        assert_refuses(lib, name, &stage, phrase);
    }
    // The refusal is an invalid argument, not a failure of the library.
    let stage = Stage::new(f(&[4, 3]), f(&[4])).params(axis("5"));
    assert_eq!(
        create(lib.kernel(MEAN), &stage).err().map(|(s, _)| s),
        Some(Status::INVALID_ARGUMENT)
    );
}
