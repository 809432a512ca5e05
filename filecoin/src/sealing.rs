//! Sectors and parameters made here, for tests and benchmarks: a sector of seeded random
//! data sealed through filecoin-proofs-api's own add-piece, PC1, PC2 and C1 (a 2 KiB sector
//! takes well under a second; production sizes take hours and hundreds of GiB, so this is
//! not for them), and Groth16 parameters of a seal proof's circuit made with a seeded RNG
//! (a real setup of that circuit, not the ceremony's: ~161 s for 2 KiB on 16 cores).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bellperson::groth16::{generate_random_parameters, Parameters};
use bellperson::Circuit;
use blstrs::Bls12;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::parameters::public_params;
use filecoin_proofs::types::MerkleTreeTrait;
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::{
    PaddedBytesAmount, ProverId, RegisteredSealProof, SectorId, UnpaddedBytesAmount,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{base_path_length, MerkleProof};
use storage_proofs_porep::stacked::{
    self, generate_replica_id, Column, ColumnProof, EncodingProof, LabelingProof, StackedCompound,
    StackedDrg, TOTAL_PARENTS,
};

use wgpu_groth16::groth16::ProvingParameters;
use wgpu_groth16::recorded::{default_recorded_dir, RecordedKey, RecordedSystem, Shape};

use crate::job::{PartitionCircuits, ProofJob};
use crate::{Error, Result, SealCommit};

/// 32 random bytes that are a field element below the modulus, as the chain's randomness
/// (tickets, seeds) is.
fn randomness(rng: &mut ChaCha20Rng) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    bytes[31] &= 0x3f;
    bytes
}

/// Seals a sector of `proof`'s size filled from `seed` in `dir` (which it fills with the
/// sector's files) for `prover_id` and `sector_id`, and returns its C1 output.
pub fn seal_random_sector(
    proof: RegisteredSealProof,
    dir: &Path,
    prover_id: ProverId,
    sector_id: SectorId,
    seed: u64,
) -> Result<SealCommitPhase1Output> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let cache = dir.join("cache");
    fs::create_dir_all(&cache).map_err(io(&cache))?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let piece_len = UnpaddedBytesAmount::from(PaddedBytesAmount(u64::from(proof.sector_size())));
    let mut data = vec![0u8; u64::from(piece_len) as usize];
    rng.fill_bytes(&mut data);
    let (ticket, challenge_seed) = (randomness(&mut rng), randomness(&mut rng));
    let (staged, sealed) = (dir.join("staged"), dir.join("sealed"));
    let staged_file = File::create(&staged).map_err(io(&staged))?;
    let (piece, _) = seal::add_piece(proof, &data[..], staged_file, piece_len, &[])?;
    File::create(&sealed).map_err(io(&sealed))?;
    let pieces = [piece];
    let pc1 = seal::seal_pre_commit_phase1(
        proof, &cache, &staged, &sealed, prover_id, sector_id, ticket, &pieces,
    )?;
    let pc2 = seal::seal_pre_commit_phase2(pc1, &cache, &sealed)?;
    // Synthetic PoRep proves challenges drawn before the seed, saved here for C1 to read.
    let synthetic = proof
        .as_v1_config()
        .feature_enabled(filecoin_proofs_api::ApiFeature::SyntheticPoRep);
    if synthetic {
        seal::generate_synth_proofs(
            &cache,
            &sealed,
            prover_id,
            sector_id,
            ticket,
            pc2.clone(),
            &pieces,
        )?;
    }
    Ok(seal::seal_commit_phase1(
        &cache,
        &sealed,
        prover_id,
        sector_id,
        ticket,
        challenge_seed,
        pc2,
        &pieces,
    )?)
}

/// Groth16 parameters of `proof`'s partition circuit from a seeded RNG: bellperson's
/// generator on filecoin-proofs' blank circuit, as the stack makes parameters it lacks.
pub fn generate_parameters(proof: RegisteredSealProof, seed: u64) -> Result<Parameters<Bls12>> {
    fn generate<Tree: 'static + MerkleTreeTrait>(
        proof: RegisteredSealProof,
        seed: u64,
    ) -> Result<Parameters<Bls12>> {
        let vanilla = public_params::<Tree>(&proof.as_v1_config())?;
        let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::blank_circuit(&vanilla);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        Ok(generate_random_parameters::<Bls12, _, _>(blank, &mut rng)
            .map_err(anyhow::Error::from)?)
    }
    with_tree!(u64::from(proof.sector_size()), Tree => generate::<Tree>(proof, seed))
}

