//! Graphs and placements by name, as a user meets them: a mistyped name is refused with the
//! names that are there and the closest suggested; `kplace complete` lists them; bash's
//! completion offers them for `--graph`, `--placement`, `--placements` and `--adapt` (run in a
//! real bash, with the script `kplace completions bash` prints). Every process is guarded and
//! every wait has a limit.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kplace_testkit::{Ended, Guard};

const LIMIT: Duration = Duration::from_secs(60);

/// `kplace ARGS` run in `dir`.
fn kplace_in(dir: &Path, args: &[&str]) -> Ended {
    Guard::spawn(
        Command::new(kplace_testkit::kplace_bin!())
            .args(args)
            .current_dir(dir)
            .env_remove("KPLACE_DATA_DIR"),
    )
    .wait(LIMIT)
}

fn kplace(args: &[&str]) -> Ended {
    kplace_in(&kplace_testkit::workspace(), args)
}

/// The case: `--placement allcpu` listed the paths searched but not the names that
/// exist. The error lists the graph's placements and suggests the closest; a mistyped graph
/// name the same, with every graph found by name.
#[test]
fn a_mistyped_name_lists_what_is_there_and_suggests_the_closest() {
    let ended = kplace(&["plan", "--placement", "allcpu"]);
    assert_eq!(ended.status.code(), Some(2), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("placement allcpu: no such file, and not found by name in: ")
            && ended.stderr.contains(
                "; did you mean all-cpu? (the graph's placements: all-cpu, all-cpu-pinned, \
                 all-gpu, cfar-gpu, gpu-fft, hybrid)"
            ),
        "{}",
        ended.stderr
    );
    let ended = kplace(&["plan", "--graph", "spectogram"]);
    assert_eq!(ended.status.code(), Some(2), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("; did you mean spectrogram? (graphs by name: ")
            && ended.stderr.contains("beamformer/filtered")
            && ended.stderr.contains("radar"),
        "{}",
        ended.stderr
    );
    // A name nothing is near: listed, nothing suggested.
    let ended = kplace(&["plan", "--graph", "spectrogram", "--placement", "fpga"]);
    assert!(
        ended
            .stderr
            .contains(" (the graph's placements: cpu, cpu-2, gpu)")
            && !ended.stderr.contains("did you mean"),
        "{}",
        ended.stderr
    );
}

/// `kplace complete` lists what resolves by name from the current directory: every graph, and
/// the placements of the graph the command line names (the radar's without one).
#[test]
fn complete_lists_the_names_kplace_resolves() {
    let graphs = kplace(&["complete", "graphs"]);
    let graphs: Vec<&str> = graphs.stdout.lines().collect();
    for want in [
        "beamformer",
        "beamformer/filtered",
        "channelizer",
        "radar",
        "spectrogram",
    ] {
        assert!(graphs.contains(&want), "{want} missing: {graphs:?}");
    }
    let mut sorted = graphs.clone();
    sorted.sort();
    assert_eq!(graphs, sorted);
    let placements = |words: &[&str]| {
        let mut args = vec!["complete", "placements", "--"];
        args.extend(words);
        kplace(&args).stdout
    };
    assert_eq!(
        placements(&["run", "--graph", "beamformer/filtered", "--placement"]),
        "cpu\ncpu-2\ngpu\npython\n"
    );
    assert_eq!(
        placements(&["run", "--graph=spectrogram"]),
        "cpu\ncpu-2\ngpu\n"
    );
    assert!(placements(&["run"]).starts_with("all-cpu\nall-cpu-pinned\n"));
    assert_eq!(
        placements(&["run", "--graph", "sonar"]),
        "",
        "no such graph"
    );
}

/// What bash offers after the words `line` (the last one being completed), with the script
/// `kplace completions bash` prints sourced, run in `dir`.
fn bash_completes(script: &Path, dir: &Path, line: &[&str]) -> Vec<String> {
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_kplace_names kplace \
         \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words.join(" "),
        line.len() - 1
    );
    let bin_dir = kplace_testkit::kplace_bin!()
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let ended = Guard::spawn(
        Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &driver])
            .current_dir(dir)
            .env("PATH", path)
            .env_remove("KPLACE_DATA_DIR"),
    )
    .wait(LIMIT);
    assert!(ended.status.success(), "{line:?}: {}", ended.stderr);
    let mut offered: Vec<String> = ended.stdout.lines().map(String::from).collect();
    offered.sort();
    offered
}

/// The case: bash completed `--graph` and `--placement` with file names only. Now it
/// offers the names kplace resolves (and files, which are paths), in every spelling of the
/// option, and leaves every other word to clap's completion.
#[test]
fn bash_completes_graphs_and_placements_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("kplace.bash");
    let printed = kplace(&["completions", "bash"]);
    assert!(printed.status.success(), "{}", printed.stderr);
    std::fs::write(&script, &printed.stdout).unwrap();
    // An empty directory to complete in: no file names among the offers.
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let offers = |line: &[&str]| bash_completes(&script, &cwd, line);
    assert_eq!(
        offers(&["kplace", "run", "--graph", "spec"]),
        ["spectrogram", "spectrogram/blocks"]
    );
    assert_eq!(
        offers(&["kplace", "run", "--graph", "=", "beamformer/f"]),
        ["beamformer/filtered"]
    );
    assert_eq!(
        offers(&[
            "kplace",
            "run",
            "--graph",
            "beamformer/filtered",
            "--placement",
            "c"
        ]),
        ["cpu", "cpu-2"]
    );
    assert_eq!(
        offers(&[
            "kplace",
            "run",
            "--placement",
            "all-cpu",
            "--adapt",
            "all-cpu-"
        ]),
        ["all-cpu-pinned"]
    );
    assert_eq!(
        offers(&["kplace", "bisect-rate", "--placements", "all-cpu,h"]),
        ["all-cpu,hybrid"]
    );
    // Files are still offered: a path is always a path.
    std::fs::write(cwd.join("mine.yaml"), "").unwrap();
    assert_eq!(
        offers(&["kplace", "run", "--placement", "m"]),
        ["mine.yaml"]
    );
    // Every other word is clap's: subcommands and options.
    assert_eq!(offers(&["kplace", "bisect-ra"]), ["bisect-rate"]);
    assert!(offers(&["kplace", "run", "--fram"]).contains(&"--frames".to_string()));
}
