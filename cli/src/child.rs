//! `kplace child KIND JSON` (hidden): what a library asks of a child `kplace` process, as a
//! typed spec ([`kplace::session::child`]), turned into the options of the subcommand it stands for
//! and run as that subcommand runs them. So the libraries never write a command line of
//! this binary: a spec's fields are set on the options here, typed.

use std::ffi::OsString;

use anyhow::bail;
use clap::Args;
use kplace::session::child::{self, ChildSpec, RunChild, SendChild};
use kplace::session::children::PipelineChild;
use kplace_lab::hog::HogChild;

use super::hog::HogArgs;
use super::run::RunArgs;
use super::send::SendArgs;
use super::{Cli, Command};

/// Options of `kplace child`.
#[derive(Debug, Args)]
pub struct ChildArgs {
    /// The spec's kind: `pipeline`, `run`, `send` or `hog`.
    kind: String,
    /// The spec, as JSON.
    spec: String,
}

/// The command line `spec` stands for, with this process's verbosity (a pipeline's: its
/// parent's command line's).
pub fn cli(spec: ChildArgs, verbose: u8, quiet: u8) -> anyhow::Result<Cli> {
    let command = match spec.kind.as_str() {
        PipelineChild::KIND => return pipeline(child::parse(&spec.spec)?),
        RunChild::KIND => Command::Run(RunArgs::from_child(child::parse(&spec.spec)?)?),
        SendChild::KIND => Command::Send(SendArgs::from_child(child::parse(&spec.spec)?)),
        HogChild::KIND => Command::Hog(HogArgs::from_child(child::parse(&spec.spec)?)),
        other => bail!(
            "{} {other}: not a kind of child this kplace runs ({}, {}, {} or {})",
            child::SUBCOMMAND,
            PipelineChild::KIND,
            RunChild::KIND,
            SendChild::KIND,
            HogChild::KIND
        ),
    };
    Ok(Cli {
        command,
        verbose,
        quiet,
    })
}

