//! `kernels/spectrogram.cu` with the real NVRTC, which needs no GPU:
//!
//! - compiled directly with the library's options for compute_90 (PTX) and sm_90 (PTX and a
//!   CUBIN): no warnings (NVRTC has no -Werror; its log is empty exactly when there are none),
//!   every kernel in the PTX, and no fused multiply-add anywhere;
//! - compiled by the library itself, through its create, with the fake driver standing in for
//!   libcuda (`common/fakes.rs`, loaded before NVRTC in both tests): a CUBIN for a device NVRTC
//!   knows (9.0), PTX for the newest architecture it knows for a device newer than that (99.0).
//!
//! libnvrtc is found and loaded where the machine keeps it (`kplace_cuda_libs`), so the
//! library's `dlopen("libnvrtc.so.13")` resolves to it. When it cannot be loaded the tests
//! print `skipped: <reason>` and pass, unless `KPLACE_REQUIRE_NVRTC=1` (or
//! `KPLACE_REQUIRE_GPU=1`), when they fail.

mod common;

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::Path;
use std::sync::OnceLock;

use common::fakes::Fakes;
use common::*;
use kplace_cuda_libs::Library as CudaLibrary;

/// The options the library compiles with, after `--gpu-architecture=...`.
const OPTIONS: [&str; 4] = [
    "--fmad=false",
    "--ftz=false",
    "--prec-div=true",
    "--prec-sqrt=true",
];

/// The fake driver, loaded first, then NVRTC: NVRTC opens libcuda.so.1 itself (for the
/// driver's compute cache), so on a machine with a driver this order makes both NVRTC and the
/// library find the fake. Returns NVRTC's path, or `None` after printing why there is none (or
/// failing, if it is required).
fn setup() -> Option<(&'static Fakes, &'static Path)> {
    static FAKES: OnceLock<Fakes> = OnceLock::new();
    let fakes = FAKES.get_or_init(|| Fakes::load(false));
    let report = kplace_cuda_libs::find(CudaLibrary::Nvrtc);
    match report.path() {
        Some(path) => Some((fakes, path)),
        None => {
            kplace_testkit::gpu::skip_or_fail_nvrtc(format!(
                "libnvrtc could not be loaded: {}",
                report.not_found_message()
            ));
            None
        }
    }
}

type Program = *mut c_void;

/// The real NVRTC, called directly.
struct Nvrtc {
    lib: libloading::Library,
}

/// One compilation's result.
struct Compiled {
    result: c_int,
    log: String,
    ptx: String,
    cubin: Option<Vec<u8>>,
}

impl Nvrtc {
    fn open(path: &Path) -> Nvrtc {
        // SAFETY: the NVRTC kplace_cuda_libs found and already loaded.
        let lib = unsafe { libloading::Library::new(path) }.expect("dlopen libnvrtc");
        Nvrtc { lib }
    }

    /// A function of NVRTC's C API.
    ///
    /// # Safety
    /// `T` must be the function's type.
    unsafe fn f<T: Copy>(&self, name: &str) -> T {
        let symbol = CString::new(name).unwrap();
        // SAFETY: forwarded from the caller.
        unsafe { *self.lib.get::<T>(symbol.as_bytes_with_nul()).expect(name) }
    }

    fn archs(&self) -> Vec<c_int> {
        // SAFETY: the signatures of nvrtc.h; room for `count` values.
        unsafe {
            let mut count: c_int = 0;
            let n: unsafe extern "C" fn(*mut c_int) -> c_int = self.f("nvrtcGetNumSupportedArchs");
            assert_eq!(n(&mut count), 0);
            let mut archs = vec![0; count as usize];
            let get: unsafe extern "C" fn(*mut c_int) -> c_int = self.f("nvrtcGetSupportedArchs");
            assert_eq!(get(archs.as_mut_ptr()), 0);
            archs
        }
    }

    /// Compiles spectrogram.cu with `options`.
    fn compile(&self, options: &[String]) -> Compiled {
        let source = std::fs::read_to_string(kernels_dir().join("spectrogram.cu")).unwrap();
        let source = CString::new(source).unwrap();
        let options: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()).unwrap())
            .collect();
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        type Create = unsafe extern "C" fn(
            *mut Program,
            *const c_char,
            *const c_char,
            c_int,
            *const *const c_char,
            *const *const c_char,
        ) -> c_int;
        type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
        type Size = unsafe extern "C" fn(Program, *mut usize) -> c_int;
        type Get = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
        // SAFETY: the signatures of nvrtc.h; every buffer has the size NVRTC reported; the
        // program is destroyed once, at the end.
        unsafe {
            let mut program: Program = std::ptr::null_mut();
            let create: Create = self.f("nvrtcCreateProgram");
            let r = create(
                &mut program,
                source.as_ptr(),
                c"spectrogram.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            );
            assert_eq!(r, 0, "nvrtcCreateProgram");
            let compile: CompileFn = self.f("nvrtcCompileProgram");
            let result = compile(program, pointers.len() as c_int, pointers.as_ptr());
            let read = |size: Size, get: Get| -> Vec<u8> {
                let mut n = 0usize;
                assert_eq!(size(program, &mut n), 0);
                let mut buf = vec![0u8; n];
                if n > 0 {
                    assert_eq!(get(program, buf.as_mut_ptr().cast()), 0);
                }
                buf
            };
            let text = |bytes: Vec<u8>| message(&[bytes, vec![0]].concat());
            let log = text(read(
                self.f("nvrtcGetProgramLogSize"),
                self.f("nvrtcGetProgramLog"),
            ));
            let (mut ptx, mut cubin) = (String::new(), None);
            if result == 0 {
                ptx = text(read(self.f("nvrtcGetPTXSize"), self.f("nvrtcGetPTX")));
                if options[0].to_str().unwrap().contains("=sm_") {
                    cubin = Some(read(self.f("nvrtcGetCUBINSize"), self.f("nvrtcGetCUBIN")));
                }
            }
            let destroy: unsafe extern "C" fn(*mut Program) -> c_int =
                self.f("nvrtcDestroyProgram");
            assert_eq!(destroy(&mut program), 0);
            Compiled {
                result,
                log,
                ptx,
                cubin,
            }
        }
    }
}

