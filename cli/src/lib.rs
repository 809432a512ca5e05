//! The command line of wgpu-groth16, and what its sibling binaries (the Filecoin tools, the
//! daemon) share with it: device options, output as text or JSON, one-line errors, the
//! process's start. The library logs; this crate owns what the user sees.
//!
//! `commands` holds `wgpu-groth16`'s commands; [`output`] prints lines, tables and
//! spinners; [`memory`] refuses jobs larger than the machine; [`signals`] removes
//! temporaries when a signal ends the process.

mod commands;
pub mod memory;
pub mod output;
pub mod signals;

use clap::{Parser, Subcommand};
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use wgpu_groth16::curve::{G1, G2};
use wgpu_groth16::gpu::context::{parse_backends, parse_power};
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::groth16::{Backend, ProverConfig, ProverEngine};
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::ntt::{LaterPasses, StagePasses};
use wgpu_groth16::{Error, Result};

use commands::{bench, bench_prove, bench_synthesis, compare, demo, info, prove, setup, verify};

#[derive(Parser)]
#[command(
    name = "wgpu-groth16",
    version,
    about = "Groth16 prover for BLS12-381 on any GPU wgpu reaches",
    after_help = "Exit status: 0 done, 1 a check failed (an invalid proof, a GPU result unlike \
                  the CPU's), 2 an error (printed as one line). More logs: RUST_LOG=info."
)]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
    /// Print one JSON document instead of text (demo, setup, prove, verify, compare).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every adapter with the limits and features that matter for proving.
    Info,
    /// Check every GPU kernel against blstrs and bellperson on the best adapter, then prove
    /// a circuit on the GPU and the CPU, stage by stage, and check the proofs.
    ///
    /// Parameters are made once per circuit and size and cached in
    /// $WGPU_GROTH16_PARAMS_CACHE, $XDG_CACHE_HOME/wgpu-groth16 or ~/.cache/wgpu-groth16.
    Demo {
        /// Random operand pairs per field operation, on top of the edge cases.
        #[arg(long, default_value_t = 256)]
        random: usize,
        /// Seed of the operands, the witness and the proof's randomness.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        // `--circuit filecoin-like --size 20`: 2^20 - 1 constraints.
        #[command(flatten)]
        circuit: setup::CircuitArgs,
    },
    /// Make parameters for a built-in circuit (bellperson's setup, randomness from the OS):
    /// a bellperson .params file for `prove` and a .vk file for `verify`.
    Setup {
        #[command(flatten)]
        circuit: setup::CircuitArgs,
        /// Where the proving parameters go.
        #[arg(long)]
        params: PathBuf,
        /// Where the verifying key goes.
        #[arg(long)]
        vk: PathBuf,
    },
    /// Prove a built-in circuit with a .params file, on the best adapter (the CPU with
    /// BELLMAN_NO_GPU=1); writes the proof as bellperson does (192 bytes).
    Prove(prove::ProveOptions),
    /// Check a proof with bellperson's verifier: prints "valid" (exit 0) or "invalid" (exit 1).
    Verify {
        /// The .vk file `setup` wrote.
        #[arg(long)]
        vk: PathBuf,
        /// The proof file `prove` wrote.
        #[arg(long)]
        proof: PathBuf,
        /// A file of public inputs (as `prove --inputs-out` writes) or a comma list of them.
        #[arg(long)]
        inputs: String,
    },
    /// Run the same MSMs (G1, G2), NTTs and proof on every adapter and on the CPU: one table
    /// of times and whether each adapter's bytes equal the CPU's.
    Compare {
        /// log2 of the MSM and NTT sizes.
        #[arg(long, default_value_t = 10)]
        log_n: u32,
        /// Seed of the inputs, the witness and the proof's randomness.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        // Parameters cached as for `demo`.
        #[command(flatten)]
        circuit: setup::CircuitArgs,
    },
    /// Measure kernels.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Fq and Fr multiplications per second on each wide-multiply path, beside the raw
    /// u32/u64 multiply rates of the same adapter.
    Field {
        /// Invocations per dispatch (default: sized for the adapter).
        #[arg(long)]
        threads: Option<u32>,
    },
    /// GPU NTT (forward, data on the device) and H step beside bellperson's CPU path, checked.
    Ntt {
        /// log2 of the domain size; a comma list runs several sizes.
        #[arg(long, value_delimiter = ',', default_value = "16")]
        log_n: Vec<u32>,
        /// Timed GPU runs per size, after a warm-up; the fastest counts.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Stages of the first pass, in workgroup memory (0..=8; 0: none); with --later, the
        /// passes otherwise chosen per size and adapter.
        #[arg(long, requires = "later")]
        local_stages: Option<u32>,
        /// The passes after the first: `local` (workgroup memory), `single` (a stage a
        /// pass), `radix4` or `radix8` (two or three stages a pass in registers).
        #[arg(long, requires = "local_stages")]
        later: Option<LaterPasses>,
        /// Skip bellperson's CPU path (and so the check and the CPU column).
        #[arg(long)]
        no_check: bool,
        /// Skip the H step from host vectors to host coefficients (its uploads and
        /// read-back take most of a large size's run): only the rows with the data on the
        /// device.
        #[arg(long)]
        device_only: bool,
    },
    /// GPU multi-scalar multiplication beside blstrs' multi_exp on this machine's cores.
    Msm {
        /// `g1` or `g2`.
        #[arg(long, default_value = "g1")]
        curve: String,
        /// log2 of the number of points; a comma list runs several sizes.
        #[arg(long, value_delimiter = ',', default_value = "16")]
        log_n: Vec<u32>,
        /// Filecoin-like scalars (half zeros, 40% ones) instead of uniform ones.
        #[arg(long)]
        skewed: bool,
        /// Skip the blstrs run (and so the check and the CPU column).
        #[arg(long)]
        no_check: bool,
        /// Timed GPU runs per size, after one warm-up; the fastest counts.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Wide-multiply path (`portable` or `int64`); default: the adapter's fastest.
        #[arg(long)]
        path: Option<String>,
        /// Print the GPU time of each pass (timestamp queries) of the last run per size.
        #[arg(long)]
        profile: bool,
        /// Sorted entries per accumulation thread, 4..=1024 (default: the curve's, 64 for G1, 32 for G2);
        /// fewer on the portable path, where llvmpipe's loop cap bounds them (the error names the most).
        #[arg(long)]
        segment: Option<u32>,
        /// Every window this many bits (default: chosen from n).
        #[arg(long, conflicts_with = "windows")]
        window_bits: Option<u32>,
        /// This many windows, 12..=64, of widths differing by a bit at most (default: chosen
        /// from n).
        #[arg(long)]
        windows: Option<u32>,
        /// Threads of the bucket reduction (default: 32768 on GPUs, 1024 on CPU adapters).
        #[arg(long)]
        reduction_threads: Option<u32>,
        /// At most this many points a chunk (default: as many as the device's bindings hold).
        #[arg(long)]
        chunk_points: Option<usize>,
    },
    /// One circuit's synthesis on one thread, beside the circuit's own share of it.
    Synthesis {
        /// log2 of the domain (the circuit has 2^N - 1 constraints); a comma list runs several.
        #[arg(long, value_delimiter = ',', default_value = "20")]
        log_n: Vec<u32>,
        /// Runs per size; the fastest counts.
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// Host-to-device and device-to-host bandwidth, our staging path beside wgpu's own.
    Transfer {
        /// Sizes in MiB; a comma list runs several.
        #[arg(long, value_delimiter = ',', default_value = "128")]
        mib: Vec<u64>,
        /// Timed runs per size; the fastest counts.
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// Whole proofs of the Filecoin-like circuit (half its aux variables bits) with random
    /// parameters, stage by stage, beside bellperson's CPU prover (batch 1) and byte-compared.
    Prove {
        /// log2 of the domain (the circuit has 2^N - 1 constraints); a comma list runs several.
        #[arg(long, value_delimiter = ',', default_value = "16")]
        log_n: Vec<u32>,
        /// Proofs per batch; a comma list runs several.
        #[arg(long, value_delimiter = ',', default_value = "1,10")]
        batch: Vec<usize>,
        /// Skip bellperson's CPU prover (and so the check and the CPU column).
        #[arg(long)]
        no_check: bool,
        /// Write a Chrome / Perfetto trace of every stage of every batch to this file.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Proofs in flight per device; a comma list runs each (default: the prover's, 2).
        #[arg(long, value_delimiter = ',', default_value = "2")]
        workers: Vec<usize>,
        /// Spread each batch over the best N adapters of the selection.
        #[arg(long, default_value_t = 1)]
        gpus: usize,
        /// How circuits are synthesized: `full` (every linear combination built and
        /// evaluated) or `recorded` (the matrices recorded once, then each proof runs the
        /// witness alone and the products where the engine runs); a comma list runs each.
        #[arg(long, value_delimiter = ',', default_value = "full")]
        synthesis: Vec<bench_prove::SynthesisPath>,
    },
}

/// "adapter: NAME (BACKEND) (driver ...)", the first line of every command that opens one.
fn adapter_line(gpu: &wgpu_groth16::gpu::GpuContext) -> String {
    format!(
        "adapter: {} (driver {} {})",
        gpu.describe(),
        gpu.info.driver,
        gpu.info.driver_info
    )
}

/// One line for `demo` and `prove` when the adapter is a software one (it runs on the CPU),
/// naming what is faster.
pub fn software_adapter_note(gpu: &wgpu_groth16::gpu::GpuContext) -> Option<String> {
    if gpu.info.device_type != wgpu::DeviceType::Cpu {
        return None;
    }
    let faster = if gpu.info.backend == wgpu::Backend::Gl {
        "without one, Mesa's Vulkan software adapter beats GL (`apt-get install mesa-vulkan-drivers`)"
    } else {
        "without one, the CPU prover is faster (BELLMAN_NO_GPU=1)"
    };
    Some(format!(
        "{} is a software adapter, running on the CPU: a GPU needs its Vulkan driver; {faster}",
        gpu.describe()
    ))
}

/// What the command line reports: the library's errors, and the mistakes around them that
/// only the command line can make (files, arguments).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Lib(#[from] Error),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: String,
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl CliError {
    fn io(action: impl Into<String>, path: &Path, source: io::Error) -> Self {
        CliError::Io {
            action: action.into(),
            path: path.display().to_string(),
            source,
        }
    }
}

pub type CliResult<T> = std::result::Result<T, CliError>;

/// Which adapter a command uses: the options every binary of the workspace takes.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DeviceArgs {
    /// Use the adapter whose name contains this (case-insensitive); overrides WGPU_ADAPTER_NAME.
    #[arg(long, global = true)]
    pub adapter: Option<String>,
    /// Backends to consider, e.g. `vulkan` or `vulkan,gl`; overrides WGPU_BACKEND.
    #[arg(long, global = true)]
    pub backend: Option<String>,
    /// `low`, `high` or `none`; overrides WGPU_POWER_PREF.
    #[arg(long, global = true)]
    pub power: Option<String>,
}

