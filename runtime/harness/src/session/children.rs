//! `kplace run --pipelines N --pipeline-mode process`: N pipelines as child `kplace run`
//! processes, one pipeline each, run by [`super::several::in_processes`].
//!
//! # Guarantees
//! - Each child gets a [`PipelineChild`] spec ([`super::child`]): the parent's command line as
//!   given, and the options the parent sets for it, typed: its own receiver port (the first
//!   pipeline's plus its index, or an ephemeral port of its own), ready file and report, and
//!   its own output files (`FILE.p<i>`, sink files in `DIR/p<i>`). The binary parses the
//!   command line as the parent did and sets those options over it, so every other option
//!   reaches every child, and the child runs one pipeline.
//! - The children's reports and ready files live in a directory of this run's own in the
//!   system's temporary directory, removed when the run ends; one a killed run left behind
//!   (its process gone) is removed by the next run.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kplace_report::run::PipelineEntry;
use serde::{Deserialize, Serialize};

use super::child::{self, ChildSpec, ChildSpecError};
use super::several::{
    ChildError, ChildOutcome, ChildPipeline, MultiRun, PipelineMode, failed, in_processes,
    pipeline_addr, pipeline_path,
};

/// What a process-mode run gives each child of its own; every other option of the parent's
/// command line is passed on as given.
#[derive(Clone, Debug, Default)]
pub struct ChildOptions {
    /// The parent's arguments after the program's name, as given.
    pub argv: Vec<OsString>,
    /// How many pipelines, a child each.
    pub pipelines: usize,
    /// The first pipeline's receiver address; `None` for a replay.
    pub udp: Option<SocketAddr>,
    /// Where each child writes what its workload reads from its frames (`FILE.p<i>`).
    pub detections: Option<PathBuf>,
    /// Where each child writes its frames' completion times (`FILE.p<i>`).
    pub done_times: Option<PathBuf>,
    /// Where each child writes its timeline (`FILE.p<i>`).
    pub trace: Option<PathBuf>,
    /// Where each child writes its sink files (`DIR/p<i>`).
    pub write_sinks: Option<PathBuf>,
    /// Where each child writes its progress lines (`FILE.p<i>`).
    pub progress_out: Option<PathBuf>,
}

/// One child of a process-mode run: the parent's command line, and what the child runs
/// instead of the parent's own options of the same meaning (one pipeline, its source, its
/// files). A `None` output is one the child does not write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PipelineChild {
    /// The parent's arguments after the program's name, as given.
    pub argv: Vec<OsString>,
    /// Its receiver's address; `None`: a replay.
    pub udp: Option<SocketAddr>,
    /// Where it writes its run report.
    pub report: PathBuf,
    /// Where it says it takes packets (a receiver only).
    pub ready_file: Option<PathBuf>,
    /// Where it writes what its workload reads from its frames.
    pub detections: Option<PathBuf>,
    /// Where it writes its frames' completion times.
    pub done_times: Option<PathBuf>,
    /// Where it writes its timeline.
    pub trace: Option<PathBuf>,
    /// Where it writes its progress lines.
    pub progress_out: Option<PathBuf>,
    /// Where it writes its sink files.
    pub write_sinks: Option<PathBuf>,
}

impl ChildSpec for PipelineChild {
    const KIND: &'static str = "pipeline";
}

