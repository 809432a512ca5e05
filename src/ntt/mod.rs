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
/// hi[k] = b^(k·2^split); then 1/n, then 1/Z(g) = 1/(g^n - 1) for the H step.
struct DomainTables {
    buffer: wgpu::Buffer,
    split: u32,
    stride: u32,
    minv: u32,
    zinv: u32,
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
        let zinv = table.len() as u32;
        table.push(inverse(g.pow_vartime([1u64 << log_n]) - Scalar::ONE));
        Ok(DomainTables {
            buffer: gpu.storage_buffer("ntt power tables", Scalar::as_bytes(&table))?,
            split,
            stride: (lo_len + hi_len) as u32,
            minv,
            zinv,
        })
    }
}

fn step_params(
    tables: &DomainTables,
    log_n: u32,
    half: u32,
    base: usize,
    factor: u32,
) -> NttParams {
    NttParams {
        n: 1 << log_n,
        log_n,
        half,
        table: base as u32 * tables.stride,
        split: tables.split,
        factor,
        _pad: [0; 2],
    }
}

/// Appends the dispatches of `op` as (entry point, parameters, threads).
fn transform_steps(
    tables: &DomainTables,
    log_n: u32,
    op: NttOp,
    steps: &mut Vec<(&'static str, NttParams, u32)>,
) {
    let n = 1u32 << log_n;
    let params = |half, base| step_params(tables, log_n, half, base, tables.minv);
    let transform = |steps: &mut Vec<_>, base: usize| {
        steps.push(("ntt_bit_reverse", params(1, base), n));
        for s in 0..log_n {
            steps.push(("ntt_butterflies", params(1 << s, base), n / 2));
        }
    };
    match op {
        NttOp::Forward => transform(steps, OMEGA),
        NttOp::Inverse | NttOp::CosetInverse => {
            transform(steps, OMEGA_INV);
            steps.push(("ntt_scale", params(1, OMEGA), n));
            if op == NttOp::CosetInverse {
                steps.push(("ntt_distribute_powers", params(1, COSET_INV), n));
            }
        }
        NttOp::CosetForward => {
            steps.push(("ntt_distribute_powers", params(1, COSET), n));
            transform(steps, OMEGA);
        }
    }
}

/// The domain size of an H step: the next power of two of the (equal) lengths.
fn h_domain(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<usize> {
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
                "ntt_h_combine",
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
        let mut steps = Vec::new();
        transform_steps(&tables, log_n, op, &mut steps);
        self.record_steps(
            encoder,
            &tables,
            log_n,
            &steps,
            [data, &tables.buffer, &tables.buffer],
        )
    }

    /// The H polynomial's coefficients exactly as bellperson's prover computes them
    /// (`execute_fft`): a, b, c (equal lengths) to coefficients (iNTT), to the coset (coset
    /// NTT), (a·b - c)/Z there, back to coefficients (coset iNTT); all but the last of the n.
    pub fn h_coefficients(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
        let n = h_domain(a, b, c)?;
        let log_n = n.trailing_zeros();
        let tables = self.tables(log_n)?;
        let upload = |v: &[Scalar], label| {
            let mut padded = v.to_vec();
            padded.resize(n, Scalar::ZERO);
            self.gpu.storage_buffer(label, Scalar::as_bytes(&padded))
        };
        let (da, db, dc) = (upload(a, "h a")?, upload(b, "h b")?, upload(c, "h c")?);
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        let mut to_coset = Vec::new();
        transform_steps(&tables, log_n, NttOp::Inverse, &mut to_coset);
        transform_steps(&tables, log_n, NttOp::CosetForward, &mut to_coset);
        for d in [&db, &dc] {
            self.record_steps(
                &mut encoder,
                &tables,
                log_n,
                &to_coset,
                [d, &tables.buffer, &tables.buffer],
            )?;
        }
        let mut steps = to_coset;
        steps.push((
            "ntt_h_combine",
            step_params(&tables, log_n, 1, OMEGA, tables.zinv),
            1 << log_n,
        ));
        transform_steps(&tables, log_n, NttOp::CosetInverse, &mut steps);
        self.record_steps(&mut encoder, &tables, log_n, &steps, [&da, &db, &dc])?;
        self.gpu.queue.submit([encoder.finish()]);
        let mut h = Scalar::from_bytes(&self.gpu.read_buffer(&da)?);
        h.truncate(n - 1);
        Ok(h)
    }

    /// Records `steps` over `buffers` = [data, b, c] (b and c only for ntt_h_combine).
    fn record_steps(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        tables: &DomainTables,
        log_n: u32,
        steps: &[(&str, NttParams, u32)],
        buffers: [&wgpu::Buffer; 3],
    ) -> Result<()> {
        self.gpu
            .check_binding_size((std::mem::size_of::<Scalar>() as u64) << log_n)?;
        let params = UniformArray::new(&self.gpu, &steps.iter().map(|s| s.1).collect::<Vec<_>>());
        let bind_group = self.gpu.bind_group(
            &self.program,
            &[
                params.binding(std::mem::size_of::<NttParams>()),
                buffers[0].as_entire_binding(),
                tables.buffer.as_entire_binding(),
                buffers[1].as_entire_binding(),
                buffers[2].as_entire_binding(),
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
