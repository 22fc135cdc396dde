//! The GPU library run whole on the host: its C host side against a fake CUDA driver whose
//! launches run `kernels/spectrogram.cu` in runtime/cudakit/hostsim's simulator, and a fake NVRTC
//! (see `common/fakes.rs` and `support/`). No GPU and no CUDA library is needed.
//!
//! - Every kernel, for several N and M and every tiling, against the CPU library
//!   (`kernels/spectrogram.c`, compiled now): within the promised tolerances, and in fact bit
//!   for bit, since both do the same operations in the same order with the same rounding.
//! - What create and launch do with the driver: the tables uploaded once, nothing allocated by
//!   launch, the stream passed through, the grid and block, contexts pushed and popped in
//!   pairs, references on the primary context released by destroy, one module per device.
//! - What the library compiles: exactly spectrogram.cu, with the IEEE options, as a CUBIN for a
//!   device NVRTC knows and as PTX for a newer one.
//! - Errors: each names the failing call and the driver's (or NVRTC's) text, with the right
//!   status, and leaves nothing behind; refusals make no CUDA call at all.

mod common;

use std::ffi::c_void;
use std::sync::OnceLock;

use common::fakes::Fakes;
use common::*;
use kplace_abi::{DeviceKind, MemorySpace, Status, Tile};

/// The fakes, loaded before any create of this process.
fn fakes() -> &'static Fakes {
    static FAKES: OnceLock<Fakes> = OnceLock::new();
    FAKES.get_or_init(|| Fakes::load(true))
}

/// The GPU library (compiled now from the sources), with the fakes in place.
fn lib() -> &'static Loaded {
    fakes();
    fresh_gpu()
}

/// A stream handle the fake driver records; it is never dereferenced.
const STREAM: *mut c_void = 0x5eed_0000 as *mut c_void;

/// Makes sure device 0's module is loaded, so that what a test counts is its own work.
fn warm() {
    let stage = Stage::new(ddesc(Dtype::F32, &[2, 4]), ddesc(Dtype::F32, &[4]));
    drop(create(lib().kernel(AVERAGE), &stage).expect("create on device 0"));
}

#[test]
fn the_table_lists_three_cuda_kernels() {
    let lib = lib();
    assert_eq!(text(lib.table.name), "kplace-spectrogram-gpu");
    let names: Vec<&str> = lib.kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(names, [FFT, POWER, AVERAGE]);
    for k in lib.kernels() {
        assert_eq!(k.device, DeviceKind::CUDA);
        assert_eq!(k.memory, MemorySpace::DEVICE);
    }
}

// ---------------------------------------------------------------------------------------------
// The kernels against the CPU library
// ---------------------------------------------------------------------------------------------

#[test]
fn fft_matches_the_cpu_library_for_every_tiling() {
    let fakes = fakes();
    let mut rng = rng(0x5eed_0101);
    for n in [2u64, 64, 1024, 4096] {
        for m in [4u64, 16] {
            let iq = random_ci16(&mut rng, m as usize, n as usize);
            let input = Buffer::from_i16(&[m, n], &iq);
            let stage = || Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n]));
            let mut want = Buffer::new(Dtype::CF32, &[m, n]);
            reference(FFT, &stage(), &input, &mut want);
            for split in splits(m) {
                let stage = stage().tiled(split);
                let mut got = Buffer::new(Dtype::CF32, &[m, n]);
                run(lib(), FFT, &stage, &input, &mut got, STREAM);
                let err = fft_error(got.f32s(), want.f32s(), n as usize);
                assert!(
                    err < 1e-5,
                    "N={n} M={m} split {split:?}: error {err:e} of the row's peak"
                );
                assert!(
                    got.bits() == want.bits(),
                    "N={n} M={m} split {split:?}: not the CPU library's bits (error {err:e})"
                );
                // One block per row of the tile, min(N / 2, 256) threads, on the given stream.
                let stats = fakes.stats();
                let rows = split.unwrap_or(m) as u32;
                assert_eq!(stats.grid, [rows, 1, 1], "N={n} M={m} split {split:?}");
                assert_eq!(stats.block, [(n as u32 / 2).min(256), 1, 1], "N={n}");
                assert_eq!(stats.stream, STREAM as usize);
            }
        }
    }
}

