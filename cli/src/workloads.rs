//! The workloads this binary ships, registered in one place, and the flags that stand for
//! their options.
//!
//! Every command finds a graph's workload in [`registry`] by the name the graph file gives;
//! none names a workload itself. A workload's options are `--opt NAME=VALUE`; those a kind
//! marks as flags may also be given as `--NAME VALUE`: [`command`] adds them to the parser,
//! built from each kind's [`OptionSpec`]s, and [`OptionPairs`] reads both back in the order
//! given. Such a flag means nothing to another workload, which refuses it by name.

use std::ffi::OsString;

use clap::{Arg, ArgAction, ArgGroup, ArgMatches, Args, CommandFactory, FromArgMatches};
use kplace::workload::kind::{OptionSpec, Registry, WorkloadOptions};
use kplace_radar::kind::Radar;

use crate::Cli;

/// Every workload kind this binary runs: the radar receiver, and the built-in recording kind.
pub fn registry() -> Registry {
    Registry::new().register(Radar)
}

/// The binary's command line: [`Cli`]'s, with every workload option a registered kind takes
/// as a flag of its own ([`OptionSpec::flag`]) added as `--NAME VALUE` (`--NAME` for a switch)
/// to each subcommand that takes workload options (those with `--opt` and `--seed`), unless
/// the subcommand has an option of that name. A value may start with a hyphen (a target
/// closing in); a switch takes `--NAME=true` or `--NAME=false` too.
pub fn command() -> clap::Command {
    let flags = flag_specs();
    let mut cli = Cli::command();
    let takers: Vec<String> = cli
        .get_subcommands()
        .filter(|sub| {
            let own: Vec<&str> = sub.get_arguments().filter_map(|a| a.get_long()).collect();
            own.contains(&"opt") && own.contains(&"seed")
        })
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in takers {
        cli = cli.mut_subcommand(name, |mut sub| {
            for spec in &flags {
                if sub.get_arguments().any(|a| a.get_long() == Some(spec.name)) {
                    continue;
                }
                sub = sub.arg(flag_arg(spec));
            }
            sub
        });
    }
    cli
}

/// Parses `argv` (the program's name first) as the binary does: with [`command`]'s flags.
pub fn parse<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut command = command();
    let matches = command.try_get_matches_from_mut(argv)?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))
}

/// Every option a registered kind takes as a flag, once per name.
fn flag_specs() -> Vec<OptionSpec> {
    let mut specs: Vec<OptionSpec> = Vec::new();
    for spec in registry().kinds().flat_map(|k| k.options().iter()) {
        if spec.flag && !specs.iter().any(|s| s.name == spec.name) {
            specs.push(*spec);
        }
    }
    specs
}

/// The parser's id of the flag that stands for workload option `name`.
fn flag_id(name: &str) -> String {
    format!("workload-option {name}")
}

/// The flag that stands for workload option `spec`.
fn flag_arg(spec: &OptionSpec) -> Arg {
    let arg = Arg::new(flag_id(spec.name))
        .long(spec.name)
        .action(ArgAction::Append)
        .group(OptionPairs::GROUP)
        .help_heading("Workload options")
        .help(format!(
            "{} (workload option {}: --opt {}={})",
            spec.help,
            spec.name,
            spec.name,
            if spec.value.is_empty() {
                "true"
            } else {
                spec.value
            }
        ));
    if spec.value.is_empty() {
        arg.num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .value_name("true|false")
    } else {
        arg.num_args(1)
            .allow_hyphen_values(true)
            .value_name(spec.value)
    }
}

/// Workload options as given: each `--opt NAME=VALUE` and each flag [`command`] added, as
/// NAME=VALUE pairs in the order given on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionPairs(pub Vec<(String, String)>);

impl OptionPairs {
    /// The parser's id of `--opt`.
    const OPT: &'static str = "opt";
    /// The group of `--opt` and the flags that stand for options: what an option that
    /// excludes workload options conflicts with (`send --recording`).
    pub const GROUP: &'static str = "options";
}

