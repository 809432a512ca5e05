//! Field-multiplication throughput, beside the adapter's raw integer multiply rates so the
//! fraction of the ceiling is visible. Measurement only; the CLI prints the table.

use super::samples::random;
use super::{wgsl, GpuField};
use crate::error::{Error, Result};
use crate::gpu::program::{concat, UniformLayout};
use crate::gpu::{Binding, Compiled, EntryPoint, GpuContext, Program, WideMul, MAX_LOOP_TRIPS};
use crate::uniform_layout;
use blstrs::{Fp, Scalar};
use ff::Field;
use std::time::{Duration, Instant};

/// How hard to push each kernel.
#[derive(Clone, Debug)]
pub struct FieldBenchConfig {
    /// Invocations per dispatch.
    pub threads: u32,
    /// Wall time each timed dispatch should last; iterations are scaled to reach it.
    pub target: Duration,
    /// Timed repetitions per kernel; the fastest counts.
    pub repetitions: u32,
}

impl FieldBenchConfig {
    /// Sizes that keep a software adapter (lavapipe) to seconds and fill a large GPU.
    pub fn for_device(gpu: &GpuContext) -> Self {
        let software = gpu.info.device_type == wgpu::DeviceType::Cpu;
        FieldBenchConfig {
            threads: if software { 1 << 12 } else { 1 << 20 },
            target: Duration::from_millis(if software { 1000 } else { 300 }),
            repetitions: 3,
        }
    }
}

/// One measured kernel.
#[derive(Clone, Debug)]
pub struct Rate {
    /// What was counted: `u32 mul`, `u64 mul`, `mac`, `fq mul`, `fr mul`.
    pub operation: &'static str,
    /// The wide-multiply path, for kernels built on it.
    pub wide_mul: Option<WideMul>,
    pub ops_per_second: f64,
    /// For field multiplications: the raw multiply that bounds them and how many of those one
    /// operation needs, so the CLI can show the share of the ceiling.
    pub ceiling: Option<(&'static str, u32)>,
    /// Driver compile time of the program this kernel belongs to.
    pub compile_time: Duration,
}

/// `shaders/field_bench.wgsl`: dependent chains of multiplications, one entry point a kind.
pub struct FieldBenchProgram;

/// `shaders/int64_bench.wgsl`: the raw u64 multiply rate (int64 devices only).
pub struct Int64BenchProgram;

/// What one throughput kernel chains, which says how its result is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chain {
    U32Mul,
    Mac,
    FqMul,
    FrMul,
    U64Mul,
}

/// The entry points of [`FieldBenchProgram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldBenchEntry {
    U32MulChain,
    MacChain,
    FqMulChain,
    FrMulChain,
}

impl EntryPoint for FieldBenchEntry {
    const ALL: &'static [Self] = &[
        FieldBenchEntry::U32MulChain,
        FieldBenchEntry::MacChain,
        FieldBenchEntry::FqMulChain,
        FieldBenchEntry::FrMulChain,
    ];

    fn name(self) -> &'static str {
        match self {
            FieldBenchEntry::U32MulChain => "u32_mul_chain",
            FieldBenchEntry::MacChain => "mac_chain",
            FieldBenchEntry::FqMulChain => "fq_mul_chain",
            FieldBenchEntry::FrMulChain => "fr_mul_chain",
        }
    }

    fn workgroup_size(self) -> u32 {
        256
    }
}

/// The one entry point of [`Int64BenchProgram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct U64MulChain;

impl EntryPoint for U64MulChain {
    const ALL: &'static [Self] = &[U64MulChain];

    fn name(self) -> &'static str {
        "u64_mul_chain"
    }

    fn workgroup_size(self) -> u32 {
        256
    }
}

/// Mirrors `BenchParams` in field_bench.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct BenchParams {
    count: u32,
    iterations: u32,
}

