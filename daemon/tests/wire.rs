//! The daemon over the wire: a server on a loopback port, driven by a gRPC client generated
//! from the same `.proto`. The queue's behaviour runs against a backend whose jobs wait
//! for the test to let them finish; bad payloads run against the Filecoin backend itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use tonic::transport::Channel;
use wgpu_groth16::groth16::batch::prove_batch_across;
use wgpu_groth16::groth16::synthesis::synthesize;
use wgpu_groth16::groth16::{CancelToken, Prover, ProverConfig, ProverEngine, ProvingParameters};
use wgpu_groth16_daemon::backend::{Comparison, FilecoinBackend};
use wgpu_groth16_daemon::pb::await_proof_response::Status;
use wgpu_groth16_daemon::pb::proving_engine_client::ProvingEngineClient;
use wgpu_groth16_daemon::pb::*;
use wgpu_groth16_daemon::peers::{Network, Peers};
use wgpu_groth16_daemon::scheduler::{Backend, Lane, LoadedSrs, Proved};
use wgpu_groth16_daemon::{load, soak};
use wgpu_groth16_filecoin::job::proofs_to_bytes;
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::post::PostJob;
use wgpu_groth16_filecoin::update::UpdateJob;
use wgpu_groth16_filecoin::{ProofJob, SealCommit};

#[path = "../../filecoin/tests/common/mod.rs"]
mod common;
#[path = "../../filecoin/tests/common/hostile.rs"]
mod hostile;

/// Proves by returning the payload reversed, once the test opens the gate, and reports
/// `compute` as its GPU time; records the order jobs started in. A job whose payload is
/// [`SLOW`] first runs `slow`'s batch.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
    started: Mutex<Vec<String>>,
    compute: Duration,
    slow: Option<SlowBatch>,
}

const SLOW: &[u8] = b"slow";

/// A circuit of one constraint whose synthesis takes `delay`, and counts itself in `done`.
#[derive(Clone)]
struct Slow {
    delay: Duration,
    done: Arc<AtomicUsize>,
}

impl Circuit<Scalar> for Slow {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        std::thread::sleep(self.delay);
        let x = cs.alloc(|| "x", || Ok(Scalar::ONE))?;
        cs.enforce(|| "x * x = x", |lc| lc + x, |lc| lc + x, |lc| lc + x);
        self.done.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A batch of [`Slow`] circuits through the batch pipeline on the CPU, with the job's
/// cancel token; the circuits synthesized, and how each batch ended ("proved", or the
/// error).
struct SlowBatch {
    prover: Prover,
    circuit: Slow,
    circuits: usize,
    ended: Mutex<Vec<String>>,
}

impl SlowBatch {
    fn new(circuits: usize, delay: Duration) -> Self {
        let circuit = Slow {
            delay,
            done: Arc::default(),
        };
        let shape = synthesize(Slow {
            delay: Duration::ZERO,
            done: Arc::default(),
        })
        .unwrap()
        .shape();
        let params = ProvingParameters::random_for_shape(&shape, 1);
        SlowBatch {
            prover: Prover::with_engine(params, Arc::new(ProverEngine::cpu())).unwrap(),
            circuit,
            circuits,
            ended: Mutex::default(),
        }
    }

    fn synthesized(&self) -> usize {
        self.circuit.done.load(Ordering::SeqCst)
    }

    fn prove(&self, cancel: &CancelToken) -> Result<(), String> {
        let circuits = vec![self.circuit.clone(); self.circuits];
        let ones = vec![Scalar::ONE; self.circuits];
        let provers = std::slice::from_ref(&self.prover);
        let result = prove_batch_across(provers, circuits, &ones, &ones, cancel);
        let ended = result
            .as_ref()
            .map_or_else(|e| e.to_string(), |_| "proved".into());
        self.ended.lock().unwrap().push(ended);
        result.map(drop).map_err(|e| e.to_string())
    }
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.changed.notify_all();
    }

    fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }
}

impl Backend for Gate {
    fn lanes(&self) -> Vec<Lane> {
        vec![Lane {
            name: "gate".into(),
        }]
    }

    fn prove(
        &self,
        request: &SubmitProofRequest,
        _lane: usize,
        cancel: &CancelToken,
    ) -> Result<Proved, String> {
        self.started
            .lock()
            .unwrap()
            .push(request.request_id.clone());
        let mut open = self.open.lock().unwrap();
        while !*open {
            if cancel.is_cancelled() {
                return Err("cancelled".into());
            }
            open = self
                .changed
                .wait_timeout(open, Duration::from_millis(10))
                .unwrap()
                .0;
        }
        drop(open);
        if let (SLOW, Some(slow)) = (request.vanilla_proof.as_slice(), &self.slow) {
            slow.prove(cancel)?;
        }
        let mut proof = request.vanilla_proof.clone();
        proof.reverse();
        Ok(Proved {
            proof,
            gpu_compute: self.compute,
            ..Default::default()
        })
    }

    fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), String> {
        Err(format!("no parameters for {circuit_id}"))
    }

    fn evict(&self, _: &str) -> Result<(bool, u64), String> {
        Ok((false, 0))
    }

    fn loaded(&self) -> Vec<LoadedSrs> {
        Vec::new()
    }
}

/// A daemon on a loopback port and a client connected to it; the daemon stops when the
/// runtime does.
fn start(
    backend: Arc<dyn Backend>,
    max_pending: usize,
) -> (tokio::runtime::Runtime, ProvingEngineClient<Channel>) {
    let (runtime, client, _, _) = start_stoppable(backend, max_pending);
    (runtime, client)
}

/// What stops a daemon (as SIGTERM does), and the server's task.
type Stop = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
);

/// [`start`], the daemon's address, and what stops it.
fn start_stoppable(
    backend: Arc<dyn Backend>,
    max_pending: usize,
) -> (
    tokio::runtime::Runtime,
    ProvingEngineClient<Channel>,
    String,
    Stop,
) {
    let (runtime, address, stop) = serve_on_loopback(backend, max_pending, Peers::any());
    let client = runtime
        .block_on(ProvingEngineClient::connect(address.clone()))
        .unwrap();
    (runtime, client, address, stop)
}

/// A daemon on a loopback port serving `peers`: its address and what stops it.
fn serve_on_loopback(
    backend: Arc<dyn Backend>,
    max_pending: usize,
    peers: Peers,
) -> (tokio::runtime::Runtime, String, Stop) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (address, server) = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(wgpu_groth16_daemon::serve(
            listener,
            peers,
            backend,
            max_pending,
            // A dropped sender never stops it.
            async move {
                if stopped.await.is_err() {
                    std::future::pending::<()>().await;
                }
            },
        ));
        (address, server)
    });
    (runtime, address, (stop, server))
}

/// `--allow`: a peer outside the allowed networks is closed as it connects (no call reaches
/// the queue), one inside is served.
#[test]
fn only_allowed_peers_are_served() {
    let network = |s: &str| s.parse::<Network>().unwrap();
    let gate = Arc::new(Gate::default());
    gate.open();
    let elsewhere = Peers::only(vec![network("10.0.0.0/8"), network("::1")]);
    let (runtime, address, _stop) = serve_on_loopback(gate.clone(), 4, elsewhere);
    runtime.block_on(async {
        let refused = match ProvingEngineClient::connect(address.clone()).await {
            Err(e) => e.to_string(),
            Ok(mut client) => {
                let err = client
                    .submit_proof(job("outside", Priority::Normal, b"no"))
                    .await
                    .unwrap_err();
                // The connection closed under the call: a transport error (cancelled, broken
                // pipe, reset: whichever the race gives), no reply from the daemon.
                let transport = std::error::Error::source(&err)
                    .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some());
                assert!(transport, "{err}");
                err.to_string()
            }
        };
        assert!(!refused.is_empty());
    });
    assert!(gate.started().is_empty(), "no job from a refused peer");
    let loopback = Peers::only(vec![network("127.0.0.0/8")]);
    let (runtime, address, _stop) = serve_on_loopback(gate.clone(), 4, loopback);
    runtime.block_on(async {
        let mut client = ProvingEngineClient::connect(address).await.unwrap();
        let inside = submit(&mut client, job("inside", Priority::Normal, b"yes")).await;
        let done = wait(&mut client, &inside.job_id, 0).await;
        assert_eq!(done.proof, b"sey");
    });
}

