//! The JSON Schemas committed in docs/schema/ are the ones generated from the report's types,
//! so a reader in another language can trust them. After changing a report type, regenerate
//! them with `KPLACE_BLESS=1 cargo test -p kplace --test report_schema`.

use kplace::report::json_schema;
use kplace::report::progress::ProgressLine;
use kplace::report::ready::ReadyFile;
use kplace::report::run::{MultiRunReport, RunReport};
use kplace::report::send::SendFile;

#[test]
fn the_committed_schemas_are_generated_from_the_types() {
    let dir = kplace_testkit::workspace().join("docs/schema");
    for (file, schema) in [
        ("run-report.schema.json", json_schema::<RunReport>()),
        (
            "multi-run-report.schema.json",
            json_schema::<MultiRunReport>(),
        ),
        ("send-report.schema.json", json_schema::<SendFile>()),
        ("ready.schema.json", json_schema::<ReadyFile>()),
        ("progress.schema.json", json_schema::<ProgressLine>()),
    ] {
        let path = dir.join(file);
        let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if std::env::var_os("KPLACE_BLESS").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        let committed =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            committed == generated,
            "{} differs from the schema of the types; regenerate it with \
             KPLACE_BLESS=1 cargo test -p kplace --test report_schema",
            path.display()
        );
    }
}

#[test]
fn every_property_is_required_and_no_other_allowed() {
    let schema = json_schema::<RunReport>();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for nullable in ["ingest", "mps", "interrupted", "cpus_allowed"] {
        assert!(
            required.contains(&nullable),
            "{nullable} is required (as null)"
        );
    }
    assert_eq!(schema["additionalProperties"], false);
}

#[test]
fn a_report_of_another_version_is_named_as_such() {
    use kplace::report::read_json;
    let old = read_json::<RunReport>(r#"{"schema": "kplace-run-report/1"}"#, "old.json")
        .unwrap_err()
        .to_string();
    assert!(old.starts_with("old.json: "), "{old}");
    assert!(
        old.contains("\"kplace-run-report/1\" is another version"),
        "{old}"
    );
    assert!(
        old.contains("this kplace reads kplace-run-report/2"),
        "{old}"
    );
    assert!(old.contains("produce the file again"), "{old}");
    let other = read_json::<RunReport>(r#"{"schema": "kplace-send-report/2"}"#, "send.json")
        .unwrap_err()
        .to_string();
    assert_eq!(
        other,
        "send.json: schema \"kplace-send-report/2\", expected kplace-run-report/2"
    );
}
