//! Test harness: configs built from the real ABI structs, 64-byte-aligned host buffers, the
//! host queue that runs the library's launch sequences on the host simulator, and a queue
//! that only counts them.

#![allow(dead_code)]

pub mod device;

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::cell::Cell;
use std::ffi::{CString, c_void};
use std::ptr::NonNull;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{
    Dtype, KernelConfig, LaunchArgs, MemorySpace, Param, RecordListHeader, SPLIT_NONE, Tensor,
    TensorDesc, Tile,
};
use kplace_cudakit::fft_shape::FftShape;
use kplace_cudakit::queue::{Grid, Queue};
use kplace_cudakit::source::Function as _;
use kplace_gpu::source::Function;
use kplace_kernels::Detection;

/// A zeroed, 64-byte-aligned heap buffer, like the runtime's pools.
pub struct Buf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a plain heap allocation.
unsafe impl Send for Buf {}
// SAFETY: as above.
unsafe impl Sync for Buf {}

impl Buf {
    pub fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len.max(1), 64).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).expect("allocation");
        Self { ptr, len }
    }

    pub fn for_desc(desc: &TensorDesc) -> Self {
        Self::new(desc.bytes as usize)
    }

    /// The buffer filled with `values`.
    pub fn from_slice<T: Copy>(values: &[T]) -> Self {
        let mut buf = Self::new(std::mem::size_of_val(values));
        buf.slice_mut::<T>().copy_from_slice(values);
        buf
    }

    /// The address, as the plans take it.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn slice<T: Copy>(&self) -> &[T] {
        // SAFETY: aligned, initialised (zeroed), and T is plain data in these tests.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.len / size_of::<T>()) }
    }

    pub fn slice_mut<T: Copy>(&mut self) -> &mut [T] {
        // SAFETY: as above, exclusively borrowed.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.len / size_of::<T>())
        }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align(self.len.max(1), 64).expect("layout"),
            )
        };
    }
}

/// A tensor descriptor in `memory`.
pub fn desc_in(memory: MemorySpace, dtype: Dtype, dims: &[u64]) -> TensorDesc {
    let mut shape = [0; kplace_abi::MAX_RANK];
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

/// A device tensor descriptor (what the GPU kernels take).
pub fn desc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    desc_in(MemorySpace::DEVICE, dtype, dims)
}

/// A host tensor descriptor (what the CPU kernels take).
pub fn host_desc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    desc_in(MemorySpace::HOST, dtype, dims)
}

/// An owned `KernelConfig` with its strings and arrays.
pub struct Setup {
    _strings: Vec<CString>,
    _params: Vec<Param>,
    _inputs: Vec<TensorDesc>,
    _outputs: Vec<TensorDesc>,
    raw: KernelConfig,
}

impl Setup {
    pub fn new(params: &[(&str, &str)], inputs: &[TensorDesc], outputs: &[TensorDesc]) -> Self {
        Self::split(params, inputs, outputs, None)
    }

    pub fn split(
        params: &[(&str, &str)],
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
        split: Option<(u32, u64)>,
    ) -> Self {
        let strings: Vec<CString> = params
            .iter()
            .flat_map(|(n, v)| {
                [
                    CString::new(*n).expect("name"),
                    CString::new(*v).expect("value"),
                ]
            })
            .collect();
        let params: Vec<Param> = strings
            .chunks(2)
            .map(|nv| Param {
                name: nv[0].as_ptr(),
                value: nv[1].as_ptr(),
            })
            .collect();
        let inputs = inputs.to_vec();
        let outputs = outputs.to_vec();
        let raw = KernelConfig {
            params: params.as_ptr(),
            inputs: inputs.as_ptr(),
            outputs: outputs.as_ptr(),
            n_params: params.len() as u32,
            n_inputs: inputs.len() as u32,
            n_outputs: outputs.len() as u32,
            split_axis: split.map_or(SPLIT_NONE, |(axis, _)| axis),
            tile: split.map_or(0, |(_, tile)| tile),
            device_ordinal: 0,
            reserved: 0,
        };
        Self {
            _strings: strings,
            _params: params,
            _inputs: inputs,
            _outputs: outputs,
            raw,
        }
    }

    pub fn raw(&self) -> &KernelConfig {
        &self.raw
    }

    /// The safe view of the config, for the plans and for `create`.
    pub fn config(&self) -> Config<'_> {
        // SAFETY: every pointer in `raw` points into this Setup's vectors.
        unsafe { Config::from_raw(&self.raw) }.expect("config")
    }

    pub fn create<K: KernelImpl>(&self) -> Result<K, KernelError> {
        K::create(&self.config())
    }
}

