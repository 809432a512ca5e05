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

/// The device of `target` if it has the `wide` path. Under `CI=true` a target that lacks the
/// path fails the test instead of skipping it.
fn gpu_with_path(target: Target, wide: WideMul) -> Option<&'static GpuContext> {
    let gpu = gpu(target)?;
    if gpu.supported_wide_muls().contains(&wide) {
        return Some(gpu);
    }
    assert!(
        !in_ci(),
        "CI=true and {} lacks the {wide} path",
        gpu.describe()
    );
    eprintln!("skipping: {} lacks the {wide} path", gpu.describe());
    None
}

/// Kernels built once per test binary and key (shader compilation on lavapipe costs
/// seconds), kept for the binary's whole run.
fn built_once<T: Send + Sync + 'static>(
    key: (Target, WideMul, &'static str),
    build: impl FnOnce() -> T,
) -> &'static T {
    use std::any::Any;
    type Cache = HashMap<(Target, WideMul, &'static str), &'static (dyn Any + Send + Sync)>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    let entry = *cache
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(build())));
    entry.downcast_ref::<T>().expect("one type per key")
}

/// The field kernels of one path on one target.
pub fn field_kernels(target: Target, wide: WideMul) -> Option<&'static FieldKernels> {
    let gpu = gpu_with_path(target, wide)?;
    Some(built_once((target, wide, "field"), || {
        FieldKernels::new(gpu, wide).expect("field kernels compile")
    }))
}

/// The MSM kernels of curve `C` on the native adapter.
pub fn msm_kernels<C: wgpu_groth16::curve::GpuCurve>(
    wide: WideMul,
) -> Option<&'static wgpu_groth16::msm::MsmKernels<C>> {
    use wgpu_groth16::msm::{MsmConfig, MsmKernels};
    let gpu = gpu_with_path(Target::Native, wide)?;
    Some(built_once((Target::Native, wide, C::NAME), || {
        MsmKernels::<C>::new(gpu, wide, MsmConfig::default()).expect("MSM kernels compile")
    }))
}

/// The subgroup check of curve `C` on the native adapter.
pub fn subgroup_kernels<C: wgpu_groth16::subgroup::SubgroupCurve>(
    wide: WideMul,
) -> Option<&'static wgpu_groth16::subgroup::SubgroupKernels<C>> {
    use wgpu_groth16::subgroup::SubgroupKernels;
    let gpu = gpu_with_path(Target::Native, wide)?;
    Some(built_once((Target::Native, wide, C::PROGRAM_NAME), || {
        SubgroupKernels::<C>::new(gpu, wide).expect("subgroup kernels compile")
    }))
}

/// Both curves' curve and subgroup checks on the native adapter.
pub fn curve_check(wide: WideMul) -> Option<&'static wgpu_groth16::subgroup::GpuCurveCheck> {
    use wgpu_groth16::subgroup::GpuCurveCheck;
    let gpu = gpu_with_path(Target::Native, wide)?;
    Some(built_once((Target::Native, wide, "subgroup check"), || {
        GpuCurveCheck::new(gpu, wide).expect("subgroup kernels compile")
    }))
}

/// The NTT kernels of one path on the native adapter.
pub fn ntt_kernels(wide: WideMul) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::NttKernels;
    let gpu = gpu_with_path(Target::Native, wide)?;
    Some(built_once((Target::Native, wide, "ntt"), || {
        NttKernels::new(gpu, wide).expect("NTT kernels compile")
    }))
}

/// NTT kernels of one path on the native adapter, configured by `configure`, built once
/// under `name`.
fn ntt_kernels_with(
    wide: WideMul,
    name: &'static str,
    configure: impl FnOnce(wgpu_groth16::ntt::NttKernels) -> wgpu_groth16::ntt::NttKernels,
) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::NttKernels;
    let gpu = gpu_with_path(Target::Native, wide)?;
    Some(built_once((Target::Native, wide, name), || {
        configure(NttKernels::new(gpu, wide).expect("NTT kernels compile"))
    }))
}

/// NTT kernels that run eight stages at a time in workgroup memory (what GPUs get by
/// default up to 2^24; lavapipe by default runs radix-8 register passes); power tables of
/// 2^4 high entries (from 2^22 the default tables' twiddles are products too).
pub fn ntt_kernels_local(wide: WideMul) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::{LaterPasses, StagePasses, MAX_LOCAL_STAGES};
    ntt_kernels_with(wide, "ntt local", |kernels| {
        kernels
            .with_stage_passes(StagePasses {
                local: MAX_LOCAL_STAGES,
                later: LaterPasses::Local,
            })
            .with_high_table_bits(4)
    })
}

/// NTT kernels with one two-stage workgroup-memory pass, then radix-4 register passes, then
/// a single stage where the count is odd (GPUs above 2^24 take this with eight stages first);
/// power tables of 2^3 high entries, so that twiddles past 2^3 are products (as above 2^21).
pub fn ntt_kernels_radix4(wide: WideMul) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::{LaterPasses, StagePasses};
    ntt_kernels_with(wide, "ntt radix-4", |kernels| {
        kernels
            .with_stage_passes(StagePasses {
                local: 2,
                later: LaterPasses::Radix4,
            })
            .with_high_table_bits(3)
    })
}

/// NTT kernels with one three-stage workgroup-memory pass, then one stage a pass; power
/// tables of 2^5 high entries.
pub fn ntt_kernels_single(wide: WideMul) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::{LaterPasses, StagePasses};
    ntt_kernels_with(wide, "ntt single", |kernels| {
        kernels
            .with_stage_passes(StagePasses {
                local: 3,
                later: LaterPasses::Single,
            })
            .with_high_table_bits(5)
    })
}

/// NTT kernels that split vectors into parts of at most 4 KiB (128 elements): the
/// multi-buffer path that vectors over the device's binding limit take; inside parts, a
/// three-stage workgroup-memory pass, radix-8 passes, a single stage; power tables of 2^4
/// high entries.
pub fn ntt_kernels_in_parts(wide: WideMul) -> Option<&'static wgpu_groth16::ntt::NttKernels> {
    use wgpu_groth16::ntt::{LaterPasses, StagePasses};
    ntt_kernels_with(wide, "ntt in parts", |kernels| {
        kernels
            .with_binding_limit(4096)
            .with_stage_passes(StagePasses {
                local: 3,
                later: LaterPasses::Radix8,
            })
            .with_high_table_bits(4)
    })
}

/// A proof's bytes as bellperson writes them (192, compressed): what "byte for byte" compares.
pub fn proof_bytes(proof: &bellperson::groth16::Proof<blstrs::Bls12>) -> Vec<u8> {
    let mut out = Vec::new();
    proof.write(&mut out).expect("writing to memory");
    out
}

/// A fresh folder for one test under Cargo's scratch space for integration tests.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
