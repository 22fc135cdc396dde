//! Fixed-block memory pools, allocated once at start from the plan.
//!
//! A pool is one allocation carved into equal blocks, each aligned to [`BLOCK_ALIGN`] bytes
//! (what kernels may assume of every tensor and workspace), in one of three kinds of memory:
//! pageable host memory ([`Pool::host`]), page-locked host memory registered with a GPU
//! ([`Pool::pinned`], never write-combined, since the CPU reads it), or GPU memory
//! ([`Pool::device`]); the latter two through the [`Gpu`] seam. Blocks are handed out with
//! [`Pool::take`] while frame slots are built; nothing is allocated after that, so the hot path
//! never allocates. An exhausted pool returns `None` for the caller to count as backpressure,
//! never a crash. Host and pinned memory is zeroed at allocation; device memory is not.
//!
//! A block does not carry a fence of its own. Every block a GPU touches belongs to a frame slot,
//! and the executor reuses a slot, with all its blocks, only after the events of every GPU stage
//! that read or wrote them have completed (see the executor's module docs); the other blocks
//! (CPU workspaces, buffers of tensors that live only while a frame's stages run) are handed
//! between CPU launches that have returned.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::Arc;

use kplace_abi::MemorySpace;

use crate::cuda::owned::{GpuMemory, MemoryKind};
use crate::cuda::{Gpu, GpuError};

/// Alignment of every block, in bytes.
pub const BLOCK_ALIGN: usize = 64;

/// Why a pool could not be allocated.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The requested size does not fit in memory's address space.
    #[error("pool {name}: {blocks} blocks of {block_bytes} bytes overflow the address space")]
    TooLarge {
        /// The pool's name.
        name: String,
        /// Blocks requested.
        blocks: usize,
        /// Size of each.
        block_bytes: u64,
    },
    /// The allocator refused.
    #[error("pool {name}: cannot allocate {bytes} bytes")]
    OutOfMemory {
        /// The pool's name.
        name: String,
        /// Bytes requested.
        bytes: usize,
    },
    /// The GPU refused.
    #[error("pool {name}: {cause}")]
    Gpu {
        /// The pool's name.
        name: String,
        /// The driver's error.
        cause: GpuError,
    },
}

/// Who owns a pool's allocation, and so how it is freed.
enum Owner {
    /// `std::alloc`, with this layout; freed by the pool's `Drop`.
    Host(Layout),
    /// Pinned host or device memory of a GPU, freed when dropped (`None` for an empty pool).
    Gpu(Option<GpuMemory>),
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Host(layout) => write!(f, "Host({} bytes)", layout.size()),
            Owner::Gpu(Some(memory)) => write!(
                f,
                "{:?}(gpu:{}, {} bytes)",
                memory.kind(),
                memory.gpu().ordinal(),
                memory.bytes()
            ),
            Owner::Gpu(None) => f.write_str("Gpu(empty)"),
        }
    }
}

/// A fixed-block pool of host, pinned host or device memory.
#[derive(Debug)]
pub struct Pool {
    name: String,
    space: MemorySpace,
    base: Option<NonNull<u8>>,
    owner: Owner,
    block_bytes: usize,
    stride: usize,
    blocks: usize,
    taken: usize,
}

// SAFETY: the pool owns its allocation; blocks are raw memory whose sharing is governed by the
// executor's slot ownership.
unsafe impl Send for Pool {}
// SAFETY: as for Send; through `&Pool` only sizes and counts are read (taking needs `&mut`).
unsafe impl Sync for Pool {}

/// One block of a pool: an address and a size. It does not own the memory; the pool must
/// outlive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// The block's address, aligned to [`BLOCK_ALIGN`].
    pub ptr: *mut u8,
    /// Usable bytes.
    pub bytes: u64,
}

// SAFETY: a block is an address; see `Pool`.
unsafe impl Send for Block {}
// SAFETY: a block is an address; see `Pool`.
unsafe impl Sync for Block {}

impl Pool {
    /// Allocates `blocks` zeroed host blocks of `block_bytes` each.
    pub fn host(
        name: impl Into<String>,
        block_bytes: u64,
        blocks: usize,
    ) -> Result<Pool, PoolError> {
        let name = name.into();
        let (block, stride, total) = geometry(&name, block_bytes, blocks)?;
        let layout =
            Layout::from_size_align(total.max(BLOCK_ALIGN), BLOCK_ALIGN).map_err(|_| {
                PoolError::TooLarge {
                    name: name.clone(),
                    blocks,
                    block_bytes,
                }
            })?;
        let base = if total == 0 {
            None
        } else {
            // SAFETY: the layout has a non-zero size.
            let ptr = unsafe { alloc_zeroed(layout) };
            Some(NonNull::new(ptr).ok_or(PoolError::OutOfMemory {
                name: name.clone(),
                bytes: total,
            })?)
        };
        Ok(Pool {
            name,
            space: MemorySpace::HOST,
            base,
            owner: Owner::Host(layout),
            block_bytes: block,
            stride,
            blocks,
            taken: 0,
        })
    }

    /// Allocates `blocks` zeroed blocks of `block_bytes` each in page-locked host memory
    /// registered with `gpu`, which copies to and from it asynchronously.
    pub fn pinned(
        name: impl Into<String>,
        block_bytes: u64,
        blocks: usize,
        gpu: Arc<dyn Gpu>,
    ) -> Result<Pool, PoolError> {
        Pool::on_gpu(name.into(), block_bytes, blocks, &gpu, MemoryKind::Pinned)
    }

