//! How each radar kernel may be split into tiles.
//!
//! Only `radar.range_fft` may be split: along input axis 0 (chirps), into tiles that divide
//! the frame's chirps, so each tile's chirps are transformed as soon as they arrive. Every
//! other kernel needs its whole input and refuses any split.

use crate::ParamError;
use crate::names::KernelName;

/// Fails when a kernel that cannot be split is asked for tiles. `split` is the config's
/// `(axis, tile)`, `None` when unsplit.
pub fn unsplit(kernel: KernelName, split: Option<(usize, u64)>) -> Result<(), ParamError> {
    match split {
        None => Ok(()),
        Some((axis, tile)) => Err(ParamError::NotSplit { kernel, axis, tile }),
    }
}

/// The chirps per tile of `radar.range_fft` over a frame of `chirps`: `None` when unsplit,
/// else a tile of at least 1 chirp that divides `chirps`, along axis 0.
pub fn range_fft_tile(split: Option<(usize, u64)>, chirps: u64) -> Result<Option<u64>, ParamError> {
    match split {
        None => Ok(None),
        Some((0, tile)) if tile >= 1 && chirps.is_multiple_of(tile) => Ok(Some(tile)),
        Some((0, tile)) => Err(ParamError::RangeSplitTile { tile, chirps }),
        Some((axis, _)) => Err(ParamError::RangeSplitAxis { axis }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{CFAR, CLUSTER, DOPPLER_FFT};

    #[test]
    fn unsplit_kernels_take_no_tiles() {
        for kernel in [DOPPLER_FFT, CFAR, CLUSTER] {
            assert_eq!(unsplit(kernel, None), Ok(()));
            let e = unsplit(kernel, Some((0, 64))).expect_err("split");
            assert_eq!(e.parameter(), "split");
            assert_eq!(
                e.to_string(),
                format!("{kernel} cannot be split (asked for tiles of 64 along axis 0)")
            );
        }
    }

    #[test]
    fn range_tiles_divide_the_chirps_along_axis_0() {
        assert_eq!(range_fft_tile(None, 128), Ok(None));
        for tile in [1, 16, 64, 128] {
            assert_eq!(range_fft_tile(Some((0, tile)), 128), Ok(Some(tile)));
        }
        for tile in [0, 5, 48, 256] {
            let e = range_fft_tile(Some((0, tile)), 128).expect_err("tile");
            assert_eq!(
                e.to_string(),
                format!("split tile of {tile} chirps does not divide the 128 chirps of input 0")
            );
        }
        let e = range_fft_tile(Some((1, 8)), 128).expect_err("axis");
        assert_eq!(
            e.to_string(),
            "radar.range_fft splits only along axis 0 (chirps), not axis 1"
        );
    }
}
