//! The documentation's commands run as written, so a page cannot drift from the code again.
//!
//! Every fenced block of `docs/*.md` and `README.md` whose info string is `sh runnable` is run,
//! under the convention docs/README.md states ("Runnable blocks"):
//! - by `bash -euo pipefail`, from the repository root, with the build's directory
//!   (`target/<profile>`, where cargo put `kplace` and the kernel libraries) first on `PATH`
//!   and as `KPLACE_LIB_DIR`, and the project's virtual environment's `bin/` next (its
//!   `python3`);
//! - every `/tmp/` in a block rewritten to a directory of the file's own, so the blocks of one
//!   file share their scratch files, in order, and no two files or runs share any;
//!   `XDG_DATA_HOME` is there too, so what a block writes by default stays in it;
//! - a fenced block of any language whose info string has `file=PATH` (```` ```c
//!   file=/tmp/acc/acc.c ````) is written to PATH (rewritten the same way) where it stands in
//!   the file, for the blocks after it: the page shows a source file, and the test builds that
//!   very text;
//! - each block in a process group of its own, killed whole when the block ends (its
//!   background jobs), fails or runs past [`BLOCK_LIMIT`].
//!
//! A failure names the file, the line of the block's first command, its exit status and the
//! end of what it printed; every file runs, and all failures are listed. Each file in
//! [`MARKED`] must hold at least one runnable block, so removing the markers is noticed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The pages that have runnable blocks; each must keep at least one.
const MARKED: &[&str] = &[
    "docs/graphs.md",
    "docs/abi.md",
    "docs/report.md",
    "docs/tune.md",
];

/// How long one block may run: far longer than any takes in a debug build on a loaded
/// machine (the convention asks for well under 60 s), a limit, not a timing.
const BLOCK_LIMIT: Duration = Duration::from_secs(240);

/// How much of a failed block's output its failure shows.
const TAIL_LINES: usize = 40;

/// What a page's fenced blocks ask of the test, in the page's order.
#[derive(Debug, PartialEq)]
enum Step {
    /// A `sh runnable` block: its first line's number (1-based) and its text.
    Run { line: usize, script: String },
    /// A block with `file=PATH`: written to PATH.
    Write {
        line: usize,
        path: String,
        text: String,
    },
}

/// The steps of a page: every fenced block (``` or ~~~, at the line's start) that is runnable
/// or names a file; the rest are text.
fn steps(page: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = page.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let Some(fence) = ["```", "~~~"].into_iter().find(|f| line.starts_with(f)) else {
            continue;
        };
        let info: Vec<&str> = line[fence.len()..].split_whitespace().collect();
        let mut body = String::new();
        for (_, inner) in lines.by_ref() {
            if inner.trim_end() == fence {
                break;
            }
            body.push_str(inner);
            body.push('\n');
        }
        let file = info.iter().find_map(|w| w.strip_prefix("file="));
        if info == ["sh", "runnable"] {
            steps.push(Step::Run {
                line: i + 2,
                script: body,
            });
        } else if let Some(path) = file {
            steps.push(Step::Write {
                line: i + 2,
                path: path.to_string(),
                text: body,
            });
        }
    }
    steps
}

/// `/tmp/` rewritten to `scratch`.
fn rewrite(text: &str, scratch: &Path) -> String {
    text.replace("/tmp/", &format!("{}/", scratch.display()))
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The directory cargo built `kplace` and the kernel libraries into.
fn build_dir() -> PathBuf {
    let bin = kplace_testkit::kplace_bin!();
    let dir = bin.parent().expect("the binary's directory").to_path_buf();
    assert!(
        dir.join("libkplace_cpu.so").is_file(),
        "{} has no libkplace_cpu.so: build the workspace first (`cargo build --workspace`)",
        dir.display()
    );
    dir
}

/// The project's virtual environment's `bin/` (scripts/setup.sh makes it), where it is.
fn venv_bin() -> Option<PathBuf> {
    let venv = std::env::var_os("KPLACE_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(cache.join("kplace/venv"))
        })?;
    Some(venv.join("bin")).filter(|b| b.join("python3").exists())
}

/// A block's process group, killed whole when this goes: on success (its background jobs), on
/// a failure and past the limit.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How a block ended.
struct Ran {
    /// Its exit status, or `None` when it ran past the limit.
    status: Option<std::process::ExitStatus>,
    stdout: String,
    stderr: String,
}

