//! Writing a reserved set and putting it in place: all files or none, the previous ones
//! kept aside until every rename succeeded.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::destination::{file_kind, open_through, Destination, Identity, Temporary};
use super::temporaries::{self, sibling, FolderLocks};
use crate::error::{Error, Result};

/// The reserved outputs of one command; dropped before [`commit`](Self::commit), they leave
/// nothing behind.
pub struct OutputSet {
    pub(super) files: Vec<PlannedFile>,
}

pub(super) struct PlannedFile {
    pub(super) flag: String,
    pub(super) path: PathBuf,
    pub(super) identity: Identity,
    pub(super) destination: Destination,
    pub(super) written: bool,
}

/// One output of a plan, to [`write`](OutputSet::write) once the set is reserved.
#[derive(Clone, Copy, Debug)]
pub struct OutputSlot(pub(super) usize);

impl OutputSet {
    /// Writes the output of `slot` whole: into its temporary, synced to disk, or through to
    /// its device.
    pub fn write(
        &mut self,
        slot: OutputSlot,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
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
        result.map_err(|e| Error::file("write", &file.path, e))?;
        file.written = true;
        Ok(())
    }

    /// Puts every written file in place, or none: a failure puts back the files that were
    /// there before. A signal meanwhile waits until the commit is done.
    pub fn commit(mut self) -> Result<()> {
        if let Some(file) = self.files.iter().find(|file| !file.written) {
            return Err(Error::Internal(format!(
                "{} was reserved but never written",
                file.flag
            )));
        }
        let mut temporaries = temporaries::registry();
        let locks = FolderLocks::take(self.folders());
        let replaced: Vec<Replacement> = self.files.iter().filter_map(Replacement::of).collect();
        let mut kept = Vec::with_capacity(replaced.len());
        for replacement in &replaced {
            match replacement.keep_previous() {
                Ok(previous) => kept.push(previous),
                Err(e) => {
                    kept.iter().rev().for_each(Previous::put_back);
                    return Err(Error::file("write", replacement.path, e));
                }
            }
        }
        for (i, replacement) in replaced.iter().enumerate() {
            if let Err(e) = fs::rename(&replacement.temporary.path, replacement.target) {
                // The renamed ones get their previous file back, the others keep theirs.
                kept.iter().rev().for_each(Previous::put_back);
                return Err(Error::file("write", replacement.path, e));
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
    pub(super) fn folders(&self) -> impl Iterator<Item = &Path> {
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
        let mut temporaries = temporaries::registry();
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
