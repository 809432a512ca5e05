//! A batch under a host budget: no more circuits synthesized and not yet proved at once than
//! the budget holds, the same proofs as bellperson's, and a failing circuit ends the batch
//! without a thread left waiting for a slot. On the CPU engine: the bound is the batch's,
//! not the device's.

mod common;

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use bellperson::groth16::{create_proof_batch, generate_random_parameters, Parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use common::proof_bytes;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::groth16::batch::prove_batch_across;
use wgpu_groth16::groth16::circuits::FilecoinLike;
use wgpu_groth16::groth16::synthesis::synthesize;
use wgpu_groth16::groth16::{
    Backend, BatchProgress, CancelToken, Prover, ProverConfig, ProverEngine, ProvingParameters,
};
use wgpu_groth16::Error;

const LOG_CONSTRAINTS: u32 = 8;

/// How long each proof's `Proved` report takes: proving is then far slower than synthesizing
/// (a 2^8 circuit synthesizes in about a millisecond), so an unbounded batch would have every
/// circuit synthesized before the first proof is reported.
const PROVED_DELAY: Duration = Duration::from_millis(100);

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn params(seed: u64) -> Parameters<Bls12> {
    let blank = FilecoinLike::blank(LOG_CONSTRAINTS).unwrap();
    generate_random_parameters::<Bls12, _, _>(blank, &mut rng(seed)).expect("parameters")
}

fn circuits(count: u64) -> Vec<FilecoinLike> {
    (0..count)
        .map(|seed| FilecoinLike::new(LOG_CONSTRAINTS, seed).unwrap())
        .collect()
}

/// Host bytes of one synthesized circuit of the batch: what the batch counts per circuit.
fn circuit_bytes() -> u64 {
    synthesize(FilecoinLike::new(LOG_CONSTRAINTS, 0).unwrap())
        .unwrap()
        .host_bytes()
}

/// Counts the circuits synthesized and not yet proved, from a batch's progress reports.
#[derive(Default)]
struct InFlight {
    alive: usize,
    peak: usize,
    synthesized: Vec<usize>,
}

/// A CPU prover with `budget`, whose `Proved` reports take [`PROVED_DELAY`] before they count.
fn prover(params: &Parameters<Bls12>, budget: Option<u64>) -> (Prover, Arc<Mutex<InFlight>>) {
    let config = ProverConfig {
        backend: Backend::Cpu,
        ..Default::default()
    };
    let in_flight = Arc::new(Mutex::new(InFlight::default()));
    let seen = in_flight.clone();
    let prover = Prover::new(params, &config)
        .expect("prover")
        .with_host_budget(budget)
        .with_progress(Arc::new(move |event| match event {
            BatchProgress::Synthesized { circuit, .. } => {
                let mut seen = seen.lock().unwrap();
                seen.alive += 1;
                seen.peak = seen.peak.max(seen.alive);
                seen.synthesized.push(circuit);
            }
            BatchProgress::Proved { .. } => {
                std::thread::sleep(PROVED_DELAY);
                seen.lock().unwrap().alive -= 1;
            }
        }));
    (prover, in_flight)
}

/// Proves `count` circuits under `budget` and checks the proofs against bellperson's batch;
/// returns the most circuits synthesized and not yet proved at once.
fn peak_in_flight(count: u64, budget: Option<u64>, seed: u64) -> usize {
    let params = params(seed);
    let circuits = circuits(count);
    let rs: Vec<Scalar> = (0..count)
        .map(|i| Scalar::random(rng(seed + 10 + i)))
        .collect();
    let ss: Vec<Scalar> = (0..count)
        .map(|i| Scalar::random(rng(seed + 30 + i)))
        .collect();
    let expected = create_proof_batch(circuits.clone(), &params, rs.clone(), ss.clone())
        .expect("bellperson batch");
    let (prover, in_flight) = prover(&params, budget);
    let proofs = prover.prove_batch(circuits, &rs, &ss).expect("our batch");
    assert_eq!(
        proofs.iter().map(proof_bytes).collect::<Vec<_>>(),
        expected.iter().map(proof_bytes).collect::<Vec<_>>()
    );
    let in_flight = in_flight.lock().unwrap();
    assert_eq!(in_flight.alive, 0);
    in_flight.peak
}

#[test]
fn a_budget_of_two_circuits_holds_two_in_flight_and_proofs_equal_bellperson() {
    let bytes = circuit_bytes();
    // Two and a half circuits: two fit.
    let peak = peak_in_flight(6, Some(2 * bytes + bytes / 2), 1);
    // Over 2: the bound did not hold. Under 2: synthesis did not run ahead of the proofs.
    assert_eq!(peak, 2, "circuits synthesized and not yet proved at once");
}

#[test]
fn without_a_budget_synthesis_runs_ahead_of_the_proofs() {
    // The other tests' delay does distinguish: unbounded, every circuit is synthesized
    // before the first proof is reported.
    assert_eq!(peak_in_flight(4, None, 2), 4);
}

#[test]
fn a_budget_below_one_circuit_proves_one_circuit_at_a_time() {
    assert_eq!(peak_in_flight(3, Some(1), 3), 1);
}

#[test]
fn the_default_host_budget_is_a_share_of_available_memory() {
    let params = params(4);
    let (prover, _) = prover(&params, None);
    assert_eq!(prover.host_budget(), None);
    let default = Prover::new(
        &params,
        &ProverConfig {
            backend: Backend::Cpu,
            ..Default::default()
        },
    )
    .unwrap();
    if cfg!(target_os = "linux") {
        let budget = default.host_budget().expect("a budget from /proc/meminfo");
        assert!(budget > 0);
    }
}

/// `inner`, or a synthesis error.
#[derive(Clone)]
struct FailingAt {
    inner: FilecoinLike,
    fails: bool,
}

impl Circuit<Scalar> for FailingAt {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if self.fails {
            return Err(SynthesisError::AssignmentMissing);
        }
        self.inner.synthesize(cs)
    }
}

