//! `wgpu-groth16 bench synthesis`: how long one circuit takes to synthesize into a proving
//! assignment, beside the circuit's own share (building its linear combinations, which no
//! constraint system can avoid), so the constraint system's overhead is visible; and the
//! recorded-matrices path (a witness run and three sparse products) beside it.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use wgpu_groth16::groth16::circuits::FilecoinLike;
use wgpu_groth16::groth16::synthesis::synthesize;
use wgpu_groth16::recorded::RecordedSystem;
use wgpu_groth16::Result;

use super::bench::{ms, table_header};

/// Runs a circuit's code and nothing else: values are computed and linear combinations built,
/// then dropped (through `black_box`, so the compiler cannot skip building them).
#[derive(Default)]
struct CircuitOnly {
    inputs: usize,
    aux: usize,
}

impl ConstraintSystem<Scalar> for CircuitOnly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        black_box(f()?);
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        black_box(f()?);
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let zero = LinearCombination::zero;
        black_box((a(zero()), b(zero()), c(zero())));
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

pub fn synthesis(log_ns: &[u32], runs: u32) -> Result<ExitCode> {
    // The parts' own threads, as a batch runs them.
    let pool = rayon::ThreadPoolBuilder::new()
        .build()
        .map_err(|e| wgpu_groth16::Error::Internal(format!("no witness threads: {e}")))?;
    println!(
        "FilecoinLike circuit, one thread (the products and the witness in parts: {} threads), best of {runs}",
        pool.current_num_threads()
    );
    println!(
        "{}",
        table_header(&[
            "constraints",
            "synthesize (ours)",
            "the circuit's own code",
            "our share",
            "constraints/s",
            "recorded system (once)",
            "witness only",
            "witness in parts",
            "products",
            "witness in parts + products",
            "equal",
        ])
    );
    for &log_n in log_ns {
        let circuit = FilecoinLike::new(log_n, 1)?;
        let (mut ours, mut own) = (Duration::MAX, Duration::MAX);
        let mut constraints = 0;
        let t = Instant::now();
        let matrices = RecordedSystem::record(circuit.clone())?;
        let record = t.elapsed();
        let (mut witness, mut products, mut equal) = (Duration::MAX, Duration::MAX, true);
        let mut in_parts = Duration::MAX;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            let mut only = CircuitOnly {
                inputs: 1,
                ..Default::default()
            };
            circuit.clone().synthesize(&mut only)?;
            own = own.min(t.elapsed());
            let t = Instant::now();
            let full = synthesize(circuit.clone())?;
            ours = ours.min(t.elapsed());
            constraints = full.a.len();
            let t = Instant::now();
            let values = matrices.witness(circuit.clone())?;
            witness = witness.min(t.elapsed());
            let t = Instant::now();
            let recorded = matrices.products(values);
            products = products.min(t.elapsed());
            equal &= recorded == full;
            let t = Instant::now();
            let values = matrices
                .witness_in_parts(circuit.clone().in_parts(pool.current_num_threads()), &pool)?;
            in_parts = in_parts.min(t.elapsed());
            equal &= matrices.products(values) == full;
        }
        println!(
            "| {constraints} | {} | {} | {:.0}% | {:.2} M | {} ({:.0} MiB) | {} | {} | {} | {} | {} |",
            ms(ours),
            ms(own),
            100.0 * (1.0 - own.as_secs_f64() / ours.as_secs_f64()),
            constraints as f64 / ours.as_secs_f64() / 1e6,
            ms(record),
            matrices.bytes() as f64 / (1u64 << 20) as f64,
            ms(witness),
            ms(in_parts),
            ms(products),
            ms(in_parts + products),
            if equal { "yes" } else { "NO" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
