//! A YAML syntax error as kplace says it: the parser's message and its snippet, the snippet
//! labelled with the file it came from (not the parser's `<input>`), and no second `error:`
//! inside the one the command line prints.
//!
//! The parser's budget (its defaults: at most 250,000 nodes, 1,000,000 events, 64 levels of
//! nesting, 50,000 aliases and anchors, 64 MiB of scalars) bounds what a file can make it do,
//! aliases that expand a billion times included; a file that breaches it is told what it
//! passed and the limit, in words, not the parser's `budget breached: Nodes { .. }`.

use std::path::Path;

use serde_saphyr::budget::BudgetBreach;

/// `err`, from parsing the file at `path`, rendered for a person; `what` is what the file
/// should have been (`a graph`), said when it breaches the parser's budget.
pub fn syntax_error(err: &serde_saphyr::Error, path: &Path, what: &str) -> String {
    if let serde_saphyr::Error::Budget { breach, location } = err.without_snippet() {
        let at = match (location.line(), location.column()) {
            (0, _) => String::new(),
            (line, column) => format!("line {line} column {column}: "),
        };
        return format!("{at}{}, more than {what} can be", budget_breach(breach));
    }
    let name = path.display().to_string();
    let options = serde_saphyr::render_options! {
        source_name: Some(name.as_str()),
    };
    let text = err.render_with_options(options);
    match text.strip_prefix("error: ") {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// What a file did past the parser's budget, with the budget's limit.
fn budget_breach(breach: &BudgetBreach) -> String {
    let limits = serde_saphyr::Budget::default();
    let n = |count: usize| thousands(count as u64);
    match breach {
        BudgetBreach::Nodes { .. } => format!(
            "more than {} YAML nodes (mappings, lists and values)",
            n(limits.max_nodes)
        ),
        BudgetBreach::Events { .. } => format!("more than {} YAML events", n(limits.max_events)),
        BudgetBreach::Depth { .. } => format!(
            "mappings and lists nested more than {} deep",
            n(limits.max_depth)
        ),
        BudgetBreach::Aliases { .. } => {
            format!("more than {} aliases (*name)", n(limits.max_aliases))
        }
        BudgetBreach::Anchors { .. } => {
            format!("more than {} anchors (&name)", n(limits.max_anchors))
        }
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => {
            format!("{} aliases of only {} anchors", n(*aliases), n(*anchors))
        }
        BudgetBreach::ScalarBytes { .. } => format!(
            "more than {} bytes of values",
            n(limits.max_total_scalar_bytes)
        ),
        BudgetBreach::Documents { .. } => {
            format!("more than {} YAML documents", n(limits.max_documents))
        }
        other => format!("past a limit of the YAML parser ({other:?})"),
    }
}

/// `n` with a comma between each group of three digits (`250,000`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snippet_names_the_file_and_error_is_said_once() {
        let err = serde_saphyr::from_str::<std::collections::BTreeMap<String, String>>(
            "name: x\nstages: {a: cpu\n",
        )
        .unwrap_err();
        let text = syntax_error(&err, Path::new("placements/p.yaml"), "a placement");
        assert!(text.starts_with("line 2 column 9: "), "{text}");
        assert!(text.contains("--> placements/p.yaml:2:9"), "{text}");
        assert!(
            !text.contains("<input>") && !text.contains("error:"),
            "{text}"
        );
    }

    fn refusal(yaml: &str) -> String {
        let err = serde_saphyr::from_str::<serde::de::IgnoredAny>(yaml).unwrap_err();
        syntax_error(&err, Path::new("g.yaml"), "a graph")
    }

    #[test]
    fn a_breached_budget_is_said_with_its_limit() {
        let list = format!("[{}]", vec!["1"; 250_001].join(","));
        let text = refusal(&list);
        assert!(
            text.ends_with(
                "more than 250,000 YAML nodes (mappings, lists and values), more than a graph can be"
            ),
            "{text}"
        );
        assert!(!text.contains("budget breached"), "{text}");
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let text = refusal(&deep);
        assert!(text.contains("nested more than"), "{text}");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(64), "64");
    }
}
