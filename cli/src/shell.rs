//! `kplace completions SHELL` and `kplace man DIR`: what a shell and `man` need, generated from
//! the command line's own definition, so they never drift from it. `scripts/install.sh` writes
//! both into the prefix. The bash completion also offers the graphs and placements kplace
//! finds by name, which it asks the binary for (`kplace complete`, hidden): the names that
//! resolve where the user is, not a list fixed when the script was written.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use clap_complete::Shell;
use kplace::model::locate;

/// Options of `kplace completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

/// Prints the completion script for the shell: clap's, and for bash what completes `--graph`,
/// `--placement`, `--placements` and `--adapt` with names.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = crate::workloads::command();
    clap_complete::generate(args.shell, &mut command, "kplace", &mut std::io::stdout());
    if args.shell == Shell::Bash {
        print!("{BASH_NAMES}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Bash: after clap's `_kplace`, a function in front of it that completes the options taking a
/// graph or a placement with the names `kplace complete` lists, and file names too (a path is
/// always a path); every other word is clap's.
const BASH_NAMES: &str = r#"
# Graphs and placements by name, as kplace finds them from here (`kplace complete`), and files.
_kplace_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" option="${COMP_WORDS[COMP_CWORD-1]}"
    if [[ "$cur" == "=" ]]; then
        cur=""
    elif [[ "$option" == "=" && $COMP_CWORD -ge 2 ]]; then
        option="${COMP_WORDS[COMP_CWORD-2]}"
    fi
    local kind
    case "$option" in
        --graph) kind=graphs ;;
        --placement|--placements|--adapt) kind=placements ;;
        *) _kplace "$@"; return ;;
    esac
    # --placements takes a comma-separated list: complete its last item.
    local before=""
    if [[ "$option" == --placements && "$cur" == *,* ]]; then
        before="${cur%,*},"
        cur="${cur##*,}"
    fi
    local names IFS=$'\n'
    names="$("${COMP_WORDS[0]}" complete "$kind" -- "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)"
    COMPREPLY=($(compgen -W "$names" -- "$cur") $(compgen -f -- "$cur"))
    if [[ -n "$before" ]]; then
        COMPREPLY=("${COMPREPLY[@]/#/$before}")
    fi
}
complete -F _kplace_names -o bashdefault -o default kplace
"#;

/// What `kplace complete` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Names {
    /// The graphs found by name (`--graph NAME`).
    Graphs,
    /// The placements the command line's graph finds by name (`--placement NAME`).
    Placements,
}

/// Options of `kplace complete`.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// What to list.
    names: Names,
    /// The words of the command line being completed, after `kplace` (their `--graph` decides
    /// which placements; default the radar).
    #[arg(last = true)]
    words: Vec<OsString>,
}

