//! The prover: synthesis, the H polynomial, five multi-scalar multiplications and the
//! assembly of A, B, C, with bellperson 0.27's arithmetic (`groth16/prover/native.rs`) so that
//! for the same r and s our proof equals `create_proof`'s byte for byte.
//!
//! A proof's heavy steps are one sequence (`ProofSteps`) written against the [`Engine`]
//! seam, in two stages: staging (a, b, c and the L scalars to where the engine computes) and
//! compute (the H step and the MSMs). On a GPU each stage has its own lock, so that one proof
//! stages while another computes. The engine ([`ProverEngine`]) runs the sequence on the GPU
//! and redoes it on the CPU if the GPU fails. Batches, and the `prove*` entry points, are in
//! `batch.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};

use super::engine::{
    select_on_host, DevicePlan, Engine, ProverConfig, ProverEngine, Query, ResidentParams, Work,
};
use super::params::ProvingParameters;
use super::report::{g2_lane, ProveReport, Step};
use super::synthesis::ProvingAssignment;
use crate::curve::{G1, G2};
use crate::gpu::waits::Stage;
use crate::recorded::RecordedSystem;
use crate::sparse::{DeviceMatrices, MatrixBytes};
use crate::timeline::Timeline;
use crate::{Error, Result};

/// Proofs of a batch in flight per device unless [`Prover::with_workers`] says otherwise:
/// with two, one proof stages while the other computes, and the GPU stays busy between
/// compute stages; a third added nothing (docs/benchmarks/proofs-and-batches.md, commit
/// 70da588).
pub const DEFAULT_WORKERS: usize = 2;

/// Proves circuits with one parameter set, keeping the bases on the device across proofs.
pub struct Prover {
    params: ParamsSlot,
    engine: Arc<ProverEngine>,
    timeline: Option<Arc<Timeline>>,
    /// Told when each circuit of a batch is synthesized and proved.
    progress: Option<Arc<ProgressObserver>>,
    /// Proofs of a batch in flight at once on this device.
    workers: usize,
    /// Host memory for a batch's synthesized circuits in flight.
    host_budget: HostBudget,
    /// Batches running on this prover now: the default host budget is shared among them.
    batches: Arc<AtomicUsize>,
    /// The matrices of the last batch's recorded constraint system, on the device if they
    /// fit.
    matrices: Mutex<Option<KeptMatrices>>,
}

/// A circuit's constraint matrices and their copy on the device (`None`: they did not fit,
/// or the engine is the CPU), kept while batches prove that circuit. Holding the `Arc` keeps
/// its address from being reused by other matrices while it is the key.
struct KeptMatrices {
    host: Arc<RecordedSystem>,
    device: Option<Arc<DeviceMatrices>>,
}

/// How much host memory a batch's synthesized circuits may hold at once.
#[derive(Clone, Copy, Debug)]
enum HostBudget {
    /// A share of what the machine has available when the batch starts.
    Available,
    /// These many bytes; `None`: no limit.
    Fixed(Option<u64>),
}

/// The default host budget is 1/n of the memory available when a batch starts. Not all of
/// it: a proof holds more than its assignment while it runs (the A and B scalars selected, on
/// the CPU engine the H step's vectors; where a VRAM plan keeps the scalars on the host these
/// are counted, [`Prover::host_bytes_a_proof`], 1/n of them against the budget), and
/// parameters still loading are not yet counted.
const AVAILABLE_MEMORY_SHARE: u64 = 2;

/// A batch counted as running on its prover until dropped.
pub(super) struct BatchRunning(Arc<AtomicUsize>);

impl Drop for BatchRunning {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The parameters, with their bases on the engine's device when they fit its VRAM budget.
struct Loaded {
    params: ProvingParameters,
    resident: Option<ResidentParams>,
}

/// A prover's parameters: there from the start, or from a loader thread that a proof waits
/// for only when it first needs them (after its synthesis).
struct ParamsSlot {
    /// The loaded parameters, or why they could not be loaded.
    ready: OnceLock<std::result::Result<Loaded, String>>,
    loader: Mutex<Option<JoinHandle<Result<Loaded>>>>,
}

impl ParamsSlot {
    fn ready(loaded: Loaded) -> Self {
        ParamsSlot {
            ready: OnceLock::from(Ok(loaded)),
            loader: Mutex::new(None),
        }
    }