impl Args for OptionPairs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.group(ArgGroup::new(Self::GROUP).multiple(true)).arg(
            Arg::new(Self::OPT)
                .long("opt")
                .group(Self::GROUP)
                .value_name("NAME=VALUE")
                .value_parser(parse_option)
                .action(ArgAction::Append)
                .help(
                    "A workload option, NAME=VALUE (repeatable): what the graph's workload \
                     takes (`kplace workloads` lists them; those it shows as flags may also be \
                     given as --NAME VALUE)",
                ),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for OptionPairs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given: Vec<(usize, (String, String))> = Vec::new();
        if let (Some(at), Some(pairs)) = (
            matches.indices_of(Self::OPT),
            matches.get_many::<(String, String)>(Self::OPT),
        ) {
            given.extend(at.zip(pairs.cloned()));
        }
        // A flag is looked up only where [`command`] added it (a parser without it has no
        // such id).
        for spec in flag_specs() {
            let id = flag_id(spec.name);
            if !matches.ids().any(|i| i.as_str() == id) {
                continue;
            }
            if let (Some(at), Some(values)) =
                (matches.indices_of(&id), matches.get_many::<String>(&id))
            {
                let pair = |value: &String| (spec.name.to_string(), value.clone());
                given.extend(at.zip(values.map(pair)));
            }
        }
        given.sort_by_key(|(at, _)| *at);
        Ok(OptionPairs(
            given.into_iter().map(|(_, pair)| pair).collect(),
        ))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// A workload's options, and the seed of what it generates.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// The workload options given (`--opt NAME=VALUE` and the flags that stand for them), in
    /// the order given.
    #[command(flatten)]
    pub given: OptionPairs,
    /// The seed of what the workload generates (e.g. the radar's noise).
    #[arg(long, default_value_t = WorkloadArgs::DEFAULT_SEED)]
    pub seed: u64,
}

impl Default for WorkloadArgs {
    /// No option, the default seed: what a command line without them parses to.
    fn default() -> Self {
        WorkloadArgs {
            given: OptionPairs::default(),
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
        &self.given.0
    }

    /// The options given, in the order given.
    pub fn options(&self) -> WorkloadOptions {
        let mut options = WorkloadOptions::default();
        for (name, value) in &self.given.0 {
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
    use clap::Parser;

    use super::*;
    use crate::Command;

    /// The workload options `args` parses to, in order, or the parser's error.
    fn given(args: &[&str]) -> Result<Vec<String>, String> {
        let cli = parse(args).map_err(|e| e.to_string())?;
        let pairs = match &cli.command {
            Command::Run(run) => run.workload.pairs().to_vec(),
            Command::Send(send) => send.workload.pairs().to_vec(),
            Command::BisectRate(bisect) => bisect.options.0.clone(),
            other => panic!("not a run, send or sweep: {other:?}"),
        };
        Ok(pairs.into_iter().map(|(n, v)| format!("{n}={v}")).collect())
    }

    #[test]
    fn a_kinds_flags_are_its_options_in_the_order_given_with_opt() {
        assert_eq!(
            given(&[
                "kplace",
                "-v",
                "run",
                "--pfa",
                "1e-4",
                "--opt",
                "scene-frames=4",
                "--target=100,5,6",
                "--high-snr",
                "--target",
                "7,1,9",
            ])
            .unwrap(),
            [
                "pfa=1e-4",
                "scene-frames=4",
                "target=100,5,6",
                "high-snr=true",
                "target=7,1,9"
            ]
        );
        // A value may start with a hyphen (a target closing in); a switch may say false.
        assert_eq!(
            given(&[
                "kplace",
                "send",
                "--dest",
                "127.0.0.1:9",
                "--target",
                "-10,-5,6",
                "--frames",
                "3",
                "--high-snr=false"
            ])
            .unwrap(),
            ["target=-10,-5,6", "high-snr=false"]
        );
        // A sweep gives its runs and senders the options it is given, flags included.
        assert_eq!(
            given(&[
                "kplace",
                "bisect-rate",
                "--scene-frames",
                "4",
                "--opt",
                "pfa=1e-5"
            ])
            .unwrap(),
            ["scene-frames=4", "pfa=1e-5"]
        );
    }

    #[test]
    fn other_commands_their_own_options_and_what_follows_dashes_are_left_alone() {
        // `plan` takes no workload options: its parser refuses the flag.
        let e = parse(["kplace", "plan", "--pfa", "1e-4"]).err().unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
        // After `--` a flag is no flag.
        assert!(given(&["kplace", "run", "--", "--pfa", "1e-4"]).is_err());
        // A flag without its value is refused, naming the flag.
        let e = given(&["kplace", "run", "--pfa"]).unwrap_err();
        assert!(e.contains("--pfa <P>"), "{e}");
        // `run --frames` is run's own option, never a workload's.
        let cli = parse(["kplace", "run", "--frames", "5"]).unwrap();
        let Command::Run(run) = &cli.command else {
            panic!("not a run")
        };
        assert!(run.workload.pairs().is_empty());
    }

    #[test]
    fn the_parser_without_the_flags_still_takes_opt() {
        // A child's command line, or a test's, parsed by `Cli` alone.
        let cli = Cli::try_parse_from(["kplace", "run", "--opt", "pfa=1e-3"]).unwrap();
        let Command::Run(run) = &cli.command else {
            panic!("not a run")
        };
        assert_eq!(run.workload.pairs(), [("pfa".into(), "1e-3".into())]);
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
