//! Fixed-block memory pools, allocated once at start from the plan.
//!
//! A pool is one allocation carved into equal blocks, each aligned to [`BLOCK_ALIGN`] bytes
//! (what kernels may assume of every tensor and workspace). Blocks are handed out with
//! [`Pool::take`] while frame slots are built; nothing is allocated after that, so the hot
//! path never allocates. An exhausted pool returns `None` for the caller to count as
//! backpressure, never a crash. Memory is zeroed at allocation.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

use kplace_abi::MemorySpace;

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
}

/// A fixed-block pool of host memory.
#[derive(Debug)]
pub struct Pool {
    name: String,
    space: MemorySpace,
    base: Option<NonNull<u8>>,
    layout: Layout,
    block_bytes: usize,
    stride: usize,
    blocks: usize,
    taken: usize,
}

// SAFETY: the pool owns its allocation; blocks are raw memory whose sharing is governed by the
// executor's slot ownership.
unsafe impl Send for Pool {}
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
unsafe impl Sync for Block {}

impl Pool {
    /// Allocates `blocks` zeroed host blocks of `block_bytes` each.
    pub fn host(
        name: impl Into<String>,
        block_bytes: u64,
        blocks: usize,
    ) -> Result<Pool, PoolError> {
        let name = name.into();
        let too_large = || PoolError::TooLarge {
            name: name.clone(),
            blocks,
            block_bytes,
        };
        let block = usize::try_from(block_bytes).map_err(|_| too_large())?;
        let stride = block
            .max(1)
            .checked_next_multiple_of(BLOCK_ALIGN)
            .ok_or_else(too_large)?;
        let total = stride.checked_mul(blocks).ok_or_else(too_large)?;
        let layout = Layout::from_size_align(total.max(BLOCK_ALIGN), BLOCK_ALIGN)
            .map_err(|_| too_large())?;
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
            layout,
            block_bytes: block,
            stride,
            blocks,
            taken: 0,
        })
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

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(base) = self.base {
            // SAFETY: allocated in `host` with this layout.
            unsafe { dealloc(base.as_ptr(), self.layout) };
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
