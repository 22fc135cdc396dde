//! The SDR user's chain, `workloads/sdr/graph.yaml`, written with the block library alone
//! (convert, a 63-tap decimating FIR carrying its history, an FFT along time, the power, the
//! mean over the channel axis), streamed over UDP from a recording of 2,000 frames with three
//! frames dropped on the way, on one worker and on two. Every frame written is compared with
//! a reference computed here another way, in double: the whole stream filtered by the FIR's
//! definition (the lost frames silence, as docs/graphs.md promises), every fourth sample kept,
//! a DFT by its definition, the power averaged over the channels. The frame after each loss is
//! shown to need that silence, and both runs agree bit for bit on every frame both wrote. An
//! axis a block's input lacks is refused when the run is planned, naming the stage.

use std::collections::BTreeSet;
use std::f64::consts::TAU;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kplace_testkit::Guard;

const LIMIT: Duration = Duration::from_secs(180);
const GRAPH: &str = "workloads/sdr/graph.yaml";
const FRAMES: usize = 2000;
const DROPPED: [usize; 3] = [500, 1000, 1500];
/// The graph's dimensions: channels, samples per channel in a frame, decimation, bins.
const C: usize = 4;
const SAMPLES: usize = 256;
const D: usize = 4;
const S: usize = SAMPLES / D;

fn kplace() -> Command {
    let mut c = Command::new(kplace_testkit::kplace_bin!());
    c.current_dir(kplace_testkit::workspace());
    c
}

/// The values of an `.npy` file of f32 or cf32 (as pairs of f32).
fn npy_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..]
        .chunks_exact(4)
        .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

/// The recording's samples, channel by channel interleaved (`x[n * C + c]`), full scale 1.
fn recording(path: &Path) -> Vec<(f64, f64)> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len(), FRAMES * SAMPLES * C * 4);
    bytes
        .chunks_exact(4)
        .map(|iq| {
            let i = i16::from_le_bytes([iq[0], iq[1]]);
            let q = i16::from_le_bytes([iq[2], iq[3]]);
            (f64::from(i) / 32768.0, f64::from(q) / 32768.0)
        })
        .collect()
}

/// The FIR's taps, as the graph reads them from `lowpass.npy`.
fn taps() -> Vec<f64> {
    let path = kplace_testkit::workspace().join("workloads/sdr/lowpass.npy");
    npy_f32(&path).into_iter().map(f64::from).collect()
}

/// Frame `f`'s filtered samples `[S, C]` and spectrum `[S]`, by the definitions, from the
/// stream `x` with the frames in `silent` replaced by zeros.
fn reference(
    x: &[(f64, f64)],
    h: &[f64],
    silent: &BTreeSet<usize>,
    f: usize,
) -> (Vec<(f64, f64)>, Vec<f64>) {
    let sample = |n: isize, c: usize| -> (f64, f64) {
        if n < 0 || silent.contains(&(n as usize / SAMPLES)) {
            (0.0, 0.0)
        } else {
            x[n as usize * C + c]
        }
    };
    let mut filtered = vec![(0.0, 0.0); S * C];
    for m in 0..S {
        let newest = (f * SAMPLES + m * D) as isize;
        for c in 0..C {
            let (mut re, mut im) = (0.0, 0.0);
            for (k, &tap) in h.iter().enumerate() {
                let (xr, xi) = sample(newest - k as isize, c);
                re += tap * xr;
                im += tap * xi;
            }
            filtered[m * C + c] = (re, im);
        }
    }
    let turns: Vec<(f64, f64)> = (0..S)
        .map(|k| (-TAU * k as f64 / S as f64).sin_cos())
        .collect();
    let spectrum = (0..S)
        .map(|bin| {
            let power: f64 = (0..C)
                .map(|c| {
                    let (mut re, mut im) = (0.0, 0.0);
                    for (s, &(yr, yi)) in filtered.iter().skip(c).step_by(C).enumerate() {
                        let (sin, cos) = turns[bin * s % S];
                        re += yr * cos - yi * sin;
                        im += yr * sin + yi * cos;
                    }
                    re * re + im * im
                })
                .sum();
            power / C as f64
        })
        .collect();
    (filtered, spectrum)
}

