//! A run reads its graph and placement files once: `kplace run` is watched with inotify,
//! which counts every open of each file (the closes are watched too, since inotify merges an
//! event into an identical one still unread: open, close, open, close stays four events), however many parts of the run need them (the
//! workload's preparation, the receiver's wire, planning, an adapting run's alternatives,
//! progress and the report). Every wait has a limit; nothing here asserts a time.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

const LIMIT: Duration = Duration::from_secs(180);

/// Counts the opens of the files it watches.
struct Opens {
    inotify: Inotify,
    watched: Vec<WatchDescriptor>,
}

impl Opens {
    fn watch(paths: &[&Path]) -> Opens {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK).expect("inotify");
        let watched = paths
            .iter()
            .map(|p| {
                let events = AddWatchFlags::IN_OPEN | AddWatchFlags::IN_CLOSE;
                inotify.add_watch(*p, events).expect("watch")
            })
            .collect();
        Opens { inotify, watched }
    }

    /// How many times each watched file was opened since [`Opens::watch`], in its order.
    fn counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.watched.len()];
        loop {
            match self.inotify.read_events() {
                Ok(events) => {
                    for event in events {
                        let opened = event.mask.contains(AddWatchFlags::IN_OPEN);
                        if let Some(i) = self.watched.iter().position(|w| *w == event.wd)
                            && opened
                        {
                            counts[i] += 1;
                        }
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => return counts,
                Err(e) => panic!("inotify: {e}"),
            }
        }
    }
}

#[test]
fn an_adapting_run_with_progress_reads_its_graph_and_placement_once() {
    let root = kplace_testkit::workspace();
    let radar = root.join("workloads/radar");
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("graph.yaml");
    let placement = dir.path().join("placement.yaml");
    std::fs::copy(radar.join("graph.yaml"), &graph).unwrap();
    std::fs::copy(radar.join("placements/all-cpu.yaml"), &placement).unwrap();
    let opens = Opens::watch(&[&graph, &placement]);
    let report = dir.path().join("report.json");
    let out = kplace_testkit::output_within(
        Command::new(kplace_testkit::kplace_bin!())
            .current_dir(&root)
            .args(["run", "--graph"])
            .arg(&graph)
            .arg("--placement")
            .arg(&placement)
            .args(["--shape", "256x32", "--frames", "40", "--budget", "1us"])
            .args(["--adapt-window", "8", "--report-every", "10ms"])
            .arg("--adapt")
            .arg(radar.join("placements/all-cpu-pinned.yaml"))
            .arg("--report")
            .arg(&report),
        LIMIT,
        None,
    );
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    // The run did what it was asked: every frame verified, on both placements.
    let report: kplace::report::run::RunReport =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(report.verification.passed, "{log}");
    assert_eq!(report.verification.frames_passed, 40, "{log}");
    let adaptation = report.adaptation.as_ref().expect("the run adapted");
    assert_eq!(adaptation.placements, ["all-cpu", "all-cpu-pinned"]);
    assert_eq!(opens.counts(), [1, 1], "opens of (graph, placement); {log}");
}

#[test]
fn the_counter_counts_every_open() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    std::fs::write(&a, "a").unwrap();
    std::fs::write(&b, "b").unwrap();
    let opens = Opens::watch(&[&a, &b]);
    for _ in 0..3 {
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a");
    }
    assert!(b.is_file() && std::fs::metadata(&b).unwrap().len() == 1);
    assert_eq!(opens.counts(), [3, 0]);
}
