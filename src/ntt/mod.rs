//! Number-theoretic transforms over Fr, element for element equal to bellperson's
//! `EvaluationDomain` (`fft`, `ifft`, `coset_fft`, `icoset_fft`): the same root of unity
//! (`ROOT_OF_UNITY` squared down to the domain), the same coset generator
//! (`MULTIPLICATIVE_GENERATOR`) and natural output order. [`ntt_cpu`] is bellperson itself,
//! behind the same seam as the GPU kernels of `shaders/ntt.wgsl`.

use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::{workgroup_grid, CompiledProgram, GpuContext, Program, UniformArray, WideMul};
use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use ff::{Field, PrimeField};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Which transform, in bellperson's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NttOp {
    /// `fft`: coefficients to evaluations on the domain.
    Forward,
    /// `ifft`: evaluations to coefficients (includes the 1/n).
    Inverse,
    /// `coset_fft`: multiply by g^i, then `fft`.
    CosetForward,
    /// `icoset_fft`: `ifft`, then multiply by g^-i.
    CosetInverse,
}

impl NttOp {
    pub const ALL: [NttOp; 4] = [
        NttOp::Forward,
        NttOp::Inverse,
        NttOp::CosetForward,
        NttOp::CosetInverse,
    ];
}

/// log2 of a power-of-two length, or an error naming the problem.
fn log2_of(len: usize) -> Result<u32> {
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

/// Mirrors `NttParams` in ntt.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct NttParams {
    n: u32,
    log_n: u32,
    half: u32,
    table: u32,
    split: u32,
    factor: u32,
    _pad: [u32; 2],
}

/// Bases whose powers the kernels take from tables, in table order.
const OMEGA: usize = 0;
const OMEGA_INV: usize = 1;
const COSET: usize = 2;
const COSET_INV: usize = 3;

/// Power tables of one domain size: for each base b, lo[k] = b^k (k < 2^split) and
/// hi[k] = b^(k·2^split), then 1/n.
struct DomainTables {
    buffer: wgpu::Buffer,
    split: u32,
    stride: u32,
    minv: u32,
}

impl DomainTables {
    fn new(gpu: &GpuContext, log_n: u32) -> Result<Self> {
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        let inverse = |x: Scalar| Option::<Scalar>::from(x.invert()).expect("nonzero");
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let bases = [omega, inverse(omega), g, inverse(g)];
        let split = log_n / 2;
        let (lo_len, hi_len) = (1usize << split, 1usize << (log_n - split));
        let powers = |b: Scalar, count: usize| -> Vec<Scalar> {
            std::iter::successors(Some(Scalar::ONE), |p| Some(*p * b))
                .take(count)
                .collect()
        };
        let mut table = Vec::with_capacity(4 * (lo_len + hi_len) + 1);
        for b in bases {
            table.extend(powers(b, lo_len));
            table.extend(powers(b.pow_vartime([lo_len as u64]), hi_len));
        }
        let minv = table.len() as u32;
        table.push(inverse(Scalar::from(1u64 << log_n)));
        Ok(DomainTables {
            buffer: gpu.storage_buffer("ntt power tables", Scalar::as_bytes(&table))?,
            split,
            stride: (lo_len + hi_len) as u32,
            minv,
        })
    }
}

/// The NTT kernels of one wide-multiply path, with power tables cached per domain size.
pub struct NttKernels {
    gpu: GpuContext,
    program: CompiledProgram,
    tables: Mutex<HashMap<u32, Arc<DomainTables>>>,
}

const WORKGROUP: u32 = 64;

impl NttKernels {
    pub fn new(gpu: &GpuContext, wide_mul: WideMul) -> Result<Self> {
        let program = gpu.compile(
            Program::Ntt,
            wide_mul,
            &[
                "ntt_bit_reverse",
                "ntt_butterflies",
                "ntt_scale",
                "ntt_distribute_powers",
            ],
        )?;
        Ok(NttKernels {
            gpu: gpu.clone(),
            program,
            tables: Mutex::new(HashMap::new()),
        })
    }