#[test]
fn fft_of_a_tone_peaks_at_its_bin() {
    // x[n] = A exp(2 pi i 3 n / N): the Hann window spreads it over bins 2, 3, 4 with weights
    // -A N / 4, A N / 2, -A N / 4: the sign convention and the window, without the CPU library.
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
        ddesc(Dtype::CI16, &[m, n as u64]),
        ddesc(Dtype::CF32, &[m, n as u64]),
    );
    run(lib(), FFT, &stage, &input, &mut output, STREAM);
    let y = output.f32s();
    let expect = |k: usize| match k {
        3 => a * n as f64 / 2.0,
        2 | 4 => -a * n as f64 / 4.0,
        _ => 0.0,
    };
    for k in 0..n {
        let (re, im) = (f64::from(y[2 * k]), f64::from(y[2 * k + 1]));
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
    let mut rng = rng(0x5eed_0102);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let input = Buffer::from_i16(&[m, n], &iq);
    let mut output = Buffer::new(Dtype::CF32, &[m, n]);
    let stage = Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n])).split(0, 2);
    let state = create(lib().kernel(FFT), &stage).unwrap();
    state
        .launch(
            input.input(MemorySpace::DEVICE),
            output.output(MemorySpace::DEVICE),
            Tile { begin: 4, count: 2 },
            STREAM,
        )
        .unwrap();
    for (r, values) in output.f32s().chunks_exact(2 * n as usize).enumerate() {
        let untouched = values.iter().all(|v| v.to_bits() == u32::MAX);
        assert_eq!(untouched, !(4..6).contains(&r), "row {r}");
    }
}

#[test]
fn tiles_are_enqueued_concurrently_on_one_state() {
    let (m, n) = (32u64, 256u64);
    let mut rng = rng(0x5eed_0103);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let input = Buffer::from_i16(&[m, n], &iq);
    let stage = || Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n])).split(0, 1);
    let mut sequential = Buffer::new(Dtype::CF32, &[m, n]);
    run(lib(), FFT, &stage(), &input, &mut sequential, STREAM);

    let mut concurrent = Buffer::new(Dtype::CF32, &[m, n]);
    let state = create(lib().kernel(FFT), &stage()).unwrap();
    let (input_tensor, output_tensor) = (
        input.input(MemorySpace::DEVICE),
        concurrent.output(MemorySpace::DEVICE),
    );
    // Raw addresses cross the threads; each thread launches its own tiles (disjoint rows).
    let (in_desc, out_desc) = (input_tensor.desc, output_tensor.desc);
    let (in_addr, out_addr) = (input_tensor.data as usize, output_tensor.data as usize);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let state = &state;
            s.spawn(move || {
                for row in (t..m).step_by(4) {
                    let input = kplace_abi::Tensor {
                        desc: in_desc,
                        data: in_addr as *mut c_void,
                    };
                    let output = kplace_abi::Tensor {
                        desc: out_desc,
                        data: out_addr as *mut c_void,
                    };
                    let tile = Tile {
                        begin: row,
                        count: 1,
                    };
                    state.launch(input, output, tile, STREAM).unwrap();
                }
                assert_eq!(fakes().stack_depth(), 0, "a context left pushed");
            });
        }
    });
    drop(state);
    assert_eq!(concurrent.bits(), sequential.bits());
}

