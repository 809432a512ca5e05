//! A real 2 KiB sector, sealed inside the test process with filecoin-proofs-api (add-piece,
//! PC1, PC2, C1: well under a second), once per test binary; and the parameter cache the
//! tests share.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use blstrs::Scalar;
use ff::Field;
use filecoin_proofs_api::seal::{add_piece, SealCommitPhase1Output};
use filecoin_proofs_api::update::{empty_sector_update_encode_into, generate_partition_proofs};
use filecoin_proofs_api::{
    PaddedBytesAmount, ProverId, RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof,
    SectorId, UnpaddedBytesAmount,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use wgpu_groth16::groth16::synthesis::synthesize;
use wgpu_groth16::groth16::{Backend, CancelToken, Prover, ProverConfig, ProvingParameters};
use wgpu_groth16_filecoin::job::{proofs_to_bytes, PartitionCircuits, ProofJob};
use wgpu_groth16_filecoin::recorded::{RecordedCache, SynthesisPath};

pub const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
pub const MINER_ID: u64 = 1000;
pub const SECTOR_ID: u64 = 7;

/// A sealed sector's phase-1 output and the ids it was sealed for.
pub struct Sealed {
    pub phase1: SealCommitPhase1Output,
    /// The sector's files: `cache/`, `sealed`, `staged`.
    pub dir: PathBuf,
    pub prover_id: ProverId,
    pub sector_id: SectorId,
}

/// The folder of this test binary's scratch files: filecoin-proofs' parameter cache and
/// parent cache point into it (its settings are read once per process: every test calls
/// this before the stack), and so does our user cache (recorded constraint systems).
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::create_dir_all(dir.path().join("params")).expect("params folder");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.path().join("params"));
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.path().join("parents"));
        std::env::set_var("WGPU_GROTH16_PARAMS_CACHE", dir.path().join("cache"));
        dir
    })
    .path()
}

/// Our user cache (`WGPU_GROTH16_PARAMS_CACHE`), in [`scratch`].
pub fn user_cache() -> PathBuf {
    scratch().join("cache")
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
        dir,
        prover_id,
        sector_id,
    }
}

struct ShapeOfFirst;
impl PartitionCircuits for ShapeOfFirst {
    type Output = wgpu_groth16::recorded::Shape;
    fn run<C: bellperson::Circuit<Scalar> + Send>(
        self,
        mut circuits: Vec<C>,
    ) -> wgpu_groth16_filecoin::Result<Self::Output> {
        Ok(synthesize(circuits.remove(0))?.shape())
    }
}

/// Random-point parameters of the shape of `job`'s circuits.
pub fn params_for(job: &impl ProofJob, seed: u64) -> ProvingParameters {
    let shape = job.with_circuits(ShapeOfFirst).expect("circuits");
    ProvingParameters::random_for_shape(&shape, seed)
}

/// One r and one s per partition of `job`, from `seed`.
pub fn draw_rs_ss(job: &impl ProofJob, seed: u64) -> (Vec<Scalar>, Vec<Scalar>) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut draw = || -> Vec<Scalar> {
        (0..job.partitions())
            .map(|_| Scalar::random(&mut rng))
            .collect()
    };
    (draw(), draw())
}

pub fn cpu_prover(params: &ProvingParameters) -> Prover {
    let config = ProverConfig {
        backend: Backend::Cpu,
        ..Default::default()
    };
    Prover::new(params.clone(), &config).expect("prover")
}

