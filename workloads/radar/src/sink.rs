//! The radar receiver's judge: what the runtime's workload seam hands each completed frame to.
//!
//! [`RadarJudge`] reads the frame's detection list (the graph's first sink), checks its
//! clusters against the scene's truth with a [`Verifier`], and, when asked, writes them to a
//! detections file. It is the one place the radar workload meets the runtime's [`Judge`]
//! seam; [`verdict_text`] and [`verification`] turn the verifier's summary into the run's
//! printed verdict and its report entry, so every runner of the radar graph judges a run by
//! the same rule.
//!
//! Guarantees: a frame whose list is malformed or whose output cannot be written fails the
//! run with the frame named; a partial frame (packets missing) is never judged as reported,
//! so the verifier counts it missing.

use std::fmt::Write as _;
use std::io::Write;

use kplace::abi::RecordList;
use kplace::executor::CompletedFrame;
use kplace::report::run::{Details, Verification};
use kplace::workload::{Judge, JudgeError, Verdict};
use kplace_kernels::Detection;

use crate::{Cluster, DetectionWriter, Verifier};

/// Verifies each completed frame and optionally writes its clusters to a detections file.
pub struct RadarJudge<W: Write> {
    verifier: Verifier,
    frames_expected: u64,
    writer: Option<DetectionWriter<W>>,
    clusters: Vec<Cluster>,
    /// Clusters reported over the run.
    pub total_clusters: u64,
    /// Frames whose cluster list overflowed its capacity.
    pub overflowed_frames: u64,
    /// Frames that ended with packets missing: never processed, so never reported.
    pub partial_frames: u64,
}

impl<W: Write> RadarJudge<W> {
    /// A judge of `frames_expected` frames by `verifier`, writing to `writer` if given.
    pub fn new(
        verifier: Verifier,
        frames_expected: u64,
        writer: Option<DetectionWriter<W>>,
    ) -> Self {
        Self {
            verifier,
            frames_expected,
            writer,
            clusters: Vec::new(),
            total_clusters: 0,
            overflowed_frames: 0,
            partial_frames: 0,
        }
    }

    /// Judges frame `frame_id` from the bytes of its detection list (header, then records),
    /// and writes its clusters.
    pub fn judge(&mut self, frame_id: u64, list: &[u8]) -> Result<(), JudgeError> {
        let list = RecordList::parse(list).map_err(|e| JudgeError::Output {
            frame: frame_id,
            why: Box::new(e),
        })?;
        if list.header().overflow > 0 {
            self.overflowed_frames += 1;
        }
        self.clusters.clear();
        self.clusters.extend(list.records().map(|r| {
            let d = Detection::from_record(r);
            Cluster {
                range_bin: d.range_bin,
                doppler_bin: d.doppler_bin,
                power: d.power,
            }
        }));
        self.total_clusters += self.clusters.len() as u64;
        self.verifier.check(frame_id, &self.clusters);
        if let Some(w) = &mut self.writer {
            w.write_frame(frame_id, &self.clusters)
                .map_err(|error| JudgeError::Write {
                    frame: Some(frame_id),
                    what: "detections",
                    error,
                })?;
        }
        Ok(())
    }

    /// Flushes the detections file and returns the verifier.
    pub fn into_verifier(self) -> Result<Verifier, JudgeError> {
        if let Some(w) = self.writer {
            w.finish().map_err(|error| JudgeError::Write {
                frame: None,
                what: "the detections file",
                error,
            })?;
        }
        Ok(self.verifier)
    }
}

