//! Where an output goes: the file a name stands for (its identity, so that two names of
//! one file are found), whether it is replaced through a temporary or written through (a
//! device, a FIFO), or why it cannot be written at all.

use std::ffi::OsString;
use std::fs::{self, File, FileType, Metadata, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::temporaries::inode;
use crate::error::{Error, Result};

/// What an output does with a character device or FIFO already at its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Special {
    /// Writes through it: a command's output may be a pipe or a terminal.
    WriteThrough,
    /// Replaces it like a regular file: a cache is nobody's pipe.
    Replace,
}

/// Where an output's bytes go.
pub(super) enum Destination {
    /// A regular file (or none yet) at `target`, replaced through a temporary beside it.
    Replace {
        target: PathBuf,
        folder: PathBuf,
        name: OsString,
        temporary: Option<Temporary>,
    },
    /// An existing character device or FIFO, written through.
    Through,
}

/// A temporary file, locked while this process lives.
pub(super) struct Temporary {
    pub(super) path: PathBuf,
    /// The temporary's number, which its backup shares.
    pub(super) number: u64,
    /// Open (and locked) until the set is done.
    pub(super) handle: File,
}

/// What makes two names one file.
#[derive(Debug)]
pub(super) struct Identity {
    /// The canonical folder joined with the file name.
    path: Option<PathBuf>,
    /// Device and inode, for a file that exists.
    inode: Option<(u64, u64)>,
}

impl Identity {
    pub(super) fn same(&self, other: &Identity) -> bool {
        (self.path.is_some() && self.path == other.path)
            || (self.inode.is_some() && self.inode == other.inode)
    }

    /// An input's identity, if its name can be resolved (one that cannot is reported by the
    /// read that follows).
    pub(super) fn of_input(path: &Path) -> Option<Identity> {
        match fs::metadata(path) {
            Ok(meta) => Some(Identity {
                path: fs::canonicalize(path).ok(),
                inode: inode(&meta),
            }),
            Err(_) => Some(Identity {
                path: Some(new_file(path).ok()?.0),
                inode: None,
            }),
        }
    }
}

/// Where the output `flag` names goes, or why it cannot be written there.
pub(super) fn resolve(
    flag: &str,
    path: &Path,
    special: Special,
) -> Result<(Destination, Identity)> {
    let refuse = |why: &str| Error::Output(format!("{flag} {}: {why}", path.display()));
    let ends_in_separator = path
        .as_os_str()
        .as_encoded_bytes()
        .last()
        .is_some_and(|&b| std::path::is_separator(b.into()));
    if ends_in_separator {
        return Err(refuse("ends in a separator: names a directory, not a file"));
    }
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() || (special == Special::Replace && streams(&meta)) => {
            let target = fs::canonicalize(path).map_err(|e| Error::file("write", path, e))?;
            let (folder, name) = match (target.parent(), target.file_name()) {
                (Some(folder), Some(name)) => (folder.to_path_buf(), name.to_os_string()),
                _ => return Err(refuse("names no file")),
            };
            let identity = Identity {
                path: Some(target.clone()),
                inode: inode(&meta),
            };
            Ok((
                Destination::Replace {
                    target,
                    folder,
                    name,
                    temporary: None,
                },
                identity,
            ))
        }
        Ok(meta) if streams(&meta) => Ok((
            Destination::Through,
            Identity {
                path: fs::canonicalize(path).ok(),
                inode: inode(&meta),
            },
        )),
        Ok(meta) => Err(refuse(&format!(
            "is {}; an output is a file, a character device or a FIFO",
            file_kind(&meta.file_type())
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                return Err(refuse(
                    "is a symbolic link to a file that does not exist; name the file itself",
                ));
            }
            let (target, folder, name) = new_file(path).map_err(|e| match e {
                NewFileError::NoName => refuse("names no file"),
                NewFileError::Folder(folder, e) => Error::File {
                    action: "write",
                    path: path.display().to_string(),
                    source: io::Error::new(
                        e.kind(),
                        format!("its directory {}: {e}", folder.display()),
                    ),
                },
            })?;
            Ok((
                Destination::Replace {
                    target: target.clone(),
                    folder,
                    name,
                    temporary: None,
                },
                Identity {
                    path: Some(target),
                    inode: None,
                },
            ))
        }
        Err(e) => Err(Error::file("write", path, e)),
    }
}

enum NewFileError {
    NoName,
    Folder(PathBuf, io::Error),
}

/// A file that does not exist yet: its canonical path, folder and name.
fn new_file(path: &Path) -> Result<(PathBuf, PathBuf, OsString), NewFileError> {
    let name = path.file_name().ok_or(NewFileError::NoName)?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let folder = fs::canonicalize(parent)
        .and_then(|folder| {
            if fs::metadata(&folder)?.is_dir() {
                Ok(folder)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "not a directory",
                ))
            }
        })
        .map_err(|e| NewFileError::Folder(parent.to_path_buf(), e))?;
    Ok((folder.join(name), folder, name.to_os_string()))
}

/// Whether `meta` is a file written through rather than replaced.
fn streams(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        kind.is_char_device() || kind.is_fifo()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Opens a device or FIFO for writing (a FIFO waits for its reader), checking that it is
/// still the file that was checked.
pub(super) fn open_through(path: &Path, identity: &Identity) -> io::Result<File> {
    let handle = OpenOptions::new().write(true).open(path)?;
    let meta = handle.metadata()?;
    if !streams(&meta) || inode(&meta) != identity.inode {
        return Err(io::Error::other(
            "it was replaced since the command started",
        ));
    }
    Ok(handle)
}

/// "a directory", "a FIFO", ...: what a file that is not a regular file is, for messages.
pub fn file_kind(kind: &FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}
