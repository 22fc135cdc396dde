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
//! Every random input comes from a seeded PCG, so the tests are deterministic.

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use kplace_abi::{
    ABI_VERSION, DeviceKind, Dtype, ENTRY_SYMBOL, EntryFn, Kernel, KernelConfig, LaunchArgs,
    Library, MAX_RANK, MemorySpace, Param, SPLIT_NONE, Status, Tensor, TensorDesc, Tile,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

const FFT: &str = "spectrogram.fft";
const POWER: &str = "spectrogram.power";
const AVERAGE: &str = "spectrogram.average";

// ---------------------------------------------------------------------------------------------
// Building and loading the library
// ---------------------------------------------------------------------------------------------

/// A loaded build of the C library. Kept in a static, so it is never unloaded and its table
/// lives as long as the test binary.
struct Loaded {
    _lib: libloading::Library,
    table: &'static Library,
}

/// Compiles `kernels/spectrogram.c` with `defines` and loads it.
fn build(defines: &[&str]) -> Loaded {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::Builder::new()
        .prefix("spectrogram-c-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
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
    .arg(krate.join("../../runtime/include"))
    .args(defines.iter().map(|d| format!("-D{d}")))
    .arg(krate.join("kernels/spectrogram.c"))
    .arg("-o")
    .arg(&out)
    .arg("-lm");
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(
        output.status.success(),
        "building spectrogram.c with {defines:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // SAFETY: the file is the library just built from this crate's C source, whose loading
    // runs no initialisers of its own.
    let lib = unsafe { libloading::Library::new(&out) }.expect("dlopen the built library");
    // SAFETY: kplace.h gives the entry symbol the type `EntryFn`.
    let entry: EntryFn = unsafe { *lib.get::<EntryFn>(ENTRY_SYMBOL).expect("entry symbol") };
    // SAFETY: the entry takes no arguments and returns a static table that lives while the
    // library is loaded; the library is kept loaded for the rest of the process (see Loaded).
    let table = unsafe { entry().as_ref() }.expect("kplace_library_entry returned null");
    // The mapping outlives the file: the directory can go now.
    drop(dir);
    Loaded { _lib: lib, table }
}

/// The library as shipped.
fn good() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| build(&[]))
}

/// The deliberately wrong build: `spectrogram.average` multiplies bin 5 by 1.01.
fn faulty() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| build(&["SPECTROGRAM_FAULT_BIN=5"]))
}

/// A NUL-terminated string of the table.
fn text(p: *const c_char) -> &'static str {
    assert!(!p.is_null(), "null string in the table");
    // SAFETY: the table's strings are NUL-terminated and static in the loaded library.
    unsafe { CStr::from_ptr(p) }.to_str().expect("UTF-8")
}

impl Loaded {
    fn kernels(&self) -> &'static [Kernel] {
        assert!(!self.table.kernels.is_null());
        // SAFETY: the table holds n_kernels entries at `kernels`, static in the library.
        unsafe { std::slice::from_raw_parts(self.table.kernels, self.table.n_kernels as usize) }
    }

    fn kernel(&self, name: &str) -> &'static Kernel {
        self.kernels()
            .iter()
            .find(|k| text(k.name) == name)
            .unwrap_or_else(|| panic!("no kernel {name}"))
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------------

/// The runtime's unit of alignment: every tensor starts on a 64-byte boundary.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Chunk([u8; 64]);

/// A host tensor: its descriptor and 64-byte aligned bytes.
struct Buffer {
    desc: TensorDesc,
    chunks: Vec<Chunk>,
}

/// The descriptor the runtime would pass: host memory, `bytes` exactly what the shape implies.
fn desc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
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

impl Buffer {
    /// A tensor whose every byte is 0xFF: NaN as f32, so an element a kernel fails to write
    /// shows.
    fn new(dtype: Dtype, dims: &[u64]) -> Buffer {
        let desc = desc(dtype, dims);
        let chunks = vec![Chunk([0xFF; 64]); (desc.bytes as usize).div_ceil(64)];
        Buffer { desc, chunks }
    }

