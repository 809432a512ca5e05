//! PoRep C2 of a real 2 KiB sector: our proof equals bellperson's `create_proof_batch` on
//! the same circuits (filecoin-proofs' own), parameters and r, s, byte for byte; and what
//! `SealCommit` refuses.
//!
//! The parameters have the real circuit's shape with random points (a real setup of this
//! circuit takes ~20 min on 2 cores): every prover computes the same function of them, so
//! byte equality means what it means with real parameters. Proofs made with them do not
//! verify, so `verify_seal` must refuse them.

mod common;

use wgpu_groth16_filecoin::job::{ProofJob, PARTITION_PROOF_BYTES};
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::{Error, SealCommit};

fn commit() -> SealCommit {
    let sealed = common::sealed();
    SealCommit::new(sealed.phase1.clone(), sealed.prover_id, sealed.sector_id).expect("a valid C1")
}

#[test]
fn the_2kib_partition_proof_equals_bellperson_byte_for_byte() {
    let commit = commit();
    commit.check_vanilla_proofs().expect("vanilla proofs hold");
    assert_eq!(commit.partitions(), 1);
    let (params, expected) = common::assert_equal_to_bellperson(&commit, 2048);
    assert_eq!(expected.len(), PARTITION_PROOF_BYTES);

    // The parameters are not a setup, so verify_seal must refuse the proof, with their
    // verifying key where the stack looks for it.
    let files = ParamsFiles::seal(common::PROOF).expect("paths");
    let mut vk = Vec::new();
    params.vk.write(&mut vk).expect("vk bytes");
    std::fs::write(&files.vk, vk).expect("vk file");
    let err = commit.verify(&expected).unwrap_err();
    assert!(matches!(err, Error::Verification { .. }), "{err}");
}

#[test]
fn a_wrong_sector_id_or_prover_id_is_refused_before_proving() {
    let sealed = common::sealed();
    let other_sector = filecoin_proofs_api::SectorId::from(common::SECTOR_ID + 1);
    let err = SealCommit::new(sealed.phase1.clone(), sealed.prover_id, other_sector).unwrap_err();
    assert!(matches!(err, Error::C1Mismatch { .. }), "{err}");
    assert!(err.to_string().contains("sector 8"), "{err}");
    let other_prover = wgpu_groth16_filecoin::c1::prover_id_of_miner(common::MINER_ID + 1);
    let err = SealCommit::new(sealed.phase1.clone(), other_prover, sealed.sector_id).unwrap_err();
    assert!(matches!(err, Error::C1Mismatch { .. }), "{err}");
}

#[test]
fn vanilla_proofs_that_do_not_match_the_commitments_are_refused() {
    let sealed = common::sealed();
    let mut phase1 = sealed.phase1.clone();
    // Another sector's commitment: the replica id binds comm_d, so change comm_r only.
    phase1.comm_r[0] ^= 1;
    let commit = SealCommit::new(phase1, sealed.prover_id, sealed.sector_id).expect("reads");
    let err = commit.check_vanilla_proofs().unwrap_err();
    assert!(matches!(err, Error::C1Mismatch { .. }), "{err}");
}

#[test]
fn an_output_relabelled_as_another_sector_size_is_refused() {
    let sealed = common::sealed();
    let mut phase1 = sealed.phase1.clone();
    phase1.registered_proof = filecoin_proofs_api::RegisteredSealProof::StackedDrg8MiBV1_1;
    let err = SealCommit::new(phase1, sealed.prover_id, sealed.sector_id).unwrap_err();
    assert!(
        matches!(err, Error::C1Mismatch { .. }) && err.to_string().contains("8 MiB"),
        "{err}"
    );
}

#[test]
fn zero_commitments_are_refused() {
    let sealed = common::sealed();
    let mut phase1 = sealed.phase1.clone();
    phase1.seed = [0; 32];
    let err = SealCommit::new(phase1, sealed.prover_id, sealed.sector_id).unwrap_err();
    assert!(err.to_string().contains("seed is all zeros"), "{err}");
}

/// The partition circuit through a recorded constraint system (issue 16): the witness run
/// and the matrix products give exactly what full synthesis gives, inputs interleaved with
/// aux variables as the real circuit allocates them.
#[test]
fn the_2kib_partition_from_recorded_matrices_equals_full_synthesis() {
    use bellperson::Circuit;
    use blstrs::Scalar;
    use wgpu_groth16::groth16::precompiled::ConstraintMatrices;
    use wgpu_groth16::groth16::synthesis::{synthesize, ProvingAssignment};
    use wgpu_groth16_filecoin::job::PartitionCircuits;

    struct Record;
    impl PartitionCircuits for Record {
        type Output = ConstraintMatrices;
        fn run<C: Circuit<Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> wgpu_groth16_filecoin::Result<ConstraintMatrices> {
            Ok(ConstraintMatrices::record(circuits.remove(0))?)
        }
    }
    struct Synthesize<'a>(Option<&'a ConstraintMatrices>);
    impl PartitionCircuits for Synthesize<'_> {
        type Output = ProvingAssignment;
        fn run<C: Circuit<Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> wgpu_groth16_filecoin::Result<ProvingAssignment> {
            let circuit = circuits.remove(0);
            Ok(match self.0 {
                Some(matrices) => matrices.synthesize(circuit)?,
                None => synthesize(circuit)?,
            })
        }
    }
    let commit = commit();
    let matrices = commit.with_circuits(Record).expect("recorded");
    let recorded = commit
        .with_circuits(Synthesize(Some(&matrices)))
        .expect("witness run");
    let full = commit.with_circuits(Synthesize(None)).expect("full");
    assert!(
        recorded == full,
        "recorded synthesis differs from full synthesis"
    );
}
