//! Every read is bounded: outside the unit tests, no crate of the workspace reads a file or a
//! pipe whole without a limit (`fs::read_to_string`, `fs::read`, `io::read_to_string`, or a
//! reader's `read_to_string`/`read_to_end`). A file is read with
//! `kplace::os::files::read_bounded` or `read_text_bounded`, which refuse one over the limit
//! that suits it (from its length, before reading, where it has one); a child's output with
//! `kplace::os::process::drain_tail`; anything else as a stream, a bounded piece at a time.
//! The test support crate (kplace-testkit) reads as tests do, freely.

use kplace_testkit::source::{SourceFile, non_test_part, source_files};

/// What reads a whole file or stream, however long.
const UNBOUNDED: &[&str] = &[
    "fs::read_to_string(",
    "fs::read(",
    "io::read_to_string(",
    ".read_to_string(",
    ".read_to_end(",
];

/// Where the bounded readers themselves are written.
const HELPERS: &[&str] = &["runtime/core/src/os/files.rs"];

/// Reads that are bounded otherwise, each with why: (file, what it reads).
const BOUNDED_OTHERWISE: &[(&str, &str)] = &[(
    "runtime/cudalibs/src/lib.rs",
    // The pipes of a child that has exited: they hold at most what a pipe buffers.
    ".read_to_string(",
)];

/// Every unbounded read in the non-test code of `text`: (line, the pattern).
fn unbounded_reads(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (number, line) in non_test_part(text).lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for pattern in UNBOUNDED {
            if code.contains(pattern) {
                found.push((number + 1, *pattern));
            }
        }
    }
    found
}

#[test]
fn no_crate_reads_a_file_or_pipe_without_a_bound() {
    let root = kplace_testkit::workspace();
    let mut over = Vec::new();
    let mut seen = Vec::new();
    for SourceFile { name, text, .. } in source_files(&root, |m| !m.ends_with("testkit")) {
        if HELPERS.contains(&name.as_str()) {
            continue;
        }
        for (line, pattern) in unbounded_reads(&text) {
            if BOUNDED_OTHERWISE.contains(&(name.as_str(), pattern)) {
                seen.push((name.clone(), pattern));
            } else {
                over.push(format!(
                    "{name}:{line}: {pattern} reads without a bound (use kplace::os::files::read_bounded, or drain_tail for a child's output)"
                ));
            }
        }
    }
    assert!(over.is_empty(), "unbounded reads:\n{}", over.join("\n"));
    for (file, pattern) in BOUNDED_OTHERWISE {
        assert!(
            seen.iter().any(|(f, p)| f == file && p == pattern),
            "{file} no longer reads with {pattern}: take it off BOUNDED_OTHERWISE"
        );
    }
}

#[test]
fn each_whole_read_is_found_and_comments_and_unit_tests_are_not() {
    let code = "\
fn a() {
    let t = std::fs::read_to_string(p)?; // whole
    // std::fs::read(p) in a comment
    let b = fs::read(p)?;
    file.take(9).read_to_end(&mut v)?; // bounded, but not by the one helper
    let s = std::io::read_to_string(r)?;
}

#[cfg(test)]
mod tests {
    fn hidden() { std::fs::read_to_string(p).unwrap(); }
}
";
    let found = unbounded_reads(code);
    assert_eq!(
        found,
        [
            (2, "fs::read_to_string("),
            (4, "fs::read("),
            (5, ".read_to_end("),
            (6, "io::read_to_string("),
        ]
    );
}
