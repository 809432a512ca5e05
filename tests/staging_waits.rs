//! A proof's staging stage never blocks on the GPU (supraseal-c2's lesson, docs/design.md,
//! "The two-stage pipeline and the two locks": one wait there and the two locks act as one).
//!
//! Waits are recorded process-wide, so this test has a binary of its own: beside other tests'
//! provers on the same device, their waits (or theirs filling the shared upload staging)
//! would land in its list.

mod common;

use std::sync::Arc;

use bellperson::groth16::generate_random_parameters;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::gpu::waits::{self as wait_stages, Stage};
use wgpu_groth16::groth16::circuits::FilecoinLike;
use wgpu_groth16::groth16::{Prover, ProverEngine};
use wgpu_groth16::msm::MsmConfig;

/// Every wait in a three-worker batch is recorded with the stage its thread was in, and none
/// is in staging. (The compute stage's own waits show the recording works.)
#[test]
fn no_wait_happens_in_the_staging_stage() {
    let Some(gpu) = common::gpu(common::Target::Native) else {
        return;
    };
    let engine = Arc::new(ProverEngine::on_device(gpu.clone(), MsmConfig::default()).unwrap());
    let params = generate_random_parameters::<Bls12, _, _>(
        FilecoinLike::blank(9).unwrap(),
        &mut ChaCha20Rng::seed_from_u64(19),
    )
    .unwrap();
    let prover = Prover::with_engine(&params, engine)
        .unwrap()
        .with_workers(3);
    let circuits: Vec<_> = (0..6)
        .map(|seed| FilecoinLike::new(9, seed).unwrap())
        .collect();
    let rs: Vec<Scalar> = (0..6)
        .map(|i| Scalar::random(ChaCha20Rng::seed_from_u64(120 + i)))
        .collect();
    wait_stages::start_recording();
    let (proofs, _) = prover.prove_batch_report(circuits, &rs, &rs).unwrap();
    assert_eq!(proofs.len(), 6);
    let stages = wait_stages::take_recorded();
    assert!(
        stages.contains(&Some(Stage::Compute)),
        "no wait recorded in the compute stage: {stages:?}"
    );
    assert!(
        !stages.contains(&Some(Stage::Staging)),
        "a wait in the staging stage: {stages:?}"
    );
}
