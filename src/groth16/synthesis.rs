//! Runs bellperson circuits into proving assignments: the evaluations of the A, B and C
//! polynomials at every constraint, the variable assignments, and which variables the A and B
//! queries touch (the densities that shrink the A and B multi-scalar multiplications).
//!
//! [`ProvingAssignment`] has the semantics of bellperson 0.27's private prover-side
//! constraint system, and [`synthesize_batch`] those of its `synthesize_circuits_batch`, so
//! that proofs built from them equal bellperson's.

use std::sync::Arc;
use std::time::Instant;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use log::debug;
use rayon::prelude::*;

use crate::recorded::{Density, RecordedSystem, Shape, WitnessRun, WitnessValues};
use crate::{Error, Result};

/// A synthesized circuit, ready for the prover: `a[i]`, `b[i]`, `c[i]` are the values of
/// constraint `i`'s linear combinations, so `a[i] * b[i] == c[i]` when the witness satisfies
/// the circuit. After [`synthesize`], input 0 is ONE and the last `inputs` constraints are
/// bellperson's `input * 0 = 0`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProvingAssignment {
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
    pub input_assignment: Vec<Scalar>,
    pub aux_assignment: Vec<Scalar>,
    /// Aux variables in the A query. There is no input density for A: every input is in A,
    /// through its `input * 0 = 0` constraint.
    pub a_aux_density: Density,
    pub b_input_density: Density,
    pub b_aux_density: Density,
    /// Set when a, b, c are left to the proof (and empty): it computes them from these
    /// recorded matrices where its engine runs, on a GPU beside the bases.
    pub deferred_products: Option<Arc<RecordedSystem>>,
}

impl ProvingAssignment {
    pub fn shape(&self) -> Shape {
        Shape {
            constraints: self
                .deferred_products
                .as_ref()
                .map_or(self.a.len(), |m| m.rows()),
            inputs: self.input_assignment.len(),
            aux: self.aux_assignment.len(),
            a_aux_density: self.a_aux_density.total(),
            b_input_density: self.b_input_density.total(),
            b_aux_density: self.b_aux_density.total(),
        }
    }

    /// Bytes of host memory the assignment holds (its vectors' capacities, which growth by
    /// `push` leaves up to twice their lengths): what a batch counts per circuit against its
    /// host budget ([`Prover::with_host_budget`](super::Prover::with_host_budget)).
    pub fn host_bytes(&self) -> u64 {
        let scalars = [
            &self.a,
            &self.b,
            &self.c,
            &self.input_assignment,
            &self.aux_assignment,
        ]
        .iter()
        .map(|v| v.capacity())
        .sum::<usize>();
        let densities = [
            &self.a_aux_density,
            &self.b_input_density,
            &self.b_aux_density,
        ]
        .iter()
        .map(|d| d.host_bytes())
        .sum::<usize>();
        (scalars * size_of::<Scalar>() + densities) as u64
    }
}

