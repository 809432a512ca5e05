//! The daemon's job queue: jobs by id and by the caller's request id (a request id seen twice
//! is one job), pending jobs in priority order (CRITICAL first, then first come), at most
//! `max_pending` of them, one worker thread per lane (a prover on one GPU) taking the next
//! job, cancellation of pending and running jobs, and the outcome of each job kept for a
//! while for late `AwaitProof` calls.
//!
//! The proving itself is a [`Backend`]'s: the Filecoin one in production
//! ([`crate::backend::FilecoinBackend`]); the queue does not know what a proof is.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wgpu_groth16::groth16::CancelToken;

use crate::pb::await_proof_response::Status;
use crate::pb::{AwaitProofResponse, Priority, ProofKind, SubmitProofRequest};

/// Finished jobs whose outcome is kept for `AwaitProof` after the fact (the oldest go first).
const KEPT_FINISHED: usize = 4096;

/// What a backend measured of one proof.
#[derive(Clone, Debug, Default)]
pub struct Proved {
    pub proof: Vec<u8>,
    /// Waiting for the job's parameters to load (zero when they were resident).
    pub srs_load: Duration,
    /// Synthesis, summed over the job's partitions (which synthesize in parallel).
    pub synthesis: Duration,
    /// Every step after synthesis (staging, products, H, MSMs), summed over the partitions.
    pub gpu_compute: Duration,
}

/// One prover a worker thread drives: a GPU (or the CPU), as `GetStatus` shows it.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    pub name: String,
}

/// A parameter set the backend holds.
#[derive(Clone, Debug)]
pub struct LoadedSrs {
    pub circuit_id: String,
    pub size_bytes: u64,
    /// Proofs running with it.
    pub in_flight: u32,
}

/// What proves: the queue hands it one job at a time per lane.
pub trait Backend: Send + Sync + 'static {
    /// The lanes jobs run on; one worker thread each.
    fn lanes(&self) -> Vec<Lane>;

    /// Proves `request` on `lane`. `cancel` is cancelled if the job is cancelled while it
    /// runs: the backend should stop soon, so that the lane takes its next job (its result
    /// is dropped either way). An error is the job's `error_message`.
    fn prove(
        &self,
        request: &SubmitProofRequest,
        lane: usize,
        cancel: &CancelToken,
    ) -> Result<Proved, String>;

    /// Loads a parameter set; whether it already was, and the time it took.
    fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), String>;

    /// Drops a parameter set; whether it was loaded, and the bytes freed.
    fn evict(&self, circuit_id: &str) -> Result<(bool, u64), String>;

    /// The parameter sets held now.
    fn loaded(&self) -> Vec<LoadedSrs>;

    /// Device memory each lane holds now by the backend's own accounting; `None` where it
    /// does not know (a lane on the CPU, a backend that does not count).
    fn vram_in_use(&self) -> Vec<Option<u64>> {
        vec![None; self.lanes().len()]
    }
}

/// Why a submission was refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("the queue is full: {pending} jobs pending (at most {max})")]
    Full { pending: usize, max: usize },
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

/// A job's place in the pending set: higher priority first, then submission order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct QueueKey {
    rank: std::cmp::Reverse<i32>,
    seq: u64,
    job_id: String,
}

enum Phase {
    Pending(QueueKey),
    Running { lane: usize },
    Finished,
}

struct Job {
    request: Arc<SubmitProofRequest>,
    submitted: Instant,
    phase: Phase,
    cancel: CancelToken,
    outcome: watch::Sender<Option<AwaitProofResponse>>,
}

#[derive(Default)]
struct State {
    jobs: HashMap<String, Job>,
    by_request: HashMap<String, String>,
    pending: BTreeSet<QueueKey>,
    finished: VecDeque<String>,
    next_seq: u64,
    shutting_down: bool,
    counters: Counters,
}

/// Totals since the daemon started, per proof kind where it matters.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub refused_full: u64,
    /// Per proof kind name: proofs completed and their total seconds.
    pub proof_seconds: HashMap<String, (u64, f64)>,
}

