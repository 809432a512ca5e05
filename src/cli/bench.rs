//! `wgpu-groth16 bench ...`: measurements, printed as tables for BENCHMARKS.md.

use std::process::ExitCode;
use wgpu_groth16::field::bench::{run as run_field_bench, FieldBenchConfig};
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};
use wgpu_groth16::Result;

fn rate(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2} G/s", x / 1e9)
    } else {
        format!("{:.2} M/s", x / 1e6)
    }
}

pub fn field(selector: &AdapterSelector, threads: Option<u32>) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    let mut config = FieldBenchConfig::for_device(&gpu);
    if let Some(t) = threads {
        config.threads = t;
    }
    println!(
        "adapter: {} (driver {} {})",
        gpu.describe(),
        gpu.info.driver,
        gpu.info.driver_info
    );
    println!(
        "threads per dispatch: {}, best of {}",
        config.threads, config.repetitions
    );
    let rates = run_field_bench(&gpu, &config)?;
    println!(
        "| operation | path | rate | share of ceiling (u32 mul rate / limb products) | compile |"
    );
    println!("|---|---|---|---|---|");
    for r in &rates {
        let path = r.wide_mul.map_or("-".to_string(), |w| w.to_string());
        // A field mul's ceiling: the raw multiply rate over the multiplies one mul needs.
        let ceiling = r.ceiling.and_then(|(raw, per_op)| {
            rates
                .iter()
                .find(|m| m.operation == raw)
                .map(|m| r.ops_per_second * per_op as f64 / m.ops_per_second)
        });
        println!(
            "| {} | {path} | {} | {} | {:.2?} |",
            r.operation,
            rate(r.ops_per_second),
            ceiling.map_or("-".to_string(), |c| format!("{:.0}%", c * 100.0)),
            r.compile_time
        );
    }
    Ok(ExitCode::SUCCESS)
}
