//! The `kplace` binary as a user runs it: a verified run, the detections file and `kplace
//! verify`, and a clear error for each bad input.
//!
//! A test suite: one end-to-end test per behaviour of `kplace plan`, `run`, `verify` and
//! `compare-detections`, sharing one set of helpers.

use std::process::{Command, Output};

fn kplace(args: &[&str]) -> Output {
    kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args(args)
            .current_dir(kplace_testkit::workspace()),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(args: &[&str]) -> String {
    let out = kplace(args);
    assert!(
        out.status.success(),
        "kplace {args:?} failed:\n{}",
        text(&out)
    );
    text(&out)
}

/// Runs kplace expecting an input error (exit 2); returns its message.
fn input_error(args: &[&str]) -> String {
    let out = kplace(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "kplace {args:?} should fail with an input error:\n{}",
        text(&out)
    );
    text(&out)
}

#[test]
fn plan_shows_kernels_libraries_edges_and_pools() {
    let out = ok(&["plan"]);
    for want in [
        "radar.range_fft",
        "kplace-cpu",
        "libkplace_cpu.so",
        "8 tiles of 16",
        "range_map",
        "cf32[1024, 128]",
        "workspace.range_fft",
        "total",
    ] {
        assert!(out.contains(want), "plan lacks {want:?}:\n{out}");
    }
}

/// Every committed placement plans, with or without a GPU here, and crosses the bus exactly
/// where it must: int16 samples up tile by tile when the range FFT is on the GPU, the range
/// map up when only Doppler is, and only what a CPU stage reads down.
#[test]
fn every_placement_plans_its_transfers_streams_and_fences() {
    let cases: [(&str, &[&str], &[&str]); 5] = [
        (
            "workloads/radar/placements/all-cpu.yaml",
            &["transfers  none"],
            &["H2D", "D2H", "streams"],
        ),
        (
            "workloads/radar/placements/all-gpu.yaml",
            &[
                "H2D iq",
                "512.0 KiB  pinned(gpu:0) -> device(gpu:0)  on range_fft's stream before its launches, in 4 pieces of 128.0 KiB as their packets arrive",
                "4 tiles of 32 along axis 0 (the GPU's default, a quarter of the axis; graph: 16)",
                "D2H detections",
                "device(gpu:0) -> pinned(gpu:0)  on cfar's stream after its launches, before its event",
                "doppler_fft waits on range_fft's event before reading range_map",
                "cfar waits on doppler_fft's event before reading power",
                "cfar records its event after its launches and downloads; a host callback then releases cluster",
                "range_fft    gpu:0  priority  0, 8 streams",
                "closed loop (a replay): whole frames staged once in pinned memory; 2 driver calls and 1 host callback per frame",
                "streamed (packets as they arrive); 9 driver calls and 1 host callback per frame",
                "cfar         in the slot's graph, then a host callback releasing cluster and the frame",
            ],
            &[
                "H2D range_map",
                "D2H power",
                "D2H range_map",
                "D2H clusters",
                "range_map.mirror",
            ],
        ),
        (
            "workloads/radar/placements/hybrid.yaml",
            &[
                "H2D range_map",
                "1.0 MiB  pinned(gpu:0) -> device(gpu:0)  on doppler_fft's stream before its launches\n",
                "D2H detections",
                "cfar waits on doppler_fft's event before reading power",
            ],
            &["H2D iq", "D2H power", "in 8 pieces"],
        ),
        (
            "workloads/radar/placements/gpu-fft.yaml",
            &[
                "H2D iq",
                "D2H power",
                "on doppler_fft's stream after its launches, before its event",
                "a host callback then releases cfar",
            ],
            &["H2D range_map", "D2H detections"],
        ),
        (
            "workloads/radar/placements/cfar-gpu.yaml",
            &[
                "H2D power         512.0 KiB  pinned(gpu:0) -> device(gpu:0)  on cfar's stream before its launches\n",
                "D2H detections    192.0 KiB  device(gpu:0) -> pinned(gpu:0)  on cfar's stream after its launches, before its event",
                "cfar         gpu:0  priority  0, 8 streams",
                "cfar records its event after its launches and downloads; a host callback then releases cluster",
            ],
            &[
                "H2D iq",
                "H2D range_map",
                "D2H power",
                "D2H clusters",
                "range_fft    gpu",
                "doppler_fft  gpu",
            ],
        ),
    ];
    for (placement, want, not_want) in cases {
        let out = ok(&["plan", "--placement", placement]);
        for w in want {
            let w = w.replace("\\n", "\n");
            assert!(out.contains(&w), "{placement}: plan lacks {w:?}:\n{out}");
        }
        for w in not_want {
            assert!(!out.contains(w), "{placement}: plan has {w:?}:\n{out}");
        }
    }
}

#[test]
fn run_verifies_and_writes_detections_that_verify_checks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("det.txt");
    let f = file.to_str().unwrap();
    let out = ok(&[
        "run",
        "--frames",
        "24",
        "--scene-frames",
        "6",
        "--workers",
        "2",
        "--detections",
        f,
    ]);
    assert!(
        out.contains("verification PASSED: 24/24 frames reported, 24 passed"),
        "{out}"
    );
    assert!(
        out.contains("range_fft") && out.contains("post-frame latency"),
        "{out}"
    );

    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.starts_with("kplace-detections v1 cpi=1024x128\n"),
        "{written}"
    );
    assert_eq!(written.matches("\nframe ").count(), 24);

    let out = ok(&[
        "verify",
        "--detections",
        f,
        "--frames",
        "24",
        "--scene-frames",
        "6",
    ]);
    assert!(out.contains("verification PASSED"), "{out}");
    // The same file judged against another scene fails, exit 1.
    let other = kplace(&[
        "verify",
        "--detections",
        f,
        "--frames",
        "24",
        "--scene-frames",
        "6",
        "--target",
        "50,1,10",
    ]);
    assert_eq!(other.status.code(), Some(1), "{}", text(&other));
    assert!(
        text(&other).contains("verification FAILED"),
        "{}",
        text(&other)
    );
    // Coverage is exact: one frame too many expected.
    let short = kplace(&[
        "verify",
        "--detections",
        f,
        "--frames",
        "25",
        "--scene-frames",
        "6",
    ]);
    assert_eq!(short.status.code(), Some(1));
    assert!(text(&short).contains("never reported"), "{}", text(&short));

    // A corrupt file is an input error naming the line.
    let corrupt = dir.path().join("corrupt.txt");
    std::fs::write(&corrupt, written.replacen("frame 3 ", "frame x ", 1)).unwrap();
    let e = input_error(&[
        "verify",
        "--detections",
        corrupt.to_str().unwrap(),
        "--frames",
        "24",
    ]);
    assert!(e.contains("corrupt.txt:") && e.contains("frame"), "{e}");
}

