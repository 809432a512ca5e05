//! `wgpu-groth16 compare`: the same MSMs, NTTs and proof on every adapter and on the CPU, in
//! one table that says whether each adapter's bytes equal the CPU's. `demo` runs the same
//! kernel jobs on its one adapter.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G2Affine, Scalar};
use ff::Field;
use group::Curve;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::curve::{sample_bases, G1, G2};
use wgpu_groth16::field::samples::{sample_scalars, ScalarMix};
use wgpu_groth16::gpu::context::{enumerate_adapters, has_compute};
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};
use wgpu_groth16::groth16::engine::{CpuEngine, Engine};
use wgpu_groth16::groth16::{ProverEngine, ProvingParameters};
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::ntt::NttOp;
use wgpu_groth16::{Error, Result};

use super::prove::{proof_bytes, prove_on};
use super::setup::{self, BuiltIn, CircuitArgs};
use crate::output::{one_line, stage, Cell, Output, Table};
use crate::CliResult;

#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    MsmG1,
    MsmG2,
    Ntt,
    HStep,
}

impl Kernel {
    pub const ALL: [Kernel; 4] = [Kernel::MsmG1, Kernel::MsmG2, Kernel::Ntt, Kernel::HStep];
}

/// The inputs of the kernel jobs, made once: Filecoin-like scalars (mostly 0 and 1) for the
/// MSMs, uniform values for the NTTs.
pub struct KernelJobs {
    log_n: u32,
    bases_g1: Vec<G1Affine>,
    bases_g2: Vec<G2Affine>,
    scalars: Vec<Scalar>,
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
}

impl KernelJobs {
    pub fn new(log_n: u32, seed: u64) -> Self {
        let n = 1 << log_n;
        let a = sample_scalars(seed + 1, n, ScalarMix::Uniform);
        let b = sample_scalars(seed + 2, n, ScalarMix::Uniform);
        let c = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        KernelJobs {
            log_n,
            bases_g1: sample_bases::<G1>(seed, n),
            bases_g2: sample_bases::<G2>(seed, n),
            scalars: sample_scalars(seed, n, ScalarMix::Skewed),
            a,
            b,
            c,
        }
    }

    pub fn label(&self, kernel: Kernel) -> String {
        let what = match kernel {
            Kernel::MsmG1 => "G1 MSM",
            Kernel::MsmG2 => "G2 MSM",
            Kernel::Ntt => "NTT",
            Kernel::HStep => "H step",
        };
        format!("{what} 2^{}", self.log_n)
    }

    /// Runs `kernel` on `engine`'s device, or on the CPU (blstrs, bellperson) for an engine
    /// without one, never falling back: the result as bytes (compressed points, little-endian
    /// scalars) and the wall time, transfers included.
    pub fn run(&self, kernel: Kernel, engine: &ProverEngine) -> Result<(Vec<u8>, Duration)> {
        match engine.gpu_engine() {
            Some(gpu) => self.run_on(kernel, gpu),
            None => self.run_on(kernel, &CpuEngine),
        }
    }

    fn run_on<E: Engine>(&self, kernel: Kernel, engine: &E) -> Result<(Vec<u8>, Duration)> {
        let g1 = |p: blstrs::G1Projective| p.to_affine().to_compressed().to_vec();
        let g2 = |p: blstrs::G2Projective| p.to_affine().to_compressed().to_vec();
        let scalars = |v: Vec<Scalar>| v.iter().flat_map(Scalar::to_bytes_le).collect();
        let n = 1 << self.log_n;
        let start = Instant::now();
        let bytes = match kernel {
            Kernel::MsmG1 => {
                let bases = engine.bases::<G1>(&self.bases_g1, None);
                g1(engine.msm(&bases, &engine.vector(&self.scalars), n)?)
            }
            Kernel::MsmG2 => {
                let bases = engine.bases::<G2>(&self.bases_g2, None);
                g2(engine.msm(&bases, &engine.vector(&self.scalars), n)?)
            }
            Kernel::Ntt => {
                let mut values = engine.vector(&self.a);
                engine.ntt(&mut values, NttOp::Forward)?;
                scalars(engine.read(&values, n)?)
            }
            Kernel::HStep => {
                let mut abc = engine.h_inputs(&self.a, &self.b, &self.c)?;
                engine.h_step(&mut abc, false)?;
                scalars(engine.read(&abc[0], n - 1)?)
            }
        };
        Ok((bytes, start.elapsed()))
    }
}

pub struct CompareOptions {
    pub log_n: u32,
    pub seed: u64,
    pub circuit: CircuitArgs,
}

/// What every adapter is compared against: the CPU's bytes for each job.
struct Reference<'a> {
    jobs: &'a KernelJobs,
    kernels: Vec<Vec<u8>>,
    params: ProvingParameters,
    circuit: BuiltIn,
    rs: (Scalar, Scalar),
    proof: Vec<u8>,
    proof_label: String,
}

