//! Tests of the C kernels in `kernels/spectrogram.c`, through the ABI only.
//!
//! Each test binary compiles the C file with the system C compiler (`$CC`, else `cc`) into a
//! temporary directory with the strict flags the library promises to build under, loads it
//! with `dlopen`, and calls `kplace_library_entry` and the table's create, workspace_bytes,
//! launch and destroy exactly as the runtime does: descriptors with the sizes the runtime
//! computes, 64-byte aligned buffers, one launch per tile. Results are compared with direct
//! f64 computations (rustfft for the FFT). A second build with `-DSPECTROGRAM_FAULT_BIN=5`
//! checks the deliberately wrong kernel used by the reference-check tests. The last test loads
//! the library cargo built, target/<profile>/libkplace_spectrogram.so, which `cargo test` does
//! not rebuild: it fails, saying so, when that file is older than its sources (run `cargo build
//! -p kplace-spectrogram` first).
//!
//! Every random input comes from a seeded PCG, so the tests are deterministic. The helpers that
//! drive a library through the ABI are in `kplace_testkit::abi`, shared with the GPU library's tests.

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::OnceLock;

use kplace_abi::{ABI_VERSION, DeviceKind, Dtype, MemorySpace, Status, Tensor, TensorDesc, Tile};
use kplace_testkit::abi::*;
use kplace_testkit::spectrogram::*;
use rand::SeedableRng;
use rand_pcg::Pcg64;
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

// ---------------------------------------------------------------------------------------------
// The builds
// ---------------------------------------------------------------------------------------------

/// The library as shipped.
fn good() -> &'static Loaded {
    cpu()
}

/// The deliberately wrong build: `spectrogram.average` multiplies bin 5 by 1.01.
fn faulty() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| build_cpu(&["SPECTROGRAM_FAULT_BIN=5"]))
}

// ---------------------------------------------------------------------------------------------
// Inputs and references
// ---------------------------------------------------------------------------------------------

/// The periodic Hann window over `n`, in f64.
fn hann(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
        .collect()
}

/// Each row of `iq` windowed and transformed by rustfft in f64.
fn reference_fft(iq: &[i16], m: usize, n: usize) -> Vec<Complex<f64>> {
    let window = hann(n);
    let fft = FftPlanner::<f64>::new().plan_fft_forward(n);
    let mut out: Vec<Complex<f64>> = (0..m * n)
        .map(|i| {
            let w = window[i % n];
            Complex::new(f64::from(iq[2 * i]) * w, f64::from(iq[2 * i + 1]) * w)
        })
        .collect();
    for row in out.chunks_exact_mut(n) {
        fft.process(row);
    }
    out
}

/// The largest error of each row of `got` (interleaved cf32) against `want`, relative to the
/// row's peak magnitude.
fn fft_row_errors(got: &[f32], want: &[Complex<f64>], n: usize) -> Vec<f64> {
    want.chunks_exact(n)
        .zip(got.chunks_exact(2 * n))
        .map(|(want, got)| {
            let peak = want.iter().map(|z| z.norm()).fold(0.0, f64::max);
            let err = want
                .iter()
                .zip(got.chunks_exact(2))
                .map(|(w, g)| (Complex::new(f64::from(g[0]), f64::from(g[1])) - w).norm())
                .fold(0.0, f64::max);
            assert!(err.is_finite(), "non-finite output");
            err / peak
        })
        .collect()
}

/// `spectrogram.average`'s definition in f64: the mean over rows, times `scale`.
fn reference_average(x: &[f32], m: usize, n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|k| (0..m).map(|r| f64::from(x[r * n + k])).sum::<f64>() / m as f64 * scale)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