/// A lane as `GetStatus` reports it.
#[derive(Clone, Debug)]
pub struct LaneStatus {
    pub lane: Lane,
    pub current_job: Option<(String, String)>,
}

/// Jobs pending and in progress per proof kind.
#[derive(Clone, Debug, Default)]
pub struct QueueCounts {
    pub pending: u32,
    pub in_progress: u32,
}

struct Inner {
    state: Mutex<State>,
    work: Condvar,
    backend: Arc<dyn Backend>,
    /// One worker each; their names come from the backend at each call (they change when a
    /// GPU fails).
    lane_count: usize,
    max_pending: usize,
    started: Instant,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The queue and its workers.
pub struct Scheduler {
    inner: Arc<Inner>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

pub fn kind_name(kind: i32) -> String {
    ProofKind::try_from(kind)
        .map(|k| k.as_str_name().to_string())
        .unwrap_or_else(|_| format!("PROOF_KIND_{kind}"))
}

impl Scheduler {
    /// Starts one worker per lane of `backend`, accepting at most `max_pending` jobs not yet
    /// started.
    pub fn start(backend: Arc<dyn Backend>, max_pending: usize) -> Arc<Self> {
        let lane_count = backend.lanes().len();
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            backend,
            lane_count,
            max_pending,
            started: Instant::now(),
        });
        let workers = (0..inner.lane_count)
            .map(|lane| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("lane-{lane}"))
                    .spawn(move || work(&inner, lane))
                    .expect("a worker thread")
            })
            .collect();
        Arc::new(Scheduler {
            inner,
            workers: Mutex::new(workers),
        })
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    pub fn uptime(&self) -> Duration {
        self.inner.started.elapsed()
    }

    /// Queues `request`, or finds the job its request id already made. Returns the job id,
    /// its place among the pending jobs (0: next) and its lane if it runs.
    pub fn submit(
        &self,
        request: SubmitProofRequest,
    ) -> Result<(String, u32, Option<usize>), SubmitError> {
        let mut state = self.inner.lock();
        if state.shutting_down {
            return Err(SubmitError::ShuttingDown);
        }
        if !request.request_id.is_empty() {
            if let Some(job_id) = state.by_request.get(&request.request_id).cloned() {
                let (position, lane) = place(&state, &job_id);
                return Ok((job_id, position, lane));
            }
        }
        if state.pending.len() >= self.inner.max_pending {
            state.counters.refused_full += 1;
            return Err(SubmitError::Full {
                pending: state.pending.len(),
                max: self.inner.max_pending,
            });
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        let job_id = format!("job-{seq}");
        // Unknown priorities rank as NORMAL; CRITICAL jumps the queue.
        let priority = Priority::try_from(request.priority)
            .ok()
            .filter(|p| *p != Priority::Unspecified)
            .unwrap_or(Priority::Normal);
        let key = QueueKey {
            rank: std::cmp::Reverse(priority as i32),
            seq,
            job_id: job_id.clone(),
        };
        if !request.request_id.is_empty() {
            state
                .by_request
                .insert(request.request_id.clone(), job_id.clone());
        }
        state.pending.insert(key.clone());
        state.jobs.insert(
            job_id.clone(),
            Job {
                request: Arc::new(request),
                submitted: Instant::now(),
                phase: Phase::Pending(key),
                cancel: CancelToken::new(),
                outcome: watch::channel(None).0,
            },
        );
        let (position, lane) = place(&state, &job_id);
        drop(state);
        self.inner.work.notify_one();
        Ok((job_id, position, lane))
    }

    /// The job's outcome once it has one, or `None` if it is unknown.
    pub fn outcome(&self, job_id: &str) -> Option<watch::Receiver<Option<AwaitProofResponse>>> {
        self.inner
            .lock()
            .jobs
            .get(job_id)
            .map(|job| job.outcome.subscribe())
    }

    /// Waits for the job's outcome, at most `timeout` (forever if `None`).
    pub async fn await_outcome(
        &self,
        job_id: &str,
        timeout: Option<Duration>,
    ) -> AwaitProofResponse {
        let unknown = || AwaitProofResponse {
            job_id: job_id.to_string(),
            status: Status::Unknown as i32,
            error_message: format!("no job {job_id:?} (unknown, or finished too long ago)"),
            ..Default::default()
        };
        let Some(mut outcome) = self.outcome(job_id) else {
            return unknown();
        };
        let wait = outcome.wait_for(Option::is_some);
        let done = match timeout {
            Some(limit) => match tokio::time::timeout(limit, wait).await {
                Ok(done) => done.ok().and_then(|o| o.clone()),
                Err(_) => {
                    return AwaitProofResponse {
                        job_id: job_id.to_string(),
                        status: Status::Timeout as i32,
                        error_message: format!(
                            "the job did not finish within {} ms; it goes on",
                            limit.as_millis()
                        ),
                        ..Default::default()
                    }
                }
            },
            None => wait.await.ok().and_then(|o| o.clone()),
        };
        done.unwrap_or_else(unknown)
    }

    /// Cancels a job: a pending one leaves the queue, a running one is told to stop (its
    /// lane is free once the backend stops) and its result is dropped. Whether it was running; `None` for an unknown job.
    pub fn cancel(&self, job_id: &str) -> Option<bool> {
        let mut state = self.inner.lock();
        let was_running = match &state.jobs.get(job_id)?.phase {
            Phase::Finished => return Some(false),
            Phase::Running { .. } => true,
            Phase::Pending(key) => {
                let key = key.clone();
                state.pending.remove(&key);
                false
            }
        };
        let job = state.jobs.get_mut(job_id)?;
        job.cancel.cancel();
        let total = job.submitted.elapsed();
        job.phase = Phase::Finished;
        job.outcome.send_replace(Some(AwaitProofResponse {
            job_id: job_id.to_string(),
            status: Status::Cancelled as i32,
            error_message: "cancelled".into(),
            total_ms: millis(total),
            ..Default::default()
        }));
        state.counters.cancelled += 1;
        finished(&mut state, job_id);
        Some(was_running)
    }

    /// Stops taking jobs: submissions are refused, pending jobs are cancelled, and each
    /// worker ends once its running job does.
    pub fn stop(&self) {
        let pending: Vec<String> = {
            let mut state = self.inner.lock();
            state.shutting_down = true;
            state.pending.iter().map(|k| k.job_id.clone()).collect()
        };
        for job_id in pending {
            self.cancel(&job_id);
        }
        self.inner.work.notify_all();
    }

    /// [`stop`](Self::stop), then waits for the workers to end.
    pub fn shutdown(&self) {
        self.stop();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|e| e.into_inner()));
        for worker in workers {
            let _ = worker.join();
        }
    }

    /// Each lane as the backend describes it now (a failed GPU says so) and the job it runs
    /// (id, proof kind).
    pub fn lanes(&self) -> Vec<LaneStatus> {
        let state = self.inner.lock();
        let mut current = vec![None; self.inner.lane_count];
        for (id, job) in &state.jobs {
            if let Phase::Running { lane, .. } = job.phase {
                current[lane] = Some((id.clone(), kind_name(job.request.proof_kind)));
            }
        }
        self.inner
            .backend
            .lanes()
            .into_iter()
            .zip(current)
            .map(|(lane, current_job)| LaneStatus { lane, current_job })
            .collect()
    }

    /// Pending and running jobs per proof kind name.
    pub fn queues(&self) -> Vec<(String, QueueCounts)> {
        let state = self.inner.lock();
        let mut queues: HashMap<String, QueueCounts> = HashMap::new();
        for job in state.jobs.values() {
            let counts = queues.entry(kind_name(job.request.proof_kind)).or_default();
            match job.phase {
                Phase::Pending(_) => counts.pending += 1,
                Phase::Running { .. } => counts.in_progress += 1,
                Phase::Finished => {}
            }
        }
        let mut queues: Vec<_> = queues.into_iter().collect();
        queues.sort_by(|a, b| a.0.cmp(&b.0));
        queues
    }

    pub fn counters(&self) -> Counters {
        self.inner.lock().counters.clone()
    }
}

