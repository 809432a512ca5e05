//! A soak: many small jobs from many concurrent clients, a share of them bad (their payload
//! cut short), cancelled as soon as they are submitted, or submitted twice under one request
//! id; then a flood of submissions at once past the daemon's bound on pending jobs.
//!
//! Each job must be answered exactly once: what the clients saw is checked against the
//! daemon's own counters (`GetMetrics`), so a job lost or counted twice shows as a
//! difference. The daemon's memory (its resident set and its lanes' VRAM by its own
//! accounting) is sampled as the jobs go, to show whether it stays flat after warm-up.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tonic::transport::{Channel, Endpoint};

use crate::load::{connect, percentile};
use crate::pb::await_proof_response::Status;
use crate::pb::proving_engine_client::ProvingEngineClient;
use crate::pb::{
    AwaitProofRequest, AwaitProofResponse, CancelProofRequest, GetMetricsRequest,
    SubmitProofRequest,
};

/// One kind of job the soak sends: its name in the report and the request it copies.
#[derive(Clone, Debug)]
pub struct SoakJob {
    pub name: String,
    pub request: SubmitProofRequest,
}

/// What to send.
#[derive(Clone, Debug)]
pub struct SoakPlan {
    /// Sent in turn: job i is of kind i mod their count.
    pub kinds: Vec<SoakJob>,
    pub jobs: usize,
    pub clients: usize,
    /// Jobs in a hundred that are bad, cancelled or resubmitted (in turn), spread evenly.
    pub anomaly_percent: u32,
    /// Submissions sent at once after the soak, of the first kind.
    pub flood: usize,
    /// Time between samples of the daemon's memory.
    pub sample_every: Duration,
}

/// What happens to a job besides being proved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Treatment {
    Plain,
    /// Its payload cut to half its length: it must fail.
    Bad,
    /// Cancelled right after it is submitted: cancelled, or done if it ended first.
    Cancelled,
    /// Submitted twice under one request id: one job, one answer.
    Resubmitted,
}

impl Treatment {
    /// Job `index`'s: of every hundred jobs, `percent` anomalies spread evenly, their kinds
    /// in turn.
    fn of(index: usize, percent: u32) -> Self {
        let anomalies_before = |i: usize| i * percent as usize / 100;
        if anomalies_before(index + 1) == anomalies_before(index) {
            return Treatment::Plain;
        }
        match anomalies_before(index) % 3 {
            0 => Treatment::Bad,
            1 => Treatment::Cancelled,
            _ => Treatment::Resubmitted,
        }
    }
}

/// A request's payload cut to half its length: a C1 output's JSON, or its first vanilla
/// proof.
fn cut(mut request: SubmitProofRequest) -> SubmitProofRequest {
    if !request.vanilla_proof.is_empty() {
        let half = request.vanilla_proof.len() / 2;
        request.vanilla_proof.truncate(half);
    } else if let Some(first) = request.vanilla_proofs.first_mut() {
        first.truncate(first.len() / 2);
    }
    request
}

/// The daemon's counters and memory, from its metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DaemonCounters {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub refused: u64,
    /// `process_resident_memory_bytes`, where the daemon's platform tells it.
    pub resident_bytes: Option<u64>,
    /// `wgpu_groth16_vram_used_bytes` summed over the lanes; `None` without a GPU lane.
    pub vram_bytes: Option<u64>,
}

impl DaemonCounters {
    /// Reads them from a Prometheus text exposition.
    pub fn parse(text: &str) -> Self {
        let mut counters = DaemonCounters::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let value = value as u64;
            let name = name.split('{').next().unwrap_or(name);
            match name {
                "wgpu_groth16_proofs_completed_total" => counters.completed = value,
                "wgpu_groth16_proofs_failed_total" => counters.failed = value,
                "wgpu_groth16_proofs_cancelled_total" => counters.cancelled = value,
                "wgpu_groth16_submissions_refused_total" => counters.refused = value,
                "process_resident_memory_bytes" => counters.resident_bytes = Some(value),
                "wgpu_groth16_vram_used_bytes" => {
                    *counters.vram_bytes.get_or_insert(0) += value;
                }
                _ => {}
            }
        }
        counters
    }
}

