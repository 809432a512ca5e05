//! PoRep C2: a sector's phase-1 output in, its seal proof out, equal to filecoin-proofs'
//! `seal_commit_phase2` given the same r and s.
//!
//! What the stack does there, and so what we do: build each partition's `StackedCircuit`
//! from its vanilla proofs (filecoin-proofs' own code), prove the partitions as one batch,
//! write the proofs concatenated (192 bytes each, bellperson's encoding) and check them
//! with `verify_seal` before returning them. Before any of it we also check what the
//! stack takes on trust: that the output is of its registered proof's sector size, was
//! made for this prover and sector (its replica id), and that its vanilla proofs hold
//! against its commitments; a bad C1 file then costs milliseconds, not a failed proof.

use std::convert::TryInto;

use bellperson::groth16::Proof;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::as_safe_commitment;
use filecoin_proofs::constants::{DefaultPieceDomain, DefaultPieceHasher};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::types::{MerkleTreeTrait, PoRepConfig, SealCommitOutput, VanillaSealProof};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{ApiFeature, ProverId, RegisteredSealProof, SectorId};
use rand_core::OsRng;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{
    self, generate_replica_id, StackedCircuit, StackedCompound, StackedDrg,
};
use wgpu_groth16::groth16::{CancelToken, ParamsShape, ProveReport, Prover};
use wgpu_groth16::recorded::CircuitParts;

use crate::error::{guarded, sector_size_name};
use crate::job::{
    compound_circuits, proofs_to_bytes, PartitionCircuits, PartitionWitnesses, ProofJob,
};
use crate::params::ParamsFiles;
use crate::recorded::{RecordedCache, SynthesisPath};
use crate::{Error, Result};

/// A phase-1 output checked against the prover and sector it is to be proved for.
#[derive(Clone, Debug)]
pub struct SealCommit {
    phase1: SealCommitPhase1Output,
    prover_id: ProverId,
    sector_id: SectorId,
}

impl SealCommit {
    /// Checks `phase1` for `prover_id` and `sector_id`: its registered proof is one we prove,
    /// its vanilla proofs are of that proof's sector size and partition count, its
    /// commitments and seed are set, and its replica id is the one of this prover, sector,
    /// ticket and data commitment.
    pub fn new(
        phase1: SealCommitPhase1Output,
        prover_id: ProverId,
        sector_id: SectorId,
    ) -> Result<Self> {
        let proof = phase1.registered_proof;
        if proof.major_version() != 1 {
            return Err(Error::Unsupported(format!("seal proof {proof:?}")));
        }
        for (name, value) in [
            ("comm_d", &phase1.comm_d),
            ("comm_r", &phase1.comm_r),
            ("seed", &phase1.seed),
        ] {
            if value.iter().all(|&b| b == 0) {
                return Err(Error::C1Mismatch {
                    what: "a sealed sector",
                    detail: format!("its {name} is all zeros"),
                });
            }
        }
        let commit = SealCommit {
            phase1,
            prover_id,
            sector_id,
        };
        guarded(
            "its vanilla proofs",
            || with_tree!(commit.sector_size(), Tree => check_shape::<Tree>(&commit)),
        )?;
        Ok(commit)
    }

    pub fn registered_proof(&self) -> RegisteredSealProof {
        self.phase1.registered_proof
    }

    pub fn sector_size(&self) -> u64 {
        u64::from(self.registered_proof().sector_size())
    }

    pub fn sector_id(&self) -> SectorId {
        self.sector_id
    }

    pub fn prover_id(&self) -> ProverId {
        self.prover_id
    }

    pub fn phase1(&self) -> &SealCommitPhase1Output {
        &self.phase1
    }

    fn config(&self) -> PoRepConfig {
        self.registered_proof().as_v1_config()
    }

    fn non_interactive(&self) -> bool {
        self.config()
            .feature_enabled(ApiFeature::NonInteractivePoRep)
    }

    /// Verifies the vanilla proofs against the output's commitments, as the chain's
    /// verifier would check the partitions' statements (milliseconds for 2 KiB).
    pub fn check_vanilla_proofs(&self) -> Result<()> {
        guarded(
            "its vanilla proofs",
            || with_tree!(self.sector_size(), Tree => check_vanilla::<Tree>(self)),
        )
    }

    /// Public inputs of each partition's statement (without the leading ONE).
    pub fn public_input_count(&self) -> Result<usize> {
        with_tree!(self.sector_size(), Tree => public_input_count::<Tree>(self))
    }

    /// Refuses parameters whose counts cannot be this proof's: their verifying key must have
    /// one point per public input and one for ONE. Milliseconds, before anything is decoded.
    pub fn check_params_shape(&self, files: &ParamsFiles, shape: &ParamsShape) -> Result<()> {
        let expected = self.public_input_count()? + 1;
        if shape.ic != expected {
            return Err(files.wrong(
                &files.params,
                format!(
                    "its verifying key has {} input points, this proof's circuit {expected}",
                    shape.ic
                ),
            ));
        }
        Ok(())
    }

