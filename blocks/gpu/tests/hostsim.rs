//! The stateless CUDA blocks' launch sequences on the host simulator (their CUDA C compiled as
//! C++, rustfft standing in for cuFFT) against the CPU block library: every block equal bit
//! for bit (the FFT within 1e-5 of the row's peak, cuFFT's stand-in against FFTW), along every
//! axis it takes and over every tiling, on seeded random data; and the same refusals with the
//! same messages.

mod common;

use common::{at, cpu, plan, scratch, tiles};
use half::{bf16, f16};
use kplace_abi::export::kernel_entry;
use kplace_abi::{Dtype, Kernel, Scalar};
use kplace_blocks_gpu::beams::BeamsPlan;
use kplace_blocks_gpu::binary::{BinaryPlan, Product, Sum};
use kplace_blocks_gpu::convert::ConvertPlan;
use kplace_blocks_gpu::detect::{DetectPlan, Linear, Square};
use kplace_blocks_gpu::fft::FftPlan;
use kplace_blocks_gpu::gpu::PlainPlan;
use kplace_blocks_gpu::mean::MeanPlan;
use kplace_blocks_gpu::source::Function;
use kplace_blocks_gpu::transpose::TransposePlan;
use kplace_blocks_gpu::window::WindowPlan;
use kplace_cuda_hostsim::HostQueue;
use kplace_testkit::abi::{Buffer, Stage, desc, random_f32, rng, splits};
use rand::Rng;

static CPU_CONVERT: Kernel = kernel_entry::<kplace_blocks::Convert>();
static CPU_WINDOW: Kernel = kernel_entry::<kplace_blocks::Window>();
static CPU_FFT: Kernel = kernel_entry::<kplace_blocks::Fft>();
static CPU_POWER: Kernel = kernel_entry::<kplace_blocks::Power>();
static CPU_MAGNITUDE: Kernel = kernel_entry::<kplace_blocks::Magnitude>();
static CPU_MEAN: Kernel = kernel_entry::<kplace_blocks::Mean>();
static CPU_BEAMFORM: Kernel = kernel_entry::<kplace_blocks::Beamform>();
static CPU_COMBINE: Kernel = kernel_entry::<kplace_blocks::Combine>();
static CPU_TRANSPOSE: Kernel = kernel_entry::<kplace_blocks::Transpose>();
static CPU_ADD: Kernel = kernel_entry::<kplace_blocks::Add>();
static CPU_MULTIPLY: Kernel = kernel_entry::<kplace_blocks::Multiply>();

/// A cf32 or f32 buffer of `dims` with random parts in [-1, 1).
fn random(seed: u64, dtype: Dtype, dims: &[u64]) -> Buffer {
    let parts = if dtype == Dtype::CF32 { 2 } else { 1 };
    let len = parts * dims.iter().product::<u64>() as usize;
    Buffer::from_f32(dims, dtype, &random_f32(&mut rng(seed), len, -1.0, 1.0))
}

#[test]
fn the_simulator_runs_exactly_the_library_s_kernels_without_barriers() {
    kplace_cuda_hostsim::check_library::<Function>("kb_", |_| false).unwrap();
}

#[test]
fn power_and_magnitude_equal_the_cpu_library_for_every_tiling() {
    let queue = HostQueue::new();
    for (seed, dims) in [(1u64, vec![6u64, 5]), (2, vec![4, 3, 2]), (3, vec![7])] {
        let x = random(seed, Dtype::CF32, &dims);
        for split in splits(dims[0]) {
            let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::F32, &dims)).tiled(split);
            for (law, reference) in [("power", &CPU_POWER), ("magnitude", &CPU_MAGNITUDE)] {
                let mut want = Buffer::new(Dtype::F32, &dims);
                cpu(reference, &stage, &[&x], &mut want);
                let got = Buffer::new(Dtype::F32, &dims);
                for tile in tiles(&stage) {
                    // SAFETY: host buffers of the stage's sizes stand in for device memory.
                    unsafe {
                        if law == "power" {
                            let p = plan(&stage, DetectPlan::<Square>::plan).unwrap();
                            p.enqueue(&queue, at(&x), at(&got), tile)
                        } else {
                            let p = plan(&stage, DetectPlan::<Linear>::plan).unwrap();
                            p.enqueue(&queue, at(&x), at(&got), tile)
                        }
                    }
                    .unwrap();
                }
                assert_eq!(got.bits(), want.bits(), "{law} {dims:?} split {split:?}");
            }
        }
    }
}

