//! The daemon's prover: Filecoin SNARKs on its engines (a GPU each, or the CPU without one),
//! each engine proving one job a lane, as many lanes as jobs it proves at once; each
//! parameter set loaded once per engine, shared by its lanes, and kept until evicted.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_core::OsRng;
use wgpu_groth16::groth16::{CancelToken, Prover, ProverEngine, ProvingParameters, Step};
use wgpu_groth16::recorded::RecordedKey;
use wgpu_groth16::sparse::MatrixBytes;
use wgpu_groth16_filecoin::c1::{prover_id_of_miner, C1Output};
use wgpu_groth16_filecoin::job::proofs_to_bytes;
use wgpu_groth16_filecoin::post::PostJob;
use wgpu_groth16_filecoin::recorded::RecordedCache;
use wgpu_groth16_filecoin::update::UpdateJob;
use wgpu_groth16_filecoin::{ProofJob, SealCommit};

use crate::circuits::{post_proof, update_proof, Circuit};
use crate::pb::{ProofKind, SubmitProofRequest};
use crate::scheduler::{Backend, Lane, LoadedSrs, Proved};

/// Sends a prover's plan the bytes of the constraint matrices it will hold, or drops the
/// sender where they cannot be had.
type TellMatrices<'a> = &'a dyn Fn(&Prover, mpsc::Sender<MatrixBytes>);

/// A prover `make` makes from a receiver of the matrices' size (`None`: a plan without
/// them), told them where `matrices` can tell them.
fn told_prover<E>(
    matrices: Option<TellMatrices<'_>>,
    make: impl FnOnce(Option<mpsc::Receiver<MatrixBytes>>) -> Result<Prover, E>,
) -> Result<Prover, E> {
    match matrices {
        Some(tell) => {
            let (plan, sizes) = mpsc::channel();
            let prover = make(Some(sizes))?;
            tell(&prover, plan);
            Ok(prover)
        }
        None => make(None),
    }
}

struct Resident {
    prover: Arc<Prover>,
    size_bytes: u64,
}

/// Given parameters and randomness instead of the parameter files and the OS's r and s:
/// for comparing the daemon's proofs with bellperson's byte for byte (tests, benchmarks).
/// Proofs made so are not zero-knowledge, and with parameters that no setup made they fail
/// `verify_seal`, so they are not verified unless `verify` asks for it. Never for proofs
/// that go on chain.
pub struct Comparison {
    pub circuit_id: String,
    pub params: ProvingParameters,
    pub r: Scalar,
    pub s: Scalar,
    /// Check PoRep proofs with `verify_seal` as in production (against the verifying key in
    /// filecoin-proofs' parameter cache): for showing what a proof that fails it does.
    pub verify: bool,
}

pub struct FilecoinBackend {
    engines: Vec<Arc<ProverEngine>>,
    /// Lanes per engine: jobs it proves at once, so that one job's CPU work (vanilla checks,
    /// synthesis, `verify_seal`) runs while another's partitions use the GPU. Lane l is on
    /// engine l / jobs_per_engine.
    jobs_per_engine: usize,
    /// By engine and circuit id: an engine's lanes share its parameters.
    resident: Mutex<HashMap<(usize, String), Arc<Resident>>>,
    /// One parameter load at a time: two jobs of a new kind must not load it twice.
    loading: Mutex<()>,
    comparison: Option<Comparison>,
    /// Takes benchmark-only C1 outputs (see [`with_benchmark_jobs`](Self::with_benchmark_jobs)).
    benchmark_jobs: bool,
}

impl FilecoinBackend {
    /// A backend with one lane per engine (at least one).
    pub fn new(engines: Vec<Arc<ProverEngine>>) -> Self {
        FilecoinBackend {
            engines,
            jobs_per_engine: 1,
            resident: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
            comparison: None,
            benchmark_jobs: false,
        }
    }

    /// Takes benchmark-only C1 outputs (`seal --benchmark-only`: random vanilla proofs of a
    /// sector's real shape, marked as such) as PoRep jobs, for timing the daemon at
    /// production sizes: their vanilla proofs are not checked and their proofs, which
    /// cannot verify, are not checked by `verify_seal`. Every other C1 output is checked and
    /// its proof verified as always; without this, benchmark-only ones are refused.
    pub fn with_benchmark_jobs(mut self, on: bool) -> Self {
        self.benchmark_jobs = on;
        self
    }

    /// `jobs` lanes per engine (at least one), proving that many jobs on it at once with
    /// one copy of their parameters.
    pub fn with_jobs_per_engine(mut self, jobs: usize) -> Self {
        self.jobs_per_engine = jobs.max(1);
        self
    }

    fn engine_of(&self, lane: usize) -> usize {
        lane / self.jobs_per_engine
    }

