//! The Rust mirror of `runtime/include/kplace.h`, the C ABI between the kplace runtime and its
//! kernel libraries.
//!
//! The runtime uses these types to read a library's kernel table and to call its kernels; a
//! kernel library written in Rust uses them (with the helpers in [`export`]) to publish its
//! table. Every `#[repr(C)]` type here has the layout of the C type it names, which the tests
//! check against the header compiled by the system C compiler.
//!
//! Enumerations are carried as transparent `u32` newtypes rather than Rust enums: a value that
//! arrives from C and matches no variant must be an error to report, never undefined behaviour.

#![warn(missing_docs)]

pub mod export;
pub mod numpy;
mod records;

pub use records::{RECORD_BYTES, Record, RecordList, RecordListError, RecordListHeader};

use std::ffi::{c_char, c_void};

/// `KPLACE_ABI_VERSION`: the ABI version this crate mirrors.
pub const ABI_VERSION: u32 = 2;

/// `KPLACE_ABI_MIN_VERSION`: the oldest ABI version the runtime still loads. A version 1 table
/// holds [`KernelV1`] entries.
pub const ABI_MIN_VERSION: u32 = 1;

/// `KPLACE_ENTRY_SYMBOL`: the symbol every kernel library exports, NUL-terminated.
pub const ENTRY_SYMBOL: &[u8] = b"kplace_library_entry\0";

/// `KPLACE_MAX_RANK`: the most dimensions a tensor may have.
pub const MAX_RANK: usize = 8;

/// `KPLACE_MAX_RANK_V1`: the most a version 1 library's tensors have ([`TensorDescV1`]).
pub const MAX_RANK_V1: usize = 4;

/// The alignment, in bytes, the runtime gives every tensor's data and every workspace.
pub const DATA_ALIGN: usize = 64;

/// `KPLACE_SPLIT_NONE`: the split axis of a stage that runs once over its whole input.
pub const SPLIT_NONE: u32 = u32::MAX;

/// Row-major shape, padded with zeros past the rank.
pub type Shape = [u64; MAX_RANK];

/// `kplace_status`: what create and launch return.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    /// `KPLACE_OK`.
    pub const OK: Status = Status(0);
    /// `KPLACE_ERR_INVALID_ARGUMENT`: a parameter, shape or dtype the kernel cannot take.
    pub const INVALID_ARGUMENT: Status = Status(1);
    /// `KPLACE_ERR_OUT_OF_MEMORY`: create could not allocate its state.
    pub const OUT_OF_MEMORY: Status = Status(2);
    /// `KPLACE_ERR_BACKEND`: the underlying library (FFTW, cuFFT, CUDA) failed.
    pub const BACKEND: Status = Status(3);
    /// `KPLACE_ERR_INTERNAL`: a bug in the kernel, such as a caught panic.
    pub const INTERNAL: Status = Status(4);

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "ok",
            1 => "invalid argument",
            2 => "out of memory",
            3 => "backend failure",
            4 => "internal error",
            _ => "unknown status",
        }
    }
}

/// `kplace_device_kind`: where a kernel runs.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceKind(pub u32);

impl DeviceKind {
    /// `KPLACE_DEVICE_CPU`.
    pub const CPU: DeviceKind = DeviceKind(0);
    /// `KPLACE_DEVICE_CUDA`.
    pub const CUDA: DeviceKind = DeviceKind(1);

    /// The name used in placement files and plans (`cpu`, `cuda`), or `None` if unknown.
    pub fn name(self) -> Option<&'static str> {
        match self {
            DeviceKind::CPU => Some("cpu"),
            DeviceKind::CUDA => Some("cuda"),
            _ => None,
        }
    }
}

/// `kplace_memory_space`: where a tensor's bytes live.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemorySpace(pub u32);

