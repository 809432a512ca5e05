//! `seal`, `setup` and `bench c2`: what a test or a benchmark of `c2` needs and a storage
//! provider's tools would otherwise make (a C1 output, parameters), and the side-by-side
//! run against filecoin-proofs' own prover.

use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use base64::Engine as _;
use bellperson::Circuit;
use blstrs::Scalar;
use ff::Field;
use filecoin_proofs_api::{RegisteredSealProof, SectorId};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde_json::json;
use wgpu_groth16::groth16::params::CheckRecords;
use wgpu_groth16::groth16::synthesis::{synthesize, ProvingAssignment};
use wgpu_groth16::groth16::{CancelToken, ProvingParameters};
use wgpu_groth16::recorded::{Origin, RecordedSystem, WitnessRun};
use wgpu_groth16_cli::open_engine;
use wgpu_groth16_cli::output::{stage, Output, OutputPlan};
use wgpu_groth16_cli::{CliError, DeviceArgs, VramArgs};
use wgpu_groth16_filecoin::c1::{prover_id_of_miner, C1Output};
use wgpu_groth16_filecoin::error::sector_size_name;
use wgpu_groth16_filecoin::job::{PartitionCircuits, PartitionWitnesses};
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::porep::seal_commit_phase2_reporting;
use wgpu_groth16_filecoin::post::{generate_post_parameters, winning_post_proof};
use wgpu_groth16_filecoin::recorded::{RecordedCache, SynthesisPath};
use wgpu_groth16_filecoin::sealing::{
    benchmark_c1, generate_parameters, random_point_parameters, seal_random_sector,
};
use wgpu_groth16_filecoin::Error;
use wgpu_groth16_filecoin::{ProofJob, SealCommit};

use crate::c2::C2Error;

/// A registered seal proof by its filecoin-proofs-api name, e.g. `StackedDrg2KiBV1_1`.
pub fn parse_proof(name: &str) -> Result<RegisteredSealProof, String> {
    serde_json::from_value(json!(name)).map_err(|_| {
        format!("{name:?} is not a registered seal proof (e.g. StackedDrg2KiBV1_1, StackedDrg32GiBV1_1)")
    })
}

#[derive(clap::Args)]
pub struct SealArgs {
    /// The registered seal proof, e.g. StackedDrg2KiBV1_1.
    #[arg(long, value_parser = parse_proof)]
    proof: RegisteredSealProof,
    #[arg(long)]
    miner_id: u64,
    #[arg(long)]
    sector_id: u64,
    /// Seed of the sector's data, ticket and challenge seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Folder for the sector's files (staged, sealed, cache).
    #[arg(long, required_unless_present = "benchmark_only")]
    dir: Option<PathBuf>,
    /// Seal nothing: write a benchmark-only C1 output of the proof's real shape, every
    /// vanilla proof random (seconds at 32 GiB, where sealing takes hours). It is marked
    /// as such; `c2` refuses it unless given `--benchmark`, and no proof of it verifies.
    #[arg(long, conflicts_with = "dir")]
    benchmark_only: bool,
    /// Where to write the C1 output.
    #[arg(long)]
    out: PathBuf,
    /// Write Curio's wrapper {"SectorNum", "Phase1Out", "SectorSize"} instead of the bare output.
    #[arg(long)]
    curio: bool,
}

pub fn seal(args: &SealArgs, json: bool) -> Result<(), C2Error> {
    let mut out = Output::new(json);
    let mut plan = OutputPlan::new();
    let c1_file = plan.output("--out", &args.out);
    let mut files = plan.reserve()?;
    let (prover_id, sector_id) = (
        prover_id_of_miner(args.miner_id),
        SectorId::from(args.sector_id),
    );
    let (phase1, took) = match &args.dir {
        Some(dir) => stage("sealing", || {
            seal_random_sector(args.proof, dir, prover_id, sector_id, args.seed)
        }),
        None => stage("random vanilla proofs", || {
            benchmark_c1(args.proof, prover_id, sector_id, args.seed)
        }),
    };
    let c1 = C1Output {
        phase1: phase1?,
        wrapper: None,
        benchmark_only: args.benchmark_only,
    };
    let bare = c1.phase1_json()?;
    let bytes = if args.curio {
        serde_json::to_vec(&json!({
            "SectorNum": args.sector_id,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&bare),
            "SectorSize": u64::from(args.proof.sector_size()),
        }))
        .map_err(|e| CliError::Invalid(e.to_string()))?
    } else {
        bare
    };
    files.write(c1_file, |w| w.write_all(&bytes))?;
    files.commit()?;
    out.fact(
        "c1",
        json!({ "path": args.out.display().to_string(), "bytes": bytes.len(), "seconds": took.as_secs_f64() }),
        format!(
            "{} a {} sector ({:?}) in {:.2} s; C1 output ({} bytes) written to {}",
            match args.benchmark_only {
                false => "sealed",
                true => "benchmark-only C1 output (random vanilla proofs) of",
            },
            sector_size_name(u64::from(args.proof.sector_size())),
            args.proof,
            took.as_secs_f64(),
            bytes.len(),
            args.out.display()
        ),
    );
    out.finish();
    Ok(())
}

