//! Any graph run end to end through the generic workload: the spectrogram example
//! (`workloads/spectrogram/graph.yaml`, kernels in C) on a recording `kplace record` synthesizes,
//! replayed and streamed over UDP, every frame checked against a reference placement or golden
//! files; a deliberately wrong kernel caught with frame, tensor and index; and what a user can
//! get wrong, refused with the file and the reason. Every process is guarded and every wait
//! has a limit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kplace::report::run::RunReport;
use kplace_testkit::Guard;

const LIMIT: Duration = Duration::from_secs(120);
const GRAPH: &str = "workloads/spectrogram/graph.yaml";
const CPU: &str = "workloads/spectrogram/placements/cpu.yaml";
const CPU2: &str = "workloads/spectrogram/placements/cpu-2.yaml";
const BLOCKS_GRAPH: &str = "workloads/spectrogram/blocks/graph.yaml";
const BLOCKS_CPU: &str = "workloads/spectrogram/blocks/cpu.yaml";
const BEAMFORMER: &str = "workloads/beamformer/graph.yaml";
const BEAMFORMER_CPU: &str = "workloads/beamformer/placements/cpu.yaml";
const BEAMFORMER_CPU2: &str = "workloads/beamformer/placements/cpu-2.yaml";
const WEIGHTED: &str = "workloads/beamformer/weighted/graph.yaml";
const CHANNELIZER: &str = "workloads/channelizer/graph.yaml";

/// Paced streams run one at a time on a two-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn kplace() -> Command {
    let mut c = Command::new(kplace_testkit::kplace_bin!());
    c.current_dir(kplace_testkit::workspace());
    c
}

fn run(args: &[&str]) -> kplace_testkit::Ended {
    Guard::spawn(kplace().args(args)).wait(LIMIT)
}

