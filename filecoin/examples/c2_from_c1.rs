//! A storage provider's C2 through the library: a C1 output in, the proof that
//! filecoin-proofs' `verify_seal` accepts out.
//!
//! ```sh
//! cargo run --release -p wgpu-groth16-filecoin --example c2_from_c1 -- \
//!     C1_FILE MINER_ID SECTOR_ID PROOF_FILE
//! ```
//!
//! The parameters are read from `$FIL_PROOFS_PARAMETER_CACHE` (never downloaded); the
//! `wgpu-groth16-filecoin c2` command does the same with options, a progress display and
//! JSON output.

use std::path::PathBuf;

use wgpu_groth16::files::OutputPlan;
use wgpu_groth16::groth16::{ProverConfig, ProverEngine};
use wgpu_groth16_filecoin::c1::{prover_id_of_miner, C1Output};
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::{seal_commit_phase2, SealCommit};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [c1_file, miner_id, sector_id, proof_file] = &args[..] else {
        return Err("usage: c2_from_c1 C1_FILE MINER_ID SECTOR_ID PROOF_FILE".into());
    };
    let c1 = C1Output::read(&PathBuf::from(c1_file))?;
    let sector_id = c1.sector_id(Some(sector_id.parse()?))?;
    let commit = SealCommit::new(c1.phase1, prover_id_of_miner(miner_id.parse()?), sector_id)?;

    // Checked before the work: a proof file that cannot be written fails now, not after it.
    let mut plan = OutputPlan::new();
    let proof_slot = plan.output("PROOF_FILE", &PathBuf::from(proof_file));
    let mut files = plan.reserve()?;

    // The best adapter, or the CPU when BELLMAN_NO_GPU is set or no adapter is usable.
    let engine = ProverEngine::open(&ProverConfig::default())?;
    println!("engine: {}", engine.describe());
    // The parameters load on a thread of their own while the partitions synthesize.
    let (prover, _) = ParamsFiles::seal(commit.registered_proof())?.prover(engine)?;
    // Returned only once verify_seal accepts it.
    let proof = seal_commit_phase2(&commit, &prover)?;
    files.write(proof_slot, |w| w.write_all(&proof))?;
    files.commit()?;
    println!(
        "{} bytes, accepted by verify_seal: {proof_file}",
        proof.len()
    );
    Ok(())
}
