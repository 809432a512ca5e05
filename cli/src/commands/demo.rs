//! `wgpu-groth16 demo`: the main job. Opens the best adapter, checks every GPU field
//! operation on both wide-multiply paths against blstrs, MSMs in G1 and G2, an NTT and an H
//! step against blstrs and bellperson, then proves a built-in circuit (by default knowledge
//! of a SHA-256 preimage, bellperson's gadgets) on the GPU and on the CPU, stage by stage,
//! and checks the proofs: equal to bellperson's bytes, accepted by its verifier, refused with
//! wrong public inputs.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde_json::json;
use wgpu_groth16::field::check::check_all;
use wgpu_groth16::field::ops::FieldKernels;
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};
use wgpu_groth16::groth16::synthesis::public_inputs;
use wgpu_groth16::groth16::ProverEngine;
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::Error;

use super::compare::{Kernel, KernelJobs};
use super::prove::{proof_bytes, prove_on, stages};
use super::setup::{self, CircuitArgs};
use crate::output::{stage, Cell, Output};
use crate::{CliError, CliResult};

pub struct DemoOptions {
    /// Random operand pairs per field operation, on top of the edge cases.
    pub random: usize,
    /// Seed of the operands, the witness and the proofs' randomness.
    pub seed: u64,
    pub circuit: CircuitArgs,
}

/// log2 of the kernel checks' size: every kernel path, seconds on a software adapter.
const KERNEL_LOG_N: u32 = 12;