/// `kplace compare-detections`: a run against itself agrees bit for bit (exit 0); a power
/// beyond the tolerance and a cell on one side only are listed with their frame (exit 1, and
/// in JSON); a malformed line is an input error naming file and line (exit 2).
#[test]
fn compare_detections_lists_differences_by_frame() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.txt");
    let run = run.to_str().unwrap();
    ok(&[
        "run",
        "--frames",
        "4",
        "--scene-frames",
        "4",
        "--detections",
        run,
    ]);
    let out = ok(&["compare-detections", run, run, "--exact", "--frames", "4"]);
    assert!(out.contains("4 frames compared, 4 agree"), "{out}");
    assert!(out.contains("detections AGREE"), "{out}");

    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let h = "kplace-detections v1 cpi=1024x128\n";
    let reference = write(
        "ref.txt",
        &format!("{h}frame 0 1\n61 7 1000000\nframe 1 2\n61 7 1000000\n200 9 50\n"),
    );
    let candidate = write(
        "cand.txt",
        &format!("{h}frame 0 1\n61 7 1000001\nframe 1 1\n61 7 1000100\n"),
    );
    let out = kplace(&["compare-detections", &reference, &candidate]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    for want in [
        "2 frames compared, 1 agree",
        "frame 1: cell (61, 7) power 1000000 vs 1000100",
        "frame 1: cell (200, 9) power 50 only in the reference",
        "detections DIFFER: 2 differences",
    ] {
        assert!(said.contains(want), "lacks {want:?}:\n{said}");
    }
    // Two files without a frame agree on nothing: exit 1, saying so (and in JSON).
    let empty = write("empty.txt", h);
    let out = kplace(&["compare-detections", &empty, &empty]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("detections NOT COMPARED: neither file holds a frame"),
        "{}",
        text(&out)
    );
    let out = kplace(&["compare-detections", &empty, &empty, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["agree"], false);
    assert_eq!(value["frames_compared"], 0);
    // The workload of the graph compares: `compare-results` is the command's name, and a
    // graph whose workload writes no results file says so.
    let out = kplace(&["compare-results", &empty, &empty]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let e = input_error(&[
        "compare-results",
        &empty,
        &empty,
        "--graph",
        "workloads/spectrogram/graph.yaml",
    ]);
    assert!(e.contains("names no workload"), "{e}");
    // Nor does a verification of no frames pass.
    let e = input_error(&["verify", "--detections", &empty, "--frames", "0"]);
    assert!(e.contains("--frames must be at least 1"), "{e}");
    // Nor does a detector that reports every cell: with a false-alarm probability so high that
    // the bound admits it, the option is refused; with the default, the false alarms fail it.
    let mut every = format!("{h}frame 0 {}\n", 1024 * 128);
    for r in 0..1024 {
        for d in 0..128 {
            every.push_str(&format!("{r} {d} 100\n"));
        }
    }
    let every = write("every.txt", &every);
    let e = input_error(&[
        "verify",
        "--detections",
        &every,
        "--frames",
        "1",
        "--pfa",
        "0.5",
    ]);
    assert!(
        e.contains("--pfa must be in (0, 0.01], got 0.5") && e.contains("reports most cells"),
        "{e}"
    );
    let out = kplace(&[
        "verify",
        "--detections",
        &every,
        "--frames",
        "1",
        "--pfa",
        "0.01",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("verification FAILED") && text(&out).contains("false alarms"),
        "{}",
        text(&out)
    );

    let out = kplace(&["compare-detections", &reference, &candidate, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["schema"], "kplace-compare/1");
    assert_eq!(value["agree"], false);
    assert_eq!(value["differences"], 2);
    assert_eq!(value["only_in_reference"], 1);
    assert_eq!(value["listed"][1]["kind"], "only_in");
    assert_eq!(value["listed"][1]["frame"], 1);
    // With a looser tolerance only the one-sided cell remains.
    let out = kplace(&[
        "compare-detections",
        &reference,
        &candidate,
        "--rel-tol",
        "1e-3",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("detections DIFFER: 1 differences"),
        "{}",
        text(&out)
    );

    let bad = write("bad.txt", &format!("{h}frame 0 1\n61 x 5\n"));
    let out = input_error(&["compare-detections", &reference, &bad]);
    assert!(out.contains(&format!("{bad}:3: doppler bin")), "{out}");
    let out = input_error(&[
        "compare-detections",
        &reference,
        &candidate,
        "--rel-tol",
        "2",
    ]);
    assert!(out.contains("--rel-tol 2 must be in [0, 1)"), "{out}");
}

#[test]
fn high_snr_and_custom_targets_pass() {
    let out = ok(&["run", "--frames", "8", "--high-snr", "--seed", "3"]);
    assert!(out.contains("verification PASSED"), "{out}");
    let out = ok(&[
        "run",
        "--frames",
        "4",
        "--target",
        "60,-5,8",
        "--target",
        "140,2.5,10",
        "--pfa",
        "1e-5",
    ]);
    assert!(
        out.contains("verification PASSED") && out.contains("2 targets per frame"),
        "{out}"
    );
}

#[test]
fn a_cpi_the_graph_cannot_tile_is_refused() {
    let e = input_error(&["run", "--cpi", "1024x100", "--frames", "2"]);
    assert!(
        e.contains("workloads/radar/graph.yaml")
            && e.contains("tiles of 16 must divide")
            && e.contains("(100)"),
        "{e}"
    );
}

#[test]
fn a_cpi_that_does_not_match_a_fixed_shape_graph_is_refused() {
    let root = kplace_testkit::workspace();
    let fixed = std::fs::read_to_string(root.join("workloads/radar/graph.yaml"))
        .unwrap()
        .replace("shape: [M, N]}", "shape: [128, 1024]}");
    let (_dir, path) = kplace_testkit::write_temp("fixed.yaml", &fixed);
    let e = input_error(&[
        "run",
        "--graph",
        path.to_str().unwrap(),
        "--cpi",
        "2048x256",
        "--frames",
        "2",
    ]);
    assert!(
        e.contains("--shape 2048x256")
            && e.contains("axis 0 of the source iq is 128 in the graph file, not 256"),
        "{e}"
    );
}

#[test]
fn malformed_graph_and_placement_files_name_line_and_column() {
    let root = kplace_testkit::workspace();
    let graph = std::fs::read_to_string(root.join("workloads/radar/graph.yaml"))
        .unwrap()
        .replace("split: {axis", "splitt: {axis");
    let (_g, gpath) = kplace_testkit::write_temp("radar.yaml", &graph);
    let e = input_error(&["plan", "--graph", gpath.to_str().unwrap()]);
    assert!(
        e.contains("radar.yaml") && e.contains("line") && e.contains("splitt"),
        "{e}"
    );

    let (_p, ppath) = kplace_testkit::write_temp(
        "p.yaml",
        "name: p\nstages:\n  range_fft: cpu\n  doppler_fft: cpu\n  cfar: cpu\n  cluster: cpu\n  clustr: cpu\n",
    );
    let e = input_error(&["plan", "--placement", ppath.to_str().unwrap()]);
    assert!(
        e.contains("p.yaml:7") && e.contains("unknown stage clustr"),
        "{e}"
    );

    let (_q, qpath) = kplace_testkit::write_temp("q.yaml", "name: q\nstages: [cpu\n");
    let e = input_error(&["plan", "--placement", qpath.to_str().unwrap()]);
    assert!(e.contains("q.yaml") && e.contains("line"), "{e}");
    // One `error:`, and the snippet labelled with the file, not the parser's `<input>`.
    assert_eq!(e.matches("error").count(), 1, "{e}");
    assert!(
        e.contains(&format!("--> {}:2:", qpath.display())) && !e.contains("<input>"),
        "{e}"
    );
    // The command line's own refusals say it the same way.
    let e = input_error(&["run", "--frames", "x"]);
    assert!(
        e.starts_with("kplace: error: invalid value 'x' for '--frames <FRAMES>'"),
        "{e}"
    );

    let e = input_error(&["plan", "--graph", "graphs/nonexistent.yaml"]);
    assert!(
        e.contains("cannot read graph graphs/nonexistent.yaml"),
        "{e}"
    );
}

#[test]
fn a_gpu_placement_without_a_gpu_is_a_clear_error() {
    use kplace::cuda::probe::{DriverStatus, probe};
    if let DriverStatus::Ready { device_count, .. } = probe().driver
        && device_count > 0
    {
        println!("skipped: this machine has a usable GPU (bench/gpu-check.sh runs GPU placements)");
        return;
    }
    let (_p, path) = kplace_testkit::write_temp(
        "gpu.yaml",
        "name: gpu\nstages: {range_fft: gpu, doppler_fft: gpu, cfar: gpu, cluster: cpu}\n",
    );
    let e = input_error(&[
        "run",
        "--placement",
        path.to_str().unwrap(),
        "--frames",
        "2",
    ]);
    assert!(
        // Any of the stages the one line puts on gpu:0 (the first by line, then by name).
        e.contains("stage cfar is placed on gpu:0 (placement")
            && e.contains("gpu.yaml:2)")
            && e.contains("no GPU is usable")
            && e.contains("kplace devices"),
        "{e}"
    );
    // Refused before anything is prepared: no scene frames were made for a run that cannot be.
    assert!(!e.contains("scene frames prepared"), "{e}");
}

#[test]
fn a_missing_or_wrong_abi_library_is_named() {
    let (_p, path) = kplace_testkit::write_temp(
        "lib.yaml",
        "name: l\nlibraries: {cpu: /nonexistent/libkplace_cpu.so}\nstages: {range_fft: cpu, doppler_fft: cpu, cfar: cpu, cluster: cpu}\n",
    );
    let e = input_error(&["plan", "--placement", path.to_str().unwrap()]);
    assert!(
        e.contains("/nonexistent/libkplace_cpu.so does not exist"),
        "{e}"
    );
    assert_eq!(
        e.matches("does not exist").count(),
        1,
        "the cause is said once: {e}"
    );

    let wrong =
        kplace_testkit::build_c_library("test_kernels.c", "wrong_abi_cli", &["TEST_ABI_VERSION=7"]);
    let (_q, qpath) = kplace_testkit::write_temp(
        "wrong.yaml",
        &format!(
            "name: w\nlibraries: {{cpu: {}}}\nstages: {{range_fft: cpu, doppler_fft: cpu, cfar: cpu, cluster: cpu}}\n",
            wrong.display()
        ),
    );
    let e = input_error(&["plan", "--placement", qpath.to_str().unwrap()]);
    assert!(
        e.contains("libwrong_abi_cli.so was built for kplace ABI version 7"),
        "{e}"
    );
}

#[test]
fn bad_parameters_and_options_are_refused() {
    let e = input_error(&["plan", "--set", "cfar.pfaa=1e-3"]);
    assert!(e.contains("radar.cfar") && e.contains("pfaa"), "{e}");
    let e = input_error(&["run", "--pfa", "2", "--frames", "1"]);
    assert!(e.contains("--pfa must be in (0, 0.01]"), "{e}");
    let out = kplace(&["run", "--cpi", "1024"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("1024"), "{}", text(&out));
    let out = kplace(&["run", "--target", "30,2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("RANGE,VELOCITY,SNR"), "{}", text(&out));
}

/// Several pipelines, in one process and as processes: each verified on its own, with an
/// aggregate, a per-pipeline detections file, and the multi-pipeline report.
#[test]
fn several_pipelines_run_and_verify_each_in_both_modes() {
    for mode in ["thread", "process"] {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("r.json");
        let det = dir.path().join("det.txt");
        let out = ok(&[
            "run",
            "--frames",
            "12",
            "--scene-frames",
            "4",
            "--pipelines",
            "3",
            "--pipeline-mode",
            mode,
            "--report",
            report.to_str().unwrap(),
            "--detections",
            det.to_str().unwrap(),
        ]);
        assert!(
            out.contains(&format!(
                "== 3 pipelines ({mode}): 36 frames, partial 0, dropped 0"
            )) && out.contains("verification PASSED: 3/3 pipelines passed"),
            "{mode}: {out}"
        );
        for i in 0..3 {
            assert!(out.contains(&format!("== pipeline {i}")), "{out}");
            let file = dir.path().join(format!("det.p{i}.txt"));
            let verified = ok(&[
                "verify",
                "--detections",
                file.to_str().unwrap(),
                "--frames",
                "12",
                "--scene-frames",
                "4",
            ]);
            assert!(verified.contains("verification PASSED"), "{verified}");
        }
        let text = std::fs::read_to_string(&report).unwrap();
        let typed: kplace::report::run::MultiRunReport =
            kplace::report::read_json(&text, "r.json").expect("the report reads strictly");
        assert_eq!(typed.pipelines.len(), 3);
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["schema"], "kplace-multi-run-report/2");
        assert_eq!(json["aggregate"]["mode"], mode);
        assert_eq!(json["aggregate"]["frames"], 36);
        assert_eq!(json["aggregate"]["all_passed"], true);
        let pipelines = json["pipelines"].as_array().unwrap();
        assert_eq!(pipelines.len(), 3);
        for p in pipelines {
            assert_eq!(p["schema"], "kplace-run-report/2");
            assert_eq!(p["verification"]["frames_passed"], 12);
        }
        let sum: f64 = pipelines
            .iter()
            .map(|p| p["frames_per_s"].as_f64().unwrap())
            .sum();
        let aggregate = json["aggregate"]["frames_per_s"].as_f64().unwrap();
        assert!((sum - aggregate).abs() < 1e-6 * sum, "{sum} vs {aggregate}");
    }
    let e = input_error(&[
        "run",
        "--pipelines",
        "2",
        "--ingest-only",
        "--source",
        "udp://127.0.0.1:0",
    ]);
    assert!(e.contains("--ingest-only measures one receiver"), "{e}");
}

/// `kplace verify` on `detections`, killed (and the test failed) if it runs past a minute;
/// `feed`, if given, writes its stdin (`--detections /dev/stdin`).
fn verify_within(
    detections: &str,
    extra: &[&str],
    feed: Option<Box<dyn FnOnce(std::process::ChildStdin) + Send>>,
) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kplace"));
    cmd.args(["verify", "--detections", detections])
        .args(extra)
        .current_dir(kplace_testkit::workspace());
    kplace_testkit::output_within(&mut cmd, std::time::Duration::from_secs(60), feed)
}

fn assert_input_error(out: &Output, want: &[&str]) {
    assert_eq!(out.status.code(), Some(2), "{}", text(out));
    let said = text(out);
    assert!(
        want.iter().all(|w| said.contains(w)),
        "want {want:?}: {said}"
    );
}

const DET_HEADER: &str = "kplace-detections v1 cpi=1024x128\n";

#[test]
fn verify_refuses_a_file_cut_short_mid_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.det");
    // "61 7 1234567.5" cut by a writer killed mid-line: it would parse as a cluster.
    std::fs::write(&file, format!("{DET_HEADER}frame 0 1\n61 7 12")).unwrap();
    let out = verify_within(file.to_str().unwrap(), &["--frames", "1"], None);
    assert_input_error(
        &out,
        &["cut.det:3: line is truncated: no newline at end of file"],
    );
}

#[test]
fn verify_refuses_an_over_long_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long.det");
    let comment = format!("#{}\n", "x".repeat(1 << 20));
    std::fs::write(&file, format!("{DET_HEADER}{comment}frame 0 0\n")).unwrap();
    let out = verify_within(file.to_str().unwrap(), &["--frames", "1"], None);
    assert_input_error(&out, &["long.det:2: line is longer than 65536 bytes"]);

    // An input without newlines ends at its first line, holding at most one line's bytes.
    let out = verify_within("/dev/zero", &["--frames", "1"], None);
    assert_input_error(&out, &["/dev/zero:1: line is longer than 65536 bytes"]);
}

/// Writes `header`, then `line(i)` for i = 0, 1, ... until the reader goes away.
fn endless_feed(
    line: fn(u64) -> String,
) -> Option<Box<dyn FnOnce(std::process::ChildStdin) + Send>> {
    Some(Box::new(move |stdin| {
        use std::io::Write;
        let mut w = std::io::BufWriter::new(stdin);
        if w.write_all(DET_HEADER.as_bytes()).is_err() {
            return;
        }
        for i in 0.. {
            if w.write_all(line(i).as_bytes()).is_err() {
                return;
            }
        }
    }))
}

#[test]
fn verify_ends_an_endless_stream_of_valid_lines() {
    // Fresh frame ids, each a valid empty frame: refused at the first id past --frames.
    let out = verify_within(
        "/dev/stdin",
        &["--frames", "50"],
        endless_feed(|i| format!("frame {i} 0\n")),
    );
    assert_input_error(
        &out,
        &["/dev/stdin:52: frame 50 is outside the frames expected, 0..50"],
    );
    // The same frame again and again: refused at the second.
    let out = verify_within(
        "/dev/stdin",
        &["--frames", "50"],
        endless_feed(|_| "frame 3 0\n".into()),
    );
    assert_input_error(
        &out,
        &["/dev/stdin:3: frame 3 appears again (first at line 2)"],
    );
    // Cluster lines are bounded by their frame's count.
    let out = verify_within(
        "/dev/stdin",
        &["--frames", "50"],
        endless_feed(|i| match i {
            0 => "frame 0 2\n".into(),
            _ => "1 2 3\n".into(),
        }),
    );
    assert_input_error(
        &out,
        &["/dev/stdin:5: cluster line outside a frame (frame 0 already has all"],
    );
}

#[test]
fn verify_refuses_a_pfa_outside_0_to_the_largest_it_can_judge() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ok.det");
    std::fs::write(&file, format!("{DET_HEADER}frame 0 0\n")).unwrap();
    for pfa in ["2", "0", "1", "0.5", "-0.5", "NaN"] {
        let pfa = format!("--pfa={pfa}");
        let out = verify_within(file.to_str().unwrap(), &["--frames", "1", &pfa], None);
        assert_input_error(&out, &["--pfa must be in (0, 0.01], got"]);
    }
}

/// `kplace plan | head -1`: a closed stdout ends the program quietly (exit 0 or SIGPIPE),
/// never with a panic. The pipe's read end is closed before kplace starts, so its first write
/// meets a reader-less pipe.
#[test]
fn a_closed_stdout_ends_plan_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let (reader, writer) = std::io::pipe().expect("create a pipe");
    drop(reader);
    let mut child = kplace_testkit::KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .arg("plan")
            .current_dir(kplace_testkit::workspace())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kplace plan"),
    );
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("poll kplace plan") {
            break status;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "kplace plan hung"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let mut err = Vec::new();
    if let Some(mut pipe) = child.0.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_end(&mut err);
    }
    let out = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: err,
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "kplace plan complained about the closed pipe:\n{stderr}"
    );
    assert!(
        out.status.success() || out.status.signal() == Some(13 /* SIGPIPE */),
        "kplace plan should end with 0 or SIGPIPE, got {:?}:\n{stderr}",
        out.status
    );
}

