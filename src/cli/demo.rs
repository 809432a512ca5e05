//! `wgpu-groth16 demo`: the main job. Opens the best adapter, checks every GPU field
//! operation on both wide-multiply paths against blstrs, a G1 and a G2 MSM against blstrs and
//! an H step against bellperson, then proves knowledge of a SHA-256 preimage (bellperson's
//! gadgets) on the GPU and checks the proof: equal to bellperson's bytes, accepted by its
//! verifier, refused with a wrong digest. Times beside the CPU's.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{
    create_proof, generate_random_parameters, prepare_verifying_key, verify_proof, Proof,
};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::curve::{sample_bases, G1, G2};
use wgpu_groth16::field::check::check_all;
use wgpu_groth16::field::ops::FieldKernels;
use wgpu_groth16::field::samples::sample_scalars;
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};
use wgpu_groth16::groth16::circuits::Sha256Preimage;
use wgpu_groth16::groth16::prover::Engine;
use wgpu_groth16::groth16::synthesis::public_inputs;
use wgpu_groth16::groth16::Prover;
use wgpu_groth16::msm::{msm_cpu, MsmConfig};
use wgpu_groth16::ntt::h_coefficients_cpu;
use wgpu_groth16::Result;

pub fn run(selector: &AdapterSelector, random: usize, seed: u64) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    println!("{}", super::adapter_line(&gpu));
    println!(
        "{:<9} {:<6} {:<18} {:>9} {:>10}",
        "path", "field", "operation", "elements", "mismatches"
    );
    let mut failures = Vec::new();
    for wide in gpu.supported_wide_muls() {
        let kernels = FieldKernels::new(&gpu, wide)?;
        let start = Instant::now();
        for check in check_all(&kernels, seed, random)? {
            println!(
                "{:<9} {:<6} {:<18} {:>9} {:>10}",
                check.wide_mul.to_string(),
                check.field,
                format!("{:?}", check.op),
                check.elements,
                check.mismatches
            );
            failures.extend(check.first_mismatch);
        }
        println!(
            "{wide}: compiled in {:.2?}, checked in {:.2?}",
            kernels.compile_time(),
            start.elapsed()
        );
    }
    let wide = gpu.preferred_wide_mul();
    let log_n = 12;
    let n = 1 << log_n;
    println!(
        "\n{:<34} {:>12} {:>12} {:>8}",
        format!("2^{log_n} elements, {wide} path"),
        "GPU",
        "CPU",
        "equal"
    );
    let t = Instant::now();
    let engine = Arc::new(Engine::on_device(gpu.clone(), MsmConfig::default())?);
    let Engine::Gpu(kernels) = engine.as_ref() else {
        unreachable!("on_device opens a GPU engine")
    };
    println!(
        "{:<34} {:>12}",
        "pipelines (MSM G1, G2, NTT) built",
        format!("{:.2?}", t.elapsed())
    );
    let (g1, g2, ntt) = (kernels.g1(), kernels.g2(), kernels.ntt());
    let scalars = sample_scalars(seed, n, true);
    let (bases1, bases2) = (sample_bases::<G1>(seed, n), sample_bases::<G2>(seed, n));
    failures.extend(compare(
        "G1 MSM (Filecoin-like scalars)",
        || g1.msm_once(&bases1, &scalars),
        || msm_cpu::<G1>(&bases1, &scalars),
    )?);
    failures.extend(compare(
        "G2 MSM (Filecoin-like scalars)",
        || g2.msm_once(&bases2, &scalars),
        || msm_cpu::<G2>(&bases2, &scalars),
    )?);
    let (a, b) = (
        sample_scalars(seed + 1, n, false),
        sample_scalars(seed + 2, n, false),
    );
    let c: Vec<_> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
    failures.extend(compare(
        "H step",
        || ntt.h_coefficients(&a, &b, &c),
        || h_coefficients_cpu(&a, &b, &c),
    )?);
    failures.extend(prove_sha256(engine, seed)?);
    if failures.is_empty() {
        println!("every GPU result equals the CPU reference");
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failures {
            eprintln!("mismatch: {f}");
        }
        Ok(ExitCode::FAILURE)
    }
}

/// The message whose SHA-256 preimage the demo proves knowledge of (one 64-byte block).
const MESSAGE: &[u8] = b"wgpu-groth16: Groth16 on any GPU";

/// Setup with bellperson, one proof on `engine` and one with bellperson (same r, s), then
/// bellperson's verifier on ours with the right and a wrong digest.
fn prove_sha256(engine: Arc<Engine>, seed: u64) -> Result<Option<String>> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let t = Instant::now();
    let params =
        generate_random_parameters::<Bls12, _, _>(Sha256Preimage::blank(MESSAGE.len()), &mut rng)?;
    let setup = t.elapsed();
    let circuit = Sha256Preimage::new(MESSAGE);
    let inputs = public_inputs(circuit.clone())?;
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let prover = Prover::with_engine(&params, engine, None)?;
    let (proofs, report) = prover.prove_batch_report(vec![circuit.clone()], &[r], &[s])?;
    let t = Instant::now();
    let expected = create_proof(circuit, &params, r, s)?;
    let cpu = t.elapsed();
    let bytes = |p: &Proof<Bls12>| {
        let mut out = Vec::new();
        p.write(&mut out).map(|()| out)
    };
    let pvk = prepare_verifying_key(&params.vk);
    let mut wrong = inputs.clone();
    wrong[0] += Scalar::ONE;
    let equal = bytes(&proofs[0]).ok() == bytes(&expected).ok();
    let accepted = verify_proof(&pvk, &proofs[0], &inputs)?;
    let refused = !verify_proof(&pvk, &proofs[0], &wrong)?;
    println!(
        "\nSHA-256 preimage proof: {} constraints (domain 2^{}), setup (bellperson) {setup:.2?}",
        report.constraints,
        report.domain.trailing_zeros()
    );
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "proof (synthesis, H, 5 MSMs)",
        format!("{:.2?}", report.synthesis + report.after_synthesis()),
        format!("{cpu:.2?}"),
        if equal { "yes" } else { "NO" }
    );
    println!(
        "verifier: {} with the digest, {} with a wrong one",
        if accepted { "accepted" } else { "REJECTED" },
        if refused { "refused" } else { "ACCEPTED" }
    );
    Ok((!(equal && accepted && refused)).then(|| "the SHA-256 proof failed its checks".into()))
}

/// Runs one job on the GPU (uploads included) and on the CPU, prints both times, and returns
/// a failure line if the results differ.
fn compare<T: PartialEq>(
    what: &str,
    gpu: impl FnOnce() -> Result<T>,
    cpu: impl FnOnce() -> Result<T>,
) -> Result<Option<String>> {
    let t = Instant::now();
    let on_gpu = gpu()?;
    let gpu_time = t.elapsed();
    let t = Instant::now();
    let on_cpu = cpu()?;
    let cpu_time = t.elapsed();
    let equal = on_gpu == on_cpu;
    println!(
        "{what:<34} {:>12} {:>12} {:>8}",
        format!("{gpu_time:.2?}"),
        format!("{cpu_time:.2?}"),
        if equal { "yes" } else { "NO" }
    );
    Ok((!equal).then(|| format!("{what}: GPU and CPU results differ")))
}
