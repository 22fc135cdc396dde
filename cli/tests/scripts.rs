//! The repository's shell scripts: `shellcheck` finds nothing in any of them; the GPU check
//! (`bench/gpu-check.sh`) stops in its preflight, saying why, on a machine without a usable
//! GPU; and, in a dry run where a stand-in `kplace` reports a GPU after a slow start, the
//! check keeps to its limits: a slow preflight within its budget, steps skipped that no
//! longer fit the time left, a missing MPS control skipped, the hog row a measurement, and no
//! process of a step left running after it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Every script the project ships: `bench/*.sh`, `scripts/*.sh`, `bench/peers/*.sh`,
/// `bench/peers/*/*.sh` and `.ci/run`, relative to the workspace.
fn scripts() -> Vec<PathBuf> {
    let root = kplace_testkit::workspace();
    let mut found = vec![PathBuf::from(".ci/run")];
    let mut dirs = vec![
        PathBuf::from("bench"),
        PathBuf::from("scripts"),
        PathBuf::from("bench/peers"),
    ];
    let peers = root.join("bench/peers");
    for peer in std::fs::read_dir(&peers).expect("read bench/peers") {
        let peer = peer.expect("a bench/peers entry").path();
        if peer.is_dir() {
            dirs.push(
                peer.strip_prefix(&root)
                    .expect("under the root")
                    .to_path_buf(),
            );
        }
    }
    for dir in dirs {
        for entry in std::fs::read_dir(root.join(&dir)).expect("read a script dir") {
            let name = entry.expect("a dir entry").file_name();
            if Path::new(&name).extension().is_some_and(|e| e == "sh") {
                found.push(dir.join(name));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn shellcheck_finds_nothing_in_any_script() {
    let scripts = scripts();
    for want in [
        "bench/gpu-check.sh",
        "bench/peers/cupy/test.sh",
        "scripts/ready.sh",
    ] {
        assert!(
            scripts.iter().any(|s| s == Path::new(want)),
            "{want} not among {scripts:?}"
        );
    }
    // From the workspace root, as the scripts' `# shellcheck source=` directives expect.
    let out = Command::new("shellcheck")
        .arg("-x")
        .args(&scripts)
        .current_dir(kplace_testkit::workspace())
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!(
            "shellcheck cannot be run ({e}): install it (`apt-get install shellcheck`; scripts/setup.sh installs it)"
        ),
    };
    assert!(
        out.status.success(),
        "shellcheck found problems in {scripts:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `kplace devices --json` reports a device this process can use.
fn usable_gpu() -> Option<String> {
    let out = kplace_testkit::output(
        Command::new(kplace_testkit::kplace_bin!()).args(["devices", "--json"]),
    );
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let devices = value["driver"]["devices"].as_array()?;
    (value["driver"]["status"] == "ready" && !devices.is_empty())
        .then(|| format!("{} device(s)", devices.len()))
}

/// A bundle as bench/gpu-bundle.sh lays it out, of links to what cargo built here.
fn bundle(dir: &Path) {
    let exe = std::env::current_exe().expect("current exe");
    let built = exe
        .parent()
        .and_then(Path::parent)
        .expect("the profile dir");
    for sub in ["bin", "lib", "tests"] {
        std::fs::create_dir_all(dir.join(sub)).expect("create a bundle dir");
    }
    std::os::unix::fs::symlink(kplace_testkit::kplace_bin!(), dir.join("bin/kplace"))
        .expect("link");
    for lib in ["libkplace_cpu.so", "libkplace_gpu.so"] {
        let path = built.join(lib);
        assert!(
            path.is_file(),
            "{} is missing: build the workspace first",
            path.display()
        );
        std::os::unix::fs::symlink(&path, dir.join("lib").join(lib)).expect("link");
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read OUT")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// What a command printed, stdout then stderr.
fn said(run: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    )
}

/// The summary of a check that wrote `out`, after asserting that it wrote exactly its three
/// files and the current schema.
fn returned_summary(out: &Path, said: &str) -> serde_json::Value {
    assert_eq!(
        files_in(out),
        ["results.tar.gz", "summary.json", "table.md"],
        "{said}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary.json"))
            .expect("summary.json is JSON");
    assert_eq!(summary["schema"], "kplace-gpu-check/3");
    summary
}

fn gpu_check(bundle: &Path, out: &Path) -> std::process::Output {
    kplace_testkit::output_within(
        Command::new("bash")
            .arg(kplace_testkit::workspace().join("bench/gpu-check.sh"))
            .env("KPLACE_BUNDLE", bundle)
            .env("OUT", out)
            .current_dir(kplace_testkit::workspace()),
        Duration::from_secs(120),
        None,
    )
}

#[test]
fn gpu_check_stops_in_the_preflight_without_a_gpu_saying_why() {
    if let Some(gpu) = usable_gpu() {
        println!("skipped: this machine has a usable GPU ({gpu}); the check would run in full");
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let (dir, out) = (tmp.path().join("bundle"), tmp.path().join("out"));
    bundle(&dir);
    let run = gpu_check(&dir, &out);
    let said = said(&run);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(said.contains("== step 1/12: preflight"), "{said}");
    assert!(said.contains("(budget 60 s)"), "{said}");
    assert!(said.contains("stopped after the preflight"), "{said}");
    assert!(
        !said.contains("== step 2/12"),
        "it went past the preflight:\n{said}"
    );

    let summary = returned_summary(&out, &said);
    assert_eq!(summary["status"], "stopped", "{summary:#}");
    let reason = summary["reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("the GPU path cannot run here: CUDA driver: "),
        "{reason}"
    );
    assert!(reason.contains("libcuda.so.1"), "{reason}");
    let pre = &summary["preflight"];
    assert_eq!(pre["usable"], false);
    assert!(
        pre["missing"]
            .as_array()
            .expect("missing[]")
            .iter()
            .any(|m| m.as_str().is_some_and(|m| m.contains("cuFFT"))),
        "{pre:#}"
    );
    assert!(pre["rmem_max"].as_str().is_some(), "{pre:#}");
    assert_eq!(summary["steps"][0]["step"], "preflight");
    assert_eq!(summary["steps"].as_array().map(Vec::len), Some(1));
    let table = std::fs::read_to_string(out.join("table.md")).expect("table.md");
    assert!(
        table.contains("**stopped**: the GPU path cannot run here"),
        "{table}"
    );
    // The archive holds what the preflight gathered.
    let listing = kplace_testkit::output(
        Command::new("tar")
            .arg("-tzf")
            .arg(out.join("results.tar.gz")),
    );
    let listing = String::from_utf8_lossy(&listing.stdout);
    for want in [
        "preflight/devices.json",
        "results/preflight.json",
        "logs/step-preflight.txt",
    ] {
        assert!(
            listing.contains(want),
            "results.tar.gz lacks {want}:\n{listing}"
        );
    }

    // Without a bundle: exit 2, and a summary that says so.
    let none = tmp.path().join("none");
    let out2 = tmp.path().join("out2");
    let run = gpu_check(&none, &out2);
    assert_eq!(run.status.code(), Some(2));
    let summary = std::fs::read_to_string(out2.join("summary.json")).expect("summary.json");
    assert!(summary.contains("no bundle at"), "{summary}");
    assert!(files_in(&out2).len() <= 3);
}

/// `kplace` as the check sees it on a GPU machine, for a dry run: `devices --json` answers,
/// after `FAKE_DEVICES_DELAY_S` the first time, that a ready driver has a device and every
/// library; `hog gpu` leaves a `sleep` behind in its process group (its pid appended to
/// `FAKE_LEFTOVERS`) before it runs the real command; everything else is the real `kplace`,
/// which, without a GPU, refuses the GPU placements.
const FAKE_KPLACE: &str = r#"#!/usr/bin/env bash
case "$1 ${2:-}" in
    "devices --json")
        if [ ! -e "$FAKE_STATE.devices" ]; then
            touch "$FAKE_STATE.devices"
            sleep "$FAKE_DEVICES_DELAY_S"
        fi
        cat "$FAKE_DEVICES_JSON"
        exit 0
        ;;
    "devices --library-path") echo; exit 0 ;;
    "hog gpu") sleep 300 & echo $! >> "$FAKE_LEFTOVERS" ;;
esac
exec "$FAKE_REAL_KPLACE" "$@"
"#;

const FAKE_DEVICES: &str = r#"{"driver": {"status": "ready", "cuda_version": {"major": 13, "minor": 0},
 "devices": [{"ordinal": 0, "name": "a device the dry run makes up", "compute_capability": {"major": 9, "minor": 0},
 "total_memory_bytes": 150000000000}]}, "nvidia_driver_version": "580.0", "cufft": true, "nvrtc": true,
 "libraries": [{"name": "libcuda", "loaded": true, "version": "13.0"}, {"name": "libcufft", "loaded": true, "version": "12.0"},
 {"name": "libnvrtc", "loaded": true, "version": "13.0"}, {"name": "libnvrtc-builtins", "loaded": true, "version": "13.0"}],
 "warnings": []}"#;

/// Whether the check would find `nvidia-cuda-mps-control` (bench/gpu-check.sh's find_tool).
fn mps_control_present() -> bool {
    Command::new("sh")
        .args(["-c", "command -v nvidia-cuda-mps-control"])
        .output()
        .is_ok_and(|o| o.status.success())
        || ["/usr/local/nvidia/bin", "/usr/local/cuda/bin"]
            .iter()
            .any(|d| Path::new(d).join("nvidia-cuda-mps-control").exists())
}

/// Kills, when dropped, the stand-in's leftover `sleep`s that still run: a failing test leaves
/// nothing behind either.
struct EndLeftovers(PathBuf);

impl Drop for EndLeftovers {
    fn drop(&mut self) {
        let pids = std::fs::read_to_string(&self.0).unwrap_or_default();
        for pid in pids.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"sleep\0"));
            if ours && alive(pid) {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
        }
    }
}