/// Exits 1 when an adapter that built its pipelines gives other bytes than the CPU or fails a
/// job; an adapter that cannot run compute shaders or build the pipelines is a row saying so.
pub fn run(
    explicit: &AdapterSelector,
    options: &CompareOptions,
    out: &mut Output,
) -> CliResult<ExitCode> {
    let selector = AdapterSelector::resolve(explicit)?;
    let name = selector.name.as_ref().map(|n| n.to_lowercase());
    let adapters: Vec<wgpu::Adapter> = enumerate_adapters(&selector)
        .into_iter()
        .filter(|a| {
            name.as_ref()
                .is_none_or(|n| a.get_info().name.to_lowercase().contains(n))
        })
        .collect();
    if adapters.is_empty() {
        return Err(Error::NoAdapter {
            selection: selector.to_string(),
        }
        .into());
    }
    let jobs = KernelJobs::new(options.log_n, options.seed);
    let (params, origin) = setup::cached(&options.circuit)?;
    out.fact("params", origin.as_str(), format!("parameters: {origin}"));
    let circuit = options.circuit.with_sample_witness(options.seed)?;
    let mut rng = ChaCha20Rng::seed_from_u64(options.seed);
    let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));

    let columns = [
        ("backend", 42),
        ("job", 20),
        ("time", 10),
        ("equal to CPU", 12),
        ("note", 0),
    ];
    let all_agree = out.table("rows", &columns, 2, |t| -> CliResult<bool> {
        let mut kernels = Vec::new();
        for kernel in Kernel::ALL {
            let (bytes, time) = jobs.run(kernel, &ProverEngine::cpu())?;
            t.row([
                "CPU".into(),
                jobs.label(kernel).into(),
                time.into(),
                Cell::Missing,
                Cell::Missing,
            ]);
            kernels.push(bytes);
        }
        let (proof, report) = prove_on(Arc::new(ProverEngine::cpu()), &params, &circuit, rs, None)?;
        let proof_label = format!("proof 2^{}", report.domain.trailing_zeros());
        t.row([
            "CPU".into(),
            proof_label.clone().into(),
            report.total().into(),
            Cell::Missing,
            Cell::Missing,
        ]);
        let reference = Reference {
            jobs: &jobs,
            kernels,
            params,
            circuit,
            rs,
            proof: proof_bytes(&proof),
            proof_label,
        };
        let mut all_agree = true;
        for adapter in adapters {
            all_agree &= compare_adapter(t, adapter, &reference);
        }
        Ok(all_agree)
    })?;
    Ok(if all_agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The rows of one adapter; false when a job failed or gave other bytes than the CPU.
fn compare_adapter(t: &mut Table, adapter: wgpu::Adapter, reference: &Reference) -> bool {
    let info = adapter.get_info();
    let backend = format!("{} ({:?})", info.name, info.backend);
    let mut row = |job: &str, time: Option<Duration>, equal: Option<bool>, note: Option<String>| {
        t.row([
            backend.as_str().into(),
            job.into(),
            time.into(),
            equal.into(),
            note.into(),
        ]);
    };
    if !has_compute(&adapter) {
        row("open", None, None, Some("no compute shaders".into()));
        return true;
    }
    let (engine, time) = stage(&format!("building the pipelines on {backend}"), || {
        GpuContext::from_adapter(adapter)
            .and_then(|gpu| ProverEngine::on_device(gpu, MsmConfig::default()))
    });
    let engine = match engine {
        Ok(engine) => Arc::new(engine),
        Err(e) => {
            row("pipelines", Some(time), None, Some(one_line(&e)));
            return true;
        }
    };
    row("pipelines", Some(time), None, None);
    let mut agree = true;
    let jobs = reference.jobs;
    for (kernel, expected) in Kernel::ALL.into_iter().zip(&reference.kernels) {
        let label = jobs.label(kernel);
        match jobs.run(kernel, &engine) {
            Ok((bytes, time)) => {
                agree &= bytes == *expected;
                row(&label, Some(time), Some(bytes == *expected), None);
            }
            Err(e) => {
                agree = false;
                row(&label, None, None, Some(one_line(&e)));
            }
        }
    }
    let proved = prove_on(
        engine.clone(),
        &reference.params,
        &reference.circuit,
        reference.rs,
        None,
    );
    let label = &reference.proof_label;
    match proved {
        // The prover finishes on the CPU after a GPU failure: equal bytes would prove nothing.
        Ok(_) if engine.gpu_failed() => {
            agree = false;
            row(
                label,
                None,
                None,
                Some("a GPU step failed (see the warning); finished on the CPU".into()),
            );
        }
        Ok((proof, report)) => {
            let equal = proof_bytes(&proof) == reference.proof;
            agree &= equal;
            row(label, Some(report.total()), Some(equal), None);
        }
        Err(e) => {
            agree = false;
            row(label, None, None, Some(one_line(&e)));
        }
    }
    agree
}
