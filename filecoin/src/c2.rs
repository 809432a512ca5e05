//! `c2`: a sector's C1 output in, its PoRep proof out, checked by filecoin-proofs'
//! `verify_seal` before it is written. Progress goes to stderr, one line per partition
//! step; the result to stdout (one JSON document with `--json`).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use ff::Field;
use rand_core::OsRng;
use serde_json::json;
use wgpu_groth16::groth16::report::{gpu_steps, syntheses};
use wgpu_groth16::groth16::{BatchProgress, CancelToken, Checked, ProvingParameters};
use wgpu_groth16::recorded::Origin;
use wgpu_groth16::timeline::{Coverage, Timeline};
use wgpu_groth16_cli::output::{stage, Output, OutputPlan};
use wgpu_groth16_cli::{memory, software_adapter_note, CliError, DeviceArgs};
use wgpu_groth16_cli::{open_engine, VramArgs};
use wgpu_groth16_filecoin::c1::{parse_prover_id, prover_id_of_miner, C1Output};
use wgpu_groth16_filecoin::error::sector_size_name;
use wgpu_groth16_filecoin::job::{prove_back_to_back, JobProved};
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::recorded::{RecordedCache, SynthesisPath};
use wgpu_groth16_filecoin::{Error, ProofJob, SealCommit};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("prover").required(true).args(["prover_id", "miner_id"])))]
pub struct C2Args {
    /// The C1 output: filecoin-proofs-api's JSON (lotus-bench, filecoin-ffi) or Curio's
    /// wrapper {"SectorNum", "Phase1Out", "SectorSize"}.
    #[arg(long)]
    c1: PathBuf,
    /// The prover id, 64 hexadecimal digits.
    #[arg(long)]
    prover_id: Option<String>,
    /// The miner actor id (f0N), from which the prover id is made as Lotus makes it.
    #[arg(long)]
    miner_id: Option<u64>,
    /// The sector number (optional with Curio's wrapper, which carries it).
    #[arg(long)]
    sector_id: Option<u64>,
    /// Where to write the proof: what seal_commit_phase2 returns (192 bytes a partition).
    #[arg(
        long,
        required_unless_present = "benchmark",
        conflicts_with = "benchmark"
    )]
    out: Option<PathBuf>,
    /// Time the C2 of a benchmark-only C1 output (`seal --benchmark-only`, random vanilla
    /// proofs of a real shape) or of any other: its vanilla proofs are not checked, and its
    /// proof, which cannot verify, is neither given to verify_seal nor written.
    #[arg(long)]
    benchmark: bool,
    /// With `--benchmark`: prove the C1 output this many times, as that many sectors back
    /// to back through one prover (the next one's witnesses computed while the GPU proves
    /// the one before), and report the time a sector.
    #[arg(long, default_value_t = 1, requires = "benchmark", value_parser = clap::value_parser!(u32).range(1..=64))]
    sectors: u32,
    /// Sectors of `--sectors` in flight at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    in_flight: u32,
    /// Write a Chrome / Perfetto trace of every partition's stages to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[command(flatten)]
    vram: VramArgs,
}

/// A `c2` failure: exit status 1 when the proof failed `verify_seal`, 2 otherwise.
#[derive(Debug)]
pub enum C2Error {
    Filecoin(Error),
    Cli(CliError),
}

impl C2Error {
    pub fn exit_status(&self) -> u8 {
        match self {
            C2Error::Filecoin(Error::Verification { .. }) => 1,
            _ => 2,
        }
    }
}

impl fmt::Display for C2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            C2Error::Filecoin(e) => e.fmt(f),
            C2Error::Cli(e) => e.fmt(f),
        }
    }
}

impl From<Error> for C2Error {
    fn from(e: Error) -> Self {
        C2Error::Filecoin(e)
    }
}

impl From<CliError> for C2Error {
    fn from(e: CliError) -> Self {
        C2Error::Cli(e)
    }
}

impl From<wgpu_groth16::Error> for C2Error {
    fn from(e: wgpu_groth16::Error) -> Self {
        C2Error::Filecoin(e.into())
    }
}

fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// How the partitions were synthesized, for `--json`.
pub fn synthesis_json(path: &SynthesisPath) -> serde_json::Value {
    match path {
        SynthesisPath::Recorded { origin, took } => {
            let (from, file) = match origin {
                None => ("memory", None),
                Some(Origin::Loaded(path)) => ("loaded", Some(path)),
                Some(Origin::Recorded(path)) => ("recorded", path.as_ref()),
            };
            json!({
                "path": "recorded",
                "recorded": from,
                "file": file.map(|p| p.display().to_string()),
                "seconds": seconds(*took),
            })
        }
        SynthesisPath::Full { why } => json!({ "path": "full", "why": why }),
    }
}

