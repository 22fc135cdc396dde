//! Shared by the tests: the libraries loaded through the ABI (the cargo-built GPU library, and
//! the CPU library compiled from `kernels/spectrogram.c` as the reference), 64-byte aligned
//! tensors, create / launch / destroy as the runtime calls them, and the fake driver and NVRTC
//! ([`fakes`]) that run the GPU library on the host.
//!
//! Every random input comes from a seeded PCG, so the tests are deterministic.

#![allow(dead_code)]

pub mod fakes;

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kplace_abi::{
    ENTRY_SYMBOL, EntryFn, Kernel, KernelConfig, LaunchArgs, Library, MAX_RANK, MemorySpace, Param,
    SPLIT_NONE, Status, Tensor, TensorDesc, Tile,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

pub use kplace_abi::Dtype;

pub const FFT: &str = "spectrogram.fft";
pub const POWER: &str = "spectrogram.power";
pub const AVERAGE: &str = "spectrogram.average";

/// The CUDA functions of `kernels/spectrogram.cu`.
pub const FUNCTIONS: [&str; 3] = [
    "spectrogram_fft",
    "spectrogram_power",
    "spectrogram_average",
];

/// `graphs/spectrogram/gpu`.
pub fn krate() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `graphs/spectrogram/kernels`.
pub fn kernels_dir() -> PathBuf {
    krate().join("../kernels")
}

/// The repository's root.
pub fn repo() -> PathBuf {
    krate().join("../../..")
}

/// A seeded generator.
pub fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

// ---------------------------------------------------------------------------------------------
// Libraries
// ---------------------------------------------------------------------------------------------

/// A loaded kernel library. Kept in a static, so it is never unloaded and its table lives as
/// long as the test binary.
pub struct Loaded {
    _lib: libloading::Library,
    pub table: &'static Library,
}

/// Loads the kernel library at `path` and reads its table.
pub fn load(path: &Path) -> Loaded {
    // SAFETY: the file is one of this repository's kernel libraries, whose loading runs no
    // initialisers of its own.
    let lib = unsafe { libloading::Library::new(path) }
        .unwrap_or_else(|e| panic!("dlopen {}: {e}", path.display()));
    // SAFETY: kplace.h gives the entry symbol the type `EntryFn`.
    let entry: EntryFn = unsafe { *lib.get::<EntryFn>(ENTRY_SYMBOL).expect("entry symbol") };
    // SAFETY: the entry takes no arguments and returns a static table that lives while the
    // library is loaded; the library is kept loaded for the rest of the process.
    let table = unsafe { entry().as_ref() }.expect("kplace_library_entry returned null");
    Loaded { _lib: lib, table }
}

/// Where cargo put this crate's cdylib: target/<profile>/libkplace_spectrogram_gpu.so, the
/// parent of the test binaries' directory.
pub fn cargo_built_path() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .join("libkplace_spectrogram_gpu.so")
}

/// The GPU library as cargo built it. `cargo test` does not rebuild a cdylib-only crate's
/// library (only `cargo build` does), so this fails, saying so, when the file is older than
/// its sources rather than test a stale build.
pub fn gpu() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = cargo_built_path();
        assert!(
            path.is_file(),
            "{} is missing: run `cargo build -p kplace-spectrogram-gpu` first",
            path.display()
        );
        let modified = |p: &Path| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let built = modified(&path);
        for source in [
            "spectrogram.cu",
            "spectrogram_gpu.c",
            "spectrogram_contract.h",
        ] {
            let source = kernels_dir().join(source);
            assert!(
                modified(&source) <= built,
                "{} is older than {}: run `cargo build -p kplace-spectrogram-gpu` (cargo test \
                 does not rebuild a cdylib-only crate's library)",
                path.display(),
                source.display()
            );
        }
        load(&path)
    })
}

