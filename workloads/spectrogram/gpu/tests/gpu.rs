//! On a real GPU: every kernel of the library (built now from the sources), on device memory and
//! a stream of its own, against the CPU library, bit for bit (and within the tolerances the
//! kernels promise): the FFT for N from 2 to 4096 with every tiling, power, average, and the
//! chain as workloads/spectrogram/graph.yaml runs it.
//!
//! The test drives the driver itself, as the runtime does: the device's primary context made
//! current around create and launch, device buffers, a stream, one synchronization at the end
//! of each stage (the library itself never synchronizes).
//!
//! Without a usable GPU (no driver, no device, no NVRTC) it prints `skipped: <reason>` and
//! passes, unless `KPLACE_REQUIRE_GPU=1`, when it fails.

mod common;

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use common::*;
use kplace_abi::{Tensor, Tile};
use kplace_cuda_libs::Library as CudaLibrary;
use kplace_testkit::gpu::skip_or_fail;

type CuResult = c_int;
type Context = *mut c_void;
type Stream = *mut c_void;

/// The driver calls the test makes, looked up in the libcuda kplace_cuda_libs found.
struct Driver {
    _lib: libloading::Library,
    get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    retain: unsafe extern "C" fn(*mut Context, c_int) -> CuResult,
    release: unsafe extern "C" fn(c_int) -> CuResult,
    push: unsafe extern "C" fn(Context) -> CuResult,
    pop: unsafe extern "C" fn(*mut Context) -> CuResult,
    alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    free: unsafe extern "C" fn(u64) -> CuResult,
    htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    memset: unsafe extern "C" fn(u64, u8, usize) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut Stream, c_uint) -> CuResult,
    stream_sync: unsafe extern "C" fn(Stream) -> CuResult,
    stream_destroy: unsafe extern "C" fn(Stream) -> CuResult,
}

impl Driver {
    fn open(path: &std::path::Path) -> Driver {
        // SAFETY: the driver kplace_cuda_libs found and loaded.
        let lib = unsafe { libloading::Library::new(path) }.expect("dlopen libcuda");
        // SAFETY: each symbol has the type of cuda.h's function of that exported name.
        unsafe {
            macro_rules! get {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes()).expect($name)
                };
            }
            Driver {
                get_error_name: get!("cuGetErrorName"),
                init: get!("cuInit"),
                device_get_count: get!("cuDeviceGetCount"),
                device_get: get!("cuDeviceGet"),
                retain: get!("cuDevicePrimaryCtxRetain"),
                release: get!("cuDevicePrimaryCtxRelease_v2"),
                push: get!("cuCtxPushCurrent_v2"),
                pop: get!("cuCtxPopCurrent_v2"),
                alloc: get!("cuMemAlloc_v2"),
                free: get!("cuMemFree_v2"),
                htod: get!("cuMemcpyHtoD_v2"),
                dtoh: get!("cuMemcpyDtoH_v2"),
                memset: get!("cuMemsetD8_v2"),
                stream_create: get!("cuStreamCreate"),
                stream_sync: get!("cuStreamSynchronize"),
                stream_destroy: get!("cuStreamDestroy_v2"),
                _lib: lib,
            }
        }
    }

    /// Waits for the legacy default stream: a memset of device memory, or a copy from
    /// pageable memory, may return before it lands, on a stream that the test's non-blocking
    /// stream does not wait for.
    fn legacy_sync(&self) {
        // SAFETY: the null stream is the current context's legacy default stream.
        let r = unsafe { (self.stream_sync)(std::ptr::null_mut()) };
        self.check(r, "cuStreamSynchronize(legacy stream)");
    }

    /// Panics with the driver's name for a failed call.
    fn check(&self, r: CuResult, call: &str) {
        if r != 0 {
            let mut name: *const c_char = std::ptr::null();
            // SAFETY: a valid out-pointer; the name is a static string.
            let name = unsafe {
                (self.get_error_name)(r, &mut name);
                if name.is_null() {
                    format!("error {r}")
                } else {
                    CStr::from_ptr(name).to_string_lossy().into_owned()
                }
            };
            panic!("{call} failed: {name}");
        }
    }
}

