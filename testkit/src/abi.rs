//! Driving a C kernel library through the ABI only, exactly as the runtime does: the library
//! loaded with `dlopen`, its table read through `kplace_library_entry`, and create,
//! workspace_bytes, launch and destroy called with descriptors of the sizes the runtime
//! computes on 64-byte aligned buffers. Shared by the tests of the spectrogram's C and CUDA
//! libraries (the kernel names and sources are in [`crate::spectrogram`]).
//!
//! Here: the bundle's libraries for executables carried to a machine without the build tree
//! (see [`carried`]); loading a library and the one cargo built; the strict C compiler command;
//! tensors; create / launch / destroy; refusals; and seeded random inputs and comparisons.
//! Every random input comes from a seeded PCG, so the tests are deterministic.

use std::ffi::{CStr, c_char, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use kplace_abi::{
    CarryFlags, Dtype, ENTRY_SYMBOL, EntryFn, Kernel, LaunchArgs, Library, MAX_RANK, MemorySpace,
    Status, Tensor, TensorDesc, Tile,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

pub use crate::workspace::{carried, workspace as repo};
use crate::workspace::{profile_dir, scratch_dir, workspace};

mod stage;

pub use stage::Stage;

// ---------------------------------------------------------------------------------------------
// Where things are
// ---------------------------------------------------------------------------------------------

/// A temporary directory: under cargo's scratch directory (target/tmp/), or the system's
/// temporary directory when carried (the build machine's is not there).
pub fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(scratch_dir())
        .unwrap_or_else(|e| panic!("a temporary directory for {prefix}: {e}"))
}

/// A library of the bundle carried with the executables: `$KPLACE_LIB_DIR/<file>`.
pub fn carried_library(file: &str) -> PathBuf {
    let dir = std::env::var_os("KPLACE_LIB_DIR").unwrap_or_else(|| {
        panic!("KPLACE_WORKSPACE is set (carried test executables) but KPLACE_LIB_DIR, the bundle's lib/, is not")
    });
    let path = Path::new(&dir).join(file);
    assert!(
        path.is_file(),
        "{} is missing: the bundle ships the kernel libraries in lib/ (bench/gpu-bundle.sh)",
        path.display()
    );
    path
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

// ---------------------------------------------------------------------------------------------
// Libraries
// ---------------------------------------------------------------------------------------------

/// A loaded kernel library. The shared ones are kept in statics, so they are never unloaded and
/// their tables live as long as the test binary.
pub struct Loaded {
    /// The library `dlopen` loaded, kept open while the table is used; `None` for a table
    /// linked into the test binary ([`Loaded::linked`]).
    _lib: Option<libloading::Library>,
    pub table: &'static Library,
}

impl Loaded {
    /// The table of a kernel library linked into the test (a Rust kernel crate's `rlib`),
    /// driven through the same function pointers as a loaded one.
    pub fn linked(table: &'static Library) -> Loaded {
        Loaded { _lib: None, table }
    }
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
    // library is loaded, which is as long as the `Loaded` holding both.
    let table = unsafe { entry().as_ref() }.expect("kplace_library_entry returned null");
    Loaded {
        _lib: Some(lib),
        table,
    }
}

/// Where cargo put package `package`'s cdylib, `file` (e.g. `libkplace_spectrogram.so`):
/// beside the test binaries' directory, target/<profile>/. `cargo test` does not rebuild a
/// cdylib-only crate's library (only `cargo build` does), so this fails, saying so, when the
/// file is missing or older than any of `sources` (paths under the workspace), rather than test
/// a stale build. Carried executables ([`carried`]) get the bundle's.
pub fn cargo_built(package: &str, file: &str, sources: &[&str]) -> PathBuf {
    if carried() {
        return carried_library(file);
    }
    let path = profile_dir().join(file);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p {package}` first",
        path.display()
    );
    let modified = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let built = modified(&path);
    for source in sources {
        let source = workspace().join(source);
        assert!(
            modified(&source) <= built,
            "{} is older than {}: run `cargo build -p {package}` (cargo test does not rebuild a \
             cdylib-only crate's library)",
            path.display(),
            source.display()
        );
    }
    path
}

/// The system C compiler (`$CC`, else `cc`) set to build a shared library from C11 with the
/// strict flags the kernel libraries promise to build under, kplace.h on the include path. The
/// caller adds the sources, `-o` and the libraries to link.
pub fn cc_shared_library() -> Command {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(cc);
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
    .arg(workspace().join("runtime/include"));
    cmd
}

/// A NUL-terminated string of a table: `p` must be one of a loaded library's table strings
/// (the only strings the tests have), which is what makes the dereference sound.
#[expect(
    clippy::not_unsafe_ptr_arg_deref,
    reason = "test support, called with a loaded table's strings only, at many call sites"
)]
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

/// The descriptor the runtime would pass for host memory: `bytes` exactly what the shape
/// implies.
pub fn desc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    assert!(!dims.is_empty() && dims.len() <= MAX_RANK);
    let mut shape = [0; MAX_RANK];
    shape[..dims.len()].copy_from_slice(dims);
    TensorDesc {
        dtype,
        memory: MemorySpace::HOST,
        rank: dims.len() as u32,
        reserved: 0,
        shape,
        bytes: dtype.bytes_for(dims).expect("size"),
    }
}

/// `d` claiming `bytes` fewer bytes than its shape implies.
pub fn short_by(mut d: TensorDesc, bytes: u64) -> TensorDesc {
    d.bytes -= bytes;
    d
}

impl Buffer {
    /// A tensor whose every byte is 0xFF: NaN as f32, so an element a kernel fails to write
    /// shows.
    pub fn new(dtype: Dtype, dims: &[u64]) -> Buffer {
        let desc = desc(dtype, dims);
        let chunks = vec![Chunk([0xFF; 64]); (desc.bytes as usize).div_ceil(64)];
        Buffer { desc, chunks }
    }

    /// A tensor holding `values` (f32 element parts).
    pub fn from_f32(dims: &[u64], dtype: Dtype, values: &[f32]) -> Buffer {
        let mut b = Buffer::new(dtype, dims);
        b.f32s_mut().copy_from_slice(values);
        b
    }

    /// A tensor of `dtype` holding `bytes`, exactly its size (little-endian values).
    pub fn from_bytes(dtype: Dtype, dims: &[u64], bytes: &[u8]) -> Buffer {
        let mut b = Buffer::new(dtype, dims);
        assert_eq!(bytes.len() as u64, b.desc.bytes, "{dtype:?} {dims:?}");
        // SAFETY: the chunks hold at least `bytes` bytes; any bits are a u8.
        unsafe { std::slice::from_raw_parts_mut(b.chunks.as_mut_ptr().cast::<u8>(), bytes.len()) }
            .copy_from_slice(bytes);
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

    /// The tensor as a read-only input of a launch, its descriptor in `memory`.
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
    stage.with_raw(|config| {
        let mut state = std::ptr::null_mut();
        let mut error = vec![0u8; error_len];
        let create = kernel.create.expect("create");
        // SAFETY: config and everything it points to live through the call; `error` has
        // `error_len` bytes.
        let status = unsafe {
            create(
                config,
                &mut state,
                error.as_mut_ptr().cast::<c_char>(),
                error_len,
            )
        };
        (status, state, error)
    })
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

    /// The carry a stateful kernel asks for; 0 for a stateless one.
    pub fn carry_bytes(&self) -> u64 {
        match self.kernel.carry_bytes {
            // SAFETY: ptr is a live state of this kernel.
            Some(f) => unsafe { f(self.ptr) },
            None => 0,
        }
    }

    /// One launch, with `stream` as the launch's stream (null for the CPU library) and a
    /// workspace of [`State::workspace_bytes`].
    pub fn launch(
        &self,
        input: Tensor,
        output: Tensor,
        tile: Tile,
        stream: *mut c_void,
    ) -> Result<(), Failure> {
        self.launch_args(&[input], &[output], tile, stream, |_| {})
    }

    /// One launch of a kernel with several inputs or outputs, as [`State::launch`].
    pub fn launch_ports(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        tile: Tile,
        stream: *mut c_void,
    ) -> Result<(), Failure> {
        self.launch_args(inputs, outputs, tile, stream, |_| {})
    }

    /// One launch of a stateful kernel over a whole frame numbered `frame`, with the carry
    /// the caller keeps (as the runtime does), `frames_missing` lost before it.
    pub fn launch_frame(
        &self,
        input: Tensor,
        output: Tensor,
        carry: &mut Carry,
        frame: u64,
        frames_missing: u64,
    ) -> Result<(), Failure> {
        let tile = Tile {
            begin: 0,
            count: input.desc.shape[0],
        };
        let fresh = std::mem::take(&mut carry.fresh);
        self.launch_args(&[input], &[output], tile, std::ptr::null_mut(), |args| {
            args.carry = carry.chunks.as_mut_ptr().cast();
            args.carry_bytes = carry.bytes;
            args.frame = frame;
            args.frames_missing = frames_missing;
            args.carry_flags = if fresh { CarryFlags::FRESH.0 } else { 0 };
        })
    }

    fn launch_args(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        tile: Tile,
        stream: *mut c_void,
        more: impl FnOnce(&mut LaunchArgs),
    ) -> Result<(), Failure> {
        // A fresh workspace of the size the state asks for, 64-byte aligned, as the runtime
        // gives each launch; null when it asks for none.
        let workspace_bytes = self.workspace_bytes();
        let mut workspace = vec![Chunk([0xFF; 64]); (workspace_bytes as usize).div_ceil(64)];
        let workspace = if workspace_bytes == 0 {
            std::ptr::null_mut()
        } else {
            workspace.as_mut_ptr().cast::<c_void>()
        };
        let mut args = LaunchArgs::new(inputs, outputs, (workspace, workspace_bytes), stream, tile);
        more(&mut args);
        let mut error = [0u8; 1024];
        let launch = self.kernel.launch.expect("launch");
        // SAFETY: ptr is a live state; the tensors have the descriptors create checked and
        // point at buffers of that size, 64-byte aligned, alive through the call (and, under
        // the fake driver, through the simulated kernel, which runs within the call); so do
        // the workspace and any carry.
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

/// A stateful kernel's carry, kept between launches as the runtime keeps it: 64-byte
/// aligned, zeroed at first.
pub struct Carry {
    chunks: Vec<Chunk>,
    bytes: u64,
    fresh: bool,
}

impl Carry {
    /// A zeroed carry of `bytes`, which the next launch is told is fresh.
    pub fn new(bytes: u64) -> Carry {
        Carry {
            chunks: vec![Chunk([0; 64]); (bytes as usize).div_ceil(64)],
            bytes,
            fresh: true,
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
/// put in the library's memory space; `stream` is passed to every launch (null for the CPU
/// library).
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

/// Asserts that `lib`'s create refuses `stage` with INVALID_ARGUMENT and a message containing
/// `phrase` and naming the kernel.
pub fn assert_refuses(lib: &Loaded, name: &str, stage: &Stage<'_>, phrase: &str) {
    match create(lib.kernel(name), stage) {
        Ok(_) => panic!("{name} accepted a configuration it should refuse ({phrase})"),
        Err((status, text)) => {
            assert_eq!(status, Status::INVALID_ARGUMENT, "{name}: {text}");
            assert!(
                text.contains(phrase),
                "{name}: {text:?} does not say {phrase:?}"
            );
            assert!(
                text.contains(name),
                "{name}: {text:?} does not name the kernel"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs and comparisons
// ---------------------------------------------------------------------------------------------

/// A seeded generator.
pub fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

pub fn random_ci16(rng: &mut Pcg64, m: usize, n: usize) -> Vec<i16> {
    (0..2 * m * n).map(|_| rng.random::<i16>()).collect()
}

pub fn random_f32(rng: &mut Pcg64, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(lo..hi)).collect()
}

/// The largest relative error of `got` against `want` (f64 references, or another library's
/// f32 results).
pub fn max_rel_error<W: Copy + Into<f64>>(got: &[f32], want: &[W]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            let (g, w) = (f64::from(g), w.into());
            let e = (g - w).abs() / w.abs().max(f64::MIN_POSITIVE);
            assert!(e.is_finite() || w == 0.0, "non-finite output {g} for {w}");
            e
        })
        .fold(0.0, f64::max)
}

/// The tilings a test tries for `m` rows: split along axis 0 into tiles of 1, 4 and m rows
/// (those dividing m, without repeats), then not split (see [`Stage::tiled`]).
pub fn splits(m: u64) -> Vec<Option<u64>> {
    let mut tiles: Vec<u64> = [1, 4, m]
        .into_iter()
        .filter(|t| m.is_multiple_of(*t))
        .collect();
    tiles.dedup();
    tiles.into_iter().map(Some).chain([None]).collect()
}
