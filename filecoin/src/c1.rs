//! Reading a sector's phase-1 output (C1), in the two forms storage providers' tools write:
//!
//! - filecoin-proofs-api's `SealCommitPhase1Output` as serde_json writes it (what
//!   filecoin-ffi returns from `SealCommitPhase1` and lotus-bench stores);
//! - Curio's wrapper `{"SectorNum": N, "Phase1Out": "<base64>", "SectorSize": N}`, whose
//!   `Phase1Out` is the former in Go's base64 (Curio's cuzk protocol; docs/daemon.md).
//!
//! Both are bounded: a 32 GiB sector's C1 output is ~50 MB of JSON, a 64 GiB one twice that;
//! a file over [`MAX_C1_BYTES`] is refused before it is read.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use base64::Engine as _;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{ProverId, SectorId};
use serde::{Deserialize, Serialize};

use crate::error::sector_size_name;
use crate::{Error, Result};

/// The largest C1 output read: ten times a 64 GiB sector's.
pub const MAX_C1_BYTES: u64 = 1 << 30;

/// A phase-1 output, with what Curio's wrapper said about its sector.
#[derive(Clone, Debug)]
pub struct C1Output {
    pub phase1: SealCommitPhase1Output,
    /// Present when the input was Curio's wrapper.
    pub wrapper: Option<CurioWrapper>,
    /// Marked benchmark-only (`sealing::benchmark_c1`, `seal --benchmark-only`): its vanilla
    /// proofs are random, so nothing proved from it verifies.
    pub benchmark_only: bool,
}

/// The benchmark-only mark, whichever field order the JSON has.
#[derive(Deserialize)]
struct Marks {
    #[serde(default)]
    benchmark_only: Option<serde::de::IgnoredAny>,
}

/// A benchmark-only output as it is written: the mark first.
#[derive(Serialize)]
struct Marked<'a> {
    benchmark_only: &'static str,
    #[serde(flatten)]
    phase1: &'a SealCommitPhase1Output,
}