impl<W: Write + Send> Judge for RadarJudge<W> {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), JudgeError> {
        self.judge(frame.frame_id, frame.sink(0))
    }

    fn partial(&mut self, _frame_id: u64) {
        // Not reported: the verifier counts the frame as missing.
        self.partial_frames += 1;
    }

    fn finish(self: Box<Self>) -> Result<Verdict, JudgeError> {
        let mut text = String::new();
        let frames = self.verifier.summary().frames_reported;
        let _ = writeln!(
            text,
            "clusters {:.2}/frame{}",
            self.total_clusters as f64 / frames.max(1) as f64,
            if self.overflowed_frames > 0 {
                format!(
                    ", {} frames overflowed the cluster list",
                    self.overflowed_frames
                )
            } else {
                String::new()
            }
        );
        let clusters = self.total_clusters;
        let frames_expected = self.frames_expected;
        let verifier = self.into_verifier()?;
        let (_, verdict) = verdict_text(&verifier, frames_expected);
        text.push_str(&verdict);
        Ok(Verdict {
            verification: verification(&verifier),
            text,
            details: details(&verifier, clusters),
        })
    }
}

/// Whether the verifier passed, and the verdict as the runners print it: one line, then each
/// reason for a failure indented on its own line.
pub fn verdict_text(verifier: &Verifier, frames_expected: u64) -> (bool, String) {
    use std::fmt::Write as _;
    let summary = verifier.summary();
    let config = verifier.config();
    let reasons = summary.failure_reasons(config);
    let targets = verifier.scene().config().targets.len() as u64;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "verification {}: {}/{} frames reported, {} passed, false alarms {:.3}/frame (bound {:.3}), {} targets per frame",
        if reasons.is_empty() {
            "PASSED"
        } else {
            "FAILED"
        },
        summary.frames_reported,
        frames_expected,
        summary.frames_passed,
        summary.mean_false_alarms(),
        config.max_false_alarms_per_frame,
        targets
    );
    for r in &reasons {
        let _ = writeln!(text, "  {r}");
    }
    (reasons.is_empty(), text)
}

/// The verifier's verdict as the run report's `verification` entry.
pub fn verification(verifier: &Verifier) -> Verification {
    let summary = verifier.summary();
    let config = verifier.config();
    Verification {
        passed: summary.passed(config),
        against: "the scene's truth".into(),
        frames_reported: summary.frames_reported,
        frames_passed: summary.frames_passed,
        frames_failed: summary.frames_failed,
        frames_missing: summary.frames_missing,
        lost_frames: summary.missing_frames.clone(),
        frames_rejudged: 0,
        mismatches: Vec::new(),
        reasons: summary.failure_reasons(config),
    }
}

