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

use super::synthesis::{Density, ProvingAssignment};
use crate::{Error, Result};

mod store;

pub use store::{default_matrices_dir, MatricesKey, Origin};

/// Column tag of aux variables; inputs are untagged.
pub(crate) const AUX: u32 = 1 << 31;

/// Coefficient table indices of ONE and -ONE, which skip the multiplication.
const PLUS_ONE: u32 = 0;
const MINUS_ONE: u32 = 1;

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

/// Folds the sequence of a synthesis' allocations and constraints into 64 bits (FNV-1a): a
/// check that a witness run followed the recorded circuit, not a cryptographic digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Trace(u64);

impl Default for Trace {
    fn default() -> Self {
        Trace(0xcbf2_9ce4_8422_2325)
    }
}

impl Trace {
    fn step(&mut self, event: u8) {
        self.0 = (self.0 ^ u64::from(event)).wrapping_mul(0x0100_0000_01b3);
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
        let mut witness = Witness {
            inputs: Vec::with_capacity(self.inputs),
            aux: Vec::with_capacity(self.aux),
            ..Default::default()
        };
        witness.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut witness)?;
        // The `input * 0 = 0` constraints of every input, as recorded.
        for _ in 0..witness.inputs.len() {
            witness.trace.step(ENFORCE);
        }
        let found = (witness.inputs.len(), witness.aux.len(), witness.constraints);
        let recorded = (self.inputs, self.aux, self.constraints);
        if found != recorded || witness.trace != self.trace {
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
        Ok(WitnessValues {
            inputs: witness.inputs,
            aux: witness.aux,
        })
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
    pub fn witness_assignment<C: Circuit<Scalar>>(
        self: &Arc<Self>,
        circuit: C,
    ) -> Result<ProvingAssignment> {
        let WitnessValues { inputs, aux } = self.witness(circuit)?;
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
    constraints: usize,
    trace: Trace,
}

impl ConstraintSystem<Scalar> for Witness {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.trace.step(ALLOC);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        self.trace.step(INPUT);
        Ok(Variable(Index::Input(self.inputs.len() - 1)))
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
        self.trace.step(ENFORCE);
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