/// A tensor's bytes in device memory (the context current), freed on drop.
struct DeviceTensor<'a> {
    driver: &'a Driver,
    ptr: u64,
    like: &'a Buffer,
}

impl<'a> DeviceTensor<'a> {
    /// Device memory the size of `like`, holding its bytes.
    fn upload(driver: &'a Driver, like: &'a Buffer) -> Self {
        let mut ptr = 0u64;
        let bytes = like.desc.bytes as usize;
        // SAFETY: a current context; `like` holds `bytes` bytes.
        unsafe {
            driver.check((driver.alloc)(&mut ptr, bytes), "cuMemAlloc");
            let host = like.input(kplace_abi::MemorySpace::HOST).data;
            driver.check((driver.htod)(ptr, host, bytes), "cuMemcpyHtoD");
        }
        driver.legacy_sync();
        DeviceTensor { driver, ptr, like }
    }

    fn tensor(&self) -> Tensor {
        Tensor {
            desc: self.like.input(kplace_abi::MemorySpace::DEVICE).desc,
            data: self.ptr as *mut c_void,
        }
    }

    /// The bytes back into `out` (of the same size).
    fn download(&self, out: &mut Buffer) {
        let bytes = out.desc.bytes as usize;
        assert_eq!(bytes as u64, self.like.desc.bytes);
        let host = out.output(kplace_abi::MemorySpace::HOST).data;
        // SAFETY: `out` holds `bytes` bytes; the device buffer too.
        unsafe {
            self.driver
                .check((self.driver.dtoh)(host, self.ptr, bytes), "cuMemcpyDtoH")
        };
    }
}

impl Drop for DeviceTensor<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated in upload, freed once; the stream was synchronized.
        unsafe { (self.driver.free)(self.ptr) };
    }
}

/// Runs `name` on the GPU over `input` into a fresh output like `output` (filled with 0xFF
/// bytes first, so an element not written shows as NaN), synchronizes and returns it.
#[allow(clippy::too_many_arguments)]
fn run_on_gpu(
    driver: &Driver,
    stream: Stream,
    name: &str,
    stage: &Stage<'_>,
    input: &DeviceTensor<'_>,
    output: &DeviceTensor<'_>,
    result: &mut Buffer,
) {
    // SAFETY: a current context; the output's buffer holds its bytes.
    unsafe {
        driver.check(
            (driver.memset)(output.ptr, 0xFF, output.like.desc.bytes as usize),
            "cuMemsetD8",
        )
    };
    driver.legacy_sync();
    let state =
        create(fresh_gpu().kernel(name), stage).unwrap_or_else(|e| panic!("{name}: create: {e:?}"));
    let rows = input.like.desc.shape[0];
    let tile = stage.split.map_or(rows, |(_, t)| t);
    for i in 0..rows / tile {
        let tile = Tile {
            begin: i * tile,
            count: tile,
        };
        state
            .launch(input.tensor(), output.tensor(), tile, stream)
            .unwrap_or_else(|e| panic!("{name}: launch: {e:?}"));
    }
    // SAFETY: the test's own stream.
    driver.check(
        unsafe { (driver.stream_sync)(stream) },
        "cuStreamSynchronize",
    );
    drop(state);
    output.download(result);
}

