//! Pre-compiled constraint systems. The circuits we serve have a fixed structure: the same
//! A, B, C matrices for every proof of a circuit, only the witness changes. So a circuit's
//! matrices are recorded once ([`ConstraintMatrices::record`]), and each proof then runs only
//! the circuit's witness computation (its `alloc` closures: `enforce` never builds a linear
//! combination) and gets a, b, c as sparse matrix-vector products
//! ([`ConstraintMatrices::synthesize`]), equal to [`synthesize`](super::synthesis::synthesize)'s.
//!
//! Columns are tagged input or aux, so an input allocated after constraints that use aux
//! variables (Filecoin's `inputize`, `pack_into_inputs`) keeps its meaning. Coefficients are
//! indices into a table of the circuit's distinct values (most are ±1 or small powers of
//! two). A witness run records the sequence of allocations and constraints it saw; one that
//! differs from the recorded circuit's is refused ([`Error::CircuitStructure`]) rather than
//! proved with the wrong matrices.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::synthesis::{Density, ProvingAssignment, Shape};
use crate::{Error, Result};

mod store;

pub use store::{default_matrices_dir, MatricesKey, Origin};

/// Column tag of aux variables; inputs are untagged.
pub(crate) const AUX: u32 = 1 << 31;

/// Coefficient table indices of ONE and -ONE, which skip the multiplication.
pub(crate) const PLUS_ONE: u32 = 0;
pub(crate) const MINUS_ONE: u32 = 1;

/// One matrix in compressed sparse rows, as the sparse-product kernels read it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CsrView<'a> {
    pub row_starts: &'a [u64],
    pub columns: &'a [u32],
    pub coefficients: &'a [u32],
}

/// One matrix in compressed sparse rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Matrix {
    /// Row `r` is entries `row_starts[r]..row_starts[r + 1]`.
    row_starts: Vec<u64>,
    /// Variable of each entry: an input index, or an aux index tagged [`AUX`].
    columns: Vec<u32>,
    /// Index of each entry's coefficient in [`ConstraintMatrices::values`].
    coefficients: Vec<u32>,
}

impl Matrix {
    fn new() -> Self {
        Matrix {
            row_starts: vec![0],
            ..Default::default()
        }
    }

    fn rows(&self) -> usize {
        self.row_starts.len() - 1
    }

    fn view(&self) -> CsrView<'_> {
        CsrView {
            row_starts: &self.row_starts,
            columns: &self.columns,
            coefficients: &self.coefficients,
        }
    }

    fn bytes(&self) -> usize {
        self.row_starts.len() * 8 + self.columns.len() * 4 + self.coefficients.len() * 4
    }

    /// `M · z` with z the inputs then the aux variables, on all cores.
    fn times(&self, values: &[Scalar], inputs: &[Scalar], aux: &[Scalar]) -> Vec<Scalar> {
        (0..self.rows())
            .into_par_iter()
            .with_min_len(4096)
            .map(|row| {
                let entries = self.row_starts[row] as usize..self.row_starts[row + 1] as usize;
                let mut acc = Scalar::ZERO;
                for (&column, &coefficient) in self.columns[entries.clone()]
                    .iter()
                    .zip(&self.coefficients[entries])
                {
                    let value = if column & AUX != 0 {
                        &aux[(column & !AUX) as usize]
                    } else {
                        &inputs[column as usize]
                    };
                    match coefficient {
                        PLUS_ONE => acc += value,
                        MINUS_ONE => acc -= value,
                        index => acc += *value * values[index as usize],
                    }
                }
                acc
            })
            .collect()
    }
}

/// The sequence of a synthesis' allocations and constraints as a polynomial in a fixed point
/// modulo 2^61 - 1: a check that a witness run followed the recorded circuit, not a
/// cryptographic digest. Unlike a running hash it composes, so a witness computed in parts
/// ([`CircuitParts`]) is checked as a whole: the trace of a sequence `s` then `t` is
/// `trace(s) * x^|t| + trace(t)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Trace(u64);

const TRACE_MODULUS: u64 = (1 << 61) - 1;
/// The point x: any fixed value of the field works.
const TRACE_POINT: u64 = 0x0d1c_2b3a_4958_6776;

