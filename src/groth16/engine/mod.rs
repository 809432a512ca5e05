//! The seam between the prover and where its heavy steps run.
//!
//! [`Engine`] is every heavy step of a proof (uploads, the H step, NTTs, scalar selection,
//! MSMs over host or device scalars) with two implementations: [`CpuEngine`] (blstrs and
//! bellperson, the reference) and [`GpuEngine`] (our kernels on one device). Work is written
//! once against the trait ([`Work`]) and runs on either. [`ProverEngine`] is what a prover
//! holds: a GPU engine, if one is usable, with the CPU behind it; it decides the backend from
//! the configuration and the environment (`BELLMAN_NO_GPU`), and redoes work on the CPU when
//! the GPU fails. Both decisions are made here and nowhere else.

mod cpu;
mod gpu;
mod plan;
mod slots;

pub use cpu::{select_on_host, CpuEngine};
pub use gpu::{DeviceBases, GpuBases, GpuEngine, GpuVector, ResidentParams};
pub use plan::{ChunkOption, DevicePlan, Footprint, ProofBuffers, BASE_SETS};
pub use slots::ProofSlot;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard, OnceLock};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

use super::synthesis::ProvingAssignment;
use crate::curve::{GpuCurve, G1, G2};
use crate::gpu::context::select_adapters;
use crate::gpu::waits::{self, Stage, StageMark};
use crate::gpu::{AdapterSelector, GpuContext};
use crate::msm::MsmConfig;
use crate::ntt::NttOp;
use crate::recorded::RecordedSystem;
use crate::sparse::DeviceMatrices;
use crate::{Error, Result};

/// One of a proof's two queries whose scalars are selected from its witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    A,
    B,
}

impl Query {
    /// 0 for A, 1 for B.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Where a proof's heavy steps run. A vector or a set of bases is the engine's own: host
/// memory on the CPU, device buffers on a GPU.
pub trait Engine: Sync {
    /// Fr values where this engine computes on them.
    type Vector<'a>: Send + Sync
    where
        Self: 'a;
    /// A curve's bases where this engine reads them.
    type Bases<'a, C: GpuCurve>: Sync
    where
        Self: 'a;

    /// The engine in logs and reports: the adapter, or "CPU".
    fn describe(&self) -> String;

    /// Holds one of the device's proof slots until the guard drops (a GPU proves as many
    /// proofs at once as its plan sized the budget for, across every prover, and one more
    /// may stage ahead, its staging taking `staged_bytes`; the CPU, any number). Taken
    /// before a proof's first buffer.
    fn proof_slot(&self, _staged_bytes: u64) -> Option<ProofSlot<'_>> {
        None
    }

    /// Enters a stage of a proof until the guard drops. On a GPU each stage has a lock, so
    /// that one proof stages while another computes (supraseal-c2's two locks).
    fn enter(&self, stage: Stage) -> StageGuard<'_>;

    /// `values` as this engine's vector, not copied yet (for work on host data).
    fn vector<'a>(&'a self, values: &'a [Scalar]) -> Self::Vector<'a>;

    /// `values` where this engine computes, copied now (a proof's staging).
    fn upload<'a>(&'a self, values: &'a [Scalar]) -> Result<Self::Vector<'a>>;

