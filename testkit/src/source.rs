//! The workspace's sources read as modules, for the checks that hold over every crate
//! (`tests/layers.rs`: no import circle between the modules of one parent; `tests/sizes.rs`: no
//! file or function over its size limit). The crates are the members the root `Cargo.toml`
//! names, each read from its `src/` (a `src/bin/NAME` is a crate of its own); unit tests (a
//! `tests.rs` file, or what follows `#[cfg(test)] mod tests`) are not part of a module's code.
//!
//! This is a reading of the text, not a compiler: a `crate::a::b`, `super::b` or `self::b`
//! path outside comments is an import of module `a::b` when a file of the crate is that
//! module, whether in a `use` (braces included) or in an expression.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The import edges between the child modules of one parent: module name to the names of its
/// siblings it imports.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// The members the workspace's `Cargo.toml` (under `root`) lists, as directories under `root`.
pub fn members(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("{}: {e}", root.join("Cargo.toml").display()));
    let start = manifest
        .find("members")
        .expect("the workspace's Cargo.toml lists its members");
    let list = &manifest[start..];
    let list = &list[list.find('[').expect("members = [") + 1..];
    let list = &list[..list.find(']').expect("members = [...]")];
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m))
        .collect()
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A source file of a crate, not a unit-test file ([`is_test_file`]), read.
pub struct SourceFile {
    /// Its path from the workspace's root, as the checks name it.
    pub name: String,
    /// Its path from its crate's `src/`.
    pub relative: PathBuf,
    /// Its text.
    pub text: String,
}

/// Every source file, unit-test files left out, under `src/` of each member of the workspace
/// at `root` that `member` keeps, member by member, each in its path's order.
pub fn source_files(root: &Path, member: impl Fn(&Path) -> bool) -> Vec<SourceFile> {
    let mut files = Vec::new();
    for dir in members(root).into_iter().filter(|m| member(m)) {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        for path in rust_files(&src) {
            let relative = path.strip_prefix(&src).expect("under src").to_path_buf();
            if is_test_file(&relative) {
                continue;
            }
            let name = path
                .strip_prefix(root)
                .expect("under the workspace")
                .display()
                .to_string();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            files.push(SourceFile {
                name,
                relative,
                text,
            });
        }
    }
    files
}

/// Whether the file at `relative` (to a crate's `src/`) holds unit tests only: a `tests.rs`
/// (a module's `#[cfg(test)] mod tests;`) or anything in a `tests` directory.
pub fn is_test_file(relative: &Path) -> bool {
    relative.file_name().is_some_and(|n| n == "tests.rs")
        || relative
            .parent()
            .is_some_and(|p| p.components().any(|c| c.as_os_str() == "tests"))
}

/// The part of a source file before its unit tests (`#[cfg(test)]` then `mod tests`).
pub fn non_test_part(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default()
}

/// The crate (`""` for the library or binary of `src/`, `bin/NAME` for `src/bin/NAME.rs` or
/// `src/bin/NAME/`) and module path of the file at `relative` to `src/`.
pub fn module_of(relative: &Path) -> (String, Vec<String>) {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let mut krate = String::new();
    if parts.len() > 1 && parts[0] == "bin" {
        let name = parts[1].trim_end_matches(".rs").to_string();
        krate = format!("bin/{name}");
        parts.drain(..2);
        if parts.is_empty() {
            return (krate, Vec::new());
        }
    }
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    let top = krate.is_empty() && parts.is_empty() && (stem == "lib" || stem == "main");
    let bin_root = !krate.is_empty() && parts.is_empty() && stem == "main";
    if !(stem == "mod" || top || bin_root) {
        parts.push(stem.to_string());
    }
    (krate, parts)
}

/// The code of `text` without comment lines and trailing `// ` comments.
fn without_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| match l.find(" // ") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a use tree starting at `text` names (after its `crate::`, `super::` or `self::`),
/// each prefixed with `prefix`; returns them and how many bytes the tree took.
fn use_tree(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    let mut at = 0;
    loop {
        at += text[at..].len() - text[at..].trim_start().len();
        let rest = &text[at..];
        if rest.starts_with('{') {
            at += 1;
            loop {
                at += text[at..].len() - text[at..].trim_start().len();
                if text[at..].starts_with('}') || text[at..].is_empty() {
                    return at + 1;
                }
                at += use_tree(&text[at..], path.clone(), out);
                at += text[at..].len() - text[at..].trim_start().len();
                if text[at..].starts_with(',') {
                    at += 1;
                }
                // Anything else (malformed or not a use tree after all) ends the group.
                else if !text[at..].starts_with('}') {
                    return at;
                }
            }
        }
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        at += ident.len();
        if ident.is_empty() || ident == "self" {
            out.push(path);
            return at;
        }
        path.push(ident);
        if text[at..].starts_with("::") {
            at += 2;
        } else {
            out.push(path);
            return at;
        }
    }
}

