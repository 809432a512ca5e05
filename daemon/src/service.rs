//! `cuzk.v1.ProvingEngine` over the [`Scheduler`]: each RPC as Curio calls it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};

use crate::pb::proving_engine_server::ProvingEngine;
use crate::pb::srs_status::Tier;
use crate::pb::*;
use crate::scheduler::{Scheduler, SubmitError};

pub struct Service {
    scheduler: Arc<Scheduler>,
}

impl Service {
    pub fn new(scheduler: Arc<Scheduler>) -> Self {
        Service { scheduler }
    }

    fn submit(&self, request: SubmitProofRequest) -> Result<SubmitProofResponse, Status> {
        let (job_id, queue_position, lane) =
            self.scheduler.submit(request).map_err(|e| match e {
                SubmitError::Full { .. } => Status::resource_exhausted(e.to_string()),
                SubmitError::ShuttingDown => Status::unavailable(e.to_string()),
            })?;
        let lanes = self.scheduler.lanes();
        Ok(SubmitProofResponse {
            job_id,
            queue_position,
            assigned_gpu: lane
                .and_then(|lane| lanes.get(lane))
                .map(|l| l.lane.name.clone())
                .unwrap_or_default(),
        })
    }
}

/// Work that blocks (parameter loads) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Status::internal(format!("the task failed: {e}")))?
        .map_err(Status::failed_precondition)
}

#[tonic::async_trait]
impl ProvingEngine for Service {
    async fn submit_proof(
        &self,
        request: Request<SubmitProofRequest>,
    ) -> Result<Response<SubmitProofResponse>, Status> {
        Ok(Response::new(self.submit(request.into_inner())?))
    }

    async fn await_proof(
        &self,
        request: Request<AwaitProofRequest>,
    ) -> Result<Response<AwaitProofResponse>, Status> {
        let request = request.into_inner();
        let timeout = (request.timeout_ms > 0).then(|| Duration::from_millis(request.timeout_ms));
        Ok(Response::new(
            self.scheduler.await_outcome(&request.job_id, timeout).await,
        ))
    }

