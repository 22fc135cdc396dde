//! `kplace admit`: how many pipelines of a placement at a rate fit, from a calibration of this
//! machine (measured here, into a scratch store) and the cost model; and `kplace run
//! --pipelines N` refusing a count the stored calibration says cannot fit, unless forced.
//! Counts depend on this machine's speed, so the tests check what follows from the account
//! itself, never a count or a time.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(300);

fn kplace(store: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(kplace_testkit::kplace_bin!());
    c.current_dir(kplace_testkit::workspace())
        .env("KPLACE_CALIBRATIONS", store)
        .args(args);
    kplace_testkit::output_within(&mut c, LIMIT, None)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The count on the account's line `<K> pipelines fit`, and each resource's count.
fn counts(account: &str) -> (u64, Vec<(String, u64)>) {
    let answer = account
        .lines()
        .find_map(|l| {
            l.strip_suffix(" run out first")
                .or_else(|| l.strip_suffix(" runs out first"))?
                .split(" pipelines fit")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no answer in:\n{account}"));
    let each = account
        .lines()
        .filter_map(|l| {
            let (resource, rest) = l.trim().split_once(": ")?;
            let n = rest.split(" pipelines (").next()?.trim().parse().ok()?;
            Some((resource.to_string(), n))
        })
        .collect();
    (answer, each)
}

#[test]
fn admit_answers_with_the_resource_that_runs_out_and_run_refuses_past_it() {
    let store = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let out_path = out_dir.path().to_str().unwrap();
    let admit = |rate: &str| {
        let args = ["admit", "--placement", "all-cpu", "--rate", rate];
        let more = ["--calibrate", "300ms", "--out", out_path];
        kplace(store.path(), &[&args[..], &more[..]].concat())
    };
    let out = admit("100");
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    let account = std::fs::read_to_string(out_dir.path().join("admit-1024x128/admit.txt")).unwrap();
    assert!(
        account.contains("admit all-cpu at 1024x128, 100.0 frames/s each"),
        "{account}"
    );
    let (answer, each) = counts(&account);
    // The answer is the fewest any resource holds; a CPU placement shares only the cores.
    assert_eq!(
        each.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        ["cores"],
        "{account}"
    );
    assert_eq!(answer, each[0].1, "{account}");
    assert!(
        out_dir
            .path()
            .join("admit-1024x128/calibration.json")
            .is_file()
    );

    // At the lowest rate there is, a frame a day, every resource holds more than admit
    // counts: the most it counts fit, and nothing runs out; the budget is the day.
    let out = admit("1.1574074074074073e-5");
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    let account = std::fs::read_to_string(out_dir.path().join("admit-1024x128/admit.txt")).unwrap();
    assert!(
        account.contains("1.157e-5 frames/s each within a 86400000.000 ms budget")
            && account.contains("cores: at least 64 pipelines (")
            && account.contains(
                "64 pipelines fit, the most kplace admit counts: no resource runs out before"
            )
            && !account.contains("run out first"),
        "{account}"
    );

    // A rate no pipeline sustains alone admits none, and says why.
    let out = admit("1e9");
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("0 pipelines fit: one pipeline alone is predicted to sustain"),
        "{log}"
    );

    // With the calibration stored, a run of more pipelines than fit is refused before it
    // starts, naming the resource; forced, it runs (up to the 64 a run may have).
    if answer >= 64 {
        return;
    }
    let too_many = (answer + 1).to_string();
    let run = |force: bool| {
        let mut args = vec![
            "run",
            "--pipelines",
            &too_many,
            "--stream-rate",
            "100",
            "--frames",
            "10",
        ];
        if force {
            args.push("--force");
        }
        kplace(store.path(), &args)
    };
    let out = run(false);
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(
        log.contains(&format!("--pipelines {too_many}: at 100.0 frames/s each")),
        "{log}"
    );
    assert!(
        log.contains(&format!("{answer} fit by cores")) && log.contains("--force"),
        "{log}"
    );
    let out = run(true);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("forced"), "{log}");
}

#[test]
fn a_run_without_a_stored_calibration_is_not_checked_and_says_so() {
    let store = tempfile::tempdir().unwrap();
    let out = kplace(
        store.path(),
        &["-v", "run", "--pipelines", "2", "--frames", "10"],
    );
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("not checked against the cost model"), "{log}");
    assert!(
        log.contains("no fresh calibration of this machine is stored"),
        "{log}"
    );
}

#[test]
fn admit_refuses_what_it_cannot_answer_naming_it() {
    let store = tempfile::tempdir().unwrap();
    for (args, why) in [
        (
            vec!["admit", "--placement", "all-cpu", "--rate", "0"],
            "--rate 0.0 is out of range",
        ),
        // The case: a budget of 18446744073709551616000 ms, and 64 pipelines fit
        // because "cores run out first". Refused before anything is measured, naming the range.
        (
            vec!["admit", "--placement", "all-cpu", "--rate", "1e-30"],
            "--rate 1e-30 is out of range: a frame rate must be from 1.157e-5 (a frame a day) to 1e9 (a frame a nanosecond) frames per second",
        ),
        (
            vec!["admit", "--placement", "all-cpu", "--rate", "1e30"],
            "--rate 1e30 is out of range: a frame rate must be from 1.157e-5",
        ),
        (
            vec!["admit", "--placement", "no-such", "--rate", "10"],
            "no-such",
        ),
        (
            vec![
                "admit",
                "--placement",
                "all-cpu",
                "--rate",
                "10",
                "--shape",
                "1024x128,512x64",
            ],
            "one frame shape",
        ),
    ] {
        let out = kplace(store.path(), &args);
        let log = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {log}");
        assert!(log.contains(why), "{args:?}: {why} not in {log}");
    }
    // Nothing was calibrated or stored for the refused rates.
    assert_eq!(std::fs::read_dir(store.path()).unwrap().count(), 0);
}
