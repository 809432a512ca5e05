//! Element-wise field operations with two backends behind one seam: the CPU reference
//! (blstrs) and the GPU kernels of `shaders/field_ops.wgsl`. Tests and the self-test run the
//! same inputs through both and compare.

use super::{wgsl, GpuField};
use crate::error::{Error, Result};
use crate::gpu::program::{concat, UniformLayout};
use crate::gpu::{Binding, Compiled, EntryPoint, GpuContext, Program, WideMul};
use crate::uniform_layout;
use blstrs::{Fp, Fp2, Scalar};
use ff::Field;

/// `shaders/field_ops.wgsl`: element-wise operations, one entry point per field.
pub struct FieldOpsProgram;

/// The entry points of [`FieldOpsProgram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOpsEntry {
    Fq,
    Fr,
    Fq2,
}

impl EntryPoint for FieldOpsEntry {
    const ALL: &'static [Self] = &[FieldOpsEntry::Fq, FieldOpsEntry::Fr, FieldOpsEntry::Fq2];

    fn name(self) -> &'static str {
        match self {
            FieldOpsEntry::Fq => "fq_ops",
            FieldOpsEntry::Fr => "fr_ops",
            FieldOpsEntry::Fq2 => "fq2_ops",
        }
    }

    fn workgroup_size(self) -> u32 {
        64
    }
}

/// Mirrors `FieldOpParams` in field_ops.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct FieldOpParams {
    count: u32,
    op: u32,
}

impl Program for FieldOpsProgram {
    type Entry = FieldOpsEntry;
    const BINDINGS: &'static [Binding] = &[
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadWrite,
        Binding::Uniform,
    ];
    const UNIFORMS: &'static [(u32, UniformLayout)] =
        &[(3, uniform_layout!(FieldOpParams { count, op }))];

    fn name() -> &'static str {
        "FieldOps"
    }

    fn source(wide: WideMul) -> String {
        let mut parts = wgsl::with_fq_and_fr(wide);
        parts.extend(wgsl::fq2(wide));
        parts.extend([include_str!("../../shaders/field_ops.wgsl")]);
        concat(&parts)
    }
}

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
    const ENTRY: FieldOpsEntry;

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
    ($field:ty, $entry:expr, $bytes:literal) => {
        impl ReferenceField for $field {
            const ENTRY: FieldOpsEntry = $entry;

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

prime_reference_field!(Fp, FieldOpsEntry::Fq, 48);
prime_reference_field!(Scalar, FieldOpsEntry::Fr, 32);

impl ReferenceField for Fp2 {
    const ENTRY: FieldOpsEntry = FieldOpsEntry::Fq2;

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
    program: Compiled<FieldOpsProgram>,
}

impl FieldKernels {
    pub fn new(gpu: &GpuContext, wide_mul: WideMul) -> Result<Self> {
        Ok(FieldKernels {
            gpu: gpu.clone(),
            program: gpu.compile(wide_mul)?,
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
        let params = FieldOpParams {
            count: lhs.len() as u32,
            op: op as u32,
        };
        let params = gpu.uniform_buffer("params", bytemuck::bytes_of(&params))?;
        let submission = gpu.dispatch(
            &self.program,
            F::ENTRY,
            &[&a, &b, &out, &params],
            lhs.len() as u64,
            1,
        )?;
        gpu.wait_for(submission)?;
        Ok(F::from_bytes(&gpu.read_buffer(&out)?))
    }
}
