//! The runtime's C test kernels (`runtime/tests/c/`): building one into a shared library, and
//! the frames and expected results the tests feed and check them with. Every build is a fresh
//! compile of the source as it is now; a build that fails fails the test with the compiler's
//! output.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::workspace::{scratch_dir, workspace};

/// Builds `runtime/tests/c/<source>` (or `<source>` under the workspace, when it has a
/// directory) into a shared library named `lib<name>.so` with extra `defines`, once per test
/// binary run, and returns its path. Panics with the compiler's output
/// when the build fails: the C sources are part of the test suite.
pub fn build_c_library(source: &str, name: &str, defines: &[&str]) -> PathBuf {
    // Carried executables have no cargo scratch directory: `scratch_dir` is then the system's.
    let dir = scratch_dir().join(if crate::carried() {
        "kplace-test-c-libs"
    } else {
        "c-libs"
    });
    std::fs::create_dir_all(&dir).expect("create c-libs dir");
    let out = dir.join(format!("lib{name}.so"));
    // Each test binary builds to a private name, then renames: concurrent test binaries never
    // see a half-written library.
    static BUILDS: AtomicUsize = AtomicUsize::new(0);
    let build = BUILDS.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("lib{name}.{}.{build}.so.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Werror"])
        .arg("-I")
        .arg(workspace().join("runtime/include"))
        .arg(if source.contains('/') {
            workspace().join(source)
        } else {
            workspace().join("runtime/tests/c").join(source)
        })
        .arg("-lm")
        .arg("-o")
        .arg(&tmp);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(
        output.status.success(),
        "building {source} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&tmp, &out).expect("rename test library");
    out
}

/// Deterministic pseudo-random `ci16 [rows, cols]` frames for the C test kernels: `count`
/// frames of little-endian int16 I/Q pairs in [-1000, 1000].
pub fn test_frames(rows: usize, cols: usize, count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            (0..rows * cols * 2)
                .flat_map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ((x % 2001) as i16 - 1000).to_le_bytes()
                })
                .collect()
        })
        .collect()
}

/// What `test.magnitude2` (scale 0.25) then `test.column_sum` give for `frame`: per column,
/// the f64 sum over rows of the f32 `0.25 (I^2 + Q^2)`, rounded once to f32.
pub fn expected_column_sums(frame: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let iq: Vec<f32> = frame
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
        .collect();
    (0..cols)
        .map(|c| {
            let sum: f64 = (0..rows)
                .map(|r| {
                    let k = r * cols + c;
                    f64::from(0.25f32 * (iq[2 * k] * iq[2 * k] + iq[2 * k + 1] * iq[2 * k + 1]))
                })
                .sum();
            sum as f32
        })
        .collect()
}

/// A sink that keeps each completed frame's first sink as f32 values (the C test graphs'
/// column sums), with its frame id, and the ids of frames that ended partial.
#[derive(Debug, Default)]
pub struct SumsSink {
    /// `(frame id, sums)` of every completed frame, in delivery order.
    pub frames: Vec<(u64, Vec<f32>)>,
    /// The ids of the frames that ended partial.
    pub partial: Vec<u64>,
}

impl kplace::executor::FrameSink for SumsSink {
    fn frame(
        &mut self,
        frame: &kplace::executor::CompletedFrame<'_>,
    ) -> Result<(), kplace::executor::SinkError> {
        let sums = frame
            .sink(0)
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        self.frames.push((frame.frame_id, sums));
        Ok(())
    }

    fn partial(
        &mut self,
        frame: &kplace::executor::PartialFrame,
    ) -> Result<(), kplace::executor::SinkError> {
        self.partial.push(frame.frame_id);
        Ok(())
    }
}
