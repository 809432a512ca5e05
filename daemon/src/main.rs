//! `wgpu-groth16-daemon serve`: the proving daemon Curio's `[Cuzk] Address` points at.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use wgpu_groth16::cli::prove::open_engine;
use wgpu_groth16::cli::DeviceArgs;
use wgpu_groth16_daemon::backend::FilecoinBackend;

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve cuzk.v1.ProvingEngine until SIGTERM or Ctrl-C: pending jobs are then cancelled
    /// and running ones finish.
    Serve {
        /// Address to listen on (Curio's `[Cuzk] Address`).
        #[arg(long, default_value = "127.0.0.1:9820")]
        listen: String,
        /// Jobs that may wait for a GPU; more are refused with RESOURCE_EXHAUSTED.
        #[arg(long, default_value_t = 64)]
        max_pending: usize,
        /// Parameter sets to load before serving, e.g. porep-32g (a comma list).
        #[arg(long, value_delimiter = ',')]
        preload: Vec<String>,
    },
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let Command::Serve {
        listen,
        max_pending,
        preload,
    } = cli.command;
    let run = || -> Result<(), String> {
        let selector = cli.device.selector().map_err(|e| e.to_string())?;
        let engine = open_engine(&selector, None).map_err(|e| e.to_string())?;
        let backend = Arc::new(FilecoinBackend::new(engine));
        for circuit_id in &preload {
            use wgpu_groth16_daemon::scheduler::Backend;
            let (_, took) = backend.preload(circuit_id)?;
            log::info!("{circuit_id} loaded in {:.2?}", took);
        }
        let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            log::info!(
                "serving cuzk.v1.ProvingEngine on {} ({} pending jobs at most)",
                wgpu_groth16_daemon::describe(addr),
                max_pending
            );
            wgpu_groth16_daemon::serve(listener, backend, max_pending, shutdown_signal())
                .await
                .map_err(|e| e.to_string())
        })
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