#[test]
fn power_matches_the_cpu_library() {
    let mut rng = rng(0x5eed_0104);
    for (m, n) in [(4u64, 8u64), (16, 1000)] {
        let x = random_f32(&mut rng, (2 * m * n) as usize, -1.0e4, 1.0e4);
        let input = Buffer::from_f32(&[m, n], Dtype::CF32, &x);
        let stage = || Stage::new(ddesc(Dtype::CF32, &[m, n]), ddesc(Dtype::F32, &[m, n]));
        let mut want = Buffer::new(Dtype::F32, &[m, n]);
        reference(POWER, &stage(), &input, &mut want);
        for split in splits(m) {
            let stage = stage().tiled(split);
            let mut got = Buffer::new(Dtype::F32, &[m, n]);
            run(lib(), POWER, &stage, &input, &mut got, STREAM);
            let err = max_rel_error(got.f32s(), want.f32s());
            assert!(err < 1e-6, "M={m} N={n} split {split:?}: error {err:e}");
            assert!(got.bits() == want.bits(), "M={m} N={n} split {split:?}");
            let elements = split.unwrap_or(m) * n;
            assert_eq!(
                fakes().stats().grid,
                [elements.div_ceil(256) as u32, 1, 1],
                "one thread per element"
            );
        }
    }
}

#[test]
fn average_matches_the_cpu_library_with_and_without_scale() {
    let mut rng = rng(0x5eed_0105);
    for (m, n) in [(1u64, 7u64), (16, 1000), (3, 256), (2, 70_000)] {
        let x = random_f32(&mut rng, (m * n) as usize, 0.0, 1.0e6);
        let input = Buffer::from_f32(&[m, n], Dtype::F32, &x);
        for params in [
            &[][..],
            &[("scale", "2.5")][..],
            &[("scale", " 0.25 ")][..],
            &[("scale", "1e-3")][..],
        ] {
            let stage =
                Stage::new(ddesc(Dtype::F32, &[m, n]), ddesc(Dtype::F32, &[n])).params(params);
            let mut want = Buffer::new(Dtype::F32, &[n]);
            reference(AVERAGE, &stage, &input, &mut want);
            let mut got = Buffer::new(Dtype::F32, &[n]);
            run(lib(), AVERAGE, &stage, &input, &mut got, STREAM);
            let err = max_rel_error(got.f32s(), want.f32s());
            assert!(err < 1e-6, "M={m} N={n} {params:?}: error {err:e}");
            assert!(got.bits() == want.bits(), "M={m} N={n} {params:?}");
            assert_eq!(fakes().stats().grid, [n.div_ceil(256) as u32, 1, 1]);
        }
    }
}

#[test]
fn the_chain_matches_the_cpu_library() {
    // fft -> power -> average as workloads/spectrogram/graph.yaml runs it, on both libraries.
    let (m, n) = (16u64, 256u64);
    let mut rng = rng(0x5eed_0106);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let samples = Buffer::from_i16(&[m, n], &iq);
    let fft = Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n])).split(0, 4);
    let pow = Stage::new(ddesc(Dtype::CF32, &[m, n]), ddesc(Dtype::F32, &[m, n]));
    let avg =
        Stage::new(ddesc(Dtype::F32, &[m, n]), ddesc(Dtype::F32, &[n])).params(&[("scale", "0.5")]);
    let mut psds = Vec::new();
    for (lib, stream) in [(cpu(), std::ptr::null_mut()), (lib(), STREAM)] {
        let mut spectra = Buffer::new(Dtype::CF32, &[m, n]);
        let mut power = Buffer::new(Dtype::F32, &[m, n]);
        let mut psd = Buffer::new(Dtype::F32, &[n]);
        run(lib, FFT, &fft, &samples, &mut spectra, stream);
        run(lib, POWER, &pow, &spectra, &mut power, stream);
        run(lib, AVERAGE, &avg, &power, &mut psd, stream);
        psds.push(psd);
    }
    let err = max_rel_error(psds[1].f32s(), psds[0].f32s());
    assert!(err < 1e-6, "PSD error {err:e}");
    assert_eq!(psds[1].bits(), psds[0].bits());
}

// ---------------------------------------------------------------------------------------------
// What the library does with the driver
// ---------------------------------------------------------------------------------------------

