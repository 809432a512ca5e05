//! Sectors and parameters made here, for tests and benchmarks: a sector of seeded random
//! data sealed through filecoin-proofs-api's own add-piece, PC1, PC2 and C1 (a 2 KiB sector
//! takes well under a second; production sizes take hours and hundreds of GiB, so this is
//! not for them), and Groth16 parameters of a seal proof's circuit made with a seeded RNG
//! (a real setup of that circuit, not the ceremony's: ~161 s for 2 KiB on 16 cores).

use std::fs::{self, File};
use std::path::Path;

use bellperson::groth16::{generate_random_parameters, Parameters};
use blstrs::Bls12;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::parameters::public_params;
use filecoin_proofs::types::MerkleTreeTrait;
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::{
    PaddedBytesAmount, ProverId, RegisteredSealProof, SectorId, UnpaddedBytesAmount,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_porep::stacked::{StackedCompound, StackedDrg};

use crate::{Error, Result};

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
    // Field elements below the modulus, as the chain's randomness is.
    let mut randomness = || {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        bytes[31] &= 0x3f;
        bytes
    };
    let (ticket, challenge_seed) = (randomness(), randomness());
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
