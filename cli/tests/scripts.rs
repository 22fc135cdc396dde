//! The repository's shell scripts: `shellcheck` finds nothing in any of them, and the GPU
//! check (`bench/gpu-check.sh`) stops in its preflight, saying why, on a machine without a
//! usable GPU.

#[path = "../../runtime/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Every script the project ships: `bench/*.sh`, `scripts/*.sh`, `bench/peers/*.sh`,
/// `bench/peers/*/*.sh` and `.ci/run`, relative to the workspace.
fn scripts() -> Vec<PathBuf> {
    let root = support::workspace();
    let mut found = vec![PathBuf::from(".ci/run")];
    let mut dirs = vec![
        PathBuf::from("bench"),
        PathBuf::from("scripts"),
        PathBuf::from("bench/peers"),
    ];
    let peers = root.join("bench/peers");
    for peer in std::fs::read_dir(&peers).expect("read bench/peers") {
        let peer = peer.expect("a bench/peers entry").path();
        if peer.is_dir() {
            dirs.push(
                peer.strip_prefix(&root)
                    .expect("under the root")
                    .to_path_buf(),
            );
        }
    }
    for dir in dirs {
        for entry in std::fs::read_dir(root.join(&dir)).expect("read a script dir") {
            let name = entry.expect("a dir entry").file_name();
            if Path::new(&name).extension().is_some_and(|e| e == "sh") {
                found.push(dir.join(name));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn shellcheck_finds_nothing_in_any_script() {
    let scripts = scripts();
    for want in [
        "bench/gpu-check.sh",
        "bench/peers/cupy/test.sh",
        "scripts/ready.sh",
    ] {
        assert!(
            scripts.iter().any(|s| s == Path::new(want)),
            "{want} not among {scripts:?}"
        );
    }
    // From the workspace root, as the scripts' `# shellcheck source=` directives expect.
    let out = Command::new("shellcheck")
        .arg("-x")
        .args(&scripts)
        .current_dir(support::workspace())
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!(
            "shellcheck cannot be run ({e}): install it (`apt-get install shellcheck`; scripts/setup.sh installs it)"
        ),
    };
    assert!(
        out.status.success(),
        "shellcheck found problems in {scripts:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `kplace devices --json` reports a device this process can use.
fn usable_gpu() -> Option<String> {
    let out = support::output(Command::new(support::kplace_bin()).args(["devices", "--json"]));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let devices = value["driver"]["devices"].as_array()?;
    (value["driver"]["status"] == "ready" && !devices.is_empty())
        .then(|| format!("{} device(s)", devices.len()))
}

/// A bundle as bench/gpu-bundle.sh lays it out, of links to what cargo built here.
fn bundle(dir: &Path) {
    let exe = std::env::current_exe().expect("current exe");
    let built = exe
        .parent()
        .and_then(Path::parent)
        .expect("the profile dir");
    for sub in ["bin", "lib", "tests"] {
        std::fs::create_dir_all(dir.join(sub)).expect("create a bundle dir");
    }
    std::os::unix::fs::symlink(support::kplace_bin(), dir.join("bin/kplace")).expect("link");
    for lib in ["libkplace_cpu.so", "libkplace_gpu.so"] {
        let path = built.join(lib);
        assert!(
            path.is_file(),
            "{} is missing: build the workspace first",
            path.display()
        );
        std::os::unix::fs::symlink(&path, dir.join("lib").join(lib)).expect("link");
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read OUT")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

fn gpu_check(bundle: &Path, out: &Path) -> std::process::Output {
    support::output_within(
        Command::new("bash")
            .arg(support::workspace().join("bench/gpu-check.sh"))
            .env("KPLACE_BUNDLE", bundle)
            .env("OUT", out)
            .current_dir(support::workspace()),
        Duration::from_secs(120),
        None,
    )
}

#[test]
fn gpu_check_stops_in_the_preflight_without_a_gpu_saying_why() {
    if let Some(gpu) = usable_gpu() {
        println!("skipped: this machine has a usable GPU ({gpu}); the check would run in full");
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let (dir, out) = (tmp.path().join("bundle"), tmp.path().join("out"));
    bundle(&dir);
    let run = gpu_check(&dir, &out);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(said.contains("== step 1/9: preflight"), "{said}");
    assert!(said.contains("(budget 15 s)"), "{said}");
    assert!(said.contains("stopped after the preflight"), "{said}");
    assert!(
        !said.contains("== step 2/8"),
        "it went past the preflight:\n{said}"
    );

    assert_eq!(
        files_in(&out),
        ["results.tar.gz", "summary.json", "table.md"],
        "{said}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary.json"))
            .expect("summary.json is JSON");
    assert_eq!(summary["schema"], "kplace-gpu-check/2");
    assert_eq!(summary["status"], "stopped", "{summary:#}");
    let reason = summary["reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("the GPU path cannot run here: CUDA driver: "),
        "{reason}"
    );
    assert!(reason.contains("libcuda.so.1"), "{reason}");
    let pre = &summary["preflight"];
    assert_eq!(pre["usable"], false);
    assert!(
        pre["missing"]
            .as_array()
            .expect("missing[]")
            .iter()
            .any(|m| m.as_str().is_some_and(|m| m.contains("cuFFT"))),
        "{pre:#}"
    );
    assert!(pre["rmem_max"].as_str().is_some(), "{pre:#}");
    assert_eq!(summary["steps"][0]["step"], "preflight");
    assert_eq!(summary["steps"].as_array().map(Vec::len), Some(1));
    let table = std::fs::read_to_string(out.join("table.md")).expect("table.md");
    assert!(
        table.contains("**stopped**: the GPU path cannot run here"),
        "{table}"
    );
    // The archive holds what the preflight gathered.
    let listing = support::output(
        Command::new("tar")
            .arg("-tzf")
            .arg(out.join("results.tar.gz")),
    );
    let listing = String::from_utf8_lossy(&listing.stdout);
    for want in [
        "preflight/devices.json",
        "results/preflight.json",
        "logs/step-preflight.txt",
    ] {
        assert!(
            listing.contains(want),
            "results.tar.gz lacks {want}:\n{listing}"
        );
    }

    // Without a bundle: exit 2, and a summary that says so.
    let none = tmp.path().join("none");
    let out2 = tmp.path().join("out2");
    let run = gpu_check(&none, &out2);
    assert_eq!(run.status.code(), Some(2));
    let summary = std::fs::read_to_string(out2.join("summary.json")).expect("summary.json");
    assert!(summary.contains("no bundle at"), "{summary}");
    assert!(files_in(&out2).len() <= 3);
}
