//! Argument parsing and the commands. The library logs; this module owns what the user sees.

mod bench;
mod bench_prove;
mod demo;
mod info;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use wgpu_groth16::curve::{G1, G2};
use wgpu_groth16::gpu::context::{parse_backends, parse_power};
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::{Error, Result};

#[derive(Parser)]
#[command(
    name = "wgpu-groth16",
    version,
    about = "Groth16 prover for BLS12-381 on any GPU wgpu reaches"
)]
struct Cli {
    /// Use the adapter whose name contains this (case-insensitive); overrides WGPU_ADAPTER_NAME.
    #[arg(long, global = true)]
    adapter: Option<String>,
    /// Backends to consider, e.g. `vulkan` or `vulkan,gl`; overrides WGPU_BACKEND.
    #[arg(long, global = true)]
    backend: Option<String>,
    /// `low`, `high` or `none`; overrides WGPU_POWER_PREF.
    #[arg(long, global = true)]
    power: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every adapter with the limits and features that matter for proving.
    Info,
    /// Open the best adapter and check every GPU field operation against blstrs.
    Demo {
        /// Random operand pairs per operation, on top of the edge cases.
        #[arg(long, default_value_t = 256)]
        random: usize,
        /// Seed of the random operands.
        #[arg(long, default_value_t = 1)]
        seed: u64,
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
        /// Butterfly stages per workgroup-memory pass (0..=8; 0: one pass per stage);
        /// default: 8 on GPUs, 0 on CPU adapters.
        #[arg(long)]
        local_stages: Option<u32>,
        /// Skip bellperson's CPU path (and so the check and the CPU column).
        #[arg(long)]
        no_check: bool,
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
        /// Sorted entries per accumulation thread (default: the curve's, 32 for G1, 8 for G2).
        #[arg(long)]
        segment: Option<u32>,
        /// Window size in bits (default: chosen from n).
        #[arg(long)]
        window_bits: Option<u32>,
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

impl Cli {
    fn selector(&self) -> Result<AdapterSelector> {
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

pub fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    let selector = cli.selector()?;
    match cli.command {
        Command::Info => info::run(&selector),
        Command::Demo { random, seed } => demo::run(&selector, random, seed),
        Command::Bench(BenchCommand::Field { threads }) => bench::field(&selector, threads),
        Command::Bench(BenchCommand::Ntt {
            log_n,
            runs,
            local_stages,
            no_check,
        }) => bench::ntt(&selector, &log_n, runs, local_stages, !no_check),
        Command::Bench(BenchCommand::Transfer { mib, runs }) => {
            bench::transfer(&selector, &mib, runs)
        }
        Command::Bench(BenchCommand::Prove {
            log_n,
            batch,
            no_check,
        }) => bench_prove::prove(
            &selector,
            &bench_prove::ProveOptions {
                log_n,
                batches: batch,
                check: !no_check,
            },
        ),
        Command::Bench(BenchCommand::Msm {
            curve,
            log_n,
            skewed,
            no_check,
            runs,
            path,
            profile,
            segment,
            window_bits,
        }) => {
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
                    ..defaults
                },
            };
            match curve.as_str() {
                "g1" => bench::msm::<G1>(&selector, &options),
                "g2" => bench::msm::<G2>(&selector, &options),
                other => Err(Error::InvalidInput(format!(
                    "--curve {other:?}: expected g1 or g2"
                ))),
            }
        }
    }
}
