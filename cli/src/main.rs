//! The `wgpu-groth16` command line: see `wgpu-groth16 --help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    wgpu_groth16_cli::start_process();
    wgpu_groth16_cli::run()
}
