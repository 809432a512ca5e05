//! PoRep C2 of a real 2 KiB sector: our proof equals bellperson's `create_proof_batch` on
//! the same circuits (filecoin-proofs' own), parameters and r, s, byte for byte; and what
//! `SealCommit` refuses.
//!
//! The parameters have the real circuit's shape with random points (a real setup of this
//! circuit takes ~20 min on 2 cores): every prover computes the same function of them, so
//! byte equality means what it means with real parameters. Proofs made with them do not
//! verify, so `verify_seal` must refuse them.

mod common;

use std::sync::OnceLock;

use wgpu_groth16::groth16::{CancelToken, ProvingParameters};
use wgpu_groth16_filecoin::job::{ProofJob, PARTITION_PROOF_BYTES};
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::{Error, SealCommit};

fn commit() -> SealCommit {
    let sealed = common::sealed();
    SealCommit::new(sealed.phase1.clone(), sealed.prover_id, sealed.sector_id).expect("a valid C1")
}

/// Seed of the parameters and r, s of [`bellperson_reference`].
const SEED: u64 = 2048;

/// Our proofs equal bellperson's (checked once per test binary): the parameters, and
/// bellperson's bytes.
fn bellperson_reference() -> &'static (ProvingParameters, Vec<u8>) {
    static REFERENCE: OnceLock<(ProvingParameters, Vec<u8>)> = OnceLock::new();
    REFERENCE.get_or_init(|| common::assert_equal_to_bellperson(&commit(), SEED))
}

#[test]
fn the_2kib_partition_proof_equals_bellperson_byte_for_byte() {
    let commit = commit();
    commit.check_vanilla_proofs().expect("vanilla proofs hold");
    assert_eq!(commit.partitions(), 1);
    let (params, expected) = bellperson_reference();
    assert_eq!(expected.len(), PARTITION_PROOF_BYTES);

    // The parameters are not a setup, so verify_seal must refuse the proof, with their
    // verifying key where the stack looks for it.
    let files = ParamsFiles::seal(common::PROOF).expect("paths");
    let mut vk = Vec::new();
    params.vk.write(&mut vk).expect("vk bytes");
    // Whole or not at all: other tests read it for their matrices' key meanwhile.
    let partial = files.vk.with_extension("vk.partial");
    std::fs::write(&partial, vk).expect("vk file");
    std::fs::rename(&partial, &files.vk).expect("vk file");
    let err = commit.verify(expected).unwrap_err();
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

/// Records the first circuit it is handed.
struct Record;

impl wgpu_groth16_filecoin::job::PartitionCircuits for Record {
    type Output = wgpu_groth16::recorded::RecordedSystem;
    fn run<C: bellperson::Circuit<blstrs::Scalar> + Send>(
        self,
        mut circuits: Vec<C>,
    ) -> wgpu_groth16_filecoin::Result<Self::Output> {
        Ok(wgpu_groth16::recorded::RecordedSystem::record(
            circuits.remove(0),
        )?)
    }
}

/// The partition circuit through a recorded constraint system (issue 16): the witness run
/// and the matrix products give exactly what full synthesis gives, inputs interleaved with
/// aux variables as the real circuit allocates them.
#[test]
fn the_2kib_partition_from_its_recorded_system_equals_full_synthesis() {
    use bellperson::Circuit;
    use blstrs::Scalar;
    use wgpu_groth16::groth16::synthesis::{synthesize, ProvingAssignment};
    use wgpu_groth16::recorded::{RecordedSystem, WitnessRun};
    use wgpu_groth16_filecoin::job::{PartitionCircuits, PartitionWitnesses};

    struct Synthesize<'a>(Option<&'a RecordedSystem>);
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

    // The witness with the challenges in parts (each its own, and both in one), whatever
    // the threads.
    struct InParts<'a>(&'a RecordedSystem);
    impl PartitionWitnesses for InParts<'_> {
        type Output = ProvingAssignment;
        fn run<W: WitnessRun>(
            self,
            mut circuits: Vec<W>,
        ) -> wgpu_groth16_filecoin::Result<ProvingAssignment> {
            let pool = rayon::ThreadPoolBuilder::new().build().unwrap();
            Ok(self
                .0
                .products(circuits.remove(0).witness_of(self.0, &pool)?))
        }
    }
    for parts in [1, 2, 3] {
        let parted = commit
            .with_witness_circuits(parts, InParts(&matrices))
            .expect("witness in parts");
        assert!(parted == full, "{parts} parts differ from full synthesis");
    }
}

