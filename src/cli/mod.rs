//! Argument parsing and the commands. The library logs; this module owns what the user sees.

mod bench;
mod demo;
mod info;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use wgpu_groth16::gpu::context::{parse_backends, parse_power};
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::Result;

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
    }
}
