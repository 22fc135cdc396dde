//! The CUDA driver layer with and without a GPU: without one, every entry point answers "no
//! CUDA driver found" instead of panicking, and `kplace devices` says so and exits 0; with one,
//! a round trip through pinned memory, streams, events and a host callback.
//!
//! Between the two, a fake libcuda (tests/c/fake_cuda.c) loaded through cudarc exactly as the
//! real one drives the driver-present paths on machines without a GPU: the probe's report, the
//! errors for a missing device or an unbound thread, the flags passed to the driver, the
//! primary context's reference count, and the round trip itself. Tests that need it run in a
//! child process of this test binary, since the loader reads `LD_LIBRARY_PATH` only at start.

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kplace::cuda::driver::{CudaGpu, CudaProvider};
use kplace::cuda::owned::{GpuMemory, MemoryKind, OwnedEvent, OwnedStream};
use kplace::cuda::probe::{DriverStatus, Probe, probe};
use kplace::cuda::{Gpu, GpuProvider};

/// Whether libcuda is found here (where kplace looks, not only on the loader's path): the tests
/// below check the no-driver answers only where there is no driver, so the suite also passes
/// on a GPU machine.
fn driver_present() -> bool {
    kplace_cuda_libs::find(kplace_cuda_libs::Library::Cuda).is_loaded()
}

fn kplace(args: &[&str]) -> Output {
    kplace_testkit::output(
        Command::new(kplace_testkit::kplace_bin!())
            .args(args)
            .current_dir(kplace_testkit::workspace()),
    )
}

/// Set in child processes that load the fake driver.
const FAKE_ENV: &str = "KPLACE_TEST_FAKE_CUDA";

/// The directory holding the fake `libcuda.so`, built once per test binary run.
fn fake_driver_dir() -> PathBuf {
    let lib = kplace_testkit::build_c_library("fake_cuda.c", "cuda", &[]);
    lib.parent()
        .expect("the library has a directory")
        .to_path_buf()
}

/// `command` set to load the fake driver with `devices` devices.
fn with_fake_driver(mut command: Command, devices: u32) -> Command {
    command
        .env("LD_LIBRARY_PATH", fake_driver_dir())
        .env("FAKE_CUDA_DEVICES", devices.to_string())
        .env(FAKE_ENV, "1");
    command
}

/// Runs this binary's test `name` alone in a child process on the fake driver; returns its
/// output, having checked that it ran and passed.
fn run_on_fake_driver(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe);
    child.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    let out = kplace_testkit::output(&mut with_fake_driver(child, 1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} on the fake driver failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    text
}

/// Whether this process runs on the fake driver (a child of [`run_on_fake_driver`]).
fn on_fake_driver() -> bool {
    std::env::var_os(FAKE_ENV).is_some()
}

#[test]
fn probe_reports_a_missing_driver_without_panicking() {
    if on_fake_driver() {
        return;
    }
    let probe = probe();
    if driver_present() {
        println!("skipped: a CUDA driver is present; found:\n{probe}");
        return;
    }
    match &probe.driver {
        DriverStatus::NotFound { reason } => assert!(reason.contains("libcuda"), "{reason}"),
        other => panic!("expected no driver, got {other:?}"),
    }
    assert!(probe.devices().is_empty());
    assert!(probe.nvidia_driver_version.is_none());
    let text = probe.to_string();
    assert!(text.starts_with("no CUDA driver found"), "{text}");
    assert!(
        probe
            .unavailable_reason()
            .is_some_and(|r| r.contains("no CUDA driver found")),
        "{probe:?}"
    );
}

#[test]
fn opening_a_device_without_a_driver_is_a_clear_error() {
    if driver_present() || on_fake_driver() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let direct = CudaGpu::open(0).expect_err("no device without a driver");
    let text = direct.to_string();
    assert!(text.contains("no CUDA driver found"), "{text}");
    assert!(text.starts_with("gpu:0"), "{text}");

    // The provider reports the same, and again on a second call (failures are not cached).
    for _ in 0..2 {
        let err = CudaProvider::global()
            .open(0)
            .expect_err("no device without a driver");
        assert!(err.to_string().contains("no CUDA driver found"), "{err}");
    }
    let err = CudaProvider::new().open(3).expect_err("no device");
    assert!(err.to_string().starts_with("gpu:3"), "{err}");
}