#[test]
fn table_lists_three_cpu_kernels() {
    let lib = good();
    assert_eq!(lib.table.abi_version, ABI_VERSION);
    assert_eq!(text(lib.table.name), "kplace-spectrogram");
    let names: Vec<&str> = lib.kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(names, [FFT, POWER, AVERAGE]);
    for k in lib.kernels() {
        assert_eq!(k.device, DeviceKind::CPU, "{}", text(k.name));
        assert_eq!(k.memory, MemorySpace::HOST, "{}", text(k.name));
        assert_eq!((k.n_inputs, k.n_outputs), (1, 1), "{}", text(k.name));
        assert!(k.create.is_some() && k.workspace_bytes.is_some());
        assert!(k.launch.is_some() && k.destroy.is_some());
        // destroy(NULL) is a no-op.
        // SAFETY: the ABI allows a null state.
        unsafe { (k.destroy.unwrap())(std::ptr::null_mut()) };
    }
}

#[test]
fn the_kernels_need_no_workspace() {
    let (m, n) = (4, 8);
    for (name, input, output) in [
        (FFT, desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])),
        (POWER, desc(Dtype::CF32, &[m, n]), desc(Dtype::F32, &[m, n])),
        (AVERAGE, desc(Dtype::F32, &[m, n]), desc(Dtype::F32, &[n])),
    ] {
        let state = create(good().kernel(name), &Stage::new(input, output))
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(state.workspace_bytes(), 0, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// spectrogram.fft
// ---------------------------------------------------------------------------------------------

#[test]
fn fft_matches_rustfft_for_every_tiling() {
    let mut rng = Pcg64::seed_from_u64(0x5eed_0001);
    for n in [8u64, 64, 1024] {
        for m in [4u64, 16] {
            let iq = random_ci16(&mut rng, m as usize, n as usize);
            let want = reference_fft(&iq, m as usize, n as usize);
            let input = Buffer::from_i16(&[m, n], &iq);
            let stage = || Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n]));
            for split in splits(m) {
                let stage = stage().tiled(split);
                let mut output = Buffer::new(Dtype::CF32, &[m, n]);
                run(good(), FFT, &stage, &input, &mut output, null_mut());
                let worst = fft_row_errors(output.f32s(), &want, n as usize)
                    .into_iter()
                    .fold(0.0, f64::max);
                assert!(
                    worst < 1e-5,
                    "N={n} M={m} split {split:?}: error {worst:e} of the row's peak"
                );
            }
        }
    }
}

#[test]
fn fft_handles_the_smallest_and_largest_n() {
    let mut rng = Pcg64::seed_from_u64(0x5eed_0002);
    for (m, n) in [(3u64, 2u64), (2, 65536)] {
        let iq = random_ci16(&mut rng, m as usize, n as usize);
        let want = reference_fft(&iq, m as usize, n as usize);
        let input = Buffer::from_i16(&[m, n], &iq);
        let mut output = Buffer::new(Dtype::CF32, &[m, n]);
        let stage = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])).split(0, 1);
        run(good(), FFT, &stage, &input, &mut output, null_mut());
        let worst = fft_row_errors(output.f32s(), &want, n as usize)
            .into_iter()
            .fold(0.0, f64::max);
        assert!(worst < 1e-5, "N={n}: error {worst:e} of the row's peak");
    }
}

#[test]
fn fft_of_a_tone_peaks_at_its_bin_with_the_window_sidelobes() {
    // x[n] = A exp(2 pi i 3 n / N): the Hann window spreads it over bins 2, 3, 4 with weights
    // -A N / 4, A N / 2, -A N / 4, and nothing elsewhere: a check of the sign convention and
    // the window that does not lean on rustfft.
    let (m, n, a) = (1u64, 64usize, 1000.0f64);
    let iq: Vec<i16> = (0..n)
        .flat_map(|i| {
            let phase = 2.0 * std::f64::consts::PI * 3.0 * i as f64 / n as f64;
            [
                (a * phase.cos()).round() as i16,
                (a * phase.sin()).round() as i16,
            ]
        })
        .collect();
    let input = Buffer::from_i16(&[m, n as u64], &iq);
    let mut output = Buffer::new(Dtype::CF32, &[m, n as u64]);
    let stage = Stage::new(
        desc(Dtype::CI16, &[m, n as u64]),
        desc(Dtype::CF32, &[m, n as u64]),
    );
    run(good(), FFT, &stage, &input, &mut output, null_mut());
    let y = output.f32s();
    let expect = |k: usize| match k {
        3 => a * n as f64 / 2.0,
        2 | 4 => -a * n as f64 / 4.0,
        _ => 0.0,
    };
    for k in 0..n {
        let (re, im) = (f64::from(y[2 * k]), f64::from(y[2 * k + 1]));
        // Rounding the samples to int16 leaves a little energy everywhere: at most
        // sqrt(2) / 2 per sample, so less than N per bin (the peak is 1000 N / 2).
        assert!(
            (re - expect(k)).abs() < n as f64 && im.abs() < n as f64,
            "bin {k}: {re} + {im}i, expected {}",
            expect(k)
        );
    }
}

