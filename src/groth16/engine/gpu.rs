//! The heavy steps on one device: the MSM and NTT kernels compiled once, a buffer pool within
//! a VRAM budget, and the two stage locks.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use blstrs::Scalar;

use super::cpu::select_on_host;
use super::plan::{chunk_options, DevicePlan, Footprint};
use super::slots::{ProofSlot, ProofSlots};
use super::{Engine, Query, StageGuard};
use crate::curve::{GpuCurve, G1, G2};
use crate::gpu::memory::device_memory;
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::vector::PartLayout;
use crate::gpu::waits::{self, Stage};
use crate::gpu::{DeviceVector, GpuContext};
use crate::groth16::params::ProvingParameters;
use crate::groth16::synthesis::ProvingAssignment;
use crate::msm::{MsmBases, MsmConfig, MsmJob, MsmKernels, MsmLimits, ResidentBases, Scalars};
use crate::ntt::{HInput, NttKernels, NttOp};
use crate::recorded::RecordedSystem;
use crate::sparse::{query_lengths, DeviceMatrices, MatrixBytes, ProductLayouts, SparseKernels};
use crate::subgroup::GpuCurveCheck;
use crate::{Error, Result};

/// The kernels of one device, compiled once.
pub struct GpuEngine {
    gpu: GpuContext,
    pool: BufferPool,
    g1: MsmKernels<G1>,
    g2: MsmKernels<G2>,
    ntt: NttKernels,
    /// Compiled on first use: only proofs of recorded constraint systems need it.
    sparse: Mutex<Option<Arc<SparseKernels>>>,
    /// Compiled on first use: only a parameter file's first read needs it.
    curve_check: Mutex<Option<Arc<GpuCurveCheck>>>,
    /// Held by the worker whose proof is in its staging stage (uploads).
    staging: Mutex<()>,
    /// Held by the worker whose proof is in its compute stage (its kernels and results).
    compute: Mutex<()>,
    /// Proofs in flight on this device, as the latest plan allows.
    slots: ProofSlots,
    /// Device memory this process held once the kernels were built (context, pipelines,
    /// tables), where the driver says: counted against the VRAM budget beside the pool.
    held_before: u64,
    /// Whether plans may run G1 MSMs two at a time (`DevicePlan::g1_together`).
    g1_together: AtomicBool,
}

/// Fr values for the GPU engine: still in host memory (uploaded where they are used), or in
/// a pooled device vector.
pub enum GpuVector<'a> {
    Host(&'a [Scalar]),
    /// Computed on the host for this proof (A and B selected where the scalars stream).
    Owned(Vec<Scalar>),
    Device(Box<DeviceVector<Scalar>>),
}

impl<'a> GpuVector<'a> {
    /// The values in host memory, taken out (an owned vector is left empty); `None`, and
    /// the vector left as it is, on the device.
    fn take_host(&mut self) -> Option<Cow<'a, [Scalar]>> {
        match std::mem::replace(self, GpuVector::Owned(Vec::new())) {
            GpuVector::Host(values) => Some(Cow::Borrowed(values)),
            GpuVector::Owned(values) => Some(Cow::Owned(values)),
            device => {
                *self = device;
                None
            }
        }
    }

    /// The values, where they are in host memory.
    fn on_host(&self) -> Option<&[Scalar]> {
        match self {
            GpuVector::Host(values) => Some(values),
            GpuVector::Owned(values) => Some(values),
            GpuVector::Device(_) => None,
        }
    }
}

/// A curve's bases for the GPU engine: in host memory, with the part the device keeps.
pub struct GpuBases<'a, C: GpuCurve> {
    host: &'a [C::Affine],
    device: Option<&'a DeviceBases<C>>,
}

/// A base set on the device as its plan says: a resident prefix (possibly all, possibly
/// none), and its MSMs' limits (the points of each chunk: the rest streams a chunk at a
/// time; the bucket array).
pub struct DeviceBases<C: GpuCurve> {
    resident: Option<ResidentBases<C>>,
    limits: MsmLimits,
    /// Whether its MSMs run two at a time with another set's (`DevicePlan::g1_together`).
    together: bool,
}

