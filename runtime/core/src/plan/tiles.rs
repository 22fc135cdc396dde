//! Launch tiles as placed: how many indices of its split axis each launch of a stage covers.
//!
//! The graph gives a split stage's tile (`split: {axis: 0, tile: 16}`), chosen for the CPU: a
//! worker starts on 16 chirps as soon as they have arrived, and a CPU launch costs nothing
//! beyond its work. A GPU pays a fixed cost for every launch and every copy it is handed, so a
//! GPU stage defaults to larger tiles, derived from the frame: a quarter of the axis, rounded up
//! to a multiple of the graph's tile that divides the axis ([`gpu_default_tile`]). At 4096x512
//! the range FFT then launches 4 times per frame, with 4 uploads, instead of 32 of each; the
//! last quarter still starts as soon as its chirps have arrived.
//!
//! A placement may set any tile that divides the axis (`range_fft: {device: gpu, tile: 64}`),
//! on either device. A tile on a stage the graph does not split, or one that does not divide
//! the axis, is a [`PlanError::Tile`] naming the placement line and the tiles that would fit.
//!
//! The planner applies the placed tiles to its copy of the graph (`place_tiles`), so
//! everything downstream (pools, transfers, the executor, reports) sees one tile per stage.

use std::fmt;
use std::path::Path;

use crate::model::graph::Graph;
use crate::model::placement::{Device, StagePlacement};

use super::PlanError;

/// Where a stage's tile came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileOrigin {
    /// The graph's `split.tile`.
    Graph,
    /// The placement's `tile`.
    Placement,
    /// The GPU's default, [`gpu_default_tile`] of the graph's tile.
    GpuDefault {
        /// The graph's tile it replaced.
        graph_tile: u64,
    },
}

impl fmt::Display for TileOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TileOrigin::Graph => f.write_str("the graph's"),
            TileOrigin::Placement => f.write_str("the placement's"),
            TileOrigin::GpuDefault { graph_tile } => {
                write!(
                    f,
                    "the GPU's default, a quarter of the axis; graph: {graph_tile}"
                )
            }
        }
    }
}

/// The GPU's default tile for an axis of `extent` indices that the graph splits in tiles of
/// `graph_tile`: the smallest multiple of `graph_tile` that is at least `extent / 4` (rounded
/// up) and divides `extent`. So at most 4 launches per frame, never fewer indices per launch
/// than the graph asked for, and always a whole number of tiles (`extent` itself qualifies
/// when `graph_tile` divides it, as the graph guarantees).
pub fn gpu_default_tile(extent: u64, graph_tile: u64) -> u64 {
    let graph_tile = graph_tile.max(1);
    let quarter = extent.div_ceil(4);
    let mut tile = quarter.div_ceil(graph_tile).max(1) * graph_tile;
    while tile < extent && !extent.is_multiple_of(tile) {
        tile += graph_tile;
    }
    tile.min(extent.max(1))
}