#[test]
fn a_circuit_failing_synthesis_fails_the_batch_promptly_under_any_budget() {
    let params = params(5);
    let bytes = circuit_bytes();
    for budget in [Some(1), Some(2 * bytes + bytes / 2), None] {
        let circuits: Vec<_> = circuits(6)
            .into_iter()
            .enumerate()
            .map(|(i, inner)| FailingAt {
                inner,
                fails: i == 3,
            })
            .collect();
        let (prover, in_flight) = prover(&params, budget);
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(prover.prove_batch_random(circuits));
        });
        let result = result
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("a batch with budget {budget:?} hangs"));
        assert!(
            matches!(result, Err(Error::Synthesis(_))),
            "budget {budget:?}: {result:?}"
        );
        if budget == Some(1) {
            // One slot: circuit 4 would need circuit 3's, given back only once the batch
            // has stopped taking circuits.
            let synthesized = in_flight.lock().unwrap().synthesized.clone();
            assert_eq!(synthesized, [0, 1, 2], "budget {budget:?}");
        }
    }
}

#[test]
fn parameters_that_do_not_fit_fail_the_batch_while_synthesis_waits_for_a_slot() {
    // Parameters of a larger circuit: the hand-over refuses circuit 0, which holds the one
    // slot while circuit 1 waits for it.
    let blank = FilecoinLike::blank(LOG_CONSTRAINTS + 1).unwrap();
    let params = generate_random_parameters::<Bls12, _, _>(blank, &mut rng(6)).unwrap();
    let (prover, _) = prover(&params, Some(1));
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(prover.prove_batch_random(circuits(4)));
    });
    let result = result
        .recv_timeout(Duration::from_secs(60))
        .expect("the batch hangs");
    assert!(
        matches!(result, Err(Error::ParamsMismatch(_))),
        "{result:?}"
    );
}

#[test]
fn provers_of_two_parameter_sets_fail_the_batch_while_synthesis_waits_for_a_slot() {
    // Prover 1's parameters arrive after circuit 0 is synthesized: it holds the one slot,
    // unreceived, while circuit 1 waits for it; the batch fails before any hand-over, and
    // the failure itself must wake the waiter.
    let params = params(7);
    let other = ProvingParameters::from(&self::params(8));
    let (first, _) = prover(&params, Some(1));
    let second = Prover::loading(Arc::new(ProverEngine::cpu()), move || {
        std::thread::sleep(Duration::from_millis(500));
        Ok(other)
    })
    .unwrap();
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let (r, s) = (vec![Scalar::ONE; 4], vec![Scalar::ONE; 4]);
        let _ = done.send(
            prove_batch_across(&[first, second], circuits(4), &r, &s, &CancelToken::new())
                .map(|_| ()),
        );
    });
    let result = result
        .recv_timeout(Duration::from_secs(60))
        .expect("the batch hangs");
    assert!(
        matches!(&result, Err(Error::InvalidInput(m)) if m.contains("prover 1")),
        "{result:?}"
    );
}