/// `KPLACE_LIB_DIR=` (set but empty) is unset: the libraries next to the executable are found,
/// even from a directory holding a file of the default library's name (which, as a bare name,
/// the loader would look up on the system path instead).
#[test]
fn an_empty_lib_dir_leaves_the_install_working() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("libkplace_cpu.so"), "not a library").expect("write");
    let ws = kplace_testkit::workspace();
    let out = kplace_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .arg("plan")
            .arg("--graph")
            .arg(ws.join("workloads/radar/graph.yaml"))
            .arg("--placement")
            .arg(ws.join("workloads/radar/placements/all-cpu.yaml"))
            .env("KPLACE_LIB_DIR", "")
            // cargo's test environment puts its output directory on the loader's path, which
            // would find a bare name; an installed kplace has no such help.
            .env_remove("LD_LIBRARY_PATH")
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
        std::time::Duration::from_secs(60),
        None,
    );
    assert!(
        out.status.success(),
        "kplace plan with KPLACE_LIB_DIR= failed:\n{}",
        text(&out)
    );
    assert!(
        text(&out).contains("kplace-cpu (/"),
        "the library should be found by its full path:\n{}",
        text(&out)
    );
}

/// `kplace run --scene-frames` beyond the 256 MiB budget for prepared frames is refused, not
/// grown without limit; the refusal names the option, the bytes and this CPI's maximum.
#[test]
fn run_refuses_scene_frames_beyond_the_budget() {
    let out = kplace_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args(["run", "--frames", "10", "--scene-frames", "100000000"])
            .current_dir(kplace_testkit::workspace())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
        std::time::Duration::from_secs(60),
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = text(&out);
    assert!(
        err.contains("--scene-frames 100000000")
            && err.contains("CPI 1024x128 (512.0 KiB each)")
            && err.contains("256.0 MiB budget")
            && err.contains("at most 512 for this CPI"),
        "{err}"
    );
}