/// The matrices of the stack's blank partition circuit are those of the real one (recording
/// never calls the circuit's alloc closures); they are recorded and written once, then kept
/// in memory, then loaded from their file by another process' cache. Their size goes to the
/// plan that asks for it.
#[test]
fn the_blank_circuit_records_the_system_of_the_real_one_once() {
    use wgpu_groth16::recorded::Origin;
    use wgpu_groth16_filecoin::job::ProofJob;
    use wgpu_groth16_filecoin::recorded::{RecordedCache, SynthesisPath};

    let commit = commit();
    // The reference's parameters: their verifying key is the one another test writes to
    // the `.vk` file, which the key is read from once it is there.
    let prover = common::cpu_prover(&bellperson_reference().0);
    let dir = common::scratch().join("matrices-once");
    let cache = RecordedCache::in_folder(&dir);
    // Without the `.vk` file (until another test writes it) the key waits for the
    // parameters, and the plan is let go untold first: their loader waits for it.
    let had_vk = commit.recorded_key_from_vk_file().unwrap().is_some();
    let (plan, matrices) = std::sync::mpsc::channel();
    let (key, blank, path) = commit
        .recorded_system(&cache, &prover, Some(plan))
        .expect("recorded");
    match matrices.recv() {
        Ok(bytes) => assert_eq!(
            bytes,
            wgpu_groth16::sparse::MatrixBytes::of(&blank),
            "the plan told another size"
        ),
        Err(_) => assert!(
            !had_vk,
            "the plan was not told, though the .vk file gave the key"
        ),
    }
    let file = key.path_in(&dir);
    assert!(
        matches!(&path, SynthesisPath::Recorded { origin: Some(Origin::Recorded(Some(p))), .. } if *p == file),
        "{path}"
    );
    let real = commit.with_circuits(Record).expect("recorded");
    assert!(*blank == real, "the blank circuit records other matrices");
    let (_, _, path) = commit.recorded_system(&cache, &prover, None).expect("kept");
    assert!(
        matches!(path, SynthesisPath::Recorded { origin: None, .. }),
        "{path}"
    );
    let (_, loaded, path) = commit
        .recorded_system(&RecordedCache::in_folder(&dir), &prover, None)
        .expect("loaded");
    assert!(
        matches!(&path, SynthesisPath::Recorded { origin: Some(Origin::Loaded(p)), .. } if *p == file),
        "{path}"
    );
    assert!(*loaded == real);
    assert_eq!(key, commit.recorded_key(&prover).unwrap());
}

/// Matrices of another circuit under the partition's key (a stale or foreign file) are
/// refused by the witness check: full synthesis proves it, still equal to bellperson's, and
/// the cache goes straight to full synthesis afterwards.
#[test]
fn a_wrong_recorded_system_falls_back_to_full_synthesis_and_the_same_proof() {
    use wgpu_groth16::groth16::circuits::FilecoinLike;
    use wgpu_groth16::recorded::RecordedSystem;
    use wgpu_groth16_filecoin::job::proofs_to_bytes;
    use wgpu_groth16_filecoin::job::ProofJob;
    use wgpu_groth16_filecoin::recorded::{RecordedCache, SynthesisPath};

    let commit = commit();
    // The reference's parameters, for the same reason as above.
    let (params, expected) = bellperson_reference();
    let prover = common::cpu_prover(params);
    let dir = common::scratch().join("matrices-wrong");
    std::fs::create_dir_all(&dir).unwrap();
    let key = commit.recorded_key(&prover).expect("key");
    RecordedSystem::record(FilecoinLike::blank(10).unwrap())
        .unwrap()
        .write_to(&key.path_in(&dir), &key)
        .unwrap();
    let cache = RecordedCache::in_folder(&dir);
    let (rs, ss) = common::draw_rs_ss(&commit, SEED);
    let (proofs, path, _) = commit
        .prove_partitions_reporting(&prover, Some(&cache), &rs, &ss, &CancelToken::new())
        .expect("proved by full synthesis");
    assert!(
        matches!(&path, SynthesisPath::Full { why } if why.contains("differ")),
        "{path}"
    );
    assert!(proofs_to_bytes(&proofs).unwrap() == *expected);
    let err = commit.recorded_system(&cache, &prover, None).unwrap_err();
    assert!(err.to_string().contains("refused before"), "{err}");
}

