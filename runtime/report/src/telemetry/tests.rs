use std::collections::HashMap;
use std::thread;

use super::nvml::{PID_MAX_LIMIT, plausible};
use super::processes::{ProcessBook, classify, parse_stat_parent};
use super::summary::{DeviceId, MAX_ERRORS, ProcessSample, Sample, Summary};
use super::*;
use crate::devices::init_nvml;
use kplace_core::cuda::probe;

fn proc(pid: u32, role: ProcessRole, mem: Option<u64>) -> ProcessSample {
    ProcessSample {
        pid,
        name: Some(format!("p{pid}")),
        role,
        compute: true,
        graphics: false,
        used_memory: mem,
    }
}

fn sample(util: u32, mem_util: u32, used: u64, sm: u32, power_mw: Option<u32>) -> Sample {
    Sample {
        gpu_util: Some(util),
        mem_util: Some(mem_util),
        mem_used: Some(used),
        mem_total: Some(1000),
        sm_clock: Some(sm),
        mem_clock: Some(2619),
        power_mw,
        processes: Vec::new(),
        errors: Vec::new(),
    }
}

fn id(ordinal: u32) -> DeviceId {
    DeviceId {
        ordinal,
        matched_by: Some(MatchedBy::Uuid),
        nvml_index: Some(3),
        name: Some("NVIDIA H200".into()),
        uuid: Some("GPU-00112233-4455-6677-8899-aabbccddeeff".into()),
    }
}

#[test]
fn means_and_extremes_cover_the_readings_given() {
    let mut s = Summary::default();
    s.add(&sample(10, 5, 100, 1400, Some(300_000)));
    s.add(&sample(90, 15, 300, 1980, None));
    let mut gap = sample(0, 0, 0, 0, None);
    gap.gpu_util = None;
    gap.mem_util = None;
    gap.mem_used = None;
    gap.sm_clock = None;
    gap.errors.push("utilization_rates: no data".into());
    s.add(&gap);
    let d = s.finish(id(0));
    assert_eq!(d.samples, 3);
    assert_eq!(d.gpu_util_mean_pct, Some(50.0));
    assert_eq!(d.gpu_util_max_pct, Some(90));
    assert_eq!(d.mem_util_mean_pct, Some(10.0));
    assert_eq!(d.mem_util_max_pct, Some(15));
    assert_eq!(d.memory_used_min_bytes, Some(100));
    assert_eq!(d.memory_used_max_bytes, Some(300));
    assert_eq!(d.memory_total_bytes, Some(1000));
    assert_eq!(
        (d.sm_clock_min_mhz, d.sm_clock_max_mhz),
        (Some(1400), Some(1980))
    );
    assert_eq!(
        (d.mem_clock_min_mhz, d.mem_clock_max_mhz),
        (Some(2619), Some(2619))
    );
    assert_eq!(d.power_mean_w, Some(300.0));
    assert_eq!(d.power_max_w, Some(300.0));
    assert_eq!(d.errors, vec!["utilization_rates: no data".to_string()]);
    assert_eq!(d.ordinal, 0);
    assert_eq!(d.nvml_index, Some(3));
}

#[test]
fn no_readings_leave_every_figure_none() {
    let d = Summary::default().finish(DeviceId::default());
    assert_eq!(d.samples, 0);
    assert_eq!(d.gpu_util_mean_pct, None);
    assert_eq!(d.power_mean_w, None);
    assert_eq!(d.sm_clock_min_mhz, None);
    assert!(d.processes.is_empty());
}

#[test]
fn each_pid_is_reported_once_with_its_largest_memory() {
    let mut s = Summary::default();
    let mut a = sample(1, 1, 1, 1, None);
    let mut g = proc(42, ProcessRole::Other, Some(50));
    g.compute = false;
    g.graphics = true;
    a.processes = vec![
        proc(42, ProcessRole::Other, Some(100)),
        g,
        proc(7, ProcessRole::Ours, None),
    ];
    let mut b = sample(1, 1, 1, 1, None);
    b.processes = vec![
        proc(42, ProcessRole::Other, Some(70)),
        proc(7, ProcessRole::Ours, Some(10)),
        proc(9, ProcessRole::Child, Some(5)),
    ];
    s.add(&a);
    s.add(&b);
    let d = s.finish(id(0));
    let pids: Vec<(u32, ProcessRole)> = d.processes.iter().map(|p| (p.pid, p.role)).collect();
    assert_eq!(
        pids,
        vec![
            (7, ProcessRole::Ours),
            (9, ProcessRole::Child),
            (42, ProcessRole::Other)
        ]
    );
    let other = &d.processes[2];
    assert_eq!(other.max_used_memory_bytes, Some(100));
    assert_eq!(
        other.samples, 2,
        "two samples, though listed twice in the first"
    );
    assert!(other.compute && other.graphics);
    assert_eq!(d.processes[0].max_used_memory_bytes, Some(10));
    assert_eq!(d.processes[1].samples, 1);
}