#[test]
fn fft_tile_writes_only_its_rows() {
    let (m, n) = (8u64, 16u64);
    let mut rng = Pcg64::seed_from_u64(0x5eed_0003);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let input = Buffer::from_i16(&[m, n], &iq);
    let mut output = Buffer::new(Dtype::CF32, &[m, n]);
    let stage = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])).split(0, 2);
    let state = create(good().kernel(FFT), &stage).unwrap();
    state
        .launch(
            input.input(MemorySpace::HOST),
            output.output(MemorySpace::HOST),
            Tile { begin: 4, count: 2 },
            null_mut(),
        )
        .unwrap();
    let row = 2 * n as usize;
    for (r, values) in output.f32s().chunks_exact(row).enumerate() {
        let untouched = values.iter().all(|v| v.to_bits() == u32::MAX);
        assert_eq!(untouched, !(4..6).contains(&r), "row {r}");
    }
}

#[test]
fn fft_tiles_run_concurrently_on_one_state() {
    let (m, n) = (32u64, 256u64);
    let mut rng = Pcg64::seed_from_u64(0x5eed_0004);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let input = Buffer::from_i16(&[m, n], &iq);
    let stage = || Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])).split(0, 1);
    let mut sequential = Buffer::new(Dtype::CF32, &[m, n]);
    run(good(), FFT, &stage(), &input, &mut sequential, null_mut());

    let mut concurrent = Buffer::new(Dtype::CF32, &[m, n]);
    let state = create(good().kernel(FFT), &stage()).unwrap();
    // Raw addresses cross the threads; each thread launches its own tiles (disjoint rows).
    let (in_addr, out_addr) = (
        input.input(MemorySpace::HOST).data as usize,
        concurrent.output(MemorySpace::HOST).data as usize,
    );
    let (in_desc, out_desc) = (input.desc, concurrent.desc);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let state = &state;
            s.spawn(move || {
                for row in (t..m).step_by(4) {
                    let input = Tensor {
                        desc: in_desc,
                        data: in_addr as *mut c_void,
                    };
                    let output = Tensor {
                        desc: out_desc,
                        data: out_addr as *mut c_void,
                    };
                    state
                        .launch(
                            input,
                            output,
                            Tile {
                                begin: row,
                                count: 1,
                            },
                            null_mut(),
                        )
                        .unwrap();
                }
            });
        }
    });
    drop(state);
    let bits = |b: &Buffer| b.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&concurrent), bits(&sequential));
}

// ---------------------------------------------------------------------------------------------
// spectrogram.power and spectrogram.average
// ---------------------------------------------------------------------------------------------

