//! What a [`Comparison`] says, in the two forms `kplace compare-detections` prints: text
//! ([`Comparison::text`]), a line per figure and per listed difference and the verdict last,
//! and one JSON object of schema [`SCHEMA`] ([`Comparison::to_json`]).
//!
//! Both name the inputs as the caller gives them, and both carry every count the comparison
//! made; the JSON lists every difference the comparison kept, the text the same.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Comparison, Difference, PowerRule};

/// The schema of [`Comparison::to_json`]'s object.
pub const SCHEMA: &str = "kplace-compare/1";

impl std::fmt::Display for PowerRule {
    /// `identical f32 powers`, or `powers within 1e-5 relative`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PowerRule::Exact => f.write_str("identical f32 powers"),
            PowerRule::Relative(t) => write!(f, "powers within {t:e} relative"),
        }
    }
}

impl Comparison {
    /// The comparison as text, naming the inputs `reference` and `candidate`: their frames,
    /// the figures, the listed differences, and the verdict (`detections AGREE`, `NOT
    /// COMPARED` or `DIFFER` with the counts).
    pub fn text(&self, reference: &str, candidate: &str) -> String {
        let c = self;
        let mut out = String::new();
        let _ = writeln!(out, "reference {reference}: {} frames", c.reference_frames);
        let _ = writeln!(out, "candidate {candidate}: {} frames", c.candidate_frames);
        let _ = writeln!(
            out,
            "CPI {}, bins exact, {}: {} frames compared, {} agree; {} cells on both sides, {} powers identical, {} within the rule, largest relative difference {:.3e}",
            c.cpi,
            c.rule,
            c.frames_compared,
            c.frames_agreeing,
            c.cells_matched,
            c.powers_identical,
            c.powers_agreeing,
            c.max_relative
        );
        for d in &c.listed {
            let _ = writeln!(out, "  {d}");
        }
        if c.differences > c.listed.len() as u64 {
            let _ = writeln!(
                out,
                "  ... and {} more differences",
                c.differences - c.listed.len() as u64
            );
        }
        if c.agrees() {
            out.push_str("detections AGREE\n");
        } else if c.differences == 0 {
            out.push_str("detections NOT COMPARED: neither file holds a frame the other has\n");
        } else {
            let _ = writeln!(
                out,
                "detections DIFFER: {} differences ({} cells only in the reference, {} only in the candidate, {} powers outside the rule, {} frames only in the reference, {} only in the candidate)",
                c.differences,
                c.only_in[0],
                c.only_in[1],
                c.cells_matched - c.powers_agreeing,
                c.missing_frames[0],
                c.missing_frames[1]
            );
        }
        out
    }

    /// The comparison as one JSON object of schema [`SCHEMA`], naming the inputs `reference`
    /// and `candidate`.
    pub fn to_json(&self, reference: &str, candidate: &str) -> Value {
        let c = self;
        let (rule, rel_tol) = match c.rule {
            PowerRule::Exact => ("exact", None),
            PowerRule::Relative(t) => ("relative", Some(t)),
        };
        json!({
            "schema": SCHEMA,
            "reference": reference,
            "candidate": candidate,
            "cpi": c.cpi.to_string(),
            "rule": rule,
            "rel_tol": rel_tol,
            "agree": c.agrees(),
            "reference_frames": c.reference_frames,
            "candidate_frames": c.candidate_frames,
            "frames_compared": c.frames_compared,
            "frames_agreeing": c.frames_agreeing,
            "cells_matched": c.cells_matched,
            "powers_identical": c.powers_identical,
            "powers_agreeing": c.powers_agreeing,
            "max_relative": c.max_relative,
            "only_in_reference": c.only_in[0],
            "only_in_candidate": c.only_in[1],
            "frames_only_in_reference": c.missing_frames[0],
            "frames_only_in_candidate": c.missing_frames[1],
            "differences": c.differences,
            "listed": c.listed.iter().map(difference_json).collect::<Vec<_>>(),
        })
    }
}

/// One difference as a JSON object: its `kind`, its frame and what differs.
fn difference_json(d: &Difference) -> Value {
    match *d {
        Difference::OnlyIn {
            frame_id,
            side,
            cluster,
        } => json!({
            "kind": "only_in", "frame": frame_id, "side": side.name(),
            "range_bin": cluster.range_bin, "doppler_bin": cluster.doppler_bin,
            "power": cluster.power,
        }),
        Difference::Power {
            frame_id,
            range_bin,
            doppler_bin,
            reference,
            candidate,
            relative,
        } => json!({
            "kind": "power", "frame": frame_id, "range_bin": range_bin,
            "doppler_bin": doppler_bin, "reference": reference, "candidate": candidate,
            "relative": relative,
        }),
        Difference::MissingFrame {
            frame_id,
            present_in,
        } => json!({"kind": "missing_frame", "frame": frame_id, "present_in": present_in.name()}),
    }
}
