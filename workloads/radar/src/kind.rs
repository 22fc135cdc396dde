//! The radar as a registered workload kind (`workload: fmcw-radar`): the scene's frames in,
//! its truth judging the clusters out. A program registers [`Radar`] in its
//! [`Registry`](kplace::workload::kind::Registry); runs find it by the name the graph file
//! gives.
//!
//! The CPI is the graph's own `N` by `M`, as the file gives them or as the run binds them
//! (`--shape`, `--cpi`, `--set N=...`). Guarantees: every option is checked, and the graph is
//! checked against the scene and this machine's memory, before any frame is prepared.

use std::fs::File;
use std::io::BufReader;
use std::num::NonZeroU64;
use std::path::Path;

use kplace::model::files::GraphFiles;
use kplace::model::graph::Graph;
use kplace::model::placement::Placement;
use kplace::workload::kind::{
    KindError, KindOptions, OptionSpec, Prepared, Request, ResultsComparison, ResultsFiles,
    ResultsPair, SweepWords, WorkloadKind,
};
use kplace::workload::{Verdict, Workload};

use crate::graph::{self, FitError, check_pfa};
use crate::run::{RunConfig, Setup};
use crate::scene::{default_targets, high_snr_targets};
use crate::{
    Cpi, DetectionReader, PowerRule, Scene, SceneConfig, Target, Verifier, VerifyConfig,
    compare_detection_files, details, verdict_text, verification,
};

/// The name graph files give the radar workload.
pub const NAME: &str = "fmcw-radar";

/// The radar workload kind.
pub struct Radar;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "target",
        value: "RANGE,VELOCITY,SNR",
        help: "a target in metres, metres per second and dB (default: docs/workload.md's three at 6 dB)",
        repeatable: true,
        flag: true,
    },
    OptionSpec {
        name: "high-snr",
        value: "",
        help: "the default targets at 25 dB",
        repeatable: false,
        flag: true,
    },
    OptionSpec {
        name: "scene-frames",
        value: "N",
        help: "distinct scene frames prepared; frame i shows scene frame i mod N (default: up to 64 within 256 MiB)",
        repeatable: false,
        flag: true,
    },
    OptionSpec {
        name: "pfa",
        value: "P",
        help: "the CFAR false-alarm probability, instead of the graph's (also the verifier's bound)",
        repeatable: false,
        flag: true,
    },
];

impl KindOptions for Radar {
    fn name(&self) -> &'static str {
        NAME
    }

    fn about(&self) -> &'static str {
        "an FMCW radar receiver on a generated scene of point targets in noise, its clusters checked against the scene's truth"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }
}

impl SweepWords for Radar {
    fn rate_unit(&self) -> &'static str {
        "CPI/s"
    }

    /// A frame is a CPI of chirps, each of samples.
    fn shape_words(&self) -> (Option<&'static str>, &'static [&'static str]) {
        (Some("cpi"), &["samples", "chirps"])
    }

    fn sweep_options(&self) -> &'static [(&'static str, &'static str)] {
        &[("scene-frames", "16")]
    }
}

impl ResultsFiles for Radar {
    fn results(&self) -> Option<&'static str> {
        Some("every frame's clusters, in the detection line format")
    }

    fn compare_results(&self, pair: &ResultsPair<'_>) -> Result<ResultsComparison, KindError> {
        let rule = match pair.rel_tol {
            None => PowerRule::Exact,
            Some(tolerance) => PowerRule::Relative(tolerance),
        };
        let comparison = compare_detection_files(pair.reference, pair.candidate, rule, pair.frames)
            .map_err(kind_error)?;
        let reference = pair.reference.display().to_string();
        let candidate = pair.candidate.display().to_string();
        Ok(ResultsComparison {
            agrees: comparison.agrees(),
            text: comparison.text(&reference, &candidate),
            json: comparison.to_json(&reference, &candidate),
        })
    }

    fn judge_results(&self, request: &Request<'_>, path: &Path) -> Result<Verdict, KindError> {
        let graph = request.files.shaped_graph()?;
        let cpi = cpi_of(&graph).map_err(kind_error)?;
        let (scene, asked, pfa) = scene_of(request, cpi)?;
        let pfa = match pfa {
            Some(pfa) => pfa,
            None => graph::graph_pfa(&graph).map_err(kind_error)?,
        };
        let period = graph::scene_frames(cpi, asked, request.frames).map_err(kind_error)?;
        let refused = |why: String| KindError::Kind(why.into());
        let file = File::open(path)
            .map_err(|e| refused(format!("cannot open {}: {e}", path.display())))?;
        // Frame by frame, ids below the frames sent: whatever the system wrote, this ends.
        let mut reader = DetectionReader::new(BufReader::new(file), &path.display().to_string())
            .map_err(kind_error)?
            .with_frame_limit(request.frames);
        if reader.cpi() != cpi {
            return Err(refused(format!(
                "{} reports CPI {}, not {cpi}",
                path.display(),
                reader.cpi()
            )));
        }
        let scene = Scene::new(scene).map_err(kind_error)?;
        let mut verifier = Verifier::new(scene, VerifyConfig::for_cpi(cpi, pfa), request.frames)
            .with_template_period(period);
        let mut clusters = 0;
        while let Some(report) = reader.next_frame().map_err(kind_error)? {
            clusters += report.clusters.len() as u64;
            verifier.check(report.frame_id, &report.clusters);
        }
        let summary = verifier.summary();
        let mut verification = verification(&verifier);
        verification.frames_failed +=
            summary.duplicate_reports + summary.unexpected_reports + summary.late_reports;
        let (_, text) = verdict_text(&verifier, request.frames);
        Ok(Verdict {
            verification,
            text,
            details: details(&verifier, clusters),
        })
    }
}

