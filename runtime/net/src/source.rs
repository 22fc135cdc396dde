//! Where a run's frames come from, as a user names it: `replay` (the workload's frames, from
//! memory) or `udp://HOST:PORT` (packets from a sender or a radio).

use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// Where frames come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameSource {
    /// The workload's frames, prepared in memory and replayed as fast as the pipeline takes
    /// them.
    Replay,
    /// Packets on a UDP socket bound to this address.
    Udp(SocketAddr),
}

impl FrameSource {
    /// The UDP address, for a UDP source.
    pub fn udp(&self) -> Option<SocketAddr> {
        match self {
            FrameSource::Replay => None,
            FrameSource::Udp(addr) => Some(*addr),
        }
    }
}

/// A `--source` that names none.
#[derive(Debug, thiserror::Error)]
pub enum FrameSourceError {
    /// Neither `replay` nor `udp://`.
    #[error("unknown source {0:?}: expected replay or udp://HOST:PORT")]
    Unknown(String),
    /// A `udp://` whose address neither parses nor resolves.
    #[error(
        "invalid address in {text:?}: {error} (expected udp://HOST:PORT, e.g. udp://127.0.0.1:9000)"
    )]
    Address {
        /// The source given.
        text: String,
        /// The resolver's error.
        error: std::io::Error,
    },
    /// A host name that resolves to nothing.
    #[error("{0:?}: the host name resolves to no address")]
    NoAddress(String),
}

impl FromStr for FrameSource {
    type Err = FrameSourceError;

    /// `replay`, or `udp://HOST:PORT`; a host name stands for its first IPv4 address (what a
    /// sender to `localhost` reaches), else its first address.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "replay" {
            return Ok(FrameSource::Replay);
        }
        let addr = s
            .strip_prefix("udp://")
            .ok_or_else(|| FrameSourceError::Unknown(s.to_string()))?;
        if let Ok(addr) = addr.parse() {
            return Ok(FrameSource::Udp(addr));
        }
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|error| FrameSourceError::Address {
                text: s.to_string(),
                error,
            })?
            .collect();
        resolved
            .iter()
            .find(|a| a.is_ipv4())
            .or(resolved.first())
            .copied()
            .map(FrameSource::Udp)
            .ok_or_else(|| FrameSourceError::NoAddress(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_sources() {
        assert_eq!("replay".parse().ok(), Some(FrameSource::Replay));
        assert_eq!(
            "udp://127.0.0.1:9000".parse().ok(),
            Some(FrameSource::Udp("127.0.0.1:9000".parse().unwrap()))
        );
        assert_eq!(
            "udp://[::1]:9000".parse::<FrameSource>().unwrap().udp(),
            Some("[::1]:9000".parse().unwrap())
        );
        let localhost: FrameSource = "udp://localhost:9000".parse().unwrap();
        assert_eq!(localhost.udp().map(|a| a.port()), Some(9000));
        assert!(localhost.udp().unwrap().ip().is_loopback());
    }

    #[test]
    fn bad_names_say_what_is_expected() {
        let e = "tcp://1.2.3.4:5"
            .parse::<FrameSource>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected replay or udp://HOST:PORT"), "{e}");
        let e = "udp://nowhere"
            .parse::<FrameSource>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid address"), "{e}");
    }
}
