//! The CPU reference: bellperson's `EvaluationDomain` itself, and the checks both paths share.

use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use ff::PrimeField;

use super::NttOp;
use crate::error::{Error, Result};

/// log2 of a power-of-two length, or an error naming the problem.
pub(crate) fn log2_of(len: usize) -> Result<u32> {
    if !len.is_power_of_two() {
        return Err(Error::InvalidInput(format!(
            "an NTT needs a power-of-two length, got {len}"
        )));
    }
    let log_n = len.trailing_zeros();
    if log_n >= Scalar::S {
        return Err(Error::InvalidInput(format!(
            "2^{log_n} exceeds the largest Fr domain, 2^{}",
            Scalar::S - 1
        )));
    }
    Ok(log_n)
}

/// bellperson's transform of `values` (whose length must be a power of two).
pub fn ntt_cpu(values: &[Scalar], op: NttOp) -> Result<Vec<Scalar>> {
    log2_of(values.len())?;
    let worker = ec_gpu_gen::threadpool::Worker::new();
    let mut domain = EvaluationDomain::from_coeffs(values.to_vec())
        .map_err(|e| Error::InvalidInput(format!("bellperson refused the domain: {e}")))?;
    let mut kernel = None;
    let done = match op {
        NttOp::Forward => domain.fft(&worker, &mut kernel),
        NttOp::Inverse => domain.ifft(&worker, &mut kernel),
        NttOp::CosetForward => domain.coset_fft(&worker, &mut kernel),
        NttOp::CosetInverse => domain.icoset_fft(&worker, &mut kernel),
    };
    done.map_err(|e| Error::InvalidInput(format!("bellperson's transform failed: {e}")))?;
    Ok(domain.into_coeffs())
}

/// The domain size of an H step: the next power of two of the (equal) lengths.
pub(super) fn h_domain(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<usize> {
    if a.len() != b.len() || a.len() != c.len() {
        return Err(Error::InvalidInput(format!(
            "a, b, c differ in length: {}, {}, {}",
            a.len(),
            b.len(),
            c.len()
        )));
    }
    let n = a.len().max(1).next_power_of_two();
    log2_of(n)?;
    Ok(n)
}

/// bellperson's H step (`execute_fft` in its native prover), step for step.
pub fn h_coefficients_cpu(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
    h_domain(a, b, c)?;
    let refused = |e: bellperson::SynthesisError| Error::InvalidInput(format!("bellperson: {e}"));
    let worker = ec_gpu_gen::threadpool::Worker::new();
    let mut kernel = None;
    let mut a = EvaluationDomain::from_coeffs(a.to_vec()).map_err(refused)?;
    let mut b = EvaluationDomain::from_coeffs(b.to_vec()).map_err(refused)?;
    let mut c = EvaluationDomain::from_coeffs(c.to_vec()).map_err(refused)?;
    let failed = |e| Error::InvalidInput(format!("bellperson's transform failed: {e}"));
    EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut kernel)
        .map_err(failed)?;
    EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut kernel)
        .map_err(failed)?;
    a.mul_assign(&worker, &b);
    a.sub_assign(&worker, &c);
    a.divide_by_z_on_coset(&worker);
    a.icoset_fft(&worker, &mut kernel).map_err(failed)?;
    let mut h = a.into_coeffs();
    h.truncate(h.len() - 1);
    Ok(h)
}