/// Prints the names, one a line, sorted; nothing where none resolve (a graph that is not
/// there has no placements).
pub fn complete(args: CompleteArgs) -> anyhow::Result<ExitCode> {
    let names = match args.names {
        Names::Graphs => locate::graph_names(),
        Names::Placements => {
            let written = graph_of(&args.words).unwrap_or_else(|| PathBuf::from("radar"));
            match locate::graph(&written) {
                Ok(graph) if graph.is_file() => locate::placement_names(&graph),
                _ => Vec::new(),
            }
        }
    };
    for name in names {
        println!("{name}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The `--graph` the words give (`--graph G`, `--graph=G`, or bash's `--graph = G`), the last.
fn graph_of(words: &[OsString]) -> Option<PathBuf> {
    let mut graph = None;
    let mut words = words.iter().map(|w| w.to_string_lossy());
    while let Some(word) = words.next() {
        if let Some(value) = word.strip_prefix("--graph=") {
            graph = Some(value.to_string());
        } else if word == "--graph" {
            match words.next() {
                Some(next) if next == "=" => graph = words.next().map(|v| v.into_owned()),
                Some(next) => graph = Some(next.into_owned()),
                None => {}
            }
        }
    }
    graph.map(PathBuf::from)
}

/// Options of `kplace man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory the pages are written to (made if missing): kplace.1, and
    /// kplace-SUBCOMMAND.1 for each subcommand and each of theirs (e.g.
    /// PREFIX/share/man/man1).
    dir: PathBuf,
}

/// Writes the man pages, in roff, one per command and subcommand: every page another names
/// (`SEE ALSO`, its subcommands) is written too, and none names `help`, which has no page
/// (`--help` is on every page).
pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let mut command = crate::workloads::command();
    command.build();
    kplace::os::write::create_dir_all(&args.dir).context("kplace man")?;
    let mut pages = Vec::new();
    collect_pages(&command, "kplace", "kplace", &mut pages);
    for (name, page) in pages {
        let path = args.dir.join(format!("{name}.1"));
        let mut text = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut text)
            .with_context(|| format!("rendering {name}(1)"))?;
        kplace::os::write::write_whole(&path, kplace::os::write::Kind::File, &text)
            .context("kplace man")?;
    }
    println!("man pages written to {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The page of `command` (built), named `name` (`kplace-mps`) with synopsis `bin` (`kplace
/// mps`), and those of its visible subcommands, depth first; `help` hidden, as it has none.
fn collect_pages(
    command: &clap::Command,
    name: &str,
    bin: &str,
    pages: &mut Vec<(String, clap::Command)>,
) {
    let mut page = command
        .clone()
        .display_name(name.to_string())
        .bin_name(bin.to_string());
    if page.find_subcommand("help").is_some() {
        page = page.mut_subcommand("help", |help| help.hide(true));
    }
    pages.push((name.to_string(), page));
    for sub in command
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let sub_name = format!("{name}-{}", sub.get_name());
        let sub_bin = format!("{bin} {}", sub.get_name());
        collect_pages(sub, &sub_name, &sub_bin, pages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `kplace...(1)` a page in `dir` names that has no page there.
    fn unresolved_references(dir: &std::path::Path) -> Vec<String> {
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            // roff writes a hyphen `\-`.
            let text = std::fs::read_to_string(entry.path())
                .unwrap_or_default()
                .replace("\\-", "-");
            for word in text.split(|c: char| c.is_whitespace() || c == ',') {
                if let Some(page) = word.strip_suffix("(1)")
                    && page.starts_with("kplace")
                    && !dir.join(format!("{page}.1")).is_file()
                {
                    missing.push(format!("{}: {page}(1)", entry.path().display()));
                }
            }
        }
        missing
    }

    #[test]
    fn the_graph_is_found_in_every_spelling() {
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(graph_of(&words(&["run"])), None);
        assert_eq!(
            graph_of(&words(&["run", "--graph", "spectrogram", "--placement"])),
            Some("spectrogram".into())
        );
        assert_eq!(
            graph_of(&words(&["run", "--graph=beamformer/filtered"])),
            Some("beamformer/filtered".into())
        );
        assert_eq!(
            graph_of(&words(&["run", "--graph", "=", "channelizer"])),
            Some("channelizer".into())
        );
        assert_eq!(graph_of(&words(&["run", "--graph"])), None);
    }

    /// The man pages' NAME line says what kplace is once (not `kplace - kplace: ...`), and
    /// every page one names is written: no `kplace-help(1)`, and the pages of subcommands'
    /// subcommands (`kplace-mps-start(1)`).
    #[test]
    fn every_page_named_is_written_and_the_name_line_reads_once() {
        let dir = tempfile::tempdir().unwrap();
        man(ManArgs {
            dir: dir.path().join("man1"),
        })
        .unwrap();
        let dir = dir.path().join("man1");
        let main = std::fs::read_to_string(dir.join("kplace.1")).unwrap();
        let name = main
            .lines()
            .skip_while(|l| !l.starts_with(".SH NAME"))
            .nth(1)
            .unwrap();
        assert!(
            name.replace("\\-", "-")
                .starts_with("kplace - a streaming signal-processing runtime"),
            "{name}"
        );
        assert!(!main.contains("kplace\\-help") && !main.contains("kplace-help"));
        assert!(dir.join("kplace-mps-start.1").is_file());
        assert!(!dir.join("kplace-help.1").exists());
        assert!(!dir.join("kplace-complete.1").exists(), "hidden");
        assert_eq!(unresolved_references(&dir), Vec::<String>::new());
    }
}