/// Runs `script` as the convention says, in `scratch`'s world, for at most `limit`.
fn run_block(
    script: &str,
    scratch: &Path,
    path: &std::ffi::OsStr,
    build: &Path,
    limit: Duration,
) -> Ran {
    use std::os::unix::process::CommandExt;
    // Files, not pipes: a background job that outlives the block holds no pipe open.
    let out_path = scratch.join(".block.stdout");
    let err_path = scratch.join(".block.stderr");
    let out = std::fs::File::create(&out_path).expect("the block's stdout file");
    let err = std::fs::File::create(&err_path).expect("the block's stderr file");
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(kplace_testkit::workspace())
        .env("PATH", path)
        .env("KPLACE_LIB_DIR", build)
        .env("XDG_DATA_HOME", scratch.join(".data"))
        .env_remove("KPLACE_BIN")
        .env_remove("KPLACE_DATA_DIR")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let mut group = Group(command.spawn().expect("start bash"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = group.0.try_wait().expect("poll the block") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(group);
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    Ran {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// Runs every step of the page `name`; returns its runnable blocks' count and its failures.
fn run_page(name: &str, path: &std::ffi::OsStr, build: &Path) -> (usize, Vec<String>) {
    let root = kplace_testkit::workspace();
    let page = std::fs::read_to_string(root.join(name)).expect("read the page");
    let scratch = tempfile::Builder::new()
        .prefix("kplace-docs-")
        .tempdir()
        .expect("a scratch directory");
    let mut runs = 0;
    let mut failures = Vec::new();
    for step in steps(&page) {
        match step {
            Step::Write { line, path, text } => {
                let to = PathBuf::from(rewrite(&path, scratch.path()));
                let written = to
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&to, text));
                if let Err(e) = written {
                    failures.push(format!("{name}:{line}: cannot write {}: {e}", to.display()));
                }
            }
            Step::Run { line, script } => {
                runs += 1;
                let started = Instant::now();
                let ran = run_block(
                    &rewrite(&script, scratch.path()),
                    scratch.path(),
                    path,
                    build,
                    BLOCK_LIMIT,
                );
                eprintln!(
                    "{name}:{line}: {} in {:.1} s",
                    match ran.status {
                        Some(s) if s.success() => "passed".to_string(),
                        Some(s) => format!("failed ({s})"),
                        None => "ran past the limit".to_string(),
                    },
                    started.elapsed().as_secs_f64()
                );
                if ran.status.is_some_and(|s| s.success()) {
                    continue;
                }
                let mut failure = format!(
                    "{name}:{line}: the block {} ",
                    match ran.status {
                        Some(s) => format!("failed ({s})"),
                        None => format!("ran past {BLOCK_LIMIT:?} and was killed"),
                    }
                );
                let _ = write!(
                    failure,
                    "\n--- its stdout, last {TAIL_LINES} lines:\n{}\n--- its stderr, last \
                     {TAIL_LINES} lines:\n{}",
                    tail(&ran.stdout, TAIL_LINES),
                    tail(&ran.stderr, TAIL_LINES)
                );
                failures.push(failure);
            }
        }
    }
    (runs, failures)
}

/// The pages scanned: `README.md` and every `docs/*.md`, sorted.
fn pages() -> Vec<String> {
    let root = kplace_testkit::workspace();
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_runnable_block_of_the_docs_runs() {
    let build = build_dir();
    let mut path = std::env::join_paths(std::iter::once(build.clone()).chain(venv_bin()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    if path.is_empty() {
        path = build.clone().into_os_string();
    }
    let mut failures = Vec::new();
    for page in pages() {
        let (runs, failed) = run_page(&page, &path, &build);
        if MARKED.contains(&page.as_str()) && runs == 0 {
            failures.push(format!(
                "{page}: no `sh runnable` block, but this test expects some (MARKED)"
            ));
        }
        failures.extend(failed);
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The parser takes runnable blocks and files by their info strings alone, numbers each from
/// its first line, and leaves every other block, however it looks, as text.
#[test]
fn blocks_are_found_by_their_info_strings() {
    let page = "text\n```sh\nnot run\n```\n```sh runnable\necho one\necho two\n```\n\
                ```c file=/tmp/x/a.c\nint x;\n```\n~~~sh runnable\necho tilde\n~~~\n\
                ```sh runnable extra\nnot run\n```\n";
    assert_eq!(
        steps(page),
        [
            Step::Run {
                line: 6,
                script: "echo one\necho two\n".into()
            },
            Step::Write {
                line: 10,
                path: "/tmp/x/a.c".into(),
                text: "int x;\n".into()
            },
            Step::Run {
                line: 13,
                script: "echo tilde\n".into()
            },
        ]
    );
    let scratch = Path::new("/s");
    assert_eq!(rewrite("cat /tmp/a /tmp/b/c", scratch), "cat /s/a /s/b/c");
    assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
}

/// Whether process `pid` is gone (or a zombie nobody reaps yet, which runs no more).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A block's background job ends with the block, and a block past its limit is killed with
/// its jobs: nothing a block starts outlives it.
#[test]
fn nothing_a_block_starts_outlives_it() {
    let scratch = tempfile::tempdir().unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let build = Path::new("/nonexistent");
    let pid_of = |name: &str| {
        let text = std::fs::read_to_string(scratch.path().join(name)).unwrap();
        text.trim().to_string()
    };
    let wait_gone = |pid: &str| {
        let start = Instant::now();
        while !gone(pid) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{pid} still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let ran = run_block(
        &rewrite(
            "sleep 300 & echo $! > /tmp/job.pid\necho done",
            scratch.path(),
        ),
        scratch.path(),
        &path,
        build,
        Duration::from_secs(30),
    );
    assert!(ran.status.is_some_and(|s| s.success()), "{}", ran.stderr);
    assert_eq!(ran.stdout, "done\n");
    wait_gone(&pid_of("job.pid"));
    let started = Instant::now();
    let ran = run_block(
        &rewrite(
            "sleep 300 & echo $! > /tmp/job2.pid\necho $$ > /tmp/shell.pid\nsleep 300",
            scratch.path(),
        ),
        scratch.path(),
        &path,
        build,
        Duration::from_secs(1),
    );
    assert!(ran.status.is_none(), "ran past its limit");
    assert!(started.elapsed() < Duration::from_secs(60));
    wait_gone(&pid_of("job2.pid"));
    wait_gone(&pid_of("shell.pid"));
}