    /// The H step's a, b, c (equal lengths) where this engine computes, at the size of their
    /// domain (the next power of two).
    fn h_inputs<'a>(
        &'a self,
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
    ) -> Result<[Self::Vector<'a>; 3]>;

    /// The H step's a, b, c of a witness whose products were left to the proof
    /// (`ProvingAssignment::deferred_products`): A·z, B·z and C·z of `system`'s matrices, z the
    /// `inputs` then `aux_values`, where this engine computes, as [`h_inputs`](Self::h_inputs)
    /// gives them. `aux` is `aux_values` as [`upload`](Self::upload) put them (the L MSM's
    /// scalars, which a GPU reads in place); `matrices` the matrices on this engine's device,
    /// kept or streamed there (else the products run on the CPU). Products run on the CPU
    /// stay in host memory where the scalars do or `in_parts` (the H step in parts moves
    /// them).
    fn products<'a>(
        &'a self,
        system: &RecordedSystem,
        matrices: Option<&DeviceMatrices>,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        aux: &Self::Vector<'a>,
        in_parts: bool,
    ) -> Result<[Self::Vector<'a>; 3]>;

    /// [`products`](Self::products) then [`h_step`](Self::h_step) on a GPU with the device's
    /// `matrices`, two vectors at a time (`NttKernels::h_in_pairs`: A·z and B·z to the
    /// coset and their product, then C·z in b's room) or, `in_parts`, one vector and a part
    /// (`NttKernels::h_in_parts_of`, each product written on the device): h's
    /// coefficients, as the H step leaves them in a. In parts, `aux` (the device's copy of
    /// `aux_values`) leaves the device once the last product is written, so that the H
    /// step's part takes its room, and is uploaded again after it.
    fn products_and_h<'a>(
        &'a self,
        system: &RecordedSystem,
        matrices: &DeviceMatrices,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        aux: &mut Self::Vector<'a>,
        in_parts: bool,
    ) -> Result<Self::Vector<'a>>;

    /// bellperson's H step on [`h_inputs`](Self::h_inputs), in place: the coefficients of h
    /// (the first n - 1 are the H MSM's scalars) replace a; b and c are scratch, kept by the
    /// caller (a proof's device buffers go back to the pool together, at its end). With
    /// `in_parts`, a GPU holds one of them at a time (`NttKernels::h_in_parts`): inputs
    /// still on the host stay there until their turn.
    fn h_step(&self, inputs: &mut [Self::Vector<'_>; 3], in_parts: bool) -> Result<()>;

    /// bellperson's transform `op` of a power-of-two vector, in place.
    fn ntt(&self, vector: &mut Self::Vector<'_>, op: NttOp) -> Result<()>;

    /// The first `len` values of `vector`, in host memory.
    fn read(&self, vector: &Self::Vector<'_>, len: usize) -> Result<Vec<Scalar>>;

    /// Whether [`gather`](Self::gather) with the device's `matrices` gathers on this
    /// engine's device (a few kernels, waited on: the prover runs it as a step of its own,
    /// after the H step) rather than on the host (seconds at 2^27: the prover runs
    /// [`select_on_host`] beside the H step and the H and L MSMs, then
    /// [`place_selected`](Self::place_selected)).
    fn selects_on_device(&self, matrices: Option<&DeviceMatrices>) -> bool;

    /// The scalars of a proof's A or B query: A's are the inputs, then the aux variables A's
    /// density marks; B's are the inputs and the aux variables B's densities mark.
    /// bellperson runs each query as an input and an aux MSM over consecutive bases; one MSM
    /// over the concatenation is the same sum. With the device's `matrices` of the proof's
    /// circuit, a GPU gathers them from `aux` (the aux values as [`upload`](Self::upload) put
    /// them) where they are, instead of selecting on the host and uploading; one query at a
    /// time, so that a proof holds the aux values and one query's scalars.
    fn gather<'a>(
        &'a self,
        assignment: &ProvingAssignment,
        matrices: Option<&DeviceMatrices>,
        aux: &Self::Vector<'a>,
        query: Query,
    ) -> Result<Self::Vector<'a>>;

    /// The A and B scalars `selected` on the host ([`select_on_host`]) where this engine
    /// computes on `aux`: on a GPU uploaded where `aux` was uploaded, and kept in host memory
    /// where the scalars stream.
    fn place_selected<'a>(
        &'a self,
        selected: [Vec<Scalar>; 2],
        aux: &Self::Vector<'a>,
    ) -> Result<[Self::Vector<'a>; 2]>;

    /// A curve's bases: `host`, with the part a device keeps as its plan says (`None`:
    /// one-off work, without a plan).
    fn bases<'a, C: GpuCurve>(
        &'a self,
        host: &'a [C::Affine],
        device: Option<&'a DeviceBases<C>>,
    ) -> Self::Bases<'a, C>;

    /// Σ scalars\[i\] · bases\[i\] over the first `len` scalars.
    fn msm<C: GpuCurve>(
        &self,
        bases: &Self::Bases<'_, C>,
        scalars: &Self::Vector<'_>,
        len: usize,
    ) -> Result<C::Projective>;

    /// The [`msm`](Self::msm) of each of `jobs` (bases, scalars, length), in order: on a
    /// GPU whose plan runs G1 MSMs two at a time (`DevicePlan::g1_together`), chunk by
    /// chunk in turn, so that one's upload runs beside the other's kernels; else one after
    /// the other.
    fn msms<C: GpuCurve>(
        &self,
        jobs: &[(&Self::Bases<'_, C>, &Self::Vector<'_>, usize)],
    ) -> Result<Vec<C::Projective>> {
        jobs.iter()
            .map(|&(bases, scalars, len)| self.msm(bases, scalars, len))
            .collect()
    }
}

/// Inside a stage of a proof: the stage's lock, if the engine has one, and this thread's mark
/// for the wait layer (tests/staging_waits.rs checks that no wait happens while staging).
pub struct StageGuard<'a> {
    _lock: Option<MutexGuard<'a, ()>>,
    _mark: StageMark,
}