/// Whether process `pid` still runs (a zombie has ended).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn gpu_check_dry_run_keeps_to_its_budgets_and_leaves_nothing_running() {
    if let Some(gpu) = usable_gpu() {
        println!("skipped: this machine has a usable GPU ({gpu}); the dry run stands one in");
        return;
    }
    if mps_control_present() {
        println!("skipped: nvidia-cuda-mps-control is here; the dry run checks its absence");
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let (dir, out) = (tmp.path().join("bundle"), tmp.path().join("out"));
    bundle(&dir);
    let fake = dir.join("bin/kplace");
    std::fs::remove_file(&fake).expect("unlink bin/kplace");
    std::fs::write(&fake, FAKE_KPLACE).expect("write the stand-in kplace");
    let mut perms = std::fs::metadata(&fake).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).expect("chmod");
    let devices = tmp.path().join("devices.json");
    std::fs::write(&devices, FAKE_DEVICES).expect("write devices.json");
    let leftovers = tmp.path().join("leftovers");
    let _end = EndLeftovers(leftovers.clone());
    // Slower than the 15 s the preflight once had, well within its 60 s.
    const DELAY_S: u64 = 16;
    let run = kplace_testkit::output_within(
        Command::new("bash")
            .arg(kplace_testkit::workspace().join("bench/gpu-check.sh"))
            .env("KPLACE_BUNDLE", &dir)
            .env("OUT", &out)
            .env("FAKE_REAL_KPLACE", kplace_testkit::kplace_bin!())
            .env("FAKE_DEVICES_JSON", &devices)
            .env("FAKE_DEVICES_DELAY_S", DELAY_S.to_string())
            .env("FAKE_STATE", tmp.path().join("state"))
            .env("FAKE_LEFTOVERS", &leftovers)
            // After the preflight about 100 s are left: tests and replay (120 s each, 160 with
            // the time to end them and clean up) no longer fit, share (45 s, 85 in all) does;
            // streams, copies, tune, adapt, admit, cupy, memcheck and bisect are not chosen.
            .env("KPLACE_GPU_CHECK_LIMIT_S", "120")
            .env("KPLACE_GPU_CHECK_STEPS", "tests,replay,share")
            .current_dir(kplace_testkit::workspace()),
        Duration::from_secs(180),
        None,
    );
    let said = said(&run);
    let summary = returned_summary(&out, &said);
    let steps = summary["steps"].as_array().expect("steps[]");
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no row for step {name}: {summary:#}"))
    };
    assert_eq!(steps.len(), 12, "every step has its row: {summary:#}");

    // The slow preflight passed within its budget and judged the machine usable.
    let pre = step("preflight");
    assert_eq!(pre["rc"], 0, "{said}");
    assert_eq!(pre["budget_s"], 60);
    assert!(pre["seconds"].as_u64().unwrap() >= DELAY_S, "{pre}");
    assert_eq!(summary["preflight"]["usable"], true, "{summary:#}");
    let timing = &summary["preflight"]["timing"];
    assert!(
        timing["devices_cold_s"].as_f64().unwrap() >= DELAY_S as f64,
        "{timing}"
    );

    // Steps that no longer fit the time left, and steps not chosen, say so.
    for name in ["tests", "replay"] {
        let why = step(name)["skipped"].as_str().unwrap_or_default();
        assert!(
            why.contains("its budget of 120 s") && why.contains("left of the 120 s limit"),
            "{name}: {why:?}"
        );
    }
    for name in [
        "streams", "copies", "tune", "adapt", "admit", "cupy", "memcheck",
    ] {
        assert_eq!(
            step(name)["skipped"],
            "not selected (KPLACE_GPU_CHECK_STEPS)",
            "{name}"
        );
    }

    // The share step ran: without a GPU its runs fail, except that the hog row is a
    // measurement, and the MPS row is skipped for want of the control program.
    let share = step("share");
    assert!(
        share["rc"].is_number() && share["skipped"].is_null(),
        "{share}"
    );
    let problems: Vec<&str> = summary["problems"]
        .as_array()
        .expect("problems[]")
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(
        problems.iter().any(|p| p.starts_with("share alone")),
        "{problems:?}"
    );
    assert!(
        !problems.iter().any(|p| p.contains("hog")),
        "the hog row is a measurement: {problems:?}"
    );
    let rows = summary["share"].as_array().expect("share[]");
    let mps = rows
        .iter()
        .find(|r| r["case"] == "MPS on")
        .expect("an MPS on row");
    assert!(
        mps["skipped"]
            .as_str()
            .is_some_and(|s| s.starts_with("no MPS control")),
        "{mps}"
    );
    assert_eq!(summary["status"], "failed", "{summary:#}");
    assert_eq!(run.status.code(), Some(1), "{said}");
    let table = std::fs::read_to_string(out.join("table.md")).expect("table.md");
    assert!(table.contains("skipped: not selected"), "{table}");
    assert!(table.contains("skipped: no MPS control"), "{table}");

    // What the step left running was ended with its process group.
    let pids: Vec<u32> = std::fs::read_to_string(&leftovers)
        .expect("the stand-in's hog ran")
        .lines()
        .map(|l| l.trim().parse().expect("a pid"))
        .collect();
    assert!(!pids.is_empty());
    for pid in &pids {
        assert!(
            !alive(*pid),
            "process {pid} outlived the share step\n{said}"
        );
    }
    assert!(
        share["leftover_processes"].as_u64().unwrap() >= 1,
        "{share}"
    );
}

