//! Records of parameter contents whose points passed every check, so that a later read of
//! the same bytes need not check them again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::files::user_cache_dir;

/// How [`ProvingParameters::read_checked_once`](super::ProvingParameters::read_checked_once) knew the points were in their subgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// These exact points passed the checks in an earlier read (a record says so).
    Before,
    /// Checked in this read (and recorded, where the records folder is writable).
    Now,
    /// Not checked: the file's digest is the one its publisher gives for its name (the
    /// trusted setup's own files), and the points decoded are the bytes that digest covers.
    /// Recorded as checked.
    Published,
}

/// Bytes of a published digest: the first 16 bytes of the file's BLAKE2b-512, as
/// filecoin-proofs' `parameters.json` gives them (32 hexadecimal digits).
pub const PUBLISHED_DIGEST_BYTES: usize = 16;

/// Digests a publisher gives for its parameter files, by file name.
#[derive(Clone, Debug, Default)]
pub struct PublishedDigests {
    by_name: HashMap<String, [u8; PUBLISHED_DIGEST_BYTES]>,
}

impl PublishedDigests {
    /// From lines of a file name and its digest in hexadecimal, separated by blanks; blank
    /// lines and lines starting with `#` are skipped.
    pub fn parse(table: &str) -> Result<Self> {
        let mut published = PublishedDigests::default();
        for (number, line) in table.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad =
                || Error::InvalidInput(format!("published digests, line {}: {line:?}", number + 1));
            let mut fields = line.split_whitespace();
            let (Some(name), Some(hex), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(bad());
            };
            published.insert(name, parse_hex(hex).ok_or_else(bad)?);
        }
        Ok(published)
    }

    pub fn insert(&mut self, name: &str, digest: [u8; PUBLISHED_DIGEST_BYTES]) {
        self.by_name.insert(name.to_string(), digest);
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&[u8; PUBLISHED_DIGEST_BYTES]> {
        self.by_name.get(name)
    }
}

fn parse_hex(hex: &str) -> Option<[u8; PUBLISHED_DIGEST_BYTES]> {
    let mut digest = [0; PUBLISHED_DIGEST_BYTES];
    if hex.len() != 2 * PUBLISHED_DIGEST_BYTES || !hex.is_ascii() {
        return None;
    }
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(digest)
}

/// Digests of parameter contents whose points passed every check: one empty file per
/// digest in a folder of the user's cache. Whoever can write there could vouch for a bad
/// file, as whoever can write the parameters could replace them; keep it the user's own.
#[derive(Clone, Debug)]
pub struct CheckRecords {
    dir: Option<PathBuf>,
    published: Arc<PublishedDigests>,
}

impl CheckRecords {
    pub fn in_folder(dir: PathBuf) -> Self {
        CheckRecords {
            dir: Some(dir),
            published: Default::default(),
        }
    }

    /// These records, and files whose digest is the one `published` gives for their name
    /// taken as checked.
    pub fn with_published(self, published: Arc<PublishedDigests>) -> Self {
        CheckRecords { published, ..self }
    }

    pub(super) fn published(&self) -> &PublishedDigests {
        &self.published
    }

    /// `checked-params` in the user's cache ([`user_cache_dir`]); none (every read checks)
    /// when there is no cache folder.
    pub fn default_location() -> Self {
        CheckRecords {
            dir: user_cache_dir().map(|d| d.join("checked-params")),
            published: Default::default(),
        }
    }

    /// Remembers nothing: every read checks every point.
    pub fn none() -> Self {
        CheckRecords {
            dir: None,
            published: Default::default(),
        }
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