    async fn prove(
        &self,
        request: Request<ProveRequest>,
    ) -> Result<Response<ProveResponse>, Status> {
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("ProveRequest.submit is missing"))?;
        let job = self.submit(submit)?;
        let result = self.scheduler.await_outcome(&job.job_id, None).await;
        Ok(Response::new(ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<CancelProofRequest>,
    ) -> Result<Response<CancelProofResponse>, Status> {
        let job_id = request.into_inner().job_id;
        match self.scheduler.cancel(&job_id) {
            Some(was_running) => Ok(Response::new(CancelProofResponse { was_running })),
            None => Err(Status::not_found(format!("no job {job_id:?}"))),
        }
    }

    async fn get_status(
        &self,
        _: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        let counters = self.scheduler.counters();
        let vram_in_use = self.scheduler.backend().vram_in_use();
        let gpus = self
            .scheduler
            .lanes()
            .into_iter()
            .enumerate()
            .map(|(ordinal, lane)| {
                let (current_job_id, current_proof_kind) = lane.current_job.unwrap_or_default();
                GpuStatus {
                    ordinal: ordinal as u32,
                    name: lane.lane.name,
                    // Neither is known: wgpu tells no device memory size.
                    vram_total_bytes: None,
                    vram_free_bytes: None,
                    current_job_id,
                    current_proof_kind,
                    vram_used_bytes: vram_in_use.get(ordinal).copied().flatten(),
                }
            })
            .collect();
        let loaded_srs = self
            .scheduler
            .backend()
            .loaded()
            .into_iter()
            .map(|srs| SrsStatus {
                circuit_id: srs.circuit_id,
                tier: Tier::Hot as i32,
                size_bytes: srs.size_bytes,
                ref_count: srs.in_flight,
            })
            .collect();
        let queues = self
            .scheduler
            .queues()
            .into_iter()
            .map(|(proof_kind, counts)| QueueStatus {
                proof_kind,
                pending: counts.pending,
                in_progress: counts.in_progress,
            })
            .collect();
        Ok(Response::new(GetStatusResponse {
            gpus,
            loaded_srs,
            queues,
            total_proofs_completed: counters.completed,
            total_proofs_failed: counters.failed,
            uptime_seconds: self.scheduler.uptime().as_secs(),
            // Staging host memory is not tracked.
            pinned_memory_bytes: None,
            pinned_memory_limit_bytes: None,
        }))
    }

    async fn get_metrics(
        &self,
        _: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        Ok(Response::new(GetMetricsResponse {
            prometheus_text: self.metrics(),
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<PreloadSrsRequest>,
    ) -> Result<Response<PreloadSrsResponse>, Status> {
        let circuit_id = request.into_inner().circuit_id;
        let backend = self.scheduler.backend().clone();
        let (already_loaded, took) = blocking(move || backend.preload(&circuit_id)).await?;
        Ok(Response::new(PreloadSrsResponse {
            already_loaded,
            load_time_ms: took.as_millis() as u64,
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<EvictSrsRequest>,
    ) -> Result<Response<EvictSrsResponse>, Status> {
        let circuit_id = request.into_inner().circuit_id;
        let backend = self.scheduler.backend().clone();
        let (was_loaded, freed_bytes) = blocking(move || backend.evict(&circuit_id)).await?;
        Ok(Response::new(EvictSrsResponse {
            was_loaded,
            freed_bytes,
        }))
    }
}

impl Service {
    /// The Prometheus text exposition of the daemon's counters and gauges.
    fn metrics(&self) -> String {
        let counters = self.scheduler.counters();
        let mut text = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(text, "{name}{labels} {value}");
            }
        };
        let plain = |value: u64| vec![(String::new(), value as f64)];
        metric(
            "wgpu_groth16_proofs_completed_total",
            "counter",
            "Jobs that returned a proof.",
            &plain(counters.completed),
        );
        metric(
            "wgpu_groth16_proofs_failed_total",
            "counter",
            "Jobs that failed.",
            &plain(counters.failed),
        );
        metric(
            "wgpu_groth16_proofs_cancelled_total",
            "counter",
            "Jobs cancelled, pending or running.",
            &plain(counters.cancelled),
        );
        metric(
            "wgpu_groth16_submissions_refused_total",
            "counter",
            "Submissions refused because the queue was full.",
            &plain(counters.refused_full),
        );
        let queues = self.scheduler.queues();
        let by_kind = |pick: fn(&crate::scheduler::QueueCounts) -> u32| -> Vec<(String, f64)> {
            queues
                .iter()
                .map(|(kind, counts)| (format!("{{kind=\"{kind}\"}}"), f64::from(pick(counts))))
                .collect()
        };
        metric(
            "wgpu_groth16_jobs_pending",
            "gauge",
            "Jobs waiting for a lane.",
            &by_kind(|c| c.pending),
        );
        metric(
            "wgpu_groth16_jobs_in_progress",
            "gauge",
            "Jobs being proved.",
            &by_kind(|c| c.in_progress),
        );
        let mut kinds: Vec<_> = counters.proof_seconds.iter().collect();
        kinds.sort_by(|a, b| a.0.cmp(b.0));
        let label = |kind: &str| format!("{{kind=\"{kind}\"}}");
        metric(
            "wgpu_groth16_proof_seconds_sum",
            "counter",
            "Seconds spent proving completed jobs.",
            &kinds
                .iter()
                .map(|(kind, (_, seconds))| (label(kind), *seconds))
                .collect::<Vec<_>>(),
        );
        metric(
            "wgpu_groth16_proof_seconds_count",
            "counter",
            "Completed jobs counted in wgpu_groth16_proof_seconds_sum.",
            &kinds
                .iter()
                .map(|(kind, (count, _))| (label(kind), *count as f64))
                .collect::<Vec<_>>(),
        );
        let vram: Vec<(String, f64)> = self
            .scheduler
            .backend()
            .vram_in_use()
            .into_iter()
            .enumerate()
            .filter_map(|(lane, bytes)| Some((format!("{{lane=\"{lane}\"}}"), bytes? as f64)))
            .collect();
        metric(
            "wgpu_groth16_vram_used_bytes",
            "gauge",
            "Device memory each GPU lane's engine holds by its own accounting (not the driver's).",
            &vram,
        );
        if let Some(bytes) = resident_bytes() {
            metric(
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                &[(String::new(), bytes as f64)],
            );
        }
        metric(
            "wgpu_groth16_uptime_seconds",
            "gauge",
            "Seconds since the daemon started.",
            &[(String::new(), self.scheduler.uptime().as_secs_f64())],
        );
        text
    }
}

/// This process's resident set (`VmRSS`), where the platform tells it (Linux).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib << 10)
}
