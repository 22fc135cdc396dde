//! Port checks on the ABI's descriptors and tensors, for kernel libraries written in Rust.
//!
//! `create` validates each port's descriptor once ([`Ports::port`]); `launch` then checks that
//! the tensor it receives still matches that descriptor ([`Ports::launch`]) before the kernel
//! touches its bytes or enqueues work on its address, so a runtime bug becomes an error
//! message rather than memory corruption or a device fault. A backend describes where its
//! ports live and what its kernels need of them in one [`Ports`] value; everything else
//! (the rules and the messages) is the same for every backend and every workload.

use super::{Config, KernelError};
use crate::{Dtype, MemorySpace, Tensor, TensorDesc};

/// What a backend's kernels require of their ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// The memory space every port must be in.
    pub memory: MemorySpace,
    /// The alignment, in bytes, a launch tensor's data must have: what the kernels' accesses
    /// need (the ABI promises 64).
    pub data_align: usize,
    /// Whether the kernels count a map's elements in 32 bits, so a map may have at most
    /// `2^32 - 1` of them ([`Ports::check_cells`]).
    pub u32_cells: bool,
}

/// Describes a descriptor for messages: `cf32 [1024, 128]`.
pub fn describe(desc: &TensorDesc) -> String {
    format!(
        "{} {:?}",
        desc.dtype.name().unwrap_or("(unknown dtype)"),
        desc.dims()
    )
}

impl Ports {
    /// The memory space's name for messages (`host`, `device`).
    fn memory_name(&self) -> &'static str {
        self.memory.name().unwrap_or("?")
    }

    /// Checks port `index` of `ports` (`what`, e.g. "input 0") at create time: `dtype`, this
    /// backend's memory, as many dimensions as `layout` names (none empty, except a record
    /// list's) and enough bytes (addressable as a slice, for host memory).
    pub fn port(
        &self,
        ports: &[TensorDesc],
        index: usize,
        what: &str,
        dtype: Dtype,
        layout: &str,
    ) -> Result<TensorDesc, KernelError> {
        let rank = layout.split(',').count();
        let desc = Config::expect(ports, index, what, dtype, None)?;
        let dims = desc.dims();
        if dims.len() != rank || (dtype != Dtype::RECORDS && dims.contains(&0)) {
            return Err(KernelError::invalid(format!(
                "{what} must be {} {layout} without empty dimensions, got {}",
                dtype.name().unwrap_or("?"),
                describe(&desc)
            )));
        }
        if desc.memory != self.memory {
            return Err(KernelError::invalid(format!(
                "{what} must be in {} memory, got {}",
                self.memory_name(),
                desc.memory.name().unwrap_or("an unknown memory space")
            )));
        }
        let needed = dtype.bytes_for(dims).ok_or_else(|| {
            KernelError::invalid(format!(
                "{what}: {} is too large to address",
                describe(&desc)
            ))
        })?;
        // Host ports become slices, so their size must fit usize.
        let addressable = self.memory != MemorySpace::HOST || usize::try_from(desc.bytes).is_ok();
        if desc.bytes < needed || !addressable {
            return Err(KernelError::invalid(format!(
                "{what}: {} needs {needed} bytes, the descriptor says {}",
                describe(&desc),
                desc.bytes
            )));
        }
        Ok(desc)
    }

    /// Fails when the kernels count elements in 32 bits and a `rows` x `cols` map (port
    /// `what`) has more than `2^32 - 1` of them; does nothing otherwise.
    pub fn check_cells(&self, what: &str, rows: u64, cols: u64) -> Result<(), KernelError> {
        if !self.u32_cells {
            return Ok(());
        }
        match rows.checked_mul(cols) {
            Some(cells) if cells <= u64::from(u32::MAX) => Ok(()),
            _ => Err(KernelError::invalid(format!(
                "{what}: [{rows}, {cols}] has more than 2^32 - 1 elements, more than these \
                 kernels index"
            ))),
        }
    }

    /// Checks a launch tensor (`what`) against the descriptor `create` accepted: same dtype
    /// and dimensions, this backend's memory, enough bytes, non-null and aligned data.
    pub fn launch<'a>(
        &self,
        tensor: Result<&'a Tensor, KernelError>,
        what: &str,
        expected: &TensorDesc,
    ) -> Result<&'a Tensor, KernelError> {
        let tensor = tensor?;
        let desc = &tensor.desc;
        if desc.dtype != expected.dtype || desc.dims() != expected.dims() {
            return Err(KernelError::invalid(format!(
                "{what} was created as {} but launched as {}",
                describe(expected),
                describe(desc)
            )));
        }
        if desc.memory != self.memory {
            return Err(KernelError::invalid(format!(
                "{what} is not in {} memory",
                self.memory_name()
            )));
        }
        // The expected size was validated (and, for host memory, fits usize) at create time.
        if desc.bytes
            < expected
                .dtype
                .bytes_for(expected.dims())
                .unwrap_or(u64::MAX)
        {
            return Err(KernelError::invalid(format!(
                "{what} has {} bytes, too few for {}",
                desc.bytes,
                describe(desc)
            )));
        }
        if tensor.data.is_null() {
            return Err(KernelError::invalid(format!("{what} has no data")));
        }
        if !(tensor.data as usize).is_multiple_of(self.data_align) {
            return Err(KernelError::invalid(format!(
                "{what} data at {:p} is misaligned",
                tensor.data
            )));
        }
        Ok(tensor)
    }
}

