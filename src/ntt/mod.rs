//! Number-theoretic transforms over Fr, element for element equal to bellperson's
//! `EvaluationDomain` (`fft`, `ifft`, `coset_fft`, `icoset_fft`): the same root of unity
//! (`ROOT_OF_UNITY` squared down to the domain), the same coset generator
//! (`MULTIPLICATIVE_GENERATOR`) and natural output order.
//!
//! [`NttKernels`] runs `shaders/ntt.wgsl` ([`program`]) on device vectors
//! ([`DeviceVector`]) by the dispatch plans of `steps`, with power tables per domain size
//! (`tables`); `reference` is bellperson itself, behind the same seam.

pub mod program;
pub mod reference;
mod steps;
mod tables;

pub use reference::{h_coefficients_cpu, ntt_cpu};

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;

use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::pool::BufferPool;
use crate::gpu::vector::PartLayout;
use crate::gpu::{Compiled, DeviceVector, GpuContext, UniformArray, WideMul};
use program::{NttEntry, NttParams, NttProgram};
use reference::h_domain;
pub(crate) use reference::log2_of;
use steps::{
    h_finish_steps, h_product_steps, h_steps, to_coset_steps, transform_steps,
    unscaled_coefficients_steps, Binds, Layout, Step,
};
use tables::DomainTables;
pub use tables::HIGH_TABLE_BITS;

/// The part and entry of an H-step pass that binds one part of b or c.
fn hstep_part(step: &Step) -> Option<(usize, program::NttEntry)> {
    match step.binds {
        Binds::HStep(p) => Some((p, step.entry)),
        _ => None,
    }
}

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

/// One of the H step's a, b, c for [`NttKernels::h_in_parts_of`].
pub enum HInput<'a> {
    /// Values in host memory, zero-padded to the domain.
    Host(Cow<'a, [Scalar]>),
    /// Written by the closure into a zeroed vector of the domain on the device (a product of
    /// the device's matrices); returns the submission that writes it.
    Device(&'a dyn Fn(&DeviceVector<Scalar>) -> Result<wgpu::SubmissionIndex>),
}

/// The NTT kernels of one wide-multiply path, with power tables cached per domain size.
pub struct NttKernels {
    gpu: GpuContext,
    program: Compiled<NttProgram>,
    tables: Mutex<HashMap<u32, Arc<DomainTables>>>,
    /// Bound where a kernel's optional binding is unused.
    placeholder: wgpu::Buffer,
    /// Cap on one part's bytes, below the device's binding limit (tests lower it).
    max_binding_bytes: Option<u64>,
    /// log2 of the most entries a power table's high part holds ([`HIGH_TABLE_BITS`]; tests
    /// lower it so that twiddles take the product of both parts at small sizes).
    high_table_bits: u32,
    /// How stages are grouped into passes; `None`: chosen per size and adapter.
    stage_passes: Option<StagePasses>,
    cpu_adapter: bool,
    /// Where vectors take their buffers from and give them back; `None`: fresh buffers.
    pool: Option<BufferPool>,
    /// The host vectors the last H step in parts read b and c back into, kept for the next
    /// one ([`release_read_backs`](Self::release_read_backs) frees them).
    read_backs: Mutex<Vec<Vec<Scalar>>>,
}

/// Most stages a `Stages::Local` pass runs (its tile holds 2^8 elements).
pub const MAX_LOCAL_STAGES: u32 = 8;

/// How a transform's stages inside a part are grouped into passes over memory (each pass
/// reads and writes the whole vector once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagePasses {
    /// Stages of the first pass, in workgroup memory over contiguous blocks (at most
    /// [`MAX_LOCAL_STAGES`]); 0: none.
    pub local: u32,
    /// The passes after it.
    pub later: LaterPasses,
}

/// The passes after a transform's first workgroup-memory pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaterPasses {
    /// More workgroup-memory passes of as many stages (their blocks strided).
    Local,
    /// One stage a pass.
    Single,
    /// Two stages a pass in registers, four elements an invocation; one stage a pass for a
    /// last odd one.
    Radix4,
    /// Three stages a pass in registers, eight elements an invocation; one stage a pass for
    /// the last one or two.
    Radix8,
}

impl std::str::FromStr for LaterPasses {
    type Err = String;