/// The daemon's memory when `jobs` jobs had been answered.
#[derive(Clone, Copy, Debug)]
pub struct MemorySample {
    pub at: Duration,
    pub jobs: usize,
    pub resident_bytes: Option<u64>,
    pub vram_bytes: Option<u64>,
}

/// How the flood went.
#[derive(Clone, Debug, Default)]
pub struct FloodReport {
    pub sent: usize,
    /// Refused at submission with RESOURCE_EXHAUSTED.
    pub refused: usize,
    /// Admitted and then completed.
    pub completed: usize,
    /// Admitted and then not completed: why, each.
    pub failed: Vec<String>,
    /// Admitted jobs' time on a lane (`total_ms - queue_wait_ms`), shortest first.
    pub lane_times: Vec<Duration>,
}

/// What a soak saw.
#[derive(Clone, Debug, Default)]
pub struct SoakReport {
    pub jobs: usize,
    pub clients: usize,
    pub wall: Duration,
    /// Jobs by treatment: bad, cancelled, resubmitted.
    pub bad: usize,
    pub cancelled_asked: usize,
    pub resubmitted: usize,
    /// Answers the clients saw (a failure of a job that should not fail is also in
    /// `unexpected`).
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// Submit to result of each completed job, by kind, shortest first.
    pub latencies: HashMap<String, Vec<Duration>>,
    /// Completed jobs' time on a lane, shortest first.
    pub lane_times: Vec<Duration>,
    /// What should not have happened, each said once.
    pub unexpected: Vec<String>,
    /// The daemon's counters over the soak (its flood included), after less before.
    pub daemon: DaemonCounters,
    pub samples: Vec<MemorySample>,
    pub flood: FloodReport,
}

impl SoakReport {
    /// The daemon counted what the clients saw: every job answered once, none lost.
    pub fn counters_agree(&self) -> bool {
        let flood = self.flood.completed as u64;
        self.daemon.completed == self.completed as u64 + flood
            && self.daemon.failed == (self.failed + self.flood.failed.len()) as u64
            && self.daemon.cancelled == self.cancelled as u64
            && self.daemon.refused == self.flood.refused as u64
    }

    /// No job lost, answered twice or answered wrongly.
    pub fn is_clean(&self) -> bool {
        self.unexpected.is_empty() && self.flood.failed.is_empty() && self.counters_agree()
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms =
            |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3));
        let mib = |b: Option<u64>| {
            b.map_or("-".into(), |b| {
                format!("{:.1}", b as f64 / (1 << 20) as f64)
            })
        };
        writeln!(
            f,
            "soak: {} jobs from {} clients in {:.1} s ({} bad, {} cancelled at once, {} submitted twice)",
            self.jobs,
            self.clients,
            self.wall.as_secs_f64(),
            self.bad,
            self.cancelled_asked,
            self.resubmitted
        )?;
        writeln!(
            f,
            "answered: {} completed, {} failed, {} cancelled; the daemon's counters {} \
             (completed {}, failed {}, cancelled {}, refused {})",
            self.completed,
            self.failed,
            self.cancelled,
            if self.counters_agree() {
                "agree"
            } else {
                "DISAGREE"
            },
            self.daemon.completed,
            self.daemon.failed,
            self.daemon.cancelled,
            self.daemon.refused
        )?;
        let mut kinds: Vec<_> = self.latencies.iter().collect();
        kinds.sort_by(|a, b| a.0.cmp(b.0));
        for (kind, latencies) in kinds {
            writeln!(
                f,
                "latency submit to result, {kind} ({} completed, ms): p50 {} p99 {} max {}",
                latencies.len(),
                ms(percentile(latencies, 50.0)),
                ms(percentile(latencies, 99.0)),
                ms(latencies.last().copied())
            )?;
        }
        writeln!(
            f,
            "lane time a job (ms): p50 {} p99 {}",
            ms(percentile(&self.lane_times, 50.0)),
            ms(percentile(&self.lane_times, 99.0))
        )?;
        writeln!(
            f,
            "memory (s, jobs answered, RSS MiB, VRAM MiB by the daemon's pool):"
        )?;
        for sample in &self.samples {
            writeln!(
                f,
                "  {:8.1} {:6} {:>9} {:>9}",
                sample.at.as_secs_f64(),
                sample.jobs,
                mib(sample.resident_bytes),
                mib(sample.vram_bytes)
            )?;
        }
        writeln!(
            f,
            "flood: {} submissions at once: {} refused (RESOURCE_EXHAUSTED), {} admitted and \
             completed, {} admitted and not completed; their lane time p50 {} ms (the soak's: {} ms)",
            self.flood.sent,
            self.flood.refused,
            self.flood.completed,
            self.flood.failed.len(),
            ms(percentile(&self.flood.lane_times, 50.0)),
            ms(percentile(&self.lane_times, 50.0))
        )?;
        for what in self.flood.failed.iter().take(3) {
            writeln!(f, "flood job not completed: {what}")?;
        }
        for what in self.unexpected.iter().take(10) {
            writeln!(f, "unexpected: {what}")?;
        }
        if self.unexpected.len() > 10 {
            writeln!(f, "unexpected: ... {} more", self.unexpected.len() - 10)?;
        }
        Ok(())
    }
}