#[test]
fn every_window_equals_the_cpu_library_for_every_tiling() {
    let queue = HostQueue::new();
    let dims = [4u64, 3, 16];
    let x = random(4, Dtype::CF32, &dims);
    for window in ["hann", "hamming", "blackman", "rect"] {
        let params = [("window", window)];
        for split in splits(dims[0]) {
            let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &dims))
                .params(&params)
                .tiled(split);
            let mut want = Buffer::new(Dtype::CF32, &dims);
            cpu(&CPU_WINDOW, &stage, &[&x], &mut want);
            let p = plan(&stage, WindowPlan::from_config).unwrap();
            let w = Buffer::from_bytes(
                Dtype::F64,
                &[dims[2]],
                &p.coefficients()
                    .iter()
                    .flat_map(|c| c.to_le_bytes())
                    .collect::<Vec<u8>>(),
            );
            let got = Buffer::new(Dtype::CF32, &dims);
            for tile in tiles(&stage) {
                // SAFETY: host buffers of the stage's sizes stand in for device memory.
                unsafe { p.enqueue(&queue, at(&x), at(&got), at(&w), tile) }.unwrap();
            }
            assert_eq!(got.bits(), want.bits(), "{window} split {split:?}");
        }
    }
}

/// `len` random values of `dtype`'s scalar as little-endian bytes: integers over their whole
/// range, floats in [-4, 4) (finite, so that both libraries' NaN payloads never matter).
fn random_bytes(seed: u64, scalar: Scalar, len: usize) -> Vec<u8> {
    let mut rng = rng(seed);
    let mut bytes = Vec::new();
    for _ in 0..len {
        let f: f32 = rng.random_range(-4.0..4.0);
        match scalar {
            Scalar::I8 => bytes.extend(rng.random::<i8>().to_le_bytes()),
            Scalar::I16 => bytes.extend(rng.random::<i16>().to_le_bytes()),
            Scalar::I32 => bytes.extend(rng.random::<i32>().to_le_bytes()),
            Scalar::F16 => bytes.extend(f16::from_f32(f).to_le_bytes()),
            Scalar::BF16 => bytes.extend(bf16::from_f32(f).to_le_bytes()),
            Scalar::F32 => bytes.extend(f.to_le_bytes()),
            Scalar::F64 => bytes.extend((f64::from(f) / 3.0).to_le_bytes()),
        }
    }
    bytes
}

