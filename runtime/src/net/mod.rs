//! Frames in and out over the network: the packet format ([`wire`]), the UDP receiver
//! that assembles frames from it ([`udp`]), the paced open-loop sender ([`sender`]), and the
//! in-memory replay source that delivers prepared frames through the same ingest path
//! ([`replay`]), and how a user names one or the other ([`source`]); and the HTTP endpoint a
//! monitoring system scrapes a run's metrics from ([`metrics`]).

pub mod metrics;
pub mod replay;
pub mod sender;
pub mod source;
pub mod udp;
pub mod wire;