/// What one job came to, as its client saw it.
enum Answer {
    Completed {
        kind: usize,
        latency: Duration,
        lane: Duration,
    },
    /// Failed: as it should (a bad job), or not (why).
    Failed(Option<String>),
    Cancelled,
    /// Not answered as a job is: no answer, or another job for a resubmission.
    Unexpected(String),
}

type Client = ProvingEngineClient<Channel>;

async fn counters(client: &mut Client) -> Result<DaemonCounters, String> {
    let text = client
        .get_metrics(GetMetricsRequest {})
        .await
        .map_err(|e| format!("GetMetrics: {}", e.message()))?
        .into_inner()
        .prometheus_text;
    Ok(DaemonCounters::parse(&text))
}

async fn await_answer(client: &mut Client, job_id: &str) -> Result<AwaitProofResponse, String> {
    client
        .await_proof(AwaitProofRequest {
            job_id: job_id.into(),
            timeout_ms: 0,
        })
        .await
        .map(|r| r.into_inner())
        .map_err(|e| format!("{job_id}: AwaitProof: {}", e.message()))
}

/// Job `index` of the plan, sent and answered as its treatment says.
async fn one_job(client: &mut Client, plan: &SoakPlan, run_id: &str, index: usize) -> Answer {
    let kind = index % plan.kinds.len();
    let treatment = Treatment::of(index, plan.anomaly_percent);
    let mut request = plan.kinds[kind].request.clone();
    request.request_id = format!("{run_id}-{index}");
    if treatment == Treatment::Bad {
        request = cut(request);
    }
    let id = request.request_id.clone();
    let sent = Instant::now();
    let submitted = match client.submit_proof(request.clone()).await {
        Ok(response) => response.into_inner(),
        Err(e) => return Answer::Unexpected(format!("{id}: SubmitProof: {}", e.message())),
    };
    match treatment {
        Treatment::Cancelled => {
            let cancel = CancelProofRequest {
                job_id: submitted.job_id.clone(),
            };
            if let Err(e) = client.cancel_proof(cancel).await {
                return Answer::Unexpected(format!("{id}: CancelProof: {}", e.message()));
            }
        }
        Treatment::Resubmitted => match client.submit_proof(request).await {
            Ok(again) if again.get_ref().job_id == submitted.job_id => {}
            Ok(again) => {
                return Answer::Unexpected(format!(
                    "{id}: submitted again, it became job {} besides {}",
                    again.get_ref().job_id,
                    submitted.job_id
                ))
            }
            Err(e) => {
                return Answer::Unexpected(format!("{id}: SubmitProof again: {}", e.message()))
            }
        },
        Treatment::Plain | Treatment::Bad => {}
    }
    let done = match await_answer(client, &submitted.job_id).await {
        Ok(done) => done,
        Err(e) => return Answer::Unexpected(e),
    };
    let status = Status::try_from(done.status).unwrap_or(Status::Unknown);
    match (treatment, status) {
        (Treatment::Bad, Status::Failed) => Answer::Failed(None),
        (Treatment::Cancelled, Status::Cancelled) => Answer::Cancelled,
        (Treatment::Bad, Status::Completed) => {
            Answer::Unexpected(format!("{id}: a payload cut short was proved"))
        }
        (_, Status::Completed) => Answer::Completed {
            kind,
            latency: sent.elapsed(),
            lane: Duration::from_millis(done.total_ms.saturating_sub(done.queue_wait_ms)),
        },
        (_, Status::Failed) => Answer::Failed(Some(format!(
            "{id} ({treatment:?}): FAILED: {}",
            done.error_message
        ))),
        (_, status) => Answer::Unexpected(format!(
            "{id} ({treatment:?}): {}: {}",
            status.as_str_name(),
            done.error_message
        )),
    }
}

