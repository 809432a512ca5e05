//! Every GPU field operation equals blstrs, on both wide-multiply paths and on the GL
//! backend, for edge cases and seeded random operands.

mod common;

use blstrs::{Fp, Fp2, Scalar};
use common::{field_kernels, gpu, Target};
use wgpu_groth16::field::check::check_op;
use wgpu_groth16::field::ops::{apply_cpu, FieldOp, FieldOpsProgram, ReferenceField};
use wgpu_groth16::field::samples::{operand_pairs, plus_modulus, SampleField};
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

/// On the int64 path Fq's operations take operands below 2p (their own results): every
/// operation on a + p and b + p equals blstrs on a and b.
fn operands_below_2p_equal_blstrs<F: ReferenceField + SampleField>() {
    let Some(kernels) = field_kernels(Target::Native, WideMul::Int64) else {
        return;
    };
    for op in FieldOp::ALL.into_iter().filter(|&op| F::supports(op)) {
        let (lhs, rhs) = operand_pairs::<F>(0xb0 ^ op as u64, 64);
        let gpu = kernels
            .apply(op, &plus_modulus(&lhs), &plus_modulus(&rhs))
            .expect("kernel runs");
        assert_eq!(
            gpu,
            apply_cpu(op, &lhs, &rhs).unwrap(),
            "{}::{op:?}",
            F::NAME
        );
    }
}

#[test]
fn fq_operations_take_operands_below_2p_on_int64_path() {
    operands_below_2p_equal_blstrs::<Fp>();
}

#[test]
fn fq2_operations_take_operands_below_2p_on_int64_path() {
    operands_below_2p_equal_blstrs::<Fp2>();
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

/// Compiled pipelines persist in a cache file, written whole through a temporary of the
/// process's own; a file under the cache's name that is not a cache (a FIFO, which the old
/// read waited on forever; a file far too large) is ignored, and the device still compiles
/// and saves a real cache there.
#[test]
fn the_pipeline_cache_is_written_whole_and_a_foreign_file_is_ignored() {
    let Some(gpu) = gpu(Target::Native) else {
        return;
    };
    if !gpu.capabilities.pipeline_cache {
        eprintln!("skipping: {} has no pipeline cache", gpu.describe());
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pipeline_cache");
    let _ = std::fs::remove_dir_all(&dir);
    let open_and_compile = || {
        let mut own = wgpu_groth16::gpu::GpuContext::from_adapter(gpu.adapter.clone()).unwrap();
        own.use_pipeline_cache(&dir).unwrap();
        own.compile::<FieldOpsProgram>(WideMul::Portable).unwrap();
    };
    open_and_compile();
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one cache file, no temporary: {files:?}");
    let cache = &files[0];
    assert!(std::fs::metadata(cache).unwrap().is_file());

    // A sparse file of 1 GiB, then a FIFO, under the cache's name.
    std::fs::File::create(cache)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    open_and_compile();
    assert!(std::fs::metadata(cache).unwrap().len() < 1 << 30);
    std::fs::remove_file(cache).unwrap();
    let made = std::process::Command::new("mkfifo").arg(cache).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipping the FIFO: mkfifo failed");
        return;
    }
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            open_and_compile();
            let _ = done.send(());
        });
        let opened = finished.recv_timeout(std::time::Duration::from_secs(60));
        if opened.is_err() {
            // Unblock the reader so the test can end, then fail.
            let _ = std::fs::OpenOptions::new().write(true).open(cache);
            panic!("opening a device waited on the FIFO under the cache's name");
        }
    });
    assert!(
        std::fs::metadata(cache).unwrap().is_file(),
        "a real cache replaced the FIFO"
    );
}