impl DeviceArgs {
    pub fn selector(&self) -> Result<AdapterSelector> {
        Ok(AdapterSelector {
            backends: self
                .backend
                .as_deref()
                .map(|b| parse_backends("--backend", b))
                .transpose()?,
            name: self.adapter.clone(),
            power: self
                .power
                .as_deref()
                .map(|p| parse_power("--power", p))
                .transpose()?,
        })
    }
}

/// Engines on the best `gpus` adapters of `selector`, or the CPU alone when
/// `BELLMAN_NO_GPU` is set, their pipelines built under a spinner. No adapter is an error
/// rather than a quiet CPU fallback: the message says how to get one or opt out.
pub fn open_engines(
    selector: &AdapterSelector,
    gpus: usize,
    vram_budget: Option<u64>,
) -> CliResult<Vec<Arc<ProverEngine>>> {
    let config = ProverConfig {
        backend: Backend::gpu_unless_disabled(selector.clone()),
        vram_budget,
        ..Default::default()
    };
    let (engines, _) = output::stage("building the GPU pipelines", || {
        ProverEngine::open_best(&config, gpus)
    });
    Ok(engines?)
}

/// [`open_engines`] on one adapter.
pub fn open_engine(
    selector: &AdapterSelector,
    vram_budget: Option<u64>,
) -> CliResult<Arc<ProverEngine>> {
    Ok(open_engines(selector, 1, vram_budget)?.remove(0))
}