impl WorkloadKind for Radar {
    fn frame_period(&self, graph: &Graph) -> Option<std::time::Duration> {
        cpi_of(graph)
            .ok()
            .map(|cpi| std::time::Duration::from_secs_f64(cpi.period_s()))
    }

    fn prepare(&self, request: &Request<'_>) -> Result<Box<dyn Prepared>, KindError> {
        let graph = request.files.shaped_graph()?;
        let cpi = cpi_of(&graph).map_err(kind_error)?;
        let (scene, asked, pfa) = scene_of(request, cpi)?;
        let config = RunConfig {
            files: request.files.clone(),
            scene,
            scene_frames: graph::scene_frames(cpi, asked, request.frames).map_err(kind_error)?,
            pfa,
            pipelines: request.pipelines,
            replay: request.replay,
        };
        let setup = Setup::new(&config).map_err(kind_error)?;
        Ok(Box::new(PreparedRadar {
            files: config.files,
            setup,
        }))
    }
}

/// The scene a request asks for at `cpi` (its seed and targets), the distinct scene frames it
/// asks for, and the false-alarm probability it sets, each option checked.
fn scene_of(
    request: &Request<'_>,
    cpi: Cpi,
) -> Result<(SceneConfig, Option<NonZeroU64>, Option<f64>), KindError> {
    let options = request.options;
    let targets: Vec<Target> = options
        .all("target")
        .map(|t| {
            t.parse().map_err(|e| KindError::Option {
                name: "target".into(),
                why: format!("{t:?}: {e}"),
            })
        })
        .collect::<Result<_, _>>()?;
    let high_snr = options.switch("high-snr")?;
    if high_snr && !targets.is_empty() {
        return Err(KindError::Option {
            name: "high-snr".into(),
            why: "sets the targets: give it or targets, not both".into(),
        });
    }
    let pfa = options.parse::<f64>("pfa")?;
    if let Some(pfa) = pfa {
        check_pfa(pfa, "--pfa").map_err(kind_error)?;
    }
    let asked = options.parse::<NonZeroU64>("scene-frames")?;
    let mut scene = SceneConfig::new(cpi);
    scene.seed = request.seed;
    scene.targets = if high_snr {
        high_snr_targets()
    } else if targets.is_empty() {
        default_targets()
    } else {
        targets
    };
    Ok((scene, asked, pfa))
}

/// The CPI a radar graph is bound to: its `N` (samples) by `M` (chirps).
pub fn cpi_of(graph: &Graph) -> Result<Cpi, FitError> {
    let dim = |name: &str| {
        graph
            .dims
            .get(name)
            .and_then(|&v| usize::try_from(v).ok())
            .filter(|&v| u32::try_from(v).is_ok())
            .ok_or_else(|| FitError::Dimensions {
                graph: graph.path.clone(),
                missing: name.to_string(),
            })
    };
    Ok(Cpi {
        samples: dim("N")?,
        chirps: dim("M")?,
    })
}

fn kind_error(e: impl std::error::Error + Send + Sync + 'static) -> KindError {
    KindError::Kind(Box::new(e))
}

/// A radar run's scene and graph, prepared once for every pipeline.
struct PreparedRadar {
    files: GraphFiles,
    setup: Setup,
}

impl Prepared for PreparedRadar {
    fn workload(&self) -> &dyn Workload {
        &self.setup
    }

    fn load(&self) -> Result<(Graph, Placement), KindError> {
        graph::load_files(&self.files, self.setup.cpi(), self.setup.pfa_set()).map_err(kind_error)
    }