    /// Allocates `blocks` blocks of `block_bytes` each in `gpu`'s memory (not zeroed).
    pub fn device(
        name: impl Into<String>,
        block_bytes: u64,
        blocks: usize,
        gpu: Arc<dyn Gpu>,
    ) -> Result<Pool, PoolError> {
        Pool::on_gpu(name.into(), block_bytes, blocks, &gpu, MemoryKind::Device)
    }

    fn on_gpu(
        name: String,
        block_bytes: u64,
        blocks: usize,
        gpu: &Arc<dyn Gpu>,
        kind: MemoryKind,
    ) -> Result<Pool, PoolError> {
        let (block, stride, total) = geometry(&name, block_bytes, blocks)?;
        let memory = if total == 0 {
            None
        } else {
            let memory = GpuMemory::new(gpu, kind, total).map_err(|cause| PoolError::Gpu {
                name: name.clone(),
                cause,
            })?;
            Some(memory)
        };
        Ok(Pool {
            name,
            space: match kind {
                MemoryKind::Pinned => MemorySpace::HOST,
                MemoryKind::Device => MemorySpace::DEVICE,
            },
            base: memory.as_ref().and_then(|m| NonNull::new(m.ptr())),
            owner: Owner::Gpu(memory),
            block_bytes: block,
            stride,
            blocks,
            taken: 0,
        })
    }

    /// Allocates the pool `spec` describes, through `gpu` for pinned and device memory.
    pub fn for_spec(
        spec: &crate::plan::PoolSpec,
        gpu: Option<&Arc<dyn Gpu>>,
    ) -> Result<Pool, PoolError> {
        use crate::plan::BufferSpace;
        let missing = || PoolError::Gpu {
            name: spec.name.clone(),
            cause: GpuError::new(
                spec.space.to_string(),
                "allocate",
                "the plan has no open GPU for this pool",
            ),
        };
        match spec.space {
            BufferSpace::Host => Pool::host(spec.name.clone(), spec.block_bytes, spec.blocks),
            BufferSpace::PinnedHost(_) => Pool::pinned(
                spec.name.clone(),
                spec.block_bytes,
                spec.blocks,
                Arc::clone(gpu.ok_or_else(missing)?),
            ),
            BufferSpace::Device(_) => Pool::device(
                spec.name.clone(),
                spec.block_bytes,
                spec.blocks,
                Arc::clone(gpu.ok_or_else(missing)?),
            ),
        }
    }

    /// The pool's name (a tensor or a stage's workspace).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its memory lives.
    pub fn space(&self) -> MemorySpace {
        self.space
    }

    /// Size of each block.
    pub fn block_bytes(&self) -> u64 {
        self.block_bytes as u64
    }

    /// Number of blocks.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// Blocks not yet taken.
    pub fn available(&self) -> usize {
        self.blocks - self.taken
    }

    /// The next free block, or `None` when the pool is exhausted.
    pub fn take(&mut self) -> Option<Block> {
        if self.taken == self.blocks {
            return None;
        }
        let ptr = match self.base {
            // SAFETY: taken < blocks, so the offset is inside the allocation.
            Some(base) => unsafe { base.as_ptr().add(self.taken * self.stride) },
            None => NonNull::<u8>::dangling().as_ptr(),
        };
        self.taken += 1;
        Some(Block {
            ptr,
            bytes: self.block_bytes as u64,
        })
    }
}

/// Block size, stride between blocks and total bytes of a pool, or why it cannot exist.
fn geometry(
    name: &str,
    block_bytes: u64,
    blocks: usize,
) -> Result<(usize, usize, usize), PoolError> {
    let too_large = || PoolError::TooLarge {
        name: name.to_string(),
        blocks,
        block_bytes,
    };
    let block = usize::try_from(block_bytes).map_err(|_| too_large())?;
    let stride = block
        .max(1)
        .checked_next_multiple_of(BLOCK_ALIGN)
        .ok_or_else(too_large)?;
    let total = stride.checked_mul(blocks).ok_or_else(too_large)?;
    Ok((block, stride, total))
}

impl Drop for Pool {
    fn drop(&mut self) {
        // GPU memory frees itself (the executor drops pools only after every stream using them
        // has drained); host memory is freed here.
        if let (Some(base), Owner::Host(layout)) = (self.base, &self.owner) {
            // SAFETY: allocated with alloc_zeroed and this layout in `Pool::host`.
            unsafe { dealloc(base.as_ptr(), *layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_disjoint_and_bounded() {
        let mut pool = Pool::host("t", 100, 3).unwrap();
        let blocks: Vec<Block> = std::iter::from_fn(|| pool.take()).collect();
        assert_eq!(blocks.len(), 3);
        assert_eq!(pool.available(), 0);
        assert!(
            pool.take().is_none(),
            "an exhausted pool says so instead of allocating"
        );
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(b.ptr as usize % BLOCK_ALIGN, 0);
            assert_eq!(b.bytes, 100);
            if i > 0 {
                assert!(b.ptr as usize >= blocks[i - 1].ptr as usize + 100);
            }
            // Zeroed and writable.
            // SAFETY: the block is 100 bytes of the pool, alive and not otherwise borrowed.
            let bytes = unsafe { std::slice::from_raw_parts_mut(b.ptr, 100) };
            assert!(bytes.iter().all(|&x| x == 0));
            bytes.fill(7);
        }
    }

    #[test]
    fn empty_blocks_and_overflow() {
        let mut pool = Pool::host("ws", 0, 2).unwrap();
        assert_eq!(pool.take().unwrap().bytes, 0);
        assert!(matches!(
            Pool::host("big", u64::MAX / 2, 4),
            Err(PoolError::TooLarge { .. })
        ));
    }
}
