//! The daemon's prover: Filecoin SNARKs on one engine (a GPU, or the CPU without one), each
//! parameter set loaded once and kept until evicted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use filecoin_proofs_api::RegisteredSealProof;
use wgpu_groth16::groth16::{Prover, ProverEngine};
use wgpu_groth16_filecoin::c1::{prover_id_of_miner, C1Output};
use wgpu_groth16_filecoin::params::ParamsFiles;
use wgpu_groth16_filecoin::{seal_commit_phase2, SealCommit};

use crate::pb::{ProofKind, SubmitProofRequest};
use crate::scheduler::{Backend, Lane, LoadedSrs, Proved};

/// The seal proofs whose parameters a circuit id names: Curio's "porep-32g" and the like.
/// The proof versions of one sector size share their parameters; the newest is used.
const POREP_CIRCUITS: [(&str, RegisteredSealProof); 5] = [
    ("porep-2k", RegisteredSealProof::StackedDrg2KiBV1_1),
    ("porep-8m", RegisteredSealProof::StackedDrg8MiBV1_1),
    ("porep-512m", RegisteredSealProof::StackedDrg512MiBV1_1),
    ("porep-32g", RegisteredSealProof::StackedDrg32GiBV1_1),
    ("porep-64g", RegisteredSealProof::StackedDrg64GiBV1_1),
];

fn porep_circuit_id(sector_size: u64) -> Option<&'static str> {
    POREP_CIRCUITS
        .iter()
        .find(|(_, proof)| u64::from(proof.sector_size()) == sector_size)
        .map(|(id, _)| *id)
}

fn porep_proof(circuit_id: &str) -> Result<RegisteredSealProof, String> {
    POREP_CIRCUITS
        .iter()
        .find(|(id, _)| *id == circuit_id)
        .map(|(_, proof)| *proof)
        .ok_or_else(|| {
            format!(
                "unknown circuit id {circuit_id:?} (this daemon proves {})",
                POREP_CIRCUITS.map(|(id, _)| id).join(", ")
            )
        })
}

struct Resident {
    prover: Arc<Prover>,
    size_bytes: u64,
}

pub struct FilecoinBackend {
    engine: Arc<ProverEngine>,
    resident: Mutex<HashMap<String, Arc<Resident>>>,
    /// One parameter load at a time: two jobs of a new kind must not load it twice.
    loading: Mutex<()>,
}

impl FilecoinBackend {
    pub fn new(engine: Arc<ProverEngine>) -> Self {
        FilecoinBackend {
            engine,
            resident: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
        }
    }

    /// The prover of `circuit_id`, loading its parameters if they are not resident; and the
    /// time the load took (zero if they were).
    fn prover(&self, circuit_id: &str) -> Result<(Arc<Resident>, bool, Duration), String> {
        let resident = |this: &Self| {
            this.resident
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(circuit_id)
                .cloned()
        };
        if let Some(kept) = resident(self) {
            return Ok((kept, true, Duration::ZERO));
        }
        let _one_load = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = resident(self) {
            return Ok((kept, true, Duration::ZERO));
        }
        let start = Instant::now();
        let files = ParamsFiles::seal(porep_proof(circuit_id)?).map_err(|e| e.to_string())?;
        let (prover, _) = files
            .prover(self.engine.clone(), None)
            .map_err(|e| format!("{circuit_id}: {e}"))?;
        // The prover loads in the background; a resident set is a loaded one.
        prover
            .params()
            .map_err(|e| format!("{circuit_id}: {}", files.params_error(e)))?;
        let size_bytes = std::fs::metadata(&files.params).map_or(0, |m| m.len());
        let kept = Arc::new(Resident {
            prover: Arc::new(prover),
            size_bytes,
        });
        self.resident
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(circuit_id.to_string(), kept.clone());
        log::info!("{circuit_id}: parameters loaded in {:.2?}", start.elapsed());
        Ok((kept, false, start.elapsed()))
    }

    fn prove_porep(
        &self,
        request: &SubmitProofRequest,
        cancelled: &AtomicBool,
    ) -> Result<Proved, String> {
        let c1 = C1Output::from_json(&request.vanilla_proof, "vanilla_proof")
            .map_err(|e| e.to_string())?;
        let given = (request.sector_number != 0).then_some(request.sector_number);
        let sector_id = c1.sector_id(given).map_err(|e| e.to_string())?;
        let commit = SealCommit::new(c1.phase1, prover_id_of_miner(request.miner_id), sector_id)
            .map_err(|e| e.to_string())?;
        let sector_size = u64::from(commit.registered_proof().sector_size());
        if request.sector_size != 0 && request.sector_size != sector_size {
            return Err(format!(
                "sector_size {} but the C1 output is of a {sector_size}-byte sector",
                request.sector_size
            ));
        }
        let circuit_id = porep_circuit_id(sector_size)
            .ok_or_else(|| format!("no parameters for {sector_size}-byte sectors"))?;
        let (resident, _, srs_load) = self.prover(circuit_id)?;
        if cancelled.load(Ordering::SeqCst) {
            return Err("cancelled".into());
        }
        let proof = seal_commit_phase2(&commit, &resident.prover).map_err(|e| e.to_string())?;
        Ok(Proved {
            proof,
            srs_load,
            ..Default::default()
        })
    }
}

impl Backend for FilecoinBackend {
    fn lanes(&self) -> Vec<Lane> {
        vec![Lane {
            name: self.engine.describe(),
            vram_total_bytes: 0,
        }]
    }

    fn prove(
        &self,
        request: &SubmitProofRequest,
        _lane: usize,
        cancelled: &AtomicBool,
    ) -> Result<Proved, String> {
        match ProofKind::try_from(request.proof_kind) {
            Ok(ProofKind::PorepSealCommit) => self.prove_porep(request, cancelled),
            Ok(kind) => Err(format!(
                "{} is not proved by this daemon yet (POREP_SEAL_COMMIT is)",
                kind.as_str_name()
            )),
            Err(_) => Err(format!("unknown proof kind {}", request.proof_kind)),
        }
    }

    fn preload(&self, circuit_id: &str) -> Result<(bool, Duration), String> {
        let (_, already, took) = self.prover(circuit_id)?;
        Ok((already, took))
    }

    fn evict(&self, circuit_id: &str) -> Result<(bool, u64), String> {
        porep_proof(circuit_id)?;
        let removed = self
            .resident
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(circuit_id);
        Ok(removed.map_or((false, 0), |r| (true, r.size_bytes)))
    }

    fn loaded(&self) -> Vec<LoadedSrs> {
        let mut loaded: Vec<LoadedSrs> = self
            .resident
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, r)| LoadedSrs {
                circuit_id: id.clone(),
                size_bytes: r.size_bytes,
            })
            .collect();
        loaded.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        loaded
    }
}
