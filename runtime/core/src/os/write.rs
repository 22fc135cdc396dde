//! Writing a file a user names: whole or not at all, and never onto anything but a regular
//! file. Every file kplace writes goes through [`WholeFile`].
//!
//! Guarantees:
//! - **Only a regular file is ever replaced.** A regular file, or a name not there yet, is
//!   written under a temporary name beside it and renamed onto it once complete. What the
//!   name holds is looked at (without following it) when the file is opened and again just
//!   before the rename: a device, FIFO, socket or directory found at either moment is left as
//!   it is and the write fails, naming it. A symbolic link is followed: its target is replaced
//!   and the link kept.
//! - **Streams are written in place.** An output that is a stream of text someone may read as
//!   it comes ([`Kind::Stream`]: a report, detections, a progress log) is written directly into
//!   an existing FIFO or character device (`/dev/stdout`, a pipe to another program). An output
//!   that must be a file ([`Kind::File`]: a placement, a plot, a ready file, a recording) is
//!   refused there, when it is opened, before any work.
//! - **Missing directories are made.** The directories above a file that are not there yet are
//!   created first (as `mkdir -p` would, with the process's umask), for every output alike: a
//!   name on the way that holds something else (a file, a device) is an error naming it.
//! - **Nothing is left behind.** A temporary file is `.NAME.PID.XXXXXX.tmp`, removed when its
//!   write is dropped unfinished; [`remove_temporaries`] removes those of a process that was
//!   killed before it could.
//!
//! One race is left: a regular file replaced by a device between the last look and the rename
//! (a few system calls apart) is renamed over; no system call renames only onto a regular file.

use std::fs::{self, File, FileType};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What an output may be written onto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A file a user keeps or another program opens by name: a regular file or nothing.
    File,
    /// A stream of text: a regular file or nothing, or else a FIFO or a character device,
    /// written in place.
    Stream,
}

/// Why a file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The name holds something that is not a regular file, and the output cannot go there.
    #[error("{} is {found}, not a regular file{}", path.display(), advice(*kind))]
    NotAFile {
        /// The name.
        path: PathBuf,
        /// What it is: `a directory`, `a character device`, ...
        found: &'static str,
        /// What the output may be written onto.
        kind: Kind,
    },
    /// A symbolic link whose target does not exist.
    #[error("{} is a symbolic link to nothing ({})", path.display(), target.display())]
    DanglingLink {
        /// The link.
        path: PathBuf,
        /// What it points at.
        target: PathBuf,
    },
    /// The name held a regular file or nothing when the file was opened, and something else
    /// when it was to be renamed into place: left as it is.
    #[error(
        "{} became {found} while kplace wrote it: left as it is, the output not written",
        path.display()
    )]
    Changed {
        /// The name.
        path: PathBuf,
        /// What it is now.
        found: &'static str,
    },
    /// The directory the file was to be written in was made, and is gone again (removed while
    /// kplace wrote).
    #[error("the directory {} does not exist (removed while kplace wrote into it)", dir.display())]
    NoDirectory {
        /// The directory.
        dir: PathBuf,
    },
    /// A directory cannot be made: a name on its way holds something else.
    #[error("cannot make the directory {}: {} is {found}, not a directory", dir.display(), path.display())]
    NotADirectory {
        /// The directory asked for.
        dir: PathBuf,
        /// The name on its way that is not a directory (the directory itself, or one above).
        path: PathBuf,
        /// What it is: `a regular file`, `a character device`, ...
        found: &'static str,
    },
    /// The system refused a step.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        cause: io::Error,
    },
}

fn advice(kind: Kind) -> &'static str {
    match kind {
        Kind::File => ": name a file",
        Kind::Stream => ": name a file, a FIFO or a character device",
    }
}

impl WriteError {
    /// The system's error, where the system refused a step.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            WriteError::Io { cause, .. } => Some(cause.kind()),
            WriteError::NoDirectory { .. } => Some(io::ErrorKind::NotFound),
            _ => None,
        }
    }
}