/// A CPI far beyond this machine's memory is refused, by `kplace plan` and `kplace run` alike,
/// before anything CPI-sized is allocated: exit 2 with the plan's need, what is available and
/// the largest pools, never an allocation abort (run aborted with SIGABRT; plan printed a
/// 98,304 GiB pool total with exit 0).
#[test]
fn a_cpi_beyond_memory_is_refused_before_allocating() {
    for args in [
        &["plan", "--cpi", "1048576x1048576"][..],
        &["run", "--cpi", "1048576x1048576", "--frames", "2"][..],
        &[
            "send",
            "--cpi",
            // Chirps the graph's tiles of 16 divide: the memory check is what refuses it.
            "8192x4294967280",
            "--dest",
            "127.0.0.1:9",
            "--frames",
            "1",
            "--burst",
        ][..],
    ] {
        let out = kplace_testkit::output_within(
            Command::new(env!("CARGO_BIN_EXE_kplace"))
                .args(args)
                .current_dir(kplace_testkit::workspace())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
            std::time::Duration::from_secs(60),
            None,
        );
        let err = text(&out);
        assert_eq!(out.status.code(), Some(2), "kplace {args:?}:\n{err}");
        let cpi = args[2];
        for want in [
            &format!("{cpi} cannot run here") as &str,
            "of host memory",
            "but ",
            "is available (",
            "TiB",
        ] {
            assert!(
                err.contains(want),
                "kplace {args:?}: {want:?} not in:\n{err}"
            );
        }
        if args[0] == "send" {
            assert!(err.contains("prepared scene frames"), "{err}");
        } else {
            assert!(
                err.contains("range_map 32.0 TiB (4 x 8.0 TiB in host)") && err.contains("--slots"),
                "kplace {args:?} should name the largest pools and the fix:\n{err}"
            );
        }
    }
}

