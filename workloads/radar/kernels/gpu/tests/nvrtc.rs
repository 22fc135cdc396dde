//! Every CUDA C source compiles with NVRTC for sm_90 with exactly the options the library
//! uses at load time. NVRTC needs no GPU, so this runs in CI.
//!
//! When libnvrtc cannot be loaded the tests print `skipped: <reason>` and pass, unless
//! `KPLACE_REQUIRE_NVRTC=1` (CI sets it where the NVRTC wheel is installed) or
//! `KPLACE_REQUIRE_GPU=1`, when they fail.

use kplace_cudakit::nvrtc::{self, Arch, Target};
use kplace_gpu::source::Function;

const SM_90: Arch = Arch { major: 9, minor: 0 };

/// Whether NVRTC is usable; prints why not, or fails if it is required.
fn nvrtc_available() -> bool {
    match nvrtc::probe() {
        Ok(()) => true,
        Err(e) => {
            kplace_testkit::gpu::skip_or_fail_nvrtc(e.message);
            false
        }
    }
}

#[test]
fn every_source_compiles_for_sm_90_with_the_library_s_options() {
    if !nvrtc_available() {
        return;
    }
    let (major, minor) = nvrtc::version().expect("version");
    println!("NVRTC {major}.{minor}");
    nvrtc::check_program::<Function>(Target::Native(SM_90)).unwrap();
    // The PTX-only form the library uses for devices newer than this NVRTC.
    nvrtc::check_program::<Function>(Target::Ptx(SM_90)).unwrap();
}

#[test]
fn the_options_keep_ieee_arithmetic() {
    let options = nvrtc::options(Target::Native(SM_90));
    assert_eq!(options[0], "--gpu-architecture=sm_90");
    for option in [
        "--fmad=false",
        "--ftz=false",
        "--prec-div=true",
        "--prec-sqrt=true",
    ] {
        assert!(options.iter().any(|o| o == option), "{option}");
    }
    assert_eq!(
        nvrtc::options(Target::Ptx(SM_90))[0],
        "--gpu-architecture=compute_90"
    );
}

#[test]
fn the_target_is_native_when_nvrtc_knows_the_device() {
    if !nvrtc_available() {
        return;
    }
    let archs = nvrtc::supported_archs().expect("archs");
    assert!(archs.contains(&SM_90), "{archs:?}");
    assert_eq!(nvrtc::target_for(SM_90).unwrap(), Target::Native(SM_90));
    let newest = *archs.last().unwrap();
    let future = Arch {
        major: newest.major + 5,
        minor: 0,
    };
    assert_eq!(nvrtc::target_for(future).unwrap(), Target::Ptx(newest));
    let ancient = Arch { major: 1, minor: 0 };
    assert!(nvrtc::target_for(ancient).is_err());
}

#[test]
fn a_compile_error_carries_nvrtc_s_log() {
    if !nvrtc_available() {
        return;
    }
    // Not a library source, but the same path: the log names the problem.
    let bad = c"extern \"C\" __global__ void broken() { undeclared = 1; }";
    let program = cudarc::nvrtc::result::create_program(bad, Some(c"broken.cu")).unwrap();
    // SAFETY: a live program.
    let result = unsafe {
        cudarc::nvrtc::result::compile_program(program, &nvrtc::options(Target::Native(SM_90)))
    };
    assert!(result.is_err());
    // SAFETY: a live program.
    let log = unsafe { cudarc::nvrtc::result::get_program_log(program) }.unwrap();
    let log: String = log
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8 as char)
        .collect();
    assert!(log.contains("undeclared"), "{log}");
    // SAFETY: a live program, destroyed once.
    unsafe { cudarc::nvrtc::result::destroy_program(program) }.unwrap();
}