    /// `local`, `single`, `radix4` or `radix8`.
    fn from_str(name: &str) -> std::result::Result<Self, String> {
        match name {
            "local" => Ok(LaterPasses::Local),
            "single" => Ok(LaterPasses::Single),
            "radix4" => Ok(LaterPasses::Radix4),
            "radix8" => Ok(LaterPasses::Radix8),
            other => Err(format!(
                "{other:?}: expected local, single, radix4 or radix8"
            )),
        }
    }
}

impl std::fmt::Display for StagePasses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let later = match self.later {
            LaterPasses::Local if self.local > 0 => {
                return write!(f, "{} stages a workgroup-memory pass", self.local)
            }
            LaterPasses::Local | LaterPasses::Single => "one stage a pass",
            LaterPasses::Radix4 => "radix-4 passes",
            LaterPasses::Radix8 => "radix-8 passes",
        };
        match self.local {
            0 => write!(f, "{later}"),
            local => write!(f, "one {local}-stage workgroup-memory pass, then {later}"),
        }
    }
}

impl NttKernels {
    pub fn new(gpu: &GpuContext, wide_mul: WideMul) -> Result<Self> {
        Ok(NttKernels {
            gpu: gpu.clone(),
            program: gpu.compile(wide_mul)?,
            tables: Mutex::new(HashMap::new()),
            placeholder: gpu.storage_buffer("ntt placeholder", &[0; 32])?,
            max_binding_bytes: None,
            high_table_bits: HIGH_TABLE_BITS,
            stage_passes: None,
            cpu_adapter: gpu.info.device_type == wgpu::DeviceType::Cpu,
            pool: None,
            read_backs: Mutex::new(Vec::new()),
        })
    }

    /// Frees the host vectors kept for the H step in parts' read-backs (8 GiB at 2^27).
    pub fn release_read_backs(&self) {
        self.read_backs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// A host vector of `len` elements for a read-back: one kept from the last H step in
    /// parts where its length is `len` (written before: a read-back into it runs at copy
    /// speed, where fresh memory faults in every page first), else a new one.
    fn read_back_vector(&self, len: usize) -> Vec<Scalar> {
        let mut kept = self.read_backs.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|v| v.len() == len);
        kept.pop()
            .unwrap_or_else(|| crate::field::zeroed_vec::<Scalar>(len))
    }