#[test]
fn power_matches_f64() {
    let mut rng = Pcg64::seed_from_u64(0x5eed_0005);
    for (m, n) in [(4u64, 8u64), (16, 1000)] {
        let x = random_f32(&mut rng, (2 * m * n) as usize, -1.0e4, 1.0e4);
        let want: Vec<f64> = x
            .chunks_exact(2)
            .map(|z| f64::from(z[0]).powi(2) + f64::from(z[1]).powi(2))
            .collect();
        let input = Buffer::from_f32(&[m, n], Dtype::CF32, &x);
        for split in splits(m) {
            let stage =
                Stage::new(desc(Dtype::CF32, &[m, n]), desc(Dtype::F32, &[m, n])).tiled(split);
            let mut output = Buffer::new(Dtype::F32, &[m, n]);
            run(good(), POWER, &stage, &input, &mut output, null_mut());
            let err = max_rel_error(output.f32s(), &want);
            assert!(
                err < 1e-6,
                "M={m} N={n} split {split:?}: relative error {err:e}"
            );
        }
    }
}

#[test]
fn average_matches_f64_with_and_without_scale() {
    let mut rng = Pcg64::seed_from_u64(0x5eed_0006);
    for (m, n) in [(1u64, 7u64), (16, 1000), (3, 256)] {
        let x = random_f32(&mut rng, (m * n) as usize, 0.0, 1.0e6);
        let input = Buffer::from_f32(&[m, n], Dtype::F32, &x);
        for (params, scale) in [
            (&[][..], 1.0),
            (&[("scale", "2.5")][..], 2.5),
            (&[("scale", " 0.25 ")][..], 0.25),
            (&[("scale", "1e-3")][..], 1e-3),
        ] {
            let stage =
                Stage::new(desc(Dtype::F32, &[m, n]), desc(Dtype::F32, &[n])).params(params);
            let mut output = Buffer::new(Dtype::F32, &[n]);
            run(good(), AVERAGE, &stage, &input, &mut output, null_mut());
            let want = reference_average(&x, m as usize, n as usize, scale);
            let err = max_rel_error(output.f32s(), &want);
            assert!(err < 1e-6, "M={m} N={n} {params:?}: relative error {err:e}");
        }
    }
}

#[test]
fn the_chain_gives_the_averaged_power_spectrum() {
    // fft -> power -> average, against the Welch-like PSD computed in f64 from the samples.
    let (m, n) = (16u64, 256u64);
    let mut rng = Pcg64::seed_from_u64(0x5eed_0007);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let samples = Buffer::from_i16(&[m, n], &iq);
    let mut spectra = Buffer::new(Dtype::CF32, &[m, n]);
    let mut power = Buffer::new(Dtype::F32, &[m, n]);
    let mut psd = Buffer::new(Dtype::F32, &[n]);
    let lib = good();
    let fft = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])).split(0, 4);
    run(lib, FFT, &fft, &samples, &mut spectra, null_mut());
    let pow = Stage::new(desc(Dtype::CF32, &[m, n]), desc(Dtype::F32, &[m, n])).split(0, 4);
    run(lib, POWER, &pow, &spectra, &mut power, null_mut());
    let avg =
        Stage::new(desc(Dtype::F32, &[m, n]), desc(Dtype::F32, &[n])).params(&[("scale", "0.5")]);
    run(lib, AVERAGE, &avg, &power, &mut psd, null_mut());

    let bins = reference_fft(&iq, m as usize, n as usize);
    let want: Vec<f64> = (0..n as usize)
        .map(|k| {
            (0..m as usize)
                .map(|r| bins[r * n as usize + k].norm_sqr())
                .sum::<f64>()
                / m as f64
                * 0.5
        })
        .collect();
    let peak = want.iter().copied().fold(0.0, f64::max);
    let err = psd
        .f32s()
        .iter()
        .zip(&want)
        .map(|(&g, &w)| (f64::from(g) - w).abs() / peak)
        .fold(0.0, f64::max);
    assert!(err < 1e-5, "PSD error {err:e} of its peak");
}

// ---------------------------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------------------------

/// Asserts that create refuses `stage` with INVALID_ARGUMENT and a message containing `phrase`
/// and naming the kernel.
fn refuses(name: &str, stage: Stage<'_>, phrase: &str) {
    assert_refuses(good(), name, &stage, phrase);
}

fn on_device(mut d: TensorDesc) -> TensorDesc {
    d.memory = MemorySpace::DEVICE;
    d
}

