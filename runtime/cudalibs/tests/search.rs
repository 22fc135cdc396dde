//! Library discovery on made-up layouts: temporary directories holding stand-in libraries
//! (small shared objects built with `cc`, with the real libraries' sonames and version calls),
//! searched through a described environment. Each test uses a library of its own: what one
//! loads stays loaded in this process, and the loader's path finds it by soname.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kplace_cuda_libs::{
    Environment, Library, LibraryReport, NoPythonAnswer, PythonFailure, ask_pythons,
    find_in_environment,
};

/// Builds a shared object at `dir/file` with soname `soname` and the C `body`.
fn stand_in(dir: &Path, file: &str, soname: &str, body: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("create dir");
    let source = dir.join(format!("{file}.c"));
    std::fs::write(&source, body).expect("write source");
    let out = dir.join(file);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1"])
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(&source)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(
        status.status.success(),
        "building {file} failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    std::fs::remove_file(&source).expect("remove source");
    out
}

const NO_CODE: &str = "int kplace_stand_in(void) { return 0; }\n";

fn env(
    lib_dirs: Option<Vec<PathBuf>>,
    loader_path: bool,
    system_dirs: Vec<PathBuf>,
) -> Environment {
    Environment {
        lib_dirs,
        loader_path,
        system_dirs,
    }
}

fn loaded(report: &LibraryReport) -> PathBuf {
    PathBuf::from(
        report
            .loaded
            .as_deref()
            .unwrap_or_else(|| panic!("not loaded: {report}")),
    )
}

fn results(report: &LibraryReport) -> Vec<(String, String)> {
    report
        .searched
        .iter()
        .map(|a| (a.place.clone(), a.result.clone()))
        .collect()
}

#[test]
fn kplace_cuda_lib_dir_wins_over_every_other_place() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let body = "int cufftGetVersion(int *v) { *v = 12000; return 0; }\n";
    let first = stand_in(
        &tmp.path().join("mine"),
        "libcufft.so.12",
        "libcufft.so.12",
        body,
    );
    stand_in(
        &tmp.path().join("system"),
        "libcufft.so.12",
        "libcufft.so.12",
        body,
    );
    let package = tmp.path().join("site/nvidia");
    stand_in(
        &package.join("cu13/lib"),
        "libcufft.so.12",
        "libcufft.so.12",
        body,
    );
    let mut asked = false;
    let report = find_in_environment(
        Library::Cufft,
        &env(
            Some(vec![tmp.path().join("empty"), tmp.path().join("mine")]),
            true,
            vec![tmp.path().join("system")],
        ),
        &mut || {
            asked = true;
            Ok(vec![package.clone()])
        },
    );
    assert_eq!(loaded(&report), first, "{report}");
    assert!(!asked, "Python is asked only when nothing was found before");
    assert_eq!(report.version.as_deref(), Some("12.0.0"), "{report}");
    assert!(
        report.warnings.is_empty(),
        "cudarc finds it by soname: {report}"
    );
    assert_eq!(
        results(&report),
        vec![
            (
                tmp.path().join("empty").display().to_string(),
                "no such directory".into()
            ),
            (first.display().to_string(), "loaded".into()),
        ]
    );
    let text = report.to_string();
    assert!(
        text.starts_with(&format!("libcufft: {} (version 12.0.0)", first.display())),
        "{text}"
    );
}

#[test]
fn a_stubs_directory_is_never_chosen() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let body = "int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n";
    let stubs = tmp.path().join("cuda/lib64/stubs");
    stand_in(&stubs, "libcuda.so.1", "libcuda.so.1", body);
    let nested = tmp.path().join("stubs/lib");
    stand_in(&nested, "libcuda.so.1", "libcuda.so.1", body);
    let package = tmp.path().join("site/nvidia");
    let real = stand_in(
        &package.join("cu13/lib"),
        "libcuda.so.1",
        "libcuda.so.1",
        body,
    );
    let report = find_in_environment(
        Library::Cuda,
        &env(Some(vec![stubs.clone()]), false, vec![nested.clone()]),
        &mut || Ok(vec![package.clone()]),
    );
    assert_eq!(loaded(&report), real, "{report}");
    assert_eq!(report.version.as_deref(), Some("13.0"));
    assert_eq!(
        results(&report),
        vec![
            (stubs.display().to_string(), "stub directory skipped".into()),
            (
                nested.display().to_string(),
                "stub directory skipped".into()
            ),
            (real.display().to_string(), "loaded".into()),
        ]
    );
}

