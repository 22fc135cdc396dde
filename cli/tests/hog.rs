//! `kplace hog` as a separate process: the CPU hog's rates in both modes, a clean stop on
//! SIGTERM and on the parent's death, `Cotenant` start/stop, and the GPU hog with and without
//! a GPU (a fake libcuda stands in for a driver without cuBLAS).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kplace_lab::hog::{
    Cotenant, CotenantSpec, CpuMode, HogChild, HogEvent, HogKind, HogLine, StopReason,
};

fn kplace_exe() -> PathBuf {
    kplace_testkit::kplace_bin!()
}

fn kplace(args: &[&str]) -> Output {
    kplace_testkit::output(Command::new(kplace_exe()).args(args))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every stdout line parsed as a hog line; panics on any other line (stdout is JSON only).
fn lines(stdout: &[u8]) -> Vec<HogLine> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a hog line: {l:?}: {e}")))
        .collect()
}

fn driver_present() -> bool {
    kplace_cuda_libs::find(kplace_cuda_libs::Library::Cuda).is_loaded()
}

/// Whether cuBLAS is found here (where kplace looks, not only on the loader's path).
fn cublas_present() -> bool {
    kplace_cuda_libs::find(kplace_cuda_libs::Library::Cublas).is_loaded()
}

/// Reads a child's stdout lines on a thread, so a test can wait for one with a deadline.
fn line_reader(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `timeout` for a line matching `want`; returns every line seen up to it.
fn wait_for_line(
    rx: &mpsc::Receiver<String>,
    timeout: Duration,
    want: impl Fn(&str) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = want(&line);
                seen.push(line);
                if hit {
                    return seen;
                }
            }
            Err(e) => panic!("no matching line within {timeout:?} ({e}); saw {seen:#?}"),
        }
    }
}

