//! The pictures of a sweep, from its typed results files ([`SweepFile`]): what `kplace plot`
//! and `kplace bisect-rate` write beside the results.
//!
//! [`write_all`] writes five SVGs (plotters' SVG backend without font features: text stays
//! `<text>` elements for the viewer to render), every rate in the sweep's unit (CPI/s for the
//! radar, frames/s for a recording):
//!
//! - `latency.svg` (`latency`): post-frame p99 against offered rate, every trial a marker
//!   filled by what the first goal counts of it (low-loss, high-loss, not offered), the
//!   latency budget as a line;
//! - `sustained.svg` (`sustained`): the first goal's answer per frame and system, median and
//!   range over repeats, every other goal's answer marked on the bar, against the workload's
//!   real-time rate;
//! - `loads.svg` (`loads`): every load a search measured, classified for every goal, each
//!   goal's answer ringed;
//! - `cdf.svg` (`cdf`): the post-frame latency distribution of each system at the common
//!   start rate;
//! - `stages.svg` (`stages`): per-stage time per frame at the sustained rate.
//!
//! [`timeline`] draws a window of one run's timeline (`kplace run --trace`), for
//! `kplace plot-trace`.
//!
//! Guarantees, so that a plot never misleads: each plot's title says what it shows and its
//! notes the budget rule the trials were gated on, every reason in one short line
//! ([`short_reason`]: no library search or other machine detail); nothing is invented: a
//! search without a rate has no bar but the words `no rate: ...` at the axis, a trial without
//! a histogram or stage times is shown as missing, with the reason, never as a zero; every
//! series has its own colour (colour-blind safe) and marker shape ([`style`]); legends sit in
//! their own panel beside the data and list only what is drawn. Results files of versions 2
//! and 3 are read as the current version (`upgrade`).

mod axis;
mod cdf;
mod frame;
mod latency;
mod loads;
mod read;
mod stages;
pub mod style;
mod sustained;
pub mod switches;
#[cfg(test)]
mod tests;
pub mod timeline;
mod upgrade;

use std::path::{Path, PathBuf};

use crate::rate::LatencyBudget;
use crate::rate::sweep::{SearchEntry, SweepFile};
use kplace::model::shape::FrameShape;

pub use read::read_results;

/// Why plots could not be written, or a results file read.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output directory could not be created.
    #[error("creating the plot directory: {0}")]
    Directory(kplace::os::write::WriteError),
    /// A plot could not be written where it was asked for.
    #[error(transparent)]
    Place(#[from] kplace::os::write::WriteError),
    /// The SVG backend failed.
    #[error("writing plot {}: {message}", path.display())]
    Draw {
        /// The plot's file.
        path: PathBuf,
        /// The backend's error, in words.
        message: String,
    },
    /// A trial's latency histogram is not what the run reports carry.
    #[error("{at}: {message}")]
    Histogram {
        /// The search and trial it belongs to.
        at: String,
        /// What is wrong with it.
        message: crate::rate::gates::HistogramError,
    },
    /// A results file cannot be read, or is not one.
    #[error("{message}")]
    Results {
        /// The file and what is wrong with it.
        message: String,
    },
}

/// A drawing error, in words: plotters' errors are generic over the backend, and only their
/// text reaches a [`PlotError::Draw`].
#[derive(Debug)]
pub struct DrawError {
    /// What plotters said.
    text: String,
}

impl<E: std::error::Error + Send + Sync> From<plotters::drawing::DrawingAreaErrorKind<E>>
    for DrawError
{
    fn from(e: plotters::drawing::DrawingAreaErrorKind<E>) -> Self {
        DrawError {
            text: e.to_string(),
        }
    }
}

/// The file names [`write_all`] writes, in order.
pub const FILES: [&str; 5] = [
    "latency.svg",
    "sustained.svg",
    "cdf.svg",
    "stages.svg",
    "loads.svg",
];

/// Writes the five plots of `files`' searches (merged, in order) into `out` (created if
/// needed) and returns their paths.
pub fn write_all(files: &[SweepFile], out: &Path) -> Result<Vec<PathBuf>, PlotError> {
    kplace::os::write::create_dir_all(out).map_err(PlotError::Directory)?;
    let sweep = Sweep::new(files);
    let paths: Vec<PathBuf> = FILES.iter().map(|f| out.join(f)).collect();
    latency::write(&paths[0], &sweep)?;
    sustained::write(&paths[1], &sweep)?;
    cdf::write(&paths[2], &sweep)?;
    stages::write(&paths[3], &sweep)?;
    loads::write(&paths[4], &sweep)?;
    Ok(paths)
}

/// The searches of a sweep grouped by system and frame shape, in the order first searched.
pub struct Sweep<'a> {
    /// One group per system and frame shape that was searched.
    pub groups: Vec<Group<'a>>,
    /// Entries of systems that were not searched at a frame shape.
    pub skipped: Vec<&'a SearchEntry>,
}

