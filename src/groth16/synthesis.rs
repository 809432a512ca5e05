//! Runs bellperson circuits into proving assignments: the evaluations of the A, B and C
//! polynomials at every constraint, the variable assignments, and which variables the A and B
//! queries touch (the densities that shrink the A and B multi-scalar multiplications).
//!
//! [`ProvingAssignment`] has the semantics of bellperson 0.27's private prover-side
//! constraint system, and [`synthesize_batch`] those of its `synthesize_circuits_batch`, so
//! that proofs built from them equal bellperson's.

use std::fmt;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Instant;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use log::debug;
use rayon::prelude::*;

use super::precompiled::ConstraintMatrices;
use crate::{Error, Result};

/// One bit per variable: set when the variable occurs with a nonzero coefficient in a query.
///
/// Bellperson's `DensityTracker` marks on the coefficient, not on the value: a variable whose
/// value is zero still counts, because the parameters hold its query point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    /// Bit `i` of the vector is bit `i % 64` of word `i / 64`; bits at `len` and above are 0.
    words: Vec<u64>,
    len: usize,
    total: usize,
}

/// Below this many variables `select` runs on the calling thread: task overhead would dominate.
const SELECT_PARALLEL_MIN: usize = 1 << 16;
/// Words per parallel `select` task (16384 variables).
const SELECT_CHUNK_WORDS: usize = 256;

impl Density {
    /// Number of variables tracked.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits: the length of the query after density restriction.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes of memory the bits take.
    fn host_bytes(&self) -> usize {
        self.words.capacity() * size_of::<u64>()
    }

    /// Whether variable `i` occurs in the query.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> bool {
        assert!(
            i < self.len,
            "density index {i} out of range for {} variables",
            self.len
        );
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// The values whose bit is set, in order: the scalars of a density-restricted MSM.
    ///
    /// # Panics
    /// If `values` does not hold one value per tracked variable.
    pub fn select<T: Copy + Send + Sync>(&self, values: &[T]) -> Vec<T> {
        assert_eq!(
            values.len(),
            self.len,
            "select needs one value per tracked variable"
        );
        let mut out = Vec::with_capacity(self.total);
        let slots = &mut out.spare_capacity_mut()[..self.total];
        let written = if self.len < SELECT_PARALLEL_MIN {
            select_into(&self.words, values, slots)
        } else {
            // Each task owns a run of words and exactly as many output slots as its words
            // have set bits, so tasks write disjoint parts of `out` in order.
            let mut parts = Vec::with_capacity(self.words.len().div_ceil(SELECT_CHUNK_WORDS));
            let mut rest = slots;
            for words in self.words.chunks(SELECT_CHUNK_WORDS) {
                let count = words.iter().map(|w| w.count_ones() as usize).sum();
                let (part, tail) = rest.split_at_mut(count);
                parts.push((words, part));
                rest = tail;
            }
            parts
                .into_par_iter()
                .zip(values.par_chunks(SELECT_CHUNK_WORDS * 64))
                .map(|((words, part), values)| select_into(words, values, part))
                .sum()
        };
        assert_eq!(
            written, self.total,
            "density total out of step with its bits"
        );
        // SAFETY: `select_into` initialized the first `written` slots, and `written` equals
        // the capacity reserved (checked just above).
        unsafe { out.set_len(written) };
        out
    }

    /// The bits, 64 variables a word (as a matrices file keeps them).
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// The density of `len` variables whose bits are `words`; `None` unless there is one
    /// word per 64 variables and no bit is set at `len` or above.
    pub(crate) fn from_words(words: Vec<u64>, len: usize) -> Option<Self> {
        let tail = len % 64;
        let clean = match words.last() {
            Some(&last) if tail != 0 => last >> tail == 0,
            _ => true,
        };
        if words.len() != len.div_ceil(64) || !clean {
            return None;
        }
        let total = words.iter().map(|w| w.count_ones() as usize).sum();
        Some(Density { words, len, total })
    }

