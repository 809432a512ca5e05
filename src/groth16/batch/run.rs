//! One batch in flight, step by step: [`BatchRun::new`] checks the request and sizes the
//! synthesis; [`BatchRun::run`] starts [`synthesize_all`](BatchRun::synthesize_all) (the
//! circuits, as far ahead as the host budget allows), [`prepare_devices`](BatchRun::prepare_devices)
//! (the parameters loaded, recorded matrices resident), one [`prove_queued`](BatchRun::prove_queued)
//! loop per worker of every device, and [`hand_over`](BatchRun::hand_over), which queues
//! the synthesized circuits as they come (circuit 0 first); [`finish`](BatchRun::finish) collects the
//! proofs. The batch's first error stops every step ([`fail`](BatchRun::fail)).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::Scope;
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};

use super::queue::{Queue, Slots, Synthesized};
use super::Synthesis;
use crate::error::{Error, Result};
use crate::groth16::cancel::CancelToken;
use crate::groth16::prover::{BatchProgress, BatchRunning, Prover};
use crate::groth16::report::{synthesis_span, worker_lane, ProveReport, Step};
use crate::groth16::ProvingParameters;
use crate::recorded::{RecordedSystem, Shape};

/// What synthesis sends the hand-over: circuit i, synthesized in the time given, or its error.
type SynthesisOutcome = (usize, Result<(Synthesized, Duration)>);

/// A batch of proofs on `provers`, from its circuits to its proofs.
pub(super) struct BatchRun<'a, S> {
    provers: &'a [Prover],
    rs: &'a [Scalar],
    ss: &'a [Scalar],
    token: &'a CancelToken,
    /// Each taken once, by the synthesis that claims its slot.
    circuits: Vec<Mutex<Option<S>>>,
    /// Synthesis runs on a pool of its own: the prover's steps use the global pool, and must
    /// not queue behind seconds-long synthesis tasks.
    synthesis_pool: rayon::ThreadPool,
    /// Circuits synthesized at once ([`concurrent_circuits`]).
    concurrent: usize,
    /// Host bytes for synthesized circuits ([`Prover::host_budget`]), of which this batch
    /// takes its share ([`Prover::host_budget_share`]).
    budget: Option<u64>,
    /// Counts this batch among its first prover's running ones while it lives.
    _running: BatchRunning,
    slots: Arc<Slots>,
    queue: Queue,
    proofs: Mutex<Vec<Option<Proof<Bls12>>>>,
    report: Mutex<ProveReport>,
    /// Set by the first error: no more circuits are taken.
    cancelled: AtomicBool,
    start: Instant,
}

/// Circuits synthesized at once on `pool_threads` threads when each runs in `parallelism`
/// parts: enough for every thread to have a part, and two where one circuit's parts leave
/// threads idle in its last round (a 32 GiB PoRep partition's 18 challenges on 15 threads:
/// a second round of three), so that the next circuit's parts fill them. More only slow each
/// circuit down: ten 2^27 circuits of 16 parts each, run up to seven at once, took five
/// times as long each as alone, and the GPU waited for the second.
fn concurrent_circuits(pool_threads: usize, parallelism: usize) -> usize {
    let (threads, parts) = (pool_threads.max(1), parallelism.max(1));
    if parts > threads && parts % threads != 0 {
        2
    } else {
        threads.div_ceil(parts)
    }
}

