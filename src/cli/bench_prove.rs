//! `wgpu-groth16 bench prove`: whole proofs of the Filecoin-like circuit, stage by stage,
//! beside bellperson's CPU prover on the same machine, byte-compared.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{create_proof, Proof, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use ff::Field;
use group::Group;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::curve::{sample_bases, G1, G2};
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::groth16::circuits::FilecoinLike;
use wgpu_groth16::groth16::synthesis::synthesize;
use wgpu_groth16::groth16::{Backend, ProveReport, Prover, ProverConfig, ProvingParameters};
use wgpu_groth16::timeline::Timeline;
use wgpu_groth16::Result;

use super::bench::ms;

pub struct ProveOptions {
    pub log_n: Vec<u32>,
    pub batches: Vec<usize>,
    pub check: bool,
    /// Where to write the trace of every batch's stages.
    pub trace: Option<std::path::PathBuf>,
}

/// Parameters of the right lengths for `circuit`'s shape (from synthesizing it) with random points: not a trusted
/// setup (proofs made with them do not verify), but both provers compute the same function
/// of them, so timings and the byte comparison mean what they do with real parameters, and
/// they take seconds to make instead of a setup's minutes to hours at 2^22.
fn random_parameters(circuit: &FilecoinLike, seed: u64) -> Result<ProvingParameters> {
    let shape = synthesize(circuit.clone())?.shape();
    let domain = shape.constraints.next_power_of_two();
    let b = shape.b_input_density + shape.b_aux_density;
    let g1 = |k: u64, n: usize| Arc::new(sample_bases::<G1>(seed * 16 + k, n));
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let g1_point = |rng: &mut ChaCha20Rng| G1Affine::from(blstrs::G1Projective::random(rng));
    let g2_point = |rng: &mut ChaCha20Rng| G2Affine::from(blstrs::G2Projective::random(rng));
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: g1_point(&mut rng),
        beta_g1: g1_point(&mut rng),
        beta_g2: g2_point(&mut rng),
        gamma_g2: g2_point(&mut rng),
        delta_g1: g1_point(&mut rng),
        delta_g2: g2_point(&mut rng),
        ic: sample_bases::<G1>(seed * 16 + 5, shape.inputs),
    };
    Ok(ProvingParameters {
        vk,
        h: g1(0, domain - 1),
        l: g1(1, shape.aux),
        a: g1(2, shape.inputs + shape.a_aux_density),
        b_g1: g1(3, b),
        b_g2: Arc::new(sample_bases::<G2>(seed * 16 + 4, b)),
    })
}

fn proof_bytes(proof: &Proof<Bls12>) -> Vec<u8> {
    let mut out = Vec::new();
    proof.write(&mut out).expect("writing to memory");
    out
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

pub fn prove(selector: &AdapterSelector, options: &ProveOptions) -> Result<ExitCode> {
    let config = ProverConfig {
        backend: Backend::Gpu(selector.clone()),
        ..Default::default()
    };
    let t = Instant::now();
    let engine = wgpu_groth16::groth16::prover::Engine::open(&config)?;
    println!(
        "engine: {} (pipelines built in {}); CPU: bellperson on {} threads; times per proof",
        engine.describe(),
        ms(t.elapsed()),
        rayon::current_num_threads()
    );
    println!("| constraints | batch | synthesis (each circuit; in parallel, beside the proving) | H | MSM H | MSM L | MSM A | MSM B G1 | MSM B G2 | scalar selection (beside MSM H, L) | assembly | after synthesis | total | bellperson CPU | speed-up | equal | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut all_equal = true;
    let timeline = Arc::new(Timeline::new());
    for &log_n in &options.log_n {
        let t = Instant::now();
        let params = random_parameters(&FilecoinLike::new(log_n, 0)?, log_n as u64)?;
        let made = t.elapsed();
        let t = Instant::now();
        let prover = Prover::with_engine(params.clone(), engine.clone(), None)?
            .with_timeline(timeline.clone());
        log::info!(
            "2^{log_n}: random parameters in {}, bases resident in {}",
            ms(made),
            ms(t.elapsed())
        );
        let circuits = |count: usize| -> Result<Vec<FilecoinLike>> {
            (0..count as u64)
                .map(|seed| FilecoinLike::new(log_n, seed))
                .collect()
        };
        let randomness = |count: usize, salt: u64| -> Vec<Scalar> {
            (0..count as u64)
                .map(|i| Scalar::random(ChaCha20Rng::seed_from_u64(salt * 1000 + i)))
                .collect()
        };
        // One proof untimed: clocks up, buffers and tables made.
        prover.prove_batch(circuits(1)?, &randomness(1, 1), &randomness(1, 2))?;
        for &batch in &options.batches {
            let (rs, ss) = (randomness(batch, 1), randomness(batch, 2));
            let circuits = circuits(batch)?;
            let t = Instant::now();
            let (proofs, report) = prover.prove_batch_report(circuits.clone(), &rs, &ss)?;
            let total = t.elapsed();
            let (cpu, equal) = if options.check && batch == 1 {
                let t = Instant::now();
                let expected =
                    create_proof(circuits[0].clone(), &params.to_bellperson(), rs[0], ss[0])
                        .map_err(wgpu_groth16::Error::Synthesis)?;
                (
                    Some(t.elapsed()),
                    Some(proof_bytes(&expected) == proof_bytes(&proofs[0])),
                )
            } else {
                (None, None)
            };
            all_equal &= equal != Some(false);
            print_row(&report, total, cpu, equal);
        }
    }
    if let Some(path) = &options.trace {
        let file = std::fs::File::create(path).map_err(|e| {
            wgpu_groth16::Error::InvalidInput(format!("cannot write {}: {e}", path.display()))
        })?;
        timeline
            .write_chrome_trace(std::io::BufWriter::new(file))
            .map_err(|e| {
                wgpu_groth16::Error::InvalidInput(format!("writing {}: {e}", path.display()))
            })?;
        println!("trace: {}", path.display());
    }
    Ok(if all_equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_row(report: &ProveReport, total: Duration, cpu: Option<Duration>, equal: Option<bool>) {
    let per = |d: Duration| d / report.proofs as u32;
    let each = [
        report.synthesis,
        report.h,
        report.msm_h,
        report.msm_l,
        report.msm_a,
        report.msm_b_g1,
        report.msm_b_g2,
        report.scalar_selection,
        report.assembly,
    ]
    .map(|d| ms(per(d)))
    .join(" | ");
    let speed_up = cpu.map_or("-".into(), |c| {
        format!("{:.1}x", c.as_secs_f64() / per(total).as_secs_f64())
    });
    println!(
        "| {} | {} | {each} | {} | {} | {} | {speed_up} | {} | {} |",
        report.constraints,
        report.proofs,
        ms(per(report.after_synthesis())),
        ms(per(total)),
        cpu.map_or("-".into(), ms),
        match equal {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        },
        peak_rss_mib().map_or("-".into(), |m| format!("{m} MiB")),
    );
}
