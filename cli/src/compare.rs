//! `kplace compare-detections`: two receivers' detections of the same frames, cell by cell.
//!
//! Exit status 0 when they agree (the same frames, the same cells, every power within the
//! rule), 1 when they do not (every difference counted, the first listed with its frame), 2
//! when an input cannot be read (the file and line named).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use kplace_radar::{PowerRule, compare_detection_files};

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
    let comparison = compare_detection_files(&args.reference, &args.candidate, rule, args.frames)?;
    let reference = args.reference.display().to_string();
    let candidate = args.candidate.display().to_string();
    if args.json {
        let value = comparison.to_json(&reference, &candidate);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", comparison.text(&reference, &candidate));
    }
    Ok(if comparison.agrees() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