#[test]
fn a_python_package_layout_is_found_per_component() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let package = tmp.path().join("site-packages/nvidia");
    // Searched in name order after cu13: cu12 (without cuBLAS), then cublas.
    stand_in(
        &package.join("cu12/lib"),
        "libcufft.so.12",
        "libcufft.so.12",
        NO_CODE,
    );
    let body = "int cublasGetProperty(int kind, int *v) { *v = kind == 0 ? 13 : kind == 1 ? 1 : 0; return 0; }\n";
    let cublas = stand_in(
        &package.join("cublas/lib"),
        "libcublas.so.13",
        "libcublas.so.13",
        body,
    );
    let report = find_in_environment(Library::Cublas, &env(None, false, vec![]), &mut || {
        Ok(vec![tmp.path().join("elsewhere/nvidia"), package.clone()])
    });
    assert_eq!(loaded(&report), cublas, "{report}");
    assert_eq!(report.version.as_deref(), Some("13.1.0"));
    let r = results(&report);
    assert_eq!(r[0], ("KPLACE_CUDA_LIB_DIR".into(), "not set".into()));
    let cu13 = package.join("cu13/lib").display().to_string();
    let cu12 = package.join("cu12/lib").display().to_string();
    assert_eq!(
        r[2..4],
        [
            (cu13, "no such directory".into()),
            (cu12, "missing (no libcublas.so*)".into())
        ],
        "{r:?}"
    );
}

#[test]
fn system_directories_come_in_order_before_python() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (first, second) = (
        tmp.path().join("nvidia/lib64"),
        tmp.path().join("cuda/lib64"),
    );
    std::fs::create_dir_all(&first).expect("dir");
    let nvml = stand_in(&second, "libnvidia-ml.so.1", "libnvidia-ml.so.1", NO_CODE);
    let report = find_in_environment(
        Library::Nvml,
        &env(None, false, vec![first.clone(), second]),
        &mut || panic!("Python is not asked once a system directory had it"),
    );
    assert_eq!(loaded(&report), nvml, "{report}");
    assert_eq!(
        report.version.as_deref(),
        Some("1"),
        "the file name's suffix"
    );
    assert_eq!(
        results(&report)[1],
        (
            first.display().to_string(),
            "missing (no libnvidia-ml.so.1*)".into()
        )
    );
}

#[test]
fn the_loader_path_comes_before_the_system_directories() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mine = stand_in(
        &tmp.path().join("a"),
        "libcublasLt.so.13",
        "libcublasLt.so.13",
        NO_CODE,
    );
    let system = tmp.path().join("system");
    stand_in(&system, "libcublasLt.so.13", "libcublasLt.so.13", NO_CODE);
    // Loaded once from a directory, it is what the loader's path gives by soname afterwards.
    let first = find_in_environment(
        Library::CublasLt,
        &env(Some(vec![tmp.path().join("a")]), false, vec![]),
        &mut || Ok(vec![]),
    );
    assert_eq!(loaded(&first), mine);
    let again = find_in_environment(
        Library::CublasLt,
        &env(None, true, vec![system]),
        &mut || panic!("not asked"),
    );
    assert_eq!(loaded(&again), mine, "{again}");
    assert_eq!(
        results(&again)[1],
        ("loader path".into(), format!("loaded {}", mine.display()))
    );
}

#[test]
fn nvrtc_is_taken_only_with_its_builtins_which_load_first() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let body = "int nvrtcVersion(int *a, int *b) { *a = 13; *b = 0; return 0; }\n";
    let lonely = tmp.path().join("lonely");
    let lonely_nvrtc = stand_in(&lonely, "libnvrtc.so.13", "libnvrtc.so.13", body);
    let full = tmp.path().join("full");
    let nvrtc = stand_in(&full, "libnvrtc.so.13", "libnvrtc.so.13", body);
    let builtins = stand_in(
        &full,
        "libnvrtc-builtins.so.13.0",
        "libnvrtc-builtins.so.13.0",
        NO_CODE,
    );
    stand_in(
        &full,
        "libnvrtc-builtins.so.12.9",
        "libnvrtc-builtins.so.12.9",
        NO_CODE,
    );
    stand_in(
        &full,
        "libnvrtc-builtins.alt.so.13.0",
        "libnvrtc-builtins.alt.so.13.0",
        NO_CODE,
    );
    let environment = env(Some(vec![lonely, full]), false, vec![]);
    let report = find_in_environment(Library::Nvrtc, &environment, &mut || Ok(vec![]));
    assert_eq!(loaded(&report), nvrtc, "{report}");
    assert_eq!(report.version.as_deref(), Some("13.0"));
    assert!(report.warnings.is_empty(), "{report}");
    let (place, result) = &results(&report)[0];
    assert_eq!(place, &lonely_nvrtc.display().to_string());
    assert!(
        result.starts_with("passed over: no libnvrtc-builtins"),
        "{result}"
    );
    let companion = find_in_environment(Library::NvrtcBuiltins, &environment, &mut || Ok(vec![]));
    assert_eq!(loaded(&companion), builtins, "{companion}");
    assert_eq!(companion.version.as_deref(), Some("13.0"));
}