impl MemorySpace {
    /// `KPLACE_MEMORY_HOST` (pinned host memory included).
    pub const HOST: MemorySpace = MemorySpace(0);
    /// `KPLACE_MEMORY_DEVICE`.
    pub const DEVICE: MemorySpace = MemorySpace(1);

    /// A short name for plans and messages, or `None` if unknown.
    pub fn name(self) -> Option<&'static str> {
        match self {
            MemorySpace::HOST => Some("host"),
            MemorySpace::DEVICE => Some("device"),
            _ => None,
        }
    }
}

/// `kplace_dtype`: element types.
///
/// Version 1 of the ABI began with `ci16`, `cf32`, `f32` and `records` (then named
/// `detections`); the integer, half, double and other complex types were added to it without
/// changing any layout, so a library built before them still loads, and refuses them at
/// create as it refuses any dtype it does not take.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dtype(pub u32);

/// The real number type of an element, or of each part of a complex element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// Two's complement int8.
    I8,
    /// Two's complement int16, little-endian.
    I16,
    /// Two's complement int32, little-endian.
    I32,
    /// IEEE 754 binary16, little-endian.
    F16,
    /// bfloat16 (the upper 16 bits of a binary32), little-endian.
    BF16,
    /// IEEE 754 binary32, little-endian.
    F32,
    /// IEEE 754 binary64, little-endian.
    F64,
}

impl Scalar {
    /// Bytes of one value.
    pub const fn bytes(self) -> u64 {
        match self {
            Scalar::I8 => 1,
            Scalar::I16 | Scalar::F16 | Scalar::BF16 => 2,
            Scalar::I32 | Scalar::F32 => 4,
            Scalar::F64 => 8,
        }
    }

    /// Whether it is a floating-point type (compared within a tolerance; integers are exact).
    pub const fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::BF16 | Scalar::F32 | Scalar::F64)
    }
}

/// What one element of a numeric dtype is: a scalar, or a complex pair of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Element {
    /// The number type of the element, or of each of its parts.
    pub scalar: Scalar,
    /// Real then imaginary part, interleaved.
    pub complex: bool,
}

impl Element {
    /// Bytes of one element.
    pub const fn bytes(self) -> u64 {
        self.scalar.bytes() * if self.complex { 2 } else { 1 }
    }

    /// Scalar values per element: 2 for complex, else 1.
    pub const fn parts(self) -> usize {
        if self.complex { 2 } else { 1 }
    }
}

impl Dtype {
    /// `KPLACE_DTYPE_CI16`: complex int16, I then Q.
    pub const CI16: Dtype = Dtype(0);
    /// `KPLACE_DTYPE_CF32`: complex float32.
    pub const CF32: Dtype = Dtype(1);
    /// `KPLACE_DTYPE_F32`: float32.
    pub const F32: Dtype = Dtype(2);
    /// `KPLACE_DTYPE_RECORDS` (formerly `KPLACE_DTYPE_DETECTIONS`): a record list, a
    /// [`RecordListHeader`] followed by `shape[0]` records of [`RECORD_BYTES`] bytes.
    pub const RECORDS: Dtype = Dtype(3);
    /// `KPLACE_DTYPE_I8`: int8.
    pub const I8: Dtype = Dtype(4);
    /// `KPLACE_DTYPE_I16`: int16.
    pub const I16: Dtype = Dtype(5);
    /// `KPLACE_DTYPE_I32`: int32.
    pub const I32: Dtype = Dtype(6);
    /// `KPLACE_DTYPE_F16`: IEEE binary16.
    pub const F16: Dtype = Dtype(7);
    /// `KPLACE_DTYPE_F64`: float64.
    pub const F64: Dtype = Dtype(8);
    /// `KPLACE_DTYPE_CI8`: complex int8, I then Q (the samples of many SDR front ends).
    pub const CI8: Dtype = Dtype(9);
    /// `KPLACE_DTYPE_CF16`: complex binary16.
    pub const CF16: Dtype = Dtype(10);
    /// `KPLACE_DTYPE_CF64`: complex float64.
    pub const CF64: Dtype = Dtype(11);
    /// `KPLACE_DTYPE_BF16`: bfloat16.
    pub const BF16: Dtype = Dtype(12);