/// The GPU library compiled now from `kernels/spectrogram_gpu.c` and `kernels/spectrogram.cu`,
/// with the flags build.rs uses, into a temporary directory: what the tests that run the
/// library use, so that they always test the sources as they are.
pub fn fresh_gpu() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = temp_dir("spectrogram-gpu-c-");
        write_cu_inc(dir.path());
        let out = dir.path().join("libspectrogram_gpu.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let mut cmd = Command::new(&cc);
        cmd.args([
            "-shared",
            "-fPIC",
            "-O2",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
        ])
        .arg("-I")
        .arg(repo().join("runtime/include"))
        .arg("-I")
        .arg(dir.path())
        .arg(kernels_dir().join("spectrogram_gpu.c"))
        .arg("-o")
        .arg(&out)
        .args(["-ldl", "-lpthread", "-lm"]);
        run_compiler(&mut cmd, "spectrogram_gpu.c");
        load(&out)
    })
}

/// Writes `spectrogram_cu.inc` into `dir` as build.rs does: the bytes of spectrogram.cu and a
/// 0, as a C array initializer.
fn write_cu_inc(dir: &Path) {
    let source = std::fs::read(kernels_dir().join("spectrogram.cu")).expect("spectrogram.cu");
    let mut inc = String::new();
    for byte in source.iter().chain(&[0u8]) {
        inc.push_str(&format!("0x{byte:02x},\n"));
    }
    std::fs::write(dir.join("spectrogram_cu.inc"), inc).expect("write spectrogram_cu.inc");
}

/// The CPU library, the reference: `kernels/spectrogram.c` compiled with the system C compiler
/// (`$CC`, else `cc`) and the strict flags it promises to build under.
pub fn cpu() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = temp_dir("spectrogram-c-");
        let out = dir.path().join("libspectrogram.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let mut cmd = Command::new(&cc);
        cmd.args([
            "-shared",
            "-fPIC",
            "-O2",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wpedantic",
        ])
        .arg("-I")
        .arg(repo().join("runtime/include"))
        .arg(kernels_dir().join("spectrogram.c"))
        .arg("-o")
        .arg(&out)
        .arg("-lm");
        run_compiler(&mut cmd, "spectrogram.c");
        load(&out)
    })
}

/// A temporary directory under cargo's scratch directory for this package's tests.
pub fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir")
}

/// Runs a compiler command, failing the test with its output if it fails.
pub fn run_compiler(cmd: &mut Command, what: &str) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler for {what} ({cmd:?}): {e}"));
    assert!(
        output.status.success(),
        "building {what} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A NUL-terminated string of a table.
pub fn text(p: *const c_char) -> &'static str {
    assert!(!p.is_null(), "null string in the table");
    // SAFETY: the table's strings are NUL-terminated and static in the loaded library.
    unsafe { CStr::from_ptr(p) }.to_str().expect("UTF-8")
}

impl Loaded {
    pub fn kernels(&self) -> &'static [Kernel] {
        assert!(!self.table.kernels.is_null());
        // SAFETY: the table holds n_kernels entries at `kernels`, static in the library.
        unsafe { std::slice::from_raw_parts(self.table.kernels, self.table.n_kernels as usize) }
    }

    pub fn kernel(&self, name: &str) -> &'static Kernel {
        self.kernels()
            .iter()
            .find(|k| text(k.name) == name)
            .unwrap_or_else(|| panic!("no kernel {name}"))
    }

    /// The memory space this library's kernels take.
    pub fn memory(&self) -> MemorySpace {
        self.kernels()[0].memory
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------------

/// The runtime's unit of alignment: every tensor starts on a 64-byte boundary.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Chunk([u8; 64]);

/// A tensor: its descriptor and 64-byte aligned host bytes. For the GPU library under the fake
/// driver, "device memory" is host memory, so the same buffers serve both libraries; only the
/// descriptor's memory space differs.
pub struct Buffer {
    pub desc: TensorDesc,
    chunks: Vec<Chunk>,
}

/// The descriptor the runtime would pass: `bytes` exactly what the shape implies.
pub fn desc(dtype: Dtype, dims: &[u64], memory: MemorySpace) -> TensorDesc {
    assert!(!dims.is_empty() && dims.len() <= MAX_RANK);
    let mut shape = [0; MAX_RANK];
    shape[..dims.len()].copy_from_slice(dims);
    TensorDesc {
        dtype,
        memory,
        rank: dims.len() as u32,
        reserved: 0,
        shape,
        bytes: dtype.bytes_for(dims).expect("size"),
    }
}

/// A device-memory descriptor (what the GPU library takes).
pub fn ddesc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    desc(dtype, dims, MemorySpace::DEVICE)
}

