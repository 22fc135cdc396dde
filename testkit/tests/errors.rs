//! Typed errors: outside the unit tests and the binaries, no crate of the workspace returns a
//! `Result<_, String>` (however its signature is broken across lines, or hidden in a
//! `type Err = String`), and no error type wraps a bare string (`SomeError(String)`). An error
//! is an enum of its failures, each naming the place (file, line, field, frame, device) and
//! carrying what it found, as `PlanError` does; only the binary (`cli/`, and a crate's
//! `src/bin/` or `main.rs`) turns errors into text, with anyhow.

use kplace_testkit::source::source_files;

/// A `Result<_, String>` that stays for now, each with why: (file, how many).
const STRINGLY_STILL: &[(&str, usize)] = &[];

/// The code of `text` before its inline unit tests (`#[cfg(test)]` then `mod tests {`),
/// without comments, with every run of whitespace one space; and for each byte of it, the
/// line of `text` it came from.
fn code_of(text: &str) -> (String, Vec<usize>) {
    let text = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default();
    let mut code = String::new();
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        for word in line.split_whitespace() {
            code.push_str(word);
            code.push(' ');
            lines.extend(std::iter::repeat_n(number + 1, word.len() + 1));
        }
    }
    (code, lines)
}

/// The generic arguments of the `<` at `open` in `code`, split at its top-level commas, each
/// trimmed; `None` if it never closes.
fn arguments(code: &str, open: usize) -> Option<Vec<&str>> {
    let bytes = code.as_bytes();
    let (mut depth, mut start, mut out) = (0usize, open + 1, Vec::new());
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            // The `>` of `->` closes nothing.
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    // A trailing comma leaves no argument after it.
                    let last = code[start..i].trim();
                    if !last.is_empty() {
                        out.push(last);
                    }
                    return Some(out);
                }
            }
            b',' if depth == 1 => {
                out.push(code[start..i].trim());
                start = i + 1;
            }
            b';' | b'{' => return None,
            _ => {}
        }
    }
    None
}

/// Every string error in the non-test code of `text`: (line, what it is).
fn string_errors(text: &str) -> Vec<(usize, String)> {
    let (code, lines) = code_of(text);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in code
        .match_indices("Result <")
        .chain(code.match_indices("Result<"))
    {
        if code[..at].chars().next_back().is_some_and(ident) {
            continue;
        }
        let open = at + code[at..].find('<').expect("matched with its <");
        if let Some(args) = arguments(&code, open)
            && args.len() == 2
            && args[1] == "String"
        {
            found.push((lines[at], format!("Result<{}, String>", args[0])));
        }
    }
    for alias in ["type Err = String", "type Error = String"] {
        for (at, _) in code.match_indices(alias) {
            found.push((lines[at], alias.to_string()));
        }
    }
    for (at, _) in code.match_indices("Error(") {
        let inside = &code[at + "Error(".len()..];
        let inside = inside.strip_prefix("pub ").unwrap_or(inside);
        if inside.starts_with("String)") {
            let name_start = code[..at].rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
            found.push((lines[at], format!("{}(String)", &code[name_start..at + 5])));
        }
    }
    found.sort();
    found
}

#[test]
fn no_library_code_has_a_string_for_an_error() {
    let root = kplace_testkit::workspace();
    let mut over = Vec::new();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for file in source_files(&root, |m| !m.ends_with("cli")) {
        let binary =
            file.relative.starts_with("bin") || file.relative == std::path::Path::new("main.rs");
        if binary {
            continue;
        }
        let (name, found) = (file.name, string_errors(&file.text));
        match STRINGLY_STILL.iter().find(|(f, _)| *f == name) {
            Some(_) => seen.push((name, found.len())),
            None => over.extend(found.into_iter().map(|(line, what)| {
                format!("{name}:{line}: {what}: make it an error enum that names the place")
            })),
        }
    }
    assert!(over.is_empty(), "string errors:\n{}", over.join("\n"));
    for (file, count) in STRINGLY_STILL {
        let now = seen.iter().find(|(f, _)| f == file).map_or(0, |(_, n)| *n);
        assert!(
            now <= *count,
            "{file} has {now} string errors, more than the {count} it may keep"
        );
        assert!(
            now == *count,
            "{file} has {now} string errors, fewer than {count}: lower its count in STRINGLY_STILL (or take it off)"
        );
    }
}

#[test]
fn each_string_error_is_found_and_typed_ones_comments_and_unit_tests_are_not() {
    let code = "\
pub fn one(text: &str) -> Result<u64, String> {
    todo!()
}
fn broken_across(
    lines: &str,
) -> Result<
    Vec<(String, u64)>,
    String,
> {
    todo!()
}
fn closure(f: &mut dyn FnMut() -> Result<Vec<u8>, String>) {}
impl FromStr for Mode {
    type Err = String;
}
pub struct FrameError(String);
pub struct SinkError(pub String);
fn typed() -> Result<String, ParseError> { todo!() }
fn nested() -> Result<(String, u64), Why> { todo!() }
fn generic() -> Result<Vec<String>, E> { todo!() }
fn arrow() -> Result<Box<dyn Fn() -> u8>, Why> { todo!() }
struct Named { text: String }
// fn commented() -> Result<(), String>
fn tail() {} // -> Result<(), String>

#[cfg(test)]
mod tests {
    fn helper() -> Result<u64, String> { todo!() }
}
";
    let found = string_errors(code);
    assert_eq!(
        found,
        [
            (1, "Result<u64, String>".to_string()),
            (6, "Result<Vec<(String, u64)>, String>".to_string()),
            (12, "Result<Vec<u8>, String>".to_string()),
            (14, "type Err = String".to_string()),
            (16, "FrameError(String)".to_string()),
            (17, "SinkError(String)".to_string()),
        ]
    );
}