    pub fn wide_mul(&self) -> WideMul {
        self.program.wide_mul
    }

    pub fn compile_time(&self) -> std::time::Duration {
        self.program.compile_time
    }

    fn tables(&self, log_n: u32) -> Result<Arc<DomainTables>> {
        let mut cache = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = cache.get(&log_n) {
            return Ok(t.clone());
        }
        let tables = Arc::new(DomainTables::new(&self.gpu, log_n)?);
        cache.insert(log_n, tables.clone());
        Ok(tables)
    }

    /// `op` on `values` (a power-of-two length): upload, transform, read back.
    pub fn transform(&self, values: &[Scalar], op: NttOp) -> Result<Vec<Scalar>> {
        let log_n = log2_of(values.len())?;
        let data = self
            .gpu
            .storage_buffer("ntt data", Scalar::as_bytes(values))?;
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        self.record(&mut encoder, &data, log_n, op)?;
        self.gpu.queue.submit([encoder.finish()]);
        Ok(Scalar::from_bytes(&self.gpu.read_buffer(&data)?))
    }

    /// `op` on the 2^log_n elements already in `data` (on the device), waiting for it.
    pub fn transform_resident(&self, data: &wgpu::Buffer, log_n: u32, op: NttOp) -> Result<()> {
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        self.record(&mut encoder, data, log_n, op)?;
        let submission = self.gpu.queue.submit([encoder.finish()]);
        self.gpu.wait_for(submission)
    }

    /// Records `op` on the 2^log_n elements of `data` (on the device) into `encoder`.
    pub fn record(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        data: &wgpu::Buffer,
        log_n: u32,
        op: NttOp,
    ) -> Result<()> {
        let tables = self.tables(log_n)?;
        let n = 1u32 << log_n;
        let params_for = |half: u32, base: usize| NttParams {
            n,
            log_n,
            half,
            table: base as u32 * tables.stride,
            split: tables.split,
            factor: tables.minv,
            _pad: [0; 2],
        };
        // (entry point, parameters, threads) for every dispatch, in order.
        let mut steps: Vec<(&str, NttParams, u32)> = Vec::new();
        let transform = |steps: &mut Vec<_>, base: usize| {
            steps.push(("ntt_bit_reverse", params_for(1, base), n));
            for s in 0..log_n {
                steps.push(("ntt_butterflies", params_for(1 << s, base), n / 2));
            }
        };
        match op {
            NttOp::Forward => transform(&mut steps, OMEGA),
            NttOp::Inverse | NttOp::CosetInverse => {
                transform(&mut steps, OMEGA_INV);
                steps.push(("ntt_scale", params_for(1, OMEGA), n));
                if op == NttOp::CosetInverse {
                    steps.push(("ntt_distribute_powers", params_for(1, COSET_INV), n));
                }
            }
            NttOp::CosetForward => {
                steps.push(("ntt_distribute_powers", params_for(1, COSET), n));
                transform(&mut steps, OMEGA);
            }
        }
        let params = UniformArray::new(&self.gpu, &steps.iter().map(|s| s.1).collect::<Vec<_>>());
        let bind_group = self.gpu.bind_group(
            &self.program,
            &[
                params.binding(std::mem::size_of::<NttParams>()),
                data.as_entire_binding(),
                tables.buffer.as_entire_binding(),
            ],
        );
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("ntt"),
            timestamp_writes: None,
        });
        let max = self.gpu.limits.max_compute_workgroups_per_dimension;
        for (i, (entry, _, threads)) in steps.iter().enumerate() {
            pass.set_pipeline(self.program.pipeline(entry)?);
            pass.set_bind_group(0, &bind_group, &[params.offset(i)]);
            let (x, y) = workgroup_grid(*threads as u64, WORKGROUP, max);
            pass.dispatch_workgroups(x, y, 1);
        }
        Ok(())
    }
}