impl<'a, S: Synthesis> BatchRun<'a, S> {
    /// Checks that the batch can be proved (randomness for every circuit, a prover, a
    /// circuit) and sizes its synthesis.
    pub(super) fn new(
        provers: &'a [Prover],
        circuits: Vec<S>,
        rs: &'a [Scalar],
        ss: &'a [Scalar],
        token: &'a CancelToken,
    ) -> Result<Self> {
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
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool_threads = threads.saturating_sub(1).max(1);
        let synthesis_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(pool_threads)
            .thread_name(|i| format!("synthesis-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("cannot start synthesis threads: {e}")))?;
        let parallelism = circuits.iter().map(S::parallelism).max().unwrap_or(1);
        let running = first.batch_running();
        let budget = first.host_budget();
        let mut report = ProveReport::default();
        report.proofs = count;
        Ok(BatchRun {
            provers,
            rs,
            ss,
            token,
            circuits: circuits
                .into_iter()
                .map(|circuit| Mutex::new(Some(circuit)))
                .collect(),
            synthesis_pool,
            concurrent: concurrent_circuits(pool_threads, parallelism),
            budget,
            _running: running,
            // Without a budget every circuit may start at once; with one, circuit 0 is
            // synthesized alone, and its size sets how many fit.
            slots: Slots::new(if budget.is_some() { 1 } else { count }, count),
            queue: Queue::new(),
            proofs: Mutex::new(vec![None; count]),
            report: Mutex::new(report),
            cancelled: AtomicBool::new(false),
            start: Instant::now(),
        })
    }

    /// Every step at once, on threads of this scope, until the last proof or the first
    /// error.
    pub(super) fn run(
        self,
        system: Option<&Arc<RecordedSystem>>,
    ) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
        let (sender, receiver) = mpsc::channel();
        std::thread::scope(|scope| {
            let batch = &self;
            scope.spawn(move || batch.synthesize_all(scope, sender));
            if let Err(e) = self.prepare_devices(system) {
                self.fail(e);
                return;
            }
            for (device, prover) in self.provers.iter().enumerate() {
                for worker in 0..prover.workers() {
                    let lane = worker_lane(device, worker);
                    scope.spawn(move || batch.prove_queued(prover, &lane));
                }
            }
            match self.hand_over(&receiver) {
                Ok(()) => self.queue.close(),
                Err(e) => self.fail(e),
            }
        });
        self.finish()
    }

    /// Stops the batch at its first error: no more circuits are taken, and whoever waits for
    /// a slot or a circuit wakes up.
    fn fail(&self, error: Error) {
        self.cancelled.store(true, Ordering::Relaxed);
        self.slots.stop();
        self.queue.fail(error);
    }

    /// Synthesizes the circuits, each in a slot of the host budget, on threads of `scope`:
    /// under a budget circuit 0 first and alone, its size setting how many slots there are.
    fn synthesize_all<'scope>(
        &'scope self,
        scope: &'scope Scope<'scope, '_>,
        sender: mpsc::Sender<SynthesisOutcome>,
    ) {
        let count = self.circuits.len();
        let mut loops = count.min(self.concurrent);
        if let Some(budget) = self.budget {
            let Some((bytes, proofs)) = self.synthesize_next(&sender, "synthesis 0") else {
                return;
            };
            let budget = self.provers[0].host_budget_share(budget);
            let proofs = self.provers[0].host_budget_for_proofs(proofs);
            let fitting = budget.saturating_sub(proofs) / bytes.max(1);
            if fitting == 0 {
                log::warn!(
                    "one synthesized circuit ({bytes} bytes) is over the host budget of \
                     {budget} bytes ({proofs} bytes set aside for the proofs in flight): \
                     synthesizing one circuit at a time"
                );
            }
            let limit = fitting.clamp(1, count as u64) as usize;
            log::debug!(
                "host budget of {budget} bytes: {proofs} bytes for the proofs in flight, \
                 {limit} synthesized circuits of {bytes} bytes at once"
            );
            self.slots.set_limit(limit);
            loops = limit.min(self.concurrent).min(count - 1);
        }
        // Threads outside the pool wait for slots and for their circuit's work on the pool,
        // so that the pool's threads all stay free for that work, and none waits inside it
        // (where it would take up other circuits' work, see `RecordedSystem::witness_in_parts`).
        for k in 0..loops {
            let sender = sender.clone();
            scope.spawn(move || {
                let lane = format!("synthesis {}", k + usize::from(self.budget.is_some()));
                while !self.cancelled.load(Ordering::Relaxed) {
                    if self.synthesize_next(&sender, &lane).is_none() {
                        break;
                    }
                }
            });
        }
    }