pub fn run(device: &DeviceArgs, args: &C2Args, json: bool) -> Result<(), C2Error> {
    let start = Instant::now();
    let mut out = Output::new(json);
    let mut plan = OutputPlan::new();
    plan.input("--c1", &args.c1);
    let proof_file = args.out.as_deref().map(|out| plan.output("--out", out));
    let trace_file = args.trace.as_deref().map(|p| plan.output("--trace", p));
    let mut files = plan.reserve()?;
    let budget = args.vram.bytes()?;

    // Everything about the inputs is checked before a parameter is read.
    let prover_id = match (&args.prover_id, args.miner_id) {
        (Some(hex), _) => parse_prover_id(hex)?,
        (None, Some(miner)) => prover_id_of_miner(miner),
        (None, None) => unreachable!("clap requires one of them"),
    };
    let c1 = C1Output::read(&args.c1)?;
    if !args.benchmark {
        c1.require_sealed()?;
    }
    let sector_id = c1.sector_id(args.sector_id)?;
    let commit = SealCommit::new(c1.phase1, prover_id, sector_id)?;
    let (checked, vanilla_time) = match args.benchmark {
        false => stage("checking the vanilla proofs", || {
            commit.check_vanilla_proofs()
        }),
        true => (Ok(()), Duration::ZERO),
    };
    checked?;
    let vanilla = match args.benchmark {
        false => format!("vanilla proofs hold ({:.3} s)", vanilla_time.as_secs_f64()),
        true => "a benchmark: vanilla proofs not checked".into(),
    };
    let proof_kind = commit.registered_proof();
    let sector_size = sector_size_name(commit.sector_size());
    let partitions = commit.partitions();
    out.fact(
        "sector",
        json!({
            "sector_id": u64::from(sector_id),
            "proof": format!("{proof_kind:?}"),
            "sector_size": commit.sector_size(),
            "partitions": partitions,
        }),
        format!(
            "sector {}: {proof_kind:?} ({sector_size}), {partitions} partition(s); {vanilla}",
            u64::from(sector_id),
        ),
    );

    let files_needed = ParamsFiles::seal(proof_kind)?;
    files_needed.check_present()?;
    let shape = ProvingParameters::read_shape(&files_needed.params)
        .map_err(|e| files_needed.params_error(e))?;
    commit.check_params_shape(&files_needed, &shape)?;
    memory::check(
        &format!("proving a {sector_size} sector"),
        shape.point_bytes(),
        &format!(
            "{} for the parameters' points",
            memory::bytes(shape.point_bytes())
        ),
    )?;
    let engine = open_engine(&device.selector()?, budget)?;
    if let Some(note) = engine.device().and_then(software_adapter_note) {
        out.fact("note", note.as_str(), format!("note: {note}"));
    }
    // The plan waits for the recorded matrices' size (sent below, or dropped) before it
    // places bases: matrices on the device keep the products and gathers there.
    let (plan, matrices) = std::sync::mpsc::channel();
    let (prover, ready) = files_needed.prover_for(engine.clone(), matrices)?;
    // Kept whether or not it is written: it says where the proving's time went.
    let timeline = Arc::new(Timeline::new());
    let mut prover = prover.with_progress(Arc::new(move |event| {
        let (what, circuit, took) = match event {
            BatchProgress::Synthesized { circuit, took } => ("synthesized", circuit, took),
            BatchProgress::Proved { circuit, took } => ("proved", circuit, took),
        };
        eprintln!(
            "c2: partition {}/{partitions} {what} in {:.2} s",
            circuit + 1,
            took.as_secs_f64()
        );
    }));
    prover = prover.with_timeline(timeline.clone());

    let t = Instant::now();
    // The recorded constraint system first, so that its line comes before the partitions'.
    let recorded = RecordedCache::by_default();
    let recorded_ready =
        recorded.and_then(
            |cache| match commit.recorded_system(cache, &prover, Some(plan)) {
                Ok((_, _, path)) => {
                    eprintln!("c2: {path}");
                    Some(path)
                }
                // Proving tries again, and falls back to full synthesis with a warning.
                Err(_) => None,
            },
        );
    let draw = || -> Vec<Scalar> { (0..partitions).map(|_| Scalar::random(OsRng)).collect() };
    let sectors = vec![commit.clone(); args.sectors as usize];
    let randomness: Vec<_> = sectors.iter().map(|_| (draw(), draw())).collect();
    let proved = prove_back_to_back(
        &sectors,
        &randomness,
        &prover,
        recorded,
        args.in_flight as usize,
        &CancelToken::new(),
    )
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    if proved.len() > 1 {
        let finished: Vec<f64> = proved.iter().map(|p| seconds(p.finished)).collect();
        let total = finished.iter().cloned().fold(0.0, f64::max);
        out.fact(
            "back_to_back",
            json!({ "sectors": proved.len(), "in_flight": args.in_flight, "finished": finished }),
            format!(
                "{} sectors back to back ({} in flight) in {total:.2} s: {:.2} s a sector; each \
                 finished at {} s",
                proved.len(),
                args.in_flight,
                total / proved.len() as f64,
                finished
                    .iter()
                    .map(|s| format!("{s:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let Some(JobProved {
        proofs, synthesis, ..
    }) = proved.into_iter().next()
    else {
        return Err(C2Error::Filecoin(Error::Prover(
            wgpu_groth16::Error::Internal("no sector proved".into()),
        )));
    };
    let synthesis = match (recorded_ready, synthesis) {
        (Some(first), SynthesisPath::Recorded { origin: None, .. }) => first,
        (_, synthesis) => synthesis,
    };
    let prove_time = t.elapsed();
    // What stayed on the device and what streamed, as the engine planned it.
    if let Some(plan) = prover.plan_line() {
        out.fact("device_plan", plan.as_str(), format!("device plan: {plan}"));
    }
    let bytes = commit.proof_bytes(&proofs)?;
    let (verified, verify_time) = match args.benchmark {
        false => stage("verify_seal", || commit.verify(&bytes)),
        true => (Ok(()), Duration::ZERO),
    };
    verified?;

    if let Some(slot) = proof_file {
        files.write(slot, |w| w.write_all(&bytes))?;
    }
    if let Some(slot) = trace_file {
        files.write(slot, |w| timeline.write_chrome_trace(w))?;
    }
    files.commit()?;
    let total = start.elapsed();
    out.fact(
        "backend",
        engine.describe(),
        format!("prover: {}", engine.describe()),
    );
    let params = ready.get().copied();
    let checked = params.map(|r| match r.checked {
        Checked::Before => "their points checked before (same content)",
        Checked::Now => "every point checked now",
        Checked::Published => "the setup's own file (its published digest), not checked",
    });
    out.fact(
        "synthesis",
        synthesis_json(&synthesis),
        synthesis.to_string(),
    );
    out.fact(
        "seconds",
        json!({
            "vanilla_check": seconds(vanilla_time),
            "parameters_ready": params.map(|r| seconds(r.read)),
            "prove": seconds(prove_time),
            "verify_seal": (!args.benchmark).then(|| seconds(verify_time)),
            "total": seconds(total),
        }),
        format!(
            "parameters ready {:.2} s after opening ({}), beside synthesis; proving {:.2} s, \
             {}, total {:.2} s",
            params.map_or(f64::NAN, |r| r.read.as_secs_f64()),
            checked.unwrap_or("?"),
            prove_time.as_secs_f64(),
            match args.benchmark {
                false => format!("verify_seal {:.3} s", verify_time.as_secs_f64()),
                true => "verify_seal not run".into(),
            },
            total.as_secs_f64()
        ),
    );
    let (witnesses, gpu) = (
        syntheses(&timeline),
        gpu_steps(&timeline, 0, Duration::ZERO),
    );
    let from_to = |c: Coverage| format!("{:.2}-{:.2} s", seconds(c.first), seconds(c.last));
    let coverage_json = |c: Coverage| json!({ "from": seconds(c.first), "to": seconds(c.last), "busy": seconds(c.covered) });
    out.fact(
        "timeline",
        json!({
            "witnesses": witnesses.map(coverage_json),
            "gpu_steps": gpu.map(coverage_json),
        }),
        format!(
            "from the prover's start: witnesses {}; GPU steps (the H step and the MSMs) {}",
            witnesses.map_or("-".into(), from_to),
            gpu.map_or("-".into(), |c| format!(
                "{}, busy {:.2} s ({:.0}%)",
                from_to(c),
                seconds(c.covered),
                c.share() * 100.0
            )),
        ),
    );
    let proof_line = match &args.out {
        Some(out) => format!(
            "proof: {} bytes, verify_seal accepts it, written to {}",
            bytes.len(),
            out.display()
        ),
        None => format!(
            "proof: {} bytes, a benchmark's: not checked, not written",
            bytes.len()
        ),
    };
    out.fact(
        "proof",
        json!({
            "path": args.out.as_ref().map(|p| p.display().to_string()),
            "bytes": bytes.len(),
            "verified": !args.benchmark,
        }),
        proof_line,
    );
    out.finish();
    Ok(())
}