/// Mirrors `Int64BenchParams` in int64_bench.wgsl (the same block).
type Int64BenchParams = BenchParams;

const BENCH_BINDINGS: &[Binding] = &[Binding::ReadOnly, Binding::ReadWrite, Binding::Uniform];

impl Program for FieldBenchProgram {
    type Entry = FieldBenchEntry;
    const BINDINGS: &'static [Binding] = BENCH_BINDINGS;
    const UNIFORMS: &'static [(u32, UniformLayout)] =
        &[(2, uniform_layout!(BenchParams { count, iterations }))];

    fn name() -> &'static str {
        "FieldBench"
    }

    fn source(wide: WideMul) -> String {
        let mut parts = wgsl::with_fq_and_fr(wide);
        parts.extend(wgsl::fq2(wide));
        parts.extend([include_str!("../../shaders/field_bench.wgsl")]);
        concat(&parts)
    }
}

impl Program for Int64BenchProgram {
    type Entry = U64MulChain;
    const BINDINGS: &'static [Binding] = BENCH_BINDINGS;
    const UNIFORMS: &'static [(u32, UniformLayout)] =
        &[(2, uniform_layout!(Int64BenchParams { count, iterations }))];

    fn name() -> &'static str {
        "Int64Bench"
    }

    fn source(_: WideMul) -> String {
        include_str!("../../shaders/int64_bench.wgsl").to_string()
    }

    fn has_variant(wide: WideMul) -> bool {
        wide == WideMul::Int64
    }
}