    /// Every dtype with its graph-file name.
    pub const ALL: [(Dtype, &'static str); 13] = [
        (Dtype::CI16, "ci16"),
        (Dtype::CF32, "cf32"),
        (Dtype::F32, "f32"),
        (Dtype::RECORDS, "records"),
        (Dtype::I8, "i8"),
        (Dtype::I16, "i16"),
        (Dtype::I32, "i32"),
        (Dtype::F16, "f16"),
        (Dtype::F64, "f64"),
        (Dtype::CI8, "ci8"),
        (Dtype::CF16, "cf16"),
        (Dtype::CF64, "cf64"),
        (Dtype::BF16, "bf16"),
    ];

    /// The graph-file name (`ci16`, `cf32`, `f32`, `i8`, ...), or `None` if unknown.
    pub fn name(self) -> Option<&'static str> {
        Self::ALL.iter().find(|(d, _)| *d == self).map(|(_, n)| *n)
    }

    /// The dtype a graph file names, if any; `detections`, the record list's former name, is
    /// still read as [`Dtype::RECORDS`].
    pub fn from_name(name: &str) -> Option<Dtype> {
        if name == "detections" {
            return Some(Dtype::RECORDS);
        }
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(d, _)| *d)
    }

    /// What one element is, for a numeric dtype; `None` for a record list or an unknown
    /// dtype.
    pub const fn element(self) -> Option<Element> {
        let (scalar, complex) = match self {
            Dtype::CI16 => (Scalar::I16, true),
            Dtype::CF32 => (Scalar::F32, true),
            Dtype::F32 => (Scalar::F32, false),
            Dtype::I8 => (Scalar::I8, false),
            Dtype::I16 => (Scalar::I16, false),
            Dtype::I32 => (Scalar::I32, false),
            Dtype::F16 => (Scalar::F16, false),
            Dtype::F64 => (Scalar::F64, false),
            Dtype::CI8 => (Scalar::I8, true),
            Dtype::CF16 => (Scalar::F16, true),
            Dtype::CF64 => (Scalar::F64, true),
            Dtype::BF16 => (Scalar::BF16, false),
            _ => return None,
        };
        Some(Element { scalar, complex })
    }

    /// Bytes a tensor of this dtype and shape occupies, or `None` for an unknown dtype or an
    /// overflowing size. A record list's shape is `[capacity]`.
    pub fn bytes_for(self, shape: &[u64]) -> Option<u64> {
        let elements = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
        match self {
            Dtype::RECORDS => elements
                .checked_mul(RECORD_BYTES as u64)?
                .checked_add(size_of::<RecordListHeader>() as u64),
            _ => elements.checked_mul(self.element()?.bytes()),
        }
    }
}

/// `kplace_tensor_desc`: a tensor's shape, type and place.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: Dtype,
    /// Where the bytes live.
    pub memory: MemorySpace,
    /// Number of dimensions in use.
    pub rank: u32,
    /// Zero.
    pub reserved: u32,
    /// Row-major dimensions, zero past `rank`.
    pub shape: Shape,
    /// Total size in bytes.
    pub bytes: u64,
}

impl TensorDesc {
    /// A tensor of `dtype` with dimensions `dims` in `memory`, exactly as many bytes as they
    /// need; `None` for more than [`MAX_RANK`] dimensions, or a size or dtype that
    /// [`Dtype::bytes_for`] refuses.
    pub fn new(dtype: Dtype, memory: MemorySpace, dims: &[u64]) -> Option<TensorDesc> {
        let mut shape: Shape = [0; MAX_RANK];
        shape.get_mut(..dims.len())?.copy_from_slice(dims);
        Some(TensorDesc {
            dtype,
            memory,
            rank: dims.len() as u32,
            reserved: 0,
            shape,
            bytes: dtype.bytes_for(dims)?,
        })
    }