/// The divisors of `extent` in ascending order, the first and last `limit / 2` when there are
/// more than `limit`, for error messages.
fn fitting_tiles(extent: u64, limit: usize) -> String {
    let (mut small, mut large) = (Vec::new(), Vec::new());
    let mut d = 1u64;
    while d.saturating_mul(d) <= extent {
        if extent.is_multiple_of(d) {
            small.push(d);
            if d * d != extent {
                large.push(extent / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    let mut tiles: Vec<String> = small.iter().map(u64::to_string).collect();
    if tiles.len() > limit {
        let tail = tiles.split_off(tiles.len() - limit / 2);
        tiles.truncate(limit / 2);
        tiles.push("...".into());
        tiles.extend(tail);
    }
    tiles.join(", ")
}

/// Applies each stage's placed tile to `graph`; returns the graph as placed and, per stage in
/// graph order, where its tile came from (`None` for a stage that is not split).
pub(super) fn place_tiles(
    mut graph: Graph,
    entries: &[StagePlacement],
    placement: &Path,
) -> Result<(Graph, Vec<Option<TileOrigin>>), PlanError> {
    let mut origins = Vec::with_capacity(graph.stages.len());
    for (index, entry) in entries.iter().enumerate() {
        let stage = &graph.stages[index];
        let Some(mut split) = stage.split else {
            if let Some(tile) = entry.tile {
                return Err(PlanError::Tile {
                    stage: stage.name.clone(),
                    placement: placement.to_path_buf(),
                    line: entry.line,
                    why: format!(
                        "tile {tile} given, but graph {} does not split this stage (add \
                         `split: {{axis: 0, tile: ...}}` to its entry there, or remove `tile`)",
                        graph.path.display()
                    ),
                });
            }
            origins.push(None);
            continue;
        };
        let input = graph.tensor(stage.inputs[0]);
        let extent = input.shape[split.axis];
        let origin = match (entry.tile, entry.device) {
            (Some(tile), _) => {
                if !extent.is_multiple_of(tile) {
                    return Err(PlanError::Tile {
                        stage: stage.name.clone(),
                        placement: placement.to_path_buf(),
                        line: entry.line,
                        why: format!(
                            "tile {tile} does not divide the {extent} indices of axis {} of {}; \
                             tiles that do: {}",
                            split.axis,
                            input.name,
                            fitting_tiles(extent, 16)
                        ),
                    });
                }
                split.tile = tile;
                TileOrigin::Placement
            }
            (None, Device::Gpu(_)) => {
                let graph_tile = split.tile;
                split.tile = gpu_default_tile(extent, graph_tile);
                if split.tile == graph_tile {
                    TileOrigin::Graph
                } else {
                    TileOrigin::GpuDefault { graph_tile }
                }
            }
            (None, Device::Cpu) => TileOrigin::Graph,
        };
        graph.stages[index].split = Some(split);
        origins.push(Some(origin));
    }
    Ok((graph, origins))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_default_is_a_quarter_of_the_axis_in_whole_graph_tiles() {
        // The radar CPIs with the graph's 16-chirp tiles.
        assert_eq!(gpu_default_tile(128, 16), 32);
        assert_eq!(gpu_default_tile(256, 16), 64);
        assert_eq!(gpu_default_tile(512, 16), 128);
        assert_eq!(gpu_default_tile(1024, 16), 256);
        // Fewer than four graph tiles: never smaller than the graph's.
        assert_eq!(gpu_default_tile(32, 16), 16);
        assert_eq!(gpu_default_tile(16, 16), 16);
        // A quarter that is no multiple of the graph tile: the next one that divides.
        assert_eq!(gpu_default_tile(96, 16), 32, "24 -> 32, which divides 96");
        assert_eq!(
            gpu_default_tile(80, 16),
            80,
            "20 -> 32, 48, 64 do not divide; 80 does"
        );
        assert_eq!(gpu_default_tile(81, 27), 27);
        assert_eq!(gpu_default_tile(7, 1), 7, "a prime axis: whole");
        assert_eq!(gpu_default_tile(12, 1), 3);
    }

    #[test]
    fn the_gpu_default_always_divides_and_bounds_launches() {
        for extent in 1..=600u64 {
            for graph_tile in (1..=extent).filter(|t| extent.is_multiple_of(*t)) {
                let tile = gpu_default_tile(extent, graph_tile);
                assert!(
                    extent.is_multiple_of(tile),
                    "{extent}/{graph_tile} -> {tile}"
                );
                assert!(
                    tile.is_multiple_of(graph_tile),
                    "{extent}/{graph_tile} -> {tile}"
                );
                assert!(tile >= graph_tile, "{extent}/{graph_tile} -> {tile}");
                assert!(
                    extent / tile <= 4 || tile == graph_tile,
                    "{extent}/{graph_tile} -> {tile}"
                );
            }
        }
    }

    #[test]
    fn fitting_tiles_lists_divisors_in_order() {
        assert_eq!(fitting_tiles(12, 16), "1, 2, 3, 4, 6, 12");
        assert_eq!(fitting_tiles(16, 16), "1, 2, 4, 8, 16");
        assert_eq!(fitting_tiles(1, 16), "1");
        let long = fitting_tiles(720, 6);
        assert!(
            long.starts_with("1, 2, 3, ...") && long.ends_with("360, 720"),
            "{long}"
        );
    }
}
