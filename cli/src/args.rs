//! `wgpu-groth16`'s arguments: the commands and their options, as clap parses them.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use wgpu_groth16::field::samples::ScalarMix;
use wgpu_groth16::groth16::circuits::AuxMix;
use wgpu_groth16::ntt::LaterPasses;

use crate::commands::{bench_prove, prove, setup};
use crate::DeviceArgs;

#[derive(Parser)]
#[command(
    name = "wgpu-groth16",
    version,
    about = "Groth16 prover for BLS12-381 on any GPU wgpu reaches",
    after_help = "Exit status: 0 done, 1 a check failed (an invalid proof, a GPU result unlike \
                  the CPU's), 2 an error (printed as one line). More logs: RUST_LOG=info."
)]
pub struct Cli {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print one JSON document instead of text (demo, setup, prove, verify, compare).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
pub enum BenchCommand {
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
        /// How the scalars are drawn: `uniform` (full width), `skewed` (half zeros, 40%
        /// ones, 10% full width), `half-bits` (half random bits, half full width:
        /// `FilecoinLike`'s aux values) or `porep` (the real PoRep partition's aux values:
        /// 51.2% zeros, 47.2% ones, 1.6% full width).
        #[arg(long, default_value = "uniform")]
        scalars: ScalarMix,
        /// Skip the blstrs run (and so the check and the CPU column).
        #[arg(long)]
        no_check: bool,
        /// Timed GPU runs per size, after one warm-up; the fastest counts.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Wide-multiply path (`portable` or `int64`); default: the adapter's fastest.
        #[arg(long)]
        path: Option<String>,
        /// Print the GPU time of each pass (timestamp queries) of the last run per size (and of
        /// the last streamed run, with `--streamed-chunk-points`).
        #[arg(long)]
        profile: bool,
        /// Sorted entries per accumulation thread, 4..=1024 (default: the curve's, 64 for G1, 32 for G2);
        /// fewer on the portable path, where llvmpipe's loop cap bounds them (the error names the most).
        #[arg(long)]
        segment: Option<u32>,
        /// Sorted entries per thread on the accumulation's levels that no longer fill the
        /// GPU, 4..=1024 (default 8; at most the segment).
        #[arg(long)]
        tail_segment: Option<u32>,
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
        /// Also time the MSM with every base streamed from host memory in chunks of this
        /// many points (as a VRAM budget plans it), the scalars on the host: the `bases
        /// streamed` column, beside the resident one.
        #[arg(long)]
        streamed_chunk_points: Option<usize>,
        /// With `--streamed-chunk-points`, also time this many streamed MSMs (other scalars
        /// each) run together, over the same bases (each chunk uploaded once for all) and
        /// over different ones (their chunks in turn), against the same MSMs one after
        /// another.
        #[arg(long, requires = "streamed_chunk_points", value_parser = clap::value_parser!(u32).range(2..=8))]
        together: Option<u32>,
        /// With `--together`, job k's scalars drawn as the k-th of these mixes (cycled;
        /// default: `--scalars`): `uniform,porep` is a proof's H MSM beside its L MSM.
        #[arg(long, requires = "together", value_delimiter = ',')]
        together_scalars: Vec<ScalarMix>,
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
    /// Prime-order subgroup checks of curve points, as a parameter file's first read runs
    /// them (uploaded from host memory, on the GPU), beside blstrs' `is_torsion_free` on
    /// every core; one point outside the subgroup planted, both answers compared.
    Subgroup {
        /// `g1` or `g2`.
        #[arg(long, default_value = "g1")]
        curve: String,
        /// log2 of the number of points; a comma list runs several sizes.
        #[arg(long, value_delimiter = ',', default_value = "16")]
        log_n: Vec<u32>,
        /// Timed GPU runs per size, after one warm-up; the fastest counts.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Wide-multiply path (`portable` or `int64`); default: the adapter's fastest.
        #[arg(long)]
        path: Option<String>,
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
    /// Whole proofs of the Filecoin-like circuit with random parameters, stage by stage,
    /// beside bellperson's CPU prover (batch 1) and byte-compared.
    Prove {
        /// log2 of the domain (the circuit has 2^N - 1 constraints); a comma list runs several.
        #[arg(long, value_delimiter = ',', default_value = "16")]
        log_n: Vec<u32>,
        /// The circuit's aux values: `half-bits` (half random bits, half full width) or
        /// `porep` (the real PoRep partition's mix: 51% zeros, 47% ones, under 2% full
        /// width, a quarter of the aux in the B query); a comma list runs each, each its own
        /// circuit and parameters.
        #[arg(long, value_delimiter = ',', default_value = "half-bits")]
        aux_mix: Vec<AuxMix>,
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
        /// Whether plans may run a proof's G1 MSMs two at a time where their bases stream
        /// (`on`, the default, or `off`); `on,off` runs each, in one process.
        #[arg(long, value_delimiter = ',', default_value = "on", value_parser = on_off)]
        g1_together: Vec<bool>,
        /// Spread each batch over the best N adapters of the selection.
        #[arg(long, default_value_t = 1)]
        gpus: usize,
        /// How circuits are synthesized: `full` (every linear combination built and
        /// evaluated) or `recorded` (the matrices recorded once, then each proof runs the
        /// witness alone and the products where the engine runs); a comma list runs each.
        #[arg(long, value_delimiter = ',', default_value = "full")]
        synthesis: Vec<bench_prove::SynthesisPath>,
        /// Device memory each engine may use, in MiB; a comma list runs each (one process:
        /// the parameters and the recorded system are made once), `0` the device's default.
        #[arg(long, value_delimiter = ',', default_value = "0", value_name = "MIB")]
        vram_budget_mib: Vec<u64>,
    },
}

/// `on` or `off`.
fn on_off(value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{other:?}: expected on or off")),
    }
}
