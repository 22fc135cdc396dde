//! `KPLACE_REQUIRE_GPU=1` turns a GPU test's skip into a failure with the same reason, and
//! implies `KPLACE_REQUIRE_NVRTC=1`; unset, the test skips with its reason. Checked on this
//! test binary's own children, each running one stand-in test.

use kplace_testkit::gpu as testing;

const CHILD: &str = "KPLACE_CUDA_LIBS_TEST_CHILD";

/// A stand-in GPU test: runs only as a child of the tests below.
#[test]
fn child_gpu_test() {
    if std::env::var_os(CHILD).is_some() {
        testing::skip_or_fail("no GPU in this stand-in");
    }
}

/// A stand-in NVRTC test: runs only as a child of the tests below.
#[test]
fn child_nvrtc_test() {
    if std::env::var_os(CHILD).is_some() {
        testing::skip_or_fail_nvrtc("no NVRTC in this stand-in");
    }
}

/// Runs test `name` in a child with `envs` set (and both variables cleared otherwise);
/// returns whether it passed and its output.
fn child(name: &str, envs: &[(&str, &str)]) -> (bool, String) {
    testing::rerun_test_with(name, |command| {
        command
            .env(CHILD, "1")
            .env_remove(testing::REQUIRE_GPU_ENV)
            .env_remove(testing::REQUIRE_NVRTC_ENV);
        for (k, v) in envs {
            command.env(k, v);
        }
    })
}

#[test]
fn a_gpu_test_skips_with_its_reason_unless_a_gpu_is_required() {
    let (passed, text) = child("child_gpu_test", &[]);
    assert!(
        passed && text.contains("skipped: no GPU in this stand-in"),
        "{text}"
    );
    assert!(text.contains("1 passed"), "{text}");

    let (passed, text) = child("child_gpu_test", &[("KPLACE_REQUIRE_GPU", "1")]);
    assert!(!passed, "{text}");
    assert!(
        text.contains("KPLACE_REQUIRE_GPU=1 but no GPU in this stand-in"),
        "{text}"
    );

    let (passed, text) = child("child_gpu_test", &[("KPLACE_REQUIRE_GPU", "0")]);
    assert!(
        passed && text.contains("skipped: "),
        "only 1 requires: {text}"
    );
}

#[test]
fn requiring_a_gpu_requires_nvrtc_too() {
    let (passed, text) = child("child_nvrtc_test", &[]);
    assert!(
        passed && text.contains("skipped: no NVRTC in this stand-in"),
        "{text}"
    );

    let (passed, text) = child("child_nvrtc_test", &[("KPLACE_REQUIRE_NVRTC", "1")]);
    assert!(
        !passed && text.contains("KPLACE_REQUIRE_NVRTC=1 but no NVRTC in this stand-in"),
        "{text}"
    );

    let (passed, text) = child("child_nvrtc_test", &[("KPLACE_REQUIRE_GPU", "1")]);
    assert!(
        !passed && text.contains("KPLACE_REQUIRE_GPU=1 but no NVRTC in this stand-in"),
        "{text}"
    );
}
