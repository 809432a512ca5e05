//! GPU NTTs equal bellperson's EvaluationDomain element for element (fft, ifft, coset_fft,
//! icoset_fft), on both wide-multiply paths, for every size 2^0..2^12, random and edge inputs.

mod common;

use blstrs::Scalar;
use common::{
    ntt_kernels, ntt_kernels_in_parts, ntt_kernels_local, ntt_kernels_radix4, ntt_kernels_single,
};
use ff::Field;
use wgpu_groth16::field::samples::random;
use wgpu_groth16::gpu::WideMul;
use wgpu_groth16::ntt::{h_coefficients_cpu, ntt_cpu, NttKernels, NttOp};
use wgpu_groth16::Error;

fn assert_equals_bellperson(kernels: &NttKernels, values: &[Scalar], what: &str) {
    for op in NttOp::ALL {
        let gpu = kernels.transform(values, op).expect("GPU NTT runs");
        let cpu = ntt_cpu(values, op).unwrap();
        if let Some(i) = (0..cpu.len()).find(|&i| gpu[i] != cpu[i]) {
            panic!(
                "{op:?} of {what}, n = {}, {} path: element {i}: gpu {:?}, bellperson {:?}",
                values.len(),
                kernels.wide_mul(),
                gpu[i],
                cpu[i]
            );
        }
    }
}

/// Every stage kernel: the adapter's default (on lavapipe radix-8 register passes and single
/// stages), eight stages a pass in workgroup memory (GPUs' default up to 2^24), a
/// workgroup-memory pass then radix-4 passes, and a workgroup-memory pass then single stages.
fn every_stage_kernel(wide: WideMul) -> Vec<&'static NttKernels> {
    [
        ntt_kernels(wide),
        ntt_kernels_local(wide),
        ntt_kernels_radix4(wide),
        ntt_kernels_single(wide),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn every_size_equals_bellperson(wide: WideMul) {
    for kernels in every_stage_kernel(wide) {
        for log_n in 0..=12 {
            let values = random::<Scalar>(log_n as u64, 1 << log_n);
            assert_equals_bellperson(kernels, &values, "random values");
        }
    }
}

fn edge_inputs_equal_bellperson(wide: WideMul) {
    let Some(kernels) = ntt_kernels(wide) else {
        return;
    };
    for log_n in [0, 1, 5, 10] {
        let n = 1 << log_n;
        let mut first_one = vec![Scalar::ZERO; n];
        first_one[0] = Scalar::ONE;
        let mut last_one = vec![Scalar::ZERO; n];
        last_one[n - 1] = Scalar::ONE;
        for (what, values) in [
            ("all zeros", vec![Scalar::ZERO; n]),
            ("a single 1 first", first_one),
            ("a single 1 last", last_one),
            ("all r-1", vec![-Scalar::ONE; n]),
        ] {
            assert_equals_bellperson(kernels, &values, what);
        }
    }
}

fn round_trips_restore_the_input(wide: WideMul) {
    let Some(kernels) = ntt_kernels(wide) else {
        return;
    };
    for log_n in [3, 11] {
        let values = random::<Scalar>(100 + log_n as u64, 1 << log_n);
        let there = kernels.transform(&values, NttOp::Forward).unwrap();
        assert_eq!(kernels.transform(&there, NttOp::Inverse).unwrap(), values);
        let there = kernels.transform(&values, NttOp::CosetForward).unwrap();
        assert_eq!(
            kernels.transform(&there, NttOp::CosetInverse).unwrap(),
            values
        );
    }
}

#[test]
fn ntt_equals_bellperson_for_every_size_up_to_4096_portable() {
    every_size_equals_bellperson(WideMul::Portable);
}

#[test]
fn ntt_equals_bellperson_for_every_size_up_to_4096_int64() {
    every_size_equals_bellperson(WideMul::Int64);
}

#[test]
fn ntt_equals_bellperson_for_edge_inputs_portable() {
    edge_inputs_equal_bellperson(WideMul::Portable);
}

#[test]
fn ntt_equals_bellperson_for_edge_inputs_int64() {
    edge_inputs_equal_bellperson(WideMul::Int64);
}

#[test]
fn ntt_round_trips_restore_the_input_portable() {
    round_trips_restore_the_input(WideMul::Portable);
}

#[test]
fn ntt_round_trips_restore_the_input_int64() {
    round_trips_restore_the_input(WideMul::Int64);
}

#[test]
fn a_length_that_is_not_a_power_of_two_is_refused() {
    let Some(kernels) = ntt_kernels(WideMul::Portable) else {
        return;
    };
    let err = kernels
        .transform(&random::<Scalar>(1, 6), NttOp::Forward)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(ntt_cpu(&random::<Scalar>(1, 6), NttOp::Forward).is_err());
}

fn h_step_equals_bellperson(wide: WideMul) {
    let cases = every_stage_kernel(wide)
        .into_iter()
        .flat_map(|k| [1, 2, 3, 5, 64, 100, 1000, 4096].map(|len| (k, len)));
    for (kernels, len) in cases {
        let a = random::<Scalar>(len as u64, len);
        let b = random::<Scalar>(len as u64 + 1, len);
        // c = a·b on most rows, as a satisfied circuit gives, plus a few that differ.
        let mut c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        for v in c.iter_mut().step_by(7) {
            *v += Scalar::ONE;
        }
        let gpu = kernels.h_coefficients(&a, &b, &c).expect("GPU H step runs");
        let cpu = h_coefficients_cpu(&a, &b, &c).unwrap();
        assert_eq!(gpu.len(), len.next_power_of_two() - 1);
        assert!(
            gpu == cpu,
            "H step differs from bellperson: len {len}, {wide} path"
        );
    }
}

#[test]
fn h_step_equals_bellperson_portable() {
    h_step_equals_bellperson(WideMul::Portable);
}

#[test]
fn h_step_equals_bellperson_int64() {
    h_step_equals_bellperson(WideMul::Int64);
}

#[test]
fn h_step_refuses_vectors_of_different_lengths() {
    let Some(kernels) = ntt_kernels(WideMul::Portable) else {
        return;
    };
    let v = random::<Scalar>(1, 4);
    let err = kernels.h_coefficients(&v, &v, &v[..3]).unwrap_err();
    assert!(err.to_string().contains("differ in length"), "{err}");
}

fn parts_path_equals_bellperson(wide: WideMul) {
    let Some(kernels) = ntt_kernels_in_parts(wide) else {
        return;
    };
    for log_n in [6, 8, 9, 10, 12] {
        let values = random::<Scalar>(200 + log_n as u64, 1 << log_n);
        let vector = kernels.upload(&values, log_n).unwrap();
        assert_eq!(
            vector.parts().len() > 1,
            log_n > 7,
            "2^{log_n} in {} parts",
            vector.parts().len()
        );
        assert_equals_bellperson(kernels, &values, "random values in parts");
    }
    let len = 3000;
    let (a, b) = (random::<Scalar>(5, len), random::<Scalar>(6, len));
    let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y + Scalar::ONE).collect();
    let gpu = kernels.h_coefficients(&a, &b, &c).unwrap();
    let cpu = h_coefficients_cpu(&a, &b, &c).unwrap();
    assert!(gpu == cpu, "H step in parts, {wide}");
    assert_h_in_parts_equals(kernels, &a, &b, &c, &cpu);
    // Other values of the same length: b and c are read back into the host vectors the
    // step above kept, whose old values must not leak into these.
    let c_other: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let cpu_other = h_coefficients_cpu(&b, &a, &c_other).unwrap();
    assert_h_in_parts_equals(kernels, &b, &a, &c_other, &cpu_other);
    if let Some(whole) = ntt_kernels(wide) {
        assert_h_in_parts_equals(whole, &a, &b, &c, &cpu);
    }
}

