//! `wgpu-groth16 prove`: one proof of a built-in circuit with a `.params` file, written as
//! bellperson writes proofs (192 bytes, compressed), and its public inputs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_core::OsRng;
use serde_json::json;
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::groth16::synthesis::public_inputs;
use wgpu_groth16::groth16::{
    PointCheck, ProveReport, Prover, ProverEngine, ProvingParameters, Step,
};
use wgpu_groth16::timeline::Timeline;
use wgpu_groth16::Error;

use super::setup::{BuiltIn, CircuitArgs};
use crate::memory;
use crate::output::{hex, stage, Output, OutputPlan};
use crate::{CliError, CliResult};

#[derive(clap::Args)]
pub struct ProveOptions {
    /// The .params file `setup` wrote for this circuit and size.
    #[arg(long)]
    pub params: PathBuf,
    #[command(flatten)]
    pub circuit: CircuitArgs,
    /// sha256: the preimage (its length is the size).
    #[arg(long)]
    pub message: Option<String>,
    /// filecoin-like: the seed its witness is drawn from.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the proof goes.
    #[arg(long)]
    pub proof: PathBuf,
    /// Where the public inputs go (hex of each one's little-endian bytes, one a line);
    /// without it they are printed.
    #[arg(long)]
    pub inputs_out: Option<PathBuf>,
    /// Skip the subgroup checks of the parameters' points (faster; for files you trust).
    #[arg(long)]
    pub unchecked: bool,
    #[command(flatten)]
    pub vram: crate::VramArgs,
    /// Write a Chrome / Perfetto trace of the proof's stages to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
}

/// The steps of a proof in the order the prover runs them, with their times.
pub fn stages(report: &ProveReport) -> Vec<(&'static str, Duration)> {
    Step::sequence()
        .map(|step| (step.label(), report.time(step)))
        .collect()
}

pub fn proof_bytes(proof: &Proof<Bls12>) -> Vec<u8> {
    let mut out = Vec::new();
    proof
        .write(&mut out)
        .expect("writing to memory cannot fail");
    out
}

/// One proof of `circuit` on `engine` and its report (the bases upload before it is not
/// timed: it is paid once per parameter set), its stages recorded in `timeline` if given.
pub fn prove_on(
    engine: Arc<ProverEngine>,
    params: &ProvingParameters,
    circuit: &BuiltIn,
    (r, s): (Scalar, Scalar),
    timeline: Option<Arc<Timeline>>,
) -> wgpu_groth16::Result<(Proof<Bls12>, ProveReport)> {
    let mut prover = Prover::with_engine(params.clone(), engine)?;
    if let Some(timeline) = timeline {
        prover = prover.with_timeline(timeline);
    }
    let (proved, _) = stage("proving", || {
        prover.prove_batch_report(vec![circuit.clone()], &[r], &[s])
    });
    let (mut proofs, report) = proved?;
    Ok((proofs.remove(0), report))
}

/// Hex of each input's canonical little-endian bytes: what `verify --inputs` reads.
pub fn inputs_hex(inputs: &[Scalar]) -> Vec<String> {
    inputs.iter().map(|x| hex(&x.to_bytes_le())).collect()
}