/// The module paths (absolute in the crate) that the code of module `module` names.
pub fn referenced(module: &[String], code: &str) -> Vec<Vec<String>> {
    let code = without_comments(code);
    let mut found = Vec::new();
    for (prefix, climb) in [("crate::", None), ("super::", Some(1)), ("self::", Some(0))] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut rest = &code[at + prefix.len()..];
            let base = match climb {
                None => Vec::new(),
                Some(mut up) => {
                    while let Some(more) = rest.strip_prefix("super::") {
                        up += 1;
                        rest = more;
                    }
                    if up > module.len() {
                        continue;
                    }
                    module[..module.len() - up].to_vec()
                }
            };
            use_tree(rest, base, &mut found);
        }
    }
    found
}

/// Every import edge between sibling modules of the crates whose sources are in `src`, by
/// scope: the parent module's path (`crate`, `crate::executor`), after `bin/NAME: ` for the
/// crate of `src/bin/NAME`. A reference from module `a::b::c` to
/// `a::d::e` is an edge from `b` to `d` in scope `a`; a module's references to its own
/// ancestors or descendants are no edge.
pub fn edges(src: &Path) -> BTreeMap<String, Edges> {
    let files: Vec<(PathBuf, (String, Vec<String>))> = rust_files(src)
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(src).ok()?.to_path_buf();
            (!is_test_file(&relative)).then(|| (path, module_of(&relative)))
        })
        .collect();
    let modules: BTreeSet<&(String, Vec<String>)> = files.iter().map(|(_, m)| m).collect();
    let mut edges: BTreeMap<String, Edges> = BTreeMap::new();
    for (path, (krate, module)) in &files {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for target in referenced(module, non_test_part(&text)) {
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.len() || common >= target.len() {
                continue;
            }
            let sibling = (krate.clone(), target[..=common].to_vec());
            if !modules.contains(&sibling) {
                continue;
            }
            let parent: Vec<&str> = std::iter::once("crate")
                .chain(module[..common].iter().map(String::as_str))
                .collect();
            let scope = if krate.is_empty() {
                parent.join("::")
            } else {
                format!("{krate}: {}", parent.join("::"))
            };
            edges
                .entry(scope)
                .or_default()
                .entry(module[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    edges
}

/// A cycle through `start`, if there is one: the modules in order.
pub fn cycle_from(edges: &Edges, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![start.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("a path is never empty");
        for next in edges.get(last).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

/// Every import circle in the crates whose sources are in `src`, each as `scope: a -> b -> a`
/// (one per module on a circle).
pub fn circles(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (scope, edges) in edges(src) {
        for module in edges.keys() {
            if let Some(cycle) = cycle_from(&edges, module) {
                found.push(format!("{scope}: {}", cycle.join(" -> ")));
            }
        }
    }
    found
}

/// A function and its length in lines, from its `fn` line to its closing brace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The line its `fn` is on, from 1.
    pub line: usize,
    /// Its lines, the `fn` line and the closing brace's included.
    pub lines: usize,
}

/// The name of the function whose `fn` is on `line`, if one is.
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix("pub(") {
            rest = after[after.find(')')? + 1..].trim_start();
            continue;
        }
        let qualifier = [
            "pub ",
            "const ",
            "async ",
            "unsafe ",
            "default ",
            "extern \"C\" ",
        ]
        .iter()
        .find_map(|q| rest.strip_prefix(q));
        match qualifier {
            Some(after) => rest = after.trim_start(),
            None => break,
        }
    }
    let name: String = rest
        .strip_prefix("fn ")?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Every function with a body in `code`, with its length: from its `fn` line to the first
/// line after it that is only a `}` at the `fn` line's indentation (a one-line function is
/// one line).
pub fn functions(code: &str) -> Vec<Function> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let close = format!("{}}}", &line[..indent]);
        // A declaration without a body (in a trait, or extern) ends with `;` before any `{`.
        let opens = lines[i..]
            .iter()
            .position(|l| l.contains('{') || l.trim_end().ends_with(';'));
        let Some(opens) = opens.map(|o| i + o) else {
            continue;
        };
        if !lines[opens].contains('{') {
            continue;
        }
        let balanced = |l: &str| l.matches('{').count() == l.matches('}').count();
        let end = if lines[opens].trim_end().ends_with('}') && balanced(lines[opens]) {
            Some(opens)
        } else {
            (opens + 1..lines.len()).find(|&j| lines[j].trim_end() == close)
        };
        if let Some(end) = end {
            found.push(Function {
                name,
                line: i + 1,
                lines: end - i + 1,
            });
        }
    }
    found
}