#[test]
fn errors_are_distinct_and_bounded() {
    let mut s = Summary::default();
    for i in 0..20 {
        s.note_error(&format!("e{}", i % 10));
        s.note_error("e0");
    }
    assert_eq!(s.errors.len(), MAX_ERRORS);
    assert_eq!(s.errors[0], "e0");
    assert_eq!(s.errors[1], "e1");
}

#[test]
fn roles_follow_the_parent_chain() {
    // 100 is us; 101 our child; 102 its child; 200 unrelated, under 1; 300 unreadable.
    let parents: HashMap<u32, u32> = [(100, 1), (101, 100), (102, 101), (200, 1), (1, 0)]
        .into_iter()
        .collect();
    let parent_of = |p: u32| parents.get(&p).copied();
    assert_eq!(classify(100, 100, parent_of), ProcessRole::Ours);
    assert_eq!(classify(101, 100, parent_of), ProcessRole::Child);
    assert_eq!(classify(102, 100, parent_of), ProcessRole::Child);
    assert_eq!(classify(200, 100, parent_of), ProcessRole::Other);
    assert_eq!(classify(300, 100, parent_of), ProcessRole::Other);
    assert_eq!(classify(1, 100, parent_of), ProcessRole::Other);
    // As pid 1 of a container, everything else in it is ours.
    assert_eq!(classify(200, 1, parent_of), ProcessRole::Child);
    // A loop in the (racy) parent data ends.
    let looped = |p: u32| Some(if p == 5 { 6 } else { 5 });
    assert_eq!(classify(5, 100, looped), ProcessRole::Other);
}

#[test]
fn stat_lines_with_odd_names_parse() {
    assert_eq!(parse_stat_parent("123 (kplace) S 45 123 123 0"), Some(45));
    assert_eq!(parse_stat_parent("123 (a b) c) (d) R 7 1 1"), Some(7));
    assert_eq!(parse_stat_parent("garbage"), None);
    assert_eq!(parse_stat_parent("1 (x) S"), None);
}

