//! The command line of wgpu-groth16, and what its sibling binaries (the Filecoin tools, the
//! daemon) share with it: device options, output as text or JSON, one-line errors, the
//! process's start. The library logs; this crate owns what the user sees.
//!
//! `args` are `wgpu-groth16`'s arguments and `commands` its commands; [`output`] prints
//! lines, tables and spinners; [`memory`] refuses jobs larger than the machine; [`signals`]
//! removes temporaries when a signal ends the process.

mod args;
mod commands;
pub mod memory;
pub mod output;
pub mod signals;

/// `verify`'s readers of files from elsewhere: a `.vk` file, a proof file, public inputs
/// (a file or a list). Each reads no more than its format allows.
pub use commands::verify::{parse_inputs, read_proof, read_verifying_key};

use clap::Parser;
use std::io;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use wgpu_groth16::gpu::context::{parse_backends, parse_power};
use wgpu_groth16::gpu::AdapterSelector;
use wgpu_groth16::groth16::{Backend, ProverConfig, ProverEngine};
use wgpu_groth16::{Error, Result};

use args::Cli;

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

/// The device memory a prover may use: the option of every command that proves.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct VramArgs {
    /// Device memory the prover may use, in MiB: resident bases and constraint matrices,
    /// each proof's buffers, the MSM workspaces, upload staging (1/16, up to 1 GiB) and
    /// what the process holds before its first buffer. Default: what the device reports available
    /// less a headroom (1/16, at least 512 MiB; `info` shows it), or no limit but the
    /// device's where its backend does not tell.
    #[arg(long, value_name = "MIB")]
    pub vram_budget_mib: Option<u64>,
}

impl VramArgs {
    /// The budget in bytes; `None`: the device's default.
    pub fn bytes(&self) -> CliResult<Option<u64>> {
        self.vram_budget_mib
            .map(|mib| {
                mib.checked_mul(1 << 20).ok_or_else(|| {
                    CliError::Invalid(format!(
                        "--vram-budget-mib {mib} is more bytes than a 64-bit count holds \
                         (at most {} MiB)",
                        u64::MAX >> 20
                    ))
                })
            })
            .transpose()
    }
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
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            output::report_error(json, &err);
            // 1 is a failed check (an invalid proof): scripts can tell the two apart.
            ExitCode::from(2)
        }
    }
}
