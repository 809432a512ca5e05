//! `BELLMAN_NO_GPU` puts the default prover on the CPU (its own binary: the variable is read
//! when the process's shared engine opens).

mod common;

use bellperson::groth16::{create_proof, generate_random_parameters};
use blstrs::{Bls12, Scalar};
use common::proof_bytes;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::circuits::SingleConstraint;
use wgpu_groth16::groth16::{Prover, ProverConfig};

#[test]
fn bellman_no_gpu_selects_the_cpu() {
    // This binary has one test: nothing else reads the environment concurrently.
    std::env::set_var("BELLMAN_NO_GPU", "1");
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let params =
        generate_random_parameters::<Bls12, _, _>(SingleConstraint::blank(), &mut rng).unwrap();
    let prover = Prover::new(&params, &ProverConfig::default()).unwrap();
    assert_eq!(prover.engine().describe(), "CPU");
    let circuit = SingleConstraint::new(Scalar::from(4u64), Scalar::from(6u64));
    let (r, s) = (Scalar::from(11u64), Scalar::from(13u64));
    let proof = prover.prove(circuit.clone(), r, s).unwrap();
    assert_eq!(
        proof_bytes(&proof),
        proof_bytes(&create_proof(circuit, &params, r, s).unwrap())
    );
}