pub fn run(
    selector: &AdapterSelector,
    options: &ProveOptions,
    out: &mut Output,
) -> CliResult<ExitCode> {
    let vram_budget = options.vram.bytes()?;
    let mut plan = OutputPlan::new();
    plan.input("--params", &options.params);
    let proof_file = plan.output("--proof", &options.proof);
    let inputs_file = options
        .inputs_out
        .as_deref()
        .map(|path| plan.output("--inputs-out", path));
    let trace_file = options
        .trace
        .as_deref()
        .map(|path| plan.output("--trace", path));
    let mut files = plan.reserve()?;

    let message = options.message.as_deref().map(str::as_bytes);
    let args = options.circuit.sized_for(message)?;
    // Cheap: the witness is computed during synthesis.
    let circuit = args.with_witness(message, options.seed)?;
    let not_made_for = |e: Error| match e {
        Error::ParamsMismatch(why) => CliError::Invalid(format!(
            "{} was not made for {}: {why} (run `setup` with the same --circuit and --size)",
            options.params.display(),
            args.describe()
        )),
        e => e.into(),
    };
    // The circuit's size and the file's counts before anything is decoded or synthesized:
    // parameters for another circuit, or a job larger than the machine, fail in milliseconds.
    let bounds = args.size_bounds()?;
    let shape = ProvingParameters::read_shape(&options.params)?;
    shape.check_admits(&bounds).map_err(not_made_for)?;
    let (points, variables) = (shape.point_bytes(), bounds.inputs + bounds.aux.start());
    // Synthesis keeps a, b and c (32 bytes each) per constraint and a value per variable.
    let synthesized = bounds.constraints.start() * 96 + variables * 32;
    memory::check(
        &format!("proving {}", args.describe()),
        points + synthesized,
        &format!(
            "{} for the parameters' points, {} for the synthesized circuit",
            memory::bytes(points),
            memory::bytes(synthesized)
        ),
    )?;

    let check = if options.unchecked {
        PointCheck::Unchecked
    } else {
        PointCheck::Checked
    };
    let (params, read_time) = stage("reading the parameters", || {
        ProvingParameters::read(&options.params, check)
    });
    let params = params?;
    let inputs = public_inputs(circuit.clone())?;
    let rs = (Scalar::random(OsRng), Scalar::random(OsRng));
    let timeline = options.trace.as_ref().map(|_| Arc::new(Timeline::new()));
    let engine = crate::open_engine(selector, vram_budget)?;
    if let Some(note) = engine.device().and_then(crate::software_adapter_note) {
        out.fact("note", note.as_str(), format!("note: {note}"));
    }
    let (proof, report) =
        prove_on(engine.clone(), &params, &circuit, rs, timeline.clone()).map_err(not_made_for)?;
    // A wrong result must not leave as a proof; the check costs milliseconds.
    let vk = prepare_verifying_key(&params.vk);
    if !verify_proof(&vk, &proof, &inputs).map_err(Error::Synthesis)? {
        // No device: the CPU proved (from the start, or after a GPU failure).
        let why = if engine.device().is_none() {
            format!(
                "the proving key in {} does not belong to its verifying key (a file spliced \
                 from two setups, or points outside the subgroup read with --unchecked)",
                options.params.display()
            )
        } else {
            "a GPU result is wrong (BELLMAN_NO_GPU=1 proves on the CPU)".into()
        };
        return Err(CliError::Invalid(format!(
            "the proof made on {} fails the parameters' own verifying key; nothing written: {why}",
            report.backend
        )));
    }
    let proof = proof_bytes(&proof);
    let inputs = inputs_hex(&inputs);
    files.write(proof_file, |w| w.write_all(&proof))?;
    if let Some(slot) = inputs_file {
        files.write(slot, |w| inputs.iter().try_for_each(|x| writeln!(w, "{x}")))?;
    }
    if let (Some(slot), Some(timeline)) = (trace_file, &timeline) {
        files.write(slot, |w| timeline.write_chrome_trace(w))?;
    }
    files.commit()?;

    out.fact(
        "engine",
        report.backend.as_str(),
        format!("engine: {}", report.backend),
    );
    out.fact(
        "circuit",
        json!({
            "name": args.name(),
            "constraints": report.constraints,
            "domain": report.domain,
        }),
        format!(
            "circuit: {}: {} constraints (domain 2^{})",
            args.describe(),
            report.constraints,
            report.domain.trailing_zeros()
        ),
    );
    out.fact(
        "params",
        json!({
            "file": options.params.display().to_string(),
            "checked": !options.unchecked,
            "read_seconds": read_time.as_secs_f64(),
        }),
        format!(
            "parameters: {} ({}) read in {read_time:.2?}",
            options.params.display(),
            if options.unchecked {
                "unchecked"
            } else {
                "checked"
            }
        ),
    );
    out.table("stages", &[("stage", 10), ("time", 10)], 1, |t| {
        for (stage, time) in stages(&report) {
            t.row([stage.into(), time.into()]);
        }
        t.row(["total".into(), report.total().into()]);
        Ok::<_, CliError>(())
    })?;
    out.fact(
        "proof",
        json!({ "file": options.proof.display().to_string(), "hex": hex(&proof) }),
        format!(
            "proof: {} ({} bytes), accepted by the parameters' verifying key",
            options.proof.display(),
            proof.len()
        ),
    );
    let inputs_line = match &options.inputs_out {
        Some(path) => format!("public inputs: {} ({})", path.display(), inputs.len()),
        None => format!("public inputs: {}", inputs.join(",")),
    };
    let inputs_file = options.inputs_out.as_ref().map(|p| p.display().to_string());
    out.fact(
        "inputs",
        json!({ "file": inputs_file, "hex": inputs }),
        inputs_line,
    );
    Ok(ExitCode::SUCCESS)
}
