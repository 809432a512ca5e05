//! Shared GPU state for one test binary: devices and pipelines are built once, not per test
//! (shader compilation on lavapipe costs seconds).
//!
//! Without an adapter a GPU test is skipped with a message, except under `CI=true`, where it
//! fails: a broken driver install must not turn into a silent pass.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use wgpu_groth16::field::ops::FieldKernels;
use wgpu_groth16::gpu::{AdapterSelector, GpuContext, WideMul};

/// Which adapter a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The best native adapter (lavapipe in CI).
    Native,
    /// The GL backend (llvmpipe in CI): no int64, so only the portable path.
    Gl,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn open(target: Target) -> Option<GpuContext> {
    let backends = match target {
        Target::Native => wgpu::Backends::all() - wgpu::Backends::GL,
        Target::Gl => wgpu::Backends::GL,
    };
    let selector = AdapterSelector {
        backends: Some(backends),
        ..Default::default()
    };
    match GpuContext::new(&selector) {
        Ok(gpu) => Some(gpu),
        Err(err) if in_ci() => panic!("CI=true and no {target:?} adapter: {err}"),
        Err(err) => {
            eprintln!("skipping: no {target:?} adapter ({err})");
            None
        }
    }
}

/// The device of `target`, opened once per test binary.
pub fn gpu(target: Target) -> Option<&'static GpuContext> {
    static NATIVE: OnceLock<Option<GpuContext>> = OnceLock::new();
    static GL: OnceLock<Option<GpuContext>> = OnceLock::new();
    match target {
        Target::Native => NATIVE.get_or_init(|| open(Target::Native)),
        Target::Gl => GL.get_or_init(|| open(Target::Gl)),
    }
    .as_ref()
}

/// The field kernels of one path on one target, compiled once per test binary. Under
/// `CI=true` a target that lacks the path fails the test.
pub fn field_kernels(target: Target, wide: WideMul) -> Option<&'static FieldKernels> {
    static CACHE: OnceLock<Mutex<HashMap<(Target, WideMul), &'static FieldKernels>>> =
        OnceLock::new();
    let gpu = gpu(target)?;
    if !gpu.supported_wide_muls().contains(&wide) {
        assert!(
            !in_ci(),
            "CI=true and {} lacks the {wide} path",
            gpu.describe()
        );
        eprintln!("skipping: {} lacks the {wide} path", gpu.describe());
        return None;
    }
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    Some(*cache.entry((target, wide)).or_insert_with(|| {
        let kernels = FieldKernels::new(gpu, wide).expect("field kernels compile");
        Box::leak(Box::new(kernels))
    }))
}

/// The MSM kernels of curve `C` on the native adapter, compiled once per test binary.
pub fn msm_kernels<C: wgpu_groth16::curve::GpuCurve>(
    wide: WideMul,
) -> Option<&'static wgpu_groth16::msm::MsmKernels<C>> {
    use std::any::Any;
    use wgpu_groth16::msm::{MsmConfig, MsmKernels};
    type Cache = HashMap<(&'static str, WideMul), &'static (dyn Any + Send + Sync)>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let gpu = gpu(Target::Native)?;
    if !gpu.supported_wide_muls().contains(&wide) {
        assert!(
            !in_ci(),
            "CI=true and {} lacks the {wide} path",
            gpu.describe()
        );
        return None;
    }
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    let entry = cache.entry((C::NAME, wide)).or_insert_with(|| {
        let kernels =
            MsmKernels::<C>::new(gpu, wide, MsmConfig::default()).expect("MSM kernels compile");
        Box::leak(Box::new(kernels))
    });
    entry.downcast_ref::<MsmKernels<C>>()
}

/// The NTT kernels of one path on the native adapter, compiled once per test binary.
pub fn ntt_kernels(wide: WideMul) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::NttKernels;
    static CACHE: OnceLock<Mutex<HashMap<WideMul, &'static NttKernels>>> = OnceLock::new();
    let gpu = gpu(Target::Native)?;
    if !gpu.supported_wide_muls().contains(&wide) {
        assert!(
            !in_ci(),
            "CI=true and {} lacks the {wide} path",
            gpu.describe()
        );
        return None;
    }
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    Some(*cache.entry(wide).or_insert_with(|| {
        Box::leak(Box::new(
            NttKernels::new(gpu, wide).expect("NTT kernels compile"),
        ))
    }))
}