    /// The dimensions in use.
    pub fn dims(&self) -> &[u64] {
        &self.shape[..(self.rank as usize).min(MAX_RANK)]
    }
}

/// `kplace_tensor`: a tensor with its bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Tensor {
    /// Shape, type and place.
    pub desc: TensorDesc,
    /// Host or device address per `desc.memory`, 64-byte aligned.
    pub data: *mut c_void,
}

/// `kplace_tensor_desc_v1`: [`TensorDesc`] as a version 1 library lays it out, with at most
/// [`MAX_RANK_V1`] dimensions.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorDescV1 {
    /// Element type.
    pub dtype: Dtype,
    /// Where the bytes live.
    pub memory: MemorySpace,
    /// Number of dimensions in use.
    pub rank: u32,
    /// Zero.
    pub reserved: u32,
    /// Row-major dimensions, zero past `rank`.
    pub shape: [u64; MAX_RANK_V1],
    /// Total size in bytes.
    pub bytes: u64,
}

/// `kplace_tensor_v1`: [`Tensor`] for a version 1 library.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TensorV1 {
    /// Shape, type and place.
    pub desc: TensorDescV1,
    /// As [`Tensor::data`].
    pub data: *mut c_void,
}

impl TensorDesc {
    /// The descriptor as a version 1 library reads it; `None` past [`MAX_RANK_V1`]
    /// dimensions.
    pub fn to_v1(&self) -> Option<TensorDescV1> {
        let dims = self.dims();
        let mut shape = [0; MAX_RANK_V1];
        shape.get_mut(..dims.len())?.copy_from_slice(dims);
        Some(TensorDescV1 {
            dtype: self.dtype,
            memory: self.memory,
            rank: self.rank,
            reserved: 0,
            shape,
            bytes: self.bytes,
        })
    }
}

impl Tensor {
    /// The tensor as a version 1 library reads it; `None` past [`MAX_RANK_V1`] dimensions.
    pub fn to_v1(&self) -> Option<TensorV1> {
        Some(TensorV1 {
            desc: self.desc.to_v1()?,
            data: self.data,
        })
    }
}

/// `kplace_param`: one graph-file parameter as NUL-terminated text.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// Parameter name.
    pub name: *const c_char,
    /// Parameter value as written in the graph file.
    pub value: *const c_char,
}

/// `kplace_kernel_config`: what create receives.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelConfig {
    /// `n_params` parameters.
    pub params: *const Param,
    /// `n_inputs` input descriptors.
    pub inputs: *const TensorDesc,
    /// `n_outputs` output descriptors.
    pub outputs: *const TensorDesc,
    /// Number of parameters.
    pub n_params: u32,
    /// Number of inputs.
    pub n_inputs: u32,
    /// Number of outputs.
    pub n_outputs: u32,
    /// Axis of input 0 that launches are tiled along, or [`SPLIT_NONE`].
    pub split_axis: u32,
    /// Indices per tile along the split axis; divides that dimension.
    pub tile: u64,
    /// CUDA device ordinal for CUDA kernels; 0 for CPU kernels.
    pub device_ordinal: u32,
    /// Zero.
    pub reserved: u32,
}

/// `kplace_tile`: the indices `[begin, begin + count)` of the split axis one launch covers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Tile {
    /// First index.
    pub begin: u64,
    /// Number of indices.
    pub count: u64,
}