/// A request over the message limit is refused with a status from the length its frame
/// declares, and the daemon goes on serving.
#[test]
fn a_request_over_the_limit_is_refused_and_the_daemon_goes_on() {
    let gate = Arc::new(Gate::default());
    gate.open();
    let (runtime, mut client) = start(gate.clone(), 4);
    runtime.block_on(async {
        let mut unlimited = client.clone().max_encoding_message_size(usize::MAX);
        let over = vec![0u8; wgpu_groth16_daemon::MAX_MESSAGE_BYTES + 1];
        let err = unlimited
            .submit_proof(job("over", Priority::Normal, &over))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange, "{err}");
        let next = submit(&mut client, job("next", Priority::Normal, b"ok")).await;
        assert_eq!(wait(&mut client, &next.job_id, 0).await.proof, b"ko");
    });
    assert_eq!(gate.started(), ["next"]);
}

/// Stopping the daemon cancels the pending jobs (whose awaits return at once) and lets the
/// running one finish with its proof.
#[test]
fn a_stop_cancels_pending_jobs_and_finishes_the_running_one() {
    let gate = Arc::new(Gate::default());
    let (runtime, mut client, _, (stop, server)) = start_stoppable(gate.clone(), 4);
    runtime.block_on(async {
        let running = hold_the_lane(&mut client, &gate, "running", b"run").await;
        let pending = submit(&mut client, job("pending", Priority::Normal, b"wait")).await;
        let awaiting = {
            let mut client = client.clone();
            let running = running.job_id.clone();
            tokio::spawn(async move { wait(&mut client, &running, 0).await })
        };
        let awaiting_pending = {
            let mut client = client.clone();
            tokio::spawn(async move { wait(&mut client, &pending.job_id, 0).await })
        };
        // Both awaits in flight before the stop: a stopping server takes no new calls.
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.send(()).unwrap();
        let cancelled = awaiting_pending.await.unwrap();
        assert_eq!(cancelled.status, Status::Cancelled as i32);
        gate.open();
        let done = awaiting.await.unwrap();
        assert_eq!(
            done.status,
            Status::Completed as i32,
            "{}",
            done.error_message
        );
        assert_eq!(done.proof, b"nur");
        server.await.unwrap().unwrap();
        assert_eq!(gate.started(), ["running"]);
    });
}

fn job(request_id: &str, priority: Priority, payload: &[u8]) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: ProofKind::PorepSealCommit as i32,
        priority: priority as i32,
        vanilla_proof: payload.to_vec(),
        ..Default::default()
    }
}

async fn submit(
    client: &mut ProvingEngineClient<Channel>,
    request: SubmitProofRequest,
) -> SubmitProofResponse {
    client.submit_proof(request).await.unwrap().into_inner()
}

/// Submits a job that will start at once and waits until it has: it holds the gate's lane.
async fn hold_the_lane(
    client: &mut ProvingEngineClient<Channel>,
    gate: &Gate,
    request_id: &str,
    payload: &[u8],
) -> SubmitProofResponse {
    let held = submit(client, job(request_id, Priority::Normal, payload)).await;
    while gate.started().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    held
}

