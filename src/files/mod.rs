//! Files written whole or not at all. Every file the crate and its binaries write goes
//! through here: a command's outputs (a proof and its inputs, parameters and their key), and
//! the caches (recorded constraint systems, parameter check records, pipeline caches).
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
//! [`write_cache`] is that for one file only the crate reads back.
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
//! - A temporary holds a lock while its process lives. A process that handles signals calls
//!   [`remove_temporaries_before_exit`] before it dies of one; what a killed process left (an
//!   unlocked temporary, a backup outside a commit) is removed by the next set that writes
//!   the same file.
//!
//! Where the file system has no locks, sets are neither serialized nor swept (with a
//! warning in the log); everything else holds.
//!
//! `plan` checks the outputs and reserves their temporaries; `destination` says where
//! each goes; `set` writes and commits them; `temporaries` names, locks and sweeps the
//! files beside each output.

mod destination;
mod plan;
mod set;
mod temporaries;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use destination::file_kind;
pub use plan::OutputPlan;
pub use set::{OutputSet, OutputSlot};

use crate::error::Result;

/// Writes one file whole or not at all, replacing whatever is at `path` ([`OutputPlan::cache`]
/// alone in its set): a cache or a record; `what` names it in errors.
pub fn write_cache(
    what: &str,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut plan = OutputPlan::new();
    let slot = plan.cache(what, path);
    let mut set = plan.reserve()?;
    set.write(slot, write)?;
    set.commit()
}

/// The user's cache folder for this crate: `$WGPU_GROTH16_PARAMS_CACHE`,
/// `$XDG_CACHE_HOME/wgpu-groth16` or `~/.cache/wgpu-groth16`.
pub fn user_cache_dir() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v: &std::ffi::OsString| !v.is_empty());
    var("WGPU_GROTH16_PARAMS_CACHE")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("wgpu-groth16")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/wgpu-groth16")))
}

/// Removes every temporary of this process's sets, and keeps new ones from appearing: for a
/// process about to die of a signal. A reservation or commit in progress finishes first.
pub fn remove_temporaries_before_exit() {
    let temporaries = temporaries::registry();
    for path in temporaries.iter() {
        let _ = std::fs::remove_file(path);
    }
    // Held until the process is gone: no temporary appears meanwhile.
    std::mem::forget(temporaries);
}

#[cfg(test)]
mod tests {
    use super::temporaries::sibling_kind;
    use super::*;
    use std::ffi::OsStr;
    use std::fs;
    use std::path::PathBuf;

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

    /// A cache is replaced whatever is at its path: writing through a FIFO there would
    /// wait for a reader that never comes.
    #[cfg(unix)]
    #[test]
    fn a_fifo_at_a_cache_path_is_replaced_without_waiting() {
        let dir = folder("fifo", &[]);
        let cache = dir.join("cache");
        let made = std::process::Command::new("mkfifo").arg(&cache).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipping: mkfifo failed");
            return;
        }
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let written = write_cache("the cache", &cache, |w| w.write_all(b"cached"));
                let _ = done.send(written);
            });
            match finished.recv_timeout(std::time::Duration::from_secs(30)) {
                Ok(written) => written.unwrap(),
                Err(_) => {
                    // Lets the writer finish, so that the test ends, then fails.
                    let _ = fs::read(&cache);
                    panic!("the cache was written through the FIFO, waiting for a reader");
                }
            }
        });
        assert!(fs::metadata(&cache).unwrap().is_file());
        assert_eq!(fs::read_to_string(&cache).unwrap(), "cached");
        assert_eq!(entries(&dir), ["cache"]);
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
