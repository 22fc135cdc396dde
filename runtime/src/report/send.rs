//! The sender's report: what `kplace send --report FILE` writes (schema [`SEND_SCHEMA`]) and
//! `bisect-rate` reads back through [`super::read_json`] to judge whether the load generator
//! kept its schedule.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The schema name and version of a sender's report.
pub const SEND_SCHEMA: &str = "kplace-send-report/1";

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
    pub cpi_per_s: f64,
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

impl SendFile {
    /// The record of `report`, sent at nice value `nice`.
    pub fn new(report: &crate::net::sender::SendReport, nice: i32) -> SendFile {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        SendFile {
            schema: SEND_SCHEMA.to_string(),
            frames: report.frames,
            packets: report.packets,
            bytes: report.bytes,
            elapsed_s: report.elapsed.as_secs_f64(),
            cpi_per_s: report.cpi_per_s(),
            max_lag_ms: ms(report.max_lag),
            max_oversleep_ms: ms(report.max_oversleep),
            involuntary_switches: report.involuntary_switches,
            nice,
            stopped: report.stopped,
        }
    }
}

impl super::Versioned for SendFile {
    const SCHEMA: &'static str = SEND_SCHEMA;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::net::sender::{FrameCount, FrameTimes, Pacing, SendReport};

    #[test]
    fn a_send_is_recorded_printed_and_timed() {
        let report = SendReport {
            frames: 2,
            packets: 256,
            bytes: 1_000_000,
            elapsed: Duration::from_millis(20),
            max_lag: Duration::from_micros(1500),
            max_oversleep: Duration::from_micros(250),
            involuntary_switches: 3,
            frame_starts: vec![
                FrameTimes {
                    frame_id: 7,
                    first_ns: 100,
                    last_ns: 200,
                },
                FrameTimes {
                    frame_id: 8,
                    first_ns: 300,
                    last_ns: 400,
                },
            ],
            start_ns: 50,
            send_buffer: 8 << 20,
            syscalls: 4,
            stopped: false,
        };
        let file = SendFile::new(&report, -5);
        assert_eq!((file.frames, file.nice, file.cpi_per_s), (2, -5, 100.0));
        assert_eq!((file.max_lag_ms, file.max_oversleep_ms), (1.5, 0.25));
        let line = report.summary("127.0.0.1:9000".parse().unwrap());
        assert!(
            line.starts_with(
                "sent 2 frames, 256 packets, 1.0 MB to 127.0.0.1:9000 in 0.020 s: 100.0 CPI/s"
            ) && line.ends_with("4 sendmmsg calls, send buffer 8192 KiB"),
            "{line}"
        );
        let mut csv = Vec::new();
        report.write_times(&mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "frame_id,first_ns,last_ns\n7,100,200\n8,300,400\n"
        );
        assert_eq!(Pacing::CpiRate(250.5).to_string(), "250.5 CPI/s");
        assert_eq!(
            Pacing::ChirpInterval(Duration::from_micros(50)).to_string(),
            "a chirp every 50.000 us"
        );
        assert_eq!(FrameCount::Frames(9).to_string(), "9 frames");
        assert_eq!(
            FrameCount::Duration(Duration::from_millis(1500)).to_string(),
            "for 1.500 s"
        );
    }
}
