//! The constraint matrices of a job's circuits (wgpu-groth16's pre-compiled constraint
//! systems): recorded once from the stack's blank circuit, kept in a file of the user's cache
//! and in this process's memory, so that each later proof runs only its circuits' witness
//! computation. Full synthesis remains the answer to anything unexpected: no matrices, or
//! circuits that the witness check finds differ from them.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bellperson::Circuit;
use blstrs::Scalar;
use wgpu_groth16::groth16::precompiled::{
    default_matrices_dir, ConstraintMatrices, MatricesKey, Origin,
};
use wgpu_groth16::groth16::Prover;

use crate::job::{PartitionCircuits, ProofJob};
use crate::{Error, Result};

/// Set (to anything but `0`), jobs are proved by full synthesis, as before matrices: for
/// comparison.
pub const FULL_SYNTHESIS_VAR: &str = "WGPU_GROTH16_FULL_SYNTHESIS";

/// Largest `.vk` file read for a key: real ones are kilobytes.
const MAX_VK_FILE: u64 = 1 << 20;

/// How a job's partitions were synthesized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthesisPath {
    /// Witness runs over recorded constraint matrices: `origin` says where they came from
    /// (`None`: this process already held them), `took` how long getting them took.
    Matrices {
        origin: Option<Origin>,
        took: Duration,
    },
    /// Full synthesis of every constraint, and why.
    Full { why: String },
}

impl fmt::Display for SynthesisPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = |took: &Duration| took.as_secs_f64();
        match self {
            SynthesisPath::Matrices { origin: None, .. } => {
                write!(f, "constraint matrices: already in memory")
            }
            SynthesisPath::Matrices {
                origin: Some(Origin::Loaded(path)),
                took,
            } => write!(
                f,
                "constraint matrices: loaded from {} in {:.2} s",
                path.display(),
                seconds(took)
            ),
            SynthesisPath::Matrices {
                origin: Some(Origin::Recorded(written)),
                took,
            } => {
                write!(f, "constraint matrices: recorded in {:.2} s", seconds(took))?;
                match written {
                    Some(path) => write!(f, ", written to {}", path.display()),
                    None => write!(f, " (not written)"),
                }
            }
            SynthesisPath::Full { why } => write!(f, "full synthesis: {why}"),
        }
    }
}

/// Constraint matrices by key: their files in a folder, and those this process already
/// read or recorded, kept in memory for its next jobs (a daemon proves many).
pub struct MatricesCache {
    /// `None`: [`default_matrices_dir`](wgpu_groth16::groth16::precompiled::default_matrices_dir),
    /// looked up at each load.
    dir: Option<PathBuf>,
    kept: Mutex<HashMap<MatricesKey, Arc<Mutex<Slot>>>>,
}

/// One key's matrices; its lock is held while they load, so a second job waits for them.
enum Slot {
    Empty,
    Ready(Arc<ConstraintMatrices>),
    /// The witness check refused them: later jobs go straight to full synthesis.
    Refused(String),
}

impl MatricesCache {
    /// Files in `dir`.
    pub fn in_folder(dir: impl Into<PathBuf>) -> Self {
        MatricesCache {
            dir: Some(dir.into()),
            kept: Mutex::default(),
        }
    }