/// Work written once against [`Engine`], run by [`ProverEngine::run`] on whichever engine is
/// usable (possibly twice: on the GPU, then on the CPU after a GPU failure).
pub trait Work {
    type Output;

    /// What the work is, for the warning when the GPU fails in it.
    fn what(&self) -> String;

    fn run<E: Engine>(&mut self, engine: &E) -> Result<Self::Output>;
}

/// Where the heavy steps run.
#[derive(Clone, Debug, Default)]
pub enum Backend {
    /// The GPU the selector (and the environment) picks, or the CPU when `BELLMAN_NO_GPU` is
    /// set or no adapter is usable.
    #[default]
    Auto,
    /// The GPU the selector picks; an error when there is none.
    Gpu(AdapterSelector),
    /// blstrs and bellperson on the CPU.
    Cpu,
}

impl Backend {
    /// The CPU when `BELLMAN_NO_GPU` asks for it, else the GPU `selector` picks (an error at
    /// opening when there is none): what a command that was asked to prove uses.
    pub fn gpu_unless_disabled(selector: AdapterSelector) -> Backend {
        if gpu_disabled_by_env() {
            log::info!("BELLMAN_NO_GPU is set: proving on the CPU");
            Backend::Cpu
        } else {
            Backend::Gpu(selector)
        }
    }
}

/// Whether `BELLMAN_NO_GPU` asks for the CPU path (set to anything but `0`).
pub fn gpu_disabled_by_env() -> bool {
    std::env::var("BELLMAN_NO_GPU").is_ok_and(|v| v != "0")
}

/// How a prover's engine is opened.
#[derive(Clone, Debug, Default)]
pub struct ProverConfig {
    pub backend: Backend,
    /// MSM tuning and limits (lower `max_binding_bytes` to exercise chunking).
    pub msm: MsmConfig,
    /// Device memory for everything the prover allocates: the parameters' bases, the
    /// buffers it pools (each proof's NTT vectors and scalars) and the MSM workspaces. Bases
    /// stay resident only if they fit beside one proof's buffers; a budget below one proof's
    /// buffers is an error; fewer workers run at once if the budget holds fewer proofs.
    /// `None`: the device memory's default budget (`gpu::memory`), or no limit but the
    /// device's where its backend does not tell.
    pub vram_budget: Option<u64>,
}

/// The engine a prover runs on: a GPU engine, if one is usable, with the CPU behind it. A GPU
/// failure (a lost device, an allocation refused) is logged, the work is redone on the CPU,
/// and the engine stays on the CPU from then on.
pub struct ProverEngine {
    gpu: Option<GpuEngine>,
    /// Set after a GPU failure.
    failed: AtomicBool,
    /// Whether a failed GPU step is redone on the CPU (the default) or returns its error.
    cpu_fallback: AtomicBool,
}

impl ProverEngine {
    /// The CPU alone.
    pub fn cpu() -> Self {
        ProverEngine {
            gpu: None,
            failed: AtomicBool::new(false),
            cpu_fallback: AtomicBool::new(true),
        }
    }

    /// The kernels of `gpu`, compiled now, within the device memory's default VRAM budget.
    pub fn on_device(gpu: GpuContext, msm: MsmConfig) -> Result<Self> {
        Self::on_device_within(gpu, msm, None)
    }

    /// [`on_device`](Self::on_device) with pooled buffers, MSM workspaces and resident bases
    /// kept within `vram_budget` bytes.
    pub fn on_device_within(
        gpu: GpuContext,
        msm: MsmConfig,
        vram_budget: Option<u64>,
    ) -> Result<Self> {
        Ok(ProverEngine {
            gpu: Some(GpuEngine::new(gpu, msm, vram_budget)?),
            failed: AtomicBool::new(false),
            cpu_fallback: AtomicBool::new(true),
        })
    }

