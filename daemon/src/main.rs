//! `wgpu-groth16-daemon serve`: the proving daemon Curio's `[Cuzk] Address` points at;
//! `wgpu-groth16-daemon load`: many clients' jobs against one, for throughput and latency.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use wgpu_groth16::groth16::{Backend, ProverConfig, ProverEngine};
use wgpu_groth16_cli::{DeviceArgs, VramArgs};
use wgpu_groth16_daemon::backend::FilecoinBackend;
use wgpu_groth16_daemon::pb::{Priority, ProofKind, SubmitProofRequest};
use wgpu_groth16_daemon::peers::{Network, Peers};

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve cuzk.v1.ProvingEngine until SIGTERM or Ctrl-C: pending jobs are then cancelled
    /// and running ones finish.
    #[command(
        after_help = "What it promises: every admitted job is answered exactly once \
        (a proof, a failure with a message, or CANCELLED), whatever its payload and whatever \
        happens to its parameter files, the cache folder or the GPU; a bad job fails alone; \
        a submission past --max-pending is refused at once (RESOURCE_EXHAUSTED); a lost GPU \
        is redone on the CPU unless --no-cpu-fallback; memory stays flat (a finished job \
        keeps its outcome, not its payload); a parameter file cut or rewritten on disk is an \
        error of the job that loads it, never a crash; no half-written cache file is read \
        as whole. The protocol has no authentication: keep the default loopback address or \
        use --allow and a firewall. More: docs/daemon.md."
    )]
    Serve {
        /// Address to listen on (Curio's `[Cuzk] Address`). The protocol has no
        /// authentication: beyond loopback, whoever reaches the address can submit jobs
        /// (limit them with --allow, and a firewall).
        #[arg(long, default_value = "127.0.0.1:9820")]
        listen: String,
        /// Peers that may connect, as networks (10.0.0.0/8, 192.168.1.7, fd00::/8; a comma
        /// list); other connections are closed as they arrive. Default: every peer that
        /// reaches --listen.
        #[arg(long, value_delimiter = ',')]
        allow: Vec<Network>,
        /// Jobs that may wait for a GPU; more are refused with RESOURCE_EXHAUSTED.
        #[arg(long, default_value_t = 64)]
        max_pending: usize,
        /// Parameter sets to load before serving, e.g. porep-32g (a comma list).
        #[arg(long, value_delimiter = ',')]
        preload: Vec<String>,
        /// GPUs to prove on, one lane each, best first (the selection's adapters); with
        /// BELLMAN_NO_GPU set, one lane on the CPU. Fewer adapters than asked for is an
        /// error: a C2 on the CPU takes hours.
        #[arg(long, default_value_t = 1)]
        gpus: usize,
        /// Jobs each GPU proves at once (its lanes), sharing one copy of the parameters: one
        /// job's CPU work (vanilla checks, synthesis, verify_seal) runs while another's
        /// partitions use the GPU. Each job's batch has its own proofs in flight, so VRAM
        /// and host memory grow with it.
        #[arg(long, default_value_t = 1)]
        jobs_per_gpu: usize,
        /// Fail the job when its GPU fails (a lost device, an allocation refused), and every
        /// later job of that GPU's lanes, instead of redoing the work on the CPU: a 32 GiB C2
        /// takes hours there, and Curio can retry the job on another machine.
        #[arg(long)]
        no_cpu_fallback: bool,
        /// Take benchmark-only C1 outputs (`wgpu-groth16-filecoin seal --benchmark-only`) as
        /// PoRep jobs, for timing the daemon at production sizes: their vanilla proofs are
        /// not checked, and their proofs (which cannot verify) not checked by verify_seal.
        /// Every other job is checked as always. Not for a daemon whose proofs go on chain.
        #[arg(long)]
        benchmark_jobs: bool,
        /// Each GPU's budget, shared by its lanes' jobs.
        #[command(flatten)]
        vram: VramArgs,
    },
    /// Send a running daemon JOBS POREP_SEAL_COMMIT jobs of one C1 output from CLIENTS
    /// concurrent clients (one job in flight each) and print proofs a second, wall time,
    /// latency percentiles (submit to result) and the lanes' busy shares. Exit status 1 if a
    /// job failed.
    Load {
        #[command(flatten)]
        c2: C2Jobs,
        #[arg(long, default_value_t = 1)]
        clients: usize,
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
    /// Soak a running daemon: JOBS POREP_SEAL_COMMIT jobs of one C1 output (and, with
    /// --winning-sector, Winning PoSt jobs of its sector in turn) from CLIENTS concurrent
    /// clients, ANOMALIES in a hundred of them cut short, cancelled at once or
    /// submitted twice; then FLOOD submissions at once past --max-pending. Prints each kind
    /// of answer beside the daemon's own counters (which must agree: no job lost or answered
    /// twice), latency percentiles, and the daemon's RSS and VRAM over time. Exit status 1
    /// if anything was unexpected.
    Soak {
        #[command(flatten)]
        c2: C2Jobs,
        #[arg(long, default_value_t = 32)]
        clients: usize,
        #[arg(long, default_value_t = 2000)]
        jobs: usize,
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
        anomalies: u32,
        #[arg(long, default_value_t = 200)]
        flood: usize,
        /// Seconds between samples of the daemon's memory.
        #[arg(long, default_value_t = 5.0)]
        sample_every: f64,
        /// Every other job a Winning PoSt of the C1 output's sector, whose files `seal --dir`
        /// left in this folder (the daemon needs its parameters: `setup --winning-post`).
        #[arg(long)]
        winning_sector: Option<PathBuf>,
    },
}

