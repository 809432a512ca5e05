//! Filecoin's SNARKs on wgpu-groth16: a storage provider's PoRep C2 (seal commit phase 2)
//! from the C1 output that lotus-bench, filecoin-ffi or Curio write, proved through
//! wgpu-groth16's batch pipeline with the parameters resident, giving the bytes
//! filecoin-proofs' `seal_commit_phase2` gives.
//!
//! [`job`] is what every SNARK of the stack shares: partitions whose circuits filecoin-proofs'
//! own code builds, proved as one batch by our prover or, to compare, by bellperson;
//! [`recorded`] keeps their constraint systems, recorded once, so that a proof runs only the
//! circuits' witness computation; [`c1`] reads phase-1 outputs (filecoin-proofs-api's JSON,
//! and Curio's wrapper of it);
//! [`params`] finds a proof's parameter files where filecoin-proofs looks for them;
//! [`porep`] checks a phase-1 output against its sector, proves it and verifies the result
//! with the stack; [`post`] and [`update`] prove Winning / Window PoSt and SnapDeals from
//! their vanilla proofs;
//! [`sealing`] makes small sectors and seeded parameters for tests and benchmarks.

/// Runs `$body` with `$tree` naming the Merkle tree type of seal proofs of `$size` bytes
/// (a registered seal proof's sector size; any other is a bug, as for filecoin-proofs'
/// own `with_shape!`).
#[macro_export]
macro_rules! with_tree {
    ($size:expr, $tree:ident => $body:expr) => {{
        use filecoin_proofs::constants as sizes;
        match $size {
            sizes::SECTOR_SIZE_2_KIB => {
                type $tree = sizes::SectorShape2KiB;
                $body
            }
            sizes::SECTOR_SIZE_8_MIB => {
                type $tree = sizes::SectorShape8MiB;
                $body
            }
            sizes::SECTOR_SIZE_512_MIB => {
                type $tree = sizes::SectorShape512MiB;
                $body
            }
            sizes::SECTOR_SIZE_32_GIB => {
                type $tree = sizes::SectorShape32GiB;
                $body
            }
            sizes::SECTOR_SIZE_64_GIB => {
                type $tree = sizes::SectorShape64GiB;
                $body
            }
            other => unreachable!("no registered seal proof has {other}-byte sectors"),
        }
    }};
}

pub mod c1;
pub mod error;
pub mod job;
pub mod params;
pub mod porep;
pub mod post;
pub mod recorded;
pub mod sealing;
pub mod update;

pub use error::{Error, Result};
pub use job::ProofJob;
pub use porep::{seal_commit_phase2, SealCommit};
