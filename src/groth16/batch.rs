//! A batch of proofs as a pipeline: circuits are synthesized in parallel on a pool of their
//! own, handed in order to a queue, and proved by workers — `workers` per prover, one prover
//! per device — so that the CPU side of one proof (synthesis, scalar selection, copies)
//! runs while the GPU computes another, and several devices share one batch.
//!
//! Workers of one device take turns in each of a proof's two stages (see `prover.rs`): one
//! stages while another computes. Each waits only on its own submissions (see
//! `GpuContext::wait_for`), so one worker's waiting never holds another's work back.
//! ../shared/DESIGN.md §6 has the reasoning.
//!
//! Synthesis runs only as far ahead of the proofs as the host budget holds synthesized
//! circuits ([`Prover::with_host_budget`]): a 2^27 circuit's assignment takes ~16 GiB, and a
//! batch of ten synthesized at once would not fit the host.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_core::{OsRng, RngCore};

use super::cancel::CancelToken;
use super::engine::ProverConfig;
use super::params::ProvingParameters;
use super::prover::{BatchProgress, Prover};
use super::report::{ProveReport, Step};
use super::synthesis::{synthesize, ProvingAssignment};
use crate::recorded::Shape;
use crate::recorded::{RecordedSystem, WitnessRun};
use crate::{Error, Result};

impl Prover {
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

    /// [`prove_batch`](Self::prove_batch) of circuits whose constraint systems were
    /// recorded: each is synthesized from its witness alone (see [`RecordedSystem`]),
    /// whole or in parts ([`WitnessRun`]).
    pub fn prove_batch_recorded<W: WitnessRun>(
        &self,
        circuits: Vec<W>,
        system: &Arc<RecordedSystem>,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<Vec<Proof<Bls12>>> {
        let provers = std::slice::from_ref(self);
        let never = CancelToken::new();
        Ok(prove_batch_recorded_across(provers, circuits, system, rs, ss, &never)?.0)
    }

    /// [`prove_batch`](Self::prove_batch) and the time each step took.
    pub fn prove_batch_report<C: Circuit<Scalar> + Send>(
        &self,
        circuits: Vec<C>,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
        let never = CancelToken::new();
        prove_batch_across(std::slice::from_ref(self), circuits, rs, ss, &never)
    }
}

/// What synthesis sends the hand-over: circuit i, synthesized in the time given, or its error.
type SynthesisOutcome = (usize, Result<(Synthesized, Duration)>);

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

/// Synthesized circuits waiting for a worker, in circuit order, and the first error.
struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    ready: VecDeque<(usize, Synthesized)>,
    /// No more circuits will come (all handed over, or the batch failed).
    closed: bool,
    error: Option<Error>,
}

impl Queue {
    fn push(&self, item: (usize, Synthesized)) {
        self.lock().ready.push_back(item);
        self.changed.notify_one();
    }