/// What one streamed run wrote: the frame ids in the order of the sink files' rows, and the
/// rows of `filtered` (cf32 `[S, C]`) and `psd` (f32 `[S]`).
struct Written {
    frames: Vec<usize>,
    filtered: Vec<f32>,
    psd: Vec<f32>,
}

/// Streams the recording to `kplace run` on `placement` over UDP, frames `DROPPED` losing a
/// packet on the way, every completed frame's sinks written.
fn stream(dir: &Path, recording: &Path, placement: &str) -> Written {
    let out = dir.join(placement);
    let ready = out.join("ready.json");
    let done = out.join("done.csv");
    std::fs::create_dir_all(&out).unwrap();
    let path = |p: &PathBuf| p.to_str().unwrap().to_string();
    let frames = FRAMES.to_string();
    let mut receiver = Guard::spawn(kplace().args([
        "run",
        "--graph",
        GRAPH,
        "--placement",
        &format!("workloads/sdr/placements/{placement}.yaml"),
        "--recording",
        &path(&recording.to_path_buf()),
        "--check",
        "none",
        "--frames",
        &frames,
        "--source",
        "udp://127.0.0.1:0",
        "--frame-timeout",
        "1s",
        "--slots",
        "16",
        "--idle-timeout",
        "3s",
        "--ready-file",
        &path(&ready),
        "--write-sinks",
        &path(&out.join("sinks")),
        "--done-times",
        &path(&done),
    ]));
    let port = receiver.wait_ready(&ready, LIMIT)[0];
    let mut send = vec![
        "send".to_string(),
        "--dest".into(),
        format!("127.0.0.1:{port}"),
        "--recording".into(),
        path(&recording.to_path_buf()),
        "--frames".into(),
        frames.clone(),
        "--rate".into(),
        "1000".into(),
    ];
    for (i, f) in DROPPED.iter().enumerate() {
        send.extend(["--drop".into(), format!("{f}:{i}")]);
    }
    let sent = Guard::spawn(kplace().args(&send)).wait(LIMIT);
    assert!(sent.status.success(), "{}", sent.stderr);
    let ended = receiver.wait(LIMIT);
    let said = format!("{}\n{}", ended.stdout, ended.stderr);
    // Frames were lost, so the run says so in its status; it never fails otherwise.
    assert!(matches!(ended.status.code(), Some(0 | 1)), "{said}");
    assert!(said.contains("lowpass: stateful"), "{said}");
    let frames: Vec<usize> = std::fs::read_to_string(&done)
        .unwrap()
        .lines()
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let written = Written {
        filtered: npy_f32(&out.join("sinks/filtered.npy")),
        psd: npy_f32(&out.join("sinks/psd.npy")),
        frames,
    };
    assert_eq!(
        written.filtered.len(),
        written.frames.len() * S * C * 2,
        "{said}"
    );
    assert_eq!(written.psd.len(), written.frames.len() * S, "{said}");
    written
}