impl Buffer {
    /// A tensor whose every byte is 0xFF: NaN as f32, so an element a kernel fails to write
    /// shows.
    pub fn new(dtype: Dtype, dims: &[u64]) -> Buffer {
        let desc = desc(dtype, dims, MemorySpace::HOST);
        let chunks = vec![Chunk([0xFF; 64]); (desc.bytes as usize).div_ceil(64)];
        Buffer { desc, chunks }
    }

    /// A tensor holding `values` (f32 element parts).
    pub fn from_f32(dims: &[u64], dtype: Dtype, values: &[f32]) -> Buffer {
        let mut b = Buffer::new(dtype, dims);
        b.f32s_mut().copy_from_slice(values);
        b
    }

    /// A ci16 tensor holding `values` (I then Q).
    pub fn from_i16(dims: &[u64], values: &[i16]) -> Buffer {
        let mut b = Buffer::new(Dtype::CI16, dims);
        let n = b.desc.bytes as usize / 2;
        // SAFETY: the chunks hold at least `bytes` bytes, 64-byte aligned; any bits are an i16.
        unsafe { std::slice::from_raw_parts_mut(b.chunks.as_mut_ptr().cast::<i16>(), n) }
            .copy_from_slice(values);
        b
    }

    pub fn f32s(&self) -> &[f32] {
        // SAFETY: the chunks hold at least `bytes` bytes, 64-byte aligned; any bits are an f32.
        unsafe { std::slice::from_raw_parts(self.chunks.as_ptr().cast::<f32>(), self.floats()) }
    }

    pub fn f32s_mut(&mut self) -> &mut [f32] {
        let n = self.floats();
        // SAFETY: as in f32s, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.chunks.as_mut_ptr().cast::<f32>(), n) }
    }

    fn floats(&self) -> usize {
        self.desc.bytes as usize / 4
    }

    /// The values' bits, for exact comparisons.
    pub fn bits(&self) -> Vec<u32> {
        self.f32s().iter().map(|v| v.to_bits()).collect()
    }

    /// The tensor as an input of a launch, its descriptor in `memory`.
    pub fn input(&self, memory: MemorySpace) -> Tensor {
        Tensor {
            desc: TensorDesc {
                memory,
                ..self.desc
            },
            data: self.chunks.as_ptr().cast_mut().cast::<c_void>(),
        }
    }

