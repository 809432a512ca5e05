//! `wgpu-groth16 info`: every adapter, its limits and features.

use std::process::ExitCode;
use wgpu_groth16::gpu::context::{enumerate_adapters, has_compute, select_adapter, Capabilities};
use wgpu_groth16::gpu::memory::device_memory;
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::Result;

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

pub fn run(explicit: &AdapterSelector) -> Result<ExitCode> {
    let selector = AdapterSelector::resolve(explicit)?;
    let adapters = enumerate_adapters(&AdapterSelector {
        name: None,
        ..selector.clone()
    });
    if adapters.is_empty() {
        println!("no adapters found ({selector})");
    }
    let chosen = select_adapter(&selector).ok().map(|a| a.get_info());
    for adapter in adapters {
        let info = adapter.get_info();
        let limits = adapter.limits();
        let caps = Capabilities::of(adapter.features());
        let mark = if chosen.as_ref() == Some(&info) {
            "  <- selected"
        } else {
            ""
        };
        println!(
            "{} ({:?}, {:?}){mark}",
            info.name, info.backend, info.device_type
        );
        println!(
            "  driver:                 {} {}",
            info.driver, info.driver_info
        );
        println!(
            "  max storage binding:    {}",
            mib(limits.max_storage_buffer_binding_size)
        );
        println!("  max buffer:             {}", mib(limits.max_buffer_size));
        let memory = device_memory(&adapter).map_or_else(
            || "unknown to its backend: no VRAM budget by default".into(),
            |memory| memory.describe(),
        );
        println!("  device memory:          {memory}");
        println!(
            "  storage buffers/stage:  {}",
            limits.max_storage_buffers_per_shader_stage
        );
        println!(
            "  workgroup:              {} invocations, size x {}, {} KiB shared, {} per dimension",
            limits.max_compute_invocations_per_workgroup,
            limits.max_compute_workgroup_size_x,
            limits.max_compute_workgroup_storage_size / 1024,
            limits.max_compute_workgroups_per_dimension
        );
        println!(
            "  features:               compute {}, int64 {}, subgroups {}, timestamps {}, pipeline cache {}",
            yes(has_compute(&adapter)),
            yes(caps.int64),
            yes(caps.subgroups),
            yes(caps.timestamps),
            yes(caps.pipeline_cache)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
