//! The library as the runtime sees it, on any machine: its table; the refusals that happen
//! before any CUDA call, with the CPU library's messages (and the GPU variant's limit on N);
//! and create without a CUDA driver, which must fail with a status and a message, never a
//! crash. Each on the cargo-built `libkplace_spectrogram_gpu.so` and on a build of the sources
//! made now (`fresh_gpu`).

mod common;

use common::fakes::real_driver_present;
use common::*;
use kplace_abi::{ABI_VERSION, DeviceKind, MemorySpace, Status};

/// The cargo-built library and the one built now.
fn both() -> [&'static Loaded; 2] {
    [gpu(), fresh_gpu()]
}

#[test]
fn the_table_offers_three_cuda_kernels_over_device_memory() {
    for lib in both() {
        check_table(lib);
    }
}

fn check_table(lib: &Loaded) {
    assert_eq!(lib.table.abi_version, ABI_VERSION);
    assert_eq!(text(lib.table.name), "kplace-spectrogram-gpu");
    let names: Vec<&str> = lib.kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(names, [FFT, POWER, AVERAGE]);
    for k in lib.kernels() {
        let name = text(k.name);
        assert_eq!(k.device, DeviceKind::CUDA, "{name}");
        assert_eq!(k.memory, MemorySpace::DEVICE, "{name}");
        assert_eq!((k.n_inputs, k.n_outputs), (1, 1), "{name}");
        assert!(k.create.is_some() && k.workspace_bytes.is_some(), "{name}");
        assert!(k.launch.is_some() && k.destroy.is_some(), "{name}");
        // destroy(NULL) is a no-op.
        // SAFETY: the ABI allows a null state.
        unsafe { (k.destroy.unwrap())(std::ptr::null_mut()) };
    }
    // The same names and ports as the CPU library's.
    let cpu_names: Vec<&str> = cpu().kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(names, cpu_names);
}

#[test]
fn create_without_a_cuda_driver_fails_with_a_message() {
    if real_driver_present() {
        // Not a GPU test: it checks the path taken where there is no driver.
        println!("skipped: libcuda.so.1 loads here, so create would not take the no-driver path");
        return;
    }
    for lib in both() {
        for (name, stage) in [
            (
                FFT,
                Stage::new(ddesc(Dtype::CI16, &[4, 8]), ddesc(Dtype::CF32, &[4, 8])).split(0, 2),
            ),
            (
                POWER,
                Stage::new(ddesc(Dtype::CF32, &[4, 8]), ddesc(Dtype::F32, &[4, 8])),
            ),
            (
                AVERAGE,
                Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8]))
                    .params(&[("scale", "2")]),
            ),
            // N = 4096 passes every check, so it too reaches the driver.
            (
                FFT,
                Stage::new(
                    ddesc(Dtype::CI16, &[2, 4096]),
                    ddesc(Dtype::CF32, &[2, 4096]),
                ),
            ),
        ] {
            // Twice: a failed first create leaves nothing that breaks the second.
            for _ in 0..2 {
                let (status, state, error) = create_raw(lib.kernel(name), &stage, 1024);
                let text = message(&error);
                assert_eq!(status, Status::BACKEND, "{name}: {text}");
                assert!(state.is_null(), "{name}: a state from a failed create");
                assert!(
                    text.starts_with(&format!("{name}: no CUDA driver (libcuda.so.1): ")),
                    "{text}"
                );
            }
        }
        // A short buffer gets the start of the message, terminated.
        let stage = Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8]));
        let (status, _, short) = create_raw(lib.kernel(AVERAGE), &stage, 24);
        assert_eq!(status, Status::BACKEND);
        assert_eq!(message(&short), "spectrogram.average: no");
    }
}

// ---------------------------------------------------------------------------------------------
// Refusals, before any CUDA call
// ---------------------------------------------------------------------------------------------

/// Asserts that both builds' create refuses `stage` with INVALID_ARGUMENT and a message
/// containing `phrase` and naming the kernel. On a machine without a driver this also shows the
/// check came first: otherwise the message would be the driver's.
fn refuses(name: &str, stage: Stage<'_>, phrase: &str) {
    for lib in both() {
        assert_refuses(lib, name, &stage, phrase);
    }
}

fn on_host(mut d: kplace_abi::TensorDesc) -> kplace_abi::TensorDesc {
    d.memory = MemorySpace::HOST;
    d
}