#[derive(clap::Args)]
pub struct SetupArgs {
    /// The registered seal proof, e.g. StackedDrg2KiBV1_1.
    #[arg(long, value_parser = parse_proof)]
    proof: RegisteredSealProof,
    /// Seed of the setup's randomness (so not the ceremony's parameters: for tests and
    /// benchmarks only). Non-interactive PoRep also gets a seeded aggregation SRS, which
    /// replaces any other at its path (all proofs share it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Random points of the circuit's shape instead of a setup, for benchmarks at
    /// production sizes (`c2 --benchmark`): their proofs do not verify. The blank circuit's
    /// recorded system goes to the user cache for `c2`, and the file is recorded as checked
    /// (its points are made here, in their subgroups by construction).
    #[arg(long)]
    random_points: bool,
    /// The Winning PoSt parameters of the seal proof's sector size instead (seeded): for the
    /// daemon's Winning PoSt jobs in tests and soaks.
    #[arg(long, conflicts_with = "random_points")]
    winning_post: bool,
}

/// Writes the proof's `.params` and `.vk` where filecoin-proofs looks for them, both or
/// neither.
pub fn setup(args: &SetupArgs, json: bool) -> Result<(), C2Error> {
    let mut out = Output::new(json);
    let winning = match args.winning_post {
        true => Some(winning_post_proof(u64::from(args.proof.sector_size()))?),
        false => None,
    };
    let located = match winning {
        Some(proof) => ParamsFiles::post(proof)?,
        None => ParamsFiles::seal(args.proof)?,
    };
    let mut plan = OutputPlan::new();
    let params_file = plan.output("parameters", &located.params);
    let vk_file = plan.output("verifying key", &located.vk);
    let srs_file = located
        .srs
        .as_deref()
        .map(|path| plan.output("aggregation SRS", path));
    let mut files = plan.reserve()?;
    let (made, took) = match (winning, args.random_points) {
        (Some(proof), _) => stage("generating parameters", || {
            generate_post_parameters(proof, args.seed).map(|params| (params.into(), None))
        }),
        (None, false) => stage("generating parameters", || {
            generate_parameters(args.proof, args.seed).map(|params| (params.into(), None))
        }),
        (None, true) => stage("recording the circuit, then random points", || {
            random_point_parameters(args.proof, args.seed, None).map(|made| {
                let how = format!(
                    "random points of its shape ({} constraints, {} aux; recorded in {:.1} s, \
                     {} MiB of matrices{})",
                    made.shape.constraints,
                    made.shape.aux,
                    made.recording.as_secs_f64(),
                    made.matrices_bytes >> 20,
                    made.recorded_at
                        .map(|p| format!(" written to {}", p.display()))
                        .unwrap_or_default()
                );
                (made.params, Some(how))
            })
        }),
    };
    let (params, random_points): (ProvingParameters, _) = made?;
    files.write(params_file, |w| params.write(w))?;
    files.write(vk_file, |w| params.vk.write(w))?;
    if let Some(slot) = srs_file {
        // Non-interactive PoRep aggregates its partitions' proofs with SnarkPack, whose SRS
        // is shared by every proof: a seeded one, with powers for up to 512 proofs.
        let mut rng = ChaCha20Rng::seed_from_u64(args.seed);
        let srs =
            bellperson::groth16::aggregate::setup_fake_srs::<blstrs::Bls12, _>(&mut rng, 1024);
        files.write(slot, |mut w| srs.write(&mut w))?;
    }
    files.commit()?;
    if random_points.is_some() {
        ProvingParameters::record_made_here(&located.params, &CheckRecords::default_location())?;
    }
    out.fact(
        "parameters",
        json!({
            "params": located.params.display().to_string(),
            "vk": located.vk.display().to_string(),
            "seconds": took.as_secs_f64(),
            "random_points": random_points,
        }),
        format!(
            "made the parameters of {} in {:.1} s (seed {}: not the ceremony's{}): {} and {}",
            located.proof,
            took.as_secs_f64(),
            args.seed,
            random_points
                .map(|how| format!("; {how}: no proof of them verifies"))
                .unwrap_or_default(),
            located.params.display(),
            located.vk.display()
        ),
    );
    out.finish();
    Ok(())
}

