//! Number-theoretic transforms over Fr, element for element equal to bellperson's
//! `EvaluationDomain` (`fft`, `ifft`, `coset_fft`, `icoset_fft`): the same root of unity
//! (`ROOT_OF_UNITY` squared down to the domain), the same coset generator
//! (`MULTIPLICATIVE_GENERATOR`) and natural output order. [`ntt_cpu`] is bellperson itself,
//! behind the same seam as the GPU kernels of `shaders/ntt.wgsl`.

use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::pool::BufferPool;
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
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct NttParams {
    n: u32,
    log_n: u32,
    half: u32,
    table: u32,
    split: u32,
    factor: u32,
    count: u32,
    first: u32,
    part_bits: u32,
    part: u32,
    partner_part: u32,
    stage: u32,
    stages: u32,
    _pad: [u32; 3],
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

/// A vector on the device as 2^part_bits equal parts, one buffer each. Pooled parts go back
/// to their pool when the vector drops, fenced by the last submission that used them.
pub struct DeviceVector {
    pub parts: Vec<wgpu::Buffer>,
    pub log_n: u32,
    pub part_bits: u32,
    pool: Option<BufferPool>,
    last_use: Mutex<Option<wgpu::SubmissionIndex>>,
}

impl DeviceVector {
    /// The first `len` elements as an MSM's scalars.
    pub fn as_scalars(&self, len: usize) -> crate::msm::ScalarSource<'_> {
        crate::msm::ScalarSource::Device {
            parts: &self.parts,
            part_len: self.part_len() as usize,
            len: len.min(1 << self.log_n),
        }
    }

    fn used_by(&self, submission: &wgpu::SubmissionIndex) {
        *self.last_use.lock().unwrap_or_else(|e| e.into_inner()) = Some(submission.clone());
    }
}

impl Drop for DeviceVector {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            let fence = self
                .last_use
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            for part in self.parts.drain(..) {
                pool.give_back(part, fence.clone());
            }
        }
    }
}

impl DeviceVector {
    fn part_len(&self) -> u32 {
        1 << (self.log_n - self.part_bits)
    }
}

/// Which buffers one dispatch binds: `data`, and `partner` / H-step vectors where used.
#[derive(Clone, Copy)]
enum Binds {
    Part(usize),
    Pair(usize, usize),
    HCombine(usize),
}