/// The JSON's structure without its values: objects and their keys, arrays and their
/// lengths; every number 0.
fn shape_of(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Number(_) => Value::from(0),
        Value::Array(items) => Value::Array(items.iter().map(shape_of).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| (key.clone(), shape_of(field)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A benchmark-only C1 output (random vanilla proofs, no sector sealed) has a sealed one's
/// shape in every PoRep variant: partitions, challenges, Merkle paths, columns, labeling and
/// encoding parents; from it the stack's circuit records the real constraint system and
/// computes a witness. It is marked, refused where a sealed sector is needed, and its
/// vanilla proofs do not verify.
#[test]
fn a_benchmark_c1_output_has_the_shape_of_a_sealed_one() {
    use bellperson::Circuit;
    use blstrs::Scalar;
    use filecoin_proofs_api::RegisteredSealProof::{
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep, StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
    };
    use wgpu_groth16::groth16::synthesis::{synthesize, ProvingAssignment};
    use wgpu_groth16_filecoin::c1::C1Output;
    use wgpu_groth16_filecoin::job::PartitionCircuits;
    use wgpu_groth16_filecoin::sealing::benchmark_c1;

    struct Synthesize;
    impl PartitionCircuits for Synthesize {
        type Output = ProvingAssignment;
        fn run<C: Circuit<Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> wgpu_groth16_filecoin::Result<ProvingAssignment> {
            Ok(synthesize(circuits.remove(0))?)
        }
    }
    let others = [
        (StackedDrg2KiBV1_1_Feat_SyntheticPoRep, 41),
        (StackedDrg2KiBV1_2_Feat_NonInteractivePoRep, 42),
    ]
    .map(|(proof, seed)| common::seal_sector(proof, seed));
    for sealed in std::iter::once(common::sealed()).chain(&others) {
        let proof = sealed.phase1.registered_proof;
        let phase1 = benchmark_c1(proof, sealed.prover_id, sealed.sector_id, 9).unwrap();
        let json = |p| shape_of(&serde_json::to_value(p).unwrap());
        assert!(
            json(&phase1) == json(&sealed.phase1),
            "{proof:?}: not a sealed output's shape"
        );

        let marked = C1Output {
            phase1: phase1.clone(),
            wrapper: None,
            benchmark_only: true,
        };
        let read = C1Output::from_json(&marked.phase1_json().unwrap(), "test").unwrap();
        assert!(read.benchmark_only, "{proof:?}: the mark is read back");
        let err = read.require_sealed().unwrap_err();
        assert!(err.to_string().contains("benchmark-only"), "{err}");
        let unmarked = C1Output::from_json(&serde_json::to_vec(&phase1).unwrap(), "t").unwrap();
        assert!(!unmarked.benchmark_only && unmarked.require_sealed().is_ok());

        let bench = SealCommit::new(phase1, sealed.prover_id, sealed.sector_id)
            .expect("its replica id is this prover's and sector's");
        let err = bench.check_vanilla_proofs().unwrap_err();
        assert!(matches!(err, Error::C1Mismatch { .. }), "{err}");
        let real =
            SealCommit::new(sealed.phase1.clone(), sealed.prover_id, sealed.sector_id).unwrap();
        assert!(
            bench.with_circuits(Record).unwrap() == real.with_circuits(Record).unwrap(),
            "{proof:?}: another constraint system"
        );
        let witness = bench.with_circuits(Synthesize).expect("a witness");
        assert_eq!(
            witness.aux_assignment.len(),
            real.with_circuits(Synthesize).unwrap().aux_assignment.len()
        );
    }
}

/// Random-point parameters of the real circuit's shape: the blank circuit's system written
/// under the key their verifying key gives (where `c2` finds it) and equal to the real
/// circuit's, the parameters' counts that system's.
#[test]
fn random_point_parameters_come_with_the_circuits_recorded_system() {
    use wgpu_groth16::recorded::{RecordedKey, RecordedSystem};
    use wgpu_groth16_filecoin::sealing::random_point_parameters;

    let commit = commit();
    let dir = common::scratch().join("random-points");
    let made = random_point_parameters(common::PROOF, 5, Some(&dir)).unwrap();
    let key = RecordedKey::new(&commit.circuit_identity(), &made.params.vk).unwrap();
    let path = made.recorded_at.as_ref().expect("written");
    assert_eq!(*path, key.path_in(&dir));
    let system = RecordedSystem::read_from(path, &key).expect("read with the parameters' key");
    assert!(system == commit.with_circuits(Record).unwrap());
    assert_eq!(made.shape, system.shape());
    assert_eq!(made.matrices_bytes, system.bytes());
    let params = &made.params;
    assert_eq!(params.l.len(), made.shape.aux);
    assert_eq!(params.vk.ic.len(), made.shape.inputs);
    assert_eq!(
        params.h.len(),
        made.shape.constraints.next_power_of_two() - 1
    );
}

/// Two sectors back to back through one prover, both in flight: the first's proof is the
/// one bellperson makes with its r and s, the second's its own, in the order of the jobs.
#[test]
fn sectors_back_to_back_through_one_prover_equal_bellperson() {
    use wgpu_groth16_filecoin::job::{proofs_to_bytes, prove_back_to_back};
    use wgpu_groth16_filecoin::recorded::RecordedCache;

    let commit = commit();
    let (params, expected) = bellperson_reference();
    let prover = common::cpu_prover(params);
    let same = common::draw_rs_ss(&commit, SEED);
    let other = common::draw_rs_ss(&commit, SEED + 1);
    let sectors = [commit.clone(), commit];
    let cache = RecordedCache::in_folder(common::scratch().join("matrices-back-to-back"));
    let proved = prove_back_to_back(
        &sectors,
        &[same, other],
        &prover,
        Some(&cache),
        2,
        &CancelToken::new(),
    );
    let bytes: Vec<Vec<u8>> = proved
        .into_iter()
        .map(|p| proofs_to_bytes(&p.expect("proved").proofs).unwrap())
        .collect();
    assert!(bytes[0] == *expected);
    assert!(bytes[1] != *expected, "the second sector's own r and s");
}