    fn load_as(&self, placement: &Placement) -> Result<(Graph, Placement), KindError> {
        let files = self.files.with_placement(placement.clone());
        graph::load_files(&files, self.setup.cpi(), self.setup.pfa_set()).map_err(kind_error)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use kplace::workload::kind::{Registry, WorkloadOptions};

    use super::*;

    fn radar_graph() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("graph.yaml")
    }

    fn files_of(graph: &Path, dims: &[(&str, u64)]) -> GraphFiles {
        let placement = radar_graph().with_file_name("placements/all-cpu.yaml");
        GraphFiles {
            dims: dims.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            ..GraphFiles::read(graph, &placement).unwrap()
        }
    }

    fn files(dims: &[(&str, u64)]) -> GraphFiles {
        files_of(&radar_graph(), dims)
    }

    fn prepare(files: &GraphFiles, options: &[(&str, &str)]) -> Result<Box<dyn Prepared>, String> {
        let mut given = WorkloadOptions::default();
        for (n, v) in options {
            given.push(*n, *v);
        }
        let request = Request {
            files,
            options: &given,
            recording: None,
            seed: 3,
            frames: 4,
            pipelines: 0,
            replay: true,
        };
        let registry = Registry::new().register(Radar);
        let kind = registry.kind_for(&request).map_err(|e| e.to_string())?;
        kind.prepare(&request).map_err(|e| e.to_string())
    }

    #[test]
    fn a_sweep_s_options_are_the_radar_s_own_and_the_registry_finds_every_kind() {
        let mut options = kplace::workload::kind::WorkloadOptions::default();
        for &(name, value) in Radar.sweep_options() {
            options.push(name, value);
        }
        assert_eq!(options.get("scene-frames"), Some("16"));
        options.check(&Radar).unwrap();
        let registry = Registry::new().register(Radar);
        assert_eq!(registry.get(NAME).map(|k| k.name()), Some(NAME));
        assert_eq!(
            registry.shared("recording").map(|k| k.name()),
            Some("recording")
        );
        assert!(registry.get("nothing").is_none() && registry.shared("nothing").is_none());
    }

    #[test]
    fn the_cpi_is_the_graph_s_own_or_what_the_run_binds() {
        let prepared = prepare(&files(&[]), &[]).unwrap();
        let workload = prepared.workload();
        assert_eq!(
            workload.shape().to_string(),
            "1024x128",
            "the file's N and M"
        );
        let prepared = prepare(&files(&[("N", 256), ("M", 32)]), &[]).unwrap();
        let workload = prepared.workload();
        assert_eq!(workload.shape().to_string(), "256x32");
        let frames = workload.frames().unwrap();
        assert_eq!(
            frames.len(),
            4,
            "one distinct frame per frame run, up to 64"
        );
        assert!(frames.iter().all(|f| f.len() == 256 * 32 * 4));
        assert_eq!(
            workload.real_time_period(),
            Some(std::time::Duration::from_secs_f64(32.0 * 256.0 / 20.48e6))
        );
    }

    #[test]
    fn options_are_checked_before_any_frame_is_prepared() {
        let small = files(&[("N", 256), ("M", 32)]);
        for (options, want) in [
            (
                &[("target", "30,2")][..],
                "workload option target \"30,2\": ",
            ),
            (
                &[("target", "30,2,10"), ("high-snr", "true")][..],
                "high-snr sets the targets",
            ),
            (&[("pfa", "0.5")][..], "--pfa must be in (0, 0.01]"),
            (
                &[("scene-frames", "0")][..],
                "workload option scene-frames \"0\": ",
            ),
            (
                &[("seed", "1")][..],
                "seed is not an option of workload fmcw-radar",
            ),
        ] {
            let e = prepare(&small, options).err().unwrap();
            assert!(e.contains(want), "{options:?}: {e}");
        }
        let one = prepare(&small, &[("target", "30,2,25"), ("scene-frames", "2")]).unwrap();
        assert_eq!(one.workload().frames().unwrap().len(), 2);
    }

    #[test]
    fn a_graph_without_n_and_m_is_refused_naming_them() {
        let text = std::fs::read_to_string(radar_graph())
            .unwrap()
            .replace("N: 1024", "C: 1024")
            .replace("[M, N]", "[M, C]")
            .replace("[N, M]", "[C, M]")
            .replace("$N", "$C");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("renamed.yaml");
        std::fs::write(&path, text).unwrap();
        let e = prepare(&files_of(&path, &[]), &[]).err().unwrap();
        assert!(
            e.contains("binds its CPI to dimensions N (samples) and M (chirps); N is missing"),
            "{e}"
        );
    }
}