#[test]
fn fft_refuses_what_it_cannot_take() {
    let ci16 = |dims: &[u64]| desc(Dtype::CI16, dims);
    let cf32 = |dims: &[u64]| desc(Dtype::CF32, dims);
    let ok = || Stage::new(ci16(&[4, 8]), cf32(&[4, 8]));
    assert!(create(good().kernel(FFT), &ok()).is_ok());
    assert!(create(good().kernel(FFT), &ok().split(0, 2)).is_ok());

    refuses(
        FFT,
        Stage::new(cf32(&[4, 8]), cf32(&[4, 8])),
        "input 0 must be ci16 [M, N], not cf32",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), desc(Dtype::F32, &[4, 8])),
        "output 0 must be cf32",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[32]), cf32(&[32])),
        "input 0 must have rank 2",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), cf32(&[4 * 8])),
        "output 0 must have rank 2",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), cf32(&[4, 16])),
        "output 0 must have shape [4, 8]",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), cf32(&[2, 8])),
        "output 0 must have shape [4, 8]",
    );
    refuses(
        FFT,
        Stage::new(on_device(ci16(&[4, 8])), cf32(&[4, 8])),
        "input 0 must be in host memory",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), on_device(cf32(&[4, 8]))),
        "output 0 must be in host memory",
    );
    refuses(
        FFT,
        Stage::new(short_by(ci16(&[4, 8]), 4), cf32(&[4, 8])),
        "input 0 holds 124 bytes, fewer than the 128",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), short_by(cf32(&[4, 8]), 1)),
        "output 0 holds 255 bytes, fewer than the 256",
    );
    for n in [1u64, 12, 100, 131072] {
        refuses(
            FFT,
            Stage::new(ci16(&[4, n]), cf32(&[4, n])),
            &format!("N (input 0's row length) must be a power of two from 2 to 65536, not {n}"),
        );
    }
    refuses(
        FFT,
        ok().split(1, 4),
        "spectrogram.fft splits only along axis 0 (rows), not axis 1",
    );
    refuses(
        FFT,
        ok().split(0, 3),
        "a split tile of 3 rows does not divide M = 4",
    );
    refuses(
        FFT,
        ok().params(&[("planner", "estimate")]),
        "unknown parameter planner; spectrogram.fft takes no parameters",
    );
    let mut two_inputs = ok();
    two_inputs.inputs.push(ci16(&[4, 8]));
    refuses(
        FFT,
        two_inputs,
        "expected 1 input and 1 output, got 2 and 1",
    );
}

#[test]
fn power_refuses_what_it_cannot_take() {
    let cf32 = |dims: &[u64]| desc(Dtype::CF32, dims);
    let f32 = |dims: &[u64]| desc(Dtype::F32, dims);
    let ok = || Stage::new(cf32(&[4, 6]), f32(&[4, 6]));
    assert!(create(good().kernel(POWER), &ok()).is_ok());
    assert!(create(good().kernel(POWER), &ok().split(0, 1)).is_ok());

    refuses(
        POWER,
        Stage::new(desc(Dtype::CI16, &[4, 6]), f32(&[4, 6])),
        "input 0 must be cf32 [M, N], not ci16",
    );
    refuses(
        POWER,
        Stage::new(cf32(&[4, 6]), cf32(&[4, 6])),
        "output 0 must be f32 [M, N], input 0's M and N, not cf32",
    );
    refuses(
        POWER,
        Stage::new(cf32(&[4, 6]), f32(&[6, 4])),
        "output 0 must have shape [4, 6]",
    );
    refuses(
        POWER,
        Stage::new(cf32(&[2, 4, 6]), f32(&[2, 4, 6])),
        "input 0 must have rank 2",
    );
    refuses(
        POWER,
        Stage::new(cf32(&[4, 6]), short_by(f32(&[4, 6]), 4)),
        "output 0 holds 92 bytes, fewer than the 96",
    );
    refuses(
        POWER,
        ok().split(1, 2),
        "spectrogram.power splits only along axis 0 (rows), not axis 1",
    );
    refuses(
        POWER,
        ok().split(0, 3),
        "a split tile of 3 rows does not divide M = 4",
    );
    refuses(
        POWER,
        ok().params(&[("scale", "2")]),
        "unknown parameter scale; spectrogram.power takes no parameters",
    );
}