/// The cases: `--progress-out /dev/full` aborted the run with no report. A full disk
/// under an output costs that output only: the run goes on, verifies, keeps its report (which
/// names what failed), and exits 1; and no output is left truncated under its name.
#[test]
fn an_output_that_cannot_be_written_costs_only_itself() {
    // Never on a machine whose /dev/full is missing or not the device: the run would write a
    // regular file there.
    if let Err(why) = kplace_testkit::devices::dev_full() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let trace = dir.path().join("t.json");
    let out = kplace(&[
        "run",
        "--frames",
        "40",
        "--detections",
        "/dev/full",
        "--progress-out",
        "/dev/full",
        "--report-every",
        "10ms",
        "--trace",
        trace.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("verification PASSED: 40/40"),
        "{}",
        text(&out)
    );
    for what in ["detections", "progress"] {
        assert!(
            text(&out).contains(&format!(
                "the {what} file /dev/full could not be written: No space left on device"
            )),
            "{}",
            text(&out)
        );
    }
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        value["output_errors"].as_array().unwrap().len(),
        2,
        "{value}"
    );
    assert_eq!(value["verification"]["passed"], true);
    assert!(trace.exists(), "the other outputs are complete");
    assert!(
        kplace_testkit::devices::is_char_device(std::path::Path::new("/dev/full")),
        "/dev/full is still the device"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
}

/// The case: `--stream-rate 1e-300` panicked (`cannot convert float seconds to
/// Duration`, exit 101). A rate whose frame period is outside 1 ns to 1 day is refused, as an
/// input error naming the option, the value and the range, by every command that takes one.
#[test]
fn rates_outside_what_a_run_can_represent_are_refused_naming_the_option() {
    let range = "is out of range: a frame rate must be from 1.157e-5 (a frame a day) to 1e9 (a frame a nanosecond) frames per second";
    for rate in ["1e-300", "1e30", "0", "-3", "NaN", "inf"] {
        let e = input_error(&["run", "--frames", "2", &format!("--stream-rate={rate}")]);
        assert!(
            e.contains(&format!("--stream-rate {} {range}", rate_said(rate))),
            "{rate}: {e}"
        );
        assert!(!e.contains("panicked"), "{e}");
    }
    for args in [
        &["plan", "--stream-rate", "1e-300"][..],
        &[
            "send",
            "--dest",
            "127.0.0.1:9",
            "--frames",
            "1",
            "--rate",
            "1e-300",
        ][..],
        &["tune", "--rate", "1e-300"][..],
        &["bisect-rate", "--start-rate", "1e-300"][..],
    ] {
        let e = input_error(args);
        assert!(e.contains(&format!("1e-300 {range}")), "{args:?}: {e}");
    }
}

/// A rate as the error says it back (as Rust's `{:?}` writes the number).
fn rate_said(given: &str) -> String {
    format!("{:?}", given.parse::<f64>().unwrap())
}

/// Option values that could only waste a run or pass it vacuously are refused before anything
/// runs, each naming the option: no frames, a warm-up that leaves none, a zero frame timeout.
#[test]
fn runs_that_could_only_pass_vacuously_are_refused() {
    for (args, want) in [
        (&["run", "--frames", "0"][..], "--frames must be at least 1"),
        (
            &["run", "--frames", "10", "--warmup-frames", "10"][..],
            "--warmup-frames 10 leaves no frame",
        ),
        (
            &["run", "--frames", "10", "--warmup-frames", "99"][..],
            "--warmup-frames 99 leaves no frame",
        ),
        (
            &["run", "--frame-timeout-ms", "0"][..],
            "--frame-timeout must be at least 1ms",
        ),
        (
            &[
                "run",
                "--start-timeout-s",
                "0",
                "--source",
                "udp://127.0.0.1:0",
            ][..],
            "--start-timeout must be longer than zero",
        ),
        (
            &[
                "run",
                "--idle-timeout",
                "0s",
                "--source",
                "udp://127.0.0.1:0",
            ][..],
            "--idle-timeout must be longer than zero",
        ),
        (
            &["run", "--report", "-", "--detections", "-"][..],
            "only one of --report, --detections, --done-times and --progress-out",
        ),
        (
            &["run", "--report", "-", "--pipelines", "2"][..],
            "takes one pipeline's output",
        ),
    ] {
        let e = input_error(args);
        assert!(e.contains(want), "kplace {args:?}: {want:?} not in:\n{e}");
        assert!(!e.contains("verification"), "nothing ran: {e}");
    }
}

/// A core in `runtime.pin_cores` that this machine does not have leaves its worker unpinned,
/// and the run says so instead of ignoring it silently; the run still verifies.
#[test]
fn a_pinned_core_that_is_not_here_is_named() {
    let placement = "name: pinned\nstages: {range_fft: cpu, doppler_fft: cpu, cfar: cpu, cluster: cpu}\n\
                     runtime: {workers: 1, pin_cores: [99999]}\n";
    let (_dir, path) = kplace_testkit::write_temp("pinned.yaml", placement);
    let out = kplace(&[
        "run",
        "--placement",
        path.to_str().unwrap(),
        "--frames",
        "4",
        "--scene-frames",
        "4",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("worker 0 not pinned to core 99999, it runs unpinned"),
        "{}",
        text(&out)
    );
}

/// `-` names standard output only where an output can go there; elsewhere it is refused,
/// naming the option, never written as a file named `-`.
#[test]
fn outputs_that_only_a_file_can_take_refuse_a_dash() {
    for (args, option) in [
        (
            &[
                "send",
                "--dest",
                "127.0.0.1:9",
                "--report",
                "-",
                "--frames",
                "1",
            ][..],
            "--report -",
        ),
        (
            &[
                "send",
                "--dest",
                "127.0.0.1:9",
                "--times",
                "-",
                "--frames",
                "1",
            ][..],
            "--times -",
        ),
        (&["run", "--trace", "-", "--frames", "2"][..], "--trace -"),
        (&["plot-trace", "t.json", "--out", "-"][..], "--out -"),
        (
            &[
                "record",
                "--graph",
                "workloads/spectrogram/graph.yaml",
                "--out",
                "-",
                "--frames",
                "1",
            ][..],
            "--out -",
        ),
    ] {
        let e = input_error(args);
        assert!(
            e.contains(&format!("{option}: this output goes to a file")),
            "kplace {args:?}: {e}"
        );
        assert!(
            !kplace_testkit::workspace().join("-").exists(),
            "kplace {args:?} wrote a file named -"
        );
    }
}

/// An output path that cannot be written fails before the run, not after it (losing it); so
/// does a ready file whose directory cannot be made, which a sender waits for in vain. A
/// missing directory is made (docs/report.md); one under a regular file cannot be.
#[test]
fn a_report_that_cannot_be_written_fails_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let under = |name: &str| blocker.join(name).display().to_string();
    for option in ["--report", "--detections", "--done-times"] {
        let out = under("out");
        let e = input_error(&["run", "--frames", "2", option, &out]);
        assert!(
            e.contains(&out) && e.contains("is a regular file, not a directory"),
            "{option}: {e}"
        );
        assert!(
            !e.contains("frames 2"),
            "{option}: the run must not have started: {e}"
        );
    }
    let ready = under("ready.json");
    let e = input_error(&[
        "run",
        "--frames",
        "2",
        "--source",
        "udp://127.0.0.1:0",
        "--ready-file",
        &ready,
    ]);
    assert!(
        e.contains(&format!("--ready-file {ready}"))
            && e.contains(&format!(
                "cannot make the directory {0}: {0} is a regular file, not a directory",
                blocker.display()
            )),
        "{e}"
    );
}

/// `--report -` writes the JSON report to stdout (the summary goes to stderr), never a file
/// named `-`.
#[test]
fn a_report_to_stdout_is_json_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args(["run", "--frames", "3", "--report", "-"])
            .arg("--graph")
            .arg(kplace_testkit::workspace().join("workloads/radar/graph.yaml"))
            .arg("--placement")
            .arg(kplace_testkit::workspace().join("workloads/radar/placements/all-cpu.yaml"))
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is the report");
    assert_eq!(json["schema"], "kplace-run-report/2");
    assert_eq!(json["frames"], 3);
    let typed: kplace::report::run::RunReport =
        kplace::report::read_json(&String::from_utf8_lossy(&out.stdout), "stdout")
            .expect("the report reads strictly");
    assert_eq!(typed.frames, 3);
    assert_eq!(typed.ingest, None, "a replay has no receiver");
    assert!(String::from_utf8_lossy(&out.stderr).contains("verification PASSED"));
    assert!(!dir.path().join("-").exists(), "no file named -");
}

