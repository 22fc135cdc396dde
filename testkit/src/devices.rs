//! Device nodes for the tests of outputs that must never replace one: `/dev/full` as it is,
//! never created where it is missing, and character devices made in a temporary directory
//! where this process may make them (root, as CI runs). Each says why not otherwise, for the
//! test to skip with.

use std::path::{Path, PathBuf};

/// Why a device node is not there to test with: what a test says as it skips.
#[derive(Debug, thiserror::Error)]
pub enum NoDevice {
    /// `/dev/full` is something else here.
    #[error("/dev/full is not a character device here ({0:?})")]
    NotCharDevice(std::fs::FileType),
    /// `/dev/full` is not here.
    #[error("/dev/full is not here: {0}")]
    Missing(std::io::Error),
    /// `mknod` cannot be run.
    #[error("mknod cannot run: {0}")]
    NoMknod(std::io::Error),
    /// `mknod` refused (not root?): its stderr.
    #[error("mknod cannot make a device here (not root?): {stderr}")]
    Refused {
        /// What mknod said.
        stderr: String,
    },
}

/// `/dev/full`, where it is the character device that fails every write; otherwise why not.
pub fn dev_full() -> Result<&'static Path, NoDevice> {
    use std::os::unix::fs::FileTypeExt;
    let path = Path::new("/dev/full");
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_char_device() => Ok(path),
        Ok(m) => Err(NoDevice::NotCharDevice(m.file_type())),
        Err(e) => Err(NoDevice::Missing(e)),
    }
}

/// A character device named `name` made in `dir`, the same device as `/dev/null` (1, 3): writes
/// vanish, nothing is harmed; otherwise why it cannot be made.
pub fn null_device_in(dir: &Path, name: &str) -> Result<PathBuf, NoDevice> {
    let path = dir.join(name);
    let made = std::process::Command::new("mknod")
        .arg(&path)
        .args(["c", "1", "3"])
        .output()
        .map_err(NoDevice::NoMknod)?;
    if !made.status.success() {
        return Err(NoDevice::Refused {
            stderr: String::from_utf8_lossy(&made.stderr).trim().to_string(),
        });
    }
    Ok(path)
}

/// Whether `path` is a character device (not following a link).
pub fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}