/// Runs `kernel` (a CPU kernel) on one host input and output over `tile`, with a fresh
/// workspace.
pub fn launch_cpu<K: KernelImpl>(
    kernel: &K,
    input: (TensorDesc, &Buf),
    output: (TensorDesc, &Buf),
    tile: Tile,
) -> Result<(), KernelError> {
    let workspace = Buf::new(kernel.workspace_bytes() as usize);
    let inputs = [Tensor {
        desc: input.0,
        data: input.1.ptr().cast(),
    }];
    let outputs = [Tensor {
        desc: output.0,
        data: output.1.ptr().cast(),
    }];
    let args = LaunchArgs {
        inputs: inputs.as_ptr(),
        outputs: outputs.as_ptr(),
        n_inputs: 1,
        n_outputs: 1,
        workspace: workspace.ptr().cast(),
        workspace_bytes: kernel.workspace_bytes(),
        stream: std::ptr::null_mut(),
        tile,
        ..Default::default()
    };
    // SAFETY: every pointer in `args` is valid for the launch.
    let launch = unsafe { Launch::from_raw(&args) };
    kernel.launch(&launch)
}

/// The whole axis, for unsplit stages.
pub fn whole(len: u64) -> Tile {
    Tile {
        begin: 0,
        count: len,
    }
}

/// Reads a detection list: header and valid records.
pub fn read_list(bytes: &[u8]) -> (RecordListHeader, Vec<Detection>) {
    let list = kplace_abi::RecordList::parse(bytes).expect("a valid list");
    (
        list.header(),
        list.records().map(Detection::from_record).collect(),
    )
}

/// Counts what a launch sequence enqueues (kernel launches by function, FFT executions) and
/// runs nothing. Allocation-free, so it can sit under a counting allocator.
#[derive(Default)]
pub struct CountingQueue {
    launches: [Cell<u64>; <Function as kplace_cudakit::source::Function>::ALL.len()],
    ffts: Cell<u64>,
}

impl CountingQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Kernel launches so far.
    pub fn launches(&self) -> u64 {
        self.launches.iter().map(Cell::get).sum()
    }

    /// Launches of `function` so far.
    pub fn launches_of(&self, function: Function) -> u64 {
        self.launches[function.index()].get()
    }

    /// FFT executions so far.
    pub fn ffts(&self) -> u64 {
        self.ffts.get()
    }

    /// Kernel launches and FFT executions so far.
    pub fn enqueues(&self) -> u64 {
        self.launches() + self.ffts()
    }
}

impl Queue<Function> for CountingQueue {
    unsafe fn launch(
        &self,
        function: Function,
        grid: Grid,
        params: &mut [*mut c_void],
    ) -> Result<(), KernelError> {
        if grid.blocks.contains(&0) || grid.threads.contains(&0) || params.is_empty() {
            return Err(KernelError::internal("an empty launch"));
        }
        let counter = &self.launches[function.index()];
        counter.set(counter.get() + 1);
        Ok(())
    }

    unsafe fn fft(
        &self,
        shape: FftShape,
        input: u64,
        output: u64,
        _work: u64,
    ) -> Result<(), KernelError> {
        if shape.in_place() != (input == output) {
            return Err(KernelError::internal(
                "an FFT's buffers contradict its layout",
            ));
        }
        self.ffts.set(self.ffts.get() + 1);
        Ok(())
    }
}

/// The largest absolute difference between two sequences, and the largest magnitude of the
/// reference.
pub fn max_errors(got: impl Iterator<Item = f64>, want: impl Iterator<Item = f64>) -> (f64, f64) {
    got.zip(want).fold((0f64, 0f64), |(err, peak), (g, w)| {
        (err.max((g - w).abs()), peak.max(w.abs()))
    })
}

/// The f32 stages' accuracy against an f64 reference: the largest absolute error over the
/// reference's largest magnitude.
pub const PEAK_TOLERANCE: f64 = 1e-5;

/// Asserts that `got` is within [`PEAK_TOLERANCE`] of `want`'s peak; `what` names the case.
#[track_caller]
pub fn assert_within_peak(
    got: impl Iterator<Item = f64>,
    want: impl Iterator<Item = f64>,
    what: impl std::fmt::Display,
) {
    let (err, peak) = max_errors(got, want);
    assert!(
        err / peak < PEAK_TOLERANCE,
        "{what}: error {:.2e} of peak",
        err / peak
    );
}

/// Complex f32 pairs as a sequence of f64 parts (re, im, re, im, ...).
pub fn parts(values: &[[f32; 2]]) -> impl Iterator<Item = f64> + '_ {
    values
        .iter()
        .flat_map(|c| [f64::from(c[0]), f64::from(c[1])])
}