fn trace_reduce(value: u128) -> u64 {
    let folded = (value & u128::from(TRACE_MODULUS)) + (value >> 61);
    let folded = (folded & u128::from(TRACE_MODULUS)) as u64 + (folded >> 61) as u64;
    if folded >= TRACE_MODULUS {
        folded - TRACE_MODULUS
    } else {
        folded
    }
}

fn trace_power(mut exponent: u64) -> u64 {
    let (mut power, mut square) = (1u64, TRACE_POINT);
    while exponent > 0 {
        if exponent & 1 == 1 {
            power = trace_reduce(u128::from(power) * u128::from(square));
        }
        square = trace_reduce(u128::from(square) * u128::from(square));
        exponent >>= 1;
    }
    power
}

impl Trace {
    fn step(&mut self, event: u8) {
        self.0 = trace_reduce(u128::from(self.0) * u128::from(TRACE_POINT) + u128::from(event));
    }

    /// The trace of this sequence followed by `next`, a sequence of `next_steps` events.
    fn then(self, next: Trace, next_steps: u64) -> Trace {
        Trace(trace_reduce(
            u128::from(self.0) * u128::from(trace_power(next_steps)) + u128::from(next.0),
        ))
    }

    /// The trace of what follows `prefix` in this sequence, `steps` events after it.
    fn after(self, prefix: Trace, steps: u64) -> Trace {
        let shifted = trace_reduce(u128::from(prefix.0) * u128::from(trace_power(steps)));
        Trace(trace_reduce(
            u128::from(self.0) + u128::from(TRACE_MODULUS - shifted),
        ))
    }
}

const INPUT: u8 = b'i';
const ALLOC: u8 = b'a';
const ENFORCE: u8 = b'e';

/// A circuit's constraint matrices, recorded once and used for every later proof of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintMatrices {
    /// Inputs, ONE included.
    pub inputs: usize,
    pub aux: usize,
    /// The circuit's own constraints (the matrices also hold one `input * 0 = 0` per input).
    pub constraints: usize,
    a: Matrix,
    b: Matrix,
    c: Matrix,
    /// The distinct coefficients; ONE and -ONE first.
    values: Vec<Scalar>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    trace: Trace,
}