#[test]
fn nothing_found_lists_every_place_and_why() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    let report = find_in_environment(
        Library::Cuda,
        &env(
            Some(vec![]),
            false,
            vec![empty.clone(), tmp.path().join("absent")],
        ),
        &mut || {
            Err(NoPythonAnswer {
                failures: vec![(
                    PathBuf::from("python3"),
                    PythonFailure::NoPackage {
                        why: "ModuleNotFoundError: No module named 'nvidia'".into(),
                    },
                )],
            })
        },
    );
    assert!(!report.is_loaded());
    assert_eq!(
        results(&report),
        vec![
            ("KPLACE_CUDA_LIB_DIR".into(), "set but empty".into()),
            (
                empty.display().to_string(),
                "missing (no libcuda.so*)".into()
            ),
            (
                tmp.path().join("absent").display().to_string(),
                "no such directory".into()
            ),
            (
                "python nvidia packages".into(),
                "python3: no nvidia package (ModuleNotFoundError: No module named 'nvidia')".into()
            ),
        ]
    );
    let text = report.to_string();
    assert!(
        text.starts_with("libcuda: not found, looked in:\n"),
        "{text}"
    );
    assert!(
        text.contains("    python nvidia packages: python3: no nvidia package"),
        "{text}"
    );
    let message = report.not_found_message();
    assert!(
        message.starts_with("libcuda not found (KPLACE_CUDA_LIB_DIR: set but empty; ")
            && message.ends_with("set KPLACE_CUDA_LIB_DIR to the directory that holds it"),
        "{message}"
    );
    let json = serde_json::to_value(&report).expect("serialises");
    assert_eq!(json["loaded"], serde_json::Value::Null);
    assert_eq!(json["searched"][0]["place"], "KPLACE_CUDA_LIB_DIR");
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[test]
fn python_answers_are_merged_and_failures_named() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let one = script(tmp.path(), "py-one", "echo /a/nvidia:/b/nvidia");
    let two = script(tmp.path(), "py-two", "echo /b/nvidia:/c/nvidia");
    let broken = script(
        tmp.path(),
        "py-broken",
        "echo 'Traceback' >&2; echo \"ModuleNotFoundError: No module named 'nvidia'\" >&2; exit 1",
    );
    let slow = script(tmp.path(), "py-slow", "exec sleep 30");
    let missing = tmp.path().join("no-such-python");
    let timeout = Duration::from_millis(300);

    let dirs = ask_pythons(&[one, broken.clone(), two], timeout).expect("two answered");
    let want: Vec<PathBuf> = ["/a/nvidia", "/b/nvidia", "/c/nvidia"]
        .iter()
        .map(PathBuf::from)
        .collect();
    assert_eq!(dirs, want);

    let began = Instant::now();
    let e = ask_pythons(&[broken.clone(), slow.clone(), missing.clone()], timeout)
        .expect_err("none answered");
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "the slow one was killed"
    );
    for want in [
        format!(
            "{}: no nvidia package (ModuleNotFoundError: No module named 'nvidia')",
            broken.display()
        ),
        format!("{}: no answer within 0.3 s", slow.display()),
        format!("{}: not runnable: ", missing.display()),
    ] {
        let e = e.to_string();
        assert!(e.contains(&want), "{want:?} missing from {e:?}");
    }
}

#[test]
fn builtins_are_chosen_by_nvrtc_major_then_newest() {
    let tmp = tempfile::tempdir().expect("temp dir");
    for name in [
        "libnvrtc-builtins.so.12.9",
        "libnvrtc-builtins.so.13.0",
        "libnvrtc-builtins.so.13.1",
        "libnvrtc-builtins.so.13.1.80",
        "libnvrtc-builtins.alt.so.13.2",
    ] {
        std::fs::write(tmp.path().join(name), b"").expect("write");
    }
    let pick = |major| {
        kplace_cuda_libs::builtins_in(tmp.path(), major).map(|p| {
            p.file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
    };
    assert_eq!(pick(Some(13)).as_deref(), Some("libnvrtc-builtins.so.13.1"));
    assert_eq!(pick(Some(12)).as_deref(), Some("libnvrtc-builtins.so.12.9"));
    assert_eq!(pick(None).as_deref(), Some("libnvrtc-builtins.so.13.1"));
    assert_eq!(pick(Some(14)), None);
}

#[test]
fn searched_names_are_cudarc_s_linux_names() {
    let names = Library::Cufft.file_names();
    assert_eq!(names.first().map(String::as_str), Some("libcufft.so"));
    assert!(names.iter().any(|n| n == "libcufft.so.12"), "{names:?}");
    assert!(
        Library::Nvrtc
            .file_names()
            .iter()
            .any(|n| n == "libnvrtc.so.13")
    );
    assert!(
        Library::Cublas
            .file_names()
            .iter()
            .any(|n| n == "libcublas.so.13")
    );
    assert!(
        Library::CublasLt
            .file_names()
            .iter()
            .any(|n| n == "libcublasLt.so.13")
    );
    assert!(
        Library::Cuda
            .file_names()
            .iter()
            .any(|n| n == "libcuda.so.1")
    );
    assert!(
        Library::ALL
            .iter()
            .flat_map(|l| l.file_names())
            .all(|n| n.starts_with("lib") && n.contains(".so")),
        "no Windows names"
    );
}
