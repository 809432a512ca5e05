//! The files a command writes, handled as one set: checked before the work, written to
//! temporaries, and put in place all or nothing. Every command that writes files goes
//! through here (setup, prove, bench prove, the parameter cache), and so must any new one:
//!
//! ```text
//! let mut plan = OutputPlan::new();
//! plan.input("--params", params);             // read by the command: no output may be it
//! let proof = plan.output("--proof", path);   // written by the command
//! let mut files = plan.reserve()?;            // before the work
//! ... the work ...
//! files.write(proof, |w| w.write_all(&bytes))?;
//! files.commit()?;                            // all files of the set, or none
//! ```
//!
//! The rules:
//! - Files are compared by identity, not spelling: the canonical folder and file name, and
//!   the device and inode of a file that exists (so `./P` and `P`, symbolic and hard links
//!   are one file). An output named twice, or naming one of the command's inputs, is refused
//!   before any work.
//! - Before the work, each output's folder is checked and an empty temporary
//!   (`.NAME.PID.N.tmp`) is created beside it: a missing folder or a read-only disk is found
//!   at once, not after minutes of proving.
//! - A regular file, or a new one, is replaced by renaming its temporary over it; a symbolic
//!   link to a regular file is kept and its target replaced. The renames of one set run
//!   under an exclusive lock (`flock`) on each folder, after each previous file was kept under
//!   a backup name (`.NAME.PID.N.old`); a failed rename puts the previous files back. So the
//!   files of a set are all new or all as before, and two processes writing the same files
//!   cannot interleave their sets: the last to commit wins whole.
//! - An existing character device or FIFO (`/dev/null`, a pipe) is written through, never
//!   replaced; it has no previous content to keep. Other special files (folders, block
//!   devices, sockets) are refused.
//! - A temporary holds a lock while its process lives. SIGINT, SIGTERM and SIGHUP remove
//!   temporaries before the process dies ([`remove_temporaries_on_signals`]); what a killed
//!   process left (an unlocked temporary, a backup outside a commit) is removed by the next
//!   set that writes the same file.
//!
//! Where the file system has no locks, sets are neither serialized nor swept (with a
//! warning in the log); everything else holds.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::groth16::params::file_kind;

use crate::cli::{CliError, CliResult};

