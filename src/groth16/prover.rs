//! The prover: synthesis, the H polynomial, five multi-scalar multiplications and the
//! assembly of A, B, C, with bellperson 0.27's arithmetic (`groth16/prover/native.rs`) so that
//! for the same r and s our proof equals `create_proof`'s byte for byte.
//!
//! The heavy steps go through [`Engine`]: the wgpu kernels when a GPU is usable, blstrs and
//! bellperson on the CPU otherwise. On a GPU a proof runs in two stages, staging and compute,
//! each under its own lock, so that one proof stages while another computes. A proof whose
//! GPU steps fail is redone on the CPU with a warning, and the engine stays on the CPU from
//! then on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use bellperson::Circuit;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use rand_core::{OsRng, RngCore};

use super::batch::prove_batch_across;
use super::params::ProvingParameters;
use super::synthesis::ProvingAssignment;
use crate::curve::{GpuCurve, G1, G2};
use crate::gpu::pool::BufferPool;
use crate::gpu::{waits, AdapterSelector, GpuContext};
use crate::msm::{
    gpu_disabled_by_env, msm_cpu, MsmConfig, MsmKernels, ResidentBases, ScalarSource,
};
use crate::ntt::{h_coefficients_cpu, NttKernels};
use crate::timeline::Timeline;
use crate::{Error, Result};

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

/// How a [`Prover`] is built.
#[derive(Clone, Debug, Default)]
pub struct ProverConfig {
    pub backend: Backend,
    /// MSM tuning and limits (lower `max_binding_bytes` to exercise chunking).
    pub msm: MsmConfig,
    /// Device memory for everything the prover allocates: the parameters' bases, the
    /// buffers it pools (each proof's NTT vectors and scalars) and the MSM workspaces. Bases
    /// stay resident only if they fit beside one proof's buffers; a budget below one proof's
    /// buffers is an error; fewer workers run at once if the budget holds fewer proofs.
    /// `None`: no limit but the device's.
    pub vram_budget: Option<u64>,
}

/// The kernels of one device, compiled once.
pub struct GpuEngine {
    gpu: GpuContext,
    pool: BufferPool,
    g1: MsmKernels<G1>,
    g2: MsmKernels<G2>,
    ntt: NttKernels,
    /// Held by the worker whose proof is in its staging stage (CPU preparation and uploads).
    staging: Mutex<()>,
    /// Held by the worker whose proof is in its compute stage (its kernels and their results).
    compute: Mutex<()>,
    /// Set after a GPU failure: the remaining steps run on the CPU.
    failed: AtomicBool,
}

/// The backend seam: every heavy step of a proof, on the GPU or the CPU.
pub enum Engine {
    Gpu(Box<GpuEngine>),
    Cpu,
}

impl Engine {
    /// Opens the engine `config` asks for. `Backend::Auto` with the default MSM settings
    /// shares one engine per process (pipelines compile once).
    pub fn open(config: &ProverConfig) -> Result<Arc<Engine>> {
        match &config.backend {
            Backend::Cpu => Ok(Arc::new(Engine::Cpu)),
            Backend::Gpu(selector) => Ok(Arc::new(Engine::on_device_within(
                GpuContext::new(selector)?,
                config.msm.clone(),
                config.vram_budget,
            )?)),
            Backend::Auto => {
                if config.msm != MsmConfig::default() || config.vram_budget.is_some() {
                    return Ok(Arc::new(Engine::auto(config)));
                }
                static SHARED: OnceLock<Arc<Engine>> = OnceLock::new();
                Ok(SHARED
                    .get_or_init(|| Arc::new(Engine::auto(&ProverConfig::default())))
                    .clone())
            }
        }
    }

    /// The kernels of `gpu`, compiled now, with no VRAM budget but the device's.
    pub fn on_device(gpu: GpuContext, msm: MsmConfig) -> Result<Engine> {
        Self::on_device_within(gpu, msm, None)
    }

    /// [`on_device`](Self::on_device) with pooled buffers and resident bases kept within
    /// `vram_budget` bytes.
    pub fn on_device_within(
        gpu: GpuContext,
        msm: MsmConfig,
        vram_budget: Option<u64>,
    ) -> Result<Engine> {
        Ok(Engine::Gpu(Box::new(GpuEngine::new(
            gpu,
            msm,
            vram_budget,
        )?)))
    }