/// Submits and awaits in one call.
async fn prove(
    client: &mut ProvingEngineClient<Channel>,
    request: SubmitProofRequest,
) -> AwaitProofResponse {
    client
        .prove(ProveRequest {
            submit: Some(request),
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
}

/// The most jobs one loaded parameter set counted at once, polled until `answered` jobs have
/// completed or failed.
async fn most_jobs_on_one_set_until(
    client: &mut ProvingEngineClient<Channel>,
    answered: u64,
) -> u32 {
    let mut most = 0;
    loop {
        let status = get_status(client).await;
        let counted = status.loaded_srs.iter().map(|s| s.ref_count).max();
        most = most.max(counted.unwrap_or(0));
        if status.total_proofs_completed + status.total_proofs_failed == answered {
            return most;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn get_status(client: &mut ProvingEngineClient<Channel>) -> GetStatusResponse {
    client
        .get_status(GetStatusRequest {})
        .await
        .unwrap()
        .into_inner()
}

async fn wait(
    client: &mut ProvingEngineClient<Channel>,
    job_id: &str,
    ms: u64,
) -> AwaitProofResponse {
    client
        .await_proof(AwaitProofRequest {
            job_id: job_id.into(),
            timeout_ms: ms,
        })
        .await
        .unwrap()
        .into_inner()
}

#[test]
fn the_queue_keeps_its_promises_over_the_wire() {
    let gate = Arc::new(Gate::default());
    let (runtime, mut client) = start(gate.clone(), 3);
    runtime.block_on(async {
        // The first job runs and waits at the gate; the next ones queue.
        let first = hold_the_lane(&mut client, &gate, "first", b"1").await;
        let low = submit(&mut client, job("low", Priority::Low, b"low")).await;
        let normal = submit(&mut client, job("normal", Priority::Normal, b"normal")).await;
        let critical = submit(
            &mut client,
            job("critical", Priority::Critical, b"critical"),
        )
        .await;
        // Each was next when it came (LOW alone, NORMAL ahead of LOW, CRITICAL ahead of
        // both); asked again under the same request id, the same job tells its place now.
        let positions = |jobs: [&SubmitProofResponse; 3]| jobs.map(|j| j.queue_position);
        assert_eq!(positions([&low, &normal, &critical]), [0, 0, 0]);
        let mut now = Vec::new();
        for id in ["low", "normal", "critical"] {
            now.push(submit(&mut client, job(id, Priority::Low, b"other")).await);
        }
        let ids = |jobs: [&SubmitProofResponse; 3]| jobs.map(|j| j.job_id.clone());
        assert_eq!(
            ids([&now[0], &now[1], &now[2]]),
            ids([&low, &normal, &critical]),
            "the same request id is the same job"
        );
        assert_eq!(
            positions([&now[0], &now[1], &now[2]]),
            [2, 1, 0],
            "CRITICAL first, LOW last"
        );

        // A fourth pending job is refused with a gRPC status, not queued.
        let full = client
            .submit_proof(job("fourth", Priority::High, b"4"))
            .await
            .unwrap_err();
        assert_eq!(full.code(), tonic::Code::ResourceExhausted, "{full}");

        // An await that times out says so, and the job goes on.
        let timed_out = wait(&mut client, &first.job_id, 30).await;
        assert_eq!(timed_out.status, Status::Timeout as i32);

        // Cancelling a pending job and the running one.
        let cancel = |id: &str| CancelProofRequest { job_id: id.into() };
        let pending = client
            .cancel_proof(cancel(&low.job_id))
            .await
            .unwrap()
            .into_inner();
        assert!(!pending.was_running);
        let running = client
            .cancel_proof(cancel(&first.job_id))
            .await
            .unwrap()
            .into_inner();
        assert!(running.was_running);
        assert_eq!(
            wait(&mut client, &low.job_id, 0).await.status,
            Status::Cancelled as i32
        );
        assert_eq!(
            wait(&mut client, &first.job_id, 0).await.status,
            Status::Cancelled as i32
        );
        let unknown = client.cancel_proof(cancel("job-none")).await.unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::NotFound);
        assert_eq!(
            wait(&mut client, "job-none", 10).await.status,
            Status::Unknown as i32
        );

        // Open the gate: CRITICAL, then NORMAL; each proof is its payload reversed.
        gate.open();
        let done = wait(&mut client, &critical.job_id, 0).await;
        assert_eq!(
            done.status,
            Status::Completed as i32,
            "{}",
            done.error_message
        );
        assert_eq!(done.proof, b"lacitirc");
        let done = wait(&mut client, &normal.job_id, 0).await;
        assert_eq!(done.proof, b"lamron");
        assert!(done.total_ms >= done.queue_wait_ms);
        assert_eq!(gate.started(), ["first", "critical", "normal"]);

        // Prove: submit and await in one call.
        let proved = prove(&mut client, job("direct", Priority::High, b"abc")).await;
        assert_eq!(proved.proof, b"cba");

        let status = get_status(&mut client).await;
        assert_eq!(status.total_proofs_completed, 3);
        assert_eq!(status.gpus.len(), 1);
        assert_eq!(status.gpus[0].name, "gate");
        // What the daemon does not know is left out, not zero.
        let gpu = &status.gpus[0];
        assert_eq!(
            (
                gpu.vram_total_bytes,
                gpu.vram_free_bytes,
                gpu.vram_used_bytes
            ),
            (None, None, None)
        );
        assert_eq!(status.pinned_memory_bytes, None);
        let metrics = client
            .get_metrics(GetMetricsRequest {})
            .await
            .unwrap()
            .into_inner()
            .prometheus_text;
        assert!(
            metrics.contains("wgpu_groth16_proofs_completed_total 3"),
            "{metrics}"
        );
        assert!(
            metrics.contains("wgpu_groth16_proofs_cancelled_total 2"),
            "{metrics}"
        );
        assert!(
            metrics.contains("wgpu_groth16_submissions_refused_total 1"),
            "{metrics}"
        );

        let preload = client
            .preload_srs(PreloadSrsRequest {
                circuit_id: "porep-32g".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(preload.code(), tonic::Code::FailedPrecondition);
    });
}

/// Cancelling a running job stops its batch between circuits: the lane takes the next job
/// while the cancelled batch has synthesized less than half its circuits (so before it
/// would have finished), and the batch ends with the prover's cancellation error.
#[test]
fn cancelling_a_running_job_frees_its_lane_promptly() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let circuits = 16 * threads;
    let gate = Arc::new(Gate {
        slow: Some(SlowBatch::new(circuits, Duration::from_millis(50))),
        ..Default::default()
    });
    gate.open();
    let slow = gate.slow.as_ref().unwrap();
    let (runtime, mut client) = start(gate.clone(), 4);
    runtime.block_on(async {
        // Not cancelled, a slow job synthesizes every circuit of its batch.
        let whole = prove(&mut client, job("whole", Priority::Normal, SLOW)).await;
        assert_eq!(
            whole.status,
            Status::Completed as i32,
            "{}",
            whole.error_message
        );
        assert_eq!(slow.synthesized(), circuits);

        // Cancelled a quarter of the way through its batch.
        let cancelled = submit(&mut client, job("cancelled", Priority::Normal, SLOW)).await;
        while slow.synthesized() < circuits + circuits / 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let cancel = client
            .cancel_proof(CancelProofRequest {
                job_id: cancelled.job_id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(cancel.was_running);
        // One lane: the next job runs once the cancelled one has left it.
        let next = prove(&mut client, job("next", Priority::Normal, b"next")).await;
        assert_eq!(next.proof, b"txen");
        let before_next = slow.synthesized() - circuits;
        assert!(
            before_next < circuits / 2,
            "the cancelled batch synthesized {before_next} of {circuits} circuits"
        );
        assert_eq!(
            wait(&mut client, &cancelled.job_id, 0).await.status,
            Status::Cancelled as i32
        );
        assert_eq!(
            *slow.ended.lock().unwrap(),
            [
                "proved".to_string(),
                wgpu_groth16::Error::Cancelled.to_string()
            ]
        );
    });
}

/// The load generator over the wire: every job of every client is counted once, under a
/// request id of its own run (a second run against the same daemon makes new jobs), the GPU
/// time it sums is the backend's, and its percentiles are in order within the wall time.
#[test]
fn the_load_generator_counts_each_job_of_each_run_once() {
    let compute = Duration::from_millis(3);
    let gate = Arc::new(Gate {
        compute,
        ..Default::default()
    });
    gate.open();
    let (runtime, mut client, address, _) = start_stoppable(gate.clone(), 8);
    runtime.block_on(async {
        let template = job("", Priority::Normal, b"load");
        let first = load::run(&address, template.clone(), 4, 10).await.unwrap();
        let second = load::run(&address, template, 2, 5).await.unwrap();
        for (report, jobs, clients) in [(&first, 10, 4), (&second, 5, 2)] {
            assert_eq!(
                (report.completed(), report.failures.len()),
                (jobs, 0),
                "{report}"
            );
            assert_eq!((report.clients, report.lanes), (clients, 1));
            assert_eq!(report.gpu_compute, compute * jobs as u32);
            let percentiles = [50.0, 90.0, 99.0].map(|p| report.latency_percentile(p).unwrap());
            assert!(percentiles.is_sorted(), "{report}");
            assert_eq!(report.latencies.last(), report.latencies.iter().max());
            assert!(report.latencies.iter().all(|l| *l <= report.wall));
            let rate = jobs as f64 / report.wall.as_secs_f64();
            assert!((report.proofs_per_second() - rate).abs() < 1e-9);
        }
        let started = gate.started();
        let distinct: std::collections::HashSet<_> = started.iter().collect();
        assert_eq!((started.len(), distinct.len()), (15, 15), "{started:?}");
        let status = get_status(&mut client).await;
        assert_eq!(status.total_proofs_completed, 15);

        let nobody = load::run("http://127.0.0.1:1", job("", Priority::Normal, b""), 1, 1)
            .await
            .unwrap_err();
        assert!(nobody.contains("cannot reach"), "{nobody}");
    });
}

/// What the Filecoin backend cannot prove (malformed payloads, a sector size without
/// parameters) fails that job with a message, and the daemon goes on serving.
#[test]
fn bad_jobs_fail_alone() {
    let backend = Arc::new(FilecoinBackend::new(vec![Arc::new(ProverEngine::cpu())]));
    let (runtime, mut client) = start(backend, 8);
    runtime.block_on(async {
        let not_json = prove(&mut client, job("a", Priority::Normal, b"{ not json")).await;
        assert_eq!(not_json.status, Status::Failed as i32);
        assert!(
            not_json.error_message.contains("vanilla_proof"),
            "{}",
            not_json.error_message
        );

        let curio = br#"{"SectorNum": 7, "Phase1Out": "not base64!", "SectorSize": 2048}"#;
        let bad_base64 = prove(&mut client, job("b", Priority::Normal, curio)).await;
        assert_eq!(bad_base64.status, Status::Failed as i32);
        assert!(!bad_base64.error_message.is_empty());

        // A malformed payload of every other kind, each failing with what is wrong.
        let of_kind = |id: &str, kind: ProofKind, registered_proof: u64| SubmitProofRequest {
            proof_kind: kind as i32,
            registered_proof,
            randomness: vec![1; 32],
            vanilla_proofs: vec![b"junk".to_vec()],
            comm_r_old: vec![2; 32],
            comm_r_new: vec![3; 32],
            comm_d_new: vec![4; 32],
            ..job(id, Priority::Critical, b"")
        };
        let winning = of_kind("c", ProofKind::WinningPost, 0);
        let window = SubmitProofRequest {
            randomness: vec![1; 31],
            ..of_kind("d", ProofKind::WindowPostPartition, 10)
        };
        let snap = SubmitProofRequest {
            comm_r_new: vec![3; 8],
            ..of_kind("e", ProofKind::SnapDealsUpdate, 0)
        };
        let unspecified = of_kind("f", ProofKind::Unspecified, 0);
        // A real C2 whose sector size has no parameters in the cache.
        let no_parameters = c2_request("g", common::MINER_ID);
        // Random vanilla proofs of the real shape, marked benchmark-only.
        let benchmark = benchmark_request("h");
        for (request, why) in [
            (winning, "not a FallbackPoStSectorProof"),
            (window, "randomness must be 32 bytes, not 31"),
            (snap, "comm_r_new must be 32 bytes, not 8"),
            (unspecified, "unknown proof kind 0"),
            (
                no_parameters,
                "Groth16 parameters for StackedDrg2KiBV1_1 (2 KiB) not found",
            ),
            (
                benchmark,
                "a daemon takes them with `serve --benchmark-jobs`",
            ),
        ] {
            let failed = prove(&mut client, request).await;
            assert_eq!(failed.status, Status::Failed as i32);
            assert!(
                failed.error_message.contains(why),
                "{}",
                failed.error_message
            );
        }

        let unknown_circuit = client
            .evict_srs(EvictSrsRequest {
                circuit_id: "porep-1t".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(unknown_circuit.code(), tonic::Code::FailedPrecondition);

        let status = get_status(&mut client).await;
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (0, 8)
        );
        assert!(status.loaded_srs.is_empty());
    });
}

/// What a comparing daemon proves `job` with (random-point parameters of its shape from
/// `seed`, resident as `circuit_id`; r and s from `seed`), and bellperson's proof bytes of
/// `job` with the same.
/// Requests with random values in every field the daemon reads (kind, registered proof,
/// sector size and number, priority, miner, partition, randomness, commitments, vanilla
/// bytes: random, or a real C1 output with bits flipped) are each answered once, with an
/// error saying what is wrong or a clear refusal of the call, and the daemon goes on serving.
#[test]
fn requests_with_random_fields_are_each_answered_once() {
    use rand_core::RngCore;
    let backend = Arc::new(FilecoinBackend::new(vec![Arc::new(ProverEngine::cpu())]));
    let (runtime, mut client) = start(backend, 8);
    let real_c1 = c2_payload();
    runtime.block_on(async {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(43);
        let bytes = |most: u32, rng: &mut rand_chacha::ChaCha8Rng| -> Vec<u8> {
            (0..rng.next_u32() % most)
                .map(|_| rng.next_u32() as u8)
                .collect()
        };
        let (mut failed, mut refused) = (0u64, 0);
        for i in 0..200 {
            let vanilla_proof = match i % 2 {
                0 => bytes(4096, &mut rng),
                _ => {
                    let mut c1 = real_c1.clone();
                    for _ in 0..1 + rng.next_u32() % 8 {
                        let at = rng.next_u32() as usize % c1.len();
                        c1[at] ^= 1 << (rng.next_u32() % 8);
                    }
                    c1
                }
            };
            let request = SubmitProofRequest {
                request_id: format!("random-{i}"),
                proof_kind: (rng.next_u32() % 8) as i32 - 1,
                sector_size: [0, 2048, 8 << 20, 32 << 30, rng.next_u64()][i % 5],
                registered_proof: rng.next_u64() % 24,
                priority: (rng.next_u32() % 6) as i32 - 1,
                vanilla_proof,
                vanilla_proofs: (0..rng.next_u32() % 3)
                    .map(|_| bytes(2048, &mut rng))
                    .collect(),
                sector_number: rng.next_u64() % 100,
                miner_id: rng.next_u64() % 5000,
                randomness: bytes(40, &mut rng),
                partition_index: rng.next_u32() % 4,
                comm_r_old: bytes(40, &mut rng),
                comm_r_new: bytes(40, &mut rng),
                comm_d_new: bytes(40, &mut rng),
            };
            match client
                .prove(ProveRequest {
                    submit: Some(request),
                })
                .await
            {
                Ok(response) => {
                    let result = response.into_inner().result.expect("a result");
                    assert_eq!(result.status, Status::Failed as i32, "request {i}");
                    assert!(!result.error_message.is_empty(), "request {i}");
                    failed += 1;
                }
                Err(status) => {
                    assert!(!status.message().is_empty(), "request {i}");
                    refused += 1;
                }
            }
        }
        let status = get_status(&mut client).await;
        assert_eq!(status.total_proofs_completed, 0);
        assert_eq!(
            status.total_proofs_failed, failed,
            "{refused} refused at the call"
        );
    });
}

fn comparison_for(job: &impl ProofJob, circuit_id: &str, seed: u64) -> (Comparison, Vec<u8>) {
    let params = common::params_for(job, seed);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let partitions = job.partitions();
    let theirs = job
        .prove_with_bellperson(
            &params.to_bellperson(),
            &vec![r; partitions],
            &vec![s; partitions],
        )
        .unwrap();
    let comparison = Comparison {
        circuit_id: circuit_id.into(),
        params,
        r,
        s,
        verify: false,
    };
    (comparison, proofs_to_bytes(&theirs).unwrap())
}

/// A GPU engine of its own for a test (a device of its own): lavapipe in CI, where its
/// absence fails the test.
fn gpu_engine() -> Arc<ProverEngine> {
    let config = ProverConfig {
        backend: wgpu_groth16::groth16::Backend::Gpu(Default::default()),
        ..Default::default()
    };
    ProverEngine::open(&config).expect("a GPU adapter (lavapipe in CI)")
}

/// Curio's wrapper around the shared sector's C1 output.
fn c2_payload() -> Vec<u8> {
    use base64::Engine as _;

    let phase1 = serde_json::to_vec(&common::sealed().phase1).unwrap();
    serde_json::to_vec(&serde_json::json!({
        "SectorNum": common::SECTOR_ID,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&phase1),
        "SectorSize": 2048,
    }))
    .unwrap()
}

/// A PoRep C2 request of the shared sector for `miner_id`.
/// A C2 request of a benchmark-only C1 output (`seal --benchmark-only`) for the shared
/// sector's proof, miner and number.
fn benchmark_request(request_id: &str) -> SubmitProofRequest {
    let sealed = common::sealed();
    let benchmark = wgpu_groth16_filecoin::c1::C1Output {
        phase1: wgpu_groth16_filecoin::sealing::benchmark_c1(
            sealed.phase1.registered_proof,
            sealed.prover_id,
            sealed.sector_id,
            1,
        )
        .unwrap(),
        wrapper: None,
        benchmark_only: true,
    };
    SubmitProofRequest {
        vanilla_proof: benchmark.phase1_json().unwrap(),
        ..c2_request(request_id, common::MINER_ID)
    }
}

fn c2_request(request_id: &str, miner_id: u64) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        priority: Priority::Normal as i32,
        vanilla_proof: c2_payload(),
        sector_number: common::SECTOR_ID,
        miner_id,
        ..Default::default()
    }
}

fn shared_commit() -> SealCommit {
    let sealed = common::sealed();
    SealCommit::new(sealed.phase1.clone(), sealed.prover_id, sealed.sector_id).unwrap()
}

/// A real 2 KiB PoRep C2 (a sector sealed in the test, Curio's wrapper around its C1 output)
/// sent over the wire three times, on an engine with two lanes: every proof equals
/// bellperson's on the same circuits, random-point parameters and r, s; the parameters load
/// for the first only, once for both lanes; two jobs prove at once on them, and their
/// parameter set counts both while they run; a job for another miner fails alone; a
/// cancelled job stops in the batch pipeline; eviction frees them. On the CPU engine: the
/// GPU's C2 equals bellperson's in filecoin/tests/porep.rs, and the daemon's GPU lanes are
/// [`winning_posts_on_a_gpu_share_its_parameters_and_report_its_pool`]'s (three C2s on
/// lavapipe took most of CI's time).
#[test]
fn a_2kib_c2_over_the_wire_equals_bellperson() {
    let (comparison, expected) = comparison_for(&shared_commit(), "porep-2k", 21);
    let params_bytes = comparison.params.bases_bytes();
    let backend = Arc::new(
        FilecoinBackend::comparing(cpu_engines(1), comparison)
            .with_jobs_per_engine(2)
            .with_benchmark_jobs(true),
    );
    let (runtime, mut client) = start(backend.clone(), 4);
    let request = c2_request;
    runtime.block_on(async {
        let first = prove(&mut client, request("c2-1", common::MINER_ID)).await;
        assert_eq!(
            first.status,
            Status::Completed as i32,
            "{}",
            first.error_message
        );
        assert!(
            first.proof == expected,
            "our proof differs from bellperson's"
        );
        assert!(first.total_ms >= first.synthesis_ms.max(first.srs_load_ms));
        // Two jobs at once on the engine's two lanes, with one copy of the parameters that
        // counts both while they run; the second a benchmark-only C1 output (`serve
        // --benchmark-jobs`), proved without its checks.
        let second = submit(&mut client, request("c2-2", common::MINER_ID)).await;
        let third = submit(&mut client, benchmark_request("c2-3")).await;
        let most_in_flight = most_jobs_on_one_set_until(&mut client, 3).await;
        assert_eq!(most_in_flight, 2, "the two jobs did not prove at once");
        let done = wait(&mut client, &second.job_id, 0).await;
        assert!(done.proof == expected);
        assert_eq!(done.srs_load_ms, 0, "the parameters stayed loaded");
        let benchmark = wait(&mut client, &third.job_id, 0).await;
        assert_eq!(
            benchmark.status,
            Status::Completed as i32,
            "{}",
            benchmark.error_message
        );
        assert_eq!(benchmark.proof.len(), 192);
        assert!(
            benchmark.proof != expected,
            "the benchmark's witness is another"
        );

        let other_miner = prove(&mut client, request("c2-4", common::MINER_ID + 1)).await;
        assert_eq!(other_miner.status, Status::Failed as i32);
        assert!(
            other_miner.error_message.contains("prover id"),
            "{}",
            other_miner.error_message
        );

        let status = get_status(&mut client).await;
        let loaded: Vec<_> = status
            .loaded_srs
            .iter()
            .map(|s| s.circuit_id.as_str())
            .collect();
        assert_eq!(loaded, ["porep-2k"]);
        let srs = &status.loaded_srs[0];
        assert_eq!((srs.size_bytes, srs.ref_count), (params_bytes, 0));
        assert_eq!(status.gpus.len(), 2, "two lanes on the one engine");
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (3, 1)
        );

        // A job's cancel token reaches the batch pipeline through the Filecoin proving.
        let cancel = CancelToken::new();
        cancel.cancel();
        let stopped = backend
            .prove(&request("c2-5", common::MINER_ID), 0, &cancel)
            .unwrap_err();
        assert_eq!(stopped, wgpu_groth16::Error::Cancelled.to_string());
        let evicted = client
            .evict_srs(EvictSrsRequest {
                circuit_id: "porep-2k".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(evicted.was_loaded);
        let status = get_status(&mut client).await;
        assert!(status.loaded_srs.is_empty());
    });
}

/// A C2 whose proof fails filecoin-proofs' `verify_seal` (the verifying key in the
/// parameter cache is not of the parameters that proved it) fails its job with that
/// message, and the lane goes on to the next job.
#[test]
fn a_proof_that_fails_verify_seal_fails_its_job_alone() {
    // Random-point parameters are no setup's: their own verifying key refuses their proofs
    // (no bellperson proof to compare with: the job fails).
    let params = common::params_for(&shared_commit(), 51);
    let vk_path = ParamsFiles::seal(common::PROOF).unwrap().vk;
    let mut vk = Vec::new();
    params.vk.write(&mut vk).unwrap();
    std::fs::write(&vk_path, vk).unwrap();
    let comparison = Comparison {
        circuit_id: "porep-2k".into(),
        params,
        r: Scalar::ONE,
        s: Scalar::ONE,
        verify: true,
    };
    let backend = FilecoinBackend::comparing(vec![Arc::new(ProverEngine::cpu())], comparison);
    let (runtime, mut client) = start(Arc::new(backend), 4);
    runtime.block_on(async {
        let refused = prove(&mut client, c2_request("refused", common::MINER_ID)).await;
        assert_eq!(refused.status, Status::Failed as i32);
        assert!(
            refused
                .error_message
                .contains("fails filecoin-proofs' verify_seal"),
            "{}",
            refused.error_message
        );
        assert!(refused.proof.is_empty(), "no proof comes with a failure");
        let next = prove(&mut client, job("next", Priority::Normal, b"[]")).await;
        assert_eq!(next.status, Status::Failed as i32);
        assert!(next.error_message.contains("vanilla_proof"));
        let status = get_status(&mut client).await;
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (0, 2)
        );
        assert_eq!(status.loaded_srs.len(), 1, "the parameters stay loaded");
    });
}

/// `request` sent to a daemon comparing with `job` (see [`comparison_for`]) on `engines`: the
/// proof over the wire equals bellperson's and its parameters are resident as `circuit_id`.
/// The runtime, the client and bellperson's bytes, for more.
fn assert_over_the_wire_equals_bellperson(
    job: &impl ProofJob,
    circuit_id: &str,
    seed: u64,
    engines: Vec<Arc<ProverEngine>>,
    request: SubmitProofRequest,
) -> (
    tokio::runtime::Runtime,
    ProvingEngineClient<Channel>,
    Vec<u8>,
) {
    let (comparison, expected) = comparison_for(job, circuit_id, seed);
    let backend = FilecoinBackend::comparing(engines, comparison);
    let (runtime, mut client) = start(Arc::new(backend), 4);
    runtime.block_on(async {
        let done = prove(&mut client, request).await;
        assert_eq!(
            done.status,
            Status::Completed as i32,
            "{}",
            done.error_message
        );
        assert!(
            done.proof == expected,
            "our proof differs from bellperson's"
        );
        let loaded = get_status(&mut client).await.loaded_srs;
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].circuit_id, circuit_id);
    });
    (runtime, client, expected)
}

fn cpu_engines(count: usize) -> Vec<Arc<ProverEngine>> {
    (0..count).map(|_| Arc::new(ProverEngine::cpu())).collect()
}

/// A Winning PoSt of the shared 2 KiB sector for the challenge randomness of `seed`: the
/// job, and Curio's request for it.
struct Winning {
    post: PostJob,
    vanilla: Vec<Vec<u8>>,
    randomness: [u8; 32],
}

impl Winning {
    fn new(seed: u64) -> Self {
        let proof = filecoin_proofs_api::RegisteredPoStProof::StackedDrgWinning2KiBV1;
        let randomness = common::randomness(seed);
        let vanilla = common::post_vanilla(proof, &randomness);
        let post = PostJob::winning(
            proof,
            randomness,
            common::sealed().prover_id,
            vanilla.clone(),
        )
        .unwrap();
        Winning {
            post,
            vanilla,
            randomness,
        }
    }

    /// The request for it, naming `sector_size`-byte sectors.
    fn request(&self, request_id: &str, sector_size: u64) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: request_id.into(),
            proof_kind: ProofKind::WinningPost as i32,
            sector_size,
            // Curio's number of StackedDrgWinning2KiBV1.
            registered_proof: 0,
            priority: Priority::Critical as i32,
            vanilla_proofs: self.vanilla.clone(),
            miner_id: common::MINER_ID,
            randomness: self.randomness.to_vec(),
            ..Default::default()
        }
    }
}

/// A Winning PoSt of the 2 KiB sector (its vanilla proof made as Curio makes it) sent over the
/// wire to a daemon of two engines equals bellperson's; `PreloadSRS` puts a copy of the
/// parameters on each engine, and jobs on both lanes at once equal it too; a job naming
/// another sector size fails alone.
#[test]
fn a_2kib_winning_post_over_the_wire_equals_bellperson() {
    let winning = Winning::new(41);
    let request = |request_id: &str, sector_size: u64| winning.request(request_id, sector_size);
    let (runtime, mut client, expected) = assert_over_the_wire_equals_bellperson(
        &winning.post,
        "winning-2k",
        41,
        cpu_engines(2),
        request("winning", 2048),
    );
    runtime.block_on(async {
        let one_copy = get_status(&mut client).await.loaded_srs[0].size_bytes;
        let preloaded = client
            .preload_srs(PreloadSrsRequest {
                circuit_id: "winning-2k".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!preloaded.already_loaded, "the second engine had no copy");
        let status = get_status(&mut client).await;
        assert_eq!(status.gpus.len(), 2, "a lane on each engine");
        assert_eq!(status.loaded_srs[0].size_bytes, 2 * one_copy);
        let jobs = [
            submit(&mut client, request("lane-a", 2048)).await,
            submit(&mut client, request("lane-b", 2048)).await,
        ];
        for job in jobs {
            let done = wait(&mut client, &job.job_id, 0).await;
            assert!(done.proof == expected, "{}", done.error_message);
            assert_eq!(done.srs_load_ms, 0);
        }

        let other_size = prove(&mut client, request("other", 32 << 30)).await;
        assert_eq!(other_size.status, Status::Failed as i32);
        assert!(
            other_size.error_message.contains("sector_size"),
            "{}",
            other_size.error_message
        );
    });
}

/// Winning PoSts over the wire on a GPU (lavapipe in CI) with two lanes: the first equals
/// bellperson's, and its recorded matrices reached the engine's plan before the bases were
/// placed; two jobs at once prove on one copy of the parameters, which counts both while
/// they run, and equal it too; both lanes report their engine's pool.
#[test]
fn winning_posts_on_a_gpu_share_its_parameters_and_report_its_pool() {
    let winning = Winning::new(43);
    let (comparison, expected) = comparison_for(&winning.post, "winning-2k", 43);
    let backend = Arc::new(
        FilecoinBackend::comparing(vec![gpu_engine()], comparison).with_jobs_per_engine(2),
    );
    let (runtime, mut client) = start(backend.clone(), 4);
    runtime.block_on(async {
        let first = prove(&mut client, winning.request("first", 2048)).await;
        assert_completed(&first);
        assert!(
            first.proof == expected,
            "our proof differs from bellperson's"
        );
        let plan = backend.plan_of(0, "winning-2k").expect("a plan on the GPU");
        assert!(plan.contains("constraint matrices"), "{plan}");

        let jobs = [
            submit(&mut client, winning.request("lane-a", 2048)).await,
            submit(&mut client, winning.request("lane-b", 2048)).await,
        ];
        let most_in_flight = most_jobs_on_one_set_until(&mut client, 3).await;
        assert_eq!(most_in_flight, 2, "the two jobs did not prove at once");
        for job in jobs {
            let done = wait(&mut client, &job.job_id, 0).await;
            assert!(done.proof == expected, "{}", done.error_message);
            assert_eq!(done.srs_load_ms, 0, "the parameters stayed loaded");
        }

        let status = get_status(&mut client).await;
        assert_eq!(status.gpus.len(), 2, "two lanes on the one engine");
        let vram: Vec<_> = status
            .gpus
            .iter()
            .map(|lane| lane.vram_used_bytes)
            .collect();
        assert!(
            vram[0].is_some_and(|bytes| bytes > 0) && vram[0] == vram[1],
            "both lanes report their engine's pool: {vram:?}"
        );
    });
}

/// A daemon whose GPU is lost, without the CPU fallback (`serve --no-cpu-fallback`): the job
/// running then fails with the GPU's error, later jobs of that lane fail at once, and the
/// daemon goes on answering.
#[test]
fn a_lost_gpu_without_cpu_fallback_fails_its_jobs_alone() {
    let winning = Winning::new(47);
    // An engine on a device of its own: this test destroys it.
    let engine = gpu_engine();
    engine.set_cpu_fallback(false);
    let request = |request_id: &str| winning.request(request_id, 2048);
    let (runtime, mut client, _) = assert_over_the_wire_equals_bellperson(
        &winning.post,
        "winning-2k",
        47,
        vec![engine.clone()],
        request("before"),
    );
    engine.device().unwrap().device.destroy();
    runtime.block_on(async {
        let lost = prove(&mut client, request("lost")).await;
        assert_eq!(lost.status, Status::Failed as i32);
        assert!(!lost.error_message.is_empty());
        let next = prove(&mut client, request("next")).await;
        assert_eq!(next.status, Status::Failed as i32);
        assert!(
            next.error_message.contains("does not fall back to the CPU"),
            "{}",
            next.error_message
        );
        let status = get_status(&mut client).await;
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (1, 2)
        );
        assert!(
            status.gpus[0].name.ends_with("failed"),
            "{}",
            status.gpus[0].name
        );
    });
}

/// A Window PoSt partition of the 2 KiB sector over the wire equals bellperson's.
#[test]
fn a_2kib_window_post_partition_over_the_wire_equals_bellperson() {
    let proof = filecoin_proofs_api::RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
    let randomness = common::randomness(43);
    let vanilla = common::post_vanilla(proof, &randomness);
    let post = PostJob::window(
        proof,
        randomness,
        common::sealed().prover_id,
        vanilla.clone(),
        0,
    )
    .unwrap();
    let request = SubmitProofRequest {
        request_id: "window".into(),
        proof_kind: ProofKind::WindowPostPartition as i32,
        sector_size: 2048,
        // Curio's number of StackedDrgWindow2KiBV1_2 (the actor ABI's Window PoSt V1_1).
        registered_proof: 10,
        partition_index: 0,
        vanilla_proofs: vanilla,
        miner_id: common::MINER_ID,
        randomness: randomness.to_vec(),
        ..Default::default()
    };
    assert_over_the_wire_equals_bellperson(&post, "wpost-2k", 43, cpu_engines(1), request);
}

/// A SnapDeals update of the 2 KiB sector (vanilla partition proofs made as Curio makes them)
/// over the wire equals bellperson's.
#[test]
fn a_2kib_snapdeals_update_over_the_wire_equals_bellperson() {
    let update = common::snap_update(45);
    let job = UpdateJob::new(
        update.proof,
        update.vanilla.clone(),
        update.comm_r_old,
        update.comm_r_new,
        update.comm_d_new,
    )
    .unwrap();
    let request = SubmitProofRequest {
        request_id: "snap".into(),
        proof_kind: ProofKind::SnapDealsUpdate as i32,
        sector_size: 2048,
        // Curio's number of StackedDrg2KiBV1 updates.
        registered_proof: 0,
        vanilla_proofs: update.vanilla,
        comm_r_old: update.comm_r_old.to_vec(),
        comm_r_new: update.comm_r_new.to_vec(),
        comm_d_new: update.comm_d_new.to_vec(),
        ..Default::default()
    };
    assert_over_the_wire_equals_bellperson(&job, "snap-2k", 45, cpu_engines(1), request);
}

/// The daemon binary on a loopback port: it serves, a bad job fails alone, and SIGTERM ends
/// it with exit status 0, after which nothing listens there.
#[cfg(unix)]
#[test]
fn the_binary_serves_and_stops_on_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Instant;

    let mut daemon = Command::new(env!("CARGO_BIN_EXE_wgpu-groth16-daemon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--max-pending", "4"])
        .env("BELLMAN_NO_GPU", "1")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("the daemon starts");
    let mut lines = BufReader::new(daemon.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the daemon says where it listens")
            .unwrap();
        if let Some(rest) = line.split("grpc://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep reading, so that the daemon never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = ProvingEngineClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let failed = prove(&mut client, job("bad", Priority::Normal, b"[]")).await;
        assert_eq!(failed.status, Status::Failed as i32);
        let status = get_status(&mut client).await;
        assert_eq!(status.total_proofs_failed, 1);
        assert_eq!(status.gpus.len(), 1);
    });
    // The load subcommand against it: jobs that fail are counted and fail the run.
    let c1 = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(c1.path(), b"[]").unwrap();
    let loaded = Command::new(env!("CARGO_BIN_EXE_wgpu-groth16-daemon"))
        .args([
            "load",
            "--address",
            &format!("http://{addr}"),
            "--miner-id",
            "1000",
        ])
        .args(["--clients", "2", "--jobs", "3", "--c1"])
        .arg(c1.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&loaded.stdout),
        String::from_utf8_lossy(&loaded.stderr),
    );
    assert_eq!(loaded.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("completed: 0, failed: 3"), "{stdout}");
    assert!(stdout.contains("vanilla_proof"), "{stdout}");
    assert!(stderr.contains("3 of 3 jobs failed"), "{stderr}");
    runtime.block_on(async {
        let mut client = ProvingEngineClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let status = get_status(&mut client).await;
        assert_eq!(status.total_proofs_failed, 4);
    });
    // SAFETY: a plain signal to the child this test started.
    let sent = unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = daemon.try_wait().unwrap() {
            break exit;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the daemon did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit}");
    runtime.block_on(async {
        assert!(ProvingEngineClient::connect(format!("http://{addr}"))
            .await
            .is_err());
    });
}