#[test]
fn create_uploads_the_tables_once_and_launch_allocates_nothing() {
    let fakes = fakes();
    warm();
    let (m, n) = (8u64, 512u64);
    let input = Buffer::from_i16(&[m, n], &vec![1; (2 * m * n) as usize]);
    let mut output = Buffer::new(Dtype::CF32, &[m, n]);
    let stage = Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n])).split(0, 2);

    let before = fakes.stats();
    let state = create(lib().kernel(FFT), &stage).unwrap();
    let created = fakes.stats();
    assert_eq!(
        created.allocs - before.allocs,
        1,
        "one allocation for the tables"
    );
    assert_eq!(
        created.retains - before.retains,
        1,
        "one reference per state"
    );
    assert_eq!(created.pushes - before.pushes, created.pops - before.pops);
    for i in 0..4 {
        let tile = Tile {
            begin: 2 * i,
            count: 2,
        };
        let (input, output) = (
            input.input(MemorySpace::DEVICE),
            output.output(MemorySpace::DEVICE),
        );
        state.launch(input, output, tile, STREAM).unwrap();
    }
    let launched = fakes.stats();
    assert_eq!(
        launched.allocs, created.allocs,
        "launch allocated device memory"
    );
    assert_eq!(
        launched.launches - created.launches,
        4,
        "one kernel per launch"
    );
    assert_eq!(
        launched.pushes - created.pushes,
        launched.pops - created.pops
    );
    assert_eq!(fakes.stack_depth(), 0);
    drop(state);
    let destroyed = fakes.stats();
    assert_eq!(
        destroyed.frees - launched.frees,
        1,
        "destroy frees the tables"
    );
    assert_eq!(destroyed.releases - launched.releases, 1);
    assert_eq!(fakes.stack_depth(), 0);

    // The other two hold a context reference and nothing else.
    for (name, stage) in [
        (
            POWER,
            Stage::new(ddesc(Dtype::CF32, &[m, n]), ddesc(Dtype::F32, &[m, n])),
        ),
        (
            AVERAGE,
            Stage::new(ddesc(Dtype::F32, &[m, n]), ddesc(Dtype::F32, &[n])),
        ),
    ] {
        let before = fakes.stats();
        drop(create(lib().kernel(name), &stage).unwrap());
        let after = fakes.stats();
        assert_eq!(after.allocs, before.allocs, "{name}");
        assert_eq!(after.retains - before.retains, 1, "{name}");
        assert_eq!(after.releases - before.releases, 1, "{name}");
    }
}

#[test]
fn one_module_per_device_from_spectrogram_cu_with_ieee_options() {
    let fakes = fakes();
    // Device 0 (compute capability 9.0, which the fake NVRTC knows): a CUBIN for sm_90.
    // Device 1 (99.0, newer than it knows): PTX for its newest, 10.0.
    for device in [0u32, 1] {
        for _ in 0..3 {
            for (name, stage) in [
                (
                    FFT,
                    Stage::new(ddesc(Dtype::CI16, &[4, 8]), ddesc(Dtype::CF32, &[4, 8])),
                ),
                (
                    POWER,
                    Stage::new(ddesc(Dtype::CF32, &[4, 8]), ddesc(Dtype::F32, &[4, 8])),
                ),
                (
                    AVERAGE,
                    Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8])),
                ),
            ] {
                drop(create(lib().kernel(name), &stage.device(device)).unwrap());
            }
        }
        assert_eq!(fakes.module_loads(device as i32), 1, "device {device}");
    }
    let (cubin, elf) = fakes.image(0);
    assert!(elf, "device 0 got PTX");
    assert!(
        String::from_utf8_lossy(&cubin).contains("fake CUBIN for sm_90"),
        "{cubin:?}"
    );
    let (ptx, elf) = fakes.image(1);
    assert!(!elf, "device 1 got a CUBIN");
    assert_eq!(
        String::from_utf8_lossy(&ptx),
        "// fake PTX for compute_100\n"
    );

    let (source, name, options) = fakes.last_compile();
    let file = std::fs::read_to_string(kernels_dir().join("spectrogram.cu")).unwrap();
    assert!(
        source == file,
        "the library compiled something else than spectrogram.cu"
    );
    assert_eq!(name, "spectrogram.cu");
    assert_eq!(
        options[1..],
        [
            "--fmad=false",
            "--ftz=false",
            "--prec-div=true",
            "--prec-sqrt=true"
        ]
    );
    assert!(options[0].starts_with("--gpu-architecture="), "{options:?}");
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Asserts a refusal with `status` and a message containing every phrase.
fn fails_with(result: Result<State, Failure>, status: Status, phrases: &[&str]) {
    match result {
        Ok(_) => panic!("accepted; expected {phrases:?}"),
        Err((got, text)) => {
            assert_eq!(got, status, "{text}");
            for phrase in phrases {
                assert!(text.contains(phrase), "{text:?} does not say {phrase:?}");
            }
        }
    }
}