/// `--vram-budget-mib` in bytes.
pub fn vram_budget(mib: Option<u64>) -> CliResult<Option<u64>> {
    mib.map(|mib| {
        mib.checked_mul(1 << 20).ok_or_else(|| {
            CliError::Invalid(format!(
                "--vram-budget-mib {mib} is more bytes than a 64-bit count holds (at most {} MiB)",
                u64::MAX >> 20
            ))
        })
    })
    .transpose()
}

/// What every binary of the workspace does first, before any thread exists: the
/// environment for the Vulkan loader, the log (wgpu's and naga's own lines off unless
/// RUST_LOG asks), a one-line panic message, and temporaries removed on signals.
pub fn start_process() {
    // Before any thread exists: it may set an environment variable for the Vulkan loader.
    wgpu_groth16::gpu::context::prepare_environment();
    // wgpu's own log lines repeat, in its words, failures that reach the commands as errors
    // (`compare` on NVIDIA's GL adapter printed 16 "Shader translation error" lines before
    // the row saying the pipelines failed): off unless RUST_LOG asks for them.
    let default_filter = "warn,wgpu=off,wgpu_core=off,wgpu_hal=off,naga=off";
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter))
        .init();
    // A panic is a bug, but the user still gets one line; RUST_BACKTRACE asks for the rest.
    if std::env::var_os("RUST_BACKTRACE").is_none() {
        std::panic::set_hook(Box::new(|info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic");
            let place = info
                .location()
                .map_or(String::new(), |l| format!(" at {l}"));
            eprintln!("error: internal error{place}: {message} (RUST_BACKTRACE=1 for a backtrace)");
        }));
    }
    // Before any thread starts: the signals are blocked in every thread but one.
    if let Err(e) = signals::remove_temporaries_on_signals() {
        log::warn!("temporary files will not be removed on SIGINT: {e}");
    }
}