/// A parameter set's bases on the device as its [`DevicePlan`] says, counted against the
/// engine's VRAM budget until dropped.
pub struct ResidentParams {
    pub h: DeviceBases<G1>,
    pub l: DeviceBases<G1>,
    pub a: DeviceBases<G1>,
    pub b_g1: DeviceBases<G1>,
    pub b_g2: DeviceBases<G2>,
    pub plan: DevicePlan,
    pub footprint: Footprint,
    _budget: Reservation,
}

/// The share of a VRAM budget (1/16) its upload staging buffers may hold, up to
/// [`MAX_STAGING`], the staging's own cap.
const STAGING_SHARE: u64 = 16;
const MAX_STAGING: u64 = 1 << 30;

/// Plans tried for one parameter set before its bases are all streamed: each retry after
/// the driver refused an allocation plans within three quarters of the budget before.
const PLAN_ATTEMPTS: usize = 4;

impl GpuEngine {
    /// The engine of `gpu` within `vram_budget` bytes; without one, the device memory's
    /// default budget (`DeviceMemory::default_budget`), or none but the device's own where its
    /// backend does not tell.
    pub(super) fn new(gpu: GpuContext, msm: MsmConfig, vram_budget: Option<u64>) -> Result<Self> {
        let wide = gpu.preferred_wide_mul();
        let memory = device_memory(&gpu.adapter);
        let budget = match (vram_budget, memory) {
            (Some(budget), Some(memory)) if budget > memory.heap_bytes => {
                log::warn!(
                    "a VRAM budget of {budget} bytes is more than {} has ({})",
                    gpu.describe(),
                    memory.describe()
                );
                budget
            }
            (Some(budget), _) => budget,
            (None, Some(memory)) => {
                log::info!("{}: {}", gpu.describe(), memory.describe());
                memory.default_budget()
            }
            (None, None) => {
                log::info!(
                    "{}: device memory unknown, no VRAM budget but the device's",
                    gpu.describe()
                );
                u64::MAX
            }
        };
        let pool = BufferPool::new(&gpu, budget);
        let mut engine = GpuEngine {
            g1: MsmKernels::new(&gpu, wide, msm.clone())?.with_pool(pool.clone()),
            g2: MsmKernels::new(&gpu, wide, msm)?.with_pool(pool.clone()),
            ntt: NttKernels::new(&gpu, wide)?.with_pool(pool.clone()),
            sparse: Mutex::new(None),
            curve_check: Mutex::new(None),
            pool,
            gpu,
            staging: Mutex::new(()),
            compute: Mutex::new(()),
            slots: ProofSlots::new(),
            held_before: 0,
            g1_together: AtomicBool::new(true),
        };
        engine.held_before = device_memory(&engine.gpu.adapter)
            .and_then(|memory| memory.used_bytes)
            .unwrap_or(0);
        engine.set_vram_budget(budget);
        Ok(engine)
    }

    /// Cuts the H step's vectors and the proofs' scalar vectors into parts of at most
    /// `bytes`, below the device's binding limit: the paths of vectors in several parts (four
    /// at 2^27 on a 1 GiB limit) at small sizes, for tests.
    pub fn with_vector_parts_within(mut self, bytes: u64) -> Self {
        self.ntt = self.ntt.with_binding_limit(bytes);
        self
    }

    pub fn gpu(&self) -> &GpuContext {
        &self.gpu
    }

    pub fn g1(&self) -> &MsmKernels<G1> {
        &self.g1
    }

    pub fn g2(&self) -> &MsmKernels<G2> {
        &self.g2
    }

    pub fn ntt(&self) -> &NttKernels {
        &self.ntt
    }