    /// The parameters, once loaded. The first caller after a failed load gets the loader's
    /// own error, later ones its message.
    fn get(&self) -> Result<&Loaded> {
        if self.ready.get().is_none() {
            let mut loader = self.loader.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(handle) = loader.take() {
                let loaded = handle.join().unwrap_or_else(|_| {
                    Err(Error::Internal("the parameter loader panicked".into()))
                });
                match loaded {
                    Ok(loaded) => {
                        let _ = self.ready.set(Ok(loaded));
                    }
                    Err(e) => {
                        let _ = self.ready.set(Err(e.to_string()));
                        return Err(e);
                    }
                }
            }
        }
        match self.ready.get() {
            Some(Ok(loaded)) => Ok(loaded),
            Some(Err(why)) => Err(Error::ParamsLoad(why.clone())),
            None => Err(Error::Internal(
                "parameters neither loaded nor loading".into(),
            )),
        }
    }
}

/// What a batch tells a [`Prover::with_progress`] observer, from the thread that did it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchProgress {
    /// Circuit `circuit` of the batch is synthesized, in `took`.
    Synthesized { circuit: usize, took: Duration },
    /// Circuit `circuit`'s proof is done, `took` after its proving began.
    Proved { circuit: usize, took: Duration },
}

/// An observer of [`BatchProgress`]; it must return quickly (it runs on the batch's threads).
pub type ProgressObserver = dyn Fn(BatchProgress) + Send + Sync;

impl Prover {
    pub fn new(params: impl Into<ProvingParameters>, config: &ProverConfig) -> Result<Self> {
        Self::with_engine(params, ProverEngine::open(config)?)
    }

    /// A prover on an engine already open (several provers may share one). On a GPU the
    /// engine's plan ([`DevicePlan`]) decides which bases stay on the device and which
    /// stream with each MSM.
    pub fn with_engine(
        params: impl Into<ProvingParameters>,
        engine: Arc<ProverEngine>,
    ) -> Result<Self> {
        let loaded = Self::load(&engine, params.into(), MatrixBytes::default())?;
        Ok(Self::with_slot(ParamsSlot::ready(loaded), engine))
    }

    /// [`with_engine`](Self::with_engine) for proofs of `system`'s circuit through
    /// [`prove_batch_recorded`](Self::prove_batch_recorded): the plan sets room aside for
    /// its matrices before it keeps bases (products and the A, B gathers then run on the
    /// device at budgets that would otherwise have spent that room on bases).
    pub fn with_engine_for(
        params: impl Into<ProvingParameters>,
        engine: Arc<ProverEngine>,
        system: &RecordedSystem,
    ) -> Result<Self> {
        let loaded = Self::load(&engine, params.into(), MatrixBytes::of(system))?;
        Ok(Self::with_slot(ParamsSlot::ready(loaded), engine))
    }

    /// A prover whose parameters `load` makes on a thread of its own, and whose bases go to
    /// the device from there, while proofs start: a batch synthesizes its circuits
    /// meanwhile and waits for the parameters only when a proof first needs them. A failed
    /// load fails the proofs that wait for it.
    pub fn loading(
        engine: Arc<ProverEngine>,
        load: impl FnOnce() -> Result<ProvingParameters> + Send + 'static,
    ) -> Result<Self> {
        Self::loading_with(engine, MatrixBytes::default, load)
    }

    /// [`loading`](Self::loading) for proofs through
    /// [`prove_batch_recorded`](Self::prove_batch_recorded) whose system's matrix bytes
    /// ([`MatrixBytes::of`]) arrive on `matrices` once known, as for
    /// [`with_engine_for`](Self::with_engine_for): the parameters' bases go to the device
    /// only after they arrive (or the sender is dropped: none known). Whoever sends must not
    /// wait for the parameters before sending or dropping.
    pub fn loading_for(
        engine: Arc<ProverEngine>,
        matrices: std::sync::mpsc::Receiver<MatrixBytes>,
        load: impl FnOnce() -> Result<ProvingParameters> + Send + 'static,
    ) -> Result<Self> {
        Self::loading_with(engine, move || matrices.recv().unwrap_or_default(), load)
    }

    fn loading_with(
        engine: Arc<ProverEngine>,
        matrices: impl FnOnce() -> MatrixBytes + Send + 'static,
        load: impl FnOnce() -> Result<ProvingParameters> + Send + 'static,
    ) -> Result<Self> {
        let on_device = engine.clone();
        let loader = std::thread::Builder::new()
            .name("parameters".into())
            .spawn(move || {
                let params = load()?;
                Self::load(&on_device, params, matrices())
            })
            .map_err(|e| Error::Internal(format!("cannot start the parameter loader: {e}")))?;
        Ok(Self::with_slot(
            ParamsSlot {
                ready: OnceLock::new(),
                loader: Mutex::new(Some(loader)),
            },
            engine,
        ))
    }