/// `--report-every` writes a progress line per interval and a last one, to stdout by default
/// (the summary then goes to stderr), each a strict `kplace-progress/3` line, adding up to the
/// run's report; `-` for two outputs, or for several pipelines, is refused, as is a zero or
/// unreadable interval.
#[test]
fn progress_lines_go_to_stdout_and_add_up_to_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = kplace(&[
        "run",
        "--frames",
        "60",
        "--report-every",
        "5ms",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<kplace::report::progress::ProgressLine> = stdout
        .lines()
        .map(|l| kplace::report::read_json(l, "stdout").expect("a progress line"))
        .collect();
    let last = lines.last().expect("a last line");
    assert!(last.last && lines.iter().filter(|l| l.last).count() == 1);
    assert_eq!(last.frames, 60);
    assert_eq!(lines.iter().map(|l| l.interval_frames).sum::<u64>(), 60);
    assert!(lines.iter().all(|l| l.pipeline.is_none()));
    assert!(
        lines.iter().all(|l| l.gpus.is_empty()),
        "a CPU placement reads no GPU"
    );
    let report: kplace::report::run::RunReport =
        kplace::report::read_json(&std::fs::read_to_string(&report).unwrap(), "report").unwrap();
    assert_eq!(report.frames, last.frames);
    assert!(String::from_utf8_lossy(&out.stderr).contains("verification PASSED"));

    let e = input_error(&["run", "--report-every", "1s", "--report", "-"]);
    assert!(e.contains("can be - (stdout)"), "{e}");
    let e = input_error(&["run", "--report-every", "1s", "--pipelines", "2"]);
    assert!(e.contains("--progress-out FILE"), "{e}");
    let e = input_error(&["run", "--report-every", "0s"]);
    assert!(
        e.contains("--report-every") && e.contains("longer than zero"),
        "{e}"
    );
    let e = input_error(&["run", "--report-every", "soon"]);
    assert!(e.contains("--report-every") && e.contains("e.g. 1s"), "{e}");
    let e = input_error(&["run", "--progress-out", "p.jsonl"]);
    assert!(e.contains("--report-every"), "{e}");
    let e = input_error(&[
        "run",
        "--frames",
        "2",
        "--report-every",
        "1s",
        "--progress-out",
        "Cargo.toml/p.jsonl",
    ]);
    assert!(
        e.contains("Cargo.toml/p.jsonl") && !e.contains("frames 2"),
        "the run must not have started: {e}"
    );
}

/// `--trace FILE` writes Chrome trace events that parse: every stage launch of every frame
/// once (the range FFT once per tile), each frame's packets and delivery, a name per thread;
/// with two pipelines, a file per pipeline; a path that cannot be written fails before the run.
#[test]
fn a_trace_holds_every_launch_of_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    ok(&["run", "--frames", "12", "--trace", path.to_str().unwrap()]);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let count = |cat: &str, name: &str, frame: u64| {
        events
            .iter()
            .filter(|e| e["cat"] == cat && e["name"] == name && e["args"]["frame"] == frame)
            .count()
    };
    for frame in 0..12 {
        assert_eq!(
            count("launch", "range_fft", frame),
            8,
            "frame {frame}: 8 tiles"
        );
        for stage in ["doppler_fft", "cfar", "cluster"] {
            assert_eq!(count("launch", stage, frame), 1, "frame {frame}: {stage}");
        }
        assert_eq!(
            count("packets", &format!("frame {frame} packets"), frame),
            1
        );
        assert_eq!(count("deliver", &format!("frame {frame} done"), frame), 1);
    }
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "worker 0")
    );

    let two = dir.path().join("two.json");
    ok(&[
        "run",
        "--frames",
        "4",
        "--pipelines",
        "2",
        "--trace",
        two.to_str().unwrap(),
    ]);
    for i in 0..2 {
        let file = dir.path().join(format!("two.p{i}.json"));
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert!(!trace["traceEvents"].as_array().unwrap().is_empty(), "{i}");
    }
    // Drawn without a viewer: a lane per thread, the stages in the legend.
    let svg = dir.path().join("t.svg");
    ok(&[
        "plot-trace",
        path.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in ["worker 0", "collector", "source", "range_fft", "cluster"] {
        assert!(text.contains(want), "{want} in the picture");
    }
    let not_a_trace = dir.path().join("no.json");
    std::fs::write(&not_a_trace, "{\"traceEvents\": 1}").unwrap();
    let e = input_error(&["plot-trace", not_a_trace.to_str().unwrap()]);
    assert!(e.contains("no.json: not a kplace trace"), "{e}");
    // The old spelling still takes its bare number of ms.
    let e = input_error(&["plot-trace", path.to_str().unwrap(), "--span-ms", "0"]);
    assert!(e.contains("--span must be longer than zero"), "{e}");
    let e = input_error(&["plot-trace", path.to_str().unwrap(), "--span", "soon"]);
    assert!(
        e.contains("--span <DURATION>") && e.contains("e.g. 250ms"),
        "{e}"
    );
    // An endless input is read up to the bound, never whole.
    let e = input_error(&["plot-trace", "/dev/zero"]);
    assert!(e.contains("trace /dev/zero holds more than 1 GiB"), "{e}");
    // Under a regular file (the workspace's Cargo.toml), no directory can be made.
    let e = input_error(&["run", "--frames", "2", "--trace", "Cargo.toml/t.json"]);
    assert!(
        e.contains("Cargo.toml/t.json") && !e.contains("frames 2"),
        "the run must not have started: {e}"
    );
}

/// A host name is a valid receive address; a CPI whose chirps do not fit a UDP datagram is
/// refused instead of listening for packets that can never come.
#[test]
fn udp_sources_take_names_and_refuse_packets_beyond_a_datagram() {
    let e = input_error(&[
        "run",
        "--cpi",
        "16384x16",
        "--source",
        "udp://127.0.0.1:0",
        "--frames",
        "1",
    ]);
    assert!(
        e.contains("more than a UDP datagram carries (65507)")
            && e.contains("at most 16360 elements per packet"),
        "{e}"
    );
    let out = kplace_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args([
                "run",
                "--source",
                "udp://localhost:0",
                "--frames",
                "1",
                "--idle-timeout-s",
                "0.2",
            ])
            .current_dir(kplace_testkit::workspace()),
        std::time::Duration::from_secs(60),
        None,
    );
    let t = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no sender: 1 frame never reported:\n{t}"
    );
    assert!(t.contains("listening on udp://127.0.0.1:"), "{t}");
}