/// Held by each test that puts Winning PoSt parameter files where the stack finds them:
/// one at a time.
static WINNING_FILES: Mutex<()> = Mutex::new(());

/// Writes random-point parameters of the Winning PoSt's shape (`seed`) where the stack
/// names its 2 KiB files, whole (a temporary renamed over the old file, as a download or a
/// copy tool replaces one): the daemon reads them as files from elsewhere.
fn write_winning_params(winning: &Winning, seed: u64) -> ParamsFiles {
    let files =
        ParamsFiles::post(filecoin_proofs_api::RegisteredPoStProof::StackedDrgWinning2KiBV1)
            .unwrap();
    let params = common::params_for(&winning.post, seed);
    let replace = |path: &std::path::Path, bytes: Vec<u8>| {
        let temporary = path.with_extension("replacing");
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, path).unwrap();
    };
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    replace(&files.params, bytes);
    let mut vk = Vec::new();
    params.vk.write(&mut vk).unwrap();
    replace(&files.vk, vk);
    files
}

/// A job's end: completed with a Winning PoSt's 192 bytes, or failed with a message.
fn assert_completed(done: &AwaitProofResponse) {
    assert_eq!(
        done.status,
        Status::Completed as i32,
        "{}",
        done.error_message
    );
    assert_eq!(done.proof.len(), 192);
}