    /// `params` on the engine's device as its plan says, with room for constraint matrices of
    /// `matrices` bytes where they fit (zero: none known).
    fn load(
        engine: &ProverEngine,
        params: ProvingParameters,
        matrices: MatrixBytes,
    ) -> Result<Loaded> {
        let resident = match engine.usable_gpu() {
            // The plan's proofs in flight are capped by the workers when a batch asks.
            Some(gpu) => Some(gpu.keep_resident(&params, usize::MAX, matrices)?),
            None => None,
        };
        Ok(Loaded { params, resident })
    }

    fn with_slot(params: ParamsSlot, engine: Arc<ProverEngine>) -> Self {
        Prover {
            params,
            engine,
            timeline: None,
            progress: None,
            workers: DEFAULT_WORKERS,
            host_budget: HostBudget::Available,
            batches: Arc::new(AtomicUsize::new(0)),
            matrices: Mutex::new(None),
        }
    }

    /// Records every stage of every proof in `timeline` (see [`Timeline::write_chrome_trace`]).
    pub fn with_timeline(mut self, timeline: Arc<Timeline>) -> Self {
        self.timeline = Some(timeline);
        self
    }

    /// Tells `observer` as each circuit of a batch is synthesized and proved (progress lines).
    pub fn with_progress(mut self, observer: Arc<ProgressObserver>) -> Self {
        self.progress = Some(observer);
        self
    }

    pub(super) fn tell(&self, event: BatchProgress) {
        if let Some(observer) = &self.progress {
            observer(event);
        }
    }

    /// The parameters, waiting for them if they are still loading ([`Self::loading`]).
    pub fn params(&self) -> Result<&ProvingParameters> {
        Ok(&self.params.get()?.params)
    }

    pub fn engine(&self) -> &Arc<ProverEngine> {
        &self.engine
    }

    /// Proves up to `workers` circuits of a batch at a time on this prover's device (at
    /// least one; [`DEFAULT_WORKERS`] unless set): while one proof computes, the next stages.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Proofs in flight at once: the workers asked for, fewer if the engine's plan holds
    /// fewer, one of them staging ahead where the plan lets the next proof stage beside one
    /// past its H step.
    pub fn workers(&self) -> usize {
        let Some(resident) = self.resident() else {
            return self.workers;
        };
        let plan = &resident.plan;
        let fit = plan.proofs_in_flight + usize::from(plan.stages_ahead(&resident.footprint));
        if fit < self.workers {
            log::info!(
                "{} workers asked for, {fit} fit the VRAM budget of {} bytes",
                self.workers,
                plan.budget
            );
            return fit;
        }
        self.workers
    }

    /// Host bytes each proof in flight holds beside its synthesized circuit where the plan
    /// keeps the scalars in host memory: a, b, c computed from the witness (a recorded
    /// system's), the A and B scalars selected, and with the H step in parts b's and c's
    /// transforms read back (in place of b and c computed for the proof). A batch sets them
    /// aside from its host budget for every worker before it sizes how many circuits it
    /// synthesizes ahead (uncounted, ten 2^27 partitions within 12 GiB on the H200 reached
    /// 125.7 of the host's 128.4 GB). Where the device computes the products beside the H
    /// step in parts, only the read-backs; zero where the scalars are on the device
    /// otherwise (the budget's other half covers those proofs) unless the plan runs the
    /// products inside the H step and this proof's a, b, c come from the host (the H step in
    /// parts: the read-backs and the A, B selection), and while the parameters are still
    /// loading (this does not wait for them).
    pub fn host_bytes_a_proof(&self, assignment: &ProvingAssignment) -> u64 {
        let plan = match self.params.ready.get() {
            Some(Ok(loaded)) => loaded.resident.as_ref().map(|r| &r.plan),
            _ => None,
        };
        let Some(plan) = plan else {
            return 0;
        };
        let rows = match &assignment.deferred_products {
            Some(system) => system.rows(),
            None => assignment.a.len(),
        };
        let domain = rows.max(1).next_power_of_two();
        let deferred = assignment.deferred_products.is_some();
        let values = match () {
            // The products and the gathers on the device.
            _ if plan.products_with_h() && deferred => match plan.h_in_parts() {
                true => 2 * domain,
                false => 0,
            },
            _ if plan.scalars_on_device() && !plan.products_with_h() => 0,
            _ => {
                // The parted H step drops b and c computed for the proof once uploaded and
                // reads their transforms back at the domain's size.
                let in_parts = plan.h_in_parts() || plan.products_with_h();
                let (products, read_back) = match (deferred, in_parts) {
                    (true, true) => (rows, 2 * domain),
                    (true, false) => (3 * rows, 0),
                    (false, true) => (0, 2 * domain),
                    (false, false) => (0, 0),
                };
                let selected = assignment.input_assignment.len()
                    + assignment.a_aux_density.total()
                    + assignment.b_input_density.total()
                    + assignment.b_aux_density.total();
                products + read_back + selected
            }
        };
        (values * std::mem::size_of::<Scalar>()) as u64
    }

