//! A real 2 KiB sector, sealed inside the test process with filecoin-proofs-api (add-piece,
//! PC1, PC2, C1: well under a second), once per test binary; and the parameter cache the
//! tests share.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{ProverId, RegisteredSealProof, SectorId};

pub const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
pub const MINER_ID: u64 = 1000;
pub const SECTOR_ID: u64 = 7;

/// A sealed sector's phase-1 output and the ids it was sealed for.
pub struct Sealed {
    pub phase1: SealCommitPhase1Output,
    pub prover_id: ProverId,
    pub sector_id: SectorId,
}

/// The folder of this test binary's scratch files: filecoin-proofs' parameter cache and
/// parent cache point into it (its settings are read once per process: every test calls
/// this before the stack).
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::create_dir_all(dir.path().join("params")).expect("params folder");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.path().join("params"));
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.path().join("parents"));
        dir
    })
    .path()
}

pub fn parameter_cache() -> PathBuf {
    scratch().join("params")
}

/// The 2 KiB sector, sealed once per test binary from seeded random data.
pub fn sealed() -> &'static Sealed {
    static SEALED: OnceLock<Sealed> = OnceLock::new();
    SEALED.get_or_init(|| seal_sector(PROOF, 1))
}

pub fn seal_sector(proof: RegisteredSealProof, seed: u64) -> Sealed {
    let dir = scratch().join(format!("sector-{seed}"));
    let prover_id = wgpu_groth16_filecoin::c1::prover_id_of_miner(MINER_ID);
    let sector_id = SectorId::from(SECTOR_ID);
    let phase1 =
        wgpu_groth16_filecoin::sealing::seal_random_sector(proof, &dir, prover_id, sector_id, seed)
            .expect("sealing a 2 KiB sector");
    Sealed {
        phase1,
        prover_id,
        sector_id,
    }
}
