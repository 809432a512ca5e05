//! Recorded constraint systems on disk. Recording a production circuit takes tens of
//! seconds and several GiB, so it is written once and read back by every later process.
//!
//! A file is named by its [`RecordedKey`]: the caller's identity of the circuit and the
//! digest of the parameters' verifying key, so a recording is never reused across circuits or
//! parameter sets. Whatever a file says, the witness run still checks counts and trace
//! against it ([`RecordedSystem::witness`]); reading it checks that it is whole (a
//! BLAKE3 digest of everything) and that every index in it is in range, so a damaged or
//! hostile file is an error, never a panic or an out-of-bounds product.
//!
//! The file format is [`format`](super::format)'s.

use std::fmt;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bellperson::groth16::VerifyingKey;
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};

use super::format::{Sink, VERSION};
use super::RecordedSystem;
use crate::error::{Error, Result};
use crate::files::user_cache_dir;

/// What a recorded system's file is for: one circuit structure with one parameter set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordedKey {
    circuit: String,
    digest: [u8; 32],
}

impl RecordedKey {
    /// The key of circuit `circuit` (the caller's name for its structure, e.g.
    /// `"StackedDrg2KiBV1_1 porep-id 0500…"`) proved with parameters whose verifying key is
    /// `vk`.
    pub fn new(circuit: &str, vk: &VerifyingKey<Bls12>) -> Result<Self> {
        let mut bytes = Vec::new();
        vk.write(&mut bytes)
            .map_err(|e| Error::Internal(format!("cannot serialize a verifying key: {e}")))?;
        Ok(Self::from_vk_bytes(circuit, &bytes))
    }

    /// [`new`](Self::new) from the verifying key as bellperson writes it (a `.vk` file).
    pub fn from_vk_bytes(circuit: &str, vk: &[u8]) -> Self {
        let mut hasher = blake3::Hasher::new_derive_key("wgpu-groth16 constraint matrices key v1");
        hasher.update(&(circuit.len() as u64).to_le_bytes());
        hasher.update(circuit.as_bytes());
        hasher.update(blake3::hash(vk).as_bytes());
        RecordedKey {
            circuit: circuit.to_owned(),
            digest: *hasher.finalize().as_bytes(),
        }
    }

    pub fn circuit(&self) -> &str {
        &self.circuit
    }

    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// The file of this recording in folder `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!(
            "v{VERSION}-{}.recorded",
            blake3::Hash::from(self.digest).to_hex()
        ))
    }
}

/// `recorded` in the user's cache folder ([`user_cache_dir`]).
pub fn default_recorded_dir() -> Option<PathBuf> {
    user_cache_dir().map(|d| d.join("recorded"))
}

/// Where [`RecordedSystem::load_or_record`] got the system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Read from this file.
    Loaded(PathBuf),
    /// Recorded from the circuit, then written to this file (`None`: not written, which
    /// was logged).
    Recorded(Option<PathBuf>),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Loaded(path) => write!(f, "loaded from {}", path.display()),
            Origin::Recorded(Some(path)) => write!(f, "recorded, written to {}", path.display()),
            Origin::Recorded(None) => write!(f, "recorded (not written)"),
        }
    }
}

impl RecordedSystem {
    /// Writes the system for `key` to `path`, whole or not at all ([`crate::files`]): a
    /// failure leaves a file already at `path` as it was. The parent folder must exist.
    pub fn write_to(&self, path: &Path, key: &RecordedKey) -> Result<()> {
        let start = Instant::now();
        crate::files::write_cache("a recorded constraint system", path, |out| {
            let mut sink = Sink {
                out,
                hasher: blake3::Hasher::new(),
            };
            self.encode(&mut sink, key)?;
            let digest = sink.hasher.finalize();
            sink.out.write_all(digest.as_bytes())
        })
        .map_err(|e| Error::RecordedFile {
            path: path.display().to_string(),
            reason: match e {
                Error::File { source, .. } => format!("cannot write it: {source}"),
                other => other.to_string(),
            },
        })?;
        log::info!(
            "wrote a recorded constraint system ({:.1} MiB) to {} in {:.2?}",
            self.bytes() as f64 / (1u64 << 20) as f64,
            path.display(),
            start.elapsed()
        );
        Ok(())
    }

    /// Reads a system that [`write_to`](Self::write_to) wrote for `key`. Every length is
    /// checked against the file's size before anything is allocated, the digest against the
    /// content, and every index against the counts: a file that is truncated, damaged, of
    /// another version or for another key is an error naming it and why.
    pub fn read_from(path: &Path, key: &RecordedKey) -> Result<Self> {
        let start = Instant::now();
        let failed = |reason: String| Error::RecordedFile {
            path: path.display().to_string(),
            reason,
        };
        let io_failed = |e: io::Error| failed(format!("cannot read it: {e}"));
        let metadata = fs::metadata(path).map_err(io_failed)?;
        if !metadata.is_file() {
            return Err(failed("not a regular file".into()));
        }
        let file = File::open(path).map_err(io_failed)?;
        let len = file.metadata().map_err(io_failed)?.len();
        // On threads of its own: on the global pool each of its reads queued behind whatever
        // else ran there (beside a parameter file's decode, an 8.5 GB system took 22 s).
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("recorded-read-{i}"))
            .build()
            .map_err(|e| failed(format!("cannot start its reading threads: {e}")))?;
        let system = pool
            .install(|| Self::decode(file, len, key))
            .map_err(failed)?;
        log::info!(
            "read a recorded constraint system ({} constraints, {:.1} MiB) from {} in {:.2?}",
            system.constraints,
            len as f64 / (1u64 << 20) as f64,
            path.display(),
            start.elapsed()
        );
        Ok(system)
    }

    /// The system for `key` from its file in `dir` (the user's cache,
    /// [`default_recorded_dir`], when `None`); where there is none, or it cannot be read,
    /// recorded from `circuit()` (called only then) and written there for the next time. A
    /// file that cannot be read is logged and replaced; one that cannot be written is
    /// logged: the system is returned all the same.
    pub fn load_or_record<C: Circuit<Scalar>>(
        dir: Option<&Path>,
        key: &RecordedKey,
        circuit: impl FnOnce() -> Result<C>,
    ) -> Result<(Self, Origin)> {
        let dir = dir.map(Path::to_path_buf).or_else(default_recorded_dir);
        let Some(dir) = dir else {
            log::warn!(
                "no cache folder (HOME is not set): recorded constraint systems are not kept"
            );
            return Ok((Self::record(circuit()?)?, Origin::Recorded(None)));
        };
        let path = key.path_in(&dir);
        match Self::read_from(&path, key) {
            Ok(system) => return Ok((system, Origin::Loaded(path))),
            Err(_) if !path.exists() => log::info!(
                "no recorded constraint system for {:?} in {}: recording it",
                key.circuit,
                dir.display()
            ),
            Err(e) => log::warn!("{e}; recording it again"),
        }
        let system = Self::record(circuit()?)?;
        let written = fs::create_dir_all(&dir)
            .map_err(|e| Error::RecordedFile {
                path: path.display().to_string(),
                reason: format!("cannot create its folder: {e}"),
            })
            .and_then(|()| system.write_to(&path, key));
        match written {
            Ok(()) => Ok((system, Origin::Recorded(Some(path)))),
            Err(e) => {
                log::warn!("{e}; the next process records it again");
                Ok((system, Origin::Recorded(None)))
            }
        }
    }
}