/// Fails unless a port's dimensions are exactly `dims` (`layout` says what they are).
pub fn expect_dims(
    desc: &TensorDesc,
    what: &str,
    dims: &[u64],
    layout: &str,
) -> Result<(), KernelError> {
    if desc.dims() == dims {
        Ok(())
    } else {
        Err(KernelError::invalid(format!(
            "{what} must be {} {dims:?} ({layout}), got {}",
            desc.dtype.name().unwrap_or("?"),
            describe(desc)
        )))
    }
}

/// The capacity of a record-list port (`what`) whose descriptor [`Ports::port`] accepted:
/// its one dimension, which must fit the header's `u32`.
pub fn capacity_of(desc: &TensorDesc, what: &str) -> Result<u32, KernelError> {
    let capacity = desc.dims().first().copied().unwrap_or(0);
    u32::try_from(capacity)
        .map_err(|_| KernelError::invalid(format!("{what}: capacity {capacity} does not fit u32")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host ports, 4-byte aligned.
    const HOST: Ports = Ports {
        memory: MemorySpace::HOST,
        data_align: 4,
        u32_cells: false,
    };

    /// Device ports, 8-byte aligned, cell counts within 32 bits.
    const DEVICE: Ports = Ports {
        memory: MemorySpace::DEVICE,
        data_align: 8,
        u32_cells: true,
    };

    /// A tensor of `dtype` with `dims` in `memory`.
    fn desc(memory: MemorySpace, dtype: Dtype, dims: &[u64]) -> TensorDesc {
        TensorDesc::new(dtype, memory, dims).expect("a describable tensor")
    }

    fn message<T: std::fmt::Debug>(r: Result<T, KernelError>) -> String {
        r.expect_err("refused").message
    }

    #[test]
    fn ports_are_checked_for_dtype_rank_memory_and_bytes() {
        let good = desc(MemorySpace::HOST, Dtype::F32, &[4, 8]);
        let port = |d: TensorDesc, ports: &Ports| {
            ports.port(&[d], 0, "input 0", Dtype::F32, "[rows, cols]")
        };
        assert_eq!(port(good, &HOST), Ok(good));
        assert_eq!(
            message(HOST.port(&[], 0, "input 0", Dtype::F32, "[rows, cols]")),
            "input 0 is missing"
        );
        assert_eq!(
            message(port(desc(MemorySpace::HOST, Dtype::F32, &[32]), &HOST)),
            "input 0 must be f32 [rows, cols] without empty dimensions, got f32 [32]"
        );
        assert_eq!(
            message(port(desc(MemorySpace::HOST, Dtype::F32, &[0, 8]), &HOST)),
            "input 0 must be f32 [rows, cols] without empty dimensions, got f32 [0, 8]"
        );
        assert_eq!(
            message(port(good, &DEVICE)),
            "input 0 must be in device memory, got host"
        );
        let short = TensorDesc { bytes: 127, ..good };
        assert_eq!(
            message(port(short, &HOST)),
            "input 0: f32 [4, 8] needs 128 bytes, the descriptor says 127"
        );
        // A record list may be empty.
        let list = desc(MemorySpace::DEVICE, Dtype::RECORDS, &[0]);
        let accepted = DEVICE.port(&[list], 0, "output 0", Dtype::RECORDS, "[capacity]");
        assert_eq!(accepted.and_then(|d| capacity_of(&d, "output 0")), Ok(0));
    }

    #[test]
    fn cells_are_limited_only_where_the_kernels_count_in_32_bits() {
        assert_eq!(HOST.check_cells("input 0", 1 << 32, 1 << 32), Ok(()));
        assert_eq!(DEVICE.check_cells("input 0", 65535, 65537), Ok(()));
        assert_eq!(
            message(DEVICE.check_cells("input 0", 65536, 65536)),
            "input 0: [65536, 65536] has more than 2^32 - 1 elements, more than these kernels \
             index"
        );
        assert!(DEVICE.check_cells("input 0", u64::MAX, 2).is_err());
    }

    #[test]
    fn dims_and_capacities() {
        let list = desc(MemorySpace::HOST, Dtype::RECORDS, &[1 << 32]);
        assert_eq!(
            message(capacity_of(&list, "output 0")),
            "output 0: capacity 4294967296 does not fit u32"
        );
        let map = desc(MemorySpace::HOST, Dtype::F32, &[4, 8]);
        assert_eq!(
            expect_dims(&map, "output 0", &[4, 8], "the input's shape"),
            Ok(())
        );
        assert_eq!(
            message(expect_dims(&map, "output 0", &[8, 4], "the input's shape")),
            "output 0 must be f32 [8, 4] (the input's shape), got f32 [4, 8]"
        );
    }

    #[test]
    fn launch_tensors_must_match_what_create_accepted() {
        let expected = desc(MemorySpace::DEVICE, Dtype::F32, &[4, 8]);
        let mut buffer = [0u64; 16];
        let data = buffer.as_mut_ptr().cast::<std::ffi::c_void>();
        let tensor = |desc: TensorDesc, data: *mut std::ffi::c_void| Tensor { desc, data };
        let check = |t: &Tensor| DEVICE.launch(Ok(t), "input 0", &expected).map(|_| ());
        assert_eq!(check(&tensor(expected, data)), Ok(()));
        let other = desc(MemorySpace::DEVICE, Dtype::F32, &[8, 4]);
        assert_eq!(
            message(check(&tensor(other, data))),
            "input 0 was created as f32 [4, 8] but launched as f32 [8, 4]"
        );
        let host = TensorDesc {
            memory: MemorySpace::HOST,
            ..expected
        };
        assert_eq!(
            message(check(&tensor(host, data))),
            "input 0 is not in device memory"
        );
        let short = TensorDesc {
            bytes: 100,
            ..expected
        };
        assert_eq!(
            message(check(&tensor(short, data))),
            "input 0 has 100 bytes, too few for f32 [4, 8]"
        );
        assert_eq!(
            message(check(&tensor(expected, std::ptr::null_mut()))),
            "input 0 has no data"
        );
        // 4-byte aligned is enough for the host's accesses, not for the device's.
        let data4 = buffer.as_mut_ptr().cast::<u32>().wrapping_add(1).cast();
        assert!(message(check(&tensor(expected, data4))).contains("is misaligned"));
        let host_tensor = tensor(host, data4);
        assert!(HOST.launch(Ok(&host_tensor), "input 0", &host).is_ok());
    }
}
