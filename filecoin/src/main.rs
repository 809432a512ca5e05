//! `wgpu-groth16-filecoin`: Filecoin's SNARKs on any GPU wgpu reaches. `c2` proves a
//! sector's PoRep from its C1 output; see `wgpu-groth16-filecoin --help`.

mod c2;
mod tools;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wgpu_groth16_cli::{self as cli, output, DeviceArgs};

#[derive(Parser)]
#[command(
    name = "wgpu-groth16-filecoin",
    version,
    about = "Filecoin's SNARKs (PoRep C2) with wgpu-groth16, equal to filecoin-proofs' own",
    after_help = "Parameters are read from $FIL_PROOFS_PARAMETER_CACHE (default \
                  /var/tmp/filecoin-proof-parameters), never downloaded. Exit status: 0 done, \
                  1 the proof failed verify_seal, 2 an error (printed as one line). More logs: \
                  RUST_LOG=info."
)]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
    /// Print one JSON document instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Seal commit phase 2: prove a sector's PoRep from its C1 output, check it with
    /// filecoin-proofs' verify_seal and write the proof (192 bytes a partition).
    C2(c2::C2Args),
    /// Seal a sector of seeded random data (add-piece, PC1, PC2, C1 through
    /// filecoin-proofs-api) and write its C1 output: for tests and benchmarks (2 KiB takes
    /// under a second).
    Seal(tools::SealArgs),
    /// Make a seal proof's Groth16 parameters from a seed and write them where
    /// filecoin-proofs looks ($FIL_PROOFS_PARAMETER_CACHE): for tests and benchmarks, never
    /// for the chain (2 KiB: ~161 s on 16 cores).
    Setup(tools::SetupArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// `c2` beside filecoin-proofs' own seal_commit_phase2 on the CPU, one C1 output,
    /// both checked by verify_seal.
    C2(tools::BenchC2Args),
}

fn main() -> ExitCode {
    cli::start_process();
    let cli: Cli = cli::parse_args();
    let result = match cli.command {
        Command::C2(args) => c2::run(&cli.device, &args, cli.json),
        Command::Seal(args) => tools::seal(&args, cli.json),
        Command::Setup(args) => tools::setup(&args, cli.json),
        Command::Bench(BenchCommand::C2(args)) => tools::bench_c2(&cli.device, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::report_error(cli.json, &e);
            ExitCode::from(e.exit_status())
        }
    }
}
