//! Recorded constraint systems. The circuits we serve have a fixed structure: the same A, B,
//! C matrices for every proof of a circuit, only the witness changes. So a circuit's
//! constraint system is recorded once ([`RecordedSystem::record`]): its matrices, the
//! densities of its A and B queries, its shape and the trace of its synthesis. Each proof
//! then runs only the circuit's witness computation (its `alloc` closures: `enforce` never
//! builds a linear combination, [`RecordedSystem::witness`]) and gets a, b, c as sparse
//! matrix-vector products, on the CPU ([`RecordedSystem::products_of`]) or where the
//! prover's engine runs (`sparse`).
//!
//! Columns are tagged input or aux, so an input allocated after constraints that use aux
//! variables (Filecoin's `inputize`, `pack_into_inputs`) keeps its meaning. Coefficients are
//! indices into a table of the circuit's distinct values (most are ±1 or small powers of
//! two). A witness run records the sequence of allocations and constraints it saw; one that
//! differs from the recorded circuit's is refused ([`Error::CircuitStructure`](crate::Error::CircuitStructure))
//! rather than proved with the wrong matrices.
//!
//! `density` and [`Shape`] are what every proving assignment has too (the groth16
//! module's synthesis fills them for circuits it runs whole); `matrix` is one matrix;
//! `record` records a circuit; `witness` runs one against a recording; `trace` is what
//! the run is checked against; `store` keeps recordings on disk, in `format`.

mod density;
mod format;
mod matrix;
mod record;
mod store;
mod trace;
mod witness;

use std::fmt;

use blstrs::Scalar;

pub use density::Density;
pub use store::{default_recorded_dir, Origin, RecordedKey};
pub use witness::{CircuitParts, WitnessRun, WitnessValues};

use matrix::Matrix;
use trace::Trace;
use witness::PartSizes;

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

/// A circuit's constraint system, recorded once and used for every later proof of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedSystem {
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
    part_sizes: PartSizes,
}

impl RecordedSystem {
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
