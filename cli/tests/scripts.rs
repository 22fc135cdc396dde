//! The repository's shell scripts: `shellcheck` finds nothing in any of them; the GPU check
//! (`bench/gpu-check.sh`) stops in its preflight, saying why, on a machine without a usable
//! GPU; and, in a dry run where a stand-in `kplace` reports a GPU after a slow start, the
//! check keeps to its limits: a slow preflight within its budget, steps skipped that no
//! longer fit the time left, a missing MPS control skipped, the hog row a measurement, and no
//! process of a step left running after it. With a stand-in that answers every subcommand at
//! once (`tests/fixtures/gpu-standin/kplace`), the smoke step gives every GPU path a verdict,
//! a failure stopping none after it, and the GPU table (`bench/gpu-table.sh`) measures its
//! parts, skips those measured, accumulates them across calls into one results file that
//! `kplace plot` draws, and ends a part past its budget, leaving nothing running; the pcie
//! step sizes every closed-loop row from the rate last measured, judges each row's detections
//! with the real comparator (a differing or unverified row is a failure, not a number), tables
//! each placement against the copy-rate bound and the CuPy peer with the issue's goals, skips
//! what its budget cannot fit, and its worst case stays within its budget.

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
    assert_eq!(summary["schema"], "kplace-gpu-check/4");
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
    assert!(said.contains("== step 1/14: preflight"), "{said}");
    assert!(said.contains("(budget 60 s)"), "{said}");
    assert!(said.contains("stopped after the preflight"), "{said}");
    assert!(
        !said.contains("== step 2/14"),
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
 "devices": [{"ordinal": 0, "name": "a device the dry run makes up", "uuid": "GPU-00000000-dry0-run0-0000-000000000000",
 "compute_capability": {"major": 9, "minor": 0},
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
    assert_eq!(steps.len(), 14, "every step has its row: {summary:#}");

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
        "smoke", "pcie", "streams", "copies", "tune", "adapt", "admit", "cupy", "memcheck",
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

// ---------------------------------------------------------------------------------------------
// Dry runs with a stand-in `kplace` that answers every subcommand at once
// (tests/fixtures/gpu-standin/kplace): the smoke step and the GPU table end to end.

/// Every process a dry run started carries this tag in its environment: on drop, whatever still
/// runs with it is killed, so that a failing test leaves nothing behind; `alive` lists them.
struct Tagged(String);

impl Tagged {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Tagged(format!("KPLACE_DRY_RUN_TAG={}-{nanos}", std::process::id()))
    }

    fn value(&self) -> &str {
        self.0.split_once('=').map_or("", |(_, v)| v)
    }

    /// The processes, zombies aside, whose environment holds the tag.
    fn alive(&self) -> Vec<u32> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let tagged = std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == self.0.as_bytes()));
            if tagged && alive(pid) {
                found.push(pid);
            }
        }
        found
    }
}

impl Drop for Tagged {
    fn drop(&mut self) {
        for pid in self.alive() {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
        }
    }
}

/// A bundle whose `kplace` and `copy_rate` are the stand-ins, a `nvidia-cuda-mps-control` that
/// does nothing on a PATH of its own, and the devices file the stand-in reports.
struct StandIn {
    tmp: tempfile::TempDir,
    tag: Tagged,
}

