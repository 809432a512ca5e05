//! Records of parameter contents whose points passed every check, so that a later read of
//! the same bytes need not check them again.

use std::path::PathBuf;

use crate::error::Error;
use crate::files::user_cache_dir;

/// How [`ProvingParameters::read_mmap_checked_once`](super::ProvingParameters::read_mmap_checked_once) knew the points were in their subgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// These exact points passed the checks in an earlier read (a record says so).
    Before,
    /// Checked in this read (and recorded, where the records folder is writable).
    Now,
}

/// Digests of parameter contents whose points passed every check: one empty file per
/// digest in a folder of the user's cache. Whoever can write there could vouch for a bad
/// file, as whoever can write the parameters could replace them; keep it the user's own.
#[derive(Clone, Debug)]
pub struct CheckRecords {
    dir: Option<PathBuf>,
}

impl CheckRecords {
    pub fn in_folder(dir: PathBuf) -> Self {
        CheckRecords { dir: Some(dir) }
    }

    /// `checked-params` in the user's cache ([`user_cache_dir`]); none (every read checks)
    /// when there is no cache folder.
    pub fn default_location() -> Self {
        CheckRecords {
            dir: user_cache_dir().map(|d| d.join("checked-params")),
        }
    }

    /// Remembers nothing: every read checks every point.
    pub fn none() -> Self {
        CheckRecords { dir: None }
    }

    fn path(&self, digest: &blake3::Hash) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("v1-{}", digest.to_hex())))
    }

    pub(super) fn holds(&self, digest: &blake3::Hash) -> bool {
        self.path(digest).is_some_and(|p| p.is_file())
    }

    /// Best effort: a folder that cannot be written costs the next read its checks, not
    /// this one its proof.
    pub(super) fn record(&self, digest: &blake3::Hash) {
        let (Some(dir), Some(path)) = (&self.dir, self.path(digest)) else {
            return;
        };
        let written = std::fs::create_dir_all(dir)
            .map_err(|e| Error::file("create", dir, e))
            .and_then(|()| crate::files::write_cache("a check record", &path, |_| Ok(())));
        if let Err(e) = written {
            log::warn!("cannot record checked parameters: {e}");
        }
    }
}