    /// Synthesizes the next circuit in its slot and sends it to the hand-over: the bytes of
    /// its assignment and the host bytes the batch's proofs in flight hold beside theirs
    /// (every worker's, [`crate::groth16::Prover::host_bytes_a_proof`]), or `None` when no
    /// circuit was left or its synthesis failed.
    fn synthesize_next(
        &self,
        sender: &mpsc::Sender<SynthesisOutcome>,
        lane: &str,
    ) -> Option<(u64, u64)> {
        if let Err(cancelled) = self.token.check() {
            self.fail(cancelled);
            return None;
        }
        let (i, slot) = self.slots.claim()?;
        let circuit = self.circuits[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let first = &self.provers[0];
        let t = Instant::now();
        let result = match circuit {
            Some(circuit) => first.span(lane, &synthesis_span(i), || {
                circuit.run(&self.synthesis_pool)
            }),
            None => Err(Error::Internal(format!("circuit {i} taken twice"))),
        };
        let result = match result {
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
                self.slots.stop();
                drop(slot);
                Err(e)
            }
        };
        let bytes = result.as_ref().ok().map(|(s, _)| {
            let proofs = self
                .provers
                .iter()
                // Non-zero only once the parameters are loaded: `workers` then does not wait.
                .map(|p| match p.host_bytes_a_proof(&s.assignment) {
                    0 => 0,
                    bytes => p.workers() as u64 * bytes,
                })
                .sum();
            (s.assignment.host_bytes(), proofs)
        });
        // The receiver is gone only when the batch already failed.
        let _ = sender.send((i, result));
        bytes
    }

    /// Waits for parameters still loading (while the circuits synthesize), checks that every
    /// prover holds the same, and puts recorded matrices on each device before its workers
    /// start: they take VRAM that proofs' buffers then do not get.
    fn prepare_devices(&self, system: Option<&Arc<RecordedSystem>>) -> Result<()> {
        let p0 = self.provers[0].params()?;
        let lengths =
            |p: &ProvingParameters| [p.h.len(), p.l.len(), p.a.len(), p.b_g1.len(), p.b_g2.len()];
        for (other, prover) in self.provers.iter().enumerate().skip(1) {
            let p = prover.params()?;
            if p.vk != p0.vk || lengths(p) != lengths(p0) {
                return Err(Error::InvalidInput(format!(
                    "prover {other} of the batch has other parameters than prover 0"
                )));
            }
        }
        if let Some(system) = system {
            for prover in self.provers {
                prover.device_matrices(system);
            }
        }
        Ok(())
    }

    /// One worker of `prover`: proves queued circuits until the queue is done or the batch
    /// failed.
    fn prove_queued(&self, prover: &Prover, lane: &str) {
        while let Some((i, synthesized)) = self.queue.pop() {
            if let Err(cancelled) = self.token.check() {
                self.fail(cancelled);
                break;
            }
            let mut own = ProveReport::default();
            let t = Instant::now();
            let proof = prover.span(lane, &format!("prove {i}"), || {
                let assignment = &synthesized.assignment;
                prover.prove_assignment(assignment, self.rs[i], self.ss[i], lane, &mut own)
            });
            match proof {
                Ok(proof) => {
                    prover.tell(BatchProgress::Proved {
                        circuit: i,
                        took: t.elapsed(),
                    });
                    self.proofs.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(proof);
                    self.report
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .add(&own);
                }
                Err(e) => self.fail(e),
            }
            // Unmapping a proof's host vectors takes tens of milliseconds at 2^22: done off
            // this worker, whose next proof can start now. The circuit's slot comes back
            // after. A thread of its own, not a rayon task: a slot must come back even when
            // every thread of the global pool waits (a caller's batches run from rayon
            // tasks). If no thread starts, the closure and the assignment drop here.
            let _ = std::thread::Builder::new()
                .name("unmap".into())
                .spawn(move || drop(synthesized));
        }
    }

