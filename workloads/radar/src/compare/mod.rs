//! Comparing two receivers' detections of the same frames: the cross-check between a
//! reference (the CPU placement) and a candidate (a GPU placement, or another receiver).
//!
//! Two placements that process the same frames must report the same clusters. Their range
//! and Doppler bins must agree exactly; their powers come from different FFT libraries
//! (FFTW, cuFFT), which round differently in the last bits, so a power agrees when it is
//! within a relative tolerance of the other (`|a - b| <= rel_tol * max(a, b)`), or, with
//! [`PowerRule::Exact`], when it is the same `f32`. A cell within rounding of its CFAR
//! threshold may be detected by one side only (a *threshold flip*): such a cell is never
//! hidden, it is listed with its frame as [`Difference::OnlyIn`].
//!
//! # Guarantees
//! - [`compare_detections`] reads both inputs frame by frame with [`DetectionReader`]s and
//!   compares frames as soon as both sides have read them. When both list frames in the same
//!   order (as every kplace writer does) it holds one frame per side at a time; a frame read on
//!   one side only waits, held, until the other side reads it or ends. With a frame limit both
//!   readers refuse ids at or above it, so an endless input ends in an error.
//! - Every difference is counted; the first [`MAX_LISTED`] are kept, in frame order of the
//!   comparison, each naming its frame.
//! - A malformed input is a [`CompareError`] naming the file and the line; CPIs that differ
//!   are an error too, since the files then cannot describe the same frames.
//!
//! [`report`] says a [`Comparison`]: as text, and as `kplace-compare/1` JSON.

pub mod report;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::cpi::Cpi;
use crate::detections::{Cluster, DetectionReader, FormatError, FrameDetections};

/// How many differences a [`Comparison`] lists; every one is counted.
pub const MAX_LISTED: usize = 1000;

/// When two powers at the same cell agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PowerRule {
    /// The same `f32`, bit for bit.
    Exact,
    /// `|a - b| <= tolerance * max(a, b)` (powers are `>= 0`).
    Relative(f64),
}

impl PowerRule {
    /// Whether `reference` and `candidate` agree, and their relative difference
    /// (`|a - b| / max(a, b)`, 0 when both are 0).
    pub fn judge(self, reference: f32, candidate: f32) -> (bool, f64) {
        let (a, b) = (f64::from(reference), f64::from(candidate));
        let largest = a.max(b);
        let relative = if largest > 0.0 {
            (a - b).abs() / largest
        } else {
            0.0
        };
        let agrees = match self {
            PowerRule::Exact => reference.to_bits() == candidate.to_bits(),
            PowerRule::Relative(tolerance) => (a - b).abs() <= tolerance * largest,
        };
        (agrees, relative)
    }
}

/// Which input a cluster or frame was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The first input.
    Reference,
    /// The second input.
    Candidate,
}

impl Side {
    /// `reference` or `candidate`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Reference => "reference",
            Side::Candidate => "candidate",
        }
    }
}

/// One way in which the two inputs disagree.
#[derive(Clone, Debug, PartialEq)]
pub enum Difference {
    /// A cluster at a cell the other side does not report in that frame (a threshold flip,
    /// or a cluster the other side split, joined or missed).
    OnlyIn {
        /// The frame.
        frame_id: u64,
        /// Where the cluster was reported.
        side: Side,
        /// The cluster.
        cluster: Cluster,
    },
    /// The same cell on both sides, with powers that do not agree under the rule.
    Power {
        /// The frame.
        frame_id: u64,
        /// Range bin of the cell.
        range_bin: u32,
        /// Doppler bin of the cell.
        doppler_bin: u32,
        /// The reference's power.
        reference: f32,
        /// The candidate's power.
        candidate: f32,
        /// `|a - b| / max(a, b)`.
        relative: f64,
    },
    /// A frame one side reports and the other does not.
    MissingFrame {
        /// The frame.
        frame_id: u64,
        /// The side that reports it.
        present_in: Side,
    },
}