#[test]
fn conversion_of_every_input_type_equals_the_cpu_library() {
    let queue = HostQueue::new();
    let dims = [4u64, 6];
    let names = [
        "ci8", "ci16", "cf16", "cf32", "cf64", "i8", "i16", "i32", "f16", "bf16", "f32", "f64",
    ];
    for (seed, name) in names.into_iter().enumerate() {
        let from = Dtype::from_name(name).expect("a dtype");
        let element = from.element().expect("numeric");
        let len = element.parts() * 24;
        let x = Buffer::from_bytes(from, &dims, &random_bytes(seed as u64, element.scalar, len));
        let outputs: &[Dtype] = if element.complex {
            &[Dtype::CF32]
        } else {
            &[Dtype::F32, Dtype::CF32]
        };
        for &to in outputs {
            for scale in ["1", "3.0517578125e-5", "0.3"] {
                let params = [("scale", scale)];
                for split in [None, Some(2)] {
                    let stage = Stage::new(desc(from, &dims), desc(to, &dims))
                        .params(&params)
                        .tiled(split);
                    let mut want = Buffer::new(to, &dims);
                    cpu(&CPU_CONVERT, &stage, &[&x], &mut want);
                    let p = plan(&stage, ConvertPlan::plan).unwrap();
                    let got = Buffer::new(to, &dims);
                    for tile in tiles(&stage) {
                        // SAFETY: host buffers of the stage's sizes stand in for device memory.
                        unsafe { p.enqueue(&queue, at(&x), at(&got), tile) }.unwrap();
                    }
                    assert_eq!(
                        got.bits(),
                        want.bits(),
                        "{name} to {to:?} x {scale}, {split:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_fft_agrees_with_the_cpu_library_along_every_axis_both_ways() {
    let queue = HostQueue::new();
    let dims = [4u64, 6, 8];
    let x = random(5, Dtype::CF32, &dims);
    for axis in ["0", "1", "2"] {
        for direction in ["forward", "inverse"] {
            let params = [("axis", axis), ("direction", direction), ("scale", "0.25")];
            let tilings = if axis == "0" {
                vec![None]
            } else {
                splits(dims[0])
            };
            for split in tilings {
                let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::CF32, &dims))
                    .params(&params)
                    .tiled(split);
                let mut want = Buffer::new(Dtype::CF32, &dims);
                cpu(&CPU_FFT, &stage, &[&x], &mut want);
                let p = plan(&stage, FftPlan::from_config).unwrap();
                let workspace = scratch(p.layout(0).bytes());
                let got = Buffer::new(Dtype::CF32, &dims);
                for tile in tiles(&stage) {
                    let ws = (at(&workspace), p.layout(0).bytes());
                    // SAFETY: host buffers of the stage's sizes stand in for device memory;
                    // tiles run one after another, so they share the workspace.
                    unsafe { p.enqueue(&queue, (at(&x), at(&got)), ws, 0, tile) }.unwrap();
                }
                let peak = want.f32s().iter().fold(0f32, |m, v| m.max(v.abs()));
                let worst = got
                    .f32s()
                    .iter()
                    .zip(want.f32s())
                    .fold(0f32, |m, (g, w)| m.max((g - w).abs()));
                assert!(
                    worst <= 1e-5 * peak,
                    "axis {axis} {direction} split {split:?}: error {worst:e} of peak {peak:e}"
                );
            }
        }
    }
}

/// `dims` without `axis`.
fn without(dims: &[u64], axis: usize) -> Vec<u64> {
    let mut out = dims.to_vec();
    out.remove(axis);
    out
}

#[test]
fn the_mean_along_every_axis_equals_the_cpu_library_for_every_tiling() {
    let queue = HostQueue::new();
    for (seed, dims) in [
        (6u64, vec![9u64, 4, 3]),
        (7, vec![2, 5]),
        (8, vec![4, 3, 2, 5]),
    ] {
        let x = random(seed, Dtype::F32, &dims);
        for axis in 0..dims.len() {
            let out = without(&dims, axis);
            let axis_text = axis.to_string();
            let params = [("axis", axis_text.as_str()), ("scale", "3")];
            let tilings = if axis == 0 {
                vec![None]
            } else {
                splits(dims[0])
            };
            for split in tilings {
                let stage = Stage::new(desc(Dtype::F32, &dims), desc(Dtype::F32, &out))
                    .params(&params)
                    .tiled(split);
                let mut want = Buffer::new(Dtype::F32, &out);
                cpu(&CPU_MEAN, &stage, &[&x], &mut want);
                let p = plan(&stage, MeanPlan::plan).unwrap();
                let got = Buffer::new(Dtype::F32, &out);
                for tile in tiles(&stage) {
                    // SAFETY: host buffers of the stage's sizes stand in for device memory.
                    unsafe { p.enqueue(&queue, at(&x), at(&got), tile) }.unwrap();
                }
                assert_eq!(got.bits(), want.bits(), "{dims:?} axis {axis} {split:?}");
            }
        }
    }
}

#[test]
fn power_and_magnitude_along_an_axis_equal_the_cpu_library_for_every_tiling() {
    let queue = HostQueue::new();
    let dims = [4u64, 3, 6];
    let x = random(9, Dtype::CF32, &dims);
    for axis in 0..dims.len() {
        let out = without(&dims, axis);
        let axis_text = axis.to_string();
        let params = [("axis", axis_text.as_str())];
        let tilings = if axis == 0 {
            vec![None]
        } else {
            splits(dims[0])
        };
        for split in tilings {
            let stage = Stage::new(desc(Dtype::CF32, &dims), desc(Dtype::F32, &out))
                .params(&params)
                .tiled(split);
            for (law, reference) in [("power", &CPU_POWER), ("magnitude", &CPU_MAGNITUDE)] {
                let mut want = Buffer::new(Dtype::F32, &out);
                cpu(reference, &stage, &[&x], &mut want);
                let got = Buffer::new(Dtype::F32, &out);
                for tile in tiles(&stage) {
                    // SAFETY: host buffers of the stage's sizes stand in for device memory.
                    unsafe {
                        if law == "power" {
                            let p = plan(&stage, DetectPlan::<Square>::plan).unwrap();
                            p.enqueue(&queue, at(&x), at(&got), tile)
                        } else {
                            let p = plan(&stage, DetectPlan::<Linear>::plan).unwrap();
                            p.enqueue(&queue, at(&x), at(&got), tile)
                        }
                    }
                    .unwrap();
                }
                assert_eq!(got.bits(), want.bits(), "{law} axis {axis} {split:?}");
            }
        }
    }
}

#[test]
fn the_transpose_of_every_element_size_equals_the_cpu_library() {
    let queue = HostQueue::new();
    let dtypes = [Dtype::I8, Dtype::CI8, Dtype::F32, Dtype::CF32, Dtype::CF64];
    let shapes: [(&[u64], &str); 4] = [
        (&[3, 5], "1, 0"),
        (&[2, 3, 4], "2, 0, 1"),
        (&[4, 1, 3, 2], "0, 3, 1, 2"),
        (&[2, 2, 2, 2, 3], "4, 3, 2, 1, 0"),
    ];
    for (seed, dtype) in dtypes.into_iter().enumerate() {
        let element = dtype.element().expect("numeric");
        for (dims, axes) in shapes {
            let order: Vec<usize> = axes.split(", ").map(|a| a.parse().unwrap()).collect();
            let out: Vec<u64> = order.iter().map(|&a| dims[a]).collect();
            let len = dims.iter().product::<u64>() as usize * element.parts();
            let x =
                Buffer::from_bytes(dtype, dims, &random_bytes(seed as u64, element.scalar, len));
            let params = [("axes", axes)];
            let stage = Stage::new(desc(dtype, dims), desc(dtype, &out)).params(&params);
            let mut want = Buffer::new(dtype, &out);
            cpu(&CPU_TRANSPOSE, &stage, &[&x], &mut want);
            let p = plan(&stage, TransposePlan::from_config).unwrap();
            let table = p.table();
            let words: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
            let table = Buffer::from_bytes(Dtype::F64, &[table.len() as u64], &words);
            let got = Buffer::new(dtype, &out);
            // SAFETY: host buffers of the stage's sizes stand in for device memory.
            unsafe { p.enqueue(&queue, at(&x), at(&got), at(&table)) }.unwrap();
            assert_eq!(bytes(&got), bytes(&want), "{dtype:?} {dims:?} axes {axes}");
        }
    }
}

/// A buffer's bytes (a tensor of 1- or 2-byte elements may end within a 4-byte word).
fn bytes(b: &Buffer) -> Vec<u8> {
    let t = b.input(kplace_abi::MemorySpace::HOST);
    // SAFETY: a buffer's data holds its descriptor's bytes, alive while `b` is.
    unsafe { std::slice::from_raw_parts(t.data.cast::<u8>(), t.desc.bytes as usize) }.to_vec()
}

#[test]
fn sums_and_products_equal_the_cpu_library_for_every_operand_and_tiling() {
    let queue = HostQueue::new();
    let dims = [4u64, 3, 5];
    let cases = [
        ("add", Dtype::CF32, Dtype::CF32),
        ("add", Dtype::F32, Dtype::F32),
        ("multiply", Dtype::CF32, Dtype::CF32),
        ("multiply", Dtype::CF32, Dtype::F32),
        ("multiply", Dtype::F32, Dtype::F32),
    ];
    let shapes: [&[u64]; 4] = [&[4, 3, 5], &[3, 5], &[5], &[1]];
    for (seed, (op, xt, wt)) in cases.into_iter().enumerate() {
        let x = random(40 + seed as u64, xt, &dims);
        for w_dims in shapes {
            let w = random(50 + seed as u64, wt, w_dims);
            for conjugate in ["false", "true"] {
                let params = [("conjugate", conjugate)];
                for split in splits(dims[0]) {
                    let mut stage = Stage::new(desc(xt, &dims), desc(xt, &dims)).tiled(split);
                    stage.inputs.push(w.desc);
                    if op == "multiply" {
                        stage = stage.params(&params);
                    }
                    let reference = if op == "add" { &CPU_ADD } else { &CPU_MULTIPLY };
                    let mut want = Buffer::new(xt, &dims);
                    cpu(reference, &stage, &[&x, &w], &mut want);
                    let got = Buffer::new(xt, &dims);
                    for tile in tiles(&stage) {
                        let ports = (at(&x), at(&w), at(&got));
                        // SAFETY: host buffers of the stage's sizes stand in for device memory.
                        unsafe {
                            if op == "add" {
                                let p = plan(&stage, BinaryPlan::<Sum>::plan).unwrap();
                                p.enqueue(&queue, ports, tile)
                            } else {
                                let p = plan(&stage, BinaryPlan::<Product>::plan).unwrap();
                                p.enqueue(&queue, ports, tile)
                            }
                        }
                        .unwrap();
                    }
                    assert_eq!(
                        got.bits(),
                        want.bits(),
                        "{op} {xt:?} by {wt:?} {w_dims:?} conj {conjugate} {split:?}"
                    );
                }
                if op == "add" {
                    break;
                }
            }
        }
    }
}

#[test]
fn both_beamformers_equal_the_cpu_library_for_every_tiling() {
    let queue = HostQueue::new();
    let (rows, snapshots, channels, beams) = (4u64, 5u64, 8u64, 3u64);
    let x = random(8, Dtype::CF32, &[rows, snapshots, channels]);
    let weights = random(9, Dtype::CF32, &[beams, channels]);
    let params = [("angles", "-30, 0, 14.4775"), ("spacing", "0.45")];
    for split in splits(rows) {
        let input = desc(Dtype::CF32, &[rows, snapshots, channels]);
        let output = desc(Dtype::CF32, &[rows, snapshots, beams]);
        // blocks.beamform: the steering weights, uploaded as doubles.
        let stage = Stage::new(input, output).params(&params).tiled(split);
        let mut want = Buffer::new(Dtype::CF32, &[rows, snapshots, beams]);
        cpu(&CPU_BEAMFORM, &stage, &[&x], &mut want);
        let (p, steering) = plan(&stage, BeamsPlan::steered).unwrap();
        let bytes: Vec<u8> = steering.iter().flat_map(|w| w.to_le_bytes()).collect();
        let w = Buffer::from_bytes(Dtype::F64, &[steering.len() as u64], &bytes);
        let got = Buffer::new(Dtype::CF32, &[rows, snapshots, beams]);
        for tile in tiles(&stage) {
            // SAFETY: host buffers of the stage's sizes stand in for device memory.
            unsafe { p.enqueue(&queue, at(&x), at(&got), at(&w), tile) }.unwrap();
        }
        assert_eq!(got.bits(), want.bits(), "beamform split {split:?}");

        // blocks.combine: the weights of input 1.
        let mut stage = Stage::new(input, output).tiled(split);
        stage.inputs.push(weights.desc);
        let mut want = Buffer::new(Dtype::CF32, &[rows, snapshots, beams]);
        cpu(&CPU_COMBINE, &stage, &[&x, &weights], &mut want);
        let (p, _) = plan(&stage, BeamsPlan::weighted).unwrap();
        let got = Buffer::new(Dtype::CF32, &[rows, snapshots, beams]);
        for tile in tiles(&stage) {
            // SAFETY: host buffers of the stage's sizes stand in for device memory.
            unsafe { p.enqueue(&queue, at(&x), at(&got), at(&weights), tile) }.unwrap();
        }
        assert_eq!(got.bits(), want.bits(), "combine split {split:?}");
    }
}

#[test]
fn the_cuda_blocks_refuse_what_the_cpu_blocks_refuse_in_the_same_words() {
    let refuse = |stage: &Stage<'_>, phrase: &str| {
        let message = plan(stage, MeanPlan::plan).unwrap_err().message;
        assert!(message.contains(phrase), "{message}");
    };
    let mean = Stage::new(desc(Dtype::F32, &[4, 3]), desc(Dtype::F32, &[3]));
    refuse(&mean.clone().split(0, 2), "cannot be split");
    refuse(
        &Stage::new(desc(Dtype::F32, &[4, 3]), desc(Dtype::F32, &[4])),
        "takes f32 [.., M, ..]",
    );
    let params = [("window", "kaiser")];
    let window = Stage::new(desc(Dtype::CF32, &[2, 4]), desc(Dtype::CF32, &[2, 4])).params(&params);
    let message = plan(&window, WindowPlan::from_config).unwrap_err().message;
    assert!(
        message.contains("expected rect, hann, hamming or blackman"),
        "{message}"
    );
    let axes = [("axes", "0, 0")];
    let turned = Stage::new(desc(Dtype::F32, &[4, 3]), desc(Dtype::F32, &[3, 4])).params(&axes);
    let message = plan(&turned, TransposePlan::from_config)
        .unwrap_err()
        .message;
    assert!(
        message.contains("parameter axes must name every axis of input 0 (f32 [4, 3]) once"),
        "{message}"
    );
    let mut product = Stage::new(desc(Dtype::CF32, &[4, 5]), desc(Dtype::CF32, &[4, 5]));
    product.inputs.push(desc(Dtype::CF32, &[4]));
    let message = plan(&product, BinaryPlan::<Product>::plan)
        .unwrap_err()
        .message;
    assert!(
        message.contains("input 1 must have input 0's last dimensions"),
        "{message}"
    );
    let power = [("axis", "2")];
    let mean_power = Stage::new(desc(Dtype::CF32, &[4, 3]), desc(Dtype::F32, &[4])).params(&power);
    let message = plan(&mean_power, DetectPlan::<Square>::plan)
        .unwrap_err()
        .message;
    assert!(
        message.contains("parameter axis is 2, but input 0"),
        "{message}"
    );
    // Host memory is refused: the CUDA blocks read and write device memory.
    let message = Stage::new(desc(Dtype::CF32, &[2, 4]), desc(Dtype::F32, &[2, 4]))
        .with_config(DetectPlan::<Square>::plan)
        .unwrap_err()
        .message;
    assert!(message.contains("device"), "{message}");
}
