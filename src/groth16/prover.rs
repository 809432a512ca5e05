//! The prover: synthesis, the H polynomial, five multi-scalar multiplications and the
//! assembly of A, B, C, with bellperson 0.27's arithmetic (`groth16/prover/native.rs`) so that
//! for the same r and s our proof equals `create_proof`'s byte for byte.
//!
//! The heavy steps go through [`Engine`]: the wgpu kernels when a GPU is usable, blstrs and
//! bellperson on the CPU otherwise. A GPU step that fails is redone on the CPU with a warning,
//! and the engine stays on the CPU from then on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use bellperson::Circuit;
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use rand_core::{OsRng, RngCore};

use super::batch::prove_batch_across;
use super::params::ProvingParameters;
use super::synthesis::ProvingAssignment;
use crate::curve::{GpuCurve, G1, G2};
use crate::gpu::pool::BufferPool;
use crate::gpu::{AdapterSelector, GpuContext};
use crate::msm::{gpu_disabled_by_env, msm_cpu, MsmConfig, MsmKernels, ResidentBases};
use crate::ntt::{h_coefficients_cpu, DeviceVector, NttKernels};
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
    /// Device memory for the parameters' bases and the buffers the prover pools (the NTT
    /// vectors of one proof; the MSM workspaces are not counted yet). Bases stay resident only
    /// if they fit beside one proof's buffers; a budget below one proof's buffers is an error.
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

    /// Runs `on_gpu` when a GPU is usable; when it fails (other than on bad input: see
    /// `Error::is_bad_input`), warns,
    /// marks the GPU failed and runs `on_cpu`.
    fn run<T>(
        &self,
        step: &str,
        on_gpu: impl FnOnce(&GpuEngine) -> Result<T>,
        on_cpu: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let Some(engine) = self.gpu() else {
            return on_cpu();
        };
        match on_gpu(engine) {
            Err(e) if !e.is_bad_input() => {
                log::warn!("GPU failed in {step}, finishing on the CPU: {e}");
                engine.failed.store(true, Ordering::Relaxed);
                on_cpu()
            }
            ok => ok,
        }
    }
}

impl GpuEngine {
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