/// Where `load` and `soak` send PoRep C2 jobs, and of what.
#[derive(clap::Args)]
struct C2Jobs {
    /// The daemon's address.
    #[arg(long, default_value = "http://127.0.0.1:9820")]
    address: String,
    /// The C1 output (filecoin-proofs-api's JSON or Curio's wrapper), sent as it is.
    #[arg(long)]
    c1: PathBuf,
    /// The miner (actor id) the sector was sealed for.
    #[arg(long)]
    miner_id: u64,
    /// The sector number; needed unless the C1 output is Curio's wrapper.
    #[arg(long, default_value_t = 0)]
    sector_id: u64,
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve {
            listen,
            allow,
            max_pending,
            preload,
            gpus,
            jobs_per_gpu,
            no_cpu_fallback,
            benchmark_jobs,
            vram,
        } => match vram.bytes() {
            Err(e) => Err(e.to_string()),
            Ok(vram_budget) => serve(
                &cli.device,
                &listen,
                Peers::only(allow),
                max_pending,
                &preload,
                Lanes {
                    gpus,
                    jobs_per_gpu,
                    cpu_fallback: !no_cpu_fallback,
                    benchmark_jobs,
                    vram_budget,
                },
            ),
        },
        Command::Load { c2, clients, jobs } => load(&c2, clients, jobs),
        Command::Soak {
            c2,
            clients,
            jobs,
            anomalies,
            flood,
            sample_every,
            winning_sector,
        } => c2_request(&c2).and_then(|request| {
            use wgpu_groth16_daemon::soak::SoakJob;
            let mut kinds = vec![SoakJob {
                name: "POREP_SEAL_COMMIT".into(),
                request,
            }];
            if let Some(dir) = &winning_sector {
                kinds.push(SoakJob {
                    name: "WINNING_POST".into(),
                    request: winning_request(&c2, dir)?,
                });
            }
            let plan = wgpu_groth16_daemon::soak::SoakPlan {
                kinds,
                jobs,
                clients,
                anomaly_percent: anomalies,
                flood,
                sample_every: std::time::Duration::try_from_secs_f64(sample_every)
                    .map_err(|e| format!("--sample-every {sample_every}: {e}"))?,
            };
            soak(&c2.address, &plan)
        }),
    };
    match result {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What `serve` proves on.
struct Lanes {
    gpus: usize,
    jobs_per_gpu: usize,
    cpu_fallback: bool,
    benchmark_jobs: bool,
    vram_budget: Option<u64>,
}

fn serve(
    device: &DeviceArgs,
    listen: &str,
    peers: Peers,
    max_pending: usize,
    preload: &[String],
    lanes: Lanes,
) -> Result<ExitCode, String> {
    // Before any thread starts: memory freed after a job goes back to the system.
    wgpu_groth16_daemon::fix_mmap_threshold();
    let selector = device.selector().map_err(|e| e.to_string())?;
    let config = ProverConfig {
        backend: Backend::gpu_unless_disabled(selector),
        vram_budget: lanes.vram_budget,
        ..Default::default()
    };
    let engines = ProverEngine::open_best(&config, lanes.gpus).map_err(|e| e.to_string())?;
    for engine in &engines {
        engine.set_cpu_fallback(lanes.cpu_fallback);
    }
    if lanes.benchmark_jobs {
        log::warn!(
            "--benchmark-jobs: benchmark-only C1 outputs are proved unchecked, and their proofs \
             cannot verify; not for a daemon whose proofs go on chain"
        );
    }
    let backend = Arc::new(
        FilecoinBackend::new(engines)
            .with_jobs_per_engine(lanes.jobs_per_gpu)
            .with_benchmark_jobs(lanes.benchmark_jobs),
    );
    for circuit_id in preload {
        use wgpu_groth16_daemon::scheduler::Backend;
        let (_, took) = backend.preload(circuit_id)?;
        log::info!("{circuit_id} loaded in {:.2?}", took);
    }
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        if !addr.ip().is_loopback() {
            log::warn!(
                "listening on {addr}, beyond this machine: the protocol has no \
                 authentication, so {} can submit jobs",
                match peers.admits_any() {
                    true => "anyone who reaches this address (limit them with --allow)".into(),
                    false => format!("any peer in {peers}"),
                }
            );
        }
        log::info!(
            "serving cuzk.v1.ProvingEngine on {} to {peers} ({} pending jobs at most)",
            wgpu_groth16_daemon::describe(addr),
            max_pending
        );
        wgpu_groth16_daemon::serve(listener, peers, backend, max_pending, shutdown_signal())
            .await
            .map_err(|e| e.to_string())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A POREP_SEAL_COMMIT request of the C1 output at `c1`, read whole up to the daemon's
/// largest request.
fn c2_request(jobs: &C2Jobs) -> Result<SubmitProofRequest, String> {
    let c1 = &jobs.c1;
    use std::io::Read;
    let limit = wgpu_groth16_daemon::MAX_MESSAGE_BYTES as u64;
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", c1.display());
    let mut vanilla_proof = Vec::new();
    std::fs::File::open(c1)
        .map_err(cannot)?
        .take(limit + 1)
        .read_to_end(&mut vanilla_proof)
        .map_err(cannot)?;
    if vanilla_proof.len() as u64 > limit {
        return Err(format!(
            "{}: more than the {limit} bytes a request can carry",
            c1.display()
        ));
    }
    Ok(SubmitProofRequest {
        proof_kind: ProofKind::PorepSealCommit as i32,
        priority: Priority::Normal as i32,
        vanilla_proof,
        sector_number: jobs.sector_id,
        miner_id: jobs.miner_id,
        ..Default::default()
    })
}

/// A WINNING_POST request of the sector of `jobs`' C1 output, sealed into `dir`, for fixed
/// challenge randomness.
fn winning_request(jobs: &C2Jobs, dir: &std::path::Path) -> Result<SubmitProofRequest, String> {
    use wgpu_groth16_filecoin::c1::{prover_id_of_miner, C1Output};
    let c1 = C1Output::read(&jobs.c1).map_err(|e| e.to_string())?;
    let given = (jobs.sector_id != 0).then_some(jobs.sector_id);
    let sector_id = c1.sector_id(given).map_err(|e| e.to_string())?;
    let sector_size = u64::from(c1.phase1.registered_proof.sector_size());
    let proof =
        wgpu_groth16_filecoin::post::winning_post_proof(sector_size).map_err(|e| e.to_string())?;
    // A field element: its top bits clear.
    let mut randomness = [7u8; 32];
    randomness[31] &= 0x3f;
    let vanilla = wgpu_groth16_filecoin::sealing::post_vanilla(
        proof,
        dir,
        c1.phase1.comm_r,
        prover_id_of_miner(jobs.miner_id),
        sector_id,
        &randomness,
    )
    .map_err(|e| format!("the Winning PoSt of the sector in {}: {e}", dir.display()))?;
    Ok(SubmitProofRequest {
        proof_kind: ProofKind::WinningPost as i32,
        priority: Priority::Normal as i32,
        registered_proof: wgpu_groth16_daemon::circuits::post_proof_number(proof),
        vanilla_proofs: vec![vanilla],
        randomness: randomness.to_vec(),
        miner_id: jobs.miner_id,
        sector_size,
        ..Default::default()
    })
}

/// Prints the report; status 1 if anything was unexpected.
fn soak(address: &str, plan: &wgpu_groth16_daemon::soak::SoakPlan) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let report = runtime.block_on(wgpu_groth16_daemon::soak::run(address, plan))?;
    print!("{report}");
    match report.is_clean() {
        true => Ok(ExitCode::SUCCESS),
        false => Err("the soak saw what it should not have (above)".into()),
    }
}

/// Prints the report (with the first failures); status 1 if a job failed.
fn load(c2: &C2Jobs, clients: usize, jobs: usize) -> Result<ExitCode, String> {
    let job = c2_request(c2)?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let report = runtime.block_on(wgpu_groth16_daemon::load::run(
        &c2.address,
        job,
        clients,
        jobs,
    ))?;
    print!("{report}");
    if report.failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    Err(format!(
        "{} of {} jobs failed",
        report.failures.len(),
        report.jobs()
    ))
}
