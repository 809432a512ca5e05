//! The CPU engine proves beside bellperson without deadlocking the two thread pools (its own
//! binary: it sizes rayon's global pool as on a 2-core machine).
//!
//! bellperson's FFTs run on its own pool (ec-gpu-gen's `Worker`), whose MSM tasks wait on
//! rayon's pool. A prover that ran its CPU H step as a rayon task blocked rayon threads on
//! bellperson's pool while bellperson's tasks waited on rayon: a batch hung for good in CI.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use bellperson::groth16::{create_proof_batch, generate_random_parameters};
use blstrs::{Bls12, Scalar};
use common::proof_bytes;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::circuits::FilecoinLike;
use wgpu_groth16::groth16::{Prover, ProverEngine};

#[test]
fn cpu_proofs_beside_bellperson_do_not_deadlock_the_thread_pools() {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build_global()
        .expect("the first use of rayon's global pool in this binary");
    let params = Arc::new(
        generate_random_parameters::<Bls12, _, _>(
            FilecoinLike::blank(10).unwrap(),
            &mut ChaCha20Rng::seed_from_u64(40),
        )
        .unwrap(),
    );
    let circuits: Vec<_> = (0..6).map(|s| FilecoinLike::new(10, s).unwrap()).collect();
    let ones = vec![Scalar::from(3u64); circuits.len()];
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let expected = create_proof_batch(circuits.clone(), &*params, ones.clone(), ones.clone())
            .unwrap()
            .iter()
            .map(proof_bytes)
            .collect::<Vec<_>>();
        let prover = Prover::with_engine(&*params, Arc::new(ProverEngine::cpu()))
            .unwrap()
            .with_workers(3);
        std::thread::scope(|scope| {
            // bellperson keeps its pool busy with MSMs while our workers prove.
            scope.spawn(|| {
                for _ in 0..3 {
                    create_proof_batch(circuits.clone(), &*params, ones.clone(), ones.clone())
                        .unwrap();
                }
            });
            for _ in 0..3 {
                let (proofs, _) = prover
                    .prove_batch_report(circuits.clone(), &ones, &ones)
                    .unwrap();
                assert_eq!(proofs.iter().map(proof_bytes).collect::<Vec<_>>(), expected);
            }
        });
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(Duration::from_secs(120)).is_ok(),
        "the proofs did not finish in 120 s: the thread pools deadlocked"
    );
}