    /// Groups stages into passes as `passes` says, whatever the size and adapter.
    pub fn with_stage_passes(mut self, passes: StagePasses) -> Self {
        self.stage_passes = Some(StagePasses {
            local: passes.local.min(MAX_LOCAL_STAGES),
            ..passes
        });
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

    /// Power tables whose high parts hold at most 2^bits entries: below the size, twiddles
    /// are products of a low and a high entry.
    pub fn with_high_table_bits(mut self, bits: u32) -> Self {
        self.high_table_bits = bits;
        self
    }

    pub fn wide_mul(&self) -> WideMul {
        self.program.wide_mul
    }

    /// The device the kernels run on.
    pub fn gpu(&self) -> &GpuContext {
        &self.gpu
    }

    /// How stages are grouped into passes at size 2^log_n.
    ///
    /// Unless set, the fastest layouts measured (docs/benchmarks/gpu-part-2-27.md, "NTT passes
    /// at large sizes", commits f3407e3 and 1e956a9):
    /// - CPU adapters: radix-8 passes, no workgroup memory, whose barriers are costly on a
    ///   CPU.
    /// - GPUs up to 2^24: eight stages a workgroup-memory pass.
    /// - GPUs above 2^24: one eight-stage workgroup-memory pass, then radix-4. Later
    ///   workgroup-memory passes stride across the whole vector, and radix-8's eight
    ///   elements an invocation hold too many registers.
    pub fn stage_passes(&self, log_n: u32) -> StagePasses {
        match self.stage_passes {
            Some(passes) => passes,
            None if self.cpu_adapter => StagePasses {
                local: 0,
                later: LaterPasses::Radix8,
            },
            None if log_n > 24 => StagePasses {
                local: MAX_LOCAL_STAGES,
                later: LaterPasses::Radix4,
            },
            None => StagePasses {
                local: MAX_LOCAL_STAGES,
                later: LaterPasses::Local,
            },
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
        let tables = Arc::new(DomainTables::new(
            &self.gpu,
            self.pool.as_ref(),
            log_n,
            self.high_table_bits,
            self.binding_limit(),
        )?);
        cache.insert(log_n, tables.clone());
        Ok(tables)
    }

    /// Device bytes of the power tables of 2^log_n, kept while the kernels live.
    pub fn table_bytes(&self, log_n: u32) -> u64 {
        let limit = self.binding_limit();
        tables::table_bytes(
            log_n,
            tables::high_bits_within(log_n, self.high_table_bits, limit),
        )
    }

    /// How a vector of 2^log_n elements is cut into parts under the binding limit.
    pub fn part_layout(&self, log_n: u32) -> Result<PartLayout> {
        let size = std::mem::size_of::<Scalar>() as u64;
        PartLayout::new(log_n, size, self.binding_limit())
    }

    /// Bytes one binding may hold: the device's limit, or the cap tests set below it.
    fn binding_limit(&self) -> u64 {
        self.gpu
            .limits
            .max_storage_buffer_binding_size
            .min(self.gpu.limits.max_buffer_size)
            .min(self.max_binding_bytes.unwrap_or(u64::MAX))
    }

    /// Uploads `values` (zero-padded to 2^log_n) in as many parts as the binding limit needs.
    pub fn upload(&self, values: &[Scalar], log_n: u32) -> Result<DeviceVector<Scalar>> {
        DeviceVector::upload(
            &self.gpu,
            self.pool.as_ref(),
            values,
            self.part_layout(log_n)?,
        )
    }

    /// `op` on `values` (a power-of-two length): upload, transform, read back.
    pub fn transform(&self, values: &[Scalar], op: NttOp) -> Result<Vec<Scalar>> {
        let vector = self.upload(values, log2_of(values.len())?)?;
        self.transform_resident(&vector, op)?;
        vector.download(&self.gpu)
    }

    /// `op` on a vector already on the device, waiting for it.
    pub fn transform_resident(&self, vector: &DeviceVector<Scalar>, op: NttOp) -> Result<()> {
        let tables = self.tables(vector.layout().log_n)?;
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
        let mut coefficients = h.download(&self.gpu)?;
        coefficients.truncate(h.len() - 1);
        Ok(coefficients)
    }

    /// [`h_coefficients`](Self::h_coefficients) left on the device (all n of them; the
    /// prover's MSM takes the first n - 1), for the H MSM to read without a round trip.
    pub fn h_on_device(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<DeviceVector<Scalar>> {
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
    ) -> Result<[DeviceVector<Scalar>; 3]> {
        let log_n = h_domain(a, b, c)?.trailing_zeros();
        Ok([
            self.upload(a, log_n)?,
            self.upload(b, log_n)?,
            self.upload(c, log_n)?,
        ])
    }

    /// The H step on vectors already on the device (one size): leaves the n coefficients in
    /// `a` (the last is zero for a satisfied circuit; bellperson drops it), uses `b` and `c`
    /// as scratch. Returns the last submission (later submissions see the result).
    pub fn h_resident(
        &self,
        a: &DeviceVector<Scalar>,
        b: &DeviceVector<Scalar>,
        c: &DeviceVector<Scalar>,
    ) -> Result<wgpu::SubmissionIndex> {
        if b.layout() != a.layout() || c.layout() != a.layout() {
            return Err(Error::InvalidInput(
                "a, b, c must be uploaded at one size".into(),
            ));
        }
        let tables = self.tables(a.layout().log_n)?;
        let layout = self.layout(a);
        let mut to_coset = Vec::new();
        to_coset_steps(&tables, layout, &mut to_coset);
        self.submit(&tables, &to_coset, [b, b, b])?;
        let mut coefficients = Vec::new();
        unscaled_coefficients_steps(&tables, layout, &mut coefficients);
        self.submit(&tables, &coefficients, [c, c, c])?;
        let mut steps = to_coset;
        h_steps(&tables, layout, &mut steps);
        self.submit(&tables, &steps, [a, b, c])
    }

    /// The H step with two vectors on the device, for products computed there: a and b to
    /// the coset and their product into a, then b's buffer cleared and given to `fill_c`
    /// (which writes c into it and returns its submission), c to its coefficients, and the
    /// rest. The dispatches of [`h_resident`](Self::h_resident), so the same values; leaves
    /// h in `a`. Returns the last submission.
    pub fn h_in_pairs(
        &self,
        a: &DeviceVector<Scalar>,
        b_then_c: &DeviceVector<Scalar>,
        fill_c: impl FnOnce(&DeviceVector<Scalar>) -> Result<wgpu::SubmissionIndex>,
    ) -> Result<wgpu::SubmissionIndex> {
        if b_then_c.layout() != a.layout() {
            return Err(Error::InvalidInput("a and b must be of one size".into()));
        }
        let tables = self.tables(a.layout().log_n)?;
        let layout = self.layout(a);
        let steps_of = |add: fn(&DomainTables, Layout, &mut Vec<Step>)| {
            let mut steps = Vec::new();
            add(&tables, layout, &mut steps);
            steps
        };
        let to_coset = steps_of(to_coset_steps);
        self.submit(&tables, &to_coset, [a, a, a])?;
        self.submit(&tables, &to_coset, [b_then_c, b_then_c, b_then_c])?;
        self.submit(&tables, &steps_of(h_product_steps), [a, b_then_c, b_then_c])?;
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        for part in b_then_c.parts() {
            encoder.clear_buffer(part, 0, None);
        }
        self.gpu.submit([encoder.finish()]);
        fill_c(b_then_c)?;
        let c = b_then_c;
        self.submit(&tables, &steps_of(unscaled_coefficients_steps), [c, c, c])?;
        self.submit(&tables, &steps_of(h_finish_steps), [a, c, c])
    }

    /// The H step with one of a, b, c on the device at a time, for budgets that cannot hold
    /// three: b to the coset and c to its coefficients each on the device and back to the
    /// host, then a to the coset, and b's and c's parts uploaded one at a time into one part
    /// buffer for the passes that take them (`HProduct`, `HFinish`). The same dispatches as
    /// [`h_resident`](Self::h_resident), so the same values; leaves h in the returned vector.
    /// Device bytes: one vector and one part ([`h_in_parts_bytes`](Self::h_in_parts_bytes)).
    /// Host memory: b and c given owned are dropped once uploaded, before their transforms
    /// are read back (at 2^27, 8 GiB less at once).
    pub fn h_in_parts<'a>(
        &self,
        a: &[Scalar],
        b: impl Into<Cow<'a, [Scalar]>>,
        c: impl Into<Cow<'a, [Scalar]>>,
    ) -> Result<DeviceVector<Scalar>> {
        let (b, c) = (b.into(), c.into());
        let log_n = h_domain(a, &b, &c)?.trailing_zeros();
        let inputs = [HInput::Host(a.into()), HInput::Host(b), HInput::Host(c)];
        self.h_in_parts_of(log_n, inputs)
    }

    /// [`h_in_parts`](Self::h_in_parts) over the domain of 2^`log_n`, each of a, b, c from
    /// host memory or written on the device (the products of the device's matrices: b and c
    /// then cross the bus only on their way back, and a not at all).
    pub fn h_in_parts_of(
        &self,
        log_n: u32,
        [a, b, c]: [HInput<'_>; 3],
    ) -> Result<DeviceVector<Scalar>> {
        let tables = self.tables(log_n)?;
        // Host values are dropped once uploaded.
        let on_device = |input: HInput| match input {
            HInput::Host(values) => self.upload(&values, log_n),
            HInput::Device(fill) => {
                let vector = self.upload(&[], log_n)?;
                fill(&vector)?;
                Ok(vector)
            }
        };
        // Where the step's time goes, for `RUST_LOG=wgpu_groth16::ntt=debug`: each phase
        // waits for the one before.
        let started = std::time::Instant::now();
        let mut phases = Vec::new();
        let mut lap = |phase: &'static str| phases.push((phase, started.elapsed()));
        let transformed = |input: HInput,
                           add: fn(&DomainTables, Layout, &mut Vec<Step>),
                           [written, read]: [&'static str; 2],
                           lap: &mut dyn FnMut(&'static str)| {
            let vector = on_device(input)?;
            let mut steps = Vec::new();
            add(&tables, self.layout(&vector), &mut steps);
            self.gpu
                .wait_for(self.submit(&tables, &steps, [&vector, &vector, &vector])?)?;
            lap(written);
            let mut values = self.read_back_vector(vector.len());
            vector.download_into(&self.gpu, &mut values)?;
            lap(read);
            Ok::<_, Error>(values)
        };
        let b = transformed(
            b,
            to_coset_steps,
            ["b written, to the coset", "b read back"],
            &mut lap,
        )?;
        let c = transformed(
            c,
            unscaled_coefficients_steps,
            ["c written, to coefficients", "c read back"],
            &mut lap,
        )?;
        let a = on_device(a)?;
        lap("a written");
        let layout = self.layout(&a);
        let mut steps = Vec::new();
        to_coset_steps(&tables, layout, &mut steps);
        h_steps(&tables, layout, &mut steps);
        let part_len = a.layout().part_len();
        // One part's worth (a vector of one part), pooled like any vector.
        let partner = self.upload(&[], part_len.trailing_zeros())?;
        // Every part of this vector is the one partner buffer: a pass over part p binds it,
        // after part p of b or c was uploaded into it.
        let partners = DeviceVector::repeating(&partner.parts()[0], a.layout());
        let mut submitted = None;
        for run in steps.chunk_by(|x, y| hstep_part(x).is_none() && hstep_part(y).is_none()) {
            if let Some((p, entry)) = hstep_part(&run[0]) {
                let from = if entry == NttEntry::HProduct { &b } else { &c };
                let values = &from[p * part_len..(p + 1) * part_len];
                self.gpu
                    .upload(&partner.parts()[0], 0, Scalar::as_bytes(values))?;
            }
            submitted = Some(self.submit(&tables, run, [&a, &partners, &partners])?);
        }
        if let Some(last) = submitted {
            partner.used_by(&last);
            self.gpu.wait_for(last)?;
        }
        lap("a's passes with b's and c's parts uploaded");
        self.read_backs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend([b, c]);
        log::debug!(
            "the H step in parts of 2^{log_n}: {}",
            phases
                .iter()
                .scan(std::time::Duration::ZERO, |before, &(phase, at)| {
                    let took = at - std::mem::replace(before, at);
                    Some(format!("{phase} {:.1} ms", took.as_secs_f64() * 1e3))
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(a)
    }

    /// Device bytes [`h_in_parts`](Self::h_in_parts) takes at 2^log_n: one vector, one part.
    pub fn h_in_parts_bytes(&self, log_n: u32) -> Result<u64> {
        let layout = self.part_layout(log_n)?;
        let element = std::mem::size_of::<Scalar>();
        Ok(((layout.elements() + layout.part_len()) * element) as u64)
    }

    fn layout(&self, vector: &DeviceVector<Scalar>) -> Layout {
        let PartLayout { log_n, part_bits } = vector.layout();
        Layout {
            log_n,
            part_bits,
            passes: self.stage_passes(log_n),
        }
    }

    /// Records and submits `steps` over `vectors` = [data, b, c] (b and c only for the H
    /// step's combine).
    fn submit(
        &self,
        tables: &DomainTables,
        steps: &[Step],
        vectors: [&DeviceVector<Scalar>; 3],
    ) -> Result<wgpu::SubmissionIndex> {
        let params = UniformArray::new(
            &self.gpu,
            &steps.iter().map(|s| s.params).collect::<Vec<_>>(),
        )?;
        let mut groups: HashMap<(u8, usize, usize), wgpu::BindGroup> = HashMap::new();
        let mut bind = |binds: Binds| {
            let (key, data, partner, b, c) = match binds {
                Binds::Part(p) => (
                    (0, p, 0),
                    &vectors[0].parts()[p],
                    &self.placeholder,
                    &tables.buffer,
                    &tables.buffer,
                ),
                Binds::Pair(p, q) => (
                    (1, p, q),
                    &vectors[0].parts()[p],
                    &vectors[0].parts()[q],
                    &tables.buffer,
                    &tables.buffer,
                ),
                Binds::HStep(p) => (
                    (2, p, 0),
                    &vectors[0].parts()[p],
                    &self.placeholder,
                    &vectors[1].parts()[p],
                    &vectors[2].parts()[p],
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
            for (i, step) in steps.iter().enumerate() {
                pass.set_pipeline(self.program.pipeline(step.entry));
                pass.set_bind_group(0, &bind(step.binds), &[params.offset(i)]);
                let (x, y) = self
                    .gpu
                    .grid(step.entry, step.entry.threads(step.params.count));
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