#[test]
fn fft_refuses_what_it_cannot_take() {
    let ci16 = |dims: &[u64]| ddesc(Dtype::CI16, dims);
    let cf32 = |dims: &[u64]| ddesc(Dtype::CF32, dims);
    let ok = || Stage::new(ci16(&[4, 8]), cf32(&[4, 8]));

    refuses(
        FFT,
        Stage::new(cf32(&[4, 8]), cf32(&[4, 8])),
        "input 0 must be ci16 [M, N], not cf32",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), ddesc(Dtype::F32, &[4, 8])),
        "output 0 must be cf32",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[32]), cf32(&[32])),
        "input 0 must have rank 2",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), cf32(&[4, 16])),
        "output 0 must have shape [4, 8]",
    );
    refuses(
        FFT,
        Stage::new(on_host(ci16(&[4, 8])), cf32(&[4, 8])),
        "spectrogram.fft: input 0 must be in device memory, not host memory",
    );
    refuses(
        FFT,
        Stage::new(ci16(&[4, 8]), on_host(cf32(&[4, 8]))),
        "output 0 must be in device memory",
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
    for n in [1u64, 12, 100, 8192, 65536, 131072] {
        refuses(
            FFT,
            Stage::new(ci16(&[4, n]), cf32(&[4, n])),
            &format!(
                "spectrogram.fft: N (input 0's row length) must be a power of two from 2 to \
                 4096, not {n} (4096 is the GPU variant's limit"
            ),
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
    let cf32 = |dims: &[u64]| ddesc(Dtype::CF32, dims);
    let f32 = |dims: &[u64]| ddesc(Dtype::F32, dims);
    let ok = || Stage::new(cf32(&[4, 6]), f32(&[4, 6]));

    refuses(
        POWER,
        Stage::new(ddesc(Dtype::CI16, &[4, 6]), f32(&[4, 6])),
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
        ok().in_memory(MemorySpace::HOST),
        "input 0 must be in device memory",
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
    let f32 = |dims: &[u64]| ddesc(Dtype::F32, dims);
    let ok = || Stage::new(f32(&[4, 8]), f32(&[8]));

    refuses(
        AVERAGE,
        Stage::new(ddesc(Dtype::CF32, &[4, 8]), f32(&[8])),
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
        Stage::new(f32(&[4, 8]), on_host(f32(&[8]))),
        "output 0 must be in device memory",
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
fn refusals_say_what_the_cpu_library_says() {
    // Apart from the memory space and the FFT's length limit, a refusal's text is the CPU
    // library's, word for word.
    let cases: Vec<(&str, Stage<'_>)> = vec![
        (
            FFT,
            Stage::new(ddesc(Dtype::CF32, &[4, 8]), ddesc(Dtype::CF32, &[4, 8])),
        ),
        (
            FFT,
            Stage::new(ddesc(Dtype::CI16, &[4, 8]), ddesc(Dtype::CF32, &[4, 8])).split(0, 3),
        ),
        (
            POWER,
            Stage::new(ddesc(Dtype::CF32, &[4, 6]), ddesc(Dtype::F32, &[6, 4])),
        ),
        (
            AVERAGE,
            Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8]))
                .params(&[("scale", "nan")]),
        ),
        (
            AVERAGE,
            Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8])).split(0, 2),
        ),
    ];
    for (name, stage) in cases {
        let gpu_text = create(gpu().kernel(name), &stage).err().unwrap().1;
        let host = stage.clone().in_memory(MemorySpace::HOST);
        let cpu_text = create(cpu().kernel(name), &host).err().unwrap().1;
        assert_eq!(gpu_text, cpu_text, "{name}");
    }
}

#[test]
fn messages_are_truncated_and_terminated() {
    let stage = Stage::new(ddesc(Dtype::F32, &[4, 8]), ddesc(Dtype::F32, &[8]))
        .params(&[("colour", "red")]);
    let (status, state, full) = create_raw(gpu().kernel(AVERAGE), &stage, 1024);
    assert_eq!(status, Status::INVALID_ARGUMENT);
    assert!(state.is_null());
    let full = message(&full);
    for len in [1usize, 2, 16] {
        let (status, _, short) = create_raw(gpu().kernel(AVERAGE), &stage, len);
        assert_eq!(status, Status::INVALID_ARGUMENT);
        assert_eq!(short[len - 1], 0, "not terminated in {len} bytes");
        assert_eq!(message(&short), full[..len - 1], "buffer of {len} bytes");
    }
    // No buffer at all: the kernel writes nothing and still refuses.
    let (status, _, _) = create_raw(gpu().kernel(AVERAGE), &stage, 0);
    assert_eq!(status, Status::INVALID_ARGUMENT);
}