/// Our proofs of `job` on the CPU and the GPU (lavapipe in CI, where its absence fails the
/// test) equal bellperson's `create_proof_batch` byte for byte, on the same circuits
/// (filecoin-proofs' own), random-point parameters of their shape, and r, s from `seed`;
/// and ours came from a constraint system recorded from the stack's blank circuit, which
/// the witness check found of the same structure as the real ones. Returns the parameters
/// and bellperson's bytes.
pub fn assert_equal_to_bellperson(job: &impl ProofJob, seed: u64) -> (ProvingParameters, Vec<u8>) {
    let params = params_for(job, seed);
    let (rs, ss) = draw_rs_ss(job, seed);
    let theirs = job
        .prove_with_bellperson(&params.to_bellperson(), &rs, &ss)
        .expect("bellperson");
    let expected = proofs_to_bytes(&theirs).expect("bytes");
    assert_eq!(expected.len(), 192 * job.partitions());
    for backend in [Backend::Cpu, Backend::Gpu(Default::default())] {
        let name = format!("{backend:?}");
        let config = ProverConfig {
            backend,
            ..Default::default()
        };
        let prover = Prover::new(params.clone(), &config).expect("prover");
        let (proofs, synthesis, _) = job
            .prove_partitions_reporting(
                &prover,
                Some(RecordedCache::shared()),
                &rs,
                &ss,
                &CancelToken::new(),
            )
            .expect("ours");
        assert!(
            matches!(synthesis, SynthesisPath::Recorded { .. }),
            "{name}: {synthesis}"
        );
        let ours = proofs_to_bytes(&proofs).expect("bytes");
        assert!(
            ours == expected,
            "{name}: our proof differs from bellperson's"
        );
    }
    (params, expected)
}

/// A PoSt challenge seed from `seed` (a field element: its top bits cleared).
pub fn randomness(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    ChaCha20Rng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes[31] &= 0x3f;
    bytes
}

/// The vanilla proof of the shared sector for PoSt `proof` and `randomness`.
pub fn post_vanilla(proof: RegisteredPoStProof, randomness: &[u8; 32]) -> Vec<Vec<u8>> {
    let sealed = sealed();
    let vanilla = wgpu_groth16_filecoin::sealing::post_vanilla(
        proof,
        &sealed.dir,
        sealed.phase1.comm_r,
        sealed.prover_id,
        sealed.sector_id,
        randomness,
    )
    .expect("vanilla proof");
    vec![vanilla]
}

/// A SnapDeals update of the shared sector: what Curio sends for it.
pub struct Update {
    pub proof: RegisteredUpdateProof,
    /// One bincode `PartitionProof` per partition.
    pub vanilla: Vec<Vec<u8>>,
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
}

/// The shared sector updated with a piece of data drawn from `seed` (a folder of its own per
/// seed), and the vanilla partition proofs of the update.
pub fn snap_update(seed: u64) -> Update {
    let proof = RegisteredUpdateProof::StackedDrg2KiBV1;
    let sealed = sealed();
    let dir = scratch().join(format!("update-{seed}"));
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    let size = u64::from(proof.sector_size());
    let piece_len = UnpaddedBytesAmount::from(PaddedBytesAmount(size));
    let mut data = vec![0u8; u64::from(piece_len) as usize];
    ChaCha20Rng::seed_from_u64(seed).fill_bytes(&mut data);
    let (staged, replica) = (dir.join("staged"), dir.join("replica"));
    let (piece, _) = add_piece(
        PROOF,
        &data[..],
        std::fs::File::create(&staged).unwrap(),
        piece_len,
        &[],
    )
    .expect("piece");
    // The new replica is written in place: a file of the sector's size.
    std::fs::File::create(&replica)
        .unwrap()
        .set_len(size)
        .unwrap();
    let encoded = empty_sector_update_encode_into(
        proof,
        &replica,
        dir.join("cache"),
        sealed.dir.join("sealed"),
        sealed.dir.join("cache"),
        &staged,
        &[piece],
    )
    .expect("encode");
    let vanilla = generate_partition_proofs(
        proof,
        sealed.phase1.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        sealed.dir.join("sealed"),
        sealed.dir.join("cache"),
        &replica,
        dir.join("cache"),
    )
    .expect("vanilla partition proofs");
    Update {
        proof,
        vanilla: vanilla.into_iter().map(|p| p.0).collect(),
        comm_r_old: sealed.phase1.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
    }
}