    /// Queues the circuits as their assignments arrive from synthesis: circuit 0 first, as
    /// it decides the shape (the parameters must fit it, every other circuit must share it),
    /// then each as it comes, so that a circuit whose synthesis lags does not keep the
    /// workers from those done after it (one 32 GiB partition took 29 s beside others' 5 s,
    /// and the GPU waited for it).
    fn hand_over(&self, receiver: &mpsc::Receiver<SynthesisOutcome>) -> Result<()> {
        let never_finished = || Error::Internal("a circuit's synthesis never finished".into());
        // Circuits done before circuit 0, held until it has set the shape.
        let mut early = Vec::new();
        let first = loop {
            match receiver.recv().map_err(|_| never_finished())? {
                (0, outcome) => break outcome,
                other => early.push(other),
            }
        };
        let (synthesized, took) = first?;
        let shape = synthesized.assignment.shape();
        self.check_parameters_fit(&shape)?;
        self.queue_synthesized(0, synthesized, took);
        let held = early.len();
        for (i, outcome) in early {
            self.queue_alike(i, outcome, &shape)?;
        }
        for _ in 1 + held..self.circuits.len() {
            let (i, outcome) = receiver.recv().map_err(|_| never_finished())?;
            self.queue_alike(i, outcome, &shape)?;
        }
        Ok(())
    }

    /// Queues circuit `i` if it was synthesized and has circuit 0's `shape`.
    fn queue_alike(
        &self,
        i: usize,
        outcome: Result<(Synthesized, Duration)>,
        shape: &Shape,
    ) -> Result<()> {
        let (synthesized, took) = outcome?;
        let found = synthesized.assignment.shape();
        if found != *shape {
            return Err(Error::BatchShape {
                index: i,
                expected: shape.to_string(),
                found: found.to_string(),
            });
        }
        self.queue_synthesized(i, synthesized, took);
        Ok(())
    }

    fn queue_synthesized(&self, i: usize, synthesized: Synthesized, took: Duration) {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(Step::Synthesis, took);
        self.queue.push((i, synthesized));
    }

    /// Whether the parameters fit circuit 0's `shape`, which the report then names.
    fn check_parameters_fit(&self, shape: &Shape) -> Result<()> {
        let domain = shape.constraints.max(1).next_power_of_two();
        let params = self.provers[0].params()?;
        params.check_fits(
            shape.inputs,
            shape.aux,
            domain,
            shape.a_aux_density,
            shape.b_input_density,
            shape.b_aux_density,
        )?;
        params.check_delta()?;
        let mut report = self.report.lock().unwrap_or_else(|e| e.into_inner());
        report.constraints = shape.constraints;
        report.domain = domain;
        Ok(())
    }

    /// The proofs in circuit order and the batch's report, or its first error.
    fn finish(self) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
        log::info!(
            "batch of {}: at most {} circuits synthesized and not yet proved at once \
             (host budget: {})",
            self.circuits.len(),
            self.slots.peak(),
            self.budget.map_or("none".into(), |b| format!("{b} bytes"))
        );
        if let Some(error) = self.queue.lock().error.take() {
            return Err(error);
        }
        let proofs = self
            .proofs
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::Internal("a proof of the batch is missing".into()))?;
        let mut report = self.report.into_inner().unwrap_or_else(|e| e.into_inner());
        report.wall = self.start.elapsed();
        report.backend = self
            .provers
            .iter()
            .map(|p| p.engine().describe())
            .collect::<Vec<_>>()
            .join(" + ");
        Ok((proofs, report))
    }
}

#[cfg(test)]
mod tests {
    use super::concurrent_circuits;

    #[test]
    fn concurrent_circuits_fill_the_pool() {
        // Whole circuits: one a thread.
        assert_eq!(concurrent_circuits(15, 1), 15);
        // Parts that fill the threads together, the last circuit's parts in part.
        assert_eq!(concurrent_circuits(15, 2), 8);
        assert_eq!(concurrent_circuits(15, 15), 1);
        // Rounds that end full: one at a time.
        assert_eq!(concurrent_circuits(15, 30), 1);
        assert_eq!(concurrent_circuits(1, 4), 1);
        // A last round with idle threads: the next circuit fills them.
        assert_eq!(concurrent_circuits(15, 16), 2);
        assert_eq!(concurrent_circuits(15, 18), 2);
    }
}