/// The PoSt vanilla proof (bincode, as Curio sends it: one sector's) of `proof` for the
/// challenges of `randomness`, of the sector that [`seal_random_sector`] sealed into `dir`
/// with replica commitment `comm_r`.
pub fn post_vanilla(
    proof: filecoin_proofs_api::RegisteredPoStProof,
    dir: &Path,
    comm_r: filecoin_proofs_api::Commitment,
    prover_id: ProverId,
    sector_id: SectorId,
    randomness: &filecoin_proofs_api::ChallengeSeed,
) -> Result<Vec<u8>> {
    use filecoin_proofs_api::post::{
        generate_fallback_sector_challenges, generate_single_vanilla_proof,
    };
    let replica = filecoin_proofs_api::PrivateReplicaInfo::new(
        proof,
        comm_r,
        dir.join("cache"),
        dir.join("sealed"),
    );
    let challenges =
        generate_fallback_sector_challenges(proof, randomness, &[sector_id], prover_id)?;
    let ours = challenges.get(&sector_id).ok_or_else(|| {
        Error::Unsupported(format!(
            "no PoSt challenges for sector {}",
            u64::from(sector_id)
        ))
    })?;
    Ok(generate_single_vanilla_proof(
        proof, sector_id, &replica, ours,
    )?)
}

/// What a benchmark-only C1 output says of itself, beside its `SealCommitPhase1Output`
/// fields (which filecoin-proofs reads without it): `c2` refuses such an output unless told
/// it is a benchmark.
pub const BENCHMARK_ONLY: &str = "random vanilla proofs of this seal proof's shape, for \
    benchmarks: their constraints do not hold and no proof of them verifies";

/// A C1 output of `proof`'s real shape without sealing a sector: every partition's vanilla
/// proofs (the challenges the stack derives, Merkle paths of its trees' arities and depths,
/// columns of every layer, labeling and encoding proofs with their parents) filled from
/// `seed`, so that the stack's own circuit synthesizes a production-size partition from it.
/// The commitments are random and the replica id is the one of `prover_id`, `sector_id`,
/// the ticket and `comm_d`, so [`SealCommit`] takes it; its vanilla proofs
/// do not verify, and neither does a proof of them. A 32 GiB sector's takes seconds where
/// sealing it takes hours and hundreds of GiB.
pub fn benchmark_c1(
    proof: RegisteredSealProof,
    prover_id: ProverId,
    sector_id: SectorId,
    seed: u64,
) -> Result<SealCommitPhase1Output> {
    with_tree!(u64::from(proof.sector_size()), Tree => {
        benchmark_c1_of::<Tree>(proof, prover_id, sector_id, seed)
    })
}

type RawProof<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;

fn benchmark_c1_of<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
    prover_id: ProverId,
    sector_id: SectorId,
    seed: u64,
) -> Result<SealCommitPhase1Output> {
    let config = proof.as_v1_config();
    let vanilla = public_params::<Tree>(&config)?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (ticket, challenge_seed) = (randomness(&mut rng), randomness(&mut rng));
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0xc1);
    let comm_d = <DefaultPieceHasher as Hasher>::Domain::random(&mut rng);
    let comm_r = <Tree::Hasher as Hasher>::Domain::random(&mut rng);
    let comm_d_bytes: [u8; 32] = commitment(&comm_d);
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        u64::from(sector_id),
        &ticket,
        comm_d_bytes,
        &config.porep_id,
    );
    let inputs = stacked::PublicInputs {
        replica_id,
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(challenge_seed),
    };
    let nodes = u64::from(proof.sector_size()) as usize / 32;
    // Every proof opens the same trees: one root each.
    let roots = Roots::<Tree> {
        comm_d,
        comm_c: Domain::random(&mut rng),
        comm_r_last: Domain::random(&mut rng),
    };
    let partitions = usize::from(config.partitions);
    let proofs = (0..partitions)
        .map(|k| {
            inputs
                .challenges(&vanilla.challenges, nodes, Some(k))
                .into_iter()
                .map(|challenge| random_proof(&vanilla, &roots, nodes, challenge, &mut rng))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SealCommitPhase1Output {
        registered_proof: proof,
        vanilla_proofs: api_vanilla_proofs::<Tree>(proofs)?,
        comm_r: commitment(&comm_r),
        comm_d: comm_d_bytes,
        replica_id: Into::<blstrs::Scalar>::into(replica_id).into(),
        seed: challenge_seed,
        ticket,
    })
}