impl ConstraintMatrices {
    /// Records `circuit`'s matrices: its `enforce` closures build their linear combinations
    /// once, its `alloc` closures are not called (so a circuit without a witness records
    /// too).
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<Self> {
        let start = Instant::now();
        let mut recorder = Recorder::new();
        recorder.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut recorder)?;
        let matrices = recorder.finish();
        log::info!(
            "recorded {} constraints, {} inputs, {} aux, {} coefficient values, {:.1} MiB in {:.2?}",
            matrices.constraints,
            matrices.inputs,
            matrices.aux,
            matrices.values.len(),
            matrices.bytes() as f64 / (1u64 << 20) as f64,
            start.elapsed()
        );
        Ok(matrices)
    }

    /// Rows of each matrix: the constraints, then one `input * 0 = 0` per input.
    pub fn rows(&self) -> usize {
        self.a.rows()
    }

    /// A, B and C, for the sparse-product kernels.
    pub(crate) fn csr(&self) -> [CsrView<'_>; 3] {
        [self.a.view(), self.b.view(), self.c.view()]
    }

    /// The distinct coefficients, ONE and -ONE first.
    pub(crate) fn values(&self) -> &[Scalar] {
        &self.values
    }

    /// The densities of the A query's aux variables and the B query's inputs and aux.
    pub(crate) fn densities(&self) -> [&Density; 3] {
        [
            &self.a_aux_density,
            &self.b_input_density,
            &self.b_aux_density,
        ]
    }

    /// The shape of every proving assignment of the circuit: what parameters must fit,
    /// known without synthesizing a witness.
    pub fn shape(&self) -> Shape {
        Shape {
            constraints: self.rows(),
            inputs: self.inputs,
            aux: self.aux,
            a_aux_density: self.a_aux_density.total(),
            b_input_density: self.b_input_density.total(),
            b_aux_density: self.b_aux_density.total(),
        }
    }

    /// Bytes the matrices take in memory.
    pub fn bytes(&self) -> usize {
        self.a.bytes() + self.b.bytes() + self.c.bytes() + self.values.len() * 32
    }

    /// `circuit`'s proving assignment from its witness alone and the recorded matrices:
    /// equal to what [`synthesize`](super::synthesis::synthesize) gives for a circuit of
    /// this structure. A circuit that allocates or constrains otherwise than the recorded
    /// one is refused.
    pub fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<ProvingAssignment> {
        Ok(self.products(self.witness(circuit)?))
    }

    /// Runs only `circuit`'s witness computation: its `alloc` closures, no linear
    /// combination. Refused unless it allocates and constrains as the recorded circuit did.
    pub fn witness<C: Circuit<Scalar>>(&self, circuit: C) -> Result<WitnessValues> {
        // Sized once: growing a 2 GiB vector by doubling copies it and faults in its pages
        // again at each step.
        let run = Witness::run(circuit, (0, 0), 0, (self.inputs, self.aux))?;
        self.checked(run.inputs, run.aux, run.constraints, run.trace)
    }

    /// [`witness`](Self::witness) of a circuit in parts, the parts on the current rayon
    /// pool's threads. Refused unless the parts together allocate and constrain as the
    /// recorded circuit did.
    pub fn witness_in_parts<C: Circuit<Scalar> + Send>(
        &self,
        circuit: CircuitParts<C>,
    ) -> Result<WitnessValues> {
        let CircuitParts { prefix, parts } = circuit;
        let prefix = Witness::run(prefix, (0, 0), 0, (0, 0))?;
        let shared = (prefix.input_count, prefix.aux_count);
        let (prefix_steps, prefix_constraints) = (prefix.steps(), prefix.constraints);
        let prefix_state = Some((prefix.trace, shared));
        let runs = parts
            .into_par_iter()
            .map(|part| Witness::run(part, shared, prefix_steps, (0, 0)))
            .collect::<Result<Vec<_>>>()?;
        let (mut inputs, mut aux) = (prefix.inputs, prefix.aux);
        inputs.reserve_exact(self.inputs.saturating_sub(inputs.len()));
        aux.reserve_exact(self.aux.saturating_sub(aux.len()));
        let (prefix_trace, mut constraints) = (prefix.trace, prefix_constraints);
        let mut trace = prefix_trace;
        for run in runs {
            if run.at_prefix != prefix_state {
                return Err(Error::CircuitStructure(
                    "a part of the circuit does not begin with its prefix's allocations and \
                     constraints"
                        .into(),
                ));
            }
            let steps = run.steps() - prefix_steps;
            trace = trace.then(run.trace.after(prefix_trace, steps), steps);
            constraints += run.constraints - prefix_constraints;
            inputs.extend(run.inputs);
            // In place on the pool's threads: at 2^27 a part's values are gigabytes.
            aux.par_extend(run.aux.into_par_iter());
        }
        self.checked(inputs, aux, constraints, trace)
    }

    /// The witness values, if they and the run's constraints and trace are the recorded
    /// circuit's.
    fn checked(
        &self,
        inputs: Vec<Scalar>,
        aux: Vec<Scalar>,
        constraints: usize,
        mut trace: Trace,
    ) -> Result<WitnessValues> {
        // The `input * 0 = 0` constraints of every input, as recorded.
        for _ in 0..inputs.len() {
            trace.step(ENFORCE);
        }
        let found = (inputs.len(), aux.len(), constraints);
        let recorded = (self.inputs, self.aux, self.constraints);
        if found != recorded || trace != self.trace {
            return Err(Error::CircuitStructure(format!(
                "recorded {} inputs, {} aux, {} constraints; this circuit has {}, {}, {}{}",
                recorded.0,
                recorded.1,
                recorded.2,
                found.0,
                found.1,
                found.2,
                if found == recorded {
                    " in another order"
                } else {
                    ""
                }
            )));
        }
        Ok(WitnessValues { inputs, aux })
    }

    /// The proving assignment of a checked witness: a = A·z, b = B·z, c = C·z.
    pub fn products(&self, witness: WitnessValues) -> ProvingAssignment {
        let WitnessValues { inputs, aux } = witness;
        let [a, b, c] = self.products_of(&inputs, &aux);
        ProvingAssignment {
            a,
            b,
            c,
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
            deferred_products: None,
        }
    }

    /// `circuit`'s witness as a proving assignment whose a, b, c are left to the proof
    /// (`deferred_products`): its engine computes them where it runs, on a GPU with the
    /// matrices resident beside the bases. Refused as [`witness`](Self::witness) refuses.
    pub fn witness_assignment<W: WitnessRun>(
        self: &Arc<Self>,
        circuit: W,
    ) -> Result<ProvingAssignment> {
        let WitnessValues { inputs, aux } = circuit.witness_of(self)?;
        Ok(ProvingAssignment {
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
            deferred_products: Some(self.clone()),
            ..Default::default()
        })
    }

    /// A·z, B·z and C·z on the CPU, z the `inputs` then the `aux` values.
    pub fn products_of(&self, inputs: &[Scalar], aux: &[Scalar]) -> [Vec<Scalar>; 3] {
        let ((a, b), c) = rayon::join(
            || {
                rayon::join(
                    || self.a.times(&self.values, inputs, aux),
                    || self.b.times(&self.values, inputs, aux),
                )
            },
            || self.c.times(&self.values, inputs, aux),
        );
        [a, b, c]
    }
}

