//! What kplace asks of the operating system beyond `std`, in one place.
//!
//! - [`affinity`]: CPU sets, thread pinning and confining a child to cores.
//! - [`files`]: reading a file a user names whole, with a bound (`/dev/zero` never fills
//!   memory).
//! - [`write`](mod@write): writing one whole or not at all, never onto anything but a regular file.
//! - [`process`]: signals to children, dying with the parent, a reaped child's CPU time, the
//!   calling thread's nice value, SIGPIPE's disposition.
//!
//! Everything goes through nix's safe wrappers, except calls nix lacks: `wait4` (a child's
//! resource use as it is reaped), `setpriority`/`getpriority` and `_exit` (between fork and
//! exec), each behind one function here with its SAFETY argument. Two other groups of system calls live beside the code that
//! needs them, for a reason each states: the batched `recvmmsg`/`sendmmsg` of the receiver and
//! the sender (`net::udp::socket`, `net::sender`), whose message headers are built once and
//! reused so that a batch allocates nothing, and the signal handler of [`crate::interrupt`].

pub mod affinity;
pub mod files;
pub mod process;
pub mod write;

pub use affinity::{
    AffinityGuard, CpuSet, CpuSetError, confine_current_thread, pin_current_thread,
};
