//! `wgpu-groth16 bench prove`: whole proofs of the Filecoin-like circuit, stage by stage,
//! beside bellperson's CPU prover on the same machine, byte-compared.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::create_proof;
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use wgpu_groth16::gpu::memory::device_memory;
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::groth16::batch::{prove_batch_across, prove_batch_recorded_across};
use wgpu_groth16::groth16::circuits::{AuxMix, FilecoinLike};
use wgpu_groth16::groth16::report::gpu_steps;
use wgpu_groth16::groth16::{CancelToken, Step};
use wgpu_groth16::groth16::{ProveReport, Prover, ProvingParameters};
use wgpu_groth16::recorded::RecordedSystem;
use wgpu_groth16::timeline::{Coverage, Timeline};
use wgpu_groth16::Result;

use super::bench::{ms, table_header};
use super::prove::proof_bytes;
use crate::output::OutputPlan;
use crate::CliResult;

/// How a benchmark's circuits are synthesized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SynthesisPath {
    /// Every linear combination built and evaluated, per proof.
    Full,
    /// The matrices recorded once; per proof the witness alone, and the products where the
    /// engine runs.
    Recorded,
}

pub struct ProveOptions {
    pub log_n: Vec<u32>,
    /// Each a circuit of its own at every size.
    pub aux_mixes: Vec<AuxMix>,
    /// Each a run.
    pub synthesis: Vec<SynthesisPath>,
    pub batches: Vec<usize>,
    /// Workers per device; each value is a run.
    pub workers: Vec<usize>,
    /// Whether plans may run G1 MSMs two at a time; each value is a run.
    pub g1_together: Vec<bool>,
    /// Devices the batch spreads over: the best `gpus` adapters of the selection.
    pub gpus: usize,
    pub check: bool,
    /// Where to write the trace of every batch's stages.
    pub trace: Option<std::path::PathBuf>,
    /// Bytes of device memory each engine may use, each a run; `None`: the device's
    /// default.
    pub vram_budgets: Vec<Option<u64>>,
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

pub fn prove(selector: &AdapterSelector, options: &ProveOptions) -> CliResult<ExitCode> {
    let t = Instant::now();
    let mut plan = OutputPlan::new();
    let trace = options
        .trace
        .as_deref()
        .map(|path| plan.output("--trace", path));
    let mut files = plan.reserve()?;
    let engines = crate::open_engines(selector, options.gpus.max(1), None)?;
    println!(
        "engines: {} (pipelines built in {}); CPU: bellperson on {} threads; times per proof",
        engines
            .iter()
            .map(|e| e.describe())
            .collect::<Vec<_>>()
            .join(" + "),
        ms(t.elapsed()),
        rayon::current_num_threads()
    );
    let columns: Vec<&str> = [
        "constraints",
        "batch",
        "synthesis path",
        "devices x workers, VRAM budget (pool peak)",
    ]
    .into_iter()
    .chain(Step::ALL.map(step_column))
    .chain([
        "after synthesis",
        "total",
        "batch wall",
        "GPU steps: span, covered",
        "host to device, a proof",
        "bellperson CPU",
        "speed-up",
        "equal",
        "peak RSS",
    ])
    .collect();
    println!("{}", table_header(&columns));
    let mut all_equal = true;
    let timeline = Arc::new(Timeline::new());
    // The recorded path computes each witness in as many parts as there are threads.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sizes = options
        .log_n
        .iter()
        .flat_map(|&log_n| options.aux_mixes.iter().map(move |&mix| (log_n, mix)));
    for (log_n, mix) in sizes {
        let circuit = format!("2^{log_n}, aux {}", mix.name());
        // The matrices give the shape without a witness (a full synthesis at 2^27 takes
        // tens of seconds and gigabytes) and serve the recorded path.
        let t = Instant::now();
        let blank = FilecoinLike::blank(log_n)?.with_mix(mix);
        let recorded = Arc::new(RecordedSystem::record(blank)?);
        println!(
            "{circuit}: matrices recorded in {} ({:.1} MiB)",
            ms(t.elapsed()),
            recorded.bytes() as f64 / (1u64 << 20) as f64
        );
        let t = Instant::now();
        let params = ProvingParameters::random_for_shape(&recorded.shape(), log_n as u64);
        println!("{circuit}: random parameters in {}", ms(t.elapsed()));
        let circuits = |count: usize| -> Result<Vec<FilecoinLike>> {
            (0..count as u64)
                .map(|seed| Ok(FilecoinLike::new(log_n, seed)?.with_mix(mix)))
                .collect()
        };
        let randomness = |count: usize, salt: u64| -> Vec<Scalar> {
            (0..count as u64)
                .map(|i| Scalar::random(ChaCha20Rng::seed_from_u64(salt * 1000 + i)))
                .collect()
        };
        let runs = options.vram_budgets.iter().flat_map(|&budget| {
            options.synthesis.iter().flat_map(move |&path| {
                options.workers.iter().flat_map(move |&workers| {
                    options
                        .g1_together
                        .iter()
                        .map(move |&together| (budget, path, workers, together))
                })
            })
        });
        for (budget, path, workers, together) in runs {
            for engine in &engines {
                if let Some(gpu) = engine.gpu_engine() {
                    gpu.allow_g1_together(together);
                    gpu.set_vram_budget(budget.or(gpu.default_vram_budget()).unwrap_or(u64::MAX));
                    gpu.pool().reset_peak();
                }
            }
            let matrices = match path {
                SynthesisPath::Full => None,
                SynthesisPath::Recorded => Some(&recorded),
            };
            let provers = engines
                .iter()
                .map(|engine| {
                    let prover = match matrices {
                        Some(system) => {
                            Prover::with_engine_for(params.clone(), engine.clone(), system)?
                        }
                        None => Prover::with_engine(params.clone(), engine.clone())?,
                    };
                    Ok(prover.with_workers(workers).with_timeline(timeline.clone()))
                })
                .collect::<Result<Vec<_>>>();
            // A budget too small for this size is a finding of the run, not its end.
            let provers = match provers {
                Err(e @ wgpu_groth16::Error::VramBudget { .. }) => {
                    println!("  {circuit}, {path:?}: {e}");
                    continue;
                }
                other => other?,
            };
            let never = CancelToken::new();
            let prove = |circuits: Vec<FilecoinLike>, rs: &[Scalar], ss: &[Scalar]| match &matrices
            {
                None => prove_batch_across(&provers, circuits, rs, ss, &never),
                Some(matrices) => {
                    let parted = circuits.into_iter().map(|c| c.in_parts(threads)).collect();
                    prove_batch_recorded_across(&provers, parted, matrices, rs, ss, &never)
                }
            };
            // One proof per device untimed: clocks up, buffers, tables and matrices made.
            for prover in &provers {
                let (one, r, s) = (circuits(1)?, randomness(1, 1), randomness(1, 2));
                match &matrices {
                    None => prover.prove_batch(one, &r, &s)?,
                    Some(matrices) => {
                        let parted = one.into_iter().map(|c| c.in_parts(threads)).collect();
                        prover.prove_batch_recorded(parted, matrices, &r, &s)?
                    }
                };
            }
            for &batch in &options.batches {
                let (rs, ss) = (randomness(batch, 1), randomness(batch, 2));
                let circuits = circuits(batch)?;
                let from = timeline.elapsed();
                let uploaded = || -> u64 {
                    engines
                        .iter()
                        .filter_map(|e| e.device())
                        .map(|gpu| gpu.uploaded_bytes())
                        .sum()
                };
                let uploaded_before = uploaded();
                let t = Instant::now();
                let (proofs, report) = prove(circuits.clone(), &rs, &ss)?;
                let total = t.elapsed();
                let coverage = (0..provers.len())
                    .map(|device| gpu_steps(&timeline, device, from))
                    .collect();
                let uploaded = (uploaded() - uploaded_before) / batch.max(1) as u64;
                let check = options.check
                    && batch == 1
                    && workers == options.workers[0]
                    && path == options.synthesis[0];
                let (cpu, equal) = if check {
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
                let memory = engines[0].gpu_engine().map_or("-".into(), |gpu| {
                    let mib = |bytes: u64| bytes >> 20;
                    format!(
                        "{} MiB ({} MiB)",
                        mib(gpu.pool().budget()),
                        mib(gpu.pool().stats().peak_bytes)
                    )
                });
                let layout = format!("{} x {}, {memory}", provers.len(), provers[0].workers());
                let path = format!("{path:?}, aux {}", mix.name()).to_lowercase();
                let figures = BatchFigures {
                    total,
                    coverage,
                    uploaded,
                    cpu,
                    equal,
                };
                print_row(&report, &path, &layout, figures);
                if let Some(plan) = provers[0].plan_line() {
                    // What the driver says this process holds, beside what the pool counts:
                    // the difference is device memory outside the budget's accounting.
                    if let Some(gpu) = engines[0].gpu_engine() {
                        let used = device_memory(&gpu.gpu().adapter).and_then(|m| m.used_bytes);
                        if let Some(used) = used {
                            println!(
                                "  device memory after the batch: {} MiB in use by this process \
                                 (VK_EXT_memory_budget), {} MiB counted by the pool",
                                used >> 20,
                                gpu.pool().stats().allocated_bytes >> 20
                            );
                        }
                    }
                    // The window lets a sampler of the device's memory find this run's peak.
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    let start = now.saturating_sub(total);
                    println!(
                        "  plan: {plan}; batch from {:.0} to {:.0} (Unix seconds)",
                        start.as_secs_f64().floor(),
                        now.as_secs_f64().ceil()
                    );
                }
            }
        }
    }
    if let (Some(slot), Some(path)) = (trace, &options.trace) {
        files.write(slot, |w| timeline.write_chrome_trace(w))?;
        println!("trace: {}", path.display());
    }
    files.commit()?;
    Ok(if all_equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A step's column in the table: its label, and where it runs when that is not plain.
fn step_column(step: Step) -> &'static str {
    match step {
        Step::Synthesis => "synthesis (each circuit; in parallel, beside the proving)",
        Step::Staging => "staging (uploads)",
        Step::Products => "products (a, b, c from the witness)",
        Step::Gather => "A, B gather (device) or upload (after host selection)",
        Step::ScalarSelection => "scalar selection (host, beside H, MSM H, L)",
        Step::HStep => "H",
        Step::MsmH => "MSM H",
        Step::MsmL => "MSM L",
        Step::MsmA => "MSM A",
        Step::MsmBG1 => "MSM B G1",
        Step::MsmBG2 => "MSM B G2",
        Step::Assembly => "assembly",
    }
}

/// What one batch measured beside its report.
struct BatchFigures {
    total: Duration,
    /// Per device: its GPU steps ([`gpu_steps`]).
    coverage: Vec<Option<Coverage>>,
    /// Bytes uploaded to the devices, a proof.
    uploaded: u64,
    /// bellperson's time and whether its proof was ours, where checked.
    cpu: Option<Duration>,
    equal: Option<bool>,
}

fn print_row(report: &ProveReport, path: &str, layout: &str, figures: BatchFigures) {
    let BatchFigures {
        total,
        coverage,
        uploaded,
        cpu,
        equal,
    } = figures;
    let per = |d: Duration| d / report.proofs as u32;
    let each = Step::ALL.map(|step| ms(per(report.time(step)))).join(" | ");
    let speed_up = cpu.map_or("-".into(), |c| {
        format!("{:.1}x", c.as_secs_f64() / per(total).as_secs_f64())
    });
    let coverage = coverage
        .iter()
        .map(|steps| {
            steps.map_or("-".into(), |steps| {
                format!(
                    "{:.2} s, {:.1}%",
                    steps.span().as_secs_f64(),
                    steps.share() * 100.0
                )
            })
        })
        .collect::<Vec<_>>()
        .join(" / ");
    println!(
        "| {} | {} | {path} | {layout} | {each} | {} | {} | {:.2} s | {coverage} | {:.1} MiB | {} | {speed_up} | {} | {} |",
        report.constraints,
        report.proofs,
        ms(per(report.after_synthesis())),
        ms(per(total)),
        total.as_secs_f64(),
        uploaded as f64 / (1u64 << 20) as f64,
        cpu.map_or("-".into(), ms),
        match equal {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        },
        peak_rss_mib().map_or("-".into(), |m| format!("{m} MiB")),
    );
}