/// A run that fails after its report file was created (here: a missing graph) leaves no empty
/// report behind for a reader to mistake for a run.
#[test]
fn a_run_that_fails_leaves_no_empty_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let e = input_error(&[
        "run",
        "--graph",
        "no/such/graph.yaml",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(e.contains("no/such/graph.yaml"), "{e}");
    assert!(!report.exists(), "no empty report");
}

/// `-q`, `-v` and `RUST_LOG` choose what stderr says; the verdict (the command's output) and
/// an error are said whatever the level.
#[test]
fn verbosity_flags_and_rust_log_choose_what_stderr_says() {
    let run = |args: &[&str], rust_log: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kplace"));
        cmd.args(args).current_dir(kplace_testkit::workspace());
        match rust_log {
            Some(filter) => cmd.env("RUST_LOG", filter),
            None => cmd.env_remove("RUST_LOG"),
        };
        let out = kplace_testkit::output(&mut cmd);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out, stderr)
    };
    let running = "kplace run: graph fmcw-radar on placement all-cpu";
    let bound =
        "kplace: debug kplace_core::plan::bind: stage range_fft bound to radar.range_fft on cpu";
    let short = ["run", "--frames", "2"];
    let with = |flag: &'static str| [&[flag][..], &short[..]].concat();

    let (out, stderr) = run(&short, None);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(running) && !stderr.contains("kplace: debug"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("verification PASSED"));

    let (out, stderr) = run(&with("-q"), None);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(running), "-q hides progress: {stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("verification PASSED"),
        "the verdict is output, not logging"
    );

    let (_, stderr) = run(&with("-v"), None);
    assert!(
        stderr.contains(running) && stderr.contains(bound),
        "{stderr}"
    );
    let (_, stderr) = run(&short, Some("kplace=debug"));
    assert!(
        stderr.contains(bound),
        "RUST_LOG alone turns on debug: {stderr}"
    );
    let (_, stderr) = run(&with("-v"), Some("warn"));
    assert!(
        !stderr.contains(running) && !stderr.contains("kplace: debug"),
        "RUST_LOG replaces the flags: {stderr}"
    );
    let (_, stderr) = run(&with("-v"), Some("bogus==="));
    assert!(
        stderr.contains("RUST_LOG=\"bogus===\" is not a filter") && stderr.contains(bound),
        "an invalid RUST_LOG is named and the flags used: {stderr}"
    );

    let (out, stderr) = run(&["-qqq", "plan", "--graph", "nope.yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("kplace: error: cannot read graph nope.yaml"),
        "an error is said even at -qqq: {stderr}"
    );
}

