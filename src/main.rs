//! The `wgpu-groth16` command line: see `wgpu-groth16 --help`.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
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
    if let Err(e) = cli::remove_temporaries_on_signals() {
        log::warn!("temporary files will not be removed on SIGINT: {e}");
    }
    cli::run()
}