    /// A tensor holding `values` (f32 or i16 element parts).
    fn from_f32(dims: &[u64], dtype: Dtype, values: &[f32]) -> Buffer {
        let mut b = Buffer::new(dtype, dims);
        b.f32s_mut().copy_from_slice(values);
        b
    }

    fn from_i16(dims: &[u64], values: &[i16]) -> Buffer {
        let mut b = Buffer::new(Dtype::CI16, dims);
        let n = b.desc.bytes as usize / 2;
        // SAFETY: the chunks hold at least `bytes` bytes, 64-byte aligned; any bits are an i16.
        unsafe { std::slice::from_raw_parts_mut(b.chunks.as_mut_ptr().cast::<i16>(), n) }
            .copy_from_slice(values);
        b
    }

    fn f32s(&self) -> &[f32] {
        // SAFETY: the chunks hold at least `bytes` bytes, 64-byte aligned; any bits are an f32.
        unsafe { std::slice::from_raw_parts(self.chunks.as_ptr().cast::<f32>(), self.floats()) }
    }

    fn f32s_mut(&mut self) -> &mut [f32] {
        let n = self.floats();
        // SAFETY: as in f32s, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.chunks.as_mut_ptr().cast::<f32>(), n) }
    }

    fn floats(&self) -> usize {
        self.desc.bytes as usize / 4
    }

    /// The tensor as a read-only input of a launch.
    fn input(&self) -> Tensor {
        Tensor {
            desc: self.desc,
            data: self.chunks.as_ptr().cast_mut().cast::<c_void>(),
        }
    }