/// The value of `lc`, marking each variable with a nonzero coefficient in the given densities
/// (bellperson's `eval_with_trackers`). No allocation: this runs three times per constraint.
#[inline]
fn eval(
    lc: &LinearCombination<Scalar>,
    inputs: &[Scalar],
    aux: &[Scalar],
    mut input_density: Option<&mut Density>,
    mut aux_density: Option<&mut Density>,
) -> Scalar {
    // Gadgets build most terms with coefficient 1 or -1 (booleans: ONE - b); both skip the
    // multiplication.
    // Negating ONE is a call into blst: once per process, not once per linear combination.
    static MINUS_ONE: std::sync::LazyLock<Scalar> = std::sync::LazyLock::new(|| -Scalar::ONE);
    let minus_one = *MINUS_ONE;
    let mut acc = Scalar::ZERO;
    let mut add = |coeff: &Scalar, value: &Scalar| {
        if *coeff == Scalar::ONE {
            acc += value;
        } else if *coeff == minus_one {
            acc -= value;
        } else {
            acc += *value * coeff;
        }
    };
    for (&i, coeff) in lc.iter_inputs() {
        if !coeff.is_zero_vartime() {
            add(coeff, &inputs[i]);
            if let Some(density) = input_density.as_deref_mut() {
                density.mark(i);
            }
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if !coeff.is_zero_vartime() {
            add(coeff, &aux[i]);
            if let Some(density) = aux_density.as_deref_mut() {
                density.mark(i);
            }
        }
    }
    acc
}

impl ConstraintSystem<Scalar> for ProvingAssignment {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux_assignment.push(f()?);
        self.a_aux_density.push();
        self.b_aux_density.push();
        Ok(Variable(Index::Aux(self.aux_assignment.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input_assignment.push(f()?);
        self.b_input_density.push();
        Ok(Variable(Index::Input(self.input_assignment.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let (inputs, aux) = (&self.input_assignment, &self.aux_assignment);
        let a = eval(
            &a(LinearCombination::zero()),
            inputs,
            aux,
            None,
            Some(&mut self.a_aux_density),
        );
        let b = eval(
            &b(LinearCombination::zero()),
            inputs,
            aux,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
        );
        // No density for C: its only query, (beta A + alpha B + C) over the aux variables, is
        // full.
        let c = eval(&c(LinearCombination::zero()), inputs, aux, None, None);
        self.a.push(a);
        self.b.push(b);
        self.c.push(c);
    }

    // Names only matter to debugging constraint systems.
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

    fn is_extensible() -> bool {
        true
    }

    /// Appends `other`, synthesized separately with its own ONE at input 0: that ONE merges
    /// into ours, as in bellperson.
    fn extend(&mut self, other: &Self) {
        self.a_aux_density.extend(&other.a_aux_density, false);
        self.b_input_density.extend(&other.b_input_density, true);
        self.b_aux_density.extend(&other.b_aux_density, false);
        self.a.extend_from_slice(&other.a);
        self.b.extend_from_slice(&other.b);
        self.c.extend_from_slice(&other.c);
        self.input_assignment
            .extend_from_slice(&other.input_assignment[1..]);
        self.aux_assignment.extend_from_slice(&other.aux_assignment);
    }
}

/// Runs `circuit` as bellperson's prover does: ONE first, the circuit, then one
/// `input * 0 = 0` constraint per input. Those make the inputs' A polynomials linearly
/// independent, which Groth16's soundness needs; bellperson's parameter generator adds the
/// same constraints, so they must be here for the parameters to fit.
fn run<C: Circuit<Scalar>>(circuit: C) -> Result<ProvingAssignment, SynthesisError> {
    let mut cs = ProvingAssignment::default();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.input_assignment.len() {
        cs.enforce(
            || "input * 0 = 0",
            |lc| lc + Variable(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    Ok(cs)
}

/// Synthesizes one circuit for proving.
pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<ProvingAssignment> {
    let start = Instant::now();
    let assignment = run(circuit)?;
    debug!(
        "synthesized {} in {:.1?}",
        assignment.shape(),
        start.elapsed()
    );
    Ok(assignment)
}

/// Synthesizes circuits in parallel for one batch proof, which needs them all of one shape.
///
/// Errors: [`Error::InvalidInput`] for an empty batch, [`Error::Synthesis`] when a circuit
/// fails, [`Error::BatchShape`] naming the first circuit whose shape differs from circuit 0's.
pub fn synthesize_batch<C: Circuit<Scalar> + Send>(
    circuits: Vec<C>,
) -> Result<Vec<ProvingAssignment>> {
    if circuits.is_empty() {
        return Err(Error::InvalidInput(
            "a batch needs at least one circuit".into(),
        ));
    }
    let start = Instant::now();
    let assignments = circuits
        .into_par_iter()
        .map(run)
        .collect::<Result<Vec<_>, _>>()?;
    let expected = assignments[0].shape();
    if let Some((index, found)) = assignments
        .iter()
        .map(ProvingAssignment::shape)
        .enumerate()
        .find(|(_, shape)| *shape != expected)
    {
        return Err(Error::BatchShape {
            index,
            expected: expected.to_string(),
            found: found.to_string(),
        });
    }
    debug!(
        "synthesized {} circuits of {expected} in {:.1?}",
        assignments.len(),
        start.elapsed()
    );
    Ok(assignments)
}

/// The public inputs a verifier needs for `circuit` (without the leading ONE), found by
/// synthesizing it: the circuit is the only definition of what it exposes.
pub fn public_inputs<C: Circuit<Scalar>>(circuit: C) -> Result<Vec<Scalar>> {
    Ok(run(circuit)?.input_assignment.split_off(1))
}

/// Proving assignments from a recorded constraint system: the witness run, then the
/// products on the CPU or left to the proof.
impl RecordedSystem {
    /// `circuit`'s proving assignment from its witness alone and the recorded system:
    /// equal to what [`synthesize`] gives for a circuit of
    /// this structure. A circuit that allocates or constrains otherwise than the recorded
    /// one is refused.
    pub fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<ProvingAssignment> {
        Ok(self.products(self.witness(circuit)?))
    }

    /// The proving assignment of a checked witness: a = A·z, b = B·z, c = C·z.
    pub fn products(&self, witness: WitnessValues) -> ProvingAssignment {
        let WitnessValues { inputs, aux } = witness;
        let [a, b, c] = self.products_of(&inputs, &aux);
        let [a_aux_density, b_input_density, b_aux_density] = self.densities();
        ProvingAssignment {
            a,
            b,
            c,
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: a_aux_density.clone(),
            b_input_density: b_input_density.clone(),
            b_aux_density: b_aux_density.clone(),
            deferred_products: None,
        }
    }

    /// `circuit`'s witness as a proving assignment whose a, b, c are left to the proof
    /// (`deferred_products`): its engine computes them where it runs, on a GPU with the
    /// matrices resident beside the bases; its work on `pool`'s threads. Refused as
    /// [`witness`](Self::witness) refuses.
    pub fn witness_assignment<W: WitnessRun>(
        self: &Arc<Self>,
        circuit: W,
        pool: &rayon::ThreadPool,
    ) -> Result<ProvingAssignment> {
        let WitnessValues { inputs, aux } = circuit.witness_of(self, pool)?;
        let [a_aux_density, b_input_density, b_aux_density] = self.densities();
        Ok(ProvingAssignment {
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: a_aux_density.clone(),
            b_input_density: b_input_density.clone(),
            b_aux_density: b_aux_density.clone(),
            deferred_products: Some(self.clone()),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    /// A random constraint over `vars`, with coefficients 0, 1, -1 and random ones.
    fn enforce_random(cs: &mut ProvingAssignment, rng: &mut ChaCha8Rng, vars: &[Variable]) {
        let mut lc = || {
            let mut lc = LinearCombination::zero();
            for _ in 0..rng.next_u32() % 4 {
                let var = vars[rng.next_u32() as usize % vars.len()];
                let coeff = match rng.next_u32() % 4 {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    2 => -Scalar::ONE,
                    _ => Scalar::random(&mut *rng),
                };
                lc = lc + (coeff, var);
            }
            lc
        };
        let (a, b, c) = (lc(), lc(), lc());
        cs.enforce(|| "", |_| a, |_| b, |_| c);
    }

    /// Bellperson's `test_proving_assignment_extend`, with constraints too: assignments
    /// synthesized in parts and extended equal the assignment synthesized whole.
    #[test]
    fn extend_equals_synthesizing_whole() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for parts in [1, 2, 5] {
            let mut whole = ProvingAssignment::default();
            whole.alloc_input(|| "one", || Ok(Scalar::ONE)).unwrap();
            let mut combined = whole.clone();
            for _ in 0..parts {
                let mut part = ProvingAssignment::default();
                part.alloc_input(|| "one", || Ok(Scalar::ONE)).unwrap();
                // The same variables, numbered in the part and in the whole.
                let mut part_vars = vec![Variable(Index::Input(0))];
                let mut whole_vars = vec![Variable(Index::Input(0))];
                for _ in 0..20 {
                    let value = Scalar::random(&mut rng);
                    match rng.next_u32() % 3 {
                        0 => {
                            part_vars.push(part.alloc(|| "", || Ok(value)).unwrap());
                            whole_vars.push(whole.alloc(|| "", || Ok(value)).unwrap());
                        }
                        1 => {
                            part_vars.push(part.alloc_input(|| "", || Ok(value)).unwrap());
                            whole_vars.push(whole.alloc_input(|| "", || Ok(value)).unwrap());
                        }
                        _ => {
                            let seed = rng.next_u64();
                            let mut part_rng = ChaCha8Rng::seed_from_u64(seed);
                            let mut whole_rng = ChaCha8Rng::seed_from_u64(seed);
                            enforce_random(&mut part, &mut part_rng, &part_vars);
                            enforce_random(&mut whole, &mut whole_rng, &whole_vars);
                        }
                    }
                }
                combined.extend(&part);
            }
            assert_eq!(combined, whole, "{parts} parts");
        }
    }
}