    /// The tensor as an output of a launch, its descriptor in `memory`.
    pub fn output(&mut self, memory: MemorySpace) -> Tensor {
        Tensor {
            desc: TensorDesc {
                memory,
                ..self.desc
            },
            data: self.chunks.as_mut_ptr().cast::<c_void>(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// create / workspace_bytes / launch / destroy
// ---------------------------------------------------------------------------------------------

/// A refusal: the status and the kernel's text.
pub type Failure = (Status, String);

/// A state from create, destroyed when dropped.
pub struct State {
    pub kernel: &'static Kernel,
    pub ptr: *mut c_void,
}

// SAFETY: the ABI lets launches of disjoint tiles run concurrently on one state from any
// thread (launch only reads it), which is the only use the tests make of a shared state.
unsafe impl Sync for State {}

/// The stage's configuration in the tests' terms.
#[derive(Clone)]
pub struct Stage<'a> {
    pub params: &'a [(&'a str, &'a str)],
    pub inputs: Vec<TensorDesc>,
    pub outputs: Vec<TensorDesc>,
    pub split: Option<(u32, u64)>,
    pub device: u32,
}

impl<'a> Stage<'a> {
    pub fn new(input: TensorDesc, output: TensorDesc) -> Stage<'a> {
        Stage {
            params: &[],
            inputs: vec![input],
            outputs: vec![output],
            split: None,
            device: 0,
        }
    }

    pub fn params(mut self, params: &'a [(&'a str, &'a str)]) -> Self {
        self.params = params;
        self
    }

    pub fn split(mut self, axis: u32, tile: u64) -> Self {
        self.split = Some((axis, tile));
        self
    }

    pub fn device(mut self, ordinal: u32) -> Self {
        self.device = ordinal;
        self
    }

    /// The same stage with every port in `memory`.
    pub fn in_memory(mut self, memory: MemorySpace) -> Self {
        for d in self.inputs.iter_mut().chain(self.outputs.iter_mut()) {
            d.memory = memory;
        }
        self
    }
}

/// Reads the kernel's message from a zero-filled error buffer.
pub fn message(buf: &[u8]) -> String {
    CStr::from_bytes_until_nul(buf)
        .expect("the message is NUL-terminated")
        .to_string_lossy()
        .into_owned()
}

/// Calls create with an error buffer of `error_len` bytes; returns the status, the state
/// pointer and the buffer.
pub fn create_raw(
    kernel: &Kernel,
    stage: &Stage<'_>,
    error_len: usize,
) -> (Status, *mut c_void, Vec<u8>) {
    let names: Vec<CString> = stage
        .params
        .iter()
        .map(|(n, _)| CString::new(*n).unwrap())
        .collect();
    let values: Vec<CString> = stage
        .params
        .iter()
        .map(|(_, v)| CString::new(*v).unwrap())
        .collect();
    let params: Vec<Param> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| Param {
            name: n.as_ptr(),
            value: v.as_ptr(),
        })
        .collect();
    let (split_axis, tile) = stage.split.unwrap_or((SPLIT_NONE, 0));
    let config = KernelConfig {
        params: if params.is_empty() {
            std::ptr::null()
        } else {
            params.as_ptr()
        },
        inputs: stage.inputs.as_ptr(),
        outputs: stage.outputs.as_ptr(),
        n_params: params.len() as u32,
        n_inputs: stage.inputs.len() as u32,
        n_outputs: stage.outputs.len() as u32,
        split_axis,
        tile,
        device_ordinal: stage.device,
        reserved: 0,
    };
    let mut state = std::ptr::null_mut();
    let mut error = vec![0u8; error_len];
    let create = kernel.create.expect("create");
    // SAFETY: config and everything it points to live through the call; `error` has
    // `error_len` bytes.
    let status = unsafe {
        create(
            &config,
            &mut state,
            error.as_mut_ptr().cast::<c_char>(),
            error_len,
        )
    };
    (status, state, error)
}

/// create as the runtime calls it (a zero-filled 1024-byte error buffer).
pub fn create(kernel: &'static Kernel, stage: &Stage<'_>) -> Result<State, Failure> {
    let (status, ptr, error) = create_raw(kernel, stage, 1024);
    if status != Status::OK {
        let why = message(&error);
        assert!(
            !why.is_empty(),
            "{} refused with no message",
            text(kernel.name)
        );
        return Err((status, why));
    }
    assert!(!ptr.is_null(), "create returned OK but no state");
    Ok(State { kernel, ptr })
}

impl State {
    pub fn workspace_bytes(&self) -> u64 {
        let f = self.kernel.workspace_bytes.expect("workspace_bytes");
        // SAFETY: ptr is a live state of this kernel.
        unsafe { f(self.ptr) }
    }

