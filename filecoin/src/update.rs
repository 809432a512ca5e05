//! SnapDeals (empty-sector update) SNARKs from their vanilla partition proofs (what Curio
//! sends: one bincode `PartitionProof` per partition), equal to filecoin-proofs'
//! `generate_empty_sector_update_proof_with_vanilla` given the same r and s.

use filecoin_hashers::Domain;
use filecoin_proofs::constants::DefaultPieceDomain;
use filecoin_proofs::types::{MerkleTreeTrait, SectorUpdateConfig};
use filecoin_proofs_api::{Commitment, RegisteredUpdateProof};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, SetupParams,
};

use crate::error::guarded;
use crate::job::{compound_circuits, PartitionCircuits, ProofJob};
use crate::params::ParamsFiles;
use crate::post::Count;
use crate::{Error, Result};

/// A sector update's proof to make.
#[derive(Clone, Debug)]
pub struct UpdateJob {
    proof: RegisteredUpdateProof,
    /// bincode `PartitionProof`s, one per partition.
    vanilla_proofs: Vec<Vec<u8>>,
    comm_r_old: Commitment,
    comm_r_new: Commitment,
    comm_d_new: Commitment,
}

impl UpdateJob {
    pub fn new(
        proof: RegisteredUpdateProof,
        vanilla_proofs: Vec<Vec<u8>>,
        comm_r_old: Commitment,
        comm_r_new: Commitment,
        comm_d_new: Commitment,
    ) -> Result<Self> {
        let job = UpdateJob {
            proof,
            vanilla_proofs,
            comm_r_old,
            comm_r_new,
            comm_d_new,
        };
        if job.vanilla_proofs.len() != job.partitions() {
            return Err(Error::Vanilla(format!(
                "{} vanilla partition proofs, {proof:?} has {} partitions",
                job.vanilla_proofs.len(),
                job.partitions()
            )));
        }
        // Decodes them and builds the partitions' circuits once, up front: malformed bytes
        // fail here, not in the middle of a proof.
        guarded("the vanilla partition proofs", || job.with_circuits(Count))?;
        Ok(job)
    }

    fn config(&self) -> SectorUpdateConfig {
        SectorUpdateConfig::from_porep_config(&self.proof.as_v1_config())
    }
}

impl ProofJob for UpdateJob {
    fn partitions(&self) -> usize {
        usize::from(self.config().update_partitions)
    }

    fn params_files(&self) -> Result<ParamsFiles> {
        ParamsFiles::update(self.proof)
    }

    fn with_circuits<W: PartitionCircuits>(&self, work: W) -> Result<W::Output> {
        with_tree!(u64::from(self.proof.sector_size()), Tree => update_circuits::<Tree, W>(self, work))
    }

    /// The registered proof: it fixes the sector size and the challenges.
    fn circuit_identity(&self) -> String {
        format!("{:?}", self.proof)
    }

    fn with_blank_circuit<W: PartitionCircuits>(&self, work: W) -> Result<W::Output> {
        with_tree!(u64::from(self.proof.sector_size()), Tree => update_blank::<Tree, W>(self, work))
    }
}

fn update_public_params<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    config: &SectorUpdateConfig,
) -> Result<compound_proof::PublicParams<'static, EmptySectorUpdate<Tree>>> {
    Ok(EmptySectorUpdateCompound::<Tree>::setup(
        &compound_proof::SetupParams {
            vanilla_params: SetupParams {
                sector_bytes: u64::from(config.sector_size),
            },
            partitions: Some(usize::from(config.update_partitions)),
            priority: false,
        },
    )?)
}

fn update_blank<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, W: PartitionCircuits>(
    job: &UpdateJob,
    work: W,
) -> Result<W::Output> {
    let public_params = update_public_params::<Tree>(&job.config())?;
    work.run(vec![EmptySectorUpdateCompound::<Tree>::blank_circuit(
        &public_params.vanilla_params,
    )])
}

fn update_circuits<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, W: PartitionCircuits>(
    job: &UpdateJob,
    work: W,
) -> Result<W::Output> {
    let config = job.config();
    let commitment = |bytes: &Commitment, name: &str| {
        <TreeRHasher as filecoin_hashers::Hasher>::Domain::try_from_bytes(bytes)
            .map_err(|e| Error::Vanilla(format!("{name} is not a field element: {e:#}")))
    };
    let public_inputs = PublicInputs {
        k: usize::from(config.update_partitions),
        comm_r_old: commitment(&job.comm_r_old, "comm_r_old")?,
        comm_d_new: DefaultPieceDomain::try_from_bytes(&job.comm_d_new)
            .map_err(|e| Error::Vanilla(format!("comm_d_new is not a field element: {e:#}")))?,
        comm_r_new: commitment(&job.comm_r_new, "comm_r_new")?,
        h: config.h,
    };
    let public_params = update_public_params::<Tree>(&config)?;
    let vanilla: Vec<PartitionProof<Tree>> = job
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, bytes)| {
            bincode::deserialize(bytes).map_err(|e| {
                Error::Vanilla(format!("vanilla proof {k} is not a PartitionProof: {e}"))
            })
        })
        .collect::<Result<_>>()?;
    let circuits = compound_circuits::<
        _,
        EmptySectorUpdateCircuit<Tree>,
        EmptySectorUpdateCompound<Tree>,
    >(&public_inputs, &vanilla, &public_params.vanilla_params)?;
    work.run(circuits)
}