/// A job's place among the pending (0: next; 0 too once it runs) and its lane if it runs.
fn place(state: &State, job_id: &str) -> (u32, Option<usize>) {
    match state.jobs.get(job_id).map(|job| &job.phase) {
        Some(Phase::Pending(key)) => (state.pending.range(..key).count() as u32, None),
        Some(Phase::Running { lane, .. }) => (0, Some(*lane)),
        _ => (0, None),
    }
}

/// Keeps a finished job's outcome, letting the oldest go beyond [`KEPT_FINISHED`]. Its
/// request keeps only its id and kind (what a late await or a resubmission needs): a C1
/// output is ~40 MB at 32 GiB, and thousands kept would hold the host's memory.
fn finished(state: &mut State, job_id: &str) {
    if let Some(job) = state.jobs.get_mut(job_id) {
        job.request = Arc::new(SubmitProofRequest {
            request_id: job.request.request_id.clone(),
            proof_kind: job.request.proof_kind,
            ..Default::default()
        });
    }
    state.finished.push_back(job_id.to_string());
    while state.finished.len() > KEPT_FINISHED {
        if let Some(old) = state.finished.pop_front() {
            if let Some(job) = state.jobs.remove(&old) {
                if state.by_request.get(&job.request.request_id) == Some(&old) {
                    state.by_request.remove(&job.request.request_id);
                }
            }
        }
    }
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis().min(u128::from(u64::MAX)) as u64
}