/// Parses the command line as `P`, or exits: help and version on stdout, a usage error on
/// stderr (and as a JSON error document when `--json` is among the arguments).
pub fn parse_args<P: Parser>() -> P {
    P::try_parse().unwrap_or_else(|e| {
        if e.use_stderr() && std::env::args_os().any(|arg| arg == "--json") {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            output::report_json_only(first.strip_prefix("error: ").unwrap_or(first));
        }
        e.exit()
    })
}

/// Parses the command line and runs the command. A failure is one line on stderr (and a
/// JSON error document with `--json`), exit status 2.
pub fn run() -> ExitCode {
    let cli: Cli = parse_args();
    let json = cli.json;
    match run_command(cli) {
        Ok(code) => code,
        Err(err) => {
            output::report_error(json, &err);
            // 1 is a failed check (an invalid proof): scripts can tell the two apart.
            ExitCode::from(2)
        }
    }
}

fn run_command(cli: Cli) -> CliResult<ExitCode> {
    let selector = cli.device.selector()?;
    let mut out = output::Output::new(cli.json);
    let code = match cli.command {
        Command::Demo {
            random,
            seed,
            circuit,
        } => demo::run(
            &selector,
            &demo::DemoOptions {
                random,
                seed,
                circuit,
            },
            &mut out,
        )?,
        Command::Setup {
            circuit,
            params,
            vk,
        } => setup::run(&circuit, &params, &vk, &mut out)?,
        Command::Prove(options) => prove::run(&selector, &options, &mut out)?,
        Command::Verify { vk, proof, inputs } => verify::run(&vk, &proof, &inputs, &mut out)?,
        Command::Compare {
            log_n,
            seed,
            circuit,
        } => compare::run(
            &selector,
            &compare::CompareOptions {
                log_n,
                seed,
                circuit,
            },
            &mut out,
        )?,
        // info and bench print tables meant for people and BENCHMARKS.md.
        _ if cli.json => {
            return Err(CliError::Invalid(
                "--json is for demo, setup, prove, verify and compare".into(),
            ))
        }
        Command::Info => info::run(&selector)?,
        Command::Bench(bench) => run_bench(&selector, bench)?,
    };
    out.finish();
    Ok(code)
}

fn run_bench(selector: &AdapterSelector, command: BenchCommand) -> CliResult<ExitCode> {
    Ok(match command {
        BenchCommand::Field { threads } => bench::field(selector, threads)?,
        BenchCommand::Ntt {
            log_n,
            runs,
            local_stages,
            later,
            no_check,
            device_only,
        } => {
            let passes = local_stages
                .zip(later)
                .map(|(local, later)| StagePasses { local, later });
            bench::ntt(selector, &log_n, runs, passes, !no_check, device_only)?
        }
        BenchCommand::Transfer { mib, runs } => bench::transfer(selector, &mib, runs)?,
        BenchCommand::Synthesis { log_n, runs } => bench_synthesis::synthesis(&log_n, runs)?,
        BenchCommand::Prove {
            log_n,
            batch,
            no_check,
            trace,
            workers,
            gpus,
            synthesis,
        } => bench_prove::prove(
            selector,
            &bench_prove::ProveOptions {
                log_n,
                batches: batch,
                workers,
                gpus,
                synthesis,
                check: !no_check,
                trace,
            },
        )?,
        BenchCommand::Msm {
            curve,
            log_n,
            skewed,
            no_check,
            runs,
            path,
            profile,
            segment,
            window_bits,
            windows,
            reduction_threads,
            chunk_points,
        } => {
            let defaults = MsmConfig::default();
            let options = bench::MsmOptions {
                log_n,
                skewed,
                check: !no_check,
                runs,
                path,
                config: MsmConfig {
                    profile,
                    segment,
                    window_bits,
                    windows,
                    reduction_threads,
                    max_chunk_points: chunk_points,
                    ..defaults
                },
            };
            match curve.as_str() {
                "g1" => bench::msm::<G1>(selector, &options),
                "g2" => bench::msm::<G2>(selector, &options),
                other => Err(Error::InvalidInput(format!(
                    "--curve {other:?}: expected g1 or g2"
                ))),
            }?
        }
    })
}
