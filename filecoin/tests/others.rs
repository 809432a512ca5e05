//! Beyond PoRep: Winning PoSt, a Window PoSt partition and a SnapDeals update of a real 2 KiB
//! sector, from vanilla proofs made here with filecoin-proofs-api (as Curio makes them), proved
//! through our prover on the CPU and the GPU (lavapipe in CI): each equal byte for byte to
//! bellperson's `create_proof_batch` on the same circuits (filecoin-proofs' own), parameters
//! of the right shape (random points) and r, s.

mod common;

use common::{post_vanilla, randomness};
use filecoin_proofs_api::seal::add_piece;
use filecoin_proofs_api::update::{empty_sector_update_encode_into, generate_partition_proofs};
use filecoin_proofs_api::{
    PaddedBytesAmount, RegisteredPoStProof, RegisteredUpdateProof, UnpaddedBytesAmount,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use wgpu_groth16_filecoin::post::PostJob;
use wgpu_groth16_filecoin::update::UpdateJob;
use wgpu_groth16_filecoin::Error;

#[test]
fn winning_post_equals_bellperson() {
    let proof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
    let randomness = randomness(21);
    let vanilla = post_vanilla(proof, &randomness);
    let job =
        PostJob::winning(proof, randomness, common::sealed().prover_id, vanilla).expect("job");
    common::assert_equal_to_bellperson(&job, 21);
}

#[test]
fn a_window_post_partition_equals_bellperson() {
    let proof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
    let randomness = randomness(22);
    let vanilla = post_vanilla(proof, &randomness);
    let job =
        PostJob::window(proof, randomness, common::sealed().prover_id, vanilla, 0).expect("job");
    common::assert_equal_to_bellperson(&job, 22);
}

#[test]
fn post_vanilla_proofs_for_other_randomness_are_refused() {
    let proof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
    let vanilla = post_vanilla(proof, &randomness(23));
    let err =
        PostJob::winning(proof, randomness(24), common::sealed().prover_id, vanilla).unwrap_err();
    assert!(matches!(err, Error::Vanilla(_)), "{err}");
    let err = PostJob::winning(
        proof,
        randomness(24),
        common::sealed().prover_id,
        vec![vec![1, 2, 3]],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("not a FallbackPoStSectorProof"),
        "{err}"
    );
}

#[test]
fn a_snapdeals_update_equals_bellperson() {
    let proof = RegisteredUpdateProof::StackedDrg2KiBV1;
    let sealed = common::sealed();
    let dir = common::scratch().join("update");
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    let size = u64::from(proof.sector_size());
    let piece_len = UnpaddedBytesAmount::from(PaddedBytesAmount(size));
    let mut data = vec![0u8; u64::from(piece_len) as usize];
    ChaCha20Rng::seed_from_u64(31).fill_bytes(&mut data);
    let (staged, replica) = (dir.join("staged"), dir.join("replica"));
    let (piece, _) = add_piece(
        common::PROOF,
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
    let job = UpdateJob::new(
        proof,
        vanilla.into_iter().map(|p| p.0).collect(),
        sealed.phase1.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
    )
    .expect("job");
    common::assert_equal_to_bellperson(&job, 31);
}