/// Runs `plan` against the daemon at `address`. An unreachable daemon is an error; what the
/// jobs came to is in the report.
pub async fn run(address: &str, plan: &SoakPlan) -> Result<SoakReport, String> {
    if plan.kinds.is_empty() || plan.jobs == 0 || plan.clients == 0 {
        return Err("a soak needs a kind of job, a job and a client at least".into());
    }
    let endpoint = Endpoint::from_shared(address.to_string())
        .map_err(|e| format!("bad daemon address {address:?}: {e}"))?;
    let mut watcher = connect(&endpoint, address).await?;
    let before = counters(&mut watcher).await?;
    let clients = plan.clients.min(plan.jobs);
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(connect(&endpoint, address).await?);
    }
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    let run_id = format!("soak-{}-{run_id}", std::process::id());
    let (next, answered) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let plan = Arc::new(plan.clone());
    let start = Instant::now();
    let tasks: Vec<_> = connected
        .into_iter()
        .map(|mut client| {
            let (next, answered, plan, run_id) =
                (next.clone(), answered.clone(), plan.clone(), run_id.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= plan.jobs {
                        return answers;
                    }
                    answers.push(one_job(&mut client, &plan, &run_id, index).await);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Memory samples until every client is done.
    let mut samples = Vec::new();
    let mut sampler = watcher.clone();
    let sample = |counters: DaemonCounters, jobs: usize| MemorySample {
        at: start.elapsed(),
        jobs,
        resident_bytes: counters.resident_bytes,
        vram_bytes: counters.vram_bytes,
    };
    while tasks.iter().any(|t| !t.is_finished()) {
        samples.push(sample(
            counters(&mut sampler).await?,
            answered.load(Ordering::Relaxed),
        ));
        let until = Instant::now() + plan.sample_every;
        while Instant::now() < until && tasks.iter().any(|t| !t.is_finished()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut report = SoakReport {
        jobs: plan.jobs,
        clients,
        ..Default::default()
    };
    for index in 0..plan.jobs {
        match Treatment::of(index, plan.anomaly_percent) {
            Treatment::Bad => report.bad += 1,
            Treatment::Cancelled => report.cancelled_asked += 1,
            Treatment::Resubmitted => report.resubmitted += 1,
            Treatment::Plain => {}
        }
    }
    for task in tasks {
        for answer in task.await.map_err(|e| format!("a client failed: {e}"))? {
            match answer {
                Answer::Completed {
                    kind,
                    latency,
                    lane,
                } => {
                    report.completed += 1;
                    let name = plan.kinds[kind].name.clone();
                    report.latencies.entry(name).or_default().push(latency);
                    report.lane_times.push(lane);
                }
                Answer::Failed(why) => {
                    report.failed += 1;
                    report.unexpected.extend(why);
                }
                Answer::Cancelled => report.cancelled += 1,
                Answer::Unexpected(what) => report.unexpected.push(what),
            }
        }
    }
    report.wall = start.elapsed();
    report.latencies.values_mut().for_each(|l| l.sort());
    report.lane_times.sort();
    report.flood = flood(&watcher, &plan, &run_id).await?;
    let after = counters(&mut watcher).await?;
    samples.push(sample(after, plan.jobs));
    report.samples = samples;
    report.daemon = DaemonCounters {
        completed: after.completed - before.completed,
        failed: after.failed - before.failed,
        cancelled: after.cancelled - before.cancelled,
        refused: after.refused - before.refused,
        resident_bytes: after.resident_bytes,
        vram_bytes: after.vram_bytes,
    };
    Ok(report)
}

/// `plan.flood` submissions of the first kind sent at once; the admitted ones awaited.
async fn flood(client: &Client, plan: &SoakPlan, run_id: &str) -> Result<FloodReport, String> {
    let sends: Vec<_> = (0..plan.flood)
        .map(|i| {
            let mut client = client.clone();
            let mut request = plan.kinds[0].request.clone();
            request.request_id = format!("{run_id}-flood-{i}");
            tokio::spawn(async move { client.submit_proof(request).await })
        })
        .collect();
    let mut report = FloodReport {
        sent: plan.flood,
        ..Default::default()
    };
    let mut admitted = Vec::new();
    for send in sends {
        match send
            .await
            .map_err(|e| format!("a flood client failed: {e}"))?
        {
            Ok(response) => admitted.push(response.into_inner().job_id),
            Err(e) if e.code() == tonic::Code::ResourceExhausted => report.refused += 1,
            Err(e) => return Err(format!("flood: SubmitProof: {}", e.message())),
        }
    }
    for job_id in admitted {
        let done = await_answer(&mut client.clone(), &job_id).await?;
        if done.status != Status::Completed as i32 {
            report
                .failed
                .push(format!("{job_id}: {}", done.error_message));
            continue;
        }
        report.completed += 1;
        report.lane_times.push(Duration::from_millis(
            done.total_ms.saturating_sub(done.queue_wait_ms),
        ));
    }
    report.lane_times.sort();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of every hundred jobs, the asked share are anomalies, spread evenly and in turn.
    #[test]
    fn anomalies_are_the_share_asked_in_turn() {
        let treatments: Vec<Treatment> = (0..1000).map(|i| Treatment::of(i, 10)).collect();
        let count = |t: Treatment| treatments.iter().filter(|&&x| x == t).count();
        assert_eq!(count(Treatment::Plain), 900);
        assert_eq!(
            [
                count(Treatment::Bad),
                count(Treatment::Cancelled),
                count(Treatment::Resubmitted)
            ],
            [34, 33, 33]
        );
        assert!((0..1000).all(|i| Treatment::of(i, 0) == Treatment::Plain));
        assert!((0..1000).all(|i| Treatment::of(i, 100) != Treatment::Plain));
    }

    #[test]
    fn counters_are_read_from_the_metrics_text() {
        let text = "# HELP x\nwgpu_groth16_proofs_completed_total 12\n\
                    wgpu_groth16_proofs_failed_total 3\nwgpu_groth16_proofs_cancelled_total 2\n\
                    wgpu_groth16_submissions_refused_total 40\n\
                    wgpu_groth16_vram_used_bytes{lane=\"0\"} 100\n\
                    wgpu_groth16_vram_used_bytes{lane=\"1\"} 50\n\
                    process_resident_memory_bytes 4096\n";
        assert_eq!(
            DaemonCounters::parse(text),
            DaemonCounters {
                completed: 12,
                failed: 3,
                cancelled: 2,
                refused: 40,
                resident_bytes: Some(4096),
                vram_bytes: Some(150),
            }
        );
    }
}
