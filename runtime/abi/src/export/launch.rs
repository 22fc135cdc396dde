//! [`Launch`], the safe view of a launch's arguments a Rust kernel receives, and the typed
//! host views of its tensors, workspace and carry.

use std::ffi::c_void;
use std::ops::Range;

use super::{KernelError, slice_from};
use crate::{CarryFlags, LaunchArgs, MemorySpace, Tensor, Tile};

/// A safe view of [`LaunchArgs`].
#[derive(Debug)]
pub struct Launch<'a> {
    inputs: &'a [Tensor],
    outputs: &'a [Tensor],
    workspace: *mut c_void,
    workspace_bytes: u64,
    stream: *mut c_void,
    tile: Tile,
    carry: *mut c_void,
    carry_bytes: u64,
    frame: u64,
    frames_missing: u64,
    carry_flags: CarryFlags,
}

impl<'a> Launch<'a> {
    /// Reads raw launch arguments.
    ///
    /// # Safety
    /// The arguments' pointers must be valid for their counts.
    pub unsafe fn from_raw(raw: &'a LaunchArgs) -> Self {
        Self {
            // SAFETY: guaranteed by the caller.
            inputs: unsafe { slice_from(raw.inputs, raw.n_inputs) },
            // SAFETY: guaranteed by the caller.
            outputs: unsafe { slice_from(raw.outputs, raw.n_outputs) },
            workspace: raw.workspace,
            workspace_bytes: raw.workspace_bytes,
            stream: raw.stream,
            tile: raw.tile,
            carry: raw.carry,
            carry_bytes: raw.carry_bytes,
            frame: raw.frame,
            frames_missing: raw.frames_missing,
            carry_flags: CarryFlags(raw.carry_flags),
        }
    }

    /// Input `i`, or an error naming it.
    pub fn input(&self, i: usize) -> Result<&'a Tensor, KernelError> {
        self.inputs
            .get(i)
            .ok_or_else(|| KernelError::invalid(format!("input {i} is missing")))
    }

    /// Output `i`, or an error naming it.
    pub fn output(&self, i: usize) -> Result<&'a Tensor, KernelError> {
        self.outputs
            .get(i)
            .ok_or_else(|| KernelError::invalid(format!("output {i} is missing")))
    }

    /// The workspace's address.
    pub fn workspace(&self) -> *mut c_void {
        self.workspace
    }

    /// The workspace's size.
    pub fn workspace_bytes(&self) -> u64 {
        self.workspace_bytes
    }

    /// The CUDA stream, null for CPU kernels.
    pub fn stream(&self) -> *mut c_void {
        self.stream
    }

    /// The part of the split axis to process.
    pub fn tile(&self) -> Tile {
        self.tile
    }

    /// The carry's address: host memory for a CPU kernel, device memory for a GPU kernel's
    /// (null for a stateless kernel).
    pub fn carry(&self) -> *mut c_void {
        self.carry
    }

    /// The carry's size (0 for a stateless kernel).
    pub fn carry_bytes(&self) -> u64 {
        self.carry_bytes
    }

    /// The frame's number as the source gave it.
    pub fn frame(&self) -> u64 {
        self.frame
    }

    /// Frames lost since the carry's previous launch; 0 after a reset.
    pub fn frames_missing(&self) -> u64 {
        self.frames_missing
    }

    /// Whether the carry is all zeros because the stream began, restarted, or lost frames
    /// under [`KernelFlags::RESET_ON_GAP`].
    pub fn carry_is_fresh(&self) -> bool {
        self.carry_flags.contains(CarryFlags::FRESH)
    }

    /// The carry as `len` values of `T` (see [`Launch::workspace_slice`] for the checks).
    ///
    /// # Safety
    /// As for [`Launch::workspace_slice`]: the carry must be valid for `carry_bytes` bytes and
    /// used by no other launch meanwhile (the runtime runs a stateful stage one frame at a
    /// time), and any bit pattern must be a valid `T`.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn carry_slice<T: Copy>(&self, len: usize) -> Result<&'a mut [T], KernelError> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { region_slice("carry", self.carry, self.carry_bytes, len) }
    }

    /// The workspace as `len` values of `T`, after checking its size and the ABI's 64-byte
    /// alignment.
    ///
    /// # Safety
    /// The workspace must be valid for reads and writes of `workspace_bytes` bytes and used by
    /// no other launch while the slice lives (the ABI gives each concurrent launch its own),
    /// and every bit pattern must be a valid `T` (plain old data: numbers and pairs of them).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn workspace_slice<T: Copy>(&self, len: usize) -> Result<&'a mut [T], KernelError> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { region_slice("workspace", self.workspace, self.workspace_bytes, len) }
    }
}