/// The radar's own figures for the report's `details`: `clusters_per_frame` (of the
/// `clusters` reported over the frames reported), `false_alarms_per_frame` and the
/// `false_alarm_bound` a passing run stays within.
pub fn details(verifier: &Verifier, clusters: u64) -> Details {
    let summary = verifier.summary();
    let frames = summary.frames_reported.max(1) as f64;
    let mut details = Details::new();
    details.insert(
        "clusters_per_frame".into(),
        (clusters as f64 / frames).into(),
    );
    details.insert(
        "false_alarms_per_frame".into(),
        summary.mean_false_alarms().into(),
    );
    details.insert(
        "false_alarm_bound".into(),
        verifier.config().max_false_alarms_per_frame.into(),
    );
    details
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpi, DetectionReader, Scene, SceneConfig, VerifyConfig};
    use std::io;
    use std::sync::{Arc, Mutex};

    fn cpi() -> Cpi {
        Cpi {
            samples: 256,
            chirps: 64,
        }
    }

    /// A detection list's bytes as a kernel writes them: the header (count, capacity,
    /// overflow, reserved), then `capacity` records of which the first `count` are valid.
    fn list_bytes(clusters: &[Cluster], capacity: u32, overflow: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [clusters.len() as u32, capacity, overflow, 0] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        for c in clusters {
            bytes.extend_from_slice(&c.range_bin.to_ne_bytes());
            bytes.extend_from_slice(&c.doppler_bin.to_ne_bytes());
            bytes.extend_from_slice(&c.power.to_ne_bytes());
        }
        bytes.resize(16 + capacity as usize * 12, 0);
        bytes
    }

    /// Each target's nearest cell in frame `frame` of `scene`: what a correct receiver finds.
    fn truth_clusters(scene: &Scene, frame: u64) -> Vec<Cluster> {
        let c = cpi();
        scene
            .truth(frame)
            .iter()
            .map(|t| Cluster {
                range_bin: (t.range_bin.round() as usize % c.samples) as u32,
                doppler_bin: (t.doppler_bin.round() as usize % c.chirps) as u32,
                power: 2.5,
            })
            .collect()
    }

    /// A `Write` whose bytes the test can read after the sink has consumed it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn correct_frames_pass_and_their_outputs_read_back() {
        let scene = Scene::new(SceneConfig::new(cpi())).unwrap();
        let verifier = Verifier::new(scene.clone(), VerifyConfig::for_cpi(cpi(), 1e-6), 3);
        let detections = Shared::default();
        let writer = DetectionWriter::new(detections.clone(), cpi()).unwrap();
        let mut sink = RadarJudge::new(verifier, 3, Some(writer));
        let mut expected = Vec::new();
        for frame in 0..3 {
            let clusters = truth_clusters(&scene, frame);
            sink.judge(frame, &list_bytes(&clusters, 16, u32::from(frame == 1)))
                .unwrap();
            expected.push(clusters);
        }
        assert_eq!(sink.total_clusters, 9);
        assert_eq!(sink.overflowed_frames, 1);
        let verifier = sink.into_verifier().unwrap();
        let entry = verification(&verifier);
        assert!(entry.passed, "{:?}", entry.reasons);
        assert_eq!((entry.frames_reported, entry.frames_passed), (3, 3));
        let (passed, text) = verdict_text(&verifier, 3);
        assert!(passed);
        assert!(
            text.starts_with("verification PASSED: 3/3 frames reported, 3 passed"),
            "{text}"
        );

        // The detections file holds exactly the frames' clusters, in order.
        let bytes = detections.0.lock().unwrap().clone();
        let mut reader = DetectionReader::new(bytes.as_slice(), "detections").unwrap();
        for (frame, clusters) in expected.iter().enumerate() {
            let read = reader.next_frame().unwrap().unwrap();
            assert_eq!(read.frame_id, frame as u64);
            assert_eq!(&read.clusters, clusters);
        }
        assert!(reader.next_frame().unwrap().is_none());
    }

    #[test]
    fn missed_partial_and_malformed_frames_fail_with_the_frame_named() {
        let scene = Scene::new(SceneConfig::new(cpi())).unwrap();
        let verifier = Verifier::new(scene.clone(), VerifyConfig::for_cpi(cpi(), 1e-6), 3);
        let mut sink = RadarJudge::<Vec<u8>>::new(verifier, 3, None);
        // Frame 0 reports nothing: every target missed.
        sink.judge(0, &list_bytes(&[], 4, 0)).unwrap();
        // Frame 1 is partial: never judged.
        sink.partial_frames += 1;
        // Frame 2's list claims more records than it has room for.
        let mut bad = list_bytes(&truth_clusters(&scene, 2), 4, 0);
        bad[0..4].copy_from_slice(&9u32.to_ne_bytes());
        let err = sink.judge(2, &bad).unwrap_err();
        assert!(err.to_string().contains("frame 2"), "{err}");
        assert!(
            err.to_string().contains("count exceeds its capacity"),
            "{err}"
        );
        let verdict = Box::new(sink).finish().unwrap();
        let entry = verdict.verification.clone();
        assert_eq!(verdict.details["clusters_per_frame"], 0.0);
        assert!(
            verdict.text.starts_with("clusters 0.00/frame\n"),
            "{}",
            verdict.text
        );
        assert!(!entry.passed);
        assert_eq!(
            (
                entry.frames_reported,
                entry.frames_failed,
                entry.frames_missing
            ),
            (1, 1, 2)
        );
        let text: Vec<&str> = verdict.text.lines().skip(1).collect();
        let text = text.join("\n");
        assert!(
            text.starts_with("verification FAILED: 1/3 frames reported"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1 + entry.reasons.len(), "{text}");
    }
}
