//! Device nodes for the tests of outputs that must never replace one: `/dev/full` as it is,
//! never created where it is missing, and character devices made in a temporary directory
//! where this process may make them (root, as CI runs). Each says why not otherwise, for the
//! test to skip with.

use std::path::{Path, PathBuf};

/// `/dev/full`, where it is the character device that fails every write; otherwise why not.
pub fn dev_full() -> Result<&'static Path, String> {
    use std::os::unix::fs::FileTypeExt;
    let path = Path::new("/dev/full");
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_char_device() => Ok(path),
        Ok(m) => Err(format!(
            "/dev/full is not a character device here ({:?})",
            m.file_type()
        )),
        Err(e) => Err(format!("/dev/full is not here: {e}")),
    }
}

/// A character device named `name` made in `dir`, the same device as `/dev/null` (1, 3): writes
/// vanish, nothing is harmed; otherwise why it cannot be made.
pub fn null_device_in(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let path = dir.join(name);
    let made = std::process::Command::new("mknod")
        .arg(&path)
        .args(["c", "1", "3"])
        .output()
        .map_err(|e| format!("mknod cannot run: {e}"))?;
    if !made.status.success() {
        return Err(format!(
            "mknod cannot make a device here (not root?): {}",
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    Ok(path)
}

/// Whether `path` is a character device (not following a link).
pub fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}