/// A recording of `frames` frames of the spectrogram's source at 256x32 (tones at bins 32 and
/// -77 of 256), in a fresh directory.
fn record(frames: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tones.sigmf-data");
    let ended = run(&[
        "record",
        "--graph",
        GRAPH,
        "--cpi",
        "256x32",
        "--frames",
        &frames.to_string(),
        "--tone",
        "0.125:0.3",
        "--tone",
        "-0.30078125:0.1",
        "--noise",
        "0.01",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}", ended.stderr);
    assert!(
        ended.stdout.contains("recorded 5 frames") || frames != 5,
        "{}",
        ended.stdout
    );
    (dir, path)
}

fn report(path: &Path) -> RunReport {
    let text = std::fs::read_to_string(path).unwrap();
    kplace::report::read_json(&text, &path.display().to_string()).unwrap()
}

/// What a stream of a recording over UDP did: the receiver, the sender, the run's report.
struct Streamed {
    receiver: kplace_testkit::Ended,
    sender: kplace_testkit::Ended,
    report: PathBuf,
}

/// `kplace run RUN_ARGS` taking packets on a port of its own (a frame timeout of 1 s, 16
/// slots, ending 3 s after the last packet), its ready file and report in `dir`, then, once
/// it is ready, `kplace send SEND_ARGS` to it; both waited for.
fn stream(dir: &Path, run_args: &[&str], send_args: &[&str]) -> Streamed {
    let ready = dir.join("ready.json");
    let _ = std::fs::remove_file(&ready);
    let report = dir.join("run.json");
    let mut receiver = Guard::spawn(kplace().arg("run").args(run_args).args([
        "--source",
        "udp://127.0.0.1:0",
        "--frame-timeout",
        "1s",
        "--slots",
        "16",
        "--idle-timeout",
        "3s",
        "--ready-file",
        ready.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]));
    let port = receiver.wait_ready(&ready, LIMIT)[0];
    let dest = format!("127.0.0.1:{port}");
    let sender = run(&[&["send", "--dest", &dest], send_args].concat());
    let receiver = receiver.wait(LIMIT);
    Streamed {
        receiver,
        sender,
        report,
    }
}

/// The frames of an `.npy` file of f32 spectra `[frames, bins]`.
fn read_psd(path: &Path, bins: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let data = &bytes[10 + header..];
    assert_eq!(data.len() % (4 * bins), 0);
    data.chunks_exact(4 * bins)
        .map(|f| {
            f.chunks_exact(4)
                .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
                .collect()
        })
        .collect()
}

#[test]
fn a_recording_replays_checked_against_its_reference_and_its_golden_files() {
    let (dir, rec) = record(5);
    let rec = rec.to_str().unwrap();
    let sinks = dir.path().join("golden");
    let report_path = dir.path().join("run.json");
    let ended = run(&[
        "run",
        "--graph",
        GRAPH,
        "--placement",
        CPU2,
        "--cpi",
        "256x32",
        "--recording",
        rec,
        "--check",
        &format!("reference:{CPU}"),
        "--frames",
        "5",
        "--write-sinks",
        sinks.to_str().unwrap(),
        "--report",
        report_path.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended.stdout.contains(
            "verification PASSED: 5/5 frames reported, 5 passed, against reference placement spectrogram-cpu (psd rtol 1e-4, atol 0e0)"
        ),
        "{}",
        ended.stdout
    );
    let r = report(&report_path);
    assert!(r.verification.passed);
    assert_eq!(
        r.verification.against,
        "reference placement spectrogram-cpu"
    );
    assert_eq!(
        (r.frame_shape.to_string().as_str(), r.details.len()),
        ("256x32", 0)
    );
    assert_eq!(
        r.stages.iter().map(|s| s.launches).collect::<Vec<_>>(),
        [5 * 4, 5, 5]
    );
    // The spectrum is the recording's: its two tones are its two strongest bins, far above
    // the noise.
    let psd = read_psd(&sinks.join("psd.npy"), 256);
    assert_eq!(psd.len(), 5);
    for frame in &psd {
        let peak = |bins: std::ops::Range<usize>| {
            bins.max_by(|&a, &b| frame[a].total_cmp(&frame[b])).unwrap()
        };
        assert_eq!(peak(0..256), 32, "{frame:?}");
        assert_eq!(peak(100..256), 256 - 77, "{frame:?}");
        let mut sorted = frame.clone();
        sorted.sort_by(f32::total_cmp);
        let median = sorted[128];
        assert!(
            frame[32] > 1000.0 * median && frame[179] > 50.0 * median,
            "{frame:?}"
        );
    }
    // What one run wrote is the golden reference of the next, on another placement.
    let ended = run(&[
        "run",
        "--graph",
        GRAPH,
        "--placement",
        CPU,
        "--cpi",
        "256x32",
        "--recording",
        rec,
        "--check",
        &format!("golden:{}", sinks.display()),
        "--frames",
        "12",
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended
            .stdout
            .contains("12/12 frames reported, 12 passed, against golden files"),
        "{}",
        ended.stdout
    );
}

/// The spectrogram written with the block library (`workloads/spectrogram/blocks/`) computes
/// what the C kernels do: the C graph's sinks are the golden files the blocks' graph is checked
/// against, frame by frame; and a block configured differently (another window) fails that
/// check, so the agreement is not vacuous.
#[test]
fn the_spectrogram_written_with_blocks_matches_its_c_kernels() {
    let (dir, rec) = record(5);
    let rec = rec.to_str().unwrap();
    let golden = dir.path().join("golden");
    let ended = run(&[
        "run",
        "--graph",
        GRAPH,
        "--placement",
        CPU,
        "--cpi",
        "256x32",
        "--recording",
        rec,
        "--frames",
        "5",
        "--write-sinks",
        golden.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    let blocks = |extra: &[&str]| {
        let check = format!("golden:{}", golden.display());
        let mut args = vec![
            "run",
            "--graph",
            BLOCKS_GRAPH,
            "--placement",
            BLOCKS_CPU,
            "--cpi",
            "256x32",
            "--recording",
            rec,
            "--frames",
            "5",
            "--check",
            &check,
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let ended = blocks(&[]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended.stdout.contains(&format!(
            "verification PASSED: 5/5 frames reported, 5 passed, against golden files {} (psd \
             rtol 1e-4, atol 0e0)",
            golden.display()
        )),
        "{}",
        ended.stdout
    );
    let ended = blocks(&["--set", "window.window=hamming"]);
    assert!(
        !ended.status.success(),
        "{}\n{}",
        ended.stdout,
        ended.stderr
    );
    assert!(
        ended.stdout.contains("verification FAILED") && ended.stdout.contains("psd"),
        "{}\n{}",
        ended.stdout,
        ended.stderr
    );
}

/// An SDR's 8-bit samples end to end: a graph whose source is `ci8`, written with the block
/// library, is recorded (SigMF `ci8`), replayed and run; its spectrum peaks at the tone.
#[test]
fn eight_bit_samples_are_recorded_run_and_their_tone_found() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("ci8.yaml");
    std::fs::write(
        &graph,
        "name: ci8-spectrum\ndims: {N: 256, M: 32}\nsource: {tensor: iq, packet_axis: 0}\n\
         tensors:\n  - {name: iq, dtype: ci8, shape: [M, N]}\n  - {name: x, dtype: cf32, shape: [M, N]}\n\
         \x20 - {name: X, dtype: cf32, shape: [M, N]}\n  - {name: p, dtype: f32, shape: [M, N]}\n\
         \x20 - {name: psd, dtype: f32, shape: [N]}\n\
         stages:\n\
         \x20 - {name: convert, kernel: blocks.convert, inputs: [iq], outputs: [x], params: {scale: 0.0078740157}}\n\
         \x20 - {name: fft, kernel: blocks.fft, inputs: [x], outputs: [X]}\n\
         \x20 - {name: power, kernel: blocks.power, inputs: [X], outputs: [p]}\n\
         \x20 - {name: average, kernel: blocks.mean, inputs: [p], outputs: [psd]}\n\
         sinks: [psd]\n",
    )
    .unwrap();
    let placement = dir.path().join("cpu.yaml");
    std::fs::write(
        &placement,
        "name: ci8-cpu\nlibraries: {cpu: libkplace_blocks.so}\n\
         stages: {convert: cpu, fft: cpu, power: cpu, average: cpu}\nruntime: {slots: auto, workers: 1}\n",
    )
    .unwrap();
    let rec = dir.path().join("ci8.sigmf-data");
    let (graph, placement, rec_s) = (
        graph.to_str().unwrap(),
        placement.to_str().unwrap(),
        rec.to_str().unwrap(),
    );
    let ended = run(&[
        "record",
        "--graph",
        graph,
        "--frames",
        "3",
        "--tone",
        "0.125:0.5",
        "--noise",
        "0.02",
        "--out",
        rec_s,
    ]);
    assert!(ended.status.success(), "{}", ended.stderr);
    assert!(
        ended
            .stdout
            .contains("recorded 3 frames of ci8 [32, 256] (48.0 KiB)"),
        "{}",
        ended.stdout
    );
    let meta = std::fs::read_to_string(rec.with_extension("sigmf-meta")).unwrap();
    assert!(meta.contains("\"core:datatype\": \"ci8\""), "{meta}");
    let sinks = dir.path().join("sinks");
    let ended = run(&[
        "run",
        "--graph",
        graph,
        "--placement",
        placement,
        "--recording",
        rec_s,
        "--frames",
        "3",
        "--check",
        "none",
        "--write-sinks",
        sinks.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    let psd = read_psd(&sinks.join("psd.npy"), 256);
    assert_eq!(psd.len(), 3);
    for frame in &psd {
        let mut sorted = frame.clone();
        sorted.sort_by(f32::total_cmp);
        let median = sorted[128];
        assert!(frame[32] > 1000.0 * median, "{frame:?}");
        // Full scale is 127: a tone of amplitude 0.5 over 256 samples has power (0.5 * 256)^2.
        let want = (0.5f32 * 256.0).powi(2);
        assert!(
            (frame[32] / want - 1.0).abs() < 0.05,
            "{} vs {want}",
            frame[32]
        );
    }
}

/// Plane waves from -30 and 14.4775 degrees (amplitudes 0.25 and 0.1) on the beamformer
/// example's 8-channel array, `frames` frames at 250 kS/s per channel, in a fresh directory.
fn record_plane_waves(frames: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("array.sigmf-data");
    let ended = run(&[
        "record",
        "--graph",
        BEAMFORMER,
        "--frames",
        &frames.to_string(),
        "--sample-rate",
        "250e3",
        "--tone",
        "0.1:0.25:-30",
        "--tone",
        "-0.2:0.1:14.4775",
        "--noise",
        "0.01",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}", ended.stderr);
    (dir, path)
}

/// Runs `graph` on 4 frames of plane waves on two workers, checked against one, and returns
/// each frame's beam powers.
fn beam_powers(graph: &str) -> Vec<Vec<f32>> {
    let (dir, rec) = record_plane_waves(4);
    let sinks = dir.path().join("sinks");
    let ended = run(&[
        "run",
        "--graph",
        graph,
        "--placement",
        BEAMFORMER_CPU2,
        "--recording",
        rec.to_str().unwrap(),
        "--frames",
        "4",
        "--check",
        &format!("reference:{BEAMFORMER_CPU}"),
        "--write-sinks",
        sinks.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended.stdout.contains("verification PASSED: 4/4 frames reported, 4 passed, against reference placement beamformer-cpu"),
        "{}",
        ended.stdout
    );
    let beams = read_psd(&sinks.join("beam_power.npy"), 3);
    assert_eq!(beams.len(), 4);
    beams
}

/// The beamformer example (`workloads/beamformer/`, the block library only): each plane wave's
/// power is found in the beam pointing at it, the beam between them holds the noise alone, and
/// two workers with a split stage agree with one.
#[test]
fn the_beamformer_example_finds_each_plane_wave_in_its_beam() {
    for frame in beam_powers(BEAMFORMER) {
        // Power 0.25^2 and 0.1^2, plus the noise: 2 * 0.01^2 per channel, over 8 channels.
        let noise = 2.0 * 0.01f32.powi(2) / 8.0;
        assert!(
            (frame[0] / (0.0625 + noise) - 1.0).abs() < 0.02,
            "{frame:?}"
        );
        assert!((frame[2] / (0.01 + noise) - 1.0).abs() < 0.02, "{frame:?}");
        assert!(frame[1] < 2.0 * noise, "{frame:?}");
    }
}

/// The weighted beamformer example (`workloads/beamformer/weighted/`: its weights a constant
/// tensor from `weights.npy`, tapered): each look direction keeps its wave's power, on two
/// workers checked against one.
#[test]
fn the_weighted_beamformer_example_keeps_each_waves_power_in_its_beam() {
    for frame in beam_powers(WEIGHTED) {
        // Unit gain where each beam looks; the other wave 37.8 dB down, the noise negligible.
        // The beam between them is no null of a tapered array: 6.1 dB below the second wave.
        assert!((frame[0] / 0.0625 - 1.0).abs() < 0.02, "{frame:?}");
        assert!((frame[2] / 0.01 - 1.0).abs() < 0.02, "{frame:?}");
        assert!(frame[1] > 0.002 && frame[1] < 0.0032, "{frame:?}");
    }
}

/// `blocks.combine` given the steering weights `blocks.beamform` computes (written by this test
/// as NumPy would, beside a copy of the weighted graph) gives the beamformer's output: the
/// constant reaches every frame's launches, checked against golden files of the other graph.
#[test]
fn steering_weights_as_a_constant_tensor_give_the_beamformers_output() {
    let (dir, rec) = record_plane_waves(4);
    let golden = dir.path().join("golden");
    let rec = rec.to_str().unwrap();
    let wrote = run(&[
        "run",
        "--graph",
        BEAMFORMER,
        "--placement",
        BEAMFORMER_CPU,
        "--recording",
        rec,
        "--frames",
        "4",
        "--write-sinks",
        golden.to_str().unwrap(),
    ]);
    assert!(wrote.status.success(), "{}", wrote.stderr);
    let graph = dir.path().join("graph.yaml");
    let text = std::fs::read_to_string(kplace_testkit::workspace().join(WEIGHTED)).unwrap();
    std::fs::write(&graph, text).unwrap();
    let weights: Vec<u8> = [-30.0f64, 0.0, 14.4775]
        .iter()
        .flat_map(|a| {
            (0..8).flat_map(move |c| {
                let phase = -std::f64::consts::PI * f64::from(c) * a.to_radians().sin();
                [(phase.cos() / 8.0) as f32, (phase.sin() / 8.0) as f32]
            })
        })
        .flat_map(f32::to_le_bytes)
        .collect();
    let npy = kplace_testkit::npy::bytes("<c8", "(3, 8)", &weights);
    std::fs::write(dir.path().join("weights.npy"), npy).unwrap();
    let ended = run(&[
        "run",
        "--graph",
        graph.to_str().unwrap(),
        "--placement",
        BEAMFORMER_CPU2,
        "--recording",
        rec,
        "--frames",
        "4",
        "--check",
        &format!("golden:{}", golden.display()),
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended
            .stdout
            .contains("verification PASSED: 4/4 frames reported, 4 passed"),
        "{}",
        ended.stdout
    );
    // A weights file of another shape is refused naming the file, the tensor and the line.
    std::fs::write(
        dir.path().join("weights.npy"),
        kplace_testkit::npy::bytes("<c8", "(24,)", &weights),
    )
    .unwrap();
    let refused = run(&[
        "plan",
        "--graph",
        graph.to_str().unwrap(),
        "--placement",
        BEAMFORMER_CPU,
    ]);
    assert!(!refused.status.success());
    assert!(
        refused.stderr.contains("graph.yaml:19:")
            && refused.stderr.contains("tensor weights (cf32 [3, 8])")
            && refused
                .stderr
                .contains("weights.npy: shape [24], but the tensor is stored as [3, 8]"),
        "{}",
        refused.stderr
    );
}

/// The channelizer example (`workloads/channelizer/`: the block library, a stateful polyphase
/// channelizer, its prototype read from an `.npy` file): a tone at 3/16 cycles per sample fills
/// channel 3, one at -5/16 channel 11, the other channels hold only the noise, and two workers
/// agree with one.
#[test]
fn the_channelizer_example_puts_each_tone_in_its_channel() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("sdr.sigmf-data");
    let rec = rec.to_str().unwrap();
    let recorded = run(&[
        "record",
        "--graph",
        CHANNELIZER,
        "--frames",
        "6",
        "--sample-rate",
        "1e6",
        "--tone",
        "0.1875:0.5",
        "--tone",
        "-0.3125:0.25",
        "--noise",
        "0.001",
        "--out",
        rec,
    ]);
    assert!(recorded.status.success(), "{}", recorded.stderr);
    let sinks = dir.path().join("sinks");
    let ended = run(&[
        "run",
        "--graph",
        CHANNELIZER,
        "--placement",
        "workloads/channelizer/placements/cpu-2.yaml",
        "--recording",
        rec,
        "--frames",
        "6",
        "--check",
        "reference:workloads/channelizer/placements/cpu.yaml",
        "--write-sinks",
        sinks.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended
            .stdout
            .contains("verification PASSED: 6/6 frames reported, 6 passed")
            && ended.stdout.contains("channelize: stateful, 0 frames lost"),
        "{}",
        ended.stdout
    );
    let frames = read_psd(&sinks.join("channel_power.npy"), 16);
    // From the second frame on, the prototype's 128 taps hold samples of the stream only.
    for frame in &frames[1..] {
        assert!((frame[3] / 0.25 - 1.0).abs() < 0.01, "{frame:?}");
        assert!((frame[11] / 0.0625 - 1.0).abs() < 0.01, "{frame:?}");
        let others = frame
            .iter()
            .enumerate()
            .filter(|(k, _)| ![3, 11].contains(k));
        for (k, &p) in others {
            assert!(p < 1e-5, "channel {k} holds {p}: {frame:?}");
        }
    }
}

/// `kplace run --control FILE`: a gain changed by editing a file while the channelizer
/// streams at its real rate. The report says from which frame it applied; every frame before
/// it is the unchanged run's, every frame from the one after it is four times the unchanged
/// run's power, exactly (the scale doubles, and powers of two scale floats exactly); the frame
/// at the boundary mixes the two through the channelizer's carried history.
#[test]
fn a_control_file_changes_a_gain_while_the_stream_goes_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("sdr.sigmf-data");
    let rec = rec.to_str().unwrap();
    let frames = "400";
    let recorded = run(&[
        "record",
        "--graph",
        CHANNELIZER,
        "--frames",
        frames,
        "--sample-rate",
        "1e6",
        "--tone",
        "0.1875:0.5",
        "--noise",
        "0.001",
        "--out",
        rec,
    ]);
    assert!(recorded.status.success(), "{}", recorded.stderr);
    let cpu = "workloads/channelizer/placements/cpu.yaml";
    let unchanged = dir.path().join("unchanged");
    let replayed = run(&[
        "run",
        "--graph",
        CHANNELIZER,
        "--placement",
        cpu,
        "--recording",
        rec,
        "--frames",
        frames,
        "--check",
        "none",
        "--write-sinks",
        unchanged.to_str().unwrap(),
    ]);
    assert!(replayed.status.success(), "{}", replayed.stderr);
    let control = dir.path().join("control.txt");
    let (ready, report_path) = (dir.path().join("ready.json"), dir.path().join("run.json"));
    let sinks = dir.path().join("sinks");
    let mut receiver = Guard::spawn(kplace().args([
        "run",
        "--graph",
        CHANNELIZER,
        "--placement",
        cpu,
        "--recording",
        rec,
        "--frames",
        frames,
        "--check",
        "none",
        "--source",
        "udp://127.0.0.1:0",
        "--slots",
        "16",
        "--frame-timeout-ms",
        "1000",
        "--idle-timeout-s",
        "3",
        "--control",
        control.to_str().unwrap(),
        "--write-sinks",
        sinks.to_str().unwrap(),
        "--ready-file",
        ready.to_str().unwrap(),
        "--report",
        report_path.to_str().unwrap(),
    ]));
    let port = receiver.wait_ready(&ready, LIMIT)[0];
    // 400 frames of 4096 samples at 1 MS/s: 1.6 s of stream; the gain changes 0.3 s in.
    let sender = Guard::spawn(kplace().args([
        "send",
        "--dest",
        &format!("127.0.0.1:{port}"),
        "--recording",
        rec,
        "--frames",
        frames,
    ]));
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(
        &control,
        "# twice the gain\nconvert.scale = 6.103515625e-5\n",
    )
    .unwrap();
    let sent = sender.wait(LIMIT);
    assert!(sent.status.success(), "{}", sent.stderr);
    let ended = receiver.wait(LIMIT);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    let r = report(&report_path);
    assert_eq!(r.changes.len(), 1, "{:?}", r.changes);
    let change = &r.changes[0];
    assert_eq!(change.refused, None);
    assert_eq!(
        change.origin,
        format!("control file {}, line 2", control.display())
    );
    let from = change.from_frame.expect("frames began after the change") as usize;
    assert!(
        ended.stdout.contains(&format!(
            "stage convert took scale=6.103515625e-5 from frame {from} on"
        )),
        "{}",
        ended.stdout
    );
    let before = read_psd(&unchanged.join("channel_power.npy"), 16);
    let after = read_psd(&sinks.join("channel_power.npy"), 16);
    assert_eq!(after.len(), 400, "every frame arrived");
    assert!(
        from > 0 && from < 399,
        "the change landed mid-stream: frame {from}"
    );
    for (k, (a, b)) in after.iter().zip(&before).enumerate() {
        if k < from {
            assert_eq!(a, b, "frame {k}, before the change");
        } else if k > from {
            let four: Vec<f32> = b.iter().map(|v| 4.0 * v).collect();
            assert_eq!(a, &four, "frame {k}, after the change");
        }
    }
}

/// The beamformer example streamed over UDP at its real per-channel rate (250 kS/s per
/// channel, 64 snapshots a packet: a packet every 256 us) into two workers, every frame
/// checked against one worker's.
#[test]
fn the_beamformer_example_streams_at_its_per_channel_rate() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, rec) = record_plane_waves(4);
    let rec = rec.to_str().unwrap();
    let check = format!("reference:{BEAMFORMER_CPU}");
    let Streamed {
        receiver: ended,
        sender: sent,
        report: report_path,
    } = stream(
        dir.path(),
        &[
            "--graph",
            BEAMFORMER,
            "--placement",
            BEAMFORMER_CPU2,
            "--recording",
            rec,
            "--check",
            &check,
            "--frames",
            "40",
        ],
        &["--recording", rec, "--frames", "40"],
    );
    assert!(sent.status.success(), "{}", sent.stderr);
    assert!(
        sent.stderr.contains("a packet every 256.000 us"),
        "{}",
        sent.stderr
    );
    assert!(
        sent.stdout.contains("sent 40 frames, 640 packets"),
        "{}",
        sent.stdout
    );
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    let r = report(&report_path);
    assert!(r.verification.passed, "{:?}", r.verification);
    assert_eq!(r.verification.frames_passed, 40);
    let ingest = r.ingest.unwrap();
    assert_eq!((ingest.packets, ingest.complete_frames), (640, 40));
}

#[test]
fn a_recording_streams_over_udp_checked_frame_by_frame() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, rec) = record(4);
    let rec = rec.to_str().unwrap();
    let check = format!("reference:{CPU}");
    let Streamed {
        receiver: ended,
        sender: sent,
        report: report_path,
    } = stream(
        dir.path(),
        &[
            "--graph",
            GRAPH,
            "--placement",
            CPU,
            "--cpi",
            "256x32",
            "--recording",
            rec,
            "--check",
            &check,
            "--frames",
            "40",
            "--first-frame-id",
            "7",
        ],
        &[
            "--recording",
            rec,
            "--frames",
            "40",
            "--rate",
            "200",
            "--first-frame-id",
            "7",
        ],
    );
    assert!(sent.status.success(), "{}", sent.stderr);
    assert!(
        sent.stdout.contains("sent 40 frames, 1280 packets"),
        "{}",
        sent.stdout
    );
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    let r = report(&report_path);
    assert!(r.verification.passed, "{:?}", r.verification);
    assert_eq!(r.verification.frames_passed, 40);
    let ingest = r.ingest.unwrap();
    assert_eq!((ingest.packets, ingest.complete_frames), (1280, 40));
}

#[test]
fn a_wrong_kernel_is_caught_with_its_frame_tensor_and_index() {
    let (dir, rec) = record(3);
    let fault = kplace_testkit::build_c_library(
        "workloads/spectrogram/kernels/spectrogram.c",
        "spectrogram_fault",
        &["SPECTROGRAM_FAULT_BIN=37"],
    );
    let placement = dir.path().join("fault.yaml");
    std::fs::write(
        &placement,
        format!(
            "name: fault\nlibraries: {{cpu: {}}}\nstages: {{fft: cpu, power: cpu, average: cpu}}\n",
            fault.display()
        ),
    )
    .unwrap();
    let report_path = dir.path().join("run.json");
    let ended = run(&[
        "run",
        "--graph",
        GRAPH,
        "--placement",
        placement.to_str().unwrap(),
        "--cpi",
        "256x32",
        "--recording",
        rec.to_str().unwrap(),
        "--check",
        &format!("reference:{CPU}"),
        "--frames",
        "6",
        "--report",
        report_path.to_str().unwrap(),
    ]);
    assert_eq!(
        ended.status.code(),
        Some(1),
        "{}\n{}",
        ended.stdout,
        ended.stderr
    );
    assert!(
        ended
            .stdout
            .contains("verification FAILED: 6/6 frames reported, 0 passed"),
        "{}",
        ended.stdout
    );
    assert!(
        ended.stdout.contains("  frame 0 psd[37]: "),
        "{}",
        ended.stdout
    );
    assert!(
        ended
            .stdout
            .contains("6 frames differ from reference placement spectrogram-cpu: 6 elements"),
        "{}",
        ended.stdout
    );
    let v = report(&report_path).verification;
    assert!(!v.passed);
    assert_eq!(v.frames_failed, 6);
    let at: Vec<(u64, &str, u64)> = v
        .mismatches
        .iter()
        .map(|m| (m.frame, m.tensor.as_str(), m.index))
        .collect();
    assert_eq!(at, (0..6).map(|f| (f, "psd", 37)).collect::<Vec<_>>());
    let m = &v.mismatches[0];
    let (got, want): (f64, f64) = (m.got.parse().unwrap(), m.want.parse().unwrap());
    assert!((got / want - 1.01).abs() < 1e-4, "{m:?}");
}

#[test]
fn what_a_user_gets_wrong_is_refused_with_the_file_and_the_reason() {
    let (dir, rec) = record(2);
    let rec = rec.to_str().unwrap();
    let base = ["run", "--graph", GRAPH, "--placement", CPU, "--frames", "2"];
    let refused = |extra: &[&str], phrase: &str| {
        let ended = run(&[&base[..], extra].concat());
        assert_eq!(ended.status.code(), Some(2), "{extra:?}: {}", ended.stderr);
        assert!(ended.stderr.contains(phrase), "{extra:?}: {}", ended.stderr);
    };
    refused(
        &[],
        "workloads/spectrogram/graph.yaml names no workload: run it on a recording",
    );
    // The recording is 256x32: a shape bound otherwise on the command line is refused.
    refused(
        &["--cpi", "512x32", "--recording", rec],
        "its frames are [32, 256] (kplace:frame_shape), but the graph's source iq is [32, 512]",
    );
    refused(
        &["--shape", "256x32x2", "--recording", rec],
        "--shape 256x32x2: graph workloads/spectrogram/graph.yaml: a frame shape of 3 dimensions for the source iq, which has 2 ([M, N])",
    );
    refused(
        &["--cpi", "256x32", "--set", "N=512", "--recording", rec],
        "--shape 256x32 makes N 256, but --set N=512: give one",
    );
    refused(
        &["--set", "K=4", "--recording", rec],
        "the graph has no dimension K to set (it has: M, N)",
    );
    refused(
        &[
            "--cpi",
            "256x32",
            "--recording",
            rec,
            "--check",
            "golden:/nonexistent",
        ],
        "/nonexistent/psd.npy",
    );
    refused(
        &[
            "--cpi",
            "256x32",
            "--recording",
            rec,
            "--check",
            "referee:x",
        ],
        "expected reference:PLACEMENT, golden:DIR or none",
    );
    refused(
        &["--cpi", "256x32", "--recording", rec, "--detections", "-"],
        "--detections: workload recording writes no results of its own; write every sink tensor with --write-sinks DIR",
    );
    refused(
        &["--recording", rec, "--pfa", "1e-6"],
        "workload option pfa is not an option of workload recording, which takes none",
    );
    let raw = dir.path().join("short.raw");
    std::fs::write(&raw, [0u8; 1000]).unwrap();
    refused(
        &["--cpi", "256x32", "--recording", raw.to_str().unwrap()],
        "1000 bytes is not a whole number of frames",
    );
    let ended = run(&[
        "send",
        "--dest",
        "127.0.0.1:9",
        "--recording",
        raw.to_str().unwrap(),
    ]);
    assert!(
        ended.stderr.contains("no SigMF metadata"),
        "{}",
        ended.stderr
    );
    // A tolerance on a sink that is not one, or on an integer tensor.
    let graph = std::fs::read_to_string(kplace_testkit::workspace().join(GRAPH)).unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        graph.replace("psd: {rtol: 1.0e-4}", "power: {rtol: 1.0e-4}"),
    )
    .unwrap();
    let ended = run(&["plan", "--graph", bad.to_str().unwrap(), "--placement", CPU]);
    assert!(
        ended.stderr.contains("checks: power is not a sink"),
        "{}",
        ended.stderr
    );
}

/// The filtered beamformer's recording of `kplace record --graph beamformer/filtered --set
/// C=4 --frames 8 --sample-rate 250e3`, in a fresh directory: the directory, the data file and
/// the metadata file.
fn record_filtered_c4() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("c4.sigmf-data");
    let ended = run(&[
        "record",
        "--graph",
        "beamformer/filtered",
        "--set",
        "C=4",
        "--frames",
        "8",
        "--sample-rate",
        "250e3",
        "--out",
        data.to_str().unwrap(),
    ]);
    assert!(ended.status.success(), "{}", ended.stderr);
    let meta = dir.path().join("c4.sigmf-meta");
    (dir, data, meta)
}

/// `kplace run` of the filtered beamformer on the recording `data`, which must be refused as
/// an input error saying `phrase`, without running.
fn refused_run(data: &str, phrase: &str) {
    let ended = run(&[
        "run",
        "--graph",
        "beamformer/filtered",
        "--placement",
        "cpu",
        "--recording",
        data,
        "--frames",
        "8",
    ]);
    assert_eq!(ended.status.code(), Some(2), "{phrase}: {}", ended.stderr);
    assert!(ended.stderr.contains(phrase), "{phrase}: {}", ended.stderr);
    assert!(!ended.stdout.contains("PASSED"), "{}", ended.stdout);
}

/// The reproduction: a recording whose metadata says `core:sample_rate: 1e-300`
/// panicked (`cannot convert float seconds to Duration`). A sample rate whose frame period is
/// out of 1 ns to 1 day is an input error naming the metadata file and the field, and `kplace
/// record` refuses to write one.
#[test]
fn a_sample_rate_out_of_range_is_refused_naming_the_file_and_the_field() {
    let (dir, data, meta) = record_filtered_c4();
    let written = std::fs::read_to_string(&meta).unwrap();
    for rate in ["1e-300", "1e300", "0", "-250000"] {
        std::fs::write(&meta, written.replace("250000.0", rate)).unwrap();
        refused_run(
            data.to_str().unwrap(),
            &format!(
                "recording {}: core:sample_rate {:?} is out of range: a frame of",
                meta.display(),
                rate.parse::<f64>().unwrap()
            ),
        );
    }
    let other = dir.path().join("other.sigmf-data");
    let ended = run(&[
        "record",
        "--graph",
        "beamformer/filtered",
        "--frames",
        "1",
        "--sample-rate",
        "1e-300",
        "--out",
        other.to_str().unwrap(),
    ]);
    assert_eq!(ended.status.code(), Some(2), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("--sample-rate 1e-300 is out of range: a frame of"),
        "{}",
        ended.stderr
    );
    assert!(!other.exists());
}

/// A graph of the user's own dimensions (a beamformer's channels `C` by snapshots `S`, here
/// the spectrogram's kernels under those names, with values no workload defaults to) runs with
/// no shape on the command line: at the graph file's shape, and at the shape a recording's
/// metadata states, which binds what the command line leaves to the file.
#[test]
fn a_graph_of_its_own_dimensions_runs_at_the_file_s_shape_or_the_recording_s() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = kplace_testkit::workspace();
    let text = std::fs::read_to_string(root.join(GRAPH))
        .unwrap()
        .replace("N: 1024", "C: 64")
        .replace("M: 128", "S: 48")
        .replace("[M, N]", "[S, C]")
        .replace("[N]", "[C]");
    assert!(!text.contains("[M") && text.contains("C: 64"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("beams.yaml");
    std::fs::write(&graph, text).unwrap();
    let graph = graph.to_str().unwrap();
    let check = format!("reference:{CPU}");
    for (extra, shape) in [(&[][..], "64x48"), (&["--set", "C=32"][..], "32x48")] {
        let rec = dir.path().join(format!("{shape}.sigmf-data"));
        let rec = rec.to_str().unwrap();
        let recorded = run(&[
            &["record", "--graph", graph, "--frames", "3", "--out", rec],
            extra,
        ]
        .concat());
        assert!(recorded.status.success(), "{}", recorded.stderr);
        let want = format!("[{}] (", shape.rsplit('x').collect::<Vec<_>>().join(", "));
        assert!(
            recorded.stdout.contains(&want),
            "{want}: {}",
            recorded.stdout
        );
        let report_path = dir.path().join(format!("{shape}.json"));
        let ended = run(&[
            "run",
            "--graph",
            graph,
            "--placement",
            CPU2,
            "--recording",
            rec,
            "--check",
            &check,
            "--frames",
            "6",
            "--report",
            report_path.to_str().unwrap(),
        ]);
        assert!(ended.status.success(), "{shape}: {}", ended.stderr);
        assert!(
            ended
                .stderr
                .contains(&format!("6 frames of {shape} from recording")),
            "{shape}: {}",
            ended.stderr
        );
        let report = report(&report_path);
        assert!(report.verification.passed);
        assert_eq!(report.verification.frames_passed, 6);
        assert_eq!(report.frame_shape.to_string(), shape);
    }
}

/// A source with a channel axis (an array's channels, sampled at once) is recorded as plane
/// waves with its channel count in the metadata, paced by the per-channel sample rate (one
/// snapshot of every channel per packet: a packet each sample period, not each 64), and runs
/// checked against its reference; a graph that does not state the axis refuses the recording.
#[test]
fn an_array_source_is_recorded_paced_and_run_per_channel() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = kplace_testkit::workspace();
    let plain = std::fs::read_to_string(root.join(GRAPH))
        .unwrap()
        .replace("N: 1024", "C: 64")
        .replace("M: 128", "S: 48")
        .replace("[M, N]", "[S, C]")
        .replace("[N]", "[C]");
    let array = plain.replace("  packet_axis: 0", "  channel_axis: 1\n  packet_axis: 0");
    assert_ne!(plain, array, "the source states its channel axis");
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(path("array.yaml"), array).unwrap();
    std::fs::write(path("plain.yaml"), plain).unwrap();
    let rec = path("array.sigmf-data");
    let recorded = run(&[
        "record",
        "--graph",
        &path("array.yaml"),
        "--frames",
        "3",
        "--sample-rate",
        "1e6",
        "--tone",
        "0.1:0.3:25",
        "--out",
        &rec,
    ]);
    assert!(recorded.status.success(), "{}", recorded.stderr);
    let meta = std::fs::read_to_string(path("array.sigmf-meta")).unwrap();
    assert!(meta.contains("\"core:num_channels\": 64"), "{meta}");
    assert!(meta.contains("0.1:0.3:25"), "{meta}");

    // The sender's default pace: 64 channels at 1 MS/s each, one snapshot per packet.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = sink.local_addr().unwrap().to_string();
    let sent = run(&[
        "send",
        "--dest",
        &dest,
        "--recording",
        &rec,
        "--frames",
        "2",
    ]);
    assert!(sent.status.success(), "{}", sent.stderr);
    assert!(
        sent.stderr.contains("a packet every 1.000 us"),
        "{}",
        sent.stderr
    );

    let ended = run(&[
        "run",
        "--graph",
        &path("array.yaml"),
        "--placement",
        CPU2,
        "--recording",
        &rec,
        "--check",
        &format!("reference:{CPU}"),
        "--frames",
        "6",
        "--report",
        &path("array.json"),
    ]);
    assert!(ended.status.success(), "{}", ended.stderr);
    let report = report(Path::new(&path("array.json")));
    assert!(report.verification.passed, "{:?}", report.verification);
    assert_eq!(report.verification.frames_passed, 6);

    let e = run(&[
        "run",
        "--graph",
        &path("plain.yaml"),
        "--placement",
        CPU,
        "--recording",
        &rec,
        "--frames",
        "1",
    ]);
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(
        e.stderr.contains("holds 64 channels (core:num_channels)")
            && e.stderr.contains("channel_axis"),
        "{}",
        e.stderr
    );
}

/// The case: with `--check reference:` (and `golden:`), a stream that lost frames
/// reported the frames after the loss as differing, though the FIR filled the loss exactly as
/// its rule says. Now they are judged against the stream replayed with the same frames lost:
/// none fails, the lost frames are listed, and each counts once, as lost.
#[test]
fn frames_after_a_loss_in_a_stateful_stream_are_judged_with_that_loss() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("array.sigmf-data");
    let rec = rec.to_str().unwrap();
    let recorded = run(&[
        "record",
        "--graph",
        "beamformer/filtered",
        "--frames",
        "60",
        "--sample-rate",
        "250e3",
        "--tone",
        "0.02:0.25:-30",
        "--noise",
        "0.01",
        "--out",
        rec,
    ]);
    assert!(recorded.status.success(), "{}", recorded.stderr);
    // Golden files of the whole stream, as a replay on the CPU writes them.
    let golden = dir.path().join("golden");
    let written = run(&[
        "run",
        "--graph",
        "beamformer/filtered",
        "--placement",
        "cpu",
        "--recording",
        rec,
        "--frames",
        "60",
        "--write-sinks",
        golden.to_str().unwrap(),
    ]);
    assert!(written.status.success(), "{}", written.stderr);
    for check in [
        "reference:cpu".to_string(),
        format!("golden:{}", golden.display()),
    ] {
        let Streamed {
            receiver: ended,
            sender: sent,
            report: report_path,
        } = stream(
            dir.path(),
            &[
                "--graph",
                "beamformer/filtered",
                "--placement",
                "cpu-2",
                "--recording",
                rec,
                "--check",
                &check,
                "--frames",
                "60",
            ],
            &[
                "--recording",
                rec,
                "--frames",
                "60",
                "--drop",
                "20:0",
                "--drop",
                "40:1",
            ],
        );
        assert!(sent.status.success(), "{}", sent.stderr);
        let said = format!("{}\n{}", ended.stdout, ended.stderr);
        assert_eq!(ended.status.code(), Some(1), "frames were lost: {said}");
        let v = report(&report_path).verification;
        // However many more a loaded machine loses, none of the frames reported fails.
        assert_eq!(v.frames_failed, 0, "{check}: {v:?}\n{said}");
        assert_eq!(v.frames_passed, v.frames_reported, "{check}: {v:?}");
        assert_eq!(v.frames_missing, 60 - v.frames_reported, "{check}: {v:?}");
        assert!(
            v.lost_frames.contains(&20) && v.lost_frames.contains(&40),
            "{check}: {v:?}"
        );
        assert!(v.frames_rejudged >= 2, "a frame after each loss: {v:?}");
        assert_eq!(v.reasons.len(), 1, "only the frames lost: {:?}", v.reasons);
        assert!(said.contains("frames lost: "), "{said}");
        assert!(
            said.contains("replayed with the same frames lost"),
            "{said}"
        );
    }
}

/// The reproduction: metadata that is there but cannot be read (a link to itself, a
/// FIFO, a directory) was taken for none, and the data ran with the graph's shape, PASSED; and
/// a FIFO as the data was "0 bytes". Each is an input error naming the file and what it is,
/// and nothing waits on a FIFO.
#[test]
fn a_recording_whose_files_are_no_regular_files_is_refused_naming_them() {
    let (_dir, data, meta) = record_filtered_c4();
    let (data_s, meta_s) = (data.to_str().unwrap(), meta.display().to_string());
    let written = std::fs::read_to_string(&meta).unwrap();
    let mkfifo = |path: &Path| {
        let status = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success(), "mkfifo {}", path.display());
    };
    // `ln -sf c4.sigmf-meta c4.sigmf-meta`
    std::fs::remove_file(&meta).unwrap();
    std::os::unix::fs::symlink("c4.sigmf-meta", &meta).unwrap();
    refused_run(
        data_s,
        &format!("recording {meta_s}: a loop of symbolic links, not a regular file"),
    );
    std::fs::remove_file(&meta).unwrap();
    mkfifo(&meta);
    refused_run(
        data_s,
        &format!("recording {meta_s}: a FIFO, not a regular file"),
    );
    std::fs::remove_file(&meta).unwrap();
    std::fs::create_dir(&meta).unwrap();
    refused_run(
        data_s,
        &format!("recording {meta_s}: a directory, not a regular file"),
    );
    std::fs::remove_dir(&meta).unwrap();
    // The metadata as written, and a FIFO as the data: refused, never opened to wait on.
    std::fs::write(&meta, &written).unwrap();
    std::fs::remove_file(&data).unwrap();
    mkfifo(&data);
    refused_run(
        data_s,
        &format!("recording {data_s}: a FIFO, not a regular file"),
    );
}

/// The case: `kplace plan` on a recording's graph sized `slots: auto` at a default 10
/// ms a frame (5 slots) while the run on the recording used 25. `plan --recording` binds the
/// graph to the recording and sizes the slots at its frame period, as the run does: 256x32
/// samples at 4.096 MS/s are a frame every 2 ms, 25 frames in 50 ms of stream.
#[test]
fn plan_with_a_recording_sizes_the_slots_as_the_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("fast.sigmf-data");
    let rec = rec.to_str().unwrap();
    let ended = run(&[
        "record",
        "--graph",
        GRAPH,
        "--cpi",
        "256x32",
        "--frames",
        "4",
        "--sample-rate",
        "4.096e6",
        "--tone",
        "0.125:0.3",
        "--out",
        rec,
    ]);
    assert!(ended.status.success(), "{}", ended.stderr);
    let plan = run(&[
        "plan",
        "--graph",
        GRAPH,
        "--placement",
        CPU2,
        "--recording",
        rec,
    ]);
    assert!(plan.status.success(), "{}", plan.stderr);
    assert!(
        plan.stdout
            .contains("25 slots (auto: 50 ms of stream at 2.000 ms a frame, 4 to 64)")
            && plan.stdout.contains("ci16[32, 256]"),
        "{}",
        plan.stdout
    );
    let ran = run(&[
        "-v",
        "run",
        "--graph",
        GRAPH,
        "--placement",
        CPU2,
        "--recording",
        rec,
        "--frames",
        "4",
    ]);
    assert!(ran.status.success(), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("25 frame slots built"),
        "{}",
        ran.stderr
    );
    // Without the recording, the plan cannot know the stream's rate, and says what it assumed.
    let plan = run(&["plan", "--graph", GRAPH, "--placement", CPU2]);
    assert!(
        plan.stdout.contains("at 10.000 ms a frame")
            && plan.stderr.contains(
                "slots: auto sized at 10 ms a frame, a default: the graph's stream has no rate of \
                 its own here; give --recording FILE"
            ),
        "{}{}",
        plan.stdout,
        plan.stderr
    );
}