pub fn run(
    selector: &AdapterSelector,
    options: &DemoOptions,
    out: &mut Output,
) -> CliResult<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    out.fact("adapter", gpu.describe(), crate::adapter_line(&gpu));
    if let Some(note) = crate::software_adapter_note(&gpu) {
        out.fact("note", note.as_str(), format!("note: {note}"));
    }
    let mut failures = Vec::new();

    let mut paths = Vec::new();
    let columns = [
        ("path", 9),
        ("field", 6),
        ("operation", 18),
        ("elements", 9),
        ("mismatches", 10),
    ];
    out.table("field", &columns, 3, |t| {
        for wide in gpu.supported_wide_muls() {
            let kernels = FieldKernels::new(&gpu, wide)?;
            let start = Instant::now();
            for check in check_all(&kernels, options.seed, options.random)? {
                t.row([
                    check.wide_mul.to_string().into(),
                    check.field.into(),
                    format!("{:?}", check.op).into(),
                    check.elements.into(),
                    check.mismatches.into(),
                ]);
                failures.extend(check.first_mismatch);
            }
            paths.push((wide, kernels.compile_time(), start.elapsed()));
        }
        Ok::<_, Error>(())
    })?;
    out.text("");
    out.table(
        "paths",
        &[("path", 9), ("compiled", 10), ("checked", 10)],
        1,
        |t| {
            for (wide, compiled, checked) in paths {
                t.row([wide.to_string().into(), compiled.into(), checked.into()]);
            }
            Ok::<_, Error>(())
        },
    )?;

    out.text("");
    let (engine, built) = stage("building the MSM and NTT pipelines", || {
        ProverEngine::on_device(gpu.clone(), MsmConfig::default())
    });
    let engine = Arc::new(engine?);
    out.fact(
        "pipelines_seconds",
        built.as_secs_f64(),
        format!(
            "pipelines (MSM G1, G2, NTT; {} path) built in {built:.2?}",
            gpu.preferred_wide_mul()
        ),
    );
    let jobs = KernelJobs::new(KERNEL_LOG_N, options.seed);
    let columns = [("kernel", 24), ("GPU", 10), ("CPU", 10), ("equal", 6)];
    out.table("kernels", &columns, 1, |t| {
        for kernel in Kernel::ALL {
            let (on_gpu, gpu_time) = jobs.run(kernel, &engine)?;
            let (on_cpu, cpu_time) = jobs.run(kernel, &ProverEngine::cpu())?;
            let label = jobs.label(kernel);
            t.row([
                label.as_str().into(),
                gpu_time.into(),
                cpu_time.into(),
                (on_gpu == on_cpu).into(),
            ]);
            if on_gpu != on_cpu {
                failures.push(format!("{label}: GPU and CPU results differ"));
            }
        }
        Ok::<_, Error>(())
    })?;

    out.text("");
    failures.extend(prove(engine, options, out)?);
    let summary = if failures.is_empty() {
        "every GPU result equals the CPU reference".to_string()
    } else {
        failures
            .iter()
            .map(|f| format!("mismatch: {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    out.fact("failures", failures.clone(), summary);
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The circuit's proof on the GPU, with our CPU prover and with bellperson's (same r and s),
/// stage by stage; then bellperson's verifier on the GPU proof with the right and a wrong
/// public input. Returns the failed checks.
fn prove(
    engine: Arc<ProverEngine>,
    options: &DemoOptions,
    out: &mut Output,
) -> CliResult<Vec<String>> {
    let (params, origin) = setup::cached(&options.circuit)?;
    out.fact("params", origin.as_str(), format!("parameters: {origin}"));
    let circuit = options.circuit.with_sample_witness(options.seed)?;
    let inputs = public_inputs(circuit.clone())?;
    let mut rng = ChaCha20Rng::seed_from_u64(options.seed);
    let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let (gpu_proof, gpu) = prove_on(engine.clone(), &params, &circuit, rs, None)?;
    let (cpu_proof, cpu) = prove_on(Arc::new(ProverEngine::cpu()), &params, &circuit, rs, None)?;
    let (expected, bellperson) = stage("proving with bellperson", || {
        create_proof(circuit.clone(), &params.to_bellperson(), rs.0, rs.1)
    });
    let expected = proof_bytes(&expected.map_err(Error::Synthesis)?);

    out.fact(
        "circuit",
        json!({
            "name": options.circuit.name(),
            "constraints": gpu.constraints,
            "domain": gpu.domain,
        }),
        format!(
            "{}: {} constraints (domain 2^{})",
            options.circuit.describe(),
            gpu.constraints,
            gpu.domain.trailing_zeros()
        ),
    );
    let columns = [("stage", 12), ("GPU", 10), ("CPU", 10), ("bellperson", 10)];
    out.table("proof", &columns, 1, |t| {
        for ((stage, on_gpu), (_, on_cpu)) in stages(&gpu).into_iter().zip(stages(&cpu)) {
            t.row([stage.into(), on_gpu.into(), on_cpu.into(), Cell::Missing]);
        }
        t.row([
            "total".into(),
            gpu.total().into(),
            cpu.total().into(),
            bellperson.into(),
        ]);
        Ok::<_, CliError>(())
    })?;

    let mut failures = Vec::new();
    // After a GPU failure the prover finishes on the CPU, and the GPU column would lie.
    if engine.gpu_failed() {
        failures.push(format!("proof: a GPU step failed ({})", gpu.backend));
    }
    let gpu_equal = proof_bytes(&gpu_proof) == expected;
    let cpu_equal = proof_bytes(&cpu_proof) == expected;
    out.fact(
        "equal_to_bellperson",
        json!({ "gpu": gpu_equal, "cpu": cpu_equal }),
        format!(
            "proof bytes equal to bellperson's: GPU {}, CPU {}",
            Cell::from(gpu_equal),
            Cell::from(cpu_equal)
        ),
    );
    let vk = prepare_verifying_key(&params.vk);
    let mut wrong = inputs.clone();
    wrong[0] += Scalar::ONE;
    let accepted = verify_proof(&vk, &gpu_proof, &inputs).map_err(Error::Synthesis)?;
    let refused = !verify_proof(&vk, &gpu_proof, &wrong).map_err(Error::Synthesis)?;
    out.fact(
        "verifier",
        json!({ "accepts": accepted, "refuses_wrong_inputs": refused }),
        format!(
            "verifier: {} with the public inputs, {} with a wrong one",
            if accepted { "accepted" } else { "REJECTED" },
            if refused { "refused" } else { "ACCEPTED" }
        ),
    );
    let checks = [
        (gpu_equal, "the GPU proof differs from bellperson's"),
        (cpu_equal, "the CPU proof differs from bellperson's"),
        (accepted, "the verifier rejects the GPU proof"),
        (
            refused,
            "the verifier accepts the GPU proof with a wrong input",
        ),
    ];
    failures.extend(
        checks
            .into_iter()
            .filter(|(ok, _)| !ok)
            .map(|(_, what)| what.to_string()),
    );
    Ok(failures)
}