    /// Tracks one more variable, not (yet) in the query.
    pub(super) fn push(&mut self) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
    }

    /// Records that variable `i` occurs in the query.
    #[inline]
    pub(super) fn mark(&mut self, i: usize) {
        debug_assert!(i < self.len);
        let word = &mut self.words[i / 64];
        let bit = 1 << (i % 64);
        if *word & bit == 0 {
            *word |= bit;
            self.total += 1;
        }
    }

    /// Appends `other`'s variables, as bellperson's `DensityTracker::extend`. With
    /// `merge_first`, `other`'s variable 0 is the ONE input that `self` already holds: its bit
    /// is ORed into `self`'s bit 0 instead of being appended.
    fn extend(&mut self, other: &Density, merge_first: bool) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            self.clone_from(other);
            return;
        }
        let mut total = self.total + other.total;
        let mut from = 0;
        if merge_first {
            if other.get(0) {
                if self.get(0) {
                    total -= 1;
                } else {
                    self.words[0] |= 1;
                }
            }
            from = 1;
        }
        // Not on the proving path (only extensible circuits use it), so bit by bit.
        for i in from..other.len {
            self.push();
            if other.get(i) {
                let last = self.len - 1;
                self.words[last / 64] |= 1 << (last % 64);
            }
        }
        self.total = total;
    }
}

/// Copies `values[i]` for each set bit `i` of `words` into `out`, in order; returns how many.
fn select_into<T: Copy>(words: &[u64], values: &[T], out: &mut [MaybeUninit<T>]) -> usize {
    let mut n = 0;
    for (&word, values) in words.iter().zip(values.chunks(64)) {
        let mut bits = word;
        while bits != 0 {
            out[n].write(values[bits.trailing_zeros() as usize]);
            n += 1;
            bits &= bits - 1;
        }
    }
    n
}

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
    pub deferred_products: Option<Arc<ConstraintMatrices>>,
}

/// The sizes that decide which parameters fit an assignment, and that every circuit of one
/// batch must share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Constraints including the `input * 0 = 0` ones: the NTT domain is the next power of two.
    pub constraints: usize,
    /// Inputs including ONE.
    pub inputs: usize,
    pub aux: usize,
    pub a_aux_density: usize,
    pub b_input_density: usize,
    pub b_aux_density: usize,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} constraints, {} inputs, {} aux, densities a {} / b {}+{}",
            self.constraints,
            self.inputs,
            self.aux,
            self.a_aux_density,
            self.b_input_density,
            self.b_aux_density
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    fn random_density(rng: &mut ChaCha8Rng, len: usize, percent_set: u32) -> Density {
        let mut density = Density::default();
        for i in 0..len {
            density.push();
            if rng.next_u32() % 100 < percent_set {
                density.mark(i);
            }
        }
        density
    }

    #[test]
    fn select_equals_filter_and_total_counts_set_bits() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Lengths around word and parallel-chunk boundaries, the parallel path included.
        let lens = [0, 1, 63, 64, 65, 1000, SELECT_PARALLEL_MIN + 64 * 300 + 7];
        for len in lens {
            for percent_set in [0, 3, 50, 100] {
                let density = random_density(&mut rng, len, percent_set);
                let values: Vec<u64> = (0..len as u64).map(|v| v * 7 + 1).collect();
                let expected: Vec<u64> = (0..len)
                    .filter(|&i| density.get(i))
                    .map(|i| values[i])
                    .collect();
                assert_eq!(density.total(), expected.len(), "len {len}, {percent_set}%");
                assert_eq!(
                    density.select(&values),
                    expected,
                    "len {len}, {percent_set}%"
                );
            }
        }
    }

    #[test]
    fn marking_twice_counts_once() {
        let mut density = Density::default();
        for _ in 0..3 {
            density.push();
        }
        density.mark(1);
        density.mark(1);
        assert_eq!(density.total(), 1);
        assert!(!density.get(0) && density.get(1) && !density.get(2));
    }

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

    #[test]
    fn extending_an_empty_density_copies_it() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let other = random_density(&mut rng, 100, 50);
        for merge_first in [false, true] {
            let mut density = Density::default();
            density.extend(&other, merge_first);
            assert_eq!(density, other);
        }
    }
}
