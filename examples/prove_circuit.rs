//! A bellperson circuit proved with wgpu-groth16 and checked with bellperson's verifier:
//! knowledge of x with x³ + x + 5 = y, y public.
//!
//! ```sh
//! cargo run --release --example prove_circuit            # the best adapter
//! BELLMAN_NO_GPU=1 cargo run --release --example prove_circuit   # the CPU
//! ```

use bellperson::groth16::{
    create_proof, generate_random_parameters, prepare_verifying_key, verify_proof,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::{Prover, ProverConfig};

/// x³ + x + 5 = y: three multiplications' worth of constraints, y the one public input.
#[derive(Clone)]
struct Cubic {
    x: Option<Scalar>,
}

impl Circuit<Scalar> for Cubic {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_value = self.x;
        let x = cs.alloc(|| "x", || x_value.ok_or(SynthesisError::AssignmentMissing))?;
        let square_value = x_value.map(|x| x.square());
        let square = cs.alloc(
            || "x^2",
            || square_value.ok_or(SynthesisError::AssignmentMissing),
        )?;
        cs.enforce(|| "x * x = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + square);
        let cube_value = square_value.zip(x_value).map(|(s, x)| s * x);
        let cube = cs.alloc(
            || "x^3",
            || cube_value.ok_or(SynthesisError::AssignmentMissing),
        )?;
        cs.enforce(
            || "x^2 * x = x^3",
            |lc| lc + square,
            |lc| lc + x,
            |lc| lc + cube,
        );
        let y_value = cube_value
            .zip(x_value)
            .map(|(c, x)| c + x + Scalar::from(5));
        let y = cs.alloc_input(|| "y", || y_value.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(
            || "(x^3 + x + 5) * 1 = y",
            |lc| lc + cube + x + (Scalar::from(5), CS::one()),
            |lc| lc + CS::one(),
            |lc| lc + y,
        );
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    // Parameters from bellperson's setup, as a `.params` file would hold them.
    let params = generate_random_parameters::<Bls12, _, _>(Cubic { x: None }, &mut rng)?;

    // The best adapter, or the CPU when BELLMAN_NO_GPU is set or no adapter is usable.
    let prover = Prover::new(&params, &ProverConfig::default())?;
    println!("engine: {}", prover.engine().describe());

    let x = Scalar::from(3);
    let y = x.square() * x + x + Scalar::from(5);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let proof = prover.prove(Cubic { x: Some(x) }, r, s)?;

    let accepted = verify_proof(&prepare_verifying_key(&params.vk), &proof, &[y])?;
    println!(
        "bellperson's verifier: {}",
        if accepted { "accepted" } else { "refused" }
    );

    // Given the same r and s, bellperson's own prover makes the same bytes.
    let theirs = create_proof::<Bls12, _, _>(Cubic { x: Some(x) }, &params, r, s)?;
    let (mut ours_bytes, mut theirs_bytes) = (Vec::new(), Vec::new());
    proof.write(&mut ours_bytes)?;
    theirs.write(&mut theirs_bytes)?;
    println!(
        "equal to bellperson's proof: {}",
        ours_bytes == theirs_bytes
    );
    if !accepted || ours_bytes != theirs_bytes {
        return Err("the proof is not bellperson's".into());
    }
    Ok(())
}
