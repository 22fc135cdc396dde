//! What the user writes: the graph of stages ([`graph`]) and where each stage runs
//! ([`placement`]), parsed and checked with errors that name the file, line and field, and
//! the two loaded together with a run's overrides ([`files`]); and the `.npy` reading that
//! parameter files and golden files share ([`npy`]).

pub mod files;
pub mod graph;
pub mod npy;
pub mod placement;
pub mod shape;
