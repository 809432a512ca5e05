//! The `wgpu-groth16` command line: see `wgpu-groth16 --help`.

use std::process::ExitCode;

use wgpu_groth16::cli;

fn main() -> ExitCode {
    cli::start_process();
    cli::run()
}