/// Why the children could not run.
#[derive(Debug, thiserror::Error)]
pub enum ChildrenError {
    /// The directory for the children's reports could not be made.
    #[error("cannot create a directory for the pipelines' reports")]
    Dir(#[source] std::io::Error),
    /// The first pipeline's port plus the pipeline count passes the last port.
    #[error("the source's port plus the pipeline count exceeds 65535")]
    PortRange,
    /// A child's spec could not be written.
    #[error(transparent)]
    Spec(#[from] ChildSpecError),
    /// A child could not be started, made ready or waited for.
    #[error(transparent)]
    Child(#[from] ChildError),
}

/// Runs `exe` (this program) once per pipeline with `options` (see the module's guarantees),
/// waiting up to `ready_timeout` for each receiving child to take packets, then announcing
/// them all (on stderr, and in `ready_file`); each child's outcome, in pipeline order.
pub fn run_children(
    exe: &Path,
    options: &ChildOptions,
    ready_file: Option<&Path>,
    ready_timeout: Duration,
) -> Result<Vec<ChildOutcome>, ChildrenError> {
    let dir = pipeline_dir(&std::env::temp_dir()).map_err(ChildrenError::Dir)?;
    let children = (0..options.pipelines)
        .map(|i| child(exe, options, dir.path(), i))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(in_processes(children, ready_file, ready_timeout)?)
}

/// Pipeline `i`'s spec: its own options, its report and ready file in `dir`.
pub fn pipeline_child(
    options: &ChildOptions,
    dir: &Path,
    i: usize,
) -> Result<PipelineChild, ChildrenError> {
    let udp = options
        .udp
        .map(|addr| pipeline_addr(addr, i).ok_or(ChildrenError::PortRange))
        .transpose()?;
    let own = |path: &Option<PathBuf>| path.as_deref().map(|p| pipeline_path(p, Some(i)));
    Ok(PipelineChild {
        argv: options.argv.clone(),
        udp,
        report: dir.join(format!("pipeline-{i}.json")),
        ready_file: udp.map(|_| dir.join(format!("pipeline-{i}.ready"))),
        detections: own(&options.detections),
        done_times: own(&options.done_times),
        trace: own(&options.trace),
        progress_out: own(&options.progress_out),
        write_sinks: options
            .write_sinks
            .as_ref()
            .map(|d| d.join(format!("p{i}"))),
    })
}

/// Pipeline `i`'s child: [`pipeline_child`]'s spec, run by `exe`.
fn child(
    exe: &Path,
    options: &ChildOptions,
    dir: &Path,
    i: usize,
) -> Result<ChildPipeline, ChildrenError> {
    let spec = pipeline_child(options, dir, i)?;
    let outputs = [
        &spec.detections,
        &spec.done_times,
        &spec.trace,
        &spec.progress_out,
        &spec.write_sinks,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect();
    Ok(ChildPipeline {
        command: child::command(exe, &spec)?,
        report: spec.report,
        ready: spec.ready_file,
        outputs,
    })
}

/// The multi-run of the children's outcomes: each one's report, or why it has none.
pub fn multi_run(outcomes: Vec<ChildOutcome>) -> MultiRun {
    let mut run = MultiRun::new(PipelineMode::Process);
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome.report {
            Ok(report) => run.pipelines.push(PipelineEntry::Ran(Box::new(report))),
            Err(why) => {
                run.failures.push(format!("pipeline {i} {why}"));
                run.pipelines.push(failed(why.to_string()));
            }
        }
    }
    run
}

/// The start of the name of the directory a process-mode run keeps its pipelines' reports
/// in: `kplace-pipelines-PID-XXXXXX` in the system's temporary directory.
const PIPELINE_DIR_PREFIX: &str = "kplace-pipelines-";

/// A directory in `tmp` for this run's pipeline reports, removed when the run ends; first,
/// those of runs whose process is gone (killed before it could remove its own) are removed.
fn pipeline_dir(tmp: &Path) -> std::io::Result<tempfile::TempDir> {
    remove_orphaned_pipeline_dirs(tmp);
    tempfile::Builder::new()
        .prefix(&format!("{PIPELINE_DIR_PREFIX}{}-", std::process::id()))
        .tempdir_in(tmp)
}

/// Removes every `kplace-pipelines-PID-*` directory in `tmp` whose process no longer runs.
fn remove_orphaned_pipeline_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PIPELINE_DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_killed_runs_pipeline_directory_is_removed_by_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        // A process id above Linux's largest: that run is gone.
        let orphan = tmp
            .path()
            .join(format!("{PIPELINE_DIR_PREFIX}4194305-abc123"));
        std::fs::create_dir(&orphan).unwrap();
        std::fs::write(orphan.join("pipeline-0.json"), "{}").unwrap();
        let unrelated = tmp.path().join("kplace-pipelines-notapid");
        std::fs::create_dir(&unrelated).unwrap();
        let mine = pipeline_dir(tmp.path()).unwrap();
        assert!(!orphan.exists(), "the gone run's directory is removed");
        assert!(
            unrelated.exists(),
            "a name without a process id is not ours to remove"
        );
        // A second run beside this one keeps this one's directory: its process runs.
        let second = pipeline_dir(tmp.path()).unwrap();
        assert!(mine.path().exists() && second.path().exists());
        let kept = mine.path().to_path_buf();
        drop(mine);
        assert!(!kept.exists(), "a run removes its own when it ends");
    }

    #[test]
    fn each_child_gets_its_own_port_and_files() {
        let argv = os(&["run", "--frames", "5", "--detections", "d.txt"]);
        let options = ChildOptions {
            argv: argv.clone(),
            pipelines: 2,
            udp: Some("127.0.0.1:9000".parse().unwrap()),
            detections: Some("d.txt".into()),
            write_sinks: Some("sinks".into()),
            ..ChildOptions::default()
        };
        let dir = Path::new("/tmp/x");
        let spec = pipeline_child(&options, dir, 1).unwrap();
        assert_eq!(
            spec,
            PipelineChild {
                argv,
                udp: Some("127.0.0.1:9001".parse().unwrap()),
                report: dir.join("pipeline-1.json"),
                ready_file: Some(dir.join("pipeline-1.ready")),
                detections: Some("d.p1.txt".into()),
                done_times: None,
                trace: None,
                progress_out: None,
                write_sinks: Some("sinks/p1".into()),
            }
        );
        let made = child(Path::new("kplace"), &options, dir, 1).unwrap();
        let args: Vec<_> = made.command.get_args().collect();
        assert_eq!(args[..2], [child::SUBCOMMAND, PipelineChild::KIND]);
        let json = args[2].to_str().unwrap();
        assert_eq!(child::parse::<PipelineChild>(json).unwrap(), spec);
        assert_eq!(made.ready, spec.ready_file);
        assert_eq!(made.outputs, [PathBuf::from("d.p1.txt"), "sinks/p1".into()]);
        // A replay has no port and no ready file.
        let replay = ChildOptions {
            udp: None,
            ..options.clone()
        };
        let spec = pipeline_child(&replay, dir, 0).unwrap();
        assert_eq!((spec.udp, spec.ready_file), (None, None));
        let top = ChildOptions {
            udp: Some("127.0.0.1:65535".parse().unwrap()),
            ..options
        };
        assert!(matches!(
            child(Path::new("kplace"), &top, dir, 1),
            Err(ChildrenError::PortRange)
        ));
    }
}
