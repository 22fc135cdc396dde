//! A YAML syntax error as kplace says it: the parser's message and its snippet, the snippet
//! labelled with the file it came from (not the parser's `<input>`), and no second `error:`
//! inside the one the command line prints.

use std::path::Path;

/// `err`, from parsing the file at `path`, rendered for a person.
pub fn syntax_error(err: &serde_saphyr::Error, path: &Path) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snippet_names_the_file_and_error_is_said_once() {
        let err = serde_saphyr::from_str::<std::collections::BTreeMap<String, String>>(
            "name: x\nstages: {a: cpu\n",
        )
        .unwrap_err();
        let text = syntax_error(&err, Path::new("placements/p.yaml"));
        assert!(text.starts_with("line 2 column 9: "), "{text}");
        assert!(text.contains("--> placements/p.yaml:2:9"), "{text}");
        assert!(
            !text.contains("<input>") && !text.contains("error:"),
            "{text}"
        );
    }
}
