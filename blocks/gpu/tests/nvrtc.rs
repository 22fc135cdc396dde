//! Every CUDA C source compiles with NVRTC for sm_90 with exactly the options the library uses
//! at load time, as native code and as PTX. NVRTC needs no GPU, so this runs in CI.
//!
//! When libnvrtc cannot be loaded the test prints `skipped: <reason>` and passes, unless
//! `KPLACE_REQUIRE_NVRTC=1` or `KPLACE_REQUIRE_GPU=1`, when it fails.

use kplace_blocks_gpu::source::Function;
use kplace_cudakit::nvrtc::{self, Arch, Target};

const SM_90: Arch = Arch { major: 9, minor: 0 };

#[test]
fn every_source_compiles_for_sm_90_without_fused_multiply_adds() {
    if let Err(e) = nvrtc::probe() {
        kplace_testkit::gpu::skip_or_fail_nvrtc(e.message);
        return;
    }
    nvrtc::check_program::<Function>(Target::Native(SM_90)).unwrap();
    nvrtc::check_program::<Function>(Target::Ptx(SM_90)).unwrap();
}
