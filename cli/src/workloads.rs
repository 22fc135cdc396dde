//! The workloads this binary ships, registered in one place, and the flags that stand for
//! their options.
//!
//! Every command finds a graph's workload in [`registry`] by the name the graph file gives;
//! none names a workload itself. A workload's options are `--opt NAME=VALUE`; the radar's
//! long-standing flags (`--target`, `--high-snr`, `--scene-frames`, `--pfa`) are kept as
//! spellings of its options, and mean nothing to another workload, which refuses them by name.

use clap::Args;
use kplace::workload::kind::{Registry, WorkloadOptions};
use kplace_radar::kind::Radar;

/// Every workload kind this binary runs: the radar receiver, and the built-in recording kind.
pub fn registry() -> Registry {
    Registry::new().register(Radar)
}

/// A workload's options, and the seed of what it generates.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// A workload option, NAME=VALUE (repeatable): what the graph's workload takes
    /// (`kplace workloads` lists them).
    #[arg(long = "opt", value_name = "NAME=VALUE", value_parser = parse_option)]
    options: Vec<(String, String)>,
    /// The seed of what the workload generates (the radar's noise).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The radar's `target` option: RANGE_M,VELOCITY_MPS,SNR_DB (repeatable; default:
    /// docs/workload.md's three at 6 dB).
    #[arg(
        long = "target",
        value_name = "RANGE,VELOCITY,SNR",
        allow_hyphen_values = true
    )]
    targets: Vec<String>,
    /// The radar's `high-snr` option: the default targets at 25 dB.
    #[arg(long, conflicts_with = "targets")]
    high_snr: bool,
    /// The radar's `scene-frames` option: distinct scene frames; frame i shows scene frame i
    /// mod this (default: up to 64, within 256 MiB; more than fit in 256 MiB is refused).
    #[arg(long, value_name = "N")]
    scene_frames: Option<String>,
    /// The radar's `pfa` option: the CFAR false-alarm probability (overrides the graph's;
    /// also sets the verifier's bound).
    #[arg(long, value_name = "P")]
    pfa: Option<String>,
}

/// Parses `NAME=VALUE`.
pub fn parse_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err("expected NAME=VALUE, e.g. pfa=1e-6".into()),
    }
}

impl WorkloadArgs {
    /// The options given, by flag or by `--opt`, in one list.
    pub fn options(&self) -> WorkloadOptions {
        let mut options = WorkloadOptions::default();
        for target in &self.targets {
            options.push("target", target.as_str());
        }
        if self.high_snr {
            options.push("high-snr", "true");
        }
        if let Some(n) = &self.scene_frames {
            options.push("scene-frames", n.as_str());
        }
        if let Some(pfa) = &self.pfa {
            options.push("pfa", pfa.as_str());
        }
        for (name, value) in &self.options {
            options.push(name.as_str(), value.as_str());
        }
        options
    }
}

/// `kplace workloads`: every workload this binary runs, and its options.
pub fn list() -> String {
    let mut text = String::new();
    for kind in registry().kinds() {
        text.push_str(&format!("{}: {}\n", kind.name(), kind.about()));
        for option in kind.options() {
            let value = if option.value.is_empty() {
                "true".to_string()
            } else {
                option.value.to_string()
            };
            text.push_str(&format!(
                "  --opt {}={value}{}: {}\n",
                option.name,
                if option.repeatable {
                    " (repeatable)"
                } else {
                    ""
                },
                option.help
            ));
        }
    }
    text
}
