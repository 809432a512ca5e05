//! `wgpu-groth16 demo`: until the prover lands, the main job is opening the best adapter,
//! checking every GPU field operation on both wide-multiply paths against blstrs, then a G1
//! and a G2 MSM against blstrs and an H step against bellperson, with times beside the CPU's.

use std::process::ExitCode;
use std::time::Instant;
use wgpu_groth16::curve::{sample_bases, G1, G2};
use wgpu_groth16::field::check::check_all;
use wgpu_groth16::field::ops::FieldKernels;
use wgpu_groth16::field::samples::sample_scalars;
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};
use wgpu_groth16::msm::{msm_cpu, MsmConfig, MsmKernels};
use wgpu_groth16::ntt::{h_coefficients_cpu, NttKernels};
use wgpu_groth16::Result;

pub fn run(selector: &AdapterSelector, random: usize, seed: u64) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    println!("{}", super::adapter_line(&gpu));
    println!(
        "{:<9} {:<6} {:<18} {:>9} {:>10}",
        "path", "field", "operation", "elements", "mismatches"
    );
    let mut failures = Vec::new();
    for wide in gpu.supported_wide_muls() {
        let kernels = FieldKernels::new(&gpu, wide)?;
        let start = Instant::now();
        for check in check_all(&kernels, seed, random)? {
            println!(
                "{:<9} {:<6} {:<18} {:>9} {:>10}",
                check.wide_mul.to_string(),
                check.field,
                format!("{:?}", check.op),
                check.elements,
                check.mismatches
            );
            failures.extend(check.first_mismatch);
        }
        println!(
            "{wide}: compiled in {:.2?}, checked in {:.2?}",
            kernels.compile_time(),
            start.elapsed()
        );
    }
    let wide = gpu.preferred_wide_mul();
    let log_n = 12;
    let n = 1 << log_n;
    println!(
        "\n{:<34} {:>12} {:>12} {:>8}",
        format!("2^{log_n} elements, {wide} path"),
        "GPU",
        "CPU",
        "equal"
    );
    let g1 = MsmKernels::<G1>::new(&gpu, wide, MsmConfig::default())?;
    let g2 = MsmKernels::<G2>::new(&gpu, wide, MsmConfig::default())?;
    let ntt = NttKernels::new(&gpu, wide)?;
    let scalars = sample_scalars(seed, n, true);
    let (bases1, bases2) = (sample_bases::<G1>(seed, n), sample_bases::<G2>(seed, n));
    failures.extend(compare(
        "G1 MSM (Filecoin-like scalars)",
        || g1.msm_once(&bases1, &scalars),
        || msm_cpu::<G1>(&bases1, &scalars),
    )?);
    failures.extend(compare(
        "G2 MSM (Filecoin-like scalars)",
        || g2.msm_once(&bases2, &scalars),
        || msm_cpu::<G2>(&bases2, &scalars),
    )?);
    let (a, b) = (
        sample_scalars(seed + 1, n, false),
        sample_scalars(seed + 2, n, false),
    );
    let c: Vec<_> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
    failures.extend(compare(
        "H step",
        || ntt.h_coefficients(&a, &b, &c),
        || h_coefficients_cpu(&a, &b, &c),
    )?);
    if failures.is_empty() {
        println!("every GPU result equals the CPU reference");
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failures {
            eprintln!("mismatch: {f}");
        }
        Ok(ExitCode::FAILURE)
    }
}

/// Runs one job on the GPU (uploads included) and on the CPU, prints both times, and returns
/// a failure line if the results differ.
fn compare<T: PartialEq>(
    what: &str,
    gpu: impl FnOnce() -> Result<T>,
    cpu: impl FnOnce() -> Result<T>,
) -> Result<Option<String>> {
    let t = Instant::now();
    let on_gpu = gpu()?;
    let gpu_time = t.elapsed();
    let t = Instant::now();
    let on_cpu = cpu()?;
    let cpu_time = t.elapsed();
    let equal = on_gpu == on_cpu;
    println!(
        "{what:<34} {:>12} {:>12} {:>8}",
        format!("{gpu_time:.2?}"),
        format!("{cpu_time:.2?}"),
        if equal { "yes" } else { "NO" }
    );
    Ok((!equal).then(|| format!("{what}: GPU and CPU results differ")))
}
