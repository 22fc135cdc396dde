//! The sender's report: what `kplace send --report FILE` writes (schema [`SEND_SCHEMA`]) and
//! `bisect-rate` reads back through [`super::read_json`] to judge whether the load generator
//! kept its schedule.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The schema name and version of a sender's report.
pub const SEND_SCHEMA: &str = "kplace-send-report/2";

/// What one `kplace send` did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendFile {
    /// Always [`SEND_SCHEMA`].
    pub schema: String,
    /// Frames sent.
    pub frames: u64,
    /// Datagrams sent.
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// From the first packet to the last.
    pub elapsed_s: f64,
    /// Frames per second over `elapsed_s`.
    pub frames_per_s: f64,
    /// How far the sender fell behind its schedule at worst.
    pub max_lag_ms: f64,
    /// The longest a sleep overran its deadline (the sender kept off the CPU).
    pub max_oversleep_ms: f64,
    /// Times the sending thread was switched out involuntarily.
    pub involuntary_switches: u64,
    /// The nice value it sent at.
    pub nice: i32,
    /// Whether it was stopped before sending every frame.
    pub stopped: bool,
}

impl super::Versioned for SendFile {
    const SCHEMA: &'static str = SEND_SCHEMA;
}