fn assert_failed_with(done: &AwaitProofResponse, words: &[&str]) {
    assert_eq!(done.status, Status::Failed as i32, "completed");
    for word in words {
        assert!(
            done.error_message.contains(word),
            "{:?} lacks {word:?}",
            done.error_message
        );
    }
}

/// The parameter file of a loaded set cut short, then replaced, then overwritten in place
/// with junk, under a running daemon that reads it from disk: jobs keep the loaded copy until
/// `EvictSRS`; the next load of a cut or junk file fails that job alone, naming the file and
/// what is wrong; a good file replacing it serves the next job. Every job is answered once.
#[test]
fn parameter_files_cut_replaced_or_overwritten_under_a_running_daemon() {
    let _files = WINNING_FILES.lock().unwrap_or_else(|e| e.into_inner());
    let winning = Winning::new(53);
    let files = write_winning_params(&winning, 53);
    let backend = FilecoinBackend::new(cpu_engines(1));
    let (runtime, mut client) = start(Arc::new(backend), 8);
    let request = |id: &str| winning.request(id, 2048);
    let evict = |client: &mut ProvingEngineClient<Channel>| {
        let mut client = client.clone();
        async move {
            client
                .evict_srs(EvictSrsRequest {
                    circuit_id: "winning-2k".into(),
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    runtime.block_on(async {
        assert_completed(&prove(&mut client, request("first")).await);

        // Cut in the middle of its points: the loaded copy serves on.
        let whole = std::fs::read(&files.params).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&files.params)
            .unwrap()
            .set_len(whole.len() as u64 / 2)
            .unwrap();
        assert_completed(&prove(&mut client, request("loaded copy")).await);
        assert!(evict(&mut client).await.was_loaded);
        let cut = prove(&mut client, request("cut")).await;
        assert_failed_with(&cut, &["truncated", &files.params.display().to_string()]);

        // Replaced whole by a good file (other points): loaded and used.
        write_winning_params(&winning, 54);
        assert_completed(&prove(&mut client, request("replaced")).await);

        // Overwritten in place with junk of the same length: refused at its next load.
        let mut junk = std::fs::read(&files.params).unwrap();
        let points = junk.len() / 2;
        junk[points..].iter_mut().for_each(|b| *b = 0x5a);
        std::fs::write(&files.params, &junk).unwrap();
        assert!(evict(&mut client).await.was_loaded);
        let overwritten = prove(&mut client, request("junk")).await;
        assert_failed_with(&overwritten, &[&files.params.display().to_string()]);

        let status = get_status(&mut client).await;
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (3, 2)
        );
        assert!(status.loaded_srs.is_empty(), "{:?}", status.loaded_srs);
    });
}

/// `EvictSRS` and `PreloadSRS` of a set, sent again and again while jobs of that set run on
/// two lanes: every job completes once (a running proof keeps the copy it started with),
/// the counters agree, and once all is quiet the set is loaded or not with nothing in flight.
#[test]
fn evict_and_preload_racing_running_proofs_lose_no_job() {
    let _files = WINNING_FILES.lock().unwrap_or_else(|e| e.into_inner());
    let winning = Winning::new(59);
    write_winning_params(&winning, 59);
    let backend = FilecoinBackend::new(cpu_engines(1)).with_jobs_per_engine(2);
    let (runtime, client) = start(Arc::new(backend), 64);
    const JOBS: usize = 8;
    runtime.block_on(async {
        let racing = tokio::spawn({
            let mut client = client.clone();
            async move {
                let id = || "winning-2k".to_string();
                let mut calls = 0;
                while calls < 200 {
                    let evicted = client.evict_srs(EvictSrsRequest { circuit_id: id() });
                    evicted.await.unwrap();
                    let preloaded = client.preload_srs(PreloadSrsRequest { circuit_id: id() });
                    preloaded.await.unwrap();
                    calls += 2;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                calls
            }
        });
        let jobs: Vec<_> = (0..JOBS)
            .map(|i| {
                let mut client = client.clone();
                let request = winning.request(&format!("racing-{i}"), 2048);
                tokio::spawn(async move { prove(&mut client, request).await })
            })
            .collect();
        for job in jobs {
            assert_completed(&job.await.unwrap());
        }
        assert_eq!(racing.await.unwrap(), 200);
        let mut client = client.clone();
        let status = get_status(&mut client).await;
        assert_eq!(
            (status.total_proofs_completed, status.total_proofs_failed),
            (JOBS as u64, 0)
        );
        assert!(status.loaded_srs.iter().all(|srs| srs.ref_count == 0));
    });
}

/// A soak at CI's size (`soak::run`, what `wgpu-groth16-daemon soak` runs): Winning PoSt
/// jobs from 8 clients on two CPU lanes, a quarter of them cut short, cancelled at once or
/// submitted twice, then a flood past `max_pending`: every job answered once as its kind
/// says, the daemon's counters agree with what the clients saw, the flood's excess refused
/// with RESOURCE_EXHAUSTED and its admitted jobs completed.
#[test]
fn a_soak_answers_every_job_once_and_a_flood_past_the_bound_is_refused() {
    let _files = WINNING_FILES.lock().unwrap_or_else(|e| e.into_inner());
    let winning = Winning::new(61);
    write_winning_params(&winning, 61);
    let backend = FilecoinBackend::new(cpu_engines(1)).with_jobs_per_engine(2);
    const MAX_PENDING: usize = 4;
    let (runtime, address, _stop) = serve_on_loopback(Arc::new(backend), MAX_PENDING, Peers::any());
    let plan = soak::SoakPlan {
        kinds: vec![soak::SoakJob {
            name: "winning-2k".into(),
            request: winning.request("", 2048),
        }],
        jobs: 12,
        clients: 4,
        anomaly_percent: 25,
        flood: 8,
        sample_every: Duration::from_millis(500),
    };
    let report = runtime.block_on(soak::run(&address, &plan)).unwrap();
    eprintln!("{report}");
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        (report.bad, report.cancelled_asked, report.resubmitted),
        (1, 1, 1)
    );
    assert_eq!(report.failed, report.bad, "{report}");
    assert_eq!(
        report.completed + report.failed + report.cancelled,
        plan.jobs,
        "{report}"
    );
    let flood = &report.flood;
    assert!(flood.refused > 0, "{report}");
    assert!(flood.completed <= MAX_PENDING + 2, "{report}");
    assert_eq!(flood.refused + flood.completed, flood.sent, "{report}");
    assert!(report.samples.len() >= 2);
    assert!(report.samples.iter().all(|s| s.resident_bytes.is_some()));
}

/// Proves in `delay` by answering 192 bytes, and fails a payload shorter than `least`
/// bytes: the daemon's queue at the pace of small jobs, without their proving. A soak's
/// flood jobs (their request ids say so) take `flood_delay`, so that a flood meets busy
/// lanes however slowly its submissions arrive.
struct Quick {
    delay: Duration,
    flood_delay: Duration,
    least: usize,
}

impl Backend for Quick {
    fn lanes(&self) -> Vec<Lane> {
        (0..2)
            .map(|i| Lane {
                name: format!("quick {i}"),
            })
            .collect()
    }

    fn prove(
        &self,
        request: &SubmitProofRequest,
        _: usize,
        _: &CancelToken,
    ) -> Result<Proved, String> {
        let flood = request.request_id.contains("-flood-");
        std::thread::sleep(if flood { self.flood_delay } else { self.delay });
        if request.vanilla_proof.len() < self.least {
            return Err(format!("{} bytes: cut short", request.vanilla_proof.len()));
        }
        Ok(Proved {
            proof: vec![7; 192],
            srs_load: Duration::ZERO,
            synthesis: Duration::ZERO,
            gpu_compute: self.delay,
        })
    }

    fn preload(&self, _: &str) -> Result<(bool, Duration), String> {
        Ok((true, Duration::ZERO))
    }

    fn evict(&self, _: &str) -> Result<(bool, u64), String> {
        Ok((false, 0))
    }

    fn loaded(&self) -> Vec<LoadedSrs> {
        Vec::new()
    }
}

/// The soak at the issue's size, at the pace of a quick backend: 2,000 jobs of 256 KiB
/// payloads from 32 clients, 10% of them cut short, cancelled or submitted twice, then a
/// flood of 200: every job answered once, the counters agree, the excess of the flood
/// refused, and the daemon's resident memory flat once warm: a finished job keeps no
/// payload (2,000 kept would hold 500 MB). In a process of its own
/// ([`soak_of_two_thousand_jobs_alone`]): the resident set is the whole process's, which
/// this binary's other tests grow by gigabytes.
#[test]
fn a_soak_of_two_thousand_jobs_keeps_its_memory_flat() {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "soak_of_two_thousand_jobs_alone", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env(SOAK_ALONE, "1")
        .status()
        .unwrap();
    assert!(status.success(), "the soak's process: {status}");
}

/// Set for [`soak_of_two_thousand_jobs_alone`] in its own process.
const SOAK_ALONE: &str = "WIRE_SOAK_ALONE";

#[test]
#[ignore = "run alone in a child process by a_soak_of_two_thousand_jobs_keeps_its_memory_flat"]
fn soak_of_two_thousand_jobs_alone() {
    if std::env::var_os(SOAK_ALONE).is_none() {
        return;
    }
    const PAYLOAD: usize = 256 << 10;
    let backend = Quick {
        delay: Duration::from_millis(2),
        flood_delay: Duration::from_millis(300),
        least: PAYLOAD,
    };
    const MAX_PENDING: usize = 48;
    let (runtime, address, _stop) = serve_on_loopback(Arc::new(backend), MAX_PENDING, Peers::any());
    let mut request = job("", Priority::Normal, &vec![1; PAYLOAD]);
    request.proof_kind = ProofKind::WinningPost as i32;
    let plan = soak::SoakPlan {
        kinds: vec![soak::SoakJob {
            name: "quick".into(),
            request,
        }],
        jobs: 2000,
        clients: 32,
        anomaly_percent: 10,
        flood: 200,
        sample_every: Duration::from_millis(100),
    };
    let report = runtime.block_on(soak::run(&address, &plan)).unwrap();
    eprintln!("{report}");
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.failed, report.bad, "{report}");
    assert_eq!(report.completed + report.failed + report.cancelled, 2000);
    // Two lanes busy for 300 ms a flood job: past the lanes and the queue, it is refused.
    assert!(report.flood.refused > 0, "{report}");
    assert_eq!(
        report.flood.refused + report.flood.completed,
        200,
        "{report}"
    );
    // From a quarter of the jobs on, the resident set stays within 64 MiB of its value then.
    let warm = report
        .samples
        .iter()
        .find(|s| s.jobs >= 500)
        .and_then(|s| s.resident_bytes)
        .expect("a sample once warm");
    let peak = report
        .samples
        .iter()
        .filter_map(|s| s.resident_bytes)
        .max()
        .unwrap();
    assert!(
        peak < warm + (64 << 20),
        "the resident set grew from {warm} to {peak} bytes: {report}"
    );
}

/// Request bodies as bytes, below the generated client: sent as they are.
#[derive(Clone, Copy, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut bytes = vec![0; bytes::Buf::remaining(src)];
        bytes::Buf::copy_to_slice(src, &mut bytes);
        Ok(Some(bytes))
    }
}