    /// A backend that proves with `comparison`'s parameters, r and s (see [`Comparison`]).
    pub fn comparing(engines: Vec<Arc<ProverEngine>>, comparison: Comparison) -> Self {
        FilecoinBackend {
            comparison: Some(comparison),
            ..Self::new(engines)
        }
    }

    /// The prover of `circuit_id` and the size of its parameters: from its parameter files,
    /// loaded before this returns, or from the comparison's parameters. With `matrices`, the
    /// prover's plan waits for the size of the constraint matrices it sends (a job's, as
    /// `c2`'s plan does) before it places bases: matrices on the device keep a small budget's
    /// products and gathers there. A preload has no job: its plan sets no room aside for them.
    fn load(
        &self,
        engine: usize,
        circuit_id: &str,
        matrices: Option<TellMatrices<'_>>,
    ) -> Result<(Prover, u64), String> {
        let engine = self
            .engines
            .get(engine)
            .ok_or_else(|| format!("no engine {engine}"))?
            .clone();
        let (prover, size_bytes) = match &self.comparison {
            Some(comparison) => {
                if comparison.circuit_id != circuit_id {
                    return Err(format!(
                        "this comparing daemon holds {} only, not {circuit_id}",
                        comparison.circuit_id
                    ));
                }
                let params = comparison.params.clone();
                let prover = told_prover(matrices, |sizes| match sizes {
                    Some(sizes) => Prover::loading_for(engine, sizes, move || Ok(params)),
                    None => Prover::with_engine(params, engine),
                })
                .map_err(|e| format!("{circuit_id}: {e}"))?;
                prover.params().map_err(|e| format!("{circuit_id}: {e}"))?;
                // No file to measure: the set's size is its bases' bytes.
                (prover, comparison.params.bases_bytes())
            }
            None => {
                let files = Circuit::params_files(circuit_id)?;
                let prover = told_prover(matrices, |sizes| match sizes {
                    Some(sizes) => files.prover_for(engine, sizes).map(|(prover, _)| prover),
                    None => files.prover(engine).map(|(prover, _)| prover),
                })
                .map_err(|e| format!("{circuit_id}: {e}"))?;
                // The prover loads in the background; a resident set is a loaded one.
                prover
                    .params()
                    .map_err(|e| format!("{circuit_id}: {}", files.params_error(e)))?;
                let size_bytes = std::fs::metadata(&files.params).map_or(0, |m| m.len());
                (prover, size_bytes)
            }
        };
        if let Some(plan) = prover.plan_line() {
            log::info!("{circuit_id} on {}: {plan}", prover.engine().describe());
        }
        Ok((prover, size_bytes))
    }

    /// The device plan of `circuit_id`'s parameters on `engine` (the line logged when they
    /// loaded): `None` when they are not loaded there or the engine has no GPU.
    pub fn plan_of(&self, engine: usize, circuit_id: &str) -> Option<String> {
        let resident = self.resident.lock().unwrap_or_else(|e| e.into_inner());
        resident
            .get(&(engine, circuit_id.to_string()))?
            .prover
            .plan_line()
    }