/// Runs the check's summariser on a scratch directory the test wrote, as the check does after
/// a step, and returns summary.json.
fn summarize(scratch: &Path) -> serde_json::Value {
    let out = scratch.join("out");
    std::fs::create_dir_all(&out).expect("create out");
    let run = kplace_testkit::output(
        Command::new("python3")
            .arg(kplace_testkit::workspace().join("bench/gpu-check-summary.py"))
            .arg("summary")
            .arg(scratch)
            .arg(&out),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary.json"))
        .expect("summary.json is JSON")
}

/// A scratch directory after a usable preflight and the given step rows and files.
fn scratch_with(rows: &[&str], files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();
    for dir in ["results", "logs", "share"] {
        std::fs::create_dir_all(root.join(dir)).expect("mkdir");
    }
    std::fs::write(
        root.join("results/preflight.json"),
        r#"{"usable": true, "missing": [], "libraries": [], "driver": {}}"#,
    )
    .expect("write");
    let mut steps = String::from(r#"{"step":"preflight","budget_s":60,"rc":0,"seconds":3}"#);
    for row in rows {
        steps.push('\n');
        steps.push_str(row);
    }
    std::fs::write(root.join("steps.jsonl"), steps + "\n").expect("write");
    for (name, body) in files {
        std::fs::write(root.join(name), body).expect("write");
    }
    tmp
}

#[test]
fn the_summary_judges_memcheck_and_mps_rows_as_documented() {
    let memcheck = |rc: i32, log: &str| {
        let row = r#"{"step":"memcheck","budget_s":45,"rc":0,"seconds":40}"#;
        let result = format!(
            r#"{{"status":"ran","rc":{rc},"limit_s":37,"log":"logs/memcheck.txt","tests":"a b c"}}"#
        );
        let tmp = scratch_with(
            &[row],
            &[
                ("results/memcheck.jsonl", &(result + "\n")),
                ("logs/memcheck.txt", log),
            ],
        );
        summarize(tmp.path())
    };
    // Cut off under instrumentation before its summary: inconclusive, not a failure.
    let s = memcheck(124, "========= COMPUTE-SANITIZER\nrunning 3 tests\n");
    assert_eq!(s["memcheck"]["status"], "inconclusive", "{s:#}");
    assert_eq!(s["problems"], serde_json::json!([]), "{s:#}");
    assert_eq!(s["status"], "incomplete", "{s:#}");
    // Errors found: a failure.
    let s = memcheck(
        86,
        "test result: ok. 3 passed; 0 failed; 0 ignored\n========= ERROR SUMMARY: 2 errors\n",
    );
    assert_eq!(s["memcheck"]["errors"], 2);
    assert_eq!(s["status"], "failed", "{s:#}");
    assert!(s["reason"].as_str().unwrap().contains("memcheck"), "{s:#}");
    // The tool refuses the device: skipped, saying why.
    let s = memcheck(1, "========= Error: Device not supported\n");
    assert_eq!(s["memcheck"]["status"], "skipped", "{s:#}");
    assert_eq!(s["problems"], serde_json::json!([]), "{s:#}");
    // Clean.
    let s = memcheck(
        0,
        "test result: ok. 3 passed; 0 failed; 0 ignored\n========= ERROR SUMMARY: 0 errors\n",
    );
    assert_eq!(s["memcheck"]["status"], "clean", "{s:#}");

    // MPS on: a pipeline that is not a checked client is a problem (MPS falls back silently).
    let share = |second_is_client: bool| {
        let report = format!(
            r#"{{"aggregate": {{"frames_per_s": 300.0, "frames": 600, "partial_frames": 0,
                "dropped_frames": 0, "all_passed": true, "cores_used": 0.4}},
               "pipelines": [{{"mps": {{"is_client": true}}}},
                             {{"mps": {{"is_client": {second_is_client}, "checked": "busy"}}}}]}}"#
        );
        let tmp = scratch_with(
            &[r#"{"step":"share","budget_s":45,"rc":0,"seconds":14}"#],
            &[
                (
                    "results/share.jsonl",
                    "{\"case\":\"MPS on\",\"pipelines\":2,\"rc\":0,\"base\":\"share/mps-on\"}\n",
                ),
                ("share/mps-on.json", &report),
            ],
        );
        summarize(tmp.path())
    };
    let s = share(false);
    assert_eq!(s["status"], "failed", "{s:#}");
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .contains("share MPS on: pipeline 1 is not an MPS client (busy)"),
        "{s:#}"
    );
    let s = share(true);
    assert_eq!(s["problems"], serde_json::json!([]), "{s:#}");
}
