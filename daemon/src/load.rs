//! A load generator for the daemon: `jobs` copies of one job sent by `clients` concurrent gRPC
//! clients (a connection each, one job in flight each: SubmitProof, then AwaitProof), and
//! what came of them: throughput, latency percentiles, how busy the lanes were.
//!
//! Every job gets a request id of its own run (the daemon would take a repeated id for the
//! same job), so one daemon can be loaded several times.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tonic::transport::{Channel, Endpoint};

use crate::pb::await_proof_response::Status;
use crate::pb::proving_engine_client::ProvingEngineClient;
use crate::pb::{AwaitProofRequest, GetStatusRequest, SubmitProofRequest};
use crate::MAX_MESSAGE_BYTES;

/// What a load run measured.
#[derive(Clone, Debug)]
pub struct LoadReport {
    pub clients: usize,
    /// The daemon's lanes (its `GetStatus` GPUs).
    pub lanes: usize,
    /// From the first submission to the last result.
    pub wall: Duration,
    /// Submit to result of each completed job, shortest first.
    pub latencies: Vec<Duration>,
    /// Why each other job failed.
    pub failures: Vec<String>,
    /// The completed jobs' `gpu_compute_ms`, summed.
    pub gpu_compute: Duration,
    /// The completed jobs' time on a lane (`total_ms - queue_wait_ms`), summed.
    pub lane_time: Duration,
}

impl LoadReport {
    pub fn jobs(&self) -> usize {
        self.latencies.len() + self.failures.len()
    }

    pub fn completed(&self) -> usize {
        self.latencies.len()
    }

    /// Completed jobs a second of wall time.
    pub fn proofs_per_second(&self) -> f64 {
        self.completed() as f64 / self.wall.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// The latency at or below which `percent` of the completed jobs came back (nearest
    /// rank); `None` without a completed job.
    pub fn latency_percentile(&self, percent: f64) -> Option<Duration> {
        percentile(&self.latencies, percent)
    }

    /// `time` over the lanes' wall time (wall x lanes).
    fn share(&self, time: Duration) -> f64 {
        time.as_secs_f64()
            / (self.wall.as_secs_f64() * self.lanes.max(1) as f64).max(f64::MIN_POSITIVE)
    }

    /// The steps after synthesis (GPU work and the CPU steps between its kernels) over the
    /// lanes' wall time. A job's `gpu_compute_ms` sums them over its partitions, which two
    /// workers of a lane run overlapped: an upper estimate of the GPU's busy share.
    pub fn gpu_busy_share(&self) -> f64 {
        self.share(self.gpu_compute)
    }

    /// Time the lanes held jobs over their wall time: near 1 when jobs kept them busy.
    pub fn lane_busy_share(&self) -> f64 {
        self.share(self.lane_time)
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "jobs: {} from {} clients on {} lane(s)",
            self.jobs(),
            self.clients,
            self.lanes
        )?;
        writeln!(
            f,
            "completed: {}, failed: {}",
            self.completed(),
            self.failures.len()
        )?;
        writeln!(f, "wall: {:.3} s", self.wall.as_secs_f64())?;
        writeln!(f, "proofs a second: {:.3}", self.proofs_per_second())?;
        let ms =
            |p: Option<Duration>| p.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3));
        writeln!(
            f,
            "latency submit to result (ms): p50 {} p90 {} p99 {} max {}",
            ms(self.latency_percentile(50.0)),
            ms(self.latency_percentile(90.0)),
            ms(self.latency_percentile(99.0)),
            ms(self.latencies.last().copied())
        )?;
        writeln!(
            f,
            "gpu busy share: {:.3} (responses' gpu_compute_ms summed over wall x lanes; \
             partitions overlap on a lane, so an upper estimate)",
            self.gpu_busy_share()
        )?;
        writeln!(
            f,
            "lane busy share: {:.3} (responses' total_ms - queue_wait_ms summed over wall x lanes)",
            self.lane_busy_share()
        )?;
        for failure in self.failures.iter().take(3) {
            writeln!(f, "failed: {failure}")?;
        }
        Ok(())
    }
}

/// The value at or below which `percent` of `sorted` lie (nearest rank); `None` for none.
pub fn percentile(sorted: &[Duration], percent: f64) -> Option<Duration> {
    let n = sorted.len();
    let rank = ((percent / 100.0) * n as f64).ceil() as usize;
    sorted.get(rank.clamp(1, n.max(1)) - 1).copied()
}

