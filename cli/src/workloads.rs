//! The workloads this binary ships, registered in one place, and the flags that stand for
//! their options.
//!
//! Every command finds a graph's workload in [`registry`] by the name the graph file gives;
//! none names a workload itself. A workload's options are `--opt NAME=VALUE`; those a kind
//! marks as flags may also be given as `--NAME VALUE` ([`expand_flags`]), and mean nothing to
//! another workload, which refuses them by name.

use std::ffi::OsString;

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
    /// A workload option, NAME=VALUE (repeatable): what the graph's workload takes (`kplace
    /// workloads` lists them; those it shows as flags may also be given as --NAME VALUE).
    #[arg(long = "opt", value_name = "NAME=VALUE", value_parser = parse_option)]
    pub options: Vec<(String, String)>,
    /// The seed of what the workload generates (e.g. the radar's noise).
    #[arg(long, default_value_t = WorkloadArgs::DEFAULT_SEED)]
    pub seed: u64,
}

impl Default for WorkloadArgs {
    /// No option, the default seed: what a command line without them parses to.
    fn default() -> Self {
        WorkloadArgs {
            options: Vec::new(),
            seed: WorkloadArgs::DEFAULT_SEED,
        }
    }
}

/// Parses `NAME=VALUE`.
pub fn parse_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err("expected NAME=VALUE, e.g. pfa=1e-6".into()),
    }
}

impl WorkloadArgs {
    /// The seed when none is given.
    const DEFAULT_SEED: u64 = 1;

    /// The options given as NAME=VALUE pairs, in the order given.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.options
    }

    /// The options given, in the order given.
    pub fn options(&self) -> WorkloadOptions {
        let mut options = WorkloadOptions::default();
        for (name, value) in &self.options {
            options.push(name.as_str(), value.as_str());
        }
        options
    }
}

/// `argv` with every workload option a registered kind takes as a flag of its own
/// ([`kplace::workload::kind::OptionSpec::flag`]) written as `--opt NAME=VALUE`, in the
/// subcommands that take workload options (those with `--opt` and `--seed`), unless the
/// subcommand has an option of that name. `--NAME VALUE`, `--NAME=VALUE` and, for a switch,
/// `--NAME` are rewritten; nothing after `--` is.
pub fn expand_flags(argv: Vec<OsString>, cli: &clap::Command) -> Vec<OsString> {
    let registry = registry();
    let flags: Vec<_> = registry
        .kinds()
        .flat_map(|k| k.options().iter())
        .filter(|o| o.flag)
        .collect();
    let Some((at, sub)) = argv
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.to_string_lossy().starts_with('-'))
        .and_then(|(i, a)| Some((i, cli.find_subcommand(a.to_str()?)?)))
    else {
        return argv;
    };
    let own: Vec<&str> = sub.get_arguments().filter_map(|a| a.get_long()).collect();
    if !own.contains(&"opt") || !own.contains(&"seed") {
        return argv;
    }
    let mut out: Vec<OsString> = argv[..=at].to_vec();
    let mut rest = argv.into_iter().skip(at + 1);
    while let Some(arg) = rest.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "--" {
            out.push(arg);
            out.extend(rest);
            break;
        }
        let Some(long) = text.strip_prefix("--") else {
            out.push(arg);
            continue;
        };
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (long, None),
        };
        let Some(spec) = flags.iter().find(|o| o.name == name) else {
            out.push(arg);
            continue;
        };
        if own.contains(&name) {
            out.push(arg);
            continue;
        }
        let value = match (inline, spec.value.is_empty()) {
            (Some(value), _) => value,
            (None, true) => "true".to_string(),
            (None, false) => match rest.next() {
                Some(value) => value.to_string_lossy().into_owned(),
                // Left as it is: the parser says that the flag needs a value.
                None => {
                    out.push(arg);
                    continue;
                }
            },
        };
        out.push("--opt".into());
        out.push(format!("{name}={value}").into());
    }
    out
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
            let flag = match (option.flag, option.value.is_empty()) {
                (false, _) => String::new(),
                (true, true) => format!(" or --{}", option.name),
                (true, false) => format!(" or --{} {}", option.name, option.value),
            };
            text.push_str(&format!(
                "  --opt {}={value}{flag}{}: {}\n",
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn expand(args: &[&str]) -> Vec<String> {
        let argv = args.iter().map(OsString::from).collect();
        expand_flags(argv, &crate::Cli::command())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn a_kinds_flags_become_its_options_where_workload_options_are_taken() {
        assert_eq!(
            expand(&[
                "kplace",
                "-v",
                "run",
                "--pfa",
                "1e-4",
                "--target=100,5,6",
                "--high-snr"
            ]),
            [
                "kplace",
                "-v",
                "run",
                "--opt",
                "pfa=1e-4",
                "--opt",
                "target=100,5,6",
                "--opt",
                "high-snr=true"
            ]
        );
        // A value may start with a hyphen (a target closing in).
        assert_eq!(
            expand(&["kplace", "send", "--target", "-10,-5,6", "--frames", "3"]),
            [
                "kplace",
                "send",
                "--opt",
                "target=-10,-5,6",
                "--frames",
                "3"
            ]
        );
    }

    #[test]
    fn other_commands_their_own_options_and_what_follows_dashes_are_left_alone() {
        let plan = ["kplace", "plan", "--pfa", "1e-4"];
        assert_eq!(expand(&plan), plan);
        let after = ["kplace", "run", "--", "--pfa", "1e-4"];
        assert_eq!(expand(&after), after);
        // A flag without its value is left for the parser to refuse.
        let bare = ["kplace", "run", "--pfa"];
        assert_eq!(expand(&bare), bare);
        // `run --frames` is run's own option, never a workload's.
        let own = ["kplace", "run", "--frames", "5"];
        assert_eq!(expand(&own), own);
    }

    #[test]
    fn the_list_shows_each_flag_with_its_value() {
        let text = list();
        assert!(text.contains("--opt pfa=P or --pfa P:"), "{text}");
        assert!(
            text.contains("--opt high-snr=true or --high-snr:"),
            "{text}"
        );
    }
}