/// The workloads a graph can name are listed with their options, and a workload option is
/// given by flag or by `--opt`, checked by name: one its workload does not take, or a graph
/// naming a workload nobody registered, is refused with the names that would work.
#[test]
fn workloads_are_listed_and_their_options_checked_by_name() {
    let out = kplace(&["workloads"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        listed.starts_with("fmcw-radar: ")
            && listed.contains(
                "  --opt target=RANGE,VELOCITY,SNR or --target RANGE,VELOCITY,SNR (repeatable): "
            )
            && listed.contains("  --opt pfa=P or --pfa P: ")
            && listed.contains("\nrecording: any graph on a recording"),
        "{listed}"
    );
    let e = input_error(&["run", "--frames", "1", "--opt", "pfa=2"]);
    assert!(e.contains("--pfa must be in (0, 0.01]"), "{e}");
    let e = input_error(&["run", "--frames", "1", "--opt", "beams=4"]);
    assert!(
        e.contains(
            "workload option beams is not an option of workload fmcw-radar, which takes target, high-snr, scene-frames, pfa"
        ),
        "{e}"
    );
    let e = input_error(&["run", "--frames", "1", "--pfa", "1e-6", "--opt", "pfa=1e-5"]);
    assert!(e.contains("workload option pfa is given twice"), "{e}");
    let root = kplace_testkit::workspace();
    let sonar = std::fs::read_to_string(root.join("workloads/radar/graph.yaml"))
        .unwrap()
        .replace("workload: fmcw-radar", "workload: sonar");
    let (_dir, path) = kplace_testkit::write_temp("sonar.yaml", &sonar);
    let e = input_error(&["run", "--graph", path.to_str().unwrap(), "--frames", "1"]);
    assert!(
        e.contains(
            "unknown workload \"sonar\"; kplace knows fmcw-radar, or runs any graph on a recording"
        ),
        "{e}"
    );
}

/// The case: a 4-frame run printed `post-frame latency trend -3104.970 ms per s of run`,
/// a slope through four points. The summary says a trend only from 30 measured frames
/// (docs/report.md); the report's JSON carries the slope either way.
#[test]
fn a_latency_trend_is_printed_only_when_enough_frames_support_it() {
    let short = ok(&["run", "--cpi", "256x32", "--frames", "4"]);
    assert!(short.contains("post-frame latency "), "{short}");
    assert!(!short.contains("latency trend"), "{short}");
    let long = ok(&["run", "--cpi", "256x32", "--frames", "40"]);
    assert!(
        long.contains("post-frame latency trend ") && long.contains(" ms per s of run"),
        "{long}"
    );
    let short = ok(&[
        "run",
        "--cpi",
        "256x32",
        "--frames",
        "40",
        "--warmup-frames",
        "20",
    ]);
    assert!(
        !short.contains("latency trend"),
        "20 measured frames: {short}"
    );
}
