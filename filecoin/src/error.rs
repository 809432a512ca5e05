//! What can go wrong between a C1 output and a C2 proof, each with the message a storage
//! provider needs to act on it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The C1 output cannot be read as one (truncated, not JSON, a field missing).
    #[error("C1 output {origin}: {reason}")]
    C1Format { origin: String, reason: String },
    /// The C1 output reads, but contradicts itself or the sector it is proved for.
    #[error("C1 output does not match {what}: {detail}")]
    C1Mismatch { what: &'static str, detail: String },
    /// Vanilla proofs (PoSt, SnapDeals) that cannot be read or do not hold.
    #[error("vanilla proofs: {0}")]
    Vanilla(String),
    /// A parameter file the seal proof needs is not where filecoin-proofs looks for it.
    #[error(
        "{kind} for {proof} ({sector}) not found: expected {path} \
         (set FIL_PROOFS_PARAMETER_CACHE to the folder that holds it; nothing is downloaded)"
    )]
    ParamsMissing {
        kind: &'static str,
        proof: String,
        sector: String,
        path: PathBuf,
    },
    /// A parameter file is there but is not the one the seal proof needs.
    #[error("{path} is not the parameter file of {proof} ({sector}): {reason}")]
    ParamsWrong {
        path: PathBuf,
        proof: String,
        sector: String,
        reason: String,
    },
    /// The proof was made but filecoin-proofs' `verify_seal` refuses it.
    #[error("the proof of sector {sector} fails filecoin-proofs' verify_seal{detail}")]
    Verification { sector: u64, detail: String },
    #[error("not supported: {0}")]
    Unsupported(String),
    /// filecoin-proofs refused or failed.
    #[error("filecoin-proofs: {0:#}")]
    Stack(anyhow::Error),
    #[error(transparent)]
    Prover(#[from] wgpu_groth16::Error),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::Stack(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// A sector size as people write it: "2 KiB", "32 GiB".
pub fn sector_size_name(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024 && value.is_multiple_of(1024) && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value} {}", UNITS[unit])
}

/// Runs filecoin-proofs' code on bytes from elsewhere. Some of it panics on malformed input
/// (a Poseidon domain element above the modulus: filecoin-hashers' "from_repr failure"),
/// which here is an error of that input (`what`), not a crash of the caller: a daemon keeps
/// serving and answers the job.
pub(crate) fn guarded<T>(what: &str, stack: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(stack)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(Error::Vanilla(format!(
            "{what} are malformed: filecoin-proofs panicked on them ({message})"
        )))
    })
}