/// What a file type is, in words.
fn describe(t: FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Where a write goes.
enum Destination {
    /// A temporary file beside this path, renamed onto it.
    Replace(PathBuf),
    /// The path itself, opened for writing.
    InPlace,
}

/// Looks at what `path` holds, without following a link, and says where `kind`'s output goes.
fn destination(path: &Path, kind: Kind) -> Result<Destination, WriteError> {
    let io = |cause| WriteError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        // Nothing there, or a directory above it that is not one yet: the directories are
        // made (or refused, naming what is in the way) when the file is created.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Destination::Replace(path.to_path_buf()));
        }
        Err(e) => return Err(io(e)),
    };
    let t = meta.file_type();
    if t.is_file() {
        return Ok(Destination::Replace(path.to_path_buf()));
    }
    if t.is_symlink() {
        return match fs::canonicalize(path) {
            // The target has no link left in it: looked at again, it is what it is.
            Ok(target) => match destination(&target, kind)? {
                Destination::Replace(onto) => Ok(Destination::Replace(onto)),
                Destination::InPlace => Ok(Destination::InPlace),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(WriteError::DanglingLink {
                path: path.to_path_buf(),
                target: fs::read_link(path).unwrap_or_default(),
            }),
            Err(e) => Err(io(e)),
        };
    }
    use std::os::unix::fs::FileTypeExt;
    if kind == Kind::Stream && (t.is_fifo() || t.is_char_device()) {
        return Ok(Destination::InPlace);
    }
    Err(WriteError::NotAFile {
        path: path.to_path_buf(),
        found: describe(t),
        kind,
    })
}

/// Checks, without writing anything, that a `kind` output could be written at `path`: what
/// the name holds (see the module docs), and that its directory is there or could be made
/// (the nearest name above it that exists is a directory). For an option whose file is
/// written only when the work is done, so that a wrong one fails before the work.
pub fn check(path: &Path, kind: Kind) -> Result<(), WriteError> {
    match destination(path, kind)? {
        Destination::InPlace => Ok(()),
        Destination::Replace(onto) => could_make(directory_of(&onto)),
    }
}

/// Whether `dir` is a directory or could be made: the nearest of it and its ancestors that
/// exists (through links) is a directory.
fn could_make(dir: &Path) -> Result<(), WriteError> {
    for above in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        match fs::metadata(above) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(m) => {
                return Err(WriteError::NotADirectory {
                    dir: dir.to_path_buf(),
                    path: above.to_path_buf(),
                    found: describe(m.file_type()),
                });
            }
            // Not there, or under a name that is not a directory: look further up.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                continue;
            }
            Err(cause) => {
                return Err(WriteError::Io {
                    path: above.to_path_buf(),
                    cause,
                });
            }
        }
    }
    // A relative path all of whose names are missing: under the current directory.
    Ok(())
}

/// Makes `dir` where it is missing (see [`create_dir_all`]).
fn ensure_directory(dir: &Path) -> Result<(), WriteError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        _ => create_dir_all(dir),
    }
}

/// The error for a directory that vanished, or could not be written in.
fn no_directory(dir: &Path, cause: io::Error) -> WriteError {
    if cause.kind() == io::ErrorKind::NotFound && !dir.exists() {
        WriteError::NoDirectory {
            dir: dir.to_path_buf(),
        }
    } else {
        WriteError::Io {
            path: dir.to_path_buf(),
            cause,
        }
    }
}

/// The directory a file at `path` lives in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The prefix of this process's temporary files beside `name`.
fn temporary_prefix(name: &str, pid: u32) -> String {
    format!(".{name}.{pid}.")
}

/// A temporary file in `path`'s directory (`.NAME.PID.XXXXXX.tmp`), to be renamed onto `path`
/// once complete. Its mode is what `File::create` would give (readable by others unless the
/// umask says not), not a temporary file's 0600.
fn create_beside(path: &Path) -> io::Result<tempfile::NamedTempFile> {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    tempfile::Builder::new()
        .prefix(&temporary_prefix(&name, std::process::id()))
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(directory_of(path))
}

/// Where a [`WholeFile`]'s bytes go.
enum Target {
    /// A temporary file, renamed onto `onto` when complete.
    Temporary {
        temp: tempfile::NamedTempFile,
        onto: PathBuf,
    },
    /// The path itself: a FIFO or a character device.
    InPlace(File),
}

/// A file being written whole (see the module docs): write to it, then [`WholeFile::commit`];
/// dropped uncommitted, it leaves nothing under its name.
pub struct WholeFile {
    path: PathBuf,
    target: Target,
}

impl WholeFile {
    /// Opens `path` for a `kind` output: a temporary file beside it (beside a link's target),
    /// or the FIFO or device itself for a stream. Fails, naming the path, where it holds
    /// something the output cannot go onto, or its directory cannot be made or take a file.
    pub fn create(path: &Path, kind: Kind) -> Result<WholeFile, WriteError> {
        let io = |cause| WriteError::Io {
            path: path.to_path_buf(),
            cause,
        };
        let target = match destination(path, kind)? {
            Destination::Replace(onto) => {
                let dir = directory_of(&onto);
                ensure_directory(dir)?;
                let temp = create_beside(&onto).map_err(|cause| match cause.kind() {
                    io::ErrorKind::NotFound => no_directory(dir, cause),
                    _ => io(cause),
                })?;
                Target::Temporary { temp, onto }
            }
            Destination::InPlace => {
                Target::InPlace(File::options().write(true).open(path).map_err(io)?)
            }
        };
        Ok(WholeFile {
            path: path.to_path_buf(),
            target,
        })
    }

