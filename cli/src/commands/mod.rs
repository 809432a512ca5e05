//! The commands of `wgpu-groth16`, one module each (`bench_*` are `bench`'s subcommands),
//! and [`run`], which runs the one the arguments name.

pub mod bench;
pub mod bench_prove;
pub mod bench_synthesis;
pub mod compare;
pub mod demo;
pub mod info;
pub mod prove;
pub mod setup;
pub mod verify;

use std::process::ExitCode;

use wgpu_groth16::curve::{G1, G2};
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::msm::MsmConfig;
use wgpu_groth16::ntt::StagePasses;
use wgpu_groth16::Error;

use crate::args::{BenchCommand, Cli, Command};
use crate::{output, CliError, CliResult};

/// Runs the command `cli` names; its output goes through one [`output::Output`].
pub(crate) fn run(cli: Cli) -> CliResult<ExitCode> {
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
        BenchCommand::Subgroup {
            curve,
            log_n,
            runs,
            path,
        } => match curve.as_str() {
            "g1" => bench::subgroup::<G1>(selector, &log_n, runs, path.as_deref()),
            "g2" => bench::subgroup::<G2>(selector, &log_n, runs, path.as_deref()),
            other => Err(Error::InvalidInput(format!(
                "--curve {other:?}: expected g1 or g2"
            ))),
        }?,
        BenchCommand::Transfer { mib, runs } => bench::transfer(selector, &mib, runs)?,
        BenchCommand::Synthesis { log_n, runs } => bench_synthesis::synthesis(&log_n, runs)?,
        BenchCommand::Prove {
            log_n,
            aux_mix,
            batch,
            no_check,
            trace,
            workers,
            g1_together,
            gpus,
            synthesis,
            vram_budget_mib,
        } => bench_prove::prove(
            selector,
            &bench_prove::ProveOptions {
                log_n,
                aux_mixes: aux_mix,
                batches: batch,
                workers,
                g1_together,
                gpus,
                synthesis,
                check: !no_check,
                trace,
                vram_budgets: vram_budget_mib
                    .into_iter()
                    .map(|mib| {
                        let vram = crate::VramArgs {
                            vram_budget_mib: (mib > 0).then_some(mib),
                        };
                        vram.bytes()
                    })
                    .collect::<CliResult<_>>()?,
            },
        )?,
        BenchCommand::Msm {
            curve,
            log_n,
            scalars,
            no_check,
            runs,
            path,
            profile,
            segment,
            tail_segment,
            window_bits,
            windows,
            reduction_threads,
            chunk_points,
            streamed_chunk_points,
            together,
            together_scalars,
        } => {
            let defaults = MsmConfig::default();
            let options = bench::MsmOptions {
                log_n,
                scalars,
                streamed_chunk_points,
                together: together.map(|k| k as usize),
                together_scalars,
                check: !no_check,
                runs,
                path,
                config: MsmConfig {
                    profile,
                    segment,
                    tail_segment,
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