    /// [`GpuEngine::with_vector_parts_within`] on this engine's GPU, if it has one.
    pub fn with_vector_parts_within(mut self, bytes: u64) -> Self {
        self.gpu = self.gpu.map(|gpu| gpu.with_vector_parts_within(bytes));
        self
    }

    /// Opens the engine `config` asks for. `Backend::Auto` with the default settings is the
    /// process's [`shared`](Self::shared) engine.
    pub fn open(config: &ProverConfig) -> Result<Arc<Self>> {
        match &config.backend {
            Backend::Cpu => Ok(Arc::new(Self::cpu())),
            Backend::Gpu(selector) => Ok(Arc::new(Self::on_device_within(
                GpuContext::new(selector)?,
                config.msm.clone(),
                config.vram_budget,
            )?)),
            Backend::Auto if config.msm == MsmConfig::default() && config.vram_budget.is_none() => {
                Ok(Self::shared())
            }
            Backend::Auto => Ok(Arc::new(Self::auto(config))),
        }
    }

    /// Engines on the best `count` adapters of the selection `config.backend` names (over
    /// the environment's, as [`GpuContext::new`] takes it), each
    /// with `config`'s MSM settings and VRAM budget: one batch spread over several GPUs.
    /// `Backend::Cpu`, or `Backend::Auto` with `BELLMAN_NO_GPU` set or `count` at most 1, is
    /// one engine as [`open`](Self::open) opens it. Fewer matching adapters than `count` is
    /// [`Error::TooFewAdapters`].
    pub fn open_best(config: &ProverConfig, count: usize) -> Result<Vec<Arc<Self>>> {
        let selector = match &config.backend {
            Backend::Gpu(selector) => selector.clone(),
            Backend::Auto if count > 1 && !gpu_disabled_by_env() => AdapterSelector::default(),
            Backend::Cpu | Backend::Auto => return Ok(vec![Self::open(config)?]),
        };
        let selector = AdapterSelector::resolve(&selector)?;
        let adapters = select_adapters(&selector)?;
        if adapters.len() < count {
            return Err(Error::TooFewAdapters {
                asked: count,
                found: adapters.len(),
                selection: selector.to_string(),
            });
        }
        adapters
            .into_iter()
            .take(count.max(1))
            .map(|adapter| {
                let gpu = GpuContext::from_adapter(adapter)?;
                let engine = Self::on_device_within(gpu, config.msm.clone(), config.vram_budget)?;
                log::info!("engine on {}", engine.describe());
                Ok(Arc::new(engine))
            })
            .collect()
    }

    /// The process's engine for `Backend::Auto` and default settings, opened on first use:
    /// its pipelines compile once, and every prover and one-off MSM without its own engine
    /// shares its device.
    pub fn shared() -> Arc<Self> {
        static SHARED: OnceLock<Arc<ProverEngine>> = OnceLock::new();
        SHARED
            .get_or_init(|| Arc::new(Self::auto(&ProverConfig::default())))
            .clone()
    }

    /// The selected GPU, or the CPU (with the reason logged) when `BELLMAN_NO_GPU` is set or
    /// no GPU is usable.
    fn auto(config: &ProverConfig) -> Self {
        if gpu_disabled_by_env() {
            log::info!("BELLMAN_NO_GPU is set: proving on the CPU");
            return Self::cpu();
        }
        let open = |gpu| Self::on_device_within(gpu, config.msm.clone(), config.vram_budget);
        match GpuContext::new(&AdapterSelector::default()).and_then(open) {
            Ok(engine) => engine,
            Err(e) => {
                log::warn!("proving on the CPU: {e}");
                Self::cpu()
            }
        }
    }

    /// The device, if this engine has one (failed or not).
    pub fn device(&self) -> Option<&GpuContext> {
        self.gpu.as_ref().map(GpuEngine::gpu)
    }

    /// The GPU engine, if this engine has one (failed or not).
    pub fn gpu_engine(&self) -> Option<&GpuEngine> {
        self.gpu.as_ref()
    }

    /// The GPU engine while it is usable (none after a failure).
    pub fn usable_gpu(&self) -> Option<&GpuEngine> {
        self.gpu
            .as_ref()
            .filter(|_| !self.failed.load(Ordering::Relaxed))
    }