    /// The prover of `circuit_id` on `engine`, loading its parameters if they are not
    /// resident; whether they were, and the time the load took (zero if they were).
    fn prover(
        &self,
        engine: usize,
        circuit_id: &str,
        matrices: Option<TellMatrices<'_>>,
    ) -> Result<(Arc<Resident>, bool, Duration), String> {
        let key = (engine, circuit_id.to_string());
        let resident = |this: &Self| {
            this.resident
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .cloned()
        };
        if let Some(kept) = resident(self) {
            return Ok((kept, true, Duration::ZERO));
        }
        let _one_load = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = resident(self) {
            return Ok((kept, true, Duration::ZERO));
        }
        let start = Instant::now();
        let (prover, size_bytes) = self.load(engine, circuit_id, matrices)?;
        let kept = Arc::new(Resident {
            prover: Arc::new(prover),
            size_bytes,
        });
        self.resident
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, kept.clone());
        log::info!(
            "{circuit_id}: parameters loaded on engine {engine} in {:.2?}",
            start.elapsed()
        );
        Ok((kept, false, start.elapsed()))
    }

    /// `job`'s partition proofs on `lane` with its circuit's resident parameters (r and s
    /// from the OS, or the comparison's), stopped between partitions once `cancel` is
    /// cancelled; what it took, less the proof bytes.
    fn prove_job(
        &self,
        job: &impl ProofJob,
        circuit: Circuit,
        request: &SubmitProofRequest,
        lane: usize,
        cancel: &CancelToken,
    ) -> Result<(Vec<Proof<Bls12>>, Proved), String> {
        let sector_size = job.params_files().map_err(|e| e.to_string())?.sector_size;
        if request.sector_size != 0 && request.sector_size != sector_size {
            return Err(format!(
                "sector_size {} but the job's proof is of {sector_size}-byte sectors",
                request.sector_size
            ));
        }
        let engine = self.engine_of(lane);
        // A first load's plan learns the job's matrices. Without them it goes untold (the
        // sender dropped); proving records them again or falls back to full synthesis.
        let circuit_id = circuit.id(sector_size)?;
        let tell_matrices = |prover: &Prover, plan: mpsc::Sender<MatrixBytes>| {
            let Some(cache) = RecordedCache::by_default() else {
                return;
            };
            let told = match &self.comparison {
                // No parameter files: the key is of the comparison's verifying key, as the
                // proving's will be (the prover's parameters wait for this plan).
                Some(comparison) => {
                    RecordedKey::new(&job.circuit_identity(), &comparison.params.vk)
                        .map_err(Into::into)
                        .and_then(|key| job.recorded_system_of(cache, &key, Some(plan)))
                        .map(drop)
                }
                None => job.recorded_system(cache, prover, Some(plan)).map(drop),
            };
            if let Err(e) = told {
                log::warn!("{circuit_id}: the plan goes without the matrices: {e}");
            }
        };
        let (resident, _, srs_load) = self.prover(engine, &circuit_id, Some(&tell_matrices))?;
        let partitions = job.partitions();
        let (rs, ss) = match &self.comparison {
            Some(comparison) => (
                vec![comparison.r; partitions],
                vec![comparison.s; partitions],
            ),
            None => {
                let draw = || (0..partitions).map(|_| Scalar::random(OsRng)).collect();
                (draw(), draw())
            }
        };
        let recorded = RecordedCache::by_default();
        let (proofs, _, report) = job
            .prove_partitions_reporting(&resident.prover, recorded, &rs, &ss, cancel)
            .map_err(|e| e.to_string())?;
        let proved = Proved {
            proof: Vec::new(),
            srs_load,
            synthesis: report.time(Step::Synthesis),
            gpu_compute: report.after_synthesis(),
        };
        Ok((proofs, proved))
    }

    /// What `seal_commit_phase2` returns, checked by `verify_seal` unless comparing.
    fn prove_porep(
        &self,
        request: &SubmitProofRequest,
        lane: usize,
        cancel: &CancelToken,
    ) -> Result<Proved, String> {
        let c1 = C1Output::from_json(&request.vanilla_proof, "vanilla_proof")
            .map_err(|e| e.to_string())?;
        let benchmark = c1.benchmark_only;
        if !self.benchmark_jobs {
            c1.require_sealed()
                .map_err(|e| format!("{e} (a daemon takes them with `serve --benchmark-jobs`)"))?;
        }
        let given = (request.sector_number != 0).then_some(request.sector_number);
        let sector_id = c1.sector_id(given).map_err(|e| e.to_string())?;
        let commit = SealCommit::new(c1.phase1, prover_id_of_miner(request.miner_id), sector_id)
            .map_err(|e| e.to_string())?;
        if !benchmark {
            commit.check_vanilla_proofs().map_err(|e| e.to_string())?;
        }
        let (proofs, proved) = self.prove_job(&commit, Circuit::Porep, request, lane, cancel)?;
        let proof = commit.proof_bytes(&proofs).map_err(|e| e.to_string())?;
        if !benchmark && self.comparison.as_ref().is_none_or(|c| c.verify) {
            commit.verify(&proof).map_err(|e| e.to_string())?;
        }
        Ok(Proved { proof, ..proved })
    }

    /// Winning PoSt, or one Window PoSt partition: 192 bytes.
    fn prove_post(
        &self,
        request: &SubmitProofRequest,
        kind: ProofKind,
        lane: usize,
        cancel: &CancelToken,
    ) -> Result<Proved, String> {
        let proof = post_proof(request.registered_proof)?;
        let randomness = <[u8; 32]>::try_from(request.randomness.as_slice()).map_err(|_| {
            format!(
                "randomness must be 32 bytes, not {}",
                request.randomness.len()
            )
        })?;
        let prover_id = prover_id_of_miner(request.miner_id);
        let vanilla = request.vanilla_proofs.clone();
        let (job, circuit) = match kind {
            ProofKind::WinningPost => (
                PostJob::winning(proof, randomness, prover_id, vanilla),
                Circuit::WinningPost,
            ),
            _ => (
                PostJob::window(
                    proof,
                    randomness,
                    prover_id,
                    vanilla,
                    request.partition_index as usize,
                ),
                Circuit::WindowPost,
            ),
        };
        let job = job.map_err(|e| e.to_string())?;
        let (proofs, proved) = self.prove_job(&job, circuit, request, lane, cancel)?;
        let proof = proofs_to_bytes(&proofs).map_err(|e| e.to_string())?;
        Ok(Proved { proof, ..proved })
    }

    /// A SnapDeals update: its partition proofs concatenated, 192 bytes each.
    fn prove_update(
        &self,
        request: &SubmitProofRequest,
        lane: usize,
        cancel: &CancelToken,
    ) -> Result<Proved, String> {
        let commitment = |bytes: &[u8], name: &str| {
            <[u8; 32]>::try_from(bytes)
                .map_err(|_| format!("{name} must be 32 bytes, not {}", bytes.len()))
        };
        let job = UpdateJob::new(
            update_proof(request.registered_proof)?,
            request.vanilla_proofs.clone(),
            commitment(&request.comm_r_old, "comm_r_old")?,
            commitment(&request.comm_r_new, "comm_r_new")?,
            commitment(&request.comm_d_new, "comm_d_new")?,
        )
        .map_err(|e| e.to_string())?;
        let (proofs, proved) = self.prove_job(&job, Circuit::SnapDeals, request, lane, cancel)?;
        let proof = proofs_to_bytes(&proofs).map_err(|e| e.to_string())?;
        Ok(Proved { proof, ..proved })
    }
}