#[test]
fn cpu_hog_reports_positive_rates_in_both_modes() {
    for (mode, field) in [("spin", "iters_per_s"), ("membw", "gb_per_s")] {
        let out = kplace(&[
            "hog",
            "cpu",
            "--threads",
            "1",
            "--mode",
            mode,
            "--buffer-mib",
            "64",
            "--seconds",
            "0.5",
            "--report-every-s",
            "0.2",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let lines = lines(&out.stdout);
        assert_eq!(lines[0].event, HogEvent::Started, "{lines:#?}");
        let reports: Vec<_> = lines
            .iter()
            .filter(|l| l.event == HogEvent::Report)
            .collect();
        assert!(reports.len() >= 2, "{lines:#?}");
        let summary = lines.last().expect("a summary");
        assert_eq!(summary.event, HogEvent::Summary);
        assert_eq!(summary.stopped_by, Some(StopReason::Time));
        assert_eq!(summary.hog, HogKind::Cpu);
        assert_eq!(summary.threads, Some(1));
        for l in reports.iter().copied().chain([summary]) {
            assert!(l.rate().is_some_and(|r| r > 0.0), "{l:?}");
        }
        // The field names are part of the interface.
        let raw = String::from_utf8_lossy(&out.stdout);
        let last: serde_json::Value =
            serde_json::from_str(raw.lines().last().expect("a line")).expect("JSON");
        assert!(last[field].as_f64().is_some_and(|r| r > 0.0), "{last}");
        assert_eq!(last["hog"], "cpu");
        assert_eq!(last["mode"], mode);
    }
}

#[test]
fn cpu_hog_stops_on_sigterm_with_a_summary() {
    let mut child = Command::new(kplace_exe())
        .args(["hog", "cpu", "--threads", "1", "--report-every-s", "0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the hog");
    let rx = line_reader(&mut child);
    wait_for_line(&rx, Duration::from_secs(10), |l| l.contains("\"report\""));
    kplace::os::process::terminate(child.id()).expect("the hog is running");
    let seen = wait_for_line(&rx, Duration::from_secs(5), |l| l.contains("\"summary\""));
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    let summary: HogLine = serde_json::from_str(seen.last().expect("a line")).expect("JSON");
    assert_eq!(summary.stopped_by, Some(StopReason::Signal));
    assert!(summary.rate().is_some_and(|r| r > 0.0), "{summary:?}");
}

/// What the machine cannot hold is refused with exit 2 before a thread or a buffer is made:
/// a membw buffer of a terabyte, a hundred thousand threads.
#[test]
fn cpu_hog_refuses_what_the_machine_cannot_hold() {
    for (args, want) in [
        (
            &[
                "hog",
                "cpu",
                "--mode",
                "membw",
                "--buffer-mib",
                "1000000",
                "--seconds",
                "1",
            ][..],
            "more than half of the",
        ),
        (
            &["hog", "cpu", "--threads", "100000", "--seconds", "1"][..],
            "--threads 100000 is more than",
        ),
    ] {
        let out = kplace(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(want), "{args:?}: {}", text(&out));
    }
}

/// Whether `pid` has exited (gone, or a zombie waiting for whoever adopted it).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[test]
fn cpu_hog_exits_when_its_parent_dies() {
    // The shell starts the hog in the background, prints its pid and exits at once: the hog
    // must notice (PR_SET_PDEATHSIG, or its parent pid changing) and stop with a summary.
    let script = format!(
        "'{}' hog cpu --threads 1 --report-every-s 0.1 --parent-pid $$ & echo $!",
        kplace_exe().display()
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sh");
    let rx = line_reader(&mut shell);
    let first = wait_for_line(&rx, Duration::from_secs(5), |_| true);
    let pid: u32 = first[0].trim().parse().expect("the hog's pid");
    assert!(shell.wait().expect("wait for sh").success());
    let seen = wait_for_line(&rx, Duration::from_secs(5), |l| l.contains("\"summary\""));
    let summary: HogLine = serde_json::from_str(seen.last().expect("a line")).expect("JSON");
    assert_eq!(summary.stopped_by, Some(StopReason::Parent), "{seen:#?}");
    let deadline = Instant::now() + Duration::from_secs(3);
    while !exited(pid) {
        assert!(
            Instant::now() < deadline,
            "hog {pid} still runs after its parent died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cotenant_start_and_stop_record_the_intensity() {
    let spec = CotenantSpec::CpuHog {
        threads: 1,
        mode: CpuMode::Spin,
        buffer_mib: 16,
    };
    let cotenant =
        Cotenant::start_with(&kplace_exe(), &spec, Duration::from_secs(30)).expect("starts");
    assert!(cotenant.pid() > 0);
    assert_eq!(cotenant.spec(), &spec);
    std::thread::sleep(Duration::from_millis(1300));
    let report = cotenant.stop().expect("stops");
    assert_eq!(report.kind, "cpu-hog");
    assert_eq!(report.intensity, spec);
    assert!(report.clean, "{report:#?}");
    assert_eq!(report.exit, "exit status: 0");
    assert!(report.ran_s >= 1.0, "{report:#?}");
    assert!(!report.reports.is_empty(), "{report:#?}");
    let summary = report.summary.as_ref().expect("a summary");
    assert_eq!(summary.stopped_by, Some(StopReason::Signal));
    assert!(summary.iters_per_s.is_some_and(|r| r > 0.0), "{summary:?}");
    // The hog was told which process started it, to stop when that one is gone.
    let [_, sub, kind, json] = &report.command[..] else {
        panic!("{:?}", report.command);
    };
    assert_eq!(
        [sub.as_str(), kind.as_str()],
        [kplace::session::child::SUBCOMMAND, "hog"]
    );
    let told: HogChild = kplace::session::child::parse(json).expect("a hog's spec");
    assert_eq!(told.hog, spec);
    assert_eq!(told.parent_pid, Some(std::process::id()));

    // The report serializes with the intensity for the run's results.
    let json = serde_json::to_value(&report).expect("JSON");
    assert_eq!(json["intensity"]["kind"], "cpu-hog");
    assert_eq!(json["intensity"]["threads"], 1);
    assert_eq!(json["intensity"]["mode"], "spin");
}

#[test]
fn cotenant_that_cannot_start_says_why() {
    if driver_present() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let spec = CotenantSpec::parse("gpu-hog", Some(0.5))
        .expect("valid")
        .expect("a hog");
    let err = Cotenant::start_with(&kplace_exe(), &spec, Duration::from_secs(30))
        .expect_err("no GPU here");
    let text = err.to_string();
    assert!(
        text.starts_with("co-tenant gpu-hog: ended before it started")
            && text.contains("no CUDA driver found"),
        "{text}"
    );
}

#[test]
fn gpu_hog_without_a_driver_exits_2_and_says_so() {
    if driver_present() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let out = kplace(&["hog", "gpu", "--seconds", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no CUDA driver found"), "{err}");
}

#[test]
fn gpu_hog_rejects_bad_settings_with_exit_2() {
    for (arg, phrase) in [
        ("--duty=1.5", "invalid hog setting"),
        ("--size=0", "invalid hog setting"),
        (
            "--report-every-s=0",
            "--report-every must be longer than zero",
        ),
        // A duration is refused as it is parsed, naming the option (the old spelling's too).
        (
            "--seconds=-1",
            "invalid value '-1' for '--duration <DURATION>'",
        ),
        (
            "--duration=soon",
            "invalid value 'soon' for '--duration <DURATION>'",
        ),
    ] {
        let out = kplace(&["hog", "gpu", arg]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(phrase), "{arg}: {}", text(&out));
    }
}

/// The directory holding the fake `libcuda.so` (tests/c/fake_cuda.c).
fn fake_driver_dir() -> PathBuf {
    let lib = kplace_testkit::build_c_library("fake_cuda.c", "cuda", &[]);
    lib.parent().expect("a directory").to_path_buf()
}

#[test]
fn gpu_hog_with_a_driver_but_no_cublas_exits_2_and_says_so() {
    if driver_present() || cublas_present() {
        println!("skipped: a real CUDA driver or cuBLAS is present");
        return;
    }
    let out = kplace_testkit::output(
        Command::new(kplace_exe())
            .args(["hog", "gpu", "--seconds", "1"])
            .env("LD_LIBRARY_PATH", fake_driver_dir())
            .env("FAKE_CUDA_DEVICES", "1"),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cuBLAS not found"), "{err}");
}

/// On a GPU machine: the hog runs cuBLAS SGEMMs for a second and reports positive TFLOP/s,
/// at full and half duty.
#[test]
fn gpu_hog_reports_tflops_on_a_real_gpu() {
    let probe = kplace::cuda::probe::probe();
    if let Some(reason) = probe.unavailable_reason() {
        kplace_testkit::gpu::skip_or_fail(reason);
        return;
    }
    let cublas = kplace_cuda_libs::find(kplace_cuda_libs::Library::Cublas);
    if !cublas.is_loaded() {
        kplace_testkit::gpu::skip_or_fail(cublas.not_found_message());
        return;
    }
    for duty in ["1.0", "0.5"] {
        let out = kplace(&[
            "hog",
            "gpu",
            "--seconds",
            "1",
            "--report-every-s",
            "0.3",
            "--duty",
            duty,
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let lines = lines(&out.stdout);
        let summary = lines.last().expect("a summary");
        println!("duty {duty}: {}", summary.to_json());
        assert_eq!(summary.event, HogEvent::Summary);
        assert_eq!(summary.stopped_by, Some(StopReason::Time));
        assert!(summary.tflops.is_some_and(|t| t > 0.0), "{summary:?}");
        assert!(summary.gemms.is_some_and(|g| g > 0), "{summary:?}");
        assert!(
            lines.iter().any(|l| l.event == HogEvent::Report),
            "{lines:#?}"
        );
    }
}