/// What Curio's wrapper says beside the phase-1 output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurioWrapper {
    pub sector_num: u64,
    pub sector_size: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wrapper {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

impl C1Output {
    /// Reads a C1 file of either form (at most [`MAX_C1_BYTES`]).
    pub fn read(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.into(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(Error::C1Format {
                origin: path.display().to_string(),
                reason: "not a regular file".into(),
            });
        }
        if meta.len() > MAX_C1_BYTES {
            return Err(Error::C1Format {
                origin: path.display().to_string(),
                reason: format!(
                    "{} bytes, more than the {MAX_C1_BYTES} a C1 output can be",
                    meta.len()
                ),
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_C1_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        Self::from_json(&bytes, &path.display().to_string())
    }

    /// Parses a C1 output of either form; `origin` names it in errors.
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<Self> {
        if bytes.len() as u64 > MAX_C1_BYTES {
            return Err(Error::C1Format {
                origin: origin.into(),
                reason: format!("more than {MAX_C1_BYTES} bytes"),
            });
        }
        let format_error = |what: &str, e: serde_json::Error| Error::C1Format {
            origin: origin.into(),
            reason: match e.classify() {
                serde_json::error::Category::Eof => format!("truncated {what} ({e})"),
                serde_json::error::Category::Syntax => format!("not JSON ({e})"),
                _ => format!("not {what} ({e})"),
            },
        };
        // The wrapper is tried first: its three fields are found at once, while a bare
        // output would be read whole before a missing field shows.
        if is_wrapper(bytes) {
            let wrapper: Wrapper =
                serde_json::from_slice(bytes).map_err(|e| format_error("Curio's C1 wrapper", e))?;
            let inner = base64::engine::general_purpose::STANDARD
                .decode(wrapper.phase1_out.as_bytes())
                .map_err(|e| Error::C1Format {
                    origin: origin.into(),
                    reason: format!("Phase1Out is not base64: {e}"),
                })?;
            let phase1 = serde_json::from_slice(&inner)
                .map_err(|e| format_error("a SealCommitPhase1Output (in Phase1Out)", e))?;
            let output = C1Output {
                phase1,
                wrapper: Some(CurioWrapper {
                    sector_num: wrapper.sector_num,
                    sector_size: wrapper.sector_size,
                }),
                benchmark_only: is_benchmark_only(&inner),
            };
            output.check_wrapper()?;
            return Ok(output);
        }
        let phase1 = serde_json::from_slice(bytes)
            .map_err(|e| format_error("a SealCommitPhase1Output", e))?;
        Ok(C1Output {
            phase1,
            wrapper: None,
            benchmark_only: is_benchmark_only(bytes),
        })
    }

    /// The phase-1 output as filecoin-proofs-api's JSON, with the benchmark-only mark
    /// where it has one.
    pub fn phase1_json(&self) -> Result<Vec<u8>> {
        let json = match self.benchmark_only {
            false => serde_json::to_vec(&self.phase1),
            true => serde_json::to_vec(&Marked {
                benchmark_only: crate::sealing::BENCHMARK_ONLY,
                phase1: &self.phase1,
            }),
        };
        json.map_err(|e| Error::C1Format {
            origin: "a C1 output".into(),
            reason: format!("not written as JSON: {e}"),
        })
    }

    /// Refuses a benchmark-only output: proving it would spend a C2 on a proof that cannot
    /// verify. `c2 --benchmark` times one on purpose.
    pub fn require_sealed(&self) -> Result<()> {
        match self.benchmark_only {
            false => Ok(()),
            true => Err(Error::C1Mismatch {
                what: "a sealed sector",
                detail: format!(
                    "it is a benchmark-only C1 output ({}); `c2 --benchmark` times one",
                    crate::sealing::BENCHMARK_ONLY
                ),
            }),
        }
    }

    /// The sector size the wrapper names must be the one its output is for.
    fn check_wrapper(&self) -> Result<()> {
        let Some(wrapper) = self.wrapper else {
            return Ok(());
        };
        let size = u64::from(self.phase1.registered_proof.sector_size());
        if wrapper.sector_size != size {
            return Err(Error::C1Mismatch {
                what: "its wrapper",
                detail: format!(
                    "SectorSize says {} but the output is of a {} sector ({:?})",
                    sector_size_name(wrapper.sector_size),
                    sector_size_name(size),
                    self.phase1.registered_proof
                ),
            });
        }
        Ok(())
    }

    /// The sector id: the one given, the wrapper's, or both when they agree.
    pub fn sector_id(&self, given: Option<u64>) -> Result<SectorId> {
        match (given, self.wrapper.map(|w| w.sector_num)) {
            (Some(given), Some(wrapped)) if given != wrapped => Err(Error::C1Mismatch {
                what: "the sector id given",
                detail: format!("{given} given, the wrapper's SectorNum is {wrapped}"),
            }),
            (Some(id), _) | (None, Some(id)) => Ok(SectorId::from(id)),
            (None, None) => Err(Error::C1Format {
                origin: "input".into(),
                reason: "the sector id is needed (a bare C1 output does not carry it)".into(),
            }),
        }
    }
}

/// Whether a (parsed) phase-1 output's JSON carries the benchmark-only mark.
fn is_benchmark_only(json: &[u8]) -> bool {
    serde_json::from_slice::<Marks>(json).is_ok_and(|marks| marks.benchmark_only.is_some())
}

/// Whether the JSON object's first key is one of the wrapper's (Go writes them in field
/// order, `SectorNum` first; a bare output starts with `registered_proof`).
fn is_wrapper(bytes: &[u8]) -> bool {
    let text = &bytes[..bytes.len().min(256)];
    let start = text.iter().position(|b| !b.is_ascii_whitespace());
    let Some(rest) = start.and_then(|s| text[s..].strip_prefix(b"{")) else {
        return false;
    };
    let rest = &rest[rest
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(rest.len())..];
    [
        &b"\"SectorNum\""[..],
        &b"\"Phase1Out\""[..],
        &b"\"SectorSize\""[..],
    ]
    .iter()
    .any(|key| rest.starts_with(key))
}

/// The prover id of miner actor `miner_id`, as Lotus and Curio make it: the actor id as an
/// unsigned LEB128 varint (the payload of its ID address), left-aligned in 32 zero bytes.
pub fn prover_id_of_miner(miner_id: u64) -> ProverId {
    let mut id = [0u8; 32];
    let mut value = miner_id;
    for byte in id.iter_mut() {
        *byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            break;
        }
        *byte |= 0x80;
    }
    id
}

/// A prover id written as 64 hexadecimal digits (an optional `0x` before them).
pub fn parse_prover_id(text: &str) -> Result<ProverId> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    let invalid = |why: &str| Error::C1Format {
        origin: "--prover-id".into(),
        reason: format!("{why}: expected 64 hexadecimal digits (32 bytes), got {text:?}"),
    };
    if digits.len() != 64 {
        return Err(invalid("wrong length"));
    }
    let mut id = [0u8; 32];
    for (byte, pair) in id.iter_mut().zip(digits.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| invalid("not hexadecimal"))?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid("not hexadecimal"))?;
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prover_ids_of_miners_are_leb128() {
        // f01000 is the first miner of a devnet: 1000 = 0b111_1101000.
        let id = prover_id_of_miner(1000);
        assert_eq!(&id[..3], &[0xe8, 0x07, 0x00]);
        assert!(id[2..].iter().all(|&b| b == 0));
        assert_eq!(prover_id_of_miner(0)[..2], [0, 0]);
        assert_eq!(prover_id_of_miner(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id_of_miner(128)[..3], [0x80, 0x01, 0]);
        let max = prover_id_of_miner(u64::MAX);
        assert_eq!(
            &max[..10],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    #[test]
    fn prover_ids_parse_from_hex() {
        let text = "00".repeat(31) + "ab";
        assert_eq!(parse_prover_id(&text).unwrap()[31], 0xab);
        assert_eq!(parse_prover_id(&format!("0x{text}")).unwrap()[31], 0xab);
        assert!(parse_prover_id("ab").is_err());
        assert!(parse_prover_id(&"zz".repeat(32)).is_err());
        assert!(parse_prover_id(&"é".repeat(32)).is_err());
    }

    #[test]
    fn the_wrapper_is_told_by_its_first_key() {
        assert!(is_wrapper(
            br#" { "SectorNum": 1, "Phase1Out": "", "SectorSize": 2048}"#
        ));
        assert!(!is_wrapper(
            br#"{"registered_proof": "StackedDrg2KiBV1_1"}"#
        ));
        assert!(!is_wrapper(b"[1, 2]"));
        assert!(!is_wrapper(b""));
    }
}