struct Kernel<E> {
    operation: &'static str,
    entry: E,
    chain: Chain,
    /// Counted operations per loop iteration.
    ops_per_iteration: u64,
    ceiling: Option<(&'static str, u32)>,
    /// Loop trips llvmpipe counts per chain iteration (see [`MAX_LOOP_TRIPS`]).
    loop_trips: u32,
}

/// Loop trips of one field multiplication's chain iteration as llvmpipe counts them: the
/// chain's own loop and the multiplication's (found on lavapipe: the portable Fr chain is
/// right at 6553 iterations, 65530 trips so counted, and wrong at 7281).
fn chain_loop_trips<F: GpuField>(wide: WideMul) -> u32 {
    1 + F::mul_loop_trips(wide)
}

/// Limbs of the int64 path's multiplications (`lazy_bits` in xtask/src/gen_field/): Fq's
/// 381 bits in 30-bit limbs, Fr's 255 in 29-bit ones.
const FQ_LAZY_LIMBS: u32 = 13;
const FR_LAZY_LIMBS: u32 = 9;

/// Each path's multiply does two rows of limb products per limb: over the n 32-bit words
/// (portable: CIOS) or over `lazy_limbs` (int64: `MulForm::Lazy` in xtask). At best each
/// product is one 32-bit multiply instruction (a widening multiply-add), so the adapter's u32
/// multiply rate over that count bounds the path.
fn mul_ceiling(wide: WideMul, lazy_limbs: u32, words: usize) -> Option<(&'static str, u32)> {
    let limbs = match wide {
        WideMul::Portable => words as u32,
        WideMul::Int64 => lazy_limbs,
    };
    Some(("u32 mul", 2 * limbs * limbs))
}

/// Runs every throughput kernel this device supports.
pub fn run(gpu: &GpuContext, config: &FieldBenchConfig) -> Result<Vec<Rate>> {
    let mut rates = Vec::new();
    for wide in gpu.supported_wide_muls() {
        let program = gpu.compile::<FieldBenchProgram>(wide)?;
        let kernel = |operation, entry, chain, ops_per_iteration, ceiling, loop_trips| Kernel {
            operation,
            entry,
            chain,
            ops_per_iteration,
            ceiling,
            loop_trips,
        };
        use FieldBenchEntry as E;
        let mut kernels = vec![
            kernel("mac", E::MacChain, Chain::Mac, 8, None, 1),
            kernel(
                "fq mul",
                E::FqMulChain,
                Chain::FqMul,
                1,
                mul_ceiling(wide, FQ_LAZY_LIMBS, Fp::LIMBS),
                chain_loop_trips::<Fp>(wide),
            ),
            kernel(
                "fr mul",
                E::FrMulChain,
                Chain::FrMul,
                1,
                mul_ceiling(wide, FR_LAZY_LIMBS, Scalar::LIMBS),
                chain_loop_trips::<Scalar>(wide),
            ),
        ];
        // The plain u32 multiply does not depend on the path: measure it once.
        if rates.is_empty() {
            kernels.insert(
                0,
                kernel("u32 mul", E::U32MulChain, Chain::U32Mul, 8, None, 1),
            );
        }
        for kernel in kernels {
            let ops_per_second = measure(gpu, &program, &kernel, config)?;
            rates.push(Rate {
                operation: kernel.operation,
                wide_mul: (kernel.chain != Chain::U32Mul).then_some(wide),
                ops_per_second,
                ceiling: kernel.ceiling,
                compile_time: program.compile_time,
            });
        }
    }
    if gpu.capabilities.int64 {
        let program = gpu.compile::<Int64BenchProgram>(WideMul::Int64)?;
        let kernel = Kernel {
            operation: "u64 mul",
            entry: U64MulChain,
            chain: Chain::U64Mul,
            ops_per_iteration: 8,
            ceiling: None,
            loop_trips: 1,
        };
        rates.insert(
            1,
            Rate {
                operation: kernel.operation,
                wide_mul: None,
                ops_per_second: measure(gpu, &program, &kernel, config)?,
                ceiling: None,
                compile_time: program.compile_time,
            },
        );
    }
    Ok(rates)
}

/// Random valid field elements as raw words, so the field kernels start from real values.
fn initial_state(chain: Chain, threads: u32) -> Vec<u8> {
    let n = threads as usize;
    match chain {
        Chain::FqMul => Fp::as_bytes(&random::<Fp>(7, n)).to_vec(),
        Chain::FrMul => Scalar::as_bytes(&random::<Scalar>(7, n)).to_vec(),
        Chain::U32Mul | Chain::Mac | Chain::U64Mul => (0..n as u32)
            .flat_map(|i| i.wrapping_mul(0x9e37_79b9).to_le_bytes())
            .collect(),
    }
}

/// Each field chain computes x^(iterations + 1): compare the first elements with blstrs so
/// a rate is never reported for wrong (or optimized-away) work.
fn check_chain<F: GpuField + Field>(input: &[u8], output: &[u8], iterations: u32) -> Result<()> {
    let (input, output) = (F::from_bytes(input), F::from_bytes(output));
    for (i, (x, y)) in input.iter().zip(&output).take(32).enumerate() {
        let expected = x.pow_vartime([iterations as u64 + 1]);
        if *y != expected {
            return Err(Error::WrongResult(format!(
                "{} mul chain of {iterations} iterations, element {i}: gpu {y:?}, blstrs {expected:?}",
                F::NAME
            )));
        }
    }
    Ok(())
}

/// The integer kernels replayed on the CPU for the first invocations, so their rates are of
/// work the compiler really did.
fn check_integer_chain(chain: Chain, input: &[u8], output: &[u8], iterations: u32) -> Result<()> {
    let words = |b: &[u8]| -> Vec<u32> { bytemuck::pod_collect_to_vec(b) };
    let (input, output) = (words(input), words(output));
    for i in 0..input.len().min(32) {
        let m = input[i] | 1;
        let expected = match chain {
            Chain::U32Mul => (0..8u32).fold(0, |acc, j| {
                (0..iterations).fold(m + j, |x, _| x.wrapping_mul(m).wrapping_add(1)) ^ acc
            }),
            Chain::Mac => {
                let s = (0..8u64).fold(0u64, |acc, j| {
                    let x = (0..iterations).fold((m as u64) | ((j + 1) << 32), |x, _| {
                        (x >> 32) + (x & 0xffff_ffff) * m as u64 + 1
                    });
                    acc ^ x
                });
                (s as u32) ^ ((s >> 32) as u32)
            }
            Chain::U64Mul => {
                let m = m as u64 | ((i as u64) << 32);
                let s = (0..8u64).fold(0u64, |acc, j| {
                    acc ^ (0..iterations).fold(m + j, |x, _| x.wrapping_mul(m).wrapping_add(1))
                });
                (s as u32) ^ ((s >> 32) as u32)
            }
            Chain::FqMul | Chain::FrMul => return Ok(()),
        };
        if output[i] != expected {
            return Err(Error::WrongResult(format!(
                "{chain:?} chain, invocation {i}: gpu {:#010x}, cpu {expected:#010x}",
                output[i]
            )));
        }
    }
    Ok(())
}

/// Operations per second of one kernel: calibrate the loop length and the number of repeated
/// dispatches to the target time, then keep the fastest of the timed repetitions.
fn measure<P: Program>(
    gpu: &GpuContext,
    program: &Compiled<P>,
    kernel: &Kernel<P::Entry>,
    config: &FieldBenchConfig,
) -> Result<f64> {
    let initial = initial_state(kernel.chain, config.threads);
    let input = gpu.storage_buffer("bench input", &initial)?;
    let output = gpu.empty_storage_buffer("bench output", initial.len() as u64)?;
    let timed = |iterations: u32, dispatches: u32| -> Result<Duration> {
        let params = BenchParams {
            count: config.threads,
            iterations,
        };
        let params = gpu.uniform_buffer("bench params", bytemuck::bytes_of(&params))?;
        let start = Instant::now();
        let submission = gpu.dispatch(
            program,
            kernel.entry,
            &[&input, &output, &params],
            config.threads as u64,
            dispatches,
        )?;
        gpu.wait_for(submission)?;
        Ok(start.elapsed())
    };
    // Calibrate: lengthen the loop, then repeat the dispatch, until one submission lasts a
    // tenth of the target; then scale the repeats to the target. Chains stay under
    // llvmpipe's loop cap: past it they repeat the dispatch instead.
    let max_iterations = MAX_LOOP_TRIPS / kernel.loop_trips;
    let (mut iterations, mut dispatches) = (4u32, 1u32);
    let mut elapsed = timed(iterations, dispatches)?;
    while elapsed < config.target / 10 && dispatches < (1 << 16) {
        if iterations < max_iterations {
            iterations = (iterations * 4).min(max_iterations);
        } else {
            dispatches *= 4;
        }
        elapsed = timed(iterations, dispatches)?;
    }
    let scale = config.target.as_secs_f64() / elapsed.as_secs_f64().max(1e-6);
    if dispatches > 1 || iterations == max_iterations {
        dispatches = ((dispatches as f64 * scale) as u32).max(1);
    } else {
        iterations = ((iterations as f64 * scale) as u32).clamp(1, max_iterations);
    }
    let mut best = Duration::MAX;
    for _ in 0..config.repetitions.max(1) {
        best = best.min(timed(iterations, dispatches)?);
    }
    let result = gpu.read_buffer(&output)?;
    match kernel.chain {
        Chain::FqMul => check_chain::<Fp>(&initial, &result, iterations)?,
        Chain::FrMul => check_chain::<Scalar>(&initial, &result, iterations)?,
        chain => check_integer_chain(chain, &initial, &result, iterations)?,
    }
    let ops =
        config.threads as u64 * iterations as u64 * dispatches as u64 * kernel.ops_per_iteration;
    log::debug!(
        "{} ({}): {dispatches} x {iterations} iterations in {best:?}",
        kernel.operation,
        program.wide_mul
    );
    Ok(ops as f64 / best.as_secs_f64())
}