/// Every message the daemon reads, decoded from hostile bytes by the generated code (no
/// panic, no allocation sized by a length field), and sent as raw bodies to each RPC of a
/// running daemon: each call answered (a response or an error status) within 10 s, and
/// the daemon then serves a valid job as before.
#[test]
fn hostile_protobuf_bodies_are_answered_and_the_daemon_goes_on() {
    use prost::Message;
    let payload = vec![1; 512];
    let mut submit = job("raw", Priority::Normal, &payload);
    submit.proof_kind = ProofKind::WinningPost as i32;
    submit.vanilla_proofs = vec![vec![2; 300], vec![3; 40]];
    submit.randomness = vec![4; 32];
    let bodies: [(&str, Vec<u8>); 7] = [
        ("SubmitProof", submit.encode_to_vec()),
        (
            "Prove",
            ProveRequest {
                submit: Some(submit.clone()),
            }
            .encode_to_vec(),
        ),
        (
            "AwaitProof",
            AwaitProofRequest {
                job_id: "job-0".into(),
                timeout_ms: 5,
            }
            .encode_to_vec(),
        ),
        (
            "CancelProof",
            CancelProofRequest {
                job_id: "job-0".into(),
            }
            .encode_to_vec(),
        ),
        ("GetStatus", GetStatusRequest {}.encode_to_vec()),
        (
            "PreloadSRS",
            PreloadSrsRequest {
                circuit_id: "winning-2k".into(),
            }
            .encode_to_vec(),
        ),
        (
            "EvictSRS",
            EvictSrsRequest {
                circuit_id: "winning-2k".into(),
            }
            .encode_to_vec(),
        ),
    ];
    // A field announcing 2^60 bytes; a varint that never ends.
    let mut huge = vec![0x22];
    let mut length = 1u64 << 60;
    while length >= 0x80 {
        huge.push((length as u8) | 0x80);
        length >>= 7;
    }
    huge.push(length as u8);
    let made = || {
        [
            ("a length of 2^60".to_string(), huge.clone()),
            (
                "an endless varint".to_string(),
                vec![0x08; 1].into_iter().chain([0xff; 20]).collect(),
            ),
        ]
    };
    let mut failures = Vec::new();
    for (seed, (rpc, body)) in bodies.iter().enumerate() {
        let inputs = made()
            .into_iter()
            .chain(hostile::mutants(body.clone(), 100 + seed as u64));
        let decode = |bytes: &[u8]| -> Result<(), prost::DecodeError> {
            match *rpc {
                "SubmitProof" => SubmitProofRequest::decode(bytes).map(drop),
                "Prove" => ProveRequest::decode(bytes).map(drop),
                "AwaitProof" => AwaitProofRequest::decode(bytes).map(drop),
                "CancelProof" => CancelProofRequest::decode(bytes).map(drop),
                "GetStatus" => GetStatusRequest::decode(bytes).map(drop),
                "PreloadSRS" => PreloadSrsRequest::decode(bytes).map(drop),
                _ => EvictSrsRequest::decode(bytes).map(drop),
            }
        };
        failures.extend(hostile::hostile(&format!("protobuf-{rpc}"), inputs, decode));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let backend = Quick {
        delay: Duration::from_millis(1),
        flood_delay: Duration::from_millis(1),
        least: 1,
    };
    let (runtime, address, _stop) = serve_on_loopback(Arc::new(backend), 8, Peers::any());
    runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(address.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut raw = tonic::client::Grpc::new(channel.clone());
        let (mut answered, mut refused) = (0, 0);
        for (seed, (rpc, body)) in bodies.iter().enumerate() {
            let inputs = made()
                .into_iter()
                .chain(hostile::mutants(body.clone(), 200 + seed as u64).take(150));
            let path = format!("/cuzk.v1.ProvingEngine/{rpc}");
            for (name, bytes) in inputs {
                raw.ready().await.unwrap();
                let call = raw.unary(
                    tonic::Request::new(bytes),
                    tonic::codegen::http::uri::PathAndQuery::try_from(path.as_str()).unwrap(),
                    Raw,
                );
                match tokio::time::timeout(Duration::from_secs(10), call).await {
                    Ok(Ok(_)) => answered += 1,
                    Ok(Err(_)) => refused += 1,
                    Err(_) => panic!("{rpc} {name}: no answer within 10 s"),
                }
            }
        }
        eprintln!("raw bodies: {answered} answered, {refused} refused with a status");
        let mut client = ProvingEngineClient::new(channel);
        let mut valid = submit.clone();
        valid.request_id = "after the hostile bodies".into();
        let done = prove(&mut client, valid).await;
        assert_eq!(
            done.status,
            Status::Completed as i32,
            "{}",
            done.error_message
        );
    });
}