#[test]
fn the_kernels_on_a_gpu_match_the_cpu_library_bit_for_bit() {
    // Both libraries first, GPU or not: they need none, and a carried executable that cannot
    // find them must fail here, not only on the GPU machine.
    cpu();
    fresh_gpu();
    let found = kplace_cuda_libs::find(CudaLibrary::Cuda);
    let Some(path) = found.path() else {
        skip_or_fail(format!("no CUDA driver: {}", found.not_found_message()));
        return;
    };
    let nvrtc = kplace_cuda_libs::find(CudaLibrary::Nvrtc);
    if !nvrtc.is_loaded() {
        skip_or_fail(format!("no NVRTC: {}", nvrtc.not_found_message()));
        return;
    }
    let driver = Driver::open(path);
    // SAFETY: plain driver calls with valid out-pointers; the context is pushed and popped on
    // this thread, released once at the end.
    unsafe {
        let r = (driver.init)(0);
        let mut count = 0;
        if r != 0 || (driver.device_get_count)(&mut count) != 0 || count == 0 {
            skip_or_fail(format!(
                "no usable CUDA device (cuInit: {r}, {count} devices)"
            ));
            return;
        }
        let mut device = 0;
        driver.check((driver.device_get)(&mut device, 0), "cuDeviceGet");
        let mut context: Context = std::ptr::null_mut();
        driver.check(
            (driver.retain)(&mut context, device),
            "cuDevicePrimaryCtxRetain",
        );
        driver.check((driver.push)(context), "cuCtxPushCurrent");
        let mut stream: Stream = std::ptr::null_mut();
        driver.check((driver.stream_create)(&mut stream, 1), "cuStreamCreate");

        check_all(&driver, stream);

        driver.check((driver.stream_destroy)(stream), "cuStreamDestroy");
        let mut popped: Context = std::ptr::null_mut();
        driver.check((driver.pop)(&mut popped), "cuCtxPopCurrent");
        driver.check((driver.release)(device), "cuDevicePrimaryCtxRelease");
    }
}

fn check_all(driver: &Driver, stream: Stream) {
    let mut rng = rng(0x5eed_0301);
    for n in [2u64, 64, 1024, 4096] {
        for m in [4u64, 16] {
            let iq = random_ci16(&mut rng, m as usize, n as usize);
            let samples = Buffer::from_i16(&[m, n], &iq);
            let fft = || Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n]));
            let pow = || Stage::new(ddesc(Dtype::CF32, &[m, n]), ddesc(Dtype::F32, &[m, n]));
            let avg = Stage::new(ddesc(Dtype::F32, &[m, n]), ddesc(Dtype::F32, &[n]))
                .params(&[("scale", "0.5")]);
            let mut spectra = Buffer::new(Dtype::CF32, &[m, n]);
            let mut power = Buffer::new(Dtype::F32, &[m, n]);
            let mut psd = Buffer::new(Dtype::F32, &[n]);
            reference(FFT, &fft(), &samples, &mut spectra);
            reference(POWER, &pow(), &spectra, &mut power);
            reference(AVERAGE, &avg, &power, &mut psd);

            let d_samples = DeviceTensor::upload(driver, &samples);
            let d_spectra = DeviceTensor::upload(driver, &spectra);
            let d_power = DeviceTensor::upload(driver, &power);
            let d_psd = DeviceTensor::upload(driver, &psd);
            for split in splits(m) {
                let mut got = Buffer::new(Dtype::CF32, &[m, n]);
                run_on_gpu(
                    driver,
                    stream,
                    FFT,
                    &fft().tiled(split),
                    &d_samples,
                    &d_spectra,
                    &mut got,
                );
                let err = fft_error(got.f32s(), spectra.f32s(), n as usize);
                assert!(err < 1e-5, "fft N={n} M={m} {split:?}: error {err:e}");
                assert!(got.bits() == spectra.bits(), "fft N={n} M={m} {split:?}");

                // Power from the GPU's spectra (equal to the CPU's, as just checked).
                let mut got = Buffer::new(Dtype::F32, &[m, n]);
                run_on_gpu(
                    driver,
                    stream,
                    POWER,
                    &pow().tiled(split),
                    &d_spectra,
                    &d_power,
                    &mut got,
                );
                let err = max_rel_error(got.f32s(), power.f32s());
                assert!(err < 1e-6, "power N={n} M={m} {split:?}: error {err:e}");
                assert!(got.bits() == power.bits(), "power N={n} M={m} {split:?}");
            }
            let mut got = Buffer::new(Dtype::F32, &[n]);
            run_on_gpu(driver, stream, AVERAGE, &avg, &d_power, &d_psd, &mut got);
            let err = max_rel_error(got.f32s(), psd.f32s());
            assert!(err < 1e-6, "average N={n} M={m}: error {err:e}");
            assert!(got.bits() == psd.bits(), "average N={n} M={m}");
        }
    }
    println!("the GPU's results are the CPU library's, bit for bit");
}
