//! Winning and Window PoSt SNARKs from their vanilla proofs (what Curio sends: one bincode
//! `FallbackPoStSectorProof` per sector), equal to filecoin-proofs'
//! `generate_winning_post_with_vanilla` and `generate_single_window_post_with_vanilla` given
//! the same r and s: the same public inputs, the same partitioning of the vanilla proofs
//! (which checks them), the same circuits.

use filecoin_hashers::Hasher;
use filecoin_proofs::parameters::{window_post_setup_params, winning_post_setup_params};
use filecoin_proofs::types::{FallbackPoStSectorProof, MerkleTreeTrait, PoStConfig, PoStType};
use filecoin_proofs::{
    as_safe_commitment, partition_vanilla_proofs, single_partition_vanilla_proofs,
};
use filecoin_proofs_api::{ChallengeSeed, ProverId, RegisteredPoStProof};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::error::guarded;
use crate::job::{compound_circuits, PartitionCircuits, ProofJob};
use crate::params::ParamsFiles;
use crate::{Error, Result};

/// A PoSt to prove: one Winning PoSt, or one partition of a Window PoSt.
#[derive(Clone, Debug)]
pub struct PostJob {
    proof: RegisteredPoStProof,
    randomness: ChallengeSeed,
    prover_id: ProverId,
    /// bincode `FallbackPoStSectorProof`s, one per sector.
    vanilla_proofs: Vec<Vec<u8>>,
    /// The Window PoSt partition; `None` for Winning PoSt.
    partition: Option<usize>,
}

impl PostJob {
    pub fn winning(
        proof: RegisteredPoStProof,
        randomness: ChallengeSeed,
        prover_id: ProverId,
        vanilla_proofs: Vec<Vec<u8>>,
    ) -> Result<Self> {
        Self::new(
            proof,
            PoStType::Winning,
            randomness,
            prover_id,
            vanilla_proofs,
            None,
        )
    }

    pub fn window(
        proof: RegisteredPoStProof,
        randomness: ChallengeSeed,
        prover_id: ProverId,
        vanilla_proofs: Vec<Vec<u8>>,
        partition: usize,
    ) -> Result<Self> {
        Self::new(
            proof,
            PoStType::Window,
            randomness,
            prover_id,
            vanilla_proofs,
            Some(partition),
        )
    }

    fn new(
        proof: RegisteredPoStProof,
        kind: PoStType,
        randomness: ChallengeSeed,
        prover_id: ProverId,
        vanilla_proofs: Vec<Vec<u8>>,
        partition: Option<usize>,
    ) -> Result<Self> {
        if proof.typ() != kind {
            return Err(Error::Unsupported(format!(
                "{proof:?} is not a {kind:?} PoSt"
            )));
        }
        if vanilla_proofs.is_empty() {
            return Err(Error::Vanilla("no vanilla proofs".into()));
        }
        let job = PostJob {
            proof,
            randomness,
            prover_id,
            vanilla_proofs,
            partition,
        };
        // Decodes and partitions (which verifies) the vanilla proofs once, up front.
        guarded("the vanilla proofs", || job.with_circuits(Count))?;
        Ok(job)
    }

    fn config(&self) -> PoStConfig {
        self.proof.as_v1_config()
    }
}

/// Counts circuits without proving them.
pub(crate) struct Count;
impl PartitionCircuits for Count {
    type Output = usize;
    fn run<C: bellperson::Circuit<blstrs::Scalar> + Send>(self, circuits: Vec<C>) -> Result<usize> {
        Ok(circuits.len())
    }
}

impl ProofJob for PostJob {
    fn partitions(&self) -> usize {
        // Winning PoSt is one partition; a Window PoSt job is one of its partitions.
        1
    }

    fn params_files(&self) -> Result<ParamsFiles> {
        ParamsFiles::post(self.proof)
    }

    fn with_circuits<W: PartitionCircuits>(&self, work: W) -> Result<W::Output> {
        with_tree!(u64::from(self.proof.sector_size()), Tree => post_circuits::<Tree, W>(self, work))
    }

    /// The registered proof: it fixes the sector size, the sectors a circuit checks and
    /// their challenges.
    fn circuit_identity(&self) -> String {
        format!("{:?}", self.proof)
    }

    fn with_blank_circuit<W: PartitionCircuits>(&self, work: W) -> Result<W::Output> {
        with_tree!(u64::from(self.proof.sector_size()), Tree => post_blank::<Tree, W>(self, work))
    }
}