impl Difference {
    /// The frame the difference is in.
    pub fn frame_id(&self) -> u64 {
        match *self {
            Difference::OnlyIn { frame_id, .. }
            | Difference::Power { frame_id, .. }
            | Difference::MissingFrame { frame_id, .. } => frame_id,
        }
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::OnlyIn {
                frame_id,
                side,
                cluster,
            } => write!(
                f,
                "frame {frame_id}: cell ({}, {}) power {} only in the {}",
                cluster.range_bin,
                cluster.doppler_bin,
                cluster.power,
                side.name()
            ),
            Difference::Power {
                frame_id,
                range_bin,
                doppler_bin,
                reference,
                candidate,
                relative,
            } => write!(
                f,
                "frame {frame_id}: cell ({range_bin}, {doppler_bin}) power {reference} vs {candidate} (relative difference {relative:.3e})"
            ),
            Difference::MissingFrame {
                frame_id,
                present_in,
            } => write!(
                f,
                "frame {frame_id}: only in the {} (the other side never reports it)",
                present_in.name()
            ),
        }
    }
}

/// The outcome of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The CPI both inputs declare.
    pub cpi: Cpi,
    /// The rule powers were judged by.
    pub rule: PowerRule,
    /// Frames reported by the reference.
    pub reference_frames: u64,
    /// Frames reported by the candidate.
    pub candidate_frames: u64,
    /// Frames reported by both, and so compared.
    pub frames_compared: u64,
    /// Of those, frames with no difference.
    pub frames_agreeing: u64,
    /// Clusters at the same cell on both sides.
    pub cells_matched: u64,
    /// Of those, powers that are the same `f32`.
    pub powers_identical: u64,
    /// Of the matched cells, powers that agree under the rule (identical ones included).
    pub powers_agreeing: u64,
    /// The largest relative power difference over the matched cells.
    pub max_relative: f64,
    /// Clusters reported by one side only, counted per side: `[reference, candidate]`.
    pub only_in: [u64; 2],
    /// Frames reported by one side only, counted per side: `[reference, candidate]`.
    pub missing_frames: [u64; 2],
    /// Every difference counted.
    pub differences: u64,
    /// The first [`MAX_LISTED`] differences, in the order found.
    pub listed: Vec<Difference>,
}

impl Comparison {
    /// Whether the inputs agree: the same frames, the same cells, every power within the rule,
    /// and at least one frame compared (two empty files agree on nothing).
    pub fn agrees(&self) -> bool {
        self.differences == 0 && self.frames_compared > 0
    }

    fn new(cpi: Cpi, rule: PowerRule) -> Self {
        Comparison {
            cpi,
            rule,
            reference_frames: 0,
            candidate_frames: 0,
            frames_compared: 0,
            frames_agreeing: 0,
            cells_matched: 0,
            powers_identical: 0,
            powers_agreeing: 0,
            max_relative: 0.0,
            only_in: [0; 2],
            missing_frames: [0; 2],
            differences: 0,
            listed: Vec::new(),
        }
    }

    fn record(&mut self, difference: Difference) {
        self.differences += 1;
        if self.listed.len() < MAX_LISTED {
            self.listed.push(difference);
        }
    }

    /// Compares one frame reported by both sides.
    fn compare_frame(&mut self, reference: &FrameDetections, candidate: &FrameDetections) {
        let frame_id = reference.frame_id;
        let before = self.differences;
        // Cells are unique within a frame for any clustering receiver, but a file may list them
        // in any order: key both sides by cell.
        let mut cells: BTreeMap<(u32, u32), [Option<f32>; 2]> = BTreeMap::new();
        for (side, frame) in [reference, candidate].into_iter().enumerate() {
            for c in &frame.clusters {
                cells.entry((c.range_bin, c.doppler_bin)).or_default()[side] = Some(c.power);
            }
        }
        for ((range_bin, doppler_bin), powers) in cells {
            match powers {
                [Some(a), Some(b)] => {
                    self.cells_matched += 1;
                    let (agrees, relative) = self.rule.judge(a, b);
                    self.max_relative = self.max_relative.max(relative);
                    if a.to_bits() == b.to_bits() {
                        self.powers_identical += 1;
                    }
                    if agrees {
                        self.powers_agreeing += 1;
                    } else {
                        self.record(Difference::Power {
                            frame_id,
                            range_bin,
                            doppler_bin,
                            reference: a,
                            candidate: b,
                            relative,
                        });
                    }
                }
                [a, b] => {
                    let (side, power) = match (a, b) {
                        (Some(p), None) => (Side::Reference, p),
                        (None, Some(p)) => (Side::Candidate, p),
                        // Every entry was made with one side set.
                        _ => continue,
                    };
                    self.only_in[side as usize] += 1;
                    self.record(Difference::OnlyIn {
                        frame_id,
                        side,
                        cluster: Cluster {
                            range_bin,
                            doppler_bin,
                            power,
                        },
                    });
                }
            }
        }
        self.frames_compared += 1;
        if self.differences == before {
            self.frames_agreeing += 1;
        }
    }