/// `kplace_launch_args`: what launch receives.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LaunchArgs {
    /// `n_inputs` inputs.
    pub inputs: *const Tensor,
    /// `n_outputs` outputs.
    pub outputs: *const Tensor,
    /// Number of inputs.
    pub n_inputs: u32,
    /// Number of outputs.
    pub n_outputs: u32,
    /// Scratch memory of `workspace_bytes`, 64-byte aligned.
    pub workspace: *mut c_void,
    /// Size of the workspace.
    pub workspace_bytes: u64,
    /// A `CUstream` for CUDA kernels, null for CPU kernels.
    pub stream: *mut c_void,
    /// The part of the split axis to process.
    pub tile: Tile,
    /// Version 2: a stateful kernel's carry, `carry_bytes` bytes kept from the stage's
    /// previous frame, 64-byte aligned; null for a stateless kernel.
    pub carry: *mut c_void,
    /// Size of the carry.
    pub carry_bytes: u64,
    /// The frame's number as the source gave it.
    pub frame: u64,
    /// Frames lost since the carry's previous launch (0 after a reset).
    pub frames_missing: u64,
    /// [`CarryFlags`] bits.
    pub carry_flags: u32,
    /// Zero.
    pub reserved2: u32,
}

impl Default for LaunchArgs {
    /// No tensors, no workspace, no stream, no carry: fields to fill in.
    fn default() -> LaunchArgs {
        LaunchArgs::new(
            &[],
            &[],
            (std::ptr::null_mut(), 0),
            std::ptr::null_mut(),
            Tile::default(),
        )
    }
}

impl LaunchArgs {
    /// Arguments for a stateless launch: no carry, frame 0.
    pub fn new(
        inputs: &[Tensor],
        outputs: &[Tensor],
        workspace: (*mut c_void, u64),
        stream: *mut c_void,
        tile: Tile,
    ) -> LaunchArgs {
        LaunchArgs {
            inputs: inputs.as_ptr(),
            outputs: outputs.as_ptr(),
            n_inputs: inputs.len() as u32,
            n_outputs: outputs.len() as u32,
            workspace: workspace.0,
            workspace_bytes: workspace.1,
            stream,
            tile,
            carry: std::ptr::null_mut(),
            carry_bytes: 0,
            frame: 0,
            frames_missing: 0,
            carry_flags: 0,
            reserved2: 0,
        }
    }
}

/// `KPLACE_CARRY_*`: what the runtime tells a stateful launch about its carry.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CarryFlags(pub u32);

impl CarryFlags {
    /// `KPLACE_CARRY_FRESH`: the carry is all zeros (the stream began or restarted, or frames
    /// were lost under [`KernelFlags::RESET_ON_GAP`]).
    pub const FRESH: CarryFlags = CarryFlags(1);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: CarryFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// `KPLACE_KERNEL_*`: what a kernel declares about itself (version 2).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct KernelFlags(pub u32);

impl KernelFlags {
    /// No flag: a stateless kernel.
    pub const NONE: KernelFlags = KernelFlags(0);
    /// `KPLACE_KERNEL_STATEFUL`: carries state across frames, in a carry of
    /// [`Kernel::carry_bytes`] bytes; its stage runs one frame at a time, in frame order.
    pub const STATEFUL: KernelFlags = KernelFlags(1);
    /// `KPLACE_KERNEL_RESET_ON_GAP`: after lost frames the runtime zeroes the carry and sets
    /// [`CarryFlags::FRESH`]; without it the carry is kept and the launch is told how many
    /// frames are missing.
    pub const RESET_ON_GAP: KernelFlags = KernelFlags(2);
    /// Every flag this version defines.
    pub const KNOWN: KernelFlags = KernelFlags(3);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: KernelFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets of flags.
    pub const fn union(self, other: KernelFlags) -> KernelFlags {
        KernelFlags(self.0 | other.0)
    }
}

/// `create`: build a state for one stage and frame slot.
pub type CreateFn = unsafe extern "C" fn(
    config: *const KernelConfig,
    state: *mut *mut c_void,
    error: *mut c_char,
    error_len: usize,
) -> Status;
/// `workspace_bytes`: scratch bytes one concurrent launch on a state needs.
pub type WorkspaceBytesFn = unsafe extern "C" fn(state: *const c_void) -> u64;
/// `launch`: run (CPU) or enqueue (CUDA) a kernel on one tile.
pub type LaunchFn = unsafe extern "C" fn(
    state: *mut c_void,
    args: *const LaunchArgs,
    error: *mut c_char,
    error_len: usize,
) -> Status;
/// `destroy`: release a state.
pub type DestroyFn = unsafe extern "C" fn(state: *mut c_void);
/// `carry_bytes`: bytes a stateful kernel carries from frame to frame (version 2).
pub type CarryBytesFn = unsafe extern "C" fn(state: *const c_void) -> u64;

/// `kplace_kernel`: one kernel in a library's table.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// Logical name, e.g. `radar.range_fft`.
    pub name: *const c_char,
    /// Where it runs.
    pub device: DeviceKind,
    /// Where its inputs and outputs live.
    pub memory: MemorySpace,
    /// Inputs it takes.
    pub n_inputs: u32,
    /// Outputs it writes.
    pub n_outputs: u32,
    /// Builds a state.
    pub create: Option<CreateFn>,
    /// States the workspace a launch needs.
    pub workspace_bytes: Option<WorkspaceBytesFn>,
    /// Runs or enqueues one tile.
    pub launch: Option<LaunchFn>,
    /// Releases a state.
    pub destroy: Option<DestroyFn>,
    /// Version 2: [`KernelFlags`] bits.
    pub flags: KernelFlags,
    /// Zero.
    pub reserved: u32,
    /// Version 2: the carry a stateful kernel needs; `None` (or 0 bytes) for a stateless one.
    pub carry_bytes: Option<CarryBytesFn>,
}