/// The public parameters of `config`'s PoSt in `partitions` partitions.
fn post_public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    partitions: Option<usize>,
) -> Result<compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>> {
    let vanilla_params = match config.typ {
        PoStType::Winning => winning_post_setup_params(config)?,
        PoStType::Window => window_post_setup_params(config),
    };
    Ok(FallbackPoStCompound::setup(&compound_proof::SetupParams {
        vanilla_params,
        partitions,
        priority: config.priority,
    })?)
}

/// Seeded Groth16 parameters of `proof`'s circuit (a setup of its blank circuit, so not the
/// ceremony's): for tests and benchmarks, as [`generate_parameters`](crate::sealing::generate_parameters)
/// is for seal proofs.
pub fn generate_post_parameters(
    proof: RegisteredPoStProof,
    seed: u64,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>> {
    fn generate<Tree: 'static + MerkleTreeTrait>(
        proof: RegisteredPoStProof,
        seed: u64,
    ) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>> {
        let public_params = post_public_params::<Tree>(&proof.as_v1_config(), None)?;
        let blank = FallbackPoStCompound::<Tree>::blank_circuit(&public_params.vanilla_params);
        let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(seed);
        Ok(
            bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(blank, &mut rng)
                .map_err(anyhow::Error::from)?,
        )
    }
    with_tree!(u64::from(proof.sector_size()), Tree => generate::<Tree>(proof, seed))
}

/// The Winning PoSt proof of `sector_size`-byte sectors.
pub fn winning_post_proof(sector_size: u64) -> Result<RegisteredPoStProof> {
    use RegisteredPoStProof as P;
    Ok(match sector_size {
        2048 => P::StackedDrgWinning2KiBV1,
        0x80_0000 => P::StackedDrgWinning8MiBV1,
        0x2000_0000 => P::StackedDrgWinning512MiBV1,
        0x8_0000_0000 => P::StackedDrgWinning32GiBV1,
        0x10_0000_0000 => P::StackedDrgWinning64GiBV1,
        other => {
            return Err(Error::Unsupported(format!(
                "no Winning PoSt for sectors of {other} bytes"
            )))
        }
    })
}

fn post_blank<Tree: 'static + MerkleTreeTrait, W: PartitionCircuits>(
    job: &PostJob,
    work: W,
) -> Result<W::Output> {
    let public_params = post_public_params::<Tree>(&job.config(), None)?;
    work.run(vec![FallbackPoStCompound::<Tree>::blank_circuit(
        &public_params.vanilla_params,
    )])
}

fn post_circuits<Tree: 'static + MerkleTreeTrait, W: PartitionCircuits>(
    job: &PostJob,
    work: W,
) -> Result<W::Output> {
    let config = job.config();
    let sectors: Vec<FallbackPoStSectorProof<Tree>> = job
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            bincode::deserialize(bytes).map_err(|e| {
                Error::Vanilla(format!(
                    "vanilla proof {i} is not a FallbackPoStSectorProof: {e}"
                ))
            })
        })
        .collect::<Result<_>>()?;
    let randomness: <Tree::Hasher as Hasher>::Domain =
        as_safe_commitment(&job.randomness, "randomness")?;
    let prover_id: <Tree::Hasher as Hasher>::Domain =
        as_safe_commitment(&job.prover_id, "prover_id")?;
    let partitions = match config.typ {
        PoStType::Winning => None,
        PoStType::Window => {
            let count = sectors.len().div_ceil(config.sector_count);
            (count > 1).then_some(count)
        }
    };
    let public_params = post_public_params::<Tree>(&config, partitions)?;
    let public_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: sectors
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect(),
        k: job.partition,
    };
    let vanilla = match job.partition {
        None => partition_vanilla_proofs(
            &config,
            &public_params.vanilla_params,
            &public_inputs,
            public_params.partitions.unwrap_or(1),
            &sectors,
        ),
        Some(_) => single_partition_vanilla_proofs(
            &config,
            &public_params.vanilla_params,
            &public_inputs,
            &sectors,
        )
        .map(|p| vec![p]),
    }
    .map_err(|e| Error::Vanilla(format!("{e:#}")))?;
    let circuits = compound_circuits::<_, FallbackPoStCircuit<Tree>, FallbackPoStCompound<Tree>>(
        &public_inputs,
        &vanilla,
        &public_params.vanilla_params,
    )?;
    work.run(circuits)
}