    /// The tensor as an output of a launch.
    fn output(&mut self) -> Tensor {
        Tensor {
            desc: self.desc,
            data: self.chunks.as_mut_ptr().cast::<c_void>(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// create / workspace_bytes / launch / destroy
// ---------------------------------------------------------------------------------------------

/// A refusal: the status and the kernel's text.
type Failure = (Status, String);

/// A state from create, destroyed when dropped.
struct State {
    kernel: &'static Kernel,
    ptr: *mut c_void,
}

// SAFETY: the ABI lets launches of disjoint tiles run concurrently on one state from any
// thread (launch only reads it), which is the only use the tests make of a shared state.
unsafe impl Sync for State {}

/// The stage's configuration in the tests' terms.
struct Stage<'a> {
    params: &'a [(&'a str, &'a str)],
    inputs: Vec<TensorDesc>,
    outputs: Vec<TensorDesc>,
    split: Option<(u32, u64)>,
}

impl<'a> Stage<'a> {
    fn new(input: TensorDesc, output: TensorDesc) -> Stage<'a> {
        Stage {
            params: &[],
            inputs: vec![input],
            outputs: vec![output],
            split: None,
        }
    }

    fn params(mut self, params: &'a [(&'a str, &'a str)]) -> Self {
        self.params = params;
        self
    }

    fn split(mut self, axis: u32, tile: u64) -> Self {
        self.split = Some((axis, tile));
        self
    }
}

/// Reads the kernel's message from a zero-filled error buffer.
fn message(buf: &[u8]) -> String {
    CStr::from_bytes_until_nul(buf)
        .expect("the message is NUL-terminated")
        .to_string_lossy()
        .into_owned()
}

/// Calls create with an error buffer of `error_len` bytes; returns the status, the state
/// pointer and the buffer.
fn create_raw(
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
        device_ordinal: 0,
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
fn create(kernel: &'static Kernel, stage: &Stage<'_>) -> Result<State, Failure> {
    let (status, ptr, error) = create_raw(kernel, stage, 1024);
    if status != Status::OK {
        let text = message(&error);
        assert!(
            !text.is_empty(),
            "{} refused with no message",
            text_of(kernel)
        );
        return Err((status, text));
    }
    assert!(!ptr.is_null(), "create returned OK but no state");
    Ok(State { kernel, ptr })
}

fn text_of(kernel: &Kernel) -> &'static str {
    text(kernel.name)
}

impl State {
    fn workspace_bytes(&self) -> u64 {
        let f = self.kernel.workspace_bytes.expect("workspace_bytes");
        // SAFETY: ptr is a live state of this kernel.
        unsafe { f(self.ptr) }
    }

    fn launch(&self, input: Tensor, output: Tensor, tile: Tile) -> Result<(), Failure> {
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
            stream: std::ptr::null_mut(),
            tile,
        };
        let mut error = [0u8; 1024];
        let launch = self.kernel.launch.expect("launch");
        // SAFETY: ptr is a live state; the tensors have the descriptors create checked and
        // point at buffers of that size, 64-byte aligned, alive through the call.
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

/// Runs a stage over whole buffers the way the executor does: one launch per tile in order,
/// or one launch over the whole of axis 0 when not split.
fn run(lib: &Loaded, name: &str, stage: &Stage<'_>, input: &Buffer, output: &mut Buffer) {
    let state = create(lib.kernel(name), stage).unwrap_or_else(|e| panic!("{name}: create: {e:?}"));
    let rows = input.desc.shape[0];
    let tile = stage.split.map_or(rows, |(_, t)| t);
    for i in 0..rows / tile {
        state
            .launch(
                input.input(),
                output.output(),
                Tile {
                    begin: i * tile,
                    count: tile,
                },
            )
            .unwrap_or_else(|e| panic!("{name}: launch: {e:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs and references
// ---------------------------------------------------------------------------------------------

fn random_ci16(rng: &mut Pcg64, m: usize, n: usize) -> Vec<i16> {
    (0..2 * m * n).map(|_| rng.random::<i16>()).collect()
}

fn random_f32(rng: &mut Pcg64, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(lo..hi)).collect()
}

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

/// The largest relative error of `got` against `want`.
fn max_rel_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            let e = (f64::from(g) - w).abs() / w.abs().max(f64::MIN_POSITIVE);
            assert!(e.is_finite() || w == 0.0, "non-finite output {g} for {w}");
            e
        })
        .fold(0.0, f64::max)
}

/// `spectrogram.average`'s definition in f64: the mean over rows, times `scale`.
fn reference_average(x: &[f32], m: usize, n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|k| (0..m).map(|r| f64::from(x[r * n + k])).sum::<f64>() / m as f64 * scale)
        .collect()
}

/// The tiles a test tries for `m` rows: 1, 4 and m (those dividing m, without repeats).
fn tiles(m: u64) -> Vec<u64> {
    let mut t: Vec<u64> = [1, 4, m]
        .into_iter()
        .filter(|t| m.is_multiple_of(*t))
        .collect();
    t.dedup();
    t
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
            let mut splits: Vec<Option<u64>> = tiles(m).into_iter().map(Some).collect();
            splits.push(None);
            for split in splits {
                let stage = match split {
                    Some(t) => stage().split(0, t),
                    None => stage(),
                };
                let mut output = Buffer::new(Dtype::CF32, &[m, n]);
                run(good(), FFT, &stage, &input, &mut output);
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
        run(good(), FFT, &stage, &input, &mut output);
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
    run(good(), FFT, &stage, &input, &mut output);
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
        .launch(input.input(), output.output(), Tile { begin: 4, count: 2 })
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
    run(good(), FFT, &stage(), &input, &mut sequential);

    let mut concurrent = Buffer::new(Dtype::CF32, &[m, n]);
    let state = create(good().kernel(FFT), &stage()).unwrap();
    // Raw addresses cross the threads; each thread launches its own tiles (disjoint rows).
    let (in_addr, out_addr) = (
        input.input().data as usize,
        concurrent.output().data as usize,
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
        let mut splits: Vec<Option<u64>> = tiles(m).into_iter().map(Some).collect();
        splits.push(None);
        for split in splits {
            let stage = Stage::new(desc(Dtype::CF32, &[m, n]), desc(Dtype::F32, &[m, n]));
            let stage = match split {
                Some(t) => stage.split(0, t),
                None => stage,
            };
            let mut output = Buffer::new(Dtype::F32, &[m, n]);
            run(good(), POWER, &stage, &input, &mut output);
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
            run(good(), AVERAGE, &stage, &input, &mut output);
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
    run(lib, FFT, &fft, &samples, &mut spectra);
    let pow = Stage::new(desc(Dtype::CF32, &[m, n]), desc(Dtype::F32, &[m, n])).split(0, 4);
    run(lib, POWER, &pow, &spectra, &mut power);
    let avg =
        Stage::new(desc(Dtype::F32, &[m, n]), desc(Dtype::F32, &[n])).params(&[("scale", "0.5")]);
    run(lib, AVERAGE, &avg, &power, &mut psd);

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

/// Asserts that create refuses `stage` with INVALID_ARGUMENT and a message containing `phrase`.
fn refuses(name: &str, stage: Stage<'_>, phrase: &str) {
    match create(good().kernel(name), &stage) {
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

fn on_device(mut d: TensorDesc) -> TensorDesc {
    d.memory = MemorySpace::DEVICE;
    d
}

fn short_by(mut d: TensorDesc, bytes: u64) -> TensorDesc {
    d.bytes -= bytes;
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
        .launch(input.input(), output.output(), Tile { begin: 4, count: 1 })
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
    run(good(), AVERAGE, &stage(), &input, &mut right);
    run(faulty(), AVERAGE, &stage(), &input, &mut wrong);

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
        run(lib, FFT, &fft, &samples, &mut spectra);
        run(lib, POWER, &pow, &spectra, &mut power);
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

/// Where cargo put this crate's cdylib: beside the test binaries' directory, as it puts
/// libkplace_cpu.so, target/<profile>/libkplace_spectrogram.so. `cargo test` does not rebuild a
/// cdylib-only crate's library (only `cargo build` does), so this fails, saying so, when the
/// file is missing or older than any of its sources, rather than test a stale build.
fn cargo_built_path() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .join("libkplace_spectrogram.so");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p kplace-spectrogram` first",
        path.display()
    );
    let modified = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let built = modified(&path);
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    for source in [
        "kernels/spectrogram.c",
        "kernels/spectrogram_contract.h",
        "src/lib.rs",
    ] {
        let source = krate.join(source);
        assert!(
            modified(&source) <= built,
            "{} is older than {}: run `cargo build -p kplace-spectrogram` (cargo test does not \
             rebuild a cdylib-only crate's library)",
            path.display(),
            source.display()
        );
    }
    path
}

#[test]
fn the_cargo_built_library_exports_the_c_table() {
    let path = cargo_built_path();
    // SAFETY: the file is this crate's own cdylib, whose loading runs no initialisers of its own.
    let lib = unsafe { libloading::Library::new(&path) }.expect("dlopen the cargo-built library");
    // SAFETY: kplace.h gives the entry symbol the type `EntryFn`.
    let entry: EntryFn = unsafe { *lib.get::<EntryFn>(ENTRY_SYMBOL).expect("entry symbol") };
    // SAFETY: the entry takes no arguments and returns a static table; `lib` stays loaded
    // until the end of this test, after the last use of `table`.
    let table = unsafe { entry().as_ref() }.expect("kplace_library_entry returned null");
    let loaded = Loaded { _lib: lib, table };
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
    run(&loaded, FFT, &stage, &samples, &mut output);
    let want = reference_fft(&iq, m as usize, n as usize);
    let worst = fft_row_errors(output.f32s(), &want, n as usize)
        .into_iter()
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "error {worst:e} of the row's peak");
}