impl StandIn {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let bundle = tmp.path().join("bundle");
        for sub in ["bin", "lib", "tests"] {
            std::fs::create_dir_all(bundle.join(sub)).expect("create a bundle dir");
        }
        let fixtures = kplace_testkit::workspace().join("cli/tests/fixtures/gpu-standin");
        for exe in ["kplace", "copy_rate"] {
            std::fs::copy(fixtures.join(exe), bundle.join("bin").join(exe))
                .expect("copy the stand-in");
        }
        std::fs::write(bundle.join("commit.txt"), "0123456789ab\n").expect("write commit.txt");
        let fakebin = tmp.path().join("fakebin");
        std::fs::create_dir_all(&fakebin).expect("mkdir fakebin");
        std::fs::write(
            fakebin.join("nvidia-cuda-mps-control"),
            "#!/bin/sh\nexit 0\n",
        )
        .expect("write the MPS control");
        for exe in [
            bundle.join("bin/kplace"),
            bundle.join("bin/copy_rate"),
            fakebin.join("nvidia-cuda-mps-control"),
        ] {
            let mut perms = std::fs::metadata(&exe).expect("stat").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
            std::fs::set_permissions(&exe, perms).expect("chmod");
        }
        std::fs::write(tmp.path().join("devices.json"), FAKE_DEVICES).expect("write devices.json");
        StandIn {
            tmp,
            tag: Tagged::new(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `bash SCRIPT ARGS` from the workspace, with the stand-in, writing into OUT.
    fn command(&self, script: &str, args: &[&str], out: &Path) -> Command {
        let mut cmd = Command::new("bash");
        let path = format!(
            "{}:{}",
            self.path("fakebin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.arg(kplace_testkit::workspace().join(script))
            .args(args)
            .env("KPLACE_BUNDLE", self.path("bundle"))
            .env("OUT", out)
            .env("PATH", path)
            .env("KPLACE_DRY_RUN_TAG", self.tag.value())
            .env("FAKE_DEVICES_JSON", self.path("devices.json"))
            .env("FAKE_REAL_KPLACE", kplace_testkit::kplace_bin!())
            .env("KPLACE_GPU_TABLE_RESULTS", self.path("results"))
            .env_remove("KPLACE_GPU_CHECK_STEPS")
            .env_remove("KPLACE_GPU_CHECK_BUDGETS")
            .env_remove("KPLACE_GPU_CHECK_LIMIT_S")
            .env_remove("KPLACE_GPU_CHECK_SUITE")
            .env_remove("KPLACE_GPU_TABLE_FORCE")
            .current_dir(kplace_testkit::workspace());
        cmd
    }

    fn run(&self, cmd: &mut Command) -> (std::process::Output, String) {
        let run = kplace_testkit::output_within(cmd, Duration::from_secs(150), None);
        let said = said(&run);
        (run, said)
    }

    /// Asserts that nothing the dry run started still runs.
    fn nothing_left(&self, said: &str) {
        let left = self.tag.alive();
        assert!(
            left.is_empty(),
            "processes {left:?} outlived the call\n{said}"
        );
    }
}

fn step_row<'a>(summary: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    summary["steps"]
        .as_array()
        .expect("steps[]")
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no row for step {name}: {summary:#}"))
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn gpu_check_smoke_dry_run_gives_every_gpu_path_a_verdict_and_a_failure_stops_none() {
    let standin = StandIn::new();
    let out = standin.path("out");
    let mut cmd = standin.command("bench/gpu-check.sh", &[], &out);
    cmd.env("KPLACE_GPU_CHECK_STEPS", "smoke")
        .env("FAKE_FAIL", "constant");
    let (run, said) = standin.run(&mut cmd);
    let summary = returned_summary(&out, &said);
    standin.nothing_left(&said);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(said.contains("== step 2/14: smoke"), "{said}");
    assert!(said.contains("(budget 120 s)"), "{said}");

    // The smoke step ran within its budget, first after the preflight.
    let smoke = step_row(&summary, "smoke");
    assert_eq!(smoke["rc"], 0, "{smoke}");
    assert!(smoke["seconds"].as_u64().unwrap() <= 120, "{smoke}");
    assert_eq!(summary["steps"][1]["step"], "smoke");

    // Every path has its verdict, in order: the constant tensor's failed check is a FAIL with
    // its reason, and every path after it still ran and passed.
    let rows = summary["smoke"].as_array().expect("smoke[]");
    let verdicts: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["path"].as_str().unwrap(), r["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("radar all-gpu against all-cpu", "PASS"),
            (
                "blocks on CUDA: beamformer-filtered against the CPU blocks",
                "PASS"
            ),
            (
                "blocks on CUDA: spectrogram-blocks against the CPU blocks",
                "PASS"
            ),
            (
                "a constant tensor on the GPU (the weighted beamformer's weights)",
                "FAIL"
            ),
            (
                "the FIR's carry moving GPU to CPU and back under --adapt",
                "PASS"
            ),
            ("NVML gauges in --metrics", "PASS"),
            ("one bisect-rate trial of all-gpu", "PASS"),
            ("kplace admit --prove", "PASS"),
        ],
        "{summary:#}"
    );
    let constant = &rows[3]["reason"];
    assert!(
        constant
            .as_str()
            .is_some_and(|r| r.contains("verification failed") && r.contains("beam_power")),
        "{constant}"
    );
    for (row, wants) in [
        (4, "carry moved 1 time(s)"),
        (5, "kplace_gpu_utilization_ratio{"),
        (6, "one trial at 156.2 CPI/s passed"),
        (7, "proof: 2 pipelines sustain"),
    ] {
        let reason = rows[row]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(wants), "{reason}");
    }
    assert_eq!(summary["status"], "failed", "{summary:#}");
    let problems = strings(&summary["problems"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("smoke: a constant tensor"),
        "{problems:?}"
    );

    // The summary says what the call ran on and from which commit.
    assert_eq!(summary["commit"], "0123456789ab");
    assert_eq!(
        summary["device"]["uuid"],
        "GPU-00000000-dry0-run0-0000-000000000000"
    );
    assert!(
        summary["date"].as_str().is_some_and(|d| d.ends_with('Z')),
        "{summary:#}"
    );
    let table = std::fs::read_to_string(out.join("table.md")).expect("table.md");
    assert!(table.contains("| smoke: GPU path | verdict |"), "{table}");
    assert!(table.contains("bundle commit 0123456789ab"), "{table}");
}

#[test]
fn the_smoke_judges_pass_fail_or_skip_each_path_with_its_reason() {
    let judge = |kind: &str, files: &[(&str, &str)], args: &[&str]| -> (String, String) {
        let tmp = scratch_with(&[], files);
        let run = kplace_testkit::output(
            Command::new("python3")
                .arg(kplace_testkit::workspace().join("bench/gpu-check-summary.py"))
                .args(["smoke", kind])
                .arg(tmp.path())
                .args(args),
        );
        assert!(run.status.success(), "{}", said(&run));
        let line = String::from_utf8_lossy(&run.stdout).trim().to_string();
        let (verdict, reason) = line.split_once('\t').expect("VERDICT<tab>reason");
        (verdict.to_string(), reason.to_string())
    };
    let report = |passed: bool, extra: &str| {
        format!(
            r#"{{"frames": 600, "measured_frames": 550, "wall_s": 2.75, "frames_per_s": 200.0,
                "verification": {{"passed": {passed}, "against": "the scene's truth", "reasons": ["frame 9 lost"]}},
                "stages": [{{"name": "lowpass", "carry": {{"moves": 0}}}}] {extra}}}"#
        )
    };
    // Without NVML the gauges are absent by design: SKIP, saying why.
    let no_nvml = report(
        true,
        r#", "gpu_telemetry": {"available": false, "reason": "NVML not available: libnvidia-ml.so.1"}"#,
    );
    let (v, why) = judge(
        "metrics",
        &[
            ("share/m.json", &no_nvml),
            ("share/m.txt", "kplace_frames_total 3\n"),
        ],
        &["0", "share/m.json", "share/m.txt", "40123"],
    );
    assert_eq!(
        (v.as_str(), why.contains("NVML not available")),
        ("SKIP", true),
        "{why}"
    );
    // With NVML and no gauge: FAIL.
    let nvml = report(
        true,
        r#", "gpu_telemetry": {"available": true, "devices": []}"#,
    );
    let (v, why) = judge(
        "metrics",
        &[
            ("share/m.json", &nvml),
            ("share/m.txt", "kplace_frames_total 3\n"),
        ],
        &["0", "share/m.json", "share/m.txt", "40123"],
    );
    assert_eq!(
        (v.as_str(), why.contains("no GPU gauge")),
        ("FAIL", true),
        "{why}"
    );
    // No address in the log: FAIL.
    let (v, _) = judge(
        "metrics",
        &[],
        &["1", "share/m.json", "share/m.txt", "none"],
    );
    assert_eq!(v, "FAIL");
    // A carry that never moved fails, though every frame verified.
    let carry = report(true, "");
    let (v, why) = judge(
        "carry",
        &[("share/a.json", &carry), ("share/b.json", &carry)],
        &["0", "share/a.json", "0", "share/b.json"],
    );
    assert_eq!(
        (v.as_str(), why.contains("never moved")),
        ("FAIL", true),
        "{why}"
    );
    // A checked run that failed its check: FAIL with the verifier's reason; no report at all:
    // FAIL naming the log.
    let (v, why) = judge(
        "checked",
        &[("share/r.json", &report(false, ""))],
        &["1", "share/r.json"],
    );
    assert_eq!(
        (v.as_str(), why.contains("frame 9 lost")),
        ("FAIL", true),
        "{why}"
    );
    let (v, why) = judge(
        "checked",
        &[("share/r.log", "error: no CUDA driver\n")],
        &["2", "share/r.json"],
    );
    assert_eq!(
        (v.as_str(), why.contains("no CUDA driver")),
        ("FAIL", true),
        "{why}"
    );
    // A bisect-rate trial that failed its gates, an admit without its proof: FAIL.
    let results = r#"{"searches": [{"trials": [{"rate": 156.25, "status": "failed",
        "failures": ["post-frame p99 9.1ms exceeds the 6.400ms budget"]}]}]}"#;
    let (v, why) = judge(
        "bisect",
        &[("share/b.json", results)],
        &["1", "share/b.json"],
    );
    assert_eq!(
        (v.as_str(), why.contains("exceeds")),
        ("FAIL", true),
        "{why}"
    );
    let (v, _) = judge(
        "admit",
        &[("share/admit.txt", "3 pipelines fit\n")],
        &["2", "share/admit.txt"],
    );
    assert_eq!(v, "FAIL");
    // A judge that breaks on what it reads says so as a FAIL.
    let (v, why) = judge(
        "radar",
        &[("share/all-cpu.json", "[]")],
        &["0", "0", "share"],
    );
    assert_eq!(v, "FAIL", "{why}");
}

