//! What the command line's tests share: the binary and its files ([`cli`]), and whether an
//! adapter exists for the tests that need one.

#![allow(dead_code)] // each test binary uses its own part of this module

pub mod cli;

use wgpu_groth16::gpu::context::select_adapters;
use wgpu_groth16::gpu::AdapterSelector;

/// The best native (not GL) adapter's description. Without one a GPU test is skipped with a
/// message, except under `CI=true`, where it fails: a broken driver install must not turn
/// into a silent pass.
pub fn native_adapter() -> Option<wgpu::AdapterInfo> {
    let selector = AdapterSelector {
        backends: Some(wgpu::Backends::all() - wgpu::Backends::GL),
        ..Default::default()
    };
    match select_adapters(&selector) {
        Ok(adapters) => Some(adapters[0].get_info()),
        Err(err) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("CI=true and no native adapter: {err}")
        }
        Err(err) => {
            eprintln!("skipping: no native adapter ({err})");
            None
        }
    }
}