#[test]
fn refusals_make_no_cuda_call() {
    let fakes = fakes();
    warm();
    let before = fakes.stats();
    let ci16 = |dims: &[u64]| ddesc(Dtype::CI16, dims);
    let cf32 = |dims: &[u64]| ddesc(Dtype::CF32, dims);
    let f32 = |dims: &[u64]| ddesc(Dtype::F32, dims);
    for (name, stage) in [
        (FFT, Stage::new(cf32(&[4, 8]), cf32(&[4, 8]))),
        (FFT, Stage::new(ci16(&[4, 8192]), cf32(&[4, 8192]))),
        (FFT, Stage::new(ci16(&[4, 12]), cf32(&[4, 12]))),
        (FFT, Stage::new(ci16(&[4, 8]), cf32(&[4, 8])).split(1, 4)),
        (FFT, Stage::new(ci16(&[4, 8]), cf32(&[4, 8])).split(0, 3)),
        (
            POWER,
            Stage::new(cf32(&[4, 8]), f32(&[4, 8])).params(&[("x", "1")]),
        ),
        (
            AVERAGE,
            Stage::new(f32(&[4, 8]), f32(&[8])).params(&[("scale", "-1")]),
        ),
        (AVERAGE, Stage::new(f32(&[4, 8]), f32(&[8])).split(0, 2)),
        (
            AVERAGE,
            Stage::new(f32(&[4, 8]), f32(&[8])).in_memory(MemorySpace::HOST),
        ),
    ] {
        let (status, _) = create(lib().kernel(name), &stage).err().expect("refused");
        assert_eq!(status, Status::INVALID_ARGUMENT);
    }
    assert_eq!(
        fakes.stats().calls,
        before.calls,
        "a refusal called the driver"
    );
    // And N = 4096 is accepted.
    drop(
        create(
            lib().kernel(FFT),
            &Stage::new(ci16(&[1, 4096]), cf32(&[1, 4096])),
        )
        .unwrap(),
    );
}

#[test]
fn driver_errors_name_the_call_and_leave_nothing_behind() {
    let fakes = fakes();
    warm();
    let fft = || Stage::new(ddesc(Dtype::CI16, &[4, 8]), ddesc(Dtype::CF32, &[4, 8]));
    let before = fakes.stats();

    fakes.fail_next("cuMemAlloc_v2", 2);
    fails_with(
        create(lib().kernel(FFT), &fft()),
        Status::OUT_OF_MEMORY,
        &["spectrogram.fft: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory"],
    );
    fakes.fail_next("cuMemcpyHtoD_v2", 1);
    fails_with(
        create(lib().kernel(FFT), &fft()),
        Status::BACKEND,
        &["spectrogram.fft: cuMemcpyHtoD failed: CUDA_ERROR_INVALID_VALUE: invalid argument"],
    );
    fakes.fail_next("cuDevicePrimaryCtxRetain", 101);
    fails_with(
        create(
            lib().kernel(POWER),
            &Stage::new(ddesc(Dtype::CF32, &[4, 8]), ddesc(Dtype::F32, &[4, 8])),
        ),
        Status::BACKEND,
        &["spectrogram.power: cuDevicePrimaryCtxRetain failed: CUDA_ERROR_INVALID_DEVICE"],
    );
    fails_with(
        create(lib().kernel(FFT), &fft().device(7)),
        Status::INVALID_ARGUMENT,
        &["spectrogram.fft: CUDA device 7 does not exist (4 device(s) found)"],
    );
    let after = fakes.stats();
    assert_eq!(after.allocs - before.allocs, after.frees - before.frees);
    assert_eq!(
        after.retains - before.retains,
        after.releases - before.releases
    );
    assert_eq!(fakes.stack_depth(), 0);

    // A launch failure.
    let stage = Stage::new(ddesc(Dtype::CF32, &[4, 8]), ddesc(Dtype::F32, &[4, 8]));
    let state = create(lib().kernel(POWER), &stage).unwrap();
    let input = Buffer::new(Dtype::CF32, &[4, 8]);
    let mut output = Buffer::new(Dtype::F32, &[4, 8]);
    fakes.fail_next("cuLaunchKernel", 719);
    let (status, text) = state
        .launch(
            input.input(MemorySpace::DEVICE),
            output.output(MemorySpace::DEVICE),
            Tile { begin: 0, count: 4 },
            STREAM,
        )
        .unwrap_err();
    assert_eq!(status, Status::BACKEND);
    assert!(
        text.contains(
            "spectrogram.power: cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED: unspecified \
             launch failure"
        ),
        "{text}"
    );
    assert_eq!(fakes.stack_depth(), 0);
}