    /// The path asked for.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the bytes go straight into a FIFO or a device (nothing to rename).
    pub fn in_place(&self) -> bool {
        matches!(self.target, Target::InPlace(_))
    }

    /// The file written to: the temporary file, or the FIFO or device.
    pub fn as_file_mut(&mut self) -> &mut File {
        match &mut self.target {
            Target::Temporary { temp, .. } => temp.as_file_mut(),
            Target::InPlace(file) => file,
        }
    }

    /// Completes the file: a temporary file is flushed to the disk and renamed into place,
    /// once the name is seen to hold a regular file or nothing still; a FIFO or device is
    /// flushed.
    pub fn commit(self) -> Result<(), WriteError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| WriteError::Io { path, cause }
        };
        match self.target {
            Target::InPlace(mut file) => file.flush().map_err(io(&self.path)),
            Target::Temporary { temp, onto } => {
                temp.as_file().sync_all().map_err(io(&self.path))?;
                match fs::symlink_metadata(&onto) {
                    Ok(m) if !m.is_file() => {
                        return Err(WriteError::Changed {
                            path: onto,
                            found: describe(m.file_type()),
                        });
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io(&onto)(e)),
                }
                temp.persist(&onto).map_err(|e| io(&onto)(e.error))?;
                Ok(())
            }
        }
    }
}

impl Write for WholeFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.as_file_mut().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.as_file_mut().flush()
    }
}

/// Opens `path`, a `kind` output, to be written in place as the work goes (a log to watch):
/// a regular file is created or truncated, a FIFO or device opened for writing; anything else
/// is refused, as [`WholeFile::create`] refuses it.
pub fn open_in_place(path: &Path, kind: Kind) -> Result<File, WriteError> {
    let io = |cause| WriteError::Io {
        path: path.to_path_buf(),
        cause,
    };
    match destination(path, kind)? {
        Destination::Replace(onto) => {
            ensure_directory(directory_of(&onto))?;
            File::create(onto).map_err(io)
        }
        Destination::InPlace => File::options().write(true).open(path).map_err(io),
    }
}

/// Writes `bytes` as the whole of `path`, a `kind` output (see [`WholeFile`]).
pub fn write_whole(path: &Path, kind: Kind, bytes: &[u8]) -> Result<(), WriteError> {
    let mut file = WholeFile::create(path, kind)?;
    file.write_all(bytes).map_err(|cause| WriteError::Io {
        path: path.to_path_buf(),
        cause,
    })?;
    file.commit()
}

/// Creates the directory `dir` and its parents for files kplace writes: a name on the way that
/// holds something else (a file, a device) is an error naming it.
pub fn create_dir_all(dir: &Path) -> Result<(), WriteError> {
    fs::create_dir_all(dir).map_err(|cause| match could_make(dir) {
        // Something in the way (`dir` itself or a name above it): named, rather than the
        // system's "Not a directory".
        Err(in_the_way @ WriteError::NotADirectory { .. }) => in_the_way,
        _ => WriteError::Io {
            path: dir.to_path_buf(),
            cause,
        },
    })
}