/// A witness checked against recorded matrices ([`ConstraintMatrices::witness`]).
pub struct WitnessValues {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
}

/// A circuit whose witness is computed in parts on several threads. Each part is a circuit
/// that makes the allocations of `prefix` (a circuit of those alone) first, then its own;
/// the whole circuit's are the prefix's, then each part's own, in order. Filecoin's
/// circuits have this shape: public values first, then challenges that only read them.
pub struct CircuitParts<C> {
    pub prefix: C,
    pub parts: Vec<C>,
}

/// How recorded matrices get a circuit's witness: a [`Circuit`] runs whole, a
/// [`CircuitParts`] in parts.
pub trait WitnessRun: Send {
    fn witness_of(self, matrices: &ConstraintMatrices) -> Result<WitnessValues>;

    /// Threads the run keeps busy: a batch synthesizes fewer circuits at once when each
    /// fills several, so that the next proof's circuit is ready first instead of all at once.
    fn parallelism(&self) -> usize {
        1
    }
}

impl<C: Circuit<Scalar> + Send> WitnessRun for C {
    fn witness_of(self, matrices: &ConstraintMatrices) -> Result<WitnessValues> {
        matrices.witness(self)
    }
}

impl<C: Circuit<Scalar> + Send> WitnessRun for CircuitParts<C> {
    fn witness_of(self, matrices: &ConstraintMatrices) -> Result<WitnessValues> {
        matrices.witness_in_parts(self)
    }

    fn parallelism(&self) -> usize {
        self.parts.len().max(1)
    }
}

/// The constraint system that records: linear combinations into matrix rows, variables
/// counted, values never asked for.
struct Recorder {
    inputs: usize,
    aux: usize,
    constraints: usize,
    a: Matrix,
    b: Matrix,
    c: Matrix,
    values: Vec<Scalar>,
    index_of: HashMap<[u8; 32], u32>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    trace: Trace,
}

