//! The MPS client check: whether a process is a client of the MPS daemon it would use (the
//! pipe directory `CUDA_MPS_PIPE_DIRECTORY` names, else the system default), asked of that
//! daemon's control program, and what a run records of it ([`RunMps`]). Never fails a run:
//! a daemon that cannot be asked is said, not an error.

use super::*;

/// Whether process `pid` is a client of the daemon on `pipe_dir`: asks `get_server_list`, then
/// `get_client_list` for each server, and looks for `pid`. Needs only the control program (no
/// driver). A process becomes a client when it initializes CUDA, so ask after that. Errors when
/// the program is missing, no daemon answers, or an answer does not parse.
pub fn client_status(pid: u32, pipe_dir: &Path) -> Result<MpsClient, MpsError> {
    let program = find_on_path(CONTROL_PROGRAM)
        .ok_or_else(|| MpsError::Missing(vec![format!("{CONTROL_PROGRAM} not found on PATH")]))?;
    let dirs = MpsDirs {
        pipe: pipe_dir.to_path_buf(),
        // Queries write no logs; the variable is set for symmetry with the daemon only.
        log: pipe_dir.to_path_buf(),
    };
    client_status_with(&Control::with_program(program, &dirs), pid)
}

/// [`client_status`] through a given control handle.
pub fn client_status_with(control: &Control, pid: u32) -> Result<MpsClient, MpsError> {
    let servers = control.servers()?;
    let server = servers
        .iter()
        .find(|s| s.clients.contains(&pid))
        .map(|s| s.pid);
    Ok(MpsClient {
        pid,
        is_client: server.is_some(),
        pipe_dir: control.dirs.pipe.clone(),
        server,
        active_thread_percentage: control.default_active_thread_percentage().ok(),
        servers,
    })
}

/// The pipe directory a CUDA process started now would use: `CUDA_MPS_PIPE_DIRECTORY`, else
/// CUDA's default.
pub fn effective_pipe_dir() -> PathBuf {
    std::env::var_os(PIPE_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_SYSTEM_PIPE_DIR), PathBuf::from)
}

/// MPS for a run's report: whether process `pid` (usually `std::process::id()`, after it
/// initialized CUDA) is a client of the daemon on `pipe_dir` (default: [`effective_pipe_dir`]).
/// Never fails: when the check cannot be made, `is_client` is false and `checked` says why.
/// Checked only where MPS is configured: when it was `requested` (a pipe directory set), or
/// when a daemon's control pipe exists in the pipe directory (a process may be a client of a
/// system daemon on the default directory without asking). Elsewhere nothing is run.
pub fn check_run(requested: bool, pid: u32, pipe_dir: Option<&Path>) -> RunMps {
    let pipe_dir = pipe_dir.map_or_else(effective_pipe_dir, Path::to_path_buf);
    let mut run = RunMps {
        requested,
        pipe_dir: pipe_dir.clone(),
        active_thread_percentage: None,
        is_client: false,
        checked: String::new(),
    };
    let control_pipe = control_pipe_in(&pipe_dir);
    if !requested && !control_pipe.exists() {
        run.checked = format!(
            "MPS is not configured ({PIPE_ENV} unset, no daemon's control pipe at {}): not a \
             client",
            control_pipe.display()
        );
        return run;
    }
    run.checked = match client_status(pid, &pipe_dir) {
        Ok(client) => {
            run.is_client = client.is_client;
            run.active_thread_percentage = client.active_thread_percentage;
            let servers: Vec<String> = client.servers.iter().map(|s| s.pid.to_string()).collect();
            match client.server {
                Some(server) => format!(
                    "get_client_list {server} on {} lists pid {pid}",
                    pipe_dir.display()
                ),
                None if servers.is_empty() => format!(
                    "the daemon on {} has no servers: pid {pid} is no client",
                    pipe_dir.display()
                ),
                None => format!(
                    "pid {pid} is in no client list of servers {} on {}",
                    servers.join(", "),
                    pipe_dir.display()
                ),
            }
        }
        Err(e) => format!("not a client: cannot check ({e})"),
    };
    run
}