#[test]
fn devices_command_exits_0_and_says_what_it_found() {
    let out = kplace(&["devices"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kplace devices failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("libraries: cuFFT "), "{stdout}");
    if !driver_present() {
        assert!(stdout.starts_with("no CUDA driver found ("), "{stdout}");
    }
}

#[test]
fn devices_lists_where_it_looked_for_each_library() {
    let out = kplace_testkit::output(
        Command::new(kplace_testkit::kplace_bin!())
            .arg("devices")
            .env_remove("KPLACE_CUDA_LIB_DIR"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for name in [
        "libcuda",
        "libnvidia-ml",
        "libcufft",
        "libnvrtc-builtins",
        "libnvrtc",
        "libcublasLt",
        "libcublas",
    ] {
        assert!(
            stdout.contains(&format!("\n  {name}: ")),
            "{name} missing from:\n{stdout}"
        );
    }
    if !driver_present() {
        assert!(
            stdout.starts_with("no CUDA driver found (libcuda not found: see below)\n"),
            "{stdout}"
        );
        for want in [
            "  libcuda: not found, looked in:\n      KPLACE_CUDA_LIB_DIR: not set\n      loader path: ",
            "      /usr/local/nvidia/lib64: ",
            "      /usr/local/cuda/lib64: ",
        ] {
            assert!(stdout.contains(want), "{want:?} missing from:\n{stdout}");
        }
    }

    let out = kplace_testkit::output(
        Command::new(kplace_testkit::kplace_bin!())
            .args(["devices", "--json"])
            .env_remove("KPLACE_CUDA_LIB_DIR"),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let libraries = json["libraries"].as_array().expect("a libraries array");
    assert_eq!(libraries.len(), 7, "{json:#}");
    for library in libraries {
        assert!(library["name"].is_string(), "{library}");
        assert!(
            library["loaded"].is_string() || library["loaded"].is_null(),
            "{library}"
        );
        assert!(
            library["version"].is_string() || library["version"].is_null(),
            "{library}"
        );
        let searched = library["searched"].as_array().expect("searched");
        assert!(
            searched
                .iter()
                .all(|a| a["place"].is_string() && a["result"].is_string()),
            "{library}"
        );
    }
    let libcuda = &libraries[0];
    assert_eq!(libcuda["name"], "libcuda");
    if !driver_present() {
        assert!(libcuda["loaded"].is_null(), "{libcuda}");
        let places: Vec<&str> = libcuda["searched"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["place"].as_str())
            .collect();
        assert_eq!(
            places[..4],
            [
                "KPLACE_CUDA_LIB_DIR",
                "loader path",
                "/usr/local/nvidia/lib64",
                "/usr/local/cuda/lib64"
            ],
            "{libcuda}"
        );
    }
}

#[test]
fn library_path_lists_the_directories_found_first_kplace_cuda_lib_dir() {
    // A stand-in libcufft: any loadable shared object under the name will do.
    let zlib = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib64/libz.so.1",
        "/usr/lib64/libz.so.1",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .expect("a libz.so.1 to copy");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(&zlib, dir.path().join("libcufft.so.12")).expect("copy");
    let out = kplace_testkit::output(
        Command::new(kplace_testkit::kplace_bin!())
            .args(["devices", "--library-path"])
            .env("KPLACE_CUDA_LIB_DIR", dir.path()),
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.strip_suffix('\n').expect("one line");
    assert!(!line.contains('\n'), "{stdout:?}");
    let first = line.split(':').next().unwrap_or_default();
    assert_eq!(Path::new(first), dir.path(), "{line}");

    // Nowhere to look: no directory, no loader path entry, no Python; an empty line.
    let empty = tempfile::tempdir().expect("temp dir");
    let out = kplace_testkit::output(
        Command::new(kplace_testkit::kplace_bin!())
            .args(["devices", "--library-path"])
            .env("KPLACE_CUDA_LIB_DIR", empty.path())
            .env("KPLACE_PYTHON", empty.path().join("no-python"))
            .env("PATH", empty.path())
            .env_remove("LD_LIBRARY_PATH"),
    );
    assert!(out.status.success(), "{out:?}");
    if !Path::new("/usr/local/cuda/lib64").exists() {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "\n");
    }
}

/// Without a GPU, `KPLACE_REQUIRE_GPU=1` makes the round trip (a GPU test) fail with the
/// reason it skips for; unset, it skips with that reason.
#[test]
fn without_a_gpu_a_required_gpu_fails_the_gpu_test() {
    if driver_present() || on_fake_driver() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let run = |require: bool| {
        kplace_testkit::gpu::rerun_test(
            "gpu_round_trip_through_pinned_memory_streams_and_events",
            require,
        )
    };
    let (passed, text) = run(false);
    assert!(
        passed && text.contains("skipped: no CUDA driver found (libcuda not found ("),
        "{text}"
    );
    let (passed, text) = run(true);
    assert!(!passed, "{text}");
    assert!(
        text.contains("KPLACE_REQUIRE_GPU=1 but no CUDA driver found (libcuda not found ("),
        "{text}"
    );
}

#[test]
fn devices_json_parses_and_matches_the_probe() {
    let out = kplace(&["devices", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("kplace devices --json prints JSON");
    let status = json["driver"]["status"].as_str().expect("a driver status");
    assert!(
        ["not_found", "failed", "ready"].contains(&status),
        "{json:#}"
    );
    assert!(
        json["cufft"].is_boolean() && json["nvrtc"].is_boolean(),
        "{json:#}"
    );
    assert!(json["warnings"].is_array(), "{json:#}");
    if !driver_present() {
        assert_eq!(status, "not_found", "{json:#}");
        assert!(json["driver"]["reason"].as_str().is_some(), "{json:#}");
    }
}

/// The first usable device, or why there is none.
fn first_gpu(probe: &Probe) -> Result<Arc<dyn Gpu>, String> {
    if let Some(reason) = probe.unavailable_reason() {
        return Err(reason);
    }
    CudaProvider::global()
        .open(probe.devices()[0].ordinal)
        .map_err(|e| e.to_string())
}

unsafe extern "C" fn count_call(data: *mut c_void) {
    // SAFETY: `data` points at the test's AtomicU32, alive until the stream has drained.
    let calls = unsafe { &*data.cast::<AtomicU32>() };
    calls.fetch_add(1, Ordering::Release);
}

/// Everything the executor asks of a real GPU, once: pinned and device memory, two streams
/// ordered by an event, copies both ways, a host callback and event queries.
#[test]
fn gpu_round_trip_through_pinned_memory_streams_and_events() -> Result<(), String> {
    let probe = probe();
    let gpu = match first_gpu(&probe) {
        Ok(gpu) => gpu,
        Err(reason) => {
            kplace_testkit::gpu::skip_or_fail(reason);
            return Ok(());
        }
    };
    let same = CudaProvider::global()
        .open(gpu.ordinal())
        .map_err(|e| e.to_string())?;
    assert!(Arc::ptr_eq(&gpu, &same), "one CudaGpu per ordinal");
    let e = |e: kplace::cuda::GpuError| e.to_string();

    gpu.bind_thread().map_err(e)?;
    const BYTES: usize = 4 << 20;
    // Owned handles, released at the end of the function or on an early return.
    let src = GpuMemory::new(&gpu, MemoryKind::Pinned, BYTES).map_err(e)?;
    let dst = GpuMemory::new(&gpu, MemoryKind::Pinned, BYTES).map_err(e)?;
    let dev = GpuMemory::new(&gpu, MemoryKind::Device, BYTES).map_err(e)?;
    let upload = OwnedStream::new(&gpu, i32::MIN).map_err(e)?; // clamped to the most urgent
    let download = OwnedStream::new(&gpu, i32::MAX).map_err(e)?; // clamped to the least urgent
    let uploaded = OwnedEvent::fence(&gpu).map_err(e)?;
    let done = OwnedEvent::fence(&gpu).map_err(e)?;
    let calls = AtomicU32::new(0);

    // SAFETY: every pointer and handle came from `gpu` above, and lives until after the
    // synchronize below; `calls` outlives the stream's work.
    unsafe {
        assert!(
            gpu.query(done.raw()).map_err(e)?,
            "a never-recorded event is complete"
        );
        let src_bytes = std::slice::from_raw_parts_mut(src.ptr(), BYTES);
        for (i, b) in src_bytes.iter_mut().enumerate() {
            *b = (i * 7 + i / 251) as u8;
        }
        std::ptr::write_bytes(dst.ptr(), 0, BYTES);

        gpu.copy_to_device(dev.ptr(), src.ptr(), BYTES, upload.raw())
            .map_err(e)?;
        gpu.record(uploaded.raw(), upload.raw()).map_err(e)?;
        gpu.wait(download.raw(), uploaded.raw()).map_err(e)?;
        gpu.copy_to_host(dst.ptr(), dev.ptr(), BYTES, download.raw())
            .map_err(e)?;
        gpu.call_host(
            download.raw(),
            count_call,
            (&calls as *const AtomicU32).cast_mut().cast(),
        )
        .map_err(e)?;
        gpu.record(done.raw(), download.raw()).map_err(e)?;

        // Poll as the executor does: never block on the GPU, only ask.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !gpu.query(done.raw()).map_err(e)? {
            assert!(Instant::now() < deadline, "the copies never completed");
            std::thread::sleep(Duration::from_micros(100));
        }
        gpu.synchronize(download.raw()).map_err(e)?;
        gpu.synchronize(upload.raw()).map_err(e)?;
        assert_eq!(
            calls.load(Ordering::Acquire),
            1,
            "the host callback ran once"
        );
        let dst_bytes = std::slice::from_raw_parts(dst.ptr(), BYTES);
        assert!(
            dst_bytes == std::slice::from_raw_parts(src.ptr(), BYTES),
            "round-trip bytes differ"
        );
    }
    println!(
        "round trip of {BYTES} bytes on gpu:{} ({}) passed",
        gpu.ordinal(),
        gpu.name()
    );
    Ok(())
}

#[test]
fn devices_command_reports_a_driver_and_its_device() {
    let mut cmd = Command::new(kplace_testkit::kplace_bin!());
    cmd.arg("devices");
    let out = kplace_testkit::output(&mut with_fake_driver(cmd, 1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in [
        "CUDA driver: CUDA 13.0\n1 device\n",
        "  gpu:0  Fake GPU\n",
        "compute capability 9.0, 132 SMs, 80.0 GiB memory\n",
        "PCI 00000000:3B:00.0, stream priorities -5 (most urgent) to 0\n",
        // No NVML beside the fake driver: a warning, not an error.
        "warning: NVML unavailable",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }

    let mut cmd = Command::new(kplace_testkit::kplace_bin!());
    cmd.args(["devices", "--json"]);
    let out = kplace_testkit::output(&mut with_fake_driver(cmd, 1));
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let device = &json["driver"]["devices"][0];
    assert_eq!(json["driver"]["status"], "ready", "{json:#}");
    assert_eq!(device["uuid"], "GPU-00112233-4455-6677-8899-aabbccddeeff");
    assert_eq!(device["stream_priorities"]["greatest"], -5);
}

#[test]
fn devices_command_reports_a_driver_without_devices() {
    let mut cmd = Command::new(kplace_testkit::kplace_bin!());
    cmd.arg("devices");
    let out = kplace_testkit::output(&mut with_fake_driver(cmd, 0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with(
            "CUDA driver (CUDA 13.0) found but unusable: cuInit failed: \
             CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n"
        ),
        "{text}"
    );
}

#[test]
fn round_trip_runs_on_the_fake_driver() {
    let text = run_on_fake_driver("gpu_round_trip_through_pinned_memory_streams_and_events");
    assert!(
        text.contains("round trip of 4194304 bytes on gpu:0 (Fake GPU) passed"),
        "{text}"
    );
}

#[test]
fn driver_errors_and_context_references_on_the_fake_driver() {
    run_on_fake_driver("fake_driver_child_errors_and_context_references");
}

/// Runs only in a child on the fake driver (see [`run_on_fake_driver`]).
#[test]
fn fake_driver_child_errors_and_context_references() {
    if !on_fake_driver() {
        return;
    }
    // SAFETY: the fake driver's own library, already loaded by cudarc from the same path.
    let lib = unsafe { libloading::Library::new("libcuda.so") }.expect("the fake driver");
    // SAFETY: the symbol has this signature in fake_cuda.c.
    let refs = unsafe { lib.get::<unsafe extern "C" fn() -> i32>(b"fake_cuda_context_refs") }
        .expect("the fake driver's counter");
    // SAFETY: a plain counter read.
    let refs = || unsafe { refs() };

    // The probe retains each primary context only while it looks.
    let probe = probe();
    assert_eq!(probe.devices().len(), 1, "{probe}");
    assert_eq!(refs(), 0, "the probe released the context");

    let missing = CudaGpu::open(1).expect_err("one device only").to_string();
    assert!(
        missing.contains("gpu:1") && missing.contains("1 CUDA device (gpu:0)"),
        "{missing}"
    );

    let gpu = CudaGpu::open(0).expect("the fake device");
    assert_eq!(refs(), 1, "open holds one reference");
    assert_eq!(gpu.priority_range().greatest, -5);
    assert_eq!(
        cudarc::driver::result::ctx::get_current().expect("ask"),
        None,
        "open leaves the calling thread's context alone"
    );
    let unbound = gpu
        .alloc_device(64)
        .expect_err("no context current")
        .to_string();
    assert!(
        unbound.starts_with("gpu:0: cuMemAlloc(64 bytes) failed: CUDA_ERROR_INVALID_CONTEXT")
            && unbound.contains("bind_thread"),
        "{unbound}"
    );
    gpu.bind_thread().expect("bind");
    let zero = gpu.alloc_pinned(0).expect_err("zero bytes").to_string();
    assert!(
        zero.contains("cuMemHostAlloc(0 bytes, flags 0)")
            && zero.contains("CUDA_ERROR_INVALID_VALUE: invalid argument"),
        "{zero}"
    );
    drop(gpu);
    assert_eq!(refs(), 0, "drop releases the context");

    let shared = CudaProvider::new();
    let a = shared.open(0).expect("open");
    let b = shared.open(0).expect("open again");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(refs(), 1, "one device per ordinal, one reference");
}
