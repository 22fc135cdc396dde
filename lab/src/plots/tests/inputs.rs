//! What the plots take in: results files of every version they read (the committed ones are
//! of versions 2 and 3) and refuse, and reasons too long for a note.

use std::path::Path;
use std::time::Duration;

use super::{El, has_text, parse, sweep, texts};
use crate::plots::{REASON_CHARS, read_results, short_reason, write_all};
use crate::rate::sweep::SCHEMA;
use crate::rate::{LatencyBudget, Stage};

#[test]
fn bad_results_files_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let read = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        format!("{:#}", read_results(&path).unwrap_err())
    };
    let e = read(
        "broken.json",
        "{\"schema\": \"kplace-bisect-rate/2\",\n  \"searches\": [",
    );
    assert!(e.contains("broken.json") && e.contains("line 2"), "{e}");
    let e = read(
        "old.json",
        r#"{"schema": "kplace-bisect-rate/1", "results": []}"#,
    );
    assert!(
        e.contains("old.json") && e.contains("kplace-bisect-rate/1"),
        "{e}"
    );
    let e = read("other.json", r#"{"frames": 3}"#);
    assert!(
        e.contains("other.json") && e.contains("no \"schema\""),
        "{e}"
    );
    let e = read(
        "typed.json",
        "{\"schema\": \"kplace-bisect-rate/4\", \"machine\": {}, \"settings\": {},\n \"searches\": 3}",
    );
    assert!(
        e.contains("typed.json") && e.contains("line 2 column"),
        "{e}"
    );
    let missing = dir.path().join("missing.json");
    let e = format!("{:#}", read_results(&missing).unwrap_err());
    assert!(e.contains("missing.json"), "{e}");
    // A good file reads back as written.
    let path = dir.path().join("good.json");
    std::fs::write(&path, serde_json::to_string(&sweep()).unwrap()).unwrap();
    assert_eq!(read_results(&path).unwrap(), sweep());
}

/// A skipped system's reason, as the spectrogram's results file has it: the GPU refusal with
/// the whole library search behind it.
const GPU_REFUSAL: &str = "stage fft is placed on gpu:0 (placement graphs/spectrogram/placements/gpu.yaml:14), but no GPU is usable: gpu:0: open failed: no CUDA driver found (libcuda not found (KPLACE_CUDA_LIB_DIR: not set; loader path: no libcuda.so, libcuda.so.13 on it; /usr/local/cuda/lib64: no such directory); set KPLACE_CUDA_LIB_DIR to the directory that holds it); place it on `cpu`, or see `kplace devices`";

#[test]
fn a_reason_in_a_note_is_one_short_line_without_machine_detail() {
    let short = short_reason(GPU_REFUSAL);
    assert_eq!(
        short,
        "stage fft is placed on gpu:0, but no GPU is usable: gpu:0: open failed: no CUDA driver found"
    );
    assert_eq!(short_reason("python3 not found"), "python3 not found");
    let long = short_reason(&"word ".repeat(60));
    assert!(
        long.ends_with("...") && long.chars().count() <= REASON_CHARS,
        "{long}"
    );
    assert_eq!(short_reason("first line\nsecond line"), "first line");

    let mut file = sweep();
    file.searches.last_mut().unwrap().skipped = Some(GPU_REFUSAL.into());
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(&[file], dir.path()).unwrap();
    for path in &paths {
        let els = parse(path);
        let notes: Vec<&El> = texts(&els)
            .into_iter()
            .filter(|t| t.text.starts_with("not searched"))
            .collect();
        assert_eq!(notes.len(), 1, "{path:?}: one line");
        assert!(
            notes[0].text.contains("no CUDA driver found"),
            "{:?}",
            notes[0].text
        );
        assert!(!has_text(&els, "KPLACE_CUDA_LIB_DIR"), "{path:?}");
    }
}

#[test]
fn results_of_versions_2_and_3_read_as_the_current_version() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results");
    // Version 2: rates named per CPI, no goals.
    let v2 = read_results(&results.join("spectrogram/bisect-rate.json")).unwrap();
    assert_eq!(v2.schema, SCHEMA);
    let cpu = &v2.searches[0];
    assert_eq!(
        (cpu.system.as_str(), cpu.shape.to_string().as_str()),
        ("cpu", "1024x128")
    );
    assert_eq!(cpu.unit, "CPI/s");
    assert!((cpu.sustained_rate.unwrap() - 461.508).abs() < 0.01);
    assert!((cpu.real_time_rate - 156.25).abs() < 1e-9);
    assert!(cpu.goals.is_empty() && !cpu.trials.is_empty());
    assert!(
        cpu.trials
            .iter()
            .all(|t| t.stage == Stage::Final && t.loss_ratio.is_none())
    );
    assert!(v2.searches[2].skipped.is_some());
    // Version 3: the frame shape was `cpi`, the deadline's period `cpi_duration_ms`.
    let v3 = read_results(&results.join("bisect-rate/default/bisect-rate.json")).unwrap();
    let first = &v3.searches[0];
    assert_eq!(first.shape.to_string(), "1024x128");
    assert_eq!(
        first.latency_budget,
        LatencyBudget::Deadline {
            frame_period: Duration::from_micros(6_400)
        }
    );
    assert_eq!(first.goals.len(), 2);
    let measured = first.trials[0].measurement.as_ref().unwrap();
    assert!(measured.post_frame_p99 > Duration::ZERO);
}