    /// Whether a GPU step failed (the engine computes on the CPU from then on, or refuses
    /// work without its CPU fallback).
    pub fn gpu_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// With `false`, a GPU failure fails the work (and every later work) with the GPU's
    /// error instead of redoing it on the CPU: for a service whose jobs would take hours on
    /// the CPU and are better retried elsewhere. An engine without a GPU computes on the CPU
    /// either way.
    pub fn set_cpu_fallback(&self, on: bool) {
        self.cpu_fallback.store(on, Ordering::Relaxed);
    }

    /// A description for logs and reports: the adapter, or "CPU".
    pub fn describe(&self) -> String {
        match &self.gpu {
            Some(gpu) if self.gpu_failed() && self.cpu_fallback.load(Ordering::Relaxed) => {
                format!("{}, failed: CPU from now on", gpu.describe())
            }
            Some(gpu) if self.gpu_failed() => format!("{}, failed", gpu.describe()),
            Some(gpu) => gpu.describe(),
            None => CpuEngine.describe(),
        }
    }

    /// Runs `work` on the GPU while it is usable, else on the CPU; a GPU failure (any error
    /// but bad input or an internal one, which the CPU would meet as well) is logged, marks
    /// the engine failed, and the work is redone on the CPU, or returned without the CPU
    /// fallback ([`set_cpu_fallback`](Self::set_cpu_fallback)). An allocation the driver
    /// refused within the budget (another process holds memory) is not yet a failure: the
    /// pool's free buffers are released, the budget lowered (`BufferPool::release_free`), and the
    /// work tried again on the GPU.
    pub fn run<W: Work>(&self, work: &mut W) -> Result<W::Output> {
        let fallback = self.cpu_fallback.load(Ordering::Relaxed);
        let Some(gpu) = self.usable_gpu() else {
            if let (Some(gpu), false) = (&self.gpu, fallback) {
                return Err(Error::Device(format!(
                    "{} failed earlier, and this engine does not fall back to the CPU",
                    gpu.describe()
                )));
            }
            return work.run(&CpuEngine);
        };
        let mut result = work.run(gpu);
        if let Err(Error::OutOfMemory { what, message, .. }) = &result {
            let lowered = gpu.pool().release_free();
            log::warn!(
                "{} refused {what} in {} ({message}): VRAM budget lowered to {} MiB, trying \
                 again on the GPU",
                gpu.describe(),
                work.what(),
                lowered >> 20
            );
            result = work.run(gpu);
        }
        match result {
            Err(e) if e.is_gpu_failure() => {
                self.failed.store(true, Ordering::Relaxed);
                if !fallback {
                    log::error!("GPU failed in {}: {e}", work.what());
                    return Err(e);
                }
                log::warn!("GPU failed in {}, finishing on the CPU: {e}", work.what());
                work.run(&CpuEngine)
            }
            other => other,
        }
    }
}

/// One MSM of host bases and scalars.
struct OneMsm<'a, C: GpuCurve> {
    bases: &'a [C::Affine],
    scalars: &'a [Scalar],
}

impl<C: GpuCurve> Work for OneMsm<'_, C> {
    type Output = C::Projective;

    fn what(&self) -> String {
        format!("a {} MSM", C::NAME)
    }

    fn run<E: Engine>(&mut self, engine: &E) -> Result<C::Projective> {
        if self.scalars.len() > self.bases.len() {
            return Err(Error::InvalidInput(format!(
                "{} scalars but only {} bases",
                self.scalars.len(),
                self.bases.len()
            )));
        }
        let bases = engine.bases::<C>(self.bases, None);
        engine.msm(&bases, &engine.vector(self.scalars), self.scalars.len())
    }
}

/// Σ `scalars[i] · bases[i]` on G1 with the process's [`shared`](ProverEngine::shared)
/// engine: the best adapter, opened and compiled for on first use, or the CPU (when
/// `BELLMAN_NO_GPU` is set, no adapter is found, or the GPU fails). Provers keep bases
/// resident with `MsmKernels` instead.
pub fn msm_g1(bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective> {
    ProverEngine::shared().run(&mut OneMsm::<G1> { bases, scalars })
}

/// [`msm_g1`] on G2.
pub fn msm_g2(bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective> {
    ProverEngine::shared().run(&mut OneMsm::<G2> { bases, scalars })
}

/// A stage entered without a lock (the CPU, whose proofs share nothing).
fn unlocked(stage: Stage) -> StageGuard<'static> {
    StageGuard {
        _lock: None,
        _mark: waits::enter(stage),
    }
}
