//! How `kplace mps start` and `kplace mps status` print a daemon's status: whether it answers,
//! where its logs are, its default active-thread percentage, its servers and their clients,
//! and the environment a client needs.

use std::fmt;

use super::{MpsStatus, PIPE_ENV};

impl fmt::Display for MpsStatus {
    /// Lines ending in newlines: `no MPS control daemon answers on PIPE (why)` when none runs;
    /// otherwise that one answers, its logs, its percentage, one line per server, and the
    /// variable its clients must run with.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pipe = self.dirs.pipe.display();
        if !self.running {
            return match &self.unavailable {
                Some(why) => writeln!(f, "no MPS control daemon answers on {pipe} ({why})"),
                None => writeln!(f, "no MPS control daemon answers on {pipe}"),
            };
        }
        writeln!(f, "MPS control daemon answers on {pipe}")?;
        writeln!(f, "logs in {}", self.dirs.log.display())?;
        if let Some(p) = self.default_active_thread_percentage {
            writeln!(f, "default active thread percentage {p}")?;
        }
        if self.servers.is_empty() {
            writeln!(f, "no servers (one starts with the first client)")?;
        }
        for server in &self.servers {
            let clients: Vec<String> = server.clients.iter().map(u32::to_string).collect();
            writeln!(
                f,
                "server {}: clients {}",
                server.pid,
                if clients.is_empty() {
                    "none".to_string()
                } else {
                    clients.join(", ")
                }
            )?;
        }
        writeln!(f, "clients must run with {PIPE_ENV}={pipe}")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{MpsDirs, MpsServer, MpsStatus};

    fn status(running: bool) -> MpsStatus {
        MpsStatus {
            dirs: MpsDirs::under(Path::new("/run/kp")),
            running,
            default_active_thread_percentage: None,
            servers: Vec::new(),
            unavailable: None,
        }
    }

    #[test]
    fn a_running_daemon_shows_its_servers_and_their_clients() {
        let running = MpsStatus {
            default_active_thread_percentage: Some(25.0),
            servers: vec![
                MpsServer {
                    pid: 4242,
                    clients: vec![7, 8],
                },
                MpsServer {
                    pid: 4343,
                    clients: Vec::new(),
                },
            ],
            ..status(true)
        };
        assert_eq!(
            running.to_string(),
            "MPS control daemon answers on /run/kp/pipe\n\
             logs in /run/kp/log\n\
             default active thread percentage 25\n\
             server 4242: clients 7, 8\n\
             server 4343: clients none\n\
             clients must run with CUDA_MPS_PIPE_DIRECTORY=/run/kp/pipe\n"
        );
        assert_eq!(
            status(true).to_string(),
            "MPS control daemon answers on /run/kp/pipe\n\
             logs in /run/kp/log\n\
             no servers (one starts with the first client)\n\
             clients must run with CUDA_MPS_PIPE_DIRECTORY=/run/kp/pipe\n"
        );
    }

    #[test]
    fn a_daemon_not_running_says_so_and_why_mps_is_unavailable() {
        assert_eq!(
            status(false).to_string(),
            "no MPS control daemon answers on /run/kp/pipe\n"
        );
        let unavailable = MpsStatus {
            unavailable: Some("nvidia-cuda-mps-control not found on PATH".into()),
            ..status(false)
        };
        assert_eq!(
            unavailable.to_string(),
            "no MPS control daemon answers on /run/kp/pipe (nvidia-cuda-mps-control not found on PATH)\n"
        );
    }
}