/// A client of the daemon at `address` (`endpoint`), sending requests up to the daemon's
/// largest.
pub(crate) async fn connect(
    endpoint: &Endpoint,
    address: &str,
) -> Result<ProvingEngineClient<Channel>, String> {
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("cannot reach the daemon at {address}: {e}"))?;
    Ok(ProvingEngineClient::new(channel).max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// Sends `jobs` copies of `job` to the daemon at `address` from `clients` concurrent clients
/// and waits for every result. An unreachable daemon is an error; a job that fails is
/// counted in the report.
pub async fn run(
    address: &str,
    job: SubmitProofRequest,
    clients: usize,
    jobs: usize,
) -> Result<LoadReport, String> {
    if clients == 0 || jobs == 0 {
        return Err(format!(
            "a load needs a client and a job at least ({clients} clients, {jobs} jobs)"
        ));
    }
    let endpoint = Endpoint::from_shared(address.to_string())
        .map_err(|e| format!("bad daemon address {address:?}: {e}"))?;
    let lanes = connect(&endpoint, address)
        .await?
        .get_status(GetStatusRequest {})
        .await
        .map_err(|e| format!("GetStatus: {e}"))?
        .into_inner()
        .gpus
        .len();
    let clients = clients.min(jobs);
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(connect(&endpoint, address).await?);
    }
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    let run_id = format!("load-{}-{run_id}", std::process::id());
    let next = Arc::new(AtomicUsize::new(0));
    let job = Arc::new(job);
    let start = Instant::now();
    let tasks: Vec<_> = connected
        .into_iter()
        .map(|mut client| {
            let (next, job, run_id) = (next.clone(), job.clone(), run_id.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= jobs {
                        return outcomes;
                    }
                    let mut request = (*job).clone();
                    request.request_id = format!("{run_id}-{index}");
                    let sent = Instant::now();
                    let outcome = submit_and_await(&mut client, request).await;
                    outcomes.push((sent.elapsed(), outcome));
                }
            })
        })
        .collect();
    let mut report = LoadReport {
        clients,
        lanes,
        wall: Duration::ZERO,
        latencies: Vec::with_capacity(jobs),
        failures: Vec::new(),
        gpu_compute: Duration::ZERO,
        lane_time: Duration::ZERO,
    };
    for task in tasks {
        let outcomes = task.await.map_err(|e| format!("a client failed: {e}"))?;
        for (latency, outcome) in outcomes {
            match outcome {
                Ok(done) => {
                    report.latencies.push(latency);
                    report.gpu_compute += Duration::from_millis(done.gpu_compute_ms);
                    report.lane_time +=
                        Duration::from_millis(done.total_ms.saturating_sub(done.queue_wait_ms));
                }
                Err(why) => report.failures.push(why),
            }
        }
    }
    report.wall = start.elapsed();
    report.latencies.sort();
    Ok(report)
}

/// One job submitted and awaited: its completed response, or why it did not complete.
async fn submit_and_await(
    client: &mut ProvingEngineClient<Channel>,
    request: SubmitProofRequest,
) -> Result<crate::pb::AwaitProofResponse, String> {
    let request_id = request.request_id.clone();
    let submitted = client
        .submit_proof(request)
        .await
        .map_err(|e| format!("{request_id}: SubmitProof: {}", e.message()))?
        .into_inner();
    let done = client
        .await_proof(AwaitProofRequest {
            job_id: submitted.job_id.clone(),
            timeout_ms: 0,
        })
        .await
        .map_err(|e| format!("{request_id}: AwaitProof: {}", e.message()))?
        .into_inner();
    if done.status == Status::Completed as i32 {
        return Ok(done);
    }
    let status = Status::try_from(done.status).map_or("UNKNOWN", |s| s.as_str_name());
    Err(format!(
        "{request_id} ({}): {status}: {}",
        submitted.job_id, done.error_message
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: of 1..=100 ms, the p-th percentile is p ms; of one job, that job.
    #[test]
    fn percentiles_are_nearest_ranks() {
        let report = |latencies: Vec<Duration>| LoadReport {
            clients: 1,
            lanes: 1,
            wall: Duration::from_secs(1),
            latencies,
            failures: Vec::new(),
            gpu_compute: Duration::ZERO,
            lane_time: Duration::ZERO,
        };
        let hundred = report((1..=100).map(Duration::from_millis).collect());
        for p in [1u32, 50, 90, 99, 100] {
            assert_eq!(
                hundred.latency_percentile(f64::from(p)),
                Some(Duration::from_millis(u64::from(p)))
            );
        }
        let one = report(vec![Duration::from_millis(7)]);
        assert_eq!(one.latency_percentile(50.0), Some(Duration::from_millis(7)));
        assert_eq!(report(Vec::new()).latency_percentile(50.0), None);
    }
}