    /// The engine's plan for this prover's proofs (`None` on the CPU, or while the
    /// parameters fail to load).
    pub fn plan(&self) -> Option<&DevicePlan> {
        self.resident().map(|resident| &resident.plan)
    }

    fn resident(&self) -> Option<&ResidentParams> {
        self.params.get().ok()?.resident.as_ref()
    }

    /// The plan in one line, as this prover's workers run it (`None` on the CPU, or while
    /// the parameters fail to load).
    pub fn plan_line(&self) -> Option<String> {
        let resident = self.resident()?;
        let (workers, planned) = (self.workers(), &resident.plan);
        let plan = DevicePlan {
            proofs_in_flight: workers.min(planned.proofs_in_flight),
            // A proof staging ahead needs a worker of its own.
            ahead_bytes: match workers > planned.proofs_in_flight {
                true => planned.ahead_bytes,
                false => 0,
            },
            ..planned.clone()
        };
        Some(plan.describe(&resident.footprint))
    }

    /// `matrices` on this prover's device for the products of its proofs: uploaded on first
    /// use and kept while batches prove the same matrices, or where the plan leaves room for
    /// their stream buffers but not for them, streamed from host memory at each use. `None`
    /// on the CPU, and where the plan leaves no room even to stream them (or streams the
    /// scalars they would be applied to): the products then run on the CPU. Waits for the
    /// parameters.
    pub fn device_matrices(&self, system: &Arc<RecordedSystem>) -> Option<Arc<DeviceMatrices>> {
        let gpu = self.engine.usable_gpu()?;
        let mut kept = self.matrices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = &*kept {
            if Arc::ptr_eq(&kept.host, system) {
                return kept.device.clone();
            }
        }
        // The previous circuit's matrices leave the device (and the budget) first.
        *kept = None;
        let plan = self.plan()?;
        let MatrixBytes {
            resident: bytes,
            streamed: stream,
        } = MatrixBytes::of(system);
        let room = plan.room_with(self.workers.min(plan.proofs_in_flight));
        let streamed = match () {
            _ if !plan.scalars_on_device() => None,
            _ if bytes <= room => Some(false),
            _ if stream <= room => Some(true),
            _ => None,
        };
        let device = match streamed {
            None => {
                log::info!(
                    "constraint matrices ({bytes} bytes) over the {room} bytes the plan leaves \
                     ({}): products on the CPU",
                    plan.describe_budget()
                );
                None
            }
            Some(streamed) => {
                let start = Instant::now();
                match gpu.device_matrices(system, streamed) {
                    Ok(device) => {
                        log::info!(
                            "constraint matrices {} the device: {bytes} bytes, {} bytes of \
                             device memory, ready in {:.2?}",
                            if streamed { "stream to" } else { "on" },
                            device.bytes(),
                            start.elapsed()
                        );
                        Some(Arc::new(device))
                    }
                    Err(e) => {
                        log::warn!(
                            "constraint matrices stay on the host ({e}): products on the CPU"
                        );
                        None
                    }
                }
            }
        };
        *kept = Some(KeptMatrices {
            host: system.clone(),
            device: device.clone(),
        });
        device
    }

    /// Host memory that a batch's synthesized circuits may hold at once, from the start of
    /// their synthesis to the end of their proofs: a batch synthesizes no more circuits ahead
    /// of its proofs than fit (at least one), beside what its proofs in flight hold where
    /// their scalars stay on the host ([`Self::host_bytes_a_proof`]). `None`: no limit.
    /// Unless set, half the memory available when a batch starts (`MemAvailable`, lowered to
    /// the cgroup's limit), shared equally by the prover's batches running once its first
    /// circuit is synthesized, or no limit where that is unknown. Of a batch over several
    /// provers, the first's counts.
    pub fn with_host_budget(mut self, bytes: Option<u64>) -> Self {
        self.host_budget = HostBudget::Fixed(bytes);
        self
    }