#[cfg(target_os = "linux")]
#[test]
fn real_processes_get_their_roles_and_names() {
    let own = std::process::id();
    let mut book = ProcessBook::new();
    assert_eq!(book.resolve(own).1, ProcessRole::Ours);
    assert!(book.resolve(own).0.is_some());
    let mut child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .expect("spawn sleep");
    // The kernel names the process after it closes the spawn's close-on-exec pipe, so
    // `spawn` may return before /proc shows the new name: wait for it (bounded).
    let comm = format!("/proc/{}/comm", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() != "sleep")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let (name, role) = book.resolve(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(role, ProcessRole::Child);
    assert_eq!(name.as_deref(), Some("sleep"));
    if own != 1 {
        assert_eq!(book.resolve(1).1, ProcessRole::Other);
    }
    // Resolved once: the answer stays after the child is gone.
    assert_eq!(book.resolve(child.id()).1, ProcessRole::Child);
}

#[test]
fn implausible_process_lists_are_caught() {
    let ok = [proc(42, ProcessRole::Other, Some(100))];
    assert!(plausible(&ok, Some(1000)));
    assert!(plausible(&ok, None));
    assert!(!plausible(
        &[proc(42, ProcessRole::Other, Some(2000))],
        Some(1000)
    ));
    assert!(!plausible(
        &[proc(PID_MAX_LIMIT + 1, ProcessRole::Other, None)],
        None
    ));
    assert!(!plausible(&[proc(0, ProcessRole::Other, None)], None));
}

fn available_telemetry() -> Telemetry {
    let mut s = Summary::default();
    let mut a = sample(40, 10, 3 << 30, 1980, Some(350_000));
    a.processes = vec![
        proc(7, ProcessRole::Ours, Some(2 << 30)),
        proc(42, ProcessRole::Other, Some(1 << 30)),
    ];
    s.add(&a);
    Telemetry {
        available: true,
        reason: None,
        interval_ms: 100.0,
        duration_s: 1.5,
        devices: vec![s.finish(id(0))],
        warnings: vec!["gpu:1: assumed".into()],
    }
}

#[test]
fn json_shape() {
    let v = serde_json::to_value(available_telemetry()).unwrap();
    assert_eq!(v["available"], true);
    assert!(v["reason"].is_null());
    let d = &v["devices"][0];
    assert_eq!(d["ordinal"], 0);
    assert_eq!(d["matched_by"], "uuid");
    assert_eq!(d["gpu_util_max_pct"], 40);
    assert_eq!(d["power_max_w"], 350.0);
    assert_eq!(d["processes"][0]["role"], "self");
    assert_eq!(d["processes"][1]["role"], "other");
    assert_eq!(d["processes"][1]["name"], "p42");
    let t = serde_json::to_value(Telemetry::unavailable("NVML not available: x")).unwrap();
    assert_eq!(t["available"], false);
    assert_eq!(t["reason"], "NVML not available: x");
    assert_eq!(t["devices"], serde_json::json!([]));
}

#[test]
fn display_is_a_few_lines_per_device() {
    let t = available_telemetry();
    let text = t.to_string();
    assert!(
        text.contains("gpu:0 NVIDIA H200 (NVML 3, by uuid): 1 samples"),
        "{text}"
    );
    assert!(text.contains("utilisation mean 40% max 40%"), "{text}");
    assert!(text.contains("power mean 350 W max 350 W"), "{text}");
    assert!(text.contains("memory used max 3.0 GiB"), "{text}");
    assert!(
        text.contains("self 7 p7 2.0 GiB; other 42 p42 1.0 GiB"),
        "{text}"
    );
    assert!(text.contains("1 process not started by this run"), "{text}");
    assert!(text.contains("warning: gpu:1: assumed"), "{text}");
    assert_eq!(
        t.co_tenants().map(|(o, p)| (o, p.pid)).collect::<Vec<_>>(),
        vec![(0, 42)]
    );
    let none = Telemetry::unavailable("NVML not available: no driver").to_string();
    assert_eq!(
        none,
        "GPU telemetry: none (NVML not available: no driver)\n"
    );
}

fn nvml_missing() -> Option<String> {
    init_nvml().err().map(|e| e.to_string())
}

#[test]
fn without_nvml_the_sampler_says_why_at_once() {
    let t = Sampler::start(&[0], DEFAULT_INTERVAL).stop();
    if nvml_missing().is_some() {
        assert!(!t.available);
        let reason = t.reason.expect("a reason");
        assert!(reason.contains("NVML"), "{reason}");
        assert!(t.devices.is_empty());
    } else {
        assert!(t.available);
        assert_eq!(t.devices.len(), 1);
    }
    let empty = Sampler::start(&[], DEFAULT_INTERVAL).stop();
    assert!(!empty.available);
}

#[test]
fn cuda_identity_never_panics() {
    // Here (no driver) an error naming libcuda; on a GPU machine gpu:0's UUID.
    match probe::nvml_identity(0) {
        Ok((uuid, _)) => assert!(uuid.is_some_and(|u| u.starts_with("GPU-"))),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    assert!(probe::nvml_identity(u32::MAX).is_err());
}

/// Needs a GPU with NVML; prints `skipped: <reason>` elsewhere.
#[test]
fn samples_a_real_gpu() {
    if let Some(reason) = nvml_missing() {
        println!("skipped: {reason}");
        return;
    }
    let sampler = Sampler::start(&[0, 0], DEFAULT_INTERVAL);
    thread::sleep(Duration::from_millis(500));
    let latest = sampler.latest();
    assert_eq!(latest.len(), 1, "one reading per device: {latest:?}");
    assert_eq!(latest[0].ordinal, 0);
    assert!(latest[0].memory_used_bytes.is_some(), "{latest:?}");
    let t = sampler.stop();
    println!("{t}");
    assert!(t.available, "{t:?}");
    assert_eq!(t.devices.len(), 1, "duplicates ignored");
    let d = &t.devices[0];
    assert!(d.matched_by.is_some(), "{d:?}");
    assert!(d.samples >= 1, "{d:?}");
    assert!(d.memory_total_bytes.unwrap_or(0) > 0, "{d:?}");
    // With a long interval, stop still returns after the first sample (the thread wakes
    // on it rather than sleeping the interval out; bench/gpu-check.sh shows the time).
    let sampler = Sampler::start(&[0], Duration::from_secs(30));
    thread::sleep(Duration::from_millis(200));
    let t = sampler.stop();
    assert_eq!(t.devices[0].samples, 1);
}