    fn missing(&mut self, frame_id: u64, present_in: Side) {
        self.missing_frames[present_in as usize] += 1;
        self.record(Difference::MissingFrame {
            frame_id,
            present_in,
        });
    }
}

/// Why two inputs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// An input file could not be opened.
    #[error("cannot open the detections file {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// An input is not a valid detection file (names the file and line).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The inputs declare different CPIs.
    #[error(
        "{reference} is CPI {reference_cpi} but {candidate} is CPI {candidate_cpi}: they cannot describe the same frames"
    )]
    CpiMismatch {
        /// The reference's name.
        reference: String,
        /// Its CPI.
        reference_cpi: Cpi,
        /// The candidate's name.
        candidate: String,
        /// Its CPI.
        candidate_cpi: Cpi,
    },
}

/// One input being read, with the frames it has read that the other side has not.
struct Input<R: BufRead> {
    reader: DetectionReader<R>,
    done: bool,
    held: BTreeMap<u64, FrameDetections>,
}

impl<R: BufRead> Input<R> {
    fn open(r: R, name: &str, frame_limit: Option<u64>) -> Result<Self, FormatError> {
        let reader = DetectionReader::new(r, name)?;
        let reader = match frame_limit {
            Some(limit) => reader.with_frame_limit(limit),
            None => reader,
        };
        Ok(Input {
            reader,
            done: false,
            held: BTreeMap::new(),
        })
    }

    /// The next frame, or `None` (and `done`) at the end of the input.
    fn next(&mut self) -> Result<Option<FrameDetections>, FormatError> {
        if self.done {
            return Ok(None);
        }
        let frame = self.reader.next_frame()?;
        self.done = frame.is_none();
        Ok(frame)
    }
}

/// Compares the detections files at `reference` and `candidate` (each named by its path) with
/// [`compare_detections`].
pub fn compare_detection_files(
    reference: &Path,
    candidate: &Path,
    rule: PowerRule,
    frame_limit: Option<u64>,
) -> Result<Comparison, CompareError> {
    let open = |path: &Path| {
        File::open(path)
            .map(BufReader::new)
            .map_err(|source| CompareError::Open {
                path: path.to_path_buf(),
                source,
            })
    };
    let (a, b) = (open(reference)?, open(candidate)?);
    compare_detections(
        a,
        &reference.display().to_string(),
        b,
        &candidate.display().to_string(),
        rule,
        frame_limit,
    )
}

