use super::*;

fn key(shape: &str, fingerprint: &str) -> CalibrationKey {
    CalibrationKey {
        machine: "host, cpu".into(),
        cores: 2,
        gpu: None,
        libraries: vec![LibraryBuild {
            path: "/lib/libkplace_cpu.so".into(),
            fingerprint: fingerprint.into(),
        }],
        graph: "fmcw-radar@0123".into(),
        shape: shape.into(),
        workload: "the scene in memory, seed 1".into(),
        cotenant: None,
    }
}

fn calibration(key: CalibrationKey, measured_at_unix_s: u64) -> Calibration {
    Calibration {
        schema: SCHEMA.into(),
        key,
        measured_at_unix_s,
        stages: vec![StageCosts {
            name: "range_fft".into(),
            cpu_ms: Some(0.25),
            gpu: None,
            serial: false,
        }],
        source_ms: 0.01,
        collector_ms: 0.002,
        receiver_ms: Some(0.2),
        sender_ms: None,
        cpu_overheads: Overheads::default(),
        gpu_overheads: None,
        bus: None,
        runs: Vec::new(),
    }
}

#[test]
fn a_stored_calibration_is_reused_for_its_key_only_and_until_stale() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let stored = calibration(key("1024x128", "100-aa"), now_unix_s());
    store.save(&stored).unwrap();
    let (found, lookup) = store.load(&stored.key, 3600).unwrap();
    assert_eq!(lookup, Lookup::Reused);
    assert_eq!(found.as_ref(), Some(&stored), "read back as written");
    // Another CPI, another build of a library: not this calibration.
    for other in [key("2048x256", "100-aa"), key("1024x128", "100-ab")] {
        assert_eq!(store.load(&other, 3600).unwrap(), (None, Lookup::Missing));
    }
    // Older than allowed: stale, and says how old.
    let old = calibration(key("512x64", "100-aa"), now_unix_s() - 7200);
    store.save(&old).unwrap();
    let (found, lookup) = store.load(&old.key, 3600).unwrap();
    assert!(found.is_none());
    assert!(
        matches!(lookup, Lookup::Stale { age_s } if age_s >= 7200),
        "{lookup:?}"
    );
}

#[test]
fn a_library_rebuilt_changes_its_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libx.so");
    fs::write(&path, b"build one").unwrap();
    let one = LibraryBuild::of(&path).unwrap();
    // Read a piece at a time, the same fingerprint as of the whole: stored keys still match.
    assert_eq!(
        one.fingerprint,
        format!("9-{:016x}", fingerprint(b"build one"))
    );
    fs::write(&path, b"build two").unwrap();
    let two = LibraryBuild::of(&path).unwrap();
    assert_ne!(one.fingerprint, two.fingerprint);
    assert!(matches!(
        LibraryBuild::of(&dir.path().join("missing.so")),
        Err(CalibrateError::Io { action: "read", .. })
    ));
}

#[test]
fn a_damaged_calibration_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    let key = key("1024x128", "100-aa");
    fs::write(store.path(&key), "{ not json").unwrap();
    let e = store.load(&key, 3600).unwrap_err();
    assert!(
        e.to_string()
            .contains(&store.path(&key).display().to_string()),
        "{e}"
    );
}
