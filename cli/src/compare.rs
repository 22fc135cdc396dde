//! `kplace compare-detections`: two receivers' detections of the same frames, cell by cell.
//!
//! Exit status 0 when they agree (the same frames, the same cells, every power within the
//! rule), 1 when they do not (every difference counted, the first listed with its frame), 2
//! when an input cannot be read (the file and line named).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace_radar::{Comparison, Difference, PowerRule, compare_detections};
use serde_json::{Value, json};

/// Options of `kplace compare-detections`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The reference detections file (e.g. the all-cpu placement's).
    #[arg(value_name = "REFERENCE")]
    reference: PathBuf,
    /// The detections file to judge against it (e.g. a GPU placement's, on the same frames).
    #[arg(value_name = "CANDIDATE")]
    candidate: PathBuf,
    /// Powers at the same cell agree when `|a - b| <= REL_TOL * max(a, b)`.
    #[arg(long, default_value_t = 1e-5, conflicts_with = "exact")]
    rel_tol: f64,
    /// Powers must be the same f32, bit for bit (a placement that shares the reference's
    /// FFTs).
    #[arg(long)]
    exact: bool,
    /// Frames expected (ids 0..FRAMES on both sides; an id outside is an input error at its
    /// line, so an endless input ends).
    #[arg(long)]
    frames: Option<u64>,
    /// Print the comparison as one JSON object (schema `kplace-compare/1`) on stdout instead
    /// of text.
    #[arg(long)]
    json: bool,
}

/// Compares the two files and prints the verdict.
pub fn main(args: CompareArgs) -> anyhow::Result<ExitCode> {
    if !(args.rel_tol.is_finite() && (0.0..1.0).contains(&args.rel_tol)) {
        bail!(
            "--rel-tol {} must be in [0, 1) (e.g. 1e-5; --exact for bit-identical powers)",
            args.rel_tol
        );
    }
    let rule = if args.exact {
        PowerRule::Exact
    } else {
        PowerRule::Relative(args.rel_tol)
    };
    let (reference, reference_name) = open(&args.reference)?;
    let (candidate, candidate_name) = open(&args.candidate)?;
    let comparison = compare_detections(
        reference,
        &reference_name,
        candidate,
        &candidate_name,
        rule,
        args.frames,
    )?;
    if args.json {
        let value = to_json(&comparison, &reference_name, &candidate_name);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_text(&comparison, &reference_name, &candidate_name);
    }
    Ok(if comparison.agrees() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn open(path: &Path) -> anyhow::Result<(BufReader<File>, String)> {
    let file = File::open(path)
        .with_context(|| format!("cannot open the detections file {}", path.display()))?;
    Ok((BufReader::new(file), path.display().to_string()))
}

fn rule_text(rule: PowerRule) -> String {
    match rule {
        PowerRule::Exact => "identical f32 powers".into(),
        PowerRule::Relative(t) => format!("powers within {t:e} relative"),
    }
}

fn print_text(c: &Comparison, reference: &str, candidate: &str) {
    println!("reference {reference}: {} frames", c.reference_frames);
    println!("candidate {candidate}: {} frames", c.candidate_frames);
    println!(
        "CPI {}, bins exact, {}: {} frames compared, {} agree; {} cells on both sides, {} powers identical, {} within the rule, largest relative difference {:.3e}",
        c.cpi,
        rule_text(c.rule),
        c.frames_compared,
        c.frames_agreeing,
        c.cells_matched,
        c.powers_identical,
        c.powers_agreeing,
        c.max_relative
    );
    for d in &c.listed {
        println!("  {d}");
    }
    if c.differences > c.listed.len() as u64 {
        println!(
            "  ... and {} more differences",
            c.differences - c.listed.len() as u64
        );
    }
    if c.agrees() {
        println!("detections AGREE");
    } else if c.differences == 0 {
        println!("detections NOT COMPARED: neither file holds a frame the other has");
    } else {
        println!(
            "detections DIFFER: {} differences ({} cells only in the reference, {} only in the candidate, {} powers outside the rule, {} frames only in the reference, {} only in the candidate)",
            c.differences,
            c.only_in[0],
            c.only_in[1],
            c.cells_matched - c.powers_agreeing,
            c.missing_frames[0],
            c.missing_frames[1]
        );
    }
}

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

fn to_json(c: &Comparison, reference: &str, candidate: &str) -> Value {
    let (rule, rel_tol) = match c.rule {
        PowerRule::Exact => ("exact", None),
        PowerRule::Relative(t) => ("relative", Some(t)),
    };
    json!({
        "schema": "kplace-compare/1",
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