impl Recorder {
    fn new() -> Self {
        let values = vec![Scalar::ONE, -Scalar::ONE];
        let index_of = values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.to_repr(), i as u32))
            .collect();
        Recorder {
            inputs: 0,
            aux: 0,
            constraints: 0,
            a: Matrix::new(),
            b: Matrix::new(),
            c: Matrix::new(),
            values,
            index_of,
            a_aux_density: Density::default(),
            b_input_density: Density::default(),
            b_aux_density: Density::default(),
            trace: Trace::default(),
        }
    }

    fn coefficient(&mut self, value: &Scalar) -> u32 {
        // Most coefficients are ±1: compared before hashing (the canonical bytes take a
        // conversion out of Montgomery form).
        if *value == self.values[PLUS_ONE as usize] {
            return PLUS_ONE;
        }
        if *value == self.values[MINUS_ONE as usize] {
            return MINUS_ONE;
        }
        let next = self.values.len() as u32;
        let index = *self.index_of.entry(value.to_repr()).or_insert(next);
        if index == next {
            self.values.push(*value);
        }
        index
    }

    /// Appends `lc` as the next row of matrix `which` (0: A, 1: B, 2: C), marking its
    /// variables in that matrix's densities as bellperson's `eval_with_trackers` does: on a
    /// nonzero coefficient.
    fn row(&mut self, which: usize, lc: &LinearCombination<Scalar>) {
        let mut entries = Vec::new();
        for (&i, coeff) in lc.iter_inputs() {
            if !coeff.is_zero_vartime() {
                entries.push((i as u32, self.coefficient(coeff)));
                if which == 1 {
                    self.b_input_density.mark(i);
                }
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if !coeff.is_zero_vartime() {
                entries.push((i as u32 | AUX, self.coefficient(coeff)));
                match which {
                    0 => self.a_aux_density.mark(i),
                    1 => self.b_aux_density.mark(i),
                    _ => {}
                }
            }
        }
        let matrix = match which {
            0 => &mut self.a,
            1 => &mut self.b,
            _ => &mut self.c,
        };
        for (column, coefficient) in entries {
            matrix.columns.push(column);
            matrix.coefficients.push(coefficient);
        }
        matrix.row_starts.push(matrix.columns.len() as u64);
    }

    fn enforce_lcs(
        &mut self,
        a: LinearCombination<Scalar>,
        b: LinearCombination<Scalar>,
        c: LinearCombination<Scalar>,
    ) {
        self.row(0, &a);
        self.row(1, &b);
        self.row(2, &c);
        self.trace.step(ENFORCE);
    }

    /// Appends bellperson's `input * 0 = 0` constraint of every input, and the matrices.
    fn finish(mut self) -> ConstraintMatrices {
        let constraints = self.constraints;
        for i in 0..self.inputs {
            let one = LinearCombination::zero() + Variable(Index::Input(i));
            self.enforce_lcs(one, LinearCombination::zero(), LinearCombination::zero());
        }
        ConstraintMatrices {
            inputs: self.inputs,
            aux: self.aux,
            constraints,
            a: self.a,
            b: self.b,
            c: self.c,
            values: self.values,
            a_aux_density: self.a_aux_density,
            b_input_density: self.b_input_density,
            b_aux_density: self.b_aux_density,
            trace: self.trace,
        }
    }
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        self.a_aux_density.push();
        self.b_aux_density.push();
        self.trace.step(ALLOC);
        Ok(Variable(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        self.b_input_density.push();
        self.trace.step(INPUT);
        Ok(Variable(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
        self.enforce_lcs(
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
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

/// The constraint system of a witness run: values allocated, constraints only counted.
#[derive(Default)]
struct Witness {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    /// The first allocations, which a part shares with its prefix: counted and traced, their
    /// values not kept (the prefix's run keeps them).
    shared_inputs: usize,
    shared_aux: usize,
    /// Steps of the prefix, and the trace and (inputs, aux) counts seen when this run had
    /// taken as many: a part must have followed the prefix exactly.
    prefix_steps: u64,
    at_prefix: Option<(Trace, (usize, usize))>,
    input_count: usize,
    aux_count: usize,
    constraints: usize,
    trace: Trace,
}

impl Witness {
    /// Runs `circuit` after the ONE input, keeping the values of all but the first
    /// `shared` (inputs, aux) allocations, noting where it stood after `prefix_steps` steps,
    /// its vectors sized for `capacity`.
    fn run<C: Circuit<Scalar>>(
        circuit: C,
        shared: (usize, usize),
        prefix_steps: u64,
        capacity: (usize, usize),
    ) -> Result<Self> {
        let mut witness = Witness {
            inputs: Vec::with_capacity(capacity.0),
            aux: Vec::with_capacity(capacity.1),
            shared_inputs: shared.0,
            shared_aux: shared.1,
            prefix_steps,
            ..Default::default()
        };
        witness.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut witness)?;
        Ok(witness)
    }

    /// Allocations and constraints seen.
    fn steps(&self) -> u64 {
        (self.input_count + self.aux_count + self.constraints) as u64
    }

    fn step(&mut self, event: u8) {
        self.trace.step(event);
        if self.steps() == self.prefix_steps {
            self.at_prefix = Some((self.trace, (self.input_count, self.aux_count)));
        }
    }
}

impl ConstraintSystem<Scalar> for Witness {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        if self.aux_count >= self.shared_aux {
            self.aux.push(value);
        }
        self.aux_count += 1;
        self.step(ALLOC);
        Ok(Variable(Index::Aux(self.aux_count - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        if self.input_count >= self.shared_inputs {
            self.inputs.push(value);
        }
        self.input_count += 1;
        self.step(INPUT);
        Ok(Variable(Index::Input(self.input_count - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
        self.step(ENFORCE);
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