    /// The process's cache, its files in the user's cache folder (`matrices` in
    /// `$WGPU_GROTH16_PARAMS_CACHE`, `$XDG_CACHE_HOME/wgpu-groth16` or
    /// `~/.cache/wgpu-groth16`).
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<MatricesCache> = OnceLock::new();
        SHARED.get_or_init(|| MatricesCache {
            dir: None,
            kept: Mutex::default(),
        })
    }

    /// [`shared`](Self::shared), or none when [`FULL_SYNTHESIS_VAR`] asks for full synthesis.
    pub fn by_default() -> Option<&'static Self> {
        let full = std::env::var(FULL_SYNTHESIS_VAR).is_ok_and(|v| v != "0");
        (!full).then(Self::shared)
    }

    /// `job`'s matrices: kept in memory, else loaded from their file, else recorded from the
    /// job's blank circuit (and written for the next process).
    pub fn matrices<J: ProofJob + ?Sized>(
        &self,
        job: &J,
        prover: &Prover,
    ) -> Result<(MatricesKey, Arc<ConstraintMatrices>, SynthesisPath)> {
        let key = matrices_key(job, prover)?;
        let slot = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(Slot::Empty)))
            .clone();
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Slot::Ready(matrices) => {
                let path = SynthesisPath::Matrices {
                    origin: None,
                    took: Duration::ZERO,
                };
                return Ok((key, matrices.clone(), path));
            }
            Slot::Refused(why) => {
                return Err(Error::Prover(wgpu_groth16::Error::CircuitStructure(
                    format!("refused before: {why}"),
                )))
            }
            Slot::Empty => {}
        }
        let start = Instant::now();
        // A file is read before the blank circuit is built: building it (the stack's public
        // parameters) is needed only to record.
        let file = self
            .dir
            .clone()
            .or_else(default_matrices_dir)
            .map(|dir| key.path_in(&dir))
            .filter(|path| path.exists());
        let loaded = file.and_then(|path| match ConstraintMatrices::read_from(&path, &key) {
            Ok(matrices) => Some((matrices, Origin::Loaded(path))),
            Err(e) => {
                log::warn!("{e}: recording them again");
                None
            }
        });
        let (matrices, origin) = match loaded {
            Some(loaded) => loaded,
            None => job.with_blank_circuit(LoadOrRecord {
                dir: self.dir.as_deref(),
                key: &key,
            })?,
        };
        let matrices = Arc::new(matrices);
        *slot = Slot::Ready(matrices.clone());
        let path = SynthesisPath::Matrices {
            origin: Some(origin),
            took: start.elapsed(),
        };
        Ok((key, matrices, path))
    }

    /// Remembers that the witness check refused `key`'s matrices (and lets them go).
    pub(crate) fn refuse(&self, key: &MatricesKey, why: &str) {
        let slot = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned();
        if let Some(slot) = slot {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Slot::Refused(why.to_owned());
        }
    }
}

/// The key of `job`'s matrices: its circuit identity and its parameters' verifying key. That
/// key is read from the job's `.vk` file where there is one (bellperson's `vk.write` bytes,
/// beside the `.params`): parameters still loading need not be waited for, so the matrices
/// load and the witness runs while they do. Otherwise the prover's own.
pub fn matrices_key<J: ProofJob + ?Sized>(job: &J, prover: &Prover) -> Result<MatricesKey> {
    let circuit = job.circuit_identity();
    let files = job.params_files()?;
    match read_small(&files.vk) {
        Some(vk) => Ok(MatricesKey::from_vk_bytes(&circuit, &vk)),
        None => Ok(MatricesKey::new(&circuit, &prover.params()?.vk)?),
    }
}

/// A regular file of at most [`MAX_VK_FILE`] bytes; `None` for anything else.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let metadata = fs::metadata(path).ok()?;
    if !metadata.is_file() || metadata.len() > MAX_VK_FILE {
        return None;
    }
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(MAX_VK_FILE)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// Loads or records the matrices of the one blank circuit it is handed.
struct LoadOrRecord<'a> {
    dir: Option<&'a Path>,
    key: &'a MatricesKey,
}

impl PartitionCircuits for LoadOrRecord<'_> {
    type Output = (ConstraintMatrices, Origin);
    fn run<C: Circuit<Scalar> + Send>(self, mut circuits: Vec<C>) -> Result<Self::Output> {
        let blank = circuits.pop().ok_or_else(|| {
            Error::Prover(wgpu_groth16::Error::Internal(
                "no blank circuit to record".into(),
            ))
        })?;
        Ok(ConstraintMatrices::load_or_record(
            self.dir,
            self.key,
            move || Ok(blank),
        )?)
    }
}
