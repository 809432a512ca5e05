//! With no usable adapter the default prover proves on the CPU instead of failing (its own
//! binary: the adapter selection is read from the environment when the shared engine opens).

mod common;

use bellperson::groth16::{create_proof, generate_random_parameters};
use blstrs::{Bls12, Scalar};
use common::proof_bytes;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::circuits::SingleConstraint;
use wgpu_groth16::groth16::{Backend, Prover, ProverConfig, ProverEngine};
use wgpu_groth16::Error;

#[test]
fn no_adapter_falls_back_to_the_cpu_unless_a_gpu_is_required() {
    // This binary has one test: nothing else reads the environment concurrently.
    std::env::set_var("WGPU_ADAPTER_NAME", "no adapter has this name");
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let params =
        generate_random_parameters::<Bls12, _, _>(SingleConstraint::blank(), &mut rng).unwrap();

    let prover = Prover::new(&params, &ProverConfig::default()).unwrap();
    assert_eq!(prover.engine().describe(), "CPU");
    let circuit = SingleConstraint::new(Scalar::from(7u64), Scalar::from(8u64));
    let (r, s) = (Scalar::from(3u64), Scalar::from(5u64));
    let proof = prover.prove(circuit.clone(), r, s).unwrap();
    assert_eq!(
        proof_bytes(&proof),
        proof_bytes(&create_proof(circuit, &params, r, s).unwrap())
    );

    let required = ProverConfig {
        backend: Backend::Gpu(Default::default()),
        ..Default::default()
    };
    let err = Prover::new(&params, &required)
        .err()
        .expect("no GPU to require");
    assert!(matches!(err, Error::NoAdapter { .. }), "{err}");
    // Engines on several adapters read the same selection.
    for count in [1, 2] {
        let err = ProverEngine::open_best(&required, count)
            .err()
            .expect("no GPU to require");
        assert!(matches!(err, Error::NoAdapter { .. }), "{count}: {err}");
    }
}
