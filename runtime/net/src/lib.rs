//! Frames in and out over the network: the packet format ([`wire`]), the UDP receiver
//! that assembles frames from it ([`udp`]), the paced open-loop sender ([`sender`]), and the
//! in-memory replay source that delivers prepared frames through the same ingest path
//! ([`replay`]), and how a user names one or the other ([`source`]).
//!
//! Both sources feed the executor of `kplace-core` through its `Ingest` seam; what they count
//! ([`udp::IngestCounters`], [`sender::SendReport`]) is plain data the report crate reads.

#![warn(missing_docs)]

pub mod replay;
pub mod sender;
pub mod source;
pub mod udp;
pub mod wire;