    /// The next circuit, waiting for one; `None` once the queue is closed and empty or the
    /// batch failed.
    fn pop(&self) -> Option<(usize, Synthesized)> {
        let mut state = self.lock();
        loop {
            if state.error.is_some() {
                return None;
            }
            if let Some(item) = state.ready.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Records the batch's first error and stops every worker.
    fn fail(&self, error: Error) {
        let mut state = self.lock();
        state.error.get_or_insert(error);
        state.closed = true;
        drop(state);
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A synthesized circuit and its slot of the host budget, given back once the assignment's
/// memory is.
struct Synthesized {
    assignment: ProvingAssignment,
    /// Declared after `assignment`, so dropped after it.
    _slot: Slot,
}

/// Room in the host budget for synthesized circuits, counted in circuits. Synthesis takes a
/// slot before it starts a circuit; the slot comes back when the circuit's assignment is
/// dropped (after its proof, or when the batch fails).
///
/// Slots go to circuits in index order, the slot and the index taken together: no later
/// circuit holds a slot while an earlier one waits for one. The slots are then held by
/// circuits being synthesized, waiting to be handed over behind earlier ones, or proving,
/// and each of those finishes without a further slot, so the in-order hand-over always gets
/// its next circuit.
struct Slots {
    state: Mutex<SlotState>,
    changed: Condvar,
}

struct SlotState {
    /// Slots in all: one while circuit 0's size is unknown.
    limit: usize,
    held: usize,
    /// The most held at once.
    peak: usize,
    /// The next circuit to synthesize, and how many there are.
    next: usize,
    count: usize,
    /// No more circuits are taken: the batch failed, or a circuit's synthesis did.
    stopped: bool,
}

impl Slots {
    fn new(limit: usize, count: usize) -> Arc<Self> {
        Arc::new(Slots {
            state: Mutex::new(SlotState {
                limit,
                held: 0,
                peak: 0,
                next: 0,
                count,
                stopped: false,
            }),
            changed: Condvar::new(),
        })
    }

    /// The next circuit to synthesize and its slot, waiting for a free slot; `None` once
    /// every circuit is taken or the slots are stopped.
    fn claim(self: &Arc<Self>) -> Option<(usize, Slot)> {
        let mut state = self.lock();
        loop {
            if state.stopped || state.next >= state.count {
                return None;
            }
            if state.held < state.limit {
                break;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let i = state.next;
        state.next += 1;
        state.held += 1;
        state.peak = state.peak.max(state.held);
        if state.next == state.count {
            // Waiters find nothing left to take.
            self.changed.notify_all();
        }
        Some((i, Slot(self.clone())))
    }

    fn set_limit(&self, limit: usize) {
        self.lock().limit = limit;
        self.changed.notify_all();
    }

    /// Takes no more circuits, and wakes those waiting for a slot.
    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    fn peak(&self) -> usize {
        self.lock().peak
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One circuit's slot of the host budget, given back when dropped.
struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.lock().held -= 1;
        self.0.changed.notify_all();
    }
}

/// Proofs of `circuits` (one shape), `rs[i]` and `ss[i]` for circuit i, spread over
/// `provers` (one per device, all made from the same parameters), each running
/// `Prover::workers` proofs at a time. The proofs are those of proving each circuit alone.
/// Once `cancel` is cancelled the batch stops at its next check with [`Error::Cancelled`].
pub fn prove_batch_across<C: Circuit<Scalar> + Send>(
    provers: &[Prover],
    circuits: Vec<C>,
    rs: &[Scalar],
    ss: &[Scalar],
    cancel: &CancelToken,
) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
    let sources = circuits.into_iter().map(Full).collect();
    prove_sources_across(provers, sources, None, rs, ss, cancel)
}

/// [`prove_batch_across`] of circuits whose constraint systems were recorded: each is
/// synthesized from its witness alone, and its proof computes a, b, c where its engine runs
/// (see [`RecordedSystem`]).
pub fn prove_batch_recorded_across<W: WitnessRun>(
    provers: &[Prover],
    circuits: Vec<W>,
    system: &Arc<RecordedSystem>,
    rs: &[Scalar],
    ss: &[Scalar],
    cancel: &CancelToken,
) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
    let sources = circuits
        .into_iter()
        .map(|circuit| WitnessOnly {
            circuit,
            system: system.clone(),
        })
        .collect();
    prove_sources_across(provers, sources, Some(system), rs, ss, cancel)
}

/// What a batch synthesizes into a proving assignment: a circuit run in full, or its witness
/// against a recorded constraint system.
trait Synthesis: Send {
    fn run(self) -> Result<ProvingAssignment>;

    /// Threads one run keeps busy (see [`WitnessRun::parallelism`]).
    fn parallelism(&self) -> usize {
        1
    }
}

struct Full<C>(C);

impl<C: Circuit<Scalar> + Send> Synthesis for Full<C> {
    fn run(self) -> Result<ProvingAssignment> {
        synthesize(self.0)
    }
}

/// The witness alone: the proof computes a, b, c where its engine runs.
struct WitnessOnly<W> {
    circuit: W,
    system: Arc<RecordedSystem>,
}

impl<W: WitnessRun> Synthesis for WitnessOnly<W> {
    fn run(self) -> Result<ProvingAssignment> {
        self.system.witness_assignment(self.circuit)
    }

    fn parallelism(&self) -> usize {
        self.circuit.parallelism()
    }
}

/// [`prove_batch_across`] over any [`Synthesis`].
fn prove_sources_across<S: Synthesis>(
    provers: &[Prover],
    circuits: Vec<S>,
    system: Option<&Arc<RecordedSystem>>,
    rs: &[Scalar],
    ss: &[Scalar],
    token: &CancelToken,
) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
    token.check()?;
    if rs.len() != circuits.len() || ss.len() != circuits.len() {
        return Err(Error::InvalidInput(format!(
            "{} circuits need as many r and s values, got {} and {}",
            circuits.len(),
            rs.len(),
            ss.len()
        )));
    }
    let Some(first) = provers.first() else {
        return Err(Error::InvalidInput(
            "a batch needs at least one prover".into(),
        ));
    };
    if circuits.is_empty() {
        return Err(Error::InvalidInput(
            "a batch needs at least one circuit".into(),
        ));
    }
    let count = circuits.len();
    let start = Instant::now();
    // The prover's own steps use the global pool: they must not queue behind seconds-long
    // synthesis tasks, so synthesis gets a pool of its own.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool_threads = threads.saturating_sub(1).max(1);
    let synthesis_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(pool_threads)
        .thread_name(|i| format!("synthesis-{i}"))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start synthesis threads: {e}")))?;
    // Circuits synthesized at once: enough to fill the pool, no more. On the H200 host ten
    // 2^27 circuits of 16 parts each ran up to seven at once and took 9-11 s each (about 2 s
    // alone), and the GPU waited 4.9 s for the second.
    let parallelism = circuits.iter().map(S::parallelism).max().unwrap_or(1);
    let concurrent = (pool_threads / parallelism).max(1);
    let budget = first.host_budget();
    // Without a budget every circuit may start at once; with one, circuit 0 is synthesized
    // alone, and its size sets how many fit.
    let slots = Slots::new(if budget.is_some() { 1 } else { count }, count);
    let circuits: Vec<Mutex<Option<S>>> = circuits
        .into_iter()
        .map(|circuit| Mutex::new(Some(circuit)))
        .collect();
    let queue = Queue {
        state: Mutex::new(QueueState::default()),
        changed: Condvar::new(),
    };
    let proofs = Mutex::new(vec![None; count]);
    let mut report = ProveReport::default();
    report.proofs = count;
    let report = Mutex::new(report);
    let cancel = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel();
    std::thread::scope(|scope| {
        let (queue, proofs, report, cancel) = (&queue, &proofs, &report, &cancel);
        let (slots, circuits, synthesis_pool) = (&slots, &circuits, &synthesis_pool);
        // The batch's first error stops it: no more circuits are taken, and whoever waits for
        // a slot or a circuit wakes up.
        let fail = move |error: Error| {
            cancel.store(true, Ordering::Relaxed);
            slots.stop();
            queue.fail(error);
        };
        // Synthesizes the next circuit in its slot and sends it to the hand-over: the bytes
        // of its assignment, or `None` when no circuit was left or its synthesis failed.
        let synthesize_next = move |sender: &mpsc::Sender<SynthesisOutcome>| -> Option<u64> {
            if let Err(cancelled) = token.check() {
                fail(cancelled);
                return None;
            }
            let (i, slot) = slots.claim()?;
            let circuit = circuits[i].lock().unwrap_or_else(|e| e.into_inner()).take();
            let result = synthesis_pool.install(|| {
                let lane = format!(
                    "synthesis thread {}",
                    rayon::current_thread_index().unwrap_or(0)
                );
                let t = Instant::now();
                let result = match circuit {
                    Some(circuit) => {
                        first.span(&lane, &format!("synthesize {i}"), || circuit.run())
                    }
                    None => Err(Error::Internal(format!("circuit {i} taken twice"))),
                };
                match result {
                    Ok(assignment) => {
                        first.tell(BatchProgress::Synthesized {
                            circuit: i,
                            took: t.elapsed(),
                        });
                        let synthesized = Synthesized {
                            assignment,
                            _slot: slot,
                        };
                        Ok((synthesized, t.elapsed()))
                    }
                    Err(e) => {
                        // The batch fails at this circuit: later ones are of no use.
                        slots.stop();
                        drop(slot);
                        Err(e)
                    }
                }
            });
            let bytes = result.as_ref().ok().map(|(s, _)| s.assignment.host_bytes());
            // The receiver is gone only when the batch already failed.
            let _ = sender.send((i, result));
            bytes
        };
        scope.spawn(move || {
            let mut loops = count.min(concurrent);
            if let Some(budget) = budget {
                let Some(bytes) = synthesize_next(&sender) else {
                    return;
                };
                let fitting = budget / bytes.max(1);
                if fitting == 0 {
                    log::warn!(
                        "one synthesized circuit ({bytes} bytes) is over the host budget of \
                         {budget} bytes: synthesizing one circuit at a time"
                    );
                }
                let limit = fitting.clamp(1, count as u64) as usize;
                log::debug!(
                    "host budget of {budget} bytes: {limit} synthesized circuits of {bytes} \
                     bytes at once"
                );
                slots.set_limit(limit);
                loops = limit.min(concurrent).min(count - 1);
            }
            // Threads outside the pool wait for slots, so that the pool's threads all stay
            // free for synthesis's own parallel work.
            for _ in 0..loops {
                let sender = sender.clone();
                scope.spawn(move || {
                    while !cancel.load(Ordering::Relaxed) && synthesize_next(&sender).is_some() {}
                });
            }
        });
        // Waits for parameters still loading, while the circuits synthesize.
        if let Err(e) = same_parameters(provers) {
            fail(e);
            return;
        }
        // Recorded matrices go to each device before its workers are counted: they take
        // VRAM that proofs' buffers then do not get.
        if let Some(system) = system {
            for prover in provers {
                prover.device_matrices(system);
            }
        }
        for (device, prover) in provers.iter().enumerate() {
            for worker in 0..prover.workers() {
                let lane = format!("device {device} worker {worker}");
                scope.spawn(move || {
                    while let Some((i, synthesized)) = queue.pop() {
                        if let Err(cancelled) = token.check() {
                            fail(cancelled);
                            break;
                        }
                        let mut own = ProveReport::default();
                        let t = Instant::now();
                        let proof = prover.span(&lane, &format!("prove {i}"), || {
                            let assignment = &synthesized.assignment;
                            prover.prove_assignment(assignment, rs[i], ss[i], &lane, &mut own)
                        });
                        match proof {
                            Ok(proof) => {
                                prover.tell(BatchProgress::Proved {
                                    circuit: i,
                                    took: t.elapsed(),
                                });
                                proofs.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(proof);
                                report.lock().unwrap_or_else(|e| e.into_inner()).add(&own);
                            }
                            Err(e) => fail(e),
                        }
                        // Unmapping a proof's host vectors (~0.5 GB at 2^22) took 33 ms on
                        // the H200 host: done off this worker, whose next proof can start
                        // now. The circuit's slot comes back after. A thread of its own, not
                        // a rayon task: a slot must come back even when every thread of the
                        // global pool waits (a caller's batches run from rayon tasks). If
                        // no thread starts, the closure and the assignment drop here.
                        let _ = std::thread::Builder::new()
                            .name("unmap".into())
                            .spawn(move || drop(synthesized));
                    }
                });
            }
        }
        match hand_over_in_order(first, &receiver, count, queue, report) {
            Ok(()) => queue.close(),
            Err(e) => fail(e),
        }
    });
    log::info!(
        "batch of {count}: at most {} circuits synthesized and not yet proved at once \
         (host budget: {})",
        slots.peak(),
        budget.map_or("none".into(), |b| format!("{b} bytes"))
    );
    if let Some(error) = queue.lock().error.take() {
        return Err(error);
    }
    let proofs = proofs
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::Internal("a proof of the batch is missing".into()))?;
    let mut report = report.into_inner().unwrap_or_else(|e| e.into_inner());
    report.wall = start.elapsed();
    report.backend = provers
        .iter()
        .map(|p| p.engine().describe())
        .collect::<Vec<_>>()
        .join(" + ");
    Ok((proofs, report))
}

/// Every prover of a batch must hold the same parameters (circuit 0 is checked against the
/// first prover's only).
fn same_parameters(provers: &[Prover]) -> Result<()> {
    let p0 = provers[0].params()?;
    let lengths = |p: &super::ProvingParameters| {
        [p.h.len(), p.l.len(), p.a.len(), p.b_g1.len(), p.b_g2.len()]
    };
    for (other, prover) in provers.iter().enumerate().skip(1) {
        let p = prover.params()?;
        if p.vk != p0.vk || lengths(p) != lengths(p0) {
            return Err(Error::InvalidInput(format!(
                "prover {other} of the batch has other parameters than prover 0"
            )));
        }
    }
    Ok(())
}

/// Queues circuits 0, 1, ... as their assignments arrive (in any order) from synthesis.
/// Circuit 0 decides the shape: the parameters must fit it, and every other circuit must
/// share it.
fn hand_over_in_order(
    prover: &Prover,
    receiver: &mpsc::Receiver<SynthesisOutcome>,
    count: usize,
    queue: &Queue,
    report: &Mutex<ProveReport>,
) -> Result<()> {
    let mut arrived = BTreeMap::new();
    let mut expected: Option<Shape> = None;
    for i in 0..count {
        let next = loop {
            if let Some(next) = arrived.remove(&i) {
                break next;
            }
            let (j, assignment) = receiver
                .recv()
                .map_err(|_| Error::Internal(format!("synthesis of circuit {i} never finished")))?;
            arrived.insert(j, assignment);
        };
        let (synthesized, took) = next?;
        let shape = synthesized.assignment.shape();
        match &expected {
            None => {
                let domain = shape.constraints.max(1).next_power_of_two();
                let params = prover.params()?;
                params.check_fits(
                    shape.inputs,
                    shape.aux,
                    domain,
                    shape.a_aux_density,
                    shape.b_input_density,
                    shape.b_aux_density,
                )?;
                params.check_delta()?;
                let mut report = report.lock().unwrap_or_else(|e| e.into_inner());
                report.constraints = shape.constraints;
                report.domain = domain;
                expected = Some(shape);
            }
            Some(first) if *first != shape => {
                return Err(Error::BatchShape {
                    index: i,
                    expected: first.to_string(),
                    found: shape.to_string(),
                })
            }
            Some(_) => {}
        }
        report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(Step::Synthesis, took);
        queue.push((i, synthesized));
    }
    Ok(())
}