    /// Proves within `bytes` of device memory from now on: the MSM workspaces kept for the
    /// old budget are freed, so that the next plan counts its own (and the host vectors
    /// kept for the H step in parts' read-backs). Provers made before keep
    /// their plans; make them again.
    ///
    /// The budget bounds the process's device memory: the pool gets it less the upload
    /// staging's share (a sixteenth, in whole staging buffers; below 512 MiB that is none,
    /// and one 32 MiB buffer stays outside the count) and less what the process held once
    /// the kernels were built, where the driver says (194 MiB on the H200). Uncounted,
    /// staging and those put nvidia-smi 1.2 GB over a 16 GiB budget.
    pub fn set_vram_budget(&self, bytes: u64) {
        self.g1.release_workspaces();
        self.g2.release_workspaces();
        self.ntt.release_read_backs();
        let buffer = self.gpu.staging_buffer_bytes();
        let staging = (bytes / STAGING_SHARE / buffer * buffer).min(MAX_STAGING);
        self.gpu.limit_upload_staging(staging);
        let pool = bytes.saturating_sub(staging + self.held_before);
        if bytes != u64::MAX {
            log::info!(
                "VRAM budget {} MiB: {} MiB for buffers, {} MiB for upload staging, {} MiB \
                 held before the first buffer (context, pipelines)",
                bytes >> 20,
                pool >> 20,
                staging >> 20,
                self.held_before >> 20
            );
        }
        self.pool.set_budget(pool);
        // The plans made for the old budget no longer bound the proofs in flight.
        self.slots.set_capacity(usize::MAX);
    }

    /// Whether the plans made from now on may run a proof's G1 MSMs two at a time where
    /// their bases stream (the default; `bench prove --g1-together` compares both).
    pub fn allow_g1_together(&self, allowed: bool) {
        self.g1_together.store(allowed, Ordering::Relaxed);
    }

    /// Device memory the process held once this engine's kernels were built, where the
    /// driver says (else 0): counted against the VRAM budget beside the pool.
    pub fn held_before_buffers(&self) -> u64 {
        self.held_before
    }

    /// Proofs that staged ahead on this device (in the room another opened past its H
    /// step) since the engine was made.
    pub fn proofs_staged_ahead(&self) -> usize {
        self.slots.taken_ahead()
    }

    /// The default VRAM budget of this engine's device, if its backend tells.
    pub fn default_vram_budget(&self) -> Option<u64> {
        device_memory(&self.gpu.adapter).map(|memory| memory.default_budget())
    }