#[derive(clap::Args)]
pub struct BenchC2Args {
    /// The C1 output.
    #[arg(long)]
    c1: PathBuf,
    #[arg(long)]
    miner_id: u64,
    /// The sector number (optional with Curio's wrapper).
    #[arg(long)]
    sector_id: Option<u64>,
    /// Proofs on our prover after the first (the parameters stay loaded).
    #[arg(long, default_value_t = 2)]
    runs: usize,
    /// Skip filecoin-proofs' own seal_commit_phase2 (CPU).
    #[arg(long)]
    no_baseline: bool,
    /// Synthesize every constraint of every proof, without recorded constraint systems
    /// (as WGPU_GROTH16_FULL_SYNTHESIS=1 does): to compare.
    #[arg(long)]
    full_synthesis: bool,
    #[command(flatten)]
    vram: VramArgs,
}

/// Partition 0's synthesis in full beside the recorded path: recording
/// once, then the witness run and the products, checked equal.
fn synthesis_times(commit: &SealCommit) -> Result<String, C2Error> {
    struct Record;
    impl PartitionCircuits for Record {
        type Output = (RecordedSystem, Duration);
        fn run<C: Circuit<Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> Result<Self::Output, Error> {
            let t = Instant::now();
            Ok((RecordedSystem::record(circuits.remove(0))?, t.elapsed()))
        }
    }
    struct Full;
    impl PartitionCircuits for Full {
        type Output = (ProvingAssignment, Duration);
        fn run<C: Circuit<Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> Result<Self::Output, Error> {
            let t = Instant::now();
            Ok((synthesize(circuits.remove(0))?, t.elapsed()))
        }
    }
    struct Recorded<'a>(&'a RecordedSystem);
    impl PartitionCircuits for Recorded<'_> {
        type Output = (ProvingAssignment, Duration, Duration);
        fn run<C: Circuit<Scalar> + Send>(
            self,
            mut circuits: Vec<C>,
        ) -> Result<Self::Output, Error> {
            let t = Instant::now();
            let witness = self.0.witness(circuits.remove(0))?;
            let witness_time = t.elapsed();
            let t = Instant::now();
            Ok((self.0.products(witness), witness_time, t.elapsed()))
        }
    }
    struct InParts<'a>(&'a RecordedSystem);
    impl PartitionWitnesses for InParts<'_> {
        type Output = (ProvingAssignment, Duration);
        fn run<W: WitnessRun>(self, mut circuits: Vec<W>) -> Result<Self::Output, Error> {
            let pool = rayon::ThreadPoolBuilder::new()
                .build()
                .map_err(|e| wgpu_groth16::Error::Internal(format!("no witness threads: {e}")))?;
            let t = Instant::now();
            let witness = circuits.remove(0).witness_of(self.0, &pool)?;
            Ok((self.0.products(witness), t.elapsed()))
        }
    }
    let (matrices, record_time) = commit.with_circuits(Record)?;
    let (full, full_time) = commit.with_circuits(Full)?;
    let (recorded, witness_time, products_time) = commit.with_circuits(Recorded(&matrices))?;
    let threads = rayon::current_num_threads();
    let (parted, parted_time) = commit.with_witness_circuits(threads, InParts(&matrices))?;
    Ok(format!(
        "synthesis of partition 0: full {:.2} s; recorded system ({} constraints, {:.1} MiB, recorded once in {:.2} s): witness {:.2} s + products {:.2} s ({} threads); witness in parts + products {:.2} s; equal: {}",
        full_time.as_secs_f64(),
        matrices.constraints,
        matrices.bytes() as f64 / (1u64 << 20) as f64,
        record_time.as_secs_f64(),
        witness_time.as_secs_f64(),
        products_time.as_secs_f64(),
        threads,
        parted_time.as_secs_f64(),
        if recorded == full && parted == full {
            "yes"
        } else {
            "NO"
        }
    ))
}

/// A table cell for how a run synthesized: the recorded system's origin and the time getting them
/// took (part of the run's), or full synthesis and why.
fn synthesis_cell(path: &SynthesisPath) -> String {
    match path {
        SynthesisPath::Recorded { origin: None, .. } => "recorded, in memory".into(),
        SynthesisPath::Recorded {
            origin: Some(Origin::Loaded(_)),
            took,
        } => format!("recorded, loaded ({:.2})", took.as_secs_f64()),
        SynthesisPath::Recorded {
            origin: Some(Origin::Recorded(written)),
            took,
        } => format!(
            "recorded{} ({:.2})",
            if written.is_some() {
                " and written"
            } else {
                ""
            },
            took.as_secs_f64()
        ),
        SynthesisPath::Full { why } => format!("full ({why})"),
    }
}

