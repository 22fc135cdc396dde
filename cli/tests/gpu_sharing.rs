//! Sharing a real GPU: several GPU pipelines in one process and as processes, and a real,
//! private MPS daemon whose client list must hold the run's pid. These need a GPU (and, for
//! MPS, `nvidia-cuda-mps-control`); elsewhere each prints `skipped: <reason>` and passes
//! (without a GPU, a failure under `KPLACE_REQUIRE_GPU=1`).

use std::process::{Command, Output};

use kplace::cuda::probe::{DriverStatus, probe};

/// Why GPU placements cannot run here, or `None` when they can.
fn no_gpu() -> Option<String> {
    match probe().driver {
        DriverStatus::Ready { device_count, .. } if device_count > 0 => None,
        DriverStatus::Ready { .. } => Some("the CUDA driver shows no device".into()),
        DriverStatus::NotFound { reason } => Some(format!("no CUDA driver found ({reason})")),
        DriverStatus::Failed { reason, .. } => Some(format!("the CUDA driver failed: {reason}")),
    }
}

fn kplace(args: &[&str], envs: &[(&str, &std::path::Path)]) -> Output {
    let mut command = Command::new(kplace_testkit::kplace_bin!());
    command.current_dir(kplace_testkit::workspace()).args(args);
    for (k, v) in envs {
        command.env(k, v);
    }
    kplace_testkit::output(&mut command)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn gpu_pipelines_share_a_gpu_in_both_modes_and_each_verifies() {
    if let Some(reason) = no_gpu() {
        kplace_testkit::gpu::skip_or_fail(reason);
        return;
    }
    for placement in [
        "workloads/radar/placements/all-gpu.yaml",
        "workloads/radar/placements/hybrid.yaml",
    ] {
        for mode in ["thread", "process"] {
            let dir = tempfile::tempdir().unwrap();
            let report = dir.path().join("r.json");
            let out = kplace(
                &[
                    "run",
                    "--placement",
                    placement,
                    "--cpi",
                    "2048x256",
                    "--frames",
                    "40",
                    "--scene-frames",
                    "8",
                    "--pipelines",
                    "3",
                    "--pipeline-mode",
                    mode,
                    "--report",
                    report.to_str().unwrap(),
                ],
                &[],
            );
            assert!(out.status.success(), "{placement} {mode}: {}", text(&out));
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
            assert_eq!(json["aggregate"]["all_passed"], true);
            for p in json["pipelines"].as_array().unwrap() {
                assert_eq!(p["verification"]["frames_passed"], 40, "{p}");
                // Each pipeline sees the GPU in its telemetry, with itself on it.
                let telemetry = &p["gpu_telemetry"];
                if telemetry["available"] == true {
                    assert!(telemetry["devices"][0]["samples"].as_u64().unwrap() >= 1);
                }
            }
        }
    }
}

#[test]
fn a_run_under_a_private_mps_daemon_is_in_its_client_list() {
    if let Some(reason) = no_gpu() {
        kplace_testkit::gpu::skip_or_fail(reason);
        return;
    }
    let has_control = Command::new("sh")
        .args(["-c", "command -v nvidia-cuda-mps-control"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_control {
        println!("skipped: nvidia-cuda-mps-control is not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("mps");
    let start = kplace(&["mps", "start", "--dir", base.to_str().unwrap()], &[]);
    assert!(start.status.success(), "{}", text(&start));
    let report = dir.path().join("r.json");
    let pipe = base.join("pipe");
    let run = kplace(
        &[
            "run",
            "--placement",
            "workloads/radar/placements/all-gpu.yaml",
            "--frames",
            "20",
            "--report",
            report.to_str().unwrap(),
        ],
        &[("CUDA_MPS_PIPE_DIRECTORY", &pipe)],
    );
    let stop = kplace(&["mps", "stop", "--dir", base.to_str().unwrap()], &[]);
    assert!(run.status.success(), "{}", text(&run));
    assert!(stop.status.success(), "{}", text(&stop));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["mps"]["requested"], true, "{}", json["mps"]);
    assert_eq!(json["mps"]["is_client"], true, "{}", json["mps"]);
    assert!(text(&run).contains("MPS: this process is a client"));
}