#[test]
fn module_errors_are_reported_and_a_later_create_retries() {
    // Device 2 is this test's alone: its module is not loaded until the third create.
    let fakes = fakes();
    let stage = || Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8])).device(2);
    fakes.fail_next_compile();
    fails_with(
        create(lib().kernel(AVERAGE), &stage()),
        Status::BACKEND,
        &[
            "spectrogram.average: nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION: NVRTC \
             could not compile spectrogram.cu with --gpu-architecture=sm_90 --fmad=false",
            "spectrogram.cu(1): error: a compilation error the test asked for",
        ],
    );
    fakes.fail_next("cuModuleLoadData", 200);
    fails_with(
        create(lib().kernel(AVERAGE), &stage()),
        Status::BACKEND,
        &[
            "spectrogram.average: cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE: device \
             kernel image is invalid",
            "(spectrogram.cu as sm_90 for device 2, compute capability 9.0)",
        ],
    );
    assert_eq!(fakes.module_loads(2), 0);
    assert_eq!(
        fakes.retained(2),
        0,
        "a failed create kept a context reference"
    );
    let state = create(lib().kernel(AVERAGE), &stage()).unwrap();
    assert_eq!(fakes.module_loads(2), 1);
    assert_eq!(
        fakes.retained(2),
        2,
        "the state's reference and the module cache's"
    );
    drop(state);
    assert_eq!(fakes.retained(2), 1, "the module cache keeps its reference");

    // Device 3 is older than anything NVRTC compiles for.
    fails_with(
        create(lib().kernel(AVERAGE), &stage().device(3)),
        Status::BACKEND,
        &[
            "spectrogram.average: this NVRTC (libnvrtc.so.13) cannot compile for compute \
             capability 1.0 (it supports 7.5, 8.0, 8.6, 8.9, 9.0, 10.0)",
        ],
    );
    assert_eq!(fakes.retained(3), 0);
}

#[test]
fn launch_refuses_a_tile_outside_the_rows_and_host_tensors() {
    let (m, n) = (4u64, 8u64);
    let input = Buffer::new(Dtype::CI16, &[m, n]);
    let mut output = Buffer::new(Dtype::CF32, &[m, n]);
    let stage = Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n])).split(0, 1);
    let state = create(lib().kernel(FFT), &stage).unwrap();
    let (status, text) = state
        .launch(
            input.input(MemorySpace::DEVICE),
            output.output(MemorySpace::DEVICE),
            Tile { begin: 4, count: 1 },
            STREAM,
        )
        .unwrap_err();
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(
        text.contains("spectrogram.fft: tile [4, +1) is outside axis 0 (M = 4)"),
        "{text}"
    );
    let (status, text) = state
        .launch(
            input.input(MemorySpace::HOST),
            output.output(MemorySpace::DEVICE),
            Tile { begin: 0, count: 1 },
            STREAM,
        )
        .unwrap_err();
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(
        text.contains("launch got a tensor in host memory"),
        "{text}"
    );
}
