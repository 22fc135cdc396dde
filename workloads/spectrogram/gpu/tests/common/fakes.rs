//! The fake CUDA driver and NVRTC (`tests/support/`), built and loaded into the test process
//! before the GPU library's first create, so that its `dlopen("libcuda.so.1")` and
//! `dlopen("libnvrtc.so.13")` resolve to them (glibc matches an already loaded object by its
//! soname).
//!
//! The fake driver includes `runtime/cudakit/hostsim/src/hostsim.cpp`, the host simulator the
//! Rust GPU libraries' tests use, unchanged: its launcher, and its shim that compiles CUDA C as
//! host C++. Its own build script compiles only the Rust libraries' CUDA C (which the C library
//! does not link against), so this builds the simulator again here, with `kernels.inc` and
//! `table.inc` generated for `kernels/spectrogram.cu` by the same rule as its build script.

use std::ffi::{CString, c_char, c_int, c_long};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{kernels_dir, repo, run_compiler, temp_dir};

/// This crate's directory, `workloads/spectrogram/gpu`.
fn krate() -> PathBuf {
    repo().join("workloads/spectrogram/gpu")
}

/// What one thread did to the fake driver (`Stats` in fake_cuda.cpp).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub calls: c_long,
    pub allocs: c_long,
    pub frees: c_long,
    pub launches: c_long,
    pub pushes: c_long,
    pub pops: c_long,
    pub retains: c_long,
    pub releases: c_long,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub stream: usize,
}

/// The loaded fakes. The driver always; NVRTC unless the real one is wanted.
pub struct Fakes {
    cuda: libloading::Library,
    nvrtc: Option<libloading::Library>,
}

/// The directory of the simulator's sources.
fn hostsim_src() -> PathBuf {
    repo().join("runtime/cudakit/hostsim/src")
}