/// One dispatch: entry point, parameters, bindings.
type Step = (&'static str, NttParams, Binds);

/// How a vector is laid out and which stage kernel runs inside parts.
#[derive(Clone, Copy)]
struct Layout {
    log_n: u32,
    part_bits: u32,
    /// Stages per ntt_butterflies_local pass; 0 runs ntt_butterflies, one stage a pass.
    local_bits: u32,
}

/// Appends the dispatches of `op` over a vector of 2^log_n elements in 2^part_bits parts.
fn transform_steps(tables: &DomainTables, layout: Layout, op: NttOp, steps: &mut Vec<Step>) {
    let Layout {
        log_n,
        part_bits,
        local_bits,
    } = layout;
    let parts = 1u32 << part_bits;
    let part_len = 1u32 << (log_n - part_bits);
    let base_params = |base: usize, part: u32| NttParams {
        n: 1 << log_n,
        log_n,
        table: base as u32 * tables.stride,
        split: tables.split,
        factor: tables.minv,
        count: part_len,
        first: part * part_len,
        part_bits,
        part,
        ..Default::default()
    };
    let per_part = |steps: &mut Vec<Step>, entry, base| {
        for p in 0..parts {
            steps.push((entry, base_params(base, p), Binds::Part(p as usize)));
        }
    };
    let transform = |steps: &mut Vec<Step>, base: usize| {
        // Bit reversal: every pair of parts (p, q), p <= q, swaps the elements between them.
        for p in 0..parts {
            for q in p..parts {
                let params = NttParams {
                    count: part_len >> part_bits,
                    partner_part: q,
                    ..base_params(base, p)
                };
                let binds = if p == q {
                    Binds::Part(p as usize)
                } else {
                    Binds::Pair(p as usize, q as usize)
                };
                steps.push(("ntt_bit_reverse", params, binds));
            }
        }
        // Stages within a part: local_bits at a time in workgroup memory, or one at a time.
        let part_log = log_n - part_bits;
        let mut s = 0;
        while s < part_log && local_bits == 0 {
            for p in 0..parts {
                let params = NttParams {
                    half: 1 << s,
                    count: part_len / 2,
                    ..base_params(base, p)
                };
                steps.push(("ntt_butterflies", params, Binds::Part(p as usize)));
            }
            s += 1;
        }
        while s < part_log {
            let stages = local_bits.min(part_log - s);
            for p in 0..parts {
                let params = NttParams {
                    stage: s,
                    stages,
                    count: part_len >> stages,
                    ..base_params(base, p)
                };
                steps.push(("ntt_butterflies_local", params, Binds::Part(p as usize)));
            }
            s += stages;
        }
        // Stages whose pairs lie in two parts, one at a time.
        for s in part_log..log_n {
            let half = 1u32 << s;
            let apart = half / part_len;
            for p in (0..parts).filter(|p| p % (2 * apart) < apart) {
                let params = NttParams {
                    half,
                    ..base_params(base, p)
                };
                let binds = Binds::Pair(p as usize, (p + apart) as usize);
                steps.push(("ntt_butterflies_across_parts", params, binds));
            }
        }
    };
    match op {
        NttOp::Forward => transform(steps, OMEGA),
        NttOp::Inverse | NttOp::CosetInverse => {
            transform(steps, OMEGA_INV);
            per_part(steps, "ntt_scale", OMEGA);
            if op == NttOp::CosetInverse {
                per_part(steps, "ntt_distribute_powers", COSET_INV);
            }
        }
        NttOp::CosetForward => {
            per_part(steps, "ntt_distribute_powers", COSET);
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
    /// Bound where a kernel's optional binding is unused.
    placeholder: wgpu::Buffer,
    /// Cap on one part's bytes, below the device's binding limit (tests lower it).
    max_binding_bytes: Option<u64>,
    /// Stages per workgroup-memory pass; `None`: chosen per size and adapter.
    local_stages: Option<u32>,
    cpu_adapter: bool,
    /// Where vectors take their buffers from and give them back; `None`: fresh buffers.
    pool: Option<BufferPool>,
}

const WORKGROUP: u32 = 64;
/// Most stages ntt_butterflies_local does in one pass (its tile holds 2^8 elements), and its
/// workgroup size (pairs per block).
pub const MAX_LOCAL_STAGES: u32 = 8;
const LOCAL_WORKGROUP: u32 = 128;

impl NttKernels {
    pub fn new(gpu: &GpuContext, wide_mul: WideMul) -> Result<Self> {
        let program = gpu.compile(
            Program::Ntt,
            wide_mul,
            &[
                "ntt_bit_reverse",
                "ntt_butterflies",
                "ntt_butterflies_local",
                "ntt_butterflies_across_parts",
                "ntt_scale",
                "ntt_distribute_powers",
                "ntt_h_combine",
            ],
        )?;
        Ok(NttKernels {
            gpu: gpu.clone(),
            program,
            tables: Mutex::new(HashMap::new()),
            placeholder: gpu.storage_buffer("ntt placeholder", &[0; 32])?,
            max_binding_bytes: None,
            local_stages: None,
            cpu_adapter: gpu.info.device_type == wgpu::DeviceType::Cpu,
            pool: None,
        })
    }

    /// Runs in-part stages `stages` at a time in workgroup memory (at most
    /// [`MAX_LOCAL_STAGES`]); 0 runs one global pass per stage.
    pub fn with_local_stages(mut self, stages: u32) -> Self {
        self.local_stages = Some(stages.min(MAX_LOCAL_STAGES));
        self
    }

    /// Takes vectors' buffers from `pool` (and gives them back) instead of allocating each.
    pub fn with_pool(mut self, pool: BufferPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Splits vectors into parts of at most `bytes` (a power-of-two number of elements),
    /// below the device's own limit: the multi-buffer path, tested at small sizes.
    pub fn with_binding_limit(mut self, bytes: u64) -> Self {
        self.max_binding_bytes = Some(bytes);
        self
    }

    pub fn wide_mul(&self) -> WideMul {
        self.program.wide_mul
    }

    /// Stages per workgroup-memory pass at size 2^log_n (0: one global pass per stage).
    ///
    /// Unless set, measured choices: CPU adapters never (lavapipe ran the workgroup-memory
    /// kernel 1.8x to 14x slower); GPUs up to 2^24 (H200: 2^24 forward 12.9 ms against 17.1 ms
    /// one stage a pass) but not above (2^26: 163 ms against 72 ms; its late passes stride
    /// across the whole 2 GiB vector). 2^25 is not measured.
    pub fn local_stages(&self, log_n: u32) -> u32 {
        match self.local_stages {
            Some(stages) => stages,
            None if self.cpu_adapter || log_n > 24 => 0,
            None => MAX_LOCAL_STAGES,
        }
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

    /// Uploads `values` (zero-padded to 2^log_n) in as many parts as the binding limit needs.
    pub fn upload(&self, values: &[Scalar], log_n: u32) -> Result<DeviceVector> {
        if values.len() > 1 << log_n {
            return Err(Error::InvalidInput(format!(
                "{} values do not fit an NTT of size 2^{log_n}",
                values.len()
            )));
        }
        let limit = self
            .gpu
            .limits
            .max_storage_buffer_binding_size
            .min(self.gpu.limits.max_buffer_size)
            .min(self.max_binding_bytes.unwrap_or(u64::MAX));
        let element = std::mem::size_of::<Scalar>() as u64;
        let fit = limit / element;
        if fit == 0 {
            return Err(Error::TooLarge {
                what: "one Fr element",
                needed: element,
                limit,
            });
        }
        // Parts hold a power of two of elements, and no more parts than elements per part
        // (the bit reversal between parts relies on it).
        let mut part_bits = 0;
        while (1u64 << (log_n - part_bits)) > fit || (log_n - part_bits) < part_bits {
            if (log_n - part_bits) <= part_bits {
                return Err(Error::TooLarge {
                    what: "an NTT of this size in parts",
                    needed: element << log_n,
                    limit,
                });
            }
            part_bits += 1;
        }
        let part_len = 1usize << (log_n - part_bits);
        let part_bytes = (part_len * std::mem::size_of::<Scalar>()) as u64;
        let parts = match &self.pool {
            Some(pool) => (0..1usize << part_bits)
                .map(|_| pool.take("an NTT vector part", part_bytes))
                .collect::<Result<Vec<_>>>()?,
            None => self
                .gpu
                .allocating("an NTT vector", part_bytes << part_bits, || {
                    (0..1usize << part_bits)
                        .map(|_| self.gpu.empty_storage_buffer("ntt part", part_bytes))
                        .collect::<Result<Vec<_>>>()
                })??,
        };
        let vector = DeviceVector {
            parts,
            log_n,
            part_bits,
            pool: self.pool.clone(),
            last_use: Mutex::new(None),
        };
        // Pooled buffers hold an earlier vector: zero what the values do not cover.
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        for (p, part) in vector.parts.iter().enumerate() {
            let values = values.get(p * part_len..).unwrap_or(&[]);
            let values = &values[..values.len().min(part_len)];
            self.gpu.upload(part, 0, Scalar::as_bytes(values))?;
            let written = std::mem::size_of_val(values) as u64;
            if written < part_bytes {
                encoder.clear_buffer(part, written, None);
            }
        }
        vector.used_by(&self.gpu.submit([encoder.finish()]));
        Ok(vector)
    }

    /// The vector's elements, read back.
    pub fn download(&self, vector: &DeviceVector) -> Result<Vec<Scalar>> {
        let mut out = vec![Scalar::ZERO; 1 << vector.log_n];
        for (part, values) in vector
            .parts
            .iter()
            .zip(out.chunks_mut(vector.part_len() as usize))
        {
            self.gpu
                .download_into(part, 0, Scalar::as_bytes_mut(values))?;
        }
        Ok(out)
    }

    /// `op` on `values` (a power-of-two length): upload, transform, read back.
    pub fn transform(&self, values: &[Scalar], op: NttOp) -> Result<Vec<Scalar>> {
        let vector = self.upload(values, log2_of(values.len())?)?;
        self.transform_resident(&vector, op)?;
        self.download(&vector)
    }

    /// `op` on a vector already on the device, waiting for it.
    pub fn transform_resident(&self, vector: &DeviceVector, op: NttOp) -> Result<()> {
        let tables = self.tables(vector.log_n)?;
        let mut steps = Vec::new();
        transform_steps(&tables, self.layout(vector), op, &mut steps);
        let submission = self.submit(&tables, &steps, [vector, vector, vector])?;
        self.gpu.wait_for(submission)
    }

    /// The H polynomial's coefficients exactly as bellperson's prover computes them
    /// (`execute_fft`): a, b, c (equal lengths) to coefficients (iNTT), to the coset (coset
    /// NTT), (a·b - c)/Z there, back to coefficients (coset iNTT); all but the last of the n.
    pub fn h_coefficients(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
        let h = self.h_on_device(a, b, c)?;
        let mut coefficients = self.download(&h)?;
        coefficients.truncate((1 << h.log_n) - 1);
        Ok(coefficients)
    }

    /// [`h_coefficients`](Self::h_coefficients) left on the device (all n of them; the
    /// prover's MSM takes the first n - 1), for the H MSM to read without a round trip.
    pub fn h_on_device(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<DeviceVector> {
        let [da, db, dc] = self.upload_h_inputs(a, b, c)?;
        self.h_resident(&da, &db, &dc)?;
        Ok(da)
    }

    /// a, b, c (equal lengths) uploaded at the H step's size, for [`h_resident`](Self::h_resident).
    pub fn upload_h_inputs(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<[DeviceVector; 3]> {
        let log_n = h_domain(a, b, c)?.trailing_zeros();
        Ok([
            self.upload(a, log_n)?,
            self.upload(b, log_n)?,
            self.upload(c, log_n)?,
        ])
    }

    /// `values` uploaded at the next power-of-two size (zero-padded): an MSM's scalars, read
    /// through [`DeviceVector::as_scalars`].
    pub fn upload_scalars(&self, values: &[Scalar]) -> Result<DeviceVector> {
        let log_n = values.len().max(1).next_power_of_two().trailing_zeros();
        self.upload(values, log_n)
    }

    /// The H step on vectors already on the device (one size): leaves the n coefficients in
    /// `a` (the last is zero for a satisfied circuit; bellperson drops it), uses `b` and `c`
    /// as scratch. Returns the last submission (later submissions see the result).
    pub fn h_resident(
        &self,
        a: &DeviceVector,
        b: &DeviceVector,
        c: &DeviceVector,
    ) -> Result<wgpu::SubmissionIndex> {
        if b.log_n != a.log_n
            || c.log_n != a.log_n
            || b.part_bits != a.part_bits
            || c.part_bits != a.part_bits
        {
            return Err(Error::InvalidInput(
                "a, b, c must be uploaded at one size".into(),
            ));
        }
        let tables = self.tables(a.log_n)?;
        let layout = self.layout(a);
        let mut to_coset = Vec::new();
        transform_steps(&tables, layout, NttOp::Inverse, &mut to_coset);
        transform_steps(&tables, layout, NttOp::CosetForward, &mut to_coset);
        for d in [b, c] {
            self.submit(&tables, &to_coset, [d, d, d])?;
        }
        let mut steps = to_coset;
        for p in 0..a.parts.len() {
            let params = NttParams {
                n: 1 << a.log_n,
                log_n: a.log_n,
                factor: tables.zinv,
                count: a.part_len(),
                ..Default::default()
            };
            steps.push(("ntt_h_combine", params, Binds::HCombine(p)));
        }
        transform_steps(&tables, layout, NttOp::CosetInverse, &mut steps);
        self.submit(&tables, &steps, [a, b, c])
    }

    fn layout(&self, vector: &DeviceVector) -> Layout {
        Layout {
            log_n: vector.log_n,
            part_bits: vector.part_bits,
            local_bits: self.local_stages(vector.log_n),
        }
    }

    /// Records and submits `steps` over `vectors` = [data, b, c] (b and c only for the H
    /// step's combine).
    fn submit(
        &self,
        tables: &DomainTables,
        steps: &[Step],
        vectors: [&DeviceVector; 3],
    ) -> Result<wgpu::SubmissionIndex> {
        let params = UniformArray::new(&self.gpu, &steps.iter().map(|s| s.1).collect::<Vec<_>>());
        let mut groups: HashMap<(u8, usize, usize), wgpu::BindGroup> = HashMap::new();
        let mut bind = |binds: Binds| {
            let (key, data, partner, b, c) = match binds {
                Binds::Part(p) => (
                    (0, p, 0),
                    &vectors[0].parts[p],
                    &self.placeholder,
                    &tables.buffer,
                    &tables.buffer,
                ),
                Binds::Pair(p, q) => (
                    (1, p, q),
                    &vectors[0].parts[p],
                    &vectors[0].parts[q],
                    &tables.buffer,
                    &tables.buffer,
                ),
                Binds::HCombine(p) => (
                    (2, p, 0),
                    &vectors[0].parts[p],
                    &self.placeholder,
                    &vectors[1].parts[p],
                    &vectors[2].parts[p],
                ),
            };
            groups
                .entry(key)
                .or_insert_with(|| {
                    self.gpu.bind_group(
                        &self.program,
                        &[
                            params.binding(std::mem::size_of::<NttParams>()),
                            data.as_entire_binding(),
                            tables.buffer.as_entire_binding(),
                            b.as_entire_binding(),
                            c.as_entire_binding(),
                            partner.as_entire_binding(),
                        ],
                    )
                })
                .clone()
        };
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("ntt"),
                timestamp_writes: None,
            });
            let max = self.gpu.limits.max_compute_workgroups_per_dimension;
            for (i, (entry, step, binds)) in steps.iter().enumerate() {
                pass.set_pipeline(self.program.pipeline(entry)?);
                pass.set_bind_group(0, &bind(*binds), &[params.offset(i)]);
                // The local kernel's count is blocks, one workgroup each.
                let (x, y) = if *entry == "ntt_butterflies_local" {
                    workgroup_grid(
                        step.count as u64 * LOCAL_WORKGROUP as u64,
                        LOCAL_WORKGROUP,
                        max,
                    )
                } else {
                    workgroup_grid(step.count as u64, WORKGROUP, max)
                };
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        let submission = self.gpu.submit([encoder.finish()]);
        for vector in vectors {
            vector.used_by(&submission);
        }
        Ok(submission)
    }
}
