//! Every GPU field operation equals blstrs, on both wide-multiply paths and on the GL
//! backend, for edge cases and seeded random operands.

mod common;

use blstrs::{Fp, Fp2, Scalar};
use common::{field_kernels, gpu, Target};
use wgpu_groth16::field::check::check_op;
use wgpu_groth16::field::ops::{FieldOp, FieldOpsProgram, ReferenceField};
use wgpu_groth16::field::samples::SampleField;
use wgpu_groth16::gpu::WideMul;
use wgpu_groth16::Error;

const RANDOM_PAIRS: usize = 512;

/// Runs every operation `F` has through the GPU and blstrs; fails listing each disagreement.
fn assert_field_equals_blstrs<F: ReferenceField + SampleField>(target: Target, wide: WideMul) {
    let Some(kernels) = field_kernels(target, wide) else {
        return;
    };
    let mut failures = Vec::new();
    for op in FieldOp::ALL.into_iter().filter(|&op| F::supports(op)) {
        let check =
            check_op::<F>(kernels, op, 0x5eed ^ op as u64, RANDOM_PAIRS).expect("kernel runs");
        assert!(check.elements > RANDOM_PAIRS, "too few operands checked");
        if !check.passed() {
            failures.push(format!(
                "{} mismatches, first: {}",
                check.mismatches,
                check.first_mismatch.unwrap_or_default()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{target:?}/{wide}:\n{}",
        failures.join("\n")
    );
}

#[test]
fn fq_operations_equal_blstrs_on_portable_path() {
    assert_field_equals_blstrs::<Fp>(Target::Native, WideMul::Portable);
}

#[test]
fn fq_operations_equal_blstrs_on_int64_path() {
    assert_field_equals_blstrs::<Fp>(Target::Native, WideMul::Int64);
}

#[test]
fn fr_operations_equal_blstrs_on_portable_path() {
    assert_field_equals_blstrs::<Scalar>(Target::Native, WideMul::Portable);
}

#[test]
fn fr_operations_equal_blstrs_on_int64_path() {
    assert_field_equals_blstrs::<Scalar>(Target::Native, WideMul::Int64);
}

#[test]
fn fq2_operations_equal_blstrs_on_portable_path() {
    assert_field_equals_blstrs::<Fp2>(Target::Native, WideMul::Portable);
}

#[test]
fn fq2_operations_equal_blstrs_on_int64_path() {
    assert_field_equals_blstrs::<Fp2>(Target::Native, WideMul::Int64);
}

#[test]
fn fq_operations_equal_blstrs_on_gl_backend() {
    assert_field_equals_blstrs::<Fp>(Target::Gl, WideMul::Portable);
}

#[test]
fn fr_operations_equal_blstrs_on_gl_backend() {
    assert_field_equals_blstrs::<Scalar>(Target::Gl, WideMul::Portable);
}

#[test]
fn fq2_operations_equal_blstrs_on_gl_backend() {
    assert_field_equals_blstrs::<Fp2>(Target::Gl, WideMul::Portable);
}

#[test]
fn empty_input_gives_empty_output() {
    let Some(kernels) = field_kernels(Target::Native, WideMul::Portable) else {
        return;
    };
    assert!(kernels
        .apply::<Fp>(FieldOp::Mul, &[], &[])
        .unwrap()
        .is_empty());
}

#[test]
fn operands_of_different_lengths_are_refused() {
    let Some(kernels) = field_kernels(Target::Native, WideMul::Portable) else {
        return;
    };
    let err = kernels
        .apply(FieldOp::Add, &[Fp::from(1u64)], &[])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
}

#[test]
fn operation_a_field_lacks_is_refused() {
    let Some(kernels) = field_kernels(Target::Native, WideMul::Portable) else {
        return;
    };
    let one = [Fp2::from(1u64)];
    let err = kernels
        .apply(FieldOp::FromMontgomery, &one, &one)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
}

#[test]
fn int64_variant_is_refused_on_an_adapter_without_int64() {
    let Some(gl) = gpu(Target::Gl) else { return };
    assert!(
        !gl.capabilities.int64,
        "expected the GL backend to lack int64"
    );
    let err = gl.compile::<FieldOpsProgram>(WideMul::Int64).unwrap_err();
    assert!(matches!(err, Error::MissingFeature { .. }), "{err}");
}