/// The table's accumulated results file under RESULTS, for the stand-in's device.
fn accumulated(standin: &StandIn) -> serde_json::Value {
    let path = standin.path("results/a-device-the-dry-run-makes-up/gpu-table.json");
    serde_json::from_slice(
        &std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("gpu-table.json is JSON")
}

/// `bench/gpu-table.sh --collect OUT` into the stand-in's results directory.
fn collect(standin: &StandIn, out: &Path) {
    let run = kplace_testkit::output_within(
        Command::new("bash")
            .arg(kplace_testkit::workspace().join("bench/gpu-table.sh"))
            .arg("--collect")
            .arg(out)
            .env("KPLACE_GPU_TABLE_RESULTS", standin.path("results"))
            .env("KPLACE", kplace_testkit::kplace_bin!())
            .current_dir(kplace_testkit::workspace()),
        Duration::from_secs(60),
        None,
    );
    assert!(run.status.success(), "{}", said(&run));
}

#[test]
fn gpu_table_dry_run_accumulates_its_parts_across_calls_and_plots_the_whole() {
    let standin = StandIn::new();

    // A call too short for any part: each is skipped, saying so, and the table is incomplete.
    let out = standin.path("out0");
    let mut cmd = standin.command("bench/gpu-table.sh", &[], &out);
    cmd.env("KPLACE_GPU_CHECK_LIMIT_S", "300");
    let (run, said) = standin.run(&mut cmd);
    let summary = returned_summary(&out, &said);
    assert_eq!(summary["suite"], "table");
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert_eq!(summary["status"], "incomplete", "{summary:#}");
    for part in ["alone", "hog", "mps"] {
        let why = step_row(&summary, part)["skipped"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(why.contains("its budget of 470 s"), "{part}: {why}");
    }

    // The first part, asked for by name: measured, and the others not asked for are not
    // missing.
    let out = standin.path("out1");
    let (run, said) = standin.run(&mut standin.command("bench/gpu-table.sh", &["alone"], &out));
    let summary = returned_summary(&out, &said);
    standin.nothing_left(&said);
    assert_eq!(summary["status"], "passed", "{summary:#}");
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert_eq!(
        summary["table"]["parts"][0]["status"], "measured",
        "{summary:#}"
    );
    assert!(step_row(&summary, "alone")["seconds"].as_u64().unwrap() <= 470);
    collect(&standin, &out);
    let table = accumulated(&standin);
    assert_eq!(table["schema"], "kplace-bisect-rate/4");
    assert_eq!(table["parts"].as_array().map(Vec::len), Some(1));
    assert_eq!(table["searches"].as_array().map(Vec::len), Some(12));

    // The next call, with no part named: alone is already measured on this device model, so
    // hog and mps run (the stand-in's instant searches let both fit one call).
    let out = standin.path("out2");
    let (run, said) = standin.run(&mut standin.command("bench/gpu-table.sh", &[], &out));
    let summary = returned_summary(&out, &said);
    standin.nothing_left(&said);
    assert_eq!(run.status.code(), Some(0), "{said}");
    let statuses: Vec<(String, String)> = summary["table"]["parts"]
        .as_array()
        .expect("parts[]")
        .iter()
        .map(|p| {
            (
                p["part"].as_str().unwrap().into(),
                p["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("alone".to_string(), "already measured".to_string()),
            ("hog".to_string(), "measured".to_string()),
            ("mps".to_string(), "measured".to_string()),
        ],
        "{summary:#}"
    );
    collect(&standin, &out);

    // One results file holds the whole table: every part with its commit, device, UUID and
    // date; every search with its part, condition and the bound it met; the MPS rounds
    // alternating off and on, numbered as repeats.
    let table = accumulated(&standin);
    let parts = table["parts"].as_array().expect("parts[]");
    assert_eq!(parts.len(), 3, "{table:#}");
    for part in parts {
        assert_eq!(part["commit"], "0123456789ab");
        assert_eq!(
            part["device"]["uuid"],
            "GPU-00000000-dry0-run0-0000-000000000000"
        );
        assert!(part["started"].as_str().is_some_and(|d| d.ends_with('Z')));
        assert!(
            part["settings"]["bisect_rate"].as_str().is_some_and(|s| s
                .contains("--goals robust:0.01:0.5:3")
                && s.contains("--width 0.05"))
        );
        assert!(
            !part["ingest_only"]
                .as_array()
                .expect("ingest_only[]")
                .is_empty()
        );
    }
    let searches = table["searches"].as_array().expect("searches[]");
    assert_eq!(searches.len(), 12 + 12 + 6, "{table:#}");
    for s in searches {
        assert!(s["part"].is_string() && s["condition"].is_string(), "{s}");
        assert!(s["bound_met"]["kind"].is_string(), "{s}");
        let report = s["trials"][0]["report"].as_str().expect("a trial report");
        let path = standin
            .path("results/a-device-the-dry-run-makes-up")
            .join(report);
        assert!(path.is_file(), "{} is not with the table", path.display());
    }
    let mps: Vec<(String, u64)> = searches
        .iter()
        .filter(|s| s["pipelines"] == 4)
        .map(|s| {
            (
                s["system"].as_str().unwrap().into(),
                s["repeat"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = (0..3)
        .flat_map(|r| {
            [
                ("all-gpu x4 process".to_string(), r),
                ("all-gpu x4 process mps".to_string(), r),
            ]
        })
        .collect();
    assert_eq!(mps, want);
    let dir = standin.path("results/a-device-the-dry-run-makes-up");
    for svg in [
        "latency.svg",
        "sustained.svg",
        "cdf.svg",
        "stages.svg",
        "loads.svg",
    ] {
        assert!(dir.join(svg).is_file(), "kplace plot did not draw {svg}");
    }
    let md = std::fs::read_to_string(dir.join("table.md")).expect("table.md");
    assert!(
        md.contains("| all-gpu | 2048x256 | 1150.0 [ingest] | 766.7 [pipeline] |"),
        "{md}"
    );
    assert!(
        md.contains("| off | 3 |") && md.contains("| on | 3 |"),
        "{md}"
    );

    // A third call finds every part measured: nothing to do, passed.
    let out = standin.path("out3");
    let (run, said) = standin.run(&mut standin.command("bench/gpu-table.sh", &[], &out));
    let summary = returned_summary(&out, &said);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert!(
        summary["table"]["parts"]
            .as_array()
            .expect("parts[]")
            .iter()
            .all(|p| p["status"] == "already measured")
    );

    // A forced part whose search hangs is ended at its budget with everything it started.
    let out = standin.path("out4");
    let mut cmd = standin.command("bench/gpu-table.sh", &["--force", "hog"], &out);
    cmd.env("FAKE_BISECT_HANG", "1")
        .env("KPLACE_GPU_CHECK_BUDGETS", "hog=6");
    let (run, said) = standin.run(&mut cmd);
    let summary = returned_summary(&out, &said);
    standin.nothing_left(&said);
    assert_eq!(run.status.code(), Some(1), "{said}");
    let hog = step_row(&summary, "hog");
    assert_eq!(hog["rc"], 124, "{hog}");
    assert!(
        strings(&summary["problems"])
            .contains(&"step hog ran past its 6 s budget (killed)".to_string()),
        "{summary:#}"
    );
}

/// The numbers of a `NAME=VALUE` line of bench/gpu-check.sh.
fn script_number(script: &str, name: &str) -> u64 {
    script
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in bench/gpu-check.sh"))
}

#[test]
fn each_table_part_ends_within_its_budget_and_a_part_fits_one_call() {
    let script = std::fs::read_to_string(kplace_testkit::workspace().join("bench/gpu-check.sh"))
        .expect("read");
    let sweep = script_number(&script, "TABLE_SWEEP_LIMIT");
    let mps = script_number(&script, "TABLE_MPS_LIMIT");
    let rounds = script_number(&script, "TABLE_MPS_ROUNDS");
    let ingest = script_number(&script, "TABLE_INGEST_LIMIT");
    let (kill_sweep, kill_ingest) = (10, 3);
    // The part's own bookkeeping, each command under its limit: the device and whether the part
    // is measured, part.json begun and ended (5 s each), then merging, plotting and tabling.
    let after = 4 * 5 + 10 + 10 + 5;
    let budget = 470;
    // alone and hog: three sizes, each an ingest-only bound and a sweep.
    let fixed = 3 * (ingest + kill_ingest + sweep + kill_sweep) + after;
    // mps: two ingest-only bounds (one receiver, four), then off and on per round.
    let shared = 2 * (ingest + kill_ingest) + 2 * rounds * (mps + kill_sweep) + after;
    assert!(
        fixed <= budget,
        "alone and hog can take {fixed} s, over {budget}"
    );
    assert!(shared <= budget, "mps can take {shared} s, over {budget}");
    assert!(
        script.contains("alone | hog | mps) echo 470 ;;"),
        "the parts' budget moved"
    );
    // One part after a preflight of up to 30 s, with the 5 s to kill it and 35 s to clean up and
    // publish, within the 540 s call.
    assert!(30 + budget + 5 + 35 <= 540);
}

// ---------------------------------------------------------------------------------------------
// The pcie step (issue 50, item 5), with the stand-ins: `kplace` claims each placement's rate
// without taking the time, `copy_rate` its copy rates, and a `python` stands in for CuPy's.

const PCIE_PLACEMENTS: [&str; 4] = ["all-gpu", "hybrid", "gpu-fft", "cfar-gpu"];
const PCIE_SIZES: [&str; 2] = ["1024x128", "4096x512"];

/// A dry run of the check's preflight and pcie step with the stand-ins, the CuPy peer's python
/// among them, and ENV (the stand-ins' FAKE_*, the check's budgets and limit). It starts about
/// 200 short processes: minutes on a loaded machine, hence its own limit.
fn pcie_dry_run(
    standin: &StandIn,
    out: &Path,
    env: &[(&str, &str)],
) -> (std::process::Output, String, serde_json::Value) {
    let mut cmd = standin.command("bench/gpu-check.sh", &[], out);
    cmd.env("KPLACE_GPU_CHECK_STEPS", "pcie").env(
        "PYTHON",
        kplace_testkit::workspace().join("cli/tests/fixtures/gpu-standin/python"),
    );
    for (key, value) in env {
        cmd.env(key, value);
    }
    let run = kplace_testkit::output_within(&mut cmd, Duration::from_secs(480), None);
    let said = said(&run);
    let summary = returned_summary(out, &said);
    standin.nothing_left(&said);
    (run, said, summary)
}

fn runs_of<'a>(summary: &'a serde_json::Value, kind: &str) -> Vec<&'a serde_json::Value> {
    summary["pcie"]["runs"]
        .as_array()
        .expect("pcie.runs[]")
        .iter()
        .filter(|r| r["kind"] == kind)
        .collect()
}

fn cell<'a>(summary: &'a serde_json::Value, placement: &str, cpi: &str) -> &'a serde_json::Value {
    summary["pcie"]["cells"]
        .as_array()
        .expect("pcie.cells[]")
        .iter()
        .find(|c| c["placement"] == placement && c["cpi"] == cpi)
        .unwrap_or_else(|| panic!("no cell {placement} {cpi}: {summary:#}"))
}

fn goal<'a>(summary: &'a serde_json::Value, starts: &str) -> &'a serde_json::Value {
    summary["pcie"]["goals"]
        .as_array()
        .expect("pcie.goals[]")
        .iter()
        .find(|g| g["goal"].as_str().is_some_and(|n| n.starts_with(starts)))
        .unwrap_or_else(|| panic!("no goal {starts:?}: {summary:#}"))
}

fn close(a: &serde_json::Value, b: f64) -> bool {
    a.as_f64()
        .is_some_and(|a| (a - b).abs() <= 1e-9 * b.abs().max(1.0))
}

#[test]
fn gpu_check_pcie_dry_run_sizes_every_row_judges_it_and_tables_the_goals() {
    let standin = StandIn::new();
    let out = standin.path("out");
    // hybrid's second row at 4096x512 reports a power 1% off; gpu-fft's third at 1024x128
    // fails its verification. A budget no loaded machine exhausts, so that nothing is skipped
    // for time here (the next test skips).
    let (run, said, summary) = pcie_dry_run(
        &standin,
        &out,
        &[
            (
                "FAKE_FAIL",
                "differ:4096x512/hybrid-row-2,unverified:1024x128/gpu-fft-row-3",
            ),
            ("KPLACE_GPU_CHECK_BUDGETS", "pcie=900"),
            ("KPLACE_GPU_CHECK_LIMIT_S", "1000"),
        ],
    );
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(
        said.contains("== step 3/14: the GPU path with graphs against the PCIe bound"),
        "{said}"
    );
    let step = step_row(&summary, "pcie");
    assert_eq!(step["rc"], 0, "{step}");

    // all-cpu once per size, every placement probed, three rounds alternating the placements,
    // then one profiled run each: none skipped.
    let references = runs_of(&summary, "reference");
    assert_eq!(references.len(), 2, "{summary:#}");
    let rows = runs_of(&summary, "row");
    let order: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["cpi"].as_str().unwrap().to_string(),
                r["placement"].as_str().unwrap().to_string(),
                r["round"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for round in 1..=3 {
        for cpi in PCIE_SIZES {
            for p in PCIE_PLACEMENTS {
                want.push((cpi.to_string(), p.to_string(), round));
            }
        }
    }
    assert_eq!(order, want, "{summary:#}");
    let profiled = runs_of(&summary, "profiled");
    assert_eq!(profiled.len(), 8, "{summary:#}");
    for r in rows
        .iter()
        .chain(&profiled)
        .chain(&runs_of(&summary, "probe"))
    {
        assert!(r["skipped"].is_null(), "{r}");
    }

    // Each row measures 1.2 s at the rate its placement's last passing run measured, and at
    // least 200 frames, after a warm-up of 0.1 s of them; a row that failed sizes nothing.
    let runs = summary["pcie"]["runs"].as_array().unwrap();
    for (i, r) in runs.iter().enumerate() {
        if r["kind"] != "row" {
            continue;
        }
        let last = runs[..i]
            .iter()
            .rev()
            .find(|q| {
                q["placement"] == r["placement"]
                    && q["cpi"] == r["cpi"]
                    && (q["kind"] == "row" || q["kind"] == "probe")
                    && q["rc"] == 0
            })
            .expect("a run to size it by");
        let rate = last["cpi_per_s"].as_f64().unwrap();
        let measured = (1.2 * rate).ceil().max(200.0).min((5.0 * rate).floor()) as u64;
        let warmup = (0.1 * rate).ceil().max(16.0) as u64;
        assert_eq!(r["warmup"].as_u64(), Some(warmup), "{r}");
        assert_eq!(r["frames"].as_u64(), Some(measured + warmup), "{r}");
        assert_eq!(r["measured_frames"].as_u64(), Some(measured), "{r}");
        assert!(r["report"].is_string(), "every run report kept: {r}");
    }

    // A differing row and an unverified one are failures, never numbers.
    let failed: Vec<(String, String)> = rows
        .iter()
        .filter(|r| !r["failure"].is_null())
        .map(|r| {
            (
                format!("{} {} {}", r["placement"], r["cpi"], r["round"]),
                r["failure"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].0 == "\"hybrid\" \"4096x512\" 2"
            && failed[0].1 == "1 differences from all-cpu's detections (rel 1e-5)",
        "{failed:?}"
    );
    assert!(
        failed[1].0 == "\"gpu-fft\" \"1024x128\" 3"
            && failed[1]
                .1
                .starts_with("rc 1; verification failed: frame 9"),
        "{failed:?}"
    );
    assert_eq!(summary["status"], "failed", "{summary:#}");
    let problems = strings(&summary["problems"]);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("pcie hybrid 4096x512 row 2: ")),
        "{problems:?}"
    );
    // Every other run's detections agree with all-cpu's, cfar-gpu's exactly.
    for r in rows.iter().chain(&profiled) {
        if r["failure"].is_null() {
            let c = &r["comparison"];
            assert_eq!(c["agree"], true, "{r}");
            let rule = if r["placement"] == "cfar-gpu" {
                "exact"
            } else {
                "rel 1e-5"
            };
            assert_eq!(c["rule"], rule, "{r}");
            assert_eq!(c["frames_compared"], r["frames"], "{r}");
        }
    }

    // The bound is the copy rate at the frame's size over its bytes; each cell's rate is the
    // median of its counted rows, its ratios against the bound and the CuPy peer.
    let bounds = &summary["pcie"]["bounds"];
    let bound_small = 40.0e9 / 524_288.0;
    let bound_large = 52.0e9 / 8_388_608.0;
    assert!(
        close(&bounds["1024x128"]["cpi_per_s"], bound_small),
        "{bounds}"
    );
    assert!(
        close(&bounds["4096x512"]["cpi_per_s"], bound_large),
        "{bounds}"
    );
    for cpi in PCIE_SIZES {
        let bound = if cpi == "1024x128" {
            bound_small
        } else {
            bound_large
        };
        let peer = if cpi == "1024x128" { 800.0 } else { 600.0 };
        for p in PCIE_PLACEMENTS {
            let c = cell(&summary, p, cpi);
            let mut rates: Vec<f64> = rows
                .iter()
                .filter(|r| r["placement"] == p && r["cpi"] == cpi && r["failure"].is_null())
                .map(|r| r["cpi_per_s"].as_f64().unwrap())
                .collect();
            rates.sort_by(f64::total_cmp);
            let failed = usize::from(
                (p, cpi) == ("hybrid", "4096x512") || (p, cpi) == ("gpu-fft", "1024x128"),
            );
            assert_eq!(c["rows"].as_u64(), Some(3 - failed as u64), "{c}");
            assert_eq!(c["rows_failed"].as_u64(), Some(failed as u64), "{c}");
            let median = if rates.len() == 3 {
                rates[1]
            } else {
                (rates[0] + rates[1]) / 2.0
            };
            assert!(close(&c["median_cpi_per_s"], median), "{c}");
            assert!(close(&c["of_bound"], median / bound), "{c}");
            assert!(close(&c["vs_cupy"], median / peer), "{c}");
            assert!(close(&c["min_cpi_per_s"], rates[0]), "{c}");
            // The stand-in's figures, carried through: the GPU's time per frame from the
            // profiled run (0.04 ms a GPU stage at 1024x128, four times that at 4096x512), the
            // source's from the report's overhead (staged frames where only a GPU stage reads
            // the samples), the host's CPU time from cores used over the rate.
            let stages = match p {
                "all-gpu" => 3.0,
                "cfar-gpu" => 1.0,
                _ => 2.0,
            };
            let scale = if cpi == "1024x128" { 1.0 } else { 4.0 };
            assert!(close(&c["gpu_ms_per_frame"], stages * 0.04 * scale), "{c}");
            let staged = p == "all-gpu" || p == "gpu-fft";
            let source = if staged { 2.4 } else { 5.0 * scale * scale };
            assert!(close(&c["source_us_per_frame"], source), "{c}");
            assert!(
                c["host_us_per_frame"].as_f64().is_some_and(|h| h > 0.0),
                "{c}"
            );
        }
    }

    // The goals, met or missed with their ratios: the stand-in's all-gpu is 0.76 of the bound
    // at 4096x512, 0.24 at 1024x128, 22x and 8x the peer; its stream's p99 is 0.9 ms.
    let big = goal(
        &summary,
        "all-gpu closed loop at 4096x512: at least 0.7 of the PCIe bound",
    );
    assert_eq!(big["status"], "met", "{big}");
    let small = goal(
        &summary,
        "all-gpu closed loop at 1024x128: at least 0.3 of the PCIe bound",
    );
    assert_eq!(small["status"], "missed", "{small}");
    assert!(close(
        &small["ratio"],
        cell(&summary, "all-gpu", "1024x128")["of_bound"]
            .as_f64()
            .unwrap()
    ));
    for cpi in PCIE_SIZES {
        let g = goal(
            &summary,
            &format!("all-gpu closed loop at {cpi}: at least 5x the CuPy peer"),
        );
        assert_eq!(g["status"], "met", "{g}");
    }
    let p99 = goal(
        &summary,
        "post-frame p99 of all-gpu at 1024x128 streamed at 400 CPI/s",
    );
    assert_eq!(p99["status"], "missed", "{p99}");
    assert!(close(&p99["ratio"], 0.9 / 0.3), "{p99}");
    let cupy = summary["pcie"]["cupy"].as_array().expect("pcie.cupy[]");
    assert_eq!(cupy.len(), 2, "{summary:#}");
    assert!(
        cupy.iter().all(|c| c["rc"] == 0 && c["agree"] == true),
        "{cupy:?}"
    );

    let table = std::fs::read_to_string(out.join("table.md")).expect("table.md");
    for want in [
        "## pcie: the GPU path with graphs against the PCIe bound (issue 50)",
        "| placement | CPI | CPI/s median (min-max), rows | of the PCIe bound |",
        "| goal (issue 50) | measured | ratio | |",
        "**met**",
        "**missed**",
        "**FAILED**: rc 1; verification failed",
        "CuPy peer at 4096x512: 600.0 CPI/s",
    ] {
        assert!(table.contains(want), "table.md lacks {want:?}:\n{table}");
    }
    // Every run report is in results.tar.gz; the long runs' agreeing detections are not.
    let listing = kplace_testkit::output(
        Command::new("tar")
            .arg("-tzf")
            .arg(out.join("results.tar.gz")),
    );
    let listing = String::from_utf8_lossy(&listing.stdout);
    for r in summary["pcie"]["runs"].as_array().unwrap() {
        let base = r["base"].as_str().expect("a base");
        assert!(
            listing.contains(&format!("{base}.json")),
            "{base}.json:\n{listing}"
        );
    }
    assert!(
        listing.contains("pcie/4096x512/hybrid-row-2.det"),
        "{listing}"
    );
    assert!(
        !listing.contains("pcie/4096x512/hybrid-row-1.det"),
        "{listing}"
    );
}

#[test]
fn gpu_check_pcie_dry_run_skips_what_its_budget_cannot_fit() {
    // 20 s: the rows' deadline is 12 s in, and a probe needs 12 s left: the copy rates and the
    // stream run (the peer finds no GPU, at once), then at most the references; everything
    // after is skipped, saying why, and the step ends within its budget.
    let standin = StandIn::new();
    let out = standin.path("out");
    let (_, said, summary) = pcie_dry_run(
        &standin,
        &out,
        &[
            ("KPLACE_GPU_CHECK_BUDGETS", "pcie=20"),
            ("FAKE_CUPY_ABSENT", "1"),
        ],
    );
    assert!(said.contains("(budget 20 s)"), "{said}");
    let step = step_row(&summary, "pcie");
    assert_eq!(step["rc"], 0, "{said}");
    assert!(step["seconds"].as_u64().unwrap() <= 20, "{step}");
    let probes = runs_of(&summary, "probe");
    assert_eq!(probes.len(), 8, "{summary:#}");
    for r in probes {
        let why = r["skipped"].as_str().unwrap_or_default();
        assert!(why.contains("s left of the step's budget"), "{r}");
    }
    let rows = runs_of(&summary, "row");
    assert_eq!(rows.len(), 24, "{summary:#}");
    for r in rows.iter().chain(&runs_of(&summary, "profiled")) {
        let why = r["skipped"].as_str().unwrap_or_default();
        assert!(why.starts_with("no passing run of it to size it by"), "{r}");
        assert!(r["rc"].is_null(), "{r}");
    }
    assert_eq!(summary["pcie"]["cupy"], serde_json::json!([]));
    assert!(
        strings(&summary["notes"])
            .contains(&"pcie: the CuPy peer skipped: CuPy sees no GPU".to_string()),
        "{summary:#}"
    );
    for g in summary["pcie"]["goals"].as_array().unwrap() {
        let p99 = g["goal"].as_str().unwrap().starts_with("post-frame p99");
        let want = if p99 { "missed" } else { "not measured" };
        assert_eq!(g["status"], want, "{g}");
    }
}

/// The budget of check step NAME, from bench/gpu-check.sh's `budget_of`.
fn check_budget(script: &str, name: &str) -> u64 {
    let line = format!("        {name}) echo ");
    script
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|v| v.trim_end_matches(" ;;").parse().ok())
        .unwrap_or_else(|| panic!("no budget for {name} in bench/gpu-check.sh"))
}

#[test]
fn the_pcie_step_ends_within_its_budget_and_the_docs_state_the_budgets() {
    let root = kplace_testkit::workspace();
    let script = std::fs::read_to_string(root.join("bench/gpu-check.sh")).expect("read");
    let n = |name| script_number(&script, name);
    let budget = check_budget(&script, "pcie");
    assert_eq!(budget, 150);
    // Before the rows, each part under its own limit and the time to kill it: nvidia-smi (4 s
    // and 1), the copy rates, the stream, the peer at both sizes. The rows then have what is
    // left until PCIE_KILL + PCIE_MARGIN before the budget, each killed by then.
    let kill = n("PCIE_KILL");
    let before = 5
        + (n("PCIE_COPY_LIMIT") + kill)
        + (n("PCIE_STREAM_LIMIT") + kill)
        + (n("PCIE_CUPY_SMALL_LIMIT") + kill)
        + (n("PCIE_CUPY_LARGE_LIMIT") + kill);
    let rows = budget - before - kill - n("PCIE_MARGIN");
    assert_eq!(before, 97, "the header comment and docs/gpu.md say 97 s");
    assert_eq!(rows, 45, "the header comment and docs/gpu.md say 45 s");
    // Enough for all-gpu's probes and first rows at both sizes on the expected GPU.
    assert!(rows >= 40, "the rows may get only {rows} s");
    assert!(script.contains("= 97 s, which leaves the rows at least 150 - 97 - 3 - 5 = 45 s"));

    // docs/gpu.md's step table says each check step's budget, and their sum, as the script.
    let docs = std::fs::read_to_string(root.join("docs/gpu.md")).expect("read docs/gpu.md");
    let steps = [
        "preflight",
        "smoke",
        "pcie",
        "tests",
        "replay",
        "streams",
        "copies",
        "tune",
        "share",
        "adapt",
        "admit",
        "cupy",
        "memcheck",
        "bisect",
    ];
    assert!(script.contains(&format!("check) STEPS=({})", steps.join(" "))));
    let mut sum = 0;
    for (i, step) in steps.iter().enumerate() {
        let b = check_budget(&script, step);
        sum += b;
        let row = format!("| {}. {step} | {b} s |", i + 1);
        assert!(docs.contains(&row), "docs/gpu.md lacks {row:?}");
    }
    assert!(
        docs.contains(&format!("The budgets sum to {sum} s.")),
        "docs/gpu.md's sum is not {sum} s"
    );
    assert!(
        docs.contains("fourteen steps"),
        "docs/gpu.md's count of steps"
    );
}