/// The H step with one of a, b, c on the device at a time equals bellperson's, with b and c
/// borrowed and owned (dropped once uploaded).
fn assert_h_in_parts_equals(
    kernels: &NttKernels,
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    expected: &[Scalar],
) {
    let borrowed = kernels.h_in_parts(a, b, c).unwrap();
    let owned = kernels.h_in_parts(a, b.to_vec(), c.to_vec()).unwrap();
    for (h, how) in [(borrowed, "borrowed"), (owned, "owned")] {
        let mut coefficients = h.download(kernels.gpu()).unwrap();
        coefficients.truncate(h.len() - 1);
        assert!(
            coefficients == expected,
            "H step one vector at a time, {} parts, b and c {how}",
            h.parts().len()
        );
    }
}

#[test]
fn ntt_over_several_buffers_equals_bellperson_portable() {
    parts_path_equals_bellperson(WideMul::Portable);
}

#[test]
fn ntt_over_several_buffers_equals_bellperson_int64() {
    parts_path_equals_bellperson(WideMul::Int64);
}

#[test]
fn a_vector_too_large_for_parts_under_the_limit_is_refused() {
    let Some(kernels) = ntt_kernels_in_parts(WideMul::Portable) else {
        return;
    };
    // 2^16 elements in parts of 128 would need 512 parts of 2^7: more parts than elements
    // per part, which the bit reversal between parts does not handle.
    let err = kernels.upload(&[], 16).err().expect("refused");
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
}