    fn new(gpu: GpuContext, msm: MsmConfig, vram_budget: Option<u64>) -> Result<Self> {
        let wide = gpu.preferred_wide_mul();
        let pool = BufferPool::new(&gpu, vram_budget.unwrap_or(u64::MAX));
        Ok(GpuEngine {
            g1: MsmKernels::new(&gpu, wide, msm.clone())?,
            g2: MsmKernels::new(&gpu, wide, msm)?,
            ntt: NttKernels::new(&gpu, wide)?.with_pool(pool.clone()),
            pool,
            gpu,
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

/// The H polynomial's coefficients: where the H step left them.
enum HValues {
    Device(Box<DeviceVector>),
    Host(Vec<Scalar>),
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
    /// Density selection of the A and B scalars, on the CPU while the GPU runs the H and L
    /// MSMs (so not part of the wall time unless it outlasts them).
    pub scalar_selection: Duration,
    /// The final combination of A, B, C.
    pub assembly: Duration,
}

impl ProveReport {
    /// Adds `other`'s step times to these.
    pub fn add(&mut self, other: &ProveReport) {
        self.synthesis += other.synthesis;
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
        self.h
            + self.msm_h
            + self.msm_l
            + self.msm_a
            + self.msm_b_g1
            + self.msm_b_g2
            + self.assembly
    }
}

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
            workers: 1,
        };
        let Some(gpu) = prover.engine.gpu() else {
            return Ok(prover);
        };
        let pool = gpu.pool();
        // One proof's NTT vectors a, b, c, at the parameters' domain.
        let per_proof = 3 * (prover.params.h.len() as u64 + 1).next_power_of_two() * 32;
        if per_proof > pool.budget() {
            return Err(Error::VramBudget {
                what: "one proof's NTT vectors (a, b, c)".into(),
                needed: per_proof,
                budget: pool.budget(),
            });
        }
        let bytes = ResidentParams::bytes(&prover.params);
        let fits = resident_bases_budget.is_none_or(|budget| bytes <= budget)
            && bytes + per_proof <= pool.budget()
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
    /// least one): while one waits for the GPU, another's CPU side runs.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    pub fn workers(&self) -> usize {
        self.workers
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
        let ProvingAssignment {
            a,
            b,
            c,
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density,
            b_input_density,
            b_aux_density,
        } = assignment;

        let h = self.step(lane, "H step", &mut report.h, || {
            self.engine.run(
                "the H step",
                |gpu| {
                    gpu.ntt
                        .h_on_device(&a, &b, &c)
                        .map(|h| HValues::Device(Box::new(h)))
                },
                || h_coefficients_cpu(&a, &b, &c).map(HValues::Host),
            )
        })?;

        // The CPU selects the A and B scalars while the GPU runs the H and L MSMs.
        // bellperson runs each query as an input and an aux MSM over consecutive bases; one
        // MSM over the concatenated scalars is the same sum.
        let (gpu_side, cpu_side) = rayon::join(
            || -> Result<_> {
                let (mut h_time, mut l_time) = Default::default();
                let msm_h = self.step(lane, "MSM H", &mut h_time, || {
                    self.msm_h(&h, || h_coefficients_cpu(&a, &b, &c))
                })?;
                let msm_l =
                    self.step(lane, "MSM L", &mut l_time, || self.msm_g1(G1Query::L, &aux))?;
                Ok((msm_h, h_time, msm_l, l_time))
            },
            || {
                let t = Instant::now();
                let a_scalars = concat(&inputs, a_aux_density.select(&aux));
                let b_scalars =
                    concat(&b_input_density.select(&inputs), b_aux_density.select(&aux));
                (a_scalars, b_scalars, t.elapsed())
            },
        );
        let (msm_h, h_time, msm_l, l_time) = gpu_side?;
        drop((h, a, b, c));
        let (a_scalars, b_scalars, select_time) = cpu_side;
        report.msm_h += h_time;
        report.msm_l += l_time;
        report.scalar_selection += select_time;

        let msm_a = self.step(lane, "MSM A", &mut report.msm_a, || {
            self.msm_g1(G1Query::A, &a_scalars)
        })?;
        let msm_b_g1 = self.step(lane, "MSM B G1", &mut report.msm_b_g1, || {
            self.msm_g1(G1Query::BG1, &b_scalars)
        })?;
        let msm_b_g2 = self.step(lane, "MSM B G2", &mut report.msm_b_g2, || {
            self.msm_g2(&b_scalars)
        })?;

        let vk = &self.params.vk;
        let start = Instant::now();
        // The same terms in the same order as bellperson's native prover.
        let g_a = vk.delta_g1 * r + vk.alpha_g1 + msm_a;
        let g_b = vk.delta_g2 * s + vk.beta_g2 + msm_b_g2;
        let mut g_c = msm_a * s;
        g_c += msm_b_g1 * r;
        g_c += vk.delta_g1 * (r * s);
        g_c += vk.alpha_g1 * s;
        g_c += vk.beta_g1 * r;
        g_c += msm_h;
        g_c += msm_l;
        let proof = Proof {
            a: g_a.into(),
            b: g_b.into(),
            c: g_c.into(),
        };
        report.assembly += start.elapsed();
        Ok(proof)
    }

    /// The H MSM over the first n - 1 coefficients, read where the H step left them; a GPU
    /// failure with them on the device recomputes them on the CPU (`recompute`).
    fn msm_h(
        &self,
        h: &HValues,
        recompute: impl FnOnce() -> Result<Vec<Scalar>>,
    ) -> Result<G1Projective> {
        let on_device = match h {
            HValues::Host(h) => return self.msm_g1(G1Query::H, h),
            HValues::Device(h) => h.as_scalars(self.params.h.len()),
        };
        self.engine.run(
            "the H MSM",
            |gpu| match &self.resident {
                Some(resident) => gpu.g1.msm_from(&resident.h, on_device),
                None => gpu
                    .g1
                    .msm_from(&gpu.g1.upload_bases(&self.params.h)?, on_device),
            },
            || msm_cpu::<G1>(&self.params.h, &recompute()?),
        )
    }

    fn msm_g1(&self, query: G1Query, scalars: &[Scalar]) -> Result<G1Projective> {
        let bases: &[G1Affine] = match query {
            G1Query::H => &self.params.h,
            G1Query::L => &self.params.l,
            G1Query::A => &self.params.a,
            G1Query::BG1 => &self.params.b_g1,
        };
        self.engine.run(
            &format!("the {query:?} MSM"),
            |gpu| match &self.resident {
                Some(resident) => {
                    let on_device = match query {
                        G1Query::H => &resident.h,
                        G1Query::L => &resident.l,
                        G1Query::A => &resident.a,
                        G1Query::BG1 => &resident.b_g1,
                    };
                    gpu.g1.msm(on_device, scalars)
                }
                None => gpu.g1.msm_once(bases, scalars),
            },
            || msm_cpu::<G1>(bases, scalars),
        )
    }

    fn msm_g2(&self, scalars: &[Scalar]) -> Result<G2Projective> {
        let bases: &[G2Affine] = &self.params.b_g2;
        self.engine.run(
            "the B (G2) MSM",
            |gpu| match &self.resident {
                Some(resident) => gpu.g2.msm(&resident.b_g2, scalars),
                None => gpu.g2.msm_once(bases, scalars),
            },
            || msm_cpu::<G2>(bases, scalars),
        )
    }
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
