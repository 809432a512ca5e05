//! `wgpu-groth16 demo`: until the prover lands, the main job is opening the best adapter and
//! checking every GPU field operation on both wide-multiply paths against blstrs.

use std::process::ExitCode;
use std::time::Instant;
use wgpu_groth16::field::check::check_all;
use wgpu_groth16::field::ops::FieldKernels;
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};
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
    if failures.is_empty() {
        println!("every GPU field operation equals blstrs");
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failures {
            eprintln!("mismatch: {f}");
        }
        Ok(ExitCode::FAILURE)
    }
}