/// `kplace_kernel_v1`: a version 1 library's table entry, [`Kernel`] up to `destroy`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelV1 {
    /// Logical name.
    pub name: *const c_char,
    /// Where it runs.
    pub device: DeviceKind,
    /// Where its inputs and outputs live.
    pub memory: MemorySpace,
    /// Inputs it takes.
    pub n_inputs: u32,
    /// Outputs it writes.
    pub n_outputs: u32,
    /// Builds a state.
    pub create: Option<CreateFn>,
    /// States the workspace a launch needs.
    pub workspace_bytes: Option<WorkspaceBytesFn>,
    /// Runs or enqueues one tile.
    pub launch: Option<LaunchFn>,
    /// Releases a state.
    pub destroy: Option<DestroyFn>,
}

impl From<KernelV1> for Kernel {
    /// A version 1 entry read as a stateless version 2 one.
    fn from(k: KernelV1) -> Kernel {
        Kernel {
            name: k.name,
            device: k.device,
            memory: k.memory,
            n_inputs: k.n_inputs,
            n_outputs: k.n_outputs,
            create: k.create,
            workspace_bytes: k.workspace_bytes,
            launch: k.launch,
            destroy: k.destroy,
            flags: KernelFlags::NONE,
            reserved: 0,
            carry_bytes: None,
        }
    }
}

/// `kplace_library`: the table a library's entry symbol returns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Library {
    /// The ABI version the library was built against. Always the first field.
    pub abi_version: u32,
    /// Kernels in the table.
    pub n_kernels: u32,
    /// The library's name.
    pub name: *const c_char,
    /// `n_kernels` kernels ([`KernelV1`] entries when `abi_version` is 1).
    pub kernels: *const Kernel,
}

/// The entry symbol's type.
pub type EntryFn = unsafe extern "C" fn() -> *const Library;

// SAFETY: a library's table and its strings are immutable and live as long as the library
// is loaded (a rule of the ABI), so they may be read from any thread.
unsafe impl Sync for Library {}
// SAFETY: as for Library: a kernel's descriptor and its strings are immutable while loaded.
unsafe impl Sync for Kernel {}
// SAFETY: as for Kernel.
unsafe impl Sync for KernelV1 {}