/// Removes the temporary files process `pid` left in `dir` (for a file of its there, or for
/// every file when `name` is `None`): a child that was killed before it could. Returns how
/// many it removed; what cannot be read or removed is left.
pub fn remove_temporaries(dir: &Path, name: Option<&str>, pid: u32) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mine = format!(".{pid}.");
    let prefix = name.map(|n| temporary_prefix(n, pid));
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let matches = match &prefix {
            Some(prefix) => n.starts_with(prefix.as_str()),
            None => n.starts_with('.') && n.contains(&mine),
        } && n.ends_with(".tmp");
        if matches
            && entry.file_type().is_ok_and(|t| t.is_file())
            && fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    use kplace_testkit::devices::{is_char_device, null_device_in};

    #[test]
    fn a_file_appears_whole_at_the_commit_and_replaces_a_regular_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        fs::write(&path, "old").unwrap();
        let mut f = WholeFile::create(&path, Kind::File).unwrap();
        f.write_all(b"new").unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "old",
            "before the commit"
        );
        f.commit().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn a_device_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let device = match null_device_in(dir.path(), "device") {
            Ok(d) => d,
            Err(why) => {
                eprintln!("skipped: no device node can be made here: {why}");
                return;
            }
        };
        // A file output refuses it when opened, naming it.
        let e = WholeFile::create(&device, Kind::File).err().unwrap();
        assert!(
            e.to_string()
                .ends_with("device is a character device, not a regular file: name a file"),
            "{e}"
        );
        let e = write_whole(&device, Kind::File, b"x").unwrap_err();
        assert!(matches!(e, WriteError::NotAFile { .. }), "{e}");
        assert!(check(&device, Kind::File).is_err());
        // A stream is written into it (this one discards), never renamed over it.
        write_whole(&device, Kind::Stream, b"{}\n").unwrap();
        assert!(is_char_device(&device), "the device is still a device");
        // A link to it is followed, and the link kept.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&device, &link).unwrap();
        write_whole(&link, Kind::Stream, b"{}\n").unwrap();
        assert!(WholeFile::create(&link, Kind::File).is_err());
        assert!(is_char_device(&device));
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // A device that appears under the name while the file is written is left alone.
        let path = dir.path().join("out.json");
        let mut f = WholeFile::create(&path, Kind::File).unwrap();
        f.write_all(b"{}").unwrap();
        fs::rename(&device, &path).unwrap();
        let e = f.commit().unwrap_err();
        assert!(
            matches!(
                e,
                WriteError::Changed {
                    found: "a character device",
                    ..
                }
            ),
            "{e}"
        );
        assert!(is_char_device(&path));
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(
            left.len(),
            2,
            "the link and the device, no temporary: {left:?}"
        );
    }

    #[test]
    fn a_directory_a_fifo_and_a_dangling_link_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = WholeFile::create(dir.path(), Kind::Stream).err().unwrap();
        assert!(
            e.to_string().contains("is a directory, not a regular file"),
            "{e}"
        );
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let e = check(&fifo, Kind::File).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        assert!(check(&fifo, Kind::Stream).is_ok());
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        let e = WholeFile::create(&link, Kind::File).err().unwrap();
        assert!(
            e.to_string().contains("is a symbolic link to nothing"),
            "{e}"
        );
    }

    #[test]
    fn missing_directories_are_made_for_a_file_and_a_log_alike() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("missing/deeper/out.json");
        check(&nested, Kind::File).unwrap();
        assert!(!dir.path().join("missing").exists(), "check writes nothing");
        write_whole(&nested, Kind::File, b"{}").unwrap();
        assert_eq!(fs::read_to_string(&nested).unwrap(), "{}");
        let log = dir.path().join("logs/progress.jsonl");
        open_in_place(&log, Kind::Stream).unwrap();
        assert!(log.is_file());
    }

    #[test]
    fn a_directory_in_the_way_of_another_thing_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "x").unwrap();
        let under = file.join("sub/out.json");
        let want = format!(
            "cannot make the directory {}: {} is a regular file, not a directory",
            file.join("sub").display(),
            file.display()
        );
        let e = check(&under, Kind::File).unwrap_err();
        assert_eq!(e.to_string(), want);
        let e = WholeFile::create(&under, Kind::File).err().unwrap();
        assert_eq!(e.to_string(), want);
        let e = open_in_place(&under, Kind::Stream).unwrap_err();
        assert_eq!(e.to_string(), want);
        let e = create_dir_all(&file).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot make the directory {0}: {0} is a regular file, not a directory",
                file.display()
            )
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "x", "left as it was");
    }

    #[test]
    fn a_link_to_a_file_keeps_the_link_and_replaces_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        fs::write(&target, "old").unwrap();
        let link = dir.path().join("latest.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_whole(&link, Kind::File, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing_and_a_dead_writers_temporaries_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut f = WholeFile::create(&path, Kind::File).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        // What a killed process leaves: its own temporaries go, another's stay.
        let theirs = dir.path().join(".out.txt.4242.abcdef.tmp");
        let others = dir.path().join(".out.txt.4343.abcdef.tmp");
        let sink = dir.path().join(".beams.npy.4242.qwerty.tmp");
        for p in [&theirs, &others, &sink] {
            fs::write(p, "x").unwrap();
        }
        assert_eq!(remove_temporaries(dir.path(), Some("out.txt"), 4242), 1);
        assert_eq!(remove_temporaries(dir.path(), None, 4242), 1);
        assert!(!theirs.exists() && !sink.exists() && others.exists());
    }
}