/// A process-mode run's child: its parent's command line, parsed as the parent parsed it, run
/// as the one pipeline `spec` says.
fn pipeline(spec: PipelineChild) -> anyhow::Result<Cli> {
    let argv: Vec<OsString> = std::iter::once("kplace".into())
        .chain(spec.argv.iter().cloned())
        .collect();
    let mut cli = super::workloads::parse(argv)?;
    let Command::Run(args) = &mut cli.command else {
        bail!("a pipeline's parent command line must be a run");
    };
    args.for_pipeline(spec);
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use clap::Parser;
    use kplace::session::child::{ChildFrames, Pace};
    use kplace::session::several::PipelineMode;
    use kplace_lab::hog::CotenantSpec;
    use kplace_lab::hog::CpuMode;

    use super::*;

    /// What `spec` runs, as the child process parses and resolves its command line.
    fn through_a_child<S: ChildSpec>(spec: &S) -> String {
        let argv = ["kplace".to_string()]
            .into_iter()
            .chain(child::args(spec).unwrap());
        let Cli {
            command: Command::Child(args),
            verbose,
            quiet,
        } = Cli::try_parse_from(argv).unwrap()
        else {
            panic!("not the child subcommand");
        };
        let cli = self::cli(args, verbose, quiet).unwrap();
        format!("{:?} {:?}", (cli.verbose, cli.quiet), cli.command)
    }

    /// What the command line `line` runs, as the binary parses it.
    fn written(line: &str) -> String {
        let cli = super::super::workloads::parse(line.split_whitespace()).unwrap();
        format!("{:?} {:?}", (cli.verbose, cli.quiet), cli.command)
    }

    fn udp(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_pipeline_runs_its_parents_command_line_with_its_own_options() {
        let spec = PipelineChild {
            argv: "-v run --frames 5 --pipelines 3 --pipeline-mode process --source \
                   udp://127.0.0.1:9000 --ready-file all.ready --report all.json \
                   --detections d.txt --trace t.json --pfa 1e-6 --write-sinks out \
                   --report-every 1s --progress-out p.jsonl --done-times done.csv"
                .split_whitespace()
                .map(OsString::from)
                .collect(),
            udp: Some(udp("127.0.0.1:9001")),
            report: "r1.json".into(),
            ready_file: Some("r1.ready".into()),
            detections: Some("d.p1.txt".into()),
            done_times: Some("done.p1.csv".into()),
            trace: Some("t.p1.json".into()),
            progress_out: Some("p.p1.jsonl".into()),
            write_sinks: Some("out/p1".into()),
        };
        assert_eq!(
            through_a_child(&spec),
            written(
                "kplace -v run --frames 5 --source udp://127.0.0.1:9001 --ready-file r1.ready \
                 --report r1.json --detections d.p1.txt --trace t.p1.json --opt pfa=1e-6 \
                 --write-sinks out/p1 --report-every 1s --progress-out p.p1.jsonl \
                 --done-times done.p1.csv"
            )
        );
        // A replay's pipeline has neither a port nor a ready file, whatever its parent had.
        let replay = PipelineChild {
            argv: vec!["run".into(), "--pipelines".into(), "2".into()],
            udp: None,
            report: "r0.json".into(),
            ready_file: None,
            detections: None,
            done_times: None,
            trace: None,
            progress_out: None,
            write_sinks: None,
        };
        assert_eq!(
            through_a_child(&replay),
            written("kplace run --source replay --report r0.json")
        );
    }

    #[test]
    fn a_sweeps_receiver_means_the_run_it_stands_for() {
        let mut spec = RunChild::new("g.yaml".into(), udp("127.0.0.1:0"));
        spec.placement = Some("all-gpu".into());
        spec.adapt = vec!["a.yaml".into(), "b.yaml".into()];
        spec.budget = Some(Duration::from_micros(1500));
        spec.force = true;
        spec.shape = Some("1024x128".parse().unwrap());
        spec.frames_of = Some(ChildFrames::Workload {
            seed: 7,
            options: vec![("pfa".into(), "1e-6".into())],
        });
        spec.frames = Some(300);
        spec.warmup_frames = 20;
        spec.report = Some("t.json".into());
        spec.ready_file = Some("t.ready".into());
        spec.pipelines = 2;
        spec.pipeline_mode = PipelineMode::Process;
        spec.stream_rate = Some(250.5);
        spec.frame_timeout = Some(Duration::from_millis(40));
        spec.idle_timeout = Some(Duration::from_secs(1));
        spec.start_timeout = Some(Duration::from_secs(60));
        assert_eq!(
            through_a_child(&spec),
            written(
                "kplace run --source udp://127.0.0.1:0 --idle-timeout 1s --start-timeout 60s \
                 --graph g.yaml --placement all-gpu --adapt a.yaml --adapt b.yaml \
                 --budget 1500us --force --shape 1024x128 --seed 7 --opt pfa=1e-6 --frames 300 \
                 --warmup-frames 20 --report t.json --ready-file t.ready --pipelines 2 \
                 --pipeline-mode process --stream-rate 250.5 --frame-timeout 40ms"
            )
        );
        let mut ingest = RunChild::new("g.yaml".into(), udp("127.0.0.1:0"));
        ingest.ingest_only = true;
        ingest.frames = Some(2000);
        ingest.frames_of = Some(ChildFrames::Recording {
            path: "r.cf32".into(),
            check: Some("golden:dir".into()),
        });
        assert_eq!(
            through_a_child(&ingest),
            written(
                "kplace run --source udp://127.0.0.1:0 --graph g.yaml --ingest-only \
                 --frames 2000 --recording r.cf32 --check golden:dir"
            )
        );
    }

    #[test]
    fn a_sweeps_sender_means_the_send_it_stands_for() {
        let spec = SendChild {
            dest: udp("127.0.0.1:9000"),
            graph: Some("g.yaml".into()),
            shape: Some("1024x128".parse().unwrap()),
            frames_of: Some(ChildFrames::Workload {
                seed: 7,
                options: vec![("pfa".into(), "1e-6".into())],
            }),
            pace: Pace::Rate {
                frames_per_s: 250.5,
                tick: Some(Duration::from_micros(100)),
            },
            frames: 40,
            nice: Some(-5),
            times: Some("sent.csv".into()),
            report: Some("send.json".into()),
        };
        assert_eq!(
            through_a_child(&spec),
            written(
                "kplace send --dest 127.0.0.1:9000 --graph g.yaml --shape 1024x128 --seed 7 \
                 --opt pfa=1e-6 --rate 250.5 --pacing-tick 100us --frames 40 --nice=-5 \
                 --times sent.csv --report send.json"
            )
        );
        let burst = SendChild {
            dest: udp("127.0.0.1:9000"),
            graph: None,
            shape: None,
            frames_of: Some(ChildFrames::Recording {
                path: "r.cf32".into(),
                check: None,
            }),
            pace: Pace::Burst,
            frames: 2000,
            nice: None,
            times: None,
            report: None,
        };
        assert_eq!(
            through_a_child(&burst),
            written("kplace send --dest 127.0.0.1:9000 --recording r.cf32 --burst --frames 2000")
        );
    }

    #[test]
    fn a_cotenant_means_the_hog_it_stands_for() {
        let gpu = CotenantSpec::GpuHog {
            gpu: 1,
            size: 512,
            duty: 0.25,
            period_ms: 50,
        };
        assert_eq!(
            through_a_child(&gpu.child(Some(42))),
            written(
                "kplace hog gpu --gpu 1 --size 512 --duty 0.25 --period 50ms --report-every 1s \
                 --parent-pid 42"
            )
        );
        let cpu = CotenantSpec::CpuHog {
            threads: 3,
            mode: CpuMode::Membw,
            buffer_mib: 64,
        };
        assert_eq!(
            through_a_child(&cpu.child(None)),
            written("kplace hog cpu --threads 3 --mode membw --buffer-mib 64 --report-every 1s")
        );
    }

    #[test]
    fn an_unknown_kind_or_spec_is_refused_by_name() {
        let refused = |kind: &str, json: &str| {
            let argv = ["kplace", child::SUBCOMMAND, kind, json];
            let Command::Child(args) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("not the child subcommand");
            };
            self::cli(args, 0, 0).unwrap_err().to_string()
        };
        assert_eq!(
            refused("plot", "{}"),
            "child plot: not a kind of child this kplace runs (pipeline, run, send or hog)"
        );
        assert!(refused("run", "{}").starts_with("not a run request: missing field"));
    }
}