/// A lane's worker: the next job by priority, proved, its outcome published.
fn work(inner: &Inner, lane: usize) {
    loop {
        let (job_id, request, cancel, queued) = {
            let mut state = inner.lock();
            let key = loop {
                if state.shutting_down {
                    return;
                }
                if let Some(key) = state.pending.pop_first() {
                    break key;
                }
                state = inner.work.wait(state).unwrap_or_else(|e| e.into_inner());
            };
            let Some(job) = state.jobs.get_mut(&key.job_id) else {
                continue;
            };
            job.phase = Phase::Running { lane };
            (
                key.job_id,
                job.request.clone(),
                job.cancel.clone(),
                job.submitted.elapsed(),
            )
        };
        let started = Instant::now();
        // A panic in the backend fails this job, not the daemon.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            inner.backend.prove(&request, lane, &cancel)
        }))
        .unwrap_or_else(|_| Err("the prover panicked on this job".into()));
        let ran = started.elapsed();
        let mut state = inner.lock();
        let Some(job) = state.jobs.get_mut(&job_id) else {
            continue;
        };
        if cancel.is_cancelled() {
            // Cancelled while it ran: its outcome is already out.
            continue;
        }
        job.phase = Phase::Finished;
        let total = job.submitted.elapsed();
        let mut response = AwaitProofResponse {
            job_id: job_id.clone(),
            queue_wait_ms: millis(queued),
            total_ms: millis(total),
            ..Default::default()
        };
        match result {
            Ok(proved) => {
                response.status = Status::Completed as i32;
                response.proof = proved.proof;
                response.srs_load_ms = millis(proved.srs_load);
                response.synthesis_ms = millis(proved.synthesis);
                response.gpu_compute_ms = millis(proved.gpu_compute);
            }
            Err(message) => {
                response.status = Status::Failed as i32;
                response.error_message = message;
            }
        }
        let completed = response.status == Status::Completed as i32;
        job.outcome.send_replace(Some(response));
        if completed {
            state.counters.completed += 1;
            let entry = state
                .counters
                .proof_seconds
                .entry(kind_name(request.proof_kind))
                .or_default();
            entry.0 += 1;
            entry.1 += ran.as_secs_f64();
        } else {
            state.counters.failed += 1;
        }
        finished(&mut state, &job_id);
    }
}