/// `len` values of `T` at `ptr`, a region (`what`: the workspace or the carry) of `bytes`
/// bytes, after checking its size and the ABI's 64-byte alignment.
///
/// # Safety
/// As for [`Launch::workspace_slice`].
unsafe fn region_slice<'a, T: Copy>(
    what: &str,
    ptr: *mut c_void,
    bytes_given: u64,
    len: usize,
) -> Result<&'a mut [T], KernelError> {
    let bytes = len.saturating_mul(size_of::<T>());
    if (bytes_given as u128) < bytes as u128 {
        return Err(KernelError::invalid(format!(
            "{what} of {bytes_given} bytes is smaller than the {bytes} the kernel needs"
        )));
    }
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() || !(ptr as usize).is_multiple_of(crate::DATA_ALIGN) {
        return Err(KernelError::invalid(format!(
            "{what} at {ptr:p} is null or not {}-byte aligned",
            crate::DATA_ALIGN
        )));
    }
    // SAFETY: non-null, aligned beyond T's alignment, large enough, exclusive to this launch
    // and any bit pattern a valid T, per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<T>(), len) })
}

impl Tensor {
    /// The tensor's bytes as a typed host slice, after checking that it is host memory whose
    /// size and alignment fit `T`.
    ///
    /// # Safety
    /// `data` must be valid for reads of `desc.bytes` bytes, and no launch may write them
    /// while the slice lives.
    pub unsafe fn host_slice<T: Copy>(&self) -> Result<&[T], KernelError> {
        self.check_host::<T>()?;
        // SAFETY: checked above; validity guaranteed by the caller.
        Ok(unsafe {
            std::slice::from_raw_parts(
                self.data.cast::<T>(),
                self.desc.bytes as usize / size_of::<T>(),
            )
        })
    }

    /// The tensor's bytes as a typed mutable host slice (see [`Tensor::host_slice`]).
    ///
    /// # Safety
    /// `data` must be valid for writes of `desc.bytes` bytes, and nothing else may access
    /// them while the slice lives (so not for split stages, whose tiles run concurrently).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn host_slice_mut<T: Copy>(&self) -> Result<&mut [T], KernelError> {
        self.check_host::<T>()?;
        // SAFETY: checked above; exclusivity guaranteed by the caller.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(
                self.data.cast::<T>(),
                self.desc.bytes as usize / size_of::<T>(),
            )
        })
    }

    /// Values `range` of the tensor read as `T`s: the part one tile reads (see
    /// [`Tensor::host_slice`]).
    ///
    /// # Safety
    /// `data` must be valid for reads of `desc.bytes` bytes, and no launch may write the
    /// range's bytes while the slice lives. Other parts may be written meanwhile (a streamed
    /// stage's later rows still arriving).
    pub unsafe fn host_range<T: Copy>(&self, range: Range<usize>) -> Result<&[T], KernelError> {
        let (start, len) = self.check_range::<T>(&range)?;
        // SAFETY: checked above; validity guaranteed by the caller.
        Ok(unsafe { std::slice::from_raw_parts(self.data.cast::<T>().add(start), len) })
    }

    /// Values `range` of the tensor as mutable `T`s: the part of an output one tile writes.
    ///
    /// # Safety
    /// `data` must be valid for writes of `desc.bytes` bytes, and nothing else may access the
    /// range's bytes while the slice lives; other tiles may use other parts meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn host_range_mut<T: Copy>(
        &self,
        range: Range<usize>,
    ) -> Result<&mut [T], KernelError> {
        let (start, len) = self.check_range::<T>(&range)?;
        // SAFETY: checked above; exclusivity of the range guaranteed by the caller.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.data.cast::<T>().add(start), len) })
    }

    /// Checks host memory, alignment and that `range` of `T`s lies within the tensor's bytes;
    /// returns its start and length.
    fn check_range<T>(&self, range: &Range<usize>) -> Result<(usize, usize), KernelError> {
        self.check_host::<T>()?;
        let capacity = self.desc.bytes as usize / size_of::<T>();
        if range.start > range.end || range.end > capacity {
            return Err(KernelError::invalid(format!(
                "values {range:?} are outside the tensor's {capacity}"
            )));
        }
        Ok((range.start, range.end - range.start))
    }

    fn check_host<T>(&self) -> Result<(), KernelError> {
        if self.desc.memory != MemorySpace::HOST {
            return Err(KernelError::invalid("tensor is not in host memory"));
        }
        if self.data.is_null() && self.desc.bytes > 0 {
            return Err(KernelError::invalid("tensor data is null"));
        }
        if !(self.data as usize).is_multiple_of(align_of::<T>()) {
            return Err(KernelError::invalid("tensor data is misaligned"));
        }
        Ok(())
    }
}
