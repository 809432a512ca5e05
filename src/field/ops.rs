//! Element-wise field operations with two backends behind one seam: the CPU reference
//! (blstrs) and the GPU kernels of `shaders/field_ops.wgsl`. Tests and the self-test run the
//! same inputs through both and compare.

use super::GpuField;
use crate::error::{Error, Result};
use crate::gpu::{CompiledProgram, GpuContext, Program, WideMul};
use blstrs::{Fp, Fp2, Scalar};
use ff::Field;

/// One element-wise operation; the discriminants are the shader's `OP_*` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOp {
    Add = 0,
    Sub = 1,
    Neg = 2,
    Double = 3,
    Mul = 4,
    Square = 5,
    /// Canonical integer (raw limbs) to Montgomery form. Prime fields only.
    ToMontgomery = 6,
    /// Montgomery form to canonical integer (raw limbs). Prime fields only.
    FromMontgomery = 7,
    /// Multiplication by u + 1. Fq2 only.
    MulByNonresidue = 8,
}

impl FieldOp {
    pub const ALL: [FieldOp; 9] = [
        FieldOp::Add,
        FieldOp::Sub,
        FieldOp::Neg,
        FieldOp::Double,
        FieldOp::Mul,
        FieldOp::Square,
        FieldOp::ToMontgomery,
        FieldOp::FromMontgomery,
        FieldOp::MulByNonresidue,
    ];
}

/// A field with a CPU reference for every operation it supports.
pub trait ReferenceField: GpuField + Field {
    /// The compute-shader entry point for this field.
    const ENTRY_POINT: &'static str;

    fn supports(op: FieldOp) -> bool;

    /// The blstrs result of `op`; `None` for an operation this field does not have.
    fn reference(op: FieldOp, a: &Self, b: &Self) -> Option<Self> {
        Some(match op {
            FieldOp::Add => *a + b,
            FieldOp::Sub => *a - b,
            FieldOp::Neg => -*a,
            FieldOp::Double => a.double(),
            FieldOp::Mul => *a * b,
            FieldOp::Square => a.square(),
            FieldOp::ToMontgomery | FieldOp::FromMontgomery | FieldOp::MulByNonresidue => {
                return Self::reference_special(op, a)
            }
        })
    }

    /// The operations only some fields have.
    fn reference_special(op: FieldOp, a: &Self) -> Option<Self>;
}

/// The value whose in-memory limbs are the canonical integer of `bytes_le` (not Montgomery).
fn raw<F: GpuField>(bytes_le: &[u8]) -> F {
    F::from_bytes(bytes_le)[0]
}

/// Fq and Fr: every operation but the Fq2-only one; the Montgomery conversions go through
/// blstrs' canonical byte forms.
macro_rules! prime_reference_field {
    ($field:ty, $entry_point:literal, $bytes:literal) => {
        impl ReferenceField for $field {
            const ENTRY_POINT: &'static str = $entry_point;

            fn supports(op: FieldOp) -> bool {
                op != FieldOp::MulByNonresidue
            }

            fn reference_special(op: FieldOp, a: &Self) -> Option<Self> {
                match op {
                    FieldOp::FromMontgomery => Some(raw(&a.to_bytes_le())),
                    FieldOp::ToMontgomery => {
                        let bytes: [u8; $bytes] =
                            Self::as_bytes(std::slice::from_ref(a)).try_into().ok()?;
                        <$field>::from_bytes_le(&bytes).into()
                    }
                    _ => None,
                }
            }
        }
    };
}

prime_reference_field!(Fp, "fq_ops", 48);
prime_reference_field!(Scalar, "fr_ops", 32);

impl ReferenceField for Fp2 {
    const ENTRY_POINT: &'static str = "fq2_ops";

    fn supports(op: FieldOp) -> bool {
        !matches!(op, FieldOp::ToMontgomery | FieldOp::FromMontgomery)
    }

    fn reference_special(op: FieldOp, a: &Self) -> Option<Self> {
        (op == FieldOp::MulByNonresidue).then(|| {
            let mut r = *a;
            r.mul_by_nonresidue();
            r
        })
    }
}

/// The CPU reference over whole vectors.
pub fn apply_cpu<F: ReferenceField>(op: FieldOp, lhs: &[F], rhs: &[F]) -> Result<Vec<F>> {
    check_inputs::<F>(op, lhs, rhs)?;
    Ok(lhs
        .iter()
        .zip(rhs)
        .map(|(a, b)| F::reference(op, a, b).expect("checked support above"))
        .collect())
}

fn check_inputs<F: ReferenceField>(op: FieldOp, lhs: &[F], rhs: &[F]) -> Result<()> {
    if !F::supports(op) {
        return Err(Error::InvalidInput(format!(
            "{op:?} is not defined on {}",
            F::NAME
        )));
    }
    if lhs.len() != rhs.len() {
        return Err(Error::InvalidInput(format!(
            "operands differ in length: {} and {}",
            lhs.len(),
            rhs.len()
        )));
    }
    Ok(())
}

/// The field-operation kernels of one wide-multiply variant, compiled once per device.
pub struct FieldKernels {
    gpu: GpuContext,
    program: CompiledProgram,
}

const WORKGROUP_SIZE: u32 = 64;

impl FieldKernels {
    pub fn new(gpu: &GpuContext, wide_mul: WideMul) -> Result<Self> {
        let program = gpu.compile(
            Program::FieldOps,
            wide_mul,
            &["fq_ops", "fr_ops", "fq2_ops"],
        )?;
        Ok(FieldKernels {
            gpu: gpu.clone(),
            program,
        })
    }

    pub fn wide_mul(&self) -> WideMul {
        self.program.wide_mul
    }

    pub fn compile_time(&self) -> std::time::Duration {
        self.program.compile_time
    }

    /// `op` on every pair `(lhs[i], rhs[i])` on the GPU (`rhs` is ignored by unary ops but
    /// must have the same length).
    pub fn apply<F: ReferenceField>(&self, op: FieldOp, lhs: &[F], rhs: &[F]) -> Result<Vec<F>> {
        check_inputs::<F>(op, lhs, rhs)?;
        if lhs.is_empty() {
            return Ok(Vec::new());
        }
        let gpu = &self.gpu;
        let a = gpu.storage_buffer("lhs", F::as_bytes(lhs))?;
        let b = gpu.storage_buffer("rhs", F::as_bytes(rhs))?;
        let out = gpu.empty_storage_buffer("out", std::mem::size_of_val(lhs) as u64)?;
        let params = gpu.uniform_buffer(
            "params",
            bytemuck::cast_slice(&[lhs.len() as u32, op as u32]),
        );
        let submission = gpu.dispatch(
            &self.program,
            F::ENTRY_POINT,
            &[&a, &b, &out, &params],
            lhs.len() as u64,
            WORKGROUP_SIZE,
            1,
        )?;
        gpu.wait_for(submission)?;
        Ok(F::from_bytes(&gpu.read_buffer(&out)?))
    }
}
