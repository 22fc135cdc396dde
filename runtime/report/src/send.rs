//! The sender's report: what `kplace send --report FILE` writes (schema [`SEND_SCHEMA`]) and
//! `bisect-rate` reads back through [`super::read_json`] to judge whether the load generator
//! kept its schedule.

use std::time::Duration;

use kplace_net::sender::SendReport;
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

impl SendFile {
    /// The record `kplace send --report` writes of `report`, a run sent at nice value `nice`.
    pub fn of(report: &SendReport, nice: i32) -> SendFile {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        SendFile {
            schema: SEND_SCHEMA.to_string(),
            frames: report.frames,
            packets: report.packets,
            bytes: report.bytes,
            elapsed_s: report.elapsed.as_secs_f64(),
            frames_per_s: report.frames_per_s(),
            max_lag_ms: ms(report.max_lag),
            max_oversleep_ms: ms(report.max_oversleep),
            involuntary_switches: report.involuntary_switches,
            nice,
            stopped: report.stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_recorded_with_its_rate_lag_and_nice_value() {
        let report = SendReport {
            frames: 2,
            packets: 256,
            bytes: 1_000_000,
            elapsed: Duration::from_millis(20),
            max_lag: Duration::from_micros(1500),
            max_oversleep: Duration::from_micros(250),
            involuntary_switches: 3,
            frame_starts: Vec::new(),
            start_ns: 50,
            send_buffer: 8 << 20,
            syscalls: 4,
            stopped: false,
        };
        let file = SendFile::of(&report, -5);
        assert_eq!(file.schema, SEND_SCHEMA);
        assert_eq!((file.frames, file.nice, file.frames_per_s), (2, -5, 100.0));
        assert_eq!((file.max_lag_ms, file.max_oversleep_ms), (1.5, 0.25));
        assert_eq!(
            (file.packets, file.bytes, file.involuntary_switches),
            (256, 1_000_000, 3)
        );
        assert!(!file.stopped);
    }
}