/// Writes the simulator's `kernels.inc` (the CUDA sources to include) and `table.inc` (one
/// `KP_HOSTSIM_KERNEL(name, barriers)` per kernel) for `kernels/*.cu` into `dir`, by
/// runtime/cudakit/hostsim/build.rs's rule: every `extern "C" __global__ void NAME(` is a kernel,
/// and one whose text up to the next kernel calls `__syncthreads(` runs its blocks as fibers.
fn write_kernel_tables(dir: &Path) {
    const MARKER: &str = "extern \"C\" __global__ void ";
    let mut sources: Vec<PathBuf> = fs::read_dir(kernels_dir())
        .expect("read kernels/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    let (mut includes, mut table) = (String::new(), String::new());
    for source in &sources {
        let text = fs::read_to_string(source).expect("read a .cu file");
        includes.push_str(&format!("#include \"{}\"\n", source.display()));
        let starts: Vec<usize> = text.match_indices(MARKER).map(|(at, _)| at).collect();
        for (i, &at) in starts.iter().enumerate() {
            let rest = &text[at + MARKER.len()..starts.get(i + 1).copied().unwrap_or(text.len())];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let barriers = rest.contains("__syncthreads(");
            table.push_str(&format!("KP_HOSTSIM_KERNEL({name}, {barriers})\n"));
        }
    }
    fs::write(dir.join("kernels.inc"), includes).expect("write kernels.inc");
    fs::write(dir.join("table.inc"), table).expect("write table.inc");
}

/// Compiles the fake driver into `dir/libcuda.so.1`.
fn build_cuda(dir: &Path) -> PathBuf {
    write_kernel_tables(dir);
    let out = dir.join("libcuda.so.1");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let mut cmd = Command::new(cxx);
    // The simulator's own flags (runtime/cudakit/hostsim/build.rs): IEEE arithmetic operation by
    // operation, as the kernels get from NVRTC with --fmad=false.
    cmd.args([
        "-shared",
        "-fPIC",
        "-std=c++17",
        "-O2",
        "-ffp-contract=off",
        "-fno-fast-math",
        "-fno-strict-aliasing",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wl,-soname,libcuda.so.1",
    ])
    .arg("-I")
    .arg(dir)
    .arg("-I")
    .arg(hostsim_src())
    .arg(krate().join("tests/support/fake_cuda.cpp"))
    .arg("-o")
    .arg(&out);
    run_compiler(&mut cmd, "the fake driver (tests/support/fake_cuda.cpp)");
    out
}

/// Compiles the fake NVRTC into `dir/libnvrtc.so.13`.
fn build_nvrtc(dir: &Path) -> PathBuf {
    let out = dir.join("libnvrtc.so.13");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(cc);
    cmd.args([
        "-shared",
        "-fPIC",
        "-std=c11",
        "-D_POSIX_C_SOURCE=200809L",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wl,-soname,libnvrtc.so.13",
    ])
    .arg(krate().join("tests/support/fake_nvrtc.c"))
    .arg("-o")
    .arg(&out);
    run_compiler(&mut cmd, "the fake NVRTC (tests/support/fake_nvrtc.c)");
    out
}

/// Whether the real driver can be loaded: then loading the fake under its name would not
/// take the real one's place, and tests that need the fake say so.
pub fn real_driver_present() -> bool {
    // SAFETY: only tries to load the library; the driver's initialisers are harmless.
    unsafe { libloading::Library::new("libcuda.so.1") }.is_ok()
}

impl Fakes {
    /// Builds and loads the fake driver and, when `fake_nvrtc`, the fake NVRTC. Call once per
    /// process, before the GPU library's first create.
    pub fn load(fake_nvrtc: bool) -> Fakes {
        let dir = temp_dir("spectrogram-fakes-");
        let cuda_path = build_cuda(dir.path());
        let nvrtc_path = fake_nvrtc.then(|| build_nvrtc(dir.path()));
        // SAFETY: test libraries built just now, with no initialisers of their own beyond the
        // C++ runtime's.
        let cuda = unsafe { libloading::Library::new(&cuda_path) }.expect("dlopen the fake driver");
        let nvrtc = nvrtc_path.map(|p| {
            // SAFETY: as above.
            unsafe { libloading::Library::new(&p) }.expect("dlopen the fake NVRTC")
        });
        // The mappings outlive the files.
        drop(dir);
        Fakes { cuda, nvrtc }
    }

    /// What this thread did to the driver so far.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        // SAFETY: the fake exports this function with this signature.
        unsafe {
            let f = self
                .cuda
                .get::<unsafe extern "C" fn(*mut Stats)>(b"fake_cuda_thread_stats\0")
                .expect("fake_cuda_thread_stats");
            f(&mut stats);
        }
        stats
    }

    /// Makes the next call named `call` on this thread fail with CUDA error `result`.
    pub fn fail_next(&self, call: &str, result: i32) {
        let call = CString::new(call).unwrap();
        // SAFETY: the fake exports this function; it copies the string.
        unsafe {
            let f = self
                .cuda
                .get::<unsafe extern "C" fn(*const c_char, c_int)>(b"fake_cuda_fail_next\0")
                .expect("fake_cuda_fail_next");
            f(call.as_ptr(), result);
        }
    }

    fn device_query(&self, symbol: &[u8], device: i32) -> i64 {
        // SAFETY: the fake exports these `long f(int)` functions; any device index in 0..4.
        unsafe {
            let f = self
                .cuda
                .get::<unsafe extern "C" fn(c_int) -> c_long>(symbol)
                .expect("fake query");
            f(device)
        }
    }

    /// How many modules were loaded on `device` (in the whole process).
    pub fn module_loads(&self, device: i32) -> i64 {
        self.device_query(b"fake_cuda_module_loads\0", device)
    }

    /// References held on `device`'s primary context (in the whole process).
    pub fn retained(&self, device: i32) -> i64 {
        self.device_query(b"fake_cuda_retained\0", device)
    }

    /// Contexts pushed on this thread and not popped.
    pub fn stack_depth(&self) -> i64 {
        // SAFETY: the fake exports this function.
        unsafe {
            let f = self
                .cuda
                .get::<unsafe extern "C" fn() -> c_long>(b"fake_cuda_stack_depth\0")
                .expect("fake_cuda_stack_depth");
            f()
        }
    }

    /// The image last loaded on `device`, and whether it is a CUBIN (then only its first 64
    /// bytes are kept).
    pub fn image(&self, device: i32) -> (Vec<u8>, bool) {
        let mut buf = vec![0u8; 1 << 20];
        let mut elf: c_int = 0;
        // SAFETY: the fake exports this function; it writes at most `len` bytes.
        let len = unsafe {
            let f = self
                .cuda
                .get::<unsafe extern "C" fn(c_int, *mut c_char, usize, *mut c_int) -> usize>(
                    b"fake_cuda_image\0",
                )
                .expect("fake_cuda_image");
            f(device, buf.as_mut_ptr().cast(), buf.len(), &mut elf)
        };
        assert!(len <= buf.len(), "image of {len} bytes");
        buf.truncate(len);
        (buf, elf != 0)
    }

    fn nvrtc(&self) -> &libloading::Library {
        self.nvrtc.as_ref().expect("the fake NVRTC is not loaded")
    }

    /// Makes the next compilation on this thread fail.
    pub fn fail_next_compile(&self) {
        // SAFETY: the fake exports this function.
        unsafe {
            let f = self
                .nvrtc()
                .get::<unsafe extern "C" fn()>(b"fake_nvrtc_fail_next_compile\0")
                .expect("fake_nvrtc_fail_next_compile");
            f();
        }
    }

    /// The last compilation's source, program name and options.
    pub fn last_compile(&self) -> (String, String, Vec<String>) {
        let mut source = vec![0u8; 1 << 20];
        let mut name = vec![0u8; 256];
        let mut options = vec![0u8; 1024];
        type Last = unsafe extern "C" fn(
            *mut c_char,
            usize,
            *mut c_char,
            usize,
            *mut c_char,
            usize,
        ) -> usize;
        // SAFETY: the fake exports this function; it writes NUL-terminated text within each
        // buffer's length.
        unsafe {
            let f = self
                .nvrtc()
                .get::<Last>(b"fake_nvrtc_last\0")
                .expect("fake_nvrtc_last");
            f(
                source.as_mut_ptr().cast(),
                source.len(),
                name.as_mut_ptr().cast(),
                name.len(),
                options.as_mut_ptr().cast(),
                options.len(),
            );
        }
        let options = super::message(&options)
            .lines()
            .map(str::to_owned)
            .collect();
        (super::message(&source), super::message(&name), options)
    }
}