    /// How much of the host budget `proof_bytes` (its proofs' own, beside their circuits)
    /// take: all of a budget set; of the default share of what is available, the same share
    /// (the rest comes out of the memory left beside the share).
    pub fn host_budget_for_proofs(&self, proof_bytes: u64) -> u64 {
        match self.host_budget {
            HostBudget::Fixed(_) => proof_bytes,
            HostBudget::Available => proof_bytes / AVAILABLE_MEMORY_SHARE,
        }
    }

    /// A batch running on this prover until the guard drops (see [`Self::host_budget_share`]).
    pub(super) fn batch_running(&self) -> BatchRunning {
        self.batches.fetch_add(1, Ordering::Relaxed);
        BatchRunning(self.batches.clone())
    }

    /// A batch's part of `budget` (its [`host_budget`](Self::host_budget)) once its first
    /// circuit is synthesized: all of a budget set; of the default share of what is
    /// available, an equal part among the batches running on this prover then. Each batch
    /// took its share of what was available when it started, and a batch starting beside
    /// another counts memory the other will still fill: two sectors in flight held 104 GiB
    /// of a 125 GiB machine at 32 GiB.
    pub(super) fn host_budget_share(&self, budget: u64) -> u64 {
        match self.host_budget {
            HostBudget::Fixed(_) => budget,
            HostBudget::Available => budget / self.batches.load(Ordering::Relaxed).max(1) as u64,
        }
    }

    /// The host budget of a batch starting now (see [`Self::with_host_budget`]).
    pub fn host_budget(&self) -> Option<u64> {
        match self.host_budget {
            HostBudget::Fixed(bytes) => bytes,
            HostBudget::Available => match crate::host::available_memory() {
                Some(available) => Some(available / AVAILABLE_MEMORY_SHARE),
                None => {
                    log::info!(
                        "available host memory unknown: a batch synthesizes circuits without \
                         a host budget"
                    );
                    None
                }
            },
        }
    }

    /// Runs `f` as a span named `name` on `lane` of the timeline, if there is one.
    pub(super) fn span<T>(&self, lane: &str, name: &str, f: impl FnOnce() -> T) -> T {
        match &self.timeline {
            Some(timeline) => timeline.record(lane, name, f),
            None => f(),
        }
    }

    /// Runs `step` of a proof on `lane`: its time goes to `report` and the timeline.
    fn step<T>(
        &self,
        lane: &str,
        step: Step,
        report: &mut ProveReport,
        f: impl FnOnce() -> T,
    ) -> T {
        let start = Instant::now();
        let value = self.span(lane, step.label(), f);
        report.record(step, start.elapsed());
        value
    }

    /// One proof of a synthesized circuit, its steps recorded on `lane`.
    pub(super) fn prove_assignment(
        &self,
        assignment: &ProvingAssignment,
        r: Scalar,
        s: Scalar,
        lane: &str,
        report: &mut ProveReport,
    ) -> Result<Proof<Bls12>> {
        let msm = self.engine.run(&mut ProofSteps {
            prover: self,
            assignment,
            lane,
            report,
        })?;

        let vk = &self.params.get()?.params.vk;
        self.step(lane, Step::Assembly, report, || {
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
            Ok(Proof {
                a: g_a.into(),
                b: g_b.into(),
                c: g_c.into(),
            })
        })
    }

