//! GPU-versus-blstrs comparison of every field operation: the engine behind the field tests
//! and the CLI self-test.

use super::ops::{apply_cpu, FieldKernels, FieldOp, ReferenceField};
use super::samples::{operand_pairs, SampleField};
use crate::error::Result;
use crate::gpu::WideMul;
use blstrs::{Fp, Fp2, Scalar};

/// The outcome of one operation on one field through one wide-multiply path.
#[derive(Clone, Debug)]
pub struct OpCheck {
    pub field: &'static str,
    pub op: FieldOp,
    pub wide_mul: WideMul,
    pub elements: usize,
    pub mismatches: usize,
    /// The first disagreement, described, for the failure message.
    pub first_mismatch: Option<String>,
}

impl OpCheck {
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// Runs `op` over edge-case and `random_pairs` seeded random operands on the GPU and on
/// blstrs, and counts disagreements.
pub fn check_op<F: ReferenceField + SampleField>(
    kernels: &FieldKernels,
    op: FieldOp,
    seed: u64,
    random_pairs: usize,
) -> Result<OpCheck> {
    let (lhs, rhs) = operand_pairs::<F>(seed, random_pairs);
    let gpu = kernels.apply(op, &lhs, &rhs)?;
    let cpu = apply_cpu(op, &lhs, &rhs)?;
    let bad: Vec<usize> = (0..cpu.len())
        .filter(|&i| gpu.get(i) != Some(&cpu[i]))
        .collect();
    Ok(OpCheck {
        field: F::NAME,
        op,
        wide_mul: kernels.wide_mul(),
        elements: lhs.len(),
        mismatches: bad.len() + cpu.len().abs_diff(gpu.len()),
        first_mismatch: bad.first().map(|&i| {
            format!(
                "{}::{op:?} #{i}: a = {:?}, b = {:?}: gpu {:?}, blstrs {:?}",
                F::NAME,
                lhs[i],
                rhs[i],
                gpu[i],
                cpu[i]
            )
        }),
    })
}

/// Every operation of every field.
pub fn check_all(kernels: &FieldKernels, seed: u64, random_pairs: usize) -> Result<Vec<OpCheck>> {
    let mut checks = Vec::new();
    for op in FieldOp::ALL {
        if Fp::supports(op) {
            checks.push(check_op::<Fp>(kernels, op, seed, random_pairs)?);
        }
        if Scalar::supports(op) {
            checks.push(check_op::<Scalar>(kernels, op, seed, random_pairs)?);
        }
        if Fp2::supports(op) {
            checks.push(check_op::<Fp2>(kernels, op, seed, random_pairs)?);
        }
    }
    Ok(checks)
}