    /// What `seal_commit_phase2` returns for these partition proofs: the proofs
    /// concatenated, or for non-interactive PoRep their aggregate (the stack's own
    /// SnarkPack code, with its SRS from the parameter cache).
    pub fn proof_bytes(&self, proofs: &[Proof<Bls12>]) -> Result<Vec<u8>> {
        let bytes = proofs_to_bytes(proofs)?;
        if !self.non_interactive() {
            return Ok(bytes);
        }
        with_tree!(self.sector_size(), Tree => aggregate::<Tree>(self, bytes))
    }

    /// filecoin-proofs' `verify_seal` on `proof`, which must accept it. The verifying key
    /// must be in the parameter cache (the stack would otherwise derive it from the
    /// proving parameters and write it there).
    pub fn verify(&self, proof: &[u8]) -> Result<()> {
        ParamsFiles::seal(self.registered_proof())?.check_verifying_key()?;
        let p = &self.phase1;
        let verdict = filecoin_proofs_api::seal::verify_seal(
            p.registered_proof,
            p.comm_r,
            p.comm_d,
            self.prover_id,
            self.sector_id,
            p.ticket,
            p.seed,
            proof,
        );
        let sector = u64::from(self.sector_id);
        match verdict {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::Verification {
                sector,
                detail: String::new(),
            }),
            Err(e) => Err(Error::Verification {
                sector,
                detail: format!(": {e:#}"),
            }),
        }
    }
}

impl ProofJob for SealCommit {
    fn partitions(&self) -> usize {
        usize::from(self.registered_proof().partitions())
    }

    fn params_files(&self) -> Result<ParamsFiles> {
        ParamsFiles::seal(self.registered_proof())
    }

    /// filecoin-proofs' `StackedCompound::circuit` of each partition.
    fn with_circuits<W: PartitionCircuits>(&self, work: W) -> Result<W::Output> {
        with_tree!(self.sector_size(), Tree => run_on_circuits::<Tree, W>(self, work))
    }

    /// The registered proof and its PoRep id, which fix the sector size, the challenges and
    /// the graph the circuit checks.
    fn circuit_identity(&self) -> String {
        format!(
            "{:?} porep-id {}",
            self.registered_proof(),
            hex(&self.config().porep_id)
        )
    }

    fn with_blank_circuit<W: PartitionCircuits>(&self, work: W) -> Result<W::Output> {
        with_tree!(self.sector_size(), Tree => run_on_blank::<Tree, W>(self, work))
    }

    /// Each partition's challenges in groups, every group a part (`StackedPart`).
    fn with_witness_circuits<W: PartitionWitnesses>(
        &self,
        parts: usize,
        work: W,
    ) -> Result<W::Output> {
        with_tree!(self.sector_size(), Tree => run_on_parts::<Tree, W>(self, parts, work))
    }
}

/// C2 as filecoin-proofs does it, with r and s from the operating system: check the C1
/// output, prove its partitions with `prover` (holding this proof's parameters), and
/// return the proof bytes only once `verify_seal` accepts them.
pub fn seal_commit_phase2(commit: &SealCommit, prover: &Prover) -> Result<Vec<u8>> {
    let never = CancelToken::new();
    Ok(seal_commit_phase2_reporting(commit, prover, RecordedCache::by_default(), &never)?.0)
}

/// [`seal_commit_phase2`] with the recorded constraint systems of `recorded` (full
/// synthesis without), how the partitions were synthesized, and the time each step took (summed over
/// the partitions); stopped between partitions once `cancel` is cancelled.
pub fn seal_commit_phase2_reporting(
    commit: &SealCommit,
    prover: &Prover,
    recorded: Option<&RecordedCache>,
    cancel: &CancelToken,
) -> Result<(Vec<u8>, SynthesisPath, ProveReport)> {
    commit.check_vanilla_proofs()?;
    let draw = || -> Vec<Scalar> {
        (0..commit.partitions())
            .map(|_| Scalar::random(OsRng))
            .collect()
    };
    let (rs, ss) = (draw(), draw());
    let (proofs, path, report) =
        commit.prove_partitions_reporting(prover, recorded, &rs, &ss, cancel)?;
    let bytes = commit.proof_bytes(&proofs)?;
    commit.verify(&bytes)?;
    Ok((bytes, path, report))
}

/// The statement's public inputs, as the stack builds them in `seal_commit_phase2`.
fn public_inputs<Tree: 'static + MerkleTreeTrait>(
    commit: &SealCommit,
) -> Result<
    stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <DefaultPieceHasher as Hasher>::Domain>,
