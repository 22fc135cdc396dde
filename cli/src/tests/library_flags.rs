//! The libraries never name a flag of this binary: every long flag (and alias) of every
//! subcommand, walked from clap's own `Command`, is looked for in the string literals of every
//! library crate's non-test sources (everything but this crate). A library that needs a child
//! `kplace` says so with a typed spec ([`kplace::session::child`]); one that explains an input names
//! the value, and the binary names the flag.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::Cli;

/// Messages to a user that still name the flag they gave, by library file: each goes as its
/// library's errors become typed (issue 52, item 4: the error carries the value, the binary
/// names the flag). The list only shrinks: a flag no longer found in its file fails the test
/// too. A child process's command line never belongs here: it is a typed spec.
const MESSAGES_NAMING_FLAGS: &[(&str, &[&str])] = &[
    // `kplace.run`, `bisect_rate`, `tune` and `admit` in Python are skins over the commands'
    // own command lines (a caller's `args` pass through to them, and the pytest suite runs
    // them); they go onto typed specs when specs cover a replay, a recording, its check and
    // settings, and a search's options.
    (
        "python/src/lib.rs",
        &[
            "check",
            "frames",
            "goals",
            "graph",
            "placement",
            "placements",
            "prove",
            "rate",
            "recording",
            "set",
            "shape",
            "source",
            "utilization",
        ],
    ),
    ("python/src/run.rs", &["out", "report", "trace"]),
    ("python/src/sweep.rs", &["out"]),
    ("python/src/tuning.rs", &["out"]),
    ("lab/src/bisect/config.rs", &["start-rate"]),
    ("lab/src/bisect/mod.rs", &["mps", "placements"]),
    (
        "lab/src/bisect/options.rs",
        &[
            "check",
            "goals",
            "initial-window-s",
            "max-sender-lag-ms",
            "mps",
            "mps-threads",
            "opt",
            "pipelines",
            "require-rate",
            "sender-cpus",
            "start-rate",
            "sut-cmd",
            "sut-cpus",
            "warmup-s",
            "width",
            "window-s",
        ],
    ),
    (
        "lab/src/bisect/shapes.rs",
        &["check", "graph", "recording", "shape", "start-rate"],
    ),
    (
        "lab/src/hog/cpu.rs",
        &["buffer-mib", "duration", "report-every", "threads"],
    ),
    (
        "lab/src/hog/gpu.rs",
        &["duration", "duty", "report-every", "size"],
    ),
    ("lab/src/mps.rs", &["dir"]),
    ("lab/src/plots/switches.rs", &["adapt", "trace"]),
    ("lab/src/tune/model.rs", &["recalibrate"]),
    ("lab/src/tune/procedure/account.rs", &["placement"]),
    ("lab/src/tune/procedure/admit.rs", &["rate"]),
    ("lab/src/tune/procedure/calibration.rs", &["recalibrate"]),
    (
        "lab/src/tune/procedure/devices.rs",
        &["cpu-library", "cpu-only", "gpu-library"],
    ),
    (
        "lab/src/tune/procedure/mod.rs",
        &[
            "check",
            "cpu-library",
            "gpu-library",
            "placement",
            "recording",
            "shape",
            "write",
        ],
    ),
    (
        "runtime/core/src/model/files.rs",
        &["set", "shape", "slots", "stream-rate", "workers"],
    ),
    ("runtime/core/src/model/graph/bind.rs", &["set"]),
    (
        "runtime/core/src/plan/display.rs",
        &["budget", "profile-gpu"],
    ),
    ("runtime/core/src/plan/gpu_path.rs", &["profile-gpu"]),
    ("runtime/core/src/plan/mod.rs", &["shape", "slots"]),
    (
        "runtime/harness/src/workload/kind/mod.rs",
        &["check", "recording"],
    ),
    (
        "runtime/harness/src/workload/recording.rs",
        &["set", "shape"],
    ),
    (
        "runtime/harness/src/workload/reference.rs",
        &["frames", "write-sinks"],
    ),
    (
        "runtime/harness/src/workload/run.rs",
        &["budget", "detections", "write-sinks"],
    ),
    (
        "runtime/harness/src/workload/send.rs",
        &["packet-interval", "rate"],
    ),
    ("runtime/net/src/sender/faults.rs", &["malformed"]),
    ("runtime/net/src/udp/mod.rs", &["dest"]),
    ("workloads/radar/src/graph.rs", &["cpi"]),
];

/// Every long flag of `command` and its subcommands, and their aliases, without the `--`.
fn long_flags(command: &clap::Command, into: &mut BTreeSet<String>) {
    for arg in command.get_arguments() {
        into.extend(arg.get_long().map(str::to_string));
        into.extend(
            arg.get_all_aliases()
                .into_iter()
                .flatten()
                .map(str::to_string),
        );
    }
    for sub in command.get_subcommands() {
        long_flags(sub, into);
    }
}

