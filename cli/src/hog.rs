//! `kplace hog`: a co-tenant that loads the GPU or the CPUs in its own process and prints the
//! rate it achieves as JSON lines (see `kplace_lab::hog`).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use kplace_lab::hog::cpu::{self, CpuHogConfig};
use kplace_lab::hog::gpu::{self, GpuHogConfig};
use kplace_lab::hog::{CotenantSpec, HogChild};
use kplace_lab::hog::{CpuMode, HogLine, stop_on_signal_or_parent_death};

/// Options of `kplace hog`.
#[derive(Debug, Args)]
pub struct HogArgs {
    #[command(subcommand)]
    hog: Hog,
}

#[derive(Debug, Subcommand)]
enum Hog {
    /// A cuBLAS SGEMM loop on one GPU with a duty cycle; prints its TFLOP/s.
    Gpu(GpuArgs),
    /// Spinning threads, or a memory-bandwidth hog; prints iterations/s or GB/s.
    Cpu(CpuArgs),
}

/// Options every hog takes.
#[derive(Debug, Args)]
struct Common {
    /// Stop after this long, e.g. `30s` (a bare number is seconds) [default: run until
    /// SIGINT/SIGTERM or the parent dies].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::or_s, alias = "seconds")]
    duration: Option<Duration>,
    /// The time between two report lines.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::duration::or_s, alias = "report-every-s")]
    report_every: Duration,
    /// The pid the parent had when it started this hog: the hog stops if its parent is no
    /// longer that process (set by `Cotenant::start`).
    #[arg(long, value_name = "PID", hide = true)]
    parent_pid: Option<u32>,
}

#[derive(Debug, Args)]
struct GpuArgs {
    /// The device ordinal.
    #[arg(long, value_name = "N", default_value_t = 0)]
    gpu: u32,
    /// The matrices' side n (three n x n f32 matrices).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    size: usize,
    /// Fraction of each period spent running GEMMs, in [0, 1].
    #[arg(long, value_name = "FRACTION", default_value_t = 1.0)]
    duty: f64,
    /// The duty cycle's period.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = crate::duration::or_ms, alias = "period-ms")]
    period: Duration,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct CpuArgs {
    /// Worker threads [default: every core this process may use].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// spin: take cores; membw: stream through a buffer much larger than the last-level cache.
    #[arg(long, value_enum, default_value_t = CpuMode::Spin)]
    mode: CpuMode,
    /// membw: the total buffer in MiB, split between the threads.
    #[arg(long, value_name = "MIB", default_value_t = CpuHogConfig::DEFAULT_BUFFER_BYTES >> 20)]
    buffer_mib: usize,
    #[command(flatten)]
    common: Common,
}

impl HogArgs {
    /// The options a library's `spec` stands for ([`kplace::session::child`]), run until stopped.
    pub(crate) fn from_child(spec: HogChild) -> HogArgs {
        let common = Common {
            duration: None,
            report_every: spec.report_every,
            parent_pid: spec.parent_pid,
        };
        let hog = match spec.hog {
            CotenantSpec::GpuHog {
                gpu,
                size,
                duty,
                period_ms,
            } => Hog::Gpu(GpuArgs {
                gpu,
                size,
                duty,
                period: Duration::from_millis(period_ms),
                common,
            }),
            CotenantSpec::CpuHog {
                threads,
                mode,
                buffer_mib,
            } => Hog::Cpu(CpuArgs {
                threads: Some(threads),
                mode,
                buffer_mib,
                common,
            }),
        };
        HogArgs { hog }
    }
}

/// Writes one JSON line to stdout. A closed stdout (the parent stopped reading) is not an
/// error: the hog keeps its load until stopped.
fn print_line(line: &HogLine) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.to_json());
    let _ = out.flush();
}

/// Runs the hog until `--duration`, a signal or the parent's death; prints the summary line.
/// Errors (exit 2) for invalid settings, and for the GPU hog without a usable driver, device or
/// cuBLAS.
pub fn main(args: HogArgs) -> anyhow::Result<ExitCode> {
    let summary = match args.hog {
        Hog::Gpu(a) => {
            let stop = stop_on_signal_or_parent_death(a.common.parent_pid)?;
            let config = GpuHogConfig {
                gpu: a.gpu,
                size: a.size,
                duty: a.duty,
                period: a.period,
                seconds: a.common.duration.map(|d| d.as_secs_f64()),
                report_every_s: a.common.report_every.as_secs_f64(),
            };
            gpu::run(&config, &stop, &mut print_line).context("kplace hog gpu")?
        }
        Hog::Cpu(a) => {
            let stop = stop_on_signal_or_parent_death(a.common.parent_pid)?;
            let threads = a
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let config = CpuHogConfig {
                threads,
                mode: a.mode,
                buffer_bytes: a
                    .buffer_mib
                    .checked_mul(1 << 20)
                    .context("--buffer-mib too large")?,
                seconds: a.common.duration.map(|d| d.as_secs_f64()),
                report_every_s: a.common.report_every.as_secs_f64(),
            };
            cpu::run(&config, &stop, &mut print_line).context("kplace hog cpu")?
        }
    };
    print_line(&summary);
    Ok(ExitCode::SUCCESS)
}
