//! One constraint matrix in compressed sparse rows, and its product with a witness on the CPU.

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{CsrView, AUX, MINUS_ONE, PLUS_ONE};

/// One matrix in compressed sparse rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Matrix {
    /// Row `r` is entries `row_starts[r]..row_starts[r + 1]`.
    pub(super) row_starts: Vec<u64>,
    /// Variable of each entry: an input index, or an aux index tagged [`AUX`].
    pub(super) columns: Vec<u32>,
    /// Index of each entry's coefficient in [`RecordedSystem::values`](super::RecordedSystem::values).
    pub(super) coefficients: Vec<u32>,
}

impl Matrix {
    pub(super) fn new() -> Self {
        Matrix {
            row_starts: vec![0],
            ..Default::default()
        }
    }

    pub(super) fn rows(&self) -> usize {
        self.row_starts.len() - 1
    }

    pub(super) fn view(&self) -> CsrView<'_> {
        CsrView {
            row_starts: &self.row_starts,
            columns: &self.columns,
            coefficients: &self.coefficients,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.row_starts.len() * 8 + self.columns.len() * 4 + self.coefficients.len() * 4
    }

    /// `M · z` with z the inputs then the aux variables, on all cores.
    pub(super) fn times(
        &self,
        values: &[Scalar],
        inputs: &[Scalar],
        aux: &[Scalar],
    ) -> Vec<Scalar> {
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