    fn auto(config: &ProverConfig) -> Engine {
        if gpu_disabled_by_env() {
            log::info!("BELLMAN_NO_GPU is set: proving on the CPU");
            return Engine::Cpu;
        }
        let open = |gpu| Engine::on_device_within(gpu, config.msm.clone(), config.vram_budget);
        match GpuContext::new(&AdapterSelector::default()).and_then(open) {
            Ok(engine) => engine,
            Err(e) => {
                log::warn!("proving on the CPU: {e}");
                Engine::Cpu
            }
        }
    }

    /// The device, if this is a GPU engine (failed or not).
    pub fn device(&self) -> Option<&GpuContext> {
        match self {
            Engine::Gpu(engine) => Some(&engine.gpu),
            Engine::Cpu => None,
        }
    }

    /// Whether a GPU step failed and the engine now computes on the CPU.
    pub fn gpu_failed(&self) -> bool {
        matches!(self, Engine::Gpu(engine) if engine.failed.load(Ordering::Relaxed))
    }

    /// The usable GPU engine, if any (none after a failure).
    fn gpu(&self) -> Option<&GpuEngine> {
        match self {
            Engine::Gpu(engine) if !engine.failed.load(Ordering::Relaxed) => Some(engine),
            _ => None,
        }
    }

    /// A description for logs and reports: the adapter, or "CPU".
    pub fn describe(&self) -> String {
        match self {
            Engine::Gpu(engine) => {
                let info = &engine.gpu.info;
                let state = if engine.failed.load(Ordering::Relaxed) {
                    ", failed: CPU from now on"
                } else {
                    ""
                };
                format!("{} ({:?}){state}", info.name, info.backend)
            }
            Engine::Cpu => "CPU".into(),
        }
    }
}