/// The string literals of Rust source `text`, with the line each starts on: ordinary, byte
/// and raw strings; comments and character literals are skipped.
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => line += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
                line += text[i..end].matches('\n').count();
                i = end;
                continue;
            }
            // A character literal ('"', '\'', 'x'), or a lifetime (left as it is).
            b'\'' => {
                let rest = &bytes[i + 1..];
                let len = match rest {
                    [b'\\', _, ..] => rest[2..].iter().position(|&b| b == b'\''),
                    [_, b'\'', ..] => Some(0),
                    _ => None,
                };
                if let Some(len) = len {
                    i += len + 3;
                    continue;
                }
            }
            b'r' if !ident_before(bytes, i) && matches!(bytes.get(i + 1), Some(b'"' | b'#')) => {
                let hashes = bytes[i + 1..].iter().take_while(|&&b| b == b'#').count();
                if bytes.get(i + 1 + hashes) == Some(&b'"') {
                    let start = i + 2 + hashes;
                    let close = format!("\"{}", "#".repeat(hashes));
                    let end = text[start..]
                        .find(&close)
                        .map_or(bytes.len(), |e| start + e);
                    out.push((line, text[start..end].to_string()));
                    line += text[start..end].matches('\n').count();
                    i = (end + close.len()).min(bytes.len());
                    continue;
                }
            }
            b'"' => {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let end = end.min(bytes.len());
                out.push((line, text[start..end].to_string()));
                line += text[start..end].matches('\n').count();
                i = end + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the byte before `i` continues an identifier (`for"` is not a raw string's `r`).
fn ident_before(bytes: &[u8], i: usize) -> bool {
    i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')
}

/// `text` up to its first top-level `#[cfg(test)]` module: the code a library ships.
fn without_test_module(text: &str) -> &str {
    let mut at = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim_end() == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| {
                let next = next
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub ");
                next.starts_with("mod ")
            })
        {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

/// The flags of `flags` that `literal` names: `--NAME` not followed by more of a name.
fn named<'a>(literal: &str, flags: &'a BTreeSet<String>) -> Vec<&'a str> {
    let mut found = Vec::new();
    for (at, _) in literal.match_indices("--") {
        let before = literal[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let rest = &literal[at + 2..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        if let Some(flag) = flags.get(&rest[..len]) {
            found.push(flag.as_str());
        }
    }
    found
}

/// Every `FILE:LINE: --NAME` of a library's non-test `.rs` file under `dir` whose string
/// literals name one of `flags`.
fn scan(dir: &Path, root: &Path, flags: &BTreeSet<String>, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            // Tests, examples, benchmarks and binaries are not library code; target/ is built.
            let skip = [
                "tests",
                "examples",
                "benches",
                "bin",
                "target",
                "node_modules",
            ];
            if !skip.contains(&name) && !name.starts_with('.') {
                scan(&path, root, flags, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && name != "build.rs" {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (line, literal) in string_literals(without_test_module(&text)) {
                for flag in named(&literal, flags) {
                    let file = path.strip_prefix(root).unwrap_or(&path).display();
                    out.push(format!("{file}:{line}: --{flag}"));
                }
            }
        }
    }
}

/// The library code's string literals that name a flag of this binary, as `FILE:LINE: --NAME`,
/// in the workspace at `root` (every directory but the binary's own crate).
fn library_flags(root: &Path) -> Vec<String> {
    let mut flags = BTreeSet::new();
    long_flags(&Cli::command(), &mut flags);
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs.into_iter().filter(|d| d.is_dir()) {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // testkit is the tests' support (a dev-dependency), whose literals speak to cargo's
        // test harness.
        if !["cli", "target", "docs", "testkit"].contains(&name) && !name.starts_with('.') {
            scan(&dir, root, &flags, &mut out);
        }
    }
    out
}

#[test]
fn no_library_names_a_flag_of_the_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = library_flags(&root);
    let listed = |hit: &str| {
        MESSAGES_NAMING_FLAGS.iter().any(|(file, flags)| {
            hit.strip_prefix(file)
                .and_then(|rest| rest.split_once(": --"))
                .is_some_and(|(line, flag)| line.starts_with(':') && flags.contains(&flag))
        })
    };
    let new: Vec<_> = found.iter().filter(|hit| !listed(hit)).cloned().collect();
    assert!(
        new.is_empty(),
        "library code names flags of the kplace binary (a child process takes a typed spec, \
         kplace::session::child; an error names the value, and the binary the flag):\n{}",
        new.join("\n")
    );
    let stale: Vec<_> = MESSAGES_NAMING_FLAGS
        .iter()
        .flat_map(|(file, flags)| flags.iter().map(move |flag| (file, flag)))
        .filter(|(file, flag)| {
            !found.iter().any(|hit| {
                hit.starts_with(&format!("{file}:")) && hit.ends_with(&format!(": --{flag}"))
            })
        })
        .map(|(file, flag)| format!("{file}: --{flag}"))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer named there: take these out of MESSAGES_NAMING_FLAGS:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_scanner_finds_a_planted_flag_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("lib/src");
    std::fs::create_dir_all(src.join("tests")).unwrap();
    std::fs::create_dir_all(dir.path().join("cli/src")).unwrap();
    let planted = r##"//! Starts `kplace run --frames 5` (a comment: not code).
fn start(c: &mut Command) {
    let quote = '"';
    c.arg("run").arg(r#"--frames"#);
    c.arg("--frames-of-mine --pfa=1 --gpu-architecture x");
    /* "--frames" in a block comment */
    c.arg(
        "a \" quoted --warmup-frames=2",
    );
}

#[cfg(test)]
mod tests {
    const IN_A_TEST: &str = "--frames";
}
"##;
    std::fs::write(src.join("lib.rs"), planted).unwrap();
    // A test file, and the binary's own crate, may name flags.
    std::fs::write(src.join("tests/t.rs"), "const A: &str = \"--frames\";").unwrap();
    std::fs::write(src.join("tests.rs"), "const A: &str = \"--frames\";").unwrap();
    std::fs::write(dir.path().join("cli/src/main.rs"), "\"--frames\"").unwrap();
    assert_eq!(
        library_flags(dir.path()),
        [
            "lib/src/lib.rs:4: --frames",
            "lib/src/lib.rs:8: --warmup-frames"
        ]
    );
}
