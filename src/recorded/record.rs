//! Recording: a circuit run through a constraint system that turns its linear combinations
//! into matrix rows and never asks for a value.

use std::collections::HashMap;
use std::time::Instant;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::trace::{ALLOC, ENFORCE, INPUT};
use super::{Density, Matrix, RecordedSystem, Trace, AUX, MINUS_ONE, PLUS_ONE};
use crate::error::Result;

impl RecordedSystem {
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
    fn finish(mut self) -> RecordedSystem {
        let constraints = self.constraints;
        for i in 0..self.inputs {
            let one = LinearCombination::zero() + Variable(Index::Input(i));
            self.enforce_lcs(one, LinearCombination::zero(), LinearCombination::zero());
        }
        RecordedSystem {
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
            part_sizes: Default::default(),
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