/// Checks a PTX text: for `target`, every kernel's entry, no fused multiply-add, and every
/// floating-point product and sum explicitly rounded (`.rn`: never contracted by ptxas).
fn check_ptx(ptx: &str, target: &str, what: &str) {
    assert!(
        ptx.contains(&format!(".target {target}")),
        "{what}: PTX not for {target}"
    );
    for function in FUNCTIONS {
        let entry = format!(".entry {function}(");
        assert!(ptx.contains(&entry), "{what}: {entry} missing from the PTX");
    }
    for line in ptx.lines() {
        let Some(op) = line.split_whitespace().next() else {
            continue;
        };
        assert!(!op.starts_with("fma."), "{what}: the PTX fuses: {line}");
        let float = op.ends_with(".f32") || op.ends_with(".f64");
        let arithmetic = ["mul.", "add.", "sub."].iter().any(|p| op.starts_with(p));
        if float && arithmetic {
            assert!(
                op.contains(".rn."),
                "{what}: not explicitly rounded: {line}"
            );
        }
    }
}

fn options(architecture: &str) -> Vec<String> {
    std::iter::once(format!("--gpu-architecture={architecture}"))
        .chain(OPTIONS.iter().map(|o| o.to_string()))
        .collect()
}

#[test]
fn spectrogram_cu_compiles_without_warnings_for_compute_90_and_sm_90() {
    let Some((_, path)) = setup() else { return };
    let nvrtc = Nvrtc::open(path);
    // The options here are the library's: its source spells each of them.
    let c_source = std::fs::read_to_string(kernels_dir().join("spectrogram_gpu.c")).unwrap();
    for option in OPTIONS {
        assert!(
            c_source.contains(&format!("\"{option}\"")),
            "spectrogram_gpu.c does not pass {option}"
        );
    }

    let ptx = nvrtc.compile(&options("compute_90"));
    assert_eq!(ptx.result, 0, "compute_90: {}", ptx.log);
    assert!(ptx.log.is_empty(), "compute_90: warnings:\n{}", ptx.log);
    assert!(ptx.cubin.is_none());
    check_ptx(&ptx.ptx, "sm_90", "compute_90");

    let native = nvrtc.compile(&options("sm_90"));
    assert_eq!(native.result, 0, "sm_90: {}", native.log);
    assert!(native.log.is_empty(), "sm_90: warnings:\n{}", native.log);
    check_ptx(&native.ptx, "sm_90", "sm_90");
    let cubin = native.cubin.expect("a CUBIN for sm_90");
    assert_eq!(&cubin[..4], b"\x7fELF", "the CUBIN is an ELF image");
}

#[test]
fn the_library_compiles_a_cubin_or_ptx_for_the_device() {
    let Some((fakes, path)) = setup() else { return };
    let nvrtc = Nvrtc::open(path);

    // Device 0, compute capability 9.0: native code.
    let (m, n) = (4u64, 1024u64);
    let mut rng = rng(0x5eed_0201);
    let iq = random_ci16(&mut rng, m as usize, n as usize);
    let input = Buffer::from_i16(&[m, n], &iq);
    let stage = Stage::new(ddesc(Dtype::CI16, &[m, n]), ddesc(Dtype::CF32, &[m, n])).split(0, 2);
    let mut got = Buffer::new(Dtype::CF32, &[m, n]);
    run(
        fresh_gpu(),
        FFT,
        &stage,
        &input,
        &mut got,
        std::ptr::null_mut(),
    );
    let (image, elf) = fakes.image(0);
    assert!(
        elf,
        "device 0 (9.0) was given PTX: {}",
        String::from_utf8_lossy(&image)
    );
    assert_eq!(&image[..4], b"\x7fELF");
    let mut want = Buffer::new(Dtype::CF32, &[m, n]);
    reference(FFT, &stage, &input, &mut want);
    assert_eq!(got.bits(), want.bits(), "the simulated kernel");

    // Device 1, compute capability 99.0: PTX for the newest architecture this NVRTC knows.
    let newest = *nvrtc.archs().iter().max().expect("architectures");
    let avg = Stage::new(ddesc(Dtype::F32, &[2, 8]), ddesc(Dtype::F32, &[8])).device(1);
    drop(create(fresh_gpu().kernel(AVERAGE), &avg).expect("create on device 1"));
    let (image, elf) = fakes.image(1);
    assert!(!elf, "device 1 (99.0) was given a CUBIN");
    let ptx = String::from_utf8(image).expect("PTX text");
    check_ptx(&ptx, &format!("sm_{newest}"), "the library's PTX");
    assert_eq!(fakes.module_loads(0), 1);
    assert_eq!(fakes.module_loads(1), 1);
}