    /// The sparse-product kernel, compiled on first use.
    pub fn sparse(&self) -> Result<Arc<SparseKernels>> {
        let mut sparse = self.sparse.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kernels) = &*sparse {
            return Ok(kernels.clone());
        }
        let kernels = Arc::new(SparseKernels::new(&self.gpu, self.ntt.wide_mul())?);
        *sparse = Some(kernels.clone());
        Ok(kernels)
    }

    /// The curve and subgroup checks of a parameter file's points on this device, or `None`
    /// on a software adapter, where blst on the CPU is faster (lavapipe does ~10^7 field
    /// multiplications a second; a point's check takes a thousand or more).
    pub fn curve_check(&self) -> Result<Option<Arc<GpuCurveCheck>>> {
        if self.gpu.info.device_type == wgpu::DeviceType::Cpu {
            return Ok(None);
        }
        let mut built = self.curve_check.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(check) = &*built {
            return Ok(Some(check.clone()));
        }
        let check = Arc::new(GpuCurveCheck::new(&self.gpu, self.ntt.wide_mul())?);
        *built = Some(check.clone());
        Ok(Some(check))
    }

    /// `system`'s matrices for the products and query scalars of their witnesses on the
    /// device, resident or (`streamed`) streamed from host memory at each use, within the
    /// VRAM budget ([`Error::VramBudget`] when it has no room).
    pub fn device_matrices(
        &self,
        system: &Arc<RecordedSystem>,
        streamed: bool,
    ) -> Result<DeviceMatrices> {
        let [a, b] = query_lengths(system);
        let layouts = ProductLayouts {
            products: self.padded_layout(system.rows())?,
            aux: self.padded_layout(system.aux)?,
            a: self.padded_layout(a)?,
            b: self.padded_layout(b)?,
        };
        let sparse = self.sparse()?;
        match streamed {
            true => sparse.stream(system, layouts, Some(&self.pool)),
            false => sparse.upload(system, layouts, Some(&self.pool)),
        }
    }

    /// The layout of `len` values zero-padded to the next power of two, as
    /// [`Engine::upload`] stores them.
    fn padded_layout(&self, len: usize) -> Result<PartLayout> {
        self.ntt
            .part_layout(len.max(1).next_power_of_two().trailing_zeros())
    }

    /// Pooled buffers, MSM workspaces and resident bases of every prover on this engine.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// Device bytes of a pooled vector of `len` values as [`Engine::upload`] stores it.
    fn vector_bytes(&self, len: usize) -> Result<u64> {
        let log_n = len.max(1).next_power_of_two().trailing_zeros();
        let layout = self.ntt.part_layout(log_n)?;
        Ok((layout.elements() * std::mem::size_of::<Scalar>()) as u64)
    }

    /// The device bytes of `params`' proofs on this device, with constraint matrices of
    /// `matrices` bytes to place (zero: not known yet).
    pub fn footprint(
        &self,
        params: &ProvingParameters,
        matrices: MatrixBytes,
    ) -> Result<Footprint> {
        let domain = params.h.len() + 1;
        let g1_lens = [
            params.h.len(),
            params.l.len(),
            params.a.len(),
            params.b_g1.len(),
        ];
        let log_domain = domain.next_power_of_two().trailing_zeros();
        let chunks = chunk_options(
            g1_lens,
            params.b_g2.len(),
            self.ntt.table_bytes(log_domain),
            |n, limits| self.g1.plan_within(n, limits),
            |n, limits| self.g2.plan_within(n, limits),
        )?;
        let (g1, g2) = (G1::AFFINE_BYTES as u64, G2::AFFINE_BYTES as u64);
        Ok(Footprint {
            domain_vector: self.vector_bytes(domain)?,
            scalar_vectors: [
                self.vector_bytes(params.l.len())?,
                self.vector_bytes(params.a.len())?,
                self.vector_bytes(params.b_g1.len())?,
            ],
            h_in_parts: self.ntt.h_in_parts_bytes(log_domain)?,
            bases: [
                (params.h.len(), g1),
                (params.l.len(), g1),
                (params.a.len(), g1),
                (params.b_g1.len(), g1),
                (params.b_g2.len(), g2),
            ],
            chunks,
            matrices: matrices.resident,
            matrix_stream: matrices.streamed,
        })
    }

    /// `params`' bases on the device as planned (at most `workers` proofs in flight). Where
    /// other parameter sets already hold part of the budget, or the driver refuses an
    /// allocation below it (another process holds memory), a smaller plan is made and tried,
    /// with a logged warning; a budget below one proof at its smallest is
    /// [`Error::VramBudget`].
    pub fn keep_resident(
        &self,
        params: &ProvingParameters,
        workers: usize,
        matrices: MatrixBytes,
    ) -> Result<ResidentParams> {
        let footprint = self.footprint(params, matrices)?;
        let mut budget = self.pool.budget();
        for attempt in 1..=PLAN_ATTEMPTS {
            // The last attempt keeps no base resident.
            let keep_bases = attempt < PLAN_ATTEMPTS;
            let together = self.g1_together.load(Ordering::Relaxed);
            let plan = DevicePlan::with_bases(&footprint, budget, workers, keep_bases, together)?;
            let Some(aside) = self.pool.set_aside(plan.resident_bytes) else {
                let room = self.pool.room();
                log::info!(
                    "{} MiB of bases planned, {} MiB of the VRAM budget left beside other \
                     parameter sets: planned again",
                    plan.resident_bytes >> 20,
                    room >> 20
                );
                budget = budget.saturating_sub(plan.resident_bytes.saturating_sub(room));
                continue;
            };
            match self.upload_planned(params, &plan) {
                Ok(bases) => {
                    log::info!("{}: {}", self.gpu.describe(), plan.describe(&footprint));
                    self.slots.limit(plan.proofs_in_flight);
                    let [h, l, a, b_g1] = bases.0;
                    return Ok(ResidentParams {
                        h,
                        l,
                        a,
                        b_g1,
                        b_g2: bases.1,
                        plan,
                        footprint,
                        _budget: aside,
                    });
                }
                Err(Error::OutOfMemory { what, message, .. }) => {
                    budget = budget / 4 * 3;
                    log::warn!(
                        "{} refused {what} ({message}) within the VRAM budget: planning \
                         within {} MiB",
                        self.gpu.describe(),
                        budget >> 20
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::OutOfMemory {
            what: "a parameter set's bases".into(),
            bytes: footprint.bases_bytes(),
            message: format!("refused in {PLAN_ATTEMPTS} plans"),
        })
    }

    /// Uploads the resident prefix of every base set of `plan`.
    #[allow(clippy::type_complexity)]
    fn upload_planned(
        &self,
        params: &ProvingParameters,
        plan: &DevicePlan,
    ) -> Result<([DeviceBases<G1>; 4], DeviceBases<G2>)> {
        fn place<C: GpuCurve>(
            kernels: &MsmKernels<C>,
            bases: &[C::Affine],
            resident: usize,
            limits: MsmLimits,
            together: bool,
        ) -> Result<DeviceBases<C>> {
            let resident = match resident {
                0 => None,
                n => Some(kernels.upload_bases(&bases[..n])?),
            };
            Ok(DeviceBases {
                resident,
                limits,
                together,
            })
        }
        let [h, l, a, b_g1, b_g2] = plan.resident_points;
        let [g1, g2] = plan.chunk_points.map(|chunk_points| MsmLimits {
            chunk_points,
            bucket_bytes: plan.bucket_bytes,
        });
        let together = plan.g1_together;
        Ok((
            [
                place(&self.g1, &params.h, h, g1, together)?,
                place(&self.g1, &params.l, l, g1, together)?,
                place(&self.g1, &params.a, a, g1, together)?,
                place(&self.g1, &params.b_g1, b_g1, g1, together)?,
            ],
            place(&self.g2, &params.b_g2, b_g2, g2, false)?,
        ))
    }

    /// `values` zero-padded to the next power of two in a pooled device vector.
    fn upload_padded(&self, values: &[Scalar]) -> Result<DeviceVector<Scalar>> {
        let log_n = values.len().max(1).next_power_of_two().trailing_zeros();
        self.ntt.upload(values, log_n)
    }

    /// A pooled vector of `len` zeros padded to the next power of two, as [`upload_padded`]
    /// would store `len` values.
    fn zeroed(&self, len: usize) -> Result<DeviceVector<Scalar>> {
        let log_n = len.max(1).next_power_of_two().trailing_zeros();
        self.ntt.upload(&[], log_n)
    }

    /// The MSM kernels of curve `C` (G1 and G2 are the only curves).
    fn msm_kernels<C: GpuCurve>(&self) -> &MsmKernels<C> {
        use std::any::Any;
        (&self.g1 as &dyn Any)
            .downcast_ref()
            .or_else(|| (&self.g2 as &dyn Any).downcast_ref())
            .expect("the engine has the MSM kernels of G1 and G2")
    }
}

impl Engine for GpuEngine {
    type Vector<'a> = GpuVector<'a>;
    type Bases<'a, C: GpuCurve> = GpuBases<'a, C>;

    fn describe(&self) -> String {
        self.gpu.describe()
    }

    fn proof_slot(&self, staged_bytes: u64) -> Option<ProofSlot<'_>> {
        Some(self.slots.take(staged_bytes))
    }

    fn enter(&self, stage: Stage) -> StageGuard<'_> {
        let lock = match stage {
            Stage::Staging => &self.staging,
            Stage::Compute => &self.compute,
        };
        StageGuard {
            // A poisoned lock still serializes: it guards no data.
            _lock: Some(lock.lock().unwrap_or_else(|e| e.into_inner())),
            _mark: waits::enter(stage),
        }
    }

    fn vector<'a>(&'a self, values: &'a [Scalar]) -> GpuVector<'a> {
        GpuVector::Host(values)
    }

    fn upload<'a>(&'a self, values: &'a [Scalar]) -> Result<GpuVector<'a>> {
        Ok(GpuVector::Device(Box::new(self.upload_padded(values)?)))
    }

    fn h_inputs<'a>(
        &'a self,
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
    ) -> Result<[GpuVector<'a>; 3]> {
        Ok(self
            .ntt
            .upload_h_inputs(a, b, c)?
            .map(|v| GpuVector::Device(Box::new(v))))
    }

    fn products<'a>(
        &'a self,
        system: &RecordedSystem,
        matrices: Option<&DeviceMatrices>,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        aux: &GpuVector<'a>,
        in_parts: bool,
    ) -> Result<[GpuVector<'a>; 3]> {
        let (Some(matrices), GpuVector::Device(aux)) = (matrices, aux) else {
            let [a, b, c] = system.products_of(inputs, aux_values);
            // With the scalars kept on the host, or the H step in parts, so are a, b, c: the
            // H step moves them.
            if in_parts || aux.on_host().is_some() {
                return Ok([a, b, c].map(GpuVector::Owned));
            }
            return Ok(self
                .ntt
                .upload_h_inputs(&a, &b, &c)?
                .map(|v| GpuVector::Device(Box::new(v))));
        };
        let [a, b, c] = [(); 3].map(|_| self.zeroed(system.rows()));
        let out = [a?, b?, c?];
        // Waited on, so that the products' time is their own step's and not the H step's.
        let submission =
            self.sparse()?
                .products(matrices, inputs, aux, [&out[0], &out[1], &out[2]])?;
        self.gpu.wait_for(submission)?;
        Ok(out.map(|v| GpuVector::Device(Box::new(v))))
    }

    fn products_and_h<'a>(
        &'a self,
        system: &RecordedSystem,
        matrices: &DeviceMatrices,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        aux: &mut GpuVector<'a>,
        in_parts: bool,
    ) -> Result<GpuVector<'a>> {
        let not_on_device =
            || Error::Internal("products on the device need the aux values there".into());
        let sparse = self.sparse()?;
        if in_parts {
            let log_n = system.rows().max(1).next_power_of_two().trailing_zeros();
            // The aux values go back to the pool once the third product is written (the
            // product's submission keeps them until it completes): a proof then holds one
            // vector and a part, not those and the aux values (at 2^27, 8 GiB at most
            // instead of 10).
            let written = std::cell::Cell::new(0);
            let GpuVector::Device(device_aux) =
                std::mem::replace(aux, GpuVector::Owned(Vec::new()))
            else {
                return Err(not_on_device());
            };
            let device_aux = std::cell::RefCell::new(Some(device_aux));
            let product = |matrix: usize| {
                let (sparse, device_aux, written) = (&sparse, &device_aux, &written);
                move |out: &DeviceVector<Scalar>| {
                    let mut held = device_aux.borrow_mut();
                    let aux = held.as_ref().ok_or_else(|| {
                        Error::Internal("a product asked for after the last one".into())
                    })?;
                    let submission = sparse.product(matrices, matrix, inputs, aux, out)?;
                    written.set(written.get() + 1);
                    if written.get() == 3 {
                        *held = None;
                    }
                    Ok(submission)
                }
            };
            let [a, b, c] = [product(0), product(1), product(2)];
            let inputs = [HInput::Device(&a), HInput::Device(&b), HInput::Device(&c)];
            let h = self.ntt.h_in_parts_of(log_n, inputs)?;
            *aux = GpuVector::Device(Box::new(self.upload_padded(aux_values)?));
            return Ok(GpuVector::Device(Box::new(h)));
        }
        let GpuVector::Device(device_aux) = aux else {
            return Err(not_on_device());
        };
        let [a, b] = [(); 2].map(|_| self.zeroed(system.rows()));
        let (a, b) = (a?, b?);
        sparse.product(matrices, 0, inputs, device_aux, &a)?;
        sparse.product(matrices, 1, inputs, device_aux, &b)?;
        let last = self.ntt.h_in_pairs(&a, &b, |c| {
            sparse.product(matrices, 2, inputs, device_aux, c)
        })?;
        self.gpu.wait_for(last)?;
        Ok(GpuVector::Device(Box::new(a)))
    }

    fn h_step(&self, inputs: &mut [GpuVector<'_>; 3], in_parts: bool) -> Result<()> {
        if inputs.iter().all(|v| v.on_host().is_some()) {
            if in_parts {
                // b and c computed for this proof go to the H step, to drop once uploaded.
                let [a, b, c] = &mut *inputs;
                let (Some(a), Some(b), Some(c)) = (a.on_host(), b.take_host(), c.take_host())
                else {
                    return Err(Error::Internal("the H step's inputs left the host".into()));
                };
                let h = self.ntt.h_in_parts(a, b, c)?;
                *inputs = [
                    GpuVector::Device(Box::new(h)),
                    GpuVector::Owned(Vec::new()),
                    GpuVector::Owned(Vec::new()),
                ];
                return Ok(());
            }
            let [a, b, c] = inputs.each_ref().map(|v| v.on_host().unwrap_or_default());
            *inputs = self
                .ntt
                .upload_h_inputs(a, b, c)?
                .map(|v| GpuVector::Device(Box::new(v)));
        }
        let [GpuVector::Device(a), GpuVector::Device(b), GpuVector::Device(c)] = inputs else {
            return Err(Error::Internal(
                "the H step's inputs are partly on the device".into(),
            ));
        };
        self.gpu.wait_for(self.ntt.h_resident(a, b, c)?)
    }

    fn ntt(&self, vector: &mut GpuVector<'_>, op: NttOp) -> Result<()> {
        if let Some(values) = vector.on_host() {
            let log_n = crate::ntt::log2_of(values.len())?;
            *vector = GpuVector::Device(Box::new(self.ntt.upload(values, log_n)?));
        }
        if let GpuVector::Device(device) = vector {
            self.ntt.transform_resident(device, op)?;
        }
        Ok(())
    }

    fn read(&self, vector: &GpuVector<'_>, len: usize) -> Result<Vec<Scalar>> {
        let mut values = match vector {
            GpuVector::Device(device) => device.download(&self.gpu)?,
            host => host.on_host().unwrap_or_default().to_vec(),
        };
        if len > values.len() {
            return Err(Error::InvalidInput(format!(
                "{len} values asked of a vector of {}",
                values.len()
            )));
        }
        values.truncate(len);
        Ok(values)
    }

    /// Matrices on the device, resident or streamed, are the ones [`gather`](Engine::gather)
    /// gathers by (from the aux values [`upload`](Engine::upload) put on the device).
    fn selects_on_device(&self, matrices: Option<&DeviceMatrices>) -> bool {
        matrices.is_some()
    }

    /// Gathered on the device with the matrices there (waited on, so that the prover can time
    /// it as a step). Otherwise selected on the CPU and placed as
    /// [`place_selected`](Engine::place_selected) places them.
    fn gather<'a>(
        &'a self,
        assignment: &ProvingAssignment,
        matrices: Option<&DeviceMatrices>,
        aux: &GpuVector<'a>,
        query: Query,
    ) -> Result<GpuVector<'a>> {
        if let (Some(matrices), GpuVector::Device(aux)) = (matrices, aux) {
            let out = self.zeroed(matrices.query_lengths()[query.index()])?;
            let submission = self.sparse()?.query(
                matrices,
                query.index(),
                &assignment.input_assignment,
                aux,
                &out,
            )?;
            self.gpu.wait_for(submission)?;
            return Ok(GpuVector::Device(Box::new(out)));
        }
        let [a, b] = self.place_selected(select_on_host(assignment), aux)?;
        Ok(if query == Query::A { a } else { b })
    }

    /// Uploaded one after the other, once the H and L MSMs are done: uploading A and B as
    /// each selection finished queued their copies among the H step's kernels and made the
    /// H step and the H MSM several times slower (docs/benchmarks/proofs-and-batches.md,
    /// commit ab2c598).
    fn place_selected<'a>(
        &'a self,
        selected: [Vec<Scalar>; 2],
        aux: &GpuVector<'a>,
    ) -> Result<[GpuVector<'a>; 2]> {
        // Scalars kept on the host (the aux values were not uploaded) stay there.
        if aux.on_host().is_some() {
            return Ok(selected.map(GpuVector::Owned));
        }
        let [a, b] = selected;
        Ok([
            GpuVector::Device(Box::new(self.upload_padded(&a)?)),
            GpuVector::Device(Box::new(self.upload_padded(&b)?)),
        ])
    }

    fn bases<'a, C: GpuCurve>(
        &'a self,
        host: &'a [C::Affine],
        device: Option<&'a DeviceBases<C>>,
    ) -> GpuBases<'a, C> {
        GpuBases { host, device }
    }

    fn msm<C: GpuCurve>(
        &self,
        bases: &GpuBases<'_, C>,
        scalars: &GpuVector<'_>,
        len: usize,
    ) -> Result<C::Projective> {
        let (job, limits) = msm_job(bases, scalars, len)?;
        self.msm_kernels::<C>()
            .msm_streaming(&job.bases, job.scalars, limits)
    }

    fn msms<C: GpuCurve>(
        &self,
        jobs: &[(&GpuBases<'_, C>, &GpuVector<'_>, usize)],
    ) -> Result<Vec<C::Projective>> {
        let planned: Vec<_> = jobs
            .iter()
            .map(|&(bases, scalars, len)| Ok((msm_job(bases, scalars, len)?, bases.device)))
            .collect::<Result<_>>()?;
        let limits = planned.first().map(|&((_, limits), _)| limits);
        let together = planned.iter().all(|&((_, job_limits), device)| {
            device.is_some_and(|d| d.together) && Some(job_limits) == limits
        });
        let kernels = self.msm_kernels::<C>();
        match (together, limits) {
            (true, Some(limits)) => {
                let msm_jobs: Vec<MsmJob<'_, C>> =
                    planned.iter().map(|((job, _), _)| *job).collect();
                kernels.msm_together(&msm_jobs, limits)
            }
            _ => planned
                .iter()
                .map(|&((job, limits), _)| kernels.msm_streaming(&job.bases, job.scalars, limits))
                .collect(),
        }
    }
}

/// One MSM of `len` scalars over `bases` as the GPU's kernels take it, and its limits.
fn msm_job<'a, C: GpuCurve>(
    bases: &GpuBases<'a, C>,
    scalars: &'a GpuVector<'_>,
    len: usize,
) -> Result<(MsmJob<'a, C>, MsmLimits)> {
    let scalars = match scalars {
        GpuVector::Device(vector) => Scalars::Device(vector, len),
        host => {
            let values = host.on_host().unwrap_or_default();
            Scalars::Host(values.get(..len).ok_or_else(|| {
                Error::InvalidInput(format!("an MSM of {len} scalars over {}", values.len()))
            })?)
        }
    };
    let host = bases.host.get(..scalars.len()).ok_or_else(|| {
        Error::InvalidInput(format!(
            "{} bases for {} scalars",
            bases.host.len(),
            scalars.len()
        ))
    })?;
    // Without a plan (one-off work), bases stream in the MSM's own chunks.
    let (resident, limits) = match bases.device {
        Some(device) => (device.resident.as_ref(), device.limits),
        None => (None, MsmLimits::NONE),
    };
    let bases = MsmBases { resident, host };
    Ok((MsmJob { bases, scalars }, limits))
}
