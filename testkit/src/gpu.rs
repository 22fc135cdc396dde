//! The GPU tests' rule for a missing GPU: skip, saying why, unless a GPU is required.
//!
//! A GPU test that finds no usable GPU (no driver, no device, a CUDA library missing) prints
//! `skipped: <reason>` and passes, so the suite passes on machines without one. On a GPU
//! machine that would let a broken setup pass for a GPU result; there `KPLACE_REQUIRE_GPU=1`
//! turns every such skip into a failure with the same reason. It implies
//! `KPLACE_REQUIRE_NVRTC=1`, which requires NVRTC alone (for machines with NVRTC and no GPU).
//!
//! Tests that skip *because* a GPU is present (they test the no-GPU path) are not GPU tests:
//! they print their skip themselves and keep skipping under `KPLACE_REQUIRE_GPU=1`.

use std::fmt::Display;

/// Set to `1` to make a GPU test's skip a failure.
pub const REQUIRE_GPU_ENV: &str = "KPLACE_REQUIRE_GPU";

/// Set to `1` to make an NVRTC test's skip a failure (implied by [`REQUIRE_GPU_ENV`]).
pub const REQUIRE_NVRTC_ENV: &str = "KPLACE_REQUIRE_NVRTC";

fn set_to_one(name: &str) -> bool {
    std::env::var(name).as_deref() == Ok("1")
}

/// Whether `KPLACE_REQUIRE_GPU=1`.
pub fn gpu_required() -> bool {
    set_to_one(REQUIRE_GPU_ENV)
}

/// Whether `KPLACE_REQUIRE_NVRTC=1` or `KPLACE_REQUIRE_GPU=1`.
pub fn nvrtc_required() -> bool {
    set_to_one(REQUIRE_NVRTC_ENV) || gpu_required()
}

/// A GPU test cannot run here because of `reason`: prints `skipped: <reason>`, or panics with
/// `KPLACE_REQUIRE_GPU=1 but <reason>` when a GPU is required.
#[track_caller]
pub fn skip_or_fail(reason: impl Display) {
    if gpu_required() {
        panic!("{REQUIRE_GPU_ENV}=1 but {reason}");
    }
    println!("skipped: {reason}");
}

/// An NVRTC test cannot run here because of `reason`: prints `skipped: <reason>`, or panics
/// naming the variable that requires NVRTC.
#[track_caller]
pub fn skip_or_fail_nvrtc(reason: impl Display) {
    if set_to_one(REQUIRE_NVRTC_ENV) {
        panic!("{REQUIRE_NVRTC_ENV}=1 but {reason}");
    }
    skip_or_fail(reason);
}

/// How long [`rerun_test`] lets the re-run test take: a limit, not a timing.
pub const RERUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs test `name` of the current test executable again, in a child process, with
/// `KPLACE_REQUIRE_GPU=1` when `require_gpu` (else without it), and returns whether it passed
/// and what it printed (stdout, then stderr). For tests of this rule itself.
pub fn rerun_test(name: &str, require_gpu: bool) -> (bool, String) {
    rerun_test_with(name, |command| {
        if require_gpu {
            command.env(REQUIRE_GPU_ENV, "1");
        } else {
            command.env_remove(REQUIRE_GPU_ENV);
        }
    })
}

/// [`rerun_test`] with the child's environment set by `configure`. The child is killed if it
/// runs past [`RERUN_LIMIT`] (and then counts as failed, saying so).
pub fn rerun_test_with(
    name: &str,
    configure: impl FnOnce(&mut std::process::Command),
) -> (bool, String) {
    use std::process::{Command, Stdio};
    let mut command = match std::env::current_exe() {
        Ok(exe) => Command::new(exe),
        Err(e) => return (false, format!("cannot find this test executable: {e}")),
    };
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    configure(&mut command);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return (false, format!("cannot run this test executable: {e}")),
    };
    // Read both pipes on threads, so a chatty child cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = std::time::Instant::now() + RERUN_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut text = stdout.join().unwrap_or_default();
    text += &stderr.join().unwrap_or_default();
    match status {
        Some(status) => (status.success(), text),
        None => (
            false,
            format!("{text}\n(killed after {} s)", RERUN_LIMIT.as_secs()),
        ),
    }
}