> {
    let p = &commit.phase1;
    let comm_r = as_safe_commitment(&p.comm_r, "comm_r")?;
    let comm_d = DefaultPieceDomain::try_from_bytes(&p.comm_d)?;
    let replica_id: Scalar = p.replica_id.into();
    Ok(stacked::PublicInputs {
        replica_id: replica_id.into(),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(p.seed),
    })
}

fn compound_params<Tree: 'static + MerkleTreeTrait>(
    commit: &SealCommit,
) -> Result<compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>> {
    let config = commit.config();
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(&config)?,
        partitions: Some(commit.partitions()),
        priority: false,
    };
    Ok(
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::setup(&setup)?,
    )
}

fn vanilla_proofs<Tree: 'static + MerkleTreeTrait>(
    commit: &SealCommit,
) -> Result<Vec<Vec<VanillaSealProof<Tree>>>> {
    commit
        .phase1
        .vanilla_proofs
        .clone()
        .try_into()
        .map_err(|e: anyhow::Error| Error::C1Mismatch {
            what: "its registered proof",
            detail: format!(
                "its vanilla proofs are not of a {} sector ({:?}): {e:#}",
                sector_size_name(commit.sector_size()),
                commit.registered_proof()
            ),
        })
}

/// The sector size the vanilla proofs' own variant names (several sizes share a tree type,
/// so the conversion to the tree type does not tell them apart).
fn vanilla_sector_size(proofs: &filecoin_proofs_api::seal::VanillaSealProof) -> u64 {
    use filecoin_proofs::constants as sizes;
    use filecoin_proofs_api::seal::VanillaSealProof as V;
    match proofs {
        V::StackedDrg2KiBV1(_) => sizes::SECTOR_SIZE_2_KIB,
        V::StackedDrg8MiBV1(_) => sizes::SECTOR_SIZE_8_MIB,
        V::StackedDrg512MiBV1(_) => sizes::SECTOR_SIZE_512_MIB,
        V::StackedDrg32GiBV1(_) => sizes::SECTOR_SIZE_32_GIB,
        V::StackedDrg64GiBV1(_) => sizes::SECTOR_SIZE_64_GIB,
    }
}

fn check_shape<Tree: 'static + MerkleTreeTrait>(commit: &SealCommit) -> Result<()> {
    let size = vanilla_sector_size(&commit.phase1.vanilla_proofs);
    if size != commit.sector_size() {
        return Err(Error::C1Mismatch {
            what: "its registered proof",
            detail: format!(
                "its vanilla proofs are of a {} sector, {:?} is of {}",
                sector_size_name(size),
                commit.registered_proof(),
                sector_size_name(commit.sector_size())
            ),
        });
    }
    let proofs = vanilla_proofs::<Tree>(commit)?;
    if proofs.len() != commit.partitions() || proofs.iter().any(Vec::is_empty) {
        return Err(Error::C1Mismatch {
            what: "its registered proof",
            detail: format!(
                "{} partitions of vanilla proofs ({} empty), {:?} has {}",
                proofs.len(),
                proofs.iter().filter(|p| p.is_empty()).count(),
                commit.registered_proof(),
                commit.partitions()
            ),
        });
    }
    let p = &commit.phase1;
    let expected = generate_replica_id::<Tree::Hasher, _>(
        &commit.prover_id,
        u64::from(commit.sector_id),
        &p.ticket,
        p.comm_d,
        &commit.config().porep_id,
    );
    let replica_id: Scalar = p.replica_id.into();
    let expected: Scalar = expected.into();
    if replica_id != expected {
        return Err(Error::C1Mismatch {
            what: "the prover id and sector id given",
            detail: format!(
                "its replica id was not made for sector {} of prover {} with {:?}",
                u64::from(commit.sector_id),
                hex(&commit.prover_id),
                commit.registered_proof()
            ),
        });
    }
    Ok(())
}

fn check_vanilla<Tree: 'static + MerkleTreeTrait>(commit: &SealCommit) -> Result<()> {
    let params = compound_params::<Tree>(commit)?;
    let inputs = public_inputs::<Tree>(commit)?;
    let proofs = vanilla_proofs::<Tree>(commit)?;
    let valid = StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
        &params.vanilla_params,
        &inputs,
        &proofs,
    )
    .map_err(|e| Error::C1Mismatch {
        what: "its commitments",
        detail: format!("its vanilla proofs cannot be checked: {e:#}"),
    })?;
    if !valid {
        return Err(Error::C1Mismatch {
            what: "its commitments",
            detail: "its vanilla proofs do not verify against comm_r, comm_d and the seed".into(),
        });
    }
    Ok(())
}