#[test]
fn average_refuses_what_it_cannot_take() {
    let f32 = |dims: &[u64]| desc(Dtype::F32, dims);
    let ok = || Stage::new(f32(&[4, 8]), f32(&[8]));
    assert!(create(good().kernel(AVERAGE), &ok()).is_ok());

    refuses(
        AVERAGE,
        Stage::new(desc(Dtype::CF32, &[4, 8]), f32(&[8])),
        "input 0 must be f32 [M, N], not cf32",
    );
    refuses(
        AVERAGE,
        Stage::new(f32(&[4, 8]), f32(&[4, 8])),
        "output 0 must have rank 1 (f32 [N], input 0's N)",
    );
    refuses(
        AVERAGE,
        Stage::new(f32(&[4, 8]), f32(&[9])),
        "output 0 must have shape [8] ([N], input 0's N), not [9]",
    );
    refuses(
        AVERAGE,
        Stage::new(f32(&[4, 8]), on_device(f32(&[8]))),
        "output 0 must be in host memory",
    );
    refuses(
        AVERAGE,
        ok().split(0, 1),
        "spectrogram.average cannot be split",
    );
    refuses(
        AVERAGE,
        ok().split(1, 8),
        "cannot be split (every output bin sums all M rows), but the stage splits axis 1",
    );
    refuses(
        AVERAGE,
        ok().params(&[("scal", "2")]),
        "unknown parameter scal; spectrogram.average takes only scale",
    );
    for bad in ["0", "-1", "abc", "", "inf", "nan", "1e999", "2x", "0x"] {
        refuses(
            AVERAGE,
            ok().params(&[("scale", bad)]),
            &format!("parameter scale: \"{bad}\" is not a finite positive number"),
        );
    }
}

#[test]
fn launch_refuses_a_tile_outside_the_rows() {
    let (m, n) = (4u64, 8u64);
    let input = Buffer::new(Dtype::CI16, &[m, n]);
    let mut output = Buffer::new(Dtype::CF32, &[m, n]);
    let stage = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])).split(0, 1);
    let state = create(good().kernel(FFT), &stage).unwrap();
    let (status, text) = state
        .launch(
            input.input(MemorySpace::HOST),
            output.output(MemorySpace::HOST),
            Tile { begin: 4, count: 1 },
            null_mut(),
        )
        .unwrap_err();
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(
        text.contains("tile [4, +1) is outside axis 0 (M = 4)"),
        "{text}"
    );
}

