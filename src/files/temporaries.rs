//! The files beside an output: its temporaries and backups, named so that a later set can
//! recognize what a killed process left, locked to show that their process lives, and the
//! folder locks that serialize commits.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError};

use std::fs::Metadata;

/// `.NAME.PID.N.EXT`: the temporary (`tmp`) or backup (`old`) of `name`, unique to this
/// process and set.
pub(super) fn sibling(name: &OsStr, number: u64, ext: &str) -> OsString {
    let mut sibling = OsString::from(".");
    sibling.push(name);
    sibling.push(format!(".{}.{number}.{ext}", std::process::id()));
    sibling
}

/// Numbers temporaries: one process may reserve the same file twice over its life.
pub(super) static NEXT_NUMBER: AtomicU64 = AtomicU64::new(0);

/// Whether `entry` is a temporary (`tmp`) or backup (`old`) of `name`.
pub(super) fn sibling_kind(entry: &OsStr, name: &OsStr) -> Option<&'static str> {
    let rest = entry
        .as_encoded_bytes()
        .strip_prefix(b".")?
        .strip_prefix(name.as_encoded_bytes())?
        .strip_prefix(b".")?;
    let rest = std::str::from_utf8(rest).ok()?;
    let mut parts = rest.split('.');
    let numbers = [parts.next()?, parts.next()?];
    let ext = match parts.next()? {
        "tmp" => "tmp",
        "old" => "old",
        _ => return None,
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (parts.next().is_none() && numbers.iter().all(|n| digits(n))).then_some(ext)
}

/// Removes what killed processes left beside `name` in `folder`: temporaries whose lock
/// nobody holds, and backups (they only exist during a commit, which holds the folder lock
/// that the caller holds now).
pub(super) fn sweep(folder: &Path, name: &OsStr) {
    let Ok(entries) = fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let stale = match sibling_kind(&entry.file_name(), name) {
            Some("old") => true,
            Some(_) => File::open(&path).is_ok_and(|file| try_lock(&file)),
            None => false,
        };
        if stale {
            log::info!("removing {}, left by a killed process", path.display());
            let _ = fs::remove_file(&path);
        }
    }
}

/// The temporaries of this process's sets, for the signal watcher to remove. Held while a
/// set is reserved and committed, so that a signal never lands halfway through either.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

pub(super) fn registry() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Creates `path`, which must not exist, and locks it (where the folder could be locked,
/// locks work) to show a sweep that its process lives.
pub(super) fn create_locked(path: &Path, lock: bool) -> io::Result<File> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    if lock && !try_lock(&file) {
        let _ = fs::remove_file(path);
        return Err(io::Error::other("cannot lock the new temporary file"));
    }
    Ok(file)
}

/// Exclusive locks on the folders of a set, in one global order (device, inode) so that
/// two sets never wait on each other; released when dropped.
pub(super) struct FolderLocks {
    folders: Vec<File>,
    /// Every folder is locked. Where a file system has no locks, the set goes on unlocked.
    pub(super) held: bool,
}

impl FolderLocks {
    pub(super) fn take<'a>(folders: impl Iterator<Item = &'a Path>) -> Self {
        if !cfg!(unix) {
            return Self::none();
        }
        let mut opened: Vec<((u64, u64), File)> = Vec::new();
        for folder in folders {
            let handle = File::open(folder).and_then(|f| Ok((inode(&f.metadata()?), f)));
            match handle {
                Ok((Some(id), handle)) => opened.push((id, handle)),
                Ok((None, _)) => return Self::none(),
                Err(e) => {
                    log::warn!("cannot lock {}: {e}; concurrent writers of the same files are not kept apart", folder.display());
                    return Self::none();
                }
            }
        }
        opened.sort_by_key(|(id, _)| *id);
        opened.dedup_by_key(|(id, _)| *id);
        for (_, folder) in &opened {
            if let Err(e) = lock(folder) {
                log::warn!("cannot lock an output folder: {e}; concurrent writers of the same files are not kept apart");
                return Self::none();
            }
        }
        FolderLocks {
            folders: opened.into_iter().map(|(_, f)| f).collect(),
            held: true,
        }
    }

    fn none() -> Self {
        FolderLocks {
            folders: Vec::new(),
            held: false,
        }
    }

    /// Makes the renames durable (best effort: not every file system syncs folders).
    pub(super) fn sync(&self) {
        for folder in &self.folders {
            let _ = folder.sync_all();
        }
    }
}

/// Blocks until `file` is locked exclusively by this open file.
#[cfg(unix)]
fn lock(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on an open descriptor that `file` owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(not(unix))]
fn lock(_: &File) -> io::Result<()> {
    Err(io::Error::other("no folder locks on this system"))
}

/// Locks `file` exclusively if nobody holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on an open descriptor that `file` owns.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(not(unix))]
fn try_lock(_: &File) -> bool {
    false
}

/// Device and inode: what makes two open files one.
#[cfg(unix)]
pub(super) fn inode(meta: &Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
pub(super) fn inode(_: &Metadata) -> Option<(u64, u64)> {
    None
}