fn public_input_count<Tree: 'static + MerkleTreeTrait>(commit: &SealCommit) -> Result<usize> {
    let params = compound_params::<Tree>(commit)?;
    let inputs = public_inputs::<Tree>(commit)?;
    Ok(
        StackedCompound::<Tree, DefaultPieceHasher>::generate_public_inputs(
            &inputs,
            &params.vanilla_params,
            Some(0),
        )?
        .len(),
    )
}

fn run_on_circuits<Tree: 'static + MerkleTreeTrait, W: PartitionCircuits>(
    commit: &SealCommit,
    work: W,
) -> Result<W::Output> {
    let params = compound_params::<Tree>(commit)?;
    let inputs = public_inputs::<Tree>(commit)?;
    let proofs = vanilla_proofs::<Tree>(commit)?;
    let circuits = compound_circuits::<
        _,
        StackedCircuit<Tree, DefaultPieceHasher>,
        StackedCompound<Tree, DefaultPieceHasher>,
    >(&inputs, &proofs, &params.vanilla_params)?;
    work.run(circuits)
}

/// A partition's circuit on some of its challenges, through the stack's own
/// `StackedCircuit::synthesize`: on none, the allocations every challenge reads (replica id
/// and commitments, the prefix of [`CircuitParts`]); on all, what `StackedCompound::circuit`
/// builds. The challenges only read what the prefix allocates, so a partition's witness is
/// the prefix's, then each group's own, in challenge order.
struct StackedPart<Tree: 'static + MerkleTreeTrait> {
    replica_id: <Tree::Hasher as Hasher>::Domain,
    comm_d: DefaultPieceDomain,
    comm_r: <Tree::Hasher as Hasher>::Domain,
    comm_r_last: <Tree::Hasher as Hasher>::Domain,
    comm_c: <Tree::Hasher as Hasher>::Domain,
    challenges: Vec<VanillaSealProof<Tree>>,
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for StackedPart<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> std::result::Result<(), SynthesisError> {
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            Some(self.replica_id),
            Some(self.comm_d),
            Some(self.comm_r),
            Some(self.comm_r_last),
            Some(self.comm_c),
            // The circuit's own challenge type, converted as `StackedCompound::circuit` does.
            self.challenges.into_iter().map(Into::into).collect(),
        )
    }
}

fn run_on_parts<Tree: 'static + MerkleTreeTrait, W: PartitionWitnesses>(
    commit: &SealCommit,
    parts: usize,
    work: W,
) -> Result<W::Output> {
    let inputs = public_inputs::<Tree>(commit)?;
    let tau = inputs.tau.as_ref().ok_or_else(|| Error::C1Mismatch {
        what: "its commitments",
        detail: "comm_d and comm_r are not set".into(),
    })?;
    let circuits = vanilla_proofs::<Tree>(commit)?
        .into_iter()
        .map(|challenges| {
            let first = challenges.first().ok_or_else(|| Error::C1Mismatch {
                what: "its registered proof",
                detail: "a partition has no vanilla proofs".into(),
            })?;
            let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
            if challenges
                .iter()
                .any(|p| p.comm_r_last() != comm_r_last || p.comm_c() != comm_c)
            {
                return Err(Error::C1Mismatch {
                    what: "its vanilla proofs",
                    detail: "a partition's challenges disagree on comm_r_last or comm_c".into(),
                });
            }
            let part = |challenges| StackedPart::<Tree> {
                replica_id: inputs.replica_id,
                comm_d: tau.comm_d,
                comm_r: tau.comm_r,
                comm_r_last,
                comm_c,
                challenges,
            };
            let count = challenges.len();
            let groups = parts.clamp(1, count);
            let mut challenges = challenges.into_iter();
            Ok(CircuitParts {
                prefix: part(Vec::new()),
                parts: (0..groups)
                    .map(|k| {
                        let size = count * (k + 1) / groups - count * k / groups;
                        part(challenges.by_ref().take(size).collect())
                    })
                    .collect(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    work.run(circuits)
}

fn run_on_blank<Tree: 'static + MerkleTreeTrait, W: PartitionCircuits>(
    commit: &SealCommit,
    work: W,
) -> Result<W::Output> {
    let params = compound_params::<Tree>(commit)?;
    let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::blank_circuit(&params.vanilla_params);
    work.run(vec![blank])
}

fn aggregate<Tree: 'static + MerkleTreeTrait>(
    commit: &SealCommit,
    proofs: Vec<u8>,
) -> Result<Vec<u8>> {
    ParamsFiles::seal(commit.registered_proof())?.check_present()?;
    Ok(filecoin_proofs::aggregate_seal_commit_proofs::<Tree>(
        &commit.config(),
        &[commit.phase1.comm_r],
        &[commit.phase1.seed],
        &[SealCommitOutput { proof: proofs }],
        bellperson::groth16::aggregate::AggregateVersion::V2,
    )?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
