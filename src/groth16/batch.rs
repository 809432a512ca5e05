//! A batch of proofs as a pipeline: circuits are synthesized in parallel on a pool of their
//! own, handed in order to a queue, and proved by workers — `workers` per prover, one prover
//! per device — so that the CPU side of one proof (synthesis, scalar selection, copies)
//! runs while the GPU computes another, and several devices share one batch.
//!
//! Workers of one device take turns in each of a proof's two stages (see `prover.rs`): one
//! stages while another computes. Each waits only on its own submissions (see
//! `GpuContext::wait_for`), so one worker's waiting never holds another's work back.
//! ../shared/DESIGN.md §6 has the reasoning.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_core::{OsRng, RngCore};
use rayon::prelude::*;

use super::engine::ProverConfig;
use super::params::ProvingParameters;
use super::precompiled::ConstraintMatrices;
use super::prover::{BatchProgress, Prover};
use super::report::{ProveReport, Step};
use super::synthesis::{synthesize, ProvingAssignment, Shape};
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

    /// [`prove_batch`](Self::prove_batch) of circuits whose constraint matrices were
    /// recorded: each is synthesized from its witness alone (see [`ConstraintMatrices`]).
    pub fn prove_batch_precompiled<C: Circuit<Scalar> + Send>(
        &self,
        circuits: Vec<C>,
        matrices: &ConstraintMatrices,
        rs: &[Scalar],
        ss: &[Scalar],
    ) -> Result<Vec<Proof<Bls12>>> {
        let sources = circuits
            .into_iter()
            .map(|circuit| Precompiled { circuit, matrices })
            .collect();
        Ok(prove_sources_across(std::slice::from_ref(self), sources, rs, ss)?.0)
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

/// Synthesized circuits waiting for a worker, in circuit order, and the first error.
struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    ready: VecDeque<(usize, ProvingAssignment)>,
    /// No more circuits will come (all handed over, or the batch failed).
    closed: bool,
    error: Option<Error>,
}

impl Queue {
    fn push(&self, item: (usize, ProvingAssignment)) {
        self.lock().ready.push_back(item);
        self.changed.notify_one();
    }

    /// The next circuit, waiting for one; `None` once the queue is closed and empty or the
    /// batch failed.
    fn pop(&self) -> Option<(usize, ProvingAssignment)> {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Proofs of `circuits` (one shape), `rs[i]` and `ss[i]` for circuit i, spread over
/// `provers` (one per device, all made from the same parameters), each running
/// `Prover::workers` proofs at a time. The proofs are those of proving each circuit alone.
pub fn prove_batch_across<C: Circuit<Scalar> + Send>(
    provers: &[Prover],
    circuits: Vec<C>,
    rs: &[Scalar],
    ss: &[Scalar],
) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
    let sources = circuits.into_iter().map(Full).collect();
    prove_sources_across(provers, sources, rs, ss)
}

/// What a batch synthesizes into a proving assignment: a circuit run in full, or its witness
/// with recorded matrices.
trait Synthesis: Send {
    fn run(self) -> Result<ProvingAssignment>;
}

struct Full<C>(C);

impl<C: Circuit<Scalar> + Send> Synthesis for Full<C> {
    fn run(self) -> Result<ProvingAssignment> {
        synthesize(self.0)
    }
}

struct Precompiled<'m, C> {
    circuit: C,
    matrices: &'m ConstraintMatrices,
}

impl<C: Circuit<Scalar> + Send> Synthesis for Precompiled<'_, C> {
    fn run(self) -> Result<ProvingAssignment> {
        self.matrices.synthesize(self.circuit)
    }
}

/// [`prove_batch_across`] over any [`Synthesis`].
fn prove_sources_across<S: Synthesis>(
    provers: &[Prover],
    circuits: Vec<S>,
    rs: &[Scalar],
    ss: &[Scalar],
) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
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
    let synthesis_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.saturating_sub(1).max(1))
        .thread_name(|i| format!("synthesis-{i}"))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start synthesis threads: {e}")))?;
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
        scope.spawn(move || {
            synthesis_pool.install(|| {
                circuits.into_par_iter().enumerate().for_each_with(
                    sender,
                    |sender, (i, circuit)| {
                        if cancel.load(Ordering::Relaxed) {
                            return;
                        }
                        let lane = format!(
                            "synthesis thread {}",
                            rayon::current_thread_index().unwrap_or(0)
                        );
                        let t = Instant::now();
                        let result =
                            first.span(&lane, &format!("synthesize {i}"), || circuit.run());
                        if result.is_ok() {
                            first.tell(BatchProgress::Synthesized {
                                circuit: i,
                                took: t.elapsed(),
                            });
                        }
                        // The receiver is gone only when the batch already failed.
                        let _ = sender.send((i, result.map(|a| (a, t.elapsed()))));
                    },
                );
            });
        });
        // Waits for parameters still loading, while the circuits synthesize.
        if let Err(e) = same_parameters(provers) {
            cancel.store(true, Ordering::Relaxed);
            queue.fail(e);
            return;
        }
        for (device, prover) in provers.iter().enumerate() {
            for worker in 0..prover.workers() {
                let lane = format!("device {device} worker {worker}");
                scope.spawn(move || {
                    while let Some((i, assignment)) = queue.pop() {
                        let mut own = ProveReport::default();
                        let t = Instant::now();
                        let proof = prover.span(&lane, &format!("prove {i}"), || {
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
                            Err(e) => {
                                cancel.store(true, Ordering::Relaxed);
                                queue.fail(e);
                            }
                        }
                    }
                });
            }
        }
        match hand_over_in_order(first, &receiver, count, queue, report) {
            Ok(()) => queue.close(),
            Err(e) => {
                cancel.store(true, Ordering::Relaxed);
                queue.fail(e);
            }
        }
    });
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
    receiver: &mpsc::Receiver<(usize, Result<(ProvingAssignment, Duration)>)>,
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
        let (assignment, took) = next?;
        let shape = assignment.shape();
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
        queue.push((i, assignment));
    }
    Ok(())
}