    /// A proof's heavy steps on `engine` (supraseal-c2's model: docs/design.md, "The
    /// two-stage pipeline and the two locks").
    /// Staging: a, b, c and the L scalars go where the engine computes; on a GPU uploads
    /// never wait on another worker's submissions (gpu/transfer.rs), so this runs while the
    /// previous proof computes. Compute: the H step and the five MSMs, no other proof's
    /// kernels in between; a worker waits only on its own submissions.
    ///
    /// The A and B scalars are gathered on the device, where the engine does so, as a step
    /// of the compute stage after the H step, in the room b and c leave (each step waits on
    /// its own kernels, so its time is its own work). Selected on the host, they are
    /// selected during the compute stage beside the H step and the H and L MSMs, and placed
    /// (uploaded) after them. Selecting them in the staging stage instead made a single
    /// proof's GPU part twice as slow (docs/benchmarks/proofs-and-batches.md, "three designs,
    /// side by side").
    fn heavy_steps<E: Engine>(
        &self,
        engine: &E,
        assignment: &ProvingAssignment,
        lane: &str,
        report: &mut ProveReport,
    ) -> Result<MsmResults> {
        let ProvingAssignment {
            a,
            b,
            c,
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density,
            b_input_density,
            b_aux_density,
            ..
        } = assignment;
        let loaded = self.params.get()?;
        let (params, resident) = (&loaded.params, loaded.resident.as_ref());
        let deferred = assignment.deferred_products.as_ref();
        // Before the proof's first buffer: the device holds as many proofs as its plan, and
        // one more staging ahead where a proof past its H step opened the room.
        let staged_bytes =
            resident.map_or(0, |r| r.plan.staged_bytes(&r.footprint, deferred.is_some()));
        let slot = engine.proof_slot(staged_bytes);

        // A proof's vectors live to its end, and go back to the pool together. Products left
        // to the proof are computed in its compute stage, from the aux values staged for L.
        // Where the plan has no room for the scalar vectors, the L, A and B scalars stay in
        // host memory and stream with their MSMs' chunks.
        let scalars_on_device = resident.is_none_or(|r| r.plan.scalars_on_device());
        // With the products in the H step, a, b, c that do not come from the device's
        // products take the H step in parts (three vectors do not fit beside the matrices).
        let with_h = resident.is_some_and(|r| r.plan.products_with_h());
        let h_in_parts = with_h || resident.is_some_and(|r| r.plan.h_in_parts());
        let (abc, mut l_scalars) = {
            let _staging = engine.enter(Stage::Staging);
            self.step(lane, Step::Staging, report, || -> Result<_> {
                let abc = match (deferred, h_in_parts) {
                    (Some(_), _) => None,
                    // The H step moves them to the device one at a time.
                    (None, true) => Some([a, b, c].map(|v| engine.vector(v))),
                    (None, false) => Some(engine.h_inputs(a, b, c)?),
                };
                let l_scalars = match scalars_on_device {
                    true => engine.upload(aux)?,
                    false => engine.vector(aux),
                };
                Ok((abc, l_scalars))
            })?
        };
        // Staged ahead, the proof takes no more until the proof before it has ended.
        if let Some(slot) = &slot {
            slot.whole();
        }
        let device_matrices = deferred.and_then(|m| self.device_matrices(m));

        let _compute = engine.enter(Stage::Compute);
        let matrices_with_h = device_matrices.as_deref().filter(|_| with_h);
        let (mut abc, h_done) = match (deferred, matrices_with_h) {
            // The products inside the H step's time, two vectors at a time or in parts.
            (Some(system), Some(matrices)) => {
                let parts = resident.is_some_and(|r| r.plan.h_in_parts());
                let h = self.step(lane, Step::HStep, report, || {
                    engine.products_and_h(system, matrices, inputs, aux, &mut l_scalars, parts)
                })?;
                ([h, engine.vector(&[]), engine.vector(&[])], true)
            }
            (Some(system), None) => {
                let abc = self.step(lane, Step::Products, report, || {
                    let matrices = device_matrices.as_deref();
                    engine.products(system, matrices, inputs, aux, &l_scalars, h_in_parts)
                })?;
                (abc, false)
            }
            (None, _) => (
                abc.ok_or_else(|| Error::Internal("a, b, c were not staged".into()))?,
                false,
            ),
        };
        // After the H step b and c are scratch, and after the H MSM so is a: their buffers
        // go back to the pool, where the A and B scalars take them (a proof with its
        // scalars on the device holds four vectors at once at most, not six).
        let h_step = |abc: &mut [_; 3], report: &mut ProveReport| -> Result<()> {
            if !h_done {
                self.step(lane, Step::HStep, report, || engine.h_step(abc, h_in_parts))?;
            }
            abc[1] = engine.vector(&[]);
            abc[2] = engine.vector(&[]);
            // The room the rest of this proof does not need: the next proof stages there.
            if let (Some(slot), Some(resident)) = (&slot, resident) {
                slot.open(resident.plan.ahead_bytes);
            }
            Ok(())
        };
        let msm_h = |abc: &mut [_; 3], report: &mut ProveReport| -> Result<G1Projective> {
            let sum = self.step(lane, Step::MsmH, report, || {
                let bases = engine.bases(&params.h, resident.map(|r| &r.h));
                engine.msm::<G1>(&bases, &abc[0], params.h.len())
            })?;
            abc[0] = engine.vector(&[]);
            Ok(sum)
        };
        let msm_l = |report: &mut ProveReport| {
            self.step(lane, Step::MsmL, report, || {
                let bases = engine.bases(&params.l, resident.map(|r| &r.l));
                engine.msm::<G1>(&bases, &l_scalars, aux.len())
            })
        };
        // Where the plan runs G1 MSMs two at a time, H's and L's together: a step of H's.
        let together = resident.is_some_and(|r| r.plan.g1_together);
        let msms_h_and_l = |abc: &mut [_; 3], report: &mut ProveReport| {
            if !together {
                let h = msm_h(abc, report)?;
                return Ok::<_, Error>((h, msm_l(report)?));
            }
            let sums = self.step(lane, Step::MsmH, report, || {
                let h_bases = engine.bases(&params.h, resident.map(|r| &r.h));
                let l_bases = engine.bases(&params.l, resident.map(|r| &r.l));
                engine.msms::<G1>(&[
                    (&h_bases, &abc[0], params.h.len()),
                    (&l_bases, &l_scalars, aux.len()),
                ])
            })?;
            abc[0] = engine.vector(&[]);
            match sums[..] {
                [h, l] => Ok((h, l)),
                _ => Err(Error::Internal("two MSMs gave other than two sums".into())),
            }
        };
        // The A and B scalars placed on the device (or kept on the host), both at once, or
        // `None`: gathered on the device, each before its MSMs.
        let ((h, l), mut placed) = if engine.selects_on_device(device_matrices.as_deref()) {
            h_step(&mut abc, report)?;
            (msms_h_and_l(&mut abc, report)?, None)
        } else {
            // The selection runs on a thread of its own beside this worker's steps, not as
            // a rayon task beside them: on the CPU engine the H step then ran on a rayon
            // thread and blocked it on bellperson's thread pool, whose tasks (a bellperson
            // MSM) waited on rayon in turn, and a batch deadlocked (tests/prove.rs, two
            // tests at once on 2 cores).
            let cpu_lane = format!("{lane} CPU");
            let (h_and_l, (selected, selection_time)) = std::thread::scope(|scope| {
                let selection = scope.spawn(|| {
                    let start = Instant::now();
                    let selected = self.span(&cpu_lane, Step::ScalarSelection.label(), || {
                        select_on_host(assignment)
                    });
                    (selected, start.elapsed())
                });
                let h_and_l = (|| {
                    h_step(&mut abc, report)?;
                    msms_h_and_l(&mut abc, report)
                })();
                let selected = selection
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (h_and_l, selected)
            });
            report.record(Step::ScalarSelection, selection_time);
            let h_and_l = h_and_l?;
            let placed = self.step(lane, Step::Gather, report, || {
                engine.place_selected(selected, &l_scalars)
            })?;
            (h_and_l, Some(placed))
        };
        // A query's scalars, gathered on the device (a few kernels, a step of their own, so
        // that each step's time is its own work) or taken from those placed. Where the plan
        // gathers one query at a time, a proof holds the aux values and one query's scalars.
        let mut scalars = |query: Query, report: &mut ProveReport| match &mut placed {
            Some(placed) => Ok(std::mem::replace(
                &mut placed[query.index()],
                engine.vector(&[]),
            )),
            None => self.step(lane, Step::Gather, report, || {
                engine.gather(assignment, device_matrices.as_deref(), &l_scalars, query)
            }),
        };

        let a_len = inputs.len() + a_aux_density.total();
        let b_len = b_input_density.total() + b_aux_density.total();
        let msm_a = |a_scalars: &E::Vector<'_>, report: &mut ProveReport| {
            self.step(lane, Step::MsmA, report, || {
                let bases = engine.bases(&params.a, resident.map(|r| &r.a));
                engine.msm::<G1>(&bases, a_scalars, a_len)
            })
        };
        let msm_b_g1 = |b_scalars: &E::Vector<'_>, report: &mut ProveReport| {
            self.step(lane, Step::MsmBG1, report, || {
                let bases = engine.bases(&params.b_g1, resident.map(|r| &r.b_g1));
                engine.msm::<G1>(&bases, b_scalars, b_len)
            })
        };
        // A's and B's G1 MSMs, together where the plan says (a step of A's).
        // One lifetime for both scalar vectors: the jobs of `msms` share a type.
        let msms_a_and_b_g1 = |a_scalars, b_scalars, report: &mut ProveReport| {
            if !together {
                let a = msm_a(a_scalars, report)?;
                return Ok::<_, Error>((a, msm_b_g1(b_scalars, report)?));
            }
            let sums = self.step(lane, Step::MsmA, report, || {
                let a_bases = engine.bases(&params.a, resident.map(|r| &r.a));
                let b_bases = engine.bases(&params.b_g1, resident.map(|r| &r.b_g1));
                engine.msms::<G1>(&[(&a_bases, a_scalars, a_len), (&b_bases, b_scalars, b_len)])
            })?;
            match sums[..] {
                [a, b_g1] => Ok((a, b_g1)),
                _ => Err(Error::Internal("two MSMs gave other than two sums".into())),
            }
        };
        let msm_b_g2 = |b_scalars: &E::Vector<'_>| {
            let bases = engine.bases(&params.b_g2, resident.map(|r| &r.b_g2));
            engine.msm::<G2>(&bases, b_scalars, b_len)
        };
        let (a, b_g1, b_g2) = if resident.is_some_and(|r| r.plan.g2_beside_g1()) {
            // B's G2 MSM on a thread of its own beside A's and B's G1 MSMs: its time is the
            // upload of its streamed bases, which then runs beside their kernels. Its
            // workspace and stream buffers are G2's own, in the plan beside G1's, and the
            // plan holds both queries' scalars at once.
            let b_scalars = scalars(Query::B, report)?;
            let a_scalars = scalars(Query::A, report)?;
            let g2_lane = g2_lane(lane);
            let (g1, (b_g2, g2_time)) = std::thread::scope(|scope| {
                let g2 = scope.spawn(|| {
                    let start = Instant::now();
                    let label = Step::MsmBG2.label();
                    let sum = self.span(&g2_lane, label, || msm_b_g2(&b_scalars));
                    (sum, start.elapsed())
                });
                let g1 = msms_a_and_b_g1(&a_scalars, &b_scalars, report);
                let g2 = g2
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (g1, g2)
            });
            report.record(Step::MsmBG2, g2_time);
            let (a, b_g1) = g1?;
            (a, b_g1, b_g2?)
        } else {
            let a_scalars = scalars(Query::A, report)?;
            let a = msm_a(&a_scalars, report)?;
            drop(a_scalars);
            let b_scalars = scalars(Query::B, report)?;
            let b_g1 = msm_b_g1(&b_scalars, report)?;
            let b_g2 = self.step(lane, Step::MsmBG2, report, || msm_b_g2(&b_scalars))?;
            (a, b_g1, b_g2)
        };
        Ok(MsmResults {
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
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

/// A proof's heavy steps as [`Work`] for the engine: on the GPU, and again on the CPU if the
/// GPU fails.
struct ProofSteps<'a> {
    prover: &'a Prover,
    assignment: &'a ProvingAssignment,
    lane: &'a str,
    report: &'a mut ProveReport,
}

impl Work for ProofSteps<'_> {
    type Output = MsmResults;

    fn what(&self) -> String {
        "a proof's GPU steps".into()
    }

    fn run<E: Engine>(&mut self, engine: &E) -> Result<MsmResults> {
        self.prover
            .heavy_steps(engine, self.assignment, self.lane, self.report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorded::Shape;

    fn prover() -> Prover {
        let shape = Shape {
            constraints: 4,
            inputs: 2,
            aux: 2,
            a_aux_density: 2,
            b_input_density: 1,
            b_aux_density: 2,
        };
        let params = ProvingParameters::random_for_shape(&shape, 1);
        Prover::with_engine(params, Arc::new(ProverEngine::cpu())).unwrap()
    }

    /// The default budget is shared by the batches running when each sizes its slots; one
    /// set is each batch's whole.
    #[test]
    fn batches_in_flight_share_the_default_host_budget() {
        let prover = prover();
        let one = prover.batch_running();
        assert_eq!(prover.host_budget_share(1200), 1200);
        let two = prover.batch_running();
        let three = prover.batch_running();
        assert_eq!(prover.host_budget_share(1200), 400);
        drop((one, two));
        assert_eq!(prover.host_budget_share(1200), 1200);
        let fixed = prover.with_host_budget(Some(1200));
        let _more = fixed.batch_running();
        assert_eq!(fixed.host_budget_share(1200), 1200);
        drop(three);
    }
}