/// A domain element's 32 bytes, as C1 outputs hold commitments.
fn commitment<D: Domain>(value: &D) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes.copy_from_slice(value.as_ref());
    bytes
}

struct Roots<Tree: MerkleTreeTrait> {
    comm_d: <DefaultPieceHasher as Hasher>::Domain,
    comm_c: <Tree::Hasher as Hasher>::Domain,
    comm_r_last: <Tree::Hasher as Hasher>::Domain,
}

/// One challenge's vanilla proof, its values random, its structure the stack's
/// (`StackedDrg::prove_layers`): the node's and its parents' columns, and labeling proofs
/// whose parents repeat to `TOTAL_PARENTS` as the stack repeats them.
fn random_proof<Tree: 'static + MerkleTreeTrait>(
    vanilla: &stacked::PublicParams<Tree>,
    roots: &Roots<Tree>,
    nodes: usize,
    challenge: usize,
    rng: &mut ChaCha20Rng,
) -> Result<RawProof<Tree>> {
    let graph = &vanilla.graph;
    let layers = vanilla.num_layers;
    let domains = |n: usize, rng: &mut ChaCha20Rng| -> Vec<<Tree::Hasher as Hasher>::Domain> {
        (0..n).map(|_| Domain::random(rng)).collect()
    };
    let binary_path = (0..nodes.trailing_zeros())
        .map(|level| {
            let sibling = <DefaultPieceHasher as Hasher>::Domain::random(rng);
            (vec![sibling], (challenge >> level) & 1)
        })
        .collect();
    let comm_d_proofs = MerkleProof::from_parts(Domain::random(rng), roots.comm_d, binary_path);
    let column = |node: usize, rng: &mut ChaCha20Rng| -> Result<_> {
        let rows = domains(layers, rng);
        let opening = tree_path::<Tree>(nodes, node, roots.comm_c, rng);
        Ok(ColumnProof::from_column(
            Column::new(node as u32, rows)?,
            opening,
        )?)
    };
    let mut drg = vec![0; graph.base_graph().degree()];
    graph.base_parents(challenge, &mut drg)?;
    let mut expanded = vec![0; graph.expansion_degree()];
    graph.expanded_parents(challenge, &mut expanded)?;
    let replica_column_proofs = stacked::ReplicaColumnProof {
        c_x: column(challenge, rng)?,
        drg_parents: drg
            .iter()
            .map(|&p| column(p as usize, rng))
            .collect::<Result<_>>()?,
        exp_parents: expanded
            .iter()
            .map(|&p| column(p as usize, rng))
            .collect::<Result<_>>()?,
    };
    let comm_r_last_proof = tree_path::<Tree>(nodes, challenge, roots.comm_r_last, rng);
    let mut labeling_proofs = Vec::with_capacity(layers);
    let mut last_parents = Vec::new();
    for layer in 1..=layers {
        let degree = match layer {
            1 => drg.len(),
            _ => drg.len() + expanded.len(),
        };
        let parents = domains(degree, rng);
        last_parents = parents
            .iter()
            .copied()
            .cycle()
            .take(TOTAL_PARENTS)
            .collect();
        labeling_proofs.push(LabelingProof::new(
            layer as u32,
            challenge as u64,
            last_parents.clone(),
        ));
    }
    Ok(stacked::Proof {
        comm_d_proofs,
        comm_r_last_proof,
        replica_column_proofs,
        labeling_proofs,
        encoding_proof: EncodingProof::new(layers as u32, challenge as u64, last_parents),
    })
}

/// An opening of `node` in a tree of `Tree`'s shape over `nodes` leaves, its values random:
/// one element a level of the base trees, then one of the sub-tree and top-tree levels
/// where the shape has them.
fn tree_path<Tree: MerkleTreeTrait>(
    nodes: usize,
    node: usize,
    root: <Tree::Hasher as Hasher>::Domain,
    rng: &mut ChaCha20Rng,
) -> MerkleProof<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> {
    use typenum::Unsigned;
    let base = base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let arities = std::iter::repeat_n(Tree::Arity::to_usize(), base)
        .chain([
            Tree::SubTreeArity::to_usize(),
            Tree::TopTreeArity::to_usize(),
        ])
        .filter(|&arity| arity > 0);
    let mut rest = node;
    let path = arities
        .map(|arity| {
            let siblings = (1..arity).map(|_| Domain::random(&mut *rng)).collect();
            let index = rest % arity;
            rest /= arity;
            (siblings, index)
        })
        .collect();
    MerkleProof::from_parts(Domain::random(rng), root, path)
}

