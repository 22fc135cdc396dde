//! Sizes hold: in every crate of the workspace (the members the root Cargo.toml names), no
//! source file but the unit tests' is over 700 lines, and no function outside the unit tests
//! is over 150 lines (from its `fn` line to its closing brace). Past that, a file is split by
//! concern (its unit tests into `<module>/tests.rs` first) and a function into named steps.

use std::path::Path;

use kplace_testkit::source::{
    Function, SourceFile, functions, is_test_file, non_test_part, source_files,
};

/// The most lines a source file other than unit tests may have.
const FILE_LIMIT: usize = 700;

/// The most lines a function may have.
const FUNCTION_LIMIT: usize = 150;

/// Files over [`FILE_LIMIT`] for now. None is: an entry belongs here only while a change that
/// splits the file is under way (a comment beside it names the issue that does it), and it
/// goes once the file is within the limit (this test says so).
const LONG_FILES: &[&str] = &[];

/// Functions over [`FUNCTION_LIMIT`] for now: (file, function). None is: as for
/// [`LONG_FILES`], an entry belongs here only while the change that splits the function into
/// named steps is under way.
const LONG_FUNCTIONS: &[(&str, &str)] = &[];

/// Every function over `limit` lines in the non-test code of `text`.
fn long_functions(text: &str, limit: usize) -> Vec<Function> {
    functions(non_test_part(text))
        .into_iter()
        .filter(|f| f.lines > limit)
        .collect()
}

#[test]
fn no_source_file_or_function_is_over_its_limit() {
    let root = kplace_testkit::workspace();
    let mut over = Vec::new();
    let mut seen_files = Vec::new();
    let mut seen_functions = Vec::new();
    for SourceFile { name, text, .. } in source_files(&root, |_| true) {
        let lines = text.lines().count();
        if lines > FILE_LIMIT {
            if LONG_FILES.contains(&name.as_str()) {
                seen_files.push(name.clone());
            } else {
                over.push(format!("{name}: {lines} lines (limit {FILE_LIMIT})"));
            }
        }
        for f in long_functions(&text, FUNCTION_LIMIT) {
            if LONG_FUNCTIONS.contains(&(name.as_str(), f.name.as_str())) {
                seen_functions.push((name.clone(), f.name.clone()));
            } else {
                over.push(format!(
                    "{name}:{}: fn {} has {} lines (limit {FUNCTION_LIMIT})",
                    f.line, f.name, f.lines
                ));
            }
        }
    }
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
    // An entry of the allow-lists that is within the limits now goes.
    for file in LONG_FILES {
        assert!(
            seen_files.iter().any(|f| f == file),
            "{file} is within {FILE_LIMIT} lines now: take it off LONG_FILES"
        );
    }
    for (file, function) in LONG_FUNCTIONS {
        assert!(
            seen_functions
                .iter()
                .any(|(f, n)| f == file && n == function),
            "{file}: fn {function} is within {FUNCTION_LIMIT} lines now: take it off LONG_FUNCTIONS"
        );
    }
}

#[test]
fn a_function_is_measured_from_its_fn_line_to_its_closing_brace() {
    let code = "\
pub fn one() -> u32 { 1 }

impl Thing {
    /// Docs.
    pub(crate) fn two(
        &self,
    ) -> u32 {
        let x = {
            1
        };
        x + 1
    }

    fn declared(&self);
}

#[cfg(test)]
mod tests {
    fn hidden() {
    }
}
";
    let found = functions(non_test_part(code));
    let named = |name: &str| found.iter().find(|f| f.name == name).cloned();
    assert_eq!(
        named("one"),
        Some(Function {
            name: "one".into(),
            line: 1,
            lines: 1
        })
    );
    assert_eq!(
        named("two"),
        Some(Function {
            name: "two".into(),
            line: 5,
            lines: 8
        })
    );
    assert_eq!(named("declared"), None, "a declaration has no body");
    assert_eq!(named("hidden"), None, "unit tests are not counted");
    assert_eq!(long_functions(code, 7).len(), 1);
    assert!(is_test_file(Path::new("rate/search/tests.rs")));
    assert!(!is_test_file(Path::new("rate/search.rs")));
}