/// Ours beside filecoin-proofs' `seal_commit_phase2` (bellperson on the CPU: this build has
/// no CUDA or OpenCL), on one C1 output, both through `verify_seal`.
pub fn bench_c2(device: &DeviceArgs, args: &BenchC2Args) -> Result<(), C2Error> {
    let c1 = C1Output::read(&args.c1)?;
    c1.require_sealed()?;
    let sector_id = c1.sector_id(args.sector_id)?;
    let prover_id = prover_id_of_miner(args.miner_id);
    let commit = SealCommit::new(c1.phase1.clone(), prover_id, sector_id)?;
    let files = ParamsFiles::seal(commit.registered_proof())?;
    println!(
        "{:?}, {} partition(s); times in seconds",
        commit.registered_proof(),
        commit.partitions()
    );
    println!("| prover | run | engine open | parameters ready (after opening) | synthesis | seal_commit_phase2 (vanilla check, proof, verify_seal) | bytes | verify_seal |");
    println!("|---|---|---|---|---|---|---|---|");
    let t = Instant::now();
    let engine = open_engine(&device.selector()?, args.vram.bytes()?)?;
    let engine_time = t.elapsed();
    // As in `c2`, the plan waits for the recorded matrices' size before it places bases.
    let (plan, matrices) = std::sync::mpsc::channel();
    let (prover, ready) = files.prover_for(engine.clone(), matrices)?;
    let mut plan = Some(plan);
    for run in 0..=args.runs {
        let t = Instant::now();
        let recorded = match args.full_synthesis {
            true => None,
            false => RecordedCache::by_default(),
        };
        // The first run tells the plan (or lets it go untold) before it waits for the
        // parameters; a system that cannot be had is tried again by the proof, which falls
        // back to full synthesis with a warning.
        match (recorded, plan.take()) {
            (Some(cache), Some(told)) => drop(commit.recorded_system(cache, &prover, Some(told))),
            (_, told) => drop(told),
        }
        let (proof, synthesis, _) =
            seal_commit_phase2_reporting(&commit, &prover, recorded, &CancelToken::new())?;
        let took = t.elapsed();
        let params = match (run, ready.get()) {
            (0, Some(r)) => format!("{:.2} (checked {:?})", r.read.as_secs_f64(), r.checked),
            _ => "loaded".into(),
        };
        println!(
            "| ours ({}) | {run} | {:.2} | {params} | {} | {:.2} | {} | accepts |",
            engine.describe(),
            if run == 0 {
                engine_time.as_secs_f64()
            } else {
                0.0
            },
            synthesis_cell(&synthesis),
            took.as_secs_f64(),
            proof.len()
        );
    }
    // Byte equality with filecoin-proofs' prover (bellperson) given the same r and s.
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut draw = || -> Vec<Scalar> {
        (0..commit.partitions())
            .map(|_| Scalar::random(&mut rng))
            .collect()
    };
    let (rs, ss) = (draw(), draw());
    let t = Instant::now();
    let ours = commit.proof_bytes(&commit.prove_partitions(&prover, &rs, &ss)?)?;
    let ours_time = t.elapsed();
    let params = prover.params()?.to_bellperson();
    let t = Instant::now();
    let theirs = commit.proof_bytes(&commit.prove_with_bellperson(&params, &rs, &ss)?)?;
    let theirs_time = t.elapsed();
    commit.verify(&ours)?;
    println!(
        "\nsame r, s: ours {:.2} s, bellperson create_proof_batch {:.2} s ({} threads); bytes {}",
        ours_time.as_secs_f64(),
        theirs_time.as_secs_f64(),
        rayon::current_num_threads(),
        if ours == theirs { "equal" } else { "DIFFER" }
    );
    if ours != theirs {
        return Err(CliError::Invalid("our proof differs from bellperson's".into()).into());
    }
    println!("\n{}", synthesis_times(&commit)?);
    if !args.no_baseline {
        let t = Instant::now();
        let output = filecoin_proofs_api::seal::seal_commit_phase2(c1.phase1, prover_id, sector_id)
            .map_err(wgpu_groth16_filecoin::Error::from)?;
        let took = t.elapsed();
        // The stack verified it inside (it never returns a proof that does not verify);
        // checked again the same way as ours.
        commit.verify(&output.proof)?;
        println!(
            "| filecoin-proofs (bellperson, CPU, {} threads) | 0 | - | (inside) | full | {:.2} | {} | accepts |",
            rayon::current_num_threads(),
            took.as_secs_f64(),
            output.proof.len()
        );
    }
    Ok(())
}