/// Compares the detections read from `reference` and `candidate` (named, in errors, by
/// `reference_name` and `candidate_name`), judging powers by `rule`. With `frame_limit`, frame
/// ids must be below it on both sides.
pub fn compare_detections(
    reference: impl BufRead,
    reference_name: &str,
    candidate: impl BufRead,
    candidate_name: &str,
    rule: PowerRule,
    frame_limit: Option<u64>,
) -> Result<Comparison, CompareError> {
    let mut a = Input::open(reference, reference_name, frame_limit)?;
    let mut b = Input::open(candidate, candidate_name, frame_limit)?;
    let (ca, cb) = (a.reader.cpi(), b.reader.cpi());
    if ca != cb {
        return Err(CompareError::CpiMismatch {
            reference: reference_name.into(),
            reference_cpi: ca,
            candidate: candidate_name.into(),
            candidate_cpi: cb,
        });
    }
    let mut out = Comparison::new(ca, rule);
    while !(a.done && b.done) {
        // One frame from each side per round; each is compared at once when the other side
        // already holds it, and held otherwise.
        if let Some(frame) = a.next()? {
            out.reference_frames += 1;
            match b.held.remove(&frame.frame_id) {
                Some(other) => out.compare_frame(&frame, &other),
                None => {
                    a.held.insert(frame.frame_id, frame);
                }
            }
        }
        if let Some(frame) = b.next()? {
            out.candidate_frames += 1;
            match a.held.remove(&frame.frame_id) {
                Some(other) => out.compare_frame(&other, &frame),
                None => {
                    b.held.insert(frame.frame_id, frame);
                }
            }
        }
    }
    // What is still held was reported by one side only; the reader refused duplicates, so
    // the two sets are disjoint.
    let mut missing: Vec<(u64, Side)> = a
        .held
        .keys()
        .map(|&id| (id, Side::Reference))
        .chain(b.held.keys().map(|&id| (id, Side::Candidate)))
        .collect();
    missing.sort_unstable_by_key(|&(id, _)| id);
    for (id, side) in missing {
        out.missing(id, side);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "kplace-detections v1 cpi=1024x128\n";

    fn compare(reference: &str, candidate: &str, rule: PowerRule) -> Comparison {
        compare_detections(
            reference.as_bytes(),
            "ref.txt",
            candidate.as_bytes(),
            "cand.txt",
            rule,
            None,
        )
        .unwrap()
    }

    const TOL: PowerRule = PowerRule::Relative(1e-5);

    #[test]
    fn two_files_without_a_frame_do_not_agree() {
        let c = compare(H, H, PowerRule::Exact);
        assert_eq!((c.frames_compared, c.differences), (0, 0));
        assert!(!c.agrees(), "nothing was compared: {c:?}");
    }

    #[test]
    fn identical_files_agree_exactly() {
        let text = format!("{H}frame 0 2\n61 7 1234567.5\n154 118 99.25\nframe 1 0\n");
        for rule in [PowerRule::Exact, TOL] {
            let c = compare(&text, &text, rule);
            assert!(c.agrees(), "{c:?}");
            assert_eq!(
                (c.frames_compared, c.frames_agreeing, c.cells_matched),
                (2, 2, 2)
            );
            assert_eq!((c.powers_identical, c.powers_agreeing), (2, 2));
            assert_eq!(c.max_relative, 0.0);
            assert!(c.listed.is_empty());
        }
    }

    #[test]
    fn last_bit_power_differences_agree_within_tolerance_but_not_exactly() {
        let p = 649_055_860_000_000f32;
        let next = f32::from_bits(p.to_bits() + 1);
        let reference = format!("{H}frame 0 1\n61 7 {p}\n");
        let candidate = format!("{H}frame 0 1\n61 7 {next}\n");
        let c = compare(&reference, &candidate, TOL);
        assert!(c.agrees(), "{c:?}");
        assert_eq!((c.powers_identical, c.powers_agreeing), (0, 1));
        assert!(c.max_relative > 0.0 && c.max_relative < 1e-6, "{c:?}");

        let exact = compare(&reference, &candidate, PowerRule::Exact);
        assert!(!exact.agrees());
        assert_eq!(exact.differences, 1);
        assert!(matches!(
            exact.listed[0],
            Difference::Power {
                frame_id: 0,
                range_bin: 61,
                doppler_bin: 7,
                ..
            }
        ));
    }

    #[test]
    fn a_power_outside_the_tolerance_is_listed_with_its_frame() {
        let reference = format!("{H}frame 0 0\nframe 1 1\n61 7 1000000\n");
        let candidate = format!("{H}frame 0 0\nframe 1 1\n61 7 1000020\n");
        let c = compare(&reference, &candidate, TOL);
        assert!(!c.agrees());
        assert_eq!((c.frames_compared, c.frames_agreeing), (2, 1));
        assert_eq!(c.listed.len(), 1);
        let Difference::Power {
            frame_id,
            reference,
            candidate,
            relative,
            ..
        } = c.listed[0]
        else {
            panic!("{:?}", c.listed);
        };
        assert_eq!((frame_id, reference, candidate), (1, 1e6, 1_000_020.0));
        assert!((relative - 2e-5).abs() < 1e-9, "{relative}");
        assert!(
            c.listed[0].to_string().starts_with(
                "frame 1: cell (61, 7) power 1000000 vs 1000020 (relative difference 2.000e-5)"
            ),
            "{}",
            c.listed[0]
        );
    }

    #[test]
    fn a_cell_on_one_side_only_is_listed_with_its_frame_and_side() {
        let reference = format!("{H}frame 0 1\n61 7 5\nframe 1 2\n10 3 8\n61 7 5\n");
        let candidate = format!("{H}frame 0 1\n61 7 5\nframe 1 2\n61 7 5\n90 100 7.5\n");
        let c = compare(&reference, &candidate, TOL);
        assert!(!c.agrees());
        assert_eq!(c.only_in, [1, 1]);
        assert_eq!(c.differences, 2);
        assert_eq!((c.frames_compared, c.frames_agreeing), (2, 1));
        assert_eq!(
            c.listed,
            vec![
                Difference::OnlyIn {
                    frame_id: 1,
                    side: Side::Reference,
                    cluster: Cluster {
                        range_bin: 10,
                        doppler_bin: 3,
                        power: 8.0
                    }
                },
                Difference::OnlyIn {
                    frame_id: 1,
                    side: Side::Candidate,
                    cluster: Cluster {
                        range_bin: 90,
                        doppler_bin: 100,
                        power: 7.5
                    }
                },
            ]
        );
        assert_eq!(
            c.listed[1].to_string(),
            "frame 1: cell (90, 100) power 7.5 only in the candidate"
        );
    }

    #[test]
    fn different_frame_counts_name_the_frames_one_side_lacks() {
        let reference = format!("{H}frame 0 0\nframe 1 0\nframe 2 0\n");
        let candidate = format!("{H}frame 1 0\nframe 0 0\nframe 5 0\n");
        let c = compare(&reference, &candidate, TOL);
        assert!(!c.agrees());
        assert_eq!((c.reference_frames, c.candidate_frames), (3, 3));
        assert_eq!((c.frames_compared, c.frames_agreeing), (2, 2));
        assert_eq!(c.missing_frames, [1, 1]);
        assert_eq!(
            c.listed,
            vec![
                Difference::MissingFrame {
                    frame_id: 2,
                    present_in: Side::Reference
                },
                Difference::MissingFrame {
                    frame_id: 5,
                    present_in: Side::Candidate
                },
            ]
        );
        // A shorter candidate.
        let c = compare(&reference, &format!("{H}frame 0 0\n"), TOL);
        assert_eq!(c.missing_frames, [2, 0]);
        assert_eq!(c.differences, 2);
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_file_and_line() {
        let good = format!("{H}frame 0 1\n61 7 5\n");
        let bad = format!("{H}frame 0 1\n61 seven 5\n");
        let err = compare_detections(
            good.as_bytes(),
            "ref.txt",
            bad.as_bytes(),
            "cand.txt",
            TOL,
            None,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("cand.txt:3: "), "{text}");
        assert!(text.contains("doppler bin \"seven\""), "{text}");
        // Different CPIs are refused, both named.
        let other = "kplace-detections v1 cpi=2048x256\nframe 0 0\n";
        let err = compare_detections(
            good.as_bytes(),
            "ref.txt",
            other.as_bytes(),
            "cand.txt",
            TOL,
            None,
        )
        .unwrap_err();
        assert!(matches!(err, CompareError::CpiMismatch { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("ref.txt is CPI 1024x128 but cand.txt is CPI 2048x256"),
            "{err}"
        );
    }

    #[test]
    fn a_frame_limit_ends_an_input_that_goes_beyond_it() {
        let text = format!("{H}frame 0 0\nframe 1 0\nframe 2 0\n");
        let err = compare_detections(
            text.as_bytes(),
            "ref.txt",
            text.as_bytes(),
            "cand.txt",
            TOL,
            Some(2),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("ref.txt:4: frame 2"), "{err}");
    }

    #[test]
    fn listing_is_bounded_but_counting_is_not() {
        let mut candidate = String::from(H);
        let frames = MAX_LISTED + 5;
        for id in 0..frames {
            candidate.push_str(&format!("frame {id} 1\n3 4 1\n"));
        }
        let c = compare(H, &candidate, TOL);
        assert_eq!(c.differences, frames as u64);
        assert_eq!(c.missing_frames, [0, frames as u64]);
        assert_eq!(c.listed.len(), MAX_LISTED);
    }
}
