//! `kplace run --pipelines N --pipeline-mode process`: N pipelines as child `kplace run`
//! processes, one pipeline each, run by [`super::several::in_processes`].
//!
//! # Guarantees
//! - Each child gets the parent's command line as given, but for the options the parent sets
//!   per child ([`PER_CHILD`]): its own receiver port (the first pipeline's plus its index,
//!   or an ephemeral port of its own), ready file and report, and its own output files
//!   (`FILE.p<i>`, sink files in `DIR/p<i>`). So every other option reaches every child.
//! - The children's reports and ready files live in a directory of this run's own in the
//!   system's temporary directory, removed when the run ends; one a killed run left behind
//!   (its process gone) is removed by the next run.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kplace_report::run::PipelineEntry;

use super::several::{
    ChildError, ChildOutcome, ChildPipeline, MultiRun, PipelineMode, failed, in_processes,
    pipeline_addr, pipeline_path,
};

/// The options the parent sets for each child itself, in either `--flag value` or
/// `--flag=value` form; [`child_args`] leaves them out.
pub const PER_CHILD: [&str; 10] = [
    "--write-sinks",
    "--trace",
    "--progress-out",
    "--pipelines",
    "--pipeline-mode",
    "--source",
    "--report",
    "--detections",
    "--done-times",
    "--ready-file",
];

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

/// Why the children could not run.
#[derive(Debug, thiserror::Error)]
pub enum ChildrenError {
    /// The directory for the children's reports could not be made.
    #[error("cannot create a directory for the pipelines' reports")]
    Dir(#[source] std::io::Error),
    /// The first pipeline's port plus the pipeline count passes the last port.
    #[error("--source: the port plus the pipeline count exceeds 65535")]
    PortRange,
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
    let base = child_args(&options.argv);
    let children = (0..options.pipelines)
        .map(|i| child(exe, &base, options, dir.path(), i))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(in_processes(children, ready_file, ready_timeout)?)
}

/// Pipeline `i`'s child: `base`, then its own options, its report and ready file in `dir`.
fn child(
    exe: &Path,
    base: &[OsString],
    options: &ChildOptions,
    dir: &Path,
    i: usize,
) -> Result<ChildPipeline, ChildrenError> {
    let report = dir.join(format!("pipeline-{i}.json"));
    let mut command = Command::new(exe);
    command.args(base).arg("--report").arg(&report);
    let ready = match options.udp {
        None => {
            command.args(["--source", "replay"]);
            None
        }
        Some(addr) => {
            let addr = pipeline_addr(addr, i).ok_or(ChildrenError::PortRange)?;
            let ready = dir.join(format!("pipeline-{i}.ready"));
            command
                .arg("--source")
                .arg(format!("udp://{addr}"))
                .arg("--ready-file")
                .arg(&ready);
            Some(ready)
        }
    };
    let files = [
        ("--detections", &options.detections),
        ("--done-times", &options.done_times),
        ("--trace", &options.trace),
        ("--progress-out", &options.progress_out),
    ];
    let mut outputs = Vec::new();
    for (flag, path) in files {
        if let Some(path) = path {
            let path = pipeline_path(path, Some(i));
            command.arg(flag).arg(&path);
            outputs.push(path);
        }
    }
    if let Some(dir) = &options.write_sinks {
        let dir = dir.join(format!("p{i}"));
        command.arg("--write-sinks").arg(&dir);
        outputs.push(dir);
    }
    Ok(ChildPipeline {
        command,
        report,
        ready,
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

/// Options each child gets from the parent's command line `argv`: everything but
/// [`PER_CHILD`], in either `--flag value` or `--flag=value` form.
pub fn child_args(argv: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(argv.len());
    let mut skip_value = false;
    for arg in argv {
        if skip_value {
            skip_value = false;
            continue;
        }
        let text = arg.to_string_lossy();
        if let Some(flag) = PER_CHILD.iter().find(|f| text.starts_with(**f)) {
            if text.len() == flag.len() {
                skip_value = true;
                continue;
            }
            if text.as_bytes().get(flag.len()) == Some(&b'=') {
                continue;
            }
        }
        out.push(arg.clone());
    }
    out
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
    fn children_get_every_option_but_the_per_child_ones() {
        let argv = os(&[
            "run",
            "--pipelines",
            "3",
            "--pipeline-mode=process",
            "--cpi",
            "2048x256",
            "--source",
            "udp://127.0.0.1:9000",
            "--report=r.json",
            "--detections",
            "d.txt",
            "--frames",
            "10",
            "--placement",
            "workloads/radar/placements/all-gpu.yaml",
        ]);
        assert_eq!(
            child_args(&argv),
            os(&[
                "run",
                "--cpi",
                "2048x256",
                "--frames",
                "10",
                "--placement",
                "workloads/radar/placements/all-gpu.yaml"
            ])
        );
    }

    #[test]
    fn each_child_gets_its_own_port_and_files() {
        let options = ChildOptions {
            argv: os(&["run", "--frames", "5", "--detections", "d.txt"]),
            pipelines: 2,
            udp: Some("127.0.0.1:9000".parse().unwrap()),
            detections: Some("d.txt".into()),
            write_sinks: Some("sinks".into()),
            ..ChildOptions::default()
        };
        let base = child_args(&options.argv);
        let dir = Path::new("/tmp/x");
        let made = child(Path::new("kplace"), &base, &options, dir, 1).unwrap();
        let args: Vec<_> = made.command.get_args().collect();
        assert_eq!(
            args,
            [
                "run",
                "--frames",
                "5",
                "--report",
                "/tmp/x/pipeline-1.json",
                "--source",
                "udp://127.0.0.1:9001",
                "--ready-file",
                "/tmp/x/pipeline-1.ready",
                "--detections",
                "d.p1.txt",
                "--write-sinks",
                "sinks/p1",
            ]
        );
        assert_eq!(
            made.ready.as_deref(),
            Some(dir.join("pipeline-1.ready").as_path())
        );
        let top = ChildOptions {
            udp: Some("127.0.0.1:65535".parse().unwrap()),
            ..options
        };
        assert!(matches!(
            child(Path::new("kplace"), &base, &top, dir, 1),
            Err(ChildrenError::PortRange)
        ));
    }
}
