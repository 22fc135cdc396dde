//! What the user writes: the graph of stages ([`graph`]) and where each stage runs
//! ([`placement`]), parsed and checked with errors that name the file, line and field, and
//! the two loaded together with a run's overrides ([`files`]); the `.npy` reading that
//! parameter files, constant tensors and golden files share ([`npy`]); and where the files
//! kplace ships are found by name, wherever it runs from ([`locate`]); YAML syntax errors said
//! with their file ([`yaml`]); and the one range every rate a user gives must keep, as a frame
//! period from 1 ns to 1 day ([`rate`]).

pub mod files;
pub mod graph;
pub mod locate;
pub mod npy;
pub mod placement;
pub mod rate;
pub mod shape;
pub mod yaml;