    /// One launch, with `stream` as the launch's stream (null for the CPU library).
    pub fn launch(
        &self,
        input: Tensor,
        output: Tensor,
        tile: Tile,
        stream: *mut c_void,
    ) -> Result<(), Failure> {
        assert_eq!(
            self.workspace_bytes(),
            0,
            "the spectrogram kernels need no workspace"
        );
        let inputs = [input];
        let outputs = [output];
        let args = LaunchArgs {
            inputs: inputs.as_ptr(),
            outputs: outputs.as_ptr(),
            n_inputs: 1,
            n_outputs: 1,
            workspace: std::ptr::null_mut(),
            workspace_bytes: 0,
            stream,
            tile,
        };
        let mut error = [0u8; 1024];
        let launch = self.kernel.launch.expect("launch");
        // SAFETY: ptr is a live state; the tensors have the descriptors create checked and
        // point at buffers of that size, 64-byte aligned, alive through the call (and, under
        // the fake driver, through the simulated kernel, which runs within the call).
        let status = unsafe {
            launch(
                self.ptr,
                &args,
                error.as_mut_ptr().cast::<c_char>(),
                error.len(),
            )
        };
        if status == Status::OK {
            Ok(())
        } else {
            Err((status, message(&error)))
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let destroy = self.kernel.destroy.expect("destroy");
        // SAFETY: ptr is a live state of this kernel, destroyed exactly once, here.
        unsafe { destroy(self.ptr) }
    }
}

/// Runs a stage of `lib` over whole buffers the way the executor does: one launch per tile in
/// order, or one launch over the whole of axis 0 when not split. The stage's descriptors are
/// put in the library's memory space; `stream` is passed to every launch.
pub fn run(
    lib: &Loaded,
    name: &str,
    stage: &Stage<'_>,
    input: &Buffer,
    output: &mut Buffer,
    stream: *mut c_void,
) {
    let memory = lib.memory();
    let stage = stage.clone().in_memory(memory);
    let state =
        create(lib.kernel(name), &stage).unwrap_or_else(|e| panic!("{name}: create: {e:?}"));
    let rows = input.desc.shape[0];
    let tile = stage.split.map_or(rows, |(_, t)| t);
    for i in 0..rows / tile {
        state
            .launch(
                input.input(memory),
                output.output(memory),
                Tile {
                    begin: i * tile,
                    count: tile,
                },
                stream,
            )
            .unwrap_or_else(|e| panic!("{name}: launch: {e:?}"));
    }
}

/// Runs a stage on the CPU library, unsplit (its results do not depend on the tiling).
pub fn reference(name: &str, stage: &Stage<'_>, input: &Buffer, output: &mut Buffer) {
    let mut stage = stage.clone();
    stage.split = None;
    stage.device = 0;
    run(cpu(), name, &stage, input, output, std::ptr::null_mut());
}

// ---------------------------------------------------------------------------------------------
// Inputs and comparisons
// ---------------------------------------------------------------------------------------------

pub fn random_ci16(rng: &mut Pcg64, m: usize, n: usize) -> Vec<i16> {
    (0..2 * m * n).map(|_| rng.random::<i16>()).collect()
}

pub fn random_f32(rng: &mut Pcg64, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(lo..hi)).collect()
}

/// The largest error of any row of `got` (interleaved cf32, rows of `n` bins) against `want`,
/// relative to the peak magnitude of `want`'s row.
pub fn fft_error(got: &[f32], want: &[f32], n: usize) -> f64 {
    assert_eq!(got.len(), want.len());
    want.chunks_exact(2 * n)
        .zip(got.chunks_exact(2 * n))
        .map(|(want, got)| {
            let norm = |re: f32, im: f32| f64::from(re).hypot(f64::from(im));
            let peak = want
                .chunks_exact(2)
                .map(|z| norm(z[0], z[1]))
                .fold(0.0, f64::max);
            let err = want
                .chunks_exact(2)
                .zip(got.chunks_exact(2))
                .map(|(w, g)| {
                    (f64::from(g[0]) - f64::from(w[0])).hypot(f64::from(g[1]) - f64::from(w[1]))
                })
                .fold(0.0, f64::max);
            assert!(err.is_finite(), "non-finite output");
            err / peak.max(f64::MIN_POSITIVE)
        })
        .fold(0.0, f64::max)
}

/// The largest relative error of `got` against `want`.
pub fn max_rel_error(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            let (g, w) = (f64::from(g), f64::from(w));
            let e = (g - w).abs() / w.abs().max(f64::MIN_POSITIVE);
            assert!(e.is_finite() || w == 0.0, "non-finite output {g} for {w}");
            e
        })
        .fold(0.0, f64::max)
}

/// The tiles a test tries for `m` rows: 1, 4 and m (those dividing m, without repeats).
pub fn tiles(m: u64) -> Vec<u64> {
    let mut t: Vec<u64> = [1, 4, m]
        .into_iter()
        .filter(|t| m.is_multiple_of(*t))
        .collect();
    t.dedup();
    t
}