/// One output of a plan, to [`write`](OutputSet::write) once the set is reserved.
#[derive(Clone, Copy, Debug)]
pub struct OutputSlot(usize);

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
    pub fn reserve(self) -> CliResult<OutputSet> {
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
                return Err(CliError::Invalid(format!(
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
        let mut temporaries = registry();
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
                sweep(folder, name);
            }
            let number = NEXT_NUMBER.fetch_add(1, Ordering::Relaxed);
            let path = folder.join(sibling(name, number, "tmp"));
            // Registered first: a signal between the two still removes it.
            temporaries.push(path.clone());
            let handle =
                create_locked(&path, locks.held).map_err(|e| CliError::io("write", &file.path, e));
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

/// The reserved outputs of one command; dropped before [`commit`](Self::commit), they leave
/// nothing behind.
pub struct OutputSet {
    files: Vec<PlannedFile>,
}

struct PlannedFile {
    flag: String,
    path: PathBuf,
    identity: Identity,
    destination: Destination,
    written: bool,
}

/// Where an output's bytes go.
enum Destination {
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
struct Temporary {
    path: PathBuf,
    /// The temporary's number, which its backup shares.
    number: u64,
    /// Open (and locked) until the set is done.
    handle: File,
}

impl OutputSet {
    /// Writes the output of `slot` whole: into its temporary, synced to disk, or through to
    /// its device.
    pub fn write(
        &mut self,
        slot: OutputSlot,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> CliResult<()> {
        let file = &mut self.files[slot.0];
        let result = match &file.destination {
            Destination::Replace {
                temporary: Some(temporary),
                ..
            } => {
                let mut w = BufWriter::new(&temporary.handle);
                write(&mut w).and_then(|()| w.into_inner().map_err(|e| e.into_error())?.sync_all())
            }
            Destination::Replace {
                temporary: None, ..
            } => Err(io::Error::other("written after its set was committed")),
            Destination::Through => open_through(&file.path, &file.identity).and_then(|handle| {
                let mut w = BufWriter::new(handle);
                write(&mut w)?;
                w.flush()
            }),
        };
        result.map_err(|e| CliError::io("write", &file.path, e))?;
        file.written = true;
        Ok(())
    }

    /// Puts every written file in place, or none: a failure puts back the files that were
    /// there before. A signal meanwhile waits until the commit is done.
    pub fn commit(mut self) -> CliResult<()> {
        if let Some(file) = self.files.iter().find(|file| !file.written) {
            return Err(CliError::Invalid(format!(
                "internal error: {} was reserved but never written",
                file.flag
            )));
        }
        let mut temporaries = registry();
        let locks = FolderLocks::take(self.folders());
        let replaced: Vec<Replacement> = self.files.iter().filter_map(Replacement::of).collect();
        let mut kept = Vec::with_capacity(replaced.len());
        for replacement in &replaced {
            match replacement.keep_previous() {
                Ok(previous) => kept.push(previous),
                Err(e) => {
                    kept.iter().rev().for_each(Previous::put_back);
                    return Err(CliError::io("write", replacement.path, e));
                }
            }
        }
        for (i, replacement) in replaced.iter().enumerate() {
            if let Err(e) = fs::rename(&replacement.temporary.path, replacement.target) {
                // The renamed ones get their previous file back, the others keep theirs.
                kept.iter().rev().for_each(Previous::put_back);
                return Err(CliError::io("write", replacement.path, e));
            }
            kept[i].renamed = true;
        }
        locks.sync();
        kept.iter().for_each(Previous::discard);
        drop(replaced);
        for file in &mut self.files {
            if let Destination::Replace { temporary, .. } = &mut file.destination {
                // Renamed: there is nothing left to remove under the temporary's name.
                if let Some(temporary) = temporary.take() {
                    temporaries.retain(|t| *t != temporary.path);
                }
            }
        }
        Ok(())
    }

    /// The folders of the files to replace.
    fn folders(&self) -> impl Iterator<Item = &Path> {
        self.files
            .iter()
            .filter_map(|file| match &file.destination {
                Destination::Replace { folder, .. } => Some(folder.as_path()),
                Destination::Through => None,
            })
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        let mut temporaries = registry();
        for file in &mut self.files {
            if let Destination::Replace { temporary, .. } = &mut file.destination {
                if let Some(temporary) = temporary.take() {
                    // Best effort: a failed commit may have renamed it already.
                    let _ = fs::remove_file(&temporary.path);
                    temporaries.retain(|t| *t != temporary.path);
                }
            }
        }
    }
}

/// The file a target held before a commit, kept under a backup name until the commit is
/// done.
struct Previous {
    target: PathBuf,
    backup: Option<PathBuf>,
    /// The target was moved to the backup name (no hard links here), not linked.
    moved: bool,
    /// The new file was renamed over the target.
    renamed: bool,
}

impl Previous {
    /// Undoes the commit for this target.
    fn put_back(&self) {
        match &self.backup {
            Some(backup) if self.renamed || self.moved => {
                if let Err(e) = fs::rename(backup, &self.target) {
                    log::error!("could not put back {}: {e}", self.target.display());
                }
            }
            Some(backup) => {
                let _ = fs::remove_file(backup);
            }
            None if self.renamed => {
                let _ = fs::remove_file(&self.target);
            }
            None => {}
        }
    }

    fn discard(&self) {
        if let Some(backup) = &self.backup {
            let _ = fs::remove_file(backup);
        }
    }
}

/// A file of the set that replaces its target, and the names involved.
struct Replacement<'a> {
    /// As the command line named it.
    path: &'a Path,
    target: &'a Path,
    folder: &'a Path,
    name: &'a OsStr,
    temporary: &'a Temporary,
}

impl<'a> Replacement<'a> {
    fn of(file: &'a PlannedFile) -> Option<Self> {
        match &file.destination {
            Destination::Replace {
                target,
                folder,
                name,
                temporary: Some(temporary),
            } => Some(Replacement {
                path: &file.path,
                target,
                folder,
                name,
                temporary,
            }),
            _ => None,
        }
    }

    /// Keeps the file at the target under a backup name: a hard link (the target stays in
    /// place for readers), or where the file system has none, the file moved aside.
    fn keep_previous(&self) -> io::Result<Previous> {
        let backup = self
            .folder
            .join(sibling(self.name, self.temporary.number, "old"));
        let mut previous = Previous {
            target: self.target.to_path_buf(),
            backup: Some(backup.clone()),
            moved: false,
            renamed: false,
        };
        match fs::hard_link(self.target, &backup) {
            Ok(()) => return Ok(previous),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                previous.backup = None;
                return Ok(previous);
            }
            Err(_) => {}
        }
        // What appeared there since the set was reserved is not ours to move or replace.
        let kind = fs::symlink_metadata(self.target)?.file_type();
        if !kind.is_file() {
            return Err(io::Error::other(format!("it is {} now", file_kind(&kind))));
        }
        // An immutable file can be neither linked nor moved (nor replaced): this fails too.
        fs::rename(self.target, &backup)?;
        previous.moved = true;
        Ok(previous)
    }
}

/// What makes two names one file.
#[derive(Debug)]
struct Identity {
    /// The canonical folder joined with the file name.
    path: Option<PathBuf>,
    /// Device and inode, for a file that exists.
    inode: Option<(u64, u64)>,
}

impl Identity {
    fn same(&self, other: &Identity) -> bool {
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
fn inode(meta: &Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn inode(_: &Metadata) -> Option<(u64, u64)> {
    None
}

/// Where the output `flag` names goes, or why it cannot be written there.
fn resolve(flag: &str, path: &Path) -> CliResult<(Destination, Identity)> {
    let refuse = |why: &str| CliError::Invalid(format!("{flag} {}: {why}", path.display()));
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
            let target = fs::canonicalize(path).map_err(|e| CliError::io("write", path, e))?;
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
                NewFileError::Folder(folder, e) => CliError::Io {
                    action: "write".into(),
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
        Err(e) => Err(CliError::io("write", path, e)),
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
fn open_through(path: &Path, identity: &Identity) -> io::Result<File> {
    let handle = OpenOptions::new().write(true).open(path)?;
    let meta = handle.metadata()?;
    if !streams(&meta) || inode(&meta) != identity.inode {
        return Err(io::Error::other(
            "it was replaced since the command started",
        ));
    }
    Ok(handle)
}

/// `.NAME.PID.N.EXT`: the temporary (`tmp`) or backup (`old`) of `name`, unique to this
/// process and set.
fn sibling(name: &OsStr, number: u64, ext: &str) -> OsString {
    let mut sibling = OsString::from(".");
    sibling.push(name);
    sibling.push(format!(".{}.{number}.{ext}", std::process::id()));
    sibling
}

/// Numbers temporaries: one process may reserve the same file twice over its life.
static NEXT_NUMBER: AtomicU64 = AtomicU64::new(0);

/// Whether `entry` is a temporary (`tmp`) or backup (`old`) of `name`.
fn sibling_kind(entry: &OsStr, name: &OsStr) -> Option<&'static str> {
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
fn sweep(folder: &Path, name: &OsStr) {
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

fn registry() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Creates `path`, which must not exist, and locks it (where the folder could be locked,
/// locks work) to show a sweep that its process lives.
fn create_locked(path: &Path, lock: bool) -> io::Result<File> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    if lock && !try_lock(&file) {
        let _ = fs::remove_file(path);
        return Err(io::Error::other("cannot lock the new temporary file"));
    }
    Ok(file)
}

/// Exclusive locks on the folders of a set, in one global order (device, inode) so that
/// two sets never wait on each other; released when dropped.
struct FolderLocks {
    folders: Vec<File>,
    /// Every folder is locked. Where a file system has no locks, the set goes on unlocked.
    held: bool,
}

impl FolderLocks {
    fn take<'a>(folders: impl Iterator<Item = &'a Path>) -> Self {
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
    fn sync(&self) {
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

/// Makes SIGINT, SIGTERM and SIGHUP remove this process's temporaries before it dies of
/// them. Call it before any thread starts: the signals are blocked in every thread and
/// waited for by one of their own, which runs ordinary code (no async-signal-safety limits)
/// and waits for a reservation or commit in progress to finish.
#[cfg(unix)]
pub fn remove_temporaries_on_signals() -> io::Result<()> {
    use std::mem::MaybeUninit;
    // SAFETY: sigemptyset initializes the set; sigaddset and pthread_sigmask read it.
    let signals = unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        let mut set = set.assume_init();
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        set
    };
    // SAFETY: as above; the old mask is not wanted.
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };
    if blocked != 0 {
        return Err(io::Error::from_raw_os_error(blocked));
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: sigwait on an initialized set; it fails only for an invalid set.
            while unsafe { libc::sigwait(&signals, &mut signal) } != 0 {}
            // Held until the process is gone: no temporary appears meanwhile.
            let temporaries = registry();
            for path in temporaries.iter() {
                let _ = fs::remove_file(path);
            }
            // Die of the signal as if it had not been caught, so the parent sees it.
            // SAFETY: resets the disposition and unblocks the one signal in this thread.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                let mut one = MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(one.as_mut_ptr());
                let mut one = one.assume_init();
                libc::sigaddset(&mut one, signal);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(signal);
            }
            std::process::exit(128 + signal);
        })?;
    Ok(())
}

#[cfg(not(unix))]
pub fn remove_temporaries_on_signals() -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder holding `files` (name, content).
    fn folder(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("wgpu-groth16-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (file, content) in files {
            fs::write(dir.join(file), content).unwrap();
        }
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A set writing "new a" and "new b" into `dir`'s a and b, written but not committed.
    fn written_pair(dir: &Path) -> OutputSet {
        let mut plan = OutputPlan::new();
        let a = plan.output("a", &dir.join("a"));
        let b = plan.output("b", &dir.join("b"));
        let mut set = plan.reserve().unwrap();
        set.write(a, |w| w.write_all(b"new a")).unwrap();
        set.write(b, |w| w.write_all(b"new b")).unwrap();
        set
    }

    #[test]
    fn a_set_dropped_before_commit_leaves_nothing_and_a_commit_replaces_all() {
        let dir = folder("drop", &[("a", "old a")]);
        drop(written_pair(&dir));
        assert_eq!(entries(&dir), ["a"]);
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "old a");
        written_pair(&dir).commit().unwrap();
        assert_eq!(entries(&dir), ["a", "b"]);
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "new a");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rename_that_fails_puts_back_the_files_already_replaced() {
        let dir = folder("rename", &[("a", "old a"), ("b", "old b")]);
        let set = written_pair(&dir);
        // b's temporary vanishes: its rename fails after a's succeeded.
        let temporary = entries(&dir)
            .into_iter()
            .find(|n| n.starts_with(".b."))
            .unwrap();
        fs::remove_file(dir.join(temporary)).unwrap();
        assert!(set.commit().is_err());
        assert_eq!(entries(&dir), ["a", "b"], "no temporary, no backup");
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "old a");
        assert_eq!(fs::read_to_string(dir.join("b")).unwrap(), "old b");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_that_appears_at_a_target_is_neither_moved_nor_replaced() {
        let dir = folder("appears", &[("a", "old a")]);
        let set = written_pair(&dir);
        fs::create_dir(dir.join("b")).unwrap();
        let err = set.commit().unwrap_err().to_string();
        assert!(err.contains("it is a directory now"), "{err}");
        assert!(dir.join("b").is_dir());
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "old a");
        assert_eq!(entries(&dir), ["a", "b"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_temporaries_and_backups_of_the_named_file_are_recognized() {
        let name = OsStr::new("f6.proof");
        let kind = |entry: &str| sibling_kind(OsStr::new(entry), name);
        assert_eq!(kind(".f6.proof.123.0.tmp"), Some("tmp"));
        assert_eq!(kind(".f6.proof.123.45.old"), Some("old"));
        for other in [
            "f6.proof",
            ".f6.proof.123.tmp",
            ".f6.proof.x.0.tmp",
            ".f6.proof.1.2.3.tmp",
            ".f6.proof.1.2.bak",
            ".f6.proofs.1.2.tmp",
            ".g6.proof.1.2.tmp",
        ] {
            assert_eq!(kind(other), None, "{other}");
        }
    }
}