#[test]
fn the_sdr_chain_streams_as_one_continuous_filter_with_lost_frames_silent() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("sdr.sigmf-data");
    let recorded = Guard::spawn(kplace().args([
        "record",
        "--graph",
        GRAPH,
        "--frames",
        &FRAMES.to_string(),
        "--sample-rate",
        "1e6",
        // In band: 1/16 and -1/32 cycles per sample, bins 16 and 56 of 64 once decimated;
        // 0.3 is in the stop band, removed before the decimation could fold it in.
        "--tone",
        "0.0625:0.3:20",
        "--tone",
        "-0.03125:0.1:-40",
        "--tone",
        "0.3:0.3:0",
        "--noise",
        "0.01",
        "--out",
        rec.to_str().unwrap(),
    ]))
    .wait(LIMIT);
    assert!(recorded.status.success(), "{}", recorded.stderr);
    let x = recording(&rec);
    let h = taps();
    assert_eq!(h.len(), 63);
    let mut runs = Vec::new();
    for placement in ["cpu", "cpu-2"] {
        let w = stream(dir.path(), &rec, placement);
        let written: BTreeSet<usize> = w.frames.iter().copied().collect();
        assert_eq!(
            written.len(),
            w.frames.len(),
            "{placement}: a frame written twice"
        );
        for d in DROPPED {
            assert!(
                !written.contains(&d),
                "{placement}: frame {d} lost a packet"
            );
        }
        assert!(
            written.len() >= FRAMES * 9 / 10,
            "{placement}: only {} of {FRAMES} frames",
            written.len()
        );
        // Every frame that was not written never reached the FIR whole: silence.
        let silent: BTreeSet<usize> = (0..FRAMES).filter(|f| !written.contains(f)).collect();
        let (mut worst_filtered, mut worst_psd) = (0f64, 0f64);
        for (row, &f) in w.frames.iter().enumerate() {
            let (filtered, psd) = reference(&x, &h, &silent, f);
            let got = &w.filtered[row * S * C * 2..(row + 1) * S * C * 2];
            let peak = filtered
                .iter()
                .fold(0f64, |m, (re, im)| m.max(re.hypot(*im)));
            for (g, (re, im)) in got.chunks_exact(2).zip(&filtered) {
                let e = (f64::from(g[0]) - re).hypot(f64::from(g[1]) - im) / peak;
                worst_filtered = worst_filtered.max(e);
            }
            let got = &w.psd[row * S..(row + 1) * S];
            let peak = psd.iter().fold(0f64, |m, &p| m.max(p));
            for (g, want) in got.iter().zip(&psd) {
                worst_psd = worst_psd.max((f64::from(*g) - want).abs() / peak);
            }
            assert!(
                worst_filtered < 1e-5 && worst_psd < 1e-4,
                "{placement}: frame {f}: filtered {worst_filtered:e}, psd {worst_psd:e} of the peak"
            );
        }
        println!(
            "{placement}: {} of {FRAMES} frames written, lost {:?}; worst error against the \
             reference: filtered {worst_filtered:e}, psd {worst_psd:e} of the frame's peak",
            written.len(),
            silent
        );
        // The frame after a loss begins with the lost frame's silence in the FIR's history:
        // the stream without it would differ there by far more than the tolerance.
        let mut after_loss = 0;
        for d in DROPPED {
            let Some(row) = w.frames.iter().position(|&f| f == d + 1) else {
                continue;
            };
            after_loss += 1;
            let heard: BTreeSet<usize> = silent.iter().copied().filter(|&f| f != d).collect();
            let (unsilenced, _) = reference(&x, &h, &heard, d + 1);
            let got = &w.filtered[row * S * C * 2..][..2];
            let e =
                (f64::from(got[0]) - unsilenced[0].0).hypot(f64::from(got[1]) - unsilenced[0].1);
            assert!(e > 1e-2, "{placement}: frame {}: {e:e}", d + 1);
        }
        assert!(
            after_loss > 0,
            "{placement}: no frame after a loss was written"
        );
        runs.push(w);
    }
    // One worker and two wrote the same bits for every frame both wrote after a frame both
    // wrote (a frame's output depends on the one before it, through the FIR's history).
    let (one, two) = (&runs[0], &runs[1]);
    let both = |f: usize| one.frames.contains(&f) && two.frames.contains(&f);
    let mut compared = 0;
    for (row, &f) in one.frames.iter().enumerate() {
        if f > 0 && !both(f - 1) {
            continue;
        }
        if let Some(other) = two.frames.iter().position(|&g| g == f) {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&one.psd[row * S..(row + 1) * S]),
                bits(&two.psd[other * S..(other + 1) * S]),
                "frame {f}"
            );
            compared += 1;
        }
    }
    assert!(compared >= FRAMES * 8 / 10, "{compared}");
}

/// An axis the mean's input does not have is refused when the run is planned, naming the
/// stage, the block and the parameter; so is a permutation that is none.
#[test]
fn a_wrong_axis_is_refused_at_plan_time_naming_the_stage_and_the_parameter() {
    for (set, said) in [
        ("average.axis=2", "stage average: blocks.mean"),
        ("power.axis=5", "stage power: blocks.power"),
    ] {
        let ended = Guard::spawn(kplace().args([
            "plan",
            "--graph",
            GRAPH,
            "--placement",
            "workloads/sdr/placements/cpu.yaml",
            "--set",
            set,
        ]))
        .wait(LIMIT);
        assert_eq!(ended.status.code(), Some(2), "{set}: {}", ended.stderr);
        assert!(
            ended.stderr.contains(said) && ended.stderr.contains("parameter axis is "),
            "{set}: {}",
            ended.stderr
        );
    }
}
