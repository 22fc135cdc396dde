//! The GPU tests' rule for a missing GPU: skip, saying why, unless a GPU is required.
//!
//! A GPU test that finds no usable GPU (no driver, no device, a CUDA library missing) prints
//! `skipped: <reason>` and passes, so the suite passes on machines without one. On a GPU
//! machine that would let a broken setup pass for a GPU result; there `KPLACE_REQUIRE_GPU=1`
//! turns every such skip into a failure with the same reason. It implies
//! `KPLACE_REQUIRE_NVRTC=1`, which requires NVRTC alone (for machines with NVRTC and no GPU).
//!
//! Tests that skip *because* a GPU is present (they test the no-GPU path) are not GPU tests:
//! they print their skip themselves and keep skipping under `KPLACE_REQUIRE_GPU=1`.

use std::fmt::Display;

/// Set to `1` to make a GPU test's skip a failure.
pub const REQUIRE_GPU_ENV: &str = "KPLACE_REQUIRE_GPU";

/// Set to `1` to make an NVRTC test's skip a failure (implied by [`REQUIRE_GPU_ENV`]).
pub const REQUIRE_NVRTC_ENV: &str = "KPLACE_REQUIRE_NVRTC";

fn set_to_one(name: &str) -> bool {
    std::env::var(name).as_deref() == Ok("1")
}

/// Whether `KPLACE_REQUIRE_GPU=1`.
pub fn gpu_required() -> bool {
    set_to_one(REQUIRE_GPU_ENV)
}

/// Whether `KPLACE_REQUIRE_NVRTC=1` or `KPLACE_REQUIRE_GPU=1`.
pub fn nvrtc_required() -> bool {
    set_to_one(REQUIRE_NVRTC_ENV) || gpu_required()
}

/// A GPU test cannot run here because of `reason`: prints `skipped: <reason>`, or panics with
/// `KPLACE_REQUIRE_GPU=1 but <reason>` when a GPU is required.
#[track_caller]
pub fn skip_or_fail(reason: impl Display) {
    if gpu_required() {
        panic!("{REQUIRE_GPU_ENV}=1 but {reason}");
    }
    println!("skipped: {reason}");
}

/// An NVRTC test cannot run here because of `reason`: prints `skipped: <reason>`, or panics
/// naming the variable that requires NVRTC.
#[track_caller]
pub fn skip_or_fail_nvrtc(reason: impl Display) {
    if set_to_one(REQUIRE_NVRTC_ENV) {
        panic!("{REQUIRE_NVRTC_ENV}=1 but {reason}");
    }
    skip_or_fail(reason);
}
