//! What a set's outputs are: each named file checked (kind, folder, identity against the
//! other outputs and the inputs) and given a temporary beside it before the work.

use std::ffi::OsString;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::file_kind;
use super::set::{Destination, OutputSet, PlannedFile, Temporary};
use super::temporaries::{self, FolderLocks, NEXT_NUMBER};
use crate::{Error, Result};

/// One output of a plan, to [`write`](OutputSet::write) once the set is reserved.
#[derive(Clone, Copy, Debug)]
pub struct OutputSlot(pub(super) usize);

/// A file as the command line names it, with the flag (or role) that names it.
struct Named {
    flag: String,
    path: PathBuf,
}

/// The files a command will read and write, before they are checked.
#[derive(Default)]
pub struct OutputPlan {
    inputs: Vec<Named>,
    outputs: Vec<Named>,
}

impl OutputPlan {
    pub fn new() -> Self {
        Self::default()
    }

    /// A file the command reads: no output may be the same file.
    pub fn input(&mut self, flag: &str, path: &Path) {
        self.inputs.push(Named {
            flag: flag.into(),
            path: path.into(),
        });
    }

    /// A file the command writes; `flag` names it in errors.
    pub fn output(&mut self, flag: &str, path: &Path) -> OutputSlot {
        self.outputs.push(Named {
            flag: flag.into(),
            path: path.into(),
        });
        OutputSlot(self.outputs.len() - 1)
    }

    /// Checks every output (kind, folder, identity against the others and the inputs) and
    /// creates the temporaries: call it before the command's work.
    pub fn reserve(self) -> Result<OutputSet> {
        let inputs: Vec<(String, Identity)> = self
            .inputs
            .into_iter()
            .filter_map(|input| Some((input.flag, Identity::of_input(&input.path)?)))
            .collect();
        let mut set = OutputSet { files: Vec::new() };
        for output in self.outputs {
            let (destination, identity) = resolve(&output.flag, &output.path)?;
            let named_before = set
                .files
                .iter()
                .map(|file| (&file.flag, &file.identity))
                .chain(inputs.iter().map(|(flag, identity)| (flag, identity)))
                .find(|(_, other)| other.same(&identity));
            if let Some((other, _)) = named_before {
                return Err(Error::Output(format!(
                    "{other} and {} name the same file ({})",
                    output.flag,
                    output.path.display()
                )));
            }
            set.files.push(PlannedFile {
                flag: output.flag,
                path: output.path,
                identity,
                destination,
                written: false,
            });
        }
        // Dropped in reverse order: the locks, the registry, then `set` on an error.
        let mut temporaries = temporaries::registry();
        let locks = FolderLocks::take(set.folders());
        for file in &mut set.files {
            let Destination::Replace {
                folder,
                name,
                temporary,
                ..
            } = &mut file.destination
            else {
                continue;
            };
            if locks.held {
                temporaries::sweep(folder, name);
            }
            let number = NEXT_NUMBER.fetch_add(1, Ordering::Relaxed);
            let path = folder.join(temporaries::sibling(name, number, "tmp"));
            // Registered first: a signal between the two still removes it.
            temporaries.push(path.clone());
            let handle = temporaries::create_locked(&path, locks.held)
                .map_err(|e| Error::file("write", &file.path, e));
            let handle = handle.inspect_err(|_| temporaries.retain(|t| *t != path))?;
            *temporary = Some(Temporary {
                path,
                number,
                handle,
            });
        }
        Ok(set)
    }
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
    fn of_input(path: &Path) -> Option<Identity> {
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

#[cfg(unix)]
pub(super) fn inode(meta: &Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
pub(super) fn inode(_: &Metadata) -> Option<(u64, u64)> {
    None
}

/// Where the output `flag` names goes, or why it cannot be written there.
fn resolve(flag: &str, path: &Path) -> Result<(Destination, Identity)> {
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
        Ok(meta) if meta.is_file() => {
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