impl Backend for FilecoinBackend {
    fn lanes(&self) -> Vec<Lane> {
        let jobs = self.jobs_per_engine;
        self.engines
            .iter()
            .flat_map(|engine| {
                let name = engine.describe();
                (0..jobs).map(move |slot| Lane {
                    name: match jobs {
                        1 => name.clone(),
                        _ => format!("{name} (job {} of {jobs})", slot + 1),
                    },
                })
            })
            .collect()
    }

    fn prove(
        &self,
        request: &SubmitProofRequest,
        lane: usize,
        cancel: &CancelToken,
    ) -> Result<Proved, String> {
        match ProofKind::try_from(request.proof_kind) {
            Ok(ProofKind::PorepSealCommit) => self.prove_porep(request, lane, cancel),
            Ok(kind @ (ProofKind::WinningPost | ProofKind::WindowPostPartition)) => {
                self.prove_post(request, kind, lane, cancel)
            }
            Ok(ProofKind::SnapDealsUpdate) => self.prove_update(request, lane, cancel),
            Ok(ProofKind::Unspecified) | Err(_) => {
                Err(format!("unknown proof kind {}", request.proof_kind))
            }
        }
    }

    /// Loads on every engine; "already loaded" when every engine had it.
    fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), String> {
        let start = Instant::now();
        let mut already = true;
        for engine in 0..self.engines.len() {
            already &= self.prover(engine, circuit_id, None)?.1;
        }
        Ok((
            already,
            if already {
                Duration::ZERO
            } else {
                start.elapsed()
            },
        ))
    }

    /// Drops it from every engine; proofs running with it keep it until they end.
    fn evict(&self, circuit_id: &str) -> Result<(bool, u64), String> {
        Circuit::parse(circuit_id)?;
        let mut resident = self.resident.lock().unwrap_or_else(|e| e.into_inner());
        let mut freed = None;
        resident.retain(|(_, id), kept| {
            let keep = id != circuit_id;
            if !keep {
                *freed.get_or_insert(0) += kept.size_bytes;
            }
            keep
        });
        Ok(freed.map_or((false, 0), |bytes| (true, bytes)))
    }

    /// Each circuit held on any engine, once, with the bytes of its parameters summed over
    /// the engines that hold it, and the proofs running with it on any lane (each holds its
    /// engine's copy while it runs).
    fn loaded(&self) -> Vec<LoadedSrs> {
        let mut loaded: HashMap<String, LoadedSrs> = HashMap::new();
        for ((_, id), kept) in self
            .resident
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let srs = loaded.entry(id.clone()).or_insert_with(|| LoadedSrs {
                circuit_id: id.clone(),
                size_bytes: 0,
                in_flight: 0,
            });
            srs.size_bytes += kept.size_bytes;
            // Every holder but this map is a proof running with it.
            srs.in_flight += (Arc::strong_count(kept) - 1) as u32;
        }
        let mut loaded: Vec<LoadedSrs> = loaded.into_values().collect();
        loaded.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        loaded
    }

    /// What each lane's GPU engine holds in its buffer pool (resident bases, constraint
    /// matrices, MSM workspaces, pooled vectors): our allocation, not the driver's figure.
    fn vram_in_use(&self) -> Vec<Option<u64>> {
        (0..self.engines.len() * self.jobs_per_engine)
            .map(|lane| {
                let gpu = self.engines[self.engine_of(lane)].usable_gpu()?;
                Some(gpu.pool().stats().allocated_bytes)
            })
            .collect()
    }
}