/// Every repeat of one system at one frame shape.
pub struct Group<'a> {
    /// The system.
    pub system: &'a str,
    /// The frame shape.
    pub shape: &'a FrameShape,
    /// Its searches, in repeat order.
    pub searches: Vec<&'a SearchEntry>,
}

impl Group<'_> {
    /// `system SHAPE`.
    pub fn label(&self) -> String {
        format!("{} {}", self.system, self.shape)
    }

    /// The budget its trials were gated on (the first repeat's).
    pub fn budget(&self) -> LatencyBudget {
        self.searches[0].latency_budget
    }
}

impl<'a> Sweep<'a> {
    fn new(files: &'a [SweepFile]) -> Self {
        let mut groups: Vec<Group<'a>> = Vec::new();
        let mut skipped = Vec::new();
        for entry in files.iter().flat_map(|f| &f.searches) {
            if entry.skipped.is_some() {
                skipped.push(entry);
                continue;
            }
            match groups
                .iter_mut()
                .find(|g| g.system == entry.system && *g.shape == entry.shape)
            {
                Some(g) => g.searches.push(entry),
                None => groups.push(Group {
                    system: &entry.system,
                    shape: &entry.shape,
                    searches: vec![entry],
                }),
            }
        }
        for g in &mut groups {
            g.searches.sort_by_key(|s| s.repeat);
        }
        Self { groups, skipped }
    }

    /// The unit of the sweep's rates: the first search's (`frames/s` when nothing was searched).
    pub fn unit(&self) -> &'a str {
        self.groups
            .first()
            .map_or("frames/s", |g| g.searches[0].unit.as_str())
    }

    /// The frame shapes searched, in order.
    pub fn shapes(&self) -> Vec<&'a FrameShape> {
        let mut shapes: Vec<&FrameShape> = Vec::new();
        for g in &self.groups {
            if !shapes.contains(&g.shape) {
                shapes.push(g.shape);
            }
        }
        shapes
    }

    /// The systems searched, in order.
    pub fn systems(&self) -> Vec<&'a str> {
        let mut systems: Vec<&str> = Vec::new();
        for g in &self.groups {
            if !systems.contains(&g.system) {
                systems.push(g.system);
            }
        }
        systems
    }

    /// Each distinct budget and the frame shapes gated on it, in order.
    pub fn budgets(&self) -> Vec<(LatencyBudget, Vec<&'a FrameShape>)> {
        let mut budgets: Vec<(LatencyBudget, Vec<&FrameShape>)> = Vec::new();
        for g in &self.groups {
            for s in &g.searches {
                match budgets.iter_mut().find(|(b, _)| *b == s.latency_budget) {
                    Some((_, cpis)) if !cpis.contains(&g.shape) => cpis.push(g.shape),
                    Some(_) => {}
                    None => budgets.push((s.latency_budget, vec![g.shape])),
                }
            }
        }
        budgets
    }

    /// The notes every plot carries: the budget rule and what was not searched.
    pub fn notes(&self) -> Vec<String> {
        let budgets = self.budgets();
        let mut notes = Vec::new();
        if budgets.len() == 1 {
            notes.push(format!("gated on the latency budget {}", budgets[0].0));
        } else if !budgets.is_empty() {
            let each: Vec<String> = budgets
                .iter()
                .map(|(b, shapes)| {
                    let shapes: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
                    format!("{b} at {}", shapes.join(", "))
                })
                .collect();
            notes.push(format!("gated on the latency budget {}", each.join("; ")));
        }
        if !self.skipped.is_empty() {
            let each: Vec<String> = self
                .skipped
                .iter()
                .map(|s| {
                    format!(
                        "{} at {} ({})",
                        s.system,
                        s.shape,
                        short_reason(s.skipped.as_deref().unwrap_or_default())
                    )
                })
                .collect();
            notes.push(format!("not searched: {}", each.join("; ")));
        }
        notes
    }
}

/// The most characters of a reason a plot writes: a line of a note, not a report.
pub const REASON_CHARS: usize = 96;

/// `reason` cut to what a plot's note has room for: its first line and first clause (up to a
/// `;`), without parenthesised details (a library search, a file's place), at most
/// [`REASON_CHARS`] characters, ending in `...` where cut. The whole reason stays in the
/// results file and the table.
pub fn short_reason(reason: &str) -> String {
    let mut depth = 0usize;
    let mut kept = String::new();
    for c in reason.lines().next().unwrap_or_default().chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => break,
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    let kept = kept
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" ,", ",");
    let kept = kept.trim_end_matches([',', ':', ' ']);
    if kept.chars().count() <= REASON_CHARS {
        return kept.to_string();
    }
    let mut cut = String::new();
    for word in kept.split(' ') {
        if cut.chars().count() + word.chars().count() + 1 > REASON_CHARS - 3 {
            break;
        }
        if !cut.is_empty() {
            cut.push(' ');
        }
        cut.push_str(word);
    }
    format!("{}...", cut.trim_end_matches([',', ':']))
}

/// Whether two rates are the same rate (written and read back as JSON numbers).
pub fn same_rate(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The median of `values` (the mean of the two middle ones of an even count); `None` when
/// empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}