impl GpuEngine {
    /// Marks the GPU failed after `error` in `step`: this and every later proof of the engine
    /// run on the CPU.
    fn fail(&self, step: &str, error: &Error) {
        log::warn!("GPU failed in {step}, finishing on the CPU: {error}");
        self.failed.store(true, Ordering::Relaxed);
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

    /// Pooled buffers and resident bases of every prover on this engine.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// Device bytes of one proof with `params`: what it takes from the pool (the H step's a,
    /// b, c and the L, A, B scalar vectors, each padded to a power of two), and the MSM
    /// workspaces the kernels keep (two G1, one G2) beside the pool's buffers.
    pub fn proof_bytes(&self, params: &ProvingParameters) -> Result<(u64, u64)> {
        let padded = |n: usize| (n.max(1) as u64).next_power_of_two() * 32;
        let per_proof = 3 * padded(params.h.len() + 1)
            + padded(params.l.len())
            + padded(params.a.len())
            + padded(params.b_g1.len());
        let g1_len = [
            params.h.len(),
            params.l.len(),
            params.a.len(),
            params.b_g1.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let g1 = self.g1.plan(g1_len.max(1))?;
        let g2 = self.g2.plan(params.b_g2.len().max(1))?;
        let workspaces = 2 * g1.workspace_bytes(G1::XYZZ_BYTES as u64)
            + g2.workspace_bytes(G2::XYZZ_BYTES as u64);
        Ok((per_proof, workspaces))
    }

    fn new(gpu: GpuContext, msm: MsmConfig, vram_budget: Option<u64>) -> Result<Self> {
        let wide = gpu.preferred_wide_mul();
        let pool = BufferPool::new(&gpu, vram_budget.unwrap_or(u64::MAX));
        Ok(GpuEngine {
            g1: MsmKernels::new(&gpu, wide, msm.clone())?.with_pool(pool.clone()),
            g2: MsmKernels::new(&gpu, wide, msm)?.with_pool(pool.clone()),
            ntt: NttKernels::new(&gpu, wide)?.with_pool(pool.clone()),
            pool,
            gpu,
            staging: Mutex::new(()),
            compute: Mutex::new(()),
            failed: AtomicBool::new(false),
        })
    }
}

/// The parameters' bases on the device.
struct ResidentParams {
    h: ResidentBases<G1>,
    l: ResidentBases<G1>,
    a: ResidentBases<G1>,
    b_g1: ResidentBases<G1>,
    b_g2: ResidentBases<G2>,
}

impl ResidentParams {
    fn upload(engine: &GpuEngine, params: &ProvingParameters) -> Result<Self> {
        Ok(ResidentParams {
            h: engine.g1.upload_bases(&params.h)?,
            l: engine.g1.upload_bases(&params.l)?,
            a: engine.g1.upload_bases(&params.a)?,
            b_g1: engine.g1.upload_bases(&params.b_g1)?,
            b_g2: engine.g2.upload_bases(&params.b_g2)?,
        })
    }

    fn bytes(params: &ProvingParameters) -> u64 {
        let g1 = params.h.len() + params.l.len() + params.a.len() + params.b_g1.len();
        (g1 * G1::AFFINE_BYTES + params.b_g2.len() * G2::AFFINE_BYTES) as u64
    }
}

/// The five MSMs of one proof.
struct MsmResults {
    h: G1Projective,
    l: G1Projective,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
}

/// Which G1 query an MSM runs over.
#[derive(Clone, Copy, Debug)]
enum G1Query {
    H,
    L,
    A,
    BG1,
}

/// Wall time of each step of a batch, summed over its proofs.
#[derive(Clone, Debug, Default)]
pub struct ProveReport {
    pub backend: String,
    pub proofs: usize,
    pub constraints: usize,
    pub domain: usize,
    /// The whole batch, from the first synthesis to the last proof.
    pub wall: Duration,
    /// Summed over the circuits, which are synthesized in parallel and beside the proving.
    pub synthesis: Duration,
    pub h: Duration,
    pub msm_h: Duration,
    pub msm_l: Duration,
    pub msm_a: Duration,
    pub msm_b_g1: Duration,
    pub msm_b_g2: Duration,
    /// The staging stage on a GPU: uploading a, b, c and the L scalars, while another
    /// worker's proof may be computing. On the CPU: selecting the A and B scalars.
    pub staging: Duration,
    /// Selecting the A and B scalars on the CPU (and, on a GPU, uploading them) beside the H
    /// step and the H and L MSMs: not part of the wall time unless it outlasts them.
    pub scalar_selection: Duration,
    /// The final combination of A, B, C.
    pub assembly: Duration,
}

impl ProveReport {
    /// Adds `other`'s step times to these.
    pub fn add(&mut self, other: &ProveReport) {
        self.synthesis += other.synthesis;
        self.staging += other.staging;
        self.h += other.h;
        self.msm_h += other.msm_h;
        self.msm_l += other.msm_l;
        self.msm_a += other.msm_a;
        self.msm_b_g1 += other.msm_b_g1;
        self.msm_b_g2 += other.msm_b_g2;
        self.scalar_selection += other.scalar_selection;
        self.assembly += other.assembly;
    }

    /// Everything after synthesis.
    pub fn after_synthesis(&self) -> Duration {
        self.staging
            + self.h
            + self.msm_h
            + self.msm_l
            + self.msm_a
            + self.msm_b_g1
            + self.msm_b_g2
            + self.assembly
    }
}

/// Proofs of a batch in flight per device unless [`Prover::with_workers`] says otherwise.
/// H200, 2^22 constraints, batches of 30: two workers keep the GPU busy between compute
/// stages 93-99% of the time against 76-81% with one, for 1.07-1.11x the throughput; a third
/// adds nothing (BENCHMARKS.md).
pub const DEFAULT_WORKERS: usize = 2;

/// Proves circuits with one parameter set, keeping the bases on the device across proofs.
pub struct Prover {
    params: ProvingParameters,
    engine: Arc<Engine>,
    resident: Option<ResidentParams>,
    /// Bytes of `resident`, set aside in the engine's pool.
    resident_bytes: u64,
    timeline: Option<Arc<Timeline>>,
    /// Proofs of a batch in flight at once on this device.
    workers: usize,
}

impl Drop for Prover {
    fn drop(&mut self) {
        if let Some(gpu) = self.engine.gpu() {
            gpu.pool().release_aside(self.resident_bytes);
        }
    }
}

impl Prover {
    pub fn new(params: impl Into<ProvingParameters>, config: &ProverConfig) -> Result<Self> {
        Self::with_engine(params, Engine::open(config)?, config.vram_budget)
    }

    /// A prover on an engine already open (several provers may share one). The bases stay
    /// on the device when they fit both `resident_bases_budget` and the engine's VRAM budget
    /// beside one proof's pooled buffers; otherwise each MSM uploads its bases.
    pub fn with_engine(
        params: impl Into<ProvingParameters>,
        engine: Arc<Engine>,
        resident_bases_budget: Option<u64>,
    ) -> Result<Self> {
        let params = params.into();
        let mut prover = Prover {
            params,
            engine,
            resident: None,
            resident_bytes: 0,
            timeline: None,
            workers: DEFAULT_WORKERS,
        };
        let Some(gpu) = prover.engine.gpu() else {
            return Ok(prover);
        };
        let pool = gpu.pool();
        let (per_proof, workspaces) = gpu.proof_bytes(&prover.params)?;
        if per_proof + workspaces > pool.budget() {
            return Err(Error::VramBudget {
                what: "one proof's buffers (NTT vectors, scalars, MSM workspaces)".into(),
                needed: per_proof + workspaces,
                budget: pool.budget(),
            });
        }
        let bytes = ResidentParams::bytes(&prover.params);
        let fits = resident_bases_budget.is_none_or(|budget| bytes <= budget)
            && bytes + per_proof + workspaces <= pool.budget()
            && pool.set_aside(bytes);
        if !fits {
            log::info!("bases ({bytes} bytes) over the VRAM budget: uploaded per MSM");
            return Ok(prover);
        }
        match ResidentParams::upload(gpu, &prover.params) {
            Ok(resident) => {
                prover.resident = Some(resident);
                prover.resident_bytes = bytes;
            }
            Err(e) => {
                pool.release_aside(bytes);
                match e {
                    Error::OutOfMemory { message, .. } => log::warn!(
                        "bases ({bytes} bytes) do not fit on the device ({message}): uploaded per MSM"
                    ),
                    e => return Err(e),
                }
            }
        }
        Ok(prover)
    }

    /// Records every stage of every proof in `timeline` (see [`Timeline::write_chrome_trace`]).
    pub fn with_timeline(mut self, timeline: Arc<Timeline>) -> Self {
        self.timeline = Some(timeline);
        self
    }

    pub fn params(&self) -> &ProvingParameters {
        &self.params
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// One proof with the given randomness.
    pub fn prove<C: Circuit<Scalar> + Send>(
        &self,
        circuit: C,
        r: Scalar,
        s: Scalar,
    ) -> Result<Proof<Bls12>> {
        let mut proofs = self.prove_batch(vec![circuit], &[r], &[s])?;
        Ok(proofs.remove(0))
    }

    /// One proof with r and s from the operating system's RNG.
    pub fn prove_random<C: Circuit<Scalar> + Send>(&self, circuit: C) -> Result<Proof<Bls12>> {
        self.prove(circuit, Scalar::random(OsRng), Scalar::random(OsRng))
    }

    /// Proofs of circuits of one shape, `rs[i]` and `ss[i]` for circuit i.
    pub fn prove_batch<C: Circuit<Scalar> + Send>(
        &self,
        circuits: Vec<C>,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<Vec<Proof<Bls12>>> {
        Ok(self.prove_batch_report(circuits, rs, ss)?.0)
    }

    /// [`prove_batch`](Self::prove_batch) with r and s from the operating system's RNG.
    pub fn prove_batch_random<C: Circuit<Scalar> + Send>(
        &self,
        circuits: Vec<C>,
    ) -> Result<Vec<Proof<Bls12>>> {
        let mut rng = OsRng;
        let mut draw = || -> Vec<Scalar> {
            (0..circuits.len())
                .map(|_| Scalar::random(&mut rng as &mut dyn RngCore))
                .collect()
        };
        let (rs, ss) = (draw(), draw());
        self.prove_batch(circuits, &rs, &ss)
    }

    /// [`prove_batch`](Self::prove_batch) and the time each step took.
    pub fn prove_batch_report<C: Circuit<Scalar> + Send>(
        &self,
        circuits: Vec<C>,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
        prove_batch_across(std::slice::from_ref(self), circuits, rs, ss)
    }

    /// Proves up to `workers` circuits of a batch at a time on this prover's device (at
    /// least one; [`DEFAULT_WORKERS`] unless set): while one proof computes, the next stages.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Proofs in flight at once: the workers asked for, fewer if the VRAM budget holds fewer
    /// proofs' buffers beside the resident bases and the MSM workspaces.
    pub fn workers(&self) -> usize {
        let Some(gpu) = self.engine.gpu() else {
            return self.workers;
        };
        let budget = gpu.pool().budget();
        if budget == u64::MAX {
            return self.workers;
        }
        let Ok((per_proof, workspaces)) = gpu.proof_bytes(&self.params) else {
            return self.workers;
        };
        let room = budget.saturating_sub(self.resident_bytes + workspaces);
        let fitting = (room / per_proof.max(1)).max(1) as usize;
        if fitting < self.workers {
            log::info!(
                "{} workers asked for, {fitting} fit the VRAM budget of {budget} bytes",
                self.workers
            );
        }
        self.workers.min(fitting)
    }

    /// Runs one step of a proof on `lane`: its time goes to `slot` and the timeline.
    fn step<T>(&self, lane: &str, name: &str, slot: &mut Duration, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let value = self.span(lane, name, f);
        *slot += t.elapsed();
        value
    }

    /// Runs `f` as a span of the timeline, if there is one.
    pub(super) fn span<T>(&self, lane: &str, name: &str, f: impl FnOnce() -> T) -> T {
        match &self.timeline {
            Some(timeline) => timeline.record(lane, name, f),
            None => f(),
        }
    }

    /// One proof of a synthesized circuit, its steps recorded on `lane`.
    pub(super) fn prove_assignment(
        &self,
        assignment: ProvingAssignment,
        r: Scalar,
        s: Scalar,
        lane: &str,
        report: &mut ProveReport,
    ) -> Result<Proof<Bls12>> {
        let msm = match self.engine.gpu() {
            Some(gpu) => match self.gpu_steps(gpu, &assignment, lane, report) {
                Err(e) if !e.is_bad_input() => {
                    gpu.fail("a proof's GPU steps", &e);
                    self.cpu_steps(&assignment, lane, report)?
                }
                other => other?,
            },
            None => self.cpu_steps(&assignment, lane, report)?,
        };
        // Unmapping a proof's host vectors (~0.5 GB at 2^22) took 33 ms on the H200 host:
        // done off this worker, whose next proof can start now.
        rayon::spawn(move || drop(assignment));

        let vk = &self.params.vk;
        let start = Instant::now();
        // The same terms in the same order as bellperson's native prover.
        let g_a = vk.delta_g1 * r + vk.alpha_g1 + msm.a;
        let g_b = vk.delta_g2 * s + vk.beta_g2 + msm.b_g2;
        let mut g_c = msm.a * s;
        g_c += msm.b_g1 * r;
        g_c += vk.delta_g1 * (r * s);
        g_c += vk.alpha_g1 * s;
        g_c += vk.beta_g1 * r;
        g_c += msm.h;
        g_c += msm.l;
        let proof = Proof {
            a: g_a.into(),
            b: g_b.into(),
            c: g_c.into(),
        };
        report.assembly += start.elapsed();
        Ok(proof)
    }

    /// A proof's heavy steps on the GPU, in two stages under the engine's two locks (supraseal
    /// -c2's model, ../shared/DESIGN.md §6). Staging: a, b, c and the L scalars go to pooled
    /// device buffers; uploads never wait on another worker's submissions
    /// (gpu/transfer.rs), so this runs while the previous proof computes. Compute: the H step
    /// and the five MSMs read those buffers, no other proof's kernels in between; a worker
    /// waits only on its own submissions.
    ///
    /// The A and B scalars are selected (CPU) and uploaded during the compute stage, beside
    /// the H step and the H and L MSMs, which outlast it. Selecting them in the staging stage
    /// instead made a single 2^22 proof's GPU part 2.1x slower (581 against 279 ms) and one
    /// worker's batch 1.2x slower, with two workers equal within the spread (H200,
    /// BENCHMARKS.md).
    fn gpu_steps(
        &self,
        gpu: &GpuEngine,
        assignment: &ProvingAssignment,
        lane: &str,
        report: &mut ProveReport,
    ) -> Result<MsmResults> {
        let (h_inputs, l_scalars) = {
            let _staging = hold(&gpu.staging);
            let _stage = waits::enter("staging");
            self.step(lane, "staging", &mut report.staging, || -> Result<_> {
                let ProvingAssignment {
                    a,
                    b,
                    c,
                    aux_assignment,
                    ..
                } = assignment;
                Ok((
                    gpu.ntt.upload_h_inputs(a, b, c)?,
                    gpu.ntt.upload_scalars(aux_assignment)?,
                ))
            })?
        };

        let _compute = hold(&gpu.compute);
        let _stage = waits::enter("compute");
        let [a, b, c] = &h_inputs;
        let cpu_lane = format!("{lane} CPU");
        let (gpu_side, cpu_side) = rayon::join(
            || -> Result<_> {
                self.step(lane, "H step", &mut report.h, || {
                    gpu.gpu.wait_for(gpu.ntt.h_resident(a, b, c)?)
                })?;
                let h = self.step(lane, "MSM H", &mut report.msm_h, || {
                    self.msm_g1_on(gpu, G1Query::H, a.as_scalars(self.params.h.len()))
                })?;
                let l = self.step(lane, "MSM L", &mut report.msm_l, || {
                    let len = assignment.aux_assignment.len();
                    self.msm_g1_on(gpu, G1Query::L, l_scalars.as_scalars(len))
                })?;
                Ok((h, l))
            },
            || -> Result<_> {
                let t = Instant::now();
                let selected = self.span(&cpu_lane, "scalar selection", || -> Result<_> {
                    let (a_scalars, b_scalars) = select_ab(assignment);
                    Ok((
                        (gpu.ntt.upload_scalars(&a_scalars)?, a_scalars.len()),
                        (gpu.ntt.upload_scalars(&b_scalars)?, b_scalars.len()),
                    ))
                });
                Ok((selected?, t.elapsed()))
            },
        );
        let (h, l) = gpu_side?;
        let (((a_vector, a_len), (b_vector, b_len)), select_time) = cpu_side?;
        report.scalar_selection += select_time;

        let a = self.step(lane, "MSM A", &mut report.msm_a, || {
            self.msm_g1_on(gpu, G1Query::A, a_vector.as_scalars(a_len))
        })?;
        let b_scalars = b_vector.as_scalars(b_len);
        let b_g1 = self.step(lane, "MSM B G1", &mut report.msm_b_g1, || {
            self.msm_g1_on(gpu, G1Query::BG1, b_scalars)
        })?;
        let b_g2 = self.step(lane, "MSM B G2", &mut report.msm_b_g2, || {
            let resident = self.resident.as_ref().map(|r| &r.b_g2);
            msm_on(&gpu.g2, resident, &self.params.b_g2, b_scalars, "B (G2)")
        })?;
        Ok(MsmResults {
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
    }

    /// A proof's heavy steps with blstrs and bellperson on the CPU.
    fn cpu_steps(
        &self,
        assignment: &ProvingAssignment,
        lane: &str,
        report: &mut ProveReport,
    ) -> Result<MsmResults> {
        let (a_scalars, b_scalars) =
            self.step(lane, "scalar selection", &mut report.staging, || {
                let t = Instant::now();
                let selected = select_ab(assignment);
                report.scalar_selection += t.elapsed();
                selected
            });
        let ProvingAssignment {
            a,
            b,
            c,
            aux_assignment,
            ..
        } = assignment;
        let h = self.step(lane, "H step", &mut report.h, || {
            h_coefficients_cpu(a, b, c)
        })?;
        let params = &self.params;
        Ok(MsmResults {
            h: self.step(lane, "MSM H", &mut report.msm_h, || {
                msm_cpu::<G1>(&params.h, &h)
            })?,
            l: self.step(lane, "MSM L", &mut report.msm_l, || {
                msm_cpu::<G1>(&params.l, aux_assignment)
            })?,
            a: self.step(lane, "MSM A", &mut report.msm_a, || {
                msm_cpu::<G1>(&params.a, &a_scalars)
            })?,
            b_g1: self.step(lane, "MSM B G1", &mut report.msm_b_g1, || {
                msm_cpu::<G1>(&params.b_g1, &b_scalars)
            })?,
            b_g2: self.step(lane, "MSM B G2", &mut report.msm_b_g2, || {
                msm_cpu::<G2>(&params.b_g2, &b_scalars)
            })?,
        })
    }

    /// A G1 MSM over `query`'s bases.
    fn msm_g1_on(
        &self,
        gpu: &GpuEngine,
        query: G1Query,
        scalars: ScalarSource<'_>,
    ) -> Result<G1Projective> {
        let resident = self.resident.as_ref();
        let (resident, bases) = match query {
            G1Query::H => (resident.map(|r| &r.h), &self.params.h),
            G1Query::L => (resident.map(|r| &r.l), &self.params.l),
            G1Query::A => (resident.map(|r| &r.a), &self.params.a),
            G1Query::BG1 => (resident.map(|r| &r.b_g1), &self.params.b_g1),
        };
        msm_on(&gpu.g1, resident, bases, scalars, &format!("{query:?}"))
    }
}

/// An MSM over `resident` bases, or over `bases` uploaded for this MSM when the parameters
/// are not resident (over the VRAM budget).
fn msm_on<C: GpuCurve>(
    kernels: &MsmKernels<C>,
    resident: Option<&ResidentBases<C>>,
    bases: &[C::Affine],
    scalars: ScalarSource<'_>,
    query: &str,
) -> Result<C::Projective> {
    match resident {
        Some(resident) => kernels.msm_from(resident, scalars),
        None => {
            let bases = bases.get(..scalars.len()).ok_or_else(|| {
                Error::InvalidInput(format!("query {query} has fewer bases than scalars"))
            })?;
            kernels.msm_from(&kernels.upload_bases(bases)?, scalars)
        }
    }
}

/// The A scalars (inputs, then the aux in A's density) and the B scalars (inputs and aux in
/// B's densities). bellperson runs each query as an input and an aux MSM over consecutive
/// bases; one MSM over the concatenated scalars is the same sum.
fn select_ab(assignment: &ProvingAssignment) -> (Vec<Scalar>, Vec<Scalar>) {
    let (inputs, aux) = (&assignment.input_assignment, &assignment.aux_assignment);
    rayon::join(
        || concat(inputs, assignment.a_aux_density.select(aux)),
        || {
            concat(
                &assignment.b_input_density.select(inputs),
                assignment.b_aux_density.select(aux),
            )
        },
    )
}

/// Locks a stage's mutex (a poisoned one still serializes: it guards no data).
fn hold(stage: &Mutex<()>) -> MutexGuard<'_, ()> {
    stage.lock().unwrap_or_else(|e| e.into_inner())
}

/// `head` then `tail`, in one allocation.
fn concat(head: &[Scalar], tail: Vec<Scalar>) -> Vec<Scalar> {
    if head.is_empty() {
        return tail;
    }
    let mut out = Vec::with_capacity(head.len() + tail.len());
    out.extend_from_slice(head);
    out.extend_from_slice(&tail);
    out
}

/// bellperson refuses to prove with an identity delta (a subverted CRS); so do we.
pub(super) fn check_delta(params: &ProvingParameters) -> Result<()> {
    let identity = bool::from(params.vk.delta_g1.is_identity())
        || bool::from(params.vk.delta_g2.is_identity());
    if identity {
        return Err(Error::ParamsInvalidPoint {
            section: "vk.delta",
            index: 0,
            reason: "delta is the identity (a subverted setup)".into(),
        });
    }
    Ok(())
}

/// One proof with the process's shared engine. For several proofs with the same parameters,
/// make a [`Prover`] once: it keeps the bases on the device.
pub fn prove<C: Circuit<Scalar> + Send>(
    circuit: C,
    params: &ProvingParameters,
    r: Scalar,
    s: Scalar,
) -> Result<Proof<Bls12>> {
    Prover::new(params.clone(), &ProverConfig::default())?.prove(circuit, r, s)
}

/// A batch of proofs with the process's shared engine (see [`prove`]).
pub fn prove_batch<C: Circuit<Scalar> + Send>(
    circuits: Vec<C>,
    params: &ProvingParameters,
    rs: &[Scalar],
    ss: &[Scalar],
) -> Result<Vec<Proof<Bls12>>> {
    Prover::new(params.clone(), &ProverConfig::default())?.prove_batch(circuits, rs, ss)
}

/// [`prove`] with r and s from the operating system's RNG.
pub fn prove_random<C: Circuit<Scalar> + Send>(
    circuit: C,
    params: &ProvingParameters,
) -> Result<Proof<Bls12>> {
    Prover::new(params.clone(), &ProverConfig::default())?.prove_random(circuit)
}

/// [`prove_batch`] with r and s from the operating system's RNG.
pub fn prove_batch_random<C: Circuit<Scalar> + Send>(
    circuits: Vec<C>,
    params: &ProvingParameters,
) -> Result<Vec<Proof<Bls12>>> {
    Prover::new(params.clone(), &ProverConfig::default())?.prove_batch_random(circuits)
}
