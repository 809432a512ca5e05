//! A batch of proofs as a pipeline: circuits are synthesized in parallel on a pool of their
//! own, handed to a queue as they are done (circuit 0 first), and proved by workers — `workers` per prover, one prover
//! per device — so that the CPU side of one proof (synthesis, scalar selection, copies)
//! runs while the GPU computes another, and several devices share one batch.
//!
//! Workers of one device take turns in each of a proof's two stages (see `prover.rs`): one
//! stages while another computes. Each waits only on its own submissions (see
//! `GpuContext::wait_for`), so one worker's waiting never holds another's work back.
//! The reasoning: `docs/design.md`, "The two-stage pipeline and the two locks".
//!
//! Synthesis runs only as far ahead of the proofs as the host budget holds synthesized
//! circuits ([`Prover::with_host_budget`]): a 2^27 circuit's assignment takes ~16 GiB, and a
//! batch of ten synthesized at once would not fit the host.
//!
//! `run` is one batch in flight, step by step; `queue` hands synthesized circuits to the
//! workers within the host budget.

mod queue;
mod run;

use std::sync::Arc;

use bellperson::groth16::Proof;
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_core::{OsRng, RngCore};

use super::cancel::CancelToken;
use super::engine::ProverConfig;
use super::params::ProvingParameters;
use super::prover::Prover;
use super::report::ProveReport;
use super::synthesis::{synthesize, ProvingAssignment};
use crate::error::Result;
use crate::recorded::{RecordedSystem, WitnessRun};
use run::BatchRun;

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

/// Proofs of `circuits` (one shape), `rs[i]` and `ss[i]` for circuit i, spread over
/// `provers` (one per device, all made from the same parameters), each running
/// `Prover::workers` proofs at a time. The proofs are those of proving each circuit alone.
/// Once `cancel` is cancelled the batch stops at its next check with [`Error::Cancelled`](crate::Error::Cancelled).
pub fn prove_batch_across<C: Circuit<Scalar> + Send>(
    provers: &[Prover],
    circuits: Vec<C>,
    rs: &[Scalar],
    ss: &[Scalar],
    cancel: &CancelToken,
) -> Result<(Vec<Proof<Bls12>>, ProveReport)> {
    let sources = circuits.into_iter().map(Full).collect();
    BatchRun::new(provers, sources, rs, ss, cancel)?.run(None)
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
    BatchRun::new(provers, sources, rs, ss, cancel)?.run(Some(system))
}

/// What a batch synthesizes into a proving assignment: a circuit run in full, or its witness
/// against a recorded constraint system.
trait Synthesis: Send {
    /// The assignment, its work on `pool`'s threads while this one waits.
    fn run(self, pool: &rayon::ThreadPool) -> Result<ProvingAssignment>;

    /// Threads one run keeps busy (see [`WitnessRun::parallelism`]).
    fn parallelism(&self) -> usize {
        1
    }
}

struct Full<C>(C);

impl<C: Circuit<Scalar> + Send> Synthesis for Full<C> {
    fn run(self, pool: &rayon::ThreadPool) -> Result<ProvingAssignment> {
        pool.install(|| synthesize(self.0))
    }
}

/// The witness alone: the proof computes a, b, c where its engine runs.
struct WitnessOnly<W> {
    circuit: W,
    system: Arc<RecordedSystem>,
}

impl<W: WitnessRun> Synthesis for WitnessOnly<W> {
    fn run(self, pool: &rayon::ThreadPool) -> Result<ProvingAssignment> {
        self.system.witness_assignment(self.circuit, pool)
    }

    fn parallelism(&self) -> usize {
        self.circuit.parallelism()
    }
}
