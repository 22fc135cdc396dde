//! Test harness: 64-byte-aligned buffers, descriptors, configs and launches built from the
//! real ABI structs, as the runtime would pass them.

#![allow(dead_code)]

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ffi::CString;
use std::ptr::NonNull;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{
    Dtype, KernelConfig, LaunchArgs, MemorySpace, Param, RecordListHeader, SPLIT_NONE, Tensor,
    TensorDesc, Tile,
};
use kplace_kernels::Detection;

/// A zeroed, 64-byte-aligned heap buffer, like the runtime's pools.
pub struct Buf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a plain heap allocation; tests coordinate access (threads write disjoint parts).
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

    /// A buffer holding a tensor of `desc`.
    pub fn for_desc(desc: &TensorDesc) -> Self {
        Self::new(desc.bytes as usize)
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

/// A host tensor descriptor.
pub fn desc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    let mut shape = [0; kplace_abi::MAX_RANK];
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

/// An owned `KernelConfig` with its strings and arrays.
pub struct Setup {
    _strings: Vec<CString>,
    _params: Vec<Param>,
    inputs: Vec<TensorDesc>,
    outputs: Vec<TensorDesc>,
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
            inputs,
            outputs,
            raw,
        }
    }

    pub fn raw(&self) -> &KernelConfig {
        &self.raw
    }

    pub fn create<K: KernelImpl>(&self) -> Result<K, KernelError> {
        // SAFETY: every pointer in `raw` points into this Setup's vectors.
        let config = unsafe { Config::from_raw(&self.raw) }?;
        K::create(&config)
    }

    pub fn input(&self, i: usize) -> TensorDesc {
        self.inputs[i]
    }

    pub fn output(&self, i: usize) -> TensorDesc {
        self.outputs[i]
    }
}

/// A tensor over `buf`.
pub fn tensor(desc: TensorDesc, buf: &Buf) -> Tensor {
    assert!(buf.len() as u64 >= desc.bytes);
    Tensor {
        desc,
        data: buf.ptr().cast(),
    }
}

/// Launches `kernel` on one input and one output over `tile`, with a fresh workspace.
pub fn launch<K: KernelImpl>(
    kernel: &K,
    input: (TensorDesc, &Buf),
    output: (TensorDesc, &Buf),
    tile: Tile,
) -> Result<(), KernelError> {
    let workspace = Buf::new(kernel.workspace_bytes() as usize);
    launch_with(kernel, input, output, tile, &workspace)
}

/// Launches with a given workspace.
pub fn launch_with<K: KernelImpl>(
    kernel: &K,
    input: (TensorDesc, &Buf),
    output: (TensorDesc, &Buf),
    tile: Tile,
    workspace: &Buf,
) -> Result<(), KernelError> {
    let inputs = [tensor(input.0, input.1)];
    let outputs = [tensor(output.0, output.1)];
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

/// Reads a detection list.
pub fn read_list(buf: &Buf) -> (RecordListHeader, Vec<Detection>) {
    let header = buf.slice::<RecordListHeader>()[0];
    let records = &buf.slice::<u8>()[size_of::<RecordListHeader>()..];
    // SAFETY: records follow the 16-byte header, 4-byte aligned.
    let records: &[Detection] = unsafe {
        std::slice::from_raw_parts(
            records.as_ptr().cast(),
            header.count.min(header.capacity) as usize,
        )
    };
    (header, records.to_vec())
}

/// Writes a detection list with room for `capacity` records.
pub fn write_list(buf: &mut Buf, capacity: u32, records: &[Detection]) {
    assert!(records.len() <= capacity as usize);
    let header = RecordListHeader {
        count: records.len() as u32,
        capacity,
        overflow: 0,
        reserved: 0,
    };
    buf.slice_mut::<RecordListHeader>()[0] = header;
    let bytes = &mut buf.slice_mut::<u8>()[size_of::<RecordListHeader>()..];
    // SAFETY: room for `capacity` records after the header, 4-byte aligned.
    let out: &mut [Detection] =
        unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), records.len()) };
    out.copy_from_slice(records);
}

/// Asserts that `result` failed with a message containing every one of `needles`.
pub fn assert_error<T>(result: Result<T, KernelError>, needles: &[&str]) {
    match result {
        Ok(_) => panic!("expected an error mentioning {needles:?}"),
        Err(e) => {
            for needle in needles {
                assert!(
                    e.message.contains(needle),
                    "error {:?} does not mention {needle:?}",
                    e.message
                );
            }
        }
    }
}
