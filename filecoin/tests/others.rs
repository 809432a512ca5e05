//! Beyond PoRep: Winning PoSt, a Window PoSt partition and a SnapDeals update of a real 2 KiB
//! sector, from vanilla proofs made here with filecoin-proofs-api (as Curio makes them), proved
//! through our prover on the CPU and the GPU (lavapipe in CI): each equal byte for byte to
//! bellperson's `create_proof_batch` on the same circuits (filecoin-proofs' own), parameters
//! of the right shape (random points) and r, s.

mod common;

use common::{post_vanilla, randomness};
use filecoin_proofs_api::RegisteredPoStProof;
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
    let update = common::snap_update(31);
    let job = UpdateJob::new(
        update.proof,
        update.vanilla,
        update.comm_r_old,
        update.comm_r_new,
        update.comm_d_new,
    )
    .expect("job");
    common::assert_equal_to_bellperson(&job, 31);
}
