//! `kplace completions SHELL` and `kplace man DIR`: what a shell and `man` need, generated from
//! the command line's own definition, so they never drift from it. `scripts/install.sh` writes
//! both into the prefix.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Options of `kplace completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

/// Prints the completion script for the shell.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = crate::Cli::command();
    clap_complete::generate(args.shell, &mut command, "kplace", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Options of `kplace man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory the pages are written to: kplace.1, and kplace-SUBCOMMAND.1 for each
    /// subcommand (e.g. PREFIX/share/man/man1).
    dir: PathBuf,
}

/// Writes the man pages, in roff, one per command.
pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let mut command = crate::Cli::command();
    command.build();
    kplace::os::write::create_dir_all(&args.dir).context("kplace man")?;
    let mut pages = vec![("kplace".to_string(), command.clone())];
    for sub in command
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        // Page kplace-run(1), whose synopsis reads `kplace run ...`.
        let name = format!("kplace-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("kplace {}", sub.get_name()));
        pages.push((name, page));
    }
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