#[test]
fn messages_are_truncated_and_terminated() {
    let stage =
        Stage::new(desc(Dtype::F32, &[4, 8]), desc(Dtype::F32, &[8])).params(&[("colour", "red")]);
    let (status, state, full) = create_raw(good().kernel(AVERAGE), &stage, 1024);
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(state.is_null());
    let full = message(&full);
    for len in [1usize, 2, 16] {
        let (status, _, short) = create_raw(good().kernel(AVERAGE), &stage, len);
        assert_eq!(status, Status::INVALID_ARGUMENT);
        assert_eq!(short[len - 1], 0, "not terminated in {len} bytes");
        assert_eq!(message(&short), full[..len - 1], "buffer of {len} bytes");
    }
    // No buffer at all: the kernel writes nothing and still refuses.
    let (status, _, _) = create_raw(good().kernel(AVERAGE), &stage, 0);
    assert_eq!(status, Status::INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------------
// The fault build
// ---------------------------------------------------------------------------------------------

#[test]
fn the_fault_build_changes_exactly_bin_5_by_one_percent() {
    let (m, n) = (8u64, 64u64);
    let mut rng = Pcg64::seed_from_u64(0x5eed_0008);
    let x = random_f32(&mut rng, (m * n) as usize, 1.0, 1.0e6);
    let input = Buffer::from_f32(&[m, n], Dtype::F32, &x);
    let stage =
        || Stage::new(desc(Dtype::F32, &[m, n]), desc(Dtype::F32, &[n])).params(&[("scale", "3")]);
    let mut right = Buffer::new(Dtype::F32, &[n]);
    let mut wrong = Buffer::new(Dtype::F32, &[n]);
    run(good(), AVERAGE, &stage(), &input, &mut right, null_mut());
    run(faulty(), AVERAGE, &stage(), &input, &mut wrong, null_mut());

    for (k, (&r, &w)) in right.f32s().iter().zip(wrong.f32s()).enumerate() {
        if k == 5 {
            let ratio = f64::from(w) / f64::from(r);
            assert!((ratio - 1.01).abs() < 1e-6, "bin 5: {w} / {r} = {ratio}");
        } else {
            assert_eq!(w.to_bits(), r.to_bits(), "bin {k} changed: {r} -> {w}");
        }
    }
    // A reference check finds exactly that bin.
    let want = reference_average(&x, m as usize, n as usize, 3.0);
    let flagged: Vec<usize> = wrong
        .f32s()
        .iter()
        .zip(&want)
        .enumerate()
        .filter(|(_, (g, w))| (f64::from(**g) - **w).abs() > 1e-6 * w.abs())
        .map(|(k, _)| k)
        .collect();
    assert_eq!(flagged, [5]);

    // The other two kernels are untouched by the switch.
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let samples = Buffer::from_i16(&[m, n], &iq);
    let fft = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n]));
    let pow = Stage::new(desc(Dtype::CF32, &[m, n]), desc(Dtype::F32, &[m, n]));
    let mut outputs = Vec::new();
    for lib in [good(), faulty()] {
        let mut spectra = Buffer::new(Dtype::CF32, &[m, n]);
        let mut power = Buffer::new(Dtype::F32, &[m, n]);
        run(lib, FFT, &fft, &samples, &mut spectra, null_mut());
        run(lib, POWER, &pow, &spectra, &mut power, null_mut());
        let bits = |b: &Buffer| b.f32s().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        outputs.push((bits(&spectra), bits(&power)));
    }
    assert!(
        outputs[0] == outputs[1],
        "the fault build changed fft or power"
    );
}

// ---------------------------------------------------------------------------------------------
// The cargo-built library
// ---------------------------------------------------------------------------------------------

#[test]
fn the_cargo_built_library_exports_the_c_table() {
    // target/<profile>/libkplace_spectrogram.so, checked to be newer than its sources.
    let loaded = load(&cargo_built(
        "kplace-spectrogram",
        "libkplace_spectrogram.so",
        &[
            "workloads/spectrogram/kernels/spectrogram.c",
            "workloads/spectrogram/kernels/spectrogram_contract.h",
            "workloads/spectrogram/src/lib.rs",
        ],
    ));
    assert_eq!(loaded.table.abi_version, ABI_VERSION);
    assert_eq!(text(loaded.table.name), "kplace-spectrogram");
    let names: Vec<&str> = loaded.kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(names, [FFT, POWER, AVERAGE]);

    // And its kernels compute the transform.
    let (m, n) = (4u64, 32u64);
    let mut rng = Pcg64::seed_from_u64(0x5eed_0009);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let samples = Buffer::from_i16(&[m, n], &iq);
    let stage = Stage::new(desc(Dtype::CI16, &[m, n]), desc(Dtype::CF32, &[m, n])).split(0, 2);
    let mut output = Buffer::new(Dtype::CF32, &[m, n]);
    run(&loaded, FFT, &stage, &samples, &mut output, null_mut());
    let want = reference_fft(&iq, m as usize, n as usize);
    let worst = fft_row_errors(output.f32s(), &want, n as usize)
        .into_iter()
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "error {worst:e} of the row's peak");
}
