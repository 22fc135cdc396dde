//! Inputs kplace reads are bounded: a file over its size limit, an endless device, a graph
//! expression nested or long past its limits, and a control file of huge lines are each
//! refused with an error naming the file, the line or the field, and the limit (exit 2), fast,
//! without filling memory, overflowing the stack or flooding stderr.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// Far longer than any of these takes: each is refused before work of any size begins.
const LIMIT: Duration = Duration::from_secs(60);

fn kplace(args: &[&str]) -> Output {
    kplace_testkit::output_within(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args(args)
            .current_dir(kplace_testkit::workspace()),
        LIMIT,
        None,
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs kplace expecting an input error (exit 2, not a crash); returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = kplace(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "kplace {:?} should be refused with exit 2:\n{}",
        args.iter()
            .map(|a| &a[..a.len().min(80)])
            .collect::<Vec<_>>(),
        stderr(&out)
    );
    stderr(&out)
}

#[test]
fn an_endless_placement_graph_or_adapt_placement_is_refused_at_its_limit() {
    let e = refused(&["plan", "--placement", "/dev/zero"]);
    assert!(
        e.contains("placement /dev/zero holds more than 4 MiB, more than such a file can be"),
        "{e}"
    );
    let e = refused(&["plan", "--graph", "/dev/zero"]);
    assert!(
        e.contains("graph /dev/zero holds more than 4 MiB, more than such a file can be"),
        "{e}"
    );
    let e = refused(&[
        "run",
        "--adapt",
        "/dev/zero",
        "--budget",
        "5ms",
        "--frames",
        "1",
    ]);
    assert!(
        e.contains("placement /dev/zero holds more than 4 MiB"),
        "{e}"
    );
}

#[test]
fn a_trace_longer_than_its_limit_is_refused_by_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.json");
    // Sparse: a length of 1 GiB and a byte, not a byte of it written.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(kplace::report::trace::MAX_TRACE_BYTES + 1)
        .unwrap();
    let e = refused(&["plot-trace", path.to_str().unwrap()]);
    assert!(
        e.contains(&format!(
            "trace {} is 1073741825 bytes (1.0 GiB), more than such a file can be (at most 1 GiB)",
            path.display()
        )),
        "{e}"
    );
}

/// The spectrogram's graph with `extra` as one more dimension, written beside `dir`'s others.
fn graph_with_dim(dir: &Path, name: &str, extra: &str) -> String {
    let text = std::fs::read_to_string(
        kplace_testkit::workspace().join("workloads/spectrogram/graph.yaml"),
    )
    .unwrap();
    let text = text.replacen("dims:\n", &format!("dims:\n  K: {extra}\n"), 1);
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_dimension_nested_or_long_past_its_limits_is_refused_by_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // 20,000 parentheses deep: a recursive parse of it overflowed the stack.
        (
            format!("{}N{}", "(".repeat(20_000), ")".repeat(20_000)),
            "40001 bytes long, longer than an expression may be (1024)",
        ),
        // A sum of 100,000 terms: its evaluation recursed as deep.
        (
            vec!["N"; 100_000].join("+"),
            "199999 bytes long, longer than an expression may be (1024)",
        ),
        (
            format!("{}N{}", "(".repeat(65), ")".repeat(65)),
            "its parentheses nest more than 64 deep",
        ),
        (
            vec!["1"; 257].join("+"),
            "it has more than 256 numbers and names",
        ),
    ];
    for (i, (expression, why)) in cases.iter().enumerate() {
        let graph = graph_with_dim(dir.path(), &format!("g{i}.yaml"), expression);
        let e = refused(&["plan", "--graph", &graph]);
        assert!(
            e.contains(&format!("graph {graph}:7:6: dimension K: ")) && e.contains(why),
            "{e}"
        );
        assert!(e.len() < 1024, "the expression is quoted short: {e}");
    }
}

#[test]
fn a_graph_of_more_yaml_nodes_than_the_parser_takes_says_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("list.yaml");
    std::fs::write(
        &path,
        format!("name: x\nsinks: [{}]\n", vec!["a"; 300_000].join(",")),
    )
    .unwrap();
    let e = refused(&["plan", "--graph", path.to_str().unwrap()]);
    assert!(
        e.contains(&format!("graph {}: line 2 column ", path.display()))
            && e.contains(
                "more than 250,000 YAML nodes (mappings, lists and values), more than a graph can be"
            )
            && !e.contains("budget breached"),
        "{e}"
    );
}

/// A radar run of 600 frames (long enough for the control file to be read at its start) with
/// `--control FILE`: what it said on stderr.
fn run_with_control(control: &str) -> String {
    let out = kplace(&["run", "--frames", "600", "--control", control]);
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn an_endless_control_file_is_refused_in_one_short_line() {
    let e = run_with_control("/dev/zero");
    assert!(
        e.contains(
            "control file /dev/zero holds more than 1 MiB, more than such a file can be; nothing in it is applied"
        ),
        "{e}"
    );
    assert!(e.len() < 4096, "stderr stays short: {} bytes", e.len());
}

#[test]
fn a_control_file_of_huge_lines_names_them_in_a_few_short_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("control.txt");
    let text = format!(
        "# bad lines\n{}\n{}\n",
        "z".repeat(200_000),
        "q".repeat(60_000)
    );
    std::fs::write(&path, text).unwrap();
    let e = run_with_control(path.to_str().unwrap());
    let at = |line: u32| format!("control file {}, line {line}: ", path.display());
    assert!(
        e.contains(&format!(
            "{}200000 bytes, longer than a line may be (64 KiB); the line is skipped",
            at(2)
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!("{}\"qqqq", at(3)))
            && e.contains("... (60000 bytes) is not STAGE.PARAM=VALUE; the line is skipped"),
        "{e}"
    );
    assert!(e.len() < 4096, "stderr stays short: {} bytes", e.len());
}