/// The partitions' proofs as filecoin-proofs-api holds them: the variant of their tree.
fn api_vanilla_proofs<Tree: 'static + MerkleTreeTrait>(
    proofs: Vec<Vec<RawProof<Tree>>>,
) -> Result<VanillaSealProof> {
    use filecoin_proofs::constants::{
        SectorShape2KiB, SectorShape32GiB, SectorShape512MiB, SectorShape64GiB, SectorShape8MiB,
    };
    use std::any::Any;
    let proofs: Box<dyn Any> = Box::new(proofs);
    let proofs = match proofs.downcast::<Vec<Vec<RawProof<SectorShape2KiB>>>>() {
        Ok(p) => return Ok(VanillaSealProof::StackedDrg2KiBV1(*p)),
        Err(other) => other,
    };
    let proofs = match proofs.downcast::<Vec<Vec<RawProof<SectorShape8MiB>>>>() {
        Ok(p) => return Ok(VanillaSealProof::StackedDrg8MiBV1(*p)),
        Err(other) => other,
    };
    let proofs = match proofs.downcast::<Vec<Vec<RawProof<SectorShape512MiB>>>>() {
        Ok(p) => return Ok(VanillaSealProof::StackedDrg512MiBV1(*p)),
        Err(other) => other,
    };
    let proofs = match proofs.downcast::<Vec<Vec<RawProof<SectorShape32GiB>>>>() {
        Ok(p) => return Ok(VanillaSealProof::StackedDrg32GiBV1(*p)),
        Err(other) => other,
    };
    match proofs.downcast::<Vec<Vec<RawProof<SectorShape64GiB>>>>() {
        Ok(p) => Ok(VanillaSealProof::StackedDrg64GiBV1(*p)),
        Err(_) => Err(Error::Unsupported(
            "a tree of no registered sector size".into(),
        )),
    }
}

/// Random-point parameters of a seal proof's circuit ([`random_point_parameters`]) and how
/// they were made.
pub struct RandomPointParameters {
    pub params: ProvingParameters,
    /// The partition circuit's size.
    pub shape: Shape,
    /// Recording the blank circuit took this long.
    pub recording: Duration,
    /// Bytes of the recorded constraint matrices.
    pub matrices_bytes: usize,
    /// Where the recorded system was written for `c2` (none without a cache folder).
    pub recorded_at: Option<PathBuf>,
}

/// Parameters of the shape of `proof`'s partition circuit with random points
/// ([`ProvingParameters::random_for_shape`]): for benchmarks at production sizes, where a
/// setup of the real circuit takes hours and more memory than a machine has. Their proofs
/// do not verify. The blank circuit is recorded first; its system is written to the
/// recorded cache under the key these parameters give it (`recorded_dir`, or the user's
/// cache), so `c2` does not record it again, and let go before the points are made.
pub fn random_point_parameters(
    proof: RegisteredSealProof,
    seed: u64,
    recorded_dir: Option<&Path>,
) -> Result<RandomPointParameters> {
    struct Record;
    impl PartitionCircuits for Record {
        type Output = RecordedSystem;
        fn run<C: Circuit<blstrs::Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> Result<Self::Output> {
            let circuit = circuits.pop().ok_or_else(|| {
                Error::Unsupported("a seal proof without a partition circuit".into())
            })?;
            Ok(RecordedSystem::record(circuit)?)
        }
    }
    // Any sector's job names the same circuit.
    let (prover_id, sector_id) = ([0; 32], SectorId::from(0));
    let commit = SealCommit::new(
        benchmark_c1(proof, prover_id, sector_id, seed)?,
        prover_id,
        sector_id,
    )?;
    let start = Instant::now();
    let system = commit.with_blank_circuit(Record)?;
    let recording = start.elapsed();
    let shape = system.shape();
    let key = RecordedKey::new(
        &commit.circuit_identity(),
        &ProvingParameters::random_verifying_key(&shape, seed),
    )?;
    let recorded_at = recorded_dir
        .map(Path::to_path_buf)
        .or_else(default_recorded_dir)
        .map(|dir| key.path_in(&dir));
    if let Some(path) = &recorded_at {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        system.write_to(path, &key)?;
    }
    let matrices_bytes = system.bytes();
    drop(system);
    Ok(RandomPointParameters {
        params: ProvingParameters::random_for_shape(&shape, seed),
        shape,
        recording,
        matrices_bytes,
        recorded_at,
    })
}
