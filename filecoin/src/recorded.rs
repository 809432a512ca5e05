//! The recorded constraint systems of jobs' circuits ([`wgpu_groth16::recorded`]): recorded
//! once from the stack's blank circuit, kept in a file of the user's cache and in this
//! process's memory, so that each later proof runs only its circuits' witness computation.
//! Full synthesis remains the answer to anything unexpected: no recording, or circuits that
//! the witness check finds differ from it. What a job's key and blank circuit are is the
//! job's to say ([`crate::job`]); this module only keeps what they give.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wgpu_groth16::recorded::{default_recorded_dir, Origin, RecordedKey, RecordedSystem};

use crate::{Error, Result};

/// Set (to anything but `0`), jobs are proved by full synthesis, as before recorded
/// systems: for comparison.
pub const FULL_SYNTHESIS_VAR: &str = "WGPU_GROTH16_FULL_SYNTHESIS";

/// How a job's partitions were synthesized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthesisPath {
    /// Witness runs against a recorded constraint system: `origin` says where it came from
    /// (`None`: this process already held it), `took` how long getting it took.
    Recorded {
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
            SynthesisPath::Recorded { origin: None, .. } => {
                write!(f, "recorded constraint system: already in memory")
            }
            SynthesisPath::Recorded {
                origin: Some(Origin::Loaded(path)),
                took,
            } => write!(
                f,
                "recorded constraint system: loaded from {} in {:.2} s",
                path.display(),
                seconds(took)
            ),
            SynthesisPath::Recorded {
                origin: Some(Origin::Recorded(written)),
                took,
            } => {
                write!(
                    f,
                    "recorded constraint system: recorded in {:.2} s",
                    seconds(took)
                )?;
                match written {
                    Some(path) => write!(f, ", written to {}", path.display()),
                    None => write!(f, " (not written)"),
                }
            }
            SynthesisPath::Full { why } => write!(f, "full synthesis: {why}"),
        }
    }
}

/// Recorded constraint systems by key: their files in a folder, and those this process
/// already read or recorded, kept in memory for its next jobs (a daemon proves many).
pub struct RecordedCache {
    /// `None`: [`default_recorded_dir`], looked up at each load.
    dir: Option<PathBuf>,
    kept: Mutex<HashMap<RecordedKey, Arc<Mutex<Slot>>>>,
}

/// One key's system; its lock is held while it loads, so a second job waits for it.
enum Slot {
    Empty,
    Ready(Arc<RecordedSystem>),
    /// The witness check refused it: later jobs go straight to full synthesis.
    Refused(String),
}

impl RecordedCache {
    /// Files in `dir`.
    pub fn in_folder(dir: impl Into<PathBuf>) -> Self {
        RecordedCache {
            dir: Some(dir.into()),
            kept: Mutex::default(),
        }
    }

    /// The process's cache, its files in the user's cache folder (`recorded` in
    /// `$WGPU_GROTH16_PARAMS_CACHE`, `$XDG_CACHE_HOME/wgpu-groth16` or
    /// `~/.cache/wgpu-groth16`).
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<RecordedCache> = OnceLock::new();
        SHARED.get_or_init(|| RecordedCache {
            dir: None,
            kept: Mutex::default(),
        })
    }

    /// [`shared`](Self::shared), or none when [`FULL_SYNTHESIS_VAR`] asks for full synthesis.
    pub fn by_default() -> Option<&'static Self> {
        let full = std::env::var(FULL_SYNTHESIS_VAR).is_ok_and(|v| v != "0");
        (!full).then(Self::shared)
    }

    /// The system of `key`: kept in memory, else read from its file, else
    /// `load_or_record(dir)` (called only then, with the folder of this cache's files:
    /// [`RecordedSystem::load_or_record`] from a blank circuit, which writes it there for
    /// the next process).
    pub fn system(
        &self,
        key: &RecordedKey,
        load_or_record: impl FnOnce(Option<&Path>) -> Result<(RecordedSystem, Origin)>,
    ) -> Result<(Arc<RecordedSystem>, SynthesisPath)> {
        let slot = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(Slot::Empty)))
            .clone();
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Slot::Ready(system) => {
                let path = SynthesisPath::Recorded {
                    origin: None,
                    took: Duration::ZERO,
                };
                return Ok((system.clone(), path));
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
            .or_else(default_recorded_dir)
            .map(|dir| key.path_in(&dir))
            .filter(|path| path.exists());
        let loaded = file.and_then(|path| match RecordedSystem::read_from(&path, key) {
            Ok(system) => Some((system, Origin::Loaded(path))),
            Err(e) => {
                log::warn!("{e}: recording it again");
                None
            }
        });
        let (system, origin) = match loaded {
            Some(loaded) => loaded,
            None => load_or_record(self.dir.as_deref())?,
        };
        let system = Arc::new(system);
        *slot = Slot::Ready(system.clone());
        let path = SynthesisPath::Recorded {
            origin: Some(origin),
            took: start.elapsed(),
        };
        Ok((system, path))
    }

    /// Remembers that the witness check refused `key`'s system (and lets it go).
    pub(crate) fn refuse(&self, key: &RecordedKey, why: &str) {
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
